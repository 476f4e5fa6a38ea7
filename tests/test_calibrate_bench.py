"""CPU end-to-end: a quick compute calibration and a 2-process gloo collective calibration."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CLASSES = ("gemm", "attn", "bmm", "softmax", "norm", "elem", "embed", "ce", "optim")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_compute_cpu_quick(tmp_path):
    pytest.importorskip("torch")
    from roofline.face.cli import main
    out = tmp_path / "cpu"
    # with the figure of the fit beside the profile (views/calibrate/fit_plot.py; matplotlib is in the test extra)
    assert main(["calibrate", "compute", "--device", "cpu", "--dtype", "fp32", "--quick", "--out", str(out),
                 "--plot", str(tmp_path / "fit.png")]) == 0
    assert (tmp_path / "fit.png").read_bytes()[:4] == b"\x89PNG"
    doc = yaml.safe_load((tmp_path / "cpu.yaml").read_text())
    eff = doc["efficiency"]
    from roofline.base.units import parse
    for cls in CLASSES:
        assert cls in eff, cls
        for d, e in eff[cls].items():
            assert 0 < e["eta"] <= 1 and 0 < e["mu"] <= 1 and parse(e["t0"], "s", "t0") >= 0
    # the curves' own constants are fitted from the sweep, not taken from defaults
    assert {"d_soft", "d_reg", "uneven", "d_io"} <= set(eff["attn"]["fwd"])
    assert all(eff["bmm"][d]["dhalf"] > 0 and 0 <= eff["bmm"][d]["reread"] <= 1 for d in ("fwd", "bwd"))
    csv = (tmp_path / "cpu.samples.csv").read_text()
    assert csv.count("\n") > 30 and "\nbaddbmm,bmm,bwd," in csv and "\nbmm,bmm,fwd," in csv
    from roofline.spec.hardware import load
    hw = load(str(tmp_path / "cpu.yaml"))
    assert hw.kind == "calibrated"
    # the sustained/burst matmul ratio is measured and carried into the profile when physical (>= 0.3); a noisy
    # shared CPU can measure less, and then the profile says so and keeps 1
    if "sustained_clock" in doc:
        assert 0.3 <= doc["sustained_clock"] <= 1 and hw.sustained_clock == doc["sustained_clock"]
    else:
        assert hw.sustained_clock == 1 and any("sustained_clock not written" in a
                                                for a in doc["provenance"]["assumptions"])


def test_sweep_kernel_metrics_match_importer():
    """The sweep's per-kernel batched-GEMM metrics are the importer's (one formula, two paths)."""
    import numpy as np
    from roofline.views.calibrate.bench_compute import _named, op_shape_metrics
    from roofline.views.calibrate.importers import kernel_sample_metrics
    from roofline.model.formulas import compute as C
    from roofline.model.formulas import symbols as S
    vals = {S.micro_batch: 2, S.n_heads: 8, S.tp: 1, S.cp: 1, S.seq_len: 1024, S.d_model: 8 * 160, S.flash: 0,
            S.act_bytes: 2, S.kv_heads: 8}
    for name, up in (("attn_scores_bmm", "baddbmm"), ("attn_context_bmm", "bmm")):
        _, kern = op_shape_metrics(_named(C.attention_core(), name), vals)
        for d in ("fwd", "bwd"):
            ref = kernel_sample_metrics(up, d, tp=np.array([1.0]), micro_batch=np.array([2.0]),
                                        n_heads=np.array([8.0]), seq_len=np.array([1024.0]), d_model=np.array([1280.0]))
            got = kern[d]
            assert got.shape == (ref[0].shape[1], 4)
            assert np.allclose(got.T, np.stack([r[0] for r in ref]))
    # head dim 160 over 128-wide tiles: the score-input kernels re-read the scores once
    assert kern["fwd"][0, 2] > 0 and kern["bwd"][1, 2] == 0


def test_sweep_skips_cases_that_run_out_of_memory(monkeypatch):
    """A case whose buffers do not fit is skipped and named; the other cases still run."""
    torch = pytest.importorskip("torch")
    from roofline.views.calibrate import bench_compute as B
    real = B.time_case
    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError

    def fake(case, device, repeats, buffers=3):
        if case.name == "baddbmm":
            raise oom("CUDA out of memory. Tried to allocate 4.00 GiB")
        return real(case, device, repeats, buffers)
    real_cases = B.cases
    monkeypatch.setattr(B, "time_case", fake)
    monkeypatch.setattr(B, "cases", lambda dtype, quick, device: [c for c in real_cases(dtype, quick, device)
                                                                  if c.op.cls in ("bmm", "elem")])
    skipped = []
    ops = B.run_sweep("cpu", "fp32", True, 2, skipped)
    assert len(skipped) == 4 and all(s.startswith("baddbmm b=") and "s=" in s for s in skipped)
    names = {o.op for o in ops}
    assert "baddbmm" not in names and {"bmm", "gelu"} <= names
    with pytest.raises(ValueError):     # other errors are not swallowed
        monkeypatch.setattr(B, "time_case", lambda *a, **k: (_ for _ in ()).throw(ValueError("bug")))
        B.run_sweep("cpu", "fp32", True, 2, [])


def test_comm_gloo_two_ranks(tmp_path):
    pytest.importorskip("torch")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", "29517",
           "-m", "roofline", "calibrate", "comm", "--out", "comm", "--max-size", "64KiB", "--repeats", "3"]
    r = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = yaml.safe_load((tmp_path / "comm.yaml").read_text())
    from roofline.base.units import parse
    intra = doc["collectives"]["intra"]
    assert {"ar", "ag", "p2p"} <= set(intra)
    for e in intra.values():
        assert parse(e["busbw"], "B/s", "busbw") > 0


@pytest.mark.slow
def test_comm_gloo_two_simulated_nodes(tmp_path):
    """4 ranks as 2 nodes of 2: the intra (TP) and inter (DP/PP) layouts each get their own fits."""
    pytest.importorskip("torch")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-port", "29519",
           "-m", "roofline", "calibrate", "comm", "--out", "two", "--ranks-per-node", "2", "--sizes", "4KiB", "64KiB",
           "256KiB", "--repeats", "3"]
    r = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = yaml.safe_load((tmp_path / "two.yaml").read_text())
    from roofline.base.units import parse
    for link in ("intra", "inter"):
        assert {"ar", "ag", "p2p"} <= set(doc["collectives"][link]), link
        assert all(parse(e["busbw"], "B/s", "busbw") > 0 for e in doc["collectives"][link].values())
    rows = (tmp_path / "two.samples.csv").read_text().splitlines()[1:]
    assert {(x.split(",")[1], x.split(",")[2]) for x in rows if x.startswith("ar,")} == {("intra", "2"), ("inter", "2")}
    assert "2 node(s) of 2" in doc["provenance"]["source"]
    bad = subprocess.run(cmd[:-2] + ["--ranks-per-node", "3"], cwd=tmp_path, env=_env(), capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode != 0 and "--ranks-per-node 3 must divide WORLD_SIZE 4" in bad.stderr


def test_out_paths(tmp_path):
    from roofline.views.calibrate.cli import out_paths
    y, c, pid = out_paths(str(tmp_path / "prof") + "/")
    assert y.name == "prof.yaml" and c.name == "prof.samples.csv" and pid == "prof"
    y, c, pid = out_paths(str(tmp_path / "x.yaml"))
    assert y.name == "x.yaml" and pid == "x"
