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


def test_delay_wgrad_is_chosen_per_plan_only_beside_the_overlap_and_where_faster(space, qwen):
    """Megatron-Core's --delay-wgrad-compute needs the EP overlap (transformer_config.py); the search keeps it on a
    plan only where the delayed step is shorter, and prices every such plan as ``transformer`` does."""
    k = space.knobs
    delayed = np.flatnonzero(k["delay_wgrad"] == 1)
    assert len(delayed) > 0
    assert np.all(k["overlap_ep"][delayed] == 1) and np.all(k["ep"][delayed] > 1)
    rng = np.random.default_rng(0)
    for i in rng.choice(delayed, size=min(6, len(delayed)), replace=False):
        plan = SE.plan_of(k, int(i), space.base, 1024, ladder=space.ladder)
        assert plan.delay_wgrad and "+delay-wgrad" in SE._plan_text(plan)
        on = predict(qwen, plan, H100).step_time.to("s").magnitude
        off = predict(qwen, dataclasses.replace(plan, delay_wgrad=False), H100).step_time.to("s").magnitude
        assert on == pytest.approx(space.out["step_time"][i], rel=1e-9) and on < off
    # an overlapped plan left undelayed is not slower than its delayed copy would be, wherever it fits
    undelayed = np.flatnonzero((k["overlap_ep"] == 1) & (k["delay_wgrad"] == 0) & space.fits)
    for i in rng.choice(undelayed, size=min(6, len(undelayed)), replace=False):
        plan = SE.plan_of(k, int(i), space.base, 1024, ladder=space.ladder)
        on = predict(qwen, dataclasses.replace(plan, delay_wgrad=True), H100).step_time.to("s").magnitude
        assert space.out["step_time"][i] <= on * (1 + 1e-9)


def test_a_stated_delay_wgrad_is_kept_on_every_overlapped_plan(qwen):
    base = dataclasses.replace(SE.default_base("megatron-core"), overlap_ep=1.0, delay_wgrad=True)
    sp = SE.evaluate_space(qwen, H100, 16, 1024, framework="megatron-core", base=base,
                           stated=frozenset({"overlap_ep", "delay_wgrad"}))
    assert "delay_wgrad" not in sp.knobs
    i = int(np.flatnonzero(sp.fits & (sp.knobs["ep"] > 1))[0])
    plan = SE.plan_of(sp.knobs, i, sp.base, 1024, ladder=sp.ladder)
    assert plan.delay_wgrad
    assert predict(qwen, plan, H100).step_time.to("s").magnitude == pytest.approx(sp.out["step_time"][i], rel=1e-9)


def test_pricing_many_plans_reports_progress_on_stderr(qwen, monkeypatch, capsys):
    """The search's pricing pass counts its plans on stderr (base/progress.py; shown once it lasts DELAY_S, here 0)."""
    from roofline.base import progress
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    sp = SE.evaluate_space(qwen, H100, 16, 1024, framework="megatron-core")
    err = capsys.readouterr().err
    from roofline.model.predict import fits as fits_memory
    import re
    sized = [int(t) for t in re.findall(r"search: sizing plans[^:]*: (\d+)/\1 \(100 %\)", err)]
    assert sum(sized) == sp.valid and len(sized) <= 2     # every plan's memory once (the plans added by the search
    #                                                        after the first sizing in a second bar), then the time of
    room = int(fits_memory(sp.out["memory"], sp.out["mem_reserve"], H100, sp.memory_margin).sum())  # those that fit
    assert 0 < room < sp.valid and f"search: pricing plans that fit: {room}/{room} (100 %)" in err
