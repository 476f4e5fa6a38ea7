"""Plan search: enumerate every valid parallel plan, evaluate them all at once, rank them.

The whole space of (tp, pp, dp, cp, ep, micro-batch, interleave, recompute, sequence parallel,
sharding) is built and evaluated by :mod:`roofline.views.space` (numpy columns, the rules as vectorized masks, the
compiled formulas once on the arrays); the plans that fit in HBM are ranked here. There is no Python loop over
plans.

>>> from roofline import hardware, models
>>> best = search(models.load("gpt3-1.3b"), hardware.load("a100-sxm4-80gb"), 8, 64, top=3)
>>> best[0].plan.n_gpus, best[0].slower_than_best
(8, 0.0)

``python -m roofline search`` is registered on the CLI by :func:`register`. Start-up stays light:
numpy and the compiled formulas only; no sympy, scipy or matplotlib (unless ``--plot``).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import math
from dataclasses import dataclass

from ..spec.config import SHARDING_BY_STAGE
from . import report
from ..base.errors import InputError
from ..base.paths import DATA
from ..base.results import Result
from ..base.units import KILO, GiB, fmt_bytes, fmt_time
from .space import (  # noqa: F401  (the space API, re-exported as the search API)
    CHUNK, KNOBS, LADDER, OBJECTIVES, PINNED_SCHEDULES, SEARCH_MEMORY_MARGIN, SELECTIVE_RUNGS, Space, _int,
    stack_schedule,
    default_base, default_model, divisors, enumerate_plans, evaluate_arrays, evaluate_space, ladder_inputs,
    node_tiling_tp, plan_arrays, plan_of, searches_ep_overlap, selective_ladder, try_delay_wgrad, with_ep_overlap)


@dataclass(frozen=True)
class Candidate(Result):
    """One evaluated plan. Times in s, memory in bytes (per GPU), fractions in [0, 1]; ``quantity(name)``
    gives a field with its unit (``UNITS``), ``to_dict()`` the fields and the units map."""
    UNITS = {"step_time_s": "s", "memory_bytes": "B", "tokens_per_s": "1/s", "run_days": "day", "gpu_hours": "hour",
             "cost_usd": "USD", "energy_kwh": "kWh", "reserve_bytes": "B", "headroom_bytes": "B"}
    plan: object                    # roofline.spec.config.Plan
    step_time_s: float
    memory_bytes: float
    mfu: float
    hfu: float
    tokens_per_s: float
    n_gpus: int
    micro_batches: int
    pp_bubble: float
    slower_than_best: float = 0.0   # (step time - best step time) / best step time, same GPU count
    run_days: float | None = None   # with tokens=: the whole run
    gpu_hours: float | None = None
    cost_usd: float | None = None   # with gpu_hour_price=
    energy_kwh: float | None = None  # GPU board power x GPU-hours (hardware profile's board_power)
    reserve_bytes: float = 0.0      # CUDA context + NCCL buffers + allocator fragmentation (mem_reserve)
    headroom_bytes: float = 0.0     # usable HBM (capacity x (1 - margin)) - memory - reserve; >= 0 for a plan that fits

def _objective(space: Space, objective: str):
    o = space.out
    if objective == "time":
        return o["step_time"]
    if objective == "cost":      # GPU-seconds per token (== time at a fixed GPU count)
        return o["step_time"] * space.n_gpus / (space.global_batch * space.model.seq_len)
    if objective == "mfu":
        return -o["mfu"]
    raise InputError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")


def _no_fit_message(space: Space) -> str:
    import numpy as np

    m, hw = space.model, space.hardware
    head = f"{m.name} on {space.n_gpus} x {hw.id} (global batch {space.global_batch}, seq {m.seq_len})"
    if space.valid == 0 and space.base.dp_replicas > 1:
        return (f"no valid plan for {head} with dp-replicas {space.base.dp_replicas}: it must divide a sharded plan's "
                f"dp x cp (each replica shards one copy of the state over dp x cp / replicas ranks)")
    if space.valid == 0:
        return (f"no valid plan for {head}: no tp x pp x dp x cp split of {space.n_gpus} GPUs meets the divisibility "
                f"rules (heads {m.n_heads}, kv-heads {m.kv_heads}, layers {m.n_layers}, dp | global batch)")
    total = space.out["memory"] + space.out["mem_reserve"]
    mem = np.where(np.isfinite(total), total, np.inf)
    i = int(np.argmin(mem))
    p = plan_of(space.knobs, i, space.base, space.global_batch, ladder=space.ladder)
    usable = hw.hbm_capacity * (1 - space.memory_margin)
    return (f"no plan fits in memory for {head}: the smallest of {space.valid} valid plans needs "
            f"{fmt_bytes(mem[i], 1)} per GPU with the reserve (tp={p.tp} pp={p.pp} dp={p.dp} cp={p.cp} recompute "
            f"{p.recompute}, sharding {p.sharding}) > {fmt_bytes(usable, 1)} usable; use more GPUs or a smaller model")


def rank(space: Space, *, objective: str = "time", top: int | None = 20, tokens: float | None = None,
         gpu_hour_price: float | None = None, schedule: str | None = None) -> list[Candidate]:
    """The ``top`` fitting plans of a space, best first (ties: less memory first)."""
    import numpy as np

    if top is not None:
        top = _int("top", top)
    _run_args(tokens, gpu_hour_price)
    if space.n_fit == 0:
        raise InputError(_no_fit_message(space))
    key = _objective(space, objective)
    idx = np.flatnonzero(space.fits)
    if top is not None and top < len(idx):
        part = np.argpartition(key[idx], top - 1)[:top]
        kth = key[idx][part].max()
        idx = idx[key[idx] <= kth]          # keep ties at the boundary, ordered below
    order = np.lexsort((space.out["memory"][idx], key[idx]))
    idx = idx[order][:top]
    best_t = float(space.out["step_time"][idx[0]])
    # only the top-k (a few dozen) become Python objects
    return [candidate(space, i, best_t, schedule, tokens, gpu_hour_price) for i in idx]


def candidate(space: Space, i: int, best_t: float, schedule: str | None = None, tokens: float | None = None,
              gpu_hour_price: float | None = None) -> Candidate:
    """Row ``i`` of an evaluated space as a Candidate, its gap measured against the step time ``best_t``."""
    o = space.out
    t = float(o["step_time"][i])
    return Candidate(
        plan=plan_of(space.knobs, i, space.base, space.global_batch, schedule, space.ladder), step_time_s=t,
        memory_bytes=float(o["memory"][i]), mfu=float(o["mfu"][i]), hfu=float(o["hfu"][i]),
        tokens_per_s=float(o["tokens_per_s"][i]), n_gpus=space.n_gpus,
        micro_batches=int(round(float(o["micro_batches"][i]))), pp_bubble=float(o["pp_bubble_share"][i]),
        slower_than_best=(t - best_t) / best_t, reserve_bytes=float(o["mem_reserve"][i]),
        headroom_bytes=float(space.hardware.hbm_capacity * (1 - space.memory_margin) - o["memory"][i]
                             - o["mem_reserve"][i]),
        **_run(t, space.n_gpus, space.global_batch * space.model.seq_len, space.hardware, tokens, gpu_hour_price))


def _family(hw_id: str) -> str:
    """GPU family of a profile id: a100-sxm4-80gb -> a100, h100-sxm-measured -> h100, gh200-vista -> gh200."""
    return hw_id.split("-")[0]


# measured_mfu of every GPU family, as computed from the bundled validation sets: read by the search's plausibility
# line instead of pricing those rows on every call (about 0.25 s of a 2 s search); `python -m roofline.views.search
# --write-measured-mfu` rewrites it and tests/test_plausibility.py checks it against a fresh computation
MEASURED_MFU_FILE = DATA / "measured_mfu.json"
# the bundled sets whose measured runs it holds: every public one with a stated plan (validate --dataset NAME;
# roofline/data/validation/SOURCES.md cites each row), so the best measured run is the best the project knows
MEASURED_SETS = ("published", "nemo", "tables", "papers")


@functools.lru_cache(maxsize=1)
def _mfu_table() -> dict:
    """MEASURED_MFU_FILE as read ({} when it cannot be)."""
    import json
    try:
        return json.loads(MEASURED_MFU_FILE.read_text())
    except (OSError, ValueError):
        return {}


@functools.lru_cache(maxsize=None)
def measured_mfu(family: str) -> list[tuple[float, str, str, bool, str]]:
    """(MFU, case_id, stack, MoE, peak) of every measured run of a GPU family in the bundled validation sets
    (MEASURED_SETS), best first (``compute_measured_mfu``), read from ``MEASURED_MFU_FILE`` when it has the
    family."""
    table = _mfu_table()
    if family in table:
        return [tuple(x) for x in table[family]]
    return compute_measured_mfu(family)


def _mfu_families() -> tuple[str, ...]:
    """The GPU families MEASURED_MFU_FILE holds (measured_families when it cannot be read)."""
    return tuple(_mfu_table()) or tuple(measured_families())


def measured_families() -> list[str]:
    """The GPU families of the bundled validation rows (MEASURED_SETS)."""
    from . import validate as V
    return sorted({_family(str(r.get("gpu_id") or "")) for name in MEASURED_SETS
                   for r in V.read(V.dataset_path(name))} - {""})


def write_measured_mfu(path=None) -> dict:
    """Recompute ``measured_mfu`` of every family and write MEASURED_MFU_FILE (or ``path``)."""
    import json

    table = {f: [list(x) for x in compute_measured_mfu(f)] for f in measured_families()}
    lines = [f" {json.dumps(f)}: [\n" + ",\n".join(f"  {json.dumps(x)}" for x in runs) + "\n ]" for f, runs in table.items()]
    (path or MEASURED_MFU_FILE).write_text("{\n" + ",\n".join(lines) + "\n}\n")
    return table


def compute_measured_mfu(family: str) -> list[tuple[float, str, str, bool, str]]:
    """(MFU, case_id, stack, MoE, peak) of every measured run of a GPU family in the bundled validation sets
    (MEASURED_SETS) whose layout the row states, best first. MFU uses this model's FLOP count (causal attention
    halved) over the measured time and the peak of the run's GEMM dtype (``peak``: its peak_flops key, 'bf16', 'fp8', 'fp4'), so it
    compares like for like with a plan's predicted MFU of the same peak."""
    from ..base import precision
    import numpy as np

    import re

    from ..spec import stacks
    from . import validate as V

    out = []
    for name in MEASURED_SETS:
        cases = []
        for row in V.read(V.dataset_path(name)):
            if _family(str(row.get("gpu_id") or "")) != family:     # priced on its gpu_id's profile: skip early
                continue
            if not V.layout_stated(row):
                continue            # a layout validate chooses (complete_layout): not a stated plan
            try:
                c = V.build_case(row)
            except V.Skip:
                continue
            if _family(c.hw.id) == family and c.measured == c.measured:
                cases.append(c)
        if not cases:
            continue
        o = V.evaluate_cases(cases)
        for i, c in enumerate(cases):
            peak = c.hw.peak(c.plan.dtype) * c.plan.n_gpus
            # a framework outside the registry priced on a stand-in (MegaScale on megatron-core) is not that stack:
            # its runs do not set the stack's best measured MFU (plausibility compares within a stack first)
            column = str(c.row.get("framework") or "").strip()
            stack = c.framework if not column or stacks.names_stack(column) else \
                f"{re.split(r'[(,;]', column)[0].strip()} (stand-in {c.framework})"
            out.append((float(o["flops"][i] / (c.measured * peak)), c.row["case_id"], stack,
                        (c.model.n_experts or 1) > 1, precision.peak_key(c.plan.dtype)))
    # an MFU at or above 1 is a row read wrong (a batch or a rate of another unit), never a measurement
    return sorted((x for x in out if np.isfinite(x[0]) and 0 < x[0] < 1), reverse=True)


def plausibility(cand, hw, stack_id: str, moe: bool = False, dtype: str | None = None) -> str | None:
    """One line comparing a plan's predicted MFU with the best measured MFU on that GPU family (on its architecture
    generation's families where it has fewer than uncertainty.MIN_RUNS measured runs: uncertainty.GENERATION): of
    the runs of the same kind of model (MoE or dense) where the bundled data has some, of the same GEMM peak
    (``dtype``: the plan's precision; an MFU over the FP8 peak is not comparable with one over the BF16 peak) where it
    has some, and of the same stack where it has at least MIN_RUNS (a framework priced on a stand-in, MegaScale on
    megatron-core, is not that stack: compute_measured_mfu). Fewer than MIN_RUNS runs in the end are said, not flagged."""
    from ..base import precision

    from .uncertainty import MIN_RUNS, generation

    family = _family(hw.id)
    runs, where = measured_mfu(family), family
    gen = generation(family)
    if len(runs) < MIN_RUNS and gen:
        # few or no measured runs on this part (H200, B300, GB300): its architecture generation's, said
        # (uncertainty.GENERATION; the same MIN_RUNS as the error band under the table)
        fams = [f for f in _mfu_families() if generation(f) == gen]
        pooled = sorted((r for f in fams for r in measured_mfu(f)), reverse=True)
        if len(pooled) > len(runs):
            some = f"{len(runs)} on {family}" if runs else f"none on {family}"
            runs, where = pooled, f"{gen} GPUs ({', '.join(fams)}; {some})"
    if not runs:
        return None
    kind = [r for r in runs if r[3] == moe]
    runs = kind or runs
    key = precision.peak_key(dtype) if dtype else None
    at_peak = [r for r in runs if r[4] == key]
    runs = at_peak or runs
    # the same stack's runs where they are enough to compare with (MIN_RUNS); else every stack's on that family
    same = [r for r in runs if r[2] == stack_id]
    same = same if len(same) >= MIN_RUNS else []
    best = (same or runs)[0]
    pool = same or runs
    if len(pool) < MIN_RUNS:    # too few runs to call a plan above them optimistic: say how few
        flag = f"  (only {len(pool)} measured run{'s' if len(pool) > 1 else ''} to compare with)"
    else:
        flag = "  ABOVE every measured run: treat as optimistic" if cand.mfu > best[0] * 1.1 else ""
    what = (" MoE" if moe else " dense") if kind else ""
    peak = f" {key.upper()}" if at_peak else ""
    return (f"plausibility: predicted MFU {100 * cand.mfu:.1f} % vs the best measured{peak}{what} run on "
            f"{where} in the bundled validation data{' with ' + stack_id if same else ''}: "
            f"{100 * best[0]:.1f} % ({best[1]}{'' if same else ', ' + best[2]}){flag}")


def top_plan_band(model, cand, hw) -> dict | None:
    """How far off the top plan's prediction is likely to be, as ``transformer`` prints under its step time: the
    validation error quantiles of similar runs (uncertainty.band: GPU family, dense or MoE, active parameters, node
    scope) and the step and MFU they imply (``low_s`` .. ``high_s``, ``mfu_low`` .. ``mfu_high``); None where the
    bundled data has too few similar runs."""
    from ..model.predict import evaluate, inputs
    from .uncertainty import band, implied, kind_of

    active = float(evaluate(inputs(model, cand.plan, hw))["active_params"])
    t = cand.step_time_s          # s
    b = implied(band(hw.id, active, cand.n_gpus, hw.gpus_per_node, **kind_of(model, cand.plan)), t)
    if b is None:
        return None
    # MFU scales as 1 / step time: the band's slowest step gives the lowest MFU
    return {**b, "mfu_low": cand.mfu * t / b["high_s"], "mfu_high": cand.mfu * t / b["low_s"]}


def band_line(b: dict | None, hw_id: str) -> str | None:
    """The search's line for :func:`top_plan_band`."""
    if b is None:
        return None
    from .uncertainty import describe
    return (f"likely measured: {b['low_s']:.3f} .. {b['high_s']:.3f} s, MFU {100 * b['mfu_low']:.1f} .. "
            f"{100 * b['mfu_high']:.1f} % ({describe(b, hw_id)})")


def top_plan_ep_hint(model, cands, hw, stack_id: str) -> str | None:
    """For an MoE search whose top plan leaves its EP all-to-all exposed: advice.ep_overlap_hint on that plan and how
    to search with the overlap (the search takes overlap_ep from the stack's default, off, unless it is pinned)."""
    if not cands or (model.n_experts or 1) <= 1 or cands[0].plan.ep <= 1:
        return None
    from ..model.predict import predict
    from .advice import ep_overlap_hint

    hint = ep_overlap_hint(dataclasses.replace(predict(model, cands[0].plan, hw), stack=stack_id))
    return f"top plan: {hint}; search with --overlap-ep 1 to rank every plan with it" if hint else None


@dataclasses.dataclass(frozen=True)
class DomainNote:
    """Why a top plan's tensor-parallel group leaves the GPUs' fast-link domain (the NVLink domain of a node or an NVL72
    rack: the profile's ``gpus_per_node``; issue 17): the best fitting plan whose TP group stays inside one domain
    (``inside``: its Candidate, None when none fits), the step-time components in which the two differ most (``why``:
    (component, seconds the inside plan pays more), positive first), and the links the TP collectives see."""
    tp: int
    domain: int                 # GPUs per fast-link domain (gpus_per_node: 8 on HGX, 72 on NVL72)
    intra_kind: str             # that domain's link (nvlink, pcie, infinity-fabric)
    intra_bw: float             # B/s per GPU, one direction
    inter_kind: str             # the network a spanning TP group crosses (infiniband, ethernet)
    inter_bw: float             # B/s per GPU, one direction
    inside: object | None       # Candidate with tp <= domain, or None
    why: tuple = ()             # ((breakdown component, inside - top in s), ...), positive first

    def line(self) -> str:
        net = f"the {self.inter_kind} network ({self.inter_bw / 1e9:.0f} GB/s per GPU"
        if self.domain == 1:
            head = (f"top plan: its TP group of {self.tp} spans {self.tp} nodes of one GPU each, so its TP collectives "
                    f"cross {net}, one direction)")
        else:
            head = (f"top plan: its TP group of {self.tp} spans {-(-self.tp // self.domain)} {self.intra_kind} domains "
                    f"of {self.domain} GPUs, so its TP collectives cross {net} against {self.intra_bw / 1e9:.0f} GB/s "
                    f"of {self.intra_kind}, one direction)")
        if self.inside is None:
            return head + f"; no plan with tp <= {self.domain} fits in memory"
        c = self.inside
        more = [f"{k.replace('_', ' ')} +{d:.3g} s" for k, d in self.why if d > 0]
        less = [f"{k.replace('_', ' ')} {abs(d):.3g} s" for k, d in self.why if d < 0]
        why = "; ".join(x for x in (f"it pays {', '.join(more)} more" if more else "",
                                    f"saves {', '.join(less)}" if less else "") if x)
        return (f"{head}; the best plan with TP inside one domain, {_plan_text(c.plan)}, is "
                f"{100 * c.slower_than_best:+.1f} % ({c.step_time_s:.4g} s)" + (f": {why}" if why else ""))


def domain_note(space: Space, cands: list, *, objective: str = "time", schedule: str | None = None,
                tokens: float | None = None, gpu_hour_price: float | None = None,
                n_why: int = 3) -> DomainNote | None:
    """A :class:`DomainNote` when the top plan's TP group is larger than the fast-link domain (Megatron-Core places TP
    ranks innermost, so a TP group of t > domain ranks spans ceil(t / domain) domains), else None; None too when the
    space holds no plan with TP inside a domain (``--tp`` pinned above it: nothing to compare). The inside plan is the
    best of the space's fitting plans with tp <= domain under the same objective (its run totals with ``tokens`` and
    ``gpu_hour_price``, as the ranked plans'); ``why`` compares the two plans' step-time breakdowns (model.predict),
    the ``n_why`` components that differ most."""
    if not cands:
        return None
    top, hw = cands[0], space.hardware
    d = hw.gpus_per_node
    if top.plan.tp <= d:
        return None
    inside_domain = space.knobs["tp"] <= d
    if not inside_domain.any():
        return None
    inter = hw.inter
    note = DomainNote(tp=top.plan.tp, domain=d, intra_kind=hw.intra.kind, intra_bw=hw.intra.bandwidth,
                      inter_kind=inter.kind if inter else "inter-node", inter_bw=inter.bandwidth if inter else 0.0,
                      inside=None)
    ok = space.fits & inside_domain
    if not ok.any():
        return note
    # the ranking of the plans inside a domain (rank's order and ties), its gap taken against the top plan
    best = rank(dataclasses.replace(space, fits=ok), objective=objective, top=1, tokens=tokens,
                gpu_hour_price=gpu_hour_price, schedule=schedule)[0]
    inside = dataclasses.replace(best, slower_than_best=(best.step_time_s - top.step_time_s) / top.step_time_s)
    from ..model.predict import predict

    a = predict(space.model, inside.plan, hw).to_dict()["breakdown_s"]
    b = predict(space.model, top.plan, hw).to_dict()["breakdown_s"]
    # the components that differ by more than 1 % of the top plan's step, largest first
    diff = sorted(((k, a[k] - b[k]) for k in a if abs(a[k] - b[k]) > 0.01 * top.step_time_s),
                  key=lambda kv: -abs(kv[1]))[:n_why]
    why = tuple(sorted(diff, key=lambda kv: -kv[1]))
    return dataclasses.replace(note, inside=inside, why=why)


def _run(step_time, n_gpus, tokens_per_step, hw, tokens=None, price=None) -> dict:
    """A candidate's run (days, GPU-hours, cost, energy) from :func:`roofline.model.predict.run_totals`."""
    from ..model.predict import run_totals

    if tokens is None:
        return {}
    t = run_totals(step_time, n_gpus, tokens_per_step, hw.board_power, tokens=tokens, price=price)
    return {k: t[k] for k in ("run_days", "gpu_hours", "cost_usd", "energy_kwh")}


def _run_args(tokens, price) -> None:
    if tokens is not None and (isinstance(tokens, bool) or not tokens > 0 or not math.isfinite(tokens)):
        raise InputError(f"tokens must be a positive number, got {tokens!r}")
    if price is not None and (isinstance(price, bool) or not price >= 0 or not math.isfinite(price)):
        raise InputError(f"gpu-hour-price must be >= 0, got {price!r}")


def search(model, hw, n_gpus: int, global_batch: int, seq_len: int | None = None, *, objective: str = "time",
           top: int | None = 20, tokens: float | None = None, gpu_hour_price: float | None = None,
           framework: str = "megatron-core", base=None, schedule: str | None = None, **pins) -> list[Candidate]:
    """The best plans (frozen :class:`Candidate`, best first) for ``model`` on ``n_gpus`` x ``hw``.

    ``seq_len`` overrides the model's; ``base`` (a Plan) fixes dtype and overlap fractions
    (default: the framework's defaults); ``pins`` (tp=8, recompute="full", sharding=["none",
    "distributed"], ...) restrict knobs. ``tokens`` and ``gpu_hour_price`` add run totals.
    Raises InputError when nothing is valid or nothing fits.
    """
    if seq_len is not None:
        model = dataclasses.replace(model, seq_len=_int("seq-len", seq_len))
    pinned = schedule
    schedule = stack_schedule(framework, schedule)
    space = evaluate_space(model, hw, n_gpus, global_batch, base=base, framework=framework, schedule=schedule, **pins)
    cands = rank(space, objective=objective, top=top, tokens=tokens, gpu_hour_price=gpu_hour_price, schedule=schedule)
    own = own_schedule_space(model, hw, n_gpus, global_batch, framework, pinned, base=base, **pins)
    return with_own_schedule(cands, own, objective=objective, top=top, tokens=tokens, gpu_hour_price=gpu_hour_price)


def own_schedule_space(model, hw, n_gpus, global_batch, framework, pinned, **kw):
    """The space of a stack's own schedule for a pipeline whose schedule is not stated, where it differs from the 1F1B
    family the search enumerates (HAI-LLM: DualPipe, stacks.unstated_schedule), priced beside it when no schedule is
    pinned: (its Space, the schedule); None otherwise, or when none of its plans fits."""
    from ..spec import stacks

    st = None if pinned or framework in (None, "any") else stacks.get(framework)
    own = stacks.unstated_schedule(st) if st is not None else None
    if own not in PINNED_SCHEDULES:
        return None
    try:
        sp = evaluate_space(model, hw, n_gpus, global_batch, framework=framework, schedule=own, **kw)
    except InputError:                      # no valid plan runs it (an odd pp only, too few micro-batches)
        return None
    return (sp, own) if sp.n_fit else None


def with_own_schedule(cands: list[Candidate], own, *, objective: str, top: int | None, tokens, gpu_hour_price):
    """``cands`` with the ranked plans of ``own`` (own_schedule_space's (Space, schedule), or None) merged in."""
    if own is None:
        return cands
    return merge_ranked(cands, rank(own[0], objective=objective, top=top, tokens=tokens,
                                    gpu_hour_price=gpu_hour_price, schedule=own[1]), top)


def merge_ranked(a: list[Candidate], b: list[Candidate], top: int | None) -> list[Candidate]:
    """Two ranked lists of one GPU count as one, best first (every objective orders plans of one GPU count as their
    step time does; ties: less memory first), each plan's gap measured against the new best."""
    both = sorted(a + b, key=lambda c: (c.step_time_s, c.memory_bytes))[:top]
    best = both[0].step_time_s
    return [dataclasses.replace(c, slower_than_best=(c.step_time_s - best) / best) for c in both]


def gpu_range(text: str) -> list[int]:
    """``"1024"`` -> [1024]; ``"256..4096"`` -> the powers of two from 256 to 4096 (ends included)."""
    from ..base.schema import number

    text = str(text).strip()
    parts = text.split("..", 1) if ".." in text else [text, text]
    # integers from 1 to 2^20 GPUs: the cap bounds the divisor enumeration (1..1e18 would never finish)
    try:
        vals = [float(t.strip()) for t in parts]
    except ValueError:
        raise InputError(f"--gpus expects N or LO..HI (e.g. 1024 or 256..4096), got {text!r}") from None
    lo, hi = (number(v, f"--gpus ({text!r})", int, low=1, high=2**20) for v in vals)
    if lo <= 0 or hi < lo:
        raise InputError(f"--gpus range must be positive and LO <= HI, got {text!r}")
    out = [lo] + [1 << k for k in range(lo.bit_length(), hi.bit_length()) if lo < (1 << k) < hi]
    return sorted(set(out + [hi]))


def sweep(model, hw, gpu_counts, global_batch: int, *, objective: str = "time", tokens=None,
          gpu_hour_price=None, framework="megatron-core", base=None, **pins) -> list[Candidate]:
    """The best plan for each GPU count (counts where nothing is valid or fits are skipped)."""
    best = []
    errors = []
    from ..base import progress

    for n in progress.track(list(gpu_counts), "search per GPU count", unit="count"):
        try:
            best += search(model, hw, n, global_batch, objective=objective, top=1, tokens=tokens,
                           gpu_hour_price=gpu_hour_price, framework=framework, base=base, **pins)
        except InputError as exc:
            errors.append(str(exc))
    if not best:
        raise InputError(errors[0] if len(errors) == 1 else f"no GPU count has a plan that fits; first: {errors[0]}")
    return best


def pareto(cands: list[Candidate]) -> list[Candidate]:
    """The time/cost Pareto front (cost = GPU-seconds per step), fastest first."""
    pts = sorted(cands, key=lambda c: (c.step_time_s, c.step_time_s * c.n_gpus))
    front, best_cost = [], math.inf
    for c in pts:
        cost = c.step_time_s * c.n_gpus
        if cost < best_cost:
            front.append(c)
            best_cost = cost
    return front


# ----------------------------------------------------------------------------------------------
# CLI

def _plan_text(p) -> str:
    s = f"tp={p.tp} pp={p.pp} dp={p.dp} {p.cp_label}" + (f" ep={p.ep}" if p.ep > 1 else "")
    s += f" mb={p.micro_batch}" + (f" v={p.interleave}" if p.interleave > 1 else "") \
        + (f" {p.schedule}" if p.schedule in PINNED_SCHEDULES and p.pp > 1 else "")    # no pipeline at pp 1
    s += f" SP={'on' if p.sequence_parallel and p.tp > 1 else 'off'} rc={p.recompute}" \
        + (f"({p.recompute_fraction:.2g})" if p.recompute == "full" and p.recompute_fraction < 1 else "") \
        + (f"({p.recompute_modules})" if p.recompute == "selective" and p.recompute_modules != "core_attn" else "") \
        + f" {p.sharding}" + (f" hsdp={p.dp_replicas}" if p.dp_replicas > 1 else "")
    s += (" ep-overlap" + ("+delay-wgrad" if p.delay_wgrad else "")) if p.ep > 1 and p.overlap_ep > 0 else ""
    return s + (f" offload={p.offload_layers}" if p.offload_layers else "")


def table(cands: list[Candidate], *, sweep_mode: bool = False) -> str:
    """The ranked plans (or, ``sweep_mode``, the best plan per GPU count) as a text table."""
    Col = report.Col
    width = max([58] + [len(_plan_text(c.plan)) for c in cands])     # a long plan text widens the column
    cols = [Col("GPUs", 6) if sweep_mode else Col("#", 3), Col("plan", width, "<", _plan_text, sep="  "),
            Col("step", 10, fmt=fmt_time), Col("mem/GPU", 10, fmt=lambda b: f"{b / GiB:8.1f}Gi"),
            Col("free", 8, fmt=lambda b: f"{b / GiB:6.1f}Gi"), Col("MFU", 7, fmt=lambda f: f"{100 * f:6.1f}%"),
            Col("GPU-s/step", 12, fmt=".1f") if sweep_mode else Col("gap", 8, fmt=lambda g: f"{100 * g:+7.2f}%")]
    run = cands[0].run_days is not None
    if run:            # the run's columns: those the first candidate has (tokens=, a price, a board power)
        cols += [Col("days", 8, fmt=".1f"), Col("GPU-h", 11, fmt=".4g")] \
            + ([Col("cost $", 12, fmt=".4g")] if cands[0].cost_usd is not None else []) \
            + ([Col("MWh", 9, fmt=lambda kwh: f"{kwh / KILO:.4g}")] if cands[0].energy_kwh is not None else [])
    rows = []
    for i, c in enumerate(cands):
        last = c.step_time_s * c.n_gpus if sweep_mode else ("best" if i == 0 else c.slower_than_best)
        row = [c.n_gpus if sweep_mode else i + 1, c.plan, c.step_time_s, c.memory_bytes + c.reserve_bytes,
               c.headroom_bytes, c.mfu, last]
        if run:
            row += [c.run_days, c.gpu_hours] + ([c.cost_usd] if c.cost_usd is not None else []) \
                + ([c.energy_kwh] if c.energy_kwh is not None else [])
        rows.append(row)
    return report.table(cols, rows)


def write_csv(path: str, cands: list[Candidate]) -> None:
    import csv

    plan_cols = ("tp", "pp", "dp", "cp", "ep", "micro_batch", "global_batch", "interleave", "schedule",
                 "sequence_parallel", "recompute", "recompute_modules", "sharding", "dtype")
    cols = ("n_gpus", "step_time_s", "memory_bytes", "mfu", "hfu", "tokens_per_s", "micro_batches", "pp_bubble",
            "slower_than_best", "run_days", "gpu_hours", "cost_usd", "energy_kwh")
    try:
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(plan_cols + cols)
            for c in cands:
                w.writerow([getattr(c.plan, k) for k in plan_cols] + ["" if getattr(c, k) is None else getattr(c, k)
                                                                     for k in cols])
    except OSError as exc:
        raise InputError(f"cannot write --csv {path}: {exc.strerror}") from None


def plot_pareto(path: str, points: list[Candidate], front: list[Candidate], title: str):
    """Draw the sweep's step time (x, log) against its cost (y) and write it to ``path``; returns the
    (closed) matplotlib Figure so that callers and tests can inspect what was drawn.

    The cost is in the table's units: GPU-seconds per step, or with ``tokens`` GPU-hours of the run, or with a
    price too USD; with ``tokens`` the run's days are a second x axis (days = steps x step time). Points of
    ``front`` are labelled "Pareto front", the others "dominated". Tick labels are written out (no offset
    or scientific multiplier); when the costs differ by less than 1 % the title says so and the y range is
    widened to +-5 % of the median, so that a flat cost is drawn flat.
    """
    import statistics

    from matplotlib.ticker import Formatter, LogLocator, MaxNLocator, NullFormatter

    from . import plotting

    plt = plotting.pyplot("--plot")
    run = all(c.run_days is not None for c in points)
    if run and all(c.cost_usd is not None for c in points):
        cost, label, prefix, suffix = [c.cost_usd for c in points], "cost of the run [USD]", "$", ""
    elif run:
        cost, label, prefix, suffix = [c.gpu_hours for c in points], "GPU-hours of the run", "", ""
    else:
        cost, label, prefix, suffix = [c.step_time_s * c.n_gpus for c in points], "GPU-seconds per step", "", ""
    key = {(c.n_gpus, c.step_time_s) for c in front}
    on = [(c.step_time_s, y, c.n_gpus) for c, y in zip(points, cost) if (c.n_gpus, c.step_time_s) in key]
    off = [(c.step_time_s, y, c.n_gpus) for c, y in zip(points, cost) if (c.n_gpus, c.step_time_s) not in key]
    on.sort()

    class Readable(Formatter):
        """k/M/G with as many decimals as the tick spacing needs (no offset, no multiplier)."""
        ticks: list = []

        def set_locs(self, locs):
            self.ticks = sorted(locs)

        def __call__(self, v, pos=None):
            locs = self.ticks or [v]
            step = min((b - a for a, b in zip(locs, locs[1:]) if b > a), default=abs(v) or 1.0)
            scale, unit = next(((s, u) for s, u in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
                                if max(abs(x) for x in locs) >= s), (1.0, ""))
            digits = max(0, -math.floor(math.log10(step / scale) + 1e-9)) if step > 0 else 0
            return f"{prefix}{v / scale:,.{digits}f}{unit}{suffix}"

    def seconds(v, pos=None):
        return f"{v:g}"

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot([p[0] for p in on], [p[1] for p in on], "o-", c="C0", label="Pareto front", zorder=3)
    if off:
        ax.scatter([p[0] for p in off], [p[1] for p in off], marker="x", c="grey", label="dominated", zorder=2)
    for x, y, n in on + off:
        ax.annotate(f"{n} GPUs", (x, y), textcoords="offset points", xytext=(4, 5), fontsize=7)
    ax.set_xscale("log")
    xs = [p[0] for p in on + off]
    ax.set_xlim(min(xs) / 1.25, max(xs) * 1.6)              # room for the last point's label
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(seconds)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("step time [s]")
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
    ax.yaxis.set_major_formatter(Readable())
    ax.set_ylabel(label)
    mid = statistics.median(cost)
    spread = (max(cost) - min(cost)) / min(cost) if min(cost) > 0 else math.inf
    if spread < 0.01:
        # below 1 %: draw it flat and say so (a steep curve through an offset label misleads)
        ax.set_ylim(mid * 0.95, mid * 1.05)
        title += f"\ncost flat: all within {100 * spread:.2g} % of each other"
    else:
        pad = 0.08 * (max(cost) - min(cost))
        ax.set_ylim(min(cost) - pad, max(cost) + pad)
    if run:
        days_per_s = points[0].run_days / points[0].step_time_s        # same tokens and batch for every point
        top = ax.secondary_xaxis("top", functions=(lambda s: s * days_per_s, lambda d: d / days_per_s))
        top.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        top.xaxis.set_major_formatter(seconds)
        top.xaxis.set_minor_formatter(NullFormatter())
        top.set_xlabel("run time [days]")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(title, fontsize=9)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    plotting.save(fig, path, "--plot")
    return fig


def _pins(args) -> dict:
    pins = {k: getattr(args, k) for k in ("tp", "pp", "cp", "ep", "micro_batch", "interleave", "recompute",
                                          "sequence_parallel") if getattr(args, k, None) is not None}
    if args.dp is not None:
        raise InputError("search derives dp from --gpus / (tp x pp x cp); pin tp, pp or cp instead of --dp")
    if args.zero is not None:
        pins["sharding"] = SHARDING_BY_STAGE[args.zero]
    elif args.sharding is not None:
        pins["sharding"] = args.sharding
    return pins


def price_list(text: str) -> tuple:
    """argparse type of ``--gpu-hour-price``: one price, or one per profile of ``--gpu A,B,...`` ('2.5,4,5.5')."""
    out = []
    for part in str(text).split(","):
        try:
            v = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number or numbers separated by commas, got {text!r}") from None
        if not (math.isfinite(v) and v >= 0):
            raise argparse.ArgumentTypeError(f"each price must be a finite number >= 0, got {part!r}")
        out.append(v)
    return tuple(out)


def gpu_list(text: str | None) -> list[str]:
    """The profiles ``--gpu`` names: one, or several separated by commas (compared at one GPU count)."""
    if not text or "," not in text:
        return [text] if text else []
    gpus = [g.strip() for g in text.split(",")]
    if any(not g for g in gpus):
        raise InputError(f"--gpu: an empty profile name in {text!r} (give ids separated by commas: h100-sxm,b200)")
    if len(set(gpus)) < len(gpus):
        raise InputError(f"--gpu names a profile twice: {text!r}")
    return gpus


def _prices(prices, n: int) -> list:
    """One price per compared profile: none, one for all, or exactly one each."""
    if prices is None:
        return [None] * n
    if len(prices) == 1:
        return list(prices) * n
    if len(prices) != n:
        if n == 1:
            raise InputError(f"--gpu-hour-price gives {len(prices)} prices for one profile: several prices go with "
                             f"several profiles in --gpu (A,B,...), one each in the same order")
        raise InputError(f"--gpu-hour-price gives {len(prices)} prices for {n} profiles of --gpu: give one for all, "
                         f"or one per profile in the same order")
    return list(prices)


@dataclass(frozen=True)
class _Setup:
    """What the flags resolve to for one profile: the Spec, the base plan of the space and the pinned knobs."""
    spec: object
    base: object
    pins: dict
    schedule: str | None
    framework: str


def _setup(args) -> _Setup:
    """The flags through the resolver (one profile): the stack, the base plan every enumerated plan starts from, the
    knobs the user pinned (stated fields keep their value; the others follow each plan's layout by the stack's
    rules), refusing a schedule the stack cannot run."""
    from ..spec.cliargs import build_spec

    framework = "any" if (args.framework or "").lower() == "any" else None
    if framework:
        args.framework = None
    schedule = args.schedule if args.schedule in PINNED_SCHEDULES else None
    if schedule in ("dualpipev", "dualpipe", "zb1p", "zb2p"):
        # the base plan is a template at pp 1, where DualPipe(V) cannot run: each enumerated plan takes the schedule
        args.schedule = None
    # --dp-replicas R pins the HSDP replica count of every plan (space.with_replicas keeps the plans R divides); the
    # template plan at dp 1 cannot hold it, so it is checked against the stack here and set after resolving
    replicas = getattr(args, "dp_replicas", None)
    args.dp_replicas = None
    spec = build_spec(args)
    schedule = stack_schedule(framework or spec.stack.id, schedule)
    if schedule and not framework:
        from ..spec import stacks
        why = stacks.schedule_refusal(spec.stack, schedule)
        if why:
            raise InputError(why)
    if replicas is not None and replicas > 1 and not framework and not spec.stack.rule("replicas", False):
        from ..spec.stacks import plan_rules
        rule = next(r for r in plan_rules(spec.stack) if r.reads == ("dp_replicas",))
        raise InputError(rule.text(spec.model, dataclasses.replace(spec.plan, dp_replicas=replicas)))
    pins = _pins(args)
    stated = {k for k, why in spec.origin.items() if why == "stated"} | ({"dp_replicas"} if replicas else set())
    pins["stated"] = frozenset(stated)
    pins["tp_comm_overlap"] = bool(args.tp_comm_overlap)
    pins["memory_margin"] = SEARCH_MEMORY_MARGIN if args.memory_margin is None else args.memory_margin
    return _Setup(spec, dataclasses.replace(spec.plan, tp=1, pp=1, dp=1, cp=1, dp_replicas=replicas or 1), pins,
                  schedule, framework or spec.stack.id)


def _search_one(args, n_gpus: int, price):
    """(spec, space, candidates, the pinned schedule they were built with, (space, schedule) of the stack's own
    schedule ranked beside them or None) of one profile at one GPU count."""
    pinned = args.schedule
    st = _setup(args)
    space = evaluate_space(st.spec.model, st.spec.hardware, n_gpus, args.global_batch, base=st.base,
                           schedule=st.schedule, framework=st.framework, **st.pins)     # pins carry memory_margin
    cands = rank(space, top=args.top, objective=args.objective, tokens=args.tokens, gpu_hour_price=price,
                 schedule=st.schedule)
    # the stack's own schedule for an unstated one (HAI-LLM: DualPipe), ranked beside the 1F1B family
    own = own_schedule_space(st.spec.model, st.spec.hardware, n_gpus, args.global_batch, st.framework, pinned,
                             base=st.base, **st.pins)
    cands = with_own_schedule(cands, own, objective=args.objective, top=args.top, tokens=args.tokens,
                              gpu_hour_price=price)
    return st.spec, space, cands, st.schedule, own


def _sensitivity_of(space, cand, factor):
    from types import SimpleNamespace

    from .sensitivity import sensitivity
    return sensitivity(SimpleNamespace(model=space.model, plan=cand.plan, hardware=space.hardware), factor)


def compare_counts(text: str, n: int) -> list[int]:
    """The GPU count of each of ``n`` compared profiles: one count for all (``--gpus 1024``) or one each in the order
    of ``--gpu`` (``--gpus 1024,512``: the same budget on fewer, faster GPUs); a range is for one profile."""
    parts = [t.strip() for t in str(text).split(",")]
    if any(".." in t for t in parts):
        raise InputError("--gpu with several profiles compares them at given GPU counts: give --gpus N or one count "
                         "per profile (1024,512), not a range")
    counts = [gpu_range(t)[0] for t in parts]
    if len(counts) == 1:
        return counts * n
    if len(counts) != n:
        raise InputError(f"--gpus gives {len(counts)} counts for {n} profiles of --gpu: give one for all, or one per "
                         f"profile in the same order")
    return counts


def compare(args, gpus: list[str], counts: list[int]) -> list[dict]:
    """The best plan of each profile in ``gpus`` at its GPU count in ``counts`` (``search --gpu A,B,...``): one row
    per profile, the refusal or no-fit message in place of a plan when the profile cannot run the model so."""
    import copy

    rows = []
    prices = _prices(args.gpu_hour_price, len(gpus))
    for gpu, n_gpus, price in zip(gpus, counts, prices):
        a = copy.copy(args)
        a.gpu = gpu
        try:
            spec, space, cands, _, _ = _search_one(a, n_gpus, price)
        except InputError as exc:
            rows.append({"gpu": gpu, "n_gpus": n_gpus, "error": str(exc)})
            continue
        best = cands[0]
        row = {"gpu": spec.hardware.id, "n_gpus": n_gpus, "name": spec.hardware.name, "stack": spec.stack.id,
               "seq_len": spec.model.seq_len, "best": best,
               "valid": space.valid, "fit": space.n_fit}
        sens = _sensitivity_of(space, best, 2.0)
        row["bound_by"] = sens.bound_by
        row["bound_share"] = sens.row(sens.bound_by)["elasticity"]
        rows.append(row)
    errors = {r.get("error") for r in rows}
    if len(errors) == 1 and None not in errors:     # the same refusal everywhere: the flags, not a profile
        raise InputError(errors.pop())
    return rows


def render_compare(rows: list[dict], model_name: str, args) -> str:
    Col = report.Col
    ok = [r for r in rows if "best" in r]
    counts = {r["n_gpus"] for r in rows}
    width = max([40] + [len(_plan_text(r["best"].plan)) for r in ok])
    cols = [Col("gpu", max(8, *(len(r["gpu"]) for r in rows)), "<")] \
        + ([Col("GPUs", 6)] if len(counts) > 1 else []) + [Col("best plan", width, "<", sep="  "),
            Col("step", 10, fmt=fmt_time), Col("MFU", 7, fmt=lambda f: f"{100 * f:6.1f}%"),
            Col("mem/GPU", 10, fmt=lambda b: f"{b / GiB:8.1f}Gi")]
    run = any(r["best"].run_days is not None for r in ok)
    cost = any(r["best"].cost_usd is not None for r in ok)
    if run:
        cols += [Col("days", 8, fmt=".1f"), Col("GPU-h", 11, fmt=".4g")] + ([Col("cost $", 12, fmt=".4g")] if cost else [])
    cols += [Col("bound by", 0, "<", sep="  ")]
    lines = []
    for r in rows:
        if "error" in r:
            lines.append([r["gpu"], *([r["n_gpus"]] if len(counts) > 1 else []), f"no plan: {r['error']}"])
            continue
        b = r["best"]
        row = [r["gpu"], *([r["n_gpus"]] if len(counts) > 1 else []), _plan_text(b.plan), b.step_time_s, b.mfu,
               b.memory_bytes + b.reserve_bytes]
        if run:
            row += [b.run_days, b.gpu_hours] + ([b.cost_usd if b.cost_usd is not None else "-"] if cost else [])
        lines.append(row + [f"{r['bound_by']} ({r['bound_share']:.2f})"])
    seq = f" x seq {ok[0]['seq_len']}" if ok else ""
    on = f"{counts.pop()} GPUs of each profile" if len(counts) == 1 else "the GPU counts given"
    head = (f"compare: {model_name} on {on}, global batch {args.global_batch}{seq}, objective "
            f"{args.objective}; each profile's best plan under its stack's rules")
    fastest = min(ok, key=lambda r: r["best"].step_time_s)["gpu"] if ok else None
    tail = [f"fastest: {fastest}"] if fastest else []
    if cost and ok:
        priced = [r for r in ok if r["best"].cost_usd is not None]
        tail.append(f"cheapest run: {min(priced, key=lambda r: r['best'].cost_usd)['gpu']}")
    tail.append("bound by: the resource whose speed the best plan's step time follows most, with the share of the "
                "step that scales with it (transformer --sensitivity prints the whole table)")
    return "\n".join([head, report.table(cols, lines, indent="  "), *[f"  {t}" for t in tail]])


def cmd_search(args) -> int:
    import json

    if args.global_batch is None:
        raise InputError("search needs --global-batch (sequences per optimizer step)")
    if args.model is None:
        raise InputError("search needs --model (a preset id or YAML path)")
    gpus = gpu_list(args.gpu)
    if len(gpus) > 1:
        counts = compare_counts(args.gpus, len(gpus))
        for opt, v in (("--plot", args.plot), ("--csv", args.csv), ("--sensitivity", args.sensitivity)):
            if v:
                raise InputError(f"{opt} is for one profile; with several in --gpu the comparison prints one row each")
        from ..spec import hardware, models
        for g in gpus:              # a misspelt profile is bad input, not a row: refused before any search runs
            hardware.load(g)
        rows = compare(args, gpus, counts)
        name = models.load(args.model).name
        if args.json:
            print(json.dumps({"model": name, "n_gpus": counts,
                              "global_batch": args.global_batch, "objective": args.objective,
                              "profiles": [{k: (v.to_dict() if k == "best" else v) for k, v in r.items()}
                                           for r in rows]}, indent=1))
            return 0
        print(render_compare(rows, name, args))
        return 0
    counts = gpu_range(args.gpus)
    if args.plot:
        if len(counts) == 1:
            raise InputError("--plot draws the time/cost Pareto front of a GPU range: give --gpus LO..HI")
        from . import plotting
        plotting.check(args.plot, "--plot")
    price = _prices(args.gpu_hour_price, 1)[0]
    if len(counts) == 1:
        spec, space, cands, schedule, own = _search_one(args, counts[0], price)
        model, hw = spec.model, spec.hardware
        dom = domain_note(space, cands, objective=args.objective, schedule=schedule, tokens=args.tokens,
                          gpu_hour_price=price)
        sens = _sensitivity_of(space, cands[0], args.sensitivity) if args.sensitivity else None
        if args.csv:
            write_csv(args.csv, cands)
        if args.json:
            d = {"model": model.name, "hardware": hw.id, "n_gpus": counts[0],
                 "global_batch": args.global_batch, "seq_len": model.seq_len, "objective": args.objective,
                 "enumerated": space.enumerated, "valid": space.valid, "fit": space.n_fit,
                 "plans": [c.to_dict() for c in cands]}
            if own is not None:          # the stack's own schedule, ranked with the plans above
                d["own_schedule"] = {"schedule": own[1], "valid": own[0].valid, "fit": own[0].n_fit}
            if sens is not None:
                d["sensitivity"] = sens.to_dict()
            if cands:
                d["top_plan_band"] = top_plan_band(model, cands[0], hw)
            if dom is not None:
                d["tp_outside_nvlink_domain"] = {
                    "tp": dom.tp, "domain_gpus": dom.domain, "intra_link": dom.intra_kind,
                    "intra_bandwidth_Bps": dom.intra_bw, "inter_link": dom.inter_kind, "inter_bandwidth_Bps": dom.inter_bw,
                    "best_inside": dom.inside.to_dict() if dom.inside is not None else None,
                    "difference_s": dict(dom.why), "line": dom.line()}
            print(json.dumps(d, indent=1))
            return 0
        print(f"search: {model.name} on {counts[0]} x {hw.id} ({hw.kind}), global batch {args.global_batch} x seq "
              f"{model.seq_len}, objective {args.objective}"
              + (f", CUDA graphs {space.base.cuda_graphs}"
                 + (f" ({space.base.graph_modules})" if space.base.graph_modules else "")
                 if space.base.cuda_graphs != "none" else "")
              + (f", optimizer {space.base.optimizer}" if space.base.optimizer != "adam" else ""))
        kept = (f" with {100 * space.memory_margin:g} % of it kept free (--memory-margin)" if space.memory_margin
                else "")
        also = (f"; and {own[0].valid} valid, {own[0].n_fit} fit under {own[1]}, {spec.stack.id}'s schedule for a "
                f"pipeline that states none" if own is not None else "")
        print(f"  {space.enumerated} knob combinations, {space.valid} valid, {space.n_fit} fit in "
              f"{fmt_bytes(hw.hbm_capacity, 0)}{kept}{also}; top {len(cands)} (gap = % slower than best):")
        print(table(cands))
        line = plausibility(cands[0], hw, spec.stack.id, (model.n_experts or 1) > 1, spec.plan.dtype)
        if line:
            print(line)
        line = band_line(top_plan_band(model, cands[0], hw), hw.id)
        if line:
            print(line)
        hint = top_plan_ep_hint(model, cands, hw, spec.stack.id)
        if hint:
            print(hint)
        if dom is not None:
            print(dom.line())
        if sens is not None:
            from .sensitivity import render as render_sensitivity
            print()
            print("top plan:")
            print(render_sensitivity(sens))
        return 0
    if args.sensitivity:
        raise InputError("--sensitivity prices the top plan of one GPU count: give --gpus N, not a range")
    st = _setup(args)
    model, hw = st.spec.model, st.spec.hardware
    kw = dict(objective=args.objective, tokens=args.tokens, gpu_hour_price=price, schedule=st.schedule,
              framework=st.framework)
    pts = sweep(model, hw, counts, args.global_batch, base=st.base, **{**kw, **st.pins})
    front = pareto(pts)
    if args.csv:
        write_csv(args.csv, pts)
    if args.plot:
        plot_pareto(args.plot, pts, front, f"{model.name} on {hw.id}, global batch {args.global_batch}")
    if args.json:
        print(json.dumps({"model": model.name, "hardware": hw.id, "gpus": counts, "objective": args.objective,
                          "best_per_gpu_count": [c.to_dict() for c in pts],
                          "pareto_front_gpus": [c.n_gpus for c in front]}, indent=1))
        return 0
    print(f"search: {model.name} on {hw.id}, GPUs {counts[0]}..{counts[-1]}, global batch {args.global_batch} x seq "
          f"{model.seq_len}; best plan per GPU count (cost = GPU-seconds per step):")
    print(table(pts, sweep_mode=True))
    print(f"time/cost Pareto front: {', '.join(str(c.n_gpus) for c in front)} GPUs")
    return 0


def register(subparsers) -> None:
    from ..spec.cliargs import add_model_plan_flags, flag, number

    p = subparsers.add_parser("search", help="find the fastest valid parallel plan (or a sweep's Pareto front)",
                              description="Enumerate every valid plan (tp, pp, dp, cp, ep, micro-batch, interleave, "
                                          "recompute, sequence parallel, sharding), evaluate them vectorized and rank "
                                          "those that fit in memory. Plan flags (--tp 8, --recompute full, ...) pin "
                                          "a knob; dtype, overlaps and attention kernel come from --framework.")
    add_model_plan_flags(p)
    g = p.add_argument_group("search")
    flag(g, "gpus", required=True, help="GPU count, or LO..HI to sweep the powers of two between (Pareto front); with "
         "several profiles in --gpu, one count for all or one per profile (1024,512)")
    flag(g, "objective", choices=OBJECTIVES, default="time", help="rank by step time, cost (GPU-s/token) or MFU")
    flag(g, "top", type=int, default=20, help="how many plans to print (default 20)")
    flag(g, "tokens", type=float, help="training tokens of the run: adds days, GPU-hours, cost, energy")
    flag(g, "gpu-hour-price", dest="gpu_hour_price", type=price_list,
         help="USD per GPU-hour (cost column); with several profiles in --gpu, one price for all or one per profile "
              "('2.5,4,5.5')")
    flag(g, "sensitivity", nargs="?", const=2.0, type=number(low=1.0), metavar="FACTOR",
         help="what bounds the top plan: its step time with each hardware resource alone FACTOR times faster and "
              "slower (default 2; transformer --sensitivity)")
    flag(g, "json", action="store_true", help="print one JSON object")
    flag(g, "csv", metavar="FILE", help="write the listed plans as CSV")
    flag(g, "plot", metavar="PNG", help="with a GPU range: draw the time/cost Pareto front (matplotlib)")
    p.set_defaults(func=cmd_search)



if __name__ == "__main__":          # python -m roofline.views.search --write-measured-mfu
    import sys
    if sys.argv[1:] != ["--write-measured-mfu"]:
        sys.exit("usage: python -m roofline.views.search --write-measured-mfu")
    t = write_measured_mfu()
    print(f"wrote {MEASURED_MFU_FILE}: {', '.join(f'{k} {len(v)} runs' for k, v in t.items())}")
