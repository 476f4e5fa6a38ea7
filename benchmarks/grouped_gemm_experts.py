"""The experts' grouped GEMM against the number of local experts: measured on a device, and as the model prices it.

The same work (T token copies through an h x f expert GEMM, forward and backward) split over E local experts of T/E
rows each, for E = 1, 2, 4, ... The model prices it as compute.gemm(..., groups=E): one roofline of the whole FLOPs
and bytes, the size saturation at T/E rows, and a fixed time t0 per GEMM of which four overlap (Transformer Engine's
GroupedLinear issues one cuBLAS GEMM per expert round-robin over four streams). Whether the fixed cost per expert is
that small is what the nemo rows with many local experts question (docs/validation.md; TE#3134 times TE's
multi-stream path on SM100 at about 33 us per expert GEMM for 8 x 128 tokens). This script measures it:

- ``loop``: one stream, the experts' GEMMs one after the other (Megatron-Core SequentialMLP);
- ``streams``: the same GEMMs round-robin over four CUDA streams, each joined back by an event (the pattern of
  Transformer Engine's nvte_multi_stream_cublas_gemm); on CPU it is the loop;
- ``grouped``: torch._grouped_mm, one kernel for all experts, where torch has it for the device and dtype (the
  backward's data gradient grouped, its weight gradients per expert: _grouped_mm has no per-group K split here).

Forward: Y_e = X_e W_e; backward: dX_e = dY_e W_e^T and dW_e = X_e^T dY_e (two GEMMs per expert). Medians of
``--repeats`` timed calls after a warm-up; CUDA events on a GPU, perf_counter on CPU.

    python benchmarks/grouped_gemm_experts.py --device cuda:0 --gpu h100-sxm [--tokens 65536 --hidden 4096 --ffn 1536]
    python benchmarks/grouped_gemm_experts.py --device cpu --tokens 256 --hidden 64 --ffn 32 --experts 1,2,4

Prints one row per expert count: measured forward and backward per method, the model's, and measured / model.
"""
from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time

STREAMS = 4      # Transformer Engine's compute streams for grouped GEMMs (formulas/compute.py GEMM_STREAMS)


@functools.lru_cache(maxsize=8)
def _inputs(gpu: str) -> dict:
    """The formula inputs of profile ``gpu`` for a BF16 expert GEMM whose weight gradients are written (no fused
    gradient accumulation, as the script's backward does), launched one expert at a time as Transformer Engine's
    GroupedLinear does (exp_launch 1: a fixed time per GEMM, four streams at a time)."""
    from roofline.model.predict import hardware_inputs
    from roofline.spec import hardware

    return {**hardware_inputs(hardware.load(gpu), "bf16"), "act_bytes": 2, "grad_bytes": 2, "wgrad_fusion": 0,
            "q_saved": 1, "q_bytes": 0, "gpu_z": 0.0, "hp_frac": 0.0, "exp_launch": 1.0}


def model_times(gpu: str, tokens: int, hidden: int, ffn: int, experts: int) -> tuple[float, float]:
    """(forward, backward) seconds the model prices for the grouped GEMM on profile ``gpu`` in BF16."""
    from roofline.model.formulas import compute as C
    from roofline.model.predict import value_at

    op = C.gemm("experts", tokens, hidden, ffn, groups=experts)
    x = _inputs(gpu)
    return value_at(C.op_time(op, "fwd"), x), value_at(C.op_time(op, "bwd"), x)


def _timer(device: str):
    import torch

    cuda = device.startswith("cuda")

    def run(fn, repeats: int) -> float:
        for _ in range(3):
            fn()
        times = []
        for _ in range(repeats):
            if cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) / 1e3)
            else:
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
        return statistics.median(times)
    return run


def measure(device: str, tokens: int, hidden: int, ffn: int, experts: int, repeats: int) -> dict:
    """Measured seconds per method: {method: (forward, backward)}; methods the device cannot run are left out."""
    import torch

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    m = tokens // experts
    xs = [torch.randn(m, hidden, device=device, dtype=dtype) for _ in range(experts)]
    ws = [torch.randn(hidden, ffn, device=device, dtype=dtype) / hidden ** 0.5 for _ in range(experts)]
    dys = [torch.randn(m, ffn, device=device, dtype=dtype) for _ in range(experts)]
    run = _timer(device)
    out = {}

    def fwd_loop():
        for x, w in zip(xs, ws):
            x @ w

    def bwd_loop():
        for x, w, dy in zip(xs, ws, dys):
            dy @ w.t()
            x.t() @ dy
    out["loop"] = (run(fwd_loop, repeats), run(bwd_loop, repeats))

    if device.startswith("cuda"):
        streams = [torch.cuda.Stream(device=device) for _ in range(STREAMS)]

        def on_streams(body):
            def call():
                main = torch.cuda.current_stream(device)     # the capture stream when a graph records the call
                start = torch.cuda.Event()
                start.record(main)
                for i in range(experts):
                    s = streams[i % STREAMS]
                    s.wait_event(start)
                    with torch.cuda.stream(s):
                        body(i)
                for s in streams[:min(STREAMS, experts)]:
                    done = torch.cuda.Event()
                    done.record(s)
                    main.wait_event(done)
            return call

        def fwd_one(i):
            xs[i] @ ws[i]

        def bwd_one(i):
            dys[i] @ ws[i].t()
            xs[i].t() @ dys[i]
        out["streams"] = (run(on_streams(fwd_one), repeats), run(on_streams(bwd_one), repeats))

        def graphed(fn):
            """``fn`` recorded once as a CUDA graph: its replay times the GPU alone, without Python's issue time
            (Transformer Engine issues its per-expert GEMMs from C++, a few us each)."""
            fn()
            torch.cuda.synchronize(device)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            return g.replay
        try:
            out["loop graph"] = (run(graphed(fwd_loop), repeats), run(graphed(bwd_loop), repeats))
            out["streams graph"] = (run(graphed(on_streams(fwd_one)), repeats),
                                    run(graphed(on_streams(bwd_one)), repeats))
        except RuntimeError:
            pass                        # no graph capture on this build

        grouped = getattr(torch, "_grouped_mm", None)
        if grouped is not None:
            x_all = torch.cat(xs)
            w_all = torch.stack(ws)
            dy_all = torch.cat(dys)
            offs = torch.arange(m, tokens + 1, m, device=device, dtype=torch.int32)[:experts]
            try:
                grouped(x_all, w_all, offs=offs)
                w_t = w_all.transpose(-2, -1)
                out["grouped"] = (run(lambda: grouped(x_all, w_all, offs=offs), repeats),
                                  run(lambda: (grouped(dy_all, w_t, offs=offs),
                                               [xs[i].t() @ dys[i] for i in range(experts)]), repeats))
            except (RuntimeError, TypeError, ValueError):
                pass                    # not for this device or dtype
    return out


def _counts(text: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--experts must be comma-separated positive integers, got {text!r}")
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"--experts must be comma-separated positive integers, got {text!r}")
    return vals


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--gpu", default="h100-sxm", help="profile the model prices on (id or YAML)")
    ap.add_argument("--tokens", type=int, default=65536, help="token copies T through the experts (T/E rows each)")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=1536, help="the expert GEMM's output width")
    ap.add_argument("--experts", type=_counts, default=[1, 2, 4, 8, 16, 32, 64])
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    for name in ("tokens", "hidden", "ffn", "repeats"):
        if getattr(args, name) < 1:
            print(f"grouped_gemm_experts: --{name} must be a positive integer, got {getattr(args, name)}",
                  file=sys.stderr)
            return 2
    bad = [e for e in args.experts if args.tokens % e]
    if bad:
        print(f"grouped_gemm_experts: --tokens {args.tokens} must divide by every expert count, not by {bad[0]}",
              file=sys.stderr)
        return 2
    from roofline.base.errors import InputError
    try:
        model = {e: model_times(args.gpu, args.tokens, args.hidden, args.ffn, e) for e in args.experts}
    except InputError as exc:
        print(f"grouped_gemm_experts: {exc}", file=sys.stderr)
        return 2
    print(f"grouped GEMM: {args.tokens} token copies x {args.hidden} -> {args.ffn} over E experts on {args.device}; "
          f"model on {args.gpu} (bf16); times in ms, forward / backward")
    header = None
    for e in args.experts:
        got = measure(args.device, args.tokens, args.hidden, args.ffn, e, args.repeats)
        if header is None:
            header = list(got)
            print(f"  {'E':>4s} {'rows/E':>7s} " + " ".join(f"{m + ' fwd/bwd':>20s}" for m in header)
                  + f" {'model fwd/bwd':>20s} {'fastest / model':>16s}")
        mf, mb = model[e]
        best = min(f + b for f, b in got.values())
        cells = " ".join(f"{1e3 * got[m][0]:9.3f}/{1e3 * got[m][1]:<10.3f}" if m in got else f"{'-':>20s}"
                         for m in header)
        print(f"  {e:4d} {args.tokens // e:7d} {cells} {1e3 * mf:9.3f}/{1e3 * mb:<10.3f} {best / (mf + mb):16.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
