"""Rows and flags that restate part of a named preset, ALiBi models, and the llm-foundry version of a row without a
year: inputs as users and sources write them, found by pricing a public table the project had not seen
(llm-foundry's benchmark tables)."""
import doctest
import subprocess
import sys

import pytest

import roofline.spec.resolve
from roofline.base.errors import InputError
from roofline.model.predict import model_inputs
from roofline.spec import hardware, models, stacks
from roofline.spec.resolve import resolve
from roofline.views import validate as V

H100 = hardware.load("h100-sxm")
A100 = hardware.load("a100-sxm4-80gb")


def test_doctests():
    assert doctest.testmod(roofline.spec.resolve).failed == 0


def test_a_restated_head_count_keeps_a_multi_head_preset_multi_head():
    # MPT-30B is multi-head (64 heads, 64 key/value heads); a row that states 56 heads gets 56 key/value heads, not
    # the preset's 64 (which do not even divide 56)
    s = resolve("mpt-30b", {"tp": 1, "dp": 8, "global_batch": 8}, "h100-sxm", "llm-foundry", model_fields={"n_heads": 56})
    assert s.model.n_heads == 56 and s.model.kv_heads == 56
    assert "multi-head" in s.origin["n_kv_heads"]
    same = resolve("mpt-30b", {"tp": 1, "dp": 8, "global_batch": 8}, "h100-sxm", "llm-foundry")
    assert same.model.kv_heads == 64


def test_a_restated_head_count_keeps_a_gqa_presets_kv_heads_when_they_divide_it():
    s = resolve("llama3-8b", {"tp": 1, "dp": 8, "global_batch": 8}, "h100-sxm", "megatron-core",
                model_fields={"n_heads": 64, "d_model": 8192})
    assert s.model.kv_heads == 8
    with pytest.raises(InputError, match=r"n_kv_heads: the preset's 8 key/value heads do not divide the stated n_heads 36"):
        resolve("llama3-8b", {"tp": 1, "dp": 8, "global_batch": 8}, "h100-sxm", "megatron-core",
                model_fields={"n_heads": 36, "d_model": 4608})
    stated = resolve("llama3-8b", {"tp": 1, "dp": 8, "global_batch": 8}, "h100-sxm", "megatron-core",
                     model_fields={"n_heads": 36, "d_model": 4608, "n_kv_heads": 4})
    assert stated.model.kv_heads == 4 and stated.origin["n_kv_heads"] == "stated"


def test_the_cli_says_the_gqa_case_in_one_line():
    out = subprocess.run([sys.executable, "-m", "roofline", "transformer", "--model", "llama3-8b", "--heads", "36",
                          "--d-model", "4608", "--gpus", "8"], capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "n_kv_heads" in out.stderr and "36" in out.stderr


def test_a_validation_row_naming_a_multi_head_preset_with_its_own_head_count_is_priced(tmp_path):
    row = {"case_id": "mpt30b", "model": "MPT-30B", "n_layers": 48, "d_model": 7168, "n_heads": 56, "vocab": 50368,
           "seq_len": 2048, "n_gpus": 8, "gpu": "A100 80GB", "micro_batch": 3, "global_batch": 504,
           "tokens_per_s_per_gpu": 916, "framework": "llm-foundry", "optimizer_sharding": "FULL_SHARD",
           "recompute": "full"}
    path = tmp_path / "runs.csv"
    path.write_text(",".join(row) + "\n" + ",".join(str(v) for v in row.values()) + "\n")
    case = V.build_case(V.read(path)[0])
    assert case.model.n_heads == 56 and case.model.kv_heads == 56


@pytest.mark.parametrize("preset", ["mpt-7b", "mpt-30b", "bloom-176b"])
def test_alibi_presets_have_no_table_and_no_rotation(preset):
    m = models.load(preset)
    assert m.position == "alibi"
    inputs = model_inputs(m)
    assert inputs["learned_pos"] == 0 and inputs["rope_pos"] == 0
    assert model_inputs(models.load("llama3-8b"))["rope_pos"] == 1


def test_an_eager_stack_charges_rope_only_to_a_rotary_model():
    # the same shape under llm-foundry (eager elementwise ops): ALiBi is cheaper than RoPE by the eager rotation alone
    from roofline.model.predict import predict
    plan = {"tp": 1, "dp": 8, "micro_batch": 1, "global_batch": 8}
    alibi = resolve("mpt-7b", plan, "h100-sxm", "llm-foundry")
    rope = resolve("mpt-7b", plan, "h100-sxm", "llm-foundry", model_fields={"position": "rope"})
    learned = resolve("mpt-7b", plan, "h100-sxm", "llm-foundry", model_fields={"position": "learned"})
    t = {k: predict(s.model, s.plan, s.hardware).step_time.to("s").magnitude
         for k, s in (("alibi", alibi), ("rope", rope), ("learned", learned))}
    assert t["rope"] > t["alibi"]
    assert t["learned"] >= t["alibi"]           # a table adds its parameters and its gradient, no rotation
    mc_alibi = resolve("mpt-7b", plan, "h100-sxm", "megatron-core")
    mc_rope = resolve("mpt-7b", plan, "h100-sxm", "megatron-core", model_fields={"position": "rope"})
    p = [predict(s.model, s.plan, s.hardware).step_time.to("s").magnitude for s in (mc_alibi, mc_rope)]
    # fused RoPE (Megatron-Core: Transformer Engine's one-pass kernel) costs less than the eager rotation does
    assert p[1] > p[0]
    assert p[1] / p[0] - 1 < t["rope"] / t["alibi"] - 1


@pytest.mark.parametrize("text, hw, dtype, expected", [
    ("llm-foundry", H100, "bf16", "llm-foundry-2023"),      # Hopper and bf16 do not tell the two 2023+ versions apart
    ("llm-foundry", A100, None, "llm-foundry-2023"),
    ("llm-foundry 2024", H100, "bf16", "llm-foundry"),       # a year picks the version
    ("llm-foundry (2023)", H100, "bf16", "llm-foundry-2023"),
    ("deepspeed", H100, "bf16", "deepspeed-zero"),           # a family with a pre-2023 version: the features pick
    ("deepspeed", A100, "fp16", "deepspeed-zero-2021"),
    ("megatron-lm", H100, "bf16", "megatron-core"),
    ("gpt-neox", H100, "bf16", "gpt-neox"),
])
def test_the_version_a_row_without_a_year_gets(text, hw, dtype, expected):
    stack, why = stacks.infer(text, "", None, hw, dtype)
    assert stack.id == expected, why
    if text == "llm-foundry" and hw is H100:
        assert "every llm-foundry version is 2023+" in why
