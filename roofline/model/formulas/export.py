"""Export a formula as LaTeX, Python (numpy), sympy text or JSON, optionally with some symbols set.

>>> print(export("pp_bubble_ratio", "sympy"))
dp*micro_batch*(pp - 1)/(global_batch*interleave)
>>> print(export("pp_bubble", "latex", {"pp": 8, "interleave": 1}))
\\frac{7 d b}{7 d b + B}
"""
from __future__ import annotations

import json
import math
import numbers

import sympy as sp
from sympy.functions.elementary.piecewise import ExprCondPair

from ...base.errors import InputError
from . import dag
from .symbols import SYMBOLS, latex_names

FORMATS = ("latex", "python", "sympy", "json")


# What a --set value may be, per symbol (issue 22). Counts and sizes are integers >= 1 as roofline.spec.config.check
# requires of Model/Plan fields and the hardware schema of gpus_per_node and sm_count; switches are the 0/1 that
# roofline.model.predict.model_inputs/plan_inputs give (float(bool)); overlaps are fractions in [0, 1] (config.check);
# efficiencies and the sustained clock are in (0, 1] (hardware profile schema); rates (dimension ".../time"), the
# capacity factor and the activation element size divide, so they are > 0. Every other symbol (times, byte
# sizes, shape constants): finite and >= 0. Names not defined (yet) in symbols.py are simply never matched.
INTEGER_SYMBOLS = frozenset({
    "n_layers", "d_model", "n_heads", "kv_heads", "ffn_hidden", "head_dim", "moe_ffn", "vocab", "seq_len", "n_experts",
    "top_k", "tp", "pp", "dp", "cp", "ep", "micro_batch", "global_batch", "interleave", "gpus_per_node", "sms"})
COUNT_OR_ZERO_SYMBOLS = frozenset({"shared_ffn", "dense_layers", "moe_latent"})          # integers >= 0 (0: none)
SWITCH_SYMBOLS = frozenset({"gated", "causal", "flash", "dropout", "tied", "learned_pos", "rope_pos", "biases", "seq_par", "tp_async", "tp_split_rs", "attn_fp8", "wgrad_fusion", "fsdp_copy", "grad_bucket", "pp_scatter", "q_saved", "eager_elem", "eager_rope", "qk_norm",
                            "rc_full", "rc_sel", "rc_op", "ce_eager", "ce_compiled", "gpipe", "dualpipev", "dualpipe", "zb1p", "zb2p", "z_os", "z_grad", "z_param"})
POSITIVE_SYMBOLS = frozenset({"capacity_factor", "act_bytes"})
MAX_SIMPLIFY_NODES = 200     # tidy only results of fewer distinct nodes (a larger one gains little: memory at
                             # n_layers=96 d_model=12288, 371 nodes -> 364 in 1 s; it prints as it is)


_OPAQUE = {sp.Max: sp.Function("_Max"), sp.Min: sp.Function("_Min")}


def tidy(expr: sp.Expr) -> sp.Expr:
    """``expr`` over one denominator with common factors pulled out (sympy's together, then factor_terms).

    Linear-time rewrites, not sympy's ``simplify`` (a search over rewrites that took 27-37 s on the memory total
    and half a minute on the optimizer time once a few symbols were set); the value is the same expression.
    Max/Min are rewritten as plain functions meanwhile: factor_terms rebuilds every node it passes, and an evaluated
    Max compares its arguments pairwise (seconds on the memory total); their arguments are tidied all the same."""
    back = {v: k for k, v in _OPAQUE.items()}
    plain = _swap(expr, _OPAQUE)
    return _swap(sp.factor_terms(sp.together(plain)), back)


def _swap(expr: sp.Expr, funcs: dict) -> sp.Expr:
    """``expr`` with every node of a class in ``funcs`` rebuilt as ``funcs[class]`` (same arguments, unevaluated)."""
    def rebuild(e, args):
        f = funcs.get(e.func)
        if f is not None:
            return f(*args, evaluate=False)
        return e if _same(e, args) else e.func(*args)
    return _transform(expr, {}, rebuild)


def check_value(name: str, value):
    """The number ``value`` of symbol ``name`` for ``--set``, or a one-line InputError naming the rule."""
    from ...base.schema import number

    where = f"--set {name}"
    if name in INTEGER_SYMBOLS:
        return number(value, f"{where} (a count or size)", int, low=1)
    if name in COUNT_OR_ZERO_SYMBOLS:
        return number(value, f"{where} (a count or size, 0 for none)", int, low=0)
    if name in SWITCH_SYMBOLS:
        return number(value, f"{where} (a 0/1 switch)", int, low=0, high=1)
    if name.startswith("ov_"):
        return number(value, f"{where} (a fraction)", float, low=0.0, high=1.0)
    if name == "clock" or name.startswith(("eta_", "mu_")):
        return number(value, f"{where} (an efficiency)", float, low=0.0, high=1.0, low_open=True)
    if name in POSITIVE_SYMBOLS or "/time" in SYMBOLS[name].dim:
        return number(value, where, float, low=0.0, low_open=True)
    return number(value, where, float, low=0.0)


def _exact(v) -> sp.Expr:
    """A --set number as an exact sympy number (integers stay integers; 0.85 -> 17/20, base-10 digits)."""
    if float(v) == int(v) and abs(v) < 2 ** 63:
        return sp.Integer(int(v))
    return sp.nsimplify(float(v), rational=True)


def substitute(expr: sp.Expr, mapping: dict) -> sp.Expr:
    """``expr`` with the symbols of ``mapping`` replaced, each distinct subexpression rebuilt once.

    The step formulas are DAGs with much sharing (step_time: ~2.5e5 operations as a tree, a few thousand
    distinct nodes); ``Expr.subs``/``xreplace`` walk the tree, re-evaluating every Max/ceiling/Piecewise copy
    (minutes for ``--quantity step_time --gpu ...``).
    """
    return _transform(expr, dict(mapping), lambda e, args: e if _same(e, args) else _rebuild(e.func, args))


def _same(e: sp.Expr, args: list) -> bool:
    return all(a is b for a, b in zip(args, e.args))


def _transform(expr: sp.Expr, memo: dict, rebuild) -> sp.Expr:
    """``expr`` rebuilt bottom-up by ``rebuild(node, new_args)``: post-order, iterative (no recursion limit),
    each distinct node once (``memo``: node -> its replacement, seeded with the substitutions)."""
    stack = [(expr, False)]
    while stack:
        e, ready = stack.pop()
        if e in memo:
            continue
        if not e.args:
            memo[e] = e
            continue
        if not ready:
            stack.append((e, True))
            stack.extend((a, False) for a in e.args if a not in memo)
            continue
        memo[e] = rebuild(e, [memo[a] for a in e.args])
    return memo[expr]


def _rebuild(func, args):
    """``func(*args)``; Max/Min keep their symbolic arguments as they are (sympy's evaluation of Max/Min looks
    for arguments that dominate others, with factor_terms on every pair: most of the minutes) and fold the
    numeric ones into one."""
    if func in (sp.Max, sp.Min):
        nums = [a for a in args if a.is_number and a.is_comparable]
        rest = [a for a in args if not (a.is_number and a.is_comparable)]
        if nums:
            rest.append(func(*nums))          # numbers only: evaluated (cheap)
        if len(rest) == 1:
            return rest[0]
        # unevaluated, in the order the arguments come: even Max(..., evaluate=False) sorts them with sympy's
        # ``ordered``, whose key counts the nodes of each argument as a tree (the shared step-time DAG is ~1e8 nodes
        # as a tree: minutes for `formulas --quantity step_time --set ...`)
        obj = sp.Expr.__new__(func, *rest)
        obj._argset = frozenset(rest)
        return obj
    if func is sp.Heaviside and not args[0].is_number:
        # a step of a symbolic difference stays a step: sympy's evaluation asks the sign of the whole argument (two
        # stage times), which compares Max terms and can fail on them ('zoo is not comparable')
        return func(*args, evaluate=False)
    return func(*args)


def distinct_nodes(expr: sp.Expr) -> tuple[int, bool]:
    """(distinct nodes of ``expr``; whether any is zoo/nan/oo), each shared copy visited once."""
    seen, stack, bad = set(), [expr], False
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        bad = bad or e in (sp.zoo, sp.nan, sp.oo, -sp.oo)
        stack.extend(e.args)
    return len(seen), bad


def check_values(values: dict) -> dict:
    """The --set values, each checked by :func:`check_value` (before any formula is built)."""
    bad = [k for k in values if k not in SYMBOLS]
    if bad:
        raise InputError(f"--set: unknown symbol(s) {', '.join(bad)}; see `formulas --symbols`")
    for k, v in values.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Real):      # numpy numbers too
            raise InputError(f"--set {k}: expected a number, got {v!r}")
    neg = [f"{k}={v}" for k, v in values.items() if not (math.isfinite(v) and v >= 0)]
    if neg:     # every symbol is a size, count, rate, time or 0/1 switch
        raise InputError(f"--set: values must be finite and >= 0, got {', '.join(neg)}")
    return {k: check_value(k, v) for k, v in values.items()}


def _formulas():
    """(quantities: name -> (dimension, description); a function name -> expression): from the stored graph when
    it is current (no formula module imported: they build sympy terms at import), else from ``step.build()``."""
    data = dag.read()
    if data is not None:
        return data["quantities"], lambda name: dag.rebuild(data, [name])[name]
    from . import step
    return step.QUANTITIES, lambda name: step.build()[name]


def expression(quantity: str, values: dict | None = None, formulas=None) -> sp.Expr:
    """The sympy expression of ``quantity`` with the symbols in ``values`` substituted (checked first,
    substituted once per distinct subexpression, simplified only when the result is small)."""
    quantities, get = formulas or _formulas()
    if quantity not in quantities:        # before loading or building the formulas: a typo is refused at once
        raise InputError(f"unknown quantity {quantity!r}; known: {', '.join(quantities)}")
    values = check_values(values) if values else None
    expr = get(quantity)
    if values:
        try:
            expr = substitute(expr, {SYMBOLS[k].symbol: _exact(v) for k, v in values.items()})
        except (ValueError, TypeError, ZeroDivisionError, ArithmeticError):    # e.g. Max(zoo, ...): not comparable
            expr = sp.nan
        n, undefined = distinct_nodes(expr)
        if undefined:
            given = " ".join(f"{k}={v:g}" for k, v in values.items())
            raise InputError(f"--set: {quantity} is undefined (a division by zero) at {given}")
        if n < MAX_SIMPLIFY_NODES:
            expr = tidy(expr)
    return expr


MAX_PLAIN_NODES = 400    # larger results print as named common subexpressions (sympy's cse) without term sorting


def _pieces(expr: sp.Expr):
    """(subexpressions, result): ``expr`` split by sympy's cse into named pieces when it is large.

    The whole-step closed forms are DAGs that print to megabytes as one tree (step_time: ~2 MB of text, minutes
    in sympy's default printers, which sort every Add/Mul's terms); as named pieces they are a few kB, printed
    unsorted in well under a second. Small results print whole, in sympy's usual term order."""
    if distinct_nodes(expr)[0] <= MAX_PLAIN_NODES:
        return [], expr
    return shared_pieces(expr)


def shared_pieces(expr: sp.Expr, prefix: str = "x"):
    """(subexpressions, result): every compound node that ``expr`` uses more than once named ``x0, x1, ...`` in the
    order it is first needed. One linear pass over the distinct nodes: sympy's cse, on the step formulas, spends
    seconds sorting the terms of sums whose arguments are large trees (could_extract_minus_sign)."""
    uses: dict = {}
    seen, stack = set(), [expr]
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        for a in e.args:
            uses[a] = uses.get(a, 0) + 1
            stack.append(a)
    names = sp.numbered_symbols(prefix)
    subs = []

    def rebuild(e, args):
        new = e if _same(e, args) else _rebuild(e.func, args)
        negated_atom = new.is_Mul and len(new.args) == 2 and new.args[0] == -1 and new.args[1].is_Atom
        if (uses.get(e, 0) > 1 and isinstance(new, sp.Expr) and not isinstance(new, ExprCondPair)
                and not new.is_Atom and not negated_atom):
            name = next(names)
            subs.append((name, new))
            return name
        return new
    return subs, _transform(expr, {}, rebuild)


def export(quantity: str, fmt: str = "latex", values: dict | None = None) -> str:
    """``quantity`` as text in ``fmt`` (latex, python, sympy, json); large results as named subexpressions."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    formulas = _formulas()
    expr = expression(quantity, values, formulas)
    subs, result = _pieces(expr)
    order = {"order": "none"} if subs else {}
    names = latex_names()
    names.update({s: s.name.replace("x", "x_{", 1) + "}" for s, _ in subs})

    def latex(e):
        return sp.latex(e, symbol_names=names, **order)

    def text(e):
        return sp.sstr(e, **order)

    if fmt == "latex":
        if not subs:
            return latex(result)
        lhs = "\\mathrm{" + quantity.replace("_", "\\_") + "}"
        rows = [f"{names[s]} &= {latex(e)}" for s, e in subs] + [f"{lhs} &= {latex(result)}"]
        return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"
    if fmt == "sympy":
        return "\n".join([f"{s} = {text(e)}" for s, e in subs] + [text(result) if not subs else f"{quantity} = {text(result)}"])
    if fmt == "python":
        from .codegen import _Printer
        pr = _Printer({"fully_qualified_modules": True, **order})
        args = sorted(s.name for s in dag.symbols_of(expr))
        body = [f"    {s} = {pr.doprint(e)}" for s, e in subs] + [f"    return {pr.doprint(result)}"]
        return (f"import numpy as np\n\n\ndef {quantity}({', '.join(args)}):\n" + "\n".join(body) + "\n").replace(
            "numpy.", "np.")
    dim, doc = formulas[0].get(quantity, ("", ""))
    used = sorted(s.name for s in dag.symbols_of(expr))
    out = {"quantity": quantity, "dimension": dim or "1", "description": doc}
    if subs:
        out["subexpressions"] = {str(s): {"sympy": text(e), "latex": latex(e)} for s, e in subs}
    out.update({"sympy": text(result), "latex": latex(result),
                "symbols": {n: {"dimension": SYMBOLS[n].dim or "1", "description": SYMBOLS[n].doc} for n in used}})
    return json.dumps(out, indent=1)
