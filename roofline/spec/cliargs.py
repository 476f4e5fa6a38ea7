"""The flags every command shares (model shape, plan, hardware) and how they become a Spec.

Below the command modules: ``cli`` and each command's ``register`` import this module; it imports no command.
Long flags accept dashed and underscored spellings alike (``--d-model`` and ``--d_model``).
"""
from __future__ import annotations

import argparse

from .config import MODEL_ALIASES, ATTENTION, CUDA_GRAPHS, CP_KINDS, DISPATCHERS, DTYPES, GRAD_DTYPES, MOMENT_DTYPES, OPTIMIZERS, LOSS_KERNELS, MLPS, NORMS, POSITIONS, RECOMPUTE, RECOMPUTE_MODULES, GRAPH_MODULES, SCHEDULES, SHARDING, SHARDING_BY_STAGE

# (flag, dest, type, help) of the model shape: the flag is the field's name; config.MODEL_ALIASES adds the short
# spellings (--layers, --heads, --kv-heads, --experts, --capacity)
MODEL_FLAGS = [
    ("n-layers", "n_layers", int, "transformer layers"),
    ("d-model", "d_model", int, "hidden size"),
    ("n-heads", "n_heads", int, "attention heads"),
    ("n-kv-heads", "n_kv_heads", int, "key/value heads (GQA/MQA); default = heads"),
    ("ffn-hidden", "ffn_hidden", int, "MLP inner size (per expert); default 4h (gelu) or LLaMA's 8h/3 (swiglu)"),
    ("vocab", "vocab", int, "vocabulary size (padded to 128*tp internally)"),
    ("seq-len", "seq_len", int, "sequence length"),
    ("n-experts", "n_experts", int, "MoE experts (1 = dense)"),
    ("top-k", "top_k", int, "experts per token"),
    ("capacity-factor", "capacity_factor", float, "MoE capacity factor"),
    ("head-dim", "head_dim", int, "width of one attention head (Megatron-Core kv_channels); default d_model / heads"),
    ("moe-ffn-hidden", "moe_ffn_hidden", int, "inner size of one routed expert (Megatron-Core moe_ffn_hidden_size); "
     "default ffn-hidden"),
    ("n-shared-experts", "n_shared_experts", int, "shared experts every token passes through (DeepSeek); default 0"),
    ("shared-ffn-hidden", "shared_ffn_hidden", int, "total inner size of the shared experts (Megatron-Core "
     "moe_shared_expert_intermediate_size); default n-shared-experts x moe-ffn-hidden"),
    ("first-dense-layers", "first_dense_layers", int, "leading layers with a dense MLP of ffn-hidden in a MoE model "
     "(DeepSeek-V3: 3); default 0"),
    ("moe-latent-size", "moe_latent_size", int, "LatentMoE: width the routed experts read and write (Megatron-Core "
     "moe_latent_size; Nemotron 3 Super); default d_model"),
    ("mtp-layers", "mtp_layers", int, "multi-token-prediction layers on the last stage (Megatron-Core "
     "--mtp-num-layers); default 0"),
    ("q-lora-rank", "q_lora_rank", int, "MLA query compression rank; default: queries projected from d_model directly"),
    ("kv-lora-rank", "kv_lora_rank", int, "MLA key/value compression rank (setting it makes attention MLA; then "
     "--qk-nope-head-dim, --qk-rope-head-dim and --v-head-dim are required)"),
    ("qk-nope-head-dim", "qk_nope_head_dim", int, "MLA query/key head width without RoPE (Megatron-Core qk_head_dim)"),
    ("qk-rope-head-dim", "qk_rope_head_dim", int, "MLA query/key RoPE head width (Megatron-Core qk_pos_emb_head_dim)"),
    ("v-head-dim", "v_head_dim", int, "MLA value head width"),
    ("swa-window", "swa_window", int, "sliding-window attention: keys per query (Megatron-Core window_size)"),
    ("swa-every", "swa_every", int, "every n-th layer keeps full attention, the others are windowed (Megatron-Core "
     "window_attn_skip_freq); default: every layer windowed"),
    ("hybrid-pattern", "hybrid_pattern", str, "hybrid Mamba-2 layer pattern, one character per layer: M Mamba-2, * "
     "attention, - dense MLP, E MoE (Megatron-Core --hybrid-override-pattern)"),
    ("mamba-num-heads", "mamba_num_heads", int, "Mamba-2 heads; default expand x d_model / head width"),
    ("mamba-head-dim", "mamba_head_dim", int, "Mamba-2 head width; default 64"),
    ("mamba-state-dim", "mamba_state_dim", int, "Mamba-2 state size; default 128"),
    ("mamba-num-groups", "mamba_num_groups", int, "Mamba-2 B/C groups; default 8"),
    ("mamba-d-conv", "mamba_d_conv", int, "Mamba-2 causal conv1d width; default 4"),
    ("mamba-expand", "mamba_expand", int, "Mamba-2 inner width / d_model; default 2"),
    ("mamba-chunk-size", "mamba_chunk_size", int, "Mamba-2 SSD chunk length; default 128"),
]
# the model's on/off fields: (flag, dest, help of --flag, help of --no-flag)
MODEL_SWITCHES = [
    ("biases", "biases", "bias vectors on the linear layers (GPT-2/3)", "no biases (LLaMA)"),
    ("dropout", "dropout", "dropout after attention and MLP (its masks stored for backward)", "no dropout"),
    ("causal", "causal", "causal attention: the kernel skips masked blocks, half the score FLOPs", "full (bidirectional) "
     "attention"),
    ("qk-norm", "qk_norm", "a norm on each head's query and key after the QKV projection (Qwen3, OLMo 2; Megatron-Core "
     "--qk-layernorm)", "no QK-norm"),
]
PLAN_FLAGS = [
    ("tp", "tp", int, "tensor-parallel degree"),
    ("pp", "pp", int, "pipeline-parallel degree"),
    ("dp", "dp", int, "data-parallel degree"),
    ("cp", "cp", int, "context-parallel degree (ring attention)"),
    ("ep", "ep", int, "expert-parallel degree (ep x etp must divide tp x cp x dp)"),
    ("etp", "etp", int, "expert tensor-parallel degree of the routed experts (default tp)"),
    ("micro-batch", "micro_batch", int, "micro-batch size (sequences)"),
    ("global-batch", "global_batch", int, "global batch (sequences) = micro-batch x micro-batches x dp"),
    ("interleave", "interleave", int, "virtual pipeline stages per GPU (interleaved 1F1B)"),
    ("overlap-grad-reduce", "overlap_grad_reduce", float, "fraction of DP gradient reduce hidden behind backward"),
    ("overlap-param-gather", "overlap_param_gather", float, "fraction of parameter all-gather hidden behind forward"),
    ("overlap-tp", "overlap_tp", float, "fraction of TP/SP communication hidden behind GEMMs"),
    ("overlap-ep", "overlap_ep", float, "fraction of the MoE all-to-all hidden behind another micro-batch's compute "
     "(Megatron-Core --overlap-moe-expert-parallel-comm)"),
    ("overlap-pp", "overlap_pp", float, "fraction of pipeline send/recv hidden"),
    ("overlap-cp", "overlap_cp", float, "fraction of ring-attention exchange hidden behind attention"),
]


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line (``roofline transformer: error: ...; see --help``) with
    exit status 2, instead of the usage block; subcommand parsers inherit the class."""

    def error(self, message):
        self.exit(2, f"{self.prog.replace('python -m ', '')}: error: {message}; see --help\n")


def number(kind=float, low: float = 0.0, strict: bool = True):
    """argparse type: a finite number above ``low`` (at or above it when not ``strict``)."""
    import math

    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        if not math.isfinite(v) or v < low or (strict and v == low):
            rel = ">" if strict else ">="
            raise argparse.ArgumentTypeError(f"must be a finite number {rel} {low:g}, got {text!r}")
        return v
    parse.__name__ = kind.__name__       # argparse names the type in its messages
    return parse


def precision_name(text: str) -> str:
    """argparse type of --dtype / --precision: a recipe as its sources spell it (FP8-CS, fp8-delayed, MXFP8) -> its
    name in DTYPES (base/normalize.py precision)."""
    from ..base import normalize
    from ..base.errors import InputError
    try:
        return normalize.precision(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def flag(p: argparse.ArgumentParser, name: str, *aliases: str, **kw):
    """Add --name and, when it has a dash, --name_with_underscores; likewise each alias."""
    names = []
    for n in (name, *aliases):
        names += [f"--{n}"] + ([f"--{n.replace('-', '_')}"] if "-" in n else [])
    return p.add_argument(*names, **kw)


def add_gpus_flag(p: argparse.ArgumentParser) -> None:
    """--gpus N of the commands that price one plan: the GPU count, from which the resolver derives dp = N / (tp x pp
    x cp) when --dp is not given (and refuses a --dp that disagrees). ``search`` has its own --gpus (a count or a
    range to sweep)."""
    flag(p, "gpus", dest="n_gpus", type=number(int, 1, strict=False),
         help="GPU count: dp = gpus / (tp x pp x cp) unless --dp is given (then they must agree)")


def add_model_plan_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (override the preset's fields)")
    flag(g, "model", help="model preset id (see `models list`) or a preset YAML path")
    short = {field: alias.replace("_", "-") for alias, field in MODEL_ALIASES.items()}
    for name, dest, typ, hlp in MODEL_FLAGS:
        flag(g, name, *([short[dest]] if dest in short else []), dest=dest, type=typ, help=hlp)
    flag(g, "mlp", choices=MLPS, help="MLP activation: gelu (4h), swiglu (gated, 3 GEMMs), "
         "squared_relu")
    flag(g, "norm", choices=NORMS, help="normalisation layer (priced as a memory-bound kernel)")
    flag(g, "attention", choices=ATTENTION, help="attention kernel (framework default)")
    flag(g, "position", choices=POSITIONS, help="position encoding: learned table (an embedding), rotary, ALiBi (a bias inside attention: no table, no rotation), or none (Megatron-Core position_embedding_type none: the Mamba layers carry the order)")
    flag(g, "tied", dest="tied_embeddings", action="store_true", default=None,
         help="tie the embedding and LM-head weights (one V x h matrix; GPT-2/3 style)")
    flag(g, "untied", dest="tied_embeddings", action="store_false",
         help="separate LM-head weights (LLaMA style: a second V x h matrix and its gradients)")
    for name, dest, on, off in MODEL_SWITCHES:
        flag(g, name, dest=dest, action="store_true", default=None, help=f"{on}; default: the preset's")
        flag(g, f"no-{name}", dest=dest, action="store_false", help=off)
    g = p.add_argument_group("parallel plan")
    for name, dest, typ, hlp in PLAN_FLAGS:
        flag(g, name, dest=dest, type=typ, help=hlp)
    flag(g, "schedule", choices=SCHEDULES, help="pipeline schedule (default: the stack's for an unstated one: 1f1b, interleaved where "
         "v > 1; dualpipe under hai-llm, gpipe under maxtext, zb1p under zero-bubble; zb1p / zb2p: the zero-bubble "
         "schedules, weight gradients deferred into the bubble, one stage per rank)")
    flag(g, "sequence-parallel", dest="sequence_parallel", action="store_true", default=None,
         help="Megatron sequence parallelism (norms and dropout split over TP; all-gather/reduce-scatter "
              "instead of all-reduce); default: the stack's, only with tp > 1")
    flag(g, "no-sequence-parallel", dest="sequence_parallel", action="store_false", help="no sequence parallelism")
    flag(g, "tp-async-dgrad", dest="tp_async_dgrad", action="store_true", default=None,
         help="TP backward: dgrad all-reduce/reduce-scatter async beside the wgrad GEMM, SP input re-gather beside the "
              "dgrad GEMM (Megatron-LM LinearWithGradAccumulationAndAsyncCommunication); default: the stack's")
    flag(g, "no-tp-async-dgrad", dest="tp_async_dgrad", action="store_false",
         help="TP backward collectives mirror the forward's, synchronous (Megatron-LM 2021, Megatron-DeepSpeed, GPT-NeoX)")
    flag(g, "wgrad-fusion", dest="wgrad_fusion", action="store_true", default=None,
         help="weight-gradient GEMMs accumulate into the main-grad buffer (Megatron gradient_accumulation_fusion, "
              "TE fuse_wgrad_accumulation); default: the stack's")
    flag(g, "no-wgrad-fusion", dest="wgrad_fusion", action="store_false",
         help="weight-gradient GEMMs write their output (torch autograd, DeepSpeed, FSDP, --no-gradient-accumulation-fusion)")
    flag(g, "per-expert-kernels", dest="per_expert_kernels", action="store_true", default=None,
         help="the routed experts' GEMMs and casts launch one local expert at a time (Transformer Engine GroupedLinear, "
              "Megatron-Core); default: the stack's")
    flag(g, "no-per-expert-kernels", dest="per_expert_kernels", action="store_false",
         help="one grouped kernel for all local experts (torch._grouped_mm: torchtitan, NeMo AutoModel; a fused grouped MLP)")
    flag(g, "fused-moe-mlp", dest="fused_moe_mlp", action="store_true", default=None,
         help="the routed experts run Transformer Engine's fused grouped MLP (MXFP8/NVFP4): activation and casts in "
              "the GEMMs' epilogues (Megatron-Bridge 'CuteDSL fused grouped MLP', Megatron-Core's TE op fuser); "
              "implies --no-per-expert-kernels")
    flag(g, "eager-elementwise", dest="eager_elementwise", action="store_true", default=None,
         help="RMSNorm, SwiGLU and RoPE run as separate eager PyTorch ops (no torch.compile, no fused kernels); "
              "default: the stack's")
    flag(g, "no-eager-elementwise", dest="eager_elementwise", action="store_false",
         help="fused elementwise kernels (Megatron / Transformer Engine, or torch.compile)")
    flag(g, "eager-rope", dest="eager_rope", action="store_true", default=None,
         help="RoPE runs as separate eager ops even where the norms and the activation are fused; default: the "
              "stack's, else as --eager-elementwise")
    flag(g, "no-eager-rope", dest="eager_rope", action="store_false", help="RoPE in one fused kernel")
    flag(g, "fsdp-copies", dest="fsdp_copies", action="store_true", default=None,
         help="ZeRO-3/FSDP copies gathered parameters out of, and gradients into, the collective buffers on the compute "
              "stream (PyTorch FSDP2 fully_shard); default: the stack's")
    flag(g, "no-fsdp-copies", dest="fsdp_copies", action="store_false",
         help="ZeRO-3/FSDP collectives work in place on flat buffers (FSDP1, DeepSpeed ZeRO-3, Megatron-FSDP)")
    flag(g, "grad-buckets", dest="grad_buckets", action="store_true", default=None,
         help="the data-parallel wrapper keeps its own gradient buckets beside param.grad, a second gradient copy in "
              "memory (torch DDP, gradient_as_bucket_view=False); default: the stack's")
    flag(g, "no-grad-buckets", dest="grad_buckets", action="store_false",
         help="the gradients live in the reduction buffer (DDP gradient_as_bucket_view=True, Megatron, FSDP, DeepSpeed)")
    flag(g, "pp-scatter-gather", dest="pp_scatter_gather", action="store_true", default=None,
         help="without SP, each TP rank sends 1/tp of a pipeline message and the receiving TP group all-gathers it "
              "(Megatron-LM <= 3.x scatter/gather, DeepSpeed pipe_partitioned); default: the stack's")
    flag(g, "no-pp-scatter-gather", dest="pp_scatter_gather", action="store_false",
         help="every TP rank sends the whole pipeline message without SP (Megatron-Core)")
    flag(g, "recompute-fraction", dest="recompute_fraction", type=number(float, 0.0, strict=True), default=None,
         help="with --recompute full: the share of each stage's layers recomputed (Megatron-Core --recompute-method "
              "block --recompute-num-layers N of a stage's L/(pp v): N p v / L; torchtitan selective_ac_option n: 1/n); "
              "default 1, every layer")
    flag(g, "dp-replicas", dest="dp_replicas", type=number(int, 1, strict=False), default=None,
         help="HSDP: dp x cp ranks in this many replicas, each sharding one copy of the state, shards all-reduced "
              "across them (FSDP2 (replicate, shard) mesh, OLMo-core hsdp, Megatron-Core "
              "--num-distributed-optimizer-instances); default 1")
    flag(g, "offload-layers", dest="offload_layers", type=number(int, 0, strict=False), default=None,
         help="CPU activation offload: the first N layers' saved activations go to host memory in the forward and "
              "come back in the backward (Megatron-Core --cpu-offloading-num-layers; needs pp 1 and no recompute); "
              "default 0")
    flag(g, "loss-kernel", dest="loss_kernel", choices=LOSS_KERNELS, default=None,
         help="the loss: fused (Megatron's vocab-parallel cross entropy) or eager (torch F.cross_entropy on fp32-upcast "
              "logits, as torchtitan); sets the LM head's logits memory; default: the stack's")
    flag(g, "delay-wgrad", dest="delay_wgrad", action="store_true", default=None,
         help="with --overlap-ep: the experts' weight-gradient GEMMs run later, beside the dispatch backward "
              "(Megatron-Core --delay-wgrad-compute); default off")
    flag(g, "fp8-attention", dest="fp8_attention", action="store_true", default=None,
         help="the attention core in FP8 under a low-precision recipe (Megatron-Core --fp8-dot-product-attention: "
              "Transformer Engine's cuDNN FP8 attention); default off")
    flag(g, "fp8-dispatch", dest="fp8_dispatch", action="store_true", default=None,
         help="the MoE dispatch all-to-all moves the recipe's quantized activations, the combine 16-bit ones "
              "(DeepSeek-V3's run, DeepEP's FP8 dispatch; needs a low-precision recipe); default: the stack's")
    flag(g, "fp8-param-gather", dest="fp8_param_gather", action="store_true", default=None,
         help="the sharded parameters are all-gathered in FP8 under a per-tensor FP8 recipe (Megatron-Core "
              "--fp8-param-gather; Megatron-Bridge's FP8 presets set it); default off")
    flag(g, "quantized-tp-gather", dest="quantized_tp_gather", action="store_true", default=None,
         help="under a low-precision recipe with SP, the TP all-gathers move quantized data (Transformer Engine; torchao "
              "tensorwise TP styles); default: the stack's")
    flag(g, "no-quantized-tp-gather", dest="quantized_tp_gather", action="store_false",
         help="the TP all-gathers move 16-bit data, cast after")
    flag(g, "bf16-layers", dest="bf16_layers", type=number(int, 0, strict=False), default=None,
         help="transformer layers kept in 16 bits under a low-precision recipe (Megatron-Core --first-last-layers-bf16 "
              "with --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16: their sum); default 0")
    flag(g, "uneven-stages", dest="uneven_stages", action="store_true", default=None,
         help="allow layers not divisible by pp x interleave (the heaviest stage rounds up)")
    flag(g, "pipeline-layout", dest="pipeline_layout",
         help="Megatron-Core --pipeline-model-parallel-layout, e.g. 'Et|(tt|)*30mL': '|' between virtual stages "
              "(rank 0 chunk 0, rank 1 chunk 0, ...), E embedding, t decoder layer, m MTP layer, L loss; "
              "default: l / (p v) layers per virtual stage")
    flag(g, "recompute", choices=RECOMPUTE, help="activation recomputation (default none)")
    flag(g, "recompute-modules", dest="recompute_modules",
         help="what selective recomputation recomputes, comma-separated (Megatron-Core --recompute-modules): "
              f"{', '.join(RECOMPUTE_MODULES)}; default core_attn")
    flag(g, "sharding", choices=SHARDING,
         help="optimizer/gradient/parameter sharding over dp")
    flag(g, "zero", type=int, choices=tuple(range(len(SHARDING_BY_STAGE))), help="ZeRO stage (alias of --sharding)")
    flag(g, "dtype", "precision", choices=DTYPES, type=precision_name,
         help="training precision: 16/32-bit, or an FP8/FP4 recipe whose linear layers run at the low-precision peak "
              "(fp8 = delayed scaling, also spelled fp8-delayed; the recipes' spellings FP8-CS, MXFP8, NVFP4 are read "
              "too; docs/models.md 'Precision'); default bf16")
    flag(g, "moment-dtype", dest="moment_dtype", choices=MOMENT_DTYPES,
         help="Adam's two moments: fp32 (default) or 16-bit (Megatron-Core --use-precision-aware-optimizer "
              "--exp-avg-dtype / --exp-avg-sq-dtype; DeepSeek-V3 keeps them in BF16); the fp32 master copy stays")
    flag(g, "no-master-weights", dest="master_weights", action="store_false", default=None,
         help="no fp32 master copy of the weights: the optimizer updates the 16-bit weights in place (pure bf16, "
              "torchtune's dtype bf16); default: the stack's (a master copy everywhere else)")
    flag(g, "master-weights", dest="master_weights", action="store_true",
         help="an fp32 master copy of the weights in the optimizer state (mixed precision)")
    flag(g, "optimizer", choices=OPTIMIZERS,
         help="optimizer of the weight matrices: adam (default) or muon (Megatron-Core --optimizer muon / dist_muon: one "
              "momentum instead of Adam's two, and 5 Newton-Schulz iterations per matrix each step; the embedding "
              "tables stay on Adam; docs/models.md 'Optimizer')")
    flag(g, "grad-dtype", dest="grad_dtype", choices=GRAD_DTYPES,
         help="gradient buffer and reduce dtype (default: the stack's; Megatron fp32 main grads with bf16)")
    flag(g, "framework", help="training stack whose defaults fill unset switches: NAME[@VERSION] from "
         "`frameworks list` (default: the config's, else megatron-core); wins over a config file's")
    flag(g, "cp-kind", dest="cp_kind", choices=CP_KINDS,
         help="context parallelism over --cp ranks: ring attention (default; Megatron-Core, torchtitan) or ulysses "
              "(DeepSpeed-Ulysses: all-to-alls of the attention heads, not overlapped; DeepSpeed, Megatron-DeepSpeed "
              "--ds-sequence-parallel-size; docs/models.md 'Context parallelism')")
    flag(g, "ep-dispatcher", dest="ep_dispatcher", choices=DISPATCHERS,
         help="MoE token dispatcher: NCCL all-to-all (default) or a deduplicating one (DeepEP, HybridEP: once per destination rank and node)")
    flag(g, "cuda-graphs", dest="cuda_graphs", choices=CUDA_GRAPHS,
         help="CUDA graphs: none (eager, default), layers (every layer replayed as a graph: Megatron-Core "
              "--cuda-graph-impl local|transformer_engine over the whole layer), full (--cuda-graph-impl full_iteration); "
              "a graph removes the host's kernel-by-kernel issue time")
    flag(g, "cuda-graph-modules", dest="graph_modules",
         help="with --cuda-graphs layers, the modules each layer's graphs capture, comma-separated (Megatron-Core "
              f"--cuda-graph-modules): {', '.join(GRAPH_MODULES)}; default: the whole layer; the rest stays eager")
    flag(g, "tp-comm-overlap", dest="tp_comm_overlap", action="store_true", default=None,
         help="the stack's TP communication overlap (Megatron --tp-comm-overlap, torchtitan async TP)")
    flag(g, "memory-margin", dest="memory_margin", type=number(float, 0.0, strict=False), default=None,
         help="extra fraction of HBM kept free beyond the reserve (CUDA context, NCCL, fragmentation); default 0 for "
              "transformer, 0.05 for search (views/space.py SEARCH_MEMORY_MARGIN)")
    g = p.add_argument_group("hardware")
    flag(g, "gpu", help="hardware profile id (see `hardware list`), the device name the driver prints ('NVIDIA H100 "
         "80GB HBM3', 'NVIDIA A100-SXM4-80GB') or a YAML path (default a100-sxm4-80gb, or the config's)")
    flag(g, "gpus-per-node", dest="gpus_per_node", type=number(int), help="override the profile's GPUs per node")
    flag(g, "net-gbps", dest="net_gbps", type=number(), help="inter-node line rate per GPU, Gbit/s")
    flag(g, "clock-spread", dest="clock_spread", type=number(float, 0.0, strict=False),
         help="relative spread (standard deviation) of the compute rate across the cluster's GPUs, which makes a "
              "job wait for its slowest GPU (default: the profile's, 0.0175 unless it states one; 0: every GPU as "
              "fast as the profile's; docs/calibration.md)")


def build_spec(args):
    """The Spec of parsed flags (and the config in ``args._base``) through the one resolver:
    preset < stack defaults < stack rules < the config's fields < explicit flags."""
    from dataclasses import replace as dc_replace

    from . import models
    from .resolve import resolve

    base = getattr(args, "_base", None) or {}
    if not base and (getattr(args, "config", None) or getattr(args, "example", None)):
        from . import configfile
        base = configfile.load_config(args.config or configfile.example_path(args.example))
    if args.model:
        model, model_set = models.load(args.model), set()
    elif base.get("model") is not None:
        model, model_set = base["model"], set(base.get("model_set", ()))
    else:
        model, model_set = None, set()
    stated_model = {k: getattr(model, k) for k in model_set}
    # a preset's derived fields follow an overridden shape: MHA stays MHA, a 4h MLP stays 4h
    if model is not None and args.n_heads and args.n_kv_heads is None and model.n_kv_heads in (None, model.n_heads):
        model = dc_replace(model, n_kv_heads=None)
        stated_model.pop("n_kv_heads", None)
    if model is not None and args.d_model and args.ffn_hidden is None and model.ffn_hidden == 4 * model.d_model \
            and model.mlp != "swiglu":
        model = dc_replace(model, ffn_hidden=None)
        stated_model.pop("ffn_hidden", None)
    shape = {dest: getattr(args, dest) for _, dest, _, _ in MODEL_FLAGS}
    flags = {**shape, "mlp": args.mlp, "norm": args.norm, "attention": args.attention, "position": args.position,
             "tied_embeddings": args.tied_embeddings, **{dest: getattr(args, dest) for _, dest, _, _ in MODEL_SWITCHES}}
    stated_model.update({k: v for k, v in flags.items() if v is not None})
    if model is not None and args.model and any(v is not None and v != getattr(model, k) for k, v in flags.items()):
        stated_model["name"] = f"{model.name} (modified)"

    plan = {}
    if base.get("plan") is not None:
        plan = {k: getattr(base["plan"], k) for k in base.get("plan_set", ())}
    sharding = args.sharding
    if args.zero is not None:
        sharding = SHARDING_BY_STAGE[args.zero]     # the one name of ZeRO stage N (search pins the same)
    flags = {**{dest: getattr(args, dest) for _, dest, _, _ in PLAN_FLAGS}, "schedule": args.schedule,
             "sequence_parallel": args.sequence_parallel, "recompute": args.recompute, "sharding": sharding,
             "uneven_stages": args.uneven_stages, "delay_wgrad": getattr(args, "delay_wgrad", None),
             "fp8_attention": getattr(args, "fp8_attention", None),
             "fp8_param_gather": getattr(args, "fp8_param_gather", None),
             "fp8_dispatch": getattr(args, "fp8_dispatch", None),
             "quantized_tp_gather": getattr(args, "quantized_tp_gather", None),
             "bf16_layers": getattr(args, "bf16_layers", None),
             "tp_async_dgrad": getattr(args, "tp_async_dgrad", None),
             "wgrad_fusion": getattr(args, "wgrad_fusion", None),
             # a fused grouped MLP runs one kernel per GEMM: it implies no per-expert launches unless stated
             "per_expert_kernels": (False if getattr(args, "fused_moe_mlp", None)
                                    and getattr(args, "per_expert_kernels", None) is None
                                    else getattr(args, "per_expert_kernels", None)),
             "fused_moe_mlp": getattr(args, "fused_moe_mlp", None),
             "eager_elementwise": getattr(args, "eager_elementwise", None),
             "eager_rope": getattr(args, "eager_rope", None),
             "fsdp_copies": getattr(args, "fsdp_copies", None),
             "grad_buckets": getattr(args, "grad_buckets", None),
             "master_weights": getattr(args, "master_weights", None),
             "pp_scatter_gather": getattr(args, "pp_scatter_gather", None),
             "dp_replicas": getattr(args, "dp_replicas", None),
             "recompute_fraction": getattr(args, "recompute_fraction", None),
             "offload_layers": getattr(args, "offload_layers", None),
             "recompute_modules": getattr(args, "recompute_modules", None),
             "loss_kernel": getattr(args, "loss_kernel", None),
             "pipeline_layout": getattr(args, "pipeline_layout", None),
             "dtype": args.dtype, "grad_dtype": args.grad_dtype, "moment_dtype": getattr(args, "moment_dtype", None),
             "optimizer": getattr(args, "optimizer", None),
             "ep_dispatcher": getattr(args, "ep_dispatcher", None),
             "cp_kind": getattr(args, "cp_kind", None),
             "cuda_graphs": getattr(args, "cuda_graphs", None),
             "graph_modules": _graph_modules(getattr(args, "graph_modules", None)),
             "tp_comm_overlap": getattr(args, "tp_comm_overlap", None),
             "n_gpus": getattr(args, "n_gpus", None)}
    plan.update({k: v for k, v in flags.items() if v is not None})
    # an explicit --framework wins over the config's; with neither, the default stack (Megatron-Core)
    stack = args.framework or base.get("framework")
    hw = args.gpu or base.get("hardware") or None
    return resolve(model, plan, hw, stack, model_fields=stated_model, gpus_per_node=args.gpus_per_node,
                   net_gbps=args.net_gbps, clock_spread=getattr(args, "clock_spread", None),
                   stack_reason="--framework" if args.framework else ("the config's framework" if base.get("framework") else ""))



def _graph_modules(text):
    """--cuda-graph-modules in Megatron-Core's names, canonical (base/normalize.graph_modules); None when not given."""
    if text is None:
        return None
    from ..base.normalize import graph_modules
    return graph_modules(text)

def build(args) -> tuple:
    """(Model, Plan, Hardware) of parsed flags; see :func:`build_spec`."""
    s = build_spec(args)
    return s.model, s.plan, s.hardware
