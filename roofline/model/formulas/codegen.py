"""Compile the sympy formulas to one numpy module, ``roofline/model/_compiled.py``.

The prediction path imports only that module (numpy), never sympy: ``python -m roofline
transformer`` stays fast and every evaluation is vectorized (any input may be an array).
Regenerate with ``python -m roofline.model.formulas.codegen``; a test checks the file is in sync.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import sympy as sp
from sympy.printing.numpy import NumPyPrinter

TARGET = Path(__file__).resolve().parent.parent / "_compiled.py"


# Max, Min, Piecewise, relations, logic and Heaviside as inert functions during common-subexpression elimination:
# sp.cse rebuilds every node it visits with ``node.func(*args)``, and a Max, Min or relation rebuilt that way
# evaluates, comparing its (large) arguments through sympy's assumptions; a small change to the formulas once
# turned 34 s of cse into 8 minutes that way. An undefined function rebuilds without evaluating; _Printer prints
# each as the numpy form of the node it stands for, so the generated numbers are the same.
_REL = {">": "gt", ">=": "ge", "<": "lt", "<=": "le", "==": "eq", "!=": "ne"}
_KIND = ((sp.Max, "max"), (sp.Min, "min"), (sp.And, "and"), (sp.Or, "or"), (sp.Not, "not"), (sp.Heaviside, "heaviside"))
_INERT = {name: sp.Function(f"_inert_{name}") for name in ("pw", *_REL.values(), *(n for _, n in _KIND))}


def _kind(expr) -> str | None:
    """The _INERT name of ``expr``'s node, or None for a node cse may rebuild as it is."""
    if isinstance(expr, sp.core.relational.Relational):
        return _REL[expr.rel_op]
    return next((name for cls, name in _KIND if isinstance(expr, cls)), None)


def _inert(expr, memo: dict):
    """``expr`` with the node kinds of _INERT replaced, bottom-up (``memo``: shared subtrees rebuilt once)."""
    hit = memo.get(expr)
    if hit is not None:
        return hit
    if not expr.args or isinstance(expr, (sp.Symbol, sp.Number)):
        out = expr
    elif isinstance(expr, sp.Piecewise):
        args = [_inert(part, memo) for pair in expr.args for part in pair]
        out = _INERT["pw"](*args)
    else:
        args = [_inert(a, memo) for a in expr.args]
        kind = _kind(expr)
        if kind is not None:
            out = _INERT[kind](*args)
        elif all(a is b for a, b in zip(args, expr.args)):
            out = expr
        else:
            out = expr.func(*args)
    memo[expr] = out
    return out


class _Printer(NumPyPrinter):
    """numpy printer with broadcasting Max/Min/Piecewise (sympy's amax form does not broadcast), and the inert
    stand-ins of _INERT printed as the nodes they replace."""

    def _print_Function(self, expr):
        name = expr.func.__name__
        if not name.startswith("_inert_"):
            return super()._print_Function(expr)
        kind, a = name[len("_inert_"):], expr.args
        if kind in ("max", "min"):
            return self._nest("maximum" if kind == "max" else "minimum", a)
        if kind == "pw":
            return self._where(zip(a[::2], a[1::2]))
        if kind in ("and", "or"):
            return self._nest(f"logical_{kind}", a)
        if kind == "not":
            return f"np.logical_not({self._print(a[0])})"
        if kind == "heaviside":
            return f"np.heaviside({self._print(a[0])}, {self._print(a[1]) if len(a) > 1 else '0.5'})"
        op = {v: k for k, v in _REL.items()}[kind]
        return f"({self._print(a[0])} {op} {self._print(a[1])})"

    def _nest(self, fn, args):
        args = [self._print(a) for a in args]
        out = args[0]
        for a in args[1:]:
            out = f"np.{fn}({out}, {a})"
        return out

    def _print_Max(self, expr):
        return self._nest("maximum", expr.args)

    def _print_Min(self, expr):
        return self._nest("minimum", expr.args)

    def _print_ceiling(self, expr):
        return f"np.ceil({self._print(expr.args[0])})"

    def _print_floor(self, expr):
        return f"np.floor({self._print(expr.args[0])})"

    def _where(self, pairs):
        """(value, condition) pairs, the first true one's value: nested np.where, the last (True) the default."""
        out = None
        for value, cond in reversed(list(pairs)):
            v = self._print(value)
            out = v if cond is sp.true else f"np.where({self._print(cond)}, {v}, {out})"
        return out

    def _print_Piecewise(self, expr):
        return self._where(expr.args)

    def _print_Relational(self, expr):
        return f"({self._print(expr.lhs)} {expr.rel_op} {self._print(expr.rhs)})"


def source(exprs: dict | None = None) -> str:
    """The text of ``_compiled.py`` for ``exprs`` (default: ``step.build()``)."""
    from . import step
    from .dag import symbols_of
    from .symbols import SYMBOLS

    exprs = step.build() if exprs is None else exprs
    names = list(exprs)
    inputs = sorted({s.name for e in exprs.values() for s in symbols_of(e)})
    unknown = set(inputs) - set(SYMBOLS)
    assert not unknown, unknown
    memo: dict = {}
    inert = [_inert(exprs[n], memo) for n in names]
    replacements, reduced = sp.cse(inert, symbols=sp.numbered_symbols("_x"), optimizations=None,
                                  order="none")     # no canonical ordering: it counts tree nodes (exponential)
    pr = _Printer({"fully_qualified_modules": False, "allow_unknown_functions": False})
    lines = [
        '"""Generated by roofline.model.formulas.codegen from the sympy formulas: do not edit by hand."""',
        "# fmt: off",
        "import numpy as np",
        "",
        f"INPUTS = {tuple(inputs)!r}",
        f"OUTPUTS = {tuple(names)!r}",
        "",
        "",
        "def evaluate(x):",
        '    """All outputs (dict of float or ndarray, SI units) from a mapping of every input."""',
    ]
    for name in inputs:     # an input with a default (symbols.Sym.default, sourced in hardware/defaults.yaml) may be left out
        d = SYMBOLS[name].default
        lines.append(f"    {name} = x[{name!r}]" if d is None else f"    {name} = x.get({name!r}, {d!r})")
    for sym, e in replacements:
        lines.append(f"    {sym} = {pr.doprint(e)}")
    lines.append("    return {")
    for name, e in zip(names, reduced):
        lines.append(f"        {name!r}: {pr.doprint(e)},")
    lines.append("    }")
    body = "\n".join(lines) + "\n"
    body = body.replace("numpy.", "np.")
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    return body + f"\nSOURCE_DIGEST = {digest!r}\n"


def main(argv=None) -> int:
    import argparse
    from . import dag, step

    ap = argparse.ArgumentParser(prog="python -m roofline.model.formulas.codegen",
                                 description="Compile the sympy formulas (roofline/model/formulas) to roofline/model/_compiled.py "
                                             "(numpy only) and store them as an expression graph for symbolic export "
                                             "(roofline/data/formulas.json); tests/test_formulas.py checks both are "
                                             "in sync.")
    ap.parse_args(argv)                     # --help prints this and exits 0, an unknown flag exits 2: nothing written
    from ...base import progress
    # minutes of sympy: each phase reports its elapsed time on stderr (roofline/base/progress.py)
    with progress.phase("codegen 1/3: build the step formulas (sympy)"):
        exprs = step.build()
    with progress.phase("codegen 2/3: common subexpressions and numpy source"):
        text = source(exprs)
    with progress.phase("codegen 3/3: expression graph for symbolic export"):
        TARGET.write_text(text)
        dag.write(exprs)
    print(f"wrote {TARGET} ({len(text.splitlines())} lines) and {dag.PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
