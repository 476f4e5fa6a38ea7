"""FP8 attention (Megatron-Core --fp8-dot-product-attention, Transformer Engine fp8_dpa): the attention core at the FP8
peak at FlashAttention-3's relative efficiency (formulas/compute.py FP8_ATTENTION_EFF), its Q, K, V (forward) and dO
(backward) cast with the recipe's other quantizations; only under a low-precision recipe and TE's fused attention."""

import pytest
from hypothesis import given, settings, strategies as st

from roofline.base.errors import InputError
from roofline.model.formulas import compute as C
from roofline.model.predict import evaluate, inputs, value_at
from roofline.spec.resolve import resolve

PLAN = {"tp": 8, "dp": 8, "micro_batch": 1, "global_batch": 64, "dtype": "fp8-cs"}


def _spec(fp8_attention, model="llama3-70b", gpu="h100-sxm", fields=None, **plan):
    return resolve(model, {**PLAN, **plan, "fp8_attention": fp8_attention}, gpu, "megatron-core", model_fields=fields)


def _x(spec):
    return inputs(spec.model, spec.plan, spec.hardware)


def test_the_attention_core_runs_at_flashattention3s_fp8_rate():
    """Compute-bound (a long sequence): FP8 over 16-bit attention is the FP8/16-bit peak ratio times 0.81, H100's
    1.2 PFLOP/s over 740 TFLOP/s in FlashAttention-3 (2 x 0.81 = 1.62 on H100, where FP8 is twice BF16)."""
    flash = C.attention_core()[0]
    assert flash.name == "flash_attention"
    fields = {"seq_len": 32768}
    on, off = _x(_spec(True, fields=fields)), _x(_spec(False, fields=fields))
    ratio = on["peak_fp8"] / on["peak_hp"]
    assert ratio == pytest.approx(2, rel=1e-3)                 # H100 SXM: 1979 / 989 TFLOP/s
    for d in ("fwd", "bwd"):
        speedup = value_at(C.op_time(flash, d), off) / value_at(C.op_time(flash, d), on)
        assert speedup == pytest.approx(ratio * 0.81, rel=0.02)


def test_fp8_attention_casts_q_k_v_forward_and_do_backward():
    flash = C.attention_core()[0]
    x_on, x_off = _x(_spec(True)), _x(_spec(False))
    fwd_on, bwd_on = (value_at(e, x_on) for e in flash.q_elems)
    assert value_at(flash.q_elems[0], x_off) == 0 == value_at(flash.q_elems[1], x_off)
    s, b, t = x_on["seq_len"], x_on["micro_batch"], x_on["tp"]
    d, a, kv = x_on["head_dim"], x_on["n_heads"], x_on["kv_heads"]
    assert fwd_on == pytest.approx(b * s * (a + 2 * kv) * d / t)           # Q, K, V
    assert bwd_on == pytest.approx(b * s * a * d / t)                      # dO


@settings(max_examples=30, deadline=None)
@given(seq=st.sampled_from([1024, 4096, 8192, 32768]), mb=st.sampled_from([1, 2]),
       gpu_dtype=st.sampled_from([("h100-sxm", "fp8-cs"), ("h100-sxm", "fp8"), ("b200", "mxfp8"), ("b200", "nvfp4"),
                                  ("gb200", "mxfp8"), ("gb200", "nvfp4")]))
def test_fp8_attention_helps_long_sequences_and_more_the_longer(seq, mb, gpu_dtype):
    """The saving grows with the sequence (attention FLOPs ~ s^2 per sequence, the casts ~ s); at short sequences the
    casts of Q, K, V and dO may cost more than the faster kernel saves, as they do in the model."""
    gpu, dtype = gpu_dtype

    def gain(s):
        t = [float(evaluate(_x(_spec(on, gpu=gpu, fields={"seq_len": s}, micro_batch=mb, global_batch=64 * mb,
                                     dtype=dtype)))["step_time"]) for on in (True, False)]
        return 1 - t[0] / t[1]
    g = gain(seq)
    if seq >= 8192:
        assert g > 0
    if seq >= 4096:
        assert gain(2 * seq) > g


def test_fp8_attention_is_refused_where_no_fp8_kernel_runs():
    with pytest.raises(InputError, match="fp8_attention needs a low-precision recipe.*bf16"):
        _spec(True, dtype="bf16")
    with pytest.raises(InputError, match="fp8_attention runs in Transformer Engine's fused attention.*'flash'"):
        resolve("llama3-70b", {**PLAN, "fp8_attention": True}, "h100-sxm", "torchtitan")


@pytest.mark.parametrize("settings_text, dtype, expected", [
    ("full-iteration CUDA graph | FP8 dot-product attention | ETP=1", "MXFP8", True),
    ("MXFP8 dot-product attention + fp8_output_proj", "MXFP8", True),
    ("fp8_dot_product_attention=True", "FP8-CS", True),
    ("fp8_dot_product_attention=False", "FP8-CS", False),
    ("no FP8 dot-product attention", "MXFP8", False),
    ("FP8 dot-product attention: off", "MXFP8", False),
    ("fp8_dpa=false", "MXFP8", False),
    ("FP8 dot-product attention", "BF16", False),         # a 16-bit row has no FP8 attention to run
    ("CUDA graphs: not set by preset", "MXFP8", False),
])
def test_validate_reads_fp8_attention_from_the_settings(bridge_row, settings_text, dtype, expected):
    assert bridge_row(dtype, settings_text).plan.fp8_attention is expected
