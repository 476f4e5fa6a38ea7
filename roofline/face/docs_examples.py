"""Regenerate the example outputs quoted in the docs: ``python -m roofline.face.docs_examples [--check] [PAGE ...]``.

A page quotes a command's output in a block that starts with a marker comment naming the command::

    <!-- example: python -m roofline transformer --example gpt3_175b_a100 | head 12 -->
    ```text
    $ python -m roofline transformer --example gpt3_175b_a100
    ...the output, written by this module...
    ```

The ```` ```text ```` block after the marker is replaced by ``$ COMMAND`` and the command's output (stdout
and stderr, in order). Two more kinds of block:

* ``<!-- example-md: COMMAND -->`` ... ``<!-- /example -->``: the output is markdown (a table), inserted
  as is between the two comments;
* ``<!-- include: PATH -->`` followed by a fenced block: the block holds the file PATH (relative to the
  repository), so that a file a command reads and the file the page shows are the same.

Commands: ``python -m roofline ARGS`` (run in-process through :func:`roofline.face.cli.main`) and
``python benchmarks/NAME.py ARGS`` (run in-process with :mod:`runpy`), from the repository root. A
command that exits non-zero stops the generator: every example must run as shown.

Filters select an excerpt; they follow the command after `` | `` and apply in order (each to the lines the
previous one kept); skipped lines are shown as one ``...`` line, and trailing blanks are stripped:

* ``head N`` / ``tail N``: the first / last N lines;
* ``lines A-B[,C-D...]``: lines A to B (1-based, inclusive) of what is left;
* ``grep REGEX``: lines matching the Python regular expression REGEX (``re.search``);
* ``section REGEX``: from the first line matching REGEX up to the next blank line (excluded).

``--check`` exits 1 when a block differs from what the command prints now, naming the page and the command
(tests/test_docs_examples.py runs it); without it the pages are rewritten in place.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import runpy
import shlex
import sys
from pathlib import Path
from ..base.paths import PACKAGE

ROOT = PACKAGE.parent
PAGES = ("README.md", "docs/getting-started.md", "docs/run-cost.md", "docs/timeline.md", "docs/search.md",
         "docs/configs.md", "docs/extending.md", "docs/models.md", "docs/calibration.md")

_BLOCK = re.compile(
    r"(?P<head><!-- example: (?P<cmd>.+?) -->\n)```text\n(?P<body>.*?)```\n"
    r"|(?P<mdhead><!-- example-md: (?P<mdcmd>.+?) -->\n)(?P<mdbody>.*?)(?P<mdtail><!-- /example -->\n)"
    r"|(?P<inchead><!-- include: (?P<path>\S+?) -->\n)(?P<fence>```\w*\n)(?P<incbody>.*?)```\n",
    re.S)


class ExampleError(Exception):
    """A marked command that cannot run, or a malformed filter."""


def run_command(command: str) -> str:
    """stdout + stderr of ``command`` (``python -m roofline ...`` or ``python benchmarks/X.py ...``), run
    in-process from the repository root; ExampleError when it exits non-zero."""
    argv = shlex.split(command)
    if argv[:3] == ["python", "-m", "roofline"]:
        from .cli import main

        def call():
            return main(argv[3:])
    elif len(argv) >= 2 and argv[0] == "python" and argv[1].startswith("benchmarks/") and argv[1].endswith(".py"):
        def call():
            old = sys.argv
            sys.argv = argv[1:]
            try:
                runpy.run_path(str(ROOT / argv[1]), run_name="__main__")
            except SystemExit as exc:
                return exc.code or 0
            finally:
                sys.argv = old
            return 0
    else:
        raise ExampleError(f"example command must be 'python -m roofline ...' or 'python benchmarks/X.py ...', "
                           f"got {command!r}")
    buf = io.StringIO()
    cwd, progress = os.getcwd(), os.environ.get("ROOFLINE_PROGRESS")
    os.chdir(ROOT)
    os.environ["ROOFLINE_PROGRESS"] = "0"     # progress lines carry elapsed times: not part of a page's example
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                rc = call()
            except SystemExit as exc:       # argparse errors
                rc = exc.code
    finally:
        os.chdir(cwd)
        if progress is None:
            os.environ.pop("ROOFLINE_PROGRESS", None)
        else:
            os.environ["ROOFLINE_PROGRESS"] = progress
    if rc not in (0, None):
        raise ExampleError(f"{command!r} exited with status {rc}: {buf.getvalue().strip()[-500:]}")
    return buf.getvalue()


def _filter(lines: list[tuple[int, str]], spec: str) -> list[tuple[int, str]]:
    name, _, arg = spec.strip().partition(" ")
    arg = arg.strip()
    try:
        if name == "head":
            return lines[:int(arg)]
        if name == "tail":
            return lines[-int(arg):] if int(arg) > 0 else []
        if name == "lines":
            keep = []
            for part in arg.split(","):
                a, _, b = part.partition("-")
                keep += lines[int(a) - 1:int(b or a)]
            return sorted(set(keep))
        if name == "grep":
            rx = re.compile(arg)
            return [ln for ln in lines if rx.search(ln[1])]
        if name == "section":
            rx = re.compile(arg)
            start = next((i for i, ln in enumerate(lines) if rx.search(ln[1])), None)
            if start is None:
                raise ExampleError(f"filter 'section {arg}': no line matches")
            end = next((i for i in range(start, len(lines)) if not lines[i][1].strip()), len(lines))
            return lines[start:end]
    except (ValueError, re.error) as exc:
        raise ExampleError(f"filter {spec.strip()!r}: {exc}") from None
    raise ExampleError(f"unknown filter {spec.strip()!r} (known: head N, tail N, lines A-B, grep REGEX, section REGEX)")


def excerpt(output: str, filters: list[str]) -> str:
    """The lines of ``output`` the filters keep, with one '...' line for every run of skipped lines."""
    lines = list(enumerate(output.rstrip("\n").split("\n")))
    total = len(lines)
    for f in filters:
        lines = _filter(lines, f)
    out, prev = [], -1
    for i, text in lines:
        if i != prev + 1:
            out.append("...")
        out.append(text.rstrip())
        prev = i
    if filters and prev != total - 1:
        out.append("...")
    return "\n".join(out) + "\n"


def split_command(marker: str) -> tuple[str, list[str]]:
    """The command and its filters from a marker's text (``CMD | head 5 | grep x``)."""
    parts = marker.split(" | ")
    return parts[0].strip(), [p for p in parts[1:] if p.strip()]


def render(text: str, run=run_command) -> str:
    """``text`` with every example block replaced by the current output of its command."""
    cache: dict[str, str] = {}

    def output(cmd: str) -> str:
        if cmd not in cache:
            cache[cmd] = run(cmd)
        return cache[cmd]

    def sub(m: re.Match) -> str:
        if m.group("cmd") is not None:
            cmd, filters = split_command(m.group("cmd"))
            return f"{m.group('head')}```text\n$ {cmd}\n{excerpt(output(cmd), filters)}```\n"
        if m.group("mdcmd") is not None:
            cmd, filters = split_command(m.group("mdcmd"))
            body = output(cmd) if not filters else excerpt(output(cmd), filters)
            return f"{m.group('mdhead')}{body.rstrip()}\n{m.group('mdtail')}"
        path = ROOT / m.group("path")
        if not path.is_file():
            raise ExampleError(f"include: no file {m.group('path')}")
        return f"{m.group('inchead')}{m.group('fence')}{path.read_text().rstrip()}\n```\n"

    return _BLOCK.sub(sub, text)


def commands(text: str) -> list[str]:
    """The commands (with filters) a page's example blocks name, in order."""
    return [m.group("cmd") or m.group("mdcmd") or f"include {m.group('path')}" for m in _BLOCK.finditer(text)]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    check = "--check" in argv
    pages = [a for a in argv if not a.startswith("-")] or list(PAGES)
    stale = []
    for page in pages:
        path = ROOT / page if not Path(page).is_absolute() else Path(page)
        old = path.read_text()
        try:
            new = render(old)
        except ExampleError as exc:
            print(f"{page}: {exc}", file=sys.stderr)
            return 2
        if new == old:
            continue
        if check:
            olds, news = _BLOCK.findall(old), _BLOCK.findall(new)
            which = [commands(old)[i] for i, (a, b) in enumerate(zip(olds, news)) if a != b]
            stale.append(f"{page}: stale example(s): " + "; ".join(which))
        else:
            path.write_text(new)
            print(f"wrote {page}")
    if stale:
        print("\n".join(stale) + "\nrun python -m roofline.face.docs_examples", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
