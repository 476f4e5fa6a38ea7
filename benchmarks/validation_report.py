"""Regenerate docs/validation.md from `python -m roofline validate ... --json` on the shared validation set.

    python benchmarks/validation_report.py [--shared ../shared/validation] [--out docs/validation.md]

Runs the command on published.csv and vtrain_measured.csv and `--korthikanti-table4`, then writes the
tables, the summaries, the default rules and an error analysis (what-ifs are computed here, on copies
of the inputs, and never feed back into the model). Prints the two figures pinned in tests/test_validate.py.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from roofline.views import validate as V  # noqa: E402
from roofline.model.predict import evaluate, inputs  # noqa: E402

TERMS = ("forward", "backward", "recompute", "tp_comm", "pp_comm", "pp_bubble", "dp_comm", "optimizer")


def slowest_gpu_line() -> str:
    """The defaults bullet on the job's slowest GPU, its figures from the code (model/predict.py slowest_pace)."""
    from roofline.model.predict import slowest_pace
    from roofline.spec.hardware import _defaults
    s = _defaults()["clock_spread"]
    slower = lambda n: 100 * (1 / slowest_pace(s, n) - 1)  # noqa: E731  (% longer compute than the profile's GPU)
    return ("- **The slowest GPU** (a property of a cluster, not of a row): a job's compute runs at the sustained clock "
            "of its slowest GPU, `kappa / (1 + clock_spread z_n)` with z_n the expected maximum of n normal draws and "
            f"`clock_spread` {s} for every profile (defaults.yaml, sourced in docs/calibration.md \"The slowest GPU of "
            f"the job\"): {slower(8):.1f} % on 8 GPUs, {slower(1024):.1f} % on 1,024. Not "
            "fitted; the rows of 1,000 GPUs and more, which the model under-predicted by 10-14 % before, are those it "
            "moves most.")


def cli_json(*args) -> dict | list:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "roofline", "validate", *map(str, args), "--json"], capture_output=True,
                       text=True, env=env, cwd=ROOT, check=True)
    return json.loads(p.stdout)


def pct(x, signed=False) -> str:
    return "-" if x is None else (f"{100 * x:+.1f} %" if signed else f"{100 * x:.1f} %")


def stats_table(groups: dict, title: str) -> list[str]:
    out = [f"| {title} | n | MAPE | median abs | max abs | mean signed |", "|---|---:|---:|---:|---:|---:|"]
    for k, s in groups.items():
        out.append(f"| {k} | {s['n']} | {pct(s['mape'])} | {pct(s['median_abs_error'])} | {pct(s['max_abs_error'])}"
                   f" | {pct(s['mean_error'], True)} |")
    return out


def overall(r: dict) -> dict:
    e = [c["error"] for c in r["cases"]]
    return {"all": {"n": len(e), "mape": r["mape"], "median_abs_error": r["median_abs_error"],
                    "max_abs_error": r["max_abs_error"], "mean_error": float(np.mean(e))}}


def case_table(r: dict) -> list[str]:
    out = ["| case | gpu_id | tp/pp/dp/cp/v/mb | measured s | predicted s | error | largest terms (share of predicted) |",
           "|---|---|---|---:|---:|---:|---|"]
    for c in r["cases"]:
        p, b = c["plan"], c["breakdown_s"]
        top = sorted(((b[k] / c["predicted_s"], k) for k in TERMS if b[k] > 0), reverse=True)[:4]
        out.append(f"| {c['case_id']} | {c['gpu_id']} | {p['tp']}/{p['pp']}/{p['dp']}/{p['cp']}/{p['v']}/{p['mb']} | "
                   f"{c['measured_s']:.4g} | {c['predicted_s']:.4g} | {pct(c['error'], True)} | "
                   + ", ".join(f"{k} {100 * s:.0f}%" for s, k in top) + " |")
    return out


def what_if(rows: list[dict], change, cases=None) -> dict:
    """case_id -> error when ``change(case)`` (a modified Case or an inputs dict edit) replaces the defaults."""
    out = {}
    for row in rows:
        try:
            c = V.build_case(row)
        except V.Skip:
            continue
        if cases and row["case_id"] not in cases:
            continue
        c2 = change(c)
        x = c2 if isinstance(c2, dict) else inputs(c2.model, c2.plan, c2.hw)
        out[row["case_id"]] = float(evaluate(x)["step_time"]) / c.measured - 1
    return out


def mape(errors) -> float:
    return float(np.mean(np.abs(list(errors)))) if errors else float("nan")


def layer_slots(c: dict, n_layers: int) -> float:
    p = c["plan"]
    m = p["gb"] / (p["mb"] * p["dp"])
    return (m + p["pp"] - 1) * n_layers / p["pp"]


def memory_summary(r: dict) -> str:
    """The one summary line of peak memory per GPU from ``validate --json`` on memory_measured.csv (docs/validation.md;
    tests/test_memory_torchtitan.py checks it is current)."""
    m = r["memory"]
    # rows that repeat one measurement (the same run at several gradient-accumulation counts: the same measured and
    # predicted peak) counted once
    once = {(round(c["measured_memory_bytes"]), round(c["compared_memory_bytes"])): c["memory_error"]
            for c in r["cases"] if "memory_error" in c}
    return (f"- memory_measured.csv, peak memory per GPU: **MAPE {pct(m['mape'])}**, median {pct(m['median_abs_error'])}, "
            f"max {pct(m['max_abs_error'])}, mean signed {pct(m['mean_error'], True)} over {m['n']} rows; "
            f"**MAPE {pct(mape(list(once.values())))}** over the {len(once)} independent measurements (goal: MAPE <= 10 %).")


def memory_section(csv) -> list[str]:
    r = cli_json(csv)
    cases = [c for c in r["cases"] if "memory_error" in c]
    groups = defaultdict(list)
    for c in cases:
        groups[f"{c['framework']}, {c['memory_measure']}"].append(c["memory_error"])
    worst = sorted(cases, key=lambda c: -abs(c["memory_error"]))[:8]
    L = ["## Peak memory per GPU", "",
         "`python -m roofline validate --dataset memory` compares the predicted peak of the heavier pipeline stage "
         "with the measured one. A row measured as *allocated* (torch.cuda.max_memory_allocated, Megatron's "
         "report_memory) is compared with `memory`; one measured as *reserved* (the caching allocator's reserved "
         "peak, torchtitan's `memory` metric) with `memory` + `mem_fragmentation`. Neither holds the CUDA context or "
         "NCCL's buffers. The row's notes say which (`validate.memory_measure`).", "",
         memory_summary(r), "",
         "| stack, measure | n | MAPE | max abs | mean signed |", "|---|---:|---:|---:|---:|"]
    for k, e in sorted(groups.items()):
        L.append(f"| {k} | {len(e)} | {pct(mape(e))} | {pct(max(abs(x) for x in e))} | {pct(float(np.mean(e)), True)} |")
    L += ["", "Largest errors:", "", "| case | recompute | sharding | predicted GiB | measured GiB | error |",
          "|---|---|---|---:|---:|---:|"]
    for c in worst:
        L.append(f"| {c['case_id']} | {c['plan']['recompute']} | {c['plan']['sharding']} | "
                 f"{c['compared_memory_bytes'] / 2**30:.1f} | {c['measured_memory_bytes'] / 2**30:.1f} | "
                 f"{pct(c['memory_error'], True)} |")
    return L + [""]


def stage_summary(r: dict) -> str:
    """The summary line of peak memory per pipeline stage from ``validate --json`` on a per-rank file
    (roofline/views/memory_ranks.py; tests/test_memory_ranks.py checks it is current)."""
    a, f, l = r["summary"]["all"], r["summary"]["first"], r["summary"]["last"]
    return (f"- memory_per_rank_simumax_b200.csv, peak memory per pipeline stage: **MAPE {pct(a['allocated_mape'])}** "
            f"over {a['n']} stages (mean signed {pct(a['allocated_signed'], True)}, max {pct(a['allocated_max'])}); "
            f"first stages of pp = 2 runs {pct(f['allocated_mape'])} (mean signed {pct(f['allocated_signed'], True)}), "
            f"last stages {pct(l['allocated_mape'])} (mean signed {pct(l['allocated_signed'], True)}).")


TABLE_SETS = (("llm-foundry", "llmfoundry_"), ("NeMo 25.x", "nemo25"), ("NeMo 24.07", "nemo2407_"), ("NeMo AutoModel", "automodel_"),
              ("torchtitan async TP", "tt_asynctp_"), ("DGXC benchmarking", "dgxc_"), ("OLMo-core", "olmocore_"),
              ("torchtitan performance page", "tt_perf_"), ("fms-fsdp", "fms_fsdp_"),
              ("torchtitan end-2024 benchmark", "tt_h100_2412_"), ("torchtitan H200 (Trainy)", "tt_h200_2506_"),
              ("torchao float8 / MX", "ao_"),
              ("Megatron-LM Llama 3 FP8 example", "mlm_"),
              ("MT-NLG 530B paper", "mtnlg_"),
              ("Colossal-AI README", "colossalai_"),
              ("InternLM training performance", "internlm_"),
              ("DeepSeek-V3 report", "deepseek_v3_"),
              ("Pax (JAX-Toolbox) README", "pax_"))
# (label, case_id prefix)


def tables_summary(r: dict) -> str:
    """The one summary line of public_tables.csv from ``validate --json`` (docs/validation.md; tests/test_public_tables.py
    checks it is current)."""
    parts = []
    for label, prefix in TABLE_SETS:
        errs = [c["error"] for c in r["cases"] if c["case_id"].startswith(prefix)]
        if errs:
            parts.append(f"{label} {pct(mape(errs))} over {len(errs)}")
    return (f"- public_tables.csv: **MAPE {pct(r['mape'])}** over {len(r['cases'])} rows, {len(r['skipped'])} skipped "
            f"({'; '.join(parts)}).")


def titan_cp_note(r: dict) -> list[str]:
    """What the torchtitan end-2024 rows show (their errors read from ``r``): context parallelism over 4-8 ranks, and
    the pipeline rows' micro-batch default."""
    err = {c["case_id"]: c["error"] for c in r["cases"] if c["case_id"].startswith("tt_h100_2412_t")}
    if not err:
        return []
    by_cp = {n: [e for k, e in err.items() if f"_cp{n}_" in k] for n in (1, 2, 4, 8)}
    pp = [e for k, e in err.items() if "_pp8_" in k and "_cp" not in k]
    rng = lambda es: f"{pct(min(es), True)} to {pct(max(es), True)}"        # noqa: E731
    cps = "; ".join(f"cp {n}: {rng(es)}" for n, es in by_cp.items() if es)
    return [f"On torchtitan's end-2024 benchmark the context-parallel rows ({cps}) fall further below their "
            "measurement as CP grows: the model prices ring attention as its attention compute with the K/V exchange "
            "hidden behind it, and what PyTorch's ring attention of that date adds per rank is not modelled. Its two "
            f"pipeline rows ({rng(pp)}) are priced with the local batch split into pp micro-batches, torchtitan's "
            "default before 2025-04 (stack torchtitan-2024); the 1F1B / interleaved ratio then follows the bubble.", ""]


def ao_note(r: dict, csv) -> list[str]:
    """What torchao's float8 / MX e2e rows show (read from ``r``; the H100 rows also re-priced on the Grand Teton
    profile): the error per GPU, and each recipe's speed-up over the same GPU's BF16 row, measured against predicted
    (a ratio of two rows of one table, free of the GPU's absolute calibration)."""
    cases = {c["case_id"]: c for c in r["cases"] if c["case_id"].startswith("ao_")}
    if not cases:
        return []
    gpus = {"h100": "H100", "b200": "B200", "mi300x": "MI300X"}
    recipes = {"fp8_tensorwise": "tensorwise", "mxfp8": "MXFP8", "fp8_rowwise": "rowwise"}
    errs, speed = [], []
    for g, name in gpus.items():
        own = [c["error"] for k, c in cases.items() if k.startswith(f"ao_{g}_")]
        if own:
            errs.append(f"{name} {pct(mape(own))} (mean signed {pct(float(np.mean(own)), True)})")
        base = cases.get(f"ao_{g}_8b_bf16")
        ups = []
        for key, label in recipes.items():
            c = cases.get(f"ao_{g}_8b_{key}")
            if base and c:
                ups.append(f"{label} {base['measured_s'] / c['measured_s']:.2f} / "
                           f"{base['predicted_s'] / c['predicted_s']:.2f}")
        if ups:
            speed.append(f"{name}: {', '.join(ups)}")
    from roofline.spec import hardware
    mi = hardware.load("mi300x")
    mi300x_ceiling = mi.matmul_ceiling * mi.peak("bf16") / 1e12
    from roofline.views.calibrate.cudnn_sdpa import Shape, prior_times
    # the measured shape's forward FLOPs, 4 b h s^2 d (batch 1, 16 heads, not causal; the backward counted as 2.5x),
    # the convention of flash-attention's benchmarks/benchmark_flash_attention.py that ROCm/flash-attention#142 ran
    fl = 4 * 16 * 16384 ** 2 * 128
    mi_attn = tuple(k * fl / t / 1e12 for k, t in zip((1, 2.5), prior_times(
        Shape("mi300x", "", "bfloat16", False, 1, 16384, 16, 16, 128, 128, None, 0, 0), mi)))
    rows = [dict(x, gpu_id="h100-hbm2e-96gb-500w") for x in V.read(csv) if x["case_id"].startswith("ao_h100_")]
    alt = V.validate(rows).to_dict()["cases"] if rows else []
    alt_txt = ", ".join(pct(c["error"], True) for c in alt)
    return [f"torchao's float8 / MX rows (Llama 3 8B on one node, FSDP2, torch.compile) by GPU: {'; '.join(errs)}. "
            "Their GPUs are not what the profiles price: the H100 table names no variant (priced as the 80 GB SXM5 at "
            f"700 W; on Meta's Grand Teton profile, h100-hbm2e-96gb-500w, the same rows are {alt_txt}), the B200s ran "
            "power-limited at a limit the table does not state (priced at 1000 W), and the MI300X profile is a datasheet "
            "one, never calibrated: its GEMMs and memory-bound kernels take the generic efficiencies of "
            f"hardware/defaults.yaml (GEMMs capped at mamf-finder's {mi300x_ceiling:.1f} TFLOP/s), and only its flash "
            f"attention is set from a ROCm measurement (forward {mi_attn[0]:.0f}, backward {mi_attn[1]:.0f} TFLOP/s at "
            "head dim 128, sequence 16384: ROCm/flash-attention#142, mi300x.yaml). Speed-up of each recipe over the same GPU's BF16 "
            f"row, measured / predicted: {'; '.join(speed)}. The row-wise recipe gains less than the model gives it "
            "on every GPU: its GEMMs are PyTorch's row-wise scaled kernel (CUTLASS) in forward and a tensor-wise one "
            "plus a rescaling pass in backward (pytorch/ao float8_ops.py addmm_float8_unwrapped), priced at the "
            "tensor-wise rate (base/precision.py fp8-row).", ""]


def tables_section(csv) -> list[str]:
    r = cli_json(csv)
    return ["## Public tables priced as a stranger would write them", "",
            "`python -m roofline validate --dataset tables` (the bundled `public_tables.csv`, SOURCES.md there): "
            "performance tables the model was not built on, each row written from what its table states (blank "
            "where the table is silent: an MoE row's '-' EP, an unstated recompute or year), so the rules for "
            "unstated inputs are what is judged with the model: llm-foundry's MPT benchmarks (A100/H100, FSDP), "
            "NeMo's 25.02-25.07 performance summaries and NeMo 24.07's H100 FP8 table (NVIDIA/NeMo repository), NeMo AutoModel's (FSDP2, MoE with DeepEP), torchtitan's async "
            "TP benchmark (H100 96 GB at 500 W), NVIDIA's DGX Cloud benchmarking recipes (v25.02, 128-2048 H100) and "
            "OLMo-core's throughput table (FSDP2/HSDP, torch.compile, float8; 'NVIDIA H100' with no variant named), "
            "torchtitan's performance page (64 A100, 128 H100; 'selective layer' checkpointing every other block) and "
            "fms-fsdp's 7B rows (FSDP1 HSDP, torch.compile), torchtitan's end-2024 H100 benchmark (FSDP, CP to 262k "
            "tokens, TP, 1F1B and interleaved PP, 8-512 GPUs), Trainy's torchtitan run on 32-64 H200s and torchao's "
            "float8 / MX training benchmarks (torchtitan on 8 H100, 8 power-limited B200 and 8 MI300X) and "
            "Megatron-LM's Llama 3 FP8 example (8-1024 H100, CP and interleaved PP) and the MT-NLG 530B paper's "
            "iteration times (2240-3360 A100 80GB, tp 8 x pp 35; the row that brought in the rule for a plan that "
            "cannot fit, in the input rules above) and Colossal-AI's README benchmark (Llama 2 7B on 8 H200 under "
            "ZeRO-2; Llama 2 70B on 16 B200 with TP 2 x PP 4 and ZeRO-1) and the InternLM training framework's tables "
            "(InternLM 7B on 8-1024 A100 80GB over 50 Gb/s of RoCE per GPU, its Hybrid ZeRO-1 sharded over every rank "
            "or per node, FlashAttention v1) and the DeepSeek-V3 report's training cost (2048 H800 on HAI-LLM: DualPipe, "
            "EP 64 over 8 nodes, fine-grained FP8; a tokens-per-GPU-hour average, not a timed step) and NVIDIA "
            "JAX-Toolbox's Pax README (GPT 126M / 5B / 175B on 64-256 A100 and H100, BF16 with and without Transformer "
            "Engine, TE FP8, FSDP over the data axis; Llama 2 7B fine-tuning on 16 H100; the JAX stack `paxml`; its 126M "
            "rows ran without flash attention, which the row states and the model reads).",
            "", tables_summary(r), "",
            *titan_cp_note(r),
            *ao_note(r, csv),
            *automodel_note(r), ""]


PAPER_SETS = (("big-model papers 2022-2023 (BLOOM, GLM-130B, BloombergGPT, StarCoder, Falcon)",
               ("bloom176b_", "glm130b_", "gptneox20b_", "opt175b_", "bloomberggpt", "starcoder", "falcon180b_")),
              ("model reports 2023-2025 (Llama 3 405B, Nemotron-4, Skywork, FLM-101B, Falcon, StableLM, TinyLlama, MPT, "
               "LLaMA, Baichuan 2, JetMoE, Phi)",
               ("llama3_405b_", "nemotron4_", "tinyllama_", "mpt", "llama1_", "baichuan2_", "skywork", "flm101b_",
                "falcon40b_", "falcon7b_", "stablelm_", "jetmoe_", "phi")),
              ("MegaScale and MegaScale-MoE (their Megatron-LM baselines and their own systems)", ("megascale",)),
              ("FlashAttention-1/2, FP8-LM, Zero Bubble PP and DeepSpeed-MoE papers",
               ("fa2paper_", "fp8lm_", "zb_paper_", "flashattn1_", "deepspeed_moe", "dsmoe")),
              ("Megatron-MoE model zoo (Qwen3-235B, Mixtral 8x22B)", ("mcore_modelzoo_",)),
              ("Ultra-Scale Playbook (nanotron) and SmolLM3", ("usp_", "smollm3_")),
              ("NVIDIA recipe and framework docs 2020-2025 (DGX Cloud v25.02-v25.05, NeMo launcher 24.05, Megatron-LM, "
               "NeMo long-sequence, MaxText)",
               ("dgxc2502_", "dgxc2504_", "dgxc2505_", "nemolauncher2405_", "megatronlm2020_", "mcore_dsv3_", "mcore_v08_",
                "nemo_longseq_",
                "maxtext_", "jaxtoolbox_")),
              ("PyTorch-native reports (torchtitan paper, IBM fms-fsdp blog and README, float8 FSDP2 blog, FSDP intro, "
               "AWS torchtitan)",
               ("tt_paper_", "ibm_fsdp_blog_", "fmsfsdp_", "ibmmeta_float8_", "pytorch_fsdp_intro_", "aws_torchtitan_")),
              ("GH200 four to a node on European supercomputers (OpenEuroLLM on JUPITER, Apertus on Alps)",
               ("oellm", "apertus")),
              ("framework benchmark pages (FlagPerf, XTuner, EasyContext, Megatron-LLaMA) and Olmo 3",
               ("flagperf_", "xtuner_", "easycontext_", "megatronllama_", "olmo3_")),
              ("systems papers' Megatron-LM runs (Vocabulary Parallelism baselines, Hagemann et al. layout sweeps)",
               ("vocabpar_", "hagemann_")),
              ("NVIDIA DGX Cloud v24.11, NeMo launcher 2024-03..06 and Google Cloud GPU recipes",
               ("dgxc2411_", "nemolauncher_", "gcp_")),
              ("open training code and logs (Lucie-7B, llm.c, nanoGPT, modded-nanogpt, nanochat)",
               ("lucie7b_", "llmc_", "modded_", "nanogpt_", "nanochat_")),
              ("users' issue threads and Megatron-Bridge verification cards", ("s6_",)),
              ("framework docs (Megatron-LM MoE recipes and 2021 README, DeepSpeed on Azure, Megatron-DeepSpeed)",
               ("mlmdev_", "mlm_readme2021_", "dsazure_", "dscommopt_", "mds_")))
# (label, case_id prefixes) of public_papers.csv


def papers_summary(r: dict, rows: list[dict]) -> str:
    """The summary line of public_papers.csv from ``validate --json`` (docs/validation.md; tests/test_public_papers.py
    checks it is current): priced / stated rows and the MAPE of each source group."""
    parts = []
    for label, prefixes in PAPER_SETS:
        stated = [x for x in rows if x["case_id"].startswith(prefixes)]
        errs = [c["error"] for c in r["cases"] if c["case_id"].startswith(prefixes)]
        if stated:
            parts.append(f"{label}: {pct(mape(errs)) + ' over ' if errs else ''}{len(errs)} of {len(stated)} rows priced")
    return (f"- public_papers.csv: **MAPE {pct(r['mape'])}** over {len(r['cases'])} rows priced, {len(r['skipped'])} "
            f"skipped with their reason ({'; '.join(parts)}).")


def papers_section(csv) -> list[str]:
    r, rows = cli_json(csv), V.read(csv)
    reasons = {}
    for s in r["skipped"]:
        why = s["reason"] if isinstance(s, dict) else str(s)
        key = ("global batch not stated" if "global_batch not stated" in why else
               "a TFLOP/s figure whose FLOP count the stack's logs do not fix" if re.search(
                   r"tflops_basis|own flops formulas|core_v0\.1[12]", why) else
               "a Mamba or MoE model without its layer pattern or experts" if re.search(r"Mamba / hybrid|MoE model", why) else
               "the architecture not stated" if "not stated" in why and "global_batch" not in why else
               "a plan the stack cannot run" if "cannot run" in why or "recomputes whole models only" in why else
               "DeepSpeed-Ulysses sequence parallelism (not modelled)" if "Ulysses" in why else
               "other")
        reasons[key] = reasons.get(key, 0) + 1
    return ["## Papers and reports priced as written", "",
            "`python -m roofline validate --dataset papers` (the bundled `public_papers.csv`, SOURCES.md there): "
            "training-throughput statements of papers, technical reports and framework documents that none of the "
            "sets above holds, each row written from what its source states and cited per row (2026-12-03). They were "
            "gathered to find where the reading of a stranger's row goes wrong, and each reading fix they led to holds "
            "for any row (validate.py: a framework named beside its engines, replicated ZeRO-3 shard groups, a "
            "node-to-GPU network phrase, stated fused kernels, edge pipeline stages one layer lighter, a model cell "
            "with qualifiers, a pipelined row without its batch, a local batch or head width the text states, a GPU "
            "in a node of another size, DeepSpeed-Ulysses named in the text, a precision the text calls unstated, "
            "FlashAttention named in a cell, an expert TP size or intra-node EP or recompute modules the text "
            "quotes, an NVL72 domain behind a node of 4); no constant was set from them.", "",
            papers_summary(r, rows), "",
            "Skipped rows by reason: " + "; ".join(f"{k} {n}" for k, n in sorted(reasons.items())) + ".", ""]


def nemo_section(csv) -> list[str]:
    """NVIDIA's Megatron-Bridge performance tables (nemo_perf.csv): the error overall, by GPU, model and precision, and
    across architecture x CUDA graphs (the plan's, validate.cuda_graphs), where the MoE rows' error sits."""
    r = cli_json(csv, "--by", "tier,gpu,model,precision,arch+graphs,ep+gpu")
    # validate's composite groups are labelled "arch=MoE graphs=eager": the table writes "MoE, eager"
    groups = {", ".join(part.split("=", 1)[1] for part in k.split(" ", 1)): v
              for k, v in sorted(r["by_arch+graphs"].items())}
    ep_gpu = {k.replace("ep=", "EP ").replace(" gpu=", ", "): v for k, v in r["by_ep+gpu"].items()}
    s = overall(r)["all"]
    tier_a = r["by_tier"].get("A", {})
    moe = {g: groups[k]["mean_error"] for k in groups for a, g in [k.split(", ", 1)] if a == "MoE"}
    line = ""
    if "eager" in moe and "full-iteration CUDA graph" in moe:
        line = (f"MoE rows run eagerly are priced {pct(moe['eager'], True)} on average, against "
                f"{pct(moe['full-iteration CUDA graph'], True)} under a full-iteration CUDA graph. What a graph takes "
                "away is the step's host issue and its synchronizations (docs/models.md, \"The host side of MoE "
                "layers\"), which the model prices in part; the graphed recipes also differ in other switches. A "
                "partial graph scope (router, preprocess, attention) takes only the captured blocks' host time, and "
                "its rows are grouped with their modules.")
    return ["## NVIDIA's Megatron-Bridge performance tables", "",
            "`python -m roofline validate --dataset nemo --by gpu,model,precision,arch,graphs` (the bundled "
            "`nemo_perf.csv`: NeMo 25.09-26.08 pre-training tables, H100 / B200 / GB200, BF16 to NVFP4, dense and MoE, "
            "each row's recipe switches in its settings; README and SOURCES.md there). Goal (issue 20): tier A "
            "MAPE <= 10 %, every model family <= 15 %, every precision <= 12 %.", "",
            f"- nemo_perf.csv: **MAPE {pct(s['mape'])}** over {s['n']} rows ({len(r['skipped'])} skipped), mean signed "
            f"{pct(s['mean_error'], True)}; tier A {pct(tier_a.get('mape'))} over {tier_a.get('n', 0)}.", "",
            *stats_table(r["by_gpu"], "GPU"), "", *stats_table(r["by_model"], "model"), "",
            *stats_table(r["by_precision"], "precision"), "", *stats_table(groups, "architecture, CUDA graphs"), "",
            *([line, ""] if line else []),
            "By the expert-parallel degree and GPU (`--by ep+gpu`; EP 1 is the dense models and the MoE rows without "
            "EP): where the MoE error sits against the size of the all-to-all group and the link it runs on (an "
            "NVL72 domain on GB200, 8-GPU nodes on B200 and H100).", "",
            *stats_table(ep_gpu, "EP, GPU"), ""]


def automodel_note(r: dict) -> list[str]:
    """What the NeMo AutoModel rows show (read from ``r``): their recomputation comes from the benchmark config of the
    commit that added each row (public_tables.csv notes), and with it the MoE rows are priced slow."""
    cases = [c for c in r["cases"] if c["case_id"].startswith("automodel_")]
    moe = [c for c in cases if c["plan"]["recompute"] == "full" and "Llama" not in c["case_id"]]
    if not moe:
        return []
    errs = [c["error"] for c in moe]
    return [f"The AutoModel rows (tier C) take their activation checkpointing from the benchmark config of the commit "
            "that added each row to the table (the table does not state it; the config's batch, local batch and EP are "
            "the row's): whole-block checkpointing, but for GPT-OSS 120B and the 1024-GPU DeepSeek-V3 row, whose "
            "configs at that commit are another run's (the rule for an unstated recompute prices those). With it the "
            f"model prices the {len(moe)} MoE rows with checkpointing {pct(min(errs), True)} to {pct(max(errs), True)} "
            f"(mean signed {pct(float(np.mean(errs)), True)}), where it prices the same models' Megatron-Bridge rows "
            "(nemo_perf.csv) too fast: the MoE step's structure under the two stacks, not one rate, is what differs "
            "(issue 20)."]


def stage_section(csv) -> list[str]:
    r = cli_json(csv)
    return ["### Per pipeline stage", "",
            "`python -m roofline validate --dataset memory-ranks` (the bundled `memory_per_rank_simumax_b200.csv`) reads every rank's "
            "peak of the SimuMax B200 runs, puts each rank in its pipeline stage (Megatron-Core's tp-cp-ep-dp-pp rank "
            "order: stage = rank // (tp cp dp)) and compares the stage's largest peak with the stage's prediction "
            "(`mem_first_stage`: embedding and the most in-flight micro-batches; `mem_last_stage`: LM head and logits).",
            "", stage_summary(r), ""]


def elasticity_table(rows: list[dict]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(E, err, names): per priced row with a measured time, the elasticity of its predicted step time to each
    hardware resource (roofline/views/sensitivity.py, a symmetric 1 % step, all rows of a resource in one vectorized
    call) and its log error ln(predicted / measured)."""
    from roofline.views.sensitivity import RESOURCES, elasticities, step_times
    cases = []
    for r in rows:
        try:
            c = V.build_case(r)
        except V.Skip:
            continue
        if c.measured == c.measured:            # rows with a step time (memory-only rows have NaN)
            cases.append(c)
    xs = [inputs(c.model, c.plan, c.hw) for c in cases]
    res = [r for r in RESOURCES if r.key != "host_link"]
    t0, E = step_times(xs), elasticities(xs, res)
    err = np.log(t0 / np.array([c.measured for c in cases]))
    return E, err, [r.name for r in res]


def attribution_section(files: dict) -> list[str]:
    """Where each file's errors point: for every hardware resource, the mean share of the step that scales with it
    (elasticity) and the correlation of the rows' log errors with that share. A diagnostic of the model's structure
    (which terms the misses grow with), never fed back into it."""
    L = ["### 5. Where the errors point: error against each resource's share of the step", "",
         "For every row, the elasticity of its predicted step time to each hardware resource (`transformer "
         "--sensitivity`: the share of the step that scales with it; the shares of a row add up to 1) and its log "
         "error ln(predicted / measured). A resource whose share correlates with the error marks the terms the "
         "misses grow with: a negative correlation, rows bound by it are predicted too fast; positive, too slow. "
         "Resources with no spread in a file (a share below 0.5 % in every row) show a dash.", ""]
    names = None
    cols = {}
    for label, rows in files.items():
        E, err, names = elasticity_table(rows)
        corr = [float(np.corrcoef(E[:, j], err)[0, 1]) if E[:, j].std() > 1e-3 and E[:, j].max() > 0.005 else None
                for j in range(E.shape[1])]
        cols[label] = (E.mean(axis=0), corr, len(err), float(np.mean(err)))
    L += ["| resource | " + " | ".join(f"{k}: mean share / corr." for k in cols) + " |",
          "|---|" + "---:|" * len(cols)]
    for j, n in enumerate(names):
        cells = []
        for label, (mean, corr, _, _) in cols.items():
            cells.append(f"{mean[j]:.2f} / " + ("-" if corr[j] is None else f"{corr[j]:+.2f}"))
        L.append(f"| {n} | " + " | ".join(cells) + " |")
    L.append("| rows, mean log error | " + " | ".join(f"{n}, {m:+.3f}" for _, (_, _, n, m) in cols.items()) + " |")
    L.append("")
    for label, (mean, corr, _, _) in cols.items():
        ranked = sorted((c, names[j]) for j, c in enumerate(corr) if c is not None)
        if ranked:
            lo, hi = ranked[0], ranked[-1]
            L.append(f"- {label}: the larger a row's share of {lo[1]}, the faster the model prices it against its "
                     f"measurement (correlation {lo[0]:+.2f}); the larger its share of {hi[1]}, the slower "
                     f"({hi[0]:+.2f}).")
    L.append("")
    return L


def input_rules() -> list[str]:
    """docs/validation.md's "How a row becomes a prediction" section: the rules by which a row's stated and blank
    cells become a plan (static text; tests/test_validation_report.py checks the page holds it)."""
    return [
        "## How a row becomes a prediction (defaults)", "",
        'Every row goes through the one resolver (`roofline/spec/resolve.py`) with a stack from the registry '
        '(`roofline/spec/stacks/`, every default sourced; docs/frameworks.md). The stack of a row: its '
        '`framework` column; else the stack its source text names, the version by the earliest year the text '
        "mentions, or by a release named after the stack's name when no year is (NeMo's 25.09; Megatron-LM's tags "
        "core_r0.9.0, core_v0.12, v2.6: `stacks.MEGATRON_RELEASES`, the tags' dates in NVIDIA/Megatron-LM), or, "
        'ahead of any year the text cites, by the commit or release that ran: a hash after "commit" (or an "@" in '
        'the framework column) or a release number after the name, dated by the git history of the family\'s '
        'repository (`roofline/spec/stacks/history.py`, `roofline/data/stack_history.json.gz`: every commit and '
        'release tag of Megatron-LM, DeepSpeed, Megatron-DeepSpeed, GPT-NeoX, torchtitan, llm-foundry, InternEvo '
        "and NeMo AutoModel; MegaScale's 2024 paper ran its Megatron-LM baseline at 285068c8 of 2023-01 -> "
        '`megatron-lm-2022`) '
        '(Narayanan SC21 -> `megatron-lm-2021`: unfused attention, dropout, fp16, no SP, no distributed '
        'optimizer, no overlap, fp16 gradient reduce; Korthikanti 2022 -> `megatron-lm-2022`, the same defaults; '
        "the Megatron-LM README naming Megatron-Core -> `megatron-core`; vTrain's Megatron-DeepSpeed -> "
        "`megatron-deepspeed`; MT-NLG's 2022 paper naming DeepSpeed and Megatron -> `megatron-deepspeed-2022`); "
        'else, a model its makers trained with one stack named in the model cell or the source (OPT -> `metaseq`, BLOOM -> `megatron-deepspeed-2022`, GPT-NeoX-20B, Pythia, MPT, OLMo 1: the stacks\' `trained_models`); else era rules (Hopper or newer, bf16, GQA, RoPE, gated MLP -> `megatron-core`). A version picked by a '
        'date, the features or the era rule that cannot run what the row states (selective recomputation or '
        'sequence parallelism, which Megatron-LM has since 2022-04 and Megatron-DeepSpeed since 2023-07) gives '
        "way to the first later version of its family that can; where the era rule's stack (nothing named, or a "
        'framework the registry lacks) cannot run the stated plan, the reference implementation of what it '
        'refuses stands in (ZeRO-2 on Megatron-Core -> `deepspeed-zero`; `stacks.STAND_INS`); a row whose column '
        'names no registry stack and whose text names one that cannot run it (the Llama 3 report\'s "ZeRO-2-like" '
        'FSDP names DeepSpeed ZeRO, which runs no interleaved pipeline) is priced as if the text named nothing: '
        "the era rule's stack, then its stand-ins, each dropping what only the text said and it refuses, noted; a "
        'framework column, or a row naming a version by its id, is refused instead. `validate --json` prints the '
        'stack and the reason per row; stated columns override the stack. A text naming both DeepSpeed and Megatron '
        '("DeepSpeed + Megatron-LM") ran Megatron-DeepSpeed. Headers as tables print them ("GBS", "Seq Length", '
        '"Tokens / sec / GPU"; llm-foundry\'s "SeqLen (T)", "Throughput (T/s)", "MFU" in percent; torchtitan\'s '
        '"TPS/GPU"; a model\'s Hugging Face config names, num_hidden_layers, num_key_value_heads, intermediate_size; '
        'nanotron\'s sweep headers "batch_accum", "zero_stage", "tok/s/gpu"; nanoGPT\'s n_layer, n_head, n_embd, block_size; the Megatron-LM README\'s "Model size", '
        '"Tensor model-parallel size", "Batch size" (the global batch), "Achieved teraFLOP/s per GPU"; "TP size", '
        '"Context length", "Time per iteration (s)", "TFLOPs/GPU"; a time header in ms, Megatron-LM\'s "elapsed time per iteration (ms)", '
        'or a time per step written as a reciprocal rate (tqdm\'s "s/it", "ms/step", "sec/iter") reads its bare cells in that unit; never a header in GB; "Nodes" times the GPUs per node of the row, '
        'or of an 8-GPU server\'s profile) read as their columns, rate cells may carry their unit ("6,020 tokens/s/GPU"), and a model named '
        'by its size alone ("70b") on a stack that ships its own model configs is that config (llm-foundry: '
        'MPT, presets `mpt-*`). A header that is a column name wins over an alias beside it ("Model" over "Model '
        'size"); a long header one typo from one known spelling reads as its column, noted (torchtitan\'s "Activation '
        'checkpoiting"), a header with its unit as its column where the unit fits ("Sequence length (tokens)", "GBS '
        '(tokens)" a batch in tokens). A blank global batch is the per-rank batch ("Local batch size", the Llama 3 paper\'s "Batch '
        'size/DP", else the micro-batch) x gradient accumulation (1 unless stated) x dp, as Megatron-LM, torchtitan and '
        'DeepSpeed set an unset one; "Tokens/Batch" is a global batch in tokens. A file may be a README\'s Markdown '
        'table as pasted (several sections of one header, footnote markers and emphasis left out) or a sheet saved '
        'tab- or semicolon-separated (decimal commas read).',
        "- **Matmul ceiling and sustained clock** (properties of the GPU, not of a row): every profile with a "
        "published maximum achievable matmul rate (`max_matmul`, mamf-finder: A100 SXM 267.9, H100/H200 SXM 828.0 "
        "TFLOP/s) caps its GEMM efficiencies at max_matmul / peak, because no fitted curve can beat what the best "
        "shape achieves; the A100 and GH200 backward GEMM fits (about 0.91 and 0.92 of peak) are above it. H100/H200 "
        "profiles carry `sustained_clock: 0.849` (power-capped sustained rate / burst rate, 702.9 / 828.0 on H200 "
        "SXM, the same run as the ceiling); the other Hopper and Blackwell datasheet profiles (GH200, the PCIe "
        "and NVL cards, B200/GB200/B300/GB300) take that ratio as an assumption; A100 has no such measurement and "
        "keeps 1.",
        "- **Low-precision GEMM kernels** (properties of the recipe and the GPU, not of a row): an FP8 or FP4 GEMM "
        "runs at its peak times the 16-bit efficiency times its kernels' measured rate (`base/precision.py` "
        "`gemm_rate`: per-tensor FP8 0.957, MXFP8 0.915, FP8 blockwise 0.846 on Hopper (MXFP8's on Blackwell, "
        "where it is emulated), from Transformer Engine's published GEMM benchmark on B300 and H200); on Blackwell Ultra (B300, GB300) NVFP4 GEMMs reach `max_matmul_fp4`, not the FP4 peak "
        "(docs/calibration.md, \"Low-precision GEMM kernels\"). Not fitted on rows.",
        slowest_gpu_line(),
        "- **TP overlap** (Megatron-Core rows whose notes or settings state it, however spelled: `--tp-comm-overlap`, "
        "`tp_comm_overlap=True`, \"userbuffer TP comm-overlap\"; not after false/off, nor on an NVFP4 row that says "
        "\"off for NVFP4\"; torchtitan / NeMo AutoModel rows stating \"async TP\", `enable_async_tensor_parallel`, "
        "not after \"no\"/\"without\"): `overlap_tp = (tp-1)/tp`. The "
        "ring-exchange overlap of Transformer Engine splits each TP all-gather / reduce-scatter into tp steps, each "
        "hidden behind the GEMM chunk of the previous step; the first step has nothing to hide behind. Not fitted.",
        "- **Gradient-accumulation fusion off** (a row stating `--no-gradient-accumulation-fusion`, "
        "`gradient_accumulation_fusion = False` or \"no grad-accum fusion\"; a clause \"if FSDP: ...\" only on a row "
        "that runs Megatron-FSDP): `wgrad_fusion` off, so each weight-gradient GEMM writes its output instead of "
        "adding into the fp32 main grad. Megatron-Bridge's perf family files of 25.11-26.04 set it under "
        "Megatron-FSDP (Megatron-LM `mcore_fsdp_adapter.py` needs Transformer Engine 2.10 for the fusion there). "
        "No row's time moves: those GEMMs are compute-bound.",
        "- **Recompute modules** (a `selective` row's `recompute_modules` column, e.g. `mla_up_proj,mlp`): what "
        "Megatron-Core's selective recomputation recomputes and frees, module by module (docs/models.md); blank: "
        "`core_attn`, Megatron-Core's default. No row of these two files states one.",
        "- **Megatron-Bridge v0.1.0rc3's launcher** (a row whose settings cite that release's DeepSeek perf yaml, the "
        "NeMo 25.09 table): the switches its `scripts/performance/run_script.py` set per GPU beside the yaml "
        "(`validate.BRIDGE_RC3_DEEPSEEK`): on H100 DeepEP with the all-to-all overlapped, recompute modules "
        "`mla_up_proj,mlp` and no gradient-reduce overlap; on GB200 recompute modules `mla_up_proj,mlp,moe_act`. "
        "A row whose source states its modules keeps them.",
        "- **Megatron-Bridge's benchmark gradients** (a row whose settings cite a recipe of its performance launcher, "
        "`scripts/performance/configs/` or `perf_recipes/`: every row of nemo_perf.csv): bf16 gradient buffers and "
        "reduce-scatters, as every release's benchmark configs set `grad_reduce_in_fp32` False (v0.1.0rc3 perf yamls; "
        "`set_<family>_common_configs` of v0.2-v0.5; v0.6.0 `perf_recipes/_common.py` `_benchmark_common`), where "
        "Megatron-LM's `--bf16` forces fp32 main grads; GLM-5's recipes set it True again. Likewise the NeMo "
        "performance summaries of the 25.02-25.07 containers in public_tables.csv (NeMo 2's performance scripts build "
        "each recipe with `performance_mode=True`, whose `performance_optimizations` set it False; the NeMo 1.x 24.07 "
        "table is not known to, and keeps fp32) (`validate.bridge_grad_reduce`). Not fitted: it halves the "
        "data-parallel bytes, and the rows whose gradient reduce was exposed (GPT-OSS) move 2-3 % faster, away from "
        "measured.",
        "- **Attention kernel** (a row naming it: `attn_impl: triton`, `flash-attn==1.0.7`, FlashAttention-2, "
        "FlashAttention-3 / `flash_3`, cuDNN attention; else the stack's: `llm-foundry@2023` runs Triton "
        "FlashAttention, its MPT yamls' `attn_impl: triton` until March 2024; Megatron-Core and NeMo AutoModel run "
        "Transformer Engine's attention, cuDNN's kernel on Hopper and Blackwell): the flash kernel's compute time over "
        "its speed relative to FlashAttention-2 (1 / 1.80 Triton, 1 / 2.26 v1; Dao 2023 sec. 4.1; cuDNN at head dim 128 "
        "1.80x on Hopper, 1.60x on Blackwell and 1.90x on Blackwell Ultra, measured by NVIDIA cudnn-frontend's SDPA "
        "benchmark on H200, GB200 and GB300, the profiles' `attention_speed`; docs/models.md, docs/calibration.md). "
        "No row of these files names one.",
        "- **PP overlap**: Megatron-Core overlaps pipeline send/recv in the interleaved schedule by default "
        "(the README: 'PP comm overlap on'): `overlap_pp = 1` when v > 1; other frameworks 0.",
        "- **CUDA graphs** (`validate.cuda_graphs`, from the row's settings): `cuda_graph_impl` full_iteration (or "
        "the older spelling `scope=full_iteration` with impl local) -> `full`; per-layer graphs whose modules cover "
        "every module kind the layer has (attn; mlp, moe, mamba as the model has them) -> `layers`; a partial scope "
        "-> `layers` with its modules (`validate.graph_scope`, plan `graph_modules`: moe_router + moe_preprocess "
        "leave the experts, the dispatcher and the token-count sync eager); impl none, \"not set by preset\" "
        "(Megatron-Core's default impl is none) -> `none`; graphs stated without modules -> `layers` "
        "(Megatron-Core's default modules: the whole layer).",
        "- **micro_batch** blank -> a micro-batch the notes or settings state (\"micro-batch size 4\", \"MBS=4\", "
        "\"per-device batch size 4\"), else global batch / (dp x the gradient accumulation steps) of a `grad_accum` "
        "column (llm-foundry's \"GradAccum\", \"gradient_accumulation_steps\") or of the text (\"grad accum 8\", \"GA=8\", "
        "\"8 micro-batches\", \"no gradient accumulation\") where it divides (`validate.micro_batch_from_text`); else "
        "the stack's: 1 for the Megatron stacks (Megatron's GPT-3 175B example script); "
        "global batch / dp for DeepSpeed ZeRO, PyTorch FSDP and torchtitan without PP (no gradient accumulation "
        "unless told; docs/frameworks.md `micro_batch_unstated`); with PP, torchtitan's pipeline micro-batch is 1 "
        "since 2025-04 and the local batch over pp micro-batches before (`torchtitan-2024`, `microbatches_with_pp`; "
        "the row's source dates the version, month included).",
        "- **head_dim** blank -> a head width the notes or settings state (Megatron-LM's `--kv-channels` / "
        "`kv_channels: 128`, `head_dim 128`; not read where the text names Mamba, whose heads have their own; "
        "`validate.head_dim_from_text`, noted); **qk_layernorm** blank -> on where they state `qk_layernorm` "
        "(Megatron's `--qk-layernorm`), unless set false.",
        "- **global_batch** and `local_batch` blank, the notes or settings stating a local batch (\"Local batch size "
        "8\", torchtitan's per-data-parallel-rank `training.local_batch_size`) -> global batch = it x dp "
        "(`validate.local_batch_from_text`); with no batch column at all, a global batch the text states in tokens "
        "right after the words batch size or global batch (\"batch size of 4M tokens\", LLaMA's and JetMoE's) -> that "
        "many tokens over the sequence length, read as a tokens column is (`validate.batch_tokens_from_text`); not "
        "where the text says the batch is not stated or gives two. A layout whose tp x pp x dp leaves a factor of the GPUs over, where the "
        "text names DeepSpeed-Ulysses (and no ring attention), runs that factor as context parallelism by Ulysses' "
        "all-to-all of the heads (`cp_kind` ulysses, docs/models.md; `validate.ulysses_stated`); a stack without it "
        "refuses it.",
        '- **interleave** blank with pp > 1 -> a schedule the settings or notes name ("Interleaved 1F1B", '
        '"1F1B-I", "1F1B", "GPipe", "DualPipeV"; `validate.schedule_from_text`), else the stack\'s rule. A '
        "zero-bubble schedule (ZB-H1/H2, ZB-1p/2p, ZB-V, torch's `ScheduleZBVZeroBubble`; Qi et al. 2024) is not "
        'modelled: the row is priced as 1F1B (interleaved 1F1B where it states v), whose bubble bounds the '
        'zero-bubble one from above, and the note says so.',
        '- **Spellings**: `mlp` ReLU (OPT, metaseq) reads as the non-gated MLP (`gelu`: the same two GEMMs), '
        'GeGLU/ReGLU as gated (`swiglu`); `optimizer_sharding` "stage 2" as ZeRO-2; a `recompute` column stating '
        'a share of the blocks ("every other layer", "selective_ac_option 2") recomputes that share in full.',
        '- **kv-heads below tp** on a stack whose upstream splits the key/value heads over the TP ranks '
        "(Megatron-LM before Megatron-Core 0.16; a measured multi-query run such as StarCoder's at TP 4): the "
        "run's own version replicated them, so the row is priced on that stack with the heads replicated, as "
        'Megatron-Core 0.16+ does, said in the stack reason (`validate.kv_replicated`). `transformer` and '
        '`search` keep refusing such plans on those stacks.',
        "- **global_batch** within 5 % of a multiple of micro-batch x dp but not one (a rounded figure: GPT-NeoX-20B's "
        "1538 for 4 x 32 x 12 = 1536) -> that multiple, noted per row; further off -> skipped.",
        "- **precision** blank or no such column -> a recipe the notes or settings state (FP8, Float8, MXFP8, NVFP4; not "
        "in a clause that negates it or only quotes a peak rate, nor anywhere in a text that says in one sentence "
        "that the precision is not stated: \"precision (the paper discusses BF16 and FP8 generally; the table's "
        "precision is not stated)\"), else the stack's default.",
        "- **attention** on a stack whose default writes the score matrix out (Megatron-LM 2021/2022: "
        "`--use-flash-attn` was opt-in) with a framework, model, attention or settings cell naming FlashAttention "
        "without a version (\"GPT with RoPE + FlashAttention\") -> the flash path of the row's date: FlashAttention-2 "
        "from its release (flash-attn 2.0.0, 2023-07), the first FlashAttention before (`validate.flash_named`; the "
        "notes are not read for it: they cite the FlashAttention paper for rows that ran other kernels).",
        "- **MoE** switches: an expert tensor-parallel size in any spelling (`ETP=1`, `--expert-tensor-parallel-size 1`) "
        "-> etp; a text keeping expert parallelism inside a node (\"EP within each node\", \"intra-node EP\": "
        "`validate.ep_in_node_stated`) with an ep the node holds -> etp 1, where Megatron-Core's default etp = tp would "
        "spread the group over nodes; a dispatcher the framework cell names (\"MoE dispatcher DeepEP\") or a recipe "
        "summary lists alone (\"DeepEP; EP overlap; VPP12\") as one the notes name, and \"EP overlap\" in such a list "
        "or `A2A_OVERLAP=1` as the EP all-to-all overlap; Megatron's `--recompute-modules` quoted from a command line or recipe -> what selective "
        "recomputation recomputes (`validate.recompute_modules_stated`).",
        "- **global_batch** blank on a row that measures a step time while its notes say the source withholds the "
        "batch (\"global batch not stated\"): skipped, since the step holds as many micro-batches as that unknown "
        "batch; a per-token rate (tokens/s per GPU) is priced on the stacks' default, which it barely depends on.",
        "- **dp of a sharded row**: a fully sharded row (`optimizer_sharding` fsdp or zero3) whose tp x pp x dp x cp "
        "leaves a factor of its GPUs over counts in dp the replicas only (MaxText's \"FSDP=64 ... DP\", torchtitan's "
        "dp_shard x dp_replicate): the factor's ranks shard the state inside each replica, dp x factor data-parallel "
        "ranks with dp replicas (HSDP), noted.",
        "- **Date** of a run (which version of its stack ran; which FlashAttention): the row's `source` cell where it "
        "gives a year (a paper's, a commit's), not the papers its notes cite for the architecture or the FLOP count "
        "(\"Brown et al. 2020\", \"arXiv:2205.05198\"); a release number after the stack's name (\"NeMo Megatron "
        "24.11\") ahead of any year (`stacks.infer` date_text).",
        "- **micro_batch** blank and the text saying the run accumulated gradients to fit in memory (\"gradient "
        "accumulation 'to fit into available GPU memory'\") -> the largest micro-batch below the rank's batch that "
        "divides it and with which the plan fits, not the stack's default of 1: the run accumulated because the whole "
        "rank's batch did not fit (`validate.micro_batch_to_fit`, noted). 'Hugging Face transformers' named as the "
        "training code is the PyTorch DDP stack of its date (its Trainer).",
        "- **A share of the blocks from HFU and MFU**: a 'selective' recompute column on a stack that recomputes "
        "whole blocks only (PyTorch FSDP: fms-fsdp's selective_checkpointing is a share of the blocks), the notes "
        "stating both the run's HFU and MFU -> full recomputation of the share r = 3 (HFU / MFU - 1) of the layers "
        "(HFU counts the recomputed forwards, 2 N r of the 6 N model FLOPs per token; `validate.hfu_mfu_stated`), "
        "noted; without both figures the row is refused with the stack's reason.",
        "- **MaxText remat policy** named in the text (`remat_policy=minimal_flash`): the 'minimal' and 'save_' "
        "policies keep every matmul output and the flash context and redo only element-wise ops (layers/decoders.py "
        "get_remat_policy) -> recompute none; 'full' and 'none' as themselves; over a recompute column's "
        "'selective', which MaxText has not, noted.",
        "- **NVLink domain**: a profile whose node is a rack-scale NVLink domain (`gb200`, `gb300`: 72) and a row whose "
        "`gpus_per_node` counts the host, a compute tray of 4 -> the domain stays the node (the one the text names, "
        "\"GB200 NVL72\", \"NVLink Domain Size: 72\", else the profile's), so TP/EP/CP groups up to 72 stay on NVLink; a "
        "text naming a domain no larger than the row's node (\"GB200 NVL4\") keeps the row's "
        "(`validate.nvlink_domain_stated`, noted).",
        "- **framework** blank and the source names two stacks, the first of which cannot run the stated plan "
        "(\"FSDP + Megatron TP\") -> the next one named that can, with the reason.",
        "- **interleave** blank -> 1 when pp = 1 or the framework has no interleaved schedule (DeepSpeed); otherwise "
        "(Narayanan Table 1/2 say interleaved 1F1B; the Megatron-Core README's PP overlap needs it) the smallest "
        "v >= 2 with layers % (pp v) = 0 (or (layers + 2) % (pp v) = 0 in a stack that splits uneven stages: the "
        "embedding and the loss each fill a virtual stage, Megatron-Core account_for_embedding/loss_in_pipeline_split) "
        "and micro-batches % pp = 0 (Megatron's constraints), else 1. "
        "This gives v = 2 for most rows, 3 for 76B (60 layers / pp 4) and 530B (105 / 35), 7 for the H100 462B "
        "(112 / 16) and 23 for the H100 119B (92 / 4, one layer per virtual stage). "
        "Where the plan at that v needs more memory than the GPU has, beyond the memory model's largest validated "
        "error, the smallest larger valid v with which it fits, before any recomputation: more virtual stages hold "
        "fewer layers' activations in flight on the first stage (validate.unstated_interleave; Llama 3.1 405B at "
        "tp 8 pp 16 with 32 micro-batches: v = 8, as Megatron-Bridge's 405B recipes run).",
        "- **cp** blank -> 1; **recompute** blank -> what the notes or settings state (\"activation checkpointing\", "
        "\"--checkpoint-activations\", \"gradient checkpointing\" -> full; \"selective activation recomputation\" -> "
        "selective; negated, \"without activation checkpointing\" -> none: `validate.recompute_from_text`; a clause "
        "that says its source is silent, \"not stated\", \"not in the table\", is neither), else the "
        "stack's default (Megatron: none; GPT-NeoX, metaseq: full; torchtitan: op), unless with it the plan needs "
        f"more memory than the GPU by more than {100 * V.MEMORY_ERROR_MAX:.0f} % (above the memory model's largest "
        "validated error, so the run cannot have been that plan): then the first that fits of, in order of its time "
        "cost, ZeRO-1 (the sharding unstated too), then the stack's selective, op and full recomputation (full of a "
        "share of the layers first where the stack states one: a quarter, a half, three quarters of a pipeline chunk's "
        "layers, or one block in 4, 3, 2) each without "
        "and with ZeRO-1; where sequence parallelism is unstated, off by the stack's default and the stack has it "
        "(tp > 1), SP alone first and then beside each of those, as it costs no time (Korthikanti et al. 2022 sec "
        "4.2.2: the same bytes move, the layer norms and dropouts run on 1/tp of the sequence) "
        "(`validate.unstated_recompute`; not on a stand-in stack for a framework outside the "
        "registry); **optimizer_sharding** blank -> the `fsdp` column (a flag in NVIDIA's tables, FSDP = 1; a shard "
        "size in others, HSDP when it divides the data-parallel ranks: `validate.fsdp_column`), else "
        "what the text states (\"ZeRO stage 1\", \"distributed optimizer\", SHARD_GRAD_OP, FULL_SHARD, HYBRID_SHARD; "
        "a bare \"FSDP\" is left to the stack: `validate.sharding_from_text`), else the stack's; both noted per row; "
        "**optimizer** blank or no such column -> Muon when the text names it (\"Muon optimizer was used\"), else "
        "Adam; **n_kv_heads** blank -> MHA; **ffn_hidden** blank -> 4h.",
        "- **tp/pp/dp**: exactly one blank -> n_gpus / (the other two); two or more blank -> every stack's flag default "
        "tp = pp = 1 (data parallel over the rest) when that plan fits in memory; when it does not, the run cannot have "
        "used it. Its tp and pp then follow the practitioners' rule (Narayanan et al. 2021, Takeaway #1: tensor "
        "parallelism up to the GPUs of a node, then pipeline parallelism): the smallest tp at pp = 1 that fits, else "
        "the largest tp inside the node with the fewest pipeline stages that fit; the rest of the plan (an unstated "
        "ep or micro-batch) is the fastest of that (tp, pp) its stack can run that fits, every stated knob "
        "kept (`validate.complete_layout`), and its virtual stages follow the interleave rule below, as for a row that "
        "states its layout. Not the model's fastest layout, nor its fastest v (one layer per virtual stage): that "
        "would read every such row at the model's most optimistic corner. An MoE row follows Megatron-Core's MoE guidelines instead "
        "(megatron/core/transformer/moe/README.md: EP x TP inside the NVLink domain, EP before TP, the fewest "
        "pipeline stages that fit). A published run need not have followed the rule; these rows are tier C. An "
        "MoE row whose tp x pp x dp x cp falls short of n_gpus by exactly its ep counts the EP ranks out of dp "
        "(\"PP 16, EP 64, DP 2\"): priced at Megatron-Core's dp = dp x ep (EP is carved out of dp), noted.",
        "- **ep** blank or '-' on an MoE row over more than one GPU whose layout is stated -> the fastest ep that fits "
        "of those dividing the experts and dp x cp, noted (`validate.unstated_ep`): every stack's flag default is one "
        "EP rank, but no published MoE run holds and gathers every expert on every GPU, and the recipes that publish "
        "MoE runs spread experts wide (Megatron-Bridge DeepSeek-V3 ep 64; NeMo AutoModel GPT-OSS 120B ep 64). When "
        "no ep fits the model's memory estimate (the run did), the fastest, said so.",
        "- **seq_len** blank -> the stack's shipped training config for the model family where it has one "
        "(torchtitan: Llama 3 8192, train_configs/llama3_*.toml; Megatron-LM 2.x and 3.x: GPT 2048, "
        "examples/pretrain_gpt3_175B.sh; docs/frameworks.md `seq_len_unstated`); else, when "
        "the row's model names a bundled preset, that model's pretraining context as its source gives it (a row naming "
        "a published model and no length reports its training run); else skipped (Megatron's --seq-length has no "
        "default).",
        "- **Architecture** blank (n_layers, d_model, heads, ffn, vocab; an MLA row's ranks and head widths; the shared "
        "experts' width) and the `model` column names a bundled preset ('LLaMA-65B', 'Meta-Llama-3.1-405B', "
        "'DeepSeek-V3 (671B)', 'Kimi_K2': `families.preset_for`) -> the preset's published shape, said in the note; a "
        "stated column always wins; without a preset such a row is skipped with the columns it lacks.",
        "- **Hardware**: the profile whose id is `gpu_id`; `gpus_per_node` and `net_gbps_per_gpu` "
        "(`Hardware.with_network`) override it when stated (a `gpus_per_node` that a bundled datasheet variant of "
        "the same GPU describes takes that node's profile and its links: `gh200` four to a node, JUPITER's and Alps' "
        "blades, is `gh200-quad`; `hardware.node_variant`, noted); a blank network column takes the per-GPU line rate "
        "the row's `interconnect` or notes text states (\"8x200Gb/s HDR IB per node\" -> 200, \"400 Gbps EFA\" -> 50 "
        "on 8 GPUs, \"25 GB/s per GPU\" -> 200; a node's rate shared by its GPUs; NVLink and other links inside the "
        "node are not the network; `validate.network_from_text`, noted), else the profile's DGX-class default; a "
        "shard group the sharding column or notes state (\"ZeRO-3 sharded over 128 GPUs\") is HSDP with dp / 128 "
        "replicas (`validate.shard_size_from_text`); "
        "`gpu_id` blank -> the profile the free-text `gpu` column names when it names exactly one (\"A100-80GB "
        "(SXM4)\", \"H100 (80GB)\": `hardware.from_text`), else skipped (a bare \"A100\" leaves the memory size open).",
        "- **Measured** = `measured_iter_time_s`, else `derived_iter_time_s` (the source's own FLOP formula), "
        'else derived here from the rate the row states (`validate.time_from_rate`, noted): `flops_per_iter` / '
        '(n_gpus x `measured_tflops_per_gpu`, or x `measured_mfu` x the dense 16-bit peak), global_batch x '
        'seq_len / `tokens_per_s`, or / (`tokens_per_s_per_gpu` x n_gpus). A rate with no `flops_per_iter` takes '
        'the count its `flop_basis` names: HFU96 (Narayanan et al. 2021 eq. 3, 96 B s l h^2 (1 + s/6h + V/16lh), '
        'with the recomputed forward) or MFU72 (Korthikanti et al. 2022, 72 B s l h^2 (1 + s/6h + V/12lh)), on '
        "the row's shape (`validate.basis_flops`, noted); another basis needs `flops_per_iter`. A TFLOP/s figure "
        "with neither (the number a training log printed) takes the count the row's stack logs it with (stack rule "
        "`tflops_basis`, docs/frameworks.md; Megatron-DeepSpeed\'s training log and Megatron-LM 2.x\'s paper: eq. 3 with "
        "4 passes under full recomputation, 3 without, for the multi-head, non-gated GPT shape that formula assumes; "
        "Megatron-LM's log: its num_floating_point_operations of the run's date; MaxText's log, dense models: whole "
        "s x s attention before its 2025-07-18 change, causal attention half after; `validate.logged_basis`); other "
        "stacks and shapes are skipped with that reason. An MFU with neither takes the model FLOPs of MFU as PaLM "
        "defines it (Chowdhery et al. 2022 app. B: 6 N + 12 L H Q T per token, attention whole; the row's model, "
        "active experts; `validate.mfu_flops`), noted: a source that halves causal attention implies a step about "
        "s / (12 h + 2 s) shorter. Number cells may "
        "carry digit groups ('1,536'), a leading '~', on seconds columns 's' or 'ms', and a magnitude suffix: in "
        "powers of two on context lengths and batches ('8K' = 8192, '1.5K' = 1536), of ten elsewhere ('3.2k' "
        "tokens/s = 3200). A `global_batch` in tokens ('4M tokens', or a bare '4M': a batch of millions is a "
        "token count) is that many tokens over the row's seq_len (else the preset's or the stack's), the reading "
        "of the suffix that gives whole sequences (Llama 2's 4M at 4096: 1024), else the decimal one rounded and "
        'then the nearest batch the layout runs, noted (`validate.batch_from_tokens`). A missing-value spelling '
        "('n/a', 'NA', '-', '?', 'None', 'unknown', 'not reported', ...: pandas.read_csv's default `na_values` "
        "and the dashes and words papers' tables use; `validate.MISSING`) reads as a blank cell. Any other text "
        "in a number column makes that row a skip naming the column and the cell; the file's other rows are still "
        'priced (`calibrate from-runs`, which fits on stated columns, stops on it instead).',
        "- **A stated plan that cannot fit**: a row whose plan, as read, needs more memory than its GPU by more than "
        f"the memory model's largest validated error ({100 * V.MEMORY_ERROR_MAX:.0f} %) is priced as read, but the run "
        "cannot have been that plan (it left out a memory saving, its batch was misread, or the memory model misses a "
        "saving of the stack's): its note says so, "
        "`--json` gives the overshoot (`over_memory`), and the summary lists such rows under the breakdowns.",
        "- **Columns**: a file needs a model (`model` or the shape columns), a GPU (`gpu_id` or `gpu`) and "
        "a measurement (a time, a rate or a peak memory); a column it leaves out reads as blank in every row, with the "
        "rules above, and a row without a `case_id` is named by its line (`row 7`). Rows the model rejects (n_gpus != tp pp dp cp, heads not divisible by tp, unknown gpu_id, ...) "
        "are listed as skipped with the reason; a malformed file (none of a needed kind of column, no data rows, empty) "
        "is a one-line error, exit 2.",
        "- Single-node vs multi-node: n_gpus <= gpus_per_node.", ""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=str(ROOT / "roofline" / "data" / "validation"),
                    help="folder of the validation CSVs (default: the bundled public sets)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "validation.md"))
    ap.add_argument("--write-pins", action="store_true",
                    help="also rewrite tests/fixtures/vtrain_subset_pins.json (per-layout signed errors of the fixture subset)")
    args = ap.parse_args()
    if args.write_pins:
        fixtures = ROOT / "tests" / "fixtures"
        pins = V.layout_errors(V.validate(V.read(fixtures / "vtrain_subset.csv")))
        (fixtures / "vtrain_subset_pins.json").write_text(json.dumps({k: round(v, 4) for k, v in pins.items()}, indent=1) + "\n")
        print(f"wrote {fixtures / 'vtrain_subset_pins.json'} ({len(pins)} layout / micro-batch groups)")
    shared = Path(args.shared)
    pub_csv, vt_csv = shared / "published.csv", shared / "vtrain_measured.csv"
    pub, vt, t4 = cli_json(pub_csv), cli_json(vt_csv, "--by", "tp+micro_batch"), cli_json("--korthikanti-table4")
    pub_ab = cli_json(pub_csv, "--tier", "A,B")
    pub_rows, vt_rows = V.read(pub_csv), V.read(vt_csv)
    layers = {r["case_id"]: r["n_layers"] for r in vt_rows}
    single = [c for c in vt["cases"] if c["single_node"]]
    multi = [c for c in vt["cases"] if not c["single_node"]]
    s_single, s_multi = vt["by_nodes"]["single-node"], vt["by_nodes"]["multi-node"]

    L = ["# Validation against published step times", "",
         "Generated by `python benchmarks/validation_report.py` from `python -m roofline validate FILE --json` on",
         "`shared/validation/published.csv`, `shared/validation/vtrain_measured.csv` and `--korthikanti-table4`.",
         "Do not edit by hand. Error = predicted / measured - 1 (negative = the model is too fast).",
         "Hardware profiles as loaded at generation time: "
         + ", ".join(sorted({f"`{c['gpu_id']}`" for c in pub["cases"] + vt["cases"]})) + ".", "",
         "## Summary", "",
         f"- published.csv tiers A+B: **MAPE {pct(pub_ab['mape'])}**, median {pct(pub_ab['median_abs_error'])}, "
         f"max {pct(pub_ab['max_abs_error'])} over {len(pub_ab['cases'])} rows (goal: MAPE <= 10 %, max <= 25 %).",
         f"- vtrain single-node (1,440 rows): **MAPE {pct(s_single['mape'])}**, median {pct(s_single['median_abs_error'])},"
         f" max {pct(s_single['max_abs_error'])} (goal: MAPE <= 10 %; vTrain itself reports 8.37 %).",
         f"- vtrain multi-node (26 rows, 3.6B on 64 A100): MAPE {pct(s_multi['mape'])}, max {pct(s_multi['max_abs_error'])}.",
         f"- Korthikanti 2022 Table 4 (one 22B layer, TP=8): total-time MAPE "
         f"{pct(mape([r['error'] for r in t4]))}.",
         "- NVIDIA's Megatron-Bridge tables (nemo_perf.csv, dense and MoE, BF16 to NVFP4): below, \"NVIDIA's "
         "Megatron-Bridge performance tables\".", "",
         "Reproduce: `python -m roofline validate --dataset published --tier A,B --by tier,gpu,layout` and",
         "`python -m roofline validate --dataset vtrain --summary --by nodes,layout,micro_batch`;",
         "`--plot out.png` draws predicted vs measured (log-log, y = x and +-10 % bands).", "",
         ]
    L += input_rules()

    L += ["## published.csv", ""]
    L += stats_table({**overall(pub), **{f"tier {k}": s for k, s in pub["by_tier"].items()},
                      **pub["by_gpu"]}, "group")
    L += ["", *case_table(pub), ""]
    L += ["Skipped:", ""] + [f"- `{s['case_id']}`: {s['reason']}" for s in pub["skipped"]] + [""]

    L += ["## vtrain_measured.csv", ""]
    L += stats_table({**overall(vt), **vt["by_nodes"]}, "group") + [""]
    L += stats_table(vt["by_micro_batch"], "micro-batch") + [""]
    L += stats_table(vt["by_layout"], "layout tp-pp-dp") + [""]
    L += ["The error against TP and micro-batch together (`--by tp+micro_batch`): the model is too fast where a small "
          "micro-batch meets wide TP, the regime where the vTrain hosts issue the kernels more slowly than the "
          "GPUs run them (section 1 below), and that is where the ranking of plans fails (issue 17).", ""]
    L += stats_table(vt["by_tp+micro_batch"], "tp, micro-batch") + [""]
    worst = sorted(vt["cases"], key=lambda c: c["error"])[:8]
    L += ["Worst rows:", "", *case_table({"cases": worst}), ""]
    if vt["skipped"]:
        L += ["Skipped:", ""] + [f"- `{s['case_id']}`: {s['reason']}" for s in vt["skipped"]] + [""]

    L += ["## Korthikanti et al. 2022, Table 4 (one layer of the 22B model, TP = 8)", "",
          "Assumptions: the 22B setting of their Table 3/5 (h 6144, 64 heads, s 2048, micro-batch 4, one DGX A100 node, "
          "`megatron-lm-2021` defaults); one layer = 2-layer minus 1-layer model (pp = dp = 1, one micro-batch), so "
          "embedding, LM head and optimizer cancel; forward = layer forward + forward TP communication; backward = "
          "layer backward + recompute + the remaining TP communication.", "",
          "| config | fwd meas | fwd pred | bwd meas | bwd pred | total meas | total pred | error |",
          "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in t4:
        L.append(f"| {r['config']} | {r['measured_fwd_ms']:.1f} | {r['predicted_fwd_ms']:.1f} | {r['measured_bwd_ms']:.1f}"
                 f" | {r['predicted_bwd_ms']:.1f} | {r['measured_total_ms']:.1f} | {r['predicted_total_ms']:.1f}"
                 f" | {pct(r['error'], True)} |")
    L.append("")

    # ---- error analysis ----------------------------------------------------------------------------
    L += ["## Error analysis: what drives the residual", "",
          "Ranked by how much MAPE each effect explains. What-ifs are computed by this script on copies of the "
          "inputs; none of them is applied to the model.", ""]
    # 1. host-bound floor on vtrain
    per = defaultdict(list)
    for c in single:
        n = layer_slots(c, layers[c["case_id"]])
        per[(c["plan"]["tp"], c["plan"]["mb"])].append((c["measured_s"] / n, c["predicted_s"] / n, c["error"]))
    mb1 = [c["error"] for c in single if c["plan"]["mb"] == 1]
    mb8 = [c["error"] for c in single if c["plan"]["mb"] >= 8]
    floor_tp = {tp: np.median([m for (t, mb), v in per.items() if t == tp and mb == 1 for m, _, _ in v]) for tp in (1, 2, 4, 8)}
    L += [f"### 1. Host/launch-bound floor (vtrain single-node, now {pct(s_single['mape'])})", "",
          f"Rows with micro-batch 1 under-predict by {pct(np.mean(mb1), True)} on average, rows with micro-batch >= 8 by "
          f"{pct(np.mean(mb8), True)} (MAPE {pct(mape(mb8))}). Measured time per layer per micro-batch slot "
          "(step / ((m + p - 1) l / p); forward + recompute + backward) stays at "
          + ", ".join(f"{1e3 * v:.1f} ms (tp {k})" for k, v in floor_tp.items())
          + " at micro-batch 1 whatever the hidden size (1024 or 2048) and the GPU work (GPU time alone: 1-3 ms): "
          "the GPUs wait for the host (PyTorch eager + Megatron-DeepSpeed + activation checkpointing issue "
          "~100-150 kernels per layer slot at ~20-30 us each).", "",
          "| tp | micro-batch | rows | measured ms / layer-slot | predicted | mean error |", "|---:|---:|---:|---:|---:|---:|"]
    for (tp, mb), v in sorted(per.items()):
        a = np.array(v)
        L.append(f"| {tp} | {mb} | {len(a)} | {1e3 * np.median(a[:, 0]):.2f} | {1e3 * np.median(a[:, 1]):.2f} | "
                 f"{pct(a[:, 2].mean(), True)} |")
    hw = V.build_case(next(r for r in vt_rows if r["case_id"].startswith("vtrain_single"))).hw
    host_slot = hw.host_fwd + hw.host_bwd + hw.host_rc
    L += ["", f"The model now carries this floor (`calibrate host`, the Megatron-DeepSpeed code path measured on the "
          f"development machine plus 5 us per kernel launch): {1e3 * host_slot:.2f} ms per layer slot with full "
          f"recomputation, {1e3 * (hw.host_emb + hw.host_head + hw.host_mb):.2f} ms per micro-batch for the "
          "embedding, LM head + cross-entropy and the training loop's own work. What is left is read off the "
          "structure of the data: within each (h, tp, pp, dp, micro-batch) group the measured steps are exactly "
          "linear, T = m (l a + e) + l c + d with m micro-batches and l layers (a = time per layer slot, "
          "e = per micro-batch outside the layers, c and d = per step), so the same fit on measured and on "
          "predicted times shows which term is off (pp = 1, dp = 1 or 2, micro-batch 1-4):", "",
          "| h | tp | micro-batch | a meas ms | a pred | e meas ms | e pred |", "|---:|---:|---:|---:|---:|---:|---:|"]
    groups = defaultdict(list)
    for c in single:
        p = c["plan"]
        if p["pp"] == 1 and p["dp"] <= 2 and p["mb"] <= 4:
            r = next(x for x in vt_rows if x["case_id"] == c["case_id"])
            groups[(r["d_model"], p["tp"], p["mb"], p["dp"])].append(
                (p["gb"] // (p["mb"] * p["dp"]), r["n_layers"], c["measured_s"], c["predicted_s"]))
    fits = {}
    for (h, tp, mb, dp), v in sorted(groups.items()):
        a = np.array(v, dtype=float)
        if len(a) < 5 or (h, tp, mb) in fits:
            continue
        X = np.c_[a[:, 0] * a[:, 1], a[:, 0], a[:, 1], np.ones(len(a))]
        fm, fp = (np.linalg.lstsq(X, a[:, k], rcond=None)[0] * 1e3 for k in (2, 3))
        fits[(h, tp, mb)] = (fm, fp)
        L.append(f"| {h} | {tp} | {mb} | {fm[0]:.2f} | {fp[0]:.2f} | {fm[1]:.2f} | {fp[1]:.2f} |")
    floor = [fm[0] for (h, tp, mb), (fm, fp) in fits.items() if tp <= 4 and mb == 1]
    L += ["", f"- **Layer floor**: measured {min(floor):.1f}-{max(floor):.1f} ms per layer slot at micro-batch 1 and "
          f"tp <= 4 against the modelled {1e3 * host_slot:.2f} ms: the issue rate measured here is about "
          f"{np.median(floor) / (1e3 * host_slot):.2f}x faster than on the A100 hosts of these runs. Not the PyTorch "
          "version: vTrain's stack (torch 2.0.1, Python 3.9/3.10) issues a layer 0.8-0.9x as long as torch 2.13 on "
          "Python 3.11 on the same VM (docs/calibration.md); what is left is the host CPU and the real CUDA launch path, which this machine "
          "cannot run. "
          "`calibrate host --device cuda:0` on the target node replaces the default with that node's own numbers.",
          "- **tp 8 at micro-batch 1**: a further ~1.5 ms per layer slot (6 tensor-parallel all-reduces per slot: "
          "the 8 host-bound ranks meet at every one, so each waits for the slowest rank's issue jitter; the "
          "nccl-tests latency of a 2-4 MB all-reduce, ~93 us, is already in the model). Not modelled.",
          "- **Outside the layers at tp 1**: e is about twice the model's (LM head GEMMs over the whole 50,304-entry "
          "vocabulary, fp32 cross-entropy and the embedding gradient on one GPU); at tp >= 2 the same terms are "
          "within ~30 %. The operator fits of the LM-head GEMM shape and the cross-entropy are within their held-out "
          "error on the Perlmutter data, so the gap is specific to these runs; not explained."]
    for f in (1.2, 1.3):
        e = list(what_if([r for r in vt_rows if r["case_id"].startswith("vtrain_single")],
                    lambda c, f=f: {**inputs(c.model, c.plan, c.hw), **{k: f * getattr(c.hw, k) for k in (
                        "host_fwd", "host_bwd", "host_rc", "host_emb", "host_head", "host_mb")}}).values())
        L.append(f"- Sensitivity (not applied): host issue times x {f} give single-node MAPE {pct(mape(e))}.")
    L.append("")
    # 2. H100 compute efficiency (the analyses read rows that state their layout: a chosen layout's error is another)
    stated = {r["case_id"] for r in pub_rows if V.layout_stated(r)}
    h100 = [c for c in pub["cases"] if c["gpu_id"] == "h100-sxm" and c["case_id"] in stated]
    if h100:
        rows_h = [r for r in pub_rows if r["gpu_id"] == "h100-sxm" and r["case_id"] in stated]
        no_clock = what_if(rows_h, lambda c: {**inputs(c.model, c.plan, c.hw), "clock": 1.0})
        mfu = {r["case_id"]: r for r in rows_h}
        imp = [float(mfu[c["case_id"]]["measured_mfu"] or "nan") * c["measured_s"] / c["predicted_s"] for c in h100]
        rep = [float(mfu[c["case_id"]]["measured_mfu"] or "nan") for c in h100]
        implied, reported = (f"{100 * np.nanmin(v):.0f}-{100 * np.nanmax(v):.0f} %" for v in (imp, rep))
        ov0 = what_if(rows_h, lambda c: dataclasses.replace(c, plan=dataclasses.replace(c.plan, overlap_tp=0.0)))
        v1h = what_if(rows_h, lambda c: dataclasses.replace(c, plan=dataclasses.replace(
            c.plan, interleave=1, schedule="1f1b", overlap_pp=0.0)) if c.plan.pp > 1 else c)
        worst_h = max(h100, key=lambda c: abs(c["error"]))
        L += [f"### 2. H100 rows (published H100 rows: mean {pct(np.mean([c['error'] for c in h100]), True)}, "
              f"MAPE {pct(mape([c['error'] for c in h100]))})", "",
              "The H100 compute curves are the GH200 (Vista) fits, short microbenchmarks at boost clock, with GEMM "
              "efficiency capped at the Hopper SXM matmul ceiling (828.0 / 989). A 700 W H100 running GEMMs back to "
              "back settles at its power-capped clock: `sustained_clock: 0.849` (H200 SXM, same die and power cap, "
              "sustained 702.9 vs burst 828.0 TFLOP/s, mamf-finder). Without it (kappa = 1) the "
              f"H100 rows would be at mean {pct(np.mean(list(no_clock.values())), True)}, MAPE "
              f"{pct(mape(no_clock.values()))}. With it the predicted times imply {implied} MFU in the README's FLOP "
              f"convention, where it reports {reported}.", "",
              f"Pipeline rows carry most of the rest: with plain 1F1B (v = 1) instead of the interleave default the H100 "
              f"rows would be at mean {pct(np.mean(list(v1h.values())), True)}, MAPE {pct(mape(v1h.values()))}; the "
              "README does not state v, and the default's one-layer virtual stages for 119B (v = 23) and 462B (v = 7) "
              "give them an almost bubble-free pipeline. The worst row, "
              f"`{worst_h['case_id']}` ({pct(worst_h['error'], True)}), is the 32B at dp 48 and micro-batch 1 "
              "(default), where the fp32 gradient reduce-scatter over 48 nodes (16 GB per rank) can hide only behind "
              "one micro-batch's backward; a larger unstated micro-batch would hide more of it.", "",
              f"TP overlap sensitivity: with overlap_tp = 0 instead of (tp-1)/tp the H100 MAPE would be "
              f"{pct(mape(ov0.values()))} (mean {pct(np.mean(list(ov0.values())), True)}); we keep (tp-1)/tp because the "
              "README states `--tp-comm-overlap`, and do not choose values by their fit.", ""]
    # 3. pipeline rows of Narayanan
    nar = [c for c in pub["cases"] if c["case_id"].startswith("narayanan") and c["case_id"] in stated]
    pp1 = [c["error"] for c in nar if c["plan"]["pp"] == 1]
    ppn = [c for c in nar if c["plan"]["pp"] > 1]
    v1 = what_if([r for r in pub_rows if r["case_id"] in stated], lambda c: dataclasses.replace(c, plan=dataclasses.replace(
        c.plan, interleave=1, schedule="1f1b", overlap_pp=0.0)) if c.row["interleave"] is None and c.plan.pp > 1 else c,
        cases={c["case_id"] for c in ppn})
    bub = np.mean([c["breakdown_s"]["pp_bubble"] / c["predicted_s"] for c in ppn]) if ppn else 0
    t2 = {c["case_id"]: c for c in pub["cases"] if "529b" in c["case_id"] and "narayanan21_t2" in c["case_id"]}
    pts = sorted((c["plan"]["gb"] / (c["plan"]["mb"] * c["plan"]["dp"]), c["measured_s"]) for c in t2.values())
    slope, icpt = np.polyfit([m for m, _ in pts], [t for _, t in pts], 1) if len(pts) > 1 else (1.0, float("nan"))
    b_slots = icpt / slope
    meas = {c["case_id"]: c["measured_s"] for c in pub["cases"]}
    k530, n530 = meas.get("korthikanti22_t5_530b_full", float("nan")), meas.get("narayanan21_t2_ptdp_529b_2240gpu", float("nan"))
    L += [f"### 3. Narayanan 2021 rows with pipeline parallelism (mean {pct(np.mean([c['error'] for c in ppn]), True)} "
          f"vs {pct(np.mean(pp1), True)} for pp = 1)", "",
          f"With the interleave default (smallest v >= 2) the bubble is {pct(bub)} of the predicted step on average. "
          f"With v = 1 (plain 1F1B) these rows would be at mean {pct(np.mean(list(v1.values())), True)} "
          f"(MAPE {pct(mape(v1.values()))}). Table 2 (530B, tp 8 pp 35, B = 2240, dp 2/4/8 so m = 1120/560/280) "
          f"measures the bubble directly: fitting T = (m + B_slots) t_mb to the three points gives B_slots ~ {b_slots:.0f} "
          "micro-batch slots, against p - 1 = 34 for plain 1F1B and 34/3 = 11.3 for v = 3. The paper says the "
          "interleaved schedule was used for Table 1 but not which v; the data suggest a small v or an interleaved "
          "schedule whose per-virtual-stage send/recv (not overlapped in 2021, inter-node here) costs as much as the "
          "bubble it removes. Same configuration in Korthikanti 2022 Table 5 (dp 1, m 280): "
          f"measured {k530:.2f} s vs {n530:.2f} s with dp 8, a {100 * (n530 / k530 - 1):.0f} % difference that the DP all-reduce (< 1 s even fully exposed) does not explain: 2021 vs 2022 "
          "software, and inter-node contention between DP and PP traffic, which the model does not represent.", ""]
    flat = [c["error"] for c in pub["cases"] if c["gpu_id"].startswith("a100") and c["plan"]["pp"] == 1]
    wm = min(multi, key=lambda c: c["error"]) if multi else None
    L += ["### 4. What remains", "",
          f"- A100 rows without pipeline parallelism (Narayanan pp = 1, Korthikanti 22B) are within {pct(min(flat), True)}"
          f" .. {pct(max(flat), True)}, those with pipeline parallelism below: predicted throughput rises with the "
          "hidden size faster than measured (Narayanan 18.4B at h 6144 over-predicted, 1T at h 25600 under-predicted). "
          "The matmul ceiling is applied when a profile loads, after the fit. Tried: fitting the GEMMs with eta bounded "
          "by it (so that t0 and the size saturation adjust, as the batched GEMMs are fitted): held-out GEMM backward "
          "4.3 -> 5.7 % (A100) and 5.0 -> 8.9 % (GH200: its short benchmarks run above the sustained ceiling), "
          "published MAPE 8.5 -> 9.2 %; not adopted.",
          "- vtrain rows with micro-batch >= 8 (GPU-bound) are at MAPE " + pct(mape(mb8)) + "; the multi-node 3.6B rows "
          f"at {pct(s_multi['mape'])}. Worst: `{wm['case_id']}` ({pct(wm['error'], True)}, tp {wm['plan']['tp']} "
          f"dp {wm['plan']['dp']} micro-batch {wm['plan']['mb']}): its step doubles from micro-batch 32 to 64 at the same "
          "tokens per step, and the model puts it at ~39 GiB per GPU, which would sit at the capacity of an A100-40GB "
          "(the source does not state the memory size; the CSV maps it to the 80 GB profile): allocator retries, "
          "not a formula term. The micro-batch 2 rows at tp 4/8 ("
          + ", ".join(pct(np.mean([e for _, _, e in per.get((tp, 2), [(0, 0, float('nan'))])]), True) for tp in (4, 8))
          + ") show the host floor of item 1.",
          "- Table 4 (one layer, no pipeline, no DP) is within a few %: the per-layer compute and TP terms are right at "
          "large shapes; the residual is in the step-level terms above.", ""]

    L += attribution_section({"published": pub_rows, "vtrain": vt_rows, "nemo": V.read(shared / "nemo_perf.csv"),
                              "memory (timed)": V.read(shared / "memory_measured.csv")})
    L += memory_section(shared / "memory_measured.csv")
    L += stage_section(shared / "memory_per_rank_simumax_b200.csv")
    L += tables_section(V.dataset_path("tables"))
    L += papers_section(V.dataset_path("papers"))
    L += nemo_section(shared / "nemo_perf.csv")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(L))
    print(f"wrote {args.out}")
    print(f"published A+B MAPE {pub_ab['mape']:.4f}; vtrain single-node MAPE {s_single['mape']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
