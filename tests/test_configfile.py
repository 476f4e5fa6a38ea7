"""Config files, bundled examples and the Python API (predict_config, one_batch_time)."""
import json
import subprocess
import sys

import pytest

from roofline.spec import configfile
from roofline import one_batch_time, predict_config
from roofline.base.errors import InputError

EXAMPLES = ["llemma_7b_4_2_2_P", "llemma_7b_4_2_2_V", "gpt3_175b_a100", "megatron_gpt_39b_a100",
            "llama2_7b_fsdp_a100", "llama3_70b_h100", "mixtral_8x7b_h100", "nemotron_4_15b_h100",
            "llama3_70b_maxtext_h100"]


def _load(name):
    return configfile.load_config(configfile.example_path(name))


def run(*args):
    return subprocess.run([sys.executable, "-m", "roofline", *args], capture_output=True, text=True)


def test_examples_are_bundled():
    assert set(EXAMPLES) <= set(configfile.list_examples())
    for name in EXAMPLES:
        assert configfile.describe(name)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_predicts(name):
    cfg = _load(name)
    pred = predict_config(cfg)
    assert pred.raw["step_time"] > 0
    assert pred.fits_in_memory, f"{name} should fit in memory"
    assert one_batch_time(cfg) == pytest.approx(pred.raw["step_time"])


def test_llemma_p_matches_upstream_setup():
    cfg = _load("llemma_7b_4_2_2_P")
    m, p, hw = cfg["model"], cfg["plan"], cfg["hardware"]
    assert (m.n_layers, m.d_model, m.n_heads, m.ffn, m.vocab, m.seq_len) == (32, 4096, 32, 16384, 50257, 4096)
    assert (m.mlp, m.norm, m.position) == ("gelu", "rmsnorm", "rope")
    assert (p.pp, p.tp, p.dp, p.micro_batch, p.batch) == (4, 2, 2, 4, 64)
    assert (p.recompute, p.dtype, p.overlap_grad_reduce, p.overlap_tp, p.overlap_pp) == ("full", "fp16", 0, 0, 0)
    assert hw.gpus_per_node == 4 and cfg["gpu"] == "a100-perlmutter"
    pred = predict_config(cfg)
    assert pred.micro_batches == 8
    # upstream (estimate-train-time) predicts 9.47 s for this example; same ballpark expected
    assert 9.47 / 2 < pred.raw["step_time"] < 9.47 * 2


def test_llemma_v_is_one_gpu_per_node():
    cfg = _load("llemma_7b_4_2_2_V")
    assert cfg["hardware"].gpus_per_node == 1 and cfg["gpu"] == "gh200-vista"


def write(tmp_path, text, name="c.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_load_config_returns_explicit_fields(tmp_path):
    p = write(tmp_path, """
model: {preset: llama2-7b, n_layers: 4}
plan: {tp: 2, micro_batch: 2, micro_batches: 4, dp: 2, sequence_parallel: false}
hardware: h100-sxm
gpus_per_node: 4
net_gbps: 100
framework: megatron-core
training: {tokens: 1e9, gpu_hour_price: 2}
""")
    cfg = configfile.load_config(p)
    assert cfg["model"].n_layers == 4 and cfg["model"].d_model == 4096      # preset + override
    assert cfg["model_set"] == {"n_layers"}
    assert cfg["plan_set"] == {"tp", "micro_batch", "dp", "sequence_parallel", "global_batch"}
    assert cfg["plan"].batch == 2 * 2 * 4
    assert cfg["hardware"].gpus_per_node == 4
    assert cfg["hardware"].inter.bandwidth == pytest.approx(100e9 / 8)
    assert cfg["framework"] == "megatron-core" and cfg["training"] == {"tokens": 1e9, "gpu_hour_price": 2.0}


def test_framework_defaults_fill_only_unset_fields(tmp_path):
    explicit = write(tmp_path, "model: gpt3-125m\nplan: {tp: 2, sequence_parallel: false, sharding: none}\n"
                               "hardware: a100-sxm4-80gb\nframework: megatron-core\n", "a.yaml")
    implicit = write(tmp_path, "model: gpt3-125m\nplan: {tp: 2}\nhardware: a100-sxm4-80gb\nframework: megatron-core\n",
                     "b.yaml")
    _, p1, _, _ = configfile.resolve(explicit)
    _, p2, _, _ = configfile.resolve(implicit)
    assert (p1.sequence_parallel, p1.sharding) == (False, "none")
    assert (p2.sequence_parallel, p2.sharding) == (True, "distributed")


@pytest.mark.parametrize("text,key", [
    ("model: gpt3-125m\nhardware: a100-sxm4-80gb\nplna: {tp: 2}\n", "plna"),
    ("hardware: a100-sxm4-80gb\n", "model"),
    ("model: gpt3-125m\n", "hardware"),
    ("model: gpt3-125m\nhardware: a100-sxm4-80gb\nplan: {tpp: 2}\n", "plan.tpp"),
    ("model: {preset: gpt3-125m, layerz: 2}\nhardware: a100-sxm4-80gb\n", "model.layerz"),
    ("model: gpt3-125m\nhardware: a100-sxm4-80gb\ntraining: {tokenz: 1}\n", "training.tokenz"),
    ("model: gpt3-125m\nhardware: a100-sxm4-80gb\nplan: {tp: two}\n", "plan.tp"),
])
def test_bad_keys_name_key_and_file(tmp_path, text, key):
    p = write(tmp_path, text)
    with pytest.raises(InputError) as exc:
        configfile.load_config(p)
    msg = str(exc.value)
    assert key in msg and str(p) in msg and "\n" not in msg


def test_unknown_example_lists_known():
    with pytest.raises(InputError, match="llemma_7b_4_2_2_P"):
        configfile.example_path("nope")


def test_predict_config_accepts_mapping_and_example_name():
    d = {"model": "gpt3-125m", "plan": {"dp": 2, "micro_batch": 4}, "hardware": "a100-sxm4-80gb"}
    assert one_batch_time(d) > 0
    assert one_batch_time("gpt3_175b_a100") == pytest.approx(
        predict_config(configfile.example_path("gpt3_175b_a100")).raw["step_time"])


def test_cli_examples_and_transformer_example(cli_main):
    r = run("examples", "list")                 # the real entry point once; the further calls in-process
    assert r.returncode == 0 and "gpt3_175b_a100" in r.stdout and "llemma_7b_4_2_2_P" in r.stdout
    r = cli_main("examples", "show", "gpt3_175b_a100")
    assert r.returncode == 0 and "model: gpt3-175b" in r.stdout
    r = cli_main("examples", "show", "nope")
    assert r.returncode == 2 and "unknown example" in r.stderr
    r = cli_main("transformer", "--example", "gpt3_175b_a100", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["step_time_s"] == pytest.approx(one_batch_time("gpt3_175b_a100"))
    assert d["n_gpus"] == 1024 and "run_days" in d and isinstance(d["warnings"], list)
