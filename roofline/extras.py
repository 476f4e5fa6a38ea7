"""Subcommands beyond the core: ``examples``, ``run-cost`` and ``cluster-schedule``.

``roofline.cli`` registers them through :func:`register`.
"""
from __future__ import annotations

from .errors import InputError


def _model_plan_hw(args):
    """(Model, Plan, Hardware, training) from flags and an optional --config/--example, as ``transformer``."""
    from . import cli, configfile

    training = {}
    if args.example or args.config:
        cfg = configfile.load_config(args.config or configfile.example_path(args.example))
        args._base = cfg
        if cfg.get("framework") and args.framework == "megatron-core":
            args.framework = cfg["framework"]
        training = cfg.get("training") or {}
    model, plan, hw = cli.build(args)
    return model, plan, hw, training


def cmd_examples(args) -> int:
    from . import configfile

    if args.action == "list":
        for name in configfile.list_examples():
            print(f"{name:<24}{configfile.describe(name)}")
        return 0
    if not args.name:
        raise InputError("examples show needs an example name (see `examples list`)")
    print(configfile.example_path(args.name).read_text().rstrip())
    return 0


def cmd_run_cost(args) -> int:
    from . import runcost

    from . import schema

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
    from .config import check
    check(model, plan)
    tokens = args.tokens if args.tokens is not None else training.get("tokens")
    if tokens is None:
        raise InputError("run-cost needs the training tokens: --tokens (or training.tokens in the config)")
    rc = runcost.run_cost(model, plan, hw, tokens, tp_intra=tp_intra, tp_inter=tp_inter,
                          utilization=args.utilization, flop_rate=args.flop_rate)
    print(schema.strict_json(rc, indent=1) if args.json else runcost.render(rc))
    return 0


def cmd_cluster_schedule(args) -> int:
    from . import hardware, schedule, schema

    if args.gpus is not None:                 # checked before the jobs file is read: 0 is not "unset"
        schema.number(args.gpus, "--gpus", int, low=1)
    jobs, cluster = schedule.load_jobs(args.jobs)
    n = args.gpus if args.gpus is not None else cluster.get("gpus")
    if n is None:
        raise InputError("cluster-schedule needs the cluster size: --gpus N (or 'gpus:' in the jobs file)")
    n = schema.number(n, f"{args.jobs}: gpus (GPUs in the cluster)", int, low=1)
    hw = hardware.load(args.gpu or cluster.get("gpu") or "a100-sxm4-80gb")
    results = schedule.schedule(jobs, int(n), hw)
    if args.json:
        print(schema.strict_json(schedule.to_dict(results), indent=1))
    else:
        print(f"cluster: {int(n)} x {hw.id}, {len(jobs)} jobs\n")
        print(schedule.render(results))
    return 0


def register(sub) -> None:
    from .cli import add_model_plan_flags, flag

    p = sub.add_parser("examples", help="list or show the bundled example configs")
    p.add_argument("action", choices=("list", "show"))
    p.add_argument("name", nargs="?", help="example name (see `examples list`)")
    p.set_defaults(func=cmd_examples)

    p = sub.add_parser("run-cost", help="the whole run's FLOP and network bytes per parallel axis, and its days")
    add_model_plan_flags(p)
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

    p = sub.add_parser("cluster-schedule", help="share a GPU cluster among training jobs (greedy vs equal split)")
    p.add_argument("jobs", help="jobs YAML (see docs/timeline.md#cluster-scheduling)")
    flag(p, "gpus", type=int, help="GPUs in the cluster (default: 'gpus' of the jobs file)")
    flag(p, "gpu", help="hardware profile of the cluster (default: 'gpu' of the jobs file, else a100-sxm4-80gb)")
    flag(p, "json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_cluster_schedule)
