"""The Levanter stack (stanford-crfm/levanter: JAX + Haliax, FSDP over a named mesh, optional TP, no pipeline)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import InputError
from roofline.model.predict import predict
from roofline.spec import stacks
from roofline.spec.resolve import resolve

GPU = "a100-sxm4-80gb"


def test_levanter_defaults_are_bf16_compute_fsdp_with_whole_layer_checkpointing():
    spec = resolve("llama2-7b", {"dp": 8, "global_batch": 64}, GPU, "levanter")
    p = spec.plan
    # trainer.mp p=f32,c=bfloat16; fsdp_axis 'embed'; gradient_checkpointing True (ScanCheckpointPolicy simple)
    assert (p.dtype, p.grad_dtype, p.master_weights, p.sharding, p.recompute) == ("bf16", "bf16", True, "fsdp", "full")
    # per_device_parallelism -1: train_batch_size / data_axis_size, one micro-batch per step
    assert p.micro_batch == 8
    # one jit-compiled XLA step: fused element-wise ops and loss, in-place collectives, no host issue time
    assert (p.loss_kernel, p.cuda_graphs, p.eager_elementwise, p.fsdp_copies, p.wgrad_fusion) == (
        "compiled", "full", False, False, False)
    # pipelined reduce-scatter behind the backward; the scanned layers' all-gathers not prefetched
    assert (p.overlap_grad_reduce, p.overlap_param_gather, p.overlap_tp) == (1.0, 0.0, 0.0)
    assert not p.sequence_parallel and not p.per_expert_kernels
    # AttentionBackend.NVTE on GPU: Transformer Engine's cuDNN fused attention
    assert spec.model.attention == "cudnn"
    assert spec.stack.id == "levanter"


@pytest.mark.parametrize("text", [
    "Levanter (stanford-crfm/levanter), Llama-2 7B on 8x A100-SXM4-80GB, FSDP, 2024",
    "Marin 8B base, trained in Levanter (JAX), throughput on H100s, 2025",
    "our JAX trainer written with Haliax named tensors",
])
def test_a_source_naming_levanter_or_haliax_infers_the_stack(text):
    stack, why = stacks.infer("", text)
    assert stack.id == "levanter" and "names" in why


def test_a_levanter_framework_column_is_the_stack_not_the_era_rule():
    stack, why = stacks.infer(column="Levanter", dtype="bf16")
    assert stack.id == "levanter" and "era rule" not in why
    assert stacks.get("stanford-crfm/levanter").id == stacks.get("haliax").id == "levanter"


def test_names_that_only_contain_the_word_are_not_levanter():
    assert stacks.names_stack("Levanter") and stacks.names_stack("Haliax")
    assert not stacks.names_stack("levanters") and not stacks.names_stack("levanterish")
    assert stacks.infer("", "levanters, 2024")[0].id != "levanter"


@pytest.mark.parametrize("plan, message", [
    ({"pp": 2, "dp": 4}, "stack levanter has no pipeline parallelism (pp 2)"),
    ({"cp": 2, "dp": 4}, "stack levanter has no context parallelism (cp 2)"),
    ({"dp": 8, "sharding": "distributed"}, "stack levanter cannot run sharding 'distributed'"),
    ({"dp": 8, "recompute": "selective"}, "stack levanter cannot run recompute 'selective'"),
    ({"dp": 8, "dtype": "fp16"}, "stack levanter cannot train in fp16"),
    ({"tp": 2, "dp": 4, "sequence_parallel": True}, "stack levanter has no sequence parallelism"),
])
def test_what_levanter_cannot_run_is_refused_in_one_line(plan, message):
    with pytest.raises(InputError) as e:
        resolve("llama2-7b", {**plan, "global_batch": 64}, GPU, "levanter")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@settings(max_examples=15, deadline=None)
@given(dp=st.sampled_from([1, 2, 4, 8]), tp=st.sampled_from([1, 2]), per_rank=st.integers(1, 6))
def test_unstated_micro_batch_is_the_whole_local_batch(dp, tp, per_rank):
    """per_device_parallelism -1 (TrainerConfig default): each data rank runs its global_batch / dp sequences in one
    forward and backward, whatever the TP size; a stated micro-batch is kept."""
    plan = {"dp": dp, "tp": tp, "global_batch": per_rank * dp}
    assert resolve("llama2-7b", plan, GPU, "levanter").plan.micro_batch == per_rank
    assert resolve("llama2-7b", {**plan, "micro_batch": 1}, GPU, "levanter").plan.micro_batch == 1


@settings(max_examples=8, deadline=None)
@given(pp=st.integers(2, 8), dp=st.sampled_from([1, 2, 4]))
def test_any_pipeline_is_refused(pp, dp):
    with pytest.raises(InputError, match=rf"stack levanter has no pipeline parallelism \(pp {pp}\)"):
        resolve("llama2-7b", {"pp": pp, "dp": dp, "global_batch": 8 * dp}, GPU, "levanter")


def test_the_exposed_parameter_gather_costs_time_at_scale():
    """With the scanned layers' all-gathers not prefetched (overlap_param_gather 0), the step is slower than the same
    plan priced with them hidden; at one rank there is nothing to gather and the two agree."""
    def step(dp, **kw):
        plan = {"dp": dp, "global_batch": 2 * dp, **kw}
        return predict(resolve("llama2-7b", plan, GPU, "levanter")).raw["step_time"]
    assert step(8) > step(8, overlap_param_gather=1.0)
    assert step(1) == pytest.approx(step(1, overlap_param_gather=1.0), rel=1e-12)
