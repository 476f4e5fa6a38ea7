"""Zero-bubble pipeline schedules (Qi et al. 2024, arXiv:2401.10241; sail-sg/zero-bubble-pipeline-parallelism): ZB1P's
bubble is 1F1B's less 2W per fill-and-drain slot (the DualPipe README's table: (PP-1)(F+B-2W) with B the whole
backward), ZB2P's less 3W and never negative, with 2p - 1 micro-batches in flight; who runs them."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline import InputError
from roofline.face.cli import main
from roofline.model.predict import predict
from roofline.spec.config import Model, Plan
from roofline.spec.resolve import resolve

DENSE = Model(name="dense", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, mlp="swiglu", norm="rmsnorm",
              vocab=128256, seq_len=4096, tied_embeddings=False, position="rope", biases=False)


def _raw(schedule: str, framework: str = "zero-bubble", **kw):
    base = dict(tp=1, pp=4, dp=2, micro_batch=1, global_batch=32, interleave=1, schedule=schedule, recompute="none")
    return predict(resolve(DENSE, Plan(**{**base, **kw}), "a100-sxm4-80gb", framework)).raw


def test_zb1p_bubble_is_1f1b_less_two_weight_gradients_per_slot():
    one, zb = _raw("1f1b"), _raw("zb1p")
    p, w = 4, zb["t_stage_wgrad"]
    assert w > 0
    assert zb["t_pp_bubble"] == pytest.approx(one["t_pp_bubble"] - 2 * (p - 1) * w, rel=1e-12)
    # the same work per micro-batch: only the bubble differs
    assert zb["step_time"] - zb["t_pp_bubble"] == pytest.approx(one["step_time"] - one["t_pp_bubble"], rel=1e-12)
    # the same activation memory as 1F1B (ZB-H1), ZB2P's larger (ZB-H2: 2p - 1 micro-batches)
    assert zb["mem_activations"] == pytest.approx(one["mem_activations"], rel=1e-12)
    two = _raw("zb2p")
    assert two["mem_activations"] > zb["mem_activations"]
    assert two["t_pp_bubble"] == pytest.approx(max(0.0, one["t_pp_bubble"] - 3 * (p - 1) * w), rel=1e-12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pp=st.sampled_from([2, 4, 8]), m_per=st.sampled_from([1, 2, 4]), tp=st.sampled_from([1, 2]),
       recompute=st.sampled_from(["none", "full", "selective"]))
def test_zero_bubble_never_slower_and_never_negative(pp, m_per, tp, recompute):
    kw = dict(pp=pp, tp=tp, dp=1, global_batch=pp * m_per, recompute=recompute)
    one, zb1, zb2 = (_raw(s, **kw) for s in ("1f1b", "zb1p", "zb2p"))
    assert 0 <= zb2["t_pp_bubble"] <= zb1["t_pp_bubble"] <= one["t_pp_bubble"] + 1e-15
    assert zb2["step_time"] <= zb1["step_time"] <= one["step_time"] + 1e-15


def test_who_runs_it():
    with pytest.raises(InputError, match="cannot run the zb1p pipeline schedule"):
        _raw("zb1p", framework="megatron-core")
    with pytest.raises(InputError, match="needs pp > 1 and interleave 1"):
        _raw("zb1p", interleave=2)
    # the zero-bubble stack runs ZB1P when a pipelined plan states no schedule
    spec = resolve(DENSE, {"tp": 1, "pp": 4, "dp": 2, "global_batch": 32}, "a100-sxm4-80gb", "zero-bubble")
    assert spec.plan.schedule == "zb1p" and spec.plan.interleave == 1
    assert resolve(DENSE, {"tp": 1, "pp": 4, "dp": 2, "global_batch": 32}, "a100-sxm4-80gb",
                   "hai-llm@2024").plan.schedule == "1f1b"


def test_cli_says_the_schedule(capsys):
    main(["transformer", "--layers", "32", "--d-model", "4096", "--heads", "32", "--seq-len", "4096", "--global-batch",
          "32", "--pp", "4", "--dp", "2", "--gpu", "a100-sxm4-80gb", "--framework", "zero-bubble"])
    out = capsys.readouterr().out
    assert "| zb1p |" in out and "ZB1P: (p-1)(t - 2W)" in out


def test_the_timeline_refuses_in_one_line(capsys):
    from roofline.views.timeline import replayable
    plan = resolve(DENSE, {"tp": 1, "pp": 4, "dp": 2, "global_batch": 32}, "a100-sxm4-80gb", "zero-bubble").plan
    with pytest.raises(InputError, match="ZB1P's backward split .* is not drawn"):
        replayable(plan)
