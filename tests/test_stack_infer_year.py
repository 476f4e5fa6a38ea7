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
    st, why = stacks.infer(text="Smith et al. 2022, Using DeepSpeed and Megatron to Train a 530B model", hw=hw)
    assert st.id == "megatron-deepspeed-2022" and "deepspeed and megatron" in why and "2022" in why
    # the paper's full title also names the model, MT-NLG, an alias of the same stack
    st, why = stacks.infer(text="Smith et al. 2022, Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B",
                           hw=hw)
    assert st.id == "megatron-deepspeed-2022"
    # the combination is dated like a family name: a 2024 source ran the fork after its 2023-07 merge
    assert stacks.infer(text="A 2024 run with DeepSpeed and Megatron", hw=hw)[0].id == "megatron-deepspeed"
    assert stacks.infer(text="DeepSpeed ZeRO-3, 2022", hw=hw)[0].family == "deepspeed"
    assert stacks.infer(text="Megatron-LM 2021", hw=hw)[0].family == "megatron-lm"


def test_deepspeed_megatron_spelled_either_way_is_megatron_deepspeed():
    """'DeepSpeed-Megatron' names the same fork as 'Megatron-DeepSpeed' (a hyphen before 'Megatron' hid it from the
    whole-word match, so DeepSpeed ZeRO alone, which has no TP, was picked)."""
    for col in ("DeepSpeed-Megatron", "deepspeed megatron", "Megatron-DeepSpeed"):
        assert stacks.infer(column=col, dtype="fp16")[0].family == "megatron-deepspeed", col


def test_a_framework_the_registry_lacks_is_named_in_the_reason():
    """A framework column naming a stack the registry does not hold is priced by the era rule, and the reason says
    the name was not recognised (instead of reading as if no framework was stated)."""
    s, why = stacks.infer(column="veScale", dtype="bf16")
    assert s.id == "megatron-core" and "'veScale' names no stack" in why and "era rule" in why
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


@pytest.mark.parametrize("stack,runs", [
    ("megatron-lm-2021", False), ("megatron-lm-2022", True), ("megatron-core", True),
    ("megatron-deepspeed-2022", False), ("megatron-deepspeed", True), ("gpt-neox", False), ("gpt-neox-2022", False),
    ("deepspeed-zero", False), ("fsdp", False), ("llm-foundry", False), ("llm-foundry-2023", False), ("plain", False)])
def test_attention_core_recomputation_only_where_the_stack_has_it(stack, runs):
    """Megatron's selective recomputation (the attention core) came with Megatron-LM bbab79f869 (2022-05) and reached
    Megatron-DeepSpeed with its 2023-07 merge; the FSDP/DeepSpeed/NeoX stacks checkpoint whole blocks. A stack that
    lacks it refuses it in one line naming its source, and runs full recomputation."""
    from roofline.base.errors import InputError
    from roofline.spec.resolve import resolve

    plan = {"tp": 1, "pp": 1, "dp": 8, "global_batch": 64, "micro_batch": 1}
    assert resolve("gpt3-1.3b", {**plan, "recompute": "full"}, "a100-sxm4-80gb", stack).plan.recompute == "full"
    if runs:
        assert resolve("gpt3-1.3b", {**plan, "recompute": "selective"}, "a100-sxm4-80gb", stack).plan.recompute \
            == "selective"
    else:
        with pytest.raises(InputError, match=f"stack {stack} cannot run recompute 'selective' .*none, full"):
            resolve("gpt3-1.3b", {**plan, "recompute": "selective"}, "a100-sxm4-80gb", stack)


def test_an_unstated_recompute_on_2021_megatron_deepspeed_is_full_not_selective():
    """MT-NLG 530B (2021, 80 GB A100s, tp 8 x pp 35, recomputation unstated) does not fit without recomputation; the
    least recomputation that fits is picked among what the stack of its year runs: full (selective would fit but
    the fork had no selective mode before its 2023-07 merge)."""
    from roofline.views import validate as V

    rows = [r for r in V.read(V.dataset_path("tables")) if r["case_id"].startswith("mtnlg_530b")]
    assert len(rows) == 3
    for r in rows:
        case = V.build_case(r)
        assert case.framework == "megatron-deepspeed-2022" and case.hw.hbm_capacity == 80 * 2 ** 30
        assert case.plan.recompute == "full" and "full recomputation, the least that fits" in case.note


def test_bf16_on_megatron_deepspeed_reduces_fp32_gradients():
    """DeepSpeed's BF16_Optimizer hands its fp32 accumulation buffers to the gradient all-reduce (pipe/engine.py
    _bf16_reduce_grads): a bf16 run's DP bytes are those of fp32 gradients; fp16 keeps fp16."""
    from roofline.spec.resolve import resolve

    plan = {"tp": 2, "pp": 2, "dp": 2, "global_batch": 64}
    for stack in ("megatron-deepspeed", "megatron-deepspeed-2022"):
        assert resolve("gpt3-13b", {**plan, "dtype": "bf16"}, "a100-sxm4-80gb", stack).plan.grad_dtype == "fp32"
        assert resolve("gpt3-13b", {**plan, "dtype": "fp16"}, "a100-sxm4-80gb", stack).plan.grad_dtype == "fp16"


def test_a_stated_feature_dates_an_undated_row_to_the_version_that_has_it():
    """A row naming no stack (the era rule: Megatron-LM 2.x for fp16 GELU MHA on Ampere) that states selective
    recomputation ran Megatron-LM 2022 or later; a row naming megatron-lm-2021 by its id is refused instead."""
    from roofline.views import validate as V

    row = {"case_id": "x", "n_layers": 48, "d_model": 6144, "n_heads": 64, "vocab": 51200, "seq_len": 2048,
           "global_batch": 4, "micro_batch": 1, "tp": 8, "pp": 1, "dp": 1, "n_gpus": 8, "gpu_id": "a100-sxm4-80gb",
           "measured_iter_time_s": 1.0, "recompute": "selective", "seq_parallel": "y"}
    case = V.build_case(row)
    assert case.framework == "megatron-lm-2022" and case.plan.recompute == "selective"
    assert case.stack_reason.startswith("era rule") and "megatron-lm-2021 cannot run the row" in case.stack_reason
    assert V.build_case({**row, "recompute": "full", "seq_parallel": "n"}).framework == "megatron-lm-2021"
    assert V.build_case({**row, "recompute": "full"}).framework == "megatron-lm-2022"     # SP: 2022-04 or later
    with pytest.raises(V.Skip, match="megatron-lm-2021 cannot run recompute 'selective'"):
        V.build_case({**row, "seq_parallel": "n", "framework": "megatron-lm-2021"})


@pytest.mark.parametrize("stack,sp,cp", [
    ("megatron-lm-2021", False, False), ("megatron-lm-2022", True, False), ("megatron-core", True, True),
    ("megatron-deepspeed-2022", False, False), ("megatron-deepspeed", True, True), ("gpt-neox-2022", False, True),
    ("gpt-neox", True, True)])
def test_sequence_and_context_parallelism_only_where_the_stack_has_them(stack, sp, cp):
    """Megatron's sequence parallelism came with Megatron-LM cfd2e21607 (2022-04), to Megatron-DeepSpeed with its
    2023-07 merge and to GPT-NeoX in 2024-08; the DeepSpeed fork never had ring context parallelism, its context
    parallelism is DeepSpeed-Ulysses from 2023-08 (its default cp_kind). resolve refuses what a stack lacks in one
    line, and the search never returns it."""
    from roofline.base.errors import InputError
    from roofline.spec.resolve import resolve
    from roofline.spec import hardware, models
    from roofline.views.search import search

    plan = {"tp": 2, "pp": 1, "dp": 4, "global_batch": 64, "micro_batch": 1}
    for knob, has, extra in (("sequence parallelism", sp, {"sequence_parallel": True}),
                             ("context parallelism", cp, {"cp": 2, "dp": 2})):
        if has:
            resolve("gpt3-1.3b", {**plan, **extra}, "a100-sxm4-80gb", stack)
        else:
            with pytest.raises(InputError, match=f"stack {stack} has no {knob}"):
                resolve("gpt3-1.3b", {**plan, **extra}, "a100-sxm4-80gb", stack)
    plans = [c.plan for c in search(models.load("gpt3-1.3b"), hardware.load("a100-sxm4-80gb"), 16, 64,
                                    framework=stack, top=None)]
    assert plans and (sp or not any(p.sequence_parallel for p in plans)) and (cp or all(p.cp == 1 for p in plans))


@pytest.mark.parametrize("column, stack", [
    ("Megatron-LM core_r0.9.0", "megatron-core"),          # tagged 2024-10-24
    ("Megatron-LM (core_v0.12.1)", "megatron-core"),
    ("Megatron-LM r0.8.0", "megatron-core"),
    ("Megatron-LM v2.6", "megatron-lm-2021"),              # tagged 2021-08
    ("Megatron-LM v3.0", "megatron-lm-2022"),
    ("Megatron-LM core_v0.3.0", "megatron-lm-2022"),       # Megatron-Core before its 0.4 tag: 2023
    ("Megatron-LM, 2 nodes", "megatron-lm-2021"),           # a count after the name is no release: undated
    ("Megatron-LM", "megatron-lm-2021")])
def test_a_megatron_release_tag_dates_the_run(column, stack):
    assert stacks.infer(column, "", None, None, "fp16")[0].id == stack


def test_a_release_tag_newer_than_the_table_is_dated_by_its_last_entry():
    last = max((k for k in stacks.MEGATRON_RELEASES if k.startswith("0.")), key=lambda k: int(k[2:]))
    assert stacks.megatron_release("core_v0.99.0") == stacks.MEGATRON_RELEASES[last]
    assert stacks.megatron_release("megatron-lm, 3 nodes") is None


# ---- a commit or release that ran dates the stack (spec/stacks/history.py) ----

from roofline.spec.stacks import history  # noqa: E402


@pytest.mark.parametrize("column, source, stack", [
    # MegaScale (arXiv:2402.15627, 2024-02) ran its Megatron-LM baseline at 285068c8, committed 2023-01-11
    ("Megatron-LM (commit 285068c8)", "Jiang et al. 2024, arXiv:2402.15627", "megatron-lm-2022"),
    ("Megatron-LM (GitHub commit f1f03922)", "Jin et al. 2025", "megatron-core"),          # 2024-10-28
    ("Megatron-LM", "Jiang et al. 2024, arXiv:2402.15627", "megatron-core"),              # no pin: the paper's year
    # a framework column's "@hash" pins it too (FlagPerf: Megatron-DeepSpeed.git@11f2d9342, 2024-01)
    ("Megatron-DeepSpeed (deepspeed 0.11.0, Megatron-DeepSpeed.git@11f2d9342)", "FlagPerf README", "megatron-deepspeed"),
    ("DeepSpeed v0.7.3", "a 2024 benchmark", "deepspeed-zero-2021"),                     # tagged 2022-09
    ("DeepSpeed==0.12.6", "a 2022 paper's later rerun", "deepspeed-zero"),               # tagged 2023-12
    ("torchtitan v0.1.0", "a 2024 paper", "torchtitan"),                                 # tagged 2025-06
])
def test_the_commit_or_release_that_ran_dates_the_stack(column, source, stack):
    st, why = stacks.infer(column, source, None, None, "bf16", date_text=source)
    assert st.id == stack, why


def test_only_a_hash_said_to_be_a_commit_counts():
    # a source cell's "@hash" is the document's revision, not the code that ran: only "commit"/"sha" words, or an
    # "@" in a framework column, pin; a hash the history lacks, or digits alone, pin nothing
    assert history.commit_month("megatron-lm", "NVIDIA/Megatron-LM README.md @ 285068c8") is None
    assert history.commit_month("megatron-lm", "README @ 285068c8", at_sign=True)[0] == (2023, 1)
    assert history.commit_month("megatron-lm", "commit 0000000f") is None
    assert history.commit_month("megatron-lm", "commit 2023010") is None
    assert history.commit_month("deepspeed", "commit 285068c8") is None      # another family's commit
    # a number after the name with a size unit is a model, not a release; an unknown release is no date
    assert history.release_month("gpt-neox", "gpt-neox", "gpt-neox 1.0b model") is None
    assert history.release_month("gpt-neox", "gpt-neox", "gpt-neox v2.0")[0][0] == 2023
    assert history.release_month("deepspeed", "deepspeed", "deepspeed 9.9.9") is None
    # a minor release is dated by its first tag
    assert history.release_month("deepspeed", "deepspeed", "deepspeed 0.9")[1] == "v0.9.0"


def test_the_history_covers_the_registrys_dated_families():
    """Every family of the history file is one the registry holds with more than one version (a date picks between
    them), its months are real and within the repository's life, and it says which snapshot it was read from."""
    data = history._data()
    families = {}
    for s in stacks.registry().values():
        families.setdefault(s.family, []).append(s)
    assert {"megatron-lm", "deepspeed", "megatron-deepspeed", "torchtitan"} <= set(data)
    for fam, entry in data.items():
        assert len(families.get(fam, ())) > 1, fam
        assert entry["repos"] and all("@" in r for r in entry["repos"])
        months = list(entry["commits"])
        assert months == sorted(months) and "2015-01" <= months[0] and months[-1] <= "2027-01"
        assert all(len(v) % history.PREFIX == 0 for v in entry["commits"].values())


def test_a_framework_built_on_a_stack_names_its_own_framework():
    """'MegaScale (ByteDance, built on Megatron-LM)' ran MegaScale, priced on a stand-in (noted), not Megatron-LM;
    'Megatron-LM (BigCode fork)' is Megatron-LM. A percentage after a name is no YY.MM release."""
    assert not stacks.names_stack("MegaScale (ByteDance, built on Megatron-LM)")
    assert stacks.names_stack("Megatron-LM (BigCode fork)")
    st, why = stacks.infer("MegaScale-MoE (production system built on Megatron-LM)", "Jin et al. 2025", None, None, "bf16")
    assert "names no stack of the registry" in why
    assert stacks.infer("Megatron-LM 49.20 % MFU", "Narayanan et al. 2021", None, None, "fp16",
                        date_text="Narayanan et al. 2021")[0].id == "megatron-lm-2021"
    assert stacks.infer("Megatron-LM 23.04", "Narayanan et al. 2021", None, None, "fp16",
                        date_text="Narayanan et al. 2021")[0].id == "megatron-lm-2022"     # a YY.MM release


def test_modern_features_pick_the_newest_version_when_one_started_before_2023():
    """An undated Megatron-DeepSpeed row on H100s (Lucie-7B's fork): megatron-deepspeed-2022 (2021..2023-06) is not a
    2023+ version, so the features (Hopper, bf16, RoPE) pick the family's newest, megatron-deepspeed; a family whose
    every version began in 2023 or later keeps its earliest (llm-foundry)."""
    from roofline.spec import hardware
    h100 = hardware.load("h100-sxm")
    st, why = stacks.infer("Megatron-DeepSpeed (OpenLLM-France fork)", "Lucie-Training chronicles", None, h100, "bf16")
    assert st.id == "megatron-deepspeed" and "every" not in why
    st, why = stacks.infer("llm-foundry", "benchmark README", None, h100, "bf16")
    assert st.id == "llm-foundry-2023" and "2023+: the earliest" in why
    st, _ = stacks.infer("Megatron-DeepSpeed", "an undated fp16 run", None, hardware.load("v100-sxm2-32gb"), "fp16")
    assert st.id == "megatron-deepspeed-2022"
