"""llm-foundry's benchmark tables as they are printed (mosaicml/llm-foundry scripts/train/benchmarking/README.md): the
headers "SeqLen (T)", "Throughput (T/s)", "MFU" in percent without its sign, "Sharding Strategy", "Activation
Checkpointing", and a model named by its size alone ("70b"), which is llm-foundry's own MPT config of that size."""
import pytest

from roofline.model.predict import evaluate, inputs
from roofline.spec.resolve import resolve
from roofline.views import validate as V

# NumParams column of the H100 / A100 tables at sequence length 2048 (the learned position table grows with it)
NUM_PARAMS = {"mpt-70b": 64862437376, "mpt-13b": 12853954560, "mpt-3b": 2651837440, "mpt-1b": 1315950592,
              "mpt-760m": 760470528}


@pytest.mark.parametrize("preset, published", sorted(NUM_PARAMS.items()))
def test_mpt_presets_count_the_parameters_llm_foundry_prints(preset, published):
    spec = resolve(preset, {"tp": 1, "pp": 1, "dp": 8, "global_batch": 8}, "h100-sxm", "llm-foundry")
    assert float(evaluate(inputs(spec.model, spec.plan, spec.hardware))["params"]) == published


HEADER = ["Model", "SeqLen (T)", "# GPUs", "GPU", "MFU", "HFU", "MicroBatchSize", "GradAccum", "GlobalBatchSize",
          "Throughput (S/s)", "Throughput (T/s)", "Throughput (T/s/GPU)", "Precision", "Sharding Strategy",
          "Activation Checkpointing", "framework"]
# the 70b row of the H100 80GB BF16 table, and the 13b row without activation checkpointing
ROWS = [["70b", "2048", "64", "h100_80gb", "42.57", "56.76", "8", "4", "2048", "32", "66523", "1039", "amp_bf16",
         "FULL_SHARD", "True", "llm-foundry"],
        ["13b", "2048", "64", "h100_80gb", "39.86", "39.86", "2", "1", "128", "150", "307209", "4800", "amp_bf16",
         "FULL_SHARD", "False", "llm-foundry"]]


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "foundry.csv"
    path.write_text("\n".join(",".join(r) for r in [HEADER, *ROWS]) + "\n")
    return V.read(path)


def test_the_printed_headers_read_as_their_columns(table):
    r = table[0]
    assert (r["seq_len"], r["n_gpus"], r["micro_batch"], r["global_batch"]) == (2048, 64, 8, 2048)
    assert r["tokens_per_s"] == 66523 and r["tokens_per_s_per_gpu"] == 1039 and r["samples_per_s"] == 32
    assert r["measured_mfu"] == pytest.approx(0.4257)          # a percentage without its sign
    assert (r["optimizer_sharding"], r["recompute"]) == ("FULL_SHARD", "True")


def test_a_model_named_by_size_is_llm_foundrys_own_config(table):
    big, small = (V.build_case(r) for r in table)
    assert big.model.n_layers == 80 and big.model.d_model == 8192 and "mpt-70b" in big.note
    assert small.model.d_model == 5120 and "mpt-13b" in small.note
    assert big.plan.recompute == "full" and small.plan.recompute == "none"
    assert big.plan.sharding == "fsdp" and big.plan.dp == 64
    assert big.measured == pytest.approx(2048 * 2048 / 66523)


def test_a_bare_size_without_a_stack_that_ships_models_is_not_guessed():
    row = V.read_dicts([{"case_id": "r", "model": "70b", "framework": "Megatron-LM", "gpu": "H100", "n_gpus": 8,
                         "tp": 8, "pp": 1, "dp": 1, "global_batch": 8, "seq_len": 2048,
                         "measured_iter_time_s": 1.0}])[0]
    with pytest.raises(V.Skip, match="not stated"):
        V.build_case(row)
