"""Kernels an MoE layer launches one routed expert at a time (Transformer Engine GroupedLinear: one cuBLASLt GEMM per
local expert, per-expert casts where the recipe has no fused split kernel; Plan.per_expert_kernels): their host launch
cost, and one grouped kernel (torch._grouped_mm) where a stack runs that."""

import dataclasses

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from roofline.base import precision
from roofline.model.formulas import compute as C, step as ST, symbols as S
from roofline.model.predict import evaluate, inputs, value_at
from roofline.spec.resolve import resolve
from roofline.spec.stacks import get as load_stack

# Qwen3-30B-A3B (128 experts, top 8) on 8 B200s, ep 8: 16 local experts, micro-batch 1 (the host-bound rows)
PLAN = {"tp": 1, "pp": 1, "dp": 8, "ep": 8, "micro_batch": 1, "global_batch": 64}


def _spec(stack="megatron-core", gpu="b200", model="qwen3-30b-a3b", **plan):
    return resolve(model, {**PLAN, **plan}, gpu, stack)


def _x(spec, **over):
    return {**inputs(spec.model, spec.plan, spec.hardware), **over}


def test_the_cast_kernels_per_expert_are_those_transformer_engines_split_quantize_launches():
    # TE v2.13 csrc/extensions/cast.cpp split_quantize: fused over all experts for delayed scaling
    # (nvte_multi_cast_transpose) and NVFP4 (split_quantize_nvfp4_impl); otherwise each expert's quantizer:
    # MXFP8 / FP8 blockwise one nvte_quantize_v2, FP8 current scaling amax + scale + cast (quantizer.cpp)
    # (torchao's row-wise recipe is no TE recipe: its stacks run one grouped kernel, no per-expert casts)
    assert {n: p.expert_casts for n, p in precision.PRECISIONS.items()} == {
        "bf16": 0, "fp16": 0, "fp32": 0, "fp8": 0, "fp8-cs": 3, "fp8-block": 1, "mxfp8": 1, "nvfp4": 0, "fp8-row": 0}


@pytest.mark.parametrize("dtype, fwd, bwd", [
    ("bf16", 2, 4),           # fc1, fc2; their dgrad and wgrad
    ("nvfp4", 2, 4),          # casts fused over the experts
    ("mxfp8", 2 + 2, 4 + 2),  # + the inputs of fc1 and fc2; + their output gradients
    ("fp8-cs", 2 + 6, 4 + 6),
])
def test_launches_per_local_expert_by_hand(dtype, fwd, bwd):
    x = _x(_spec(dtype=dtype))
    f, b = ST.expert_launches()
    assert value_at(f, x) == pytest.approx(16 * fwd)
    assert value_at(b, x) == pytest.approx(16 * bwd)
    # a stack that saves the 16-bit input casts it again in backward, for both GEMMs (torchao's Float8Linear)
    assert value_at(b, {**x, "q_saved": 0.0}) == pytest.approx(16 * (bwd + 2 * precision.get(dtype).expert_casts))
    # the layers kept in 16 bits cast nothing
    assert value_at(f, {**x, "hp_frac": 1.0}) == pytest.approx(16 * 2)
    assert value_at(f, {**x, "exp_launch": 0.0}) == 0


def test_stacks_say_how_their_experts_launch():
    for stack in ("megatron-core", "torchtitan", "nemo-automodel"):
        assert load_stack(stack).sources["per_expert_kernels"], stack      # each states its source
    assert load_stack("megatron-core").plan["per_expert_kernels"] is True
    for stack in ("torchtitan", "nemo-automodel", "nemo-automodel-2025"):
        assert _spec(stack).plan.per_expert_kernels is False, stack
    assert _spec().plan.per_expert_kernels is True
    assert _spec(per_expert_kernels=False).plan.per_expert_kernels is False


def test_a_grouped_kernel_pays_one_fixed_time_where_the_multi_stream_path_pays_one_per_four_experts():
    g = C.gemm("g", 4096, 2048, 1536, groups=sp.Integer(16))
    x = _x(_spec())
    assert value_at(g.launches, x) == pytest.approx(4)          # 16 experts over 4 streams
    assert value_at(g.launches, {**x, "exp_launch": 0.0}) == 1
    assert value_at(C.gemm("d", 4096, 2048, 1536).launches, x) == 1   # a dense GEMM: one launch either way


def _step(spec, **over):
    return float(evaluate(_x(spec, **over))["step_time"])


def test_an_eager_host_bound_moe_step_pays_each_launch_and_a_grouped_kernel_does_not():
    spec = _spec(dtype="mxfp8")
    hl = spec.hardware.host_launch
    assert hl == pytest.approx(5e-6)                             # defaults.yaml host.launch

    def _step(spec, **over):        # the launches alone: without the GPU idle after the forward's sync (host.moe_sync)
        return float(evaluate(_x(spec, host_sync=0.0, **over))["step_time"])
    slow = _step(spec, host_launch=10 * hl)
    assert slow > _step(spec) > _step(spec, host_launch=0.0)     # host-bound: every launch shows
    grouped = _spec(dtype="mxfp8", per_expert_kernels=False)
    assert _step(grouped, host_launch=10 * hl) == pytest.approx(_step(grouped, host_launch=0.0), rel=1e-12)
    graphs = _spec(dtype="mxfp8", cuda_graphs="layers")
    assert _step(graphs, host_launch=10 * hl) == pytest.approx(_step(graphs, host_launch=0.0), rel=1e-12)
    dense = _spec(model="llama3-8b", ep=1, dtype="mxfp8")
    assert _step(dense, host_launch=10 * hl) == pytest.approx(_step(dense, host_launch=0.0), rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(mb=st.sampled_from([1, 2, 4]), ep=st.sampled_from([1, 2, 4, 8]),
       dtype=st.sampled_from(["bf16", "fp8", "fp8-cs", "mxfp8", "nvfp4"]), a=st.floats(0, 50e-6), b=st.floats(0, 50e-6))
def test_a_dearer_launch_never_makes_a_step_faster(mb, ep, dtype, a, b):
    spec = _spec(dtype=dtype, micro_batch=mb, ep=ep, global_batch=64)
    lo, hi = sorted((a, b))
    assert _step(spec, host_launch=lo) <= _step(spec, host_launch=hi) * (1 + 1e-12)


def test_validate_reads_a_fused_grouped_mlp(bridge_row):
    assert bridge_row("MXFP8", "CUDA graph impl=full_iteration | CuteDSL fused grouped MLP").plan.per_expert_kernels \
        is False
    assert bridge_row("MXFP8", "CUDA graph impl=full_iteration").plan.per_expert_kernels is True
    assert bridge_row("MXFP8", "unfused grouped MLP").plan.per_expert_kernels is True


def test_the_profile_carries_its_launch_cost():
    hw = _spec().hardware
    assert S.host_launch.name == "host_launch"
    with pytest.raises(Exception, match="host_launch"):
        dataclasses.replace(hw, host_launch=-1.0)
