"""Search speed figures: vectorized plans/s and the wall time of a full CLI search.

    python benchmarks/search_speed.py

1. ``evaluate`` throughput on ~1e6 plans (the real GPT-3 175B plan space on 1024 A100s, tiled
   to 1e6 rows), in cache-sized chunks as the search runs it, and in one call for comparison.
2. The wall time of ``python -m roofline search --model gpt3-175b --gpu a100-sxm4-80gb --gpus 1024
   --global-batch 1536`` (interpreter start-up included), best of 3.
"""
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from roofline.spec import hardware, models  # noqa: E402
from roofline.model.predict import hardware_inputs, model_inputs, plan_inputs  # noqa: E402
from roofline.views.search import default_base, enumerate_plans, evaluate_arrays, plan_arrays  # noqa: E402

N = 1_000_000


def main() -> None:
    m, hw = models.load("gpt3-175b"), hardware.load("a100-sxm4-80gb")
    t = time.perf_counter()
    knobs, enumerated = enumerate_plans(m, 1024, 1536)
    t_enum = time.perf_counter() - t
    n0 = len(knobs["tp"])
    reps = -(-N // n0)
    knobs = {k: np.tile(v, reps)[:N] for k, v in knobs.items()}
    x = {**model_inputs(m), **plan_inputs(default_base()), **hardware_inputs(hw), **plan_arrays(knobs, 1536)}
    print(f"enumeration: {enumerated:,} knob combinations -> {n0:,} valid plans in {t_enum * 1e3:.0f} ms "
          f"({enumerated / t_enum:.3g} combinations/s)")
    for label, chunk in (("chunked (search)", None), ("one call on 1e6", N)):
        best = np.inf
        for _ in range(3):
            t = time.perf_counter()
            evaluate_arrays(x, N, **({} if chunk is None else {"chunk": chunk}))
            best = min(best, time.perf_counter() - t)
        print(f"evaluate, {label:<17}: {N:,} plans in {best:.3f} s = {N / best:.3g} plans/s")
    cmd = [sys.executable, "-m", "roofline", "search", "--model", "gpt3-175b", "--gpu", "a100-sxm4-80gb",
           "--gpus", "1024", "--global-batch", "1536"]
    walls = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=os.path.join(os.path.dirname(__file__), ".."))
        walls.append(time.perf_counter() - t)
    print(f"full search, 175B on 1024 GPUs, all knobs (CLI, start-up included): best {min(walls):.2f} s, "
          f"median {sorted(walls)[1]:.2f} s")


if __name__ == "__main__":
    main()
