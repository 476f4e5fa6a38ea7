"""Generate docs/cli.md from the argparse parser: ``python -m roofline.face.docs_cli [--check]``.

The page lists every subcommand with every option (flags, choices, default, help), built from the
parser's actions rather than ``format_help()`` so that it does not depend on the terminal width or
the Python version. ``--check`` exits 1 when docs/cli.md differs (tests/test_docs_cli.py runs it).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from ..base.paths import DOCS

DOC = DOCS / "cli.md"
HEADER = """# Command-line reference

Generated from the argparse parser by `python -m roofline.face.docs_cli`; do not edit by hand
(`tests/test_docs_cli.py` fails when this page and the parser disagree).

Run any command as `python -m roofline <command> ...` (or `roofline <command> ...` once installed).
Long flags accept dashed and underscored spellings alike (`--d-model` and `--d_model`); only
the dashed one is listed.
"""


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _action_row(a: argparse.Action) -> str:
    if a.option_strings:
        name = a.option_strings[0]
        if a.nargs == 0:
            arg = ""
        else:
            arg = " " + (a.metavar or a.dest.upper()) if not a.choices else " {" + ",".join(map(str, a.choices)) + "}"
            if a.nargs in ("*", "+"):
                arg += " ..."
    else:
        name = a.metavar or a.dest
        arg = " {" + ",".join(map(str, a.choices)) + "}" if a.choices else ""
        if a.nargs == "?":
            name = f"[{name}]"
    default = "" if a.default in (None, False, argparse.SUPPRESS) or a.nargs == 0 else f"`{a.default}`"
    return f"| `{name}{arg}` | {_cell(a.help or '')} | {default} |"


def _section(name: str, p: argparse.ArgumentParser, help_text: str, level: int = 2) -> list[str]:
    out = [f"{'#' * level} `{name}`", ""]
    if help_text:
        out += [_cell(help_text)[0].upper() + _cell(help_text)[1:] + ".", ""]
    subs = []
    for group in p._action_groups:
        rows = []
        for a in group._group_actions:
            if isinstance(a, argparse._HelpAction):
                continue
            if isinstance(a, argparse._SubParsersAction):
                subs.append(a)
                continue
            rows.append(_action_row(a))
        if rows:
            title = group.title if group.title not in ("options", "optional arguments") else "options"
            out += [f"**{title}**", "", "| argument | meaning | default |", "|---|---|---|", *rows, ""]
    for sa in subs:
        helps = {c.dest: c.help for c in sa._choices_actions}
        for sub_name, sp in sa.choices.items():
            out += _section(f"{name} {sub_name}", sp, helps.get(sub_name, ""), level + 1)
    return out


def render() -> str:
    from .cli import parser

    ap = parser()
    lines = [HEADER]
    for a in ap._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in a._choices_actions}
            lines.append("Commands: " + ", ".join(f"[`{n}`](#{n})" for n in a.choices) + "\n")
            for n, sp in a.choices.items():
                lines += _section(n, sp, helps.get(n, ""))
    return "\n".join(lines).rstrip() + "\n"


def page_main(prog: str, doc, render_page, description: str, argv=None) -> int:
    """The command of a generated page: write ``doc`` from ``render_page()``, or with ``--check`` write nothing
    and exit 1 when it is out of date (the tests and CI run the check)."""
    ap = argparse.ArgumentParser(prog=f"python -m {prog}", description=description)
    ap.add_argument("--check", action="store_true", help=f"write nothing; exit 1 when {doc.name} is out of date")
    args = ap.parse_args(argv)              # --help prints this and exits 0, an unknown flag exits 2: nothing written
    text = render_page()
    if args.check:
        if not doc.exists() or doc.read_text() != text:
            print(f"{doc} is out of date: run python -m {prog}", file=sys.stderr)
            return 1
        return 0
    doc.parent.mkdir(exist_ok=True)
    doc.write_text(text)
    print(f"wrote {doc}")
    return 0


def main(argv=None) -> int:
    return page_main("roofline.face.docs_cli", DOC, render,
                     "Write docs/cli.md (every command and flag) from the argparse parser.", argv)


if __name__ == "__main__":
    raise SystemExit(main())
