"""Megatron-Core's selective recomputation by module (--recompute-modules; plan field recompute_modules): which
operators each module runs again (formulas/compute.py _MODULE_OPS), what it frees (formulas/memory.py), the rules
Megatron-Core's transformer_config.py enforces, and how validate and the CLI read it."""
import itertools
import subprocess
import sys

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from roofline.base import normalize
from roofline.base.errors import InputError
from roofline.model.formulas import compute as C
from roofline.model.formulas import symbols as S
from roofline.model.predict import RECOMPUTE_MODULE_SYMBOLS, predict
from roofline.spec import hardware
from roofline.spec.config import RECOMPUTE_MODULES, Model, Plan, check
from roofline.spec.resolve import resolve
from roofline.views import validate as V

H100 = hardware.load("h100-sxm")
# a small DeepSeek-like model: MLA, routed and shared experts, one leading dense layer
MLA_MOE = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=2048, mlp="swiglu", n_experts=8, top_k=2,
                moe_ffn_hidden=512, n_shared_experts=1, shared_ffn_hidden=512, first_dense_layers=1, ffn_hidden=2816,
                q_lora_rank=384, kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
DENSE = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=2048, mlp="swiglu", ffn_hidden=2816)


def _pred(model, modules, recompute="selective", ep=8):
    plan = Plan(tp=1, pp=1, dp=8, ep=ep if model.n_experts > 1 else 1, micro_batch=1, global_batch=8,
                recompute=recompute, recompute_modules=modules)
    return predict(model, plan, H100)


def _recomputed(modules, moe_on):
    """Names of the layer operators the modules run again (shares substituted: the named modules 1, others 0)."""
    on = {getattr(S, sym): int(name in modules) for name, sym in RECOMPUTE_MODULE_SYMBOLS.items()}
    on[S.kv_lora] = 1                                   # an MLA model
    ops = C.layer_ops(C.d_head, S.moe_ffn, sp.Integer(moe_on), S.shared_ffn, variants=True)
    out = set()
    for o in ops:
        share = float(sp.sympify(C.selective_share(o.name, sp.Integer(moe_on))).subs(on))
        if share != 0:
            assert share == 1, (o.name, share)
            out.add(o.name)
    return out


def test_the_modules_are_megatron_cores_and_each_has_a_switch():
    assert RECOMPUTE_MODULES[0] == "core_attn" and Plan().recompute_modules == "core_attn"
    assert set(RECOMPUTE_MODULES) == set(RECOMPUTE_MODULE_SYMBOLS)


@pytest.mark.parametrize("module,moe_on,ops", [
    ("core_attn", 1, set(C.ATTENTION_CORE)),
    ("mla_up_proj", 1, {"mla_q_norm", "mla_q_up", "mla_q_proj", "mla_kv_norm", "mla_kv_up", "mla_rope_qkv"}),
    ("layernorm", 1, {"norm_attn", "norm_mlp"}),          # MLA's input norm and an MoE layer's pre-MLP norm
    ("layernorm", 0, {"norm_attn"}),                      # a dense MLP fuses its norm into fc1
    ("moe_act", 1, {"mlp_activation"}),
    ("moe_act", 0, set()),
    ("mlp", 0, {"norm_mlp", "mlp_up", "mlp_activation", "mlp_down"}),
    ("mlp", 1, set()),                                    # Megatron-Core: mlp is not for an MoE layer
    ("shared_experts", 1, {"shared_up", "shared_activation", "shared_down"}),
    ("moe", 1, {"router", "router_topk", "moe_permute", "moe_sort_chunks", "mlp_up", "mlp_activation", "mlp_down", "expert_bias",
                "moe_latent_down", "moe_latent_up", "shared_up", "shared_activation", "shared_down"}),
])
def test_each_module_recomputes_its_operators(module, moe_on, ops):
    names = {o.name for o in C.layer_ops(C.d_head, S.moe_ffn, sp.Integer(moe_on), S.shared_ffn, variants=True)}
    assert _recomputed({module}, moe_on) == ops & names


def test_overlapping_modules_recompute_an_operator_once():
    assert _recomputed({"moe", "moe_act", "shared_experts"}, 1) == _recomputed({"moe"}, 1)
    share = C.selective_share("mlp_activation", sp.Integer(1)).subs({S.rcm_moe: 1, S.rcm_moe_act: 1})
    assert share == 1


def test_no_module_is_no_recomputation_and_core_attn_frees_nothing_under_flash():
    none, empty, core = _pred(MLA_MOE, "", "none"), _pred(MLA_MOE, ""), _pred(MLA_MOE, "core_attn")
    assert empty.raw["t_recompute"] == 0 and empty.raw["step_time"] == pytest.approx(none.raw["step_time"])
    assert empty.raw["memory"] == pytest.approx(none.raw["memory"])
    assert core.raw["t_recompute"] > 0 and core.raw["memory"] == pytest.approx(none.raw["memory"])


@settings(max_examples=25, deadline=None)
@given(base=st.sets(st.sampled_from(RECOMPUTE_MODULES)), extra=st.sampled_from(RECOMPUTE_MODULES))
def test_another_module_never_speeds_the_step_nor_adds_memory(base, extra):
    a = _pred(MLA_MOE, ",".join(sorted(base)))
    b = _pred(MLA_MOE, ",".join(sorted(base | {extra})))
    assert b.raw["step_time"] >= a.raw["step_time"] * (1 - 1e-12)
    assert b.raw["memory"] <= a.raw["memory"] * (1 + 1e-12)
    assert b.raw["flops"] == a.raw["flops"]           # recomputation counts in HFU, never in MFU


def test_moe_recompute_runs_the_all_to_all_again():
    a, b = _pred(MLA_MOE, ""), _pred(MLA_MOE, "moe")
    assert b.raw["t_layer_ep_comm"] == pytest.approx(1.5 * a.raw["t_layer_ep_comm"])   # forward, backward, forward


def test_moe_act_frees_the_routed_experts_fc2_input():
    """By hand: each of the 3 MoE layers keeps k b s f bf16 elements as fc2's input (pp 1: one micro-batch in flight,
    tp 1, capacity 1)."""
    m = MLA_MOE
    a, b = _pred(m, ""), _pred(m, "moe_act")
    freed = (m.n_layers - m.first_dense_layers) * m.top_k * 1 * m.seq_len * m.moe_ffn_hidden * 2
    assert a.raw["mem_activations"] - b.raw["mem_activations"] == pytest.approx(freed)


def test_mla_up_proj_frees_q_k_v_and_the_latent_norms_outputs():
    """By hand: every layer (MLA in all 4) keeps Q and K of a (d_n + d_r) and V of a d_v per token, and the latent
    norms' outputs (r_q + r_kv), bf16."""
    m = MLA_MOE
    a, b = _pred(m, ""), _pred(m, "mla_up_proj")
    per_token = m.n_heads * (2 * (m.qk_nope_head_dim + m.qk_rope_head_dim) + m.v_head_dim) + m.q_lora_rank \
        + m.kv_lora_rank
    assert a.raw["mem_activations"] - b.raw["mem_activations"] == pytest.approx(m.n_layers * m.seq_len * per_token * 2)


def test_mlp_frees_a_dense_layers_mlp_only():
    """By hand: the dense layer's SwiGLU inputs (2 f) and fc2 input (f), and fc1's input (the fused norm's output, h)."""
    m = MLA_MOE
    a, b = _pred(m, ""), _pred(m, "mlp")
    freed = m.first_dense_layers * m.seq_len * (3 * m.ffn_hidden + m.d_model) * 2
    assert a.raw["mem_activations"] - b.raw["mem_activations"] == pytest.approx(freed)
    d0, d1 = _pred(DENSE, ""), _pred(DENSE, "mlp")
    assert d0.raw["mem_activations"] - d1.raw["mem_activations"] == pytest.approx(
        DENSE.n_layers * DENSE.seq_len * (3 * DENSE.ffn_hidden + DENSE.d_model) * 2)


@pytest.mark.parametrize("model,modules,needle", [
    (DENSE, "mla_up_proj", "needs MLA attention"),
    (DENSE, "moe_act", "needs an MoE model"),
    (DENSE, "core_attn,bogus", "unknown bogus"),
])
def test_megatron_cores_rules(model, modules, needle):
    with pytest.raises(InputError, match=needle):
        check(model, Plan(recompute="selective", recompute_modules=modules))


def test_modules_without_selective_are_refused_when_stated():
    with pytest.raises(InputError, match="needs recompute selective"):
        resolve(DENSE, {"recompute": "full", "recompute_modules": "mlp"}, "h100-sxm")
    spec = resolve(MLA_MOE, {"recompute": "selective", "recompute_modules": ["moe_act", "layernorm"], "ep": 8,
                             "dp": 8}, "h100-sxm")
    assert spec.plan.recompute_modules == "moe_act,layernorm"


@pytest.mark.parametrize("text,want", [
    ("mla_up_proj,mlp", "mla_up_proj,mlp"), ("['moe_act', 'layernorm']", "moe_act,layernorm"),
    ("moe, layernorm, core-attn, moe_act", "core_attn,moe_act,layernorm,moe"), ("", None),
])
def test_spellings(text, want):
    assert normalize.recompute_modules(text) == want


def test_validate_reads_the_recompute_modules_column():
    row = {"case_id": "x", "tp": 1, "pp": 1, "dp": 8, "global_batch": 8, "micro_batch": 1, "recompute": "selective",
           "recompute_modules": "mla_up_proj,mlp", "seq_parallel": "", "optimizer_sharding": ""}
    assert V._plan_fields(row)["recompute_modules"] == "mla_up_proj,mlp"
    assert "recompute_modules" not in V._plan_fields({**row, "recompute": "full"})
    with pytest.raises(V.Skip, match="cannot read"):
        V._plan_fields({**row, "recompute_modules": "everything"})


def test_cli_prints_the_modules_and_refuses_in_one_line():
    ok = subprocess.run([sys.executable, "-m", "roofline", "transformer", "--model", "deepseek-v3", "--gpu", "h100-sxm",
                         "--tp", "2", "--pp", "8", "--dp", "64", "--ep", "64", "--global-batch", "8192",
                         "--uneven-stages", "--recompute", "selective", "--recompute-modules", "mlp,mla_up_proj"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "recompute selective (mla_up_proj,mlp)" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "roofline", "transformer", "--model", "llama3-8b", "--recompute",
                          "selective", "--recompute-modules", "moe_act"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1
    assert "moe_act needs an MoE model" in bad.stderr


# ----- search: selective recomputation with more modules (views/search.py selective_ladder) -----

def test_the_ladder_adds_modules_that_apply_and_never_for_a_dense_model():
    from roofline.views.search import selective_ladder

    assert selective_ladder(DENSE, "core_attn") == ()
    rungs = selective_ladder(MLA_MOE, "core_attn")
    sets = [set(r.split(",")) for r in rungs]
    assert sets[0] == {"layernorm", "moe_act"} and sets[-1] >= {"moe", "mla_up_proj", "mlp", "shared_experts"}
    assert all(a < b for a, b in zip(sets, sets[1:]))        # each rung keeps the ones before
    for r in rungs:                                          # each a set Megatron-Core accepts for this model
        check(MLA_MOE, Plan(recompute="selective", recompute_modules=r))
    no_shared = Model(**{**MLA_MOE.__dict__, "n_shared_experts": 0, "shared_ffn_hidden": None,
                         "first_dense_layers": 0})
    assert all("shared_experts" not in r and "mlp" not in r.split(",") for r in selective_ladder(no_shared, ""))


def test_search_prices_each_ladder_plan_as_predict_does():
    from roofline.spec.config import RECOMPUTE
    from roofline.views.search import LADDER, search, selective_ladder

    cands = search(MLA_MOE, H100, 8, 16, top=None, framework="megatron-core")
    rungs = [c for c in cands if c.plan.recompute == "selective" and c.plan.recompute_modules != "core_attn"]
    assert rungs, "the ladder's plans are searched"
    assert {c.plan.recompute_modules for c in rungs} <= set(selective_ladder(MLA_MOE, "core_attn"))
    for c in rungs[:: max(1, len(rungs) // 20)] + [c for c in cands if c.plan.recompute != "selective"][:5]:
        p = predict(MLA_MOE, c.plan, H100)
        assert c.step_time_s == pytest.approx(p.raw["step_time"], rel=1e-9)
        assert c.memory_bytes == pytest.approx(p.raw["memory"], rel=1e-9)
    assert LADDER == len(RECOMPUTE)


def test_stated_modules_are_the_only_selective_set_searched():
    from roofline.views.search import evaluate_space

    base = Plan(recompute_modules="mla_up_proj")
    space = evaluate_space(MLA_MOE, H100, 8, 16, base=base, stated=frozenset({"recompute_modules"}))
    assert space.ladder == () and set(space.knobs["recompute"]) <= {0, 1, 2, 3}


def test_a_config_file_takes_the_modules_as_a_yaml_list(tmp_path):
    from roofline.spec.configfile import load_config

    f = tmp_path / "run.yaml"
    f.write_text("model: deepseek-v3\nhardware: h100-sxm\nplan: {tp: 2, pp: 8, dp: 64, ep: 64, global_batch: 8192, "
                 "recompute: selective, recompute_modules: [mlp, mla_up_proj], uneven_stages: true}\n")
    assert load_config(f)["plan"].recompute_modules == "mla_up_proj,mlp"
    f.write_text(f.read_text().replace("mlp, mla_up_proj", "mlp, everything"))
    with pytest.raises(InputError, match="cannot read everything"):
        load_config(f)


def test_only_a_stack_with_megatron_cores_modules_runs_them():
    from roofline.views.search import evaluate_space

    with pytest.raises(InputError, match="recomputes the attention core only"):
        resolve(MLA_MOE, {"recompute": "selective", "recompute_modules": "mla_up_proj", "ep": 8, "dp": 8}, "h100-sxm",
                "deepspeed-zero")
    assert evaluate_space(MLA_MOE, H100, 8, 16, framework="fsdp").ladder == ()
    assert evaluate_space(MLA_MOE, H100, 8, 16, framework="megatron-core").ladder != ()
