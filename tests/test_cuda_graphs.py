"""CUDA graphs (Plan.cuda_graphs): a replayed graph removes the host's kernel-by-kernel issue time, nothing else."""
import dataclasses
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from roofline.spec import hardware
from roofline.spec.config import Model, Plan
from roofline.model.predict import predict
from roofline.views import validate as V

A100 = hardware.load("a100-sxm4-80gb")
TINY = Model(n_layers=4, d_model=256, n_heads=4, vocab=1000, seq_len=128)


def test_layers_graphs_remove_the_layers_host_time_and_full_removes_the_rest():
    plan = Plan(global_batch=4)
    eager, layers, full = (predict(TINY, dataclasses.replace(plan, cuda_graphs=g), A100)
                           for g in ("none", "layers", "full"))
    # the tiny model is host-bound eager: its layers wait for the host
    assert eager.raw["t_layer_host"] > 0
    assert layers.raw["t_layer_host"] == 0 and full.raw["t_layer_host"] == 0
    # per-layer graphs keep the per-micro-batch host work (the loop, the embedding and head issued eagerly)
    assert layers.raw["t_microbatch_host"] == pytest.approx(A100.host_mb)
    assert full.raw["t_microbatch_host"] == 0 and full.raw["t_edge_host"] == 0
    assert full.raw["t_host_overhead"] == 0
    # the GPU work is the same: only the host terms moved
    for k in ("t_forward", "t_backward", "t_recompute", "t_tp_comm", "t_dp_comm"):
        assert eager.raw[k] == layers.raw[k] == full.raw[k], k
    assert eager.raw["step_time"] - full.raw["step_time"] == pytest.approx(eager.raw["t_host_overhead"], rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(d=st.sampled_from([128, 512, 2048, 8192]), mb=st.sampled_from([1, 2, 8]), tp=st.sampled_from([1, 2, 4]),
       pp=st.sampled_from([1, 2]), rc=st.sampled_from(["none", "selective", "full"]))
def test_graphs_never_make_a_step_slower(d, mb, tp, pp, rc):
    m = Model(n_layers=8, d_model=d, n_heads=16, vocab=32000, seq_len=512)
    p = Plan(tp=tp, pp=pp, dp=1, micro_batch=mb, global_batch=mb * 4, recompute=rc)
    t = [predict(m, dataclasses.replace(p, cuda_graphs=g), A100).raw["step_time"] for g in ("none", "layers", "full")]
    assert t[0] >= t[1] >= t[2] > 0


def test_unknown_value_is_one_line_error():
    r = subprocess.run([sys.executable, "-m", "roofline", "transformer", "--model", "gpt3-1.3b", "--cuda-graphs", "all"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "cuda-graphs" in r.stderr and len(r.stderr.strip().splitlines()) <= 2


def test_cli_flag_reaches_the_plan():
    from roofline.face.cli import main
    import io
    import contextlib
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["transformer", "--model", "gpt3-1.3b", "--cuda-graphs", "full", "--json"])
    assert '"cuda_graphs": "full"' in out.getvalue()


ROW = {"attention": "gqa", "n_experts": 128, "first_dense_layers": 0, "attention_detail": ""}


@pytest.mark.parametrize("settings_text, row, want", [
    ("recipe x | CUDA graph impl=full_iteration | MoE flex dispatcher=hybridep", ROW, "full"),
    ("full-iteration CUDA graph; HybridEP flex", ROW, "full"),
    ("CUDA graph impl=local scope=full_iteration ", {**ROW, "n_experts": 1}, "full"),
    # impl none: no graphs, whatever scope the summary lists
    ("CUDA graph impl=none scope=full_iteration ", {**ROW, "n_experts": 1}, "none"),
    ("CUDA graphs: not set by preset (recipe default) | ETP=1", ROW, "none"),
    ("cuda_graphs=False", ROW, "none"),
    ("no graphs mentioned", ROW, "none"),
    # the router and preprocess graphs leave the experts and the dispatcher eager
    ("CUDA graph impl=transformer_engine scope=['attn', 'moe_router', 'moe_preprocess'] ", ROW, "none"),
    ("CUDA graph impl=transformer_engine scope=['attn', 'moe'] ", ROW, "layers"),
    ("CUDA graph impl=transformer_engine scope=['attn', 'mlp'] ", {**ROW, "n_experts": 1}, "layers"),
    # a hybrid model's Mamba layers must be captured too
    ("CUDA graphs [attn, moe]", {**ROW, "attention": "hybrid-mamba", "attention_detail": "pattern MEM*E"}, "none"),
    ("CUDA graphs [attn, moe, mamba]", {**ROW, "attention": "hybrid-mamba", "attention_detail": "pattern MEM*E"},
     "layers"),
    # leading dense layers have a dense MLP: 'moe' alone does not cover them
    ("CUDA graph impl=transformer_engine scope=['attn', 'moe'] ", {**ROW, "first_dense_layers": 3}, "none"),
    # stated without modules: Megatron-Core's default cuda_graph_modules, the whole layer
    ("cuda_graphs=True", ROW, "layers"),
])
def test_validate_reads_the_rows_cuda_graphs(settings_text, row, want):
    assert V.cuda_graphs({**row, "settings": settings_text}) == want


def test_nemo_rows_with_full_iteration_graphs_price_no_host_time():
    rows = [r for r in V.read(V.dataset_path("nemo")) if V.cuda_graphs(r) == "full"]
    assert rows
    for r in rows:
        try:
            case = V.build_case(r)
        except V.Skip:
            continue
        assert case.plan.cuda_graphs == "full"
        assert predict(case.spec).raw["t_host_overhead"] == 0
