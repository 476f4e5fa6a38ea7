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


def fit_fp4(gpu: str = "b300") -> float:
    """max_matmul_fp4 (FLOP/s) for which the model's NVFP4 layer equals the benchmark's on ``gpu``."""
    hw = hardware.load(PROFILES[gpu])
    target = precision.TE_GEMM_BENCHMARK[gpu]["nvfp4"]
    f = lambda r: layer_ms(dataclasses.replace(hw, matmul_fp4=r), "nvfp4") - target   # noqa: E731
    return brentq(f, 1e13, hw.peak_flops["fp4"], xtol=1e9)


def rows() -> list[tuple]:
    """(gpu, precision, measured ms, model ms) for every figure of the benchmark."""
    out = []
    for gpu, figures in precision.TE_GEMM_BENCHMARK.items():
        hw = hardware.load(PROFILES[gpu])
        for dtype, ms in figures.items():
            out.append((gpu, dtype, ms, layer_ms(hw, dtype)))
    return out


def main() -> None:
    print(f"Transformer Engine GEMM benchmark, pre-quantized (kernels only): 12 GEMMs of one layer, M={TOKENS}, "
          f"hidden {HIDDEN}, FFN {FFN}")
    print("| GPU (profile) | precision | measured ms | model ms | model / measured |")
    print("|---|---|---|---|---|")
    for gpu, dtype, ms, model in rows():
        print(f"| {gpu} ({PROFILES[gpu]}) | {dtype} | {ms:.3f} | {model:.3f} | {model / ms:.3f} |")
    r = fit_fp4("b300")
    print(f"\nb300 max_matmul_fp4 fitted to the NVFP4 figure: {r / 1e12:.0f} TFLOP/s "
          f"(the profile states {hardware.load('b300').matmul_fp4 / 1e12:.0f}; FP4 peak "
          f"{hardware.load('b300').peak_flops['fp4'] / 1e12:.0f})")


if __name__ == "__main__":
    main()
