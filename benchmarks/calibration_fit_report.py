"""Print the held-out fit error of the bundled calibrations (the table in docs/calibration.md).

    python benchmarks/calibration_fit_report.py [--folds 5]

Refits both estimate-train-time clusters and the vTrain nccl-tests tables from roofline/data and
prints per class/direction the k-fold held-out MAPE (and median APE), per collective the alpha-beta
MAPE, then the defects found. Takes minutes: progress goes to stderr (one line per step in a log), the
tables to stdout.
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline.base import progress  # noqa: E402
from roofline.views.calibrate import importers, profile  # noqa: E402
from roofline.spec.hardware import load  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folds", type=int, default=5, help="k of the k-fold held-out errors (default 5)")
    args = ap.parse_args()
    data = ROOT / "roofline" / "data"
    for cluster in ("perlmutter", "vista"):
        im = importers.import_estimate_train_time(data / "estimate-train-time", cluster)
        hw = load(im.base)
        peaks = profile.Peaks(hw.peak("fp16"), hw.vector_peak(), hw.hbm_bandwidth, hw.matmul_ceiling, hw.sm_count)
        with progress.phase(f"{cluster}: fit compute efficiencies ({args.folds}-fold)"):
            comp = profile.fit_compute(im.ops, peaks, k=args.folds)
        with progress.phase(f"{cluster}: fit collectives ({args.folds}-fold)"):
            links = profile.fit_links(im.colls, k=args.folds)
        print(f"\n## {cluster} ({im.gpu})\n")
        print("| class | dir | eta | mu | t0 (us) | held-out MAPE | median APE | n | flagged |")
        print("|---|---|---|---|---|---|---|---|---|")
        for cls, (r, _) in comp.items():
            for d, f in r.fits.items():
                print(f"| {cls} | {d} | {f.eta:.3f} | {f.mu:.3f} | {f.t0 * 1e6:.1f} | {r.mape[d]:.1%} | "
                      f"{r.mdape[d]:.1%} | {r.n[d]} | {int(r.flagged[d].sum())} |")
        print("\n| collective | link | call (us) | alpha (us) | busbw (GB/s) | held-out MAPE | n |")
        print("|---|---|---|---|---|---|---|")
        for (kind, link), f in links.items():
            print(f"| {kind} | {link} | {f.call * 1e6:.1f} | {f.alpha * 1e6:.1f} | {f.busbw / 1e9:.2f} | {f.mape:.1%} | {f.n} |")
        print("\nDefects:")
        for d in im.defects:
            print(f"- {d}")
    tables = [importers.import_nccl_tests(f) for f in sorted((data / "vtrain-nccl").glob("AR_GPU*"))]
    with progress.phase(f"vTrain nccl-tests: fit all-reduce ({args.folds}-fold)"):
        _, _, rep = profile.nccl_tests_profile(tables, "a100-dgx-nccl", k=args.folds)
    f = rep["fit"]
    print(f"\n## vTrain nccl-tests, A100 NVSwitch all-reduce\n\ncall {f.call * 1e6:.2f} us, alpha {f.alpha * 1e6:.2f} us, busbw "
          f"{f.busbw / 1e9:.1f} GB/s, held-out MAPE {f.mape:.1%} (n {f.n}); per rank count {rep['by_p']}")


if __name__ == "__main__":
    main()
