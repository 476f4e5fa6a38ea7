"""The SimuMax B200 runs priced on the datasheet B200 profile and on the profile calibrated from that node's own
GEMM microbenchmarks (`calibrate import simumax`): step-time error per row group, the fitted GEMM curve beside the
datasheet prior's, and what is left (attention-bound 128K rows keep the prior's attention).

    python benchmarks/simumax_b200.py

Both profiles ship (b200, b200-simumax); the rows are the 43 SimuMax rows of the bundled memory_measured.csv. Nothing
here is fitted to those rows: the GEMM curve comes from SimuMax's matmul table alone.
"""
from __future__ import annotations

import numpy as np

from roofline.base.units import TERA
from roofline.spec import hardware
from roofline.views.calibrate import fit, importers
from roofline.views import validate as V

GROUPS = (("dense, seq 4K", lambda r: r["n_experts"] in (None, 0, 1) and r["seq_len"] <= 8192),
          ("MoE, seq 4K", lambda r: (r["n_experts"] or 0) > 1),
          ("context parallel, seq 32K", lambda r: r["seq_len"] == 32768),
          ("context parallel, seq 128K", lambda r: r["seq_len"] == 131072))


def errors(rows, profile):
    hw = hardware.load(profile)
    cases = [V.build_case(r, hw) for r in rows]
    out = V.evaluate_cases(cases)
    return out["step_time"] / np.array([c.measured for c in cases]) - 1


def gemm_rate(profile, m, k, n):
    """TFLOP/s the profile's forward GEMM roofline (calibrate/fit.gpu_time, the predictor's op_time) gives an
    m x k x n bf16 GEMM, sustained clock included."""
    hw = hardware.load(profile)
    # grad_bytes only sizes the weight gradient's main-grad traffic, which a forward rate does not read
    F, B, _, _, dmin, *_ = importers.op_sample_metrics("gemm_sized", gemm_m=float(m), gemm_k=float(k),
                                                        gemm_n=float(n), gemm_groups=1.0, grad_bytes=4.0)
    s = fit.Samples(F / (hw.peak("bf16") * hw.sustained_clock), B / hw.hbm_bandwidth, dmin, F)
    t = fit.gpu_time(s, fit.Roofline(*hw.efficiency["gemm"]["fwd"]), hw.dhalf)
    return float(F[0] / t[0]) / TERA


def main() -> int:
    rows = [r for r in V.read(V.dataset_path("memory")) if "SimuMax" in (r.get("source") or "")]
    rows = [r for r in rows if r.get("measured_iter_time_s")]
    base, cal = errors(rows, "b200"), errors(rows, "b200-simumax")
    print(f"SimuMax B200 runs (n={len(rows)}): step-time error, datasheet prior vs GEMMs calibrated from SimuMax")
    print(f"{'rows':28} {'n':>3}  {'b200 MAPE':>9} {'signed':>7}  {'b200-simumax MAPE':>17} {'signed':>7}")
    for name, sel in (("all", lambda r: True), *GROUPS):
        idx = np.array([sel(r) for r in rows])
        if idx.any():
            b, c = base[idx], cal[idx]
            print(f"{name:28} {idx.sum():3d}  {np.mean(np.abs(b)):9.1%} {np.mean(b):+7.1%}  {np.mean(np.abs(c)):17.1%} "
                  f"{np.mean(c):+7.1%}")
    print()
    print("forward GEMM rate (TFLOP/s, sustained clock included), datasheet prior vs SimuMax fit:")
    for m, k, n in ((4096, 8192, 8192), (4096, 8192, 28672), (4096, 16384, 53248), (4096, 5120, 1536)):
        print(f"  {m} x {k} x {n:<6}  b200 {gemm_rate('b200', m, k, n):7.0f}   b200-simumax "
              f"{gemm_rate('b200-simumax', m, k, n):7.0f}")
    rows = importers.simumax_wgrad_ratios(importers.SIMUMAX_B200, "b200")
    print()
    print("grouped weight gradients (SimuMax's group_matmul, bwd_grad_w): time accumulating into an fp32 main grad over")
    print("a bf16 one, measured vs this package's backward roofline on the b200 prior (main-grad traffic 8 vs 4 bytes")
    print("per weight element; without that term both would cost the same, ratio 1.00):")
    print(f"  {'experts':>7} {'tokens':>6} {'n':>5} {'k':>5}  {'measured':>8} {'predicted':>9}")
    for r in rows:
        print(f"  {r['groups']:7d} {r['m']:6d} {r['n']:5d} {r['k']:5d}  {r['measured']:8.2f} {r['predicted']:9.2f}")
    err = lambda p: np.mean([abs(np.log(p(r) / r["measured"])) for r in rows])  # noqa: E731
    print(f"  mean |log(predicted / measured)|: {err(lambda r: r['predicted']):.3f} with the term, "
          f"{err(lambda r: 1.0):.3f} without")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
