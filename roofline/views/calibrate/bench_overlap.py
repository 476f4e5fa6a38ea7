"""Overlap interference: a GEMM timed alone and beside a running collective, per link, -> the profile's
``overlap:`` block (the SMs a communication kernel effectively holds; formulas/comm.py ``interference``).

Launch with torchrun, like ``calibrate comm``::

    torchrun --nproc-per-node 8 -m roofline calibrate overlap --out my-node-overlap
    srun torchrun --nnodes 2 --nproc-per-node 8 ... -m roofline calibrate overlap --out two-nodes-overlap

The model prices compute beside a collective as running at (1 - f) of its rate while the collective runs, with
f = n / n_SM (docs/models.md "Overlap and its cost"). A loop of GEMMs that takes ``t_alone`` by itself takes
``t_beside = t_alone / (1 - f)`` inside a longer stream of collectives, so one measurement gives

    f = 1 - t_alone / t_beside,      n = f n_SM,

everything the collective takes from the GEMM (its thread blocks, HBM and L2 bandwidth) counted as SMs. Each layout
of ``calibrate comm`` (``intra``: the ranks of each node, the TP case; ``inter``: one rank per node, the DP case
across nodes) gives its own count: ``nccl_sms`` and ``nccl_sms_inter``. A memory-bound kernel (a large copy) is
measured the same way and reported beside it; the profile takes the GEMM's count (the model has one count per
kind of collective, and the compute that hides gradient reduce-scatters and TP collectives is mostly GEMMs).
Transformer Engine's userbuffers kernels (``ub_sms``, ``ub_ring_sms``) are not measured here: they keep the
defaults.

On CUDA the collectives run on a side stream (NCCL waits on it and the GEMM stream does not); on CPU (gloo) they
are asynchronous work items beside the GEMMs of the main thread, which exercises the command, not a GPU.
"""
from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass

from .bench_comm import _op, layouts, parse_size, torchrun_ranks

KERNELS = ("gemm", "copy")
COVER = 1.5          # collectives enqueued to run this many times as long as the GEMM loop alone
TRIES = 4            # doublings of the collective count when a stream of them ended before the kernels


def interference(t_alone: float, t_beside: float) -> float:
    """Fraction of the GPU the collective took from a kernel timed ``t_alone`` alone and ``t_beside`` beside it:
    1 - t_alone / t_beside, 0 when the kernel ran no slower.

    >>> interference(1.0, 1.25), interference(2.0, 1.9)
    (0.2, 0.0)
    """
    if not (t_alone > 0 and t_beside > 0 and math.isfinite(t_alone) and math.isfinite(t_beside)):
        raise ValueError(f"times must be positive and finite, got {t_alone!r} and {t_beside!r}")
    return max(0.0, 1.0 - t_alone / t_beside)


def sms_held(f: float, sms: int) -> float:
    """The SM count ``n`` with n / n_SM = f, kept below n_SM (a kernel that held every SM would stop the compute
    beside it; the profile rule).

    >>> sms_held(0.25, 132), sms_held(1.0, 108)
    (33.0, 107.0)
    """
    return round(min(f * sms, sms - 1.0), 2) if sms > 1 else 0.0


@dataclass(frozen=True)
class Sample:
    link: str           # intra | inter
    kernel: str         # gemm | copy
    ranks: int          # ranks of the collective's group
    collective: str     # ar | ag | rs | a2a
    size: int           # the collective's nccl-tests size, bytes
    t_alone: float      # s, the kernel loop alone (median over repeats, mean over ranks)
    t_beside: float     # s, the same loop inside the stream of collectives
    t_comm: float       # s, one collective alone
    t_comm_beside: float    # s, one collective of the stream that ran beside the kernels (mean)
    covered: bool       # the collectives outlasted the kernel loop on every rank

    @property
    def f(self) -> float:
        return interference(self.t_alone, self.t_beside)


def _kernel(kind: str, n: int, device, dtype):
    import torch
    if kind == "gemm":
        a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
        c = torch.empty(n, n, device=device, dtype=dtype)
        return lambda: torch.mm(a, b, out=c)
    x = torch.randn(4 * n * n, device=device, dtype=dtype)     # a copy of 8 n^2 elements read + written
    y = torch.empty_like(x)
    return lambda: y.copy_(x)


def _sync(device):
    import torch
    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)


def _loop_alone(fn, k: int, device, repeats: int) -> float:
    """Median seconds of ``k`` back-to-back calls."""
    times = []
    for _ in range(repeats):
        _sync(device)
        t = time.perf_counter()
        for _ in range(k):
            fn()
        _sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _loop_beside(fn, k: int, comm, m: int, device) -> tuple[float, float, bool]:
    """(seconds of ``k`` kernel calls while ``m`` collectives run beside them, mean seconds per collective, whether
    the collectives were still running when the kernels ended)."""
    import torch
    if str(device).startswith("cuda"):
        side = torch.cuda.Stream(device)
        c0, c1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        k0, k1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        with torch.cuda.stream(side):
            c0.record(side)
            for _ in range(m):
                comm()
            c1.record(side)
        k0.record()
        for _ in range(k):
            fn()
        k1.record()
        torch.cuda.synchronize(device)
        t_k = k0.elapsed_time(k1) / 1e3
        covered = c0.elapsed_time(c1) >= c0.elapsed_time(k1)
        return t_k, c0.elapsed_time(c1) / 1e3 / m, covered
    works, t0 = [], time.perf_counter()          # gloo: collectives as asynchronous work beside the main thread
    for _ in range(m):
        works.append(comm())
    t = time.perf_counter()
    for _ in range(k):
        fn()
    t_k = time.perf_counter() - t
    covered = not works[-1].is_completed()
    for w in works:
        w.wait()
    return t_k, (time.perf_counter() - t0) / m, covered


def measure_link(link: str, kind: str, size: int, group, pk: int, rank: int, device, dtype, n: int, k: int,
                 repeats: int) -> list:
    """One link's samples (every kernel), each averaged over the ranks of the whole job."""
    import torch
    import torch.distributed as dist
    from .bench_comm import measure as comm_alone
    t_comm = comm_alone(kind, size, pk, rank, device, dtype, max(3, repeats), group)
    comm = _op(kind, size, pk, rank, device, dtype, group, async_op=not str(device).startswith("cuda"))
    out = []
    for kern in KERNELS:
        fn = _kernel(kern, n, device, dtype)
        fn()
        t_alone = _loop_alone(fn, k, device, repeats)
        # every rank must issue the same number of collectives: m from the slowest rank's loop
        slowest = torch.tensor([t_alone], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        m = max(2, math.ceil(COVER * float(slowest) / t_comm))
        for attempt in range(TRIES):          # every rank agrees (MIN) on whether the collectives covered the loop
            dist.barrier()
            t_b, t_cb, covered = _loop_beside(fn, k, comm, m, device)
            ok = torch.tensor([1.0 if covered else 0.0], dtype=torch.float64, device=device)
            dist.all_reduce(ok, op=dist.ReduceOp.MIN)
            covered = float(ok) > 0
            if covered or attempt == TRIES - 1:
                break
            m *= 2
        vals = torch.tensor([t_alone, t_b, t_cb], dtype=torch.float64, device=device)
        dist.all_reduce(vals)
        ta, tb, tcb = (float(v) / dist.get_world_size() for v in vals)
        out.append(Sample(link, kern, pk, kind, size, ta, tb, t_comm, tcb, covered))
    return out


def fragment(samples: list, pid: str, source: str, sms: int, sms_from: str, base: str | None = None,
             base_name: str = "") -> tuple[str, dict]:
    """(the YAML ``calibrate overlap --out`` writes, the overlap block): an ``overlap:`` block with its provenance,
    which a profile takes with ``overlap_from: FILE``, or, with ``base``, a whole profile."""
    import yaml
    keys = {"intra": "nccl_sms", "inter": "nccl_sms_inter"}
    block = {keys[s.link]: sms_held(s.f, sms) for s in samples if s.kernel == "gemm"}
    what = "overlap interference measured: " + ", ".join(f"{k} {v:g}" for k, v in block.items())
    head = {"id": pid, "name": f"{base_name}, {what}" if base_name else what, "kind": "calibrated-overlap"}
    if base:
        head["base"] = base
    measured = {}
    for s in samples:
        measured.setdefault(s.link, {})[s.kernel] = {
            "slowdown": round(s.t_beside / s.t_alone - 1.0, 4), "f": round(s.f, 4),
            "alone_s": float(f"{s.t_alone:.6g}"), "beside_s": float(f"{s.t_beside:.6g}"),
            "collective_s_alone": float(f"{s.t_comm:.6g}"), "collective_s_beside": float(f"{s.t_comm_beside:.6g}"),
            "covered": s.covered}
    prov = {"source": source,
            "assumptions": [f"n = f x n_SM with f = 1 - t_alone / t_beside of a GEMM loop inside a longer stream of "
                            f"collectives; n_SM = {sms} ({sms_from}); mean over every rank",
                            "the GEMM's count is the profile's (the model has one count per kind of collective); the "
                            "copy kernel's slowdown is reported only",
                            "ub_sms and ub_ring_sms (Transformer Engine userbuffers) are not measured: defaults"],
            "measured": measured}
    dump = lambda d, **kw: yaml.safe_dump(d, sort_keys=False, width=110, **kw)  # noqa: E731
    text = ("# generated by `roofline calibrate overlap`; measure again rather than edit\n" + dump(head)
            + dump({"overlap": block}, default_flow_style=None) + dump({"provenance": prov}))
    return text, block


def samples_csv(samples: list) -> str:
    head = "link,kernel,ranks,collective,bytes,t_alone_s,t_beside_s,f,t_collective_s,t_collective_beside_s,covered"
    return head + "\n" + "".join(
        f"{s.link},{s.kernel},{s.ranks},{s.collective},{s.size},{s.t_alone:.6g},{s.t_beside:.6g},{s.f:.4f},"
        f"{s.t_comm:.6g},{s.t_comm_beside:.6g},{int(s.covered)}\n" for s in samples)


def main(args) -> int:
    from ...base.errors import InputError
    from . import outputs
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise InputError("calibrate overlap needs torch (pip install 'roofline[calibrate]')") from None
    rank, p, per_node = torchrun_ranks(args.ranks_per_node, "overlap")
    base_name, base_sms = "", None
    if args.base:
        from ...spec import hardware
        hw = hardware.load(args.base)               # an unknown --base fails before the measuring
        base_name, base_sms = hw.name, hw.sm_count
    outputs.out_paths(args.out, create=False)      # a bad --out fails before the measuring
    cuda = torch.cuda.is_available() and args.backend != "gloo"
    backend = args.backend or ("nccl" if cuda else "gloo")
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if args.sms:
        sms, sms_from = args.sms, "--sms"
    elif cuda:
        sms, sms_from = torch.cuda.get_device_properties(device).multi_processor_count, "the device's SM count"
    elif base_sms:
        sms, sms_from = base_sms, f"--base {args.base}"
    else:
        raise InputError("calibrate overlap on CPU needs the SM count the fraction converts to: --sms N or --base ID")
    size = parse_size(args.comm_size, "--comm-size")
    n = args.gemm_size or (8192 if cuda else 256)
    k = args.gemm_repeats or (20 if cuda else 10)
    repeats = args.repeats or (5 if cuda else 3)
    dtype = torch.bfloat16 if cuda else torch.float32
    dist.init_process_group(backend)
    samples = []
    try:
        plan = layouts(p, per_node)
        mine = {}
        for lay in plan:
            for g in lay.groups:
                pg = dist.new_group(list(g))
                if rank in g:
                    mine[lay.link] = (pg, len(g))
        from ...base import progress
        with progress.bar(f"calibrate overlap ({p} ranks, {backend})", total=len(plan), unit="link",
                          disable=rank != 0) as bar:
            for lay in plan:
                pg, pk = mine[lay.link]
                bar.note(f"{lay.link}: {args.collective} {size} B beside {k} x GEMM {n}^3")
                samples += measure_link(lay.link, args.collective, size, pg, pk, rank, device, dtype, n, k, repeats)
                bar.update(1)
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return 0
    _, _, pid = outputs.out_paths(args.out, create=False)
    source = (f"roofline calibrate overlap, {p} ranks, {p // per_node} node(s) of {per_node}, backend {backend}, "
              f"{args.collective} of {size} B beside GEMMs of {n}^3 ({dtype})".replace("torch.", ""))
    text, block = fragment(samples, pid, source, sms, sms_from, base=args.base, base_name=base_name)
    outputs.write_outputs(args.out, text, samples_csv(samples))
    for s in samples:
        print(f"{s.link:5} {s.kernel:4} alone {s.t_alone * 1e3:9.3f} ms  beside {s.t_beside * 1e3:9.3f} ms  "
              f"slowdown {s.t_beside / s.t_alone - 1:+7.1%}  f {s.f:.3f}" + ("" if s.covered else
              "  (the collectives ended first: raise --comm-size)"))
    print("overlap: {" + ", ".join(f"{k}: {v:g}" for k, v in block.items()) + "}")
    if not all(s.covered for s in samples):
        print("warning: on some rank the collectives ended before the kernels: the slowdown is a lower bound",
              file=sys.stderr)
    return 0
