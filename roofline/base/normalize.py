"""Values as frameworks and papers write them -> the model's names.

``sharding("fsdp (FULL_SHARD = ZeRO-3)") == "fsdp"``, ``recompute("selective: core_attn,mlp") ==
"selective"``, ``precision("bf16 (TE), softmax fp32") == "bf16"``. Parenthesised comments are
ignored; a value that cannot be mapped raises one InputError naming the accepted spellings.

>>> sharding("Megatron distributed optimizer (ZeRO-1: Adam states sharded over DP)")
'distributed'
>>> sharding("SHARD_GRAD_OP"), sharding("HYBRID_SHARD"), sharding("zero-2")
('zero2', 'fsdp', 'zero2')
>>> recompute("none (--recompute-granularity full --recompute-num-layers 0)"), recompute("full AC")
('none', 'full')
>>> precision("FP8-CS"), precision("MXFP8"), precision("bf16 + torch.compile + Float8 linear")
('fp8-cs', 'mxfp8', 'fp8-cs')
>>> flag("n/a (tp=1; --sequence-parallel passed)") is None, flag("yes (torchtitan TP plan)")
(True, True)
>>> sharding("DistOpt"), sharding("ZeRO++"), sharding("3"), sharding("-"), recompute("every layer")
('distributed', 'fsdp', 'fsdp', None, 'full')
>>> precision("mixed precision") is None, precision("fp16 AMP"), flag("SP")
(True, 'fp16', True)
"""
from __future__ import annotations

import re

from .errors import InputError


def _clean(text) -> str:
    """Lower case, parenthesised comments removed, separators unified."""
    t = str(text).strip().lower()
    while True:
        u = re.sub(r"\([^()]*\)", " ", t)
        if u == t:
            break
        t = u
    return re.sub(r"\s+", " ", t.replace("_", "-")).strip()


def _pick(what: str, text, table: list[tuple[str, str]], accepted: str):
    t = _clean(text)
    if not t:
        return None
    for pattern, value in table:
        if re.search(pattern, t):
            return value
    raise InputError(f"{what}: cannot read {str(text)!r}; accepted: {accepted}")


SHARDING = [
    (r"hybrid-shard|hybrid shard|hsdp", "fsdp"),          # shards within a node group, replicates across (FSDP HYBRID_SHARD)
    (r"zero\+\+|zeropp", "fsdp"),                          # ZeRO++: ZeRO-3 with quantized/hierarchical collectives
    (r"shard-grad-op|zero-?2\b|zero stage 2|stage[- ]?2\b", "zero2"),
    (r"full-shard|fsdp|zero-?3\b|zero stage 3|stage[- ]?3\b|fully-shard|megatron-fsdp", "fsdp"),
    (r"distributed|dist-?opt|zero-?1\b|zero stage 1|stage[- ]?1\b", "distributed"),
    (r"^(none|no|no-shard|no sharding|ddp|zero-?0|0|n)$|^none\b|^no-shard\b|^no sharding\b", "none"),
    (r"^1$", "distributed"), (r"^2$", "zero2"), (r"^3$", "fsdp"),     # a bare ZeRO stage number (--zero 0-3)
]
RECOMPUTE = [
    (r"^(none|no|off|n|false|0)\b", "none"),
    (r"\bop\b|op[- ]level|op[- ]policy", "op"),           # torchtitan selective_ac_option = 'op'
    # "SAC": selective activation checkpointing (PyTorch's torch.utils.checkpoint selective policies; torchtitan's
    # "selective", which its stack reads as op-level)
    (r"selective|core-attn|sel\b|\bsac\b|^(attention|attn|core attention) only\b", "selective"),
    (r"full|block|uniform|^(yes|y|on|true|1)$|checkpoint|^(all|every) layers?\b", "full"),
]
# The recipes of roofline/base/precision.py. A bare "fp8" is delayed scaling, Megatron-LM's default --fp8-recipe
# (megatron/training/arguments.py); torchao's Float8 linear (torchtitan) is tensorwise (current) scaling.
# MXFP4 is priced as NVFP4 (the same FP4 tensor-core peak; its E8M0 scale per 32 elements moves a little less).
PRECISION = [
    (r"nvfp4|mxfp4|\bfp4\b", "nvfp4"),
    (r"mx[- ]?fp8|fp8[- ]?mx\b", "mxfp8"),
    (r"fp8[- ]?(cs|current)|current[- ]scaling|tensorwise|per-tensor", "fp8-cs"),
    # torchao's rowwise recipe (Float8LinearRecipeName.ROWWISE, torchao/float8/config.py): dynamic scales per row,
    # from each row's own amax (base/precision.py fp8-row)
    (r"fp8[- ]?row\b|row-?wise|per-row", "fp8-row"),
    # DeepSeek-V3's fine-grained FP8 (1x128 activation tiles, 128x128 weight blocks; arXiv:2412.19437 sec 3.3.2) is the
    # block-scaled recipe (Transformer Engine Float8BlockScaling, Megatron-Core --fp8-recipe blockwise)
    (r"fp8[- ]?(block|bs\b)|block[- ]?wise|fp8.*block[- ]scal|block[- ]scal.*fp8|fine[- ]grained.*fp8|fp8.*fine[- ]grained"
     r"|1x128|128x128", "fp8-block"),
    (r"float8", "fp8-cs"),   # torchao Float8Linear (torchtitan): dynamic tensorwise scaling by default (torchao/float8/config.py)
    (r"fp8", "fp8"),
    (r"bf16|bfloat16", "bf16"),
    (r"fp16|float16|half", "fp16"),
    (r"fp32|float32", "fp32"),
]
# The MLP's shape: gated (three GEMMs: SwiGLU, GeGLU, ReGLU; Shazeer 2020 "GLU Variants Improve Transformer"), squared
# ReLU (Primer; Nemotron), or one activation between two GEMMs (GELU, and plain ReLU as OPT / metaseq and T5 run it:
# the same two GEMMs, an activation kernel that moves the same bytes, priced as gelu)
MLP = [(r"swiglu|silu|geglu|reglu|gated|\bglu\b", "swiglu"), (r"squared-relu|relu2|relu\^2|sq-relu", "squared_relu"),
       (r"gelu|^relu$|\brelu\b(?!\^)", "gelu")]
BOOL = [(r"^(y|yes|true|on|1|enabled?|sp|\u2713|\u2714)(\b|$)", True), (r"^(n|no|false|off|0|disabled?|\u2717|\u2718)(\b|$)", False)]


UNSTATED = ("-", "?", "unknown", "not stated", "unstated")     # a cell that says the source does not state it


def sharding(text):
    if _clean(text) in UNSTATED or _clean(text).startswith("n/a"):
        return None
    return _pick("sharding", text, SHARDING, "none, ddp, NO_SHARD, ZeRO-1/2/3, distributed optimizer, "
                 "SHARD_GRAD_OP, FULL_SHARD, HYBRID_SHARD, fsdp, FSDP2")


def recompute(text):
    """A recomputation cell -> none / selective / op / full.

    >>> recompute("per-op SAC"), recompute("SAC"), recompute("full AC"), recompute("no")
    ('op', 'selective', 'full', 'none')
    """
    return _pick("recompute", text, RECOMPUTE, "none, selective (Megatron selective, core_attn), op (torchtitan "
                 "op-level selective AC), full (full, block, uniform, activation checkpointing)")


# what Megatron's selective recomputation recomputes (Megatron-Core --recompute-modules, transformer_config.py
# recompute_modules, default ["core_attn"]; priced in model/formulas/compute.py _MODULE_OPS and formulas/memory.py):
# the modules Megatron-Core allows for a transformer, in its docstring's order. Its Gated-DeltaNet and mHC modules are
# not modelled (those layers are not). The plan field config.Plan.recompute_modules holds them comma-joined.
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")
# what per-layer CUDA graphs may capture (Megatron-Core transformer_config.py cuda_graph_modules)
GRAPH_MODULES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba")


def recompute_modules(text):
    """Megatron-Core recompute module names, however a list spells them ("mla_up_proj,mlp", "['moe_act', 'layernorm']",
    "core-attn mlp", a Python or YAML list) -> the canonical comma-joined names in RECOMPUTE_MODULES order; blank or
    empty -> None."""
    return _module_names(text, RECOMPUTE_MODULES, "recompute-modules")


def _module_names(text, allowed: tuple, flag: str):
    """Module names however a list spells them -> the canonical comma-joined names in ``allowed`` order; blank or
    empty -> None; a name outside ``allowed``: a one-line error naming ``flag``."""
    if isinstance(text, (list, tuple)):
        text = ",".join(map(str, text))
    names = [w.replace("-", "_") for w in re.findall(r"[a-z_-]+", str(text or "").lower())]
    if not names:
        return None
    bad = [w for w in names if w not in allowed]
    if bad:
        raise InputError(f"{flag}: cannot read {', '.join(bad)} in {str(text)!r}; accepted: {', '.join(allowed)}")
    return ",".join(m for m in allowed if m in names)


def graph_modules(text):
    """Megatron-Core cuda_graph_modules however a list spells them ("['attn', 'moe_router']", "attn moe-router", a
    Python or YAML list) -> the canonical comma-joined names in GRAPH_MODULES order; blank or empty -> "" (the whole
    layer)."""
    return _module_names(text, GRAPH_MODULES, "cuda-graph-modules") or ""


# a recipe cell that names no low-precision recipe outside its bracket: torchao's benchmark tables write the BF16
# baseline as "none (bfloat16)" in their Scaling column (pytorch/ao docs/source/workflows/training.md)
NO_RECIPE = r"none|no|baseline|no scaling|no fp8|no quantization|off"


def precision(text):
    """A recipe name -> the model's; "AMP" / "mixed precision" alone names no 16-bit type: None (the stack's default,
    as for a blank cell); "none (bfloat16)", a scaling column's baseline, is the type in its bracket.

    >>> precision("none (bfloat16)"), precision("mixed precision (bf16)"), precision("AMP"), precision("float8 rowwise")
    ('bf16', 'bf16', None, 'fp8-row')
    >>> precision("MX-FP8"), precision("mxfp8_cublas"), precision("FP8 (delayed)")
    ('mxfp8', 'mxfp8', 'fp8')
    >>> precision("FP8 (fine-grained: 1x128 tiles, 128x128 blocks)"), precision("block-wise FP8"), precision("MXFP8 block scaling")
    ('fp8-block', 'fp8-block', 'mxfp8')
    """
    bare = _clean(text)
    if re.fullmatch(r"(torch )?amp|(automatic )?mixed([- ]precision)?|" + NO_RECIPE, bare) or bare in UNSTATED:
        # "mixed precision (bf16)": the type in the bracket _clean drops, when one is named there
        inner = " ".join(re.findall(r"\(([^()]*)\)", str(text).lower()))
        hits = [value for pattern, value in PRECISION if re.search(pattern, inner)]
        if hits or not re.fullmatch(NO_RECIPE, bare):
            return hits[0] if hits else None
    raw = str(text or "").lower()
    if re.search(r"\btf32\b|tensor[- ]?float[- ]?32", raw) and not re.search(r"bf16|bfloat16|fp16|float16|fp8|amp|mixed", raw):
        # TF32 runs its GEMMs on the tensor cores (A100: 156 TFLOP/s), fp32 on the CUDA cores (19.5): priced as fp32
        # the step would read 8x too slow, and no TF32 plan is modelled
        raise InputError(f"precision: TF32 tensor-core training is not modelled (fp32 prices CUDA-core FP32 GEMMs), "
                         f"got {text!r}")
    found = _pick("precision", text, PRECISION, "bf16, fp16, fp32, fp8 (delayed scaling), fp8-cs (current/tensorwise), fp8-row (torchao rowwise), fp8-block, mxfp8, nvfp4")
    if found == "fp8":
        # a bare "FP8" whose bracket names the scaling ("FP8 (fine-grained 1x128 tiles / 128x128 blocks)")
        inner = " ".join(re.findall(r"\(([^()]*)\)", "fp8 " + str(text).lower()))
        hits = [value for pattern, value in PRECISION if re.search(pattern, "fp8 " + inner)]
        return hits[0] if hits and hits[0] != "bf16" else found
    return found


def mlp(text):
    return _pick("mlp", text, MLP, "gelu (or relu: one activation, two GEMMs), swiglu (gated: SwiGLU, GeGLU, "
                 "ReGLU), squared_relu")


def flag(text):
    """yes/no spellings -> bool; 'n/a' or blank -> None (unstated)."""
    t = _clean(text)
    if not t or t.startswith("n/a") or t in UNSTATED:
        return None
    return _pick("flag", text, BOOL, "y/yes/true/on, n/no/false/off, n/a")
