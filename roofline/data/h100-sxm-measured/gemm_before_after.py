"""Held-out GEMM fit of the H100 GEMM sweeps with and without the busy-wait of `calibrate compute` (the table in
docs/calibration.md; tests/test_small_gpt_step.py keeps the two equal).

    PYTHONPATH=. python roofline/data/h100-sxm-measured/gemm_before_after.py

samples_gemm_nolead.csv: the sweep timed as before commit 31d1623 (no busy-wait: the GPU idles while the host
issues each call); samples_gemm_lead.csv: with the busy-wait queued before each timed call; both from one run of
gemm_lead_sweep.py on the lent H100. Each is fitted as `calibrate compute` fits its GEMM samples (datasheet
peaks of h100-sxm, shared dhalf, 5-fold held-out MAPE).
"""
import csv
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FILES = (("no busy-wait (GPU idle while the host issues)", "samples_gemm_nolead.csv"),
         ("busy-wait queued before each call", "samples_gemm_lead.csv"))


def gemm_samples(path):
    from roofline.views.calibrate.importers import OpSamples
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["class"] == "gemm"]
    out = []
    for d in ("fwd", "bwd"):
        rr = [r for r in rows if r["direction"] == d]
        col = lambda k: np.array([float(r[k]) for r in rr])  # noqa: E731
        out.append(OpSamples("gemm", "gemm", d, col("flops"), col("bytes"), col("dmin"), col("t_s"), np.ones(len(rr), bool)))
    return out


def fit(path):
    from roofline.views.calibrate import profile
    from roofline.spec.hardware import load
    hw = load("h100-sxm")
    peaks = profile.Peaks(hw.peak("bf16"), hw.vector_peak(), hw.hbm_bandwidth, hw.matmul_ceiling, hw.sm_count)
    r, _ = profile.fit_compute(gemm_samples(path), peaks)["gemm"]
    return r


def table() -> str:
    out = ["| GEMM timing | t0 fwd (us) | t0 bwd (us) | eta fwd | eta bwd | dhalf | held-out MAPE fwd | bwd | n kept |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, name in FILES:
        r = fit(HERE / name)
        f, b = r.fits["fwd"], r.fits["bwd"]
        out.append(f"| {label} | {f.t0 * 1e6:.1f} | {b.t0 * 1e6:.1f} | {f.eta:.3f} | {b.eta:.3f} | {r.dhalf:.0f} | "
                   f"{r.mape['fwd'] * 100:.1f} % | {r.mape['bwd'] * 100:.1f} % | {r.n['fwd'] + r.n['bwd']} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parents[2]))
    print(table(), end="")
