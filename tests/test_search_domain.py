"""The search says why its top plan's TP group leaves the NVLink domain (issue 17): the best plan that keeps TP inside
one domain, its gap, and the step components in which the two differ."""
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from roofline.spec import hardware, models
from roofline.views import search as SE
from roofline.views.space import evaluate_space


@pytest.fixture(scope="module")
def llama405_pp1():
    """Llama 3.1 405B on 16,384 H100s with pp and cp pinned to 1: the model's best plan takes TP 16 over two nodes."""
    hw = hardware.load("h100-sxm")
    m = SE.default_model(models.load("llama3.1-405b"), "megatron-core")
    space = evaluate_space(m, hw, 16384, 2048, base=SE.default_base("megatron-core"), pp=1, cp=1)
    return space, SE.rank(space, top=3)


def test_note_names_the_best_plan_inside_the_domain(llama405_pp1):
    space, cands = llama405_pp1
    d = space.hardware.gpus_per_node
    assert cands[0].plan.tp > d, "fixture no longer exercises a TP group across nodes"
    note = SE.domain_note(space, cands)
    assert note is not None and note.tp == cands[0].plan.tp and note.domain == d
    inside = note.inside
    assert inside is not None and inside.plan.tp <= d
    assert inside.step_time_s >= cands[0].step_time_s          # the top plan is the best of all, this one of a subset
    # no fitting plan with TP inside the domain is faster than the one the note names
    ok = space.fits & (space.knobs["tp"] <= d)
    assert inside.step_time_s == pytest.approx(float(space.out["step_time"][ok].min()), rel=1e-12)
    assert inside.slower_than_best == pytest.approx(inside.step_time_s / cands[0].step_time_s - 1)
    line = note.line()
    assert SE._plan_text(inside.plan) in line and f"TP group of {note.tp} spans" in line


def test_why_lists_the_largest_differences_of_the_two_breakdowns(llama405_pp1):
    from roofline.model.predict import predict

    space, cands = llama405_pp1
    note = SE.domain_note(space, cands, n_why=12)
    a = predict(space.model, note.inside.plan, space.hardware).to_dict()["breakdown_s"]
    b = predict(space.model, cands[0].plan, space.hardware).to_dict()["breakdown_s"]
    want = {k: a[k] - b[k] for k in a if abs(a[k] - b[k]) > 0.01 * cands[0].step_time_s}
    assert dict(note.why) == pytest.approx(want)
    assert [d for _, d in note.why] == sorted((d for _, d in note.why), reverse=True)
    # the breakdowns compared are those of the two plans the line names: each adds up to the plan's step time
    assert sum(a.values()) == pytest.approx(note.inside.step_time_s, rel=1e-6)
    assert sum(b.values()) == pytest.approx(cands[0].step_time_s, rel=1e-6)


def test_no_note_when_tp_stays_inside_the_domain(llama405_pp1):
    space, cands = llama405_pp1
    inside = SE.domain_note(space, cands).inside
    assert SE.domain_note(space, [inside]) is None
    assert SE.domain_note(space, []) is None
    # --tp pinned above the domain: the space holds no plan inside it, so there is nothing to compare (not "none fits")
    pinned = dataclasses.replace(space, knobs={**space.knobs, "tp": np.maximum(space.knobs["tp"], 16)})
    assert SE.domain_note(pinned, cands) is None
    # an NVL72 domain holds a TP group of 16: nothing to explain there
    nvl72 = SimpleNamespace(hardware=hardware.load("gb200"))
    assert SE.domain_note(nvl72, [SimpleNamespace(plan=SimpleNamespace(tp=16))]) is None


def test_no_plan_inside_fits_is_said(llama405_pp1):
    space, cands = llama405_pp1
    none_fit = dataclasses.replace(space, fits=space.fits & (space.knobs["tp"] > space.hardware.gpus_per_node))
    note = SE.domain_note(none_fit, cands)
    assert note.inside is None and note.why == ()
    assert note.line().endswith(f"no plan with tp <= {space.hardware.gpus_per_node} fits in memory")
    assert np.any(none_fit.fits)


def test_the_line_names_the_links_of_the_profile(llama405_pp1):
    """The domain's own link and the network, from the profile (not 'NVLink' everywhere); a one-GPU node (GH200)
    says so instead of a domain of 1."""
    space, cands = llama405_pp1
    note = SE.domain_note(space, cands)
    line = note.line()
    assert note.intra_kind == space.hardware.intra.kind and note.inter_kind == space.hardware.inter.kind
    assert f"{note.intra_kind} domains of 8 GPUs" in line and f"the {note.inter_kind} network" in line
    assert "saves tp comm" in line and "saves tp comm -" not in line       # a saving is a positive number of seconds
    one = dataclasses.replace(note, domain=1, tp=2)
    assert "spans 2 nodes of one GPU each" in one.line() and "domains of 1" not in one.line()


def test_the_inside_plan_carries_the_run_totals_of_the_ranked_plans(llama405_pp1):
    space, _ = llama405_pp1
    cands = SE.rank(space, top=1, tokens=15e12, gpu_hour_price=2.0)
    inside = SE.domain_note(space, cands, tokens=15e12, gpu_hour_price=2.0).inside
    assert inside.run_days > cands[0].run_days > 0 and inside.cost_usd > cands[0].cost_usd > 0


def test_cli_prints_the_note_and_json_carries_it(capsys):
    import json

    from roofline.face.cli import main

    argv = ["search", "--model", "llama3.1-405b", "--gpus", "16384", "--global-batch", "2048", "--gpu", "h100-sxm",
            "--top", "2", "--pp", "1", "--cp", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "top plan: its TP group of 16 spans 2 nvlink domains of 8 GPUs" in out
    assert main(argv + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)["tp_outside_nvlink_domain"]
    assert d["tp"] == 16 and d["domain_gpus"] == 8 and d["best_inside"]["plan"]["tp"] <= 8
