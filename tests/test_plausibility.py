"""The search's plausibility line (issue 17): a plan's predicted MFU beside the best measured MFU on that GPU family,
of the same kind of model (MoE or dense) where the bundled validation data has runs of that kind."""
from types import SimpleNamespace

from roofline.spec import hardware
from roofline.views import search as SE

H100 = hardware.load("h100-sxm")


def test_measured_runs_carry_their_kind_and_come_best_first():
    runs = SE.measured_mfu("h100")
    assert runs == sorted(runs, reverse=True)
    assert any(r[3] for r in runs) and any(not r[3] for r in runs)     # nemo MoE rows and dense rows on H100


def test_an_moe_plan_is_compared_with_moe_runs_and_a_dense_plan_with_dense_runs():
    runs = SE.measured_mfu("h100")
    best_moe = max(r for r in runs if r[3] and r[2] == "megatron-core")
    best_dense = max(r for r in runs if not r[3] and r[2] == "megatron-core")
    low = SimpleNamespace(mfu=0.01)
    moe = SE.plausibility(low, H100, "megatron-core", moe=True)
    dense = SE.plausibility(low, H100, "megatron-core", moe=False)
    assert "best measured MoE run on h100" in moe and best_moe[1] in moe and "ABOVE" not in moe
    assert "best measured dense run on h100" in dense and best_dense[1] in dense
    # a plan more than 10 % above the best measured run of its kind is flagged
    high = SimpleNamespace(mfu=best_moe[0] * 1.2)
    assert "ABOVE every measured run" in SE.plausibility(high, H100, "megatron-core", moe=True)
    assert "ABOVE" not in SE.plausibility(SimpleNamespace(mfu=best_moe[0] * 1.05), H100, "megatron-core", moe=True)


def test_no_measured_run_of_the_family_gives_no_line():
    assert SE.plausibility(SimpleNamespace(mfu=0.5), hardware.load("l40s"), "megatron-core") is None


def test_the_best_measured_run_is_drawn_from_every_bundled_set():
    """The reference is the best the project knows: runs of the cited tables and papers sets count, not only
    published.csv and NVIDIA's Megatron-Bridge tables (MegaScale's 175B on 256 A100s is in the papers set)."""
    from roofline.views import validate as V
    assert SE.MEASURED_SETS == ("published", "nemo", "tables", "papers")
    ids = {name: {r["case_id"] for r in V.read(V.dataset_path(name))} for name in SE.MEASURED_SETS}
    runs = SE.measured_mfu("a100")
    assert {n for n in ids if ids[n] & {r[1] for r in runs}} >= {"published", "tables", "papers"}
    assert all(0 < r[0] < 1 for r in runs)
    best = runs[0]
    assert best[1] in ids["papers"] | ids["tables"] and best[0] > max(r[0] for r in runs if r[1] in ids["published"])


def test_a_family_with_few_runs_is_compared_with_its_generation_and_few_runs_raise_no_flag():
    """A family with fewer than uncertainty.MIN_RUNS measured runs (H200) is pooled with its architecture
    generation, as the error band is; where even the pool is that small (MI300X), the line says how few runs there
    are instead of calling a plan above them optimistic."""
    from roofline.views.uncertainty import MIN_RUNS
    assert 0 < len(SE.measured_mfu("h200")) < MIN_RUNS
    line = SE.plausibility(SimpleNamespace(mfu=0.5), hardware.load("h200"), "megatron-core")
    assert f"hopper GPUs (" in line and f"; {len(SE.measured_mfu('h200'))} on h200)" in line
    few = SE.measured_mfu("mi300x")
    assert 0 < len(few) < MIN_RUNS
    line = SE.plausibility(SimpleNamespace(mfu=0.99), hardware.load("mi300x"), "megatron-core")
    assert "ABOVE" not in line and f"only {len(few)} measured runs" in line


def test_a_plan_is_compared_with_runs_at_its_own_gemm_peak():
    """An MXFP8 plan's MFU (over the FP8 peak) is held against the best FP8 run, not a BF16 run's MFU over the BF16
    peak; a precision the data has no run of falls back to every run of the kind."""
    gb200 = hardware.load("gb200")
    runs = [r for r in SE.measured_mfu("gb200") if r[3] and r[2] == "megatron-core"]
    assert {r[4] for r in runs} >= {"bf16", "fp8"}
    best = {k: max(r for r in runs if r[4] == k) for k in ("bf16", "fp8")}
    assert best["bf16"][0] != best["fp8"][0]
    low = SimpleNamespace(mfu=0.01)
    fp8 = SE.plausibility(low, gb200, "megatron-core", moe=True, dtype="mxfp8")
    bf16 = SE.plausibility(low, gb200, "megatron-core", moe=True, dtype="bf16")
    assert "best measured FP8 MoE run" in fp8 and best["fp8"][1] in fp8
    assert "best measured BF16 MoE run" in bf16 and best["bf16"][1] in bf16
    # no FP16 run on GB200: the line falls back to every MoE run and names no peak
    fp16 = SE.plausibility(low, gb200, "megatron-core", moe=True, dtype="fp16")
    assert "best measured MoE run" in fp16 and max(runs)[1] in fp16


def test_the_stored_table_is_what_the_validation_data_gives_today(tmp_path):
    """roofline/data/measured_mfu.json (read by the plausibility line, so a search does not price the validation rows on
    every call) equals a fresh computation from the bundled validation sets, family by family: a change of the FLOP
    count, a profile's peak or the data that moves an MFU makes this fail until the table is rewritten
    (python -m roofline.views.search --write-measured-mfu)."""
    import json

    import pytest

    stored = json.loads(SE.MEASURED_MFU_FILE.read_text())
    assert sorted(stored) == SE.measured_families()
    for family, runs in stored.items():
        fresh = SE.compute_measured_mfu(family)
        assert [tuple(r[1:]) for r in runs] == [r[1:] for r in fresh], family
        assert [r[0] for r in runs] == pytest.approx([r[0] for r in fresh], rel=1e-9), family
    # the writer round-trips through the reader's format
    out = tmp_path / "mfu.json"
    table = SE.write_measured_mfu(out)
    assert json.loads(out.read_text()) == json.loads(json.dumps(table))


def test_the_plausibility_line_reads_the_stored_table_not_the_validation_rows(monkeypatch):
    """measured_mfu answers from roofline/data/measured_mfu.json for a family it holds (the search's 0.4 s saving)."""
    def refuse(family):
        raise AssertionError("priced the validation rows instead of reading the stored table")

    SE.measured_mfu.cache_clear()
    monkeypatch.setattr(SE, "compute_measured_mfu", refuse)
    try:
        runs = SE.measured_mfu("h100")
    finally:
        SE.measured_mfu.cache_clear()
    assert runs and runs == sorted(runs, reverse=True)


def test_search_prints_the_top_plans_likely_measured_step_and_mfu(cli_main):
    """Under the plausibility line: the top plan's step over 1 + the validation error quantiles of similar runs (the
    band transformer prints) and the MFU that step implies; the JSON carries the same."""
    import json

    import pytest
    args = ["search", "--model", "gpt3-175b", "--gpus", 1024, "--global-batch", 1536, "--top", 1]
    d = json.loads(cli_main(*args, "--json").stdout)
    b, top = d["top_plan_band"], d["plans"][0]
    assert b["group"]["gpu"] == "a100" and b["group"]["arch"] == "dense" and b["n"] >= 10
    t = top["step_time_s"]
    assert b["low_s"] == pytest.approx(t / (1 + b["p90"])) and b["high_s"] == pytest.approx(t / (1 + b["p10"]))
    assert b["mfu_low"] == pytest.approx(top["mfu"] * t / b["high_s"])
    assert b["mfu_low"] <= b["mfu_high"] and (b["mfu_high"] < top["mfu"]) == (b["p10"] < 0 and b["p90"] < 0)
    line = next(ln for ln in cli_main(*args).stdout.splitlines() if ln.startswith("likely measured"))
    assert f"MFU {100 * b['mfu_low']:.1f} .. {100 * b['mfu_high']:.1f} %" in line and f"n={b['n']}" in line


def test_no_likely_measured_line_without_similar_runs(cli_main):
    import json
    args = ["search", "--model", "llama3-8b", "--gpu", "mi300x", "--gpus", 8, "--global-batch", 64, "--top", 1]
    assert json.loads(cli_main(*args, "--json").stdout)["top_plan_band"] is None
    assert "likely measured" not in cli_main(*args).stdout


def test_a_part_without_measured_runs_is_held_against_its_generations():
    """GB300 has no measured run in the bundled data: its plan is compared with the best Blackwell run (B200, GB200),
    and the line says which parts those are; an H100 run never stands in for a Blackwell part."""
    blackwell = [r for f in ("b200", "gb200") for r in SE.measured_mfu(f) if r[3] and r[2] == "megatron-core"]
    best = max(blackwell)
    line = SE.plausibility(SimpleNamespace(mfu=0.01), hardware.load("gb300"), "megatron-core", moe=True)
    assert "blackwell GPUs (b200, gb200; none on gb300)" in line and best[1] in line
    assert not any(r[1] in line for r in SE.measured_mfu("h100"))


def test_a_framework_priced_on_a_stand_in_is_not_that_stack():
    """MegaScale ('built on Megatron-LM') is priced on megatron-core as a stand-in, but its measured MFU (65 % on
    A100s, with its own overlaps and model changes) is not Megatron-Core's: its runs carry their own label, and a
    stack with fewer than MIN_RUNS runs on a family is compared with every stack's runs there, naming the best's."""
    from roofline.views.uncertainty import MIN_RUNS
    runs = SE.measured_mfu("a100")
    mega = [r for r in runs if r[1].startswith("megascale175b_megascale_")]
    assert mega and all(r[2].startswith("MegaScale (stand-in") for r in mega)
    # the Megatron-LM baseline of the same paper names its commit (285068c8, 2023-01): megatron-lm-2022
    assert all(r[2] == "megatron-lm-2022" for r in runs if r[1].startswith("megascale175b_megatron_"))
    best = max(r for r in runs if not r[3] and r[4] == "bf16")
    core = [r for r in runs if not r[3] and r[4] == "bf16" and r[2] == "megatron-core"]
    line = SE.plausibility(SimpleNamespace(mfu=0.5), hardware.load("a100-sxm4-80gb"), "megatron-core", dtype="bf16")
    if len(core) < MIN_RUNS:
        assert f"({best[1]}, {best[2]})" in line and "with megatron-core" not in line
    else:
        assert "with megatron-core" in line and max(core)[1] in line
