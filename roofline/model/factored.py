"""The compiled formulas over many plans at once, each intermediate computed once per distinct combination of the
plan knobs it depends on.

A search prices up to millions of plans (views/space.py), but most of the straight-line code of ``_compiled`` reads
only a few of the knobs: a layer's GEMM times depend on tp, cp, the micro-batch and sequence parallelism, not on dp,
pp, the interleave or the sharding, and take a few thousand distinct values over a million plans. Evaluating every
line over every plan repeats that work. Here each line's dependence on the array inputs is read from the source
(the names it reads, transitively); knob subsets (spaces) are chosen greedily by a cost model (each line's work,
numpy's functions weighted by their measured cost, times the rows it runs over; the grouping of the plans by each
space, the coding of each knob column, and the gathers of values read across spaces), and each line runs over the
distinct rows of the smallest chosen space holding its dependencies, the lines that depend on scalars alone once, the
rest over the plans in cache-sized chunks, gathering what they read from the smaller spaces. Where the model finds the
factoring saves less than a quarter of the work, only the scalar lines are hoisted. Array inputs that take one value
over all the plans are made scalars first.

On the development machine (2 cores) this prices DeepSeek-V3's search on 2,048 H800s (34 million valid plans, 7.6
million timed) in 72-75 s instead of 106 s, and every output of a million GPT-3 175B plans in 1.4-1.7 s instead of
4.6-5.4 s; in GPT-3's own search (0.12 million plans timed) the sizing pass stays on the plans' own rows
(`python benchmarks/search_speed.py --moe`; docs/search.md "Speed").

The arithmetic is the same code on the same values; only where it runs changes. Results equal
``predict.evaluator``'s to rounding (numpy's vectorized and scalar math functions may differ in the last bit),
which tests/test_factored.py checks over random searches.
"""
from __future__ import annotations

import functools
import hashlib
import math
import re

import numpy as np

_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
# a line's work for the cost model: each arithmetic operator 1, a power 3 (a constant exponent) or 35 (an array one),
# and numpy's functions by their measured cost relative to a multiply over a cache-sized chunk
_ARITH = re.compile(r"(?<![*])[-+/]|(?<![*])\*(?![*])")
_POW = re.compile(r"\*\*\s*(\(?-?[\d./]+\)?(?![\w(]))?")
_CALLS = {"np.where": 4.0, "np.heaviside": 7.0, "np.log": 12.0, "np.exp": 13.0, "np.sqrt": 4.0, "np.maximum": 1.5,
          "np.minimum": 1.5, "np.ceil": 1.0, "np.floor": 1.0}
_INPUT = re.compile(r"x(?:\['(\w+)'\]|\.get\('(\w+)')")
# The cost model's weights, in units of one numpy operation over one plan inside a cache-sized chunk (measured on the
# 2-core development machine, numpy 2: a multiply 0.46 ns per element, an indexed gather ~1.9 ns, a pass over a whole
# column of a million plans ~1-2 ns, factorize ~11 ns, a space's grouping ~9 ns plus ~2 ns per knob)
_GATHER_OPS = 2.5               # a value of a smaller space read by a larger one, per row of the reader
_CODE_OPS = 24.0                # factorizing one knob column, per plan
_GROUP_OPS = (20.0, 4.0)        # grouping the plans by a space's knobs, per plan: fixed, and per knob
_WORTH = 0.75                   # factor the evaluation only where the modelled work drops below this share


def factorize(col) -> tuple:
    """(distinct values, the code of each entry) of a column: np.unique(col, return_inverse=True), without its sort
    when the column holds small non-negative integers (most knob columns: a counting pass), or few distinct values
    (found in a prefix and checked over the whole column by a binary search)."""
    col = np.asarray(col)
    if col.size and col.dtype.kind in "iuf":
        ints = col.astype(np.int64)
        if col.dtype.kind in "iu" or np.array_equal(ints, col):
            lo, hi = ints.min(), ints.max()
            if lo >= 0 and hi < 2 ** 20:
                present = np.flatnonzero(np.bincount(ints))
                lut = np.zeros(int(hi) + 1, dtype=np.int64)
                lut[present] = np.arange(len(present))
                return present.astype(col.dtype), lut[ints]
        vals = np.unique(col[::max(1, col.size // 4096)])
        code = np.minimum(np.searchsorted(vals, col), len(vals) - 1)
        if np.array_equal(vals[code], col):
            return vals, code
    vals, inv = np.unique(col, return_inverse=True)
    return vals, inv.ravel()


@functools.lru_cache(maxsize=32)
def program(outputs: tuple) -> tuple:
    """The cut program of ``outputs`` (predict.cut): a tuple of (target, expression, names read, the input it reads
    or None, operations) per line, and the returned expressions."""
    from .predict import cut

    lines, returned = cut(outputs)
    out = []
    for target, expr in lines:
        m = _INPUT.search(expr)
        ops = _work(expr)
        out.append((target, expr, frozenset(_NAME.findall(expr)), (m.group(1) or m.group(2)) if m else None,
                    max(1, ops)))
    return tuple(out), tuple((o, returned[o]) for o in outputs)


def _work(expr: str) -> float:
    """The modelled work of one line per row (see _CALLS)."""
    w = float(len(_ARITH.findall(expr)))
    for m in _POW.finditer(expr):
        w += 3.0 if m.group(1) else 35.0
    for call, c in _CALLS.items():
        w += c * expr.count(call + "(")
    return max(1.0, w)


def _dependencies(prog, varying: frozenset) -> dict:
    """For every target, the varying array inputs it depends on."""
    deps = {}
    for target, _expr, names, inp, _ops in prog:
        if inp is not None:
            deps[target] = frozenset([inp]) if inp in varying else frozenset()
        else:
            d = frozenset()
            for nm in names:
                if nm in deps:
                    d = d | deps[nm]
            deps[target] = d
    return deps


def choose_spaces(line_deps: list, radix: dict, n: int, coded=None) -> list:
    """Knob sets (spaces) to run lines in, chosen greedily to minimize the modelled work: a line (its dependencies,
    its operations) runs over the rows of the smallest chosen set holding its dependencies, at most the product of
    those knobs' distinct counts (or n, the plans themselves, when none holds them), and each set costs its grouping
    over the n plans. Candidates are the lines' dependency sets; the one that saves the most is added while one
    saves work. ``coded``: the knobs whose codes are known (all, when None); coding another costs _CODE_OPS."""
    def size(s):
        return min(n, math.prod(radix[k] for k in s))

    weight: dict = {}
    for deps, ops in line_deps:
        if deps:
            weight[deps] = weight.get(deps, 0) + ops
    rows = {d: n for d in weight}            # each dependency set's rows under the spaces chosen so far
    chosen: list = []
    covered = set(radix) if coded is None else set(coded)
    candidates = [d for d in weight if size(d) < n / 4]
    while candidates:
        best, pick = 0.0, None
        for s in candidates:
            r = size(s)
            save = sum(w * (rows[d] - r) for d, w in weight.items() if d <= s and rows[d] > r)
            save -= n * (_GROUP_OPS[0] + _GROUP_OPS[1] * len(s) + _CODE_OPS * len(s - covered))
            if save > best:
                best, pick = save, s
        if pick is None:
            break
        chosen.append(pick)
        covered |= pick
        r = size(pick)
        for d in weight:
            if d <= pick and rows[d] > r:
                rows[d] = r
        candidates.remove(pick)
    return chosen


def _group(codes: list, radices: list, n: int, rows) -> tuple:
    """(row of one representative per group, group of every row) of the rows' code tuples."""
    key = np.array(codes[0], dtype=np.int64)
    span = radices[0]
    for c, r in zip(codes[1:], radices[1:]):
        key *= r
        key += c
        span *= r
    if span <= 4 * n + 1024:
        counts = np.bincount(key, minlength=span)
        present = np.flatnonzero(counts)
        lut = np.empty(span, dtype=np.int64)
        lut[present] = np.arange(len(present))
        inv = lut[key]
    else:
        _, inv = np.unique(key, return_inverse=True)
        inv = inv.ravel()
    rep = np.empty(int(inv.max()) + 1 if n else 0, dtype=np.int64)
    rep[inv] = rows                         # any row of a group stands for it: they share every knob of the space
    return rep, inv


@functools.lru_cache(maxsize=64)
def _space_function(name: str, lines: tuple, reads: tuple, exports: tuple):
    """A compiled function of one space: reads ``reads`` from its argument (a dict), runs ``lines`` and returns the
    ``exports`` (a tuple of (name, expression) pairs: the targets later spaces read, or the outputs)."""
    from .predict import _code

    body = [f"    {nm} = v[{nm!r}]" for nm in reads] + [f"    {t} = {e}" for t, e in lines]
    src = "def f(v, x):\n" + "\n".join(body or ["    pass"]) + "\n    return {" \
        + ", ".join(f"{nm!r}: {e}" for nm, e in exports) + "}\n"
    scope = {"np": np}
    exec(_code(src, f"<roofline factored {name}>"), scope)
    return scope["f"]


def _layout(prog, deps, spaces, radix):
    """(the levels: scalars, the spaces smallest first (by the product of their knobs' distinct counts, then name),
    the plans; each target's level, the first holding its dependencies: an operand's level never comes later)."""
    order = sorted(set(spaces), key=lambda s: (math.prod(radix[k] for k in s), sorted(s)))
    levels = [frozenset()] + order + [frozenset(radix)]
    where = {t: next(i for i, s in enumerate(levels) if deps[t] <= s) for t, *_ in prog}
    return levels, where


def _modelled(prog, deps, spaces, radix, n, coding=False) -> float:
    """The modelled work of evaluating ``prog`` with ``spaces`` (see the weights above): each line over its level's
    rows, each value read across levels gathered per row of the reader, each space grouped, each knob coded."""
    levels, where = _layout(prog, deps, spaces, radix)
    rows = [1] + [min(n, math.prod(radix[k] for k in s)) for s in levels[1:-1]] + [n]
    work = sum(n * (_GROUP_OPS[0] + _GROUP_OPS[1] * len(s)) for s in levels[1:-1])
    if coding and spaces:
        work += _CODE_OPS * n * len(frozenset().union(*spaces))
    read = set()
    for t, _e, names, _i, ops in prog:
        work += ops * rows[where[t]] if where[t] else 0
        for nm in names:
            if nm in where and 0 < where[nm] < where[t] and (nm, where[t]) not in read:
                read.add((nm, where[t]))
                work += _GATHER_OPS * rows[where[t]]
    return work


def codes_of(x: dict, n: int) -> dict:
    """{input: (distinct values, the code of each plan)} of the array inputs of ``x`` (n plans each)."""
    return {k: factorize(v) for k, v in x.items() if isinstance(v, np.ndarray) and v.ndim and v.size == n}


def evaluate(outputs: tuple, x: dict, n: int, chunk: int = 8192, progress=None, codes: dict | None = None) -> dict:
    """The ``outputs`` of the compiled formulas for n plans: ``x`` maps every input to a scalar or an array of n.
    Returns arrays of n per output. ``progress(k)`` is told of each chunk of k plans done. ``codes``: the arrays'
    :func:`codes_of` when the caller has them (a subset's are the whole set's codes at its rows: their distinct
    values may then include some the subset lacks, which costs nothing but a larger key span)."""
    outputs = tuple(outputs)
    prog, returned = program(outputs)
    x = dict(x)
    radix = {}
    if codes is not None:
        for k, (vals, _c) in codes.items():
            radix[k] = len(vals)
    else:                                   # distinct counts estimated from a strided sample until codes are needed
        for k, v in x.items():
            if isinstance(v, np.ndarray) and v.ndim and v.size == n and n:
                r = len(np.unique(v[::max(1, n // 2048)]))
                radix[k] = 1 if r == 1 and np.all(v == v.flat[0]) else max(2, r)
    for k, r in list(radix.items()):
        if r == 1:                          # one value over every plan: a scalar
            x[k] = x[k].dtype.type(x[k].flat[0])
            del radix[k]
    varying = frozenset(radix)
    deps = _dependencies(prog, varying)
    line_deps = [(deps[t], ops) for t, _e, _n, _i, ops in prog]
    spaces = choose_spaces(line_deps, radix, n, None if codes is not None else ()) if n else []
    coding = codes is None
    work = _modelled(prog, deps, spaces, radix, n, coding)
    for sp in list(spaces)[::-1]:           # the greedy choice ignores the gathers: drop a space that costs more
        fewer = [s for s in spaces if s != sp]
        without = _modelled(prog, deps, fewer, radix, n, coding)
        if without < work:
            spaces, work = fewer, without
    if spaces and work > _WORTH * _modelled(prog, deps, [], radix, n):
        spaces = []                         # the plans' own rows: only the scalar lines are hoisted
    if spaces and codes is None:
        codes = {k: factorize(x[k]) for k in sorted(frozenset().union(*spaces))}
    if spaces:
        radix = {k: (len(codes[k][0]) if k in codes else r) for k, r in radix.items()}
    codes = {k: c for k, (_v, c) in (codes or {}).items() if k in varying}
    # every line in the smallest space holding its dependencies (_layout): its operands depend on fewer knobs, so
    # their values are the same over each of its groups, and an operand is read at the group's representative row
    levels, where = _layout(prog, deps, spaces, radix)

    def level(need):
        return next(i for i, s in enumerate(levels) if need <= s)

    out_level = {o: level(frozenset().union(*(deps[nm] for nm in _NAME.findall(e) if nm in deps)))
                 for o, e in returned}
    top = len(levels) - 1
    lines = [[] for _ in levels]
    for t, e, _names, _i, _ops in prog:
        lines[where[t]].append((t, e))
    reads = [set() for _ in levels]
    exported = [set() for _ in levels]
    for t, _e, names, _i, _ops in prog:
        for nm in names:
            if nm in where and where[nm] != where[t]:
                reads[where[t]].add(nm)
                exported[where[nm]].add(nm)
    for o, e in returned:
        for nm in _NAME.findall(e):
            if nm in where and where[nm] != out_level[o]:
                reads[out_level[o]].add(nm)
                exported[where[nm]].add(nm)
    layout = hashlib.sha256(repr([sorted(s) for s in levels]).encode()).hexdigest()[:10]
    fns = {}
    for i in range(len(levels)):
        if not lines[i] and not any(out_level[o] == i for o in outputs):
            continue
        exports = tuple((nm, nm) for nm in sorted(exported[i])) \
            + tuple((f"__out_{o}", e) for o, e in returned if out_level[o] == i)
        # named by the spaces chosen: each choice keeps its compiled code in the cache (predict._code)
        name = f"{','.join(outputs)} over " + ("the plans" if i == top else "+".join(sorted(levels[i])) or "scalars") \
            + f" of {layout}"
        fns[i] = _space_function(name, tuple(lines[i]), tuple(sorted(reads[i])), exports)

    res = {o: np.full(n, np.nan) for o in outputs}
    values = {}                             # per level: its exports over its groups
    groups = {}                             # per space: (a representative row per group, the group of every plan)
    arrays = sorted(varying)
    rows = np.arange(n)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(len(levels)):
            if i not in fns:
                continue
            if i == 0:
                values[0] = fns[0]({}, x)
                for o in outputs:
                    if out_level[o] == 0:
                        res[o][:] = values[0][f"__out_{o}"]
                continue
            if i < top:
                keys = sorted(levels[i])
                groups[i] = _group([codes[k] for k in keys], [radix[k] for k in keys], n, rows)
                rep, inv = groups[i]
                xs = {k: (v[rep] if k in varying else v) for k, v in x.items()}
                values[i] = fns[i](_gather(reads[i], where, values, groups, rep), xs)
                for o in outputs:
                    if out_level[o] == i:
                        res[o][:] = np.broadcast_to(values[i][f"__out_{o}"], (len(rep),))[inv]
                continue
            for s in range(0, n, chunk):
                e = min(n, s + chunk)
                xs = dict(x)
                for k in arrays:
                    xs[k] = x[k][s:e]
                r = fns[i](_gather(reads[i], where, values, groups, slice(s, e)), xs)
                for o in outputs:
                    if out_level[o] == i:
                        res[o][s:e] = r[f"__out_{o}"]
                if progress is not None:
                    progress(e - s)
    return res


def _gather(names, where, values, groups, rows) -> dict:
    """The values of ``names`` (computed in smaller spaces) at ``rows`` of the plans: each space's group index of
    those rows picks its value."""
    out, idx = {}, {}
    for nm in names:
        j = where[nm]
        if j == 0:
            out[nm] = values[0][nm]
            continue
        if j not in idx:
            idx[j] = groups[j][1][rows]
        out[nm] = values[j][nm][idx[j]]
    return out
