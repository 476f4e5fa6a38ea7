"""Full recomputation of a share of the layers (plan recompute_fraction): Megatron-Core --recompute-method block
--recompute-num-layers N, torchtitan selective_ac_option n (every n-th block), OLMo-core selected_blocks, fms-fsdp
selective_checkpointing p."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.base.errors import InputError
from roofline.model.predict import predict
from roofline.spec import hardware
from roofline.spec.config import Model, Plan, check
from roofline.views import validate as V

A100 = hardware.load("a100-sxm4-80gb")
MODEL = Model(n_layers=8, d_model=2048, n_heads=16, vocab=32000, seq_len=2048, mlp="swiglu")


def _pred(frac=1.0, recompute="full", **kw):
    base = dict(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, recompute=recompute, recompute_fraction=frac)
    return predict(MODEL, Plan(**{**base, **kw}), A100).to_dict()


@settings(max_examples=20, deadline=None)
@given(f=st.floats(0.05, 1.0), pp=st.sampled_from([1, 2]))
def test_the_recompute_time_is_the_share_of_the_full_one(f, pp):
    full, part = _pred(1.0, pp=pp), _pred(f, pp=pp)
    assert part["breakdown_s"]["recompute"] == pytest.approx(f * full["breakdown_s"]["recompute"], rel=1e-9)
    assert part["step_time_s"] <= full["step_time_s"] * (1 + 1e-12)


@settings(max_examples=20, deadline=None)
@given(f=st.floats(0.05, 0.95))
def test_stored_activations_lie_between_none_and_full(f):
    """A share f of the layers keeps only its input, the rest everything: more than full recomputation stores, less
    than none (the working set of one recomputed layer aside, at most one layer's worth)."""
    none = _pred(recompute="none")["memory_per_gpu_bytes"]["activations"]
    full = _pred(1.0)["memory_per_gpu_bytes"]["activations"]
    part = _pred(f)["memory_per_gpu_bytes"]["activations"]
    assert full < part < none + full


def test_a_fraction_needs_full_recomputation_and_a_share():
    with pytest.raises(InputError, match=r"recompute-fraction \(0.5\) is the share .* needs recompute full"):
        check(MODEL, Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, recompute="selective",
                          recompute_fraction=0.5))
    with pytest.raises(InputError, match=r"recompute-fraction must be in \(0, 1\]"):
        check(MODEL, Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, recompute="full", recompute_fraction=1.5))


@pytest.mark.parametrize("framework, recompute, notes, share, said", [
    ("torchtitan", "selective layer", "", 0.5, "torchtitan selective_ac_option default 2"),
    ("torchtitan", "selective", "selective_ac_option: 4", 0.25, "one block in 4"),
    ("Megatron-LM", "full", "--recompute-method block --recompute-num-layers 2", 0.5, "2 of each chunk's 4 layers"),
    ("fms-fsdp (PyTorch FSDP)", "selective", "selective_checkpointing=0.5", 0.5, "0.5 of the blocks"),
])
def test_validate_reads_a_partial_recomputation(tmp_path, framework, recompute, notes, share, said):
    import csv
    path = tmp_path / "runs.csv"
    row = dict(case_id="r", source="x", framework=framework, model="Llama 2 7B", n_layers=8, seq_len=4096, n_gpus=16,
               gpu="A100 80GB", tp=1, pp=2, dp=8, micro_batch=1, global_batch=32, tokens_per_s_per_gpu=3000,
               recompute=recompute, notes=notes, tier="B")
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    case = V.build_case(V.read(path)[0])
    assert case.plan.recompute == "full" and case.plan.recompute_fraction == pytest.approx(share)
    assert said in case.note


def test_selective_layer_outside_torchtitan_stays_megatron_selective(tmp_path):
    import csv
    path = tmp_path / "runs.csv"
    row = dict(case_id="r", source="x", framework="Megatron-LM", model="Llama 2 7B", seq_len=4096, n_gpus=8,
               gpu="A100 80GB", tp=2, pp=1, dp=4, micro_batch=1, global_batch=32, tokens_per_s_per_gpu=3000,
               recompute="selective layer", tier="B")
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    case = V.build_case(V.read(path)[0])
    assert case.plan.recompute == "selective" and case.plan.recompute_fraction == 1
