"""Host (CPU) issue time an MoE layer adds to a dense one, measured with Megatron-Core's own layers.

The profile's ``host:`` block prices a dense transformer layer (bench_host.py). An MoE layer issues more: the
router, the token dispatcher's bookkeeping and the permutation. This benchmark builds Megatron-Core
``TransformerLayer``s from ``get_gpt_layer_local_spec`` (Megatron-Core modules only, no Transformer Engine) at hidden
size 64, where the arithmetic is negligible: a dense layer and MoE layers with 2-16 local experts (alltoall token
dispatcher, dropless top-2, aux-loss router, SequentialMLP). It times the forward and the ``backward()`` call of
each and counts the kernels they launch. MoE minus dense, fitted as a + b x local experts, gives the profile keys
``moe_fwd`` / ``moe_bwd`` (the intercepts a) and ``kernels_moe_fwd`` / ``kernels_moe_bwd``; the per-expert slope b
is SequentialMLP's GEMM pair per expert, which the recipes' grouped GEMM issues in one call, so it is reported and
not written.

Needs ``pip install megatron-core`` (0.16.1 measured) beside torch. On a machine without CUDA the CUDA stream and
event objects the dispatcher creates, and the model-parallel RNG tracker's fork around attention dropout, are
replaced by no-ops (they order GPU-side work; a GPU run pays them in the dense and the MoE layer alike).

    python -m roofline calibrate host --moe [--device cuda:0]
    python benchmarks/moe_host_megatron_core.py
"""
from __future__ import annotations

import contextlib
import os
import statistics
import time
import warnings

from ...base.errors import InputError

EXPERTS = (0, 2, 4, 8, 16)      # local experts of the measured layers; 0 = the dense layer
HIDDEN = 64
WARMUP = 20


def require() -> str:
    """Megatron-Core's version; InputError (one line) when it or torch is missing."""
    try:
        import torch  # noqa: F401
        import megatron.core
    except ImportError as exc:
        raise InputError(f"the MoE host benchmark needs torch and megatron-core (pip install megatron-core): {exc}") \
            from None
    return str(getattr(megatron.core, "__version__", "?"))


def _cpu_shims(torch) -> None:
    class _Stream:
        def __init__(self, *a, **k): pass
        def synchronize(self): pass
        def wait_stream(self, *a): pass
        def wait_event(self, *a): pass
        def record_event(self, *a, **k): return _Event()

    class _Event:
        def __init__(self, *a, **k): pass
        def record(self, *a): pass
        def synchronize(self): pass
        def wait(self, *a): pass
        def query(self): return True

    torch.cuda.Stream, torch.cuda.Event = _Stream, _Event
    torch.cuda.stream = lambda s=None: contextlib.nullcontext()
    torch.cuda.current_stream = lambda *a: _Stream()
    torch.cuda.current_device = lambda: "cpu"


def _init(torch, device: str) -> None:
    """One process, world size 1: Megatron-Core's parallel state over a gloo (CPU) or NCCL (GPU) group."""
    from megatron.core import parallel_state, tensor_parallel
    if not device.startswith("cuda"):
        _cpu_shims(torch)
        tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
    if not torch.distributed.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29541")
        torch.distributed.init_process_group("nccl" if device.startswith("cuda") else "gloo", rank=0, world_size=1)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(1, 1)
    if device.startswith("cuda"):
        tensor_parallel.model_parallel_cuda_manual_seed(0)


def _layer(experts: int, device: str):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.transformer.transformer_layer import TransformerLayer
    import megatron.core.transformer.moe.moe_utils as mu
    if not hasattr(mu, "te_general_gemm"):      # 0.16.1 reads this name unguarded when TE is absent
        mu.te_general_gemm = None
    moe = dict(num_moe_experts=experts, moe_router_topk=2, moe_token_dispatcher_type="alltoall",
               moe_ffn_hidden_size=HIDDEN, moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-2) \
        if experts else {}
    cfg = TransformerConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=4, ffn_hidden_size=HIDDEN,
                            use_cpu_initialization=True, add_bias_linear=False, gated_linear_unit=True,
                            normalization="RMSNorm", **moe)
    spec = get_gpt_layer_local_spec(num_experts=experts or None, normalization="RMSNorm")
    return TransformerLayer(config=cfg, submodules=spec.submodules, layer_number=1).to(device)


PARTS = ("route", "preprocess")   # MoELayer methods that CUDA graphs capture (cuda_graph_modules moe_router, moe_preprocess)


def _one(torch, experts: int, device: str, repeats: int, seq: int = 16, parts: dict | None = None) -> tuple:
    """(forward s, backward s, forward kernels, backward kernels) of one layer: medians of ``repeats``; with ``parts``,
    an MoE layer's forward host time inside each of PARTS, medians per call, added to lists in ``parts``."""
    from .bench_host import _count_kernels
    layer = _layer(experts, device)
    spent = {}
    if experts and parts is not None:
        for name in PARTS:
            def timed(*a, _f=getattr(layer.mlp, name), _n=name, **k):
                t = time.perf_counter()
                r = _f(*a, **k)
                spent[_n] = spent.get(_n, 0.0) + time.perf_counter() - t
                return r
            setattr(layer.mlp, name, timed)
    inside = {name: [] for name in PARTS}
    x = torch.randn(seq, 2, HIDDEN, device=device, requires_grad=True)
    mask = torch.ones(2, 1, seq, seq, dtype=torch.bool, device=device).triu(1)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def forward():
        out = layer(x, attention_mask=mask)
        return (out[0] if isinstance(out, tuple) else out).sum()

    fwd, bwd = [], []
    for i in range(repeats + WARMUP):
        sync()
        spent.clear()
        t0 = time.perf_counter()
        y = forward()
        t1 = time.perf_counter()
        y.backward()
        t2 = time.perf_counter()
        sync()
        if i >= WARMUP:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            for name in spent:
                inside[name].append(spent[name])
    if parts is not None:
        for name, v in inside.items():
            if v:
                parts.setdefault(name, []).append(statistics.median(v))
    held = {}
    k_fwd = _count_kernels(torch, lambda: held.setdefault("y", forward()))
    k_bwd = _count_kernels(torch, lambda: held["y"].backward())
    return statistics.median(fwd), statistics.median(bwd), k_fwd, k_bwd


def measure(device: str = "cpu", repeats: int = 200, tick=None) -> dict:
    """The layers of ``EXPERTS`` measured (``rows``: experts -> (fwd s, bwd s, fwd kernels, bwd kernels)) and the
    profile keys: ``moe_fwd``, ``moe_bwd`` (s) and their kernel counts, the intercepts of MoE minus dense over the
    local experts; ``per_expert_fwd`` / ``per_expert_bwd``, the slopes (SequentialMLP, not written)."""
    import numpy as np
    import torch
    version = require()
    warnings.filterwarnings("ignore", module="megatron")
    _init(torch, device)
    rows, parts = {}, {}
    for e in EXPERTS:
        rows[e] = _one(torch, e, device, repeats, parts=parts)
        if tick:
            tick("dense layer" if e == 0 else f"MoE layer, {e} local experts")
    e = np.array([k for k in EXPERTS if k], dtype=float)
    out = {"device": device, "repeats": repeats, "megatron_core": version, "torch": torch.__version__, "rows": rows}
    for i, d in enumerate(("fwd", "bwd")):
        slope, icpt = np.polyfit(e, [rows[k][i] - rows[0][i] for k in EXPERTS if k], 1)
        k_slope, k_icpt = np.polyfit(e, [rows[k][2 + i] - rows[0][2 + i] for k in EXPERTS if k], 1)
        out[f"moe_{d}"], out[f"per_expert_{d}"] = max(0.0, float(icpt)), float(slope)
        out[f"kernels_moe_{d}"], out[f"per_expert_kernels_{d}"] = max(0, int(round(k_icpt))), float(k_slope)
    # the forward host time of the router and of the dispatcher's preprocess (medians over the MoE layers), as shares
    # of what an MoE layer adds to a dense one: what per-layer graphs over moe_router / moe_preprocess take away
    for name in PARTS:
        t = statistics.median(parts[name]) if parts.get(name) else 0.0
        out[f"{name}_fwd"], out[f"{name}_share"] = t, (t / out["moe_fwd"] if out["moe_fwd"] > 0 else 0.0)
    return out


def table(r: dict) -> str:
    """The measured layers and the fitted keys, as text."""
    lines = [f"Megatron-Core {r['megatron_core']}, torch {r['torch']}, {r['device']}; median host time per call, us",
             f"{'layer':>22} {'forward':>9} {'backward':>9} {'fwd+bwd':>9} {'- dense':>9} {'kernels f/b':>12}"]
    d0 = r["rows"][0][0] + r["rows"][0][1]
    for e, (f, b, kf, kb) in r["rows"].items():
        name = "dense (SwiGLU MLP)" if e == 0 else f"MoE, {e} local experts"
        lines.append(f"{name:>22} {f * 1e6:9.0f} {b * 1e6:9.0f} {(f + b) * 1e6:9.0f} {(f + b - d0) * 1e6:9.0f} "
                     f"{kf:>6}/{kb:<5}")
    for d, what in (("fwd", "forward"), ("bwd", "backward")):
        lines.append(f"MoE - dense, {what}: {r[f'moe_{d}'] * 1e6:.0f} us + {r[f'per_expert_{d}'] * 1e6:.0f} us per "
                     f"local expert; {r[f'kernels_moe_{d}']} + {r[f'per_expert_kernels_{d}']:.1f} kernels per local "
                     "expert")
    for name, module in zip(PARTS, ("moe_router", "moe_preprocess")):
        if f"{name}_share" in r:
            lines.append(f"inside the forward, MoELayer.{name} ({module} graphs): {r[f'{name}_fwd'] * 1e6:.0f} us, "
                         f"{r[f'{name}_share']:.2f} of the MoE forward's intercept")
    return "\n".join(lines)
