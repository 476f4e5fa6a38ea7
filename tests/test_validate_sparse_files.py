"""Validation files as sources write them: columns left out, a FLOP basis instead of a FLOP count, settings only in
the notes. Each row is priced from what it states; a file that cannot be priced at all is one line."""
import csv
import subprocess
import sys

import pytest

from roofline.base.errors import InputError
from roofline.views import validate as V


def _write(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_a_file_with_a_preset_a_gpu_text_and_a_rate_needs_no_shape_or_layout_columns(tmp_path):
    path = _write(tmp_path / "runs.csv", [{"case_id": "r1", "model": "LLaMA-2 7B", "gpu": "A100 80GB", "n_gpus": 8,
                                           "global_batch": 64, "tokens_per_s_per_gpu": 3000}])
    rows = V.read(path)
    assert rows[0]["n_layers"] is None and rows[0]["tp"] is None      # left out: read as blank
    case = V.build_case(rows[0])
    assert case.model.n_layers == 32 and case.hw.id == "a100-sxm4-80gb"
    assert case.measured == pytest.approx(64 * 4096 / (3000 * 8))       # LLaMA-2's 4096 context, time from the rate


@pytest.mark.parametrize("drop, named", [("model", "model or n_layers"),
                                         ("gpu", "gpu_id or gpu"), ("tokens_per_s_per_gpu", "measured_iter_time_s or")])
def test_a_file_missing_a_whole_kind_of_column_is_one_line(tmp_path, drop, named):
    row = {"case_id": "r1", "model": "llama2-7b", "gpu": "A100 80GB", "global_batch": 64, "tokens_per_s_per_gpu": 3000}
    row.pop(drop)
    path = _write(tmp_path / "runs.csv", [row])
    with pytest.raises(InputError, match=named):
        V.read(path)
    out = subprocess.run([sys.executable, "-m", "roofline", "validate", str(path)], capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and named in out.stderr


def test_a_rate_with_a_named_flop_basis_gives_the_time_the_basis_counts():
    # Korthikanti et al. 2022 Table 5, 22B: their MFU72 count (1.1436e15 FLOPs per iteration, published.csv) over
    # 8 GPUs at a rate X gives the time 1.1436e15 / (8 X)
    assert V.basis_flops("MFU72", 4, 2048, 48, 6144, 51200) == pytest.approx(1.1436e15, rel=1e-4)
    # Narayanan et al. 2021 Table 1, 1.7B: 1.5467e15 x 10 (HFU96, batch 512)
    assert V.basis_flops("HFU96", 512, 2048, 24, 2304, 51200) == pytest.approx(1.5467e16, rel=1e-4)
    row = {"case_id": "k22", "n_layers": 48, "d_model": 6144, "n_heads": 64, "vocab": 51200, "seq_len": 2048,
           "global_batch": 4, "micro_batch": 1, "tp": 8, "pp": 1, "dp": 1, "n_gpus": 8, "gpu_id": "a100-sxm4-80gb",
           "measured_iter_time_s": None, "measured_tflops_per_gpu": 100.0, "flop_basis": "MFU72 (Megatron model FLOPs)",
           "recompute": "selective", "seq_parallel": "y"}
    case = V.build_case(row)
    assert case.measured == pytest.approx(1.1436e15 / (8 * 100e12), rel=1e-4)
    assert "from flop_basis MFU72" in case.note
    with pytest.raises(V.Skip, match="no rate to derive one from"):
        V.build_case({**row, "flop_basis": "6ND"})                       # a basis not read here needs flops_per_iter


@pytest.mark.parametrize("text, sharding, recompute", [
    ("bf16; ZeRO stage 1; activation checkpointing", "zero1", "full"),
    ("Megatron distributed optimizer, selective activation recomputation", "distributed", "selective"),
    ("trained without activation checkpointing, unlike ZeRO-3 runs", None, "none"),
    ("FSDP SHARD_GRAD_OP", "zero2", None),
    ("FSDP with Megatron TP", None, None),
    ("bf16", None, None)])
def test_blank_sharding_and_recompute_columns_read_the_notes(text, sharding, recompute):
    base = {"tp": 1, "pp": 1, "dp": 8, "n_gpus": 8, "global_batch": 8, "micro_batch": 1, "precision": "bf16"}
    d = V._plan_fields({**base, "notes": text})
    assert (d["sharding"], d["recompute"]) == (sharding, recompute)
    # a stated column wins over the text
    d = V._plan_fields({**base, "notes": text, "optimizer_sharding": "none", "recompute": "none"})
    assert (d["sharding"], d["recompute"]) == ("none", "none")


def test_a_text_reading_the_stack_cannot_run_gives_way_to_the_stacks_default(tmp_path):
    # torchtitan shards with FSDP2 only: a note speaking of ZeRO-1 is not this run's setting
    row = {"case_id": "t1", "model": "llama3-8b", "gpu_id": "h100-sxm", "n_gpus": 8, "tp": 1, "pp": 1, "dp": 8,
           "global_batch": 8, "micro_batch": 1, "seq_len": 8192, "measured_iter_time_s": 2.0,
           "framework": "torchtitan", "notes": "ZeRO-1 baseline elsewhere; activation checkpointing"}
    case = V.build_case(V.read(_write(tmp_path / "t.csv", [row]))[0])
    assert case.plan.sharding == "fsdp" and case.plan.recompute == "full"
    assert "the text's sharding dropped" in case.note


def test_an_mla_moe_row_naming_a_preset_takes_its_ranks_and_shared_expert_width(tmp_path):
    # a Megatron-Bridge table row: the model's name, its attention kind and expert counts, no MLA ranks nor shared
    # expert width (Kimi K2's footnote: Muon)
    row = {"case_id": "k2", "model": "Kimi_K2", "gpu_id": "gb300", "gpus_per_node": 72, "n_gpus": 256,
           "attention": "mla", "n_experts": 384, "top_k": 8, "n_shared_experts": 1, "seq_len": 4096,
           "global_batch": 4096, "micro_batch": 2, "tp": 1, "pp": 4, "dp": 64, "cp": 1, "interleave": 4, "ep": 64,
           "tokens_per_s_per_gpu": 5000, "notes": "Muon optimizer was used for pre-training Kimi-K2."}
    case = V.build_case(V.read(_write(tmp_path / "k2.csv", [row]))[0])
    m = case.model
    assert (m.kv_lora_rank, m.q_lora_rank, m.qk_rope_head_dim, m.shared_ffn_hidden) == (512, 1536, 64, 2048)
    assert case.plan.optimizer == "muon" and "optimizer muon from the text" in case.note
    assert "mla_kv_lora_rank" in case.note and "from preset kimi-k2" in case.note
    with pytest.raises(V.Skip, match="MLA row without"):            # no preset named: the ranks are needed
        V.build_case(V.read(_write(tmp_path / "x.csv", [{**row, "model": "some MLA model"}]))[0])
