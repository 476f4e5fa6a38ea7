"""Memory per GPU: the ZeRO paper's per-parameter bytes, interleaved in-flight micro-batches, the reserve."""
from pathlib import Path

import pytest
import yaml

from roofline.spec import hardware
from roofline.spec.config import Model, Plan
from roofline.model.predict import predict

A100 = hardware.load("a100-sxm4-80gb")
DEFAULTS = yaml.safe_load((Path(__file__).resolve().parents[1] / "roofline" / "spec" / "hardware" / "defaults.yaml").read_text())


# Rajbhandari et al. 2020 (ZeRO), Figure 1: a 7.5B-parameter model on 64 GPUs with mixed-precision Adam
# (2 B weights + 2 B gradients + K = 12 B optimizer state per parameter): 120, 31.4, 16.6 and 1.9 GB per GPU
@pytest.mark.parametrize("sharding,paper_gb", [("none", 120), ("distributed", 31.4), ("zero2", 16.6), ("zero3", 1.9)])
def test_zero_paper_bytes_per_parameter(sharding, paper_gb):
    model = Model(n_layers=4, d_model=2048, n_heads=16, vocab=32000, seq_len=1024)
    p = predict(model, Plan(tp=1, pp=1, dp=64, global_batch=64, sharding=sharding, grad_dtype="bf16"), A100)
    psi = p.raw["params_rank"]                                   # t = p = 1: every parameter on every rank
    states = p.memory["weights"].magnitude + p.memory["gradients"].magnitude + p.memory["optimizer"].magnitude
    per_param = {"none": 2 + 2 + 12, "distributed": 2 + 2 + 12 / 64, "zero2": 2 + (2 + 12) / 64,
                 "zero3": (2 + 2 + 12) / 64}[sharding]
    assert states == pytest.approx(per_param * psi, rel=1e-12)
    assert states / psi * 7.5e9 / 1e9 == pytest.approx(paper_gb, rel=0.03)


def test_interleaved_first_stage_holds_korthikanti_in_flight_micro_batches():
    """Interleaved 1F1B: the first stage holds p (1 + (p-1)/(p v)) micro-batches of its layers, the last
    ((v-1) p + 1) / v (Megatron-Core warm-up (p - rank - 1) 2 + (v - 1) p chunks, plus one)."""
    s, h, p_, v = 2048, 1024, 4, 2
    model = Model(n_layers=16, d_model=h, n_heads=16, vocab=1024, seq_len=s)     # learned positions: first stage
    pred = predict(model, Plan(pp=p_, dp=1, micro_batch=1, global_batch=16, interleave=v, schedule="interleaved",
                               recompute="full"), A100).raw
    layer_input, stage_layers = 2 * s * h, 16 // p_
    first_in_flight, last_in_flight = p_ * (1 + (p_ - 1) / (p_ * v)), ((v - 1) * p_ + 1) / v
    logits, head_input = s * 1024 * (2 + 4), 2 * s * h
    positions = s * h * (2 + 4 + 12)                # the s x h position table's bf16 weights, fp32 grads, Adam
    diff = (last_in_flight - first_in_flight) * stage_layers * layer_input + logits + head_input - positions
    assert pred["mem_last_stage"] - pred["mem_first_stage"] == pytest.approx(diff, rel=1e-9)


def test_reserve_counts_context_nccl_and_fragmentation_outside_memory():
    """tp 8, pp 4, dp 2: collective communicators tp and dp x cp, two pipeline peers; the reserve is not in memory."""
    r = DEFAULTS["memory_reserve"]
    model = Model(n_layers=8, d_model=2048, n_heads=16, vocab=32000, seq_len=2048)
    p = predict(model, Plan(tp=8, pp=4, dp=2, global_batch=16), A100).raw
    expected = (r["cuda_context_bytes"] + 2 * r["nccl_comm_bytes"] + 2 * r["nccl_peer_bytes"]
                + r["allocator_fragmentation"] * p["memory"])
    assert p["mem_reserve"] == pytest.approx(expected, rel=1e-12)
    assert p["mem_reserve"] == pytest.approx(p["mem_cuda_context"] + p["mem_nccl"] + p["mem_fragmentation"], rel=1e-12)
    assert p["memory"] == pytest.approx(p["mem_weights"] + p["mem_gradients"] + p["mem_optimizer"]
                                        + p["mem_activations"], rel=1e-12)
    # one GPU: no communicator at all
    one = predict(model, Plan(global_batch=1), A100).raw
    assert one["mem_nccl"] == 0


def test_reserve_of_expert_parallel_all_to_all_peers():
    """MoE, ep 4 of dp 8: tp, d x c and expert-dp communicators, and 3 all-to-all peers."""
    r = DEFAULTS["memory_reserve"]
    model = Model(n_layers=2, d_model=1024, n_heads=16, vocab=32000, seq_len=1024, n_experts=8, top_k=2)
    p = predict(model, Plan(tp=2, pp=1, dp=8, ep=4, global_batch=8), A100).raw
    assert p["mem_nccl"] == pytest.approx(3 * r["nccl_comm_bytes"] + 3 * r["nccl_peer_bytes"], rel=1e-12)
