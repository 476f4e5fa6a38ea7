"""benchmarks/small_gpt_step.py: the measured small-GPT step that is compared with the prediction on a GPU.
Its torch model must be the architecture roofline prices (same parameter count at every size), and its
mechanics (timing, prediction, CSV) must run; on a CPU the timings themselves mean nothing."""
import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the small-GPT step benchmark needs torch (the calibrate extra)")

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "small_gpt_step.py"
spec = importlib.util.spec_from_file_location("small_gpt_step", PATH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


@pytest.mark.parametrize("size", bench.SIZES + bench.TINY, ids=lambda s: s[0])
def test_torch_model_is_the_priced_architecture(size):
    name, layers, d, heads = size
    vocab, seq = 50304, 1024
    model = bench.build_gpt(torch, layers, d, heads, vocab, seq, torch.device("meta"))   # no memory, no compute
    n_torch = sum(p.numel() for p in model.parameters())
    pred = bench.predict(name, layers, d, heads, vocab, seq, 8, "h100-sxm")
    assert n_torch == pred["params"]
    assert pred["predicted_s"] > 0 and pred["flops"] > 6 * n_torch * 8 * seq     # 6 N D plus attention


def test_tiny_run_on_cpu(tmp_path, capsys):
    out = tmp_path / "steps.csv"
    rc = bench.main(["--device", "cpu", "--tiny", "--warmup", "1", "--steps", "2", "--json", "--csv", str(out)])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["size"] for r in rows] == ["tiny-a", "tiny-b"]
    for r in rows:
        assert r["measured_s"] > 0 and r["predicted_s"] > 0 and r["params_torch"] == r["params_model"]
        assert r["error"] == pytest.approx(r["predicted_s"] / r["measured_s"] - 1)
    assert out.read_text().splitlines()[0].startswith("size,layers,d_model,heads")
    assert len(out.read_text().splitlines()) == 3


def test_bad_arguments(capsys):
    assert bench.main(["--device", "cpu", "--sizes", "gpt-7t"]) == 2
    assert "unknown size(s) gpt-7t" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert bench.main(["--device", "cuda:0"]) == 2
        assert "CUDA is not available" in capsys.readouterr().err
