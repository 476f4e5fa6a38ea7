"""stacks.infer: a row that names no stack and shows no 2023+ feature gets the Megatron-LM of its source's date."""
from roofline.spec import stacks
import pytest


def test_unnamed_old_run_takes_the_megatron_lm_of_its_year():
    # no alias in the text, fp16 on Ampere, GPT-style MHA: the era rule; the arXiv id dates the code
    s, why = stacks.infer(text="Some et al. arXiv:2205.05198 Table 5", dtype="fp16")
    assert s.id == "megatron-lm-2022" and "2022" in why
    s, _ = stacks.infer(text="A 2021 run", dtype="fp16")
    assert s.id == "megatron-lm-2021"
    s, why = stacks.infer(text="no date here", dtype="fp16")
    assert s.id == "megatron-lm-2021" and why.startswith("era rule")


def test_a_source_naming_deepspeed_and_megatron_ran_megatron_deepspeed():
    """MT-NLG's 'Using DeepSpeed and Megatron to Train ...': the combination (megatron-deepspeed: Megatron's TP,
    DeepSpeed's pipeline and ZeRO), not DeepSpeed ZeRO alone; either name alone keeps its own stack."""
    from roofline.spec import hardware, stacks
    hw = hardware.load("a100-sxm4-80gb")
    st, why = stacks.infer(text="Smith et al. 2022, Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B",
                           hw=hw)
    assert st.id == "megatron-deepspeed" and "deepspeed and megatron" in why
    assert stacks.infer(text="DeepSpeed ZeRO-3, 2022", hw=hw)[0].family == "deepspeed"
    assert stacks.infer(text="Megatron-LM 2021", hw=hw)[0].family == "megatron-lm"


def test_deepspeed_megatron_spelled_either_way_is_megatron_deepspeed():
    """'DeepSpeed-Megatron' names the same fork as 'Megatron-DeepSpeed' (a hyphen before 'Megatron' hid it from the
    whole-word match, so DeepSpeed ZeRO alone, which has no TP, was picked)."""
    for col in ("DeepSpeed-Megatron", "deepspeed megatron", "Megatron-DeepSpeed"):
        assert stacks.infer(column=col, dtype="fp16")[0].id == "megatron-deepspeed", col


def test_a_framework_the_registry_lacks_is_named_in_the_reason():
    """A framework column naming a stack the registry does not hold is priced by the era rule, and the reason says
    the name was not recognised (instead of reading as if no framework was stated)."""
    s, why = stacks.infer(column="MaxText", dtype="bf16")
    assert s.id == "megatron-core" and "'MaxText' names no stack" in why and "era rule" in why
    _, why = stacks.infer(column="", dtype="bf16")
    assert "names no stack" not in why


def test_fsdp_with_megatron_tp_in_2021_2023_is_metaseq():
    """OPT's 'Fully Sharded Data Parallel with Megatron-LM Tensor Parallelism' (Zhang et al. 2022) ran metaseq; the same
    two names in a 2024+ source are not read as metaseq (its era ends in 2023)."""
    st, why = stacks.infer(text="Zhang et al. 2022, arXiv:2205.01068: Fully Sharded Data Parallel with Megatron-LM "
                                "Tensor Parallelism", dtype="fp16")
    assert st.id == "metaseq" and "megatron-lm" in why
    assert stacks.infer(text="2025: FSDP and Megatron compared", dtype="bf16")[0].id != "metaseq"


def test_metaseq_runs_no_pipeline():
    from roofline.base.errors import InputError
    from roofline.spec.resolve import resolve

    ok = resolve("opt-175b", {"tp": 8, "pp": 1, "dp": 4, "global_batch": 64}, "a100-sxm4-80gb", "metaseq")
    assert (ok.plan.recompute, ok.plan.sharding, ok.plan.dtype, ok.model.attention) == ("full", "zero2", "fp16",
                                                                                         "unfused")
    with pytest.raises(InputError, match="metaseq has no pipeline parallelism"):
        resolve("opt-175b", {"tp": 8, "pp": 2, "dp": 2, "global_batch": 64}, "a100-sxm4-80gb", "metaseq")
