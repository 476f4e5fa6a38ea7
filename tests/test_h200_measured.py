"""The committed H200 measurements (roofline/data/h200-measured), the profile fitted from them, and their copy in
docs/calibration.md "Measured on an H200": the docs tables are what the scripts print from the committed files, the
step CSVs hold one measurement per size priced on both profiles, and the profile is the calibration's output."""
import csv
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "roofline" / "data" / "h200-measured"
PROFILE = ROOT / "roofline" / "spec" / "hardware" / "profiles" / "h200-measured.yaml"
STEPS = [DATA / "steps_s1024.csv", DATA / "steps_s2048.csv"]
DOCS = (ROOT / "docs" / "calibration.md").read_text()
SECTION = DOCS[DOCS.index("## Measured on an H200"):DOCS.index("## How estimate-train-time samples map")]


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


tables = _load("h200_tables", DATA / "tables.py")
bench = _load("small_gpt_step_h200", ROOT / "benchmarks" / "small_gpt_step.py")


@pytest.mark.parametrize("table", ["fp8_table", "fp8_sweep_table", "clock_table", "kappa_table", "grouped_table"])
def test_docs_tables_are_printed_from_the_committed_files(table):
    text = getattr(tables, table)()
    assert text.count("\n") >= 4
    assert text in SECTION, f"docs/calibration.md: regenerate with python roofline/data/h200-measured/tables.py ({table})"


def test_docs_fit_and_step_tables_are_the_committed_profile_and_csvs():
    assert bench.fit_table(str(PROFILE)) in SECTION
    assert bench.steps_table(STEPS) in SECTION


def test_step_csvs_hold_one_measurement_per_size_on_both_profiles():
    sizes = [n for n, *_ in bench.SIZES]
    for path, (seq, mb) in zip(STEPS, (("1024", "8"), ("2048", "4"))):
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        assert sorted((r["size"], r["profile"]) for r in rows) == sorted(
            (n, p) for n in sizes for p in ("h200", "h200-measured"))
        for r in rows:
            assert (r["seq_len"], r["micro_batch"]) == (seq, mb) and r["device"] == "NVIDIA H200"
            meas, gpu, pred = float(r["measured_s"]), float(r["gpu_s"]), float(r["predicted_s"])
            assert 0 < gpu < meas and float(r["error"]) == pytest.approx(pred / meas - 1)
            twin = next(o for o in rows if o["size"] == r["size"] and o is not r)
            assert (twin["measured_s"], twin["gpu_s"]) == (r["measured_s"], r["gpu_s"])


def test_profile_is_the_calibration_output_with_the_measured_host_block():
    import yaml
    from roofline.spec import hardware
    doc = yaml.safe_load(PROFILE.read_text())
    hw = hardware.load("h200-measured")
    assert hw.kind == "calibrated" and doc["base"] == "h200"
    # the sustained clock written is the one the calibration measured (its provenance line)
    said = re.search(r"burst rate = ([0-9.]+)", " ".join(doc["provenance"]["assumptions"])).group(1)
    assert doc["sustained_clock"] == float(said) and hw.sustained_clock == float(said)
    for d in ("fwd", "bwd"):
        assert 0 < hw.efficiency["gemm"][d][2] < 20e-6          # launch-to-tile latency, not host issue time
    host_line = next(l for l in (DATA / "host_plain.txt").read_text().splitlines() if l.startswith("host:"))
    assert yaml.safe_load(host_line)["host"]["layer_fwd"] == doc["host"]["layer_fwd"]
    assert str(doc["host"]["launch"]).replace(" ", "") in ("0us", "0")
    # its samples are the committed ones: every class's count, the provenance's fitted samples plus those flagged
    with open(DATA / "samples.csv", newline="") as f:
        classes = [r["class"] for r in csv.DictReader(f)]
    prov = doc["provenance"]
    assert {c: classes.count(c) for c in set(classes)} == {
        c: n + prov["fit_error"][c]["flagged"] for c, n in prov["samples"].items()}


def test_reprice_rewrites_rows_per_profile(tmp_path, capsys):
    copy = tmp_path / "steps.csv"
    copy.write_text(STEPS[0].read_text())
    assert bench.main(["--reprice", str(copy), "--profile", "h200"]) == 0
    with open(copy, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["profile"] for r in rows] == ["h200"] * len(bench.SIZES)
    for r in rows:
        assert float(r["error"]) == pytest.approx(float(r["predicted_s"]) / float(r["measured_s"]) - 1)
    assert bench.main(["--reprice", str(copy)]) == 2
    assert "--reprice needs --profile" in capsys.readouterr().err
    assert bench.main(["--reprice", str(tmp_path / "none.csv"), "--profile", "h200"]) == 2


def test_gemm_rates_refuses_a_machine_without_cuda():
    """With no CUDA device visible (hidden on a GPU machine too), one line on stderr and a non-zero exit."""
    import os
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, str(DATA / "gemm_rates.py"), "burst"], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "a CUDA device" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_sustained_ratio_on_cpu_is_a_ratio():
    pytest.importorskip("torch")
    from roofline.views.calibrate.bench_compute import sustained_ratio
    k = sustained_ratio("cpu", "bf16", 0.2)
    assert 0 < k <= 1
