"""Config files: one YAML that names a model, a parallel plan, hardware, a framework and a run.

```yaml
model: llama2-7b                 # a preset id, a preset path, or a mapping of Model fields
plan: {tp: 2, pp: 4, dp: 2, micro_batch: 4, global_batch: 64, recompute: full, dtype: fp16}
hardware: a100-sxm4-80gb         # a profile id or a path (relative to this file)
gpus_per_node: 4                 # optional overrides of the profile
net_gbps: 200
framework: megatron-core         # optional: defaults for the switches the config leaves unset
training: {tokens: 2e12, gpu_hour_price: 2.0}   # optional: the whole run
```

A ``model`` mapping may start from a preset (``preset: llama2-7b``) and override fields. The plan
also accepts ``micro_batches`` (per step, upstream's ``steps_per_update``) instead of
``global_batch``. Every key is checked: an unknown or missing key is an :class:`InputError` naming
the key and the file. See docs/configs.md.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import yaml

from .config import MODEL_ALIASES, Model, Plan
from ..base.errors import InputError
from ..base.schema import yaml_load
from ..base.paths import EXAMPLES

TOP_KEYS = ("model", "plan", "hardware", "gpus_per_node", "net_gbps", "framework", "training", "description")
REQUIRED = ("model", "hardware")
PLAN_FIELDS = {f.name for f in dataclasses.fields(Plan)}
MODEL_FIELDS = {f.name for f in dataclasses.fields(Model)}
TRAINING_KEYS = ("tokens", "steps", "gpu_hour_price")
_NUMERIC = {"int": int, "float": float}


# ---- bundled examples -------------------------------------------------------------------------
def list_examples() -> list[str]:
    """Names of the bundled example configs (``roofline/examples/*.yaml``)."""
    return sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


def example_path(name: str) -> Path:
    """Path of a bundled example; InputError listing the known names when there is none."""
    p = EXAMPLES / f"{name}.yaml"
    if not p.exists():
        raise InputError(f"unknown example {name!r}; known: {', '.join(list_examples())}")
    return p


def describe(name: str) -> str:
    """The example's ``description`` line ('' when it has none)."""
    d = _read(example_path(name))
    return str(d.get("description", "")).strip()


# ---- loading ----------------------------------------------------------------------------------
def _read(path: Path) -> dict:
    from ..base.schema import read_text
    text = read_text(path, "config")
    try:
        d = yaml_load(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise InputError(f"config {path}: malformed YAML" + (f" near line {line + 1}" if line is not None else "")) from None
    if not isinstance(d, dict):
        raise InputError(f"config {path}: expected a mapping with keys {', '.join(TOP_KEYS)}")
    return d


def _number(value, where: str, kind=float):
    """YAML reads 2e12 as a string; accept numbers written either way."""
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: expected a number, got {value!r}") from None
    if not math.isfinite(v):
        raise InputError(f"{where}: expected a finite number, got {value!r}")
    if kind is int:
        if v != int(v):
            raise InputError(f"{where}: expected an integer, got {value!r}")
        return int(v)
    return v


def _field_types(cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        t = str(f.type)
        out[f.name] = int if t.startswith("int") else float if t.startswith("float") else None
    return out


def _model(spec, where: str, base_dir: Path) -> tuple[Model, set]:
    from . import models

    if isinstance(spec, str):
        ref = spec
        if spec.endswith((".yaml", ".yml")) and not Path(spec).is_absolute():
            ref = str(base_dir / spec)
        return models.load(ref), set()
    if not isinstance(spec, dict):
        raise InputError(f"{where}: 'model' must be a preset id, a preset path or a mapping of model fields")
    spec = dict(spec)
    preset = spec.pop("preset", None)
    types = _field_types(Model)
    for k, v in list(spec.items()):
        key = MODEL_ALIASES.get(k, k)
        if key not in MODEL_FIELDS:
            raise InputError(f"{where}: unknown key 'model.{k}' (known: preset, {', '.join(sorted(MODEL_FIELDS))})")
        if types.get(key) and v is not None:
            spec[k] = _number(v, f"{where}: model.{k}", types[key])
    if preset is not None:
        m = _model(preset, where, base_dir)[0]
        m = models.from_dict({**{f: getattr(m, f) for f in MODEL_FIELDS}, **spec}, f"{where}: model")
    else:
        m = models.from_dict(spec, f"{where}: model")
    explicit = {MODEL_ALIASES.get(k, k) for k in spec}
    return m, explicit


def _plan(spec, where: str) -> tuple[Plan, set]:
    if spec is None:
        return Plan(), set()
    if not isinstance(spec, dict):
        raise InputError(f"{where}: 'plan' must be a mapping of plan fields")
    spec = dict(spec)
    types = _field_types(Plan)
    mbs = spec.pop("micro_batches", None)
    for k, v in list(spec.items()):
        if k not in PLAN_FIELDS:
            raise InputError(f"{where}: unknown key 'plan.{k}' (known: micro_batches, {', '.join(sorted(PLAN_FIELDS))})")
        if types.get(k) and v is not None:
            spec[k] = _number(v, f"{where}: plan.{k}", types[k])
        elif k == "graph_modules" and v is not None:          # a YAML list or a comma-separated string
            from ..base.normalize import graph_modules
            spec[k] = graph_modules(v)
        elif k == "recompute_modules" and v is not None:      # a YAML list or a comma-separated string
            from ..base.normalize import recompute_modules
            spec[k] = recompute_modules(v) or ""
    if mbs is not None:
        mbs = _number(mbs, f"{where}: plan.micro_batches", int)
        gb = spec.get("micro_batch", 1) * spec.get("dp", 1) * mbs
        if spec.get("global_batch") not in (None, gb):
            raise InputError(f"{where}: plan.global_batch ({spec['global_batch']}) != micro_batch x dp x micro_batches ({gb})")
        spec["global_batch"] = gb
    try:
        plan = Plan(**spec)
    except TypeError as exc:
        raise InputError(f"{where}: plan: {exc}") from None
    return plan, set(spec)


def _hardware(d: dict, where: str, base_dir: Path):
    from . import hardware

    ref = d["hardware"]
    if isinstance(ref, dict):
        raise InputError(f"{where}: 'hardware' must be a profile id or a path; put gpus_per_node and net_gbps at top level")
    ref = str(ref)
    if ref.endswith((".yaml", ".yml")) and not Path(ref).is_absolute():
        ref = str(base_dir / ref)
    hw = hardware.load(ref)
    if d.get("gpus_per_node") is not None:
        hw = dataclasses.replace(hw, gpus_per_node=_number(d["gpus_per_node"], f"{where}: gpus_per_node", int))
    if d.get("net_gbps") is not None:
        hw = hw.with_network(_number(d["net_gbps"], f"{where}: net_gbps"))
    return hw, ref


def load_config(path) -> dict:
    """Read and check a config file.

    Returns ``{"model": Model, "plan": Plan, "hardware": Hardware (overrides applied), "gpu": the
    profile id or path, "framework": name or None, "training": {tokens, steps, gpu_hour_price},
    "model_set": Model fields the file set, "plan_set": Plan fields the file set, "path": str}``.
    Framework defaults are NOT applied here (see :func:`resolve`).
    """
    path = Path(path)
    d = _read(path)
    return _from_mapping(d, str(path), path.parent)


def _from_mapping(d: dict, where: str, base_dir: Path) -> dict:
    for k in d:
        if k not in TOP_KEYS:
            raise InputError(f"config {where}: unknown key {k!r} (known: {', '.join(TOP_KEYS)})")
    for k in REQUIRED:
        if d.get(k) is None:
            raise InputError(f"config {where}: missing key {k!r}")
    where = f"config {where}"
    model, model_set = _model(d["model"], where, base_dir)
    plan, plan_set = _plan(d.get("plan"), where)
    hw, ref = _hardware(d, where, base_dir)
    fw = d.get("framework")
    if fw is not None:
        from .stacks import get
        get(str(fw))
        fw = str(fw)
    training = d.get("training") or {}
    if not isinstance(training, dict):
        raise InputError(f"{where}: 'training' must be a mapping with keys {', '.join(TRAINING_KEYS)}")
    for k in training:
        if k not in TRAINING_KEYS:
            raise InputError(f"{where}: unknown key 'training.{k}' (known: {', '.join(TRAINING_KEYS)})")
    training = {k: _number(v, f"{where}: training.{k}") for k, v in training.items() if v is not None}
    return {"model": model, "plan": plan, "hardware": hw, "gpu": ref, "framework": fw, "training": training,
            "model_set": model_set, "plan_set": plan_set, "path": where.removeprefix("config ")}


# ---- prediction -------------------------------------------------------------------------------
def _as_config(config_or_path) -> dict:
    if isinstance(config_or_path, dict) and "plan_set" in config_or_path:
        return config_or_path                       # already loaded
    if isinstance(config_or_path, dict):
        return _from_mapping(config_or_path, "<mapping>", Path.cwd())
    p = Path(str(config_or_path))
    if not p.exists() and p.suffix not in (".yaml", ".yml") and (EXAMPLES / f"{p}.yaml").exists():
        p = EXAMPLES / f"{p}.yaml"                  # a bundled example's name
    return load_config(p)


def resolve(config_or_path) -> tuple:
    """(Model, Plan, Hardware, training) with the framework's defaults applied to the fields the
    config did not set, exactly as ``python -m roofline transformer --config`` does."""
    s = resolve_spec(config_or_path)
    return s.model, s.plan, s.hardware, dict(_as_config(config_or_path).get("training") or {})


def resolve_spec(config_or_path):
    """The config's Spec through the one resolver (roofline.spec.resolve.resolve): preset < the stack's
    defaults and rules < the config's fields. The stack is the config's ``framework`` or, when it
    names none, the default stack (Megatron-Core)."""
    from .resolve import resolve as resolve_run

    cfg = _as_config(config_or_path)
    model = cfg["model"]
    stated_model = {k: getattr(model, k) for k in cfg.get("model_set", ())}
    stated_plan = {k: getattr(cfg["plan"], k) for k in cfg.get("plan_set", ())}
    return resolve_run(model, stated_plan, cfg["hardware"], cfg.get("framework"), model_fields=stated_model,
                       stack_reason="the config's framework" if cfg.get("framework") else "")
