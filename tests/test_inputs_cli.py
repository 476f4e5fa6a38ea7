"""Issue 22, second pass: the inputs of ``cluster-schedule`` (jobs files), ``plan`` and ``formulas``.

Every bad input gives exit status 2 and ONE line on stderr naming the field and the value (no traceback,
nothing on stdout, no file written); the right cause is named (a bad model field or "no parallel split"
instead of "budget too small"). The cases run in-process through ``roofline.face.cli.main``; the jobs files are
generated here in ``tmp_path``.
"""
from __future__ import annotations

import os

import pytest
import yaml

from roofline.views import cluster_schedule as schedule
from roofline.spec import hardware, models
from roofline.base.errors import InputError

GOOD_JOB = {"name": "a", "model": "gpt3-125m", "global_batch": 64, "tokens": 1e9}
DELETE = object()


def _run(capsys, tmp_path, *args, stdout=None):
    """(exit status, stderr) of the CLI in-process; asserts the boundary contract for a refused input."""
    from roofline.face.cli import main

    before = sorted(os.listdir(tmp_path))
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    if rc != 0:
        assert rc == 2, out.err
        assert out.out == "", out.out                          # nothing printed before the error
        assert "Traceback" not in out.err and len(out.err.strip().splitlines()) == 1, out.err
        assert out.err.startswith("roofline: error: "), out.err
        assert sorted(os.listdir(tmp_path)) == before          # nothing written
    if stdout is not None:
        stdout.append(out.out)
    return rc, out.err


def _jobs_file(tmp_path, job_updates=None, top=None, jobs=None) -> str:
    job = dict(GOOD_JOB)
    for k, v in (job_updates or {}).items():
        if v is DELETE:
            job.pop(k, None)
        else:
            job[k] = v
    d = {"gpu": "a100-sxm4-80gb", "gpus": 8, "jobs": jobs if jobs is not None else [job]}
    for k, v in (top or {}).items():
        if v is DELETE:
            d.pop(k, None)
        else:
            d[k] = v
    p = tmp_path / "jobs.yaml"
    p.write_text(yaml.safe_dump(d, sort_keys=False))
    return str(p)


# ---- jobs files -------------------------------------------------------------------------------------
NAN, INF = float("nan"), float("inf")
JOB_CASES = [
    # (updates of the one job, words the line must contain: the job and the field)
    ({"global_batch": 0}, ["job 'a'", "global_batch", "0"]),              # was ZeroDivisionError
    ({"global_batch": -8}, ["job 'a'", "global_batch"]), ({"global_batch": 2.5}, ["job 'a'", "global_batch"]),
    ({"global_batch": "lots"}, ["job 'a'", "global_batch", "lots"]), ({"global_batch": NAN}, ["global_batch"]),
    ({"global_batch": True}, ["global_batch"]), ({"global_batch": [64]}, ["global_batch"]),
    ({"global_batch": DELETE}, ["job 'a'", "missing key 'global_batch'"]),
    ({"tokens": -1e9}, ["job 'a'", "tokens"]), ({"tokens": 0}, ["job 'a'", "tokens"]),
    ({"tokens": "-1e9"}, ["job 'a'", "tokens"]), ({"tokens": INF}, ["tokens"]), ({"tokens": "1e400"}, ["tokens"]),
    ({"tokens": NAN}, ["tokens"]), ({"tokens": "many"}, ["tokens", "many"]),
    ({"tokens": 10}, ["job 'a'", "tokens", "one step"]),                  # less than one step of 64 x 2048 tokens
    ({"tokens": DELETE, "steps": -5}, ["job 'a'", "steps"]), ({"tokens": DELETE, "steps": 0}, ["steps"]),
    ({"tokens": DELETE, "steps": 1.5}, ["steps", "integer"]), ({"tokens": DELETE, "steps": NAN}, ["steps"]),
    ({"steps": 100}, ["exactly one of 'tokens' and 'steps'"]), ({"tokens": DELETE}, ["exactly one"]),
    ({"deadline_h": -5}, ["job 'a'", "deadline_h", "-5"]), ({"deadline_h": 0}, ["deadline_h"]),
    ({"deadline_h": NAN}, ["deadline_h"]), ({"deadline_h": "soon"}, ["deadline_h", "soon"]),
    ({"arrival_h": -1}, ["job 'a'", "arrival_h", "-1"]), ({"arrival_h": INF}, ["arrival_h"]),
    ({"arrival_h": "later"}, ["arrival_h"]), ({"arrival_h": 5, "deadline_h": 3}, ["deadline_h must be after arrival_h"]),
    ({"arrival_h": 5, "deadline_h": 5}, ["deadline_h must be after arrival_h"]),
    ({"gpus": "lots"}, ["job 'a'", "unknown key 'gpus'"]), ({"deadlin_h": 3}, ["did you mean 'deadline_h'"]),
    ({"name": ["x"]}, ["job 1", "name"]), ({"name": 7}, ["job 1", "name"]),
    ({"framework": "nosuch"}, ["job 'a'", "unknown framework 'nosuch'"]), ({"framework": 3}, ["framework"]),
    ({"model": "nosuch"}, ["job 'a'", "unknown model 'nosuch'"]), ({"model": DELETE}, ["missing key 'model'"]),
    ({"model": 5}, ["job 'a'", "model"]),
    ({"model": {"n_layers": 2, "d_model": 100, "n_heads": 3}}, ["job 'a'", "divisible"]),
    ({"model": {"preset": "gpt3-125m", "n_layers": "many"}}, ["job 'a'", "n_layers"]),
]


@pytest.mark.parametrize("updates,needles", JOB_CASES)
def test_bad_job(capsys, tmp_path, updates, needles):
    rc, err = _run(capsys, tmp_path, "cluster-schedule", _jobs_file(tmp_path, updates))
    assert rc == 2
    for n in needles:
        assert n in err, (n, err)


TOP_CASES = [
    ({"gpus": "lots"}, ["gpus", "lots"]), ({"gpus": 0}, ["gpus", "0"]), ({"gpus": -16}, ["gpus"]),
    ({"gpus": 2.5}, ["gpus", "integer"]), ({"gpus": NAN}, ["gpus"]), ({"gpus": 2 ** 40}, ["gpus"]),
    ({"gpu": 5}, ["gpu"]), ({"gpu": "nosuch-gpu"}, ["nosuch-gpu"]), ({"framework": ["x"]}, ["framework"]),
    ({"gpus_total": 8}, ["unknown key 'gpus_total'"]), ({"jobs": []}, ["non-empty 'jobs' list"]),
    ({"jobs": "a"}, ["non-empty 'jobs' list"]), ({"jobs": [5]}, ["job 1", "expected a mapping"]),
    ({"jobs": [GOOD_JOB, GOOD_JOB]}, ["unique", "'a'"]),
]


@pytest.mark.parametrize("top,needles", TOP_CASES)
def test_bad_jobs_file_top_level(capsys, tmp_path, top, needles):
    rc, err = _run(capsys, tmp_path, "cluster-schedule", _jobs_file(tmp_path, top=top))
    assert rc == 2
    for n in needles:
        assert n in err, (n, err)


@pytest.mark.parametrize("content,needles", [
    (b"jobs:\n  - {name: \"\xff\", model: gpt3-125m, global_batch: 8, tokens: 1e9}\n", ["not UTF-8", "line 2"]),
    (b"\xfe\xfejobs: []\n", ["not UTF-8", "line 1"]),
    (b"jobs: [\n", ["malformed YAML"]), (b"", ["non-empty 'jobs' list"]), (b"- 1\n- 2\n", ["non-empty 'jobs' list"]),
])
def test_unreadable_jobs_file(capsys, tmp_path, content, needles):
    p = tmp_path / "jobs.yaml"
    p.write_bytes(content)
    rc, err = _run(capsys, tmp_path, "cluster-schedule", p)
    assert rc == 2 and "jobs file" in err
    for n in needles:
        assert n in err, (n, err)


@pytest.mark.parametrize("flag", ["0", "-4", str(2 ** 30)])
def test_cluster_gpus_flag(capsys, tmp_path, flag):
    rc, err = _run(capsys, tmp_path, "cluster-schedule", _jobs_file(tmp_path), "--gpus", flag)
    assert rc == 2 and "--gpus" in err


def test_missing_jobs_file(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "cluster-schedule", tmp_path / "none.yaml")
    assert rc == 2 and "cannot read" in err


def test_yaml_numbers_written_without_a_dot_are_numbers(tmp_path):
    """YAML 1.1 reads 2e9 as a string: a jobs file may still write tokens (and any number) that way."""
    p = _jobs_file(tmp_path, {"tokens": "2e9", "arrival_h": "0.5", "deadline_h": "1e2"})
    jobs, cluster = schedule.load_jobs(p)
    j = jobs[0]
    assert j.steps == pytest.approx(2e9 / (64 * j.model.seq_len)) and j.arrival_h == 0.5 and j.deadline_h == 100
    assert cluster["gpus"] == 8 and isinstance(cluster["gpus"], int)


@pytest.mark.parametrize("kw,needle", [
    ({"global_batch": 0}, "global_batch"), ({"global_batch": 2.5}, "global_batch"), ({"steps": 0}, "steps"),
    ({"steps": -1.0}, "steps"), ({"steps": NAN}, "steps"), ({"arrival_h": -1.0}, "arrival_h"),
    ({"deadline_h": -5.0}, "deadline_h"), ({"arrival_h": 2.0, "deadline_h": 1.0}, "deadline_h"),
])
def test_job_api_is_checked(kw, needle):
    m = models.load("gpt3-125m")
    base = {"name": "x", "model": m, "global_batch": 8, "steps": 10.0}
    with pytest.raises(InputError) as e:
        schedule.Job(**{**base, **kw})
    msg = str(e.value)
    assert "\n" not in msg and needle in msg and "'x'" in msg


def test_schedule_api_bounds_the_cluster():
    job = schedule.Job("x", models.load("gpt3-125m"), 8, 10.0)
    hw = hardware.load("a100-sxm4-80gb")
    for n in (0, 2.5, 2 ** 21):
        with pytest.raises(InputError, match="--gpus"):
            schedule.schedule([job], n, hw)
    with pytest.raises(InputError, match="at least one job"):
        schedule.schedule([], 8, hw)


# ---- plan ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args,needles", [
    (["--vocab", "0"], ["vocab", "0"]), (["--vocab", "-5"], ["vocab", "-5"]),      # were "budget too small"
    (["--seq-len", "0"], ["seq-len"]), (["--global-batch", "0"], ["global-batch"]),
    (["--gpus", "0"], ["gpus"]), (["--gpus", str(2 ** 21)], ["gpus"]),
    (["--tokens-per-param", "nan"], ["tokens-per-param"]), (["--framework", "nosuch"], ["unknown framework"]),
    (["--gpu-hour-price", "-1"], ["gpu-hour-price"]),
])
def test_plan_names_the_bad_input(capsys, tmp_path, args, needles):
    base = {"--gpus": "8", "--days": "30"}
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    rc, err = _run(capsys, tmp_path, "plan", *[x for kv in base.items() for x in kv])
    assert rc == 2 and "budget" not in err
    for n in needles:
        assert n in err, (n, err)


def test_plan_no_parallel_split(capsys, tmp_path):
    """100000 = 2^5 x 5^5 GPUs: dp | 1024 sequences takes at most 2^5, and no LLaMA-3-shaped size has
    5^5 | tp x pp (heads and layers are d/128 <= 512) nor cp | 4096: no split exists, whatever the budget."""
    rc, err = _run(capsys, tmp_path, "plan", "--gpus", "100000", "--days", "90")
    assert rc == 2 and "no parallel split of 100000 GPUs" in err and "budget" not in err


def test_plan_budget_too_small_is_still_the_budget(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "plan", "--gpus", "8", "--budget-gpu-hours", "1")
    assert rc == 2 and "budget of 1 GPU-hours is too small" in err


def test_plan_finds_a_split_beyond_the_smallest_size():
    """96 = 2^5 x 3 GPUs: the smallest size (d 512: 4 heads, 4 layers) has no split (dp | 1024 takes 32, the 3
    fits neither tp | 4 nor pp | 4 nor cp | 4096); d 1536 (12 heads, 12 layers) has one. The plan must start
    there instead of calling the budget too small (it did before issue 22)."""
    from roofline.spec.config import check
    from roofline.views.sizing import plan_budget

    r = plan_budget(hardware.load("h100-sxm"), 96, days=30)
    p = r.best.plan
    assert p.tp * p.pp * p.dp * p.cp == 96
    assert (p.tp * p.pp * p.cp) % 3 == 0 and r.model.n_heads % 3 == 0
    check(r.model, p)
    assert r.best.gpu_hours <= 30 * 24 * 96


# ---- formulas ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("item,needle", [
    ("tp=0", "--set tp"), ("pp=0", "--set pp"), ("dp=0", "--set dp"), ("micro_batch=0", "--set micro_batch"),
    ("n_layers=0", "--set n_layers"), ("seq_len=0", "--set seq_len"), ("sms=0", "--set sms"),
    ("tp=1.5", "integer"), ("n_heads=2.5", "integer"), ("gated=0.5", "--set gated"), ("rc_full=2", "--set rc_full"),
    ("ov_tp=1.5", "--set ov_tp"), ("eta_gemm_fwd=0", "--set eta_gemm_fwd"), ("mu_elem_bwd=1.2", "--set mu_elem_bwd"),
    ("clock=0", "--set clock"), ("clock=1.5", "--set clock"), ("peak=0", "--set peak"), ("hbm_bw=0", "--set hbm_bw"),
    ("bw_ar_intra=0", "--set bw_ar_intra"), ("capacity_factor=0", "--set capacity_factor"), ("tp=nan", "tp=nan"),
    ("tp=inf", "tp=inf"), ("tp=-2", "tp=-2"), ("tp=abc", "--set tp"), ("tp", "name=value"),
    ("nosuch=3", "unknown symbol"),
])
def test_formulas_bad_set(capsys, tmp_path, item, needle):
    """Refused before any formula is built (was: ValueError 'zoo is not comparable' for tp=0, 1.5 accepted)."""
    rc, err = _run(capsys, tmp_path, "formulas", "--quantity", "step_time", "--set", item)
    assert rc == 2 and needle in err, err


def test_formulas_unknown_quantity_is_refused_at_once(capsys, tmp_path):
    rc, err = _run(capsys, tmp_path, "formulas", "--quantity", "step_tim")
    assert rc == 2 and "unknown quantity 'step_tim'" in err


def test_check_value_accepts_the_edges():
    from roofline.model.formulas.export import check_value
    assert check_value("tp", 8.0) == 8 and isinstance(check_value("tp", 8.0), int)
    assert check_value("gated", 0) == 0 and check_value("ov_tp", 0.0) == 0 and check_value("ov_tp", 1) == 1
    assert check_value("clock", 1.0) == 1.0 and check_value("t0_gemm_fwd", 0) == 0


@pytest.mark.slow
def test_formulas_undefined_value_is_one_line(capsys, tmp_path):
    """A value inside its range that still divides by zero (the register-tile head dim in a denominator)."""
    rc, err = _run(capsys, tmp_path, "formulas", "--quantity", "step_time", "--set", "attn_dreg_fwd=0")
    assert rc == 2 and "undefined" in err and "attn_dreg_fwd=0" in err


@pytest.mark.slow
@pytest.mark.parametrize("name,plan", [
    ("gpt3-1.3b", dict(tp=2, pp=2, dp=2, micro_batch=2, global_batch=64)),
    ("mixtral-8x7b", dict(tp=2, pp=4, dp=8, ep=8, micro_batch=1, global_batch=256, recompute="full")),
])
def test_formulas_with_every_value_equal_the_compiled_model(name, plan):
    """The memoized substitution (no simplification of large results) gives the number the compiled numpy
    model gives for the same inputs: two implementations of the formulas agree to rounding. It runs in a fresh
    interpreter: after the other export tests, sympy's caches make the same substitution several times slower."""
    import json
    import subprocess
    import sys

    code = f"""
import json
from roofline import hardware, models
from roofline.spec.config import Plan
from roofline.model.formulas.export import expression
from roofline.model.formulas.symbols import hardware_defaults
from roofline.model.predict import evaluate, inputs
x = inputs(models.load({name!r}), Plan(**{plan!r}), hardware.load("a100-sxm4-80gb"))
ref = evaluate(x)      # the compiled model takes the hardware defaults a profile leaves out; so does `--gpu`
out = {{}}
for q in ("step_time", "mfu", "memory", "pp_bubble"):
    e = expression(q, {{**hardware_defaults(), **x}})
    out[q] = [sorted(map(str, e.free_symbols)), float(e) if not e.free_symbols else None, float(ref[q])]
print(json.dumps(out))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    for q, (free, value, ref) in json.loads(r.stdout.splitlines()[-1]).items():
        assert not free, (q, free)
        assert value == pytest.approx(ref, rel=1e-9), q


@pytest.mark.slow
def test_formulas_with_a_gpu_leave_only_model_and_plan_symbols(capsys, tmp_path):
    """`formulas --quantity step_time --gpu ...` (minutes before issue 22) substitutes every hardware value."""
    import json

    from roofline.model.formulas.symbols import SYMBOLS

    out = []
    rc, err = _run(capsys, tmp_path, "formulas", "--quantity", "step_time", "--gpu", "a100-sxm4-80gb",
                   "--format", "json", stdout=out)
    assert rc == 0, err
    d = json.loads(out[0])
    groups = {SYMBOLS[n].group for n in d["symbols"]}
    assert d["quantity"] == "step_time" and groups <= {"model", "plan"}, groups
    assert {"tp", "n_layers"} <= set(d["symbols"])
