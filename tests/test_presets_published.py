"""Presets of published dense models (OPT, BLOOM, MT-NLG, GPT-NeoX, Pythia, MPT, Mistral, Qwen2.5, Llama 3.2) against
the parameter totals their papers and model cards print: a wrong width, layer count, vocabulary or tying misses by
far more than the tolerance, which is the rounding of the printed figure."""
import pytest

from roofline.spec import families, hardware, models
from roofline.spec.config import Plan, check
from roofline.model.predict import evaluate, inputs

HW = hardware.load("a100-sxm4-80gb")

# preset -> (printed total, relative tolerance: the printed figure's rounding), source
PUBLISHED = {
    "opt-175b": (175e9, 0.005),            # Zhang et al. 2022, Table 1 "175B"
    "bloom-176b": (176_247_271_424, 1e-4),  # bigscience/bloom model card, "176,247,271,424 parameters"
    "mt-nlg-530b": (530e9, 0.005),         # Smith et al. 2022, "530 billion parameters"
    "gpt-neox-20b": (20.55e9, 0.002),      # EleutherAI/gpt-neox-20b model card, 20.55B (parameter table)
    "pythia-12b": (11_846_072_320, 1e-4),  # Biderman et al. 2023, Table 1 (total parameters)
    "mpt-7b": (6.65e9, 0.002),             # mosaicml/mpt-7b model card, 6.7B (6.65B on the checkpoint)
    "mpt-30b": (29.95e9, 0.002),           # mosaicml/mpt-30b model card, 29.95B
    "mistral-7b": (7.24e9, 0.002),         # Jiang et al. 2023, "7.3B" / HF checkpoint 7.24B
    "qwen2.5-72b": (72.7e9, 0.002),        # Qwen2.5 Technical Report, Table 1: 72.7B
    "llama3.2-1b": (1.24e9, 0.005),        # Llama 3.2 model card: 1.23B / HF 1.24B
    "llama3.2-3b": (3.21e9, 0.005),        # Llama 3.2 model card: 3.21B
    "llama-7b": (6.7e9, 0.01),             # Touvron et al. 2023 (LLaMA), Table 2: 6.7B
    "llama-13b": (13.0e9, 0.005),          # Table 2: 13.0B
    "llama-33b": (32.5e9, 0.005),          # Table 2: 32.5B
    "llama-65b": (65.2e9, 0.005),          # Table 2: 65.2B
}


@pytest.mark.parametrize("pid", sorted(PUBLISHED))
def test_preset_parameters_match_the_published_total(pid):
    m = models.load(pid)
    check(m, Plan())
    total, rel = PUBLISHED[pid]
    assert float(evaluate(inputs(m, Plan(), HW))["params"]) == pytest.approx(total, rel=rel)


@pytest.mark.parametrize("name, pid", [("OPT-175B", "opt-175b"), ("BLOOM-176B", "bloom-176b"),
                                       ("MT-NLG 530B", "mt-nlg-530b"), ("GPT-NeoX-20B", "gpt-neox-20b"),
                                       ("Pythia 12B", "pythia-12b"), ("MPT-30B", "mpt-30b"),
                                       ("Mistral 7B", "mistral-7b"), ("Qwen2.5-72B", "qwen2.5-72b"),
                                       ("Llama-3.2-1B", "llama3.2-1b"), ("LLaMA-65B", "llama-65b"),
                                       ("LLaMA-1 7B", "llama-7b"), ("huggyllama/llama-30b", "llama-33b"),
                                       ("Meta-Llama-3.1-405B", "llama3.1-405b"), ("Mistral-7B-v0.1", "mistral-7b"),
                                       ("Llama-2-7b-hf", "llama2-7b"), ("Megatron-Turing NLG 530B", "mt-nlg-530b"),
                                       ("DeepSeek-V3 (671B)", "deepseek-v3")])
def test_a_row_naming_the_model_finds_its_preset(name, pid):
    """validate fills a row's blank architecture columns from the preset its model column names."""
    assert families.preset_for(name) == pid


def test_tying_and_windows_as_published():
    assert models.load("opt-175b").tied_embeddings and models.load("bloom-176b").tied_embeddings
    assert not models.load("gpt-neox-20b").tied_embeddings and models.load("llama3.2-1b").tied_embeddings
    m = models.load("mistral-7b")
    assert (m.swa_window, m.swa_every, m.kv_heads) == (4096, 1, 8)


@pytest.mark.parametrize("name", ["Llama 2 34B", "LLaMA 3 13B", "Kimi K2 1T", "GPT-3 13B 2", "Mistral-7B-v0.3",
                                  "DeepSeekV3671B"])
def test_a_name_no_preset_holds_finds_none(name):
    """The spellings a name may take never turn a size or version no preset has into a neighbour: Llama 2 34B was
    never released, Mistral 7B v0.3 has another vocabulary (32768)."""
    assert families.preset_for(name) is None


def test_llama1_vocabulary_is_not_taken_for_llama3_or_4():
    assert families.vocab_for("LLaMA 65B")[0] == 32000
    assert families.vocab_for("Llama-3 8B")[0] == 128256
    assert families.vocab_for("Llama 4 Scout") is None
