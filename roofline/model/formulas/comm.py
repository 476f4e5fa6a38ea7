"""Collective communication times: alpha-beta per link type, ring algorithm factors, hierarchical
when a group spans nodes.

Conventions (nccl-tests, PERFORMANCE.md): for a message of S bytes over p ranks,
``algbw = S / t`` and ``busbw = algbw * factor`` with factor ``2(p-1)/p`` for all-reduce and
``(p-1)/p`` for all-gather, reduce-scatter and all-to-all; a p2p transfer has factor 1. Hence
``t = call + steps * alpha + factor * S / busbw``, where busbw is what the profile stores per collective
and link, and ``call`` the fixed time of one call (0 unless a fit of nccl-tests tables over several group sizes
found one: on the A100 NVSwitch node of vTrain's tables a call costs ~50 us whatever the group size, and the
per-step latency is small). A group of p ranks with stride ``stride`` in Megatron's rank order (TP innermost) has
``k = min(p, G / stride)`` members per node (at least 1) on ``n = p / k`` nodes.

Across nodes (n > 1) the time is NCCL's own cost model (src/graph/tuning.cc, ncclTopoTuneModel /
ncclTopoGetAlgoTime: ``time = latency + size / bandwidth``, one bandwidth per algorithm, the
slowest link of the pipeline), written per collective in ``collective`` below:
- NCCL pipelines a collective in chunks over its channels, so the NVLink and the NIC parts overlap:
  the bandwidth term is the larger of the two (max), not their sum;
- each of the k GPUs of a node drives its own NIC (rail-optimised DGX/HGX nodes, one NIC per GPU),
  so a node's k NICs together carry the inter-node volume;
- all-reduce, all-gather and reduce-scatter move the ring's volume across nodes: each node's traffic to
  the next is factor(p) x the data (2(p-1)/p or (p-1)/p, not the 2(n-1)/n or (n-1)/n of an ideal
  hierarchical split), spread over its k NICs, so busbw = min(k/(k-1) busbw_intra, k busbw_inter);
  latency: p-1 ring steps of which n-1 cross the network (tuning.cc: nsteps, nInterSteps);
- all-reduce takes the faster of NCCL's two algorithms, as NCCL's tuner does (tuning.cc ncclTopoGetAlgoTime, the
  lowest modelled time wins): the ring, 2(p-1) steps of which 2(n-1) cross the network, its latency x 1.4 across
  nodes on sm80+ ("Plateau effect of ring"), and the tree, 2((k-1) alpha_intra + log2(n) alpha_inter) (n - 1 here:
  the compiled model's printer has no log, so the tree's latency is over-counted on more than 2 nodes) at the ring's
  bus bandwidth x 0.92 (tuning.cc "busBw * .92" for the tree's all-reduce) x the tree's correction for medium sizes
  (tuning.cc treeCorrectionFactor, the Simple protocol's row: 0.9 below 8 KiB, 0.5-0.9 up to 256 MiB, "Trees are not
  perfectly sticking to the model for medium sizes"). Before, the ring's bandwidth was paired with a tree's latency,
  the best of both, which no algorithm runs: 1.3-2x optimistic at 32-256 MiB on 4-32 nodes (AWS p5 nccl-tests).
  Hopper's NVLink SHARP tree (NVLSTree) moves only the hierarchical volume on 2 nodes and beats the
  ring there (NVIDIA/nccl-tests#196, nccl#1221); the profiles do not say which GPUs have it, so the
  ring's volume is kept (pessimistic there);
- all-to-all: (p-k)/p of each GPU's data leaves the node through its own NIC ("alltoall cannot
  aggregate the bandwidth of multiple NICs", sjeaugey in NVIDIA/nccl-tests#267; busbw = N/(N-1) x the
  NIC's on N nodes, NVIDIA/nccl-tests#130), concurrently with the (k-1)/p that stays on NVLink.
The published nccl-tests figures these forms are checked against are roofline/data/nccl_tests_published.csv
(benchmarks/nccl_multinode_check.py; docs/search.md "Collectives across nodes").
"""
from __future__ import annotations

import sympy as sp

from . import compute as C
from . import symbols as S

FACTOR = {  # bus-bandwidth factor of each collective (nccl-tests)
    "ar": lambda p: 2 * (p - 1) / p,
    "ag": lambda p: (p - 1) / p,
    "rs": lambda p: (p - 1) / p,
    "a2a": lambda p: (p - 1) / p,
}
# NCCL's cost model of its all-reduce across nodes (src/graph/tuning.cc @5067397c): the ring's latency x 1.4 on more
# than one node at compute capability 8.0 and above (ncclTopoGetAlgoTime, "Plateau effect of ring"; 1.9 before sm80,
# not distinguished here); the tree's bus bandwidth x 0.92 (ncclTopoTuneModel, "busBw * .92" for the tree's
# all-reduce) and x its correction for medium sizes, treeCorrectionFactor's Simple-protocol row, indexed by
# log2(size / 64) from 64 B (index 0) to 256 MiB (index 22); none from 512 MiB
RING_PLATEAU = 1.4
TREE_BW = 0.92
TREE_CORRECTION = (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9)
STEPS = {  # latency steps of the ring algorithm
    "ar": lambda p: 2 * (p - 1),
    "ag": lambda p: p - 1,
    "rs": lambda p: p - 1,
    "a2a": lambda p: p - 1,
}


def node_fit(stride) -> sp.Expr:
    """Members of a group of rank stride ``stride`` that one node of G GPUs holds wherever the group starts:
    max(1, floor(G/s)) (G/s when s divides G; a group starting late in a node holds fewer when it does not, and the
    collective runs at its slowest group's pace)."""
    return sp.Max(1, sp.floor(S.gpus_per_node / stride))


def members_per_node(p, stride) -> sp.Expr:
    """Ranks of a group (size p, rank stride ``stride``) that share a node. Megatron's rank order is contiguous, so a
    node (an NVLink domain of G GPUs) holds at most f = node_fit(stride) of the group and the group spans the
    fewest nodes it needs, ceil(p/f), evenly: p / ceil(p/f) members each. For G a power of two this is
    max(1, min(p, G/stride)); on a 72-GPU NVL72 domain a 16-rank group of stride 8 has 8 per domain, not 9 (whole
    groups fill a rack, none straddles it with a fraction)."""
    return p / sp.ceiling(p / node_fit(stride))


def flat(kind: str, p, size, link: str) -> sp.Expr:
    """One ring collective of ``size`` bytes over p ranks on one link type: the call's fixed time (0 unless a fit over
    several group sizes found one: calibrate/fit.py), the ring's per-step latencies and its bytes."""
    return called(p) * S.CALL[kind, link] + STEPS[kind](p) * S.ALPHA[kind, link] + FACTOR[kind](p) * size / S.BUSBW[kind, link]


def tree_correction(size) -> sp.Expr:
    """NCCL's correction of its tree all-reduce's bandwidth for a message of ``size`` bytes (TREE_CORRECTION: the
    factor of index floor(log2(size / 64)), 1 from 512 MiB)."""
    return sp.Piecewise(*[(f, size < 64 * 2 ** (i + 1)) for i, f in enumerate(TREE_CORRECTION)], (1, True))


def called(p) -> sp.Expr:
    """1 when a group of p ranks runs a collective, 0 for p = 1 (Megatron and NCCL skip a one-rank group's call:
    megatron/core/tensor_parallel/mappings.py returns the input when the world size is 1)."""
    return sp.Min(1, p - 1)


def _call_across(kind: str) -> sp.Expr:
    """The fixed time of a call that spans nodes: the larger of the two links' (what a node's part alone costs)."""
    return sp.Max(S.CALL[kind, "intra"], S.CALL[kind, "inter"])


def collective(kind: str, p, size, stride) -> sp.Expr:
    """Collective of ``size`` bytes over p ranks with k = members_per_node(p, stride) per node on n = p/k nodes.

    One node (n = 1): the flat ring over NVLink. Across nodes: NCCL's algorithm for the collective, its NVLink and
    network parts pipelined (the slower sets the bandwidth term), latency per its step count (module docstring)."""
    k = members_per_node(p, stride)
    n = p / k
    a_in, a_out = S.ALPHA[kind, "intra"], S.ALPHA[kind, "inter"]
    b_in, b_out = S.BUSBW[kind, "intra"], S.BUSBW[kind, "inter"]
    if kind == "a2a":
        # every peer's send/recv is posted at once (grouped p2p): NVLink and NIC traffic run concurrently
        return (sp.Piecewise((_call_across(kind), p > node_fit(stride)), (called(p) * S.CALL[kind, "intra"], True))
                + (k - 1) * a_in + (n - 1) * a_out
                + sp.Max((k - 1) / p * size / b_in, (p - k) / p * size / b_out))
    # across nodes, all-reduce, all-gather and reduce-scatter: NCCL's ring over all p ranks for the bandwidth
    # (per node one of its k hops per channel crosses the network, so each GPU's NVLink carries (k-1)/k and each NIC
    # 1/k of the ring's factor(p) x size); latency: p-1 ring steps of which n-1 cross the network (tuning.cc
    # nsteps/nInterSteps). All-reduce: the faster of the ring (2(p-1) steps, 2(n-1) across, x RING_PLATEAU) and the
    # tree (2((k-1) alpha_intra + log2(n) alpha_inter) in tuning.cc, n-1 for log2(n) here: the compiled model's printer
    # has no log) at TREE_BW x tree_correction of the ring's bandwidth (module docstring)
    wire = FACTOR[kind](p) * size * sp.Max((k - 1) / (k * b_in), 1 / (k * b_out))
    if kind == "ar":
        ring = RING_PLATEAU * 2 * ((p - n) * a_in + (n - 1) * a_out) + wire
        tree = 2 * ((k - 1) * a_in + (n - 1) * a_out) + wire / (TREE_BW * tree_correction(size))
        across = _call_across(kind) + sp.Min(ring, tree)
    else:
        across = _call_across(kind) + (p - n) * a_in + (n - 1) * a_out + wire
    # the group spans nodes iff it does not fit one, p > fit (not written n > 1: sympy decides ceiling(2/x) > 1 True
    # for every positive x, and a numeric p = 2 would always take the across-node branch)
    return sp.Piecewise((across, p > node_fit(stride)), (flat(kind, p, size, "intra"), True))


def dispatch_a2a(token_bytes, copies, p, stride, dedup) -> sp.Expr:
    """MoE dispatch (or combine) of ``copies`` routed copies of each token (``token_bytes`` for all of a rank's tokens,
    one copy) over p EP ranks, k per node. NCCL all-to-all (dedup 0, Megatron-Core's alltoall dispatcher: the permuted
    tokens, one row per routed copy): the collective above on copies x token_bytes, copies (k-1)/p of it over NVLink and
    copies (p-k)/p over the network. A deduplicating dispatcher (dedup 1: DeepEP normal kernels, HybridEP) sends a token
    once to each rank that holds one of its experts (DeepEP Buffer.dispatch: ``is_token_in_rank`` [tokens, ranks], the
    receiver expanding it to its local experts), and across nodes once to each destination node, to the GPU of the same
    in-node index, which forwards it over NVLink (DeepSeek-V3 report sec 3.2.2). For balanced routing (each copy on any
    rank with probability 1/p, drawn independently): the network carries (n-1)(1-(1-1/n)^copies) copies, one per other
    node reached, and each GPU's NVLink (k-1) q per node, own and forwarded, q = 1-(1-1/p)^copies the chance that a given
    rank holds one of the token's experts (with k = p = 8 and 8 copies: 4.6 instead of 7)."""
    k = members_per_node(p, stride)
    n = p / k
    naive = copies * (p - k) / p
    remote_nodes = (n - 1) * (1 - (1 - 1 / n) ** copies)
    inter = (1 - dedup) * naive + dedup * remote_nodes
    intra = (1 - dedup) * copies * (k - 1) / p + dedup * n * (k - 1) * (1 - (1 - 1 / p) ** copies)
    call = sp.Piecewise((_call_across("a2a"), p > node_fit(stride)), (called(p) * S.CALL["a2a", "intra"], True))
    return (call + (k - 1) * S.ALPHA["a2a", "intra"] + (n - 1) * S.ALPHA["a2a", "inter"]
            + sp.Max(intra * token_bytes / S.BUSBW["a2a", "intra"],
                     inter * token_bytes / S.BUSBW["a2a", "inter"]))


def p2p(size, same_node) -> sp.Expr:
    """Point-to-point send/recv of ``size`` bytes; ``same_node`` is 1 on NVLink, 0 across nodes."""
    return (same_node * (S.ALPHA["p2p", "intra"] + size / S.BUSBW["p2p", "intra"])
            + (1 - same_node) * (S.ALPHA["p2p", "inter"] + size / S.BUSBW["p2p", "inter"]))


def interference(n_comm=None) -> sp.Expr:
    """Fraction f of the GPU's SMs a running communication kernel holds, n_comm / n_SM (default n_comm: an NCCL
    collective inside one node, symbols.nccl_sms; formulas/step.py picks the count per kind of communication; the
    counts are sourced in hardware/defaults.yaml overlap). 0 where the profile states no SM count (n_SM = 1) or one no
    larger than n_comm."""
    n_comm = S.nccl_sms if n_comm is None else n_comm
    return sp.Piecewise((n_comm / S.sms, S.sms > n_comm), (0, True))


def unordered_max(a, b) -> sp.Expr:
    """max(a, b) as sympy's unevaluated Max, its arguments in the order given. sp.Max(..., evaluate=False) still sorts
    them into sympy's canonical order, counting the nodes of each as a tree (sorting.ordered): minutes for the
    stage's time expressions, whose shared parts a tree counts once per use. Max is symmetric: the value is the same."""
    a, b = sp.sympify(a), sp.sympify(b)
    obj = sp.Expr.__new__(sp.Max, a, b)
    obj._argset = frozenset((a, b))
    return obj


def exposed(t_comm, t_window, overlap, share=None, floor=None) -> sp.Expr:
    """Time a collective adds to the critical path when a fraction ``overlap`` of it may run beside ``t_window`` of
    independent compute, while holding a fraction ``share`` = f of the SMs (default interference()).

    The compute beside the collective runs at (1 - f) of its rate for as long as the collective runs: a hidden part
    T = overlap t_comm next to W = t_window of compute ends at max(T, W + f T) (W + f T when the compute outlasts
    it; T when the slowed compute, W / (1 - f), fits inside it), so it adds max(T - W, f T) to W; the rest,
    (1 - overlap) t_comm, runs alone. With overlap scaling the whole comparison (o max(t_comm - W, f t_comm)) as
    before. Never more than not overlapping (f <= 1) and never negative. ``floor``: a part of the hidden fraction that
    cannot start before the compute ends (at most t_comm), exposed whatever the window."""
    share = interference() if share is None else share
    # evaluate=False: sympy would otherwise search the two big arguments for common zeros (minutes, same value)
    beside = unordered_max(t_comm - t_window, share * t_comm)
    if floor is not None:
        beside = unordered_max(beside, floor)
    return (1 - overlap) * t_comm + overlap * beside


# ---- the group layouts of Megatron-Core's rank order: tp (innermost), cp, ep, dp, pp ----------
# (megatron/core/parallel_state.py, order "tp-cp-ep-dp-pp"); experts use a second grid over the same
# ranks, order tp-ep-dp-pp with cp folded into dp (expert_decoder_rank_generator, "MoE parallel folding")
def tp_group(kind: str, size) -> sp.Expr:
    return collective(kind, S.tp, size, 1)


def cp_ring_step(size) -> sp.Expr:
    """One ring-attention KV hop between CP neighbours (stride t)."""
    same = sp.Piecewise((1, S.tp * S.cp <= S.gpus_per_node), (0, True))
    return p2p(size, same)


def dp_cp_size() -> sp.Expr:
    """Ranks that hold the same dense parameters: d x c. Megatron-Core's DDP reduces dense gradients and
    the distributed optimizer shards their state over ``intra_dp_cp_group`` (distributed_data_parallel.py),
    torchtitan's FSDP2 over the dp_shard x cp mesh."""
    return S.dp * S.cp


def shard_size() -> sp.Expr:
    """Ranks that shard one copy of the dense state: d x c / r (r = dp_rep replicas: HSDP's shard dimension, the inner
    one of its (replicate, shard) mesh, torch/distributed/fsdp/_fully_shard/_fsdp_init.py HSDPMeshInfo; Megatron-Core
    --num-distributed-optimizer-instances: the distributed optimizer shards within each instance). d x c when r = 1."""
    return dp_cp_size() / S.dp_rep


def expert_dp_size() -> sp.Expr:
    """Ranks that hold the same expert parameters: t c d / (etp e) (expert_data_parallel_size = world / (etp ep pp);
    megatron/core/parallel_state.py); d c / e when etp = t."""
    return S.tp * S.dp * S.cp / (C.etp * S.ep)


def dp_group(kind: str, size) -> sp.Expr:
    """Collective over the dense data-parallel group d x c (stride t: the cp and dp ranks of one tp rank)."""
    return collective(kind, dp_cp_size(), size, S.tp)


def shard_group(kind: str, size) -> sp.Expr:
    """Collective over the ranks that shard one copy of the dense state (d x c / r, stride t: contiguous ranks, the
    shard dimension inside a node when it fits one); the whole d x c group when r = 1."""
    return collective(kind, shard_size(), size, S.tp)


def replica_group(kind: str, size) -> sp.Expr:
    """Collective over the r replicas of one shard (stride t d c / r); nothing when r = 1."""
    return collective(kind, S.dp_rep, size, S.tp * shard_size())


def expert_dp_group(kind: str, size) -> sp.Expr:
    """Collective over the expert data-parallel group (stride etp e in the expert grid)."""
    return collective(kind, expert_dp_size(), size, C.etp * S.ep)


def ep_group(kind: str, size) -> sp.Expr:
    """Expert parallelism: e ranks of the expert grid, stride etp, carved out of t x c x d (with etp < t the EP group
    folds in TP ranks: Megatron-Core's MoE parallel folding)."""
    return collective(kind, S.ep, size, C.etp)


def ep_dispatch(token_bytes, copies) -> sp.Expr:
    """Dispatch or combine over the EP group (stride etp): ``dispatch_a2a`` with the plan's dispatcher."""
    return dispatch_a2a(token_bytes, copies, S.ep, C.etp, S.ep_dedup)


def etp_group(kind: str, size) -> sp.Expr:
    """Expert tensor parallelism: the etp innermost ranks of the expert grid (stride 1)."""
    return collective(kind, C.etp, size, 1)


def pp_same_node() -> sp.Expr:
    """1 when pipeline neighbours (stride t*c*d) share a node: both stages fit in it, 2 t c d <= G (the same as
    t c d < G for G a power of two; a 64-rank stage on a 72-GPU NVL72 domain has its neighbour in the next one)."""
    return sp.Piecewise((1, 2 * S.tp * S.cp * S.dp <= S.gpus_per_node), (0, True))
