"""The collective model across nodes (formulas/comm.collective) against published multi-node nccl-tests figures
(roofline/data/nccl_tests_published.csv) and against closed forms of NCCL's ring, tree and all-to-all."""
from __future__ import annotations

import csv
import importlib.util
import statistics
from pathlib import Path

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from roofline.model.formulas import comm as CM
from roofline.model.formulas import symbols as S

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "roofline" / "data" / "nccl_tests_published.csv"
_spec = importlib.util.spec_from_file_location("nccl_check", ROOT / "benchmarks" / "nccl_multinode_check.py")
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

P, SZ, G = sp.symbols("p size G", positive=True)
A_IN, A_OUT, B_IN, B_OUT = sp.symbols("a_in a_out b_in b_out", positive=True)


def _fn(kind):
    expr = CM.collective(kind, P, SZ, 1).subs(S.gpus_per_node, G)
    expr = expr.subs({S.CALL[kind, "intra"]: 0, S.CALL[kind, "inter"]: 0,      # datasheet links: no per-call time
                      S.ALPHA[kind, "intra"]: A_IN, S.ALPHA[kind, "inter"]: A_OUT,
                      S.BUSBW[kind, "intra"]: B_IN, S.BUSBW[kind, "inter"]: B_OUT})
    return sp.lambdify((P, SZ, G, A_IN, A_OUT, B_IN, B_OUT), expr, "math")


FN = {k: _fn(k) for k in ("ar", "ag", "rs", "a2a")}


def test_every_row_is_sourced_and_well_formed():
    rows = list(csv.DictReader(open(CSV, newline="")))
    assert len(rows) >= 15
    for r in rows:
        assert r["source"].startswith("https://"), r
        assert r["collective"] in ("ar", "ag", "rs", "a2a")
        assert r["profile"] in ("h100-sxm", "a100-sxm4-80gb")
        assert 2 <= int(r["nodes"]) <= 128 and int(r["gpus_per_node"]) == 8
        assert float(r["nic_gbps_per_gpu"]) in (100, 200, 400)
        assert float(r["message_bytes"]) >= 2 ** 20 and 0 < float(r["busbw_gbs"]) < 600
        assert r["how"] and r["system"]
    assert {r["collective"] for r in rows} >= {"ar", "ag", "a2a"}


def test_model_within_published_figures_on_rdma_networks():
    """Every InfiniBand/RoCE/EFA point within a factor 1.7 either way, the median ratio within 15 % (GPUDirect-TCPXO
    rows are kept in the file and printed by the benchmark, but its transport is not the RDMA the profiles describe).
    The largest messages alone are within a factor 1.5; the AWS p5 sweep's medium sizes (32 MiB - 1 GiB on 4-32
    nodes) are where the model is optimistic (all-reduce up to 1.67x, all-to-all up to 1.59x: docs/search.md)."""
    res = [r for r in check.compare(CSV) if r["rdma"]]
    assert len(res) >= 100
    bad = [(r["system"], r["collective"], r["nodes"], r["message_bytes"], round(r["ratio"], 2)) for r in res
           if not 1 / 1.7 <= r["ratio"] <= 1.7]
    assert not bad, bad
    assert 0.85 <= statistics.median(r["ratio"] for r in res) <= 1.15
    largest = {}
    for r in res:
        key = (r["source"], r["system"], r["collective"], r["nodes"])
        if float(r["message_bytes"]) > float(largest.get(key, {"message_bytes": 0})["message_bytes"]):
            largest[key] = r
    bad = [(k, round(r["ratio"], 2)) for k, r in largest.items() if not 1 / 1.5 <= r["ratio"] <= 1.5]
    assert not bad, bad


def test_all_reduce_across_nodes_is_the_faster_of_nccls_ring_and_tree():
    """NCCL's tuner (src/graph/tuning.cc) prices its all-reduce across nodes as the ring (2(p-1) steps, 2(n-1) of
    them on the network, latency x 1.4) or the tree (the hierarchical latency, the ring's bandwidth x 0.92 x the
    tree's medium-size correction) and runs the faster: hand-computed on 16 nodes of 8 GPUs (alpha 8 / 12 us, busbw
    351 / 45 GB/s). 256 MiB: the tree (correction 0.9) beats the ring's 2 (127 - 15) x 8 us of intra-node steps;
    8 GiB: the ring (no correction, its latency small beside the bytes). The old form paired the ring's bandwidth
    with the tree's latency, faster than both."""
    k, n, a_in, a_out, b_in, b_out = 8, 16, 8e-6, 12e-6, 351e9, 45e9
    p = k * n
    for size, corr in ((2 ** 28, 0.9), (2 ** 33, 1.0)):
        wire = 2 * (p - 1) / p * size * max((k - 1) / (k * b_in), 1 / (k * b_out))
        ring = 1.4 * 2 * ((p - n) * a_in + (n - 1) * a_out) + wire
        tree = 2 * ((k - 1) * a_in + (n - 1) * a_out) + wire / (0.92 * corr)
        t = FN["ar"](p, size, k, a_in, a_out, b_in, b_out)
        assert t == pytest.approx(min(ring, tree), rel=1e-9)
        assert t > 2 * ((k - 1) * a_in + (n - 1) * a_out) + wire
    sizes = (2 ** 12, 2 ** 18, 2 ** 25, 2 ** 28, 2 ** 29, 2 ** 33)
    assert [float(CM.tree_correction(s)) for s in sizes] == [.9, .5, .7, .9, 1, 1]


def test_ring_bound_across_nodes_large_messages():
    """Hand-computed: a ring over n nodes of k GPUs with one NIC each reaches busbw = min(k/(k-1) B_in, k B_out) at
    large size (DGX H100, 8 x 45 GB/s NICs: 360 GB/s; NVLink 351: 401 -> the NICs bind)."""
    k, n, b_in, b_out, size = 8, 4, 351e9, 45e9, 1e13
    for kind in ("ar", "ag", "rs"):
        t = FN[kind](k * n, size, k, 10e-6, 10e-6, b_in, b_out)
        busbw = float(CM.FACTOR[kind](k * n)) * size / t
        assert busbw == pytest.approx(min(k / (k - 1) * b_in, k * b_out), rel=1e-3)


def test_alltoall_busbw_is_n_over_n_minus_1_nics():
    """sjeaugey (NVIDIA/nccl-tests#130): alltoall busbw on N nodes = N/(N-1) x the NIC bandwidth per GPU."""
    k, b_out, size = 8, 48e9, 1e13
    for n in (2, 4, 16):
        p = k * n
        t = FN["a2a"](p, size, k, 0.0, 0.0, 351e9, b_out)
        assert (p - 1) / p * size / t == pytest.approx((p - 1) / (p - k) * b_out, rel=1e-9)
        # nccl-tests' N/(N-1) for the GPU count: (p-1)/(p-k) -> n/(n-1) as k/p -> 0
        assert (p - 1) / (p - k) == pytest.approx(n / (n - 1), rel=0.07)


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["ar", "ag", "rs", "a2a"]), k=st.sampled_from([2, 4, 8]), n=st.integers(2, 128),
       size=st.floats(1e3, 1e11), b_out=st.floats(5e9, 50e9), a_out=st.floats(0, 50e-6))
def test_across_nodes_never_beats_its_links(kind, k, n, size, b_out, a_out):
    """Invariants: a group spanning nodes is never faster than moving its network share over its NICs, nor than
    the same collective inside one node while its NICs together are no faster than NVLink; time grows with size."""
    p, b_in, a_in = k * n, 351e9, 8e-6
    t = FN[kind](p, size, k, a_in, a_out, b_in, b_out)
    share = (p - k) / p if kind == "a2a" else float(CM.FACTOR[kind](p))
    per_nic = share * size / b_out if kind == "a2a" else share * size / (k * b_out)
    assert t >= per_nic * (1 - 1e-9)
    # 1 ns of slack: with no NIC latency (a_out 0) and a tiny message both are the in-node ring's latency, and the
    # two paths' bandwidth terms (1000 B: ~5 ns) may differ in their last digits (found by hypothesis: 1e-13 s).
    # Only while the node's NICs together carry no more than one NVLink: beyond, the ring across nodes moves (k-1)/k
    # of its bytes per GPU over NVLink and the rest over the NICs, and may beat the ring inside one node (found by
    # hypothesis: k 8, n 2, 8 x 47 GB/s of NICs beside 351 GB/s of NVLink, 0.02 % faster)
    if k * b_out <= b_in:
        assert t >= FN[kind](k, size, k, a_in, a_out, b_in, b_out) * (1 - 1e-9) - 1e-9
    assert FN[kind](p, 2 * size, k, a_in, a_out, b_in, b_out) > t


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(["ar", "ag", "rs", "a2a"]), p=st.integers(2, 8), size=st.floats(1e3, 1e10))
def test_inside_one_node_is_the_flat_ring(kind, p, size):
    """A group inside one node is NCCL's ring over NVLink: steps x alpha + factor x size / busbw."""
    t = FN[kind](p, size, 8, 8e-6, 12e-6, 351e9, 45e9)
    assert t == pytest.approx(float(CM.STEPS[kind](p)) * 8e-6 + float(CM.FACTOR[kind](p)) * size / 351e9, rel=1e-9)
