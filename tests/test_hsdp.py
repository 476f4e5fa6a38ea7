"""Replicas of the sharded state (plan dp_replicas: HSDP, Megatron-Core --num-distributed-optimizer-instances).

The dp x cp ranks form r groups; each shards one copy of what the ZeRO stage shards over its d c / r ranks, and the
shards are all-reduced across the groups (torch FSDP2 foreach_reduce: reduce-scatter, then all-reduce over the
replicate group)."""
import csv

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.base.errors import InputError
from roofline.model.predict import evaluate, inputs, predict
from roofline.spec import hardware
from roofline.spec.config import Model, Plan, check
from roofline.views import validate as V

H100 = hardware.load("h100-sxm")
MODEL = Model(n_layers=8, d_model=2048, n_heads=16, vocab=32000, seq_len=2048, mlp="swiglu")


def _mem(plan):
    return predict(MODEL, plan, H100).to_dict()["memory_per_gpu_bytes"]


@pytest.mark.parametrize("sharding", ["distributed", "zero2", "fsdp"])
@pytest.mark.parametrize("r", [2, 4, 16])
def test_each_replica_shards_one_copy(sharding, r):
    """The sharded states per GPU grow r-fold: the optimizer state always, gradients from ZeRO-2, weights at ZeRO-3."""
    one = _mem(Plan(tp=1, pp=1, dp=16, micro_batch=1, global_batch=32, sharding=sharding))
    rep = _mem(Plan(tp=1, pp=1, dp=16, micro_batch=1, global_batch=32, sharding=sharding, dp_replicas=r))
    assert rep["optimizer"] == pytest.approx(r * one["optimizer"], rel=1e-9)
    if sharding == "fsdp":
        assert rep["weights"] == pytest.approx(r * one["weights"], rel=1e-9)


@settings(max_examples=20, deadline=None)
@given(dp=st.sampled_from([2, 4, 8, 16, 32]), grad=st.sampled_from(["bf16", "fp32"]))
def test_one_rank_per_replica_is_plain_data_parallelism(dp, grad):
    """r = dp x cp: every replica is one rank, so the reduce-scatter and the gather vanish and the replica all-reduce
    of the whole gradient is plain DDP's all-reduce."""
    base = dict(tp=1, pp=1, dp=dp, micro_batch=1, global_batch=2 * dp, grad_dtype=grad)
    ddp = evaluate(inputs(MODEL, Plan(**base, sharding="none"), H100))
    rep = evaluate(inputs(MODEL, Plan(**base, sharding="distributed", dp_replicas=dp), H100))
    assert float(rep["dp_comm_total"]) == pytest.approx(float(ddp["dp_comm_total"]), rel=1e-9)


def test_replicas_must_divide_the_group_and_need_a_sharded_state():
    with pytest.raises(InputError, match=r"dp-replicas \(3\) must divide dp x cp \(8 x 1\)"):
        check(MODEL, Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, sharding="fsdp", dp_replicas=3))
    with pytest.raises(InputError, match=r"dp-replicas \(2\) needs a sharded state"):
        check(MODEL, Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, sharding="none", dp_replicas=2))


def _rows(tmp_path, rows):
    path = tmp_path / "runs.csv"
    base = dict(case_id="", source="x", framework="OLMo-core", model="OLMo-2 7B", seq_len=4096, n_gpus=64,
                gpu="NVIDIA H100", micro_batch=2, global_batch=1024, tokens_per_s_per_gpu=9500,
                optimizer_sharding="", recompute="none", precision="BF16", settings="torch.compile", notes="", tier="B")
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(base))
        w.writeheader()
        for r in rows:
            w.writerow({**base, **r})
    return V.validate(V.read(path))


def test_validate_reads_hsdp_and_its_stated_replicas(tmp_path):
    """'HSDP' alone: one replica per node (OLMo-core's default); a stated count (num_replicas, Megatron-Core's
    num_distributed_optimizer_instances, torchtitan's dp_replicate) is taken when it divides dp x cp, else said."""
    res = _rows(tmp_path, [dict(case_id="fsdp", optimizer_sharding="FSDP"),
                           dict(case_id="hsdp", optimizer_sharding="HSDP"),
                           dict(case_id="four", notes="HSDP, num_replicas=4"),
                           dict(case_id="mcore", notes="num_distributed_optimizer_instances=2"),
                           dict(case_id="bad", notes="num_replicas=5")])
    got = {c["case_id"]: c for c in res["cases"]}
    assert not res["skipped"]
    assert "one replica per node, 8 replicas" in got["hsdp"]["note"]
    assert "4 replicas of the sharded state from the text" in got["four"]["note"]
    assert "2 replicas" in got["mcore"]["note"]
    assert "does not divide dp x cp = 64" in got["bad"]["note"]
    assert got["bad"]["predicted_s"] == pytest.approx(got["fsdp"]["predicted_s"])
    assert len({round(got[k]["predicted_s"], 9) for k in ("fsdp", "hsdp", "four")}) == 3
