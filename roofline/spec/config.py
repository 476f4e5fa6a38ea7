"""Inputs of the model: architecture (:class:`Model`) and parallel plan (:class:`Plan`).

Plain frozen dataclasses, validated once at the edge (:func:`check`) with one-line messages.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..base.errors import InputError
# what selective recomputation may recompute and what per-layer CUDA graphs may capture (Megatron-Core's names)
from ..base.normalize import GRAPH_MODULES, RECOMPUTE_MODULES
from ..base.precision import NAMES as PRECISION_NAMES
from ..base.precision import low_precision as _low_precision

# The named choices of a Model/Plan, defined here once: cliargs (flag choices), search (its knobs) and the
# rules below import them.
MLPS = ("gelu", "swiglu", "squared_relu")
NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rope", "alibi", "none")   # alibi: no table, no rotation (a bias inside the attention kernel);
# none: no position encoding at all (Megatron-Core position_embedding_type "none"; the hybrid Mamba models)
ATTENTION = ("flash", "flash-triton", "flash-v1", "flash3", "te", "cudnn", "unfused")
# the attention kinds with an FP8 kernel: Transformer Engine's FusedAttention (cuDNN), which fp8_dpa runs
# (transformer_engine/pytorch/attention/dot_product_attention: FlashAttention and the unfused path are disabled in FP8)
FP8_ATTENTION_KERNELS = ("te", "cudnn")
LOW_PRECISION_DTYPES = tuple(n for n in PRECISION_NAMES if _low_precision(n))   # the FP8 / FP4 recipes
# The flash-attention kernels' throughput relative to FlashAttention-2, the kernel the profiles' attention curves were
# fitted on (docs/calibration.md). Dao 2023, "FlashAttention-2" (arXiv 2307.08691) sec. 4.1, A100 forward + backward
# over head dims 64/128, causal or not, sequence 512-16k: FlashAttention-2 is 1.3-2.5x faster than FlashAttention in
# Triton (flash_attn/flash_attn_triton.py, what llm-foundry's attn_impl: triton ran) and 1.7-3.0x faster than
# FlashAttention (v1, CUDA). Each range's geometric mean, one factor for forward and backward.
# "cudnn": cuDNN's fused flash attention (Transformer Engine FusedAttention, sub-backend F16_arbitrary_seqlen); "te":
# Transformer Engine's DotProductAttention, which runs cuDNN's kernel on sm90+ and FlashAttention-2 on Ampere
# (transformer_engine/pytorch/attention/dot_product_attention/utils.py get_attention_backend: "Disabling FlashAttention
# to give FusedAttention preference on Hopper+ for performance reasons"). Their speed over FlashAttention-2 depends on
# the GPU's architecture: the profile's attention_speed.cudnn (Hardware.attention_factor), 1 where a profile has none.
# "flash3": FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608; flash_attn_interface, Hopper only), its speed the
# profile's attention_speed.flash3.
FLASH_SPEED = {"flash": 1.0, "flash-triton": 1 / (1.3 * 2.5) ** 0.5, "flash-v1": 1 / (1.7 * 3.0) ** 0.5,
               "flash3": 1.0, "te": 1.0, "cudnn": 1.0}
# the kernel whose architecture-dependent speed each attention kind takes from the profile (attention_speed)
ATTENTION_KERNEL = {"te": "cudnn", "cudnn": "cudnn", "flash3": "flash3"}
# index = the formulas' recompute code (predict.layout_inputs). "op": torchtitan's op-level selective checkpointing
# (activation_checkpoint.selective_ac_option = "op", the default of its llama3 train_configs/*.toml): each block saves
# its input, the SDPA outputs and every other matmul output and recomputes the rest (formulas/memory.py op_stored)
RECOMPUTE = ("none", "selective", "full", "op")
# pipeline schedules: 1F1B (PipeDream-Flush), interleaved 1F1B (v > 1), GPipe, and DualPipeV, DeepSeek's V-shaped
# "cut-in-half" DualPipe (deepseek-ai/DualPipe dualpipe/dualpipev.py; torch.distributed.pipelining ScheduleDualPipeV,
# torchtitan parallelism.pipeline_parallel_schedule = "DualPipeV"): two model chunks per rank in a V (rank 0 holds the
# first and the last), forward and backward chunks of different micro-batches paired (formulas/pipeline.py); and
# DualPipe, the bidirectional original (deepseek-ai/DualPipe dualpipe/dualpipe.py; DeepSeek-V3 report sec 3.2.1):
# each rank holds two stages, i and p-1-i, and half the micro-batches enter at each end
# each rank holds two stages, i and p-1-i, and half the micro-batches enter at each end; and the zero-bubble ZB1P and
# ZB2P (Qi et al. 2024, arXiv:2401.10241; sail-sg/zero-bubble-pipeline-parallelism --enable-zero-bubble, pending
# backwards p or 2p): the weight gradients deferred into the bubble, one stage per rank (formulas/pipeline.py)
SCHEDULES = ("1f1b", "interleaved", "gpipe", "dualpipev", "dualpipe", "zb1p", "zb2p")
DTYPES = PRECISION_NAMES                # roofline/base/precision.py: bf16, fp16, fp32 and the FP8/FP4 recipes
# MoE token dispatchers: NCCL all-to-all (Megatron-Core --moe-token-dispatcher-type alltoall), or the flex dispatcher's
# deduplicating backends, once per destination rank and node (--moe-flex-dispatcher-backend deepep | hybridep;
# formulas/comm.py dispatch_a2a)
DISPATCHERS = ("alltoall", "deepep", "hybridep")
# context parallelism: ring attention (Megatron-Core / Transformer Engine, torch context_parallel: K and V chunks passed
# around the group beside the attention kernels) or DeepSpeed-Ulysses (deepspeed/sequence/layer.py DistributedAttention,
# Megatron-DeepSpeed --ds-sequence-parallel-size, XTuner sequence_parallel_size: all-to-alls of the heads; formulas/step.py
# cp_pass)
CP_KINDS = ("ring", "ulysses")
# the loss over the vocabulary: "fused", Megatron's vocab-parallel cross entropy (tensor_parallel/cross_entropy.py:
# bf16 logits + one fp32 exp copy, gradient computed in place); "eager", torch F.cross_entropy on fp32-upcast logits
# (torchtitan components/loss.py cross_entropy_loss): log-softmax output saved in fp32, its backward holding two
# more fp32 copies (the NLL gradient and the log-softmax gradient); "compiled", the same F.cross_entropy under
# torch.compile (torchtitan components/loss.py build_cross_entropy_loss with training.compile, since 2025-04): the
# upcast, log-softmax and its gradient fuse into kernels that keep the 16-bit logits and write a 16-bit gradient
LOSS_KERNELS = ("fused", "eager", "compiled")
# CUDA graphs (Megatron-Core transformer_config.py cuda_graph_impl / cuda_graph_modules): none (eager, the default
# "none"); layers (per-layer graphs whose modules cover the whole layer: 'local' or 'transformer_engine' with
# cuda_graph_modules empty, or listing every module kind the layer has); full (cuda_graph_impl 'full_iteration')
CUDA_GRAPHS = ("none", "layers", "full")
GRAD_DTYPES = ("fp32", "bf16", "fp16")
# Adam's two moments (Megatron-Core --exp-avg-dtype / --exp-avg-sq-dtype with --use-precision-aware-optimizer,
# optimizer_config.py; default fp32); the fp32 master copy stays (main_params_dtype fp32 in every recipe read here)
MOMENT_DTYPES = ("fp32", "bf16", "fp16")
# The optimizer of the weight matrices (Megatron-Core optimizer_config.py ``optimizer``: adam, or muon = Newton-Schulz
# orthogonalized momentum, emerging_optimizers.py; the embedding and output tables stay on Adam)
OPTIMIZERS = ("adam", "muon")
# Sharding over dp. Every accepted name has its ZeRO stage (Rajbhandari et al. 2020): distributed = Megatron's
# distributed optimizer (--use-distributed-optimizer) = ZeRO-1; fsdp = FULL_SHARD = ZeRO-3.
ZERO_STAGE = {"none": 0, "distributed": 1, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}
SHARDING = tuple(ZERO_STAGE)
# The one name of each field is its dataclass field's: the formula input (``--set n_layers=96``), the validation
# CSV column and the YAML key say it the same way. These other spellings are accepted on input only: YAML keys,
# ``spec.resolve(**fields)``, and the CLI's short flags (``--layers`` for ``--n-layers``, the brief's spelling).
MODEL_ALIASES = {"layers": "n_layers", "heads": "n_heads", "kv_heads": "n_kv_heads", "experts": "n_experts",
                 "capacity": "capacity_factor", "tied": "tied_embeddings"}
PLAN_ALIASES = {"v": "interleave", "vp": "interleave", "mb": "micro_batch", "gb": "global_batch", "zero": "sharding",
                "precision": "dtype", "seq_parallel": "sequence_parallel"}
ALIASES = {**MODEL_ALIASES, **PLAN_ALIASES}


# The one name of each stage (index = stage): what search lists and what ``--zero N`` means.
SHARDING_BY_STAGE = ("none", "distributed", "zero2", "zero3")


def stage_name(sharding: str) -> str:
    """The one name of a sharding's ZeRO stage: zero1 -> distributed, fsdp -> zero3 (an unknown name: itself)."""
    return SHARDING_BY_STAGE[ZERO_STAGE[sharding]] if sharding in ZERO_STAGE else sharding


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
    # LatentMoE (Nemotron 3 Super/Ultra; Megatron-Core TransformerConfig moe_latent_size): the routed experts read and
    # write an l-wide projection of h (fc1_latent_proj / fc2_latent_proj around the dispatch); None: h
    moe_latent_size: int | None = None
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
    # QK-norm: a norm over each head's query and key after the QKV projection (Qwen3, OLMo 2, Llama 4; Megatron-Core
    # qk_layernorm / qk_l2_norm, transformer/attention.py SelfAttention.get_query_key_value_tensors q_layernorm and
    # k_layernorm); MLA models already price the norms of their latents (mla_q_norm, mla_kv_norm)
    qk_norm: bool = False
    # multi-token-prediction layers on the last pipeline stage (DeepSeek-V3 report sec 2.2; Megatron-Core
    # --mtp-num-layers, transformer/multi_token_prediction.py); None or 0: none
    mtp_layers: int | None = None
    attention: str = "flash"            # flash (FlashAttention-2 class) | flash-triton | flash-v1 | flash3 | te | cudnn | unfused
    causal: bool = True                 # the kernel skips masked blocks (flash); FLOPs halved
    # hybrid Mamba-2 models (Megatron-Core --hybrid-override-pattern, megatron/core/ssm/mamba_hybrid_layer_allocation.py):
    # one character per layer, M = Mamba-2 mixer, * = self-attention, - = dense MLP, E = MoE ('|' pipeline-stage
    # separators are ignored); None: every layer a transformer layer (attention + MLP/MoE)
    hybrid_pattern: str | None = None
    # Mamba-2 mixer sizes (Megatron-Core TransformerConfig mamba_*; MambaMixer d_conv / expand / chunk_size); None:
    # the Megatron-Core defaults (transformer_config.py: head_dim 64, state 128, groups 8; mamba_mixer.py: d_conv 4,
    # expand 2, chunk_size 128; heads = expand d_model / head_dim when unset)
    mamba_num_heads: int | None = None
    mamba_head_dim: int | None = None
    mamba_state_dim: int | None = None
    mamba_num_groups: int | None = None
    mamba_d_conv: int | None = None
    mamba_expand: int | None = None
    mamba_chunk_size: int | None = None

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
    def kernel_head_dim(self) -> int:
        """Query/key width per head of the attention kernel: MLA's qk_nope + qk_rope (DeepSeek-V3: 128 + 64 = 192,
        Megatron-Core MLASelfAttention hands the core attention queries and keys of that width), else head_size."""
        if self.mla and self.qk_nope_head_dim and self.qk_rope_head_dim:
            return self.qk_nope_head_dim + self.qk_rope_head_dim
        return self.head_size

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
    def layer_counts(self) -> dict:
        """Layers of each kind of the hybrid pattern: {"M": Mamba, "*": attention, "-": dense MLP, "E": MoE}; a model
        without a pattern: every layer attention + MLP (its MoE when n_experts > 1)."""
        if not self.hybrid_pattern:
            mlp = "E" if self.n_experts > 1 else "-"
            return {"M": 0, "*": self.n_layers, "-": self.n_layers if mlp == "-" else 0,
                    "E": self.n_layers if mlp == "E" else 0}
        pat = self.hybrid_pattern.replace("|", "")
        return {c: pat.count(c) for c in "M*-E"}

    @property
    def mamba(self) -> dict:
        """The Mamba-2 mixer's sizes with Megatron-Core's defaults (see the fields)."""
        p = self.mamba_head_dim or 64
        expand = self.mamba_expand or 2
        heads = self.mamba_num_heads or (expand * self.d_model) // p
        return {"heads": heads, "head_dim": p, "state": self.mamba_state_dim or 128,
                "groups": self.mamba_num_groups or 8, "d_conv": self.mamba_d_conv or 4,
                "chunk": self.mamba_chunk_size or 128}

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
    ep_dispatcher: str = "alltoall"     # alltoall (NCCL) | deepep | hybridep (deduplicating, Megatron-Core flex)
    etp: int | None = None              # expert tensor parallelism; None: = tp (Megatron-Core --expert-tensor-parallel-size default)
    micro_batch: int = 1
    global_batch: int | None = None     # None: micro_batch * dp (one micro-batch per step)
    interleave: int = 1
    schedule: str = "1f1b"              # 1f1b | interleaved (interleave > 1) | gpipe | dualpipev (interleave 2) | dualpipe | zb1p | zb2p
    sequence_parallel: bool = False
    recompute: str = "none"
    sharding: str = "none"              # none | distributed (= zero1) | zero2 | zero3 | fsdp
    dtype: str = "bf16"
    grad_dtype: str = "fp32"            # gradient buffer and reduce dtype (Megatron main_grad)
    moment_dtype: str = "fp32"          # Adam's moments (MOMENT_DTYPES): bf16 with Megatron-Core's precision-aware optimizer
    # an fp32 master copy of the weights in the optimizer state (mixed precision, every stack but one); False: the
    # optimizer updates the 16-bit weights in place and keeps no copy ("pure bf16": torchtune's dtype bf16)
    master_weights: bool = True
    optimizer: str = "adam"             # OPTIMIZERS: adam, or muon (its one momentum in moment_dtype)
    overlap_grad_reduce: float = 0.0    # fraction of the DP reduce hidden behind backward
    overlap_param_gather: float = 0.0   # fraction of parameter all-gathers hidden behind forward
    overlap_tp: float = 0.0             # fraction of TP/SP comm hidden behind GEMMs
    # the TP backward's dgrad all-reduce / reduce-scatter async beside the wgrad GEMM, and under SP the input re-gather
    # beside the dgrad GEMM (Megatron-LM megatron/core/tensor_parallel/layers.py
    # LinearWithGradAccumulationAndAsyncCommunication; on by default in Megatron-Core, the default stack); False: the
    # backward's collectives mirror the forward's and run synchronously (per stack: stacks/*.yaml tp_async_dgrad)
    tp_async_dgrad: bool = True
    # the TP overlap (overlap_tp) pipelines a reduce-scatter only when one GEMM produces its input: torch's micro-pipeline
    # TP (torch/_inductor/fx_passes/micro_pipeline_tp.py) on models whose q, k, v and gate, up projections are modules
    # of their own leaves the backward reduce-scatter of their summed input gradients exposed (formulas/step.py layer);
    # False: every TP collective is pipelined (Transformer Engine userbuffers). Per stack: stacks/*.yaml
    tp_overlap_split_rs: bool = False
    # the routed experts' GEMMs, and the recipe's casts of their operands, launch one local expert at a time: Transformer
    # Engine's GroupedLinear (Megatron-Core TEGroupedMLP; common/gemm/cublaslt_gemm.cu multi_stream_cublas_gemm, one
    # cublasLt call per expert; csrc/extensions/cast.cpp split_quantize), each launch host time and a GEMM's fixed time
    # (formulas/step.py expert_launches, compute.gemm); False: one grouped kernel for all local experts
    # (torch._grouped_mm, grouped_gemm's gmm, a fused grouped MLP). Per stack: stacks/*.yaml
    per_expert_kernels: bool = True
    # a fused grouped MLP for the routed experts: the first GEMM's epilogue applies the gated activation and writes the
    # second GEMM's quantized input, the second GEMM's data gradient applies the activation's backward and quantizes the
    # first's output gradient (Transformer Engine ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8 / BackwardGroupedMLP_CuTeGEMM
    # DSwiGLU_MXFP8, TransformerEngine#2769; transformer_engine/pytorch/ops/fused/grouped_mlp.py, MXFP8 and NVFP4 on
    # Blackwell; Megatron-Bridge 26.06's "CuteDSL fused grouped MLP", Megatron-Core's TE op fuser; cuDNN's grouped MLP,
    # torchtitan#4257): formulas/compute.py layer_ops. One kernel per GEMM, so per_expert_kernels False
    fused_moe_mlp: bool = False
    # the attention core in FP8: Megatron-Core --fp8-dot-product-attention (model_parallel_config.py
    # fp8_dot_product_attention), Transformer Engine DotProductAttention under an FP8 recipe with fp8_dpa: cuDNN's FP8
    # fused attention, forward and backward (formulas/compute.py attention_core); needs a low-precision recipe
    fp8_attention: bool = False
    # the distributed optimizer's (and FSDP's) parameter all-gather moves FP8 weights, 1 byte each, under a per-tensor FP8
    # recipe (Megatron-Core --fp8-param-gather, megatron/core/distributed/param_and_grad_buffer.py; Megatron-Bridge's
    # FP8 precision presets set it, training/mixed_precision.py): formulas/step.py dp_volumes. MXFP8 parameters are
    # gathered in BF16 through the gradient buffer and cast after (reuse_grad_buf_for_mxfp8_param_ag), NVFP4's are
    # priced the same (not modelled): 2 bytes
    fp8_param_gather: bool = False
    # the MoE dispatch all-to-all (forward, and the backward's of the combine's gradient) moves the recipe's quantized
    # activations with their scales, the combine stays in 16 bits: DeepSeek-V3 (arXiv:2412.19437 sec 3.3.2: the
    # activations before the MoE up-projections and the activation gradients before the down-projections are
    # quantized to FP8 before dispatch; "the forward and backward combine components" are kept in BF16), DeepEP's
    # "FP8 dispatching and BF16 combining" (deepseek-ai/DeepEP README). Needs a low-precision recipe:
    # formulas/step.py ep_layer
    fp8_dispatch: bool = False
    # under a low-precision recipe with SP, the TP all-gathers of the column-parallel inputs and of the row-parallel
    # output gradients move quantized data (Transformer Engine: gather_along_first_dim with the module's quantizer;
    # torchao Float8ColwiseParallel / Float8RowwiseParallel under tensorwise scaling): base/precision.py
    # tp_gather_bytes, formulas/step.py tp_block_comm. False: 16-bit gathers, cast after. Per stack: stacks/*.yaml
    quantized_tp_gather: bool = False
    # transformer layers kept in 16 bits under a low-precision recipe: Megatron-Core --first-last-layers-bf16 with
    # --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16, their sum (megatron/core/model_parallel_config.py
    # first_last_layers_bf16, num_layers_at_start_in_bf16, num_layers_at_end_in_bf16; Megatron-Bridge
    # nemotron_3_super_bf16_with_nvfp4_mixed: the last 14). Priced as a share of the average layer (formulas/compute.py
    # op_time): exact at pp = 1; with pp > 1 they sit on the first and last stages, which this under-states
    bf16_layers: int = 0
    # weight-gradient GEMMs accumulate into the main-grad buffer (Megatron-LM --no-gradient-accumulation-fusion,
    # store_false in megatron/training/arguments.py: on by default; Transformer Engine fuse_wgrad_accumulation; on in
    # Megatron-Core, the default stack); False: the GEMM writes its output (per stack: stacks/*.yaml wgrad_fusion)
    wgrad_fusion: bool = True
    # RMSNorm, SwiGLU and RoPE run as separate eager PyTorch ops (formulas/compute.py layer_ops: their extra HBM
    # traffic); False: fused kernels (Megatron, Transformer Engine, torch.compile). Per stack: stacks/*.yaml
    eager_elementwise: bool = False
    # RoPE alone as separate eager ops while the norms and the activation are fused (NeMo AutoModel's own MoE models
    # before 2026-01: TE RMSNorm, compiled SwiGLU, a torch-op RoPE); None: as eager_elementwise. Per stack
    eager_rope: bool | None = None
    # ZeRO-3 / FSDP copies each gathered parameter out of the all-gather buffer and each gradient into the
    # reduce-scatter buffer on the compute stream (PyTorch FSDP2 fully_shard; formulas/step.py fsdp_copies); False:
    # the collectives work in place on flat buffers (FSDP1, DeepSpeed, Megatron-FSDP). Per stack: stacks/*.yaml
    fsdp_copies: bool = False
    # the data-parallel wrapper all-reduces gradients in buckets of its own, beside param.grad: a second copy of the
    # unsharded gradients in memory (torch DistributedDataParallel, gradient_as_bucket_view=False by default;
    # formulas/memory.py); False: the gradients live in the reduction buffer (Megatron, FSDP, DeepSpeed). Per stack
    grad_buckets: bool = False
    # a pipeline message (the activation, or its gradient) leaves each TP rank as a 1/t slice and is all-gathered over
    # the TP group on arrival (Megatron-LM <= 3.x --scatter-gather-tensors-in-pipeline, on by default without SP;
    # DeepSpeed's PipelineEngine pipe_partitioned / grad_partitioned); False: the message is the activation as the
    # layer holds it, sequence-sharded with SP and whole without (Megatron-Core get_tensor_shapes; torch pipelining).
    # formulas/step.py pp_message. Per stack: stacks/*.yaml
    pp_scatter_gather: bool = False
    # replicas of the sharded state (HSDP): the dp x cp ranks form this many groups, each sharding one copy of what the
    # ZeRO stage shards, the shards all-reduced across groups (PyTorch FSDP2 on a (replicate, shard) mesh; OLMo-core
    # DataParallelType.hsdp, one replica per node by default; torchtitan data_parallel_replicate_degree; Megatron-Core
    # --num-distributed-optimizer-instances). 1: one group of all dp x cp ranks (FSDP, ZeRO)
    dp_replicas: int = 1
    # under recompute "full": the share of each pipeline stage's (chunk's) layers recomputed, the rest keeping all
    # their activations (Megatron-Core --recompute-method block --recompute-num-layers N: N of a chunk's layers;
    # torchtitan selective_ac_option n and OLMo-core selected_blocks block_interval n: every n-th block, 1/n; fms-fsdp
    # selective_checkpointing p: p). 1: every layer (--recompute-method uniform, torchtitan mode full)
    recompute_fraction: float = 1.0
    # under an FP8/FP4 recipe, GEMMs save their quantized input for the weight gradient (Transformer Engine, the
    # default stack's) or the 16-bit input (torchao Float8Linear); per stack: stacks/*.yaml quantized_saves
    quantized_saves: bool = True
    loss_kernel: str = "fused"          # fused | eager | compiled (LOSS_KERNELS; per stack: stacks/*.yaml loss_kernel)
    cuda_graphs: str = "none"           # none | layers | full (CUDA_GRAPHS): which host issue time CUDA graphs remove
    # with per-layer graphs, the modules they capture, comma-separated (GRAPH_MODULES; Megatron-Core cuda_graph_modules):
    # blank = the whole layer; the blocks left out stay eager
    graph_modules: str = ""
    overlap_ep: float = 0.0             # fraction of the MoE all-to-all hidden (Megatron-Core --overlap-moe-expert-parallel-comm, default off)
    # the EP overlap runs the experts' weight-gradient GEMMs later, beside the dispatch backward (Megatron-Core
    # --delay-wgrad-compute, default off; transformer_config.py refuses it without the EP overlap)
    delay_wgrad: bool = False
    overlap_pp: float = 0.0             # fraction of PP send/recv hidden
    overlap_cp: float = 1.0             # ring attention overlaps KV exchange with attention (default on)
    cp_kind: str = "ring"               # ring | ulysses (CP_KINDS): how the cp group splits the attention
    uneven_stages: bool = False         # allow layers not divisible by pp x interleave (heaviest stage rounds up)
    # Megatron-Core --pipeline-model-parallel-layout (roofline/spec/layout.py, e.g. "Et|(tt|)*30mL"): which layers each
    # rank holds; None: l / (p v) layers per virtual stage, the heavier edge on the heaviest stage
    pipeline_layout: str | None = None
    # CPU activation offload: the first offload_layers layers' saved activations go to host memory during the forward
    # and come back during the backward (Megatron-Core --cpu-offloading --cpu-offloading-num-layers N, Transformer
    # Engine cpu_offload.py); 0: none. Megatron-Core refuses it with pp > 1 or recomputation (transformer_config.py)
    offload_layers: int = 0
    # the modules selective recomputation recomputes, comma-separated (RECOMPUTE_MODULES; Megatron-Core
    # --recompute-modules, default core_attn); read only when recompute is "selective", as Megatron-Core reads it
    recompute_modules: str = "core_attn"

    def __post_init__(self):
        _types(self, "plan")

    @property
    def recompute_module_set(self) -> frozenset:
        """The named modules of ``recompute_modules`` (empty names dropped)."""
        return module_set(self.recompute_modules)

    @property
    def cp_label(self) -> str:
        """The context-parallel degree as plan lines print it: "cp=8", or "cp=8 (ulysses)" for DeepSpeed-Ulysses."""
        return f"cp={self.cp}" + (" (ulysses)" if self.cp > 1 and self.cp_kind == "ulysses" else "")

    @property
    def n_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def batch(self) -> int:
        return self.global_batch or self.micro_batch * self.dp

    @property
    def zero_stage(self) -> int:
        return ZERO_STAGE[self.sharding]


def module_set(text: str) -> frozenset:
    return frozenset(x.strip() for x in str(text).split(",") if x.strip())


def modules_for(model, modules: str) -> str:
    """A stack's default recompute modules without those the model has no use for (Megatron-Core refuses mla_up_proj
    without MLA and moe_act without an MoE: the RULES below): HAI-LLM's RMSNorm and MLA up-projections on a model
    without MLA recompute the norms; Megatron-Core's default core_attn when none is left. Kept in their order."""
    drop = ({"mla_up_proj"} if not model.mla else set()) | ({"moe_act"} if model.n_experts <= 1 else set())
    kept = [x.strip() for x in str(modules).split(",") if x.strip() and x.strip() not in drop]
    return ",".join(kept) or "core_attn"


def modules_hold(p, test, field: str = "recompute_modules"):
    """``test`` of a plan's recompute module set (or another comma-separated module ``field``): a bool, or a bool array
    when the plan's fields are arrays (search, the rules' tests)."""
    v = getattr(p, field)
    if hasattr(v, "shape"):
        import numpy as np
        return np.array([bool(test(module_set(x))) for x in np.ravel(v)]).reshape(np.shape(v))
    return bool(test(module_set(v)))


def _types(obj, where: str) -> None:
    """Each field of a Model/Plan has its declared type (int, float, bool, str; None where optional), else one
    InputError naming the field and the value: ``Model(n_layers="24")``, ``Plan(sequence_parallel="no")``.
    Ranges and the rules between fields are :func:`check`'s. Integral floats (2.0) are accepted as integers."""
    from ..base import schema as S

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


# ---- validity rules: written once, run on one plan (check) and on arrays of plans (search) ----------------
#
# Each Rule is one constraint of a (model, plan) pair: ``ok(m, p)`` returns True when it holds, and a boolean
# array when the plan fields are numpy arrays (roofline.views.search passes its enumerated knobs as arrays), so it is
# written with & | ~ and comparisons, never ``and``/``or`` on a plan field. ``reads`` names the plan fields it
# reads (empty: model fields only); search applies a rule to its arrays once every field it reads is
# enumerated, and checks the rules on fields it does not search (dtype, overlaps, the model's) once on the
# fixed fields with check(). ``message`` is the one-line error: a str.format template over m (the Model),
# p (the Plan) and the derived terms of _terms, or a function (m, p) -> str when the line lists names.
# check() raises the message of the first rule that fails, in the order of RULES; a rule may therefore assume
# that the rules before it hold (no division by a zero tp: the positivity rules come first).
#
# Adding a rule is one entry in RULES (or in roofline.spec.stacks.plan_rules for what one stack cannot run), e.g. the
# expert grid's "ep x etp divides tp x cp x dp" below; a field search does not enumerate (etp, uneven_stages) is
# given to its rule view as the fixed plan's value (space._Rows).

@dataclass(frozen=True)
class Rule:
    ok: object                      # (m, p) -> bool or bool array
    message: object                 # str.format template over m, p and _terms(m, p), or (m, p) -> str
    reads: tuple = ()               # plan fields ok() reads; () = model fields only

    def text(self, m, p) -> str:
        if callable(self.message):
            return self.message(m, p)
        terms = _terms(m, p) if any(f"{{{k}}}" in self.message for k in _TERMS) else {}
        return self.message.format(m=m, p=p, **terms)


_TERMS = ("stages", "per", "micro_batches")


def _terms(m, p) -> dict:
    """Derived values the messages quote (pipeline stages, sequences per micro-batch round, micro-batches)."""
    stages = p.pp * p.interleave
    per = p.micro_batch * p.dp
    return {"stages": stages, "per": per, "micro_batches": p.batch // per if per else None}


def _pos(v):
    """v > 0 for a number or an array; False for None and booleans."""
    return v is not None and not isinstance(v, bool) and v > 0


def _positive(obj: str, name: str, optional: bool = False) -> Rule:
    get = (lambda m, p: getattr(m, name)) if obj == "model" else (lambda m, p: getattr(p, name))
    letter = "m" if obj == "model" else "p"
    ok = (lambda m, p: get(m, p) is None or _pos(get(m, p))) if optional else (lambda m, p: _pos(get(m, p)))
    return Rule(ok, f"{obj}.{name} must be a positive number, got {{{letter}.{name}!r}}",
                () if obj == "model" else (name,))


def _integer(name: str) -> Rule:
    return Rule(lambda m, p: getattr(p, name) % 1 == 0, f"plan.{name} must be an integer, got {{p.{name}!r}}", (name,))


def _count(name: str) -> Rule:       # 0 = none
    return Rule(lambda m, p: getattr(m, name) is None or getattr(m, name) >= 0,
                f"model.{name} must be a count >= 0, got {{m.{name}!r}}")


def _fraction_needs_full(p):
    """A recompute fraction below 1 only with full recomputation, elementwise; recompute is read only then."""
    import numpy as np
    f = np.asarray(p.recompute_fraction)
    if (f == 1).all():
        return True
    return (f == 1) | among(p.recompute, ("full",))


def among(v, options):
    """v in options, elementwise for an array."""
    if hasattr(v, "shape"):
        ok = v == options[0]
        for o in options[1:]:
            ok = ok | (v == o)
        return ok
    return v in options


def _choice(obj: str, name: str, what: str, options) -> Rule:
    """A named option."""
    get = (lambda m, p: getattr(m, name)) if obj == "model" else (lambda m, p: getattr(p, name))
    return Rule(lambda m, p: among(get(m, p), options),
                f"{what} must be one of {', '.join(options)}, got {{{'m' if obj == 'model' else 'p'}.{name}!r}}",
                () if obj == "model" else (name,))


def _fraction(name: str) -> Rule:
    return Rule(lambda m, p: (getattr(p, name) >= 0) & (getattr(p, name) <= 1),
                f"plan.{name} must be a fraction in [0, 1], got {{p.{name}!r}}", (name,))


_MLA_WIDTHS = ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_ATTENTION_FIELDS = ("q_lora_rank", "kv_lora_rank", *_MLA_WIDTHS, "swa_window", "swa_every")


def _mla_missing(m) -> list:
    return [n for n in _MLA_WIDTHS if getattr(m, n) is None] if m.kv_lora_rank else []


def _mla_orphans(m) -> list:
    """MLA fields given without kv_lora_rank."""
    return [] if m.kv_lora_rank else [n for n in _ATTENTION_FIELDS[:5] if getattr(m, n) is not None
                                      and n != "kv_lora_rank"]


def expert_tp(p):
    """The plan's expert tensor-parallel degree: etp, or tp when unset (Megatron-Core --expert-tensor-parallel-size
    default); elementwise for arrays."""
    e = p.etp
    if e is None:
        return p.tp
    if getattr(e, "dtype", None) == object:         # a column of plans, some unset
        import numpy as np
        unset = np.equal(e, None)
        return np.where(unset, p.tp, np.where(unset, 1, e)).astype(np.int64)
    return e


def _layout_error(m, text, pp, interleave) -> str | None:
    """The one-line reason a pipeline_layout breaks Megatron-Core's layout rules for this model, else None."""
    from .layout import ranks

    try:
        ranks(text, int(pp), int(interleave), m.n_layers, m.mtp_layers or 0)
    except (InputError, ValueError, TypeError) as exc:
        return str(exc)
    return None


def _has_layout(p):
    """pipeline_layout is stated: a bool, or a bool array for search's columns."""
    v = p.pipeline_layout
    if hasattr(v, "shape"):
        import numpy as np
        return np.array([x is not None for x in v.ravel()], dtype=bool).reshape(v.shape)
    return v is not None


def _layout_ok(m, p):
    v = p.pipeline_layout
    if hasattr(v, "shape"):
        import numpy as np
        pp, vi = np.broadcast_to(p.pp, v.shape).ravel(), np.broadcast_to(p.interleave, v.shape).ravel()
        return np.array([x is None or _layout_error(m, x, a, b) is None for x, a, b in zip(v.ravel(), pp, vi)],
                        dtype=bool).reshape(v.shape)
    return v is None or _layout_error(m, v, p.pp, p.interleave) is None


EDGE_SLOTS = 2     # virtual stages the embedding and the loss may each fill with uneven stages (Megatron-Core layouts)


def _edge_slots(p):
    """Virtual stages the embedding and the loss may fill with uneven stages and pp > 1 (EDGE_SLOTS), else 0."""
    return EDGE_SLOTS * ((p.uneven_stages != 0) & (p.pp > 1))


MAMBA_FIELDS = ("mamba_num_heads", "mamba_head_dim", "mamba_state_dim", "mamba_num_groups", "mamba_d_conv",
                 "mamba_expand", "mamba_chunk_size")


def _pattern_bad(m) -> str:
    """Characters of the hybrid pattern that are no layer kind ('' when none or no pattern)."""
    return "".join(sorted(set(m.hybrid_pattern or "") - set("M*-E|")))


def _pattern_len(m) -> int:
    return len((m.hybrid_pattern or "").replace("|", ""))


def _dense_mlp(m) -> bool:
    """A dense MLP of ffn somewhere: a dense model, or the leading dense layers of an MoE model."""
    return m.n_experts == 1 or bool(m.dense_layers)


RULES: tuple[Rule, ...] = (
    *(_positive("model", n) for n in ("n_layers", "d_model", "n_heads", "vocab", "seq_len", "n_experts", "top_k",
                                      "capacity_factor")),
    *(_positive("model", n, optional=True) for n in ("n_kv_heads", "ffn_hidden", "head_dim", "moe_ffn_hidden",
                                                     "shared_ffn_hidden", "moe_latent_size")),
    *(_count(n) for n in ("n_shared_experts", "first_dense_layers", "mtp_layers")),
    *(r for n in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "interleave") for r in (_positive("plan", n),
                                                                                       _integer(n))),
    _positive("plan", "global_batch", optional=True),
    _choice("model", "mlp", "mlp", MLPS),
    _choice("model", "norm", "norm", NORMS),
    _choice("model", "attention", "attention", ATTENTION),
    _choice("plan", "recompute", "recompute", RECOMPUTE),
    _choice("plan", "schedule", "schedule", SCHEDULES),
    _choice("plan", "sharding", "sharding", SHARDING),
    _choice("plan", "dtype", "dtype", DTYPES),
    _choice("plan", "grad_dtype", "grad_dtype", GRAD_DTYPES),
    _choice("plan", "moment_dtype", "moment_dtype", MOMENT_DTYPES),
    _choice("plan", "optimizer", "optimizer", OPTIMIZERS),
    _choice("plan", "ep_dispatcher", "ep_dispatcher", DISPATCHERS),
    _choice("plan", "cp_kind", "cp_kind", CP_KINDS),
    _choice("plan", "loss_kernel", "loss_kernel", LOSS_KERNELS),
    _choice("plan", "cuda_graphs", "cuda_graphs", CUDA_GRAPHS),
    # Megatron-Core transformer_config.py: cuda_graph_modules are named modules, "moe_preprocess" only with
    # "moe_router", and they select per-layer graphs only (they must be empty with the full-iteration graph)
    Rule(lambda m, p: modules_hold(p, lambda s: s <= set(GRAPH_MODULES), "graph_modules"),
         lambda m, p: (f"cuda-graph-modules: unknown {', '.join(sorted(module_set(p.graph_modules) - set(GRAPH_MODULES)))}"
                       f" in {p.graph_modules!r}; Megatron-Core's: {', '.join(GRAPH_MODULES)}"), ("graph_modules",)),
    Rule(lambda m, p: modules_hold(p, lambda s: "moe_preprocess" not in s or "moe_router" in s, "graph_modules"),
         "cuda-graph-modules: moe_preprocess needs moe_router (Megatron-Core transformer_config.py), got {p.graph_modules!r}",
         ("graph_modules",)),
    Rule(lambda m, p: modules_hold(p, lambda s: not s, "graph_modules") | (p.cuda_graphs == "layers"),
         "cuda-graph-modules ({p.graph_modules!r}) selects per-layer CUDA graphs: it needs cuda-graphs layers, "
         "got {p.cuda_graphs!r}", ("graph_modules", "cuda_graphs")),
    *(_fraction(n) for n in ("overlap_grad_reduce", "overlap_param_gather", "overlap_tp", "overlap_pp",
                             "overlap_cp", "overlap_ep")),
    # layers kept in 16 bits (Megatron-Core first_last_layers_bf16) are a low-precision recipe's exception
    Rule(lambda m, p: (p.bf16_layers >= 0) & (p.bf16_layers <= m.n_layers),
         "bf16_layers ({p.bf16_layers}) must be between 0 and the layers ({m.n_layers})", ("bf16_layers",)),
    Rule(lambda m, p: (p.bf16_layers == 0) | among(p.dtype, LOW_PRECISION_DTYPES),
         "bf16_layers keeps layers in 16 bits under a low-precision recipe, got dtype {p.dtype}",
         ("bf16_layers", "dtype")),
    # FP8 attention is a low-precision recipe's (Megatron-Core applies fp8_dot_product_attention inside its FP8
    # autocast) and TE's fused (cuDNN) attention's: no FP8 flash-attention kernel elsewhere in these stacks
    Rule(lambda m, p: (p.fp8_param_gather == 0) | among(p.dtype, LOW_PRECISION_DTYPES),
         "fp8_param_gather needs a low-precision recipe (fp8, fp8-cs, fp8-block, mxfp8, nvfp4), got dtype {p.dtype}",
         ("fp8_param_gather", "dtype")),
    Rule(lambda m, p: (p.fused_moe_mlp == 0) | among(p.dtype, ("mxfp8", "nvfp4")),
         "fused_moe_mlp is Transformer Engine's block-scaled grouped MLP (grouped GEMM + activation + cast fused, "
         "transformer_engine/pytorch/ops/fused/grouped_mlp.py): it needs dtype mxfp8 or nvfp4, got {p.dtype}",
         ("fused_moe_mlp", "dtype")),
    Rule(lambda m, p: (p.fused_moe_mlp == 0) | bool(m.n_experts > 1 and m.mlp in ("swiglu", "squared_relu")),
         "fused_moe_mlp fuses the routed experts' activation into their GEMMs: it needs an MoE model with a swiglu "
         "or squared_relu MLP, got {m.n_experts} experts and mlp {m.mlp!r}", ("fused_moe_mlp",)),
    Rule(lambda m, p: (p.fused_moe_mlp == 0) | (p.per_expert_kernels == 0),
         "fused_moe_mlp runs each GEMM as one kernel for all local experts: it needs per_expert_kernels false "
         "(--no-per-expert-kernels)", ("fused_moe_mlp", "per_expert_kernels")),
    Rule(lambda m, p: (p.fp8_attention == 0) | among(p.dtype, LOW_PRECISION_DTYPES),
         "fp8_attention needs a low-precision recipe (fp8, fp8-cs, fp8-block, mxfp8, nvfp4), got dtype {p.dtype}",
         ("fp8_attention", "dtype")),
    Rule(lambda m, p: (p.fp8_dispatch == 0) | among(p.dtype, LOW_PRECISION_DTYPES),
         "fp8_dispatch needs a low-precision recipe (fp8, fp8-cs, fp8-block, mxfp8, nvfp4), got dtype {p.dtype}",
         ("fp8_dispatch", "dtype")),
    Rule(lambda m, p: (p.fp8_attention == 0) | (m.attention in FP8_ATTENTION_KERNELS),
         "fp8_attention runs in Transformer Engine's fused attention (cuDNN), got attention {m.attention!r}",
         ("fp8_attention",)),
    # Megatron-Core transformer_config.py: "overlap_moe_expert_parallel_comm must be enabled when enabling
    # delay_wgrad_compute"
    Rule(lambda m, p: (p.delay_wgrad == 0) | (p.overlap_ep > 0),
         "delay_wgrad needs the EP overlap (overlap_ep > 0; Megatron-Core --delay-wgrad-compute needs "
         "--overlap-moe-expert-parallel-comm), got overlap_ep = {p.overlap_ep}"),
    Rule(lambda m, p: m.head_dim is not None or m.d_model % m.n_heads == 0,
         "d_model ({m.d_model}) must be divisible by heads ({m.n_heads}) (or state head_dim)"),
    # the attention variants' fields: MLA's ranks and head widths together, sliding-window sizes
    *(_positive("model", n, optional=True) for n in _ATTENTION_FIELDS),
    Rule(lambda m, p: not _mla_missing(m),
         lambda m, p: f"MLA (kv_lora_rank = {m.kv_lora_rank}) needs {', '.join(_mla_missing(m))}"),
    Rule(lambda m, p: not m.kv_lora_rank or m.n_kv_heads is None or m.n_kv_heads == m.n_heads,
         "MLA has one key/value per head: kv-heads ({m.n_kv_heads}) must equal heads ({m.n_heads}) or be unset"),
    Rule(lambda m, p: not _mla_orphans(m),
         lambda m, p: f"{', '.join(_mla_orphans(m))} given without kv_lora_rank (MLA needs its KV compression rank)"),
    Rule(lambda m, p: m.swa_every is None or m.swa_window is not None,
         "swa_every ({m.swa_every}) given without swa_window"),
    *(_positive("model", n, optional=True) for n in MAMBA_FIELDS),
    Rule(lambda m, p: not _pattern_bad(m),
         lambda m, p: (f"hybrid_pattern may hold only M, *, -, E and |, got {m.hybrid_pattern!r} "
                       f"(unknown {_pattern_bad(m)!r})")),
    Rule(lambda m, p: not m.hybrid_pattern or _pattern_len(m) == m.n_layers,
         lambda m, p: f"hybrid_pattern has {_pattern_len(m)} layers, n_layers is {m.n_layers}"),
    Rule(lambda m, p: not m.hybrid_pattern or (m.layer_counts["E"] == 0) | (m.n_experts > 1),
         "hybrid_pattern has MoE layers (E) but n_experts is {m.n_experts}"),
    Rule(lambda m, p: not m.hybrid_pattern or not (m.layer_counts["-"] and m.n_experts > 1),
         "hybrid_pattern's dense MLP layers (-) in a MoE model (n_experts = {m.n_experts}) are not modelled "
         "(one MLP kind per model)"),
    Rule(lambda m, p: not m.hybrid_pattern or not (m.dense_layers or m.kv_lora_rank or m.swa_window),
         "hybrid_pattern with first_dense_layers, MLA or sliding-window attention is not modelled"),
    Rule(lambda m, p: not m.hybrid_pattern or m.mamba["heads"] % m.mamba["groups"] == 0,
         lambda m, p: f"mamba heads ({m.mamba['heads']}) must be divisible by mamba groups ({m.mamba['groups']})"),
    # Megatron-Core mamba_mixer.py: nheads % tp == 0 and ngroups % tp == 0 (in_proj column-parallel by heads)
    Rule(lambda m, p: not m.layer_counts["M"] or (m.mamba["heads"] % p.tp == 0) & (m.mamba["groups"] % p.tp == 0),
         lambda m, p: (f"mamba heads ({m.mamba['heads']}) and groups ({m.mamba['groups']}) must be divisible by "
                       f"tp ({p.tp})"), ("tp",)),
    # Megatron-Core's Mamba context parallelism (ssm/mamba_context_parallel.py: all-to-all of heads) is not priced
    Rule(lambda m, p: not m.layer_counts["M"] or (p.cp == 1),
         "context parallelism of Mamba layers is not modelled: cp must be 1, got {p.cp}", ("cp",)),
    Rule(lambda m, p: m.n_heads % m.kv_heads == 0, "heads ({m.n_heads}) must be divisible by kv-heads ({m.kv_heads})"),
    # Megatron-Core splits attention heads, the dense MLP, each expert (expert TP = tp) and the shared experts
    # column/row-wise over tp (megatron/core/transformer/attention.py, mlp.py, moe/experts.py)
    Rule(lambda m, p: m.n_heads % p.tp == 0, "heads ({m.n_heads}) must be divisible by tp ({p.tp})", ("tp",)),
    # Ulysses hands each of the c ranks h/(t c) whole heads (deepspeed/sequence/layer.py: the head count divided by
    # the sequence-parallel world size)
    Rule(lambda m, p: (p.cp_kind != "ulysses") | (m.n_heads % (p.tp * p.cp) == 0),
         "cp-kind ulysses gives each rank whole heads: heads ({m.n_heads}) must be divisible by tp x cp "
         "({p.tp} x {p.cp})", ("cp", "cp_kind")),
    Rule(lambda m, p: (m.kv_heads % p.tp == 0) | (p.tp % m.kv_heads == 0),
         "kv-heads ({m.kv_heads}) must be divisible by tp ({p.tp}) (or tp by kv-heads)", ("tp",)),
    Rule(lambda m, p: (not _dense_mlp(m)) | (m.ffn % p.tp == 0),
         "ffn-hidden ({m.ffn}) must be divisible by tp ({p.tp})", ("tp",)),
    Rule(lambda m, p: (m.n_experts <= 1) | (m.expert_ffn % expert_tp(p) == 0),
         lambda m, p: f"moe-ffn-hidden ({m.expert_ffn}) must be divisible by etp ({expert_tp(p)})", ("tp", "etp")),
    Rule(lambda m, p: m.shared_ffn % p.tp == 0,
         "shared-ffn-hidden ({m.shared_ffn}) must be divisible by tp ({p.tp})", ("tp",)),
    Rule(lambda m, p: m.dense_layers < m.n_layers,
         "first-dense-layers ({m.dense_layers}) must be fewer than layers ({m.n_layers})"),
    # uneven stages: the embedding and the loss may each take a virtual stage's place (Megatron-Core
    # account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split, transformer_config.py;
    # Megatron-Bridge sets both for Llama 3.1 405B: 126 layers + 2 = 16 x 8 virtual stages)
    # a stated layout: Megatron-Core's rules (layout.ranks; pipeline_parallel_layer_layout.py validate_layer_layout)
    Rule(_layout_ok, lambda m, p: _layout_error(m, p.pipeline_layout, p.pp, p.interleave),
         ("pp", "interleave", "pipeline_layout")),
    Rule(lambda m, p: _has_layout(p) | (m.n_layers + _edge_slots(p) >= p.pp * p.interleave),
         lambda m, p: (f"layers ({m.n_layers}) must be at least pp x interleave ({p.pp} x {p.interleave} = "
                       f"{p.pp * p.interleave})" + (" less the 2 stages embedding and loss may fill"
                                                    if _edge_slots(p) else "")),
         ("pp", "interleave", "uneven_stages", "pipeline_layout")),
    Rule(lambda m, p: p.uneven_stages | _has_layout(p) | (m.n_layers % (p.pp * p.interleave) == 0),
         "layers ({m.n_layers}) must be divisible by pp x interleave ({p.pp} x {p.interleave} = {stages}); "
         "allow uneven stages with --uneven-stages", ("pp", "interleave", "uneven_stages", "pipeline_layout")),
    Rule(lambda m, p: (p.interleave <= 1) | (p.schedule != "gpipe"),
         "interleave > 1 needs the interleaved 1F1B schedule, not gpipe", ("interleave", "schedule")),
    # ZB1P / ZB2P as sail-sg's --enable-zero-bubble runs them: one stage per rank (its ZB-V, two chunks in a V, and
    # torch's interleaved ZB1P are not modelled)
    Rule(lambda m, p: ((p.pp > 1) & (p.interleave <= 1)) | ((p.schedule != "zb1p") & (p.schedule != "zb2p")),
         "the {p.schedule} zero-bubble schedule is a pipeline of one stage per rank: it needs pp > 1 and interleave 1, "
         "got pp {p.pp} and interleave {p.interleave}", ("schedule", "pp", "interleave")),
    # DualPipeV (deepseek-ai/DualPipe dualpipe/dualpipev.py DualPipeV.step: two chunks per rank in a V,
    # "assert num_chunks >= num_ranks * 2"; torch.distributed.pipelining ScheduleDualPipeV: two stages per rank)
    Rule(lambda m, p: (p.schedule != "dualpipev") | ((p.pp > 1) & (p.interleave == 2)),
         "dualpipev runs two model chunks per rank in a V: it needs pp > 1 and interleave 2, got pp {p.pp} and "
         "interleave {p.interleave}", ("schedule", "pp", "interleave")),
    Rule(lambda m, p: (p.schedule != "dualpipev") | ((p.batch // (p.micro_batch * p.dp)) >= 2 * p.pp),
         "dualpipev needs at least 2 x pp micro-batches per step ({micro_batches} < 2 x {p.pp}; DualPipeV.step asserts "
         "num_chunks >= num_ranks * 2)", ("schedule", "pp", "global_batch", "micro_batch", "dp")),
    Rule(lambda m, p: (p.schedule != "dualpipev") | (p.pipeline_layout is None),
         "a stated pipeline layout is Megatron-Core's (interleaved 1F1B); dualpipev places its chunks in a V",
         ("schedule", "pipeline_layout")),
    # DualPipe (deepseek-ai/DualPipe dualpipe/dualpipe.py DualPipe.step: "assert num_ranks % 2 == 0", "assert
    # num_chunks > 0 and num_chunks % 2 == 0 and num_chunks >= num_ranks * 2"; one stage per direction per rank)
    Rule(lambda m, p: (p.schedule != "dualpipe") | ((p.pp > 1) & (p.pp % 2 == 0) & (p.interleave == 1)),
         "dualpipe holds stages i and pp-1-i on rank i: it needs an even pp and interleave 1, got pp {p.pp} and "
         "interleave {p.interleave}", ("schedule", "pp", "interleave")),
    Rule(lambda m, p: (p.schedule != "dualpipe") | ((p.batch // (p.micro_batch * p.dp)) % 2 == 0)
         & ((p.batch // (p.micro_batch * p.dp)) >= 2 * p.pp),
         "dualpipe needs an even number of micro-batches per step, at least 2 x pp ({micro_batches}, pp {p.pp}; "
         "DualPipe.step asserts num_chunks % 2 == 0 and num_chunks >= num_ranks * 2)",
         ("schedule", "pp", "global_batch", "micro_batch", "dp")),
    # DualPipe reads a stated layout as its pp stages in order, rank i holding stages i and pp-1-i (layout.stage_counts)
    Rule(lambda m, p: m.seq_len % p.cp == 0, "seq-len ({m.seq_len}) must be divisible by cp ({p.cp})", ("cp",)),
    Rule(lambda m, p: (m.n_experts > 1) | (p.ep == 1),
         "ep ({p.ep}) splits routed experts, and the model is dense (n_experts = {m.n_experts}): use ep 1", ("ep",)),
    Rule(lambda m, p: (m.n_experts > 1) | (expert_tp(p) == p.tp),
         lambda m, p: (f"etp ({expert_tp(p)}) applies to routed experts only: a dense model splits its MLP over tp "
                       f"({p.tp})"), ("tp", "etp")),
    # the experts' own grid over the same GPUs: world = pp x etp x ep x expert-dp (Megatron-Core parallel_state.py,
    # "MoE parallel folding"): EP may fold in TP and CP ranks
    Rule(lambda m, p: (p.tp * p.cp * p.dp) % (p.ep * expert_tp(p)) == 0,
         lambda m, p: (f"ep x etp ({p.ep} x {expert_tp(p)}) must divide tp x cp x dp ({p.tp} x {p.cp} x {p.dp} = "
                       f"{p.tp * p.cp * p.dp}) (Megatron-Core expert grid: world = pp x etp x ep x expert-dp)"),
         ("tp", "cp", "dp", "ep", "etp")),
    Rule(lambda m, p: m.n_experts % p.ep == 0, "experts ({m.n_experts}) must be divisible by ep ({p.ep})", ("ep",)),
    Rule(lambda m, p: m.top_k <= m.n_experts, "top-k ({m.top_k}) cannot exceed experts ({m.n_experts})"),
    Rule(lambda m, p: p.batch % (p.micro_batch * p.dp) == 0,
         "global batch ({p.batch}) must be divisible by micro-batch x dp ({p.micro_batch} x {p.dp} = {per})",
         ("global_batch", "micro_batch", "dp")),
    Rule(lambda m, p: (p.interleave <= 1) | (p.pp > 1), "interleave ({p.interleave}) needs pp > 1",
         ("interleave", "pp")),
    Rule(lambda m, p: (p.interleave <= 1) | ((p.batch // (p.micro_batch * p.dp)) % p.pp == 0),
         "interleaved 1F1B needs micro-batches ({micro_batches}) divisible by pp ({p.pp})",
         ("interleave", "pp", "global_batch", "micro_batch", "dp")),
    # Megatron-Core transformer_config.py __post_init__: recompute_modules must be allowed names; "moe_act ... only
    # supported with moe_grouped_gemm" (an MoE), "mla_up_proj ... only supported with multi_latent_attention"
    Rule(lambda m, p: modules_hold(p, lambda s: s <= set(RECOMPUTE_MODULES)),
         lambda m, p: (f"recompute-modules: unknown {', '.join(sorted(module_set(p.recompute_modules) - set(RECOMPUTE_MODULES)))}"
                       f" in {p.recompute_modules!r}; Megatron-Core's: {', '.join(RECOMPUTE_MODULES)}"),
         ("recompute_modules",)),
    Rule(lambda m, p: modules_hold(p, lambda s: "mla_up_proj" not in s) | bool(m.mla),
         "recompute-modules mla_up_proj needs MLA attention (Megatron-Core: only supported with "
         "multi_latent_attention)", ("recompute_modules",)),
    Rule(lambda m, p: modules_hold(p, lambda s: "moe_act" not in s) | (m.n_experts > 1),
         "recompute-modules moe_act needs an MoE model (Megatron-Core: only supported with moe_grouped_gemm), got "
         "{m.n_experts} expert(s)", ("recompute_modules",)),
    # CPU activation offload (Megatron-Core megatron/core/transformer/transformer_config.py __post_init__: "CPU
    # offloading can be done only for layers less than num_layers", "no support for Pipeline parallelism with CPU
    # offloading", "CPU offloading does not work when activation recomputation is enabled")
    Rule(lambda m, p: (p.recompute_fraction > 0) & (p.recompute_fraction <= 1),
         "recompute-fraction must be in (0, 1], got {p.recompute_fraction!r}", ("recompute_fraction",)),
    # reads recompute only when a fraction is below 1 (search enumerates recompute as indices, the fraction at 1)
    Rule(lambda m, p: _fraction_needs_full(p),
         "recompute-fraction ({p.recompute_fraction}) is the share of layers under full recomputation: it needs "
         "recompute full, got {p.recompute!r}", ("recompute_fraction",)),
    Rule(lambda m, p: (p.dp_replicas >= 1) & ((p.dp * p.cp) % p.dp_replicas == 0),
         "dp-replicas ({p.dp_replicas}) must divide dp x cp ({p.dp} x {p.cp}): each replica shards one copy of the state "
         "over dp x cp / replicas ranks (HSDP)", ("dp_replicas", "dp", "cp")),
    Rule(lambda m, p: (p.dp_replicas == 1) | (p.zero_stage > 0),
         "dp-replicas ({p.dp_replicas}) needs a sharded state: sharding none keeps a whole copy on every rank",
         ("dp_replicas", "zero_stage")),
    Rule(lambda m, p: (p.offload_layers >= 0) & (p.offload_layers % 1 == 0),
         "plan.offload_layers must be a whole number of layers >= 0, got {p.offload_layers!r}", ("offload_layers",)),
    Rule(lambda m, p: p.offload_layers < m.n_layers,
         "offload-layers ({p.offload_layers}) must be below the model's layers ({m.n_layers}): the last layer's "
         "activations stay on the GPU (Megatron-Core, Transformer Engine cpu_offload.py)", ("offload_layers",)),
    Rule(lambda m, p: (p.offload_layers == 0) | (p.pp == 1),
         "offload-layers ({p.offload_layers}) needs pp = 1, got pp {p.pp} (Megatron-Core: no CPU offloading with "
         "pipeline parallelism)", ("offload_layers", "pp")),
    Rule(lambda m, p: (p.offload_layers == 0) | (p.recompute == "none"),
         "offload-layers ({p.offload_layers}) needs recompute none, got {p.recompute!r} (Megatron-Core: CPU offloading "
         "does not work with activation recomputation)", ("offload_layers", "recompute")),
)


def check(model: Model, plan: Plan) -> None:
    """Validate the pair; raise InputError naming the violated constraint and the values (the first of
    :data:`RULES` that fails)."""
    for rule in RULES:
        if not rule.ok(model, plan):
            raise InputError(rule.text(model, plan))


def holds(rules, model, plan):
    """True where every rule holds: a bool for one plan, a bool array when ``plan``'s fields are arrays. A rule
    may assume the rules before it (check's order): on arrays the rules after one that fails for some rows are
    still evaluated on those rows (their results are discarded, their arithmetic warnings silenced); a rule that
    fails for all (a model-only rule, say) ends the evaluation."""
    import numpy as np

    ok = True
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for rule in rules:
            ok = ok & rule.ok(model, plan)
            if not hasattr(ok, "shape") and not ok:
                return False          # a rule failed for every plan; the rules after it may assume it holds
    return ok
