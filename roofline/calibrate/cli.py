"""``roofline calibrate``: compute / comm microbenchmarks and importers of external sample data.

    python -m roofline calibrate compute --device cuda:0 --dtype bf16 --out my-gpu
    torchrun --nproc-per-node 8 -m roofline calibrate comm --out my-node
    python -m roofline calibrate import estimate-train-time DIR --cluster perlmutter --out a100-perlmutter
    python -m roofline calibrate import nccl-tests AR_GPU*_LUT --out a100-dgx-nccl
    python -m roofline calibrate from-runs RUNS.csv --gpu a100-sxm4-80gb --out my-cluster.yaml

``--out NAME`` writes NAME.yaml and NAME.samples.csv (into the folder NAME when it ends with '/').
Heavy modules (scipy, torch) are imported inside ``run``.
"""
from __future__ import annotations

from ..errors import InputError
from .outputs import out_paths, print_report, torch_device, write_outputs  # noqa: F401  (out_paths: tests)


def register(subparsers) -> None:
    from ..cliargs import number
    p = subparsers.add_parser("calibrate", help="fit a hardware profile from microbenchmarks or sample data")
    sub = p.add_subparsers(dest="calibrate_command", required=True)

    c = sub.add_parser("compute", help="operator microbenchmarks (torch) -> fitted efficiencies")
    c.add_argument("--device", default="cuda:0", help="cuda:N or cpu (default cuda:0)")
    c.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    c.add_argument("--out", required=True, help="output NAME (NAME.yaml, NAME.samples.csv) or folder/")
    c.add_argument("--quick", action="store_true", help="small sweep (seconds)")
    c.add_argument("--base", help="datasheet profile whose peaks the efficiencies refer to (default: measured peaks)")
    c.add_argument("--repeats", type=number(int), default=None, help="timed repeats per shape (median)")

    m = sub.add_parser("comm", help="torch.distributed collectives (run under torchrun) -> alpha-beta fits")
    m.add_argument("--out", required=True)
    m.add_argument("--max-size", "--max_size", dest="max_size", default="1 GiB", help="largest message (e.g. '64 MiB')")
    m.add_argument("--sizes", nargs="*", help="explicit message sizes (e.g. 1KiB 1MiB)")
    m.add_argument("--backend", choices=("nccl", "gloo"), help="default: nccl on GPU, gloo on CPU")
    m.add_argument("--ranks-per-node", "--ranks_per_node", dest="ranks_per_node", type=number(int),
                   help="ranks per node for the intra/inter group layouts (default: torchrun's LOCAL_WORLD_SIZE)")
    m.add_argument("--repeats", type=number(int), default=None)

    hp = sub.add_parser("host", help="host (CPU) issue time of one eager-PyTorch layer -> the profile's `host:` block")
    hp.add_argument("--device", default="cpu")
    hp.add_argument("--repeats", type=number(int), default=200)
    hp.add_argument("--style", choices=("megatron", "plain"), default="megatron",
                    help="layer code path: Megatron-LM/DeepSpeed modules (default) or a minimal nn.Module layer")
    hp.add_argument("--runs", type=number(int), default=3, help="independent runs; the quietest (smallest total) is kept")

    i = sub.add_parser("import", help="fit a profile from external sample data")
    isub = i.add_subparsers(dest="import_format", required=True)
    e = isub.add_parser("estimate-train-time", help="estimate-train-time operator + NCCL CSVs")
    e.add_argument("dir", help="the data folder (with perlmutter-a100/ and vista-gh200/) or one cluster's folder")
    e.add_argument("--cluster", required=True, choices=("perlmutter", "vista"))
    e.add_argument("--out", required=True)
    e.add_argument("--folds", type=number(int, low=2, strict=False), default=5)
    n = isub.add_parser("nccl-tests", help="nccl-tests all_reduce_perf tables of one node")
    n.add_argument("files", nargs="+")
    n.add_argument("--out", required=True)
    n.add_argument("--base", default="a100-sxm4-80gb")

    r = sub.add_parser("from-runs", help="fit host/efficiency/bandwidth terms of a profile to measured steps (CSV)")
    r.add_argument("runs", help="CSV of measured steps with validate's columns (shared/validation/README.md)")
    r.add_argument("--gpu", required=True, help="BASE profile id or .yaml the fit starts from")
    r.add_argument("--out", required=True, help="the fitted profile, NAME.yaml (loads with --gpu NAME.yaml)")
    r.add_argument("--fit", help="comma-separated terms (host_layer, host_mb, host_edge, gemm_eff, intra_bw, inter_bw; "
                                 "default: host_layer,host_mb,gemm_eff,intra_bw,inter_bw, unidentifiable ones dropped)")
    r.add_argument("--folds", type=number(int, low=2, strict=False),
                   help="cross-validation folds of whole groups (default: leave one group out)")
    r.add_argument("--group-by", "--group_by", dest="group_by",
                   help="column whose values are held out together (default: model, else a model-size bucket)")
    r.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=run)


def run(args) -> int:
    cmd = args.calibrate_command
    if cmd == "host":
        torch_device(args.device, "host")
        from .bench_host import measure
        if args.runs < 1 or args.repeats < 1:
            raise InputError("--runs and --repeats must be at least 1")
        total = lambda r: sum(v for k, v in r.items() if isinstance(v, float))
        r = min((measure(args.device, args.repeats, style=args.style) for _ in range(args.runs)), key=total)
        us = lambda v: f"{v * 1e6:.0f} us"
        keys = [k for k in ("layer_fwd", "layer_bwd", "recompute_extra", "embed_fwd", "embed_bwd", "head_fwd",
                            "head_bwd", "microbatch") if k in r]
        kern = {"layer_fwd": "kernels_fwd", "layer_bwd": "kernels_bwd", "recompute_extra": "kernels_recompute"}
        print(f"# measured on {args.device}, torch {r['torch']}, style {args.style}, median of {r['repeats']} repeats, "
              f"quietest of {args.runs} runs (paste into a profile)")
        print("host: {" + ", ".join(f"{k}: {us(r[k])}, {kern.get(k, 'kernels_' + k)}: {r[kern.get(k, 'kernels_' + k)]}"
                                   for k in keys) + ", launch: 5 us}")
        return 0
    if cmd == "import" and args.import_format == "estimate-train-time":
        from . import importers, profile
        im = importers.import_estimate_train_time(args.dir, args.cluster)
        text, csv_text, rep = profile.imported_profile(im, out_paths(args.out)[2], k=args.folds)
        write_outputs(args.out, text, csv_text)
        print_report(rep, im.defects)
        return 0
    if cmd == "import":
        from . import importers, profile
        tables = [importers.import_nccl_tests(f) for f in args.files]
        text, csv_text, rep = profile.nccl_tests_profile(tables, out_paths(args.out)[2], base=args.base)
        write_outputs(args.out, text, csv_text)
        f = rep["fit"]
        print(f"ar intra: alpha {f.alpha * 1e6:.2f} us, busbw {f.busbw / 1e9:.1f} GB/s, held-out MAPE {f.mape:.1%}; "
              f"by ranks {rep['by_p']}")
        return 0
    if cmd == "from-runs":
        from . import from_runs
        from_runs.out_path(args.out)                # a bad --out fails before the fit
        res = from_runs.calibrate(args.runs, args.gpu, fit=args.fit, k=args.folds, group_by=args.group_by)
        from_runs.write(res, args.out)
        if args.json:
            import json
            print(json.dumps(from_runs.to_dict(res), indent=1))
        else:
            print(from_runs.render(res))
        return 0
    if cmd == "compute":
        from . import bench_compute
        return bench_compute.main(args)
    if cmd == "comm":
        from . import bench_comm
        return bench_comm.main(args)
    raise InputError(f"unknown calibrate command {cmd!r}")
