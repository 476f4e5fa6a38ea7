"""Search speed figures: vectorized plans/s and the wall time of a full CLI search.

    python benchmarks/search_speed.py

1. ``evaluate`` throughput on ~1e6 plans (the real GPT-3 175B plan space on 1024 A100s, tiled
   to 1e6 rows), as the search runs it (model/factored.py: each line over the distinct values of the knobs it reads,
   the rest in cache-sized chunks), in one call, and the plain compiled code over every plan in chunks.
2. The wall time of ``python -m roofline search --model gpt3-175b --gpu a100-sxm4-80gb --gpus 1024
   --global-batch 1536`` (interpreter start-up included), best of 3.
3. With ``--moe``: the wall time of one DeepSeek-V3 search on 2048 H800s (global batch 15360; tens of millions of
   plans: EP, its overlap and delayed weight gradients, the recompute-module ladder), and the share of the plans that
   fit, which the search times (it sizes all of them first: views/space.evaluate_arrays).
"""
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from roofline.spec import hardware, models  # noqa: E402
from roofline.model.predict import attention_inputs, hardware_inputs, model_inputs, plan_inputs  # noqa: E402
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
    x = {**model_inputs(m), **plan_inputs(default_base()), **hardware_inputs(hw), **attention_inputs(m, hw), **plan_arrays(knobs, 1536)}
    print(f"enumeration: {enumerated:,} knob combinations -> {n0:,} valid plans in {t_enum * 1e3:.0f} ms "
          f"({enumerated / t_enum:.3g} combinations/s)")
    for label, chunk in (("chunked (search)", None), ("one call on 1e6", N)):
        best = np.inf
        for _ in range(3):
            t = time.perf_counter()
            evaluate_arrays(x, N, **({} if chunk is None else {"chunk": chunk}))
            best = min(best, time.perf_counter() - t)
        print(f"evaluate, {label:<17}: {N:,} plans in {best:.3f} s = {N / best:.3g} plans/s")
    from roofline.model.predict import evaluator
    from roofline.views.space import _OUT, CHUNK

    plain = evaluator(_OUT)
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        with np.errstate(all="ignore"):
            for s in range(0, N, CHUNK):
                plain({k: (v[s:s + CHUNK] if isinstance(v, np.ndarray) and v.ndim else v) for k, v in x.items()})
        best = min(best, time.perf_counter() - t)
    print(f"evaluate, {'plain, chunked':<17}: {N:,} plans in {best:.3f} s = {N / best:.3g} plans/s")
    cmd = [sys.executable, "-m", "roofline", "search", "--model", "gpt3-175b", "--gpu", "a100-sxm4-80gb",
           "--gpus", "1024", "--global-batch", "1536"]
    walls = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=os.path.join(os.path.dirname(__file__), ".."))
        walls.append(time.perf_counter() - t)
    print(f"full search, 175B on 1024 GPUs, all knobs (CLI, start-up included): best {min(walls):.2f} s, "
          f"median {sorted(walls)[1]:.2f} s")
    if "--moe" in sys.argv[1:]:
        cmd = [sys.executable, "-m", "roofline", "search", "--model", "deepseek-v3", "--gpu", "h800", "--gpus", "2048",
               "--global-batch", "15360"]
        t = time.perf_counter()
        out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                             cwd=os.path.join(os.path.dirname(__file__), ".."), env={**os.environ,
                                                                                     "ROOFLINE_PROGRESS": "0"})
        wall = time.perf_counter() - t
        line = next(ln for ln in out.stdout.splitlines() if "knob combinations" in ln)
        print(f"full search, DeepSeek-V3 on 2048 H800s (CLI, start-up included): {wall:.1f} s;{line.split(';')[0]}")


if __name__ == "__main__":
    main()
