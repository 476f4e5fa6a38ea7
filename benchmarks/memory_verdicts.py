"""Is every "fits" verdict right? The model's verdict against what each measured run implies.

    python benchmarks/memory_verdicts.py [CSV ...] [--margin 0.0]

For every row with a measured peak memory (``measured_peak_memory_gib``; default: the bundled
roofline/data/validation/memory_measured.csv, the same file as ../shared/validation), the model's verdict is
``predict.fits``: predicted memory (the heavier pipeline stage) + reserve (CUDA context, NCCL buffers, allocator
fragmentation) <= capacity x (1 - margin). What the measurement implies: a run that was measured did fit; a row whose
notes state an out-of-memory failure (``OOM``) did not. Prints each disagreement, then the count, and exits 1 when
there is one. Rows the model cannot price (validate's skips) are listed apart.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from roofline.views import validate as V  # noqa: E402
from roofline.model.predict import fits  # noqa: E402

GIB = 2.0 ** 30
OOM = re.compile(r"\b(oom|out of memory|outofmemory\w*)\b", re.IGNORECASE)


def measured_fits(row: dict) -> bool:
    """What the row implies: it ran (and was measured) unless its notes say it ran out of memory."""
    return not OOM.search(row.get("notes") or "")


def verdicts(rows: list[dict], margin: float = 0.0) -> tuple[list[dict], list[dict]]:
    """(one dict per row with a measured peak, rows skipped with the reason)."""
    cases, skipped = [], []
    for row in rows:
        if row.get(V.UNREADABLE):        # a number cell validate.read could not read ('OOM' in the peak column)
            skipped.append({"case_id": row["case_id"], "reason": row[V.UNREADABLE]})
            continue
        if not row.get("measured_peak_memory_gib"):
            continue
        try:
            cases.append(V.build_case(row))
        except V.Skip as exc:
            skipped.append({"case_id": row["case_id"], "reason": str(exc)})
    out = V.evaluate_cases(cases)
    result = []
    for i, c in enumerate(cases):
        mem, reserve = float(out["memory"][i]), float(out["mem_reserve"][i])
        result.append({"case_id": c.row["case_id"], "gpu_id": c.hw.id, "capacity_gib": c.hw.hbm_capacity / GIB,
                       "measured_gib": c.row["measured_peak_memory_gib"], "predicted_gib": mem / GIB,
                       "reserve_gib": reserve / GIB, "predicted_fits": bool(fits(mem, reserve, c.hw, margin)),
                       "measured_fits": measured_fits(c.row)})
    return result, skipped


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="*", help="validation CSVs (default: the bundled memory_measured.csv)")
    ap.add_argument("--margin", type=float, default=0.0, help="extra safety fraction of the capacity (as predict's)")
    a = ap.parse_args(argv)
    paths = a.csv or [V.dataset_path("memory")]
    rows = [r for p in paths for r in V.read(p)]
    res, skipped = verdicts(rows, a.margin)
    bad = [r for r in res if r["predicted_fits"] != r["measured_fits"]]
    for r in bad:
        say = "fits" if r["predicted_fits"] else "does not fit"
        truth = "ran" if r["measured_fits"] else "ran out of memory"
        print(f"{r['case_id']}: predicted {say} ({r['predicted_gib']:.1f} + reserve {r['reserve_gib']:.1f} GiB of "
              f"{r['capacity_gib']:.1f} on {r['gpu_id']}), measured {r['measured_gib']:.1f} GiB: the run {truth}")
    for s in skipped:
        print(f"skipped {s['case_id']}: {s['reason'].split(';')[0]}")
    print(f"{len(bad)} of {len(res)} verdicts disagree with the measurement (margin {a.margin:g}; {len(skipped)} rows "
          f"with a measured peak skipped)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
