import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def load_benchmark(name: str):
    """The module of the script benchmarks/NAME.py (benchmarks/ is not a package)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOST_ISSUE = ("host_fwd", "host_bwd", "host_rc", "host_emb", "host_head", "host_mb", "host_moe_fwd", "host_moe_bwd",
              "host_launch", "host_sync")


def gpu_only(x: dict) -> dict:
    """Formula inputs ``x`` with every host issue time 0: the step as the GPU's work sets it (a property of the GPU
    side does not show where a slow host, such as Grace's host_slowdown, sets the pace)."""
    return {k: (0.0 if k in HOST_ISSUE else v) for k, v in x.items()}


def run_cli(*args, check=None):
    """Run `python -m roofline ARGS` in a subprocess; returns CompletedProcess."""
    import subprocess
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "roofline", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def cli_main(capsys, monkeypatch):
    """Run `roofline.face.cli.main(ARGS)` in this process (cwd ROOT, as run_cli): a CompletedProcess with returncode,
    stdout, stderr, without the ~0.7 s start of a new interpreter. For output and error-message checks; the real
    entry point (`python -m roofline`, lazy imports, exit status) keeps a subprocess test per command."""
    import subprocess
    from roofline.face.cli import main
    monkeypatch.chdir(ROOT)

    def run(*args):
        argv = [str(a) for a in args]
        capsys.readouterr()
        try:
            rc = main(argv)
        except SystemExit as exc:       # argparse: usage errors (2), --help (0)
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(argv, rc, out, err)
    return run


@pytest.fixture
def row_case(tmp_path):
    """The validate Case of one row (a mapping of column -> value), written to a CSV and read back as a file is."""
    import csv
    from roofline.views import validate as V

    def build(row: dict):
        path = tmp_path / "row.csv"
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(row))
            w.writeheader()
            w.writerow(row)
        return V.build_case(V.read(path)[0])
    return build


@pytest.fixture
def bridge_row(row_case):
    """The validate Case of a Megatron-Bridge table row (Llama 3 8B on 8 B200s) in precision ``dtype`` whose settings
    say ``settings``: how validate reads a recipe's switches."""
    def build(dtype: str, settings: str):
        return row_case({"case_id": "r", "source": "Megatron-Bridge performance summary",
                         "framework": "Megatron-Bridge", "gpu_id": "b200", "n_gpus": 8, "gpus_per_node": 8,
                         "precision": dtype, "model": "Llama3 8B", "n_layers": 32, "d_model": 4096, "n_heads": 32,
                         "n_kv_heads": 8, "ffn_hidden": 14336, "mlp": "swiglu", "vocab": 128256, "seq_len": 8192,
                         "global_batch": 128, "micro_batch": 2, "tp": 1, "pp": 1, "dp": 8, "settings": settings,
                         "measured_iter_time_s": 4.4})
    return build


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than ~10 s here (left out by default; `-m slow` runs them, "
                                       "`-m 'slow or not slow'` everything; .ci/run runs both selections)")
    if not config.option.markexpr:          # the default selection: everything but the slow families
        config.option.markexpr = "not slow"
