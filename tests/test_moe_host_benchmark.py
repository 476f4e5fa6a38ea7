"""benchmarks/moe_host_megatron_core.py runs where Megatron-Core is installed (skipped elsewhere, as in CI)."""
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
    rows = [line.split() for line in r.stdout.splitlines() if line.strip().startswith(("dense", "MoE"))]
    total = [float(row[-2]) for row in rows]          # fwd+bwd, us
    assert len(total) == 5 and total[1] > total[0] and total[-1] > total[1]


def test_without_megatron_core_it_is_one_line_and_exit_2(tmp_path):
    # a Python whose path hides megatron: the script names what it needs
    code = ("import sys, runpy; sys.modules['megatron'] = None; sys.argv = ['x']; "
            f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "megatron-core" in r.stderr
