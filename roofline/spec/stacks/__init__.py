"""The registry of training stacks: what a run means when it states only its parallel sizes.

One YAML per stack in this folder (Megatron-LM by era, Megatron-Core/NeMo/Megatron-Bridge,
Megatron-DeepSpeed, DeepSpeed ZeRO, PyTorch FSDP, torchtitan, plain PyTorch). Each gives the
model defaults (attention kernel, dropout), the plan defaults (dtypes, sequence parallelism,
sharding, overlaps, recompute), the rules the resolver applies to unstated fields, and what the
stack cannot run; every key has its source (the framework's flag and file, or a paper) under
``sources``. ``python -m roofline frameworks list|show``; docs/frameworks.md is generated from here.
A version of a stack may state only what differs: ``base: ID`` takes every key of that stack's file, the
``model``, ``plan``, ``rules`` and ``sources`` mappings key by key, under the file's own.

Names: ``ID`` or ``ID@VERSION`` where VERSION is a year (``megatron-lm@2021``) or a release in the
stack's family (``nemo@25.09`` -> the Megatron-Core entry whose era holds 2025).
"""
from __future__ import annotations

import dataclasses
import types
import functools
import re
from pathlib import Path
from types import MappingProxyType

import numpy as np

from ..config import SHARDING, Rule, modules_hold, among, stage_name
from ...base.errors import InputError
from ...base.schema import yaml_load
from . import history

HERE = Path(__file__).parent
KEYS = ("id", "family", "version", "name", "era", "aliases", "model", "plan", "rules", "sources")
MODEL_KEYS = ("attention", "dropout")
PLAN_KEYS = ("dtype", "grad_dtype", "sequence_parallel", "sharding", "recompute", "overlap_grad_reduce",
             "overlap_param_gather", "overlap_tp", "tp_async_dgrad", "tp_overlap_split_rs", "per_expert_kernels", "fused_moe_mlp", "wgrad_fusion", "eager_elementwise", "eager_rope", "fsdp_copies", "grad_buckets", "master_weights", "pp_scatter_gather", "quantized_saves",
             "quantized_tp_gather",
             "loss_kernel", "optimizer",
             "cuda_graphs", "ep_dispatcher", "overlap_ep", "recompute_modules", "moment_dtype", "fp8_dispatch", "cp_kind")
RULE_KEYS = ("interleaved_schedule", "interleave_when_pp", "no_overlap_with_pp", "overlap_pp_interleaved", "tp_comm_overlap", "uneven_stages", "shardings",
             "max_zero_with_pp", "max_zero_with_ep", "no_overlap_with_ep", "grad_dtype_bf16", "kv_heads_below_tp", "compiled_loss_since",
             "recomputes", "recompute_names", "sharding_names", "schedules", "micro_batch_unstated", "builds_on", "recompute_modules",
             "moment_dtypes", "optimizers", "seq_len_unstated", "combines", "pipeline", "context_parallel", "cp_kinds",
             "sequence_parallelism",
             "replicas", "partial_recompute", "eager_rope_moe_only", "quantized_tp_gather_recipes", "precisions",
             "microbatches_with_pp", "undated_version", "schedule_unstated", "precision_names", "own_models",
             "tflops_basis", "tensor_parallel", "defers", "pure_bf16", "trained_models")
DEFAULT = "megatron-core"           # DESIGN.md: Megatron-Core is the default stack of the CLI, configs and API


@dataclasses.dataclass(frozen=True)
class Stack:
    id: str
    family: str
    version: str
    name: str
    era: tuple
    aliases: tuple
    model: MappingProxyType
    plan: MappingProxyType
    rules: MappingProxyType
    sources: MappingProxyType
    requested: str = ""             # the name it was asked by (``megatron-lm@2021``), for the output
    months: tuple = ()              # (first (year, month), last (year, month)): an era bound given as "YYYY-MM"

    def rule(self, key: str, default=None):
        return self.rules.get(key, default)

    def era_text(self) -> str:
        """The era as written: "2023-2026", or with the month where a bound has one ("2024..2025-03")."""
        (y0, m0), (y1, m1) = self.months or ((self.era[0], 1), (self.era[1], 12))
        if m0 == 1 and m1 == 12:
            return f"{y0}-{y1}"
        return f"{y0}{'' if m0 == 1 else f'-{m0:02d}'}..{y1}{'' if m1 == 12 else f'-{m1:02d}'}"

    def label(self) -> str:
        return self.id if not self.requested or self.requested == self.id else f"{self.id} (as {self.requested})"

    def to_dict(self) -> dict:
        return {"id": self.id, "family": self.family, "version": self.version, "name": self.name,
                "era": list(self.era), "era_text": self.era_text(), "aliases": list(self.aliases), "model": dict(self.model),
                "plan": dict(self.plan), "rules": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.rules.items()},
                "sources": dict(self.sources)}


def _check(d: dict, path: Path) -> Stack:
    where = f"stack {path.name}"
    if not isinstance(d, dict):
        raise InputError(f"{where}: expected a mapping")
    missing = [k for k in KEYS if k not in d]
    unknown = [k for k in d if k not in KEYS]
    if missing or unknown:
        raise InputError(f"{where}: " + (f"missing keys {missing}" if missing else f"unknown keys {unknown}"))
    for sect, allowed in (("model", MODEL_KEYS), ("plan", PLAN_KEYS), ("rules", RULE_KEYS)):
        bad = [k for k in d[sect] if k not in allowed]
        if bad:
            raise InputError(f"{where}: unknown {sect} keys {bad} (known: {', '.join(allowed)})")
    unsourced = [k for s in ("model", "plan", "rules") for k in d[s] if not str(d["sources"].get(k, "")).strip()]
    if unsourced:
        raise InputError(f"{where}: no source for {unsourced}")
    try:
        bounds = [_era_bound(v, end=i == 1) for i, v in enumerate(d["era"])]
    except (TypeError, ValueError):
        bounds = []
    if len(bounds) != 2 or bounds[0] > bounds[1]:
        raise InputError(f"{where}: era must be [first year, last year] (a year or \"YYYY-MM\"), got {d['era']}")
    era = (bounds[0][0], bounds[1][0])
    rules = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d["rules"].items()}
    return Stack(id=str(d["id"]), family=str(d["family"]), version=str(d["version"]), name=str(d["name"]), era=era,
                 aliases=tuple(str(a).lower() for a in d["aliases"]), model=MappingProxyType(dict(d["model"])),
                 plan=MappingProxyType(dict(d["plan"])), rules=MappingProxyType(rules), months=tuple(bounds),
                 sources=MappingProxyType({k: str(v) for k, v in d["sources"].items()}))


SECTIONS = ("model", "plan", "rules", "sources")


def _read(path: Path, seen: tuple = ()) -> dict:
    """A stack file's mapping, a ``base:`` stack's keys under its own (the sections merged key by key)."""
    d = yaml_load(path.read_text(encoding="utf-8"))
    if not isinstance(d, dict) or "base" not in d:
        return d
    ref, where = str(d["base"]), f"stack {path.name}"
    base_path = HERE / f"{ref}.yaml"
    if ref in seen or ref == path.stem:
        raise InputError(f"{where}: circular base {ref!r}")
    if not base_path.exists():
        raise InputError(f"{where}: base {ref!r} is not a stack of this folder")
    base = _read(base_path, seen + (path.stem,))
    own = {k: v for k, v in d.items() if k != "base"}
    return {**base, **own, **{s: {**(base.get(s) or {}), **(own.get(s) or {})} for s in SECTIONS}}


@functools.lru_cache(maxsize=1)
def registry() -> dict:
    """Every bundled stack by id (read once)."""
    out = {}
    for p in sorted(HERE.glob("*.yaml")):
        s = _check(_read(p), p)
        if s.id != p.stem:
            raise InputError(f"stack {p.name}: id {s.id!r} differs from the file name")
        out[s.id] = s
    return out


def list_ids() -> list[str]:
    return list(registry())


def _year(version: str) -> int | None:
    """A year from a version: 2021, 21, 25.09 (NeMo container YY.MM) -> 2021/2021/2025."""
    m = re.fullmatch(r"(\d{4})(?:[.-]\d+)*", version)
    if m:
        return int(m.group(1))
    m = re.fullmatch(r"(\d{2})\.\d{2}(?:\.\d+)*", version)
    if m:
        return 2000 + int(m.group(1))
    return None


# Megatron-LM's release tags and the month each minor release was tagged (git tags of NVIDIA/Megatron-LM, their commit
# dates: v1.0 2020-04, v2.0 2021-01, v2.6 2021-08; core_v0.4.0 2023-12-11, core_v0.5.0 2024-02-26, ..., core_v0.16.0
# 2026-02-26; "core_r0.N" tags the same commits from 0.8 to 0.11). v3.x (2022, the Korthikanti et al. release) and
# Megatron-Core 0.1-0.3 (2023, beside the 23.04 / 23.06 tags) are not tagged in that history: dated by their year
MEGATRON_RELEASES = {"1": (2020, 4), "2": (2021, 1), "3": (2022, None),
                     "0.1": (2023, None), "0.2": (2023, None), "0.3": (2023, None), "0.4": (2023, 12),
                     "0.5": (2024, 2), "0.6": (2024, 4), "0.7": (2024, 5), "0.8": (2024, 8),
                     "0.9": (2024, 10), "0.10": (2025, 2), "0.11": (2025, 3), "0.12": (2025, 5), "0.13": (2025, 7),
                     "0.14": (2025, 10), "0.15": (2025, 12), "0.16": (2026, 2), "0.17": (2026, 4), "0.18": (2026, 6),
                     "0.19": (2026, 8)}


def megatron_release(text: str) -> tuple | None:
    """(year, month or None) of the Megatron-LM release a lower-cased text names by its tag ("core_r0.9.0",
    "core_v0.12", "Megatron-LM v2.6", "Megatron-Core 0.13"), or None; a minor release newer than the table's last is
    dated by the last.

    >>> megatron_release("megatron-lm core_r0.9.0"), megatron_release("megatron-lm v2.6"), megatron_release("mcore 0.13")
    ((2024, 10), (2021, 1), (2025, 7))
    """
    m = re.search(r"\bcore_[rv](0\.\d+)|(?:megatron[- ]?(?:lm|core)|mcore)[ -]?(?:v|r|version\s*)(0\.\d+|[123])\b"
                  r"|(?:megatron[- ]?core|mcore)[ -]?(0\.\d+)", text or "")
    if not m:
        return None
    tag = m.group(1) or m.group(2) or m.group(3)
    newest = max(int(k[2:]) for k in MEGATRON_RELEASES if k.startswith("0."))
    if tag.startswith("0.") and int(tag[2:]) > newest:
        tag = f"0.{newest}"
    return MEGATRON_RELEASES.get(tag)


def _era_bound(v, end: bool) -> tuple:
    """(year, month) of an era bound: a year (January, or December for the last) or "YYYY-MM"."""
    text = str(v).strip()
    m = re.fullmatch(r"(\d{4})-(\d{2})", text)
    if m and 1 <= int(m.group(2)) <= 12:
        return int(m.group(1)), int(m.group(2))
    if re.fullmatch(r"\d{4}", text):
        return int(text), 12 if end else 1
    raise ValueError(text)


def versions(family: str) -> list[Stack]:
    """The stacks of one family (its versions: megatron-lm-2021, megatron-lm-2022, megatron-core; torchtitan-2024,
    torchtitan), in registry order."""
    return [s for s in registry().values() if s.family == family]


def later_versions(stack: Stack) -> list[Stack]:
    """The versions of ``stack``'s family that begin after it, earliest first: where a row states what the version its
    date or the era rule picked cannot run (selective recomputation on Megatron-LM 2.x), the run used a later one."""
    return sorted((s for s in versions(stack.family) if s.months[0] > stack.months[0]), key=lambda s: s.months[0])


# Where the era rule's stack (no stack named, or a framework the registry does not hold) cannot run a row's stated
# plan, the stand-ins tried next, in order: the reference implementation of what the era's stack refuses. ZeRO-2 and
# ZeRO-3 with pipeline-free data parallelism are DeepSpeed's (Rajbhandari et al. 2020, arXiv:1910.02054, the papers
# that named the stages); FSDP composed with pipeline or context parallelism is torchtitan's (FSDP2 + TP + PP + CP).
_PRE_FLASH_STAND_INS = ("deepspeed-zero-2021", "megatron-deepspeed-2022")
STAND_INS = {"megatron-core": ("deepspeed-zero", "torchtitan"),
             "megatron-lm-2022": _PRE_FLASH_STAND_INS, "megatron-lm-2021": _PRE_FLASH_STAND_INS}


def stand_ins(stack: Stack) -> list[Stack]:
    """The stacks to try, in order, for a row the era rule priced on ``stack`` and that ``stack`` cannot run
    (:data:`STAND_INS`)."""
    reg = registry()
    return [reg[i] for i in STAND_INS.get(stack.id, ()) if i in reg]


def by_year(family: str, year: int, month: int | None = None) -> Stack | None:
    """The stack of ``family`` whose era holds ``year`` (and ``month``, for a family whose versions change within a
    year); without a month, the version that holds most of that year; the nearest era when none holds it."""
    cands = versions(family)
    if not cands:
        return None
    inside = [s for s in cands if s.era[0] <= year <= s.era[1]]
    if month is not None:
        exact = [s for s in inside if s.months[0] <= (year, month) <= s.months[1]]
        inside = exact or inside
    if inside:
        def months_held(s):
            first = s.months[0][1] if s.months[0][0] == year else 1
            last = s.months[1][1] if s.months[1][0] == year else 12
            return last - first
        return max(inside, key=months_held)
    return min(cands, key=lambda s: min(abs(year - s.era[0]), abs(year - s.era[1])))


def get(name) -> Stack:
    """A stack by id, alias or family, optionally ``@VERSION``; InputError listing the known names."""
    if isinstance(name, Stack):
        return name
    text = str(name).strip()
    base, _, version = text.partition("@")
    key = base.strip().lower()
    reg = registry()
    if key in reg:
        candidates = [reg[key]]
    else:
        candidates = [s for s in reg.values() if key == s.family or key in s.aliases]
    if not candidates:
        raise InputError(f"unknown framework {text!r}; known: {', '.join(reg)} (aliases: `frameworks list`), "
                         "optionally NAME@YEAR or NAME@YY.MM")
    stack = max(candidates, key=lambda s: s.era[1])          # a family or alias alone: its newest entry
    if version.strip():
        y = _year(version.strip())
        if y is None:
            raise InputError(f"framework {text!r}: version {version!r} is not a year (2021) or a release (25.09)")
        m = re.fullmatch(r"\d{2}\.(\d{2})(?:\.\d+)*|\d{4}-(\d{2})", version.strip())
        month = int(m.group(1) or m.group(2)) if m else None
        if not stack.months[0] <= (y, month or (12 if y == stack.era[1] else 1)) <= stack.months[1]:
            stack = by_year(stack.family, y, month)
    return dataclasses.replace(stack, requested=text)


def schedules_of(stack: Stack) -> tuple[str, ...]:
    """The pipeline schedules ``stack`` runs: 1F1B, interleaved 1F1B and GPipe unless it lists its own."""
    return tuple(stack.rule("schedules") or ("1f1b", "interleaved", "gpipe"))


def own_schedule(stack: Stack) -> str | None:
    """The schedule a pipelined run of ``stack`` takes when none is stated: the stack's first where it runs no 1F1B
    (MaxText: GPipe, stacks/maxtext.yaml), else None (1F1B, interleaved where v > 1)."""
    own = schedules_of(stack)
    return None if "1f1b" in own else own[0]


def unstated_schedule(stack: Stack) -> str | None:
    """The schedule ``resolve`` gives a pipelined run of ``stack`` whose schedule and interleave are not stated, where
    the stack's own differs from 1F1B but 1F1B stays one it runs (HAI-LLM: DualPipe, stacks/hai-llm.yaml
    ``schedule_unstated``); None otherwise. The search ranks such a stack's plans under it beside the 1F1B family
    unless ``--schedule`` pins one (views/search.py own_schedule_space)."""
    own = stack.rule("schedule_unstated")
    return own if own in schedules_of(stack) else None


def _schedule_message(stack: Stack) -> str:
    """The refusal of a schedule ``stack`` does not run, a template of the plan ``p`` (a Rule message)."""
    src = stack.sources.get("schedules", "").replace("{", "{{").replace("}", "}}")
    return (f"stack {stack.id} cannot run the {{p.schedule}} pipeline schedule (it runs {', '.join(schedules_of(stack))})"
            + (f": {src}" if src else ""))


def schedule_refusal(stack: Stack, schedule: str) -> str | None:
    """The one line saying ``stack`` cannot run ``schedule`` (None when it can), with the registry's source."""
    if schedule in schedules_of(stack):
        return None
    return _schedule_message(stack).format(p=types.SimpleNamespace(schedule=schedule))


def plan_rules(stack: Stack) -> tuple[Rule, ...]:
    """What ``stack`` cannot run, as :class:`roofline.spec.config.Rule` entries (the rules of config.RULES'
    kind: one plan or arrays of plans): ``spec.resolve`` raises the first that fails, ``search`` restricts
    its knobs with them. Sharding names compare by ZeRO stage (zero1 = distributed, fsdp = zero3: the
    model prices a stage, config.ZERO_STAGE). Each rule's source is the stack's ``sources`` entry."""
    src = {k: v.replace("{", "{{").replace("}", "}}") for k, v in stack.sources.items()}   # literal in a template
    interleaved = bool(stack.rule("interleaved_schedule", True))
    runs = stack.rule("shardings")
    names = None if not runs else tuple(s for s in SHARDING if stage_name(s) in {stage_name(r) for r in runs})
    max_zero = stack.rule("max_zero_with_pp", 3)
    max_zero_ep = stack.rule("max_zero_with_ep", 3)
    # GQA under TP: a stack that does not say it replicates or sub-shards K/V splits the kv-heads over the TP ranks
    # (megatron/legacy/model/transformer.py, and megatron/core/transformer/attention.py before core_v0.16:
    # divide(num_query_groups, world_size); torchtitan's colwise wk/wv); config.RULES holds the looser rule of
    # the stacks that do (kv-heads a multiple or a divisor of tp)
    kv_below = bool(stack.rule("kv_heads_below_tp", False))
    # recomputation modes: Megatron's three unless the stack lists its own (torchtitan: none, op, full)
    recs = tuple(stack.rule("recomputes") or ("none", "selective", "full"))
    # pipeline schedules: 1F1B, interleaved 1F1B and GPipe unless the stack lists its own (torchtitan adds DualPipeV)
    scheds = schedules_of(stack)
    # what selective recomputation recomputes: the attention core, unless the stack has Megatron-Core's modules
    modules = bool(stack.rule("recompute_modules", False))
    # pipeline parallelism: every stack has it unless it says not (metaseq: tensor parallelism and FSDP only)
    pipelined = bool(stack.rule("pipeline", True))
    # tensor parallelism: every stack has it unless it says not (PyTorch DDP replicates the whole model)
    tensored = bool(stack.rule("tensor_parallel", True))
    # training without an fp32 master copy of the weights: only a stack that says so (torchtune's dtype bf16)
    pure = bool(stack.rule("pure_bf16", False))
    # context parallelism (ring attention over a cp group): every stack unless it says not (Megatron-LM before 2023-10)
    ring_cp = bool(stack.rule("context_parallel", True))
    # how its context parallelism splits attention: ring attention unless the stack lists its kinds (DeepSpeed: Ulysses)
    cp_kinds = tuple(stack.rule("cp_kinds") or ("ring",))
    # Megatron-style sequence parallelism (the TP all-reduce split into reduce-scatter + all-gather): every stack
    # unless it says not (Megatron-LM before 2022-04)
    seq_par = bool(stack.rule("sequence_parallelism", True))
    # Adam's moment dtypes: fp32 unless the stack has a precision-aware optimizer (Megatron-Core's)
    moments = tuple(stack.rule("moment_dtypes") or ("fp32",))
    # optimizers of the weight matrices: Adam unless the stack lists more (Megatron-Core: Muon)
    opts = tuple(stack.rule("optimizers") or ("adam",))
    # HSDP: replicated shard groups (plan dp_replicas > 1) only where the stack says it runs them
    replicas = bool(stack.rule("replicas", False))
    # full recomputation of a share of the layers (plan recompute_fraction < 1): only a stack with such a mode
    partial = bool(stack.rule("partial_recompute"))
    # training precisions: every recipe of base/precision.py unless the stack lists its own
    dtypes = stack.rule("precisions")
    return (
        Rule(lambda m, p: dtypes is None or among(p.dtype, tuple(dtypes)),
             f"stack {stack.id} cannot train in {{p.dtype}} (it runs {', '.join(dtypes or ())})"
             + (f": {src['precisions']}" if "precisions" in src else ""), ("dtype",)),
        Rule(lambda m, p: among(p.optimizer, opts),
             f"stack {stack.id} trains with {', '.join(opts)}, not {{p.optimizer!r}}"
             + (f": {src['optimizers']}" if "optimizers" in src else
                " (Muon: Megatron-Core --optimizer muon; run it with --framework megatron-core)"), ("optimizer",)),
        Rule(lambda m, p: (p.optimizer != "muon") | np.logical_not(among(p.sharding, ("fsdp", "zero3", "zero2"))),
             f"stack {stack.id} runs Muon with the (layer-wise) distributed optimizer or none, not sharding "
             "{p.sharding!r} (megatron/core/optimizer/__init__.py: 'MFSDP v2 with emerging optimizers is not currently "
             "validated')", ("optimizer", "sharding")),
        Rule(lambda m, p: among(p.moment_dtype, moments),
             f"stack {stack.id} keeps Adam's moments in {', '.join(moments)}, not {{p.moment_dtype!r}} "
             "(Megatron-Core's --use-precision-aware-optimizer --exp-avg-dtype; run it with --framework megatron-core)"
             + (f": {src['moment_dtypes']}" if "moment_dtypes" in src else ""), ("moment_dtype",)),
        Rule(lambda m, p: modules | modules_hold(p, lambda s: s == {"core_attn"}),
             f"stack {stack.id} recomputes the attention core only, not the modules {{p.recompute_modules!r}} "
             "(Megatron-Core's --recompute-modules; run it with --framework megatron-core)", ("recompute_modules",)),
        Rule(lambda m, p: (p.pp <= 1) | among(p.schedule, scheds), _schedule_message(stack), ("pp", "schedule")),
        Rule(lambda m, p: pure | np.asarray(p.master_weights, dtype=bool),
             f"stack {stack.id} keeps an fp32 master copy of the weights (pure bf16 without one: torchtune)"
             + (f": {src['pure_bf16']}" if "pure_bf16" in src else ""), ("master_weights",)),
        Rule(lambda m, p: tensored | (p.tp <= 1),
             f"stack {stack.id} has no tensor parallelism (tp {{p.tp}}): {src.get('tensor_parallel', '')}", ("tp",)),
        Rule(lambda m, p: pipelined | (p.pp <= 1),
             f"stack {stack.id} has no pipeline parallelism (pp {{p.pp}}): {src.get('pipeline', '')}", ("pp",)),
        Rule(lambda m, p: ring_cp | (p.cp <= 1),
             f"stack {stack.id} has no context parallelism (cp {{p.cp}}): {src.get('context_parallel', '')}", ("cp",)),
        Rule(lambda m, p: (p.cp <= 1) | among(p.cp_kind, cp_kinds),
             f"stack {stack.id} runs context parallelism as {', '.join(cp_kinds)}, not {{p.cp_kind}}"
             + (f": {src['cp_kinds']}" if "cp_kinds" in src else " (ring attention: Megatron-Core / Transformer "
                "Engine, torch context_parallel; DeepSpeed-Ulysses: DeepSpeed, Megatron-DeepSpeed)"), ("cp", "cp_kind")),
        Rule(lambda m, p: seq_par | np.logical_not(p.sequence_parallel),
             f"stack {stack.id} has no sequence parallelism: {src.get('sequence_parallelism', '')}",
             ("sequence_parallel",)),
        Rule(lambda m, p: among(p.recompute, recs),
             f"stack {stack.id} cannot run recompute {{p.recompute!r}} (it runs {', '.join(recs)}): "
             f"{src.get('recomputes', 'Megatron-LM --recompute-granularity selective | full, or none')}", ("recompute",)),
        Rule(lambda m, p: (p.interleave <= 1) | interleaved,
             f"stack {stack.id} has no interleaved schedule (interleave {{p.interleave}}): "
             f"{src.get('interleaved_schedule', '')}", ("interleave",)),
        Rule(lambda m, p: names is None or among(p.sharding, names),
             f"stack {stack.id} cannot run sharding {{p.sharding!r}} (it runs {', '.join(runs or ())}): "
             f"{src.get('shardings', '')}", ("sharding",)),
        Rule(lambda m, p: (p.pp <= 1) | (p.zero_stage <= max_zero),
             f"stack {stack.id} cannot run ZeRO-{{p.zero_stage}} ({{p.sharding}}) with pp {{p.pp}}: "
             f"{src.get('max_zero_with_pp', '')}", ("pp", "zero_stage")),
        Rule(lambda m, p: (p.ep <= 1) | (p.zero_stage <= max_zero_ep),
             f"stack {stack.id} cannot run ZeRO-{{p.zero_stage}} ({{p.sharding}}) with ep {{p.ep}}: "
             f"{src.get('max_zero_with_ep', '')}", ("ep", "zero_stage")),
        Rule(lambda m, p: replicas | (p.dp_replicas <= 1),
             f"stack {stack.id} keeps one sharded copy of the state over all dp x cp ranks, not {{p.dp_replicas}} "
             "replicated shard groups (HSDP: torchtitan, OLMo-core, PyTorch FSDP HYBRID_SHARD, NeMo AutoModel, "
             "llm-foundry, Megatron-Core's --num-distributed-optimizer-instances)", ("dp_replicas",)),
        Rule(lambda m, p: partial | (p.recompute_fraction >= 1),
             f"stack {stack.id} recomputes whole models only, not a share {{p.recompute_fraction:g}} of the layers "
             "(Megatron-Core --recompute-method block --recompute-num-layers, torchtitan's integer selective_ac_option, "
             "OLMo-core block_interval)", ("recompute_fraction",)),
        Rule(lambda m, p: (m is None) or kv_below or (m.kv_heads % p.tp == 0),
             f"stack {stack.id} needs kv-heads ({{m.kv_heads}}) divisible by tp ({{p.tp}}): "
             f"{src.get('kv_heads_below_tp', 'it splits the key/value heads over the TP ranks')}", ("tp",)),
    )


# ---- inference for rows and files that name no stack ------------------------------------------
def _alias_spans(text: str) -> list[tuple[int, int, Stack, str]]:
    """(start, end, stack, alias) for every id or alias found as a whole word in ``text``, names inside longer ones
    included ('megatron' in 'Megatron-LM')."""
    reg = registry()
    if _SPANS.get("registry") is not reg:          # the patterns compiled once per registry, the spans once per text
        _SPANS.clear()
        # a whole word: not inside another word; a following '-' is allowed (GPT-NeoX-20B, Megatron-LM-v2)
        _SPANS.update(registry=reg, texts={}, patterns=[
            (s, a, re.compile(rf"(?<![\w-]){re.escape(a)}(?![a-z0-9_])")) for s in reg.values() for a in (s.id, *s.aliases)])
    texts = _SPANS["texts"]
    if text not in texts:
        if len(texts) >= 4096:                     # a file of many distinct notes: bounded
            texts.clear()
        texts[text] = tuple((m.start(), m.end(), s, a) for s, a, pat in _SPANS["patterns"] for m in pat.finditer(text))
    return list(texts[text])


_SPANS: dict = {}       # _alias_spans' memo: the registry it was built for, its compiled patterns, spans per text


def _alias_hits(text: str) -> list[tuple[int, Stack, str]]:
    """(alias length, stack, alias) for every alias found as a whole word in ``text``."""
    found = _alias_spans(text)
    # a name inside a longer one of another stack is not said ('nemo' in 'NeMo AutoModel' is not Megatron-Core's NeMo)
    hits = {}
    for start, end, s, a in found:
        inside = any(s2.id != s.id and st <= start and end <= en and en - st > end - start for st, en, s2, _ in found)
        if not inside:
            hits[(s.id, a)] = (len(a), s, a)
    return list(hits.values())


def years_in(text: str) -> list[int]:
    """Years a source text mentions: 2019-2029, arXiv ids (2104.04473 -> 2021), 'SC21'/'MICRO'24'-style venues."""
    ys = [int(y) for y in re.findall(r"(?<!\d)(20[12]\d)(?!\d)", text)]
    ys += [2000 + int(y) for y in re.findall(r"arxiv[:\s]*([12]\d)[01]\d\.\d{4,5}", text)]
    ys += [2000 + int(y) for y in re.findall(r"\b(?:sc|micro|isca|osdi|sosp|nsdi|asplos|mlsys|neurips|icml)\s*'?(\d{2})\b", text)]
    return [y for y in ys if 2015 <= y <= 2030]


MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
MONTH_WORD = (r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
              r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")


def earliest_date(text: str) -> tuple:
    """(year, month or None) of the earliest year a source text mentions (years_in), with the earliest month it gives
    for that year ("2024-01-06", "2024/12", "June 2025", "Dec 2024", "arXiv:2412.19437"), or (None, None).

    >>> earliest_date("DeepSeek-V3 Technical Report, arXiv:2412.19437"), earliest_date("Narayanan et al. SC21")
    ((2024, 12), (2021, None))
    """
    t = (text or "").lower()
    ys = years_in(t)
    if not ys:
        return None, None
    y = min(ys)
    months = [int(m) for m in re.findall(rf"(?<!\d){y}[-/](0[1-9]|1[0-2])(?!\d)", t)]
    # an arXiv id's first four digits are the year and month of its submission (2412.19437: December 2024)
    months += [int(mm) for yy, mm in re.findall(r"arxiv[:\s]*([12]\d)(0[1-9]|1[0-2])\.\d{4,5}", t) if 2000 + int(yy) == y]
    months += [MONTHS.index(m[:3]) + 1 for m in re.findall(rf"\b{MONTH_WORD}\.?\s+(?:\d{{1,2}},?\s+)?{y}\b", t)]
    return y, (min(months) if months else None)


MODERN_SINCE = 2023     # the year modern_features date a run to


def modern_features(model, hw, dtype: str | None) -> list[str]:
    """Signs of a 2023+ run: Hopper or newer, bf16, GQA, RoPE, gated MLP."""
    out = []
    if hw is not None and (getattr(hw, "peak_flops", {}) or {}).get("fp8"):
        out.append(f"{hw.id} has FP8 tensor cores (Hopper or newer)")
    if dtype and dtype != "fp16" and dtype != "fp32":
        out.append(f"precision {dtype}")
    if model is not None:
        if model.kv_heads != model.n_heads:
            out.append("GQA")
        if model.position == "rope":
            out.append("RoPE")
        if model.mlp != "gelu":
            out.append(f"{model.mlp} MLP")
    return out


COMBINED = 1000      # rank of a combination both of whose names the text holds: above any single alias's length


def _as_tuple(v) -> tuple:
    return () if v is None else v if isinstance(v, tuple) else (v,)


def _named(where: str, text: str, model=None, hw=None, dtype: str | None = None,
           date_text: str | None = None) -> list[tuple[Stack, str]]:
    """Every stack ``text`` names, best first (the longest alias, then the latest era), each at the version the
    earliest date of ``date_text`` (default ``text``) picks (or its model's features when it mentions none), with
    why."""
    t = (text or "").lower()
    dt = t if date_text is None else date_text.lower()
    if not t.strip():
        return []
    out, seen = [], set()
    hits = _alias_hits(t)
    # a stack that is the combination of two the text names ("DeepSpeed and Megatron": Megatron-DeepSpeed) ran, ahead
    # of either alone (stacks/*.yaml ``combines``: every listed alias found)
    # (each name an alias the text holds or the family of a stack it names), when the text's earliest year, if any,
    # falls in that stack's era (a 2024 source naming FSDP and Megatron ran torchtitan, not 2022's metaseq)
    # A name inside a longer one counts here: "DeepSpeed + Megatron-LM" names Megatron ('megatron' in 'megatron-lm',
    # which _alias_hits drops as a name of the longer one's family)
    named = {a for _, _, _, a in _alias_spans(t)} | {h[1].family for h in hits}
    ys = years_in(dt)
    for s in registry().values():
        both = s.rule("combines")
        if both and set(both) <= named and all(h[1].id != s.id for h in hits) \
                and (not ys or s.era[0] <= min(ys) <= s.era[1]):
            hits.append((COMBINED + sum(map(len, both)), s, " and ".join(both)))   # ahead of either name alone
    # a framework built on another one the text also names (llm-foundry on PyTorch FSDP) is the one that ran; a
    # trainer that ``defers`` to the engine named beside it (Hugging Face Trainer with DeepSpeed) is not
    # (one family, or a list: Primus runs Megatron-LM and its own zero-bubble pipeline runtime)
    engines = {e for h in hits for e in _as_tuple(h[1].rule("builds_on"))}
    combined = {a for r, _, a in hits if r >= COMBINED}
    ranked = sorted(hits, key=lambda h: (h[1].family not in engines, not h[1].rule("defers"), h[0], h[1].era[1]),
                    reverse=True)
    for _, stack, alias in ranked:
        family = versions(stack.family)
        # a combination ("deepspeed and megatron") names the family, not a version: dated like a generic alias
        generic = alias == stack.family or sum(alias in s.aliases for s in family) > 1 or alias in combined
        version_note = ""
        if generic and len(family) > 1:
            ys = years_in(dt)
            # a release number after the name dates it ("NeMo Automodel 26.02": 2026, as get's NAME@YY.MM), ahead of
            # the years the text cites ("NeMo Megatron 24.11" on GPT-3 of Brown et al. 2020 ran in 2024-11): the
            # release is what ran, a year may be a reference's
            # (YY.MM: a year 2016-2029 and a month 01-12, so that a percentage after the name, "Megatron-LM 49.20",
            # is no release)
            rel = re.search(re.escape(alias) + r"\W{0,3}v?((?:1[6-9]|2\d)\.(?:0[1-9]|1[0-2]))(?![\d%])", t)
            released, pinned = None, None
            if rel and _year(rel.group(1)):
                ys, released = [_year(rel.group(1))], int(rel.group(1)[3:5])
            elif pinned := ((history.commit_month(stack.family, t, at_sign=True) if where == "framework column"
                             else None) or history.release_month(stack.family, alias, t)):
                # the commit or release that ran ("Megatron-LM (commit 285068c8)", "DeepSpeed v0.9.2") dates the
                # run, ahead of the years the text cites (MegaScale, 2024, ran Megatron-LM of 2023-01): history.py.
                # A commit counts in the framework column only: a source's notes cite commits of baselines and of
                # the documents they quote, not of what ran
                (y_pin, m_pin), _ = pinned
                ys, released = [y_pin], m_pin
            elif not ys and stack.family == "megatron-lm" and (tagged := megatron_release(t)):
                # a Megatron-LM release tag ("Megatron-LM core_r0.9.0") dates the run as a year would: MEGATRON_RELEASES
                ys, released = [tagged[0]], tagged[1]
            if ys:
                y, month = earliest_date(dt)
                if released is not None or y != min(ys):      # dated by a release number (YY.MM, a Megatron tag)
                    y, month = min(ys), released
                stack = by_year(stack.family, y, month)
                version_note = f", earliest year {y}" + (f" (month {month})" if month else "")
                if pinned:
                    version_note = f", {pinned[1]} of {y}-{month:02d} ({history.source_of(stack.family)})"
            else:
                feats = modern_features(model, hw, dtype)
                # the features date a run to 2023 or later: they pick the family's latest version only when the
                # family has a version from before 2023 (megatron-lm-2021, ddp-2022: 2019..2023-11,
                # megatron-deepspeed-2022: 2021..2023-06, whose code predates the features' period or covers only
                # its first months); a family whose every version is 2023+ (llm-foundry:
                # llm-foundry-2023 and llm-foundry) is not told apart by them and takes its earliest version, as
                # a row without them does (llm-foundry's published benchmark tables, scripts/train/benchmarking/
                # README.md, were all measured before its attention default changed, 2024-03-26: see its stack)
                older = [s for s in family if s.era[0] < MODERN_SINCE]
                newest = any(s.rule("undated_version") == "newest" for s in family)
                stack = max(family, key=lambda s: s.era[1]) if (feats and older) or newest else \
                    min(family, key=lambda s: s.era[0])
                version_note = f", no year; {'; '.join(feats) if feats else 'no 2023+ feature'}"
                if feats and not older:
                    version_note += f" (every {stack.family} version is 2023+: the earliest)"
        if stack.id not in seen:
            seen.add(stack.id)
            out.append((dataclasses.replace(stack, requested=stack.id), f"{where} names {alias!r}{version_note}"))
    return out


def alternatives(text: str = "", model=None, hw=None, dtype: str | None = None) -> list[tuple[Stack, str]]:
    """The other stacks a row's source/notes text names, after the one :func:`infer` picks: ``validate`` tries them
    in order when that one cannot run the row's stated plan (a source naming "FSDP + Megatron TP": Megatron-LM
    has no FSDP)."""
    return _named("source text", text, model, hw, dtype)[1:]


# Aliases that name a sharding technique many frameworks implement, not one framework: a framework column naming one
# with model parallelisms beside the name of a framework the registry lacks ("Meta internal (FSDP + TP + PP + CP)",
# Llama 3's 4D stack) describes that framework's parallelism, and names no stack of the registry (_technique_only)
TECHNIQUES = frozenset({"fsdp", "full_shard", "fully sharded data parallel", "fsdp2", "fully_shard", "zero-3", "zero3",
                        "zero-2", "zero2", "zero-infinity", "ddp", "distributed data parallel", "distributeddataparallel"})
# the words a column may add to techniques and still name nothing else: other parallelisms and their notation
_PARALLEL_WORDS = re.compile(r"\b(?:[tpcesd]p|hsdp|ddp|zero[- ]?\d|[2-5]d|data|tensor|pipeline|context|sequence|expert|"
                             r"parallel(?:ism)?|sharded|sharding|with|and|plus|x)\b|\d+|[-+/(),&;:]")


# parallelisms beyond data parallelism, which the technique's own stack may not run (PyTorch FSDP1: no TP, PP or CP)
_MODEL_PARALLEL = re.compile(r"\b(?:[tpce]p|tensor|pipeline|context|expert|[3-5]d)\b")


# the engines a trainer of rule ``defers`` hands the model to (stacks/ddp.yaml sources: TrainingArguments.deepspeed /
# .fsdp, accelerate's DeepSpeedPlugin / FullyShardedDataParallelPlugin, Lightning's strategy='deepspeed' / 'fsdp')
DEFERRED_TO = frozenset({"deepspeed", "pytorch-fsdp"})


def _technique_only(column: str) -> bool:
    """A framework column whose registry names are all sharding techniques (TECHNIQUES) while it also lists model
    parallelisms (TP, PP, CP, EP, "4D") and names something else: another framework's name (the column's words beyond
    the techniques and the parallelism notation). "Hugging Face Accelerate (FSDP)" keeps the FSDP stack: no model
    parallelism listed, the technique is the trainer's."""
    t = (column or "").strip().lower()
    hits = _alias_hits(t)
    if not hits or any(a not in TECHNIQUES for _, _, a in hits) or not _MODEL_PARALLEL.search(t):
        return False
    rest = t
    for a in sorted(TECHNIQUES, key=len, reverse=True):
        rest = re.sub(rf"(?<![\w-]){re.escape(a)}(?![a-z0-9_])", " ", rest)
    return bool(re.sub(r"\s+", "", _PARALLEL_WORDS.sub(" ", rest)))


_BUILT_ON = re.compile(r"\b(?:built|based)\s+(?:up)?on\b|\bon\s+top\s+of\b")


def _built_on_other(column: str) -> bool:
    """A framework column that names its own framework first and a registry stack only as what that one is built on
    ("MegaScale (ByteDance, built on Megatron-LM)"): the framework that ran is the first, outside the registry, whose
    own optimizations the base stack does not have; the base is its stand-in, not what ran. A fork named by the
    stack's own name ("Megatron-LM (BigCode fork)") is that stack.

    >>> _built_on_other("MegaScale (ByteDance, built on Megatron-LM)"), _built_on_other("Megatron-LM (BigCode fork)")
    (True, False)
    """
    t = (column or "").strip().lower()
    m = _BUILT_ON.search(t)
    if not m:
        return False
    head = re.split(r"[(,;]", t[:m.start()], maxsplit=1)[0]
    return bool(head.strip()) and not _alias_hits(head)


def names_stack(column: str) -> bool:
    """Whether a framework column names a stack of the registry (an id or alias as a whole word, not only a sharding
    technique beside another framework's name: _technique_only, nor only the stack another framework is built on:
    _built_on_other); a blank one does not. A row whose column names another framework (veScale, Alpa, Meta's
    internal stack, MegaScale) is priced on a stand-in stack."""
    return bool(_alias_hits((column or "").strip().lower())) and not _technique_only(column) \
        and not _built_on_other(column)


def trained_with(text: str) -> tuple[Stack, str] | None:
    """The stack a model's makers trained it with, when ``text`` (a row's model cell, source and notes) names such a
    model (stacks/*.yaml ``trained_models``: OPT with metaseq, BLOOM with Megatron-DeepSpeed, ...), and why; else
    None. A name counts as a whole word, a size allowed right after it ("OPT-175B", "bloom176b"), another name not
    ("StarCoder2" is not StarCoder). A text dated outside that stack's era (its earliest year) is someone else's later
    run of the model: None."""
    t = (text or "").lower()
    ys = years_in(t)
    found = [(name, s) for s in registry().values() if not ys or s.era[0] <= min(ys) <= s.era[1]
             for name in s.rule("trained_models") or ()
             if re.search(rf"(?<![\w-]){re.escape(name)}(?=$|[^a-z0-9]|\d+(?:\.\d+)?[bm]\b)", t)]
    if not found:
        return None
    name, s = max(found, key=lambda f: len(f[0]))          # the longest name: 'smollm2' over 'smollm'
    return (dataclasses.replace(s, requested=s.id),
            f"no stack named; {name!r} was trained with {s.id} ({s.sources['trained_models']})")


def infer(column: str = "", text: str = "", model=None, hw=None, dtype: str | None = None,
          model_text: str = "", date_text: str | None = None) -> tuple[Stack, str]:
    """The stack of a row or file that may name none, and why (printed per row by ``validate``).

    Order: (1) a ``framework`` column/field naming a registry id or alias (not only a sharding technique beside the
    name of a framework the registry lacks: "Meta internal (FSDP + TP + PP + CP)" names none; a trainer there that
    ``defers``, Hugging Face Trainer or Axolotl, gives way to a DeepSpeed or FSDP engine the source text names:
    DEFERRED_TO); (2) aliases found in the source/notes text, a stack that ``combines`` two the text names (DeepSpeed and Megatron: Megatron-DeepSpeed),
    a framework over the engine it ``builds_on`` (llm-foundry over PyTorch FSDP), an engine over a trainer that
    ``defers`` to the engine named beside it (Hugging Face Trainer with DeepSpeed: DeepSpeed), then the
    longest match (``Megatron-DeepSpeed`` over ``DeepSpeed``), the
    family's version picked by the earliest year the text mentions (a source cites the run's own
    date first; later years are reprints and commits), or by a release the text names after the stack's name (NeMo's
    YY.MM; Megatron-LM's tags, core_r0.9.0 or v2.6: MEGATRON_RELEASES), or by the commit or release of the family's
    repository that ran ("Megatron-LM (commit 285068c8)", "DeepSpeed v0.9.2": history.py, the months of every commit
    and release tag of the dated families' repositories), ahead of the years the text cites, or without either by the signs of (3) when the family has a
    version that began before 2023 (else its earliest version: llm-foundry's two are both 2023+); (3) era rules:
    Hopper-or-newer hardware, bf16, GQA, RoPE or a gated MLP imply a current stack (Megatron-Core; torchtitan for a recipe Megatron-Core has not, torchao's row-wise FP8); otherwise the
    Megatron-LM stack of the earliest year the source text mentions (the 2020-2021 one when it mentions none), with
    that reason printed. Before the era rules, a model its makers trained with one stack (``model_text``, the model
    cell, or the source text naming it: OPT, BLOOM, GPT-NeoX-20B, Pythia, MPT, OLMo 1; stacks/*.yaml
    ``trained_models``) is priced on that stack.
    """
    # a framework column without a date is dated by the source text (a "torchtitan" column on a 2024-12 benchmark);
    # ``date_text``, where given, dates instead of the whole text (validate: a row's source cell, whose date is the
    # run's, where its notes cite older papers for the architecture)
    when = text if date_text is None else date_text
    for where, t, dates in (("framework column", column, column if years_in((column or "").lower()) else when),
                            ("source text", text, when)):
        # a column naming only a sharding technique beside another framework's name names no stack (_technique_only)
        named = [] if where == "framework column" and (_technique_only(t) or _built_on_other(t)) \
            else _named(where, t, model, hw, dtype, dates)
        if named:
            stack, why = named[0]
            if where == "source text" and (column or "").strip():
                why = f"framework column {column.strip()!r} names no stack of the registry; {why}"
            if where == "framework column" and stack.rule("defers"):
                # a trainer in the column (Hugging Face Trainer, Axolotl) and the engine it hands the model to in the
                # source text (a DeepSpeed or FSDP config): the engine ran, as when both are in one field (_named)
                engine = next(((s, w) for s, w in _named("source text", text, model, hw, dtype, text)
                               if s.family in DEFERRED_TO), None)
                if engine:
                    return engine[0], f"framework column names the trainer {stack.id}, which defers; {engine[1]}"
            return stack, why
    made = None if (column or "").strip() else trained_with(f"{model_text} {text}")
    if made:        # a framework the column names but the registry lacks ran it, not the makers' stack
        return made
    stack, why = era_rule(when, model, hw, dtype)
    if (column or "").strip():      # a framework the registry does not hold (veScale, Alpa): say so, not silently
        why = f"framework column {column.strip()!r} names no stack of the registry (roofline frameworks list); {why}"
    return stack, why


def era_rule(text: str, model, hw, dtype: str | None) -> tuple[Stack, str]:
    """The era rule of :func:`infer` (step 3): the stack of a row that names none (``validate`` also reads it for a
    row of a framework the registry lacks whose text names a stack that cannot run the row: the era stack's
    :func:`stand_ins`)."""
    feats = modern_features(model, hw, dtype)
    if feats:
        core = registry()["megatron-core"]
        runs = core.rule("precisions")
        if dtype and runs and dtype not in runs:
            # a recipe Transformer Engine has not (torchao's row-wise FP8): the PyTorch-native trainer that runs it
            return registry()["torchtitan"], (f"era rule: {', '.join(feats)}, and {dtype} is no recipe of megatron-core "
                                              f"({core.sources.get('precisions', '')}) -> torchtitan")
        return core, "era rule: " + ", ".join(feats) + " -> megatron-core"
    ys = years_in((text or "").lower())
    if ys:          # the Megatron-LM of the source's own date (Korthikanti et al. arXiv:2205.05198 -> the 2022 code)
        stack = by_year("megatron-lm", min(ys))
        return stack, (f"era rule: no stack named, Ampere-or-older fp16/gelu/MHA run, earliest year {min(ys)} in the "
                       f"source -> {stack.id}")
    return registry()["megatron-lm-2021"], "era rule: no stack named, Ampere-or-older fp16/gelu/MHA run -> megatron-lm-2021"
