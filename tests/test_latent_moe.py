"""LatentMoE (Nemotron 3 Super; Megatron-Core moe_latent_size, moe/moe_layer.py): the routed experts read and write an
l-wide projection of h, fc1_latent_proj (h x l) before the dispatch and fc2_latent_proj (l x h) after the combine,
both held whole by every TP rank; router and shared experts stay on h. Numbers by hand."""
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import predict
from roofline.spec import hardware, models
from roofline.spec.config import Model, Plan
from roofline.views import validate as V

H100 = hardware.load("h100-sxm")
PLAN = Plan(tp=1, dp=4, ep=4, global_batch=8, micro_batch=1)


def moe(latent=None, **kw):
    base = dict(n_layers=2, d_model=256, n_heads=4, vocab=1000, seq_len=128, n_experts=4, top_k=2, biases=False,
                mlp="gelu", ffn_hidden=512, moe_latent_size=latent)
    return Model(**{**base, **kw})


@settings(max_examples=10, deadline=None)
@given(latent=st.sampled_from([32, 64, 128, 512]), gated=st.booleans(), experts=st.sampled_from([4, 8]),
       k=st.sampled_from([1, 2]))
def test_parameters_and_flops_by_hand(latent, gated, experts, k):
    mlp = "swiglu" if gated else "gelu"
    plain = predict(moe(None, mlp=mlp, n_experts=experts, top_k=k), PLAN, H100).raw
    lat = predict(moe(latent, mlp=mlp, n_experts=experts, top_k=k), PLAN, H100).raw
    h, f, L, g = 256, 512, 2, int(gated)
    expert = lambda w: w * f * (1 + g) + f * w          # noqa: E731  an expert w -> f (x2 gated) -> w, no biases
    d_total = L * (experts * (expert(latent) - expert(h)) + 2 * h * latent)
    d_active = L * (k * (expert(latent) - expert(h)) + 2 * h * latent)
    assert lat["params"] - plain["params"] == pytest.approx(d_total, rel=1e-12)
    assert lat["active_params"] - plain["active_params"] == pytest.approx(d_active, rel=1e-12)
    tokens = 8 * 128                                      # global batch x sequence
    # forward + backward = 3 x forward; routed experts: k copies of each token; the two projections once per token
    d_flops = 3 * L * tokens * (k * 2 * (expert(latent) - expert(h)) + 2 * 2 * h * latent)
    assert lat["flops"] - plain["flops"] == pytest.approx(d_flops, rel=1e-9)
    # the all-to-all moves l-wide tokens
    assert lat["bytes_ep_fwd"] / plain["bytes_ep_fwd"] == pytest.approx(latent / h, rel=1e-12)


def test_latent_projections_are_replicated_over_tp():
    """parallel_mode "duplicated": every TP rank holds fc1/fc2_latent_proj whole (2 h l per MoE layer), while the
    routed experts split over ep and etp (= tp): per rank the latent model adds L (E/ep (e(l) - e(h))/etp + 2 h l)."""
    h, f, L, E, lat = 256, 512, 2, 4, 64
    expert = lambda w: w * f + f * w                      # noqa: E731  gelu expert, no biases
    for tp in (1, 2):
        p = Plan(tp=tp, dp=8 // tp, ep=2, global_batch=8, micro_batch=1, sequence_parallel=tp > 1)
        d = predict(moe(lat), p, H100).raw["params_rank"] - predict(moe(None), p, H100).raw["params_rank"]
        assert d == pytest.approx(L * (E / 2 * (expert(lat) - expert(h)) / tp + 2 * h * lat), rel=1e-12)


def test_nemotron_3_super_has_its_named_sizes():
    """Nemotron 3 Super 120B-A12B: 120B parameters, 12B active (the model's name and card)."""
    r = predict(models.load("nemotron-3-super-120b-a12b"), Plan(dp=8, ep=8, global_batch=8), hardware.load("gb200")).raw
    assert 120e9 <= r["params"] < 121e9
    assert 12e9 <= r["active_params"] < 13e9


def test_validate_takes_the_latent_width_from_the_preset_and_skips_without_one():
    row = {k: None for k in V.REQUIRED}
    row.update(case_id="x", model="Nemotron 3 Super 120B-A12B", n_layers=88, d_model=4096, n_heads=32, n_kv_heads=2,
               head_dim=128, ffn_hidden=2688, mlp="squared_relu", vocab=None, seq_len=8192, global_batch=64,
               micro_batch=1, tp=1, pp=1, dp=8, ep=8, n_experts=512, top_k=22, moe_ffn_hidden=2688,
               n_shared_experts=1, shared_ffn_hidden=5376, gpu_id="gb200", measured_iter_time_s=1.0,
               attention="hybrid-mamba", gpus_per_node=72, n_gpus=8,
               attention_detail="hybrid Mamba-2/LatentMoE/GQA pattern "
                                "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME; "
                                "Mamba: 128 heads x 64 head_dim, state 128")
    case = V.build_case(row)
    assert case.model.moe_latent_size == 1024 and case.model.vocab == 131072
    with pytest.raises(V.Skip, match="moe_latent_size"):
        V.build_case({**row, "model": "Some LatentMoE 7B"})
    assert V.build_case({**row, "model": "Some LatentMoE 7B", "moe_latent_size": 512, "vocab": 32000}
                        ).model.moe_latent_size == 512


@pytest.mark.parametrize("settings, want", [
    ("recipe x | MoE flex dispatcher=hybridep | EP A2A overlap", "hybridep"),
    ("moe_flex_dispatcher_backend='deepep'", "deepep"),
    ("TP2 + sequence parallel; HybridEP flex (32 SMs); FP32 optimizer states", "hybridep"),
    ("DeepEP flex", "deepep"),
    ("MoE alltoall dispatcher", None),
])
def test_dispatcher_backend_is_read_from_each_spelling_of_the_recipes(settings, want):
    """The flex dispatcher's backend (Megatron-Core --moe-flex-dispatcher-backend) in the spellings of the NeMo
    tables' settings column; none stated: the stack's all-to-all."""
    row = {"tp": 1, "pp": 1, "dp": 8, "n_gpus": 8, "global_batch": 8, "micro_batch": 1, "n_experts": 8, "top_k": 2,
           "precision": "bf16", "optimizer_sharding": "distributed", "settings": settings}
    assert V._plan_fields(row).get("ep_dispatcher") == want
