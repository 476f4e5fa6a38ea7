"""Megatron-Bridge's performance launcher reduces gradients in bf16 (grad_reduce_in_fp32 False in every release's
benchmark configs), where Megatron-LM's own --bf16 forces fp32 main grads: a row run by that launcher is priced with
bf16 gradients, half the data-parallel bytes and half the gradient buffer."""
import csv

import pytest

from roofline.model.predict import predict
from roofline.views import validate as V

OWN_RUN = "our cluster's run, 2026"
RECIPE = "recipe v0.4.2(c8101293):scripts/performance/configs/llama/llama3_workload_base_configs.py::X | ETP=1"


def _case(tmp_path, settings: str, framework: str = "NeMo 26.04 (Megatron-Bridge on Megatron-Core)",
          source: str = "docs/performance-summary.md"):
    cols = ["case_id", "source", "framework", "model", "gpu_id", "n_gpus", "gpus_per_node", "seq_len", "global_batch",
            "micro_batch", "tp", "pp", "dp", "precision", "measured_iter_time_s", "tier", "settings"]
    row = {"case_id": "r", "source": source, "framework": framework, "model": "Llama3 70B",
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
])
def test_the_bridge_perf_launcher_reduces_gradients_in_bf16(tmp_path, settings, grad):
    assert _case(tmp_path, settings, source=OWN_RUN).plan.grad_dtype == grad
    # no launcher named and no performance summary: Megatron-LM's --bf16 rule (fp32 main grads)
    assert _case(tmp_path, "", source=OWN_RUN).plan.grad_dtype == "fp32"


def test_bf16_gradients_halve_the_gradient_buffer_and_the_reduce(tmp_path):
    bf16, fp32 = (_case(tmp_path, s, source=OWN_RUN) for s in (RECIPE, ""))
    a, b = predict(bf16.spec).raw, predict(fp32.spec).raw
    assert a["mem_gradients"] == pytest.approx(b["mem_gradients"] / 2, rel=1e-9)
    assert a["bytes_dp_bwd"] == pytest.approx(b["bytes_dp_bwd"] / 2, rel=1e-9)
    assert a["step_time"] <= b["step_time"]


@pytest.mark.parametrize("source,framework,grad", [
    ("NeMo Framework performance summary, container NeMo 25.04 (docs.nvidia.com/nemo-framework)", "NeMo 25.04", "bf16"),
    ("NeMo Framework performance summary, container NeMo 25.02", "NeMo", "bf16"),
    ("NVIDIA/NeMo docs/source/performance/performance_summary.md, container NeMo 24.07", "NeMo 24.07", "fp32"),
    ("our own NeMo 25.04 run of the llama3_70b recipe", "NeMo 25.04", "fp32"),      # not a performance-summary run
])
def test_nemo_performance_summaries_from_25_02_reduce_gradients_in_bf16(tmp_path, source, framework, grad):
    """NeMo 2's performance scripts build each recipe with performance_mode=True, which sets grad_reduce_in_fp32
    False; a user's own run of the recipe keeps the recipe's default (fp32)."""
    assert _case(tmp_path, "", framework=framework, source=source).plan.grad_dtype == grad
