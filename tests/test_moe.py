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
