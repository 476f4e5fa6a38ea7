"""DualPipe, DeepSeek's bidirectional pipeline schedule (deepseek-ai/DualPipe dualpipe/dualpipe.py; DeepSeek-V3 report
sec 3.2.1): its bubble, parameters and activations against the README's table, the gradient sum of a stage's two
copies, and the rules of who can run it."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline import InputError, predict
from roofline.face.cli import main
from roofline.spec import hardware, models
from roofline.spec.config import Model, Plan
from roofline.spec.resolve import resolve
from roofline.views.validate import schedule_from_text

DENSE = Model(name="dense", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, ffn_hidden=14336, mlp="swiglu", norm="rmsnorm",
              vocab=128256, seq_len=4096, tied_embeddings=False, position="rope", biases=False)
H100 = hardware.load("h100-sxm")


def _plan(**kw) -> Plan:
    base = dict(tp=1, pp=4, dp=2, micro_batch=1, global_batch=64, interleave=1, schedule="dualpipe",
                recompute="none", sharding="distributed")
    return Plan(**{**base, **kw})


def _raw(plan: Plan, model: Model = DENSE, hw=H100) -> dict:
    return predict(model, plan, hw).raw


def test_bubble_is_the_readme_formula():
    """Bubble (PP/2 - 1)(F&B + B - 3W) for PP = p stages (deepseek-ai/DualPipe README), F&B = F + B: per rank
    (p/2 - 1)(t + B - 3W), t the rank's micro-batch slot, B its backward, W its weight-gradient GEMMs (no recomputation,
    tp = cp = ep = 1: B is the backward compute alone)."""
    for p in (4, 8):
        r = _raw(_plan(pp=p, global_batch=64 * p // 4))
        m = r["micro_batches"]
        t, w, b = r["t_microbatch_stage"], r["t_stage_wgrad"], r["t_backward"] / m
        assert 0 < w < b / 2 + 1e-15
        assert r["t_pp_bubble"] == pytest.approx((p / 2 - 1) * (t + b - 3 * w), rel=1e-12)
        assert r["pp_bubble_share"] == pytest.approx(r["t_pp_bubble"] / (m * t + r["t_pp_bubble"]), rel=1e-12)
    assert _raw(_plan(pp=2))["t_pp_bubble"] == 0          # the table's (PP/2 - 1) = 0 at two ranks


def test_twice_the_parameters_same_layers_per_micro_batch():
    """Rank 0 holds its stage and the mirror stage p - 1 (two copies of l/p layers), the embedding and the LM head;
    per micro-batch it runs l/p layers and half of each edge (each micro-batch enters at one end). Against DualPipeV
    on the same ranks (two chunks of l/(2p) layers, both edges on every micro-batch): the same layers per
    micro-batch, one more stage of layers' parameters."""
    dual, v = _raw(_plan()), _raw(_plan(schedule="dualpipev", interleave=2))
    layer = (dual["params_rank"] - v["params_rank"]) / (DENSE.n_layers // 4)
    assert layer > 0
    # the layer's parameters: attention (q, o: h x h; k, v: h x 1024) + SwiGLU MLP (3 h f) + 2 norms
    h, f = DENSE.d_model, DENSE.ffn_hidden
    assert layer == pytest.approx(2 * h * h + 2 * h * 1024 + 3 * h * f + 2 * h, rel=1e-9)
    edges = v["t_embed_fwd"] + v["t_head_fwd"]
    assert dual["t_forward"] / dual["micro_batches"] == pytest.approx(
        v["t_forward"] / v["micro_batches"] - edges / 2, rel=1e-9)
    # weights, gradients and optimizer state scale with the parameters; the sharded state over the same d ranks
    assert dual["mem_weights"] / v["mem_weights"] == pytest.approx(dual["params_rank"] / v["params_rank"], rel=1e-9)


def test_activations_p_plus_one_stages():
    """"Activation Per Device PP+1" for PP = p stages of l/p layers (README): p + 1 micro-batches of the rank's layers
    in flight, against DualPipeV's (2p + 1)/2 (2p + 1 stages of l/(2p)); the LM head's logits are each's own."""
    p = 4
    dual, v = _raw(_plan()), _raw(_plan(schedule="dualpipev", interleave=2))
    ratio = (dual["mem_activations"] - dual["mem_logits"]) / (v["mem_activations"] - v["mem_logits"])
    assert ratio == pytest.approx((p + 1) / ((2 * p + 1) / 2), rel=0.02)


def test_mirror_gradient_sum():
    """The two copies of a stage sum their gradients (examples/example_dualpipe.py): with dp 1 the data-parallel
    traffic is that pair's all-reduce alone, of the rank's gradients (fp32 here), across nodes when the pipeline
    spans them; the other schedules have none at dp 1."""
    one = _raw(_plan(dp=1, global_batch=32))
    assert _raw(_plan(dp=1, global_batch=32, schedule="1f1b"))["dp_comm_total"] == 0
    grads = one["params_rank"] * 4
    bw = H100.intra.bandwidth                                   # pp 4 x dp 1 fits one 8-GPU node: NVLink (B/s)
    assert one["dp_comm_total"] >= grads / bw                   # the ring factor of 2 ranks is 1
    assert one["dp_comm_total"] < 3 * grads / bw


@st.composite
def plans(draw):
    pp = draw(st.sampled_from([2, 4, 8]))
    m = 2 * draw(st.sampled_from([1, 2, 3])) * pp
    return dict(tp=draw(st.sampled_from([1, 2, 4])), pp=pp, dp=1, micro_batch=draw(st.sampled_from([1, 2])),
                recompute=draw(st.sampled_from(["none", "full", "selective"])), mbs=m)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_bubble_between_zero_and_1f1b(kw):
    """0 <= (p/2 - 1)(t + B - 3W) <= (p - 1) t for every plan (B <= t, 0 <= W <= B/2): never above 1F1B's bubble on
    the same ranks, and the step is at least its m slots."""
    m = kw.pop("mbs")
    plan = _plan(**kw, global_batch=m * kw["micro_batch"])
    r = _raw(plan)
    assert 0 <= r["t_pp_bubble"] <= (plan.pp - 1) * r["t_microbatch_stage"] * (1 + 1e-12)
    assert r["step_time"] >= r["micro_batches"] * r["t_microbatch_stage"]


def test_rules_and_stacks():
    """DualPipe.step asserts an even rank count and an even number of micro-batches, at least 2 x ranks; one stage per
    direction (interleave 1). No registry stack runs it: one line naming the stack."""
    with pytest.raises(InputError, match="dualpipe holds stages i and pp-1-i on rank i: it needs an even pp and "
                                         "interleave 1, got pp 3 and interleave 1"):
        predict(dataclasses.replace(DENSE, n_layers=30), _plan(pp=3, global_batch=48), H100)
    with pytest.raises(InputError, match=r"even number of micro-batches per step, at least 2 x pp \(6, pp 4"):
        predict(DENSE, _plan(global_batch=6, dp=1), H100)
    with pytest.raises(InputError, match=r"\(7, pp 4"):
        predict(DENSE, _plan(global_batch=14, dp=2), H100)
    for fw in ("megatron-core", "torchtitan"):
        with pytest.raises(InputError, match=f"stack {fw} cannot run the dualpipe pipeline schedule"):
            resolve(DENSE, _plan(), H100, fw)


def test_rows_name_it(tmp_path):
    """A validation row's text naming DualPipe (not DualPipeV) is recognised; on a stack that runs no DualPipe (the
    era rule's Megatron-Core here) it is priced as the 1F1B family on the recipe's layout, with a note."""
    assert [schedule_from_text(t) for t in ("pp 16 (dualpipe), ep 64", "dual-pipe", "dualpipev", "dualpipe-v")] == [
        "dualpipe", "dualpipe", "dualpipev", "dualpipev"]
    from roofline.views import validate as V
    cols = dict(case_id="dp_row", source="a test", model="dense", n_layers=32, d_model=4096, n_heads=32,
                vocab=128256, seq_len=4096, global_batch=64, micro_batch=1, tp=1, pp=4, dp=2, gpu_id="h100-sxm",
                n_gpus=8, gpus_per_node=8, measured_iter_time_s=10.0, notes="PP 4 with DualPipe", tier="B")
    path = tmp_path / "rows.csv"
    path.write_text(",".join(cols) + "\n" + ",".join(str(v) for v in cols.values()) + "\n")
    case = V.build_case(V.read(str(path))[0])
    assert case.plan.schedule in ("1f1b", "interleaved")          # the stack's default for an unstated v
    assert "the text's DualPipe priced as 1F1B" in case.note


def test_search_any_and_cli(capsys):
    """`search --framework any --schedule dualpipe` lists DualPipe plans only (even pp, interleave 1); the command
    line refuses it under a registry stack, and the timeline refuses to draw it, one line each, exit 2."""
    args = ["--model", "llama3-8b", "--gpu", "h100-sxm"]
    assert main(["search", *args, "--framework", "any", "--schedule", "dualpipe", "--gpus", "32",
                 "--global-batch", "256", "--top", "5"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.split()[:1] and ln.split()[0].isdigit() and "tp=" in ln]
    assert len(rows) == 5
    for ln in rows:
        pp = int(ln.split("pp=")[1].split()[0])
        assert "dualpipe" in ln and "v=" not in ln and pp % 2 == 0
    rc = main(["transformer", *args, "--pp", "4", "--dp", "2", "--global-batch", "64", "--schedule", "dualpipe"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "cannot run the dualpipe pipeline schedule" in err[0]


def test_timeline_refuses():
    from roofline.views.timeline import replayable
    with pytest.raises(InputError, match="DualPipe's two directions"):
        replayable(_plan())


def test_deepseek_v3_mirror_stage():
    """DeepSeek-V3 (61 layers, the first 3 dense, MTP 1) on 16 ranks under DualPipe's balanced split (layout
    dualpipe_balanced: 4 layers on each middle stage, 3 and 2 on the edges): rank 0's own stage holds the embedding
    and the 3 dense layers, where 1F1B's derived split holds ceil(61/16) = 4 (3 dense + 1 MoE); the mirror stage
    p - 1 adds 2 MoE layers (each 256/ep experts of 3 x 7168 x 2048 on the rank, plus attention, router and shared
    expert), the LM head and the MTP layer (report sec 3.2.1: "two copies of the model parameters")."""
    m = models.load("deepseek-v3")
    base = dict(tp=1, pp=16, dp=8, ep=8, micro_batch=1, global_batch=256, recompute="selective",
                sharding="distributed", uneven_stages=True)
    one = predict(m, Plan(**base), H100).raw
    dual = predict(m, Plan(**base, schedule="dualpipe"), H100).raw
    expert_layer = (256 // 8) * 3 * 7168 * 2048
    head = 129280 * 7168
    # + 2 MoE layers of the mirror stage - 1 MoE layer 1F1B's stage 0 holds = 1 MoE layer's experts and the rest
    rest = dual["params_rank"] - one["params_rank"] - expert_layer - head
    # 1 layer's attention (MLA ~0.19 B), shared expert (44 M) and router, and the MTP layer (its experts alone 1.4 B)
    assert 0.2e9 + 1.4e9 < rest < 0.3e9 + 2.5e9
    assert dual["t_pp_bubble"] < one["t_pp_bubble"]


def test_a_layout_pairs_the_mirror_stages():
    """Under DualPipe a layout's stages pair up on the ranks, i with pp-1-i: the edge rank holds the first and the
    last stage; the busiest other rank is the pair with the most layers, given per stage (its mean)."""
    from roofline.spec.layout import stage_counts

    c = stage_counts("Ett|ttt|tt|tL", 4, layers=8, schedule="dualpipe")
    assert (c["layout_first"], c["layout_last"], c["layout_mid"]) == (2, 1, 2.5)
    one = stage_counts("Ett|ttt|tt|tL", 4, layers=8)                 # 1F1B: the busiest other rank, whole
    assert one["layout_mid"] == 3


@given(layers=st.integers(4, 130), half=st.integers(1, 16), mtp=st.integers(0, 2))
@settings(max_examples=150, deadline=None)
def test_balanced_split_holds_every_layer_and_spares_the_edges(layers, half, mtp):
    """dualpipe_balanced: every decoder layer and MTP layer once, the middle stages even, and the edge rank (both edge
    stages, which also carry the embedding, the LM head and the MTP layers) never more layers than a middle rank
    once there are at least as many layers as stages."""
    from roofline.spec.layout import dualpipe_balanced, ranks, stage_counts

    pp = 2 * half
    text = dualpipe_balanced(layers, pp, mtp)
    rs = ranks(text, pp, 1, layers, mtp)                               # Megatron-Core's validity rules hold
    assert sum(r.layers for r in rs) == layers and len({r.layers for r in rs[1:-1]}) <= 1
    c = stage_counts(text, pp, 1, 0, layers, mtp, "dualpipe")
    if pp > 2 and -(-layers // pp) * (pp - 2) <= layers:
        assert c["layout_first"] + c["layout_last"] <= 2 * c["layout_mid"]


def test_deepseek_v3_dualpipe_fits_and_a_middle_rank_is_the_busiest():
    """DeepSeek-V3's own run (report sec 3.2: PP 16 DualPipe, EP 64, ZeRO-1, BF16 moments, FP8) on 80 GB H800s: on
    the balanced split the rank with the most memory is a middle one (two stages of 4 MoE layers), not rank 0 (the
    edges' 3 + 2 layers with the embedding, the LM head and the MTP layer), and the plan fits."""
    m = models.load("deepseek-v3")
    p = Plan(tp=1, pp=16, dp=128, ep=64, micro_batch=1, global_batch=15360, schedule="dualpipe", dtype="fp8-block",
             moment_dtype="bf16", sharding="zero1", recompute="selective", recompute_modules="layernorm,mla_up_proj",
             uneven_stages=True)
    raw = predict(m, p, hardware.load("h800")).raw
    assert raw["mem_last_stage"] > raw["mem_first_stage"]
    assert raw["memory"] < 80 * 2 ** 30
    stated = predict(m, dataclasses.replace(p, pipeline_layout="Ettt|(tttt|)*14ttmL"), hardware.load("h800")).raw
    assert stated["step_time"] == pytest.approx(raw["step_time"]) and stated["memory"] == pytest.approx(raw["memory"])


def test_search_prices_dualpipe_on_the_balanced_split_as_predict_does():
    """The search's arrays and predict give one step time for a DualPipe plan of a model whose layers pp does not
    divide (the balanced split, not the even one)."""
    from roofline.views.search import search

    m = dataclasses.replace(DENSE, n_layers=30)
    best = search(m, H100, 32, 256, top=3, framework="any", schedule="dualpipe", base=Plan(uneven_stages=True))
    assert best
    for r in best:
        assert r.plan.schedule == "dualpipe"
        one = predict(m, r.plan, H100).raw
        assert one["step_time"] == pytest.approx(r.step_time_s, rel=1e-9) and one["memory"] == pytest.approx(r.memory_bytes)


def test_the_plan_line_names_the_split_it_is_priced_on(capsys):
    """The command's plan line shows DualPipe's balanced split (stage layers) and the FP8 dispatch the stack runs."""
    rc = main(["transformer", "--model", "deepseek-v3", "--gpu", "h800", "--gpus", "2048", "--tp", "1", "--pp", "16",
               "--ep", "64", "--global-batch", "15360", "--framework", "hai-llm"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("plan:"))
    assert rc == 0 and "dualpipe (balanced split: 3 | 4 x 14 | 2 layers)" in line and "(FP8 dispatch)" in line
