"""Extending roofline (docs/extending.md): a user GPU profile and cluster from outside the package."""
import subprocess
import sys
from pathlib import Path

import pytest

from roofline import configfile, hardware
from roofline.config import Model, Plan
from roofline.predict import predict

MODEL = Model(n_layers=4, d_model=2048, n_heads=16, vocab=32000, seq_len=2048)
PLAN = Plan(tp=2, dp=4, micro_batch=2, global_batch=16)
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
    assert hw.id == "my-gpu" and Path(hw.path).parent == tmp_path
    base = predict(MODEL, PLAN, hardware.load("a100-sxm4-80gb"))
    mine = predict(MODEL, PLAN, hw)
    # twice the A100's peaks and HBM bandwidth, same links: compute halves, communication does not
    assert mine.raw["t_forward"] == pytest.approx(base.raw["t_forward"] / 2, rel=0.05)
    assert mine.raw["t_tp_comm"] == pytest.approx(base.raw["t_tp_comm"], rel=1e-9)


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
    slow = configfile.predict_config(cfg)
    fast = configfile.predict_config({"model": "gpt3-350m", "plan": {"tp": 2, "dp": 8, "micro_batch": 2,
                                                                     "global_batch": 64},
                                      "hardware": str(tmp_path / "my-gpu.yaml")})
    assert slow.raw["t_dp_comm"] >= fast.raw["t_dp_comm"]
    r = subprocess.run([sys.executable, "-m", "roofline", "transformer", "--config", str(cfg_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "my-cluster" in r.stdout


def test_documented_commands_exist():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "extending.md").read_text()
    for needle in ("python -m roofline.formulas.codegen", "roofline/formulas/compute.py", "calibrate",
                   "hardware show", "base:"):
        assert needle in doc
    import roofline.formulas.codegen  # noqa: F401  (the regeneration entry point the doc names)
