"""Low-precision GEMM kernel rates (formula input lp_rate): the recipe's kernels against a 16-bit GEMM at the same
fraction of peak, from Transformer Engine's published GEMM benchmark (base/precision.py TE_GEMM_BENCHMARK), and the
FP4 ceiling of Blackwell Ultra (profile key max_matmul_fp4)."""
import dataclasses
from pathlib import Path

import pytest
import sympy as sp
import yaml

from conftest import load_benchmark
from roofline.base import precision
from roofline.base.errors import InputError
from roofline.model.formulas import compute as C
from roofline.model.predict import hardware_inputs, inputs, evaluate, value_at
from roofline.spec import hardware
from roofline.spec.resolve import resolve

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    return load_benchmark("te_gemm_benchmark")


def test_the_kernel_rates_are_the_benchmarks_ratios_by_hand():
    # B300: BF16 13.102 ms, FP8 current scaling 6.812, MXFP8 7.161; H200 NVL: BF16 31.968, FP8 current 16.785 (per layer)
    fp8 = (13.102 / 6.812 / 2 + 31.968 / 16.785 / 2) / 2
    assert precision.get("fp8").gemm_rate == pytest.approx(fp8) == precision.get("fp8-cs").gemm_rate
    assert precision.get("fp8-block").gemm_rate < fp8                      # Hopper blockwise: slower kernels
    assert precision.get("fp8-block").gemm_rate <= 1.75 / 2                # cuBLAS 12.9: "up to 1.75x" over BF16
    assert precision.get("mxfp8").gemm_rate == pytest.approx(13.102 / 7.161 / 2)
    assert precision.get("nvfp4").gemm_rate == 1.0
    hw = hardware.load("b200")
    assert [hw.lp_rate(d) for d in ("bf16", "fp16", "nvfp4")] == [1.0, 1.0, 1.0]
    assert hw.lp_rate("mxfp8") == pytest.approx(0.9148, abs=1e-4)


def test_fp8_blockwise_rate_is_the_autocast_fit_on_hopper_and_mxfp8s_on_blackwell():
    bench = _bench()
    assert bench.fit_block_rate("h200-nvl") == pytest.approx(precision.GEMM_RATE_FP8_BLOCK, abs=1e-3)
    assert hardware.load("h100-sxm").lp_rate("fp8-block") == pytest.approx(precision.GEMM_RATE_FP8_BLOCK)
    assert hardware.load("b200").lp_rate("fp8-block") == pytest.approx(precision.GEMM_RATE_MXFP8)   # emulated
    assert hardware.load("b200").lp_rate("fp8-cs") == pytest.approx(precision.GEMM_RATE_FP8)         # unchanged


def test_the_autocast_figures_are_priced_within_twelve_percent():
    for gpu, dtype, measured, model in _bench().autocast_rows():      # kernels and the casts of input and weight
        assert model == pytest.approx(measured, rel=0.12), (gpu, dtype)


def test_blackwell_ultra_fp4_gemms_reach_their_ceiling_not_the_peak():
    b300 = hardware.load("b300")
    ceiling = 1769.0 / 2250.0                                   # max_matmul / bf16 peak
    assert b300.matmul_ceiling == pytest.approx(ceiling)
    assert b300.lp_rate("nvfp4") == pytest.approx(6266.0 / (ceiling * 13500.0))
    assert b300.lp_rate("mxfp8") == pytest.approx(precision.get("mxfp8").gemm_rate)   # the FP4 cap is FP4's only
    # a large NVFP4 GEMM at the ceiling runs at max_matmul_fp4 (x the sustained clock), BF16 at max_matmul
    x4, x16 = ({**hardware_inputs(b300, d), "gpu_z": 0.0, "hp_frac": 0.0, "exp_launch": 1.0, "act_bytes": 2,
                "t0_gemm_fwd": 0.0} for d in ("nvfp4", "bf16"))
    g = C.gemm("g", 65536, 16384, 16384)
    rate = lambda x: g.f_fwd / value_at(C.op_time(g, "fwd"), x)          # noqa: E731
    assert rate(x4) / rate(x16) == pytest.approx(6266.0 / 1769.0, rel=0.02)


def test_b300s_sustained_clock_is_the_one_the_benchmark_fits():
    assert _bench().fit_clock("b300") == pytest.approx(hardware.load("b300").sustained_clock, abs=1e-3)


def test_b300s_fp4_ceiling_is_the_one_the_benchmark_fits():
    bench = _bench()
    stated = yaml.safe_load((ROOT / "roofline/spec/hardware/profiles/b300.yaml").read_text())["max_matmul_fp4"]
    assert stated == "6266 TFLOP/s"
    assert bench.fit_fp4("b300") == pytest.approx(6266e12, rel=1e-3)
    for gpu, dtype, measured, model in bench.rows():                        # the model on the benchmark's kernels
        assert model == pytest.approx(measured, rel=0.04), (gpu, dtype)


def test_a_low_precision_gemm_takes_longer_by_one_over_its_kernel_rate_and_mfu_keeps_the_datasheet_peak():
    spec = resolve("llama3-70b", {"tp": 4, "dp": 2, "micro_batch": 1, "global_batch": 16, "dtype": "mxfp8"}, "b200",
                   "megatron-core")
    x = {**inputs(spec.model, spec.plan, spec.hardware), "t0_gemm_fwd": 0.0}     # the fixed time does not scale
    g = C.gemm("g", 65536, 8192, 8192)
    t = value_at(C.op_time(g, "fwd"), x)
    assert value_at(C.op_time(g, "fwd"), {**x, "lp_rate": 1.0}) == pytest.approx(t * x["lp_rate"], rel=1e-9)
    out = evaluate(inputs(spec.model, spec.plan, spec.hardware))
    n = spec.plan.n_gpus
    assert float(out["mfu"]) == pytest.approx(float(out["flops"]) / (float(out["step_time"]) * n * 4.5e15), rel=1e-9)


def test_profile_checks_max_matmul_fp4(tmp_path):
    base = yaml.safe_load((ROOT / "roofline/spec/hardware/profiles/b300.yaml").read_text())
    too_high = {**base, "id": "x", "max_matmul_fp4": "14 PFLOP/s"}
    p = tmp_path / "x.yaml"
    p.write_text(yaml.safe_dump(too_high))
    with pytest.raises(InputError, match=r"max_matmul_fp4 must be positive and at most the fp4 peak"):
        hardware.load(str(p))
    no_fp4 = {**base, "id": "y", "peak_flops": {k: v for k, v in base["peak_flops"].items() if k != "fp4"}}
    p.write_text(yaml.safe_dump(no_fp4))
    with pytest.raises(InputError, match=r"none stated"):
        hardware.load(str(p))
    with pytest.raises(InputError, match="max_matmul_fp4"):
        dataclasses.replace(hardware.load("b300"), matmul_fp4=-1.0)


def test_blackwell_writes_no_transposed_fp8_copy_for_per_tensor_recipes():
    """Transformer Engine's per-tensor FP8 quantizers write a transposed copy only where the FP8 GEMMs take TN layouts
    only (csrc/quantizer.cpp with_transpose); Blackwell's take any layout: one byte per element less."""
    assert [hardware.load(g).fp8_non_tn for g in ("b200", "gb200", "b300", "gb300", "h100-sxm", "h200", "gh200")] == \
        [True] * 4 + [False] * 3
    assert {n: precision.get(n).transpose_bytes for n in ("fp8", "fp8-cs", "fp8-block", "mxfp8", "nvfp4", "bf16")} == \
        {"fp8": 1.0, "fp8-cs": 1.0, "fp8-block": 0.0, "mxfp8": 0.0, "nvfp4": 0.0, "bf16": 0.0}
    ops = C.layer_ops(C.d_head, sp.Symbol("ffn_hidden"), sp.Integer(0), variants=True)
    q = next(o for o in ops if o.name == "quantize")
    for dtype, hopper_bytes, blackwell_bytes in (("fp8", 4, 3), ("fp8-cs", 6, 5), ("mxfp8", None, 4.0625)):
        gpus = ("h100-sxm", "b200") if hopper_bytes else ("b200",)     # MXFP8 runs on Blackwell only
        spec = {g: resolve("llama3-8b", {"tp": 1, "dp": 8, "micro_batch": 1, "global_batch": 8, "dtype": dtype}, g,
                           "megatron-core") for g in gpus}
        x = {g: inputs(s.model, s.plan, s.hardware) for g, s in spec.items()}
        elems = value_at(q.f_fwd, x["b200"]) / 2                       # 2 FLOP per quantized element
        if hopper_bytes:
            assert value_at(q.b_fwd, x["h100-sxm"]) == pytest.approx(hopper_bytes * elems)
        assert value_at(q.b_fwd, x["b200"]) == pytest.approx(blackwell_bytes * elems)



def test_fp8_param_gather_halves_the_parameter_all_gather_of_per_tensor_fp8_only():
    """Megatron-Core --fp8-param-gather: the distributed optimizer all-gathers FP8 weights (1 B) under delayed or current
    scaling; MXFP8 weights are gathered in BF16 through the gradient buffer and cast after (2 B)."""
    from roofline.model.formulas import step as ST
    base = {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 8, "sharding": "distributed"}
    for dtype, pg in (("fp8-cs", 1.0), ("fp8", 1.0), ("mxfp8", 2.0), ("nvfp4", 2.0)):
        on = resolve("llama3-8b", {**base, "dtype": dtype, "fp8_param_gather": True}, "b200", "megatron-core")
        off = resolve("llama3-8b", {**base, "dtype": dtype}, "b200", "megatron-core")
        # the bytes alone: no per-step latency or per-call time
        x_on, x_off = ({k: (0.0 if k.startswith(("alpha_", "call_")) else v)
                        for k, v in inputs(s.model, s.plan, s.hardware).items()} for s in (on, off))
        assert (x_on["pg_bytes"], x_off["pg_bytes"]) == (pg, 2.0), dtype
        _, _, gather, _ = ST.dp_volumes()
        assert value_at(gather, x_on) == pytest.approx(value_at(gather, x_off) * pg / 2)
    with pytest.raises(InputError, match=r"fp8_param_gather needs a low-precision recipe .*got dtype bf16"):
        resolve("llama3-8b", {**base, "fp8_param_gather": True}, "b200", "megatron-core")


@pytest.mark.parametrize("dtype, settings, expected", [
    ("FP8-CS", "recipe v0.4.0(0fbfe7d3):scripts/performance/configs/llama/llama3_workload_base_configs.py::X", True),
    ("FP8-CS", "fp8_param_gather=False", False),
    ("FP8-CS", "", True),                      # the fixture's framework column names Megatron-Bridge
    ("BF16", "recipe v0.4.0:scripts/performance/configs/llama/x.py::Y", False),
])
def test_validate_reads_the_fp8_parameter_gather(bridge_row, dtype, settings, expected):
    assert bridge_row(dtype, settings).plan.fp8_param_gather is expected


@pytest.mark.parametrize("gpu, ok", [("h100-sxm", False), ("h200", False), ("mi300x", False), ("a100-sxm4-80gb", False),
                                     ("b200", True), ("gb200", True), ("b300", True), ("gb300", True), ("mi355x", True)])
def test_mxfp8_needs_mx_block_scaled_tensor_cores(gpu, ok):
    """MXFP8 runs on Blackwell and CDNA 4 only (Transformer Engine: "MXFP8 and NVFP4 require Blackwell"); elsewhere the
    plan is refused in one line naming the profile key, not priced at the FP8 peak."""
    hw = hardware.load(gpu)
    if ok:
        assert hw.peak("mxfp8") == hw.peak_flops["fp8"]
    else:
        with pytest.raises(InputError, match="mx_formats"):
            hw.peak("mxfp8")
