"""``roofline calibrate``: compute / comm microbenchmarks and importers of external sample data.

    python -m roofline calibrate compute --device cuda:0 --dtype bf16 --out my-gpu
    python -m roofline calibrate host --device cuda:0 --out my-host       # a profile takes it: host_from: my-host.yaml
    torchrun --nproc-per-node 8 -m roofline calibrate comm --out my-node
    torchrun --nproc-per-node 8 -m roofline calibrate overlap --out my-node-overlap   # a profile takes it: overlap_from
    python -m roofline calibrate import estimate-train-time DIR --cluster perlmutter --out a100-perlmutter
    python -m roofline calibrate import nccl-tests AR_GPU*_LUT --out a100-dgx-nccl
    python -m roofline calibrate import simumax b200_bf16_ceperm.json --base b200 --out b200-simumax
    python -m roofline calibrate from-runs RUNS.csv --gpu a100-sxm4-80gb --out my-cluster.yaml

``--out NAME`` writes NAME.yaml and NAME.samples.csv (into the folder NAME when it ends with '/').
Heavy modules (scipy, torch) are imported inside ``run``.
"""
from __future__ import annotations

import sys

from ...base.errors import InputError
from .outputs import out_paths, print_report, torch_device, write_outputs  # noqa: F401  (out_paths: tests)


PLOT_COMPUTE = "also draw the fit (needs matplotlib): each class's samples, measured vs fitted"
PLOT_LINKS = "each collective's bus bandwidth vs message size, measured and fitted"


def register(subparsers) -> None:
    from ...spec.cliargs import number
    p = subparsers.add_parser("calibrate", help="fit a hardware profile from microbenchmarks or sample data")
    sub = p.add_subparsers(dest="calibrate_command", required=True)

    c = sub.add_parser("compute", help="operator microbenchmarks (torch) -> fitted efficiencies")
    c.add_argument("--device", default="cuda:0", help="cuda:N or cpu (default cuda:0)")
    c.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"),
                   help="data type of the benchmarked kernels (default bf16)")
    c.add_argument("--out", required=True, help="output NAME (NAME.yaml, NAME.samples.csv) or folder/")
    c.add_argument("--quick", action="store_true", help="small sweep (seconds)")
    c.add_argument("--base", help="datasheet profile whose peaks the efficiencies refer to (default: measured peaks)")
    c.add_argument("--repeats", type=number(int), default=None, help="timed repeats per shape (median)")
    c.add_argument("--plot", metavar="PNG", help=PLOT_COMPUTE)

    m = sub.add_parser("comm", help="torch.distributed collectives (run under torchrun) -> alpha-beta fits")
    m.add_argument("--out", required=True, help="output NAME (NAME.yaml with the fitted collectives, "
                   "NAME.samples.csv) or folder/; written by rank 0")
    m.add_argument("--max-size", "--max_size", dest="max_size", default="1 GiB", help="largest message (e.g. '64 MiB')")
    m.add_argument("--sizes", nargs="*", help="explicit message sizes (e.g. 1KiB 1MiB)")
    m.add_argument("--backend", choices=("nccl", "gloo"), help="default: nccl on GPU, gloo on CPU")
    m.add_argument("--ranks-per-node", "--ranks_per_node", dest="ranks_per_node", type=number(int),
                   help="ranks per node for the intra/inter group layouts (default: torchrun's LOCAL_WORLD_SIZE)")
    m.add_argument("--repeats", type=number(int), default=None,
                   help="timed repeats per message size, median of the max over ranks (default 20 on GPU, 5 on CPU)")
    m.add_argument("--plot", metavar="PNG", help=f"also draw the fit (needs matplotlib): {PLOT_LINKS}")

    o = sub.add_parser("overlap", help="a GEMM timed alone and beside a running collective (run under torchrun) -> "
                       "the profile's overlap: block (SMs a collective effectively takes from compute)")
    o.add_argument("--out", required=True, help="output NAME (NAME.yaml: the overlap: block, which a profile takes "
                   "with overlap_from: NAME.yaml; NAME.samples.csv) or folder/; written by rank 0")
    o.add_argument("--base", help="make NAME.yaml a whole profile: this profile id or .yaml with the measured overlap "
                   "(loads with --gpu NAME.yaml); on CPU its SM count converts the fraction")
    o.add_argument("--collective", default="ar", choices=("ar", "ag", "rs", "a2a"),
                   help="collective run beside the GEMMs (default ar)")
    o.add_argument("--comm-size", "--comm_size", dest="comm_size", default="256 MiB",
                   help="the collective's message size (nccl-tests convention; default 256 MiB)")
    o.add_argument("--gemm-size", "--gemm_size", dest="gemm_size", type=number(int),
                   help="n of the n x n x n GEMM (default 8192 on GPU, 256 on CPU)")
    o.add_argument("--gemm-repeats", "--gemm_repeats", dest="gemm_repeats", type=number(int),
                   help="GEMMs per timed loop (default 20 on GPU, 10 on CPU)")
    o.add_argument("--repeats", type=number(int), help="timed loops alone, median (default 5 on GPU, 3 on CPU)")
    o.add_argument("--sms", type=number(int), help="SM count the fraction converts to (default: the device's; on CPU "
                   "--base's)")
    o.add_argument("--backend", choices=("nccl", "gloo"), help="default: nccl on GPU, gloo on CPU")
    o.add_argument("--ranks-per-node", "--ranks_per_node", dest="ranks_per_node", type=number(int),
                   help="ranks per node for the intra/inter group layouts (default: torchrun's LOCAL_WORLD_SIZE)")

    hp = sub.add_parser("host", help="host (CPU) issue time of one eager-PyTorch layer -> the profile's `host:` block")
    hp.add_argument("--device", default="cpu", help="cpu or cuda:N: where the layer's kernels run; cuda:N on the "
                    "target node measures its real launch path (default cpu)")
    hp.add_argument("--repeats", type=number(int), default=200, help="timed repeats per measurement, median "
                    "(default 200, after 20 warm-up calls)")
    hp.add_argument("--out", help="also write NAME.yaml: the host: block with its provenance, which a profile takes "
                    "with `host_from: NAME.yaml` (or folder/)")
    hp.add_argument("--base", help="with --out: make NAME.yaml a whole profile, this profile id or .yaml with the "
                    "measured host block (loads with --gpu NAME.yaml)")
    hp.add_argument("--style", choices=("megatron", "plain"), default="megatron",
                    help="layer code path: Megatron-LM/DeepSpeed modules (default) or a minimal nn.Module layer")
    hp.add_argument("--runs", type=number(int), default=3, help="independent runs; the quietest (smallest total) is kept")
    hp.add_argument("--moe", action="store_true", help="also measure what an MoE layer's router, dispatcher and "
                    "permutation add (Megatron-Core's own layers; needs megatron-core): the host keys moe_fwd, moe_bwd")

    i = sub.add_parser("import", help="fit a profile from external sample data")
    isub = i.add_subparsers(dest="import_format", required=True)
    e = isub.add_parser("estimate-train-time", help="estimate-train-time operator + NCCL CSVs")
    e.add_argument("dir", help="the data folder (with perlmutter-a100/ and vista-gh200/) or one cluster's folder")
    e.add_argument("--cluster", required=True, choices=("perlmutter", "vista"),
                   help="which cluster's samples: perlmutter (A100 SXM4 80GB, 4 per node) or vista (GH200, 1 per node)")
    e.add_argument("--out", required=True, help="output NAME (NAME.yaml, NAME.samples.csv) or folder/")
    e.add_argument("--folds", type=number(int, low=2, strict=False), default=5,
                   help="k of the k-fold held-out fit error reported in the profile (default 5)")
    e.add_argument("--plot", metavar="PNG", help=f"{PLOT_COMPUTE}; {PLOT_LINKS}")
    n = isub.add_parser("nccl-tests", help="nccl-tests all_reduce_perf tables of one node")
    n.add_argument("files", nargs="+", help="all_reduce_perf output tables (text or CSV), one per rank count")
    n.add_argument("--out", required=True, help="output NAME (NAME.yaml, NAME.samples.csv) or folder/")
    n.add_argument("--base", default="a100-sxm4-80gb",
                   help="datasheet profile the fitted intra-node links calibrate (default a100-sxm4-80gb)")

    sm = isub.add_parser("simumax", help="a SimuMax system JSON's measured matmul efficiencies (configs/system/*.json)")
    sm.add_argument("file", help="SimuMax system config with accelerator.op.matmul.accurate_efficient_factor")
    sm.add_argument("--base", required=True, help="datasheet profile of that GPU (its peaks; everything not fitted)")
    sm.add_argument("--out", required=True, help="output NAME (NAME.yaml, NAME.samples.csv) or folder/")
    sm.add_argument("--folds", type=number(int, low=2, strict=False), default=5,
                    help="k of the k-fold held-out fit error reported in the profile (default 5)")
    sm.add_argument("--plot", metavar="PNG", help=PLOT_COMPUTE)

    r = sub.add_parser("from-runs", help="fit host/efficiency/bandwidth terms of a profile to measured steps (CSV)")
    r.add_argument("runs", help="CSV of measured steps with validate's columns (shared/validation/README.md)")
    r.add_argument("--gpu", required=True, help="BASE profile id or .yaml the fit starts from")
    r.add_argument("--out", required=True, help="the fitted profile, NAME.yaml (loads with --gpu NAME.yaml)")
    r.add_argument("--fit", help="comma-separated terms (host_layer, host_mb, host_moe, host_edge, gemm_eff, intra_bw, inter_bw, "
                                 "intra_alpha, inter_alpha, overlap_sms; "
                                 "default: host_layer,host_mb,gemm_eff,intra_bw,inter_bw, unidentifiable ones dropped)")
    r.add_argument("--folds", type=number(int, low=2, strict=False),
                   help="cross-validation folds of whole groups (default: leave one group out)")
    r.add_argument("--group-by", "--group_by", dest="group_by",
                   help="column whose values are held out together (default: model, else a model-size bucket)")
    r.add_argument("--json", action="store_true", help="print the report as one JSON object")
    r.add_argument("--plot", metavar="PNG", help="also draw each run's measured step time against BASE's and the "
                   "cross-validated prediction, and the MAPE per held-out group (needs matplotlib)")
    p.set_defaults(func=run)


def _host(args) -> int:
    from ...base import progress
    from . import bench_host
    if args.runs < 1 or args.repeats < 1:
        raise InputError(f"--runs and --repeats must be at least 1, got --runs {args.runs} --repeats {args.repeats}")
    torch_device(args.device, "host")
    if args.base and not args.out:
        raise InputError(f"--base {args.base}: names the base of the profile --out writes; give --out NAME too")
    base_name = ""
    if args.base:
        from ...spec import hardware
        base_name = hardware.load(args.base).name   # an unknown --base fails before minutes of measuring
    path = out_paths(args.out, create=False)[0] if args.out else None   # a bad name fails here; nothing written yet
    if args.moe:
        from . import bench_host_moe
        bench_host_moe.require()                        # one line before minutes of measuring, not after
    stages = bench_host.stages(args.style)
    total = lambda r: sum(v for k, v in r.items() if isinstance(v, float))  # noqa: E731
    results = []
    with progress.bar(f"calibrate host ({args.device}, {args.style})", total=args.runs * len(stages),
                      unit="stage") as bar:
        for i in range(args.runs):
            bar.note(f"run {i + 1}/{args.runs}")
            results.append(bench_host.measure(args.device, args.repeats, style=args.style,
                                              tick=lambda label: bar.update(1)))
    r = min(results, key=total)
    if args.moe:
        with progress.bar(f"calibrate host --moe ({args.device})", total=len(bench_host_moe.EXPERTS),
                          unit="layer") as bar:
            moe = bench_host_moe.measure(args.device, args.repeats, tick=lambda label: bar.update(1))
        print(bench_host_moe.table(moe), file=sys.stderr)
        r.update({k: moe[k] for k in ("moe_fwd", "moe_bwd", "kernels_moe_fwd", "kernels_moe_bwd")})
    host = bench_host.host_block(r)
    print(f"# measured on {args.device}, torch {r['torch']}, style {args.style}, median of {r['repeats']} repeats, "
          f"quietest of {args.runs} runs" + (f"; written to {path} (a profile takes it with host_from: {path.name})"
                                             if path else "; --out NAME writes it as a profile fragment"))
    print("host: {" + ", ".join(f"{k}: {v}" for k, v in host.items()) + "}")
    if path:
        from ...base.schema import write_text_atomic
        path = out_paths(args.out)[0]
        write_text_atomic(path, bench_host.fragment(r, path.stem, args.runs, base=args.base,
                                                            base_name=base_name))
        print(f"wrote {path}", file=sys.stderr)
    return 0


def run(args) -> int:
    cmd = args.calibrate_command
    if getattr(args, "plot", None):
        from ..plotting import check
        check(args.plot, "--plot")          # before the benchmarks or the fit: a bad path costs nothing
    if cmd == "host":
        return _host(args)
    if cmd == "import" and args.import_format == "estimate-train-time":
        from ...base import progress
        from . import importers, profile
        im = importers.import_estimate_train_time(args.dir, args.cluster)
        with progress.phase(f"fit {args.cluster} compute and collectives ({args.folds}-fold held-out errors; "
                            "minutes)"):
            text, csv_text, rep = profile.imported_profile(im, out_paths(args.out)[2], k=args.folds)
        write_outputs(args.out, text, csv_text)
        print_report(rep, im.defects)
        if args.plot:
            from . import fit_plot
            fit_plot.plot(args.plot, fit_plot.compute_panels(im.ops, rep["compute"], rep["peaks"]),
                          fit_plot.link_panels(profile.link_samples(im.colls), rep["links"]),
                          title=f"calibrate import estimate-train-time --cluster {args.cluster}")
        return 0
    if cmd == "import" and args.import_format == "simumax":
        from . import importers, profile
        out_paths(args.out, create=False)           # a bad --out fails before the fit
        im = importers.import_simumax(args.file, args.base)
        text, csv_text, rep = profile.simumax_profile(im, out_paths(args.out, create=False)[2], k=args.folds)
        write_outputs(args.out, text, csv_text)
        print_report(rep, im.defects)
        if args.plot:
            from . import fit_plot
            fit_plot.plot(args.plot, fit_plot.compute_panels(im.ops, rep["compute"], rep["peaks"]),
                          title=f"calibrate import simumax {args.file} --base {args.base}")
        return 0
    if cmd == "import":
        from . import importers, profile
        tables = [importers.import_nccl_tests(f) for f in args.files]
        text, csv_text, rep = profile.nccl_tests_profile(tables, out_paths(args.out)[2], base=args.base)
        write_outputs(args.out, text, csv_text)
        f = rep["fit"]
        print(f"ar intra: call {f.call * 1e6:.2f} us, alpha {f.alpha * 1e6:.2f} us, busbw {f.busbw / 1e9:.1f} GB/s, "
              f"held-out MAPE {f.mape:.1%}; "
              f"by ranks {rep['by_p']}")
        return 0
    if cmd == "from-runs":
        from . import from_runs
        from_runs.out_path(args.out)                # a bad --out fails before the fit
        res = from_runs.calibrate(args.runs, args.gpu, fit=args.fit, k=args.folds, group_by=args.group_by)
        from_runs.write(res, args.out)
        if args.plot:
            from . import fit_plot
            fit_plot.plot_runs(args.plot, res.runs.measured, res.base_predicted, res.cv["predicted"], res.runs.groups,
                               title=f"calibrate from-runs {args.runs} --gpu {args.gpu}: BASE "
                                     f"{100 * res.base_error['mape']:.1f} %, "
                                     f"cross-validated {100 * res.cv['mape']:.1f} %")
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
    if cmd == "overlap":
        from . import bench_overlap
        return bench_overlap.main(args)
    raise InputError(f"unknown calibrate command {cmd!r}")
