"""docs/from-runs.md quotes benchmarks/from_runs_report.py's output as it is now (about a minute: slow)."""
from pathlib import Path

import pytest

from roofline.face import docs_examples as D

PAGE = Path(__file__).resolve().parents[1] / "docs" / "from-runs.md"


def test_the_page_quotes_the_report():
    assert "python benchmarks/from_runs_report.py" in D.commands(PAGE.read_text())


@pytest.mark.slow
def test_the_figures_of_the_page_are_current():
    old = PAGE.read_text()
    assert old == D.render(old), "docs/from-runs.md is stale: run python -m roofline.face.docs_examples docs/from-runs.md"
