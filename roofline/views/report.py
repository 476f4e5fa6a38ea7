"""Aligned text tables, the one renderer the views' reports share (search, validate, run-cost, plan, cluster-schedule).

A table is a list of columns and rows of values. A column has a heading, a width, an alignment and a
format: a format spec (``".1f"``, ``"+9.1f"``) or a function from the value to its text; the text is then
padded to the width (longer text is kept whole, as f-strings do), and ``sep`` is written before it. A row
shorter than the columns leaves the missing trailing columns out (separators included); a value that is
already text (``str``) is written as is, without the format.

>>> cols = [Col("job", 6, "<"), Col("GPUs", 5, fmt="d"), Col("end h", 8, fmt=".2f", sep="  ")]
>>> print(table(cols, [("a", 8, 1.5), ("b", "-")], indent="  "))
  job    GPUs     end h
  a         8      1.50
  b         -
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Col:
    head: str
    width: int = 0
    align: str = ">"                     # ">" right, "<" left
    fmt: str | Callable = ""             # format spec of the value, or value -> text
    sep: str = ""                        # written before the column


def cell(col: Col, value) -> str:
    if isinstance(value, str):
        text = value
    elif callable(col.fmt):
        text = col.fmt(value)
    else:
        text = format(value, col.fmt)
    return f"{col.sep}{text:{col.align}{col.width}}"


def line(cols, values, indent: str = "") -> str:
    """One row: the first ``len(values)`` columns."""
    return indent + "".join(cell(c, v) for c, v in zip(cols, values))


def header(cols, indent: str = "") -> str:
    return indent + "".join(f"{c.sep}{c.head:{c.align}{c.width}}" for c in cols)


def table(cols, rows, *, indent: str = "", head: bool = True) -> str:
    """The heading line (unless ``head`` is False) and one line per row."""
    out = [header(cols, indent)] if head else []
    return "\n".join(out + [line(cols, r, indent) for r in rows])
