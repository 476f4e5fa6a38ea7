"""Pipeline schedules: micro-batches, bubble, in-flight micro-batches.

GPipe (Huang et al. 2019) and 1F1B (PipeDream-Flush, Narayanan et al. 2021 sec 2.2.1) both leave
a bubble of (p-1) micro-batch slots: fraction (p-1)/m; the interleaved 1F1B schedule with v
virtual stages per GPU shrinks it to (p-1)/(v m) (Narayanan et al. 2021 eq. 2).
"""
from __future__ import annotations

import sympy as sp

from . import symbols as S

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


def step_time(t_stage_mb: sp.Expr) -> sp.Expr:
    """(m + (p-1)/v) micro-batch slots of the slowest stage (Narayanan et al. 2021 sec 2.2)."""
    return (micro_batches + (S.pp - 1) / S.interleave) * t_stage_mb


def bubble_time(t_stage_mb: sp.Expr) -> sp.Expr:
    return (S.pp - 1) / S.interleave * t_stage_mb


def in_flight() -> sp.Expr:
    """Micro-batches whose activations the first stage holds at its peak, in units of one
    micro-batch through all its layers: GPipe m; 1F1B min(m, p); interleaved 1F1B
    p (1 + (p-1)/(p v)) (Korthikanti et al. 2022 sec 4.2.3)."""
    one_f_one_b = sp.Min(micro_batches, S.pp) * (1 + (S.pp - 1) / (S.pp * S.interleave) * sp.Min(1, S.interleave - 1))
    return S.gpipe * micro_batches + (1 - S.gpipe) * one_f_one_b


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
