"""Per-stage breakdown, schedule replay, Chrome trace and Gantt chart (vTrain parity)."""
import json
import subprocess
import sys

import pytest
from hypothesis import assume, given, settings, strategies as st

from roofline.spec import hardware
from roofline.views import timeline
from roofline.spec.config import Model, Plan
from roofline.model.predict import predict

HW = hardware.load("a100-sxm4-80gb")
MODEL = Model(n_layers=8, d_model=1024, n_heads=16, vocab=50257, seq_len=1024)
PLANS = {
    "single": Plan(micro_batch=2, global_batch=8),
    "1f1b": Plan(tp=2, pp=4, dp=2, micro_batch=1, global_batch=16),
    "interleaved": Plan(pp=4, interleave=2, schedule="interleaved", micro_batch=1, global_batch=8),
    "gpipe": Plan(pp=2, micro_batch=1, global_batch=4, schedule="gpipe", recompute="full"),
    "uneven": Plan(pp=3, micro_batch=1, global_batch=6, uneven_stages=True),
}


def pred_for(name):
    return predict(MODEL, PLANS[name], HW)


@pytest.mark.parametrize("name", PLANS)
def test_every_stage_adds_up_to_the_step_time(name):
    pred = pred_for(name)
    rows = timeline.per_stage(pred)
    step = pred.raw["step_time"]
    assert len(rows) == pred.plan.pp
    assert sum(r["layers"] for r in rows) == MODEL.n_layers
    for r in rows:
        assert r["total"] == pytest.approx(step, rel=1e-12)
        assert r["compute"] == pytest.approx(r["forward"] + r["backward"] + r["recompute"])
        assert r["idle"] == pytest.approx(r["bubble"] + r["wait"]) and r["wait"] >= 0
    # the slowest stage waits for nobody: busy + bubble is exactly the formula's step time
    slowest = max(rows, key=lambda r: r["compute"] + r["communication"] + r["host"])
    assert slowest["wait"] == pytest.approx(0, abs=1e-9 * step)
    # and its compute is the formula's critical-path compute
    assert slowest["forward"] == pytest.approx(pred.raw["t_forward"], rel=1e-9)
    assert slowest["backward"] == pytest.approx(pred.raw["t_backward"], rel=1e-9)
    assert slowest["recompute"] == pytest.approx(pred.raw["t_recompute"], rel=1e-9)
    assert slowest["tp_comm"] == pytest.approx(pred.raw["t_tp_comm"], rel=1e-9)
    assert slowest["host"] == pytest.approx(pred.raw.get("t_host_overhead", 0.0), rel=1e-9, abs=1e-15)
    assert rows[0]["embedding"] and rows[-1]["lm_head"]


def test_lm_head_stage_is_heaviest():
    rows = timeline.per_stage(pred_for("1f1b"))
    assert rows[-1]["forward"] > rows[1]["forward"] > 0
    assert rows[0]["forward"] > rows[1]["forward"]          # the embedding costs something too


@pytest.mark.parametrize("schedule,v", [("1f1b", 1), ("gpipe", 1), ("interleaved", 2), ("interleaved", 4)])
def test_replay_of_equal_stages_matches_the_closed_form(schedule, v):
    p, m, f, b = 4, 8, 1.0, 2.0
    done = timeline.replay(schedule, p, m, v, [f / v] * p, [b / v] * p)
    makespan = max(e for _, e in done.values())
    assert len(done) == 2 * p * m * v
    assert makespan == pytest.approx((m + (p - 1) / v) * (f + b))          # Narayanan et al. 2021


@pytest.mark.parametrize("name", PLANS)
def test_replayed_makespan_is_close_to_the_formula(name):
    pred = pred_for(name)
    evs, makespan = timeline.events(pred)
    # unequal stages (embedding, LM head): the closed form passes each stage once in the fill and drain and the
    # slowest m - 1 more times (Alpa eq. 2), the replay runs Megatron's order slot by slot; they differ where one stage
    # is slowest forward and another backward (in this tiny model the LM head is a third of a stage: up to 8 %, the
    # textbook (m + (p-1)/v) t_mb was 15 % off; a realistic model: test_replay_of_a_real_model)
    assert makespan == pytest.approx(pred.raw["step_time"], rel=0.09)
    if pred.plan.pp == 1:
        assert makespan == pytest.approx(pred.raw["step_time"], rel=1e-9)
    n_fwd = sum(1 for e in evs if e.kind == "forward")
    assert n_fwd == pred.plan.pp * pred.micro_batches * pred.plan.interleave
    for i in range(pred.plan.pp):                             # no overlap on a track
        track = sorted((e for e in evs if e.stage == i), key=lambda e: e.start)
        for a, b in zip(track, track[1:]):
            assert b.start >= a.start + a.dur - 1e-12


def test_replay_of_a_real_model():
    from roofline import predict_config
    pred = predict_config("gpt3_175b_a100")
    _, makespan = timeline.events(pred)
    assert makespan == pytest.approx(pred.raw["step_time"], rel=0.02)


def test_trace_is_chrome_json_with_one_track_per_stage(tmp_path):
    pred = pred_for("1f1b")
    path = tmp_path / "t.json"
    timeline.write_trace(pred, path)
    d = json.loads(path.read_text())
    xs = [e for e in d["traceEvents"] if e["ph"] == "X"]
    assert xs and all(isinstance(e["ts"], (int, float)) and e["dur"] >= 0 for e in xs)
    assert {e["tid"] for e in xs} == set(range(pred.plan.pp))
    names = [e for e in d["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert sorted(e["tid"] for e in names) == list(range(pred.plan.pp))
    assert {"forward", "backward", "idle"} <= {e["cat"] for e in xs}
    end = max(e["ts"] + e["dur"] for e in xs)
    assert end == pytest.approx(d["otherData"]["replayed_makespan_s"] * 1e6, rel=1e-6)


def test_gantt_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "g.png"
    timeline.plot_gantt(pred_for("interleaved"), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_per_stage_trace_and_timeline(tmp_path, cli_main):
    trace, png = tmp_path / "t.json", tmp_path / "g.png"
    args = ["transformer", "--layers", "8", "--d-model", "1024", "--heads", "16", "--seq-len", "1024", "--pp", "4",
            "--micro-batch", "1", "--global-batch", "8", "--per-stage", "--trace", str(trace), "--timeline", str(png)]
    r = subprocess.run([sys.executable, "-m", "roofline", *args, "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert len(d["per_stage"]) == 4
    assert d["per_stage"][0]["total"] == pytest.approx(d["step_time_s"])
    assert json.loads(trace.read_text())["traceEvents"] and png.exists()
    r = cli_main(*args)                 # the table: in-process (the real entry point ran above)
    assert r.returncode == 0 and "per pipeline stage" in r.stdout


def test_docs_quote_the_pipeline_replay_benchmark():
    """docs/timeline.md's figures are benchmarks/pipeline_replay.py's output: the closed form stays within a few % of
    the replayed schedule where the textbook count was far off."""
    import importlib.util
    from pathlib import Path
    root = Path(__file__).parents[1]
    spec = importlib.util.spec_from_file_location("pipeline_replay", root / "benchmarks" / "pipeline_replay.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    s = bench.summary()
    assert s["max"] < 5 < s["textbook_mean"]
    text = " ".join((root / "docs" / "timeline.md").read_text().split())
    quoted = (f"{s['mean']:.1f} % on average and {s['max']:.1f} % at most over {s['plans']} plans",
              f"was {s['textbook_mean']:.0f} % off on average and up to {s['textbook_max']:.0f} %")
    for q in quoted:
        assert q in text, q


def _lockstep_pipeline(t_f, t_b, m):
    """Makespan of DeepSpeed's pipeline schedule (deepspeed/runtime/pipe/schedule.py TrainSchedule, 2 (m + p - 1)
    steps) with blocking send/recv pairs: at step t stage s runs the forward of micro-batch (t - s)/2 when t - s is
    even, else the backward of micro-batch (t + s + 1)/2 - p (when that micro-batch exists); before a forward it
    receives the activation from s - 1 and sends the previous step's input gradient to s - 1, before a backward it
    sends the previous step's activation to s + 1 and receives the gradient from s + 1. A send or receive ends when
    both partners have reached it."""
    p = len(t_f)

    def program(s):
        ops, prev = [], -1
        for t in range(2 * (m + p - 1)):
            fwd = (t - s) % 2 == 0
            mb = (t - s) // 2 if fwd else (t + s + 1) // 2 - p
            ok, prev_ok = 0 <= mb < m, 0 <= prev < m
            if fwd:
                ops += [("recv_act", mb)] * (ok and s > 0) + [("send_grad", prev)] * (prev_ok and s > 0)
            else:
                ops += [("send_act", prev)] * (prev_ok and s < p - 1) + [("recv_grad", mb)] * (ok and s < p - 1)
            ops += [("F" if fwd else "B", mb)] * ok
            prev = mb
        return ops
    partner = {"send_act": (1, "recv_act"), "recv_act": (-1, "send_act"), "send_grad": (-1, "recv_grad"),
               "recv_grad": (1, "send_grad")}
    progs, pc, clock = [program(s) for s in range(p)], [0] * p, [0.0] * p
    moved = True
    while moved:
        moved = False
        for s in range(p):
            while pc[s] < len(progs[s]):
                op, mb = progs[s][pc[s]]
                if op in ("F", "B"):
                    clock[s] += t_f[s] if op == "F" else t_b[s]
                    pc[s] += 1
                    moved = True
                    continue
                d, other = partner[op]
                o = s + d
                if pc[o] < len(progs[o]) and progs[o][pc[o]] == (other, mb):
                    clock[s] = clock[o] = max(clock[s], clock[o])
                    pc[s], pc[o], moved = pc[s] + 1, pc[o] + 1, True
                    continue
                break
    assert pc == [len(x) for x in progs]
    return max(clock)


@given(p=st.integers(2, 8), m=st.integers(1, 16), head=st.floats(0.0, 2.0), emb=st.floats(0.0, 0.3))
@settings(max_examples=60, deadline=None)
def test_deepspeed_schedule_runs_at_the_alpa_critical_path(p, m, head, emb):
    """The closed form's pipeline time, sum of the stages + (m - 1) x the slowest (formulas/pipeline.py), is what
    DeepSpeed's step-by-step schedule with blocking exchanges takes when the last stage carries an LM head and the
    first a lighter embedding (forward 1 + e, backward 2 + 2e per stage part). (With the first stage the slowest, the
    replay is shorter: its forwards fill the pipeline alone; the model's head is the heavier edge.)"""
    assume(head >= emb)
    t_f = [1.0 + emb] + [1.0] * (p - 2) + [1.0 + head]
    t_b = [2.0 + 2 * emb] + [2.0] * (p - 2) + [2.0 + 2 * head]
    stage = [f + b for f, b in zip(t_f, t_b)]
    assert _lockstep_pipeline(t_f, t_b, m) == pytest.approx(sum(stage) + (m - 1) * max(stage), rel=1e-9)
