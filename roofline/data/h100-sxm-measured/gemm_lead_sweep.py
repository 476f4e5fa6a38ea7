"""GEMM sweep of calibrate compute twice: as before commit 31d1623 (no busy-wait: the GPU idles while the host
issues) and with the busy-wait queued before each timed call. Writes samples_gemm_{nolead,lead}.csv."""
import sys
import torch
from roofline.views.calibrate import bench_compute as bc, profile
out = sys.argv[1]
orig_cases, orig_sleep = bc.cases, torch.cuda._sleep
bc.cases = lambda dtype, quick, device: [c for c in orig_cases(dtype, quick, device) if c.name == "gemm"]
for name in ("nolead", "lead"):
    torch.cuda._sleep = (lambda n: None) if name == "nolead" else orig_sleep
    ops = bc.run_sweep("cuda:0", "bf16", False, 20)
    open(f"{out}/samples_gemm_{name}.csv", "w").write(profile.samples_csv(ops))
    print(name, "done", flush=True)
