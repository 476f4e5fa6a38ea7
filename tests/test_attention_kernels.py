"""Flash-attention kernels other than FlashAttention-2 (model attention flash-triton, flash-v1; symbol flash_speed):
the profiles' attention curves are FlashAttention-2's, and Dao 2023 (arXiv 2307.08691 sec. 4.1) measures
FlashAttention-2 1.3-2.5x faster than FlashAttention in Triton and 1.7-3.0x faster than FlashAttention v1 on the A100.
llm-foundry ran the Triton kernel by default until March 2024 (stacks/llm-foundry-2023.yaml)."""
import csv

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from roofline.model.formulas import compute as C
from roofline.model.formulas import symbols as S
from roofline.model.predict import predict, value_at
from roofline.spec import hardware, stacks
from roofline.spec.config import FLASH_SPEED, Model, Plan
from roofline.views import validate as V

A100 = hardware.load("a100-sxm4-80gb")


def _model(attention, seq_len=8192):
    return Model(n_layers=2, d_model=2048, n_heads=16, vocab=50368, seq_len=seq_len, mlp="gelu", attention=attention)


def _pred(attention, seq_len=8192):
    return predict(_model(attention, seq_len), Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8), A100)


def test_the_speeds_are_the_geometric_means_of_the_papers_ranges():
    assert FLASH_SPEED["flash"] == 1.0
    assert 1 / FLASH_SPEED["flash-triton"] == pytest.approx((1.3 * 2.5) ** 0.5)
    assert 1 / FLASH_SPEED["flash-v1"] == pytest.approx((1.7 * 3.0) ** 0.5)


def test_only_the_flash_kernels_compute_time_divides_by_the_speed():
    att = next(o for o in C.attention_core() if o.name == "flash_attention")
    t = C.op_time(att, "fwd")
    assert S.flash_speed in t.free_symbols
    gemm = next(o for o in C.layer_ops(C.d_head, S.ffn_hidden, sp.Integer(0)) if o.cls == "gemm")
    assert S.flash_speed not in C.op_time(gemm, "fwd").free_symbols


@settings(max_examples=15, deadline=None)
@given(seq_exp=st.integers(min_value=9, max_value=15))
def test_a_slower_kernel_never_gives_a_faster_step_and_keeps_the_flops(seq_exp):
    s = 2 ** seq_exp
    fa2, triton, v1 = (_pred(a, s) for a in ("flash", "flash-triton", "flash-v1"))
    assert fa2.step_time <= triton.step_time <= v1.step_time
    a, b = triton.to_dict(), fa2.to_dict()
    assert a["flops_per_step"] == b["flops_per_step"] and a["memory_per_gpu_bytes"] == b["memory_per_gpu_bytes"]


def test_the_slowdown_grows_with_the_sequence_as_attention_does():
    short = _pred("flash-triton", 512).step_time / _pred("flash", 512).step_time
    long = _pred("flash-triton", 32768).step_time / _pred("flash", 32768).step_time
    assert 1 < short < long < 1 / FLASH_SPEED["flash-triton"]


def test_llm_foundry_by_era_and_the_engine_it_builds_on():
    assert stacks.get("llm-foundry@2023").model["attention"] == "flash-triton"
    assert stacks.get("llm-foundry").model["attention"] == "flash"
    stack, why = stacks.infer(text="MosaicML llm-foundry benchmarks (2023-10-19); Composer + PyTorch FSDP FULL_SHARD")
    assert stack.id == "llm-foundry-2023" and "llm-foundry" in why
    assert stacks.infer(text="PyTorch FSDP FULL_SHARD run")[0].id == "fsdp"


@pytest.mark.parametrize("notes, want", [("", "flash-triton"), ("attn_impl: flash, flash-attn 2.4.2", "flash"),
                                         ("flash-attn==1.0.7", "flash-v1")])
def test_a_row_states_its_kernel_over_the_stacks(tmp_path, notes, want):
    row = {"case_id": "mpt", "source": "mosaicml/llm-foundry scripts/train/benchmarking/README.md (2023)",
           "model": "MPT-1b", "n_layers": 24, "d_model": 2048, "n_heads": 16, "ffn_hidden": 8192, "mlp": "gelu",
           "vocab": 50368, "seq_len": 8192, "global_batch": 96, "micro_batch": 3, "tp": 1, "pp": 1, "dp": 8,
           "optimizer_sharding": "FULL_SHARD", "gpu_id": "a100-sxm4-80gb", "n_gpus": 8,
           "measured_iter_time_s": 3.4, "notes": notes, "tier": "B"}
    path = tmp_path / "r.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    case = V.build_case(V.read(path)[0])
    assert case.framework == "llm-foundry-2023" and case.model.attention == want


def test_the_mpt_figures_docs_models_quotes():
    """docs/models.md, "Flash-attention kernels": MPT-7B on 8 A100 80GB, FSDP, full recomputation, two micro-batches."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text()
    got = []
    for s, mb in ((2048, 16), (8192, 4), (32768, 1)):
        t = {a: predict(Model(n_layers=32, d_model=4096, n_heads=32, vocab=50368, seq_len=s, mlp="gelu", attention=a,
                              tied_embeddings=True, biases=False),
                        Plan(tp=1, pp=1, dp=8, micro_batch=mb, global_batch=16 * mb, sharding="fsdp", recompute="full"),
                        A100).step_time.to("s").magnitude for a in ("flash", "flash-triton")}
        got.append(round(100 * (t["flash-triton"] / t["flash"] - 1)))
    assert (f"step {got[0]} % slower than FlashAttention-2's at sequence 2048 (micro-batch 16), {got[1]} % at 8192 "
            f"(micro-batch 4) and {got[2]} % at 32768") in " ".join(text.split())


# ---- kernels whose speed depends on the GPU generation (profile attention_speed) ----------------------------------
def _llama8b_step(gpu, attention):
    import dataclasses

    from roofline.spec import models
    from roofline.spec.resolve import resolve
    s = resolve(dataclasses.replace(models.load("llama3-8b"), seq_len=8192),
                {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 128}, gpu, "megatron-core")
    return predict(dataclasses.replace(s.model, attention=attention), s.plan, s.hardware).step_time.to("s").magnitude


def test_the_llama3_8b_figures_docs_models_quotes():
    """docs/models.md, "Flash-attention kernels": te and flash3 against flash on H100, B200, A100."""
    from pathlib import Path
    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text().split())
    h = {a: _llama8b_step("h100-sxm", a) for a in ("flash", "te", "flash3")}
    b = {a: _llama8b_step("b200", a) for a in ("flash", "te")}
    a100 = {a: _llama8b_step("a100-sxm4-80gb", a) for a in ("flash", "te")}
    pct = lambda t, k: round(100 * (1 - t[k] / t["flash"]))   # noqa: E731
    assert (f"steps {pct(h, 'te')} % faster with `te` than with `flash` and {pct(h, 'flash3')} % faster with "
            f"`flash3`; on 8 B200, {pct(b, 'te')} % faster with `te`; on 8 A100 the two are the same") in text
    assert a100["te"] == pytest.approx(a100["flash"], rel=1e-12) and max(h["flash3"], h["te"]) < h["flash"]


def test_hopper_flash3_speeds_read_from_the_fa3_paper_figures():
    """Shah et al. 2024 (arXiv 2407.08608) Figs. 5-6, H100 SXM5 BF16, sequence 1k-16k, over FlashAttention-2:
    FlashAttention-3 1.72-1.84x at head dim 128; each Hopper profile states it, interpolated in log2(head dim) and flat
    beyond. (cuDNN's factor is measured: tests/test_cudnn_sdpa.py.)"""
    ratios = (1.75, 1.84, 1.72, 1.76)   # the paper's FlashAttention-3 / FlashAttention-2 ranges: forward, backward
    for gpu in ("h100-sxm", "h200", "gh200", "h100-pcie", "h100-nvl", "h200-nvl", "h20", "h800", "h100-sxm-measured"):
        hw = hardware.load(gpu)
        assert min(ratios) <= hw.attention_factor("flash3", 128) <= max(ratios)
        for k in ("cudnn", "flash3"):
            assert hw.attention_factor(k, 256) == hw.attention_factor(k, 128)
            assert hw.attention_factor(k, 64) < hw.attention_factor(k, 96) < hw.attention_factor(k, 128)
    assert A100.attention_factor("cudnn", 128) == 1.0 and A100.attention_factor(None, 128) == 1.0


def test_simumaxs_older_b200_table_restated_at_the_same_clock_is_what_b200_yaml_quotes():
    """b200.yaml quotes SimuMax's B200 attention table (Transformer Engine 2.11) restated as a speed over the b200 prior
    at the same clock: median 1.34 over the head-dim-128 shapes with >= 8 heads, below the cuDNN 9.22 measurement on
    the same die (GB200: 1.60) that the profile takes."""
    import dataclasses
    import json
    import statistics
    from pathlib import Path

    from roofline.model.predict import inputs
    from roofline.spec import models

    root = Path(__file__).resolve().parents[1]
    op = json.loads((root / "roofline/data/simumax-b200/b200_bf16_ceperm.json").read_text())["accelerator"]["op"]
    fwd, bwd = op["sdp_fwd"]["accurate_efficient_factor"], op["sdp_bwd"]["accurate_efficient_factor"]
    hw = hardware.load("b200")
    prior = dataclasses.replace(hw, attention_speed={})
    att = next(o for o in C.attention_core() if o.name == "flash_attention")
    exprs = [sp.sympify(e) for e in (C.op_time(att, "fwd"), C.op_time(att, "bwd"), att.f_fwd)]
    free = sorted(set().union(*(e.free_symbols for e in exprs)), key=str)
    fns = [sp.lambdify(free, e, "math") for e in exprs]
    ratios = []
    for key in fwd:
        kv = dict(x.split("=") for x in key.split(", "))
        if kv["qkv_contiguous"] != "True" or kv["qk_head_dim"] != kv["v_head_dim"] or int(kv["head_num"]) < 8:
            continue
        a, g, d, s, b = (int(kv[k]) for k in ("head_num", "kv_head_num", "qk_head_dim", "seq_len", "batch"))
        m = dataclasses.replace(models.load("llama3-8b"), n_heads=a, n_kv_heads=g, d_model=a * d, seq_len=s, head_dim=d)
        x = inputs(m, Plan(tp=1, pp=1, dp=1, micro_batch=b, global_batch=b), prior)
        t_f, t_b, f = (float(fn(*[x[str(sym)] for sym in free])) for fn in fns)
        measured = f / (fwd[key] / 2 * hw.peak("bf16")) + 2.5 * f / (bwd[key] / 2 * hw.peak("bf16"))
        clock = value_at(C.clock_eff, x)     # the prior back at boost clock, as measured
        ratios.append((t_f + t_b) * clock / measured)
    assert len(ratios) == 12
    med = statistics.median(ratios)
    assert "gives 1.34 at head dim 128" in (root / "roofline/spec/hardware/profiles/b200.yaml").read_text()
    assert med == pytest.approx(1.34, abs=0.005)
    assert med < hw.attention_factor("cudnn", 128) == hardware.load("gb200").attention_factor("cudnn", 128)


def test_transformer_engine_stacks_run_te_and_the_rest_flash():
    assert stacks.get("megatron-core").model["attention"] == "te"
    assert stacks.get("nemo-automodel").model["attention"] == "te"
    for sid in ("torchtitan", "olmo-core", "llm-foundry", "nanotron", "fsdp"):
        assert stacks.get(sid).model["attention"] == "flash"


@pytest.mark.parametrize("bad, msg", [({"cudnn": {128: 0}}, "attention_speed.cudnn"),
                                      ({"fa4": {128: 2}}, "attention_speed"),
                                      ({"cudnn": {}}, "at least one head_dim"),
                                      ({"cudnn": {"x": 1.5}}, "head_dim")])
def test_a_bad_attention_speed_is_one_line_naming_it(tmp_path, bad, msg):
    import yaml

    from roofline.base.errors import InputError
    p = tmp_path / "g.yaml"
    p.write_text(yaml.safe_dump({"id": "g", "base": "h100-sxm", "attention_speed": bad}))
    with pytest.raises(InputError, match=msg):
        hardware.load(str(p))


def test_mla_attention_takes_the_kernels_head_width_and_matches_simumaxs_mla_rows():
    """MLA's core attention runs queries and keys of qk_nope + qk_rope (DeepSeek-V3: 192) and values of v_head (128),
    so the architecture's kernel factor is read at 192, not at d_model / heads (56). SimuMax's B200 table measures six
    MLA shapes (192/128, 16-128 heads, sequence 4k-128k): restated at the same clock, their median is the 1.29 b200.yaml
    quotes: 0.96x the same table's head-dim-128 speed (1.34), where cudnn-frontend's GB200 table (cuDNN 9.22), whose
    factors the profile states (1.70 at 192, 1.60 at 128), runs MLA 1.06x; the two tables agree within 11 %, and the
    width d_model / heads would read 1.40 (0.875x), further from both."""
    import dataclasses
    import json
    import statistics
    from pathlib import Path

    from roofline.model.predict import attention_inputs, inputs
    from roofline.spec import models

    ds = models.load("deepseek-v3")
    assert (ds.kernel_head_dim, ds.head_size) == (192, 56)
    assert models.load("llama3-8b").kernel_head_dim == models.load("llama3-8b").head_size == 128
    root = Path(__file__).resolve().parents[1]
    op = json.loads((root / "roofline/data/simumax-b200/b200_bf16_ceperm.json").read_text())["accelerator"]["op"]
    fwd, bwd = op["sdp_fwd"]["accurate_efficient_factor"], op["sdp_bwd"]["accurate_efficient_factor"]
    hw = hardware.load("b200")
    prior = dataclasses.replace(hw, attention_speed={})
    att = next(o for o in C.attention_core(C.mla_qk, S.v_head) if o.name == "flash_attention")
    exprs = [sp.sympify(e) for e in (C.op_time(att, "fwd"), C.op_time(att, "bwd"))]
    free = sorted(set().union(*(e.free_symbols for e in exprs)), key=str)
    fns = [sp.lambdify(free, e, "math") for e in exprs]
    ratios = []
    for key in fwd:
        kv = dict(x.split("=") for x in key.split(", "))
        if kv["qkv_contiguous"] != "True" or (kv["qk_head_dim"], kv["v_head_dim"]) != ("192", "128"):
            continue
        a, s, b = (int(kv[k]) for k in ("head_num", "seq_len", "batch"))
        x = inputs(dataclasses.replace(ds, n_heads=a, seq_len=s), Plan(tp=1, pp=1, dp=1, micro_batch=b,
                                                                       global_batch=b), prior)
        t_f, t_b = (float(fn(*[x[str(sym)] for sym in free])) for fn in fns)
        # SimuMax's MLA FLOPs (dense_module.py MLA core attention): 2 b a s^2 (192 + 128) forward, 2.5x backward,
        # over the full score matrix
        base = b * a * s * s * (192 + 128)
        peak = op["sdp_fwd"]["tflops"] * 1e12
        measured = 2 * base / (fwd[key] * peak) + 5 * base / (bwd[key] * peak)
        clock = value_at(C.clock_eff, x)
        ratios.append((t_f + t_b) * clock / measured)
    assert len(ratios) == 6
    med = statistics.median(ratios)
    assert med == pytest.approx(1.29, abs=0.005)
    te = dataclasses.replace(ds, attention="te")
    assert attention_inputs(te, hw)["flash_speed"] == pytest.approx(hw.attention_factor("cudnn", 192))
    mla_over_128 = hw.attention_factor("cudnn", 192) / hw.attention_factor("cudnn", 128)
    assert abs(mla_over_128 / (med / 1.34) - 1) < 0.11
    assert abs(hw.attention_factor("cudnn", 56) / hw.attention_factor("cudnn", 128) / (med / 1.34) - 1) > 0.08
