"""Rows as NVIDIA's other published tables write them: NeMo AutoModel (PyTorch FSDP2, not Megatron-Core), the model
names of NeMo's 25.x performance summaries and AutoModel's, and an MoE row whose EP cell is blank or '-'."""

import pytest

from roofline.spec import families, stacks
from roofline.spec.resolve import resolve


@pytest.mark.parametrize("text, expected", [
    # no date: the family's earliest version (every AutoModel version is 2023+; stacks._named)
    ("NeMo AutoModel", "nemo-automodel-2025"),
    ("NeMo Automodel 26.02", "nemo-automodel"),             # a release number dates it
    ("NeMo AutoModel, 2025-10", "nemo-automodel-2025"),
    ("nemo automodel (PyTorch FSDP2)", "nemo-automodel-2025"),   # was metaseq: 'nemo' inside the name read as Megatron
    ("nemo_automodel", "nemo-automodel-2025"),
    ("NeMo 25.04", "megatron-core"),                        # NeMo alone is still Megatron-Core's NeMo
    ("Megatron-Bridge", "megatron-core"),
    ("FSDP with Megatron-LM tensor parallelism", "metaseq"),
    ("torchtitan fsdp2", "torchtitan"),
])
def test_the_stack_a_text_names(text, expected):
    stack, why = stacks.infer(text, "", None, None, "bf16")
    assert stack.id == expected, why


def test_automodel_defaults_come_from_its_config_classes():
    s = resolve("qwen3-30b-a3b", {"tp": 1, "dp": 8, "ep": 8, "micro_batch": 4, "global_batch": 512}, "h100-sxm",
                "nemo-automodel")
    p = s.plan
    assert (p.sharding, p.grad_dtype, p.recompute, p.sequence_parallel, p.ep_dispatcher, p.loss_kernel) == \
        ("fsdp", "fp32", "none", False, "deepep", "eager")
    assert s.origin["ep_dispatcher"] == "stack nemo-automodel"
    src = stacks.get("nemo-automodel").sources
    assert "BackendConfig" in src["ep_dispatcher"] and "reduce_dtype" in src["grad_dtype"]


@pytest.mark.parametrize("name, preset", [
    ("LLAMA3-405B", "llama3.1-405b"), ("Llama 3 405B", "llama3.1-405b"), ("Nemotron-15B", "nemotron-4-15b"),
    ("Nemotron-340B", "nemotron-4-340b"), ("LLAMA4-Scout-LLM", "llama4-scout"),
    ("LLAMA4-Maverick-LLM", "llama4-maverick"), ("Nemotron V3 Nano 30B", "nemotron-3-nano-30b-a3b"),
    ("Nemotron V3 Super 120B", "nemotron-3-super-120b-a12b"), ("Qwen3 MoE 30B", "qwen3-30b-a3b"),
    ("GPT-OSS 20B", "gpt-oss-20b"), ("openai/gpt-oss-20b", "gpt-oss-20b"),
    ("Llama 3 70B", "llama3-70b"), ("Nemotron-H 8B", "nemotron-h-8b"),
    ("Nemotron 22B", "nemotron-22b"),       # NeMo's Nemotron-3 22B (Nemotron3Config22B), not a Nemotron-4 / -H size
    # Lightning "uses the same architecture as Nemotron 3 Nano" (Megatron-Bridge nemotron_3/lightning/README.md)
    ("Nemotron 3.5 Lightning 30B-A3B", "nemotron-3-nano-30b-a3b"),
])
def test_table_spellings(name, preset):
    assert families.preset_for(name) == preset


def _row(row_case, **over):
    row = {"case_id": "gptoss", "source": "NVIDIA-NeMo/Automodel docs/performance-summary.mdx",
           "framework": "NeMo AutoModel", "gpu": "DGX-H100", "n_gpus": 64, "model": "GPT-OSS 120B",
           "global_batch": 512, "micro_batch": 2, "seq_len": 4096, "tp": 1, "pp": 1, "cp": 1, "ep": "-",
           "fsdp": 64, "precision": "BF16", "measured_iter_time_s": 4.30}
    return row_case({**row, **over})


def test_a_blank_ep_on_an_moe_row_is_not_one_rank(row_case):
    case = _row(row_case)
    assert case.plan.ep > 1 and "ep not stated on an MoE row" in case.note
    assert (case.plan.dp * case.plan.cp) % case.plan.ep == 0 and 128 % case.plan.ep == 0
    one = _row(row_case, ep=1)                        # a stated ep stands
    assert one.plan.ep == 1 and "ep not stated" not in one.note
    from roofline.model.predict import evaluate, inputs
    t = {c.plan.ep: float(evaluate(inputs(c.model, c.plan, c.hw))["step_time"]) for c in (case, one)}
    assert t[case.plan.ep] < t[1]                     # every GPU gathering every expert is the slow corner


def test_a_dense_row_with_a_blank_ep_is_left_alone(row_case):
    case = _row(row_case, model="Llama3 70B", seq_len=8192, global_batch=128, micro_batch=1, cp=2, ep="")
    assert case.plan.ep == 1 and "ep not stated" not in case.note


def test_async_tp_is_torchtitans_tp_comm_overlap(row_case):
    """torchtitan's benchmarks say "async TP" (experimental.enable_async_tensor_parallel) where Megatron says
    --tp-comm-overlap: the row's TP collectives overlap by the stack's rule; "vanilla TP" or "no async TP" states none."""
    def case(settings):
        row = {"case_id": "r", "source": "pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md",
               "framework": "torchtitan", "gpu": "H100 80GB", "n_gpus": 64, "model": "Llama 3.1 8B", "tp": 8,
               "pp": 1, "dp": 8, "global_batch": 96, "micro_batch": 12, "recompute": "selective",
               "settings": settings, "tokens_per_s_per_gpu": 4378}
        return row_case(row)
    on = case("torch.compile; async TP")
    assert on.plan.overlap_tp == pytest.approx(7 / 8)
    for off in ("torch.compile; vanilla TP", "torch.compile; no async TP", ""):
        assert case(off).plan.overlap_tp == 0.0


def test_the_2025_stack_runs_rope_eagerly_in_its_own_moe_models_only():
    """nemo-automodel-2025: TE RMSNorm and a compiled SwiGLU (eager_elementwise off), RoPE through torch ops in the MoE
    models AutoModel implements itself (eager_rope); a dense model runs Hugging Face code with Liger's fused kernels.
    The 2026 stack fuses RoPE too (BackendConfig.rope_fusion)."""
    plan = {"tp": 1, "dp": 8, "ep": 8, "micro_batch": 1, "global_batch": 8}
    moe = resolve("qwen3-30b-a3b", plan, "h100-sxm", "nemo-automodel-2025")
    assert (moe.plan.eager_elementwise, moe.plan.eager_rope) == (False, True)
    dense = resolve("llama3-8b", {k: v for k, v in plan.items() if k != "ep"}, "h100-sxm", "nemo-automodel-2025")
    assert dense.plan.eager_rope is False and "Hugging Face" in dense.origin["eager_rope"]
    stated = resolve("llama3-8b", {**{k: v for k, v in plan.items() if k != "ep"}, "eager_rope": True}, "h100-sxm",
                     "nemo-automodel-2025")
    assert stated.plan.eager_rope is True                   # a stated field stands over the rule
    now = resolve("qwen3-30b-a3b", plan, "h100-sxm", "nemo-automodel")
    assert not now.plan.eager_elementwise and not now.plan.eager_rope
    assert stacks.get("automodel").id == "nemo-automodel"  # a name alone: the newest version
    assert stacks.get("automodel@2025").id == "nemo-automodel-2025"


def test_a_stack_version_states_only_what_differs(tmp_path, monkeypatch):
    """stacks/*.yaml ``base: ID``: the 2025 AutoModel file holds its id, version, era and the RoPE keys; every other key
    is the 2026 stack's. A base that is missing or circular is one line."""
    old, new = stacks.get("nemo-automodel-2025").to_dict(), stacks.get("nemo-automodel").to_dict()
    for sect in ("model", "plan", "rules", "sources"):
        assert {k: v for k, v in old[sect].items() if not k.startswith("eager_rope")} == new[sect]
    assert (old["family"], old["aliases"], old["name"]) == (new["family"], new["aliases"], new["name"])
    from roofline.base.errors import InputError
    monkeypatch.setattr(stacks, "HERE", tmp_path)
    (tmp_path / "a.yaml").write_text("id: a\nbase: b\n")
    (tmp_path / "b.yaml").write_text("id: b\nbase: a\n")
    (tmp_path / "c.yaml").write_text("id: c\nbase: nowhere\n")
    with pytest.raises(InputError, match="circular base"):
        stacks._read(tmp_path / "a.yaml")
    with pytest.raises(InputError, match="'nowhere' is not a stack"):
        stacks._read(tmp_path / "c.yaml")
