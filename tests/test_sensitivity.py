"""What bounds a step (roofline/views/sensitivity.py): the resources partition every time input of the model, so
scaling them all scales the step exactly; each alone never moves the step the wrong way; the elasticities add up to 1;
a resource a plan does not use has no effect."""
import dataclasses
import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from roofline import resolve
from roofline.base.errors import InputError
from roofline.model.predict import evaluate, inputs, predict
from roofline.views import sensitivity as SV

# dense and MoE, MLA and hybrid Mamba, one node and many, pipelines with interleaving, ZeRO-3, CUDA graphs, offload,
# a host-bound small model: the terms of the step each of them exercises
RUNS = {
    "gpt3-175b a100": ("gpt3-175b", {"tp": 8, "pp": 8, "dp": 16, "global_batch": 1536, "micro_batch": 1}, "a100-sxm4-80gb"),
    "llama3-70b h100 cp": ("llama3-70b", {"tp": 8, "pp": 4, "dp": 8, "cp": 2, "global_batch": 256}, "h100-sxm"),
    "llama3-8b fsdp": ("llama3-8b", {"tp": 1, "pp": 1, "dp": 16, "global_batch": 64, "sharding": "fsdp"}, "h100-sxm"),
    "qwen3-30b gb200": ("qwen3-30b-a3b", {"tp": 1, "pp": 1, "dp": 8, "ep": 8, "global_batch": 512, "micro_batch": 4,
                                          "dtype": "mxfp8"}, "gb200"),
    "deepseek-v3 h800": ("deepseek-v3", {"tp": 1, "pp": 8, "dp": 128, "ep": 64, "global_batch": 4096,
                                         "micro_batch": 1}, "h800"),
    "nemotron-3-nano graphs": ("nemotron-3-nano-30b-a3b", {"tp": 1, "pp": 1, "dp": 8, "ep": 8, "global_batch": 64,
                                                           "cuda_graphs": "full"}, "b200"),
    "llama3-8b offload": ("llama3-8b", {"tp": 1, "pp": 1, "dp": 8, "global_batch": 16, "offload_layers": 8,
                                        "sharding": "fsdp"}, "gb200"),
    "gpt3-350m host-bound": ("gpt3-350m", {"tp": 1, "pp": 1, "dp": 8, "global_batch": 64, "micro_batch": 1},
                             "a100-sxm4-80gb"),
}
SPECS = {name: resolve(*args) for name, args in RUNS.items()}


def _step(x: dict) -> float:
    return float(evaluate(x)["step_time"])


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(SPECS)), f=st.floats(1.05, 20.0))
def test_every_resource_faster_by_f_makes_the_step_f_times_shorter(name, f):
    """The resources cover every time of the model: work over a rate, or a fixed cost. A time the partition missed
    (a constant in the formulas, an input of no resource) would not scale."""
    spec = SPECS[name]
    x = inputs(spec.model, spec.plan, spec.hardware)
    y = x
    for r in SV.RESOURCES:
        y = SV.scaled(y, r, f)
    assert _step(y) == pytest.approx(_step(x) / f, rel=1e-9)


def test_the_resources_do_not_overlap():
    x = inputs(*[getattr(SPECS["llama3-8b offload"], k) for k in ("model", "plan", "hardware")])
    seen = {}
    for r in SV.RESOURCES:
        keys = SV.resource_keys(r, x)
        assert keys, r.key
        for k in keys:
            assert k not in seen, (k, r.key, seen.get(k))
            seen[k] = r.key


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(SPECS)), f=st.floats(1.05, 8.0))
def test_one_resource_faster_never_slows_the_step(name, f):
    s = SV.sensitivity(SPECS[name], f)
    for r in s.resources:
        assert r["faster_s"] <= s.step_time_s * (1 + 1e-12), r
        assert r["slower_s"] >= s.step_time_s * (1 - 1e-12), r
        assert r["elasticity"] >= -1e-9, r


@pytest.mark.parametrize("name", sorted(SPECS))
def test_elasticities_add_up_to_one(name):
    s = SV.sensitivity(SPECS[name])
    assert sum(r["elasticity"] for r in s.resources) == pytest.approx(1.0, abs=0.02)
    assert s.bound_by == max(s.resources, key=lambda r: r["elasticity"])["resource"]
    assert s.step_time_s == pytest.approx(float(predict(SPECS[name]).raw["step_time"]), rel=1e-12)


def test_a_single_node_plan_does_not_depend_on_the_network():
    s = SV.sensitivity(resolve("llama3-8b", {"tp": 1, "pp": 1, "dp": 8, "global_batch": 64}, "h100-sxm"))
    net = next(r for r in s.resources if r["resource"] == "network")
    assert net["faster_s"] == net["slower_s"] == s.step_time_s and net["elasticity"] == 0


def test_the_host_link_is_listed_only_when_the_plan_offloads():
    names = lambda spec: [r["resource"] for r in SV.sensitivity(spec).resources]      # noqa: E731
    assert "host link" in names(SPECS["llama3-8b offload"])
    assert "host link" not in names(SPECS["llama3-8b fsdp"])


def test_a_small_model_is_bound_by_its_host_and_a_large_one_by_its_tensor_cores():
    small, large = SV.sensitivity(SPECS["gpt3-350m host-bound"]), SV.sensitivity(SPECS["gpt3-175b a100"])
    host = lambda s: next(r["elasticity"] for r in s.resources if r["resource"] == "host CPU")      # noqa: E731
    assert host(small) > 0.5 > host(large)
    assert large.bound_by == "tensor cores"
    # CUDA graphs issue nothing from the host one kernel at a time: no host time to scale
    assert host(SV.sensitivity(SPECS["nemotron-3-nano graphs"])) < 1e-3


def test_faster_and_slower_are_the_step_priced_with_the_scaled_resource():
    spec = SPECS["qwen3-30b gb200"]
    hw = spec.hardware
    nvl = dataclasses.replace(hw, collectives={(c, link): (a, bw * 3 if link == "intra" else bw)
                                               for (c, link), (a, bw) in hw.collectives.items()})
    s = SV.sensitivity(spec, 3)
    row = next(r for r in s.resources if r["resource"] == "NVLink domain")
    assert row["faster_s"] == pytest.approx(float(predict(spec.model, spec.plan, nvl).raw["step_time"]), rel=1e-12)


@pytest.mark.parametrize("factor", [1.0, 0.5, -2, math.inf, math.nan])
def test_a_factor_not_above_one_is_refused(factor):
    with pytest.raises(InputError, match="sensitivity factor must be a finite number > 1"):
        SV.sensitivity(SPECS["llama3-8b fsdp"], factor)


def test_cli_prints_the_table_and_json(cli_main):
    args = ("transformer", "--model", "llama3-70b", "--gpu", "h100-sxm", "--tp", 8, "--pp", 4, "--dp", 32,
            "--global-batch", 1024)
    r = cli_main(*args, "--sensitivity")
    assert r.returncode == 0, r.stderr
    assert "what bounds the step" in r.stdout and "bound by tensor cores" in r.stdout
    r = cli_main(*args, "--sensitivity", 3, "--json")
    d = json.loads(r.stdout)["sensitivity"]
    assert d["factor"] == 3 and d["units"]["resources.faster_s"] == "s"
    assert {row["resource"] for row in d["resources"]} >= {"tensor cores", "HBM", "NVLink domain", "network", "host CPU"}
    r = cli_main(*args, "--sensitivity", 1)
    assert r.returncode == 2 and "--sensitivity" in r.stderr and len(r.stderr.strip().splitlines()) == 1



def test_what_getting_started_says_of_its_example(cli_main):
    """docs/getting-started.md, 'What bounds the step': the GPT-3 175B example sits under its tensor cores and a faster
    network changes little (the table itself is regenerated and checked by tests/test_docs_examples.py)."""
    r = cli_main("transformer", "--example", "gpt3_175b_a100", "--sensitivity", "--json")
    d = json.loads(r.stdout)["sensitivity"]
    net = next(row for row in d["resources"] if row["resource"] == "network")
    assert d["bound_by"] == "tensor cores" and net["elasticity"] < 0.05


@pytest.mark.slow
def test_the_validation_pages_attribution_is_current():
    """docs/validation.md, 'Where the errors point' (benchmarks/validation_report.py attribution_section) states what
    the model and the bundled validation sets give today."""
    import importlib.util
    from pathlib import Path

    from roofline.views import validate as V
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("validation_report", root / "benchmarks" / "validation_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    data = root / "roofline" / "data" / "validation"
    lines = report.attribution_section({"published": V.read(data / "published.csv"),
                                        "vtrain": V.read(data / "vtrain_measured.csv"),
                                        "nemo": V.read(data / "nemo_perf.csv"),
                                        "memory (timed)": V.read(data / "memory_measured.csv")})
    page = (root / "docs" / "validation.md").read_text()
    assert [line for line in lines if line and line not in page] == []
