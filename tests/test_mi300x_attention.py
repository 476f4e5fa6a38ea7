"""MI300X flash attention at its measured rate: ROCm/flash-attention#142 (ROCm 6.3.2, Composable Kernel FA2), BF16,
head dim 128, sequence 16384, 16 heads, not causal, batch 1/2/4/8 (mi300x.yaml)."""
import pytest

from roofline.spec import hardware
from roofline.views.calibrate.cudnn_sdpa import Shape, prior_times

MEASURED = {1: (353.22, 194.43), 2: (355.51, 202.12), 4: (339.62, 205.43), 8: (309.60, 206.66)}   # TFLOP/s fwd, bwd


@pytest.mark.parametrize("gpu", ["mi300x", "mi325x"])     # MI325X: the same CDNA 3 die (base: mi300x)
def test_flash_attention_priced_at_the_measured_rate(gpu):
    for batch, (fwd_tf, bwd_tf) in MEASURED.items():
        flops = 4 * batch * 16 * 16384 ** 2 * 128
        f, b = prior_times(Shape(gpu, "", "bfloat16", False, batch, 16384, 16, 16, 128, 128, None, 0, 0))
        # within the measured spread (309.6-355.5 forward, 194.4-206.7 backward) plus 5 %
        assert 0.95 * 309.6 <= flops / f / 1e12 <= 1.05 * 355.5, (batch, flops / f / 1e12)
        assert 0.95 * 194.4 <= 2.5 * flops / b / 1e12 <= 1.05 * 206.7, (batch, 2.5 * flops / b / 1e12)


def test_the_measurement_moves_only_attention():
    """The other kernel classes keep the generic datasheet efficiencies (no ROCm measurement), as MI250X (CDNA 2) does;
    GEMMs at the mamf-finder ceiling."""
    mi, other = hardware.load("mi300x"), hardware.load("mi250x")
    assert mi.kind == "datasheet" and "compute" not in mi.calibrated
    for cls in ("elem", "norm", "softmax"):
        assert mi.efficiency[cls] == other.efficiency[cls], cls
    assert mi.efficiency["gemm"]["fwd"][0] == pytest.approx(mi.matmul_ceiling)
    for d, eta in (("fwd", 0.338), ("bwd", 0.197)):
        assert mi.efficiency["attn"][d][0] == pytest.approx(eta)
        assert mi.efficiency["attn"][d][0] < other.efficiency["attn"][d][0]
