"""Flash-attention kernels other than FlashAttention-2 (model attention flash-triton, flash-v1; symbol flash_speed):
the profiles' attention curves are FlashAttention-2's, and Dao 2023 (arXiv 2307.08691 sec. 4.1) measures
FlashAttention-2 1.3-2.5x faster than FlashAttention in Triton and 1.7-3.0x faster than FlashAttention v1 on the A100.
llm-foundry ran the Triton kernel by default until March 2024 (stacks/llm-foundry-2023.yaml)."""
import csv

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from roofline.model.formulas import compute as C
from roofline.model.formulas import symbols as S
from roofline.model.predict import predict
from roofline.spec import hardware, stacks
from roofline.spec.config import FLASH_SPEED, Model, Plan
from roofline.views import validate as V

A100 = hardware.load("a100-sxm4-80gb")


def _model(attention, seq_len=8192):
    return Model(n_layers=2, d_model=2048, n_heads=16, vocab=50368, seq_len=seq_len, mlp="gelu", attention=attention)


def _pred(attention, seq_len=8192):
    return predict(_model(attention, seq_len), Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8), A100)


def test_the_speeds_are_the_geometric_means_of_the_papers_ranges():
    assert FLASH_SPEED["flash"] == 1.0
    assert 1 / FLASH_SPEED["flash-triton"] == pytest.approx((1.3 * 2.5) ** 0.5)
    assert 1 / FLASH_SPEED["flash-v1"] == pytest.approx((1.7 * 3.0) ** 0.5)


def test_only_the_flash_kernels_compute_time_divides_by_the_speed():
    att = next(o for o in C.attention_core() if o.name == "flash_attention")
    t = C.op_time(att, "fwd")
    assert S.flash_speed in t.free_symbols
    gemm = next(o for o in C.layer_ops(C.d_head, S.ffn_hidden, sp.Integer(0)) if o.cls == "gemm")
    assert S.flash_speed not in C.op_time(gemm, "fwd").free_symbols


@settings(max_examples=15, deadline=None)
@given(seq_exp=st.integers(min_value=9, max_value=15))
def test_a_slower_kernel_never_gives_a_faster_step_and_keeps_the_flops(seq_exp):
    s = 2 ** seq_exp
    fa2, triton, v1 = (_pred(a, s) for a in ("flash", "flash-triton", "flash-v1"))
    assert fa2.step_time <= triton.step_time <= v1.step_time
    a, b = triton.to_dict(), fa2.to_dict()
    assert a["flops_per_step"] == b["flops_per_step"] and a["memory_per_gpu_bytes"] == b["memory_per_gpu_bytes"]


def test_the_slowdown_grows_with_the_sequence_as_attention_does():
    short = _pred("flash-triton", 512).step_time / _pred("flash", 512).step_time
    long = _pred("flash-triton", 32768).step_time / _pred("flash", 32768).step_time
    assert 1 < short < long < 1 / FLASH_SPEED["flash-triton"]


def test_llm_foundry_by_era_and_the_engine_it_builds_on():
    assert stacks.get("llm-foundry@2023").model["attention"] == "flash-triton"
    assert stacks.get("llm-foundry").model["attention"] == "flash"
    stack, why = stacks.infer(text="MosaicML llm-foundry benchmarks (2023-10-19); Composer + PyTorch FSDP FULL_SHARD")
    assert stack.id == "llm-foundry-2023" and "llm-foundry" in why
    assert stacks.infer(text="PyTorch FSDP FULL_SHARD run")[0].id == "fsdp"


@pytest.mark.parametrize("notes, want", [("", "flash-triton"), ("attn_impl: flash, flash-attn 2.4.2", "flash"),
                                         ("flash-attn==1.0.7", "flash-v1")])
def test_a_row_states_its_kernel_over_the_stacks(tmp_path, notes, want):
    row = {"case_id": "mpt", "source": "mosaicml/llm-foundry scripts/train/benchmarking/README.md (2023)",
           "model": "MPT-1b", "n_layers": 24, "d_model": 2048, "n_heads": 16, "ffn_hidden": 8192, "mlp": "gelu",
           "vocab": 50368, "seq_len": 8192, "global_batch": 96, "micro_batch": 3, "tp": 1, "pp": 1, "dp": 8,
           "optimizer_sharding": "FULL_SHARD", "gpu_id": "a100-sxm4-80gb", "n_gpus": 8,
           "measured_iter_time_s": 3.4, "notes": notes, "tier": "B"}
    path = tmp_path / "r.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    case = V.build_case(V.read(path)[0])
    assert case.framework == "llm-foundry-2023" and case.model.attention == want


def test_the_mpt_figures_docs_models_quotes():
    """docs/models.md, "Flash-attention kernels": MPT-7B on 8 A100 80GB, FSDP, full recomputation, two micro-batches."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text()
    got = []
    for s, mb in ((2048, 16), (8192, 4), (32768, 1)):
        t = {a: predict(Model(n_layers=32, d_model=4096, n_heads=32, vocab=50368, seq_len=s, mlp="gelu", attention=a,
                              tied_embeddings=True, biases=False),
                        Plan(tp=1, pp=1, dp=8, micro_batch=mb, global_batch=16 * mb, sharding="fsdp", recompute="full"),
                        A100).step_time.to("s").magnitude for a in ("flash", "flash-triton")}
        got.append(round(100 * (t["flash-triton"] / t["flash"] - 1)))
    assert (f"step {got[0]} % slower than FlashAttention-2's at sequence 2048 (micro-batch 16), {got[1]} % at 8192 "
            f"(micro-batch 4) and {got[2]} % at 32768") in " ".join(text.split())
