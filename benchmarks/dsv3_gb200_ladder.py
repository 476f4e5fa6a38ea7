"""DeepSeek-V3 on 256 GB200, from an eager baseline to an optimized run: the model against a measured ladder that no
validation file holds.

Source: NVIDIA/Megatron-LM docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md
("Optimizing DeepSeek-V3 Training Performance on NVIDIA GB200 NVL72", 2025-11; its summary table). Megatron-Core with
Transformer Engine, MXFP8, TP1 / PP8 / VPP4 / EP32, MBS 1, GBS 2048, sequence 4096, pipeline layout Et|(tt|)*30L, BF16
optimizer moments, recomputation of the dense layers' MLP and the MLA up-projection (later the MoE activation
instead), thirteen steps from 494.46 to 970.01 model TFLOP/s per GPU. Its authors name CPU overhead (the host issuing
kernels slower than the GPU runs them) as the first bottleneck of the eager baseline.

Each step is priced with the switches the model has (dispatcher, recompute modules); a step the model has no switch
for (a kernel fusion, CPU binding, tuning) is priced as the step before it. The partial CUDA graphs of the source
(attention, router, preprocess) take the captured modules' host time (validate.graph_scope, plan graph_modules); the
experts, the dispatcher and the token-count synchronization stay eager.
TFLOP/s become step times on this model's FLOP count per step (the source's own count may differ by a few percent;
the ratios between steps do not depend on it). Nothing is fitted to these runs.

    python benchmarks/dsv3_gb200_ladder.py
"""
from __future__ import annotations

from roofline.views import validate as V

SOURCE = ("NVIDIA/Megatron-LM docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md "
          "(summary table)")
ROW = {"source": SOURCE, "framework": "Megatron-Core", "gpu_id": "gb200", "gpus_per_node": "72", "n_gpus": "256",
       "precision": "MXFP8", "model": "DeepSeek-V3", "n_layers": "61", "d_model": "7168", "n_heads": "128",
       "ffn_hidden": "18432", "mlp": "swiglu", "vocab": "129280", "tied": "n", "attention": "mla",
       "mla_q_lora_rank": "1536", "mla_kv_lora_rank": "512", "mla_qk_nope_head_dim": "128",
       "mla_qk_rope_head_dim": "64", "mla_v_head_dim": "128", "n_experts": "256", "top_k": "8",
       "moe_ffn_hidden": "2048", "n_shared_experts": "1", "shared_ffn_hidden": "2048", "first_dense_layers": "3",
       "mtp": "0", "seq_len": "4096", "global_batch": "2048", "micro_batch": "1", "tp": "1", "pp": "8",
       "interleave": "4", "ep": "32", "cp": "1", "dp": "32", "optimizer_sharding": "distributed", "seq_parallel": "n",
       "recompute": "selective", "tier": "B", "measured_iter_time_s": "1"}
LAYOUT = "pp_layout Et|(tt|)*30L | BF16 optimizer moments | fp8_param_gather"
G = "attn, moe_router, moe_preprocess"      # the source's partial CUDA graph scope
# (step, measured TFLOP/s per GPU, dispatcher, recompute modules, CUDA graph scope or "", the model's switch or "")
STEPS = (
    ("baseline", 494.46, "alltoall", "mlp,mla_up_proj", "", "baseline"),
    ("fuse scaling-factor allocation, permute kernel", 529.55, "alltoall", "mlp,mla_up_proj", "", ""),
    ("router fusion", 540.00, "alltoall", "mlp,mla_up_proj", "", ""),
    ("DeepEP", 566.07, "deepep", "mlp,mla_up_proj", "", "dispatcher"),
    ("no MLA up-projection recompute", 610.71, "deepep", "mlp,moe_act", "", "recompute modules"),
    ("CUDA graphs (attention, router, preprocess)", 663.27, "deepep", "mlp,moe_act", G, "CUDA graph modules"),
    ("tune DeepEP", 691.49, "deepep", "mlp,moe_act", G, ""),
    ("CPU-side optimization (bindpcie)", 762.12, "deepep", "mlp,moe_act", G, ""),
    ("PDL for quantization, fused swizzle", 797.67, "deepep", "mlp,moe_act", G, ""),
    ("graphs capture the shared expert", 829.93, "deepep", "mlp,moe_act", G, ""),
    ("HybridEP", 943.56, "hybridep", "mlp,moe_act", G, "dispatcher"),
    ("CPU-side optimization", 956.21, "hybridep", "mlp,moe_act", G, ""),
    ("quantization fused into normalization", 970.01, "hybridep", "mlp,moe_act", G, ""),
)


def rows() -> list[dict]:
    """The steps as validate reads a CSV of them."""
    out = []
    for i, (_, _, disp, modules, scope, _) in enumerate(STEPS):
        dispatcher = "MoE token dispatcher alltoall" if disp == "alltoall" else f"MoE flex dispatcher={disp}"
        graphs = (f"CUDA graph impl=transformer_engine scope=[{', '.join(repr(s) for s in scope.split(', '))}]"
                  if scope else "CUDA graphs: none")
        out.append(dict(ROW, case_id=f"mcore_dsv3_gb200_step{i:02d}", recompute_modules=modules,
                        settings=f"{dispatcher} | {graphs} | {LAYOUT}"))
    return V.read_dicts(out, "ladder.csv")


def main() -> None:
    cases = [V.build_case(r) for r in rows()]
    out = V.evaluate_cases(cases)
    flops = [float(f) for f in out["flops"]]
    print(f"DeepSeek-V3, 256 x GB200, MXFP8, TP1 PP8 VPP4 EP32, GBS 2048 x 4096: {SOURCE}\n")
    print("| step | measured TFLOP/s per GPU | measured step (this FLOP count) | predicted | error | what the model "
          "sees |")
    print("|---|---|---|---|---|---|")
    for (name, tflops, _, _, _, switch), c, f, t, h in zip(STEPS, cases, flops, out["step_time"],
                                                          out["t_host_overhead"]):
        meas = f / (tflops * 1e12 * c.plan.n_gpus)
        sees = switch or "no switch: priced as the step before"
        print(f"| {name} | {tflops:.2f} | {meas:.2f} s | {float(t):.2f} s | {100 * (float(t) / meas - 1):+.1f} % "
              f"| {sees} (host waits {float(h):.2f} s) |")
    first, last = STEPS[0][1], STEPS[-1][1]
    t0, t1 = float(out["step_time"][0]), float(out["step_time"][-1])
    print(f"\nspeed-up from the baseline to the last step: measured {last / first:.2f}x, predicted {t0 / t1:.2f}x")


if __name__ == "__main__":
    main()
