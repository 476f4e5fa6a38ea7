"""Issue 20: head_dim apart from d_model / heads, MoE as Qwen3 / GPT-OSS / DeepSeek are (per-expert
size, shared experts, leading dense layers), the Model/Plan type checks, the GB200 datasheet profile; MLA
(DeepSeek-V3, Kimi K2) and sliding-window attention (GPT-OSS).

Reference numbers are published parameter counts (papers, model cards) or computed by hand here."""
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.spec import hardware, models
from roofline.spec.config import Model, Plan, check
from roofline.base.errors import InputError
from roofline.model.predict import evaluate, inputs

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
        # full causal layers: s/2 keys per query; windowed layers (gpt-oss: 18 of 36, w = 128): w - w^2 / 2s
        w, s = m.swa_window or 0, m.seq_len
        keys = (m.n_layers - m.windowed_layers) * s / 2 + m.windowed_layers * (w - w * w / (2 * s))
        attention = 12 * m.n_heads * m.head_size * keys
        assert per_token == pytest.approx(6 * matmul_params + attention, rel=0.01)


def test_leading_dense_layers_sit_on_the_first_stage():
    """A dense layer much heavier than a MoE layer: with pp = 2 the first stage holds it, and the step follows
    that stage; moving the heavy MLP into the MoE experts' place changes the per-stage split, not the totals."""
    base = Model(n_layers=4, d_model=2048, n_heads=16, ffn_hidden=32768, moe_ffn_hidden=64, n_experts=4, top_k=1,
                 vocab=1024, seq_len=4096)
    plan = Plan(pp=2, dp=4, ep=4, global_batch=64)
    none, one, two = (run(replace(base, first_dense_layers=k), plan) for k in (None, 1, 2))
    slot = {k: sum(one[f"{k}_{t}"] for t in ("fwd", "bwd", "recompute", "tp_comm", "ep_comm", "host"))
            for k in ("t_layer", "t_dense_layer")}
    assert slot["t_dense_layer"] > 2 * slot["t_layer"]          # the premise: the dense layer is the heavy one
    assert (none["stage_dense_layers"], one["stage_dense_layers"], two["stage_dense_layers"]) == (0, 1, 2)
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


# ---- MLA (DeepSeek-V3, Kimi K2) -------------------------------------------------------------------------
@pytest.mark.parametrize("preset,total,active,rel_total,rel_active", [
    # DeepSeek-V3 report (arXiv:2412.19437) sec 2: 671B total, 37B activated per token, the 14B MTP module outside
    # both (not in the preset). Active here counts the input embedding and the LM head (2 x 0.93B), so it reads
    # 37.55B: +1.5 % over the rounded 37B
    ("deepseek-v3", 671e9, 37e9, 0.005, 0.02),
    # Kimi K2 report (arXiv:2507.20534): 1.04T total, 32.6B activated (no MTP layers); 1.026T / 32.86B here
    ("kimi-k2", 1.04e12, 32.6e9, 0.02, 0.02),
])
def test_mla_models_published_parameter_counts(preset, total, active, rel_total, rel_active):
    r = run(models.load(preset))
    assert r["params"] == pytest.approx(total, rel=rel_total)
    assert r["active_params"] == pytest.approx(active, rel=rel_active)


def test_deepseek_v3_attention_parameters_by_hand():
    """One DeepSeek-V3 MLA block (HF config: q_lora 1536, kv_lora 512, 128 heads of 128 + 64 RoPE, values 128):
    W_DQ 7168 x 1536, q RMSNorm 1536, W_UQ 1536 x 128 (128 + 64), W_DKV+W_KR 7168 x (512 + 64), kv RMSNorm 512,
    W_UKV 512 x 128 (128 + 128), W_O 128 x 128 x 7168 = 187,107,328 (the figure of public parameter dumps).
    Difference of a 2-layer and a 1-layer dense model = one layer = attention + MLP + 2 norms."""
    m = replace(models.load("deepseek-v3"), n_layers=2, n_experts=1, top_k=1, first_dense_layers=None,
                n_shared_experts=None, shared_ffn_hidden=None, moe_ffn_hidden=None)
    attn = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168
    assert attn == 187_107_328
    layer = attn + 3 * 7168 * 18432 + 2 * 7168
    assert run(m)["params"] - run(replace(m, n_layers=1))["params"] == layer


H, A, QL, KVL, NOPE, ROPE, V, F, VOCAB, S = 256, 4, 64, 32, 32, 16, 48, 512, 1024, 128


def small_mla(**kw):
    return replace(Model(n_layers=1, d_model=H, n_heads=A, ffn_hidden=F, vocab=VOCAB, seq_len=S, biases=False,
                         norm="rmsnorm", position="rope", tied_embeddings=False, q_lora_rank=QL, kv_lora_rank=KVL,
                         qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=V), **kw)


REPL = H * QL + QL + H * (KVL + ROPE) + KVL                      # down projections + their norms: whole on every rank
SPLIT = QL * A * (NOPE + ROPE) + KVL * A * (NOPE + V) + A * V * H   # up projections + output: split over TP


def test_mla_parameters_and_their_tp_split_by_hand():
    """Total: MLA block + gelu MLP 2 h f + 2 RMSNorms + untied V x h tables + the final norm. Per rank at tp = 2:
    the down projections (TELinear duplicated) and their norms whole, the rest halved, the tables V_pad h / 2 each."""
    m = small_mla()
    assert run(m)["params"] == REPL + SPLIT + 2 * H * F + 2 * H + 2 * VOCAB * H + H
    r = run(m, Plan(tp=2, dp=1))
    assert r["params_rank"] == REPL + (SPLIT + 2 * H * F) / 2 + 2 * H + 2 * VOCAB * H / 2


def test_mla_flops_by_hand():
    """Forward model FLOPs per sequence, no causal skip: 2 s x (h r_q + r_q a (d_n + d_r) + h (r_kv + d_r)
    + r_kv a (d_n + d_v) + a d_v h) for the projections, 2 s^2 a (d_n + d_r) for Q K^T and 2 s^2 a d_v for P V,
    2 x 2 s h f for the MLP, 2 s h V for the LM head; the step = 3 x forward."""
    proj = H * QL + QL * A * (NOPE + ROPE) + H * (KVL + ROPE) + KVL * A * (NOPE + V) + A * V * H
    fwd = 2 * S * proj + 2 * S * S * A * (NOPE + ROPE + V) + 4 * S * H * F + 2 * S * H * VOCAB
    assert run(small_mla(causal=False), Plan(global_batch=1))["flops"] == pytest.approx(3 * fwd, rel=1e-12)
    # without q_lora_rank the queries come from h directly: h x a (d_n + d_r) replaces the two Q projections
    fwd_q = fwd + 2 * S * (H * A * (NOPE + ROPE) - H * QL - QL * A * (NOPE + ROPE))
    assert run(small_mla(causal=False, q_lora_rank=None), Plan(global_batch=1))["flops"] == pytest.approx(
        3 * fwd_q, rel=1e-12)


def test_mla_down_projections_run_on_the_tokens_a_rank_holds():
    """Megatron-Core runs the down projections replicated on every TP rank on the tokens it holds: s/t of them with
    sequence parallelism, all s without (redundant work). Executed FLOPs (fwd + 2x bwd) over the t ranks differ by
    3 x t x (1 - 1/t) x 2 s h (r_q + r_kv + d_r); the model FLOPs do not."""
    m, t = small_mla(), 2
    no_sp, sp_ = (run(m, Plan(tp=t, sequence_parallel=x, global_batch=1)) for x in (False, True))
    assert no_sp["flops"] == pytest.approx(sp_["flops"], rel=1e-12)
    extra = 3 * t * (1 - 1 / t) * 2 * S * H * (QL + KVL + ROPE)
    assert no_sp["hardware_flops"] - sp_["hardware_flops"] == pytest.approx(extra, rel=1e-9)


# ---- sliding-window attention --------------------------------------------------------------------------------
@pytest.mark.parametrize("layers,every,windowed", [(36, 2, 18), (7, 3, 5), (7, None, 7), (6, 6, 5), (4, 1, 0)])
def test_windowed_layers_follow_megatron_core(layers, every, windowed):
    """Megatron-Core is_layer_window_attention: layer n (1-based) keeps full attention when n % skip_freq == 0."""
    m = Model(n_layers=layers, swa_window=128, swa_every=every)
    assert m.windowed_layers == windowed == sum(1 for n in range(1, layers + 1) if not (every and n % every == 0))


def test_windowed_attention_flops_by_hand():
    """Two layers, the first windowed (w = 96 < s = 512), causal flash: query i sees min(i + 1, w) keys, on average
    w - w^2 / 2s (the +w/2s of the exact sum dropped); a full causal layer s / 2. Forward attention FLOPs per
    sequence 4 a d_h s x keys; the step is 3x."""
    a, d, s, w = 4, 64, 512, 96
    m = Model(n_layers=2, d_model=a * d, n_heads=a, vocab=1024, seq_len=s)
    full, win = run(m, Plan(global_batch=1)), run(replace(m, swa_window=w, swa_every=2), Plan(global_batch=1))
    exact = sum(min(i + 1, w) for i in range(s)) / s
    assert exact == pytest.approx(w - w * w / (2 * s), abs=1)
    assert full["flops"] - win["flops"] == pytest.approx(3 * 4 * a * d * s * (s / 2 - (w - w * w / (2 * s))),
                                                         rel=1e-12)
    assert win["t_forward"] < full["t_forward"]          # (the step of this small model is host-bound)


@settings(max_examples=25, deadline=None)
@given(extra=st.integers(0, 4096), every=st.sampled_from([None, 1, 2, 3]), tp=st.sampled_from([1, 2]),
       attention=st.sampled_from(["flash", "unfused"]), rc=st.sampled_from(["none", "selective", "full"]))
def test_window_no_smaller_than_the_sequence_is_full_attention(extra, every, tp, attention, rc):
    m = Model(n_layers=4, d_model=256, n_heads=4, vocab=1024, seq_len=512, attention=attention)
    plan = Plan(tp=tp, dp=2, global_batch=4, recompute=rc)
    a, b = run(m, plan), run(replace(m, swa_window=512 + extra, swa_every=every), plan)
    for k in ("step_time", "flops", "hardware_flops", "memory", "params"):
        assert b[k] == pytest.approx(a[k], rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(ql=st.integers(1, 4096), nope=st.integers(1, 256), rope=st.integers(1, 128), v=st.integers(1, 256),
       w=st.integers(1, 8192), moe=st.booleans(), tp=st.sampled_from([1, 2]), sp=st.booleans())
def test_unused_mla_and_window_inputs_leave_the_model_unchanged(ql, nope, rope, v, w, moe, tp, sp):
    """kv_lora = 0 switches every MLA term off and swa_frac = 0 every windowed one: whatever the other MLA sizes and
    the window, the compiled model prices a standard-attention model as with them at 0 (to rounding)."""
    m = Model(n_layers=4, d_model=512, n_heads=8, n_kv_heads=2, vocab=1024, seq_len=256,
              n_experts=4 if moe else 1, top_k=2 if moe else 1)
    x = inputs(m, Plan(tp=tp, dp=4, ep=2 if moe else 1, sequence_parallel=sp, global_batch=8), HW)
    assert x["kv_lora"] == 0 and x["swa_frac"] == 0
    base = evaluate(x)
    noisy = evaluate({**x, "q_lora": ql, "qk_nope": nope, "qk_rope": rope, "v_head": v, "swa_window": w})
    for k in ("step_time", "flops", "hardware_flops", "memory", "params", "active_params", "params_rank"):
        assert float(noisy[k]) == pytest.approx(float(base[k]), rel=1e-12)      # (floating-point order only)


@pytest.mark.parametrize("fields,match", [
    (dict(kv_lora_rank=512), "needs qk_nope_head_dim, qk_rope_head_dim, v_head_dim"),
    (dict(q_lora_rank=1536), "without kv_lora_rank"),
    (dict(kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, n_kv_heads=8), "kv-heads"),
    (dict(swa_every=2), "swa_every"),
    (dict(swa_window=0), "model.swa_window"),
])
def test_attention_variant_fields_are_checked(fields, match):
    with pytest.raises(InputError, match=match):
        check(Model(n_heads=16, **fields), Plan())


def test_presets_carry_the_new_fields_and_the_loader_checks_them():
    assert models.load("gpt-oss-120b").windowed_layers == 18
    k2 = models.load("kimi-k2")
    assert (k2.n_heads, k2.n_experts, k2.dense_layers, k2.kv_lora_rank) == (64, 384, 1, 512)
    with pytest.raises(InputError, match="q_lora_rank"):
        models.from_dict({"q_lora_rank": 0, "kv_lora_rank": 512})
    with pytest.raises(InputError, match="swa_windw"):
        models.from_dict({"swa_windw": 128})


def test_validate_prices_deepseek_v3_rows_with_their_mtp():
    """nemo_perf.csv: the DeepSeek-V3 rows are predicted with MLA and the row's MTP depth (1, or 0 for the 25.11
    GB200 rows "w/o MTP"); none is skipped for MTP."""
    from roofline.views import validate as V

    rows = [r for r in V.read(V.dataset_path("nemo")) if r.get("model") == "DeepSeek-V3"]
    built = {}
    for r in rows:
        try:
            built[r["case_id"]] = (V.build_case(r).model, r["mtp"])
        except V.Skip as exc:
            assert "multi-token" not in str(exc)
    assert len(built) >= 17
    assert all(m.kv_lora_rank == 512 and m.q_lora_rank == 1536 and m.v_head_dim == 128 for m, _ in built.values())
    assert all((m.mtp_layers or 0) == int(mtp) for m, mtp in built.values())
    assert {m.mtp_layers for m, _ in built.values()} == {0, 1}


# ---- multi-token prediction (DeepSeek-V3 report sec 2.2; Megatron-Core multi_token_prediction.py) --------------
DSV3_MOE_LAYER = (187_107_328                     # MLA (docs/models.md, hand count above)
                  + 256 * 3 * 7168 * 2048         # routed experts, SwiGLU
                  + 3 * 7168 * 2048               # the shared expert
                  + 7168 * 256                    # router
                  + 2 * 7168)                     # two RMSNorms


def test_mtp_parameters_deepseek_v3():
    """One MTP layer: a MoE layer + enorm, hnorm, final norm (h each) + eh_proj 2h x h; embedding and head shared."""
    m = models.load("deepseek-v3")
    assert m.mtp_layers == 1
    r = run(m)
    mtp = DSV3_MOE_LAYER + 2 * 7168 * 7168 + 3 * 7168
    assert mtp == 11_610_067_968
    assert r["params_mtp"] == mtp
    # the report's 14B MTP module (685B checkpoint - 671B) counts the checkpoint's copies of embedding and head
    assert 13.5e9 - 0.5e9 <= mtp + 2 * 129280 * 7168 < 14.5e9
    assert r["params"] == pytest.approx(671.0e9, rel=1e-3)          # the 671B exclude MTP (report sec 4.2)
    assert run(replace(m, mtp_layers=0))["params_mtp"] == 0


def test_mtp_model_flops_deepseek_v3():
    """MTP adds per token: a MoE layer's forward (2 x active GEMM params + causal MLA attention
    2 s a (d_qk + d_v) / 2), eh_proj 2 (2h) h and one more LM head 2 h V; x3 for forward + backward."""
    m = models.load("deepseek-v3")
    plan = Plan(global_batch=8)
    on, off = run(m, plan), run(replace(m, mtp_layers=0), plan)
    s, h, V = 4096, 7168, 129280
    # 187,107,328 MLA parameters less its two RMSNorms (r_q + r_kv = 2048, not GEMMs)
    layer = 2 * (187_107_328 - 2048 + 8 * 3 * h * 2048 + 3 * h * 2048 + h * 256) + 2 * s * 128 * (192 + 128) / 2
    per_token = layer + 2 * 2 * h * h + 2 * h * V
    assert on["flops"] - off["flops"] == pytest.approx(3 * 8 * s * per_token, rel=1e-9)
    assert on["hardware_flops"] > off["hardware_flops"]


def test_mtp_sits_on_the_last_stage():
    m = models.load("deepseek-v3")
    plan = Plan(tp=8, pp=8, ep=8, dp=8, global_batch=64, sequence_parallel=True, uneven_stages=True)
    on, off = run(m, plan), run(replace(m, mtp_layers=0), plan)
    assert on["mem_last_stage"] > off["mem_last_stage"]
    assert on["mem_first_stage"] == pytest.approx(off["mem_first_stage"], rel=1e-12)
    assert on["t_head_fwd"] > off["t_head_fwd"]
    assert on["t_embed_fwd"] == off["t_embed_fwd"]
    assert on["stage_mtp_layers"] in (0.0, 1.0)
    assert on["step_time"] >= off["step_time"]
    one = run(m, Plan(tp=8, ep=8, dp=8, global_batch=64, sequence_parallel=True))     # p = 1: one stage holds all
    assert one["stage_mtp_layers"] == 1.0


def test_mtp_layers_must_be_a_count():
    with pytest.raises(InputError, match="mtp_layers"):
        check(replace(models.load("deepseek-v3"), mtp_layers=-1), Plan())


# ---- MLA's TP communication under sequence parallelism --------------------------------------------------------
def test_mla_sp_gathers_latents_and_reduces_replicated_grads():
    m = models.load("deepseek-v3")
    sp_on = run(m, Plan(tp=8, ep=8, dp=8, global_batch=64, sequence_parallel=True))
    sp_off = run(m, Plan(tp=8, ep=8, dp=8, global_batch=64, sequence_parallel=False))
    assert sp_on["t_tp_grad_reduce"] > 0
    assert sp_off["t_tp_grad_reduce"] == 0
    assert run(m, Plan(tp=1, ep=8, dp=8, global_batch=64))["t_tp_grad_reduce"] == 0
    # the latents (1536 + 512 + 64 = 2112 per token) are narrower than h = 7168: the per-layer gather shrinks
    wide = run(replace(m, q_lora_rank=7168, kv_lora_rank=7168), Plan(tp=8, ep=8, dp=8, global_batch=64,
                                                                     sequence_parallel=True))
    assert sp_on["t_layer_tp_comm"] < wide["t_layer_tp_comm"]


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), seq_par=st.booleans(), junk=st.integers(1, 4096))
def test_models_without_mla_ignore_the_mla_terms(tp, seq_par, junk):
    """Without MLA (kv_lora = 0) the MLA sizes change nothing: the latent gather and the replicated-gradient
    all-reduce are switched off."""
    m = models.load("llama3-8b") if "llama3-8b" in models.list_ids() else Model(n_layers=4, d_model=1024, n_heads=8)
    plan = Plan(tp=tp, dp=2, global_batch=4, sequence_parallel=seq_par and tp > 1)
    x = inputs(m, plan, HW)
    base = evaluate(x)
    y = dict(x, q_lora=junk, qk_rope=junk, qk_nope=junk, v_head=junk)
    other = evaluate(y)
    assert float(base["t_tp_grad_reduce"]) == 0
    for k in ("step_time", "t_tp_comm", "tp_comm_total", "memory", "flops"):
        assert float(other[k]) == float(base[k]), k
