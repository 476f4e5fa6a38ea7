"""The Muon optimizer (Jordan et al. 2024; Megatron-Core optimizer_config.py optimizer='muon', emerging_optimizers.py):
one momentum instead of Adam's two on the weight matrices, the embedding tables left on Adam, and 5 Newton-Schulz
iterations on every weight matrix each step, shared over the data-parallel ranks by the layer-wise distributed
optimizer."""
import subprocess
import sys

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from roofline import Model, Plan, hardware, models, predict
from roofline.base.errors import InputError
from roofline.model.formulas import memory as MEM
from roofline.spec import config
from roofline.views import validate as V

H = hardware.load("h100-sxm")


def test_newton_schulz_flops_of_a_square_matrix_are_jordans_t_m_over_b():
    # Jordan, "Muon: An optimizer for hidden layers" (2024), runtime analysis: the Newton-Schulz FLOPs over the
    # training FLOPs 6 m^2 B of an m x m matrix are T m / B, T = 5 iterations
    m, b = sp.symbols("m b", positive=True)
    assert sp.simplify(MEM.ns_flops(m, m) / (6 * m ** 2 * b) - 5 * m / b) == 0
    # m <= n: each iteration X X^T (2 m^2 n), the quintic's A A (2 m^3) and B X (2 m^2 n)
    assert MEM.ns_flops(1024, 4096) == 5 * (4 * 1024 ** 2 * 4096 + 2 * 1024 ** 3) == MEM.ns_flops(4096, 1024)


def test_llama_405b_overhead_is_about_jordans_half_percent():
    # the same analysis quotes ~0.5 % for Llama 405B (m = 16384, B = 16M tokens): square-matrix arithmetic; the
    # real model's rectangular fc1/fc2 (m = 16384 < n = 53248) and GQA's narrow K, V cost a little less
    model = models.load("llama3.1-405b")
    r = predict(model, Plan(tp=1, pp=1, dp=1, global_batch=2048, optimizer="muon"), H).raw
    ratio = float(r["flops_optimizer_rank"]) / (6 * float(r["params"]) * 2048 * 8192)
    assert 0.003 < ratio < 0.005


def test_muon_keeps_one_momentum_on_the_matrices_and_adams_state_on_the_embeddings():
    m = models.load("llama3-8b")
    adam, muon = (predict(m, Plan(dp=8, global_batch=64, optimizer=o), H).raw for o in ("adam", "muon"))
    params, emb = float(adam["params_rank"]), 2 * m.vocab * m.d_model    # untied input and output tables
    assert m.vocab % 128 == 0                                               # (Megatron's padding adds no rows)
    assert float(adam["mem_optimizer"]) == pytest.approx(12 * params, rel=1e-12)
    assert float(muon["mem_optimizer"]) == pytest.approx(8 * (params - emb) + 12 * emb, rel=1e-12)
    assert float(adam["flops_optimizer_rank"]) == 0
    assert muon["t_optimizer"] > adam["t_optimizer"]


@settings(max_examples=20, deadline=None)
@given(layers=st.integers(2, 8), h=st.sampled_from([1024, 2048, 4096]), dp=st.sampled_from([2, 4, 8]))
def test_the_distributed_optimizer_shares_the_iterations_over_the_data_parallel_ranks(layers, h, dp):
    model = Model(n_layers=layers, d_model=h, n_heads=h // 128, vocab=32000, seq_len=1024, mlp="swiglu")
    flops = [float(predict(model, Plan(dp=d, global_batch=2 * dp, sharding=s, optimizer="muon"), H)
                   .raw["flops_optimizer_rank"]) for d, s in ((dp, "none"), (dp, "distributed"), (1, "none"))]
    assert flops[0] == pytest.approx(flops[2], rel=1e-12)      # no sharding: every rank orthogonalizes every matrix
    assert flops[1] == pytest.approx(flops[2] / dp, rel=1e-12)  # dist_muon: a 1/dp share of whole matrices


def test_tensor_parallel_ranks_orthogonalize_whole_matrices():
    # muon_tp_mode 'duplicated' (the default): each TP rank gathers the matrix and runs the whole iteration
    model = Model(n_layers=4, d_model=4096, n_heads=32, vocab=32000, seq_len=1024, mlp="swiglu")
    f1, f4 = (float(predict(model, Plan(tp=t, dp=1, global_batch=4, optimizer="muon"), H).raw["flops_optimizer_rank"])
              for t in (1, 4))
    assert f4 == pytest.approx(f1, rel=1e-12)


def test_experts_split_over_ep_and_their_expert_data_parallel_ranks():
    moe = models.load("qwen3-30b-a3b")
    r = [float(predict(moe, Plan(dp=16, ep=e, global_batch=32, sharding="distributed", optimizer="muon"), H)
               .raw["flops_optimizer_rank"]) for e in (4, 8)]
    # per rank: E/ep experts over 16/ep expert-dp ranks (the same share), the rest over 16 dp ranks: equal
    assert r[0] == pytest.approx(r[1], rel=1e-12)
    assert r[0] > 0


def test_only_megatron_core_runs_muon_and_not_under_fsdp():
    from roofline import resolve

    m = Model(n_layers=4, d_model=1024, n_heads=16, vocab=32000, seq_len=1024, mlp="swiglu")
    assert resolve(m, dict(dp=8, global_batch=8, optimizer="muon"), H, "megatron-core").plan.optimizer == "muon"
    with pytest.raises(InputError, match="stack torchtitan trains with adam, not 'muon'"):
        resolve(m, dict(dp=8, global_batch=8, optimizer="muon"), H, "torchtitan")
    with pytest.raises(InputError, match="Muon with the .layer-wise. distributed optimizer or none, not sharding 'fsdp'"):
        resolve(m, dict(dp=8, global_batch=8, optimizer="muon", sharding="fsdp"), H, "megatron-core")
    with pytest.raises(InputError, match="optimizer"):
        config.check(m, Plan(optimizer="lion"))


@pytest.mark.parametrize("row, want", [
    ({"notes": "Muon optimizer was used for pre-training Kimi-K2."}, "muon"),
    ({"settings": "optimizer='dist_muon'"}, "muon"),
    ({"optimizer": "AdamW"}, "adam"),
    ({"optimizer": "LAMB"}, "adam"),
    ({"optimizer": "adam", "notes": "compared with Muon"}, "adam"),
    ({"settings": "no muon"}, None),
    ({"settings": "HybridEP flex"}, None)])
def test_validate_reads_the_optimizer(row, want):
    base = {"tp": 1, "pp": 1, "dp": 8, "n_gpus": 8, "global_batch": 8, "micro_batch": 1, "precision": "bf16",
            "optimizer_sharding": "distributed"}
    assert V._plan_fields({**base, **row}).get("optimizer") == want


def test_cli_prices_muon_and_refuses_an_unknown_optimizer():
    run = lambda *a: subprocess.run([sys.executable, "-m", "roofline", "transformer", "--model", "llama3-8b",  # noqa: E731
                                     "--gpus", "8", "--global-batch", "8", *a], capture_output=True, text=True)
    ok = run("--optimizer", "muon")
    assert ok.returncode == 0 and "| optimizer muon |" in ok.stdout.splitlines()[1]    # the plan line says so
    assert "| optimizer" not in run().stdout                                          # Adam, the default, does not
    bad = run("--optimizer", "lion")
    assert bad.returncode == 2 and "--optimizer" in bad.stderr and "lion" in bad.stderr
