"""DualPipeV, DeepSeek's V-shaped DualPipe (deepseek-ai/DualPipe dualpipev.py; torch.distributed.pipelining
ScheduleDualPipeV, torchtitan's "DualPipeV" schedule): its bubble and memory against the README's table, and the rules
of who can run it."""
from __future__ import annotations

import dataclasses

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


def _raw(plan: Plan, model: Model = DENSE, framework: str = "torchtitan", gpu: str = "h100-sxm"):
    return predict(resolve(model, plan, gpu, framework)).raw


def _plan(**kw) -> Plan:
    base = dict(tp=1, pp=4, dp=2, micro_batch=1, global_batch=64, interleave=2, schedule="dualpipev",
                recompute="none", sharding="fsdp")
    return Plan(**{**base, **kw})


def test_bubble_is_the_readme_formula():
    """Bubble (PP/2 - 1)(F&B + B - 3W) for PP = 2p stages (deepseek-ai/DualPipe README), F&B = F + B: per rank of two
    stages (p - 1)(t + B - 3W)/2, t the rank's micro-batch slot, B its backward, W its weight-gradient GEMMs. With no
    recomputation and no exposed layer communication (tp = cp = ep = 1) B is the backward compute alone."""
    r = _raw(_plan())
    m, p = r["micro_batches"], 4
    t, w = r["t_microbatch_stage"], r["t_stage_wgrad"]
    b = r["t_backward"] / m
    assert 0 < w < b / 2 + 1e-15                       # the wgrad kernels: half the GEMMs' backward
    assert r["t_pp_bubble"] == pytest.approx((p - 1) * (t + b - 3 * w) / 2, rel=1e-12)
    assert r["pp_bubble_share"] == pytest.approx(r["t_pp_bubble"] / (m * t + r["t_pp_bubble"]), rel=1e-12)


def test_same_compute_as_1f1b_smaller_bubble():
    """Each rank runs the same layers per micro-batch as 1F1B over p stages (two chunks of l/(2p)); only the bubble
    and the edges' placement differ: the V puts the embedding and the LM head on rank 0."""
    v = _raw(_plan())
    one = _raw(_plan(interleave=1, schedule="1f1b"))
    assert v["t_forward"] > one["t_forward"]           # rank 0 runs both edges (1F1B: the heavier one)
    assert v["t_forward"] < 1.5 * one["t_forward"]     # ... and the same layers
    assert v["t_pp_bubble"] < one["t_pp_bubble"]


@st.composite
def plans(draw):
    pp = draw(st.sampled_from([2, 4, 8]))
    m = draw(st.sampled_from([2, 3, 4])) * pp
    return dict(tp=draw(st.sampled_from([1, 2, 4])), pp=pp, dp=1, micro_batch=draw(st.sampled_from([1, 2])),
                recompute=draw(st.sampled_from(["none", "full", "op"])), mbs=m)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_bubble_between_zero_and_1f1b(kw):
    """0 <= (p-1)(t + B - 3W)/2 <= (p-1) t for every plan: B <= t and 0 <= W <= B/2 (the DualPipe table's bubble is
    never above 1F1B's (PP - 1)(F + B) on the same ranks)."""
    m = kw.pop("mbs")
    plan = _plan(**kw, global_batch=m * kw["micro_batch"])
    r = _raw(plan)
    assert 0 <= r["t_pp_bubble"] <= (plan.pp - 1) * r["t_microbatch_stage"] * (1 + 1e-12)
    assert r["step_time"] >= r["micro_batches"] * r["t_microbatch_stage"]


def test_memory_two_stages_per_rank():
    """Rank 0 holds (2p + 1)/2 micro-batches of its l/p layers in flight ("Activation Per Device PP+1" for PP = 2p
    stages of l/(2p) layers) and both the embedding and the untied LM head; the interleaved 1F1B with v = 2 holds
    p (1 + (p-1)/(2p)) and the embedding only."""
    p = 4
    v, inter = _raw(_plan()), _raw(_plan(schedule="interleaved"))
    table = DENSE.vocab * DENSE.d_model                 # V_pad = V here (a multiple of 128)
    assert v["params_rank"] - inter["params_rank"] == table
    # the activations of the layers scale with the in-flight count; the head's logits and input are rank 0's own
    per_layers_v = v["mem_activations"] - v["mem_logits"]
    per_layers_i = inter["mem_activations"]
    ratio = ((2 * p + 1) / 2) / (p * (1 + (p - 1) / (2 * p)))
    assert per_layers_v / per_layers_i == pytest.approx(ratio, rel=0.02)


def test_who_runs_it():
    """torchtitan runs DualPipeV (torch.distributed.pipelining ScheduleDualPipeV); Megatron-Core has no such schedule:
    one line naming the stack; the schedule's own rules name the constraint and the value."""
    with pytest.raises(InputError, match="stack megatron-core cannot run the dualpipev pipeline schedule"):
        resolve(DENSE, _plan(sharding="distributed"), "h100-sxm", "megatron-core")
    with pytest.raises(InputError, match="needs pp > 1 and interleave 2, got pp 4 and interleave 4"):
        resolve(DENSE, _plan(interleave=4), "h100-sxm", "torchtitan")
    with pytest.raises(InputError, match=r"at least 2 x pp micro-batches per step \(4 < 2 x 4"):
        resolve(DENSE, _plan(global_batch=8), "h100-sxm", "torchtitan")


def test_cli_and_search(capsys):
    """--schedule dualpipev on the command line: the table says how the bubble is counted; a pinned search lists
    DualPipeV plans only (two chunks per rank); the timeline refuses it in one line, exit 2."""
    args = ["--model", "llama3-8b", "--gpu", "h100-sxm", "--framework", "torchtitan", "--schedule", "dualpipev"]
    assert main(["transformer", *args, "--pp", "4", "--interleave", "2", "--dp", "2", "--global-batch", "64"]) == 0
    out = capsys.readouterr().out
    assert "dualpipev v=2" in out and "DualPipeV: (p-1)(t + B - 3W)/2" in out
    assert main(["search", *args, "--gpus", "16", "--global-batch", "128", "--top", "5", "--pp", "4"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.split()[:1] and ln.split()[0].isdigit() and "tp=" in ln]
    assert len(rows) == 5 and all("pp=4" in ln and "v=2 dualpipev" in ln for ln in rows)
    assert main(["search", *args[:-4], "--schedule", "dualpipev", "--gpus", "16", "--global-batch", "128"]) == 2
    assert "stack megatron-core cannot run the dualpipev pipeline schedule" in capsys.readouterr().err
    rc = main(["transformer", *args, "--pp", "4", "--interleave", "2", "--dp", "2", "--global-batch", "64",
               "--per-stage"])
    out = capsys.readouterr()
    err = out.err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "DualPipeV" in err[0] and out.out == ""


def test_other_schedules_unchanged():
    """A 1F1B / interleaved plan prices as it did: dualpipev = 0 removes every new term (the textbook bubble fraction
    is the slot count's (p-1)/(v m + p - 1); its time the fill and drain through the other stages)."""
    for kw in (dict(interleave=1, schedule="1f1b"), dict(interleave=2, schedule="interleaved")):
        r = _raw(_plan(**kw))
        m, v = r["micro_batches"], kw["interleave"]
        assert r["pp_bubble"] == pytest.approx(3 / (v * m + 3), rel=1e-12)
        heavy = max(r["t_embed_fwd"] + r["t_embed_bwd"], r["t_head_fwd"] + r["t_head_bwd"])
        light = min(r["t_embed_fwd"] + r["t_embed_bwd"], r["t_head_fwd"] + r["t_head_bwd"])
        other = r["t_microbatch_stage"] - heavy - r["t_edge_host"]     # a stage without the heavier edge (Alpa eq. 2)
        assert r["t_pp_bubble"] == pytest.approx(3 / v * other + light, rel=1e-12)
        share = r["t_pp_bubble"] / (m * r["t_microbatch_stage"] + r["t_pp_bubble"])
        assert r["pp_bubble_share"] == pytest.approx(share, rel=1e-12)
        assert dataclasses.replace(_plan(**kw)).schedule == kw["schedule"]
