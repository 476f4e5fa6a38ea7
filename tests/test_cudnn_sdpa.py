"""cuDNN's fused attention as the profiles price it: NVIDIA cudnn-frontend's published SDPA training benchmark
(roofline/data/cudnn-sdpa) against each profile's FlashAttention-2 prior at the same clock
(roofline/views/calibrate/cudnn_sdpa.py)."""
import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from roofline.spec import hardware
from roofline.views.calibrate import cudnn_sdpa as C


def test_the_bundled_files_hold_the_measured_gpus_and_skip_failed_and_deterministic_rows():
    shapes = C.load()
    assert {s.gpu for s in shapes} == {"gb200", "gb300", "h200"}
    causal_bf16 = [s for s in shapes if s.dtype == "bfloat16" and s.causal and s.window is None]
    per_gpu = {g: sum(s.gpu == g for s in causal_bf16) for g in ("gb200", "gb300", "h200")}
    # Llama 3.1 at 5 sequences on each; DeepSeek-V3 and Kimi K2.6 (MLA) at 5 each on the Blackwell parts; the H200's
    # MLA rows ran only with a deterministic backward and are not read
    assert per_gpu == {"gb200": 15, "gb300": 15, "h200": 5}
    assert all(s.fwd_s > 0 and s.bwd_s > 0 for s in shapes)


@pytest.mark.parametrize("gpu, d", [("gb200", 128), ("gb200", 192), ("gb300", 128), ("gb300", 192), ("h200", 128)])
def test_each_measured_profiles_cudnn_speed_is_the_median_of_its_shapes(gpu, d):
    med, n = C.medians()[(gpu, d)]
    assert n >= 5
    assert hardware.load(gpu).attention_factor("cudnn", d) == pytest.approx(med, abs=0.01)


@pytest.mark.parametrize("sibling, measured", [("b200", "gb200"), ("b300", "gb300"), ("h100-sxm", "h200"),
                                               ("gh200", "h200"), ("h100-pcie", "h200"), ("h20", "h200"),
                                               ("h800", "h200"), ("h200-nvl", "h200")])
def test_the_same_die_takes_the_measured_parts_speed(sibling, measured):
    a, b = hardware.load(sibling), hardware.load(measured)
    for d in (64, 128, 192):
        assert a.attention_factor("cudnn", d) == b.attention_factor("cudnn", d)


@pytest.mark.parametrize("gpu", ["gb200", "gb300", "h200"])
def test_head_dim_64_keeps_the_flashattention3_papers_proportion(gpu):
    hw = hardware.load(gpu)
    assert hw.attention_factor("cudnn", 64) == pytest.approx(hw.attention_factor("cudnn", 128) * 1.4 / 1.6, abs=0.006)


@settings(max_examples=20, deadline=None)
@given(clock=st.floats(min_value=0.5, max_value=1.0))
def test_the_prior_is_compared_at_boost_clock_whatever_the_profiles_sustained_clock(clock):
    """The benchmark times bursts at boost clock: the restated prior must not depend on the sustained clock the profile
    prices a step at (a profile at half the clock has a prior twice as slow, taken back by the same factor). Only the
    kernel's fixed start-up and HBM traffic, which the clock does not scale, move it (under 1 %)."""
    sh = next(s for s in C.load() if s.gpu == "gb300" and s.config == "llama3.1" and s.causal and s.seq == 8192
              and s.dtype == "bfloat16")
    base = hardware.load("gb300")
    ref = C.prior_times(sh, base)
    got = C.prior_times(sh, dataclasses.replace(base, sustained_clock=clock))
    assert got == pytest.approx(ref, rel=0.01)


def test_the_speed_of_a_shape_is_prior_over_measured_and_blackwell_ultra_is_faster_than_blackwell():
    """Every causal BF16 shape both Blackwell parts ran is faster on GB300 (Blackwell Ultra doubles the SFU's exponential
    throughput) by 5-30 %, and the restated speed is the prior's time over the measured one."""
    shapes = {(s.config, s.seq, s.heads, s.gpu): s for s in C.load()
              if s.dtype == "bfloat16" and s.causal and s.window is None}
    pairs = [(shapes[k[:3] + ("gb200",)], shapes[k[:3] + ("gb300",)]) for k in shapes if k[3] == "gb200"]
    assert len(pairs) == 15
    for a, b in pairs:
        ratio = (a.fwd_s + a.bwd_s) / (b.fwd_s + b.bwd_s)
        assert 1.05 < ratio < 1.3
        f, w = C.prior_times(a)
        assert C.factor(a) == pytest.approx((f + w) / (a.fwd_s + a.bwd_s))


@pytest.mark.parametrize("gpu, recipe", [("gb200", "fp8"), ("gb200", "mxfp8"), ("gb300", "fp8"), ("gb300", "mxfp8"),
                                         ("h200", "fp8")])
def test_each_measured_profiles_fp8_attention_speed_is_the_median_over_bf16(gpu, recipe):
    ratios = C.fp8_over_bf16()
    fwd, bwd, _ = hardware.load(gpu).fp8_attention_speed[recipe]
    assert fwd == pytest.approx(ratios[(gpu, recipe, "fwd")], abs=0.01)
    assert bwd == pytest.approx(ratios[(gpu, recipe, "bwd")], abs=0.01)


def test_window_bwd_is_false_exactly_where_the_windowed_fp8_backward_grows_as_the_whole_triangle():
    """BF16's windowed backward grows as s (it skips the blocks outside the window); the FP8 and MXFP8 backward on
    GB200 / GB300 grow as s^2 (every causal block): the profiles' window_bwd says which."""
    growth = C.window_bwd_growth()
    assert all(0.8 < k < 1.2 for (g, dt), k in growth.items() if dt == "bfloat16")
    fp8 = {k: v for k, v in growth.items() if k[1] != "bfloat16"}
    assert set(fp8) == {("gb200", "fp8"), ("gb200", "mxfp8"), ("gb300", "fp8"), ("gb300", "mxfp8")}
    for (gpu, recipe), k in fp8.items():
        assert k > 1.7
        assert hardware.load(gpu).fp8_attention_speed[recipe][2] is False


@pytest.mark.parametrize("sibling, measured", [("b200", "gb200"), ("b300", "gb300"), ("h100-sxm", "h200"),
                                               ("gh200", "h200"), ("h100-pcie", "h200"), ("h20", "h200"),
                                               ("h800", "h200"), ("h200-nvl", "h200")])
def test_the_same_die_takes_the_measured_parts_fp8_attention(sibling, measured):
    for dtype in ("fp8-cs", "mxfp8"):
        a, b = hardware.load(sibling), hardware.load(measured)
        if dtype == "mxfp8" and not b.mx_formats:
            continue
        assert a.fp8_attention_factors(dtype) == b.fp8_attention_factors(dtype)


def test_the_table_lists_every_shape_and_the_profiles_values():
    t = C.table()
    assert t.count("| gb300 | llama3.1 |") == 5 and t.count("| h200 | llama3.1 |") == 5
    assert "| gb300 | 128 | 5 | 1.90 | 1.90 |" in t
