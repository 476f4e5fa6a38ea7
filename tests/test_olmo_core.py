"""Rows as OLMo-core's README writes them: the OLMo-core stack (FSDP2/HSDP, torch.compile, torchao float8) and a GPU
named only "NVIDIA H100"."""
import pytest

from roofline.spec import hardware, stacks
from roofline.spec.resolve import resolve
from roofline.views import validate as V


@pytest.mark.parametrize("text, expected", [
    ("OLMo-core", "olmo-core"), ("olmo_core", "olmo-core"), ("ai2-olmo-core v2.1", "olmo-core"),
    ("OLMo-core (FSDP2, torch.compile)", "olmo-core"), ("torchtitan fsdp2", "torchtitan"),
])
def test_the_stack_a_text_names(text, expected):
    stack, why = stacks.infer(text, "", None, None, "bf16")
    assert stack.id == expected, why


def test_olmo_core_defaults_are_its_official_scripts():
    """HSDP with an fp32 reduce, compiled blocks and loss, no recompute, FSDP2's buffer copies (each sourced)."""
    s = resolve("olmo2-7b", {"tp": 1, "dp": 8, "micro_batch": 2, "global_batch": 1024}, "h100-sxm", "olmo-core")
    p = s.plan
    assert (p.sharding, p.grad_dtype, p.recompute, p.eager_elementwise, p.loss_kernel, p.fsdp_copies,
            p.quantized_saves) == ("fsdp", "fp32", "none", False, "compiled", True, False)
    src = stacks.get("olmo-core").sources
    assert "compile_model=True" in src["eager_elementwise"] and "reduce_dtype" in src["grad_dtype"]


def test_olmo_core_refuses_what_it_cannot_run():
    """No ZeRO-1/2 mode (DataParallelType fsdp | hsdp | ddp): one line naming the rule."""
    with pytest.raises(Exception, match="zero2|distributed|sharding"):
        resolve("olmo2-7b", {"tp": 1, "dp": 8, "sharding": "zero2", "global_batch": 64}, "h100-sxm", "olmo-core")


def test_the_readme_rows_are_priced_on_the_stack_and_the_dgx_part():
    rows = [r for r in V.read(V.dataset_path("tables")) if r["case_id"].startswith("olmocore_")]
    assert len(rows) == 8
    res = V.validate(rows)
    assert not res["skipped"] and {c["framework"] for c in res["cases"]} == {"olmo-core"}
    assert {c["gpu_id"] for c in res["cases"]} == {"h100-sxm"}
    assert all("a bare 'H100'" in c["note"] for c in res["cases"])
    by = {c["case_id"]: c for c in res["cases"]}
    # the FP8 rows run their GEMMs at the FP8 peak: faster than the BF16 rows of the same script
    for size in ("1b", "7b", "13b"):
        assert by[f"olmocore_olmo2_{size}_fp8"]["predicted_s"] < by[f"olmocore_olmo2_{size}_bf16"]["predicted_s"]


@pytest.mark.parametrize("text, pid", [
    ("NVIDIA H100", "h100-sxm"), ("8x H100 GPUs", "h100-sxm"), ("A100", "a100-sxm4-80gb"),
    ("H100 NVL", None), ("H100 PCIe", None), ("A100 40GB", None), ("H200", None), ("TPU v4", None),
])
def test_a_bare_part_is_the_dgx_part_and_a_named_variant_is_not_bare(text, pid):
    got = hardware.bare_part(text)
    assert (got[0] if got else None) == pid
    if got:
        assert "bare" in got[1]
