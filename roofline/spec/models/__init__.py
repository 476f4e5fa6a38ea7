"""Architecture presets (YAML in ``presets/``) and their loader.

Every preset (bundled or a user's file, and the ``model:`` mapping of a config) is checked against one
schema derived from :class:`roofline.spec.config.Model`: integer fields are finite integers >= 1, the capacity
factor a finite number > 0, flags YAML booleans, the kinds one of their known names; an unknown key names
the nearest known one.
"""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from ...base import schema as S
from ..config import ATTENTION, MLPS, NORMS, POSITIONS, Model
from ..config import MODEL_ALIASES as ALIASES
from ...base.errors import InputError

from ...base.paths import MODEL_PRESETS as PRESETS, model_preset_ids
_FIELDS = {f.name for f in dataclasses.fields(Model)}
CHOICES = {"mlp": MLPS, "norm": NORMS, "attention": ATTENTION, "position": POSITIONS}
INFO_KEYS = ("id", "source", "notes", "family")     # descriptive keys of a preset file, not model fields
PLAN_KEYS = ("pipeline_layouts",)    # a preset's sourced plan defaults (pipeline_layout), read by pipeline_layout()


def _kinds() -> dict:
    """field -> int | float | bool | str, and whether None is allowed (``int | None``)."""
    out = {}
    for f in dataclasses.fields(Model):
        t = str(f.type)
        base = t.split("|")[0].strip()
        out[f.name] = ({"int": int, "float": float, "bool": bool}.get(base, str), "None" in t)
    return out


KINDS = _kinds()


def check_value(key: str, v, where: str):
    """One Model field's value, type- and range-checked; returns it normalised (2.0 -> 2 for integers)."""
    kind, optional = KINDS[key]
    w = f"{where}: {key}"
    if v is None:
        if optional:
            return None
        raise InputError(f"{w}: a value is required, got null")
    if key in CHOICES:
        return S.choice(v, CHOICES[key], w)
    if kind is bool:
        return S.boolean(v, w)
    if kind is int:
        return S.number(v, w, int, low=1)
    if kind is float:
        return S.number(v, w, float, low=0.0, low_open=True)
    if isinstance(v, (dict, list)):
        raise InputError(f"{w}: expected a string, got {v!r}")
    return str(v)


def list_ids() -> list[str]:
    return model_preset_ids()


def suggest(ref: str) -> str | None:
    """The preset a mistyped or spelled-out model name most likely means ("llama3-405b", "Llama 3 405B" ->
    llama3.1-405b; "qwen3-30b" -> qwen3-30b-a3b): the family table's reading of the name, else the closest id."""
    import difflib

    from ..families import preset_for
    hit = preset_for(str(ref))
    if hit:
        return hit
    key = str(ref).lower()
    longer = [i for i in list_ids() if i.startswith(key + "-")]     # the id with its suffix left off (qwen3-30b-a3b)
    if len(longer) == 1:
        return longer[0]
    close = difflib.get_close_matches(key, list_ids(), n=1, cutoff=0.75)
    return close[0] if close else None


def raw(ref) -> dict:
    """A preset's YAML as a dict (a copy), by id or path."""
    return dict(_raw(S.ref(ref, "model: expected a preset id")))


@functools.lru_cache(maxsize=64)
def _raw(ref: str) -> dict:
    p = Path(ref)
    path = p if p.suffix in (".yaml", ".yml") and p.exists() else PRESETS / f"{ref}.yaml"
    if not path.exists():
        hint = suggest(ref)
        raise InputError(f"unknown model {ref!r}" + (f" (did you mean {hint}?)" if hint else "")
                         + f"; known: {', '.join(list_ids())} (or a path to a .yaml)")
    d = S.load_yaml(path, "model preset")
    if not isinstance(d, dict):
        raise InputError(f"model preset {path}: expected a mapping, got {type(d).__name__}")
    return d


def from_dict(d: dict, where: str = "model") -> Model:
    if not isinstance(d, dict):
        raise InputError(f"{where}: expected a mapping of model fields, got {d!r}")
    kw = {}
    for k, v in d.items():
        if k in INFO_KEYS or k in PLAN_KEYS:
            continue
        key = ALIASES.get(k, k)
        if key not in _FIELDS:
            S.check_keys({k: v}, sorted(_FIELDS) + list(ALIASES), where)
        if key in kw:
            raise InputError(f"{where}: {key} given twice ({k!r} and its alias)")
        kw[key] = check_value(key, v, where)
    kw.setdefault("name", str(d.get("id", d.get("name", "custom"))))
    if "position" in kw and "dropout" not in kw:
        kw["dropout"] = False
    # GShard capacity = c T k / E slots per expert (Lepikhin et al. 2020): c > E / k gives an expert more slots
    # than there are tokens, which no router fills
    e, k = kw.get("n_experts", Model.n_experts), kw.get("top_k", Model.top_k)
    c = kw.get("capacity_factor", Model.capacity_factor)
    if e > 1 and c > e / k:
        raise InputError(f"{where}: capacity_factor must be at most n_experts / top_k ({e} / {k}), got {c:g}")
    return Model(**kw)


def load(ref) -> Model:
    return from_dict(raw(ref), f"model {ref}")


def pipeline_layout(ref, pp: int, interleave: int, mtp: int) -> tuple[str, str] | None:
    """(layout, source) of a preset's recipe layout for (pp, interleave) (its ``pipeline_layouts`` map, keys
    "PPxVP"), with the one 'm' standing for the model's ``mtp`` MTP layers (the recipes' last stage is
    ["mtp"] * mtp_num_layers + ["loss"]); None when the preset has none for that pair."""
    table = _raw(S.ref(ref, "model: expected a preset id")).get("pipeline_layouts") or {}
    text = table.get(f"{int(pp)}x{int(interleave or 1)}")
    if text is None:
        return None
    return text.replace("m", "m" * int(mtp or 0)), str(table.get("source", ""))
