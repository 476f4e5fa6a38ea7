"""The closed-form pipeline time against the replayed schedule, with unequal stages.

The step time's pipeline term passes each stage once in the fill and drain and the slowest stage m - 1 more times
(Zheng et al. 2022, Alpa, eq. 2; formulas/pipeline.py bubble_time). ``views/timeline.replay`` runs Megatron's order
of GPipe / 1F1B / interleaved 1F1B slot by slot with each stage's own forward and backward times (the first stage with
the embedding, the last with the LM head). This prints how far the closed form is from that replay over small GPT
models (where the LM head is a large share of a stage), and how far the textbook count (every one of the
(m + (p-1)/v) slots at the slowest stage's time) was. docs/timeline.md quotes the figures (tests/test_timeline.py
keeps them current).

    python benchmarks/pipeline_replay.py
"""
from __future__ import annotations

import statistics

from roofline.base.errors import InputError
from roofline.model.predict import predict
from roofline.spec import hardware
from roofline.spec.config import Model, Plan
from roofline.views import timeline

SHAPES = [(24, 1024, 50257), (12, 2048, 50257), (32, 4096, 50257), (48, 2048, 128256)]   # (layers, d_model, vocab)
PIPES = [(2, 1), (4, 1), (4, 2), (8, 1)]                                                   # (pp, interleave)
MICRO_BATCHES = [1, 2, 4, 8, 32]


def errors(gpu: str = "a100-sxm4-80gb") -> tuple[list[float], list[float]]:
    """(closed form / replay - 1, textbook / replay - 1) for every plan of the grid."""
    hw = hardware.load(gpu)
    ours, textbook = [], []
    for layers, h, vocab in SHAPES:
        model = Model(n_layers=layers, d_model=h, n_heads=16, vocab=vocab, seq_len=1024)
        for p, v in PIPES:
            if layers % (p * v):
                continue
            for m in MICRO_BATCHES:
                plan = Plan(pp=p, dp=1, micro_batch=4, global_batch=4 * m, interleave=v,
                            schedule="interleaved" if v > 1 else "1f1b")
                try:
                    pred = predict(model, plan, hw)
                except InputError:          # interleaving needs m divisible by pp
                    continue
                r = pred.raw
                _, makespan = timeline.events(pred)
                old = r["step_time"] - r["t_pp_bubble"] + (p - 1) / v * r["t_microbatch_stage"]
                ours.append(r["step_time"] / makespan - 1)
                textbook.append(old / makespan - 1)
    return ours, textbook


def summary() -> dict:
    ours, textbook = errors()
    return {"plans": len(ours),
            "mean": 100 * statistics.mean(abs(e) for e in ours), "max": 100 * max(abs(e) for e in ours),
            "textbook_mean": 100 * statistics.mean(abs(e) for e in textbook),
            "textbook_max": 100 * max(abs(e) for e in textbook)}


def main() -> None:
    s = summary()
    print(f"{s['plans']} plans (pp 2-8, 1-32 micro-batches, small GPT models on a100-sxm4-80gb):")
    print(f"  closed form (Alpa eq. 2) vs replay: mean |error| {s['mean']:.1f} %, max {s['max']:.1f} %")
    print(f"  textbook (m + (p-1)/v) t_mb vs replay: mean |error| {s['textbook_mean']:.0f} %, "
          f"max {s['textbook_max']:.0f} %")


if __name__ == "__main__":
    main()
