"""Per-stage breakdown and the execution timeline of one step (vTrain-style views).

Both views read the outputs of the same compiled model as the step time (``predict.evaluate``),
never a second model, and never evaluate it twice:

* per micro-batch, the model exports the terms of one layer of each kind (``t_layer_*``, and
  ``t_dense_layer_*`` for a MoE's leading dense layers), the embedding and LM head (``t_embed_*``,
  ``t_head_*``), the layers of its heaviest stage (``stage_layers``), which edge stage is heavier
  (``head_stage_heavier``) and the host time outside the layers (``t_edge_host``);
* stage i holds its layers (the heaviest stage ``stage_layers``, the others the rest, evenly), the
  first stage also the embedding, the last the LM head (p = 1: one stage holds both). Every stage's
  row adds up to the step time: busy time (compute, communication, optimizer) plus idle time = the
  pipeline bubble (the fill and drain through the other stages, formulas/pipeline.py bubble_time) plus the time a
  lighter stage waits on the slowest one. The slowest stage waits for nothing, so its busy time + bubble is exactly the
  formula's step time (for a dense model; a MoE's leading dense layers sit on the stages that hold
  them, which the formula folds into its heaviest stage);
* the DP reduce/gather and the optimizer step are the heaviest stage's (what the formula uses)
  and are shown for every stage.

The timeline replays the schedule (GPipe, 1F1B or interleaved 1F1B, Megatron's order) with
these per-stage, per-micro-batch durations. Each forward/backward slot includes its exposed
TP/CP/EP communication and one blocking pipeline send/recv (the formula's
2 (m v + p - 1) transfers). With equal stages the replay reproduces the formula's step time; with
unequal stages (embedding, LM head) it is the schedule's own makespan, close to the formula's, which passes
each other stage once in the fill and drain (Alpa eq. 2). See docs/timeline.md.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..spec import layout

COMM_KEYS = ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm")


def _check_finite(pred) -> None:
    """InputError unless every time the views replay is a finite number >= 0 (a NaN or infinite prediction,
    e.g. from a profile or flag at the edge of float range, cannot be drawn or scheduled)."""
    from ..base.errors import InputError

    bad = {k: v for k, v in pred.raw.items() if k.startswith("t_") or k in ("step_time", "micro_batches")
           if not (isinstance(v, (int, float, np.floating)) and np.isfinite(v) and v >= 0)}
    if bad:
        k, v = next(iter(bad.items()))
        raise InputError(f"timeline: the prediction's {k} is {v!r}, not a finite time (and {len(bad) - 1} other "
                         "term(s)); check the model, plan and hardware values for extreme or non-finite numbers")


# ---- per-stage breakdown ----------------------------------------------------------------------
# per micro-batch terms of one layer the model exports (formulas/step.py QUANTITIES), by their view name
LAYER_TERMS = {"fwd": "fwd", "bwd": "bwd", "recompute": "recompute", "tp": "tp_comm", "cp": "cp_comm",
               "ep": "ep_comm", "comm_bwd": "comm_bwd", "host": "host"}


def stage_layers(n_layers: int, pp: int, heaviest: int, heavy_stage: int) -> list[int]:
    """Layers of each pipeline stage: the model's heaviest stage holds ``heaviest`` (its ``stage_layers``:
    l/p, or ceil(l/(p v)) v for uneven stages), the other stages share the rest as evenly as they can, the
    extra layers on the stages next to the heaviest (Megatron-Core --decoder-first/last-pipeline-num-layers
    move whole layers off the edge stages; nothing heavier than the model's heaviest stage is built)."""
    heaviest = min(heaviest, n_layers)
    if pp == 1:
        return [n_layers]
    q, rem = divmod(n_layers - heaviest, pp - 1)
    others = sorted((k for k in range(pp) if k != heavy_stage), key=lambda k: abs(k - heavy_stage))
    layers = [0] * pp
    layers[heavy_stage] = heaviest
    for rank, k in enumerate(others):
        layers[k] = q + (rank < rem)
    return layers


def dense_per_stage(layers: list[int], interleave: int, dense_layers: int) -> list[int]:
    """Leading dense layers (a MoE's first_dense_layers) on each stage: Megatron-Core builds layers in order,
    virtual stage c p + i (model chunk c of stage i) after c p + i - 1; each chunk holds its stage's layers / v."""
    pp, dense = len(layers), [0] * len(layers)
    start = 0
    for c in range(interleave):
        for i, n in enumerate(layers):
            k = n // interleave + (c < n % interleave)
            dense[i] += max(0, min(dense_layers - start, k))
            start += k
    return dense


def _pieces(pred) -> dict:
    """Per micro-batch times of every stage, read from the model's outputs (no re-evaluation): each stage's
    layers of both kinds times the model's per-layer terms, the embedding on the first stage, the LM head on
    the last, the framework's per-micro-batch host work on every stage and the edges' host-bound excess
    (t_edge_host) on the stage the model takes as heaviest."""
    _check_finite(pred)
    r, plan = pred.raw, pred.plan
    P, v = plan.pp, plan.interleave
    heavy_stage = P - 1 if r["head_stage_heavier"] >= 0.5 else 0
    heavy = int(round(r["stage_layers"]))
    m = pred.model
    if plan.pipeline_layout:            # the ranks a stated layout gives (roofline/spec/layout.py, as the model reads it)
        ranks = layout.ranks(plan.pipeline_layout, P, v, m.n_layers, m.mtp_layers or 0)
        layers, dense = [rk.layers for rk in ranks], [rk.dense(m.dense_layers) for rk in ranks]
        edge = [(rk.embedding, rk.loss) for rk in ranks]
        heavy_stage = next(i for i, (e, loss) in enumerate(edge) if (loss if heavy_stage == P - 1 else e))
        heavy = layers[heavy_stage]
    else:
        layers = stage_layers(m.n_layers, P, heavy, heavy_stage)
        dense = dense_per_stage(layers, v, m.dense_layers)
        edge = [(i == 0, i == P - 1) for i in range(P)]
    stages = []
    for i, (n, n_dense) in enumerate(zip(layers, dense)):
        first, last = edge[i]
        st = {k: (n - n_dense) * r[f"t_layer_{name}"] + n_dense * r[f"t_dense_layer_{name}"]
              for k, name in LAYER_TERMS.items()}
        st["fwd"] += first * r["t_embed_fwd"] + last * r["t_head_fwd"]
        st["bwd"] += first * r["t_embed_bwd"] + last * r["t_head_bwd"]
        st["host"] += (i == heavy_stage) * r["t_edge_host"] + r["t_microbatch_host"]
        # CPU activation offload (p = 1: the one stage): the forward's and backward's waits for the copies
        st["offload_fwd"], st["offload_bwd"] = r["t_offload_fwd"], r["t_offload_bwd"]
        stages.append({k: float(x) for k, x in st.items()})
    return {"m": r["micro_batches"], "heavy": heavy, "heavy_stage": heavy_stage, "layers": layers, "dense": dense,
            "stages": stages, "send_recv": r["t_pp_send_recv"] if P > 1 else 0.0}


def per_stage(pred) -> list[dict]:
    """One row per pipeline stage (seconds per step): compute, communication and idle time.

    Keys: stage, layers, embedding, lm_head, forward, backward, recompute, compute, tp_comm,
    cp_comm, ep_comm, pp_comm, dp_comm, communication, host (GPU waiting for the host to issue
    kernels), offload (the compute stream waiting for CPU activation offload copies), optimizer, bubble,
    wait, idle, total, microbatch (one micro-batch through the stage, forward + backward with its comm).
    ``total`` equals the step time for every stage.
    """
    replayable(pred.plan)
    r, q = pred.raw, _pieces(pred)
    P, m = pred.plan.pp, q["m"]
    step = r["step_time"]
    rows = []
    for i, st in enumerate(q["stages"]):
        row = {"stage": i, "layers": q["layers"][i], "embedding": i == 0, "lm_head": i == P - 1,
               "forward": m * st["fwd"], "backward": m * st["bwd"], "recompute": m * st["recompute"]}
        row["compute"] = row["forward"] + row["backward"] + row["recompute"]
        for k in ("tp", "cp", "ep"):
            row[f"{k}_comm"] = m * st[k]
        row["pp_comm"] = r["t_pp_comm"]
        row["dp_comm"] = r["t_dp_comm"]
        row["communication"] = sum(row[k] for k in COMM_KEYS)
        row["host"] = m * st["host"]
        row["offload"] = m * (st["offload_fwd"] + st["offload_bwd"])
        row["optimizer"] = r["t_optimizer"]
        row["microbatch"] = sum(st[k] for k in ("fwd", "bwd", "recompute", "tp", "cp", "ep", "host", "offload_fwd",
                                                "offload_bwd"))
        busy = row["compute"] + row["communication"] + row["host"] + row["offload"] + row["optimizer"]
        row["bubble"] = r["t_pp_bubble"]
        row["wait"] = max(step - busy - row["bubble"], 0.0)
        row["idle"] = row["bubble"] + row["wait"]
        row["total"] = busy + row["idle"]
        rows.append({k: float(v) if isinstance(v, (float, np.floating)) else v for k, v in row.items()})
    return rows


def render_per_stage(rows: list[dict]) -> str:
    """Fixed-width table of :func:`per_stage` rows (milliseconds)."""
    cols = [("fwd", "forward"), ("bwd", "backward"), ("recomp", "recompute"), ("tp", "tp_comm"),
            ("cp", "cp_comm"), ("ep", "ep_comm"), ("pp", "pp_comm"), ("dp", "dp_comm"), ("host", "host"),
            ("offload", "offload"),
            ("optim", "optimizer"),
            ("bubble", "bubble"), ("wait", "wait"), ("total", "total")]
    cols = [c for c in cols if c[0] not in ("cp", "ep", "host", "offload") or any(r[c[1]] > 0 for r in rows)]
    head = f"{'stage':<7}{'layers':>6}  " + "".join(f"{c:>10}" for c, _ in cols)
    lines = ["per pipeline stage, ms per step (compute | exposed communication | idle)", head]
    for r in rows:
        tag = "E" if r["embedding"] else ""
        tag += "H" if r["lm_head"] else ""
        lines.append(f"{r['stage']:<4}{tag:<3}{r['layers']:>6}  " + "".join(f"{1e3 * r[k]:>10.2f}" for _, k in cols))
    lines.append("E = embedding, H = LM head; idle = bubble + wait for the slowest stage; total = step time")
    return "\n".join(lines)


# ---- schedule replay --------------------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    stage: int
    name: str          # e.g. "F3", "B3", "R3", "dp reduce", "optimizer", "bubble"
    kind: str          # forward | backward | recompute | comm | p2p | dp | optimizer | idle
    start: float       # s
    dur: float         # s
    micro_batch: int = -1
    chunk: int = 0


def replayable(plan) -> None:
    """InputError (one line) for a schedule the replay does not draw: DualPipeV, DualPipe and the zero-bubble ZB1P /
    ZB2P (their split backward)."""
    if plan.schedule in ("dualpipev", "dualpipe", "zb1p", "zb2p"):
        from ..base.errors import InputError
        name = {"dualpipev": "DualPipeV's V of paired forward and backward chunks",
                "dualpipe": "DualPipe's two directions of paired forward and backward chunks",
                "zb1p": "ZB1P's backward split into input and deferred weight gradients",
                "zb2p": "ZB2P's backward split into input and deferred weight gradients"}[plan.schedule]
        raise InputError(f"timeline: the replay draws 1F1B, interleaved 1F1B and GPipe; {name} is not drawn (its step "
                         "time and bubble are in the table)")


def _order(schedule: str, p: int, m: int, v: int, i: int) -> list[tuple[str, int, int]]:
    """Stage i's ops in execution order: ("F"|"B", micro-batch, model chunk)."""
    if schedule == "gpipe" and p > 1:        # at pp 1 no pipeline: each micro-batch's forward, then its backward
        return [("F", j, 0) for j in range(m)] + [("B", j, 0) for j in range(m)]
    if v == 1:
        warm = min(p - i - 1, m)
        ops = [("F", j, 0) for j in range(warm)]
        for k in range(m - warm):
            ops += [("F", warm + k, 0), ("B", k, 0)]
        return ops + [("B", j, 0) for j in range(m - warm, m)]
    # interleaved 1F1B (Megatron-LM schedules.py): micro-batches in groups of p per chunk
    total = m * v

    def fwd(k):
        return ("F", (k // (p * v)) * p + k % p, (k // p) % v)

    def bwd(k):
        return ("B", (k // (p * v)) * p + k % p, v - 1 - (k // p) % v)
    warm = min((p - i - 1) * 2 + (v - 1) * p, total)
    ops = [fwd(k) for k in range(warm)]
    for k in range(total - warm):
        ops += [fwd(warm + k), bwd(k)]
    return ops + [bwd(k) for k in range(total - warm, total)]


def replay(schedule: str, p: int, m: int, v: int, fwd, bwd, p2p: float = 0.0) -> dict:
    """List-schedule one step. ``fwd[i]``/``bwd[i]``: duration of one micro-batch slot of one model
    chunk on stage i (p2p included by the caller if wanted); ``p2p`` is added as a wire delay
    between stages. Returns {(op, stage, micro-batch, chunk): (start, end)}."""
    orders = [_order(schedule, p, m, v, i) for i in range(p)]
    pos, free, done = [0] * p, [0.0] * p, {}
    n_ops = sum(len(o) for o in orders)
    while len(done) < n_ops:
        progressed = False
        for i in range(p):
            while pos[i] < len(orders[i]):
                op, j, c = orders[i][pos[i]]
                vs = c * p + i                                 # virtual stage index
                if op == "F":
                    dep = None if vs == 0 else ("F", (vs - 1) % p, j, (vs - 1) // p)
                else:
                    dep = ("F", i, j, c) if vs == p * v - 1 else ("B", (vs + 1) % p, j, (vs + 1) // p)
                own_f = ("F", i, j, c)
                if dep is not None and dep not in done or (op == "B" and own_f not in done):
                    break
                ready = 0.0 if dep is None else done[dep][1] + (p2p if dep[1] != i else 0.0)
                if op == "B":
                    ready = max(ready, done[own_f][1])
                start = max(free[i], ready)
                end = start + (fwd[i] if op == "F" else bwd[i])
                done[(op, i, j, c)] = (start, end)
                free[i] = end
                pos[i] += 1
                progressed = True
        if not progressed:
            raise RuntimeError("pipeline schedule deadlocked")   # a bug, not user input
    return done


def events(pred) -> tuple[list[Event], float]:
    """The step's events per stage and the replayed makespan (s)."""
    plan = pred.plan
    replayable(plan)
    r, q = pred.raw, _pieces(pred)
    P, v, m = plan.pp, plan.interleave, int(round(q["m"]))
    sched = plan.schedule if plan.schedule != "interleaved" or v > 1 else "1f1b"
    rc_full = 1.0 if plan.recompute == "full" else 0.0
    link = q["send_recv"]                                       # one blocking send/recv per slot (p > 1)
    F, B, parts = [], [], []
    for st in q["stages"]:
        # per model chunk; exposed layer communication split forward / backward as the model counts it
        # (t_layer_comm_bwd); the host-bound time in the forward's share of the 2 + r passes
        one = {k: x / v for k, x in st.items()}
        comm_b = one["comm_bwd"]
        comm_f = one["tp"] + one["cp"] + one["ep"] - comm_b
        host_f = one["host"] / (2 + rc_full)
        fc = one["fwd"] + host_f + one["offload_fwd"]          # the compute stream's waits for offload copies
        bc = one["bwd"] + one["host"] - host_f + one["offload_bwd"]
        F.append(fc + comm_f + link)
        B.append(one["recompute"] + bc + comm_b + link)
        parts.append((((fc, "forward"), (comm_f, "comm"), (link, "p2p")),
                      ((one["recompute"], "recompute"), (bc, "backward"), (comm_b, "comm"), (link, "p2p"))))
    done = replay(sched, P, m, v, F, B)
    evs: list[Event] = []
    for (op, i, j, c), (start, _end) in sorted(done.items(), key=lambda kv: kv[1][0]):
        t = start
        for dur, kind in parts[i][0 if op == "F" else 1]:
            if dur <= 0:
                continue
            label = {"forward": "F", "backward": "B", "recompute": "R"}.get(kind)
            name = f"{label}{j}" if label else ("send/recv" if kind == "p2p" else "TP/CP/EP comm")
            evs.append(Event(i, name + (f".{c}" if v > 1 and label else ""), kind, t, dur, j, c))
            t += dur
    end_pipe = [max((e.start + e.dur for e in evs if e.stage == i), default=0.0) for i in range(P)]
    tail = r["t_dp_comm"], r["t_optimizer"]
    for i in range(P):
        t = end_pipe[i]
        for dur, name, kind in ((tail[0], "DP reduce/gather", "dp"), (tail[1], "optimizer", "optimizer")):
            if dur > 0:
                evs.append(Event(i, name, kind, t, dur))
                t += dur
    makespan = max(e.start + e.dur for e in evs) if evs else 0.0
    # idle gaps (bubbles and waits) made explicit
    for i in range(P):
        t = 0.0
        for e in sorted((e for e in evs if e.stage == i), key=lambda e: e.start):
            if e.start - t > 1e-12:
                evs.append(Event(i, "idle", "idle", t, e.start - t))
            t = max(t, e.start + e.dur)
        if makespan - t > 1e-12:
            evs.append(Event(i, "idle", "idle", t, makespan - t))
    evs.sort(key=lambda e: (e.stage, e.start))
    return evs, makespan


def trace(pred) -> dict:
    """Chrome trace (``chrome://tracing``, https://ui.perfetto.dev): one track per stage, µs."""
    evs, makespan = events(pred)
    p = pred.plan
    layers = _pieces(pred)["layers"]
    out = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0,
            "args": {"name": f"{pred.model.name}: one step, {p.schedule}, tp={p.tp} pp={p.pp} dp={p.dp}"}}]
    for i in range(p.pp):
        what = " + embedding" * (i == 0) + " + LM head" * (i == p.pp - 1)
        out.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": i,
                    "args": {"name": f"stage {i} ({layers[i]} layers{what})"}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": i, "args": {"sort_index": i}})
    for e in evs:
        args = {"kind": e.kind}
        if e.micro_batch >= 0:
            args.update(micro_batch=e.micro_batch, chunk=e.chunk)
        out.append({"name": e.name, "cat": e.kind, "ph": "X", "pid": 0, "tid": e.stage,
                    "ts": round(e.start * 1e6, 3), "dur": round(e.dur * 1e6, 3), "args": args})
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {"step_time_s": pred.raw["step_time"], "replayed_makespan_s": makespan,
                          "schedule": p.schedule, "micro_batches": pred.micro_batches}}


def write_trace(pred, path) -> None:
    """Write the Chrome trace as strict JSON (no NaN/Infinity), atomically: the trace is built first, then
    written to a temporary file in the same folder and moved onto ``path``."""
    from ..base import schema
    from ..base.errors import InputError

    text = json.dumps(trace(pred), allow_nan=False)
    try:
        schema.write_text_atomic(path, text)
    except OSError as exc:
        raise InputError(f"cannot write --trace {path}: {exc.strerror or exc}") from None


COLORS = {"forward": "#4c72b0", "backward": "#dd8452", "recompute": "#c9a26b", "comm": "#8172b3",
          "p2p": "#937860", "dp": "#55a868", "optimizer": "#2f4f4f", "idle": "#eeeeee"}


def plot_gantt(pred, path) -> None:
    """Gantt chart of one step (PNG/SVG/PDF by the file's suffix); needs matplotlib."""
    from . import plotting
    plt = plotting.pyplot("--timeline")
    from matplotlib.patches import Patch

    evs, makespan = events(pred)
    P = pred.plan.pp
    fig, ax = plt.subplots(figsize=(12, 0.6 * P + 1.8))
    scale = 1e3 if makespan < 10 else 1.0
    unit = "ms" if scale == 1e3 else "s"
    for kind in COLORS:
        bars = [(e.start * scale, e.dur * scale) for e in evs if e.kind == kind]
        for i in range(P):
            bi = [(s, d) for (s, d), e in zip(bars, [e for e in evs if e.kind == kind]) if e.stage == i]
            if bi:
                ax.broken_barh(bi, (P - 1 - i - 0.4, 0.8), facecolors=COLORS[kind],
                               edgecolor="white" if kind in ("forward", "backward") else "none", linewidth=0.3)
    if P * pred.micro_batches * pred.plan.interleave <= 128:
        for e in evs:
            if e.kind in ("forward", "backward") and e.dur * scale > makespan * scale / 80:
                ax.text((e.start + e.dur / 2) * scale, P - 1 - e.stage, str(e.micro_batch), ha="center",
                        va="center", fontsize=6, color="white")
    ax.set_yticks(range(P))
    ax.set_yticklabels([f"stage {i}" for i in reversed(range(P))])
    ax.set_xlabel(f"time ({unit})")
    ax.set_xlim(0, makespan * scale)
    p = pred.plan
    ax.set_title(f"{pred.model.name}: {p.schedule}" + (f" v={p.interleave}" if p.interleave > 1 else "")
                 + f", tp={p.tp} pp={p.pp} dp={p.dp}, {pred.micro_batches} micro-batches; "
                 f"step {pred.raw['step_time'] * scale:.4g} {unit}", fontsize=9)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLORS.items()], ncol=len(COLORS), fontsize=7,
              loc="upper center", bbox_to_anchor=(0.5, -0.25 if P > 2 else -0.45), frameon=False)
    fig.tight_layout()
    plotting.save(fig, path, "--timeline", dpi=130)
