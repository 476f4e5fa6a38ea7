"""benchmarks/small_gpt_step.py: the measured small-GPT step that is compared with the prediction on a GPU.
Its torch model must be the architecture roofline prices (same parameter count at every size), and its
mechanics (timing, prediction, CSV) must run; on a CPU the timings themselves mean nothing."""
import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the small-GPT step benchmark needs torch (the calibrate extra)")

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "small_gpt_step.py"
spec = importlib.util.spec_from_file_location("small_gpt_step", PATH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


@pytest.mark.parametrize("size", bench.SIZES + bench.TINY, ids=lambda s: s[0])
def test_torch_model_is_the_priced_architecture(size):
    name, layers, d, heads = size
    vocab, seq = 50304, 1024
    model = bench.build_gpt(torch, layers, d, heads, vocab, seq, torch.device("meta"))   # no memory, no compute
    n_torch = sum(p.numel() for p in model.parameters())
    pred = bench.predict(name, layers, d, heads, vocab, seq, 8, "h100-sxm")
    assert n_torch == pred["params"]
    assert pred["predicted_s"] > 0 and pred["flops"] > 6 * n_torch * 8 * seq     # 6 N D plus attention


def test_tiny_run_on_cpu(tmp_path, capsys):
    out = tmp_path / "steps.csv"
    rc = bench.main(["--device", "cpu", "--tiny", "--warmup", "1", "--steps", "2", "--json", "--csv", str(out)])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["size"] for r in rows] == ["tiny-a", "tiny-b"]
    for r in rows:
        assert r["measured_s"] > 0 and r["predicted_s"] > 0 and r["params_torch"] == r["params_model"]
        assert r["error"] == pytest.approx(r["predicted_s"] / r["measured_s"] - 1)
        assert r["gpu_s"] is None and 0 <= r["predicted_host_s"] < r["predicted_s"]   # GPU alone: CUDA only
        assert r["sm_clock_mhz"] is None                                             # the SM clock: CUDA only
    assert out.read_text().splitlines()[0].startswith("size,layers,d_model,heads")
    assert len(out.read_text().splitlines()) == 3


def test_several_profiles_share_one_measurement(capsys):
    rc = bench.main(["--device", "cpu", "--tiny", "--sizes", "tiny-a", "--warmup", "0", "--steps", "1", "--json",
                     "--profile", "a100-sxm4-80gb,h100-sxm"])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["profile"] for r in rows] == ["a100-sxm4-80gb", "h100-sxm"]
    assert rows[0]["measured_s"] == rows[1]["measured_s"] and rows[0]["predicted_s"] != rows[1]["predicted_s"]


def test_bad_arguments(capsys):
    assert bench.main(["--device", "cpu", "--sizes", "gpt-7t"]) == 2
    assert "unknown size(s) gpt-7t" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert bench.main(["--device", "cuda:0"]) == 2
        assert "CUDA is not available" in capsys.readouterr().err


# ---- the committed H100 measurements (roofline/data/h100-sxm-measured) and their copy in docs/calibration.md ----
ROOT = PATH.parents[1]
DATA = ROOT / "roofline" / "data" / "h100-sxm-measured"
STEPS = [DATA / "steps_s1024.csv", DATA / "steps_s2048.csv"]
PROFILE = ROOT / "roofline" / "spec" / "hardware" / "profiles" / "h100-sxm-measured.yaml"
DOCS = (ROOT / "docs" / "calibration.md").read_text()


def _rows():
    import csv
    rows = []
    for p in STEPS:
        with open(p, newline="") as f:
            rows += list(csv.DictReader(f))
    return rows


def test_committed_steps_are_consistent():
    rows = _rows()
    sizes = [n for n, *_ in bench.SIZES]
    for seq, mb in (("1024", "8"), ("2048", "4")):
        mine = [r for r in rows if (r["seq_len"], r["micro_batch"]) == (seq, mb)]
        # every size, each against the datasheet and the measured profile, from one measurement per size
        assert sorted((r["size"], r["profile"]) for r in mine) == sorted(
            (n, p) for n in sizes for p in ("h100-sxm", "h100-sxm-measured"))
        for n in sizes:
            pair = [r for r in mine if r["size"] == n]
            assert pair[0]["measured_s"] == pair[1]["measured_s"] and pair[0]["gpu_s"] == pair[1]["gpu_s"]
    for r in rows:
        meas, gpu, pred = float(r["measured_s"]), float(r["gpu_s"]), float(r["predicted_s"])
        assert 0 < gpu < meas                       # the GPU alone never takes longer than the whole step
        assert float(r["error"]) == pytest.approx(pred / meas - 1)
        assert 0 <= float(r["predicted_host_s"]) < pred
        assert r["device"].startswith("NVIDIA H100") and int(r["params_torch"]) == round(float(r["params_model"]))


def test_docs_step_table_is_the_committed_csvs():
    """docs/calibration.md carries `small_gpt_step.py --table` of the committed CSVs, character for character."""
    table = bench.steps_table(STEPS)
    assert table in DOCS, "docs/calibration.md: regenerate the table with " \
        "python benchmarks/small_gpt_step.py --table roofline/data/h100-sxm-measured/steps_s{1024,2048}.csv"
    assert table.count("\n") == 2 + 2 * len(bench.SIZES)


def test_docs_fit_table_is_the_committed_profile():
    table = bench.fit_table(str(PROFILE))
    assert "| gemm | fwd |" in table and "| gemm | bwd |" in table
    assert table in DOCS, "docs/calibration.md: regenerate the H100 fit table with " \
        "python benchmarks/small_gpt_step.py --fit-table roofline/spec/hardware/profiles/h100-sxm-measured.yaml"


def test_docs_gemm_before_after_is_the_committed_sweeps():
    pytest.importorskip("scipy")
    spec_g = importlib.util.spec_from_file_location("gemm_before_after", DATA / "gemm_before_after.py")
    g = importlib.util.module_from_spec(spec_g)
    spec_g.loader.exec_module(g)
    table = g.table()
    assert table in DOCS, "docs/calibration.md: regenerate with python roofline/data/h100-sxm-measured/gemm_before_after.py"


def test_measured_h100_profile_loads_with_physical_gemm_t0():
    """A GEMM's fixed time is its launch-to-first-tile latency and tail: a few microseconds on a GPU. A fitted t0
    of tens of microseconds means the timer caught the host's launch path (the busy-wait fix of calibrate compute)."""
    import yaml
    from roofline.spec import hardware
    hw = hardware.load("h100-sxm-measured")
    assert hw.kind == "calibrated" and "compute" in hw.calibrated
    for d in ("fwd", "bwd"):
        eta, mu, t0 = hw.efficiency["gemm"][d]
        assert 0 < t0 < 20e-6, (d, t0)
    # its host block was measured on the CUDA device: the times contain every launch, so no launch cost is added
    assert str(yaml.safe_load(PROFILE.read_text())["host"]["launch"]).replace(" ", "") in ("0us", "0")
    assert hw.host_fwd > 0 and hw.host_bwd > 0


def test_table_commands(capsys):
    assert bench.main(["--table", *map(str, STEPS)]) == 0
    assert capsys.readouterr().out == bench.steps_table(STEPS)
    assert bench.main(["--fit-table", str(PROFILE)]) == 0
    assert capsys.readouterr().out == bench.fit_table(str(PROFILE))
    assert bench.main(["--table", "/nonexistent.csv"]) == 2
