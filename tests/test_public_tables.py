"""The bundled public tables (public_tables.csv): every row is priced from what its table states, the file is read by
name, and docs/validation.md's line about it states today's figures."""
import json

from conftest import ROOT, load_benchmark
from roofline.views import validate as V


def _report():
    return load_benchmark("validation_report")


def test_every_row_of_the_public_tables_is_priced():
    rows = V.read(V.dataset_path("tables"))
    res = V.validate(rows)
    assert len(rows) == 271 and not res["skipped"]
    assert {r["tier"] for r in rows} == {"A", "B", "C"}
    cases = {c.row["case_id"]: c for c in (V.build_case(r) for r in rows[:3])}
    assert all(c.measured > 0 for c in cases.values())


def test_the_tables_name_their_sources():
    rows = V.read(V.dataset_path("tables"))
    for r in rows:
        assert any(k in r["source"] for k in ("@", "docs.nvidia.com", "benchmarks/asyncTP", "arXiv:")), r["case_id"]
        assert r["framework"], r["case_id"]
    sources = (ROOT / "roofline" / "data" / "validation" / "SOURCES.md").read_text()
    assert "public_tables.csv" in sources


def test_docs_validation_tables_line_is_current(cli_main=None):
    report = _report()
    line = report.tables_summary(report.cli_json(V.dataset_path("tables")))
    assert line in (ROOT / "docs" / "validation.md").read_text()
    assert "**MAPE" in line and "over 271 rows" in line
