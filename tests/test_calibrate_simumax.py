"""calibrate import simumax: a SimuMax system JSON's measured matmul efficiencies -> this package's GEMM roofline.

Published numbers (the shipped SimuMax B200 table) for the sample arithmetic, planted curves for the fit, and the
shipped profile checked against a fresh import of the shipped file."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings, strategies as st

from roofline.base.errors import InputError
from roofline.spec import hardware
from roofline.views.calibrate import importers as I
from roofline.views.calibrate import profile as P

ROOT = Path(__file__).resolve().parents[1]
SIMUMAX = ROOT / "roofline" / "data" / "simumax-b200" / "b200_bf16_ceperm.json"
PROFILE = ROOT / "roofline" / "spec" / "hardware" / "profiles" / "b200-simumax.yaml"


@pytest.fixture(scope="module")
def b200():
    return I.import_simumax(SIMUMAX, "b200")


def test_samples_are_simumax_times(b200):
    """The first entry of the shipped table, by hand: b=1 m=4096 k=8192 n=10240 TN at 0.6451614102335537 of
    2250 TFLOP/s is a forward GEMM of 2 m k n FLOPs taking 2 m k n / (2250e12 x 0.645...) seconds."""
    fwd = next(o for o in b200.ops if o.op == "gemm" and o.direction == "fwd")
    f = 2 * 4096 * 8192 * 10240
    i = int(np.argmin(np.abs(fwd.flops - f) + np.abs(fwd.dmin - 4096) * 1e9))
    assert fwd.flops[i] == f and fwd.dmin[i] == 4096
    assert fwd.bytes[i] == 2 * (4096 * 8192 + 8192 * 10240 + 4096 * 10240)
    assert fwd.t[i] == pytest.approx(f / (2250e12 * 0.6451614102335537), rel=1e-12)
    raw = json.loads(SIMUMAX.read_text())["accelerator"]["op"]
    counts = {(o.op, o.direction): len(o.t) for o in b200.ops}
    tn = sum("layout=TN" in k for k in raw["matmul"]["accurate_efficient_factor"])
    assert counts["gemm", "fwd"] == tn
    assert counts["gemm", "fwd"] + counts["gemm", "bwd"] == len(raw["matmul"]["accurate_efficient_factor"])
    assert counts["group_matmul", "fwd"] + counts["group_matmul", "bwd"] == len(raw["group_matmul"]["accurate_efficient_factor"])
    assert b200.gpus_per_node == 8 and b200.base == "b200" and not b200.defects


def test_grouped_gemm_sizes(b200):
    """ng=160, M=154, N=3072, K=5120: 160 GEMMs of 154 x 5120 x 3072, 160 weights read, size limited by M."""
    g = next(o for o in b200.ops if o.op == "group_matmul" and o.direction == "fwd")
    f = 2 * 160 * 154 * 3072 * 5120
    i = int(np.argmin(np.abs(g.flops - f)))
    assert g.flops[i] == f and g.dmin[i] == 154
    assert g.bytes[i] == 2 * 160 * (154 * 5120 + 5120 * 3072 + 154 * 3072)


def test_weight_gradient_samples_carry_the_main_grad_traffic(b200):
    """A weight gradient that accumulates (accumulate=True) also reads and writes its main grad: the group entry
    ng=160 M=154 N=3072 K=5120 bwd_grad_w (main_grad_dtype=fp32) moves 160 x 5120 x 3072 x (4 + 4 - 2) bytes more
    than its data gradient; the dense NT entry m=10240 k=4096 n=8192 (out_dtype=fp32) is the weight gradient
    of a 10240 x 8192 weight over 4096 tokens, 10240 x 8192 x 6 bytes more than a plain GEMM of those sizes (x 2 for
    its out_dtype=bf16 twin)."""
    gb = next(o for o in b200.ops if o.op == "group_matmul" and o.direction == "bwd")
    f = 2 * 160 * 154 * 3072 * 5120
    plain = 2 * 160 * (154 * 5120 + 5120 * 3072 + 154 * 3072)
    sizes = set(gb.bytes[(gb.flops == f) & (gb.dmin == 154)])      # its up and down projections: the same sizes
    # data gradient; weight gradient into the fp32 main grad; its main_grad_dtype=bf16 twin (2 + 2 - 2 bytes)
    assert sizes == {plain, plain + 160 * 5120 * 3072 * 6, plain + 160 * 5120 * 3072 * 2}
    db = next(o for o in b200.ops if o.op == "gemm" and o.direction == "bwd")
    f = 2 * 10240 * 4096 * 8192
    plain = 2 * (10240 * 4096 + 4096 * 8192 + 10240 * 8192)
    got = set(db.bytes[db.flops == f])
    assert {plain, plain + 10240 * 8192 * 6, plain + 10240 * 8192 * 2} <= got      # NN; NT into fp32; NT into bf16


def test_main_grad_traffic_explains_simumax_grouped_weight_gradients():
    """SimuMax measured each grouped weight gradient accumulating into an fp32 and into a bf16 main grad (16 shapes,
    128-1232 tokens per expert): the fp32 one takes 1.07-1.83x as long. The backward roofline with the main-grad
    traffic (8 vs 4 bytes per weight element) tracks that on the b200 prior; without the term the ratio is 1."""
    rows = I.simumax_wgrad_ratios(I.SIMUMAX_B200, "b200")
    assert len(rows) == 16
    meas = np.array([r["measured"] for r in rows])
    pred = np.array([r["predicted"] for r in rows])
    with_term, without = np.mean(np.abs(np.log(pred / meas))), np.mean(np.abs(np.log(meas)))
    assert with_term < 0.5 * without and with_term < 0.2
    assert (round(with_term, 2), round(without, 2)) == (0.15, 0.33)     # as docs/calibration.md states them
    assert np.all(pred >= 1 - 1e-12)
    # the figures docs/calibration.md and docs/models.md quote ("up to 1.8x as long", 1.07-1.83 above)
    assert (round(float(meas.min()), 2), round(float(meas.max()), 2)) == (1.07, 1.83)
    assert np.corrcoef(pred, meas)[0, 1] > 0.8          # fewer tokens per expert: more bound by the main grad


def test_docs_quote_the_shipped_transfer_errors():
    """docs/calibration.md quotes the shipped b200-simumax profile's grouped-GEMM transfer errors and backward mu."""
    prov = yaml.safe_load(PROFILE.read_text())
    te, mu = prov["provenance"]["transfer_error"], prov["efficiency"]["gemm"]["bwd"]["mu"]
    text = " ".join((ROOT / "docs" / "calibration.md").read_text().split())
    assert f"{round(100 * te['group_matmul fwd'])} % forward" in text
    assert f"{round(100 * te['group_matmul bwd'])} % backward" in text
    assert f"`mu`, {mu:.2f}," in text


def _table(eta: float, dhalf: float, t0: float, seed: int) -> dict:
    """A SimuMax-style table whose factors come from a planted GEMM roofline (compute-bound shapes)."""
    rng = np.random.default_rng(seed)
    entries = {}
    for _ in range(60):
        m, k, n = (int(2 ** rng.uniform(7, 14)) for _ in range(3))
        for layout in ("TN", "NN", "NT"):
            f = 2.0 * m * k * n
            t = t0 + f / (2250e12 * eta * min(m, k, n) / (min(m, k, n) + dhalf))
            entries[f"b=1, m={m}, k={k}, n={n}, layout={layout}, accumulate=False, out_dtype=bf16"] = f / (2250e12 * t)
    return {"sys_name": "planted", "num_per_node": 8,
            "accelerator": {"op": {"matmul": {"tflops": 2250.0, "accurate_efficient_factor": entries}}}}


@settings(max_examples=4, deadline=None)
@given(eta=st.floats(0.35, 0.75), dhalf=st.floats(10.0, 200.0), seed=st.integers(0, 1000))
def test_fit_recovers_a_planted_curve(tmp_path_factory, eta, dhalf, seed):
    p = tmp_path_factory.mktemp("sm") / "planted.json"
    p.write_text(json.dumps(_table(eta, dhalf, 5e-6, seed)))
    im = I.import_simumax(p, "b200")
    compute = P.fit_compute(im.ops, P.Peaks(2250e12, 1e14, 8e12), k=3)
    r = compute["gemm"][0]
    for d in ("fwd", "bwd"):
        assert r.fits[d].eta == pytest.approx(eta, rel=0.05)
        # what the samples determine: the efficiency eta x dmin / (dmin + dhalf) over the planted shapes (dmin
        # 128-16384): within 5 % from dmin 1024 on, 9 % at the smallest (hypothesis found eta 0.75, dhalf 10 at 4.05 %
        # for dmin 128 with seed 1, 5.4 % with seed 224 and 8.1 % with seed 466, where eta's regularisation and a small
        # dhalf trade against each other, see below)
        for dmin, rel in ((128, 0.09), (1024, 0.05), (16384, 0.05)):
            assert r.fits[d].eta * dmin / (dmin + r.dhalf) == pytest.approx(eta * dmin / (dmin + dhalf), rel=rel)
    # dhalf itself only where it moves those efficiencies by more than the regularisation of eta (the smallest planted
    # dimension is 128: a dhalf of 10 changes them by under 8 %, and eta and dhalf then trade against each other)
    if dhalf >= 32:
        assert r.dhalf == pytest.approx(dhalf, rel=0.25)


def test_shipped_profile_is_the_import_of_the_shipped_file(b200):
    """The bundled b200-simumax profile is what `calibrate import simumax` writes from the bundled JSON."""
    text, _, _ = P.simumax_profile(b200, "b200-simumax")
    fresh = yaml.safe_load(text)["efficiency"]
    shipped = yaml.safe_load(PROFILE.read_text())["efficiency"]
    assert fresh == shipped
    hw = hardware.load("b200-simumax")
    base = hardware.load("b200")
    assert hw.efficiency["gemm"]["fwd"][0] == pytest.approx(shipped["gemm"]["fwd"]["eta"])
    # only the GEMM curve is calibrated: attention, the other classes, links and clock are the base's
    assert hw.efficiency["attn"] == base.efficiency["attn"] and hw.collectives == base.collectives
    assert hw.sustained_clock == base.sustained_clock and hw.peak("bf16") == base.peak("bf16")


@pytest.mark.parametrize("doc, words", [
    ("not json", "not JSON"),
    ({}, "accurate_efficient_factor"),
    ({"accelerator": {"op": {"matmul": {"tflops": 0, "accurate_efficient_factor": {"b=1, m=1, k=1, n=1, layout=TN": 0.5}}}}},
     "tflops must be positive"),
    ({"accelerator": {"op": {"matmul": {"tflops": 2250, "accurate_efficient_factor": {"garbage": 0.5}}}}},
     "no readable matmul entries"),
])
def test_bad_files_are_one_line_errors(tmp_path, doc, words):
    p = tmp_path / "sys.json"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with pytest.raises(InputError, match=words):
        I.import_simumax(p, "b200")


def test_unreadable_entries_are_reported_and_excluded(tmp_path):
    doc = _table(0.5, 50.0, 5e-6, 1)
    tab = doc["accelerator"]["op"]["matmul"]["accurate_efficient_factor"]
    tab["b=1, m=64, k=64, n=64, layout=TN, accumulate=False"] = 1.7          # above the peak: not a measurement
    tab["b=1, m=64, k=64, n=64, layout=XX, accumulate=False"] = 0.5          # no such layout
    p = tmp_path / "sys.json"
    p.write_text(json.dumps(doc))
    im = I.import_simumax(p, "b200")
    assert len(im.defects) == 1 and im.defects[0].n == 2 and im.defects[0].action == "excluded"
    assert sum(len(o.t) for o in im.ops) == len(tab) - 2


def test_cli_writes_a_loadable_profile_and_refuses_bad_input(tmp_path, cli, cli_main):
    doc = _table(0.5, 50.0, 5e-6, 2)
    p = tmp_path / "sys.json"
    p.write_text(json.dumps(doc))
    out = tmp_path / "prof" / "planted-b200"
    r = cli("calibrate", "import", "simumax", p, "--base", "b200", "--out", out, "--folds", "3")
    assert r.returncode == 0, r.stderr
    assert "gemm" in r.stdout and "fwd" in r.stdout
    hw = hardware.load(str(out) + ".yaml")
    assert hw.efficiency["gemm"]["fwd"][0] == pytest.approx(0.5, rel=0.05)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = cli_main("calibrate", "import", "simumax", bad, "--base", "b200", "--out", tmp_path / "x")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "accurate_efficient_factor" in r.stderr
    assert not (tmp_path / "x.yaml").exists()
