"""Multi-tenant cluster scheduling: greedy policy vs equal split."""
import json
import subprocess
import sys

import pytest

from roofline.views import cluster_schedule as schedule
from roofline.spec import hardware
from roofline.base.errors import InputError

JOBS = """
gpu: a100-sxm4-80gb
gpus: 16
jobs:
  - {name: small, model: gpt3-125m, global_batch: 64, tokens: 2e9}
  - {name: medium, model: gpt3-350m, global_batch: 64, tokens: 2e9}
  - {name: large, model: gpt3-1.3b, global_batch: 128, tokens: 2e9, deadline_h: 100}
  - {name: late, model: gpt3-125m, global_batch: 64, tokens: 1e9, arrival_h: 0.5}
"""


@pytest.fixture
def jobs_file(tmp_path):
    p = tmp_path / "jobs.yaml"
    p.write_text(JOBS)
    return p


def test_greedy_beats_equal_split_and_never_oversubscribes(jobs_file):
    jobs, cluster = schedule.load_jobs(jobs_file)
    hw = hardware.load(cluster["gpu"])
    greedy, equal = schedule.schedule(jobs, 16, hw)
    assert all(p.plan is not None for p in greedy.placements + equal.placements)
    assert greedy.avg_jct_h <= equal.avg_jct_h * (1 + 1e-9)
    for p in greedy.placements:
        assert p.start_h >= p.arrival_h and p.plan.n_gpus == p.gpus
    # at every start, the running jobs fit in the cluster
    for p in greedy.placements:
        t = p.start_h
        busy = sum(q.gpus for q in greedy.placements if q.start_h <= t < q.end_h)
        assert busy <= 16
    assert equal.placements[0].gpus == 4
    met, n = greedy.deadlines
    assert n == 1


def test_best_option_is_fastest_fitting_plan():
    hw = hardware.load("a100-sxm4-80gb")
    from roofline.spec import models
    job = schedule.Job("x", models.load("gpt3-350m"), 32, 100)
    one, eight = schedule.best_option(job, 1, hw), schedule.best_option(job, 8, hw)
    assert one and eight and eight.hours < one.hours
    assert schedule.best_option(job, 3, hw) is None           # dp 3 cannot split a batch of 32


def test_cli_prints_both_policies(jobs_file, cli_main):
    r = subprocess.run([sys.executable, "-m", "roofline", "cluster-schedule", str(jobs_file), "--gpus", "16"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "policy: greedy" in r.stdout and "policy: equal split" in r.stdout and "average completion" in r.stdout
    r = cli_main("cluster-schedule", jobs_file, "--json")      # in-process (the real entry point ran above)
    d = json.loads(r.stdout)
    assert set(d) == {"greedy", "equal_split"} and len(d["greedy"]["jobs"]) == 4


def test_bad_job_key(tmp_path):
    p = tmp_path / "j.yaml"
    p.write_text("jobs:\n  - {name: a, model: gpt3-125m, global_batch: 8, tokens: 1e9, gpus: 4}\n")
    with pytest.raises(InputError, match="unknown key 'gpus'"):
        schedule.load_jobs(p)
