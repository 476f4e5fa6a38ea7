"""search --gpu A,B,...: each profile's best plan at one GPU count, priced per profile; search --sensitivity: what bounds
the top plan."""
import json

import pytest

from roofline.model.predict import predict
from roofline.spec import hardware, models
from roofline.views import sensitivity as SV

BASE = ("search", "--model", "llama3-8b", "--global-batch", 256, "--gpus", 64, "--top", 3)


def _json(cli_main, *args):
    r = cli_main(*BASE, *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_each_row_is_that_profiles_own_search(cli_main):
    d = _json(cli_main, "--gpu", "h100-sxm,b200", "--tokens", 1e12, "--gpu-hour-price", "2.5,4")
    rows = {r["gpu"]: r for r in d["profiles"]}
    assert list(rows) == ["h100-sxm", "b200"]
    for gpu, price in (("h100-sxm", 2.5), ("b200", 4.0)):
        alone = _json(cli_main, "--gpu", gpu, "--tokens", 1e12, "--gpu-hour-price", price)["plans"][0]
        best = rows[gpu]["best"]
        assert best["step_time_s"] == pytest.approx(alone["step_time_s"], rel=1e-12)
        assert best["plan"] == alone["plan"]
        assert best["cost_usd"] == pytest.approx(best["gpu_hours"] * price, rel=1e-9)
        assert rows[gpu]["bound_by"] in {r.name for r in SV.RESOURCES}


def test_one_price_applies_to_every_profile(cli_main):
    d = _json(cli_main, "--gpu", "h100-sxm,b200", "--tokens", 1e12, "--gpu-hour-price", 3)
    for r in d["profiles"]:
        assert r["best"]["cost_usd"] == pytest.approx(r["best"]["gpu_hours"] * 3, rel=1e-9)


def test_a_profile_that_cannot_run_the_plan_gets_its_reason_in_its_row(cli_main):
    r = cli_main(*BASE, "--gpu", "h100-sxm,a100-sxm4-80gb", "--dtype", "fp8-cs")
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.strip().startswith("a100-sxm4-80gb"))
    assert "no plan" in row and "fp8" in row
    assert "fastest: h100-sxm" in r.stdout


@pytest.mark.parametrize("args, message", [
    (("--gpu", "h100-sxm,nope"), "unknown GPU/hardware profile 'nope'"),
    (("--gpu", "h100-sxm,,b200"), "empty profile name"),
    (("--gpu", "b200,b200"), "names a profile twice"),
    (("--gpu", "h100-sxm,b200", "--gpu-hour-price", "1,2,3"), "3 prices for 2 profiles"),
    (("--gpu", "h100-sxm", "--gpu-hour-price", "1,2"), "2 prices for one profile"),
    (("--gpu", "h100-sxm,b200", "--sensitivity"), "--sensitivity is for one profile"),
    (("--gpu", "h100-sxm,b200", "--gpus", "64..128"), "not a range"),
    (("--gpu", "h100-sxm,b200", "--gpus", "64,32,16"), "3 counts for 2 profiles"),
    (("--gpu", "h100-sxm", "--gpus", "64..128", "--sensitivity"), "one GPU count"),
    (("--gpu-hour-price", "-1"), "each price must be a finite number >= 0"),
])
def test_bad_comparisons_are_one_line_errors(cli_main, args, message):
    r = cli_main(*BASE, *args)
    assert r.returncode == 2 and r.stdout == ""
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_search_sensitivity_is_the_top_plans(cli_main):
    d = _json(cli_main, "--gpu", "h100-sxm", "--sensitivity", 3)
    top, s = d["plans"][0], d["sensitivity"]
    assert s["step_time_s"] == pytest.approx(top["step_time_s"], rel=1e-9)
    assert s["factor"] == 3
    r = cli_main(*BASE, "--gpu", "h100-sxm", "--sensitivity")
    assert r.returncode == 0 and "top plan:" in r.stdout and "what bounds the step" in r.stdout


def test_the_compare_table_names_the_fastest_profile(cli_main):
    r = cli_main(*BASE, "--gpu", "a100-sxm4-80gb,h100-sxm")
    assert r.returncode == 0, r.stderr
    d = _json(cli_main, "--gpu", "a100-sxm4-80gb,h100-sxm")
    fastest = min(d["profiles"], key=lambda row: row["best"]["step_time_s"])["gpu"]
    assert f"fastest: {fastest}" in r.stdout
    # the same plan priced by predict on that profile gives the row's step time
    row = next(x for x in d["profiles"] if x["gpu"] == fastest)
    from roofline.spec.config import Plan
    p = row["best"]["plan"]
    plan = Plan(**{k: v for k, v in p.items() if k in Plan.__dataclass_fields__})
    from roofline.spec.resolve import resolve
    model = resolve("llama3-8b", plan, fastest).model     # the stack's model fields, as the search prices them
    pred = predict(model, plan, hardware.load(fastest))
    assert float(pred.raw["step_time"]) == pytest.approx(row["best"]["step_time_s"], rel=1e-9)


def test_a_refusal_every_profile_shares_is_the_flags_error(cli_main):
    r = cli_main(*BASE, "--gpu", "h100-sxm,b200", "--schedule", "dualpipev")
    assert r.returncode == 2 and r.stdout == "" and "dualpipev" in r.stderr


def test_each_profile_at_its_own_gpu_count(cli_main):
    """--gpus 64,32 with --gpu h100-sxm,b200: the same budget on fewer, faster GPUs; each row is that profile's own
    search at its count."""
    args = [a for a in BASE if a not in ("--gpus", 64)]
    r = cli_main(*args, "--gpu", "h100-sxm,b200", "--gpus", "64,32", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["n_gpus"] == [64, 32]
    for row, n in zip(d["profiles"], (64, 32)):
        alone = json.loads(cli_main(*args, "--gpu", row["gpu"], "--gpus", n, "--json").stdout)["plans"][0]
        assert row["n_gpus"] == n == row["best"]["n_gpus"]
        assert row["best"]["step_time_s"] == pytest.approx(alone["step_time_s"], rel=1e-12)
    text = cli_main(*args, "--gpu", "h100-sxm,b200", "--gpus", "64,32").stdout
    assert "on the GPU counts given" in text and " GPUs " in text.splitlines()[1]
