"""Rows of published runs as their sources spell them: OPT's ReLU MLP, a ZeRO stage written "stage 2", Narayanan et al.'s
"1F1B-I", a zero-bubble schedule, a recompute column saying "every other layer", and a multi-query model under more TP
ranks than key/value heads (StarCoder). Each is priced, with what it was priced as said, instead of skipped."""
import pytest

from roofline.base import normalize
from roofline.base.errors import InputError
from roofline.views import validate as V

ROW = {"case_id": "r", "framework": "Megatron-LM", "model": "GPT-3 13B", "gpu": "A100 80GB", "n_gpus": 64,
       "tp": 2, "pp": 2, "dp": 16, "global_batch": 512, "micro_batch": 1, "seq_len": 2048, "precision": "bf16",
       "measured_iter_time_s": 10.0}


@pytest.mark.parametrize("text, mlp", [("ReLU", "gelu"), ("relu", "gelu"), ("gelu_new", "gelu"), ("GeGLU", "swiglu"),
                                       ("ReGLU", "swiglu"), ("squared_relu", "squared_relu"), ("relu^2", "squared_relu"),
                                       ("SwiGLU", "swiglu")])
def test_mlp_spellings(text, mlp):
    assert normalize.mlp(text) == mlp


def test_an_unknown_mlp_is_still_one_line():
    with pytest.raises(InputError, match="mlp: cannot read 'maxout'"):
        normalize.mlp("maxout")


@pytest.mark.parametrize("text, stage", [("stage 2", "zero2"), ("ZeRO stage 3", "fsdp"), ("stage 1", "distributed"),
                                         ("stage-2", "zero2")])
def test_zero_stage_spellings(text, stage):
    assert normalize.sharding(text) == stage


def test_a_stage_number_that_is_no_zero_stage_is_refused():
    with pytest.raises(InputError, match="sharding: cannot read 'stage 12'"):
        normalize.sharding("stage 12")


def test_a_relu_row_prices_as_the_non_gated_mlp():
    relu = V.build_case(V.read_dicts([{**ROW, "mlp": "ReLU"}])[0])
    gelu = V.build_case(V.read_dicts([{**ROW, "mlp": "gelu"}])[0])
    assert relu.model.mlp == gelu.model.mlp == "gelu"


def test_1f1b_i_is_the_interleaved_schedule():
    case = V.build_case(V.read_dicts([{**ROW, "notes": "1F1B-I schedule"}])[0])
    assert case.plan.schedule == "interleaved" and case.plan.interleave > 1
    plain = V.build_case(V.read_dicts([{**ROW, "notes": "1F1B schedule"}])[0])
    assert plain.plan.schedule == "1f1b" and plain.plan.interleave == 1


@pytest.mark.parametrize("text", ["ZB-1p schedule", "zero bubble pipeline (ZB-H1)", "ZBVZeroBubble"])
def test_a_zero_bubble_schedule_is_priced_as_1f1b_and_said(text):
    case = V.build_case(V.read_dicts([{**ROW, "notes": text}])[0])
    assert case.plan.schedule == "1f1b" and case.plan.interleave == 1
    assert "zero-bubble schedule is not modelled" in case.note


def test_a_recompute_column_of_every_other_layer_recomputes_half_the_layers():
    case = V.build_case(V.read_dicts([{**ROW, "recompute": "every other layer"}])[0])
    assert case.plan.recompute == "full" and case.plan.recompute_fraction == pytest.approx(0.5)
    assert "one block in 2" in case.note


def test_multi_query_attention_under_wider_tp_is_priced_with_replicated_kv_heads():
    # StarCoder (arXiv:2305.06161): multi-query attention (one key/value head) at TP 4 on 512 A100s, Megatron-LM of
    # 2023, whose upstream splits the key/value heads over the TP ranks; the run's own version replicated it
    row = {**ROW, "model": "StarCoderBase", "n_layers": 40, "d_model": 6144, "n_heads": 48, "n_kv_heads": 1,
           "ffn_hidden": 24576, "mlp": "gelu", "vocab": 49152, "seq_len": 8192, "tp": 4, "pp": 4, "dp": 32,
           "n_gpus": 512, "global_batch": 512, "source": "StarCoder paper, 2023", "recompute": "selective"}
    case = V.build_case(V.read_dicts([row])[0])
    assert case.framework == "megatron-lm-2022" and case.plan.tp == 4 and case.model.kv_heads == 1
    assert "replicated over the TP ranks" in case.stack_reason
    # a model whose kv-heads the TP ranks divide is priced as before, with no such reason
    gqa = V.build_case(V.read_dicts([{**row, "n_kv_heads": 8}])[0])
    assert "replicated" not in gqa.stack_reason
