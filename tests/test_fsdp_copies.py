"""FSDP2's copies around its collectives (formulas/step.py fsdp_copies; plan fsdp_copies, per stack).

PyTorch FSDP2 (fully_shard) splits each all-gather's output into the unsharded parameters and concatenates the
gradients into each reduce-scatter's input on the compute stream: per micro-batch, two gathers and one reduce-scatter
of the stage's parameters (one of each per step under pipelining), each element read and written once.
"""
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.model.predict import evaluate, inputs, predict
from roofline.spec import hardware, stacks
from roofline.spec.config import Model, Plan

H100 = hardware.load("h100-sxm")
MODEL = Model(n_layers=8, d_model=2048, n_heads=16, vocab=32000, seq_len=2048, mlp="swiglu")


def _plan(**kw):
    base = dict(tp=1, pp=1, dp=8, micro_batch=1, global_batch=32, sharding="fsdp", grad_dtype="fp32",
                fsdp_copies=False)
    return Plan(**{**base, **kw})


def _step(plan):
    return predict(MODEL, plan, H100).step_time.to("s").magnitude


def test_the_copies_cost_their_bytes_at_the_memory_roofline():
    """Without pipelining: m micro-batches x P parameters x (2 gathers x (2 + 2) + 1 reduce x (2 + 4)) bytes, at the
    elementwise class's HBM efficiency, plus one fixed kernel time."""
    plan = _plan()
    on = replace(plan, fsdp_copies=True)
    x = inputs(MODEL, on, H100)
    out = evaluate(x)
    m = plan.global_batch // (plan.micro_batch * plan.dp)
    bytes_ = m * float(out["params_rank"]) * (2 * (2 + 2) + (2 + 4))
    want = bytes_ / (x["hbm_bw"] * x["mu_elem_fwd"]) + x["t0_elem_fwd"]
    assert _step(on) - _step(plan) == pytest.approx(want, rel=1e-6)


def test_under_pipelining_the_stage_is_copied_once_per_step():
    """torchtitan / OLMo-core keep the stage gathered under PP (reshard_after_forward False): one gather, one
    reduce-scatter per step, whatever the micro-batch count."""
    costs = []
    for gb in (16, 64):
        plan = _plan(pp=2, dp=4, global_batch=gb)
        costs.append(_step(replace(plan, fsdp_copies=True)) - _step(plan))
    assert costs[0] == pytest.approx(costs[1], rel=1e-6) and costs[0] > 0


@settings(max_examples=25, deadline=None)
@given(sharding=st.sampled_from(["none", "distributed", "zero2", "fsdp"]), m=st.integers(1, 6),
       grad=st.sampled_from(["bf16", "fp32"]))
def test_the_copies_only_cost_under_full_sharding_and_grow_with_micro_batches(sharding, m, grad):
    plan = _plan(sharding=sharding, global_batch=8 * m, grad_dtype=grad)
    extra = _step(replace(plan, fsdp_copies=True)) - _step(plan)
    if sharding != "fsdp":
        assert extra == pytest.approx(0.0, abs=1e-12)
    else:
        assert extra > 0
        more = replace(plan, global_batch=8 * (m + 1))
        assert _step(replace(more, fsdp_copies=True)) - _step(more) > extra


def test_the_fsdp2_stacks_copy_and_the_flat_buffer_stacks_do_not():
    for sid in ("torchtitan", "nemo-automodel", "olmo-core"):
        st_ = stacks.get(sid)
        assert st_.plan["fsdp_copies"] is True and "foreach_all_gather_copy_out" in st_.sources["fsdp_copies"]
    for sid in ("fsdp", "llm-foundry", "deepspeed-zero", "megatron-core"):
        assert not stacks.get(sid).plan.get("fsdp_copies", False), sid
