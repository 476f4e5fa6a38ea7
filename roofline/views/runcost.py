"""The whole run's compute and network traffic: FLOP and bytes sent/received per parallel axis.

A closed-form accounting in the style of the analytical run-cost model of a large training run
(reference 002): FLOP of the forward and backward passes, bytes each GPU transmits (Tx) and
receives (Rx) for tensor, pipeline, data, expert and context parallelism, aggregate FLOP/s and
network bytes/s, and the run time in days. It is derived from the same model as the step time:
parameter counts come from the compiled formulas, the run time from the roofline prediction of the
plan (or from a fixed utilization or FLOP rate when one is given).

FLOP (model FLOPs, the MFU convention; recomputation is not model work)::

    forward per token  = 2 N + l * 4 s h * (1 - causal/2) + 2 h V
    total              = 3 * forward * D = 6 N D + 3 D (attention + LM head)

with N the non-embedding parameters active per token (MoE: top-k experts; norms and biases
included, 6 FLOP per parameter per token as in Kaplan et al. 2020), D the training tokens, the
attention term the QK^T and AV products (halved when the kernel skips masked blocks), and the LM
head 2 h V over the unpadded vocabulary.

Bytes per GPU (ring algorithms; a ring collective over p ranks sends and receives
2(p-1)/p x size for all-reduce, (p-1)/p for all-gather, reduce-scatter and all-to-all), for one
micro-batch of T = b s / c tokens on l/p layers, element size beta:

* TP: 2 all-reduces of beta T h per layer forward and 2 backward (Megatron); sequence
  parallelism turns each into an all-gather + reduce-scatter: the same bytes. 2-D tensor
  parallelism t = t_intra x t_inter runs one ring over all t ranks (NCCL across nodes): 2(t-1)/t beta T h,
  of which each GPU's NIC carries 1/t_intra and NVLink the rest (formulas/comm.py).
  Full recomputation repeats the forward collectives in the backward pass.
* CP: ring attention passes K and V chunks (2 beta T h_kv / t) c-1 hops forward, twice backward.
* EP: all-to-all dispatch and combine of beta T k c_f h, forward and backward.
* PP: activations beta T h / t to the next stage forward, gradients back; p v - 1 boundaries
  shared by p GPUs.
* DP: gradients once per step: all-reduce (2(d-1)/d), or reduce-scatter + parameter all-gather
  with a distributed optimizer/ZeRO-1/2; ZeRO-3/FSDP: 2 all-gathers + 1 reduce-scatter per
  micro-batch. Expert gradients reduce over the d/e expert-data-parallel ranks.

Which bytes cross the network follows Megatron's rank order (tp innermost, then cp, dp, pp) and
the profile's GPUs per node, as in the step-time formulas.
"""
from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as dc_replace

from . import report
from ..base.results import MappingResult, freeze
from ..base.units import DAY

AXES = ("tp", "cp", "ep", "pp", "dp")


def _params(model, plan, hw) -> dict:
    """Total, active, embedding and routed-expert parameters: outputs of the compiled model."""
    from ..model.predict import evaluate, inputs

    return _params_of(evaluate(inputs(model, plan, hw)))


def _params_of(r) -> dict:
    return {"total": float(r["params"]), "active": float(r["active_params"]),
            "embedding": float(r["params_embedding"]), "expert": float(r["params_expert"])}


def _per_node(p: int, stride: int, gpn: int) -> int:
    """Members of a group of p ranks (rank stride ``stride``) that share a node: comm.members_per_node's rule, the
    fewest nodes of at most max(1, G // stride) members each, evenly (p // ceil(p / fit))."""
    fit = max(1, gpn // stride)
    return p // -(-p // fit)


@dataclass(frozen=True, eq=False)
class RunCost(MappingResult):
    """The whole run's FLOP, bytes per GPU and axis, and run time: SI floats (reads like the dict it was:
    ``rc["flop"]["total"]``). ``--json`` prints ``to_dict()``: these keys, in this order, and ``units``."""
    UNITS = {"flop": "flop", "flop.n": "1",           # flop.n: a parameter count (6ND's N), not FLOP
             "bytes_per_gpu": "B", "totals": "B", "totals.flop": "flop", "runtime_s": "s", "runtime_days": "day",
             "step_time_s": "s", "flop_per_s": "flop/s", "bytes_per_s": "B/s"}
    model: str
    gpu: str
    n_gpus: int
    tokens: float                  # counts (tokens, steps, parameters) and fractions carry no unit
    steps: float
    batch_tokens: int
    micro_batch: int
    micro_batches: int
    partition: object              # {tp, tp_intra, tp_inter, pp, dp, cp, ep, interleave, sequence_parallel}
    params: object                 # {total, active, non_embedding_active, embedding, expert}
    flop: object                   # {forward, backward, total, six_nd, attention, lm_head, n}
    bytes_per_gpu: object          # {axis: {tx_fwd, tx_bwd, rx_fwd, rx_bwd, inter}}
    totals: object                 # all GPUs: {flop, tx_fwd, tx_bwd, rx_fwd, rx_bwd, inter}
    runtime_s: float
    runtime_days: float
    runtime_source: str
    step_time_s: float
    utilization: float
    flop_per_s: object             # {per_gpu, total}
    bytes_per_s: object            # {per_gpu_tx, per_gpu_rx, per_gpu, total}
    fits_in_memory: bool


def run_cost(model, plan, hw, tokens: float, *, tp_intra: int | None = None, tp_inter: int | None = None,
             utilization: float | None = None, flop_rate: float | None = None) -> RunCost:
    """FLOP, bytes per axis and run time of training ``model`` on ``tokens`` tokens with ``plan``.

    Every FLOP and byte count is an output of one evaluation of the compiled model (formulas/step.py
    ``volumes``: ``bytes_<axis>_fwd/_bwd/_inter`` per GPU and step, ``flops_forward/_backward/_attention/
    _lm_head`` per step) times the steps D / (B s). Returns a frozen :class:`RunCost` of SI numbers: ``flop`` {forward, backward,
    total, six_nd, attention, lm_head, n}, ``bytes_per_gpu`` {axis: {tx_fwd, tx_bwd, rx_fwd, rx_bwd, inter}},
    ``totals`` (all GPUs), ``runtime_s``, ``flop_per_s`` and ``bytes_per_s`` (per GPU and total) and the inputs.
    """
    from ..base import schema
    from ..base.errors import InputError
    from ..model.predict import predict

    if tokens is None:
        raise InputError("run-cost needs a positive number of training tokens, got None")
    tokens = schema.positive(tokens, "run-cost tokens (training tokens D)")
    if tp_intra is not None:
        tp_intra = schema.number(tp_intra, "run-cost tp-intra (TP ranks inside a node)", int, low=1)
    if tp_inter is not None:
        tp_inter = schema.number(tp_inter, "run-cost tp-inter (TP ranks across nodes)", int, low=1)
    if utilization is not None:
        utilization = schema.fraction(utilization, "run-cost utilization (fraction of the dense peak)")
    if flop_rate is not None:
        flop_rate = schema.positive(flop_rate, "run-cost flop-rate (achieved FLOP/s per GPU)")
        if flop_rate > hw.peak(plan.dtype):
            raise InputError(f"run-cost flop-rate ({flop_rate:.4g} FLOP/s per GPU) exceeds the {plan.dtype} peak of "
                             f"{hw.id} ({hw.peak(plan.dtype):.4g} FLOP/s)")
    t, p, d, c, e, v = plan.tp, plan.pp, plan.dp, plan.cp, plan.ep, plan.interleave
    gpn = hw.gpus_per_node
    if tp_intra or tp_inter:
        ti = tp_intra or t // (tp_inter or 1)
        te = tp_inter or t // ti
        if ti * te != t:
            raise InputError(f"tp-intra x tp-inter ({ti} x {te}) must equal tp ({t})")
        if ti > gpn:
            raise InputError(f"tp-intra ({ti}) exceeds the GPUs per node ({gpn})")
    else:
        ti = _per_node(t, 1, gpn)
        te = t // ti
    # the TP group spans te nodes: the model sees ti GPUs per node (step time and which bytes cross nodes)
    hw_run = dc_replace(hw, gpus_per_node=ti) if te > 1 else hw
    s, B = model.seq_len, plan.batch
    steps = tokens / (B * s)
    n_gpus = plan.n_gpus
    pred = predict(model, plan, hw_run, steps=steps)      # the one evaluation every figure below reads
    r = pred.raw
    pr = _params_of(r)

    # ---- FLOP: the model's FLOPs per step x steps ------------------------------------------------------
    fwd, bwd = steps * r["flops_forward"], steps * r["flops_backward"]
    attention, lm_head = steps * r["flops_attention"], steps * r["flops_lm_head"]
    total = fwd + bwd
    six_nd = total - attention - lm_head                  # the parameters' matmuls: 6 N D, N their weights
    flop = {"forward": fwd, "backward": bwd, "total": total, "six_nd": six_nd,
            "attention": attention, "lm_head": lm_head, "n": six_nd / (6 * tokens)}

    # ---- bytes per GPU: the model's bytes per step x steps; ring collectives receive what they send ------
    per_gpu = {}
    for k in AXES:
        tx_f, tx_b = steps * r[f"bytes_{k}_fwd"], steps * r[f"bytes_{k}_bwd"]
        per_gpu[k] = {"tx_fwd": tx_f, "tx_bwd": tx_b, "rx_fwd": tx_f, "rx_bwd": tx_b,
                      "inter": steps * r[f"bytes_{k}_inter"]}
    tx_f = sum(a["tx_fwd"] for a in per_gpu.values())
    tx_b = sum(a["tx_bwd"] for a in per_gpu.values())
    totals = {"flop": total, "tx_fwd": n_gpus * tx_f, "tx_bwd": n_gpus * tx_b,
              "rx_fwd": n_gpus * tx_f, "rx_bwd": n_gpus * tx_b,
              "inter": n_gpus * sum(a["inter"] for a in per_gpu.values())}

    # ---- run time ----------------------------------------------------------------------------
    peak = hw.peak(plan.dtype)
    if flop_rate is not None:
        runtime, source = total / (n_gpus * flop_rate), f"fixed rate {flop_rate:.4g} FLOP/s per GPU"
    elif utilization is not None:
        runtime = total / (n_gpus * peak * utilization)
        source = f"{100 * utilization:.0f} % of the {plan.dtype} peak"
    else:
        runtime, source = steps * r["step_time"], "roofline prediction of the step time"
    net_gpu = 2 * (tx_f + tx_b)                           # whole run, one GPU, Tx + Rx
    return RunCost(
        model=model.name, gpu=hw.id, n_gpus=n_gpus, tokens=tokens, steps=steps,
        batch_tokens=B * s, micro_batch=plan.micro_batch, micro_batches=int(round(r["micro_batches"])),
        partition=freeze({"tp": t, "tp_intra": ti, "tp_inter": te, "pp": p, "dp": d, "cp": c, "ep": e,
                          "interleave": v, "sequence_parallel": bool(plan.sequence_parallel and t > 1)}),
        params=freeze({"total": pr["total"], "active": pr["active"], "non_embedding_active": pr["active"] - pr["embedding"],
                       "embedding": pr["embedding"], "expert": pr["expert"]}),
        flop=freeze(flop), bytes_per_gpu=freeze(per_gpu), totals=freeze(totals),
        runtime_s=runtime, runtime_days=runtime / DAY, runtime_source=source,
        step_time_s=runtime / steps, utilization=total / (runtime * n_gpus * peak),
        flop_per_s=freeze({"per_gpu": total / runtime / n_gpus, "total": total / runtime}),
        bytes_per_s=freeze({"per_gpu_tx": (tx_f + tx_b) / runtime, "per_gpu_rx": (tx_f + tx_b) / runtime,
                            "per_gpu": net_gpu / runtime, "total": n_gpus * net_gpu / runtime}),
        fits_in_memory=pred.fits_in_memory,
    )


_TOTAL_COLUMNS = (report.Col("Metric", 6), *(report.Col(h, 14, fmt=".3e", sep=" ") for h in ("Fwd", "Bwd", "Total")))
_AXIS_COLUMNS = (report.Col("axis", 6), *(report.Col(h, 12, fmt=".3e", sep=" ") for h in ("Tx fwd", "Tx bwd", "Tx total")),
                 report.Col("inter-node", 12, fmt=lambda share: f"{100 * share:>11.0f}%", sep=" "))


def render(rc: RunCost) -> str:
    """The report in the layout of the analytical run-cost model (reference 002)."""
    pa, fl, tot, P = rc["params"], rc["flop"], rc["totals"], rc["partition"]
    moe = pa["active"] < pa["total"]
    lines = [
        f"N: {pa['total']:.3e}" + (f" ({pa['active']:.3e} effective)" if moe else "")
        + f"   [6ND uses N = {fl['n']:.3e} non-embedding active matmul weights]",
        f"D: {rc['tokens']:.3e}   ({rc['steps']:.4g} steps of {rc['batch_tokens']:.4g} tokens)",
        f"b: {rc['micro_batch']} sequences per micro-batch, {rc['micro_batches']} micro-batches per step",
        f"P: {rc['n_gpus']} = {{TENSOR_EXT: {P['tp_inter']}, DATA: {P['dp']}, TENSOR_INT: {P['tp_intra']}, "
        f"SEQ: {P['cp']}, EXP: {P['ep']}, PIPE: {P['pp']}}}" + ("  (+ sequence parallel)" if P["sequence_parallel"] else ""),
        "", "", "FULL TRAINING RUN COST (all GPUs)",
    ]
    tx, rx = (tot["tx_fwd"], tot["tx_bwd"]), (tot["rx_fwd"], tot["rx_bwd"])
    lines.append(report.table(_TOTAL_COLUMNS, [(name, f, b, f + b) for name, (f, b) in (
        ("FLOP", (fl["forward"], fl["backward"])), ("Tx", tx), ("Rx", rx), ("net", (tx[0] + rx[0], tx[1] + rx[1])))],
        indent="    "))
    lines += ["", f"    FLOP = 6ND {fl['six_nd']:.3e} + attention {fl['attention']:.3e} + LM head {fl['lm_head']:.3e}",
              "", "BYTES PER GPU BY PARALLEL AXIS (whole run; Rx = Tx for ring collectives)"]
    rows = []
    for k, a in rc["bytes_per_gpu"].items():
        t = a["tx_fwd"] + a["tx_bwd"]
        rows.append((k.upper(), a["tx_fwd"], a["tx_bwd"], t, a["inter"] / t if t else 0.0))
    lines.append(report.table(_AXIS_COLUMNS, rows, indent="    "))
    fs, bs = rc["flop_per_s"], rc["bytes_per_s"]
    lines += [
        "",
        f"Cluster FLOP/sec:    {fs['per_gpu']:.3e}   (per GPU; {100 * rc['utilization']:.1f} % of peak)",
        f"Cluster bytes/sec:   {bs['per_gpu']:.3e} ({bs['per_gpu_tx']:.3e} Tx, {bs['per_gpu_rx']:.3e} Rx)",
        "",
        f"Total FLOP/sec:      {fs['total']:.3e}",
        f"Total bytes/sec:     {bs['total']:.3e} ({bs['total'] / 2:.3e} Tx, {bs['total'] / 2:.3e} Rx)",
        "",
        f"Runtime:             {rc['runtime_days']:.4g} days   ({rc['n_gpus']} x {rc['gpu']}, "
        f"{rc['step_time_s']:.4g} s per step; {rc['runtime_source']})",
    ]
    if rc.get("fits_in_memory") is False:
        lines.append("warning: the plan does not fit in memory (see `transformer` for the breakdown)")
    return "\n".join(lines)
