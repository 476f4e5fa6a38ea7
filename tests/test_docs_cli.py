"""docs/cli.md is generated from the argparse parser and must match it."""
from roofline.face import docs_cli


def test_cli_reference_in_sync():
    assert docs_cli.DOC.exists(), "run python -m roofline.face.docs_cli"
    assert docs_cli.DOC.read_text() == docs_cli.render(), "docs/cli.md is stale: run python -m roofline.face.docs_cli"


def test_every_command_documented():
    text = docs_cli.render()
    for cmd in ("transformer", "formulas", "hardware", "models", "examples", "run-cost", "cluster-schedule"):
        assert f"## `{cmd}`" in text
    assert "`--per-stage`" in text and "`--tp-intra TP_INTRA`" in text
