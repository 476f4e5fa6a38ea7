"""Run-cost model (reference 002): FLOP = 6ND + documented extras, bytes per axis, CLI."""
import json
import subprocess
import sys

import pytest

from roofline import hardware
from roofline.config import Model, Plan
from roofline.predict import BYTES, predict
from roofline.runcost import run_cost

HW = hardware.load("a100-sxm4-80gb")
M = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=2048, tied_embeddings=False,
          position="rope", biases=False)
D = 1e10


def test_flop_total_is_6nd_plus_attention_and_lm_head():
    plan = Plan(tp=2, pp=2, dp=2, micro_batch=1, global_batch=8)
    rc = run_cost(M, plan, HW, D)
    f = rc["flop"]
    n = rc["params"]["non_embedding_active"]
    assert f["six_nd"] == pytest.approx(6 * n * D, rel=1e-12)
    attention = 3 * D * M.n_layers * 4 * M.seq_len * M.d_model / 2       # causal: halved
    lm_head = 3 * D * 2 * M.d_model * M.vocab
    assert f["attention"] == pytest.approx(attention) and f["lm_head"] == pytest.approx(lm_head)
    assert f["total"] == pytest.approx(6 * n * D + attention + lm_head, rel=1e-12)
    assert f["backward"] == pytest.approx(2 * f["forward"])
    # N: active parameters without the embedding tables (12 l h^2 + norms for this model)
    assert n == pytest.approx(12 * M.n_layers * M.d_model ** 2 + 2 * M.n_layers * M.d_model, rel=1e-12)


def test_flop_agrees_with_the_step_formula():
    plan = Plan(tp=2, pp=2, dp=2, micro_batch=1, global_batch=8)
    rc = run_cost(M, plan, HW, D)
    pred = predict(M, plan, HW)
    # the step formula counts matmul FLOPs only (no norm parameters): agreement within 0.1 %
    assert pred.raw["flops"] * rc["steps"] == pytest.approx(rc["flop"]["total"], rel=1e-3)


def test_tp_bytes_by_hand_and_2d_split():
    plan = Plan(tp=8, micro_batch=1, global_batch=2)
    rc = run_cost(M, plan, HW, D)
    T, m = M.seq_len, 2
    per_step = m * M.n_layers * 2 * 2 * (7 / 8) * BYTES["bf16"] * T * M.d_model
    assert rc["bytes_per_gpu"]["tp"]["tx_fwd"] == pytest.approx(per_step * rc["steps"])
    assert rc["bytes_per_gpu"]["tp"]["inter"] == 0
    two_d = run_cost(M, plan, HW, D, tp_intra=4, tp_inter=2)
    # hierarchical ring: the same bytes per GPU, a quarter of... 2(2-1)/2 S/4 of 2(8-1)/8 S on the network
    tp2 = two_d["bytes_per_gpu"]["tp"]
    assert tp2["tx_fwd"] == pytest.approx(per_step * rc["steps"])
    assert tp2["inter"] / (tp2["tx_fwd"] + tp2["tx_bwd"]) == pytest.approx((0.25) / 1.75)
    assert two_d["partition"]["tp_inter"] == 2


def test_sequence_parallel_moves_the_same_bytes():
    a = run_cost(M, Plan(tp=4, micro_batch=1, global_batch=2), HW, D)
    b = run_cost(M, Plan(tp=4, micro_batch=1, global_batch=2, sequence_parallel=True), HW, D)
    assert a["bytes_per_gpu"]["tp"] == b["bytes_per_gpu"]["tp"]


def test_moe_expert_bytes_and_active_parameters():
    moe = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=2048, n_experts=8, top_k=2)
    rc = run_cost(moe, Plan(dp=8, ep=8, micro_batch=1, global_batch=8), HW, D)
    assert rc["bytes_per_gpu"]["ep"]["tx_fwd"] > 0
    assert rc["params"]["active"] < rc["params"]["total"] and rc["params"]["expert"] > 0
    no_ep = run_cost(moe, Plan(dp=8, micro_batch=1, global_batch=8), HW, D)
    assert no_ep["bytes_per_gpu"]["ep"]["tx_fwd"] == 0


def test_runtime_at_fixed_utilization():
    plan = Plan(dp=4, micro_batch=1, global_batch=4)
    rc = run_cost(M, plan, HW, D, utilization=0.5)
    assert rc["runtime_s"] == pytest.approx(rc["flop"]["total"] / (4 * 312e12 * 0.5))
    assert rc["utilization"] == pytest.approx(0.5)
    pred = run_cost(M, plan, HW, D)
    assert pred["runtime_s"] == pytest.approx(rc["steps"] * predict(M, plan, HW).raw["step_time"])


def test_cli_run_cost():
    args = [sys.executable, "-m", "roofline", "run-cost", "--model", "gpt3-125m", "--tp", "2", "--dp", "4",
            "--global-batch", "8", "--tokens", "1e9", "--experts", "4", "--top-k", "2", "--ep", "4"]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for word in ("FULL TRAINING RUN COST", "FLOP", "Tx", "Rx", "Runtime:", "days", "EP", "Total FLOP/sec"):
        assert word in r.stdout
    r = subprocess.run(args + ["--tp-intra", "1", "--tp-inter", "2", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["partition"]["tp_inter"] == 2 and d["runtime_days"] > 0
    no_tokens = [a for a in args if a not in ("--tokens", "1e9")]
    r = subprocess.run(no_tokens, capture_output=True, text=True)
    assert r.returncode == 2 and "tokens" in r.stderr
