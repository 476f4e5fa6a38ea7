"""Fitting recovers known roofline and alpha-beta parameters from noisy samples with outliers."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from roofline.views.calibrate import fit


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


def _attn_samples(eta, shape, t0, n, rng, sms=108.0):
    """Flash-attention-like samples on the upstream grid: head dims 32-256 (some off the 32-grid), grids of
    4-25600 thread blocks in waves of 108, key blocks of 64 or 128; compute-bound (y << x)."""
    d = rng.choice(np.arange(32.0, 257.0, 8.0), n)
    ctas = np.round(10 ** rng.uniform(0.6, 4.4, n))
    kblock = np.where(d <= 128, 128.0, 64.0)
    attn = (d, ctas, kblock, np.full(n, sms))
    x = 10 ** rng.uniform(-5, -2, n)
    s = fit.Samples(x, x / 100, None, np.ones(n), attn)
    t = fit.roofline_time(s, fit.Roofline(eta, 1.0, t0, shape))
    return fit.Samples(x, x / 100, None, t * np.exp(rng.normal(0, 0.01, n)), attn)


@settings(max_examples=6, deadline=None)
@given(eta=st.floats(0.4, 0.95), d_soft=st.floats(10, 100), d_reg=st.floats(150, 800), uneven=st.floats(0.05, 0.4),
       d_io=st.floats(10, 100), seed=st.integers(0, 10**6))
def test_attention_shape_constants_recovered(eta, d_soft, d_reg, uneven, d_io, seed):
    """The four flash-attention shape constants (compute.attention_shape) and eta come back from 1%-noise samples."""
    rng = np.random.default_rng(seed)
    truth = (d_soft, d_reg, uneven, d_io)
    r = fit.fit_roofline({"fwd": _attn_samples(eta, truth, 5e-6, 600, rng)}, fit_shape=True)
    f = r.fits["fwd"]
    assert abs(f.eta / eta - 1) < 0.1
    for got, want in zip(f.shape, truth):
        assert abs(got / want - 1) < 0.2, (f.shape, truth)
    assert r.mape["fwd"] < 0.02


def test_attention_shape_matches_the_formula_and_reduces_to_gemm_saturation():
    """fit.roofline_time uses compute.attention_shape; with d_soft = dhalf, no other term and full waves it is
    (d + dhalf) / d; one thread block more than the SMs hold costs a second wave."""
    import sympy as sp
    from roofline.model.formulas import compute as C
    d, ctas, kb = np.array([40.0, 64.0, 128.0, 200.0]), np.array([8.0, 100.0, 1000.0, 5e4]), np.array([128, 128, 128, 64.0])
    got = C.attention_shape(d, ctas, kb, 108.0, 30.0, 400.0, 0.2, 20.0, ceil=np.ceil, lo=np.minimum)
    sym = [float(C.attention_shape(sp.Integer(int(a)), sp.Integer(int(b)), sp.Integer(int(k)), 108, 30, 400,
                                   sp.Rational(1, 5), 20)) for a, b, k in zip(d, ctas, kb)]
    assert np.allclose(got, sym)
    # head dim 40 runs the 64-wide kernel with predicated loads: padding x (1 + uneven) over the even 64
    base = C.attention_shape(64.0, 8.0, 128.0, 108.0, 30.0, 400.0, 0.2, 20.0, ceil=np.ceil, lo=np.minimum)
    assert abs(got[0] / base - 64 / 40 * 1.2) < 1e-12
    even = C.attention_shape(np.array([64.0, 128.0]), np.array([108.0, 216.0]), 128.0, 108.0, 48.0, np.inf, 0.0, 0.0,
                             ceil=np.ceil, lo=np.minimum)
    assert np.allclose(even, (np.array([64.0, 128.0]) + 48) / np.array([64.0, 128.0]))
    waves = C.attention_shape(64.0, np.array([108.0, 109.0]), 128.0, 108.0, 48.0, np.inf, 0.0, 0.0, ceil=np.ceil,
                              lo=np.minimum)
    assert waves[1] / waves[0] == pytest.approx(216 / 109)


def test_flash_blocks_follow_flashattention2():
    """Key blocks of FlashAttention-2 on sm80/sm90: forward 128 up to head dim 64, backward 128 up to 128."""
    import sympy as sp
    from roofline.model.formulas import compute as C
    got = [tuple(int(b) for b in C.flash_blocks(sp.Integer(d))) for d in (32, 64, 80, 128, 160, 256)]
    assert got == [(128, 128), (128, 128), (64, 128), (64, 128), (64, 64), (64, 64)]


def _bmm_samples(eta, mu, t0, dhalf, rho, n, rng):
    """Batched-GEMM samples like the unfused attention's: head dims 32-512 as the reduction of a short-K
    kernel (s x s output) or the width of a long-K one (the s x s operand re-read per 128 columns)."""
    s = rng.choice([1024.0, 2048.0, 4096.0], n)
    d = rng.choice(np.arange(32.0, 513.0, 16.0), n)
    bh = rng.choice([8.0, 32.0, 128.0], n)
    flops = 2 * bh * s * s * d / 312e12
    short = (flops, 2 * bh * (2 * s * d + s * s) / 2e12, 0 * s, d)
    long_ = (flops, 2 * bh * (2 * s * d + s * s) / 2e12, 2 * bh * s * s * (np.ceil(d / 128) - 1) / 2e12, s)
    pick = rng.integers(0, 3, n)   # short; long; short + long (as bmm backward)
    kern = tuple(np.stack([np.where(pick == 1, b, a), np.where(pick == 2, b, 0 * a)], axis=1)
                 for a, b in zip(short, long_))
    x = kern[0].sum(axis=1)
    smp = fit.Samples(x, x, None, np.ones(n), None, kern)
    t = fit.roofline_time(smp, fit.Roofline(eta, mu, t0, (dhalf, rho)))
    return fit.Samples(x, x, None, t * np.exp(rng.normal(0, 0.01, n)), None, kern)


def test_bmm_constants_recovered_and_eta_bounded():
    """eta, mu, t0 and the batched-GEMM constants (compute.bmm_time: write-out dhalf, L2-miss fraction of the
    extra passes) come back from 1%-noise samples; eta_max bounds eta inside the fit."""
    rng = np.random.default_rng(3)
    truth = dict(eta=0.7, mu=0.8, t0=10e-6, dhalf=200.0, rho=0.6)
    g = {"fwd": _bmm_samples(*truth.values(), 800, rng)}
    f = fit.fit_roofline(g, fit_shape=True).fits["fwd"]
    assert abs(f.eta / 0.7 - 1) < 0.05 and abs(f.mu / 0.8 - 1) < 0.05 and abs(f.t0 / 10e-6 - 1) < 0.2
    assert abs(f.shape[0] / 200 - 1) < 0.1 and abs(f.shape[1] - 0.6) < 0.05
    assert fit.fit_roofline(g, fit_shape=True, eta_max=0.6).fits["fwd"].eta <= 0.6 + 1e-9


def test_host_floor_separates_host_bound_spans():
    """Spans of an op that issues many small kernels are max(host issue time, GPU time): the floor is fitted and
    the GPU roofline below it recovered."""
    rng = np.random.default_rng(4)
    y = 10 ** rng.uniform(-5, -2.5, 300)
    t = np.maximum(300e-6, 80e-6 + y / 0.6) * np.exp(rng.normal(0, 0.01, 300))
    r = fit.fit_roofline({"bwd": fit.Samples(y / 100, y, None, t)}, host_floor=True)
    f = r.fits["bwd"]
    assert abs(f.floor / 300e-6 - 1) < 0.05 and abs(f.t0 / 80e-6 - 1) < 0.15 and abs(f.mu / 0.6 - 1) < 0.05
    assert r.mape["bwd"] < 0.02
    plain = fit.fit_roofline({"bwd": fit.Samples(y / 100, y, None, t)})
    assert plain.mape["bwd"] > 2 * r.mape["bwd"]
