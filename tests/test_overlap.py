"""Overlap is not free (issue 17): compute beside a running collective loses the SMs the collective's kernels hold."""
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.formulas import comm as CM
from roofline.formulas import symbols as S


def _exposed(t_comm, t_window, overlap, sms, nccl_sms=16):
    e = CM.exposed(sp.Float(t_comm), sp.Float(t_window), sp.Float(overlap))
    return float(e.xreplace({S.sms: sp.Integer(sms), S.nccl_sms: sp.Integer(nccl_sms)}))


def test_by_hand_on_an_a100():
    # 10 ms of reduce-scatter behind 4 ms of backward: 6 ms stay exposed, and the 4 ms hidden cost 16/108 of 4 ms
    # more compute (16 NCCL channels = 16 thread blocks holding 16 of the A100's 108 SMs)
    assert _exposed(10e-3, 4e-3, 1.0, 108) == pytest.approx(6e-3 + 4e-3 * 16 / 108, rel=1e-12)
    # fully hidden: only the slowdown is left
    assert _exposed(2e-3, 5e-3, 1.0, 132) == pytest.approx(2e-3 * 16 / 132, rel=1e-12)
    # half the traffic may overlap: half is exposed whole, the other half as above
    assert _exposed(10e-3, 4e-3, 0.5, 108) == pytest.approx(5e-3 + 0.5 * (6e-3 + 4e-3 * 16 / 108), rel=1e-12)


def test_no_sm_count_no_interference():
    assert _exposed(2e-3, 5e-3, 1.0, 1) == 0.0           # a profile without sm_count (n_SM = 1)


@settings(max_examples=200, deadline=None)
@given(t_comm=st.floats(0, 1), t_window=st.floats(0, 1), ov=st.floats(0, 1), sms=st.integers(17, 400),
       nccl=st.integers(1, 32))
def test_overlapping_is_never_slower_than_not_and_never_negative(t_comm, t_window, ov, sms, nccl):
    e = _exposed(t_comm, t_window, ov, sms, nccl)
    assert -1e-15 <= e <= _exposed(t_comm, t_window, 0.0, sms, nccl) + 1e-15
    # and more overlap never costs more
    assert _exposed(t_comm, t_window, min(1.0, ov + 0.1), sms, nccl) <= e + 1e-15


def test_the_default_is_the_sourced_channel_count():
    import yaml
    from pathlib import Path
    d = yaml.safe_load((Path(S.__file__).resolve().parents[1] / "hardware" / "defaults.yaml").read_text())
    assert S.SYMBOLS["nccl_sms"].default == d["overlap"]["nccl_sms"] == 16
