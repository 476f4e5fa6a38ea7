"""Speed of the core: CLI wall time (median of runs) and vectorized evaluations per second.

    python benchmarks/core_speed.py
"""
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline.spec import hardware  # noqa: E402
from roofline.spec.config import Model, Plan  # noqa: E402
from roofline.model.predict import evaluate, inputs  # noqa: E402

CMD = [sys.executable, "-m", "roofline", "transformer", "--layers", "96", "--d-model", "12288", "--heads", "96",
       "--seq-len", "2048", "--global-batch", "1536", "--micro-batch", "1", "--tp", "8", "--pp", "8", "--dp", "16",
       "--gpu", "a100-sxm4-80gb"]


def cli_wall(n=9):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(CMD, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def points_per_second(n=1_000_000):
    x = inputs(Model(n_layers=96, d_model=12288, n_heads=96, seq_len=2048), Plan(tp=8, pp=8, dp=16, global_batch=1536),
               hardware.load("a100-sxm4-80gb"))
    rng = np.random.default_rng(0)
    x = dict(x)
    x["tp"] = rng.choice([1, 2, 4, 8], n).astype(float)
    x["pp"] = rng.choice([1, 2, 4, 8, 16], n).astype(float)
    x["micro_batch"] = rng.choice([1, 2, 4], n).astype(float)
    x["rc_full"] = rng.choice([0.0, 1.0], n)
    evaluate(x)  # warm
    t = time.perf_counter()
    out = evaluate(x)
    dt = time.perf_counter() - t
    assert out["step_time"].shape == (n,)
    return n / dt


if __name__ == "__main__":
    print(f"CLI `transformer` median wall time: {cli_wall():.3f} s  (target <= 0.5 s)")
    print(f"vectorized evaluation: {points_per_second():.3g} configurations/s  (target >= 1e6)")
