"""Print how well `calibrate from-runs` predicts runs it never saw (the figures of docs/from-runs.md).

    python benchmarks/from_runs_report.py [--runs FILE] [--gpu a100-sxm4-80gb] [--fit TERMS]

docs/from-runs.md quotes its output (`python -m roofline.face.docs_examples docs/from-runs.md` regenerates it;
tests/test_from_runs_docs.py, a slow test, fails when the page is stale).

On vTrain's measured A100 steps (shared/validation/vtrain_measured.csv), for each split: fit on the train
rows only (written to a profile YAML in a temporary folder), then price the judge rows through that file,
as a user would with `--gpu NAME.yaml`, and compare with BASE on the same judge rows. The judge rows are
never part of a fit (checked by case_id). Splits:
  1. single-node h=1024 models -> single-node h=2048 models
  2. single-node h=2048 models -> single-node h=1024 models
  3. all single-node rows -> the multi-node 3.6B rows (64 GPUs)
Then two diagnostics, each labelled as one (they fit on the judge rows, so they are never a judged figure): the
in-sample error of the same method on each split's judge rows (the floor of the profile's terms on those shapes:
a judged error near it means the fitted terms transferred and the rest is the model's structure), and the
per-layer host time fitted separately per width and TP size on the host-bound rows (micro-batch 1).
"""
import argparse
import contextlib
import csv
import io
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline.spec import hardware
from roofline.views import validate  # noqa: E402
from roofline.views.calibrate import from_runs as fr  # noqa: E402

DEFAULT_RUNS = validate.dataset_path("vtrain")        # the bundled copy of vTrain's measured A100 steps


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


def ranked(path: Path, gpu: str) -> dict:
    """validate --ranking of the rows of ``path`` priced on ``gpu``: regret and Kendall's tau within the groups
    of rows that differ only in the plan."""
    rows = [{**r, "gpu_id": gpu} for r in validate.read(path)]
    return validate.ranking(rows, validate.validate(rows))


def rank_text(base: dict, fitted: dict) -> str:
    return (f"{100 * base['mean_regret']:.1f} % -> {100 * fitted['mean_regret']:.1f} % "
            f"(tau {base['tau_median']:.2f} -> {fitted['tau_median']:.2f}, {base['groups']} group"
            f"{'s' if base['groups'] != 1 else ''})")


def pct(e) -> str:
    return f"{100 * np.mean(np.abs(e)):.1f} %"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=str(DEFAULT_RUNS))
    ap.add_argument("--gpu", default="a100-sxm4-80gb", help="BASE profile")
    ap.add_argument("--fit", help="terms (default: from_runs.DEFAULT)")
    ap.add_argument("--verbose", action="store_true", help="show the fits' progress on stderr (hidden by default: "
                    "docs/from-runs.md quotes stdout and stderr together)")
    args = ap.parse_args()
    if args.verbose:
        return report(args)
    with contextlib.redirect_stderr(io.StringIO()):
        return report(args)


def report(args) -> None:
    src = Path(args.runs)
    single = lambda r: r["n_gpus"] <= (r["gpus_per_node"] or 8)
    splits = [("h1024 -> h2048", lambda r: single(r) and r["d_model"] == 1024, lambda r: single(r) and r["d_model"] == 2048),
              ("h2048 -> h1024", lambda r: single(r) and r["d_model"] == 2048, lambda r: single(r) and r["d_model"] == 1024),
              ("single-node -> multi-node", single, lambda r: not single(r))]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        summary, terms_rows, judged, ranks = [], [], [], []
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
            judged.append(f"{pct(e_fit)} (mean signed {100 * np.mean(e_fit):+.1f} %)")
            r_base, r_fit = ranked(judge, args.gpu), ranked(judge, str(prof))
            if r_base.get("groups"):
                ranks.append(f"| {name} | {rank_text(r_base, r_fit)} | {100 * r_base['max_regret']:.1f} % -> "
                             f"{100 * r_fit['max_regret']:.1f} % |")
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
        if ranks:
            print("\nThe order of plans on the judge rows (validate --ranking: groups of rows that differ only in the "
                  "plan), BASE -> fitted:\n")
            print("| split | mean regret (Kendall tau median) | worst group's regret |")
            print("|---|---|---|")
            print("\n".join(ranks))
        diagnostics(src, tmp, args, splits, judged)


def diagnostics(src: Path, tmp: Path, args, splits, judged) -> None:
    """The floor of the terms on each judge set, and the host time per layer by width and TP size."""
    print("\nDiagnostic, not a judged figure: the same method fitted on the judge rows themselves (in-sample).\n")
    print("| judge rows | judged (fit on the train rows) | in-sample floor (fit on the judge rows) | terms fitted there |")
    print("|---|---|---|---|")
    for i, (name, _, judge_rule) in enumerate(splits):
        judge = split_csv(src, tmp, f"judge{i}", judge_rule)
        runs = fr.load_runs(judge, args.gpu)
        terms, explicit = fr.parse_terms(args.fit)
        base_hw = hardware.load(args.gpu)
        pricer = fr.Pricer(runs.cases)
        kept, _ = fr.identifiable(pricer, fr._Space(terms, base_hw), explicit, measured=runs.measured)
        f = fr.fit_terms(pricer, runs.measured, kept, base_hw, groups=runs.groups)
        if not explicit:
            f = fr._settle(pricer, runs.measured, f, base_hw, groups=runs.groups)[0]
        e = pricer(f.values) / runs.measured - 1
        vals = ", ".join(f"{t} {fr._fmt(t, f.values[t])}" for t in f.terms)
        print(f"| {name.split(' -> ')[1]} | {judged[i]} | {pct(e)} | {vals} |")
    print("\nDiagnostic: host_layer fitted alone on the micro-batch-1 rows of one width and TP size (single node).\n")
    single = lambda r: r["n_gpus"] <= (r["gpus_per_node"] or 8)
    widths = sorted({r["d_model"] for r in validate.read(src) if single(r)})
    tps = sorted({r["tp"] for r in validate.read(src) if single(r)})
    print("| width | " + " | ".join(f"tp {t}" for t in tps) + " |")
    print("|---|" + "---|" * len(tps))
    base_hw = hardware.load(args.gpu)
    for w in widths:
        cells = []
        for t in tps:
            sub = split_csv(src, tmp, f"host_{w}_{t}", lambda r: single(r) and r["d_model"] == w and r["tp"] == t
                            and r["micro_batch"] == 1)
            runs = fr.load_runs(sub, args.gpu)
            if not runs.cases:
                cells.append("")
                continue
            pricer = fr.Pricer(runs.cases)
            f = fr.fit_terms(pricer, runs.measured, ("host_layer",), base_hw)
            e = pricer(f.values) / runs.measured - 1
            est = "GPU-bound" if not math.isfinite(f.ci95["host_layer"]) else \
                f"{f.values['host_layer'] * 1e6:.0f} us ({pct(e)}, n {len(e)})"
            cells.append(est)
        print(f"| h={w} | " + " | ".join(cells) + " |")
    composition(src, tmp, args, single, widths, tps)


def composition(src, tmp, args, single, widths, tps) -> None:
    """How host and GPU time combine per layer on the host-bound rows (micro-batch 1), at the host_layer fitted on
    every single-node row: the model's max(host, GPU) against host + GPU (no overlap at all)."""
    from dataclasses import replace as dc_replace
    base_hw = hardware.load(args.gpu)
    allsingle = split_csv(src, tmp, "allsingle", single)
    runs = fr.load_runs(allsingle, args.gpu)
    v = fr.fit_terms(fr.Pricer(runs.cases), runs.measured, ("host_layer",), base_hw, groups=runs.groups).values
    print(f"\nDiagnostic: micro-batch-1 rows priced with host_layer {v['host_layer'] * 1e6:.0f} us (fitted on every "
          "single-node row): error of the model's per-layer max(host, GPU) and of host + GPU, by width and TP size.\n")
    print("| width | " + " | ".join(f"tp {t}: max / sum" for t in tps) + " |")
    print("|---|" + "---|" * len(tps))
    for w in widths:
        cells = []
        for t in tps:
            sub = split_csv(src, tmp, f"comp_{w}_{t}", lambda r: single(r) and r["d_model"] == w and r["tp"] == t
                            and r["micro_batch"] == 1)
            cases = [validate.build_case({**r, "gpu_id": args.gpu}) for r in validate.read(sub)]
            if not cases:
                cells.append("")
                continue
            cases = [dc_replace(c, hw=fr.apply_terms(c.hw, v)) for c in cases]
            ev = validate.evaluate_cases(cases)
            meas = np.array([c.measured for c in cases])
            hw = cases[0].hw
            issue = hw.host_fwd + hw.host_bwd + hw.host_rc          # full recomputation in these rows
            layers = np.asarray(ev["stage_layers"], dtype=float) * np.asarray(ev["micro_batches"], dtype=float)
            t_max = np.asarray(ev["step_time"], dtype=float)
            # host + GPU: the layer's exposed host time max(0, host - GPU) replaced by the whole host issue time
            t_sum = t_max + layers * (issue - np.asarray(ev["t_layer_host"], dtype=float))
            cells.append(f"{100 * np.mean(t_max / meas - 1):+.0f} / {100 * np.mean(t_sum / meas - 1):+.0f} %")
        print(f"| h={w} | " + " | ".join(cells) + " |")
    print(f"\nDiagnostic: the larger micro-batches (4 and 8, mostly GPU-bound) priced with the same host_layer: mean "
          "signed error by width, micro-batch and TP size.\n")
    print("| width, micro-batch | " + " | ".join(f"tp {t}" for t in tps) + " |")
    print("|---|" + "---|" * len(tps))
    for w in widths:
        for mb in (4, 8):
            cells = []
            for t in tps:
                sub = split_csv(src, tmp, f"gpu_{w}_{t}_{mb}", lambda r: single(r) and r["d_model"] == w
                                and r["tp"] == t and r["micro_batch"] == mb)
                rows = validate.read(sub)
                if not rows:
                    cells.append("")
                    continue
                cases = [validate.build_case({**r, "gpu_id": args.gpu}) for r in rows]
                cases = [dc_replace(c, hw=fr.apply_terms(c.hw, v)) for c in cases]
                pred = np.asarray(validate.evaluate_cases(cases)["step_time"], dtype=float)
                cells.append(f"{100 * np.mean(pred / np.array([c.measured for c in cases]) - 1):+.0f} %")
            print(f"| h={w}, mb {mb} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
