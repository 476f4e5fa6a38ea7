"""Small shared validators for every input file and API value: one-line :class:`InputError` messages
that name the field, the constraint and the value given.

Why hand-written and not pydantic/msgspec: the CLI's start-up budget is 0.5 s and ``python -m roofline
transformer`` already spends ~0.55 s (pint ~0.2 s of it, measured with ``python -X importtime``); pydantic v2
adds ~0.13 s to import and build its first model (measured on the development VM, Python 3.11, pydantic 2.13),
msgspec and cattrs are not dependencies. These helpers import nothing beyond the standard library.

>>> number(3, "plan.tp", int, low=1)
3
>>> number("3", "plan.tp", int, low=1)
Traceback (most recent call last):
...
roofline.base.errors.InputError: plan.tp: expected a number, got '3'
>>> check_keys({"hbm_capacty": 1}, ("hbm_capacity", "hbm_bandwidth"), "profile x.yaml")
Traceback (most recent call last):
...
roofline.base.errors.InputError: profile x.yaml: unknown key 'hbm_capacty' (did you mean 'hbm_capacity'?)
>>> strict_json({"a": float("nan"), "b": [1.0, float("inf")]})
'{"a": null, "b": [1.0, null], "null_reasons": {"a": "not a finite number (nan)", "b[1]": "not a finite number (inf)"}}'
"""
from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path

from .errors import InputError


# ---- files -----------------------------------------------------------------------------------
def read_text(path, what: str) -> str:
    """The UTF-8 text of ``path``; a missing/unreadable file or non-UTF-8 bytes is a one-line InputError
    naming the line and byte offset of the first bad byte."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise InputError(f"{what} {path}: is a folder, expected a file") from None
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None
    if data.startswith((b"PK\x03\x04", b"\xd0\xcf\x11\xe0")):      # zip (xlsx, ods) / OLE2 (xls) containers
        raise InputError(f"{what} {path}: a spreadsheet workbook (xlsx/xls), not text: save the sheet as CSV "
                         "(or tab-separated) and pass that")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{what} {path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, "
                         f"offset {exc.start})") from None


def yaml_load(text: str):
    """``yaml.safe_load`` through libyaml's parser when PyYAML has it (CSafeLoader: the same safe constructors,
    the parsing in C, ~10x faster: profiles, presets and stacks load on every command), else the Python one."""
    import yaml
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_yaml(path, what: str):
    """Parsed YAML of ``path`` (safe loader); malformed YAML names the line."""
    import yaml

    text = read_text(path, what)
    try:
        return yaml_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" near line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        raise InputError(f"{what} {path}: malformed YAML{line}" + (f" ({problem})" if problem else "")) from None


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path in ``path``'s folder; move it onto ``path`` only when the block succeeds.

    A failure inside the block (or an interrupted process) leaves no partial ``path`` behind.
    """
    import tempfile     # lazy: ~6 ms of start-up the prediction path does not need

    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp" + path.suffix, dir=path.parent)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def check_output(path, flag: str) -> None:
    """InputError unless ``path`` can be written: its folder exists and is writable and it is not a folder.
    Call it for every output flag before any work or printing, so that a bad path fails first."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InputError(f"{flag} {path}: is a folder, expected a file name")
    if not parent.is_dir():
        raise InputError(f"{flag} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{flag} {path}: folder {parent} is not writable")


def write_text_atomic(path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder (os.replace at the end)."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text)


# ---- values ----------------------------------------------------------------------------------
def ref(value, what: str) -> str:
    """A bundled entry's id or a path to a .yaml (``os.PathLike`` allowed) as text; InputError when it is neither
    (``what``: "hardware profile: expected a profile id")."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{what} or a path to a .yaml, got {value!r}")
    return value


def _fmt(v) -> str:
    return repr(v) if not isinstance(v, float) else f"{v:g}"


def number(value, where: str, kind=float, low: float | None = None, high: float | None = None,
           low_open: bool = False, high_open: bool = False):
    """A finite int/float (not bool, not a string) within [low, high] (ends open when asked).

    ``kind=int`` also requires an integral value (``2.0`` is taken as 2, ``2.5`` is refused).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:                                         # numpy scalars
            import numbers
            ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        except Exception:   # pragma: no cover
            ok = False
        if not ok:
            raise InputError(f"{where}: expected a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise InputError(f"{where}: expected a finite number, got {_fmt(v)}")
    if kind is int:
        if v != int(v):
            raise InputError(f"{where}: expected an integer, got {_fmt(value)}")
        v = int(v)
    if low is not None and (v < low or (low_open and v == low)):
        raise InputError(f"{where}: must be {'>' if low_open else '>='} {low:g}, got {_fmt(value)}")
    if high is not None and (v > high or (high_open and v == high)):
        raise InputError(f"{where}: must be {'<' if high_open else '<='} {high:g}, got {_fmt(value)}")
    return v


def positive(value, where: str, kind=float):
    """A finite number > 0 (integers >= 1)."""
    return number(value, where, kind, low=1 if kind is int else 0.0, low_open=kind is not int)


def fraction(value, where: str):
    """An efficiency in (0, 1]."""
    return number(value, where, float, low=0.0, high=1.0, low_open=True)


def boolean(value, where: str) -> bool:
    """A YAML/JSON boolean (true/false); strings such as 'maybe' or 'no' and numbers are refused."""
    if not isinstance(value, bool):
        raise InputError(f"{where}: expected true or false, got {value!r}")
    return value


def text(value, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where}: expected a string, got {value!r}")
    return value


def choice(value, options, where: str):
    if not isinstance(value, str) or value not in options:
        import difflib
        near = difflib.get_close_matches(str(value), list(options), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise InputError(f"{where}: must be one of {', '.join(options)}, got {value!r}{hint}")
    return value


def mapping(value, where: str, what: str = "a mapping") -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected {what}, got {value!r}")
    return value


def check_keys(d: dict, known, where: str) -> None:
    """Unknown keys of ``d`` are an error naming the nearest known key (difflib)."""
    known = list(known)
    for k in d:
        if k not in known:
            import difflib
            near = difflib.get_close_matches(str(k), [str(x) for x in known], n=1, cutoff=0.6)
            hint = f"did you mean {near[0]!r}?" if near else f"known: {', '.join(map(str, known))}"
            raise InputError(f"{where}: unknown key {k!r} ({hint})")


def quantity(value, unit: str, where: str, low: float | None = 0.0, low_open: bool = True,
             high: float | None = None) -> float:
    """A quantity with a unit (``"2039 GB/s"``) in the SI unit ``unit``, finite and within range
    (default: > 0)."""
    from .units import parse

    if value is None:
        raise InputError(f"{where}: missing value (expected a quantity in {unit})")
    v = parse(value, unit, where)
    if not math.isfinite(v):
        raise InputError(f"{where}: expected a finite quantity in {unit}, got {value!r}")
    if low is not None and (v < low or (low_open and v == low)):
        raise InputError(f"{where}: must be {'>' if low_open else '>='} {low:g} {unit}, got {value!r}")
    if high is not None and v > high:
        raise InputError(f"{where}: must be <= {high:g} {unit}, got {value!r}")
    return v


# ---- strict JSON -----------------------------------------------------------------------------
def finite_or_null(obj, reasons: dict | None = None, path: str = ""):
    """A copy of ``obj`` (dicts, lists, tuples, numbers, numpy scalars) whose non-finite floats are None;
    ``reasons`` (path -> why) collects what was replaced."""
    if isinstance(obj, dict):
        return {k: finite_or_null(v, reasons, f"{path}.{k}" if path else str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_null(v, reasons, f"{path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, bool) or obj is None or isinstance(obj, (str, int)):
        return obj
    try:
        f = float(obj)
    except (TypeError, ValueError):
        return obj
    if not math.isfinite(f):
        if reasons is not None:
            reasons[path] = f"not a finite number ({f})"
        return None
    return f if not hasattr(obj, "item") else obj.item()


def strict_json(obj, **kw) -> str:
    """JSON text with no NaN/Infinity: each non-finite number becomes null and its path is listed under
    ``null_reasons`` (top-level dicts only). ``json.dumps(..., allow_nan=False)`` guards the result."""
    reasons: dict = {}
    clean = finite_or_null(obj, reasons)
    if reasons and isinstance(clean, dict):
        clean = {**clean, "null_reasons": {**(clean.get("null_reasons") or {}), **reasons}}
    return json.dumps(clean, allow_nan=False, **kw)
