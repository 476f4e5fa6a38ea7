"""Low-precision GEMM kernels against Transformer Engine's own GEMM benchmark.

Transformer Engine publishes the output of its GEMM benchmark (docs/examples/gemm_profiling/gemm_profiling.rst
@1609c890, benchmarks/gemm/benchmark_gemm.py ``--pre-quantize``: kernels only, no quantization) for the 12 GEMMs of
one transformer layer of a 5B config: M = 31 x 512 = 15872 tokens, hidden 4096, FFN 16384 (QKV 4096 -> 12288,
attention out 4096 -> 4096, MLP up 4096 -> 16384, MLP down 16384 -> 4096; forward, data gradient and weight gradient
of each). base/precision.py TE_GEMM_BENCHMARK holds its per-layer totals.

This script prices the same 12 GEMMs with the model (formulas/compute.py ``gemm`` and ``op_time``, each as the
kernel of its own shape, on a profile and precision) and prints model against measured. It also fits the one profile
constant the benchmark determines: ``max_matmul_fp4`` of b300.yaml, the FP4 rate at which NVFP4 GEMMs reach their
ceiling on Blackwell Ultra (the value for which the model's NVFP4 layer total equals the benchmark's). The kernel
rates of the FP8 recipes are not fitted here: they are the benchmark's own ratios (precision.py gemm_rate).

    python benchmarks/te_gemm_benchmark.py
"""
from __future__ import annotations

import dataclasses

from scipy.optimize import brentq

from roofline.base import precision
from roofline.model.formulas import compute as C
from roofline.model.predict import hardware_inputs, value_at
from roofline.spec import hardware

TOKENS, HIDDEN, FFN = 31 * 512, 4096, 16384
FPROP = ((TOKENS, HIDDEN, 3 * HIDDEN), (TOKENS, HIDDEN, HIDDEN), (TOKENS, HIDDEN, FFN), (TOKENS, FFN, HIDDEN))
DGRAD = tuple((m, n, k) for m, k, n in FPROP)
WGRAD = tuple((k, m, n) for m, k, n in FPROP)
PROFILES = {"b300": "b300", "h200-nvl": "h200-nvl"}      # benchmark GPU -> bundled profile


def layer_ms(hw, dtype: str) -> float:
    """The model's time of the benchmark's 12 GEMMs (ms), each a kernel of its own shape at ``dtype``'s peak; one GPU,
    kernels only (no quantization, no weight-gradient accumulation)."""
    x = {**hardware_inputs(hw, dtype), "act_bytes": 2, "grad_bytes": 2, "wgrad_fusion": 0, "q_saved": 1, "q_bytes": 0,
         "gpu_z": 0.0, "hp_frac": 0.0, "exp_launch": 1.0}
    return 1e3 * sum(value_at(C.op_time(C.gemm("g", m, k, n), "fwd"), x) for m, k, n in FPROP + DGRAD + WGRAD)


def autocast_ms(hw, dtype: str, rate: float | None = None) -> float:
    """The model's time of the benchmark's autocast mode (ms): each of the 12 GEMMs timed as one te.Linear forward of
    its shape under te.autocast (benchmarks/gemm/benchmark_gemm.py benchmark_fp8_current, _fp8_delayed, _fp8,
    _fp8_block): the kernel, and the casts of its M x K input and K x N weight (neither cached between calls; both
    usages made, as a Linear whose weight requires a gradient keeps them), priced as the model prices a recipe's casts
    (formulas/compute.py quantize_op: ``q_bytes`` per element at the elementwise roofline). ``rate``: the recipe's
    kernel rate instead of the profile's (lp_rate)."""
    x = {**hardware_inputs(hw, dtype), "act_bytes": 2, "grad_bytes": 2, "wgrad_fusion": 0, "q_saved": 1,
         "gpu_z": 0.0, "hp_frac": 0.0, "exp_launch": 1.0, "q_bytes": precision.get(dtype).q_bytes,
         "q_trans": precision.get(dtype).transpose_bytes}
    if rate is not None:
        x["lp_rate"] = rate
    total = 0.0
    for m, k, n in FPROP + DGRAD + WGRAD:
        g = C.gemm("g", m, k, n)
        total += value_at(C.op_time(g, "fwd"), x) + value_at(C.op_time(C.quantize_op([g, C.gemm("w", k, n, 1)]),
                                                                         "fwd"), x)
    return 1e3 * total


def fit_block_rate(gpu: str = "h200-nvl") -> float:
    """The kernel rate (lp_rate) of FP8 blockwise GEMMs for which the model's autocast layer equals the benchmark's on
    ``gpu`` (Hopper, where the recipe runs natively through cuBLASLt's VEC128 / BLK128x128 scale modes; its
    pre-quantized figure is not published: "Hopper's cuBLAS does not support" the 2D-by-2D inputs that mode makes)."""
    hw = hardware.load(PROFILES[gpu])
    target = precision.TE_GEMM_AUTOCAST[gpu]["fp8-block"]
    return brentq(lambda r: autocast_ms(hw, "fp8-block", r) - target, 0.2, 1.0, xtol=1e-6)


def autocast_rows() -> list[tuple]:
    """(gpu, precision, measured ms, model ms) for every autocast figure (casts included)."""
    return rows(precision.TE_GEMM_AUTOCAST, autocast_ms)


def fit_clock(gpu: str = "b300") -> float:
    """The sustained clock ratio for which the model's BF16 layer equals the benchmark's on ``gpu``: its GEMMs ran back
    to back (100 timed iterations of each shape) at the power-capped clock a training run sees."""
    hw = hardware.load(PROFILES[gpu])
    target = precision.TE_GEMM_BENCHMARK[gpu]["bf16"]
    return brentq(lambda k: layer_ms(dataclasses.replace(hw, sustained_clock=k), "bf16") - target, 0.3, 1.0,
                  xtol=1e-6)


def fit_fp4(gpu: str = "b300") -> float:
    """max_matmul_fp4 (FLOP/s) for which the model's NVFP4 layer equals the benchmark's on ``gpu``."""
    hw = hardware.load(PROFILES[gpu])
    target = precision.TE_GEMM_BENCHMARK[gpu]["nvfp4"]
    f = lambda r: layer_ms(dataclasses.replace(hw, matmul_fp4=r), "nvfp4") - target   # noqa: E731
    return brentq(f, 1e13, hw.peak_flops["fp4"], xtol=1e9)


def rows(table: dict | None = None, price=None) -> list[tuple]:
    """(gpu, precision, measured ms, model ms) for every figure of the benchmark: ``table`` (default the pre-quantized
    one) priced by ``price`` (default ``layer_ms``)."""
    table, price = table or precision.TE_GEMM_BENCHMARK, price or layer_ms
    out = []
    for gpu, figures in table.items():
        hw = hardware.load(PROFILES[gpu])
        for dtype, ms in figures.items():
            out.append((gpu, dtype, ms, price(hw, dtype)))
    return out


def main() -> None:
    print(f"Transformer Engine GEMM benchmark, pre-quantized (kernels only): 12 GEMMs of one layer, M={TOKENS}, "
          f"hidden {HIDDEN}, FFN {FFN}")
    print("| GPU (profile) | precision | measured ms | model ms | model / measured |")
    print("|---|---|---|---|---|")
    for gpu, dtype, ms, model in rows():
        print(f"| {gpu} ({PROFILES[gpu]}) | {dtype} | {ms:.3f} | {model:.3f} | {model / ms:.3f} |")
    print("\nAutocast (casts of each GEMM's input and weight included, neither cached between calls):")
    print("| GPU (profile) | precision | measured ms | model ms | model / measured |")
    print("|---|---|---|---|---|")
    for gpu, dtype, ms, model in autocast_rows():
        print(f"| {gpu} ({PROFILES[gpu]}) | {dtype} | {ms:.3f} | {model:.3f} | {model / ms:.3f} |")
    rb = fit_block_rate("h200-nvl")
    print(f"\nFP8 blockwise kernel rate on Hopper fitted to the h200-nvl autocast figure: {rb:.3f} "
          f"(precision.py GEMM_RATE_FP8_BLOCK states {precision.GEMM_RATE_FP8_BLOCK:.3f}; per-tensor FP8 "
          f"{precision.GEMM_RATE_FP8:.3f})")
    k = fit_clock("b300")
    print(f"\nb300 sustained_clock fitted to the BF16 figure: {k:.3f} (the profile states "
          f"{hardware.load('b300').sustained_clock:.3f}; B200 measured 0.8145)")
    r = fit_fp4("b300")
    print(f"\nb300 max_matmul_fp4 fitted to the NVFP4 figure: {r / 1e12:.0f} TFLOP/s "
          f"(the profile states {hardware.load('b300').matmul_fp4 / 1e12:.0f}; FP4 peak "
          f"{hardware.load('b300').peak_flops['fp4'] / 1e12:.0f})")


if __name__ == "__main__":
    main()
