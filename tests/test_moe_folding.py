"""MoE parallel folding (Megatron-Core expert grid: world = pp x etp x ep x expert-dp, etp default tp) and the
pipeline split that lets the embedding and the loss fill a virtual stage each. Expected numbers by hand."""
import math

import pytest
from hypothesis import given, settings, strategies as st

from roofline.spec import hardware, models
from roofline.spec.config import Plan, check
from roofline.base.errors import InputError
from roofline.model.predict import predict
from roofline.spec.resolve import resolve

H100 = hardware.load("h100-sxm")


def vocab_pad(V, tp):
    return math.ceil(V / (128 * tp)) * 128 * tp


def test_mixtral_experts_unsplit_with_etp1_shard_their_state_over_the_folded_group():
    """Mixtral 8x7B tp 2 pp 4 dp 8 ep 8 etp 1: each rank holds E/e = 1 whole expert (not split by t), and its Adam
    state is sharded over t d / (etp e) = 2 ranks; the attention and router over d = 8 ranks, split by t."""
    h, kv, f, E, V, l = 4096, 8 * 128, 14336, 8, 32000, 32
    layers = l // 4
    expert_rank = layers * E / 8 * 3 * h * f                      # one whole SwiGLU expert per layer
    dense_rank = layers * ((h * (h + 2 * kv) + h * h) / 2 + h * E + 2 * h) + vocab_pad(V, 2) * h / 2
    expected = dense_rank * 12 / 8 + expert_rank * 12 / (2 * 8 / (1 * 8))
    p = predict(models.load("mixtral-8x7b"), Plan(tp=2, pp=4, dp=8, ep=8, etp=1, global_batch=256,
                                                  sharding="distributed", sequence_parallel=True), H100)
    assert p.memory["optimizer"].magnitude == pytest.approx(expected, rel=1e-9)
    assert p.memory["weights"].magnitude == pytest.approx(2 * (dense_rank + expert_rank), rel=1e-9)


def test_etp_equal_to_tp_is_the_default():
    m = models.load("mixtral-8x7b")
    base = dict(tp=2, pp=4, dp=8, ep=4, global_batch=256, sharding="distributed", sequence_parallel=True)
    a, b = predict(m, Plan(**base), H100).raw, predict(m, Plan(etp=2, **base), H100).raw
    for k in ("step_time", "memory", "t_ep_comm", "dp_comm_total"):
        assert a[k] == pytest.approx(b[k], rel=1e-12), k


def test_the_expert_grid_must_tile_tp_cp_dp():
    m = models.load("mixtral-8x7b")
    with pytest.raises(InputError, match=r"ep x etp \(8 x 2\) must divide tp x cp x dp \(2 x 1 x 4 = 8\)"):
        check(m, Plan(tp=2, pp=1, dp=4, ep=8, global_batch=8, sequence_parallel=True))
    check(m, Plan(tp=2, pp=1, dp=4, ep=8, etp=1, global_batch=8, sequence_parallel=True))     # folded: runs
    with pytest.raises(InputError, match="dense model"):
        check(models.load("llama3-8b"), Plan(tp=2, dp=4, etp=1, global_batch=8))


def test_resolve_infers_etp_1_only_when_ep_cannot_fit_beside_tp():
    spec = resolve("mixtral-8x7b", {"tp": 2, "pp": 1, "dp": 4, "ep": 8, "global_batch": 8}, H100, "megatron-core")
    assert spec.plan.etp == 1 and "etp 1" in spec.origin["etp"]
    spec = resolve("mixtral-8x7b", {"tp": 2, "pp": 1, "dp": 4, "ep": 4, "global_batch": 8}, H100, "megatron-core")
    assert spec.plan.etp is None


def test_embedding_and_loss_fill_a_virtual_stage_each_with_uneven_stages():
    """Llama 3.1 405B, 126 layers on pp 16 x v 8 = 128 virtual stages (Megatron-Bridge's recipe accounts the embedding
    and the loss in the pipeline split): runs with uneven stages, the pace-setting stage holding 8 layers."""
    m = models.load("llama3.1-405b")
    plan = Plan(tp=8, pp=16, dp=1, interleave=8, global_batch=16, sequence_parallel=True)
    with pytest.raises(InputError, match=r"layers \(126\) must be at least pp x interleave"):
        check(m, plan)
    from dataclasses import replace
    p = predict(m, replace(plan, uneven_stages=True), H100)
    assert p.raw["stage_layers"] == 8
    with pytest.raises(InputError, match="less the 2 stages"):
        check(m, replace(plan, interleave=9, uneven_stages=True, global_batch=32))


def test_node_deduplicating_dispatch_by_hand():
    """EP 32 over 4 nodes of 8 (stride 1), top-8 routing: NCCL all-to-all sends 8 x 24/32 = 6 copies of each token
    across nodes; DeepEP sends it once to each other node its copies land on, 3 x (1 - (3/4)^8) = 2.6997 nodes. Inside
    one node of 8 (EP 8), all-to-all sends 8 x 7/8 = 7 copies over NVLink, DeepEP one per other rank that holds one of
    the token's experts: 7 x (1 - (7/8)^8) = 4.5938 (DeepEP Buffer.dispatch is_token_in_rank)."""
    import sympy as sp

    from roofline.model.formulas import comm as CM, symbols as S
    vals = {S.gpus_per_node: 8, S.ALPHA["a2a", "intra"]: 0, S.ALPHA["a2a", "inter"]: 0,
            S.CALL["a2a", "intra"]: 0, S.CALL["a2a", "inter"]: 0,
            S.BUSBW["a2a", "intra"]: 1e30, S.BUSBW["a2a", "inter"]: 1.0}
    naive = CM.dispatch_a2a(sp.Integer(1), 8, 32, 1, 0).subs(vals)
    dedup = CM.dispatch_a2a(sp.Integer(1), 8, 32, 1, 1).subs(vals)
    assert float(naive) == pytest.approx(6.0)
    assert float(dedup) == pytest.approx(3 * (1 - 0.75 ** 8))
    vals8 = {**vals, S.BUSBW["a2a", "intra"]: 1.0}
    assert float(CM.dispatch_a2a(sp.Integer(1), 8, 8, 1, 0).subs(vals8)) == pytest.approx(8 * 7 / 8)
    assert float(CM.dispatch_a2a(sp.Integer(1), 8, 8, 1, 1).subs(vals8)) == pytest.approx(7 * (1 - (7 / 8) ** 8))


@settings(deadline=None)     # sympy's subs; no timing is asserted
@given(copies=st.integers(1, 16), nodes=st.sampled_from([1, 2, 4, 8, 16]), per_node=st.sampled_from([2, 4, 8]))
def test_deduplicated_dispatch_never_moves_more_than_all_to_all(copies, nodes, per_node):
    """At most one copy per destination node over the network, and inside one node at most one per other rank: never
    more than one copy per routed expert, the same with one copy. (Across nodes DeepEP also forwards the arrivals over
    NVLink, which NCCL's all-to-all sends over the network instead: that NVLink part may exceed all-to-all's.)"""
    import sympy as sp

    from roofline.model.formulas import comm as CM, symbols as S
    p = nodes * per_node
    base = {S.gpus_per_node: per_node, S.ALPHA["a2a", "intra"]: 0, S.ALPHA["a2a", "inter"]: 0,
            S.CALL["a2a", "intra"]: 0, S.CALL["a2a", "inter"]: 0}
    parts = [("network", {S.BUSBW["a2a", "intra"]: 1e30, S.BUSBW["a2a", "inter"]: 1.0})] if nodes > 1 else \
        [("nvlink", {S.BUSBW["a2a", "intra"]: 1.0, S.BUSBW["a2a", "inter"]: 1e30})]
    for _, bw in parts:
        vals = {**base, **bw}
        naive = float(CM.dispatch_a2a(sp.Integer(1), copies, p, 1, 0).subs(vals))
        dedup = float(CM.dispatch_a2a(sp.Integer(1), copies, p, 1, 1).subs(vals))
        assert dedup <= naive * (1 + 1e-12)
        if copies == 1:
            assert dedup == pytest.approx(naive)


def test_deepep_never_slower_than_all_to_all():
    m = models.load("deepseek-v3")
    base = dict(tp=1, pp=8, dp=32, ep=32, micro_batch=1, global_batch=1024, interleave=2, uneven_stages=True)
    hw = hardware.load("b200")
    a2a = predict(m, Plan(**base), hw).raw
    deepep = predict(m, Plan(ep_dispatcher="deepep", **base), hw).raw
    assert deepep["t_ep_comm"] < a2a["t_ep_comm"]
    assert deepep["step_time"] <= a2a["step_time"]
