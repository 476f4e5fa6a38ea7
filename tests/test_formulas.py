"""Closed forms against published numbers, dimensional analysis, symbolic vs numeric agreement."""
import dataclasses

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from roofline.spec import hardware, models
from roofline.spec.config import Model, Plan
from roofline.model.formulas import step
from roofline.model.formulas.symbols import SYMBOLS
from roofline.model.predict import evaluate, inputs, predict

A100 = hardware.load("a100-sxm4-80gb")


def narayanan_gpt(l, h, a, V=51200, s=2048):
    """A GPT configured with Narayanan et al. 2021's assumptions: 4h MLP, non-causal attention
    counted in full, unfused attention, tied embeddings."""
    return Model(n_layers=l, d_model=h, n_heads=a, vocab=V, seq_len=s, mlp="gelu", attention="unfused",
                 causal=False, dropout=True)


@pytest.mark.parametrize("preset,expected,tol", [("gpt3-175b", 174.6e9, 0.005), ("llama2-7b", 6.74e9, 0.005),
                                                  ("llama3-70b", 70.6e9, 0.005), ("llama3.1-405b", 405.8e9, 0.01)])
def test_parameter_counts(preset, expected, tol):
    p = predict(models.load(preset), Plan(), A100)
    assert abs(p.params / expected - 1) < tol


@pytest.mark.parametrize("l,h,a,B", [(96, 12288, 96, 1536), (24, 2304, 24, 512), (128, 25600, 160, 3072)])
def test_flops_match_narayanan_eq3(l, h, a, B):
    s, V = 2048, 51200
    m = narayanan_gpt(l, h, a, V, s)
    full = predict(m, Plan(tp=8, pp=1, dp=B, global_batch=B, recompute="full"), A100)
    eq3 = 96 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))      # Narayanan et al. 2021 eq. 3
    assert full.hardware_flops_per_step.magnitude == pytest.approx(eq3, rel=1e-9)
    eq72 = 72 * B * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))    # model FLOPs, no recompute
    assert full.flops_per_step.magnitude == pytest.approx(eq72, rel=1e-9)
    none = predict(m, Plan(tp=8, pp=1, dp=B, global_batch=B), A100)
    assert none.hardware_flops_per_step.magnitude == pytest.approx(eq72, rel=1e-9)


def test_causal_flash_halves_attention_flops():
    base = dict(n_layers=4, d_model=1024, n_heads=16, vocab=1000, seq_len=4096)
    full = predict(Model(**base, causal=False), Plan(), A100).flops_per_step.magnitude
    half = predict(Model(**base, causal=True), Plan(), A100).flops_per_step.magnitude
    attn_full = 3 * 4 * 4 * 4096**2 * 1024      # 3 passes x layers x 4bs^2h
    assert full - half == pytest.approx(attn_full / 2, rel=1e-9)


def _edges(r):
    """(heavier, lighter) of the embedding's and the LM head's GPU time per micro-batch."""
    emb, head = r["t_embed_fwd"] + r["t_embed_bwd"], r["t_head_fwd"] + r["t_head_bwd"]
    return max(emb, head), min(emb, head)


@pytest.mark.parametrize("p,m,v", [(8, 32, 1), (4, 16, 2), (16, 64, 4), (2, 8, 3)])
def test_bubble_fractions(p, m, v):
    model = Model(n_layers=192, d_model=512, n_heads=8, vocab=1000, seq_len=256)
    plan = Plan(pp=p, dp=1, micro_batch=1, global_batch=m, interleave=v, schedule="interleaved" if v > 1 else "1f1b")
    pred = predict(model, plan, A100)
    r = pred.raw
    assert r["pp_bubble_ratio"] == pytest.approx((p - 1) / (v * m))      # Narayanan et al. 2021 sec 2.2
    assert r["pp_bubble"] == pytest.approx((p - 1) / (v * m + p - 1))
    # the fill and drain are (p-1)/v slots of the stages without the heavier edge (LM head or embedding), plus the
    # lighter edge once (Alpa eq. 2)
    heavy, light = _edges(r)
    t_other = r["t_microbatch_stage"] - heavy - r["t_edge_host"]
    assert r["t_pp_bubble"] == pytest.approx((p - 1) / v * t_other + light)
    # ... and the bubble's share is of the whole pipeline time m t_mb + bubble
    assert pred.bubble_fraction == pytest.approx(r["t_pp_bubble"] / (m * r["t_microbatch_stage"] + r["t_pp_bubble"]))


@given(p=st.integers(2, 8), m=st.integers(1, 24), vocab=st.sampled_from([1000, 50257, 256000]))
@settings(max_examples=25, deadline=None)
def test_pipeline_with_one_heavy_stage_is_alpa_critical_path(p, m, vocab):
    """1F1B with the LM head on the last stage only: the pipeline time is the sum of every stage's time plus m - 1 times
    the slowest's (Zheng et al. 2022, Alpa, eq. 2), not (m + p - 1) times the slowest; never more than the textbook
    count, equal to it when the head costs nothing more than the embedding."""
    model = Model(n_layers=4 * p, d_model=1024, n_heads=16, vocab=vocab, seq_len=512)
    r = predict(model, Plan(pp=p, dp=1, micro_batch=1, global_batch=m), A100).raw
    t_mb = r["t_microbatch_stage"]
    heavy, light = _edges(r)
    t_layers = t_mb - heavy - r["t_edge_host"]
    stages = [t_layers + light] + [t_layers] * (p - 2) + [t_mb]
    assert max(stages) == t_mb
    assert m * t_mb + r["t_pp_bubble"] == pytest.approx(sum(stages) + (m - 1) * max(stages), rel=1e-9)
    assert r["t_pp_bubble"] <= (p - 1) * t_mb * (1 + 1e-12)


def _layer_activation_bytes(tp, sp_on, recompute="none", attention="unfused"):
    s, b, h, a = 2048, 4, 6144, 64
    model = Model(n_layers=1, d_model=h, n_heads=a, vocab=1024, seq_len=s, dropout=True, attention=attention)
    x = inputs(model, Plan(tp=tp, micro_batch=b, sequence_parallel=sp_on, recompute=recompute), A100)
    from roofline.model.formulas import memory as M
    expr = M.layer_activations if recompute != "full" else M.layer_input
    # xreplace: every symbol gets a number at once (subs walks the tree once per symbol: ~0.7 s a call here)
    val = float(expr.xreplace({SYMBOLS[k].symbol: sp.sympify(v) for k, v in x.items() if k in SYMBOLS}))
    return val, s, b, h, a


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_korthikanti_activation_memory(tp):
    got, s, b, h, a = _layer_activation_bytes(tp, False)
    assert got == pytest.approx(s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp)))   # Korthikanti 2022 eq. 2
    got, *_ = _layer_activation_bytes(tp, True)
    assert got == pytest.approx(s * b * h / tp * (34 + 5 * a * s / h))                # TP + SP, eq. 4
    got, *_ = _layer_activation_bytes(tp, True, "selective")
    assert got == pytest.approx(s * b * h / tp * 34)                                    # selective + SP, eq. 6
    got, *_ = _layer_activation_bytes(tp, False, "full")
    assert got == pytest.approx(2 * s * b * h)                                          # full recompute


def test_activation_memory_no_parallelism():
    got, s, b, h, a = _layer_activation_bytes(1, False)
    assert got == pytest.approx(s * b * h * (34 + 5 * a * s / h))


# ---- dimensional analysis -------------------------------------------------------------------
# FLOP counts are products of sizes (a count whose unit, flop, is implicit), so only time and bytes
# can be scaled independently; "flop/time" then scales as 1/time.
_BASE = {"time": 1.7, "bytes": 2.3, "flop": 1.0}


def _scale(dim: str) -> float:
    """Scale factor of a dimension string like 'bytes/time' when time->x1.7, bytes->x2.3, flop->x3.1."""
    if not dim:
        return 1.0
    num, _, den = dim.partition("/")
    f = 1.0
    for part in num.split("*"):
        f *= _BASE.get(part.strip(), 1.0) if part.strip() != "1" else 1.0
    for part in den.split("*") if den else []:
        f /= _BASE[part.strip()]
    return f


def _random_inputs(rng):
    """A valid MoE / GQA model and plan drawn from ``rng``: layouts, schedule, recompute, sharding and overlap
    fractions vary (each quantity's dimension is checked on its own draw)."""
    from roofline.spec.config import RECOMPUTE, SHARDING_BY_STAGE, check
    from roofline.base.errors import InputError
    while True:
        tp, pp, cp, ep, v = (int(rng.choice(c)) for c in ([1, 2, 4], [1, 2], [1, 2], [1, 2, 4], [1, 2]))
        model = Model(n_layers=8, d_model=1024, n_heads=16, n_kv_heads=int(rng.choice([4, 16])), vocab=32000,
                      seq_len=2048, mlp=str(rng.choice(["swiglu", "gelu"])), n_experts=4, top_k=int(rng.choice([1, 2])),
                      capacity_factor=float(rng.choice([1.0, 1.25])))
        plan = Plan(tp=tp, pp=pp, dp=4, cp=cp, ep=ep, micro_batch=int(rng.choice([1, 2])), global_batch=32,
                    interleave=v if pp > 1 else 1, schedule="interleaved" if v > 1 and pp > 1 else "1f1b",
                    sequence_parallel=bool(tp > 1 and rng.random() < 0.7), recompute=str(rng.choice(RECOMPUTE)),
                    sharding=str(rng.choice(SHARDING_BY_STAGE)), overlap_grad_reduce=float(rng.random()),
                    overlap_tp=float(rng.random()))
        try:
            check(model, plan)
            break
        except InputError:
            continue
    x = inputs(model, plan, A100)
    # inputs the compiled model defaults when not given (memory reserve) are scaled with the others
    return {**{k: s.default for k, s in SYMBOLS.items() if s.default is not None}, **x}


@pytest.mark.parametrize("quantity", sorted(step.QUANTITIES))
def test_every_formula_has_its_dimension(quantity):
    x = _random_inputs(np.random.default_rng(sorted(step.QUANTITIES).index(quantity)))   # a draw per quantity
    scaled = {k: v * _scale(SYMBOLS[k].dim) for k, v in x.items()}
    a, b = evaluate(x)[quantity], evaluate(scaled)[quantity]
    dim = step.QUANTITIES[quantity][0]
    assert float(b) == pytest.approx(float(a) * _scale(dim), rel=1e-9), quantity


@pytest.mark.slow          # codegen of the whole model: ~15 s here (formulas/__init__.py: sympy's cache unbounded)
def test_compiled_module_is_in_sync_with_formulas():
    # in a fresh interpreter: sympy's cache shared with the tests before (graphs rebuilt unevaluated by export) would
    # mix equal-but-distinct nodes into build(), and == between them walks trees exponentially larger than the graph
    import subprocess
    import sys
    code = ("import json, sys; from roofline.model import _compiled; from roofline.model.formulas import codegen, dag, step; "
            "e = step.build(); "
            "sys.exit((codegen.source(e) != open(_compiled.__file__).read()) + "
            "2 * (dag.dump(e) != json.loads(dag.PATH.read_text())))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    # 1: _compiled.py stale; 2: the stored graph (what symbolic export loads instead of building) stale; 3: both
    assert r.returncode == 0, f"run: python -m roofline.model.formulas.codegen (code {r.returncode}) {r.stderr[-500:]}"


# ---- symbolic vs numeric ----------------------------------------------------------------------
def _symbolic(names, x):
    """The sympy expressions of ``names`` evaluated at ``x`` in 30-digit arithmetic, each distinct subexpression
    once (formulas.export.substitute): an evaluation path independent of the generated numpy code."""
    from sympy.core.cache import clear_cache

    from roofline.model.formulas.export import substitute
    if step.build.cache_info().currsize == 0:
        clear_cache()           # no equal-but-distinct nodes of earlier tests' unevaluated rebuilds in build()'s graph
    exprs = step.build()
    dflt = {k: v.default for k, v in SYMBOLS.items() if v.default is not None}
    vals = {s.symbol: sp.Float(x.get(k, dflt.get(k, 1.0)), 30) for k, s in SYMBOLS.items()}
    return [substitute(exprs[n], vals) for n in names]


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2, 8]),
       mb=st.sampled_from([1, 2]), layers_per=st.integers(1, 4), rc=st.sampled_from(["none", "selective", "full", "op"]),
       sp_on=st.booleans(), sharding=st.sampled_from(["none", "distributed", "zero3"]), flash=st.booleans())
def test_symbolic_and_numeric_agree(tp, pp, dp, mb, layers_per, rc, sp_on, sharding, flash):
    model = Model(n_layers=pp * layers_per, d_model=512, n_heads=8, vocab=5000, seq_len=512,
                  attention="flash" if flash else "unfused")
    plan = Plan(tp=tp, pp=pp, dp=dp, micro_batch=mb, global_batch=mb * dp * 4, recompute=rc, sequence_parallel=sp_on,
                sharding=sharding)
    x = inputs(model, plan, A100)
    names = ["step_time", "memory", "flops", "t_dp_comm", "t_tp_comm"]
    num = evaluate(x)
    for n, v in zip(names, _symbolic(names, x)):
        assert v.is_number, (n, v)
        assert float(num[n]) == pytest.approx(float(v), rel=1e-9, abs=1e-15), n


# ---- monotonicity -----------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(layers=st.integers(1, 40), extra=st.integers(1, 20), h=st.sampled_from([512, 1024, 4096]),
       tp=st.sampled_from([1, 2, 8]), dp=st.sampled_from([1, 2, 4]))
def test_more_layers_never_faster(layers, extra, h, tp, dp):
    plan = Plan(tp=tp, dp=dp, global_batch=dp * 4)
    t1 = predict(Model(n_layers=layers, d_model=h, n_heads=16, vocab=32000, seq_len=1024), plan, A100).step_time
    t2 = predict(Model(n_layers=layers + extra, d_model=h, n_heads=16, vocab=32000, seq_len=1024), plan, A100).step_time
    assert t2 >= t1


@settings(max_examples=30, deadline=None)
@given(dp=st.sampled_from([1, 2, 4, 8]), k=st.sampled_from([2, 4]), sharding=st.sampled_from(["none", "distributed",
                                                                                             "zero2", "zero3"]),
       tp=st.sampled_from([1, 2, 8]))
def test_more_dp_never_increases_memory_per_gpu(dp, k, sharding, tp):
    m = Model(n_layers=8, d_model=2048, n_heads=16, vocab=32000, seq_len=2048)
    gb = 64 * dp * k
    a = predict(m, Plan(tp=tp, dp=dp, global_batch=gb, sharding=sharding), A100).memory["total"]
    b = predict(m, Plan(tp=tp, dp=dp * k, global_batch=gb, sharding=sharding), A100).memory["total"]
    assert b <= a


def test_breakdown_sums_to_step_time():
    m = models.load("llama3-70b")
    p = predict(m, Plan(tp=8, pp=4, dp=8, cp=2, micro_batch=1, global_batch=256, interleave=5, schedule="interleaved",
                        sequence_parallel=True, recompute="selective", sharding="distributed",
                        overlap_grad_reduce=1.0, overlap_param_gather=1.0), hardware.load("h100-sxm"))
    total = sum(v.magnitude for v in p.breakdown.values())
    assert total == pytest.approx(p.step_time.magnitude, rel=1e-9)
    assert set(p.memory) == {"weights", "gradients", "optimizer", "activations", "total", "reserve", "headroom"}
    assert p.memory["total"].magnitude == pytest.approx(sum(p.memory[k].magnitude for k in
                                                             ("weights", "gradients", "optimizer", "activations")))


def test_plan_that_does_not_fit_is_reported():
    p = predict(models.load("gpt3-175b"), Plan(tp=1, pp=1, dp=8, global_batch=8), A100)
    assert not p.fits_in_memory and p.overflow in {"weights", "gradients", "optimizer", "activations"}
    assert p.to_dict()["memory_overflow"] == p.overflow


def test_units_carry_through():
    p = predict(models.load("gpt3-1.3b"), Plan(dp=8, global_batch=64), A100, tokens=1e9, gpu_hour_price=2.0)
    assert p.step_time.units == p.step_time._REGISTRY.second
    assert p.memory["total"].dimensionality == p.memory_capacity.dimensionality
    assert p.run["run_days"].to("s").magnitude == pytest.approx(p.run["steps"] * p.step_time.magnitude)
    assert p.run["cost"].magnitude == pytest.approx(p.run["gpu_hours"].magnitude * 2.0)


@pytest.mark.slow          # sympy simplification of the dense-model forms: ~100 s here
def test_concepts_doc_is_in_sync():
    from roofline.model.formulas import concepts
    assert concepts.TARGET.read_text() == concepts.text(), "run: python -m roofline.model.formulas.concepts"


def test_sustained_clock_slows_compute_bound_work_only():
    """kappa divides the compute rate: a GEMM-bound forward slows by ~1/kappa, an HBM-bound op not at all."""
    m, plan = models.load("gpt3-175b"), Plan(tp=8, pp=8, dp=1, global_batch=64, micro_batch=1)
    x = inputs(m, plan, hardware.load("h100-sxm"))
    full, half = evaluate({**x, "clock": 1.0}), evaluate({**x, "clock": 0.5})
    ratio = float(half["t_forward"]) / float(full["t_forward"])
    assert 1.6 < ratio <= 2.0 + 1e-9         # GEMMs and attention double; norms and residual adds do not
    # the optimizer step streams memory: unaffected by the clock
    assert float(half["t_optimizer"]) == pytest.approx(float(full["t_optimizer"]))
    assert hardware.load("h100-sxm").sustained_clock < 1 and hardware.load("a100-sxm4-80gb").sustained_clock < 1
    # a calibration of short benchmarks keeps the clock it measured, whatever its datasheet base sustains
    assert hardware.load("a100-perlmutter").sustained_clock == 1 == hardware.load("gh200-vista").sustained_clock
    # the A100 prior: the clock an A100 holds at its 400 W limit under HPL (1305 MHz) over its 1410 MHz boost
    assert hardware.load("a100-sxm4-80gb").sustained_clock == pytest.approx(1305 / 1410, abs=1e-4)


def test_max_matmul_caps_every_gemm_efficiency(tmp_path):
    """A fitted GEMM efficiency above the GPU's measured maximum achievable matmul rate is cut to it."""
    raw = hardware.raw("a100-perlmutter")
    fitted = raw["efficiency"]["gemm"]["bwd"]["eta"]
    h = hardware.load("a100-perlmutter")
    ceiling = 267.9 / 312
    assert fitted > ceiling and h.matmul_ceiling == pytest.approx(ceiling)
    assert h.efficiency["gemm"]["bwd"][0] == pytest.approx(ceiling)
    assert h.efficiency["gemm"]["fwd"][0] == pytest.approx(min(raw["efficiency"]["gemm"]["fwd"]["eta"], ceiling))
    f = tmp_path / "gpu.yaml"
    f.write_text("id: x\nbase: a100-sxm4-80gb\nmax_matmul: 156 TFLOP/s\n")
    assert hardware.load(str(f)).efficiency["gemm"]["fwd"][0] == pytest.approx(0.5)


def test_bmm_class_defaults_cap_and_unfused_pricing(tmp_path):
    """The unfused attention's batched GEMMs are the bmm class: a profile without that class prices them with the
    assumed defaults; the matmul ceiling caps its eta like the GEMMs'; a flash model does not pay for them."""
    f = tmp_path / "gpu.yaml"
    f.write_text("id: x\nname: x\nkind: calibrated\npeak_flops: {bf16: 312 TFLOP/s}\nhbm_bandwidth: 2039 GB/s\n"
                 "hbm_capacity: 80 GiB\ngpus_per_node: 8\nmax_matmul: 156 TFLOP/s\n"
                 "links: {intra: {bandwidth: 300 GB/s}, inter: {bandwidth: 25 GB/s}}\n"
                 "efficiency: {gemm: {fwd: {eta: 0.7, mu: 0.7, t0: 5 us}}}\n")
    h = hardware.load(str(f))
    assert h.efficiency["bmm"]["fwd"] == pytest.approx((0.5, 0.8, 5e-6))        # default eta 0.8 capped at 0.5
    assert h.bmm_shape["bwd"] == (128.0, 0.5) and h.sm_count == 1
    assert hardware.load("a100-sxm4-80gb").efficiency["bmm"] == hardware.load("a100-perlmutter").efficiency["bmm"]
    m = Model(n_layers=2, d_model=2048, n_heads=16, vocab=1000, seq_len=2048, attention="unfused")
    x = inputs(m, Plan(), A100)
    slow = evaluate({**x, "mu_bmm_fwd": x["mu_bmm_fwd"] / 2, "eta_bmm_fwd": x["eta_bmm_fwd"] / 2})
    assert float(slow["t_forward"]) > float(evaluate(x)["t_forward"])
    x = inputs(dataclasses.replace(m, attention="flash"), Plan(), A100)
    assert float(evaluate({**x, "eta_bmm_fwd": 1e-6, "t0_bmm_fwd": 1.0})["t_forward"]) == \
        pytest.approx(float(evaluate(x)["t_forward"]))
