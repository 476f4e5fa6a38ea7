"""Print how well `calibrate from-runs` predicts runs it never saw (the figures of docs/from-runs.md).

    python benchmarks/from_runs_report.py [--runs FILE] [--gpu a100-sxm4-80gb] [--fit TERMS]

On vTrain's measured A100 steps (shared/validation/vtrain_measured.csv), for each split: fit on the train
rows only (written to a profile YAML in a temporary folder), then price the judge rows through that file,
as a user would with `--gpu NAME.yaml`, and compare with BASE on the same judge rows. The judge rows are
never part of a fit (checked by case_id). Splits:
  1. single-node h=1024 models -> single-node h=2048 models
  2. single-node h=2048 models -> single-node h=1024 models
  3. all single-node rows -> the multi-node 3.6B rows (64 GPUs)
"""
import argparse
import csv
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline import validate  # noqa: E402
from roofline.calibrate import from_runs as fr  # noqa: E402

DEFAULT_RUNS = ROOT.parent / "shared" / "validation" / "vtrain_measured.csv"


def split_csv(src: Path, folder: Path, name: str, keep) -> Path:
    """Copy the rows of ``src`` for which ``keep(parsed row)`` holds, text unchanged."""
    parsed = {r["case_id"]: r for r in validate.read(src)}
    with open(src, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if keep(parsed[r["case_id"]])]
        fields = reader.fieldnames
    out = folder / f"{name}.csv"
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        w.writerows(rows)
    return out


def price(path: Path, gpu: str) -> tuple[np.ndarray, list]:
    """Step-time errors of every row of ``path`` priced on ``gpu`` (an id or a profile file)."""
    cases = [validate.build_case({**r, "gpu_id": gpu}) for r in validate.read(path)]
    pred = np.asarray(validate.evaluate_cases(cases)["step_time"], dtype=float)
    return pred / np.array([c.measured for c in cases]) - 1, cases


def pct(e) -> str:
    return f"{100 * np.mean(np.abs(e)):.1f} %"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=str(DEFAULT_RUNS))
    ap.add_argument("--gpu", default="a100-sxm4-80gb", help="BASE profile")
    ap.add_argument("--fit", help="terms (default: from_runs.DEFAULT)")
    args = ap.parse_args()
    src = Path(args.runs)
    single = lambda r: r["n_gpus"] <= (r["gpus_per_node"] or 8)
    splits = [("h1024 -> h2048", lambda r: single(r) and r["d_model"] == 1024, lambda r: single(r) and r["d_model"] == 2048),
              ("h2048 -> h1024", lambda r: single(r) and r["d_model"] == 2048, lambda r: single(r) and r["d_model"] == 1024),
              ("single-node -> multi-node", single, lambda r: not single(r))]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        summary, terms_rows = [], []
        for i, (name, train_rule, judge_rule) in enumerate(splits):
            train = split_csv(src, tmp, f"train{i}", train_rule)
            judge = split_csv(src, tmp, f"judge{i}", judge_rule)
            train_ids = {r["case_id"] for r in validate.read(train)}
            judge_ids = {r["case_id"] for r in validate.read(judge)}
            assert not train_ids & judge_ids, "a judge row is in the training rows"
            res = fr.calibrate(train, args.gpu, fit=args.fit)
            prof = fr.write(res, str(tmp / f"fit{i}.yaml"))
            e_base, _ = price(judge, args.gpu)
            e_fit, cases = price(judge, str(prof))
            mb = np.array([c.plan.micro_batch for c in cases])
            by_mb = ", ".join(f"mb {m}: {pct(e_base[mb == m])} -> {pct(e_fit[mb == m])}" for m in sorted(set(mb)))
            summary.append(f"| {name} | {len(train_ids)} | {len(judge_ids)} | {100 * res.in_sample['mape']:.1f} % | "
                           f"{100 * res.cv['mape']:.1f} % | {pct(e_base)} | **{pct(e_fit)}** | "
                           f"{100 * np.mean(e_fit):+.1f} % | {by_mb} |")
            for t in res.asked:
                if t in res.fit.terms:
                    v, s, c = res.fit.values[t], res.fit.start[t], res.fit.ci95[t]
                    f = (lambda x: f"{x * 1e6:.0f} us") if fr.TERMS[t].unit == "s" else (lambda x: f"{x:.3f}")
                    flag = " (at bound)" if t in res.fit.at_bound else ""
                    terms_rows.append(f"| {name} | {t} | {f(s)} | {f(v)} +- {f(c)}{flag} |")
                else:
                    why = next((w.split(": ", 1)[1] for w in res.warnings if w.startswith(f"{t}:")), "")
                    terms_rows.append(f"| {name} | {t} | | left at BASE: {why.replace('; left at BASE', '')} |")
            for w in res.warnings:
                if not any(w.startswith(f"{t}:") for t in res.asked if t not in res.fit.terms):
                    terms_rows.append(f"| {name} | warning | | {w} |")
        print(f"BASE {args.gpu}; runs {src.name}; errors are MAPE of predicted vs measured step time\n")
        print("| split (fit -> judge) | train rows | judge rows | in-sample | CV within train | judge, BASE | "
              "judge, fitted | judge mean signed | judge by micro-batch (BASE -> fitted) |")
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(summary))
        print("\n| split | term | BASE | fitted +- 95 % (approx.) |")
        print("|---|---|---|---|")
        print("\n".join(terms_rows))


if __name__ == "__main__":
    main()
