"""Parameters and memory per GPU: weights, gradients, optimizer state, activations, logits, reserve.

Parameter count as in Narayanan et al. 2021 eq. 2 generalised to GQA, gated MLPs and MoE.
Activations per layer follow Korthikanti et al. 2022 (Table 2): sbh(34 + 5as/h) bytes with
2-byte elements and dropout, sbh(10 + 24/t + 5as/(ht)) with TP, sbh/t (34 + 5as/h) with TP+SP,
the 5as/h score term dropped by selective recomputation or flash attention, and 2sbh per layer
(the layer input) with full recomputation.

Sharding groups (Megatron-Core, megatron/core/distributed/distributed_data_parallel.py and
parallel_state.py): dense parameters are replicated over d x c ranks (``intra_dp_cp_group``), expert
parameters over the expert-data-parallel group of d c / e ranks (``intra_expt_dp_group``); the
distributed optimizer / ZeRO / FSDP shard each kind over its own group. Megatron's estimator
(megatron/training/theoretical_memory_usage.py) bills dense state with data_parallel_size and expert
state with expert_data_parallel_size the same way.

Two pipeline stages are compared (Korthikanti et al. 2022 sec 4.2.3; Megatron's estimator takes the
first): the first holds the embedding and the activations of all its in-flight micro-batches, the
last holds the LM head, its logits and fewer in-flight micro-batches; ``total`` is the heavier.
"""
from __future__ import annotations

import sympy as sp

from . import comm as CM
from . import compute as C
from . import mamba as MB
from . import pipeline as PL
from . import symbols as S

h, f = S.d_model, S.ffn_hidden
one = lambda x: sp.Min(1, x - 1)    # noqa: E731  1 when an integer size x > 1, else 0

# ---- parameters ---------------------------------------------------------------------------
# attention: Q (a d_h), K and V (a_kv d_h each) projections from h, the output projection a d_h -> h
_gqa_kv = S.kv_heads * C.d_head
_gqa_params = h * (C.q_width + 2 * _gqa_kv) + C.q_width * h + S.biases * (C.q_width + 2 * _gqa_kv + h)
# MLA (DeepSeek-V3 report sec 2.1.1; Megatron-Core multi_latent_attention.py, no biases on the projections):
# replicated on every TP rank: W_DQ h x r_q, W_DKV and W_KR h x (r_kv + d_r), the RMSNorms on r_q and r_kv;
# split over TP: W_UQ (with W_QR) r_q x a (d_n + d_r) (without r_q: h x a (d_n + d_r)), W_UK and W_UV
# r_kv x a (d_n + d_v), the output projection a d_v x h (+ its bias)
_mla_repl = (C.mla_q_lora * (h * S.q_lora + S.q_lora * (1 + S.biases)) + h * (S.kv_lora + S.qk_rope)
             + S.kv_lora * (1 + S.biases))
_mla_split = ((C.mla_q_lora * S.q_lora + (1 - C.mla_q_lora) * h) * S.n_heads * C.mla_qk
              + S.kv_lora * S.n_heads * (S.qk_nope + S.v_head) + S.n_heads * S.v_head * h + S.biases * h)
attn_params_split = (1 - C.mla) * _gqa_params + C.mla * _mla_split    # split over the t ranks of TP
attn_params_repl = C.mla * _mla_repl                                  # held whole by every TP rank
attn_params = attn_params_split + attn_params_repl
attn_params_rank = attn_params_split / S.tp + attn_params_repl


def mlp_params(width, io=h):
    """An MLP io -> width (x2 gated) -> io with its biases (io: h, or a LatentMoE expert's l)."""
    return io * width * (1 + S.gated) + width * io + S.biases * (width * (1 + S.gated) + io)


expert_params = mlp_params(S.moe_ffn, C.h_routed)          # one routed expert (the MLP of a dense model)
dense_mlp_params = mlp_params(f)                           # the MLP of a leading dense layer of a MoE
shared_params = mlp_params(S.shared_ffn) - S.biases * h * (1 - sp.Min(1, S.shared_ffn))   # 0 without
norm_params = 2 * h * (1 + S.biases)
router_params = C.moe * h * S.n_experts
# LatentMoE's fc1_latent_proj h x l and fc2_latent_proj l x h (Megatron-Core moe_layer.py, parallel_mode "duplicated":
# every TP rank holds both whole, like the router); 0 without
latent_params = C.latent * (2 * h * S.moe_latent + S.biases * (S.moe_latent + h))
# a hybrid Mamba-2 pattern's average layer (formulas/mamba.py): each sublayer in its share of the layers, one pre-norm
# per sublayer ((1 + 1 + 0) / 2 = the transformer layer's two norms)
fa, fm, fx = S.attn_frac, S.mlp_frac, S.mamba_frac
hybrid_norms = (fa + fm + fx) / 2
# Megatron-Core moe_layer_freq: l_d leading dense layers, the other l - l_d MoE (all of them for a dense model)
hybrid_layer_params = (fa * attn_params + fm * (S.n_experts * expert_params + router_params + latent_params + shared_params)
                    + fx * MB.mixer_params + hybrid_norms * norm_params)
moe_layer_params = hybrid_layer_params.xreplace(MB.TRANSFORMER)           # a transformer's MoE (or dense) layer
dense_layer_params = attn_params + dense_mlp_params + norm_params
layer_params = moe_layer_params
embedding_params = S.vocab * h * (2 - S.tied) + S.learned_pos * S.seq_len * h + h * (1 + S.biases)
total_params = (S.n_layers - S.dense_layers) * hybrid_layer_params + S.dense_layers * dense_layer_params + embedding_params
# active parameters per token (MoE: top-k routed experts, the shared experts, the router)
active_params = ((S.n_layers - S.dense_layers) * (fa * attn_params + fm * (S.top_k * expert_params + router_params
                                                                      + latent_params + shared_params)
                                                + fx * MB.mixer_params + hybrid_norms * norm_params)
                 + S.dense_layers * dense_layer_params + embedding_params)

# per rank of a stage: l/p layers split by t (experts by e as well), plus an embedding table V_pad h / t
# (first stage; the last stage holds the LM head or the tied copy), both when p = 1 and untied; the
# learned position table only on the first stage. The leading dense layers sit on the first stage
# (Megatron-Core builds layers in order; the first stage of p > 1 holds min(l_d, l/p) of them).
# Multi-token prediction (DeepSeek-V3 report sec 2.2; Megatron-Core transformer/multi_token_prediction.py): D layers
# on the last stage, each a transformer layer of the model's (MoE) kind, RMSNorms enorm, hnorm and final_layernorm
# (h each) and eh_proj 2h x h (no bias); the embedding and the LM head are the main model's (shared), so they are not
# MTP parameters. Megatron-Core GPTModel builds the embedding on the last stage as well when it runs MTP
# (pre_process or mtp_process): one more V_pad h / t table there when p > 1 and the head is untied.
mtp_layer_params = moe_layer_params + 2 * h * h + 3 * h * (1 + S.biases)
mtp_params = S.mtp * mtp_layer_params
dense_first = sp.Min(S.dense_layers, PL.stage_layers)      # dense layers on the first stage
dense_last = (1 - PL.has_pp) * dense_first                 # ... and on the last (the same stage when p = 1)
hybrid_layer_params_rank = (fa * attn_params_rank + fm * (S.n_experts / S.ep * expert_params / C.etp + router_params
                                                 + latent_params + shared_params / S.tp)
                     + fx * MB.mixer_params / S.tp + hybrid_norms * norm_params)
dense_layer_rank = attn_params_rank + dense_mlp_params / S.tp + norm_params
layer_params_rank = hybrid_layer_params_rank.xreplace(MB.TRANSFORMER)  # a transformer's MoE (or dense) layer
mtp_rank = S.mtp * (layer_params_rank + 2 * h * h / S.tp + 3 * h * (1 + S.biases))       # on the last stage
mtp_expert_rank = S.mtp * C.moe * S.n_experts / S.ep * expert_params / C.etp
mtp_embedding_rank = sp.Min(1, S.mtp) * PL.has_pp * (1 - S.tied) * C.vocab_pad * h / S.tp
# DualPipe: rank 0 also holds the mirror stage p - 1 (pipeline.py), its layers without the leading dense ones
mirror = S.dualpipe * PL.stage_layers
# DualPipe with a pipeline layout (pp_layout = 1; layout.stage_counts, the balanced split of stacks that state one):
# the edge rank holds the first stage's l_E layers (l_E,d dense) and the last stage's l_L (l_L,d); the other ranks
# hold two stages of l_o layers on average (the "last" totals below). dual_lay = 1 in that case, 0 otherwise
dual_lay = S.dualpipe * S.pp_layout
edge_layers = (1 - dual_lay) * (PL.stage_layers + mirror) + dual_lay * (S.layout_first + S.layout_last)
dense_edge = (1 - dual_lay) * dense_first + dual_lay * (S.layout_first_dense + S.layout_last_dense)
expert_params_rank = (C.moe * (edge_layers - dense_edge) * fm * S.n_experts / S.ep * expert_params / C.etp
                      + PL.both_edges * mtp_expert_rank)
expert_last_rank = C.moe * (PL.stage_layers - dense_last) * fm * S.n_experts / S.ep * expert_params / C.etp + mtp_expert_rank
embedding_params_rank = (C.vocab_pad * h / S.tp * (1 + (1 - S.tied) * PL.both_edges)
                         + S.learned_pos * S.seq_len * h)
stage_params_rank = ((edge_layers - dense_edge) * hybrid_layer_params_rank + dense_edge * dense_layer_rank
                     + embedding_params_rank + PL.both_edges * mtp_rank)                   # first stage
last_params_rank = ((PL.stage_layers - dense_last) * hybrid_layer_params_rank + dense_last * dense_layer_rank
                    + embedding_params_rank - PL.has_pp * S.learned_pos * S.seq_len * h   # last stage
                    + mtp_rank + mtp_embedding_rank)
# DualPipe with a layout: the busiest other rank, its two stages of 2 l_o layers (2 l_o,d dense), no edge
mid_dense = 2 * S.layout_mid_dense
mid_params_rank = (2 * S.layout_mid - mid_dense) * hybrid_layer_params_rank + mid_dense * dense_layer_rank
expert_mid_rank = C.moe * (2 * S.layout_mid - mid_dense) * fm * S.n_experts / S.ep * expert_params / C.etp
last_params_rank = (1 - dual_lay) * last_params_rank + dual_lay * mid_params_rank
expert_last_rank = (1 - dual_lay) * expert_last_rank + dual_lay * expert_mid_rank
dense_params_rank = stage_params_rank - expert_params_rank
dense_last_rank = last_params_rank - expert_last_rank

dpc, edp = CM.dp_cp_size(), CM.expert_dp_size()


def sharded(dense, expert, zero):
    """Elements per rank of a state replicated over the data-parallel groups, sharded when ``zero`` = 1:
    dense over the d c / r ranks of one replica (comm.shard_size; d c when r = 1), experts over d c / e ranks
    (ASSUMED: the experts' state keeps its expert-DP sharding under HSDP)."""
    return dense / CM.shard_size() ** zero + expert / edp ** zero


def states(dense, expert):
    """(weights, gradients, optimizer state) bytes per rank of a stage with these parameter counts. The embedding
    and output tables keep Adam's state under Muon (opt_bytes_emb; the same as opt_bytes under Adam); the norms and
    biases that Muon also leaves to Adam are counted at opt_bytes (ASSUMED: under 0.1 % of the parameters)."""
    emb = sharded(embedding_params_rank, 0, S.z_os) * (S.opt_bytes_emb - S.opt_bytes)
    return (sharded(dense, expert, S.z_param) * S.act_bytes, sharded(dense, expert, S.z_grad) * S.grad_bytes,
            sharded(dense, expert, S.z_os) * S.opt_bytes + emb)


# ---- Muon's Newton-Schulz work per rank -----------------------------------------------------
# Muon (Jordan et al. 2024; Megatron-Core optimizer_config.py optimizer='muon', emerging_optimizers.py) replaces each
# weight matrix's update by its orthogonalized momentum: muon_num_ns_steps = 5 quintic Newton-Schulz iterations on the
# whole m x n matrix (m <= n): A = X X^T (2 m^2 n FLOPs), B = b A + c A A (2 m^3), X = a X + B X (2 m^2 n). The matrices
# are the model's 2-D weights: Q, K and V apart (muon_split_qkv = True), the output projection, each expert's fc1 (the
# gated pair as one matrix) and fc2, the router, LatentMoE's projections, the shared experts, MLA's projections. Under
# tensor parallelism each rank gathers the whole matrix and orthogonalizes it (muon_tp_mode 'duplicated', the
# default); with the distributed optimizer the layer-wise distributed optimizer (dist_muon) gives each data-parallel
# rank whole matrices, a 1/(d c) share (experts: 1/expert-dp). The fp32 iterations run at the 16-bit tensor-core
# rate (muon_fp32_matmul_prec 'medium'). Not priced: Mamba mixers' matrices, MTP layers, the TP gather, the
# imbalance of whole-matrix shares.
NS_STEPS = 5


def ns_flops(a, b):
    """Newton-Schulz FLOPs of one a x b matrix: 5 (4 m^2 n + 2 m^3), m = min(a, b), n = max(a, b)."""
    m, n = sp.Min(a, b), sp.Max(a, b)
    return NS_STEPS * m ** 2 * (4 * n + 2 * m)


def _ns_mlp(width, io=h):
    return ns_flops((1 + S.gated) * width, io) + ns_flops(io, width)


_ns_attn = ((1 - C.mla) * (ns_flops(C.q_width, h) + 2 * ns_flops(_gqa_kv, h) + ns_flops(h, C.q_width))
            + C.mla * (C.mla_q_lora * (ns_flops(S.q_lora, h) + ns_flops(S.n_heads * C.mla_qk, S.q_lora))
                       + (1 - C.mla_q_lora) * ns_flops(S.n_heads * C.mla_qk, h)
                       + ns_flops(S.kv_lora + S.qk_rope, h) + ns_flops(S.n_heads * (S.qk_nope + S.v_head), S.kv_lora)
                       + ns_flops(h, S.n_heads * S.v_head)))
_ns_layer_dense = (fa * _ns_attn + fm * C.moe * (ns_flops(S.n_experts, h) + C.latent * 2 * ns_flops(S.moe_latent, h)
                                                 + sp.Min(1, S.shared_ffn) * _ns_mlp(S.shared_ffn)))
_ns_layer_expert = fm * S.n_experts / S.ep * _ns_mlp(S.moe_ffn, C.h_routed)   # this rank's routed experts (dense: the MLP)
_moe_layers = edge_layers - dense_edge
muon_flops_rank = S.muon * sharded(_moe_layers * _ns_layer_dense + dense_edge * (_ns_attn + _ns_mlp(f)),
                                   _moe_layers * _ns_layer_expert, S.z_os)


weights_first, gradients_first, optimizer_first = states(dense_params_rank, expert_params_rank)
weights_last, gradients_last, optimizer_last = states(dense_last_rank, expert_last_rank)

# ---- activations --------------------------------------------------------------------------
sbh = C.tokens * h                                         # (s/c) b h elements
# GEMM inputs saved for the weight gradient (QKV, fc1, the attention projection's and fc2's inputs) take gin_bytes per
# element: the activation dtype, or under an FP8/FP4 recipe the quantized copy Transformer Engine keeps (base/precision.py
# saved_bytes); norm inputs, flash attention's Q, K, V and the activation function's input stay in the activation dtype
# 2 norm inputs, QKV and fc1 inputs; 2 dropout masks (1 B)
_replicated = sbh * (2 * S.act_bytes + 2 * S.gin_bytes + 2 * S.dropout * S.mask_bytes)
# Q, K, V and the attention-projection input (flash attention saves Q, K, V and O; O is the projection's input):
# Q and O a d_h, K and V a_kv d_h wide; MLA: Q and K a (d_n + d_r), V and O a d_v (K and V expanded per head)
# QK-norm keeps its input, the queries and keys before the norm (TE / torch RMSNorm save their input; its fp32 row
# statistics, 4 B per head and token, are left out); RoPE after it saves nothing
_attn_split = C.tokens * (S.act_bytes * (S.n_heads * C.d_qk + C.kv_heads_eff * (C.d_qk + C.d_v))
                          + S.gin_bytes * S.n_heads * C.d_v
                          + S.qk_norm * (1 - C.mla) * S.act_bytes * (S.n_heads + C.kv_heads_eff) * C.d_qk)
# MLA, outside the TP region (s/t tokens under SP, like the norm inputs): each RMSNorm's input and the up
# projection's input (its output) for r_q and r_kv, and the shared k_rope (d_r) that RoPE reads; the down
# projections read the attention norm's output, already counted in _replicated
_mla_replicated = C.mla * S.act_bytes * C.tokens * (2 * C.mla_q_lora * S.q_lora + 2 * S.kv_lora + S.qk_rope)


def _mlp_split(copies, width):
    """MLP: the activation's input(s) (1 + gated, the activation dtype) and its output, fc2's input (gin_bytes)."""
    return copies * C.tokens * width * (S.act_bytes * (1 + S.gated) + S.gin_bytes)


_split = (_attn_split + _mlp_split(1 + C.moe * (C.routed - 1), S.moe_ffn)   # routed experts (a dense MLP: 1 copy)
          + _mlp_split(1, S.shared_ffn))                                     # shared experts
_split_dense = _attn_split + _mlp_split(1, f)                               # a leading dense layer
_scores = (S.n_heads * C.tokens * S.seq_len                          # b a (s/c) s score elements
           * (S.act_bytes + S.dropout * (S.mask_bytes + S.act_bytes)))       # softmax out, dropout mask, dropout out
# a hybrid pattern's average layer: the attention half (a norm input, the QKV input, a dropout mask, Q K V O, the
# scores) in attn_frac of the layers, the MLP half in mlp_frac, the Mamba mixer's (formulas/mamba.py) in mamba_frac
_rep_half = _replicated / 2                                # one norm input, one projection input, one mask
_mlp_act = _mlp_split(1 + C.moe * (C.routed - 1), S.moe_ffn) + _mlp_split(1, S.shared_ffn)
# LatentMoE: the l-wide output of fc1_latent_proj and the combined l-wide input of fc2_latent_proj, saved for their
# weight gradients, on the rank's own (SP-split) tokens
_latent_act = C.latent * 2 * S.act_bytes * C.tokens * S.moe_latent
# Megatron-Core's selective recomputation by module (compute._MODULE_OPS; its sources): what each module no longer
# keeps for the backward. Output-discarding modules (layernorm, moe_act, mla_up_proj) free their output, the tensor
# the next GEMM saves; under FP8/FP4 Megatron-Core makes that GEMM save the original 16-bit input instead of its
# quantized copy (set_save_original_input on linear_qkv, linear_fc1, the experts' linear_fc2), so the freed bytes are
# that saved input's (gin_bytes here, as the rest of this accounting counts it). Checkpointed modules (mlp, moe,
# shared_experts) keep their input and free what they save inside: a dense MLP's input is the residual stream (its
# norm is fused into linear_fc1), so its fc1 input (the norm's output) goes too; an MoE layer's input is the
# pre-MLP norm's output, which stays.
_gin_h = S.gin_bytes * sbh / C.sp_div                      # one norm output on the rank's (SP-split) tokens
_qkv_saved = C.tokens * S.act_bytes * (S.n_heads * C.d_qk + C.kv_heads_eff * (C.d_qk + C.d_v))
_act_out = (1 + C.moe * (C.routed - 1)) * C.tokens * S.moe_ffn * S.gin_bytes        # the routed experts' fc2 input
# mla_up_proj also frees the latent norms' outputs, the up projections' saved inputs (the norms are fused into them);
# it keeps the checkpoint's inputs, the compressed latents
_latent_norm_out = C.mla * S.act_bytes * C.tokens * (C.mla_q_lora * S.q_lora + S.kv_lora)
_freed_attn = S.rc_sel * C.mla * (S.rcm_norm * _gin_h + S.rcm_mla_up * (_qkv_saved / S.tp + _latent_norm_out / C.sp_div))
_freed_moe = S.rc_sel * C.moe * (S.rcm_norm * _gin_h
                                 + S.rcm_moe * (_mlp_act / S.tp + _latent_act / C.sp_div)
                                 + (1 - S.rcm_moe) * (S.rcm_moe_act * _act_out + S.rcm_shared
                                                      * _mlp_split(1, S.shared_ffn)) / S.tp)


def _freed_dense_mlp(width):
    """What the selective module mlp frees in a dense layer whose MLP is ``width`` wide."""
    return S.rc_sel * S.rcm_mlp * (_mlp_split(1, width) / S.tp + _gin_h)


hybrid_layer_activations = ((fa * (_rep_half + _mla_replicated) + fm * (_rep_half + _latent_act)
                             + fx * MB.mixer_act_replicated) / C.sp_div
                     + (fa * _attn_split + fm * _mlp_act + fx * MB.mixer_act_split) / S.tp
                     + fa * (1 - S.flash) * (1 - S.rc_sel * S.rcm_core) * _scores / S.tp
                     - fa * _freed_attn - fm * (_freed_moe + (1 - C.moe) * _freed_dense_mlp(S.moe_ffn)))
layer_activations = hybrid_layer_activations.xreplace(MB.TRANSFORMER)     # a transformer's MoE (or dense) layer
# a leading dense layer: the MoE layer's activations with the dense MLP's in place of the experts', and what the
# selective modules free in a dense MLP in place of what they free in an MoE
dense_layer_activations = (layer_activations + (_split_dense - _split) / S.tp - _latent_act / C.sp_div
                           + _freed_moe + (1 - C.moe) * _freed_dense_mlp(S.moe_ffn) - _freed_dense_mlp(f))
layer_input = S.act_bytes * sbh / C.sp_div                 # what full recomputation keeps per layer


def _op_saved(width_of):
    """Bytes per layer that torchtitan's op policy saves (compute.OP_SAVED): the block input, the SDPA output (a d_v
    / t per token) and its fp32 log-sum-exp (a / t), each saved GEMM's share of its output, and under TP with SP the
    two reduce-scattered block outputs (h / t each; the policy saves reduce_scatter_tensor); ``width_of``: each
    GEMM's output width per token on this rank (the row-parallel w2 writes its partial sum, h wide, before the
    reduce-scatter). A hybrid average layer scales each part by its sublayer's share."""
    saved = sum((share * width_of[name] for name, share in C.OP_SAVED.items()), sp.Integer(0))
    return (S.act_bytes * C.tokens * (hybrid_norms * h / C.sp_div
                                      + fa * (S.n_heads * C.d_v / S.tp + S.seq_par * 2 * h / S.tp) + saved)
            + fa * S.f32_bytes * C.tokens * S.n_heads / S.tp)


_widths = {"qkv_proj": fa * (C.q_width + 2 * _gqa_kv) / S.tp, "router": fm * S.n_experts,
           "mlp_up": fm * S.moe_ffn * (1 + S.gated) / S.tp, "mlp_down": fm * h,
           "shared_up": fm * S.shared_ffn * (1 + S.gated) / S.tp, "shared_down": fm * sp.Min(1, S.shared_ffn) * h}
op_stored = _op_saved(_widths)
op_stored_dense = _op_saved({**_widths, "qkv_proj": (C.q_width + 2 * _gqa_kv) / S.tp, "router": 0,
                             "mlp_up": f * (1 + S.gated) / S.tp, "mlp_down": h, "shared_up": 0, "shared_down": 0}
                            ).xreplace({fa: 1, fm: 1, fx: 0, C.moe: 0})
stored_per_layer = (S.rc_full * layer_input + S.rc_op * op_stored
                    + (1 - S.rc_full - S.rc_op) * hybrid_layer_activations)
stored_dense = S.rc_full * layer_input + S.rc_op * op_stored_dense + (1 - S.rc_full - S.rc_op) * dense_layer_activations
# one layer's, while its backward recomputes it (whenever any layer is recomputed: rc_full a share of the layers)
working_set = (S.rc_any + S.rc_op) * sp.Max(hybrid_layer_activations, dense_layer_activations)


def stage_stored(n_dense, n=PL.stage_layers):
    """Activations one micro-batch leaves on a stage of n layers (default l/p), n_dense of them dense."""
    return (n - n_dense) * stored_per_layer + n_dense * stored_dense

# LM head (vocab-parallel, Megatron tensor_parallel/cross_entropy.py): the (s/c) b V_pad / t logits in
# the activation dtype, and their fp32 copy (exp_logits, saved for the backward) for every micro-batch
# whose loss waits for its backward (1F1B: one; GPipe: all m); plus the head's input (final-norm output,
# saved by the LM-head GEMM for its weight gradient; SP-split). Megatron's estimator adds 4 s b h (1 + V/h) / t
# for pp = 1 (theoretical_memory_usage.py).
# Torch's eager cross entropy on fp32-upcast logits (ce_eager = 1; torchtitan components/loss.py, stacks/*.yaml
# loss_kernel): each in-flight micro-batch keeps the fp32 log-softmax output, and at the loss's backward the NLL
# gradient and the log-softmax gradient (fp32 both) are live at once: 2 f32 bytes per logit in place of the bf16 logits.
head_in_flight = S.gpipe * PL.micro_batches + (1 - S.gpipe)
# Under torch.compile (ce_compiled = 1) the upcast, log-softmax and its gradient fuse: the 16-bit logits are saved
# and the backward writes a 16-bit gradient beside them (torchtitan build_cross_entropy_loss with training.compile).
logits = C.tokens * C.vocab_pad / S.tp * ((1 - S.ce_eager) * S.act_bytes + S.ce_eager * 2 * S.f32_bytes
                                          + ((1 - S.ce_compiled) * S.f32_bytes + S.ce_compiled * S.act_bytes)
                                          * head_in_flight)
head_input = S.act_bytes * sbh / C.sp_div
only = 1 - PL.has_pp                                       # p = 1: one stage holds embedding and head
both = PL.both_edges                                       # ... or DualPipeV's rank 0 (its first and last stage)
# an MTP layer keeps its transformer layer's activations and the inputs of enorm, hnorm (h each), eh_proj (2h;
# SP-split, gathered again in backward) and final_layernorm (h), and its own logits and LM-head input
mtp_stored = S.mtp * (S.rc_full * layer_input + (1 - S.rc_full) * layer_activations + 5 * S.act_bytes * sbh / C.sp_div)


def offloaded(n_dense):
    """What Transformer Engine's CPU offload takes off the GPU (p = 1: Megatron-Core refuses --cpu-offloading with
    pipeline parallelism or recomputation, transformer_config.py): the saved activations of the first n_off layers
    (n_dense of the model are dense, and come first). TE's default synchronizer (transformer_engine/pytorch/
    cpu_offload.py DefaultOffloadSynchronizer) starts layer i's copy when layer i + 1's forward starts and releases its
    GPU memory before layer l - n_off + i runs, so at most l - n_off layers' activations are on the GPU at once."""
    off_dense = sp.Min(S.offload_layers, n_dense)
    return only * (off_dense * stored_dense + (S.offload_layers - off_dense) * stored_per_layer)


# DualPipe with a layout: p + 1 micro-batches in flight (pipeline.in_flight) of the edge rank's mean stage, (l_E + l_L)/2
# layers; its busiest other rank (the "last" totals) holds p + 1 of its mean stage, l_o layers, and no edge
_edge_stage = stage_stored((S.layout_first_dense + S.layout_last_dense) / 2, (S.layout_first + S.layout_last) / 2)
activations_first = (PL.in_flight() * ((1 - dual_lay) * (stage_stored(dense_first) - offloaded(dense_first))
                                       + dual_lay * _edge_stage + only * mtp_stored)
                     + (both - only) * mtp_stored + working_set + both * (1 + S.mtp) * (logits + head_input))
activations_mid = PL.in_flight() * stage_stored(S.layout_mid_dense, S.layout_mid) + working_set
activations_last = (PL.in_flight_last() * (stage_stored(dense_last) - offloaded(dense_last) + mtp_stored) + working_set
                    + (1 + S.mtp) * (logits + head_input))
# ZeRO-3 without pipelining: the gathered parameters of the layer being computed (and the next, prefetched).
# With p > 1 (torch.distributed.pipelining, FSDP2): torchtitan keeps the stage's parameters gathered between forward
# and backward (parallelize_llama.py apply_fsdp: reshard_after_forward = False when PP is on, "to avoid
# per-microbatch all-gathers"), and the pipeline stage turns gradient sync off for every micro-batch but the last
# (torch/distributed/pipelining/stage.py backward_maybe_with_nosync: set_requires_gradient_sync(False)), so FSDP2
# accumulates unsharded gradients, upcast to the reduce dtype (torch/distributed/fsdp/_fully_shard/_fsdp_param.py
# to_accumulated_grad_if_needed): the stage's parameters in the activation dtype and its gradients in grad_bytes.
zero3_buffers = (S.z_param * (1 - PL.has_pp) * 2 * S.act_bytes
                 * sp.Max(hybrid_layer_params_rank, sp.Min(1, S.dense_layers) * dense_layer_rank))
_held = S.z_param * PL.has_pp                              # 1: FSDP under pipelining
weights_first = weights_first + _held * stage_params_rank * S.act_bytes
gradients_first = gradients_first + _held * stage_params_rank * S.grad_bytes
weights_last = weights_last + _held * last_params_rank * S.act_bytes
gradients_last = gradients_last + _held * last_params_rank * S.grad_bytes

# torch DDP (gradient_as_bucket_view=False, its default): the Reducer copies each param.grad into a flat bucket of the
# same dtype and all-reduces the bucket (torch/nn/parallel/distributed.py; reducer.cpp mark_variable_ready copies
# the gradient into bucket.gradients), so unsharded gradients are held twice while more than one rank reduces them
_bucket = S.grad_bucket * (1 - S.z_grad) * sp.Min(1, S.dp - 1)
gradients_first = gradients_first + _bucket * stage_params_rank * S.grad_bytes
gradients_last = gradients_last + _bucket * last_params_rank * S.grad_bytes

first_total = weights_first + gradients_first + optimizer_first + activations_first + zero3_buffers
# DualPipeV: rank 0 holds the first and the last stage (the "first" totals above); the rank of the V's bottom holds
# two middle stages, neither edge: the first rank is the heaviest. DualPipe: ranks 0 and p - 1 hold the same two stages
# DualPipe with a layout: the busiest other rank instead (its weights, gradients and optimizer state are the "last" ones
# above, through last_params_rank)
activations_last = (1 - dual_lay) * activations_last + dual_lay * activations_mid
last_total = (1 - PL.dual) * (weights_last + gradients_last + optimizer_last + activations_last + zero3_buffers) \
    + (PL.dual - dual_lay) * first_total \
    + dual_lay * (weights_last + gradients_last + optimizer_last + activations_last + zero3_buffers)
last_heavier = sp.Piecewise((1, last_total > first_total), (0, True))
pick = lambda a_first, a_last: last_heavier * a_last + (1 - last_heavier) * a_first   # noqa: E731

weights = pick(weights_first, weights_last)
gradients = pick(gradients_first, gradients_last)
optimizer = pick(optimizer_first, optimizer_last)
activations = pick(activations_first, activations_last)
total = sp.Max(first_total, last_total, evaluate=False)   # unevaluated: see compute.op_time

# ---- reserve: memory a process holds outside PyTorch's tensors (not part of ``total``) ----------
# CUDA context (driver, loaded kernel modules): outside the caching allocator, seen only by nvidia-smi.
# NCCL: each communicator of more than one rank connects a ring/tree per channel with Simple, LL and LL128
# buffers per peer (NCCL src/init.cc DEFAULT_BUFFSIZE, DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE);
# point-to-point peers (pipeline neighbours, ring-attention neighbours, all-to-all peers of EP) each get
# Simple-protocol buffers only. Communicators of Megatron-Core: tp, the dp x cp group, the expert dp group,
# and the p2p peers of pp, cp, ep. Allocator fragmentation: the caching allocator's reserved memory above
# its allocated peak, a fraction of ``total``.
nccl_comms = one(S.tp) + one(dpc) + one(S.dp_rep) + C.moe * one(edp)
nccl_peers = 2 * PL.has_pp + 2 * one(S.cp) + C.moe * (S.ep - 1)
reserve_nccl = S.nccl_comm_bytes * nccl_comms + S.nccl_peer_bytes * nccl_peers
reserve_frag = S.alloc_frag * total
reserve = S.cuda_context + reserve_nccl + reserve_frag
