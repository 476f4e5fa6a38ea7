"""Megatron-Core's pipeline layer layout (roofline/spec/layout.py, Plan.pipeline_layout, formulas/step.py stated_layout)."""
import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from roofline.spec import hardware, layout, models
from roofline.spec.config import Model, Plan, check
from roofline.base.errors import InputError
from roofline.model.predict import evaluate, inputs, plan_inputs, predict
from roofline.views.validate import _pipeline_layout

HW = hardware.load("h100-sxm")
DSV3 = models.load("deepseek-v3")
DENSE = Model(name="dense", n_layers=32, d_model=2048, n_heads=16, vocab=32000, seq_len=2048, mlp="swiglu",
              ffn_hidden=5632, norm="rmsnorm", position="rope", biases=False, tied_embeddings=False)


# ---- the parser ------------------------------------------------------------------------------------------
def test_repeats_unroll_as_megatron_parses_them():
    # parse_str_to_list's docstring example: "Ettt|(tt|)*29,m|L" -> [[E,t,t,t]] + [[t,t]]*29 + [[m],[L]]
    st_ = layout.stages("Ettt|(tt|)*29,m|L")
    assert st_ == ["Ettt"] + ["tt"] * 29 + ["m", "L"]
    assert layout.stages("Et*4|(t*4|)*14tmL") == ["Etttt"] + ["tttt"] * 14 + ["tmL"]


def test_deepseek_v3_recipe_16x1_hand_counts():
    # Megatron-Bridge layout_map (16, 1): [E + 4t], 14 x [4t], [t, mtp, loss]; the first 3 layers dense
    c = layout.stage_counts("Et*4|(t*4|)*14tmL", 16, 1, first_dense=3, layers=61, mtp=1)
    assert c == {"layout_first": 4, "layout_first_dense": 3, "layout_last": 1, "layout_last_dense": 0,
                 "layout_mid": 4, "layout_mid_dense": 0}
    r = layout.ranks("Et*4|(t*4|)*14tmL", 16, 1, 61, 1)
    assert [x.layers for x in r] == [4] * 15 + [1]
    assert r[-1].mtp == 1 and r[-1].loss and r[0].embedding and not r[0].loss


def test_interleaved_layout_groups_chunks_by_rank():
    # "Et|(tt|)*30mL" on pp 8 x vp 4 (the 25.09 H100 recipe): rank r holds stages r, r+8, r+16, r+24.
    # rank 0: Et, tt, tt, tt = 7 layers (ids 0, 16, 17, 32, 33, 48, 49: one dense); rank 1: ids 1, 2 dense, ...;
    # rank 7: tt, tt, tt, mL = 6 layers and the MTP layer
    r = layout.ranks("Et|(tt|)*30mL", 8, 4, 61, 1)
    assert [x.layers for x in r] == [7, 8, 8, 8, 8, 8, 8, 6]
    assert r[0].decoder_ids[:2] == (0, 15) and r[1].decoder_ids[:2] == (1, 2)
    c = layout.stage_counts("Et|(tt|)*30mL", 8, 4, first_dense=3, layers=61, mtp=1)
    assert c == {"layout_first": 7, "layout_first_dense": 1, "layout_last": 6, "layout_last_dense": 0,
                 "layout_mid": 8, "layout_mid_dense": 0}     # ranks 2..6: 8 layers, none dense (rank 1 has 2)


def test_single_rank_is_first_and_last():
    c = layout.stage_counts("Et*4L", 1, 1, first_dense=1, layers=4, mtp=0)
    assert c["layout_first"] == c["layout_last"] == 4 and c["layout_mid"] == 0


@pytest.mark.parametrize("text, pp, v, msg", [
    ("Et*4|t*4L", 4, 1, "4 x 1 = 4 virtual stages"),
    ("EEt*4|t*4L", 2, 1, "exactly one E"),
    ("t*4E|t*4L", 2, 1, "exactly one E"),
    ("Et*4|Lt*4", 2, 1, "exactly one E"),
    ("Et*4|t*3L", 2, 1, "8 decoder layers"),
    ("Et*4|t*4mmL", 2, 1, "1 MTP layers"),
    ("Et*4|t*4xL", 2, 1, "may hold only"),
    ("Et*4|mt*4L", 2, 1, "before the MTP"),
    ("Et*4|t*4m||L", 2, 2, "last virtual stage"),
    ("", 2, 1, "non-empty"),
])
def test_invalid_layouts_name_the_rule(text, pp, v, msg):
    with pytest.raises(InputError, match=msg.replace("(", r"\(").replace("*", r"\*")):
        layout.ranks(text, pp, v, layers=8, mtp=1)


def test_mtp_off_the_loss_rank_is_refused():
    # Megatron-Core's mtp_standalone (MTP on the penultimate rank) is not modelled: say so
    with pytest.raises(InputError, match="mtp_standalone"):
        layout.stage_counts("Et*4|t*4|m|L", 4, 1, layers=8, mtp=1)


# ---- the plan field and its rule ---------------------------------------------------------------------------
def test_plan_rule_checks_the_model():
    p = Plan(pp=16, dp=8, ep=8, global_batch=128, pipeline_layout="Et*4|(t*4|)*14tmL")
    check(DSV3, p)                                       # 61 layers, 1 MTP: valid, and no uneven_stages needed
    with pytest.raises(InputError, match="must hold the model's 1 MTP layers"):
        check(DSV3, dataclasses.replace(p, pipeline_layout="Et*4|(t*4|)*14tL"))
    with pytest.raises(InputError, match="16 x 1 = 16"):
        check(DSV3, dataclasses.replace(p, pipeline_layout="Et|(tt|)*30mL"))
    with pytest.raises(InputError, match="plan.pipeline_layout"):
        Plan(pipeline_layout=3)


def test_layout_inputs_default_is_the_sentinel():
    x = plan_inputs(Plan(pp=2, dp=1, global_batch=4))
    assert x["pp_layout"] == 0.0 and x["layout_first"] == 0.0
    with pytest.raises(InputError, match="needs the model"):
        plan_inputs(Plan(pp=2, global_batch=4, pipeline_layout="Et*16|t*16L"))


# ---- the model ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pp, v, text", [
    (4, 2, "Et*4|(t*4|)*6t*4L"),                          # 8 virtual stages of 4 layers = the derived even split
    (4, 1, "Et*8|t*8|t*8|t*8L"),
    (2, 1, "Et*16|t*16L"),
])
def test_layout_equal_to_the_default_split_gives_the_same_step(pp, v, text):
    base = Plan(tp=2, pp=pp, dp=2, interleave=v, micro_batch=1, global_batch=32,
                schedule="interleaved" if v > 1 else "1f1b")
    stated = dataclasses.replace(base, pipeline_layout=text)
    a, b = evaluate(inputs(DENSE, base, HW)), evaluate(inputs(DENSE, stated, HW))
    assert b["stage_layers"] == 32 / pp
    for k in ("step_time", "t_forward", "t_backward", "t_pp_bubble", "t_host_overhead", "stage_layers",
              "head_stage_heavier", "memory"):
        assert b[k] == pytest.approx(a[k], rel=1e-12), k


def test_no_layout_is_the_derived_model():
    # the sentinel: pp_layout = 0 ignores the counts, whatever they are
    x = inputs(DENSE, Plan(pp=4, dp=1, global_batch=8), HW)
    y = {**x, "layout_first": 1.0, "layout_last": 30.0, "layout_mid": 1.0}
    assert evaluate(y)["step_time"] == evaluate(x)["step_time"]


def test_deepseek_v3_recipe_layout_lightens_the_heaviest_stage():
    # derived: ceil(61/16) = 4 layers + the LM head + the MTP layer on one rank; the recipe's layout puts at most
    # 4 layers (3 of them dense) + the embedding, 4 MoE layers, or 1 layer + head + MTP on any rank
    plan = Plan(tp=1, pp=16, dp=16, ep=8, global_batch=2048, micro_batch=1, sequence_parallel=False,
                uneven_stages=True, dtype="bf16")
    a = predict(DSV3, plan, HW).raw
    b = predict(DSV3, dataclasses.replace(plan, pipeline_layout="Et*4|(t*4|)*14tmL"), HW).raw
    assert a["stage_layers"] == 4 and a["stage_mtp_layers"] == 1
    assert b["stage_layers"] in (4, 1)
    assert b["stage_mtp_layers"] == (1 if b["stage_layers"] == 1 else 0)
    assert b["t_microbatch_stage"] < a["t_microbatch_stage"]
    assert b["step_time"] < a["step_time"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=12), min_size=3, max_size=3))
def test_heaviest_stage_is_one_of_the_three(extra):
    # 24 layers over 4 ranks: the stage the model prices holds the layers of the first, the last or the busiest
    # other rank, and never fewer than the busiest other rank
    a, b = 1 + extra[0] % 8, 1 + extra[1] % 8
    c = 24 - a - b
    mid1 = c // 2
    text = f"Et*{a}|t*{mid1}|t*{c - mid1}|t*{b}L"
    plan = Plan(pp=4, dp=1, global_batch=8, pipeline_layout=text)
    m = dataclasses.replace(DENSE, n_layers=24)
    r = evaluate(inputs(m, plan, HW))
    assert r["stage_layers"] in (a, b, max(mid1, c - mid1))
    per_layer = sum(r[f"t_layer_{k}"] for k in ("fwd", "bwd", "recompute", "tp_comm", "cp_comm", "ep_comm", "host"))
    assert r["t_microbatch_stage"] >= max(a, b, mid1, c - mid1) * per_layer * (1 - 1e-12)
    assert r["step_time"] > 0


# ---- validate: a DeepSeek-V3 row -----------------------------------------------------------------------------
def row(**kw):
    return {"model": "DeepSeek-V3", "pp": 16, "interleave": None, "n_layers": 61, "mtp": 1, "settings": "", **kw}


def test_validate_reads_a_stated_layout():
    d = _pipeline_layout(row(settings="CUDA graphs | pp_layout Et*4|(t*4|)*14tmL | ETP=1"))
    assert d == {"pipeline_layout": "Et*4|(t*4|)*14tmL", "interleave": 1}
    # 32 stages on pp 16 without interleaving: Megatron-LM arguments.py sets vp = 32 // 16
    d = _pipeline_layout(row(settings="cuda_graphs=True; pipeline_model_parallel_layout=Et|(tt|)*30mL; x"))
    assert d == {"pipeline_layout": "Et|(tt|)*30mL", "interleave": 2}


def test_validate_uses_the_recipe_layout_when_none_is_stated():
    assert _pipeline_layout(row(settings="default DSv3 pp layout")) == {"pipeline_layout": "Et*4|(t*4|)*14tmL",
                                                                       "interleave": 1}
    assert _pipeline_layout(row(pp=4, interleave=4)) == {"pipeline_layout": "Et*4|(t*4|)*14tmL", "interleave": 4}
    # no MTP ("w/o MTP" rows): the recipe's last stage is ["mtp"] * 0 + ["loss"]
    assert _pipeline_layout(row(pp=8, interleave=2, mtp=0)) == {"pipeline_layout": "Et*4|(t*4|)*14tL",
                                                                "interleave": 2}
    assert _pipeline_layout(row(pp=8, interleave=4)) == {}          # (8, 4): not in the recipe's map
    assert _pipeline_layout(row(model="Llama3 70B", n_layers=80, mtp=0)) == {}
    # a stated layout that does not fit the row's pp x vp falls back to the recipe's for the row's (pp, vp)
    d = _pipeline_layout(row(pp=4, interleave=4, settings="pipeline_model_parallel_layout=Et|(tt|)*30mL"))
    assert d == {"pipeline_layout": "Et*4|(t*4|)*14tmL", "interleave": 4}


@pytest.mark.parametrize("pid", ["deepseek-v3", "kimi-k2"])
def test_preset_layouts_are_valid_for_the_preset(pid):
    """Every (pp, vp) layout a preset transcribes from its recipe places each of its layers (61: DeepSeek-V3 with its
    MTP layer, Kimi K2 without) exactly once on pp x vp stages."""
    m = models.load(pid)
    raw = models.raw(pid)["pipeline_layouts"]
    for key, text in raw.items():
        if key == "source":
            continue
        pp, v = map(int, key.split("x"))
        layout.ranks(text, pp, v, layers=m.n_layers, mtp=m.mtp_layers)
