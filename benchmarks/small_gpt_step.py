"""Measured training step of small GPTs on one device against roofline's prediction from a profile.

    python -m roofline calibrate compute --device cuda:0 --dtype bf16 --out my-gpu
    python -m roofline calibrate host --device cuda:0 --style plain   # paste its host: line into my-gpu.yaml
    python benchmarks/small_gpt_step.py --device cuda:0 --profile h100-sxm,my-gpu.yaml [--csv steps.csv]

The model is a GPT-2-style decoder in plain PyTorch, built to be exactly what roofline's `plain` framework
prices: pre-LayerNorm blocks with biases, fused QKV projection, causal `scaled_dot_product_attention` (flash
kernel on GPUs), GELU MLP of 4h, learned positions, embedding tied to the LM head, vocabulary padded to a
multiple of 128, no dropout. One step is: zero the gradients, forward with bf16 autocast over fp32 weights
(matmuls in bf16, fp32 gradients: the profile's `grad_dtype` fp32), cross-entropy, backward, AdamW (fused
on CUDA). Timed with CUDA events (synchronized wall clock on CPU): warm-up steps, then the median of
``--steps`` steps, each started on an idle GPU as a training loop's step is after its synchronizing loss read.
On CUDA a second median, ``gpu_s``, times the same step with a GPU busy-wait queued before it, so the events
span the kernels alone: the host has issued its first ~1000 launches (the depth of the launch queue; beyond
it the launch call blocks) before the GPU reaches them, and where the GPU is the slower of the two it never
waits again. ``measured_s - gpu_s`` is then the host issue time the step exposes. The prediction is
``roofline.predict_config`` of the same shapes with ``framework: plain`` on one GPU
(tp = pp = dp = 1, one micro-batch per step), from each profile of ``--profile`` (comma-separated; one
measurement, one row per size and profile), with ``predicted_host_s`` its host-overhead term.

Prints per size the measured and predicted step, their ratio - 1 and the measured MFU (6 N D model FLOPs
plus attention, as roofline counts them, over the profile's dense peak). ``--tiny`` runs two toy sizes in
seconds on a CPU (the test suite checks the mechanics with it; CPU timings say nothing about a GPU profile).
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline.views.calibrate.bench_host import plain_block  # noqa: E402
from roofline.base.errors import InputError  # noqa: E402

# GPU clock cycles of the busy-wait queued before a step timed for ``gpu_s``: ~0.1 s at 1.4-2 GHz, longer
# than the host needs to fill the launch queue at any size here.
GPU_LEAD_CYCLES = 200_000_000

# (name, layers, d_model, heads): GPT-3 paper shapes (Brown et al. 2020 Table 2.1) that fit one 80 GB GPU
SIZES = [("gpt-125m", 12, 768, 12), ("gpt-350m", 24, 1024, 16), ("gpt-760m", 24, 1536, 16), ("gpt-1.3b", 24, 2048, 16)]
TINY = [("tiny-a", 2, 64, 4), ("tiny-b", 2, 128, 4)]


def build_gpt(torch, layers: int, d: int, heads: int, vocab: int, seq: int, device):
    """GPT-2-style decoder (see the module docstring); returns the module, whose forward gives the mean loss."""
    nn, F = torch.nn, torch.nn.functional

    Block = plain_block(torch, d, heads)        # the block `calibrate host --style plain` times

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            logits = self.ln_f(x) @ self.wte.weight.t()          # tied LM head
            return F.cross_entropy(logits.float().reshape(-1, vocab), targets.reshape(-1))

    with torch.device(device):          # parameters created where they live (meta: shapes only)
        return GPT()


def measure(torch, layers, d, heads, vocab, seq, batch, device, warmup: int, steps: int) -> dict:
    """Median step time (s) of one size, and its parameter count."""
    dev = torch.device(device)
    model = build_gpt(torch, layers, d, heads, vocab, seq, dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    gen = torch.Generator(device="cpu").manual_seed(0)
    data = [torch.randint(0, vocab, (batch, seq + 1), generator=gen).to(dev) for _ in range(4)]  # rotate inputs
    amp = torch.autocast(dev.type, dtype=torch.bfloat16)

    def step(i):
        x = data[i % len(data)]
        opt.zero_grad(set_to_none=True)
        with amp:
            loss = model(x[:, :-1], x[:, 1:])
        loss.backward()
        opt.step()

    def timed(i, lead):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(dev)
        if lead:
            torch.cuda._sleep(GPU_LEAD_CYCLES)
        start.record()
        step(i)
        end.record()
        torch.cuda.synchronize(dev)
        return start.elapsed_time(end) / 1e3

    for i in range(warmup):
        step(i)
    times, gpu, clocks = [], [], []
    for i in range(steps):
        if dev.type == "cuda":
            times.append(timed(i, False))
            clocks.append(_sm_clock(torch, dev))    # read just after a step: the clock that step ran at
            gpu.append(timed(i, True))
        else:
            t = time.perf_counter()
            step(i)
            times.append(time.perf_counter() - t)
    params = sum(p.numel() for p in model.parameters())
    clocks = [c for c in clocks if c]
    return {"measured_s": statistics.median(times), "spread": (max(times) - min(times)) / statistics.median(times),
            "gpu_s": statistics.median(gpu) if gpu else None, "params_torch": params,
            "sm_clock_mhz": statistics.median(clocks) if clocks else None}


def _sm_clock(torch, dev) -> float | None:
    """The GPU's current SM clock in MHz (NVML through torch.cuda.clock_rate), or None where it cannot be read.
    Against the profile's sustained_clock it shows whether the step ran at the power-capped clock of GEMMs alone
    (docs/calibration.md, "Measured on an H200")."""
    try:
        return float(torch.cuda.clock_rate(dev))
    except Exception:       # no NVML (pynvml missing, a GPU without it): the step is still timed
        return None


def predict(name, layers, d, heads, vocab, seq, batch, profile) -> dict:
    from roofline import predict_config
    cfg = {"model": {"name": name, "n_layers": layers, "d_model": d, "n_heads": heads, "vocab": vocab, "seq_len": seq,
                     "mlp": "gelu", "norm": "layernorm", "tied": True, "position": "learned", "biases": True,
                     "dropout": False, "attention": "flash"},
           "plan": {"micro_batch": batch, "global_batch": batch, "dtype": "bf16"},
           "hardware": profile, "framework": "plain"}
    p = predict_config(cfg)
    return {"predicted_s": float(p.raw["step_time"]), "predicted_host_s": float(p.raw["t_host_overhead"]), "flops": float(p.raw["flops"]), "params": float(p.params),
            "peak": float(p.hardware.peak("bf16")), "hardware": p.hardware.id,
            "top_terms": {k: round(v / p.raw["step_time"], 3) for k, v in
                          sorted(p.to_dict()["breakdown_s"].items(), key=lambda kv: -kv[1])[:4] if v > 0}}


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %"


def steps_table(paths) -> str:
    """Markdown table of ``--csv`` files (docs/calibration.md carries it; a test keeps the two equal): per size and
    shape the measured step, the GPU alone and their difference (the host time the step exposes, plus whatever
    else differs between the two timings), and per profile the predicted step, its error, its host-overhead term
    and the error of the rest (prediction minus host term, against the GPU alone). Milliseconds."""
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            rows += list(csv.DictReader(f))
    profiles = list(dict.fromkeys(r["profile"] for r in rows))
    keys = list(dict.fromkeys((r["size"], r["seq_len"], r["micro_batch"]) for r in rows))
    ms = lambda v: f"{float(v) * 1e3:.2f}"  # noqa: E731
    head = "| size | seq x micro-batch | measured | GPU alone | measured - GPU alone |" + "".join(
        f" {p} | error | its host term | GPU part error |" for p in profiles)
    out = [head, "|---|---|" + "---:|" * (3 + 4 * len(profiles))]
    for size, seq, mb in keys:
        mine = {r["profile"]: r for r in rows if (r["size"], r["seq_len"], r["micro_batch"]) == (size, seq, mb)}
        r0 = next(iter(mine.values()))
        meas, gpu = float(r0["measured_s"]), (float(r0["gpu_s"]) if r0.get("gpu_s") else None)
        line = (f"| {size} | {seq} x {mb} | {ms(meas)} | {'' if gpu is None else ms(gpu)} | "
                f"{'' if gpu is None else ms(meas - gpu)} |")
        for p in profiles:
            r = mine.get(p)
            if r is None:
                line += " | | | |"
                continue
            pred, host = float(r["predicted_s"]), float(r["predicted_host_s"])
            line += (f" {ms(pred)} | {_pct(float(r['error']))} | {ms(host)} |"
                     f" {'' if gpu is None else _pct((pred - host) / gpu - 1)} |")
        out.append(line)
    return "\n".join(out) + "\n"


PRICED = ("predicted_s", "predicted_host_s", "error", "measured_mfu", "params_model")   # _priced's columns


def _priced(pred: dict, measured_s: float) -> dict:
    """The prediction columns of a CSV row: predicted step and host term (s), error against the measured step,
    the MFU the measured step implies, the model's parameter count."""
    return {"predicted_s": pred["predicted_s"], "predicted_host_s": pred["predicted_host_s"],
            "error": pred["predicted_s"] / measured_s - 1, "measured_mfu": pred["flops"] / measured_s / pred["peak"],
            "params_model": pred["params"]}


def reprice(paths, profiles) -> None:
    """Rewrite each ``--csv`` file with one row per size and profile in ``profiles``: the measured columns of its
    first row for that size, the prediction from the current model on each profile. A measurement made before a
    profile existed (a calibration from the same session) is priced on it without a second run on the device."""
    fields = ("profile", *PRICED)
    for path in paths:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            raise InputError(f"{path}: no rows to reprice")
        first = {}
        for r in rows:
            first.setdefault(r["size"], r)
        out = []
        for r in first.values():
            meas = float(r["measured_s"])
            for prof in profiles:
                pred = predict(r["size"], int(r["layers"]), int(r["d_model"]), int(r["heads"]), int(r["vocab_padded"]),
                               int(r["seq_len"]), int(r["micro_batch"]), prof)
                out.append({**{k: v for k, v in r.items() if k not in fields}, "profile": pred["hardware"],
                            **_priced(pred, meas)})
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(out)


def fit_table(profile: str) -> str:
    """Markdown table of a calibrated profile's fit (``profile``: a YAML path): per class and direction eta, mu, t0 and the 5-fold held-out
    MAPE, with the class's sample count and flagged samples (from the profile's provenance.fit_error)."""
    import yaml
    from roofline.base.units import parse
    with open(profile) as f:
        d = yaml.safe_load(f)
    err = d["provenance"]["fit_error"]
    out = ["| class | dir | eta | mu | t0 (us) | held-out MAPE | n | flagged |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for cls, dirs in d["efficiency"].items():
        if not isinstance(dirs, dict) or cls not in err:
            continue
        for dr, e in dirs.items():
            if f"{dr}_mape_kfold" not in err[cls]:
                continue
            out.append(f"| {cls} | {dr} | {float(e['eta']):.3f} | {float(e['mu']):.3f} | "
                       f"{parse(e['t0'], 's', 't0') * 1e6:.1f} | {err[cls][f'{dr}_mape_kfold'] * 100:.1f} % | "
                       f"{err[cls]['n']} | {err[cls]['flagged']} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--profile", help="hardware profile ids or YAMLs, comma-separated "
                                      "(default: h100-sxm on CUDA, a100-sxm4-80gb otherwise)")
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=50257, help="padded to a multiple of 128 in both model and prediction")
    ap.add_argument("--sizes", help="comma-separated names from " + ", ".join(n for n, *_ in SIZES + TINY))
    ap.add_argument("--tiny", action="store_true", help="two toy sizes, seq 32, micro-batch 2, vocab 256 (CPU)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--csv", help="also write the rows to this CSV")
    ap.add_argument("--table", nargs="+", metavar="CSV", help="print the markdown table of --csv files and exit")
    ap.add_argument("--fit-table", metavar="PROFILE", help="print a calibrated profile's fit table and exit")
    ap.add_argument("--reprice", nargs="+", metavar="CSV", help="re-predict the measured rows of --csv files on "
                    "--profile (every size once per profile), rewrite the files and exit; no device needed")
    args = ap.parse_args(argv)
    if args.reprice:
        if not args.profile:
            print("small_gpt_step: --reprice needs --profile (the profiles to price the measured rows on)",
                  file=sys.stderr)
            return 2
        try:
            reprice(args.reprice, args.profile.split(","))
        except (OSError, KeyError, ValueError, InputError) as exc:
            print(f"small_gpt_step: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.table or args.fit_table:
        try:
            print(steps_table(args.table) if args.table else fit_table(args.fit_table), end="")
        except (OSError, KeyError, InputError) as exc:
            print(f"small_gpt_step: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        import torch
    except ImportError:
        print("small_gpt_step: needs torch (pip install 'roofline[calibrate]')", file=sys.stderr)
        return 2
    if args.tiny:
        args.seq_len, args.micro_batch, args.vocab = 32, 2, 256
    table = {n: (n, *rest) for n, *rest in SIZES + TINY}
    names = args.sizes.split(",") if args.sizes else [n for n, *_ in (TINY if args.tiny else SIZES)]
    unknown = [n for n in names if n not in table]
    if unknown:
        print(f"small_gpt_step: unknown size(s) {', '.join(unknown)}; known: {', '.join(table)}", file=sys.stderr)
        return 2
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"small_gpt_step: --device {args.device}: CUDA is not available here (use --device cpu --tiny)",
              file=sys.stderr)
        return 2
    profiles = (args.profile or ("h100-sxm" if args.device.startswith("cuda") else "a100-sxm4-80gb")).split(",")
    vocab = -(-args.vocab // 128) * 128
    where = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"
    rows = []
    for n in names:
        _, layers, d, heads = table[n]
        try:
            preds = [predict(n, layers, d, heads, vocab, args.seq_len, args.micro_batch, p) for p in profiles]
        except InputError as exc:
            print(f"small_gpt_step: {exc}", file=sys.stderr)
            return 2
        meas = measure(torch, layers, d, heads, vocab, args.seq_len, args.micro_batch, args.device, args.warmup,
                       args.steps)
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()            # the last size's model and optimizer state are gone
        for pred in preds:
            rows.append({"size": n, "layers": layers, "d_model": d, "heads": heads, "seq_len": args.seq_len,
                         "micro_batch": args.micro_batch, "vocab_padded": vocab, "device": where,
                         "torch": torch.__version__, "profile": pred["hardware"], **meas,
                         **_priced(pred, meas["measured_s"]), "top_terms": pred["top_terms"]})
            if not args.json:
                r = rows[-1]
                gpu = "" if r["gpu_s"] is None else f" (GPU alone {r['gpu_s'] * 1e3:.2f})"
                gpu += "" if r["sm_clock_mhz"] is None else f" (SM clock {r['sm_clock_mhz']:.0f} MHz)"
                print(f"{n:10s} {r['params_torch'] / 1e6:7.1f} M  measured {r['measured_s'] * 1e3:9.2f} ms{gpu} "
                      f"(spread {r['spread']:.1%})  {r['profile']}: predicted {r['predicted_s'] * 1e3:9.2f} ms "
                      f"(host {r['predicted_host_s'] * 1e3:.2f})  error {r['error']:+.1%}  MFU {r['measured_mfu']:.1%}",
                      flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for prof in dict.fromkeys(r["profile"] for r in rows):
            mine = [r for r in rows if r["profile"] == prof]
            mape = statistics.mean(abs(r["error"]) for r in mine)
            print(f"{len(mine)} sizes on {where} (torch {torch.__version__}) against profile {prof}: MAPE {mape:.1%}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=[k for k in rows[0] if k != "top_terms"], extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
