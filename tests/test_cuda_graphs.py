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
    # per-layer graphs over part of the layer: the router and preprocess graphs leave the experts and the dispatcher
    # eager (graph_scope names what they capture)
    ("CUDA graph impl=transformer_engine scope=['attn', 'moe_router', 'moe_preprocess'] ", ROW, "layers"),
    ("CUDA graph impl=transformer_engine scope=['attn', 'moe'] ", ROW, "layers"),
    ("CUDA graph impl=transformer_engine scope=['attn', 'mlp'] ", {**ROW, "n_experts": 1}, "layers"),
    # a hybrid model's Mamba layers must be captured too
    ("CUDA graphs [attn, moe]", {**ROW, "attention": "hybrid-mamba", "attention_detail": "pattern MEM*E"}, "layers"),
    ("CUDA graphs [attn, moe, mamba]", {**ROW, "attention": "hybrid-mamba", "attention_detail": "pattern MEM*E"},
     "layers"),
    # leading dense layers have a dense MLP: 'moe' alone does not cover them
    ("CUDA graph impl=transformer_engine scope=['attn', 'moe'] ", {**ROW, "first_dense_layers": 3}, "layers"),
    # stated without modules: Megatron-Core's default cuda_graph_modules, the whole layer
    ("cuda_graphs=True", ROW, "layers"),
    # command-line spellings, and negations
    ("--cuda-graph-impl full_iteration", ROW, "full"),
    ("--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe", ROW, "layers"),
    ("--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_router moe_preprocess", ROW, "layers"),
    ("--enable-cuda-graph", ROW, "layers"),
    ("enable_cuda_graph=False", ROW, "none"),
    ("no CUDA graphs; HybridEP", ROW, "none"),
    ("CUDA graphs disabled", ROW, "none"),
    # the negations as prose writes them ("CUDA graphs: none" read as graphs on before 2026-11-29)
    ("MoE token dispatcher alltoall | CUDA graphs: none | moe_permute_fusion=false", ROW, "none"),
    ("cuda graphs: off", ROW, "none"),
    ("CUDA graph impl: none", ROW, "none"),
    ("CUDA graphs = false", ROW, "none"),
    ("CUDA graphs nonetheless on", ROW, "layers"),
])
def test_validate_reads_the_rows_cuda_graphs(settings_text, row, want):
    assert V.cuda_graphs({**row, "settings": settings_text}) == want


@pytest.mark.parametrize("settings_text, row, want", [
    ("CUDA graph impl=transformer_engine scope=['attn', 'moe_router', 'moe_preprocess'] ", ROW,
     "attn,moe_router,moe_preprocess"),
    ("CUDA graph impl=transformer_engine scope=['moe_router', 'attn'] ", ROW, "attn,moe_router"),
    # every module kind the layer has: the whole layer, no scope
    ("CUDA graph impl=transformer_engine scope=['attn', 'moe'] ", ROW, ""),
    ("CUDA graphs [attn, moe]", {**ROW, "attention": "hybrid-mamba", "attention_detail": "pattern MEM*E"}, "attn,moe"),
    ("CUDA graphs [attn, moe, mamba]", {**ROW, "attention": "hybrid-mamba", "attention_detail": "pattern MEM*E"}, ""),
    ("CUDA graph impl=transformer_engine scope=['attn', 'moe'] ", {**ROW, "first_dense_layers": 3}, "attn,moe"),
    ("--cuda-graph-impl transformer_engine --cuda-graph-modules moe_preprocess moe_router", ROW,
     "moe_router,moe_preprocess"),
    ("cuda_graphs=True", ROW, ""),
    ("no graphs mentioned", ROW, ""),
])
def test_validate_reads_the_modules_a_partial_scope_captures(settings_text, row, want):
    assert V.graph_scope({**row, "settings": settings_text}) == want


def test_a_partial_scope_row_is_priced_with_its_modules():
    row = next(r for r in V.read(V.dataset_path("nemo")) if "scope=['attn', 'moe_router', 'moe_preprocess']"
               in (r.get("settings") or "") and (r.get("n_experts") or 1) > 1 and not r.get("attention", "").startswith("hybrid"))
    case = V.build_case(row)
    assert case.plan.cuda_graphs == "layers" and case.plan.graph_modules == "attn,moe_router,moe_preprocess"


# ---- per-layer graphs over some modules (Megatron-Core cuda_graph_modules) --------------------------------------
SUBSETS = ("", "attn", "moe_router", "moe_router,moe_preprocess", "attn,moe_router,moe_preprocess", "moe", "attn,moe")


@settings(max_examples=30, deadline=None)
@given(a=st.sampled_from(SUBSETS), b=st.sampled_from(SUBSETS), mb=st.sampled_from([1, 4]),
       d=st.sampled_from([256, 1024]))
def test_capturing_more_modules_never_makes_a_step_slower(a, b, mb, d):
    """The host issue time of the captured blocks goes, nothing else: a superset of modules is never slower, and the
    GPU terms do not move."""
    from roofline.spec.config import module_set
    m = dataclasses.replace(MOE, d_model=d)
    p = Plan(micro_batch=mb, global_batch=mb * 2)
    hw = hardware.load("gb200")

    def run(mods):
        plan = dataclasses.replace(p, cuda_graphs="layers", graph_modules=mods) if mods else \
            dataclasses.replace(p, cuda_graphs="none")
        return predict(m, plan, hw).raw
    ra, rb = run(a), run(b)
    if a and b and module_set(a) <= module_set(b):
        assert rb["step_time"] <= ra["step_time"] + 1e-12
    if not a and b:
        assert rb["step_time"] <= ra["step_time"] + 1e-12
    for k in ("t_forward", "t_backward", "t_ep_comm", "t_dp_comm"):
        assert ra[k] == rb[k], k


def test_modules_covering_the_layer_equal_the_whole_layer_and_attention_alone_sits_between():
    hw = _host_only(hardware.load("h100-sxm"), 4e-3, 4e-3, 2e-3, 2e-3)
    p = Plan(global_batch=1)
    t = {g: predict(MOE, dataclasses.replace(p, cuda_graphs="layers" if g != "eager" else "none",
                                              graph_modules="" if g in ("whole", "eager") else g), hw).raw
         for g in ("eager", "whole", "attn,moe", "attn")}
    assert t["attn,moe"]["step_time"] == pytest.approx(t["whole"]["step_time"], rel=1e-12)
    assert t["whole"]["t_layer_host"] == 0
    assert t["eager"]["t_layer_host"] > t["attn"]["t_layer_host"] > 0


def test_router_and_preprocess_graphs_take_their_measured_share_of_the_moe_host_work():
    """An MoE layer host-bound on its own host work (no dense host time, no sync): the router and preprocess graphs
    leave (1 - ROUTER_HOST - PREPROC_HOST) of it."""
    from roofline.model.formulas.step import PREPROC_HOST, ROUTER_HOST
    hw = _host_only(hardware.load("h100-sxm"), 0.0, 0.0, 0.5, 0.5)     # seconds: far above any GPU time
    p = Plan(global_batch=1)
    eager = predict(MOE, p, hw).raw["t_layer_host"]
    part = predict(MOE, dataclasses.replace(p, cuda_graphs="layers", graph_modules="moe_router,moe_preprocess"),
                   hw).raw["t_layer_host"]
    gpu = predict(MOE, p, _host_only(hw, 0.0, 0.0)).raw
    layer_gpu = sum(gpu[k] for k in ("t_layer_fwd", "t_layer_bwd", "t_layer_recompute", "t_layer_tp_comm",
                                     "t_layer_cp_comm", "t_layer_ep_comm"))
    assert eager + layer_gpu == pytest.approx(1.0, rel=1e-9)
    assert part + layer_gpu == pytest.approx(1.0 - ROUTER_HOST - PREPROC_HOST, rel=1e-9)


@pytest.mark.parametrize("flags, words", [
    (["--cuda-graphs", "layers", "--cuda-graph-modules", "attn,router"], ("cuda-graph-modules", "router")),
    (["--cuda-graphs", "layers", "--cuda-graph-modules", "moe_preprocess"], ("moe_preprocess", "moe_router")),
    (["--cuda-graph-modules", "attn"], ("cuda-graph-modules", "layers")),
    (["--cuda-graphs", "full", "--cuda-graph-modules", "attn"], ("cuda-graph-modules", "full")),
])
def test_graph_modules_errors_are_one_line(flags, words):
    r = subprocess.run([sys.executable, "-m", "roofline", "transformer", "--model", "gpt3-1.3b", *flags],
                       capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert all(w in r.stderr for w in words), r.stderr


def test_graph_modules_flag_reaches_the_plan():
    from roofline.face.cli import main
    import io
    import contextlib
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["transformer", "--model", "mixtral-8x7b", "--cuda-graphs", "layers", "--cuda-graph-modules",
              "moe-router attn", "--json"])
    assert '"graph_modules": "attn,moe_router"' in out.getvalue()


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


# ---- the host of MoE layers: their extra issue time, and the forward's sync ------------------------------------
MOE = Model(n_layers=4, d_model=512, n_heads=8, vocab=1000, seq_len=256, n_experts=8, top_k=2, ffn_hidden=512)


def test_moe_layers_issue_more_host_work_than_dense():
    hw = hardware.load("h100-sxm")
    assert hw.host_moe_fwd > 0 and hw.host_moe_bwd > 0
    no_moe_host = dataclasses.replace(hw, host_moe_fwd=0.0, host_moe_bwd=0.0)
    p = Plan(ep=1, global_batch=2)
    a, b = predict(MOE, p, hw), predict(MOE, p, no_moe_host)
    assert a.raw["t_layer_host"] > b.raw["t_layer_host"]
    # a dense model has no MoE host work
    dense = dataclasses.replace(MOE, n_experts=1, top_k=1)
    assert predict(dense, p, hw).raw["t_layer_host"] == predict(dense, p, no_moe_host).raw["t_layer_host"]


def _host_only(hw, fwd, bwd, moe_f=0.0, moe_b=0.0, sync=0.0):
    return dataclasses.replace(hw, host_fwd=fwd, host_bwd=bwd, host_rc=0.0, host_moe_fwd=moe_f, host_moe_bwd=moe_b,
                               host_launch=0.0, host_sync=sync)


def test_an_eager_moe_forward_cannot_hide_its_host_time_behind_the_backward():
    """A forward whose host issue time exceeds its GPU time costs that excess even when the backward has GPU time to
    spare: the dispatcher's sync stops the host from running ahead. Dense layers and CUDA graphs keep the joint max."""
    hw = hardware.load("h100-sxm")
    p = Plan(global_batch=1)
    base = predict(MOE, p, _host_only(hw, 0.0, 0.0))
    gf, gb = base.raw["t_layer_fwd"], base.raw["t_layer_bwd"]
    assert gb > gf > 0
    # host: the forward takes 1.5x its GPU time, the backward issues in no time: the whole layer is not host-bound
    hf = 1.5 * (gf + base.raw["t_layer_ep_comm"] + base.raw["t_layer_tp_comm"])
    moe = predict(MOE, p, _host_only(hw, hf, 0.0))
    fwd_gpu = moe.raw["t_layer_fwd"] + (moe.raw["t_layer_ep_comm"] + moe.raw["t_layer_tp_comm"]
                                        + moe.raw["t_layer_cp_comm"] - moe.raw["t_layer_comm_bwd"])
    assert moe.raw["t_layer_host"] == pytest.approx(hf - fwd_gpu, rel=1e-9)
    dense = dataclasses.replace(MOE, n_experts=1, top_k=1)
    assert predict(dense, p, _host_only(hw, hf, 0.0)).raw["t_layer_host"] == 0
    graphed = predict(MOE, dataclasses.replace(p, cuda_graphs="layers"), _host_only(hw, hf, 0.0))
    assert graphed.raw["t_layer_host"] == 0


@settings(max_examples=40, deadline=None)
@given(hf=st.floats(0, 5e-3), hb=st.floats(0, 5e-3), mf=st.floats(0, 2e-3), mb=st.floats(0, 2e-3),
       sync=st.floats(0, 2e-3), mbatch=st.sampled_from([1, 4]))
def test_the_moe_sync_never_hides_more_than_the_joint_max(hf, hb, mf, mb, sync, mbatch):
    """Split maxima >= the joint max: the sync can only expose host time, never hide more; and the GPU idles at least
    host.moe_sync per forward, at most that on top of the host-bound excess."""
    hw = _host_only(hardware.load("h100-sxm"), hf, hb, mf, mb, sync)
    r = predict(MOE, Plan(micro_batch=mbatch, global_batch=mbatch), hw).raw
    gpu = r["t_layer_fwd"] + r["t_layer_bwd"] + r["t_layer_recompute"] + r["t_layer_tp_comm"] + \
        r["t_layer_cp_comm"] + r["t_layer_ep_comm"]
    assert r["t_layer_host"] >= max(sync, hf + hb + mf + mb - gpu) - 1e-12
    no_sync = predict(MOE, Plan(micro_batch=mbatch, global_batch=mbatch), dataclasses.replace(hw, host_sync=0.0)).raw
    assert no_sync["t_layer_host"] - 1e-12 <= r["t_layer_host"] <= no_sync["t_layer_host"] + sync + 1e-12


def test_search_prices_every_plan_with_the_stated_graph_modules():
    """search takes --cuda-graph-modules as a fixed switch of every plan: graphs over the attention alone are never
    faster than over the whole layer, nor slower than eager."""
    import json

    def best(*flags):
        r = subprocess.run([sys.executable, "-m", "roofline", "search", "--model", "qwen3-30b-a3b", "--gpus", "16",
                            "--global-batch", "256", "--gpu", "gb200", "--top", "1", "--json", *flags],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["plans"][0]["step_time_s"]
    eager, attn, whole = best(), best("--cuda-graphs", "layers", "--cuda-graph-modules", "attn"), \
        best("--cuda-graphs", "layers")
    assert whole < attn <= eager
