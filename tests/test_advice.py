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
