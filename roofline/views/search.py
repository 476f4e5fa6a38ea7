"""Plan search: enumerate every valid parallel plan, evaluate them all at once, rank them.

The whole space of (tp, pp, dp, cp, ep, micro-batch, interleave, recompute, sequence parallel,
sharding) is built with numpy (cartesian products of knob values), the divisibility rules of
:func:`roofline.spec.config.check` are applied as vectorized masks, the compiled formulas
(``_compiled.evaluate``) run once on the arrays (in cache-sized chunks), and the plans that fit in
HBM are ranked. There is no Python loop over plans.

>>> from roofline import hardware, models
>>> best = search(models.load("gpt3-1.3b"), hardware.load("a100-sxm4-80gb"), 8, 64, top=3)
>>> best[0].plan.n_gpus, best[0].slower_than_best
(8, 0.0)

``python -m roofline search`` is registered on the CLI by :func:`register`. Start-up stays light:
numpy and the compiled formulas only; no sympy, scipy or matplotlib (unless ``--plot``).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

from ..spec.config import EDGE_SLOTS, RECOMPUTE, RULES, SHARDING, SHARDING_BY_STAGE, ZERO_STAGE, holds
from . import report
from ..base.errors import InputError
from ..base.results import Result
from ..base.units import KILO, GiB, fmt_bytes, fmt_time

OBJECTIVES = ("time", "cost", "mfu")
KNOBS = ("tp", "pp", "dp", "cp", "ep", "micro_batch", "interleave", "recompute", "sequence_parallel", "sharding")
# The HBM fraction `search` keeps free beyond the modelled reserve unless --memory-margin says otherwise: the memory
# model under-predicts measured peaks (memory_measured.csv: mean signed -3.4 %, and a margin of 6.3 % covers 90 % of
# the runs; docs/validation.md), and a plan at the edge of HBM does not survive that (issue 17: top plans <= 95 % of
# HBM). `transformer` keeps 0: it reports the headroom of the plan it is given instead of choosing one.
SEARCH_MEMORY_MARGIN = 0.05
CHUNK = 8192            # plans per evaluate call: the intermediates stay in cache (4x faster than 1e6 at once)
_OUT = ("step_time", "memory", "mem_reserve", "mfu", "hfu", "tokens_per_s", "micro_batches", "pp_bubble_share")


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


@dataclass(frozen=True)
class Space:
    """The evaluated plan space of one (model, hardware, GPU count, batch): numpy columns."""
    model: object
    hardware: object
    base: object                    # the Plan giving the fixed fields (dtype, overlaps, ...)
    n_gpus: int
    global_batch: int
    enumerated: int                 # knob combinations before the divisibility masks
    valid: int                      # passing config.check's rules
    knobs: dict = field(repr=False)     # name -> int array (recompute/sharding as indices)
    out: dict = field(repr=False)       # formula output -> float array
    fits: object = field(repr=False)    # bool array
    memory_margin: float = 0.0          # extra fraction of HBM kept free beyond the reserve
    ladder: tuple = ()                  # module sets of the recompute codes >= LADDER (selective_ladder)

    @property
    def n_fit(self) -> int:
        return int(self.fits.sum())


# ----------------------------------------------------------------------------------------------
# enumeration

def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _int(what: str, v) -> int:
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or int(v) != v or v <= 0:
        raise InputError(f"{what} must be a positive integer, got {v!r}")
    return int(v)


def _choices(what: str, given, allowed, default):
    if given is None:
        return list(default)
    given = [given] if isinstance(given, (str, int, bool)) else list(given)
    for g in given:
        if g not in allowed:
            raise InputError(f"{what} must be among {', '.join(map(str, allowed))}, got {g!r}")
    return given


def _cross(cols: dict, name: str, values) -> dict:
    """Cartesian product of a table (dict of equal-length arrays) with one more knob."""
    import numpy as np

    values = np.asarray(values, dtype=np.int64)
    n = len(next(iter(cols.values()))) if cols else 1
    out = {k: np.repeat(v, len(values)) for k, v in cols.items()}
    out[name] = np.tile(values, n)
    return out


def _keep(cols: dict, mask) -> dict:
    return {k: v[mask] for k, v in cols.items()}


class _Rows:
    """The enumerated plans as one Plan-like object of columns, what the rules of config.RULES and
    stacks.plan_rules read: the knobs enumerated so far (arrays), the global batch, and what follows from them
    (the schedule of plan_of, the ZeRO stage). The recompute and sharding columns are indices into
    config.RECOMPUTE / config.SHARDING_BY_STAGE (valid names by construction), so only the ZeRO stage (= the
    sharding index) is shown. ``uneven_stages`` is the base plan's: False lists even stage splits only (pp x
    interleave | layers, docs/search.md), True also splits where the heaviest stage rounds up (Megatron-Core's
    uneven first/last stages); ``pipeline_layout`` None; ``etp`` is None (= tp)."""

    def __init__(self, cols: dict, global_batch: int, schedule: str | None, uneven: bool = False):
        self.cols, self.sched = cols, schedule
        # etp None: the experts split over tp (Megatron-Core's default; search does not enumerate etp)
        # pipeline_layout None: search splits the layers evenly (a stated layout fixes pp and vp)
        self.fixed = dict(global_batch=global_batch, batch=global_batch, uneven_stages=bool(uneven), etp=None,
                          pipeline_layout=None)
        self.derived = {"schedule": "interleave", "zero_stage": "sharding"}      # name: the column it follows from
        self.names = ({k for k in cols if k not in ("recompute", "sharding")} | set(self.fixed)
                      | {k for k, c in self.derived.items() if c in cols})

    def __getattr__(self, name):          # computed when a rule reads it (a string array costs time)
        d = self.__dict__
        if name in d["names"]:
            if name in d["fixed"]:
                return d["fixed"][name]
            if name == "schedule":
                if "schedule_" not in d:
                    d["schedule_"] = _schedule(d["cols"]["interleave"], d["sched"])
                return d["schedule_"]
            if name == "zero_stage":
                return d["cols"]["sharding"]          # the index into SHARDING_BY_STAGE is the stage
            return d["cols"][name]
        raise AttributeError(name)


# pinned schedules (--schedule): the interleave each one runs (gpipe 1, dualpipev its two chunks per rank)
PINNED_SCHEDULES = {"gpipe": 1, "dualpipev": 2}


def _schedule(v, schedule: str | None):
    """The schedule of interleave v (a number or an array): a pinned one (gpipe, dualpipev) as asked, else 1F1B,
    interleaved for v > 1."""
    import numpy as np

    if schedule in PINNED_SCHEDULES:
        return schedule
    if isinstance(v, np.ndarray):
        return np.array(["1f1b", "interleaved"])[(v > 1).astype(np.intp)]
    return "interleaved" if v > 1 else "1f1b"


def _apply(model, cols: dict, rules: list, global_batch: int, schedule: str | None, uneven: bool = False) -> dict:
    """Keep the rows where every rule whose plan fields are all enumerated holds; those rules leave ``rules``."""
    rows = _Rows(cols, global_batch, schedule, uneven)
    now = [r for r in rules if set(r.reads) <= rows.names]
    if not now:
        return cols
    for r in now:
        rules.remove(r)
    return _keep(cols, holds(now, model, rows))


def _domain(rules: list, name: str, values, pinned=()) -> list:
    """The values of knob ``name`` that the stack rules reading only it allow (those rules leave ``rules``);
    a pinned value they forbid is an InputError with the rule's message."""
    from types import SimpleNamespace

    for r in [r for r in rules if r.reads == (name,)]:
        rules.remove(r)
        for v in pinned:
            if not r.ok(None, SimpleNamespace(**{name: v})):
                raise InputError(r.text(None, SimpleNamespace(**{name: v})))
        values = [v for v in values if r.ok(None, SimpleNamespace(**{name: v}))]
    return values


def _offload_domain(model, rules: list, offload_layers, pps, rcs, pp_pinned, rc_pinned):
    """The pp and recompute values the CPU-offload rules of config.RULES allow with the base plan's offload_layers
    (fixed, not searched); those rules leave ``rules``. A rule the count breaks by itself (more layers than the model
    has), or one that forbids every pinned value, is an InputError with the rule's message."""
    from types import SimpleNamespace

    off = [r for r in rules if "offload_layers" in r.reads]
    for r in off:
        rules.remove(r)

    def ns(**kw):
        return SimpleNamespace(**{"offload_layers": offload_layers, "pp": 1, "recompute": "none", **kw})
    # each knob: its candidate values, how a value reads as the plan field, whether the user pinned it
    knobs = {"pp": [pps, lambda v: v, pp_pinned], "recompute": [rcs, lambda i: RECOMPUTE[i], rc_pinned]}
    for r in off:
        if not r.ok(model, ns()):
            raise InputError(r.text(model, ns()))
        for name in (k for k in knobs if k in r.reads):
            values, field, pinned = knobs[name]
            allowed = [v for v in values if r.ok(model, ns(**{name: field(v)}))]
            if pinned is not None and not allowed:
                raise InputError(r.text(model, ns(**{name: field(values[0])})))
            knobs[name][0] = allowed
    return knobs["pp"][0], knobs["recompute"][0]


def enumerate_plans(model, n_gpus: int, global_batch: int, *, tp=None, pp=None, cp=None, ep=None,
                    micro_batch=None, interleave=None, recompute=None, sequence_parallel=None, sharding=None,
                    schedule: str | None = None, stack=None, uneven_stages: bool = False,
                    offload_layers: int = 0, ladder: int = 0) -> tuple[dict, int]:
    """Every valid plan as numpy columns, and the number of combinations before the masks.

    A knob left as None takes every value that can be valid (divisors of the GPU count, batch,
    layers, ...); an int or a list pins it. The masks are the rules of :data:`roofline.spec.config.RULES`
    (the ones :func:`roofline.spec.config.check` raises), each applied to the arrays as soon as the knobs
    it reads are enumerated: tp | heads, tp | kv-heads or kv-heads | tp, tp | ffn, pp x interleave |
    layers, cp | seq-len, ep | dp, ep | experts, micro-batch x dp | global batch, interleave > 1 needs
    pp > 1 and micro-batches divisible by pp, ... Sequence parallel with tp = 1 is the same plan as
    without and is listed once. With a ``stack`` (roofline.spec.stacks), its :func:`roofline.spec.stacks.plan_rules`
    too: its rules on one knob (shardings, the interleaved schedule) restrict that knob's values (a
    pinned value it cannot run is an InputError naming the rule), the others (ZeRO stages with pipeline
    parallelism) are masks. ``uneven_stages`` (the base plan's ``--uneven-stages``) drops pp x interleave | layers
    for stage splits whose heaviest stage rounds up (each stage still holds a layer), and interleave then takes
    every value up to the layers. ``offload_layers`` (the base plan's, not searched): the rules on CPU offload
    restrict the knobs they read (pp 1, no recomputation); a pinned value they forbid is an InputError.
    ``ladder``: the number of module sets beyond the base's that selective recomputation also takes (recompute codes
    LADDER, LADDER + 1, ...; :func:`selective_ladder`).
    """
    import numpy as np

    n_gpus, B = _int("gpus", n_gpus), _int("global batch", global_batch)
    L, H, S, E = model.n_layers, model.n_heads, model.seq_len, model.n_experts
    dn = divisors(n_gpus)

    def pick(what, given, default):
        if given is None:
            return default
        vals = [given] if isinstance(given, int) else list(given)
        for v in vals:
            _int(what, v)
        return vals

    # each knob's candidate values (every value the rules can accept, e.g. tp | heads => tp <= heads)
    tps = pick("tp", tp, [d for d in dn if d <= H])
    slots = L + EDGE_SLOTS * bool(uneven_stages)     # uneven stages: the embedding and the loss may fill a stage each
    pps = pick("pp", pp, [d for d in dn if d <= slots])
    cps = pick("cp", cp, [d for d in dn if d <= S])
    eps = pick("ep", ep, divisors(E))
    mbs = pick("micro-batch", micro_batch, divisors(B))
    vs = [PINNED_SCHEDULES[schedule]] if schedule in PINNED_SCHEDULES else \
        pick("interleave", interleave, list(range(1, slots + 1)) if uneven_stages else divisors(L))
    rcs = [RECOMPUTE.index(r) for r in _choices("recompute", recompute, RECOMPUTE, RECOMPUTE)]
    sps = [int(s) for s in _choices("sequence-parallel", sequence_parallel, (False, True, 0, 1), (0, 1))]
    rules = [r for r in RULES if r.reads]          # the model-only rules: check() on the fixed fields
    allowed = SHARDING_BY_STAGE
    if stack is not None:
        from ..spec.stacks import plan_rules

        rules += plan_rules(stack)
        allowed = tuple(_domain(rules, "sharding", allowed, [sharding] if isinstance(sharding, str)
                                else list(sharding or ())))
        vs = _domain(rules, "interleave", vs, [interleave] if isinstance(interleave, int) else list(interleave or ()))
        rcs = [RECOMPUTE.index(r) for r in _domain(rules, "recompute", [RECOMPUTE[i] for i in rcs],
                                                   [recompute] if isinstance(recompute, str) else list(recompute or ()))]
    pps, rcs = _offload_domain(model, rules, offload_layers, pps, rcs, pp, recompute)
    if RECOMPUTE.index("selective") in rcs:          # selective with each rung's modules (selective_ladder)
        rcs = rcs + [LADDER + k for k in range(ladder)]
    names = SHARDING_BY_STAGE + tuple(s for s in SHARDING if s not in SHARDING_BY_STAGE)
    zs = [ZERO_STAGE[z] for z in _choices("sharding", sharding, names, allowed)]   # SHARDING_BY_STAGE index
    enumerated = (len(tps) * len(pps) * len(cps) * len(eps) * len(mbs) * len(vs) * len(rcs) * len(sps) * len(zs))

    # the mesh: tp x pp x cp (x ep), dp = gpus / (tp pp cp)
    g = np.meshgrid(np.array(tps, dtype=np.int64), np.array(pps, dtype=np.int64), np.array(cps, dtype=np.int64),
                    np.array(eps, dtype=np.int64), indexing="ij")
    c = {k: a.ravel() for k, a in zip(("tp", "pp", "cp", "ep"), g)}
    tpc = c["tp"] * c["pp"] * c["cp"]
    m = n_gpus % tpc == 0
    c = _keep(c, m)
    c["dp"] = n_gpus // (c["tp"] * c["pp"] * c["cp"])
    u = uneven_stages
    c = _apply(model, c, rules, B, schedule, u)
    c = _apply(model, _cross(c, "micro_batch", mbs), rules, B, schedule, u)
    c = _apply(model, _cross(c, "interleave", vs), rules, B, schedule, u)
    # switches that never break divisibility
    c = _cross(c, "sequence_parallel", sps)
    c = _keep(c, (c["sequence_parallel"] == 0) | (c["tp"] > 1) | (len(sps) == 1))
    c = _cross(c, "recompute", rcs)
    c = _apply(model, _cross(c, "sharding", zs), rules, B, schedule, u)
    # the rules left read only fields that are not searched (dtype, overlaps: evaluate_space checks them on the
    # fixed plan); one that also reads a knob would be skipped here, so it is a programming error
    half = [r for r in rules if set(r.reads) & _Rows(c, B, schedule, u).names]
    if half:
        raise RuntimeError(f"search cannot apply the rule {half[0].message!r}: it reads {half[0].reads}, "
                           "of which search enumerates only some; enumerate the others or give them to _Rows")
    return c, enumerated


def plan_of(knobs: dict, i: int, base, global_batch: int, schedule: str | None = None, ladder: tuple = ()):
    """The Plan of row i of an enumeration (fixed fields from ``base``; ``ladder``: the module sets of the recompute
    codes >= LADDER)."""
    v = int(knobs["interleave"][i])
    ruled = {k: float(knobs[k][i]) for k in _RULED if k in knobs}     # the stack's layout rules (evaluate_space)
    rc = int(knobs["recompute"][i])
    if rc >= LADDER:
        ruled["recompute_modules"] = ladder[rc - LADDER]
    if "delay_wgrad" in knobs:
        ruled["delay_wgrad"] = bool(knobs["delay_wgrad"][i])
    return dataclasses.replace(
        base, **ruled, tp=int(knobs["tp"][i]), pp=int(knobs["pp"][i]), dp=int(knobs["dp"][i]), cp=int(knobs["cp"][i]),
        ep=int(knobs["ep"][i]), micro_batch=int(knobs["micro_batch"][i]), global_batch=int(global_batch),
        interleave=v, schedule=_schedule(v, schedule), sequence_parallel=bool(knobs["sequence_parallel"][i]),
        recompute=RECOMPUTE[rc] if rc < LADDER else "selective",
        sharding=SHARDING_BY_STAGE[int(knobs["sharding"][i])])


# Selective recomputation beyond the base plan's modules. For an MoE or MLA model the search also tries selective
# recomputation with more of Megatron-Core's modules (--recompute-modules), added in rungs, each keeping the ones
# before: the elementwise recomputes first (layernorm, moe_act), then MLA's up projections, then the dense and
# shared-expert MLPs, then the whole MoE layer with its all-to-all. ASSUMED order, by recompute cost per byte freed;
# each rung is a module set Megatron-Bridge's MoE recipes run or contain (DeepSeek-V3: mla_up_proj, mla_up_proj + mlp;
# Qwen3 / GPT-OSS: layernorm + moe_act; Nemotron 3 Nano: moe + layernorm + core_attn + moe_act). Dense models keep
# the base plan's modules only. A plan's recompute code >= LADDER is selective with rung code - LADDER.
SELECTIVE_RUNGS = (("layernorm", "moe_act"), ("mla_up_proj",), ("mlp", "shared_experts"), ("moe",))
LADDER = len(RECOMPUTE)


def selective_ladder(model, base_modules: str) -> tuple:
    """The module sets (canonical text, config.RECOMPUTE_MODULES order) the search tries beside ``base_modules``: ()
    for a dense model without MLA; each rung adds the modules that apply to the model (a module that frees nothing
    in it is left out) and is kept when it adds one and differs from the base's set."""
    from ..base.normalize import RECOMPUTE_MODULES

    moe = model.n_experts > 1
    if not (moe or model.mla):
        return ()
    applies = {"layernorm": True, "moe_act": moe, "mla_up_proj": bool(model.mla),
               "mlp": moe and model.dense_layers > 0, "shared_experts": moe and model.shared_ffn > 0, "moe": moe}
    # core_attn frees the attention scores only without flash attention (which keeps none): the rungs recompute it
    # only there
    have = {"core_attn"} if model.attention == "unfused" else set()
    out = []
    for rung in SELECTIVE_RUNGS:
        add = {m for m in rung if applies[m]} - have
        if add:
            have |= add
            text = ",".join(m for m in RECOMPUTE_MODULES if m in have)
            if text != base_modules:
                out.append(text)
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# evaluation

def plan_arrays(knobs: dict, global_batch: int, schedule: str | None = None) -> dict:
    """The formula inputs of the plan knobs (arrays): :func:`roofline.model.predict.layout_inputs`, the one mapping.
    ``knobs["sharding"]`` indexes ``config.SHARDING_BY_STAGE``, whose index is the ZeRO stage."""
    from ..model.predict import layout_inputs

    k = knobs
    return layout_inputs(k["tp"], k["pp"], k["dp"], k["cp"], k["ep"], k["micro_batch"], global_batch, k["interleave"],
                         k["sequence_parallel"] == 1, k["recompute"], k["sharding"], schedule or "1f1b")


def evaluate_arrays(x: dict, n: int, outputs=_OUT, chunk: int = CHUNK, desc: str = "search: pricing plans") -> dict:
    """``_compiled.evaluate`` over n plans in cache-sized chunks; scalars broadcast. A progress bar on stderr counts
    the plans priced when it lasts more than base/progress.py's DELAY_S (millions of plans take seconds)."""
    import numpy as np

    from ..base import progress
    from ..model import _compiled

    arrays = [k for k, v in x.items() if isinstance(v, np.ndarray) and v.ndim]
    res = {k: np.empty(n) for k in outputs}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"), \
            progress.bar(desc, total=n, unit="plan") as bar:
        for s in range(0, n, chunk):
            xs = dict(x)
            for k in arrays:
                xs[k] = x[k][s:s + chunk]
            r = _compiled.evaluate(xs)
            e = min(n, s + chunk)
            for k in outputs:
                res[k][s:e] = r[k]
            bar.update(e - s)
    return res


def evaluate_space(model, hw, n_gpus: int, global_batch: int, *, base=None, framework: str = "megatron-core",
                   schedule: str | None = None, memory_margin: float = SEARCH_MEMORY_MARGIN, stated=frozenset(),
                   tp_comm_overlap: bool = False, **pins) -> Space:
    """Enumerate and evaluate every valid plan (see :func:`enumerate_plans` for ``pins``). A plan fits when
    its tensors plus the reserve (CUDA context, NCCL buffers, fragmentation) stay below capacity x (1 - margin).

    The overlap fields that follow from each plan's layout (p2p overlap when interleaved, ...) come from the
    stack's rules per plan, as :func:`roofline.spec.resolve.resolve` applies them, unless ``stated`` names the field."""
    import numpy as np

    from ..spec.config import Plan, check
    from ..model.predict import OVERLAP_INPUTS, check_margin, fits as fits_memory, hardware_inputs, model_inputs, plan_inputs
    from ..spec.resolve import layout_rules

    memory_margin = check_margin(memory_margin)

    base = base if base is not None else default_base(framework)
    check(model, dataclasses.replace(base, tp=1, pp=1, dp=1, cp=1, ep=1, micro_batch=1, global_batch=None,
                                     interleave=1, schedule="1f1b"))   # model fields and fixed plan fields
    st = _stack(framework)
    # selective recomputation with more modules (selective_ladder) on a stack with Megatron-Core's --recompute-modules
    # (or --framework any), unless the user named the modules
    ladder = () if "recompute_modules" in stated or (st is not None and not st.rule("recompute_modules")) \
        else selective_ladder(model, base.recompute_modules)
    knobs, enumerated = enumerate_plans(model, n_gpus, global_batch, schedule=schedule, stack=st,
                                        uneven_stages=base.uneven_stages, offload_layers=base.offload_layers,
                                        ladder=len(ladder), **pins)
    if "overlap_ep" not in stated and not base.overlap_ep and searches_ep_overlap(model, st):
        knobs, extra = with_ep_overlap(model, knobs, ladder, base.recompute_modules)
        enumerated += extra
    n = len(knobs["tp"])
    x = {**model_inputs(model), **plan_inputs(Plan(**{k: getattr(base, k) for k in _FIXED})),
         **hardware_inputs(hw, base.dtype), **plan_arrays(knobs, global_batch, schedule)}
    if ladder and n:
        x.update(ladder_inputs(knobs["recompute"], base.recompute_modules, ladder))
    if "overlap_ep" in knobs and n:
        x[OVERLAP_INPUTS["overlap_ep"]] = knobs["overlap_ep"]
    if st is not None and n:
        rules = layout_rules(st, knobs["tp"], knobs["pp"], knobs["interleave"], tp_comm_overlap)
        for field, (where, v, _why) in rules.items():
            if field not in stated:
                knobs[field] = np.broadcast_to(np.where(where, v, getattr(base, field)), (n,)).astype(float)
                x[OVERLAP_INPUTS[field]] = knobs[field]
    delay = "delay_wgrad" not in stated and searches_ep_overlap(model, st) and n
    outputs = _OUT + ("t_ep_comm",) if delay else _OUT
    out = evaluate_arrays(x, n, outputs) if n else {k: np.empty(0) for k in _OUT}
    fits = fits_memory(out["memory"], out["mem_reserve"], hw, memory_margin) & np.isfinite(out["step_time"]) \
        & (out["step_time"] > 0)
    if delay:
        knobs, out = try_delay_wgrad(x, knobs, out, fits, base.overlap_ep)
    return Space(model=model, hardware=hw, base=base, n_gpus=int(n_gpus), global_batch=int(global_batch),
                 enumerated=enumerated, valid=n, knobs=knobs, out=out, fits=fits, memory_margin=memory_margin,
                 ladder=ladder)


def searches_ep_overlap(model, stack) -> bool:
    """Whether the search tries Megatron-Core's EP overlap as a knob: an MoE model on a stack that runs it
    (advice.EP_OVERLAP_STACKS; the user's --overlap-ep pins it instead)."""
    from .advice import EP_OVERLAP_STACKS

    return (model.n_experts or 1) > 1 and stack is not None and stack.id in EP_OVERLAP_STACKS


def with_ep_overlap(model, knobs: dict, ladder: tuple, base_modules: str = "core_attn") -> tuple[dict, int]:
    """The enumeration with an ``overlap_ep`` column: every plan without the EP overlap (0), and again with it (1)
    where Megatron-Core runs it (transformer_config.py __post_init__, advice.ep_overlap_blockers: ep > 1, interleaving
    when pp > 1, no full recomputation, no 'moe' recompute module, at most one MTP layer); and the number of plans
    added."""
    import numpy as np

    from ..spec.config import module_set
    from .advice import EP_OVERLAP_CONDITIONS

    n = len(knobs["tp"])
    rc = np.asarray(knobs["recompute"])
    # the selective codes whose module set holds 'moe': the base plan's (code 'selective') and the ladder's rungs
    moe_codes = [RECOMPUTE.index("selective")] * ("moe" in module_set(base_modules)) \
        + [LADDER + k for k, mods in enumerate(ladder) if "moe" in module_set(mods)]
    args = (np.asarray(knobs["pp"]), np.asarray(knobs["interleave"]), rc == RECOMPUTE.index("full"),
            np.isin(rc, moe_codes), model.mtp_layers or 0)
    ok = np.asarray(knobs["ep"]) > 1
    for _msg, test in EP_OVERLAP_CONDITIONS:
        ok = ok & test(*args)
    off = {k: np.asarray(v) for k, v in knobs.items()}
    on = {k: v[ok] for k, v in off.items()}
    out = {k: np.concatenate([off[k], on[k]]) for k in off}
    out["overlap_ep"] = np.concatenate([np.zeros(n), np.ones(int(ok.sum()))])
    return out, int(ok.sum())


def try_delay_wgrad(x: dict, knobs: dict, out: dict, fits, base_overlap: float = 0.0) -> tuple[dict, dict]:
    """Megatron-Core's --delay-wgrad-compute as a per-plan choice: each plan that overlaps its EP all-to-all (the
    ``overlap_ep`` column, or the base plan's pinned overlap), fits (``fits``) and still leaves some of it exposed is
    priced again with the experts' weight gradients delayed, and takes the delayed step where it is shorter
    (``delay_wgrad`` column 1).
    Megatron-Core allows the delay only with overlap_moe_expert_parallel_comm (transformer_config.py __post_init__:
    'overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute'; config.py's rule). The delay
    moves the experts' weight gradients from the block beside the dispatch forward to the block beside the dispatch
    backward (step.ep_merged): it changes only how much of the all-to-all hides, so a plan with none exposed is not
    priced again, and it changes no memory in the model (the weight gradients run later in the same layer's backward).
    Returns the knobs and outputs with the column."""
    import numpy as np

    n = len(knobs["tp"])
    ov = np.asarray(knobs["overlap_ep"]) if "overlap_ep" in knobs else np.full(n, float(base_overlap))
    knobs = dict(knobs, delay_wgrad=np.zeros(n))
    rows = np.flatnonzero(fits & (ov > 0) & (np.asarray(knobs["ep"]) > 1) & (out["t_ep_comm"] > 0))
    if not len(rows):
        return knobs, out
    xs = {k: (v[rows] if isinstance(v, np.ndarray) and v.ndim else v) for k, v in x.items()}
    xs["delay_wgrad"] = np.ones(len(rows))
    again = evaluate_arrays(xs, len(rows), outputs=tuple(out), desc="search: pricing delayed weight gradients")
    better = again["step_time"] < out["step_time"][rows]
    take = rows[better]
    knobs["delay_wgrad"][take] = 1.0
    out = {k: np.array(v, copy=True) for k, v in out.items()}
    for k in out:
        out[k][take] = again[k][better]
    return knobs, out


def ladder_inputs(codes, base_modules: str, ladder: tuple) -> dict:
    """The rcm_* switches per plan: the base plan's modules where the recompute code is below LADDER, the rung's
    where it is LADDER + k."""
    import numpy as np

    from ..model.predict import recompute_module_inputs
    from ..spec.config import module_set

    codes = np.asarray(codes)
    sets = [module_set(base_modules)] + [module_set(r) for r in ladder]
    row = np.where(codes >= LADDER, codes - LADDER + 1, 0)
    table = [recompute_module_inputs(m) for m in sets]
    return {sym: np.array([t[sym] for t in table])[row] for sym in table[0]}


# plan fields a stack rule may set per layout (spec.layout_rules); evaluate_space stores them in the knobs
_RULED = ("overlap_pp", "overlap_grad_reduce", "overlap_tp", "overlap_ep")
# plan fields every searched plan takes from the base (the stack's defaults, or what the user stated)
_FIXED = ("dtype", "grad_dtype", "overlap_grad_reduce", "overlap_param_gather", "overlap_tp", "overlap_pp",
          "overlap_cp", "overlap_ep", "tp_async_dgrad", "wgrad_fusion", "quantized_saves", "ep_dispatcher", "loss_kernel",
          "cuda_graphs", "offload_layers", "recompute_modules", "delay_wgrad")


def _stack(framework):
    """The registry stack of a search (None for ``any``: every sharding and schedule, for research)."""
    from ..spec import stacks

    if framework is None or (isinstance(framework, str) and framework.lower() == "any"):
        return None
    return stacks.get(framework)


def default_base(framework: str = "megatron-core"):
    """The Plan whose fixed fields (dtype, overlaps) the searched plans share: the stack's defaults."""
    from ..spec.config import Plan, replace

    st = _stack(framework)
    fw = {k: v for k, v in (st.plan.items() if st else ()) if k in _FIXED}
    return replace(Plan(), **fw)


def default_model(model, framework: str = "megatron-core"):
    """The model with the stack's model defaults (attention kernel, dropout), as the resolver applies them."""
    from ..spec.config import replace

    st = _stack(framework)
    return replace(model, **dict(st.model)) if st else model


# ----------------------------------------------------------------------------------------------
# ranking

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
    o = space.out
    best_t = float(o["step_time"][idx[0]])
    out = []
    for i in idx:          # only the top-k (a few dozen) become Python objects
        t = float(o["step_time"][i])
        out.append(Candidate(
            plan=plan_of(space.knobs, i, space.base, space.global_batch, schedule, space.ladder), step_time_s=t,
            memory_bytes=float(o["memory"][i]), mfu=float(o["mfu"][i]), hfu=float(o["hfu"][i]),
            tokens_per_s=float(o["tokens_per_s"][i]), n_gpus=space.n_gpus,
            micro_batches=int(round(float(o["micro_batches"][i]))), pp_bubble=float(o["pp_bubble_share"][i]),
            slower_than_best=(t - best_t) / best_t, reserve_bytes=float(o["mem_reserve"][i]),
            headroom_bytes=float(space.hardware.hbm_capacity * (1 - space.memory_margin) - o["memory"][i]
                                 - o["mem_reserve"][i]),
            **_run(t, space.n_gpus, space.global_batch * space.model.seq_len, space.hardware, tokens,
                   gpu_hour_price)))
    return out


def _family(hw_id: str) -> str:
    """GPU family of a profile id: a100-sxm4-80gb -> a100, h100-sxm-measured -> h100, gh200-vista -> gh200."""
    return hw_id.split("-")[0]


@functools.lru_cache(maxsize=None)
def measured_mfu(family: str) -> list[tuple[float, str, str, bool]]:
    """(MFU, case_id, stack, MoE, peak) of every measured run of a GPU family in the bundled validation sets
    (published, nemo), best first. MFU uses this model's FLOP count (causal attention halved) over the
    measured time and the peak of the run's GEMM dtype (``peak``: its peak_flops key, 'bf16', 'fp8', 'fp4'), so it
    compares like for like with a plan's predicted MFU of the same peak."""
    from ..base import precision
    import numpy as np

    from . import validate as V

    out = []
    for name in ("published", "nemo"):
        cases = []
        for row in V.read(V.dataset_path(name)):
            if _family(str(row.get("gpu_id") or "")) != family:     # priced on its gpu_id's profile: skip early
                continue
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
            out.append((float(o["flops"][i] / (c.measured * peak)), c.row["case_id"], c.framework,
                        (c.model.n_experts or 1) > 1, precision.peak_key(c.plan.dtype)))
    return sorted((x for x in out if np.isfinite(x[0])), reverse=True)


def plausibility(cand, hw, stack_id: str, moe: bool = False, dtype: str | None = None) -> str | None:
    """One line comparing a plan's predicted MFU with the best measured MFU on that GPU family: of the runs of the
    same kind of model (MoE or dense) where the bundled data has some, of the same GEMM peak (``dtype``: the plan's
    precision; an MFU over the FP8 peak is not comparable with one over the BF16 peak) where it has some, and of the
    same stack where it has some."""
    from ..base import precision

    runs = measured_mfu(_family(hw.id))
    if not runs:
        return None
    kind = [r for r in runs if r[3] == moe]
    runs = kind or runs
    key = precision.peak_key(dtype) if dtype else None
    at_peak = [r for r in runs if r[4] == key]
    runs = at_peak or runs
    same = [r for r in runs if r[2] == stack_id]
    best = (same or runs)[0]
    flag = "  ABOVE every measured run: treat as optimistic" if cand.mfu > best[0] * 1.1 else ""
    what = (" MoE" if moe else " dense") if kind else ""
    peak = f" {key.upper()}" if at_peak else ""
    return (f"plausibility: predicted MFU {100 * cand.mfu:.1f} % vs the best measured{peak}{what} run on "
            f"{_family(hw.id)} in the bundled validation data{' with ' + stack_id if same else ''}: "
            f"{100 * best[0]:.1f} % ({best[1]}){flag}")


def top_plan_ep_hint(model, cands, hw, stack_id: str) -> str | None:
    """For an MoE search whose top plan leaves its EP all-to-all exposed: advice.ep_overlap_hint on that plan and how
    to search with the overlap (the search takes overlap_ep from the stack's default, off, unless it is pinned)."""
    if not cands or (model.n_experts or 1) <= 1 or cands[0].plan.ep <= 1:
        return None
    from ..model.predict import predict
    from .advice import ep_overlap_hint

    hint = ep_overlap_hint(dataclasses.replace(predict(model, cands[0].plan, hw), stack=stack_id))
    return f"top plan: {hint}; search with --overlap-ep 1 to rank every plan with it" if hint else None


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
    space = evaluate_space(model, hw, n_gpus, global_batch, base=base, framework=framework, schedule=schedule, **pins)
    return rank(space, objective=objective, top=top, tokens=tokens, gpu_hour_price=gpu_hour_price, schedule=schedule)


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
    s = f"tp={p.tp} pp={p.pp} dp={p.dp} cp={p.cp}" + (f" ep={p.ep}" if p.ep > 1 else "")
    s += f" mb={p.micro_batch}" + (f" v={p.interleave}" if p.interleave > 1 else "") \
        + (f" {p.schedule}" if p.schedule in PINNED_SCHEDULES else "")
    s += f" SP={'on' if p.sequence_parallel and p.tp > 1 else 'off'} rc={p.recompute}" \
        + (f"({p.recompute_modules})" if p.recompute == "selective" and p.recompute_modules != "core_attn" else "") \
        + f" {p.sharding}"
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


def cmd_search(args) -> int:
    import json

    from ..spec.cliargs import build_spec

    if args.global_batch is None:
        raise InputError("search needs --global-batch (sequences per optimizer step)")
    if args.model is None:
        raise InputError("search needs --model (a preset id or YAML path)")
    counts = gpu_range(args.gpus)
    if args.plot:
        if len(counts) == 1:
            raise InputError("--plot draws the time/cost Pareto front of a GPU range: give --gpus LO..HI")
        from . import plotting
        plotting.check(args.plot, "--plot")
    framework = "any" if (args.framework or "").lower() == "any" else None
    if framework:
        args.framework = None
    schedule = args.schedule if args.schedule in PINNED_SCHEDULES else None
    if schedule == "dualpipev":
        # the base plan is a template at pp 1, where DualPipeV cannot run: each enumerated plan takes the schedule
        args.schedule = None
    spec = build_spec(args)
    model, plan, hw = spec.model, spec.plan, spec.hardware
    if schedule and not framework:
        from ..spec import stacks
        why = stacks.schedule_refusal(spec.stack, schedule)
        if why:
            raise InputError(why)
    framework = framework or spec.stack.id
    base = dataclasses.replace(plan, tp=1, pp=1, dp=1, cp=1)
    pins = _pins(args)
    # fields the user stated keep their value; the others follow each plan's layout by the stack's rules
    pins["stated"] = frozenset(k for k, why in spec.origin.items() if why == "stated")
    pins["tp_comm_overlap"] = bool(args.tp_comm_overlap)
    kw = dict(objective=args.objective, tokens=args.tokens, gpu_hour_price=args.gpu_hour_price, schedule=schedule,
              framework=framework)
    pins["memory_margin"] = SEARCH_MEMORY_MARGIN if args.memory_margin is None else args.memory_margin
    if len(counts) == 1:
        space = evaluate_space(model, hw, counts[0], args.global_batch, base=base, schedule=schedule, framework=framework,
                               **pins)     # pins carry memory_margin
        cands = rank(space, top=args.top, **{k: v for k, v in kw.items() if k != "framework"})
        if args.csv:
            write_csv(args.csv, cands)
        if args.json:
            print(json.dumps({"model": model.name, "hardware": hw.id, "n_gpus": counts[0],
                              "global_batch": args.global_batch, "seq_len": model.seq_len, "objective": args.objective,
                              "enumerated": space.enumerated, "valid": space.valid, "fit": space.n_fit,
                              "plans": [c.to_dict() for c in cands]}, indent=1))
            return 0
        print(f"search: {model.name} on {counts[0]} x {hw.id} ({hw.kind}), global batch {args.global_batch} x seq "
              f"{model.seq_len}, objective {args.objective}"
              + (f", CUDA graphs {space.base.cuda_graphs}" if space.base.cuda_graphs != "none" else ""))
        kept = (f" with {100 * space.memory_margin:g} % of it kept free (--memory-margin)" if space.memory_margin
                else "")
        print(f"  {space.enumerated} knob combinations, {space.valid} valid, {space.n_fit} fit in "
              f"{fmt_bytes(hw.hbm_capacity, 0)}{kept}; top {len(cands)} (gap = % slower than best):")
        print(table(cands))
        line = plausibility(cands[0], hw, spec.stack.id, (model.n_experts or 1) > 1, spec.plan.dtype)
        if line:
            print(line)
        hint = top_plan_ep_hint(model, cands, hw, spec.stack.id)
        if hint:
            print(hint)
        return 0
    pts = sweep(model, hw, counts, args.global_batch, base=base, **{**kw, **pins})
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
    from ..spec.cliargs import add_model_plan_flags, flag

    p = subparsers.add_parser("search", help="find the fastest valid parallel plan (or a sweep's Pareto front)",
                              description="Enumerate every valid plan (tp, pp, dp, cp, ep, micro-batch, interleave, "
                                          "recompute, sequence parallel, sharding), evaluate them vectorized and rank "
                                          "those that fit in memory. Plan flags (--tp 8, --recompute full, ...) pin "
                                          "a knob; dtype, overlaps and attention kernel come from --framework.")
    add_model_plan_flags(p)
    g = p.add_argument_group("search")
    flag(g, "gpus", required=True, help="GPU count, or LO..HI to sweep the powers of two between (Pareto front)")
    flag(g, "objective", choices=OBJECTIVES, default="time", help="rank by step time, cost (GPU-s/token) or MFU")
    flag(g, "top", type=int, default=20, help="how many plans to print (default 20)")
    flag(g, "tokens", type=float, help="training tokens of the run: adds days, GPU-hours, cost, energy")
    flag(g, "gpu-hour-price", dest="gpu_hour_price", type=float, help="USD per GPU-hour (cost column)")
    flag(g, "json", action="store_true", help="print one JSON object")
    flag(g, "csv", metavar="FILE", help="write the listed plans as CSV")
    flag(g, "plot", metavar="PNG", help="with a GPU range: draw the time/cost Pareto front (matplotlib)")
    p.set_defaults(func=cmd_search)

