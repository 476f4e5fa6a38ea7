"""Host (CPU-side) overhead of one transformer layer in eager PyTorch.

At small sizes a training step is bound by the host: Python, the autograd engine and the
dispatcher issue kernels slower than the GPU runs them. This benchmark runs a Megatron-style GPT
layer (LayerNorm, QKV GEMM, unfused scaled-masked softmax attention with dropout, projection,
bias-dropout-add, LayerNorm, GELU MLP, bias-dropout-add) on tiny shapes, where the arithmetic is
negligible, so its forward and backward wall times measure the host overhead per layer. The
predictor takes a layer's forward/backward slot time as ``max(GPU time, host time)``.

    python -m roofline calibrate host [--device cpu|cuda:0] [--repeats 200]
"""
from __future__ import annotations

import statistics
import time


def _layer(torch, h=64, heads=4, device="cpu"):
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


_VIEWS = {"view", "_unsafe_view", "t", "transpose", "expand", "split", "split_with_sizes", "chunk", "detach", "alias",
          "slice", "select", "permute", "unsqueeze", "squeeze", "as_strided", "reshape", "empty", "empty_like",
          "new_empty", "new_empty_strided", "empty_strided", "_to_copy", "lift_fresh", "zeros_like", "ones_like"}


def _count_kernels(torch, fn) -> int:
    """Operators that launch a kernel (aten ops minus views/allocations) while ``fn`` runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.__name__.split(".")[0] not in _VIEWS:
                Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.n


def measure(device: str = "cpu", repeats: int = 200, seq: int = 8) -> dict:
    """Host time (s) and kernel count of one tiny Megatron-style layer: forward, backward, and the
    extra of full recomputation (reentrant activation checkpointing, as Megatron/DeepSpeed use).

    The layer runs with per-parameter gradient-accumulation hooks (main-grad buffers) and
    tensor-parallel region copies (autograd functions at the layer boundary), as the frameworks do.
    """
    import torch
    from torch.utils.checkpoint import checkpoint

    torch.set_num_threads(1)
    layer = _layer(torch, device=device)
    main_grad = {p: torch.zeros_like(p) for p in layer.parameters()}
    for p in layer.parameters():
        p.register_post_accumulate_grad_hook(lambda p: (main_grad[p].add_(p.grad), None)[1])

    class Region(torch.autograd.Function):   # Megatron's copy_to / reduce_from tensor-parallel region
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g.clone()

    def run(x, mask):
        return Region.apply(layer(Region.apply(x), mask))

    x = torch.randn(seq, 1, 64, device=device, requires_grad=True)
    mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=device), 1)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def timed(ckpt: bool):
        fwd, bwd = [], []
        for i in range(repeats + 20):
            sync()
            t0 = time.perf_counter()
            y = checkpoint(run, x, mask, use_reentrant=True) if ckpt else run(x, mask)
            t1 = time.perf_counter()    # host time to issue the forward (GPU kernels run asynchronously)
            y.sum().backward()
            t2 = time.perf_counter()
            sync()
            if i >= 20:
                fwd.append(t1 - t0)
                bwd.append(t2 - t1)
        return statistics.median(fwd), statistics.median(bwd)

    f, b = timed(False)
    fc, bc = timed(True)
    holder = {}
    k_fwd = _count_kernels(torch, lambda: holder.setdefault("y", run(x, mask)))
    k_bwd = _count_kernels(torch, lambda: holder["y"].sum().backward())
    yc = checkpoint(run, x, mask, use_reentrant=True)
    k_ckpt = _count_kernels(torch, lambda: yc.sum().backward()) - k_bwd
    return {"layer_fwd": f, "layer_bwd": b, "recompute_extra": max(0.0, fc + bc - f - b),
            "kernels_fwd": k_fwd, "kernels_bwd": k_bwd, "kernels_recompute": max(0, k_ckpt),
            "repeats": repeats, "device": device, "torch": torch.__version__}


if __name__ == "__main__":
    r = measure()
    print(f"host per layer: forward {r['layer_fwd'] * 1e6:.0f} us ({r['kernels_fwd']} kernels), backward "
          f"{r['layer_bwd'] * 1e6:.0f} us ({r['kernels_bwd']} kernels), full-recompute extra "
          f"{r['recompute_extra'] * 1e6:.0f} us ({r['kernels_recompute']} kernels)")
