"""Adam's moments in 16 bits (Megatron-Core --use-precision-aware-optimizer with --exp-avg-dtype / --exp-avg-sq-dtype
bf16; DeepSeek-V3 report sec 3.3.3): the optimizer state is the fp32 master copy plus two 2-byte moments, 8 bytes per
parameter instead of 12, in memory and in the optimizer step's traffic."""
import pytest

from roofline import Model, Plan, hardware, predict
from roofline.base.errors import InputError
from roofline.spec import config
from roofline.views import validate as V

M = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=1024, mlp="swiglu")
H = hardware.load("h100-sxm")


def test_bf16_moments_hold_two_thirds_of_the_optimizer_state():
    fp32 = predict(M, Plan(dp=8, global_batch=8, sharding="distributed"), H)
    bf16 = predict(M, Plan(dp=8, global_batch=8, sharding="distributed", moment_dtype="bf16"), H)
    a, b = (p.memory["optimizer"].to("B").magnitude for p in (fp32, bf16))
    assert b == pytest.approx(a * 8 / 12, rel=1e-12)
    assert bf16.memory["weights"] == fp32.memory["weights"]
    # the optimizer step reads and writes fewer bytes
    assert bf16.breakdown["optimizer"] < fp32.breakdown["optimizer"]


@pytest.mark.parametrize("settings, want", [("HybridEP flex | BF16 Adam moments | TE op fuser", "bf16"),
                                            ("exp_avg_dtype=torch.bfloat16, exp_avg_sq_dtype=torch.bfloat16", "bf16"),
                                            ("exp_avg_dtype = fp16", "fp16"), ("Adam moments in fp32", None),
                                            ("MoE alltoall dispatcher", None)])
def test_validate_reads_the_moments_from_the_settings(settings, want):
    row = {"tp": 1, "pp": 1, "dp": 8, "n_gpus": 8, "global_batch": 8, "micro_batch": 1, "precision": "bf16",
           "optimizer_sharding": "distributed", "settings": settings}
    assert V._plan_fields(row).get("moment_dtype") == want


def test_an_unknown_moment_dtype_is_one_line():
    with pytest.raises(InputError, match="moment_dtype"):
        config.check(M, Plan(moment_dtype="int8"))


def test_only_a_stack_with_a_precision_aware_optimizer_runs_16_bit_moments():
    from roofline import resolve

    plan = dict(dp=8, global_batch=8, moment_dtype="bf16")
    assert resolve(M, plan, H, "megatron-core").plan.moment_dtype == "bf16"
    for stack in ("deepspeed-zero", "torchtitan", "fsdp"):
        with pytest.raises(InputError, match=f"stack {stack} keeps Adam's moments in fp32, not 'bf16'"):
            resolve(M, plan, H, stack)
    assert resolve(M, dict(dp=8, global_batch=8), H, "torchtitan").plan.moment_dtype == "fp32"
