"""A synchronous job runs at its slowest GPU's clock: the calibrated compute rate over 1 + clock_spread z_n
(formulas/compute.py clock_eff; hardware defaults.yaml clock_spread; model/predict.py slowest_z)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import integrate
from scipy.stats import norm

from roofline.base.errors import InputError
from roofline.model.predict import evaluate, inputs, slowest_z
from roofline.spec import hardware
from roofline.spec.resolve import resolve

A100 = hardware.load("a100-sxm4-80gb")


def exact_max(n: int) -> float:
    """E[max of n standard normals] = integral of x n phi(x) Phi(x)^(n-1)."""
    return integrate.quad(lambda x: x * n * norm.pdf(x) * norm.cdf(x) ** (n - 1), -12, 12, limit=200)[0]


def test_slowest_z_is_blom_and_close_to_the_exact_expected_maximum():
    assert slowest_z(1) == 0.0
    assert slowest_z(2) == pytest.approx(exact_max(2), rel=0.05)         # Blom's worst case
    for n in (8, 64, 1024, 16384):
        assert slowest_z(n) == pytest.approx(exact_max(n), rel=0.01)
    z = slowest_z(np.array([1, 2, 4, 8, 1024, 8, 1]))
    assert z[0] == z[-1] == 0 and z[3] == z[5] and np.all(np.diff(z[:5]) > 0)


def _step(hw, tp, pp, dp):
    s = resolve("gpt3-13b", {"tp": tp, "pp": pp, "dp": dp, "global_batch": 64 * dp, "micro_batch": 1}, hw,
                "megatron-core")
    return evaluate(inputs(s.model, s.plan, s.hardware)), s


def test_the_spread_is_exactly_a_slower_clock_for_the_whole_job():
    """With clock_spread s on n GPUs the model equals the same profile without spread at sustained clock
    kappa / (1 + s z_n): every compute-bound term slows alike and nothing else moves."""
    spread = 0.03
    hw = dataclasses.replace(A100, clock_spread=spread)
    got, s = _step(hw, 2, 2, 4)
    z = slowest_z(16)
    same = dataclasses.replace(A100, clock_spread=0.0, sustained_clock=A100.sustained_clock / (1 + spread * z))
    want, _ = _step(same, 2, 2, 4)
    for k in ("step_time", "t_forward", "t_backward", "t_dp_comm", "memory"):
        assert float(got[k]) == pytest.approx(float(want[k]), rel=1e-12), k
    base, _ = _step(dataclasses.replace(A100, clock_spread=0.0), 2, 2, 4)
    assert float(got["t_forward"]) > float(base["t_forward"]) * (1 + 0.5 * spread * z)   # compute-bound forward
    assert float(got["memory"]) == float(base["memory"])


@settings(max_examples=25, deadline=None)
@given(spread=st.floats(0.0, 0.2), tp=st.sampled_from([1, 2, 8]), dp=st.sampled_from([1, 2, 16, 128]))
def test_step_grows_with_the_spread_and_one_gpu_has_none(spread, tp, dp):
    hw = dataclasses.replace(A100, clock_spread=spread)
    got, _ = _step(hw, tp, 1, dp)
    base, _ = _step(dataclasses.replace(A100, clock_spread=0.0), tp, 1, dp)
    assert float(got["step_time"]) >= float(base["step_time"]) * (1 - 1e-12)
    one, _ = _step(hw, 1, 1, 1)
    one0, _ = _step(dataclasses.replace(A100, clock_spread=0.0), 1, 1, 1)
    assert float(one["step_time"]) == pytest.approx(float(one0["step_time"]), rel=1e-12)


def test_profiles_take_the_sourced_default_and_may_state_their_own(tmp_path):
    import yaml
    from roofline.spec.hardware import _defaults
    assert A100.clock_spread == _defaults()["clock_spread"] > 0
    p = tmp_path / "mine.yaml"
    p.write_text(yaml.safe_dump({"id": "mine", "base": "a100-sxm4-80gb", "clock_spread": 0.0}))
    assert hardware.load(str(p)).clock_spread == 0.0
    for i, bad in enumerate((-0.01, 0.5, "x", True)):
        q = tmp_path / f"bad{i}.yaml"          # one file each: profiles are cached by path
        q.write_text(yaml.safe_dump({"id": f"bad{i}", "base": "a100-sxm4-80gb", "clock_spread": bad}))
        with pytest.raises(InputError, match="clock_spread must be a number in"):
            hardware.load(str(q))
    with pytest.raises(InputError, match="clock_spread"):
        dataclasses.replace(A100, clock_spread=1.5)


def test_docs_figures_of_the_clock_spread_are_the_code_s():
    """docs/calibration.md "The slowest GPU of the job" quotes z_n and the slowdowns; docs/validation.md the same."""
    from pathlib import Path
    from roofline.spec.hardware import _defaults
    root = Path(__file__).resolve().parents[1]
    cal = (root / "docs" / "calibration.md").read_text()
    sec = cal[cal.index("### The slowest GPU of the job"):]
    sec = sec[:sec.index("\n## ")]
    s = _defaults()["clock_spread"]
    assert f"{s}" in sec
    for n, label in ((8, "8"), (1024, "1,024"), (16384, "16,384")):
        assert f"{slowest_z(n):.2f} for {label}" in sec
        assert f"on {label} GPUs{' then runs' if n == 8 else ''} {100 * s * slowest_z(n):.1f} %" in sec.replace(
            "A job on 8 GPUs then runs", "on 8 GPUs then runs")
    val = (root / "docs" / "validation.md").read_text()
    assert f"{100 * s * slowest_z(8):.1f} % on 8 GPUs, {100 * s * slowest_z(1024):.1f} % on 1,024" in val


def test_transformer_output_names_the_slowest_gpu_pace():
    from roofline.face.cli import render
    from roofline.model.predict import predict
    s = resolve("gpt3-13b", {"tp": 8, "pp": 1, "dp": 16, "global_batch": 128, "micro_batch": 1}, A100, "megatron-core")
    text = render(predict(s.model, s.plan, s.hardware), band=None)
    pace = 100 / (1 + A100.clock_spread * slowest_z(128))
    assert f"slowest GPU: the slowest of 128 sets the pace, its compute at {pace:.1f} %" in text
    one = resolve("gpt3-13b", {"tp": 1, "pp": 1, "dp": 1, "global_batch": 8, "micro_batch": 1}, A100, "megatron-core")
    assert "slowest GPU" not in render(predict(one.model, one.plan, one.hardware), band=None)
    flat = dataclasses.replace(A100, clock_spread=0.0)
    assert "slowest GPU" not in render(predict(s.model, s.plan, flat), band=None)


def test_the_command_line_sets_the_spread_for_transformer_and_search():
    import json
    import subprocess
    import sys
    base = [sys.executable, "-m", "roofline", "transformer", "--model", "gpt3-13b", "--tp", "8", "--dp", "16",
            "--global-batch", "128", "--micro-batch", "1", "--gpu", "a100-sxm4-80gb", "--json"]
    run = lambda *extra: subprocess.run([*base, *extra], capture_output=True, text=True)  # noqa: E731
    default, off = json.loads(run().stdout), json.loads(run("--clock-spread", "0").stdout)
    s = resolve("gpt3-13b", {"tp": 8, "dp": 16, "global_batch": 128, "micro_batch": 1},
                dataclasses.replace(A100, clock_spread=0.0), "megatron-core")
    want = float(evaluate(inputs(s.model, s.plan, s.hardware))["step_time"])
    assert off["step_time_s"] == pytest.approx(want, rel=1e-9)
    assert off["step_time_s"] < default["step_time_s"]
    bad = run("--clock-spread", "0.5")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().count("\n") == 0 and "clock_spread must be a number in [0, 0.2]" in bad.stderr
    from roofline.face.cli import parser
    args = parser().parse_args(["search", "--model", "gpt3-13b", "--gpus", "64", "--global-batch", "512",
                                "--clock-spread", "0.01"])              # search takes the same hardware flags
    assert args.clock_spread == 0.01
