"""A fused grouped MLP (Transformer Engine's block-scaled GEMM + activation + cast kernels for the routed experts):
what it removes from a step, the rules it needs, and how validate and the CLI read it."""
import pytest
from hypothesis import given, settings, strategies as st

from conftest import gpu_only, run_cli
from roofline.base.errors import InputError
from roofline.model.formulas import compute as C
from roofline.model.predict import evaluate, inputs, value_at
from roofline.spec.resolve import resolve

PLAN = {"tp": 1, "pp": 1, "dp": 8, "ep": 8, "micro_batch": 1, "global_batch": 64, "dtype": "mxfp8",
        "per_expert_kernels": False}
MOE = {o.name: o for o in C.layer_ops(C.d_head, C.S.moe_ffn, C.moe, C.S.shared_ffn, variants=True)}


def _x(model="qwen3-30b-a3b", gpu="gb200", **plan):
    spec = resolve(model, {**PLAN, **plan}, gpu, "megatron-core")
    return inputs(spec.model, spec.plan, spec.hardware)


def _t(op, direction, x):
    return value_at(C.op_time(op, direction), x)


def test_the_fused_mlp_drops_the_forward_activation_and_the_casts_the_epilogues_write():
    off, on = _x(), _x(fused_moe_mlp=True)
    act = MOE["mlp_activation"]
    assert value_at(act.b_fwd, on) == 0 and value_at(act.f_fwd, on) == 0
    # backward keeps one kernel: recompute the activation from the saved first-GEMM output (2 elements read for a
    # gated MLP) and write it quantized (half a 16-bit element)
    n = value_at(act.b_fwd, off) / (off["act_bytes"] * (1 + off["gated"] + 1))
    assert value_at(act.b_bwd, on) == pytest.approx(n * on["act_bytes"] * (2 + 0.5))
    # the second GEMM's input is no longer cast in forward, nor the first GEMM's output gradient in backward
    up, down = MOE["mlp_up"], MOE["mlp_down"]
    assert value_at(down.q_elems[0], on) == 0 < value_at(down.q_elems[0], off)
    assert value_at(up.q_elems[0], on) == value_at(up.q_elems[0], off)
    assert value_at(up.q_elems[1], on) < value_at(up.q_elems[1], off)
    assert value_at(down.q_elems[1], on) == value_at(down.q_elems[1], off)
    q = C.quantize_op(list(MOE.values()))
    assert _t(q, "fwd", on) < _t(q, "fwd", off) and _t(q, "bwd", on) < _t(q, "bwd", off)


@settings(max_examples=20, deadline=None)
@given(model=st.sampled_from(["qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"]),
       mb=st.sampled_from([1, 2, 4]), gpu=st.sampled_from(["gb200", "b200"]),
       dtype=st.sampled_from(["mxfp8", "nvfp4"]))
def test_fusing_never_makes_a_step_slower_and_leaves_dense_layers_alone(model, mb, gpu, dtype):
    plan = {"micro_batch": mb, "global_batch": 8 * mb * 4, "dtype": dtype}
    if model != "qwen3-30b-a3b":
        plan.update(ep=8, dp=8)
    off = float(evaluate(_x(model, gpu, **plan))["step_time"])
    on = float(evaluate(_x(model, gpu, fused_moe_mlp=True, **plan))["step_time"])
    # fusing takes GPU work away: never slower, and faster where the host does not set the pace (a Grace host,
    # host_slowdown, can leave an eager MoE layer host-bound, where the GPU's saving does not show)
    assert on <= off * (1 + 1e-12)
    off_gpu = float(evaluate(gpu_only(_x(model, gpu, **plan)))["step_time"])
    on_gpu = float(evaluate(gpu_only(_x(model, gpu, fused_moe_mlp=True, **plan)))["step_time"])
    assert on_gpu < off_gpu
    dense = {o.name: o for o in C.layer_ops(C.d_head, C.S.ffn_hidden, 0, variants=True)}["mlp_activation"]
    x_on, x_off = _x(model, gpu, fused_moe_mlp=True, **plan), _x(model, gpu, **plan)
    assert value_at(dense.b_fwd, x_on) == value_at(dense.b_fwd, x_off) > 0


@pytest.mark.parametrize("model, plan, words", [
    ("qwen3-30b-a3b", {"dtype": "bf16"}, "needs dtype mxfp8 or nvfp4, got bf16"),
    ("qwen3-30b-a3b", {"per_expert_kernels": True}, "needs per_expert_kernels false"),
    ("llama3-8b", {"ep": 1}, "needs an MoE model"),
])
def test_rules_name_what_the_fused_mlp_needs(model, plan, words):
    with pytest.raises(InputError, match=words):
        resolve(model, {**PLAN, "fused_moe_mlp": True, **plan}, "gb200", "megatron-core")


def _moe_row(row_case, dtype, settings, notes=""):
    return row_case({"case_id": "r", "source": "Megatron-Bridge performance summary", "framework": "Megatron-Bridge",
                     "gpu_id": "gb200", "n_gpus": 8, "gpus_per_node": 72, "precision": dtype, "model": "Qwen3-30B-A3B",
                     "n_layers": 48, "d_model": 2048, "n_heads": 32, "n_kv_heads": 4, "head_dim": 128,
                     "ffn_hidden": 6144, "mlp": "swiglu", "vocab": 151936, "n_experts": 128, "top_k": 8,
                     "moe_ffn_hidden": 768, "seq_len": 4096, "global_batch": 512, "micro_batch": 4, "tp": 1, "pp": 1,
                     "dp": 8, "ep": 8, "settings": settings, "notes": notes, "measured_iter_time_s": 6.4})


@pytest.mark.parametrize("dtype, settings, notes, fused", [
    ("MXFP8", "CUDA graph impl=full_iteration | CuteDSL fused grouped MLP", "", True),
    ("MXFP8", "full-iteration CUDA graph; HybridEP flex; TE op fuser; moe_router_fusion", "", True),
    ("NVFP4", "use_transformer_engine_op_fuser=True", "", True),
    ("MXFP8", "use_transformer_engine_op_fuser=False", "", False),
    ("MXFP8", "CUDA graph impl=full_iteration", "HEAD adds use_transformer_engine_op_fuser after this version", False),
    ("BF16", "CuteDSL fused grouped MLP", "", False),
    ("MXFP8", "unfused grouped MLP", "", False),
])
def test_validate_reads_the_fused_mlp_from_what_the_row_ran(row_case, dtype, settings, notes, fused):
    plan = _moe_row(row_case, dtype, settings, notes).plan
    assert plan.fused_moe_mlp is fused
    if fused:
        assert plan.per_expert_kernels is False


def test_the_cli_flag_implies_one_kernel_for_all_local_experts():
    base = ["transformer", "--model", "qwen3-30b-a3b", "--gpu", "gb200", "--gpus", "8", "--tp", "1", "--pp", "1",
            "--dp", "8", "--ep", "8", "--micro-batch", "1", "--global-batch", "64", "--precision", "mxfp8", "--json"]
    on = run_cli(*base, "--fused-moe-mlp", check=True)
    assert '"fused_moe_mlp": true' in on.stdout and '"per_expert_kernels": false' in on.stdout
    bad = run_cli(*base, "--fused-moe-mlp", "--per-expert-kernels")
    assert bad.returncode == 2 and "needs per_expert_kernels false" in bad.stderr


def test_expert_biases_cost_a_pass_outside_the_gemm_unless_the_fused_mlp_adds_them():
    """GPT-OSS's experts carry biases: Megatron-Core adds the second GEMM's bias, times the fp32 routing probability,
    after the GEMM (TEGroupedMLP._apply_bias: 14 16-bit units per element forward, 10 backward); one grouped kernel
    (torchtitan) adds it in 16 bits; the fused grouped MLP does it in the GEMM."""
    op = MOE["expert_bias"]
    bf = dict(model="gpt-oss-120b", ep=8, dp=8)
    megatron = _x(**bf, dtype="bf16", per_expert_kernels=True)
    grouped = _x(**bf, dtype="bf16")
    fused = _x(**bf, fused_moe_mlp=True)
    elems = value_at(op.f_fwd, megatron) / 2            # 2 FLOP per element
    # one element per output element of the experts' second GEMM (2 m k n FLOPs, k the expert width)
    assert elems > 0 and elems == pytest.approx(value_at(MOE["mlp_down"].f_fwd, megatron) / (2 * megatron["moe_ffn"]))
    assert value_at(op.b_fwd, megatron) == pytest.approx(14 * 2 * elems)
    assert value_at(op.b_bwd, megatron) == pytest.approx(10 * 2 * elems)
    assert value_at(op.b_fwd, grouped) == pytest.approx(2 * 2 * elems)
    assert value_at(op.b_fwd, fused) == 0 and value_at(op.b_bwd, fused) == 0
    # no biases (Qwen3), no pass
    assert value_at(op.b_fwd, _x(dtype="bf16", per_expert_kernels=True)) == 0
