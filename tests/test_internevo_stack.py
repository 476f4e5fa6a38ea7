"""InternEvo, the InternLM training framework, as a registry stack (stacks/internevo.yaml, internevo-2023.yaml): its
Hybrid ZeRO-1, FlashAttention v1 until 2024-01, and the bundled rows of its training-performance table."""
import pytest

from roofline.base.errors import InputError
from roofline.model.predict import predict
from roofline.spec import stacks
from roofline.spec.resolve import resolve
from roofline.views import validate as V


def _spec(stack="internevo", **plan):
    base = dict(dp=8, global_batch=64, micro_batch=2)
    base.update(plan)
    return resolve("llama2-7b", base, "a100-sxm4-80gb", stack)


@pytest.mark.parametrize("column, text, expected", [
    ("InternEvo", "", "internevo"),
    ("InternEvo (InternLM)", "InternLM doc/en/train_performance.md @c18bec9 (2023-07-08)", "internevo-2023"),
    ("intern-evo", "a 2024-06 run", "internevo"),
])
def test_the_version_follows_the_date(column, text, expected):
    assert stacks.infer(column=column, text=text, dtype="bf16")[0].id == expected


def test_defaults_are_the_7b_configs():
    """configs/7B_sft.py: ZeRO-1, no checkpointing, bf16 reduced in bf16, broadcast after the step (exposed), flash
    attention v1 in 2023 and v2 after, fused norm / rotary / cross-entropy."""
    s = _spec()
    assert (s.plan.sharding, s.plan.recompute, s.plan.grad_dtype, s.plan.loss_kernel) == ("zero1", "none", "bf16", "fused")
    assert s.plan.overlap_param_gather == 0 and s.plan.overlap_grad_reduce == 1 and not s.plan.eager_elementwise
    assert s.model.attention == "flash" and _spec("internevo-2023").model.attention == "flash-v1"


def test_flash_attention_v1_is_slower_than_v2():
    """The only difference of the 2023 version: FlashAttention v1.0.5, whose kernels run slower than v2's."""
    a = predict(_spec("internevo-2023"))
    b = predict(_spec("internevo"))
    assert a.step_time > b.step_time and a.memory["total"] == b.memory["total"]


def test_what_the_framework_cannot_run_is_refused():
    with pytest.raises(InputError, match="stack internevo has no context parallelism"):
        _spec(cp=2, dp=4)
    with pytest.raises(InputError, match="stack internevo cannot run recompute 'selective'"):
        _spec(recompute="selective")
    with pytest.raises(InputError, match="stack internevo cannot run the gpipe pipeline schedule"):
        _spec(pp=2, dp=4, schedule="gpipe")
    with pytest.raises(InputError, match="stack internevo cannot run sharding 'zero2'"):
        _spec(sharding="zero2")


def test_the_bundled_table_rows_are_priced_on_the_2023_code():
    rows = [r for r in V.read(V.dataset_path("tables")) if r["case_id"].startswith("internlm_")]
    assert len(rows) == 46
    cases = {r["case_id"]: V.build_case(r) for r in rows}
    assert {c.spec.stack.id for c in cases.values()} == {"internevo-2023"}
    node = cases["internlm_tput_tp1_zero1_8_128gpu"].plan          # zero1=8: a shard group per node
    assert (node.zero_stage, node.dp, node.dp_replicas) == (1, 128, 16)
    assert cases["internlm_tput_tp1_zero1_all_128gpu"].plan.dp_replicas == 1
    assert cases["internlm_flops_ckpt_mb8_mn1_64gpu"].plan.recompute == "full"
