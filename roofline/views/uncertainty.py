"""How far off a prediction is likely to be: the measured error of similar validated runs.

The step time a command prints carries a band read from ``roofline/data/uncertainty.yaml``: for every group
of similar runs in the bundled validation sets (roofline/data/validation: published, vTrain, NeMo, memory),
the 10th, 50th and 90th percentiles of the signed error (predicted - measured) / measured, as the model
predicts them today. A run is matched to the most specific group with at least ``MIN_RUNS`` runs:

    1. the same GPU family, architecture (dense, or MoE: routed experts), active-parameter decade and node scope
       (single-node or multi-node)
    2. the same GPU family, architecture and active-parameter decade
    3. the same GPU family and architecture
    4. the same GPU family

The architecture splits the groups because the model errs differently on the two: on the bundled sets its MoE
predictions are too fast by a wider margin than its dense ones on the same GPUs (the MoE step's host, dispatch and
grouped-GEMM costs, docs/validation.md), and pooling them would print a band that fits neither. An MoE run whose
layers are replayed as CUDA graphs (per layer or the whole iteration) is its own architecture, ``moe-graphs``: the
graphs take away the eager step's host issue and synchronizations, which the model prices in part, and the bundled
eager MoE rows are priced too fast by a wider margin than graphed ones (docs/validation.md, NVIDIA's Megatron-Bridge
tables, "architecture, CUDA graphs"). Dense runs are not split: their error differs little either way.

and, when no group of its GPU family has that many runs (a part no bundled row ran: H200, B300, GB300), the same
levels over the runs of its architecture generation (``GENERATION``: Hopper, Blackwell, ...), said in the band's
line: those parts' profiles take their efficiency priors from their generation's measured parts (``efficiency_from``,
the sustained clock), so that generation's errors are the evidence there is. A family without a generation here, or
whose generation has no group either, gets no band: the error differs most between GPU generations, so it is never
carried from one to another. A prediction of ``t`` with error quantiles ``e10 .. e90``
means the measured step would lie in ``t / (1 + e90) .. t / (1 + e10)`` for 80 % of such runs.

    python -m roofline.views.uncertainty            # regenerate the table (a test checks it is current)
    python -m roofline.views.uncertainty --check    # exit 1 when it is stale

Reading the table needs only yaml (``transformer`` never imports the validation code); generating it runs
``roofline.views.validate`` over every bundled data set.
"""
from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

from ..base.units import GIGA
from ..base.paths import DATA

TABLE = DATA / "uncertainty.yaml"
QUANTILES = (0.1, 0.5, 0.9)            # the central 80 % of the errors, and the median
# the smallest group whose 10th / 90th percentiles are not its minimum / maximum (numpy's linear interpolation
# puts the 10th percentile of n runs at rank 0.1 (n - 1): above the minimum from n = 11 on, between the two
# smallest at n = 10)
MIN_RUNS = 10
ANY = "any"
FIELDS = ("gpu", "arch", "size", "nodes")
LEVELS = (("gpu", "arch", "size", "nodes"), ("gpu", "arch", "size"), ("gpu", "arch"), ("gpu",))


def gpu_family(hardware_id: str) -> str:
    """The chip a profile id names: its first dash-separated token (``a100-sxm4-80gb``, ``a100-perlmutter`` ->
    ``a100``; ``h100-sxm-measured`` -> ``h100``); bundled ids start with the chip's name (hardware/profiles)."""
    return Path(str(hardware_id)).stem.split("-")[0].lower()


# The architecture generation of a GPU family (the chip names of NVIDIA's and AMD's datasheets: A100 "NVIDIA Ampere",
# H100 / H200 / H800 / H20 / GH200 "NVIDIA Hopper", B200 / GB200 "NVIDIA Blackwell", B300 / GB300 "Blackwell Ultra",
# MI300X / MI325X "AMD CDNA 3", MI355X "AMD CDNA 4", V100 "NVIDIA Volta"). A family missing here is never pooled.
GENERATION = {"v100": "volta", "a100": "ampere", "a800": "ampere", "h100": "hopper", "h200": "hopper", "h800": "hopper",
              "h20": "hopper", "gh200": "hopper", "b200": "blackwell", "gb200": "blackwell", "b300": "blackwell",
              "gb300": "blackwell", "mi300x": "cdna3", "mi325x": "cdna3", "mi355x": "cdna4"}


def generation(family: str) -> str | None:
    """The pool of a GPU family's architecture generation in the table (``GENERATION``), or None.

    >>> generation("gb300"), generation("h200"), generation("tpu")
    ('blackwell', 'hopper', None)
    """
    return GENERATION.get(family)


def size_bucket(active_params: float) -> str:
    """The decade of active parameters (per token: a MoE's routed experts counted top-k times):
    '<1B', '1B-10B', '10B-100B', '100B-1T', '>=1T'."""
    d = math.floor(math.log10(max(active_params, 1.0) / GIGA))
    names = {-1: "<1B", 0: "1B-10B", 1: "10B-100B", 2: "100B-1T"}
    return names.get(d, "<1B" if d < -1 else ">=1T")


def nodes_scope(n_gpus: int, gpus_per_node: int) -> str:
    return "single-node" if n_gpus <= gpus_per_node else "multi-node"


def arch(moe: bool, graphs: bool = False) -> str:
    """'moe' for a model with routed experts (n_experts > 1) run eagerly, 'moe-graphs' for one whose MoE blocks are CUDA
    graphs (the plan's cuda_graphs full, or layers over the whole layer or the moe module), else 'dense'."""
    return ("moe-graphs" if graphs else "moe") if moe else "dense"


def kind_of(model, plan) -> dict:
    """``band``'s architecture arguments of a run: ``moe`` (routed experts) and ``graphs`` (its layers CUDA graphs)."""
    from ..model.predict import graph_inputs
    # a partial scope (router, preprocess, attention) leaves the MoE block and its synchronization eager: 'moe'
    return {"moe": (model.n_experts or 1) > 1,
            "graphs": graph_inputs(plan.cuda_graphs, plan.graph_modules)["graph_moe"] == 1.0}


def keys(hardware_id: str, active_params: float, n_gpus: int, gpus_per_node: int, moe: bool = False,
         graphs: bool = False) -> dict:
    return {"gpu": gpu_family(hardware_id), "arch": arch(moe, graphs), "size": size_bucket(active_params),
            "nodes": nodes_scope(n_gpus, gpus_per_node)}


def _key(g: dict) -> tuple:
    """A table row's group key (FIELDS; a row without a field pools it: 'any')."""
    return tuple(g.get(f, ANY) for f in FIELDS)


# ---- reading (the prediction path) ----------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _groups() -> dict:
    from ..base.schema import yaml_load
    d = yaml_load(TABLE.read_text())
    return {_key(g): g for g in d["groups"]}


def band(hardware_id: str, active_params: float, n_gpus: int, gpus_per_node: int, moe: bool = False,
         graphs: bool = False) -> dict | None:
    """The error quantiles of the most specific group of similar validated runs (``LEVELS``), or None.

    Returns ``{"group": {gpu, arch, size, nodes}, "n", "p10", "p50", "p90"}`` (errors as fractions).
    """
    k = keys(hardware_id, active_params, n_gpus, gpus_per_node, moe, graphs)
    table = _groups()
    pooled = generation(k["gpu"])
    for gpu in (k["gpu"], pooled):
        for level in LEVELS if gpu else ():
            key = tuple((gpu if f == "gpu" else k[f]) if f in level else ANY for f in FIELDS)
            g = table.get(key)
            if g is not None:
                return {"group": dict(zip(FIELDS, key)), "n": g["n"],
                        **{f"p{round(q * 100)}": g[f"p{round(q * 100)}"] for q in QUANTILES},
                        "profiles": list(g.get("profiles", ())),
                        **({"generation_of": k["gpu"]} if gpu != k["gpu"] else {})}
    return None


def of_prediction(pred) -> dict | None:
    """:func:`band` of a :class:`roofline.model.predict.Prediction`, with the measured step it implies
    (``low_s`` .. ``high_s``: the step time divided by 1 + the 90th and 1 + the 10th percentile error)."""
    b = band(pred.hardware.id, pred.raw["active_params"], pred.n_gpus, pred.hardware.gpus_per_node,
             **kind_of(pred.model, pred.plan))
    return implied(b, float(pred.step_time.to("s").magnitude))


def implied(b: dict | None, step_s: float) -> dict | None:
    """A band with the measured step it implies for a predicted step of ``step_s`` seconds: ``low_s`` .. ``high_s``,
    the step over 1 + the 90th and 1 + the 10th percentile error (None stays None)."""
    if b is None:
        return None
    return {**b, "low_s": step_s / (1 + b["p90"]), "high_s": step_s / (1 + b["p10"])}


def describe(b: dict | None, hardware_id: str = "") -> str:
    """One line for the table: the error band and the group it comes from."""
    if b is None:
        fam = gpu_family(hardware_id)
        gen = generation(fam)
        return (f"no band: fewer than {MIN_RUNS} validated runs on {fam} GPUs"
                + (f" or on any {gen} GPU" if gen else ""))
    g = b["group"]
    kind = {"moe": "MoE", "moe-graphs": "MoE under CUDA graphs", "dense": "dense"}.get(g.get("arch", ANY), "")
    what = ", ".join(v for v in (g["gpu"] + (" GPUs" if b.get("generation_of") else ""), kind, g["size"] + " active params" if g["size"] != ANY else "",
                                 g["nodes"] if g["nodes"] != ANY else "") if v)
    line = (f"validation error of similar runs: {100 * b['p10']:+.0f} % .. {100 * b['p90']:+.0f} %, "
            f"p10..p90 of n={b['n']}: {what}")
    # the band was measured on the profiles the validation rows name; another profile of the family (a calibration
    # of one node, a user's fitted profile) may err differently: say which profiles the band is from
    profiles = b.get("profiles") or []
    if b.get("generation_of"):
        return (line + f"; fewer than {MIN_RUNS} {b['generation_of']} runs are validated: its generation's band"
                + (f", priced on {', '.join(profiles)}" if profiles else ""))
    if hardware_id and profiles and Path(str(hardware_id)).stem not in profiles:
        line += f"; priced on {', '.join(profiles)}, not on {Path(str(hardware_id)).stem}"
    return line


# ---- generating (python -m roofline.views.uncertainty) --------------------------------------------------
def measured_errors() -> list[dict]:
    """Every timed run of the bundled validation sets: its keys and its signed error. Left out, as the error of a
    misread plan rather than of the model: rows whose layout validate chose (``layout_stated``) and rows whose plan,
    as read, needs more memory than the GPU by more than the memory model's largest validated error
    (validate.MEMORY_ERROR_MAX: the run cannot have been that plan)."""
    import numpy as np

    from ..base import progress
    from ..model.predict import overshoot
    from . import validate as V
    out = []
    for name in V.DATASETS:
        with progress.phase(f"validate {name}"):
            cases = []
            for row in V.read(V.dataset_path(name)):
                if not V.layout_stated(row):      # the error of a chosen layout, not of a stated plan
                    continue
                try:
                    cases.append(V.build_case(row))
                except V.Skip:
                    continue
            if not cases:
                continue
            r = V.evaluate_cases(cases)
            err = r["step_time"] / np.array([c.measured for c in cases]) - 1
        need = overshoot(r["memory"], r["mem_reserve"], [c.hw for c in cases])
        for i, c in enumerate(cases):
            if np.isfinite(err[i]) and need[i] <= V.MEMORY_ERROR_MAX:
                out.append({"dataset": name, "case_id": c.row["case_id"], "error": float(err[i]), "profile": c.hw.id,
                            **keys(c.hw.id, float(r["active_params"][i]), c.plan.n_gpus, c.hw.gpus_per_node,
                                   **kind_of(c.model, c.plan))})
    return out


def table(runs: list[dict]) -> dict:
    """The groups of every level with at least ``MIN_RUNS`` runs, their error quantiles rounded to 0.1 %."""
    import numpy as np
    groups: dict = {}
    profiles: dict = {}
    for r in runs:
        # each run counts in its GPU family's groups and in its generation's (read only for a family without a group)
        for gpu in (r["gpu"], generation(r["gpu"])):
            for level in LEVELS if gpu else ():
                key = tuple((gpu if f == "gpu" else r[f]) if f in level else ANY for f in FIELDS)
                groups.setdefault(key, []).append(r["error"])
                if r.get("profile"):
                    profiles.setdefault(key, set()).add(r["profile"])
    rows = []
    for key in sorted(groups):
        e = np.array(groups[key])
        if len(e) < MIN_RUNS:
            continue
        q = np.quantile(e, QUANTILES)
        rows.append({**dict(zip(FIELDS, key)), "n": int(len(e)),
                     **{f"p{round(p * 100)}": round(float(v), 3) for p, v in zip(QUANTILES, q)},
                     "profiles": sorted(profiles.get(key, ()))})
    counts: dict = {}
    for r in runs:
        counts[r["dataset"]] = counts.get(r["dataset"], 0) + 1
    return {"quantiles": list(QUANTILES), "min_runs": MIN_RUNS, "runs": counts, "groups": rows}


def text(t: dict) -> str:
    import yaml
    head = ("# generated by `python -m roofline.views.uncertainty` from the bundled validation sets; do not edit\n"
            "# signed error (predicted - measured) / measured of every timed run, quantiles per group of similar\n"
            "# runs (GPU family, or its generation: ampere, hopper, blackwell, ...; dense or MoE, active-parameter\n"
            "# decade, node scope; 'any' = pooled);\n"
            "# roofline/views/uncertainty.py\n")
    body = {k: v for k, v in t.items() if k != "groups"}
    return (head + yaml.safe_dump(body, sort_keys=False, default_flow_style=None) + "groups:\n"
            + "".join("  - " + yaml.safe_dump(g, sort_keys=False, default_flow_style=True, width=200)
                      for g in t["groups"]))


def stale(current: dict, fresh: dict, tolerance: float = 0.005) -> list[str]:
    """Differences that would change the printed band: a group added or gone, another run count, or a quantile
    moved by more than ``tolerance`` (half of the whole percent the band prints)."""
    a, b = {_key(g): g for g in current["groups"]}, {_key(g): g for g in fresh["groups"]}
    out = [f"group {k}: {'gone' if k in a else 'new'}" for k in sorted(set(a) ^ set(b))]
    for k in sorted(set(a) & set(b)):
        if a[k]["n"] != b[k]["n"]:
            out.append(f"group {k}: n {a[k]['n']} -> {b[k]['n']}")
        if a[k].get("profiles") != b[k].get("profiles"):
            out.append(f"group {k}: profiles {a[k].get('profiles')} -> {b[k].get('profiles')}")
        for q in ("p10", "p50", "p90"):
            if abs(a[k][q] - b[k][q]) > tolerance:
                out.append(f"group {k}: {q} {a[k][q]:+.3f} -> {b[k][q]:+.3f}")
    return out


def main(argv=None) -> int:
    import argparse

    import yaml
    ap = argparse.ArgumentParser(prog="python -m roofline.views.uncertainty", description=(
        f"Write {TABLE.relative_to(TABLE.parents[2])}: the error quantiles of similar validated runs that the step "
        "time's band is read from (takes a few seconds: every bundled validation set is predicted)."))
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when the table is stale")
    args = ap.parse_args(argv)
    fresh = table(measured_errors())
    if args.check:
        diff = stale(yaml.safe_load(TABLE.read_text()), fresh) if TABLE.exists() else ["missing"]
        if diff:
            print(f"{TABLE} is stale: " + "; ".join(diff[:8]) + "\nrun python -m roofline.views.uncertainty", file=sys.stderr)
            return 1
        return 0
    TABLE.write_text(text(fresh))
    print(f"wrote {TABLE} ({len(fresh['groups'])} groups from {sum(fresh['runs'].values())} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
