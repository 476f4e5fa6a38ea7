"""The built formulas stored as one expression graph, so that symbolic export answers in seconds.

``step.build()`` assembles the model from the formula modules in about 7 s (sympy evaluates every Max/Min as it
is built). ``python -m roofline.model.formulas.codegen`` writes, beside the compiled numpy module, the same
expressions as a graph of distinct nodes (``roofline/data/formulas.json``, ~3000 nodes): each node names its
sympy class and the indices of its arguments, and is rebuilt with ``evaluate=False``, so that the loaded
expression is the very tree ``build()`` made (equal and of equal hash), in a fraction of a second.

The file records a digest of the formula sources it was built from; when they differ (formulas edited, codegen
not rerun) :func:`load` returns None and the caller builds the model instead: never a stale formula.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import sympy as sp
from ...base.paths import DATA

PATH = DATA / "formulas.json"
_HERE = Path(__file__).resolve().parent
# the modules build() reads; export/codegen/concepts/dag only print or store what it builds
SOURCES = ("symbols.py", "compute.py", "comm.py", "memory.py", "pipeline.py", "mamba.py", "step.py")


def sources_digest() -> str:
    """sha256 (16 hex digits) of the formula modules' text, in a fixed order."""
    h = hashlib.sha256()
    for name in SOURCES:
        h.update(name.encode() + b"\0" + (_HERE / name).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def symbols_of(expr) -> set:
    """The symbols of ``expr``, each shared subexpression visited once (sympy's free_symbols walks the tree, which
    the step terms' repeated stage expressions make exponentially larger than their graph)."""
    seen, out, todo = set(), set(), [expr]
    while todo:
        e = todo.pop()
        if e in seen:
            continue
        seen.add(e)
        if e.is_Symbol:
            out.add(e)
        else:
            todo.extend(e.args)
    return out


def _atom(e) -> list:
    if isinstance(e, sp.Symbol):
        return ["Symbol", e.name]
    if isinstance(e, sp.Integer):
        return ["Integer", int(e)]
    if isinstance(e, sp.Rational):
        return ["Rational", int(e.p), int(e.q)]
    if isinstance(e, sp.Float):
        return ["Float", sp.srepr(e)]
    if e in (sp.true, sp.false, sp.oo, -sp.oo, sp.zoo, sp.nan, sp.pi, sp.E):
        return ["Const", sp.srepr(e)]
    raise TypeError(f"formula graph: cannot store the atom {e!r} ({type(e).__name__})")


def dump(exprs: dict[str, sp.Expr]) -> dict:
    """``{"digest", "nodes", "outputs"}``: every distinct node once, arguments before the node that uses them."""
    index: dict = {}
    nodes: list = []
    for root in exprs.values():
        stack = [(root, False)]
        while stack:                    # iterative post-order (no recursion limit), each shared node once
            e, ready = stack.pop()
            if e in index:
                continue
            if not e.args:
                index[e] = len(nodes)
                nodes.append(_atom(e))
                continue
            if not ready:
                stack.append((e, True))
                stack.extend((a, False) for a in reversed(e.args) if a not in index)
                continue
            index[e] = len(nodes)
            nodes.append([type(e).__name__, *(index[a] for a in e.args)])
    from .step import QUANTITIES

    return {"digest": sources_digest(), "quantities": {k: list(v) for k, v in QUANTITIES.items()},
            "nodes": nodes, "outputs": {k: index[v] for k, v in exprs.items()}}


def _func(name: str):
    f = getattr(sp, name, None)
    if f is None:
        f = getattr(sp.functions.elementary.piecewise, name, None)      # ExprCondPair
    if f is None:
        raise ValueError(f"formula graph: unknown sympy class {name!r}")
    return f


def rebuild(data: dict, names=None) -> dict[str, sp.Expr]:
    """The expressions of ``data`` (all outputs, or those in ``names``), rebuilt unevaluated node by node."""
    from sympy.core.cache import clear_cache

    from .symbols import SYMBOLS

    # sympy's constructor cache (an LRU of 1000 entries) holds nodes of an earlier rebuild or build: a node equal to
    # one rebuilt here but made of other objects is then compared as a tree, exponential in the depth of the shared
    # stage times (a second export of `memory` in one process: minutes instead of 0.3 s). Emptied first, every lookup
    # meets only nodes of this rebuild, whose arguments are the same objects.
    clear_cache()
    by_name = {s.symbol.name: s.symbol for s in SYMBOLS.values()}
    nodes = data["nodes"]
    built: list = [None] * len(nodes)
    funcs: dict = {}
    for i, node in enumerate(nodes):
        kind = node[0]
        if kind == "Symbol":
            built[i] = by_name.get(node[1]) or sp.Symbol(node[1])
        elif kind == "Integer":
            built[i] = sp.Integer(node[1])
        elif kind == "Rational":
            built[i] = sp.Rational(node[1], node[2])
        elif kind in ("Float", "Const"):
            built[i] = sp.sympify(node[1])
        else:
            f = funcs.get(kind) or funcs.setdefault(kind, _func(kind))
            args = [built[j] for j in node[1:]]
            if f in (sp.Max, sp.Min):      # stored in sympy's order: skip the sort (it counts nodes of whole trees)
                built[i] = sp.Expr.__new__(f, *args)
                built[i]._argset = frozenset(args)
                continue
            try:
                built[i] = f(*args, evaluate=False)
            except TypeError:           # classes without an evaluate switch (ExprCondPair)
                built[i] = f(*args)
    outputs = data["outputs"]
    wanted = outputs if names is None else {k: outputs[k] for k in names}
    return {k: built[j] for k, j in wanted.items()}


def write(exprs: dict[str, sp.Expr], path: Path = PATH) -> None:
    path.write_text(json.dumps(dump(exprs), separators=(",", ":")) + "\n")


def read(path: Path = PATH) -> dict | None:
    """The stored graph (``quantities``: name -> (dimension, description); ``nodes``; ``outputs``), or None when
    the file is missing or was built from other formula sources."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("digest") == sources_digest() else None


def load(path: Path = PATH) -> dict[str, sp.Expr] | None:
    """Every stored expression, or None (see :func:`read`)."""
    data = read(path)
    return None if data is None else rebuild(data)
