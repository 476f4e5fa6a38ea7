"""benchmarks/grouped_gemm_experts.py: the model side prices compute.gemm with groups = E (a fixed time per four
experts), the CPU run prints a row per expert count, and bad input is one line and exit 2."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from roofline.model.predict import hardware_inputs
from roofline.spec import hardware

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "grouped_gemm_experts.py"


def _mod():
    spec = importlib.util.spec_from_file_location("grouped_gemm_experts", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_model_side_pays_one_fixed_time_per_four_experts():
    """Tiny GEMMs are all fixed cost: 16 experts pay the forward t0 four times in sequence, 8 twice, 1-4 once
    (four streams overlap), so the difference 16 - 8 experts is two forward t0 of the profile."""
    m = _mod()
    t0 = hardware_inputs(hardware.load("h100-sxm"), "bf16")["t0_gemm_fwd"]
    f = {e: m.model_times("h100-sxm", 4096, 64, 32, e)[0] for e in (1, 4, 8, 16)}
    assert f[4] == pytest.approx(f[1], rel=0.05)
    assert f[16] - f[8] == pytest.approx(2 * t0, rel=0.05)
    # the backward runs two GEMMs per expert: it is never faster than the forward
    assert all(b >= f_ for f_, b in (m.model_times("h100-sxm", 4096, 64, 32, e) for e in (1, 8)))


def test_cpu_run_prints_a_row_per_expert_count(capsys):
    pytest.importorskip("torch")
    m = _mod()
    assert m.main(["--device", "cpu", "--tokens", "256", "--hidden", "32", "--ffn", "16", "--experts", "1,2,4",
                   "--repeats", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [ln.split() for ln in out if ln.strip() and ln.split()[0].isdigit()]
    assert [int(r[0]) for r in rows] == [1, 2, 4]
    assert [int(r[1]) for r in rows] == [256, 128, 64]
    assert all(float(r[-1]) > 0 for r in rows)


@pytest.mark.parametrize("argv, text", [
    (["--tokens", "10", "--experts", "3"], "--tokens 10 must divide by every expert count, not by 3"),
    (["--tokens", "0"], "--tokens must be a positive integer, got 0"),
])
def test_bad_input_is_one_line_and_exit_2(argv, text, capsys):
    m = _mod()
    assert m.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and text in err[0]
