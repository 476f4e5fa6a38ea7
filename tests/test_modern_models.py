"""Issue 20, first slice: head_dim apart from d_model / heads, MoE as Qwen3 / GPT-OSS / DeepSeek are (per-expert
size, shared experts, leading dense layers), the Model/Plan type checks, and the GB200 datasheet profile.

Reference numbers are published parameter counts (papers, model cards) or computed by hand here."""
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import hardware, models
from roofline.config import Model, Plan, check
from roofline.errors import InputError
from roofline.predict import evaluate, inputs

HW = hardware.load("h100-sxm")


def run(model, plan=None):
    plan = plan or Plan()
    check(model, plan)
    return {k: float(v) for k, v in evaluate(inputs(model, plan, HW)).items()}


# ---- published parameter counts ---------------------------------------------------------------------
@pytest.mark.parametrize("preset,total,active,embed_once", [
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, False),      # Qwen3 Technical Report Table 2 (30B-A3B)
    ("qwen3-235b-a22b", 235e9, 22e9, False),      # Qwen3 Technical Report Table 2 (235B-A22B)
    ("gpt-oss-120b", 116.83e9, 5.13e9, True),     # gpt-oss model card Table 1: 116.83B total, 5.13B active
    ("mixtral-8x22b", 141e9, 39e9, False),        # Mistral AI release: 141B total, 39B active
])
def test_published_parameter_counts(preset, total, active, embed_once):
    m = models.load(preset)
    r = run(m)
    assert r["params"] == pytest.approx(total, rel=0.01)
    # the gpt-oss card counts the (untied) embedding once in the active parameters
    got = r["active_params"] - (m.vocab * m.d_model if embed_once else 0)
    assert got == pytest.approx(active, rel=0.03)


def test_qwen3_30b_layer_parameters_by_hand():
    """One Qwen3-30B-A3B layer: Q 2048 x 4096, K and V 2048 x 512, O 4096 x 2048; 128 experts of 3 x 2048 x 768,
    router 2048 x 128, two RMSNorms of 2048 (no biases); plus two 151936 x 2048 tables."""
    attn = 2048 * (4096 + 2 * 512) + 4096 * 2048
    layer = attn + 128 * 3 * 2048 * 768 + 2048 * 128 + 2 * 2048
    total = 48 * layer + 2 * 151936 * 2048 + 2048
    assert run(models.load("qwen3-30b-a3b"))["params"] == total


# ---- head_dim ------------------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(heads=st.sampled_from([8, 16, 32]), d_head=st.sampled_from([32, 64, 128]), kv=st.sampled_from([1, 2, 8]),
       moe=st.booleans(), tp=st.sampled_from([1, 2, 8]), sp=st.booleans())
def test_head_dim_equal_to_d_over_heads_is_the_old_model(heads, d_head, kv, moe, tp, sp):
    kv = min(kv, heads)
    base = Model(n_layers=4, d_model=heads * d_head, n_heads=heads, n_kv_heads=kv, vocab=1024, seq_len=512,
                 n_experts=8 if moe else 1, top_k=2 if moe else 1)
    plan = Plan(tp=tp, dp=8, ep=4 if moe else 1, sequence_parallel=sp, global_batch=16)
    a, b = run(base, plan), run(replace(base, head_dim=d_head), plan)
    for k in ("step_time", "flops", "memory", "params"):
        assert b[k] == pytest.approx(a[k], rel=1e-12)


def test_head_dim_flops_by_hand():
    """MHA, a = 4 heads of d_h = 64 on h = 128 (a d_h = 256 = 2h), s = 128, one layer, gelu f = 4h, no causal skip:
    forward model FLOPs per sequence = 2 s h (3 a d_h) [QKV] + 4 s^2 a d_h [scores, context] + 2 s a d_h h [O]
    + 2 s h f x 2 [MLP] + 2 s h V [LM head]; the step = 3 x forward."""
    s, h, a, d, f, V = 128, 128, 4, 64, 512, 1024
    m = Model(n_layers=1, d_model=h, n_heads=a, head_dim=d, ffn_hidden=f, vocab=V, seq_len=s, causal=False)
    fwd = 2 * s * h * 3 * a * d + 4 * s * s * a * d + 2 * s * a * d * h + 2 * 2 * s * h * f + 2 * s * h * V
    assert run(m, Plan(global_batch=1))["flops"] == pytest.approx(3 * fwd, rel=1e-12)


def test_head_dim_lets_d_model_be_indivisible_by_heads():
    m = Model(n_layers=2, d_model=1000, n_heads=16, n_kv_heads=4, head_dim=64, vocab=1024, seq_len=256)
    check(m, Plan(tp=4))
    assert run(m)["params"] > 0
    with pytest.raises(InputError, match="divisible by heads"):
        check(replace(m, head_dim=None), Plan())


# ---- MoE as these models are ------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(f=st.sampled_from([512, 1024, 1536]), shared=st.sampled_from([None, 256]), first=st.sampled_from([None, 1, 2]),
       tp=st.sampled_from([1, 2]), pp=st.sampled_from([1, 2]))
def test_one_expert_is_the_dense_model(f, shared, first, tp, pp):
    """E = K = 1: no router, no shared experts, no dense/MoE split; the MLP of size moe_ffn_hidden is the dense one."""
    dense = Model(n_layers=4, d_model=256, n_heads=4, ffn_hidden=f, vocab=1024, seq_len=256)
    moe1 = replace(dense, n_experts=1, top_k=1, n_shared_experts=1 if shared else None, shared_ffn_hidden=shared,
                   first_dense_layers=first)
    plan = Plan(tp=tp, pp=pp, dp=2, global_batch=8)
    a, b = run(dense, plan), run(moe1, plan)
    for k in ("step_time", "flops", "memory", "params", "active_params"):
        assert b[k] == pytest.approx(a[k], rel=1e-12)


def test_moe_parameters_by_hand_with_shared_experts_and_dense_layers():
    """l = 4 layers, the first dense (f = 1024), 3 MoE of E = 8 experts (f_e = 128, top 2) + shared f_s = 256;
    gelu, no biases, h = 64, 4 heads, untied V = 100, rope."""
    h, V = 64, 100
    m = Model(n_layers=4, d_model=h, n_heads=4, ffn_hidden=1024, moe_ffn_hidden=128, n_experts=8, top_k=2,
              n_shared_experts=1, shared_ffn_hidden=256, first_dense_layers=1, vocab=V, seq_len=64,
              biases=False, tied_embeddings=False, position="rope")
    attn, norms = 4 * h * h, 2 * h
    mlp = lambda w: 2 * h * w          # noqa: E731  up + down, not gated
    moe_layer = attn + 8 * mlp(128) + h * 8 + mlp(256) + norms
    dense_layer = attn + mlp(1024) + norms
    emb = 2 * V * h + h
    r = run(m)
    assert r["params"] == 3 * moe_layer + dense_layer + emb
    assert r["active_params"] == 3 * (attn + 2 * mlp(128) + h * 8 + mlp(256) + norms) + dense_layer + emb


def test_flops_per_token_near_six_times_active_parameters():
    """Model FLOPs per token = 6 x (active matmul parameters) + attention (12 l s a d_h / 2 causal, per token)."""
    for preset in ("qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b"):
        m = models.load(preset)
        r = run(m, Plan(global_batch=1))
        per_token = r["flops"] / m.seq_len
        matmul_params = r["active_params"] - m.vocab * m.d_model     # the input embedding is a lookup
        attention = 12 * m.n_layers * m.seq_len * m.n_heads * m.head_size / 2
        assert per_token == pytest.approx(6 * matmul_params + attention, rel=0.01)


def test_leading_dense_layers_sit_on_the_first_stage():
    """A dense layer much heavier than a MoE layer: with pp = 2 the first stage holds it, and the step follows
    that stage; moving the heavy MLP into the MoE experts' place changes the per-stage split, not the totals."""
    base = Model(n_layers=4, d_model=256, n_heads=4, ffn_hidden=8192, moe_ffn_hidden=64, n_experts=4, top_k=1,
                 vocab=1024, seq_len=256)
    plan = Plan(pp=2, dp=4, ep=4, global_batch=64)
    none, one, two = (run(replace(base, first_dense_layers=k), plan) for k in (None, 1, 2))
    assert none["step_time"] < one["step_time"] < two["step_time"]
    assert one["mem_first_stage"] > none["mem_first_stage"]
    assert one["mem_last_stage"] == pytest.approx(none["mem_last_stage"], rel=1e-12)


def test_expert_parallel_all_to_all_carries_top_k_copies_of_the_sp_split_tokens():
    m = Model(n_layers=2, d_model=4096, n_heads=8, ffn_hidden=4096, n_experts=8, top_k=2, vocab=1024, seq_len=8192)
    plan = Plan(dp=8, ep=8, micro_batch=4, global_batch=32)
    k2 = run(m, plan)["t_ep_comm"]
    k4 = run(replace(m, top_k=4), plan)["t_ep_comm"]
    # bandwidth term doubles with k; the latency steps do not
    assert 1.9 < k4 / k2 <= 2.0


# ---- type checks at the edge ------------------------------------------------------------------------------
@pytest.mark.parametrize("make,field", [
    (lambda: Model(n_layers="24"), "model.n_layers"),
    (lambda: Model(head_dim=64.5), "model.head_dim"),
    (lambda: Model(biases="yes"), "model.biases"),
    (lambda: Plan(sequence_parallel="no"), "plan.sequence_parallel"),
    (lambda: Plan(tp="2"), "plan.tp"),
    (lambda: Plan(overlap_tp="half"), "plan.overlap_tp"),
])
def test_wrong_types_are_one_input_error(make, field):
    with pytest.raises(InputError, match=field):
        make()


def test_check_refuses_indivisible_expert_sizes():
    m = models.load("qwen3-30b-a3b")
    with pytest.raises(InputError, match="moe-ffn-hidden"):
        check(replace(m, moe_ffn_hidden=770), Plan(tp=4, dp=8, ep=8))


# ---- GB200 NVL72 ------------------------------------------------------------------------------------------
def test_gb200_profile_is_the_datasheet_divided_by_72():
    hw = hardware.load("gb200")
    assert hw.peak("bf16") == pytest.approx(360e15 / 72 / 2)      # NVL72: 360 PFLOPS BF16 with sparsity
    assert hw.peak("fp8") == pytest.approx(720e15 / 72 / 2)
    assert hw.hbm_bandwidth == pytest.approx(576e12 / 72)
    assert hw.gpus_per_node == 72                                # the NVLink domain
