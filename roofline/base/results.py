"""One shape of result for every view: a frozen dataclass of SI floats, with a unit for each quantity.

Inside, a result holds plain floats in SI units (seconds, bytes, FLOP, 1/s) or counts, fractions and
labels; nested tables are read-only mappings (:func:`freeze`). The class names the unit of each
dimensioned field in ``UNITS`` (pint spellings of roofline/base/units.txt); a dotted name reaches into a
nested mapping or into every row of a sequence (``"flop.total"``, ``"cases.predicted_s"``), a unit
given for a mapping applies to all of its values, and a nested result (or a tuple of results) brings its own
units under its key. A field that ``UNITS`` does not name is a count, a
fraction or a label. At the API surface:

* ``si()``: the fields as plain JSON-ready values (mappings -> dicts, tuples -> lists), in field order;
* ``units()``: the ``{name: unit}`` map;
* ``to_dict()``: ``si()`` plus ``"units": units()`` (what ``--json`` prints);
* ``quantity(name)``: one value as a pint Quantity (a sequence's values as one array Quantity, a table's
  as ``{key: Quantity}``).

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Run(Result):
...     UNITS = {"seconds": "s", "sent": "B"}
...     seconds: float
...     sent: object
>>> r = Run(7200.0, freeze({"tp": 2.0 ** 30, "dp": 0.0}))
>>> r.quantity("seconds").to("hour")
<Quantity(2.0, 'hour')>
>>> r.quantity("sent.tp").to("GiB").magnitude
1.0
>>> r.to_dict()
{'seconds': 7200.0, 'sent': {'tp': 1073741824.0, 'dp': 0.0}, 'units': {'seconds': 's', 'sent': 'B'}}
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

from .errors import InputError


def freeze(x):
    """``x`` with every dict made a read-only mapping and every list a tuple (deeply)."""
    if isinstance(x, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return tuple(freeze(v) for v in x)
    return x


def plain(x):
    """JSON-ready copy of ``x``: results -> their ``si()``, dataclasses and mappings -> dicts, tuples -> lists."""
    if isinstance(x, Result):
        return x.si()
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, Mapping):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


class Result:
    """Mixin for a frozen dataclass result: ``UNITS`` = {field or dotted path: unit}; see the module docstring."""
    UNITS: Mapping = MappingProxyType({})

    def items_by_key(self) -> dict:
        """The stored (frozen) values by the keys ``si()`` prints; a subclass whose keys differ from its fields
        (computed keys, optional ones) overrides this."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def si(self) -> dict:
        return plain(self.items_by_key())

    def units(self) -> dict:
        """``UNITS``, and the units of every nested result under its key (``best_plan.step_time_s``)."""
        out = dict(self.UNITS)
        for k, v in self.items_by_key().items():
            rows = v if isinstance(v, tuple) and v and all(isinstance(r, Result) for r in v) else (v,)
            if isinstance(rows[0], Result):       # a nested result, or rows of results (their units: the first's)
                out.update({f"{k}.{n}": u for n, u in rows[0].units().items()})
        return out

    def to_dict(self) -> dict:
        return {**self.si(), "units": self.units()}

    def unit(self, name: str) -> str:
        """The unit of ``name``: its own entry, else the entry of the nearest enclosing path."""
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            u = self.units().get(".".join(parts[:n]))
            if u is not None:
                return u
        raise InputError(f"{type(self).__name__}.quantity: {name!r} has no unit; names with units: "
                         f"{', '.join(self.UNITS) or 'none'}")

    def quantity(self, name: str):
        """``name`` (a field or a dotted path) as a pint Quantity in its unit."""
        return self._quantity(_get(self.items_by_key(), name.split("."), type(self).__name__, name), name)

    def _quantity(self, v, name):
        import numpy as np

        from .units import Q

        if isinstance(v, Mapping):                  # a table: {key: quantity}, each value in its own unit
            return {k: self._quantity(x, f"{name}.{k}") for k, x in v.items()}
        if isinstance(v, tuple) and any(isinstance(x, Mapping) for x in v):
            return [None if x is None else self._quantity(x, name) for x in v]
        unit = self.unit(name)
        if isinstance(v, tuple):
            return Q(np.array([np.nan if x is None else x for x in v], dtype=float), unit)
        if v is None:
            raise InputError(f"{type(self).__name__}.quantity: {name!r} is not set (None)")
        return Q(v, unit)


def _get(d, parts, cls, name):
    if not parts:
        return d
    head, rest = parts[0], parts[1:]
    if isinstance(d, tuple):                    # every row of a sequence (None where a row has no such value)
        return tuple(_get(row, parts, cls, name) if _has(row, head) else None for row in d)
    if isinstance(d, Result):
        d = d.items_by_key()
    if not isinstance(d, Mapping) or head not in d:
        raise InputError(f"{cls}.quantity: no value at {name!r}")
    return _get(d[head], rest, cls, name)


def _has(row, key) -> bool:
    return isinstance(row, tuple) or key in (row.items_by_key() if isinstance(row, Result) else row)


class MappingResult(Result, Mapping):
    """A result that also reads like the dict it replaces (``r["flop"]["total"]``): ``r[key]`` is a plain copy
    (dicts and lists, as ``si()``), so that a reader's changes never reach the result."""

    def __getitem__(self, key):
        return plain(self.items_by_key()[key])

    def __iter__(self):
        return iter(self.items_by_key())

    def __len__(self) -> int:
        return len(self.items_by_key())
