"""Fitting recovers known roofline and alpha-beta parameters from noisy samples with outliers."""
import numpy as np
from hypothesis import given, settings, strategies as st

from roofline.calibrate import fit


def _synthetic(eta, mu, t0, n, rng, dmin=None, dhalf=None):
    x = 10 ** rng.uniform(-5, -2, n)                 # ideal compute time (s)
    y = x * 10 ** rng.uniform(-1.5, 1.5, n)          # ideal memory time: both bounds bind somewhere
    s = fit.Samples(x, y, dmin, np.ones(n))
    t = fit.roofline_time(s, fit.Roofline(eta, mu, t0), dhalf)
    return fit.Samples(x, y, dmin, t * np.exp(rng.normal(0, 0.01, n)))


@settings(max_examples=8, deadline=None)
@given(eta=st.floats(0.2, 0.95), mu=st.floats(0.2, 0.95), t0=st.floats(0, 20e-6), seed=st.integers(0, 10**6))
def test_roofline_recovers_parameters_and_flags_outliers(eta, mu, t0, seed):
    rng = np.random.default_rng(seed)
    s = _synthetic(eta, mu, t0, 300, rng)
    bad = rng.choice(300, 10, replace=False)
    t = s.t.copy()
    t[bad] *= rng.choice([0.2, 5.0], 10)             # planted outliers: a factor 5 off
    r = fit.fit_roofline({"fwd": fit.Samples(s.x, s.y, None, t)})
    f = r.fits["fwd"]
    assert abs(f.eta / eta - 1) < 0.05 and abs(f.mu / mu - 1) < 0.05
    assert abs(f.t0 - t0) < 2e-6
    assert set(bad) <= set(np.flatnonzero(r.flagged["fwd"]))
    assert r.flagged["fwd"].sum() <= 20
    assert r.mape["fwd"] < 0.03


def test_dhalf_shared_between_directions():
    rng = np.random.default_rng(1)
    dmin = rng.choice([16.0, 32.0, 64.0, 256.0, 1024.0], 400)
    g = {d: _synthetic(e, 0.8, 5e-6, 400, rng, dmin, 48.0) for d, e in (("fwd", 0.8), ("bwd", 0.7))}
    r = fit.fit_roofline(g, fit_dhalf=True)
    assert abs(r.dhalf / 48 - 1) < 0.1
    assert abs(r.fits["bwd"].eta / 0.7 - 1) < 0.05


def test_bounds_hold():
    rng = np.random.default_rng(2)
    s = _synthetic(1.0, 1.0, 0.0, 50, rng)
    s = fit.Samples(s.x, s.y, None, s.t * 0.5)       # faster than the peaks allow: bounded at 1
    f = fit.fit_roofline({"fwd": s}).fits["fwd"]
    assert 0 < f.eta <= 1 and 0 < f.mu <= 1 and f.t0 >= 0


@settings(max_examples=8, deadline=None)
@given(alpha=st.floats(1e-6, 50e-6), bw=st.floats(1e9, 400e9), p=st.integers(2, 16),
       kind=st.sampled_from(["ar", "ag", "rs", "a2a", "p2p"]), seed=st.integers(0, 10**6))
def test_alpha_beta_recovered_with_outliers(alpha, bw, p, kind, seed):
    rng = np.random.default_rng(seed)
    size = 2.0 ** rng.uniform(10, 30, 200)
    t = fit.alpha_beta_time(size, p, kind, alpha, bw) * np.exp(rng.normal(0, 0.01, 200))
    bad = rng.choice(200, 6, replace=False)
    t[bad] *= 10
    f = fit.fit_alpha_beta(size, np.full(200, p), t, kind)
    assert abs(f.busbw / bw - 1) < 0.05
    assert abs(f.alpha - alpha) < 0.1 * alpha + 0.5e-6
    assert set(bad) <= set(np.flatnonzero(f.flagged))
    assert f.mape < 0.03


def test_nccl_tests_conventions():
    assert fit.bus_factor("ar", 8) == 1.75 and fit.bus_factor("ag", 8) == 0.875
    assert fit.ring_steps("ar", 4) == 6 and fit.ring_steps("p2p", 2) == 1
    assert float(fit.busbw(1e9, 1e-2, "ar", 2)) == 1e11


def _attn_samples(eta, shape, t0, n, rng):
    """Flash-attention-like samples on the upstream grid: head dims 32-256 (some off the 32-grid), grids of
    4-25600 thread blocks; compute-bound (y << x)."""
    d = rng.choice(np.arange(32.0, 257.0, 8.0), n)
    ctas = 10 ** rng.uniform(0.6, 4.4, n)
    x = 10 ** rng.uniform(-5, -2, n)
    s = fit.Samples(x, x / 100, None, np.ones(n), (d, ctas))
    t = fit.roofline_time(s, fit.Roofline(eta, 1.0, t0, shape))
    return fit.Samples(x, x / 100, None, t * np.exp(rng.normal(0, 0.01, n)), (d, ctas))


@settings(max_examples=6, deadline=None)
@given(eta=st.floats(0.4, 0.95), d_soft=st.floats(10, 100), d_reg=st.floats(150, 800), uneven=st.floats(0.05, 0.4),
       ctas_half=st.floats(10, 150), seed=st.integers(0, 10**6))
def test_attention_shape_constants_recovered(eta, d_soft, d_reg, uneven, ctas_half, seed):
    """The four flash-attention shape constants (compute.attention_shape) and eta come back from 1%-noise samples."""
    rng = np.random.default_rng(seed)
    truth = (d_soft, d_reg, uneven, ctas_half)
    r = fit.fit_roofline({"fwd": _attn_samples(eta, truth, 5e-6, 600, rng)}, fit_shape=True)
    f = r.fits["fwd"]
    assert abs(f.eta / eta - 1) < 0.1
    for got, want in zip(f.shape, truth):
        assert abs(got / want - 1) < 0.2, (f.shape, truth)
    assert r.mape["fwd"] < 0.02


def test_attention_shape_matches_the_formula_and_reduces_to_gemm_saturation():
    """fit.roofline_time uses compute.attention_shape; with d_soft = dhalf and no other term it is (d + dhalf) / d."""
    import sympy as sp
    from roofline.formulas import compute as C
    d, ctas = np.array([40.0, 64.0, 128.0, 200.0]), np.array([8.0, 100.0, 1000.0, 5e4])
    got = C.attention_shape(d, ctas, 30.0, 400.0, 0.2, 50.0, ceil=np.ceil, lo=np.minimum)
    sym = [float(C.attention_shape(sp.Integer(int(a)), sp.Float(b), 30, 400, sp.Rational(1, 5), 50)) for a, b in zip(d, ctas)]
    assert np.allclose(got, sym)
    # head dim 40 runs the 64-wide kernel with predicated loads: padding x (1 + uneven) over the even 64
    base = C.attention_shape(64.0, 8.0, 30.0, 400.0, 0.2, 50.0, ceil=np.ceil, lo=np.minimum)
    assert abs(got[0] / base - 64 / 40 * 1.2) < 1e-12
    even = C.attention_shape(np.array([64.0, 128.0]), np.array([1.0, 1.0]), 48.0, np.inf, 0.0, 0.0, ceil=np.ceil, lo=np.minimum)
    assert np.allclose(even, (np.array([64.0, 128.0]) + 48) / np.array([64.0, 128.0]))
