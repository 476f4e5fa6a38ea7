"""QK-norm (model field qk_norm; Megatron-Core qk_layernorm, transformer/attention.py SelfAttention
get_query_key_value_tensors q_layernorm / k_layernorm): one norm pass over each rank's queries and keys after the QKV
GEMM, its input kept for the backward; off with MLA (whose latent norms are priced as mla_q_norm / mla_kv_norm)."""
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from roofline.model.formulas import compute as C
from roofline.model.formulas import memory as M
from roofline.model.formulas import symbols as S
from roofline.model.predict import predict
from roofline.spec import hardware, models
from roofline.spec.config import Model, Plan
from roofline.spec.resolve import resolve

H100 = hardware.load("h100-sxm")


def _qk_op(subs):
    ops = {o.name: o for o in C.layer_ops(C.d_head, S.ffn_hidden, sp.Integer(0), variants=True)}
    o = ops["qk_norm"]
    base = {S.eager_elem: 0, S.eager_rope: 0, S.rms: 1, S.kv_lora: 0}
    return [sp.simplify(x.xreplace({**base, **subs})) for x in (o.b_fwd, o.b_bwd)]


def test_the_kernel_reads_and_writes_the_queries_and_keys_once():
    elems = C.tokens * (S.n_heads + S.kv_heads) * C.d_head / S.tp
    fwd, bwd = _qk_op({S.qk_norm: 1})
    assert sp.simplify(fwd - 2 * S.act_bytes * elems) == 0          # a fused norm: r1 w1
    assert sp.simplify(bwd - 3 * S.act_bytes * elems) == 0          # backward: r2 w1, as the block norms
    assert _qk_op({S.qk_norm: 0}) == [0, 0]
    assert _qk_op({S.qk_norm: 1, S.kv_lora: 512}) == [0, 0]          # MLA: its latent norms instead


def test_its_input_is_kept_for_the_backward():
    keep = (M._attn_split.xreplace({S.qk_norm: 1, S.kv_lora: 0})
            - M._attn_split.xreplace({S.qk_norm: 0, S.kv_lora: 0}))
    expected = C.tokens * S.act_bytes * (S.n_heads + C.kv_heads_eff) * C.d_qk
    assert sp.simplify((keep - expected).xreplace({S.kv_lora: 0})) == 0


@settings(max_examples=25, deadline=None)
@given(heads=st.sampled_from([16, 32, 64]), kv=st.sampled_from([2, 4, 8]), tp=st.sampled_from([1, 2, 4]),
       mb=st.integers(1, 4))
def test_qk_norm_costs_time_and_memory_and_nothing_else(heads, kv, tp, mb):
    """On any shape: more GPU time per layer (the step no faster; a host-bound step may not change), more activation
    memory; weights, gradients and optimizer state unchanged."""
    m = Model(n_layers=4, d_model=heads * 128, n_heads=heads, n_kv_heads=kv, head_dim=128, mlp="swiglu",
              norm="rmsnorm", position="rope", vocab=32000, seq_len=2048)
    plan = Plan(tp=tp, pp=1, dp=8, micro_batch=mb, global_batch=8 * mb * 2)
    on = predict(Model(**{**m.__dict__, "qk_norm": True}), plan, H100)
    off = predict(m, plan, H100)
    assert on.raw["t_layer_fwd"] > off.raw["t_layer_fwd"] and on.raw["t_layer_bwd"] > off.raw["t_layer_bwd"]
    assert on.step_time.magnitude >= off.step_time.magnitude * (1 - 1e-12)      # host-bound: equal up to rounding
    assert on.memory["activations"] > off.memory["activations"]
    for k in ("weights", "gradients", "optimizer"):
        assert on.memory[k] == off.memory[k]
    assert on.flops_per_step == off.flops_per_step                    # norms are not model FLOPs


def test_presets_and_the_cli():
    for name in ("qwen3-8b", "qwen3-30b-a3b", "qwen3-235b-a22b", "olmo2-7b", "llama4-scout"):
        assert models.load(name).qk_norm, name
    for name in ("llama3.1-8b", "deepseek-v3", "gpt-oss-120b", "llama4-maverick"):    # Maverick: use_qk_norm false
        assert not models.load(name).qk_norm, name
    from roofline.face.cli import main
    assert main(["transformer", "--model", "llama3-8b", "--qk-norm", "--dp", "8", "--global-batch", "8",
                 "--micro-batch", "1"]) == 0
    s = resolve("qwen3-8b", {"tp": 1, "dp": 8, "micro_batch": 1, "global_batch": 8}, "h100-sxm",
                model_fields={"qk_norm": False})
    assert not s.model.qk_norm


@pytest.mark.parametrize("cell, detail, expected", [("y", "", True), ("n", "GQA + QK-layernorm", False),
                                                    ("", "GQA + QK-layernorm", True), ("", "GQA", None)])
def test_validate_reads_the_column_then_the_detail(row_case, cell, detail, expected):
    row = {"case_id": "r", "framework": "megatron-core", "gpu_id": "h100-sxm", "model": "custom-qk", "n_layers": 4,
           "d_model": 2048, "n_heads": 16, "n_kv_heads": 4, "ffn_hidden": 8192, "mlp": "swiglu", "vocab": 32000,
           "seq_len": 2048, "global_batch": 8, "micro_batch": 1, "tp": 1, "pp": 1, "dp": 8, "precision": "bf16",
           "qk_layernorm": cell, "attention_detail": detail, "measured_iter_time_s": 1.0}
    assert row_case(row).model.qk_norm is bool(expected)
