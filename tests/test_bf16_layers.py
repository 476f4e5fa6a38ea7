"""Layers a low-precision recipe keeps in 16 bits (Megatron-Core --first-last-layers-bf16 with
--num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16; Plan.bf16_layers): their share of the layers runs its
linear GEMMs at the 16-bit peak, quantizes nothing and saves 16-bit GEMM inputs."""

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from roofline.base.errors import InputError
from roofline.model.formulas import compute as C
from roofline.model.predict import evaluate, inputs, value_at
from roofline.spec.resolve import resolve

PLAN = {"tp": 2, "dp": 4, "micro_batch": 1, "global_batch": 32, "dtype": "nvfp4"}


def _spec(bf16_layers=0, model="llama3-70b", gpu="b200", **plan):
    return resolve(model, {**PLAN, **plan, "bf16_layers": bf16_layers}, gpu, "megatron-core")


def _x(spec):
    return inputs(spec.model, spec.plan, spec.hardware)


def test_a_gemm_runs_at_the_recipes_peak_in_the_low_precision_layers_and_at_16_bits_in_the_rest():
    gemm = C.gemm("g", 131072, 16384, 16384)              # compute-bound, its fixed launch time negligible
    n = _spec().model.n_layers
    t = {k: value_at(C.op_time(gemm, "fwd"), _x(_spec(k))) for k in (0, n // 4, n)}
    x = _x(_spec())
    assert x["peak"] / x["peak_hp"] == pytest.approx(4)    # B200: NVFP4 9 PFLOP/s, BF16 2.25
    assert t[n] / t[0] == pytest.approx(4, rel=2e-3)       # all layers in 16 bits: the 16-bit peak
    assert t[n // 4] / t[0] == pytest.approx(0.75 + 0.25 * 4, rel=2e-3)
    hp = C.gemm("head", 16384, 8192, 8192, hp=True)        # a GEMM the recipe keeps in 16 bits anyway
    assert value_at(C.op_time(hp, "fwd"), _x(_spec(n // 4))) == pytest.approx(value_at(C.op_time(hp, "fwd"), x))


def test_the_layers_kept_in_16_bits_quantize_nothing_and_save_16_bit_inputs():
    ops = C.layer_ops(C.d_head, sp.Symbol("ffn_hidden"), sp.Integer(0), variants=True)
    q = next(o for o in ops if o.name == "quantize")
    n = _spec().model.n_layers
    x0, xq = _x(_spec()), _x(_spec(n // 4))
    assert value_at(q.b_fwd, xq) == pytest.approx(0.75 * value_at(q.b_fwd, x0))
    assert value_at(q.b_bwd, xq) == pytest.approx(0.75 * value_at(q.b_bwd, x0))
    assert xq["gin_bytes"] == pytest.approx(0.75 * x0["gin_bytes"] + 0.25 * 2)


@settings(max_examples=20, deadline=None)
@given(a=st.integers(0, 80), b=st.integers(0, 80), dtype=st.sampled_from(["fp8-cs", "mxfp8", "nvfp4"]))
def test_more_layers_in_16_bits_never_make_a_step_faster(a, b, dtype):
    lo, hi = sorted((a, b))
    t = [float(evaluate(_x(_spec(k, dtype=dtype)))["step_time"]) for k in (lo, hi)]
    assert t[0] <= t[1] * (1 + 1e-12)


def test_bf16_layers_are_refused_outside_a_low_precision_recipe_and_beyond_the_layers():
    with pytest.raises(InputError, match=r"bf16_layers keeps layers in 16 bits under a low-precision recipe.*bf16"):
        _spec(4, dtype="bf16")
    with pytest.raises(InputError, match=r"bf16_layers \(81\) must be between 0 and the layers \(80\)"):
        _spec(81)


@pytest.mark.parametrize("dtype, text, expected", [
    ("NVFP4", "NVFP4 -> nemotron_3_super_bf16_with_nvfp4_mixed + te_quant.cfg", 14),
    ("MXFP8", "NVFP4 -> nemotron_3_super_bf16_with_nvfp4_mixed + te_quant.cfg", 0),   # the recipe is NVFP4's
    ("FP8-CS", "first_last_layers_bf16=True; num_layers_at_start_in_bf16=1; num_layers_at_end_in_bf16=2", 3),
    ("FP8-CS", "num_layers_at_start_in_bf16=1; num_layers_at_end_in_bf16=2", 0),      # ignored without the switch
    ("FP8-CS", "first_last_layers_bf16=False; num_layers_at_end_in_bf16=2", 0),
])
def test_validate_reads_the_layers_kept_in_16_bits(bridge_row, dtype, text, expected):
    assert bridge_row(dtype, text).plan.bf16_layers == expected
