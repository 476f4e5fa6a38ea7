"""Hybrid Mamba-2 models (formulas/mamba.py): the mixer's FLOPs by hand, the hybrid layer against the transformer
it reduces to, Nemotron 3 Nano's published parameter count, the pattern's rules and the validation rows."""
from __future__ import annotations

import dataclasses

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.spec import hardware, models
from roofline.spec.config import Model, Plan, check
from roofline.base.errors import InputError
from roofline.model.formulas import compute as C
from roofline.model.formulas import mamba as MB
from roofline.model.formulas import symbols as S
from roofline.model.predict import predict

# a small Mamba-2 layer, sizes chosen for hand arithmetic: T = 1024 tokens (b 1, s 1024, t = c = 1), h 256,
# 8 heads x 32 wide (d_in 256), state 16, 2 groups, chunk 64, conv 4
SMALL = {S.tp: 1, S.cp: 1, S.micro_batch: 1, S.seq_len: 1024, S.d_model: 256, S.mamba_heads: 8, S.mamba_hdim: 32,
         S.mamba_state: 16, S.mamba_groups: 2, S.mamba_chunk: 64, S.mamba_conv: 4, S.seq_par: 0, S.act_bytes: 2,
         S.f32_bytes: 4, S.dropout: 0, S.mask_bytes: 1}


def _op(name):
    return next(o for o in MB.mixer_ops() if o.name == name)


def _num(e):
    return float(sp.sympify(e).xreplace(SMALL))


def test_mixer_gemm_flops_by_hand():
    # in_proj h -> z, x (256 each), B, C (2 groups x 16 each), dt (8 heads): 256 + 256 + 32 + 32 + 8 = 584 wide
    assert _num(_op("mamba_in_proj").f_fwd) == 2 * 1024 * 256 * 584
    # out_proj d_in 256 -> h 256; backward = dgrad + wgrad
    assert _num(_op("mamba_out_proj").f_fwd) == 2 * 1024 * 256 * 256
    assert _num(_op("mamba_out_proj").f_bwd) == 2 * 2 * 1024 * 256 * 256


def test_ssd_scan_flops_by_hand():
    """Kernel by kernel (mamba_ssm ssd_combined.py), T = 1024, 8 heads, P 32, N 16, G 2, Q 64:
    chunk_state 2 T 8 32 16 = 8,388,608; C . states the same; intra-chunk causal half of 2 T 8 64 32 = 33,554,432
    -> 16,777,216; CB 2 T 2 64 16 = 4,194,304."""
    ssd = _op("ssd_scan")
    assert _num(ssd.f_fwd) == 8_388_608 + 8_388_608 + 33_554_432 // 2 + 4_194_304
    # backward: 5 x 2THPN (recomputed states, dstates, dx, dB, dC) + 2 x THQP (dx, dCB causal halves)
    # + 3 x 2TGQN (recomputed CB, dB and dC from dCB)
    assert _num(ssd.f_bwd) == 5 * 8_388_608 + 2 * (33_554_432 // 2) + 3 * 4_194_304
    # the scan is a few per cent of the layer's matmul FLOPs at these sizes (in_proj + out_proj = 440 MFLOP)
    assert _num(ssd.f_fwd) < 0.1 * (_num(_op("mamba_in_proj").f_fwd) + _num(_op("mamba_out_proj").f_fwd))


def test_conv1d_counts():
    conv = _op("mamba_conv1d")
    # x, B, C channels: 256 + 2 x 2 x 16 = 320 per token; 2 x 4 taps + 4 (SiLU) FLOP each; read + write 2 B each
    assert _num(conv.f_fwd) == 1024 * 320 * 12
    assert _num(conv.b_fwd) == 1024 * 320 * 2 * 2


@settings(max_examples=25, deadline=None)
@given(heads=st.sampled_from([8, 16, 64, 128]), p=st.sampled_from([32, 64, 80]), n=st.sampled_from([16, 64, 128, 256]),
       g=st.sampled_from([1, 2, 8]), q=st.sampled_from([64, 128, 256]), s=st.sampled_from([1024, 4096, 8192]))
def test_mixer_is_linear_in_tokens(heads, p, n, g, q, s):
    """Every Mamba operator's FLOPs grow linearly with the sequence (no s^2 term, unlike attention), and so do the
    bytes of all but the two projections (which read their weights once); the backward of the scan does at least
    twice the forward's matmul work (recompute + gradients)."""
    sub = {**SMALL, S.mamba_heads: heads, S.mamba_hdim: p, S.mamba_state: n, S.mamba_groups: g, S.mamba_chunk: q,
           S.seq_len: s}
    for o in MB.mixer_ops():
        one = float(o.f_fwd.xreplace(sub)), float(o.b_fwd.xreplace(sub))
        two = float(o.f_fwd.xreplace({**sub, S.seq_len: 2 * s})), float(o.b_fwd.xreplace({**sub, S.seq_len: 2 * s}))
        assert two[0] == pytest.approx(2 * one[0], rel=1e-12), o.name
        if o.name not in ("mamba_in_proj", "mamba_out_proj"):
            assert two[1] == pytest.approx(2 * one[1], rel=1e-12), o.name
    ssd = _op("ssd_scan")
    assert float(ssd.f_bwd.xreplace(sub)) >= 2 * float(ssd.f_fwd.xreplace(sub))


def test_tp_splits_the_mixer():
    """Megatron-Core splits in_proj (column), the conv and the scan (heads, groups) and out_proj (row) over t."""
    for name in ("mamba_in_proj", "mamba_conv1d", "ssd_scan", "mamba_out_proj"):
        o = _op(name)
        assert _num(o.f_fwd.xreplace({S.tp: 2})) == pytest.approx(_num(o.f_fwd) / 2, rel=1e-12), name


# ---- the hybrid layer reduces to the transformer -----------------------------------------------------------------
H100 = hardware.load("h100-sxm")
BIG = dict(d_model=4096, n_heads=32, n_kv_heads=8, ffn_hidden=14336, mlp="swiglu", norm="rmsnorm", vocab=128256,
           seq_len=4096, tied_embeddings=False, position="rope", biases=False)


@pytest.mark.parametrize("plan", [Plan(tp=1, pp=1, dp=8, global_batch=64),
                                  Plan(tp=2, pp=2, dp=2, global_batch=32, sequence_parallel=True,
                                       recompute="selective", sharding="distributed")])
@pytest.mark.parametrize("moe", [False, True])
def test_split_pattern_equals_transformer(plan, moe):
    """A pattern "*-" repeated l times (attention and MLP as separate layers, Megatron-Core hybrid) prices the same
    step, memory, FLOPs and parameters as the l-layer transformer ("*E" for a MoE): the per-layer shares, norms,
    TP blocks and activations add up to the transformer layer's."""
    extra = dict(n_experts=8, top_k=2, moe_ffn_hidden=4096) if moe else {}
    l = 8
    tf = Model(n_layers=l, **BIG, **extra)
    hy = Model(n_layers=2 * l, hybrid_pattern=("*E" if moe else "*-") * l, **BIG, **extra)
    a, b = predict(tf, plan, H100), predict(hy, plan, H100)
    # GPU-bound: no host excess; a MoE's GPU idle after each MoE forward's sync (host.moe_sync) counts once per MoE
    # layer, whether the layer is a transformer layer or an "E" sublayer of the pattern
    assert float(a.raw["t_layer_host"]) * l == pytest.approx(float(b.raw["t_layer_host"]) * 2 * l, rel=1e-9)
    assert float(a.raw["t_layer_host"]) == pytest.approx(H100.host_sync if moe else 0.0, rel=1e-12)
    for k in ("step_time", "flops", "hardware_flops", "params", "active_params", "memory", "mem_activations",
              "bytes_tp_fwd", "bytes_dp_bwd", "bytes_ep_fwd"):
        assert float(b.raw[k]) == pytest.approx(float(a.raw[k]), rel=1e-9), k
    # with full recomputation each hybrid layer keeps its own input: twice the transformer's checkpoints
    full = dataclasses.replace(plan, recompute="full")
    a, b = predict(tf, full, H100), predict(hy, full, H100)
    assert float(b.raw["step_time"]) == pytest.approx(float(a.raw["step_time"]), rel=1e-9)
    assert float(b.raw["mem_activations"]) > float(a.raw["mem_activations"])


def test_no_pattern_is_the_transformer():
    """Without a pattern the shares are (1, 1, 0): stating them changes nothing."""
    from roofline.model.predict import hybrid_inputs
    m = models.load("llama3-8b")
    assert hybrid_inputs(m)["attn_frac"] == 1.0 and hybrid_inputs(m)["mamba_frac"] == 0.0
    assert m.layer_counts == {"M": 0, "*": 32, "-": 32, "E": 0}


# ---- Nemotron 3 Nano ----------------------------------------------------------------------------------------------
def test_nemotron_3_nano_parameters():
    """Model card (huggingface.co/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16): 31.6B total, 3.2B active (3.6B with
    the embeddings)."""
    m = models.load("nemotron-3-nano-30b-a3b")
    assert m.layer_counts == {"M": 23, "*": 6, "-": 0, "E": 23}
    p = predict(m, Plan(tp=1, pp=1, dp=8, ep=8, global_batch=64), H100)
    assert p.params == pytest.approx(31.6e9, rel=0.02)
    assert 3.1e9 < float(p.raw["active_params"]) < 3.7e9


def test_nemotron_3_nano_layer_mix():
    """The Mamba layers are priced: the same model with its M layers turned into MoE layers runs another time."""
    m = models.load("nemotron-3-nano-30b-a3b")
    plan = Plan(tp=1, pp=1, dp=8, ep=8, global_batch=64)
    base = predict(m, plan, H100).step_time
    no_m = dataclasses.replace(m, hybrid_pattern=m.hybrid_pattern.replace("M", "E"))
    assert predict(no_m, plan, H100).step_time != base


# ---- rules ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fields,plan,words", [
    (dict(hybrid_pattern="MEX*"), Plan(), "M, *, -, E"),
    (dict(hybrid_pattern="ME*"), Plan(), "n_layers is 4"),
    (dict(hybrid_pattern="ME*E"), Plan(), "n_experts"),
    (dict(hybrid_pattern="M-*-", n_experts=4, top_k=2), Plan(), "dense MLP layers"),
    (dict(hybrid_pattern="M-*-", mamba_num_heads=6, mamba_num_groups=4), Plan(), "divisible by mamba groups"),
    (dict(hybrid_pattern="M-*-"), Plan(cp=2), "cp must be 1"),
    (dict(hybrid_pattern="M-*-", mamba_num_groups=1), Plan(tp=2), "tp (2)"),
])
def test_pattern_rules(fields, plan, words):
    with pytest.raises(InputError, match=words.replace("*", r"\*").replace("(", r"\(").replace(")", r"\)")):
        check(Model(n_layers=4, **fields), plan)


# ---- validation rows ------------------------------------------------------------------------------------------
def _nemo_rows():
    """The hybrid rows of the NeMo table the package ships (roofline/data/validation)."""
    import csv

    from roofline.views.validate import dataset_path
    with dataset_path("nemo").open(newline="", encoding="utf-8-sig") as f:
        return [r for r in csv.DictReader(f) if r["attention"] == "hybrid-mamba"]


def test_validate_reads_the_nemotron_rows():
    from roofline.views import validate as V
    rows = _nemo_rows()
    nano = next(r for r in rows if "Nano" in r["model"])
    d = V._hybrid_fields(nano)
    assert d == {"hybrid_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", "mamba_num_heads": 64,
                 "mamba_head_dim": 64, "mamba_state_dim": 128, "mamba_num_groups": 8}
    super_ = next(r for r in rows if "Super" in r["model"])          # LatentMoE: its width from the preset
    typed = next(r for r in V.read(V.dataset_path("nemo")) if r["case_id"] == super_["case_id"])
    assert V.build_case(typed).model.moe_latent_size == 1024
    ultra = next(r for r in rows if "Ultra" in r["model"])          # no pattern in the row, no preset
    with pytest.raises(V.Skip, match="pattern"):
        V._hybrid_fields(ultra)


def test_a_row_that_names_another_models_architecture_takes_its_pattern():
    """Nemotron 3.5 Lightning's row says "same as Nemotron 3 Nano": the Nano preset's layer pattern and mixer sizes;
    a pointer to a model without a preset stays a skip."""
    from roofline.spec import models
    from roofline.views import validate as V
    nano = models.load("nemotron-3-nano-30b-a3b")
    row = {"attention_detail": "same as Nemotron 3 Nano (hybrid Mamba-2/MoE/GQA)"}
    d = V._hybrid_fields(row)
    assert d["hybrid_pattern"] == nano.hybrid_pattern and d["mamba_num_heads"] == nano.mamba_num_heads == 64
    with pytest.raises(V.Skip, match="pattern"):
        V._hybrid_fields({"attention_detail": "same as Some Unknown Model (hybrid)"})


def test_ssd_rate_is_the_measured_fraction_of_the_peak():
    """The SSD scan is priced at SSD_PEAK_FRACTION of the 16-bit peak, not on the GEMM curve: with HBM free and no
    launch cost its forward time is its FLOPs over that rate."""
    ssd = _op("ssd_scan")
    t = C.op_time(ssd, "fwd")
    sub = dict(SMALL)
    for s in t.free_symbols:
        if s not in sub:
            name = str(s)
            sub[s] = {"peak_hp": 1e15, "clock": 1.0, "clock_spread": 0.0, "gpu_z": 0.0}.get(
                name, 1e30 if ("hbm" in name or "EFF_MEM" in name or "mu_" in name) else 0.0)
    got = float(t.xreplace(sub))
    assert got == pytest.approx(_num(ssd.f_fwd) / (1e15 * float(MB.SSD_PEAK_FRACTION)), rel=1e-9)


@pytest.mark.parametrize("chunk", [128, 256])
def test_ssd_rate_matches_the_published_h100_throughput(chunk):
    """vllm-project/vllm#27299: mamba_chunk_scan_combined's Triton kernels run 1.07-1.29e7 tokens/s forward on one
    H100 (989 TFLOP/s BF16) for 128 heads of width 64, state 128, one group; SSD_PEAK_FRACTION of that peak over
    ssd_flops per token lands in that range (15 % either side: the benchmark's chunk length is 128 or 256)."""
    sizes = {S.mamba_hdim: 64, S.mamba_state: 128, S.mamba_chunk: chunk}
    f_fwd, _ = MB.ssd_flops(1, 128, 1)
    per_token = float(f_fwd.xreplace(sizes))
    rate = 989e12 * float(MB.SSD_PEAK_FRACTION) / per_token
    assert 1.07e7 / 1.15 <= rate <= 1.29e7 * 1.15
