"""Issue 16 item 6: what the stacks do by default, each checked against a hand-computed number.

Every case zeroes the collectives' latencies and sets one bus bandwidth (BW bytes/s) so that a collective of S bytes
over p ranks takes factor(p) S / BW (nccl-tests: 2(p-1)/p for all-reduce, (p-1)/p for the others); the expected
values below are written from the framework's behaviour (the source in each docstring), not from the model's output.
"""
from __future__ import annotations

import pytest

from roofline.spec import hardware
from roofline.spec.config import Model, Plan
from roofline.base.errors import InputError
from roofline.model.predict import evaluate, inputs
from roofline.spec.resolve import resolve

H100 = hardware.load("h100-sxm")
BW = 1e11
SLOW = {"peak": 1e12, "peak_hp": 1e12, "peak_vec": 1e11, "hbm_bw": 1e11}   # a GPU whose compute outlasts every collective


def _run(model, plan, *, no_interference=True, **override):
    """Every output for (model, plan) on one 8-GPU H100 node, latencies 0, every bus bandwidth BW."""
    x = inputs(model, plan, H100)
    for k in list(x):
        if k.startswith("alpha_"):
            x[k] = 0.0
        elif k.startswith("bw_"):
            x[k] = BW
    if no_interference:
        x["sms"] = 1.0                      # comm.interference() = 0: hidden communication costs no compute
    x.update(override)
    return {k: float(v) for k, v in evaluate(x).items()}


def _dense(**kw):
    base = dict(n_layers=4, d_model=4096, n_heads=32, vocab=32000, seq_len=4096, mlp="swiglu", tied_embeddings=False)
    base.update(kw)
    return Model(**base)


# ---- (b) interleaved schedule: overlap_p2p_comm on by default -------------------------------------------------
def test_interleaved_schedule_overlaps_p2p_by_default():
    """megatron/training/arguments.py --no-overlap-p2p-communication (store_false): overlapped p2p in the interleaved
    schedule, forced off without it. 1F1B, pp 2, m 4: 2 (m + p - 1) = 10 exposed send/recvs of b s h / t bf16
    (2 x 4096 x 4096 = 33,554,432 B at BW: 3.3554432e-4 s each): 3.3554432e-3 s; interleaved: 0."""
    m = _dense()
    plain = resolve(m, {"pp": 2, "global_batch": 4, "micro_batch": 1, "schedule": "1f1b"}, H100, "megatron-core")
    inter = resolve(m, {"pp": 2, "global_batch": 4, "micro_batch": 1, "interleave": 2}, H100, "megatron-core")
    assert plain.plan.overlap_pp == 0.0 and inter.plan.overlap_pp == 1.0
    r1 = _run(plain.model, plain.plan)
    r2 = _run(inter.model, inter.plan)
    assert r1["t_pp_comm"] == pytest.approx(10 * 2 * 4096 * 4096 / BW, rel=1e-9)
    assert r2["t_pp_comm"] == 0.0


# ---- (c) FSDP: reduce dtype, and the first all-gather / last reduce-scatter -----------------------------------
def test_fsdp_reduces_in_the_parameter_dtype_and_exposes_its_first_unit():
    """torch.distributed.fsdp MixedPrecision(reduce_dtype=None) reduces in param_dtype (bf16); torchtitan sets
    mixed_precision_reduce float32. The first unit's all-gather of each forward and its reduce-scatter at the end of
    each backward cannot hide: the embedding table V h = 32000 x 4096 over dp 8, bf16 both ways:
    2 x 7/8 x 2 x 32000 x 4096 / BW = 4.58752e-3 s per micro-batch, 2 micro-batches: 9.17504e-3 s, with every other
    collective hidden behind a slow GPU's compute."""
    fsdp = resolve(_dense(), {"dp": 8, "global_batch": 16, "micro_batch": 1}, H100, "fsdp")
    titan = resolve(_dense(), {"dp": 8, "global_batch": 16, "micro_batch": 1}, H100, "torchtitan")
    assert fsdp.plan.sharding == "fsdp" and fsdp.plan.grad_dtype == "bf16"
    assert titan.plan.grad_dtype == "fp32"
    r = _run(fsdp.model, fsdp.plan, **SLOW)
    edge = 2 * 7 / 8 * 2 * 32000 * 4096 / BW
    assert r["t_dp_comm"] == pytest.approx(2 * edge, rel=1e-9)


# ---- (d) MoE with TP and SP: s/t tokens in the all-to-all, then the expert-TP all-gather ----------------------
def test_moe_dispatch_carries_sequence_parallel_tokens_then_gathers_over_expert_tp():
    """Megatron-Core MoEAlltoAllTokenDispatcher: each rank dispatches the s/t tokens it holds (k = 2 copies) over the
    ep = 4 ranks (stride etp = 2: all on one node), then all-gathers them over the etp = 2 ranks, and reduce-scatters
    the expert outputs back. s 1024, h 1024, tp 2: 512 tokens, 1 MiB per copy set. a2a: 2 copies x 3/4 x 1 MiB;
    AG and RS over 2 ranks: 1/2 x (2 x 2 x 1 MiB); per pass 2 a2a + AG + RS = 7,340,032 B; forward + backward:
    1.4680064e-4 s at BW."""
    m = Model(n_layers=2, d_model=1024, n_heads=16, vocab=32000, seq_len=1024, mlp="swiglu", n_experts=8, top_k=2)
    plan = Plan(tp=2, dp=4, ep=4, etp=2, micro_batch=1, global_batch=4, sequence_parallel=True)
    r = _run(m, plan)
    assert r["t_layer_ep_comm"] == pytest.approx(2 * 7340032 / BW, rel=1e-9)


# ---- (e) tied embeddings: the embedding-group all-reduce --------------------------------------------------------
def test_tied_embeddings_all_reduce_between_first_and_last_stage():
    """Megatron-Core finalize_model_grads.py _allreduce_word_embedding_grads: with pp > 1 and tied embeddings the
    first and last stage all-reduce the V_pad h / t gradient (fp32 main grads): 2 ranks, factor 1:
    32000 x 4096 x 4 B / BW = 5.24288e-3 s. Untied, or pp = 1: none."""
    plan = Plan(pp=2, micro_batch=1, global_batch=2, grad_dtype="fp32")
    tied = _run(_dense(tied_embeddings=True), plan)
    assert tied["t_embedding_grad_reduce"] == pytest.approx(32000 * 4096 * 4 / BW, rel=1e-9)
    assert _run(_dense(tied_embeddings=False), plan)["t_embedding_grad_reduce"] == 0.0
    one_stage = Plan(pp=1, micro_batch=1, global_batch=2, grad_dtype="fp32")
    assert _run(_dense(tied_embeddings=True), one_stage)["t_embedding_grad_reduce"] == 0.0
    untied_step = _run(_dense(tied_embeddings=False), plan)
    assert tied["t_pp_comm"] - untied_step["t_pp_comm"] == pytest.approx(tied["t_embedding_grad_reduce"], rel=1e-9)