"""Overlap is not free (issue 17): compute beside a running communication kernel loses the SMs the kernel holds.

The physics (comm.exposed): a collective of T seconds holding a fraction f of the SMs beside W seconds of compute;
the compute runs at (1 - f) of its rate while the collective runs. If the slowed compute still outlasts it, the pair
ends at W + f T; else the collective ends last, at T. The tests below derive those numbers by hand and check the
properties the model must keep: never slower than not overlapping, never negative, more overlap never costs more.
"""
from pathlib import Path

import pytest
import sympy as sp
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.base.paths import PACKAGE
from roofline.spec import hardware
from roofline.spec.config import Model, Plan
from roofline.model.formulas import comm as CM
from roofline.model.formulas import symbols as S
from roofline.model.predict import evaluate, inputs

OVERLAP = yaml.safe_load((PACKAGE / "spec" / "hardware" / "defaults.yaml").read_text())["overlap"]


def _exposed(t_comm, t_window, overlap, sms, n_comm=16):
    share = CM.interference(sp.Float(n_comm))
    e = CM.exposed(sp.Float(t_comm), sp.Float(t_window), sp.Float(overlap), share)
    return float(e.xreplace({S.sms: sp.Integer(sms)}))


def _simulate(t_comm, t_window, f):
    """The pair's end time, stepping time: compute progresses at (1 - f) while the collective runs, 1 after."""
    dt = min(t_comm, t_window) / 20000 if min(t_comm, t_window) > 0 else 1e-9
    t, work = 0.0, 0.0
    while work < t_window:
        work += dt * ((1 - f) if t < t_comm else 1.0)
        t += dt
    return max(t, t_comm)


def test_by_hand_on_an_a100():
    # 2 ms of reduce-scatter beside 5 ms of backward on an A100 (108 SMs), 16 NCCL channels = 16 thread blocks: the
    # backward runs at 92/108 of its rate for 2 ms, losing 2 x 16/108 = 0.296 ms of work it does afterwards
    assert _exposed(2e-3, 5e-3, 1.0, 108) == pytest.approx(2e-3 * 16 / 108, rel=1e-12)
    # 10 ms beside 4 ms: the slowed backward (4 / (92/108) = 4.70 ms) ends inside the collective; 6 ms stay exposed
    assert _exposed(10e-3, 4e-3, 1.0, 108) == pytest.approx(6e-3, rel=1e-12)
    # 4.5 ms beside 4 ms: the collective ends first (4.5 < 4.70): 4 + 16/108 x 4.5 = 4.667 ms, 0.667 ms exposed
    assert _exposed(4.5e-3, 4e-3, 1.0, 108) == pytest.approx(4.5e-3 * 16 / 108, rel=1e-12)
    # half the traffic may overlap (the comparison scaled by it, as before the interference term)
    assert _exposed(10e-3, 4e-3, 0.5, 108) == pytest.approx(5e-3 + 0.5 * 6e-3, rel=1e-12)


@pytest.mark.parametrize("t_comm,t_window,f", [(2.0, 5.0, 0.15), (10.0, 4.0, 0.15), (4.5, 4.0, 0.15), (3.0, 3.0, 0.5)])
def test_the_closed_form_is_the_simulated_pair(t_comm, t_window, f):
    n_sm = 1000
    end = t_window + _exposed(t_comm, t_window, 1.0, n_sm, f * n_sm)
    assert end == pytest.approx(_simulate(t_comm, t_window, f), rel=1e-3)


def test_no_sm_count_no_interference():
    assert _exposed(2e-3, 5e-3, 1.0, 1) == 0.0           # a profile without sm_count (n_SM = 1)


@settings(max_examples=300, deadline=None)
@given(t_comm=st.floats(0, 1), t_window=st.floats(0, 1), ov=st.floats(0, 1), sms=st.integers(1, 400),
       n_comm=st.integers(1, 64))
def test_overlapping_is_never_slower_than_not_and_never_negative(t_comm, t_window, ov, sms, n_comm):
    e = _exposed(t_comm, t_window, ov, sms, n_comm)
    assert -1e-15 <= e <= _exposed(t_comm, t_window, 0.0, sms, n_comm) + 1e-15
    assert e <= t_comm + 1e-15
    # more overlap never costs more, and a kernel holding more SMs never costs less
    assert _exposed(t_comm, t_window, min(1.0, ov + 0.1), sms, n_comm) <= e + 1e-15
    if sms > n_comm + 4:
        assert _exposed(t_comm, t_window, ov, sms, n_comm + 4) >= e - 1e-15


def test_the_defaults_are_the_sourced_counts():
    # hardware/defaults.yaml overlap, each count sourced in its comment
    assert S.SYMBOLS["nccl_sms"].default == OVERLAP["nccl_sms"] == 24
    assert S.SYMBOLS["nccl_sms_inter"].default == OVERLAP["nccl_sms_inter"] == 16
    assert S.SYMBOLS["ub_sms"].default == OVERLAP["ub_sms"] == 16
    assert S.SYMBOLS["ub_ring_sms"].default == OVERLAP["ub_ring_sms"] == 1


# ---- the whole model: a plan that overlaps is never slower than the same plan with its collectives exposed ------
A100 = hardware.load("a100-sxm4-80gb")
H100 = hardware.load("h100-sxm")


@st.composite
def plans(draw):
    tp = draw(st.sampled_from([1, 2, 4, 8, 16]))
    dp = draw(st.sampled_from([1, 2, 8, 32]))
    cp = draw(st.sampled_from([1, 2]))
    pp = draw(st.sampled_from([1, 2]))
    moe = draw(st.booleans())
    model = Model(n_layers=4, d_model=draw(st.sampled_from([1024, 4096, 8192])), n_heads=32, vocab=32000,
                  seq_len=draw(st.sampled_from([2048, 8192])), mlp="swiglu",
                  n_experts=8 if moe else 1, top_k=2 if moe else 1)
    ep = 2 if moe and dp * cp >= 2 else 1
    plan = Plan(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, micro_batch=1, global_batch=dp * 4,
                sequence_parallel=tp > 1 and (moe or draw(st.booleans())),
                recompute=draw(st.sampled_from(["none", "full"])),
                sharding=draw(st.sampled_from(["none", "distributed", "zero3"])))
    ov = {k: draw(st.floats(0, 1)) for k in ("ov_dp", "ov_ag", "ov_tp", "ov_cp", "ov_ep")}
    return model, plan, draw(st.sampled_from([A100, H100])), ov


@settings(max_examples=40, deadline=None)
@given(plans())
def test_a_plan_that_overlaps_is_never_slower_than_without_overlap(case):
    model, plan, hw, ov = case
    x = inputs(model, plan, hw)
    x.update(ov)
    none = dict(x, **{k: 0.0 for k in ov})
    t_ov, t_none = float(evaluate(x)["step_time"]), float(evaluate(none)["step_time"])
    assert t_ov <= t_none * (1 + 1e-12)
    # and the interference never makes a term negative
    out = evaluate(x)
    for k in ("t_tp_comm", "t_cp_comm", "t_ep_comm", "t_dp_comm"):
        assert float(out[k]) >= -1e-15


def test_hidden_dp_reduce_costs_its_sm_share_on_a_real_plan():
    """A 4-layer 4096-wide model, dp 8 on one H100 node (132 SMs), no optimizer sharding: the gradient all-reduce
    hides behind the last micro-batch's backward (0 exposed without an SM count) and costs 24/132 of its own time
    (an intra-node NCCL collective's 24 channels) with it."""
    model = Model(n_layers=4, d_model=4096, n_heads=32, vocab=32000, seq_len=4096, mlp="swiglu")
    plan = Plan(dp=8, micro_batch=1, global_batch=64, sharding="none")
    x = dict(inputs(model, plan, H100), ov_dp=1.0)
    raw = float(evaluate(dict(x, ov_dp=0.0))["t_dp_comm"])
    assert raw > 0
    assert float(evaluate(dict(x, sms=1.0))["t_dp_comm"]) == pytest.approx(0.0, abs=1e-12)
    assert float(evaluate(x)["t_dp_comm"]) == pytest.approx(24 / 132 * raw, rel=1e-9)


def test_partial_tp_overlap_never_lengthens_a_host_bound_step():
    """Found by hypothesis: an eager MoE layer (the host waits on the GPU once per layer, so forward and backward each
    take max(GPU, host)) with a host-bound forward. Choosing userbuffers or async by the layer's total exposure moved
    exposed TP time into the GPU-bound backward and made ov_tp 0.5 slower than no overlap; each pass now keeps
    whichever leaves it less exposed."""
    model = Model(n_layers=4, d_model=1024, n_heads=32, vocab=32000, seq_len=8192, mlp="swiglu", n_experts=8, top_k=2)
    plan = Plan(tp=2, pp=1, dp=1, micro_batch=1, global_batch=4, sequence_parallel=True, recompute="none",
                sharding="none")
    x = dict(inputs(model, plan, H100), ov_dp=0.0, ov_ag=0.0, ov_cp=0.0, ov_ep=0.0)
    steps = [float(evaluate(dict(x, ov_tp=o))["step_time"]) for o in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(steps, steps[1:]))
    assert steps[-1] < steps[0]


def _dp(model, plan, hw, **subs):
    x = dict(inputs(model, plan, hw), **subs)
    out = evaluate(x)
    return float(out["t_dp_comm"]), float(evaluate(dict(x, ov_dp=0.0, ov_ag=0.0))["t_dp_comm"])


def test_interleaving_hides_the_dp_traffic_but_one_chunk():
    """Interleaved 1F1B reduces each model chunk's gradients when that chunk's last backward ends (Megatron-Core
    schedules.py grad_sync_func per chunk) and gathers each chunk's parameters before its first forward: all but one
    chunk's traffic hides behind the other chunks' passes ("exposes only one DP communication chunk", NeMo's
    communication-overlap docs), and that chunk hides behind its own pass. Nemotron-4 340B's shape on 128 B200
    (tp 8, pp 4, dp 4, 8 micro-batches), without SM interference (sms 1): at v = 12 what stays exposed is the last
    chunk's traffic beyond its pass, (T - t) / v; never more than without interleaving; enough compute per
    micro-batch hides it all."""
    model = Model(n_layers=96, d_model=18432, n_heads=96, n_kv_heads=8, ffn_hidden=73728, vocab=256000, seq_len=4096,
                  mlp="squared_relu")
    b200 = hardware.load("b200")

    def plan(v, mb):
        return Plan(tp=8, pp=4, dp=4, interleave=v, micro_batch=mb, global_batch=32 * mb, sequence_parallel=True,
                    sharding="distributed")

    for mb in (1, 4):
        e1, total = _dp(model, plan(1, mb), b200, sms=1.0, ov_dp=1.0, ov_ag=1.0)
        e4, _ = _dp(model, plan(4, mb), b200, sms=1.0, ov_dp=1.0, ov_ag=1.0)
        e12, _ = _dp(model, plan(12, mb), b200, sms=1.0, ov_dp=1.0, ov_ag=1.0)
        assert total > 0 and e12 <= e4 * (1 + 1e-12) and e4 <= e1 * (1 + 1e-12) and e12 < e1
        if mb == 4:                                     # compute enough to hide all but the last chunk
            assert e12 <= total / 12 * (1 + 1e-12)
    assert _dp(model, plan(12, 8), b200, sms=1.0, ov_dp=1.0, ov_ag=1.0)[0] == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([1, 2, 3, 4, 6, 12]), st.sampled_from([1, 2, 4]), st.sampled_from([2, 4, 8, 16, 32]),
       st.floats(0, 1), st.floats(0, 1))
def test_interleaved_dp_exposure_stays_between_one_chunk_and_all_of_it(v, pp, m, ov_dp, ov_ag):
    model = Model(n_layers=48, d_model=4096, n_heads=32, vocab=32000, seq_len=4096, mlp="swiglu")
    plan = Plan(tp=4, pp=pp, dp=4, interleave=v if pp > 1 else 1, micro_batch=1, global_batch=4 * m,
                sequence_parallel=True, sharding="distributed")
    exposed, total = _dp(model, plan, H100, ov_dp=ov_dp, ov_ag=ov_ag)
    assert -1e-15 <= exposed <= total * (1 + 1e-12)
