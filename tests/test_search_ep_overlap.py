"""The search tries Megatron-Core's EP overlap as a knob for an MoE model on a stack that runs it: every plan
without it, and again with it where Megatron-Core's conditions hold (transformer_config.py __post_init__); a pinned
--overlap-ep, a dense model or another stack leaves the knob out."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from roofline.model.predict import predict
from roofline.spec import hardware
from roofline.spec.config import module_set
from roofline.spec.resolve import resolve
from roofline.views import advice
from roofline.views import search as SE

H100 = hardware.load("h100-sxm")


@pytest.fixture(scope="module")
def qwen():
    return resolve("qwen3-30b-a3b", {"tp": 1, "dp": 16, "global_batch": 1024}, "h100-sxm", "megatron-core").model


@pytest.fixture(scope="module")
def space(qwen):
    return SE.evaluate_space(qwen, H100, 16, 1024, framework="megatron-core")


def test_overlap_plans_are_the_ones_megatron_core_runs(space, qwen):
    k = space.knobs
    on = k["overlap_ep"] == 1
    assert on.any() and (~on).any()
    for i in np.flatnonzero(on):
        plan = SE.plan_of(k, int(i), space.base, 1024, ladder=space.ladder)
        assert advice.ep_overlap_blockers(qwen, plan) == [] and plan.ep > 1, plan
    # every plan Megatron-Core can overlap is there both ways: as many overlapped rows as eligible plain rows
    plain = [SE.plan_of(k, int(i), space.base, 1024, ladder=space.ladder) for i in np.flatnonzero(~on)]
    eligible = sum(1 for p in plain if p.ep > 1 and not advice.ep_overlap_blockers(qwen, p))
    assert eligible == int(on.sum())
    # the full-recompute and the 'moe' module rows never carry the overlap
    for i in np.flatnonzero(on):
        p = SE.plan_of(k, int(i), space.base, 1024, ladder=space.ladder)
        assert p.recompute != "full" and "moe" not in module_set(p.recompute_modules)


def test_ranked_plans_are_priced_as_transformer_prices_them(space, qwen):
    cands = SE.rank(space, top=5)
    assert any(c.plan.overlap_ep == 1 for c in cands)
    for c in cands:
        assert predict(qwen, c.plan, H100).step_time.to("s").magnitude == pytest.approx(c.step_time_s, rel=1e-9)
        if c.plan.overlap_ep:
            assert "ep-overlap" in SE._plan_text(c.plan)
    # the overlap never makes a plan slower than the same plan without it (formulas/step.py ep_merged)
    best = cands[0].plan
    if best.overlap_ep:
        off = dataclasses.replace(best, overlap_ep=0.0)
        assert predict(qwen, off, H100).step_time >= predict(qwen, best, H100).step_time


def test_a_pinned_overlap_a_dense_model_or_another_stack_leaves_the_knob_out(qwen):
    pinned = SE.evaluate_space(qwen, H100, 16, 1024, framework="megatron-core", stated=frozenset({"overlap_ep"}))
    assert "overlap_ep" not in pinned.knobs
    assert not SE.searches_ep_overlap(qwen, None)                  # --framework any: research, knob as pinned
    from roofline.spec import stacks
    assert not SE.searches_ep_overlap(qwen, stacks.get("torchtitan"))
    llama = resolve("llama3-8b", {"tp": 1, "dp": 8, "global_batch": 64}, "h100-sxm", "megatron-core").model
    assert not SE.searches_ep_overlap(llama, stacks.get("megatron-core"))
