"""The MoE host benchmark (calibrate/bench_host_moe.py): runs where Megatron-Core is installed (skipped elsewhere, as
in CI); without it, `calibrate host --moe` is one line and exit 2 before anything is measured or written."""
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "moe_host_megatron_core.py"


def test_moe_layers_cost_more_host_time_than_dense_and_grow_with_local_experts():
    pytest.importorskip("torch")
    pytest.importorskip("megatron.core")
    r = subprocess.run([sys.executable, str(SCRIPT), "--repeats", "10"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [line.split() for line in r.stdout.splitlines() if line.strip().startswith(("dense", "MoE,"))]
    total = [float(row[-3]) for row in rows]          # fwd+bwd, us
    assert len(total) == 5 and total[1] > total[0] and total[-1] > total[1]
    assert "MoE - dense, forward:" in r.stdout
    # the router's and the preprocess's shares of the MoE host work (what their CUDA graphs take away), each a share
    shares = [float(line.split(", ")[-1].split()[0]) for line in r.stdout.splitlines() if "of the MoE forward" in line]
    assert len(shares) == 2 and all(0 < x for x in shares)


def _hide_megatron():
    return ("import sys, runpy; sys.modules['megatron'] = None; sys.modules['megatron.core'] = None; "
            "sys.argv = sys.argv[1:]; ")


def test_without_megatron_core_the_script_is_one_line_and_exit_2():
    code = _hide_megatron() + f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
    r = subprocess.run([sys.executable, "-c", code, "x"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "megatron-core" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_calibrate_host_moe_without_megatron_core_writes_nothing(tmp_path):
    out = tmp_path / "h"
    code = _hide_megatron() + "runpy.run_module('roofline', run_name='__main__')"
    r = subprocess.run([sys.executable, "-c", code, "roofline", "calibrate", "host", "--moe", "--repeats", "1",
                        "--runs", "1", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "megatron-core" in r.stderr
    assert not list(tmp_path.iterdir())
