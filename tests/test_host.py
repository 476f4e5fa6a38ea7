"""The host-issue benchmark and its use in the step time (small layers are host-bound)."""
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


def test_host_floor_binds_small_layers_only():
    hw = hardware.load("a100-sxm4-80gb")
    tiny = predict(Model(n_layers=4, d_model=256, n_heads=4, vocab=1000, seq_len=128), Plan(), hw)
    big = predict(Model(n_layers=4, d_model=8192, n_heads=64, vocab=1000, seq_len=4096), Plan(micro_batch=2), hw)
    assert tiny.breakdown["host_overhead"].magnitude > 0
    assert big.breakdown["host_overhead"].magnitude == 0
    # a host-bound layer slot takes exactly the host issue time (fwd + bwd); embedding/LM head come on top
    layer_gpu_and_host = tiny.raw["t_host_overhead"] + tiny.raw["t_forward"] + tiny.raw["t_backward"]
    assert layer_gpu_and_host >= 4 * (hw.host_fwd + hw.host_bwd)
