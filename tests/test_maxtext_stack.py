"""MaxText (JAX/XLA) as a registry stack: what a MaxText run means when it states only its sizes, what it cannot run,
and GPipe pipelines priced as no pipeline at pp 1 (stacks/maxtext.yaml)."""
import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from roofline import hardware, models
from roofline.base.errors import InputError
from roofline.model.predict import predict
from roofline.spec import stacks
from roofline.spec.resolve import resolve
from roofline.views import validate as V
from roofline.views.search import search


def _spec(**plan):
    base = dict(dp=16, micro_batch=1, global_batch=64)
    base.update(plan)
    return resolve("llama2-7b", base, "h100-sxm", "maxtext")


@pytest.mark.parametrize("column", ["MaxText", "maxtext (JAX)", "NVIDIA DGXC MaxText 25.04"])
def test_a_maxtext_column_names_the_stack(column):
    assert stacks.infer(column=column, dtype="bf16")[0].id == "maxtext"


def test_defaults_are_maxtexts_and_differ_from_megatron_core():
    """base.yml: FSDP, full remat; XLA: fused element-wise ops and loss, no per-op host issue; cuDNN attention."""
    s = _spec()
    assert (s.plan.sharding, s.plan.recompute, s.plan.loss_kernel, s.plan.cuda_graphs) == \
        ("fsdp", "full", "compiled", "full")
    assert not s.plan.eager_elementwise and s.model.attention == "cudnn" and not s.model.dropout
    assert all(s.origin[k] == "stack maxtext" for k in ("sharding", "recompute", "cuda_graphs"))
    mc = resolve("llama2-7b", dict(dp=16, micro_batch=1, global_batch=64), "h100-sxm", "megatron-core")
    assert (mc.plan.sharding, mc.plan.recompute, mc.plan.cuda_graphs) != (s.plan.sharding, s.plan.recompute,
                                                                          s.plan.cuda_graphs)


def test_no_host_issue_time_under_xla():
    """One compiled executable: the host issue time the eager stacks pay is gone (priced as a full-iteration graph)."""
    xla = predict(_spec())
    eager = predict(_spec(cuda_graphs="none"))
    assert xla.breakdown["host_overhead"].magnitude == 0
    assert eager.step_time >= xla.step_time


def test_pipelines_are_gpipe_and_interleaving_and_ring_cp_are_refused():
    s = _spec(pp=2, dp=8)
    assert s.plan.schedule == "gpipe" and s.origin["schedule"].startswith("rule: maxtext runs gpipe")
    with pytest.raises(InputError, match="stack maxtext cannot run the interleaved pipeline schedule"):
        _spec(pp=2, dp=8, interleave=2)
    with pytest.raises(InputError, match="stack maxtext has no context parallelism"):
        _spec(cp=2, dp=8)
    with pytest.raises(InputError, match="stack maxtext cannot run recompute 'selective'"):
        _spec(recompute="selective")


@settings(max_examples=25, deadline=None)
@given(mb=st.sampled_from([1, 2, 4]), accum=st.sampled_from([1, 2, 4, 8]), sharding=st.sampled_from(["none", "fsdp"]))
def test_gpipe_without_stages_is_no_pipeline(mb, accum, sharding):
    """At pp 1 a GPipe label changes nothing: each micro-batch runs forward and backward in turn (memory and time as
    1F1B), so a stack whose pipelines are GPipe prices its pp 1 runs as every other stack does."""
    plan = dict(dp=8, micro_batch=mb, global_batch=8 * mb * accum, sharding=sharding)
    a = predict(resolve("llama2-7b", {**plan, "schedule": "gpipe"}, "h100-sxm", "torchtitan"))
    b = predict(resolve("llama2-7b", {**plan, "schedule": "1f1b"}, "h100-sxm", "torchtitan"))
    assert a.step_time == b.step_time and a.memory == b.memory


def test_gpipe_holds_more_than_1f1b_with_stages():
    """With stages GPipe holds every micro-batch's activations (the check above is not vacuous)."""
    plan = dict(dp=4, pp=2, micro_batch=1, global_batch=32, recompute="none")
    a = predict(resolve("llama2-7b", {**plan, "schedule": "gpipe"}, "h100-sxm", "torchtitan"))
    b = predict(resolve("llama2-7b", {**plan, "schedule": "1f1b"}, "h100-sxm", "torchtitan"))
    assert a.memory["total"] > b.memory["total"]


def test_search_returns_plans_maxtext_runs():
    """Every plan of a MaxText search is one the stack runs: GPipe where pipelined, no interleave, no context
    parallelism, a sharding MaxText has."""
    m, hw = models.load("llama2-7b"), hardware.load("h100-sxm")
    best = search(m, hw, 64, 256, top=40, framework="maxtext") + search(m, hw, 64, 256, top=10, framework="maxtext", pp=2)
    assert any(c.plan.pp == 2 for c in best)
    for c in best:
        p = c.plan
        assert p.cp == 1 and p.interleave == 1 and p.zero_stage in (0, 1, 3), p
        assert p.pp == 1 or p.schedule == "gpipe", p
        resolve("llama2-7b", dataclasses.asdict(p), "h100-sxm", "maxtext")     # the stack accepts it


def test_a_validate_row_naming_maxtext_is_priced_on_it():
    row = {"case_id": "mt", "framework": "MaxText", "gpu_id": "h100-sxm", "model": "llama2-70b", "n_layers": "80",
           "d_model": "8192", "n_heads": "64", "n_kv_heads": "8", "ffn_hidden": "28672", "vocab": "32000",
           "seq_len": "4096", "global_batch": "128", "micro_batch": "2", "tp": "1", "pp": "1", "dp": "64",
           "optimizer_sharding": "fsdp", "precision": "bf16", "gpus_per_node": "8", "measured_iter_time_s": "8"}
    case = V.build_case(V.read_dicts([row])[0])
    assert case.spec.stack.id == "maxtext" and case.plan.recompute == "full" and case.plan.cuda_graphs == "full"
