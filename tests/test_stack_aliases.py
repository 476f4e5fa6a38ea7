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
    stack, why = stacks.infer(column="veScale", model=LLAMA, hw=H100, dtype="bf16")
    assert stack.id == "megatron-core" and "era rule" in why


def _row(**over):
    row = {"case_id": "r", "framework": "SomeTrainer", "source": "a README table (2025)", "model": "llama2-7b",
           "gpu_id": "h100-sxm", "n_gpus": "8", "tp": "1", "pp": "1", "global_batch": "64", "micro_batch": "8",
           "seq_len": "4096", "precision": "bf16", "measured_iter_time_s": "10"}
    row.update(over)
    from roofline.views import validate as V
    return V.build_case(V.read_dicts([row])[0])


def test_an_unknown_trainers_zero2_run_is_priced_on_the_stand_in_that_runs_it():
    """Megatron-Core (the era rule's pick) has no ZeRO-2: a row of a framework the registry lacks that states ZeRO-2 is
    priced on DeepSpeed ZeRO, the stages' reference implementation, with the reason, instead of being skipped."""
    case = _row(optimizer_sharding="zero2")
    assert case.spec.stack.id == "deepspeed-zero" and case.plan.zero_stage == 2
    assert "stand-in that runs the row's plan" in case.stack_reason and "megatron-core cannot run" in case.stack_reason
    assert _row(optimizer_sharding="distributed").spec.stack.id == "megatron-core"     # what it runs stays on it


def test_a_named_stack_is_not_second_guessed():
    """A framework column naming a registry stack keeps it: its refusal skips the row with the stack's reason."""
    from roofline.views import validate as V
    with pytest.raises(V.Skip, match="megatron-core cannot run sharding 'zero2'"):
        _row(framework="Megatron-Core", optimizer_sharding="zero2")


@pytest.mark.parametrize("column, named", [
    ("Meta internal (FSDP + TP + PP + CP)", False), ("our 4D trainer: FSDP, TP, PP", False),
    ("veScale with ZeRO-3, TP 8 and PP 4", False),
    ("FSDP", True), ("FSDP + TP", True), ("fsdp, tp 8, pp 16", True), ("ZeRO-3", True), ("DeepSpeed ZeRO-3", True),
    ("torchtitan (FSDP2 + TP)", True), ("PyTorch FSDP", True), ("Hugging Face Accelerate (FSDP)", True),
    ("our trainer with ZeRO-3", True),
])
def test_a_sharding_technique_beside_another_frameworks_name_names_no_stack(column, named):
    """FSDP or ZeRO-3 are techniques many trainers implement: a column naming one with model parallelisms (TP, PP,
    CP) beside a framework the registry lacks (Llama 3's "Meta internal (FSDP + TP + PP + CP)") describes that
    framework and falls to the era rule, as the framework's bare name would; alone, with other parallelisms only, or
    as what a trainer shards with (Hugging Face Accelerate's FSDP), the technique names its stack."""
    stack, why = stacks.infer(column=column, model=LLAMA, hw=H100, dtype="bf16")
    assert stacks.names_stack(column) is named
    assert ("era rule" in why and "names no stack of the registry" in why) is not named, why


@pytest.mark.parametrize("framework", ["", "Meta internal (FSDP + TP + PP + CP)"])
def test_a_technique_in_the_notes_that_names_a_stack_unable_to_run_the_row_falls_to_the_era_rule(framework):
    """The Llama 3 report's 4D run as a row: its notes' "ZeRO-2-like" names DeepSpeed ZeRO, which runs neither the
    interleaved pipeline they also state nor ZeRO-2 beside it. The column names no registry stack, so the row is
    priced like one whose text names nothing (the era rule's stack, then its stand-ins) rather than skipped; what
    that stack refuses of the notes is dropped and said, the row's own columns kept."""
    case = _row(framework=framework, source="Llama Team 2024, The Llama 3 Herd of Models (arXiv:2407.21783)",
                model="llama3-70b", n_gpus="64", tp="8", pp="4", dp="2", global_batch="64", micro_batch="1",
                notes="FSDP (ZeRO-2-like), TP, PP; interleaved pipeline schedule")
    assert case.spec.stack.id == "megatron-core", case.stack_reason
    assert "source text names 'zero-2'" in case.stack_reason and "deepspeed-zero cannot run the row" in case.stack_reason
    assert (case.plan.tp, case.plan.pp, case.plan.dp) == (8, 4, 2) and case.plan.interleave > 1
    assert case.plan.sharding == "distributed" and "the text's sharding dropped" in case.note


def test_a_named_framework_whose_notes_name_an_unrunnable_technique_is_still_skipped():
    """The fallback is for rows whose column names no stack: a column naming DeepSpeed keeps DeepSpeed's refusal."""
    from roofline.views import validate as V
    with pytest.raises(V.Skip, match="interleaved schedule"):
        _row(framework="DeepSpeed", model="llama3-70b", n_gpus="64", tp="1", pp="4", dp="16", global_batch="64",
             micro_batch="1", optimizer_sharding="zero1", interleave="2")


def test_a_column_naming_metaseq_and_megatron_lm_is_metaseq():
    """metaseq merged Megatron's tensor-parallel layers into fairseq with FSDP (its README, History): a column naming
    both ran metaseq (rule builds_on megatron-lm), not the Megatron-LM stack that has no FSDP; Megatron-LM alone keeps
    its own stack."""
    from roofline.spec import stacks
    assert stacks.infer("metaseq (FSDP + Megatron-LM tensor parallel)", "")[0].id == "metaseq"
    assert stacks.infer("Megatron-LM", "")[0].family == "megatron-lm"
