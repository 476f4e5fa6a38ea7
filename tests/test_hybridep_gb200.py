"""The gb200 profile's MoE all-to-all is NVIDIA's measured Hybrid-EP on GB200 NVL72 (benchmarks/hybridep_gb200.py)."""
import sympy as sp

from conftest import load_benchmark
from roofline.model.formulas import comm as CM
from roofline.model.formulas import symbols as S
from roofline.spec import hardware

B = load_benchmark("hybridep_gb200")


def test_the_profile_carries_the_fit_of_the_bundled_table():
    f = B.fit()
    hw = hardware.load("gb200")
    alpha, busbw = hw.collectives["a2a", "intra"]
    assert abs(alpha / f.alpha - 1) < 0.01 and abs(busbw / f.busbw - 1) < 0.01
    assert abs(hw.collective_calls["a2a", "intra"] / f.call - 1) < 0.01
    assert f.n == 15 and f.mape < 0.05            # k-fold error of the fit
    # only the all-to-all is fitted: the other collectives keep the link prior
    assert hw.collectives["ar", "intra"] == hardware.load("b200").collectives["ar", "intra"]


def test_fit_prices_every_measured_call_within_5_percent_where_the_link_prior_was_up_to_28_percent_fast():
    rows = B.table()
    assert len(rows) == 15
    fitted = [abs(b / a - 1) for _, _, _, a, b, _ in rows]
    prior = [c / a - 1 for _, _, _, a, _, c in rows]
    assert max(fitted) < 0.05
    assert min(prior) < -0.2 and max(prior) < 0


def test_the_dispatch_formula_prices_the_benchmark_call_as_the_fit_does():
    """formulas/comm.py dispatch_a2a with dedup 1 (Hybrid-EP sends a token once per rank holding one of its experts),
    on the gb200 profile, for the benchmark's 32-rank BF16 dispatch: the same seconds as the fit's alpha-beta time up to
    the routing draw (with replacement in the formula, without in the benchmark: under 1 %)."""
    hw = hardware.load("gb200")
    p, token_bytes = 32, B.TOKENS * B.HIDDEN * 2
    e = CM.dispatch_a2a(token_bytes, B.TOPK, p, 1, 1)
    (alpha, busbw), call = hw.collectives["a2a", "intra"], hw.collective_calls["a2a", "intra"]
    t = float(e.subs({S.gpus_per_node: hw.gpus_per_node, S.ALPHA["a2a", "intra"]: alpha,
                      S.BUSBW["a2a", "intra"]: busbw, S.CALL["a2a", "intra"]: call,
                      S.ALPHA["a2a", "inter"]: 1.0, S.BUSBW["a2a", "inter"]: 1.0, S.CALL["a2a", "inter"]: 1.0}))
    measured = next(a for n, op, dt, a, _, _ in B.table() if (n, op, dt) == (p, "dispatch", "bf16")) * 1e-6
    assert abs(t / measured - 1) < 0.03


def test_b200_takes_the_fit_and_its_own_node_sits_closer_to_it_than_to_the_link_prior():
    from roofline.views.calibrate.fit import alpha_beta_time

    b200, gb200 = hardware.load("b200"), hardware.load("gb200")
    assert b200.collectives["a2a", "intra"] == gb200.collectives["a2a", "intra"]
    assert b200.collective_calls["a2a", "intra"] == gb200.collective_calls["a2a", "intra"]
    rows = B.b200_check()
    assert len(rows) == 3
    for n, op, dt, measured, fitted in rows:
        assert abs(fitted / measured - 1) < (0.12 if dt == "fp8" else 0.06), (op, dt)
    size, p, t = B.samples(B.rows(16, path=B.B200))
    prior = alpha_beta_time(size, p, "a2a", *B.datasheet())
    assert all(pr / m - 1 < -0.2 for pr, m in zip(prior, t))
