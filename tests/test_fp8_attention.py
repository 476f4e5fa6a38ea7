"""FP8 attention (Megatron-Core --fp8-dot-product-attention, Transformer Engine fp8_dpa): the attention core at the
profile's measured FP8 kernel speed per direction, or the FP8 peak at FlashAttention-3's relative efficiency
(spec/hardware FP8_ATTENTION_EFF) where none is measured, its Q, K, V (forward) and dO
(backward) cast with the recipe's other quantizations; only under a low-precision recipe and TE's fused attention."""

import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from conftest import gpu_only
from roofline.base.errors import InputError
from roofline.model.formulas import compute as C
from roofline.model.predict import evaluate, inputs, value_at
from roofline.spec.resolve import resolve

PLAN = {"tp": 8, "dp": 8, "micro_batch": 1, "global_batch": 64, "dtype": "fp8-cs"}


def _spec(fp8_attention, model="llama3-70b", gpu="h100-sxm", fields=None, **plan):
    return resolve(model, {**PLAN, **plan, "fp8_attention": fp8_attention}, gpu, "megatron-core", model_fields=fields)


def _x(spec):
    return inputs(spec.model, spec.plan, spec.hardware)


def test_without_a_measured_kernel_the_attention_core_runs_at_flashattention3s_fp8_rate():
    """Compute-bound (a long sequence), on a profile that states no fp8_attention_speed: FP8 over 16-bit attention is
    the FP8/16-bit peak ratio times 0.81, H100's 1.2 PFLOP/s over 740 TFLOP/s in FlashAttention-3 (2 x 0.81 = 1.62 on
    H100, where FP8 is twice BF16), in both directions."""
    flash = C.attention_core()[0]
    assert flash.name == "flash_attention"
    fields = {"seq_len": 32768}
    spec_on, spec_off = _spec(True, fields=fields), _spec(False, fields=fields)
    bare = dataclasses.replace(spec_on.hardware, fp8_attention_speed={})
    on, off = inputs(spec_on.model, spec_on.plan, bare), inputs(spec_off.model, spec_off.plan, bare)
    ratio = bare.peak("fp8") / bare.peak("bf16")
    assert ratio == pytest.approx(2, rel=1e-3)                 # H100 SXM: 1979 / 989 TFLOP/s
    for d in ("fwd", "bwd"):
        speedup = value_at(C.op_time(flash, d), off) / value_at(C.op_time(flash, d), on)
        assert speedup == pytest.approx(ratio * 0.81, rel=0.02)


@pytest.mark.parametrize("gpu, dtype", [("h100-sxm", "fp8-cs"), ("gb200", "fp8-cs"), ("gb200", "mxfp8"),
                                        ("gb300", "mxfp8"), ("b200", "nvfp4")])
def test_a_measured_fp8_kernel_sets_each_directions_speed(gpu, dtype):
    """Compute-bound: FP8 over 16-bit attention is the profile's measured speed of the recipe's kernel, per direction
    (H200's cuDNN FP8 backward is slower than BF16's: 0.80)."""
    from roofline.spec.hardware import fp8_attention_kernel
    flash = C.attention_core()[0]
    fields = {"seq_len": 32768}
    on, off = _x(_spec(True, gpu=gpu, dtype=dtype, fields=fields)), _x(_spec(False, gpu=gpu, dtype=dtype, fields=fields))
    speeds = _spec(True, gpu=gpu, dtype=dtype).hardware.fp8_attention_speed[fp8_attention_kernel(dtype)]
    for i, d in enumerate(("fwd", "bwd")):
        speedup = value_at(C.op_time(flash, d), off) / value_at(C.op_time(flash, d), on)
        assert speedup == pytest.approx(speeds[i], rel=0.02)


@settings(max_examples=20, deadline=None)
@given(window=st.sampled_from([128, 512, 1024]), seq=st.sampled_from([4096, 8192, 32768]),
       skips=st.booleans())
def test_a_kernel_that_ignores_the_window_in_backward_works_the_whole_causal_triangle(window, seq, skips):
    """window_bwd false (cuDNN 9.22's FP8 backward on GB200 / GB300): the windowed layers' FP8 backward FLOPs are the
    full causal layer's, their forward and model FLOPs the window's; window_bwd true: the window's in both."""
    import dataclasses as dc
    fields = {"seq_len": seq, "swa_window": window, "swa_every": 2}
    spec = _spec(True, model="llama3-8b", gpu="gb200", dtype="mxfp8", fields=fields, tp=1, dp=8, global_batch=8)
    fwd, bwd, _ = spec.hardware.fp8_attention_speed["mxfp8"]
    hw = dc.replace(spec.hardware, fp8_attention_speed={"mxfp8": (fwd, bwd, skips)})
    x = inputs(spec.model, spec.plan, hw)
    full, win = [o for o in C.attention_core(window=True) if o.name == "flash_attention"]
    share = x["swa_frac"]
    f_full, f_win = value_at(full.f_fwd, x) / (1 - share), value_at(win.f_fwd, x) / share
    assert f_win < f_full                                   # the forward skips the blocks outside the window
    assert value_at(win.model_f_fwd, x) / share == pytest.approx(f_win)
    expect = 2.5 * (f_win if skips else f_full)
    assert value_at(win.f_bwd, x) / share == pytest.approx(expect)
    off = inputs(spec.model, dc.replace(spec.plan, fp8_attention=False), hw)     # 16-bit attention skips it always
    assert value_at(win.f_bwd, off) / share == pytest.approx(2.5 * f_win)


@pytest.mark.parametrize("bad, msg", [({"fp8": {"fwd": 1.5}}, "fp8_attention_speed.fp8 needs fwd and bwd"),
                                      ({"fp4": {"fwd": 1, "bwd": 1}}, "fp8_attention_speed"),
                                      ({"fp8": {"fwd": 0, "bwd": 1}}, "fp8_attention_speed.fp8.fwd"),
                                      ({"fp8": {"fwd": 1, "bwd": 1, "window_bwd": "no"}}, "window_bwd")])
def test_a_bad_fp8_attention_speed_is_one_line_naming_it(tmp_path, bad, msg):
    import yaml
    from roofline.spec import hardware
    p = tmp_path / "g.yaml"
    p.write_text(yaml.safe_dump({"id": "g", "base": "h100-sxm", "fp8_attention_speed": bad}))
    with pytest.raises(InputError, match=msg):
        hardware.load(str(p))


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
    casts of Q, K, V and dO may cost more than the faster kernel saves, as they do in the model. Where the recipe's
    measured backward kernel is slower than BF16's (H200's cuDNN FP8: 0.80), FP8 attention is a loss at long
    sequences instead, and the more so the longer."""
    gpu, dtype = gpu_dtype
    from roofline.spec import hardware
    fwd, bwd, _ = hardware.load(gpu).fp8_attention_factors(dtype)
    faster = 1 / fwd + 2.5 / bwd < 3.5          # the kernels' time, forward 1 : backward 2.5 of BF16's

    def gain(s):      # on the GPU's work: a Grace host (host_slowdown) may set the pace of a short step
        t = [float(evaluate(gpu_only(_x(_spec(on, gpu=gpu, fields={"seq_len": s}, micro_batch=mb, global_batch=64 * mb,
                                              dtype=dtype))))["step_time"]) for on in (True, False)]
        return 1 - t[0] / t[1]
    g = gain(seq)
    if not faster:
        assert g < 0 and gain(2 * seq) < g
        return
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
