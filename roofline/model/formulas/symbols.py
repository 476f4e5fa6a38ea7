"""Every symbol of the closed forms: its name (as used by ``formulas --set``), dimension and meaning.

Dimensions are products of the base dimensions ``time``, ``bytes``, ``flop`` (empty = a count or
a ratio). The test suite scales each base dimension and checks every exported formula scales as
the dimension it claims.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import sympy as sp
import yaml
from ...base.paths import PACKAGE


@dataclass(frozen=True)
class Sym:
    name: str
    symbol: sp.Symbol
    dim: str          # e.g. "", "time", "bytes", "flop/time", "bytes/time"
    doc: str
    group: str        # model | plan | hardware | efficiency | link
    latex: str
    default: float | None = None   # used by the compiled model when the caller does not give the input


SYMBOLS: dict[str, Sym] = {}


def _s(name: str, dim: str, doc: str, group: str, latex: str | None = None, default: float | None = None,
       zero: bool = False) -> sp.Symbol:
    """A positive symbol (``zero``: nonnegative, for sizes and counts whose absence is 0)."""
    sym = sp.Symbol(name, nonnegative=True) if zero else sp.Symbol(name, positive=True)
    SYMBOLS[name] = Sym(name, sym, dim, doc, group, latex or name.replace("_", r"\_"), default)
    return sym


def latex_names() -> dict[sp.Symbol, str]:
    return {s.symbol: s.latex for s in SYMBOLS.values()}


def by_symbol() -> dict[sp.Symbol, Sym]:
    return {s.symbol: s for s in SYMBOLS.values()}


def hardware_defaults() -> dict[str, float]:
    """The sourced defaults of the hardware symbols a profile does not state (memory reserve, NCCL's SMs;
    hardware/defaults.yaml): the values the compiled model takes when an input dict leaves them out."""
    return {k: s.default for k, s in SYMBOLS.items() if s.group == "hardware" and s.default is not None}


# ---- model --------------------------------------------------------------------------------
n_layers = _s("n_layers", "", "transformer layers l", "model", "l")
d_model = _s("d_model", "", "hidden size h", "model", "h")
n_heads = _s("n_heads", "", "attention heads a", "model", "a")
kv_heads = _s("kv_heads", "", "key/value heads (GQA/MQA; = heads for MHA)", "model", "a_{kv}")
ffn_hidden = _s("ffn_hidden", "", "dense MLP inner size f (dense models; the leading dense layers of a MoE)", "model", "f")
head_dim = _s("head_dim", "", "width of one attention head d_h (Megatron-Core kv_channels; d_model/heads unless stated)",
              "model", "d_h")
moe_ffn = _s("moe_ffn", "", "MLP inner size of one routed expert f_e (= f for a dense model)", "model", "f_e")
shared_ffn = _s("shared_ffn", "", "total inner size of the shared experts f_s (0: none; Megatron-Core "
                "moe_shared_expert_intermediate_size)", "model", "f_s", 0.0, zero=True)
# LatentMoE (Nemotron 3 Super/Ultra; Megatron-Core TransformerConfig moe_latent_size, moe/moe_layer.py
# fc1_latent_proj / fc2_latent_proj): the routed experts work on an l-wide projection of h; 0 = none
moe_latent = _s("moe_latent", "", "LatentMoE width l of the routed experts' input and output (moe_latent_size; 0: h)",
                "model", r"\ell", 0.0, zero=True)
dense_layers = _s("dense_layers", "", "leading layers with a dense MLP of size f in a MoE model (0: every layer MoE)",
                  "model", "l_d", 0.0, zero=True)
# MLA (DeepSeek-V2/V3, Kimi K2; Megatron-Core MLATransformerConfig, HF config.json names): 0 = standard attention
kv_lora = _s("kv_lora", "", "MLA KV compression rank r_kv (kv_lora_rank; 0: no MLA)", "model", "r_{kv}", 0.0, zero=True)
q_lora = _s("q_lora", "", "MLA query compression rank r_q (q_lora_rank; 0: queries projected from h directly)",
            "model", "r_q", 0.0, zero=True)
qk_nope = _s("qk_nope", "", "MLA per-head query/key width without RoPE d_n (qk_nope_head_dim; Megatron-Core qk_head_dim)",
             "model", "d_n", 0.0, zero=True)
qk_rope = _s("qk_rope", "", "MLA per-head RoPE width d_r (qk_rope_head_dim; Megatron-Core qk_pos_emb_head_dim), "
             "its key part shared by all heads", "model", "d_r", 0.0, zero=True)
v_head = _s("v_head", "", "MLA per-head value width d_v (v_head_dim)", "model", "d_v", 0.0, zero=True)
# sliding-window attention (Megatron-Core window_size / window_attn_skip_freq; HF sliding_window)
swa_window = _s("swa_window", "", "keys a query of a windowed layer sees, itself included (HF sliding_window)", "model",
                "w", 0.0, zero=True)
swa_frac = _s("swa_frac", "", "fraction of the layers with sliding-window attention (0: none)", "model", r"\phi_w",
              0.0, zero=True)
# multi-token prediction (DeepSeek-V3 report sec 2.2; Megatron-Core transformer/multi_token_prediction.py, --mtp-num-layers)
mtp = _s("mtp", "", "multi-token-prediction layers D on the last pipeline stage (0: none)", "model", "D", 0.0, zero=True)
# hybrid Mamba-2 models (Megatron-Core hybrid_override_pattern): the share of the l layers holding each sublayer; a
# transformer layer holds attention and an MLP (1, 1, 0), a hybrid pattern's layer one of M, *, -, E (formulas/mamba.py)
attn_frac = _s("attn_frac", "", "fraction of the layers with self-attention (1: a transformer; hybrid: n_* / l)", "model",
               r"\phi_{a}", 1.0, zero=True)
mlp_frac = _s("mlp_frac", "", "fraction of the layers with an MLP or MoE (1: a transformer; hybrid: (n_- + n_E) / l)",
              "model", r"\phi_{f}", 1.0, zero=True)
mamba_frac = _s("mamba_frac", "", "fraction of the layers that are Mamba-2 mixers (0: none; hybrid: n_M / l)", "model",
                r"\phi_{m}", 0.0, zero=True)
mamba_heads = _s("mamba_heads", "", "Mamba-2 heads n_h (Megatron-Core mamba_num_heads)", "model", "n_h", 0.0, zero=True)
mamba_hdim = _s("mamba_hdim", "", "Mamba-2 head width P (mamba_head_dim)", "model", "P", 0.0, zero=True)
mamba_state = _s("mamba_state", "", "Mamba-2 state size N (mamba_state_dim, d_state)", "model", "N", 0.0, zero=True)
mamba_groups = _s("mamba_groups", "", "Mamba-2 B/C groups G (mamba_num_groups)", "model", "G", 0.0, zero=True)
mamba_conv = _s("mamba_conv", "", "Mamba-2 causal conv1d width d_conv", "model", "k_c", 4.0, zero=True)
mamba_chunk = _s("mamba_chunk", "", "SSD chunk length Q (Megatron-Core MambaMixer chunk_size)", "model", "Q", 128.0)
vocab = _s("vocab", "", "vocabulary size V (padded to 128*tp in the model)", "model", "V")
seq_len = _s("seq_len", "", "sequence length s", "model", "s")
rms = _s("rms", "", "1 for RMSNorm, 0 for LayerNorm", "model", r"\rho")
sq_relu = _s("sq_relu", "", "1 for the squared-ReLU MLP activation (Nemotron-4), 0 for GELU / SwiGLU", "model",
             r"\varrho")
gated = _s("gated", "", "1 for a gated MLP (SwiGLU: two up projections), else 0", "model", "g")
causal = _s("causal", "", "1 when the attention kernel skips masked blocks (attention FLOPs halved)", "model", r"\chi")
flash = _s("flash", "", "1 for a fused flash-attention kernel, 0 for the unfused bmm/softmax path", "model", r"\phi")
flash_speed = _s("flash_speed", "", "the flash kernel's throughput relative to FlashAttention-2, whose curves the profiles "
                 "fit (config.FLASH_SPEED: 1; Triton FlashAttention 1/1.80; FlashAttention v1 1/2.26; times the "
                 "profile's attention_speed for cuDNN's kernel, Transformer Engine's on sm90+, and FlashAttention-3)",
                 "model",
                 r"\phi_{s}")
dropout = _s("dropout", "", "1 when dropout layers are active (their masks are stored)", "model", r"\delta")
tied = _s("tied", "", "1 when input embedding and LM head share weights", "model", r"\tau")
learned_pos = _s("learned_pos", "", "1 for a learned position embedding table (s x h)", "model", r"\pi")
rope_pos = _s("rope_pos", "", "1 for rotary position embeddings applied to queries and keys (0: a learned table, or ALiBi's "
              "bias added inside the attention kernel)", "model", r"\rho_{p}")
biases = _s("biases", "", "1 when linear layers and norms carry biases", "model", r"\beta_{b}")
qk_norm = _s("qk_norm", "", "1 when a norm runs on each head's query and key after the QKV projection (QK-norm: Qwen3, "
             "OLMo 2; Megatron-Core qk_layernorm)", "model", r"\nu_{qk}")
n_experts = _s("n_experts", "", "MoE experts E (1 = dense)", "model", "E")
top_k = _s("top_k", "", "experts per token K (1 = dense)", "model", "K")
capacity_factor = _s("capacity_factor", "", "MoE capacity factor (tokens per expert over the even share)", "model", "c_f")

# ---- plan ---------------------------------------------------------------------------------
tp = _s("tp", "", "tensor-parallel degree t", "plan", "t")
pp = _s("pp", "", "pipeline-parallel degree p", "plan", "p")
dp = _s("dp", "", "data-parallel degree d", "plan", "d")
cp = _s("cp", "", "context-parallel degree c", "plan", "c")
ep = _s("ep", "", "expert-parallel degree (carved out of dp)", "plan", "e")
micro_batch = _s("micro_batch", "", "micro-batch size b (sequences)", "plan", "b")
global_batch = _s("global_batch", "", "global batch B (sequences)", "plan", "B")
ep_dedup = _s("ep_dedup", "", "1 with a deduplicating MoE dispatcher (DeepEP / HybridEP: a token goes once to each "
              "rank holding one of its experts, and crosses the network once per destination node, then NVLink), 0 "
              "with NCCL all-to-all (one copy per routed expert)", "plan", r"\delta_{e}")
etp = _s("etp", "", "expert tensor-parallel degree (Megatron-Core --expert-tensor-parallel-size; default tp)", "plan",
         r"t_{e}")
interleave = _s("interleave", "", "virtual pipeline stages per GPU v (1 = plain 1F1B)", "plan", "v")
seq_par = _s("seq_par", "", "1 with Megatron sequence parallelism", "plan", r"\sigma")
rc_full = _s("rc_full", "", "the share of each stage's layers under full activation recomputation: 1 with full "
             "recomputation of every layer, a fraction for some of them (plan recompute_fraction: Megatron-Core "
             "--recompute-method block --recompute-num-layers N of a stage's layers, torchtitan selective_ac_option n "
             "= every n-th block, OLMo-core selected_blocks), 0 without", "plan", r"r_{f}")
rc_any = _s("rc_any", "", "1 with full activation recomputation of any share of the layers (its backward holds one "
            "recomputed layer's activations), else 0", "plan", r"r_{a}")
rc_sel = _s("rc_sel", "", "1 with Megatron's selective recomputation (--recompute-granularity selective; what it recomputes: "
            "the rcm_* module switches)", "plan", r"r_{s}")
# Megatron-Core --recompute-modules (transformer_config.py recompute_modules, default ["core_attn"]): each 1 when the
# plan's recompute_modules names the module; they act only under selective recomputation (rc_sel)
rcm_core = _s("rcm_core", "", "1 when selective recomputation recomputes the attention core (module core_attn)", "plan",
              r"m_{\mathrm{attn}}", default=1.0)
rcm_norm = _s("rcm_norm", "", "1 when it recomputes the unfused norms: MLA's input norm, an MoE layer's pre-MLP norm "
              "(module layernorm)", "plan", r"m_{\mathrm{norm}}", default=0.0)
rcm_moe_act = _s("rcm_moe_act", "", "1 when it recomputes the routed experts' activation (module moe_act)", "plan",
                 r"m_{\mathrm{act}}", default=0.0)
rcm_mla_up = _s("rcm_mla_up", "", "1 when it recomputes MLA's up projections and RoPE (module mla_up_proj)", "plan",
                r"m_{\mathrm{up}}", default=0.0)
rcm_mlp = _s("rcm_mlp", "", "1 when it recomputes a dense layer's MLP (module mlp)", "plan", r"m_{\mathrm{mlp}}",
             default=0.0)
rcm_moe = _s("rcm_moe", "", "1 when it recomputes the whole MoE layer, its all-to-all included (module moe)", "plan",
             r"m_{\mathrm{moe}}", default=0.0)
rcm_shared = _s("rcm_shared", "", "1 when it recomputes the shared experts (module shared_experts)", "plan",
                r"m_{\mathrm{sh}}", default=0.0)
rc_op = _s("rc_op", "", "1 with torchtitan's op-level selective checkpointing (block input, SDPA outputs and every other "
           "matmul output saved; the rest recomputed)", "plan", r"r_{o}")
gpipe = _s("gpipe", "", "1 for the GPipe schedule (all forwards, then all backwards)", "plan", r"\gamma")
dualpipev = _s("dualpipev", "", "1 for the DualPipeV schedule (two chunks per rank in a V, forward and backward chunks "
               "paired; deepseek-ai/DualPipe)", "plan", r"\delta_{V}")
dualpipe = _s("dualpipe", "", "1 for the bidirectional DualPipe schedule (each rank holds two stages, i and p-1-i, and "
              "runs half the micro-batches from each end; deepseek-ai/DualPipe dualpipe/dualpipe.py)", "plan",
              r"\delta_{D}", default=0.0)
zb1p = _s("zb1p", "", "1 for the ZB1P zero-bubble schedule (each backward split into its input gradient B and weight "
          "gradient W, the W deferred into the bubble; ZB-H1's memory; Qi et al. 2024; sail-sg --enable-zero-bubble)",
          "plan", r"\zeta_{1}", default=0.0)
zb2p = _s("zb2p", "", "1 for the ZB2P zero-bubble schedule (as ZB1P with up to 2p - 1 micro-batches in flight; ZB-H2; "
          "sail-sg --zero-bubble-max-pending-backward 2p)", "plan", r"\zeta_{2}", default=0.0)
z_os = _s("z_os", "", "1 when optimizer state is sharded over dp (distributed optimizer / ZeRO>=1)", "plan", "z_1")
z_grad = _s("z_grad", "", "1 when gradients are sharded over dp (ZeRO>=2)", "plan", "z_2")
z_param = _s("z_param", "", "1 when parameters are sharded over dp (ZeRO-3 / FSDP)", "plan", "z_3")
dp_rep = _s("dp_rep", "", "replicas of the sharded state: the d x c data-parallel ranks split into this many groups of "
            "d c / r, each sharding one copy of what the ZeRO stage shards, the shards all-reduced across the groups "
            "(PyTorch HSDP, OLMo-core hsdp, Megatron-Core --num-distributed-optimizer-instances); 1: one group of all "
            "d x c", "plan", "r")
ov_dp = _s("ov_dp", "", "fraction of the DP gradient reduce hidden behind backward (0..1)", "plan", r"o_{d}")
ov_ag = _s("ov_ag", "", "fraction of the parameter all-gather hidden behind forward (0..1)", "plan", r"o_{g}")
ov_tp = _s("ov_tp", "", "fraction of TP/SP communication hidden behind GEMMs (0..1)", "plan", r"o_{t}")
ov_pp = _s("ov_pp", "", "fraction of pipeline send/recv hidden behind compute (0..1)", "plan", r"o_{p}")
ov_ep = _s("ov_ep", "", "fraction of the MoE all-to-all hidden behind another micro-batch's compute (0..1; Megatron-Core "
            "--overlap-moe-expert-parallel-comm)", "plan", r"o_{e}")
delay_wgrad = _s("delay_wgrad", "", "1 when the EP overlap delays the experts' weight-gradient GEMMs to run beside the "
                 "dispatch backward (Megatron-Core --delay-wgrad-compute, which needs the EP overlap); 0: the experts' "
                 "backward runs whole before it", "plan", r"\delta_{w}", zero=True)
ov_cp = _s("ov_cp", "", "fraction of ring-attention KV exchange hidden behind attention (0..1)", "plan", r"o_{c}")
cp_a2a = _s("cp_a2a", "", "1 where the context-parallel group runs DeepSpeed-Ulysses (an all-to-all of the attention heads "
            "around the attention core, not overlapped); 0: ring attention", "plan", r"u_{c}", zero=True)
act_bytes = _s("act_bytes", "bytes", "bytes per activation/weight element (2 for bf16/fp16)", "plan", r"\beta_{a}")
grad_bytes = _s("grad_bytes", "bytes", "bytes per gradient element in the reduce and buffer", "plan", r"\beta_{g}")
mask_bytes = _s("mask_bytes", "bytes", "bytes per dropout-mask element (1)", "plan", r"\beta_{m}")
f32_bytes = _s("f32_bytes", "bytes", "bytes per fp32 element (4): logits in the loss", "plan", r"\beta_{32}")
q_bytes = _s("q_bytes", "bytes", "HBM bytes the low-precision recipe's quantization kernels move per quantized GEMM "
             "operand element (0 in 16-bit training; roofline/base/precision.py)", "plan", r"\beta_{q}")
q_trans = _s("q_trans", "", "bytes per element of the transposed copy a per-tensor FP8 recipe's cast writes for the "
             "GEMMs that read the operand transposed, counted in q_bytes (1 for delayed and current scaling, 0 for the "
             "block-scaled recipes, whose row-wise and column-wise copies both stay)", "plan", r"\beta_{t}", zero=True)
fp8_tn = _s("fp8_tn", "", "1 when the GPU's FP8 GEMMs take only TN layouts, so a per-tensor FP8 operand needs a transposed "
            "copy (Hopper, Ada); 0 where they take any layout (Blackwell datacenter parts: Transformer Engine "
            "is_non_tn_fp8_gemm_supported, compute capability 10.x; hardware profile fp8_non_tn)", "hardware",
            r"\tau_{8}", zero=True)
pg_bytes = _s("pg_bytes", "bytes", "bytes per parameter in the sharded parameter all-gather (distributed optimizer, "
              "ZeRO-3 / FSDP): the activation dtype, 1 under a per-tensor FP8 recipe with fp8_param_gather "
              "(Megatron-Core --fp8-param-gather)", "plan", r"\beta_{w}")
tg_in = _s("tg_in", "bytes", "bytes per element of the TP all-gather of a column-parallel linear's input (forward, and its "
            "re-gather for the weight gradient): the activation dtype, or one quantized copy with its scales where the "
            "stack quantizes before gathering (Transformer Engine gather_along_first_dim with a quantizer; torchao "
            "Float8ColwiseParallel; base/precision.py tp_gather_bytes; plan quantized_tp_gather)", "plan", r"\beta_{ti}")
tg_out = _s("tg_out", "bytes", "bytes per element of the TP all-gather of a row-parallel linear's output gradient "
             "(backward, under SP): the activation dtype, or the quantized gradient with its scales, both copies where "
             "the recipe cannot derive the column-wise one from the row-wise (base/precision.py tp_gather_bytes)",
             "plan", r"\beta_{to}")
gin_bytes = _s("gin_bytes", "bytes", "bytes per element of a GEMM input saved for the weight gradient: the activation dtype, or the quantized copy Transformer Engine keeps under an FP8/FP4 recipe (base/precision.py saved_bytes; per stack: quantized_saves)", "plan", r"\beta_{g}")
disp_bytes = _s("disp_bytes", "bytes", "bytes per element of the MoE dispatch all-to-all (and of the backward's all-to-all of the combine's gradient): the activation dtype, or the recipe's quantized data with its scales under FP8 dispatch (plan fp8_dispatch; base/precision.py saved_bytes)", "plan", r"\beta_{x}")
opt_bytes = _s("opt_bytes", "bytes", "optimizer-state bytes per parameter of the weight matrices (Adam: fp32 master + 2 moments = 12, 8 with 16-bit moments; Muon: fp32 master + 1 momentum = 8)", "plan", r"\beta_{o}")
opt_bytes_emb = _s("opt_bytes_emb", "bytes", "optimizer-state bytes per embedding / output-layer parameter: Adam's (Muon leaves them to Adam: Megatron-Core emerging_optimizers.py muon_scalar_optimizer)", "plan", r"\beta_{oe}")
muon = _s("muon", "", "1 with the Muon optimizer (Newton-Schulz orthogonalized momentum on the weight matrices), 0 with Adam", "plan", r"\mu_{o}", zero=True)

# ---- hardware -----------------------------------------------------------------------------
peak = _s("peak", "flop/time", "dense peak FLOP/s of the plan's matmul dtype (the low-precision peak of an FP8/FP4 recipe's linear layers)", "hardware", "P")
peak_hp = _s("peak_hp", "flop/time", "dense peak FLOP/s of the GEMMs kept in 16 bits under a low-precision recipe "
             "(attention core, LM head, router); = P in 16-bit training", "hardware", "P_{16}")
peak_vec = _s("peak_vec", "flop/time", "peak FLOP/s of non-matmul (vector) units", "hardware", "P_{v}")
fp8_attn_fwd = _s("fp8_attn_fwd", "", "FP8 attention's forward speed over 16-bit attention on this GPU under the plan's "
                  "recipe (the profile's fp8_attention_speed for the recipe's kernel, per-tensor fp8 or mxfp8, measured "
                  "by NVIDIA cudnn-frontend's SDPA benchmark; else FlashAttention-3's 0.81 x P_8 / P_16); read where "
                  "the attention core runs in FP8", "hardware", r"\sigma_{8f}")
fp8_attn_bwd = _s("fp8_attn_bwd", "", "FP8 attention's backward speed over 16-bit attention (as fp8_attn_fwd, for the "
                  "backward kernel)", "hardware", r"\sigma_{8b}")
fp8_window_bwd = _s("fp8_window_bwd", "", "1 when FP8 attention's backward kernel skips the key blocks outside a "
                    "sliding window (as 16-bit attention does), 0 when it computes every causal block (the profile's "
                    "fp8_attention_speed window_bwd: cuDNN 9.22's FP8 and MXFP8 backward on GB200 / GB300, measured)",
                    "hardware", r"\omega_{8}", zero=True)
lp_rate = _s("lp_rate", "", "rate of the recipe's low-precision GEMM kernels relative to a 16-bit GEMM at the same "
             "fraction of its own peak (base/precision.py gemm_rate, measured by Transformer Engine's GEMM benchmark; "
             "and the profile's max_matmul_fp4 where the FP4 peak is not reached): 1 in 16-bit training", "hardware",
             r"\rho_{q}")
clock = _s("clock", "", "sustained/burst ratio of the compute rate under a power-capped training load (0..1]", "hardware",
           r"\kappa")
clock_spread = _s("clock_spread", "", "relative standard deviation of the compute rate across the GPUs of a cluster "
                  "(one SKU; hardware profile clock_spread)", "hardware", r"\sigma_{\kappa}", zero=True)
gpu_z = _s("gpu_z", "", "expected maximum of n standard normal draws for the job's n = t p d c GPUs (Blom's "
           "approximation; 0 for one GPU): how far below the mean the slowest GPU's compute rate sits, in units of "
           "clock_spread", "plan", "z_{n}", zero=True)
hbm_bw = _s("hbm_bw", "bytes/time", "HBM bandwidth", "hardware", "W")
host_fwd = _s("host_fwd", "time", "host (CPU) time to issue one layer's forward in eager PyTorch", "hardware", r"h_{f}")
host_bwd = _s("host_bwd", "time", "host (CPU) time to issue one layer's backward", "hardware", r"h_{b}")
host_rc = _s("host_rc", "time", "extra host time of one layer's full recomputation (checkpointed backward)", "hardware",
             r"h_{r}")
host_emb = _s("host_emb", "time", "host time to issue the embedding's forward and backward, per micro-batch", "hardware",
              r"h_{e}")
host_head = _s("host_head", "time", "host time to issue the final norm, LM head and cross-entropy, forward and backward, "
               "per micro-batch", "hardware", r"h_{o}")
host_mb = _s("host_mb", "time", "host time of the framework's per-micro-batch work outside the model (batch fetch and "
             "broadcast, masks, loss averaging)", "hardware", r"h_{m}")
host_moe_fwd = _s("host_moe_fwd", "time", "extra host time an MoE layer's forward adds to a dense layer's (router, "
                  "token-dispatcher bookkeeping, permutation)", "hardware", r"h_{ef}")
host_moe_bwd = _s("host_moe_bwd", "time", "extra host time an MoE layer's backward adds to a dense layer's", "hardware",
                  r"h_{eb}")
host_sync = _s("host_sync", "time", "time the GPU idles after an eager MoE forward's token-count synchronization until the "
               "host issues the next kernel (profile host.moe_sync), per MoE layer forward", "hardware", r"h_{s}",
               zero=True)
host_launch = _s("host_launch", "time", "host time of one CUDA kernel launch (profile host.launch): what each kernel "
                 "issued one routed expert at a time adds to an MoE layer's host time", "hardware", r"h_{k}", zero=True)
gpus_per_node = _s("gpus_per_node", "", "GPUs per node G", "hardware", "G")
host_link_bw = _s("host_link_bw", "bytes/time", "GPU-host copy bandwidth per direction (PCIe, NVLink-C2C): what activations offloaded to host memory move at", "hardware", r"W_{h}")
sms = _s("sms", "", "streaming multiprocessors: thread blocks of one wave (one flash-attention block per SM); "
         "1 = no wave quantisation", "hardware", "n_{SM}")

# ---- memory reserve outside PyTorch's tensors (hardware/defaults.yaml memory_reserve, sourced there) ------
_RESERVE = yaml.safe_load((PACKAGE / "spec" / "hardware" / "defaults.yaml").read_text())["memory_reserve"]
cuda_context = _s("cuda_context", "bytes", "GPU memory of the CUDA context (driver, kernel modules), outside the "
                  "caching allocator", "hardware", r"M_{ctx}", float(_RESERVE["cuda_context_bytes"]))
nccl_comm_bytes = _s("nccl_comm_bytes", "bytes", "NCCL buffers of one collective communicator (channels x per-peer "
                     "Simple + LL + LL128 buffers)", "hardware", r"M_{nccl}", float(_RESERVE["nccl_comm_bytes"]))
nccl_peer_bytes = _s("nccl_peer_bytes", "bytes", "NCCL buffers of one point-to-point peer (Simple protocol)",
                     "hardware", r"M_{p2p}", float(_RESERVE["nccl_peer_bytes"]))
_OVERLAP = yaml.safe_load((PACKAGE / "spec" / "hardware" / "defaults.yaml").read_text())["overlap"]
nccl_sms = _s("nccl_sms", "", "SMs an NCCL collective inside one node (NVLink) holds while it runs: its channels, one "
              "thread block each; overlapped compute runs on the rest (hardware/defaults.yaml overlap)", "hardware",
              r"n_{nccl}", float(_OVERLAP["nccl_sms"]))
alloc_frag = _s("alloc_frag", "", "caching-allocator memory reserved above its allocated peak, as a fraction of it",
                "hardware", r"\phi_{frag}", float(_RESERVE["allocator_fragmentation"]))

# ---- links: alpha (latency per step) and bus bandwidth per collective and link --------------
COLLECTIVES = ("ar", "ag", "rs", "a2a", "p2p")
LINKS = ("intra", "inter")
ALPHA: dict[tuple[str, str], sp.Symbol] = {}
BUSBW: dict[tuple[str, str], sp.Symbol] = {}
CALL: dict[tuple[str, str], sp.Symbol] = {}
for _link in LINKS:
    for _c in COLLECTIVES:
        CALL[_c, _link] = _s(f"call_{_c}_{_link}", "time", f"fixed time of one collective call whatever its group size "
                             f"(0 unless fitted over several group sizes), {_c}, {_link}-node", "link",
                             rf"\tau^{{{_c}}}_{{{_link}}}", 0.0, zero=True)
        ALPHA[_c, _link] = _s(f"alpha_{_c}_{_link}", "time", f"latency per algorithm step, {_c}, {_link}-node", "link",
                              rf"\alpha^{{{_c}}}_{{{_link}}}")
        BUSBW[_c, _link] = _s(f"bw_{_c}_{_link}", "bytes/time", f"bus bandwidth (nccl-tests busbw), {_c}, {_link}-node",
                              "link", rf"\beta^{{{_c}}}_{{{_link}}}")

# ---- calibrated efficiencies per operator class and direction -------------------------------
OP_CLASSES = ("gemm", "attn", "bmm", "softmax", "norm", "elem", "embed", "ce", "optim")
EFF_FLOP: dict[tuple[str, str], sp.Symbol] = {}
EFF_MEM: dict[tuple[str, str], sp.Symbol] = {}
T0: dict[tuple[str, str], sp.Symbol] = {}
for _c in OP_CLASSES:
    for _d in ("fwd", "bwd"):
        EFF_FLOP[_c, _d] = _s(f"eta_{_c}_{_d}", "", f"asymptotic FLOP efficiency of {_c} {_d} (0..1]", "efficiency",
                              rf"\eta^{{{_c}}}_{{{_d}}}")
        EFF_MEM[_c, _d] = _s(f"mu_{_c}_{_d}", "", f"asymptotic HBM efficiency of {_c} {_d} (0..1]", "efficiency",
                             rf"\mu^{{{_c}}}_{{{_d}}}")
        T0[_c, _d] = _s(f"t0_{_c}_{_d}", "time", f"fixed time per {_c} {_d} kernel (launch, tail)", "efficiency",
                        rf"t^{{{_c}}}_{{0,{_d}}}")
gemm_dhalf = _s("gemm_dhalf", "", "GEMM size at which FLOP efficiency is half its asymptote (smallest dim)",
                "efficiency", r"d_{1/2}")
# flash-attention shape constants per direction (compute.attention_shape): per score element the kernel
# spends d_pad MMA head dims + d_soft for the softmax + d_pad^2/d_reg for register-limited tiles
# + d_pad d_io / kblock for the query rows' traffic per key block
ATTN_SHAPE: dict[tuple[str, str], sp.Symbol] = {}
for _d in ("fwd", "bwd"):
    ATTN_SHAPE["d_soft", _d] = _s(f"attn_dsoft_{_d}", "", f"flash-attention softmax cost per score element, in head dims ({_d})",
                                  "efficiency", rf"d^{{soft}}_{{{_d}}}")
    ATTN_SHAPE["d_reg", _d] = _s(f"attn_dreg_{_d}", "", f"head dim whose tile overhead equals its MMA work ({_d}); "
                                 "large = no register-limited tiling", "efficiency", rf"d^{{reg}}_{{{_d}}}")
    ATTN_SHAPE["uneven", _d] = _s(f"attn_uneven_{_d}", "", f"extra time of a head dim that is not a multiple of 32 ({_d}; "
                                  "predicated loads)", "efficiency", rf"u_{{{_d}}}")
    ATTN_SHAPE["d_io", _d] = _s(f"attn_dio_{_d}", "", f"cost of a query row's traffic per key block (backward: Q, dO loads "
                                f"and fp32 dQ accumulation), in head dims per key ({_d})", "efficiency", rf"d^{{io}}_{{{_d}}}")
# unfused-attention batched GEMMs per direction (compute.bmm_time): the write-out of an output tile costs as much as
# bmm_dhalf steps of the reduction; a fraction bmm_reread of the score operand's extra passes misses L2
BMM_SHAPE: dict[tuple[str, str], sp.Symbol] = {}
for _d in ("fwd", "bwd"):
    BMM_SHAPE["dhalf", _d] = _s(f"bmm_dhalf_{_d}", "", f"reduction length at which an unfused-attention batched GEMM runs at "
                                f"half its FLOP efficiency ({_d}): the output tile's write-out costs as many reduction steps",
                                "efficiency", rf"k^{{1/2}}_{{{_d}}}")
    BMM_SHAPE["reread", _d] = _s(f"bmm_reread_{_d}", "", f"fraction of the extra passes over the s x s score operand (one per "
                                 f"further 128-wide tile of the head dim) that miss L2 ({_d})", "efficiency", rf"\rho_{{{_d}}}")

# ---- overlap interference: SMs a communication kernel holds beside compute (hardware/defaults.yaml overlap) ------
nccl_sms_inter = _s("nccl_sms_inter", "", "SMs an NCCL collective whose group spans nodes holds while it runs (its ring "
                    "channels across the network)", "hardware", r"n_{nccl,x}", float(_OVERLAP["nccl_sms_inter"]))
ub_sms = _s("ub_sms", "", "SMs a Transformer Engine userbuffers TP-overlap kernel of the pipeline and bulk methods holds "
            "(TE num_sm; the GEMM beside it runs on the rest)", "hardware", r"n_{ub}", float(_OVERLAP["ub_sms"]))
ub_ring_sms = _s("ub_ring_sms", "", "SMs the ring-exchange TP-overlap method holds (TE num_sm: its chunks move by copy "
                 "engine)", "hardware", r"n_{ub,r}", float(_OVERLAP["ub_ring_sms"]))

# ---- TP backward schedule (per stack: stacks/*.yaml plan tp_async_dgrad -> config.Plan -> predict.plan_inputs) -----
tp_async = _s("tp_async", "", "1 when the TP backward runs the column-parallel linear's dgrad all-reduce / reduce-scatter "
              "async beside its wgrad GEMM and, under SP, re-gathers its input beside the dgrad GEMM (Megatron-LM "
              "LinearWithGradAccumulationAndAsyncCommunication); 0: the backward's collectives mirror the forward's, "
              "synchronous", "plan", r"\alpha_{t}")
hp_frac = _s("hp_frac", "", "share of the transformer layers whose linear layers stay in 16 bits under a low-precision "
             "recipe (Megatron-Core --first-last-layers-bf16 with --num-layers-at-start-in-bf16 / "
             "--num-layers-at-end-in-bf16: their count over the layers)", "plan", r"\beta_{16}")
attn_fp8 = _s("attn_fp8", "", "1 when the attention core runs in FP8 (Megatron-Core --fp8-dot-product-attention, "
              "Transformer Engine fp8_dpa: cuDNN's FP8 fused attention), 0: at the 16-bit peak", "plan", r"\phi_{a}")
tp_split_rs = _s("tp_split_rs", "", "1 when the TP overlap pipelines only a reduce-scatter whose input is one GEMM's output "
                 "(torch micro-pipeline TP, torch/_inductor/fx_passes/micro_pipeline_tp.py fuse_matmul_reduce_scatter) "
                 "and the block's input feeds separate column-parallel GEMMs (q, k, v; gate, up): the backward "
                 "reduce-scatter of their summed input gradients stays exposed; 0: every TP collective is pipelined "
                 "(Transformer Engine userbuffers)", "plan", r"\sigma_{t}")

exp_launch = _s("exp_launch", "", "1 when the routed experts' GEMMs, and the recipe's casts of their operands, are "
                "launched one local expert at a time (Transformer Engine GroupedLinear: nvte_multi_stream_cublas_gemm, "
                "split_quantize); 0: one grouped kernel for all local experts (torch._grouped_mm, a fused grouped MLP)",
                "plan", r"\epsilon_{k}", zero=True)
moe_mlp_fused = _s("moe_mlp_fused", "", "1 when the routed experts run a fused grouped MLP: the first GEMM's epilogue "
                   "applies the gated activation and quantizes its output for the second, and the second GEMM's data "
                   "gradient applies the activation's backward and quantizes the first's output gradient (Transformer "
                   "Engine ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8 / BackwardGroupedMLP_CuTeGEMMDSwiGLU_MXFP8, "
                   "TransformerEngine#2769; cuDNN's grouped MLP, torchtitan#4257); 0: separate activation and cast "
                   "kernels", "plan", r"\phi_{mlp}", zero=True)
exp_casts = _s("exp_casts", "", "cast kernels the recipe launches per routed expert for one quantized GEMM operand "
               "(base/precision.py expert_casts: FP8 current scaling 3, MXFP8 and FP8 blockwise 1, delayed scaling and "
               "NVFP4 fused: 0)", "plan", r"n_{q}", zero=True)

# ---- low-precision GEMM inputs saved for backward (per stack: stacks/*.yaml plan quantized_saves) -------------
q_saved = _s("q_saved", "", "1 when a low-precision GEMM saves its quantized input for the weight gradient (Transformer "
             "Engine); 0: it saves the 16-bit input and quantizes it again in backward (torchao Float8Linear)", "plan",
             r"\phi_{q}")

# ---- FSDP2's buffer copies (per stack: stacks/*.yaml plan fsdp_copies -> config.Plan -> predict.plan_inputs) --------
fsdp_copy = _s("fsdp_copy", "", "1 when the ZeRO-3 / FSDP implementation copies each gathered parameter out of the "
               "all-gather buffer and each gradient into the reduce-scatter buffer on the compute stream (PyTorch "
               "FSDP2 fully_shard: foreach_all_gather_copy_out, foreach_reduce_scatter_copy_in); 0: the collectives "
               "work in place on flat buffers (FSDP1 FlatParameter, DeepSpeed ZeRO-3, Megatron-FSDP)", "plan",
               r"\phi_{c}")

# ---- DDP's gradient buckets beside param.grad (per stack: stacks/*.yaml plan grad_buckets -> config.Plan) ---------
grad_bucket = _s("grad_bucket", "", "1 when the data-parallel wrapper all-reduces gradients in buckets of its own beside "
                 "param.grad, a second copy of the unsharded gradients (torch DistributedDataParallel, "
                 "gradient_as_bucket_view=False by default); 0: the gradients live in the reduction buffer itself "
                 "(Megatron's contiguous grad buffer, FSDP, DeepSpeed ZeRO)", "plan", r"\phi_{b}")

# ---- pipeline messages split over the TP ranks (per stack: stacks/*.yaml plan pp_scatter_gather -> config.Plan) ----
pp_scatter = _s("pp_scatter", "", "1 when each TP rank sends 1/t of a pipeline message and the receiving TP group "
                "all-gathers it (Megatron-LM <= 3.x scatter_gather_tensors_in_pipeline without SP; DeepSpeed's "
                "PipelineEngine pipe_partitioned); 0: the message is the activation as the layer holds it, sequence-"
                "sharded with SP, whole without (Megatron-Core pipeline_parallel/schedules.py get_tensor_shapes)", "plan",
                r"\phi_{sg}")

# ---- weight-gradient accumulation (per stack: stacks/*.yaml plan wgrad_fusion -> config.Plan -> predict.plan_inputs) ---
wgrad_fusion = _s("wgrad_fusion", "", "1 when each weight-gradient GEMM accumulates straight into the main-grad buffer "
                  "(reads and writes it, grad_bytes per element each way) instead of writing a 16-bit gradient (Megatron "
                  "gradient_accumulation_fusion; Transformer Engine fuse_wgrad_accumulation); 0: the GEMM writes its "
                  "output", "plan", r"\phi_{w}")

# ---- eager elementwise kernels (per stack: stacks/*.yaml plan eager_elementwise -> config.Plan -> predict.plan_inputs) -
eager_elem = _s("eager_elem", "", "1 when RMSNorm, SwiGLU and RoPE run as separate eager PyTorch ops (torch.nn.RMSNorm's "
                "fp32 composite, F.silu then a multiply, RoPE through fp32 complex tensors: torchtitan without "
                "torch.compile, Hugging Face models under FSDP or DeepSpeed); 0: fused kernels (Megatron / Transformer "
                "Engine, or torch.compile)", "plan", r"\epsilon_{e}", zero=True)
eager_rope = _s("eager_rope", "", "1 when RoPE runs as separate eager ops (with eager_elem, or alone: NeMo AutoModel's own "
                "MoE models before 2026-01); 0: one fused kernel", "plan", r"\epsilon_{r}", zero=True)

# ---- CPU activation offload (config.Plan offload_layers -> predict.plan_inputs; formulas/memory.py, step.py) ------
offload_layers = _s("offload_layers", "", "layers (the first ones, in forward order) whose saved activations Transformer Engine's CPU offload copies to host memory during the forward and back during the backward (Megatron-Core --cpu-offloading-num-layers); 0: none", "plan", r"n_{off}", zero=True)

# ---- the loss kernel (per stack: stacks/*.yaml plan loss_kernel -> config.Plan -> predict.plan_inputs) -------------
ce_eager = _s("ce_eager", "", "1 when the loss is torch's eager cross entropy on fp32-upcast logits (log-softmax output "
              "saved in fp32; its backward holds the NLL and log-softmax gradients, fp32 each); 0: Megatron's fused "
              "vocab-parallel cross entropy (bf16 logits and one fp32 copy, gradient in place)", "plan", r"\epsilon_{ce}")
ce_compiled = _s("ce_compiled", "", "1 when the loss is torch's cross entropy under torch.compile (the 16-bit logits "
                 "saved, fp32 math fused, a 16-bit gradient written)", "plan", r"\kappa_{ce}")

# ---- CUDA graphs (per stack / row: config.Plan cuda_graphs -> predict.plan_inputs) ---------------------------------
# Megatron-Core megatron/core/transformer/transformer_config.py cuda_graph_impl ('local' / 'transformer_engine': per-layer
# graphs over cuda_graph_modules, empty = the whole layer; 'full_iteration': one graph for the forward-backward of the
# iteration, optimizer excluded): a replayed graph issues its kernels with one host call
# Per-layer graphs over part of the layer (cuda_graph_modules attn, mlp, moe, moe_router, moe_preprocess, mamba) take the
# host issue time of the captured parts only; 1 for each when the whole layer is captured
graph_attn = _s("graph_attn", "", "1 when each layer's attention block replays as a CUDA graph (its host issue time gone; "
                "Megatron-Core cuda_graph_modules attn, or the whole layer); 0: eager", "plan", r"\gamma_{a}")
graph_mlp = _s("graph_mlp", "", "1 when each dense layer's MLP block replays as a CUDA graph (cuda_graph_modules mlp, or the "
               "whole layer)", "plan", r"\gamma_{f}")
graph_moe = _s("graph_moe", "", "1 when each MoE layer's whole MoE block replays as a CUDA graph (cuda_graph_modules moe, or "
               "the whole layer): its host work, per-expert launches and token-count synchronization gone", "plan",
               r"\gamma_{e}")
graph_router = _s("graph_router", "", "1 when the MoE router (the MLP block up to MoELayer.router) replays as a CUDA graph "
                  "(cuda_graph_modules moe_router, or moe, or the whole layer)", "plan", r"\gamma_{r}")
graph_preproc = _s("graph_preproc", "", "1 when the MoE dispatcher's preprocess (MoELayer.preprocess) replays as a CUDA "
                   "graph (cuda_graph_modules moe_preprocess, or moe, or the whole layer)", "plan", r"\gamma_{p}")
graph_mamba = _s("graph_mamba", "", "1 when each Mamba-2 mixer replays as a CUDA graph (cuda_graph_modules mamba, or the whole "
                 "layer)", "plan", r"\gamma_{m}")
graph_full = _s("graph_full", "", "1 with a full-iteration CUDA graph (the embedding, LM head, loss and the per-micro-batch "
                "work replay too: no host issue time in the forward-backward)", "plan", r"\gamma_{i}")

# ---- a stated pipeline layer layout (Megatron-Core --pipeline-model-parallel-layout; roofline/spec/layout.py) ----------
# pp_layout = 0 is the sentinel "derive as today" (pipeline.stage_layers: ceil(l / (p v)) v layers per rank, the
# heavier edge on the heaviest stage); 1: the counts below, per physical rank over all its virtual stages
pp_layout = _s("pp_layout", "", "1 when a pipeline layout states each rank's layers, 0 to derive them "
               "(ceil(l / (p v)) v per rank)", "plan", r"\lambda", 0.0, zero=True)
layout_first = _s("layout_first", "", "decoder layers on the rank holding the embedding (stated layout; DualPipe: of "
                  "the first stage)", "plan", r"l_{E}", 0.0, zero=True)
layout_first_dense = _s("layout_first_dense", "", "of them, leading dense layers of a MoE", "plan", r"l_{E,d}", 0.0,
                        zero=True)
layout_last = _s("layout_last", "", "decoder layers on the rank holding the loss (and the MTP layers; DualPipe: of the "
                 "last stage, on the first stage's rank)", "plan", r"l_{L}", 0.0, zero=True)
layout_last_dense = _s("layout_last_dense", "", "of them, leading dense layers of a MoE", "plan", r"l_{L,d}", 0.0,
                       zero=True)
layout_mid = _s("layout_mid", "", "most decoder layers on any other rank (0 when none; DualPipe: the busiest other "
                "rank's mean over its two stages)", "plan", r"l_{o}", 0.0, zero=True)
layout_mid_dense = _s("layout_mid_dense", "", "of them, leading dense layers of a MoE", "plan", r"l_{o,d}", 0.0,
                      zero=True)
