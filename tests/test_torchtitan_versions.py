"""torchtitan's two versions: before 2025-04 an unstated pipeline micro-batch count was the pipeline degree
(torchtitan-2024, config_manager.py pipeline_parallel_microbatches), after it the micro-batch size 1 (torchtitan#1073);
validate dates a row's torchtitan by the year its source names and reads the schedule its settings name."""

import pytest

from roofline.spec import stacks
from roofline.spec.resolve import resolve

PLAN = {"tp": 8, "pp": 8, "dp": 8, "global_batch": 256}


@pytest.mark.parametrize("stack, micro_batch", [("torchtitan@2024", 4), ("torchtitan@2025", 1), ("torchtitan", 1)])
def test_the_pipeline_micro_batch_follows_the_version(stack, micro_batch):
    spec = resolve("llama3.1-405b", PLAN, "h100-sxm", stack)
    assert spec.plan.micro_batch == micro_batch


def test_a_stated_micro_batch_wins_and_pp_1_accumulates_nothing():
    assert resolve("llama3.1-405b", {**PLAN, "micro_batch": 2}, "h100-sxm", "torchtitan@2024").plan.micro_batch == 2
    spec = resolve("llama3-8b", {"tp": 1, "pp": 1, "dp": 8, "global_batch": 16}, "h100-sxm", "torchtitan@2024")
    assert spec.plan.micro_batch == 2


def test_a_row_dates_its_torchtitan_and_reads_its_schedule(row_case):
    row = {"case_id": "x", "source": "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (2024-12)",
           "framework": "torchtitan", "model": "Llama 3.1 405B", "n_gpus": 512, "gpu": "H100", "gpu_id": "h100-sxm",
           "global_batch": 256, "tp": 8, "pp": 8, "dp": 8, "seq_len": 8192, "tokens_per_s_per_gpu": 128,
           "recompute": "full", "settings": "FSDP + TP + PP Interleaved 1F1B + torch.compile", "tier": "B"}
    case = row_case(row)
    assert case.framework == "torchtitan-2024"
    assert case.plan.schedule == "interleaved" and case.plan.interleave == 2 and case.plan.micro_batch == 4
    later = row_case({**row, "source": "a torchtitan benchmark (2025-06)", "settings": "FSDP + TP + PP 1F1B"})
    assert later.framework == "torchtitan" and later.plan.micro_batch == 1 and later.plan.interleave == 1


def test_the_versions_are_one_family():
    assert stacks.get("torchtitan@2024").family == stacks.get("torchtitan").family
    assert stacks.get("torchtitan@2024").rule("microbatches_with_pp") == "pp"
    assert stacks.get("torchtitan").rule("microbatches_with_pp") is None


@pytest.mark.parametrize("text, date", [("torchtitan 9dec370 (2024-12-26); FSDP2", (2024, 12)),
                                        ("a benchmark of June 2025, rerun 2026-01", (2025, 6)),
                                        ("added 5e85bd62d, 2024-01-06; later 2024-03", (2024, 1)),
                                        ("llama3_h100_202412_torchtitan.md", (None, None)),
                                        ("Narayanan et al. SC21", (2021, None))])
def test_a_source_is_dated_by_its_earliest_year_and_that_years_earliest_month(text, date):
    assert stacks.earliest_date(text) == date


def test_month_bounds_pick_the_version_inside_a_year():
    assert stacks.by_year("llm-foundry", 2024, 1).id == "llm-foundry-2023"     # before the 2024-03 attention switch
    assert stacks.by_year("llm-foundry", 2024, 6).id == "llm-foundry"
    assert stacks.by_year("llm-foundry", 2024).id == "llm-foundry"             # no month: the version of most of 2024
    assert stacks.by_year("torchtitan", 2025, 3).id == "torchtitan-2024"
    assert stacks.get("torchtitan@25.03").id == "torchtitan-2024" and stacks.get("torchtitan@25.06").id == "torchtitan"


@pytest.mark.parametrize("text, stated", [("quantize.linear.float8 with enable_fsdp_float8_all_gather", True),
                                          ("tensorwise with float8 all-gather", True),
                                          ("rowwise with bfloat16 all-gather", False),
                                          ("enable_fsdp_float8_all_gather=false", False),
                                          ("no float8 all-gather", False)])
def test_a_stated_fsdp_float8_all_gather_is_read(text, stated):
    from roofline.views import validate as V
    assert V.fp8_all_gather_stated(text) is stated
