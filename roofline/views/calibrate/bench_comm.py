"""Collective microbenchmarks (torch.distributed): all_reduce, all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single and send/recv over message sizes, reported as nccl-tests
algbw/busbw and fitted to ``t = steps(p) alpha + factor(p) S / busbw`` per collective and link.

Launch with torchrun (reads RANK, WORLD_SIZE, LOCAL_WORLD_SIZE)::

    torchrun --nproc-per-node 8 -m roofline calibrate comm --out dgx-node
    srun torchrun --nnodes 2 --nproc-per-node 8 ... -m roofline calibrate comm --out two-nodes

Each collective runs in the group layouts a TP x DP (x PP) job produces (``layouts``), all groups of
a layout at once, as they run in training:

- ``intra`` (tensor parallel): the ranks of each node, one group per node;
- ``inter`` (data parallel across nodes): one rank per node, one group per local rank, so every GPU's
  traffic crosses the network at the same time (the per-GPU NIC share of a DGX-class node);
- p2p (pipeline parallel): pairs of neighbouring ranks inside a node (intra), and rank r with rank
  r + ranks-per-node on the next node (inter), every pair at once.

Sizes follow nccl-tests: S is the all-reduce buffer, the gathered output of all-gather, the input of
reduce-scatter, the whole buffer of all-to-all; the ``ranks`` of a fit are those of one group.
"""
from __future__ import annotations

import os
import re
import statistics
import sys
import time
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Layout:
    """Groups of global ranks that run one collective at the same time (one per rank at most), or, for
    p2p, each rank's partner (None: idle)."""
    link: str
    groups: tuple           # tuple of tuples of global ranks
    partner: tuple          # p2p partner per global rank, or None


def layouts(p: int, per_node: int) -> list:
    """The intra-node (TP) and inter-node (DP, PP) layouts of ``p`` ranks, ``per_node`` per node.

    >>> [(l.link, l.groups, l.partner) for l in layouts(4, 2)]
    [('intra', ((0, 1), (2, 3)), (1, 0, 3, 2)), ('inter', ((0, 2), (1, 3)), (2, 3, 0, 1))]
    >>> [l.link for l in layouts(8, 8)], [l.link for l in layouts(4, 1)]
    (['intra'], ['inter'])
    """
    nodes = p // per_node
    out = []
    if per_node >= 2:
        groups = tuple(tuple(range(n * per_node, (n + 1) * per_node)) for n in range(nodes))
        partner = tuple(r ^ 1 if (r ^ 1) // per_node == r // per_node and (r ^ 1) < p else None for r in range(p))
        out.append(Layout("intra", groups, partner))
    if nodes >= 2:
        groups = tuple(tuple(n * per_node + i for n in range(nodes)) for i in range(per_node))

        def across(r):
            n = r // per_node
            q = r + per_node if n % 2 == 0 else r - per_node
            return q if q < p else None
        out.append(Layout("inter", groups, tuple(across(r) for r in range(p))))
    return out


def parse_size(text, what: str) -> int:
    """A message size option ('64KiB', '1 GiB', 4096) in bytes."""
    from ...base.units import parse
    return int(parse(re.sub(r"(\d)\s*([A-Za-z])", r"\1 \2", str(text)), "B", what))


def _op(kind: str, size: int, p: int, rank: int, device, dtype, group=None, partner=None, async_op: bool = False):
    """A closure running one collective of nccl-tests size ``size`` bytes on ``group`` (p ranks); p2p:
    a ping-pong with global rank ``partner`` (the lower rank sends first; None: idle). ``async_op``: the collective
    returns its work handle (calibrate overlap runs gloo's beside the main thread)."""
    import torch
    import torch.distributed as dist
    n = max(size // torch.tensor([], dtype=dtype).element_size() // p * p, p)
    kw = {"group": group, "async_op": True} if async_op else {"group": group}
    if kind == "ar":
        x = torch.ones(n, device=device, dtype=dtype)
        return lambda: dist.all_reduce(x, **kw)
    if kind == "ag":
        x, y = torch.ones(n // p, device=device, dtype=dtype), torch.empty(n, device=device, dtype=dtype)
        return lambda: dist.all_gather_into_tensor(y, x, **kw)
    if kind == "rs":
        x, y = torch.ones(n, device=device, dtype=dtype), torch.empty(n // p, device=device, dtype=dtype)
        return lambda: dist.reduce_scatter_tensor(y, x, **kw)
    if kind == "a2a":
        x, y = torch.ones(n, device=device, dtype=dtype), torch.empty(n, device=device, dtype=dtype)
        return lambda: dist.all_to_all_single(y, x, **kw)
    x = torch.ones(n, device=device, dtype=dtype)       # p2p: half the round trip of a ping-pong

    def pingpong():
        if partner is None:
            return
        if rank < partner:
            dist.send(x, partner)
            dist.recv(x, partner)
        else:
            dist.recv(x, partner)
            dist.send(x, partner)
    return pingpong


def measure(kind: str, size: int, p: int, rank: int, device, dtype, repeats: int, group=None, partner=None) -> float:
    """Median seconds of one collective (max over all ranks of each repeat), after one warm-up."""
    import torch
    import torch.distributed as dist
    fn = _op(kind, size, p, rank, device, dtype, group, partner)
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


def torchrun_ranks(ranks_per_node, command: str) -> tuple[int, int, int]:
    """(rank, world size, ranks per node) of a ``calibrate COMMAND`` run under torchrun; one-line errors when it is
    not, or when the ranks cannot form nodes of ``ranks_per_node`` (default torchrun's LOCAL_WORLD_SIZE)."""
    from ...base.errors import InputError
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise InputError(f"calibrate {command} must run under torchrun: torchrun --nproc-per-node N -m roofline "
                         f"calibrate {command} ...")
    rank, p = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    per_node = ranks_per_node or int(os.environ.get("LOCAL_WORLD_SIZE", p))
    if p < 2:
        raise InputError(f"calibrate {command} needs at least 2 ranks (WORLD_SIZE >= 2)")
    if per_node < 1 or p % per_node:
        raise InputError(f"--ranks-per-node {per_node} must divide WORLD_SIZE {p}")
    return rank, p, per_node


def main(args) -> int:
    from ...base.errors import InputError
    from . import outputs, profile
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise InputError("calibrate comm needs torch (pip install 'roofline[calibrate]')") from None
    rank, p, per_node = torchrun_ranks(args.ranks_per_node, "comm")
    cuda = torch.cuda.is_available() and args.backend != "gloo"
    backend = args.backend or ("nccl" if cuda else "gloo")
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    sizes = ([parse_size(s, "--sizes") for s in args.sizes] if args.sizes
             else default_sizes(parse_size(args.max_size, "--max-size")))
    repeats = args.repeats or (20 if cuda else 5)
    dist.init_process_group(backend)
    dtype = torch.bfloat16 if cuda else torch.float32
    kinds = [k for k in KINDS if not (k == "a2a" and backend == "gloo" and not hasattr(dist, "all_to_all_single"))]
    plan = layouts(p, per_node)
    rows = []
    try:
        mine = {}
        for lay in plan:    # every rank creates every group, in the same order (torch.distributed's rule)
            for g in lay.groups:
                pg = dist.new_group(list(g))
                if rank in g:
                    mine[lay.link] = (pg, len(g))
        from ...base import progress
        with progress.bar(f"calibrate comm ({p} ranks, {backend})", total=len(plan) * len(kinds) * len(sizes),
                          unit="size", disable=rank != 0) as bar:
            for lay in plan:
                pg, pk = mine[lay.link]
                for kind in kinds:
                    for j, sz in enumerate(sizes):
                        bar.note(f"{lay.link} {kind} {sz} B")
                        try:
                            t = measure(kind, sz, pk, rank, device, dtype, repeats, pg, lay.partner[rank])
                        except RuntimeError as exc:        # e.g. a collective the backend lacks
                            if rank == 0:
                                bar.write(f"{lay.link} {kind}: skipped ({str(exc).splitlines()[0][:80]})",
                                          file=sys.stderr)
                            bar.update(len(sizes) - j)     # this and the kind's larger sizes: the count ends full
                            break
                        bar.update(1)
                        rows.append((lay.link, kind, 2 if kind == "p2p" else pk, sz, t))
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return 0
    links, lines, measured = {}, [], {}
    for lay in plan:
        for kind in kinds:
            r = [(pk, s, t) for lk, k, pk, s, t in rows if k == kind and lk == lay.link]
            if len(r) < 2:
                continue
            pk, s, t = np.array(r).T
            links[kind, lay.link] = fit.fit_alpha_beta(s, pk, t, kind)
            measured[kind, lay.link] = (s, pk, t)
            for pi, si, ti in r:
                lines.append(f"{kind},{lay.link},{pi},{si},{ti:.6g},{fit.algbw(si, ti):.6g},{fit.busbw(si, ti, kind, pi):.6g}")
    _, _, pid = outputs.out_paths(args.out)
    header = {"id": pid, "name": f"{p} ranks ({backend}), collectives calibrated", "kind": "calibrated-links"}
    samples, err = profile.fit_error_section({}, links)
    prov = {"source": f"roofline calibrate comm, {p} ranks, {p // per_node} node(s) of {per_node}, backend {backend}",
            "samples": samples, "fit_error": err,
            "assumptions": ["nccl-tests conventions: busbw = algbw x factor(p); times are the max over ranks, "
                            "median over repeats; p2p is half a ping-pong",
                            "layouts: intra = the ranks of each node (TP groups), inter = one rank per node for "
                            "every local rank (DP groups across nodes), all groups of a layout at once; p2p pairs "
                            "neighbours in a node (intra) and rank r with r + ranks-per-node (inter), all pairs "
                            "at once (PP)"]}
    text = profile.profile_text(header, None, profile.collectives_section(links), prov)
    csv_text = "collective,link,ranks,bytes,t_s,algbw_Bps,busbw_Bps\n" + "\n".join(lines) + "\n"
    outputs.write_outputs(args.out, text, csv_text)
    for (kind, lk), f in links.items():
        print(f"{kind:4} {lk:5} call {f.call * 1e6:7.2f} us  alpha {f.alpha * 1e6:8.2f} us  busbw {f.busbw / 1e9:8.3f} GB/s  "
              f"MAPE {f.mape:6.1%}")
    if getattr(args, "plot", None) and links:
        from . import fit_plot
        fit_plot.plot(args.plot, links=fit_plot.link_panels(measured, links),
                      title=f"calibrate comm: {p} ranks, {p // per_node} node(s) of {per_node}, {backend}")
    return 0
