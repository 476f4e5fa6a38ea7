"""Context parallelism as DeepSpeed-Ulysses (plan cp_kind ulysses): two all-to-alls of the attention heads per pass,
not overlapped, priced as comm.collective's all-to-all; the stacks that run it; the rows that state it.

Expected figures are computed here from the model's shapes and the profile's collective constants (not read from
the code's intermediate terms)."""
import pytest
from hypothesis import given, settings, strategies as st

from roofline.base.errors import InputError
from roofline.spec import hardware, models
from roofline.spec.config import Plan
from roofline.model.predict import predict
from roofline.views import validate as V

H100 = hardware.load("h100-sxm")
LLAMA8 = models.load("llama3-8b").__class__(**{**models.load("llama3-8b").__dict__, "seq_len": 32768})


def _a2a_one_node(size, p):
    """nccl-tests all-to-all inside one NVLink node: (p-1) alpha + (p-1)/p x size / busbw (comm.collective)."""
    alpha, busbw = H100.collectives["a2a", "intra"]
    return (p - 1) * alpha + (p - 1) / p * size / busbw


@pytest.mark.parametrize("rc, passes", [("none", 2), ("full", 3)])
def test_ulysses_layer_exchange_is_two_all_to_alls_per_pass_not_hidden(rc, passes):
    """Llama 3 8B (32 heads, 8 KV heads of 128), 32K tokens, cp 8 on one node: per pass an all-to-all of Q, K, V
    (s/c tokens x (4096 + 2 x 1024) x 2 bytes) and one of the output (s/c x 4096 x 2); forward and backward, and the
    recomputed forward under full recomputation; none of it overlapped."""
    cp, tokens = 8, 32768 // 8
    qkv, out = 2 * tokens * (4096 + 2 * 1024), 2 * tokens * 4096
    expected = passes * (_a2a_one_node(qkv, cp) + _a2a_one_node(out, cp))
    plan = Plan(cp=cp, dp=1, global_batch=1, recompute=rc, cp_kind="ulysses")
    raw = predict(LLAMA8, plan, H100).raw
    assert raw["t_layer_cp_comm"] == pytest.approx(expected, rel=1e-9)
    fwd_bytes = LLAMA8.n_layers * (qkv + out) * (cp - 1) / cp
    assert raw["bytes_cp_fwd"] == pytest.approx(fwd_bytes, rel=1e-9)
    assert raw["bytes_cp_bwd"] == pytest.approx(fwd_bytes * (passes - 1), rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(cp=st.sampled_from([2, 4, 8]), mb=st.sampled_from([1, 2]), rc=st.sampled_from(["none", "full"]))
def test_ulysses_and_ring_share_everything_but_the_exchange(cp, mb, rc):
    """The same plan as ring attention or Ulysses differs only in the CP exchange: compute and memory alike; at cp 1
    the kind changes nothing."""
    base = dict(cp=cp, dp=1, micro_batch=mb, global_batch=mb, recompute=rc)
    ring = predict(LLAMA8, Plan(**base, cp_kind="ring"), H100).raw
    uly = predict(LLAMA8, Plan(**base, cp_kind="ulysses"), H100).raw
    for k in ("t_forward", "t_backward", "t_recompute", "memory", "flops"):
        assert uly[k] == pytest.approx(ring[k], rel=1e-12), k
    assert uly["t_cp_comm"] > 0 and uly["step_time"] >= uly["t_forward"] + uly["t_backward"]
    one = dict(cp=1, dp=1, micro_batch=mb, global_batch=mb, recompute=rc)
    assert predict(LLAMA8, Plan(**one, cp_kind="ulysses"), H100).raw["step_time"] == pytest.approx(
        predict(LLAMA8, Plan(**one), H100).raw["step_time"], rel=1e-12)


def test_ulysses_needs_whole_heads_per_rank_and_a_stack_that_runs_it():
    with pytest.raises(InputError, match=r"heads \(32\) must be divisible by tp x cp \(1 x 64\)"):
        predict(LLAMA8, Plan(cp=64, dp=1, global_batch=1, cp_kind="ulysses"), H100)
    from roofline.spec.resolve import resolve
    with pytest.raises(InputError, match="stack megatron-core runs context parallelism as ring, not ulysses"):
        resolve(LLAMA8, {"cp": 8, "dp": 1, "global_batch": 1, "cp_kind": "ulysses"}, H100, "megatron-core")
    ds = resolve(LLAMA8, {"cp": 8, "dp": 1, "global_batch": 1}, H100, "deepspeed-zero")
    assert ds.plan.cp_kind == "ulysses"                 # DeepSpeed's sequence parallelism is Ulysses


def _row(**over):
    row = {"case_id": "r", "source": "a long-context benchmark (2024)", "model": "llama2-7b", "gpu_id": "a100-sxm4-80gb",
           "n_gpus": "8", "gpus_per_node": "8", "tp": "1", "pp": "1", "dp": "1", "global_batch": "1",
           "micro_batch": "1", "seq_len": "131072", "precision": "bf16", "measured_iter_time_s": "60",
           "framework": "XTuner (DeepSpeed ZeRO-3)", "recompute": "full"}
    row.update(over)
    return V.build_case(V.read_dicts([row])[0])


def test_a_row_naming_ulysses_runs_it_over_the_ranks_its_layout_leaves():
    case = _row(notes="sequence_parallel_size=8 (DeepSpeed-Ulysses style all-to-all)")
    assert case.plan.cp == 8 and case.plan.cp_kind == "ulysses" and "DeepSpeed-Ulysses named" in case.note
    with pytest.raises(V.Skip, match=r"n_gpus \(8\) != tp\*pp\*dp\*cp"):      # no Ulysses named: the layout's own error
        _row(notes="long context")
    with pytest.raises(V.Skip, match="runs context parallelism as ring, not ulysses"):
        _row(framework="Megatron-Core", notes="DeepSpeed-Ulysses over 8 GPUs")


def test_a_stated_cp_with_ulysses_only_mentioned_keeps_the_stacks_kind():
    """Ulysses is read only where the layout leaves GPUs over: a Megatron-Core row with its cp stated whose notes
    merely mention Ulysses stays ring attention and is priced."""
    case = _row(framework="Megatron-Core", cp="8", notes="unlike DeepSpeed-Ulysses, context parallelism splits the tokens")
    assert case.plan.cp == 8 and case.plan.cp_kind == "ring"
