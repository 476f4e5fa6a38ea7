"""Export a formula as LaTeX, Python (numpy), sympy text or JSON, optionally with some symbols set.

>>> print(export("pp_bubble_ratio", "sympy"))
dp*micro_batch*(pp - 1)/(global_batch*interleave)
>>> print(export("pp_bubble", "latex", {"pp": 8, "interleave": 1}))
\\frac{7 d b}{7 d b + B}
"""
from __future__ import annotations

import json
import math

import sympy as sp

from ..errors import InputError
from . import step
from .symbols import SYMBOLS, latex_names

FORMATS = ("latex", "python", "sympy", "json")


def expression(quantity: str, values: dict | None = None) -> sp.Expr:
    exprs = step.build()
    if quantity not in exprs:
        raise InputError(f"unknown quantity {quantity!r}; known: {', '.join(exprs)}")
    expr = exprs[quantity]
    if values:
        bad = [k for k in values if k not in SYMBOLS]
        if bad:
            raise InputError(f"--set: unknown symbol(s) {', '.join(bad)}; see `formulas --symbols`")
        neg = [f"{k}={v}" for k, v in values.items() if not (math.isfinite(v) and v >= 0)]
        if neg:     # every symbol is a size, count, rate, time or 0/1 switch
            raise InputError(f"--set: values must be finite and >= 0, got {', '.join(neg)}")
        expr = expr.subs({SYMBOLS[k].symbol: sp.nsimplify(v) for k, v in values.items()})
        if sp.count_ops(expr) < 400:
            expr = sp.simplify(expr)
    return expr


def export(quantity: str, fmt: str = "latex", values: dict | None = None) -> str:
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    expr = expression(quantity, values)
    if fmt == "latex":
        return sp.latex(expr, symbol_names=latex_names())
    if fmt == "sympy":
        return str(expr)
    if fmt == "python":
        from .codegen import _Printer
        args = sorted(s.name for s in expr.free_symbols)
        body = _Printer({"fully_qualified_modules": False}).doprint(expr).replace("numpy.", "np.")
        return f"import numpy as np\n\n\ndef {quantity}({', '.join(args)}):\n    return {body}\n"
    dim, doc = step.QUANTITIES.get(quantity, ("", ""))
    used = sorted(s.name for s in expr.free_symbols)
    return json.dumps({"quantity": quantity, "dimension": dim or "1", "description": doc, "sympy": str(expr),
                       "latex": sp.latex(expr, symbol_names=latex_names()),
                       "symbols": {n: {"dimension": SYMBOLS[n].dim or "1", "description": SYMBOLS[n].doc}
                                   for n in used}}, indent=1)
