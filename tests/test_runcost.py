"""Run-cost model (reference 002): every FLOP and byte is an output of the compiled model (step.volumes),
checked here against hand-computed volumes; the fixes over the old re-derivation are tested by hand too."""
import dataclasses
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.spec import hardware, models
from roofline.spec.config import Model, Plan
from roofline.model.predict import predict
from roofline.views.runcost import AXES, run_cost

HW = hardware.load("a100-sxm4-80gb")                 # 8 GPUs per node
M = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=2048, tied_embeddings=False,
          position="rope", biases=False)
MOE = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=2048, tied_embeddings=False,
            position="rope", biases=False, n_experts=8, top_k=2)
D = 1e10
BF16, FP32 = 2, 4


def per_step(rc, axis, key):
    return rc["bytes_per_gpu"][axis][key] / rc["steps"]


# ---- GPT-3 175B, tp 8 pp 8 dp 16 (Narayanan et al. 2021), by hand ------------------------------------------
G3 = models.load("gpt3-175b")
G3_PLAN = Plan(tp=8, pp=8, dp=16, micro_batch=1, global_batch=1536)


def test_gpt3_175b_volumes_by_hand():
    rc = run_cost(G3, G3_PLAN, HW, 300e9)
    s, h, L, t, p, d = 2048, 12288, 96, 8, 8, 16
    m, layers = 1536 // 16, L // p                                  # 96 micro-batches, 12 layers per GPU
    act = s * 1 * h * BF16                                          # one micro-batch's activations, 50 MB
    # TP: 2 all-reduces per layer per pass, 2(t-1)/t x size each; backward the same (no recompute)
    tp_layer = 2 * act * 2 * (t - 1) / t
    assert tp_layer == 176160768
    assert per_step(rc, "tp", "tx_fwd") == pytest.approx(m * layers * tp_layer, rel=1e-12)
    assert per_step(rc, "tp", "tx_bwd") == pytest.approx(m * layers * tp_layer, rel=1e-12)
    assert rc["bytes_per_gpu"]["tp"]["inter"] == 0                   # t = 8 GPUs of one node
    # PP: p - 1 = 7 boundaries per micro-batch, averaged over p GPUs, across nodes. Without SP every TP rank sends the
    # whole activation under Megatron-Core (get_tensor_shapes); under Megatron-LM 2021's scatter/gather each sends
    # act / t and the TP group all-gathers it over NVLink, (t-1)/t x act per rank
    pp = m * (p - 1) / p * act
    assert per_step(rc, "pp", "tx_fwd") == pytest.approx(pp, rel=1e-12) == per_step(rc, "pp", "tx_bwd")
    assert per_step(rc, "pp", "inter") == pytest.approx(2 * pp, rel=1e-12)
    sg = run_cost(G3, dataclasses.replace(G3_PLAN, pp_scatter_gather=True), HW, 300e9)
    assert per_step(sg, "pp", "tx_fwd") == pytest.approx(pp / t + pp * (t - 1) / t, rel=1e-12)
    assert per_step(sg, "pp", "inter") == pytest.approx(2 * pp / t, rel=1e-12)
    # DP: all-reduce of the fp32 gradients of the GPU's 1/(t p) of the parameters, 2(d-1)/d, once per step;
    # parameters 12 l h^2 + 13 l h + (V + s + 2) h (tied embeddings, learned positions, final norm)
    params = L * (12 * h * h + 13 * h) + (50257 + s + 2) * h
    assert rc["params"]["total"] == params
    dp = 2 * (d - 1) / d * params / (t * p) * FP32
    assert per_step(rc, "dp", "tx_bwd") == pytest.approx(dp, rel=1e-12)
    assert rc["bytes_per_gpu"]["dp"]["tx_fwd"] == 0
    assert per_step(rc, "dp", "inter") == pytest.approx(dp, rel=1e-12)   # stride t = 8: one rank per node
    for axis in ("cp", "ep"):
        assert rc["bytes_per_gpu"][axis] == {k: 0 for k in ("tx_fwd", "tx_bwd", "rx_fwd", "rx_bwd", "inter")}
    # FLOP: 6 N D over the matmul weights (12 l h^2: no norms, no biases), attention 3 x 4 s h l / 2 per token
    # (causal), LM head 3 x 2 h V per token
    tokens = 300e9
    f = rc["flop"]
    assert f["n"] == pytest.approx(12 * L * h * h, rel=1e-12)
    assert f["attention"] == pytest.approx(3 * tokens * L * 4 * s * h / 2, rel=1e-12)
    assert f["lm_head"] == pytest.approx(3 * tokens * 2 * h * 50257, rel=1e-12)
    assert f["total"] == pytest.approx(6 * 12 * L * h * h * tokens + f["attention"] + f["lm_head"], rel=1e-12)


def test_full_recompute_repeats_the_forward_collectives():
    a = run_cost(G3, G3_PLAN, HW, 300e9)
    b = run_cost(G3, Plan(tp=8, pp=8, dp=16, micro_batch=1, global_batch=1536, recompute="full"), HW, 300e9)
    assert b["bytes_per_gpu"]["tp"]["tx_bwd"] == pytest.approx(2 * a["bytes_per_gpu"]["tp"]["tx_bwd"], rel=1e-12)
    assert b["bytes_per_gpu"]["tp"]["tx_fwd"] == a["bytes_per_gpu"]["tp"]["tx_fwd"]
    assert b["bytes_per_gpu"]["pp"] == a["bytes_per_gpu"]["pp"] and b["bytes_per_gpu"]["dp"] == a["bytes_per_gpu"]["dp"]
    assert b["flop"] == a["flop"]                                     # recomputation is not model work


# ---- FLOP ---------------------------------------------------------------------------------------------------
def test_flop_is_the_models_flops_and_6nd_counts_matmul_weights():
    plan = Plan(tp=2, pp=2, dp=2, micro_batch=1, global_batch=8)
    rc = run_cost(M, plan, HW, D)
    f = rc["flop"]
    # the step formula's model FLOPs x steps, exactly (was: within 0.1 %, norms counted as FLOPs)
    assert f["total"] == pytest.approx(predict(M, plan, HW).raw["flops"] * rc["steps"], rel=1e-12)
    h, s, L, V = M.d_model, M.seq_len, M.n_layers, M.vocab
    assert f["n"] == pytest.approx(12 * L * h * h, rel=1e-12)         # not the 2 l h norm weights
    assert rc["params"]["non_embedding_active"] == 12 * L * h * h + 2 * L * h
    assert f["attention"] == pytest.approx(3 * D * L * 4 * s * h / 2, rel=1e-12)
    assert f["lm_head"] == pytest.approx(3 * D * 2 * h * V, rel=1e-12)
    assert f["total"] == pytest.approx(f["six_nd"] + f["attention"] + f["lm_head"], rel=1e-12)
    assert f["backward"] == pytest.approx(2 * f["forward"], rel=1e-12)


# ---- the fixes over the old re-derivation ------------------------------------------------------------------
def test_moe_expert_tp_gather_scatter_and_sp_split_dispatch():
    """tp 2 with SP, ep 4: the dispatcher all-to-alls the s b / t tokens a rank holds (not s b), and each rank
    all-gathers its received tokens over TP and reduce-scatters the expert outputs back (TP bytes)."""
    plan = Plan(tp=2, dp=8, ep=4, micro_batch=1, global_batch=8, sequence_parallel=True)
    rc = run_cost(MOE, plan, HW, D)
    s, h, L, t, e, k = 2048, 1024, 4, 2, 4, 2
    tokens = s                                                      # one micro-batch, one sequence
    a2a = 2 * (e - 1) / e * (tokens / t) * k * h * BF16               # dispatch + combine
    assert per_step(rc, "ep", "tx_fwd") == pytest.approx(L * a2a, rel=1e-12)
    etp = 2 * (t - 1) / t * tokens * k * h * BF16                     # all-gather + reduce-scatter
    sp_pair = 2 * (t - 1) / t * tokens * h * BF16                     # one SP all-gather + reduce-scatter
    assert per_step(rc, "tp", "tx_fwd") == pytest.approx(L * (sp_pair + etp), rel=1e-12)   # attention + experts


def test_moe_leading_dense_layers_send_no_expert_traffic():
    dense_first = dataclasses.replace(MOE, first_dense_layers=2)
    a = run_cost(MOE, Plan(dp=8, ep=8, micro_batch=1, global_batch=8), HW, D)
    b = run_cost(dense_first, Plan(dp=8, ep=8, micro_batch=1, global_batch=8), HW, D)
    assert b["bytes_per_gpu"]["ep"]["tx_fwd"] == pytest.approx(a["bytes_per_gpu"]["ep"]["tx_fwd"] / 2, rel=1e-12)


def test_dp_reduces_over_dp_times_cp_hierarchically():
    """Dense gradients reduce over the d x c ranks that hold the same weights (Megatron-Core intra_dp_cp_group);
    one ring over all of them (NCCL across nodes: formulas/comm.py), 2(p-1)/p of the data, of which each GPU's NIC
    carries 1/k (the node's k NICs share the ring's inter-node hops) and NVLink the rest."""
    plan = Plan(tp=2, cp=2, dp=4, micro_batch=1, global_batch=8)
    rc = run_cost(M, plan, HW, D)
    n = rc["params"]["total"] / 2 * FP32                             # gradient bytes per GPU (t = 2, p = 1)
    group, k = 8, 4                                                  # d c = 8 ranks, stride 2: 4 per node
    assert per_step(rc, "dp", "tx_bwd") == pytest.approx(2 * (group - 1) / group * n, rel=1e-12)
    ring = 2 * (group - 1) / group * n
    intra, inter = ring * (k - 1) / k, ring / k
    assert per_step(rc, "dp", "tx_bwd") == pytest.approx(intra + inter, rel=1e-12)
    assert per_step(rc, "dp", "inter") == pytest.approx(inter, rel=1e-12)
    # CP: c - 1 ring hops of the K, V chunk 2 (s/c) h_kv / t per layer; backward 2x
    hop = 2 * BF16 * (2048 / 2) * 1024 / 2
    assert per_step(rc, "cp", "tx_fwd") == pytest.approx(2 * 4 * hop, rel=1e-12)     # m = 2, 4 layers
    assert per_step(rc, "cp", "tx_bwd") == pytest.approx(2 * 2 * 4 * hop, rel=1e-12)


def test_zero2_reduce_scatters_every_micro_batch():
    """ZeRO-2 reduce-scatters the gradients after each micro-batch's backward (Rajbhandari et al. 2020 sec
    5.2): m x (d-1)/d; ZeRO-1 once per step; both all-gather the updated parameters once."""
    z1 = run_cost(M, Plan(dp=4, micro_batch=1, global_batch=8, sharding="zero1"), HW, D)
    z2 = run_cost(M, Plan(dp=4, micro_batch=1, global_batch=8, sharding="zero2"), HW, D)
    n = z1["params"]["total"]
    assert per_step(z1, "dp", "tx_bwd") == pytest.approx(3 / 4 * n * FP32, rel=1e-12)
    assert per_step(z2, "dp", "tx_bwd") == pytest.approx(2 * 3 / 4 * n * FP32, rel=1e-12)    # m = 2
    assert per_step(z1, "dp", "tx_fwd") == pytest.approx(3 / 4 * n * BF16, rel=1e-12) == per_step(z2, "dp", "tx_fwd")
    z3 = run_cost(M, Plan(dp=4, micro_batch=1, global_batch=8, sharding="zero3"), HW, D)
    assert per_step(z3, "dp", "tx_fwd") == pytest.approx(2 * 3 / 4 * n * BF16, rel=1e-12)   # m gathers
    assert per_step(z3, "dp", "tx_bwd") == pytest.approx(2 * 3 / 4 * n * (BF16 + FP32), rel=1e-12)


def test_tp_bytes_by_hand_and_2d_split():
    plan = Plan(tp=8, micro_batch=1, global_batch=2)
    rc = run_cost(M, plan, HW, D)
    S = BF16 * M.seq_len * M.d_model
    step = 2 * M.n_layers * 2 * 2 * (7 / 8) * S                      # m = 2 micro-batches
    assert per_step(rc, "tp", "tx_fwd") == pytest.approx(step, rel=1e-12)
    assert rc["bytes_per_gpu"]["tp"]["inter"] == 0
    two_d = run_cost(M, plan, HW, D, tp_intra=4, tp_inter=2)
    # one ring over the 8 ranks, 2(8-1)/8 S in all; each GPU's NIC carries 1/t_intra = 1/4 of it
    tp2 = two_d["bytes_per_gpu"]["tp"]
    assert tp2["tx_fwd"] == pytest.approx(rc["bytes_per_gpu"]["tp"]["tx_fwd"], rel=1e-12)
    assert tp2["inter"] / (tp2["tx_fwd"] + tp2["tx_bwd"]) == pytest.approx(0.25, rel=1e-12)
    assert two_d["partition"]["tp_inter"] == 2


def test_sequence_parallel_moves_the_same_bytes():
    """SP's all-gather + reduce-scatter move an all-reduce's bytes, (t-1)/t n each against 2 (t-1)/t n (Korthikanti
    et al. 2022 sec 4.2.2): the forward is unchanged. The Megatron backward (tp_async_dgrad) also re-gathers the
    column-parallel input for its wgrad: AG(out grad) + AG(input) + RS(dgrad) = 3/2 of the all-reduce it replaces;
    without it the backward mirrors the forward, the same bytes."""
    for async_dgrad in (True, False):
        kw = dict(tp=4, micro_batch=1, global_batch=2, tp_async_dgrad=async_dgrad)
        a = run_cost(M, Plan(**kw), HW, D)["bytes_per_gpu"]["tp"]
        b = run_cost(M, Plan(**kw, sequence_parallel=True), HW, D)["bytes_per_gpu"]["tp"]
        assert a["tx_bwd"] > 0
        assert b["tx_fwd"] == pytest.approx(a["tx_fwd"], rel=1e-12)
        assert b["tx_bwd"] == pytest.approx((1.5 if async_dgrad else 1.0) * a["tx_bwd"], rel=1e-12)
        if not async_dgrad:
            assert a == pytest.approx(b, rel=1e-12)


def test_moe_expert_bytes_and_active_parameters():
    rc = run_cost(MOE, Plan(dp=8, ep=8, micro_batch=1, global_batch=8), HW, D)
    a2a = 2 * 7 / 8 * 2048 * 2 * 1024 * BF16
    assert per_step(rc, "ep", "tx_fwd") == pytest.approx(4 * a2a, rel=1e-12)
    assert rc["params"]["active"] < rc["params"]["total"] and rc["params"]["expert"] > 0
    no_ep = run_cost(MOE, Plan(dp=8, micro_batch=1, global_batch=8), HW, D)
    assert no_ep["bytes_per_gpu"]["ep"]["tx_fwd"] == 0


# ---- invariants over plans ---------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2, 8]),
       cp=st.sampled_from([1, 2]), m=st.sampled_from([1, 3]), sharding=st.sampled_from(["none", "zero1", "zero3"]),
       moe=st.booleans(), recompute=st.sampled_from(["none", "full"]))
def test_volumes_are_consistent(tp, pp, dp, cp, m, sharding, moe, recompute):
    model = MOE if moe else M
    plan = Plan(tp=tp, pp=pp, dp=dp, cp=cp, ep=dp if moe else 1, micro_batch=1, global_batch=m * dp,
                sharding=sharding, recompute=recompute, sequence_parallel=moe and tp > 1)
    rc = run_cost(model, plan, HW, D)
    for axis in AXES:
        a = rc["bytes_per_gpu"][axis]
        assert a["tx_fwd"] >= 0 and a["tx_bwd"] >= 0 and a["rx_fwd"] == a["tx_fwd"] and a["rx_bwd"] == a["tx_bwd"]
        assert 0 <= a["inter"] <= (a["tx_fwd"] + a["tx_bwd"]) * (1 + 1e-12)
        if {"tp": tp, "cp": cp, "pp": pp, "ep": plan.ep, "dp": dp * cp}[axis] == 1:
            assert a["tx_fwd"] == a["tx_bwd"] == 0          # a group of one rank sends nothing
    tot = rc["totals"]
    assert tot["tx_fwd"] == pytest.approx(rc["n_gpus"] * sum(a["tx_fwd"] for a in rc["bytes_per_gpu"].values()))
    assert tot["flop"] == pytest.approx(predict(model, plan, HW).raw["flops"] * rc["steps"], rel=1e-12)
    # bytes per GPU scale with the tokens
    twice = run_cost(model, plan, HW, 2 * D)
    assert twice["bytes_per_gpu"]["dp"]["tx_bwd"] == pytest.approx(2 * rc["bytes_per_gpu"]["dp"]["tx_bwd"])


def test_runtime_at_fixed_utilization():
    plan = Plan(dp=4, micro_batch=1, global_batch=4)
    rc = run_cost(M, plan, HW, D, utilization=0.5)
    assert rc["runtime_s"] == pytest.approx(rc["flop"]["total"] / (4 * 312e12 * 0.5))
    assert rc["utilization"] == pytest.approx(0.5)
    pred = run_cost(M, plan, HW, D)
    assert pred["runtime_s"] == pytest.approx(rc["steps"] * predict(M, plan, HW).raw["step_time"])


def test_cli_run_cost(cli_main):
    args = [sys.executable, "-m", "roofline", "run-cost", "--model", "gpt3-125m", "--tp", "2", "--dp", "4",
            "--global-batch", "8", "--tokens", "1e9", "--experts", "4", "--top-k", "2", "--ep", "4"]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for word in ("FULL TRAINING RUN COST", "FLOP", "Tx", "Rx", "Runtime:", "days", "EP", "Total FLOP/sec"):
        assert word in r.stdout
    r = cli_main(*args[3:], "--tp-intra", "1", "--tp-inter", "2", "--json")      # in-process from here
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["partition"]["tp_inter"] == 2 and d["runtime_days"] > 0
    no_tokens = [a for a in args if a not in ("--tokens", "1e9")]
    r = cli_main(*no_tokens[3:])
    assert r.returncode == 2 and "tokens" in r.stderr
