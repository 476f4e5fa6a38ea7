"""host_slowdown: a profile whose CPU issues work more slowly than the x86 DGX host of defaults.yaml (Grace) scales the
host times it takes from the defaults, and only those."""
import pytest

from roofline.base.errors import InputError
from roofline.spec import hardware

KEYS = ("host_fwd", "host_bwd", "host_rc", "host_emb", "host_head", "host_mb", "host_moe_fwd", "host_moe_bwd",
        "host_launch", "host_sync")


@pytest.mark.parametrize("gpu, factor", [("gb200", 2.75), ("gb300", 2.75), ("gh200", 2.46), ("gh200-vista", 2.46)])
def test_grace_profiles_scale_every_default_host_time(gpu, factor):
    x86, grace = hardware.load("h100-sxm"), hardware.load(gpu)
    for k in KEYS:
        assert getattr(grace, k) == pytest.approx(factor * getattr(x86, k), rel=1e-12), k


@pytest.mark.parametrize("gpu", ["h100-sxm", "b200", "a100-sxm4-80gb", "h200", "mi300x"])
def test_x86_hosted_profiles_keep_the_defaults(gpu):
    ref = hardware.load("h100-sxm")
    hw = hardware.load(gpu)
    for k in KEYS:
        assert getattr(hw, k) == getattr(ref, k), k


def test_a_stated_host_block_stands_and_the_rest_is_scaled(tmp_path):
    """from-runs and calibrate host write measured times: a profile on a Grace base keeps them as written."""
    p = tmp_path / "mine.yaml"
    p.write_text("id: mine\nbase: gb200\nhost: {layer_fwd: 700 us, kernels_fwd: 0}\n")
    hw, base, x86 = hardware.load(str(p)), hardware.load("gb200"), hardware.load("h100-sxm")
    assert hw.host_fwd == pytest.approx(700e-6)
    assert hw.host_bwd == pytest.approx(base.host_bwd) and hw.host_sync == pytest.approx(2.75 * x86.host_sync)


@pytest.mark.parametrize("value", ["-1", "fast", "[2]"])
def test_a_bad_host_slowdown_is_one_line(tmp_path, value):
    p = tmp_path / "bad.yaml"
    p.write_text(f"id: bad\nbase: h100-sxm\nhost_slowdown: {value}\n")
    with pytest.raises(InputError) as e:
        hardware.load(str(p))
    assert "host_slowdown" in str(e.value) and "\n" not in str(e.value)


def test_the_transformer_report_says_when_the_host_times_are_scaled():
    from conftest import run_cli
    args = ("transformer", "--model", "qwen3-30b-a3b", "--dp", "8", "--ep", "8", "--global-batch", "64", "--gpu")
    grace, x86 = run_cli(*args, "gb200").stdout, run_cli(*args, "h100-sxm").stdout
    line = next(x for x in grace.splitlines() if x.startswith("profile:"))
    assert "default host times x2.75" in line and "host_slowdown" in line
    assert "host_slowdown" not in x86
