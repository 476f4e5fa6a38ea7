"""The MoE all-to-all of the gb200 profile, fitted to NVIDIA's published Hybrid-EP microbenchmark on GB200 NVL72.

deepseek-ai/DeepEP docs/README_Hybrid-EP.md (MIT, commit 41cad94) times Hybrid-EP's dispatch and combine inside one
GB200 NVL72 NVLink domain: 4096 tokens per rank of hidden 7168, top-8 over 8 local experts per rank (random uniform
routing), 8-36 ranks, 16 or 32 SMs. The numbers are bundled in roofline/data/hybridep (NOTICE.md there says how
the source counts its bandwidth). Megatron-Bridge's performance recipes run Hybrid-EP on 32 SMs
(scripts/performance/utils/overrides.py and src/megatron/bridge/perf_recipes/_common.py set moe_hybridep_num_sms = 32),
so the 32-SM rows through the torch API (what a training step calls: the kernels with their metadata preprocessing)
fit the profile's all-to-all over NVLink: t = call + (p - 1) alpha + (p - 1)/p S / busbw, the same alpha-beta form as
every other collective (calibrate/fit.py fit_alpha_beta, robust least squares, k-fold error), where (p - 1)/p S are the
bytes a rank sends to the other ranks, each token once per rank that holds one of its experts (the dedup geometry of
formulas/comm.py dispatch_a2a). gb200.yaml carries the fitted values; a test holds them to this fit.

The same file times Hybrid-EP on one DGX B200 node (8 ranks, 16 SMs): the GB200 fit prices its BF16 calls 4-5 % and
its FP8 dispatch 11 % fast, where the link prior is 24-35 % fast, so b200.yaml takes the same values (NVLink 5 at
900 GB/s per GPU both; B200's through NVSwitch).

The datasheet prior it replaces (the link latency 8 us per peer, 78 % of NVLink 5's 900 GB/s) priced these calls 2-28 %
faster than measured, most at 8 ranks, where the fixed cost of a call (metadata, the torch API) weighs most.

    python benchmarks/hybridep_gb200.py
"""
from __future__ import annotations

import csv
from math import comb
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "roofline" / "data" / "hybridep" / "hybridep_gb200.csv"
TOKENS, HIDDEN, TOPK, LOCAL = 4096, 7168, 8, 8
FP8_BYTES = (1 + 4 / 128) / 2          # the source's FP8 bytes per BF16 byte: 1-byte payload + a float scale per 128
SMS = 32                               # Megatron-Bridge's moe_hybridep_num_sms


def datasheet() -> tuple:
    """The link prior the fit replaces: what gb200 prices a collective it does not fit with (its all-reduce over
    NVLink: the link's latency per ring step, its bandwidth times defaults.yaml link_efficiency.intra), no call time."""
    from roofline.spec import hardware

    alpha, busbw = hardware.load("gb200").collectives["ar", "intra"]
    return alpha, busbw, 0.0


B200 = DATA.with_name("hybridep_b200.csv")


def rows(sms: int = SMS, measurement: str = "torch_api", path: Path = DATA) -> list[dict]:
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if int(r["sms"]) == sms and r["measurement"] == measurement]


def hit(p: int) -> float:
    """Chance that a token has one of its top-8 experts (drawn without replacement among 8p) on a given rank."""
    e = LOCAL * p
    return 1 - comb(e - LOCAL, TOPK) / comb(e, TOPK)


def samples(rs: list[dict]) -> tuple:
    """(size S, ranks p, seconds t) per row: t from the source's bandwidth and bytes, S such that (p - 1)/p S are the
    bytes the rank exchanges with the other ranks."""
    size, p, t = [], [], []
    for r in rs:
        n = int(r["ranks"])
        received = n * TOKENS * hit(n) * HIDDEN * 2 * (FP8_BYTES if r["dtype"] == "fp8" else 1.0)
        t.append(received / (float(r["algbw_gbs"]) * 1e9))
        size.append(received)          # (n - 1)/n of it comes from the other ranks
        p.append(n)
    return np.array(size), np.array(p, float), np.array(t)


def fit(sms: int = SMS):
    from roofline.views.calibrate.fit import fit_alpha_beta

    size, p, t = samples(rows(sms))
    return fit_alpha_beta(size, p, t, "a2a")


def _priced(rs: list[dict], *abc) -> tuple:
    """(measured s, model s) per row of ``rs`` at alpha, busbw, call ``abc``."""
    from roofline.views.calibrate.fit import alpha_beta_time

    size, p, t = samples(rs)
    return t, alpha_beta_time(size, p, "a2a", *abc)


def table(sms: int = SMS) -> list[tuple]:
    """Per row: ranks, op, dtype, measured us, fitted us, datasheet-prior us."""
    f = fit(sms)
    rs = rows(sms)
    t, got = _priced(rs, f.alpha, f.busbw, f.call)
    prior = _priced(rs, *datasheet())[1]
    return [(int(r["ranks"]), r["op"], r["dtype"], a * 1e6, b * 1e6, c * 1e6) for r, a, b, c in zip(rs, t, got, prior)]


def b200_check() -> list[tuple]:
    """The B200 node's Hybrid-EP calls (8 ranks, 16 SMs, torch API) against the GB200 fit: ranks, op, dtype,
    measured us, fitted us."""
    f = fit()
    rs = rows(16, path=B200)
    t, got = _priced(rs, f.alpha, f.busbw, f.call)
    return [(int(r["ranks"]), r["op"], r["dtype"], a * 1e6, b * 1e6) for r, a, b in zip(rs, t, got)]


def main() -> None:
    f = fit()
    print(f"Hybrid-EP on GB200 NVL72, {SMS} SMs, torch API (deepseek-ai/DeepEP docs/README_Hybrid-EP.md @41cad94)")
    print(f"fit: call {f.call * 1e6:.1f} us + (p-1) x alpha {f.alpha * 1e6:.2f} us + bytes / busbw "
          f"{f.busbw / 1e9:.0f} GB/s; k-fold error {f.mape:.1%} over {f.n} rows")
    print()
    print("| ranks | call | measured | fitted | error | datasheet prior | error |")
    print("|---|---|---|---|---|---|---|")
    for n, op, dt, a, b, c in table():
        print(f"| {n} | {op} {dt} | {a:.0f} us | {b:.0f} us | {b / a - 1:+.1%} | {c:.0f} us | {c / a - 1:+.1%} |")
    print()
    print("DGX B200, 8 ranks, 16 SMs, torch API, against the GB200 fit (b200.yaml takes its values):")
    print()
    print("| ranks | call | measured | GB200 fit | error |")
    print("|---|---|---|---|---|")
    for n, op, dt, a, b in b200_check():
        print(f"| {n} | {op} {dt} | {a:.0f} us | {b:.0f} us | {b / a - 1:+.1%} |")


if __name__ == "__main__":
    main()
