"""Megatron-Core's EP overlap on published measured runs that are not in any validation file: Megatron-Bridge's own
A/B of `overlap_moe_expert_parallel_comm` (skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md in
NVIDIA-NeMo/Megatron-Bridge, commit 067f987df, Apache-2.0): Qwen3-30B-A3B pretraining on 16 H100s (BF16, sequence 4096,
TP1 PP1 CP1 EP16, micro-batch 1, global batch 1024, force-balanced routing, flex dispatcher with HybridEP, Transformer
Engine CUDA graphs of the moe_router and moe_preprocess scopes, delayed wgrad off), steady-window step times:
overlap off 24.7138 s (iterations 5-20), overlap on 20.9920 s (independent run, iterations 41-50; 21.0725 s in the
search run). Their rank-0 Nsight comparison (skills/nemo-mbridge-perf-moe-comm-overlap/SKILL.md, same runs): the
communication beside GEMM and attention rose from 9.079 ms (0.11 % of the communication time) to 3,958.997 ms
(36.55 %), and the GPU-active interval union fell from 22.821 s to 21.221 s.

The same model, GPUs and batch with Megatron-Core's all-to-all dispatcher instead (docs/training/communication-overlap.md
in NVIDIA-NeMo/Megatron-Bridge @067f987df: "a 2026-05-18 current-main H100 x16 Qwen3 30B-A3B mock-data rerun with EP=16,
alltoall, CUDA graphs disabled, and moe_permute_fusion=false"): overlap off 41.25 s, on 31.31 s, on with
delay_wgrad_compute 31.20 s (steady state). The unfused permutation (moe_permute_fusion false: the permute and unpermute
as separate torch index ops) is not modelled: those rows are priced with the fused one.

The HybridEP pair's overlap-off Nsight figures also fit the profile default ``host.moe_sync`` (hardware/defaults.yaml):
the GPU idle they leave (the step less the GPU-active union) beyond what the rest of the host model prices, per MoE
layer forward; the all-to-all dispatcher's runs judge it.

The rows go through `validate`'s own input handling (views/validate.py build_case: the settings text is read as for
the NeMo rows), so they are priced exactly as a validation row would be. Nothing is fitted to them
but that one default, fitted as said above.

    python benchmarks/ep_overlap_mbridge.py
"""
from __future__ import annotations


from dataclasses import replace

from roofline.views import validate as V

SOURCE = ("NVIDIA-NeMo/Megatron-Bridge skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md "
          "'HybridEP Production-Shape Benchmark' @ 067f987df")
ROW = {"source": SOURCE, "framework": "Megatron-Bridge on Megatron-Core", "gpu_id": "h100-sxm", "gpus_per_node": "8",
       "n_gpus": "16", "precision": "BF16", "model": "Qwen3-30B-A3B", "n_layers": "48", "d_model": "2048",
       "n_heads": "32", "n_kv_heads": "4", "head_dim": "128", "ffn_hidden": "6144", "mlp": "swiglu",
       "vocab": "151936", "tied": "n", "attention": "gqa", "qk_layernorm": "y", "n_experts": "128", "top_k": "8",
       "moe_ffn_hidden": "768", "n_shared_experts": "0", "first_dense_layers": "0", "mtp": "0", "seq_len": "4096",
       "global_batch": "1024", "micro_batch": "1", "tp": "1", "pp": "1", "dp": "16", "cp": "1", "ep": "16",
       "optimizer_sharding": "distributed", "seq_parallel": "n", "recompute": "none", "tier": "A",
       "settings": "MoE flex dispatcher=hybridep | CUDA graph impl=transformer_engine scope=['moe_router', "
                   "'moe_preprocess'] | force-balanced routing"}
# their rank-0 Nsight figures, overlap off and on: communication beside GEMM/attention (s) and its share of all
# communication time, and the GPU-active interval union (s)
NSIGHT = {"beside": (9.079e-3, 3958.997e-3), "share": (0.0011, 0.3655), "active": (22.821, 21.221)}
RUNS = (("overlap off", "", 24.7138), ("overlap on", " | EP A2A overlap (delay_wgrad_compute=False)", 20.9920))


A2A_SOURCE = ("NVIDIA-NeMo/Megatron-Bridge docs/training/communication-overlap.md 'Measured repo evidence' @ 067f987df")
A2A_SETTINGS = "MoE token dispatcher alltoall | CUDA graphs: none | moe_permute_fusion=false | force-balanced routing"
A2A_RUNS = (("overlap off", "", 41.25), ("overlap on", " | EP A2A overlap (delay_wgrad_compute=False)", 31.31),
            ("overlap on, delay wgrad", " | EP A2A overlap + delay_wgrad", 31.20))


# further runs of the same job (16 H100, BF16, GBS 1024, MBS 1, sequence 4096, EP 16) in the same repository @067f987df:
# the canonical recipe (skills/nemo-mbridge-perf-moe-dispatcher-selection/SKILL.md "Qwen3 30B A3B on H100": HybridEP with
# 32 SMs and 64-token combine chunks, EP overlap, delayed wgrad off, graphs over moe_router and moe_preprocess, 20.14729 s
# at 299.352 model TFLOP/s per GPU: the same FLOPs per step as the 287.305 at 20.9920 s above) and the all-to-all job
# with and without Transformer Engine graphs over attention, router and preprocess (skills/nemo-mbridge-perf-cuda-graphs/
# SKILL.md item 13, 2026-05-18: 42.00 s vs 41.36 s eager)
OTHER_RUNS = (
    ("canonical recipe: HybridEP, EP overlap, router and preprocess graphs",
     "skills/nemo-mbridge-perf-moe-dispatcher-selection/SKILL.md", ROW["settings"] + " | EP A2A overlap "
     "(delay_wgrad_compute=False)", 20.14729),
    ("all-to-all, eager", "skills/nemo-mbridge-perf-cuda-graphs/SKILL.md",
     "MoE token dispatcher alltoall | CUDA graphs: none | force-balanced routing", 41.36),
    ("all-to-all, attention, router and preprocess graphs", "skills/nemo-mbridge-perf-cuda-graphs/SKILL.md",
     "MoE token dispatcher alltoall | CUDA graph impl=transformer_engine scope=['attn', 'moe_router', "
     "'moe_preprocess'] | force-balanced routing", 42.00),
)


def other_rows() -> list[dict]:
    """OTHER_RUNS as validate reads them."""
    return V.read_dicts([dict(ROW, case_id=f"mbridge_qwen3_30b_h100_ep16_other_{i}", source=src, settings=s,
                              measured_iter_time_s=str(t)) for i, (_, src, s, t) in enumerate(OTHER_RUNS)], "runs.csv")


def rows(a2a: bool = False) -> list[dict]:
    """The runs as CSV rows: HybridEP (RUNS) or, with ``a2a``, the all-to-all dispatcher's (A2A_RUNS)."""
    runs, base, source, tag = ((A2A_RUNS, A2A_SETTINGS, A2A_SOURCE, "a2a") if a2a
                               else (RUNS, ROW["settings"], SOURCE, "hybridep"))
    return [dict(ROW, case_id=f"mbridge_qwen3_30b_h100_ep16_{tag}_{name.replace(' ', '_').replace(',', '')}",
                 source=source, settings=base + extra, measured_iter_time_s=str(t)) for name, extra, t in runs]


def read(a2a: bool = False) -> list[dict]:
    """The runs as validate reads a CSV of them (views/validate.py read_dicts: numbers parsed, blanks None)."""
    return V.read_dicts(rows(a2a), "runs.csv")


def with_sync(cases, host_sync: float | None):
    """The cases with ``host_sync`` seconds in place of their profile's ``host.moe_sync`` (None: as they are)."""
    return cases if host_sync is None else [replace(c, hw=replace(c.hw, host_sync=host_sync)) for c in cases]


def idle(cases, host_sync: float | None = None) -> list[float]:
    """Predicted time each case's GPU waits for the host (the step less its GPU-active time), with the profile's
    ``host.moe_sync`` or ``host_sync`` seconds in its place."""
    return [float(v) for v in V.evaluate_cases(with_sync(cases, host_sync))["t_host_overhead"]]


def fit_moe_sync() -> tuple[float, float]:
    """``host.moe_sync`` fitted to the overlap-off HybridEP run: the GPU idle its Nsight comparison leaves (the step
    less the GPU-active interval union) less what the rest of the host model prices, over the run's synchronizations
    (the predicted idle is linear in moe_sync while the run stays GPU-bound). Returns (seconds, synchronizations)."""
    cases = [V.build_case(r) for r in read()][:1]
    base, one = idle(cases, 0.0)[0], idle(cases, 1e-3)[0]
    syncs = (one - base) / 1e-3
    return (RUNS[0][2] - NSIGHT["active"][0] - base) / syncs, syncs


def main() -> None:
    cases = [V.build_case(r) for r in read()]
    out = V.evaluate_cases(cases)
    step = [float(v) for v in out["step_time"]]
    ep = [float(v) for v in out["t_ep_comm"]]
    raw = ep[0]                                   # the overlap-off run: the whole all-to-all, exposed
    busy = [s - float(h) for s, h in zip(step, out["t_host_overhead"])]   # the step less the GPU's waits on the host
    print(f"Qwen3-30B-A3B, 16 x H100, EP 16, HybridEP: {SOURCE}\n")
    print("| run | measured | predicted | error | exposed EP all-to-all (predicted) |")
    print("|---|---|---|---|---|")
    for (name, _, meas), c, t, e in zip(RUNS, cases, step, ep):
        print(f"| {name} (overlap_ep {c.plan.overlap_ep:g}, delay_wgrad {c.plan.delay_wgrad}) | {meas:.2f} s "
              f"| {t:.2f} s | {100 * (t / meas - 1):+.1f} % | {e:.2f} s |")
    print(f"\nspeed-up from the overlap: measured {RUNS[0][2] / RUNS[1][2]:.3f}x, predicted {step[0] / step[1]:.3f}x")
    # Nsight, rank 0 (the source's figures): communication concurrent with GEMM and attention, ms and share of all
    # communication time, overlap off and on; the share gives the communication time itself
    off, on = (b / s for b, s in zip(NSIGHT["beside"], NSIGHT["share"]))
    print(f"communication time per step (Nsight, all collectives): {off:.2f} s overlap off, {on:.2f} s on; "
          f"predicted EP all-to-all alone: {raw:.2f} s")
    print(f"GPU-active time (Nsight interval union): measured {NSIGHT['active'][0]:.2f} s with the overlap off, "
          f"{NSIGHT['active'][1]:.2f} s on; "
          f"predicted (step less host waits) {busy[0]:.2f} s and {busy[1]:.2f} s")
    print(f"share of it beside compute with the overlap: measured {100 * NSIGHT['share'][1]:.2f} %, predicted {100 * (1 - ep[1] / raw):.1f} % "
          f"hidden (each all-to-all behind its paired block, the measured share EP_OVERLAP_HIDDEN of it)")
    fit, syncs = fit_moe_sync()
    print(f"GPU idle (step less GPU-active), overlap off: measured {RUNS[0][2] - NSIGHT['active'][0]:.3f} s; predicted "
          f"{float(out['t_host_overhead'][0]):.3f} s, {idle(cases[:1], 0.0)[0]:.3f} s of it without the MoE forward's "
          f"synchronization; host.moe_sync fitted here: {1e6 * fit:.0f} us over {syncs:.0f} synchronizations "
          f"(48 MoE layers x 64 micro-batches)")
    cases = [V.build_case(r) for r in read(a2a=True)]
    out = V.evaluate_cases(cases)
    step = [float(v) for v in out["step_time"]]
    print(f"\nThe same with the all-to-all dispatcher, CUDA graphs off: {A2A_SOURCE}\n")
    print("| run | dispatcher | measured | predicted | error | exposed EP all-to-all (predicted) |")
    print("|---|---|---|---|---|---|")
    for (name, _, meas), c, t, e in zip(A2A_RUNS, cases, step, out["t_ep_comm"]):
        print(f"| {name} (overlap_ep {c.plan.overlap_ep:g}, delay_wgrad {c.plan.delay_wgrad}) | {c.plan.ep_dispatcher} "
              f"| {meas:.2f} s | {t:.2f} s | {100 * (t / meas - 1):+.1f} % | {float(e):.2f} s |")
    print(f"\nspeed-up from the overlap: measured {A2A_RUNS[0][2] / A2A_RUNS[1][2]:.3f}x, predicted {step[0] / step[1]:.3f}x; "
          f"time the overlap saves: measured {A2A_RUNS[0][2] - A2A_RUNS[1][2]:.2f} s, predicted {step[0] - step[1]:.2f} s")
    base = [float(v) for v in V.evaluate_cases(with_sync(cases, 0.0))["step_time"]]
    print("error without the MoE forward's synchronization (host.moe_sync 0): "
          + ", ".join(f"{100 * (t / m - 1):+.1f} %" for t, (_, _, m) in zip(base, A2A_RUNS)))
    cases = [V.build_case(r) for r in other_rows()]
    step = [float(v) for v in V.evaluate_cases(cases)["step_time"]]
    base = [float(v) for v in V.evaluate_cases(with_sync(cases, 0.0))["step_time"]]
    print("\nOther runs of the same job, NVIDIA-NeMo/Megatron-Bridge @ 067f987df (never fitted):\n")
    print("| run | source | measured | predicted | error | error without host.moe_sync |")
    print("|---|---|---|---|---|---|")
    for (name, src, _, meas), t, b in zip(OTHER_RUNS, step, base):
        print(f"| {name} | {src} | {meas:.2f} s | {t:.2f} s | {100 * (t / meas - 1):+.1f} % | {100 * (b / meas - 1):+.1f} % |")


if __name__ == "__main__":
    main()
