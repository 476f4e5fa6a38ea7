"""Inputs of the model: architecture (:class:`Model`) and parallel plan (:class:`Plan`).

Plain frozen dataclasses, validated once at the edge (:func:`check`) with one-line messages.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .errors import InputError

MLPS = ("gelu", "swiglu", "squared_relu")
NORMS = ("layernorm", "rmsnorm")
RECOMPUTE = ("none", "selective", "full")
SCHEDULES = ("1f1b", "interleaved", "gpipe")
SHARDING = ("none", "distributed", "zero1", "zero2", "zero3", "fsdp")
DTYPES = ("bf16", "fp16", "fp32", "fp8")
ATTENTION = ("flash", "unfused")


@dataclass(frozen=True)
class Model:
    name: str = "custom"
    n_layers: int = 24
    d_model: int = 2048
    n_heads: int = 16
    n_kv_heads: int | None = None        # None: = n_heads (MHA)
    ffn_hidden: int | None = None        # None: 4 d_model (gelu) or Llama's 8/3 d rounded (swiglu)
    mlp: str = "gelu"
    norm: str = "layernorm"
    vocab: int = 50257
    seq_len: int = 2048
    tied_embeddings: bool = True
    position: str = "learned"           # learned | rope
    biases: bool = True
    dropout: bool = False
    n_experts: int = 1
    top_k: int = 1
    capacity_factor: float = 1.0
    attention: str = "flash"            # flash | unfused
    causal: bool = True                 # the kernel skips masked blocks (flash); FLOPs halved

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def ffn(self) -> int:
        if self.ffn_hidden:
            return self.ffn_hidden
        if self.mlp == "swiglu":   # LLaMA: 2/3 of 4h, rounded up to a multiple of 256
            return -(-int(8 * self.d_model / 3) // 256) * 256
        return 4 * self.d_model


@dataclass(frozen=True)
class Plan:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    micro_batch: int = 1
    global_batch: int | None = None     # None: micro_batch * dp (one micro-batch per step)
    interleave: int = 1
    schedule: str = "1f1b"              # 1f1b | interleaved (interleave > 1) | gpipe
    sequence_parallel: bool = False
    recompute: str = "none"
    sharding: str = "none"              # none | distributed (= zero1) | zero2 | zero3 | fsdp
    dtype: str = "bf16"
    grad_dtype: str = "fp32"            # gradient buffer and reduce dtype (Megatron main_grad)
    overlap_grad_reduce: float = 0.0    # fraction of the DP reduce hidden behind backward
    overlap_param_gather: float = 0.0   # fraction of parameter all-gathers hidden behind forward
    overlap_tp: float = 0.0             # fraction of TP/SP comm hidden behind GEMMs
    overlap_pp: float = 0.0             # fraction of PP send/recv hidden
    overlap_cp: float = 1.0             # ring attention overlaps KV exchange with attention (default on)
    uneven_stages: bool = False         # allow layers not divisible by pp x interleave (heaviest stage rounds up)

    @property
    def n_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def batch(self) -> int:
        return self.global_batch or self.micro_batch * self.dp

    @property
    def zero_stage(self) -> int:
        return {"none": 0, "distributed": 1, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}[self.sharding]


def replace(obj, **changes):
    """dataclasses.replace that ignores None values (unset CLI flags)."""
    return dataclasses.replace(obj, **{k: v for k, v in changes.items() if v is not None})


def _positive(what: str, value) -> None:
    if value is None or isinstance(value, bool) or not value > 0:
        raise InputError(f"{what} must be a positive number, got {value!r}")


def _choice(what: str, value, options) -> None:
    if value not in options:
        raise InputError(f"{what} must be one of {', '.join(options)}, got {value!r}")


def check(model: Model, plan: Plan) -> None:
    """Validate the pair; raise InputError naming the violated constraint and the values."""
    for name in ("n_layers", "d_model", "n_heads", "vocab", "seq_len", "n_experts", "top_k", "capacity_factor"):
        _positive(f"model.{name}", getattr(model, name))
    for name in ("n_kv_heads", "ffn_hidden"):
        if getattr(model, name) is not None:
            _positive(f"model.{name}", getattr(model, name))
    for name in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "interleave"):
        v = getattr(plan, name)
        _positive(f"plan.{name}", v)
        if int(v) != v:
            raise InputError(f"plan.{name} must be an integer, got {v!r}")
    if plan.global_batch is not None:
        _positive("plan.global_batch", plan.global_batch)
    _choice("mlp", model.mlp, MLPS)
    _choice("norm", model.norm, NORMS)
    _choice("attention", model.attention, ATTENTION)
    _choice("recompute", plan.recompute, RECOMPUTE)
    _choice("schedule", plan.schedule, SCHEDULES)
    _choice("sharding", plan.sharding, SHARDING)
    _choice("dtype", plan.dtype, DTYPES)
    _choice("grad_dtype", plan.grad_dtype, ("fp32", "bf16", "fp16"))
    for name in ("overlap_grad_reduce", "overlap_param_gather", "overlap_tp", "overlap_pp", "overlap_cp"):
        v = getattr(plan, name)
        if not 0 <= v <= 1:
            raise InputError(f"plan.{name} must be a fraction in [0, 1], got {v!r}")
    if model.d_model % model.n_heads:
        raise InputError(f"d_model ({model.d_model}) must be divisible by heads ({model.n_heads})")
    if model.n_heads % model.kv_heads:
        raise InputError(f"heads ({model.n_heads}) must be divisible by kv-heads ({model.kv_heads})")
    if model.n_heads % plan.tp:
        raise InputError(f"heads ({model.n_heads}) must be divisible by tp ({plan.tp})")
    if model.kv_heads % plan.tp and plan.tp % model.kv_heads:
        raise InputError(f"kv-heads ({model.kv_heads}) must be divisible by tp ({plan.tp}) (or tp by kv-heads)")
    if model.ffn % plan.tp:
        raise InputError(f"ffn-hidden ({model.ffn}) must be divisible by tp ({plan.tp})")
    if model.n_layers < plan.pp * plan.interleave:
        raise InputError(f"layers ({model.n_layers}) must be at least pp x interleave "
                         f"({plan.pp} x {plan.interleave} = {plan.pp * plan.interleave})")
    if model.n_layers % (plan.pp * plan.interleave) and not plan.uneven_stages:
        raise InputError(f"layers ({model.n_layers}) must be divisible by pp x interleave "
                         f"({plan.pp} x {plan.interleave} = {plan.pp * plan.interleave}); "
                         "allow uneven stages with --uneven-stages")
    if plan.interleave > 1 and plan.schedule == "gpipe":
        raise InputError("interleave > 1 needs the interleaved 1F1B schedule, not gpipe")
    if model.seq_len % plan.cp:
        raise InputError(f"seq-len ({model.seq_len}) must be divisible by cp ({plan.cp})")
    if plan.dp % plan.ep:
        raise InputError(f"ep ({plan.ep}) must divide dp ({plan.dp}) (experts are parallel across DP ranks)")
    if model.n_experts % plan.ep:
        raise InputError(f"experts ({model.n_experts}) must be divisible by ep ({plan.ep})")
    if model.top_k > model.n_experts:
        raise InputError(f"top-k ({model.top_k}) cannot exceed experts ({model.n_experts})")
    per = plan.micro_batch * plan.dp
    if plan.batch % per:
        raise InputError(f"global batch ({plan.batch}) must be divisible by micro-batch x dp "
                         f"({plan.micro_batch} x {plan.dp} = {per})")
    if plan.interleave > 1 and plan.pp == 1:
        raise InputError(f"interleave ({plan.interleave}) needs pp > 1")
    if plan.interleave > 1 and (plan.batch // per) % plan.pp:
        raise InputError(f"interleaved 1F1B needs micro-batches ({plan.batch // per}) divisible by pp ({plan.pp})")
