"""Diagnostics (run once on the lent H100, output in host_diagnostics.log): where does `calibrate host`'s per-layer
host time differ from the host time of a real small-GPT training step?

    PYTHONPATH=.:benchmarks python roofline/data/h100-sxm-measured/host_diag.py launch | tiny | real 1024 8 | bench plain

- launch: host time per trivial CUDA op (x.add_(1)), GPU idle vs GPU kept busy by a queued busy-wait;
- tiny: forward / backward host medians (us) of a stack of 1 and of 5 tiny layers (h 64, seq 8), `n1_*` as
  calibrate host timed one layer per call before the fix, `slope_*` = (t5 - t1) / 4 per layer; layers: the
  pre-fix `plain` style layer of calibrate host (`_old_plain_layer` below, unfused attention, dropout,
  main-grad hooks optional) and the Block of benchmarks/small_gpt_step.py; with/without bf16 autocast, GPU
  idle (synchronized) or busy before each repeat;
- real: the small-GPT step at full shapes: median step on an idle GPU (as the benchmark times it), with a
  ~0.2 s busy-wait queued first (GPU alone), host issue time of the step (busy / idle GPU) and of its parts,
  and per-block host times from forward hooks and gradient hooks (GPU busy);
- bench plain: calibrate host's measure() as the checkout has it (the log holds the pre-fix run, commit 31d1623).
"""
import json
import statistics as st
import sys
import time

import torch

import small_gpt_step as sgs  # noqa: E402
from roofline.views.calibrate import bench_host as bh  # noqa: E402

dev = torch.device("cuda:0")
LEAD = 400_000_000           # ~0.2 s of GPU spin at ~2 GHz
out = {}
med = st.median


def sync():
    torch.cuda.synchronize(dev)


def _old_plain_layer(torch, h=64, heads=4, device="cpu"):
    """calibrate host's `plain` layer before the fix (roofline/views/calibrate/bench_host.py at 31d1623)."""
    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)
            self.drop = nn.Dropout(0.1)

        def forward(self, x, mask):
            s, b, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(s, b * heads, 3 * h // heads).transpose(0, 1).chunk(3, dim=-1)
            scores = torch.baddbmm(torch.empty(b * heads, s, s, device=x.device, dtype=x.dtype), q,
                                   k.transpose(1, 2), beta=0.0, alpha=(h // heads) ** -0.5)
            probs = self.drop(torch.softmax(scores.masked_fill(mask, -1e4), dim=-1))
            ctx = torch.bmm(probs, v).transpose(0, 1).reshape(s, b, h)
            x = x + self.drop(self.proj(ctx))
            return x + self.drop(self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x)))))

    return Layer().to(device)


def launch_cost():
    x = torch.zeros(1, device=dev)
    r = {}
    for mode in ("idle", "busy"):
        ts = []
        for _ in range(5):
            sync()
            if mode == "busy":
                torch.cuda._sleep(LEAD // 4)
            t = time.perf_counter()
            for _ in range(1000):
                x.add_(1)
            ts.append((time.perf_counter() - t) / 1000)
            sync()
        r[mode] = med(ts) * 1e6
    return r


def tiny_stack(kind, n, amp, hooks, busy, repeats=150):
    """Host medians (us) of forward / backward of n tiny layers, as calibrate host times one."""
    h, seq = 64, 8
    if kind == "plain_layer":
        layers = torch.nn.ModuleList(_old_plain_layer(torch, h=h, device="cuda:0") for _ in range(n))
        x = torch.randn(seq, 1, h, device=dev, requires_grad=True)
        mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=dev), 1)
        fwd = lambda: _chain(layers, x, mask)
    else:
        layers = sgs.build_gpt(torch, n, h, 4, 128, seq, dev).blocks
        x = torch.randn(1, seq, h, device=dev, requires_grad=True)
        fwd = lambda: _chain(layers, x, None)
    if hooks:
        mg = {p: torch.zeros_like(p) for p in layers.parameters()}
        for p in layers.parameters():
            p.register_post_accumulate_grad_hook(lambda p: (mg[p].add_(p.grad), None)[1])
    ctx = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if amp else (lambda: _Null())
    tf, tb = [], []
    for i in range(repeats + 20):
        sync()
        if busy:
            torch.cuda._sleep(LEAD // 20)
        t0 = time.perf_counter()
        with ctx():
            y = fwd()
        t1 = time.perf_counter()
        y.sum().backward()
        t2 = time.perf_counter()
        if i >= 20:
            tf.append(t1 - t0)
            tb.append(t2 - t1)
        for p in layers.parameters():
            p.grad = None
    sync()
    return med(tf) * 1e6, med(tb) * 1e6


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _chain(layers, x, mask):
    for l in layers:
        x = l(x, mask) if mask is not None else l(x)
    return x


def tiny_all():
    r = {}
    for kind, amp, hooks in (("plain_layer", False, True), ("plain_layer", False, False), ("plain_layer", True, False),
                             ("gpt_block", False, False), ("gpt_block", True, False)):
        for busy in (False, True):
            f1, b1 = tiny_stack(kind, 1, amp, hooks, busy)
            f5, b5 = tiny_stack(kind, 5, amp, hooks, busy)
            key = f"{kind} amp={int(amp)} hooks={int(hooks)} busy={int(busy)}"
            r[key] = {"n1_fwd": round(f1), "n1_bwd": round(b1), "slope_fwd": round((f5 - f1) / 4),
                      "slope_bwd": round((b5 - b1) / 4)}
            print(key, r[key], flush=True)
    return r


def real_sizes(seq=1024, batch=8, steps=8):
    r = {}
    vocab = 50304
    for name, L, d, heads in sgs.SIZES:
        model = sgs.build_gpt(torch, L, d, heads, vocab, seq, dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        gen = torch.Generator(device="cpu").manual_seed(0)
        data = [torch.randint(0, vocab, (batch, seq + 1), generator=gen).to(dev) for _ in range(4)]
        amp = torch.autocast("cuda", dtype=torch.bfloat16)
        marks = {}

        def pre(i):
            def f(mod, args):
                marks.setdefault("fpre", {})[i] = time.perf_counter()
                x = args[0]
                if x.requires_grad:
                    x.register_hook(lambda g: marks.setdefault("bin", {}).__setitem__(i, time.perf_counter()))
            return f

        def post(i):
            def f(mod, args, y):
                marks.setdefault("fpost", {})[i] = time.perf_counter()
                if i == L - 1:
                    y.register_hook(lambda g: marks.setdefault("bout", {}).__setitem__(i, time.perf_counter()))
            return f

        handles = []

        def step(i, parts=None):
            x = data[i % 4]
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with amp:
                loss = model(x[:, :-1], x[:, 1:])
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            opt.step()
            t3 = time.perf_counter()
            if parts is not None:
                parts.append((t1 - t0, t2 - t1, t3 - t2))

        for i in range(3):
            step(i)
        normal, gpu_only, host_busy, host_idle, parts = [], [], [], [], []
        for i in range(steps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            sync(); a.record(); t = time.perf_counter(); step(i); host_idle.append(time.perf_counter() - t); b.record(); sync()
            normal.append(a.elapsed_time(b) * 1e-3)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            sync(); torch.cuda._sleep(LEAD); a.record(); t = time.perf_counter(); step(i, parts)
            host_busy.append(time.perf_counter() - t); b.record(); sync()
            gpu_only.append(a.elapsed_time(b) * 1e-3)
        for j, blk in enumerate(model.blocks):
            handles.append(blk.register_forward_pre_hook(pre(j)))
            handles.append(blk.register_forward_hook(post(j)))
        bf, bb = [], []
        for i in range(steps):
            marks.clear()
            sync(); torch.cuda._sleep(LEAD); step(i); sync()
            fp, fq, bi, bo = marks["fpre"], marks["fpost"], marks["bin"], marks["bout"]
            bf += [fq[j] - fp[j] for j in range(L)]
            ends = {**{j: bi[j] for j in range(L)}}
            starts = {j: (bi[j + 1] if j + 1 < L else bo[L - 1]) for j in range(L)}
            bb += [ends[j] - starts[j] for j in range(L)]
        for hd in handles:
            hd.remove()
        pf = [p[0] for p in parts]; pb = [p[1] for p in parts]; po = [p[2] for p in parts]
        r[name] = {"normal_ms": med(normal) * 1e3, "gpu_only_ms": med(gpu_only) * 1e3,
                   "host_step_busy_ms": med(host_busy) * 1e3, "host_step_idle_ms": med(host_idle) * 1e3,
                   "host_fwd_ms": med(pf) * 1e3, "host_bwd_ms": med(pb) * 1e3, "host_opt_ms": med(po) * 1e3,
                   "block_fwd_us": med(bf) * 1e6, "block_bwd_us": med(bb) * 1e6}
        print(name, {k: round(v, 3) for k, v in r[name].items()}, flush=True)
        del model, opt, data
        torch.cuda.empty_cache()
    return r


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "launch":
        out = launch_cost()
    elif what == "tiny":
        out = tiny_all()
    elif what == "real":
        out = real_sizes(int(sys.argv[2]), int(sys.argv[3]))
    elif what == "bench":
        r = bh.measure("cuda:0", 200, style=sys.argv[2])
        out = {k: (round(v * 1e6) if isinstance(v, float) else v) for k, v in r.items()}
    print("RESULT", what, json.dumps(out), flush=True)
