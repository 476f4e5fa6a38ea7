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
