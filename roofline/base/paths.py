"""Where the package's shipped files lie: the data folder (validation sets, the stored formula graph, the uncertainty
table, measured samples), the example configs, and (in a checkout) the docs folder beside the package."""
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
DATA = PACKAGE / "data"
EXAMPLES = PACKAGE / "examples"
DOCS = PACKAGE.parent / "docs"
MODEL_PRESETS = PACKAGE / "spec" / "models" / "presets"


def model_preset_ids() -> list[str]:
    """The bundled model preset ids (the YAML files' stems), sorted."""
    return sorted(p.stem for p in MODEL_PRESETS.glob("*.yaml"))
