"""validate on a per-rank memory file: ranks mapped to pipeline stages (Megatron-Core tp-cp-ep-dp-pp order), each
stage's largest measured peak against the stage's predicted memory."""
import csv
import json

import pytest
from hypothesis import given, strategies as st

from roofline.base.errors import InputError
from roofline.base.units import GiB
from roofline.views import memory_ranks as MR
from roofline.views import validate as V

RANKS = V.DATA / "validation" / "memory_per_rank_simumax_b200.csv"


@given(tp=st.sampled_from([1, 2, 4, 8]), cp=st.sampled_from([1, 2]), dp=st.sampled_from([1, 2, 4]),
       pp=st.integers(1, 4))
def test_stage_of_is_megatron_order(tp, cp, dp, pp):
    """tp fastest, then cp, dp, pp slowest: stage s holds the tp cp dp consecutive ranks from s tp cp dp."""
    per = tp * cp * dp
    for r in range(per * pp):
        assert MR.stage_of(r, tp, cp, dp) == r // per
    assert [MR.stage_of(r, 2, 1, 2) for r in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]


@pytest.fixture(scope="module")
def bundled():
    return V.per_rank(RANKS)


def _file_max(case, ranks):
    with open(RANKS) as f:
        return max(float(r["max_allocated_gib"]) for r in csv.DictReader(f)
                   if r["case_id"] == case and int(r["rank"]) in ranks)


def test_every_bundled_case_is_compared(bundled):
    cases = {r["case_id"] for r in csv.DictReader(open(RANKS))}
    assert not bundled["skipped"]
    assert {s["case_id"] for s in bundled["stages"]} == cases
    # pp = 2 cases give two stages, the others one
    assert len(bundled["stages"]) == len(cases) + sum("pp2" in c for c in cases)


def test_stage_measurement_is_the_max_over_its_ranks(bundled):
    first, last = [s for s in bundled["stages"] if s["case_id"] == "llama3_70b_l12_tp1_pp2_dp4_mbc4_cef"]
    assert (first["kind"], last["kind"], first["ranks"], last["ranks"]) == ("first", "last", 4, 4)
    assert first["measured_allocated_bytes"] == pytest.approx(_file_max(first["case_id"], range(4)) * GiB)
    assert last["measured_allocated_bytes"] == pytest.approx(_file_max(first["case_id"], range(4, 8)) * GiB)
    assert first["measured_allocated_bytes"] == pytest.approx(66.552 * GiB)      # the file's rank 0


def test_pp1_stage_is_the_whole_run_prediction(bundled):
    """With one stage the per-stage prediction is validate's peak-memory prediction of the same row."""
    rows = {r["case_id"]: r for r in V.read(V.dataset_path("memory"))}
    res = V.validate([rows["llama3_70b_l12_tp8_pp1_dp1_mbc4_cef"], rows["deepseekv2_tp1_ep4_pp2_dp4_l4_mbc4_cef"]])
    whole = {c["case_id"]: c["predicted_memory_bytes"] for c in res["cases"]}
    only = next(s for s in bundled["stages"] if s["case_id"] == "llama3_70b_l12_tp8_pp1_dp1_mbc4_cef")
    assert only["kind"] == "only" and only["predicted_bytes"] == pytest.approx(whole[only["case_id"]])
    # with two stages the whole-run prediction is the heavier stage's
    two = [s for s in bundled["stages"] if s["case_id"] == "deepseekv2_tp1_ep4_pp2_dp4_l4_mbc4_cef"]
    assert max(s["predicted_bytes"] for s in two) == pytest.approx(whole["deepseekv2_tp1_ep4_pp2_dp4_l4_mbc4_cef"])
    assert bundled["summary"]["all"]["n"] == len(bundled["stages"])


def _write(tmp_path, rows, header="case_id,rank,max_allocated_gib,max_reserved_gib"):
    p = tmp_path / "ranks.csv"
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    return p


@pytest.mark.parametrize("rows, words", [
    (["a,0,1.0,2.0", "a,0,1.0,2.0"], "appears twice"),
    (["a,-1,1.0,2.0"], "rank must be >= 0"),
    (["a,0,lots,2.0"], "must be an integer and the memory columns numbers"),
    (["a,0,0,2.0"], "positive number"),
    ([",0,1.0,2.0"], "case_id is empty"),
])
def test_bad_per_rank_files(tmp_path, rows, words):
    with pytest.raises(InputError, match=words):
        MR.read(_write(tmp_path, rows))


def test_unmatched_and_incomplete_cases_are_skipped_with_reason(tmp_path):
    rows = [f"llama3_70b_l12_tp8_pp1_dp1_mbc4_cef,{r},28.0,30.0" for r in range(7)] + ["nosuchcase,0,1.0,1.0"]
    r = V.per_rank(_write(tmp_path, rows))
    reasons = {s["case_id"]: s["reason"] for s in r["skipped"]}
    assert "do not cover the plan's 8 GPUs" in reasons["llama3_70b_l12_tp8_pp1_dp1_mbc4_cef"]
    assert "no row with this case_id" in reasons["nosuchcase"]
    assert not r["stages"]


def test_cli(cli, cli_main):
    r = cli("validate", RANKS, "--summary")
    assert r.returncode == 0, r.stderr
    assert "peak memory per pipeline stage" in r.stdout and "first stage" in r.stdout
    j = json.loads(cli_main("validate", RANKS, "--json").stdout)
    assert j["summary"]["all"]["n"] == len(j["stages"])
    bad = cli_main("validate", RANKS, "--ranking")
    assert bad.returncode == 2 and "per-rank memory file" in bad.stderr
    named = json.loads(cli_main("validate", "--dataset", "memory-ranks", "--json").stdout)    # the bundled file by name
    assert named["summary"] == j["summary"]


def test_docs_validation_stage_line_is_current():
    """docs/validation.md's per-stage line (benchmarks/validation_report.py) states today's figures."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("validation_report", root / "benchmarks" / "validation_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    line = report.stage_summary(report.cli_json(RANKS))
    assert line in (root / "docs" / "validation.md").read_text()
