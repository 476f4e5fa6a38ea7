"""One MoE layer against Megatron-Core's own timings of it: the per-layer regression baselines of Megatron-LM.

Megatron-LM keeps forward and backward times of a single ``MoELayer`` (router, token dispatcher, grouped experts,
combine, shared expert) on one node of 8 H100s, EP 8, TP 1, 4096 tokens per GPU (sequence 4096, micro-batch 1),
force-balanced routing, fused permutation and router, Transformer Engine's grouped GEMM, for two proxies
(tests/functional_tests/test_cases/common/moe_perf/test_cases.py @ Megatron-LM main, 2026-08; baseline.json recorded
with cf39a4ddcf, 2025-12-17, Apache-2.0 / BSD-3):

- Mixtral proxy: hidden 4096, 8 experts of FFN 14336, top-2 (one expert per GPU);
- DeepSeek proxy: hidden 7168, 32 experts of FFN 2048, top-8 in 4 of 8 groups, one shared expert of 2048 (four
  experts per GPU);

each with three dispatchers (NCCL all-to-all, DeepEP, HybridEP) in BF16 and FP8 blockwise (TE Float8BlockScaling).
The timings are CUDA events around ``layer(x)`` and ``output.backward(g)``, means of 20 iterations after 5 warm-up
ones, a large GEMM launched first "to hide the router launch overhead".

This script prices the same layer from a validation row per case (views/validate.py build_case, settings read as for
the NeMo rows): the MoE operators of the layer (router, permutation, grouped expert GEMMs and activation, shared
expert, the recipe's casts of those GEMMs' operands) and its EP all-to-all, forward and backward. The attention half
of the transformer layer and its norms are not in the benchmark and are left out. The GPUs run short bursts here, so
the layer is priced at the profile's burst clock (sustained_clock 1, no clock spread), as the profile's curves were
measured, not at a training run's power-capped clock. Nothing is fitted to these timings.

    python benchmarks/moe_layer_mcore.py
"""
from __future__ import annotations

import dataclasses

from roofline.model.formulas import compute as C
from roofline.model.formulas import symbols as S
from roofline.model.predict import inputs, predict, value_at
from roofline.views import validate as V

SOURCE = "NVIDIA/Megatron-LM tests/functional_tests/test_cases/common/moe_perf/baseline.json (cf39a4ddcf)"
# case -> (forward ms, backward ms), baseline.json
MEASURED = {
    "mixtral_a2a_tp1ep8_bf16": (4.326888, 7.684333), "mixtral_deepep_tp1ep8_bf16": (4.635550, 7.854357),
    "mixtral_hybridep_tp1ep8_bf16": (4.343, 7.741),
    "mixtral_a2a_tp1ep8_fp8": (3.787632, 6.618246), "mixtral_deepep_tp1ep8_fp8": (4.101150, 6.827200),
    "mixtral_hybridep_tp1ep8_fp8": (3.701, 6.572),
    "deepseek_a2a_tp1ep8_bf16": (7.119170, 10.482670), "deepseek_deepep_tp1ep8_bf16": (5.681718, 9.055138),
    "deepseek_hybridep_tp1ep8_bf16": (5.390829, 8.795002),
    "deepseek_a2a_tp1ep8_fp8": (7.609272, 10.126461), "deepseek_deepep_tp1ep8_fp8": (6.034773, 8.602114),
    "deepseek_hybridep_tp1ep8_fp8": (5.142886, 7.687486),
}
SHAPES = {"mixtral": {"d_model": 4096, "ffn_hidden": 14336, "moe_ffn_hidden": 14336, "n_experts": 8, "top_k": 2},
          "deepseek": {"d_model": 7168, "ffn_hidden": 2048, "moe_ffn_hidden": 2048, "n_experts": 32, "top_k": 8,
                       "n_shared_experts": 1, "shared_ffn_hidden": 2048}}
DISPATCHER = {"a2a": "", "deepep": "MoE flex dispatcher=deepep", "hybridep": "MoE flex dispatcher=hybridep"}
PRECISION = {"bf16": "BF16", "fp8": "FP8 blockwise"}
# the operators of Megatron-Core's MoELayer (formulas/compute.py layer_ops); the rest of the op list is attention
MOE_OPS = ("router", "router_topk", "moe_permute", "moe_sort_chunks", "moe_latent_down", "moe_latent_up", "mlp_up",
           "mlp_activation", "mlp_down", "shared_up", "shared_activation", "shared_down")


def rows() -> list[dict]:
    out = []
    for case in MEASURED:
        model, disp, _, prec = case.split("_")
        row = {"case_id": case, "source": SOURCE, "framework": "Megatron-Core", "gpu_id": "h100-sxm",
               "gpus_per_node": "8", "n_gpus": "8", "precision": PRECISION[prec], "model": f"{model} proxy",
               "n_layers": "1", "n_heads": "8", "vocab": "32000", "mlp": "swiglu", "seq_len": "4096",
               "global_batch": "8", "micro_batch": "1", "tp": "1", "pp": "1", "dp": "8", "cp": "1", "ep": "8",
               "recompute": "none", "tier": "A", "measured_iter_time_s": "1",
               "settings": " | ".join(s for s in (DISPATCHER[disp], "force-balanced routing") if s)}
        row.update({k: str(v) for k, v in SHAPES[model].items()})
        out.append(row)
    return out


def read() -> list[dict]:
    """The cases as validate reads a CSV of them (views/validate.py read_dicts: numbers parsed, blanks None)."""
    return V.read_dicts(rows(), "moe_perf.csv")


def layer_times(case) -> dict:
    """The model's MoE layer of ``case`` at burst clock: forward and backward (s), each its MoE operators plus its
    EP all-to-all, and the parts."""
    hw = dataclasses.replace(case.hw, sustained_clock=1.0, clock_spread=0.0)
    x = inputs(case.model, case.plan, hw)
    ops = [o for o in C.layer_ops(C.d_head, S.moe_ffn, C.moe, S.shared_ffn, variants=True) if o.name in MOE_OPS]
    ops.append(C.quantize_op([o for o in ops if o.cls == "gemm"]))
    comp = {d: sum(value_at(C.op_time(o, d), x) for o in ops) for d in ("fwd", "bwd")}
    raw = predict(case.model, case.plan, hw).raw
    ep_bwd = float(raw["t_layer_comm_bwd"])                  # TP 1, CP 1: the backward's exposed communication is EP
    ep_fwd = float(raw["t_layer_ep_comm"]) - ep_bwd
    return {"fwd": comp["fwd"] + ep_fwd, "bwd": comp["bwd"] + ep_bwd, "ep_fwd": ep_fwd, "ep_bwd": ep_bwd,
            "dispatcher": case.plan.ep_dispatcher, "dtype": case.plan.dtype}


def results() -> list[dict]:
    out = []
    for r in read():
        t = layer_times(V.build_case(r))
        f, b = MEASURED[r["case_id"]]
        out.append({"case": r["case_id"], "meas_fwd": f / 1e3, "meas_bwd": b / 1e3, **t})
    return out


def main() -> None:
    res = results()
    print(f"One MoE layer on 8 x H100 (EP 8, 4096 tokens per GPU), priced at burst clock: {SOURCE}")
    print()
    print("| case | dispatcher | precision | forward measured / predicted | backward measured / predicted | "
          "error fwd / bwd | EP all-to-all fwd (predicted) |")
    print("|---|---|---|---|---|---|---|")
    errs = []
    for r in res:
        ef, eb = r["fwd"] / r["meas_fwd"] - 1, r["bwd"] / r["meas_bwd"] - 1
        errs += [ef, eb]
        print(f"| {r['case']} | {r['dispatcher']} | {r['dtype']} | {1e3 * r['meas_fwd']:.2f} / {1e3 * r['fwd']:.2f} ms"
              f" | {1e3 * r['meas_bwd']:.2f} / {1e3 * r['bwd']:.2f} ms | {100 * ef:+.0f} % / {100 * eb:+.0f} % | "
              f"{1e3 * r['ep_fwd']:.2f} ms |")
    print()
    print(f"mean absolute error over the {len(errs)} forward and backward times: "
          f"{100 * sum(abs(e) for e in errs) / len(errs):.1f} %")
    for model in SHAPES:
        for prec in PRECISION:
            by = {r["dispatcher"]: r for r in res if r["case"].startswith(model) and r["case"].endswith(prec)}
            a2a = by["alltoall"]
            parts = []
            for disp in ("deepep", "hybridep"):
                m = (a2a["meas_fwd"] + a2a["meas_bwd"]) / (by[disp]["meas_fwd"] + by[disp]["meas_bwd"])
                p = (a2a["fwd"] + a2a["bwd"]) / (by[disp]["fwd"] + by[disp]["bwd"])
                parts.append(f"{disp} {m:.2f} / {p:.2f}")
            print(f"{model} {prec}: speed-up over the all-to-all dispatcher, measured / predicted: {', '.join(parts)}")


if __name__ == "__main__":
    main()
