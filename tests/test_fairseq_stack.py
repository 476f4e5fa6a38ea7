"""The fairseq stack (fairseq-train: torch DDP or fairscale FSDP, fp16, Megatron tensor parallelism; RoBERTa, XGLM,
NLLB): its sourced defaults, the texts that name it (and metaseq, its fork, staying metaseq), what it cannot run."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import InputError
from roofline.model.predict import predict
from roofline.spec import stacks
from roofline.spec.resolve import resolve

GPU = "v100-sxm2-32gb"


def test_fairseq_defaults_are_fp16_ddp_with_overlapped_buckets():
    spec = resolve("gpt3-1.3b", {"dp": 8, "global_batch": 64}, GPU, "fairseq")
    p, m = spec.plan, spec.model
    assert spec.stack.id == "fairseq"
    # --fp16 of the published recipes, fp16 grads all-reduced by torch DDP, FP16Optimizer's fp32 master copy
    assert (p.dtype, p.grad_dtype, p.master_weights, p.moment_dtype) == ("fp16", "fp16", True, "fp32")
    # --ddp-backend pytorch_ddp / c10d, zero_sharding none, checkpoint_activations False
    assert (p.sharding, p.recompute, p.sequence_parallel) == ("none", "none", False)
    assert p.overlap_grad_reduce == 1.0 and p.grad_buckets
    assert (p.overlap_tp, p.tp_async_dgrad, p.wgrad_fusion) == (0.0, False, False)
    assert (p.loss_kernel, p.eager_elementwise) == ("eager", True)
    assert p.micro_batch == 8                       # --update-freq 1: the rank's whole batch, 64 / 8
    assert (m.attention, m.dropout) == ("unfused", True)
    for k in ("dtype", "grad_dtype", "sharding", "grad_buckets", "loss_kernel"):
        assert spec.origin[k] == "stack fairseq", k


def test_every_default_names_its_source():
    s = stacks.get("fairseq")
    assert (s.family, s.era) == ("fairseq", (2017, 2022))
    for k in (*s.model, *s.plan, *s.rules):
        assert len(s.sources[k]) > 15, k
    assert "configs.py" in s.sources["sharding"] and "pytorch_ddp" in s.sources["sharding"]
    assert "fp32_reduce_scatter" in s.sources["grad_dtype"]


@pytest.mark.parametrize("text", [
    "RoBERTa (Liu et al. 2019, arXiv:1907.11692): pre-trained with fairseq on 1024 V100 GPUs, mixed precision",
    "fairseq-train data-bin/wikitext-103 --task language_modeling --arch transformer_lm_gpt --fp16 --update-freq 16",
    "Artetxe et al. 2021 (arXiv:2112.10684): dense and MoE language models trained in fairseq with fully sharded "
    "data parallel (FSDP)",
    "XGLM 7.5B, facebookresearch/fairseq examples/xglm, 2021",
    "python fairseq_cli/train.py --ddp-backend legacy_ddp",
    "NLLB-200 (2022), trained with fairseq-py",
])
def test_texts_naming_fairseq_infer_fairseq(text):
    stack, why = stacks.infer(text=text)
    assert stack.id == "fairseq", why


@pytest.mark.parametrize("text", [
    "Metaseq: a codebase for working with Open Pre-trained Transformers. metaseq is a fork of fairseq that merged "
    "FSDP with Megatron's tensor parallel libraries",
    "OPT-175B (Zhang et al. 2022, arXiv:2205.01068), trained with metaseq, forked from fairseq",
])
def test_metaseq_stays_metaseq_beside_fairseq(text):
    stack, why = stacks.infer(text=text)
    assert stack.id == "metaseq", why


def test_fairseq2_is_not_fairseq():
    assert all(s.id != "fairseq" for s, _ in stacks._named("source text", "fairseq2 recipes, 2024"))
    assert stacks.get("fairseq-train").id == stacks.get("fairseq@2021").id == "fairseq"


@pytest.mark.parametrize("plan,match", [
    ({"pp": 2, "dp": 4}, "stack fairseq has no pipeline parallelism"),
    ({"cp": 2, "dp": 4}, "stack fairseq has no context parallelism"),
    ({"dp": 8, "dtype": "bf16"}, r"stack fairseq cannot train in bf16 \(it runs fp16, fp32\)"),
    ({"dp": 8, "recompute": "selective"}, "stack fairseq cannot run recompute 'selective'"),
    ({"tp": 2, "dp": 4, "sequence_parallel": True}, "stack fairseq has no sequence parallelism"),
    ({"dp": 8, "sharding": "fsdp", "dp_replicas": 2}, "stack fairseq keeps one sharded copy"),
])
def test_what_fairseq_cannot_run_is_one_line(plan, match):
    with pytest.raises(InputError, match=match) as e:
        resolve("gpt3-1.3b", {**plan, "global_batch": 64}, GPU, "fairseq")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("sharding", ["none", "zero1", "zero2", "fsdp"])
def test_fairseq_runs_its_shardings_and_tensor_parallelism(sharding):
    """--zero-sharding os (fairscale OSS, ZeRO-1); --ddp-backend fully_sharded with and without
    --no-reshard-after-forward; --model-parallel-size over the Megatron submodule."""
    spec = resolve("gpt3-1.3b", {"tp": 2, "dp": 4, "global_batch": 64, "sharding": sharding}, GPU, "fairseq")
    assert spec.plan.sharding == sharding and spec.plan.tp == 2
    assert predict(spec).raw["step_time"] > 0


@settings(max_examples=12, deadline=None)
@given(dp=st.sampled_from([2, 4, 8]), per_rank=st.sampled_from([1, 2, 4, 8]),
       sharding=st.sampled_from(["none", "zero1", "zero2", "fsdp"]), recompute=st.sampled_from(["none", "full"]))
def test_memory_efficient_fp16_drops_four_bytes_per_parameter(dp, per_rank, sharding, recompute):
    """--memory-efficient-fp16 (MemoryEfficientFP16Optimizer) keeps no fp32 master copy: the optimizer state per
    parameter falls from 4 + 8 to the two fp32 moments, sharded as the rest of the state is; the micro-batch is the
    rank's batch (update_freq 1) either way."""
    plan = {"dp": dp, "global_batch": per_rank * dp, "sharding": sharding, "recompute": recompute}
    fp16 = resolve("gpt3-350m", plan, GPU, "fairseq")
    mem_eff = resolve("gpt3-350m", {**plan, "master_weights": False}, GPU, "fairseq")
    assert fp16.plan.micro_batch == mem_eff.plan.micro_batch == per_rank
    a, b = predict(fp16).raw, predict(mem_eff).raw
    assert b["mem_optimizer"] / a["mem_optimizer"] == pytest.approx(8 / 12, rel=1e-9)
    for k in ("mem_weights", "mem_gradients", "mem_activations"):
        assert a[k] == b[k]


def test_fairseq_with_megatron_tensor_parallelism_is_fairseq():
    """Megatron-11b ran fairseq-train over the Megatron-LM submodule's layers: a text naming both is fairseq; Megatron-LM
    alone stays Megatron-LM, and metaseq (which also builds on it) stays metaseq."""
    assert stacks.infer(text="Megatron-11b, fairseq with Megatron-LM model parallelism (2020)")[0].id == "fairseq"
    assert stacks.infer(text="Megatron-LM, 2020")[0].family == "megatron-lm"
    assert stacks.infer(text="metaseq with Megatron-LM tensor parallelism, OPT-175B, 2022")[0].id == "metaseq"
