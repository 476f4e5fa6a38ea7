"""The Paxml / Praxis stack (NVIDIA JAX-Toolbox's Pax on GPUs): its sourced defaults, how a source text names it, and
what it cannot run."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import InputError
from roofline.spec import stacks
from roofline.spec.resolve import resolve


def test_paxml_defaults_are_bf16_fsdp_with_whole_layer_remat_on_cudnn_attention():
    spec = resolve("gpt3-6.7b", {"dp": 8, "global_batch": 64}, "h100-sxm", "paxml")
    p = spec.plan
    assert (p.dtype, p.grad_dtype, p.sharding, p.recompute, p.sequence_parallel) == ("bf16", "bf16", "fsdp", "full",
                                                                                    False)
    assert p.master_weights and p.micro_batch == 8          # fp32 parameters; PERCORE_BATCH_SIZE, no accumulation
    assert (p.overlap_grad_reduce, p.overlap_param_gather, p.overlap_tp) == (1.0, 0.75, 0.0)
    assert (p.cuda_graphs, p.loss_kernel, p.wgrad_fusion, p.fsdp_copies) == ("full", "compiled", False, False)
    assert (spec.model.attention, spec.model.dropout) == ("cudnn", False)


@pytest.mark.parametrize("text", [
    "NVIDIA JAX-Toolbox Pax (rosetta/projects/pax README), GPT 5B, 32 DGX H100 nodes, TE BF16",
    "Paxml Synthetic175B config, FSDP 256, ghcr.io/nvidia/pax:nightly-2024-03-01",
    "Google Pax (Paxml + Praxis) on 8x A100 80G",
])
def test_a_source_naming_pax_infers_paxml(text):
    assert stacks.infer(text=text)[0].id == "paxml"
    assert stacks.infer(text)[0].id == "paxml"               # as a framework column too


@settings(max_examples=30, deadline=None)
@given(word=st.sampled_from(["paxmlx", "compax", "spax", "pax8", "saxml", "t5x", "maxtext", "apax", "pax_"]))
def test_pax_names_match_only_as_whole_words(word):
    """'pax' is an alias: a word that merely contains it (or Saxml, T5X, MaxText) does not name the stack."""
    assert all(s.id != "paxml" for s, _ in stacks._named("source text", f"trained with {word} on H100"))


@settings(max_examples=20, deadline=None)
@given(dp=st.sampled_from([2, 4, 8, 16]), per=st.integers(1, 8))
def test_unstated_micro_batch_is_the_per_rank_batch(dp, per):
    """Pax runs PERCORE_BATCH_SIZE per device in one forward and backward (no gradient accumulation unless told)."""
    p = resolve("gpt3-6.7b", {"dp": dp, "global_batch": dp * per}, "h100-sxm", "paxml").plan
    assert p.micro_batch == per


@pytest.mark.parametrize("plan,match", [
    ({"pp": 2, "dp": 4, "global_batch": 64, "schedule": "1f1b"}, "stack paxml cannot run the 1f1b pipeline schedule"),
    ({"pp": 2, "dp": 4, "global_batch": 64, "interleave": 2}, "stack paxml cannot run the interleaved"),
    ({"dp": 4, "cp": 2, "global_batch": 64}, "stack paxml has no context parallelism"),
    ({"dp": 8, "global_batch": 64, "sharding": "zero1"}, "stack paxml cannot run sharding 'zero1'"),
    ({"dp": 8, "global_batch": 64, "dtype": "fp16"}, "stack paxml cannot train in fp16"),
])
def test_paxml_refuses_what_pax_cannot_run(plan, match):
    with pytest.raises(InputError, match=match) as e:
        resolve("gpt3-6.7b", plan, "h100-sxm", "paxml")
    assert "\n" not in str(e.value)


def test_a_pipelined_pax_run_is_gpipe_with_fsdp_inside_the_stage():
    p = resolve("gpt3-6.7b", {"pp": 2, "dp": 4, "global_batch": 64, "micro_batch": 2}, "h100-sxm", "paxml").plan
    assert (p.schedule, p.sharding) == ("gpipe", "fsdp")


def test_paxml_runs_fp8_and_the_remat_policies_it_has():
    for recompute in ("none", "selective", "full"):
        assert resolve("gpt3-6.7b", {"dp": 8, "global_batch": 64, "recompute": recompute}, "h100-sxm",
                       "paxml").plan.recompute == recompute
    assert resolve("gpt3-6.7b", {"dp": 8, "global_batch": 64, "dtype": "fp8"}, "h100-sxm", "paxml").plan.dtype == "fp8"
    with pytest.raises(InputError, match="stack paxml cannot run recompute 'op'"):
        resolve("gpt3-6.7b", {"dp": 8, "global_batch": 64, "recompute": "op"}, "h100-sxm", "paxml")


def test_nvidia_pax_readme_rows_price_on_the_paxml_stack():
    """The JAX-Toolbox Pax README's GPT and Llama rows (the public tables) name Pax: each is priced on this stack, and
    the 126M rows, gathered without flash attention (--xla_gpu_enable_cudnn_fmha=false), on unfused attention."""
    from roofline.views import validate as V

    rows = [r for r in V.read(V.dataset_path("tables")) if r["case_id"].startswith("pax_")]
    cases = {r["case_id"]: V.build_case(r) for r in rows}
    assert len(cases) == 12 and all(c.spec.stack.id == "paxml" for c in cases.values())
    assert {k for k, c in cases.items() if c.model.attention == "unfused"} == {k for k in cases if "_126m_" in k}
