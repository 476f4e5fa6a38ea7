"""Extending roofline (docs/extending.md): a user GPU profile and cluster from outside the package."""
import subprocess
import sys
from pathlib import Path

import pytest

from roofline.spec import configfile, hardware
from roofline import predict_config
from roofline.spec.config import Model, Plan
from roofline.model.predict import predict

MODEL = Model(n_layers=4, d_model=4096, n_heads=32, vocab=32000, seq_len=4096)
PLAN = Plan(tp=2, dp=4, micro_batch=4, global_batch=32)
PROFILE = """
id: my-gpu
name: My accelerator (test)
kind: datasheet
peak_flops: {fp32: 40 TFLOP/s, bf16: 624 TFLOP/s, fp16: 624 TFLOP/s, fp8: null}
hbm_bandwidth: 4078 GB/s
hbm_capacity: 80 GiB
board_power: 500 W
gpus_per_node: 8
links:
  intra: {kind: nvlink, bandwidth: 300 GB/s, latency: 8 us}
  inter: {kind: infiniband, bandwidth: 25 GB/s, latency: 12 us}
provenance: {source: test}
"""


def test_user_profile_outside_the_package(tmp_path):
    path = tmp_path / "my-gpu.yaml"
    path.write_text(PROFILE)
    hw = hardware.load(str(path))
    assert hw.id == "my-gpu" and Path(hw.path).parent == tmp_path and hw.peak("bf16") == pytest.approx(624e12)
    # a faster variant inheriting everything else (base: a path outside the package)
    (tmp_path / "fast.yaml").write_text(f"base: {path}\nid: my-gpu-fast\n"
                                        "peak_flops: {fp32: 80 TFLOP/s, bf16: 1248 TFLOP/s, fp16: 1248 TFLOP/s}\n"
                                        "hbm_bandwidth: 8156 GB/s\n")
    mine, fast = predict(MODEL, PLAN, hw), predict(MODEL, PLAN, hardware.load(str(tmp_path / "fast.yaml")))
    # twice the peaks and HBM bandwidth, same links: compute about halves (fixed kernel times do
    # not scale), communication does not change
    assert 0.5 * mine.raw["t_forward"] < fast.raw["t_forward"] < 0.55 * mine.raw["t_forward"]
    assert fast.raw["t_tp_comm"] == pytest.approx(mine.raw["t_tp_comm"], rel=1e-9)
    assert fast.step_time < mine.step_time


def test_cluster_variant_with_base_and_config_relative_path(tmp_path):
    (tmp_path / "my-gpu.yaml").write_text(PROFILE)
    # a cluster = the same GPU with another node size and network, inheriting the rest
    (tmp_path / "my-cluster.yaml").write_text(
        f"base: {tmp_path / 'my-gpu.yaml'}\nid: my-cluster\ngpus_per_node: 4\n"
        "links:\n  inter: {kind: ethernet, bandwidth: 12.5 GB/s, latency: 20 us}\n")
    cfg_path = tmp_path / "run.yaml"
    cfg_path.write_text("model: gpt3-350m\nplan: {tp: 2, dp: 8, micro_batch: 2, global_batch: 64}\n"
                        "hardware: my-cluster.yaml\ntraining: {tokens: 1e9}\n")
    cfg = configfile.load_config(cfg_path)
    assert cfg["hardware"].id == "my-cluster" and cfg["hardware"].gpus_per_node == 4
    assert cfg["hardware"].peak("bf16") == pytest.approx(624e12)
    slow = predict_config(cfg)
    fast = predict_config({"model": "gpt3-350m", "plan": {"tp": 2, "dp": 8, "micro_batch": 2,
                                                                     "global_batch": 64},
                                      "hardware": str(tmp_path / "my-gpu.yaml")})
    assert slow.raw["t_dp_comm"] >= fast.raw["t_dp_comm"]
    r = subprocess.run([sys.executable, "-m", "roofline", "transformer", "--config", str(cfg_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "my-cluster" in r.stdout


def test_documented_commands_exist():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "extending.md").read_text()
    for needle in ("python -m roofline.model.formulas.codegen", "roofline/model/formulas/compute.py", "calibrate",
                   "hardware show", "base:"):
        assert needle in doc
    import roofline.model.formulas.codegen  # noqa: F401  (the regeneration entry point the doc names)


def test_a_mutated_profile_does_not_poison_later_loads():
    from roofline.spec import hardware
    h = hardware.load("a100-sxm4-80gb")
    before = hardware.load("a100-sxm4-80gb").efficiency["gemm"]["fwd"]
    h.efficiency["gemm"]["fwd"] = (0.01, 0.01, 0.0)
    h.collectives.clear()
    again = hardware.load("a100-sxm4-80gb")
    assert again.efficiency["gemm"]["fwd"] == before and again.collectives
