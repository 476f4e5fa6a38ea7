"""Operator by operator: what the model prices inside one transformer layer of a validation row.

For each operator of the row's layer (the MoE layer of an MoE model, else the dense one): its forward and backward
time, forward FLOPs and HBM bytes, the rate they imply, and whether the roofline puts it on the compute or the memory
side. A diagnostic for comparing the model with a profiler trace (Nsight Systems kernel times of one layer) on a
device: the per-operator sums equal the compiled model's ``t_layer_fwd`` / ``t_layer_bwd`` of the same row (a test
keeps it so), so what this prints is what validate prices.

    python benchmarks/layer_ops.py CASE_ID [CASE_ID ...] [--file CSV] [--gpu PROFILE]

CASE_ID is a row of CSV (default: the bundled nemo_perf.csv); --gpu prices it on another profile, as validate --gpu.
"""
from __future__ import annotations

import argparse
import sys


def layer_ops(case) -> list[dict]:
    """One dict per operator of the case's layer: name, class, fwd_s, bwd_s, flops_fwd, bytes_fwd, bound_fwd."""
    import sympy as sp

    from roofline.model.formulas import compute as C
    from roofline.model.formulas import symbols as S
    from roofline.model.predict import inputs, value_at

    x = inputs(case.model, case.plan, case.hw)
    moe = (case.model.n_experts or 1) > 1
    # the operators step.build gives the layer kind: the MoE layer (routed width moe_ffn, shared experts) or the dense
    ops = C.layer_ops(C.d_head, S.moe_ffn if moe else S.ffn_hidden, C.moe if moe else sp.Integer(0),
                      S.shared_ffn if moe else sp.Integer(0), variants=True)

    def value(e) -> float:
        return value_at(e, x)

    out = []
    for op in ops:
        f, b = value(op.f_fwd), value(op.b_fwd)
        t_f, t_b = value(C.op_time(op, "fwd")), value(C.op_time(op, "bwd"))
        if t_f + t_b <= 0:
            continue
        # the roofline's side in the forward: t = t0 + max(compute, memory), memory = bytes / (HBM x mu) (op_time)
        t0 = value(op.on * op.launches * S.T0[op.cls, "fwd"])
        memory = value(op.b_fwd / (S.hbm_bw * S.EFF_MEM[op.cls, "fwd"]))
        side = "memory" if memory >= (t_f - t0) * (1 - 1e-9) else "compute"
        out.append({"name": op.name, "cls": op.cls, "fwd_s": t_f, "bwd_s": t_b, "flops_fwd": f, "bytes_fwd": b,
                    "bound_fwd": side if t_f > t0 else "fixed cost"})
    return out


def render(case, rows: list[dict]) -> str:
    p = case.plan
    lines = [f"{case.row['case_id']}: {case.model.name} on {case.hw.id}, tp {p.tp} pp {p.pp} dp {p.dp} cp {p.cp} "
             f"ep {p.ep} mb {p.micro_batch}, {p.dtype}; one {'MoE' if (case.model.n_experts or 1) > 1 else 'dense'} "
             f"layer, one micro-batch",
             f"  {'operator':26s} {'fwd ms':>8s} {'bwd ms':>8s} {'fwd GFLOP':>10s} {'fwd MB':>9s} {'fwd TFLOP/s':>12s} "
             f"{'fwd TB/s':>9s}  bound"]
    for r in sorted(rows, key=lambda r: -(r["fwd_s"] + r["bwd_s"])):
        t = max(r["fwd_s"], 1e-30)
        lines.append(f"  {r['name']:26s} {1e3 * r['fwd_s']:8.3f} {1e3 * r['bwd_s']:8.3f} {r['flops_fwd'] / 1e9:10.1f} "
                     f"{r['bytes_fwd'] / 1e6:9.1f} {r['flops_fwd'] / t / 1e12:12.0f} {r['bytes_fwd'] / t / 1e12:9.2f}  "
                     f"{r['bound_fwd']}")
    fwd, bwd = sum(r["fwd_s"] for r in rows), sum(r["bwd_s"] for r in rows)
    lines.append(f"  {'layer (sum)':26s} {1e3 * fwd:8.3f} {1e3 * bwd:8.3f}   (validate's layer_fwd / layer_bwd; "
                 f"communication, recomputation and host time are priced outside the operators)")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case_id", nargs="+")
    ap.add_argument("--file", help="validation CSV (default: the bundled nemo_perf.csv)")
    ap.add_argument("--gpu", help="price the rows on this profile (id or YAML), as validate --gpu")
    args = ap.parse_args(argv)
    from roofline.base.errors import InputError
    from roofline.spec import hardware
    from roofline.views import validate as V
    try:
        rows = {r["case_id"]: r for r in V.read(args.file or V.dataset_path("nemo"))}
        hw = hardware.load(args.gpu) if args.gpu else None
        missing = [c for c in args.case_id if c not in rows]
        if missing:
            raise InputError(f"case_id {missing[0]!r} is not in {args.file or 'nemo_perf.csv'}")
        cases = [V.build_case(rows[c], hardware=hw) for c in args.case_id]
    except (InputError, V.Skip) as exc:
        print(f"layer_ops: {exc}", file=sys.stderr)
        return 2
    print("\n\n".join(render(c, layer_ops(c)) for c in cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
