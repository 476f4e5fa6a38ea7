"""The model's intermediate outputs (issue 21 item 2): per-layer, edge and parameter terms that the views read.

The views (timeline, run-cost, validate's Korthikanti Table 4) read these instead of evaluating the model
at other inputs and subtracting; these tests check that the terms put the totals back together, that the
views built from them add up to the step time, and parameter counts by hand.
"""
from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from roofline.spec import hardware, models
from roofline.views import runcost, timeline
from roofline.spec.config import Model, Plan
from roofline.base.errors import InputError
from roofline.model.predict import evaluate, inputs, predict

A100 = hardware.load("a100-sxm4-80gb")
TERMS = ("fwd", "bwd", "recompute", "tp_comm", "cp_comm", "ep_comm", "host")


@st.composite
def specs(draw):
    """A small dense or MoE model and a plan on the A100, with host issue times drawn so that small layers
    can be host-bound (the host terms then matter)."""
    moe = draw(st.booleans())
    pp = draw(st.sampled_from([1, 2, 3, 4]))
    v = draw(st.sampled_from([1, 2])) if pp > 1 else 1
    layers = pp * v * draw(st.integers(1, 3)) + (draw(st.integers(0, pp - 1)) if v == 1 else 0)
    tp = draw(st.sampled_from([1, 2]))
    cp = draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([1, 2, 4]))
    model = Model(n_layers=layers, d_model=draw(st.sampled_from([128, 512, 1024])), n_heads=8,
                  vocab=draw(st.sampled_from([1000, 50257])), seq_len=512, mlp=draw(st.sampled_from(["gelu", "swiglu"])),
                  n_experts=4 if moe else 1, top_k=2 if moe else 1,
                  first_dense_layers=draw(st.integers(0, layers - 1)) if moe else None)
    plan = Plan(tp=tp, pp=pp, dp=dp, cp=cp, ep=2 if moe and dp * cp >= 2 else 1, micro_batch=1,
                global_batch=dp * pp * draw(st.integers(1, 3)), interleave=v,
                schedule="interleaved" if v > 1 else draw(st.sampled_from(["1f1b", "gpipe"])),
                sequence_parallel=tp > 1 and (moe or draw(st.booleans())),
                recompute=draw(st.sampled_from(["none", "selective", "full"])), uneven_stages=layers % pp > 0,
                sharding=draw(st.sampled_from(["none", "distributed", "zero3"])))
    host = draw(st.sampled_from([0.0, 1e-4, 1e-3]))
    hw = replace(A100, host_fwd=host, host_bwd=2 * host, host_rc=host, host_emb=host / 4, host_head=host / 2,
                 host_mb=host / 3)
    return model, plan, hw


def _pred(model, plan, hw):
    try:
        return predict(model, plan, hw)
    except InputError:
        assume(False)


@settings(max_examples=40, deadline=None)
@given(specs())
def test_layer_and_edge_terms_put_the_breakdown_back_together(spec):
    r = _pred(*spec).raw
    model, plan = spec[0], spec[1]
    m, n, n_d = r["micro_batches"], r["stage_layers"], r["stage_dense_layers"]

    def layers(term):
        return n_d * r[f"t_dense_layer_{term}"] + (n - n_d) * r[f"t_layer_{term}"]
    head, single = r["head_stage_heavier"], plan.pp == 1
    assert head in (0.0, 1.0)
    assert (head == 1.0) == (r["t_head_fwd"] + r["t_head_bwd"] >= r["t_embed_fwd"] + r["t_embed_bwd"])
    edge = {d: (r[f"t_head_{d}"] if head or single else 0.0) + (r[f"t_embed_{d}"] if not head or single else 0.0)
            for d in ("fwd", "bwd")}
    rel = dict(rel=1e-9, abs=1e-15)
    assert r["t_forward"] == pytest.approx(m * (layers("fwd") + edge["fwd"]), **rel)
    assert r["t_backward"] == pytest.approx(m * (layers("bwd") + edge["bwd"]), **rel)
    for name in ("recompute", "tp_comm", "cp_comm", "ep_comm"):
        assert r[f"t_{name}"] == pytest.approx(m * layers(name), **rel)
    host = r["t_edge_host"] + r["t_microbatch_host"]
    assert r["t_host_overhead"] == pytest.approx(m * (layers("host") + host), **rel)
    t_mb = sum(layers(t) for t in TERMS) + edge["fwd"] + edge["bwd"] + host
    assert r["t_microbatch_stage"] == pytest.approx(t_mb, **rel)
    # the step: m micro-batch slots of the heaviest stage, the fill and drain through the other stages (the layers the
    # heaviest does not hold, 1/v of a rank per slot, each rank's per-micro-batch host work, the lighter edge once:
    # Alpa eq. 2), exposed PP / DP, optimizer
    if single:
        bubble = 0.0
    else:
        light = sum(r[f"t_embed_{d}"] if head else r[f"t_head_{d}"] for d in ("fwd", "bwd"))
        slot = {k: sum(r[f"{k}_{t}"] for t in TERMS) for k in ("t_layer", "t_dense_layer")}
        # the layers the heaviest stage does not hold: its MoE count is an upper bound where the dense layers' stage
        # is another, so the others' MoE layers are what is left of the model's, never fewer than 0
        rest = model.n_layers - n
        moe = min(rest, max(0, model.n_layers - model.dense_layers - (n - n_d)))
        others = (rest - moe) * slot["t_dense_layer"] + moe * slot["t_layer"]
        bubble = (others + (plan.pp - 1) * r["t_microbatch_host"]) / plan.interleave + light
    assert r["t_pp_bubble"] == pytest.approx(bubble, **rel)
    assert r["step_time"] == pytest.approx(m * t_mb + bubble + r["t_pp_comm"] + r["t_dp_comm"] + r["t_optimizer"],
                                           **rel)
    transfers = 2 * (m * plan.interleave + plan.pp - 1) if plan.pp > 1 else 0
    # plus the tied-embedding gradient all-reduce between first and last stage (0 untied or at pp = 1)
    assert r["t_pp_comm"] == pytest.approx(transfers * r["t_pp_send_recv"] + r["t_embedding_grad_reduce"], **rel)
    if plan.pp == 1 or not (model.tied_embeddings or model.mtp_layers):
        assert r["t_embedding_grad_reduce"] == 0
    # the backward part of a layer's exposed communication is part of it
    for kind in ("t_layer", "t_dense_layer"):
        comm = r[f"{kind}_tp_comm"] + r[f"{kind}_cp_comm"] + r[f"{kind}_ep_comm"]
        assert 0 <= r[f"{kind}_comm_bwd"] <= comm * (1 + 1e-12)
    assert r["t_dense_layer_ep_comm"] == 0.0


@settings(max_examples=40, deadline=None)
@given(specs())
def test_timeline_stage_totals_equal_the_step_time(spec):
    pred = _pred(*spec)
    model, plan = spec[0], spec[1]
    rows = timeline.per_stage(pred)
    step = pred.raw["step_time"]
    assert len(rows) == plan.pp and sum(r["layers"] for r in rows) == model.n_layers
    assert max(r["layers"] for r in rows) == pred.raw["stage_layers"]
    for r in rows:
        assert r["total"] == pytest.approx(step, rel=1e-12)
        assert r["wait"] >= 0 and r["layers"] >= 0
    # no stage is heavier than the model's heaviest one: its busy time + bubble is the step time
    busy = [r["compute"] + r["communication"] + r["host"] + r["optimizer"] for r in rows]
    assert max(busy) + rows[0]["bubble"] <= step * (1 + 1e-9)
    if model.dense_layers == 0:                    # dense: the heaviest stage is the model's, term by term
        slowest = rows[busy.index(max(busy))]
        for k in ("forward", "backward", "recompute", "tp_comm", "cp_comm", "ep_comm"):
            assert slowest[k] == pytest.approx(pred.raw[f"t_{k}"], rel=1e-9, abs=1e-15)
        assert slowest["host"] == pytest.approx(pred.raw["t_host_overhead"], rel=1e-9, abs=1e-15)
        assert slowest["wait"] == pytest.approx(0, abs=1e-9 * step)


@given(layers=st.integers(1, 200), pp=st.integers(1, 16), v=st.integers(1, 4), dense=st.integers(0, 200),
       head=st.booleans())
def test_stage_layers_split_sums_to_the_model(layers, pp, v, dense, head):
    heaviest = -(-layers // (pp * v)) * v                  # pipeline.stage_layers: ceil(l / (p v)) v
    assume(heaviest <= layers and v <= max(1, layers // pp))
    heavy_stage = pp - 1 if head else 0
    split = timeline.stage_layers(layers, pp, heaviest, heavy_stage)
    assert sum(split) == layers and min(split) >= 0
    assert split[heavy_stage] == max(split) == (heaviest if pp > 1 else layers)
    d = timeline.dense_per_stage(split, v, min(dense, layers))
    assert sum(d) == min(dense, layers) and all(0 <= a <= n for a, n in zip(d, split))


def test_stage_layers_by_hand():
    # Llama 3 405B: 126 layers on 16 stages -> 8 on the heaviest (Megatron-Core uneven first/last stages)
    x = inputs(Model(n_layers=126, d_model=1024, n_heads=8), Plan(pp=16, global_batch=16, uneven_stages=True), A100)
    assert evaluate(x)["stage_layers"] == 8
    assert timeline.stage_layers(126, 16, 8, 15) == [7] * 2 + [8] * 14     # 126 = 2 x 7 + 14 x 8
    # layers in order: 3 dense layers over stages of 2 -> 2 on stage 0, 1 on stage 1
    assert timeline.dense_per_stage([2, 2, 2], 1, 3) == [2, 1, 0]
    # interleaved v = 2, 4 layers per stage: virtual stages 0, 1 (chunk 0) then 2, 3 (chunk 1)
    assert timeline.dense_per_stage([4, 4], 2, 3) == [2, 1]


def test_params_embedding_by_hand():
    h, V, s = 1024, 50257, 2048
    tied = Model(n_layers=4, d_model=h, n_heads=8, vocab=V, seq_len=s, position="rope", biases=False)
    r = evaluate(inputs(tied, Plan(), A100))
    assert r["params_embedding"] == V * h + h                    # tied table + the final RMS/LayerNorm scale
    untied = replace(tied, tied_embeddings=False, position="learned", biases=True)
    r = evaluate(inputs(untied, Plan(), A100))
    assert r["params_embedding"] == 2 * V * h + s * h + 2 * h    # two tables, learned positions, norm scale + bias
    assert r["params_expert"] == 0


def test_expert_parameters_of_moe_presets_by_hand():
    # Qwen3-30B-A3B (config.json): 48 layers, 128 experts of moe_intermediate_size 768, h 2048, SwiGLU (3 matrices)
    qwen = models.load("qwen3-30b-a3b")
    r = evaluate(inputs(qwen, Plan(), A100))
    assert r["params_expert"] == 48 * 128 * 3 * 2048 * 768
    assert r["params_embedding"] == 2 * 151936 * 2048 + 2048     # untied embedding and LM head, final norm
    # Mixtral 8x22B: 56 layers, 8 experts of 16384, h 6144, SwiGLU
    r = evaluate(inputs(models.load("mixtral-8x22b"), Plan(), A100))
    assert r["params_expert"] == 56 * 8 * 3 * 6144 * 16384
    # run-cost reports the same numbers, from one evaluation
    pr = runcost._params(qwen, Plan(), A100)
    assert pr["expert"] == 48 * 128 * 3 * 2048 * 768 and pr["total"] == pytest.approx(30.5e9, rel=0.01)


@settings(max_examples=10, deadline=None)
@given(pp=st.sampled_from([1, 2, 4]), per_stage=st.integers(1, 3), rc=st.sampled_from(["none", "selective", "full"]),
       tp=st.sampled_from([1, 2, 4]))
def test_per_layer_terms_equal_the_cost_of_one_more_layer(pp, per_stage, rc, tp):
    """Independent check of the exported terms: adding p layers (one per stage) to a dense model adds exactly the
    per-layer terms to the heaviest stage (the differencing the views used to do, here only as a cross-check)."""
    model = Model(n_layers=pp * per_stage, d_model=1024, n_heads=16, vocab=32000, seq_len=1024)
    plan = Plan(tp=tp, pp=pp, dp=2, micro_batch=1, global_batch=2 * pp, recompute=rc, sequence_parallel=tp > 1)
    a = evaluate(inputs(model, plan, A100))
    b = evaluate(inputs(replace(model, n_layers=model.n_layers + pp), plan, A100))
    m = a["micro_batches"]
    for t in ("forward", "backward", "recompute", "tp_comm"):
        key = {"forward": "fwd", "backward": "bwd"}.get(t, t)
        assert (b[f"t_{t}"] - a[f"t_{t}"]) / m == pytest.approx(a[f"t_layer_{key}"], rel=1e-6, abs=1e-15)


def test_korthikanti_table4_reads_one_layer():
    from roofline.views.validate import korthikanti_table4
    rows = {r["config"]: r for r in korthikanti_table4()}
    base, full = rows["baseline"], rows["full recompute"]
    assert base["recompute_ms"] == 0 and full["recompute_ms"] > 0
    # full recomputation repeats the forward: its recompute is the layer forward (without its TP comm); the forward's
    # exposed TP comm is the model's exported per-layer terms' t_layer_tp_comm - t_layer_comm_bwd (the Megatron
    # backward of megatron-lm@2022, tp_async_dgrad, hides part of the backward's: no longer a third of the layer's)
    from roofline.spec.resolve import resolve
    model = Model(n_layers=1, d_model=6144, n_heads=64, vocab=51200, seq_len=2048)
    plan = {"tp": 8, "micro_batch": 4, "global_batch": 4, "sequence_parallel": False, "recompute": "full"}
    hw = hardware.load("a100-sxm4-80gb")
    terms = {}
    for async_dgrad in (True, False):
        s = resolve(model, {**plan, "tp_async_dgrad": async_dgrad}, hw, "megatron-lm@2022")
        terms[async_dgrad] = {k: float(v) for k, v in evaluate(inputs(s.model, s.plan, s.hardware)).items()}
    r = terms[True]
    tp_fwd = r["t_layer_tp_comm"] - r["t_layer_comm_bwd"]
    assert full["recompute_ms"] == pytest.approx(1e3 * r["t_layer_fwd"], rel=1e-9)
    assert full["predicted_fwd_ms"] == pytest.approx(1e3 * (r["t_layer_fwd"] + tp_fwd), rel=1e-9)
    assert full["tp_comm_ms"] == pytest.approx(1e3 * r["t_layer_tp_comm"], rel=1e-9)
    # the async backward hides some of its all-reduce behind the wgrad GEMM: the forward's part exceeds a third
    assert 0 < r["t_layer_tp_comm"] / 3 < tp_fwd
    # without it, forward, backward and recomputed forward each run the same all-reduces, nothing hidden (ov_tp = 0)
    off = terms[False]
    assert off["t_layer_tp_comm"] - off["t_layer_comm_bwd"] == pytest.approx(off["t_layer_tp_comm"] / 3, rel=1e-9)
    assert off["t_layer_tp_comm"] - off["t_layer_comm_bwd"] == pytest.approx(tp_fwd, rel=1e-9)
    for r in rows.values():
        assert r["predicted_total_ms"] == pytest.approx(r["predicted_fwd_ms"] + r["predicted_bwd_ms"])
