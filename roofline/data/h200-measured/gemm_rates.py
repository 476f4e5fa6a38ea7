"""GEMM rates on the lent H200: BF16 and per-tensor FP8 bursts, and BF16 sustained over half a minute.

Two profile constants rest on other people's measurements, and this records them on the device:

- ``sustained_clock`` (0.849 in h100-sxm.yaml / h200.yaml): a 700 W Hopper running GEMMs back to back settles
  below its burst rate (stas00/ml-engineering's MSMF / MAMF on an H200 SXM). ``sustained`` runs one 8192^3 BF16
  GEMM back to back for ``--seconds`` and prints the rate of each second, from which sustained / burst is read.
- ``lp_rate`` for per-tensor FP8 on Hopper (0.957, base/precision.py, from Transformer Engine's published H200 NVL
  benchmark): the fraction of its FP8 peak an FP8 GEMM reaches, over a BF16 GEMM's fraction of its BF16 peak.
  ``burst`` times torch._scaled_mm (cuBLASLt FP8 E4M3, per-tensor scales, BF16 output) beside torch.mm in BF16 on
  square and layer-shaped GEMMs; the ratio of the two rates over 2 (FP8 peak / BF16 peak) is that fraction.

Writes CSV rows to stdout: kind,m,k,n,dtype,seconds,tflops (burst) and kind,second,tflops,sm_clock_mhz (sustained).

    python roofline/data/h200-measured/gemm_rates.py burst
    python roofline/data/h200-measured/gemm_rates.py sustained --seconds 30
    python roofline/data/h200-measured/gemm_rates.py sweep      # the burst over 54 expert- and layer-sized shapes
"""
from __future__ import annotations

import argparse
import subprocess
import time

SHAPES = [(8192, 8192, 8192), (4096, 4096, 4096), (16384, 8192, 8192), (16384, 4096, 14336), (16384, 14336, 4096),
          (16384, 8192, 28672), (8192, 2048, 1536), (4096, 7168, 2048)]


def _clock() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _time(torch, fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1_000_000)                    # queue work so the host's issue time is off the clock
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / repeats


SWEEP_MK = [(2048, 768), (768, 2048), (2048, 1536), (4096, 1536), (1536, 4096), (4096, 4096), (7168, 2048),
            (2048, 7168), (8192, 8192)]
SWEEP_M = [512, 1024, 2048, 4096, 8192, 16384]


def burst(torch, repeats: int, shapes=None) -> None:
    print("kind,m,k,n,dtype,seconds,tflops")
    for m, k, n in shapes or SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        flops = 2 * m * k * n
        t = _time(torch, lambda: torch.mm(a, b.t()), repeats)
        print(f"burst,{m},{k},{n},bf16,{t:.6e},{flops / t / 1e12:.1f}", flush=True)
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        t = _time(torch, lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                  repeats)
        print(f"burst,{m},{k},{n},fp8_e4m3_tensor,{t:.6e},{flops / t / 1e12:.1f}", flush=True)
        del a, b, a8, b8


def sustained(torch, seconds: float) -> None:
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    per = 2 * n ** 3
    print("kind,second,tflops,sm_clock_mhz")
    t_end = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < t_end:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        count = 0
        while time.perf_counter() - t0 < 1.0:
            for _ in range(20):
                torch.mm(a, b)
            count += 20
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(f"sustained,{i},{per * count / dt / 1e12:.1f},{_clock()}", flush=True)
        i += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["burst", "sustained", "sweep"])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        raise SystemExit("gemm_rates.py: needs torch (pip install 'roofline[calibrate]') and a CUDA device")
    if not torch.cuda.is_available():
        raise SystemExit("gemm_rates.py: needs a CUDA device; none is visible")
    if args.what == "sustained":
        sustained(torch, args.seconds)
    else:
        burst(torch, args.repeats, [(m, k, n) for k, n in SWEEP_MK for m in SWEEP_M] if args.what == "sweep" else None)


if __name__ == "__main__":
    main()
