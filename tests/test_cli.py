"""The CLI: JSON keys, flag spellings, presets, exports, and one-line errors with exit code 2."""
import doctest
import json
import math

import pytest

import roofline
import roofline.views.calibrate.bench_comm
import roofline.views.calibrate.bench_compute
import roofline.views.calibrate.fit
import roofline.views.validate
import roofline.model.formulas.export
import roofline.base.units
import roofline.base.normalize
import roofline.spec.stacks
import roofline.spec.stacks.history
import roofline.views.sensitivity
import roofline.views.uncertainty

EXAMPLE = ["transformer", "--layers", 96, "--d-model", 12288, "--heads", 96, "--seq-len", 2048, "--global-batch", 1536,
           "--micro-batch", 1, "--tp", 8, "--pp", 8, "--dp", 16, "--gpu", "a100-sxm4-80gb"]


@pytest.mark.parametrize("module", [roofline, roofline.base.units, roofline.base.normalize, roofline.model.formulas.export, roofline.views.calibrate.fit,
                                    roofline.views.calibrate.bench_compute, roofline.views.calibrate.bench_comm,
                                    roofline.views.sensitivity, roofline.views.validate,
                                    roofline.views.uncertainty, roofline.spec.stacks, roofline.spec.stacks.history])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


def test_json_keys(cli):
    r = cli(*EXAMPLE, "--tokens", "300e9", "--gpu-hour-price", 2, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for key in ("step_time_s", "breakdown_s", "flops_per_step", "hardware_flops_per_step", "mfu", "hfu",
                "tokens_per_s", "memory_per_gpu_bytes", "fits_in_memory", "n_gpus", "run_days", "units"):
        assert key in d, key
    assert d["n_gpus"] == 1024
    assert set(d["breakdown_s"]) >= {"forward", "backward", "recompute", "tp_comm", "cp_comm", "pp_comm", "pp_bubble",
                                     "dp_comm", "optimizer"}
    assert d["memory_per_gpu_bytes"]["total"] > 0 and 0 < d["mfu"] < 1
    assert sum(d["breakdown_s"].values()) == pytest.approx(d["step_time_s"], rel=1e-9)
    steps = math.ceil(300e9 / (1536 * 2048))             # whole optimizer steps
    assert d["steps"] == steps
    assert d["run_days"] == pytest.approx(steps * d["step_time_s"] / 86400, rel=1e-9)


def test_table_and_underscore_spellings_agree(cli_main):
    dashed = cli_main(*EXAMPLE, "--json")
    under = cli_main(*[a.replace("d-model", "d_model").replace("seq-len", "seq_len").replace("global-batch", "global_batch")
                  .replace("micro-batch", "micro_batch") if isinstance(a, str) else a for a in EXAMPLE], "--json")
    assert json.loads(dashed.stdout)["step_time_s"] == json.loads(under.stdout)["step_time_s"]
    table = cli_main(*EXAMPLE)
    assert "step time" in table.stdout and "MFU" in table.stdout and "memory per GPU" in table.stdout


def test_preset_with_override(cli_main):
    a = json.loads(cli_main("transformer", "--model", "gpt3-175b", "--tp", 8, "--pp", 8, "--dp", 16, "--global-batch", 1536,
                       "--json").stdout)
    b = json.loads(cli_main("transformer", "--model", "gpt3-175b", "--layers", 48, "--tp", 8, "--pp", 8, "--dp", 16,
                       "--global-batch", 1536, "--json").stdout)
    assert b["step_time_s"] < a["step_time_s"] and b["params"] < a["params"]


@pytest.mark.parametrize("args,needle", [
    (["--layers", 30, "--pp", 4, "--framework", "megatron-lm@2021"], "layers (30) must be divisible by pp x interleave"),
    (["--sharding", "zero2"], "stack megatron-core cannot run sharding 'zero2'"),
    (["--framework", "megatorn"], "unknown framework 'megatorn'"),
    (["--heads", 12, "--d-model", 768, "--tp", 8], "heads (12) must be divisible by tp (8)"),
    (["--kv-heads", 5, "--heads", 12, "--d-model", 768], "heads (12) must be divisible by kv-heads (5)"),
    (["--global-batch", 100, "--dp", 16], "global batch (100) must be divisible by micro-batch x dp"),
    (["--d-model", -5], "model.d_model must be a positive number"),
    (["--layers", 0], "model.n_layers must be a positive number"),
    (["--gpu", "a999"], "unknown GPU/hardware profile 'a999'"),
    (["--model", "nope-1b"], "unknown model 'nope-1b'"),
])
def test_bad_input_exits_2_with_one_line(cli_main, args, needle):
    r = cli_main("transformer", *args)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


LINKS = "links: {intra: {bandwidth: 300 GB/s}, inter: {bandwidth: 25 GB/s}}\ngpus_per_node: 8\nhbm_capacity: 80 GiB\n"


@pytest.mark.parametrize("content,needle", [("id: x\npeak_flops: {bf16: 100 TFLOP/s}\n" + LINKS, "missing field 'hbm_bandwidth'"),
                                            ("id: x\n  bad: [\n", "malformed YAML"),
                                            ("id: x\npeak_flops: {bf16: 100 TFLOP/s}\nhbm_bandwidth: 3 GB\n" + LINKS,
                                             "hbm_bandwidth: cannot read '3 GB'"),
                                            ("id: x\npeak_flops: {bf16: 100 TFLOP/s}\nhbm_bandwidth: 3 TB/s\n"
                                             "sustained_clock: 1.2\n" + LINKS, "sustained_clock must be a number in (0, 1]"),
                                            ("id: x\npeak_flops: {bf16: 100 TFLOP/s}\nhbm_bandwidth: 3 TB/s\n"
                                             "max_matmul: 120 TFLOP/s\n" + LINKS, "max_matmul must be positive and at most")])
def test_bad_profile_yaml(cli_main, tmp_path, content, needle):
    f = tmp_path / "gpu.yaml"
    f.write_text(content)
    r = cli_main("transformer", "--gpu", f)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_formulas_export(cli, cli_main):
    r = cli_main("formulas", "--quantity", "pp_bubble", "--format", "sympy")      # in-process: step.build() once a session
    assert r.returncode == 0 and r.stdout.strip() == "(pp - 1)/(pp - 1 + global_batch*interleave/(dp*micro_batch))"
    r = cli("formulas", "--quantity", "nope")                                     # the real entry point
    assert r.returncode == 2 and "unknown quantity" in r.stderr


# the large closed forms (memory, communication) take 7-30 s each here: slow family, run by .ci/run's slow selection
SLOW = pytest.mark.slow


@pytest.mark.parametrize("q", ["flops", pytest.param("memory", marks=SLOW), pytest.param("tp_comm", marks=SLOW),
                               pytest.param("dp_comm", marks=SLOW), "pp_bubble"])
def test_formulas_export_formats(q):
    from roofline.model.formulas.export import export, expression
    from roofline.model.formulas.symbols import SYMBOLS
    e = expression(q, {"n_layers": 96, "d_model": 12288})
    from roofline.model.formulas.dag import symbols_of
    assert SYMBOLS["n_layers"].symbol not in symbols_of(e) and SYMBOLS["d_model"].symbol not in symbols_of(e)
    for fmt in ("latex", "sympy"):
        text = export(q, fmt, {"n_layers": 96, "d_model": 12288})
        assert "d_model" not in text and "n_layers" not in text
        assert text.strip() and (fmt != "latex" or "\\frac" in text)     # an empty export passed the line above
    # the sympy text reads back as the same expression (equal values at a random point); the large forms come as
    # named subexpressions `x0 = ...` ending with the quantity's line (their values: the python export's test below)
    lines = text.strip().splitlines()
    if len(lines) > 1:
        assert lines[-1].startswith(f"{q} = ") and all(" = " in ln for ln in lines)
    else:
        import numpy as np
        import sympy as sp
        rng = np.random.default_rng(7)
        point = {x.name: sp.Float(rng.uniform(1, 3)) for x in sorted(e.free_symbols, key=str)}
        back = sp.sympify(text)
        assert {x.name for x in back.free_symbols} == set(point)
        assert float(back.xreplace({x: point[x.name] for x in back.free_symbols})) == \
            pytest.approx(float(e.xreplace({x: point[x.name] for x in e.free_symbols})), rel=1e-12)
    j = json.loads(export(q, "json"))
    assert j["quantity"] == q and j["symbols"]
    if q == "flops":
        assert j["dimension"] == "flop" and "n_layers" in j["symbols"]
    if q == "pp_bubble":
        ns = {}
        exec(export(q, "python"), ns)
        assert ns["pp_bubble"](dp=1, micro_batch=1, pp=8, global_batch=64, interleave=2) == pytest.approx(7 / (2 * 64 + 7))   # share of the pipeline time: (p-1)/(v m + p - 1)


@pytest.mark.parametrize("q", [pytest.param("step_time", marks=SLOW), "memory", pytest.param("t_dp_comm", marks=SLOW)])
def test_exported_python_computes_what_the_compiled_model_computes(q):
    """The exported numpy function (named common subexpressions for the large closed forms) gives the value of
    the compiled model on a real case: GPT-3 175B, tp 8 / pp 8 / dp 16, on the A100 profile."""
    from roofline.spec import hardware, models
    from roofline.spec.config import Plan
    from roofline.model.formulas.export import export
    from roofline.model.predict import evaluate, inputs
    x = inputs(models.load("gpt3-175b"), Plan(tp=8, pp=8, dp=16, micro_batch=1, global_batch=1536),
                       hardware.load("a100-sxm4-80gb"))
    ns = {}
    exec(export(q, "python"), ns)
    fn = ns[q]
    args = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    want = evaluate(x)[q]
    from roofline.model.formulas.symbols import SYMBOLS
    given = {a: x[a] if a in x else SYMBOLS[a].default for a in args}     # inputs with a sourced default may be left out
    assert float(fn(**given)) == pytest.approx(float(want), rel=1e-9) and float(want) > 0


def test_hardware_and_models_listing(cli, cli_main):
    r = cli("hardware", "list")                         # the real entry point once; the other listings in-process
    assert r.returncode == 0 and "h100-sxm" in r.stdout and "mi300x" in r.stdout
    r = cli_main("hardware", "list", "--table")
    assert "TFLOP/s" in r.stdout
    r = cli_main("hardware", "show", "a100-sxm4-80gb")
    assert "hbm_bandwidth" in r.stdout
    r = cli_main("models", "list")
    assert "llama3.1-405b" in r.stdout and "gpt3-175b" in r.stdout
    r = cli_main("models", "show", "llama2-7b")
    assert "n_layers: 32" in r.stdout


def _main(capsys, *args):
    """Run the CLI in-process: (exit status, stderr)."""
    from roofline.face.cli import main
    try:
        rc = main([str(a) for a in args])
    except SystemExit as exc:       # argparse usage errors
        rc = exc.code
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("args,needle", [
    (["transformer", "--tokens", "nan"], "argument --tokens: must be a finite number > 0, got 'nan'"),
    (["transformer", "--tokens", "1e400"], "argument --tokens: must be a finite number > 0"),
    (["transformer", "--tokens", "abc"], "argument --tokens: expected a number, got 'abc'"),
    (["transformer", "--steps", "0"], "argument --steps: must be a finite number > 0"),
    (["transformer", "--gpu-hour-price", "-3"], "must be a finite number >= 0, got '-3'"),
    (["transformer", "--net-gbps", "0"], "argument --net-gbps/--net_gbps: must be a finite number > 0"),
    (["transformer", "--gpus-per-node", "0"], "argument --gpus-per-node/--gpus_per_node"),
    (["transformer", "--layers", "nan"], "roofline transformer: error: argument --n-layers/--n_layers/--layers: invalid int value: 'nan'"),
    (["transformer", "--timeline", "{tmp}/no/such/x.png"], "--timeline {tmp}/no/such/x.png: folder"),
    (["transformer", "--timeline", "{tmp}/x.txt"], "the file name must end in an image format"),
    (["transformer", "--trace", "{tmp}/no/such/x.json"], "does not exist"),
    (["formulas", "--format", "nosuch"], "argument --format: invalid choice: 'nosuch'"),
    (["formulas", "--set", "n_layers=-3"], "--set: values must be finite and >= 0, got n_layers=-3"),
    (["search", "--model", "gpt3-125m", "--global-batch", 64, "--gpus", 8, "--plot", "{tmp}/x.png"],
     "--plot draws the time/cost Pareto front of a GPU range"),
    (["calibrate", "compute", "--device", "cpu", "--repeats", 0, "--out", "{tmp}/x"], "argument --repeats"),
    (["calibrate", "compute", "--device", "nosuch", "--out", "{tmp}/x"], "nosuch: not a torch device|needs torch"),
    (["calibrate", "host", "--device", "nosuch"], "nosuch: not a torch device|needs torch"),
    (["calibrate", "import", "estimate-train-time", "{tmp}", "--cluster", "vista", "--out", "x", "--folds", 1],
     "argument --folds: must be a finite number >= 2"),
])
def test_bad_values_exit_2_with_one_line(capsys, tmp_path, args, needle):
    """Non-finite, non-positive and malformed flag values, unwritable or unknown-format output files and unknown
    devices: exit status 2 and one line naming the flag, never a traceback or the usage block."""
    import re
    rc, err = _main(capsys, *[str(a).format(tmp=tmp_path) for a in args])
    assert rc == 2
    assert re.search(re.escape(needle.format(tmp=tmp_path)).replace(r"\|", "|"), err), err
    assert len(err.strip().splitlines()) == 1 and "usage:" not in err


def test_validate_unknown_tier_is_an_error(capsys, tmp_path):
    from roofline.views.validate import REQUIRED
    f = tmp_path / "runs.csv"
    f.write_text(",".join(REQUIRED + ("tier",)) + "\n" + ",".join(["1"] * len(REQUIRED) + ["A"]) + "\n")
    rc, err = _main(capsys, "validate", f, "--tier", "Z")
    assert rc == 2 and f"--tier Z: no row of {f} is in that tier (tiers there: A)" in err


@pytest.mark.parametrize("typed, meant", [("llama3-405b", "llama3.1-405b"), ("Llama 3 70B", "llama3-70b"),
                                          ("qwen3-30b", "qwen3-30b-a3b"), ("mixtral-8x7", "mixtral-8x7b")])
def test_a_mistyped_model_gets_one_line_naming_the_preset_it_likely_means(cli_main, typed, meant):
    r = cli_main("transformer", "--model", typed, "--gpu", "h100-sxm")
    assert r.returncode == 2 and f"unknown model {typed!r} (did you mean {meant}?)" in r.stderr
    assert r.stderr.count("\n") == 1


def test_an_unguessable_model_names_no_preset():
    from roofline.spec import models
    assert models.suggest("zzz-nothing") is None
