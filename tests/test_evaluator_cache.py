"""The cut evaluators' bytecode is cached on disk (predict._code): a cached load runs the same code as a fresh
compile, and a cache folder that cannot be written leaves the evaluator working."""
import numpy as np

from roofline.model import predict as P


def test_cached_bytecode_is_the_compiled_code(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE", str(tmp_path))
    src = "def f(x):\n    return np.sqrt(x) + 1\n"
    first = P._code(src, "<t>")
    files = list(tmp_path.glob("evaluator-*.marshal"))
    assert len(files) == 1
    first_file = files[0]
    again = P._code(src, "<t>")                        # read back from the file
    assert again.co_code == first.co_code and again.co_consts == first.co_consts
    scope = {"np": np}
    exec(again, scope)
    assert scope["f"](4.0) == 3.0
    P._code(src, "<u>")                                # another evaluator, another file
    assert len(list(tmp_path.glob("evaluator-*.marshal"))) == 2
    P._code(src + "# other\n", "<t>")                  # the same evaluator of new formulas replaces its old file
    files = sorted(tmp_path.glob("evaluator-*.marshal"))
    assert len(files) == 2 and first_file not in files


def test_a_corrupt_or_unwritable_cache_falls_back_to_compiling(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE", str(tmp_path))
    src = "def f(x):\n    return 2 * x\n"
    P._code(src, "<t>")
    (path,) = tmp_path.glob("evaluator-*.marshal")
    path.write_bytes(b"not bytecode")
    scope = {}
    exec(P._code(src, "<t>"), scope)
    assert scope["f"](3) == 6
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("ROOFLINE_CACHE", str(blocked / "sub"))   # a folder under a file: cannot be made
    scope = {}
    exec(P._code(src, "<t>"), scope)
    assert scope["f"](3) == 6


def test_the_memory_evaluator_from_the_cache_prices_as_the_whole_model(tmp_path, monkeypatch):
    from roofline.spec import hardware, models
    from roofline.spec.config import Plan

    monkeypatch.setenv("ROOFLINE_CACHE", str(tmp_path))
    x = P.inputs(models.load("llama3-8b"), Plan(global_batch=16, micro_batch=2, tp=2), hardware.load("h100-sxm"))
    whole = P.evaluate(x)["memory"]
    for _ in range(2):                                   # compiled, then loaded from the file
        P.evaluator.cache_clear()
        assert P.evaluator(("memory",))(x)["memory"] == whole
    assert list(tmp_path.glob("evaluator-*.marshal"))


def test_no_home_folder_compiles_without_a_cache(monkeypatch):
    """Path.home() raises where no home folder can be determined (no HOME, no passwd entry): compile, cache nothing."""
    from pathlib import Path

    monkeypatch.delenv("ROOFLINE_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    scope = {}
    exec(P._code("def f(x):\n    return x + 1\n", "<t>"), scope)
    assert scope["f"](1) == 2

