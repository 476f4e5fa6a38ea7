"""Generate docs/frameworks.md from the stack registry: ``python -m roofline.face.docs_frameworks [--check]``.

Every default and rule of every stack with its source, the inference order for rows that name no
stack, and the accepted spellings; ``--check`` exits 1 when the page differs (tests/test_spec.py).
"""
from __future__ import annotations

import sys
from pathlib import Path
from ..base.paths import DOCS

DOC = DOCS / "frameworks.md"


def render() -> str:
    from ..spec import stacks
    from ..spec.resolve import __doc__ as spec_doc

    reg = stacks.registry()
    out = ["# Training stacks", "",
           "Generated from `roofline/spec/stacks/*.yaml` by `python -m roofline.face.docs_frameworks`; do not edit by hand.", "",
           "A run that states only its parallel sizes is priced with the defaults of the stack that runs it.",
           "Name one with `--framework NAME[@VERSION]` (CLI, `search`, `plan`), `framework:` (config and jobs",
           "files) or a `framework` column (`validate`); `python -m roofline frameworks list|show` prints the same.",
           f"Without one, the CLI, configs and API use `{stacks.DEFAULT}`; `validate` infers one per row (below).", "",
           "## Precedence (roofline/spec/resolve.py)", "", "```", "\n\n".join(p.strip() for p in spec_doc.split("\n\n")[1:3]), "```", "",
           "## Stacks", "",
           "| id | name | era | aliases |", "|---|---|---|---|"]
    for s in reg.values():
        out.append(f"| `{s.id}` | {s.name} | {s.era_text()} | {', '.join(s.aliases)} |")
    for s in reg.values():
        out += ["", f"### `{s.id}`", "", f"{s.name}; version {s.version}.", "",
                "| key | value | source |", "|---|---|---|"]
        for title, d in (("model", s.model), ("plan", s.plan), ("rule", s.rules)):
            for k, v in d.items():
                v = ", ".join(map(str, v)) if isinstance(v, tuple) else v
                out.append(f"| {title}.{k} | `{v}` | {s.sources[k].replace('|', '/')} |")
    out += ["", "## Rows and files that name no stack", "",
            " ".join(stacks.infer.__doc__.split("\n\n")[1].split()), "",
            "A fully sharded row (FULL_SHARD, FSDP2) whose stack is only inferred by the era rule is priced as",
            "`fsdp`, or `torchtitan` when it also runs TP or PP. `validate` prints the stack and the reason per row",
            "(`--json`: `framework`, `stack_reason`).", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    from .docs_cli import page_main

    return page_main("roofline.face.docs_frameworks", DOC, render,
                     "Write docs/frameworks.md (every stack of the registry) from roofline/spec/stacks.", argv)


if __name__ == "__main__":
    sys.exit(main())
