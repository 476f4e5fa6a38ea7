"""A row that states TFLOP/s per GPU and no FLOP count (BLOOM's "150 TFLOPs", read off Megatron-DeepSpeed's training
log) is priced with the count its stack's log uses (stack rule tflops_basis), where that count is known and holds
for the row's model; otherwise it is skipped with the reason, as before."""
import math

import pytest

from roofline.views import validate as V

BLOOM = {"case_id": "bloom", "source": "BigScience Workshop 2022, BLOOM (arXiv:2211.05100) sec 3.4; Megatron-DeepSpeed",
         "model": "BLOOM-176B", "gpu": "A100 80GB", "n_gpus": "384", "seq_len": "2048", "global_batch": "2048",
         "tp": "4", "pp": "12", "dp": "8", "measured_tflops_per_gpu": "150", "notes": "ZeRO stage 1; bf16"}


def _case(**over):
    return V.build_case(V.read_dicts([{**BLOOM, **over}])[0])


@pytest.mark.parametrize("recompute, factor, vocab_term", [("full", 96, 16), ("none", 72, 16)])
def test_a_megatron_deepspeed_tflops_figure_takes_the_count_its_log_prints(recompute, factor, vocab_term):
    c = _case(recompute=recompute)
    assert c.framework.startswith("megatron-deepspeed") and c.plan.recompute == recompute
    m, b = c.model, c.plan.global_batch
    flops = factor * b * m.seq_len * m.n_layers * m.d_model ** 2 * (
        1 + m.seq_len / (6 * m.d_model) + m.vocab / (vocab_term * m.n_layers * m.d_model))
    assert c.measured == pytest.approx(flops / (384 * 150e12), rel=1e-9)
    assert "tflops_basis" in c.note


def test_a_stated_flop_basis_still_wins():
    c = _case(recompute="full", flop_basis="MFU72")
    m = c.model
    flops = V.basis_flops("MFU72", c.plan.global_batch, m.seq_len, m.n_layers, m.d_model, m.vocab)
    assert c.measured == pytest.approx(flops / (384 * 150e12)) and "tflops_basis" not in c.note


def test_a_model_the_logged_formula_does_not_fit_is_skipped_with_the_reason():
    with pytest.raises(V.Skip, match="eq. 3, which assumes multi-head attention"):
        _case(model="Llama 2 70B", tp="8", pp="8", dp="6", recompute="full")


def test_a_stack_without_a_known_logged_count_is_skipped_with_the_reason():
    with pytest.raises(V.Skip, match="metaseq.s TFLOP/s figures are quoted with is not known"):
        _case(source="Zhang et al. 2022, OPT (arXiv:2205.01068); Metaseq", model="OPT-175B", tp="8", pp="1", dp="48",
              notes="FSDP with Megatron-LM tensor parallelism")


def test_a_memory_row_whose_tflops_give_no_time_stays_a_memory_row():
    c = _case(source="Zhang et al. 2022, OPT (arXiv:2205.01068); Metaseq", model="OPT-175B", tp="8", pp="1", dp="48",
              notes="FSDP", measured_peak_memory_gib="60")
    assert math.isnan(c.measured)


def test_a_layout_nothing_divides_says_so():
    with pytest.raises(V.Skip, match="no layout metaseq can run divides the row's 992 GPUs and global batch 1024"):
        _case(source="Zhang et al. 2022, OPT (arXiv:2205.01068); Metaseq", model="OPT-175B", n_gpus="992",
              global_batch="1024", tp="8", pp="", dp="", notes="FSDP with Megatron-LM tensor parallelism")


def test_the_megatron_lm_readme_table_as_printed(tmp_path):
    """Narayanan et al.'s Table 1 as the Megatron-LM README prints it ("Model size", "Attention heads", "Tensor
    model-parallel size", "Batch size" = the global batch, "Achieved teraFLOP/s per GPU"; no sequence length, no FLOP
    count): the stack's shipped GPT context (2048) and the paper's eq. 3 give the step time the figure implies."""
    path = tmp_path / "readme.csv"
    path.write_text("Model size,Attention heads,Hidden size,Number of layers,Tensor model-parallel size,"
                    "Pipeline model-parallel size,Number of GPUs,Batch size,Achieved teraFLOP/s per GPU,gpu,source,"
                    "recompute\nGPT 1.7B,24,2304,24,1,1,32,512,137,A100 80GB,NVIDIA/Megatron-LM README (Narayanan "
                    "et al. 2021),full\n")
    row = V.read(path)[0]
    assert (row["n_heads"], row["tp"], row["pp"], row["n_gpus"], row["global_batch"]) == (24, 1, 1, 32, 512)
    c = V.build_case(row)
    assert c.framework == "megatron-lm-2021" and c.model.seq_len == 2048 and "seq_len not stated: 2048" in c.note
    flops = V.basis_flops("HFU96", 512, 2048, 24, 2304, c.model.vocab)
    assert c.measured == pytest.approx(flops / (32 * 137e12))


def test_a_header_in_milliseconds_is_not_aliased_as_seconds():
    assert V.canonical_headers(["Time per iteration (ms)", "Memory (GB)"]) == {}


def _l3(**over):
    row = {"case_id": "l3", "source": "Llama Team 2024 (arXiv:2407.21783) Table 4", "model": "Llama 3.1 405B",
           "gpu": "H100 80GB", "n_gpus": "16384", "seq_len": "8192", "global_batch": "2048", "tp": "8", "pp": "16",
           "dp": "128", "micro_batch": "1", "measured_mfu": "41%"}
    return V.build_case(V.read_dicts([{**row, **over}])[0])


def test_an_mfu_alone_takes_palms_model_flops():
    """MFU with no FLOP count: PaLM's model FLOPs (6 N + 12 L H Q T per token, attention whole) on the row's model;
    the step is those FLOPs over n_gpus x MFU x the dense BF16 peak."""
    from roofline.model.predict import evaluate, inputs

    c = _l3()
    flops = float(evaluate(inputs(c.model, c.plan, c.hw))["flops_megatron"])
    assert c.measured == pytest.approx(flops / (16384 * 0.41 * c.hw.peak_flops["bf16"]))
    m = c.model                                          # PaLM's count, by hand: within the vocabulary padding
    n = 126 * (4 * 16384 ** 2 * (1 + 8 / 128) / 2 + 3 * 16384 * 53248) + 2 * 128256 * 16384
    palm = 2048 * 8192 * (6 * n + 12 * 126 * 16384 * 8192)
    assert flops == pytest.approx(palm, rel=0.01) and m.n_layers == 126
    assert "PaLM" in c.note


def test_a_stated_basis_or_rate_beats_the_mfu_convention():
    a = _l3(measured_mfu="41%", flop_basis="MFU72")
    assert "PaLM" not in a.note
    b = _l3(tokens_per_s_per_gpu="500")
    assert b.measured == pytest.approx(2048 * 8192 / (500 * 16384)) and "PaLM" not in b.note


def test_a_tflops_figure_the_stack_cannot_place_falls_back_to_the_rows_mfu():
    c = _case(source="Zhang et al. 2022, OPT (arXiv:2205.01068); Metaseq", model="OPT-175B", tp="8", pp="1", dp="48",
              notes="FSDP", measured_mfu="40%")
    assert "PaLM" in c.note and c.measured > 0
