"""Operator microbenchmarks (torch): time every operator class the model prices, forward and backward,
map each shape to (F, B, dmin) through roofline/model/formulas, fit the efficiencies, write a profile.

Timing: warm-up, then the median of repeats; CUDA events on GPU, synchronized perf_counter on CPU;
several input buffers are cycled so that caches do not flatter small shapes. torch is imported
inside the functions only.
"""
from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np
import sympy as sp

from ...model.formulas import compute as C
from ...model.formulas import symbols as S
from ...base.units import GiB
from .importers import OpSamples, adam_op

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class Case:
    name: str           # kernel name
    op: C.Op            # its formula
    values: dict        # symbol -> number
    make: object        # () -> (forward closure over fresh inputs, inputs needing grad)


def op_metrics(op: C.Op, values: dict) -> tuple:
    """Numeric (F_fwd, B_fwd, F_bwd, B_bwd, dmin) of an Op for symbol values (constant switches included).

    >>> op_metrics(C.gemm("g", 64, 32, 16), {S.act_bytes: 2})[:2]
    (65536.0, 7168.0)
    """
    out = []
    for e in (op.f_fwd, op.b_fwd, op.f_bwd, op.b_bwd, op.dmin if op.dmin is not None else sp.Integer(0)):
        v = sp.sympify(e).subs(values).subs(values)
        out.append(float(v))
    return tuple(out)


def op_shape_metrics(op: C.Op, values: dict) -> tuple:
    """Per-direction curve inputs of the shaped classes for symbol values: flash attention
    ((head dim, thread blocks, key block) forward, backward) and the batched GEMMs (per direction an
    array kernels x (F, B, extra-pass bytes, K), compute.bmm_kernel); None where the op has none.

    >>> att, _ = op_shape_metrics(_named(C.attention_core(), "flash_attention"), {S.micro_batch: 1,
    ...     S.n_heads: 2, S.tp: 1, S.cp: 1, S.seq_len: 256, S.d_model: 128, S.flash: 1})
    >>> att["fwd"], att["bwd"]
    ((64.0, 4.0, 128.0), (64.0, 4.0, 128.0))
    """
    num = lambda e: float(sp.sympify(e).subs(values).subs(values))  # noqa: E731
    attn = kern = None
    if op.head_dim is not None and op.ctas:
        attn = {d: (num(op.head_dim), num(op.ctas[i]), num(op.kblock[i])) for i, d in enumerate(("fwd", "bwd"))}
    if op.kernels:
        kern = {d: np.array([[num(kn.f), num(kn.b), num(kn.reread), num(kn.k)] for dd, kn in op.kernels if dd == d])
                for d in ("fwd", "bwd")}
    return attn, kern


def _named(ops, name):
    return next(o for o in ops if o.name == name)


def cases(dtype: str, quick: bool, device: str):
    """The sweep: transformer-layer GEMMs split by TP degree, attention (SDPA and the unfused path's batched
    GEMMs), norms, activations, residual, softmax, cross-entropy, embedding, Adam."""
    import torch
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    ab = DTYPE_BYTES[dtype]
    fixed = {S.act_bytes: ab, S.grad_bytes: ab, S.f32_bytes: 4, S.gated: 0, S.eager_elem: 0, S.eager_rope: 0, S.qk_norm: 0, S.rms: 0, S.sq_relu: 0, S.flash: 1, S.flash_speed: 1, S.causal: 1, S.dropout: 0,
             S.cp: 1, S.seq_par: 0, S.n_experts: 1, S.ep: 1, S.top_k: 1, S.capacity_factor: 1, S.learned_pos: 0, S.rope_pos: 1, S.tp: 1}
    rnd = lambda *shape: torch.randn(*shape, device=device, dtype=dt)  # noqa: E731
    out = []
    if quick:
        hs, toks, tps = (64, 256), (64, 256), (1,)
    else:
        hs, toks, tps = (1024, 2048, 4096, 8192), (1024, 2048, 4096, 8192), (1, 2, 4, 8)
    for h in hs:
        for m in toks:
            for tp in tps:
                for (k, n) in ((h, 3 * h // tp), (h // tp, h), (h, 4 * h // tp), (4 * h // tp, h)):
                    def mk(m=m, k=k, n=n):
                        x, w = rnd(m, k).requires_grad_(), rnd(k, n).requires_grad_()
                        return (lambda: x @ w), (x, w)
                    out.append(Case("gemm", C.gemm("g", m, k, n), dict(fixed), mk))
    # attention: SDPA causal on [b, a, s, d]
    for b, a, s, d in ([(1, 2, 64, 32), (1, 2, 128, 32), (1, 4, 256, 64), (2, 2, 128, 64)] if quick else
                       [(b, a, s, d) for b in (1, 4) for a in (16, 32) for s in (1024, 2048, 4096) for d in (64, 128)]):
        def mk(b=b, a=a, s=s, d=d):
            q, k_, v = (rnd(b, a, s, d).requires_grad_() for _ in range(3))
            return _sdpa_flash(q, k_, v), (q, k_, v)
        vals = {**fixed, S.micro_batch: b, S.seq_len: s, S.n_heads: a, S.kv_heads: a, S.d_model: a * d}
        out.append(Case("sdpa", _named(C.attention_core(), "flash_attention"), vals, mk))
    # unfused attention (Megatron-LM 2021, Megatron-DeepSpeed): scores = baddbmm(empty, Q, K^T, beta=0,
    # alpha=1/sqrt(d)) and context = bmm(probs, V) over [b a, s, *] views, each with its backward kernels
    for b, a, s, d in ([(1, 2, 64, 32), (1, 4, 128, 32), (2, 4, 128, 64), (1, 8, 256, 64)] if quick else
                       [(b, a, s, d) for b in (1, 4) for a in (8, 32) for s in (1024, 2048, 4096) for d in (64, 128)]):
        vals = {**fixed, S.flash: 0, S.micro_batch: b, S.seq_len: s, S.n_heads: a, S.kv_heads: a, S.d_model: a * d}

        def mk_scores(b=b, a=a, s=s, d=d):
            q, k_ = (rnd(b * a, s, d).requires_grad_() for _ in range(2))
            buf = torch.empty(b * a, s, s, device=device, dtype=dt)
            return (lambda: torch.baddbmm(buf, q, k_.transpose(1, 2), beta=0.0, alpha=d ** -0.5)), (q, k_)

        def mk_context(b=b, a=a, s=s, d=d):
            p, v = rnd(b * a, s, s).requires_grad_(), rnd(b * a, s, d).requires_grad_()
            return (lambda: torch.bmm(p, v)), (p, v)
        out.append(Case("baddbmm", _named(C.attention_core(), "attn_scores_bmm"), vals, mk_scores))
        out.append(Case("bmm", _named(C.attention_core(), "attn_context_bmm"), vals, mk_context))
    sizes = ([(256, 64), (512, 128), (1024, 128), (1024, 256)] if quick else
             [(t, h) for t in (2048, 8192, 32768) for h in (1024, 4096, 8192)])
    for t, h in sizes:
        tok = {**fixed, S.micro_batch: 1, S.seq_len: t, S.d_model: h, S.n_heads: 1, S.kv_heads: 1, S.ffn_hidden: 4 * h}
        ln = torch.nn.LayerNorm(h, device=device, dtype=dt)
        rms = torch.nn.RMSNorm(h, device=device, dtype=dt)

        def mk_norm(mod, t=t, h=h):
            x = rnd(t, h).requires_grad_()
            return (lambda: mod(x)), (x,)
        out.append(Case("layernorm", _named(C.layer_ops(), "norm_attn"), tok, lambda m=ln, f=mk_norm: f(m)))
        out.append(Case("rmsnorm", _named(C.layer_ops(), "norm_attn"), {**tok, S.rms: 1}, lambda m=rms, f=mk_norm: f(m)))

        def mk_gelu(t=t, h=h):
            x = rnd(t, 4 * h).requires_grad_()
            return (lambda: torch.nn.functional.gelu(x)), (x,)
        out.append(Case("gelu", _named(C.layer_ops(), "mlp_activation"), tok, mk_gelu))

        def mk_swiglu(t=t, h=h):
            x, g = rnd(t, 4 * h).requires_grad_(), rnd(t, 4 * h).requires_grad_()
            return (lambda: torch.nn.functional.silu(g) * x), (x, g)
        out.append(Case("swiglu", _named(C.layer_ops(), "mlp_activation"), {**tok, S.gated: 1}, mk_swiglu))

        def mk_add(t=t, h=h):
            x, r = rnd(t, h).requires_grad_(), rnd(t, h).requires_grad_()
            return (lambda: x + r), (x, r)
        out.append(Case("residual_add", _named(C.layer_ops(), "dropout_residual_attn"), tok, mk_add))
    for b, a, s in ([(1, 2, 128), (1, 4, 256), (2, 4, 256)] if quick else [(1, 16, 1024), (2, 32, 2048), (4, 32, 4096)]):
        def mk_sm(b=b, a=a, s=s):
            x = rnd(b, a, s, s).requires_grad_()
            return (lambda: torch.softmax(x, dim=-1)), (x,)
        vals = {**fixed, S.flash: 0, S.micro_batch: b, S.n_heads: a, S.seq_len: s, S.d_model: a}
        out.append(Case("scores_softmax", _named(C.attention_core(), "scale_mask_softmax_dropout"), vals, mk_sm))
    for t, v in ([(128, 1024), (256, 2048), (512, 4096)] if quick else [(2048, 32000), (4096, 50304), (8192, 128256)]):
        def mk_ce(t=t, v=v):
            x = rnd(t, v).requires_grad_()
            y = torch.randint(0, v, (t,), device=device)
            return (lambda: torch.nn.functional.cross_entropy(x.float(), y)), (x,)
        vals = {**fixed, S.micro_batch: 1, S.seq_len: t, S.vocab: v, S.d_model: 1}
        out.append(Case("cross_entropy", _named(C.head_ops(), "cross_entropy"), vals, mk_ce))
    for t, h, v in ([(128, 64, 1000), (512, 128, 4000), (1024, 256, 8000)] if quick else
                    [(2048, 4096, 50304), (8192, 4096, 50304), (8192, 8192, 128256)]):
        def mk_emb(t=t, h=h, v=v):
            e = torch.nn.Embedding(v, h, device=device, dtype=dt)
            idx = torch.randint(0, v, (t,), device=device)
            return (lambda: e(idx)), (e.weight,)
        vals = {**fixed, S.micro_batch: 1, S.seq_len: t, S.d_model: h, S.vocab: v}
        out.append(Case("embedding", _named(C.embedding_ops(), "embedding"), vals, mk_emb))
    for n in ((2 ** 16, 2 ** 18, 2 ** 20) if quick else (2 ** 22, 2 ** 24, 2 ** 26, 2 ** 28)):
        def mk_adam(n=n):
            p = torch.nn.Parameter(torch.randn(n, device=device))
            p.grad = torch.randn(n, device=device)
            opt = torch.optim.Adam([p], lr=1e-3, foreach=True)
            return opt.step, ()
        # fp32 master parameters: 4 B weights and grads, 8 B of moments
        vals = {**fixed, S.act_bytes: 4, S.grad_bytes: 4, S.opt_bytes: 8}
        out.append(Case("adam", adam_op(n), vals, mk_adam))
    return out


def _sync(device: str):
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


# GPU clock cycles of the busy-wait queued before each timed call: ~1 ms at 1.4-2 GHz, longer than the host
# needs to issue any one case's forward or autograd backward (measured <= 0.3 ms on the H100 host).
GPU_LEAD_CYCLES = 2_000_000


def time_case(case: Case, device: str, repeats: int, buffers: int = 3) -> tuple[float, float | None]:
    """Median forward and backward seconds; ``buffers`` input sets cycled between repeats."""
    import torch
    sets = [case.make() for _ in range(buffers)]
    cuda = device.startswith("cuda")

    def timed(fn):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            # Keep the GPU busy while the host issues fn's kernels, so the events time the kernels and
            # not the host's launch path (an idle GPU would wait for Python, the dispatcher and autograd:
            # measured on an H100, that wait fitted GEMM t0 = 57 us fwd / 151 us bwd). In a training step
            # the host runs ahead of the GPU the same way; its issue time is priced separately (host:).
            torch.cuda._sleep(GPU_LEAD_CYCLES)
            a.record()
            fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) * 1e-3
        _sync(device)
        t = time.perf_counter()
        fn()
        _sync(device)
        return time.perf_counter() - t

    fwd, bwd = [], []
    for i in range(repeats + 1):                        # first round is the warm-up
        fn, inputs = sets[i % buffers]
        if not inputs:                                  # optimizer step: forward only
            t = timed(fn)
            if i:
                fwd.append(t)
            continue
        with torch.no_grad():
            t = timed(fn)
        out = fn()
        g = torch.ones_like(out)
        tb = timed(lambda: torch.autograd.grad(out, inputs, g))
        if i:
            fwd.append(t)
            bwd.append(tb)
    return statistics.median(fwd), (statistics.median(bwd) if bwd else None)


def _out_of_memory(exc: BaseException) -> bool:
    """A failed allocation: torch's OutOfMemoryError on a GPU, an allocator RuntimeError on a CPU."""
    import torch
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", ())
    return isinstance(exc, oom) or (isinstance(exc, RuntimeError) and "alloc" in str(exc).lower()
                                    and "memory" in str(exc).lower())


def run_sweep(device: str, dtype: str, quick: bool, repeats: int, skipped: list | None = None) -> list:
    """Benchmark every case -> list of OpSamples (one per kernel name and direction). A case that does not
    fit in the device's memory is skipped (its label appended to ``skipped``); the sweep goes on."""
    import torch
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)    # idle OpenMP workers spin and get a CPU-quota container throttled
    try:
        return _sweep(device, dtype, quick, repeats, skipped if skipped is not None else [])
    finally:
        torch.set_num_threads(threads)


def case_label(c: Case) -> str:
    """'baddbmm b=4 s=4096 heads=32 d_model=4096': the kernel and its sizes."""
    keys = (S.micro_batch, S.seq_len, S.n_heads, S.d_model, S.vocab)
    short = {S.micro_batch: "b", S.seq_len: "s", S.n_heads: "n_heads", S.d_model: "d_model", S.vocab: "vocab"}
    return " ".join([c.name] + [f"{short[k]}={c.values[k]}" for k in keys if k in c.values])


def _sweep(device: str, dtype: str, quick: bool, repeats: int, skipped: list) -> list:
    import torch
    from ...base import progress
    cs = cases(dtype, quick, device)
    rows: dict = {}
    bar = progress.track(cs, f"calibrate compute ({device}, {dtype})", unit="case")
    for c in bar:
        bar.note(c.name)
        try:
            tf, tb = time_case(c, device, repeats)
        except (RuntimeError, MemoryError) as exc:
            if not (isinstance(exc, MemoryError) or _out_of_memory(exc)):
                raise
            skipped.append(case_label(c))
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
            continue
        F, B, Fb, Bb, dmin = op_metrics(c.op, c.values)
        attn, kern = op_shape_metrics(c.op, c.values)
        for d, f, b, t in (("fwd", F, B, tf), ("bwd", Fb, Bb, tb)):
            if t is not None:
                rows.setdefault((c.name, c.op.cls, d), []).append(
                    ((f, b, dmin, t), attn and attn[d], None if kern is None else kern[d]))
    out = []
    for (name, cls, d), r in rows.items():
        a = np.array([x[0] for x in r])
        attn = tuple(np.array([x[1][j] for x in r]) for j in range(3)) if r[0][1] is not None else None
        kern = tuple(np.stack([x[2][:, j] for x in r]) for j in range(4)) if r[0][2] is not None else None
        out.append(OpSamples(name, cls, d, a[:, 0], a[:, 1], a[:, 2] if cls in ("gemm", "attn") else None, a[:, 3],
                             np.ones(len(a), bool), attn=attn, kern=kern))
    return out


def sustained_ratio(device: str, dtype: str, seconds: float) -> float:
    """kappa: matmul rate held back to back for ``seconds`` / the burst rate after an idle pause.

    The sweep times short bursts; a training run keeps a power-capped GPU at its saturated clock
    (docs/calibration.md). Clamped to (0, 1]: on a CPU or an unthrottled GPU it is ~1.

    On a GPU both rates are timed by CUDA events behind a queued busy-wait (``GPU_LEAD_CYCLES``), so neither
    includes the host's issue and synchronize time. Timing the burst on the host clock did: a burst of five
    4096^3 products lasts under a millisecond, and the ~0.1 ms around it made the burst look slow and kappa high
    (0.881 on the lent H200, where an event-timed 8192^3 burst gives 0.839; roofline/data/h200-measured).
    """
    import torch
    cuda = device.startswith("cuda")
    n = 8192 if cuda else 256
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32) if cuda else torch.float32
    a, b = (torch.randn(n, n, device=device, dtype=dt) for _ in range(2))

    def rate(iters: int) -> float:
        """Products per second over ``iters`` back-to-back products."""
        if not cuda:
            t = time.perf_counter()
            for _ in range(iters):
                a @ b
            return iters / (time.perf_counter() - t)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(GPU_LEAD_CYCLES)
        start.record()
        for _ in range(iters):
            a @ b
        end.record()
        end.synchronize()
        return iters / (start.elapsed_time(end) / 1e3)

    rate(3)
    time.sleep(1.0)                                     # let the clock recover, then a short burst
    burst = max(rate(5) for _ in range(3))
    end = time.perf_counter() + seconds
    held = []
    while time.perf_counter() < end:
        held.append(rate(20))
    sustained = statistics.median(held[len(held) * 2 // 3:] or held)
    return float(min(1.0, max(1e-3, sustained / burst)))


def _match_base(device: str) -> str | None:
    """A datasheet profile whose name matches the CUDA device name (e.g. 'NVIDIA H100 80GB HBM3')."""
    import torch
    if not device.startswith("cuda"):
        return None
    from ...spec.hardware import list_ids, raw
    name = torch.cuda.get_device_name(device).lower().replace("nvidia ", "")
    for pid in list_ids():
        d = raw(pid)
        if d.get("kind") == "datasheet" and name.split()[0] in str(d.get("name", "")).lower():
            return pid
    return None


def main(args) -> int:
    from ...base import progress
    from ...base.errors import InputError
    from . import outputs, profile
    device = args.device
    outputs.torch_device(device, "compute")
    import torch
    repeats = args.repeats or (5 if args.quick else 20)
    skipped: list = []
    ops = run_sweep(device, args.dtype, args.quick, repeats, skipped)
    if skipped:
        sys.stderr.write(f"skipped {len(skipped)} case(s) that do not fit in {device}'s memory: "
                         f"{'; '.join(skipped[:4])}{' ...' if len(skipped) > 4 else ''}\n")
    base = args.base or _match_base(device)
    _, _, pid = outputs.out_paths(args.out)
    header = {"id": pid, "name": f"{device} {args.dtype}, calibrated by microbenchmarks", "kind": "calibrated"}
    assumptions = ["fitted on this machine's torch kernels; times are medians of repeats with rotated inputs"]
    if base:
        from ...spec.hardware import load
        hw = load(base)
        peaks = profile.Peaks(hw.peak(args.dtype if args.dtype != "fp32" else "fp32"), hw.vector_peak(), hw.hbm_bandwidth,
                              hw.matmul_ceiling, hw.sm_count)
        header.update(base=base)
    else:
        # no datasheet: the best observed rates are the peaks (efficiencies are relative to them)
        best = lambda cls, attr: max((float(np.max(getattr(o, attr) / o.t)) for o in ops if o.cls == cls),  # noqa: E731
                                     default=0.0)
        if best("gemm", "flops") <= 0:
            raise InputError(f"--device {device}: no GEMM case could run (out of memory?); nothing to take peaks from")
        p_mm = max(best(c, "flops") for c in ("gemm", "bmm"))
        hbm = max(best(c, "bytes") for c in ("elem", "norm", "softmax", "optim"))
        p_vec = max(best(c, "flops") for c in ("elem", "norm", "softmax", "ce", "optim"))
        sms = torch.cuda.get_device_properties(device).multi_processor_count if device.startswith("cuda") else 1
        peaks = profile.Peaks(p_mm, max(p_vec, 1.0), hbm, 1.0, sms)
        mem = (torch.cuda.get_device_properties(device).total_memory if device.startswith("cuda")
               else _host_memory())
        header.update({"peak_flops": {args.dtype: f"{p_mm / 1e12:.4g} TFLOP/s", "fp32" if args.dtype != "fp32" else "bf16":
                                      f"{(p_vec if args.dtype != 'fp32' else p_mm) / 1e12:.4g} TFLOP/s"},
                       "hbm_bandwidth": f"{hbm / 1e9:.4g} GB/s", "hbm_capacity": f"{mem / GiB:.4g} GiB",
                       "gpus_per_node": 1, "sm_count": sms,
                       "links": {"intra": {"kind": "assumed", "bandwidth": "10 GB/s", "latency": "10 us"},
                                 "inter": {"kind": "assumed", "bandwidth": "10 GB/s", "latency": "20 us"}}})
        assumptions.append("no datasheet profile given (--base): peaks are the best observed rates of this sweep "
                           "(matmul FLOP/s, vector FLOP/s and memory bandwidth); links are placeholders")
    if skipped:
        assumptions.append(f"{len(skipped)} sweep case(s) skipped: out of device memory ({'; '.join(skipped)})")
    seconds = (5.0 if args.quick else 30.0) if device.startswith("cuda") else 0.5
    with progress.phase(f"sustained clock ({seconds:g} s of back-to-back matmuls)"):
        kappa = sustained_ratio(device, args.dtype, seconds)
    from ...spec.hardware import SUSTAINED_CLOCK_MIN
    if kappa >= SUSTAINED_CLOCK_MIN:
        header["sustained_clock"] = round(kappa, 3)
        assumptions.append(f"sustained_clock: matmul rate held {seconds:g} s back to back / burst rate = {kappa:.3f}")
    else:   # no power cap slows a GPU 3x: a noisy host (a shared CPU) measured this, so it is not written
        assumptions.append(f"sustained_clock not written: the measured ratio {kappa:.3f} is below the physical "
                           f"bound {SUSTAINED_CLOCK_MIN} (a noisy run); the profile keeps 1")
    with progress.phase("fit efficiencies (k-fold)"):
        compute = profile.fit_compute(ops, peaks)
    samples, err = profile.fit_error_section(compute, {})
    prov = {"source": f"roofline calibrate compute --device {device} --dtype {args.dtype}"
                      + (" --quick" if args.quick else ""), "samples": samples, "fit_error": err,
            "defects": profile.flagged_lines(compute), "assumptions": assumptions}
    text = profile.profile_text(header, profile.efficiency_section(compute), None, prov)
    outputs.write_outputs(args.out, text, profile.samples_csv(ops))
    outputs.print_report({"compute": compute})
    if getattr(args, "plot", None):
        from . import fit_plot
        fit_plot.plot(args.plot, fit_plot.compute_panels(ops, compute, peaks),
                      title=f"calibrate compute --device {device} --dtype {args.dtype}")
    return 0


def _host_memory() -> float:
    import os
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 16 * GiB


def _sdpa_flash(q, k, v):
    """The timed call of causal SDPA, on FlashAttention-2 where the device has it: the curves this sweep fits are
    FlashAttention-2's, the kernel every other attention kind's speed is stated against (config.FLASH_SPEED, a
    profile's attention_speed); torch may otherwise pick its cuDNN backend on sm90+ (torch/nn/attention SDPBackend
    order). On a device without the flash backend (CPU) torch's own choice runs. Imports happen here, not in the call."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    if not q.is_cuda:
        return lambda: sdpa(q, k, v, is_causal=True)

    def call():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return sdpa(q, k, v, is_causal=True)
    return call
