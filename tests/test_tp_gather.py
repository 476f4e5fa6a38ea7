"""TP all-gathers of quantized data under a low-precision recipe (Plan.quantized_tp_gather; base/precision.py
tp_gather_bytes; formulas/step.py tp_block_comm) and torchao's row-wise FP8 recipe (precision fp8-row)."""

import pytest
from hypothesis import given, settings, strategies as st

from roofline.base import precision
from roofline.base.errors import InputError
from roofline.model.formulas import compute as C
from roofline.model.predict import inputs, predict, value_at
from roofline.spec.resolve import resolve

LOW = ("fp8", "fp8-cs", "fp8-block", "mxfp8", "nvfp4")


@pytest.mark.parametrize("dtype, fwd_in, grad_out", [
    # Transformer Engine data layouts: FP8 1 byte per element with one scale per tensor; MXFP8 one E8M0 byte per 32;
    # NVFP4 half a byte with one E4M3 byte per 16; FP8 blockwise one fp32 scale per 128. The output gradient of a
    # block-scaled recipe is gathered with both its row-wise and column-wise copies
    ("fp8", 1.0, 1.0), ("fp8-cs", 1.0, 1.0),
    ("mxfp8", 1 + 1 / 32, 2 * (1 + 1 / 32)),
    ("nvfp4", 0.5 + 1 / 16, 2 * (0.5 + 1 / 16)),
    ("fp8-block", 1 + 4 / 128, 2 * (1 + 4 / 128)),
])
def test_quantized_gathers_move_the_recipes_data_layout(dtype, fwd_in, grad_out):
    assert precision.tp_gather_bytes(dtype, 2, True) == pytest.approx((fwd_in, grad_out))
    assert precision.tp_gather_bytes(dtype, 2, False) == (2, 2)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp8-row"])
def test_16_bit_and_row_wise_gathers_stay_16_bit(dtype):
    # torchtitan gathers row-wise FP8 inputs in BF16 (models/llama3/parallelize.py)
    assert precision.tp_gather_bytes(dtype, 2, True) == (2, 2)


def test_layers_kept_in_16_bits_gather_16_bit():
    one, both = precision.tp_gather_bytes("nvfp4", 2, True, hp_frac=0.25)
    assert one == pytest.approx(0.75 * (0.5 + 1 / 16) + 0.25 * 2)
    assert both == pytest.approx(0.75 * 2 * (0.5 + 1 / 16) + 0.25 * 2)


def _tp_comm(dtype, quantized, tp, model="llama3-70b", gpu="h100-sxm", stack="megatron-core"):
    spec = resolve(model, {"tp": tp, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 16, "dtype": dtype,
                           "quantized_tp_gather": quantized}, gpu, stack)
    return predict(spec.model, spec.plan, spec.hardware).breakdown["tp_comm"].to("s").magnitude


@settings(max_examples=12, deadline=None)
@given(dtype=st.sampled_from(LOW), tp=st.sampled_from([2, 4, 8]))
def test_quantized_gathers_never_cost_more_and_save_under_per_tensor_fp8(dtype, tp):
    gpu = "b200" if dtype in ("mxfp8", "nvfp4") else "h100-sxm"
    on, off = _tp_comm(dtype, True, tp, gpu=gpu), _tp_comm(dtype, False, tp, gpu=gpu)
    assert on <= off * (1 + 1e-12)
    if dtype in ("fp8", "fp8-cs"):
        assert on < off


def test_16_bit_runs_are_unchanged_by_the_switch():
    assert _tp_comm("bf16", True, 8) == pytest.approx(_tp_comm("bf16", False, 8), rel=1e-12)


def test_stacks_choose_the_gather_by_recipe():
    plan = {"tp": 8, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 16}
    assert resolve("llama3-70b", {**plan, "dtype": "mxfp8"}, "b200", "megatron-core").plan.quantized_tp_gather
    assert resolve("llama3-70b", {**plan, "dtype": "fp8-cs"}, "h100-sxm", "torchtitan").plan.quantized_tp_gather
    spec = resolve("llama3-70b", {**plan, "dtype": "mxfp8"}, "b200", "torchtitan")
    assert not spec.plan.quantized_tp_gather
    assert any("quantized_tp_gather" in line and "fp8-cs only" in line for line in spec.explain())


def test_megatron_core_refuses_the_row_wise_recipe_in_one_line():
    with pytest.raises(InputError, match=r"stack megatron-core cannot train in fp8-row .*Fp8Recipe") as exc:
        resolve("llama3-8b", {"tp": 1, "pp": 1, "dp": 8, "dtype": "fp8-row"}, "h100-sxm", "megatron-core")
    assert "\n" not in str(exc.value)


def test_row_wise_casts_move_torchaos_eight_bytes_against_six():
    # torchao roofline_utils.py: rowwise 2 + 1 + 2 and 2 + 1 bytes per input / output-gradient element, tensorwise 6
    ops = C.layer_ops()
    quant = next(o for o in ops if o.name == "quantize")
    times = {}
    for dtype in ("fp8-cs", "fp8-row"):
        spec = resolve("llama3-8b", {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 8, "dtype": dtype},
                       "h100-sxm", "torchtitan")
        times[dtype] = value_at(C.op_time(quant, "fwd"), inputs(spec.model, spec.plan, spec.hardware))
    assert times["fp8-row"] / times["fp8-cs"] == pytest.approx(8 / 6, rel=0.02)


def test_a_row_wise_row_naming_no_stack_is_priced_on_torchtitan():
    from roofline.spec import hardware, stacks
    stack, why = stacks.infer(text="a 2025 blog post", hw=hardware.load("h100-sxm"), dtype="fp8-row")
    assert stack.id == "torchtitan" and "fp8-row is no recipe of megatron-core" in why
    stack, _ = stacks.infer(text="a 2025 blog post", hw=hardware.load("h100-sxm"), dtype="fp8-cs")
    assert stack.id == "megatron-core"
