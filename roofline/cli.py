"""Command line: ``python -m roofline <command>``. Heavy modules (sympy, scipy, torch,
matplotlib) are imported inside the commands that need them, never on the prediction path.

Long flags accept dashed and underscored spellings alike (``--d-model`` and ``--d_model``).
"""
from __future__ import annotations

import argparse
import json
import sys

from .errors import InputError
from .units import count_text

# (flag, dest, type, help) of the model shape; None type = store_true/false pairs handled below
MODEL_FLAGS = [
    ("layers", "n_layers", int, "transformer layers"),
    ("d-model", "d_model", int, "hidden size"),
    ("heads", "n_heads", int, "attention heads"),
    ("kv-heads", "n_kv_heads", int, "key/value heads (GQA/MQA); default = heads"),
    ("ffn-hidden", "ffn_hidden", int, "MLP inner size (per expert); default 4h (gelu) or LLaMA's 8h/3 (swiglu)"),
    ("vocab", "vocab", int, "vocabulary size (padded to 128*tp internally)"),
    ("seq-len", "seq_len", int, "sequence length"),
    ("experts", "n_experts", int, "MoE experts (1 = dense)"),
    ("top-k", "top_k", int, "experts per token"),
    ("capacity-factor", "capacity_factor", float, "MoE capacity factor"),
]
PLAN_FLAGS = [
    ("tp", "tp", int, "tensor-parallel degree"),
    ("pp", "pp", int, "pipeline-parallel degree"),
    ("dp", "dp", int, "data-parallel degree"),
    ("cp", "cp", int, "context-parallel degree (ring attention)"),
    ("ep", "ep", int, "expert-parallel degree (taken from dp)"),
    ("micro-batch", "micro_batch", int, "micro-batch size (sequences)"),
    ("global-batch", "global_batch", int, "global batch (sequences) = micro-batch x micro-batches x dp"),
    ("interleave", "interleave", int, "virtual pipeline stages per GPU (interleaved 1F1B)"),
    ("overlap-grad-reduce", "overlap_grad_reduce", float, "fraction of DP gradient reduce hidden behind backward"),
    ("overlap-param-gather", "overlap_param_gather", float, "fraction of parameter all-gather hidden behind forward"),
    ("overlap-tp", "overlap_tp", float, "fraction of TP/SP communication hidden behind GEMMs"),
    ("overlap-pp", "overlap_pp", float, "fraction of pipeline send/recv hidden"),
    ("overlap-cp", "overlap_cp", float, "fraction of ring-attention exchange hidden behind attention"),
]


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line (``roofline transformer: error: ...; see --help``) with
    exit status 2, instead of the usage block; subcommand parsers inherit the class."""

    def error(self, message):
        self.exit(2, f"{self.prog.replace('python -m ', '')}: error: {message}; see --help\n")


def number(kind=float, low: float = 0.0, strict: bool = True):
    """argparse type: a finite number above ``low`` (at or above it when not ``strict``)."""
    import math

    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        if not math.isfinite(v) or v < low or (strict and v == low):
            rel = ">" if strict else ">="
            raise argparse.ArgumentTypeError(f"must be a finite number {rel} {low:g}, got {text!r}")
        return v
    parse.__name__ = kind.__name__       # argparse names the type in its messages
    return parse


def flag(p: argparse.ArgumentParser, name: str, **kw):
    """Add --name and, when it has a dash, --name_with_underscores."""
    names = [f"--{name}"] + ([f"--{name.replace('-', '_')}"] if "-" in name else [])
    return p.add_argument(*names, **kw)


def add_model_plan_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (override the preset's fields)")
    flag(g, "model", help="model preset id (see `models list`) or a preset YAML path")
    for name, dest, typ, hlp in MODEL_FLAGS:
        flag(g, name, dest=dest, type=typ, help=hlp)
    flag(g, "mlp", choices=("gelu", "swiglu", "squared_relu"), help="MLP activation: gelu (4h), swiglu (gated, 3 GEMMs), "
         "squared_relu")
    flag(g, "norm", choices=("layernorm", "rmsnorm"), help="normalisation layer (priced as a memory-bound kernel)")
    flag(g, "attention", choices=("flash", "unfused"), help="attention kernel (framework default)")
    flag(g, "position", choices=("learned", "rope"), help="position encoding: learned table (an embedding) or rotary")
    flag(g, "tied", dest="tied_embeddings", action="store_true", default=None,
         help="tie the embedding and LM-head weights (one V x h matrix; GPT-2/3 style)")
    flag(g, "untied", dest="tied_embeddings", action="store_false",
         help="separate LM-head weights (LLaMA style: a second V x h matrix and its gradients)")
    g = p.add_argument_group("parallel plan")
    for name, dest, typ, hlp in PLAN_FLAGS:
        flag(g, name, dest=dest, type=typ, help=hlp)
    flag(g, "schedule", choices=("1f1b", "interleaved", "gpipe"), help="pipeline schedule (default 1f1b)")
    flag(g, "sequence-parallel", dest="sequence_parallel", action="store_true", default=None,
         help="Megatron sequence parallelism (norms and dropout split over TP; all-gather/reduce-scatter "
              "instead of all-reduce); default: the stack's, only with tp > 1")
    flag(g, "no-sequence-parallel", dest="sequence_parallel", action="store_false", help="no sequence parallelism")
    flag(g, "uneven-stages", dest="uneven_stages", action="store_true", default=None,
         help="allow layers not divisible by pp x interleave (the heaviest stage rounds up)")
    flag(g, "recompute", choices=("none", "selective", "full"), help="activation recomputation (default none)")
    flag(g, "sharding", choices=("none", "distributed", "zero1", "zero2", "zero3", "fsdp"),
         help="optimizer/gradient/parameter sharding over dp")
    flag(g, "zero", type=int, choices=(0, 1, 2, 3), help="ZeRO stage (alias of --sharding)")
    flag(g, "dtype", choices=("bf16", "fp16", "fp32", "fp8"), help="matmul dtype (default bf16)")
    flag(g, "grad-dtype", dest="grad_dtype", choices=("fp32", "bf16", "fp16"),
         help="gradient buffer and reduce dtype (default: the stack's; Megatron fp32 main grads with bf16)")
    flag(g, "framework", help="training stack whose defaults fill unset switches: NAME[@VERSION] from "
         "`frameworks list` (default: the config's, else megatron-core); wins over a config file's")
    flag(g, "tp-comm-overlap", dest="tp_comm_overlap", action="store_true", default=None,
         help="the stack's TP communication overlap (Megatron --tp-comm-overlap, torchtitan async TP)")
    flag(g, "memory-margin", dest="memory_margin", type=number(float, 0.0, strict=False), default=0.0,
         help="extra fraction of HBM kept free beyond the reserve (CUDA context, NCCL, fragmentation); default 0")
    g = p.add_argument_group("hardware")
    flag(g, "gpu", help="hardware profile id (see `hardware list`) or YAML path (default a100-sxm4-80gb, or the config's)")
    flag(g, "gpus-per-node", dest="gpus_per_node", type=number(int), help="override the profile's GPUs per node")
    flag(g, "net-gbps", dest="net_gbps", type=number(), help="inter-node line rate per GPU, Gbit/s")


def build_spec(args):
    """The Spec of parsed flags (and the config in ``args._base``) through the one resolver:
    preset < stack defaults < stack rules < the config's fields < explicit flags."""
    from dataclasses import replace as dc_replace

    from . import models
    from .spec import resolve

    base = getattr(args, "_base", None) or {}
    if not base and (getattr(args, "config", None) or getattr(args, "example", None)):
        from . import configfile
        base = configfile.load_config(args.config or configfile.example_path(args.example))
    if args.model:
        model, model_set = models.load(args.model), set()
    elif base.get("model") is not None:
        model, model_set = base["model"], set(base.get("model_set", ()))
    else:
        model, model_set = None, set()
    stated_model = {k: getattr(model, k) for k in model_set}
    # a preset's derived fields follow an overridden shape: MHA stays MHA, a 4h MLP stays 4h
    if model is not None and args.n_heads and args.n_kv_heads is None and model.n_kv_heads in (None, model.n_heads):
        model = dc_replace(model, n_kv_heads=None)
        stated_model.pop("n_kv_heads", None)
    if model is not None and args.d_model and args.ffn_hidden is None and model.ffn_hidden == 4 * model.d_model \
            and model.mlp != "swiglu":
        model = dc_replace(model, ffn_hidden=None)
        stated_model.pop("ffn_hidden", None)
    shape = {dest: getattr(args, dest) for _, dest, _, _ in MODEL_FLAGS}
    flags = {**shape, "mlp": args.mlp, "norm": args.norm, "attention": args.attention, "position": args.position,
             "tied_embeddings": args.tied_embeddings}
    stated_model.update({k: v for k, v in flags.items() if v is not None})
    if model is not None and args.model and any(v is not None and v != getattr(model, k) for k, v in shape.items()):
        stated_model["name"] = f"{model.name} (modified)"

    plan = {}
    if base.get("plan") is not None:
        plan = {k: getattr(base["plan"], k) for k in base.get("plan_set", ())}
    sharding = args.sharding
    if args.zero is not None:
        sharding = {0: "none", 1: "zero1", 2: "zero2", 3: "zero3"}[args.zero]
    flags = {**{dest: getattr(args, dest) for _, dest, _, _ in PLAN_FLAGS}, "schedule": args.schedule,
             "sequence_parallel": args.sequence_parallel, "recompute": args.recompute, "sharding": sharding,
             "uneven_stages": args.uneven_stages, "dtype": args.dtype, "grad_dtype": args.grad_dtype,
             "tp_comm_overlap": getattr(args, "tp_comm_overlap", None)}
    plan.update({k: v for k, v in flags.items() if v is not None})
    # an explicit --framework wins over the config's; with neither, the default stack (Megatron-Core)
    stack = args.framework or base.get("framework")
    hw = args.gpu or base.get("hardware") or None
    return resolve(model, plan, hw, stack, model_fields=stated_model, gpus_per_node=args.gpus_per_node,
                   net_gbps=args.net_gbps,
                   stack_reason="--framework" if args.framework else ("the config's framework" if base.get("framework") else ""))


def build(args) -> tuple:
    """(Model, Plan, Hardware) of parsed flags; see :func:`build_spec`."""
    s = build_spec(args)
    return s.model, s.plan, s.hardware


def _fmt_time(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def _fmt_bytes(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def render(pred) -> str:
    d = pred.to_dict()
    m, p, hw = pred.model, pred.plan, pred.hardware
    step = d["step_time_s"]
    lines = [
        f"roofline: {m.name} ({count_text(pred.params)}) on {pred.n_gpus} x {hw.name}",
        f"plan: tp={p.tp} pp={p.pp} dp={p.dp} cp={p.cp}" + (f" ep={p.ep}" if p.ep > 1 else "")
        + f" | micro-batch {p.micro_batch} x {pred.micro_batches} micro-batches, global batch {p.batch}"
        + f" | {p.schedule}" + (f" v={p.interleave}" if p.interleave > 1 else "")
        + f" | SP {'on' if p.sequence_parallel and p.tp > 1 else 'off'} | recompute {p.recompute}"
        + f" | sharding {p.sharding} | {p.dtype}" + (f" | stack {pred.stack}" if getattr(pred, "stack", "") else ""),
        f"profile: {hw.id} ({hw.kind}; calibrated: {', '.join(hw.calibrated) or 'nothing - datasheet peaks with assumed efficiencies'})",
        "",
        f"  step time                 {_fmt_time(step):>12}",
    ]
    for k, v in d["breakdown_s"].items():
        if v > 0:
            lines.append(f"    {k.replace('_', ' '):<22}{_fmt_time(v):>12}  {100 * v / step:5.1f} %")
    mem = d["memory_per_gpu_bytes"]
    cap = d["memory_capacity_bytes"]
    lines += ["", f"  memory per GPU            {_fmt_bytes(mem['total'] + mem['reserve']):>12}  of {_fmt_bytes(cap)}"
              + (f"  (headroom {_fmt_bytes(mem['headroom'])})" if pred.fits_in_memory
                 else f"  DOES NOT FIT ({_fmt_bytes(-mem['headroom'])} over; {pred.overflow} is the largest part)")]
    for k in ("weights", "gradients", "optimizer", "activations"):
        lines.append(f"    {k:<22}{_fmt_bytes(mem[k]):>12}")
    lines.append(f"    {'reserve':<22}{_fmt_bytes(mem['reserve']):>12}  (CUDA context, NCCL buffers, allocator fragmentation)")
    lines += [
        "",
        f"  model FLOPs per step      {d['flops_per_step']:.3e}",
        f"  hardware FLOPs per step   {d['hardware_flops_per_step']:.3e}",
        f"  model TFLOP/s per GPU     {d['model_tflops_per_gpu']:11.1f}     (model FLOPs / step time / GPUs: the figure papers quote)",
        f"  MFU                       {100 * d['mfu']:11.1f} %   (model FLOPs, no recompute, causal halved)",
        f"  HFU                       {100 * d['hfu']:11.1f} %   (executed matmul FLOPs incl. recompute)",
        f"  tokens/s                  {d['tokens_per_s']:12.4g}",
        f"  pipeline bubble           {100 * d['pp_bubble_fraction']:11.1f} %   (share of pipeline time, (p-1)/(v m + p - 1))",
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
    from .predict import predict

    from .schema import check_output, strict_json

    training = {}
    if args.timeline:
        from . import plotting
        plotting.check(args.timeline, "--timeline")
    if args.trace:
        check_output(args.trace, "--trace")           # before any work: nothing printed, then an error
    if args.example or args.config:
        from . import configfile
        cfg = configfile.load_config(args.config or configfile.example_path(args.example))
        args._base = cfg
        training = cfg.get("training") or {}
    spec = build_spec(args)
    given = lambda k: getattr(args, k) if getattr(args, k) is not None else training.get(k)  # noqa: E731
    pred = predict(spec, tokens=given("tokens"), steps=given("steps"), gpu_hour_price=given("gpu_hour_price"),
                   memory_margin=args.memory_margin)
    notes = _advice(pred)
    if args.json:
        d = pred.to_dict()
        d["warnings"] = notes
        d["spec"] = spec.to_dict()
        if args.per_stage:
            from . import timeline
            d["per_stage"] = timeline.per_stage(pred)
        print(strict_json(d, indent=1))             # NaN/inf -> null with a reason
    else:
        print(render(pred))
        if args.explain:
            print()
            print("\n".join(spec.explain()))
        if args.per_stage:
            from . import timeline
            print()
            print(timeline.render_per_stage(timeline.per_stage(pred)))
        for n in notes:
            print(f"  warning: {n}")
    if args.trace:
        from . import timeline
        timeline.write_trace(pred, args.trace)
        print(f"wrote {args.trace}", file=sys.stderr)
    if args.timeline:
        from . import timeline
        timeline.plot_gantt(pred, args.timeline)
        print(f"wrote {args.timeline}", file=sys.stderr)
    return 0


def _advice(pred) -> list[str]:
    try:
        from .advice import warnings_for
    except ImportError:
        return []
    return warnings_for(pred)


def cmd_formulas(args) -> int:
    from .formulas.export import export

    if args.symbols:
        from .formulas.symbols import SYMBOLS
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
        from . import hardware
        from .predict import hardware_inputs
        values = {**hardware_inputs(hardware.load(args.gpu)), **values}
    print(export(args.quantity, args.format, values))
    return 0


def cmd_hardware(args) -> int:
    from . import hardware

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
                rows.append((i, f"{bf / 1e12:7.0f} {f8 / 1e12:7.0f} {h.hbm_bandwidth / 1e12:6.2f} "
                                f"{h.hbm_capacity / 2**30:6.0f} {h.intra.bandwidth / 1e9:6.0f} {h.inter.bandwidth / 1e9:6.1f} "
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
    return 0


def cmd_models(args) -> int:
    from . import models

    if args.action == "list":
        for i in models.list_ids():
            m = models.load(i)
            print(f"{i:<22}{m.n_layers:>4} x {m.d_model:<6} heads {m.n_heads:<4} kv {m.kv_heads:<4} "
                  f"{m.mlp:<7} V {m.vocab:<7} s {m.seq_len}" + (f"  MoE {m.n_experts}x top-{m.top_k}" if m.n_experts > 1 else ""))
        return 0
    if not args.id:
        raise InputError("models show needs a model id")
    import yaml
    print(yaml.safe_dump(models.raw(args.id), sort_keys=False).rstrip())
    return 0


def cmd_frameworks(args) -> int:
    from . import stacks

    if args.action == "list":
        rows = [stacks.get(i) for i in stacks.list_ids()]
        if args.json:
            print(json.dumps([s.to_dict() for s in rows], indent=1))
            return 0
        for s in rows:
            print(f"{s.id:<20}{s.era[0]}-{s.era[1]}  {s.name}  [aliases: {', '.join(s.aliases)}]")
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
    lines = [f"{s.id}: {s.name}", f"  version {s.version}; era {s.era[0]}-{s.era[1]}; family {s.family}",
             f"  aliases: {', '.join(s.aliases)}"]
    for title, d in (("model defaults", s.model), ("plan defaults", s.plan), ("rules", s.rules)):
        lines.append(f"  {title}:")
        for k, v in d.items():
            v = ", ".join(v) if isinstance(v, tuple) else v
            lines.append(f"    {k} = {v}    # {s.sources.get(k, '')}")
    return "\n".join(lines)


CORE = ("transformer", "formulas", "hardware", "models", "frameworks")
PLUGINS = ("calibrate.cli", "validate", "search", "extras")


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; the optional modules' subcommands are only loaded when ``command``
    is not a core one (keeps ``transformer`` start-up free of their imports)."""
    ap = Parser(prog="python -m roofline",
                                 description="Closed-form, calibrated roofline model of LLM training time.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("transformer", help="predict one training step (and a whole run)")
    add_model_plan_flags(p)
    g = p.add_argument_group("run")
    flag(g, "tokens", type=number(), help="training tokens of the whole run (e.g. 300e9)")
    flag(g, "steps", type=number(), help="optimizer steps of the whole run")
    flag(g, "gpu-hour-price", dest="gpu_hour_price", type=number(strict=False), help="USD per GPU-hour")
    flag(g, "json", action="store_true", help="print one JSON object")
    g = p.add_argument_group("configs and views")
    flag(g, "example", help="a bundled example config (see `examples list`)")
    flag(g, "config", help="a config YAML (model, plan, hardware, training; see docs/configs.md)")
    flag(g, "per-stage", dest="per_stage", action="store_true", help="compute/communication/idle per pipeline stage")
    flag(g, "timeline", metavar="PNG", help="draw the step's schedule as a Gantt chart")
    flag(g, "trace", metavar="JSON", help="write the step's schedule as a Chrome trace (Perfetto)")
    flag(g, "explain", action="store_true", help="every value the stack, a rule or a default filled in, with its origin")
    p.set_defaults(func=cmd_transformer)

    p = sub.add_parser("frameworks", help="the registry of training stacks (defaults, rules, sources)")
    p.add_argument("action", choices=("list", "show"))
    p.add_argument("id", nargs="?", help="NAME[@VERSION]")
    flag(p, "json", action="store_true")
    p.set_defaults(func=cmd_frameworks)

    p = sub.add_parser("formulas", help="export a closed form (LaTeX, Python, sympy, JSON)")
    flag(p, "quantity", default="step_time", help="step_time, flops, memory, tp_comm, dp_comm, pp_bubble, ...")
    flag(p, "format", default="latex", choices=("latex", "python", "sympy", "json"),
         help="latex (a formula), python (a function), sympy (srepr-able text) or json (expression, symbols, dimension)")
    flag(p, "set", nargs="*", metavar="NAME=VALUE", help="substitute symbols (e.g. layers=96 d_model=12288)")
    flag(p, "gpu", help="substitute a hardware profile's parameters")
    flag(p, "symbols", action="store_true", help="list every symbol with its dimension")
    p.set_defaults(func=cmd_formulas)

    p = sub.add_parser("hardware", help="list or show hardware profiles")
    p.add_argument("action", choices=("list", "show"), help="list every profile, or show one")
    p.add_argument("id", nargs="?", help="profile id (for show)")
    flag(p, "table", action="store_true", help="peaks, HBM and links of every profile in one table")
    p.set_defaults(func=cmd_hardware)

    p = sub.add_parser("models", help="list or show model presets")
    p.add_argument("action", choices=("list", "show"), help="list every preset, or show one")
    p.add_argument("id", nargs="?", help="preset id (for show)")
    p.set_defaults(func=cmd_models)

    if command in CORE:
        return ap
    import importlib
    for module in PLUGINS:
        try:
            mod = importlib.import_module(f"roofline.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"roofline.{module}":
                raise
            continue
        mod.register(sub)
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
