"""Parameters and memory per GPU: weights, gradients, optimizer state, activations.

Parameter count as in Narayanan et al. 2021 eq. 2 generalised to GQA, gated MLPs and MoE.
Activations per layer follow Korthikanti et al. 2022 (Table 2): sbh(34 + 5as/h) bytes with
2-byte elements and dropout, sbh(10 + 24/t + 5as/(ht)) with TP, sbh/t (34 + 5as/h) with TP+SP,
the 5as/h score term dropped by selective recomputation or flash attention, and 2sbh per layer
(the layer input) with full recomputation.
"""
from __future__ import annotations

from . import compute as C
from . import pipeline as PL
from . import symbols as S

h, f = S.d_model, S.ffn_hidden

# ---- parameters ---------------------------------------------------------------------------
attn_params = h * (h + 2 * C.kv_width) + h * h + S.biases * (2 * h + 2 * C.kv_width)
expert_params = h * f * (1 + S.gated) + f * h + S.biases * (f * (1 + S.gated) + h)
norm_params = 2 * h * (1 + S.biases)
router_params = C.moe * h * S.experts
layer_params = attn_params + S.experts * expert_params + router_params + norm_params
embedding_params = S.vocab * h * (2 - S.tied) + S.learned_pos * S.seq_len * h + h * (1 + S.biases)
total_params = S.layers * layer_params + embedding_params
# active parameters per token (MoE: top-k experts)
active_params = S.layers * (attn_params + S.top_k * expert_params + router_params + norm_params) + embedding_params

# per rank of the heaviest stage: l/p layers split by t (experts by e as well), plus an embedding
# table V_pad h / t (first stage; the last stage holds the LM head or the tied copy), both when p=1
# and untied
layer_params_rank = (attn_params / S.tp + S.experts / S.ep * expert_params / S.tp + router_params + norm_params)
expert_params_rank = C.moe * PL.stage_layers * S.experts / S.ep * expert_params / S.tp
embedding_params_rank = (C.vocab_pad * h / S.tp * (1 + (1 - S.tied) * (1 - PL.has_pp))
                         + S.learned_pos * S.seq_len * h)
stage_params_rank = PL.stage_layers * layer_params_rank + embedding_params_rank
dense_params_rank = stage_params_rank - expert_params_rank

# ---- states -------------------------------------------------------------------------------
weights = stage_params_rank * S.act_bytes / S.dp ** S.z_param
gradients = stage_params_rank * S.grad_bytes / S.dp ** S.z_grad
optimizer = stage_params_rank * S.opt_bytes / S.dp ** S.z_os

# ---- activations --------------------------------------------------------------------------
sbh = C.tokens * h                                         # (s/c) b h elements
_replicated = sbh * (4 * S.act_bytes + 2 * S.dropout * S.mask_bytes)      # 2 norm inputs, QKV and fc1 inputs; 2 dropout masks (1 B)
_split = S.act_bytes * (2 * sbh + 2 * C.tokens * C.kv_width  # Q, K, V, attention-projection input
                        + C.routed * C.tokens * f * (2 + S.gated))  # MLP: activation input(s) and output
_scores = (S.heads * C.tokens * S.seq_len                          # b a (s/c) s score elements
           * (S.act_bytes + S.dropout * (S.mask_bytes + S.act_bytes)))       # softmax out, dropout mask, dropout out
layer_activations = (_replicated / C.sp_div + _split / S.tp
                     + (1 - S.flash) * (1 - S.rc_sel) * _scores / S.tp)
layer_input = S.act_bytes * sbh / C.sp_div                 # what full recomputation keeps per layer
stored_per_layer = S.rc_full * layer_input + (1 - S.rc_full) * layer_activations
activations = (PL.in_flight() * PL.stage_layers * stored_per_layer
               + S.rc_full * layer_activations)            # one layer's working set while recomputing
# ZeRO-3: the gathered parameters of the layer being computed (and the next, prefetched)
zero3_buffers = S.z_param * 2 * layer_params_rank * S.act_bytes

total = weights + gradients + optimizer + activations + zero3_buffers
