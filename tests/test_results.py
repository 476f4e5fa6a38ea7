"""One shape of result (roofline/base/results.py): frozen, SI floats inside, a unit for every dimensioned value,
``to_dict()`` = the values and a units map. The invariants are checked on every view's result and on
arbitrary synthetic results (hypothesis)."""
import dataclasses
import doctest
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.views import cluster_schedule, search, sizing
from roofline.spec import hardware, models
from roofline.base import results
from roofline.views import validate as V
from roofline.spec.config import Model, Plan
from roofline.base.errors import InputError
from roofline.model.predict import predict
from roofline.views.runcost import run_cost
from roofline.base.units import DAY, HOUR, Q

HW = hardware.load("a100-sxm4-80gb")
M = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=2048, tied_embeddings=False,
          position="rope", biases=False)
FIXTURE = Path(__file__).with_name("fixtures") / "validation_rows.csv"


def test_doctests():
    assert doctest.testmod(results).failed == 0


def check_shape(r: results.Result):
    """The contract every result keeps: frozen; to_dict() = si() + units; JSON-ready; every unit in the map
    is a pint unit and every name it lists reads back as a quantity of that unit's dimension."""
    d = r.to_dict()
    assert list(d) == [*r.si(), "units"] or set(d) == {*r.si(), "units"}
    assert d["units"] == r.units()
    json.loads(json.dumps(d))                       # plain values only (NaN allowed, as --json prints)
    field = dataclasses.fields(r)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(r, field, None)
    read = 0
    for name, unit in r.units().items():
        try:
            q = r.quantity(name)
        except InputError as exc:                   # a value that is absent for this result (None)
            assert "not set" in str(exc) or "no value" in str(exc), exc
            continue
        check_dims(r, name, q)
        read += 1
    return read


def check_dims(r, name, q):
    if isinstance(q, list):                         # rows of tables
        for one in q:
            check_dims(r, name, one)
        return
    if isinstance(q, dict):                         # a table: each value in its own unit
        for k, v in q.items():
            check_dims(r, f"{name}.{k}", v)
        return
    assert q.dimensionality == Q(1, r.unit(name)).dimensionality, name


# ---- synthetic results: the mechanism itself --------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Run(results.Result):
    UNITS = {"seconds": "s", "sent": "B", "rows.t": "ms"}
    seconds: float
    sent: object
    rows: tuple = ()


floats = st.floats(min_value=0.0, max_value=1e18, allow_nan=False)


@settings(max_examples=50, deadline=None)
@given(floats, st.dictionaries(st.sampled_from(["tp", "dp", "pp"]), floats, min_size=1),
       st.lists(floats, max_size=5))
def test_synthetic_result_round_trip(seconds, sent, ts):
    r = Run(seconds, results.freeze(sent), results.freeze([{"t": t} for t in ts]))
    assert r.to_dict() == {"seconds": seconds, "sent": sent, "rows": [{"t": t} for t in ts], "units": Run.UNITS}
    assert r.quantity("seconds").to("hour").magnitude == pytest.approx(seconds / HOUR)
    for k, v in sent.items():
        assert r.quantity(f"sent.{k}").to("B").magnitude == v      # a mapping's unit applies to each value
    assert list(r.quantity("rows.t").to("s").magnitude) == pytest.approx([t / 1e3 for t in ts])
    with pytest.raises(TypeError):
        r.sent["tp"] = 0.0                          # nested tables are read-only
    check_shape(r)


def test_unknown_or_unitless_name_is_one_line_input_error():
    r = Run(1.0, results.freeze({"tp": 1.0}))
    for name in ("nope", "sent.nope"):
        with pytest.raises(InputError) as e:
            r.quantity(name)
        assert "\n" not in str(e.value) and repr(name) in str(e.value)


# ---- every view's result --------------------------------------------------------------------------------
@settings(max_examples=5, deadline=None)
@given(st.floats(min_value=1e8, max_value=1e13), st.sampled_from([1, 2, 4]))
def test_run_cost(tokens, tp):
    rc = run_cost(M, Plan(tp=tp, dp=8 // tp, micro_batch=1, global_batch=8), HW, tokens)
    assert check_shape(rc) >= 8
    assert rc.quantity("runtime_s").to("day").magnitude == pytest.approx(rc["runtime_days"])
    assert rc.quantity("totals.flop").to("flop").magnitude == rc["flop"]["total"]
    d = rc.to_dict()
    assert list(d)[:-1] == list(rc)                 # the dict keys --json has always printed, then units
    copy = rc["flop"]
    copy["total"] = -1.0                            # a reader's copy: the result does not change
    assert rc["flop"]["total"] > 0


def test_candidate_units_agree_with_its_run_totals():
    cands = search.search(models.load("gpt3-125m"), HW, 8, 64, top=3, tokens=1e10, gpu_hour_price=2.0)
    for c in cands:
        check_shape(c)
        gpu_h = (c.quantity("run_days") * c.n_gpus).to("hour").magnitude
        assert gpu_h == pytest.approx(c.gpu_hours, rel=1e-9)
        assert (c.quantity("gpu_hours") * Q(2.0, "USD/hour")).to("USD").magnitude == pytest.approx(c.cost_usd)
        assert c.to_dict()["plan"]["tp"] == c.plan.tp


def test_prediction_is_a_result():
    p = predict(M, Plan(dp=8, micro_batch=1, global_batch=8), HW, tokens=1e10)
    check_shape(p)
    assert p.quantity("step_time_s") == p.step_time.to("s")
    assert p.quantity("run_days").to("s").magnitude == pytest.approx(p.run["run_days"].to("s").magnitude)
    assert list(p.to_dict()).index("units") == list(p.to_dict()).index("stack") + 1


def test_validation():
    r = V.validate(V.read(FIXTURE))
    check_shape(r)
    pred = r.quantity("cases.predicted_s").to("ms").magnitude
    assert len(pred) == len(r["cases"])
    meas = r.quantity("cases.measured_s").magnitude
    for c, m in zip(r["cases"], meas):              # rows without a measured time read as NaN
        assert (c["measured_s"] is None and math.isnan(m)) or c["measured_s"] == m
    with pytest.raises(TypeError):
        r.cases[0]["error"] = 0.0
    ranked = dataclasses.replace(r, ranking=results.freeze(V.ranking(V.read(FIXTURE), r)))
    assert list(ranked.to_dict())[-2:] == ["ranking", "units"]


def test_cluster_schedule(tmp_path):
    p = tmp_path / "jobs.yaml"
    p.write_text("jobs:\n  - {name: a, model: gpt3-125m, global_batch: 64, tokens: 2e9, deadline_h: 1000}\n"
                 "  - {name: b, model: gpt3-125m, global_batch: 64, tokens: 1e9, arrival_h: 0.5}\n")
    jobs, _ = cluster_schedule.load_jobs(p)
    for res in cluster_schedule.schedule(jobs, 16, HW):
        check_shape(res)
        assert res.quantity("makespan_h").to("s").magnitude == pytest.approx(res.makespan_h * HOUR)
        assert list(res.quantity("jobs.end_h").magnitude) == [pl.end_h for pl in res.placements]
        for pl in res.placements:
            check_shape(pl)
    assert set(cluster_schedule.to_dict(cluster_schedule.schedule(jobs, 16, HW))) == {"greedy", "equal_split"}


def test_budget_plan():
    r = sizing.plan_budget(HW, 8, gpu_hours=2e3, seq_len=1024, global_batch=64)
    check_shape(r)
    assert r.units()["best_plan.step_time_s"] == "s"
    assert r.quantity("best_plan.run_days").to("s").magnitude == pytest.approx(r.best.run_days * DAY)
    assert r.to_dict()["best_plan"] == r.best.si()
