"""Colossal-AI as a registry stack (stacks/colossalai.yaml): what a Colossal-AI run means when it states only its
sizes (the llama benchmark's Gemini plugin: chunked ZeRO-3, unprefetched parameter gathers, whole-layer checkpointing,
eager Hugging Face element-wise ops), and what its plugins cannot run."""
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


def _spec(model="llama2-7b", gpu="h100-sxm", **plan):
    base = dict(dp=16, global_batch=64)
    base.update(plan)
    return resolve(model, base, gpu, "colossalai")


@pytest.mark.parametrize("column", ["Colossal-AI", "ColossalAI 0.4.9", "colossal ai (Gemini)"])
def test_a_colossalai_column_names_the_stack(column):
    assert stacks.infer(column=column, dtype="bf16")[0].id == "colossalai"


def test_defaults_are_the_benchmarks_and_differ_from_megatron_core():
    """benchmark.py: Gemini (ZeRO-3), -g (whole layers checkpointed), bf16; bf16 gradients; eager element-wise ops
    and loss; the rank's whole batch as one micro-batch."""
    s = _spec()
    assert (s.plan.sharding, s.plan.recompute, s.plan.grad_dtype, s.plan.loss_kernel) == ("zero3", "full", "bf16", "eager")
    assert s.plan.eager_elementwise and s.plan.overlap_param_gather == 0 and s.plan.overlap_grad_reduce == 1
    assert s.plan.micro_batch == 4 and s.origin["micro_batch"].startswith("rule: colossalai accumulates no gradients")
    assert all(s.origin[k] == "stack colossalai" for k in ("sharding", "recompute", "overlap_param_gather"))
    mc = resolve("llama2-7b", dict(dp=16, global_batch=64), "h100-sxm", "megatron-core")
    assert (mc.plan.sharding, mc.plan.recompute) != (s.plan.sharding, s.plan.recompute)


def test_unprefetched_gathers_cost_time():
    """Gemini gathers each parameter chunk when it is first touched (max_prefetch 0): exposed, so the same plan with
    the gathers overlapped is faster, and a replicated plan pays no gather at all."""
    plain = predict(_spec(dp=64, global_batch=64, gpu="a100-sxm4-80gb"))
    hidden = predict(_spec(dp=64, global_batch=64, gpu="a100-sxm4-80gb", overlap_param_gather=1.0))
    assert hidden.step_time < plain.step_time


def test_pipelines_take_zero_1_at_most_and_no_gpipe():
    s = _spec(pp=2, dp=8, sharding="zero1", micro_batch=1)
    assert s.plan.schedule == "1f1b"
    with pytest.raises(InputError, match="zero"):
        _spec(pp=2, dp=8, sharding="zero2", micro_batch=1)
    with pytest.raises(InputError, match="stack colossalai cannot run the gpipe pipeline schedule"):
        _spec(pp=2, dp=8, sharding="zero1", micro_batch=1, schedule="gpipe")
    with pytest.raises(InputError, match="stack colossalai cannot run recompute 'selective'"):
        _spec(recompute="selective")
    assert _spec(pp=2, dp=8, sharding="zero1", micro_batch=1, interleave=2).plan.interleave == 2


@settings(max_examples=20, deadline=None)
@given(sharding=st.sampled_from(["none", "zero1", "zero2", "zero3"]), dp=st.sampled_from([2, 8, 32]))
def test_bf16_gradients_move_half_the_bytes_of_fp32(sharding, dp):
    """The ZeRO optimizers reduce gradients in the plugin's precision: the gradient reduction of a Colossal-AI plan
    moves half the bytes of the same plan with fp32 gradients; the parameter gathers (ZeRO-3 gathers again in
    backward as much as in forward) are the same."""
    a = predict(_spec(dp=dp, global_batch=dp, sharding=sharding)).raw
    b = predict(_spec(dp=dp, global_batch=dp, sharding=sharding, grad_dtype="fp32")).raw
    assert a["bytes_dp_fwd"] == pytest.approx(b["bytes_dp_fwd"])
    regather = a["bytes_dp_fwd"] if sharding == "zero3" else 0.0
    grads_bf16, grads_fp32 = a["bytes_dp_bwd"] - regather, b["bytes_dp_bwd"] - regather
    assert grads_bf16 > 0 and grads_bf16 == pytest.approx(grads_fp32 / 2)


def test_search_returns_plans_colossalai_runs():
    m, hw = models.load("llama2-7b"), hardware.load("h100-sxm")
    best = search(m, hw, 64, 256, top=40, framework="colossalai") + \
        search(m, hw, 64, 256, top=10, framework="colossalai", pp=2)
    assert any(c.plan.pp == 2 for c in best)
    for c in best:
        p = c.plan
        assert p.recompute in ("none", "full") and p.schedule in ("1f1b", "interleaved"), p
        assert p.pp == 1 or p.zero_stage <= 1, p
        resolve("llama2-7b", dataclasses.asdict(p), "h100-sxm", "colossalai")     # the stack accepts it


def test_the_bundled_readme_rows_are_priced_on_it():
    rows = [r for r in V.read(V.dataset_path("tables")) if r["case_id"].startswith("colossalai_")]
    assert len(rows) == 2
    for r in rows:
        case = V.build_case(r)
        assert case.spec.stack.id == "colossalai" and case.plan.recompute == "full", r["case_id"]
    three_d = V.build_case(next(r for r in rows if "70b" in r["case_id"]))
    assert (three_d.plan.tp, three_d.plan.pp, three_d.plan.zero_stage, three_d.plan.micro_batch) == (2, 4, 1, 1)


def test_expert_parallel_runs_take_the_moe_plugins_zero_1_without_overlap():
    """MoeHybridParallelPlugin turns ZeRO-2 into ZeRO-1 and the communication overlap off: an unstated sharding is
    lowered from Gemini's ZeRO-3 to ZeRO-1 with the reason, the gradient reduction is exposed, and a stated ZeRO-2 is
    refused in one line."""
    s = _spec(model="mixtral-8x7b", dp=16, ep=8, global_batch=16)
    assert s.plan.sharding == "zero1" and "at most ZeRO-1 with ep 8" in s.origin["sharding"]
    assert s.plan.overlap_grad_reduce == 0 and s.origin["overlap_grad_reduce"].startswith("rule: colossalai")
    assert _spec(model="mixtral-8x7b", dp=16, ep=1, global_batch=16).plan.overlap_grad_reduce == 1
    with pytest.raises(InputError, match="cannot run ZeRO-2 .* with ep 8"):
        _spec(model="mixtral-8x7b", dp=16, ep=8, global_batch=16, sharding="zero2")
    best = search(models.load("mixtral-8x7b"), hardware.load("h100-sxm"), 64, 256, top=30, framework="colossalai")
    assert any(c.plan.ep > 1 for c in best)
    for c in best:
        assert c.plan.ep == 1 or (c.plan.zero_stage <= 1 and c.plan.overlap_grad_reduce == 0), c.plan


@pytest.mark.parametrize("stack, axis", [("deepspeed-zero", "pp"), ("colossalai", "pp")])
def test_a_default_sharding_the_layout_cannot_run_is_lowered_a_stated_one_refused(stack, axis):
    """ZeRO-2/3 with pipeline parallelism is refused by DeepSpeed's pipeline engine and Colossal-AI's hybrid plugin:
    their default ZeRO-3 becomes the deepest stage they run with pp (ZeRO-1) when the run does not state one."""
    plan = dict(dp=4, global_batch=16, micro_batch=1, **{axis: 2})
    s = resolve("llama2-7b", plan, "h100-sxm", stack)
    assert s.plan.zero_stage == 1 and s.origin["sharding"].startswith("rule:")
    assert resolve("llama2-7b", dict(dp=8, global_batch=16), "h100-sxm", stack).plan.zero_stage == 3
    with pytest.raises(InputError, match="cannot run ZeRO-3"):
        resolve("llama2-7b", dict(plan, sharding="zero3"), "h100-sxm", stack)


def test_a_samples_per_second_rate_gives_the_step_time(tmp_path):
    """Colossal-AI's benchmark prints samples/s: a row stating only that rate is priced against global batch / rate,
    and a header written as the table writes it reads as that column."""
    f = tmp_path / "rows.csv"
    f.write_text("case_id,framework,model,gpu,n_gpus,tp,pp,global_batch,micro_batch,seq_len,optimizer_sharding,"
                 "Throughput (samples/s)\n"
                 "c,Colossal-AI,Llama 2 7B,H200,8,1,1,288,36,4096,zero2,17.13\n")
    case = V.build_case(V.read(f)[0])
    assert case.measured == pytest.approx(288 / 17.13) and case.spec.stack.id == "colossalai"
