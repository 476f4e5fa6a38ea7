"""Multi-tenant cluster scheduling (vTrain case study 2): which job gets how many GPUs, with which plan.

Input (``jobs.yaml``)::

    gpu: a100-sxm4-80gb        # the cluster's profile (``--gpu`` overrides)
    gpus: 256                  # GPUs in the cluster (``--gpus`` overrides)
    framework: megatron-core   # default for every job
    jobs:
      - name: gpt3-13b
        model: gpt3-13b        # preset id, path, or a mapping of Model fields
        global_batch: 512      # sequences per step
        tokens: 20e9           # or steps: 10000
        arrival_h: 0           # hours after the start (default 0)
        deadline_h: 48         # optional, hours after the start
        framework: megatron-core   # optional

For every job and candidate GPU count g (powers of two up to the cluster, and the equal share)
a small plan search picks the fastest plan that fits in memory: tp in {1, 2, 4, 8} (within a
node), pp dividing the layers (up to 16), dp = g / (tp pp), micro-batch in {1, 2, 4, 8},
recompute none/selective/full, ep = gcd(dp, experts) for MoE, the job's framework defaults for
everything else. Its run time is steps x the predicted step time.

Policies (both non-preemptive, event-driven at arrivals and completions):

* ``greedy`` (ours): waiting jobs in order (deadline jobs first, earliest deadline first; then
  shortest job first by their smallest GPU-hours); each gets its smallest feasible GPU count (a
  deadline job: the smallest count that meets its deadline) while GPUs are free; the GPUs left
  over then go, one doubling at a time, to the starting job whose run time drops most per extra
  GPU. A job that does not fit now waits; a smaller one behind it may start (backfilling).
* ``equal`` (naive baseline): the cluster is split equally among all jobs; each runs on its
  share (with its best plan for that share) from its arrival.

Reported: per job GPUs, plan, start, end; the average job completion time (end - arrival),
the makespan and the deadlines met.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..spec.config import Model, Plan, check
from ..base.errors import InputError
from ..base import results
from . import report
from ..base.units import HOUR

JOB_KEYS = ("name", "model", "global_batch", "tokens", "steps", "arrival_h", "deadline_h", "framework")
TOP_KEYS = ("gpu", "gpus", "framework", "jobs")


@dataclass(frozen=True)
class Job:
    name: str
    model: Model
    global_batch: int
    steps: float
    arrival_h: float = 0.0
    deadline_h: float | None = None
    framework: str = "megatron-core"

    def __post_init__(self):      # the Python API gets the same ranges as a jobs file (load_jobs)
        from ..base.schema import number

        where = f"job {self.name!r}"
        number(self.global_batch, f"{where}: global_batch", int, low=1)
        number(self.steps, f"{where}: steps", float, low=0.0, low_open=True)
        number(self.arrival_h, f"{where}: arrival_h", float, low=0.0)
        if self.deadline_h is not None:
            number(self.deadline_h, f"{where}: deadline_h", float, low=self.arrival_h, low_open=True)


@dataclass(frozen=True)
class Option:
    """The best plan of a job on g GPUs."""
    gpus: int
    plan: Plan
    step_time: float
    hours: float


@dataclass(frozen=True)
class Placement(results.Result):
    """Where and when one job ran (hours after the start of the schedule); no plan: it never started."""
    UNITS = {"start_h": "hour", "end_h": "hour", "deadline_h": "hour"}
    job: str
    gpus: int = 0
    plan: Plan | None = None
    start_h: float = math.inf
    end_h: float = math.inf
    arrival_h: float = 0.0
    deadline_h: float | None = None

    @property
    def met(self) -> bool | None:
        return None if self.deadline_h is None else self.end_h <= self.deadline_h + 1e-9

    def items_by_key(self) -> dict:       # the keys `cluster-schedule --json` prints for a job
        p = self.plan
        plan = None if p is None else {k: getattr(p, k) for k in ("tp", "pp", "dp", "ep", "micro_batch", "recompute")}
        return {"job": self.job, "gpus": self.gpus, "plan": plan, "start_h": self.start_h, "end_h": self.end_h,
                "deadline_h": self.deadline_h, "deadline_met": self.met}


@dataclass(frozen=True)
class Result(results.Result):
    """One policy's schedule: a placement per job, in the jobs' order. Times in hours after the start."""
    UNITS = {"avg_completion_h": "hour", "makespan_h": "hour"}       # jobs.*: the Placement's units
    policy: str
    placements: tuple = ()

    @property
    def avg_jct_h(self) -> float:
        return float(np.mean([p.end_h - p.arrival_h for p in self.placements]))

    @property
    def makespan_h(self) -> float:
        return max(p.end_h for p in self.placements)

    @property
    def deadlines(self) -> tuple[int, int]:
        d = [p.met for p in self.placements if p.met is not None]
        return sum(d), len(d)

    def items_by_key(self) -> dict:       # the keys `cluster-schedule --json` prints for a policy
        met, n = self.deadlines
        return {"avg_completion_h": self.avg_jct_h, "makespan_h": self.makespan_h, "deadlines_met": met,
                "deadlines": n, "jobs": self.placements}


# ---- input --------------------------------------------------------------------------------------
MAX_CLUSTER_GPUS = 2 ** 20      # the bound `search --gpus` uses (roofline/views/search.py gpu_range): bounded work


def _value(v, where: str, kind=float, **bounds):
    """A number of a jobs file: YAML 1.1 reads ``20e9`` (no dot) as a string, so a numeric string is
    taken as its number (as roofline/spec/configfile.py ``_number`` does); then types and ranges by
    :func:`roofline.base.schema.number`."""
    from ..base.schema import number

    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            raise InputError(f"{where}: expected a number, got {v!r}") from None
    return number(v, where, kind, **bounds)


def _named(where: str, exc: InputError) -> InputError:
    """``exc`` prefixed with the job it came from (unless its message already names it)."""
    msg = str(exc)
    return InputError(msg if msg.startswith(where) else f"{where}: {msg}")


def load_jobs(path) -> tuple[list[Job], dict]:
    """Jobs and the cluster section ({gpu, gpus, framework}) of a jobs YAML file.

    Every field is checked here, once (issue 22): a bad value is one InputError naming the file, the
    job and the field. Types and ranges: ``global_batch`` an integer >= 1 (sequences), ``steps`` an
    integer >= 1, ``tokens`` a finite number >= one step's tokens (global_batch x seq_len), ``arrival_h``
    >= 0, ``deadline_h`` > ``arrival_h`` (both hours after the start of the schedule), ``gpus`` an
    integer in 1..2^20, names unique strings.
    """
    from ..base import schema
    from ..spec import stacks
    from ..spec.configfile import _model

    path = Path(path)
    d = schema.load_yaml(path, "jobs file")
    top = f"jobs file {path}"
    if not isinstance(d, dict) or not isinstance(d.get("jobs"), list) or not d["jobs"]:
        raise InputError(f"{top}: expected a mapping with a non-empty 'jobs' list")
    schema.check_keys(d, TOP_KEYS, top)
    gpus = d.get("gpus")
    if gpus is not None:
        gpus = _value(gpus, f"{top}: gpus (GPUs in the cluster)", int, low=1, high=MAX_CLUSTER_GPUS)
    gpu = d.get("gpu")
    if gpu is not None:
        schema.text(gpu, f"{top}: gpu (a hardware profile id or path)")
    fw_default = d.get("framework")
    fw_default = "megatron-core" if fw_default is None else schema.text(fw_default, f"{top}: framework")
    jobs = []
    for i, j in enumerate(d["jobs"]):
        where = f"{top}: job {i + 1}"
        if not isinstance(j, dict):
            raise InputError(f"{where}: expected a mapping of {', '.join(JOB_KEYS)}, got {j!r}")
        name = j.get("name")
        if name is not None:
            name = schema.text(name, f"{where}: name")
            where = f"{top}: job {name!r}"
        schema.check_keys(j, JOB_KEYS, where)
        for k in ("model", "global_batch"):
            if j.get(k) is None:
                raise InputError(f"{where}: missing key {k!r}")
        if (j.get("tokens") is None) == (j.get("steps") is None):
            raise InputError(f"{where}: give exactly one of 'tokens' and 'steps'")
        gb = _value(j["global_batch"], f"{where}: global_batch (sequences per step)", int, low=1)
        fw = j.get("framework")
        fw = fw_default if fw is None else schema.text(fw, f"{where}: framework")
        try:
            model, _ = _model(j["model"], f"{where}: model", path.parent)
            model = replace(model, **dict(stacks.get(fw).model))
            check(model, Plan(global_batch=gb))
        except InputError as exc:
            raise _named(where, exc) from None
        if j.get("steps") is not None:
            steps = _value(j["steps"], f"{where}: steps", int, low=1)
        else:
            per_step = gb * model.seq_len
            tokens = _value(j["tokens"], f"{where}: tokens", float, low=0.0, low_open=True)
            if tokens < per_step:    # less than one optimizer step: a typo of the exponent, not a job
                raise InputError(f"{where}: tokens must be at least one step's tokens (global_batch x seq_len = "
                                 f"{per_step:g}), got {j['tokens']!r}")
            steps = tokens / per_step
        arrival = _value(j.get("arrival_h", 0), f"{where}: arrival_h (hours after the start)", float, low=0.0)
        dl = j.get("deadline_h")
        if dl is not None:
            dl = _value(dl, f"{where}: deadline_h (hours after the start)", float, low=0.0, low_open=True)
            if dl <= arrival:
                raise InputError(f"{where}: deadline_h must be after arrival_h ({arrival:g} h), got {dl:g} h")
        jobs.append(Job(name if name is not None else f"job{i + 1}", model, gb, steps, arrival, dl, fw))
    names = [j.name for j in jobs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"{top}: job names must be unique, got {', '.join(map(repr, dup))} more than once")
    return jobs, {"gpu": gpu, "gpus": gpus, "framework": fw_default}


# ---- plan search ----------------------------------------------------------------------------------
def candidate_plans(job: Job, g: int, hw) -> list[Plan]:
    """Valid plans of ``job`` on exactly g GPUs (before the memory check)."""
    from ..spec.resolve import resolve

    m = job.model
    out = []
    for tp in (1, 2, 4, 8):
        if tp > hw.gpus_per_node or g % tp:
            continue
        for pp in (1, 2, 4, 8, 16):
            if g % (tp * pp) or m.n_layers % pp:
                continue
            dp = g // (tp * pp)
            ep = math.gcd(dp, m.n_experts) if m.n_experts > 1 else 1
            for mb in (1, 2, 4, 8):
                if job.global_batch % (mb * dp):
                    continue
                for rc in ("none", "selective", "full"):
                    try:       # the one resolver: the job's stack defaults and rules, as every command applies them
                        plan = resolve(m, {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "micro_batch": mb,
                                           "global_batch": job.global_batch, "recompute": rc}, hw, job.framework).plan
                    except InputError:
                        continue
                    out.append(plan)
    return out


def best_option(job: Job, g: int, hw) -> Option | None:
    """The fastest plan of ``job`` on g GPUs that fits in memory (None when there is none)."""
    from ..model.predict import evaluate, inputs

    plans = candidate_plans(job, g, hw)
    if not plans:
        return None
    xs = [inputs(job.model, p, hw) for p in plans]
    r = evaluate({k: np.array([x[k] for x in xs], dtype=float) for k in xs[0]})
    from ..model.predict import fits                  # tensors + reserve (CUDA context, NCCL, fragmentation) below capacity
    step = np.where(fits(r["memory"], r["mem_reserve"], hw), r["step_time"], np.inf)
    i = int(np.argmin(step))
    if not np.isfinite(step[i]):
        return None
    return Option(g, plans[i], float(step[i]), float(step[i]) * job.steps / HOUR)


def options(job: Job, counts, hw) -> dict[int, Option]:
    out = {}
    for g in sorted(set(counts)):
        o = best_option(job, g, hw)
        if o is not None:
            out[g] = o
    return out


def _counts(n: int) -> list[int]:
    return sorted({2 ** k for k in range(int(math.log2(n)) + 1)} | {n})


# ---- policies -----------------------------------------------------------------------------------
def greedy(jobs: list[Job], n_gpus: int, table: dict) -> Result:
    """Our policy (module docstring): EDF/SJF order, minimal feasible counts, leftover GPUs to the
    largest marginal gain."""
    res = {j.name: Placement(j.name, arrival_h=j.arrival_h, deadline_h=j.deadline_h) for j in jobs}
    waiting = [j for j in jobs if table[j.name]]
    running: list[tuple[float, int]] = []                      # (end, gpus)
    free, now = n_gpus, 0.0
    work = {j.name: min(o.gpus * o.hours for o in table[j.name].values()) for j in waiting}
    while waiting:
        arrived = [j for j in waiting if j.arrival_h <= now + 1e-12]
        arrived.sort(key=lambda j: (j.deadline_h is None, j.deadline_h or 0.0, work[j.name]))
        chosen: dict[str, int] = {}
        for j in arrived:
            opts = [g for g in table[j.name] if g <= free]
            if not opts:
                continue
            g = min(opts)
            if j.deadline_h is not None:
                meet = [x for x in opts if now + table[j.name][x].hours <= j.deadline_h]
                g = min(meet) if meet else max(opts)
            chosen[j.name] = g
            free -= g
        while chosen:                                          # leftover GPUs: best marginal gain
            best = None
            for name, g in chosen.items():
                up = [x for x in table[name] if g < x <= g + free]
                for x in up:
                    gain = (table[name][g].hours - table[name][x].hours) / (x - g)
                    if gain > 0 and (best is None or gain > best[0]):
                        best = (gain, name, x)
            if best is None:
                break
            _, name, x = best
            free -= x - chosen[name]
            chosen[name] = x
        for name, g in chosen.items():
            o = table[name][g]
            res[name] = replace(res[name], gpus=g, plan=o.plan, start_h=now, end_h=now + o.hours)
            running.append((now + o.hours, g))
        waiting = [j for j in waiting if j.name not in chosen]
        if not waiting:
            break
        future = [e for e, _ in running if e > now] + [j.arrival_h for j in waiting if j.arrival_h > now]
        if not future:
            break                                              # nothing will ever free enough GPUs
        now = min(future)
        free = n_gpus - sum(g for e, g in running if e > now + 1e-12)
    return Result("greedy", tuple(res.values()))


def equal_split(jobs: list[Job], n_gpus: int, table: dict) -> Result:
    """Naive baseline: every job gets n_gpus // len(jobs) GPUs (its own partition) from its arrival."""
    share = n_gpus // len(jobs)
    out = []
    for j in jobs:
        p = Placement(j.name, arrival_h=j.arrival_h, deadline_h=j.deadline_h)
        o = table[j.name].get(share)
        if o is not None:
            p = replace(p, gpus=share, plan=o.plan, start_h=j.arrival_h, end_h=j.arrival_h + o.hours)
        out.append(p)
    return Result("equal split", tuple(out))


def schedule(jobs: list[Job], n_gpus: int, hw) -> tuple[Result, Result]:
    """(greedy, equal split) for the jobs on n_gpus GPUs of profile ``hw``."""
    from ..base.schema import number

    n_gpus = number(n_gpus, "--gpus (GPUs in the cluster)", int, low=1, high=MAX_CLUSTER_GPUS)
    if not jobs:
        raise InputError("cluster-schedule needs at least one job")
    share = max(n_gpus // len(jobs), 1)
    counts = _counts(n_gpus) + [share]
    table = {j.name: options(j, counts, hw) for j in jobs}
    return greedy(jobs, n_gpus, table), equal_split(jobs, n_gpus, table)


COLUMNS = (report.Col("job", 16, "<"), report.Col("GPUs", 5), report.Col("plan (tp pp dp mb recompute)", 30, "<", sep="  "),
           report.Col("start h", 9, fmt=".2f"), report.Col("end h", 9, fmt=".2f"), report.Col("deadline", 0, "<", sep="  "))


def _row(p: Placement) -> tuple:
    if p.plan is None:
        return p.job, "-", "no plan fits", "-", "-"
    pl = p.plan
    desc = f"{pl.tp} {pl.pp} {pl.dp} {pl.micro_batch} {pl.recompute}" + (f" ep={pl.ep}" if pl.ep > 1 else "")
    dl = "" if p.deadline_h is None else f"{p.deadline_h:g} h {'met' if p.met else 'MISSED'}"
    return p.job, p.gpus, desc, p.start_h, p.end_h, dl


def render(results: tuple[Result, Result]) -> str:
    lines = []
    for r in results:
        lines.append(f"policy: {r.policy}")
        lines.append(report.table(COLUMNS, [_row(p) for p in r.placements], indent="  "))
        met, n = r.deadlines
        lines.append(f"  average completion {r.avg_jct_h:.2f} h, makespan {r.makespan_h:.2f} h"
                     + (f", deadlines met {met}/{n}" if n else ""))
        lines.append("")
    g, e = results
    if math.isfinite(e.avg_jct_h) and e.avg_jct_h > 0:
        lines.append(f"greedy vs equal split: average completion {g.avg_jct_h / e.avg_jct_h:.2f}x, "
                     f"makespan {g.makespan_h / e.makespan_h:.2f}x")
    else:
        lines.append("equal split leaves some job without a plan that fits its share")
    return "\n".join(lines)


def to_dict(results: tuple[Result, Result]) -> dict:
    """{policy: its ``to_dict()``} (``equal split`` as ``equal_split``)."""
    return {r.policy.replace(" ", "_"): r.to_dict() for r in results}


# ---- the `cluster-schedule` command -----------------------------------------------------------
def cmd_cluster_schedule(args) -> int:
    from ..spec import hardware
    from ..base import schema

    if args.gpus is not None:                 # checked before the jobs file is read: 0 is not "unset"
        schema.number(args.gpus, "--gpus", int, low=1)
    jobs, cluster = load_jobs(args.jobs)
    n = args.gpus if args.gpus is not None else cluster.get("gpus")
    if n is None:
        raise InputError("cluster-schedule needs the cluster size: --gpus N (or 'gpus:' in the jobs file)")
    n = schema.number(n, f"{args.jobs}: gpus (GPUs in the cluster)", int, low=1)
    hw = hardware.load(args.gpu or cluster.get("gpu") or "a100-sxm4-80gb")
    results = schedule(jobs, int(n), hw)
    if args.json:
        print(schema.strict_json(to_dict(results), indent=1))
    else:
        print(f"cluster: {int(n)} x {hw.id}, {len(jobs)} jobs\n")
        print(render(results))
    return 0


def register(sub) -> None:
    from ..spec.cliargs import flag

    p = sub.add_parser("cluster-schedule", help="share a GPU cluster among training jobs (greedy vs equal split)")
    p.add_argument("jobs", help="jobs YAML (see docs/timeline.md#cluster-scheduling)")
    flag(p, "gpus", type=int, help="GPUs in the cluster (default: 'gpus' of the jobs file)")
    flag(p, "gpu", help="hardware profile of the cluster (default: 'gpu' of the jobs file, else a100-sxm4-80gb)")
    flag(p, "json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_cluster_schedule)
