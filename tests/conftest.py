import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def run_cli(*args, check=None):
    """Run `python -m roofline ARGS` in a subprocess; returns CompletedProcess."""
    import subprocess
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "roofline", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


@pytest.fixture
def cli():
    return run_cli


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than ~10 s here (left out by default; `-m slow` runs them, "
                                       "`-m 'slow or not slow'` everything; .ci/run runs both selections)")
    if not config.option.markexpr:          # the default selection: everything but the slow families
        config.option.markexpr = "not slow"
