"""Precision as a plan field (issue 20): which GEMMs run at the low-precision peak, the quantization traffic each
recipe adds, FP4 peaks, the Blackwell family prior and the MoE all-to-all overlap switch."""
from dataclasses import replace

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from roofline.spec import hardware
from roofline.base import precision
from roofline.spec.config import Model, Plan
from roofline.base.errors import InputError
from roofline.model.formulas import compute as C, symbols as S
from roofline.model.predict import evaluate, inputs, predict
from roofline.spec.resolve import resolve

H100 = hardware.load("h100-sxm")
LLAMA = Model(n_layers=4, d_model=4096, n_heads=32, n_kv_heads=8, ffn_hidden=14336, vocab=128256, seq_len=8192,
              mlp="swiglu", norm="rmsnorm", position="rope", biases=False, tied_embeddings=False)
PLAN = Plan(tp=2, pp=1, dp=4, micro_batch=1, global_batch=8, sequence_parallel=True)


def _op(ops, name):
    return next(o for o in ops if o.name == name)


def _peaks(op, direction="fwd"):
    """The peaks an op's time reads with every layer at the recipe's precision (hp_frac 0: no layer kept in 16 bits,
    test_bf16_layers.py prices the rest)."""
    free = C.op_time(op, direction).subs(S.hp_frac, 0).free_symbols
    return {s.name for s in free & {S.peak, S.peak_hp}}


def test_linear_layers_run_at_the_plan_peak_attention_head_and_router_at_16_bit():
    ops = C.layer_ops(C.d_head, S.moe_ffn, C.moe, S.shared_ffn, variants=True)
    for name in ("qkv_proj", "attn_out_proj", "mlp_up", "mlp_down", "mla_kv_up"):
        assert _peaks(_op(ops, name)) == {"peak"}, name
    assert _peaks(_op(ops, "router")) == {"peak_hp"}
    flash = [o for o in ops if o.name == "flash_attention"]
    assert flash and all(_peaks(o, d) == {"peak_hp"} for o in flash for d in ("fwd", "bwd"))
    assert _peaks(_op(C.head_ops(), "lm_head")) == {"peak_hp"}


def test_quantized_elements_of_a_dense_layer_by_hand():
    """Forward: the inputs of QKV (h), the output projection (a d_h / t), fc1 (h) and fc2 (f / t) per token;
    backward: the gradients of their outputs (QKV width / t, h, 2f / t gated, h), and the forward's inputs again when
    the recipe saved them in 16 bits (q_saved 0, torchao Float8Linear)."""
    ops = C.layer_ops(C.d_head, S.ffn_hidden, sp.Integer(0), variants=True)
    q = _op(ops, "quantize")
    h, a, g, dh, f, t, T = 4096, 32, 8, 128, 14336, 2, 8192
    vals = {S.d_model: h, S.n_heads: a, S.kv_heads: g, S.head_dim: dh, S.ffn_hidden: f, S.tp: t, S.micro_batch: 1,
            S.seq_len: T, S.cp: 1, S.gated: 1, S.q_bytes: 6, S.kv_lora: 0, S.q_lora: 0, S.q_saved: 1, S.attn_fp8: 0,
            S.hp_frac: 0, S.q_trans: 1, S.fp8_tn: 1}       # Hopper: the transposed FP8 copy is written
    fwd_elems = T * (h + a * dh / t + h + f / t)
    bwd_elems = T * ((a + 2 * g) * dh / t + h + 2 * f / t + h)
    assert float(q.b_fwd.subs(vals)) == pytest.approx(6 * fwd_elems)
    assert float(q.b_bwd.subs(vals)) == pytest.approx(6 * bwd_elems)
    assert float(q.b_bwd.subs({**vals, S.q_saved: 0})) == pytest.approx(6 * (bwd_elems + fwd_elems))
    assert float(q.b_fwd.subs({**vals, S.q_bytes: 0})) == 0 and float(q.on.subs({**vals, S.q_bytes: 0})) == 0
    # FP8 attention casts Q, K, V in forward and dO in backward (flash attention, full and windowed layers alike)
    fa = {**vals, S.attn_fp8: 1, S.flash: 1, S.swa_frac: sp.Rational(1, 2)}
    assert float(q.b_fwd.subs(fa)) == pytest.approx(6 * (fwd_elems + T * (a + 2 * g) * dh / t))
    assert float(q.b_bwd.subs(fa)) == pytest.approx(6 * (bwd_elems + T * a * dh / t))
    # Blackwell's FP8 GEMMs take any layout: no transposed copy, a byte less per element
    assert float(q.b_fwd.subs({**vals, S.fp8_tn: 0})) == pytest.approx(5 * fwd_elems)


def test_recipes_name_their_peak_and_16_bit_moves_no_quantization_bytes():
    assert {precision.peak_key(n) for n in ("fp8", "fp8-cs", "fp8-block", "mxfp8")} == {"fp8"}
    assert precision.peak_key("nvfp4") == "fp4"
    for n in precision.HIGH:
        assert precision.get(n).q_bytes == 0 and precision.high_key(n) == n
    # a recipe that computes the tensor's amax in a pass of its own reads the input once more (2 bytes)
    assert precision.get("fp8-cs").q_bytes - precision.get("fp8").q_bytes == 2


def _t(dtype, hw=H100, **over):
    x = inputs(LLAMA, replace(PLAN, dtype=dtype), hw)
    return float(evaluate({**x, **over})["step_time"])


@pytest.mark.parametrize("dtype", ["fp8", "fp8-cs", "mxfp8"])
def test_fp8_sits_between_the_old_optimistic_price_and_bf16(dtype):
    """Attention in 16 bits and the casts cost time: slower than every op at the FP8 peak without casts; a
    GEMM-heavy 8B layer still gains over BF16 (MXFP8 on Blackwell, the others on Hopper)."""
    hw = hardware.load("b200") if dtype == "mxfp8" else H100
    x = inputs(LLAMA, replace(PLAN, dtype=dtype), hw)
    optimistic = _t(dtype, hw, q_bytes=0, peak_hp=x["peak"])
    assert optimistic < _t(dtype, hw) < _t("bf16", hw)


def test_current_scaling_costs_more_than_delayed():
    assert _t("fp8-cs") > _t("fp8")


def test_fp4_needs_an_fp4_peak_one_line():
    with pytest.raises(InputError, match=r"h100-sxm has no fp4 peak.*nvfp4"):
        resolve("llama3-8b", {"tp": 1, "pp": 1, "dp": 8, "dtype": "nvfp4", "global_batch": 8}, H100, "megatron-core")
    b200 = hardware.load("b200")
    assert b200.peak("nvfp4") == pytest.approx(2 * b200.peak("fp8"))
    assert _t("nvfp4", b200) < _t("mxfp8", b200)


def test_blackwell_takes_the_hopper_family_curves_under_its_own_cap():
    """No Blackwell calibration exists: b200/gb200 borrow h100-sxm's borrowed curves (efficiency_from follows the
    chain), keep their own max_matmul cap, and say where the curves come from."""
    b200, gb200 = hardware.load("b200"), hardware.load("gb200")
    for hw in (b200, gb200):
        assert hw.efficiency["attn"]["bwd"] == H100.efficiency["attn"]["bwd"]
        assert hw.provenance["compute_curves_from"].startswith("h100-sxm")
        assert hw.efficiency["gemm"]["fwd"][0] <= hw.matmul_ceiling + 1e-12
    assert b200.matmul_ceiling == pytest.approx(1745.0 / 2250)


def test_blackwell_matmul_caps_are_the_measured_maxima_and_gb300_follows_from_them():
    """mamf-finder measured B200 1745.0, GB200 1822.0 and B300 1769.0 TFLOP/s in bf16 (stas00/ml-engineering); no GB300
    figure exists, so gb300.yaml takes B300's scaled by GB200 / B200 (the superchip part over the HGX part)."""
    mm = {k: hardware.load(k).matmul_ceiling * hardware.load(k).peak_flops["bf16"] / 1e12
          for k in ("b200", "gb200", "b300", "gb300")}
    assert (mm["b200"], mm["gb200"], mm["b300"]) == pytest.approx((1745.0, 1822.0, 1769.0))
    assert mm["gb300"] == pytest.approx(mm["b300"] * mm["gb200"] / mm["b200"], rel=5e-4)


def test_efficiency_from_cycle_is_one_line(tmp_path):
    (tmp_path / "a.yaml").write_text((hardware.PROFILES / "b200.yaml").read_text().replace("id: b200", "id: a")
                                     .replace("efficiency_from: h100-sxm", "efficiency_from: b.yaml"))
    (tmp_path / "b.yaml").write_text((hardware.PROFILES / "b200.yaml").read_text().replace("id: b200", "id: b")
                                     .replace("efficiency_from: h100-sxm", "efficiency_from: a.yaml"))
    with pytest.raises(InputError, match="circular"):
        hardware.load(str(tmp_path / "a.yaml"))


MOE = replace(LLAMA, n_experts=8, top_k=2, moe_ffn_hidden=4096, ffn_hidden=None)


@settings(max_examples=25, deadline=None)
@given(ov=st.floats(0, 1), ep=st.sampled_from([1, 2, 4]), mb=st.sampled_from([1, 2]))
def test_hiding_the_moe_all_to_all_never_costs_more_than_it_hides(ov, ep, mb):
    plan = replace(PLAN, ep=ep, micro_batch=mb, global_batch=8 * mb)
    none, some = predict(MOE, plan, H100), predict(MOE, replace(plan, overlap_ep=ov), H100)
    assert some.raw["step_time"] <= none.raw["step_time"] * (1 + 1e-12)
    # what it saves is at most the all-to-all itself
    assert none.raw["step_time"] - some.raw["step_time"] <= none.raw["t_ep_comm"] * (1 + 1e-9)


def test_norm_and_activation_kinds_feed_the_formulas():
    """Issue 21 item 4: RMSNorm does 4 FLOP per element (square and add, normalise, scale), LayerNorm 8; squared
    ReLU 2 (max, square), GELU 8. The bytes are the same as fused kernels (eager RMSNorm moves more:
    tests/test_eager_elementwise.py)."""
    ops = C.layer_ops(C.d_head, S.ffn_hidden, sp.Integer(0), variants=True)
    vals = {S.micro_batch: 1, S.seq_len: 1024, S.cp: 1, S.seq_par: 0, S.tp: 1, S.d_model: 512, S.ffn_hidden: 2048,
            S.gated: 0, S.act_bytes: 2, S.eager_elem: 0}
    norm, act = _op(ops, "norm_attn"), _op(ops, "mlp_activation")
    elems = 1024 * 512
    assert norm.f_fwd.subs({**vals, S.rms: 1}) == 4 * elems and norm.f_fwd.subs({**vals, S.rms: 0}) == 8 * elems
    assert norm.b_fwd.subs({**vals, S.rms: 1}) == norm.b_fwd.subs({**vals, S.rms: 0})
    assert act.f_fwd.subs({**vals, S.sq_relu: 1, S.etp: 1}) == 2 * 1024 * 2048
    assert act.f_fwd.subs({**vals, S.sq_relu: 0, S.etp: 1}) == 8 * 1024 * 2048
    x = inputs(replace(LLAMA, norm="layernorm"), PLAN, H100)
    assert x["rms"] == 0 and inputs(LLAMA, PLAN, H100)["rms"] == 1
    assert inputs(replace(LLAMA, mlp="squared_relu", ffn_hidden=16384), PLAN, H100)["sq_relu"] == 1
