"""Megatron-Bridge's performance launcher reduces gradients in bf16 (grad_reduce_in_fp32 False in every release's
benchmark configs), where Megatron-LM's own --bf16 forces fp32 main grads: a row run by that launcher is priced with
bf16 gradients, half the data-parallel bytes and half the gradient buffer."""
import csv

import pytest

from roofline.model.predict import predict
from roofline.views import validate as V

RECIPE = "recipe v0.4.2(c8101293):scripts/performance/configs/llama/llama3_workload_base_configs.py::X | ETP=1"


def _case(tmp_path, settings: str, framework: str = "NeMo 26.04 (Megatron-Bridge on Megatron-Core)"):
    cols = ["case_id", "source", "framework", "model", "gpu_id", "n_gpus", "gpus_per_node", "seq_len", "global_batch",
            "micro_batch", "tp", "pp", "dp", "precision", "measured_iter_time_s", "tier", "settings"]
    row = {"case_id": "r", "source": "docs/performance-summary.md", "framework": framework, "model": "Llama3 70B",
           "gpu_id": "h100-sxm", "n_gpus": "64", "gpus_per_node": "8", "seq_len": "8192", "global_batch": "128",
           "micro_batch": "1", "tp": "4", "pp": "2", "dp": "8", "precision": "BF16", "measured_iter_time_s": "10",
           "tier": "A", "settings": settings}
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerow(row)
    return V.build_case(V.read(path)[0])


@pytest.mark.parametrize("settings,grad", [
    (RECIPE, "bf16"),
    ("recipe v0.1.0rc3:scripts/performance/configs/llama3/llama3_70b_llm_pretrain.yaml perf_matrix.h100", "bf16"),
    ("recipe v0.6.0:src/megatron/bridge/perf_recipes/llama/h100/llama3.py::llama3_70b_config", "bf16"),
    ("recipe v0.6.0:src/megatron/bridge/perf_recipes/glm_moe_dsa/h100/glm5.py::glm5_config", "fp32"),   # sets True
    (RECIPE + " | grad_reduce_in_fp32=True", "fp32"),
    ("", "fp32"),                        # no launcher named: Megatron-LM's --bf16 rule (fp32 main grads)
])
def test_the_bridge_perf_launcher_reduces_gradients_in_bf16(tmp_path, settings, grad):
    assert _case(tmp_path, settings).plan.grad_dtype == grad


def test_bf16_gradients_halve_the_gradient_buffer_and_the_reduce(tmp_path):
    bf16, fp32 = (_case(tmp_path, s) for s in (RECIPE, ""))
    a, b = predict(bf16.spec).raw, predict(fp32.spec).raw
    assert a["mem_gradients"] == pytest.approx(b["mem_gradients"] / 2, rel=1e-9)
    assert a["bytes_dp_bwd"] == pytest.approx(b["bytes_dp_bwd"] / 2, rel=1e-9)
    assert a["step_time"] <= b["step_time"]
