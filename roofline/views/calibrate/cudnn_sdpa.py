"""cuDNN's fused attention measured on Hopper and Blackwell against the attention prior of the profiles.

The data (``roofline/data/cudnn-sdpa``, NOTICE.md there) are NVIDIA cudnn-frontend's published training SDPA benchmark
(``benchmark/sdpa_benchmark_training``): the median forward and backward time of cuDNN's fused attention for the
attention shapes of Llama 3.1 (GQA 64/8, head dim 128), DeepSeek-V3 (MLA: 128 heads, query/key 192, value 128),
Kimi K2.6 (MLA, 64 heads) and GPT-OSS (head dim 64, sliding window) at sequence 2k-32k, on a GB200 and a GB300 (cuDNN
9.22) and an H200 (cuDNN 9.19).

The profiles price cuDNN's attention as the FlashAttention-2 prior of their compute curves divided by the
architecture's ``attention_speed.cudnn`` at the kernel's head width. This module restates each measured shape as that
factor: the prior's time over the measured time, both at the same clock. The benchmark runs ten iterations of each
kernel (median of the last five): a burst at boost clock. The prior carries the profile's sustained clock (a training
step's compute runs power-capped, attention kernels included: b200.yaml's notes on FlashAttention-4 throttling at
1000 W), so the prior's time is taken back to boost clock (times the sustained clock) before the ratio.

FP8 attention (Transformer Engine fp8_dpa) is restated against the same kernel in BF16 at the same shapes
(:func:`fp8_over_bf16`: the profiles' ``fp8_attention_speed``), and the windowed backward's growth with the sequence
(:func:`window_bwd_growth`) tells whether a kernel skips the key blocks outside a sliding window (its ``window_bwd``).

``python -m roofline.views.calibrate.cudnn_sdpa`` prints the table docs/calibration.md quotes; tests check the
profiles' factors against :func:`medians` and :func:`fp8_over_bf16`.
"""
from __future__ import annotations

import csv
import dataclasses
import statistics
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data" / "cudnn-sdpa"
# the benchmark's gpu_name -> the profile it measures
PROFILE_OF = {"NVIDIA GB200": "gb200", "NVIDIA GB300": "gb300", "NVIDIA H200": "h200"}


@dataclasses.dataclass(frozen=True)
class Shape:
    gpu: str              # profile id
    config: str           # the benchmark's model_name (llama3.1, dsv3, kimiK26, gpt_oss)
    dtype: str            # bfloat16, fp8, mxfp8
    causal: bool
    batch: int
    seq: int
    heads: int
    kv_heads: int
    d_qk: int
    d_v: int
    window: int | None    # sliding window (keys per query), None: full
    fwd_s: float
    bwd_s: float


@lru_cache(maxsize=None)
def load() -> tuple[Shape, ...]:
    """Every successful, non-deterministic-backward shape of the bundled files (two CSV layouts: one row per pass, or
    one row with both)."""
    rows: dict[tuple, dict] = {}
    for path in sorted(DATA.glob("*.csv")):
        with path.open(newline="") as fh:
            for r in csv.DictReader(fh):
                if r.get("success") != "True" or r.get("deterministic_bwd") != "False" or r["gpu_name"] not in PROFILE_OF:
                    continue
                key = (PROFILE_OF[r["gpu_name"]], r["model_name"], r["data_type"], r["attn_mask"] != "no_mask",
                       int(r["batch_size"]), int(r["q_seqlen"]), int(r["num_q_heads"]), int(r["num_kv_heads"]),
                       int(r["head_dim_qk"]), int(r["head_dim_vo"]),
                       int(r["sliding_window_size"]) if r.get("sliding_window_size") else None)
                d = rows.setdefault(key, {})
                if "time_ms" in r:
                    d[r["profile_pass"]] = float(r["time_ms"]) / 1e3
                else:
                    d["fwd"], d["bwd"] = float(r["fwd_time_ms"]) / 1e3, float(r["bwd_time_ms"]) / 1e3
    return tuple(Shape(*k, v["fwd"], v["bwd"]) for k, v in sorted(rows.items()) if "fwd" in v and "bwd" in v)


@lru_cache(maxsize=None)
def _prior_exprs(mla: bool, window: bool):
    """The flash-attention ops' forward and backward time (compute.op_time, summed over the full and windowed kinds)."""
    from ...model.formulas import compute as C
    from ...model.formulas import symbols as S
    core = C.attention_core(C.mla_qk, S.v_head, window=window) if mla else C.attention_core(window=window)
    att = [o for o in core if o.name == "flash_attention"]
    return tuple(sum(C.op_time(o, d) for o in att) for d in ("fwd", "bwd"))


def prior_times(sh: Shape, profile=None) -> tuple[float, float]:
    """The profile's FlashAttention-2 prior (attention_speed set aside) for this shape, forward and backward seconds at
    boost clock (the prior's time at the job's clock, compute.clock_eff, times that clock)."""
    from ...model.formulas import compute as C
    from ...model.predict import inputs, value_at
    from ...spec import hardware, models
    from ...spec.config import Plan
    hw = dataclasses.replace(profile or hardware.load(sh.gpu), attention_speed={})
    mla = sh.d_qk != sh.d_v
    if mla:    # MLA: the kernel's widths are the preset's (192 / 128); heads and sequence are the shape's
        m = dataclasses.replace(models.load("deepseek-v3"), n_heads=sh.heads, seq_len=sh.seq)
    else:
        m = dataclasses.replace(models.load("llama3-8b"), n_heads=sh.heads, n_kv_heads=sh.kv_heads,
                                d_model=sh.heads * sh.d_qk, head_dim=sh.d_qk, seq_len=sh.seq)
    m = dataclasses.replace(m, causal=sh.causal, swa_window=sh.window, swa_every=None)
    x = inputs(m, Plan(tp=1, pp=1, dp=1, micro_batch=sh.batch, global_batch=sh.batch), hw)
    clock = value_at(C.clock_eff, x)
    return tuple(value_at(e, x) * clock for e in _prior_exprs(mla, sh.window is not None))


def factor(sh: Shape) -> float:
    """The shape's forward + backward as a speed over the prior at the same clock (what attention_speed states)."""
    f, b = prior_times(sh)
    return (f + b) / (sh.fwd_s + sh.bwd_s)


def medians() -> dict[tuple[str, int], tuple[float, int]]:
    """(profile, kernel head width) -> (median factor, shapes) over the causal BF16 shapes without a window: width 128
    from Llama 3.1's, 192 from the MLA shapes (DeepSeek-V3 and Kimi K2.6)."""
    groups: dict[tuple[str, int], list[float]] = {}
    for sh in load():
        if sh.dtype == "bfloat16" and sh.causal and sh.window is None:
            groups.setdefault((sh.gpu, sh.d_qk), []).append(factor(sh))
    return {k: (statistics.median(v), len(v)) for k, v in sorted(groups.items())}


def fp8_over_bf16() -> dict[tuple[str, str, str], float]:
    """(profile, fp8 or mxfp8, fwd or bwd) -> the median of the FP8 kernel's speed over the BF16 kernel's at the same
    causal, unwindowed shape."""
    by = {(sh.gpu, sh.config, sh.causal, sh.batch, sh.seq, sh.heads, sh.window, sh.dtype): sh for sh in load()}
    out: dict[tuple[str, str, str], list[float]] = {}
    for k, sh in by.items():
        bf = by.get(k[:-1] + ("bfloat16",))
        if sh.dtype == "bfloat16" or bf is None or not sh.causal or sh.window is not None:
            continue
        out.setdefault((sh.gpu, sh.dtype, "fwd"), []).append(bf.fwd_s / sh.fwd_s)
        out.setdefault((sh.gpu, sh.dtype, "bwd"), []).append(bf.bwd_s / sh.bwd_s)
    return {k: statistics.median(v) for k, v in sorted(out.items())}


def window_bwd_growth() -> dict[tuple[str, str], float]:
    """(profile, data type) -> the exponent of the windowed backward time in the sequence (least squares of log time on
    log sequence over the sliding-window shapes): about 1 where the kernel skips the key blocks outside the window
    (work s x w), 2 where it computes every causal block (s^2 / 2), whatever the window."""
    import numpy as np
    pts: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for sh in load():
        if sh.causal and sh.window is not None:
            pts.setdefault((sh.gpu, sh.dtype), []).append((sh.seq, sh.bwd_s))
    return {k: float(np.polyfit(*np.log(np.array(xy).T), 1)[0]) for k, xy in sorted(pts.items()) if len(xy) >= 2}


def table() -> str:
    from ...spec import hardware
    lines = ["cuDNN fused attention (NVIDIA cudnn-frontend sdpa_benchmark_training, BF16, causal) over each profile's",
             "FlashAttention-2 prior at the same clock; forward + backward of one step:",
             "",
             "| GPU | config | heads | head dim (q/k, v) | sequence | measured fwd + bwd (ms) | prior (ms) | speed |",
             "|---|---|---:|---|---:|---:|---:|---:|"]
    for sh in load():
        if sh.dtype != "bfloat16" or not sh.causal or sh.window is not None:
            continue
        f, b = prior_times(sh)
        lines.append(f"| {sh.gpu} | {sh.config} | {sh.heads}/{sh.kv_heads} | {sh.d_qk}/{sh.d_v} | {sh.seq} | "
                     f"{(sh.fwd_s + sh.bwd_s) * 1e3:.3f} | {(f + b) * 1e3:.3f} | {(f + b) / (sh.fwd_s + sh.bwd_s):.2f} |")
    lines += ["", "| profile | head dim | shapes | median speed | the profile's attention_speed.cudnn |",
              "|---|---:|---:|---:|---:|"]
    for (gpu, d), (med, n) in medians().items():
        lines.append(f"| {gpu} | {d} | {n} | {med:.2f} | {hardware.load(gpu).attention_factor('cudnn', d):.2f} |")
    lines += ["", "FP8 attention over BF16 attention at the same causal, unwindowed shapes (median speed ratio), beside the",
              "profile's fp8_attention_speed; the growth of the windowed backward time with the sequence (s^k: 1 when",
              "the kernel skips the blocks outside the window, 2 when it computes the whole causal triangle) beside its",
              "window_bwd:", "",
              "| profile | recipe | forward | backward | profile fwd / bwd | windowed backward ~ s^k | window_bwd |",
              "|---|---|---:|---:|---:|---:|---|"]
    fr, growth = fp8_over_bf16(), window_bwd_growth()
    for gpu, dt in sorted({(g, d) for g, d, _ in fr}):
        fwd, bwd, skips = hardware.load(gpu).fp8_attention_speed.get(dt, (None, None, None))
        k = growth.get((gpu, dt))
        lines.append(f"| {gpu} | {dt} | {fr[(gpu, dt, 'fwd')]:.2f} | {fr[(gpu, dt, 'bwd')]:.2f} | "
                     + (f"{fwd:.2f} / {bwd:.2f} | " if fwd else "(none) | ") + (f"{k:.2f} | " if k else "(not measured) | ")
                     + ("(none)" if skips is None else str(skips).lower()) + " |")
    bf = ", ".join(f"{gpu} s^{k:.2f}" for (gpu, dt), k in growth.items() if dt == "bfloat16")
    lines += ["", f"BF16's windowed backward for comparison: {bf}."]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
