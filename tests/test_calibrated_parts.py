"""What a profile says is measured (Hardware.calibrated, printed as 'calibrated: ...' and written as the JSON's
calibrated_parts) names only what a fit or a calibration wrote: a link's collectives one by one when only some of
them are fitted, and the host / overlap blocks that calibrate host / overlap / from-runs write."""
import pytest
import yaml

from roofline.spec import hardware


def _profile(tmp_path, name, extra):
    doc = {"id": name, "base": "h100-sxm", **extra}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return hardware.load(str(path))


def test_a_link_with_one_fitted_collective_names_that_collective():
    # gb200.yaml fits only the NVLink all-to-all (Hybrid-EP); its all-reduce is the link prior
    assert "intra (a2a)" in hardware.load("gb200").calibrated
    assert "intra" not in hardware.load("gb200").calibrated


def test_an_all_reduce_fit_also_prices_the_ring_halves():
    # a100-dgx-nccl fits the NVSwitch all-reduce; reduce-scatter and all-gather run at its bus bandwidth
    assert "intra (ar, ag, rs)" in hardware.load("a100-sxm4-80gb").calibrated


def test_every_collective_fitted_names_the_link_alone(tmp_path):
    coll = {c: {"alpha": "5 us", "busbw": "100 GB/s"} for c in hardware.COLLECTIVES}
    hw = _profile(tmp_path, "all-inter", {"collectives": {"inter": coll}})
    assert "inter" in hw.calibrated
    assert not any(p.startswith("inter (") for p in hw.calibrated)


@pytest.mark.parametrize("block,value", [
    ("host", {"layer_fwd": "500 us", "kernels_fwd": 20, "layer_bwd": "900 us", "kernels_bwd": 30}),
    ("overlap", {"nccl_sms": 12}),
])
def test_a_measured_block_is_listed_and_a_datasheet_profile_lists_none(tmp_path, block, value):
    assert block in _profile(tmp_path, f"with-{block}", {block: value}).calibrated
    assert block not in hardware.load("h100-sxm").calibrated
    assert "host" in hardware.load("h200-measured").calibrated


def test_an_uncalibrated_datasheet_profile_lists_nothing():
    assert hardware.load("l40s").calibrated == ()
