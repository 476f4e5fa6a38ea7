"""When a framework's commit or release was made: a row that names the commit or the release that ran dates its stack.

A paper's framework cell often pins the code that ran ("Megatron-LM (commit 285068c8)", "DeepSpeed v0.9.2") while
the paper itself is a year later. The stack of a family with several versions (megatron-lm-2022 and megatron-core,
deepspeed-zero-2021 and deepspeed-zero, ...) is then picked by the date of that commit or release, not by the
paper's year: MegaScale (arXiv:2402.15627, 2024) ran its Megatron-LM baseline at a commit of 2023-01-11.

``roofline/data/stack_history.json.gz`` holds, per stack family, the month of every commit reachable from the
main branch and the release tags of its public repository (committer dates, from the git history; the snapshot
commit of each repository is recorded in the file). It is rebuilt from local clones with
``python -m roofline.spec.stacks.history --build FAMILY=OWNER/NAME:GITDIR ...``; users never need the clones.

A hash counts when it follows the word "commit" (or "sha"), or an "@" in a framework column, and is 7 to 40 hex
digits with at least one letter and one digit; its first seven digits are looked up. A release counts when its
number follows the family's name ("DeepSpeed v0.9.2", "llm-foundry 0.8", "deepspeed==0.12.6"); a minor release
("0.9") is dated by its first tag.

>>> commit_month("megatron-lm", "Megatron-LM (commit 285068c8)")
((2023, 1), '285068c')
>>> release_month("deepspeed", "deepspeed", "DeepSpeed v0.9.2 with ZeRO-3")
((2023, 5), 'v0.9.2')
"""
from __future__ import annotations

import functools
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data" / "stack_history.json.gz"
PREFIX = 7                  # hex digits of a commit kept (git's default short hash)
_HASH_WORD = re.compile(r"\b(?:commit|sha)\b\s*[:#]?\s*([0-9a-f]{7,40})\b")
_HASH_AT = re.compile(r"@\s*([0-9a-f]{7,40})\b")
_TAG = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


@functools.lru_cache(maxsize=1)
def _data() -> dict:
    if not DATA.exists():
        return {}
    return json.loads(gzip.decompress(DATA.read_bytes()).decode("utf-8"))


@functools.lru_cache(maxsize=None)
def _commits(family: str) -> dict:
    """{7-digit prefix: (year, month)} of a family; a prefix two commits share in different months maps to None."""
    out: dict = {}
    for month, joined in ((_data().get(family) or {}).get("commits") or {}).items():
        ym = (int(month[:4]), int(month[5:7]))
        for i in range(0, len(joined), PREFIX):
            h = joined[i:i + PREFIX]
            out[h] = ym if out.get(h, ym) == ym else None
    return out


def _is_hash(h: str) -> bool:
    return bool(re.search(r"[a-f]", h) and re.search(r"\d", h))


def commit_month(family: str, text: str, at_sign: bool = False) -> tuple | None:
    """((year, month), prefix) of the first commit of ``family`` that lower-cased ``text`` names ("commit 285068c8";
    with ``at_sign`` also "@285068c8", a framework column's pin), or None when it names none the history holds."""
    t = (text or "").lower()
    found = _HASH_WORD.findall(t) + (_HASH_AT.findall(t) if at_sign else [])
    table = _commits(family) if found else {}
    for h in found:
        ym = table.get(h[:PREFIX]) if _is_hash(h) else None
        if ym:
            return ym, h[:PREFIX]
    return None


def _tag_key(tag: str) -> tuple | None:
    m = _TAG.fullmatch(tag)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def release_month(family: str, alias: str, text: str) -> tuple | None:
    """((year, month), tag) of the release of ``family`` that lower-cased ``text`` names right after ``alias``
    ("deepspeed v0.9.2", "deepspeed==0.12.6", "llm-foundry 0.8": its first 0.8.x tag), or None. A number followed by
    a size unit ("gpt-neox 1.3b") is a model, not a release."""
    tags = (_data().get(family) or {}).get("tags") or {}
    if not tags:
        return None
    m = re.search(re.escape(alias) + r"\s{0,2}(?:==|version\s*|v|\s|-|\()\s*v?(\d+\.\d+(?:\.\d+)?)(?![\d.]*\s*[bmkt]\b)(?![\d.])",
                  (text or "").lower())
    if not m:
        return None
    want = tuple(int(x) for x in m.group(1).split("."))
    keyed = sorted((k, t) for t in tags if (k := _tag_key(t)))
    hits = [(k, t) for k, t in keyed if k[:len(want)] == want] if len(want) == 2 else \
        [(k, t) for k, t in keyed if k == want]
    if not hits:
        return None
    tag = hits[0][1]
    month = tags[tag]
    return (int(month[:4]), int(month[5:7])), tag


def source_of(family: str) -> str:
    """The repositories and snapshot commits a family's history was read from."""
    return "; ".join((_data().get(family) or {}).get("repos") or [])


# ---- building the file from git clones (maintainers only) ----

def _git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", gitdir, *args], check=True, capture_output=True, text=True).stdout


def build(specs: list[str], out: Path = DATA) -> dict:
    """Read FAMILY=OWNER/NAME:GITDIR clones (several per family allowed) and write the gzipped table."""
    table: dict = {}
    for spec in specs:
        family, rest = spec.split("=", 1)
        repo, gitdir = rest.split(":", 1)
        head = _git(gitdir, "rev-parse", "HEAD").strip()
        entry = table.setdefault(family, {"repos": [], "commits": {}, "tags": {}})
        entry["repos"].append(f"{repo}@{head[:12]}")
        by_month: dict = {}
        for line in _git(gitdir, "log", "HEAD", "--tags", "--format=%H %cI").splitlines():
            h, date = line.split()
            by_month.setdefault(date[:7], set()).add(h[:PREFIX])
        for month, hs in by_month.items():
            have = set(re.findall(f".{{{PREFIX}}}", entry["commits"].get(month, "")))
            entry["commits"][month] = "".join(sorted(have | hs))
        for line in _git(gitdir, "for-each-ref", "refs/tags", "--format=%(refname:short) %(*committerdate:iso-strict)"
                         " %(committerdate:iso-strict)").splitlines():
            parts = line.split()
            if len(parts) >= 2 and _tag_key(parts[0]):
                date = parts[1]
                entry["tags"].setdefault(parts[0], date[:7])
                entry["tags"][parts[0]] = min(entry["tags"][parts[0]], date[:7])
    for entry in table.values():
        entry["commits"] = dict(sorted(entry["commits"].items()))
        entry["tags"] = dict(sorted(entry["tags"].items(), key=lambda kv: _tag_key(kv[0])))
    out.write_bytes(gzip.compress(json.dumps(table, separators=(",", ":"), sort_keys=True).encode(), mtime=0))
    return table


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "--build":
        print("usage: python -m roofline.spec.stacks.history --build FAMILY=OWNER/NAME:GITDIR ...", file=sys.stderr)
        sys.exit(2)
    t = build(sys.argv[2:])
    for fam, e in t.items():
        n = sum(len(v) // PREFIX for v in e["commits"].values())
        print(f"{fam}: {n} commits, {len(e['tags'])} release tags ({', '.join(e['repos'])})")
