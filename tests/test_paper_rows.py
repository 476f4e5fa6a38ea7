"""How rows of papers' training reports are read: the stack a framework column names when it also names what that
framework is built on (GPT-NeoX "(Megatron + DeepSpeed)"), ZeRO-3 sharded within groups and replicated across them
(MiCS, DeepSpeed 0.9+; SageMaker's sharded data parallelism), a network phrase that converts a node's rate to the GPU's,
and text stating fused norm/activation kernels or Megatron's fused masked softmax (the attention that writes its score
matrix out)."""
import pytest

from roofline.spec import hardware, models, stacks
from roofline.views import validate as V

A100, NEOX = hardware.load("a100-sxm4-40gb"), models.load("gpt-neox-20b")


def _case(**over):
    row = {"case_id": "r", "source": "a paper (2023)", "model": "llama2-7b", "gpu_id": "a100-sxm4-40gb",
           "n_gpus": "16", "gpus_per_node": "8", "tp": "1", "pp": "1", "global_batch": "64", "micro_batch": "4",
           "seq_len": "2048", "precision": "bf16", "measured_iter_time_s": "10", "framework": "PyTorch FSDP"}
    row.update(over)
    return V.build_case(V.read_dicts([row])[0])


@pytest.mark.parametrize("column", ["GPT-NeoX (Megatron + DeepSpeed)", "gpt-neox, built on DeepSpeed and Megatron-LM",
                                    "GPT-NeoX"])
def test_a_framework_named_beside_its_engines_is_the_one_that_ran(column):
    stack, why = stacks.infer(column=column, text="Black et al. 2022", model=NEOX, hw=A100, dtype="fp16")
    assert stack.family == "gpt-neox", why
    # the engines' combination alone still names Megatron-DeepSpeed
    alone, _ = stacks.infer(column="Megatron + DeepSpeed", text="2022", model=NEOX, hw=A100, dtype="fp16")
    assert alone.family == "megatron-deepspeed"


def test_zero3_replicated_shard_groups_run_on_deepspeed_since_mics_and_not_before():
    case = _case(framework="SageMaker model parallelism, ZeRO-3 + MiCS", optimizer_sharding="zero3",
                 n_gpus="64", global_batch="256", notes="We shard a model across 16 GPUs (sharding group 16), 4 copies")
    assert case.spec.stack.id == "deepspeed-zero" and case.plan.dp_replicas == 4
    with pytest.raises(V.Skip, match="replicated shard groups|not 4 replicated"):
        _case(framework="DeepSpeed ZeRO-3", source="a paper (2021)", optimizer_sharding="zero3", n_gpus="64",
              global_batch="256", notes="sharding group 16", precision="fp16")


@pytest.mark.parametrize("text, gbps", [("ConnectX-6 HDR, 200 Gb/s -> 100 Gb/s per GPU", 100.0),
                                        ("8x200Gb/s HDR IB per node", 200.0), ("4 x 100 Gb RoCE per node", 50.0)])
def test_the_rate_said_per_gpu_is_read_not_a_rate_before_it(text, gbps):
    assert V.network_from_text(text, 8)[0] == gbps


def test_stated_fused_norm_and_activation_kernels_drop_the_eager_passes_and_cost_less():
    eager = _case()
    fused = _case(notes="fused rmsnorm and fused swiglu kernels, fused rotary")
    assert eager.plan.eager_elementwise and not fused.plan.eager_elementwise and fused.plan.eager_rope is False
    from roofline.model.predict import predict
    assert predict(fused.spec.model, fused.plan, fused.hw).step_time < predict(eager.spec.model, eager.plan, eager.hw).step_time


def test_a_fused_masked_softmax_is_the_unfused_attention_path():
    case = _case(framework="DeepSpeed", notes="fused masked-causal-softmax kernel", model="gpt3-6.7b")
    assert case.spec.model.attention == "unfused"
    assert _case(framework="DeepSpeed", notes="flash attention 2; masked softmax fusion",
                 model="gpt3-6.7b").spec.model.attention != "unfused"


def test_an_unstated_global_batch_under_pp_is_not_one_micro_batch_through_the_pipeline():
    """Megatron-LM's default global batch (micro-batch x dp) would price a pipelined row with one micro-batch, idle
    (pp-1)/pp of the step: such a row is skipped with the reason; without PP the default stands."""
    with pytest.raises(V.Skip, match="micro-batches per pipeline"):
        _case(framework="Megatron-LM", global_batch="", tp="1", pp="4", n_gpus="16", model="gpt3-6.7b")
    assert _case(framework="Megatron-LM", global_batch="", tp="1", pp="1", model="gpt3-6.7b").plan.global_batch == 64


def test_edge_stages_one_layer_lighter_as_the_text_says():
    """Zero Bubble PP's 22 layers on 8 stages ('both the initial and final pipeline stages possess one fewer
    transformer layer') run as a layout, not refused for 22 % 8."""
    case = _case(framework="Megatron-LM", source="Qi et al. 2024", n_layers="22", d_model="2304", n_heads="24",
                 model="GPT-3-like 1.5B", tp="1", pp="8", n_gpus="8", global_batch="144", micro_batch="6",
                 notes="both the initial and final pipeline stages possess one fewer transformer layer")
    assert case.plan.pipeline_layout == "Et*2|(t*3|)*6t*2L" and case.spec.model.vocab == 50257


def test_a_model_cell_with_qualifiers_names_its_preset_and_an_moe_row_keeps_its_experts():
    """'DeepSeek-V3 (671B total / 37B active)' is DeepSeek-V3: with EP stated and no expert columns the row is priced on
    the preset's experts, not refused as a dense model."""
    case = _case(framework="NeMo 25.04", source="dgxc-benchmarking (2025)", model="DeepSeek-V3 (671B total / 37B active)",
                 gpu_id="h100-sxm", n_layers="61", d_model="7168", n_heads="128", ffn_hidden="18432", mlp="swiglu",
                 vocab="129280", seq_len="4096", global_batch="4096", micro_batch="1", tp="2", pp="8", n_gpus="512",
                 ep="64", optimizer_sharding="distributed")
    assert case.spec.model.n_experts == 256 and case.plan.ep == 64


def test_megatron_lm_tflops_are_read_with_the_count_of_their_date():
    """Megatron-LM logs TFLOP/s with its num_floating_point_operations: whole s x s attention until core_v0.11.0,
    causal attention half from core_v0.12.0 (commit 8873b55d6a). A row stating TFLOP/s is timed with the count of its
    date, a NeMo row is not (NeMo logs its own count), and a run dated between the releases is skipped."""
    kw = dict(framework="Megatron-Core", model="llama3-8b", gpu_id="h100-sxm", n_gpus="8", tp="1", pp="1",
              global_batch="64", micro_batch="2", seq_len="8192", measured_iter_time_s="", measured_tflops_per_gpu="400")
    old, new = _case(source="Megatron-LM README, MCore v0.8", **kw), _case(source="a 2026 blog post", **kw)
    assert old.measured > new.measured          # the whole-attention count is the larger: the same rate, a longer step
    assert "core_v0.11.0" in old.note and "core_v0.12.0" in new.note
    for source, framework in (("a 2026 blog", "NeMo 25.04"), ("a 2025 blog", "Megatron-Core")):
        with pytest.raises(V.Skip):
            _case(**{**kw, "source": source, "framework": framework})


@pytest.mark.parametrize("pid, billions", [("nemotron-h-8b", 8), ("nemotron-h-47b", 47), ("nemotron-h-56b", 56)])
def test_nemotron_h_presets_are_the_hybrid_models_their_names_size(pid, billions):
    """NeMo's NemotronHConfig{8B,47B,56B}: Mamba-2, squared-ReLU MLP and attention layers by the hybrid pattern; the
    parameter count is the name's (Nemotron-H, arXiv:2504.03624), and a dgxc row naming the 56B is priced as hybrid."""
    from roofline.model.predict import predict
    from roofline.spec.config import Plan
    m = models.load(pid)
    assert set(m.hybrid_pattern) == {"M", "-", "*"} and len(m.hybrid_pattern) == m.n_layers
    params = predict(m, Plan(tp=1, pp=1, dp=8, global_batch=8), hardware.load("h100-sxm")).params
    assert abs(float(params) / 1e9 - billions) / billions < 0.05


def test_a_mamba_model_without_pattern_or_preset_is_skipped_not_priced_dense():
    with pytest.raises(V.Skip, match="Mamba / hybrid model without its layer pattern"):
        _case(model="Zamba-like 7B (hybrid Mamba-2/attention)", n_layers="81", d_model="3712", n_heads="32",
              vocab="32000", mlp="swiglu")


def test_a_row_that_says_it_ran_without_torch_compile_stays_eager_whatever_else_its_notes_say():
    notes = "No torch.compile, no Float8. In the compiled rows torch.compile is regional (per TransformerBlock)."
    assert _case(notes=notes).plan.eager_elementwise
    assert not _case(notes="torch.compile (regional)").plan.eager_elementwise


def test_a_stated_dispatcher_applies_to_an_moe_model_named_by_its_preset():
    """'Dispatcher DeepEP' on a row naming Qwen3-235B-A22B (experts from the preset, no expert columns): the DeepEP
    dispatch (deduplicated per node) is priced, and it is cheaper than the plain all-to-all across nodes."""
    kw = dict(framework="Megatron-Core", source="a model zoo (2025)", model="Qwen3-235B-A22B (MoE, 128 experts, top-8)",
              gpu_id="h100-sxm", n_gpus="256", tp="2", pp="8", interleave="4", ep="32", global_batch="2048",
              micro_batch="1", seq_len="4096", optimizer_sharding="distributed")
    deepep, plain = _case(notes="Dispatcher DeepEP", **kw), _case(notes="", **kw)
    assert deepep.plan.ep_dispatcher == "deepep" and plain.plan.ep_dispatcher == "alltoall"
    res = V.evaluate_cases([deepep, plain])
    assert res["t_ep_comm"][0] < res["t_ep_comm"][1]
    assert _case(notes="no DeepEP dispatcher", **kw).plan.ep_dispatcher == "alltoall"


def test_a_model_cell_saying_moe_without_experts_or_preset_is_skipped():
    with pytest.raises(V.Skip, match="MoE model"):
        _case(model="Internal-352B MoE (32 experts, top-3)", n_layers="60", d_model="4096", n_heads="32",
              vocab="65536", mlp="swiglu")


def test_a_local_batch_the_text_states_makes_the_global_batch_with_the_dp_of_the_layout():
    """torchtitan's docs state "Local batch size 8" (per data-parallel rank, CP ranks sharing it): global = 8 x dp;
    under PP the torchtitan-2024 stack splits it into pp micro-batches."""
    case = _case(framework="TorchTitan", source="pytorch/torchtitan docs/performance.md (2025-01)", model="llama3-8b",
                 global_batch="", micro_batch="", tp="1", pp="1", dp="4", cp="2", n_gpus="8", seq_len="8192",
                 notes="caption: FSDP 4, CP 2; Local batch size 8. Full activation checkpointing")
    assert case.plan.global_batch == 8 * 4 and "local batch 8 from the text" in case.note
    with pytest.raises(V.Skip, match="global_batch not stated"):
        _case(framework="TorchTitan", global_batch="", micro_batch="", tp="1", pp="1", dp="4", cp="2", n_gpus="8",
              notes="global batch size unknown")



def test_a_gpu_in_a_node_of_another_size_takes_the_bundled_profile_of_that_node():
    """gh200 is one superchip per node (its intra link is the CPU-GPU C2C); a row on GH200s four to a node (JUPITER,
    Alps) is priced on gh200-quad, whose NVLink joins the four and whose NICs are one per GPU; a node size no bundled
    profile describes keeps the stated profile (its gpus_per_node overridden as before)."""
    quad = _case(gpu_id="gh200", gpus_per_node="4", n_gpus="16", framework="Megatron-LM", source="a report (2025)")
    assert quad.hw.id == "gh200-quad" and "profile gh200-quad" in quad.note
    assert quad.hw.intra.bandwidth > hardware.load("gh200").inter.bandwidth
    assert _case(gpu_id="gh200", gpus_per_node="1", n_gpus="16").hw.id == "gh200"
    same = _case(gpu_id="a100-sxm4-40gb", gpus_per_node="4", n_gpus="16")
    assert same.hw.id == "a100-sxm4-40gb" and same.hw.gpus_per_node == 4      # calibrated a100-perlmutter not taken


def test_a_head_width_and_qk_layernorm_the_notes_state_are_read_when_their_columns_are_blank():
    """Megatron-LM's --kv-channels (a Qwen3-like 32B: 64 heads of 128 on d_model 5120, projections wider than
    d_model) and qk_layernorm: true; a Mamba row's head_dim is its Mamba heads' and is not read."""
    row = dict(model="", n_layers="8", d_model="5120", n_heads="64", n_kv_heads="8", ffn_hidden="25600", mlp="swiglu",
               vocab="151936", framework="Megatron-LM", source="a report (2025)")
    plain = _case(**row)
    wide = _case(**row, notes="kv_channels 128; qk_layernorm: true")
    assert plain.spec.model.head_dim is None and not plain.spec.model.qk_norm
    assert wide.spec.model.head_dim == 128 and wide.spec.model.qk_norm and "head_dim 128 from the text" in wide.note
    from roofline.model.predict import predict
    assert predict(wide.spec.model, wide.plan, wide.hw).params > predict(plain.spec.model, plain.plan, plain.hw).params
    assert not _case(**row, notes="qk_layernorm: false").spec.model.qk_norm
    assert V.head_dim_from_text("Mamba-2 state 128, head_dim 64") == (64, "head_dim 64")     # read only without Mamba


def test_a_text_that_says_its_precision_is_unstated_is_not_read_as_a_format_it_mentions():
    """'precision (the paper discusses BF16 and FP8 generally; the table's precision is not stated)' and a later
    mention of 'their FP8 production training' leave the stack's default (bf16), where a plain 'FP8 GEMMs' is read."""
    silent = ("Micro-batch, precision (the paper discusses BF16 mixed precision and FP8 generally; Table 3's precision "
              "is not stated), ZeRO stage not stated. Sec 7 mentions SwiGLU in their FP8 production training.")
    from roofline.spec.config import LOW_PRECISION_DTYPES
    assert _case(precision="", framework="Megatron-LM", notes=silent, model="gpt3-6.7b").plan.dtype \
        not in LOW_PRECISION_DTYPES
    assert _case(precision="", framework="Megatron-LM", notes="FP8 GEMMs (Transformer Engine)",
                 source="a paper (2024)", model="llama3-8b", gpu_id="h100-sxm").plan.dtype in LOW_PRECISION_DTYPES


def test_flash_attention_named_in_a_cell_runs_on_a_stack_whose_default_writes_the_scores_out():
    """Megatron-LM of 2022-2023 runs its unfused core attention unless --use-flash-attn: a model cell saying
    'FlashAttention' takes the flash path of the row's date (FlashAttention-2 from 2023-07), and costs less; a note
    citing the FlashAttention paper does not."""
    kw = dict(framework="Megatron-LM", model="GPT-7B (decoder-only GPT with RoPE + FlashAttention)", n_layers="32",
              d_model="4096", n_heads="32", vocab="50257", gpu_id="h100-sxm")
    named = _case(source="Peng et al. 2023, arXiv:2310.18313", **kw)
    plain = _case(source="Peng et al. 2023, arXiv:2310.18313", **{**kw, "model": "GPT-7B"})
    assert plain.spec.model.attention == "unfused" and named.spec.model.attention == "flash"
    assert _case(source="Dao et al. 2022, arXiv:2205.14135", **kw).spec.model.attention == "flash-v1"
    assert _case(source="a 2023 paper", notes="hyperparameters as in the FlashAttention paper",
                 **{**kw, "model": "GPT-7B"}).spec.model.attention == "unfused"
    from roofline.model.predict import predict
    assert predict(named.spec.model, named.plan, named.hw).step_time \
        < predict(plain.spec.model, plain.plan, plain.hw).step_time


def test_expert_parallelism_the_text_keeps_inside_a_node_runs_its_experts_unsplit():
    """Megatron-Core's expert TP defaults to tp, which with ep 8 x tp 8 spreads an expert group over 8 nodes; a text
    saying 'EP within each node' runs etp 1 (the group on one node's NVLink): its all-to-all priced on NVLink, less
    time than across nodes."""
    kw = dict(framework="Megatron-LM", model="MoE", n_layers="8", d_model="4096", n_heads="32", vocab="65536",
              n_experts="32", top_k="3", moe_ffn_hidden="14336", ffn_hidden="14336", mlp="swiglu", gpu_id="h800",
              n_gpus="128", tp="8", pp="1", ep="8", global_batch="64", micro_batch="1", seq_len="4096",
              source="a 2025 paper")
    spread, kept = _case(**kw), _case(notes="attention TP and EP within each node", **kw)
    assert spread.plan.etp in (None, 8) and kept.plan.etp == 1
    from roofline.model.predict import evaluate, inputs
    ep_time = [float(evaluate(inputs(c.spec.model, c.plan, c.hw))["t_ep_comm"]) for c in (kept, spread)]
    assert 0 < ep_time[0] < ep_time[1]


@pytest.mark.parametrize("text", ["the yaml sets --expert-tensor-parallel-size 1", "expert_tensor_parallel_size=1",
                                  "ETP=1"])
def test_an_expert_tensor_parallel_size_the_text_states_is_read_in_any_spelling(text):
    kw = dict(framework="Megatron-Core", model="MoE", n_layers="8", d_model="4096", n_heads="32", vocab="65536",
              n_experts="32", top_k="4", moe_ffn_hidden="1536", ffn_hidden="1536", mlp="swiglu", gpu_id="h100-sxm",
              n_gpus="64", tp="4", pp="1", ep="8", global_batch="64", micro_batch="1", seq_len="4096",
              source="a 2025 benchmark page")
    assert _case(notes=text, **kw).plan.etp == 1
    assert _case(**kw).plan.etp in (None, 4)


def test_a_dispatcher_the_framework_cell_names_is_read():
    kw = dict(model="MoE", n_layers="8", d_model="4096", n_heads="32", vocab="65536", n_experts="32", top_k="4",
              moe_ffn_hidden="1536", ffn_hidden="1536", mlp="swiglu", gpu_id="h100-sxm", n_gpus="64", tp="1",
              pp="1", ep="8", global_batch="64", micro_batch="1", seq_len="4096", source="a 2025 benchmark page")
    assert _case(framework="Megatron-Core, MoE dispatcher DeepEP", **kw).plan.ep_dispatcher == "deepep"
    assert _case(framework="Megatron-Core", **kw).plan.ep_dispatcher == "alltoall"


def test_a_gb200_row_counting_its_compute_tray_keeps_the_nvl72_domain_its_text_names():
    """GB200 NVL72: a scheduler's node is the compute tray of 4, the NVLink domain 72. A row stating 4 GPUs per node
    keeps EP 64 on NVLink (the domain its text names, else the profile's); a text naming GB200 NVL4 keeps its 4."""
    kw = dict(framework="Megatron-Core", model="qwen3-235b-a22b", gpu_id="gb200", n_gpus="256", gpus_per_node="4",
              tp="1", pp="4", ep="64", global_batch="1024", micro_batch="1", seq_len="4096", precision="bf16",
              source="a 2026 benchmark page")
    named, bare = _case(interconnect="GB200 NVL72 (NVLink Domain Size: 72)", **kw), _case(**kw)
    nvl4 = _case(interconnect="GB200 NVL4 boards", **kw)
    assert named.hw.gpus_per_node == 72 and bare.hw.gpus_per_node == 72 and nvl4.hw.gpus_per_node == 4
    from roofline.model.predict import evaluate, inputs
    ep = [float(evaluate(inputs(c.spec.model, c.plan, c.hw))["t_ep_comm"]) for c in (named, nvl4)]
    assert ep[0] < ep[1]


def test_recompute_modules_quoted_from_a_command_line_are_what_selective_recomputation_recomputes():
    kw = dict(framework="Megatron-Core", model="qwen3-235b-a22b", gpu_id="h100-sxm", n_gpus="256", tp="4", pp="8",
              ep="8", global_batch="256", micro_batch="1", seq_len="16384", precision="bf16", recompute="selective",
              source="a 2026 benchmark page")
    quoted = _case(notes="--recompute-granularity selective --recompute-modules layernorm moe --log-throughput", **kw)
    assert quoted.plan.recompute_modules == "layernorm,moe" and _case(**kw).plan.recompute_modules == "core_attn"


def test_a_maxtext_remat_policy_the_text_names_is_priced_as_what_it_saves():
    """MaxText's 'minimal*' / 'save_*' policies keep every matmul output and redo element-wise ops only: priced as no
    recomputation, where a bare 'selective' on MaxText is refused with that advice."""
    kw = dict(framework="MaxText (JAX/XLA)", model="llama2-7b", gpu_id="h100-sxm", n_gpus="8", tp="1", pp="1",
              global_batch="16", micro_batch="2", seq_len="4096", recompute="selective", source="JAX-Toolbox 2024")
    assert _case(notes="Flash | minimal_flash | remat_policy=minimal_flash", **kw).plan.recompute == "none"
    assert _case(notes="remat_policy=full", **{**kw, "recompute": ""}).plan.recompute == "full"
    with pytest.raises(V.Skip, match="cannot run recompute 'selective'"):
        _case(**kw)


def test_maxtext_logged_tflops_are_read_with_the_count_of_their_date():
    """MaxText counts whole s x s attention before 2025-07-18 and half of it after (maxtext_utils.py): the same
    logged TFLOP/s means a longer step on the earlier count, which has more FLOPs; an undated row is skipped."""
    kw = dict(framework="MaxText", model="llama2-7b", gpu_id="h100-sxm", n_gpus="8", tp="1", pp="1",
              global_batch="32", micro_batch="4", seq_len="4096", recompute="", measured_iter_time_s="",
              measured_tflops_per_gpu="400", notes="remat_policy=minimal_flash")
    early, late = _case(source="a 2024 benchmark page", **kw), _case(source="a benchmark page of 2025-10", **kw)
    assert "whole s x s" in early.note and "causal attention half" in late.note
    assert early.measured > late.measured
    with pytest.raises(V.Skip, match="not dated outside July 2025"):
        _case(source="a benchmark page", **kw)


def test_gradient_accumulation_to_fit_in_memory_runs_the_largest_micro_batch_that_fits():
    """'gradient accumulation to fit into available GPU memory' with no micro-batch stated: the largest micro-batch
    below the rank's batch that divides it and fits, not the stack's default of 1."""
    kw = dict(framework="Megatron-LM", model="GPT-2 medium", n_layers="24", d_model="1024", n_heads="16",
              ffn_hidden="4096", mlp="gelu", vocab="50257", seq_len="1024", global_batch="512", micro_batch="",
              tp="", pp="", gpu_id="a100-sxm4-40gb", n_gpus="8", source="Dao et al. 2022", precision="fp16")
    fit = _case(notes="effective batch size of 512, gradient accumulation 'to fit into available GPU memory'", **kw)
    plain = _case(**kw)
    assert plain.plan.micro_batch == 1 and 1 < fit.plan.micro_batch < 64 and 64 % fit.plan.micro_batch == 0
    from roofline.model.predict import evaluate, inputs, overshoot
    out = evaluate(inputs(fit.spec.model, fit.plan, fit.hw))
    assert float(overshoot(out["memory"], out["mem_reserve"], fit.hw)) <= 0
    local = fit.plan.global_batch // fit.plan.dp
    larger = [d for d in range(fit.plan.micro_batch + 1, local) if local % d == 0]
    assert larger
    for mb in larger:       # every larger micro-batch below the rank's batch would not fit
        plan = __import__("dataclasses").replace(fit.plan, micro_batch=mb)
        out = evaluate(inputs(fit.spec.model, plan, fit.hw))
        assert float(overshoot(out["memory"], out["mem_reserve"], fit.hw)) > 0


def test_a_run_is_dated_by_its_source_cell_not_by_the_papers_its_notes_cite():
    """A 2024 NeMo launcher table whose notes cite GPT-3 (Brown et al. 2020) and arXiv:2205.05198 for the architecture
    and FLOP count ran on the stack of 2024, not Megatron-LM 2.x; a release after the stack's name ('NeMo Megatron
    24.11') dates the run ahead of such years."""
    kw = dict(framework="NeMo Megatron (NeMo Framework Launcher)", model="gpt3-175b", gpu_id="h100-sxm",
              n_gpus="128", tp="4", pp="8", global_batch="256", micro_batch="1", seq_len="2048", precision="bf16",
              notes="Arch: GPT-3 175B (Brown et al. 2020); model FLOPs per Appendix A of arXiv:2205.05198")
    dated = _case(source="NVIDIA/NeMo-Framework-Launcher examples/README.md @ 0d09460 (2024-03-12)", **kw)
    assert dated.spec.stack.id == "megatron-core", dated.stack_reason
    assert _case(source="a benchmark table", **kw).spec.stack.id != "megatron-core"
    released = _case(source="a benchmark table", **{**kw, "framework": "NeMo Megatron 24.11"})
    assert released.spec.stack.id == "megatron-core", released.stack_reason


def test_a_sharded_row_whose_dp_counts_only_its_replicas_shards_over_the_ranks_left():
    """'FSDP=128, DP=16' on 2048 GPUs (MaxText's ici/dcn fsdp x data): tp x pp x dp leaves 128 ranks, which shard the
    state inside each of the 16 replicas (HSDP), not an error n_gpus != tp x pp x dp."""
    kw = dict(framework="MaxText", model="llama2-70b", gpu_id="h100-sxm", tp="1", pp="1",
              micro_batch="2", seq_len="4096", optimizer_sharding="fsdp", source="a 2024 benchmark table",
              recompute="full")
    case = _case(n_gpus="2048", dp="16", global_batch="4096", **kw)
    assert case.plan.dp == 2048 and case.plan.dp_replicas == 16
    alone = _case(n_gpus="64", dp="1", global_batch="128", **kw)
    assert alone.plan.dp == 64 and alone.plan.dp_replicas == 1
    with pytest.raises(V.Skip):     # not sharded: the layout does not add up
        _case(n_gpus="64", dp="1", global_batch="128", **{**kw, "optimizer_sharding": "distributed"})


def test_a_step_time_whose_source_withholds_the_batch_is_skipped_a_rate_is_priced():
    kw = dict(framework="Megatron-LM", model="llama2-13b", gpu_id="a100-sxm4-80gb", n_gpus="32", tp="1", pp="1",
              global_batch="", micro_batch="1", seq_len="2048", source="a 2023 paper",
              notes="global batch size not stated in the repository")
    with pytest.raises(V.Skip, match="global_batch not stated .*step time"):
        _case(**{**kw, "measured_iter_time_s": "53.8"})
    assert _case(**{**kw, "measured_iter_time_s": "", "tokens_per_s_per_gpu": "2000"}).plan.global_batch == 32
    # a withheld micro-batch or per-GPU batch is not a withheld global batch: the stated micro-batch x dp is priced
    for notes in ("micro-batch not stated in the paper (1 from the launch script)",
                  "micro batch size not given; 1 read from the config", "per-GPU batch not reported"):
        assert _case(**{**kw, "measured_iter_time_s": "53.8", "notes": notes}).plan.global_batch == 32, notes
    with pytest.raises(V.Skip, match="global_batch not stated .*step time"):
        _case(**{**kw, "measured_iter_time_s": "53.8", "notes": "micro-batch 1; global batch not stated"})


def test_a_block_share_is_read_from_the_stated_hfu_and_mfu_on_a_stack_that_recomputes_whole_blocks():
    """fms-fsdp's 'Selective AC' is a share of the blocks; the source's HFU counts their recomputed forwards (2 N r of
    6 N): HFU 0.59 / MFU 0.51 -> r = 3 (0.59 / 0.51 - 1) = 0.47, 19 of 40 blocks; without both figures: refused."""
    kw = dict(framework="PyTorch FSDP (fms-fsdp)", model="llama2-13b", gpu_id="a100-sxm4-80gb", n_gpus="128",
              tp="1", pp="1", global_batch="256", micro_batch="2", seq_len="4096", recompute="selective",
              optimizer_sharding="fsdp", source="PyTorch blog 2024-03", tokens_per_s_per_gpu="1800",
              measured_iter_time_s="")
    case = _case(notes="Table 1 row 13B: 1800 tokens/sec/GPU, MFU 0.51, HFU 0.59", **kw)
    assert case.plan.recompute == "full" and case.plan.recompute_fraction == pytest.approx(19 / 40)
    with pytest.raises(V.Skip, match="cannot run recompute 'selective'"):
        _case(notes="Table 1 row 13B: 1800 tokens/sec/GPU, MFU 0.51", **kw)


@pytest.mark.parametrize("text, dispatcher, overlap", [("DeepEP; EP overlap; VPP12", "deepep", 1.0),
                                                       ("DISPATCHER=hybridep A2A_OVERLAP=1 TP=1", "hybridep", 1.0),
                                                       ("A2A_OVERLAP=0; no DeepEP", "alltoall", 0.0),
                                                       ("the DeepEP paper's kernels were not used", "alltoall", 0.0)])
def test_a_dispatcher_and_ep_overlap_named_in_a_recipe_summary_are_read(text, dispatcher, overlap):
    kw = dict(framework="Megatron-Core", model="qwen3-235b-a22b", gpu_id="h100-sxm", n_gpus="256", tp="2", pp="4",
              ep="16", interleave="12", global_batch="3072", micro_batch="1", seq_len="4096", precision="bf16",
              source="a 2026 recipe table")
    case = _case(notes=text, **kw)
    assert case.plan.ep_dispatcher == dispatcher and case.plan.overlap_ep == overlap


@pytest.mark.parametrize("name, vocab", [("GPT-style 175B", 50257), ("GPT-like 1.5B (Zero Bubble)", 50257),
                                         ("a 7B decoder (GPTQ-free)", None)])
def test_a_gpt_style_model_takes_megatrons_gpt_tokenizer(name, vocab):
    from roofline.spec import families
    found = families.vocab_for(name)
    assert (found[0] if found else None) == vocab


@pytest.mark.parametrize("column", ["llm.c (C/CUDA)", "llm.c (C/CUDA, cuBLAS/cuDNN, MPI/NCCL)", "karpathy/llm.c"])
def test_llm_c_runs_on_its_own_stack_with_its_recipes_micro_batch(column):
    """llm.c (karpathy/llm.c train_gpt2.cu) is its own stack: a row that names it and states no micro-batch runs the
    whole local batch as one micro-batch (its GPT-2 recipes set -d = B x T x GPUs), with cuDNN's flash attention, bf16
    gradients and ZeRO-1 of its recipes; before, it stood in as Megatron-Core and priced 512 micro-batches of one
    sequence."""
    case = _case(framework=column, model="gpt3-125m", gpu_id="h100-sxm", n_gpus="8", global_batch="512",
                 micro_batch="", seq_len="1024", source="llm.c discussion (2024)")
    assert case.spec.stack.id == "llmc" and case.plan.micro_batch == 64 and case.plan.dp == 8
    assert case.spec.model.attention == "cudnn" and case.plan.grad_dtype == "bf16"
    assert case.plan.sharding == "distributed"
    # a stated micro-batch is kept, the rest accumulated
    assert _case(framework=column, model="gpt3-125m", gpu_id="h100-sxm", n_gpus="8", global_batch="512",
                 micro_batch="16", seq_len="1024").plan.micro_batch == 16
    # llm.c has no tensor or pipeline parallelism
    with pytest.raises(V.Skip):
        _case(framework=column, model="gpt3-125m", gpu_id="h100-sxm", n_gpus="8", global_batch="512", tp="2",
              seq_len="1024")


@pytest.mark.parametrize("column", ["nanochat (PyTorch, torch.compile, FA3, DistMuonAdamW)", "karpathy/nanochat"])
def test_nanochat_runs_on_its_own_stack_and_its_zero_2_is_a_distributed_optimizer(column):
    """nanochat is its own stack: a row that names it and calls its optimizer "ZeRO-2" (DistMuonAdamW's docstring) runs
    the distributed optimizer it is (whole gradients through backward, reduce-scattered in step(), not behind the
    backward), Muon on the matrices and fp32 gradients; before, the "ZeRO-2" sent it to the DeepSpeed ZeRO stack,
    which trains with Adam and reduces the gradients behind the backward."""
    kw = dict(framework=column, model="gpt3-760m", gpu_id="h100-sxm", n_gpus="8", global_batch="256",
              micro_batch="16", seq_len="2048", source="karpathy/nanochat dev/LEADERBOARD.md (2026)",
              optimizer_sharding="zero2", notes="Muon+AdamW optimizer (DistMuonAdamW: 'ZeRO-2 style')")
    case = _case(**kw)
    assert case.spec.stack.id == "nanochat", case.stack_reason
    assert case.plan.sharding == "distributed" and case.plan.optimizer == "muon"
    assert case.plan.overlap_grad_reduce == 0.0 and case.plan.grad_dtype == "fp32"
    # its --fp8 is the tensorwise (current-scaling) recipe
    assert _case(**{**kw, "precision": "fp8"}).plan.dtype == "fp8-cs"
    # the same "zero2" on a DeepSpeed row stays ZeRO-2
    ds = _case(**{**kw, "framework": "DeepSpeed", "notes": "ZeRO stage 2"})
    assert ds.spec.stack.family == "deepspeed" and ds.plan.sharding == "zero2"
    # nanochat has no tensor parallelism
    with pytest.raises(V.Skip):
        _case(**{**kw, "tp": "2"})


def test_a_global_batch_the_text_states_in_tokens_is_read_when_no_batch_column_is_given():
    """A rate row with every batch column blank whose text says "batch size of 4M tokens" runs that many tokens per
    step (binary 4 x 2^20 over 2048: 2048 sequences); a text that says the batch is not stated, or states two, is
    skipped as before."""
    base = dict(micro_batch="", global_batch="", measured_iter_time_s="", tokens_per_s_per_gpu="380", tp="8",
                pp="1", n_gpus="64", model="llama2-7b", seq_len="2048")
    case = _case(**base, notes="Table 2: batch size 4M tokens; sequence length 2048")
    assert case.plan.global_batch == 2048
    for notes in ("global batch not stated (training batch size 4M tokens)",
                  "batch size 4M tokens for 7B and batch size 1M tokens for 65B", "no batch stated"):
        with pytest.raises(V.Skip, match="global_batch not stated"):
            _case(**base, notes=notes)
