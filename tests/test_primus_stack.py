"""The AMD Primus stack (stacks/primus.yaml): Primus's Megatron backend, Megatron-Core on ROCm with Primus-Turbo, priced
with the defaults of AMD's example configs (AMD-AGI/Primus examples/megatron/configs) where they differ from
Megatron-Core's."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import InputError
from roofline.base.schema import yaml_load
from roofline.model.predict import predict
from roofline.spec import stacks
from roofline.spec.resolve import resolve
from roofline.views.validate import unstated_seq_len

# what primus.yaml overrides of its base, megatron-core, as plan fields a run may state
OVERRIDES = {"wgrad_fusion": False, "per_expert_kernels": False, "ep_dispatcher": "deepep", "fsdp_copies": True,
             "cuda_graphs": "none"}


def _own_keys() -> dict:
    """The keys primus.yaml sets itself (not inherited from its base), by section."""
    d = yaml_load((stacks.HERE / "primus.yaml").read_text(encoding="utf-8"))
    assert d["base"] == "megatron-core"
    return {s: dict(d.get(s) or {}) for s in ("model", "plan", "rules")}


def test_primus_defaults_on_mi300x():
    spec = resolve("llama3-8b", {"dp": 8, "global_batch": 64}, "mi300x", "primus")
    p, m = spec.plan, spec.model
    assert m.attention == "flash" and not m.dropout
    assert (p.dtype, p.grad_dtype, p.sharding, p.recompute) == ("bf16", "fp32", "distributed", "none")
    assert (p.overlap_grad_reduce, p.overlap_param_gather, p.overlap_tp) == (1.0, 1.0, 0.0)
    assert (p.wgrad_fusion, p.per_expert_kernels, p.ep_dispatcher, p.fsdp_copies, p.cuda_graphs) == \
        (False, False, "deepep", True, "none")
    for k in ("wgrad_fusion", "ep_dispatcher", "fsdp_copies", "sharding", "dtype"):
        assert spec.origin[k] == "stack primus"
    assert spec.origin["attention"] == "stack primus"


def test_every_own_key_is_sourced_from_the_primus_repository():
    """Each key primus.yaml sets itself cites the Primus repository (a path of it) or says it is assumed."""
    s = stacks.get("primus")
    for section, keys in _own_keys().items():
        for k in keys:
            src = s.sources[k]
            assert any(w in src for w in ("primus/", "examples/", "ASSUMED", "AMD-AGI/Primus")), (section, k, src)
    assert s.family == "primus" and s.months[0] == (2025, 2)
    assert stacks.get("amd primus").id == stacks.get("primus-megatron").id == "primus"


@pytest.mark.parametrize("text", [
    "AMD ROCm documentation, 'Training a model with Primus and Megatron', rocm/primus:v25.10 Docker, 8x MI300X, 2025",
    "rocm-blogs: Primus-Turbo FP8 GEMM and attention kernels, Llama 3.1 70B on MI355X",
    "Primus (Megatron-LM backend), MI325X, BF16, seq 8192",
    "AMD Primus with the Megatron-Core backend, core_r0.13.0",
    "github.com/AMD-AGI/Primus examples/megatron/configs/MI300X/llama3.1_8B-FP8-pretrain.yaml",
])
def test_texts_naming_primus_infer_it(text):
    stack, why = stacks.infer(text=text)
    assert stack.id == "primus", why


def test_megatron_named_beside_primus_gives_way_and_other_backends_keep_their_stack():
    """Primus builds on Megatron-LM (builds_on): a text naming both ran Primus; its TorchTitan and MaxText backends
    are those stacks (the longer name)."""
    assert stacks.infer(text="Primus + Megatron-LM, 64x MI300X, 2025")[0].id == "primus"
    assert stacks.infer(text="Primus TorchTitan backend, Llama 3 8B, MI300X, 2025")[0].id == "torchtitan"
    assert stacks.infer(text="Primus MaxText backend, MI355X")[0].id == "maxtext"
    assert stacks.infer(column="Primus")[0].id == "primus"
    assert stacks.infer(text="Megatron-Core on 8x MI300X, 2025")[0].id != "primus"       # no Primus named
    assert stacks.infer(text="Primary results on MI300X, primus_inter_pares")[0].id != "primus"  # not a whole word


@settings(max_examples=12, deadline=None)
@given(model=st.sampled_from(["llama3-8b", "llama3.1-70b", "mixtral-8x7b"]), dp=st.sampled_from([2, 4, 8]),
       tp=st.sampled_from([1, 2]), sharding=st.sampled_from(["distributed", "fsdp"]),
       dtype=st.sampled_from(["bf16", "fp8"]))
def test_primus_is_megatron_core_with_its_overrides(model, dp, tp, sharding, dtype):
    """Megatron-Core with Primus's own defaults stated (attention, wgrad fusion, grouped expert GEMMs, DeepEP,
    FSDP2's copies) prices every run as Primus does: nothing else differs."""
    plan = {"dp": dp, "tp": tp, "global_batch": 8 * dp, "recompute": "full", "sharding": sharding, "dtype": dtype}
    if model == "mixtral-8x7b":
        plan["ep"] = dp
    primus = predict(resolve(model, plan, "mi300x", "primus")).raw
    core = predict(resolve(model, {**plan, **OVERRIDES}, "mi300x", "megatron-core",
                           model_fields={"attention": "flash"})).raw
    for k in ("step_time", "t_dp_comm", "t_ep_comm", "memory"):
        assert primus[k] == pytest.approx(core[k], rel=1e-12), k


def test_moe_run_differs_from_megatron_core():
    """Unstated, an MoE run on Primus dispatches with DeepEP (deduplicated) and one grouped expert GEMM: less
    expert-parallel traffic than Megatron-Core's all-to-all default."""
    plan = {"dp": 8, "ep": 8, "global_batch": 64, "recompute": "full"}
    primus = resolve("mixtral-8x7b", plan, "mi300x", "primus")
    core = resolve("mixtral-8x7b", plan, "mi300x", "megatron-core")
    assert (primus.plan.ep_dispatcher, core.plan.ep_dispatcher) == ("deepep", "alltoall")
    assert (primus.plan.per_expert_kernels, core.plan.per_expert_kernels) == (False, True)
    assert (primus.model.attention, core.model.attention) == ("flash", "te")
    assert predict(primus).raw["t_ep_comm"] < predict(core).raw["t_ep_comm"]


def test_fsdp_is_fsdp2_with_its_copies():
    """Primus's FSDP is torch fully_shard (use_torch_fsdp2): its copy kernels cost time; Megatron-Core's
    Megatron-FSDP works in place."""
    plan = {"dp": 8, "global_batch": 64, "sharding": "fsdp"}
    with_copies = predict(resolve("llama3-8b", plan, "mi300x", "primus")).raw["step_time"]
    without = predict(resolve("llama3-8b", {**plan, "fsdp_copies": False}, "mi300x", "primus")).raw["step_time"]
    core = predict(resolve("llama3-8b", plan, "mi300x", "megatron-core")).raw["step_time"]
    assert with_copies > without == pytest.approx(core, rel=1e-12)


def test_pipeline_is_not_interleaved_unless_stated():
    plan = {"tp": 2, "pp": 4, "dp": 2, "global_batch": 64, "recompute": "full"}
    primus = resolve("llama3-70b", plan, "mi300x", "primus").plan
    core = resolve("llama3-70b", plan, "mi300x", "megatron-core").plan
    assert (primus.interleave, primus.schedule) == (1, "1f1b")
    assert core.interleave > 1 and core.schedule == "interleaved"
    assert resolve("llama3-70b", {**plan, "interleave": 2}, "mi300x", "primus").plan.schedule == "interleaved"


def test_zero_bubble_schedules_are_primus_not_megatron_core():
    plan = {"pp": 4, "dp": 2, "global_batch": 64, "recompute": "full", "schedule": "zb1p"}
    assert resolve("llama3-70b", plan, "mi300x", "primus").plan.schedule == "zb1p"
    with pytest.raises(InputError, match="stack megatron-core cannot run the zb1p pipeline schedule"):
        resolve("llama3-70b", plan, "mi300x", "megatron-core")


@pytest.mark.parametrize("dtype", ["fp8", "fp8-cs", "fp8-block", "mxfp8"])
def test_te_rocm_fp8_recipes_run(dtype):
    assert resolve("llama3-8b", {"dp": 8, "global_batch": 64, "dtype": dtype}, "mi355x", "primus").plan.dtype == dtype


def test_no_nvfp4_on_primus():
    with pytest.raises(InputError, match="stack primus cannot train in nvfp4"):
        resolve("llama3-8b", {"dp": 8, "global_batch": 64, "dtype": "nvfp4"}, "mi355x", "primus")
    assert resolve("llama3-8b", {"dp": 8, "global_batch": 64, "dtype": "nvfp4"}, "b200",
                   "megatron-core").plan.dtype == "nvfp4"


@pytest.mark.parametrize("model, length", [("llama3.1-8b", 8192), ("llama3-70b", 8192), ("llama2-7b", 4096)])
def test_unstated_sequence_is_the_example_configs(model, length):
    assert unstated_seq_len({"model": model}, stacks.get("primus"))[0] == length


@pytest.mark.parametrize("text", ["AMD Primus with zero bubble (ZB1P) on MI355X, 2026",
                                  "Primus (Megatron-LM backend), zero-bubble zb2p, 2025"])
def test_primus_runs_its_own_zero_bubble_pipeline(text):
    """Primus builds on Megatron-LM and on its own zero-bubble runtime: a text naming both is Primus, not sail-sg's
    zero-bubble fork, which a text naming zero bubble alone still is."""
    assert stacks.infer(text=text)[0].id == "primus"
    assert stacks.infer(text="sail-sg zero bubble ZB1P, 2024")[0].id == "zero-bubble"
