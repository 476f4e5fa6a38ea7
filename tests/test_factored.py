"""model/factored.py: the compiled formulas over many plans, each line run once per distinct combination of the knobs
it reads, give the numbers of the plain evaluation over every plan (predict.evaluator), for every output the search
reads, over real search spaces of dense, MoE and MLA models on several stacks and GPU counts."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from roofline.model import factored
from roofline.model.predict import evaluator

OUTS = ("step_time", "memory", "mem_reserve", "mfu", "hfu", "tokens_per_s", "micro_batches", "pp_bubble_share",
        "t_ep_comm")
_SPACES = {}


def _space(model, gpu, gpus, batch, framework):
    """The formula inputs of every plan of a real search (the pricing pass's, captured from evaluate_space)."""
    key = (model, gpu, gpus, batch, framework)
    if key not in _SPACES:
        from roofline.spec import hardware, models
        from roofline.views import space as SP

        captured = {}
        real = SP.evaluate_arrays

        def spy(x, n, outputs=SP._OUT, **kw):
            if "step_time" in outputs:
                captured.setdefault("x", (x, n))
            return real(x, n, outputs, **kw)

        SP.evaluate_arrays = spy
        try:
            SP.evaluate_space(models.load(model), hardware.load(gpu), gpus, batch, framework=framework)
        finally:
            SP.evaluate_arrays = real
        _SPACES[key] = captured["x"]
    return _SPACES[key]


def _same(a, b):
    """Equal to rounding (numpy's vectorized and scalar math may differ in the last bit), NaN where NaN."""
    assert np.array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(a)
    assert np.allclose(a[ok], b[ok], rtol=1e-12, atol=0)


CASES = [("gpt3-175b", "a100-sxm4-80gb", 256, 512, "megatron-core"),
         ("llama3-8b", "h100-sxm", 64, 256, "torchtitan"),
         ("mixtral-8x7b", "h100-sxm", 64, 512, "megatron-core"),
         ("deepseek-v3", "h100-sxm", 256, 1024, "megatron-core"),
         ("gpt3-13b", "a100-sxm4-80gb", 96, 192, "deepspeed")]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(CASES), st.sampled_from([512, 4096, 8192]), st.booleans(), st.integers(1, 20000),
       st.integers(0, 2 ** 32 - 1))
def test_factored_equals_the_plain_evaluation(case, chunk, always, size, seed):
    """Every output of the factored evaluation equals the plain one over the plans (a random subset, in any order, so
    the knobs' distinct values and their repeats vary), and with the codes of a larger set passed in (the sizing
    pass's, reused for the plans that fit); ``always``: the spaces the greedy choice finds are used even where the cost
    model would keep the plans' own rows (so the factored path runs on small subsets too)."""
    x, n = _space(*case)
    rows = np.random.default_rng(seed).choice(n, min(n, size), replace=False)     # in random order
    arrays = [k for k, v in x.items() if isinstance(v, np.ndarray) and v.ndim]
    xs = {k: (v[rows] if k in arrays else v) for k, v in x.items()}
    outs = tuple(o for o in OUTS if o != "t_ep_comm" or "moe" in case[0] or "deepseek" in case[0] or "mixtral" in case[0])
    with np.errstate(all="ignore"):
        plain = evaluator(outs)(xs)
    worth = factored._WORTH
    factored._WORTH = float("inf") if always else worth
    try:
        got = factored.evaluate(outs, xs, len(rows), chunk=chunk)
        codes = {k: (vals, c[rows]) for k, (vals, c) in factored.codes_of(x, n).items()}
        again = factored.evaluate(outs, xs, len(rows), chunk=chunk, codes=codes)
    finally:
        factored._WORTH = worth
    for o in outs:
        want = np.broadcast_to(plain[o], (len(rows),)).astype(float)
        _same(got[o], want)
        _same(again[o], want)


def test_the_factored_path_groups_the_plans(monkeypatch):
    """On the plans of GPT-3 175B's search the timing pass runs in spaces smaller than the plans (factored._group is
    called and its groups are fewer than the plans), and gives the plain numbers."""
    x, n = _space(*CASES[0])
    calls = []
    real = factored._group

    def spy(codes, radices, m, rows):
        rep, inv = real(codes, radices, m, rows)
        calls.append((len(rep), m))
        return rep, inv

    monkeypatch.setattr(factored, "_group", spy)
    outs = ("step_time", "mfu")
    got = factored.evaluate(outs, x, n)
    assert calls and all(groups < m for groups, m in calls)
    with np.errstate(all="ignore"):
        plain = evaluator(outs)(x)
    for o in outs:
        _same(got[o], np.broadcast_to(plain[o], (n,)).astype(float))


def test_factored_runs_most_lines_over_few_rows():
    """On GPT-3 175B's plans the chosen spaces hold most of the work in far fewer rows than plans (the point of it):
    the modelled work is below half the plain evaluation's."""
    x, n = _space(*CASES[0])
    prog, _ = factored.program(("step_time", "memory"))
    codes = factored.codes_of(x, n)
    radix = {k: len(v) for k, (v, _c) in codes.items() if len(v) > 1}
    deps = factored._dependencies(prog, frozenset(radix))
    lines = [(deps[t], ops) for t, _e, _n, _i, ops in prog]
    spaces = factored.choose_spaces(lines, radix, n)
    assert spaces and all(np.prod([radix[k] for k in s]) < n for s in spaces)
    plain = sum(ops * n for d, ops in lines if d)
    rows = sum(ops * min([n] + [min(n, int(np.prod([radix[k] for k in s]))) for s in spaces if d <= s])
               for d, ops in lines if d)
    assert rows < plain / 2


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 2)), min_size=1, max_size=200))
def test_groups_are_the_distinct_code_tuples(rows):
    """factored._group: plans in one group share every code; plans in different groups differ in one; the
    representative row of a group belongs to it."""
    a = np.array(rows)
    n = len(a)
    rep, inv = factored._group([a[:, 0], a[:, 1], a[:, 2]], [4, 6, 3], n, np.arange(n))
    assert len(rep) == len({tuple(r) for r in rows})
    assert np.array_equal(inv[rep], np.arange(len(rep)))
    assert np.array_equal(a[rep][inv], a)


@given(st.lists(st.one_of(st.integers(0, 3000), st.sampled_from([0.5, 1.0, 2.0, 0.25, 7.0, 1 / 3]),
                          st.integers(-5, -1)), max_size=9000), st.booleans())
def test_factorize_is_np_unique(values, as_float):
    """factored.factorize (counting pass, or a sample's distinct values checked over the column) returns
    np.unique(col, return_inverse=True), long columns included (the sample is strided)."""
    col = np.array(values, dtype=float if as_float or any(isinstance(v, float) for v in values) else np.int64)
    got, want = factored.factorize(col), np.unique(col, return_inverse=True)
    assert np.array_equal(got[0], want[0]) and np.array_equal(np.ravel(got[1]), np.ravel(want[1]))


def test_an_unknown_output_is_refused():
    with pytest.raises(KeyError, match="not an output"):
        factored.evaluate(("no_such_output",), {}, 0)
