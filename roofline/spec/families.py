"""Fields a source leaves out that its model family fixes: the tokenizer's vocabulary, and the
architecture of a named preset.

Each entry names the family's published config. A model name that matches no entry leaves the
field unset, and the row is skipped with a reason that says which field is missing.

>>> vocab_for("Llama 3.1 405B")
(128256, 'Llama 3 tokenizer: vocab_size 128256 in meta-llama/Llama-3.1-*/config.json')
>>> vocab_for("some new model") is None
True
>>> vocab_for("GPT-175B")[0], vocab_for("GPT-7B (FP8-LM Table 1)")[0], vocab_for("gpt-j-6b")
(50257, 50257, None)
"""
from __future__ import annotations

import re

# (pattern on the lower-cased model name, vocabulary, source)
VOCAB = [
    (r"llama[\s-]*3(?![\d.]*\s*b\b)", 128256, "Llama 3 tokenizer: vocab_size 128256 in meta-llama/Llama-3.1-*/config.json"),
    (r"llama[\s-]*2|llemma|codellama", 32000, "Llama 2 SentencePiece tokenizer: vocab_size 32000 in meta-llama/Llama-2-*/config.json"),
    (r"\bllama(?![\s-]*[34](?![\d.]*\s*b\b))", 32000, "LLaMA (1) SentencePiece tokenizer: vocab_size 32000 in the HF conversion config.json (huggyllama/llama-*)"),
    (r"mixtral|mistral[\s-]*7b", 32000, "Mistral v0.1 tokenizer: vocab_size 32000 in mistralai/Mixtral-8x7B-v0.1/config.json"),
    (r"nemotron[\s-]*4", 256000, "Nemotron-4 tokenizer: 256,000 tokens (Nemotron-4 15B/340B technical reports, sec 2)"),
    (r"qwen[\s-]*2\.5[\s-]*(7|14|32|72)b", 152064, "Qwen2.5 7B-72B: vocab_size 152064 (padded) in Qwen/Qwen2.5-7B/14B/32B/72B/config.json"),
    (r"qwen[\s-]*(2\.5|3)", 151936, "Qwen2.5/Qwen3 tokenizer: vocab_size 151936 in Qwen/Qwen3-*/config.json"),
    (r"deepseek[\s-]*v3", 129280, "DeepSeek-V3 tokenizer: vocab_size 129280 in deepseek-ai/DeepSeek-V3/config.json"),
    (r"gpt[\s-]*oss", 201088, "o200k_harmony tokenizer: vocab_size 201088 in openai/gpt-oss-120b/config.json"),
    (r"bloom", 250880, "BLOOM tokenizer: vocab_size 250880 in bigscience/bloom/config.json"),
    (r"falcon", 65024, "Falcon tokenizer: vocab_size 65024 in tiiuae/falcon-40b/config.json"),
    (r"pythia|gpt[\s-]*neox", 50304, "GPT-NeoX tokenizer padded: vocab_size 50304 in EleutherAI/pythia-*/config.json"),
    (r"\bopt[\s-]*\d", 50272, "OPT tokenizer: vocab_size 50272 in facebook/opt-*/config.json"),
    # a GPT sized in parameters ("GPT-175B", "GPT 1.3B": the GPT-3 paper's and Megatron-LM's naming) is of that lineage;
    # so is a "GPT-style" / "GPT-like" model of a systems paper (Megatron-LM's and Megatron-DeepSpeed's GPT examples
    # tokenize with GPT2BPETokenizer, examples/pretrain_gpt.sh --vocab-file gpt2-vocab.json)
    (r"gpt[\s-]*[23]\b|gpt[\s-]*3|megatron[\s-]*gpt|\bgpt\s*\d|\bgpt[\s-]+\d+(?:\.\d+)?\s*[mbt]\b"
     r"|\bgpt[\s-]*(?:style|like)\b", 50257,
     "GPT-2 BPE tokenizer (used by GPT-3 and Megatron-LM's GPT): 50257 tokens"),
]


def vocab_for(name: str | None) -> tuple[int, str] | None:
    """(vocabulary, source) of the family a model name belongs to, or None."""
    # a hub id's organisation is not the family (meta-llama/Llama-4-Scout-17B-16E is no LLaMA 1); a '/' inside free
    # text ('Llama 3 8B/70B', 'LLaMA-7B/13B': no name after the slash, 'Megatron/DeepSpeed' in a sentence) is kept
    t = re.sub(r"^[\w.-]+/(?=[\w.-]*[a-z]{2}[\w.-]*$)", "", (name or "").lower())
    for pattern, v, src in VOCAB:
        if re.search(pattern, t):
            return v, src
    return None


def _key(s: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", s.lower()).replace("llama31", "llama3.1")


# Spellings of a published name that the hub or a paper uses for a preset, on the lower-cased name: (pattern,
# replacement), applied in order before matching (a repository prefix 'meta-llama/', a 'Meta-' brand, the 'LLaMA-1'
# generation mark, the spelled-out MT-NLG, the hub's 'llama-30b' for the paper's 33B, a checkpoint suffix).
SPELLINGS = (
    (r"^.*/", ""),                                     # meta-llama/Llama-3.1-8B, mistralai/Mistral-7B-v0.1
    (r"^meta[\s-]+(?=llama)", ""),                     # Meta-Llama-3.1-405B
    (r"llama[\s-]*1(?=[\s-]+\d)", "llama"),             # LLaMA-1 65B
    (r"megatron[\s-]*turing[\s-]*nlg", "mt-nlg"),       # Megatron-Turing NLG 530B
    (r"^llama[\s-]*30b$", "llama-33b"),                 # huggyllama/llama-30b is the paper's 33B (32.5B parameters)
    (r"^(llama[\s-]*4[\s-]*(scout|maverick))[\s-]+17b[\s-]+\d+e$", r"\1"),   # Llama-4-Scout-17B-16E (active, experts)
    (r"^mistral[\s-]*large[\s-]*(instruct[\s-]*)?2407$", "mistral-large-2"),     # Mistral Large 2 (July 2024) as the hub names it
    (r"^olmo[\s-]*2[\s-]*1124[\s-]*(?=\d+b$)", "olmo2-"),                     # allenai/OLMo-2-1124-7B (release date)
    # NeMo's performance summaries (docs.nvidia.com/nemo-framework performance-summary, 24.x-25.x) name Nemotron-4
    # 15B/340B 'Nemotron-15B'/'Nemotron-340B', Llama 3.1 405B 'LLAMA3-405B' (the Llama 3 paper's own 'Llama 3 405B',
    # Dubey et al. 2024: only the 3.1 release has a 405B) and the Llama 4 language models 'LLAMA4-Scout-LLM'
    (r"^nemotron[\s-]*(15b|340b)$", r"nemotron-4-\1"),
    (r"^llama[\s-]*3[\s-]*405b$", "llama3.1-405b"),
    (r"^(llama[\s-]*4[\s-]*(scout|maverick))[\s-]+llm$", r"\1"),
    # NeMo AutoModel's performance summary (docs/performance-summary.mdx): 'Nemotron V3 Nano 30B' / 'Super 120B' for
    # Nemotron 3 Nano 30B-A3B / Super 120B-A12B, 'Qwen3 MoE 30B' for Qwen3-30B-A3B
    (r"^nemotron[\s-]*v?3[\s-]*nano[\s-]*30b$", "nemotron-3-nano-30b-a3b"),
    (r"^nemotron[\s-]*v?3[\s-]*super[\s-]*120b$", "nemotron-3-super-120b-a12b"),
    # Nemotron 3.5 Lightning 30B-A3B "uses the same architecture as Nemotron 3 Nano" (Megatron-Bridge
    # examples/models/nemotron/nemotron_3/lightning/README.md): what a row leaves unstated (no linear biases, RMSNorm,
    # untied head) is the Nano preset's
    (r"^nemotron[\s-]*3\.5[\s-]*lightning[\s-]*30b([\s-]*a3b)?$", "nemotron-3-nano-30b-a3b"),
    (r"^qwen[\s-]*3[\s-]*moe[\s-]*30b$", "qwen3-30b-a3b"),
    (r"^qwen[\s-]*3[\s-]*moe[\s-]*235b$", "qwen3-235b-a22b"),
    # releases that reuse an earlier architecture unchanged, by their config.json: Llama 3.3 70B is Llama 3.1 70B's
    # (meta-llama/Llama-3.3-70B-Instruct: hidden 8192, 80 layers, 64 heads, 8 KV heads, intermediate 28672, vocab
    # 128256); Qwen2 7B and 72B are Qwen2.5's (Qwen/Qwen2-72B: hidden 8192, 80 layers, 64 heads, 8 KV heads,
    # intermediate 29568, vocab 152064; Qwen/Qwen2-7B: 3584, 28, 28, 4, 18944, 152064)
    (r"^llama[\s-]*3\.3[\s-]*70b", "llama3.1-70b"),
    (r"^qwen[\s-]*2[\s-]*(7|72)b", r"qwen2.5-\1b"),
    # BigScience's BLOOM is the 176B model (bigscience/bloom); its smaller siblings carry their size (bloom-7b1)
    (r"^bloom$", "bloom-176b"),
    # -hf conversions, base checkpoints, Mistral/Mixtral v0.1, and the instruction-tuned checkpoints (the same network)
    (r"([\s-]+(hf|base|v0\.1|instruct|chat))+$", ""),
)


def _spelled(name: str) -> str:
    t = name.strip().lower()
    for pattern, repl in SPELLINGS:
        t = re.sub(pattern, repl, t)
    return t


def preset_for(name: str | None, family: bool = False) -> str | None:
    """The bundled preset id a model name denotes ('Llama 3.1 405B' -> 'llama3.1-405b'), or None. ``family``: a
    name without its size ('Nemotron 3 Nano') also denotes the one preset whose id it begins, when exactly one does.

    >>> [preset_for(n) for n in ("DeepSeek-V3 (671B total / 37B active)", "Mixtral 8x7B (dropless)", "Llama 3 (70B)",
    ...                          "Llama 4 Maverick 400B (17B active, 128 experts)", "GPT-style 175B (MegaScale)")]
    ['deepseek-v3', 'mixtral-8x7b', 'llama3-70b', 'llama4-maverick', None]
    """
    if not name:
        return None
    from ..base.paths import model_preset_ids
    spelled = _spelled(name)
    k = _key(spelled)
    ids = model_preset_ids()
    exact = []
    # the name as written, then with its parenthesised qualifiers read as words ('Llama 3 (70B)'), then without them
    # ('DeepSeek-V3 (671B total / 37B active)', 'Mixtral 8x7B (dropless)'): the first spelling that is a preset
    for cand in dict.fromkeys((spelled, _spelled(re.sub(r"[()]", " ", name)), _spelled(re.sub(r"\([^()]*\)", " ", name)))):
        ck = _key(cand)
        exact = [pid for pid in ids if _key(pid) == ck]
        if not exact:
            # a trailing total-parameter count the preset id leaves out ('DeepSeek V3 671B' -> deepseek-v3), only
            # when the name without it is exactly one preset
            short = _key(re.sub(r"[\s-]+\(?\d+(\.\d+)?b\)?$", "", cand))
            exact = [pid for pid in ids if short != ck and _key(pid) == short]
        if exact:
            break
    if exact or not family:
        return exact[0] if exact else None
    starts = [pid for pid in ids if _key(pid).startswith(k)]
    return starts[0] if len(starts) == 1 else None
