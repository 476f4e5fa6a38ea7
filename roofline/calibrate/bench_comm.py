"""Collective microbenchmarks (torch.distributed): all_reduce, all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single and send/recv over message sizes, reported as nccl-tests
algbw/busbw and fitted to ``t = steps(p) alpha + factor(p) S / busbw`` per collective.

Launch with torchrun (reads RANK, WORLD_SIZE, LOCAL_WORLD_SIZE)::

    torchrun --nproc-per-node 8 -m roofline calibrate comm --out dgx-node
    srun torchrun --nnodes 2 --nproc-per-node 8 ... -m roofline calibrate comm --out two-nodes

The link is 'intra' when every rank is on one node (LOCAL_WORLD_SIZE == WORLD_SIZE), else 'inter'
(then the measured busbw is that of the whole hierarchical collective; the profile's inter entry is
exact for one GPU per node). Sizes follow nccl-tests: S is the all-reduce buffer, the gathered
output of all-gather, the input of reduce-scatter, the whole buffer of all-to-all.
"""
from __future__ import annotations

import os
import re
import statistics
import sys
import time

import numpy as np

from . import fit

KINDS = ("ar", "ag", "rs", "a2a", "p2p")


def default_sizes(max_size: int) -> list:
    """1 KiB, 4 KiB, ... (x4) up to ``max_size`` bytes."""
    out, s = [], 1024
    while s <= max_size:
        out.append(s)
        s *= 4
    return out


def _op(kind: str, size: int, p: int, rank: int, device, dtype):
    """A closure running one collective of nccl-tests size ``size`` bytes."""
    import torch
    import torch.distributed as dist
    n = max(size // torch.tensor([], dtype=dtype).element_size() // p * p, p)
    if kind == "ar":
        x = torch.ones(n, device=device, dtype=dtype)
        return lambda: dist.all_reduce(x)
    if kind == "ag":
        x, y = torch.ones(n // p, device=device, dtype=dtype), torch.empty(n, device=device, dtype=dtype)
        return lambda: dist.all_gather_into_tensor(y, x)
    if kind == "rs":
        x, y = torch.ones(n, device=device, dtype=dtype), torch.empty(n // p, device=device, dtype=dtype)
        return lambda: dist.reduce_scatter_tensor(y, x)
    if kind == "a2a":
        x, y = torch.ones(n, device=device, dtype=dtype), torch.empty(n, device=device, dtype=dtype)
        return lambda: dist.all_to_all_single(y, x)
    x = torch.ones(n, device=device, dtype=dtype)       # p2p: rank 0 <-> rank 1 ping-pong, half the round trip

    def pingpong():
        if rank == 0:
            dist.send(x, 1)
            dist.recv(x, 1)
        elif rank == 1:
            dist.recv(x, 0)
            dist.send(x, 0)
    return pingpong


def measure(kind: str, size: int, p: int, rank: int, device, dtype, repeats: int) -> float:
    """Median seconds of one collective (max over ranks of each repeat), after one warm-up."""
    import torch
    import torch.distributed as dist
    fn = _op(kind, size, p, rank, device, dtype)
    cuda = str(device).startswith("cuda")
    times = []
    for i in range(repeats + 1):
        dist.barrier()
        if cuda:
            torch.cuda.synchronize(device)
        t = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize(device)
        dt = torch.tensor([time.perf_counter() - t], dtype=torch.float64, device=device)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        if i:
            times.append(float(dt) / (2 if kind == "p2p" else 1))
    return statistics.median(times)


def main(args) -> int:
    from ..errors import InputError
    from ..units import parse
    from . import cli, profile
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise InputError("calibrate comm needs torch (pip install 'roofline[calibrate]')") from None
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise InputError("calibrate comm must run under torchrun: torchrun --nproc-per-node N -m roofline calibrate comm ...")
    rank, p = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_WORLD_SIZE", p))
    if p < 2:
        raise InputError("calibrate comm needs at least 2 ranks (WORLD_SIZE >= 2)")
    cuda = torch.cuda.is_available() and args.backend != "gloo"
    backend = args.backend or ("nccl" if cuda else "gloo")
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    size = lambda text, what: int(parse(re.sub(r"(\d)\s*([A-Za-z])", r"\1 \2", str(text)), "B", what))  # noqa: E731
    sizes = [size(s, "--sizes") for s in args.sizes] if args.sizes else default_sizes(size(args.max_size, "--max-size"))
    repeats = args.repeats or (20 if cuda else 5)
    dist.init_process_group(backend)
    dtype = torch.bfloat16 if cuda else torch.float32
    kinds = [k for k in KINDS if not (k == "a2a" and backend == "gloo" and not hasattr(dist, "all_to_all_single"))]
    rows = []
    try:
        n = len(kinds) * len(sizes)
        for i, (kind, size) in enumerate((k, s) for k in kinds for s in sizes):
            if rank == 0:
                sys.stderr.write(f"\r[{'#' * (30 * i // n)}{'.' * (30 - 30 * i // n)}] {kind} {size} B   ")
            try:
                t = measure(kind, size, p, rank, device, dtype, repeats)
            except RuntimeError as exc:        # e.g. a collective the backend lacks
                if rank == 0:
                    sys.stderr.write(f"\n{kind}: skipped ({str(exc).splitlines()[0][:80]})\n")
                break
            rows.append((kind, size, t))
        if rank == 0:
            sys.stderr.write("\n")
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return 0
    link = "intra" if local == p else "inter"
    links, lines = {}, []
    for kind in kinds:
        r = [(s, t) for k, s, t in rows if k == kind]
        if len(r) < 2:
            continue
        s, t = np.array(r).T
        pk = 2 if kind == "p2p" else p
        links[kind, link] = fit.fit_alpha_beta(s, np.full(len(s), pk), t, kind)
        for si, ti in r:
            lines.append(f"{kind},{link},{pk},{si},{ti:.6g},{fit.algbw(si, ti):.6g},{fit.busbw(si, ti, kind, pk):.6g}")
    _, _, pid = cli.out_paths(args.out)
    header = {"id": pid, "name": f"{p} ranks ({backend}), collectives calibrated", "kind": "calibrated-links"}
    samples, err = profile.fit_error_section({}, links)
    prov = {"source": f"roofline calibrate comm, {p} ranks, {p // local} node(s), backend {backend}",
            "samples": samples, "fit_error": err,
            "assumptions": ["nccl-tests conventions: busbw = algbw x factor(p); times are the max over ranks, "
                            "median over repeats; p2p is half a ping-pong between ranks 0 and 1"]}
    text = profile.profile_text(header, None, profile.collectives_section(links), prov)
    csv_text = "collective,link,ranks,bytes,t_s,algbw_Bps,busbw_Bps\n" + "\n".join(lines) + "\n"
    cli.write_outputs(args.out, text, csv_text)
    for (kind, lk), f in links.items():
        print(f"{kind:4} {lk:5} alpha {f.alpha * 1e6:8.2f} us  busbw {f.busbw / 1e9:8.3f} GB/s  MAPE {f.mape:6.1%}")
    return 0
