"""The step time, its breakdown, FLOPs and memory, assembled from the other formula modules.

step = (m + (p-1)/v) t_mb                       pipeline: m micro-batches of the slowest stage
     + exposed PP send/recv + exposed DP gradient reduce / parameter gather
     + exposed ZeRO-3 gathers + optimizer step
t_mb = sum over the layers of the slowest stage of max(t_layer_fwd + t_layer_bwd + recompute + exposed
       TP/CP/EP, host issue time of a layer) (two layer kinds: MoE, and a MoE's leading dense layers)
       + max(embedding/LM head, their host issue time) + the framework's per-micro-batch host work
"""
from __future__ import annotations

import functools

import sympy as sp

from . import comm as CM
from . import compute as C
from . import memory as M
from . import pipeline as PL
from . import symbols as S

h = S.d_model


def _sum_time(ops, direction):
    return C.ops_time(ops, direction)


@functools.lru_cache(maxsize=1)
def build() -> dict[str, sp.Expr]:
    """Every output quantity of the model as a sympy expression of the symbols in ``symbols``."""
    # two layer kinds (Megatron-Core moe_layer_freq): MoE layers (every layer of a dense model, whose "MoE"
    # layer is its dense layer: E = K = 1) and the l_d leading dense layers of a MoE with the dense MLP f
    kinds = {"moe": C.layer_ops(C.d_head, S.moe_ffn, C.moe, S.shared_ffn),
             "dense": C.layer_ops(C.d_head, S.ffn_hidden, sp.Integer(0))}
    core_names = ("flash_attention", "attn_scores_bmm", "attn_context_bmm", "scale_mask_softmax_dropout")
    emb, head = C.embedding_ops(), C.head_ops()
    out: dict[str, sp.Expr] = {}

    # ---- per layer, per micro-batch -----------------------------------------------------------
    act = S.act_bytes * C.tokens * h
    # TP: 2 all-reduces forward and 2 backward of the (s/c) b h activations (Shoeybi et al. 2019);
    # with SP each becomes an all-gather plus a reduce-scatter (Korthikanti et al. 2022 sec 4.2.2)
    tp_one = (1 - S.seq_par) * CM.tp_group("ar", act) + S.seq_par * (CM.tp_group("ag", act) + CM.tp_group("rs", act))
    # per layer: around attention and around the MLP; a MoE layer's routed experts move their tokens with the
    # dispatcher below instead, and its shared experts gather and scatter the layer's tokens once more
    # (Megatron-Core moe/shared_experts.py); times (2 + r): fwd, bwd, and the recomputed forward
    tp_blocks = {"dense": 2, "moe": 2 - C.moe + C.moe * sp.Min(1, S.shared_ffn)}
    # CP: ring attention passes K and V chunks around c ranks, c-1 hops forward, 2x backward (dK, dV)
    kv_chunk = 2 * S.act_bytes * C.tokens * C.kv_width / S.tp
    cp_layer = (S.cp - 1) * CM.cp_ring_step(kv_chunk) * (1 + 2 + S.rc_full)
    # EP (MoE layers): all-to-all dispatch and combine of the k routed copies of the tokens a rank holds
    # (SP-split: Megatron-Core requires sequence parallelism for MoE with tp > 1), forward and backward
    # (Lepikhin et al. 2020), over the e ranks of the expert grid (comm.ep_group); with expert TP = t each
    # rank's received tokens are then all-gathered over the t ranks and the expert outputs reduce-scattered
    # back (Megatron-Core moe/token_dispatcher.py MoEAlltoAllTokenDispatcher: gather_from_sequence_parallel_region
    # / reduce_scatter_to_sequence_parallel_region over the tp group); p = 1 groups cost nothing
    a2a_bytes = S.act_bytes * C.tok_sp * C.routed * h
    etp_bytes = S.act_bytes * C.tokens * C.routed * h
    ep_one = 2 * CM.ep_group("a2a", a2a_bytes) + CM.tp_group("ag", etp_bytes) + CM.tp_group("rs", etp_bytes)
    ep_layer = C.moe * ep_one * (2 + S.rc_full)
    L = {}
    for kind, layer in kinds.items():
        attn_core = [o for o in layer if o.name in core_names]
        lf, lb = _sum_time(layer, "fwd"), _sum_time(layer, "bwd")
        recompute = S.rc_full * lf + (1 - S.rc_full) * S.rc_sel * _sum_time(attn_core, "fwd")
        gemm_f = _sum_time([o for o in layer if o.cls == "gemm"], "fwd")
        # TP comm can hide behind the layer's GEMMs: forward (1x), backward (dgrad + wgrad, 2x), recomputed forward
        tp_raw = tp_blocks[kind] * tp_one * (2 + S.rc_full)
        tp_exposed = CM.exposed(tp_raw, gemm_f * (3 + S.rc_full), S.ov_tp)
        cp_exposed = CM.exposed(cp_layer, _sum_time(attn_core, "fwd") * (1 + 2 + S.rc_full), S.ov_cp)
        ep = ep_layer if kind == "moe" else sp.Integer(0)
        comm = tp_exposed + cp_exposed + ep
        # the part of it in the backward pass (with the recomputed forward): TP and EP (1 + r) of (2 + r) passes,
        # CP (2 + r) of (3 + r) (the backward ring carries dK and dV as well)
        comm_bwd = ((tp_exposed + ep) * (1 + S.rc_full) / (2 + S.rc_full)
                    + cp_exposed * (2 + S.rc_full) / (3 + S.rc_full))
        gpu_slot = lf + lb + recompute + comm
        host_slot = S.host_fwd + S.host_bwd + S.rc_full * S.host_rc
        L[kind] = dict(lf=lf, lb=lb, recompute=recompute, tp=tp_exposed, tp_raw=tp_raw, cp=cp_exposed, ep=ep, comm=comm,
                       comm_bwd=comm_bwd, host_extra=sp.Max(0, host_slot - gpu_slot), slot=gpu_slot, layer=layer,
                       core=attn_core)
    # the heaviest stage: the first holds min(l_d, l/p) dense layers, the others MoE layers only; n_d dense
    # layers on the stage that sets the pace (all of them when p = 1)
    dense_first = sp.Min(S.dense_layers, PL.stage_layers)
    # (a step function, not a Piecewise: sympy would try to decide the comparison over whole layer expressions)
    dense_slower = sp.Heaviside(L["dense"]["slot"] + L["dense"]["host_extra"]
                                - L["moe"]["slot"] - L["moe"]["host_extra"], 1, evaluate=False)
    n_d = dense_first * (1 - PL.has_pp + PL.has_pp * dense_slower)

    def per_stage(key):
        """Sum over the layers of the heaviest stage of one per-layer quantity."""
        return n_d * L["dense"][key] + (PL.stage_layers - n_d) * L["moe"][key]

    ef, eb = _sum_time(emb, "fwd"), _sum_time(emb, "bwd")
    hf, hb = _sum_time(head, "fwd"), _sum_time(head, "bwd")
    head_heavier = sp.Piecewise((1, hf + hb >= ef + eb), (0, True))
    only = 1 - PL.has_pp                                   # p = 1: one stage carries both
    edge_f = head_heavier * hf + (1 - head_heavier) * ef + only * (head_heavier * ef + (1 - head_heavier) * hf)
    edge_b = head_heavier * hb + (1 - head_heavier) * eb + only * (head_heavier * eb + (1 - head_heavier) * hb)
    stage_f = per_stage("lf") + edge_f
    stage_b = per_stage("lb") + edge_b
    # the host issues kernels asynchronously; each segment of a micro-batch (a layer slot, the
    # embedding, the LM head + loss) takes max(GPU time, host issue time), and the framework's own
    # per-micro-batch work (batch fetch and broadcast, whose sizes come back to the host, masks) runs
    # while the GPU waits. Small models are host-bound: measured issue times of the framework's code
    # path, calibrate/bench_host.py. (Sum of per-segment maxima: the vTrain runs show the embedding
    # and LM-head time adding to host-bound layers, not hiding under them.)
    gpu_edge = edge_f + edge_b
    host_edge = (PL.has_pp * (head_heavier * S.host_head + (1 - head_heavier) * S.host_emb)
                 + only * (S.host_emb + S.host_head))
    edge_extra = sp.Max(0, host_edge - gpu_edge) + S.host_mb
    stage_recompute, stage_comm = per_stage("recompute"), per_stage("comm")
    stage_host = per_stage("host_extra")
    t_mb = stage_f + stage_b + stage_recompute + stage_comm + stage_host + edge_extra

    m = PL.micro_batches
    pipe = PL.step_time(t_mb)
    bubble = PL.bubble_time(t_mb)

    # ---- PP send/recv: b (s/c) h activations, split over t (scatter/gather or SP) -----------
    p2p_size = S.act_bytes * C.tokens * h / S.tp
    pp_comm = (1 - S.ov_pp) * PL.p2p_transfers() * CM.p2p(p2p_size, CM.pp_same_node())

    # ---- DP: gradients once per step (ZeRO-3: per micro-batch) ------------------------------
    # dense gradients over the d x c group, expert gradients over the d c / e group (Megatron-Core DDP
    # intra_dp_cp_group / intra_expt_dp_group; comm.dp_group, comm.expert_dp_group)
    g_dense = M.dense_params_rank * S.grad_bytes
    g_exp = M.expert_params_rank * S.grad_bytes
    w_dense = M.dense_params_rank * S.act_bytes
    w_exp = M.expert_params_rank * S.act_bytes
    # ZeRO-2/3 reduce-scatter gradients after every micro-batch's backward, into the partitioned
    # buffer (Rajbhandari et al. 2020 sec 5.2); otherwise once per step after accumulation
    reduces = 1 + S.z_grad * (m - 1)
    reduce_dense = (1 - S.z_os) * CM.dp_group("ar", g_dense) + S.z_os * CM.dp_group("rs", g_dense)
    reduce_exp = C.moe * ((1 - S.z_os) * CM.expert_dp_group("ar", g_exp) + S.z_os * CM.expert_dp_group("rs", g_exp))
    gather = S.z_os * (CM.dp_group("ag", w_dense) + C.moe * CM.expert_dp_group("ag", w_exp))
    t_bwd_mb = stage_b + stage_recompute + per_stage("comm_bwd")
    t_fwd_mb = stage_f
    dp_reduce = CM.exposed(reduces * (reduce_dense + reduce_exp), reduces * t_bwd_mb, S.ov_dp)
    dp_gather = CM.exposed(gather, t_fwd_mb, S.ov_ag)
    dp_comm = (1 - S.z_param) * (dp_reduce + dp_gather)
    # ZeRO-3 / FSDP: all-gather the stage's parameters in forward and again in backward, and
    # reduce-scatter its gradients, every micro-batch (Rajbhandari et al. 2020 sec 5.3)
    z3 = m * (2 * (CM.dp_group("ag", w_dense) + C.moe * CM.expert_dp_group("ag", w_exp))
              + CM.dp_group("rs", g_dense) + C.moe * CM.expert_dp_group("rs", g_exp))
    zero3_comm = S.z_param * CM.exposed(z3, m * (stage_f + stage_b), S.ov_ag)

    # ---- optimizer: fused Adam over this rank's shard (compute.adam_op)
    n_opt = M.sharded(M.dense_params_rank, M.expert_params_rank, S.z_os)
    t_opt = C.op_time(C.adam_op(n_opt), "fwd")

    step = pipe + pp_comm + dp_comm + zero3_comm + t_opt
    out["step_time"] = step
    # breakdown (sums to step_time)
    out["t_forward"] = m * stage_f
    out["t_backward"] = m * stage_b
    out["t_recompute"] = m * stage_recompute
    out["t_tp_comm"] = m * per_stage("tp")
    out["t_cp_comm"] = m * per_stage("cp")
    out["t_ep_comm"] = m * per_stage("ep")
    out["t_host_overhead"] = m * (stage_host + edge_extra)
    out["t_pp_bubble"] = bubble
    out["t_pp_comm"] = pp_comm
    out["t_dp_comm"] = dp_comm + zero3_comm
    out["t_optimizer"] = t_opt
    # raw (before overlap) communication per step, for reporting
    out["tp_comm_total"] = m * per_stage("tp_raw")
    out["dp_comm_total"] = (1 - S.z_param) * (reduces * (reduce_dense + reduce_exp) + gather) + S.z_param * z3
    out["tp_comm"] = out["t_tp_comm"]
    out["dp_comm"] = out["t_dp_comm"]
    out["pp_bubble"] = PL.bubble_fraction
    out["pp_bubble_ratio"] = PL.bubble_ratio
    out["micro_batches"] = m
    out["t_microbatch_stage"] = t_mb

    # ---- FLOPs ------------------------------------------------------------------------------
    per_seq = {S.tp: 1, S.cp: 1, S.micro_batch: 1}
    n_moe = S.layers - S.dense_layers                      # model layers of each kind
    mf_layers = sum((n * C.ops_flops(L[k]["layer"], "model_fwd").subs(per_seq)
                     for k, n in (("moe", n_moe), ("dense", S.dense_layers))), sp.Integer(0))
    mf_head = C.ops_flops([o for o in head if o.cls == "gemm"], "model_fwd").subs(per_seq)
    mf_head = mf_head * S.vocab / C.vocab_pad.subs(per_seq)     # model FLOPs use the unpadded vocabulary
    out["flops"] = 3 * S.global_batch * (mf_layers + mf_head)   # forward + 2x backward
    mm = lambda ops, d: C.ops_flops([o for o in ops if o.cls in ("gemm", "attn", "bmm")], d)  # noqa: E731

    def hw_layer(k):
        core_f = mm(L[k]["core"], "fwd")
        lay = L[k]["layer"]
        return mm(lay, "fwd") + mm(lay, "bwd") + S.rc_full * mm(lay, "fwd") + (1 - S.rc_full) * S.rc_sel * core_f
    hw_head = mm(head, "fwd") + mm(head, "bwd")
    n_gpus = S.tp * S.pp * S.dp * S.cp
    # executed matmul FLOPs of all ranks: every (t, c, d) rank runs m micro-batches over all l layers
    out["hardware_flops"] = S.tp * S.cp * S.dp * m * (n_moe * hw_layer("moe") + S.dense_layers * hw_layer("dense")
                                                      + hw_head)
    out["n_gpus"] = n_gpus
    out["mfu"] = out["flops"] / (step * n_gpus * S.peak)
    out["hfu"] = out["hardware_flops"] / (step * n_gpus * S.peak)
    out["tokens_per_s"] = S.global_batch * S.seq_len / step

    # ---- memory and parameters ----------------------------------------------------------------
    out["memory"] = M.total
    out["mem_weights"] = M.weights
    out["mem_gradients"] = M.gradients
    out["mem_optimizer"] = M.optimizer
    out["mem_activations"] = M.activations + M.zero3_buffers
    out["mem_logits"] = M.logits
    out["mem_first_stage"] = M.first_total
    out["mem_last_stage"] = M.last_total
    out["mem_reserve"] = M.reserve
    out["mem_cuda_context"] = S.cuda_context
    out["mem_nccl"] = M.reserve_nccl
    out["mem_fragmentation"] = M.reserve_frag
    out["params"] = M.total_params
    out["active_params"] = M.active_params
    out["params_rank"] = M.stage_params_rank
    return out


# what each output is, its dimension, and a one-line description (docs and the dimension test)
QUANTITIES: dict[str, tuple[str, str]] = {
    "step_time": ("time", "wall time of one optimizer step"),
    "t_forward": ("time", "forward compute on the critical path"),
    "t_backward": ("time", "backward compute on the critical path"),
    "t_recompute": ("time", "activation recomputation"),
    "t_tp_comm": ("time", "TP/SP communication left exposed after overlap"),
    "t_cp_comm": ("time", "context-parallel ring exchange left exposed"),
    "t_ep_comm": ("time", "expert-parallel all-to-all"),
    "t_host_overhead": ("time", "time the GPU waits for the host to issue kernels (small layers)"),
    "t_pp_bubble": ("time", "pipeline fill and drain"),
    "t_pp_comm": ("time", "pipeline send/recv on the critical path"),
    "t_dp_comm": ("time", "data-parallel gradient reduce and parameter gather left exposed"),
    "t_optimizer": ("time", "optimizer step"),
    "tp_comm_total": ("time", "TP/SP communication before overlap"),
    "dp_comm_total": ("time", "DP communication before overlap"),
    "tp_comm": ("time", "alias of t_tp_comm"),
    "dp_comm": ("time", "alias of t_dp_comm"),
    "pp_bubble": ("", "fraction of the pipeline time spent in the bubble, (p-1)/(v m + p - 1) <= 1"),
    "pp_bubble_ratio": ("", "bubble over the ideal (bubble-free) pipeline time, (p-1)/(v m) (Narayanan et al. 2021)"),
    "micro_batches": ("", "micro-batches per step m = B / (b d)"),
    "t_microbatch_stage": ("time", "one micro-batch through the slowest stage, forward + backward"),
    "flops": ("flop", "model FLOPs per step (MFU convention: no recompute)"),
    "hardware_flops": ("flop", "executed matmul FLOPs per step (HFU convention)"),
    "n_gpus": ("", "GPUs t p d c"),
    "mfu": ("", "model FLOPs utilisation"),
    "hfu": ("", "hardware FLOPs utilisation"),
    "tokens_per_s": ("1/time", "training throughput"),
    "memory": ("bytes", "memory per GPU of the heaviest stage"),
    "mem_weights": ("bytes", "weights per GPU"),
    "mem_gradients": ("bytes", "gradients per GPU"),
    "mem_optimizer": ("bytes", "optimizer state per GPU"),
    "mem_activations": ("bytes", "activations per GPU (peak, in-flight micro-batches; logits on the head's stage)"),
    "mem_logits": ("bytes", "LM-head logits held by the last stage: activation dtype + fp32 for the loss"),
    "mem_first_stage": ("bytes", "memory per GPU of the first pipeline stage (embedding, most in-flight micro-batches)"),
    "mem_last_stage": ("bytes", "memory per GPU of the last pipeline stage (LM head and its logits)"),
    "mem_reserve": ("bytes", "memory outside the tensors: CUDA context + NCCL buffers + allocator fragmentation "
                    "(not in 'memory')"),
    "mem_cuda_context": ("bytes", "CUDA context (part of mem_reserve)"),
    "mem_nccl": ("bytes", "NCCL communicator buffers (part of mem_reserve)"),
    "mem_fragmentation": ("bytes", "caching-allocator reserve above the allocated peak (part of mem_reserve)"),
    "params": ("", "total parameters"),
    "active_params": ("", "parameters active per token"),
    "params_rank": ("", "parameters per GPU of the heaviest stage"),
}
