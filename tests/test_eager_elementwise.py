"""Eager elementwise kernels (plan eager_elementwise, symbol eager_elem): RMSNorm, SwiGLU and RoPE run as separate
eager PyTorch ops in torchtitan without torch.compile and in Hugging Face models under FSDP / DeepSpeed. Their extra
HBM traffic is counted from the ops' decomposition (formulas/compute.py EAGER_*); LayerNorm and GELU stay one
kernel each."""
import csv

import pytest
import sympy as sp

from roofline.model.formulas import compute as C
from roofline.model.formulas import symbols as S
from roofline.model.predict import predict
from roofline.spec import hardware, stacks
from roofline.spec.config import Model, Plan
from roofline.views import validate as V

H100 = hardware.load("h100-sxm")
LLAMA = Model(n_layers=4, d_model=4096, n_heads=32, n_kv_heads=8, ffn_hidden=14336, vocab=128256, seq_len=4096,
              mlp="swiglu", norm="rmsnorm", position="rope")
GPT = Model(n_layers=4, d_model=4096, n_heads=32, vocab=50257, seq_len=2048, mlp="gelu", norm="layernorm",
            position="learned")


def _op(name, eager, subs=None):
    ops = {o.name: o for o in C.layer_ops(C.d_head, S.ffn_hidden, sp.Integer(0), variants=True)}
    vals = {S.eager_elem: eager, S.eager_rope: eager, S.rms: 1, S.gated: 1, S.learned_pos: 0, S.rope_pos: 1, S.kv_lora: 0, **(subs or {})}
    o = ops[name]
    return [sp.simplify(x.xreplace(vals)) for x in (o.b_fwd, o.b_bwd)]


def test_eager_rmsnorm_moves_the_composite_ops_bytes():
    """torch's rms_norm composite: upcast, pow, mean, multiply, cast back, weight: r10 w8 16-bit units per element
    forward (a fused kernel r1 w1); the backward r16 w10 (fused r2 w1)."""
    fused, eager = _op("norm_attn", 0), _op("norm_attn", 1)
    per = S.act_bytes * C.tok_sp * S.d_model
    assert sp.simplify(fused[0] - 2 * per) == 0 and sp.simplify(eager[0] - 18 * per) == 0
    assert sp.simplify(fused[1] - 3 * per) == 0 and sp.simplify(eager[1] - 26 * per) == 0
    # LayerNorm: one kernel in eager PyTorch too (F.layer_norm): nothing changes
    assert _op("norm_attn", 1, {S.rms: 0}) == _op("norm_attn", 0, {S.rms: 0})


def test_eager_swiglu_and_rope():
    fused, eager = _op("mlp_activation", 0), _op("mlp_activation", 1)
    assert sp.simplify(eager[0] / fused[0] - sp.Rational(5, 3)) == 0        # r3 w2 against r2 w1
    assert sp.simplify(eager[1] / fused[1] - sp.Rational(8, 5)) == 0        # r5 w3 against r3 w2
    elems = C.tokens * (S.n_heads + S.kv_heads) * C.d_head / S.tp
    fused, eager = _op("rope", 0), _op("rope", 1)
    for direction in (0, 1):                                               # forward, backward
        assert sp.simplify(fused[direction] - 2 * S.act_bytes * elems) == 0   # a fused kernel: r1 w1
        assert sp.simplify(eager[direction] - 10 * S.act_bytes * elems) == 0  # eager: r5 w5
    assert _op("rope", 1, {S.learned_pos: 1, S.rope_pos: 0}) == [0, 0]     # a learned table: nothing
    assert _op("rope", 1, {S.rope_pos: 0}) == [0, 0]              # ALiBi (MPT, BLOOM): no rotation either
    assert _op("rope", 1, {S.kv_lora: 512}) == [0, 0]              # MLA: its own fused RoPE (mla_rope_qkv)


def test_eager_rope_alone_leaves_the_norms_and_the_activation_fused():
    """plan eager_rope (NeMo AutoModel's own MoE models of 2025): RoPE through torch ops, RMSNorm and SwiGLU fused; None
    follows eager_elementwise."""
    from roofline.model.predict import plan_inputs
    plan = lambda **k: Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, **k)      # noqa: E731
    assert plan_inputs(plan(eager_elementwise=True))["eager_rope"] == 1.0
    assert plan_inputs(plan())["eager_rope"] == 0.0
    x = plan_inputs(plan(eager_rope=True))
    assert (x["eager_rope"], x["eager_elem"]) == (1.0, 0.0)
    assert _step(LLAMA, eager_rope=True) > _step(LLAMA)
    assert _step(LLAMA, eager_rope=True) < _step(LLAMA, eager_elementwise=True)
    assert _step(GPT, eager_rope=True) == pytest.approx(_step(GPT), rel=1e-12)          # learned positions: no RoPE


def _step(model, **plan):
    return predict(model, Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, **plan), H100).step_time.to("s").magnitude


def test_eager_costs_a_llama_layer_and_leaves_a_gpt3_layer_alone():
    assert _step(LLAMA, eager_elementwise=True) > _step(LLAMA) * 1.02
    assert _step(GPT, eager_elementwise=True) == pytest.approx(_step(GPT), rel=1e-12)


def test_stack_defaults_and_the_cli_flag():
    assert stacks.get("torchtitan").plan["eager_elementwise"] is True
    assert stacks.get("fsdp").plan["eager_elementwise"] is True
    assert "eager_elementwise" not in stacks.get("megatron-core").plan
    from roofline.face.cli import main
    assert main(["transformer", "--model", "llama3-8b", "--framework", "megatron-core", "--eager-elementwise",
                 "--dp", "8", "--global-batch", "8", "--micro-batch", "1"]) == 0


@pytest.mark.parametrize("notes, eager", [("FSDP, eager", True), ("FSDP + torch.compile", False),
                                          ("no torch.compile", True)])
def test_a_torchtitan_row_is_eager_unless_it_states_torch_compile(tmp_path, notes, eager):
    row = {"case_id": "r", "source": "torchtitan benchmarks", "model": "Llama 3.1 8B", "n_layers": 32,
           "d_model": 4096, "n_heads": 32, "n_kv_heads": 8, "ffn_hidden": 14336, "mlp": "swiglu", "vocab": 128256,
           "seq_len": 8192, "global_batch": 16, "micro_batch": 2, "tp": 1, "pp": 1, "dp": 8, "gpu_id": "h100-sxm",
           "n_gpus": 8, "framework": "torchtitan", "notes": notes, "measured_iter_time_s": 2.5, "tier": "A"}
    path = tmp_path / "r.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(row))
        w.writeheader()
        w.writerow(row)
    assert V.build_case(V.read(path)[0]).plan.eager_elementwise is eager


def test_the_torchtitan_figure_docs_models_quotes():
    """docs/models.md: Llama 3.1 8B on 8 H100 (the 500 W HBM2e part torchtitan benchmarked), FSDP, local batch 2 x
    8192 tokens, op-level SAC: the model prices eager 23 % slower than fused (measured: 16 %, 5,762 vs 6,667 tokens/s)."""
    from pathlib import Path
    from roofline.spec import models
    from roofline.spec.resolve import resolve
    hw = hardware.load("h100-hbm2e-96gb-500w")
    t = []
    for eager in (True, False):
        spec = resolve(models.load("llama3.1-8b"), {"tp": 1, "pp": 1, "dp": 8, "global_batch": 16, "micro_batch": 2,
                                                   "eager_elementwise": eager}, hw, "torchtitan",
                       model_fields={"seq_len": 8192})
        t.append(predict(spec.model, spec.plan, spec.hardware).step_time.to("s").magnitude)
    pct = round(100 * (t[0] / t[1] - 1))
    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text().split())
    assert f"The model prices that plan {pct} % slower eager than fused" in text
