"""Selective recomputation by module against Megatron-Bridge's matched studies (benchmarks/recompute_modules_mbridge.py;
skills/nemo-mbridge-perf-activation-recompute/SKILL.md at 067f987df): the memory each single module frees on
Moonlight 16B, and which module sets fit on 80 GB for Nemotron 3 Nano at 8192 tokens."""
import importlib.util
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location(
    "recompute_modules_mbridge", Path(__file__).parents[1] / "benchmarks" / "recompute_modules_mbridge.py")
B = importlib.util.module_from_spec(spec)
spec.loader.exec_module(B)


def test_single_modules_free_what_the_moonlight_study_measured():
    rows = {k: (pm, mm) for k, pm, mm, _, _ in B.moonlight()}
    for k in ("core_attn", "mla_up_proj", "moe_act"):          # one module each: within 0.3 points of the peak
        pm, mm = rows[k]
        assert pm == pytest.approx(mm, abs=0.003), k
    assert rows["core_attn"][0] == 0.0                          # fused attention: the core keeps nothing extra


def test_nemotron_nano_fits_exactly_where_the_runs_completed():
    for k, total, fits, done, _ in B.nano():
        assert fits == done, (k, total / 2 ** 30)
