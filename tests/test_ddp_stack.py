"""The PyTorch DDP stack (Hugging Face Trainer / Accelerate / Lightning): inference from a row's text, what it cannot
run, and the one thing that sets it apart from the plain stack (gradient all-reduce overlapped with backward)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import InputError
from roofline.model.predict import predict
from roofline.spec import stacks
from roofline.spec.resolve import resolve


@pytest.mark.parametrize("text,want", [
    ("Hugging Face Trainer", "ddp"),                          # undated: the current release (SDPA)
    ("HF Trainer, 2022", "ddp-2022"),                         # dated before transformers 4.36: eager attention
    ("PyTorch Lightning (2021)", "ddp-2022"),
    ("HF Trainer with DeepSpeed ZeRO-3", "deepspeed"),   # the trainer defers to the engine named beside it
    ("Hugging Face Accelerate (FSDP)", "fsdp"),
    ("accelerate launch + FSDP, 2024", "fsdp"),
    ("nanoGPT with DDP", "nanogpt"),                          # nanoGPT's own loop: its stack, not the trainer's
    ("Megatron-LM (its own DDP)", "megatron-lm"),
])
def test_trainers_and_the_engine_they_run(text, want):
    stack, why = stacks.infer(text)
    assert stack.id == want or stack.family == want, (text, stack.id, why)


@pytest.mark.parametrize("column,text,want", [
    ("Axolotl", "Llama 3 8B full fine-tune, 8x A100, 2024", "ddp"),
    ("LLaMA-Factory", "full fine-tune, 2023", "ddp-2022"),
    ("Axolotl", "2024 blog: DeepSpeed ZeRO-3 config zero3_bf16.json, 8x H100", "deepspeed-zero"),
    ("Hugging Face Trainer", "fsdp full_shard auto_wrap, 2024", "fsdp"),
    ("Hugging Face Trainer", "2024, the same model compared with Megatron-LM", "ddp"),   # only DeepSpeed / FSDP take over
])
def test_a_trainer_in_the_column_runs_the_engine_the_text_hands_it_to(column, text, want):
    stack, why = stacks.infer(column, text)
    assert stack.id == want, (column, text, stack.id, why)


def test_ddp_beside_another_framework_names_nothing_else():
    # 'DDP + TP + PP' beside a name the registry lacks is a technique list, not the DDP stack
    assert not stacks.names_stack("Meta internal (DDP + TP + PP)")
    assert stacks.names_stack("PyTorch DDP")


def test_the_versions_differ_by_attention_only():
    old, new = stacks.get("ddp-2022"), stacks.get("ddp")
    assert (old.model["attention"], new.model["attention"]) == ("unfused", "flash")
    assert dict(old.plan) == dict(new.plan) and old.family == new.family


@pytest.mark.parametrize("knob,value", [("tp", 2), ("pp", 2), ("cp", 2), ("sharding", "zero3"),
                                        ("recompute", "selective")])
def test_what_ddp_cannot_run_is_one_line(knob, value):
    plan = {"tp": 1, "pp": 1, "dp": 8, "global_batch": 64, knob: value}
    plan["dp"] = 8 // (value if knob in ("tp", "pp", "cp") else 1)
    with pytest.raises(InputError) as e:
        resolve("gpt3-1.3b", plan, "a100-sxm4-80gb", "ddp")
    assert "stack ddp" in str(e.value) and "\n" not in str(e.value)


@settings(max_examples=15, deadline=None)
@given(dp=st.sampled_from([1, 2, 8, 64]), mb=st.sampled_from([1, 2, 4]), accum=st.sampled_from([1, 4]))
def test_ddp_is_plain_pytorch_with_the_all_reduce_hidden_behind_backward(dp, mb, accum):
    """Same kernels, dtypes and loss as the plain stack; only the bucketed all-reduce overlaps backward. So DDP is never
    slower than plain, equal at dp 1 (nothing to reduce), and strictly faster once the reduction is not free."""
    plan = {"dp": dp, "micro_batch": mb, "global_batch": dp * mb * accum}
    ddp = predict(resolve("gpt3-1.3b", plan, "a100-sxm4-80gb", "ddp"))
    plain = predict(resolve("gpt3-1.3b", plan, "a100-sxm4-80gb", "plain"))
    t_ddp, t_plain = float(ddp.step_time.magnitude), float(plain.step_time.magnitude)
    assert t_ddp <= t_plain * (1 + 1e-12)
    exposed_plain = float(plain.breakdown["dp_comm"].magnitude)
    if dp == 1:
        assert t_ddp == pytest.approx(t_plain, rel=1e-12)
    elif exposed_plain > 1e-6:
        assert t_ddp < t_plain


@settings(max_examples=12, deadline=None)
@given(dp=st.sampled_from([1, 2, 16]), preset=st.sampled_from(["gpt3-1.3b", "llama2-7b"]))
def test_ddp_holds_its_gradient_buckets_beside_the_gradients(dp, preset):
    """torch DDP (gradient_as_bucket_view=False) copies param.grad into buckets of its own: one more copy of the
    gradients in their dtype once more than one rank reduces them, and nothing else in memory changes."""
    plan = {"dp": dp, "global_batch": dp * 4}
    on = predict(resolve(preset, plan, "a100-sxm4-80gb", "ddp"))
    off_spec = resolve(preset, {**plan, "grad_buckets": False}, "a100-sxm4-80gb", "ddp")
    off = predict(off_spec)
    extra = on.raw["mem_gradients"] - off.raw["mem_gradients"]
    params, grad_bytes = off.raw["params_rank"], 4          # fp32 .grad under autocast (the stack's grad_dtype)
    assert off_spec.plan.grad_dtype == "fp32"
    assert extra == pytest.approx(params * grad_bytes if dp > 1 else 0.0, rel=1e-9)
    assert on.raw["mem_activations"] == off.raw["mem_activations"] and on.raw["step_time"] == off.raw["step_time"]


def test_nanogpt_is_ddp_compiled():
    """nanoGPT's train.py: DDP (its buckets and overlap) around a torch.compile'd model; the same plan on the ddp stack
    differs only by the fused elementwise kernels and loss: never slower, fewer activation bytes, the same states."""
    plan = {"dp": 8, "micro_batch": 12, "global_batch": 480}
    nano = predict(resolve("gpt3-125m", plan, "a100-sxm4-80gb", "nanogpt"))        # GPT-2 small's shape
    ddp = predict(resolve("gpt3-125m", plan, "a100-sxm4-80gb", "ddp"))
    assert nano.raw["step_time"] <= ddp.raw["step_time"]        # LayerNorm and GELU are one kernel each either way
    assert nano.raw["mem_activations"] < ddp.raw["mem_activations"]    # the compiled loss saves 16-bit logits
    for k in ("mem_weights", "mem_gradients", "mem_optimizer"):
        assert nano.raw[k] == ddp.raw[k]
    assert nano.raw["t_dp_comm"] == ddp.raw["t_dp_comm"]
