"""Issue 16, items 1-5: data-parallel groups with CP and EP, LM-head logits, MFU <= HFU, the TP overlap window.

Every expected number is computed here by hand from the model's shapes (not read from the code), and the
issue's own figures (6.35 GiB, 8.20 GiB, 5.87 GiB) are checked as well.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from roofline.spec import hardware, models
from roofline.spec.config import Model, Plan
from roofline.model.predict import evaluate, inputs, predict

H100 = hardware.load("h100-sxm")
GiB = 2 ** 30


def vocab_pad(V, tp):
    """Megatron pads the vocabulary to a multiple of 128 x tp (--make-vocab-size-divisible-by 128)."""
    return math.ceil(V / (128 * tp)) * 128 * tp


# ---- 1. CP is part of the data-parallel group ------------------------------------------------------
def test_llama3_70b_optimizer_sharded_over_dp_times_cp():
    """Llama-3 70B, tp 8 pp 4 dp 1 cp 4, distributed optimizer: 12 B/param over d x c = 4 ranks (issue: 6.35 GiB)."""
    h, kv, f, V, l = 8192, 8 * 128, 28672, 128256, 80
    layer_rank = (h * (h + 2 * kv) + h * h + 3 * h * f) / 8 + 2 * h      # attention + SwiGLU split by t; 2 RMSNorms
    stage = l // 4 * layer_rank + vocab_pad(V, 8) * h / 8                 # 20 layers + the embedding table shard
    expected = stage * 12 / (1 * 4)
    p = predict(models.load("llama3-70b"), Plan(tp=8, pp=4, dp=1, cp=4, global_batch=16, sharding="distributed",
                                                sequence_parallel=True), H100)
    assert p.memory["optimizer"].magnitude == pytest.approx(expected, rel=1e-9)
    assert p.memory["optimizer"].magnitude / GiB == pytest.approx(6.35, abs=0.01)


def test_cp_ranks_reduce_gradients_like_dp_ranks():
    """dp 1 x cp 4 reduces the same gradients over the same 4 ranks (stride t) as dp 4 x cp 1: not zero."""
    m = models.load("llama3-8b")
    base = dict(tp=8, pp=1, micro_batch=1, global_batch=8, sharding="distributed", overlap_grad_reduce=0.0,
                overlap_param_gather=0.0)
    cp4 = predict(m, Plan(dp=1, cp=4, **base), H100).raw
    dp4 = predict(m, Plan(dp=4, cp=1, **base), H100).raw
    assert cp4["dp_comm_total"] > 0 and cp4["t_dp_comm"] > 0
    assert cp4["dp_comm_total"] == pytest.approx(dp4["dp_comm_total"], rel=1e-12)
    # and the optimizer state is the same fraction: 1/4 of the unsharded 12 B/param
    assert cp4["mem_optimizer"] == pytest.approx(dp4["mem_optimizer"], rel=1e-12)


# ---- 2. EP in expert sharding -----------------------------------------------------------------------
def test_mixtral_expert_optimizer_sharded_over_expert_dp_group():
    """Mixtral 8x7B tp 1 pp 4 dp 16 ep 8: experts' Adam state over d c / e = 2 ranks, the rest over 16 (8.20 GiB)."""
    h, kv, f, E, V, l = 4096, 8 * 128, 14336, 8, 32000, 32
    attn = h * (h + 2 * kv) + h * h
    expert = 3 * h * f                                            # SwiGLU: two up projections and one down
    layers = l // 4
    expert_rank = layers * E / 8 * expert                         # E / ep experts per rank, t = 1
    dense_rank = layers * (attn + h * E + 2 * h) + vocab_pad(V, 1) * h   # attention, router, norms, one table
    expected = dense_rank * 12 / 16 + expert_rank * 12 / (16 / 8)
    p = predict(models.load("mixtral-8x7b"), Plan(tp=1, pp=4, dp=16, ep=8, global_batch=256, sharding="distributed"),
                H100)
    assert p.memory["optimizer"].magnitude == pytest.approx(expected, rel=1e-9)
    assert p.memory["optimizer"].magnitude / GiB == pytest.approx(8.20, abs=0.01)
    # weights are not sharded by the distributed optimizer: every rank holds its E/e experts in bf16
    assert p.memory["weights"].magnitude == pytest.approx(2 * (dense_rank + expert_rank), rel=1e-9)


def test_zero3_shards_experts_over_expert_dp_group():
    h, kv, f, E, V, l = 4096, 8 * 128, 14336, 8, 32000, 32
    expert_rank = l * E / 4 * 3 * h * f
    dense_rank = l * (h * (h + 2 * kv) + h * h + h * E + 2 * h) + 2 * vocab_pad(V, 1) * h   # p = 1: embedding + head
    p = predict(models.load("mixtral-8x7b"), Plan(tp=1, pp=1, dp=8, ep=4, global_batch=8, sharding="zero3"), H100)
    assert p.memory["weights"].magnitude == pytest.approx(2 * (dense_rank / 8 + expert_rank / 2), rel=1e-9)


# ---- 3. LM-head logits in activation memory ------------------------------------------------------------
def test_llama3_8b_logits_with_full_recompute():
    """pp 1, s 8192, b 1: logits s V (2 + 4) bytes = 5.87 GiB, next to 32 layer inputs and one layer's working set."""
    s, h, kv, f, V, l = 8192, 4096, 8 * 128, 14336, 128256, 32
    p = predict(models.load("llama3-8b"), Plan(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1, recompute="full"),
                H100).raw
    logits = s * vocab_pad(V, 1) * (2 + 4)
    assert p["mem_logits"] == pytest.approx(logits, rel=1e-12)
    assert p["mem_logits"] / GiB == pytest.approx(5.87, abs=0.01)
    # Korthikanti 2022 Table 2 terms with flash attention, bf16, no dropout, GQA and SwiGLU, for the one layer
    # being recomputed: 2 norm inputs + QKV input + fc1 input (4 sh x 2 B), Q and the attention-projection input
    # (2 sh x 2 B), K and V (2 s kv x 2 B), the SwiGLU inputs and output (3 s f x 2 B)
    working = 2 * s * (4 * h + 2 * h + 2 * kv + 3 * f)
    inputs_kept = l * 2 * s * h                                   # full recompute keeps each layer's input
    head_input = 2 * s * h                                        # final-norm output, saved by the LM head
    assert p["mem_activations"] == pytest.approx(logits + inputs_kept + working + head_input, rel=1e-12)


def test_last_stage_heavier_when_its_logits_outweigh_the_first_stages_micro_batches():
    """Llama-3 8B pp 4 (1F1B, m = 8): the first stage holds 4 micro-batches x 8 layer inputs, the last one
    micro-batch and the logits (7.4 GiB of the 128k vocabulary)."""
    s, h, V = 8192, 4096, 128256
    p = predict(models.load("llama3-8b"), Plan(tp=1, pp=4, dp=1, micro_batch=1, global_batch=8, recompute="full"),
                H100).raw
    layer_input = 2 * s * h
    logits = s * vocab_pad(V, 1) * (2 + 4)
    # same weights and working set on both stages; activations differ by the in-flight layers, logits, head input
    diff = logits + layer_input - (4 - 1) * 8 * layer_input
    assert p["mem_last_stage"] - p["mem_first_stage"] == pytest.approx(diff, rel=1e-9)
    assert p["memory"] == pytest.approx(p["mem_last_stage"]) and p["mem_last_stage"] > p["mem_first_stage"]
    # the breakdown is the heavier stage's, and sums to the total
    assert p["memory"] == pytest.approx(p["mem_weights"] + p["mem_gradients"] + p["mem_optimizer"]
                                        + p["mem_activations"], rel=1e-12)


def test_first_stage_heavier_without_recompute():
    p = predict(models.load("llama3-8b"), Plan(tp=1, pp=4, dp=1, micro_batch=1, global_batch=8), H100).raw
    assert p["memory"] == pytest.approx(p["mem_first_stage"]) and p["mem_first_stage"] > p["mem_last_stage"]


# ---- 4. MFU never above HFU ---------------------------------------------------------------------------------
def test_dropped_tokens_are_not_model_work():
    """Capacity factor 0.5: half the routed tokens are dropped; the model FLOPs of the MLP halve with them."""
    base = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=1024, mlp="swiglu", n_experts=8, top_k=2)
    plan = Plan(tp=1, pp=1, dp=8, ep=8, micro_batch=1, global_batch=8)
    from dataclasses import replace
    full = predict(replace(base, capacity_factor=1.0), plan, H100)
    half = predict(replace(base, capacity_factor=0.5), plan, H100)
    B, s, h, f, l, K = 8, 1024, 1024, base.ffn, 4, 2
    mlp_model = 3 * B * l * 2 * s * h * f * 3 * K                # fwd + bwd, SwiGLU's 3 GEMMs, K experts per token
    assert full.raw["flops"] - half.raw["flops"] == pytest.approx(mlp_model / 2, rel=1e-9)
    assert half.mfu <= half.hfu <= 1


def test_padding_is_executed_not_model_work():
    """Capacity factor 1.5 (docs/models.md "Capacity and routing imbalance"): the expert GEMMs and the all-to-all run
    1.5 times the even share of routed tokens, the model FLOPs stay the dropless ones."""
    base = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=1024, mlp="swiglu", n_experts=8, top_k=2)
    plan = Plan(tp=1, pp=1, dp=8, ep=8, micro_batch=1, global_batch=8)
    from dataclasses import replace
    one = predict(replace(base, capacity_factor=1.0), plan, H100).raw
    pad = predict(replace(base, capacity_factor=1.5), plan, H100).raw
    assert pad["flops"] == pytest.approx(one["flops"], rel=1e-12)
    B, s, h, f, l, K = 8, 1024, 1024, base.ffn, 4, 2
    mlp = 3 * B * l * 2 * s * h * f * 3 * K                     # fwd + bwd, SwiGLU's 3 GEMMs, K experts per token
    assert pad["hardware_flops"] - one["hardware_flops"] == pytest.approx(0.5 * mlp, rel=1e-9)
    # the all-to-all's bytes grow by half; its per-peer latency does not
    assert one["t_ep_comm"] < pad["t_ep_comm"] < 1.5 * one["t_ep_comm"]
    assert one["t_forward"] < pad["t_forward"] < 1.5 * one["t_forward"]


# ---- 5. the TP overlap window with full recomputation --------------------------------------------------------
def _tp_window(recompute):
    """The compute window TP hides behind, per layer: (tp_comm_total - exposed) / (m l) when TP comm is larger."""
    m = Model(n_layers=4, d_model=4096, n_heads=32, vocab=32000, seq_len=4096)
    x = inputs(m, Plan(tp=8, pp=1, dp=1, micro_batch=1, global_batch=2, sequence_parallel=True, recompute=recompute,
                       overlap_tp=1.0), H100)
    for c in ("ag", "rs"):
        x[f"bw_{c}_intra"] = x[f"bw_{c}_intra"] / 1e4            # TP communication far above the GEMM time
    r = evaluate(x)
    return (float(r["tp_comm_total"]) - float(r["t_tp_comm"])) / (float(r["micro_batches"]) * 4)


def test_tp_window_is_forward_backward_and_recompute():
    """forward (1x) + backward (2x) GEMMs, plus one forward recomputed: (3 + 1) / 3, not 4.5 / 3."""
    assert _tp_window("full") / _tp_window("none") == pytest.approx(4 / 3, rel=1e-9)


# ---- invariants ---------------------------------------------------------------------------------------------
TIME_TERMS = ("t_forward", "t_backward", "t_recompute", "t_tp_comm", "t_cp_comm", "t_ep_comm", "t_host_overhead",
              "t_pp_bubble", "t_pp_comm", "t_dp_comm", "t_optimizer", "tp_comm_total", "dp_comm_total", "step_time")


@settings(max_examples=60, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]), dpk=st.sampled_from([1, 2, 4]),
       cp=st.sampled_from([1, 2]), ep=st.sampled_from([1, 2, 4]), m=st.integers(1, 12), mb=st.sampled_from([1, 2]),
       experts=st.sampled_from([1, 4, 8]), cf=st.floats(0.25, 2.0), rc=st.sampled_from(["none", "selective", "full", "op"]),
       sharding=st.sampled_from(["none", "distributed", "zero2", "zero3"]), ov=st.floats(0.0, 1.0),
       gpu=st.sampled_from(["a100-sxm4-80gb", "h100-sxm", "b200"]))
def test_mfu_below_hfu_below_one_and_no_negative_time(tp, pp, dpk, cp, ep, m, mb, experts, cf, rc, sharding, ov, gpu):
    ep = ep if experts > 1 and experts % ep == 0 else 1
    dp = ep * dpk
    model = Model(n_layers=pp * 2, d_model=1024, n_heads=16, n_kv_heads=8, vocab=32000, seq_len=2048, mlp="swiglu",
                  n_experts=experts, top_k=min(2, experts), capacity_factor=cf if experts > 1 else 1.0)
    plan = Plan(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, micro_batch=mb, global_batch=mb * dp * m, recompute=rc,
                sequence_parallel=tp > 1, sharding=sharding, overlap_grad_reduce=ov, overlap_param_gather=ov,
                overlap_tp=ov)
    r = predict(model, plan, hardware.load(gpu)).raw
    assert 0 < r["mfu"] <= r["hfu"] * (1 + 1e-12) and r["hfu"] <= 1
    for k in TIME_TERMS:
        assert r[k] >= 0, (k, r[k])
    assert 0 <= r["pp_bubble"] <= 1
    assert r["memory"] == pytest.approx(max(r["mem_first_stage"], r["mem_last_stage"]), rel=1e-12)


def test_bubble_fraction_at_most_one_when_fewer_micro_batches_than_stages():
    """issue 22: p = 8 with m = 1 printed a 700 % bubble; the bubble is 7 of the pipeline's 8 slots (the textbook
    fraction), and its time the fill and drain through the 7 stages that wait, each lighter than the slowest."""
    model = Model(n_layers=16, d_model=512, n_heads=8, vocab=1000, seq_len=256)
    p = predict(model, Plan(pp=8, dp=1, micro_batch=1, global_batch=1), H100)
    assert p.raw["pp_bubble"] == pytest.approx(7 / 8)
    assert p.raw["pp_bubble_ratio"] == pytest.approx(7.0)
    assert 0 < p.bubble_fraction <= 7 / 8


def test_exposed_communication_is_never_negative_under_rounding():
    """0.1 + 0.2 - 0.3 is 5.6e-17 in binary floating point: the exposed part of a fully hidden transfer is 0."""
    from roofline.model.formulas import comm
    from roofline.model.formulas import symbols as S
    import sympy as sp
    t, w, o = sp.symbols("t w o", positive=True)
    # the interference of the hidden part (tests/test_overlap.py) on an A100 (108 SMs) and without an SM count (1)
    f = {n: sp.lambdify((t, w, o), comm.exposed(t, w, o).subs({S.sms: n, S.nccl_sms: 16}), "numpy") for n in (1, 108)}
    vals = np.array([0.1 + 0.2, 0.3, 1e-18, 7.3e-4])
    for a in vals:
        for b in vals:
            for g in f.values():
                assert g(a, b, 1.0) >= 0 and g(a, b, 0.5) >= 0
    assert f[1](0.3, 0.1 + 0.2, 1.0) == 0.0
    assert f[108](0.3, 0.1 + 0.2, 1.0) == pytest.approx(0.3 * 16 / 108)


def test_megatron_mfu_convention_is_narayanan_eq3():
    """Item 7: Megatron-LM's count (full s x s attention, padded vocabulary) is Narayanan et al. 2021 eq. 3,
    72 B s l h^2 (1 + s/6h + V/12lh), exactly for GPT-3 175B (V padded to 128 x 8 = 51,200); ours halves the causal
    attention and takes the unpadded 50,257, so it is lower, and MFU scales with the count."""
    from roofline.model.predict import evaluate, inputs
    m = models.load("gpt3-175b")
    r = evaluate(inputs(m, Plan(tp=8, pp=8, dp=16, micro_batch=1, global_batch=1536), hardware.load("a100-sxm4-80gb")))
    B, s, L, h, V = 1536, 2048, 96, 12288, 51200
    eq3 = 72 * B * s * L * h ** 2 * (1 + s / (6 * h) + V / (12 * h * L))
    assert float(r["flops_megatron"]) == pytest.approx(eq3, rel=1e-12)
    ours = 72 * B * s * L * h ** 2 * (1 + s / (12 * h) + 50257 / (12 * h * L))
    assert float(r["flops"]) == pytest.approx(ours, rel=1e-12)
    assert float(r["mfu_megatron"]) / float(r["mfu"]) == pytest.approx(eq3 / ours, rel=1e-12)


def test_mfu_convention_flag_names_the_count(cli_main):      # in-process: the flag's parsing and its table line
    args = ["transformer", "--model", "gpt3-1.3b", "--gpu", "a100-sxm4-80gb", "--dp", "8", "--global-batch", "64"]
    a, b = cli_main(*args), cli_main(*args, "--mfu-convention", "megatron")
    assert a.returncode == b.returncode == 0
    assert "roofline convention" in a.stdout and "megatron convention" in b.stdout
    bad = cli_main(*args, "--mfu-convention", "palm")
    assert bad.returncode == 2 and "--mfu-convention" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
