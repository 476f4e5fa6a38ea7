"""Our collective model's bus bandwidth vs published multi-node nccl-tests figures.

Each row of roofline/data/nccl_tests_published.csv names a bundled profile (h100-sxm, a100-sxm4-80gb) and the
NIC line rate per GPU of the system measured; the model is formulas/comm.collective for a group of
``nodes x gpus_per_node`` ranks with stride 1 (nccl-tests' layout: consecutive ranks share a node), evaluated with
that profile at that line rate (Hardware.with_network), and converted to busbw as nccl-tests does
(busbw = factor(p) x size / time). Prints model busbw, published busbw and their ratio per row, then the
median ratio per collective and node count. ratio > 1: the model is faster than the measurement (optimistic).

    PYTHONPATH=$PWD python benchmarks/nccl_multinode_check.py
"""
from __future__ import annotations

import csv
import statistics
from pathlib import Path

import sympy as sp

from roofline.spec import hardware
from roofline.model.formulas import comm as CM
from roofline.model.formulas import symbols as S

CSV = Path(__file__).resolve().parents[1] / "roofline" / "data" / "nccl_tests_published.csv"
RDMA = ("InfiniBand", "RoCE", "EFA")  # transports the profiles' inter-node links describe (GPUDirect RDMA; AWS EFA
                                       # carries it over its SRD protocol on p5, FI_EFA_USE_DEVICE_RDMA)


def rows(path: Path = CSV) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def model_busbw(kind: str, profile: str, gbps: float, nodes: int, gpn: int, size: float) -> float:
    """Bus bandwidth (B/s) of our model for one nccl-tests point."""
    hw = hardware.load(profile).with_network(gbps)
    p, sz = sp.Symbol("p", positive=True), sp.Symbol("size", positive=True)
    expr = CM.collective(kind, p, sz, 1)
    values = {S.gpus_per_node: gpn, p: nodes * gpn, sz: size}
    for (c, link), (alpha, bw) in hw.collectives.items():
        values[S.ALPHA[c, link]], values[S.BUSBW[c, link]] = alpha, bw
        values[S.CALL[c, link]] = hw.collective_calls.get((c, link), 0.0)
    t = float(expr.subs(values))
    return float(CM.FACTOR[kind](nodes * gpn)) * size / t


def compare(path: Path = CSV) -> list[dict]:
    out = []
    for r in rows(path):
        m = model_busbw(r["collective"], r["profile"], float(r["nic_gbps_per_gpu"]), int(r["nodes"]),
                        int(r["gpus_per_node"]), float(r["message_bytes"]))
        pub = float(r["busbw_gbs"]) * 1e9
        out.append({**r, "model_gbs": m / 1e9, "ratio": m / pub, "rdma": r["network"].startswith(RDMA)})
    return out


def main() -> None:
    res = compare()
    print(f"{'system':44s} {'net':16s} {'coll':4s} {'nodes':>5s} {'bytes':>11s} {'model':>7s} {'published':>9s} {'ratio':>6s}")
    for r in res:
        print(f"{r['system'][:44]:44s} {r['network'][:16]:16s} {r['collective']:4s} {r['nodes']:>5s} "
              f"{int(r['message_bytes']):>11d} {r['model_gbs']:7.1f} {float(r['busbw_gbs']):9.1f} {r['ratio']:6.2f}")
    print("\nmedian ratio model/published per collective and node count (RDMA rows; TCPXO rows apart):")
    groups: dict = {}
    for r in res:
        groups.setdefault((r["collective"], int(r["nodes"]), "RDMA" if r["rdma"] else r["network"]), []).append(r["ratio"])
    for (c, n, net), v in sorted(groups.items()):
        print(f"  {c:4s} {n:4d} nodes {net:16s} n={len(v):2d}  median {statistics.median(v):.2f}  "
              f"range {min(v):.2f}-{max(v):.2f}")


if __name__ == "__main__":
    main()
