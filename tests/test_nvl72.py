"""Issue 20: NVL72 group placement. On a GB200/GB300 NVL72 rack the NVLink domain is 72 GPUs (the profiles'
gpus_per_node), so a TP 4 x EP 16 group (64 GPUs) sits inside one domain and sends no byte over the network;
the same plan on 8-GPU HGX nodes crosses nodes. Expectations are computed by hand from Megatron-Core's rank order
(tp innermost, EP stride etp = tp) and comm.py's placement: k = min(p, G / stride) members of a group per domain,
n = p / k domains; an all-to-all sends (p - k)/(p - 1) of its bytes off the node, a ring collective across nodes
1/k of them (each of the k GPUs' NICs carries 1/k of the ring's volume)."""
from dataclasses import replace

import pytest
import sympy as sp

from roofline.spec import hardware
from roofline.spec.config import Model, Plan, check
from roofline.model.formulas import comm
from roofline.model.formulas import symbols as S
from roofline.model.predict import evaluate, inputs

MOE = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=2048, tied_embeddings=False,
            position="rope", biases=False, mlp="swiglu", n_experts=64, top_k=4, moe_ffn_hidden=512)
DENSE = replace(MOE, n_experts=1, top_k=1, moe_ffn_hidden=None)


def volumes(model, plan, gpu):
    check(model, plan)
    r = evaluate(inputs(model, plan, hardware.load(gpu)))
    return {a: (float(r[f"bytes_{a}_fwd"] + r[f"bytes_{a}_bwd"]), float(r[f"bytes_{a}_inter"]))
            for a in ("tp", "ep", "dp")}


def tp4_ep16(dp):
    return Plan(tp=4, dp=dp, ep=16, micro_batch=1, global_batch=4 * dp)


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
@pytest.mark.parametrize("dp", [16, 32])          # 64 GPUs (one rack), 128 GPUs (two racks)
def test_tp4_ep16_group_inside_one_nvl72_domain_uses_nvlink_only(gpu, dp):
    """EP group: 16 ranks of stride 4 (etp = tp = 4) span 64 GPUs <= 72: k = min(16, 72/4) = 16, one domain."""
    assert hardware.load(gpu).gpus_per_node == 72
    v = volumes(MOE, tp4_ep16(dp), gpu)
    assert v["ep"][0] > 0 and v["tp"][0] > 0           # the plan does send EP and TP bytes ...
    assert v["ep"][1] == 0 and v["tp"][1] == 0         # ... none of them over the network


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
def test_whole_64_gpu_job_in_one_nvl72_domain_sends_nothing_across(gpu):
    """With 64 GPUs the DP group too (16 ranks, stride 4: 64 GPUs) is in the rack: k = min(16, 18) = 16 = p."""
    v = volumes(MOE, tp4_ep16(16), gpu)
    assert v["dp"][0] > 0 and v["dp"][1] == 0


@pytest.mark.parametrize("gpu", ["b200", "b300"])
def test_same_plan_on_8_gpu_nodes_crosses_nodes(gpu):
    """8 GPUs per node: TP 4 stays inside (k = 4 = p); EP 16 of stride 4 has k = 8/4 = 2 per node on 8 nodes, so
    the all-to-all sends (p - k)/(p - 1) = 14/15 of its bytes over the network; the DP all-reduce (16 ranks,
    stride 4, k = 2) sends 1/k = 1/2 of its bytes across."""
    assert hardware.load(gpu).gpus_per_node == 8
    v = volumes(MOE, tp4_ep16(16), gpu)
    assert v["tp"][1] == 0
    assert v["ep"][1] == pytest.approx(14 / 15 * v["ep"][0], rel=1e-12)
    assert v["dp"][1] == pytest.approx(v["dp"][0] / 2, rel=1e-12)


def _k(p, stride, g=72):
    return float(comm.members_per_node(p, stride).subs(S.gpus_per_node, g))


@pytest.mark.parametrize("p,stride,k", [
    (4, 1, 4),        # TP 4
    (16, 4, 16),      # EP 16 behind TP 4: 64 GPUs
    (8, 8, 8),        # 8 ranks of stride 8: 64 GPUs
    (72, 1, 72),      # a whole rack
    (144, 1, 72),     # two racks
])
def test_members_per_nvl72_domain_where_the_group_tiles_the_rack(p, stride, k):
    assert _k(p, stride) == k


# Groups whose span does not tile 72: Megatron places ranks contiguously and jobs on NVL72 racks use whole groups
# per rack (72 GPUs hold 4 groups of 16 + 8 spare), so a group never has a fractional number of members per rack:
# it spans n = ceil(p / floor(72 / stride)) racks with p / n members each. comm.members_per_node's
# min(p, G / stride) gives 72/8 = 9, 72/4 = 18 and 72/64 = 1.125 instead (fix proposed in the issue-20 report).
@pytest.mark.parametrize("p,stride,k", [
    (16, 8, 8),       # 16 ranks of stride 8 span 128 GPUs: 2 racks of 8, not 9 + 7 counted as 9
    (32, 4, 16),      # DP 32 behind TP 4: 2 racks of 16
    (2, 64, 1),       # expert-DP pair of stride 64: one per rack
])
def test_members_per_nvl72_domain_where_the_group_does_not_tile_the_rack(p, stride, k):
    assert _k(p, stride) == k


def test_dense_dp_32_behind_tp_4_on_two_racks_sends_one_sixteenth_across():
    """Dense model, tp 4 dp 32 on 128 GB200s: each DP group (32 ranks, stride 4) has 16 members in each of 2
    racks, so its ring sends 1/16 of its bytes over the network."""
    v = volumes(DENSE, Plan(tp=4, dp=32, micro_batch=1, global_batch=128), "gb200")
    assert v["dp"][1] == pytest.approx(v["dp"][0] / 16, rel=1e-12)


# ---- Blackwell Ultra profiles: the datasheet tables divided by hand ---------------------------------------
def test_gb300_profile_is_the_nvl72_datasheet_divided_by_72():
    hw = hardware.load("gb300")
    assert hw.peak("bf16") == pytest.approx(360e15 / 72 / 2)      # GB300 NVL72: 360 PFLOPS BF16 with sparsity
    assert hw.peak("fp8") == pytest.approx(720e15 / 72 / 2)
    assert hw.peak("fp4") == pytest.approx(1080e15 / 72)          # the table's dense FP4 figure
    assert hw.hbm_bandwidth == pytest.approx(576e12 / 72)
    assert hw.inter.bandwidth == pytest.approx(800e9 / 8)         # one 800 Gb/s ConnectX-8 per GPU
    assert (hw.gpus_per_node, hw.sm_count) == (72, 160)


def test_b300_profile_is_the_hgx_table_divided_by_8():
    hw = hardware.load("b300")
    assert hw.peak("bf16") == pytest.approx(36e15 / 8 / 2)        # HGX B300: 36 PFLOPS BF16 with sparsity
    assert hw.peak("fp4") == pytest.approx(108e15 / 8)            # HGX B300: 108 PFLOPS dense FP4
    assert hw.inter.bandwidth == pytest.approx(800e9 / 8)
    assert (hw.gpus_per_node, hw.sm_count) == (8, 160)


@pytest.mark.parametrize("ultra,base", [("b300", "b200"), ("gb300", "gb200")])
def test_blackwell_ultra_raises_dense_fp4_by_half(ultra, base):
    """NVIDIA: Blackwell Ultra's dense NVFP4 is 1.5x Blackwell's; BF16/FP8 unchanged per configuration."""
    u, b = hardware.load(ultra), hardware.load(base)
    assert u.peak("fp4") == pytest.approx(1.5 * b.peak("fp4"))
    assert u.peak("fp8") == pytest.approx(b.peak("fp8"))


def test_torchtitan_h100_variant_states_what_its_source_states():
    """The 96 GB, 500 W H100 of torchtitan's benchmarks (its Hardware section): HBM2e 96 GB at 2.4 TB/s,
    400 Gb/s per GPU, 500 W; its peak is unpublished, stated to lie between H100 NVL (835) and SXM (989)."""
    h = hardware.load("h100-hbm2e-96gb-500w")
    sxm = hardware.load("h100-sxm")
    assert h.hbm_capacity == 96 * 2**30 and h.hbm_bandwidth == 2.4e12 and h.board_power == 500
    assert h.inter.bandwidth == 50e9 and h.intra.bandwidth == sxm.intra.bandwidth and h.sm_count == sxm.sm_count
    assert 835e12 < h.peak("bf16") < sxm.peak("bf16") and h.peak("fp8") == 2 * h.peak("bf16")
    assert h.matmul_ceiling == pytest.approx(sxm.matmul_ceiling, rel=1e-3)     # the same fraction of its peak
