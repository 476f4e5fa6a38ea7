"""FLOPs and bytes of every operator of a transformer layer, per tensor-parallel rank and micro-batch.

Each operator is an :class:`Op` with forward/backward FLOPs and HBM bytes; its time is the
calibrated roofline ``t = t0 + max(F / (P kappa eta sat), B / (W mu))`` (DESIGN.md), where ``sat`` is a
saturation in the GEMM's smallest dimension (small GEMMs cannot fill the matrix units; for flash
attention ``1 / attention_shape``: head-dim tiling, softmax, tiles and waves; the unfused attention's batched
GEMMs are one such roofline per kernel, ``bmm_time``) and ``kappa``
the sustained-clock ratio: microbenchmarks time short bursts at boost clock, while a training run
holds a power-capped GPU at its lower saturated clock; a synchronous job also waits for its slowest GPU
(``clock_eff``).
Conventions: Megatron-LM column/row-parallel split (Shoeybi et al. 2019), sequence parallelism as
in Korthikanti et al. 2022, context parallelism splits the sequence of queries (ring attention
streams all keys/values through every rank).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import sympy as sp

from . import symbols as S

# sizes per rank
STD_HEAD = S.d_model / S.n_heads                                # the head width when none is stated (calibration samples)
d_head = S.head_dim                                           # head dimension (Megatron-Core kv_channels)
# MLA (DeepSeek-V2 sec 2.1, DeepSeek-V3 report sec 2.1.1; Megatron-Core transformer/multi_latent_attention.py):
# queries and keys of d_n + d_r per head (the RoPE part d_r of the key is one vector shared by all heads), values
# of d_v per head; K and V are expanded per head (a heads, no GQA groups). Standard attention: d_h for all three.
mla = sp.Min(1, S.kv_lora)                                    # 1 with MLA (kv_lora_rank > 0), else 0
mla_q_lora = mla * sp.Min(1, S.q_lora)                        # 1 when MLA compresses the queries (q_lora_rank > 0)
mla_qk = S.qk_nope + S.qk_rope                                # MLA query/key head width


# width per token of what MLA's column-parallel input projections gather under SP (Megatron-Core
# multi_latent_attention.py get_query_key_value_tensors: the duplicated down projections run on the s/t tokens a rank
# holds, then q_compressed, kv_compressed and k_pos_emb are gathered over TP): r_q + r_kv + d_r (without q_lora_rank
# linear_q_proj gathers the h-wide hidden states instead of r_q)
mla_gather_width = mla_q_lora * S.q_lora + (1 - mla_q_lora) * S.d_model + S.kv_lora + S.qk_rope


def head_dims(d):
    """(query/key, value) head widths of the model's attention: ``d`` for standard attention, MLA's (d_n + d_r, d_v)."""
    return (1 - mla) * d + mla * mla_qk, (1 - mla) * d + mla * S.v_head


d_qk, d_v = head_dims(d_head)
kv_heads_eff = (1 - mla) * S.kv_heads + mla * S.n_heads        # heads of K and V as the attention kernel reads them
q_width = S.n_heads * d_head                                    # width of Q and of the attention output (may differ from h)
kv_width = kv_heads_eff * (d_qk + d_v) / 2                    # width of K (and of V; MLA: their mean), per token
tokens = S.micro_batch * S.seq_len / S.cp                     # tokens of one micro-batch on one CP rank
sp_div = 1 + S.seq_par * (S.tp - 1)                           # divisor of norm/dropout work under SP
tok_sp = tokens / sp_div                                      # tokens a rank holds outside TP regions
routed = S.top_k * S.capacity_factor                                 # expert copies of a token (1 for dense)
moe = sp.Min(1, S.n_experts - 1)                                # 1 for a mixture of experts, else 0
# LatentMoE (Megatron-Core moe_latent_size, moe/moe_layer.py): fc1_latent_proj (h -> l, parallel_mode "duplicated":
# every TP rank holds it whole and projects its own tokens) before the dispatch, fc2_latent_proj (l -> h) after the
# combine; the routed experts, the permutation and the all-to-all are l wide; router and shared experts stay on h
def routed_width(on) -> sp.Expr:
    """Width of what the routed experts read and write: l where the 0/1 ``on`` says the layer is a LatentMoE, else h."""
    return S.d_model + on * (S.moe_latent - S.d_model)


latent = moe * sp.Min(1, S.moe_latent)                       # 1 for a LatentMoE, else 0
h_routed = routed_width(latent)
# the tensor-parallel split of the routed experts: etp (Megatron-Core expert_tensor_parallel_size, default tp;
# "MoE parallel folding", arXiv 2504.14960); the MLP of a dense model or dense layer is split over tp
etp = moe * S.etp + (1 - moe) * S.tp
vocab_pad = sp.ceiling(S.vocab / (128 * S.tp)) * 128 * S.tp   # Megatron pads V to a multiple of 128*t
# FLOP per element of a norm: LayerNorm 8 (mean 1, variance 3: subtract, square, add; normalise 2, scale and shift 2);
# RMSNorm 4 (square and add 2, normalise 1, scale 1: no mean, no shift; Zhang & Sennrich 2019). HBM-bound either way:
# the same bytes (read x, write y; the norm class efficiency is fitted with these counts)
NORM_FLOPS = 8 - 4 * S.rms
# Eager elementwise kernels (symbols.eager_elem), extra reads and writes per element in 16-bit units (fp32 = 2),
# forward then backward, over the fused kernel's:
# - RMSNorm: torch.nn.RMSNorm / F.rms_norm's composite (aten layer_norm.cpp rms_norm_symint, as Hugging Face's
#   LlamaRMSNorm): upcast to fp32 (r1 w2), pow (r2 w2), mean (r2), x * rsqrt (r2 w2), cast back (r2 w1), x weight
#   (r1 w1): r10 w8 against a fused kernel's r1 w1; its autograd backward through the same ops, ASSUMED r16 w10
#   against r2 w1;
# - SwiGLU: F.silu(x1) (r1 w1) then * x3 (r2 w1): r3 w2 against r2 w1; backward mul (r3 w2) + silu (r2 w1): r5 w3
#   against r3 w2 (per element of the MLP's inner width);
# - RoPE: x.float() (r1 w2), complex multiply (r2 w2), type_as (r2 w1): r5 w5 per element of q and k, the backward
#   alike (torchtitan models/llama3 apply_rotary_emb with view_as_complex), against a fused kernel's r1 w1.
# LayerNorm (F.layer_norm) and GELU stay one kernel each in eager PyTorch: unchanged.
EAGER_RMS = (9, 7, 14, 9)
EAGER_GLU = (1, 1, 2, 1)
EAGER_ROPE = (4, 4, 4, 4)
# FLOP per element of the MLP activation: tanh-GELU 0.5 x (1 + tanh(0.79788 (x + 0.044715 x^3))) = 7 arithmetic ops
# + tanh = 8; SiLU x sigmoid(x) times the gate ~ the same (exp, add, divide, 2 multiplies); squared ReLU max(0, x)^2 = 2
ACT_FLOPS = 8 - 6 * S.sq_relu

ATTENTION_CORE = ("flash_attention", "attn_scores_bmm", "attn_context_bmm", "scale_mask_softmax_dropout")

# torchtitan's op-level selective checkpointing (config.RECOMPUTE "op"; torchtitan/models/llama3/parallelize_llama.py
# _save_list and _apply_ac_to_transformer_block, the same at 9dec370 and e7c0cae): the policy saves the output of each
# aten.mm except every second one, counted in call order within a block, and of SDPA and reduce_scatter; the rest is
# recomputed in backward. The policy is a TorchDispatchMode, which sees aten.mm before torchao's Float8 tensor subclass
# lowers it to _scaled_mm, so FP8 linears count alike. Call order (torchtitan/models/llama3/model.py): wq, wk, wv, wo;
# then w1, w3, w2 (a dense MLP; w1, w2 without a gate) or the router gate and the shared expert's w1, w3, w2 (MoE; the
# routed experts run torch._grouped_mm, outside the list). The share of each of our (fused) GEMMs whose output is
# saved; every other operator, outside the attention core, is recomputed (MLA and Mamba projections: none saved,
# ASSUMED, their call order is not the Llama block's).
_kv = S.kv_heads * d_head
OP_SAVED = {"qkv_proj": (q_width + _kv) / (q_width + 2 * _kv),                 # wq (1st) and wv (3rd) of wq, wk, wv
            "mlp_up": (1 - moe) / (1 + S.gated),                      # w1 (5th) of w1, w3; a plain MLP's w1
            "mlp_down": (1 - moe) * S.gated,                          # w2 7th with a gate, 6th without
            "router": moe,                                            # the gate, 5th
            "shared_up": moe * S.gated / 2,                           # w3 (7th) of w1, w3
            "shared_down": moe * (1 - S.gated)}                       # w2, 7th without a gate


# Megatron-Core's selective recomputation by module (--recompute-modules; transformer_config.py recompute_modules,
# default ["core_attn"]): the operators each module runs again in backward, in a layer whose MLP is an MoE (moe_on 1)
# or dense (0). Sources, Megatron-Core at d98e8a6:
# - core_attn: the attention core (transformer/attention.py, checkpointed core attention);
# - layernorm: the norms that are modules of their own (transformer_layer.py recompute_input_layernorm /
#   recompute_pre_mlp_layernorm, skipped for an IdentityOp): MLA's input norm (gpt_layer_specs.py builds
#   input_layernorm=TENorm for MLA, while standard attention fuses it into linear_qkv) and an MoE layer's pre-MLP
#   norm (a dense MLP fuses it into linear_fc1);
# - moe_act: the routed experts' activation (moe/experts.py activation_recompute);
# - mla_up_proj: the up projections and RoPE (multi_latent_attention.py qkv_up_proj_and_rope_apply), with the latent
#   RMSNorms: the Transformer Engine spec fuses them into the up projections (gpt_layer_specs.py: linear_q_up_proj /
#   linear_kv_up_proj are column_parallel_layer_norm_linear when qk_layernorm, q_layernorm / kv_layernorm IdentityOp);
# - mlp: a dense layer's MLP, its fused norm included (transformer_layer.py recompute_mlp, not for an MoE layer);
# - moe: the whole MoE layer, router, dispatch and shared experts included (moe/moe_layer.py moe_layer_recompute;
#   its all-to-all runs again, step.ep_layer);
# - shared_experts: the shared experts (moe_layer.py shared_experts_recompute).
# The quantize kernels of a low-precision recipe are not recomputed here (ASSUMED: a small share of a module).
# the operators of an MoE layer's experts, shared experts included (Megatron-Core's "mlp" schedule node of the EP
# overlap, step.ep_merged; inside the moe recompute module below, with the router and the permutation)
EXPERT_OPS = ("mlp_up", "mlp_activation", "mlp_down", "expert_bias", "moe_latent_down", "moe_latent_up", "shared_up",
              "shared_activation", "shared_down")
_MODULE_OPS = (
    (S.rcm_core, lambda on: {n: 1 for n in ATTENTION_CORE}),
    (S.rcm_norm, lambda on: {"norm_attn": mla, "norm_mlp": on}),
    (S.rcm_moe_act, lambda on: {"mlp_activation": on}),
    (S.rcm_mla_up, lambda on: {n: 1 for n in ("mla_q_norm", "mla_q_up", "mla_q_proj", "mla_kv_norm", "mla_kv_up",
                                              "mla_rope_qkv")}),
    (S.rcm_mlp, lambda on: {n: 1 - on for n in ("norm_mlp", "mlp_up", "mlp_activation", "mlp_down")}),
    (S.rcm_moe, lambda on: {n: on for n in ("router", "router_topk", "moe_permute", "moe_sort_chunks", *EXPERT_OPS)}),
    (S.rcm_shared, lambda on: {n: 1 for n in ("shared_up", "shared_activation", "shared_down")}),
)


def selective_share(name: str, moe_on=sp.Integer(0)) -> sp.Expr:
    """1 when a module of the plan's selective recomputation runs operator ``name`` again, else 0: the OR of the
    modules that hold it (1 - prod(1 - m_i w_i), exact for 0/1 switches; moe and moe_act both hold the activation)."""
    miss = sp.Integer(1)
    for switch, ops in _MODULE_OPS:
        w = ops(moe_on).get(name)
        if w is not None:
            miss *= 1 - switch * w
    return 1 - miss


def recompute_share(op, moe_on=sp.Integer(0)) -> sp.Expr:
    """The fraction of an operator's forward that the plan's recomputation runs again in backward: all of it (full),
    the operators of the selective modules (selective: ``selective_share``; ``moe_on`` 1 in a layer whose MLP is an
    MoE), or what torchtitan's op policy does not save (op: OP_SAVED)."""
    core = op.name in ATTENTION_CORE
    return (S.rc_full + S.rc_sel * selective_share(op.name, moe_on)
            + S.rc_op * (0 if core else 1 - OP_SAVED.get(op.name, sp.Integer(0))))


@dataclass(frozen=True)
class Op:
    """One operator: FLOPs and bytes forward and backward, and its calibration class."""
    name: str
    cls: str                  # one of symbols.OP_CLASSES
    f_fwd: sp.Expr            # FLOPs executed in forward
    b_fwd: sp.Expr            # HBM bytes moved in forward
    f_bwd: sp.Expr
    b_bwd: sp.Expr
    model_f_fwd: sp.Expr = sp.Integer(0)   # FLOPs counted in model FLOPs (MFU convention), forward
    dmin: sp.Expr | None = None            # smallest GEMM dimension (size saturation), GEMMs only
    on: sp.Expr = sp.Integer(1)            # 0/1 switch: a kernel that is off costs nothing, not even t0
    head_dim: sp.Expr | None = None        # flash attention only: head dimension,
    ctas: tuple = ()                       # thread blocks of the grid (forward, backward),
    kblock: tuple = ()                     # keys per block (flash_blocks; forward, backward)
    kernels: tuple = ()                    # class bmm: ((direction, Kernel), ...), one roofline each (bmm_time)
    hp: bool = False                       # a GEMM kept at the 16-bit peak under a low-precision recipe (precision.py)
    q_elems: tuple = (sp.Integer(0), sp.Integer(0))   # elements a low-precision recipe quantizes (forward, backward)
    launches: sp.Expr = sp.Integer(1)      # fixed times t0 the op pays in sequence (grouped GEMM: per-expert GEMMs)
    wgrad_extra: sp.Expr = sp.Integer(0)   # GEMMs: HBM bytes the weight-gradient kernel adds to its half of b_bwd
    peak_fraction: sp.Expr | None = None   # a measured kernel chain: its FLOPs at this fraction of the 16-bit peak
                                           # (instead of the GEMM curve; mamba.SSD_PEAK_FRACTION)


@dataclass(frozen=True)
class Kernel:
    """One batched GEMM kernel of the unfused attention: its FLOPs, HBM bytes and reduction length."""
    f: sp.Expr
    b: sp.Expr              # operands read once, output written
    reread: sp.Expr         # bytes of the s x s score operand read again for every further tile of the head dim
    k: sp.Expr              # reduction length K


def gemm(name: str, m, k, n, batch=1, model=1, on=sp.Integer(1), hp=False, groups=sp.Integer(1),
         q_own=(sp.Integer(1), sp.Integer(1))) -> Op:
    """C[m,n] = A[m,k] B[k,n]: 2mkn FLOPs; backward = dgrad + wgrad = 2x (Narayanan et al. 2021 sec 5.1).

    ``hp``: the GEMM stays at the 16-bit peak under an FP8/FP4 recipe (LM head, router: roofline/base/precision.py);
    otherwise it runs at the plan's dtype peak and its input (forward) and output gradient (backward) are quantized
    (``q_elems``, priced by ``quantize_op``).

    ``model`` scales the FLOPs counted as model FLOPs (0: not counted; 1/max(1, capacity) for expert
    GEMMs: padding to a capacity factor above 1 is executed work, not model work, and below 1 the
    dropped tokens are neither executed nor model work, so model FLOPs never exceed executed ones).

    ``groups``: a grouped GEMM of ``groups`` independent GEMMs (the routed experts a rank holds), each m/groups x k
    x n with a weight of its own: the same FLOPs, ``groups`` weights read (k n each), the size saturation at the
    per-group row count m/groups, and one cuBLAS launch per group. Transformer Engine's GroupedLinear (used by
    Megatron-Core TEGroupedMLP) issues them through nvte_multi_stream_cublas_gemm, one cublasLt GEMM per expert
    round-robin over num_streams = 4 compute streams (TransformerEngine common/gemm/cublaslt_gemm.cu,
    common/include/transformer_engine/gemm.h): the fixed time t0 of each GEMM (launch, tail) overlaps four at a
    time, max(1, groups / 4) in sequence. A stack that runs one grouped kernel for all local experts (``exp_launch``
    0: torch._grouped_mm, a fused grouped MLP) pays t0 once.

    ``q_own``: the share of the forward input's and of the backward output gradient's quantization that a kernel of
    its own does (0 where another GEMM's epilogue writes the operand already quantized: a fused grouped MLP).

    The backward is two kernels of f FLOPs and b bytes each: the data gradient (reads dY and W, writes dX) and the
    weight gradient (reads X and dY, writes dW). With fused gradient accumulation (``wgrad_fusion``: Megatron-LM
    --no-gradient-accumulation-fusion unset, Transformer Engine fuse_wgrad_accumulation) the weight gradient adds
    into the main-grad buffer instead of writing dW: it reads and writes ``grad_bytes`` per weight element in place
    of writing ``act_bytes`` (``wgrad_extra``). A dense weight gradient reduces over thousands of tokens and stays
    compute-bound; an expert's reduces over its few hundred routed tokens and is bound by this traffic.
    """
    f = on * 2 * m * k * n * batch
    b = on * S.act_bytes * (m * k + groups * k * n + m * n) * batch
    # backward: the output gradient, and the input again where the recipe saved it in 16 bits (q_saved 0)
    q = (sp.Integer(0), sp.Integer(0)) if hp else (on * q_own[0] * m * k * batch,
                                                   on * (q_own[1] * m * n + (1 - S.q_saved) * m * k) * batch)
    extra = on * S.wgrad_fusion * groups * k * n * batch * (2 * S.grad_bytes - S.act_bytes)
    return Op(name, "gemm", f, b, 2 * f, 2 * b, f * model, sp.Min(m / groups, k, n), on, hp=hp, q_elems=q,
              launches=1 + S.exp_launch * (sp.Max(1, groups / GEMM_STREAMS) - 1), wgrad_extra=extra)


GEMM_STREAMS = 4   # Transformer Engine's compute streams for grouped GEMMs (gemm.h num_streams)


# The clock the job's compute runs at: the sustained clock of its slowest GPU. A calibration times one GPU; the n GPUs
# of a synchronous job (TP/CP collectives every layer, pipeline hand-offs, the DP reduction every step) wait for the
# slowest, whose compute rate sits gpu_z standard deviations (clock_spread) below the mean (hardware defaults.yaml
# clock_spread: sources). Memory-bound kernels keep the HBM's rate.
clock_eff = S.clock / (1 + S.clock_spread * S.gpu_z)


low_precision = sp.Min(1, S.q_bytes)     # 1 under an FP8/FP4 recipe (its quantization moves bytes), 0 in 16 bits

# the attention core's peak per direction: 16-bit, or faster by FP8 attention's measured speed over 16-bit attention
# where the plan runs it in FP8 (attn_fp8; the profile's fp8_attention_speed, spec/hardware fp8_attention_factors)
peak_attention = {d: S.peak_hp * (1 + S.attn_fp8 * (speed - 1))
                  for d, speed in (("fwd", S.fp8_attn_fwd), ("bwd", S.fp8_attn_bwd))}


def quantize_op(ops: list[Op]) -> Op:
    """The quantization kernels of a low-precision recipe for the GEMMs of ``ops``, as one memory-bound op: in
    forward each GEMM's input activation, in backward the gradient of its output, and the input again where the recipe
    saved it in 16 bits (``q_saved`` 0: torchao Float8Linear's backward casts input_hp with hp_tensor_to_float8_dynamic
    for the weight gradient, torchao/float8/float8_linear.py matmul_with_hp_or_float8_args) (Transformer Engine casts before
    every FP8/FP4 GEMM; the weights are cast once per step and cached, left out), ``q_bytes`` of HBM traffic per
    element (roofline/base/precision.py, per recipe), less the transposed copy of a per-tensor FP8 recipe (``q_trans``)
    on a GPU whose FP8 GEMMs take any layout (``fp8_tn`` 0: Transformer Engine's quantizers then write the row-wise
    data only, csrc/quantizer.cpp ``with_transpose = columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()``).
    2 FLOP per element: the amax comparison and the scaling
    (HBM-bound, ~0.5 FLOP/B). Off (no time, no t0) in 16-bit training."""
    n_f = sp.Add(*[o.q_elems[0] for o in ops]) * (1 - S.hp_frac)     # none in the layers kept in 16 bits
    n_b = sp.Add(*[o.q_elems[1] for o in ops]) * (1 - S.hp_frac)
    on = low_precision
    # a GPU whose FP8 GEMMs take any layout (Blackwell) needs no transposed copy of a per-tensor FP8 operand
    q = S.q_bytes - S.q_trans * (1 - S.fp8_tn)
    return Op("quantize", "elem", on * 2 * n_f, on * q * n_f, on * 2 * n_b, on * q * n_b, on=on)


def _fwd_scaled(op: Op, share) -> Op:
    """``op`` with its forward FLOPs scaled by ``share`` (its forward bytes the caller scales)."""
    return replace(op, f_fwd=share * op.f_fwd)


def elementwise(name: str, cls: str, n_elems, reads_fwd, writes_fwd, reads_bwd, writes_bwd, flops_per_elem=1) -> Op:
    """A memory-bound kernel: bytes = elements x (reads + writes) x bytes per element.

    Backward FLOPs = 2x forward: the input gradient evaluates the derivative (as much arithmetic as the
    forward) and multiplies it into the output gradient (ASSUMED; these kernels are HBM-bound, ~1-4 FLOP/B,
    and the class's FLOP efficiency is fitted with these same counts, calibrate/)."""
    e = S.act_bytes * n_elems
    return Op(name, cls, flops_per_elem * n_elems, e * (reads_fwd + writes_fwd),
              2 * flops_per_elem * n_elems, e * (reads_bwd + writes_bwd))


ATTN_TILE = 128   # query rows per flash-attention forward thread block (FlashAttention-2 kBlockM)
BMM_TILE = 128    # output columns of one cuBLAS tile of the batched GEMMs


def bmm_kernel(batch, m, k, n, scores_in: bool, on=sp.Integer(1)) -> Kernel:
    """C[m,n] = A[m,k] B[k,n] for ``batch`` matrices (cuBLAS strided batched): 2mkn FLOPs each, A and B
    read, C written. When A is the s x s score matrix (``scores_in``; n is then the head dim), the kernel
    streams A once per BMM_TILE-wide tile of n: ceil(n / BMM_TILE) - 1 extra passes, too large for L2
    to keep between them. Megatron's baddbmm runs with beta = 0 on an empty buffer: C is not read.
    """
    passes = sp.ceiling(n / BMM_TILE) - 1 if scores_in else 0
    return Kernel(on * 2 * m * k * n * batch, on * S.act_bytes * (m * k + k * n + m * n) * batch,
                  on * S.act_bytes * m * k * batch * passes, k)


def bmm_op(name: str, fwd: list, bwd: list, model_f, on) -> Op:
    """An unfused-attention op from its forward and backward kernels (totals for FLOP and byte counts)."""
    add = lambda ks, a: sp.Add(*[getattr(kn, a) for kn in ks])  # noqa: E731
    return Op(name, "bmm", add(fwd, "f"), add(fwd, "b"), add(bwd, "f"), add(bwd, "b"), model_f, on=on,
              kernels=tuple(("fwd", kn) for kn in fwd) + tuple(("bwd", kn) for kn in bwd))


def bmm_slowdown(k, dhalf):
    """Compute time of a batched GEMM over F / (P eta): (K + dhalf) / K. Each output tile runs K reduction
    steps, then writes itself out; with a short K (the head dim of Q K^T) the write-out is not hidden
    behind the reduction and costs as much as ``dhalf`` more steps."""
    return 1 + dhalf / k


def bmm_time(kn: Kernel, direction: str) -> sp.Expr:
    """Roofline of one batched GEMM kernel: max(F (K + dhalf) / K / (P kappa eta), (B + rho reread) / (W mu))."""
    dhalf, rho = (S.BMM_SHAPE[n, direction] for n in ("dhalf", "reread"))
    key = ("bmm", direction)
    return sp.Max(kn.f * bmm_slowdown(kn.k, dhalf) / (S.peak_hp * clock_eff * S.EFF_FLOP[key]),
                  (kn.b + rho * kn.reread) / (S.hbm_bw * S.EFF_MEM[key]), evaluate=False)


def flash_blocks(d_head):
    """FlashAttention-2's key block on sm80/sm90 (flash_{fwd,bwd}_launch_template.h), (forward, backward):
    the forward keeps a 128-query tile and streams keys in blocks of 128 up to head dim 64, else 64; the
    backward runs one thread block per key block of 128 up to head dim 128, else 64, looping over queries."""
    d_pad = 32 * sp.ceiling(d_head / 32)
    return sp.Piecewise((128, d_pad <= 64), (64, True)), sp.Piecewise((128, d_pad <= 128), (64, True))


def attention_shape(d, ctas, kblock, slots, d_soft, d_reg, uneven, d_io, ceil=sp.ceiling, lo=sp.Min):
    """Flash-attention time over the ideal MMA time F / (P eta): head-dim tiling, softmax, tiles, waves.

    Per score element the kernel runs 4 d_pad MMA FLOPs (the head dim padded to the kernel's
    32-wide tile, d_pad = 32 ceil(d / 32)), a softmax whose exp/max/rescale costs as much as
    ``d_soft`` more head dims, and a tile overhead growing as d_pad^2 / ``d_reg`` (the register file
    holds a tile of fixed size, so the key block shrinks as 1/d and per-block work grows with d).
    Per key block of ``kblock`` keys each query row moves d-wide data (backward: loads Q and dO and
    adds its dQ into fp32 in HBM), as much as ``d_io`` head dims per key.
    A head dim off the 32-grid runs the padded kernel with predicated loads: x (1 + ``uneven``).
    ``ctas`` equal thread blocks run in waves of ``slots`` (one per SM): x ceil(ctas / slots) slots / ctas.
    With d_soft = dhalf, d_reg -> inf, uneven = d_io = 0 and a full last wave it is the GEMM
    saturation (d + dhalf) / d.
    """
    d_pad = 32 * ceil(d / 32)
    return (d_pad / d) * (1 + d_soft / d_pad + d_pad / d_reg + d_io / kblock) * (1 + uneven * lo(1, d_pad - d)) \
        * ceil(ctas / slots) * slots / ctas


def window_keys(window=None):
    """Keys per query, averaged over the sequence, of a layer whose flash kernel skips masked blocks (causal):
    s / 2 for full causal attention; with a causal window of w keys (the query itself included, HF sliding_window;
    Megatron-Core window_size = (w - 1, 0)), query i sees min(i + 1, w): sum_i min(i + 1, w) / s = w_e - w_e (w_e - 1)
    / (2 s) ~ w_e - w_e^2 / (2 s) with w_e = min(w, s) (the -1 dropped: w_e / 2s < 1 key); w_e = s gives s / 2.
    A kernel that does not skip masked blocks (``causal`` = 0) computes all s keys."""
    s = S.seq_len
    if window is None:
        return s * (1 - S.causal / 2)
    w = sp.Min(window, s)
    return S.causal * (w - w ** 2 / (2 * s)) + (1 - S.causal) * s


def attention_core(d_head=STD_HEAD, d_v=None, kv_heads=S.kv_heads, window=False) -> list[Op]:
    """Softmax(QK^T/sqrt(d)) V for a/t heads on s/c queries against s keys.

    Flash (Dao et al. 2022): F_fwd = 2 b s_q s_kv (d_qk + d_v) a/t (= 4 b s_q s_kv d_h a/t when query/key and value
    heads are equally wide; MLA: d_qk = d_n + d_r, d_v), halved when causal blocks are skipped;
    backward recomputes QK^T: 2.5x forward (5 GEMMs vs 2). Unfused (Megatron 2021): two batched
    GEMMs over the full s x s scores plus scale/mask/softmax/dropout kernels over b a/t s_q s_kv
    elements. Forward S = Q K^T (reduction over the head dim) and O = P V; backward dQ = dS K and
    dK = dS^T Q, dV = P^T dO and dP = dO V^T (each a kernel of its own, as autograd runs them).

    ``window``: a fraction ``swa_frac`` of the layers attends within a causal window of ``swa_window`` keys
    (Megatron-Core window_size / window_attn_skip_freq): the flash kernel of those layers skips the blocks outside it
    (FlashAttention-2 window_size, cuDNN sliding window), so their FLOPs use ``window_keys`` keys per query; the
    bytes (Q, K, V, O read or written once) are those of a full layer. Both kinds are priced as ops named
    flash_attention, each scaled by its share of the layers (the per-layer average; t0 paid once per layer).
    The unfused path computes and masks the whole s x s scores either way (only its model FLOPs shrink).
    """
    d_qk = d_head
    d_v = d_head if d_v is None else d_v
    s_q, s_kv = S.seq_len / S.cp, S.seq_len
    heads_rank = S.n_heads / S.tp
    full = 2 * S.micro_batch * s_q * s_kv * (d_qk + d_v) * heads_rank
    per_key = full / s_kv                                     # FLOPs per key of every query (forward)
    frac = S.swa_frac if window else sp.Integer(0)
    model_f = full * (1 - S.causal / 2)
    model_f_win = per_key * window_keys(S.swa_window) if window else sp.Integer(0)
    model_mix = (1 - frac) * model_f + frac * model_f_win if window else model_f
    qkvo_bytes = S.act_bytes * S.micro_batch * (s_q * S.n_heads * (d_qk + d_v) + s_kv * kv_heads * (d_qk + d_v)) / S.tp
    kb_fwd, kb_bwd = flash_blocks(d_qk)
    d_shape = (d_qk + d_v) / 2                                # the shape curve's head dim (ASSUMED: the mean of the two)
    grid = S.micro_batch * heads_rank         # thread blocks: forward per query tile, backward per key block
    ctas = (grid * sp.ceiling(s_q / ATTN_TILE), grid * sp.ceiling(s_kv / kb_bwd))

    # FP8 attention (attn_fp8): Transformer Engine casts Q, K and V to FP8 before cuDNN's FP8 kernel and, in backward,
    # the output gradient dO (the saved Q, K, V stay FP8); counted with the recipe's other casts (quantize_op)
    q_el, kv_el = S.micro_batch * s_q * heads_rank * d_qk, S.micro_batch * s_kv * kv_heads * (d_qk + d_v) / S.tp
    do_el = S.micro_batch * s_q * heads_rank * d_v

    def flash(f, share, f_bwd=None):
        on = S.flash * share
        f_bwd = f if f_bwd is None else f_bwd
        return Op("flash_attention", "attn", on * f, on * qkvo_bytes, on * sp.Rational(5, 2) * f_bwd, on * 2 * qkvo_bytes,
                  on * f, sp.Min(s_q, d_qk), on, d_shape, ctas, (kb_fwd, kb_bwd),
                  q_elems=(on * S.attn_fp8 * (q_el + kv_el), on * S.attn_fp8 * do_el))

    ops_flash = flash(model_f, 1 - frac)
    # unfused path: two batched GEMMs (scores and context) + mask/softmax/dropout over the scores
    unf, bh = 1 - S.flash, S.micro_batch * heads_rank
    qk = bmm_kernel(bh, s_q, d_qk, s_kv, False, unf)        # S = Q K^T
    pv = bmm_kernel(bh, s_q, s_kv, d_v, True, unf)          # O = P V
    if d_v is d_qk:                                         # equal widths: the backward kernels have the forward shapes
        pt = bmm_kernel(bh, s_kv, s_q, d_head, True, unf)   # dV = P^T dO; dK = dS^T Q
        dq, dk, dv, dp = pv, pt, pt, qk
    else:
        dq = bmm_kernel(bh, s_q, s_kv, d_qk, True, unf)     # dQ = dS K
        dk = bmm_kernel(bh, s_kv, s_q, d_qk, True, unf)     # dK = dS^T Q
        dv = bmm_kernel(bh, s_kv, s_q, d_v, True, unf)      # dV = P^T dO
        dp = bmm_kernel(bh, s_q, d_v, s_kv, False, unf)     # dP = dO V^T
    bmm_qk = bmm_op("attn_scores_bmm", [qk], [dq, dk], unf * model_mix * d_qk / (d_qk + d_v), unf)
    bmm_av = bmm_op("attn_context_bmm", [pv], [dv, dp], unf * model_mix * d_v / (d_qk + d_v), unf)
    scores = S.micro_batch * heads_rank * s_q * s_kv
    # fused scale-mask-softmax: read + write scores; dropout: read, write, 1-byte mask (Korthikanti 2022 sec 4.1).
    # FLOP per score, ASSUMED counts: forward 5 (scale, max, subtract, exp, sum; the normalising multiply and
    # dropout uncounted), backward 8 (y dy, its row sum, subtract, times y, scale: 5, dropout mask and scale: 2,
    # 1 for the mask select); HBM-bound (<= 2 FLOP/B), the softmax class efficiency is fitted with these counts
    softmax = Op("scale_mask_softmax_dropout", "softmax", unf * 5 * scores,
                 unf * scores * (2 * S.act_bytes + S.dropout * (2 * S.act_bytes + S.mask_bytes)),
                 unf * 8 * scores, unf * scores * (3 * S.act_bytes + S.dropout * (2 * S.act_bytes + S.mask_bytes)),
                 on=unf)
    ops = [ops_flash, bmm_qk, bmm_av, softmax]
    if window:
        # an FP8 backward kernel that does not skip the key blocks outside the window (fp8_window_bwd = 0: cuDNN 9.22's
        # FP8 and MXFP8 backward on GB200 / GB300, whose windowed time grows as s^2, the whole causal triangle) works
        # as a full causal layer; its forward still skips them
        full_bwd = S.attn_fp8 * (1 - S.fp8_window_bwd)
        ops.append(flash(model_f_win, frac, model_f_win + full_bwd * (model_f - model_f_win)))
    return ops


def mla_ops() -> list[Op]:
    """MLA's projections per rank (Megatron-Core MLASelfAttention with the Transformer Engine spec): the down
    projections h -> r_q and h -> r_kv + d_r (TELinear parallel_mode='duplicated': the weights replicated on every TP
    rank, run on the tokens the rank holds: s/t under sequence parallelism, all s without), RMSNorms on r_q and r_kv,
    then the column-parallel up projections r_q -> a (d_n + d_r) / t and r_kv -> a (d_n + d_v) / t on all s tokens
    (without q_lora_rank one column-parallel h -> a (d_n + d_r) / t). Then RoPE on the d_r parts and the assembly of
    per-head K = [k_nope, k_rope] and Q (Megatron-Core fusions/fused_mla_yarn_rope_apply.py; the unfused path
    runs apply_rotary_pos_emb and torch.cat over the same tensors): an HBM-bound kernel reading the up projections'
    outputs and the shared k_rope and writing Q, K, V, ~1 FLOP per element (ASSUMED; priced with the elem class).
    Every op is off (0) without MLA."""
    h, t, a = S.d_model, S.tp, S.n_heads
    on_q = mla_q_lora                              # q_lora_rank > 0, with MLA
    nope_rope = mla_qk
    read = tokens * (a / t * (S.qk_nope + S.qk_rope + S.qk_nope + S.v_head) + S.qk_rope)
    write = tokens * a / t * (2 * nope_rope + S.v_head)
    return [
        _on(gemm("mla_q_down", tok_sp, h, S.q_lora), on_q),
        _on(elementwise("mla_q_norm", "norm", tok_sp * S.q_lora, 1, 1, 2, 1, NORM_FLOPS), on_q),
        _on(gemm("mla_q_up", tokens, S.q_lora, a * nope_rope / t), on_q),
        _on(gemm("mla_q_proj", tokens, h, a * nope_rope / t), mla * (1 - on_q)),
        _on(gemm("mla_kv_down", tok_sp, h, S.kv_lora + S.qk_rope), mla),
        _on(elementwise("mla_kv_norm", "norm", tok_sp * S.kv_lora, 1, 1, 2, 1, NORM_FLOPS), mla),
        _on(gemm("mla_kv_up", tokens, S.kv_lora, a * (S.qk_nope + S.v_head) / t), mla),
        _on(Op("mla_rope_qkv", "elem", write, S.act_bytes * (read + write), 2 * write,
               S.act_bytes * (read + write)), mla),
    ]


def layer_ops(d_head=STD_HEAD, ffn=S.ffn_hidden, moe_on=moe, shared=sp.Integer(0), variants=None) -> list[Op]:
    """All operators of one transformer layer (pre-norm), forward and backward, per rank.

    ``d_head``: width of one head (the attention width a d_h may differ from h: Qwen3, GPT-OSS);
    ``ffn``: inner size of the MLP, of each routed expert when ``moe_on`` = 1 (then a router GEMM h x E,
    its top-k/softmax, and the token permute/unpermute of the dispatcher run as well; top_k x capacity
    expert copies of each token); ``shared``: total inner size of the shared experts every token passes
    through (DeepSeek; Megatron-Core SharedExpertMLP, TP-split like a dense MLP). The defaults are the
    dense/MoE layer with the standard head width that the calibration samples use.
    ``variants``: the attention variants of the model (MLA projections and head widths, ``mla_ops``; sliding-window
    layers, ``attention_core``), each 0 when the model has none; by default on for the model's layer (``d_head`` the
    head_dim symbol, as step.build passes it) and off for the calibration samples' layer.
    """
    h, f, t = S.d_model, ffn, S.tp
    hid = tok_sp * h
    q_w, kv_w = S.n_heads * d_head, S.kv_heads * d_head
    if variants is None:
        variants = d_head is S.head_dim
    if variants:
        dq, dv = head_dims(d_head)
        attn = [_on(gemm("qkv_proj", tokens, h, (q_w + 2 * kv_w) / t), 1 - mla), *mla_ops(),
                *attention_core(dq, dv, kv_heads_eff, window=True),
                gemm("attn_out_proj", tokens, S.n_heads * dv / t, h)]
    else:
        attn = [gemm("qkv_proj", tokens, h, (q_w + 2 * kv_w) / t), *attention_core(d_head),
                gemm("attn_out_proj", tokens, q_w / t, h)]
    rt = 1 + moe_on * (routed - 1)                 # expert copies of a token (1 in a dense MLP)
    # the model's MoE layer may be a LatentMoE (the calibration samples' layer never is)
    lat = moe_on * sp.Min(1, S.moe_latent) if variants else sp.Integer(0)
    hx = routed_width(lat)
    # routed experts split over etp ranks: each holds the tokens of its etp group (the SP shards of tp/etp ranks
    # fewer than a TP group gathers), f/etp wide; the same FLOPs per rank as a tp split (MoE with tp > 1 runs SP)
    t_mlp = moe_on * S.etp + (1 - moe_on) * t
    tok_mlp = tokens * t_mlp / t
    mlp_model = moe_on / sp.Max(1, S.capacity_factor) + (1 - moe_on)
    # the routed experts a rank holds, E/e (each rank of the EP group holds E/e experts; Megatron-Core
    # num_local_experts = num_moe_experts // expert_model_parallel_size), one GEMM each; 1 in a dense MLP
    local = 1 + moe_on * (S.n_experts / S.ep - 1)
    # a fused grouped MLP runs the routed experts' activation and casts in the GEMMs' epilogues (moe_mlp_fused; the
    # calibration samples' layer has none)
    fused = moe_on * S.moe_mlp_fused if variants else sp.Integer(0)
    # norms: NORM_FLOPS per element (LayerNorm 8, RMSNorm 4); eager RMSNorm and SwiGLU move more (EAGER_*)
    er, eg = S.eager_elem * S.rms, S.eager_elem * S.gated
    norm = (1 + er * EAGER_RMS[0], 1 + er * EAGER_RMS[1], 2 + er * EAGER_RMS[2], 1 + er * EAGER_RMS[3])
    ops = [
        elementwise("norm_attn", "norm", hid, *norm, NORM_FLOPS),
        *attn,
        # QK-norm: Megatron-Core's q_layernorm / k_layernorm (TENorm over each head's d_h; transformer/attention.py
        # SelfAttention.get_query_key_value_tensors), Hugging Face / torchtitan q_norm / k_norm: one norm pass over
        # the rank's queries and keys after the QKV GEMM, before RoPE; its input is kept for the backward
        # (memory._attn_split). Not with MLA, whose latent norms are mla_q_norm / mla_kv_norm
        _on(elementwise("qk_norm", "norm", tokens * (q_w + kv_w) / t, *norm, NORM_FLOPS),
            S.qk_norm * (1 - mla) if variants else sp.Integer(0)),
        # fused bias-dropout-add: read x and residual, write output (+1-byte mask with dropout)
        elementwise("dropout_residual_attn", "elem", hid, 2 + S.dropout * S.mask_bytes / S.act_bytes, 1, 1 + S.dropout * S.mask_bytes / S.act_bytes, 2),
        elementwise("norm_mlp", "norm", hid, *norm, NORM_FLOPS),
        # the router runs on the tokens a rank holds before the dispatcher gathers them (SP-split under TP;
        # Megatron-Core moe_layer.py: router(hidden_states), then token_dispatcher)
        gemm("router", tok_sp, h, S.n_experts, on=moe_on, hp=True),
        gemm("mlp_up", tok_mlp * rt, hx, f * (1 + S.gated) / t_mlp, model=mlp_model, groups=local,
             q_own=(sp.Integer(1), 1 - fused)),
        # GELU / squared ReLU: read 1 write 1; SwiGLU: read 2 write 1 (backward: read inputs and grad, write input
        # grads); ACT_FLOPS per element. A fused grouped MLP (``fused``) applies the activation in the first GEMM's
        # epilogue and its backward in the second GEMM's data gradient; what stays is the backward kernel that
        # recomputes the activation from the saved first-GEMM output, column-wise quantized for the second GEMM's
        # weight gradient (TransformerEngine#3315 group_scaled_swiglu: read 2 elements, write 1 at ~1 byte, half a
        # 16-bit element)
        _fwd_scaled(elementwise("mlp_activation", "elem", tok_mlp * rt * f / t_mlp,
                                (1 - fused) * (1 + S.gated + eg * EAGER_GLU[0]), (1 - fused) * (1 + eg * EAGER_GLU[1]),
                                (1 - fused) * (2 + S.gated + eg * EAGER_GLU[2]) + fused * (1 + S.gated),
                                (1 - fused) * (1 + S.gated + eg * EAGER_GLU[3]) + fused * sp.Rational(1, 2),
                                ACT_FLOPS), 1 - fused),
        gemm("mlp_down", tok_mlp * rt, f / t_mlp, hx, model=mlp_model, groups=local, q_own=(1 - fused, sp.Integer(1))),
        elementwise("dropout_residual_mlp", "elem", hid, 2 + S.dropout * S.mask_bytes / S.act_bytes, 1, 1 + S.dropout * S.mask_bytes / S.act_bytes, 2),
    ]
    if variants:
        # RoPE on the rank's queries and keys: a fused kernel reads and writes each once, forward and backward
        # (Transformer Engine transformer_engine/pytorch/attention/rope.py FusedRoPEFunc, tex.fused_rope_forward /
        # fused_rope_backward, which Megatron-Core's apply_rotary_pos_emb calls under apply_rope_fusion: Megatron-LM
        # --no-rope-fusion is store_false, on by default; Megatron-Bridge perf_recipes/_common.py sets it; Liger and
        # torch.compile likewise one pass); eager (torchtitan apply_rotary_emb; Hugging Face apply_rotary_pos_emb)
        # through fp32 copies, EAGER_ROPE. MLA rotates in mla_rope_qkv; ALiBi models (MPT, BLOOM) and learned
        # tables have no rotation
        rope = S.rope_pos * (1 - mla)
        ops.append(_on(elementwise("rope", "elem", tokens * (q_w + kv_w) / t, 1 + S.eager_rope * EAGER_ROPE[0],
                                   1 + S.eager_rope * EAGER_ROPE[1], 1 + S.eager_rope * EAGER_ROPE[2],
                                   1 + S.eager_rope * EAGER_ROPE[3], 6), rope))
    if moe_on is not sp.S.Zero:
        e = S.n_experts
        ops += [
            # router scores: softmax/sigmoid over E logits, top-k selection, (re)normalise the k weights
            # (Megatron-Core moe/router.py topk_routing_with_score_function); ASSUMED 5 FLOP per logit as the
            # softmax (max, subtract, exp, sum, normalise); fp32 logits read and probabilities written
            _on(Op("router_topk", "softmax", 5 * tok_sp * e, tok_sp * e * 2 * S.f32_bytes,
                   8 * tok_sp * e, tok_sp * e * 3 * S.f32_bytes), moe_on),
            # token permute before the dispatch and unpermute (weighted sum of the k copies) after the
            # combine (Megatron-Core moe/moe_utils.py permute/unpermute): read h per token, write k h copies
            # and back; backward the same traffic; 1 FLOP per element (the unpermute's probability scaling)
            _on(elementwise("moe_permute", "elem", tok_sp * hx, 1 + routed, routed + 1, 1 + routed, routed + 1,
                            routed), moe_on),
            # NCCL all-to-all dispatch (not DeepEP / HybridEP, ep_dedup 0) with more than one local expert and EP > 1:
            # the received tokens arrive grouped by source rank and are sorted by local expert after the dispatch,
            # and back before the combine (Megatron-Core MoEAlltoAllTokenDispatcher "Permutation 2",
            # moe/moe_utils.py sort_chunks_by_idxs; torchtitan's EP regroups them the same way,
            # generate_permute_indices): two passes reading and writing the k copies of each token, forward and
            # backward. The flex dispatcher's permute runs on the receiving side instead of the sending one (the
            # moe_permute pair above) and HybridEP fuses it into the dispatch: neither adds a pass.
            _on(elementwise("moe_sort_chunks", "elem", tok_sp * hx, 2 * routed, 2 * routed, 2 * routed, 2 * routed,
                            0), moe_on * (1 - S.ep_dedup) * sp.Min(1, S.ep - 1) * sp.Min(1, local - 1)),
            # an expert MLP with biases (GPT-OSS): the second GEMM's bias, scaled by each copy's routing probability,
            # added outside the GEMM. Megatron-Core TEGroupedMLP._apply_bias (megatron/core/transformer/moe/
            # experts.py, 2025-09 "Enable bias in expert mlp [gpt-oss 5/5]" a329dd6da5): per local expert t + b * p
            # with the flex dispatcher's fp32 probabilities, so b * p and the sum are fp32, then torch.cat and the
            # cast back; in 16-bit units per element of the expert output, forward reads 7 (t, the fp32 product and
            # sum, the cat) and writes 7, backward reads 7 and writes 3 (the casts of the gradient, the probability
            # and bias gradients). A stack with one grouped kernel (exp_launch 0: torchtitan) adds the bias in 16
            # bits: read 1, write 1; backward reads the gradient once for the bias gradient. A fused grouped MLP
            # scales and adds it in the GEMM (Transformer Engine GroupedLinear scale_bias): nothing here
            _on(elementwise("expert_bias", "elem", tok_mlp * rt * hx, 1 + 6 * S.exp_launch, 1 + 6 * S.exp_launch,
                            1 + 6 * S.exp_launch, 3 * S.exp_launch, 2),
                moe_on * S.biases * (1 - S.moe_mlp_fused)),
        ]
    if lat is not sp.S.Zero:
        ops += [_on(gemm("moe_latent_down", tok_sp, h, S.moe_latent), lat),
                _on(gemm("moe_latent_up", tok_sp, S.moe_latent, h), lat)]
    if shared is not sp.S.Zero:
        on_s = sp.Min(1, shared)          # shared sizes are integers: 1 with shared experts, 0 without
        ops += [
            _on(gemm("shared_up", tokens, h, shared * (1 + S.gated) / t), on_s),
            _on(elementwise("shared_activation", "elem", tokens * shared / t, 1 + S.gated + eg * EAGER_GLU[0],
                            1 + eg * EAGER_GLU[1], 2 + S.gated + eg * EAGER_GLU[2], 1 + S.gated + eg * EAGER_GLU[3],
                            ACT_FLOPS), on_s),
            _on(gemm("shared_down", tokens, shared / t, h), on_s),
        ]
    return [*ops, quantize_op(ops)]


def _on(op: Op, on) -> Op:
    """``op`` switched by the 0/1 expression ``on`` (FLOPs, bytes and t0 all vanish when off; a GEMM's size
    saturation is kept finite for a zero-sized GEMM that is off)."""
    dmin = sp.Max(1, op.dmin) if op.dmin is not None else None
    return replace(op, f_fwd=on * op.f_fwd, b_fwd=on * op.b_fwd, f_bwd=on * op.f_bwd, b_bwd=on * op.b_bwd,
                   model_f_fwd=on * op.model_f_fwd, on=on * op.on, dmin=dmin,
                   q_elems=(on * op.q_elems[0], on * op.q_elems[1]), wgrad_extra=on * op.wgrad_extra)


def mtp_ops() -> list[Op]:
    """One multi-token-prediction layer's operators around its transformer layer (DeepSeek-V3 report sec 2.2;
    Megatron-Core transformer/multi_token_prediction.py MultiTokenPredictionLayer): RMSNorms enorm (the shifted
    tokens' embedding) and hnorm (the previous depth's hidden states), then eh_proj, the concatenation 2h -> h
    (column-parallel, no bias). The embedding lookup, the final norm, the shared LM head and the cross-entropy are
    embedding_ops and head_ops once more (step.edges)."""
    hid = tok_sp * S.d_model
    ops = [elementwise("mtp_enorm", "norm", hid, 1, 1, 2, 1, NORM_FLOPS),
           elementwise("mtp_hnorm", "norm", hid, 1, 1, 2, 1, NORM_FLOPS),
           gemm("mtp_eh_proj", tokens, 2 * S.d_model, S.d_model / S.tp)]
    return [*ops, quantize_op(ops)]


def embedding_ops() -> list[Op]:
    """First stage: token (+ position) embedding lookup (a gather of b s rows of the V/t x h table).

    Backward is PyTorch's sort-based embedding_dense_backward (CUDA, > 3072 ids): zero-fill the
    V/t x h gradient table, radix-sort the ids, then sum each id's token rows in fp32 partial sums
    of <= 10 rows (compute_grad_weight) and write every summed row into the table (sum_and_scatter).
    Both segment kernels are sized by ``segs = min(b s, V/t)`` (max_segments: at most one segment
    per token and per table row) and run one thread per (segment, feature) through a chain of
    dependent index loads: their time follows that grid, not the ids actually distinct, which is
    why the fitted mu is low (~0.3 on the A100) and why t = 16 (3200 rows) at b s = 32768 costs a
    third of t = 1. The fixed cost of the sort and scan launches is the fitted t0 (~0.4 ms, A100).
    """
    hid = tokens * S.d_model
    rows = vocab_pad / S.tp                                   # table rows on this rank
    segs = sp.Min(tokens, rows)                               # segment slots launched (max_segments)
    partial = segs + tokens / 10                              # fp32 partial sums of <= 10 rows (NROWS_PER_THREAD)
    b_bwd = (S.grad_bytes * rows * S.d_model                  # zero-fill the gradient table
             + S.act_bytes * hid * (1 + S.learned_pos)        # read the incoming gradient (+ position grad)
             + 2 * S.f32_bytes * partial * S.d_model          # fp32 partials: written, then read to sum
             + S.grad_bytes * segs * S.d_model)               # summed rows scattered into the table
    emb = Op("embedding", "embed", hid, S.act_bytes * hid * (2 + S.learned_pos), hid, b_bwd)
    return [emb]


def head_ops() -> list[Op]:
    """Last stage: final norm, LM head GEMM over the padded vocabulary, vocab-parallel cross-entropy."""
    hid = tok_sp * S.d_model
    logits = tokens * vocab_pad / S.tp
    return [
        elementwise("final_norm", "norm", hid, 1, 1, 2, 1, NORM_FLOPS),
        gemm("lm_head", tokens, S.d_model, vocab_pad / S.tp, hp=True),
        # fp32 softmax over logits: read logits (2 B), write fp32 (4 B) forward; read, write grad backward.
        # FLOP per logit: forward 5 = max, subtract, exp, sum, normalise (Megatron cross_entropy.py:
        # exp_logits /= sum_exp_logits); backward 2 = (softmax - one-hot) x the loss gradient
        Op("cross_entropy", "ce", 5 * logits, logits * (S.act_bytes + S.f32_bytes), 2 * logits, logits * (S.f32_bytes + S.act_bytes)),
    ]


def adam_op(n_params) -> Op:
    """Fused Adam over n parameters: ~12 FLOP each (m = b1 m + (1-b1) g: 3; v = b2 v + (1-b2) g^2: 4;
    sqrt(v) + eps and the divide: 3; p -= lr x update: 2; the bias corrections are per-tensor scalars);
    read and write fp32 master + 2 moments, read the gradient twice (global norm for clipping, then the
    update), write the 2-byte weights."""
    n = n_params
    return Op("adam", "optim", 12 * n, n * (2 * S.opt_bytes + 2 * S.grad_bytes + S.act_bytes),
              sp.Integer(0), sp.Integer(0))


def muon_op(flops) -> Op:
    """Muon's Newton-Schulz iterations on this rank's share of the weight matrices (memory.muon_flops_rank): GEMMs on
    whole matrices at the 16-bit tensor-core rate (hp), their size saturation at the hidden size (ASSUMED: the smaller
    side of most of the matrices); HBM traffic left out (each iteration's GEMMs are compute-bound at m >= 1024)."""
    return Op("muon_newton_schulz", "gemm", flops, sp.Integer(0), sp.Integer(0), sp.Integer(0), dmin=S.d_model,
              on=S.muon, hp=True)


def op_time(op: Op, direction: str) -> sp.Expr:
    """Calibrated roofline time of ``op`` in ``direction`` ('fwd' or 'bwd')."""
    f, b = (op.f_fwd, op.b_fwd) if direction == "fwd" else (op.f_bwd, op.b_bwd)
    key = (op.cls, direction)
    if op.kernels:                  # unfused attention: each batched GEMM is a kernel with its own roofline
        return sp.Add(*[op.on * S.T0[key] + bmm_time(kn, d) for d, kn in op.kernels if d == direction])
    if op.head_dim is not None:     # flash attention: its own shape curve (attention_shape)
        i = ("fwd", "bwd").index(direction)
        shape = attention_shape(op.head_dim, op.ctas[i], op.kblock[i], S.sms,
                                *[S.ATTN_SHAPE[k, direction] for k in ("d_soft", "d_reg", "uneven", "d_io")])
        compute = f * shape / (peak_attention[direction] * clock_eff * S.EFF_FLOP[key] * S.flash_speed)
    elif op.peak_fraction is not None:
        compute = f / (S.peak_hp * clock_eff * op.peak_fraction)
    elif op.cls in ("gemm", "attn"):
        sat = op.dmin / (op.dmin + S.gemm_dhalf) if op.dmin is not None else 1
        # attention core and 16-bit GEMMs at the 16-bit peak; a low-precision GEMM at the recipe's, except in the
        # share hp_frac of the layers the recipe keeps in 16 bits (S.peak = S.peak_hp in 16-bit training); the recipe's
        # kernels at lp_rate of a 16-bit GEMM's fraction of peak (precision.py gemm_rate, hardware max_matmul_fp4)
        inv_peak = 1 / S.peak_hp if (op.hp or op.cls == "attn") else ((1 - S.hp_frac) / (S.peak * S.lp_rate)
                                                                        + S.hp_frac / S.peak_hp)
        compute = f * inv_peak / (clock_eff * S.EFF_FLOP[key] * sat)
    else:
        compute = f / (S.peak_vec * clock_eff * S.EFF_FLOP[key])
    memory = b / (S.hbm_bw * S.EFF_MEM[key])
    t0 = op.on * op.launches * S.T0[key]
    if direction == "bwd" and op.wgrad_extra != 0:
        # a GEMM's backward as its two kernels (gemm): each half the FLOPs and bytes, the weight gradient also the
        # main-grad traffic; the same as one roofline of the sum while both are compute-bound or wgrad_extra = 0
        half_c, half_m = compute / 2, memory / 2
        wgrad_m = half_m + op.wgrad_extra / (S.hbm_bw * S.EFF_MEM[key])
        return t0 + sp.Max(half_c, half_m, evaluate=False) + sp.Max(half_c, wgrad_m, evaluate=False)
    # unevaluated: sympy's search for common zeros of two large arguments (Max.__new__ _find_localzeros) costs
    # seconds per op and never simplifies these (a compute and a memory time of the same op)
    return t0 + sp.Max(compute, memory, evaluate=False)


def ops_time(ops: list[Op], direction: str) -> sp.Expr:
    return sp.Add(*[op_time(o, direction) for o in ops])


def ops_flops(ops: list[Op], kind: str) -> sp.Expr:
    """Sum of FLOPs: kind 'model_fwd' (MFU convention), 'fwd' or 'bwd' (executed)."""
    attr = {"model_fwd": "model_f_fwd", "fwd": "f_fwd", "bwd": "f_bwd"}[kind]
    return sp.Add(*[getattr(o, attr) for o in ops])
