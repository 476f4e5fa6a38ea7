"""model + plan + hardware -> Prediction (pint quantities with a breakdown).

The numbers come from ``_compiled.evaluate``, the numpy code generated from the sympy formulas;
this module only maps the dataclasses onto the formula symbols and wraps the results in units.
"""
from __future__ import annotations

import functools
import math

from dataclasses import dataclass, field

import numpy as np

from . import _compiled
from ..base import precision
from ..spec.config import ATTENTION_KERNEL, FLASH_SPEED, RECOMPUTE, Model, Plan, check
from ..spec.hardware import CLASSES, Hardware, overlap_defaults
from ..base.results import Result
from ..base.units import DAY, HOUR, KILO, TERA

BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1, "fp4": 0.5}     # GEMM operand bytes per peak_flops key
# Activations and weights of an FP8/FP4 recipe are held in 16 bits: Transformer Engine keeps BF16 master weights and
# layer outputs; the GEMM inputs it saves for backward are its quantized copies (gin_bytes, base/precision.py
# saved_bytes, where the stack's quantized_saves says so)
ACT_BYTES = {"fp16": 2, "fp32": 4}        # every other precision: 2 (bf16)
BREAKDOWN = ("forward", "backward", "recompute", "tp_comm", "cp_comm", "ep_comm", "host_overhead", "offload", "pp_comm",
             "pp_bubble", "dp_comm", "optimizer")
MEMORY = ("weights", "gradients", "optimizer", "activations", "reserve")


def hardware_inputs(hw: Hardware, dtype: str = "bf16") -> dict:
    x = {"peak": hw.peak(dtype), "peak_hp": hw.peak_16bit(dtype), "peak_vec": hw.vector_peak(),
         # the recipe's GEMM kernel rate; whether per-tensor FP8 operands need a transposed copy (TN-only FP8 GEMMs)
         "lp_rate": hw.lp_rate(dtype), "fp8_tn": 0.0 if hw.fp8_non_tn else 1.0,
         "hbm_bw": hw.hbm_bandwidth, "clock": hw.sustained_clock,
         "clock_spread": hw.clock_spread,
         "gpus_per_node": hw.gpus_per_node, "sms": hw.sm_count, "gemm_dhalf": hw.dhalf, "host_fwd": hw.host_fwd, "host_bwd": hw.host_bwd,
         "host_rc": hw.host_rc, "host_emb": hw.host_emb, "host_head": hw.host_head, "host_mb": hw.host_mb,
         "host_moe_fwd": hw.host_moe_fwd, "host_moe_bwd": hw.host_moe_bwd, "host_launch": hw.host_launch, "host_sync": hw.host_sync,
         # FP8 attention's speed over 16-bit attention, forward and backward, and whether its backward skips a
         # sliding window's masked blocks, under this recipe (read where attn_fp8)
         **dict(zip(("fp8_attn_fwd", "fp8_attn_bwd", "fp8_window_bwd"), map(float, hw.fp8_attention_factors(dtype)))),
         # no stated host link: a placeholder that only a plan with offload_layers > 0 would read (inputs() refuses it)
         "host_link_bw": hw.host_link.bandwidth if hw.host_link else 1.0,
         # SMs each kind of communication kernel holds beside compute (formulas/comm.py interference): the profile's
         # overlap: block, measured by calibrate overlap, or defaults.yaml's sourced counts
         **{k: float(v) for k, v in {**overlap_defaults(), **hw.overlap}.items()}}
    for c in CLASSES:
        for d in ("fwd", "bwd"):
            eta, mu, t0 = hw.efficiency[c][d]
            x[f"eta_{c}_{d}"], x[f"mu_{c}_{d}"], x[f"t0_{c}_{d}"] = eta, mu, t0
    for d, v in hw.attn_shape.items():
        x[f"attn_dsoft_{d}"], x[f"attn_dreg_{d}"], x[f"attn_uneven_{d}"], x[f"attn_dio_{d}"] = v
    for d, (dhalf, reread) in hw.bmm_shape.items():
        x[f"bmm_dhalf_{d}"], x[f"bmm_reread_{d}"] = dhalf, reread
    for (c, link), (alpha, busbw) in hw.collectives.items():
        x[f"alpha_{c}_{link}"], x[f"bw_{c}_{link}"] = alpha, busbw
        x[f"call_{c}_{link}"] = hw.collective_calls.get((c, link), 0.0)
    return x


def model_inputs(m: Model) -> dict:
    return {"n_layers": m.n_layers, "d_model": m.d_model, "n_heads": m.n_heads, "kv_heads": m.kv_heads,
            "ffn_hidden": m.ffn, "vocab": m.vocab, "seq_len": m.seq_len, "gated": float(m.mlp == "swiglu"),
            "sq_relu": float(m.mlp == "squared_relu"), "rms": float(m.norm == "rmsnorm"),
            "causal": float(m.causal), "flash": float(m.attention in FLASH_SPEED),
            "flash_speed": FLASH_SPEED.get(m.attention, 1.0), "dropout": float(m.dropout),
            "tied": float(m.tied_embeddings), "learned_pos": float(m.position == "learned"),
            "rope_pos": float(m.position == "rope"),
            "biases": float(m.biases), "qk_norm": float(m.qk_norm), "n_experts": m.n_experts, "top_k": m.top_k, "capacity_factor": m.capacity_factor,
            "head_dim": m.head_size, "moe_ffn": m.expert_ffn, "shared_ffn": m.shared_ffn, "dense_layers": m.dense_layers,
            "mtp": m.mtp_layers or 0, "moe_latent": m.moe_latent_size or 0,
            **mla_inputs(m), **hybrid_inputs(m)}


def hybrid_inputs(m: Model) -> dict:
    """A hybrid Mamba-2 pattern's shares of the layers (formulas/mamba.py) and the mixer's sizes; a transformer's
    shares are 1, 1, 0 (every layer attention + MLP, no Mamba)."""
    n = m.layer_counts
    l = m.n_layers
    if not m.hybrid_pattern:
        return {"attn_frac": 1.0, "mlp_frac": 1.0, "mamba_frac": 0.0, "mamba_heads": 0, "mamba_hdim": 0,
                "mamba_state": 0, "mamba_groups": 0, "mamba_conv": 4, "mamba_chunk": 128}
    mb = m.mamba
    return {"attn_frac": n["*"] / l, "mlp_frac": (n["-"] + n["E"]) / l, "mamba_frac": n["M"] / l,
            "mamba_heads": mb["heads"], "mamba_hdim": mb["head_dim"], "mamba_state": mb["state"],
            "mamba_groups": mb["groups"], "mamba_conv": mb["d_conv"], "mamba_chunk": mb["chunk"]}


def mla_inputs(m: Model) -> dict:
    """MLA sizes (0 without MLA) and the sliding window: its size and the fraction of layers it applies to."""
    mla = m.mla
    return {"kv_lora": m.kv_lora_rank or 0, "q_lora": (m.q_lora_rank or 0) if mla else 0,
            "qk_nope": m.qk_nope_head_dim if mla else 0, "qk_rope": m.qk_rope_head_dim if mla else 0,
            "v_head": m.v_head_dim if mla else 0, "swa_window": m.swa_window or 0,
            "swa_frac": m.windowed_layers / m.n_layers}


def slowest_z(n_gpus):
    """Expected maximum of n standard normal draws, for each n of ``n_gpus`` (a number or an array): Blom's
    approximation Phi^-1((n - 0.375) / (n + 0.25)) (Blom 1958; 4.5 % above the exact expectation at n = 2, within 1 %
    from n = 8 on: tests/test_clock_spread.py integrates it), 0 for one GPU. The slowest of a job's n GPUs computes at
    1 / (1 + clock_spread z_n) of the mean rate (formulas/compute.py clock_eff)."""
    from statistics import NormalDist

    n = np.asarray(n_gpus, dtype=np.float64)
    out = np.zeros(n.shape)
    for v in np.unique(n[n > 1]):
        out[n == v] = NormalDist().inv_cdf((v - 0.375) / (v + 0.25))
    return out[()]


def slowest_pace(clock_spread: float, n_gpus) -> float:
    """The compute rate of a job's slowest GPU over the profile's (dimensionless): 1 / (1 + clock_spread z_n), the
    factor formulas/compute.py ``clock_eff`` applies to the sustained clock, for reports that state it."""
    return 1.0 / (1.0 + clock_spread * slowest_z(n_gpus))


def layout_inputs(tp, pp, dp, cp, ep, micro_batch, global_batch, interleave, sequence_parallel, recompute, zero,
                  schedule, etp=None, stages=None) -> dict:
    """The formula inputs of a plan's layout: one plan's numbers, or numpy arrays of many (``search``).

    ``recompute``: 0 none, 1 selective, 2 full, 3 op (``config.RECOMPUTE`` order), len(RECOMPUTE) + k selective with the search's
    k-th module set (views/space.py selective_ladder; its rcm_* switches come from space.ladder_inputs);
    ``zero``: the ZeRO stage 0-3;
    ``sequence_parallel``: truth values; ``schedule``: a name of config.SCHEDULES (one for all rows; GPipe only where
    pp > 1: without stages, each micro-batch runs its forward and backward in turn, as gradient accumulation does); ``etp`` None:
    = tp (Megatron-Core's default expert TP);
    ``stages``: a stated pipeline layout's per-rank counts (layout.stage_counts), None: derived (pp_layout = 0).
    The one mapping from plan knobs to formula symbols."""
    tp, recompute, zero = np.asarray(tp), np.asarray(recompute), np.asarray(zero)
    f = lambda a: np.asarray(a, dtype=np.float64)[()]       # 0-d arrays back to numpy scalars
    return {"tp": f(tp), "pp": f(pp), "dp": f(dp), "cp": f(cp), "ep": f(ep), "etp": f(tp if etp is None else etp),
            "micro_batch": f(micro_batch),
            "global_batch": f(global_batch), "interleave": f(interleave),
            "seq_par": f((np.asarray(sequence_parallel) != 0) & (tp > 1)),
            "rc_full": f(recompute == 2), "rc_any": f(recompute == 2), "rc_sel": f((recompute == 1) | (recompute >= len(RECOMPUTE))), "rc_op": f(recompute == 3), "gpipe": f((schedule == "gpipe") & (np.asarray(pp) > 1)),
            "dualpipev": f(schedule == "dualpipev"), "dualpipe": f(schedule == "dualpipe"),
            "zb1p": f((schedule == "zb1p") & (np.asarray(pp) > 1)), "zb2p": f((schedule == "zb2p") & (np.asarray(pp) > 1)),
            "z_os": f(zero >= 1), "z_grad": f(zero >= 2), "z_param": f(zero >= 3),
            "gpu_z": f(slowest_z(np.asarray(tp) * np.asarray(pp) * np.asarray(dp) * np.asarray(cp))),
            **pipeline_layout_inputs(stages)}


LAYOUT_SYMBOLS = ("layout_first", "layout_first_dense", "layout_last", "layout_last_dense", "layout_mid",
                  "layout_mid_dense")


def pipeline_layout_inputs(stages: dict | None) -> dict:
    """pp_layout and the layout_* counts (formulas/symbols.py): the sentinel pp_layout = 0 (counts 0, unused) when
    no layout is stated. ``stages``' counts may be arrays (search: one per plan), with pp_layout 1 for all."""
    if stages is None:
        return {"pp_layout": 0.0, **{k: 0.0 for k in LAYOUT_SYMBOLS}}
    return {"pp_layout": 1.0, **{k: np.asarray(stages[k], dtype=np.float64)[()] for k in LAYOUT_SYMBOLS}}


def dualpipe_stages(model: Model, pp) -> dict:
    """The layout_* counts of DualPipe's balanced split (spec/layout.py dualpipe_balanced) for a model on pp stages (a
    number or an array of even numbers): the split a DualPipe plan without a stated layout is priced on."""
    from ..spec.layout import dualpipe_balanced, stage_counts

    pps = np.asarray(pp)
    mtp = model.mtp_layers or 0
    out = {k: np.zeros(pps.shape) for k in LAYOUT_SYMBOLS}
    for v in np.unique(pps):
        v = int(v)
        c = stage_counts(dualpipe_balanced(model.n_layers, v, mtp), v, 1, model.dense_layers, model.n_layers, mtp,
                         "dualpipe")
        for k in LAYOUT_SYMBOLS:
            out[k][pps == v] = c[k]
    return {k: a[()] for k, a in out.items()}


# the overlap fractions of a plan -> their formula inputs (symbols ov_*); search sets the layout-ruled ones per plan
OVERLAP_INPUTS = {"overlap_grad_reduce": "ov_dp", "overlap_param_gather": "ov_ag", "overlap_tp": "ov_tp",
                  "overlap_pp": "ov_pp", "overlap_cp": "ov_cp", "overlap_ep": "ov_ep"}


# Megatron-Core's recompute module names -> the formula switches (formulas/symbols.py rcm_*)
RECOMPUTE_MODULE_SYMBOLS = {"core_attn": "rcm_core", "layernorm": "rcm_norm", "moe_act": "rcm_moe_act",
                            "mla_up_proj": "rcm_mla_up", "mlp": "rcm_mlp", "moe": "rcm_moe",
                            "shared_experts": "rcm_shared"}


def recompute_module_inputs(modules) -> dict:
    """The rcm_* switches of a set of recompute module names (each 1 when named; they act under selective only)."""
    return {sym: float(name in modules) for name, sym in RECOMPUTE_MODULE_SYMBOLS.items()}


def graph_inputs(cuda_graphs: str, modules: str) -> dict:
    """The CUDA-graph inputs of a plan: which blocks of each layer replay as graphs (formulas/symbols.py graph_*).
    Per-layer graphs over no named modules capture the whole layer (Megatron-Core: an empty cuda_graph_modules);
    a full-iteration graph captures the layers and the rest of the forward-backward."""
    from ..spec.config import module_set
    whole = cuda_graphs == "full" or (cuda_graphs == "layers" and not module_set(modules))
    mods = module_set(modules) if cuda_graphs == "layers" else frozenset()
    g = lambda *names: float(whole or any(n in mods for n in names))  # noqa: E731
    return {"graph_attn": g("attn"), "graph_mlp": g("mlp"), "graph_moe": g("moe"), "graph_router": g("moe", "moe_router"),
            "graph_preproc": g("moe", "moe_preprocess"), "graph_mamba": g("mamba"),
            "graph_full": float(cuda_graphs == "full")}


def plan_inputs(p: Plan, model: Model | None = None) -> dict:
    """A plan's formula inputs; a stated pipeline_layout needs the ``model`` (its layers, MTP layers and leading
    dense layers)."""
    stages = None
    if p.pipeline_layout is not None:
        from ..base.errors import InputError
        from ..spec.layout import stage_counts
        if model is None:
            raise InputError("plan.pipeline_layout needs the model (its layers and MTP layers) to map it to stages")
        stages = stage_counts(p.pipeline_layout, p.pp, p.interleave, model.dense_layers, model.n_layers,
                              model.mtp_layers or 0, p.schedule)
    elif p.schedule == "dualpipe" and model is not None and p.pp > 1:
        stages = dualpipe_stages(model, p.pp)         # DualPipe without a stated layout: the balanced split
    act = ACT_BYTES.get(p.dtype, 2)
    low = precision.low_precision(p.dtype)
    # the share of the layers a low-precision recipe keeps in 16 bits (needs the model's layer count)
    hp_frac = min(1.0, p.bf16_layers / model.n_layers) if (p.bf16_layers and model is not None) else 0.0
    lay = layout_inputs(p.tp, p.pp, p.dp, p.cp, p.ep, p.micro_batch, p.batch, p.interleave, p.sequence_parallel,
                        RECOMPUTE.index(p.recompute), p.zero_stage, p.schedule, p.etp, stages)
    # full recomputation of a share of each stage's layers (recompute_fraction): rc_full is that share
    return {**lay, "rc_full": lay["rc_full"] * float(p.recompute_fraction),
            **{sym: getattr(p, field) for field, sym in OVERLAP_INPUTS.items()}, "tp_async": float(p.tp_async_dgrad),
            "tp_split_rs": float(p.tp_overlap_split_rs), "attn_fp8": float(p.fp8_attention), "hp_frac": hp_frac,
            # routed experts launched one at a time (TE GroupedLinear), with the recipe's cast kernels per expert
            "exp_launch": float(p.per_expert_kernels), "moe_mlp_fused": float(p.fused_moe_mlp), "exp_casts": float(precision.get(p.dtype).expert_casts),
            "delay_wgrad": float(p.delay_wgrad),
            **recompute_module_inputs(p.recompute_module_set),
            "wgrad_fusion": float(p.wgrad_fusion), "eager_elem": float(p.eager_elementwise),
            "eager_rope": float(p.eager_elementwise if p.eager_rope is None else p.eager_rope),
            "fsdp_copy": float(p.fsdp_copies), "grad_bucket": float(p.grad_buckets),
            "pp_scatter": float(p.pp_scatter_gather), "dp_rep": float(p.dp_replicas),
            "q_saved": float(p.quantized_saves), "offload_layers": float(p.offload_layers),
            "ce_eager": float(p.loss_kernel == "eager"), "ce_compiled": float(p.loss_kernel == "compiled"),
            **graph_inputs(p.cuda_graphs, p.graph_modules),
            "act_bytes": act, "grad_bytes": BYTES[p.grad_dtype],
            "pg_bytes": precision.param_gather_bytes(p.dtype, act, p.fp8_param_gather),
            **dict(zip(("tg_in", "tg_out"), precision.tp_gather_bytes(p.dtype, act, p.quantized_tp_gather, hp_frac))),
            # Adam: the fp32 master copy and two moments of the plan's dtype (12 bytes per parameter in fp32); Muon: the
            # master copy and one momentum (8), on the weight matrices only (the embedding tables keep Adam's)
            # (no master copy where the optimizer updates the 16-bit weights in place: plan master_weights False)
            "opt_bytes": 4 * p.master_weights + (1 if p.optimizer == "muon" else 2) * BYTES[p.moment_dtype],
            "opt_bytes_emb": 4 * p.master_weights + 2 * BYTES[p.moment_dtype], "muon": float(p.optimizer == "muon"),
            "q_bytes": precision.get(p.dtype).q_bytes, "q_trans": precision.get(p.dtype).transpose_bytes,
            # the GEMM inputs saved for the weight gradient: quantized in the low-precision layers (where the stack
            # saves them so), 16-bit in the hp_frac kept in 16 bits
            "gin_bytes": ((1 - hp_frac) * precision.get(p.dtype).saved_bytes + hp_frac * act
                          if p.quantized_saves and low else act),
            "ep_dedup": float(p.ep_dispatcher != "alltoall"),
            "cp_a2a": float(p.cp_kind == "ulysses"),
            # the dispatch all-to-all's bytes per element: the recipe's quantized data with its scales under FP8
            # dispatch (DeepSeek-V3's 1 x 128 tiles: 1 + 4/128), else the activation dtype
            "disp_bytes": (precision.get(p.dtype).saved_bytes if p.fp8_dispatch and low else act),
            "mask_bytes": 1, "f32_bytes": 4}


def run_totals(step_time, n_gpus, tokens_per_step, board_power=None, *, tokens=None, steps=None, price=None) -> dict:
    """A run of ``tokens`` (or ``steps``) in SI floats (numbers or numpy arrays): whole optimizer steps (the last
    partial batch is a full step), tokens, seconds, run days, GPU-hours, energy (kWh, with the board power in W)
    and cost (USD, with a GPU-hour price). The one place run totals are computed (predict, search)."""
    n = np.asarray(steps, dtype=np.float64) if steps is not None else np.ceil(np.asarray(tokens) / tokens_per_step)
    seconds = (n * step_time)[()]
    gpu_h = seconds * n_gpus / HOUR
    return {"steps": n[()], "tokens": (n * tokens_per_step)[()], "seconds": seconds,
            "run_days": seconds / DAY, "gpu_hours": gpu_h,
            "energy_kwh": None if not board_power else gpu_h * board_power / KILO,    # W x h -> kWh
            "cost_usd": None if price is None else gpu_h * price}


def usable_memory(hw: Hardware, margin: float = 0.0) -> float:
    """Bytes a plan's tensors plus the reserve (CUDA context, NCCL buffers, allocator fragmentation:
    ``mem_reserve``) may use: capacity x (1 - margin). ``margin`` is a user's extra safety fraction."""
    return hw.hbm_capacity * (1.0 - margin)


def check_margin(margin: float) -> float:
    from ..base.errors import InputError
    if margin is None or not (isinstance(margin, (int, float)) and math.isfinite(margin) and 0 <= margin < 0.9):
        raise InputError(f"memory margin must be a fraction in [0, 0.9), got {margin!r}")
    return float(margin)


def fits(memory, reserve, hw: Hardware, margin: float = 0.0):
    """A plan fits when its tensors plus the reserve stay below the usable memory (scalars or arrays)."""
    return memory + reserve <= usable_memory(hw, margin)


def overshoot(memory, reserve, hws) -> "np.ndarray | float":
    """How far a plan's tensors plus the reserve exceed the usable memory, as a fraction of it (negative: headroom);
    ``hws`` one Hardware, or one per element of the ``memory`` / ``reserve`` arrays (bytes)."""
    usable = (usable_memory(hws) if isinstance(hws, Hardware)
              else np.array([usable_memory(h) for h in hws], dtype=float))
    return (memory + reserve) / usable - 1


def attention_inputs(m: Model, hw: Hardware) -> dict:
    """The attention kernel's speed over FlashAttention-2 on this GPU: the kind's own factor (config.FLASH_SPEED) times
    the architecture's for the kernel it runs there (the profile's attention_speed, e.g. cuDNN's on Hopper), at the
    kernel's query/key head width (MLA: qk_nope + qk_rope, not d_model / heads)."""
    return {"flash_speed": FLASH_SPEED.get(m.attention, 1.0)
            * hw.attention_factor(ATTENTION_KERNEL.get(m.attention), m.kernel_head_dim)}


def inputs(model: Model, plan: Plan, hw: Hardware) -> dict:
    if plan.offload_layers and hw.host_link is None:
        from ..base.errors import InputError
        raise InputError(f"plan.offload_layers ({plan.offload_layers}) needs the GPU-host copy bandwidth, and profile "
                         f"{hw.id} has no links.host")
    return {**model_inputs(model), **plan_inputs(plan, model), **hardware_inputs(hw, plan.dtype),
            **attention_inputs(model, hw)}


def value_at(expr, x: dict) -> float:
    """A formula expression (sympy; compute.op_time, an Op's FLOPs, ...) at the input values ``x`` (name -> number,
    as :func:`inputs` gives them): the diagnostics' way to price one operator without the compiled step. A symbol
    ``x`` has no value for is a KeyError naming it. sympy is imported here, off the CLI's path."""
    import sympy as sp

    e = sp.sympify(expr)
    free = sorted(e.free_symbols, key=str)
    missing = [str(s) for s in free if str(s) not in x]
    if missing:
        raise KeyError(f"no input value for {', '.join(missing)}")
    return float(sp.lambdify(free, e, "math")(*[x[str(s)] for s in free])) if free else float(e)


@functools.lru_cache(maxsize=16)
def cut(outputs: tuple) -> tuple:
    """The lines of ``_compiled.evaluate`` that ``outputs`` read: ([(target, expression), ...] in order, {output:
    expression}). The generated body is one ``name = expr`` per line and a ``return {'output': expr, ...}`` of one
    line per output; dead-code elimination keeps the assignments the outputs read, transitively."""
    import re
    from pathlib import Path

    text = Path(_compiled.__file__).read_text()
    body = text[text.index("def evaluate(x):"):text.index("\nSOURCE_DIGEST")].splitlines()
    ret = body.index("    return {")
    assigns = [tuple(s.strip() for s in ln.split(" = ", 1)) for ln in body[2:ret]]
    returned = dict(re.fullmatch(r"\s+'(\w+)': (.*),", ln).groups() for ln in body[ret + 1:] if ln.strip() != "}")
    unknown = [o for o in outputs if o not in returned]
    if unknown:
        raise KeyError(f"not an output of the compiled formulas: {', '.join(unknown)}")
    name = re.compile(r"\b[A-Za-z_]\w*\b")
    need = set().union(*(name.findall(returned[o]) for o in outputs))
    keep = []
    for target, expr in reversed(assigns):
        if target in need:
            keep.append((target, expr))
            need |= set(name.findall(expr))
    return tuple(keep[::-1]), {o: returned[o] for o in outputs}


@functools.lru_cache(maxsize=16)
def evaluator(outputs: tuple):
    """``_compiled.evaluate`` cut to ``outputs`` (:func:`cut`): the same straight-line numpy code with only the
    assignments those outputs read. The search prices millions of plans: the memory of a plan needs a sixth of the
    code, so it sizes every plan first and times only those that fit (views/space.evaluate_arrays, through
    model/factored.py); tests/test_search.py checks the cut function against the whole one."""
    lines, returned = cut(tuple(outputs))
    src = ("def evaluate(x):\n" + "\n".join(f"    {t} = {e}" for t, e in lines) + "\n    return {"
           + ", ".join(f"{o!r}: {e}" for o, e in returned.items()) + "}\n")
    scope = {"np": np}
    exec(_code(src, f"<roofline evaluator {','.join(outputs)}>"), scope)
    return scope["evaluate"]


def _code(src: str, filename: str):
    """``compile(src)``, its bytecode cached in the user's cache folder ($ROOFLINE_CACHE, else $XDG_CACHE_HOME/roofline
    or ~/.cache/roofline) under the source's hash and the interpreter's tag, as Python caches a module's: compiling
    the cut evaluators takes a tenth of a second at every search. A folder that cannot be written is skipped."""
    import contextlib
    import hashlib
    import marshal
    import os
    import sys
    from pathlib import Path

    try:
        root = os.environ.get("ROOFLINE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "roofline"
    except (RuntimeError, KeyError):                 # no home folder to be found: compile, cache nothing
        return compile(src, filename, "exec")
    name = hashlib.sha256(filename.encode()).hexdigest()[:12]          # which evaluator (its outputs)
    key = hashlib.sha256(f"{filename}\n{src}".encode()).hexdigest()[:32]
    path = Path(root) / f"evaluator-{name}-{key}.{sys.implementation.cache_tag}.marshal"
    # a missing or corrupt cache file is a cache miss; a folder that cannot be written keeps nothing
    with contextlib.suppress(OSError, ValueError, EOFError, TypeError):
        return marshal.loads(path.read_bytes())
    code = compile(src, filename, "exec")
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps(code))
        os.replace(tmp, path)
        for old in path.parent.glob(f"evaluator-{name}-*.marshal"):   # the same evaluator of older formulas
            if old != path:
                old.unlink(missing_ok=True)
    return code


def evaluate(x: dict) -> dict:
    """Vectorized core: every formula output for arrays of inputs (plain floats, SI units)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _compiled.evaluate(x)


@dataclass(frozen=True)
class Prediction(Result):
    """One prediction. Quantities are pint quantities; ``to_dict()`` gives plain SI numbers and their ``units``
    (the one result shape, roofline/base/results.py; ``quantity("step_time_s")`` reads one back with its unit)."""
    UNITS = {"step_time_s": "s", "breakdown_s": "s", "flops_per_step": "FLOP", "model_tflops_per_gpu": "TFLOP/s",
             "hardware_flops_per_step": "FLOP", "tokens_per_s": "1/s", "memory_per_gpu_bytes": "B",
             "memory_capacity_bytes": "B", "run_days": "day", "gpu_hours": "h", "cost": "USD", "energy_kwh": "kWh"}
    model: Model
    plan: Plan
    hardware: Hardware
    step_time: object
    breakdown: dict
    memory: dict
    memory_capacity: object
    fits_in_memory: bool
    flops_per_step: object
    hardware_flops_per_step: object
    mfu: float
    hfu: float
    tokens_per_s: object
    n_gpus: int
    micro_batches: int
    params: float
    bubble_fraction: float
    run: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict, repr=False)
    stack: str = ""                    # the training stack whose defaults were applied ('' for a raw Plan)
    mfu_megatron: float = float("nan")  # MFU as Megatron-LM counts model FLOPs (full s x s attention, padded vocabulary)

    def __repr__(self) -> str:
        """One line: what ran where and the headline figures (the fields: ``to_dict()``)."""
        p = self.plan
        fits = "" if self.fits_in_memory else ", does not fit"
        return (f"Prediction({self.model.name}, {self.n_gpus} x {self.hardware.id}, tp={p.tp} pp={p.pp} dp={p.dp} "
                f"cp={p.cp} ep={p.ep}, step_time={self.step_time.to('s').magnitude:.4g} s, mfu={self.mfu:.1%}, "
                f"memory={self.memory['total'].to('GiB').magnitude:.1f} GiB{fits})")

    @property
    def overflow(self) -> str | None:
        """Which memory part is largest when the plan does not fit, else None."""
        if self.fits_in_memory:
            return None
        part = max(MEMORY, key=lambda k: self.memory[k].magnitude)
        return part

    def to_dict(self) -> dict:
        """``si()`` with ``units`` after ``stack``, where ``--json`` has always printed it."""
        d = self.si()
        head = list(d)[:list(d).index("stack") + 1]
        return {**{k: d[k] for k in head}, "units": self.units(), **{k: d[k] for k in d if k not in head}}

    def items_by_key(self) -> dict:
        units = {"run_days": "day", "gpu_hours": "hour", "cost": "USD", "energy_kwh": "kWh"}

        def mag(q, unit=None):
            if not hasattr(q, "to"):
                return q
            return float(q.to(unit).magnitude) if unit else float(q.to_base_units().magnitude)
        d = {
            "step_time_s": mag(self.step_time),
            "breakdown_s": {k: mag(v) for k, v in self.breakdown.items()},
            "flops_per_step": mag(self.flops_per_step),
            "hardware_flops_per_step": mag(self.hardware_flops_per_step),
            "mfu": self.mfu, "hfu": self.hfu,
            "mfu_convention": "model FLOPs (matmuls, causal attention halved when the kernel skips masked blocks, "
                              "unpadded vocabulary, no recompute; as Megatron-Bridge/NeMo flop_utils count) / "
                              "(step time x GPUs x dense peak)",
            "mfu_megatron": self.mfu_megatron,
            "mfu_megatron_convention": "Megatron-LM's model FLOPs (training.py num_floating_point_operations; "
                                       "Narayanan et al. 2021 eq. 3): full s x s attention, padded vocabulary",
            "hfu_convention": "executed matmul FLOPs (with recompute and flash-attention backward recompute) / "
                              "(step time x GPUs x dense peak)",
            "tokens_per_s": mag(self.tokens_per_s),
            "model_tflops_per_gpu": mag(self.flops_per_step) / mag(self.step_time) / self.n_gpus / TERA,
            "memory_per_gpu_bytes": {k: mag(v) for k, v in self.memory.items()},
            "memory_capacity_bytes": mag(self.memory_capacity),
            "fits_in_memory": self.fits_in_memory,
            "n_gpus": self.n_gpus, "micro_batches": self.micro_batches, "params": self.params,
            "pp_bubble_fraction": self.bubble_fraction,
            "hardware": self.hardware.id, "hardware_calibrated": list(self.hardware.calibrated), "stack": self.stack,
        }
        if not self.fits_in_memory:
            d["memory_overflow"] = self.overflow
        d.update({k: mag(v, units.get(k)) for k, v in self.run.items()})
        return d


def predict(model, plan: Plan | None = None, hw: Hardware | None = None, *, tokens: float | None = None,
            steps: float | None = None, gpu_hour_price: float | None = None, memory_margin: float = 0.0) -> Prediction:
    """Predict one training step (and the whole run when ``tokens`` or ``steps`` is given).

    ``predict(spec)`` takes a :class:`roofline.spec.resolve.Spec` from :func:`roofline.spec.resolve.resolve` (the stack's
    defaults applied, as every command does); ``predict(model, plan, hw)`` takes the three literally.
    """
    from ..base.units import Q

    stack = ""
    if plan is None and hw is None and hasattr(model, "stack") and hasattr(model, "plan"):
        spec = model
        model, plan, hw, stack = spec.model, spec.plan, spec.hardware, spec.stack.id
    if plan is None or hw is None:
        from ..base.errors import InputError
        raise InputError("predict needs a Spec (roofline.resolve(...)) or a Model, a Plan and a Hardware")
    check(model, plan)
    r = {k: float(v) for k, v in evaluate(inputs(model, plan, hw)).items()}
    s = lambda v: Q(v, "s")
    breakdown = {k: s(r["t_" + k]) for k in BREAKDOWN}
    memory = {"weights": Q(r["mem_weights"], "B"), "gradients": Q(r["mem_gradients"], "B"),
              "optimizer": Q(r["mem_optimizer"], "B"), "activations": Q(r["mem_activations"], "B"),
              "total": Q(r["memory"], "B"), "reserve": Q(r["mem_reserve"], "B"),
              "headroom": Q(usable_memory(hw, check_margin(memory_margin)) - r["memory"] - r["mem_reserve"], "B")}
    run = {}
    if tokens is not None or steps is not None:
        from ..base.errors import InputError
        for name, v in (("tokens", tokens), ("steps", steps)):
            if v is not None and not (math.isfinite(v) and v > 0):
                raise InputError(f"{name} must be a positive finite number, got {v}")
        if gpu_hour_price is not None and not (math.isfinite(gpu_hour_price) and gpu_hour_price >= 0):
            raise InputError(f"gpu-hour-price must be a finite number >= 0, got {gpu_hour_price}")
        t = run_totals(r["step_time"], plan.n_gpus, plan.batch * model.seq_len, hw.board_power, tokens=tokens,
                       steps=steps, price=gpu_hour_price)
        run = {"steps": int(t["steps"]), "tokens": t["tokens"], "run_days": Q(t["seconds"], "s").to("day"),
               "gpu_hours": Q(t["gpu_hours"], "hour")}
        if t["energy_kwh"] is not None:
            run["energy_kwh"] = Q(t["energy_kwh"], "kWh")
        if t["cost_usd"] is not None:
            run["cost"] = Q(t["cost_usd"], "USD")
    return Prediction(
        model=model, plan=plan, hardware=hw, step_time=s(r["step_time"]), breakdown=breakdown, memory=memory,
        memory_capacity=Q(hw.hbm_capacity, "B"),
        fits_in_memory=bool(fits(r["memory"], r["mem_reserve"], hw, memory_margin)),
        flops_per_step=Q(r["flops"], "flop"), hardware_flops_per_step=Q(r["hardware_flops"], "flop"),
        mfu=r["mfu"], mfu_megatron=r["mfu_megatron"], hfu=r["hfu"], tokens_per_s=Q(r["tokens_per_s"], "1/s"), n_gpus=int(round(r["n_gpus"])),
        micro_batches=int(round(r["micro_batches"])), params=r["params"], bubble_fraction=r["pp_bubble_share"],
        run=run, raw=r, stack=stack)


def predict_config(config_or_path):
    """Prediction for a config: a path, a bundled example's name, a mapping with the config file's
    keys, or what :func:`roofline.spec.configfile.load_config` returned. The run (days, GPU-hours, cost) is included when the
    config has a ``training`` section."""
    from ..spec.configfile import resolve

    model, plan, hw, training = resolve(config_or_path)
    return predict(model, plan, hw, tokens=training.get("tokens"), steps=training.get("steps"),
                   gpu_hour_price=training.get("gpu_hour_price"))


def one_batch_time(config) -> float:
    """Seconds of one training step (one global batch) for a config; estimate-train-time's
    ``one_batch_predict`` returns the same quantity in microseconds."""
    return float(predict_config(config).raw["step_time"])
