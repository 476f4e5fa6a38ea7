"""Pipeline schedules: micro-batches, bubble, in-flight micro-batches.

GPipe (Huang et al. 2019) and 1F1B (PipeDream-Flush, Narayanan et al. 2021 sec 2.2.1) both leave
a bubble of (p-1) micro-batch slots: fraction (p-1)/m; the interleaved 1F1B schedule with v
virtual stages per GPU shrinks it to (p-1)/(v m) (Narayanan et al. 2021 eq. 2).

DualPipeV (deepseek-ai/DualPipe README, "Pipeline Bubbles and Memory Usage Comparison"; the V-shaped "cut-in-half"
DualPipe of the DeepSeek-V3 report sec 3.2.1): p ranks hold 2p stages, rank i the stages i and 2p-1-i, so rank 0
holds the embedding and the LM head. Its bubble is (PP/2 - 1)(F&B + B - 3W) for PP = 2p stages of F (forward), B
(whole backward) and W (weight-gradient part of B) per micro-batch, F&B a forward and a backward chunk run as a pair
(their communication beside each other's compute; their compute adds up: F&B = F + B); its activations PP + 1
stage-units per rank. Per rank (two stages): bubble (p - 1)(t + B - 3W)/2 with t = F + B of the rank's micro-batch
slot, and (2p + 1)/2 micro-batches of the rank's layers in flight.

DualPipe, the bidirectional original (deepseek-ai/DualPipe dualpipe/dualpipe.py, the README's same table; DeepSeek-V3
report sec 3.2.1, Table 2): p ranks (p even) hold p stages twice, rank i the stages i and p-1-i, and half the
micro-batches enter at each end (DualPipe.step scatters num_chunks/2 to each direction), so every rank runs l/p layers
per micro-batch, as 1F1B does, with twice the parameters, and ranks 0 and p-1 hold both the embedding and the LM head,
each micro-batch passing one of them. Its bubble is (PP/2 - 1)(F&B + B - 3W) with PP = p stages of one rank's slot:
(p/2 - 1)(t + B - 3W); its activations PP + 1 = p + 1 micro-batches of the rank's l/p layers.

Zero-bubble schedules (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", ICLR, arXiv:2401.10241 sec 3.1; the
sail-sg/zero-bubble-pipeline-parallelism fork of Megatron-LM, --enable-zero-bubble and
--zero-bubble-max-pending-backward): each backward runs as its input gradient B first and its weight gradient W later,
and the deferred W's fill the fill-and-drain. ZB1P (ZB-H1's memory, torch.distributed.pipelining
ScheduleInterleavedZeroBubble "implementing the ZB1P schedule"): bubble (p - 1)(F + B - W), in the units of the
DualPipe README's table (B the whole backward) (PP - 1)(F + B - 2W): the 1F1B slot t less 2W, with 1F1B's p
micro-batches in flight. ZB2P (ZB-H2, up to 2p - 1 micro-batches in flight): (p - 1)(F + B - 2W) with B the input
gradient, t - 3W per slot, never below zero. Both at one stage per rank here (the interleaved variant is not
modelled).
"""
from __future__ import annotations

import sympy as sp

from . import symbols as S
from .comm import unordered_max

micro_batches = S.global_batch / (S.micro_batch * S.dp)       # m: B = b * m * d
# layers on the heaviest stage: l/p when p v divides l, else the stages are uneven (Megatron-Core
# --decoder-first/last-pipeline-num-layers, Llama 3's 126 layers on 16 stages) and the heaviest
# holds ceil(l / (p v)) layers per virtual stage
stage_layers = sp.ceiling(S.n_layers / (S.pp * S.interleave)) * S.interleave
has_pp = sp.Min(1, S.pp - 1)                                   # 1 when p > 1

# the bubble over the ideal (bubble-free) time, (p-1)/(v m) (Narayanan et al. 2021 sec 2.2): above 1 when
# m < p; and the fraction of the pipeline's time (m + (p-1)/v) t_mb spent in the bubble, at most 1
bubble_ratio = (S.pp - 1) / (S.interleave * micro_batches)
bubble_fraction = (S.pp - 1) / (S.interleave * micro_batches + S.pp - 1)


# the rank that sets the pace holds both the embedding and the LM head: p = 1, DualPipeV's rank 0, or DualPipe's
# ranks 0 and p - 1 (each holding the first and the last stage)
dual = S.dualpipev + S.dualpipe                                # 1 for either DualPipe schedule
both_edges = 1 - has_pp + has_pp * dual


def step_time(t_stage_mb: sp.Expr, b_full: sp.Expr = sp.Integer(0), w: sp.Expr = sp.Integer(0),
              fill: sp.Expr | None = None, edge_fill: sp.Expr = sp.Integer(0)) -> sp.Expr:
    """m micro-batch slots of the slowest stage plus the bubble: (m + (p-1)/v) slots for 1F1B, interleaved 1F1B and
    GPipe (Narayanan et al. 2021 sec 2.2) when the stages are equal; else bubble_time's fill and drain."""
    return micro_batches * t_stage_mb + bubble_time(t_stage_mb, b_full, w, fill, edge_fill)


def bubble_time(t_stage_mb: sp.Expr, b_full: sp.Expr = sp.Integer(0), w: sp.Expr = sp.Integer(0),
                fill: sp.Expr | None = None, edge_fill: sp.Expr = sp.Integer(0)) -> sp.Expr:
    """The fill and drain: (p-1)/v slots; DualPipeV (p - 1)(t + B - 3W)/2, DualPipe (p/2 - 1)(t + B - 3W), ``b_full``
    B the slot's backward (with
    recomputation and its exposed communication), ``w`` W its weight-gradient GEMMs (module docstring).

    Stages of unequal time: the fill and the drain pass each stage once and only the slowest stage sets the pace of
    the m micro-batches, T = sum_i t_i + (m - 1) max_j t_j (Zheng et al. 2022, "Alpa", OSDI'22, eq. 2; the same
    critical path as PipeDream-Flush / 1F1B and GPipe). With the LM head (or the embedding) on one stage only, the
    (p - 1)/v slots of the fill and drain are slots of the other stages: ``fill`` the sum of their times per
    micro-batch without edges (default: p - 1 times the slowest stage's, the textbook (p - 1)/v t), each chunk of it
    1/v of a rank, and ``edge_fill`` their edges (the lighter of embedding and LM head), passed once."""
    fill = (S.pp - 1) * t_stage_mb if fill is None else fill
    paired = (S.dualpipev * (S.pp - 1) / 2 + S.dualpipe * (S.pp / 2 - 1)) * (t_stage_mb + b_full - 3 * w)
    one_f_one_b = fill / S.interleave + has_pp * edge_fill
    # zero-bubble: the deferred weight gradients fill 2W (ZB1P) or 3W (ZB2P) of each of the p - 1 fill-and-drain
    # slots (module docstring); unevaluated max, never below no bubble, its arguments unsorted (comm.unordered_max:
    # sympy's sort counts the nodes of the stage time as a tree, 90 % of a 155 s build)
    deferred = (2 * S.zb1p + 3 * S.zb2p) * (S.pp - 1) * w
    zb = S.zb1p + S.zb2p
    return ((1 - dual - zb) * one_f_one_b + zb * unordered_max(0, one_f_one_b - deferred)
            + paired)


def in_flight() -> sp.Expr:
    """Micro-batches whose activations the first stage holds at its peak, in units of one
    micro-batch through all its layers: GPipe m; 1F1B min(m, p); interleaved 1F1B
    p (1 + (p-1)/(p v)) (Korthikanti et al. 2022 sec 4.2.3), ZB1P the same, ZB2P min(m, 2p - 1) (Qi et al. 2024 sec
    3.1: ZB-H2 holds 2p - 1 micro-batches' activations); DualPipeV (2p + 1)/2 (2p + 1 stages of l/(2p) layers:
    "Activation Per Device PP+1" for PP = 2p stages, deepseek-ai/DualPipe README); DualPipe p + 1 (PP = p stages of
    l/p layers, the same table)."""
    one_f_one_b = sp.Min(micro_batches, S.pp) * (1 + (S.pp - 1) / (S.pp * S.interleave) * sp.Min(1, S.interleave - 1))
    return (S.gpipe * micro_batches + (1 - S.gpipe - dual) * one_f_one_b + S.dualpipev * (2 * S.pp + 1) / 2
            + S.dualpipe * (S.pp + 1) + S.zb2p * (sp.Min(micro_batches, 2 * S.pp - 1) - sp.Min(micro_batches, S.pp)))


def in_flight_last() -> sp.Expr:
    """Micro-batches whose activations the last stage holds at its peak, in the same units: GPipe m;
    1F1B one (each forward is followed by its backward); interleaved 1F1B ((v-1) p + 1) / v, the last
    rank's (v-1) p warm-up forwards of model chunks plus one (Megatron-Core schedules.py
    get_pp_rank_microbatches: warm-up (p - rank - 1) * 2 + (v - 1) p), each chunk l/(p v) layers."""
    return S.gpipe * micro_batches + (1 - S.gpipe) * sp.Min(micro_batches, ((S.interleave - 1) * S.pp + 1) / S.interleave)


def p2p_transfers() -> sp.Expr:
    """Send/recv pairs on the critical path per step: forward and backward per micro-batch and
    virtual stage, plus the fill/drain of p-1 stages (Narayanan et al. 2021 sec 4.1)."""
    return has_pp * 2 * (micro_batches * S.interleave + S.pp - 1)
