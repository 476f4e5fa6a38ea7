"""One MoE layer against Megatron-LM's own per-layer timings (benchmarks/moe_layer_mcore.py): the dispatchers'
signature. A deduplicating dispatcher (DeepEP, HybridEP) gains nothing where a token's experts sit on distinct ranks
(the Mixtral proxy: top-2 of 8 experts on 8 GPUs) and gains where several sit on one rank (the DeepSeek proxy: top-8
of 32 on 8)."""
import pytest

from conftest import load_benchmark


@pytest.fixture(scope="module")
def res():
    return load_benchmark("moe_layer_mcore").results()


def _speedup(res, model, prec, disp, key):
    by = {r["dispatcher"]: r for r in res if r["case"].startswith(model) and r["case"].endswith(prec)}
    a, d = by["alltoall"], by[disp]
    return (a[f"{key}fwd"] + a[f"{key}bwd"]) / (d[f"{key}fwd"] + d[f"{key}bwd"])


@pytest.mark.parametrize("prec", ["bf16", "fp8"])
def test_dispatcher_speedups_follow_the_measured_ones(res, prec):
    for disp in ("deepep", "hybridep"):
        assert _speedup(res, "mixtral", prec, disp, "") == pytest.approx(1.0, abs=0.02)
        assert _speedup(res, "mixtral", prec, disp, "meas_") == pytest.approx(1.0, abs=0.06)
        predicted, measured = _speedup(res, "deepseek", prec, disp, ""), _speedup(res, "deepseek", prec, disp, "meas_")
        assert predicted > 1.1 and measured > 1.1
        assert predicted == pytest.approx(measured, abs=0.15)


def test_every_case_is_priced_from_its_row(res):
    assert len(res) == 12
    assert {r["dispatcher"] for r in res} == {"alltoall", "deepep", "hybridep"}
    assert {r["dtype"] for r in res} == {"bf16", "fp8-block"}
    for r in res:                                   # the layer within a third of its measured time either way
        assert r["fwd"] == pytest.approx(r["meas_fwd"], rel=0.33) and r["bwd"] == pytest.approx(r["meas_bwd"], rel=0.33)
