"""HSDP as a search knob (space.with_replicas; plan field dp_replicas): every sharded plan once with one copy of the
state over its dp x cp ranks and again with one shard group per node, on the stacks that replicate shard groups
(their rule ``replicas``); a pinned --dp-replicas keeps the plans it divides; a stack without HSDP refuses it."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from roofline.model.predict import predict
from roofline.spec import hardware, models, stacks
from roofline.spec.config import check
from roofline.views import search as SE
from roofline.views.space import with_replicas

H100 = hardware.load("h100-sxm")


@pytest.fixture(scope="module")
def space():
    return SE.evaluate_space(models.load("llama3-8b"), H100, 256, 256, framework="torchtitan", tp=[1, 2], pp=1)


def test_replicated_plans_shard_inside_one_node_and_price_as_predict(space):
    k = space.knobs
    r = k["dp_replicas"]
    assert (r > 1).any() and (r == 1).any()
    for i in np.flatnonzero(r > 1)[:40]:
        p = SE.plan_of(k, int(i), space.base, 256)
        check(space.model, p)                                   # the config rules hold (sharded, r | dp x cp)
        assert p.zero_stage > 0 and (p.dp * p.cp) // p.dp_replicas == H100.gpus_per_node // p.tp
        if space.fits[i]:
            assert predict(space.model, p, H100).raw["step_time"] == pytest.approx(space.out["step_time"][i],
                                                                                   rel=1e-9)


def test_every_replicated_plan_has_its_one_copy_twin(space):
    k = space.knobs
    fields = ("tp", "pp", "dp", "cp", "micro_batch", "interleave", "recompute", "sequence_parallel", "sharding",
              "recompute_fraction")
    plain = {tuple(k[f][i] for f in fields) for i in np.flatnonzero(k["dp_replicas"] == 1)}
    for i in np.flatnonzero(k["dp_replicas"] > 1):
        assert tuple(k[f][i] for f in fields) in plain


def test_replicas_cost_memory_the_replica_keeps_more_state(space):
    """A replica shards its copy over fewer ranks: never less memory per GPU than its one-copy twin."""
    k, mem = space.knobs, space.out["memory"]
    fields = ("tp", "pp", "dp", "cp", "micro_batch", "interleave", "recompute", "sequence_parallel", "sharding",
              "recompute_fraction")
    one = {tuple(k[f][i] for f in fields): mem[i] for i in np.flatnonzero(k["dp_replicas"] == 1)}
    rows = [i for i in np.flatnonzero(k["dp_replicas"] > 1) if np.isfinite(mem[i])]
    assert rows
    for i in rows:
        assert mem[i] >= one[tuple(k[f][i] for f in fields)] * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(sid=st.sampled_from(sorted(stacks.registry())), tp=st.sampled_from([1, 2, 4, 8]),
       dpcp=st.sampled_from([1, 2, 4, 8, 16, 64]), sharding=st.integers(0, 3), gpn=st.sampled_from([4, 8, 72]))
def test_with_replicas_keeps_the_stacks_rule(sid, tp, dpcp, sharding, gpn):
    stack = stacks.get(sid)
    knobs = {"tp": np.array([tp]), "dp": np.array([dpcp]), "cp": np.array([1]), "sharding": np.array([sharding])}
    out, added = with_replicas(knobs, gpn, stack)
    r = out["dp_replicas"]
    assert r[0] == 1 and len(r) == 1 + added
    if added:
        assert stack.rule("replicas", False) and sharding > 0
        assert dpcp % r[1] == 0 and dpcp // r[1] == gpn // tp and r[1] > 1


def test_a_pinned_count_keeps_the_plans_it_divides(cli_main):
    base = ("search", "--model", "llama3-8b", "--gpus", "512", "--global-batch", "512", "--gpu", "h100-sxm",
            "--framework", "torchtitan", "--tp", "1", "--pp", "1", "--cp", "1", "--top", "3")
    r = cli_main(*base, "--dp-replicas", "64")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if "zero3" in ln]
    assert rows and all("hsdp=64" in ln for ln in rows)
    r = cli_main(*base, "--dp-replicas", "7")
    assert r.returncode == 2 and r.stdout == "" and "dp-replicas 7" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_stack_without_hsdp_refuses_it_in_one_line(cli_main):
    r = cli_main("search", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "64", "--gpu", "h100-sxm",
                 "--framework", "deepspeed-zero-2021", "--dp-replicas", "8")
    assert r.returncode == 2 and r.stdout == ""
    assert "deepspeed-zero-2021" in r.stderr and "replicated shard groups" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
