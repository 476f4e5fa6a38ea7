"""Peak memory per pipeline stage: a per-rank companion file against each stage's predicted memory.

A per-rank file (``case_id, rank, max_allocated_gib[, max_reserved_gib]``; the bundled
``memory_per_rank_simumax_b200.csv``) holds every rank's ``torch.cuda.max_memory_allocated`` of runs whose
configuration is a row of a validation CSV (its companion: ``memory_measured.csv`` in the same folder, else
the bundled one). ``validate`` on such a file maps each rank to its pipeline stage and compares the largest
peak of each stage with the stage's predicted memory: the first stage holds the embedding and the most
in-flight micro-batches, the last the LM head and the loss's logits, so one heaviest-stage number (what a
whole-run peak checks) cannot tell whether both are right.

Rank -> stage: Megatron-Core lays ranks out in the order ``tp-cp-ep-dp-pp`` (megatron/core/parallel_state.py,
``initialize_model_parallel(order="tp-cp-ep-dp-pp")``; the expert grid carves ep out of the same dp ranks), so
the pipeline stage of global rank r is r // (tp cp dp). Stages between the first and the last have no
prediction of their own here and are listed as not compared.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from ..base.errors import InputError
from ..base.units import GiB

COLUMNS = ("case_id", "rank", "max_allocated_gib")
COMPANION = "memory_measured.csv"


def is_per_rank(path) -> bool:
    """True when the CSV's header has the per-rank columns (and so is not a validation-rows file)."""
    from ..base.schema import read_text
    text = read_text(Path(path), "validation CSV").lstrip("\ufeff")
    header = next(csv.reader(text.splitlines()[:1]), [])
    return all(c in header for c in COLUMNS)


def read(path) -> dict:
    """case_id -> {rank: (allocated GiB, reserved GiB or nan)}; InputError naming the line on bad values."""
    from ..base.schema import read_text
    path = Path(path)
    text = read_text(path, "per-rank memory CSV").lstrip("\ufeff")
    out: dict = {}
    for line, raw in enumerate(csv.DictReader(text.splitlines()), start=2):
        case = (raw.get("case_id") or "").strip()
        if not case:
            raise InputError(f"{path} line {line}: case_id is empty")
        try:
            rank = int(raw["rank"])
            alloc = float(raw["max_allocated_gib"])
            res = float(raw["max_reserved_gib"]) if (raw.get("max_reserved_gib") or "").strip() else math.nan
        except (TypeError, ValueError):
            raise InputError(f"{path} line {line}: rank must be an integer and the memory columns numbers, got "
                             f"rank {raw.get('rank')!r}, max_allocated_gib {raw.get('max_allocated_gib')!r}") from None
        if rank < 0 or not (math.isfinite(alloc) and alloc > 0):
            raise InputError(f"{path} line {line}: rank must be >= 0 and max_allocated_gib a positive number, "
                             f"got rank {rank}, max_allocated_gib {alloc}")
        if rank in out.setdefault(case, {}):
            raise InputError(f"{path} line {line}: rank {rank} of {case} appears twice")
        out[case][rank] = (alloc, res)
    if not out:
        raise InputError(f"{path}: no data rows")
    return out


def companion(path, bundled: Path) -> Path:
    """The rows file of a per-rank file: memory_measured.csv beside it, else ``bundled`` (validate's own copy)."""
    beside = Path(path).with_name(COMPANION)
    return beside if beside.is_file() else Path(bundled)


def stage_of(rank: int, tp: int, cp: int, dp: int) -> int:
    """Pipeline stage of a global rank in Megatron-Core's tp-cp-ep-dp-pp order."""
    return rank // (tp * cp * dp)


def compare(path, rows_path, read_rows, price, evaluate) -> dict:
    """Per stage of every case: measured max allocated / reserved over the stage's ranks, predicted memory (and
    memory + fragmentation for reserved), errors; cases that cannot be compared, with the reason.

    ``read_rows(path)`` reads the companion rows file, ``price(row)`` resolves one row to a case or raises ValueError
    with the reason it cannot be priced, ``evaluate(cases)`` gives every formula output for them (validate passes its
    ``read``, ``build_case`` and ``evaluate_cases``; this module does not import validate, which calls it)."""
    ranks = read(path)
    rows_path = Path(rows_path)
    by_id = {r["case_id"]: r for r in read_rows(rows_path)}
    cases, keep, skipped = [], [], []
    for cid, rk in ranks.items():
        row = by_id.get(cid)
        if row is None:
            skipped.append({"case_id": cid, "reason": f"no row with this case_id in {rows_path.name}"})
            continue
        try:
            c = price(row)
        except ValueError as exc:          # the reason the row cannot be priced
            skipped.append({"case_id": cid, "reason": str(exc)})
            continue
        p = c.plan
        if sorted(rk) != list(range(p.n_gpus)):
            skipped.append({"case_id": cid, "reason": f"ranks {min(rk)}..{max(rk)} ({len(rk)}) do not cover the plan's "
                                                      f"{p.n_gpus} GPUs"})
            continue
        cases.append(c)
        keep.append(rk)
    out = evaluate(cases)
    stages = []
    for i, (c, rk) in enumerate(zip(cases, keep)):
        p = c.plan
        first, last = float(out["mem_first_stage"][i]), float(out["mem_last_stage"][i])
        frag = float(out["mem_fragmentation"][i])
        for s in range(p.pp):
            members = [r for r in rk if stage_of(r, p.tp, p.cp, p.dp) == s]
            alloc = max(rk[r][0] for r in members) * GiB
            res = max(rk[r][1] for r in members) * GiB
            kind = "only" if p.pp == 1 else "first" if s == 0 else "last" if s == p.pp - 1 else "middle"
            pred = {"only": first, "first": first, "last": last}.get(kind)
            stages.append({
                "case_id": c.row["case_id"], "stage": s, "kind": kind, "ranks": len(members),
                "measured_allocated_bytes": alloc, "measured_reserved_bytes": res,
                "predicted_bytes": pred,
                "allocated_error": None if pred is None else pred / alloc - 1,
                "reserved_error": None if pred is None or not math.isfinite(res) else (pred + frag) / res - 1})
    summary = {}
    for kind in ("all", "first", "last", "only"):
        e = [s["allocated_error"] for s in stages if s["allocated_error"] is not None and kind in ("all", s["kind"])]
        r = [s["reserved_error"] for s in stages if s["reserved_error"] is not None and kind in ("all", s["kind"])]
        if e:
            summary[kind] = {"n": len(e), "allocated_mape": float(np.mean(np.abs(e))),
                             "allocated_signed": float(np.mean(e)), "allocated_max": float(np.max(np.abs(e))),
                             "reserved_mape": float(np.mean(np.abs(r))) if r else None}
    return {"file": str(path), "rows": str(rows_path), "stages": stages, "summary": summary, "skipped": skipped}


def render(r: dict, table: bool = True) -> str:
    lines = []
    if table:
        lines.append(f"{'case':48} {'stage':>9} {'ranks':>5} {'measured GiB':>12} {'predicted GiB':>13} {'error %':>8}")
        for s in r["stages"]:
            pred = "-" if s["predicted_bytes"] is None else f"{s['predicted_bytes'] / GiB:13.2f}"
            err = "-" if s["allocated_error"] is None else f"{100 * s['allocated_error']:+8.1f}"
            lines.append(f"{s['case_id']:48} {s['kind'] + ' ' + str(s['stage']):>9} {s['ranks']:5d} "
                         f"{s['measured_allocated_bytes'] / GiB:12.2f} {pred:>13} {err:>8}")
        lines.append("")
    lines.append(f"peak memory per pipeline stage (max torch.cuda.max_memory_allocated over the stage's ranks; rows "
                 f"from {Path(r['rows']).name}):")
    names = {"all": "all stages", "first": "first stage (pp > 1)", "last": "last stage (pp > 1)", "only": "pp = 1"}
    for k, s in r["summary"].items():
        res = "" if s["reserved_mape"] is None else f"   reserved (+ fragmentation) MAPE {100 * s['reserved_mape']:5.1f} %"
        lines.append(f"  {names[k]:22} n={s['n']:<4} allocated MAPE {100 * s['allocated_mape']:5.1f} %  "
                     f"mean signed {100 * s['allocated_signed']:+6.1f} %  max {100 * s['allocated_max']:5.1f} %{res}")
    middle = sum(1 for s in r["stages"] if s["kind"] == "middle")
    if middle:
        lines.append(f"  {middle} middle stage(s) not compared (no per-stage prediction between the first and the last)")
    if r["skipped"]:
        lines.append(f" skipped {len(r['skipped'])}:")
        lines += [f"  {s['case_id']}: {s['reason']}" for s in r["skipped"]]
    return "\n".join(lines)
