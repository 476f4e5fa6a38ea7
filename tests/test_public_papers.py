"""The bundled papers set (public_papers.csv): rows of papers' and reports' training-throughput statements, each cited;
every row is priced or skipped with a reason, the sets above hold none of them, and docs/validation.md's line about it
states today's figures."""
from conftest import ROOT, load_benchmark
from roofline.views import validate as V


def test_every_row_is_priced_or_skipped_with_its_reason():
    rows = V.read(V.dataset_path("papers"))
    res = V.validate(rows).to_dict()
    assert len(res["cases"]) + len(res["skipped"]) == len(rows) >= 250
    assert all(s["reason"] for s in res["skipped"])
    assert len(res["cases"]) > 2 * len(res["skipped"])
    others = {r["case_id"] for name in ("published", "tables", "nemo") for r in V.read(V.dataset_path(name))}
    assert not others & {r["case_id"] for r in rows}


def test_each_row_cites_its_source():
    for r in V.read(V.dataset_path("papers")):
        assert len(r["source"]) > 20 and r["tier"] in ("A", "B", "C"), r["case_id"]
    assert "public_papers.csv" in (ROOT / "roofline" / "data" / "validation" / "SOURCES.md").read_text()


def test_docs_validation_papers_line_is_current():
    report = load_benchmark("validation_report")
    csv = V.dataset_path("papers")
    line = report.papers_summary(report.cli_json(csv), V.read(csv))
    assert line in (ROOT / "docs" / "validation.md").read_text()
