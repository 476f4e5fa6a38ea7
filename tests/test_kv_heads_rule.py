"""Issue 16 item 6: a stack that splits the key/value heads over the TP ranks needs kv-heads divisible by tp."""
import pytest

from roofline.spec import resolve as spec, stacks
from roofline.spec import models
from roofline.base.errors import InputError


def test_tp_above_kv_heads_only_where_the_stack_runs_it():
    assert models.load("llama3-8b").kv_heads == 8       # 32 heads, 8 kv-heads (Llama 3 paper, Table 3)
    plan = {"tp": 16, "dp": 4, "global_batch": 64}
    s = spec.resolve("llama3-8b", plan, "h100-sxm", "megatron-core")        # core_v0.16+: kv-heads replicated over tp / 8
    assert s.plan.tp == 16
    for name in ("torchtitan", "megatron-lm@2022", "deepspeed", "fsdp"):
        with pytest.raises(InputError, match=r"kv-heads \(8\) divisible by tp \(16\)"):
            spec.resolve("llama3-8b", plan, "h100-sxm", name)
    # tp 8 divides 8 kv-heads: every stack that runs tensor parallelism accepts it
    assert spec.resolve("llama3-8b", {"tp": 8, "dp": 8, "global_batch": 64}, "h100-sxm", "torchtitan").plan.tp == 8


def test_rule_reads_the_stack_source():
    rules = stacks.plan_rules(stacks.get("torchtitan"))
    assert any("kv-heads" in r.message for r in rules)
    assert "core_v0.16" in stacks.get("megatron-core").sources["kv_heads_below_tp"]
