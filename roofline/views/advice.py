"""Warnings about a plan (never errors): what the prediction says is likely wasteful.

* GEMMs too small for the matrix units: a per-rank GEMM (M x K x N) whose arithmetic intensity
  2MKN / (beta (MK + KN + MN)) FLOP/B (the model's FLOPs over its bytes) is below the ridge point
  peak / HBM bandwidth is memory-bound (Williams et al. 2009, the roofline model).
* Batch above the critical batch size (McCandlish et al. 2018, "An Empirical Model of Large-Batch
  Training"): beyond B_crit, doubling the batch no longer halves the steps; at B = B_crit a run
  already needs 2x the minimum number of training tokens. Rough estimate, from Kaplan et al. 2020
  ("Scaling Laws for Neural Language Models", eq. 1.4 and 1.5): the converged loss of a model
  with N non-embedding parameters L(N) = (8.8e13 / N)^0.076 nats, and
  B_crit(L) = 2e8 / L^(1/0.21) tokens. E.g. 7B: about 6.6M tokens; 175B: about 21M tokens.
  Kaplan's fits are for their tokenizer and data (WebText2); treat this as an order of magnitude.
* Too few micro-batches for the pipeline: m < p (some stages never run concurrently) or a bubble
  (p-1)/(v m) above 25 % of the ideal time.
* The plan does not fit in memory.
* An MoE plan whose EP all-to-all stays exposed (over 10 % of the step) on Megatron-Core without its EP overlap
  (--overlap-moe-expert-parallel-comm): the warning prices the same plan with the overlap and says what it saves,
  or which of Megatron-Core's conditions the plan breaks (transformer_config.py __post_init__: interleaving when
  pp > 1, no full recomputation, no 'moe' recompute module, at most one MTP layer).
"""
from __future__ import annotations

import numpy as np

from ..base.units import GIGA, MEGA

# Kaplan et al. 2020: L(N) = (N_c / N)^alpha_N, B_crit(L) = B_star / L^(1/alpha_B)
N_C, ALPHA_N = 8.8e13, 0.076
B_STAR, ALPHA_B = 2e8, 0.21
BUBBLE_LIMIT = 0.25
EP_EXPOSED_LIMIT = 0.10     # share of the step an exposed EP all-to-all takes before the overlap hint is printed
HOST_BOUND_LIMIT = 0.25     # share of the step that scales with the host's issue time before the host warning
EP_OVERLAP_STACKS = ("megatron-core",)     # stacks that run Megatron-Core's EP overlap (the combined 1F1B schedule)


# Megatron-Core's conditions for --overlap-moe-expert-parallel-comm besides ep > 1 (megatron/core/transformer/
# transformer_config.py, TransformerConfig.__post_init__), each a test of (pp, interleave, full recomputation,
# 'moe' recompute module, MTP layers) that holds for scalars and for the search's numpy columns alike
EP_OVERLAP_CONDITIONS = (
    ("pp > 1 needs interleaving (--interleave)", lambda pp, v, full, moe, mtp: (pp == 1) | (v > 1)),
    ("no full recomputation", lambda pp, v, full, moe, mtp: np.logical_not(full)),
    ("no 'moe' recompute module", lambda pp, v, full, moe, mtp: np.logical_not(moe)),
    ("at most one MTP layer", lambda pp, v, full, moe, mtp: np.full(np.shape(pp), mtp <= 1)),
)


def ep_overlap_blockers(model, plan) -> list[str]:
    """The conditions of EP_OVERLAP_CONDITIONS that ``plan`` breaks."""
    from ..spec.config import module_set

    moe = plan.recompute == "selective" and "moe" in module_set(plan.recompute_modules or "")
    args = (plan.pp, plan.interleave, plan.recompute == "full", moe, model.mtp_layers or 0)
    return [msg for msg, test in EP_OVERLAP_CONDITIONS if not bool(test(*args))]


def critical_batch_tokens(non_embedding_params: float) -> float:
    """Rough critical batch size in tokens for a model of N non-embedding parameters (Kaplan 2020)."""
    loss = (N_C / max(non_embedding_params, 1.0)) ** ALPHA_N
    return B_STAR / loss ** (1 / ALPHA_B)


def gemms(pred) -> list[tuple[str, float, float]]:
    """(name, arithmetic intensity in FLOP per HBM byte, smallest dimension) of the per-rank GEMMs of one layer and
    the LM head for one micro-batch, as the model prices them (formulas/step.py ADVICE_GEMMS, outputs gemm_*: forward FLOPs over
    the bytes it moves; a routed MLP's local experts each read their own weight). GEMMs a plan switches off (no
    such layer) are left out."""
    r = pred.raw
    out = []
    for name in [k[len("gemm_"):-len("_flops")] for k in r if k.startswith("gemm_") and k.endswith("_flops")]:
        f, b = float(r[f"gemm_{name}_flops"]), float(r[f"gemm_{name}_bytes"])
        if f > 0 and b > 0:
            out.append((name, f / b, float(r[f"gemm_{name}_dmin"])))
    return out


def warnings_for(pred) -> list[str]:
    """One-line warnings for a :class:`~roofline.model.predict.Prediction` (empty list: nothing to say)."""
    out = []
    m, p, hw = pred.model, pred.plan, pred.hardware
    # 1. GEMMs below the ridge point
    ridge = hw.peak(p.dtype) / hw.hbm_bandwidth
    low = [g for g in gemms(pred) if g[1] < ridge]
    if low:
        desc = ", ".join(f"{n} ({ai:.0f} FLOP/B, smallest side {d:.0f})" for n, ai, d in low)
        out.append(f"GEMMs too small for the matrix units: {desc} below the ridge point {ridge:.0f} FLOP/B of "
                   f"{hw.id} ({p.dtype} peak / HBM bandwidth); they are memory-bound: use a larger micro-batch "
                   f"or less tensor parallelism")
    # 2. critical batch size
    non_emb = pred.raw["active_params"] - pred.raw["params_embedding"]     # Kaplan: no embedding or position tables
    b_tokens = p.batch * m.seq_len
    b_crit = critical_batch_tokens(non_emb)
    if b_tokens > b_crit:
        out.append(f"batch of {b_tokens / MEGA:.3g}M tokens is above the critical batch size (~{b_crit / MEGA:.2g}M "
                   f"tokens for {non_emb / GIGA:.3g}B non-embedding parameters; Kaplan et al. 2020 estimate): "
                   f"more tokens per step buy less than proportional progress (McCandlish et al. 2018)")
    # 3. micro-batches for the pipeline
    mb = pred.micro_batches
    if p.pp > 1 and mb < p.pp:
        out.append(f"too few micro-batches for the pipeline: m = {mb} < pp = {p.pp}; stages sit idle "
                   f"(raise the global batch or lower the micro-batch size)")
    elif p.pp > 1 and pred.bubble_fraction > BUBBLE_LIMIT:
        how = (f"DualPipeV with p={p.pp}, m={mb}" if p.schedule == "dualpipev"
               else f"DualPipe with p={p.pp}, m={mb}" if p.schedule == "dualpipe"
               else f"{p.schedule.upper()} with p={p.pp}, m={mb}" if p.schedule in ("zb1p", "zb2p")
               else f"(p-1)/(v m) with p={p.pp}, v={p.interleave}, m={mb}")
        out.append(f"pipeline bubble {100 * pred.bubble_fraction:.0f} % of the ideal time ({how}) is above "
                   f"{100 * BUBBLE_LIMIT:.0f} %: more micro-batches, interleaving or a smaller pp help")
    # 4. memory
    if not pred.fits_in_memory:
        need = (pred.memory["total"] + pred.memory["reserve"]).to("GiB").magnitude     # as the memory line counts it
        cap = pred.memory_capacity.to("GiB").magnitude
        out.append(f"plan does not fit in memory: {need:.1f} GiB per GPU > {cap:.0f} GiB ({pred.overflow} is the "
                   f"largest part); try recompute, sharding, CPU activation offload, or more tensor/pipeline "
                   f"parallelism")
    # 5. an exposed EP all-to-all that Megatron-Core's EP overlap would hide
    hint = ep_overlap_hint(pred)
    if hint:
        out.append(hint)
    # 6. a step bound by the host issuing kernels (views/sensitivity.py: the share that scales with the host's time)
    host = host_bound_hint(pred)
    if host:
        out.append(host)
    return out


def host_bound_hint(pred) -> str | None:
    """A warning when at least HOST_BOUND_LIMIT of the step scales with the CPU's kernel-issue time (the elasticity of
    the step to the host, views/sensitivity.py): the GPUs wait for eager PyTorch to launch their kernels."""
    from .sensitivity import sensitivity

    row = sensitivity(pred).row("host CPU")
    if row["elasticity"] < HOST_BOUND_LIMIT:
        return None
    saved = 1 - row["faster_s"] / pred.raw["step_time"]
    # a 2x faster host would save share / 2 if the step stayed host-bound; much less: the GPU's own work then binds
    then = ", the GPU's own work then binding" if saved < 0.9 * row["elasticity"] / 2 else ""
    return (f"the step is host-bound: {row['elasticity']:.0%} of it scales with the CPU's kernel-issue time (a 2x "
            f"faster host shortens it by {saved:.0%}{then}); more work per kernel (a larger micro-batch, less tensor "
            f"parallelism) or CUDA graphs (--cuda-graphs, where the stack runs them) take the host off the critical "
            f"path")


def ep_overlap_hint(pred) -> str | None:
    """The warning of an exposed EP all-to-all (module docstring), or None."""
    import dataclasses

    m, p = pred.model, pred.plan
    step, ep = float(pred.raw.get("step_time", 0.0)), float(pred.raw.get("t_ep_comm", 0.0))
    if p.ep <= 1 or p.overlap_ep > 0 or pred.stack not in EP_OVERLAP_STACKS or not step > 0 \
            or ep / step <= EP_EXPOSED_LIMIT:
        return None
    head = (f"the EP all-to-all is {100 * ep / step:.0f} % of the step, exposed: Megatron-Core's EP overlap "
            f"(--overlap-ep 1; --overlap-moe-expert-parallel-comm) hides it behind another micro-batch's compute")
    blockers = ep_overlap_blockers(m, p)
    if blockers:
        return f"{head}, but this plan breaks its conditions: {'; '.join(blockers)}"
    from ..model.predict import predict

    alt = predict(m, dataclasses.replace(p, overlap_ep=1.0), pred.hardware)
    t0, t1 = pred.step_time.to("s").magnitude, alt.step_time.to("s").magnitude
    if not t1 < t0:
        return None
    return f"{head}: {t0:.3g} s -> {t1:.3g} s per step ({100 * (t1 / t0 - 1):+.1f} %) on this plan"
