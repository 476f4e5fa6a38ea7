"""Host (CPU) issue time of one Megatron-Core transformer layer, dense vs MoE with 2..16 local experts.

Prints the table of roofline/views/calibrate/bench_host_moe.py (Megatron-Core's own layers on tiny shapes; the
intercepts of MoE minus dense are the profile's host keys moe_fwd / moe_bwd, which `python -m roofline calibrate
host --moe` writes). Needs torch and megatron-core (pip install megatron-core); CPU or GPU.

    python benchmarks/moe_host_megatron_core.py [--repeats 100] [--device cuda:0]
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    from roofline.base.errors import InputError
    from roofline.views.calibrate import bench_host_moe
    try:
        r = bench_host_moe.measure(args.device, args.repeats)
    except InputError as exc:
        print(f"moe_host_megatron_core: {exc}", file=sys.stderr)
        return 2
    print(bench_host_moe.table(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
