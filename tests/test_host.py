"""The host-issue benchmark and its use in the step time (small layers are host-bound)."""
from pathlib import Path

import pytest

from roofline.spec import hardware
from roofline.spec.config import Model, Plan
from roofline.model.predict import predict


def test_host_benchmark_measures_and_counts_kernels():
    pytest.importorskip("torch")
    from roofline.views.calibrate.bench_host import measure
    r = measure("cpu", repeats=5)
    assert r["layer_fwd"] > 0 and r["layer_bwd"] > 0
    assert 0 < r["kernels_fwd"] < r["kernels_bwd"] and r["kernels_recompute"] > 0
    # the Megatron code path also measures the per-micro-batch edges and the training loop's own work
    for k in ("embed_fwd", "embed_bwd", "head_fwd", "head_bwd", "microbatch"):
        assert r[k] > 0 and r[f"kernels_{k}"] > 0, k
    # fused kernels count once: LayerNorm, the causal softmax and bias-GeLU are one launch each way
    assert r["kernels_fwd"] < 40


def test_host_benchmark_styles_differ_and_reject_unknown():
    pytest.importorskip("torch")
    from roofline.views.calibrate.bench_host import measure
    plain = measure("cpu", repeats=3, style="plain")
    assert "embed_fwd" not in plain and plain["kernels_fwd"] > 0
    with pytest.raises(ValueError, match="style"):
        measure("cpu", repeats=1, style="jax")


def test_host_edge_and_loop_add_per_micro_batch():
    hw = hardware.load("a100-sxm4-80gb")
    assert hw.host_emb > 0 and hw.host_head > hw.host_emb and hw.host_mb > 0
    model = Model(n_layers=2, d_model=128, n_heads=2, vocab=512, seq_len=64)
    one, four = (predict(model, Plan(global_batch=gb), hw) for gb in (1, 4))
    # host-bound tiny model: every micro-batch pays the loop's own host work on top of the GPU time
    assert one.raw["t_host_overhead"] >= hw.host_mb
    assert four.raw["t_host_overhead"] == pytest.approx(4 * one.raw["t_host_overhead"], rel=1e-9)


def test_bad_host_block_is_one_line_error(tmp_path):
    import yaml
    from roofline.base.errors import InputError
    d = yaml.safe_load((Path(hardware.__file__).parent / "profiles" / "a100-sxm4-80gb.yaml").read_text())
    d["host"] = {"kernels_head_fwd": -3}
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(InputError, match=r"host\.kernels_head_fwd\b.*(non-negative|>= 0)"):
        hardware.load(str(p))


def test_host_floor_binds_small_layers_only():
    hw = hardware.load("a100-sxm4-80gb")
    tiny = predict(Model(n_layers=4, d_model=256, n_heads=4, vocab=1000, seq_len=128), Plan(), hw)
    big = predict(Model(n_layers=4, d_model=8192, n_heads=64, vocab=1000, seq_len=4096), Plan(micro_batch=2), hw)
    assert tiny.breakdown["host_overhead"].magnitude > 0
    # big layers and edges hide their issue time; only the loop's own per-micro-batch work remains
    assert big.breakdown["host_overhead"].magnitude == pytest.approx(big.raw["micro_batches"] * hw.host_mb, rel=1e-9)
    # a host-bound layer slot takes exactly the host issue time (fwd + bwd); embedding/LM head come on top
    layer_gpu_and_host = tiny.raw["t_host_overhead"] + tiny.raw["t_forward"] + tiny.raw["t_backward"]
    assert layer_gpu_and_host >= 4 * (hw.host_fwd + hw.host_bwd)


def _step_bench():
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "small_gpt_step.py"
    spec = importlib.util.spec_from_file_location("small_gpt_step_for_host", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plain_style_layer_is_the_step_benchmarks_block():
    """`--style plain` times the code a plain PyTorch step runs: the Block of benchmarks/small_gpt_step.py (causal
    SDPA, tanh GELU, no dropout), not a stand-in: same parameters, same output."""
    torch = pytest.importorskip("torch")
    from roofline.views.calibrate.bench_host import _plain_layer
    torch.manual_seed(0)
    mine = _plain_layer(torch, h=64, heads=2)
    theirs = _step_bench().build_gpt(torch, 1, 64, 2, 128, 16, torch.device("cpu")).blocks[0]
    theirs.load_state_dict(mine.state_dict())           # strict: the same parameter names and shapes
    x = torch.randn(2, 16, 64)
    assert torch.allclose(mine(x), theirs(x), atol=1e-6)


def test_plain_style_per_layer_kernels_and_per_call_intercept():
    """The per-layer figures are the slope over a stack of layers; what one forward / backward call pays once (the
    loss reduction, its seed gradient, the autograd engine's start, autocast's entry and exit) is per micro-batch."""
    torch = pytest.importorskip("torch")
    from roofline.views.calibrate import bench_host
    r = bench_host.measure("cpu", repeats=3, style="plain")
    assert r["amp"] is True and r["stack"] == bench_host.STACK >= 2
    # one block's kernels, counted on their own under the same autocast
    block = bench_host._plain_layer(torch, h=64)
    x = torch.randn(1, 8, 64, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        k_fwd = bench_host._count_kernels(torch, lambda: block(x))
    assert r["kernels_fwd"] == k_fwd
    assert r["kernels_call"] >= 2 and r["kernels_microbatch"] == r["kernels_call"]   # sum + its seed gradient
    assert r["microbatch"] == r["call"] >= 0 and r["layer_fwd"] >= 0 and r["layer_bwd"] >= 0
    # autocast's weight casts are kernels (a _to_copy that changes the dtype), views and allocations are not
    assert r["kernels_fwd"] > 12


def test_megatron_style_adds_the_per_call_intercept_to_the_loop():
    pytest.importorskip("torch")
    from roofline.views.calibrate.bench_host import measure
    r = measure("cpu", repeats=3)
    assert r["amp"] is False and r["microbatch"] >= r["call"] >= 0
    assert r["kernels_microbatch"] >= r["kernels_call"] + 1
