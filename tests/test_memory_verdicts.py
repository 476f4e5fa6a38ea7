"""Every "fits" verdict on the bundled measured-memory runs agrees with the measurement (benchmarks/memory_verdicts.py):
a run that was measured did fit; a row that states an out-of-memory failure did not."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from roofline.views import validate as V

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("memory_verdicts", ROOT / "benchmarks" / "memory_verdicts.py")
MV = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(MV)


def _rows():
    return [r for r in V.read(V.dataset_path("memory")) if r.get("measured_peak_memory_gib")]


def test_every_bundled_verdict_agrees_with_the_measurement():
    res, skipped = MV.verdicts(_rows())
    assert len(res) >= 40                                   # the 43 SimuMax B200 runs and the priced torchtitan rows
    bad = [r["case_id"] for r in res if r["predicted_fits"] != r["measured_fits"]]
    assert bad == []


def test_an_oom_row_or_an_oversized_plan_is_a_disagreement():
    """The check can fail: the same run stated as OOM, or run with 64x the micro-batch (far above 180 GiB)."""
    row = next(r for r in _rows() if r["case_id"].startswith("llama3_70b_l12_tp1_pp2_dp4"))
    oom = {**row, "notes": "CUDA out of memory (OOM) at step 1"}
    big = {**row, "micro_batch": 64, "global_batch": 64 * row["dp"]}
    res, _ = MV.verdicts([row, oom, big])
    assert [(r["predicted_fits"], r["measured_fits"]) for r in res] == [(True, True), (True, False), (False, True)]


def test_oom_is_read_from_the_notes():
    assert not MV.measured_fits({"notes": "run failed: OOM"})
    assert not MV.measured_fits({"notes": "torch.OutOfMemoryError"})
    assert MV.measured_fits({"notes": "mem = max over ranks of max_memory_allocated; bloom filter"})
