"""The package's layers import only downward, and no module imports itself back through another
(imports inside functions count): the shape docs/architecture.md describes, kept by a test."""
import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "roofline"

# docs/architecture.md: the folders under roofline/ are the layers, base < spec < model < views < face (a module may
# import its own layer and those below); the package's __init__ and __main__ are the face's entry points.
LAYERS = ("base", "spec", "model", "views", "face")
RANK = {name: i for i, name in enumerate(LAYERS)} | {"__init__": len(LAYERS) - 1, "__main__": len(LAYERS) - 1}


def modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        if "data" in p.relative_to(PKG).parts:        # sample scripts shipped with measured data
            continue
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the roofline modules it imports anywhere in its body."""
    graph = {m: set() for m in mods}
    for m, path in mods.items():
        package = m if path.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            graph[m].update(t for t in targets if t in mods and t != m)
    return graph


def top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_has_a_layer():
    missing = sorted(m for m in modules() if top(m) not in RANK)
    assert not missing, f"move these modules into a layer folder (docs/architecture.md): {missing}"


def test_layers_import_only_downward():
    graph = imports(modules())
    up = [f"{a} -> {b}" for a, targets in graph.items() for b in targets
          if top(a) in RANK and top(b) in RANK and RANK[top(b)] > RANK[top(a)]
          and top(a) != "__init__"]       # the package's __init__ re-exports the API (face)
    assert not up, "imports that go up a layer: " + "; ".join(sorted(up))


def test_no_import_cycles():
    graph = imports(modules())
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):            # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("bad", [{"a": {"b"}, "b": {"a"}}])
def test_the_cycle_finder_finds_a_planted_cycle(bad, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "imports", lambda mods: bad, raising=False)
    monkeypatch.setitem(globals(), "imports", lambda mods: bad)
    with pytest.raises(AssertionError, match="import cycles"):
        test_no_import_cycles()
