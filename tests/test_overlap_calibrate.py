"""The measured overlap interference (issue 17, "overlap is not free"): `calibrate overlap` times a GEMM alone and
beside a running collective and writes the profile's `overlap:` block; profiles carry it (own block, `overlap_from`,
defaults.yaml for the rest) and the model prices overlapped compute with it."""
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.base.errors import InputError
from roofline.spec import hardware
from roofline.spec.config import Model, Plan
from roofline.model.predict import evaluate, inputs, hardware_inputs
from roofline.views.calibrate import bench_overlap as B

ROOT = Path(__file__).resolve().parents[1]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# ---- the measurement's arithmetic ---------------------------------------------------------------------------------

@given(st.floats(1e-5, 10.0), st.floats(0.0, 0.95), st.sampled_from([80, 108, 132, 148, 304]))
def test_a_planted_interference_is_recovered(t_alone, f, sms):
    """The model runs compute at (1 - f) beside a collective: a loop of t_alone takes t_alone / (1 - f); the
    measurement inverts that, and the SM count it writes gives back f through the model's n / n_SM."""
    t_beside = t_alone / (1.0 - f)
    assert B.interference(t_alone, t_beside) == pytest.approx(f, abs=1e-9)
    n = B.sms_held(B.interference(t_alone, t_beside), sms)
    assert 0 <= n < sms
    assert n / sms == pytest.approx(f, abs=0.01 / sms + 1e-9)


def test_a_kernel_that_ran_faster_beside_counts_no_interference_and_bad_times_are_refused():
    assert B.interference(2.0, 1.5) == 0.0
    assert B.sms_held(0.0, 132) == 0.0
    assert B.sms_held(1.0, 108) == 107.0        # kept below n_SM: the profile rule
    for bad in ((0.0, 1.0), (1.0, float("nan")), (-1.0, 2.0)):
        with pytest.raises(ValueError):
            B.interference(*bad)


# ---- profiles carry the block -------------------------------------------------------------------------------------

def test_bundled_profiles_use_the_sourced_defaults():
    dflt = hardware.overlap_defaults()
    assert set(dflt) == set(hardware.OVERLAP_KEYS)
    for i in ("a100-sxm4-80gb", "h100-sxm", "gb200"):
        assert hardware.load(i).overlap == dflt


def test_an_own_block_and_overlap_from_replace_only_the_counts_they_name(tmp_path):
    (tmp_path / "frag.yaml").write_text("id: frag\nkind: calibrated-overlap\noverlap: {nccl_sms: 40.5}\n"
                                        "provenance: {source: test}\n")
    (tmp_path / "p.yaml").write_text("base: h100-sxm\nid: p\noverlap_from: frag.yaml\noverlap: {ub_sms: 20}\n")
    h = hardware.load(str(tmp_path / "p.yaml"))
    assert h.overlap == {**hardware.overlap_defaults(), "nccl_sms": 40.5, "ub_sms": 20.0}
    assert h.provenance["overlap_from"].startswith("frag.yaml: test")
    x = hardware_inputs(h)
    assert (x["nccl_sms"], x["ub_sms"], x["nccl_sms_inter"]) == (40.5, 20.0, hardware.overlap_defaults()["nccl_sms_inter"])


@pytest.mark.parametrize("block, message", [
    ("overlap: {nccl_sm: 3}", "unknown key"),
    ("overlap: {nccl_sms: -1}", "overlap.nccl_sms"),
    ("overlap: {nccl_sms: 132}", "overlap.nccl_sms must be below sm_count 132"),
    ("overlap_from: empty.yaml", "overlap_from 'empty.yaml' has no overlap: block"),
])
def test_bad_overlap_blocks_are_one_line_errors(tmp_path, block, message):
    (tmp_path / "empty.yaml").write_text("id: empty\n")
    (tmp_path / "p.yaml").write_text(f"base: h100-sxm\nid: p\n{block}\n")
    with pytest.raises(InputError, match=message) as exc:
        hardware.load(str(tmp_path / "p.yaml"))
    assert "\n" not in str(exc.value)


# ---- the model reads it -------------------------------------------------------------------------------------------

LLAMA = Model(n_layers=8, d_model=4096, n_heads=32, ffn_hidden=14336, vocab=128256, seq_len=4096, n_kv_heads=8,
              mlp="swiglu")


OV = {"ov_dp": 1.0, "ov_ag": 1.0, "ov_tp": 1.0}


@settings(max_examples=25, deadline=None)
@given(st.floats(0.0, 60.0), st.floats(0.0, 60.0), st.sampled_from([(2, 1, 8), (1, 1, 16), (4, 2, 4)]))
def test_a_collective_that_takes_more_sms_never_makes_a_step_faster(n1, n2, layout):
    """More SMs held by the overlapped collectives: never a faster step."""
    tp, pp, dp = layout
    hw = hardware.load("h100-sxm")
    plan = Plan(tp=tp, pp=pp, dp=dp, global_batch=64, micro_batch=1, sharding="distributed")
    lo, hi = sorted((n1, n2))
    t = [float(evaluate(dict(inputs(LLAMA, plan, replace(hw, overlap={**hw.overlap, "nccl_sms": n,
                                                                        "nccl_sms_inter": n})), **OV))["step_time"])
         for n in (lo, hi)]
    assert t[0] <= t[1] * (1 + 1e-12)


@pytest.mark.parametrize("n", [0.0, 24.0, 40.5])
def test_the_profiles_count_prices_a_hidden_gradient_reduce(tmp_path, n):
    """dp 8 in one H100 node, no optimizer sharding: the gradient all-reduce hides behind the last backward and
    costs n / 132 of its own time, n the count of the profile the model was given (here through overlap_from)."""
    (tmp_path / "frag.yaml").write_text(f"id: frag\noverlap: {{nccl_sms: {n}}}\n")
    (tmp_path / "p.yaml").write_text("base: h100-sxm\nid: p\noverlap_from: frag.yaml\n")
    hw = hardware.load(str(tmp_path / "p.yaml"))
    plan = Plan(dp=8, micro_batch=1, global_batch=64, sharding="none")
    x = dict(inputs(LLAMA, plan, hw), ov_dp=1.0)
    raw = float(evaluate(dict(x, ov_dp=0.0))["t_dp_comm"])
    assert raw > 0
    assert float(evaluate(x)["t_dp_comm"]) == pytest.approx(n / 132 * raw, rel=1e-9, abs=1e-15)


# ---- the command, on CPU (gloo) -----------------------------------------------------------------------------------

def test_calibrate_overlap_gloo_two_ranks_writes_a_profile_that_loads(tmp_path):
    pytest.importorskip("torch")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", "29523",
           "-m", "roofline", "calibrate", "overlap", "--out", "ov", "--base", "h100-sxm", "--comm-size", "2MiB",
           "--gemm-size", "128", "--gemm-repeats", "4", "--repeats", "2"]
    r = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = yaml.safe_load((tmp_path / "ov.yaml").read_text())
    assert doc["base"] == "h100-sxm" and set(doc["overlap"]) == {"nccl_sms"}
    assert 0 <= doc["overlap"]["nccl_sms"] < 132
    meas = doc["provenance"]["measured"]["intra"]
    assert set(meas) == {"gemm", "copy"}
    g = meas["gemm"]
    assert g["f"] == pytest.approx(B.interference(g["alone_s"], g["beside_s"]), abs=1e-3)
    assert doc["overlap"]["nccl_sms"] == pytest.approx(B.sms_held(g["f"], 132), abs=0.2)
    rows = (tmp_path / "ov.samples.csv").read_text().splitlines()
    assert rows[0].startswith("link,kernel,") and len(rows) == 3
    h = hardware.load(str(tmp_path / "ov.yaml"))
    assert h.overlap["nccl_sms"] == doc["overlap"]["nccl_sms"]
    assert h.peak_flops == hardware.load("h100-sxm").peak_flops
    from roofline.face.cli import main
    assert main(["transformer", "--model", "llama3-8b", "--gpu", str(tmp_path / "ov.yaml"), "--tp", "1", "--pp", "1",
                 "--dp", "8", "--global-batch", "64", "--micro-batch", "1"]) == 0


def test_calibrate_overlap_on_cpu_without_an_sm_count_writes_nothing(tmp_path):
    pytest.importorskip("torch")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", "29525",
           "-m", "roofline", "calibrate", "overlap", "--out", "ov", "--comm-size", "64KiB"]
    r = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240)
    assert r.returncode != 0
    assert "needs the SM count the fraction converts to: --sms N or --base ID" in r.stderr
    assert not list(tmp_path.glob("ov*"))


# ---- from-runs: the same counts identified from measured steps (opt-in term overlap_sms) ---------------------------

def test_overlap_term_scales_the_nccl_counts_only_and_stays_below_the_sm_count():
    from roofline.views.calibrate import from_runs as fr
    hw = hardware.load("a100-sxm4-80gb")
    out = fr.apply_terms(hw, {"overlap_sms": 1.5})
    assert out.overlap["nccl_sms"] == 1.5 * hw.overlap["nccl_sms"]
    assert out.overlap["nccl_sms_inter"] == 1.5 * hw.overlap["nccl_sms_inter"]
    assert (out.overlap["ub_sms"], out.overlap["ub_ring_sms"]) == (hw.overlap["ub_sms"], hw.overlap["ub_ring_sms"])
    lo, hi = fr.TERMS["overlap_sms"].bounds(hw)
    assert lo == 0.0 and max(hw.overlap[k] for k in fr.OVERLAP_NCCL) * hi == pytest.approx(hw.sm_count - 1)
    fr.apply_terms(hw, {"overlap_sms": hi})          # the top of the range is a valid profile
    assert fr.TERMS["overlap_sms"].yaml(out) == {"overlap": {"nccl_sms": 36.0, "nccl_sms_inter": 24.0}}


def test_planted_overlap_is_recovered_from_runs_that_hide_their_gradient_reduction(tmp_path):
    """Megatron-Core runs (distributed optimizer, overlapped reduce-scatter and all-gather) priced with SMs x2 and
    another host: noise-free, both come back; with 1 % noise, within the reported interval."""
    from test_from_runs import BASE, COLS, planted_times, synthetic_rows, write_csv
    from roofline.views.calibrate import from_runs as fr
    rows = synthetic_rows(mbs=(1, 2))
    for r in rows:
        r["framework"], r["recompute"] = "megatron-core", "none"
    runs = fr.load_runs(write_csv(tmp_path / "runs.csv", rows, COLS + ["framework"]), BASE)
    pricer, hw = fr.Pricer(runs.cases), hardware.load(BASE)
    truth = {"overlap_sms": 2.0, "host_layer": 2.5e-3}
    f = fr.fit_terms(pricer, planted_times(pricer, truth), ("host_layer", "overlap_sms"), hw)
    assert f.values["overlap_sms"] == pytest.approx(2.0, rel=1e-4)
    noisy = fr.fit_terms(pricer, planted_times(pricer, truth, sigma=0.01, seed=3), ("host_layer", "overlap_sms"), hw)
    assert abs(noisy.values["overlap_sms"] - 2.0) <= noisy.ci95["overlap_sms"]
