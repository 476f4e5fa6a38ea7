"""timeline.per_stage under a stated pipeline layout: the ranks the layout gives, the model's step on every row."""
import pytest

from roofline.spec import hardware
from roofline.views import timeline
from roofline.spec.config import Model, Plan
from roofline.model.predict import predict


def test_stated_layout_places_layers_and_edges_as_written():
    model = Model(n_layers=10, d_model=1024, n_heads=16, vocab=32000, seq_len=2048)
    # 4 ranks: E + 1 layer, 3, 4, 2 + loss (hand-written, uneven on purpose)
    plan = Plan(tp=1, pp=4, dp=1, micro_batch=1, global_batch=8, pipeline_layout="Et|ttt|tttt|ttL")
    pred = predict(model, plan, hardware.load("a100-sxm4-80gb"))
    rows = timeline.per_stage(pred)
    assert [r["layers"] for r in rows] == [1, 3, 4, 2]
    assert [r["embedding"] for r in rows] == [True, False, False, False]
    assert [r["lm_head"] for r in rows] == [False, False, False, True]
    step = pred.raw["step_time"]
    assert all(r["total"] == pytest.approx(step, rel=1e-12) for r in rows)
    # the LM head's GEMM, 2 s h V = 134 GFLOP forward, outweighs 2 layers (24 s h^2 + attention ~ 60 GFLOP each):
    # the loss rank (2 layers + head) is slower than the 4-layer rank; the model paces the step by it, so it
    # waits for nobody and every other rank does
    slowest = max(rows, key=lambda r: r["compute"] + r["communication"] + r["host"])
    assert slowest["lm_head"] and slowest["wait"] == pytest.approx(0, abs=1e-9 * step)
    assert all(r["wait"] > 0 for r in rows if not r["lm_head"])
