"""Best plans found by the search vs the plans the published training runs used.

    python benchmarks/search_published.py          # prints the markdown tables of docs/search.md

Every row uses the same training stack, megatron-core (roofline/spec/stacks/megatron-core.yaml: bf16,
flash attention, overlapped gradient reduce and parameter gather; its shardings none, distributed
optimizer, Megatron-FSDP without PP), applied to the model and the plan as the resolver applies it, so
the rows differ by plan only, not by software. Each published plan is predicted twice: as published
(the knobs the paper states, the rest as noted; priced as stated even where the stack would not run it),
and "completed" (the published tp/pp/cp pinned, the other knobs searched). The gap is
(their time - our best) / our best. docs/search.md quotes the output (python -m roofline.face.docs_examples).
A case may set stack knobs every one of its rows shares (precision, MoE dispatcher, EP overlap, uneven stages).
"""
import dataclasses
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from roofline import predict  # noqa: E402
from roofline.base.units import HOUR, GiB  # noqa: E402
from roofline.spec import hardware, models  # noqa: E402
from roofline.views.search import _plan_text, default_base, default_model, domain_note, evaluate_space, rank  # noqa: E402

FRAMEWORK = "megatron-core"

CASES = [
    # (title, model, gpu, gpus, batch, published plan fields, what the paper states[, knobs every row shares,
    #  the measured step time the paper gives or implies (s) and how])
    ("GPT-3 175B, 1024 x A100-80GB, batch 1536 x 2048", models.load("gpt3-175b"), "a100-sxm4-80gb", 1024, 1536,
     dict(tp=8, pp=8, dp=16, micro_batch=1, recompute="full", sharding="none", sequence_parallel=False),
     "Narayanan et al. 2021 (SC21), Table 1 / Sec. 5.1: tp 8, pp 8 (dp 16 on 1024 GPUs), batch 1536; "
     "micro-batch 1 and full recomputation as in the paper's runs; no SP or distributed optimizer (2021)"),
    ("LLaMA-3.1 405B, 16384 x H100, batch 2048 x 8192 (16M tokens)",
     dataclasses.replace(models.load("llama3.1-405b"), n_layers=128, name="LLaMA-3.1 405B (128-layer proxy)"),
     "h100-sxm", 16384, 2048,
     dict(tp=8, pp=16, dp=128, cp=1, micro_batch=1, recompute="none", sharding="zero2", sequence_parallel=True),
     "Llama Team 2024, Table 4: TP 8, CP 1, PP 16, DP 128, 16M tokens/batch; micro-batch 1, FSDP without "
     "resharding after forward (~ZeRO-2), SP on; 126 layers with 1 layer less on the first and last stage, "
     "modelled as a 128-layer proxy (the search needs pp x v | layers); the report does not give the virtual stage count, so the published row is priced without interleaving (v 1)"),
    ("DeepSeek-V3, 2048 x H800, batch 15360 x 4096 (63M tokens)", models.load("deepseek-v3"), "h800", 2048, 15360,
     dict(tp=1, pp=16, dp=128, ep=64, cp=1, micro_batch=1, recompute="selective",
          recompute_modules="layernorm,mla_up_proj", sharding="distributed", pipeline_layout="Et*4|(t*4|)*14tmL"),
     "DeepSeek-AI 2024 (arXiv:2412.19437) sec 3.2: PP 16 (DualPipe), EP 64 over 8 nodes, ZeRO-1 DP, no TP; "
     "FP8 on 1x128 / 128x128 tiles (fp8-block); batch 15360 x 4096 after the warm-up (sec 4.2). Every row, the "
     "search's too, runs their FP8 recipe, DeepEP's dispatch, deduplicated per destination rank and node and in FP8 "
     "(sec 3.3.2: the combine in BF16), with the all-to-all hidden behind "
     "the other micro-batch (dispatcher deepep, fp8-dispatch, overlap-ep 1), keeps AdamW's moments in BF16 (sec 3.3.3; "
     "moment-dtype bf16) and may split stages unevenly. The published row is priced as 1F1B on Megatron-Bridge's "
     "16-stage layout of DeepSeek-V3, the row after it as DualPipe (the hai-llm stack's schedule) on DeepSeek's "
     "split: four MoE layers on each of the 14 middle stages and the other 5 with the edges, 3 and 2 (DualPipe's "
     "balanced split, spec/layout.py dualpipe_balanced). Not modelled: their FP8 "
     "caching of the activations beyond the GEMM inputs (those are saved quantized, as Transformer Engine does); "
     "their recomputation of only RMSNorm and the MLA up-projections (sec 3.2.3) is priced "
     "as Megatron-Core's selective modules layernorm and mla_up_proj; the micro-batch is not stated (1 assumed)",
     dict(dtype="fp8-block", ep_dispatcher="deepep", fp8_dispatch=True, overlap_ep=1.0, moment_dtype="bf16",
          uneven_stages=True),
     # tokens per step / (tokens per GPU-second = 1e12 tokens / 180e3 GPU-hours) / GPUs
     (15360 * 4096 / (1e12 / (180e3 * HOUR)) / 2048,
      "the report's 180K H800 GPU-hours per trillion tokens (sec 1, Table 1), as a step of 15360 x 4096"),
     # the published plan under its own schedule, DualPipe (priced with predict directly, on the plan above)
     [("published plan as DualPipe, DeepSeek's split", dict(schedule="dualpipe", pipeline_layout=None))]),
]


def row(label, c_or_pred, best_t, n):
    if hasattr(c_or_pred, "plan") and hasattr(c_or_pred, "step_time_s"):
        plan, t, mem, mfu = c_or_pred.plan, c_or_pred.step_time_s, c_or_pred.memory_bytes, c_or_pred.mfu
    else:
        p = c_or_pred
        plan, t, mem, mfu = p.plan, p.step_time.to("s").magnitude, p.memory["total"].to("B").magnitude, p.mfu
    gap = "best" if abs(t - best_t) < 1e-12 * t else f"{100 * (t / best_t - 1):+.1f} %"
    return f"| {label} | `{_plan_text(plan)}` | {t:.3f} s | {mem / GiB:.1f} GiB | {100 * mfu:.1f} % | {gap} |"


def main() -> None:
    for title, m, gpu, n, batch, pub, note, *extra in CASES:
        shared, measured, variants = (extra + [{}, None, []])[:3]
        hw = hardware.load(gpu)
        m = default_model(m, FRAMEWORK)
        base = dataclasses.replace(default_base(FRAMEWORK), **shared)
        space = evaluate_space(m, hw, n, batch, base=base, framework=FRAMEWORK)
        best = rank(space, top=1)[0]
        print(f"### {title}\n")
        print(f"{space.enumerated:,} knob combinations, {space.valid:,} valid, {space.n_fit:,} fit. "
              f"Published: {note}.\n")
        print("| plan | knobs | step time | memory/GPU | MFU | gap vs best |\n|---|---|---|---|---|---|")
        t = best.step_time_s
        print(row("search: best", best, t, n))
        theirs = dataclasses.replace(base, global_batch=batch, **pub)
        pred = predict(m, theirs, hw)
        print(row("published plan" + ("" if pred.fits_in_memory else " (does NOT fit)"), pred, t, n))
        for label, change in variants:
            alt = predict(m, dataclasses.replace(theirs, **change), hw)
            print(row(label + ("" if alt.fits_in_memory else " (does NOT fit)"), alt, t, n))
        if measured:
            s, how = measured
            mfu = pred.mfu * pred.step_time.to("s").magnitude / s        # the same FLOPs over the measured time
            print(f"| published run, measured: {how} | | {s:.3f} s | | {100 * mfu:.1f} % | {100 * (s / t - 1):+.1f} % |")
        comp = rank(evaluate_space(m, hw, n, batch, base=base, framework=FRAMEWORK, tp=pub["tp"], pp=pub["pp"],
                                   cp=pub.get("cp", 1)), top=1)[0]
        print(row("published tp/pp/cp, other knobs searched", comp, t, n))
        if "proxy" in m.name:
            real = default_model(models.load("llama3.1-405b"), FRAMEWORK)
            real_space = evaluate_space(real, hw, n, batch, framework=FRAMEWORK)
            r = rank(real_space, top=1)[0]
            print(row("search on the real 126 layers (pp x v must divide 126)", r, t, n))
            dom = domain_note(real_space, [r])
            if dom is not None and dom.inside is not None:
                print(row(f"the same, TP inside one NVLink domain ({dom.domain} GPUs)", dom.inside, t, n))
            if dom is not None:
                print(f"\nWhy the search of the real 126 layers leaves the NVLink domain (the search prints this line "
                      f"under its table):\n\n> {dom.line()}")
        print()


if __name__ == "__main__":
    main()
