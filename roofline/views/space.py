"""The plan space of ``search``: enumerate every valid parallel plan as numpy columns and evaluate them all at once.

The whole space of (tp, pp, dp, cp, ep, micro-batch, interleave, recompute, sequence parallel,
sharding) is built with numpy (cartesian products of knob values), the divisibility rules of
:func:`roofline.spec.config.check` are applied as vectorized masks, and the compiled formulas run on the arrays in
cache-sized chunks: first cut to the memory outputs for every plan (a sixth of the code, ``predict.evaluator``), then
whole for the plans that fit (a quarter to a fifth of them in the searches of docs/search.md), so the plans that cannot
run are never timed. :mod:`roofline.views.search` ranks the plans that fit; :func:`roofline.views.validate.
complete_layout` prices a row that leaves its layout blank. There is no Python loop over plans.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ..spec.config import EDGE_SLOTS, RECOMPUTE, RULES, SHARDING, SHARDING_BY_STAGE, ZERO_STAGE, holds
from ..base.errors import InputError

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

    def __init__(self, cols: dict, global_batch: int, schedule: str | None, uneven: bool = False,
                 cp_kind: str = "ring"):
        self.cols, self.sched = cols, schedule
        # etp None: the experts split over tp (Megatron-Core's default; search does not enumerate etp)
        # pipeline_layout None: search splits the layers evenly (a stated layout fixes pp and vp)
        # cp_kind: the base plan's (the stack's context parallelism, or the user's --cp-kind; not searched)
        self.fixed = dict(global_batch=global_batch, batch=global_batch, uneven_stages=bool(uneven), etp=None,
                          pipeline_layout=None, dp_replicas=1, recompute_fraction=1.0, cp_kind=cp_kind)
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


# pinned schedules (--schedule): the interleave each one runs (gpipe 1, dualpipev its two chunks per rank, dualpipe
# one stage per direction, the zero-bubble ZB1P / ZB2P one stage per rank)
PINNED_SCHEDULES = {"gpipe": 1, "dualpipev": 2, "dualpipe": 1, "zb1p": 1, "zb2p": 1}


def _schedule(v, schedule: str | None):
    """The schedule of interleave v (a number or an array): a pinned one (gpipe, dualpipev, dualpipe) as asked, else 1F1B,
    interleaved for v > 1."""
    import numpy as np

    if schedule in PINNED_SCHEDULES:
        return schedule
    if isinstance(v, np.ndarray):
        return np.array(["1f1b", "interleaved"])[(v > 1).astype(np.intp)]
    return "interleaved" if v > 1 else "1f1b"


def _apply(model, cols: dict, rules: list, global_batch: int, schedule: str | None, uneven: bool = False,
           cp_kind: str = "ring") -> dict:
    """Keep the rows where every rule whose plan fields are all enumerated holds; those rules leave ``rules``."""
    rows = _Rows(cols, global_batch, schedule, uneven, cp_kind)
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
                    offload_layers: int = 0, ladder: int = 0, cp_kind: str = "ring") -> tuple[dict, int]:
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
    LADDER, LADDER + 1, ...; :func:`selective_ladder`). ``cp_kind`` (the base plan's, not searched): ring attention
    or Ulysses, whose rule (tp x cp | heads) masks the layouts.
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
    u, ck = uneven_stages, cp_kind
    c = _apply(model, c, rules, B, schedule, u, ck)
    c = _apply(model, _cross(c, "micro_batch", mbs), rules, B, schedule, u, ck)
    c = _apply(model, _cross(c, "interleave", vs), rules, B, schedule, u, ck)
    # switches that never break divisibility
    c = _cross(c, "sequence_parallel", sps)
    c = _keep(c, (c["sequence_parallel"] == 0) | (c["tp"] > 1) | (len(sps) == 1))
    c = _cross(c, "recompute", rcs)
    c = _apply(model, _cross(c, "sharding", zs), rules, B, schedule, u, ck)
    # the rules left read only fields that are not searched (dtype, overlaps: evaluate_space checks them on the
    # fixed plan); one that also reads a knob would be skipped here, so it is a programming error
    half = [r for r in rules if set(r.reads) & _Rows(c, B, schedule, u, ck).names]
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
    if "dp_replicas" in knobs:
        ruled["dp_replicas"] = int(knobs["dp_replicas"][i])
    if "recompute_fraction" in knobs:
        ruled["recompute_fraction"] = float(knobs["recompute_fraction"][i])
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

def plan_arrays(knobs: dict, global_batch: int, schedule: str | None = None, model=None) -> dict:
    """The formula inputs of the plan knobs (arrays): :func:`roofline.model.predict.layout_inputs`, the one mapping.
    ``knobs["sharding"]`` indexes ``config.SHARDING_BY_STAGE``, whose index is the ZeRO stage. A pinned DualPipe
    prices each plan on the balanced split of its pp (predict.dualpipe_stages; needs the ``model``), as
    predict.plan_inputs does a single plan."""
    from ..model.predict import dualpipe_stages, layout_inputs

    k = knobs
    stages = dualpipe_stages(model, k["pp"]) if schedule == "dualpipe" and model is not None and len(k["pp"]) else None
    return layout_inputs(k["tp"], k["pp"], k["dp"], k["cp"], k["ep"], k["micro_batch"], global_batch, k["interleave"],
                         k["sequence_parallel"] == 1, k["recompute"], k["sharding"], schedule or "1f1b",
                         stages=stages)


def evaluate_arrays(x: dict, n: int, outputs=_OUT, chunk: int = CHUNK, desc: str = "search: pricing plans",
                    keep=None, known=None) -> dict:
    """The compiled formulas cut to ``outputs`` over n plans (model/factored.evaluate: each line once per distinct
    combination of the knobs it reads where that saves work, the rest in cache-sized chunks); scalars broadcast. ``keep``: (outputs, test) prices every plan on those outputs first and the rest of ``outputs`` only for
    the plans ``test`` (a function of that first result, a boolean array) keeps; the others
    read NaN there. ``known``: the ``keep`` outputs of the first rows, already computed (those rows are not sized
    again). Progress bars on stderr count the plans when they last more than base/progress.py's DELAY_S
    (millions of plans take seconds)."""
    import numpy as np

    from ..base import progress
    from ..model import factored

    outputs = tuple(outputs)
    first = tuple(keep[0]) if keep is not None else ()
    arrays = [k for k, v in x.items() if isinstance(v, np.ndarray) and v.ndim]
    res = {k: np.full(n, np.nan) for k in outputs}

    def run(outs, rows, total, label):
        xs = x if rows is None else {k: (v[rows] if k in arrays else v) for k, v in x.items()}   # slice: views
        with progress.bar(label, total=total, unit="plan") as bar:
            r = factored.evaluate(outs, xs, total, chunk, progress=bar.update)
        for k in outs:
            if rows is None:
                res[k][:] = r[k]
            else:
                res[k][rows] = r[k]

    if not first:
        run(outputs, None, n, desc)
        return res
    m = len(next(iter(known.values()))) if known else 0
    for k in first if m else ():
        res[k][:m] = known[k]
    if m < n:
        run(first, slice(m, n) if m else None, n - m,
            desc.replace("pricing", "sizing") + (" added (shares recomputed, EP overlap)" if m else ""))
    idx = np.flatnonzero(np.broadcast_to(np.asarray(keep[1]({k: res[k] for k in first}), dtype=bool), (n,)))
    rest = tuple(k for k in outputs if k not in first)
    run(rest, idx, len(idx), desc + " that fit")
    return res


def node_tiling_tp(model, n_gpus: int, gpus_per_node: int) -> list[int]:
    """The tensor-parallel sizes the search tries: divisors of the GPU count up to the heads that tile the node (tp
    divides the GPUs per node, or is a whole number of nodes). Megatron-Core puts TP innermost in its rank order
    (parallel_state.py RankGenerator order "tp-cp-ep-dp-pp"), so a TP group of 3 or 6 on 8-GPU nodes straddles two
    nodes in some of its copies and runs its every-layer collectives over the NIC; the collective model prices a group
    as aligned to the node (formulas/comm.py node_fit), so such sizes are left out rather than priced optimistically.
    A stated --tp is not restricted."""
    g = max(1, int(gpus_per_node))
    return [d for d in divisors(_int("gpus", n_gpus)) if d <= model.n_heads and (g % d == 0 or d % g == 0)] or [1]


def evaluate_space(model, hw, n_gpus: int, global_batch: int, *, base=None, framework: str = "megatron-core",
                   schedule: str | None = None, memory_margin: float = SEARCH_MEMORY_MARGIN, stated=frozenset(),
                   tp_comm_overlap: bool = False, **pins) -> Space:
    """Enumerate and evaluate every valid plan (see :func:`enumerate_plans` for ``pins``). A plan fits when
    its tensors plus the reserve (CUDA context, NCCL buffers, fragmentation) stay below capacity x (1 - margin).

    The overlap fields that follow from each plan's layout (p2p overlap when interleaved, ...) come from the
    stack's rules per plan, as :func:`roofline.spec.resolve.resolve` applies them, unless ``stated`` names the field."""
    import numpy as np

    from ..spec.config import Plan, check, modules_for
    from ..model.predict import OVERLAP_INPUTS, check_margin, fits as fits_memory, attention_inputs, hardware_inputs, model_inputs, plan_inputs
    from ..spec.resolve import layout_rules

    memory_margin = check_margin(memory_margin)

    if base is None:        # the stack's defaults, its recompute modules those the model can use (config.modules_for)
        base = default_base(framework)
        base = dataclasses.replace(base, recompute_modules=modules_for(model, base.recompute_modules))
    check(model, dataclasses.replace(base, tp=1, pp=1, dp=1, cp=1, ep=1, micro_batch=1, global_batch=None,
                                     interleave=1, schedule="1f1b", dp_replicas=1))   # model and fixed plan fields
    st = _stack(framework)
    # selective recomputation with more modules (selective_ladder) on a stack with Megatron-Core's --recompute-modules
    # (or --framework any), unless the user named the modules
    ladder = () if "recompute_modules" in stated or (st is not None and not st.rule("recompute_modules")) \
        else selective_ladder(model, base.recompute_modules)
    if pins.get("tp") is None:
        pins["tp"] = node_tiling_tp(model, n_gpus, hw.gpus_per_node)
    knobs, enumerated = enumerate_plans(model, n_gpus, global_batch, schedule=schedule, stack=st,
                                        uneven_stages=base.uneven_stages, offload_layers=base.offload_layers,
                                        ladder=len(ladder), cp_kind=base.cp_kind, **pins)
    knobs, extra = with_replicas(knobs, hw.gpus_per_node, st,
                                 base.dp_replicas if "dp_replicas" in stated else None)
    enumerated += extra
    def inputs_of(knobs):
        """The formula inputs of the knobs (arrays), with the stack's per-layout overlap columns added to the knobs."""
        n = len(knobs["tp"])
        x = {**model_inputs(model), **plan_inputs(Plan(**{k: getattr(base, k) for k in _FIXED}), model),
             **hardware_inputs(hw, base.dtype), **attention_inputs(model, hw),
             **plan_arrays(knobs, global_batch, schedule, model)}
        if n:
            x["dp_rep"] = np.asarray(knobs["dp_replicas"], dtype=float)
            # full recomputation of a share of the layers: rc_full is that share (predict.plan_inputs)
            x["rc_full"] = np.asarray(x["rc_full"], dtype=float) * np.asarray(knobs["recompute_fraction"], dtype=float)
        if ladder and n:
            x.update(ladder_inputs(knobs["recompute"], base.recompute_modules, ladder))
        if "overlap_ep" in knobs and n:
            x[OVERLAP_INPUTS["overlap_ep"]] = knobs["overlap_ep"]
        if st is not None and n:
            rules = layout_rules(st, knobs["tp"], knobs["pp"], knobs["interleave"], tp_comm_overlap, knobs["ep"])
            for field, (where, v, _why) in rules.items():
                if field not in stated:
                    knobs[field] = np.broadcast_to(np.where(where, v, getattr(base, field)), (n,)).astype(float)
                    x[OVERLAP_INPUTS[field]] = knobs[field]
        return knobs, x

    def fits_of(out):
        return fits_memory(out["memory"], out["mem_reserve"], hw, memory_margin)

    # a stated share pins it; a stated --recompute full without one means every layer (share 1)
    share = base.recompute_fraction if "recompute_fraction" in stated else 1.0 if "recompute" in stated else None
    skip = known = None
    if share is None and len(knobs["tp"]) and (st is None or st.rule("partial_recompute")):
        # a share is slower than no recomputation on the same layout: tried only where that does not fit. Every plan
        # is sized here; the plans added below come after these rows (with_recompute_fraction, with_ep_overlap keep
        # the rows they are given first and in order), so the pricing pass sizes only the added ones
        n0 = len(knobs["tp"])
        known = evaluate_arrays(inputs_of(dict(knobs, recompute_fraction=np.ones(n0)))[1], n0,
                                ("memory", "mem_reserve"), desc="search: sizing plans")
        skip = _whole_model_fits(knobs, fits_of(known))
    knobs, extra = with_recompute_fraction(knobs, model, st, share, skip=skip)
    enumerated += extra
    if "overlap_ep" not in stated and not base.overlap_ep and searches_ep_overlap(model, st):
        knobs, extra = with_ep_overlap(model, knobs, ladder, base.recompute_modules)
        enumerated += extra
    n = len(knobs["tp"])
    knobs, x = inputs_of(knobs)
    delay = "delay_wgrad" not in stated and searches_ep_overlap(model, st) and n
    outputs = _OUT + ("t_ep_comm",) if delay else _OUT
    # size every plan (memory needs a sixth of the formulas), then time those that fit; the others' times read NaN
    sized = (("memory", "mem_reserve"), fits_of)
    out = evaluate_arrays(x, n, outputs, keep=sized, known=known) if n else {k: np.empty(0) for k in _OUT}
    fits = fits_memory(out["memory"], out["mem_reserve"], hw, memory_margin) & np.isfinite(out["step_time"]) \
        & (out["step_time"] > 0)
    if delay:
        knobs, out = try_delay_wgrad(x, knobs, out, fits, base.overlap_ep)
    return Space(model=model, hardware=hw, base=base, n_gpus=int(n_gpus), global_batch=int(global_batch),
                 enumerated=enumerated, valid=n, knobs=knobs, out=out, fits=fits, memory_margin=memory_margin,
                 ladder=ladder)


def with_replicas(knobs: dict, gpus_per_node: int, stack, pinned: int | None = None) -> tuple[dict, int]:
    """HSDP as a search knob (the ``dp_replicas`` column; plan field dp_replicas, docs/models.md "HSDP replicas").

    Every plan keeps one copy of the sharded state over its dp x cp ranks (1), and again, where the stack replicates
    shard groups (its rule ``replicas``; every stack for ``--framework any``) and the plan shards its state, with one
    shard group per node: the dp x cp ranks inside one node (tp innermost in the rank order: Megatron-Core's
    RankGenerator "tp-cp-ep-dp-pp", torchtitan's mesh [pp, dp_replicate, dp_shard, cp, tp]), gpus_per_node / tp of
    them, and dp x cp / that many replicas (OLMo-core's and FSDP HYBRID_SHARD's default grouping). A ``pinned`` count
    (``--dp-replicas R``) keeps the plans it divides and that shard, at R. Returns the knobs and the plans added."""
    import numpy as np

    n = len(knobs["tp"])
    k = {key: np.asarray(v) for key, v in knobs.items()}
    if not n:
        return dict(k, dp_replicas=np.zeros(0)), 0
    dpcp = k["dp"] * k["cp"]
    sharded = k["sharding"] > 0
    can = stack is None or bool(stack.rule("replicas", False))
    if pinned is not None:
        ok = (sharded & (dpcp % int(pinned) == 0) & can) if int(pinned) > 1 else np.ones(n, dtype=bool)
        out = {key: v[ok] for key, v in k.items()}
        out["dp_replicas"] = np.full(int(ok.sum()), float(pinned))
        return out, 0
    tp = k["tp"]
    per_node = np.where(int(gpus_per_node) % tp == 0, int(gpus_per_node) // np.maximum(tp, 1), 0)
    ok = can & sharded & (per_node > 0) & (dpcp > per_node) & (dpcp % np.maximum(per_node, 1) == 0)
    on = {key: v[ok] for key, v in k.items()}
    out = {key: np.concatenate([k[key], on[key]]) for key in k}
    out["dp_replicas"] = np.concatenate([np.ones(n), (dpcp[ok] // per_node[ok]).astype(float)])
    return out, int(ok.sum())


# Shares of the layers a partial full recomputation recomputes, by how the stack states it (its rule
# ``partial_recompute``): "block", Megatron-Core's --recompute-method block --recompute-num-layers N (N of each
# pipeline chunk's layers); "every", one block in n (torchtitan's integer selective_ac_option, OLMo-core's
# block_interval). The search tries these besides whole-model recomputation (1): ASSUMED a quarter, a half and three
# quarters of a chunk's layers (rounded to whole layers), or one block in 2, 3 and 4.
PARTIAL_SHARES = (0.25, 0.5, 0.75)
EVERY_NTH = (2, 3, 4)


def _whole_model_fits(knobs: dict, fits) -> "np.ndarray":
    """For each plan that recomputes fully, whether its twin without recomputation (every other knob the same) fits:
    ``fits`` is a boolean per plan of whether it fits (read at the plans without recomputation). Plans that do not
    recompute fully read False."""
    import numpy as np

    from ..model.factored import factorize

    k = {key: np.asarray(v) for key, v in knobs.items()}
    n = len(k["tp"])
    none = np.flatnonzero(k["recompute"] == RECOMPUTE.index("none"))
    full = k["recompute"] == RECOMPUTE.index("full")
    out = np.zeros(n, dtype=bool)
    if not len(none) or not full.any():
        return out
    # one integer per layout: every column but the recomputation coded by its distinct values, in mixed radix (the
    # radices' product stays far below 2**63 for any search; np.unique over rows when it would not, slower)
    codes = [factorize(k[c]) for c in sorted(k) if c != "recompute"]
    if math.prod(len(vals) for vals, _ in codes) < 2 ** 62:
        key = np.zeros(n, dtype=np.int64)
        for vals, code in codes:
            key = key * len(vals) + code.ravel()
    else:
        key = np.unique(np.stack([code.ravel() for _, code in codes], axis=1), axis=0, return_inverse=True)[1].ravel()
    fits = np.asarray(fits)[none]
    order = np.argsort(key[none])
    keys = key[none][order]
    at = np.clip(np.searchsorted(keys, key), 0, len(keys) - 1)
    twin = (keys[at] == key) & full
    out[twin] = np.asarray(fits)[order][at[twin]]
    return out


def with_recompute_fraction(knobs: dict, model, stack, pinned: float | None = None, skip=None) -> tuple[dict, int]:
    """Full recomputation of a share of the layers as a search knob (the ``recompute_fraction`` column; plan field
    recompute_fraction, docs/models.md). Every plan keeps its share 1; a plan that recomputes fully is tried again at
    the shares its stack can state (:data:`PARTIAL_SHARES` of a chunk's layers for "block", one block in
    :data:`EVERY_NTH` for "every"; none for a stack without the rule, every kind for ``--framework any``). A
    ``pinned`` share (``--recompute-fraction F``) sets every fully recomputing plan's share to F and keeps the plans
    that do not recompute fully as they are. ``skip`` (a boolean per plan) leaves plans out of the shares: the ones
    whose twin without recomputation fits (:func:`_whole_model_fits`), which a share only slows down. Returns the knobs
    and the plans added."""
    import numpy as np

    n = len(knobs["tp"])
    k = {key: np.asarray(v) for key, v in knobs.items()}
    ones = np.ones(n)
    if not n:
        return dict(k, recompute_fraction=np.zeros(0)), 0
    full = k["recompute"] == RECOMPUTE.index("full")
    if pinned is not None:
        return dict(k, recompute_fraction=np.where(full, float(pinned), 1.0)), 0
    if skip is not None:
        full = full & ~np.asarray(skip, dtype=bool)
    kinds = ("block", "every") if stack is None else tuple(x for x in [stack.rule("partial_recompute")] if x)
    chunk = model.n_layers / (k["pp"] * k["interleave"])          # layers per pipeline chunk (model chunk)
    shares = []
    if "block" in kinds:
        for f in PARTIAL_SHARES:
            layers = np.round(f * chunk)
            shares.append(np.where((layers >= 1) & (layers < chunk), layers / chunk, np.nan))
    if "every" in kinds:
        for nth in EVERY_NTH:
            shares.append(np.where(chunk >= nth, np.full(n, 1.0 / nth), np.nan))
    parts, fracs = [k], [ones]
    added = 0
    seen = []
    for share in shares:
        ok = full & np.isfinite(share)
        for prev in seen:                                        # the same share twice (rounding) is one plan
            ok &= ~np.isclose(share, prev, equal_nan=False)
        seen.append(share)
        if ok.any():
            parts.append({key: v[ok] for key, v in k.items()})
            fracs.append(share[ok])
            added += int(ok.sum())
    out = {key: np.concatenate([p[key] for p in parts]) for key in k}
    out["recompute_fraction"] = np.concatenate(fracs)
    return out, added


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
          "overlap_cp", "overlap_ep", "tp_async_dgrad", "tp_overlap_split_rs", "per_expert_kernels", "fused_moe_mlp", "fp8_attention", "fp8_param_gather", "quantized_tp_gather", "bf16_layers", "wgrad_fusion", "fsdp_copies", "grad_buckets", "pp_scatter_gather",
          "quantized_saves", "ep_dispatcher", "cp_kind", "fp8_dispatch", "loss_kernel",
          "cuda_graphs", "graph_modules", "offload_layers", "recompute_modules", "delay_wgrad", "moment_dtype",
          "master_weights")


def _stack(framework):
    """The registry stack of a search (None for ``any``: every sharding and schedule, for research)."""
    from ..spec import stacks

    if framework is None or (isinstance(framework, str) and framework.lower() == "any"):
        return None
    return stacks.get(framework)


def stack_schedule(framework, schedule: str | None) -> str | None:
    """The schedule every plan of a search takes: the pinned one, else the stack's own where the stack runs no 1F1B
    (MaxText: GPipe, stacks/maxtext.yaml); None: 1F1B, interleaved where v > 1. A pinned GPipe at pp 1 prices as no
    pipeline (predict.layout_inputs)."""
    from ..spec import stacks

    st = _stack(framework)
    if schedule or st is None:
        return schedule
    own = stacks.own_schedule(st)
    return own if own in PINNED_SCHEDULES else None


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
