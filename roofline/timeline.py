"""Per-stage breakdown and the execution timeline of one step (vTrain-style views).

Both views are derived from the same compiled formulas as the step time (``predict.evaluate``),
never from a second model:

* per-layer and embedding/LM-head times come from evaluating the formulas at a few modified
  inputs (twice the layers; the stage alone with p = 1; a minimal vocabulary) and differencing;
* stage i holds l/p layers, the first stage also the embedding, the last the LM head (p = 1: one
  stage holds both). Every stage's row adds up to the step time: busy time (compute,
  communication, optimizer) plus idle time = the pipeline bubble (p-1)/v micro-batch slots of the
  slowest stage plus the time a lighter stage waits on the slowest one. The slowest stage waits
  for nothing, so its busy time + bubble is exactly the formula's step time;
* the DP reduce/gather and the optimizer step are the heaviest stage's (what the formula uses)
  and are shown for every stage.

The timeline replays the schedule (GPipe, 1F1B or interleaved 1F1B, Megatron's order) with
these per-stage, per-micro-batch durations. Each forward/backward slot includes its exposed
TP/CP/EP communication and one blocking pipeline send/recv (the formula's
2 (m v + p - 1) transfers). With equal stages the replay reproduces the formula's step time; with
unequal stages (embedding, LM head) it is the schedule's own makespan, close to the formula's
(under 2 % for GPT-3 175B), which charges every slot the slowest stage's forward + backward. See
docs/timeline.md.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

COMM_KEYS = ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm")
# breakdown terms the formulas charge per layer and micro-batch on the heaviest stage
PER_LAYER = ("recompute", "tp_comm", "cp_comm", "ep_comm", "host_overhead")


def _check_finite(pred) -> None:
    """InputError unless every time the views replay is a finite number >= 0 (a NaN or infinite prediction,
    e.g. from a profile or flag at the edge of float range, cannot be drawn or scheduled)."""
    from .errors import InputError

    bad = {k: v for k, v in pred.raw.items() if k.startswith("t_") or k in ("step_time", "micro_batches")
           if not (isinstance(v, (int, float, np.floating)) and np.isfinite(v) and v >= 0)}
    if bad:
        k, v = next(iter(bad.items()))
        raise InputError(f"timeline: the prediction's {k} is {v!r}, not a finite time (and {len(bad) - 1} other "
                         "term(s)); check the model, plan and hardware values for extreme or non-finite numbers")


# ---- per-stage breakdown ----------------------------------------------------------------------
def _pieces(pred) -> dict:
    """Per micro-batch pieces: per-layer fwd/bwd/recompute/comm, embedding and head fwd/bwd."""
    from .predict import evaluate, inputs

    _check_finite(pred)

    m, p, hw = pred.model, pred.plan, pred.hardware
    x0 = inputs(m, p, hw)
    L, P, v = int(x0["layers"]), int(x0["pp"]), int(x0["interleave"])
    heavy = -(-L // (P * v)) * v                             # layers of the heaviest stage (the formula's)
    variants = [
        {},                                                  # as planned
        {"layers": L + P * v},                               # v more layers per stage: per-layer terms
        {"pp": 1.0, "layers": heavy, "interleave": 1.0},     # the heaviest stage alone: embedding + head
        {"vocab": 1.0},                                      # which edge is the heavier one
    ]
    x = {k: np.array([var.get(k, x0[k]) for var in variants], dtype=float) for k in x0}
    r = evaluate(x)
    mb = float(r["micro_batches"][0])
    zero = np.zeros(len(variants))
    per_mb = {k: r.get(f"t_{k}", zero) / mb for k in ("forward", "backward") + PER_LAYER}
    lf = (per_mb["forward"][1] - per_mb["forward"][0]) / v
    lb = (per_mb["backward"][1] - per_mb["backward"][0]) / v
    edge_f, edge_b = per_mb["forward"][0] - heavy * lf, per_mb["backward"][0] - heavy * lb
    sum_f, sum_b = per_mb["forward"][2] - heavy * lf, per_mb["backward"][2] - heavy * lb
    head_heavier = True
    if P == 1:
        hf, hb, ef, eb = sum_f, sum_b, 0.0, 0.0             # one stage holds both; no split needed
    else:
        small = (per_mb["forward"][3] - heavy * lf) + (per_mb["backward"][3] - heavy * lb)
        head_heavier = small < (edge_f + edge_b) * (1 - 1e-9)   # shrinking V shrank the edge: head was the max
        if head_heavier:
            hf, hb, ef, eb = edge_f, edge_b, sum_f - edge_f, sum_b - edge_b
        else:
            ef, eb, hf, hb = edge_f, edge_b, sum_f - edge_f, sum_b - edge_b
    # layers per stage: l/p, or (uneven stages) the heaviest count on the stages next to the heavier
    # edge, so that the slowest stage is the formula's
    q, rem = divmod(L, P)
    layers = [q] * P
    extra = [P - 1 - k for k in range(rem)] if head_heavier else list(range(rem))
    for k in extra:
        layers[k] += 1
    if heavy > max(layers):                                  # interleaved and uneven: the formula rounds up
        layers[P - 1 if head_heavier else 0] = heavy
    return {"m": mb, "heavy": heavy, "layers": layers, "layer_f": lf, "layer_b": lb,
            "layer_rc": float(per_mb["recompute"][0]) / heavy,
            "layer_tp": float(per_mb["tp_comm"][0]) / heavy, "layer_cp": float(per_mb["cp_comm"][0]) / heavy,
            "layer_ep": float(per_mb["ep_comm"][0]) / heavy, "layer_host": float(per_mb["host_overhead"][0]) / heavy,
            "embed_f": max(ef, 0.0), "embed_b": max(eb, 0.0), "head_f": max(hf, 0.0), "head_b": max(hb, 0.0)}


def per_stage(pred) -> list[dict]:
    """One row per pipeline stage (seconds per step): compute, communication and idle time.

    Keys: stage, layers, embedding, lm_head, forward, backward, recompute, compute, tp_comm,
    cp_comm, ep_comm, pp_comm, dp_comm, communication, host (GPU waiting for the host to issue
    kernels), optimizer, bubble, wait, idle, total,
    microbatch (one micro-batch through the stage, forward + backward with its comm).
    ``total`` equals the step time for every stage.
    """
    r, q = pred.raw, _pieces(pred)
    P, m = pred.plan.pp, q["m"]
    step = r["step_time"]
    rows = []
    for i in range(P):
        first, last, n = i == 0, i == P - 1, q["layers"][i]
        f = n * q["layer_f"] + first * q["embed_f"] + last * q["head_f"]
        b = n * q["layer_b"] + first * q["embed_b"] + last * q["head_b"]
        row = {"stage": i, "layers": n, "embedding": first, "lm_head": last,
               "forward": m * f, "backward": m * b, "recompute": m * n * q["layer_rc"]}
        row["compute"] = row["forward"] + row["backward"] + row["recompute"]
        for k in ("tp", "cp", "ep"):
            row[f"{k}_comm"] = m * n * q[f"layer_{k}"]
        row["pp_comm"] = r["t_pp_comm"]
        row["dp_comm"] = r["t_dp_comm"]
        row["communication"] = sum(row[k] for k in COMM_KEYS)
        row["host"] = m * n * q["layer_host"]
        row["optimizer"] = r["t_optimizer"]
        row["microbatch"] = f + b + n * sum(q[f"layer_{k}"] for k in ("rc", "tp", "cp", "ep", "host"))
        busy = row["compute"] + row["communication"] + row["host"] + row["optimizer"]
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
            ("optim", "optimizer"),
            ("bubble", "bubble"), ("wait", "wait"), ("total", "total")]
    cols = [c for c in cols if c[0] not in ("cp", "ep", "host") or any(r[c[1]] > 0 for r in rows)]
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


def _order(schedule: str, p: int, m: int, v: int, i: int) -> list[tuple[str, int, int]]:
    """Stage i's ops in execution order: ("F"|"B", micro-batch, model chunk)."""
    if schedule == "gpipe":
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
    r, q = pred.raw, _pieces(pred)
    plan = pred.plan
    P, v, m = plan.pp, plan.interleave, int(round(q["m"]))
    sched = plan.schedule if plan.schedule != "interleaved" or v > 1 else "1f1b"
    rc_full = 1.0 if plan.recompute == "full" else 0.0
    # exposed layer communication, split forward / backward as the formulas count collectives
    comm_f = q["layer_tp"] / (2 + rc_full) + q["layer_cp"] / (3 + rc_full) + q["layer_ep"] / (2 + rc_full)
    comm_b = q["layer_tp"] + q["layer_cp"] + q["layer_ep"] - comm_f
    host_f = q["layer_host"] / (2 + rc_full)                    # host-bound share of each slot
    host_b = q["layer_host"] - host_f
    # blocking send/recv: the formula's 2 (m v + p - 1) transfers, one per slot
    n_p2p = 2 * (m * v + P - 1) if P > 1 else 0
    t_p2p = r["t_pp_comm"] / n_p2p if n_p2p else 0.0
    F, B, parts = [], [], []
    for i in range(P):
        ef = q["embed_f"] * (i == 0) / v
        eb = q["embed_b"] * (i == 0) / v
        hf = q["head_f"] * (i == P - 1) / v
        hb = q["head_b"] * (i == P - 1) / v
        lpc = q["layers"][i] / v                                # layers per model chunk
        fc, fcomm = lpc * (q["layer_f"] + host_f) + ef + hf, lpc * comm_f
        rcmp, bc, bcomm = lpc * q["layer_rc"], lpc * (q["layer_b"] + host_b) + eb + hb, lpc * comm_b
        link = t_p2p if P > 1 else 0.0
        F.append(fc + fcomm + link)
        B.append(rcmp + bc + bcomm + link)
        parts.append((((fc, "forward"), (fcomm, "comm"), (link, "p2p")),
                      ((rcmp, "recompute"), (bc, "backward"), (bcomm, "comm"), (link, "p2p"))))
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
    from . import schema
    from .errors import InputError

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
