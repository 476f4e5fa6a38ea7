"""Host (CPU-side) overhead of one transformer layer in eager PyTorch.

At small sizes a training step is bound by the host: Python, the autograd engine and the
dispatcher issue kernels slower than the GPU runs them. This benchmark runs a transformer layer
on tiny shapes, where the arithmetic is negligible, so its forward and backward wall times
measure the host overhead per layer: the slope between a stack of one layer and of ``STACK`` layers,
so that what a forward or ``backward()`` call pays once is per micro-batch, not per layer (see
``measure``). The predictor takes a layer slot's time as ``max(GPU time, host time)``.

Two layer styles (``--style``):

- ``megatron`` (default): the code path of a Megatron-LM / Megatron-DeepSpeed
  ``ParallelTransformerLayer`` (2021-2023), written out module by module: fused-LayerNorm
  autograd functions, column/row-parallel linears with their tensor-parallel region functions and
  the bias returned separately (``skip_bias_add``), TorchScript-fused bias-GeLU and
  bias-dropout-add, the scale-mask-softmax module with its kernel-availability checks, attention
  dropout under the model-parallel RNG tracker's ``fork()`` (save / swap / restore of generator
  states), the ``baddbmm`` into a preallocated buffer and the ``permute().contiguous()`` of the
  context, and full recomputation through a checkpoint function that saves and restores the CPU,
  device and tracker RNG states (DeepSpeed's ``CheckpointFunction``). This is the code whose
  host cost the vTrain and Megatron measurements carry.
- ``plain``: the block plain PyTorch runs for roofline's ``plain`` framework, the model of
  ``benchmarks/small_gpt_step.py`` (``nn.Linear``, ``nn.LayerNorm``, causal SDPA, tanh GELU, no
  dropout) under bf16 autocast over fp32 weights, no gradient hooks: the lower bound of any eager
  framework, and what a plain training loop issues.

    python -m roofline calibrate host [--device cpu|cuda:0] [--style megatron|plain] [--repeats 200]
"""
from __future__ import annotations

import contextlib
import functools
import statistics
import time

STYLES = ("megatron", "plain")


# ---- the Megatron-style layer (module structure of megatron/model/transformer.py) ---------------
_JIT_SRC = '''
import torch


@torch.jit.script
def bias_gelu(bias, y):
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


@torch.jit.script
def bias_gelu_back(g, bias, y):
    x = bias + y
    tanh_out = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
    ff = 0.5 * x * ((1 - tanh_out * tanh_out) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1 + tanh_out)
    return ff * g


@torch.jit.script
def bias_dropout_add_fused_train(x, bias, residual, prob: float):
    out = torch.nn.functional.dropout(x + bias, p=prob, training=True)
    return residual + out
'''


@functools.lru_cache(maxsize=1)
def _jit_functions():
    """TorchScript needs the functions' source on disk: compile them from a module file, as Megatron
    does (megatron/model/fused_bias_gelu.py, fused_bias_dropout.py); plain Python if that fails."""
    import importlib.util
    import sys
    import tempfile
    import warnings
    from pathlib import Path

    try:
        d = Path(tempfile.mkdtemp(prefix="roofline-jit-"))
        (d / "roofline_host_jit.py").write_text(_JIT_SRC)
        spec = importlib.util.spec_from_file_location("roofline_host_jit", d / "roofline_host_jit.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["roofline_host_jit"] = mod
        with warnings.catch_warnings():
            # torch 2.10+ deprecates torch.jit.script; the benchmark keeps it on purpose, as the Megatron code whose
            # host path it times scripted these functions
            warnings.simplefilter("ignore", DeprecationWarning)
            spec.loader.exec_module(mod)
        return mod.bias_gelu, mod.bias_gelu_back, mod.bias_dropout_add_fused_train, True
    except Exception:       # noqa: BLE001 - TorchScript unavailable: same arithmetic in eager mode
        import torch
        ns: dict = {"torch": torch}
        exec(_JIT_SRC.replace("@torch.jit.script\n", ""), ns)
        return ns["bias_gelu"], ns["bias_gelu_back"], ns["bias_dropout_add_fused_train"], False


class _RngTracker:
    """Megatron's CudaRNGStatesTracker: named generator states swapped in around dropout."""

    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device.startswith("cuda")
        self.states = {"model-parallel-rng": self._get()}

    def _get(self):
        return self.torch.cuda.get_rng_state() if self.cuda else self.torch.get_rng_state()

    def _set(self, s):
        (self.torch.cuda.set_rng_state if self.cuda else self.torch.set_rng_state)(s)

    def get_states(self):
        return {k: v.clone() for k, v in self.states.items()}

    def set_states(self, states):
        self.states = states

    @contextlib.contextmanager
    def fork(self, name="model-parallel-rng"):
        orig = self._get()
        self._set(self.states[name])
        try:
            yield
        finally:
            self.states[name] = self._get()
            self._set(orig)


def _megatron_layer(torch, h=64, heads=4, device="cpu", dtype=None, tracker=None):
    nn, F = torch.nn, torch.nn.functional
    dtype = dtype or torch.float32
    bias_gelu, bias_gelu_back, bias_dropout_add, _ = _jit_functions()
    tracker = tracker or _RngTracker(torch, device)       # one model-parallel RNG tracker for all layers

    class Region(torch.autograd.Function):
        """Megatron's copy-to / reduce-from tensor-parallel region: identity in one direction, an
        all-reduce in the other when tp > 1 (one process here: identity both ways, same host path)."""
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    CopyToRegion = ReduceFromRegion = Region

    class FusedLayerNormAffine(torch.autograd.Function):   # apex FusedLayerNormAffineFunction: one kernel each way
        @staticmethod
        def forward(ctx, x, w, b, shape, eps):
            x_ = x.contiguous()
            y, mean, rstd = torch.native_layer_norm(x_, shape, w, b, eps)
            ctx.save_for_backward(x_, w, b, mean, rstd)
            ctx.shape = shape
            return y

        @staticmethod
        def backward(ctx, g):
            x, w, b, mean, rstd = ctx.saved_tensors
            gx, gw, gb = torch.ops.aten.native_layer_norm_backward(g.contiguous(), x, ctx.shape, mean, rstd, w, b,
                                                                   [True, True, True])
            return gx, gw, gb, None, None

    class MixedFusedLayerNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight, self.bias = nn.Parameter(torch.ones(h, dtype=dtype)), nn.Parameter(torch.zeros(h, dtype=dtype))
            self.shape, self.eps = (h,), 1e-5

        def forward(self, x):
            return FusedLayerNormAffine.apply(x, self.weight, self.bias, self.shape, self.eps)

    class ColumnParallelLinear(nn.Module):
        def __init__(self, n_in, n_out, skip_bias_add=False):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(n_out, n_in, dtype=dtype) * 0.02)
            self.bias = nn.Parameter(torch.zeros(n_out, dtype=dtype))
            self.skip_bias_add = skip_bias_add

        def forward(self, x):
            x = CopyToRegion.apply(x)
            bias = self.bias if not self.skip_bias_add else None
            out = F.linear(x, self.weight, bias)
            return out, (self.bias if self.skip_bias_add else None)

    class RowParallelLinear(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(n_out, n_in, dtype=dtype) * 0.02)
            self.bias = nn.Parameter(torch.zeros(n_out, dtype=dtype))

        def forward(self, x):
            out = ReduceFromRegion.apply(F.linear(x, self.weight))
            return out, self.bias          # skip_bias_add: the bias goes into bias-dropout-add

    class ScaledUpperTriangMaskedSoftmax(torch.autograd.Function):     # the fused causal softmax: one kernel
        @staticmethod
        def forward(ctx, x, scale):
            y = torch._softmax(x, -1, False)        # (scale and causal mask are inside the fused kernel)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return torch._softmax_backward_data(g, y, -1, y.dtype), None

    class FusedScaleMaskSoftmax(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_in_fp16, self.input_in_bf16, self.scale = True, False, None
            self.attn_mask_type, self.scaled_masked_softmax_fusion = "causal", True

        def is_kernel_available(self, mask, b, np_, sq, sk):
            attn_batches = b * np_
            if (self.scaled_masked_softmax_fusion and (self.input_in_fp16 or self.input_in_bf16)
                    and 16 < sk <= 4096 and sq % 4 == 0 and attn_batches % 4 == 0):
                return True
            return True            # tiny benchmark shapes: take the fused path as the real shapes do

        def forward(self, x, mask):
            b, np_, sq, sk = x.size()
            if self.is_kernel_available(mask, b, np_, sq, sk):
                x = x.view(-1, sq, sk)
                return ScaledUpperTriangMaskedSoftmax.apply(x, 1.0).view(b, np_, sq, sk)
            return torch.softmax(x, dim=-1)

    class GeLUFunction(torch.autograd.Function):       # megatron/model/fused_bias_gelu.py
        @staticmethod
        def forward(ctx, x, bias):
            ctx.save_for_backward(x, bias)
            return bias_gelu(bias, x)

        @staticmethod
        def backward(ctx, g):
            x, bias = ctx.saved_tensors
            t = bias_gelu_back(g, bias, x)
            return t, t.sum(dim=(0, 1))

    class ParallelAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.hn, self.np = h // heads, heads
            self.query_key_value = ColumnParallelLinear(h, 3 * h)
            self.scale_mask_softmax = FusedScaleMaskSoftmax()
            self.attention_dropout = nn.Dropout(0.1)
            self.dense = RowParallelLinear(h, h)
            self.norm_factor = self.hn ** 0.5

        def forward(self, x, mask):
            mixed, _ = self.query_key_value(x)
            sq, b = mixed.size(0), mixed.size(1)
            mixed = mixed.view(sq, b, self.np, 3 * self.hn)
            q, k, v = torch.split(mixed, self.hn, dim=-1)
            q = q.reshape(sq, b * self.np, -1)
            k = k.reshape(sq, b * self.np, -1)
            buf = torch.empty(b * self.np, sq, sq, dtype=x.dtype, device=x.device)
            scores = torch.baddbmm(buf, q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2),
                                   beta=0.0, alpha=1.0 / self.norm_factor)
            probs = self.scale_mask_softmax(scores.view(b, self.np, sq, sq), mask)
            with tracker.fork():
                probs = self.attention_dropout(probs)
            v = v.reshape(sq, b * self.np, -1)
            ctx = torch.bmm(probs.view(b * self.np, sq, -1), v.transpose(0, 1))
            ctx = ctx.view(b, self.np, sq, self.hn).permute(2, 0, 1, 3).contiguous()
            return self.dense(ctx.view(sq, b, h))

    class ParallelMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense_h_to_4h = ColumnParallelLinear(h, 4 * h, skip_bias_add=True)
            self.dense_4h_to_h = RowParallelLinear(4 * h, h)

        def forward(self, x):
            y, bias = self.dense_h_to_4h(x)
            return self.dense_4h_to_h(GeLUFunction.apply(y, bias))

    class ParallelTransformerLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = MixedFusedLayerNorm()
            self.self_attention = ParallelAttention()
            self.post_attention_layernorm = MixedFusedLayerNorm()
            self.mlp = ParallelMLP()
            self.hidden_dropout = 0.1

        def forward(self, x, mask):
            attn_out, attn_bias = self.self_attention(self.input_layernorm(x), mask)
            with torch.enable_grad():
                ln_in = bias_dropout_add(attn_out, attn_bias.expand_as(x), x, self.hidden_dropout)
            mlp_out, mlp_bias = self.mlp(self.post_attention_layernorm(ln_in))
            with torch.enable_grad():
                return bias_dropout_add(mlp_out, mlp_bias.expand_as(ln_in), ln_in, self.hidden_dropout)

    return ParallelTransformerLayer().to(device), tracker


def _megatron_edges(torch, h=64, vocab=256, device="cpu", dtype=None):
    """The first and last pipeline stage's extra work per micro-batch, Megatron's code path:
    vocab-parallel embedding (+ learned positions, dropout) and final LayerNorm, LM head on the
    tied embedding weight, vocab-parallel cross-entropy on the fp32 logits, masked mean loss."""
    nn, F = torch.nn, torch.nn.functional
    dtype = dtype or torch.float32

    class VocabParallelEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(vocab, h, dtype=dtype) * 0.02)
            self.start, self.end = 0, vocab

        def forward(self, ids):
            input_mask = (ids < self.start) | (ids >= self.end)
            masked = ids.clone() - self.start
            masked[input_mask] = 0
            out = F.embedding(masked, self.weight)
            out[input_mask, :] = 0.0
            return out                                  # (all-reduced across tp ranks when tp > 1)

    class VocabParallelCrossEntropy(torch.autograd.Function):    # megatron/mpu/cross_entropy.py
        @staticmethod
        def forward(ctx, logits, target):
            logits_max = torch.max(logits, dim=-1)[0]               # (all-reduce MAX across tp)
            logits = logits - logits_max.unsqueeze(dim=-1)
            target_mask = (target < 0) | (target >= logits.size(-1))
            masked_target = target.clone()
            masked_target[target_mask] = 0
            logits_2d = logits.view(-1, logits.size(-1))
            masked_target_1d = masked_target.view(-1)
            arange_1d = torch.arange(0, logits_2d.size(0), device=logits.device)
            predicted = logits_2d[arange_1d, masked_target_1d].clone().contiguous().view_as(target)
            predicted[target_mask] = 0.0                          # (all-reduce SUM across tp)
            exp_logits = torch.exp(logits, out=logits)
            sum_exp = exp_logits.sum(dim=-1)                      # (all-reduce SUM across tp)
            loss = torch.log(sum_exp) - predicted
            exp_logits.div_(sum_exp.unsqueeze(dim=-1))
            ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)
            return loss

        @staticmethod
        def backward(ctx, g):
            softmax, target_mask, masked_target_1d = ctx.saved_tensors
            grad_2d = softmax.view(-1, softmax.size(-1))
            arange_1d = torch.arange(0, grad_2d.size(0), device=grad_2d.device)
            grad_2d[arange_1d, masked_target_1d] -= (1.0 - target_mask.view(-1).float())
            softmax.mul_(g.unsqueeze(dim=-1))
            return softmax, None

    class Edges(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = VocabParallelEmbedding()
            self.position_embeddings = nn.Embedding(1024, h).to(dtype)
            self.embedding_dropout = nn.Dropout(0.1)
            self.final_layernorm = nn.LayerNorm(h).to(dtype)

        def embed(self, ids, pos):
            x = self.word_embeddings(ids) + self.position_embeddings(pos)
            return self.embedding_dropout(x.transpose(0, 1).contiguous())        # [b, s, h] -> [s, b, h]

        def head(self, x, labels, loss_mask):
            x = self.final_layernorm(x)
            logits = F.linear(x, self.word_embeddings.weight)                   # LM head, tied weight
            losses = VocabParallelCrossEntropy.apply(logits.transpose(0, 1).contiguous().float(), labels)
            return torch.sum(losses.view(-1) * loss_mask.view(-1)) / loss_mask.sum()

    return Edges().to(device)


def _megatron_microbatch(torch, seq=8, vocab=256, device="cpu"):
    """The framework's per-micro-batch work outside the model (pretrain_gpt.py): fetch a batch from
    the DataLoader, broadcast it across the tensor-parallel group (sizes, then the flattened tokens;
    the sizes come back to the host, which waits for the device there), build the causal mask, loss
    mask and position ids, and average the loss across the data-parallel group for logging."""
    import numpy as np

    class Dataset(torch.utils.data.Dataset):          # GPTDataset: a window of the token stream
        def __init__(self):
            self.tokens = np.random.randint(0, vocab, size=64 * (seq + 1), dtype=np.int64)

        def __len__(self):
            return 64

        def __getitem__(self, i):
            return {"text": np.array(self.tokens[i * (seq + 1):(i + 1) * (seq + 1)], dtype=np.int64)}

    loader = torch.utils.data.DataLoader(Dataset(), batch_size=1, shuffle=False)
    state = {"it": iter(loader)}

    def next_batch():
        try:
            return next(state["it"])
        except StopIteration:
            state["it"] = iter(loader)
            return next(state["it"])

    def broadcast_data(keys, data):
        sizes = []
        for k in keys:
            sizes.extend(data[k].size())
        sizes_dev = torch.tensor(sizes, dtype=torch.long, device=device)    # (broadcast across tp)
        sizes_cpu = sizes_dev.cpu()                                         # host waits for the device
        key_size, offset = {}, 0
        for k in keys:
            key_size[k] = [int(x) for x in sizes_cpu[offset:offset + data[k].dim()]]
            offset += data[k].dim()
        flat = torch.cat([data[k].contiguous().view(-1) for k in keys], dim=0).to(device)   # (broadcast)
        out, off = {}, 0
        for k in keys:
            n = int(np.prod(key_size[k]))
            out[k] = flat.narrow(0, off, n).view(key_size[k])
            off += n
        return out

    def get_batch():
        data_b = broadcast_data(["text"], next_batch())
        tokens_ = data_b["text"].long()
        labels, tokens = tokens_[:, 1:].contiguous(), tokens_[:, :-1].contiguous()
        b, s = tokens.size()
        mask = torch.tril(torch.ones((1, s, s), device=device)).view(1, 1, s, s)
        loss_mask = torch.ones(tokens.size(), dtype=torch.float, device=device)
        position_ids = torch.arange(s, dtype=torch.long, device=device).unsqueeze(0).expand_as(tokens)
        return tokens, labels, loss_mask, mask < 0.5, position_ids

    def loss_average(loss):
        averaged = torch.cat([loss.clone().detach().view(1)])                # (all-reduce across dp)
        return averaged / 1

    def run():
        tokens, labels, loss_mask, mask, pos = get_batch()
        return loss_average(loss_mask.sum() / loss_mask.numel())

    return run


def _checkpoint_function(torch, tracker, device):
    """DeepSpeed / Megatron CheckpointFunction: run the layer without grad, save the RNG states,
    and in backward restore them, recompute with grad and backpropagate."""
    cuda = device.startswith("cuda")
    get_dev = torch.cuda.get_rng_state if cuda else torch.get_rng_state
    set_dev = torch.cuda.set_rng_state if cuda else torch.set_rng_state

    class CheckpointFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, run_function, *args):
            ctx.run_function = run_function
            ctx.fwd_cpu_rng_state = torch.get_rng_state()
            ctx.fwd_dev_rng_state = get_dev()
            ctx.fwd_tracker = tracker.get_states()
            with torch.no_grad():
                out = run_function(*args)
            ctx.save_for_backward(*args)
            return out

        @staticmethod
        def backward(ctx, *grads):
            inputs = ctx.saved_tensors
            bwd_cpu, bwd_dev, bwd_tracker = torch.get_rng_state(), get_dev(), tracker.get_states()
            torch.set_rng_state(ctx.fwd_cpu_rng_state)
            set_dev(ctx.fwd_dev_rng_state)
            tracker.set_states(ctx.fwd_tracker)
            detached = tuple(x.detach().requires_grad_(x.requires_grad) for x in inputs)
            with torch.enable_grad():
                out = ctx.run_function(*detached)
            torch.set_rng_state(bwd_cpu)
            set_dev(bwd_dev)
            tracker.set_states(bwd_tracker)
            torch.autograd.backward(out, grads)
            return (None,) + tuple(x.grad if isinstance(x, torch.Tensor) else None for x in detached)

    return CheckpointFunction


def plain_block(torch, h: int = 64, heads: int = 1):
    """The transformer block class plain PyTorch runs for roofline's ``plain`` framework, also the block of
    ``benchmarks/small_gpt_step.py``'s GPT: pre-LayerNorm, fused QKV projection, causal
    ``scaled_dot_product_attention`` (the flash kernel on a GPU: the framework prices ``attention: flash``),
    tanh-GELU MLP of 4h, biases, no dropout; batch-first ``[b, s, h]``."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc, self.out = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x, mask=None):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, heads, h // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    return Block


def _plain_layer(torch, h=64, heads=1, device="cpu"):
    """One :func:`plain_block` on ``device``."""
    return plain_block(torch, h, heads)().to(device)


_VIEWS = {"view", "_unsafe_view", "t", "transpose", "expand", "split", "split_with_sizes", "chunk", "detach", "alias",
          "slice", "select", "permute", "unsqueeze", "squeeze", "as_strided", "reshape", "empty", "empty_like",
          "new_empty", "new_empty_strided", "empty_strided", "_to_copy", "lift_fresh", "zeros_like", "ones_like",
          "_reshape_alias", "expand_as", "view_as", "unbind", "set_", "_efficientzerotensor",
          "is_same_size", "size", "stride", "sym_size", "sym_stride", "sym_numel", "lift_fresh_copy"}


def _count_kernels(torch, fn) -> int:
    """Operators that launch a kernel (aten ops minus views/allocations/host-side copies) while ``fn`` runs.
    A ``_to_copy`` that changes the dtype on the same device is a cast kernel (autocast's bf16 copies of the
    weights and inputs) and counts."""
    from torch.utils._python_dispatch import TorchDispatchMode

    def cast(args, kwargs):
        x, dt, dev = (args[0] if args else None), kwargs.get("dtype"), kwargs.get("device")
        return (isinstance(x, torch.Tensor) and dt is not None and dt != x.dtype
                and (dev is None or torch.device(dev) == x.device))

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            # RNG-state saves/restores handle host-side byte tensors: no device kernel
            rng_state = any(isinstance(a, torch.Tensor) and a.dtype == torch.uint8 for a in args)
            name = func.__name__.split(".")[0]
            if (name not in _VIEWS or (name == "_to_copy" and cast(args, kwargs))) and not rng_state:
                Count.n += 1
            return func(*args, **kwargs)

    with Count():
        fn()
    return Count.n


# Layers in the deep stack: the per-layer time is the slope between one layer and this many.
STACK = 5


def stages(style: str) -> tuple:
    """What :func:`measure` times, in order (one ``tick`` each): the progress of ``calibrate host``."""
    return (("1 layer", f"{STACK} layers", "1 layer recomputed", f"{STACK} layers recomputed", "kernel counts")
            + (("embedding, LM head, micro-batch loop",) if style == "megatron" else ()))


def measure(device: str = "cpu", repeats: int = 200, seq: int = 8, style: str = "megatron",
            amp: bool | None = None, tick=None) -> dict:
    """Host time (s) and kernel count of one tiny layer: forward, backward, and the extra of full
    recomputation (activation checkpointing of every layer, as Megatron/DeepSpeed run it).

    A layer's host time is the slope between a stack of one layer and a stack of ``STACK`` layers, each run
    as one forward call and one ``backward()`` call, as a model runs its layers. What a call pays once,
    whatever the depth (the autograd engine's start, its hand-off to the device thread and its final stream
    sync-up; the loss reduction and its seed gradient; under autocast the context's entry and exit, which
    clears the cast cache), is per micro-batch, not per layer: timing one layer per call charged it to every
    layer (an H100 host, plain style: +270 us forward, +300 us backward per layer). That intercept is
    reported as ``call`` and added to ``microbatch``. On a GPU the times include the CUDA launch path of every
    kernel (a profile measured with ``--device cuda`` takes ``launch: 0 us``; the launch cost is for
    CPU-device measurements only).

    ``megatron``: the layer's gradients accumulate into main-grad buffers through per-parameter hooks (as the
    frameworks' gradient-accumulation paths do) and the layer sits between tensor-parallel region functions
    (autograd functions at the layer boundary); weights in the compute dtype, no autocast. ``plain``: the
    block of ``benchmarks/small_gpt_step.py`` as plain PyTorch trains it: fp32 weights, bf16 autocast (``amp``,
    default on for ``plain``), gradients set to None between steps, no hooks.

    ``tick(label)``, when given, is called after each of :func:`stages`."""
    import torch

    if style not in STYLES:
        raise ValueError(f"unknown host benchmark style {style!r}; known: {', '.join(STYLES)}")
    torch.set_num_threads(1)
    h = 64
    amp = (style == "plain") if amp is None else amp
    dev_type = torch.device(device).type
    if style == "megatron":
        layer, tracker = _megatron_layer(torch, h=h, device=device)
        layers = [layer] + [_megatron_layer(torch, h=h, device=device, tracker=tracker)[0] for _ in range(STACK - 1)]
        ckpt_fn = _checkpoint_function(torch, tracker, device)
        checkpoint = lambda f, *a: ckpt_fn.apply(f, *a)
        x = torch.randn(seq, 1, h, device=device, requires_grad=True)
    else:
        from torch.utils.checkpoint import checkpoint as _ckpt
        layers = [_plain_layer(torch, h=h, device=device) for _ in range(STACK)]
        checkpoint = lambda f, *a: _ckpt(f, *a, use_reentrant=True)
        x = torch.randn(1, seq, h, device=device, requires_grad=True)
    params = [p for layer in layers for p in layer.parameters()]
    if style == "megatron":
        main_grad = {p: torch.zeros_like(p) for p in params}
        grad_accs = []              # torch < 2.1: Megatron's own hook on each parameter's AccumulateGrad node
        for p in params:
            if hasattr(p, "register_post_accumulate_grad_hook"):
                p.register_post_accumulate_grad_hook(lambda p: (main_grad[p].add_(p.grad), None)[1])
            else:
                grad_accs.append(p.expand_as(p).grad_fn.next_functions[0][0])
                grad_accs[-1].register_hook(lambda *_, p=p: (main_grad[p].add_(p.grad), None)[1])

    mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=device), 1)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    autocast = (lambda: torch.autocast(dev_type, dtype=torch.bfloat16)) if amp else contextlib.nullcontext

    def forward(n, ckpt):
        with autocast():
            y = x
            for layer in layers[:n]:
                y = checkpoint(layer, y, mask) if ckpt else layer(y, mask)
        return y

    def backward(y):
        y.sum().backward()

    def clear():
        if style == "plain":                     # zero_grad(set_to_none=True) between steps
            for p in params:
                p.grad = None

    def timed(n: int, ckpt: bool):
        return _issue_times(lambda: forward(n, ckpt), backward, sync, repeats, before=clear)

    def kernels(n: int, ckpt: bool):
        clear()
        holder = {}
        kf = _count_kernels(torch, lambda: holder.setdefault("y", forward(n, ckpt)))
        kb = _count_kernels(torch, lambda: backward(holder["y"]))
        return kf, kb

    slope = lambda a, b: (b - a) / (STACK - 1)
    labels = iter(stages(style))
    tick = tick or (lambda label: None)

    def step(result):
        tick(next(labels))
        return result
    (f1, b1), (fn, bn) = step(timed(1, False)), step(timed(STACK, False))
    (fc1, bc1), (fcn, bcn) = step(timed(1, True)), step(timed(STACK, True))
    (kf1, kb1), (kfn, kbn) = kernels(1, False), kernels(STACK, False)
    (kfc1, kbc1), (kfcn, kbcn) = step((kernels(1, True), kernels(STACK, True)))
    f, b = max(0.0, slope(f1, fn)), max(0.0, slope(b1, bn))
    k_fwd, k_bwd = round(slope(kf1, kfn)), round(slope(kb1, kbn))
    call = max(0.0, f1 + b1 - f - b)
    k_call = max(0, kf1 + kb1 - k_fwd - k_bwd)
    rc = slope(fc1 + bc1, fcn + bcn) - f - b
    k_rc = round(slope(kfc1 + kbc1, kfcn + kbcn)) - k_fwd - k_bwd
    out = {"layer_fwd": f, "layer_bwd": b, "recompute_extra": max(0.0, rc),
           "kernels_fwd": k_fwd, "kernels_bwd": k_bwd, "kernels_recompute": max(0, k_rc),
           "call": call, "kernels_call": k_call, "microbatch": call, "kernels_microbatch": k_call,
           "stack": STACK, "amp": amp, "repeats": repeats, "device": device, "style": style,
           "torch": torch.__version__}
    if style == "megatron":
        out.update(step(_measure_edges(torch, device, repeats, seq, h, sync)))
        out["microbatch"] += call
        out["kernels_microbatch"] += k_call
    return out


WARMUP = 20          # untimed iterations before the timed ones (allocator, cuBLAS heuristics, autotuning)


def _issue_times(fwd_fn, bwd_fn, sync, repeats: int, before=lambda: None) -> tuple[float, float]:
    """Median host time to issue ``fwd_fn()`` and then ``bwd_fn(y)`` (the GPU kernels run asynchronously; the
    device is synchronized before and after each iteration, outside the timed spans), over ``repeats``
    iterations after :data:`WARMUP`."""
    fwd, bwd = [], []
    for i in range(repeats + WARMUP):
        before()
        sync()
        t0 = time.perf_counter()
        y = fwd_fn()
        t1 = time.perf_counter()
        bwd_fn(y)
        t2 = time.perf_counter()
        sync()
        if i >= WARMUP:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
    return statistics.median(fwd), statistics.median(bwd)


def _measure_edges(torch, device, repeats, seq, h, sync) -> dict:
    """Host time and kernels of the embedding stage's and the LM-head stage's extra work per micro-batch
    (each on its own graph, as on the first and last pipeline stage)."""
    edges = _megatron_edges(torch, h=h, device=device)
    vocab = edges.word_embeddings.weight.shape[0]
    ids = torch.randint(0, vocab, (1, seq), device=device)
    pos = torch.arange(seq, device=device).unsqueeze(0)
    labels = torch.randint(0, vocab, (1, seq), device=device)          # [b, s], as the logits after the transpose
    loss_mask = torch.ones(1, seq, device=device)
    x_in = torch.randn(seq, 1, h, device=device, requires_grad=True)

    def parts(which):
        if which == "embed":
            return lambda: edges.embed(ids, pos), lambda y: y.backward(torch.ones_like(y))
        return lambda: edges.head(x_in, labels, loss_mask), lambda y: y.backward()

    r = {}
    for which in ("embed", "head"):
        fwd_fn, bwd_fn = parts(which)
        holder = {}
        r[f"{which}_fwd"], r[f"{which}_bwd"] = _issue_times(fwd_fn, bwd_fn, sync, repeats)
        r[f"kernels_{which}_fwd"] = _count_kernels(torch, lambda: holder.setdefault("y", fwd_fn()))
        r[f"kernels_{which}_bwd"] = _count_kernels(torch, lambda: bwd_fn(holder["y"]))
    mb = _megatron_microbatch(torch, seq=seq, device=device)
    tm = []
    for i in range(repeats + 20):
        sync()
        t0 = time.perf_counter()
        mb()
        t1 = time.perf_counter()
        if i >= 20:
            tm.append(t1 - t0)
    r["microbatch"] = statistics.median(tm)
    r["kernels_microbatch"] = _count_kernels(torch, mb)
    return r


# The order the keys of a measurement are written in (the profile schema's HOST_TIMES / HOST_COUNTS).
HOST_KEYS = ("layer_fwd", "layer_bwd", "recompute_extra", "embed_fwd", "embed_bwd", "head_fwd", "head_bwd", "microbatch",
             "moe_fwd", "moe_bwd")
KERNEL_KEY = {"layer_fwd": "kernels_fwd", "layer_bwd": "kernels_bwd", "recompute_extra": "kernels_recompute"}
# defaults.yaml: on a CPU device each kernel launch is priced at an ASSUMED 5 us (cudaLaunchKernel's host cost); a
# measurement on a CUDA device already contains every launch, so it takes 0 (see :func:`measure`)
CPU_LAUNCH_US = 5


def host_block(r: dict) -> dict:
    """A measurement -> the profile's ``host:`` mapping (times as text with their unit, kernel counts)."""
    out = {}
    for k in HOST_KEYS:
        if k in r:
            kk = KERNEL_KEY.get(k, "kernels_" + k)
            out[k] = f"{r[k] * 1e6:.0f} us"
            out[kk] = int(r[kk])
    out["launch"] = f"{0 if str(r['device']).startswith('cuda') else CPU_LAUNCH_US} us"
    return out


def fragment(r: dict, pid: str, runs: int, base: str | None = None, base_name: str = "") -> str:
    """The YAML ``calibrate host --out`` writes: a ``host:`` block with its provenance, which a profile takes with
    ``host_from: FILE`` (a path relative to that profile's folder), or, with ``base``, a whole profile."""
    import yaml
    what = f"host issue times measured on {r['device']} ({r['style']} style)"
    head = {"id": pid, "name": f"{base_name}, {what}" if base_name else what, "kind": "calibrated-host"}
    if base:
        head["base"] = base
    prov = {"source": f"roofline calibrate host --device {r['device']} --style {r['style']} --repeats {r['repeats']} "
                      f"--runs {runs}" + (" --moe" if "moe_fwd" in r else ""),
            "assumptions": [f"torch {r['torch']}; per-layer times are the slope between a 1- and a {r['stack']}-layer "
                            "stack (the per-call intercept is in microbatch); medians of the repeats, the quietest "
                            f"(smallest total) of {runs} run(s)",
                            "launch: 0 us on a CUDA device (its times contain every launch); on a CPU device an "
                            f"ASSUMED {CPU_LAUNCH_US} us per kernel (defaults.yaml)"]
            + (["moe_fwd / moe_bwd: the intercepts of MoE minus dense over 2-16 local experts of Megatron-Core "
                "TransformerLayers (calibrate/bench_host_moe.py)"] if "moe_fwd" in r else [])}
    dump = lambda d, **kw: yaml.safe_dump(d, sort_keys=False, width=110, **kw)  # noqa: E731
    return ("# generated by `roofline calibrate host`; measure again rather than edit\n" + dump(head)
            + dump({"host": host_block(r)}, default_flow_style=None) + dump({"provenance": prov}))


if __name__ == "__main__":
    for style in STYLES:
        r = measure(style=style)
        print(f"{style}: host per layer: forward {r['layer_fwd'] * 1e6:.0f} us ({r['kernels_fwd']} kernels), backward "
              f"{r['layer_bwd'] * 1e6:.0f} us ({r['kernels_bwd']} kernels), full-recompute extra "
              f"{r['recompute_extra'] * 1e6:.0f} us ({r['kernels_recompute']} kernels)")
        print("  per micro-batch: " + ", ".join(
            f"{k} {r[k] * 1e6:.0f} us ({r['kernels_' + k]} kernels)"
            for k in ("embed_fwd", "embed_bwd", "head_fwd", "head_bwd", "call", "microbatch") if k in r))
