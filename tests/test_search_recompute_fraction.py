"""Full recomputation of a share of the layers as a search knob (space.with_recompute_fraction; plan field
recompute_fraction): a fully recomputing plan is tried again at the shares its stack can state (Megatron's block
method: whole layers of a pipeline chunk; torchtitan / OLMo-core: one block in n), never on a stack without such a
mode, and a stated --recompute full keeps whole-model recomputation."""
from __future__ import annotations

import numpy as np
import pytest

from roofline.model.predict import predict
from roofline.spec import hardware, models
from roofline.spec.config import RECOMPUTE, check
from roofline.views import search as SE
from roofline.views.space import EVERY_NTH, PARTIAL_SHARES

H100 = hardware.load("h100-sxm")
FULL = RECOMPUTE.index("full")
TWIN = ("tp", "pp", "dp", "cp", "micro_batch", "interleave", "sequence_parallel", "sharding", "dp_replicas")


def _space(framework, **pins):
    return SE.evaluate_space(models.load("llama3-70b"), H100, 64, 128, framework=framework, **pins)


@pytest.fixture(scope="module")
def mcore():
    return _space("megatron-core", tp=[4, 8], recompute="full")


def test_megatron_shares_are_whole_layers_of_a_chunk(mcore):
    k, m = mcore.knobs, mcore.model
    part = np.flatnonzero(k["recompute_fraction"] < 1)
    assert len(part)
    for i in part[:60]:
        assert k["recompute"][i] == FULL
        chunk = m.n_layers / (k["pp"][i] * k["interleave"][i])
        layers = k["recompute_fraction"][i] * chunk
        assert layers == pytest.approx(round(layers)) and 1 <= round(layers) < chunk
        p = SE.plan_of(k, int(i), mcore.base, 128)
        check(m, p)
        if mcore.fits[i]:
            assert predict(m, p, H100).raw["step_time"] == pytest.approx(mcore.out["step_time"][i], rel=1e-9)


def test_a_share_costs_less_time_and_more_memory_than_every_layer(mcore):
    k, out = mcore.knobs, mcore.out
    whole = {tuple(k[f][i] for f in TWIN): i for i in np.flatnonzero(k["recompute_fraction"] == 1)}
    checked = 0
    for i in np.flatnonzero(k["recompute_fraction"] < 1):
        j = whole[tuple(k[f][i] for f in TWIN)]
        assert out["memory"][i] >= out["memory"][j] * (1 - 1e-12)
        if mcore.fits[i] and mcore.fits[j]:
            assert out["step_time"][i] <= out["step_time"][j] * (1 + 1e-12)
            checked += 1
    assert checked


def test_torchtitan_recomputes_one_block_in_n():
    sp = _space("torchtitan", tp=[4, 8], pp=1)
    shares = set(np.round(sp.knobs["recompute_fraction"][sp.knobs["recompute_fraction"] < 1], 9))
    assert shares and shares <= {round(1 / n, 9) for n in EVERY_NTH}


def test_a_stack_without_partial_recomputation_gets_no_share():
    sp = _space("deepspeed-zero", tp=[4, 8], pp=1)
    assert (sp.knobs["recompute_fraction"] == 1).all()


def test_a_stated_full_recomputation_keeps_every_layer(cli_main):
    base = ("search", "--model", "llama3-70b", "--gpus", "64", "--global-batch", "128", "--gpu", "h100-sxm",
            "--top", "5")
    r = cli_main(*base, "--recompute", "full")
    assert r.returncode == 0, r.stderr
    assert "rc=full(" not in r.stdout and "rc=full" in r.stdout
    r = cli_main(*base, "--recompute", "full", "--recompute-fraction", "0.25")
    assert r.returncode == 0 and "rc=full(0.25)" in r.stdout
    r = cli_main(*base, "--framework", "deepspeed-zero", "--recompute", "full", "--recompute-fraction", "0.25")
    assert r.returncode == 2 and r.stdout == "" and "whole models only" in r.stderr


def test_the_shares_tried_are_the_documented_ones():
    assert PARTIAL_SHARES == (0.25, 0.5, 0.75) and EVERY_NTH == (2, 3, 4)
