"""The tables of docs/calibration.md "Measured on an H200", printed from the files of this folder (a test keeps the
two equal): per-tensor FP8 against BF16 GEMMs, the clock a training step holds against GEMMs alone, and the experts'
grouped GEMM with the host's issue time taken out (CUDA graphs).

    python roofline/data/h200-measured/tables.py
"""
from __future__ import annotations

import csv
import datetime as dt
import re
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _fp8_over_bf16_peak() -> float:
    """Dense FP8 over BF16 peak of the H200 (h200.yaml: 1979 / 989 TFLOP/s)."""
    from roofline.spec import hardware

    hw = hardware.load("h200")
    return hw.peak("fp8") / hw.peak("bf16")


def _max_sm_clock_mhz() -> float:
    """The GPU's maximum SM clock, MHz, as nvidia-smi reported it (gpu.txt)."""
    head, row = (HERE / "gpu.txt").read_text().splitlines()[:2]
    return float(dict(zip((h.strip() for h in head.split(",")), (v.strip() for v in row.split(","))))
                 ["clocks.max.sm [MHz]"].split()[0])


def fp8_table() -> str:
    """Per shape: BF16 and per-tensor FP8 TFLOP/s, and the FP8 kernel's fraction of its peak over BF16's."""
    with open(HERE / "gemm_burst.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    rate = {(r["m"], r["k"], r["n"], r["dtype"]): float(r["tflops"]) for r in rows}
    out = ["| m x k x n | BF16 TFLOP/s | FP8 TFLOP/s | FP8 / BF16 fraction of peak |", "|---|---:|---:|---:|"]
    ratios = []
    for m, k, n in dict.fromkeys((r["m"], r["k"], r["n"]) for r in rows):
        b, e = rate[(m, k, n, "bf16")], rate[(m, k, n, "fp8_e4m3_tensor")]
        ratios.append((int(m), e / b / _fp8_over_bf16_peak()))
        out.append(f"| {m} x {k} x {n} | {b:.1f} | {e:.1f} | {ratios[-1][1]:.3f} |")
    layer = [r for m, r in ratios if m >= 16384]
    out.append(f"| mean of the layer-sized shapes (m = 16384) | | | {statistics.mean(layer):.3f} |")
    return "\n".join(out) + "\n"


def fp8_sweep_table() -> str:
    """Per reduction width K over the sweep's shapes with m >= 2048: how much longer the FP8 GEMM takes than the model's
    per-tensor FP8 rate (the BF16 time of the same shape over peak ratio x lp_rate) implies, median, and that excess
    times K (a constant if the excess is a fixed cost per output tile, as long as K / 450 steps)."""
    from roofline.base.precision import GEMM_RATE_FP8

    with open(HERE / "gemm_sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    t = {(int(r["m"]), int(r["k"]), int(r["n"]), r["dtype"]): float(r["seconds"]) for r in rows}
    by_k = {}
    for (m, k, n, dtype), tb in t.items():
        if dtype == "bf16" and m >= 2048:
            implied = tb / (_fp8_over_bf16_peak() * GEMM_RATE_FP8)
            by_k.setdefault(k, []).append(t[(m, k, n, "fp8_e4m3_tensor")] / implied - 1)
    out = [f"| K | shapes | FP8 time over the model's (lp_rate {GEMM_RATE_FP8:.3f}), median | excess x K |",
           "|---:|---:|---:|---:|"]
    for k in sorted(by_k):
        x = statistics.median(by_k[k])
        out.append(f"| {k} | {len(by_k[k])} | {x * 100:+.1f} % | {x * k:.0f} |")
    return "\n".join(out) + "\n"


def _clock_log():
    marks, samples = {}, []
    for line in (HERE / "clock_during_steps.txt").read_text().splitlines():
        if line.startswith("MARK "):
            _, day, time, what = line.split(" ", 3)
            marks[what] = dt.datetime.strptime(f"{day} {time}", "%Y/%m/%d %H:%M:%S.%f")
        elif re.match(r"\d{4}/", line):
            f = [x.strip() for x in line.split(",")]
            samples.append((dt.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f"), float(f[1].split()[0]),
                            float(f[2].split()[0]), float(f[3].split()[0])))
    return marks, samples


def clock_table() -> str:
    """Median SM clock, board power and utilisation over the last two thirds of each busy phase (samples every
    100 ms with the GPU more than half busy), and the rate a GEMM-bound phase keeps."""
    phases = [("GPT 1.3B step (seq 1024, micro-batch 8)", "gpt-1.3b"), ("GPT 350M step (seq 1024, micro-batch 8)",
              "gpt-350m"), ("8192^3 BF16 GEMM back to back", "gemm")]
    top = _max_sm_clock_mhz()
    out = [f"| phase | samples | SM clock (MHz) | clock / {top:.0f} | board power (W) |", "|---|---:|---:|---:|---:|"]
    for label, key in phases:
        tail = _phase(key)
        clock = statistics.median(s[1] for s in tail)
        out.append(f"| {label} | {len(tail)} | {clock:.0f} | {clock / top:.3f} | "
                   f"{statistics.median(s[2] for s in tail):.0f} |")
    return "\n".join(out) + "\n"


def _phase(key: str) -> list:
    """The samples (time, SM clock MHz, board power W, utilisation %) of the last two thirds of phase ``key``,
    those with the GPU more than half busy: the settled state of the phase."""
    marks, samples = _clock_log()
    busy = [s for s in samples if marks[f"start {key}"] <= s[0] <= marks[f"end {key}"] and s[3] > 50]
    return busy[len(busy) // 3:]


def _step_clock(key: str) -> float:
    """Median SM clock of phase ``key`` over the maximum SM clock."""
    return statistics.median(s[1] for s in _phase(key)) / _max_sm_clock_mhz()


def kappa_table() -> str:
    """The GPT-1.3B steps priced on h200-measured as calibrated (kappa from GEMMs alone) and with kappa set to the
    clock ratio the 1.3B step held: the GPU part's error (prediction less its host term, against the GPU alone)."""
    import importlib.util
    import tempfile

    root = HERE.parents[2]
    spec = importlib.util.spec_from_file_location("small_gpt_step", root / "benchmarks" / "small_gpt_step.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    profile = root / "roofline" / "spec" / "hardware" / "profiles" / "h200-measured.yaml"
    text = profile.read_text()
    kappa = re.search(r"^sustained_clock: ([0-9.]+)$", text, re.M).group(1)
    held = _step_clock("gpt-1.3b")
    out = ["| step | GPU alone (ms) | kappa " + kappa + " (GEMMs alone) | kappa " + f"{held:.3f}" +
           " (clock the step held) |", "|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        held_yaml = Path(tmp) / "h200-held.yaml"
        held_yaml.write_text(text.replace("id: h200-measured", "id: h200-held").replace(
            f"sustained_clock: {kappa}", f"sustained_clock: {held:.3f}"))
        for name in ("steps_s1024.csv", "steps_s2048.csv"):
            with open(HERE / name, newline="") as f:
                r = next(r for r in csv.DictReader(f) if r["size"] == "gpt-1.3b")
            gpu = float(r["gpu_s"])
            errs = []
            for prof in (str(profile), str(held_yaml)):
                p = bench.predict(r["size"], int(r["layers"]), int(r["d_model"]), int(r["heads"]),
                                  int(r["vocab_padded"]), int(r["seq_len"]), int(r["micro_batch"]), prof)
                errs.append((p["predicted_s"] - p["predicted_host_s"]) / gpu - 1)
            out.append(f"| gpt-1.3b, {r['seq_len']} x {r['micro_batch']} | {gpu * 1e3:.2f} | {errs[0] * 100:+.1f} % | "
                       f"{errs[1] * 100:+.1f} % |")
    return "\n".join(out) + "\n"


def _grouped_blocks():
    """{shape header: [(experts, rows each, {method: forward + backward ms})]} of grouped_gemm_graph.txt."""
    blocks = {}
    for block in (HERE / "grouped_gemm_graph.txt").read_text().split("grouped GEMM: ")[1:]:
        lines = block.splitlines()
        names = re.findall(r"(\S+(?: graph)?) fwd/bwd", lines[1])
        rows = []
        for line in lines[2:]:
            cells = line.split()
            if not cells or not cells[0].isdigit():
                break
            rows.append((int(cells[0]), int(cells[1]),
                         dict(zip(names, (sum(map(float, c.split("/"))) for c in cells[2:2 + len(names)])))))
        blocks[lines[0].split(" over ")[0]] = rows
    return blocks


def grouped_table() -> str:
    """The Qwen3-30B-shaped grouped GEMM (2048 -> 1536, 32768 token copies): per local-expert count, forward +
    backward milliseconds of the eager four-stream issue, the same recorded as a CUDA graph, torch._grouped_mm and
    the model; then, for every shape measured, the range of graph / model over the expert counts."""
    blocks = _grouped_blocks()
    out = ["| local experts | rows each | four streams, eager | four streams, CUDA graph | torch._grouped_mm | model "
           "| graph / model |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for e, rows, v in blocks["32768 token copies x 2048 -> 1536"]:
        out.append(f"| {e} | {rows} | {v['streams']:.2f} | {v['streams graph']:.2f} | {v['grouped']:.2f} | "
                   f"{v['model']:.2f} | {v['streams graph'] / v['model']:.2f} |")
    out += ["", "| shape (token copies x in -> out) | local experts | four streams, CUDA graph / model |",
            "|---|---|---:|"]
    for shape, rows in blocks.items():
        r = [v["streams graph"] / v["model"] for _, _, v in rows]
        out.append(f"| {shape.replace(' token copies', '')} | {rows[0][0]}-{rows[-1][0]} | {min(r):.2f}-{max(r):.2f} |")
    return "\n".join(out) + "\n"


def main() -> None:
    for table in (fp8_table, fp8_sweep_table, clock_table, kappa_table, grouped_table):
        print(table())


if __name__ == "__main__":
    main()
