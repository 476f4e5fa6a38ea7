"""The routed experts' grouped GEMM: one GEMM per local expert (Transformer Engine GroupedLinear), hand-computed."""
from dataclasses import replace

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.spec import hardware
from roofline.spec.config import Model, Plan
from roofline.model.formulas import compute as C
from roofline.model.formulas import symbols as S
from roofline.model.predict import predict

HW = hardware.load("h100-sxm")


def _num(expr, **values):
    return float(expr.subs({getattr(S, k): v for k, v in values.items()}))


def test_grouped_gemm_by_hand():
    # 16 experts of 512 rows each, k = 2048, n = 1536, 2-byte elements
    g = C.gemm("g", 16 * 512, 2048, 1536, groups=16)
    one = C.gemm("g", 16 * 512, 2048, 1536)
    assert _num(g.f_fwd) == _num(one.f_fwd) == 2 * 8192 * 2048 * 1536          # the same FLOPs
    # 16 weights read instead of one: 2 (m k + 16 k n + m n) bytes
    assert _num(g.b_fwd, act_bytes=2) == 2 * (8192 * 2048 + 16 * 2048 * 1536 + 8192 * 1536)
    assert _num(g.b_bwd, act_bytes=2) == 2 * _num(g.b_fwd, act_bytes=2)
    assert int(g.dmin) == 512 and int(one.dmin) == 1536                      # saturation at the per-expert rows
    per_expert = {S.exp_launch: 1}                                           # TE's multi-stream path
    assert int(g.launches.subs(per_expert)) == 4 and int(one.launches.subs(per_expert)) == 1   # 16 GEMMs, 4 streams
    assert int(C.gemm("g", 64, 64, 64, groups=3).launches.subs(per_expert)) == 1   # up to 4 overlap fully
    assert int(g.launches.subs(S.exp_launch, 0)) == 1                        # one grouped kernel: one fixed time


def test_grouped_gemm_fixed_time_by_hand():
    """With compute and memory times negligible, a 16-expert GEMM pays 4 fixed times, a plain one 1."""
    fast = dict(peak=1e30, peak_hp=1e30, clock=1, clock_spread=0, gpu_z=0, hbm_bw=1e30, gemm_dhalf=1, act_bytes=2,
                exp_launch=1, lp_rate=1)
    sub = {getattr(S, k): v for k, v in fast.items()}
    sub.update({S.EFF_FLOP["gemm", "fwd"]: 1, S.EFF_MEM["gemm", "fwd"]: 1, S.T0["gemm", "fwd"]: 5e-6})
    g16 = float(C.op_time(C.gemm("g", 4096, 1024, 1024, groups=16), "fwd").subs(sub))
    g1 = float(C.op_time(C.gemm("g", 4096, 1024, 1024), "fwd").subs(sub))
    assert g16 == pytest.approx(4 * 5e-6, rel=1e-6)
    assert g1 == pytest.approx(5e-6, rel=1e-6)


_T = sp.lambdify([sp.Symbol("m"), sp.Symbol("k"), sp.Symbol("n"), sp.Symbol("g")],
                 C.op_time(C.gemm("x", sp.Symbol("m"), sp.Symbol("k"), sp.Symbol("n"), groups=sp.Symbol("g")), "bwd")
                 .subs({S.peak: 1e15, S.peak_hp: 1e15, S.clock: 0.85, S.clock_spread: 0, S.gpu_z: 0, S.hbm_bw: 3e12, S.gemm_dhalf: 64, S.act_bytes: 2,
                        S.EFF_FLOP["gemm", "bwd"]: 0.8, S.EFF_MEM["gemm", "bwd"]: 0.8, S.T0["gemm", "bwd"]: 1e-5,
                        S.wgrad_fusion: 1, S.grad_bytes: 4, S.exp_launch: 1,
                        S.lp_rate: 1}))


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 1 << 17), k=st.integers(16, 1 << 14), n=st.integers(16, 1 << 14), g=st.integers(1, 256))
def test_splitting_a_gemm_over_experts_never_makes_it_faster(m, k, n, g):
    assert _T(m, k, n, g) >= _T(m, k, n, 1) * (1 - 1e-12)


# a backward with rates of its own: peak 1e15 x clock 1 x eta 0.5, HBM 2e12 x mu 0.5, t0 10 us
_BWD = {S.exp_launch: 1, S.lp_rate: 1, S.peak: 1e15, S.peak_hp: 1e15, S.clock: 1, S.clock_spread: 0, S.gpu_z: 0, S.hbm_bw: 2e12, S.gemm_dhalf: 1e-9, S.act_bytes: 2,
        S.EFF_FLOP["gemm", "bwd"]: 0.5, S.EFF_MEM["gemm", "bwd"]: 0.5, S.T0["gemm", "bwd"]: 1e-5}


def test_fused_weight_gradient_accumulation_by_hand():
    """256 experts of 128 tokens, k = 7168, n = 4096 (DeepSeek-V3-like up projection at EP 1): the weight gradient
    adds into the fp32 main grad, reading and writing 4 bytes per weight element where it wrote 2."""
    m, k, n, g = 256 * 128, 7168, 4096, 256
    op = C.gemm("g", m, k, n, groups=g)
    assert _num(op.wgrad_extra, wgrad_fusion=1, grad_bytes=4, act_bytes=2) == g * k * n * (2 * 4 - 2)
    assert _num(op.wgrad_extra, wgrad_fusion=1, grad_bytes=2, act_bytes=2) == g * k * n * 2
    assert _num(op.wgrad_extra, wgrad_fusion=0, grad_bytes=4, act_bytes=2) == 0
    f = 2 * m * k * n                                      # each backward kernel (data and weight gradient)
    b = 2 * (m * k + g * k * n + m * n)
    ideal_c, ideal_m = f / (1e15 * 0.5), b / (2e12 * 0.5)
    extra = g * k * n * 6 / (2e12 * 0.5)
    hand = 64 * 1e-5 + max(ideal_c, ideal_m) + max(ideal_c, ideal_m + extra)    # 256 GEMMs over 4 streams
    t = float(C.op_time(op, "bwd").subs({**_BWD, S.wgrad_fusion: 1, S.grad_bytes: 4}))
    assert t == pytest.approx(hand, rel=1e-9)
    assert ideal_m + extra > ideal_c                       # this weight gradient is bound by the main-grad traffic
    unfused = float(C.op_time(op, "bwd").subs({**_BWD, S.wgrad_fusion: 0, S.grad_bytes: 4}))
    assert unfused == pytest.approx(64 * 1e-5 + max(2 * ideal_c, 2 * ideal_m), rel=1e-9)   # one roofline of the sum
    assert t > unfused


_FUSED = {True: None, False: None}


def _bwd(fused):
    if _FUSED[fused] is None:
        m, k, n, g = (sp.Symbol(x, positive=True) for x in "mkng")
        e = C.op_time(C.gemm("x", m, k, n, groups=g), "bwd").subs({**_BWD, S.wgrad_fusion: int(fused), S.grad_bytes: 4})
        _FUSED[fused] = sp.lambdify([m, k, n, g], e)
    return _FUSED[fused]


@settings(max_examples=80, deadline=None)
@given(m=st.integers(1, 1 << 17), k=st.integers(16, 1 << 14), n=st.integers(16, 1 << 14), g=st.integers(1, 256))
def test_fused_accumulation_never_speeds_up_and_vanishes_when_compute_bound(m, k, n, g):
    """Adding into the main grad moves more bytes, so it never makes the backward faster; while the weight gradient
    stays compute-bound with that traffic the backward is the single roofline of the sum (a dense GEMM of
    thousands of tokens)."""
    fused, plain = _bwd(True)(m, k, n, g), _bwd(False)(m, k, n, g)
    assert fused >= plain * (1 - 1e-12)
    c = 2 * m * k * n / (1e15 * 0.5)                       # compute time of each backward kernel
    w = (2 * (m * k + g * k * n + m * n) + g * k * n * 6) / (2e12 * 0.5)    # the weight gradient's memory time
    if c >= w:
        assert fused == pytest.approx(plain, rel=1e-9)


def test_stacks_state_their_weight_gradient_accumulation():
    """Megatron-Core (the default stack) fuses it; torch autograd stacks write the gradient."""
    from roofline.spec import stacks
    assert stacks.get("megatron-core").plan["wgrad_fusion"] is True and Plan().wgrad_fusion
    for sid in ("torchtitan", "fsdp", "deepspeed-zero", "plain", "megatron-lm-2021"):
        assert stacks.get(sid).plan["wgrad_fusion"] is False, sid


def test_fused_accumulation_slows_small_experts_not_dense_layers():
    """Qwen3-30B-like experts at EP 1 with few tokens per expert: the fused main-grad traffic lengthens the layer
    backward; the dense model's backward barely moves (its weight gradients stay compute-bound)."""
    moe = replace(DENSE, n_experts=64, top_k=2, moe_ffn_hidden=256)
    on = Plan(tp=1, pp=1, dp=8, ep=1, micro_batch=1, global_batch=8, wgrad_fusion=True)
    off = replace(on, wgrad_fusion=False)
    assert predict(moe, on, HW).raw["t_layer_bwd"] > 1.02 * predict(moe, off, HW).raw["t_layer_bwd"]
    big = Plan(tp=1, pp=1, dp=8, micro_batch=4, global_batch=32, wgrad_fusion=True)
    d_on = predict(DENSE, big, HW).raw["t_layer_bwd"]
    d_off = predict(DENSE, replace(big, wgrad_fusion=False), HW).raw["t_layer_bwd"]
    assert d_on == pytest.approx(d_off, rel=0.01)


DENSE = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=1024, mlp="swiglu", norm="rmsnorm",
              position="rope", biases=False, tied_embeddings=False)


def test_more_local_experts_cost_more_compute_with_the_same_flops():
    """E = 16 experts on 1 rank (16 GEMMs per grouped GEMM) vs 8 ranks (2 each): equal FLOPs, more compute time."""
    model = replace(DENSE, n_experts=16, top_k=2)
    all_local = predict(model, Plan(tp=1, pp=1, dp=8, ep=1, micro_batch=1, global_batch=8), HW)
    spread = predict(model, Plan(tp=1, pp=1, dp=8, ep=8, micro_batch=1, global_batch=8), HW)
    assert all_local.raw["flops"] == pytest.approx(spread.raw["flops"])
    assert all_local.raw["t_layer_fwd"] > spread.raw["t_layer_fwd"]
    assert all_local.raw["t_layer_bwd"] > spread.raw["t_layer_bwd"]
