"""The one pint registry of the project (with ``flop`` and ``byte``), created once and cached.

A small definitions file (``units.txt``) keeps start-up fast: pint's full default registry takes
about 0.4 s to build, this one a few milliseconds.

>>> q = Q("312 TFLOP/s")
>>> q.to("flop/s").magnitude
312000000000000.0
>>> Q("200 Gb/s").to("GB/s").magnitude
25.0
"""
from __future__ import annotations

import functools
from pathlib import Path

import pint

from .errors import InputError


@functools.lru_cache(maxsize=1)
def registry() -> pint.UnitRegistry:
    ureg = pint.UnitRegistry(str(Path(__file__).with_name("units.txt")))
    ureg.formatter.default_format = "~P"
    return ureg


def Q(value, unit: str | None = None) -> pint.Quantity:
    """A quantity from ``Q("8 us")`` or ``Q(8, "us")``."""
    ureg = registry()
    return ureg.Quantity(value) if unit is None else ureg.Quantity(value, unit)


def parse(text, expect: str, what: str) -> float:
    """Parse ``text`` (e.g. ``"2039 GB/s"``) and return its magnitude in the SI unit ``expect``.

    Raises InputError with a one-line message naming ``what`` when the unit is missing or has
    the wrong dimension.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        raise InputError(f"{what}: expected a quantity with a unit like '{expect}', got a bare number {text!r}")
    try:
        q = Q(str(text))
        return float(q.to(expect).magnitude)
    except (pint.errors.DimensionalityError, pint.errors.UndefinedUnitError, pint.errors.DefinitionSyntaxError,
            AttributeError, TypeError, ValueError, AssertionError) as exc:
        raise InputError(f"{what}: cannot read {text!r} as a quantity in {expect} ({type(exc).__name__})") from None


def count_text(n: float, unit: str = "params") -> str:
    """A count with the SI prefix that keeps it readable: thousands (K), millions (M), billions (B), trillions (T).

    >>> count_text(1.8e6), count_text(6.74e9), count_text(1.008e12), count_text(512)
    ('1.80 M params', '6.74 B params', '1.01 T params', '512 params')
    """
    for scale, p in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {p} {unit}"
    return f"{n:.0f} {unit}"


# ---- the conversions and formats every report uses (one place; SI floats inside, these at the edge) -------------
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0      # seconds
GiB = float(2 ** 30)                           # bytes (memory is reported in binary units, as allocators count)
KILO, MEGA, GIGA, TERA = 1e3, 1e6, 1e9, 1e12   # SI prefixes: TFLOP/s = FLOP/s / TERA, GB/s, M params, MWh = kWh / KILO


def fmt_time(s: float) -> str:
    """A duration in seconds as text: ``18.030 s``, ``412.50 ms``, ``35.2 us``.

    >>> fmt_time(18.03), fmt_time(0.4125), fmt_time(3.52e-5)
    ('18.030 s', '412.50 ms', '35.2 us')
    """
    if s >= 1:
        return f"{s:.3f} s"
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def fmt_bytes(b: float, digits: int = 2) -> str:
    """Bytes as GiB text: ``fmt_bytes(3 * 2**30) == '3.00 GiB'``."""
    return f"{b / GiB:.{digits}f} GiB"
