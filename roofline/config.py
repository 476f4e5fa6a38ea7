"""Inputs of the model: architecture (:class:`Model`) and parallel plan (:class:`Plan`).

Plain frozen dataclasses, validated once at the edge (:func:`check`) with one-line messages.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .errors import InputError
from .precision import NAMES as PRECISION_NAMES

MLPS = ("gelu", "swiglu", "squared_relu")
NORMS = ("layernorm", "rmsnorm")
RECOMPUTE = ("none", "selective", "full")
SCHEDULES = ("1f1b", "interleaved", "gpipe")
SHARDING = ("none", "distributed", "zero1", "zero2", "zero3", "fsdp")
DTYPES = PRECISION_NAMES                # roofline/precision.py: bf16, fp16, fp32 and the FP8/FP4 recipes
ATTENTION = ("flash", "unfused")
# MoE token dispatchers: NCCL all-to-all (Megatron-Core --moe-token-dispatcher-type alltoall), or the flex dispatcher's
# node-deduplicating backends (--moe-flex-dispatcher-backend deepep | hybridep; formulas/comm.py dispatch_a2a)
DISPATCHERS = ("alltoall", "deepep", "hybridep")


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
    head_dim: int | None = None          # None: d_model / n_heads (Qwen3, GPT-OSS: kv_channels set apart from it)
    moe_ffn_hidden: int | None = None    # MLP inner size of one routed expert; None: = ffn (dense-MLP size)
    n_shared_experts: int | None = None  # shared experts every token passes through (DeepSeek); None: none
    shared_ffn_hidden: int | None = None  # total inner size of the shared experts (Megatron-Core
    #                                      moe_shared_expert_intermediate_size); None: n_shared x moe_ffn_hidden
    first_dense_layers: int | None = None  # leading layers with a dense MLP of ffn (DeepSeek-V3: 3); None: 0
    # MLA (DeepSeek-V2/V3, Kimi K2), names of the HF config.json / Megatron-Core MLATransformerConfig: kv_lora_rank
    # set = MLA (then the three head widths are required); q_lora_rank None = queries projected from h directly
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None  # Megatron-Core qk_head_dim
    qk_rope_head_dim: int | None = None  # Megatron-Core qk_pos_emb_head_dim
    v_head_dim: int | None = None
    # sliding-window attention (Megatron-Core window_size / window_attn_skip_freq; HF sliding_window): a window of
    # swa_window keys per query (itself included); every swa_every-th layer (1-based) keeps full attention, the
    # others are windowed (Megatron-Core is_layer_window_attention); swa_every None: every layer windowed (Mistral 7B)
    swa_window: int | None = None
    swa_every: int | None = None
    # multi-token-prediction layers on the last pipeline stage (DeepSeek-V3 report sec 2.2; Megatron-Core
    # --mtp-num-layers, transformer/multi_token_prediction.py); None or 0: none
    mtp_layers: int | None = None
    attention: str = "flash"            # flash | unfused
    causal: bool = True                 # the kernel skips masked blocks (flash); FLOPs halved

    def __post_init__(self):
        _types(self, "model")

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def head_size(self) -> int:
        """Width of one attention head (Megatron-Core kv_channels; d_model / heads unless stated)."""
        return self.head_dim or self.d_model // self.n_heads

    @property
    def expert_ffn(self) -> int:
        """Inner size of one routed expert (Megatron-Core moe_ffn_hidden_size; the dense ffn unless stated)."""
        return self.moe_ffn_hidden or self.ffn

    @property
    def shared_ffn(self) -> int:
        """Total inner size of the shared experts (0 without): Megatron-Core runs them as one MLP of
        moe_shared_expert_intermediate_size (megatron/core/transformer/moe/shared_experts.py)."""
        if self.n_experts <= 1:
            return 0
        if self.shared_ffn_hidden:
            return self.shared_ffn_hidden
        return (self.n_shared_experts or 0) * self.expert_ffn

    @property
    def dense_layers(self) -> int:
        """Leading layers with a dense MLP (Megatron-Core moe_layer_freq = [0]*k + [1]*(l-k)); 0 for a dense model."""
        return (self.first_dense_layers or 0) if self.n_experts > 1 else 0

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3): kv_lora_rank is set."""
        return bool(self.kv_lora_rank)

    @property
    def windowed_layers(self) -> int:
        """Layers with sliding-window attention: Megatron-Core transformer/utils.py is_layer_window_attention windows
        layer n (1-based) unless n % window_attn_skip_freq == 0, so l - floor(l / swa_every) of them (all without
        swa_every; none without swa_window)."""
        if not self.swa_window:
            return 0
        return self.n_layers - (self.n_layers // self.swa_every if self.swa_every else 0)

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
    ep_dispatcher: str = "alltoall"     # alltoall (NCCL) | deepep | hybridep (node-deduplicating, Megatron-Core flex)
    etp: int | None = None              # expert tensor parallelism; None: = tp (Megatron-Core --expert-tensor-parallel-size default)
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
    overlap_ep: float = 0.0             # fraction of the MoE all-to-all hidden (Megatron-Core --overlap-moe-expert-parallel-comm, default off)
    overlap_pp: float = 0.0             # fraction of PP send/recv hidden
    overlap_cp: float = 1.0             # ring attention overlaps KV exchange with attention (default on)
    uneven_stages: bool = False         # allow layers not divisible by pp x interleave (heaviest stage rounds up)

    def __post_init__(self):
        _types(self, "plan")

    @property
    def n_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def batch(self) -> int:
        return self.global_batch or self.micro_batch * self.dp

    @property
    def zero_stage(self) -> int:
        return {"none": 0, "distributed": 1, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}[self.sharding]


def _types(obj, where: str) -> None:
    """Each field of a Model/Plan has its declared type (int, float, bool, str; None where optional), else one
    InputError naming the field and the value: ``Model(n_layers="24")``, ``Plan(sequence_parallel="no")``.
    Ranges and the rules between fields are :func:`check`'s. Integral floats (2.0) are accepted as integers."""
    from . import schema as S

    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        t = str(f.type)
        if v is None and "None" in t:
            continue
        w = f"{where}.{f.name}"
        base = t.split("|")[0].strip()
        if base == "bool":
            if not isinstance(v, bool):
                try:
                    import numpy as np
                    if isinstance(v, np.bool_):
                        continue
                except ImportError:  # pragma: no cover
                    pass
                S.boolean(v, w)
        elif base == "int":
            S.number(v, w, int)
        elif base == "float":
            S.number(v, w, float)
        elif base == "str":
            S.text(v, w)


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
    for name in ("n_kv_heads", "ffn_hidden", "head_dim", "moe_ffn_hidden", "shared_ffn_hidden"):
        if getattr(model, name) is not None:
            _positive(f"model.{name}", getattr(model, name))
    for name in ("n_shared_experts", "first_dense_layers", "mtp_layers"):     # 0 = none
        v = getattr(model, name)
        if v is not None and not v >= 0:
            raise InputError(f"model.{name} must be a count >= 0, got {v!r}")
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
    _choice("ep_dispatcher", plan.ep_dispatcher, DISPATCHERS)
    _choice("grad_dtype", plan.grad_dtype, ("fp32", "bf16", "fp16"))
    for name in ("overlap_grad_reduce", "overlap_param_gather", "overlap_tp", "overlap_pp", "overlap_cp", "overlap_ep"):
        v = getattr(plan, name)
        if not 0 <= v <= 1:
            raise InputError(f"plan.{name} must be a fraction in [0, 1], got {v!r}")
    if model.head_dim is None and model.d_model % model.n_heads:
        raise InputError(f"d_model ({model.d_model}) must be divisible by heads ({model.n_heads}) "
                         "(or state head_dim)")
    _check_attention(model)
    if model.n_heads % model.kv_heads:
        raise InputError(f"heads ({model.n_heads}) must be divisible by kv-heads ({model.kv_heads})")
    if model.n_heads % plan.tp:
        raise InputError(f"heads ({model.n_heads}) must be divisible by tp ({plan.tp})")
    if model.kv_heads % plan.tp and plan.tp % model.kv_heads:
        raise InputError(f"kv-heads ({model.kv_heads}) must be divisible by tp ({plan.tp}) (or tp by kv-heads)")
    # Megatron-Core splits the dense MLP, each expert (expert TP = tp) and the shared experts column/row-wise
    if (model.n_experts == 1 or model.dense_layers) and model.ffn % plan.tp:
        raise InputError(f"ffn-hidden ({model.ffn}) must be divisible by tp ({plan.tp})")
    if model.n_experts > 1 and model.expert_ffn % (plan.etp if plan.etp is not None else plan.tp):
        raise InputError(f"moe-ffn-hidden ({model.expert_ffn}) must be divisible by etp "
                         f"({plan.etp if plan.etp is not None else plan.tp})")
    if model.shared_ffn % plan.tp:
        raise InputError(f"shared-ffn-hidden ({model.shared_ffn}) must be divisible by tp ({plan.tp})")
    if model.dense_layers >= model.n_layers:
        raise InputError(f"first-dense-layers ({model.dense_layers}) must be fewer than layers ({model.n_layers})")
    # uneven stages: the embedding and the loss may each take a virtual stage's place (Megatron-Core
    # account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split, transformer_config.py; Megatron-Bridge
    # sets both for Llama 3.1 405B: 126 layers + 2 = 16 x 8 virtual stages)
    edge_slots = 2 if plan.uneven_stages and plan.pp > 1 else 0
    if model.n_layers + edge_slots < plan.pp * plan.interleave:
        raise InputError(f"layers ({model.n_layers}) must be at least pp x interleave "
                         f"({plan.pp} x {plan.interleave} = {plan.pp * plan.interleave})"
                         + (" less the 2 stages embedding and loss may fill" if edge_slots else ""))
    if model.n_layers % (plan.pp * plan.interleave) and not plan.uneven_stages:
        raise InputError(f"layers ({model.n_layers}) must be divisible by pp x interleave "
                         f"({plan.pp} x {plan.interleave} = {plan.pp * plan.interleave}); "
                         "allow uneven stages with --uneven-stages")
    if plan.interleave > 1 and plan.schedule == "gpipe":
        raise InputError("interleave > 1 needs the interleaved 1F1B schedule, not gpipe")
    if model.seq_len % plan.cp:
        raise InputError(f"seq-len ({model.seq_len}) must be divisible by cp ({plan.cp})")
    etp = plan.etp if plan.etp is not None else plan.tp
    if model.n_experts == 1 and etp != plan.tp:
        raise InputError(f"etp ({etp}) applies to routed experts only: a dense model splits its MLP over tp ({plan.tp})")
    folded = plan.tp * plan.cp * plan.dp
    if folded % (plan.ep * etp):
        raise InputError(f"ep x etp ({plan.ep} x {etp}) must divide tp x cp x dp ({plan.tp} x {plan.cp} x {plan.dp} = "
                         f"{folded}) (Megatron-Core expert grid: world = pp x etp x ep x expert-dp)")
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


def _check_attention(model: Model) -> None:
    """The attention variants' fields: MLA's ranks and head widths together, sliding-window sizes."""
    fields = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "swa_window",
           "swa_every")
    for name in fields:
        if getattr(model, name) is not None:
            _positive(f"model.{name}", getattr(model, name))
    if model.kv_lora_rank:
        missing = [n for n in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim") if getattr(model, n) is None]
        if missing:
            raise InputError(f"MLA (kv_lora_rank = {model.kv_lora_rank}) needs {', '.join(missing)}")
        if model.n_kv_heads is not None and model.n_kv_heads != model.n_heads:
            raise InputError(f"MLA has one key/value per head: kv-heads ({model.n_kv_heads}) must equal heads "
                             f"({model.n_heads}) or be unset")
    else:
        given = [n for n in fields[:5] if getattr(model, n) is not None and n != "kv_lora_rank"]
        if given:
            raise InputError(f"{', '.join(given)} given without kv_lora_rank (MLA needs its KV compression rank)")
    if model.swa_every is not None and model.swa_window is None:
        raise InputError(f"swa_every ({model.swa_every}) given without swa_window")
