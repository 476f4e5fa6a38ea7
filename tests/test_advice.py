"""advice: warnings read the model's GEMM terms (no re-derived shapes)."""
import pytest

from roofline.views import advice
from roofline.model.predict import predict
from roofline.spec import resolve as spec


def _pred(model, plan, gpu="h100-sxm"):
    s = spec.resolve(model, plan, gpu, "megatron-core")
    return predict(s.model, s.plan, s.hardware)


def test_gemm_intensity_is_flops_over_bytes_of_the_shapes():
    # Llama 3 8B, tp 1, one sequence of 8192: qkv is M 8192, K 4096, N 4096 + 2 x 1024 = 6144 (GQA, 8 kv heads of
    # 128); bf16 operands: 2 MKN / (2 (MK + KN + MN)) FLOP/B
    p = _pred("llama3-8b", {"tp": 1, "dp": 8, "global_batch": 64, "micro_batch": 1})
    got = {n: (ai, d) for n, ai, d in advice.gemms(p)}
    M, K, N = 8192, 4096, 6144
    assert got["qkv_proj"][0] == pytest.approx(2 * M * K * N / (2 * (M * K + K * N + M * N)), rel=1e-9)
    assert got["qkv_proj"][1] == 4096
    # down projection: M 8192, K 14336, N 4096
    M, K, N = 8192, 14336, 4096
    assert got["mlp_down"][0] == pytest.approx(2 * M * K * N / (2 * (M * K + K * N + M * N)), rel=1e-9)


def test_small_gemms_warn_below_the_ridge_point():
    tiny = {"n_layers": 2, "d_model": 256, "n_heads": 4, "n_kv_heads": 4, "ffn_hidden": 768, "seq_len": 128, "vocab": 1024}
    s = spec.resolve("llama3-8b", {"tp": 1, "dp": 1, "global_batch": 1, "micro_batch": 1}, "h100-sxm", "megatron-core",
                     model_fields=tiny)
    p = predict(s.model, s.plan, s.hardware)
    msgs = advice.warnings_for(p)
    assert any(m.startswith("GEMMs too small") and "qkv_proj" in m for m in msgs)
    # every GEMM of this model is far below the H100 bf16 ridge (989 TFLOP/s / 3.35 TB/s ~ 295 FLOP/B)
    assert all(ai < 295 for _, ai, _ in advice.gemms(p))


def test_the_memory_warning_counts_memory_as_the_memory_line_does():
    # the warning's figure is the tensors plus the reserve (CUDA context, NCCL buffers, fragmentation), what the
    # memory line prints and the fit check compares with the capacity
    p = _pred("llama3-70b", {"tp": 1, "dp": 8, "global_batch": 8, "micro_batch": 1})
    assert not p.fits_in_memory
    line = next(w for w in advice.warnings_for(p) if w.startswith("plan does not fit in memory"))
    need = float(line.split(": ")[1].split(" GiB")[0])
    assert need == pytest.approx((p.memory["total"] + p.memory["reserve"]).to("GiB").magnitude, abs=0.05)


QWEN_EP16 = {"tp": 1, "dp": 32, "ep": 16, "global_batch": 1024, "micro_batch": 1}


def _on(model, plan, stack="megatron-core", gpu="h100-sxm"):
    """A prediction that knows its stack (predict(spec)), as the CLI's."""
    return predict(spec.resolve(model, plan, gpu, stack))


def test_an_exposed_ep_all_to_all_is_priced_with_the_overlap():
    """Qwen3-30B-A3B over 32 H100s with EP 16 (across two nodes): the all-to-all is a large exposed share; the hint
    prices the same plan with --overlap-ep 1 and the figure it prints is that prediction's."""
    import dataclasses

    p = _on("qwen3-30b-a3b", QWEN_EP16)
    share = float(p.raw["t_ep_comm"]) / float(p.raw["step_time"])
    assert share > advice.EP_EXPOSED_LIMIT
    hint = advice.ep_overlap_hint(p)
    assert hint is not None and hint in advice.warnings_for(p)
    alt = predict(p.model, dataclasses.replace(p.plan, overlap_ep=1.0), p.hardware)
    t0, t1 = p.step_time.to("s").magnitude, alt.step_time.to("s").magnitude
    assert t1 < t0 and f"{t0:.3g} s -> {t1:.3g} s" in hint and f"{100 * share:.0f} %" in hint


@pytest.mark.parametrize("plan, blocker", [
    ({"pp": 2, "interleave": 1}, "pp > 1 needs interleaving"),
    ({"recompute": "full"}, "no full recomputation"),
])
def test_a_plan_megatron_core_cannot_overlap_names_the_condition(plan, blocker):
    p = _on("qwen3-30b-a3b", {**QWEN_EP16, "dp": 16, **plan})
    hint = advice.ep_overlap_hint(p)
    assert hint is not None and blocker in hint and " s -> " not in hint


def test_no_hint_where_the_overlap_is_on_or_the_stack_has_none():
    assert advice.ep_overlap_hint(_on("qwen3-30b-a3b", {**QWEN_EP16, "overlap_ep": 1.0})) is None
    assert advice.ep_overlap_hint(_on("qwen3-30b-a3b", QWEN_EP16, "torchtitan")) is None
    # a prediction of a literal plan names no stack: no hint (the stack decides whether the overlap exists)
    s = spec.resolve("qwen3-30b-a3b", QWEN_EP16, "h100-sxm", "megatron-core")
    assert advice.ep_overlap_hint(predict(s.model, s.plan, s.hardware)) is None
    # a dense model has no all-to-all
    assert advice.ep_overlap_hint(_on("llama3-8b", {"tp": 1, "dp": 8, "global_batch": 64})) is None


def test_search_prints_the_hint_for_its_top_plan():
    """search's top plan (a Candidate: its Plan) gets the same hint, with how to search with the overlap."""
    from types import SimpleNamespace

    from roofline.views import search as SE

    s = spec.resolve("qwen3-30b-a3b", QWEN_EP16, "h100-sxm", "megatron-core")
    line = SE.top_plan_ep_hint(s.model, [SimpleNamespace(plan=s.plan)], s.hardware, "megatron-core")
    assert line.startswith("top plan: ") and advice.ep_overlap_hint(predict(s)) in line
    assert line.endswith("search with --overlap-ep 1 to rank every plan with it")
    assert SE.top_plan_ep_hint(s.model, [SimpleNamespace(plan=s.plan)], s.hardware, "torchtitan") is None
    assert SE.top_plan_ep_hint(s.model, [], s.hardware, "megatron-core") is None


def test_a_host_bound_step_is_named_and_a_compute_bound_one_is_not():
    from roofline.views.sensitivity import sensitivity
    small = _pred("gpt3-125m", {"tp": 2, "dp": 4, "global_batch": 64, "micro_batch": 1})
    host = next(r for r in sensitivity(small).resources if r["resource"] == "host CPU")
    msg = next(m for m in advice.warnings_for(small) if m.startswith("the step is host-bound"))
    assert f"{host['elasticity']:.0%} of it scales" in msg
    assert f"shortens it by {1 - host['faster_s'] / small.raw['step_time']:.0%}" in msg
    big = _pred("gpt3-175b", {"tp": 8, "pp": 8, "dp": 16, "global_batch": 1536, "micro_batch": 1}, "a100-sxm4-80gb")
    assert not any(m.startswith("the step is host-bound") for m in advice.warnings_for(big))
    # under full CUDA graphs no kernel is issued one by one: nothing to warn about
    graphed = _pred("gpt3-125m", {"tp": 2, "dp": 4, "global_batch": 64, "micro_batch": 1, "cuda_graphs": "full"})
    assert not any(m.startswith("the step is host-bound") for m in advice.warnings_for(graphed))
