"""Does the model order parallel layouts as measured runs do? Megatron-Bridge's own layout comparison, which no
validation file holds (skills/nemo-mbridge-perf-memory-tuning/SKILL.md "Strategy comparison" in
NVIDIA-NeMo/Megatron-Bridge, commit 067f987df, Apache-2.0): Llama 3 70B SFT on 32 H100 80GB, FP8 current scaling,
sequence 4096, micro-batch 1, global batch 32, interleave 5, three TP x PP x DP layouts, throughput in model
TFLOP/s per GPU and peak memory as the study reports them. Its recompute setting is `core_attn` (the study's
baseline, skills/nemo-mbridge-perf-activation-recompute), which frees nothing under fused attention: priced as
none. The study does not state its sequence packing, nor its gradient and optimizer-state dtypes; the model prices
full 4096-token sequences and Megatron-Core's defaults (fp32 gradients and Adam state), so compare its memory with
care.

    python benchmarks/layouts_mbridge.py
"""
from __future__ import annotations

from roofline import hardware, models, resolve
from roofline.model.predict import evaluate, inputs

GIB = 2 ** 30
# (tp, pp, dp) -> (model TFLOP/s per GPU, peak memory GB as reported)
RUNS = {(4, 4, 2): (704.0, 58.8), (4, 8, 1): (668.0, 53.2), (8, 4, 1): (508.7, 50.2)}


def predicted() -> dict:
    """(tp, pp, dp) -> (step time s, model TFLOP/s per GPU, tensors' peak memory bytes)."""
    model, hw = models.load("llama3-70b"), hardware.load("h100-sxm")
    out = {}
    for tp, pp, dp in RUNS:
        plan = dict(tp=tp, pp=pp, dp=dp, interleave=5, micro_batch=1, global_batch=32, sequence_parallel=True,
                    sharding="distributed", dtype="fp8-cs")
        s = resolve(model, plan, hw, "megatron-core", model_fields={"seq_len": 4096})
        o = evaluate(inputs(s.model, s.plan, s.hardware))
        t = float(o["step_time"])
        out[tp, pp, dp] = (t, float(o["flops"]) / (t * tp * pp * dp) / 1e12, float(o["memory"]))
    return out


def main() -> None:
    pred = predicted()
    first = next(iter(RUNS))
    print("Llama 3 70B, 32 x H100, FP8-CS, sequence 4096, global batch 32, interleave 5\n")
    print("| layout | TFLOP/s/GPU, measured | predicted | error | slower than tp 4 pp 4: measured | predicted "
          "| peak memory, reported | predicted |")
    print("|---|---|---|---|---|---|---|---|")
    for k, (tf, gb) in RUNS.items():
        t, ptf, mem = pred[k]
        print(f"| tp {k[0]} pp {k[1]} dp {k[2]} | {tf:.0f} | {ptf:.0f} | {100 * (ptf / tf - 1):+.1f} % "
              f"| {100 * (RUNS[first][0] / tf - 1):+.1f} % | {100 * (t / pred[first][0] - 1):+.1f} % "
              f"| {gb} GB | {mem / GIB:.1f} GiB |")
    order = lambda d: sorted(d, key=d.get)  # noqa: E731
    same = order({k: -v[0] for k, v in RUNS.items()}) == order({k: v[0] for k, v in pred.items()})
    print(f"\nfastest to slowest, the same order as measured: {'yes' if same else 'no'}")


if __name__ == "__main__":
    main()
