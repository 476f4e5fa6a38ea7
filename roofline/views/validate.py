"""Validate predictions against published, measured step times (``python -m roofline validate FILE.csv``).

Reads any CSV with the columns of ``shared/validation/README.md`` (published.csv, vtrain_measured.csv; or Markdown
pipe tables of them, :func:`markdown_table`),
builds (Model, Plan, Hardware) for every row from the row's own fields with the documented defaults
below, evaluates all rows at once through the compiled formulas, and reports signed errors
(predicted / measured - 1) with MAPE, median and max absolute error per tier, GPU, layout and micro-batch.

Defaults, chosen from a row's fields and source text only (never from its case_id); see docs/validation.md:

- framework: ``optimizer_sharding=fsdp`` -> ``fsdp``; ``distributed`` or a source naming Megatron-Core ->
  ``megatron-core``; a source or notes naming DeepSpeed -> ``megatron-deepspeed``; otherwise (Narayanan 2021,
  Korthikanti 2022) -> ``megatron-lm-2021``. Stated columns (seq_parallel, recompute, optimizer_sharding)
  override the framework's defaults.
- Rows whose settings state a Megatron-Core pipeline layout (``pp_layout X``, ``pipeline_model_parallel_layout=X``):
  pipeline_layout; rows stating none: their model preset's recipe layout for (pp, vp) where it has one
  (models.pipeline_layout; DeepSeek-V3: Megatron-Bridge's layout_map).
- Rows whose settings name the flex dispatcher's DeepEP / HybridEP backend: ep_dispatcher (tokens cross the
  network once per destination node, formulas/comm.py dispatch_a2a); an ``ETP=`` setting: etp.
- Rows whose ``activation_offload`` column is a whole number of layers: offload_layers, where the row's layout can
  run it (pp = 1, no recomputation, fewer than all layers: Megatron-Core transformer_config.py).
- Rows whose settings state the MoE all-to-all overlap (Megatron-Core ``--overlap-moe-expert-parallel-comm``,
  "EP A2A overlap"): overlap_ep = 1 (each all-to-all hidden behind the compute block Megatron-Core pairs it with,
  formulas/step.py ep_merged); with "delay_wgrad" (``--delay-wgrad-compute``) stated as well: delay_wgrad.
- Low-precision rows naming a Megatron-Bridge precision recipe that keeps layers in 16 bits
  (``nemotron_3_super_bf16_with_nvfp4_mixed``: the last 14, on an NVFP4 row), or stating the counts with
  ``first_last_layers_bf16``: bf16_layers.
- Rows that say an axis ran without communication overlap ("no TP/DP/PP comm overlap"): that axis's overlap
  fields 0 (dp: overlap_grad_reduce and overlap_param_gather; tp, pp, cp, ep: overlap_tp, overlap_pp, ...).
- Low-precision rows whose settings state FP8 attention ("FP8 dot-product attention", "MXFP8 dot-product attention",
  ``fp8_dot_product_attention=True``, ``fp8_dpa``; Megatron-Core ``--fp8-dot-product-attention``): fp8_attention.
- Low-precision rows run with Megatron-Bridge (framework column, or settings citing a Bridge recipe), or stating
  ``fp8_param_gather``: fp8_param_gather (Bridge's FP8 presets set it; the all-gather moves FP8 weights under a
  per-tensor recipe).
- Rows whose settings state 16-bit Adam moments ("BF16 Adam moments", ``exp_avg_dtype=torch.bfloat16``; Megatron-Core's
  precision-aware optimizer): moment_dtype. An ``optimizer`` column, or Muon named in the text: optimizer.
- Megatron-Core rows whose notes or settings state TP communication overlap (``--tp-comm-overlap``,
  ``tp_comm_overlap=True``, "userbuffer TP comm-overlap"; not when followed by false/off, nor on an NVFP4 row that
  says "off for NVFP4"; torchtitan's and NeMo AutoModel's "async TP": ``tp_comm_overlap_stated``): overlap_tp =
  (tp-1)/tp (the ring-exchange
  overlap splits each TP collective into tp steps; the first step has no GEMM chunk to hide behind).
  Megatron-Core overlaps pipeline send/recv in the interleaved schedule (on by default): overlap_pp = 1
  when v > 1.
- precision blank or no such column -> a recipe the notes or settings state (FP8, Float8, MXFP8, NVFP4, FP4;
  not in a clause that negates it or only quotes a peak rate, nor anywhere in a text one sentence of which says the
  precision is not stated: ``precision_from_text``), else the stack's default.
- a stack whose default attention writes the score matrix out (Megatron-LM 2021/2022) and a framework, model,
  attention or settings cell naming FlashAttention without a version: the flash path of the row's date, FlashAttention-2
  from its 2023-07 release, the first before (``flash_named``; not read from the notes, which cite the paper).
- MoE: an expert TP size stated in any spelling (ETP=1, --expert-tensor-parallel-size 1) -> etp; a text keeping EP
  within each node (``ep_in_node_stated``) with an ep that fits the node -> etp 1; a dispatcher the framework cell names
  ("MoE dispatcher DeepEP") or a recipe summary lists alone ("DeepEP; EP overlap") as one the notes name; "EP
  overlap" in such a list or A2A_OVERLAP=1 -> overlap_ep; Megatron --recompute-modules quoted from a command line or recipe
  -> recompute_modules (``recompute_modules_stated``).
- the stack's version (and a FlashAttention's) dated by the row's source cell where it gives a year, not by the
  papers its notes cite for the architecture; a release after the stack's name ("NeMo Megatron 24.11") dates it ahead
  of any year (stacks.infer date_text).
- a fully sharded row (fsdp / zero3 column) whose tp x pp x dp x cp leaves a factor of the GPUs over: its dp counts
  the replicas ("FSDP=64, DP=1", "dp_shard x dp_replicate"), the factor shards inside each (dp x factor ranks, dp
  replicas; noted).
- global_batch blank on a row measuring a step time whose notes say the source withholds the batch: skipped (the
  default micro-batch x dp prices one micro-batch per rank; a per-token rate is priced on that default).
- micro_batch blank and the text saying it accumulated gradients to fit in memory: the largest micro-batch below the
  rank's batch that divides it and fits (``micro_batch_to_fit``), noted.
- a 'selective' recompute column on a stack that recomputes whole blocks only (fms-fsdp's share of the blocks), the
  notes stating both HFU and MFU: full recomputation of the share r = 3 (HFU / MFU - 1) of the layers, whole layers
  (``hfu_mfu_stated``; HFU counts the recomputed forwards, 2 N r of the 6 N model FLOPs).
- MaxText rows naming their remat_policy: 'minimal*' / 'save_*' (every matmul output kept, element-wise ops redone)
  -> recompute none, 'full' / 'none' as themselves, over a recompute column's 'selective' (noted).
- a profile whose node is a rack-scale NVLink domain (gb200, gb300: 72) and a row whose gpus_per_node counts the host
  (a compute tray of 4): the domain stays the node, the one the text names ("NVL72", "NVLink Domain Size: 72") or the
  profile's; a text naming a domain no larger than the row's node (GB200 NVL4) keeps the row's (``nvlink_domain_stated``).
- a row stating torch.compile: fused elementwise kernels (eager_elementwise off) whatever the stack's default; likewise
  a row naming fused norm and activation kernels, or Liger Kernel (``fused_elementwise_stated``), and fused rotary.
- head_dim blank -> the text's --kv-channels / kv_channels / head_dim (not where it names Mamba); qk_layernorm blank -> on
  where the text states qk_layernorm (unless false).
- global_batch and local_batch blank, the text stating a local batch ("Local batch size 8", torchtitan's per-DP-rank
  training.local_batch_size): global batch = it x dp (``local_batch_from_text``, ``batch_from_local``); no batch
  column at all, the text stating a global batch in tokens right after "batch size" or "global batch" ("batch size of
  4M tokens"): that many tokens over seq_len (``batch_tokens_from_text``, ``batch_from_tokens``); not where the text
  says the batch is not stated or states two.
- a layout that leaves a factor of the GPUs over where the text names DeepSpeed-Ulysses (and no ring attention): that
  factor as cp, cp_kind ulysses (``ulysses_stated``); a stack without Ulysses refuses it (stacks cp_kinds).
- global_batch blank on a pipelined row (pp > 1) with only a micro-batch: skipped, with the reason (the default global
  batch, micro-batch x dp, would run one micro-batch through the pipeline).
- a pipeline whose first and last stage hold one layer fewer, as the text states (or Megatron-Core's
  --account-for-embedding/loss-in-pipeline-split): that layout (``edge_stages_lighter``).
- TFLOP/s per GPU from Megatron-LM's log: its num_floating_point_operations of the run's date (whole attention through
  core_v0.11.0, causal attention half from core_v0.12.0; ``_megatron_basis``); from MaxText's log: its
  calculate_tflops_training_per_device of the run's date for dense models (whole attention before 2025-07-18, causal
  half after; ``_maxtext_basis``).
- micro_batch blank -> one the text states or the gradient accumulation steps give (a grad_accum column or the text:
  ``micro_batch_from_text``), else the stack's: 1 for the Megatron stacks (the micro-batch of Megatron-LM's GPT-3 175B example
  script); global batch / dp (no gradient accumulation) for the DeepSpeed ZeRO, PyTorch FSDP and torchtitan stacks
  without PP (their configs accumulate only when told; stacks/*.yaml micro_batch_unstated); with PP, torchtitan's
  pipeline micro-batch of 1 since 2025-04, before it the local batch over pp micro-batches (torchtitan-2024,
  microbatches_with_pp; a row's torchtitan version is dated by its source text, month included).
- pp > 1, interleave blank: a schedule the settings or notes name ("Interleaved 1F1B", "1F1B", "GPipe", "DualPipeV":
  ``schedule_from_text``); a stated FSDP float8 all-gather (torchtitan enable_fsdp_float8_all_gather, "float8
  all-gather") -> fp8_param_gather.
- a global batch that is no multiple of micro-batch x dp but within 5 % of one (a rounded figure of the source:
  GPT-NeoX-20B's 1538 for its 4 x 32 x 12 = 1536) -> that multiple, noted; further off -> skipped.
- interleave blank -> 1 when pp = 1 or the framework has no interleaved schedule (DeepSpeed); otherwise
  (Megatron rows, whose sources used interleaved 1F1B) the smallest v >= 2 with layers % (pp v) == 0
  (or (layers + 2) % (pp v) == 0 in a stack that splits uneven stages: the embedding and the loss each fill a
  virtual stage, Megatron-Core account_for_embedding/loss_in_pipeline_split) and micro-batches % pp == 0, or 1
  when no such v exists; where the plan then does not fit in memory, the smallest larger valid v with which it does,
  before recomputation (``unstated_interleave``).
- cp blank -> 1; recompute blank -> the stack's default (Megatron: none; GPT-NeoX, metaseq: full; torchtitan: op),
  unless the plan then cannot fit (``unstated_recompute``); fsdp column -> FSDP on (a flag) or HSDP (a shard size,
  ``fsdp_column``); n_kv_heads blank -> MHA; ffn_hidden blank -> 4h (gelu).
- exactly one of tp/pp/dp blank -> n_gpus / (the other two); more than one blank -> tp = pp = 1 when that fits in memory,
  else tp up to the node, then the fewest pipeline stages that fit (MoE: EP x TP inside the node, the smallest tp,
  then the fewest stages; ``complete_layout``).
- ep blank (or '-') on an MoE row over more than one GPU with its layout stated -> the fastest ep that fits of those
  dividing the experts and dp x cp, noted (``unstated_ep``); a stated ep stands.
- seq_len blank -> the stack's shipped training config for the model family, else the named preset's pretraining
  context (``unstated_seq_len``), else skipped.
- gpu_id -> the hardware profile of that id; gpus_per_node and net_gbps_per_gpu override it when given (a gpus_per_node
  that a bundled datasheet variant of the GPU describes takes that node's profile: gh200 with 4 -> gh200-quad); gpu_id blank ->
  the profile the free-text gpu column names when it names exactly one (hardware.from_text); a bare 'H100' / 'A100' / 'V100'
  (no variant named) -> h100-sxm / a100-sxm4-80gb / v100-sxm2-32gb, the part of DGX/HGX nodes, noted (hardware.bare_part); else skipped.
- measured time = measured_iter_time_s, else derived_iter_time_s (the source's own FLOP formula).
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from dataclasses import replace as dc_replace
from pathlib import Path

import numpy as np

from ..base import precision
from ..base.errors import InputError
from . import report
from ..base.results import MappingResult, freeze
from ..base.units import GiB
from ..base.paths import DATA
from ..spec.config import MAMBA_FIELDS

REQUIRED = ("case_id", "n_layers", "d_model", "n_heads", "vocab", "seq_len", "global_batch", "tp", "pp", "dp",
            "gpu_id", "measured_iter_time_s")
# What a file needs at the least (a row without a case_id is named by its line, "row 7"): a model (a preset's name, or
# its shape); a GPU (a profile id, or a free
# text naming one); a measurement (a step time, or a rate that gives one: time_from_rate; or a peak memory). The other
# columns of REQUIRED a file may leave out: each row then reads them as blank, and what a blank means there applies
# (a preset's shape and pretraining context, the practitioners' layout, complete_layout), or the row is skipped with
# its reason.
AT_LEAST = (("model", "n_layers"), ("gpu_id", "gpu"),
            ("measured_iter_time_s", "derived_iter_time_s", "measured_peak_memory_gib", "tokens_per_s",
             "tokens_per_s_per_gpu", "samples_per_s", "measured_tflops_per_gpu", "measured_mfu"))
INTS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_hidden", "vocab", "seq_len", "global_batch",
        "micro_batch", "tp", "pp", "dp", "cp", "ep", "interleave", "n_gpus", "gpus_per_node", "n_experts", "top_k",
        "moe_ffn_hidden", "head_dim", "n_shared_experts", "first_dense_layers", "mtp", "mla_q_lora_rank",
        "mla_kv_lora_rank", "mla_qk_nope_head_dim", "mla_qk_rope_head_dim", "mla_v_head_dim", "swa_window", "swa_every",
        "moe_latent_size", "fsdp", "grad_accum", "n_nodes", "local_batch")
FLOATS = ("net_gbps_per_gpu", "measured_iter_time_s", "derived_iter_time_s", "measured_peak_memory_gib",
          "flops_per_iter", "measured_tflops_per_gpu", "measured_mfu", "tokens_per_s", "tokens_per_s_per_gpu",
          "samples_per_s")
# a row run with Megatron-Bridge: its framework column, or settings that cite a Bridge recipe file
BRIDGE_FRAMEWORK = re.compile(r"megatron[- ]bridge|megatron/bridge|scripts/performance/configs")
# Megatron-Bridge precision recipes that keep layers in 16 bits: name -> (the row precision they serve, layers at the
# start, at the end) (src/megatron/bridge/training/mixed_precision.py nemotron_3_super_bf16_with_nvfp4_mixed:
# first_last_layers_bf16 True, num_layers_at_end_in_bf16 14)
BF16_LAYER_RECIPES = {"nemotron_3_super_bf16_with_nvfp4_mixed": ("nvfp4", 0, 14)}
# the plan's overlap fields of each parallel axis (a row stating "no <axes> comm overlap" turns them off)
OVERLAP_OF_AXIS = {"dp": ("overlap_grad_reduce", "overlap_param_gather"), "pp": ("overlap_pp",),
                   "tp": ("overlap_tp",), "cp": ("overlap_cp",), "ep": ("overlap_ep",)}
# the parallel degrees group one at a time too (tp, pp, dp, cp, ep: an error that grows with one axis shows across layouts)
PARALLEL_BY = ("tp", "pp", "dp", "cp", "ep")
BY = ("tier", "gpu", "layout", "micro_batch", "nodes", "source", "framework", "model", "precision", "arch", "graphs") \
    + PARALLEL_BY
GRAPHS = {"none": "eager", "layers": "per-layer CUDA graphs", "full": "full-iteration CUDA graph"}


DATASETS = {"published": "published.csv", "vtrain": "vtrain_measured.csv", "nemo": "nemo_perf.csv",
            "memory": "memory_measured.csv", "tables": "public_tables.csv", "papers": "public_papers.csv"}
# bundled files of another shape: measured memory per rank (views/memory_ranks.py), not step-time rows
OTHER_DATASETS = {"memory-ranks": "memory_per_rank_simumax_b200.csv"}


def dataset_path(name: str):
    """Path of a bundled public validation set (roofline/data/validation; SOURCES.md there)."""
    names = {**DATASETS, **OTHER_DATASETS}
    if name not in names:
        raise InputError(f"--dataset must be one of {', '.join(names)}, got {name!r}")
    return DATA / "validation" / names[name]


class Skip(Exception):
    """A row that cannot be predicted: contradictory or unsupported fields (the message says which)."""


@dataclass(frozen=True)
class Case:
    row: dict
    model: object
    plan: object
    hw: object
    framework: str
    measured: float
    spec: object = None
    stack_reason: str = ""
    note: str = ""

    @property
    def single_node(self) -> bool:
        return self.plan.n_gpus <= self.hw.gpus_per_node


# ---- reading -------------------------------------------------------------------------------------
def _number(v: str, col: str) -> float:
    """A number cell as sources write it: '1,536' / '1 536' / '1_536' (digit groups), a leading '~' or '≈' (the source's
    own rounding), and on a seconds column (``*_s``) a trailing 's' / 'sec' or 'ms'. Anything else: ValueError.

    A fraction column (``measured_mfu``) also reads a percentage: '42.5 %' is 0.425.

    >>> _number("1,536", "global_batch"), _number("~5.39 s", "measured_iter_time_s"), _number("850 ms", "derived_iter_time_s")
    (1536.0, 5.39, 0.85)
    >>> _number("42.5 %", "measured_mfu"), _number("0.425", "measured_mfu"), _number("42.5", "measured_mfu")
    (0.425, 0.425, 0.425)

    A count with a magnitude suffix: a context length or a batch as papers write them, in powers of two ('8K' context
    is 8192, Llama 3's '128K' 131072; a '1.5K' batch 1536), a rate or any other count in powers of ten ('3.2k'
    tokens/s is 3200; '1.2M tokens/s').

    >>> _number("8K", "seq_len"), _number("1.5k", "global_batch"), _number("3.2k", "tokens_per_s_per_gpu")
    (8192.0, 1536.0, 3200.0)
    """
    t = v.strip().lstrip("~≈").strip()
    if col in FRACTIONS and t.endswith("%"):
        return float(t[:-1].strip()) / 100
    if col in FRACTIONS and re.fullmatch(r"\d+(?:\.\d+)?", t) and 1 < float(t) <= 100:
        return float(t) / 100           # a percentage without its sign (llm-foundry's "MFU" 42.57): no fraction is > 1
    if re.fullmatch(r"\d{1,3}([, _]\d{3})+(\.\d+)?", t):
        t = re.sub(r"[, _]", "", t)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kKmMgG])", t)
    if m and not col.endswith("time_s"):
        base = 1024 if col in BINARY_COUNTS else 1000
        return float(m.group(1)) * base ** ("kmg".index(m.group(2).lower()) + 1)
    scale = 1.0
    if col.endswith("_s"):
        m = re.fullmatch(r"(.+?)\s*(ms|s|sec|secs|seconds)", t)
        if m:
            t, scale = m.group(1), 1e-3 if m.group(2) == "ms" else 1.0
    return float(t) * scale


# Cells that say "no value" as sources and spreadsheets write it, read as blank (unstated) in a number column: the
# missing-value spellings pandas.read_csv treats as NaN by default (its `na_values` documentation: '#N/A', '#N/A N/A',
# '#NA', '-1.#IND', '-1.#QNAN', '-NaN', '-nan', '1.#IND', '1.#QNAN', '<NA>', 'N/A', 'NA', 'NULL', 'NaN', 'None', 'n/a',
# 'nan', 'null'), compared case-insensitively, and the dashes, '?' and words papers' tables use for a value not given.
MISSING = frozenset(x.lower() for x in (
    "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL",
    "NaN", "None", "n/a", "nan", "null",
    "-", "--", "\u2013", "\u2014", "?", "unknown", "not stated", "not reported", "n.r.", "n/r", "tbd"))
FRACTIONS = ("measured_mfu",)     # number columns that hold a fraction (a cell may write it as a percentage)
# counts whose magnitude suffix is a power of two: context lengths ("8K" = 8192) and batches ("1.5K" = 1536)
BINARY_COUNTS = ("seq_len", "global_batch", "micro_batch")
# a global_batch cell in tokens ("4M tokens", Llama 2's; "16M tokens", Llama 3's; a bare "4M", millions being a token
# count): tokens / seq_len sequences, read in build_case once the row's seq_len is known (its own, the preset's or the
# stack's: batch_from_tokens)
BATCH_TOKENS = "_batch_tokens"
UNREADABLE = "_unreadable"      # row key: why a number cell of the row could not be read (build_case skips the row)


TEXT_COLUMNS = ("model", "gpu", "precision", "framework", "source", "notes", "settings", "tier", "optimizer_sharding",
                "recompute", "seq_parallel", "mlp", "attention", "optimizer", "flop_basis", "global_batch_tokens")
COLUMNS = REQUIRED + INTS + FLOATS + TEXT_COLUMNS     # every column name a file may use (some in two of the groups)
# Headers as performance tables print them -> the file's column names (compared lower-cased, letters and digits only):
# NVIDIA's summaries ("#-GPUs", "GBS", "MBS", "Sequence Length", "TP", "VP", "Tokens / sec / GPU"), papers' tables
# ("Model", "GPUs", "Seq. Len.", "Step time (s)"). A header that is already a column name keeps it; "Model TFLOP / sec /
# GPU" is not read as a measurement (its FLOP count is the publisher's, the row would need its flop_basis).
HEADER_ALIASES = {
    "gpus": "n_gpus", "numgpus": "n_gpus", "ngpus": "n_gpus", "gpucount": "n_gpus", "ofgpus": "n_gpus",
    "tensorparallel": "tp", "tensorparallelsize": "tp", "pipelineparallel": "pp", "pipelineparallelsize": "pp",
    "dataparallel": "dp", "dataparallelsize": "dp", "contextparallel": "cp", "contextparallelsize": "cp",
    "expertparallel": "ep", "expertparallelsize": "ep", "vp": "interleave", "vpp": "interleave",
    "virtualpipeline": "interleave", "virtualpipelinestages": "interleave",
    "gbs": "global_batch", "globalbatch": "global_batch", "globalbatchsize": "global_batch",
    "mbs": "micro_batch", "microbatch": "micro_batch", "microbatchsize": "micro_batch",
    "seqlen": "seq_len", "seqlength": "seq_len", "sequencelength": "seq_len",
    "tokenssecgpu": "tokens_per_s_per_gpu", "tokenspersecpergpu": "tokens_per_s_per_gpu",
    "tokenspersecondpergpu": "tokens_per_s_per_gpu", "tokensspergpu": "tokens_per_s_per_gpu",
    "tgs": "tokens_per_s_per_gpu", "tgstokensgpusecond": "tokens_per_s_per_gpu",   # InternEvo's "TGS (Tokens/GPU/Second)"
    "samplespersec": "samples_per_s", "samplespersecond": "samples_per_s", "sampless": "samples_per_s",
    "throughputsampless": "samples_per_s", "throughputsamplespersec": "samples_per_s",
    "steptime": "measured_iter_time_s", "steptimes": "measured_iter_time_s", "iterationtime": "measured_iter_time_s",
    "iterationtimes": "measured_iter_time_s", "secondsperstep": "measured_iter_time_s",
    "dtype": "precision", "numlayers": "n_layers", "layers": "n_layers", "hiddensize": "d_model",
    # llm-foundry's benchmark tables (scripts/train/benchmarking/README.md: "SeqLen (T)", "Throughput (T/s)",
    # "Throughput (T/s/GPU)", "Throughput (S/s)", "MFU" in percent, "Sharding Strategy", "Activation Checkpointing")
    "seqlent": "seq_len", "throughputts": "tokens_per_s", "throughputtsgpu": "tokens_per_s_per_gpu",
    "throughputss": "samples_per_s", "tokenss": "tokens_per_s", "tokenspersec": "tokens_per_s",
    "tokenspersecond": "tokens_per_s", "throughputtokenss": "tokens_per_s", "throughputtokenssgpu": "tokens_per_s_per_gpu",
    "mfu": "measured_mfu", "shardingstrategy": "optimizer_sharding", "activationcheckpointing": "recompute",
    # torchtitan's tables: "TPS/GPU"; its 2024 docs' "WPS" (tokens per second of one data-parallel rank, torchtitan
    # train.py: ntokens / (time x model-parallel size): per GPU on its FSDP-only tables)
    "tpsgpu": "tokens_per_s_per_gpu", "wps": "tokens_per_s_per_gpu",
    # gradient accumulation steps (micro-batches per optimizer step at pp = 1): llm-foundry's "GradAccum", DeepSpeed's
    # gradient_accumulation_steps, Hugging Face's --gradient_accumulation_steps
    "gradaccum": "grad_accum", "gradientaccumulation": "grad_accum", "gradientaccumulationsteps": "grad_accum",
    "gradaccumsteps": "grad_accum", "accumulationsteps": "grad_accum", "gas": "grad_accum",
    # a model's Hugging Face config.json names (LlamaConfig: num_hidden_layers, hidden_size, num_attention_heads,
    # num_key_value_heads, intermediate_size, vocab_size) as sweep tables dump them beside the run's knobs (nanotron's
    # config_*.yaml model_config and parallelism blocks: batch_accumulation_per_replica, zero_stage, "tok/s/gpu")
    "numhiddenlayers": "n_layers", "numattentionheads": "n_heads", "numheads": "n_heads",
    "numkeyvalueheads": "n_kv_heads", "numkvheads": "n_kv_heads", "intermediatesize": "ffn_hidden",
    "vocabsize": "vocab", "batchaccum": "grad_accum", "batchaccumulationperreplica": "grad_accum",
    "zerostage": "optimizer_sharding", "toksgpu": "tokens_per_s_per_gpu", "tokssgpu": "tokens_per_s_per_gpu",
    "toks": "tokens_per_s",
    # papers' and READMEs' spellings of the same columns (the Megatron-LM README's "Tensor model-parallel size",
    # "Attention heads", "Number of layers", "Achieved teraFLOP/s per GPU"; "TP size", "VPP size", "Context length",
    # "Time per iteration (s)", "TFLOPs/GPU", "Tokens/GPU/s"). A TFLOP/s column needs the row's FLOP count
    # (flop_basis, flops_per_iter, or its stack's logged count: logged_basis); a time column in milliseconds is read
    # through ms_headers, a column in GB is not aliased (GB or GiB: its unit would be misread)
    "numberofgpus": "n_gpus", "worldsize": "n_gpus", "tensormodelparallelsize": "tp",
    "pipelinemodelparallelsize": "pp", "tpsize": "tp", "ppsize": "pp", "dpsize": "dp", "cpsize": "cp", "epsize": "ep",
    "vppsize": "interleave", "virtualpipelineparallelsize": "interleave", "sequencelen": "seq_len",
    "contextlength": "seq_len", "contextlen": "seq_len", "timeperiteration": "measured_iter_time_s",
    "timeperiterations": "measured_iter_time_s", "timeiters": "measured_iter_time_s", "timeperstep": "measured_iter_time_s",
    "timepersteps": "measured_iter_time_s", "numberoflayers": "n_layers", "attentionheads": "n_heads",
    "numberofattentionheads": "n_heads", "kvheads": "n_kv_heads", "ffnhiddensize": "ffn_hidden",
    "tokensgpus": "tokens_per_s_per_gpu", "tokenspergpupersecond": "tokens_per_s_per_gpu",
    "throughputpergputokenss": "tokens_per_s_per_gpu", "samplessec": "samples_per_s",
    "sequenceparallel": "seq_parallel", "activationrecomputation": "recompute", "tflopsgpu": "measured_tflops_per_gpu",
    "tflopspergpu": "measured_tflops_per_gpu", "achievedteraflopspergpu": "measured_tflops_per_gpu",
    "achievedteraflopsspergpu": "measured_tflops_per_gpu", "peakmemorygib": "measured_peak_memory_gib",
    # a bare "Batch size" in a table of training runs is the global batch (Narayanan et al. 2021 Table 1, the
    # Megatron-LM README, Smith et al. 2022, BLOOM): a per-device batch is printed as such ("per-device batch size",
    # "MBS", "micro batch size"), and a file that also has a global_batch column keeps it
    "batchsize": "global_batch",
    # a per-rank batch of one forward and backward: torchtitan's training.local_batch_size, Hugging Face's
    # per_device_train_batch_size, "batch size per GPU" (global batch = it x dp x gradient accumulation: batch_from_local)
    "localbatch": "local_batch", "localbatchsize": "local_batch", "perdevicebatchsize": "local_batch",
    "perdevicetrainbatchsize": "local_batch", "batchsizepergpu": "local_batch", "batchsizeperdevice": "local_batch",
    "pergpubatchsize": "local_batch", "perdevicebatch": "local_batch",
    # the Llama 3 paper's Table 4 (Dubey et al. 2024): "Batch size/DP" sequences per data-parallel rank, "Tokens/Batch"
    # the global batch in tokens ("16M"), "BF16 MFU"
    "batchsizedp": "local_batch", "batchsizeperdp": "local_batch", "tokensbatch": "global_batch_tokens",
    "tokensperbatch": "global_batch_tokens", "globalbatchtokens": "global_batch_tokens",
    "globalbatchsizetokens": "global_batch_tokens", "batchsizetokens": "global_batch_tokens",
    "bf16mfu": "measured_mfu",
    # the GPU under other names ("Hardware": "8x A100 80GB", "GPU type", "Accelerator"); a count in the cell is read as
    # n_gpus when that column is blank (gpus_from_text)
    "hardware": "gpu", "gputype": "gpu", "accelerator": "gpu", "gpumodel": "gpu", "accelerators": "gpu",
    # the Megatron-LM README's first column, "Model size" (1.7B ... 1T): the row's model, named by its size
    "modelsize": "model",
    # a node count ("Nodes", "# Nodes", "num_nodes", torchrun's --nnodes): n_gpus = nodes x GPUs per node (read)
    "nodes": "n_nodes", "numnodes": "n_nodes", "nnodes": "n_nodes", "ofnodes": "n_nodes", "numberofnodes": "n_nodes",
    "elapsedtimeperiteration": "measured_iter_time_s",        # Megatron-LM's training log (in ms: ms_headers)
    # a time per step written as a rate's reciprocal: tqdm's "s/it" (Hugging Face Trainer and accelerate progress
    # bars), "sec/iter", "Time/step", "iter time" (in ms when the header says so: ms_headers)
    "sit": "measured_iter_time_s", "secit": "measured_iter_time_s", "siter": "measured_iter_time_s",
    "seciter": "measured_iter_time_s", "sstep": "measured_iter_time_s", "secstep": "measured_iter_time_s",
    "secperiter": "measured_iter_time_s", "secondsperiteration": "measured_iter_time_s",
    "itertime": "measured_iter_time_s", "timeiter": "measured_iter_time_s", "timestep": "measured_iter_time_s",
    "timeperiter": "measured_iter_time_s",
    # rates: "Tokens/s/GPU", "tokens/sec", "tokens/second" (whole run), "sequences/s", "Throughput (seq/s)"
    "tokenssgpu": "tokens_per_s_per_gpu", "tokensssgpu": "tokens_per_s_per_gpu", "tokenssec": "tokens_per_s",
    "tokenssecond": "tokens_per_s", "sequencess": "samples_per_s", "sequencespersecond": "samples_per_s",
    "sequencespersec": "samples_per_s", "seqspersec": "samples_per_s", "throughputseqs": "samples_per_s",
    "throughputsequencess": "samples_per_s", "seqsec": "samples_per_s",
    # NVIDIA JAX-Toolbox's Pax tables: "Sequences/Sec" (the whole job's), "BS / GPU" (PERCORE_BATCH_SIZE)
    "sequencessec": "samples_per_s", "seqssec": "samples_per_s", "bsgpu": "local_batch", "bspergpu": "local_batch",
    # model tables' short names: "# Heads", "Heads", "Vocabulary", "Hidden dim", "Model dim", "Embedding dim";
    # nanoGPT's GPTConfig names n_layer, n_head, n_embd and block_size (the context length it trains on)
    "heads": "n_heads", "nheads": "n_heads", "ofheads": "n_heads", "numberofheads": "n_heads", "nhead": "n_heads",
    "vocabulary": "vocab", "vocabularysize": "vocab", "hiddendim": "d_model", "modeldim": "d_model",
    "embeddingdim": "d_model", "embeddingsize": "d_model", "nembd": "d_model", "nlayer": "n_layers",
    "blocksize": "seq_len", "contextwindow": "seq_len", "contextsize": "seq_len", "maxseqlen": "seq_len",
    "maxsequencelength": "seq_len", "maxseqlength": "seq_len",
}


def _header_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", (name or "").lower())


# A time header that states milliseconds ("Step time (ms)"; Megatron-LM's log line "elapsed time per iteration (ms)"):
# the column it names, its unit-less cells read in ms. Only seconds columns take it (a rate or a memory in other units
# is not converted)
_MS_HEADER = re.compile(r"^(.*?)[\s_]*(?:\(\s*ms\s*\)|\[\s*ms\s*\]|(?<![a-z])ms|(?<![a-z])milliseconds?)\s*$", re.I)
# the same as a rate's reciprocal: "ms/step", "ms/iter", "ms per iteration", "ms/it"
_MS_PER = re.compile(r"^\s*(?:ms|milliseconds?)\s*(?:/|per)\s*(?:step|it|iter|iteration|batch)\s*$", re.I)


def ms_headers(fieldnames) -> dict:
    """{header: seconds column} for the headers that name a time column in milliseconds.

    >>> ms_headers(["elapsed time per iteration (ms)", "Step time [ms]", "MBS", "Time per iteration (s)"])
    {'elapsed time per iteration (ms)': 'measured_iter_time_s', 'Step time [ms]': 'measured_iter_time_s'}
    """
    out = {}
    for h in fieldnames:
        if _MS_PER.match(h or ""):
            out[h] = "measured_iter_time_s"
            continue
        m = _MS_HEADER.match((h or "").strip())
        col = HEADER_ALIASES.get(_header_key(m.group(1))) if m else None
        if col and col.endswith("_s") and col not in ("tokens_per_s", "tokens_per_s_per_gpu", "samples_per_s"):
            out[h] = col
    return out


def canonical_headers(fieldnames) -> dict:
    """{header: column name} for a file's headers: a column name as it is (any case), else HEADER_ALIASES, unless that
    column is in the file already.

    >>> canonical_headers(["case_id", "Model", "GPU", "#-GPUs", "TP", "GBS", "Seq Length", "Tokens / sec / GPU"])
    {'Model': 'model', 'GPU': 'gpu', '#-GPUs': 'n_gpus', 'TP': 'tp', 'GBS': 'global_batch', 'Seq Length': 'seq_len', 'Tokens / sec / GPU': 'tokens_per_s_per_gpu'}
    """
    names = set(fieldnames)
    out = {}
    columns = COLUMNS
    lows = {h: (h or "").strip().lower().replace(" ", "_") for h in fieldnames}
    # a header that is a column name in any case ("Model") takes it before an alias does ("Model size" beside it)
    exact = {low for low in lows.values() if low in columns}
    for h in fieldnames:
        low = lows[h]
        known = low in columns
        if low == h and known:
            continue
        col = low if known else HEADER_ALIASES.get(_header_key(h)) or _with_unit(h) or _misspelled(h)
        if col and col not in names and col not in out.values() and (known or col not in exact):
            out[h] = col
    return out


_UNIT_SUFFIX = re.compile(r"(.*?)\s*(?:[(\[]\s*(?:in\s+)?([^()\[\]]+?)\s*[)\]]|\bin\s+(\w+))\s*", re.I)


def _with_unit(header: str) -> str | None:
    """The column of a header that names a known one and its unit ("Sequence length (tokens)", "Global batch
    (sequences)", "Seq len [tokens]", "GPUs (#)", "Batch size in tokens"): a count unit keeps the column, tokens on a
    batch make it global_batch_tokens; a unit the column does not take (a batch in GB, a length in seconds) reads
    nothing."""
    m = _UNIT_SUFFIX.fullmatch(header or "")
    if not m or not m.group(1).strip():
        return None
    base, unit = m.group(1), (m.group(2) or m.group(3)).strip().lower()
    key = _header_key(base)
    col = HEADER_ALIASES.get(key) or (key if key in COLUMNS else None)
    if col is None:
        low = base.strip().lower().replace(" ", "_")
        col = low if low in COLUMNS else None
    if unit in ("token", "tokens", "tok", "toks"):
        return {"global_batch": "global_batch_tokens", "global_batch_tokens": "global_batch_tokens",
                "seq_len": "seq_len"}.get(col)
    if unit in ("sequence", "sequences", "sample", "samples", "seq", "seqs"):
        return col if col in ("global_batch", "micro_batch", "local_batch") else None
    if unit in ("#", "count", "number", "gpus", "layers", "heads", "nodes"):
        return col if col in INTS else None
    if unit in ("s", "sec", "secs", "second", "seconds"):           # "Iter time (sec)", "Time/step [s]"
        return col if col == "measured_iter_time_s" else None
    return None


# A header within this similarity of one known spelling (difflib's ratio of the letters and digits), the same in its
# last three characters (a unit or a plural is no typo), is read as that spelling's column: a published table's typo (torchtitan docs/performance.md "Activation checkpoiting": 0.98) reads,
# two spellings of different columns stay apart (the closest pairs of HEADER_ALIASES keys of different columns, such as
# "tpsize"/"epsize" or "numheads"/"numkvheads", are below it, and headers under 10 characters are never guessed).
MISSPELLED_RATIO = 0.94


def _misspelled(header: str) -> str | None:
    """The column of the one known header spelling a long ``header`` is a near miss of (MISSPELLED_RATIO), else None."""
    import difflib

    key = _header_key(header)
    if len(key) < 10 or _MS_HEADER.match((header or "").strip()):
        return None             # short, or a time in ms (ms_headers reads it, in ms)
    spellings = {**{re.sub(r"[^a-z0-9]", "", c): c for c in COLUMNS}, **HEADER_ALIASES}
    # a header in GB is no misspelled GiB column (its unit would be misread, see HEADER_ALIASES)
    # a typo inside the words, never at the end where a unit or a plural is ("Time per iteration (ms)" is no
    # "Time per iteration (s)", "Peak memory GB" no "Peak memory GiB")
    close = [c for c in difflib.get_close_matches(key, spellings, n=2, cutoff=MISSPELLED_RATIO)
             if c[-3:] == key[-3:] and not ("gib" in c and "gib" not in key)]
    cols = {spellings[c] for c in close}
    return cols.pop() if len(cols) == 1 else None


def read_dicts(rows: list[dict], name: str = "rows.csv") -> list[dict]:
    """Rows written as dicts of text cells (a benchmark's published runs), read exactly as ``read`` reads a CSV of
    them: through a temporary file, every column any row has, blank where a row has none."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), restval="")
            w.writeheader()
            w.writerows(rows)
        return read(path)


_MD_RULE = re.compile(r"\s*:?-{3,}:?\s*")


def _md_cells(line: str) -> list[str]:
    """The cells of one pipe-table line ("| a | b |" or "a | b"), an escaped pipe (\\|) kept inside its cell."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [_md_plain(c) for c in re.split(r"(?<!\\)\|", body)]


def _md_plain(cell: str) -> str:
    """A Markdown cell's text: footnote references ("1[^1]"), emphasis ("**56.8%**"), inline code and link targets
    ("[Llama 3 8B](url)") left out, an escaped pipe as a pipe."""
    c = re.sub(r"\[\^[^\]]*\]", "", cell.replace("\\|", "|"))
    c = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", c)
    c = re.sub(r"(\*\*|__|`)(.+?)\1", r"\2", c)
    return c.strip()


def markdown_table(text: str, path) -> tuple[list[str], list[int]] | None:
    """A file whose rows are Markdown pipe tables (a README's benchmark table pasted as it is: llm-foundry's
    scripts/train/benchmarking/README.md, torchtitan's docs/performance.md) as CSV lines and, per CSV line, the line
    of the file it came from (index n: CSV line n); None for any other text (read as CSV). A table is a header line, a delimiter line of
    dashes (GitHub Flavored Markdown spec, "Tables (extension)") and its rows; headings and prose between tables are
    left out. Several tables (one per GPU or precision, as such READMEs group them) are read as one when they share
    the header; tables of different headers are one InputError, as a row shorter or longer than its header is."""
    lines = text.splitlines()
    starts = [i for i in range(len(lines) - 1) if "|" in lines[i] and "|" in lines[i + 1]
              and all(_MD_RULE.fullmatch(c) for c in _md_cells(lines[i + 1]) if c)
              and any(_MD_RULE.fullmatch(c) for c in _md_cells(lines[i + 1]))]
    if not starts:
        return None
    header, out, where = None, [], [0]
    for i in starts:
        cells = _md_cells(lines[i])
        if header is None:
            header = cells
            out.append(_csv_line(header))
            where.append(i + 1)
        elif cells != header:
            raise InputError(f"{path} line {i + 1}: a Markdown table whose header differs from the first table's "
                             f"(line {starts[0] + 1}): one column layout per file")
        for j in range(i + 2, len(lines)):
            if "|" not in lines[j] or not lines[j].strip():
                break
            row = _md_cells(lines[j])
            if len(row) != len(header):
                raise InputError(f"{path} line {j + 1}: a table row of {len(row)} cells under a header of "
                                 f"{len(header)}")
            out.append(_csv_line(row))
            where.append(j + 1)
    return out, where


def _csv_line(cells: list[str]) -> str:
    """One CSV line (quoted where a cell needs it), without the line ending."""
    buf = io.StringIO()
    csv.writer(buf).writerow(cells)
    return buf.getvalue().rstrip("\r\n")


def read(path, require: tuple = ()) -> list[dict]:
    """Rows of a validation CSV, numbers parsed (blank or a missing-value spelling, ``MISSING`` -> None); InputError on
    a malformed file. A number cell that is neither a number nor missing makes its row a skip with the reason (the
    other rows are still priced), unless ``require`` is given: columns the caller needs stated (calibrate from-runs fits
    on stated layouts and shapes, not on inferred ones), where such a cell stops the file."""
    path = Path(path)
    from ..base.schema import read_text
    text = read_text(path, "validation CSV").lstrip("\ufeff")
    table = markdown_table(text, path)
    source_line = table[1] if table else None      # CSV line -> line of the file (markdown: its table rows)
    lines = table[0] if table else text.splitlines()
    head = next((ln for ln in lines if ln.strip()), "") if not table else ""
    # a sheet exported or pasted as tab- or semicolon-separated text (a spreadsheet's copy, a locale whose decimal
    # mark is the comma): the delimiter the header line holds most of, commas unless another outnumbers them
    delimiter = max((",", "\t", ";"), key=lambda d: (head.count(d), d == ","))
    reader = csv.DictReader(lines, delimiter=delimiter)
    if not reader.fieldnames:
        raise InputError(f"{path}: empty file (expected a header with {', '.join(REQUIRED)})")
    renamed = canonical_headers(reader.fieldnames)
    columns = COLUMNS
    bare_batch = next((h for h, c in renamed.items() if c == "global_batch" and _header_key(h) == "batchsize"), None)
    guessed = "; ".join(f"header {h!r} read as {c} (the nearest known spelling)" for h, c in renamed.items()
                        if h.strip().lower().replace(" ", "_") not in columns and _header_key(h) not in HEADER_ALIASES)
    in_ms = {c: h for h, c in ms_headers(reader.fieldnames).items()
             if c not in reader.fieldnames and c not in renamed.values()}
    renamed.update({h: c for c, h in in_ms.items()})
    if renamed:                                      # "GBS", "Seq Length", "#-GPUs": the columns they mean
        reader.fieldnames = [renamed.get(h, h) for h in reader.fieldnames]
    missing = [c for c in require if c not in reader.fieldnames]
    if missing:
        raise InputError(f"{path}: missing required column(s) {', '.join(missing)}")
    lacking = [" or ".join(group) for group in AT_LEAST if not any(c in reader.fieldnames for c in group)]
    if lacking:
        raise InputError(f"{path}: needs the column(s) {'; '.join(lacking)} (README: a model, a GPU and a "
                         "measurement at the least)")
    absent = [c for c in REQUIRED if c not in reader.fieldnames]     # read as blank in every row
    from ..spec import hardware as hwmod
    known_ids = set(hwmod.list_ids())           # the profile folder, read once per file (not once per row)
    rows = []
    for line, raw in enumerate(reader, start=2):
        line = source_line[line] if source_line else line
        if None in raw:
            raise InputError(f"{path} line {line}: more fields than the header has columns")
        row = {**dict.fromkeys(absent, ""), **{k: (v or "").strip() for k, v in raw.items()}}
        if guessed:
            row[HEADER_GUESS] = guessed
        if bare_batch and row.get("global_batch"):
            row[BATCH_AMBIGUOUS] = bare_batch
        if not row["case_id"]:
            row["case_id"] = f"row {line}"          # a table without ids: each row named by its line in the file
        if not row.get("gpu_id") and row.get("gpu"):
            # a blank gpu_id with a free-text gpu naming one bundled part ("A100-80GB (SXM4)"): that profile, noted
            found = hwmod.from_text(row["gpu"])
            bare = None if found else hwmod.bare_part(row["gpu"])
            if found:
                row["gpu_id"], row[GPU_FROM_TEXT] = found, row["gpu"]
            elif bare:
                row["gpu_id"], row[GPU_BARE] = bare
        elif row.get("gpu_id") and row["gpu_id"] not in known_ids:
            # a gpu_id that is no profile id but names one part ("a100-80gb", "gb200-nvl72", "h200-sxm"): that
            # profile, noted; a bare "h100" or "a100": the part such tables mean (hardware.bare_part), noted
            found = hwmod.from_text(row["gpu_id"])
            bare = None if found else hwmod.bare_part(row["gpu_id"])
            if found and found != row["gpu_id"]:
                try:
                    hwmod.load(row["gpu_id"])
                except InputError:
                    row[GPU_ID_SPELLED], row["gpu_id"] = row["gpu_id"], found
            elif bare:
                row["gpu_id"], row[GPU_BARE] = bare
        bad = []
        # (a batch of millions is a token count however written: Llama 2's "4M", GPT-3's "3.2M")
        tokens = re.fullmatch(r"~?\s*(\d+(?:\.\d+)?)\s*(?:([kKmMgG]?)\s*tok(?:en)?s?|([mMgG]))",
                              re.sub(r"(?<=\d)[,_ ](?=\d{3}\b)", "", row.get("global_batch", "")))
        if tokens:
            # tokens per step: decimal and binary readings of the suffix, the one a whole number of sequences
            # takes (build_case: batch_from_tokens)
            suffix = tokens.group(2) or tokens.group(3)
            k = "kmg".index(suffix.lower()) + 1 if suffix else 0
            row[BATCH_TOKENS] = (float(tokens.group(1)) * 1000 ** k, float(tokens.group(1)) * 1024 ** k,
                                 row["global_batch"])
            row["global_batch"] = ""
        elif not row.get("global_batch") and row.get("global_batch_tokens"):
            # a batch column in tokens ("Tokens/Batch": Llama 3 paper Table 4's "16M"; a bare count is tokens here)
            cell = row["global_batch_tokens"]
            t = re.fullmatch(r"~?\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*(?:tok(?:en)?s?)?",
                             re.sub(r"(?<=\d)[,_ ](?=\d{3}\b)", "", cell))
            if t:
                k = "kmg".index(t.group(2).lower()) + 1 if t.group(2) else 0
                row[BATCH_TOKENS] = (float(t.group(1)) * 1000 ** k, float(t.group(1)) * 1024 ** k, f"{cell} tokens")
            else:
                bad.append(f"column global_batch_tokens must be a token count, got {cell!r}")
        rate_units(row)
        gpus_from_text(row)
        nodes_to_gpus(row, hwmod)
        for col in in_ms:                            # a cell of a header in ms: ms unless the cell names its unit
            if re.fullmatch(r"[~≈]?\s*[\d.,_ ]+", row.get(col) or ""):
                row[col] = re.sub(r"(?<=\d)[,_ ](?=\d{3}\b)", "", row[col]).strip() + " ms"
        for col in INTS + FLOATS:
            v = row.get(col, "")
            if delimiter == ";" and re.fullmatch(r"[~≈]?\s*\d+,\d+\s*[%a-zA-Z]*", v):
                v = v.replace(",", ".")         # a semicolon-separated sheet's locale writes decimals with a comma
            if v == "" or v.lower() in MISSING:
                row[col] = None
                continue
            try:
                x = _number(v, col)
                why = "" if math.isfinite(x) else "finite"
                why = why or ("an integer" if col in INTS and x != int(x) else "")
            except ValueError:
                x, why = float("nan"), "a number"
            if why:
                bad.append(f"column {col} must be {why}, got {v!r}")
                row[col] = None
                continue
            row[col] = int(x) if col in INTS else x
        if bad and require:
            raise InputError(f"{path} line {line}: {bad[0]}")
        if bad:
            row[UNREADABLE] = "; ".join(bad)
        rows.append(row)
    if not rows:
        raise InputError(f"{path}: no data rows")
    seen = {}
    for line, r in enumerate(rows, start=2):
        line = source_line[line] if source_line else line
        if r["case_id"] in seen:
            raise InputError(f"{path}: case_id {r['case_id']!r} appears twice (lines {seen[r['case_id']]} and {line})")
        seen[r["case_id"]] = line
    return rows


GPUS_TEXT_NOTE = "_gpus_text_note"      # row key: how a blank n_gpus was read from the gpu cell (gpus_from_text)
# "8x A100 80GB", "8 x H100": a count and a multiplication sign before the part; "2 x 8 H100", "4x8xA100": nodes x
# GPUs per node; "16 H100 GPUs": a bare count only where the cell ends in "GPU(s)" (a part named by a number, "3090 Ti",
# or a memory size first, "80GB A100", is no count)
_GPU_COUNT = re.compile(r"\s*(\d+)\s*[x×*]\s*(?:(\d+)(?!\s*[GT]i?B)\s*[x×*]?\s*)?(?=[A-Za-z])")
_GPU_COUNT_BARE = re.compile(r"\s*(\d+)\s+(?=[A-Za-z])(?=.*\bgpus?\s*$)", re.I)


def gpus_from_text(row: dict) -> None:
    """A blank n_gpus from a count the gpu cell states before the part ("8x A100 80GB": 8; "2 x 8 H100": 16, nodes x
    GPUs per node); in place, noted under GPUS_TEXT_NOTE. A cell naming no count, or an n_gpus column that is not
    blank, is left alone (the part itself is read from the text as any gpu cell is).

    >>> r = {"n_gpus": "", "gpu": "2 x 8 H100"}; gpus_from_text(r); r["n_gpus"]
    '16'
    """
    text = row.get("gpu") or ""
    m = _GPU_COUNT.match(text) or _GPU_COUNT_BARE.match(text)
    if (row.get("n_gpus") or "").strip() or not m or not text[m.end():].strip():
        return
    n = int(m.group(1)) * int((m.group(2) if m.re.groups > 1 else None) or 1)     # nodes x GPUs per node
    if n < 1:
        return
    row["n_gpus"] = str(n)
    row[GPUS_TEXT_NOTE] = f"n_gpus {n} from the gpu cell {text!r}"


NODES_NOTE = "_nodes_note"      # row key: how a blank n_gpus was read from the row's node count (nodes_to_gpus)
# Largest node a node count is multiplied out for without the row's gpus_per_node: a DGX/HGX-class server of 8 GPUs.
# A profile whose gpus_per_node is its NVLink domain (GB200 / GB300 NVL72: 72, while a compute tray, the "node" a
# scheduler counts, holds 4) leaves the count unread: its rows state n_gpus or gpus_per_node.
NODE_GPUS_MAX = 8


_DOMAIN = re.compile(r"\bnvl[- ]?(\d{1,3})\b|nvlink[- ]domain(?:[- ]size)?\W{0,3}(?:of\s+)?(\d{1,3})\b")


def nvlink_domain_stated(text: str) -> int | None:
    """The rack-scale NVLink domain a row's text names, in GPUs ("GB200 NVL72", "NVLink Domain Size: 72"), or None.

    >>> [nvlink_domain_stated(t) for t in ("GB200 NVL72", "NVLink Domain Size: 72", "nvlink 900 GB/s", "GB200 NVL4")]
    [72, 72, None, 4]
    """
    m = _DOMAIN.search((text or "").lower())
    return int(m.group(1) or m.group(2)) if m else None


def recompute_modules_stated(text: str) -> str | None:
    """The Megatron-Core recompute modules a row's lower-cased text quotes from a command line or a recipe
    ("--recompute-modules moe_act layernorm", "recompute_modules=['mla_up_proj', 'mlp']"), canonical
    (normalize.recompute_modules); None when it quotes none. The names are read while they are module names.

    >>> [recompute_modules_stated(t) for t in ("--recompute-granularity selective --recompute-modules moe_act layernorm "
    ...     "--moe-router-force-load-balancing", "recompute_modules=['mla_up_proj', 'mlp']", "recompute modules not stated")]
    ['moe_act,layernorm', 'mla_up_proj,mlp', None]
    """
    from ..base import normalize
    m = re.search(r"recompute[-_]modules\W{1,4}((?:['\"]?[a-z_]+['\"]?[\s,]*)+)", text or "")
    if not m:
        return None
    names = []
    for w in re.findall(r"[a-z_]+", m.group(1)):
        if w not in normalize.RECOMPUTE_MODULES:
            break
        names.append(w)
    return normalize.recompute_modules(",".join(names)) if names else None


def nodes_to_gpus(row: dict, hwmod) -> None:
    """A blank n_gpus from the row's node count (``n_nodes``: "Nodes", "--nnodes") times its gpus_per_node, else the
    GPU profile's when that is a server of at most NODE_GPUS_MAX GPUs; in place, with the note under NODES_NOTE.

    >>> r = {"n_gpus": "", "n_nodes": "16", "gpus_per_node": "", "gpu_id": "h100-sxm"}
    >>> nodes_to_gpus(r, __import__("roofline.spec.hardware", fromlist=["x"])); r["n_gpus"]
    '128'
    """
    nodes = (row.get("n_nodes") or "").strip()
    if (row.get("n_gpus") or "").strip() or not re.fullmatch(r"\d+", nodes):
        return
    per, whose = (row.get("gpus_per_node") or "").strip(), "the row's gpus_per_node"
    if not re.fullmatch(r"\d+", per):
        try:
            per, whose = str(hwmod.load(row["gpu_id"]).gpus_per_node), f"{row['gpu_id']}'s GPUs per node"
        except (InputError, KeyError, TypeError, ValueError):
            return
        if int(per) > NODE_GPUS_MAX:
            return
    row["n_gpus"] = str(int(nodes) * int(per))
    row[NODES_NOTE] = f"n_gpus {row['n_gpus']} = {nodes} nodes x {per} ({whose})"


# A rate cell with the unit the source printed beside the number: tokens/s ("6,020 tokens/s", "3.2k tok/sec"),
# TFLOP/s ("150 TFLOPS", "150 TFLOP/s/GPU"), samples/s. A tokens/s cell whose unit says per GPU ("6,020/GPU",
# "6,020 tokens/s/GPU", "6,020 per GPU") is the per-GPU rate: it moves to tokens_per_s_per_gpu when that is blank.
_PER_GPU = r"(?:\s*(?:/|per)\s*(?:gpu|device|accelerator|chip)s?)"
_RATE_UNITS = {
    "tokens_per_s": r"(?:tok(?:en)?s?(?:\s*(?:/|per)\s*(?:s|sec|secs|second)))",
    "tokens_per_s_per_gpu": r"(?:tok(?:en)?s?(?:\s*(?:/|per)\s*(?:s|sec|secs|second)))",
    "samples_per_s": r"(?:(?:samples?|seqs?|sequences?)(?:\s*(?:/|per)\s*(?:s|sec|secs|second)))",
    "measured_tflops_per_gpu": r"(?:tflop(?:/s|s)?(?:\s*(?:/|per)\s*(?:s|sec|second))?)",
}


def rate_units(row: dict) -> None:
    """Strip the unit of a rate cell (``_RATE_UNITS``), in place; a per-GPU tokens/s in the tokens_per_s column moves
    to tokens_per_s_per_gpu (when that column is blank; else the cell is left for the reader to refuse).

    >>> r = {"tokens_per_s": "6,020/GPU", "tokens_per_s_per_gpu": ""}; rate_units(r); r
    {'tokens_per_s': '', 'tokens_per_s_per_gpu': '6,020'}
    >>> r = {"tokens_per_s": "1.2M tokens/s", "measured_tflops_per_gpu": "150 TFLOP/s/GPU"}; rate_units(r); r
    {'tokens_per_s': '1.2M', 'measured_tflops_per_gpu': '150'}
    """
    for col, unit in _RATE_UNITS.items():
        v = (row.get(col) or "").strip()
        if not v:
            continue
        m = re.fullmatch(rf"(.*?\d[kKmMgG]?)\s*({unit})?({_PER_GPU})?", v, flags=re.I)
        if not m or not (m.group(2) or m.group(3)):
            continue
        per_gpu = bool(m.group(3))
        if per_gpu and col == "tokens_per_s":
            if (row.get("tokens_per_s_per_gpu") or "").strip():
                continue
            row["tokens_per_s"], row["tokens_per_s_per_gpu"] = "", m.group(1).strip()
        elif per_gpu and col != "tokens_per_s_per_gpu" and col != "measured_tflops_per_gpu":
            continue                    # samples/s per GPU: no column holds it; left for the reader to refuse
        else:
            row[col] = m.group(1).strip()


# ---- one row -> Spec ------------------------------------------------------------------------------
# A low-precision recipe stated in a row's notes or settings when it has no precision column (published.csv's
# columns have none): a clause naming FP8 / Float8 / MXFP8 / NVFP4 / FP4 counts unless it negates it or only quotes
# a peak rate ("no FP8", "FP8 off", "would select the FP8 branch", "MFU on the 1979 TFLOP/s FP8 peak").
_LOWP = re.compile(r"\b(?:nvfp4|mxfp4|fp4|mxfp8|fp8(?:[- ]?(?:cs|current|block|delayed|mx))?|float8)\b")
# a clause that negates what it names, or speaks of another run ("no FP8", "without activation checkpointing",
# "unlike ZeRO-3", "FP8 off"); a precision also not when the clause only quotes a peak rate
_NOT = r"no|not|none|false|without|would|instead|disabled?|off|rather|unlike|versus|vs|except"
_LOWP_NOT = re.compile(rf"\b(?:{_NOT}|peak|basis|tflop/?s|pflop/?s)\b")
_CLAUSE_NOT = re.compile(rf"\b(?:{_NOT})\b")


# a clause that says its source is silent about something ("activation checkpointing not stated"): neither stated
# nor negated
_SILENT = re.compile(r"\b(?:not (?:stated|given|specified|reported|mentioned|known|listed|shown|provided|published|"
                     r"documented|disclosed)|not in (?:the |its |their )?(?:table|source|paper|report|readme|docs?|"
                     r"text|post|blog|config)s?|unstated|unspecified|unknown|unreported|undocumented|undisclosed|"
                     r"left blank)\b")


def stated_in_text(text: str, pattern, negation=_CLAUSE_NOT):
    """(match, negated match) of ``pattern`` in a row's lower-cased free text, clause by clause (split at ; | ( ) and
    sentence ends): the first match in a clause without a negating word, and the first in one with (either None). A
    clause that says the source does not state it (``_SILENT``) is neither.

    >>> [bool(m) for m in stated_in_text("micro-batch and activation checkpointing not stated", "activation")]
    [False, False]
    >>> [bool(m) for m in stated_in_text("activation checkpointing not in the table", "activation")]
    [False, False]
    >>> [bool(m) for m in stated_in_text("activation checkpointing not in use", "activation")]
    [False, True]
    >>> [bool(m) for m in stated_in_text("activation recomputation: left blank", "activation")]
    [False, False]
    """
    negated = None
    for clause in re.split(r"[;|()\n]|\.\s", (text or "").lower()):
        m = re.search(pattern, clause)
        if not m or _SILENT.search(clause):
            continue
        if negation.search(clause):
            negated = negated or m
        else:
            return m, negated
    return None, negated


def precision_from_text(text: str):
    """The precision a row's free text states, normalised (base/normalize.py precision), or None.

    >>> [precision_from_text(t) for t in ("Llama 3 405B, BF16", "FSDP + torch.compile + Float8", "FP8 (E4M3) GEMMs, "
    ...     "delayed scaling", "mxfp8 recipe; bf16 attention", "no FP8", "MFU on the 1979 TFLOP/s FP8 peak", "")]
    [None, 'fp8-cs', 'fp8', 'mxfp8', None, None, None]
    >>> precision_from_text("Micro-batch, precision (the paper discusses BF16 and FP8 generally; Table 3's precision "
    ...     "is not stated), ZeRO stage not stated. Sec 7 mentions their FP8 production training")
    >>> precision_from_text("Micro-batch, precision (the paper discusses BF16 and FP8 generally; Table 3's precision "
    ...     "is not stated), ZeRO stage not stated")
    """
    from ..base import normalize
    # a text that says the run's precision is not stated names formats elsewhere only as commentary ("precision (the
    # paper discusses BF16 and FP8 generally; the table's precision is not stated)", "... in their FP8 production
    # training"): a sentence naming the precision beside a silence (_SILENT), parentheses included, unsays them all
    if any(re.search(r"\bprecision|\bdtype", s, re.I) and _SILENT.search(s.lower())
           for s in re.split(r"\.\s|\n|\|", text or "")):
        return None
    m, _ = stated_in_text(text, _LOWP, _LOWP_NOT)
    return normalize.precision(m.string[m.start():]) if m else None


def row_precision(row: dict) -> tuple:
    """(dtype or None, where it came from): the precision column when stated, else a recipe the notes or settings
    state (precision_from_text), else None (the stack's default: bf16 for every 2022-2026 stack)."""
    from ..base import normalize
    if (row.get("precision") or "").strip():
        return normalize.precision(row["precision"]), "precision column"
    found = precision_from_text(f"{row.get('settings', '')}; {row.get('notes', '')}")
    return (found, "stated in the notes") if found else (None, "")


def infer_stack(row: dict, model=None, hw=None):
    """(Stack, reason) of a row: its framework column, aliases in its source/notes, else era rules
    (roofline.spec.stacks.infer); printed per row in the table and the JSON."""
    from ..spec import stacks

    try:
        dtype = row_precision(row)[0]
    except InputError:
        dtype = None
    stack, reason = stacks.infer(column=row.get("framework", ""), text=f"{row.get('source', '')} {row.get('notes', '')}",
                                 date_text=_dating_text(row),
                                 model=model, hw=hw, dtype=dtype, model_text=str(row.get("model") or ""))
    sharded = _sharding_cell(row) == "fsdp"
    if "era rule" in reason and sharded:
        # fully sharded data parallelism and no stack named: PyTorch FSDP, or torchtitan (FSDP2) when the
        # row also runs TP/PP (FSDP1 runs have neither); before torchtitan (2024), FSDP with Megatron TP and no
        # pipeline is metaseq's combination (Zhang et al. 2022, OPT, sec 2.4)
        tp, pp = (row.get("tp") or 1), (row.get("pp") or 1)
        ys = stacks.years_in(f"{row.get('source', '')} {row.get('notes', '')}".lower())
        early = bool(ys) and min(ys) < min(s.era[0] for s in stacks.versions(stacks.get("torchtitan").family))
        pick = "fsdp" if tp == pp == 1 else "metaseq" if early and pp == 1 else "torchtitan"
        y, month = stacks.earliest_date(f"{row.get('source', '')} {row.get('notes', '')}")
        stack = stacks.get(pick if pick != "torchtitan" or not y else f"torchtitan@{y}" + (f"-{month:02d}" if month else ""))
        reason = (reason.split("era rule")[0] + f"era rule: fully sharded, no stack named -> {stack.id}"
                  + {"fsdp": "", "metaseq": f" (with TP, earliest year {min(ys) if ys else ''})",
                     "torchtitan": " (with TP/PP)"}[pick])
    return stack, reason


UNMODELLED_ATTENTION = ("hybrid", "mamba", "dsv4", "linear", "csa")
# MLA columns -> Model fields (HF config.json / Megatron-Core MLATransformerConfig names)
MLA_COLUMNS = {"mla_q_lora_rank": "q_lora_rank", "mla_kv_lora_rank": "kv_lora_rank",
               "mla_qk_nope_head_dim": "qk_nope_head_dim", "mla_qk_rope_head_dim": "qk_rope_head_dim",
               "mla_v_head_dim": "v_head_dim"}


def _hybrid_fields(row: dict) -> dict:
    """A hybrid Mamba-2 row's layer pattern and mixer sizes, read from its attention_detail (nemo_model_archs.md:
    "pattern MEMEM*E...; Mamba: 64 heads x 64 head_dim, state 128, 8 groups"); unstated groups: Megatron-Core's
    default mamba_num_groups 8 (transformer_config.py). Skip when the pattern is not stated."""
    import re

    pat = re.search(r"pattern\s+([M*\-E|]{2,})", row.get("attention_detail") or "")
    if not pat:
        same = _same_as_preset(row.get("attention_detail") or "")
        if same is not None and same.hybrid_pattern:
            return {"hybrid_pattern": same.hybrid_pattern,
                    **{f: getattr(same, f) for f in MAMBA_FIELDS if getattr(same, f) is not None}}
        raise Skip("hybrid Mamba row without its layer pattern (hybrid_override_pattern)")
    d = {"hybrid_pattern": pat.group(1)}
    sizes = re.search(r"Mamba:\s*(\d+)\s*heads\s*x\s*(\d+)\s*head_dim(?:,\s*state\s*(\d+))?(?:,\s*(\d+)\s*groups)?",
                      row.get("attention_detail") or "")
    if not sizes:
        raise Skip("hybrid Mamba row without its Mamba heads and head_dim")
    d["mamba_num_heads"], d["mamba_head_dim"] = int(sizes.group(1)), int(sizes.group(2))
    if sizes.group(3):
        d["mamba_state_dim"] = int(sizes.group(3))
    if sizes.group(4):
        d["mamba_num_groups"] = int(sizes.group(4))
    return d


def _same_as_preset(detail: str):
    """The bundled preset a row's architecture note points to ("same as Nemotron 3 Nano (hybrid ...)"), or None."""
    import re

    from ..spec import families, models

    m = re.search(r"same as\s+([^()|;]+?)\s*(?:\(|$|;|\|)", detail, re.I)
    pid = families.preset_for(m.group(1), family=True) if m else None
    return models.load(pid) if pid else None


_KERNELS = (("unfused", r"\bunfused\W{0,3}(?:(?:dot[- ]product|scaled dot[- ]product|multi[- ]head)\W{0,3})?(?:attention|attn|sdpa)"
                         r"|attention\W{0,3}(?:is\W{0,3})?unfused|\b(?:no|without)\W{1,3}flash[-_ ]?(?:attention|attn)\b"
                         r"|flash[-_ ]?(?:attention|attn)\W{0,3}(?:disabled|off)\b|cudnn_fmha\W{0,3}false"),
            ("flash-triton", r"attn_impl\W{0,3}triton|triton flash[- ]?attention|flash[-_ ]?attn[-_ ]triton"
                              r"|flashattention in triton"),
            ("flash-v1", r"flash[- ]?attn[- ]?(?:v|==)?1\.|flash[- ]?attention[- ]?(?:v|-)1\b"),
            ("flash3", r"flash[-_ ]?attn[-_ ]?(?:v|==)?3\b|flash[-_ ]?attention[-_ ]?(?:v|-)?3\b|\bflash_3\b|\bfa3\b"),
            ("cudnn", r"cudnn\W{0,3}(?:fused\W{0,3})?(?:flash\W{0,3})?(?:attention|sdpa|attn)\b|attn\W{0,3}cudnn\b"),
            ("flash", r"attn_impl\W{0,3}flash\b|flash[- ]?attn[- ]?(?:v|==)?2\.|flash[- ]?attention[- ]?(?:v|-)?2\b"
                      r"|flash[-_ ]?(?:attn|attention)[-_ ]?v?2\b"))     # --use-flash-attn-v2, flash_attention_2


_SOFTMAX_FUSION = (r"(?:fused|scaled)\W{0,3}(?:scale\W{0,3})?(?:upper\W{0,3}triang\W{0,3})?mask(?:ed)?\W{0,3}(?:causal\W{0,3})?"
                   r"softmax|masked\W{0,3}(?:causal\W{0,3})?softmax\W{0,3}(?:fusion|kernel)|softmax\W{0,3}fusion")


def attention_kernel_stated(text: str) -> str | None:
    """The flash-attention kernel a row's text names (config.ATTENTION), None when it names none: llm-foundry's
    ``attn_impl: triton`` (Triton FlashAttention), FlashAttention v1 (``flash-attn 1.0.7``), FlashAttention-2,
    FlashAttention-3 (``flash_3``, OLMo-core's AttentionBackendName), cuDNN attention; or that it ran none, the score
    matrix written out: "unfused attention", "no flash attention", "flash attention off", XLA's
    ``--xla_gpu_enable_cudnn_fmha=false`` (checked first: "without FlashAttention-2" names no kernel that ran). Not
    "without fused attention": Transformer Engine's FusedAttention is its cuDNN backend, and without it TE runs
    FlashAttention's.

    >>> [attention_kernel_stated(t) for t in ("attn_impl: triton", "pip install flash-attn==1.0.7",
    ...     "flashattention-2", "attn_impl=flash", "flash attention", "", "FlashAttention-3", "backend flash_3",
    ...     "cuDNN attention", "cudnn fused attention", "--use-flash-attn-v2", "attn_implementation=flash_attention_2")]
    ['flash-triton', 'flash-v1', 'flash', 'flash', None, None, 'flash3', 'flash3', 'cudnn', 'cudnn', 'flash', 'flash']
    >>> [attention_kernel_stated(t) for t in ("no flash attention", "unfused dot-product attention",
    ...     "--xla_gpu_enable_cudnn_fmha=false", "without FlashAttention-2", "without fused attention")]
    ['unfused', 'unfused', 'unfused', 'unfused', None]
    >>> [attention_kernel_stated(t) for t in ("fused masked-causal-softmax", "scaled-upper-triang-masked-softmax-fusion",
    ...     "flash attention; masked softmax fusion")]
    ['unfused', 'unfused', None]
    """
    t = text.lower()
    for kernel, pattern in _KERNELS:
        if re.search(pattern, t):
            return kernel
    # a fused (scale-)mask(ed) softmax is the kernel of the attention that writes its score matrix out (Megatron-LM's
    # FusedScaleMaskSoftmax and scaled_upper_triang_masked_softmax: megatron/fused_kernels, used by CoreAttention,
    # not by the flash path); read only when the text names no flash or fused-attention kernel beside it
    if re.search(_SOFTMAX_FUSION, t) and not re.search(r"flash|cudnn|sdpa|fused[- ]?attention|\bfa[23]\b", t):
        return "unfused"
    return None


def _dating_text(row: dict) -> str | None:
    """The text a row's run is dated by: its source cell where that gives a year (a paper's, a commit's), else None
    (then source and notes together). The notes cite the papers of the architecture ("Brown et al. 2020",
    "arXiv:2205.05198"), which are older than the run."""
    from ..spec import stacks
    source = str(row.get("source") or "")
    return source if stacks.years_in(source.lower()) else None


_FLASH_NAMED = re.compile(r"\bflash[- _]?(?:attention|attn)\b")
# FlashAttention-2 (flash-attn v2.0.0, 2023-07-17; Dao 2023, arXiv:2307.08691): a run dated from then on that names
# "FlashAttention" without a version ran it, an earlier one the first FlashAttention (Dao et al. 2022)
FLASH2_RELEASE = (2023, 7)


def flash_named(row: dict) -> str | None:
    """The flash kernel a row's framework, model, attention or settings cell names without a version ("GPT with RoPE +
    FlashAttention", "FlashAttention GPT-2 implementation"), by
    its date: FlashAttention-2 from its release (FLASH2_RELEASE; a source dated by its year alone reads as that year's
    December), the first FlashAttention before; None when the text
    names no flash attention, or only in a negated clause. Read where the row's stack would write the score matrix
    out (its default attention unfused, e.g. Megatron-LM before --use-flash-attn was its habit): the generic name
    then says the run took the flash path the stack offered as an option.

    >>> flash_named({"model": "GPT-7B (decoder-only GPT with RoPE + FlashAttention)", "source": "Peng et al. 2023"})
    'flash'
    >>> flash_named({"framework": "FlashAttention GPT-2 implementation", "source": "Dao et al. 2022"})
    'flash-v1'
    >>> [flash_named({"settings": t, "source": "2024"}) for t in ("FlashAttention was not used", "no flash attention")]
    [None, None]
    >>> flash_named({"notes": "trained as in the FlashAttention paper", "source": "2024"}) is None
    True
    """
    from ..spec import stacks
    # the cells that describe the run (not the notes, which cite "the FlashAttention paper" as a source of rows
    # that ran other kernels)
    text = f"{row.get('framework', '')}; {row.get('model', '')}; {row.get('attention', '')}; " \
           f"{row.get('attention_detail', '')}; {row.get('settings', '')}"
    m, _ = stated_in_text(text, _FLASH_NAMED)
    if not m:
        return None
    y, month = stacks.earliest_date(_dating_text(row) or f"{row.get('source', '')} {row.get('notes', '')}")
    return "flash" if y and (y, month or 12) >= FLASH2_RELEASE else "flash-v1"


def _sharding_cell(row: dict) -> str | None:
    """The optimizer_sharding cell normalised (None: blank or unreadable)."""
    from ..base import normalize
    try:
        return normalize.sharding(row.get("optimizer_sharding", "")) if (row.get("optimizer_sharding") or "").strip() \
            else None
    except InputError:
        return None


_RATE = r"(\d+(?:\.\d+)?)\s*(%?)"


def hfu_mfu_stated(text: str) -> tuple[float, float] | None:
    """(HFU, MFU) a row's lower-cased text states for its run, as fractions ("MFU 0.51, HFU 0.59", "HFU 59 %"), or
    None unless it states both.

    >>> hfu_mfu_stated("table row: 1800 tokens/sec/gpu, mfu 0.51, hfu 0.59 (a100)"), hfu_mfu_stated("mfu 45%")
    ((0.59, 0.51), None)
    """
    got = {}
    for name in ("hfu", "mfu"):
        m = re.search(rf"\b{name}\b\W{{0,3}}(?:of\s+|=\s*)?" + _RATE, text or "")
        if not m:
            return None
        v = float(m.group(1))
        got[name] = v / 100 if (m.group(2) or v > 1) else v
    return (got["hfu"], got["mfu"]) if 0 < got["mfu"] <= got["hfu"] <= 1 else None


def _model_fields(row: dict) -> tuple[dict, str]:
    """Model fields the row states (blank -> unset), the vocabulary from the model family when the
    row states none; Skip when the row's architecture has parts the model does not price."""
    from ..spec import families, stacks
    from ..base import normalize

    att = (row.get("attention") or "").lower()
    hybrid = _hybrid_fields(row) if att == "hybrid-mamba" else {}
    if not hybrid and any(w in att for w in UNMODELLED_ATTENTION):
        raise Skip(f"attention {row['attention']!r} is not modelled yet (hybrid Mamba / sparse attention)")
    d = {"n_layers": row["n_layers"], "d_model": row["d_model"], "n_heads": row["n_heads"],
         "n_kv_heads": row.get("n_kv_heads"), "ffn_hidden": row.get("ffn_hidden"), "vocab": row["vocab"],
         "seq_len": row["seq_len"], "name": row.get("model") or row["case_id"]}
    d.update(hybrid)                        # Mamba-2 / attention / MoE layer pattern and mixer sizes
    early = []          # notes of what the text or the named preset fills before the rest below
    if row.get("head_dim"):                 # Megatron-Core kv_channels (blank: d_model / heads)
        d["head_dim"] = row["head_dim"]
    elif not hybrid and (hd := head_dim_from_text(_notes_text(row))) \
            and "mamba" not in f"{row.get('model', '')} {row.get('notes', '')}".lower():     # not a Mamba head's
        d["head_dim"] = hd[0]               # the text's --kv-channels / head_dim
        early.append(f"head_dim {hd[0]} from the text ({hd[1]!r})")
    preset = families.preset_for(row.get("model"))
    size = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mMbB])\s*", row.get("model") or "")
    if not preset and size and stacks.names_stack(row.get("framework") or ""):
        # a model named by its size alone ("70b", llm-foundry's benchmark tables) on a stack that ships its own
        # models' configs: that family's preset of the size (stacks/*.yaml own_models)
        own = stacks.infer(row["framework"], "")[0].rule("own_models")
        found = families.preset_for(f"{own}-{size.group(1)}{size.group(2).lower()}") if own else None
        if found:
            preset = found
            early.append(f"model {row['model']!r} read as the framework's own {found} (its configs name models by "
                         "size)")
    if preset:
        from ..spec import models
        base = models.load(preset)
    else:
        base = None
    if not hybrid and re.search(r"\bmamba", f"{row.get('model') or ''} {row.get('attention_detail') or ''}", re.I) \
            and not (base is not None and base.hybrid_pattern):
        # a Mamba (hybrid) model priced as the transformer its layer count would make is off by its Mamba layers
        raise Skip("a Mamba / hybrid model without its layer pattern (attention 'hybrid-mamba' with "
                   "hybrid_override_pattern) and no preset of it")
    if att.startswith("mla"):               # multi-head latent attention: its ranks and head widths
        mla = {f: row.get(c) for c, f in MLA_COLUMNS.items() if row.get(c)}
        missing = [c for c, f in MLA_COLUMNS.items() if f not in mla and f != "q_lora_rank"]
        if missing and base is not None and base.kv_lora_rank:
            early.append(f"{', '.join(missing)} from preset {preset}")     # the resolver fills them from it
        elif missing:
            raise Skip(f"MLA row without {', '.join(missing)}")
        d.update(mla)
        if d.get("n_kv_heads") not in (None, d["n_heads"]):
            d["n_kv_heads"] = None          # MLA has one key/value per head
    # multi-token-prediction layers as the row states them; unstated: none (Megatron-Core mtp_num_layers defaults to
    # None, a run turns MTP on with --mtp-num-layers), whatever the named preset's architecture has
    try:
        d["mtp_layers"] = int(row.get("mtp") or 0)
    except (TypeError, ValueError):
        raise Skip(f"mtp {row['mtp']!r} is not a layer count") from None
    if row.get("swa_window"):               # sliding window on all layers but every swa_every-th (Megatron-Core)
        d["swa_window"] = row["swa_window"]
        if row.get("swa_every"):
            d["swa_every"] = row["swa_every"]
    kernel = attention_kernel_stated(f"{att} {row.get('notes') or ''} {row.get('settings') or ''}")
    if kernel:
        d["attention"] = kernel
    if row.get("mlp"):
        try:
            d["mlp"] = normalize.mlp(row["mlp"])
        except InputError as exc:
            raise Skip(str(exc)) from None
    if (row.get("n_experts") or 0) <= 1 and not (base is not None and base.n_experts > 1) \
            and re.search(r"\bmoe\b|mixture[- ]of[- ]experts", row.get("model") or "", re.I):
        # a model its row calls MoE, with no expert columns and no MoE preset: priced dense, its experts' FLOPs and
        # weights would be missing
        raise Skip("an MoE model (its model cell says so) without n_experts / top_k / moe_ffn_hidden and no preset of it")
    if (row.get("n_experts") or 0) > 1:
        d["n_experts"], d["top_k"] = row["n_experts"], row.get("top_k") or 1
        if row.get("moe_ffn_hidden"):       # per routed expert; ffn_hidden stays the dense MLP's
            d["moe_ffn_hidden"] = row["moe_ffn_hidden"]
        shared = row.get("shared_ffn_hidden")
        if isinstance(shared, str):
            shared = int(shared) if shared.strip().isdigit() else None
        if row.get("n_shared_experts") and not shared and base is not None and base.shared_ffn_hidden:
            shared = base.shared_ffn_hidden
            early.append(f"shared_ffn_hidden {shared} from preset {preset}")
        if row.get("n_shared_experts") and not shared:
            raise Skip(f"shared experts (n_shared_experts = {row['n_shared_experts']}) without shared_ffn_hidden")
        if row.get("n_shared_experts"):
            d["n_shared_experts"], d["shared_ffn_hidden"] = row["n_shared_experts"], shared
        if row.get("first_dense_layers"):
            d["first_dense_layers"] = row["first_dense_layers"]
    notes = []
    latent = re.search(r"latent\s*-?moe|moe_latent", f"{row.get('attention_detail') or ''} {row.get('notes') or ''}",
                       re.I) or row.get("moe_latent_size")
    if preset:
        # the architecture the row does not state (norm, position, biases, tying) from the named preset
        notes.append(f"unstated architecture from preset {preset}")
        notes += early
    else:
        if d.get("mlp") == "swiglu":
            # LLaMA lineage (Llama, Mistral, Qwen, Nemotron-4's successors): RoPE, RMSNorm, no linear biases, untied
            d.update(position="rope", norm="rmsnorm", biases=False, tied_embeddings=False)
            notes.append("gated-MLP row: RoPE, RMSNorm, no biases, untied head (LLaMA lineage)")
        notes += early
    tied = normalize.flag(row.get("tied") or "")
    if tied is not None:
        d["tied_embeddings"] = tied
    # QK-norm as the row states it (the qk_layernorm column, or "QK-layernorm" / "QK-norm" in the attention detail);
    # blank: the named preset's, else none
    qk = normalize.flag(row.get("qk_layernorm") or "")
    if qk is None and re.search(r"\bqk[-_ ]?(?:layer)?norm", row.get("attention_detail") or "", re.I):
        qk = True
    if qk is None and _QK_TEXT.search(_notes_text(row)):
        qk = True                           # Megatron's --qk-layernorm / qk_layernorm: true in the notes or settings
    if qk is not None:
        d["qk_norm"] = qk
    note = ""
    if latent:      # LatentMoE (Megatron-Core moe_latent_size): the width from the row, else from the named preset
        size = row.get("moe_latent_size") or (base.moe_latent_size if base is not None else None)
        if not size:
            raise Skip("LatentMoE row without moe_latent_size (no column value, no preset of the model)")
        d["moe_latent_size"] = size
        if not row.get("moe_latent_size"):
            notes.append(f"moe_latent_size {size} from preset {preset}")
    if d["vocab"] is None:
        fam = families.vocab_for(row.get("model"))
        if fam:
            d["vocab"], src = fam
            notes.append(f"vocab {fam[0]} from the model family ({src})")
        elif base is not None:
            d["vocab"] = base.vocab
            notes.append(f"vocab {base.vocab} from preset {preset}")
    note = "; ".join(notes)
    missing = [k for k in ("n_layers", "d_model", "n_heads", "vocab") if d[k] is None]   # seq_len: build_case
    if missing and base is not None:
        # a row naming a preset and leaving its shape blank: the preset's published shape (the resolver fills every
        # blank field from it), said in the note
        blank = [k for k in ("n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_hidden") if d.get(k) is None]
        notes.append(f"{', '.join(blank)} from preset {preset}")
        note = "; ".join(notes)
        missing = []
    if missing:
        raise Skip(f"{', '.join(missing)} not stated" + (" (no model family with a known tokenizer)" if "vocab" in missing else ""))
    return d, note, base


# A statement of Megatron-Core's TP communication overlap (--tp-comm-overlap; Megatron-Bridge CommOverlapConfig
# tp_comm_overlap, its userbuffers config), however a source spells it: "--tp-comm-overlap", "tp_comm_overlap=True",
# "userbuffer TP comm-overlap cfg", "TP communication overlap". What follows it may turn it off: "= false", "off",
# "disabled", or "off for nvfp4" on an NVFP4 row (Megatron-Bridge's llama3/llama31 perf configs set
# cfg.comm_overlap.tp_comm_overlap = False if precision == "nvfp4"). PyTorch's name for the same decomposition is async
# TP (torchtitan experimental.enable_async_tensor_parallel / parallelism.enable_async_tensor_parallel, NeMo AutoModel
# enable_async_tensor_parallel; "async TP", "asynchronous tensor parallelism", micro-pipeline TP); "no", "without" or
# "non-" before it turns it off ("vanilla TP" states nothing).
_TP_OVERLAP = re.compile(r"(?:tp[-_ ]comm(?:unication)?[-_ ]overlap|async(?:hronous)?[-_ ]?(?:tp|tensor[-_ ]parallel(?:ism)?)"
                         r"\b|micro[-_ ]?pipeline[-_ ]tp)(?P<tail>[^|;]{0,80})")
# a switch turned off: "no", "without" or "non" before it; "= false", ": off", ": none", "disabled" after it
_SWITCH_NOT = re.compile(r"(?:\bno|\bwithout|\bnon)[-_ ]*(?:enable_)?$")
_SWITCH_OFF = re.compile(r"\s*(?:[=:]\s*['\"]?(?:false|0|off|none|no|disabled)\b|(?:off|disabled|false)\b)")


def _switched_off(text: str, start: int, end: int) -> bool:
    """Whether the switch phrase at ``text[start:end]`` is negated before or after it."""
    return bool(_SWITCH_NOT.search(text[max(0, start - 12):start]) or _SWITCH_OFF.match(text, end))


def switch_stated(pattern: str, text: str) -> bool:
    """Whether lower-cased row text states the switch ``pattern`` on: a match that neither follows "no", "without" or
    "non" nor is followed by "= false", ": off", ": none", "disabled" and the like.

    >>> [switch_stated(r"ep a2a overlap", t) for t in ("ep a2a overlap + delay_wgrad", "ep a2a overlap: off",
    ...     "no ep a2a overlap", "ep a2a overlap disabled", "ep a2a overlap=false", "without ep a2a overlap")]
    [True, False, False, False, False, False]
    """
    return any(not _switched_off(text, m.start(), m.end()) for m in re.finditer(pattern, text))


def tp_comm_overlap_stated(text: str, dtype: str | None = None) -> bool:
    """Whether lower-cased row text states TP communication overlap on (for this row's precision ``dtype``).

    >>> [tp_comm_overlap_stated(t) for t in ("--tp-comm-overlap", "tp_comm_overlap=false", "tp_comm_overlap off",
    ...                                      "userbuffer tp comm-overlap cfg (off for nvfp4)", "dp overlap")]
    [True, False, False, True, False]
    >>> tp_comm_overlap_stated("userbuffer tp comm-overlap cfg (off for nvfp4)", "nvfp4")
    False
    >>> [tp_comm_overlap_stated(t) for t in ("torch.compile; async tp", "vanilla tp", "no async tp", "without async-tp",
    ...     "enable_async_tensor_parallel = true", "enable_async_tensor_parallel: false", "asynchronous tensor parallelism")]
    [True, False, False, False, True, False, True]
    """
    for m in _TP_OVERLAP.finditer(text):
        tail = m.group("tail")
        if _switched_off(text, m.start(), m.start("tail")):
            continue
        off_for = re.search(r"off for ([a-z0-9_\-/ ]+?)\)", tail)
        if off_for and dtype and dtype.replace("-", "") in off_for.group(1).replace("-", ""):
            continue
        return True
    return False


_WGRAD_OFF = r"(?:no[-_ ]grad(?:ient)?[-_ ]accum(?:ulation)?[-_ ]fusion|gradient_accumulation_fusion\s*=\s*false)"


def wgrad_fusion_off(text: str, fsdp: bool) -> bool:
    """Whether lower-cased row text turns Megatron's gradient-accumulation fusion off (the wgrad GEMM then writes its
    output instead of reading and writing the fp32 main grad: formulas/compute.gemm drops ``wgrad_extra``; the later
    add into main_grad is not priced): stated outright, or in a clause for
    Megatron-FSDP on a row that runs it (Megatron-Bridge's perf family files before TE 2.10 carried
    ``gradient_accumulation_fusion = False`` under Megatron-FSDP, "disabled to avoid functional errors"; the rows
    summarise it as "if FSDP: ..., no grad-accum fusion"; Megatron-LM mcore_fsdp_adapter.py requires TE >= 2.10 for
    the fusion under Megatron-FSDP).

    >>> [wgrad_fusion_off(t, f) for t, f in (("if fsdp: fsdp_double_buffer, no grad-accum fusion", True),
    ...     ("if fsdp: fsdp_double_buffer, no grad-accum fusion", False), ("gradient_accumulation_fusion=false", False),
    ...     ("gradient_accumulation_fusion=true", True))]
    [True, False, True, False]
    """
    for clause in re.split(r"[|;]", text):
        if not re.search(_WGRAD_OFF, clause):
            continue
        if not re.search(r"\bif (?:megatron[-_ ])?fsdp\b", clause) or fsdp:
            return True
    return False


def schedule_from_text(text: str) -> str | None:
    """The pipeline schedule a row's lower-cased settings or notes name (torchtitan pipeline_parallel_schedule
    "Interleaved1F1B", "1F1B", "GPipe", "DualPipeV"; Megatron's "interleaved schedule"; DeepSeek's "DualPipe"), or None.

    Zero-bubble schedules (Qi et al. 2024, ICLR, "Zero Bubble Pipeline Parallelism"): ZB-H1 / ZB-1p and a bare "zero
    bubble" are 'zb1p' (the memory of 1F1B), ZB-H2 / ZB-2p 'zb2p', ZB-V (sail-sg --zero-bubble-v-schedule;
    torch.distributed.pipelining ScheduleZBVZeroBubble, torchtitan's "ZBVZeroBubble") 'zbv', which is not modelled
    (_plan_fields prices it as 1F1B, noted).

    >>> [schedule_from_text(t) for t in ("pp interleaved 1f1b + asynctp", "fsdp + pp 1f1b", "interleaved1f1b", "gpipe",
    ...                                  "dualpipev", "pp 16 (dualpipe)", "torch.compile", "1f1b-i schedule",
    ...                                  "zb-1p schedule", "zbvzerobubble", "zb-h2", "16-way zero-bubble pipeline")]
    ['interleaved', '1f1b', 'interleaved', 'gpipe', 'dualpipev', 'dualpipe', None, 'interleaved', 'zb1p', 'zbv', 'zb2p', 'zb1p']
    >>> schedule_from_text("1f1b baseline of the zero bubble paper"), schedule_from_text("zero bubble pipeline parallelism")
    ('1f1b', 'zb1p')
    """
    for pattern, name in ((r"\bzb[- ]?v\b|\bzbv|zero[- ]?bubble[- ]?v\b|zero[- ]bubble v[- ]schedule", "zbv"),
                          (r"\bzb[- ]?(?:h2|2p)\b", "zb2p"),
                          # (a citation of the paper, "the Zero Bubble paper's 1F1B baseline", names no schedule)
                          (r"zero[- ]?bubble(?!\W{0,3}(?:(?:pp|pipeline parallelism)\W{0,3})?paper)|\bzb[- ]?(?:h1|1p)\b"
                           r"|\bzbpp\b", "zb1p"),
                          (r"interleaved[ -]?1f1b|1f1b[- ]?(?:i\b|interleaved)|interleaved (?:pipeline )?schedule|"
                           r"virtual pipeline", "interleaved"),
                          (r"dual[- ]?pipe[- ]?v", "dualpipev"), (r"dual[- ]?pipe\b", "dualpipe"),
                          (r"\bgpipe\b", "gpipe"), (r"\b1f1b\b", "1f1b")):
        if re.search(pattern, text or ""):
            return name
    return None


def _notes_text(row: dict) -> str:
    """A row's notes and settings, lower-cased: the free text the readers below search."""
    return f"{row.get('notes', '')} {row.get('settings', '')}".lower()


_EP_IN_NODE = re.compile(r"\b(?:ep|expert[- ]parallel(?:ism)?)\b[^.;|]{0,40}?\b(?:within|inside|in)\s+(?:each|a|the|one)\s+"
                         r"(?:single\s+)?node\b|\bintra[- ]node\s+(?:ep\d*|expert[- ]parallel(?:ism)?)\b")


def ep_in_node_stated(text: str) -> bool:
    """A row's lower-cased text keeps its expert-parallel group inside a node, not negated.

    >>> [ep_in_node_stated(t) for t in ("sp attention and ep within each node", "intra-node ep8",
    ...     "expert parallelism inside a node", "ep across nodes", "no intra-node ep", "ep 8")]
    [True, True, True, False, False, False]
    """
    m, _ = stated_in_text(text, _EP_IN_NODE)
    return bool(m)


_ULYSSES = re.compile(r"\bulysses\b")
_RING = re.compile(r"\bring[- _]?(?:attention|attn|flash)|\bzig[- _]?zag|\bring_attn\b")


def ulysses_stated(text: str) -> bool:
    """A row's lower-cased text names DeepSpeed-Ulysses as its sequence parallelism and no ring attention beside it
    (a row comparing the two, or running both, is not read as Ulysses).

    >>> ulysses_stated("sequence_parallel_size=8 (deepspeed-ulysses style all-to-all)"), ulysses_stated("ring attention vs ulysses")
    (True, False)
    """
    return bool(_ULYSSES.search(text or "")) and not _RING.search(text or "")
# Megatron-LM --kv-channels (kv_channels: the width of each attention head's projections), a head_dim as configs write it
_HEAD_DIM_TEXT = re.compile(r"(?<!\w)(?:kv[-_ ]channels|head[-_ ]dim)\s*(?:=|:|of|is)?\s*(\d+)\b", re.I)
_QK_TEXT = re.compile(r"(?<!no )(?<!without )(?<![\w-])-*qk[-_ ]layer[-_ ]?norm\b(?!\W{0,3}(?:false|off|0\b|none))")


def head_dim_from_text(text: str) -> tuple[int, str] | None:
    """(head_dim, the words) a row's notes or settings state for its attention heads: Megatron-LM's ``--kv-channels``
    / ``kv_channels: 128``, or ``head_dim 128``; not an MLA part ("qk_nope_head_dim"); a row whose text names Mamba
    is not read (its head_dim may be the Mamba heads').

    >>> head_dim_from_text("num_attention_heads 64, kv_channels 128 (wider than d_model / heads)")
    (128, 'kv_channels 128')
    >>> head_dim_from_text("--kv-channels=96"), head_dim_from_text("mla_qk_nope_head_dim 128; Mamba: 64 heads x 64 head_dim")
    ((96, 'kv-channels=96'), None)
    """
    return _stated_count(_HEAD_DIM_TEXT, text)


def _stated_count(pattern: re.Pattern, text: str) -> tuple[int, str] | None:
    """(the positive count of ``pattern``'s first group, the words it was read from) at its first match in ``text``."""
    m = pattern.search(text or "")
    return (int(m.group(1)), m.group(0).strip()) if m and int(m.group(1)) > 0 else None


# torchtitan's per-data-parallel-rank batch as its docs and configs write it ("Local batch size 8", local_batch_size = 8;
# torchtitan/config/job_config.py Training.local_batch_size), which its pipeline schedules split into micro-batches
_LOCAL_TEXT = re.compile(r"\blocal[- _]batch(?:[- _]size)?\s*(?:of|=|:|is)?\s*(\d+)\b")


def local_batch_from_text(text: str) -> tuple[int, str] | None:
    """(local batch, the words it was read from) that a row's lower-cased notes or settings state, for a row whose global
    batch and local_batch column are blank: the per-data-parallel-rank batch (global = it x dp x gradient accumulation,
    ``batch_from_local``).

    >>> local_batch_from_text("caption: tp 8, pp 8, local batch size 8. full activation checkpointing")
    (8, 'local batch size 8')
    >>> local_batch_from_text("local_batch_size = 2"), local_batch_from_text("global batch size 64")
    ((2, 'local_batch_size = 2'), None)
    """
    return _stated_count(_LOCAL_TEXT, text)


# a global batch the text states in tokens ("batch size of 4M tokens", "global batch size 1M tokens", "a batch size of
# 4 million tokens"): the words batch size (or global batch) right before the count, so that a sentence listing several
# models' batches ("4M tokens for 7B, 1M tokens for 175B") is not read as one
_BATCH_TOKENS_TEXT = re.compile(r"\b(?:global[- _]batch(?:[- _]size)?|batch[- _]size)\s*(?:of|=|:|is|was)?\s*~?\s*"
                                r"(\d+(?:\.\d+)?)\s*(k|m|million|thousand)\s*tokens\b")
# the words for a step's global batch, not a micro-batch, local or per-GPU batch ("micro-batch not stated" says nothing
# of how many sequences ran per step); read by the two "batch withheld" rules (here and batch_from_local)
_GLOBAL_BATCH_WORDS = r"(?<!micro)(?<!micro[-_ ])(?<!local[-_ ])(?<!per[-_ ]gpu[-_ ])\b(?:global[-_ ]?)?batch(?:[-_ ]size)?\b"
_BATCH_UNSTATED = re.compile(_GLOBAL_BATCH_WORDS + r"[^.;|]{0,60}?\bnot (?:stated|given|reported|known)\b")


def batch_tokens_from_text(text: str) -> tuple[float, float, str] | None:
    """A global batch in tokens that a row's lower-cased notes or settings state (BATCH_TOKENS: its decimal and
    binary readings and the words), for a row whose global batch and local and micro-batch columns are blank; none
    where the text says the batch of the measurement is not stated, or where it states two different ones.

    >>> batch_tokens_from_text("table 2: 65.2b, 80 layers, batch size 4m tokens (column left blank)")[1] == 4 * 2**20
    True
    >>> batch_tokens_from_text("trained with a batch size of 4 million tokens")[2]
    'batch size of 4 million tokens'
    >>> batch_tokens_from_text("global batch for the table 5 measurements not stated (training batch size 4m tokens)")
    >>> batch_tokens_from_text("batch size 4m tokens for 7b and batch size 1m tokens for 175b")
    >>> batch_tokens_from_text("batch size of 4m tokens. micro-batch, recomputation not stated")[2]
    'batch size of 4m tokens'
    """
    if _BATCH_UNSTATED.search(text or ""):
        return None
    found = {(float(m.group(1)), m.group(2)): m.group(0) for m in _BATCH_TOKENS_TEXT.finditer(text or "")}
    if len({v for v, _ in found}) != 1:
        return None
    (value, unit), words = next(iter(found.items()))
    k = 1 if unit in ("k", "thousand") else 2
    return value * 1000 ** k, value * 1024 ** k, words


# (not a "local batch": torchtitan's per-data-parallel-rank batch, which its pipeline schedules split into micro-batches)
_MB_TEXT = re.compile(r"\b(?:micro[- _]?batch(?:[- _]size)?|mbs|per[- _](?:device|gpu)[- _](?:train[- _])?batch"
                      r"(?:[- _]size)?|batch[- _]size[- _]per[- _](?:gpu|device))"
                      r"\s*(?:of|=|:|is)?\s*(\d+)\b")
_GA_TEXT = re.compile(r"\b(?:gradient[- _]accumulation|grad(?:ient)?[- _]accum(?:ulation)?|accumulation)"
                      r"(?:[- _]steps?)?\s*(?:of|=|:|is)?\s*(\d+)\b|\bga\s*=\s*(\d+)\b|"
                      r"\b(\d+)\s*(?:gradient[- _]accumulation|grad(?:ient)?[- _]accum(?:ulation)?)(?:[- _]steps?)?\b|"
                      r"\b(\d+)\s+micro[- _]?batches\b")
_GA_NONE = re.compile(r"\b(?:no|without)\s+(?:gradient|grad)[- _]accum\w*")


def micro_batch_from_text(text: str, global_batch, dp, grad_accum=None) -> tuple[int, str] | None:
    """(micro-batch, the words it was read from) of a row whose micro_batch column is blank: a micro-batch the text
    states ("micro-batch size 4", "MBS=4", "per-device batch size 4"), else one the gradient
    accumulation gives, global batch / (dp x steps): a ``grad_accum`` column, or steps the text states ("gradient
    accumulation steps 8", "GA=8", "8 micro-batches", "no gradient accumulation" = 1). None when neither, or when the
    steps do not divide the global batch over dp.

    >>> micro_batch_from_text("bf16; micro-batch size 4", 1024, 64), micro_batch_from_text("grad accum 4", 1024, 64)
    ((4, 'micro-batch size 4'), (4, 'grad accum 4'))
    >>> micro_batch_from_text("no gradient accumulation", 1024, 64), micro_batch_from_text("", 1024, 64, 8)
    ((16, 'no gradient accumulation'), (2, 'grad_accum 8'))
    """
    m = _MB_TEXT.search(text or "")
    if m and int(m.group(1)) > 0:
        return int(m.group(1)), m.group(0).strip()
    if not global_batch or not dp:
        return None
    if grad_accum:
        steps, words = int(grad_accum), f"grad_accum {int(grad_accum)}"
    elif (g := _GA_TEXT.search(text or "")):
        steps, words = int(next(x for x in g.groups() if x)), g.group(0).strip()
    elif (g := _GA_NONE.search(text or "")):
        steps, words = 1, g.group(0).strip()
    else:
        return None
    if steps <= 0 or global_batch % (dp * steps):
        return None
    return global_batch // (dp * steps), words


def fp8_all_gather_stated(text: str) -> bool:
    """A row's lower-cased settings or notes say FSDP gathers the parameters in float8 (torchtitan
    --float8.enable_fsdp_float8_all_gather / quantize.linear.float8.enable_fsdp_float8_all_gather, "float8 all-gather")."""
    return bool(re.search(r"enable_fsdp_float8_all_gather(?!\s*=\s*false)|(?<!no )(?:fp8|float8) all[- ]gather", text or ""))


_FUSED_LIST = r"(?<!un)(?<!no )fused\W{0,3}(?:[\w-]+\W{1,3}){0,6}?"     # "fused layernorm/swiglu/cross-entropy/rotary"


def fused_elementwise_stated(text: str) -> tuple[bool, bool]:
    """(norm and gated activation fused, rotary embedding fused) as a row's lower-cased text states the kernels it ran:
    "fused RMSNorm ... fused SwiGLU", a list after one "fused" ("fused layernorm/swiglu/cross-entropy/rotary":
    jzhang38/TinyLlama README, 'Blazingly Fast'), or Liger Kernel (linkedin/Liger-Kernel: RMSNorm, SwiGLU/GeGLU,
    RoPE and cross-entropy as Triton kernels). The eager stacks' extra elementwise passes are then not run.

    >>> fused_elementwise_stated("features: flash-attention 2, fused layernorm/swiglu/cross-entropy/rotary")
    (True, True)
    >>> fused_elementwise_stated("liger kernel"), fused_elementwise_stated("fused swiglu only")
    ((True, True), (False, False))
    >>> fused_elementwise_stated("unfused rmsnorm and unfused swiglu"), fused_elementwise_stated("fused adam")
    ((False, False), (False, False))
    """
    t = text or ""
    if re.search(r"\bliger[- _]?kernels?\b", t):
        return True, True
    norm = re.search(_FUSED_LIST + r"(?:rms[_ ]?norm|layer[_ ]?norm)", t)
    act = re.search(_FUSED_LIST + r"(?:swiglu|geglu|silu|gelu|glu)\b", t)
    rope = re.search(_FUSED_LIST + r"(?:rotary|rope)\b", t)
    return bool(norm and act), bool(rope)


# the start of an item of a recipe summary's list ("DeepEP; EP overlap", "(EP overlap)"): the text's start or a separator
_LIST_ITEM = r"(?:^|[|;,(]\s*)"


def _plan_fields(row: dict, base=None) -> dict:
    """The plan fields a row states or its text implies; ``base``: the model preset the row names (_model_fields), whose
    experts make it an MoE row where it has no expert columns."""
    from ..base import normalize

    tp, pp, dp, cp, n = row["tp"], row["pp"], row["dp"], row.get("cp") or 1, row.get("n_gpus")
    blank = [k for k, v in (("tp", tp), ("pp", pp), ("dp", dp)) if v is None]
    if blank and n is None:
        raise Skip(f"{'/'.join(blank)} not stated and no n_gpus (incomplete plan)" + (
            f"; its {row['n_nodes']} nodes are not multiplied out: {row.get('gpu_id') or 'the GPU'}'s profile counts "
            f"more than {NODE_GPUS_MAX} GPUs per node (an NVLink domain, not a server), so the row needs n_gpus or "
            "gpus_per_node" if row.get("n_nodes") else ""))
    d = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": row.get("ep"), "n_gpus": n,
         "micro_batch": row.get("micro_batch"), "global_batch": row["global_batch"],
         "interleave": row.get("interleave")}
    if len(blank) == 1 and blank[0] != "dp":          # dp blank: the resolver's n_gpus / (tp x pp x cp)
        known = math.prod(v for v in (tp, pp, dp) if v is not None) * cp
        if n % known:
            raise Skip(f"n_gpus ({n}) is not divisible by the stated parallel degrees ({known}): "
                       f"{blank[0]} cannot be inferred")
        d[blank[0]] = n // known
    elif len(blank) > 1:
        d[LAYOUT_UNSTATED] = tuple(blank)             # build_case completes the layout (complete_layout)
    elif not blank and n and row.get("ep") and tp * pp * dp * cp != n and tp * pp * dp * cp * row["ep"] == n:
        # a dp that counts the expert-parallel ranks out (DeepSeek-V3's "PP16, EP64, DP2" style): Megatron-Core's dp
        # holds EP (expert_model_parallel_size divides dp x cp; parallel_state.py), so its dp is the stated dp x ep
        d["dp"] = dp * row["ep"]
        d[DP_WITH_EP] = (dp, row["ep"])
    text = _notes_text(row)
    left = n // (tp * pp * dp * cp) if not blank and n and n % (tp * pp * dp * cp) == 0 else 1
    if left > 1 and ulysses_stated(text):
        # DeepSpeed-Ulysses sequence parallelism (DeepSpeed --ds-sequence-parallel-size, XTuner / LLaMA-Factory
        # sequence_parallel_size) over the factor of the GPUs the stated tp x pp x dp x cp leaves over: the
        # context-parallel group as an all-to-all of heads (plan cp_kind ulysses). Read only where the layout needs it
        # (a stated cp with Ulysses merely mentioned stays the stack's kind)
        if cp > 1:
            raise Skip(f"ring attention (cp {cp}) and DeepSpeed-Ulysses over the {left} ranks the layout leaves "
                       "combined (USP) are not modelled")
        d["cp"], d["cp_kind"] = left, "ulysses"
        d[ULYSSES_NOTE] = (f"DeepSpeed-Ulysses named in the text: the {left} ranks tp x pp x dp leaves of {n} as "
                           "context parallelism by an all-to-all of heads (cp-kind ulysses)")
    elif left > 1 and _sharding_cell(row) in ("fsdp", "zero3"):
        # a fully sharded row whose dp counts the replicas only ("FSDP=64, DP=1" of MaxText's and torchtitan's
        # dp_shard x dp_replicate): the ranks tp x pp x dp x cp leaves shard the state inside each replica (HSDP,
        # dp x that factor data-parallel ranks, the stated dp the replicas)
        d["dp"] = dp * left
        if dp > 1:
            d["dp_replicas"] = dp
        d[FSDP_LEFT_NOTE] = (f"dp {dp} counts the replicas of a sharded state: the {left} ranks tp x pp x dp x cp "
                             f"leaves of {n} shard it inside each (dp {dp * left}"
                             + (f", {dp} replicas)" if dp > 1 else ")"))
    # a recompute column stating recomputation of some of the blocks ("every other layer", "selective_ac_option 2"):
    # full recomputation of that share (BLOCK_RC below), not a kind the column's reader knows
    # (only where the column's reader cannot read it: "selective layer" stays Megatron's selective outside torchtitan)
    try:
        d["recompute"] = normalize.recompute(row.get("recompute", ""))      # blank: None, the stack's default
    except InputError:
        if not block_recompute_from_text(row.get("recompute", "")):
            raise Skip(f"recompute: cannot read {row.get('recompute')!r}; accepted: none, selective, op, full, or a "
                       "share of the blocks ('every other layer')") from None
        d["recompute"] = None
    try:
        d["sequence_parallel"] = normalize.flag(row.get("seq_parallel", ""))
        d["sharding"] = normalize.sharding(row.get("optimizer_sharding", ""))
        d["dtype"] = row_precision(row)[0]
    except InputError as exc:
        raise Skip(str(exc)) from None
    block = block_recompute_from_text(f"{row.get('recompute', '')}; {text}")     # the column a clause of its own
    if block:
        d[BLOCK_RC] = block
    hsdp = hsdp_from_text(f"{row.get('optimizer_sharding', '')}; {text}")
    if hsdp:
        d[HSDP] = hsdp
    fsdp, said = fsdp_column(row.get("fsdp"), d)
    shard = None if row.get("fsdp") else shard_size_from_text(f"{row.get('optimizer_sharding', '')}; {text}")
    if shard and d.get("sharding") == "fsdp":
        # a shard group the sharding column or the notes state ("ZeRO-3 sharded over 128 GPUs", BloombergGPT's): as an
        # fsdp column of that shard size, HSDP over dp / size replicas
        fsdp, said = fsdp_column(shard[0], d)
        said = said.replace(f"fsdp column {shard[0]}", f"the text's {shard[1]!r}")
        if HSDP in fsdp:
            fsdp[HSDP] = (shard[1], fsdp[HSDP][1])
    if fsdp:
        d.update(fsdp)
        d[FSDP_NOTE] = said
    # a blank column that the row's notes or settings answer: "ZeRO stage 1", "activation checkpointing" (FROM_TEXT)
    read = {key: found for key, found in (("sharding", sharding_from_text(text)),
                                          ("recompute", recompute_from_text(text)),
                                          ("optimizer", None if row.get("optimizer") else optimizer_from_text(text)),
                                          ("micro_batch", micro_batch_from_text(text, d["global_batch"], d.get("dp"),
                                                                                row.get("grad_accum"))))
            if found and d.get(key) is None}
    for key, (value, _) in read.items():
        d[key] = value
    if read:
        d[FROM_TEXT] = ("; ".join(f"{k} {v} from the text ({w!r})" for k, (v, w) in read.items()) + " (its column blank)",
                        tuple(read))
    # a blank recompute column is the stack's default (Megatron's none; GPT-NeoX's and metaseq's full; torchtitan's
    # op), the README's rule for every blank: "the documented default of that framework and era"
    if d["recompute"] == "selective" and row.get("recompute_modules"):
        try:                            # what Megatron's selective recomputation recomputes (--recompute-modules)
            d["recompute_modules"] = normalize.recompute_modules(row["recompute_modules"])
        except InputError as exc:
            raise Skip(str(exc)) from None
    elif d["recompute"] == "selective" and (modules := recompute_modules_stated(text)):
        d["recompute_modules"] = modules    # the command line or recipe the text quotes
    if tp_comm_overlap_stated(text, d["dtype"]):
        d["tp_comm_overlap"] = True
    # Megatron-Core --overlap-moe-expert-parallel-comm (Megatron-Bridge comm_overlap moe a2a): each all-to-all hides
    # behind the block of another micro-batch's compute the merged schedule pairs it with (formulas/step.py ep_merged)
    # the flex dispatcher's backend, as the recipes' summaries spell it: "MoE flex dispatcher=hybridep",
    # "moe_flex_dispatcher_backend='deepep'", "HybridEP flex (32 SMs)" (Megatron-Core --moe-flex-dispatcher-backend)
    # ("token dispatcher DeepEP", "Dispatcher DeepEP": the library named as what dispatched, not negated)
    moe = (row.get("n_experts") or 1) > 1 or (base is not None and base.n_experts > 1)
    m = re.search(r"flex dispatcher\s*=\s*(deepep|hybridep)|moe[-_ ]flex[-_ ]dispatcher[-_ ]backend\s*=\s*['\"]?(deepep|hybridep)"
                  r"|\b(deepep|hybridep)\s+flex\b|dispatcher\W{0,3}(?:=\s*)?(deepep|hybridep)\b"
                  rf"|{_LIST_ITEM}(deepep|hybridep)\s*(?=[|;,)]|$)",   # a list item alone ("DeepEP; EP overlap")
                  f"{text} {(row.get('framework') or '').lower()}")   # "Megatron-Core, MoE dispatcher DeepEP"
    if m and moe and not _switched_off(text, m.start(), m.end()):
        d["ep_dispatcher"] = next(g for g in m.groups() if g)
    m = re.search(r"\betp\s*=\s*(\d+)|expert[-_ ]tensor[-_ ]parallel(?:[-_ ]size)?\W{1,3}(\d+)\b", text)
    if m and moe:
        d["etp"] = int(m.group(1) or m.group(2))   # Megatron-Core --expert-tensor-parallel-size, stated by the recipe
    elif moe and ep_in_node_stated(text) and 1 < (ep := row.get("ep") or 1) <= (row.get("gpus_per_node") or 8) \
            and (not row.get("tp") or ep * row["tp"] > (row.get("gpus_per_node") or 8)):
        # the text keeps the expert group inside a node ("EP within each node"): its ep ranks unsplit (etp 1), where
        # Megatron-Core's default etp = tp would spread ep x tp ranks over several nodes
        d["etp"] = 1
    if switch_stated(rf"ep a2a overlap|overlap[-_ ]moe[-_ ]expert[-_ ]parallel[-_ ]comm|{_LIST_ITEM}ep overlap\b"
                     r"|\ba2a[-_]overlap\s*=\s*(?:1|true)\b", text):
        d["overlap_ep"] = 1.0
        # Megatron-Core --delay-wgrad-compute ("+ delay_wgrad" in the recipes' summaries), which needs the overlap
        if switch_stated(r"delay[-_ ]wgrad(?:[-_ ]compute)?\b", text):
            d["delay_wgrad"] = True
    # layers a low-precision recipe keeps in 16 bits: a named Megatron-Bridge precision recipe that sets them on a row of
    # its precision (BF16_LAYER_RECIPES), or counts stated beside --first-last-layers-bf16 (Megatron-Core ignores the
    # counts without it)
    dtype = d.get("dtype") or ""
    low = precision.low_precision(dtype)
    if low:
        n16 = sum(start + end for name, (of, start, end) in BF16_LAYER_RECIPES.items() if name in text and of == dtype)
        if re.search(r"first[-_]last[-_]layers[-_]bf16(?!\s*=\s*false)", text):
            n16 = sum(int(m) for m in re.findall(r"num[-_]layers[-_]at[-_](?:start|end)[-_]in[-_]bf16\s*[= ]\s*(\d+)",
                                                  text)) or n16
        if n16:
            d["bf16_layers"] = n16
    # a row that says a parallel axis ran without communication overlap ("no TP/DP/PP comm overlap": SimuMax's B200
    # runs, launched without Megatron-LM's opt-in --overlap-grad-reduce / --overlap-param-gather / --tp-comm-overlap,
    # megatron/training/arguments.py): those overlaps off, whatever the stack's default
    for axes in re.findall(r"\bno ((?:tp|dp|pp|cp|ep)(?:\s*/\s*(?:tp|dp|pp|cp|ep))*) comm(?:unication)? overlap", text):
        for axis in re.split(r"\s*/\s*", axes):
            for field in OVERLAP_OF_AXIS[axis]:
                d[field] = 0.0
    # the attention core in FP8 (Megatron-Core --fp8-dot-product-attention; the recipes' summaries: "FP8 dot-product
    # attention", "MXFP8 dot-product attention", fp8_dot_product_attention=True, TE fp8_dpa)
    if switch_stated(r"(?:mx)?fp8 dot[-_ ]product attention|fp8_dot_product_attention(?=\s*=\s*true)|\bfp8_dpa\b", text) and low:
        d["fp8_attention"] = True
    # the parameter all-gather in FP8 (Megatron-Core --fp8-param-gather): Megatron-Bridge's FP8 precision presets set it
    # (src/megatron/bridge/training/mixed_precision.py v0.3.0-v0.6.0: bf16_with_fp8_delayed_scaling_mixed,
    # bf16_with_fp8_current_scaling_mixed, bf16_with_mxfp8_mixed fp8_param_gather = True; the blockwise presets False);
    # a row that states it either way says so
    stated = re.search(r"fp8[_ ]param[_ ]gather\s*(?:=\s*(true|false))?", text)
    if low and (stated or BRIDGE_FRAMEWORK.search(f"{row.get('framework', '')} {row.get('settings', '')}".lower())):
        d["fp8_param_gather"] = not (stated and stated.group(1) == "false")
    # Adam's moments in 16 bits (Megatron-Core --use-precision-aware-optimizer --exp-avg-dtype/--exp-avg-sq-dtype;
    # the recipes' summaries: "BF16 Adam moments", "exp_avg_dtype=torch.bfloat16")
    m = re.search(r"\b(bf16|fp16)\s+adam\s+moments|exp_avg(?:_sq)?_dtype\s*=\s*(?:torch\.)?(bfloat16|bf16|float16|fp16)", text)
    if m:
        d["moment_dtype"] = "bf16" if "b" in (m.group(1) or m.group(2)) else "fp16"
    # the optimizer: a column, else Muon named in the text ("Muon optimizer was used for pre-training Kimi-K2", the
    # Megatron-Bridge tables' footnote; optimizer='dist_muon'; --optimizer muon)
    opt = str(row.get("optimizer") or "").strip().lower()
    if opt:
        # Adam's family keeps two moments (AdamW, FusedAdam; LAMB the same state and elementwise update)
        d["optimizer"] = "muon" if "muon" in opt else "adam" if re.search(r"adam|lamb", opt) else opt
    # a row that says it ran without torch.compile ("no torch.compile", "compile: false") did, whatever else its notes
    # say of torch.compile elsewhere
    no_compile = re.search(r"\b(?:no|without)\s+(?:torch\.)?compile\b|(?:torch\.)?compile\s*(?:[=:]\s*)?(?:off|false|disabled)\b",
                           text)
    if not no_compile and re.search(r"(?<!no )(?<!without )(?:torch\.compile|(?<!torch\.)\bcompiled?\b(?! loss))", text):
        d["eager_elementwise"] = False      # torch.compile fuses the elementwise ops the eager stacks run one by one
        d["eager_rope"] = False
    fused_norm_act, fused_rope = fused_elementwise_stated(text)
    if fused_norm_act:
        d["eager_elementwise"] = False      # the norm and the gated activation as the fused kernels the text names
    if fused_rope:
        d["eager_rope"] = False
    if wgrad_fusion_off(text, d["sharding"] == "fsdp"):
        d["wgrad_fusion"] = False
    # a fused grouped MLP runs the routed experts in one kernel per pass, not one GEMM and cast per local expert (the
    # Megatron-Bridge 26.06 summaries: "CuteDSL fused grouped MLP"; Megatron-Bridge#2885: GroupGEMM + (d)SwiGLU +
    # quant + swizzle fused); a text that says the expert GEMMs run through torch._grouped_mm reads the same
    if re.search(r"(?<!no )(?<!un)fused grouped (?:mlp|gemm)|torch\._grouped_mm", text):
        d["per_expert_kernels"] = False
    # the fused grouped MLP also takes the experts' activation and casts into the GEMMs (Transformer Engine's MXFP8
    # CuTe kernels, TransformerEngine#2769; Megatron-Bridge 26.06 summaries "CuteDSL fused grouped MLP"). Megatron-Core
    # builds it from Transformer Engine's op fuser: under use_transformer_engine_op_fuser an MoE layer's TEGroupedMLP
    # runs te.ops GroupedLinear + ScaledSwiGLU / ScaledClampedQGeGLU + GroupedLinear (megatron/core/transformer/moe/
    # experts.py _with_fused_impl), which Transformer Engine fuses into its block-scaled grouped MLP
    # (transformer_engine/pytorch/ops/fused/grouped_mlp.py, MXFP8 and NVFP4 on compute capability 10)
    # (read from the settings, what the row ran: a note may name a switch a later recipe version adds)
    ran = str(row.get("settings") or "").lower()
    fused_mlp = re.search(r"(?<!no )(?<!un)fused grouped mlp", ran) or re.search(
        r"(?<!no )\b(?:te|transformer engine) op[ -]fuser|use_transformer_engine_op_fuser(?!\s*[=:]\s*false)", ran)
    if (fused_mlp and d.get("dtype") in ("mxfp8", "nvfp4") and int(row.get("n_experts") or 0) > 1
            and str(row.get("mlp") or "swiglu").lower() in ("swiglu", "squared_relu")):
        d["fused_moe_mlp"] = True
        d["per_expert_kernels"] = False
    graphs = cuda_graphs(row)
    if graphs != "none":
        d["cuda_graphs"] = graphs
        scope = graph_scope(row) if graphs == "layers" else ""
        if scope:
            d["graph_modules"] = scope
    sched = schedule_from_text(text)
    if sched == "dualpipe" and (row.get("pp") or 1) > 1:
        # DualPipe is HAI-LLM's (DeepSeek-V3 report sec 3.2.1), which the hai-llm stack prices on the balanced split
        # (spec/layout.py dualpipe_balanced); a row on a stack without it (Megatron-Core runs the 1F1B family) is
        # priced as that family on the recipe layout, noted (the note shows only when the plan is not DualPipe)
        d[SCHEDULE_NOTE] = ("the text's DualPipe priced as 1F1B on the recipe's stage layout (the row's stack runs no "
                            "DualPipe; the hai-llm stack and --schedule dualpipe price it on the balanced split)")
    elif sched in ("zb1p", "zb2p", "zbv") and (row.get("pp") or 1) > 1:
        # a zero-bubble schedule splits each backward into its input and weight gradients and fills the bubble with the
        # latter (Qi et al. 2024; formulas/pipeline.py prices ZB1P and ZB2P at one stage per rank). ZB-V and an
        # interleaved zero-bubble run are not modelled: priced as the 1F1B schedule they reorder, whose bubble bounds
        # theirs from above (ZB-H1 (p-1)(F+B-W) <= 1F1B's (p-1)(F+B+W), the paper's sec 3), said in the note; a stack
        # that runs no zero-bubble schedule is met in build_case
        if sched == "zbv" or (row.get("interleave") or 1) > 1:
            d["schedule"] = "1f1b" if not row.get("interleave") or row["interleave"] == 1 else "interleaved"
            d[SCHEDULE_NOTE] = ("the text's zero-bubble schedule (ZB-V, or interleaved) is not modelled: priced as "
                                f"{'1F1B' if d['schedule'] == '1f1b' else 'interleaved 1F1B'}, whose bubble is an "
                                "upper bound of its own")
        else:
            d["schedule"] = sched
    elif sched and (row.get("pp") or 1) > 1 and not row.get("interleave"):
        d["schedule"] = sched
    # FSDP's parameter all-gather in FP8 (torchtitan float8.enable_fsdp_float8_all_gather, torchao
    # WeightWithDynamicFloat8CastTensor): the same field as Megatron-Core's --fp8-param-gather
    if fp8_all_gather_stated(text) and precision.low_precision(d.get("dtype") or ""):
        d["fp8_param_gather"] = True
    if d.get("schedule") != "dualpipev":          # Megatron-Core's layouts are the 1F1B family's
        d.update(_pipeline_layout(row))
    d.update(_offload(row, d))
    d.update(bridge_launcher(row))
    d.update(bridge_grad_reduce(row))
    return d


# Megatron-Bridge v0.1.0rc3 (the NeMo 25.09 container) launched its performance runs with
# scripts/performance/run_script.py, which sets switches per GPU for DeepSeek-V3 that its perf_matrix yaml does not
# show (run_script.py main(), lines 55-90 at tag v0.1.0rc3): on H100 the flex dispatcher with DeepEP
# (enable_deepep), the EP all-to-all overlapped with delay_wgrad_compute (A2A_1F1B), recompute_modules
# ["mla_up_proj", "mlp"] and overlap_grad_reduce off; on GB200 recompute_modules ["mla_up_proj", "mlp", "moe_act"];
# on B200 and GB200 overlap_grad_reduce on (their token drop with force-balanced routing moves no FLOPs).
BRIDGE_RC3_DEEPSEEK = {
    "h100": {"ep_dispatcher": "deepep", "overlap_ep": 1.0, "delay_wgrad": True, "recompute_modules": "mla_up_proj,mlp",
             "overlap_grad_reduce": 0.0},
    "gb200": {"recompute_modules": "moe_act,mla_up_proj,mlp", "overlap_grad_reduce": 1.0},
    "b200": {"overlap_grad_reduce": 1.0},
}


def bridge_launcher(row: dict) -> dict:
    """What Megatron-Bridge v0.1.0rc3's performance launcher set beside the recipe a row names (BRIDGE_RC3_DEEPSEEK):
    for a row whose settings cite that release's DeepSeek perf yaml, the switches run_script.py set for its GPU. The
    recompute modules only where the row's source states none (its recompute_detail names no module)."""
    if not re.search(r"recipe v0\.1\.0rc3:scripts/performance/configs/deepseek/", row.get("settings") or ""):
        return {}
    gpu = str(row.get("gpu_id") or "")
    out = dict(next((v for k, v in BRIDGE_RC3_DEEPSEEK.items() if gpu.startswith(k)), {}))
    if ":" in (row.get("recompute_detail") or "") or (row.get("recompute") or "").strip() != "selective":
        out.pop("recompute_modules", None)
    return out


# Megatron-Bridge's performance launcher reduces the gradients in bf16: every release's benchmark configs set
# grad_reduce_in_fp32 False on both the mixed-precision and the DDP config (v0.1.0rc3 scripts/performance/configs/*/
# *_llm_pretrain.yaml 'grad_reduce_in_fp32: false'; v0.2.0-v0.5.x scripts/performance/configs/<family>/
# <family>_llm_pretrain.py set_<family>_common_configs: cfg.mixed_precision.grad_reduce_in_fp32 = False,
# cfg.ddp.grad_reduce_in_fp32 = False; v0.6.0 src/megatron/bridge/perf_recipes/_common.py _benchmark_common and
# _perf_precision), so Megatron-Core's DDP keeps its gradient buffer in the parameters' bf16
# (distributed_data_parallel.py: grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype), unlike
# Megatron-LM's pretrain_gpt.py, whose --bf16 forces fp32 (the megatron-core stack's grad_dtype_bf16 rule). The recipes
# that set it True again (perf_recipes/glm_moe_dsa/*/glm5.py, wan/) keep fp32.
BRIDGE_PERF_RECIPE = re.compile(r"recipe [\w.()]+:\s*(?:scripts/performance/configs/|src/megatron/bridge/perf_recipes/)"
                                r"(?P<family>[\w]+)/")
BRIDGE_FP32_GRAD_FAMILIES = frozenset({"glm_moe_dsa", "wan"})
# NVIDIA's NeMo performance summaries from the 25.02 container on (NeMo 2.2+; Megatron-Bridge from 25.09) were measured
# by the performance scripts, which build each model's recipe with performance_mode=True, whose
# performance_optimizations set recipe.trainer.plugins.grad_reduce_in_fp32 = False (NVIDIA/NeMo v2.2.0
# scripts/llm/performance/pretrain_llama3_8b.py pretrain_recipe(performance_mode=True) and
# nemo/collections/llm/recipes/llama3_8b.py; v2.3.0 scripts/performance/llm/*; v2.4.0 scripts/performance/helpers.py
# set_precision_configs sets it False for every dtype). Earlier tables (NeMo 1.x, 24.07) are not known to: fp32.
NEMO_PERF_SUMMARY = re.compile(r"performance[-_ ]summary")
NEMO_RELEASE = re.compile(r"\bnemo\b\W{0,12}(?:container\W{0,3})?(\d{2})\.(\d{2})\b")


def bridge_grad_reduce(row: dict) -> dict:
    """The gradient dtype of a row NVIDIA's performance scripts ran: bf16 for a Megatron-Bridge performance-launcher
    recipe (BRIDGE_PERF_RECIPE) unless its settings state grad_reduce_in_fp32 or its recipe family sets it, and for a
    NeMo performance summary of the 25.02 container or later (NEMO_PERF_SUMMARY)."""
    text = row.get("settings") or ""
    if re.search(r"grad_reduce_in_fp32\W{0,3}(?:=|:)?\s*true", text, re.I):
        return {}
    m = BRIDGE_PERF_RECIPE.search(text)
    if m:
        return {} if m.group("family") in BRIDGE_FP32_GRAD_FAMILIES else {"grad_dtype": "bf16"}
    about = f"{row.get('source') or ''} {row.get('framework') or ''}".lower()
    rel = NEMO_RELEASE.search(about)
    if NEMO_PERF_SUMMARY.search(about) and rel and (int(rel.group(1)), int(rel.group(2))) >= (25, 2):
        return {"grad_dtype": "bf16"}
    return {}


def _offload(row: dict, plan: dict) -> dict:
    """The row's CPU activation offload: its ``activation_offload`` column as a whole number of layers (Megatron-Core
    --cpu-offloading-num-layers, the Megatron-Bridge perf scripts' --activation_offload_layers). Megatron-Core refuses
    it with pp > 1, recomputation or all layers (transformer_config.py): a stated count the row's own layout cannot
    run was not what ran (a preset's value beside the table's layout, as such rows' notes say), and is left out;
    so is a count of modules (fine-grained offloading, not modelled)."""
    text = (row.get("activation_offload") or "").strip()
    if not re.fullmatch(r"\d+", text) or int(text) == 0:
        return {}
    n = int(text)
    if (plan.get("pp") or 1) != 1 or plan.get("recompute", "none") != "none" or n >= (row.get("n_layers") or 0):
        return {}
    return {"offload_layers": n}


def _graph_modules(row: dict) -> set:
    """The module kinds a row's layers have, in Megatron-Core's cuda_graph_modules words: attn, mlp (a dense MLP),
    moe, mamba."""
    pat = re.search(r"pattern\s+([M*\-E|]{2,})", row.get("attention_detail") or "")
    pattern = pat.group(1) if pat else ""
    hybrid = (row.get("attention") or "").startswith("hybrid")
    moe = (row.get("n_experts") or 1) > 1
    kinds = {"attn"}
    if hybrid:
        kinds.add("mamba")
    if moe:
        kinds.add("moe")
    if not moe or (row.get("first_dense_layers") or 0) > 0 or "-" in pattern:
        kinds.add("mlp")
    return kinds


# a CUDA-graph module list as the summaries and the command line write it ("scope=['attn', 'moe_router']", "CUDA graphs
# [attn, mamba]", "--cuda-graph-modules attn moe"), in _graph_text's spelling
_GRAPH_SCOPE = re.compile(r"cuda[-_ ]graphs?[^|;]*?(?:scope\s*=\s*|\[)\[?([^\]|;]*)\]?")


def _graph_text(row: dict) -> str:
    """A row's settings and notes, lower-cased, with the command-line spellings of Megatron-Core's CUDA-graph flags
    written as the recipe summaries write them ("cuda graph impl=", "cuda graph scope=", "enable_cuda_graph")."""
    text = f"{row.get('settings') or ''} | {row.get('notes') or ''}".lower()
    text = re.sub(r"--(cuda|enable)-cuda-graph|--enable-cuda-graph", "enable_cuda_graph", text)
    text = re.sub(r"--cuda-graph-(impl|scope|modules)[\s=]+", lambda m: f"cuda_graph_{m.group(1)}=", text)
    return text.replace("cuda_graph_impl=", "cuda graph impl=").replace("cuda_graph_modules=", "cuda graph scope=")\
        .replace("cuda_graph_scope=", "cuda graph scope=")


def graph_scope(row: dict) -> str:
    """The modules a row's per-layer CUDA graphs capture (Megatron-Core cuda_graph_modules, canonical, in
    normalize.GRAPH_MODULES order) when they leave part of its layers eager; "" when they cover every module kind the
    layer has (the whole layer), name none, or the row has no per-layer graphs (``cuda_graphs``)."""
    from ..base.normalize import GRAPH_MODULES
    m = _GRAPH_SCOPE.search(_graph_text(row))
    if not m:
        return ""
    scope = set(re.findall(r"[a-z_]+", m.group(1)))
    if _graph_modules(row) <= scope:
        return ""
    return ",".join(x for x in GRAPH_MODULES if x in scope)


def cuda_graphs(row: dict) -> str:
    """The row's CUDA graphs (config.CUDA_GRAPHS) from its settings, in the words of Megatron-Core's
    transformer_config.py: ``cuda_graph_impl`` none / local / transformer_engine / full_iteration and the
    ``cuda_graph_modules`` (formerly ``cuda_graph_scope``) list, as the recipe summaries spell them
    ("CUDA graph impl=transformer_engine scope=['attn', 'moe_router']", "full-iteration CUDA graph",
    "cuda_graphs=True", "CUDA graphs [attn, mamba]").

    - impl none (whatever the scope), "cuda_graphs=False", "not set by preset" (Megatron-Core's default impl is none),
      "CUDA graphs: none / off / no / disabled", no mention: ``none``;
    - impl full_iteration, a scope of full_iteration (the deprecated spelling with impl local), or "full-iteration":
      ``full``;
    - per-layer graphs whose modules cover every module kind the layer has (attn, and mlp / moe / mamba as the model
      has them; moe_router and moe_preprocess leave the experts and the dispatcher eager): ``layers``; a partial
      scope: ``layers`` too, with the captured modules in the plan's ``graph_modules`` (``graph_scope``): the other
      blocks stay eager;
    - graphs stated without modules: Megatron-Core's default modules, the whole layer: ``layers``.

    The command-line spellings read the same (``--cuda-graph-impl X``, ``--cuda-graph-scope`` / ``--cuda-graph-modules
    a b``, ``--enable-cuda-graph``, ``enable_cuda_graph=True``), in the settings or the notes; "no CUDA graphs",
    "without CUDA graphs", "CUDA graphs off / disabled" are ``none``."""
    text = _graph_text(row)
    if "graph" not in text:
        return "none"
    if re.search(r"(?:\bno|without)\s+(?:full[-_ ]iteration\s+)?cuda[-_ ]graphs?|cuda[-_ ]graphs?\s+(?:off|disabled)"
                 r"|enable_cuda_graph\s*=\s*false", text):
        return "none"
    # "CUDA graphs: none", "cuda graph impl: none", "CUDA graphs = false", "cuda graphs off", "...: not set"
    if re.search(r"cuda[-_ ]graphs?(?:\s+impl)?\s*[:=]?\s*['\"]?(?:none|off|false|no|disabled|not set)\b", text):
        return "none"
    if re.search(r"full[-_ ]iteration", text):
        return "full"
    if _GRAPH_SCOPE.search(text):     # a module list: the whole layer or part of it (graph_scope)
        return "layers"
    if re.search(r"cuda[-_ ]graphs?(?:\s*=\s*true)?\b|enable_cuda_graph", text):
        return "layers"
    return "none"


_EDGE_STAGES = re.compile(
    r"(?:first|initial)\s+and\s+(?:the\s+)?(?:last|final)\s+(?:pipeline\s+)?stages?[^.;|]{0,30}?\b(?:one|1)\s+(?:fewer|less)"
    r"\s+(?:transformer\s+|decoder\s+)?layers?"
    r"|\b(?:one|1)\s+(?:fewer\s+)?(?:transformer\s+|decoder\s+)?layers?\s+(?:less|fewer)\s+(?:on|in|for)\s+(?:both\s+)?(?:the\s+)?"
    r"(?:first|initial)\s+and\s+(?:the\s+)?(?:last|final)\s+(?:pipeline\s+)?stages?"
    r"|account[-_]for[-_]embedding[-_]in[-_]pipeline[-_]split\W+(?:\S+\W+){0,3}?account[-_]for[-_]loss[-_]in[-_]pipeline[-_]split",
    re.I)


def edge_stages_lighter(text: str, pp: int, vp: int, layers: int, mtp: int = 0) -> str | None:
    """The layout of a text that puts one transformer layer fewer on the first and the last pipeline stage, the
    embedding and the loss standing in for one each (Megatron-Core --account-for-embedding-in-pipeline-split
    --account-for-loss-in-pipeline-split; Qi et al. 2024, Zero Bubble PP, sec 5.1: "both the initial and final pipeline
    stages possess one fewer transformer layer"; Llama 3's 126 layers on 16 stages, arXiv:2407.21783 sec 3.3.2), when
    layers + 2 splits evenly over pp stages without interleaving; else None.

    >>> edge_stages_lighter("both the initial and final pipeline stages possess one fewer transformer layer", 8, 1, 22)
    'Et*2|(t*3|)*6t*2L'
    >>> edge_stages_lighter("1 layer less on the first and last stage", 2, 1, 6), edge_stages_lighter("", 8, 1, 22)
    ('Et*3|t*3L', None)
    """
    if pp < 2 or vp != 1 or mtp or (layers + 2) % pp or not _EDGE_STAGES.search(text or ""):
        return None
    c = (layers + 2) // pp
    if c < 2:
        return None
    middle = f"(t*{c}|)*{pp - 2}" if pp > 2 else ""
    return f"Et*{c - 1}|{middle}t*{c - 1}L"


def _pipeline_layout(row: dict) -> dict:
    """The row's Megatron-Core pipeline layout: stated in its settings (``pp_layout X`` or
    ``pipeline_model_parallel_layout=X``), else its model preset's recipe layout for (pp, vp) (models.pipeline_layout,
    e.g. Megatron-Bridge's DeepSeek-V3 layout_map); {} for neither, or for a stated layout that does not fit the row
    (its stage count, layers or MTP layers: the row's table values win, as its notes say). A layout of k x pp stages
    on a row without interleaving sets vp = k (Megatron-LM training/arguments.py: virtual_pipeline_model_parallel_size
    = num_stages // pipeline_model_parallel_size)."""
    from ..spec import families, models
    from ..spec.layout import ranks, stages

    pp, vp = row.get("pp") or 1, row.get("interleave") or 1
    layers, mtp = row.get("n_layers"), row.get("mtp") or 0
    if pp <= 1 or not layers:
        return {}
    m = re.search(r"(?:pp_layout|pipeline[-_]model[-_]parallel[-_]layout)\s*[=: ]\s*['\"]?([ELtm|()*\d,]+)",
                  row.get("settings") or "")
    if m:
        try:
            n = len(stages(m.group(1)))
            v = n // pp if vp == 1 and n % pp == 0 else vp
            ranks(m.group(1), pp, v, layers, mtp)
            return {"pipeline_layout": m.group(1), "interleave": v}
        except InputError:      # a stated layout that does not fit the row: the recipe's for (pp, vp), below
            m = None
    edges = edge_stages_lighter(f"{row.get('settings') or ''} {row.get('notes') or ''}", pp, vp, layers, mtp)
    if edges:
        return {"pipeline_layout": edges, "interleave": vp}
    preset = families.preset_for(row.get("model"))
    found = models.pipeline_layout(preset, pp, vp, mtp) if preset else None
    if found is None:
        return {}
    try:
        ranks(found[0], pp, vp, layers, mtp)
    except InputError:
        return {}
    return {"pipeline_layout": found[0], "interleave": vp}


def memory_measure(row: dict) -> str:
    """What a row's measured peak memory counts, from its notes: "reserved" (the caching allocator's reserved peak,
    torch.cuda.max_memory_reserved / memory_stats reserved_bytes: the tensors and the allocator's fragmentation) or
    "allocated" (torch.cuda.max_memory_allocated: the tensors alone; the default). Neither holds the CUDA context or
    NCCL's buffers, which only nvidia-smi sees."""
    text = _notes_text(row)
    m = re.search(r"\bmem(?:ory)?\s*=\s*([^;]*)", text)       # the clause that says what the column holds
    text = m.group(1) if m else text
    return "reserved" if "reserved" in text and "allocated" not in text else "allocated"


def compiled_loss(row: dict, stack) -> bool:
    """Whether the row's loss ran under torch.compile: the run states torch.compile and its stack compiles the loss
    with the model from a year on (stacks/*.yaml rule compiled_loss_since), judged by the earliest year its framework
    column names (none named: the stack's current code)."""
    from ..spec.stacks import years_in

    since = stack.rule("compiled_loss_since")
    text = f"{row.get('precision', '')} {row.get('settings', '')} {row.get('notes', '')}".lower()
    if not since or not re.search(r"torch\.compile|\bcompile\b", text):
        return False
    years = years_in((row.get("framework") or "").lower())
    return not years or min(years) >= int(since)


BATCH_SLACK = 0.05      # a stated global batch within 5 % of a multiple of micro-batch x dp is priced at that multiple


def _dp_of(d: dict) -> tuple[int | None, int | None]:
    """(dp, the dp assumed for an unstated layout or None) of plan fields ``d``: the stated dp, else n_gpus / (tp x pp x
    cp) of the stated degrees, else (tp and pp blank) the stacks' default layout tp = pp = 1; (None, None) when
    neither."""
    if d.get("dp") is not None:
        return d["dp"], None
    n, cp = d.get("n_gpus"), d.get("cp") or 1
    tp, pp = d.get("tp"), d.get("pp")
    if n and tp is None and pp is None:
        tp = pp = 1
    if not n or tp is None or pp is None or n % (tp * pp * cp):
        return None, None
    dp = n // (tp * pp * cp)
    return dp, (dp if LAYOUT_UNSTATED in d else None)


def batch_from_local(row: dict, d: dict) -> tuple[int | None, str]:
    """A blank global batch from the per-rank batch (``local_batch``, else ``micro_batch``): local x gradient
    accumulation x dp, with no accumulation unless stated (``grad_accum``), the default of every stack that lets the
    global batch go unset: Megatron-LM --global-batch-size None -> micro_batch_size x data_parallel_size
    (megatron/training/arguments.py), torchtitan training.global_batch_size -1 -> local_batch_size x dp
    (torchtitan/config/job_config.py), DeepSpeed train_batch_size = micro x gradient_accumulation_steps (1) x GPUs
    (deepspeed.ai/docs/config-json). ``d`` (plan fields) is updated: its global batch, and a local batch as the
    micro-batch where no pipeline splits it (pp 1 or blank; torchtitan splits it into pipeline micro-batches under
    PP). dp is the stated one, else n_gpus / (tp x pp x cp) of the stated degrees, else (tp, pp, dp all blank) the
    stacks' default layout tp = pp = 1, whose dp is returned so that the completed layout is checked against it.
    Raises Skip when dp cannot be known."""
    local = row.get("local_batch") or row.get("micro_batch")
    ga = row.get("grad_accum") or 1
    if (d.get("pp") or 1) > 1 and not row.get("local_batch") and not row.get("grad_accum"):
        # the default (micro-batch x dp) runs one micro-batch through the pipeline, its bubble (pp-1)/pp of the step:
        # the step a row measured depends on a micro-batch count it does not give
        raise Skip(f"global_batch not stated, and with pp {d['pp']} the step depends on the micro-batches per "
                   "pipeline (the default global batch, micro-batch x dp, would run one through the pipeline, idle "
                   "for (pp - 1) / pp of the step)")
    if (row.get("measured_iter_time_s") or 0) > 0 and not row.get("local_batch") and not row.get("grad_accum") \
            and re.search(_GLOBAL_BATCH_WORDS + r"[^.;|]{0,60}?\b(?:not (?:stated|given|reported|known|available)|blank)\b"
                          r"|\bnot (?:stated|given|available)\b[^.;|]{0,20}?\bglobal[-_ ]?batch", _notes_text(row)):
        # a step time whose source withholds the batch: the stacks' default would price one micro-batch per rank,
        # while the run's step held as many as its unknown batch (_GLOBAL_BATCH_WORDS: not a withheld micro-batch)
        raise Skip("global_batch not stated (the notes say so) for a measured step time: the step depends on the "
                   "batch the source leaves out, which the stacks' default (micro-batch x dp) need not be")
    dp, assumed = _dp_of(d)
    if dp is None:
        raise Skip("global_batch not stated, and the layout leaves dp unknown (global batch = local batch x "
                   "gradient accumulation x dp)")
    d["global_batch"] = local * ga * dp
    if row.get("local_batch") and d.get("micro_batch") is None and (d.get("pp") or 1) == 1:
        d["micro_batch"] = row["local_batch"]
    which = "local batch" if row.get("local_batch") else "micro-batch"
    steps = f"{ga} (stated)" if row.get("grad_accum") else "1 (unstated: no gradient accumulation)"
    layout = " (tp = pp = 1, the stacks' default)" if assumed else ""
    return assumed, (f"global batch not stated: {d['global_batch']} = {which} {local} x gradient accumulation {steps} x "
                     f"dp {dp}{layout} (Megatron-LM, torchtitan and "
                     "DeepSpeed set an unset global batch so)")


def _nearest_batch(d: dict) -> str:
    """A global batch that is no whole number of micro-batches per DP rank is a rounded figure of the source (GPT-NeoX
    20B: "1538" sequences, its config 4 x 32 x 12 = 1536; OPT-175B: 1024 sequences on dp 124): price the nearest
    multiple of micro-batch x dp when it is within BATCH_SLACK, and say so (``d`` is updated); '' otherwise."""
    gb, mb, dp = d.get("global_batch"), d.get("micro_batch") or 1, d.get("dp")
    if dp is None and LAYOUT_UNSTATED in d:
        return ""                                       # dp follows the completed layout
    if dp is None and d.get("n_gpus"):
        per = (d.get("tp") or 1) * (d.get("pp") or 1) * (d.get("cp") or 1)
        dp = d["n_gpus"] // per if d["n_gpus"] % per == 0 else None
    if not gb or not dp or gb % (mb * dp) == 0:
        return ""
    m = max(1, round(gb / (mb * dp)))
    if abs(m * mb * dp - gb) > BATCH_SLACK * gb:
        return ""
    d["global_batch"] = m * mb * dp
    return (f"global batch {gb} is no multiple of micro-batch x dp ({mb} x {dp}): priced at {m * mb * dp}, the "
            f"nearest the run can have")


def unstated_seq_len(row: dict, stack, base=None) -> tuple[int, str]:
    """(seq_len, note) of a row that leaves seq_len blank: the stack's shipped training config for the row's model
    family (stacks/*.yaml ``seq_len_unstated``, family -> length; torchtitan: Llama 3 8192); else, when the row names a
    preset (``base``, its Model), the pretraining context that preset's source gives (a row naming a published model
    and no length reports that model's training run); Skip when neither.

    >>> from roofline.spec import stacks
    >>> unstated_seq_len({"model": "llama3.1-8b"}, stacks.get("torchtitan"))
    (8192, "seq_len not stated: 8192, torchtitan's shipped llama3 training config")
    """
    name = re.sub(r"[^a-z0-9]", "", (row.get("model") or "").lower())
    for family, length in (stack.rule("seq_len_unstated") or {}).items():
        if name.startswith(re.sub(r"[^a-z0-9]", "", family.lower())):
            return int(length), f"seq_len not stated: {int(length)}, {stack.id}'s shipped {family} training config"
    if base is not None and base.seq_len:
        return int(base.seq_len), f"seq_len not stated: {int(base.seq_len)}, the pretraining context of preset {base.name}"
    raise Skip("seq_len not stated" + (f" ({stack.id} has no shipped training config for this model)"
                                       if stack.rule("seq_len_unstated") else ""))


BATCH_AMBIGUOUS = "_batch_ambiguous"     # row key: the bare "Batch size" header its global_batch was read from (read)
HEADER_GUESS = "_header_guess"           # row key: headers read as the column of a near spelling (read, _misspelled)
GPU_FROM_TEXT = "_gpu_id_from_text"      # row key: the gpu text a blank gpu_id was read from (read)
GPU_ID_SPELLED = "_gpu_id_spelled"       # row key: a gpu_id that named a part, not a profile id (read)
HSDP = "_hsdp"                          # plan-field key: the phrase that stated hybrid sharding (plan_fields)
GPU_BARE = "_gpu_bare"                  # row key: the assumption a bare 'H100' / 'A100' was read with (read)
LAYOUT_UNSTATED = "_layout_unstated"     # plan-field key: the tp/pp/dp a row leaves blank (more than one)
FROM_TEXT = "_from_text"                 # plan-field key: (note, fields) of blank columns read from the notes or settings


def sharding_from_text(text: str):
    """(sharding, phrase) a row's notes or settings state, or None: ZeRO stage n (DeepSpeed ds_config
    zero_optimization.stage), Megatron's distributed optimizer (ZeRO-1), FSDP's FULL_SHARD / SHARD_GRAD_OP /
    HYBRID_SHARD. A bare "FSDP" is left to the stack (FSDP runs FULL_SHARD in torchtitan, SHARD_GRAD_OP in metaseq).

    >>> sharding_from_text("bf16; zero stage 1; 8 nodes"), sharding_from_text("fsdp with megatron tp")
    (('zero1', 'zero stage 1'), None)
    >>> sharding_from_text("we did not use zero-3"), sharding_from_text("shard_grad_op")
    (None, ('zero2', 'shard_grad_op'))
    >>> sharding_from_text("zero_stage: 0"), sharding_from_text("ZeRO stage=3"), sharding_from_text("zero-bubble 1f1b")
    (('none', 'zero_stage: 0'), ('zero3', 'zero stage=3'), None)
    """
    m, _ = stated_in_text(text, r"\bzero[-_ ]?(?:stage)?[-_ :=]{0,3}([0-3])\b|\bdistributed optimi[sz]er\b|\bshard_grad_op\b|"
                        r"\bhybrid_shard\b|\bfull_shard\b")
    if not m:
        return None
    word = m.group(0)
    if m.group(1) is not None:
        return ({"0": "none", "1": "zero1", "2": "zero2", "3": "zero3"}[m.group(1)], word)
    if word.startswith("distributed"):
        return "distributed", word
    return ("zero2" if word == "shard_grad_op" else "fsdp"), word


def hsdp_from_text(text: str):
    """The phrase of a row's sharding column, notes or settings that states hybrid sharding (HSDP, FSDP's HYBRID_SHARD:
    shards within a group, replicas across groups), else None.

    A stated replica count comes with it: Megatron-Core's num_distributed_optimizer_instances, torchtitan's
    data_parallel_replicate_degree (dp_replicate), OLMo-core's num_replicas.

    >>> hsdp_from_text("hsdp"), hsdp_from_text("fsdp hybrid_shard, 4 nodes"), hsdp_from_text("fsdp, no hsdp")
    (('hsdp', None), ('hybrid_shard', None), None)
    >>> hsdp_from_text("Megatron-FSDP HSDP (num_distributed_optimizer_instances=4)")
    ('num_distributed_optimizer_instances=4', 4)
    """
    text = str(text or "").lower()
    m, _ = stated_in_text(text, r"\b(?:num[-_ ]distributed[-_ ]optimizer[-_ ]instances|data[-_ ]parallel[-_ ]replicate"
                                r"[-_ ]degree|dp[-_ ]replicate|num[-_ ]replicas)\s*[=:]?\s*(\d+)")
    if m and int(m.group(1)) >= 1:
        return m.group(0), int(m.group(1))
    m, _ = stated_in_text(text, r"\bhsdp\b|\bhybrid[-_ ]shard(?:ed|ing)?\b")
    return (m.group(0), None) if m else None


def shard_size_from_text(text: str):
    """(ranks, phrase) of a shard group a row's sharding column or notes state, or None: "sharded over 128 GPUs",
    "sharding across 64 ranks", "shard group of 16", "sharding degree 32".

    >>> shard_size_from_text("zero-3 sharded over 128 gpus"), shard_size_from_text("fsdp; shard group of 16 ranks")
    ((128, 'sharded over 128 gpus'), (16, 'shard group of 16'))
    >>> shard_size_from_text("fsdp over 512 gpus in 64 nodes")
    """
    m, _ = stated_in_text(str(text or "").lower(),
                          r"\bshard(?:ed|ing)?\s+(?:over|across|within)\s+(\d+)\s+(?:gpus|ranks|devices|workers)\b"
                          r"|\bshard(?:ing)?[-_ ](?:group|degree|size)(?:\s+of|\s*[=:])?\s*(\d+)")
    if m and int(m.group(1) or m.group(2)) > 1:
        return int(m.group(1) or m.group(2)), m.group(0)
    return None


FSDP_NOTE = "_fsdp_column"          # plan-field key: how the fsdp column was read (a note, dropped before resolving)
SCHEDULE_NOTE = "_schedule_note"     # plan-field key: how a schedule the text names was priced (a note, dropped)
ULYSSES_NOTE = "_ulysses_note"       # plan-field key: the Ulysses degree read from the text (a note, dropped)


def fsdp_column(value, fields: dict) -> tuple[dict, str]:
    """(plan fields, note) from a row's ``fsdp`` column where its sharding is not stated otherwise. The tables that
    have the column write either a flag (NVIDIA's NeMo / Megatron-Bridge performance summaries: "FSDP = 1: use FSDP;
    FSDP = 0: use DDP") or the FSDP shard size (NeMo AutoModel's, the DGX Cloud MaxText recipes'): 0 is off, any
    other number fully sharded data parallelism; a shard size that divides the data-parallel ranks into several
    groups (2 <= fsdp < dp) shards within each and replicates across them, HSDP with dp / fsdp replicas.

    >>> fsdp_column(1, {"dp": 64})
    ({'sharding': 'fsdp'}, 'fsdp column 1: fully sharded data parallel')
    >>> fsdp_column(0, {"dp": 8})[0], fsdp_column(8, {"dp": 8, "sharding": "fsdp"})[0]
    ({}, {})
    >>> fsdp_column(128, {"dp": 512, "sharding": "fsdp"})
    ({'sharding': 'fsdp', '_hsdp': ('fsdp shard size 128', 4)}, 'fsdp column 128: sharded over 128 ranks, 4 replicas (HSDP)')
    """
    if not value or fields.get("sharding") not in (None, "fsdp") or HSDP in fields:
        return {}, ""
    out = {"sharding": "fsdp"}
    dp = fields.get("dp")
    if dp is None and fields.get("tp") and fields.get("pp") and fields.get("n_gpus"):
        dp = fields["n_gpus"] // (fields["tp"] * fields["pp"] * (fields.get("cp") or 1))     # the resolver's dp
    if value > 1 and dp and dp > value and dp % value == 0:
        out[HSDP] = (f"fsdp shard size {value}", dp // value)
        return out, f"fsdp column {value}: sharded over {value} ranks, {dp // value} replicas (HSDP)"
    if fields.get("sharding") == "fsdp":
        return {}, ""
    return out, f"fsdp column {value}: fully sharded data parallel"


def hsdp_replicas(fields: dict, gpus_per_node: int):
    """(dp_replicas, note) for a row stating HSDP without its degrees: one replica per node, each sharding over its
    node's data-parallel ranks (OLMo-core DataParallelConfig.get_replicate_and_shard_degree: 'Defaults to one replica
    per node, with the shard degree set to the number of gpus per node'; FSDP1 HYBRID_SHARD's default process groups
    shard within the node, torch/distributed/fsdp/_init_utils.py _init_intra_and_inter_node_groups). A job inside one
    node, or whose node count does not divide dp x cp: one replica (plain FSDP), said."""
    tp_pp = (fields.get("tp") or 1) * (fields.get("pp") or 1)
    if fields.get("dp"):
        dpc = fields["dp"] * (fields.get("cp") or 1)
        world = tp_pp * dpc
    else:                                   # the layout still open: dp x cp is what tp x pp leave of the GPUs
        world = fields.get("n_gpus") or tp_pp
        dpc = max(1, world // tp_pp)
    phrase, stated = fields[HSDP]
    if stated:
        if dpc % stated == 0:
            where = "the fsdp column" if phrase.startswith("fsdp shard size") else "the text"
            return stated, f"{stated} replicas of the sharded state from {where} ({phrase!r})"
        return 1, f"{phrase!r} does not divide dp x cp = {dpc}: priced as one replica"
    nodes = max(1, world // max(1, gpus_per_node))
    if nodes > 1 and dpc % nodes == 0:
        return nodes, (f"HSDP ({phrase!r}) without its degrees: one replica per node, {nodes} replicas of dp x cp / "
                       f"{nodes} = {dpc // nodes} ranks")
    return 1, (f"HSDP ({phrase!r}): one replica ("
               + ("one node" if nodes <= 1 else f"{nodes} nodes do not divide dp x cp = {dpc}") + "), priced as FSDP")


def optimizer_from_text(text: str):
    """("muon", phrase) when a row's notes or settings name Muon ("Muon optimizer was used for pre-training Kimi-K2",
    the Megatron-Bridge tables' footnote; optimizer='dist_muon'), else None.

    >>> optimizer_from_text("muon optimizer was used for pre-training kimi-k2."), optimizer_from_text("no muon")
    (('muon', 'muon'), None)
    """
    m, _ = stated_in_text(text, r"\b(?:dist_)?muon\b")
    return ("muon", m.group(0)) if m else None


def recompute_from_text(text: str):
    """(recompute, phrase) a row's notes or settings state, or None: full (activation checkpointing / recomputation,
    --checkpoint-activations, gradient checkpointing), selective (Korthikanti et al. 2022), none when negated ("no
    activation checkpointing").

    >>> recompute_from_text("bf16; activation checkpointing"), recompute_from_text("selective activation recomputation")
    (('full', 'activation checkpointing'), ('selective', 'selective activation recomputation'))
    >>> recompute_from_text("trained without activation checkpointing")
    ('none', 'activation checkpointing')
    >>> recompute_from_text("activation checkpointing: none"), recompute_from_text("gradient checkpointing=False")
    (('none', 'activation checkpointing'), ('none', 'gradient checkpointing'))
    """
    pattern = (r"(selective )?(?:activation (?:checkpointing|recomputation|recompute)|checkpoint[-_ ]activations|"
               r"gradient checkpointing|full recompute|recompute[-_ ]granularity[ =:]*(full|selective))")
    m, negated = stated_in_text(text, pattern)
    if m:
        kind = "selective" if (m.group(1) or m.group(2) == "selective") else "full"
        return kind, m.group(0)
    if negated:
        return "none", negated.group(0)
    return None
FSDP_LEFT_NOTE = "_fsdp_left_note"       # plan-field key: the note of a sharded row whose dp counts its replicas
DP_WITH_EP = "_dp_with_ep"               # plan-field key: (dp, ep) of a row whose dp counts the EP ranks out
BLOCK_RC = "_block_recompute"            # plan-field key: (kind, value, phrase) of a partial block recomputation


def block_recompute_from_text(text: str):
    """(kind, value, phrase) when a row's recompute column, notes or settings state full recomputation of some of the
    layers, else None. Kinds: "every" (value n: every n-th block, torchtitan selective_ac_option n, OLMo-core
    selected_blocks block_interval n, "every other layer"), "fraction" (fms-fsdp selective_checkpointing p),
    "block" (Megatron-Core --recompute-method block --recompute-num-layers n: n layers of each stage's chunk),
    "selective layer" (torchtitan's name for its every-n-th-block mode, n left to the stack's default).

    >>> block_recompute_from_text("selective_ac_option: 2"), block_recompute_from_text("ac every other layer")
    (('every', 2, 'selective_ac_option: 2'), ('every', 2, 'every other layer'))
    >>> block_recompute_from_text("--recompute-method block --recompute-num-layers 4")
    ('block', 4, 'recompute-num-layers 4')
    >>> block_recompute_from_text("selective layer"), block_recompute_from_text("selective op")
    (('selective layer', None, 'selective layer'), None)
    >>> block_recompute_from_text("--recompute-method uniform --recompute-num-layers 1")
    """
    t = str(text or "").lower()
    m, _ = stated_in_text(t, r"selective[-_ ]ac[-_ ]option\W{0,3}(\d+)|block[-_ ]interval\W{0,3}(\d+)|"
                             r"every (other|second|2nd|(\d+)(?:st|nd|rd|th)) (?:layer|block|transformer block)")
    if m:
        n = m.group(1) or m.group(2) or m.group(4) or "2"
        return ("every", int(n), m.group(0)) if int(n) >= 1 else None
    m, _ = stated_in_text(t, r"selective[-_ ]checkpointing\W{0,3}([0-9]*\.?[0-9]+)")
    if m and 0 < float(m.group(1)) <= 1:
        return "fraction", float(m.group(1)), m.group(0)
    m, _ = stated_in_text(t, r"recompute[-_ ]num[-_ ]layers\W{0,3}(\d+)")
    if m and int(m.group(1)) > 0 and re.search(r"recompute[-_ ]method\W{0,3}block", t):
        return "block", int(m.group(1)), m.group(0)
    m, _ = stated_in_text(t, r"\bselective[-_ ](?:layer|block)s?\b")
    if m:
        return "selective layer", None, m.group(0)
    return None


def block_recompute_fraction(found, fields: dict, n_layers: int, stack) -> tuple[float | None, str]:
    """The share of each stage's layers a stated partial recomputation recomputes (plan recompute_fraction), and
    what to say; None when the statement leaves it to a stack that has no such mode."""
    kind, value, phrase = found
    if kind == "selective layer":
        if stack.family != "torchtitan":
            return None, ""
        # torchtitan's 'selective' layer mode checkpoints every selective_ac_option-th block, default '2'
        # (torchtitan/config_manager.py ActivationCheckpoint.selective_ac_option, "2 = checkpoint every other layer")
        value, kind = 2, "every"
        phrase += " (torchtitan selective_ac_option default 2)"
    if kind == "every":
        return 1.0 / value, f"full recomputation of one block in {value} from the text ({phrase!r})"
    if kind == "fraction":
        return value, f"full recomputation of {value:g} of the blocks from the text ({phrase!r})"
    per_chunk = n_layers / ((fields.get("pp") or 1) * (fields.get("interleave") or 1))
    share = min(1.0, value / per_chunk)
    return share, (f"Megatron block recomputation ({phrase!r}) of {value} of each chunk's {per_chunk:g} layers: "
                   f"{share:.3g} of the layers")


def layout_stated(row: dict) -> bool:
    """Whether a row states its layout (at most one of tp/pp/dp blank, that one then follows from n_gpus): rows that do
    not are priced at a layout :func:`complete_layout` chooses, so their error is not that of a stated plan (the
    uncertainty bands and the search's best measured MFU leave them out).

    >>> layout_stated({"tp": 8, "pp": None, "dp": None}), layout_stated({"tp": 8, "pp": 4, "dp": None})
    (False, True)
    """
    return sum(row.get(k) is None for k in ("tp", "pp", "dp")) <= 1


# The largest error of the model's peak memory per GPU on the bundled measurements (docs/validation.md, "Peak memory per
# GPU": 22.5 % over 63 runs; tests/test_unstated_memory_rules.py keeps this at least that): a plan whose memory exceeds the GPU
# by more than this cannot have run as the row states it
MEMORY_ERROR_MAX = 0.25


def over_memory_note(over: float, capacity: float) -> str:
    """What a row's note says when its plan, as read, needs more memory than the GPU has by more than the memory
    model's largest validated error: the run happened, so the row likely leaves out a memory saving or misstates its
    batch (or the memory model misses one of the stack's). The time is priced as read.

    >>> over_memory_note(1.0, 80 * 2 ** 30)[:73]
    "as read, the plan needs 100 % more memory than the GPU's 80 GiB (over the"
    """
    return (f"as read, the plan needs {100 * over:.0f} % more memory than the GPU's {capacity / 2 ** 30:.0f} GiB (over the "
            f"memory model's largest validated error, {100 * MEMORY_ERROR_MAX:.0f} %): the row likely leaves out a "
            "memory saving the run used (recomputation, sharding, offload) or misstates its batch, unless the memory "
            "model misses a saving of the stack's; priced as read")


def _partial_shares(stack, spec) -> list[float]:
    """The shares of the layers a partial full recomputation of ``stack`` can state for ``spec``'s layout, fewest
    first: a quarter, a half, three quarters of a pipeline chunk's layers (rounded to whole layers) for "block"
    (Megatron-Core --recompute-method block), one block in 4, 3, 2 for "every" (torchtitan, OLMo-core); none without
    the rule. The search's shares (space.PARTIAL_SHARES, space.EVERY_NTH)."""
    from .space import EVERY_NTH, PARTIAL_SHARES

    kind = stack.rule("partial_recompute")
    chunk = spec.model.n_layers / (spec.plan.pp * spec.plan.interleave)
    if kind == "block":
        out = [round(f * chunk) / chunk for f in PARTIAL_SHARES if 1 <= round(f * chunk) < chunk]
    elif kind == "every":
        out = [1.0 / n for n in sorted(EVERY_NTH, reverse=True) if chunk >= n]
    else:
        out = []
    return sorted(set(out))


_ACCUMULATE_TO_FIT = re.compile(r"(?:gradient|grad)[- ]accumulation[^.;|]{0,60}?\bto fit\b"
                                r"|accumulat\w*[^.;|]{0,40}?\bfit\w*\s+(?:in|into)\s+(?:the\s+)?(?:available\s+)?"
                                r"(?:gpu\s+)?memory")


def accumulation_to_fit_stated(text: str) -> bool:
    """A row's lower-cased text says it accumulated gradients so that its micro-batches fit in memory.

    >>> [accumulation_to_fit_stated(t) for t in ("gradient accumulation 'to fit into available gpu memory'",
    ...     "we accumulate gradients to fit into gpu memory", "no gradient accumulation", "")]
    [True, True, False, False]
    """
    m, _ = stated_in_text(text, _ACCUMULATE_TO_FIT)
    return bool(m)


def micro_batch_to_fit(spec, fields: dict, resolve_fields):
    """(spec, note) of a row whose micro-batch is unstated and whose text says it accumulated gradients to fit in
    memory: the largest micro-batch below the rank's batch (global / dp) that divides it and with which the plan
    fits (the reason to accumulate is that the whole rank's batch did not), else the spec as it is."""
    from ..model.predict import evaluate, inputs, overshoot
    p = spec.plan
    local = p.global_batch // (p.dp * p.cp) if p.global_batch % (p.dp * p.cp) == 0 else 0
    for mb in sorted((d for d in range(1, local) if local % d == 0), reverse=True):
        try:
            alt = resolve_fields({**fields, "micro_batch": mb})
        except InputError:
            continue
        out = evaluate(inputs(alt.model, alt.plan, alt.hardware))
        if float(overshoot(out["memory"], out["mem_reserve"], alt.hardware)) <= 0:
            if mb == p.micro_batch:
                return spec, ""
            return alt, (f"micro-batch {mb}: the largest below the rank's batch of {local} that fits, as the text's "
                         "'gradient accumulation to fit in memory' implies")
    return spec, ""


def unstated_recompute(spec, fields: dict, stack, resolve_fields):
    """(spec, note) of a row whose recompute is not stated: the stack's default, unless the plan then needs more
    memory than the GPU has by more than the memory model's largest validated error (MEMORY_ERROR_MAX). A run that
    happened fit, so it saved memory somewhere: the first of these, in order of what they cost in time, with which the
    plan fits is priced, noted: the optimizer state sharded over the data-parallel ranks (ZeRO-1, the distributed
    optimizer: the same bytes reduce-scattered and gathered as all-reduced) where the sharding is not stated either and
    the stack's default shards nothing, then the stack's recomputation kinds (selective, op, full), each without and
    then with that sharding; where sequence parallelism is unstated, off and the stack has it (tp > 1), it comes first
    and beside each of those (it costs no time). Within that error the default stands (the memory model, not the run, may be what is
    over), and so it does on a stand-in stack (a framework column naming a framework outside the registry, MaxText's
    remat policies, whose kinds are not the stand-in's)."""
    from ..model.predict import evaluate, inputs, overshoot

    def over(sp_):
        out = evaluate(inputs(sp_.model, sp_.plan, sp_.hardware))
        return float(overshoot(out["memory"], out["mem_reserve"], sp_.hardware))
    need = over(spec)
    if need <= MEMORY_ERROR_MAX:
        return spec, ""
    kinds = tuple(stack.rule("recomputes") or ("none", "selective", "full"))
    shard = fields.get("sharding") is None and spec.plan.sharding == "none" and \
        any(k in (stack.rule("shardings") or ()) for k in ("distributed", "zero1"))
    tries = [{"sharding": "distributed"}] if shard else []
    for kind in ("selective", "op", "full"):
        if kind == "full" and kind in kinds:
            # full recomputation of a share of the layers first where the stack can state one (the search's shares,
            # space.with_recompute_fraction): a run that recomputed only what it had to
            for share in _partial_shares(stack, spec):
                f = {"recompute": "full", "recompute_fraction": share}
                tries += [f] + ([{**f, "sharding": "distributed"}] if shard else [])
        if kind in kinds and kind != spec.plan.recompute:
            tries += [{"recompute": kind}] + ([{"recompute": kind, "sharding": "distributed"}] if shard else [])
    # Megatron-style sequence parallelism, unstated and off by the stack's default, costs no time: the same bytes
    # move (an all-gather and a reduce-scatter for each all-reduce) and the layer norms and dropouts run on 1/tp of
    # the sequence (Korthikanti et al. 2022, arXiv:2205.05198, sec 4.2.2), while it divides their activations by tp.
    # A run that fit may have used it: alone first, then each try above without it and with it (the same time)
    if fields.get("sequence_parallel") is None and not spec.plan.sequence_parallel and spec.plan.tp > 1 \
            and stack.rule("sequence_parallelism", True):
        tries = [{"sequence_parallel": True}] + [x for t in tries for x in (t, {**t, "sequence_parallel": True})]
    for t in tries:
        try:
            alt = resolve_fields({**fields, **t})
        except InputError:
            continue
        if over(alt) <= 0:
            rc = t.get("recompute", "")
            rc = f"full recomputation of {100 * t['recompute_fraction']:.0f} % of the layers" \
                if "recompute_fraction" in t else f"{rc} recomputation"
            what = " and ".join(([rc] if "recompute" in t else [])
                                + (["the optimizer state sharded over the data-parallel ranks (ZeRO-1)"]
                                   if "sharding" in t else [])
                                + (["sequence parallelism"] if t.get("sequence_parallel") else []))
            return alt, (f"recompute not stated, and with {stack.id}'s defaults the plan needs {100 * need:.0f} % more "
                         f"memory than the GPU's {spec.hardware.hbm_capacity / 2 ** 30:.0f} GiB: priced with {what}, "
                         "the least that fits")
    return spec, (f"recompute not stated; the plan needs {100 * need:.0f} % more memory than the GPU has and nothing "
                  f"{stack.id} runs makes it fit: priced at its defaults")


def unstated_interleave(spec, fields: dict, resolve_fields) -> tuple[object, str]:
    """(spec, note) of a pipelined row that leaves the virtual stages blank on a stack that interleaves when pp > 1,
    where the resolver's smallest valid v (resolve.smallest_interleave) leaves the plan over the GPU's memory by more
    than the memory model's largest validated error (MEMORY_ERROR_MAX).

    A run that happened fit, so it saved memory somewhere; in Megatron's interleaved schedule the first stage holds
    (pp - 1) 2 + (v - 1) pp + 1 chunks of layers / (pp v) layers each in flight (megatron/core/pipeline_parallel/
    schedules.py, forward_backward_pipelining_with_interleaving: num_warmup_microbatches), so more virtual stages hold
    fewer layers' activations, at the price of more point-to-point transfers, which cost far less than recomputing
    layers. The runs that publish v choose large ones at few micro-batches per pipeline (Megatron-Bridge's Llama 3.1
    405B recipes: v 8 over pp 8 and 16). So before recomputation (unstated_recompute) the next valid v (resolve.
    valid_interleaves) with which the plan fits is priced, said in the note; a plan that fits at the smallest v keeps it,
    and one that fits at none is left to unstated_recompute."""
    from ..model.predict import evaluate, inputs, overshoot
    from ..spec.config import EDGE_SLOTS
    from ..spec.resolve import valid_interleaves

    def over(sp):
        out = evaluate(inputs(sp.model, sp.plan, sp.hardware))
        return float(overshoot(out["memory"], out["mem_reserve"], sp.hardware))

    p = spec.plan
    if fields.get("interleave") is not None or p.pp <= 1 or p.interleave <= 1 \
            or not str(spec.origin.get("interleave", "")).startswith("rule"):
        return spec, ""
    need = over(spec)
    if need <= MEMORY_ERROR_MAX:
        return spec, ""
    m = p.global_batch // (p.micro_batch * p.dp) if p.global_batch % (p.micro_batch * p.dp) == 0 else 0
    vs = valid_interleaves(spec.model.n_layers, p.pp, m, EDGE_SLOTS if p.uneven_stages else 0)
    for v in (v for v in vs if v > p.interleave):
        try:
            alt = resolve_fields({**fields, "interleave": v})
        except InputError:
            continue
        if over(alt) <= MEMORY_ERROR_MAX:
            return alt, (f"interleave not stated, and at the smallest valid v={p.interleave} the plan needs "
                         f"{100 * need:.0f} % more memory than the GPU's {spec.hardware.hbm_capacity / 2 ** 30:.0f} "
                         f"GiB: priced at v={v}, the smallest of the valid v ({', '.join(map(str, vs))}) with which it "
                         "fits, before recomputation (validate.unstated_interleave)")
    return spec, ""


def complete_layout(fields: dict, stack, resolve_fields) -> tuple[dict, str]:
    """The plan fields of a row that leaves two or more of tp/pp/dp blank, and a note saying how they were chosen.

    Every stack's flag default is one tensor- and one pipeline-parallel rank (Megatron-LM
    ``--tensor-model-parallel-size`` / ``--pipeline-model-parallel-size`` default 1, megatron/training/arguments.py;
    DeepSpeed and PyTorch FSDP have no TP; torchtitan's ``tensor_parallel_degree`` / ``pipeline_parallel_degree``
    default 1, torchtitan/config/job_config.py), the rest data parallel. A run that happened fit in memory, so that
    default stands when it fits; when it does not, the run used another layout. Its tensor and pipeline degrees are
    then the practitioners' rule (Narayanan et al. 2021, arXiv:2104.04473, Takeaway #1: "tensor model parallelism
    should generally be used up to degree g when using g-GPU servers, and then pipeline model parallelism can be used
    to scale up to larger models across servers"): the smallest tp (up to the node) at pp = 1 that fits, else the
    largest tp inside the node with the fewest pipeline stages that fit (TP across nodes last), not the layout the
    model ranks fastest, which would read every such row at the model's most optimistic corner (issue 17). Among the
    plans of that (tp, pp) the stack can run that fit (margin 0: the run fit), keeping every knob the row states (dp,
    cp, ep, micro-batch, interleave, recompute, sharding, sequence parallelism) and the stack's own defaults for the
    rest, the fastest is priced (an unstated ep and micro-batch are searched with it; an unstated interleave is left to
    the stack's rule, the smallest valid v, then unstated_interleave, as for a row that states its layout). ``resolve_fields`` resolves
    plan fields on the row's model, hardware and stack (raises InputError)."""
    from ..model.predict import evaluate, fits, inputs

    fields = {k: v for k, v in fields.items() if k != LAYOUT_UNSTATED}
    blank = [k for k in ("tp", "pp", "dp") if fields.get(k) is None]
    default = {**fields, **{k: 1 for k in ("tp", "pp") if k in blank}}
    try:
        spec = resolve_fields(default)
        out = evaluate(inputs(spec.model, spec.plan, spec.hardware))
        if bool(fits(out["memory"], out["mem_reserve"], spec.hardware)) and np.isfinite(out["step_time"]):
            return default, (f"{'/'.join(blank)} not stated: the stack's default tp = pp = 1 (data parallel over the "
                             f"rest), which fits")
    except InputError:
        pass        # tp = pp = 1 is not a valid plan for this row (e.g. heads not divisible): the layout search below decides
    from .space import evaluate_space

    n, cp, dp = fields["n_gpus"], fields.get("cp") or 1, fields.get("dp")
    probe = resolve_fields({**{k: v for k, v in fields.items() if k not in ("interleave", "ep", "etp")},
                            "tp": 1, "pp": 1, "dp": 1, "n_gpus": None, "global_batch": None})
    base = probe.plan
    pins = {"cp": cp, "recompute": base.recompute, "sharding": [base.sharding]}
    pins.update({k: fields[k] for k in ("tp", "pp", "ep", "interleave") if fields.get(k) is not None})
    sp = fields.get("sequence_parallel")
    pins["sequence_parallel"] = [bool(stack.plan.get("sequence_parallel", False)) if sp is None else bool(sp)]
    if fields.get("micro_batch") is not None or stack.rule("micro_batch_unstated") != "local":
        pins["micro_batch"] = base.micro_batch
    try:
        space = evaluate_space(probe.model, probe.hardware, n, fields["global_batch"], base=base,
                               framework=stack.id, memory_margin=0.0,
                               stated=frozenset({"recompute_modules", "overlap_ep", "delay_wgrad"}), **pins)
    except InputError as exc:
        raise Skip(f"{'/'.join(blank)} not stated and no layout of the stack is valid: {exc}") from None
    ok = space.fits & (space.knobs["dp"] == dp if dp is not None else True)
    if not ok.any():
        if not len(space.fits) or (dp is not None and not (space.knobs["dp"] == dp).any()):
            raise Skip(f"{'/'.join(blank)} not stated, and no layout {stack.id} can run divides the row's "
                       f"{n} GPUs and global batch {fields['global_batch']} with its stated knobs"
                       f"{f' (dp {dp})' if dp is not None else ''}")
        raise Skip(f"{'/'.join(blank)} not stated, and neither tp = pp = 1 nor any layout {stack.id} can run fits "
                   f"in memory")
    k = space.knobs
    moe = (probe.model.n_experts or 1) > 1
    rank = practice_rank(k["tp"], k["pp"], ok, probe.hardware.gpus_per_node, ep=k["ep"] if moe else None)
    ok &= rank == rank[ok].min()
    t = np.where(ok, space.out["step_time"], np.inf)
    i = int(np.argmin(t))
    chosen = {f: int(k[f][i]) for f in ("tp", "pp", "dp", "ep", "interleave", "micro_batch")}
    chosen["sequence_parallel"] = bool(k["sequence_parallel"][i])
    layout = " ".join(f"{f}={chosen[f]}" for f in ("tp", "pp", "dp")) + "".join(
        f" {name}={chosen[f]}" for name, f in (("ep", "ep"), ("v", "interleave")) if chosen[f] > 1)
    if fields.get("interleave") is None and chosen["pp"] > 1:
        # the virtual stages of an unstated interleave are the stack's rule (the smallest valid v, a larger one only
        # when that does not fit: unstated_interleave), as for a row that states its layout, not the v the model
        # prices fastest (one layer per virtual stage, the model's most optimistic corner)
        del chosen["interleave"]
        layout = layout.split(" v=")[0]
    rule = ("EP x TP inside the node, the smallest tp, then the fewest pipeline stages that fit (Megatron-Core MoE "
            "guidelines)" if moe else "tensor parallel up to the node, then the fewest pipeline stages that fit "
            "(Narayanan et al. 2021 Takeaway #1)")
    return {**fields, **chosen}, (f"{'/'.join(blank)} not stated and tp = pp = 1 does not fit: priced at {layout}, "
                                  f"{rule}; the fastest such plan {stack.id} can run (validate.complete_layout)")


def unstated_ep(fields: dict, resolve_fields) -> tuple[dict, str]:
    """(plan fields, note) of a row with a stated layout that leaves ep blank on an MoE model over more than one GPU.

    Every stack's flag default is one expert-parallel rank (Megatron-Core --expert-model-parallel-size 1; torchtitan
    expert_parallel_degree 1; NeMo AutoModel ep_size 1), but a table's blank or '-' EP on an MoE run is a missing
    cell, not that default: with one rank every GPU holds and (fully sharded) gathers every expert of every layer, which
    no published MoE run does. The recipes that publish MoE runs spread experts wide, across nodes with DeepEP /
    HybridEP dispatch (Megatron-Bridge DeepSeek-V3 ep 64 and Qwen3-235B ep 32 on H100 / GB200; NeMo AutoModel's
    examples/llm_benchmark GPT-OSS 120B ep_size 64 = its whole dp, Qwen3-30B ep 8, Kimi K2 ep 32). The row is priced at
    the fastest plan that fits among the ep that divide the experts and dp x cp, said in the note. Dense rows, one
    GPU and rows stating ep are left as they are (``resolve_fields`` resolves plan fields on the row's model, stack
    and hardware)."""
    from ..model.predict import evaluate, fits, inputs

    if fields.get("ep") is not None or (fields.get("n_gpus") or 1) <= 1:
        return fields, ""
    try:
        probe = resolve_fields(fields)
    except InputError:
        return fields, ""       # the row's own refusal is said by the caller
    m, plan = probe.model, probe.plan
    experts = m.n_experts or 1
    if experts <= 1:
        return fields, ""
    width = plan.dp * plan.cp
    priced = []                                 # (step time, ep, fits) of every valid candidate
    for ep in range(2, width + 1):
        if width % ep or experts % ep:
            continue
        try:
            spec = resolve_fields({**fields, "ep": ep})
        except InputError:
            continue
        out = evaluate(inputs(spec.model, spec.plan, spec.hardware))
        t = float(out["step_time"])
        if np.isfinite(t):
            priced.append((t, ep, bool(fits(out["memory"], out["mem_reserve"], spec.hardware))))
    if not priced:
        return fields, ""
    fitting = [c for c in priced if c[2]]
    _, ep, _ = min(fitting or priced)
    why = "the fastest that fits" if fitting else "the fastest (none fits the model's memory estimate; the run did)"
    return {**fields, "ep": ep}, (f"ep not stated on an MoE row: priced at ep={ep}, {why}, of the ep dividing the "
                                  f"experts and dp x cp (validate.unstated_ep)")


def practice_rank(tp, pp, ok, gpus_per_node: int, ep=None):
    """Preference order of layouts (complete_layout), lower first, for arrays of plans (``ok``: those that are valid
    and fit). Dense (``ep`` None), Narayanan et al. 2021's Takeaway #1: pp = 1 by tp ascending; then the largest tp
    inside the node that fits, by pp ascending; then the other tp inside the node (larger first) by pp; TP across
    nodes last. MoE (``ep`` the plans' expert-parallel sizes), Megatron-Core's MoE guidelines
    (megatron/core/transformer/moe/README.md, 'Best Practices', Guidelines 1-4: model parallelism as small as fits, EP
    x TP inside the NVLink domain, EP before TP, PP to scale across nodes): EP x TP inside the node first, then tp
    ascending, then pp ascending (the fastest ep of that class is the caller's choice)."""
    tp, pp = np.asarray(tp, dtype=np.int64), np.asarray(pp, dtype=np.int64)
    big = 1 << 20
    if ep is not None:
        across = np.asarray(ep, dtype=np.int64) * tp > gpus_per_node
        return across * 4 * big + np.minimum(tp, 1023) * 1024 + np.minimum(pp, 1023)
    inside = tp <= gpus_per_node
    top = int(tp[ok & inside].max()) if (ok & inside).any() else 0
    return np.where(~inside, 3 * big + pp * 1024 + tp,
                    np.where(pp == 1, tp,
                             np.where(tp == top, big + pp, 2 * big + pp * 64 + (64 - np.minimum(tp, 63)))))


def batch_from_tokens(tokens: tuple, seq_len: int) -> tuple[int, str]:
    """(sequences, note) of a global batch stated in tokens (BATCH_TOKENS: its decimal and binary readings and the
    cell): the reading that is a whole number of sequences ("4M tokens" at 4096 is 4 x 2^20 / 4096 = 1024), else the
    decimal one rounded (GPT-3's "3.2M" at 2048: 1562; the nearest batch the layout runs follows, _nearest_batch).

    >>> batch_from_tokens((4e6, 4 * 2**20, "4M tokens"), 4096)[0], batch_from_tokens((3.2e6, 3.2 * 2**20, "3.2M"), 2048)[0]
    (1024, 1562)
    """
    dec, binary, cell = tokens
    whole = [x / seq_len for x in (binary, dec) if x % seq_len == 0]
    seqs = int(whole[0]) if whole else int(round(dec / seq_len))
    return seqs, f"global batch {cell!r} read as {seqs} sequences of {seq_len} tokens"


# an inter-node network as sources write it: "8x200Gb/s HDR IB per node", "400 Gbps EFA", "4 x 100 Gb RoCE per node",
# "NDR 400 Gb/s per GPU", "25 GB/s per GPU" (bytes), "3.2 Tbps per instance": count x rate, and whom it serves
_NET_UNIT = r"(?P<unit>[GT])(?:(?P<bits>b|bit)(?:ps|/s)?|(?P<bytes>B)(?:ps|/s))"       # bits, or bytes per second
_NET = re.compile(r"(?:(?P<count>\d+)\s*[x×*]\s*)?(?P<rate>\d+(?:\.\d+)?)\s*" + _NET_UNIT +
                  r"(?![A-Za-z])(?P<what>(?:(?!\d+(?:\.\d+)?\s*[GT](?:b|bit|B)(?![A-Za-z]))[^;,|()]){0,40}?)\b(?i:per)\s+(?P<per>(?i:gpu|node|host|server|instance|machine))\b"
                  r"|(?:(?P<count2>\d+)\s*[x×*]\s*)?(?P<rate2>\d+(?:\.\d+)?)\s*(?P<unit2>[GT])(?:b|bit)(?:ps|/s)?"
                  r"(?![A-Za-z])\s+(?:of\s+)?(?i:efa)\b")


def network_from_text(text: str, gpus_per_node: int) -> tuple[float, str] | None:
    """(inter-node line rate in Gbit/s per GPU, the phrase) a row's interconnect or notes text states, or None: a count
    times a rate per GPU or per node (a node's divided among its GPUs), in bits unless written GB/s (bytes); AWS's
    "400 Gbps EFA" is the instance's (p4d: 400 Gbit/s for 8 A100s; Elastic Fabric Adapter documentation). A link
    inside the node (NVLink, NVSwitch, Infinity Fabric, PCIe) is not the network.

    >>> [network_from_text(t, 8)[0] for t in ("DGX A100; 8x200Gb/s HDR IB per node", "400 Gbps EFA",
    ...  "NDR 400 Gb/s per GPU", "25 GB/s per GPU", "4 x 100 Gb RoCE per node", "3.2 Tbps per instance")]
    [200.0, 50.0, 400.0, 200.0, 50.0, 400.0]
    >>> network_from_text("NVLink 600 GB/s per GPU", 8), network_from_text("113 TFLOP/s per GPU", 8)
    (None, None)
    >>> network_from_text("140 GB of BF16 weights per GPU", 8)
    >>> network_from_text("ConnectX-6 HDR, 200 Gb/s -> 100 Gb/s per GPU", 8)    # the rate said per GPU, not the one before
    (100.0, '100 Gb/s per GPU')
    """
    for m in _NET.finditer(text or ""):
        around = (text[max(0, m.start() - 25):m.end()]).lower()
        if re.search(r"nvlink|nvswitch|infinity fabric|xgmi|pcie|nvl\d|c2c|hbm|memory", around):
            continue
        if m.group("rate2"):
            count, rate, unit, in_bytes, per = m.group("count2"), m.group("rate2"), m.group("unit2"), False, "node"
        else:
            count, rate, unit, in_bytes, per = (m.group("count"), m.group("rate"), m.group("unit"),
                                                bool(m.group("bytes")), m.group("per").lower())
        gbps = float(rate) * (1000 if unit == "T" else 1) * int(count or 1)
        if in_bytes:
            gbps *= 8
        if per != "gpu":
            gbps /= gpus_per_node
        if gbps > 0:
            return gbps, m.group(0).strip()
    return None


def kv_replicated(stack):
    """``stack`` with its key/value heads replicated over TP ranks beyond their number (rule kv_heads_below_tp), as
    Megatron-Core since core_v0.16 and the forks that trained multi-query models under TP did."""
    import dataclasses
    from types import MappingProxyType

    return dataclasses.replace(stack, rules=MappingProxyType({**stack.rules, "kv_heads_below_tp": True}))


def build_case(row: dict, hardware=None) -> Case:
    """The row's Spec through the one resolver; raises Skip with the reason when it cannot be predicted.

    ``hardware`` (a Hardware) prices the row on that profile instead of its ``gpu_id`` (the row's
    gpus_per_node and network overrides still apply).
    """
    from ..spec import hardware as hwmod
    from ..spec.resolve import resolve

    if row.get(UNREADABLE):
        raise Skip(row[UNREADABLE])
    measured = row.get("measured_iter_time_s") or row.get("derived_iter_time_s")
    flops_known = row.get("flops_per_iter") or flop_basis(row.get("flop_basis"))
    rate = (flops_known and (row.get("measured_tflops_per_gpu") or row.get("measured_mfu"))) or row.get(
        "tokens_per_s") or row.get("tokens_per_s_per_gpu") or row.get("samples_per_s")
    # a TFLOP/s figure alone, with no FLOP count: the count the row's stack logs it with, once the stack resolves
    # (stack rule tflops_basis, logged_basis)
    logged = not rate and not flops_known and bool((row.get("measured_tflops_per_gpu") or 0) > 0)
    # an MFU alone, with no FLOP count: the model FLOPs of MFU as PaLM defines it (mfu_flops), once the plan resolves
    mfu_only = not rate and not flops_known and bool((row.get("measured_mfu") or 0) > 0)
    from_rate = (not measured or measured <= 0) and (bool(rate and rate > 0) or logged or mfu_only)
    if (not measured or measured <= 0) and not from_rate and not row.get("measured_peak_memory_gib"):
        raise Skip(NO_MEASUREMENT)
    measured = measured if measured and measured > 0 else float("nan")     # memory-only row
    local_said = ""
    if row["global_batch"] is None and not row.get(BATCH_TOKENS) and not row.get("local_batch") \
            and (local := local_batch_from_text(_notes_text(row))):
        row = {**row, "local_batch": local[0]}
        local_said = f"local batch {local[0]} from the text ({local[1]!r})"
    if row["global_batch"] is None and not row.get(BATCH_TOKENS) and not (row.get("local_batch")
                                                                         or row.get("micro_batch")):
        said = batch_tokens_from_text(_notes_text(row))
        if said is None:
            raise Skip("global_batch not stated")
        row = {**row, BATCH_TOKENS: said}       # priced as a batch in tokens (batch_from_tokens) once seq_len is known
        local_said = "; ".join(x for x in (local_said, f"global batch from the text ({said[2]!r})") if x)
    model_fields, note, base_model = _model_fields(row)
    note = "; ".join(x for x in (note, local_said) if x)
    plan_fields = _plan_fields(row, base_model)
    text_keys = ()
    if FROM_TEXT in plan_fields:
        said, text_keys = plan_fields.pop(FROM_TEXT)
        note = "; ".join(x for x in (note, said) if x)
    if FSDP_NOTE in plan_fields:
        note = "; ".join(x for x in (note, plan_fields.pop(FSDP_NOTE)) if x)
    if ULYSSES_NOTE in plan_fields:
        note = "; ".join(x for x in (note, plan_fields.pop(ULYSSES_NOTE)) if x)
    # how the text's DualPipe is priced: said only where the stack does not run it (HAI-LLM does, stacks/hai-llm.yaml)
    schedule_note = plan_fields.pop(SCHEDULE_NOTE, "")
    if FSDP_LEFT_NOTE in plan_fields:
        note = "; ".join(x for x in (note, plan_fields.pop(FSDP_LEFT_NOTE)) if x)
    if DP_WITH_EP in plan_fields:
        dp, ep = plan_fields.pop(DP_WITH_EP)
        note = "; ".join(x for x in (note, f"dp {dp} counts the EP ranks out (tp x pp x dp x cp x ep = n_gpus): "
                                           f"priced at Megatron-Core's dp = {dp} x ep {ep} = {dp * ep}") if x)
    local_dp = None                         # the dp a batch read from the local batch assumed (batch_from_local)
    if row.get(BATCH_AMBIGUOUS) and plan_fields.get("global_batch") and not row.get("local_batch"):
        # a bare "Batch size" (read as the global batch) smaller than dp cannot be one: each data-parallel rank runs
        # at least one sequence, so it is the per-rank batch (torchtitan docs/performance.md: "Batch size" 1 on 64
        # GPUs, its prose "local batch size 1 (global batch size = ... 64)")
        dp, _ = _dp_of(plan_fields)
        if dp and plan_fields["global_batch"] < dp:
            row = {**row, "local_batch": plan_fields["global_batch"]}
            note = "; ".join(x for x in (note, f"'{row[BATCH_AMBIGUOUS]}' {plan_fields['global_batch']} is smaller "
                                               f"than dp {dp}: read as the per-rank batch") if x)
            plan_fields["global_batch"] = None
    if plan_fields.get("global_batch") is None and not row.get(BATCH_TOKENS):
        local_dp, said = batch_from_local(row, plan_fields)
        note = "; ".join(x for x in (note, said) if x)
    nearest = _nearest_batch(plan_fields)
    if nearest:
        note = "; ".join(x for x in (note, nearest) if x)
    if plan_fields.get("dtype") and row_precision(row)[1] == "stated in the notes":
        note = "; ".join(x for x in (note, f"precision {plan_fields['dtype']} stated in the notes") if x)
    if hardware is None and not row.get("gpu_id"):
        raise Skip(f"gpu_id blank and the gpu column ({row.get('gpu') or ''!r}) names no single bundled profile "
                   "(hardware.from_text, hardware.bare_part)")
    try:
        variant = None if hardware is not None else hwmod.node_variant(row["gpu_id"], row.get("gpus_per_node"))
        if variant:
            # the GPU in a node of the row's size, as a bundled profile describes that node (GH200 four to a node:
            # gh200-quad's NVLink between the four and one NIC each, where gh200 is one superchip per node)
            note = "; ".join(x for x in (note, f"{row['gpu_id']} with {row['gpus_per_node']} GPUs per node: profile "
                                               f"{variant} (that node's links)") if x)
            row = {**row, "gpu_id": variant}
        hw = hardware if hardware is not None else hwmod.load(row["gpu_id"])
        named = nvlink_domain_stated(f"{row.get('interconnect', '')}; {row.get('gpu', '')}; {_notes_text(row)}")
        host = row.get("gpus_per_node")
        if hw.gpus_per_node > NODE_GPUS_MAX and host and host <= NODE_GPUS_MAX and (named or hw.gpus_per_node) > host:
            # a profile whose node is a rack-scale NVLink domain (GB200 NVL72: 72 GPUs in trays of 4) and a row that
            # counts its host, the compute tray: the node stays the domain (the one the text names, else the
            # profile's), which TP/EP/CP groups span on NVLink; a text naming a domain no larger than the row's node
            # (GB200 NVL4) keeps the row's
            domain = min(named or hw.gpus_per_node, hw.gpus_per_node)
            said = f"the NVLink domain the text names ({domain} GPUs)" if named else \
                f"{hw.id}'s NVLink domain ({domain} GPUs; the text names none smaller)"
            note = "; ".join(x for x in (note, f"gpus_per_node {host} is the host (a compute tray); {said} is the "
                                               "node") if x)
            row = {**row, "gpus_per_node": domain}
        stack, reason = infer_stack(row, None, hw)
        # the era rule reads model features: resolve the model once without the stack to see them
        if "era rule" in reason or "no year" in reason:
            probe = resolve(base_model, None, hw, "plain", model_fields=model_fields)
            stack, reason = infer_stack(row, probe.model, hw)
        from ..spec import stacks

        if "attention" not in model_fields and stack.model.get("attention") == "unfused" \
                and (flash := flash_named(row)):
            # the text names FlashAttention on a stack whose default writes the score matrix out: the flash path
            # the stack offers (Megatron-LM --use-flash-attn, transformers' use_flash_attention_2), of the row's date
            model_fields["attention"] = flash
            note = "; ".join(x for x in (note, f"attention {flash}: the text names FlashAttention ({stack.id} runs "
                                               "unfused attention unless told)") if x)
        if plan_fields.get("recompute") == "selective" and "selective" not in (stack.rule("recomputes") or ()) \
                and stack.rule("partial_recompute") and (ratio := hfu_mfu_stated(_notes_text(row))):
            # a 'selective' column on a stack that recomputes whole blocks only (fms-fsdp's selective_checkpointing: a
            # share of the blocks), with the source's HFU and MFU: HFU counts the recomputed forwards, 2 N r of the
            # 6 N model FLOPs, so the share r = 3 (HFU / MFU - 1), to whole layers
            layers = model_fields.get("n_layers") or (base_model.n_layers if base_model is not None else 0)
            share = min(1.0, max(0.0, 3 * (ratio[0] / ratio[1] - 1)))
            if layers and share * layers >= 0.5:
                k = max(1, round(share * layers))
                plan_fields["recompute"] = "full"
                if k < layers:
                    plan_fields["recompute_fraction"] = k / layers
                note = "; ".join(x for x in (note, f"'selective' on {stack.id} (whole blocks only): {k} of {layers} "
                                                   f"blocks recomputed, from the stated HFU {ratio[0]:g} / MFU "
                                                   f"{ratio[1]:g} (HFU counts the recomputed forwards: share = 3 "
                                                   "(HFU/MFU - 1))") if x)
        if stack.family == "maxtext" and (policy := re.search(r"remat[-_ ]policy\W{0,3}(minimal\w*|save_\w+|full|none)\b",
                                                             _notes_text(row))):
            # MaxText's jax.checkpoint policy the text names (layers/decoders.py get_remat_policy): 'minimal*' and
            # 'save_*' keep every matmul output (and the flash context) and redo only element-wise ops, priced as
            # no recomputation (stacks/maxtext.yaml recomputes); 'full' and 'none' as themselves
            kind = policy.group(1)
            rc = kind if kind in ("full", "none") else "none"
            if plan_fields.get("recompute") != rc:
                note = "; ".join(x for x in (note, f"recompute {rc}: MaxText remat_policy {kind} from the text"
                                                   + (f" (the recompute column's {plan_fields['recompute']!r} "
                                                      "read as it)" if plan_fields.get("recompute") else "")) if x)
                plan_fields["recompute"] = rc
        zb = plan_fields.get("schedule")
        if zb in ("zb1p", "zb2p") and stacks.schedule_refusal(stack, zb):
            # the text's zero-bubble schedule on a stack that runs none (upstream Megatron-LM): the 1F1B it reorders,
            # whose bubble bounds the zero-bubble one from above, said in the note (the zero-bubble stack runs it)
            plan_fields["schedule"] = "1f1b"
            schedule_note = (f"the text's {zb.upper()} schedule priced as 1F1B, whose bubble bounds it from above "
                             f"({stack.id} runs {', '.join(stacks.schedules_of(stack))}; the zero-bubble stack runs "
                             f"{zb})")

        if row.get("net_gbps_per_gpu") is None:
            # the network the row's interconnect or notes state, when its column is blank (README: blank = the
            # GPU's usual DGX-class node); noted
            per_node = row.get("gpus_per_node") or hw.gpus_per_node
            found = network_from_text(f"{row.get('interconnect', '')}; {row.get('notes', '')}", per_node)
            if found:
                row = {**row, "net_gbps_per_gpu": found[0]}
                note = "; ".join(x for x in (note, f"network {found[0]:g} Gbit/s per GPU from the text "
                                                   f"({found[1]!r}, {per_node} GPUs per node)") if x)
        if model_fields.get("seq_len") is None:
            model_fields["seq_len"], said = unstated_seq_len(row, stack, base_model)
            note = "; ".join(x for x in (note, said) if x)
        if row.get(BATCH_TOKENS) and plan_fields.get("global_batch") is None:
            plan_fields["global_batch"], said = batch_from_tokens(row[BATCH_TOKENS], model_fields["seq_len"])
            nearest = _nearest_batch(plan_fields)             # a rounded token count: the batch the layout runs
            row = {**row, "global_batch": plan_fields["global_batch"]}
            note = "; ".join(x for x in (note, said, nearest) if x)
        layout_notes, hsdp_notes, rc_notes = [], [], []

        def model_n_layers():
            return model_fields.get("n_layers") or resolve(base_model, None, hw, "plain",
                                                           model_fields=model_fields).model.n_layers

        def priced(st, why):
            st = stacks.get(st) if isinstance(st, str) else st

            def resolved(f):
                f = {**f, "loss_kernel": "compiled"} if compiled_loss(row, st) else f
                if BLOCK_RC in f:
                    share, said = block_recompute_fraction(f[BLOCK_RC], f, model_n_layers(), st)
                    f = {k: v for k, v in f.items() if k != BLOCK_RC}
                    if share is not None:
                        f["recompute"] = "full"
                        if share < 1:
                            f["recompute_fraction"] = share
                        rc_notes[:] = [said]
                if HSDP in f:
                    reps, said = hsdp_replicas(f, row.get("gpus_per_node") or hw.gpus_per_node)
                    phrase = f[HSDP][0]
                    f = {k: v for k, v in f.items() if k != HSDP}
                    if "hsdp" in phrase or "hybrid" in phrase:          # HSDP shards the parameters in a replica
                        f["sharding"] = f.get("sharding") or "fsdp"
                    try:
                        spec = resolve(base_model, {**f, "dp_replicas": reps}, hw, st, model_fields=model_fields,
                                       stack_reason=why, gpus_per_node=row.get("gpus_per_node"),
                                       net_gbps=row.get("net_gbps_per_gpu"))
                        hsdp_notes[:] = [said]
                        return spec
                    except InputError as exc:
                        if "dp-replicas" not in str(exc):
                            raise
                        hsdp_notes[:] = [f"the text's replicas dropped: {exc}"]
                return resolve(base_model, f, hw, st, model_fields=model_fields, stack_reason=why,
                               gpus_per_node=row.get("gpus_per_node"), net_gbps=row.get("net_gbps_per_gpu"))
            def fitted_micro_batch(spec, fields):
                # an unstated micro-batch of a run that accumulated gradients to fit in memory (micro_batch_to_fit)
                if plan_fields.get("micro_batch") is not None or not accumulation_to_fit_stated(_notes_text(row)):
                    return spec, fields
                spec, said = micro_batch_to_fit(spec, fields, resolved)
                if said:
                    layout_notes.append(said)
                    fields = {**fields, "micro_batch": spec.plan.micro_batch}
                return spec, fields
            layout_notes[:] = []        # this attempt's (a stack tried after a refusal starts over)
            if LAYOUT_UNSTATED not in plan_fields:
                fields, said = unstated_ep(plan_fields, resolved)
                if said:
                    layout_notes.append(said)
                spec, fields = fitted_micro_batch(resolved(fields), fields)
                registry_stack = stacks.names_stack(row.get("framework", "")) or not (row.get("framework") or "").strip()
                if registry_stack:
                    spec, said = unstated_interleave(spec, fields, resolved)
                    if said:
                        layout_notes.append(said)
                        fields = {**fields, "interleave": spec.plan.interleave}
                if fields.get("recompute") is None and BLOCK_RC not in fields and registry_stack:
                    spec, said = unstated_recompute(spec, fields, st, resolved)
                    if said:
                        rc_notes[:] = [said]
                return spec
            fields, said = complete_layout(plan_fields, st, resolved)
            per = (fields.get("tp") or 1) * (fields.get("pp") or 1) * (fields.get("cp") or 1)
            if local_dp is not None and (fields.get("dp") or fields["n_gpus"] // per) != local_dp:
                raise InputError(f"the global batch read from the local batch assumed dp {local_dp} (tp = pp = 1), "
                                 f"but that layout does not fit: {said}")
            layout_notes.append(said)
            spec, fields = fitted_micro_batch(resolved(fields), fields)
            spec, said = unstated_interleave(spec, fields, resolved)
            if said:
                layout_notes.append(said)
            return spec
        def priced_or_without_text(st, why):
            """(spec, note): priced on ``st``; where ``st`` refuses what only the notes said (read because the column
            is blank: the notes may speak of another run), priced without it, on the stack's default, noted."""
            try:
                return priced(st, why), ""
            except InputError as exc:
                drop = [k for k in text_keys if k in str(exc)] or list(text_keys)    # the ones the refusal names
                if not drop:
                    raise
                for k in drop:
                    plan_fields.pop(k, None)
                return priced(st, why), f"the text's {'/'.join(drop)} dropped: {exc}"

        read_fields = dict(plan_fields)         # as read, before a refusal drops what the text said
        try:
            spec, said = priced_or_without_text(stack, reason)
            note = "; ".join(x for x in (note, said) if x)
        except InputError as first:
            # the stack the text names first cannot run what the row states (a source naming "FSDP + Megatron TP":
            # Megatron-LM has no FSDP): the next stack the text names that can
            text = f"{row.get('source', '')} {row.get('notes', '')}"
            from_text = reason.startswith("source text") or "; source text names" in reason
            # (a column naming a framework outside the registry keeps saying so before the text's next stack)
            column_said = reason.split("; source text names")[0] + "; " if "; source text names" in reason else ""
            tries = [(s, column_said + w) for s, w in stacks.alternatives(text, None, hw, plan_fields.get("dtype"))] \
                if from_text else []
            # a version the source text's date, the features or the era rule picked that lacks what the row states
            # (selective recomputation, Megatron-LM 2022+): the family's next version that runs it (a framework
            # column is not second-guessed)
            if not reason.startswith("framework column") and f"names {stack.id!r}" not in reason:
                tries += [(s, f"{reason}; {s.id}, the first later {s.family} version that runs the row's plan")
                          for s in stacks.later_versions(stack)]
            # the era rule's stack (nothing named, or a framework the registry lacks) cannot run the stated plan
            # (ZeRO-2 on Megatron-Core): the reference implementation of what it refuses (stacks.STAND_INS)
            if "era rule" in reason:
                tries += [(s, f"{reason}; {s.id}, the stand-in that runs the row's plan") for s in stacks.stand_ins(stack)]
            era_tries = []
            if from_text and "era rule" not in reason and not stacks.names_stack(row.get("framework", "")):
                # no stack named by the column (blank, or a framework the registry lacks: Meta's internal 4D stack)
                # and none the text names runs the row ("ZeRO-2-like" names DeepSpeed, which runs no TP beside it):
                # the era rule's stack, then its stand-ins, as for a row whose text names nothing; each on the row as
                # read, and where it refuses what only the text said, without that (noted), as for the first stack
                era, era_why = stacks.era_rule(text, base_model, hw, read_fields.get("dtype"))
                era_tries = [(s, f"{reason}; {era_why}" + ("" if s.id == era.id else
                                                          f"; {s.id}, the stand-in that runs the row's plan"))
                             for s in (era, *stacks.stand_ins(era)) if s.id != stack.id]
            if "needs kv-heads" in str(first):
                # a measured run that split fewer key/value heads than TP ranks (StarCoder's MQA at TP 4 on BigCode's
                # Megatron-LM fork, arXiv:2305.06161 sec 5) ran on a version that replicates them over the TP ranks,
                # as Megatron-Core does since core_v0.16 (megatron-core.yaml kv_heads_below_tp): the same stack with
                # that rule, said in the reason
                tries += [(kv_replicated(stack), f"{reason}; its key/value heads replicated over the TP ranks (as "
                                                 "the run's own version must have: upstream splits them)")]
            if not tries and not era_tries:
                raise
            for alt, why in tries:
                try:
                    spec = priced(alt, f"{why} ({stack.id} cannot run the row: {first})")
                except InputError:
                    continue
                stack, reason = alt, spec.stack_reason
                break
            else:
                for alt, why in era_tries:
                    plan_fields.clear()
                    plan_fields.update(read_fields)
                    try:
                        spec, said = priced_or_without_text(alt, f"{why} ({stack.id} cannot run the row: {first})")
                    except InputError:
                        continue
                    note = "; ".join(x for x in (note, said) if x)
                    stack, reason = alt, spec.stack_reason
                    break
                else:
                    raise first from None
    except InputError as exc:
        raise Skip(str(exc)) from None
    if layout_notes:            # the completed layout, then its interleave (or ep, then interleave)
        note = "; ".join(x for x in (note, *layout_notes) if x)
    if hsdp_notes:
        note = "; ".join(x for x in (note, hsdp_notes[-1]) if x)
    if rc_notes:
        note = "; ".join(x for x in (note, rc_notes[-1]) if x)
    if row.get(HEADER_GUESS):
        note = "; ".join(x for x in (note, row[HEADER_GUESS]) if x)
    if row.get(GPU_FROM_TEXT):
        note = "; ".join(x for x in (note, f"gpu_id blank: {row['gpu_id']} from the gpu column {row[GPU_FROM_TEXT]!r}")
                         if x)
    if row.get(GPU_BARE):
        note = "; ".join(x for x in (note, f"{row[GPU_BARE]} (hardware.bare_part)") if x)
    if row.get(GPUS_TEXT_NOTE):
        note = "; ".join(x for x in (note, row[GPUS_TEXT_NOTE]) if x)
    if row.get(NODES_NOTE):
        note = "; ".join(x for x in (note, row[NODES_NOTE]) if x)
    if row.get(GPU_ID_SPELLED):
        note = "; ".join(x for x in (note, f"gpu_id {row[GPU_ID_SPELLED]!r} is no profile id: read as {row['gpu_id']} "
                                           "(hardware.from_text)") if x)
    if schedule_note and spec.plan.schedule != "dualpipe":
        note = "; ".join(x for x in (note, schedule_note) if x)
    if from_rate:
        basis = "" if row.get("flops_per_iter") else flop_basis(row.get("flop_basis"))
        origin = "flop_basis"
        if logged:
            try:
                basis, origin = logged_basis(spec, " ".join(str(row.get(k) or "") for k in ("framework", "source",
                                                                                            "notes", "settings")))
            except Skip:
                if mfu_only:
                    row = {**row, "measured_tflops_per_gpu": None}      # the MFU gives the time (below)
                elif not row.get("measured_peak_memory_gib"):
                    raise
                else:
                    from_rate = False               # a memory row whose TFLOP/s gives no time: memory only
        if mfu_only and not basis and from_rate:
            row = {**row, "flops_per_iter": mfu_flops(spec)}
            note = "; ".join(x for x in (note, f"flops_per_iter {row['flops_per_iter']:.4g}: {MFU_FLOPS}") if x)
        if basis in ("MEGFULL", "MEGCAUSAL") and from_rate:
            # the model's own counts: Megatron-LM's (whole attention, padded vocabulary) or the causal-halved one
            row = {**row, "flops_per_iter": mfu_flops(spec, "flops_megatron" if basis == "MEGFULL" else "flops")}
            note = "; ".join(x for x in (note, f"flops_per_iter {row['flops_per_iter']:.4g} from {origin}: "
                                               f"{BASES[basis]}") if x)
        elif basis and from_rate:
            m = spec.model
            row = {**row, "flops_per_iter": basis_flops(basis, spec.plan.global_batch, m.seq_len, m.n_layers, m.d_model,
                                                        m.vocab)}
            note = "; ".join(x for x in (note, f"flops_per_iter {row['flops_per_iter']:.4g} from {origin} "
                                               f"{basis} ({BASES[basis]})") if x)
    if from_rate:
        measured, said = time_from_rate(row, spec.model.seq_len, spec.plan.global_batch, spec.plan.n_gpus,
                                        spec.hardware.peak_flops.get("bf16") or spec.hardware.peak_flops.get("fp16"))
        note = "; ".join(x for x in (note, said) if x)
    return Case(row, spec.model, spec.plan, spec.hardware, spec.stack.id, float(measured), spec, reason, note)


# The FLOP counts sources quote TFLOP/s and MFU against (flop_basis column, shared/validation/README.md): a row with a
# rate, a basis and no flops_per_iter gets the count the basis names, on the row's shape, so its rate gives its time.
BASES = {"HFU96": "Narayanan et al. 2021 eq. 3, with the recomputed forward: 96 B s l h^2 (1 + s/(6h) + V/(16 l h))",
         "MFU72": "Korthikanti et al. 2022 sec 6 / Megatron model FLOPs, no recomputation: "
                  "72 B s l h^2 (1 + s/(6h) + V/(12 l h))",
         # (no flop_basis spelling reads as it: a stack's logged count only, logged_basis)
         "LOG72": "Narayanan et al. 2021 eq. 3 with 3 passes (no recomputation), as Megatron-DeepSpeed logs it: "
                  "72 B s l h^2 (1 + s/(6h) + V/(16 l h))",
         "MEGFULL": "Megatron-LM's num_floating_point_operations until core_v0.11.0: the row's model FLOPs with whole "
                    "s x s attention and the padded vocabulary (the flops_megatron output)",
         "MEGCAUSAL": "Megatron-LM's num_floating_point_operations from core_v0.12.0: causal attention counted half "
                      "(the flops output)"}


NO_MEASUREMENT = ("no measured or derived iteration time, no rate to derive one from (flops_per_iter, or a flop_basis "
                  "HFU96 / MFU72, with measured_tflops_per_gpu or measured_mfu; tokens_per_s; tokens_per_s_per_gpu; "
                  "samples_per_s), and no measured peak memory")


MFU_FLOPS = ("the model FLOPs of an MFU stated with no FLOP count, as PaLM defines MFU (Chowdhery et al. 2022, "
             "arXiv:2204.02311, appendix B: 6 N + 12 L H Q T per token, N the parameters a token passes, the "
             "attention's s x s scores counted whole), on the row's model (its flops_megatron output: padded "
             "vocabulary, active experts); a source that halves causal attention implies a step shorter by about "
             "s / (12 h + 2 s) of a dense model's (Llama 3.1 405B at 8K: 3.8 %)")


def mfu_flops(spec, key: str = "flops_megatron") -> float:
    """Model FLOPs per step of a row: by default as Megatron-LM counts them (whole s x s attention, padded
    vocabulary), the count of a row that states MFU and no FLOP count (MFU_FLOPS); ``key`` 'flops' for the count with
    causal attention halved."""
    from ..model.predict import evaluator, inputs

    return float(evaluator((key,))(inputs(spec.model, spec.plan, spec.hardware))[key])


MEGATRON_HALVED = (2025, 5)      # core_v0.12.0, the first release counting causal attention half (stack source)
MEGATRON_FULL_UNTIL = (2025, 3)  # core_v0.11.0, the last release counting it whole


def _megatron_basis(spec, text: str) -> tuple[str, str]:
    """(BASES key, origin) of a TFLOP/s figure Megatron-LM logged (stack rule tflops_basis 'megatron'): its
    num_floating_point_operations count, full s x s attention until core_v0.11.0, causal attention halved from
    core_v0.12.0, by the run's date (a Megatron-Core release it names, else the earliest date of its text). A NeMo or
    Megatron-Bridge run, which logs its own count, or one dated between the two releases: Skip."""
    from ..spec import stacks
    t = (text or "").lower()
    if re.search(r"\bnemo\b|bridge", t):
        raise Skip(f"{NO_MEASUREMENT}; NeMo and Megatron-Bridge log TFLOP/s with their own flops formulas, not "
                   "Megatron-LM's count, so the figure needs the row's flop_basis or flops_per_iter")
    tagged = stacks.megatron_release(t)
    y, m = tagged if tagged else stacks.earliest_date(t)
    # a year alone dates a run only outside the year of the change (its January before it, its December after)
    when = None
    if y and m:
        when = (y, m)
    elif y and y != MEGATRON_HALVED[0]:
        when = (y, 1 if y < MEGATRON_HALVED[0] else 12)
    if when and when <= MEGATRON_FULL_UNTIL:
        return "MEGFULL", f"Megatron-LM's logged count of {y} ({spec.stack.id} rule tflops_basis)"
    if when and when >= MEGATRON_HALVED:
        return "MEGCAUSAL", f"Megatron-LM's logged count of {y} ({spec.stack.id} rule tflops_basis)"
    raise Skip(f"{NO_MEASUREMENT}; Megatron-LM's logged TFLOP/s count whole attention until core_v0.11.0 (2025-03) "
               "and half of causal attention from core_v0.12.0 (2025-05): a run not dated outside that span needs "
               "the row's flop_basis or flops_per_iter")


MAXTEXT_HALVED = (2025, 8)       # the first month whose MaxText counts causal attention half (a4c01726, 2025-07-18)


def _maxtext_basis(spec, text: str) -> tuple[str, str]:
    """(BASES key, origin) of a TFLOP/s figure MaxText logged (stack rule tflops_basis 'maxtext'): the dense model's
    FLOPs with whole s x s attention before 2025-07-18, causal attention halved from then (the stack's source), by the
    earliest date of the row's text; a run of July 2025, an undated one, or an MoE / MLA model (other branches of
    MaxText's count): Skip."""
    from ..spec import stacks
    m = spec.model
    if m.n_experts > 1 or m.kv_lora_rank:
        raise Skip(f"{NO_MEASUREMENT}; MaxText counts MoE and MLA layers with branches of its own not read here, so "
                   "the figure needs the row's flop_basis or flops_per_iter")
    y, mo = stacks.earliest_date(text)
    # a year alone dates a run only outside the year of the change (its January before it, its December after)
    when = (y, mo) if y and mo else (y, 1) if y and y < MAXTEXT_HALVED[0] else (y, 12) if y and y > MAXTEXT_HALVED[0] \
        else None
    if when and when < (2025, 7):
        return "MEGFULL", f"MaxText's logged count of {y}: whole s x s attention (maxtext stack rule tflops_basis)"
    if when and when >= MAXTEXT_HALVED:
        return "MEGCAUSAL", f"MaxText's logged count of {y}: causal attention half (maxtext stack rule tflops_basis)"
    raise Skip(f"{NO_MEASUREMENT}; MaxText's logged TFLOP/s count whole attention before 2025-07-18 and half of "
               "causal attention after: a run not dated outside July 2025 needs the row's flop_basis or flops_per_iter")


def logged_basis(spec, text: str = "") -> tuple[str, str]:
    """(BASES key, origin) of a row that states TFLOP/s per GPU and no FLOP count: the count its stack's TFLOP/s
    figures are quoted with, its training log's or, where it logs none, its reference paper's (stack rule
    ``tflops_basis``: Megatron-DeepSpeed's log, Narayanan et al. 2021 for Megatron-LM 2.x). ``eq3``: Narayanan et al. 2021 eq. 3 with 4 passes under
    full recomputation (HFU96), 3 without (LOG72) (Megatron-DeepSpeed megatron/utils.py throughput_calculator:
    checkpoint_activations_factor),
    for the GPT shape that formula assumes (multi-head attention, a dense non-gated MLP of 4 d_model); other shapes
    and stacks: Skip, as without a basis."""
    rule = spec.stack.rule("tflops_basis")
    m, p = spec.model, spec.plan
    if rule == "megatron":
        return _megatron_basis(spec, text)
    if rule == "maxtext":
        return _maxtext_basis(spec, text)
    if rule != "eq3":
        raise Skip(f"{NO_MEASUREMENT}; the FLOP count {spec.stack.id}'s TFLOP/s figures are quoted with is not known "
                   "here (stack rule tflops_basis), so the figure needs the row's flop_basis or flops_per_iter")
    gpt = (m.n_kv_heads in (None, m.n_heads) and m.mlp == "gelu" and m.n_experts == 1
           and (m.ffn_hidden or 4 * m.d_model) == 4 * m.d_model)
    if not gpt:
        raise Skip(f"{NO_MEASUREMENT}; {spec.stack.id} quotes TFLOP/s with Narayanan et al.'s eq. 3, which assumes "
                   "multi-head attention and a dense non-gated MLP of 4 d_model: this model's count differs, so the "
                   "figure needs the row's flop_basis or flops_per_iter")
    if p.recompute == "selective":
        raise Skip(f"{NO_MEASUREMENT}; under selective recomputation {spec.stack.id}'s count changed with its "
                   "releases (the recomputation factor 4 until 2024-08, the attention's batched GEMMs after): the "
                   "figure needs the row's flop_basis or flops_per_iter")
    basis = "HFU96" if p.recompute == "full" else "LOG72"
    return basis, (f"the count {spec.stack.id}'s TFLOP/s figures are quoted with (stack rule tflops_basis, "
                   f"recompute {p.recompute})")


def flop_basis(text) -> str:
    """The BASES key a flop_basis cell names, or '' (blank, or a basis not read here: then flops_per_iter is needed).

    >>> flop_basis("HFU96 (Narayanan eq.3, includes full-recompute fwd)"), flop_basis("MFU72"), flop_basis("6ND")
    ('HFU96', 'MFU72', '')
    """
    t = str(text or "").lower()
    if re.search(r"\b(?:hfu)?96\b|narayanan", t):
        return "HFU96"
    if re.search(r"\b(?:mfu)?72\b|korthikanti|megatron model flops", t):
        return "MFU72"
    return ""


def basis_flops(basis: str, global_batch, seq_len, n_layers, d_model, vocab) -> float:
    """FLOPs per iteration under ``basis`` (BASES).

    >>> round(basis_flops("MFU72", 4, 2048, 48, 6144, 51200) / 1e15, 4)      # Korthikanti Table 5's 22B row
    1.1436
    """
    b, s, l, h, v = global_batch, seq_len, n_layers, d_model, vocab
    if basis == "HFU96":
        return 96 * b * s * l * h ** 2 * (1 + s / (6 * h) + v / (16 * l * h))
    if basis == "LOG72":
        return 72 * b * s * l * h ** 2 * (1 + s / (6 * h) + v / (16 * l * h))
    return 72 * b * s * l * h ** 2 * (1 + s / (6 * h) + v / (12 * l * h))


def time_from_rate(row: dict, seq_len: int, global_batch: int, n_gpus: int, peak=None) -> tuple[float, str]:
    """(iteration time, note) of a row that states a rate and no time (shared/validation/README.md, 'Comparing': t =
    F / (n_gpus x X) with F the source's own FLOP count): flops_per_iter / (n_gpus x measured_tflops_per_gpu), or
    with X = measured_mfu x ``peak`` (FLOP/s: the GPU's dense 16-bit peak, the denominator sources quote MFU against:
    312 on A100, 989 on H100 SXM), else global_batch x seq_len / tokens_per_s (all GPUs), else
    / (tokens_per_s_per_gpu x n_gpus), else global_batch / samples_per_s (sequences per second, all GPUs: Colossal-AI's
    and DeepSpeed's benchmark logs).

    >>> time_from_rate({"tokens_per_s_per_gpu": 2000.0}, 4096, 512, 8)
    (131.072, 'iteration time = global_batch x seq_len / (tokens_per_s_per_gpu x n_gpus) = 131.1 s')
    """
    if row.get("flops_per_iter") and row.get("measured_tflops_per_gpu"):
        t = row["flops_per_iter"] / (n_gpus * row["measured_tflops_per_gpu"] * 1e12)
        how = "flops_per_iter / (n_gpus x measured_tflops_per_gpu), the source's own FLOP count"
    elif row.get("flops_per_iter") and row.get("measured_mfu") and peak:
        t = row["flops_per_iter"] / (n_gpus * row["measured_mfu"] * peak)
        how = f"flops_per_iter / (n_gpus x measured_mfu x the dense 16-bit peak {peak / 1e12:.0f} TFLOP/s)"
    elif row.get("tokens_per_s"):
        t, how = global_batch * seq_len / row["tokens_per_s"], "global_batch x seq_len / tokens_per_s"
    elif row.get("tokens_per_s_per_gpu"):
        t = global_batch * seq_len / (row["tokens_per_s_per_gpu"] * n_gpus)
        how = "global_batch x seq_len / (tokens_per_s_per_gpu x n_gpus)"
    else:
        t, how = global_batch / row["samples_per_s"], "global_batch / samples_per_s"
    return t, f"iteration time = {how} = {t:.4g} s"


# ---- evaluation ----------------------------------------------------------------------------------
def evaluate_cases(cases: list[Case]) -> dict:
    """All formula outputs for all cases in one vectorized call (arrays indexed like ``cases``)."""
    from ..model.predict import evaluate, inputs

    xs = [inputs(c.model, c.plan, c.hw) for c in cases]
    if not xs:
        return {}
    stacked = {k: np.array([x[k] for x in xs], dtype=float) for k in xs[0]}
    return {k: np.broadcast_to(v, (len(cases),)) for k, v in evaluate(stacked).items()}


def stats(errors) -> dict:
    e = np.asarray(errors, dtype=float)
    if not len(e):
        return {"n": 0}
    a = np.abs(e)
    return {"n": int(len(e)), "mape": float(a.mean()), "median_abs_error": float(np.median(a)),
            "max_abs_error": float(a.max()), "mean_error": float(e.mean())}


def group_key(case: Case, by: str) -> str:
    p = case.plan
    if by in PARALLEL_BY:
        return str(getattr(p, by))
    return {"tier": lambda: case.row.get("tier") or "?",
            "gpu": lambda: case.row["gpu_id"],
            "layout": lambda: f"tp{p.tp}-pp{p.pp}-dp{p.dp}" + (f"-cp{p.cp}" if p.cp > 1 else ""),
            "micro_batch": lambda: str(p.micro_batch),
            "nodes": lambda: "single-node" if case.single_node else "multi-node",
            "source": lambda: (re.split(r"[(,;\[]", case.row.get("source") or "")[0].strip() or "?")[:48],
            "framework": lambda: case.framework,
            "model": lambda: case.row.get("model") or case.model.name,
            # the recipe priced (the plan's dtype), however the row spells it ("BF16", "none (bfloat16)", "Float8")
            "precision": lambda: case.plan.dtype,
            # dense or MoE (routed experts): the grouping of the step time's band (uncertainty.arch)
            "arch": lambda: "MoE" if (case.model.n_experts or 1) > 1 else "dense",
            # the plan's CUDA graphs (validate.cuda_graphs), a partial scope labelled with its modules (graph_scope)
            "graphs": lambda: GRAPHS[p.cuda_graphs] + (f" ({p.graph_modules})" if p.graph_modules else "")}[by]()


@dataclass(frozen=True, eq=False)
class Validation(MappingResult):
    """What ``validate`` found: per-case predictions against measurements, the error statistics overall and
    per group, and the rows it skipped. Errors are signed fractions (predicted / measured - 1); times in s,
    memory in bytes. Reads like the dict it was (``r["by_gpu"]``, ``r["cases"][0]["error"]``); ``--json``
    prints ``to_dict()``: those keys (``by_<key>`` for each breakdown, ``memory`` and ``ranking`` when there)
    and ``units``."""
    UNITS = {"cases.measured_s": "s", "cases.predicted_s": "s", "cases.breakdown_s": "s",
             "cases.predicted_memory_bytes": "B", "cases.measured_memory_bytes": "B"}
    cases: tuple                    # read-only mappings, one per predicted row
    mape: float | None
    median_abs_error: float | None
    max_abs_error: float | None
    by: object                      # {breakdown (tier, gpu, ...): {group: stats}}
    memory: object                  # stats of the peak-memory errors, or None when no row has a measured peak
    skipped: tuple                  # {case_id, reason}
    ranking: object = None          # :func:`ranking` when asked for

    def items_by_key(self) -> dict:
        out = {"cases": self.cases, "mape": self.mape, "median_abs_error": self.median_abs_error,
               "max_abs_error": self.max_abs_error, **{f"by_{b}": v for b, v in self.by.items()}}
        if self.memory is not None:
            out["memory"] = self.memory
        out["skipped"] = self.skipped
        if self.ranking is not None:
            out["ranking"] = self.ranking
        return out


def validate(rows: list[dict], tiers=None, by=()) -> Validation:
    """Predict every row; ``to_dict()`` of the result is what ``--json`` prints (errors are fractions, not %).
    Groups: every key of BY, and any composite of them in ``by`` ("tp+micro_batch": one group per combination of
    values, labelled "tp=2 micro_batch=1")."""
    from ..base import progress
    from ..model.predict import overshoot

    cases, skipped = [], []
    for row in progress.track(rows, "predict validation rows", unit="row"):
        if tiers and (row.get("tier") or "") not in tiers:
            continue
        try:
            cases.append(build_case(row))
        except Skip as exc:
            skipped.append({"case_id": row["case_id"], "reason": str(exc)})
    out = evaluate_cases(cases)
    pred = out.get("step_time", np.zeros(0))
    err = pred / np.array([c.measured for c in cases]) - 1 if cases else np.zeros(0)
    timed = np.isfinite(err)                     # memory-only rows carry no time error
    need = overshoot(out["memory"], out["mem_reserve"], [c.hw for c in cases]) if cases else np.zeros(0)
    result = {"cases": [], **{k: stats(err[timed]).get(k) for k in ("mape", "median_abs_error", "max_abs_error")}}
    for i, c in enumerate(cases):
        p = c.plan
        result["cases"].append({
            "case_id": c.row["case_id"], "measured_s": c.measured if timed[i] else None, "predicted_s": float(pred[i]),
            "error": float(err[i]) if timed[i] else None, "gpu_id": c.row["gpu_id"], "tier": c.row.get("tier") or "",
            "framework": c.framework, "stack_reason": c.stack_reason, "note": c.note, "single_node": c.single_node,
            "plan": {"tp": p.tp, "pp": p.pp, "dp": p.dp, "cp": p.cp, "v": p.interleave, "mb": p.micro_batch,
                     "gb": p.batch, "sp": p.sequence_parallel, "recompute": p.recompute, "sharding": p.sharding,
                     "optimizer": p.optimizer},
            "breakdown_s": {k[2:]: float(out[k][i]) for k in out if k.startswith("t_") and k != "t_microbatch_stage"},
            "predicted_memory_bytes": float(out["memory"][i]),
        })
        over = float(need[i])
        if over > MEMORY_ERROR_MAX:       # noted once: the unstated-recompute rule may have said it already
            said = "more memory than the GPU" in c.note
            result["cases"][-1].update(over_memory=over, note=c.note if said else "; ".join(
                x for x in (c.note, over_memory_note(over, c.hw.hbm_capacity)) if x))
        if c.row.get("measured_peak_memory_gib"):
            mm = c.row["measured_peak_memory_gib"] * GiB
            measure = memory_measure(c.row)
            compared = float(out["memory"][i]) + (measure == "reserved") * float(out["mem_fragmentation"][i])
            result["cases"][-1].update(measured_memory_bytes=mm, memory_measure=measure,
                                       compared_memory_bytes=compared, memory_error=compared / mm - 1)
    by_key = {}
    for key in dict.fromkeys((*BY, *by)):
        groups: dict[str, list] = {}
        for i, c in enumerate(cases):
            if timed[i]:
                label = group_key(c, key) if "+" not in key else \
                    " ".join(f"{b}={group_key(c, b)}" for b in key.split("+"))
                groups.setdefault(label, []).append(err[i])
        by_key[key] = {k: stats(v) for k, v in sorted(groups.items(), key=lambda kv: _natural(kv[0]))}
    mem = [c["memory_error"] for c in result["cases"] if "memory_error" in c]
    # peak memory per GPU (the heavier pipeline stage) against measured peaks, where a row has one
    return Validation(cases=freeze(result["cases"]), mape=result["mape"], median_abs_error=result["median_abs_error"],
                      max_abs_error=result["max_abs_error"], by=freeze(by_key), memory=freeze(stats(mem)) if mem else None,
                      skipped=freeze(skipped))


RANK_KEY = ("gpu_id", "n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_hidden", "vocab", "seq_len", "global_batch",
            "n_gpus")


RANKING_WORST = 5     # groups of largest regret listed under the ranking line (not with --summary)


def ranking(rows: list[dict], result: Validation) -> dict:
    """How well predictions order plans: rows that differ only in the plan (same model, GPU, batch and GPU
    count) form a group; per group the regret (measured time of the plan predicted fastest / the measured
    fastest - 1) and Kendall's tau between predicted and measured times. Groups need >= 3 predicted rows."""
    from scipy.stats import kendalltau

    by_id = {r["case_id"]: r for r in rows}
    groups: dict = {}
    for c in result["cases"]:
        if c["error"] is None:
            continue
        r = by_id[c["case_id"]]
        n = r.get("n_gpus") or c["plan"]["tp"] * c["plan"]["pp"] * c["plan"]["dp"] * c["plan"]["cp"]
        key = tuple(r.get(k) for k in RANK_KEY[:-1]) + (n,)
        groups.setdefault(key, []).append(c)
    out = []
    for key, cs in groups.items():
        if len(cs) < 3:
            continue
        meas = np.array([c["measured_s"] for c in cs])
        pred = np.array([c["predicted_s"] for c in cs])
        regret = float(meas[int(np.argmin(pred))] / meas.min() - 1)
        tau = kendalltau(pred, meas).statistic
        pb, mb = cs[int(np.argmin(pred))], cs[int(np.argmin(meas))]
        out.append({"group": dict(zip(RANK_KEY, key)), "n": len(cs), "regret": regret,
                    "tau": None if tau != tau else float(tau),
                    "predicted_best": pb["case_id"], "measured_best": mb["case_id"],
                    "model": by_id[pb["case_id"]].get("model") or "",
                    "best": {"predicted": _ranked(pb), "measured": _ranked(mb)}})
    if not out:
        return {"groups": 0}
    reg = np.array([g["regret"] for g in out])
    taus = np.array([g["tau"] for g in out if g["tau"] is not None])
    return {"groups": len(out), "mean_regret": float(reg.mean()), "max_regret": float(reg.max()),
            "groups_above_5pct": int((reg > 0.05).sum()), "groups_above_10pct": int((reg > 0.10).sum()),
            "tau_median": float(np.median(taus)) if len(taus) else None, "by_group": out}


def _layout_text(p: dict) -> str:
    """A case's plan as the case table's tp/pp/dp/cp/v/mb column writes it."""
    return f"{p['tp']}/{p['pp']}/{p['dp']}/{p['cp']}/{p['v']}/{p['mb']}"


def _ranked(c: dict) -> dict:
    """A ranked row in brief: its plan (layout/micro-batch as the case table writes it) and both times."""
    return {"case_id": c["case_id"], "plan": _layout_text(c["plan"]),
            "measured_s": c["measured_s"], "predicted_s": c["predicted_s"]}


def render_ranking(r: dict, worst: int = 0) -> str:
    """The summary line; with ``worst`` > 0, also the groups of largest regret, each with the plan predicted
    fastest and the plan measured fastest (tp/pp/dp/cp/v/mb, measured and predicted step time)."""
    if not r.get("groups"):
        return "ranking: no group of >= 3 rows that differ only in the plan"
    line = (f"ranking over {r['groups']} groups of rows that differ only in the plan: mean regret "
            f"{100 * r['mean_regret']:.1f} %, worst {100 * r['max_regret']:.1f} %, {r['groups_above_5pct']} groups above "
            f"5 % ({r['groups_above_10pct']} above 10 %), Kendall tau median {r['tau_median']:.2f}")
    bad = sorted((g for g in r["by_group"] if g["regret"] > 0), key=lambda g: -g["regret"])[:worst]
    if not bad:
        return line
    rows = [line, f"worst {len(bad)} groups (plans as tp/pp/dp/cp/v/mb; times measured / predicted):"]
    for g in bad:
        grp = g["group"]
        what = g.get("model") or f"L{grp.get('n_layers')} h{grp.get('d_model')}"
        tau = "n/a" if g["tau"] is None else f"{g['tau']:.2f}"
        pb, mb = g["best"]["predicted"], g["best"]["measured"]
        rows.append(f"  regret {100 * g['regret']:5.1f} %  tau {tau:>5}  {what}, {grp.get('n_gpus')} GPUs, batch "
                    f"{grp.get('global_batch')} ({g['n']} plans): predicted fastest {pb['plan']} "
                    f"({_fmt_s(pb['measured_s'])} / {_fmt_s(pb['predicted_s'])} s), measured fastest {mb['plan']} "
                    f"({_fmt_s(mb['measured_s'])} / {_fmt_s(mb['predicted_s'])} s)")
    return "\n".join(rows)


def layout_errors(result: Validation) -> dict[str, float]:
    """Signed error per ``tp-pp-dp/mb`` group of a ``validate`` result (mean over its rows)."""
    groups: dict[str, list] = {}
    for c in result["cases"]:
        p = c["plan"]
        if c["error"] is not None:
            groups.setdefault(f"tp{p['tp']}-pp{p['pp']}-dp{p['dp']}/mb{p['mb']}", []).append(c["error"])
    return {k: float(np.mean(v)) for k, v in sorted(groups.items(), key=lambda kv: _natural(kv[0]))}


def _natural(s: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


# ---- Korthikanti et al. 2022, Table 4: one layer of the 22B model at TP=8 ------------------------
# forward / backward ms measured on a DGX A100 node (arXiv:2205.05198 Table 4)
TABLE4 = {"baseline": (7.7, 11.9), "sequence parallel": (7.2, 11.8), "full recompute": (7.7, 19.5),
          "selective recompute": (7.7, 13.2), "selective + sequence parallel": (7.2, 13.1)}
TABLE4_PLANS = {"baseline": (False, "none"), "sequence parallel": (True, "none"), "full recompute": (False, "full"),
                "selective recompute": (False, "selective"), "selective + sequence parallel": (True, "selective")}


def korthikanti_table4(gpu: str = "a100-sxm4-80gb") -> list[dict]:
    """Per-layer forward/backward time of the 22B GPT (h 6144, 64 heads, s 2048, micro-batch 4, TP 8).

    Assumptions: the Table 3/5 setting of the 22B model (micro-batch 4, one DGX A100 node, fp16,
    Megatron-LM 2021 kernels: unfused attention, dropout); one layer = the model's per-layer terms of one
    micro-batch (``t_layer_*``: embedding, LM head and optimizer are not in them). Forward = layer forward +
    the forward part of its exposed TP communication; backward = layer backward + recompute + the backward
    (and recompute-forward) part (``t_layer_comm_bwd``), as the paper times them.
    """
    from ..spec import hardware
    from ..spec.config import Model
    from ..model.predict import evaluate, inputs
    from ..spec.resolve import resolve

    hw = hardware.load(gpu)
    rows = []
    for name, (sp, rc) in TABLE4_PLANS.items():
        s = resolve(Model(n_layers=1, d_model=6144, n_heads=64, vocab=51200, seq_len=2048),
                    {"tp": 8, "micro_batch": 4, "global_batch": 4, "sequence_parallel": sp, "recompute": rc},
                    hw, "megatron-lm@2022")
        r = {k: float(v) for k, v in evaluate(inputs(s.model, s.plan, s.hardware)).items()}
        tp_bwd = r["t_layer_comm_bwd"]                 # no CP or EP here: all of it is TP
        fwd = r["t_layer_fwd"] + r["t_layer_tp_comm"] - tp_bwd
        bwd = r["t_layer_bwd"] + r["t_layer_recompute"] + tp_bwd
        mf, mb = TABLE4[name]
        rows.append({"config": name, "measured_fwd_ms": mf, "measured_bwd_ms": mb, "measured_total_ms": mf + mb,
                     "predicted_fwd_ms": 1e3 * fwd, "predicted_bwd_ms": 1e3 * bwd,
                     "predicted_total_ms": 1e3 * (fwd + bwd),
                     "tp_comm_ms": 1e3 * r["t_layer_tp_comm"], "recompute_ms": 1e3 * r["t_layer_recompute"],
                     "error": (fwd + bwd) / ((mf + mb) / 1e3) - 1})
    return rows


TABLE4_COLUMNS = (report.Col("config", 31, "<"), report.Col("fwd meas", 9, fmt=".1f"), report.Col("pred", 8, fmt=".1f"),
                  report.Col("bwd meas", 10, fmt=".1f"), report.Col("pred", 8, fmt=".1f"),
                  report.Col("total meas", 12, fmt=".1f"), report.Col("pred", 8, fmt=".1f"),
                  report.Col("err %", 8, fmt="+.1f"))


def render_table4(rows: list[dict]) -> str:
    return ("Korthikanti et al. 2022 Table 4: one layer of the 22B model, TP=8, micro-batch 4 (ms)\n"
            + report.table(TABLE4_COLUMNS, [(r["config"], r["measured_fwd_ms"], r["predicted_fwd_ms"], r["measured_bwd_ms"],
                                             r["predicted_bwd_ms"], r["measured_total_ms"], r["predicted_total_ms"],
                                             100 * r["error"]) for r in rows]))


# ---- output --------------------------------------------------------------------------------------
def _fmt_s(s: float) -> str:
    return f"{s:.3f}" if s >= 1 else f"{s:.4f}"


CASE_COLUMNS = (report.Col("case", 36, "<"), report.Col("gpu_id", 16, "<"), report.Col("tp/pp/dp/cp/v/mb", 20, "<"),
                report.Col("measured s", 11, fmt=_fmt_s), report.Col("predicted s", 12, fmt=_fmt_s),
                report.Col("error %", 9, fmt="+.1f"), report.Col("", 0))       # the last: a memory-only row's memory


def _summary_line(name: str, s: dict) -> str:
    if not s.get("n"):
        return f"  {name:<24} n=0"
    return (f"  {name:<24} n={s['n']:<5} MAPE {100 * s['mape']:5.1f} %  median {100 * s['median_abs_error']:5.1f} %"
            f"  max {100 * s['max_abs_error']:5.1f} %  mean signed {100 * s['mean_error']:+6.1f} %")


OVER_LISTED = 10      # rows listed by name under the summary whose plan as read does not fit (render)


def render(result: Validation, by=("tier", "gpu", "nodes"), table: bool = True) -> str:
    lines = []
    if table:
        rows = []
        for c in result["cases"]:
            p = c["plan"]
            row = (c["case_id"], c["gpu_id"], _layout_text(p))
            if c["error"] is None:           # memory-only row
                rows.append(row + ("-", c["predicted_s"], "", f"  memory {c['predicted_memory_bytes'] / GiB:.1f} GiB vs "
                                                              f"{c['measured_memory_bytes'] / GiB:.1f}"))
            else:
                rows.append(row + (c["measured_s"], c["predicted_s"], 100 * c["error"]))
        lines += [report.table(CASE_COLUMNS, rows), ""]
    errs = [c["error"] for c in result["cases"] if c["error"] is not None]
    n = len(errs)
    lines.append(_summary_line("all", {"n": n, **{k: result[k] for k in ("mape", "median_abs_error", "max_abs_error")},
                                       "mean_error": float(np.mean(errs)) if n else 0}))
    for b in by:
        lines.append(f" by {b}:")
        lines += [_summary_line(k, s) for k, s in result[f"by_{b}"].items()]
    if result.get("memory"):
        lines.append(_summary_line("peak memory per GPU", result["memory"]))
    over = [c for c in result["cases"] if c.get("over_memory")]
    if over:
        lines.append(f" {len(over)} row{'s' if len(over) > 1 else ''} whose plan, as read, needs more memory than the "
                     f"GPU by over {100 * MEMORY_ERROR_MAX:.0f} % (a memory saving the row leaves out, a misread batch, "
                     "or one the memory model misses; priced as read):")
        lines += [f"  {c['case_id']}: +{100 * c['over_memory']:.0f} %" for c in over[:OVER_LISTED]]
        if len(over) > OVER_LISTED:
            lines.append(f"  ... and {len(over) - OVER_LISTED} more (--json: each case's over_memory and note)")
    if result["skipped"]:
        lines.append(f" skipped {len(result['skipped'])}:")
        lines += [f"  {s['case_id']}: {s['reason']}" for s in result["skipped"]]
    return "\n".join(lines)


def plot(result: Validation, path: str) -> None:
    from . import plotting
    plt = plotting.pyplot("--plot")
    fig, ax = plt.subplots(figsize=(6, 6))
    markers = "osD^vP*X"
    gpus = sorted({c["gpu_id"] for c in result["cases"]})
    for i, g in enumerate(gpus):
        cs = [c for c in result["cases"] if c["gpu_id"] == g and c["error"] is not None]
        ax.scatter([c["measured_s"] for c in cs], [c["predicted_s"] for c in cs], marker=markers[i % len(markers)],
                   s=18, alpha=0.7, label=f"{g} ({len(cs)})")
    vals = [v for c in result["cases"] if c["error"] is not None for v in (c["measured_s"], c["predicted_s"])] or [1e-2, 1e2]
    lo, hi = min(vals) / 1.5, max(vals) * 1.5
    xs = np.array([lo, hi])
    ax.plot(xs, xs, "k-", lw=1, label="y = x")
    for f in (0.9, 1.1):
        ax.plot(xs, f * xs, "k--", lw=0.7)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured step time (s)",
           ylabel="predicted step time (s)", title=f"roofline vs measured, MAPE {100 * (result['mape'] or 0):.1f} %")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    plotting.save(fig, path, "--plot")


def per_rank(path, hardware=None) -> dict:
    """A per-rank memory file against each pipeline stage's prediction (views/memory_ranks.py), its rows read from
    the companion file (memory_measured.csv beside it, else the bundled one) and priced as ``validate`` prices them."""
    from . import memory_ranks

    def price(row):
        try:
            return build_case(row, hardware)
        except Skip as exc:
            raise ValueError(str(exc)) from None
    return memory_ranks.compare(path, memory_ranks.companion(path, dataset_path("memory")), read, price,
                                evaluate_cases)


def cmd_validate(args) -> int:
    if args.korthikanti_table4:
        rows = korthikanti_table4()
        print(json.dumps(rows, indent=1) if args.json else render_table4(rows))
        if not args.file:
            return 0
    if args.dataset:
        if args.file:
            raise InputError("give a CSV file or --dataset, not both")
        args.file = str(dataset_path(args.dataset))
    if not args.file:
        raise InputError("validate needs a CSV file, --dataset NAME or --korthikanti-table4")
    tiers = {t.strip().upper() for t in args.tier.split(",")} if args.tier else None
    by = [b.strip() for b in args.by.split(",")] if args.by else ["tier", "gpu", "nodes"]
    bad = [b for b in by if not b or any(part not in BY for part in b.split("+"))]
    if bad:
        raise InputError(f"--by takes {', '.join(BY)} (or several joined by +, e.g. tp+micro_batch), got {', '.join(bad)}")
    if args.plot:
        from . import plotting
        plotting.check(args.plot, "--plot")
    from . import memory_ranks
    if memory_ranks.is_per_rank(args.file):
        # a per-rank memory file (case_id, rank, max_allocated_gib): each pipeline stage against its prediction
        if args.ranking or args.plot or args.tier:
            raise InputError(f"{args.file} is a per-rank memory file: --ranking, --plot and --tier apply to rows "
                             "of measured steps")
        hw = None
        if args.gpu:
            from ..spec import hardware
            hw = hardware.load(args.gpu)
        r = per_rank(args.file, hw)
        print(json.dumps(r, indent=1) if args.json else memory_ranks.render(r, table=not args.summary))
        return 0
    rows = read(args.file)
    if args.gpu:
        # price every row on this profile (an id or a YAML, e.g. one `calibrate from-runs` wrote); the rows'
        # gpus_per_node and network overrides still apply, as calibrate from-runs prices them
        from ..spec import hardware
        hardware.load(args.gpu)                         # one-line error now, not a skip per row
        rows = [{**r, "gpu_id": args.gpu} for r in rows]
    if args.framework:
        # the stack of every row whose framework column is blank (a user's own runs, a pasted table): as if each row
        # named it; a row that names its own framework keeps it
        from ..spec import stacks
        stacks.get(args.framework)                      # one-line error now, not a stand-in per row
        rows = [r if (r.get("framework") or "").strip() else {**r, "framework": args.framework} for r in rows]
    if tiers and not any((r.get("tier") or "") in tiers for r in rows):
        have = sorted({r.get("tier") or "" for r in rows} - {""})
        raise InputError(f"--tier {args.tier}: no row of {args.file} is in that tier (tiers there: {', '.join(have) or 'none'})")
    result = validate(rows, tiers, by=tuple(b for b in by if "+" in b))
    if args.ranking:
        result = dc_replace(result, ranking=freeze(ranking(rows, result)))
    if args.plot:
        plot(result, args.plot)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(render(result, by, table=not args.summary))
        if args.ranking:
            print(render_ranking(result["ranking"], worst=0 if args.summary else RANKING_WORST))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("validate", help="compare predictions with published measured step times (CSV)")
    p.add_argument("file", nargs="?", help="CSV with the columns of shared/validation/README.md, or Markdown "
                   "pipe tables of them (a README's benchmark table as pasted)")
    p.add_argument("--dataset", choices=(*DATASETS, *OTHER_DATASETS), help="a bundled public validation set (see "
                   "roofline/data/validation/SOURCES.md) instead of a file; memory-ranks: SimuMax's per-rank B200 "
                   "memory, compared per pipeline stage")
    p.add_argument("--json", action="store_true", help="print one JSON object (errors as fractions)")
    p.add_argument("--gpu", help="price every row on this hardware profile (id or YAML) instead of its gpu_id")
    p.add_argument("--framework", metavar="STACK", help="the training stack of every row whose framework column is "
                   "blank (a registry id or alias, NAME@VERSION; python -m roofline frameworks list); rows naming "
                   "their own keep it")
    p.add_argument("--plot", metavar="PNG", help="predicted vs measured, log-log, one marker per gpu_id")
    p.add_argument("--tier", help="only these tiers, e.g. A,B")
    p.add_argument("--by", help=f"summary breakdowns, comma-separated from {', '.join(BY)}; keys joined by + group by "
                   "both (tp+micro_batch) (default tier,gpu,nodes)")
    p.add_argument("--summary", action="store_true", help="summary lines only, no per-case table")
    p.add_argument("--ranking", action="store_true", help="regret and Kendall's tau of the predicted plan order "
                   "within groups of rows that differ only in the plan, and (without --summary) the groups of largest "
                   "regret with the plans predicted and measured fastest")
    p.add_argument("--korthikanti-table4", "--korthikanti_table4", dest="korthikanti_table4", action="store_true",
                   help="per-layer forward/backward of the 22B model at TP=8 vs Korthikanti et al. 2022 Table 4")
    p.set_defaults(func=cmd_validate)
