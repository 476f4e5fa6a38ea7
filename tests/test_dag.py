"""The stored formula graph (roofline/data/formulas.json) that symbolic export loads instead of building."""
import json

import sympy as sp
from hypothesis import given, settings, strategies as st

from roofline.model.formulas import dag
from roofline.model.formulas.symbols import SYMBOLS

_SYMS = [SYMBOLS[k].symbol for k in ("tp", "pp", "dp", "micro_batch", "seq_len", "d_model")]


def test_stored_graph_is_current():
    # built from the formula sources as they are now: a formula edited without rerunning codegen fails here (fast),
    # and export would silently fall back to building (slow) until it is rerun
    assert dag.read() is not None, "run: python -m roofline.model.formulas.codegen"


def test_stored_graph_names_every_quantity():
    from roofline.model.formulas.step import QUANTITIES
    data = json.loads(dag.PATH.read_text())
    assert set(data["outputs"]) == set(QUANTITIES) == set(data["quantities"])
    assert {k: tuple(v) for k, v in data["quantities"].items()} == QUANTITIES


def test_stale_graph_is_refused(tmp_path):
    data = json.loads(dag.PATH.read_text())
    data["digest"] = "0" * 16
    p = tmp_path / "formulas.json"
    p.write_text(json.dumps(data))
    assert dag.read(p) is None and dag.load(p) is None


_leaf = st.sampled_from(_SYMS) | st.integers(-5, 9).map(sp.Integer) | st.fractions(-3, 3).map(sp.Rational)


def _node(children):
    two = st.tuples(children, children)
    return st.one_of(
        two.map(lambda a: sp.Add(*a)), two.map(lambda a: sp.Mul(*a)),
        two.map(lambda a: sp.Max(*a)), two.map(lambda a: sp.Min(*a)),
        children.map(sp.ceiling), children.map(sp.floor),
        st.tuples(children, st.integers(-2, 3)).map(lambda a: sp.Pow(a[0], a[1]) if a[0] != 0 or a[1] > 0 else a[0]),
        two.map(lambda a: sp.Piecewise((a[0], sp.Lt(a[0], a[1])), (a[1], True))),
        children.map(lambda a: sp.Heaviside(a - _SYMS[0])))


@settings(max_examples=60, deadline=None)
@given(st.recursive(_leaf, _node, max_leaves=12))
def test_round_trip_keeps_the_expression(expr):
    # dump -> rebuild gives back an equal expression (same tree and hash), whatever the node kinds
    out = dag.rebuild(json.loads(json.dumps(dag.dump({"q": expr}))))["q"]
    assert out == expr and hash(out) == hash(expr)
