"""Host (CPU) issue time of one Megatron-Core transformer layer, dense vs MoE, on tiny shapes.

The model prices an MoE layer's host issue time like a dense layer's (hardware profile ``host:`` block,
calibrate/bench_host.py: a Megatron-LM-style layer). This script measures what Megatron-Core's own MoE code path
adds: it builds ``TransformerLayer`` from ``get_gpt_layer_local_spec`` (Megatron-Core modules only, no Transformer
Engine) on the CPU at hidden size 64, where the arithmetic is negligible, and times the forward and ``backward()``
calls of a dense layer and of MoE layers with 2..16 local experts (the alltoall token dispatcher, dropless top-2,
aux-loss router, SequentialMLP: one GEMM pair per local expert). The difference, MoE minus dense, is the host
time of the router, the dispatcher's bookkeeping, the permutation and the per-expert loop.

Needs ``pip install megatron-core`` (0.16.1 measured) and torch; not a dependency of roofline. On a machine
without CUDA the CUDA stream/event objects the dispatcher creates are replaced by no-ops (the D2H copies and
stream syncs they order are GPU-side and cost nothing here), and so is the model-parallel RNG tracker's fork
around attention dropout (a GPU run pays it in both layers alike). Transformer Engine's modules (the recipes' path) add
their own Python overhead on top and are not measured.

    python benchmarks/moe_host_megatron_core.py [--repeats 100]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import warnings


def _cpu_cuda_shims(torch):
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
    # the model-parallel RNG tracker swaps CUDA generator states around attention dropout: a no-op here
    from megatron.core import tensor_parallel
    tracker = tensor_parallel.get_cuda_rng_tracker()
    tracker.fork = lambda *a, **k: contextlib.nullcontext()


def build(experts: int):
    """A Megatron-Core TransformerLayer (local spec): dense when ``experts`` is 0."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.transformer.transformer_layer import TransformerLayer
    import megatron.core.transformer.moe.moe_utils as mu
    if not hasattr(mu, "te_general_gemm"):      # 0.16.1 reads this name unguarded when TE is absent
        mu.te_general_gemm = None
    moe = dict(num_moe_experts=experts, moe_router_topk=2, moe_token_dispatcher_type="alltoall",
               moe_ffn_hidden_size=64, moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-2) \
        if experts else {}
    cfg = TransformerConfig(num_layers=1, hidden_size=64, num_attention_heads=4, ffn_hidden_size=64,
                            use_cpu_initialization=True, add_bias_linear=False, gated_linear_unit=True,
                            normalization="RMSNorm", **moe)
    spec = get_gpt_layer_local_spec(num_experts=experts or None, normalization="RMSNorm")
    return TransformerLayer(config=cfg, submodules=spec.submodules, layer_number=1)


def measure(experts: int, repeats: int, seq: int = 16) -> tuple[float, float, int, int]:
    """Median host time of the forward and the ``backward()`` call, and the kernels each launches."""
    import torch
    from roofline.views.calibrate.bench_host import _count_kernels
    layer = build(experts)
    x = torch.randn(seq, 2, 64, requires_grad=True)
    mask = torch.ones(2, 1, seq, seq, dtype=torch.bool).triu(1)

    def forward():
        out = layer(x, attention_mask=mask)
        return (out[0] if isinstance(out, tuple) else out).sum()

    fwd, bwd = [], []
    for i in range(repeats + 20):
        t0 = time.perf_counter()
        y = forward()
        t1 = time.perf_counter()
        y.backward()
        t2 = time.perf_counter()
        if i >= 20:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
    held = {}
    k_fwd = _count_kernels(torch, lambda: held.setdefault("y", forward()))
    k_bwd = _count_kernels(torch, lambda: held["y"].backward())
    return statistics.median(fwd), statistics.median(bwd), k_fwd, k_bwd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=100)
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    try:
        import torch
        import megatron.core  # noqa: F401
    except ImportError as exc:
        print(f"moe_host_megatron_core: needs torch and megatron-core ({exc})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        _cpu_cuda_shims(torch)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import parallel_state
    parallel_state.initialize_model_parallel(1, 1)
    import megatron.core
    print(f"Megatron-Core {megatron.core.__version__}, torch {torch.__version__}, "
          f"{'cuda' if torch.cuda.is_available() else 'cpu'}; median host time per call, us")
    print(f"{'layer':>22} {'forward':>9} {'backward':>9} {'fwd+bwd':>9} {'- dense':>9} {'kernels f/b':>12}")
    import numpy as np
    res = {}
    for e in EXPERTS:
        f, b, kf, kb = res[e] = measure(e, args.repeats)
        name = "dense (SwiGLU MLP)" if e == 0 else f"MoE, {e} local experts"
        print(f"{name:>22} {f * 1e6:9.0f} {b * 1e6:9.0f} {(f + b) * 1e6:9.0f} "
              f"{(f + b - res[0][0] - res[0][1]) * 1e6:9.0f} {kf:>6}/{kb:<5}", flush=True)
    # MoE minus dense as a + b x local experts (least squares over the MoE rows): the intercept is what the router,
    # the dispatcher's bookkeeping and the permutation add; the slope, each local expert's GEMM pair (SequentialMLP)
    e = np.array([k for k in EXPERTS if k])
    for i, what in enumerate(("forward", "backward")):
        extra = np.array([res[k][i] - res[0][i] for k in e])
        kern = np.array([res[k][2 + i] - res[0][2 + i] for k in e])
        (b1, a1), (b2, a2) = np.polyfit(e, extra, 1), np.polyfit(e, kern, 1)
        print(f"MoE - dense, {what}: {a1 * 1e6:.0f} us + {b1 * 1e6:.0f} us per local expert; "
              f"{a2:.0f} + {b2:.1f} kernels per local expert")
    return 0


EXPERTS = (0, 2, 4, 8, 16)


if __name__ == "__main__":
    sys.exit(main())
