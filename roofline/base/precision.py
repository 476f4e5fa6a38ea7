"""Training precisions (a plan's ``dtype``): which tensor-core peak the GEMMs run at, and the HBM traffic of the
quantization kernels a low-precision recipe adds. The one table; config, normalize, hardware and predict read it.

Which GEMMs run in low precision (Megatron-Core with Transformer Engine): the linear layers of every transformer
layer (QKV / MLA projections, attention output, MLP or expert GEMMs: TE modules under ``fp8_autocast``; fprop,
dgrad and wgrad). The rest stays at the 16-bit peak: the attention core (TE DotProductAttention in BF16 unless
``--fp8-dot-product-attention``, default off, megatron/training/arguments.py), the LM head
(megatron/core/models/gpt/gpt_model.py: ``output_layer`` is a tensor_parallel.ColumnParallelLinear, not a TE module)
and the MoE router (moe/router.py: F.linear in the router dtype).

Quantization traffic, bytes per element of a GEMM operand quantized (formulas/compute.py ``quantize_op``): in
forward the input activation, in backward the gradient of the output (weights are cast once per step and cached:
TE ``is_first_microbatch``, amortised over the micro-batches and left out). Per recipe, from Transformer Engine's
quantizers (transformer_engine/pytorch/tensor/*):
- ``fp8`` (DelayedScaling, Megatron's default ``--fp8-recipe delayed``): one fused cast-transpose kernel, read the
  16-bit tensor (2 B), write the FP8 row-wise copy (1 B) and the transposed copy the other GEMM needs (1 B); the
  amax is taken in the same pass and the scale comes from the amax history: 4 B. A GPU whose FP8 GEMMs take any
  layout (Blackwell datacenter parts; Transformer Engine ``is_non_tn_fp8_gemm_supported``: compute capability 10.x)
  gets no transposed copy (csrc/quantizer.cpp: ``with_transpose = columnwise_usage &&
  !nvte_is_non_tn_fp8_gemm_supported()``): 3 B there, and 5 B for current scaling (``transpose_bytes``, hardware
  profile ``fp8_non_tn``). Transformer Engine's GEMM benchmark on B300 (gemm_profiling.rst, autocast minus
  pre-quantized, x and W cast on every call) spends 0.99 ms on delayed scaling's casts against 2.33 ms for current
  scaling and 1.82 ms for MXFP8, in the order of these byte counts.
- ``fp8-cs`` (Float8CurrentScaling, ``--fp8-recipe tensorwise``): the scale needs this tensor's amax first, an
  extra read pass (2 B) before the cast-transpose: 6 B.
- ``fp8-block`` (Float8BlockScaling, ``--fp8-recipe blockwise``, DeepSeek-V3's 1x128 / 128x128 tiles): amax per
  tile in the casting kernel, row-wise and column-wise FP8 copies with one fp32 scale per 128 elements each:
  2 + 2 x (1 + 4/128) = 4.0625 B.
- ``mxfp8`` (MXFP8BlockScaling, ``--fp8-recipe mxfp8``): row-wise and column-wise FP8 copies, each with one
  E8M0 scale byte per 32 elements: 2 + 2 x (1 + 1/32) = 4.0625 B.
- ``nvfp4`` (NVFP4BlockScaling): the per-tensor amax of the two-level scaling (an extra read, 2 B), then row-wise
  and column-wise 4-bit copies with one E4M3 scale per 16 elements: 2 + 2 + 2 x (0.5 + 1/16) = 5.125 B.
- ``fp8-row`` (torchao's Float8 recipe "rowwise", torchtitan ``--quantize.linear.float8.recipe_name rowwise``;
  no Transformer Engine recipe): one scale per row, from that row's amax. torchao's own cost model
  (torchao/testing/training/roofline_utils.py ``get_tensor_memory_traffic_ovhd_s``, recipe "rowwise") counts, per
  input or output-gradient element, a kernel that reads the 16-bit tensor and writes the row-wise FP8 copy and a
  16-bit transposed copy (2 + 1 + 2 B), then one casting that copy column-wise (2 + 1 B): 8 B, against 6 for
  tensorwise. Its GEMMs: PyTorch's row-wise scaled GEMM, a CUTLASS kernel on H100 (pytorch/pytorch#147971: "most
  shapes are within 90-100 % of tensor-wise efficiency" with fast accumulation, a long tail to 50 %); ASSUMED at
  per-tensor FP8's rate. Never gathered quantized (``tp_gather`` False): torchtitan applies its FP8 TP styles to
  tensorwise scaling only (models/llama3/parallelize.py: "For rowwise recipes, we use regular TP and all-gather
  happens in high precision"). Not modelled: torchao's fall-back for small linears, which the row-wise recipe makes
  slower than BF16 (pytorch/ao#2410 "_auto_filter_for_recipe": "attention.wk and attention.wv layers were so small
  that float8 rowwise conversion resulted in significant slowdown (approx 40%)"; torchtitan#1207), and the rescaling
  pass after the backward GEMMs that torchao runs as a cuBLAS tensor-wise GEMM (pytorch/ao#1325).
TP all-gathers (``tp_gather_bytes``, formulas/step.py ``tp_block_comm``, symbols ``tg_in`` / ``tg_out``): where the
stack quantizes before gathering (plan ``quantized_tp_gather``), a column-parallel input moves one quantized copy
per element and a row-parallel output gradient one (per-tensor FP8) or two (the block-scaled recipes); the
reduce-scatters stay 16-bit. ASSUMED: the cast kernels are priced on the gathered tensor as without the quantized
gather (Transformer Engine casts the s/t shard before gathering, and on Hopper transposes the gathered FP8 data after).
Saved GEMM inputs (``saved_bytes``, formulas/memory.py): Transformer Engine's Linear keeps, for the weight gradient,
the quantized input it made in forward with its row-wise data discarded (transformer_engine/pytorch/module/linear.py:
``inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)``; the row-wise copy instead where the input is
re-gathered in backward): one low-precision copy with its scales, 1 B for FP8 (per-tensor scale), 1 + 4/128 B for
FP8 blockwise, 1 + 1/32 B for MXFP8, 0.5 + 1/16 B for NVFP4. torchao's Float8Linear saves the 16-bit input and
re-quantizes it in backward (torchao/float8/float8_linear.py ``ctx.save_for_backward(input_hp, weight_hp_t)``),
which costs the cast again in backward time as well (compute.quantize_op, symbol ``q_saved``): the stack says which
(stacks/*.yaml ``quantized_saves``).
Cast kernels per routed expert (``expert_casts``, formulas/step.py ``expert_launches``): Transformer Engine's
GroupedLinear quantizes its input (forward) and output gradient (backward) with ``tex.split_quantize``
(transformer_engine/pytorch/csrc/extensions/cast.cpp, v2.8-v2.16): one fused kernel for all local experts under
delayed scaling (``nvte_multi_cast_transpose``) and NVFP4 (``split_quantize_nvfp4_impl``), otherwise each expert's
quantizer in turn (``multi_tensor_quantize_impl``, "Quantize kernels individually"): MXFP8 and FP8 blockwise one
``nvte_quantize_v2`` each, FP8 current scaling three (``nvte_compute_amax_with_config``,
``nvte_compute_scale_from_amax``, ``nvte_quantize_v2``; csrc/quantizer.cpp Float8CurrentScalingQuantizer::quantize_impl).
Rate of the recipe's GEMM kernels (``gemm_rate``, formulas/compute.py ``op_time``, symbol ``lp_rate``): a
low-precision GEMM reaches a smaller fraction of its own peak than a 16-bit GEMM of the same shape. Transformer
Engine's GEMM benchmark (docs/examples/gemm_profiling/gemm_profiling.rst @1609c890, benchmarks/gemm/benchmark_gemm.py
``--pre-quantize``: the 12 GEMMs of a transformer layer, M = 15872 tokens, hidden 4096, FFN 16384, kernels only)
measures per layer on a B300 SXM6: BF16 13.102 ms, FP8 current scaling 6.812, MXFP8 7.161, NVFP4 3.764; on an H200
NVL: BF16 31.968, FP8 current scaling 16.785. Over the peak ratio (2 for FP8): per-tensor FP8 0.962 (B300) and 0.952
(H200), their mean 0.957 for ``fp8`` and ``fp8-cs`` (delayed scaling runs the same kernels; the benchmark cannot
pre-quantize it); MXFP8 0.915 (B300; Blackwell only). FP8 blockwise on Hopper, where Transformer Engine runs it
natively through cuBLASLt's VEC128 / BLK128x128 scale modes (common/gemm/cublaslt_gemm.cu): 0.846, the rate at which
the model prices the benchmark's autocast mode (each GEMM a te.Linear forward under te.autocast, its input and weight
cast every call) at its H200 NVL figure, 22.882 ms per layer (no pre-quantized figure is published: Hopper's cuBLAS
takes no 2D-by-2D block-scaled pair); the same pricing puts the other autocast figures within about a tenth
(benchmarks/te_gemm_benchmark.py), and cuBLAS 12.9's release notes bound it ("up to 1.75x" over BF16 on large Hopper matmuls, i.e.
at most 0.875: NVIDIA technical blog "Boosting Matrix Multiplication Speed and Flexibility with NVIDIA cuBLAS 12.9").
On Blackwell the recipe is emulated with MXFP8 (pytorch/csrc/extensions/gemm.cpp "Emulate the FP8 block scaling
recipe with MXFP8 on Blackwell and newer"): MXFP8's rate there (``gemm_rate_non_tn``). NVFP4: 1, its GEMMs reach the
16-bit fraction of the FP4 peak on B200 (torchao benchmarks/float8/bench_matmul.py on a B200, pytorch/ao#2427:
4.46-5.50 PFLOP/s at 4096-8192 cubed, which the b200 profile prices within 1-5 %); a GPU whose FP4 peak its GEMMs
do not reach says so in its profile (``max_matmul_fp4``: Blackwell Ultra, b300.yaml).
Not modelled: the cast fused into the preceding norm. Transformer Engine's LayerNormLinear (Megatron-Core's QKV and
dense fc1) normalizes straight into FP8 under delayed scaling and takes the amax in the norm kernel under current
scaling and NVFP4 without the Hadamard transform (csrc/extensions/normalization.cpp rmsnorm_fwd: FULLY_FUSED,
FUSED_NORM_AMAX_FP8, FUSED_NORM_AMAX_NVFP4; MXFP8 unfused unless NVTE_NORM_FWD_USE_CUDNN). That saves 2-4 B per
element of those two inputs, under 1 % of a layer at the shapes of the validation rows; these casts are upper bounds
by that much.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Precision:
    name: str
    peak: str            # the profile's peak_flops key of the low-precision GEMMs
    q_bytes: float       # quantization HBM bytes per quantized element (0: no quantization)
    label: str           # how people write it
    saved_bytes: float = 0.0     # bytes per element of a GEMM input saved quantized for backward (0: 16-bit training)
    expert_casts: int = 0        # cast kernels TE's split_quantize launches per routed expert for one operand (0: fused)
    gemm_rate: float = 1.0       # the recipe's GEMM kernels' fraction of peak over a 16-bit GEMM's (TE benchmark, above)
    transpose_bytes: float = 0.0  # of q_bytes, the transposed FP8 copy a GPU with TN-only FP8 GEMMs needs (per-tensor)
    tp_gather: bool = True       # a stack may all-gather TP inputs quantized (tp_gather_bytes); False: always 16-bit
    gemm_rate_non_tn: float | None = None   # gemm_rate on a GPU whose FP8 GEMMs take any layout (Blackwell); None: same

    @property
    def per_tensor(self) -> bool:
        """One scale per tensor (delayed or current scaling): the recipes whose FP8 data has a transposed copy, so a
        row-wise gather serves both GEMM layouts and the parameter gather can move FP8 weights."""
        return self.transpose_bytes > 0


# Transformer Engine's GEMM benchmark, pre-quantized (kernels only), ms per layer of its 5B config (module docstring)
TE_GEMM_BENCHMARK = {"b300": {"bf16": 13.102, "fp8-cs": 6.812, "mxfp8": 7.161, "nvfp4": 3.764},
                     "h200-nvl": {"bf16": 31.968, "fp8-cs": 16.785}}
# the same benchmark in autocast mode (each GEMM a te.Linear forward under te.autocast: casts included), ms per layer
TE_GEMM_AUTOCAST = {"b300": {"bf16": 12.758, "fp8-cs": 9.147, "fp8": 7.802, "mxfp8": 8.984, "nvfp4": 6.453},
                    "h200-nvl": {"bf16": 32.014, "fp8-cs": 20.285, "fp8": 18.978, "fp8-block": 22.882}}
# per-tensor FP8 kernels: the mean of the two GPUs' (BF16 time / FP8 time) / 2
GEMM_RATE_FP8 = sum(TE_GEMM_BENCHMARK[g]["bf16"] / TE_GEMM_BENCHMARK[g]["fp8-cs"] / 2 for g in ("b300", "h200-nvl")) / 2
GEMM_RATE_MXFP8 = TE_GEMM_BENCHMARK["b300"]["bf16"] / TE_GEMM_BENCHMARK["b300"]["mxfp8"] / 2   # B300 only (Blackwell)
# FP8 blockwise kernels on Hopper: the rate for which the model's autocast layer (kernels and casts) equals the H200
# NVL autocast figure (benchmarks/te_gemm_benchmark.py fit_block_rate; tests/test_lowp_gemm_rate.py checks the two
# agree). On Blackwell the recipe runs as MXFP8 (gemm_rate_non_tn)
GEMM_RATE_FP8_BLOCK = 0.846

PRECISIONS = {p.name: p for p in (
    Precision("bf16", "bf16", 0.0, "BF16"),
    Precision("fp16", "fp16", 0.0, "FP16"),
    Precision("fp32", "fp32", 0.0, "FP32"),
    Precision("fp8", "fp8", 4.0, "FP8 delayed scaling (Megatron --fp8-recipe delayed, the default)", 1.0, 0,
              GEMM_RATE_FP8, 1.0),
    Precision("fp8-cs", "fp8", 6.0, "FP8 current (per-tensor) scaling, --fp8-recipe tensorwise", 1.0, 3, GEMM_RATE_FP8,
              1.0),
    Precision("fp8-block", "fp8", 2 + 2 * (1 + 4 / 128), "FP8 blockwise scaling (DeepSeek-V3), --fp8-recipe blockwise",
              1 + 4 / 128, 1, GEMM_RATE_FP8_BLOCK, gemm_rate_non_tn=GEMM_RATE_MXFP8),
    Precision("mxfp8", "fp8", 2 + 2 * (1 + 1 / 32), "MXFP8 (E8M0 scale per 32 elements), --fp8-recipe mxfp8", 1 + 1 / 32,
              1, GEMM_RATE_MXFP8),
    Precision("nvfp4", "fp4", 2 + 2 + 2 * (0.5 + 1 / 16), "NVFP4 (E4M3 scale per 16 elements + per-tensor scale)",
              0.5 + 1 / 16),
    Precision("fp8-row", "fp8", 8.0, "FP8 row-wise dynamic scaling (torchao Float8 recipe 'rowwise')", 1.0, 0,
              GEMM_RATE_FP8, 0.0, False),
)}
NAMES = tuple(PRECISIONS)
HIGH = ("bf16", "fp16", "fp32")          # no quantization: every GEMM at this dtype's peak


def get(name: str) -> Precision:
    return PRECISIONS[name]


def peak_key(name: str) -> str:
    """The peak_flops key of the plan's low-precision GEMMs ('fp8-cs' -> 'fp8'); unknown names pass through."""
    p = PRECISIONS.get(name)
    return p.peak if p else name


def high_key(name: str) -> str:
    """The peak_flops key of the GEMMs that stay in 16 bits (attention core, LM head, router)."""
    return name if name in HIGH else "bf16"


def low_precision(name: str) -> bool:
    return name in PRECISIONS and name not in HIGH


def tp_gather_bytes(name: str, act_bytes: float, quantized: bool, hp_frac: float = 0.0) -> tuple[float, float]:
    """Bytes per element of the TP all-gathers (column-parallel input, row-parallel output gradient) under sequence
    parallelism: the activation dtype, or, where the stack quantizes before gathering (``quantized``: plan
    quantized_tp_gather) and the recipe allows it, the quantized copy with its scales, in the share 1 - hp_frac of the
    layers the recipe quantizes. Transformer Engine (distributed.py gather_along_first_dim with a quantizer,
    v2.x): the input is gathered with one usage (the row-wise data in forward, layernorm_linear.py
    ``set_usage(rowwise=True, columnwise=False)``; one usage again when re-gathered for the weight gradient) and the
    output gradient (module/base.py grad_output_preprocess) with the usages its quantizer holds: one for a per-tensor
    FP8 recipe, whose transpose is made after the gather (``supports_only_rowwise_all_gather``), both the row-wise and
    the column-wise copy for the block-scaled recipes (MXFP8, NVFP4, FP8 blockwise), whose column-wise scales cannot
    come from the row-wise data. torchao's tensorwise TP styles gather FP8 input and FP8 output gradient
    (float8_tensor_parallel.py)."""
    p = get(name)
    if not (quantized and low_precision(name) and p.tp_gather):
        return act_bytes, act_bytes
    one = p.saved_bytes
    both = one if p.per_tensor else 2 * one
    return ((1 - hp_frac) * one + hp_frac * act_bytes, (1 - hp_frac) * both + hp_frac * act_bytes)


def param_gather_bytes(name: str, act_bytes: float, fp8_param_gather: bool) -> float:
    """Bytes per parameter the sharded parameter all-gather moves: 1 for a per-tensor FP8 recipe (delayed or current
    scaling, the recipes with a transposed copy) under Megatron-Core --fp8-param-gather; MXFP8 parameters are gathered
    in BF16 through the gradient buffer and cast after (Megatron-Core reuse_grad_buf_for_mxfp8_param_ag), NVFP4 and
    blockwise priced alike: the activation dtype."""
    return 1.0 if fp8_param_gather and get(name).per_tensor else act_bytes
