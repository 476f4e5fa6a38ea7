"""Hybrid Mamba-2 models: the Mamba-2 mixer's operators, parameters and activations per rank, and the hybrid layer.

A hybrid model (Megatron-Core HybridModel, ``--hybrid-override-pattern``; megatron/core/ssm/mamba_block.py,
mamba_hybrid_layer_allocation.py) stacks layers of one sublayer each, every one pre-normed with its residual add:
``M`` a Mamba-2 mixer, ``*`` self-attention, ``-`` a dense MLP, ``E`` a MoE. A transformer layer is an attention
sublayer followed by an MLP sublayer. The formulas price the pattern's average layer: each operator of the
transformer layer's attention half is scaled by ``attn_frac`` (n_* / l), of its MLP half by ``mlp_frac``
((n_- + n_E) / l), and the Mamba mixer's operators by ``mamba_frac`` (n_M / l); l layers of that average are the
sum over the kinds of their counts. A transformer is (1, 1, 0): every expression equals the one without the
fractions. ASSUMED: every pipeline stage holds the pattern's kinds in proportion (l_kind / p each; Megatron-Core
splits the pattern's layers in order, so a stage's mix may differ by a layer or two of each kind).

The Mamba-2 mixer (Megatron-Core megatron/core/ssm/mamba_mixer.py MambaMixer, training path ``_ssm_training``;
Dao & Gu 2024, "Transformers are SSMs", arXiv 2405.21060, sec. 6-7 and the mamba_ssm kernels it calls):
in_proj h -> [z, x, B, C, dt] (2 d_in + 2 G N + n_h wide, column-parallel: heads and groups split over t),
the depthwise causal conv1d (width d_conv) + SiLU over [x, B, C], the SSD chunked scan
(mamba_ssm ops/triton/ssd_combined.py via mamba_split_conv1d_scan_combined), the RMSNorm of the gated output
(ExtendedRMSNorm, group_size d_in / G), out_proj d_in -> h (row-parallel): one TP collective pair per layer like
an attention or MLP block (in_proj gathers the SP-split input, out_proj reduce-scatters).
"""
from __future__ import annotations

from dataclasses import replace

import sympy as sp

from . import compute as C
from . import symbols as S

h = S.d_model
TRANSFORMER = {S.attn_frac: sp.Integer(1), S.mlp_frac: sp.Integer(1), S.mamba_frac: sp.Integer(0)}

# sizes (whole model; per rank divide heads and groups by t, Megatron-Core asserts both divisible)
d_inner = S.mamba_heads * S.mamba_hdim                                    # d_in = n_h P
in_proj_width = 2 * d_inner + 2 * S.mamba_groups * S.mamba_state + S.mamba_heads   # z, x, B, C, dt
conv_width = d_inner + 2 * S.mamba_groups * S.mamba_state                 # x, B, C pass the conv1d


def ssd_flops(tokens, heads, groups):
    """Matmul FLOPs of the SSD chunked scan, (forward, backward), for ``tokens`` tokens of ``heads`` heads in
    ``groups`` groups (P = head width, N = state, Q = chunk length), counted kernel by kernel from mamba_ssm
    ops/triton/ssd_combined.py (the chunked algorithm of Dao & Gu 2024 sec. 6: intra-chunk quadratic form, chunk
    states, state passing, state -> output):

    forward (_mamba_chunk_scan_combined_fwd): _chunk_state_fwd states = (B dt decay)^T x, 2 T n_h P N;
    _bmm_chunk_fwd CB = C B^T per chunk and group, 2 T G Q N (all Q x Q, not causal); _chunk_scan_fwd
    C . states, 2 T n_h P N, and (CB . decay . dt) x, 2 T n_h Q P of which the kernel runs the causal half
    (its loop over keys stops at the diagonal block): T n_h Q P. Forward = T (n_h (4 P N + Q P) + 2 G Q N).
    backward (_mamba_chunk_scan_combined_bwd): recomputes CB (2 T G Q N) and the states (2 T n_h P N), then
    dstates = C^T dout, dx from dstates and from CB^T dout (causal half), dB = x^T dstates, dC = dout states^T,
    dCB = dout x^T (causal half) and dB, dC from dCB (_bmm_chunk_bwd, 2 x 2 T G Q N):
    T (n_h (10 P N + 2 Q P) + 6 G Q N). The cumsum and state-passing kernels are elementwise (their bytes are in
    ssd_bytes, their few FLOPs left out). Megatron-LM's estimate (training.py mamba_layer_flops, "flops estimate
    for scan should be updated based on new SSD kernels") is 7 T d_in N."""
    P, N, Q = S.mamba_hdim, S.mamba_state, S.mamba_chunk
    fwd = tokens * (heads * (4 * P * N + Q * P) + 2 * groups * Q * N)
    bwd = tokens * (heads * (10 * P * N + 2 * Q * P) + 6 * groups * Q * N)
    return fwd, bwd


# the backward kernels (4 recomputed + 9 gradient kernels against the forward's 5) read and write operands of the
# forward's sizes about 2.5x as often (ASSUMED from the kernel list of _mamba_chunk_scan_combined_bwd: x, dout and
# the states are each read by several kernels)
SSD_BWD_BYTES = sp.Rational(5, 2)

# The rate of the SSD chunked-scan kernels (mamba_ssm ops/triton/ssd_*.py: chunk cumsum, chunk state, state passing,
# bmm chunk, chunk scan), as a fraction of the GPU's 16-bit tensor peak. MEASURED on one H100 (vllm-project/vllm#27299,
# 2025-10, the same Triton kernels copied into vLLM, forward of mamba_chunk_scan_combined): 1.07-1.29e7 tokens/s at
# 4k-262k tokens for 128 heads of width 64, state 128, one group; ssd_flops counts 5.3-6.4 MFLOP per token for those
# sizes (chunk 128-256), 57-82 TFLOP/s, 0.06-0.08 of the 989 TFLOP/s BF16 peak: 0.07. ASSUMED: the backward kernels
# run at the same fraction, and other GPUs at the same fraction of their own peak (no SSD microbenchmark here).
SSD_PEAK_FRACTION = sp.Rational(7, 100)


def ssd_bytes(tokens, heads, groups):
    """HBM bytes of the SSD forward kernels (bf16 operands of act_bytes, fp32 where the kernels keep fp32):
    _chunk_cumsum_fwd reads dt, writes dt and dA_cumsum in fp32 (3 n_h per token); _chunk_state_fwd reads x, B, dt,
    dA and writes the fp32 chunk states (n_h P N per chunk); _state_passing_fwd reads them and writes them in the
    activation dtype; _bmm_chunk_fwd reads C, B and writes CB in fp32 (G Q per token); _chunk_scan_fwd reads CB
    (once per group, ASSUMED the heads of a group hit L2), x, C, the states, dt, dA, z and writes the output and
    its ungated copy out_x. Per token: act (5 n_h P + 4 G N) + fp32 (7 n_h + 2 G Q) + (2 fp32 + 2 act) n_h P N / Q."""
    P, N, Q = S.mamba_hdim, S.mamba_state, S.mamba_chunk
    a, f = S.act_bytes, S.f32_bytes
    return tokens * (a * (5 * heads * P + 4 * groups * N) + f * (7 * heads + 2 * groups * Q)
                     + (2 * f + 2 * a) * heads * P * N / Q)


def scaled(op: C.Op, k) -> C.Op:
    """``op`` in a share ``k`` of the layers: FLOPs, bytes, quantized elements and its fixed time (``on``) times
    k, the per-kernel rooflines of an unfused attention's batched GEMMs as well (the average layer's cost)."""
    kernels = tuple((d, C.Kernel(kn.f * k, kn.b * k, kn.reread * k, kn.k)) for d, kn in op.kernels)
    return replace(op, f_fwd=k * op.f_fwd, b_fwd=k * op.b_fwd, f_bwd=k * op.f_bwd, b_bwd=k * op.b_bwd,
                   model_f_fwd=k * op.model_f_fwd, on=k * op.on, kernels=kernels,
                   q_elems=(k * op.q_elems[0], k * op.q_elems[1]), wgrad_extra=k * op.wgrad_extra)


def _guarded(op: C.Op) -> C.Op:
    """A Mamba GEMM's size saturation kept finite when the model has no Mamba layer (sizes 0)."""
    return replace(op, dmin=sp.Max(1, op.dmin)) if op.dmin is not None else op


def mixer_ops() -> list[C.Op]:
    """One Mamba layer's operators per rank (unscaled; no quantize op): pre-norm, in_proj, conv1d, SSD scan,
    gated RMSNorm, out_proj, residual add."""
    t = S.tp
    tok, tok_sp = C.tokens, C.tok_sp
    heads, groups = S.mamba_heads / t, S.mamba_groups / t
    f_fwd, f_bwd = ssd_flops(tok, heads, groups)
    b_fwd = ssd_bytes(tok, heads, groups)
    # the SSD kernels: a chain of small batched matmuls and scans (Triton, tiles of P, N and Q) that runs far below the
    # GEMM curve: its FLOPs at SSD_PEAK_FRACTION of the 16-bit peak (the scan runs in bf16/fp32 under every FP8/FP4
    # recipe: Transformer Engine quantizes only the linear layers), or its bytes at the HBM rate where slower
    ssd = C.Op("ssd_scan", "gemm", f_fwd, b_fwd, f_bwd, SSD_BWD_BYTES * b_fwd, f_fwd, hp=True,
               peak_fraction=SSD_PEAK_FRACTION)
    drop = S.dropout * S.mask_bytes / S.act_bytes
    # causal conv1d + SiLU (causal_conv1d_fwd, fused in mamba_split_conv1d_scan_combined): 2 d_conv FLOP per element
    # for the taps + 4 for SiLU (ASSUMED, as the MLP activation); forward reads xBC, writes the conv output; the
    # backward recomputes it (MambaSplitConv1dScanCombinedFn.backward: causal_conv1d_fwd again) and runs
    # causal_conv1d_bwd (reads xBC and the gradient, writes dxBC): reads 3, writes 2
    conv = C.elementwise("mamba_conv1d", "elem", tok * conv_width / t, 1, 1, 3, 2, 2 * S.mamba_conv + 4)
    return [
        C.elementwise("mamba_norm", "norm", tok_sp * h, 1, 1, 2, 1, 8),
        _guarded(C.gemm("mamba_in_proj", tok, h, in_proj_width / t)),
        conv,
        ssd,
        C.elementwise("mamba_out_norm", "norm", tok * d_inner / t, 1, 1, 2, 1, 8),
        _guarded(C.gemm("mamba_out_proj", tok, d_inner / t, h)),
        C.elementwise("mamba_residual", "elem", tok_sp * h, 2 + drop, 1, 1 + drop, 2),
    ]


def hybrid_ops(layer_ops: list[C.Op]) -> list[C.Op]:
    """The average layer of a hybrid pattern from a transformer layer's operators (compute.layer_ops): the
    attention half (the operators before ``norm_mlp``) x attn_frac, the MLP half x mlp_frac, the Mamba mixer x
    mamba_frac, and the low-precision quantize kernels over them all. (1, 1, 0): the transformer layer."""
    names = [o.name for o in layer_ops]
    cut = names.index("norm_mlp")
    ops = [o for o in layer_ops if o.name != "quantize"]
    attn = [scaled(o, S.attn_frac) for o in ops[:cut]]
    mlp = [scaled(o, S.mlp_frac) for o in ops[cut:]]
    mamba = [scaled(o, S.mamba_frac) for o in mixer_ops()]
    out = [*attn, *mlp, *mamba]
    return [*out, C.quantize_op(out)]


def tp_blocks(mlp_blocks) -> sp.Expr:
    """TP collective pairs of the average layer: attention 1, the MLP ``mlp_blocks`` (a MoE's shared experts), a
    Mamba mixer 1 (in_proj ColumnParallel, out_proj RowParallel: Megatron-Core mamba_mixer.py)."""
    return S.attn_frac + S.mlp_frac * mlp_blocks + S.mamba_frac


# ---- parameters and activations of one Mamba layer ------------------------------------------------------------
# TP-split (Megatron-Core mamba_mixer.py, bias=False, conv_bias=True, D_has_hdim=False): in_proj h x (2 d_in + 2 G N
# + n_h), conv1d weight and bias (d_in + 2 G N) x (d_conv + 1), dt_bias, A_log and D (n_h each), the gated
# RMSNorm's weight d_in, out_proj d_in x h. The layer's pre-norm (h) is counted with the norms (memory.norm_params).
mixer_params = (h * in_proj_width + conv_width * (S.mamba_conv + 1) + 3 * S.mamba_heads + d_inner + d_inner * h)
# what the mixer saves for its backward, per token, split over t (mamba_split_conv1d_scan_combined saves zxbcdt, the
# in_proj output, and out_x, the ungated scan output, d_in; the conv output and the chunk states are recomputed in
# backward); Megatron-Core's rearrange(...).contiguous() hands the RMSNorm a copy it saves (d_in) and out_proj saves
# the norm's output (d_in): in_proj_width + 3 d_in elements. The pre-norm's input and in_proj's input (h each, the
# sequence-parallel share) are counted as the attention block's norm and QKV inputs are (memory._replicated).
# The inference conv / SSM states (d_conv x conv_width, n_h P N per sequence) are not held in training.
mixer_act_split = S.act_bytes * C.tokens * (in_proj_width + 3 * d_inner)
mixer_act_replicated = S.act_bytes * C.tokens * h * 2
