"""calibrate ... --plot PNG: the figure of a fit. Its panels are data first: every fitted class's samples with the
fitted roofline's time at each (the time the profile written beside it prices), every fitted collective's measured
bus bandwidth with the fitted curve; a bad --plot path is one line before any work, and nothing is written."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.views.calibrate import fit, fit_plot
from roofline.views.calibrate import importers as I
from roofline.views.calibrate import profile as P

from test_calibrate_simumax import _table


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    p = tmp_path_factory.mktemp("plot") / "planted.json"
    p.write_text(json.dumps(_table(0.55, 60.0, 5e-6, 3)))
    im = I.import_simumax(p, "b200")
    peaks = P.Peaks(2250e12, 1e14, 8e12)
    return im, peaks, P.fit_compute(im.ops, peaks, k=3)


def test_compute_panels_hold_every_fitted_sample_at_the_fitted_curve(planted):
    im, peaks, compute = planted
    panels = fit_plot.compute_panels(im.ops, compute, peaks)
    assert {(p.cls, p.direction) for p in panels} == {("gemm", d) for d in compute["gemm"][0].fits}
    rf = compute["gemm"][0]
    for p in panels:
        s, _ = P.class_samples(im.ops, "gemm", p.direction, peaks)
        r = rf.fits[p.direction]
        assert len(p.measured) == len(p.fitted) == len(p.flagged) == len(s.t)
        # the fitted time is the profile's curve: t0 + F / (P eta sat) for these compute-bound GEMMs
        sat = s.dmin / (s.dmin + rf.dhalf)
        assert np.allclose(p.fitted, np.maximum(r.floor, r.t0 + np.maximum(s.x / (r.eta * sat), s.y / r.mu)))
        # the planted table is a noiseless roofline: the fit lands on the samples
        assert np.median(np.abs(p.fitted / p.measured - 1)) < 0.02
        assert p.mape == pytest.approx(rf.mape[p.direction])


@settings(max_examples=10, deadline=None)
@given(alpha=st.floats(1e-6, 50e-6), bw=st.floats(20e9, 900e9), ranks=st.sampled_from([2, 4, 8]),
       kind=st.sampled_from(["ar", "ag", "rs", "a2a"]))
def test_link_panel_busbw_is_the_nccl_tests_convention_and_the_fit_curve_passes_the_samples(alpha, bw, ranks, kind):
    size = np.geomspace(1e5, 1e9, 25)
    t = fit.alpha_beta_time(size, ranks, kind, alpha, bw)
    f = fit.LinkFit(alpha, bw, 0.0, len(t), np.zeros(len(t), bool))
    (panel,) = fit_plot.link_panels({(kind, "intra"): (size, np.full(len(t), ranks), t)}, {(kind, "intra"): f})
    assert np.allclose(panel.busbw, [fit.busbw(s, x, kind, ranks) for s, x in zip(size, t)])
    assert np.allclose(fit_plot.fitted_busbw(panel, ranks, size), panel.busbw)
    # latency costs the small messages: the bus bandwidth rises with the size, towards the fitted one, never above
    assert np.all(np.diff(panel.busbw) > 0) and np.all(panel.busbw < bw)


def test_plot_writes_the_figure(planted, tmp_path):
    im, peaks, compute = planted
    size = np.geomspace(1e5, 1e9, 12)
    t = fit.alpha_beta_time(size, 8, "ar", 5e-6, 200e9)
    links = fit_plot.link_panels({("ar", "intra"): (size, np.full(12, 8), t)},
                                 {("ar", "intra"): fit.LinkFit(5e-6, 200e9, 0.0, 12, np.zeros(12, bool))})
    out = tmp_path / "fit.png"
    fit_plot.plot(str(out), fit_plot.compute_panels(im.ops, compute, peaks), links, title="planted")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_plot_and_bad_plot_path(planted, tmp_path, cli_main):
    p = tmp_path / "sys.json"
    p.write_text(json.dumps(_table(0.5, 50.0, 5e-6, 2)))
    png = tmp_path / "fit.png"
    r = cli_main("calibrate", "import", "simumax", p, "--base", "b200", "--out", tmp_path / "a", "--folds", "3",
                 "--plot", png)
    assert r.returncode == 0, r.stderr
    assert png.stat().st_size > 1000
    r = cli_main("calibrate", "import", "simumax", p, "--base", "b200", "--out", tmp_path / "b", "--folds", "3",
                 "--plot", tmp_path / "no-such-folder" / "fit.png")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--plot" in r.stderr
    assert not (tmp_path / "b.yaml").exists()
    r = cli_main("calibrate", "import", "simumax", p, "--base", "b200", "--out", tmp_path / "c", "--plot",
                 tmp_path / "fit.txt2")
    assert r.returncode == 2 and "image format" in r.stderr and not (tmp_path / "c.yaml").exists()
