"""Layouts ranked as measured (benchmarks/layouts_mbridge.py): Megatron-Bridge's Llama 3 70B FP8-CS comparison on
32 H100s (skills/nemo-mbridge-perf-memory-tuning/SKILL.md at 067f987df): 704, 668 and 508.7 model TFLOP/s per GPU
for tp 4 pp 4, tp 4 pp 8 and tp 8 pp 4."""
import importlib.util
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("layouts_mbridge", Path(__file__).parents[1] / "benchmarks" /
                                              "layouts_mbridge.py")
B = importlib.util.module_from_spec(spec)
spec.loader.exec_module(B)


def test_the_three_layouts_in_the_measured_order_and_within_ten_percent():
    pred = B.predicted()
    measured = sorted(B.RUNS, key=lambda k: -B.RUNS[k][0])
    assert sorted(pred, key=lambda k: pred[k][0]) == measured
    for k, (tf, _) in B.RUNS.items():
        assert pred[k][1] == pytest.approx(tf, rel=0.10), k
