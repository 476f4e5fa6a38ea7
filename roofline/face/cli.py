"""Command line: ``python -m roofline <command>``. Heavy modules (sympy, scipy, torch,
matplotlib) are imported inside the commands that need them, never on the prediction path.

Long flags accept dashed and underscored spellings alike (``--d-model`` and ``--d_model``).
"""
from __future__ import annotations

import argparse
import json
import sys

from ..base.errors import InputError
from ..base.units import GIGA, GiB, TERA, count_text, fmt_bytes, fmt_time

from ..spec.cliargs import MODEL_FLAGS, PLAN_FLAGS, Parser, add_gpus_flag, add_model_plan_flags, build, build_spec, flag, number


def _fmt_band(band: dict | None) -> str:
    """'16.9 .. 19.9 s': the measured step time the validation error of similar runs implies."""
    if band is None:
        return f"{'-':>12}"
    lo, hi = fmt_time(band["low_s"]), fmt_time(band["high_s"])
    if lo.split()[-1] == hi.split()[-1]:                 # one unit: '16.93 .. 19.92 s'
        lo = lo.rsplit(" ", 1)[0]
    return f"{lo} .. {hi}"


MFU_CONVENTIONS = {   # --mfu-convention: which model-FLOP count the MFU line uses (both are in --json)
    "roofline": ("mfu", "causal attention halved, unpadded vocabulary: Megatron-Bridge/NeMo flop_utils"),
    "megatron": ("mfu_megatron", "full s x s attention, padded vocabulary: Megatron-LM num_floating_point_operations; "
                                 "may exceed HFU, which counts what the kernels execute"),
}


def _slowest_line(hw, n_gpus: int) -> list[str]:
    """The clock the job's compute runs at when its GPUs spread (formulas/compute.py clock_eff), or nothing."""
    from ..model.predict import slowest_pace
    pace = float(slowest_pace(hw.clock_spread, n_gpus))
    if pace >= 1:
        return []
    return [f"slowest GPU: the slowest of {n_gpus} sets the pace, its compute at {100 * pace:.1f} % of "
            f"the profile's (clock_spread {100 * hw.clock_spread:g} %; docs/calibration.md)"]


def _layout_text(p, m) -> str:
    """The plan's pipeline layout for the plan line: a stated one, or DualPipe's balanced split it is priced on
    (predict.plan_inputs), as its layers per stage."""
    if p.pp <= 1:
        return ""
    if p.pipeline_layout is not None:
        return f" layout {p.pipeline_layout}"
    if p.schedule == "dualpipe":
        from ..spec.layout import dualpipe_balanced, ranks
        rs = ranks(dualpipe_balanced(m.n_layers, p.pp, m.mtp_layers or 0), p.pp, 1)
        counts = [r.layers for r in rs]
        mid = f" | {counts[1]} x {p.pp - 2}" if p.pp > 2 else ""
        return f" (balanced split: {counts[0]}{mid} | {counts[-1]} layers)"
    return ""


def render(pred, band=..., mfu_convention: str = "roofline") -> str:
    """The prediction as a table; ``band`` (roofline.views.uncertainty.of_prediction) adds the step time's
    validation-error band under the step time; ``mfu_convention`` names the model-FLOP count of the MFU line."""
    d = pred.to_dict()
    m, p, hw = pred.model, pred.plan, pred.hardware
    step = d["step_time_s"]
    lines = [
        f"roofline: {m.name} ({count_text(pred.params)}) on {pred.n_gpus} x {hw.name}",
        f"plan: tp={p.tp} pp={p.pp} dp={p.dp} {p.cp_label}" + (f" ep={p.ep}" if p.ep > 1 else "")
        + f" | micro-batch {p.micro_batch} x {pred.micro_batches} micro-batches, global batch {p.batch}"
        + f" | {p.schedule}" + (f" v={p.interleave}" if p.interleave > 1 else "") + _layout_text(p, m)
        + f" | SP {'on' if p.sequence_parallel and p.tp > 1 else 'off'} | recompute {p.recompute}"
        + (f" ({p.recompute_modules or 'no modules'})" if p.recompute == "selective" and p.recompute_modules != "core_attn"
           else "")
        + (f" | CPU offload {p.offload_layers} layers" if p.offload_layers else "")
        + f" | sharding {p.sharding}" + (f" in {p.dp_replicas} replicas (HSDP)" if p.dp_replicas > 1 else "")
        + f" | {p.dtype}" + (" (FP8 dispatch)" if p.fp8_dispatch and p.ep > 1 else "") + (f" | CUDA graphs {p.cuda_graphs}" + (f" ({p.graph_modules})" if p.graph_modules else "")
              if p.cuda_graphs != "none" else "")
        + (f" | optimizer {p.optimizer}" if p.optimizer != "adam" else "")
        + (f" | stack {pred.stack}" if getattr(pred, "stack", "") else ""),
        f"profile: {hw.id} ({hw.kind}; calibrated: {', '.join(hw.calibrated) or 'nothing - datasheet peaks with assumed efficiencies'}"
        + (f"; compute curves borrowed from {hw.provenance['compute_curves_from'].split(':')[0]}"
           if hw.provenance.get("compute_curves_from") else "")
        + (f"; default host times x{hw.host_slowdown:g}, a slower host CPU (host_slowdown)" if hw.host_slowdown != 1 else "")
        + ")",
        *_slowest_line(hw, pred.n_gpus),
        "",
        f"  step time                 {fmt_time(step):>12}",
    ]
    if band is not ...:
        from ..views.uncertainty import describe
        lines.append(f"    likely measured       {_fmt_band(band):>16}  ({describe(band, hw.id)})")
    for k, v in d["breakdown_s"].items():
        if v > 0:
            lines.append(f"    {k.replace('_', ' '):<22}{fmt_time(v):>12}  {100 * v / step:5.1f} %")
    mem = d["memory_per_gpu_bytes"]
    cap = d["memory_capacity_bytes"]
    lines += ["", f"  memory per GPU            {fmt_bytes(mem['total'] + mem['reserve']):>12}  of {fmt_bytes(cap)}"
              + (f"  (headroom {fmt_bytes(mem['headroom'])})" if pred.fits_in_memory
                 else f"  DOES NOT FIT ({fmt_bytes(-mem['headroom'])} over; {pred.overflow} is the largest part)")]
    for k in ("weights", "gradients", "optimizer", "activations"):
        lines.append(f"    {k:<22}{fmt_bytes(mem[k]):>12}")
    lines.append(f"    {'reserve':<22}{fmt_bytes(mem['reserve']):>12}  (CUDA context, NCCL buffers, allocator fragmentation)")
    lines += [
        "",
        f"  model FLOPs per step      {d['flops_per_step']:.3e}",
        f"  hardware FLOPs per step   {d['hardware_flops_per_step']:.3e}",
        f"  model TFLOP/s per GPU     {d['model_tflops_per_gpu']:11.1f}     (model FLOPs / step time / GPUs: the figure papers quote)",
        f"  MFU                       {100 * d[MFU_CONVENTIONS[mfu_convention][0]]:11.1f} %   "
        f"({mfu_convention} convention: {MFU_CONVENTIONS[mfu_convention][1]})",
        f"  HFU                       {100 * d['hfu']:11.1f} %   (executed matmul FLOPs incl. recompute)",
        f"  tokens/s                  {d['tokens_per_s']:12.4g}",
        f"  pipeline bubble           {100 * d['pp_bubble_fraction']:11.1f} %   (share of pipeline time, "
        + ("DualPipeV: (p-1)(t + B - 3W)/2 of (m t + bubble))" if p.schedule == "dualpipev"
           else "DualPipe: (p/2-1)(t + B - 3W) of (m t + bubble))" if p.schedule == "dualpipe"
           else "ZB1P: (p-1)(t - 2W) of (m t + bubble))" if p.schedule == "zb1p"
           else "ZB2P: (p-1) max(0, t - 3W) of (m t + bubble))" if p.schedule == "zb2p"
           else "fill and drain through the lighter stages)"),
    ]
    if "run_days" in d:
        lines += ["", f"  run: {d['steps']:,.0f} steps, {d['tokens']:.4g} tokens",
                  f"    wall time               {d['run_days']:10.2f} days",
                  f"    GPU-hours               {d['gpu_hours']:12.4g}"]
        if "energy_kwh" in d:
            lines.append(f"    energy (board power)    {d['energy_kwh']:12.4g} kWh")
        if "cost" in d:
            lines.append(f"    cost                    {d['cost']:12.4g} USD")
    return "\n".join(lines)


def cmd_transformer(args) -> int:
    from ..model.predict import predict

    from ..base.schema import check_output, strict_json

    training = {}
    if args.timeline:
        from ..views import plotting
        plotting.check(args.timeline, "--timeline")
    if args.trace:
        check_output(args.trace, "--trace")           # before any work: nothing printed, then an error
    if args.example or args.config:
        from ..spec import configfile
        cfg = configfile.load_config(args.config or configfile.example_path(args.example))
        args._base = cfg
        training = cfg.get("training") or {}
    spec = build_spec(args)
    if args.per_stage or args.trace or args.timeline:
        from ..views import timeline
        timeline.replayable(spec.plan)          # refused before anything is printed
    given = lambda k: getattr(args, k) if getattr(args, k) is not None else training.get(k)  # noqa: E731
    pred = predict(spec, tokens=given("tokens"), steps=given("steps"), gpu_hour_price=given("gpu_hour_price"),
                   memory_margin=args.memory_margin or 0.0)
    notes = _advice(pred)
    from ..views import uncertainty
    band = uncertainty.of_prediction(pred)
    if args.json:
        d = pred.to_dict()
        d["step_time_band"] = band          # None: too few similar validated runs (roofline/views/uncertainty.py)
        d["warnings"] = notes
        d["spec"] = spec.to_dict()
        if args.per_stage:
            from ..views import timeline
            d["per_stage"] = timeline.per_stage(pred)
        if args.sensitivity:
            from ..views.sensitivity import sensitivity
            d["sensitivity"] = sensitivity(pred, args.sensitivity).to_dict()
        print(strict_json(d, indent=1))             # NaN/inf -> null with a reason
    else:
        print(render(pred, band, args.mfu_convention))
        if args.explain:
            print()
            print("\n".join(spec.explain()))
        if args.per_stage:
            from ..views import timeline
            print()
            print(timeline.render_per_stage(timeline.per_stage(pred)))
        if args.sensitivity:
            from ..views import sensitivity
            print()
            print(sensitivity.render(sensitivity.sensitivity(pred, args.sensitivity)))
        for n in notes:
            print(f"  warning: {n}")
    if args.trace:
        from ..views import timeline
        timeline.write_trace(pred, args.trace)
        print(f"wrote {args.trace}", file=sys.stderr)
    if args.timeline:
        from ..views import timeline
        timeline.plot_gantt(pred, args.timeline)
        print(f"wrote {args.timeline}", file=sys.stderr)
    return 0


def _advice(pred) -> list[str]:
    try:
        from ..views.advice import warnings_for
    except ImportError:
        return []
    return warnings_for(pred)


def cmd_formulas(args) -> int:
    from ..model.formulas.export import export

    if args.symbols:
        from ..model.formulas.symbols import SYMBOLS
        for s in SYMBOLS.values():
            print(f"{s.name:<16} [{s.dim or '1'}] {s.doc}")
        return 0
    values = {}
    for item in args.set or []:
        if "=" not in item:
            raise InputError(f"--set expects name=value, got {item!r}")
        k, v = item.split("=", 1)
        try:          # the ranges per symbol (counts integers >= 1, switches 0/1, ...): formulas.export.check_value
            values[k.strip()] = int(v) if v.strip().lstrip("+-").isdigit() else float(v)
        except ValueError:
            raise InputError(f"--set {k}: value {v!r} is not a number") from None
    if args.gpu:
        from ..spec import hardware
        from ..model.formulas.symbols import hardware_defaults
        from ..model.predict import hardware_inputs
        # the profile's values, and the sourced defaults of the hardware symbols a profile does not state,
        # as the compiled model takes them
        values = {**hardware_defaults(), **hardware_inputs(hardware.load(args.gpu)), **values}
    from ..base import progress
    # on a terminal only: in a log the phase's lines would precede a late error (an undefined value found after
    # the substitution), and a refused input is one line
    with progress.phase(f"build {args.quantity} (sympy) and export it as {args.format}",
                        disable=not progress.is_tty(sys.stderr)):
        text = export(args.quantity, args.format, values)
    print(text)
    return 0


def cmd_hardware(args) -> int:
    from ..spec import hardware

    if args.action == "list":
        rows = []
        for i in hardware.list_ids():
            try:
                h = hardware.load(i)
            except InputError as exc:
                rows.append((i, f"(invalid: {exc})"))
                continue
            if args.table:
                bf = h.peak_flops.get("bf16") or 0
                f8 = h.peak_flops.get("fp8") or 0
                rows.append((i, f"{bf / TERA:7.0f} {f8 / TERA:7.0f} {h.hbm_bandwidth / TERA:6.2f} "
                                f"{h.hbm_capacity / GiB:6.0f} {h.intra.bandwidth / GIGA:6.0f} {h.inter.bandwidth / GIGA:6.1f} "
                                f"{h.gpus_per_node:3d}  {h.kind}"))
            else:
                rows.append((i, f"{h.name} [{h.kind}]"))
        if args.table:
            print(f"{'id':<22}{'bf16':>7} {'fp8':>7} {'HBM':>6} {'GiB':>6} {'intra':>6} {'inter':>6} {'G':>3}  kind")
            print(f"{'':<22}{'TFLOP/s':>7} {'TFLOP/s':>7} {'TB/s':>6} {'':>6} {'GB/s':>6} {'GB/s':>6}")
        for i, text in rows:
            print(f"{i:<22}{text}")
        return 0
    if not args.id:
        raise InputError("hardware show needs a profile id")
    import yaml
    d = hardware.raw(args.id)
    h = hardware.load(args.id)
    d = {k: v for k, v in d.items() if not k.startswith("_")}
    d["calibrated_parts"] = list(h.calibrated)
    print(yaml.safe_dump(d, sort_keys=False, default_flow_style=None).rstrip())
    if h.matmul_ceiling < 1 or h.sustained_clock < 1:
        eta = {k: round(v[0], 4) for k, v in h.efficiency["gemm"].items()}
        print(f"# as used: gemm eta capped at max_matmul / bf16 peak = {h.matmul_ceiling:.4f} -> {eta}; "
              f"compute rates x sustained_clock {h.sustained_clock:g}")
    from ..base import precision
    rates = {dt: h.lp_rate(dt) for dt in ("fp8", "mxfp8", "nvfp4") if h.peak_flops.get(precision.peak_key(dt))}
    if rates:
        print("# as used: low-precision GEMM kernel rate over a 16-bit GEMM's (lp_rate; precision.py gemm_rate"
              + (", max_matmul_fp4" if h.matmul_fp4 else "") + "): "
              + ", ".join(f"{dt} {v:.3f}" for dt, v in rates.items()))
    own = set((d.get("overlap") or {}))
    print("# as used: SMs a communication kernel holds beside compute (overlap): "
          + ", ".join(f"{k} {v:g}" + ("" if k in own else " (default)") for k, v in h.overlap.items()))
    return 0


def cmd_models(args) -> int:
    from ..spec import models

    if args.action == "list":
        from ..spec import hardware
        from ..spec.config import Plan
        from ..model.predict import predict
        # parameters as the compiled model counts them (embedding and LM head included, vocabulary padded to a
        # multiple of 128 as at tp = 1); they do not depend on the GPU, any profile prices them alike
        hw = hardware.load("a100-sxm4-80gb")
        n = lambda v: count_text(v, "").strip()  # noqa: E731
        print(f"{'id':<22}{'params':>9} {'active':>9}  (active: per token, MoE only)")
        for i in models.list_ids():
            m = models.load(i)
            p = predict(m, Plan(), hw)
            active = p.raw["active_params"]
            print(f"{i:<22}{n(p.params):>9} {n(active) if active < p.params else '':>9}  "
                  f"{m.n_layers:>4} x {m.d_model:<6} heads {m.n_heads:<4} kv {m.kv_heads:<4} "
                  f"{m.mlp:<12} V {m.vocab:<7} s {m.seq_len}" + (f"  MoE {m.n_experts}x top-{m.top_k}" if m.n_experts > 1 else ""))
        return 0
    if not args.id:
        raise InputError("models show needs a model id")
    import yaml
    print(yaml.safe_dump(models.raw(args.id), sort_keys=False).rstrip())
    return 0


def cmd_examples(args) -> int:
    from ..spec import configfile

    if args.action == "list":
        for name in configfile.list_examples():
            print(f"{name:<24}{configfile.describe(name)}")
        return 0
    if not args.name:
        raise InputError("examples show needs an example name (see `examples list`)")
    print(configfile.example_path(args.name).read_text().rstrip())
    return 0


def cmd_frameworks(args) -> int:
    from ..spec import stacks

    if args.action == "list":
        rows = [stacks.get(i) for i in stacks.list_ids()]
        if args.json:
            print(json.dumps([s.to_dict() for s in rows], indent=1))
            return 0
        w_id = max(len(s.id) for s in rows) + 2             # columns as wide as the longest id and era
        w_era = max(len(s.era_text()) for s in rows) + 2
        for s in rows:
            print(f"{s.id:<{w_id}}{s.era_text():<{w_era}}{s.name}  [aliases: {', '.join(s.aliases)}]")
        return 0
    if not args.id:
        raise InputError("frameworks show needs a stack NAME[@VERSION] (see `frameworks list`)")
    s = stacks.get(args.id)
    if args.json:
        print(json.dumps(s.to_dict(), indent=1))
        return 0
    print(render_stack(s))
    return 0


def render_stack(s) -> str:
    """A stack's entry as text: every default and rule with its source."""
    lines = [f"{s.id}: {s.name}", f"  version {s.version}; era {s.era_text()}; family {s.family}",
             f"  aliases: {', '.join(s.aliases)}"]
    for title, d in (("model defaults", s.model), ("plan defaults", s.plan), ("rules", s.rules)):
        lines.append(f"  {title}:")
        for k, v in d.items():
            v = ", ".join(v) if isinstance(v, tuple) else v
            lines.append(f"    {k} = {v}    # {s.sources.get(k, '')}")
    return "\n".join(lines)


CORE = ("transformer", "formulas", "hardware", "models", "examples", "frameworks")


def register_commands(sub) -> None:
    """The other commands, each module registering its own (imported only when one of them runs, so that the
    core commands never load scipy/sympy: ``python -m roofline transformer`` starts in about half a second)."""
    from ..views import cluster_schedule, runcost_cli as extras, search, sizing, validate
    from ..views.calibrate import cli as calibrate
    for module in (calibrate, validate, search, sizing, extras, cluster_schedule):
        module.register(sub)


def _list_show(sub, name: str, help: str, action_help: str, id_help: str, func, dest: str = "id"):
    """A ``NAME list | show ID`` command (frameworks, hardware, models, examples)."""
    p = sub.add_parser(name, help=help)
    p.add_argument("action", choices=("list", "show"), help=action_help)
    p.add_argument(dest, nargs="?", help=id_help)
    p.set_defaults(func=func)
    return p


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; the optional modules' subcommands are only loaded when ``command``
    is not a core one (keeps ``transformer`` start-up free of their imports)."""
    ap = Parser(prog="python -m roofline",
                                 description="Closed-form, calibrated roofline model of LLM training time.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("transformer", help="predict one training step (and a whole run)")
    add_model_plan_flags(p)
    add_gpus_flag(p)
    g = p.add_argument_group("run")
    flag(g, "tokens", type=number(), help="training tokens of the whole run (e.g. 300e9)")
    flag(g, "steps", type=number(), help="optimizer steps of the whole run")
    flag(g, "gpu-hour-price", dest="gpu_hour_price", type=number(strict=False), help="USD per GPU-hour")
    flag(g, "json", action="store_true", help="print one JSON object")
    flag(g, "mfu-convention", dest="mfu_convention", choices=tuple(MFU_CONVENTIONS), default="roofline",
         help="model FLOPs of the MFU line: roofline (causal attention halved, unpadded vocabulary, as NeMo counts) or "
              "megatron (full s x s attention, padded vocabulary, as Megatron-LM and Narayanan et al. 2021 count); "
              "--json gives both")
    g = p.add_argument_group("configs and views")
    flag(g, "example", help="a bundled example config (see `examples list`)")
    flag(g, "config", help="a config YAML (model, plan, hardware, training; see docs/configs.md)")
    flag(g, "per-stage", dest="per_stage", action="store_true", help="compute/communication/idle per pipeline stage")
    flag(g, "timeline", metavar="PNG", help="draw the step's schedule as a Gantt chart")
    flag(g, "trace", metavar="JSON", help="write the step's schedule as a Chrome trace (Perfetto)")
    flag(g, "explain", action="store_true", help="every value the stack, a rule or a default filled in, with its origin")
    flag(g, "sensitivity", nargs="?", const=2.0, type=number(low=1.0), metavar="FACTOR",
         help="what bounds the step: the step time with each hardware resource (tensor cores, HBM, NVLink, network, "
              "latency, host, ...) alone FACTOR times faster and slower (default 2), and the share of the step that "
              "scales with it")
    p.set_defaults(func=cmd_transformer)

    p = _list_show(sub, "frameworks", "the registry of training stacks (defaults, rules, sources)",
                   "list every stack, or show one's defaults and rules", "NAME[@VERSION] (for show)", cmd_frameworks)
    flag(p, "json", action="store_true", help="print JSON instead of text")

    p = sub.add_parser("formulas", help="export a closed form (LaTeX, Python, sympy, JSON)")
    flag(p, "quantity", default="step_time", help="step_time, flops, memory, tp_comm, dp_comm, pp_bubble, ...")
    flag(p, "format", default="latex", choices=("latex", "python", "sympy", "json"),
         help="latex (a formula), python (a function), sympy (srepr-able text) or json (expression, symbols, dimension)")
    flag(p, "set", nargs="*", metavar="NAME=VALUE", help="substitute symbols (e.g. n_layers=96 d_model=12288)")
    flag(p, "gpu", help="substitute a hardware profile's parameters")
    flag(p, "symbols", action="store_true", help="list every symbol with its dimension")
    p.set_defaults(func=cmd_formulas)

    p = _list_show(sub, "hardware", "list or show hardware profiles", "list every profile, or show one",
                   "profile id (for show)", cmd_hardware)
    flag(p, "table", action="store_true", help="peaks, HBM and links of every profile in one table")
    _list_show(sub, "examples", "list or show the bundled example configs", "list the examples, or print one's YAML",
               "example name (see `examples list`)", cmd_examples, dest="name")

    _list_show(sub, "models", "list or show model presets", "list every preset, or show one", "preset id (for show)",
               cmd_models)

    if command in CORE:
        return ap
    register_commands(sub)
    return ap


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    args = parser(command).parse_args(argv)
    try:
        return args.func(args) or 0
    except InputError as exc:
        print(f"roofline: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as exc:      # writing an output file (--out, --plot, --timeline, --trace, ...)
        if exc.filename is None:
            raise
        print(f"roofline: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
