"""MoE terms: with E = K = 1 a mixture of experts is the dense model; FLOPs scale with top-k."""
import pytest

from roofline.spec import hardware
from roofline.spec.config import Model, Plan
from roofline.model.predict import evaluate, inputs, predict
from roofline.views.runcost import run_cost

HW = hardware.load("h100-sxm")
DENSE = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=1024, mlp="swiglu", norm="rmsnorm",
              position="rope", biases=False, tied_embeddings=False)
PLAN = Plan(tp=2, pp=2, dp=4, micro_batch=2, global_batch=32)


def moe(E, K, cf=1.0):
    from dataclasses import replace
    return replace(DENSE, n_experts=E, top_k=K, capacity_factor=cf)


def test_one_expert_top1_is_the_dense_model():
    dense, one = predict(DENSE, PLAN, HW), predict(moe(1, 1), PLAN, HW)
    for k in ("step_time", "flops", "hardware_flops", "memory", "params", "active_params", "t_ep_comm"):
        assert one.raw[k] == pytest.approx(dense.raw[k], rel=1e-12), k
    # and the formulas reduce with E = K = 1 even when the inputs are given as arrays
    x = inputs(DENSE, PLAN, HW)
    xs = {**x, "n_experts": 1.0, "top_k": 1.0}
    assert evaluate(xs)["flops"] == pytest.approx(evaluate(x)["flops"])


def test_top1_moe_costs_the_dense_flops_plus_the_router():
    dense, m8 = predict(DENSE, PLAN, HW), predict(moe(8, 1), PLAN, HW)
    router = 3 * PLAN.batch * DENSE.n_layers * 2 * DENSE.seq_len * DENSE.d_model * 8
    assert m8.raw["flops"] - dense.raw["flops"] == pytest.approx(router, rel=1e-9)
    expert = 3 * DENSE.d_model * DENSE.ffn                       # swiglu, no biases
    stored = DENSE.n_layers * (7 * expert + DENSE.d_model * 8)   # all 8 experts + the router are stored
    assert m8.raw["params"] - dense.raw["params"] == pytest.approx(stored, rel=1e-12)
    assert m8.raw["active_params"] - dense.raw["active_params"] == pytest.approx(DENSE.n_layers * DENSE.d_model * 8)


def test_top2_doubles_the_mlp_flops():
    k1, k2 = predict(moe(8, 1), PLAN, HW), predict(moe(8, 2), PLAN, HW)
    mlp = 3 * PLAN.batch * DENSE.n_layers * 2 * DENSE.seq_len * DENSE.d_model * DENSE.ffn * 3   # swiglu: 3 GEMMs
    assert k2.raw["flops"] - k1.raw["flops"] == pytest.approx(mlp, rel=1e-9)
    # the capacity factor's padding is executed work (HFU), not model work (MFU)
    padded = predict(moe(8, 2, cf=1.25), PLAN, HW)
    assert padded.raw["flops"] == pytest.approx(k2.raw["flops"])
    assert padded.raw["hardware_flops"] > k2.raw["hardware_flops"]


def test_expert_parallel_all_to_all_only_with_experts():
    plan = Plan(tp=2, pp=2, dp=4, ep=4, micro_batch=2, global_batch=32)
    assert predict(moe(8, 2), plan, HW).raw["t_ep_comm"] > 0
    assert predict(moe(1, 1), PLAN, HW).raw["t_ep_comm"] == 0


def test_run_cost_of_one_expert_is_dense():
    a, b = run_cost(DENSE, PLAN, HW, 1e9), run_cost(moe(1, 1), PLAN, HW, 1e9)
    assert a["flop"] == b["flop"] and a["params"] == b["params"]


@pytest.mark.parametrize("ep,experts,dedup,on", [
    (8, 64, 0, 1),      # NCCL all-to-all, 8 local experts: sorted by local expert after dispatch, back before combine
    (8, 64, 1, 0),      # DeepEP / HybridEP: the flex dispatcher permutes on the receiving side (moe_permute) only
    (1, 64, 0, 0),      # no EP: no all-to-all, nothing arrives grouped by source rank
    (64, 64, 0, 0),     # one local expert: its tokens need no regrouping
])
def test_alltoall_dispatch_sorts_received_tokens_by_local_expert(ep, experts, dedup, on):
    """Megatron-Core MoEAlltoAllTokenDispatcher "Permutation 2" (moe_utils.sort_chunks_by_idxs) when
    num_local_experts > 1: two passes over the k copies of each token, read and written, forward and backward."""
    import sympy as sp

    from roofline.model.formulas import compute as C
    from roofline.model.formulas import symbols as S

    (op,) = [o for o in C.layer_ops(C.d_head, S.moe_ffn, sp.Integer(1), S.shared_ffn, variants=True)
             if o.name == "moe_sort_chunks"]
    vals = {S.ep: ep, S.n_experts: experts, S.ep_dedup: dedup, S.top_k: 4, S.capacity_factor: 1, S.micro_batch: 2,
            S.seq_len: 4096, S.cp: 1, S.tp: 1, S.seq_par: 0, S.d_model: 2048, S.moe_latent: 0, S.act_bytes: 2}
    assert float(op.on.subs(vals)) == on
    if on:
        copies = 2 * 4096 * 4 * 2048                       # tokens of the micro-batch x k copies x d_model
        assert float(op.b_fwd.subs(vals)) == pytest.approx(2 * 2 * copies * 2)   # 2 passes x (read + write) x 2 B
        assert float(op.b_bwd.subs(vals)) == float(op.b_fwd.subs(vals))
