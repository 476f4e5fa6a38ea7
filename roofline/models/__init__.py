"""Architecture presets (YAML in ``presets/``) and their loader."""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import yaml

from ..config import Model
from ..errors import InputError

PRESETS = Path(__file__).with_name("presets")
_FIELDS = {f.name for f in dataclasses.fields(Model)}


def list_ids() -> list[str]:
    return sorted(p.stem for p in PRESETS.glob("*.yaml"))


@functools.lru_cache(maxsize=64)
def raw(ref: str) -> dict:
    p = Path(ref)
    path = p if p.suffix in (".yaml", ".yml") and p.exists() else PRESETS / f"{ref}.yaml"
    if not path.exists():
        raise InputError(f"unknown model {ref!r}; known: {', '.join(list_ids())} (or a path to a .yaml)")
    try:
        d = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        raise InputError(f"model preset {path}: malformed YAML") from None
    if not isinstance(d, dict):
        raise InputError(f"model preset {path}: expected a mapping")
    return d


def from_dict(d: dict, where: str = "model") -> Model:
    kw = {}
    for k, v in d.items():
        if k in ("id", "source", "notes", "family"):
            continue
        key = {"name": "name", "capacity": "capacity_factor", "tied": "tied_embeddings"}.get(k, k)
        if key not in _FIELDS:
            raise InputError(f"{where}: unknown key {k!r} (known: {', '.join(sorted(_FIELDS))})")
        kw[key] = v
    kw.setdefault("name", d.get("id", d.get("name", "custom")))
    if "position" in kw and "dropout" not in kw:
        kw["dropout"] = False
    return Model(**kw)


def load(ref: str) -> Model:
    return from_dict(raw(ref), f"model {ref}")
