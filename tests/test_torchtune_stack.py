"""The torchtune stack (pure bf16 FSDP2 fine-tuning) and the plan field it needs: no fp32 master copy of the weights."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import InputError
from roofline.model.predict import predict
from roofline.spec import stacks
from roofline.spec.resolve import resolve


@settings(max_examples=12, deadline=None)
@given(dp=st.sampled_from([1, 4, 8]), sharding=st.sampled_from(["none", "fsdp"]),
       moments=st.sampled_from(["fp32", "bf16"]))
def test_no_master_copy_saves_four_bytes_per_parameter_of_optimizer_state(dp, sharding, moments):
    """Without the fp32 master copy the optimizer state per parameter is the two moments alone; with it, four bytes
    more, sharded as the rest of the state is; nothing else in memory changes."""
    plan = {"dp": dp, "global_batch": 2 * dp, "sharding": sharding if dp > 1 else "none", "moment_dtype": moments,
            "recompute": "full"}
    pure = predict(resolve("llama3.2-1b", {**plan, "master_weights": False}, "a100-sxm4-80gb", "torchtune"))
    mixed = predict(resolve("llama3.2-1b", {**plan, "master_weights": True}, "a100-sxm4-80gb", "torchtune"))
    moment = {"fp32": 4, "bf16": 2}[moments]
    ratio = pure.raw["mem_optimizer"] / mixed.raw["mem_optimizer"]
    assert ratio == pytest.approx(2 * moment / (4 + 2 * moment), rel=1e-9)
    for k in ("mem_weights", "mem_gradients", "mem_activations"):
        assert pure.raw[k] == mixed.raw[k]
    assert pure.raw["step_time"] <= mixed.raw["step_time"]        # the optimizer reads and writes less


def test_the_stacks_with_a_master_copy_refuse_to_drop_it():
    with pytest.raises(InputError, match="stack torchtitan keeps an fp32 master copy") as e:
        resolve("llama3.2-1b", {"dp": 8, "global_batch": 16, "master_weights": False}, "a100-sxm4-80gb", "torchtitan")
    assert "\n" not in str(e.value)


def test_torchtune_defaults_are_pure_bf16_fsdp2_with_whole_layer_checkpointing():
    spec = resolve("llama3.2-1b", {"dp": 8, "global_batch": 16}, "a100-sxm4-80gb", "torchtune")
    p = spec.plan
    assert (p.master_weights, p.grad_dtype, p.moment_dtype, p.sharding, p.recompute) == (False, "bf16", "bf16",
                                                                                           "fsdp", "full")
    assert p.micro_batch == 2 and p.fsdp_copies
    assert stacks.infer("torchtune full_finetune_distributed, 8x A100")[0].id == "torchtune"


def test_torchtune_has_no_pipeline():
    with pytest.raises(InputError, match="stack torchtune has no pipeline parallelism"):
        resolve("llama3.2-1b", {"pp": 2, "dp": 4, "global_batch": 16}, "a100-sxm4-80gb", "torchtune")


@pytest.mark.parametrize("stack", ["torchtune", "torchtitan"])
def test_fsdp2_copies_only_where_fully_shard_shards(stack):
    """One data-parallel rank: the stacks do not apply fully_shard (nothing to shard), so no copy-in/copy-out kernels;
    at two ranks the copies cost time (formulas/step.py fsdp_copies)."""
    def step(dp, **kw):
        plan = {"dp": dp, "micro_batch": 2, "global_batch": 2 * dp, "recompute": "full", "sharding": "fsdp", **kw}
        return predict(resolve("llama3.2-1b", plan, "a100-sxm4-80gb", stack)).raw
    one, one_plain = step(1), step(1, sharding="none")
    assert one["step_time"] == pytest.approx(one_plain["step_time"], rel=1e-12) and one["t_dp_comm"] == 0
    assert step(2)["step_time"] > step(2, fsdp_copies=False)["step_time"]
