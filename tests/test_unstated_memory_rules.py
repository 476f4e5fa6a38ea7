"""A row that leaves its recomputation (and sharding) unstated while its plan cannot fit the GPU: the run happened, so
it saved memory; and the `fsdp` column, written as a flag by NVIDIA's tables and as a shard size by others."""
import csv
import dataclasses

import pytest

from roofline.model.predict import evaluate, inputs, overshoot

from roofline.views import validate as V


def _rows(tmp_path, **over):
    cols = ["case_id", "source", "model", "gpu", "n_gpus", "gpus_per_node", "seq_len", "global_batch", "tp", "pp",
            "measured_iter_time_s", "tier", "framework", "optimizer_sharding", "recompute", "fsdp", "cp", "micro_batch", "interleave", "notes"]
    row = {"case_id": "mtnlg", "source": "Smith et al. 2022, Using DeepSpeed and Megatron to Train Megatron-Turing NLG "
           "530B (arXiv:2201.11990) sec 2.4", "model": "MT-NLG 530B", "gpu": "A100 SXM 40GB (DGX A100)",
           "n_gpus": "2240", "gpus_per_node": "8", "seq_len": "2048", "global_batch": "1920", "tp": "8", "pp": "35",
           "measured_iter_time_s": "60.1", "tier": "B", "framework": "", "optimizer_sharding": "", "recompute": "",
           "fsdp": "", "cp": "", "micro_batch": "", "interleave": "", "notes": ""}
    row.update(over)
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerow(row)
    return V.read(path)


def test_a_plan_far_over_the_gpu_recomputes_and_shards_what_the_stack_can(tmp_path):
    """MT-NLG 530B on 40 GB A100s (tp 8, pp 35): Megatron-DeepSpeed's defaults (no recomputation, no ZeRO) need about
    three times the GPU; the first saving that fits, in order of its time cost, is priced and said."""
    c = V.build_case(_rows(tmp_path)[0])
    assert c.plan.recompute == "full" and c.plan.sharding == "distributed"
    assert "more memory than the GPU's 40 GiB" in c.note and "the least that fits" in c.note
    stated = V.build_case(_rows(tmp_path, optimizer_sharding="ZeRO-1")[0])      # a stated sharding stays
    assert stated.plan.recompute == "full" and stated.plan.sharding == "distributed"
    kept = V.build_case(_rows(tmp_path, recompute="none")[0])                    # a stated recompute is never changed
    assert kept.plan.recompute == "none" and "more memory" not in kept.note


def test_within_the_memory_models_error_the_default_stands(tmp_path):
    """Llama 3.1 8B on 8 H100s (CP 2, micro-batch 1) without recomputation sits within the memory model's error of
    80 GiB: the row's plan is believed (NVIDIA ran it), not the model's memory."""
    c = V.build_case(_rows(tmp_path, model="Llama 3.1 8B", gpu="H100", n_gpus="8", seq_len="8192",
                           global_batch="128", tp="1", pp="1", cp="2", micro_batch="1", source="NVIDIA/dgxc-benchmarking llama3.1/README_8b.md",
                           framework="NeMo 24.12", measured_iter_time_s="12.78")[0])
    assert c.plan.recompute == "none" and "more memory" not in c.note


def test_a_stand_in_stack_keeps_its_default(tmp_path):
    """A framework outside the registry (veScale) is priced on a stand-in whose recomputation kinds are not its own:
    no inference, whatever the memory."""
    c = V.build_case(_rows(tmp_path, framework="veScale", source="FSDP run")[0])
    assert c.plan.recompute == "none" and "more memory" not in c.note
    assert "names no stack of the registry" in c.stack_reason


def test_the_tolerance_covers_the_memory_models_validated_error():
    res = V.validate(V.read(V.dataset_path("memory")))
    assert res["memory"]["max_abs_error"] <= V.MEMORY_ERROR_MAX


@pytest.mark.parametrize("value, sharding", [("1", "fsdp"), ("0", "distributed")])
def test_the_fsdp_column_as_nvidias_tables_write_it(tmp_path, value, sharding):
    """NeMo's performance summaries: FSDP = 1 runs Megatron-FSDP, 0 the distributed optimizer (Megatron-Core's
    default)."""
    rows = _rows(tmp_path, model="Llama 3 70B", gpu="DGX-GB200", n_gpus="64", seq_len="8192", global_batch="128",
                 tp="1", pp="1", source="NeMo Framework performance summary 25.04", framework="NeMo 25.04",
                 measured_iter_time_s="4.06", fsdp=value, recompute="none")
    assert V.build_case(rows[0]).plan.sharding == sharding


def test_headers_as_tables_print_them_read_as_the_columns(tmp_path):
    """A stranger's file with NVIDIA's table headers ("#-GPUs", "GBS", "Seq Length", "Tokens / sec / GPU") is read
    as the same file with the column names would be: same plan, same measured step."""
    rows = {"case_id": "x", "source": "NeMo performance summary 25.04", "framework": "NeMo 25.04"}
    vals = {"model": "Llama 3 8B", "gpu": "H100", "n_gpus": "8", "tp": "1", "pp": "1", "global_batch": "128",
            "micro_batch": "1", "seq_len": "8192", "tokens_per_s_per_gpu": "13000", "precision": "BF16"}
    printed = {"model": "Model", "gpu": "GPU", "n_gpus": "#-GPUs", "tp": "TP", "pp": "PP", "global_batch": "GBS",
               "micro_batch": "MBS", "seq_len": "Seq Length", "tokens_per_s_per_gpu": "Tokens / sec / GPU",
               "precision": "Precision"}
    cases = []
    for names in ({k: k for k in vals}, printed):
        path = tmp_path / f"{len(cases)}.csv"
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=[*rows, *(names[k] for k in vals)])
            w.writeheader()
            w.writerow({**rows, **{names[k]: v for k, v in vals.items()}})
        cases.append(V.build_case(V.read(path)[0]))
    a, b = cases
    assert (a.plan, a.model, a.measured) == (b.plan, b.model, b.measured)
    assert b.plan.n_gpus == 8 and b.plan.micro_batch == 1 and b.model.seq_len == 8192


def test_a_stated_plan_over_the_gpu_is_flagged_not_changed(tmp_path):
    """A row that states no recomputation for MT-NLG 530B on 40 GB A100s keeps its plan (a stated recompute is never
    changed) and is priced as read, but validate says the plan cannot have run as read: the case carries over_memory
    and the note says it, and the summary lists it. The same row with full recomputation and ZeRO-1 fits and is not
    flagged."""
    res = V.validate(_rows(tmp_path, recompute="none"))
    case = res["cases"][0]
    assert case["plan"]["recompute"] == "none"
    assert case["over_memory"] > V.MEMORY_ERROR_MAX and "as read, the plan needs" in case["note"]
    assert "whose plan, as read, needs more memory" in V.render(res, by=("tier",), table=False)
    fits = V.validate(_rows(tmp_path, recompute="full", optimizer_sharding="ZeRO-1"))["cases"][0]
    assert "over_memory" not in fits and "as read" not in fits["note"]


def test_a_clause_saying_the_source_is_silent_states_nothing(tmp_path):
    """'activation checkpointing not in the table' says the table is silent, not that checkpointing was off: the row's
    recomputation is unstated (here: the MT-NLG plan does not fit, so the memory rule picks one), where 'activation
    checkpointing not in use' negates it."""
    silent = V.build_case(_rows(tmp_path, notes="iteration time from sec 2.4; activation checkpointing not in the "
                                                "table")[0])
    assert silent.plan.recompute == "full" and "recompute not stated" in silent.note
    off = V.build_case(_rows(tmp_path, notes="iteration time from sec 2.4; activation checkpointing not in use")[0])
    assert off.plan.recompute == "none" and "recompute none from the text" in off.note


def test_a_stack_with_partial_recomputation_recomputes_only_a_share_first(tmp_path):
    """Llama 3.1 405B on 8,192 H100s (tp 8, pp 16; Llama 3 report Table 4), no stack named, interleave pinned at 2
    (a blank one would take the larger v that fits without recomputation: unstated_interleave): Megatron-Core's
    defaults need half again the GPU; before recomputing every layer, the shares its --recompute-method block can state
    (a quarter, a half, three quarters of a chunk's layers) are tried, the fewest first, and the first that fits is
    priced. Megatron-DeepSpeed before its 2023 merge recomputes every layer or none: MT-NLG stays at full."""
    rows = _rows(tmp_path, case_id="l3", source="Llama Team 2024 (arXiv:2407.21783) Table 4", model="Llama 3.1 405B",
                 gpu="H100 80GB HBM3", n_gpus="8192", seq_len="8192", global_batch="2048", tp="8", pp="16",
                 micro_batch="1", interleave="2")
    c = V.build_case(rows[0])
    assert c.framework == "megatron-core" and c.plan.recompute == "full" and 0 < c.plan.recompute_fraction < 1
    assert f"full recomputation of {100 * c.plan.recompute_fraction:.0f} % of the layers" in c.note
    fewer = [f for f in V._partial_shares(c.spec.stack, c.spec) if f < c.plan.recompute_fraction]
    assert fewer                                      # a smaller share was tried first, and did not fit
    for f in fewer:
        out = evaluate(inputs(c.model, dataclasses.replace(c.plan, recompute_fraction=f), c.hw))
        assert float(overshoot(out["memory"], out["mem_reserve"], c.hw)) > 0
    m = V.build_case(_rows(tmp_path, gpu="A100 SXM 80GB (DGX A100)")[0])
    assert m.framework == "megatron-deepspeed-2022" and m.plan.recompute_fraction == 1.0


def test_a_table_without_ids_and_with_a_percent_mfu(tmp_path):
    """A table as papers print it: no case_id column (each row named by its line), the MFU as a percentage."""
    path = tmp_path / "t.csv"
    path.write_text("Model,#GPUs,GPU,TP,PP,DP,GBS,MBS,Seq Len,measured_mfu,flop_basis\n"
                    "GPT-3 175B,64,A100 80GB,8,8,1,64,1,2048,51.4 %,MFU72\n"
                    "GPT-3 175B,64,A100 80GB,8,8,1,64,1,2048,0.514,MFU72\n")
    rows = V.read(path)
    assert [r["case_id"] for r in rows] == ["row 2", "row 3"]
    assert rows[0]["measured_mfu"] == pytest.approx(0.514) == rows[1]["measured_mfu"]
    a, b = (V.build_case(r) for r in rows)
    assert a.measured == pytest.approx(b.measured) and a.measured > 0


def test_unstated_sequence_parallelism_is_tried_first_and_beside_each_saving(tmp_path):
    """MegaScale's Megatron-LM baseline of GPT-3 530B (tp 8, pp 35 on 80 GB A100s, commit 285068c8 of 2023-01:
    megatron-lm-2022, whose --sequence-parallel is opt-in): the defaults need about twice the GPU. Sequence
    parallelism costs no time and divides the layer norms' and dropouts' activations by tp, so it is tried alone and
    beside each saving; the first that fits is priced, and no cheaper try fits. A stated SP is never changed."""
    over = dict(case_id="ms530", source="Jiang et al. 2024, MegaScale (arXiv:2402.15627) Table 3",
                model="MT-NLG 530B", framework="Megatron-LM (commit 285068c8)", gpu="A100 SXM 80GB",
                n_gpus="2240", global_batch="2240", tp="8", pp="35", interleave="3", micro_batch="1",
                measured_iter_time_s="43.1")
    c = V.build_case(_rows(tmp_path, **over)[0])
    assert c.framework == "megatron-lm-2022" and "285068c of 2023-01" in c.stack_reason
    assert c.plan.sequence_parallel and c.plan.recompute == "selective" and "sequence parallelism" in c.note
    for cheaper in ({"recompute": "none"}, {"recompute": "selective", "sequence_parallel": False}):
        out = evaluate(inputs(c.model, dataclasses.replace(c.plan, **cheaper), c.hw))
        assert float(overshoot(out["memory"], out["mem_reserve"], c.hw)) > 0
    rows = _rows(tmp_path, **over)
    rows[0]["seq_parallel"] = "n"
    stated = V.build_case(rows[0])
    assert not stated.plan.sequence_parallel and stated.plan.recompute == "full"
