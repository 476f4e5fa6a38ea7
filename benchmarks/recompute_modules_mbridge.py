"""Selective recomputation by module (docs/models.md "Activation recomputation") against Megatron-Bridge's own matched
studies, which no validation file holds: skills/nemo-mbridge-perf-activation-recompute/SKILL.md in
NVIDIA-NeMo/Megatron-Bridge (commit 067f987df, Apache-2.0; Bridge 600d069b, Megatron-Core 24bad8e6, 2026-08-12).
Each study changed only `recompute_modules`.

1. Moonlight 16B (27 layers: 1 dense + 26 MLA + MoE), BF16, 8 H100, sequence 4096, micro-batch 1, global batch 4,
   TP 2 (sequence parallel, the recipe's default), PP 1, EP 8: peak allocated memory and step time per module set.
   The architecture is Megatron-Bridge's Moonlight recipe's (recipes/moonlight: MLA kv_lora_rank 512, no q_lora,
   64 experts top-6 of width 1408, two shared experts of 2816, vocab 163840, untied).
2. Nemotron 3 Nano (preset nemotron-3-nano-30b-a3b), BF16, 16 H100, sequence 8192, micro-batch 1, global batch 16,
   TP 1, PP 1, EP 8, HybridEP: which module sets ran out of memory on 80 GB and which completed.

Nothing is fitted to these numbers.

    python benchmarks/recompute_modules_mbridge.py
"""
from __future__ import annotations

from roofline import hardware, models, resolve
from roofline.model.predict import evaluate, inputs
from roofline.spec.config import Model

GIB = 2 ** 30
H100 = hardware.load("h100-sxm")
MOONLIGHT = Model(name="Moonlight-16B-A3B", n_layers=27, d_model=2048, n_heads=16, ffn_hidden=11264, mlp="swiglu",
                  norm="rmsnorm", vocab=163840, seq_len=4096, tied_embeddings=False, position="rope", biases=False,
                  dropout=False, n_experts=64, top_k=6, moe_ffn_hidden=1408, n_shared_experts=2,
                  shared_ffn_hidden=2816, first_dense_layers=1, kv_lora_rank=512, qk_nope_head_dim=128,
                  qk_rope_head_dim=64, v_head_dim=128)
# module set -> (peak allocated GB as the study reports it, step time ms)
MOONLIGHT_RUNS = {"": (36.618, 457.18), "core_attn": (36.614, 474.80), "mla_up_proj": (35.902, 480.89),
                  "mla_up_proj,mlp": (35.917, 496.73), "moe_act": (35.941, 466.26),
                  "layernorm,moe_act": (35.949, 506.53)}
# module set -> (completed, the study's words)
NANO_RUNS = {"": (False, "OOM after iteration 1"), "core_attn": (False, "OOM in iteration 1"),
             "moe_act": (False, "OOM after iteration 1"), "layernorm,moe_act": (False, "OOM in iteration 1"),
             "moe": (True, "completed 12 steps, 64.653 GB"), "moe,layernorm": (True, "completed 12 steps, 63.639 GB")}


def price(model, plan: dict, modules: str, **fields):
    """(the predicted tensors' peak, that plus the reserve, step time) of a plan with these recompute modules."""
    p = dict(plan, **({"recompute": "selective", "recompute_modules": modules} if modules else {}))
    s = resolve(model, p, H100, "megatron-core", model_fields=fields or None)
    o = evaluate(inputs(s.model, s.plan, s.hardware))
    return float(o["memory"]), float(o["memory"] + o["mem_reserve"]), float(o["step_time"])


def moonlight() -> list[tuple[str, float, float, float, float]]:
    """Per module set: (modules, predicted and measured memory change vs none, predicted and measured time change)."""
    plan = dict(tp=2, pp=1, dp=4, ep=8, micro_batch=1, global_batch=4, sequence_parallel=True,
                sharding="distributed")
    pred = {k: price(MOONLIGHT, plan, k) for k in MOONLIGHT_RUNS}
    m0, _, t0 = pred[""]
    gb0, ms0 = MOONLIGHT_RUNS[""]
    return [(k, pred[k][0] / m0 - 1, gb / gb0 - 1, pred[k][2] / t0 - 1, ms / ms0 - 1)
            for k, (gb, ms) in MOONLIGHT_RUNS.items()]


def nano() -> list[tuple[str, float, bool, bool, str]]:
    """Per module set: (modules, predicted memory with the reserve, predicted fit, measured completion, words)."""
    plan = dict(tp=1, pp=1, dp=16, ep=8, micro_batch=1, global_batch=16, sharding="distributed",
                ep_dispatcher="hybridep")
    model = models.load("nemotron-3-nano-30b-a3b")
    out = []
    for k, (done, words) in NANO_RUNS.items():
        _, total, _ = price(model, plan, k, seq_len=8192)
        out.append((k, total, total <= H100.hbm_capacity, done, words))
    return out


def main() -> None:
    print("Moonlight 16B, 8 x H100, TP 2 EP 8, one micro-batch of 4096: change against no recomputation\n")
    print("| recompute modules | peak memory, predicted | peak memory, measured | step time, predicted | step time, measured |")
    print("|---|---|---|---|---|")
    for k, pm, mm, pt, mt in moonlight():
        print(f"| {k or '(none)'} | {100 * pm:+.2f} % | {100 * mm:+.2f} % | {100 * pt:+.2f} % | {100 * mt:+.2f} % |")
    mem, _, t = price(MOONLIGHT, dict(tp=2, pp=1, dp=4, ep=8, micro_batch=1, global_batch=4, sequence_parallel=True,
                                      sharding="distributed"), "")
    print(f"\nwithout recomputation: peak {mem / GIB:.1f} GiB predicted, {MOONLIGHT_RUNS[''][0]} GB reported (unit as "
          f"the study prints it); step {1e3 * t:.0f} ms predicted, {MOONLIGHT_RUNS[''][1]:.0f} ms measured")
    print(f"\nNemotron 3 Nano, 16 x H100, EP 8, one micro-batch of 8192: fits in {H100.hbm_capacity / GIB:.0f} GiB?\n")
    print("| recompute modules | predicted (tensors + reserve) | predicted | measured |")
    print("|---|---|---|---|")
    rows = nano()
    for k, total, fits, done, words in rows:
        print(f"| {k or '(none)'} | {total / GIB:.1f} GiB | {'fits' if fits else 'out of memory'} | {words} |")
    print(f"\nfit verdicts matching the runs: {sum(f == d for _, _, f, d, _ in rows)} of {len(rows)}")


if __name__ == "__main__":
    main()
