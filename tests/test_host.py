"""The host-issue benchmark and its use in the step time (small layers are host-bound)."""
from pathlib import Path

import pytest

from roofline import hardware
from roofline.config import Model, Plan
from roofline.predict import predict


def test_host_benchmark_measures_and_counts_kernels():
    pytest.importorskip("torch")
    from roofline.calibrate.bench_host import measure
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
    from roofline.calibrate.bench_host import measure
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
    from roofline.errors import InputError
    d = yaml.safe_load((Path(hardware.__file__).parent / "profiles" / "a100-sxm4-80gb.yaml").read_text())
    d["host"] = {"kernels_head_fwd": -3}
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(InputError, match="host.kernels_head_fwd must be a non-negative integer"):
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
