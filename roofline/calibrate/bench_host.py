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


def measure(device: str = "cpu", repeats: int = 200, seq: int = 8) -> dict:
    """Median forward and backward wall time (s) of one tiny layer: the host overhead per layer."""
    import torch

    layer = _layer(torch, device=device)
    x = torch.randn(seq, 1, 64, device=device, requires_grad=True)
    mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=device), 1)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    fwd, bwd = [], []
    for i in range(repeats + 20):
        sync()
        t0 = time.perf_counter()
        y = layer(x, mask)
        t1 = time.perf_counter()        # host time to issue the forward (kernels run asynchronously on GPU)
        y.sum().backward()
        t2 = time.perf_counter()
        sync()
        if i >= 20:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
    return {"layer_fwd": statistics.median(fwd), "layer_bwd": statistics.median(bwd), "repeats": repeats,
            "device": device, "torch": torch.__version__}


if __name__ == "__main__":
    r = measure()
    print(f"host overhead per layer: forward {r['layer_fwd'] * 1e6:.0f} us, backward {r['layer_bwd'] * 1e6:.0f} us")
