"""Issue 20 presets against their published sources: the fields of each modern MoE preset against the values of its
HF config.json (typed in here from the published files, not read from the presets), exact parameter counts
computed by hand from those configs, the model cards' per-component counts (gpt-oss), and Llama 4 Maverick's
published 400B total / 17B active. The rounded published totals and actives of DeepSeek-V3, Kimi K2, Qwen3 and
Mixtral 8x22B are tested in test_modern_models.py and not repeated here."""
import pytest

from roofline.spec import hardware, models
from roofline.spec.config import Plan, check
from roofline.model.predict import evaluate, inputs

HW = hardware.load("h100-sxm")


def params(name, plan=None):
    m = models.load(name)
    plan = plan or Plan()
    check(m, plan)
    return m, {k: float(v) for k, v in evaluate(inputs(m, plan, HW)).items()}


# ---- preset fields = HF config.json ---------------------------------------------------------------------
# HF key -> preset field: num_hidden_layers n_layers, hidden_size d_model, num_attention_heads n_heads,
# num_key_value_heads n_kv_heads, head_dim head_dim, moe_intermediate_size (Qwen3, DeepSeek) / intermediate_size
# (gpt-oss, Llama 4 experts) moe_ffn_hidden, num_experts / n_routed_experts / num_local_experts n_experts,
# num_experts_per_tok top_k, vocab_size vocab, tie_word_embeddings tied_embeddings
HF = {
    # huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json
    "deepseek-v3": dict(n_layers=61, d_model=7168, n_heads=128, ffn_hidden=18432, moe_ffn_hidden=2048, n_experts=256,
                        top_k=8, n_shared_experts=1, first_dense_layers=3, q_lora_rank=1536, kv_lora_rank=512,
                        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, vocab=129280,
                        tied_embeddings=False),
    # huggingface.co/moonshotai/Kimi-K2-Base/blob/main/config.json
    "kimi-k2": dict(n_layers=61, d_model=7168, n_heads=64, ffn_hidden=18432, moe_ffn_hidden=2048, n_experts=384,
                    top_k=8, n_shared_experts=1, first_dense_layers=1, q_lora_rank=1536, kv_lora_rank=512,
                    qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, vocab=163840, tied_embeddings=False),
    # huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json
    "qwen3-30b-a3b": dict(n_layers=48, d_model=2048, n_heads=32, n_kv_heads=4, head_dim=128, moe_ffn_hidden=768,
                          n_experts=128, top_k=8, vocab=151936, tied_embeddings=False),
    # huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json
    "qwen3-235b-a22b": dict(n_layers=94, d_model=4096, n_heads=64, n_kv_heads=4, head_dim=128, moe_ffn_hidden=1536,
                            n_experts=128, top_k=8, vocab=151936, tied_embeddings=False),
    # huggingface.co/openai/gpt-oss-120b/blob/main/config.json (sliding_window 128, layer_types alternating)
    "gpt-oss-120b": dict(n_layers=36, d_model=2880, n_heads=64, n_kv_heads=8, head_dim=64, moe_ffn_hidden=2880,
                         n_experts=128, top_k=4, vocab=201088, tied_embeddings=False, swa_window=128),
    # huggingface.co/mistralai/Mixtral-8x22B-v0.1/blob/main/config.json
    "mixtral-8x22b": dict(n_layers=56, d_model=6144, n_heads=48, n_kv_heads=8, ffn_hidden=16384, n_experts=8,
                          top_k=2, vocab=32768, tied_embeddings=False),
    # huggingface.co/meta-llama/Llama-4-Maverick-17B-128E/blob/main/config.json, text_config
    "llama4-maverick": dict(n_layers=48, d_model=5120, n_heads=40, n_kv_heads=8, head_dim=128, moe_ffn_hidden=8192,
                            ffn_hidden=16384, n_experts=128, top_k=1, shared_ffn_hidden=8192, vocab=202048,
                            tied_embeddings=False),
}


@pytest.mark.parametrize("name", sorted(HF))
def test_preset_fields_are_the_hf_config(name):
    m = models.load(name)
    assert {k: getattr(m, k) for k in HF[name]} == HF[name]


# ---- parameters by hand from the configs ----------------------------------------------------------------
def test_mixtral_8x22b_parameters_by_hand():
    """56 layers: Q and O 6144 x 6144, K and V 6144 x 1024 (8 kv heads of 128), 8 experts of 3 x 6144 x 16384,
    router 6144 x 8, two RMSNorms; untied 32768 x 6144 embedding and head; final norm. Active: 2 experts."""
    h, V, L = 6144, 32768, 56
    attn = 2 * h * h + 2 * h * 1024
    expert = 3 * h * 16384
    common = L * (attn + h * 8 + 2 * h) + 2 * V * h + h
    _, r = params("mixtral-8x22b")
    assert r["params"] == common + L * 8 * expert
    assert r["active_params"] == common + L * 2 * expert


def test_qwen3_235b_parameters_by_hand():
    """94 layers: Q 4096 x 8192 (64 heads of 128), K and V 4096 x 512 (4 kv heads), O 8192 x 4096; 128 experts of
    3 x 4096 x 1536, router 4096 x 128, two RMSNorms (QK-norm weights not counted); untied 151936 x 4096 tables."""
    h, V, L = 4096, 151936, 94
    attn = h * (8192 + 2 * 512) + 8192 * h
    expert = 3 * h * 1536
    common = L * (attn + h * 128 + 2 * h) + 2 * V * h + h
    _, r = params("qwen3-235b-a22b")
    assert r["params"] == common + L * 128 * expert
    assert r["active_params"] == common + L * 8 * expert


def test_llama4_maverick_parameters_by_hand():
    """48 layers of attention (Q, O 5120 x 5120; K, V 5120 x 1024) and two RMSNorms; 24 dense layers with an MLP of
    3 x 5120 x 16384; 24 MoE layers with 128 routed experts and 1 shared of 3 x 5120 x 8192 each, router 5120 x 128;
    untied 202048 x 5120 tables; final norm. Active: the shared expert and 1 routed expert per MoE layer."""
    h, V = 5120, 202048
    attn = 2 * h * h + 2 * h * 1024
    expert = 3 * h * 8192
    common = 48 * (attn + 2 * h) + 24 * 3 * h * 16384 + 24 * h * 128 + 2 * V * h + h
    m, r = params("llama4-maverick")
    assert m.dense_layers == 48 // 2                       # interleave_moe_layer_step 2: half the layers dense
    assert r["params"] == common + 24 * 129 * expert
    assert r["active_params"] == common + 24 * 2 * expert


def test_llama4_maverick_published_counts():
    """Meta model card: 400B total, 17B active, round figures (the HF checkpoint, vision encoder included, holds
    402B), so 0.5 % on the total (one expert of one layer is 0.03 %, a 129th expert everywhere 0.8 %) and +-0.5B
    on the active count (17.18B here, both embedding tables counted)."""
    _, r = params("llama4-maverick")
    assert r["params"] == pytest.approx(400e9, rel=0.005)
    assert r["active_params"] == pytest.approx(17e9, abs=0.5e9)


def test_gpt_oss_120b_components_of_the_model_card():
    """gpt-oss model card (arXiv:2508.10925) Table 1, 120b: MLP 114.71B (experts + router), embed + unembed 1.16B,
    total 116.83B, each printed to 0.01B. The router is 36 x (2880 x 128 + 128 bias)."""
    _, r = params("gpt-oss-120b")
    router = 36 * (2880 * 128 + 128)
    assert r["params_expert"] + router == pytest.approx(114.71e9, abs=0.005e9)
    assert r["params_embedding"] == pytest.approx(1.16e9, abs=0.005e9)
    assert r["params"] == pytest.approx(116.83e9, abs=0.005e9)


# ---- GLM-4.5 (Megatron arguments of THUDM/slime scripts/models/glm4.5-*.sh, typed in here) --------------------
GLM = {
    "glm4.5": dict(n_layers=92, d_model=5120, n_heads=96, n_kv_heads=8, head_dim=128, ffn_hidden=12288,
                   moe_ffn_hidden=1536, shared_ffn_hidden=1536, n_experts=160, top_k=8, first_dense_layers=3,
                   vocab=151552, tied_embeddings=False, qk_norm=True),
    "glm4.5-air": dict(n_layers=46, d_model=4096, n_heads=96, n_kv_heads=8, head_dim=128, ffn_hidden=10944,
                       moe_ffn_hidden=1408, shared_ffn_hidden=1408, n_experts=128, top_k=8, first_dense_layers=1,
                       vocab=151552, tied_embeddings=False, qk_norm=False),
}


@pytest.mark.parametrize("name", sorted(GLM))
def test_glm_presets_are_the_megatron_arguments(name):
    m = models.load(name)
    assert {k: getattr(m, k) for k in GLM[name]} == GLM[name]


@pytest.mark.parametrize("name, total, active", [("glm4.5", 355e9, 32e9), ("glm4.5-air", 106e9, 12e9)])
def test_glm_parameters_by_hand_and_published(name, total, active):
    """Q 96 x 128 wide, K and V 8 x 128, O back to h; dense layers 3 x h x ffn, MoE layers E experts and one shared
    expert of 3 x h x f_e and a router h x E; two RMSNorms a layer (QK-norm weights and QKV biases not counted);
    untied V x h tables and the final norm. Published (Megatron-Bridge docs/models/glm/glm45.md): 355B / 32B and 106B
    / 12B, the active count without the embedding tables; the total within 1 % (355B holds the MTP layer)."""
    g = GLM[name]
    h, V, L, d, E = g["d_model"], g["vocab"], g["n_layers"], g["first_dense_layers"], g["n_experts"]
    attn = h * (96 * 128 + 2 * 8 * 128) + 96 * 128 * h
    expert = 3 * h * g["moe_ffn_hidden"]
    common = L * (attn + 2 * h) + d * 3 * h * g["ffn_hidden"] + (L - d) * (h * E + expert) + 2 * V * h + h
    _, r = params(name)
    assert r["params"] == common + (L - d) * E * expert
    assert r["active_params"] == common + (L - d) * 8 * expert
    assert r["params"] == pytest.approx(total, rel=0.01)
    assert r["active_params"] - 2 * V * h == pytest.approx(active, rel=0.02)


@pytest.mark.parametrize("spelling, preset", [("GLM-4.5", "glm4.5"), ("zai-org/GLM-4.5-Air", "glm4.5-air"),
                                              ("GLM 4.5 Air", "glm4.5-air"), ("GLM-4.5 355B", "glm4.5")])
def test_glm_names_as_people_write_them(spelling, preset):
    from roofline.spec import families
    assert families.preset_for(spelling) == preset
