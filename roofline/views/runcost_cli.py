"""The ``run-cost`` subcommand.

``roofline.face.cli`` registers them through :func:`register`.
"""
from __future__ import annotations

from ..base.errors import InputError


def _model_plan_hw(args):
    """(Model, Plan, Hardware, training) from flags and an optional --config/--example, as ``transformer``."""
    from ..spec import cliargs, configfile

    training = {}
    if args.example or args.config:
        cfg = configfile.load_config(args.config or configfile.example_path(args.example))
        args._base = cfg
        if cfg.get("framework") and args.framework == "megatron-core":
            args.framework = cfg["framework"]
        training = cfg.get("training") or {}
    model, plan, hw = cliargs.build(args)
    return model, plan, hw, training


def cmd_run_cost(args) -> int:
    from . import runcost

    from ..base import schema

    tp_intra, tp_inter = args.tp_intra, args.tp_inter
    for name, v in (("--tp-intra", tp_intra), ("--tp-inter", tp_inter)):
        if v is not None:
            schema.number(v, name, int, low=1)
    if args.utilization is not None:
        schema.fraction(args.utilization, "--utilization")
    if args.flop_rate is not None:
        schema.positive(args.flop_rate, "--flop-rate")
    if args.tokens is not None:
        schema.positive(args.tokens, "--tokens")
    if (tp_intra or tp_inter) and args.tp is None:
        args.tp = (tp_intra or 1) * (tp_inter or 1)
    model, plan, hw, training = _model_plan_hw(args)
    from ..spec.config import check
    check(model, plan)
    tokens = args.tokens if args.tokens is not None else training.get("tokens")
    if tokens is None:
        raise InputError("run-cost needs the training tokens: --tokens (or training.tokens in the config)")
    rc = runcost.run_cost(model, plan, hw, tokens, tp_intra=tp_intra, tp_inter=tp_inter,
                          utilization=args.utilization, flop_rate=args.flop_rate)
    print(schema.strict_json(rc.to_dict(), indent=1) if args.json else runcost.render(rc))
    return 0


def register(sub) -> None:
    from ..spec.cliargs import add_gpus_flag, add_model_plan_flags, flag

    p = sub.add_parser("run-cost", help="the whole run's FLOP and network bytes per parallel axis, and its days")
    add_model_plan_flags(p)
    add_gpus_flag(p)
    g = p.add_argument_group("run")
    flag(g, "tokens", type=float, help="training tokens D (e.g. 300e9); default: training.tokens of the config")
    flag(g, "tp-intra", dest="tp_intra", type=int, help="2-D tensor parallelism: TP ranks inside a node")
    flag(g, "tp-inter", dest="tp_inter", type=int, help="2-D tensor parallelism: TP ranks across nodes")
    flag(g, "utilization", type=float, help="fraction of the dense peak for the run time (default: the roofline prediction)")
    flag(g, "flop-rate", dest="flop_rate", type=float, help="achieved FLOP/s per GPU for the run time (overrides --utilization)")
    flag(g, "example", help="a bundled example config (see `examples list`)")
    flag(g, "config", help="a config YAML (see docs/configs.md)")
    flag(g, "json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_run_cost)
