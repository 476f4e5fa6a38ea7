"""``transformer --gpus N`` and ``run-cost --gpus N``: the GPU count, from which the resolver derives dp when --dp is
not given (the same rule as search's --gpus and the validation rows' n_gpus, spec/resolve.py); a --dp that
disagrees, or a count that tp x pp x cp does not divide, is one line and exit 2."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st


def _json(cli_main, *args):
    r = cli_main("transformer", "--model", "gpt3-1.3b", "--gpu", "a100-sxm4-80gb", "--global-batch", 512,
                 "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])   # cli_main clears its capture per call
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2, 4, 16]))
def test_gpus_gives_the_plan_that_dp_gives(cli_main, tp, pp, dp):
    """--gpus N without --dp is the plan --dp N/(tp pp) states: the same step time, the same GPU count."""
    n = tp * pp * dp
    by_gpus = _json(cli_main, "--tp", tp, "--pp", pp, "--gpus", n)
    by_dp = _json(cli_main, "--tp", tp, "--pp", pp, "--dp", dp)
    assert by_gpus["spec"]["plan"]["dp"] == dp
    assert by_gpus["n_gpus"] == n
    assert by_gpus["step_time_s"] == pytest.approx(by_dp["step_time_s"], rel=1e-12)


def test_gpus_agreeing_with_dp_is_accepted(cli_main):
    assert _json(cli_main, "--tp", 2, "--dp", 4, "--gpus", 8)["spec"]["plan"]["dp"] == 4


@pytest.mark.parametrize("args, words", [
    (("--tp", 2, "--dp", 4, "--gpus", 16), ("n_gpus (16)", "2*1*4*1")),
    (("--tp", 8, "--gpus", 12), ("n_gpus (12)", "not divisible", "(8)")),
    (("--gpus", 0), ("--gpus", "'0'")),
    (("--gpus", "eight"), ("--gpus", "'eight'")),
])
def test_bad_gpu_counts_are_one_line(cli_main, args, words):
    r = cli_main("transformer", "--model", "gpt3-1.3b", "--global-batch", 512, *args)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_run_cost_reads_gpus(cli_main):
    r = cli_main("run-cost", "--model", "gpt3-1.3b", "--gpu", "a100-sxm4-80gb", "--global-batch", 512,
                 "--tp", 2, "--gpus", 16, "--tokens", 1e9, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["n_gpus"] == 16 and d["partition"]["dp"] == 8 and d["partition"]["tp"] == 2
