"""One resolver for every entry point: (model, plan, hardware, stack) -> one frozen, checked Spec.

The CLI flags, config files, the Python API, ``validate`` rows, ``search``/``plan`` and
``cluster-schedule`` all call :func:`resolve`, so one run gets one set of assumptions whatever the
command. Precedence, lowest first:

1. the model preset (or a ``Model`` passed in) and the generic plan defaults (``Plan()``: tp = pp =
   dp = 1, one micro-batch, 1F1B, ...);
2. the training stack's defaults (``roofline/spec/stacks/*.yaml``: attention kernel, dropout, dtypes,
   sequence parallelism, sharding, overlaps, recompute);
3. the stack's rules for fields still unstated (sequence parallelism only with tp > 1, bf16 grads
   reduced in fp32 on Megatron, overlapped p2p only in the interleaved schedule, the TP-overlap
   fraction when ``tp_comm_overlap`` is stated, no overlapped gradient reduce in a pipeline engine that
   reduces after the last micro-batch (or an expert-parallel optimizer that reduces after the backward),
   a default sharding the layout cannot run lowered to the deepest ZeRO stage the stack runs with that
   pp or ep (DeepSpeed's pipeline engine, Colossal-AI's hybrid plugins: ZeRO-1), uneven stages where the
   stack splits them, dp from
   ``n_gpus``, the smallest valid interleave when only "interleaved" is stated);
4. stated values: whatever the caller gives explicitly (``None`` means unset, never a default).

A ``Plan`` instance is taken as fully stated (every field literal); a mapping states only its keys.
Every field's origin is kept in ``Spec.origin`` (``preset``, ``default``, ``stack <id>``,
``rule: ...``, ``stated``) and printed by ``transformer --explain`` and ``validate --json``.

>>> s = resolve("gpt3-175b", {"tp": 8, "pp": 8, "dp": 16, "global_batch": 1536}, "a100-sxm4-80gb", "megatron-core")
>>> s.plan.sequence_parallel, s.plan.sharding, s.origin["sharding"], s.model.attention
(True, 'distributed', 'stack megatron-core', 'te')
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType

from ..base import normalize
from . import stacks
from .config import ALIASES, EDGE_SLOTS, SHARDING, ZERO_STAGE, Model, Plan, check, modules_for
from ..base.errors import InputError

PLAN_FIELDS = tuple(f.name for f in dataclasses.fields(Plan))
MODEL_FIELDS = tuple(f.name for f in dataclasses.fields(Model))
EXTRA_PLAN_KEYS = ("n_gpus", "tp_comm_overlap")
# on/off fields ("y", "true", "off" read as booleans): the Plan's bool fields and the tp_comm_overlap request
FLAG_FIELDS = tuple(f.name for f in dataclasses.fields(Plan) if f.type in (bool, "bool")) + ("tp_comm_overlap",)
DEFAULT_GPU = "a100-sxm4-80gb"


@dataclass(frozen=True)
class Spec:
    """A resolved, checked run: what every view reads."""
    model: Model
    plan: Plan
    hardware: object
    stack: stacks.Stack
    origin: MappingProxyType            # field -> where its value came from
    stack_reason: str = ""

    def explain(self) -> list[str]:
        """One line per field that did not come from the caller, with its origin."""
        out = [f"stack: {self.stack.id} ({self.stack.name}; {self.stack_reason or 'named'})"]
        for k, where in self.origin.items():
            if where != "stated":
                obj = self.plan if k in PLAN_FIELDS else self.model
                out.append(f"  {k} = {getattr(obj, k)!r}  <- {where}")
        return out

    def to_dict(self) -> dict:
        return {"stack": self.stack.id, "stack_reason": self.stack_reason,
                "model": dataclasses.asdict(self.model), "plan": dataclasses.asdict(self.plan),
                "hardware": self.hardware.id, "origin": dict(self.origin)}


def _normalised_plan(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        k = ALIASES.get(k, k)
        if v is None:
            continue
        if k == "sharding":
            v = {0: "none", 1: "zero1", 2: "zero2", 3: "zero3"}.get(v, v) if isinstance(v, int) and not isinstance(v, bool) else v
            v = v if v in ("zero1", "zero3") else normalize.sharding(v)
        elif k == "recompute":
            v = normalize.recompute(v)
        elif k == "recompute_modules":
            v = normalize.recompute_modules(v) or ""       # a list or any spelling; empty: no module
        elif k in ("dtype", "grad_dtype", "moment_dtype"):
            v = normalize.precision(v)
        elif k in FLAG_FIELDS and isinstance(v, str):
            v = normalize.flag(v)
        if v is None:           # a spelling of "not stated" ('-', 'n/a', 'mixed precision'): the default applies
            continue
        if k not in PLAN_FIELDS and k not in EXTRA_PLAN_KEYS:
            import difflib
            near = difflib.get_close_matches(k, PLAN_FIELDS + EXTRA_PLAN_KEYS, n=1)
            raise InputError(f"unknown plan field {k!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
        out[k] = v
    return out


def _model(model, fields: dict) -> tuple[Model, dict]:
    """(preset-level Model, stated fields) from a Model, a preset id/path or a mapping."""
    from . import models

    stated = {ALIASES.get(k, k): v for k, v in (fields or {}).items() if v is not None}
    if model is None:
        base = Model()
    elif isinstance(model, Model):
        base = model
    elif isinstance(model, str):
        base = models.load(model)
    elif isinstance(model, dict):
        d = {ALIASES.get(k, k): v for k, v in model.items()}
        preset = d.pop("preset", None)
        base = models.load(preset) if preset else Model()
        stated = {**{k: v for k, v in d.items() if v is not None}, **stated}
    else:
        raise InputError(f"model must be a Model, a preset id or a mapping, got {type(model).__name__}")
    bad = [k for k in stated if k not in MODEL_FIELDS]
    if bad:
        import difflib
        near = difflib.get_close_matches(bad[0], MODEL_FIELDS, n=1)
        raise InputError(f"unknown model field {bad[0]!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    if "mlp" in stated:
        stated["mlp"] = normalize.mlp(stated["mlp"])
    return base, stated


def _kv_heads_over_preset(base: Model, stated: dict):
    """(n_kv_heads, origin) when the stated head count replaces the preset's and its key/value heads are unstated,
    else None. The preset's key/value heads are a relation to its head count, not a number to keep: a multi-head
    preset (one key/value head per head) keeps one per stated head; a GQA preset keeps its key/value heads when they
    divide the stated count, and otherwise the row must state them (one line naming both numbers).

    >>> mha = Model(n_heads=64, n_kv_heads=64, d_model=7168)
    >>> _kv_heads_over_preset(mha, {"n_heads": 56})
    (None, 'preset relation: multi-head attention, one key/value head per stated head')
    >>> _kv_heads_over_preset(Model(n_heads=32, n_kv_heads=8), {"n_heads": 40})
    (8, 'preset (8 key/value heads divide the stated 40 heads)')
    >>> _kv_heads_over_preset(mha, {"n_heads": 64}) is None
    True
    """
    heads = stated.get("n_heads")
    if heads is None or "n_kv_heads" in stated or heads == base.n_heads:
        return None
    if base.n_kv_heads is None or base.n_kv_heads == base.n_heads:
        return None, "preset relation: multi-head attention, one key/value head per stated head"
    if heads % base.n_kv_heads:
        raise InputError(f"n_kv_heads: the preset's {base.n_kv_heads} key/value heads do not divide the stated "
                         f"n_heads {heads}; state n_kv_heads")
    return base.n_kv_heads, f"preset ({base.n_kv_heads} key/value heads divide the stated {heads} heads)"


def _hardware(hardware, gpus_per_node=None, net_gbps=None, clock_spread=None):
    from . import hardware as hwmod

    hw = hardware if hardware is not None and not isinstance(hardware, str) else hwmod.load(hardware or DEFAULT_GPU)
    if gpus_per_node is not None and gpus_per_node != hw.gpus_per_node:
        hw = dataclasses.replace(hw, gpus_per_node=int(gpus_per_node))
    if net_gbps is not None:
        hw = hw.with_network(net_gbps)
    if clock_spread is not None and clock_spread != hw.clock_spread:
        hw = dataclasses.replace(hw, clock_spread=clock_spread)       # Hardware checks the range: one-line error
    return hw


def smallest_interleave(layers: int, pp: int, micro_batches: int, edge_slots: int = 0) -> int:
    """Smallest v >= 2 the interleaved schedule accepts (layers % (pp v) == 0, micro-batches % pp == 0), else 1.
    ``edge_slots``: virtual stages the embedding and the loss may fill in a stack that splits uneven stages
    (Megatron-Core account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split: (layers + 2) %
    (pp v) == 0 also splits; Megatron-Bridge's Llama 3.1 405B, 126 layers + 2 = 128 virtual-stage slots).

    >>> smallest_interleave(126, 16, 16), smallest_interleave(126, 16, 16, edge_slots=2)
    (1, 2)
    """
    return (valid_interleaves(layers, pp, micro_batches, edge_slots) or (1,))[0]


def valid_interleaves(layers: int, pp: int, micro_batches: int, edge_slots: int = 0) -> tuple[int, ...]:
    """Every v >= 2 the interleaved schedule accepts (the conditions of :func:`smallest_interleave`), ascending.

    >>> valid_interleaves(126, 16, 16, edge_slots=2), valid_interleaves(96, 8, 12)
    ((2, 4, 8), ())
    """
    if pp == 1 or micro_batches % pp:
        return ()
    return tuple(v for v in range(2, (layers + edge_slots) // pp + 1)
                 if layers % (pp * v) == 0 or (edge_slots and (layers + edge_slots) % (pp * v) == 0))


def layout_rules(st, tp, pp, interleave, tp_comm_overlap: bool = False, ep=1) -> dict:
    """The overlap fields that follow from the layout by the stack's rules: {field: (applies, value, why)}.

    ``tp``, ``pp``, ``interleave`` and ``ep`` are integers or numpy arrays (broadcast), so :func:`resolve` applies the
    rules to one plan and ``search`` to every enumerated plan: one place for each rule."""
    import numpy as np

    tp, pp, v, ep = np.asarray(tp), np.asarray(pp), np.asarray(interleave), np.asarray(ep)
    ov_pp = float(st.rule("overlap_pp_interleaved", 0.0))
    out = {"overlap_pp": (np.ones_like(v, dtype=bool), np.where(v > 1, ov_pp, 0.0),
                          f"{st.id}: p2p overlap in the interleaved schedule, none without interleaving")}
    if st.rule("no_overlap_with_pp"):
        out["overlap_grad_reduce"] = (pp > 1, 0.0, f"{st.id}: the pipeline engine reduces gradients after the "
                                                   "last micro-batch")
    if st.rule("no_overlap_with_ep"):
        where = ep > 1 if "overlap_grad_reduce" not in out else (ep > 1) | out["overlap_grad_reduce"][0]
        out["overlap_grad_reduce"] = (where, 0.0, f"{st.id}: the expert-parallel optimizer reduces gradients after "
                                                  "the backward")
    if tp_comm_overlap and st.rule("tp_comm_overlap") == "ring":
        out["overlap_tp"] = (tp > 1, (tp - 1) / tp, "tp_comm_overlap stated: (tp-1)/tp hidden")
    return out


def resolve(model=None, plan=None, hardware=None, stack=None, *, model_fields: dict | None = None,
            gpus_per_node: int | None = None, net_gbps: float | None = None, clock_spread: float | None = None,
            stack_reason: str = "") -> Spec:
    """Resolve one run (see the module docstring for the precedence); InputError on an invalid result.

    ``stack`` is a registry name (``megatron-core``, ``megatron-lm@2021``, ``nemo@25.09``), a Stack, or
    None for the default stack (Megatron-Core); ``validate`` infers one per row with ``stacks.infer``.
    """
    st = stacks.get(stack) if stack is not None else stacks.get(stacks.DEFAULT)
    reason = stack_reason or ("named" if stack is not None else "default stack (none named)")
    hw = _hardware(hardware, gpus_per_node, net_gbps, clock_spread)
    base_model, model_stated = _model(model, model_fields)
    origin: dict = {}

    # ---- model: preset < stack < stated
    m = {f: getattr(base_model, f) for f in MODEL_FIELDS}
    for k, v in st.model.items():
        m[k] = v
        origin[k] = f"stack {st.id}"
    m.update(model_stated)
    origin.update({k: "stated" for k in model_stated})
    kv = _kv_heads_over_preset(base_model, model_stated)
    if kv is not None:
        m["n_kv_heads"], origin["n_kv_heads"] = kv
    try:
        model_obj = Model(**m)
    except TypeError as exc:
        raise InputError(f"model: {exc}") from None

    # ---- plan: generic defaults < stack < rules < stated
    if isinstance(plan, Plan):
        stated = {f: getattr(plan, f) for f in PLAN_FIELDS}
    elif plan is None:
        stated = {}
    elif isinstance(plan, dict):
        stated = dict(plan)
    else:
        raise InputError(f"plan must be a Plan or a mapping of plan fields, got {type(plan).__name__}")
    stated = _normalised_plan(stated)
    n_gpus = stated.pop("n_gpus", None)
    tp_overlap = stated.pop("tp_comm_overlap", None)
    default = Plan()
    p = {f: getattr(default, f) for f in PLAN_FIELDS}
    origin.update({f: "default" for f in PLAN_FIELDS})
    for k, v in st.plan.items():
        p[k] = v
        origin[k] = f"stack {st.id}"
    p.update(stated)
    origin.update({k: "stated" for k in stated})
    dnames = st.rule("precision_names") or {}
    if stated.get("dtype") in dnames:
        # the stack's own recipe for the stated name (HAI-LLM's "FP8" is its fine-grained block scaling)
        p["dtype"] = dnames[stated["dtype"]]
        origin["dtype"] = f"stated {stated['dtype']!r}: {st.id}'s recipe of that name is {p['dtype']!r}"
    # the stack's own meaning of a stated name (torchtitan: "selective" is its op-level SAC; nanochat's "ZeRO-2 style"
    # optimizer keeps whole gradients through backward: a distributed optimizer)
    for field in ("recompute", "sharding"):
        names = st.rule(f"{field}_names") or {}
        if stated.get(field) in names:
            p[field] = names[stated[field]]
            origin[field] = f"stated {stated[field]!r}: {st.id} calls {p[field]!r} that"
    for k in ("tp", "pp", "cp", "dp", "micro_batch", "interleave", "ep"):
        v = p[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")) \
                or int(v) != v or v < 1:
            raise InputError(f"plan.{k} must be a positive integer, got {v!r}")
        p[k] = int(v)

    def rule(k, v, why):
        if k not in stated:
            p[k] = v
            origin[k] = f"rule: {why}"

    # the batch of one data-parallel rank, when the stated dp (or n_gpus) and global batch give it
    model_par = p["tp"] * p["pp"] * p["cp"]
    dp_ = stated.get("dp") or (n_gpus // model_par if n_gpus and n_gpus % model_par == 0 else p["dp"])
    local = p["global_batch"] // dp_ if p["global_batch"] and dp_ and p["global_batch"] % dp_ == 0 else 0
    if "micro_batch" not in stated and local and st.rule("micro_batch_unstated") == "local" and p["pp"] == 1:
        # a data-parallel stack accumulates no gradients unless told: one micro-batch of the rank's whole batch
        rule("micro_batch", local, f"{st.id} accumulates no gradients unless told: global batch / dp")
    if "micro_batch" not in stated and local and st.rule("microbatches_with_pp") == "pp" and p["pp"] > 1 \
            and local % p["pp"] == 0:
        # the local batch split into as many micro-batches as pipeline stages (torchtitan before 2025-04)
        rule("micro_batch", local // p["pp"], f"{st.id} splits the local batch ({local}) into pp = {p['pp']} "
                                              "micro-batches unless told")

    if "dp" not in stated and n_gpus is not None:
        per = p["tp"] * p["pp"] * p["cp"]
        if n_gpus % per:
            raise InputError(f"n_gpus ({n_gpus}) is not divisible by tp x pp x cp ({per})")
        rule("dp", n_gpus // per, f"n_gpus {n_gpus} / (tp x pp x cp)")
    if n_gpus is not None and p["tp"] * p["pp"] * p["cp"] * p["dp"] != n_gpus:
        raise InputError(f"n_gpus ({n_gpus}) != tp*pp*dp*cp ({p['tp']}*{p['pp']}*{p['dp']}*{p['cp']})")
    folded = p["tp"] * p["cp"] * p["dp"]
    if (model_obj.n_experts > 1 and p.get("etp") is None and folded % (p["ep"] * p["tp"]) and folded % p["ep"] == 0):
        # the expert grid must tile tp x cp x dp (Megatron-Core parallel_state: world = pp x etp x ep x expert-dp); a
        # layout that cannot hold ep x tp ran its experts unsplit, EP folded over the TP ranks (MoE parallel folding)
        rule("etp", 1, f"ep x tp ({p['ep']} x {p['tp']}) does not divide tp x cp x dp ({folded}): experts ran with etp 1")
    if p["tp"] == 1 and p["sequence_parallel"]:
        rule("sequence_parallel", False, "no sequence parallelism at tp = 1")
    if st.rule("eager_rope_moe_only") and p.get("eager_rope") and model_obj.n_experts <= 1:
        rule("eager_rope", False, f"{st.id}: its torch-op RoPE is in the MoE models it implements; a dense model runs "
                                  "Hugging Face code with fused kernels")
    recipes = st.rule("quantized_tp_gather_recipes")
    if recipes and p.get("quantized_tp_gather") and p["dtype"] not in recipes:
        rule("quantized_tp_gather", False, f"{st.id} gathers TP inputs quantized under {', '.join(recipes)} only: "
                                           f"16-bit gathers under {p['dtype']}")
    if "dtype" in stated and st.rule("grad_dtype_bf16") and p["dtype"] not in ("fp16", "fp32"):
        rule("grad_dtype", st.rule("grad_dtype_bf16"), f"{st.id}: bf16 runs reduce fp32 main grads")
    own = stacks.own_schedule(st)
    if own and "schedule" not in stated and p["pp"] > 1 and p["interleave"] == 1:
        rule("schedule", own, f"{st.id} runs {own} pipelines (it runs {', '.join(stacks.schedules_of(st))})")
    unstated = stacks.unstated_schedule(st)
    if unstated and "schedule" not in stated and "interleave" not in stated and p["pp"] > 1:
        gb = p["global_batch"] or p["micro_batch"] * p["dp"]
        m_count = gb // (p["micro_batch"] * p["dp"]) if gb % (p["micro_batch"] * p["dp"]) == 0 else 0
        # the stack's own schedule where the layout runs it (DualPipe: an even pp, an even micro-batch count of at
        # least 2 pp; config.RULES), else 1F1B, which the stack also runs
        if unstated != "dualpipe" or (p["pp"] % 2 == 0 and m_count % 2 == 0 and m_count >= 2 * p["pp"]):
            rule("schedule", unstated, f"{st.id} runs {unstated} pipelines unless told (it runs "
                                       f"{', '.join(stacks.schedules_of(st))})")
    if "interleave" not in stated and (stated.get("schedule") == "interleaved"
                                       or (st.rule("interleave_when_pp") and p["pp"] > 1 and "schedule" not in stated)):
        gb = p["global_batch"] or p["micro_batch"] * p["dp"]
        m_count = gb // (p["micro_batch"] * p["dp"]) if gb % (p["micro_batch"] * p["dp"]) == 0 else 0
        uneven = stated["uneven_stages"] if "uneven_stages" in stated else st.rule("uneven_stages", False)
        rule("interleave", smallest_interleave(model_obj.n_layers, p["pp"], m_count, EDGE_SLOTS if uneven else 0),
             ("interleaved stated" if stated.get("schedule") == "interleaved" else f"{st.id} runs pp > 1 interleaved")
             + " without v: the smallest valid v")
    if p["interleave"] > 1 and p["schedule"] == "1f1b":
        p["schedule"] = "interleaved"
        origin["schedule"] = "rule: interleave > 1"
    if p["schedule"] == "interleaved" and p["interleave"] == 1:
        p["schedule"] = "1f1b"
        origin["schedule"] = "rule: no valid interleave"
    if "sharding" not in stated:
        # the stack's default sharding where the layout allows it; else the deepest stage it runs within the limit
        # (DeepSpeed's pipeline engine: ZeRO-1; Colossal-AI's hybrid plugins: ZeRO-1 with pp or ep)
        limits = [(st.rule(key, 3), f"{axis} {p[axis]}") for key, axis in (("max_zero_with_pp", "pp"),
                                                                            ("max_zero_with_ep", "ep")) if p[axis] > 1]
        cap = min((lim for lim, _ in limits), default=3)
        if ZERO_STAGE.get(p["sharding"], 0) > cap:
            runs = [s for s in (st.rule("shardings") or SHARDING) if ZERO_STAGE[s] <= cap]
            lowered = max(runs, key=lambda s: ZERO_STAGE[s], default=None)
            if lowered is not None:
                rule("sharding", lowered, f"{st.id} runs at most ZeRO-{cap} with "
                     + " and ".join(w for lim, w in limits if lim == cap) + f": its default {p['sharding']} lowered")
    for k, (where, v, why) in layout_rules(st, p["tp"], p["pp"], p["interleave"], bool(tp_overlap), p["ep"]).items():
        if where:
            rule(k, float(v), why)
    rule("uneven_stages", bool(st.rule("uneven_stages", False)), f"{st.id} splits uneven layer counts"
         if st.rule("uneven_stages") else f"{st.id} needs layers divisible by pp x v")
    # Megatron-Core reads --recompute-modules only with --recompute-granularity selective: modules stated alone mean
    # selective (search still enumerates recompute; its selective plans recompute these modules)
    if "recompute_modules" in stated:
        rule("recompute", "selective", "recompute-modules stated: Megatron-Core reads them under selective granularity")
    else:       # the stack's default modules that the model cannot use (HAI-LLM's MLA up-projections on a GQA model)
        kept = modules_for(model_obj, p["recompute_modules"])
        if kept != p["recompute_modules"]:
            rule("recompute_modules", kept, f"{st.id}'s recompute modules {p['recompute_modules']} without those "
                                            f"{model_obj.name} has none of (no MLA or no MoE)")
    if "recompute_modules" in stated and p["recompute"] != "selective" and p["recompute_modules"] != "core_attn":
        raise InputError(f"recompute-modules ({p['recompute_modules']}) needs recompute selective, got "
                         f"{p['recompute']!r} (Megatron-Core reads recompute_modules under selective granularity only)")
    try:
        plan_obj = Plan(**p)
    except TypeError as exc:
        raise InputError(f"plan: {exc}") from None
    # what the stack cannot run (interleaving, shardings, ZeRO with pp): the rules search masks with, one place
    for r in stacks.plan_rules(st):
        if not r.ok(model_obj, plan_obj):
            raise InputError(r.text(model_obj, plan_obj))
    check(model_obj, plan_obj)
    hw.peak(plan_obj.dtype)      # the profile must state the precision's peak (one line naming the dtype otherwise)
    return Spec(model=model_obj, plan=plan_obj, hardware=hw, stack=st, origin=MappingProxyType(origin),
                stack_reason=reason)
