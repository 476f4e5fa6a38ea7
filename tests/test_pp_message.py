"""The pipeline message per TP rank (formulas/step.py pp_message; plan pp_scatter_gather, per stack).

With SP the activation between stages is sequence-sharded and each TP rank sends its 1/t share; without SP
Megatron-Core sends the whole activation from every TP rank (pipeline_parallel/schedules.py get_tensor_shapes), while
Megatron-LM <= 3.x (scatter_gather_tensors_in_pipeline) and DeepSpeed's PipelineEngine (pipe_partitioned) send 1/t
and all-gather it over the TP group on arrival (Narayanan et al. 2021 sec 4.1).
"""
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.model.predict import evaluate, inputs
from roofline.spec import hardware, stacks
from roofline.spec.config import Model, Plan

A100 = hardware.load("a100-sxm4-80gb")
MODEL = Model(n_layers=16, d_model=4096, n_heads=32, vocab=51200, seq_len=2048, mlp="gelu", tied_embeddings=False)


def _pp_comm(plan, sp, scatter):
    """t_pp_comm with every latency and fixed call time at 0, so each term is bytes over bandwidth; the transfers
    per step and the message bytes as the model counts them."""
    x = inputs(MODEL, replace(plan, sequence_parallel=sp, pp_scatter_gather=scatter, overlap_pp=0.0), A100)
    x = {k: (0.0 if k.startswith(("alpha_", "call_")) else v) for k, v in x.items()}
    out = evaluate(x)
    m = plan.global_batch // (plan.micro_batch * plan.dp)
    transfers = 2 * (m * plan.interleave + plan.pp - 1)
    whole = 2 * plan.micro_batch * MODEL.seq_len * MODEL.d_model          # bf16 activation of one micro-batch
    return float(out["t_pp_comm"]), transfers, whole, x


@settings(max_examples=30, deadline=None)
@given(tp=st.sampled_from([2, 4, 8]), pp=st.sampled_from([2, 4]), mb=st.sampled_from([1, 2]), m=st.integers(1, 6),
       nodes_apart=st.booleans())
def test_megatron_core_sends_the_whole_activation_without_sp(tp, pp, mb, m, nodes_apart):
    dp = 8 if nodes_apart else 1                            # 2 t d > 8 GPUs: the neighbouring stage is on another node
    plan = Plan(tp=tp, pp=pp, dp=dp, micro_batch=mb, global_batch=mb * dp * m * pp, dtype="bf16")
    t_sp, n, whole, x = _pp_comm(plan, sp=True, scatter=False)
    t_whole, _, _, _ = _pp_comm(plan, sp=False, scatter=False)
    link = "intra" if 2 * tp * dp <= A100.gpus_per_node else "inter"
    assert t_sp == pytest.approx(n * whole / tp / x[f"bw_p2p_{link}"], rel=1e-9)
    assert t_whole == pytest.approx(tp * t_sp, rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(tp=st.sampled_from([2, 4, 8]), pp=st.sampled_from([2, 4, 8]), m=st.integers(1, 6))
def test_scatter_gather_sends_a_slice_and_gathers_it_over_the_tp_group(tp, pp, m):
    plan = Plan(tp=tp, pp=pp, dp=1, micro_batch=1, global_batch=m * pp, dtype="bf16")
    t_sp, n, whole, x = _pp_comm(plan, sp=True, scatter=False)
    t_sg, _, _, _ = _pp_comm(plan, sp=False, scatter=True)
    gather = (tp - 1) / tp * whole / x["bw_ag_intra"]         # nccl-tests all-gather: (t-1)/t of the output per rank
    assert t_sg == pytest.approx(t_sp + n * gather, rel=1e-9)
    # under SP the message is already the sequence shard: the switch changes nothing
    assert _pp_comm(plan, sp=True, scatter=True)[0] == pytest.approx(t_sp, rel=1e-12)


def test_without_tensor_parallelism_every_message_is_the_same():
    plan = Plan(tp=1, pp=4, dp=2, micro_batch=2, global_batch=32, dtype="bf16")
    times = {(sp, sg): _pp_comm(plan, sp, sg)[0] for sp in (False, True) for sg in (False, True)}
    assert len({round(t, 15) for t in times.values()}) == 1 and times[(False, False)] > 0


def test_the_stacks_that_scatter_and_those_that_do_not():
    for sid in ("megatron-lm-2021", "megatron-lm-2022", "megatron-deepspeed", "gpt-neox", "gpt-neox-2022"):
        st_ = stacks.get(sid)
        assert st_.plan["pp_scatter_gather"] is True, sid
        assert any(w in st_.sources["pp_scatter_gather"] for w in ("scatter-gather", "pipe_partitioned")), sid
    for sid in ("megatron-core", "torchtitan", "olmo-core", "nanotron", "fsdp"):
        assert not stacks.get(sid).plan.get("pp_scatter_gather", False), sid
