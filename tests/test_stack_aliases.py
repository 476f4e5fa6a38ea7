"""Names strangers write for the trainers built on PyTorch FSDP1 or Composer find those stacks, not the era rule's
Megatron-Core, and a longer name of another stack that contains one of them keeps its own (allenai/OLMo-core)."""
import pytest

from roofline.spec import hardware, models, stacks

H100, LLAMA = hardware.load("h100-sxm"), models.load("llama3-8b")


@pytest.mark.parametrize("column, want", [
    ("fms-fsdp", "fsdp"), ("LitGPT", "fsdp"), ("lit-gpt pretrain", "fsdp"), ("allenai/OLMo", "fsdp"),
    ("allenai/OLMo scripts/train.py", "fsdp"), ("allenai/OLMo-core", "olmo-core"), ("OLMo-core", "olmo-core"),
    ("LLM Foundry", "llm-foundry-2023"), ("llm-foundry", "llm-foundry-2023"), ("PyTorch FSDP", "fsdp"),
])
def test_a_trainers_name_finds_its_stack(column, want):
    stack, why = stacks.infer(column=column, model=LLAMA, hw=H100, dtype="bf16")
    assert stack.id == want and "era rule" not in why, why


def test_an_unknown_modern_trainer_still_falls_to_the_era_rule():
    stack, why = stacks.infer(column="Levanter", model=LLAMA, hw=H100, dtype="bf16")
    assert stack.id == "megatron-core" and "era rule" in why
