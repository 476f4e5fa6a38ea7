"""GEMM inputs saved for the weight gradient under an FP8/FP4 recipe: Transformer Engine keeps its quantized copy
(linear.py: row-wise data discarded, the column-wise copy kept), torchao's Float8Linear the 16-bit input."""
import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from roofline.base import precision
from roofline.model.predict import predict
from roofline.spec import hardware, stacks
from roofline.spec.config import Model, Plan

H100 = hardware.load("h100-sxm")
B200 = hardware.load("b200")
GPT = Model(n_layers=4, d_model=256, n_heads=4, vocab=1000, seq_len=128)          # gelu MLP, 4h wide
PLAN = Plan(micro_batch=2, global_batch=2)


def _act(dtype, saves=True, model=GPT, plan=PLAN):
    hw = B200 if dtype in ("nvfp4", "mxfp8") else H100     # FP4 and MX block-scaled plans need Blackwell
    return predict(model, dataclasses.replace(plan, dtype=dtype, quantized_saves=saves), hw).raw["mem_activations"]


@pytest.mark.parametrize("dtype", ["fp8", "fp8-cs", "fp8-block", "mxfp8", "nvfp4"])
def test_te_saves_four_gemm_inputs_per_layer_quantized(dtype):
    # per layer, the GEMM inputs a layer saves: QKV's and fc1's (h each), the attention projection's (heads x head
    # dim = h) and fc2's (4h); in 16 bits 2 B each, as TE's column-wise copy saved_bytes each
    per_token = GPT.d_model + GPT.d_model + GPT.d_model + 4 * GPT.d_model
    tokens = PLAN.micro_batch * GPT.seq_len
    saved = precision.get(dtype).saved_bytes
    assert 0 < saved < 2
    expect = GPT.n_layers * tokens * per_token * (2 - saved)
    assert _act("bf16") - _act(dtype) == pytest.approx(expect, rel=1e-12)


def test_torchao_keeps_the_16_bit_inputs_and_16_bit_training_is_unchanged():
    assert _act("fp8-cs", saves=False) == _act("bf16")
    assert _act("bf16", saves=True) == _act("bf16", saves=False)


@settings(max_examples=20, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), sp=st.booleans(), dtype=st.sampled_from(["fp8-cs", "mxfp8", "nvfp4"]))
def test_quantized_saves_only_ever_lower_activation_memory(tp, sp, dtype):
    m = Model(n_layers=8, d_model=1024, n_heads=16, n_kv_heads=4, mlp="swiglu", vocab=32000, seq_len=1024)
    p = Plan(tp=tp, dp=1, micro_batch=1, global_batch=4, sequence_parallel=sp)
    assert _act(dtype, True, m, p) < _act(dtype, False, m, p)
    assert _act("fp8-cs", False, m, p) == _act("bf16", True, m, p)


def test_stacks_say_which_kernels_save_what():
    assert stacks.get("megatron-core").plan["quantized_saves"] is True and Plan().quantized_saves
    assert stacks.get("torchtitan").plan["quantized_saves"] is False
