"""Calibrate a hardware profile from measured training steps (``python -m roofline calibrate from-runs``).

A user has a few measured steps on their own cluster and stack; this fits a small set of physical terms
of a BASE profile to them and writes a profile that loads like any other (``--gpu NAME.yaml``).

    runs.csv (validate's columns) --build_case, priced on BASE--> log(predicted / measured) per row
    --scipy least_squares, robust loss, bounded terms--> fitted terms
    --leave-one-group-out refits--> the honest (cross-validated) error
    --> NAME.yaml: ``base: BASE`` + the fitted keys + provenance (runs sha256, rows, terms, errors)

The terms (``TERMS``; ``--fit`` picks, ``DEFAULT`` otherwise), each a quantity of the profile, bounded:

- ``host_layer`` (s): host time to issue one transformer layer's forward + backward (``host_fwd + host_bwd``,
  split in BASE's ratio; the extra host time of a full recomputation ``host_rc`` scales alike: it re-issues
  the forward on the same host path). In [0, 100 ms].
- ``host_mb`` (s): the framework's per-micro-batch host work outside the model (``host_mb``). In [0, 100 ms].
- ``host_moe`` (s): what an MoE layer's router, dispatcher and permutation add to its host time, forward +
  backward (``host_moe_fwd + host_moe_bwd``, split in BASE's ratio). In [0, 100 ms]. Not in the default set:
  only MoE runs depend on it (opt in with ``--fit``).
- ``moe_sync`` (s): the time the GPU idles after each eager MoE forward's synchronization on the token counts until
  the host issues again (``host_sync``, profile ``host.moe_sync``; docs/models.md "The host side of MoE layers"). In
  [0, 100 ms]. Not in the default set: only eager MoE runs depend on it.
- ``host_edge`` (s): host time of the embedding + LM head and loss per micro-batch (``host_emb + host_head``,
  split in BASE's ratio). In [0, 100 ms]. Not in the default set: it moves the same rows as ``host_mb``.
- ``gemm_eff`` (x BASE): scale of the GEMM efficiency eta, forward and backward alike, at most the GPU's
  maximum achievable matmul rate (``max_matmul``, mamf-finder) over its peak, i.e. eta <= matmul_ceiling.
- ``intra_bw`` / ``inter_bw`` (x BASE): scale of the bus bandwidth of every collective on the intra-node
  (NVLink) / inter-node link, at most the link's one-direction datasheet bandwidth (a ring collective's
  busbw is bounded by it: nccl-tests PERFORMANCE.md).
- ``intra_alpha`` / ``inter_alpha`` (x BASE): scale of every collective's latency on that link, in [0, 100]. Opt-in
  (``--fit``): on vTrain's runs it lowers the single-node errors and raises the multi-node one (docs/from-runs.md).
- ``overlap_sms`` (x BASE): scale of the SMs an NCCL collective takes from the compute it overlaps, inside a node and
  across nodes alike (the profile's ``overlap: nccl_sms, nccl_sms_inter``; formulas/comm.py interference), from 0
  (overlap free) up to one SM short of the GPU's count. Opt-in: only runs that hide collectives behind compute
  depend on it; ``calibrate overlap`` measures the same counts directly.

Identifiability, judged on the runs before fitting: a term whose 10 % change moves no prediction by 0.1 %, at
BASE's value nor at any of ``PROBES`` times it within its bounds (the runs do not depend on it: ``inter_bw`` on
single-node runs; host terms on runs that stay GPU-bound even with a host 64 times slower), cannot be fitted;
one that moves the runs only away from BASE (a host slower than BASE's, whose runs are host-bound where BASE's
are not) is fitted from the first such value (``probe``), and two terms whose changes move the predictions in proportion (cosine >= 0.999 of their
elasticity columns: e.g. ``host_layer`` and ``host_mb`` when every run has the same layers per stage) cannot
be told apart. Asked for with ``--fit``, such a term is an error; from the default set it is dropped with a
warning. After the fit of the default set, a term the runs do not determine (at a bound, or BASE's value inside
its 95 % interval, or no interval) is left at BASE and the rest refitted (``undetermined``, ``_settle``; each CV
fold repeats the choice on its own rows). Estimates correlated beyond 0.95 and terms at a bound are warned about.
The intervals count the groups (``--group-by``) as the independent measurements, not the rows (``covariance``:
the wider of the row estimate and the cluster-robust sandwich with Student's t at G - 1 degrees of freedom).

Pricing a row on BASE: ``validate.build_case`` of the row with its ``gpu_id`` replaced by BASE, so the row's
``gpus_per_node`` and ``net_gbps_per_gpu`` overrides apply to BASE exactly as validate applies them to the
row's own GPU (one rule, written once in validate.build_case).
"""
from __future__ import annotations

import datetime
import hashlib
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Callable

import numpy as np

from ...base.errors import InputError

# Robust loss on r = log(predicted / measured): soft_l1 with scale 0.05, i.e. a row off by more than ~5 %
# weighs less than quadratically. 5 % is the held-out error of this project's per-operator fits
# (docs/calibration.md: 4-8 % per class on A100), so a run missing by much more is more likely a defect of
# that run (a slow node, an allocator retry) than information about the cluster.
LOSS, F_SCALE = "soft_l1", 0.05
# evaluations of the step times scipy's least_squares may spend per fitted term (plus one): the max(GPU, host) kinks of
# the host terms make the trust region shrink and regrow, and 100 ran out on NVIDIA's GB200 MoE runs (five terms)
MAX_NFEV_PER_TERM = 300
# A run is set aside as an outlier after a first fit when its residual is further from the median than 3.5 robust
# standard deviations (1.4826 MAD: the modified z-score rule of Iglewicz & Hoaglin 1993, "How to Detect and Handle
# Outliers", ASQC vol. 16) and more than OUTLIER_FLOOR (twice F_SCALE: twice the per-operator held-out error) in log
# time; the terms are then refitted without it. soft_l1 alone still pulls linearly on a run 1.3-2x slow, enough to
# bias a term that few runs constrain. Not when more than a quarter of the runs would go: then the model misses,
# not the runs.
OUTLIER_Z, OUTLIER_FLOOR, OUTLIER_MAX_SHARE = 3.5, 2 * F_SCALE, 0.25
MAD_TO_SD = 1.4826          # standard deviation / median absolute deviation of a normal distribution
ZERO_ELASTICITY = 1e-3      # max |d log t / d log term| below which the runs do not depend on a term
COLLINEAR = 0.999           # cosine of two elasticity columns at or above which two terms cannot be told apart
CORRELATED = 0.95           # |correlation| of two fitted estimates above which a warning is printed
ALPHA_MAX = 100.0           # x BASE: bound of the latency scales (only keeps the search finite)
HOST_MAX = 0.1              # s: bound of the host terms, ~60x the development machine's 1.6 ms per layer


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---- terms ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Term:
    name: str
    unit: str                                   # "s" (absolute) or "x BASE" (scale, 1 = BASE)
    doc: str
    value: Callable                             # hw -> the term's value on an un-fitted hw (scales: 1)
    apply: Callable                             # (hw, value) -> hw with the term set
    bounds: Callable                            # hw -> (lo, hi)
    yaml: Callable                              # fitted hw -> fragment of the profile YAML
    ref: float = 1.0                            # scale of the fit variable where the value is 0


def _us(v: float) -> str:
    return f"{v * 1e6:.7g} us"


def _split(total_base: float, parts: tuple, v: float) -> tuple:
    """Scale ``parts`` (which sum to ``total_base``) to sum ``v``; equal parts when BASE has none."""
    if total_base > 0:
        return tuple(p * v / total_base for p in parts)
    return tuple(v / len(parts) for _ in parts)


def _host_layer_apply(hw, v):
    """A host that issues a dense layer in ``v``: forward and backward split in BASE's ratio; the recomputation and an
    MoE layer's extra host work scale alike (the same host issues them). The launches an MoE layer makes one routed
    expert at a time keep BASE's cost per launch (host.launch, which the written profile's other host keys also read)."""
    f, b = _split(hw.host_fwd + hw.host_bwd, (hw.host_fwd, hw.host_bwd), v)
    if hw.host_fwd + hw.host_bwd <= 0:
        return dc_replace(hw, host_fwd=f, host_bwd=b, host_rc=f)
    k = v / (hw.host_fwd + hw.host_bwd)
    return dc_replace(hw, host_fwd=f, host_bwd=b, host_rc=hw.host_rc * k, host_moe_fwd=hw.host_moe_fwd * k,
                      host_moe_bwd=hw.host_moe_bwd * k)


def _host_moe_apply(hw, v):
    f, b = _split(hw.host_moe_fwd + hw.host_moe_bwd, (hw.host_moe_fwd, hw.host_moe_bwd), v)
    return dc_replace(hw, host_moe_fwd=f, host_moe_bwd=b)


def _host_moe_yaml(hw):
    return {"host": {"moe_fwd": _us(hw.host_moe_fwd), "kernels_moe_fwd": 0, "moe_bwd": _us(hw.host_moe_bwd),
                     "kernels_moe_bwd": 0}}


def _host_edge_apply(hw, v):
    e, h = _split(hw.host_emb + hw.host_head, (hw.host_emb, hw.host_head), v)
    return dc_replace(hw, host_emb=e, host_head=h)


# the fitted host times are written whole into the CPU-time keys with kernels_* = 0: the profile's host
# time is cpu + kernels x launch (hardware._host_times), and a fit measures the sum, not the split
def _host_layer_yaml(hw):
    return {"host": {"layer_fwd": _us(hw.host_fwd), "kernels_fwd": 0, "layer_bwd": _us(hw.host_bwd), "kernels_bwd": 0,
                     "recompute_extra": _us(hw.host_rc), "kernels_recompute": 0,
                     "moe_fwd": _us(hw.host_moe_fwd), "kernels_moe_fwd": 0, "moe_bwd": _us(hw.host_moe_bwd),
                     "kernels_moe_bwd": 0}}


def _host_edge_yaml(hw):
    return {"host": {"embed_fwd": _us(hw.host_emb), "kernels_embed_fwd": 0, "embed_bwd": "0 us", "kernels_embed_bwd": 0,
                     "head_fwd": _us(hw.host_head), "kernels_head_fwd": 0, "head_bwd": "0 us", "kernels_head_bwd": 0}}


def _gemm_apply(hw, v):
    eff = dict(hw.efficiency)
    eff["gemm"] = {d: (eta * v, mu, t0) for d, (eta, mu, t0) in hw.efficiency["gemm"].items()}
    return dc_replace(hw, efficiency=eff)


def _gemm_bounds(hw):
    # eta <= the maximum achievable matmul rate / peak (hardware.load caps every GEMM eta there: mamf-finder)
    return 0.05, max(1.0, min(hw.matmul_ceiling / eta for eta, _, _ in hw.efficiency["gemm"].values()))


def _gemm_yaml(hw):
    return {"efficiency": {"gemm": {d: {"eta": float(f"{eta:.7g}")} for d, (eta, _, _) in hw.efficiency["gemm"].items()}}}


def _link_apply(link):
    def apply(hw, v):
        coll = dict(hw.collectives)
        for (c, lk), (alpha, busbw) in hw.collectives.items():
            if lk == link:
                coll[c, lk] = (alpha, busbw * v)
        return dc_replace(hw, collectives=coll)
    return apply


def _link_bounds(link):
    def bounds(hw):
        # a ring collective's bus bandwidth cannot exceed the link's one-direction bandwidth (nccl-tests
        # PERFORMANCE.md: busbw is the figure to compare with the hardware's peak)
        bw = getattr(hw, link).bandwidth
        return 0.01, max(1.0, min(bw / busbw for (c, lk), (_, busbw) in hw.collectives.items() if lk == link))
    return bounds


def _link_yaml(link):
    def frag(hw):
        # a kind written without its fitted per-call time would lose the one BASE inherits (hardware.load replaces
        # a kind's entry whole), so a calibrated link's call time is written back beside alpha and busbw
        def entry(c, a, b):
            call = hw.collective_calls.get((c, link))
            return {"alpha": _us(a), "busbw": f"{b / 1e9:.7g} GB/s", **({"call": _us(call)} if call else {})}
        return {"collectives": {link: {c: entry(c, a, b) for (c, lk), (a, b) in hw.collectives.items() if lk == link}}}
    return frag


def _alpha_apply(link):
    def apply(hw, v):
        coll = dict(hw.collectives)
        for (c, lk), (alpha, busbw) in hw.collectives.items():
            if lk == link:
                coll[c, lk] = (alpha * v, busbw)
        return dc_replace(hw, collectives=coll)
    return apply


OVERLAP_NCCL = ("nccl_sms", "nccl_sms_inter")     # the counts overlap_sms scales (the userbuffers ones stay)


def _overlap_apply(hw, v):
    return dc_replace(hw, overlap={**hw.overlap, **{k: hw.overlap[k] * v for k in OVERLAP_NCCL}})


def _overlap_bounds(hw):
    # a kernel holding every SM would stop the compute beside it (the profile rule: each count below sm_count)
    top = max(hw.overlap[k] for k in OVERLAP_NCCL)
    return 0.0, max(1.0, (hw.sm_count - 1) / top) if top > 0 and hw.sm_count > 1 else 1.0


TERMS = {t.name: t for t in (
    Term("host_layer", "s", "host time to issue one layer's forward + backward (host_fwd + host_bwd; host_rc alike)",
         lambda hw: hw.host_fwd + hw.host_bwd, _host_layer_apply, lambda hw: (0.0, HOST_MAX), _host_layer_yaml, 1e-3),
    Term("host_moe", "s", "extra host time of an MoE layer's forward + backward (router, dispatcher, permutation; "
         "host_moe_fwd + host_moe_bwd)", lambda hw: hw.host_moe_fwd + hw.host_moe_bwd, _host_moe_apply,
         lambda hw: (0.0, HOST_MAX), _host_moe_yaml, 1e-3),
    Term("moe_sync", "s", "GPU idle after each eager MoE forward's synchronization on the token counts (host_sync)",
         lambda hw: hw.host_sync, lambda hw, v: dc_replace(hw, host_sync=v), lambda hw: (0.0, HOST_MAX),
         lambda hw: {"host": {"moe_sync": _us(hw.host_sync)}}, 1e-4),
    Term("host_mb", "s", "framework host work per micro-batch outside the model (host_mb)",
         lambda hw: hw.host_mb, lambda hw, v: dc_replace(hw, host_mb=v), lambda hw: (0.0, HOST_MAX),
         lambda hw: {"host": {"microbatch": _us(hw.host_mb), "kernels_microbatch": 0}}, 1e-4),
    Term("host_edge", "s", "host time of the embedding + LM head and loss per micro-batch (host_emb + host_head)",
         lambda hw: hw.host_emb + hw.host_head, _host_edge_apply, lambda hw: (0.0, HOST_MAX), _host_edge_yaml, 1e-4),
    Term("gemm_eff", "x BASE", "scale of the GEMM efficiency eta (forward and backward alike)",
         lambda hw: 1.0, _gemm_apply, _gemm_bounds, _gemm_yaml),
    Term("intra_bw", "x BASE", "scale of every collective's bus bandwidth on the intra-node link",
         lambda hw: 1.0, _link_apply("intra"), _link_bounds("intra"), _link_yaml("intra")),
    Term("inter_bw", "x BASE", "scale of every collective's bus bandwidth on the inter-node link",
         lambda hw: 1.0, _link_apply("inter"), _link_bounds("inter"), _link_yaml("inter")),
    # latency of every collective on a link, 0 to 100x BASE: 0 is the physical floor; the upper bound only keeps
    # the search finite (100x a datasheet link's 8 us is 0.8 ms per ring step; the fitted per-call time of a
    # calibrated link, collectives.<link>.<kind>.call, is not scaled)
    Term("intra_alpha", "x BASE", "scale of every collective's latency (alpha) on the intra-node link",
         lambda hw: 1.0, _alpha_apply("intra"), lambda hw: (0.0, ALPHA_MAX), _link_yaml("intra")),
    Term("inter_alpha", "x BASE", "scale of every collective's latency (alpha) on the inter-node link",
         lambda hw: 1.0, _alpha_apply("inter"), lambda hw: (0.0, ALPHA_MAX), _link_yaml("inter")),
    Term("overlap_sms", "x BASE", "scale of the SMs an NCCL collective takes from the compute it overlaps "
         "(overlap nccl_sms and nccl_sms_inter)", lambda hw: 1.0, _overlap_apply, _overlap_bounds,
         lambda hw: {"overlap": {k: float(f"{hw.overlap[k]:.6g}") for k in OVERLAP_NCCL}}),
)}
DEFAULT = ("host_layer", "host_mb", "gemm_eff", "intra_bw", "inter_bw")


def parse_terms(text: str | None) -> tuple[tuple, bool]:
    """``--fit a,b`` -> (terms, explicit); None -> (DEFAULT, False)."""
    if text is None:
        return DEFAULT, False
    names = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    bad = [n for n in names if n not in TERMS]
    if bad or not names:
        raise InputError(f"--fit takes a comma-separated list of {', '.join(TERMS)}, got {text!r}")
    return names, True


def apply_terms(hw, values: dict):
    """``hw`` (un-fitted, BASE-derived) with every term of ``values`` set, in ``TERMS`` order (``host_layer`` scales
    the MoE extra with the rest of the host path; a fitted ``host_moe`` then sets that extra itself)."""
    for name in sorted(values, key=list(TERMS).index):
        hw = TERMS[name].apply(hw, float(values[name]))
    return hw


# ---- runs ----------------------------------------------------------------------------------------
@dataclass
class Runs:
    path: str
    sha256: str
    base: str
    cases: list                 # validate.Case, hw = BASE with the row's overrides
    measured: np.ndarray
    groups: np.ndarray          # group label per case (str)
    group_by: str
    skipped: list               # (case_id, reason)
    n_rows: int


def size_bucket(row: dict) -> str:
    """Model-size group when there is no ``model`` column: n_layers x d_model^2 to the nearest power of 2."""
    return f"l*h^2~2^{round(math.log2(row['n_layers'] * row['d_model'] ** 2))}"


def load_runs(path, base: str, group_by: str | None = None) -> Runs:
    """Read a runs CSV (validate's columns) and price every row on BASE; skipped rows are listed."""
    from ...spec import hardware
    from .. import validate

    base_hw = hardware.load(base)                       # InputError for an unknown BASE
    base_ref = str(Path(base).resolve()) if Path(base).suffix in (".yaml", ".yml") else base
    rows = validate.read(path, require=validate.REQUIRED)     # the layouts and shapes fitted on are stated ones
    if group_by is not None and group_by not in rows[0]:
        raise InputError(f"--group-by {group_by}: no such column in {path} (columns: {', '.join(rows[0])})")
    by_model = all(r.get("model") for r in rows)
    label = group_by or ("model" if by_model else "model size (n_layers d_model^2, nearest 2^k)")
    cases, groups, skipped = [], [], []
    for row in rows:
        try:
            c = validate.build_case({**row, "gpu_id": base_ref})
        except validate.Skip as exc:
            skipped.append((row["case_id"], str(exc)))
            continue
        cases.append(c)
        if group_by is not None:
            g = row.get(group_by)
            groups.append("(blank)" if g is None or g == "" else str(g))
        else:
            groups.append(row["model"] if by_model else size_bucket(row))
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    _log(f"from-runs: {path}: {len(rows)} rows, {len(cases)} priced on {base_hw.id}, {len(skipped)} skipped; "
         f"{len(set(groups))} groups by {label}")
    return Runs(str(path), digest, base_ref, cases, np.array([c.measured for c in cases], dtype=float),
                np.array(groups, dtype=object), label, skipped, len(rows))


# ---- pricing -------------------------------------------------------------------------------------
class Pricer:
    """Step times of cases with the terms applied to each case's hardware.

    Fast path: the cases' formula inputs stacked once; only the hardware inputs are recomputed (through
    Hardware -> predict.hardware_inputs) per call. It is checked against ``validate.evaluate_cases`` (the
    reference) at BASE and at every solution (``check``); on any difference the reference is used instead.
    """

    def __init__(self, cases: list):
        from .. import validate
        from ...model.predict import hardware_inputs, inputs
        self.cases = cases
        self._hwin = hardware_inputs
        self.fast = True
        try:
            xs = [inputs(c.model, c.plan, c.hw) for c in cases]
            self.x = {k: np.array([x[k] for x in xs], dtype=float) for k in xs[0]}
            variants: dict = {}
            for i, c in enumerate(cases):
                key = tuple(sorted(hardware_inputs(c.hw, c.plan.dtype).items()))
                variants.setdefault(key, (c.hw, c.plan.dtype, []))[2].append(i)
            self.variants = [(hw, dt, np.array(ix)) for hw, dt, ix in variants.values()]
        except Exception:                       # noqa: BLE001 - an inputs() signature this code does not know
            self.fast = False
        ref = np.asarray(validate.evaluate_cases(cases)["step_time"], dtype=float)
        if self.fast and not np.allclose(self._fast({}), ref, rtol=1e-10, atol=0):
            self.fast = False

    def _fast(self, values: dict) -> np.ndarray:
        from ...model.predict import evaluate
        x = dict(self.x)
        for hw, dtype, ix in self.variants:
            h = self._hwin(apply_terms(hw, values), dtype)
            for k, v in h.items():
                if k in x:
                    if x[k] is self.x[k]:
                        x[k] = x[k].copy()
                    x[k][ix] = v
        return np.asarray(evaluate(x)["step_time"], dtype=float)

    def slow(self, values: dict, idx=None) -> np.ndarray:
        from .. import validate
        cases = self.cases if idx is None else [self.cases[i] for i in idx]
        fitted = [dc_replace(c, hw=apply_terms(c.hw, values)) for c in cases]
        return np.asarray(validate.evaluate_cases(fitted)["step_time"], dtype=float)

    def __call__(self, values: dict, idx=None) -> np.ndarray:
        if not self.fast:
            return self.slow(values, idx)
        t = self._fast(values)
        return t if idx is None else t[idx]

    def check(self, values: dict) -> None:
        """Switch to the reference path when the fast path disagrees with it at ``values``."""
        if self.fast and not np.allclose(self._fast(values), self.slow(values), rtol=1e-10, atol=0):
            _log("from-runs: fast pricing differs from validate.evaluate_cases; using the reference path")
            self.fast = False


# ---- fitting -------------------------------------------------------------------------------------
@dataclass
class Fit:
    terms: tuple
    values: dict                    # term -> fitted value (unit of the term)
    start: dict                     # term -> BASE value
    bounds: dict                    # term -> (lo, hi)
    ci95: dict                      # term -> half-width of the approximate 95 % interval
    corr: np.ndarray                # correlation of the estimates
    at_bound: tuple                 # terms whose solution sits on a bound
    nfev: int
    residuals: np.ndarray           # log(pred / measured) on the training rows (the outliers excluded)
    warnings: list = field(default_factory=list)
    excluded: tuple = ()            # rows (indices of ``measured``) set aside as outliers after a first fit


class _Space:
    """Fit variables x = value / ref (ref = BASE's value, or the term's scale where BASE has 0)."""

    def __init__(self, terms, hw):
        self.terms = tuple(terms)
        self.start = np.array([TERMS[t].value(hw) for t in terms], dtype=float)
        self.ref = np.array([s if s > 0 else TERMS[t].ref for t, s in zip(terms, self.start)])
        b = np.array([TERMS[t].bounds(hw) for t in terms], dtype=float).reshape(len(terms), 2)
        self.lo, self.hi = b[:, 0] / self.ref, b[:, 1] / self.ref
        self.x0 = np.clip(self.start / self.ref, self.lo, self.hi)

    def values(self, x) -> dict:
        return {t: float(v) for t, v in zip(self.terms, np.asarray(x) * self.ref)}


# Multiples of BASE's value tried, in this order, when no run depends on a term at BASE's value (``probe``): the
# max(GPU, host) kinks hide a host term until it exceeds the GPU time, and BASE's host may be many times faster than
# the runs' (the vTrain A100 hosts: 1.4x the development machine's; an eager MoE layer's Transformer Engine path)
PROBES = (2.0, 0.5, 4.0, 0.25, 8.0, 16.0, 32.0, 64.0)


def _column(pricer: Pricer, space: _Space, j: int, x, idx=None, step: float = 0.1) -> np.ndarray:
    """d log(t) / d x_j per row at ``x`` by central differences of +-10 % of max(1, x_j), within the bounds."""
    h = step * max(1.0, float(x[j]))
    lo, hi = np.array(x, dtype=float), np.array(x, dtype=float)
    lo[j], hi[j] = max(space.lo[j], x[j] - h), min(space.hi[j], x[j] + h)
    if hi[j] <= lo[j]:
        return np.zeros(len(pricer({}, idx)))
    t_lo, t_hi = pricer(space.values(lo), idx), pricer(space.values(hi), idx)
    return (np.log(t_hi) - np.log(t_lo)) / (hi[j] - lo[j])


def _moves(col: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(col)) and np.max(np.abs(col), initial=0.0) >= ZERO_ELASTICITY)


def probe(pricer: Pricer, space: _Space, j: int, idx=None, measured=None) -> float | None:
    """Where the fit of term ``j`` starts (x units): BASE's value when some run depends on the term there, else the
    first of ``PROBES`` times it (inside the bounds) where one does and, given the ``measured`` step times of the
    rows, where the runs are priced closer than at BASE (mean |log(predicted / measured)|): a host term that only
    matters once it makes GPU-bound runs host-bound, and slower than measured, is not identified by them. None when
    no such value exists."""
    x = space.x0.copy()
    if _moves(_column(pricer, space, j, x, idx)):
        return float(x[j])
    if measured is not None:
        meas = np.asarray(measured if idx is None else np.asarray(measured)[idx], dtype=float)
        miss = lambda xx: float(np.mean(np.abs(np.log(pricer(space.values(xx), idx) / meas))))  # noqa: E731
        at_base = miss(x)
    base = x[j] if x[j] > 0 else 1.0
    for m in PROBES:
        v = base * m
        if not space.lo[j] <= v <= space.hi[j]:
            continue
        y = space.x0.copy()
        y[j] = v
        if _moves(_column(pricer, space, j, y, idx)) and (measured is None or miss(y) < at_base):
            return float(v)
    return None


def elasticities(pricer: Pricer, space: _Space, idx=None, step: float = 0.1) -> np.ndarray:
    """d log(t) / d x_j per row (x in units of ref), by central differences of +-10 % within the bounds:
    a finite step sees through the max(GPU, host) kinks that make the local derivative 0 or 1."""
    cols = []
    for j in range(len(space.terms)):
        lo, hi = space.x0.copy(), space.x0.copy()
        lo[j] = max(space.lo[j], space.x0[j] - step)
        hi[j] = min(space.hi[j], space.x0[j] + step)
        t_lo, t_hi = pricer(space.values(lo), idx), pricer(space.values(hi), idx)
        cols.append((np.log(t_hi) - np.log(t_lo)) / (hi[j] - lo[j]))
    return np.column_stack(cols) if cols else np.zeros((0, 0))


def identifiable(pricer: Pricer, space: _Space, explicit: bool, idx=None, measured=None) -> tuple[tuple, list]:
    """Terms the runs can identify (see the module doc); InputError for an explicit request that they cannot.
    ``measured``: the rows' step times, which let a term that matters only away from BASE count (``probe``)."""
    E = elasticities(pricer, space, idx)
    keep, warnings = [], []
    for j, t in enumerate(space.terms):
        if not _moves(E[:, j]):
            start = probe(pricer, space, j, idx, measured)
            if start is not None:           # the runs depend on it away from BASE: judge collinearity there
                x = space.x0.copy()
                x[j] = start
                E[:, j] = _column(pricer, space, j, x, idx)
        if not _moves(E[:, j]):
            msg = (f"{t}: the runs do not depend on it (a 10 % change moves no step time by 0.1 %, at BASE's value "
                   f"nor at {min(PROBES):g}-{max(PROBES):g} x it where that prices the runs closer)")
            if explicit:
                raise InputError(f"--fit {t}: cannot be fitted from these runs: {msg.split(': ', 1)[1]}")
            warnings.append(f"{msg}; left at BASE")
            continue
        twin = next((k for k in keep if abs(_cos(E[:, space.terms.index(k)], E[:, j])) >= COLLINEAR), None)
        if twin is not None:
            c = _cos(E[:, space.terms.index(twin)], E[:, j])
            if explicit:
                raise InputError(f"--fit {twin},{t}: the runs cannot tell them apart (their effects on the step times "
                                 f"are proportional, cosine {c:.4f} >= {COLLINEAR}); fit one of them")
            warnings.append(f"{t}: moves the step times in proportion to {twin} (cosine {c:.4f}); left at BASE")
            continue
        keep.append(t)
    return tuple(keep), warnings


def _cos(a, b) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else 0.0


def _loss_weights(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """psi(r) and psi'(r) of the fit's loss: the gradient of the cost is sum psi(r_i) J_i, its Gauss-Newton
    curvature sum psi'(r_i) J_i J_i^T. soft_l1 (scipy: rho(z) = 2 (sqrt(1 + z) - 1), z = (r / f)^2):
    psi = r / sqrt(1 + z), psi' = (1 + z)^-3/2; linear: psi = r, psi' = 1."""
    if LOSS == "linear":
        return r, np.ones_like(r)
    if LOSS != "soft_l1":
        raise ValueError(f"from-runs: no interval weights for loss {LOSS!r} (soft_l1 or linear)")
    z = (r / F_SCALE) ** 2
    return r / np.sqrt(1 + z), (1 + z) ** -1.5


def covariance(J: np.ndarray, r: np.ndarray, clusters=None) -> tuple[np.ndarray, float]:
    """Covariance of the fitted variables and the critical value of their 95 % interval.

    Two estimates; each term's interval takes the wider:
    - rows independent: (1.4826 MAD(r))^2 (J^T J)^-1 (robust scale), normal critical value 1.96;
    - rows correlated within a cluster (the groups of the runs: every row of one model shares that model's
      misfit, so 180 rows of one model are not 180 independent measurements): the cluster-robust sandwich of the
      M-estimator, A^-1 B A^-1 with A = sum psi'(r_i) J_i J_i^T and B = sum_g u_g u_g^T, u_g = sum_{i in g}
      psi(r_i) J_i, scaled by G / (G - 1) (N - 1) / (N - p) (CR1), with Student's t at G - 1 degrees of freedom
      (Cameron & Miller 2015, "A Practitioner's Guide to Cluster-Robust Inference", J. Human Resources 50(2),
      sections IV.A and VI). With one cluster the runs cannot say how a term varies between groups: no interval.
    Returns (cov, critical) with cov already scaled so that the interval is critical x sqrt(diag)."""
    from scipy.stats import t as student_t

    n, p = J.shape
    s = MAD_TO_SD * float(np.median(np.abs(r - np.median(r)))) if n > p else float("nan")
    cov_rows = np.linalg.pinv(J.T @ J) * s ** 2
    if clusters is None:
        return cov_rows, 1.96
    clusters = np.asarray(clusters, dtype=object)
    names = sorted(set(clusters), key=str)
    G = len(names)
    if G < 2:
        return np.full((p, p), np.inf), 1.96
    psi, dpsi = _loss_weights(r)
    A_inv = np.linalg.pinv(J.T @ (J * dpsi[:, None]))
    U = np.array([(psi[clusters == g, None] * J[clusters == g]).sum(axis=0) for g in names])
    scale = G / (G - 1) * (n - 1) / max(n - p, 1)
    cov_cl = A_inv @ (U.T @ U) @ A_inv * scale
    crit = float(student_t.ppf(0.975, G - 1))
    # each term's interval: the wider of the two (the cluster estimate is itself noisy with few groups)
    sd = np.maximum(np.sqrt(np.clip(np.diag(cov_cl), 0, None)), 1.96 / crit * np.sqrt(np.clip(np.diag(cov_rows), 0, None)))
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.sqrt(np.clip(np.diag(cov_cl), 0, None))
        corr = cov_cl / np.outer(d, d)
    corr = np.where(np.isfinite(corr), corr, np.eye(p))
    return corr * np.outer(sd, sd), crit


def outliers(r: np.ndarray) -> np.ndarray:
    """The rows whose residual is an outlier (OUTLIER_Z robust standard deviations and OUTLIER_FLOOR from the
    median), or none when more than OUTLIER_MAX_SHARE of the rows would be."""
    d = np.abs(r - np.median(r))
    bad = d > max(OUTLIER_Z * MAD_TO_SD * float(np.median(d)), OUTLIER_FLOOR)
    return bad if bad.sum() <= OUTLIER_MAX_SHARE * len(r) else np.zeros(len(r), dtype=bool)


def fit_terms(pricer: Pricer, measured: np.ndarray, terms: tuple, base_hw, idx=None, groups=None,
              reject: bool = True) -> Fit:
    """Robust bounded least squares of log(pred / measured) over the rows ``idx`` (all when None); ``groups``
    (one label per row of ``measured``): the clusters of the intervals (``covariance``), rows alone when None.
    With ``reject``, runs the first fit finds to be outliers (:func:`outliers`) are set aside and the terms refitted
    on the rest, when at least two rows per term remain; ``Fit.excluded`` names them."""
    f = _fit_terms(pricer, measured, terms, base_hw, idx, groups)
    if not reject:
        return f
    rows = np.arange(len(measured)) if idx is None else np.asarray(idx)
    bad = outliers(f.residuals)
    if not bad.any() or (~bad).sum() < 2 * len(terms):
        return f
    g = _fit_terms(pricer, measured, terms, base_hw, rows[~bad], groups)
    g.excluded = tuple(int(i) for i in rows[bad])
    g.warnings.append(f"{int(bad.sum())} of {len(rows)} runs set aside as outliers (more than "
                      f"{OUTLIER_Z} robust standard deviations and {OUTLIER_FLOOR:.0%} in log time from the first "
                      f"fit's median residual): the terms are fitted on the rest")
    return g


def _fit_terms(pricer: Pricer, measured: np.ndarray, terms: tuple, base_hw, idx=None, groups=None) -> Fit:
    from scipy.optimize import least_squares

    space = _Space(terms, base_hw)
    meas = measured if idx is None else measured[idx]
    logm = np.log(meas)

    def resid(x):
        r = np.log(pricer(space.values(x), idx)) - logm
        if not np.all(np.isfinite(r)):
            raise FloatingPointError
        return r

    # each term starts at BASE's value, or where the runs first depend on it (``probe``, on these rows)
    x_start = space.x0.copy()
    for j in range(len(terms)):
        v = probe(pricer, space, j, idx, measured)
        if v is not None:
            x_start[j] = v
    try:
        res = least_squares(resid, x_start, bounds=(space.lo, space.hi), loss=LOSS, f_scale=F_SCALE,
                            diff_step=1e-3, x_scale=1.0, max_nfev=MAX_NFEV_PER_TERM * (len(terms) + 1))
    except FloatingPointError:
        raise InputError("from-runs: a trial value of the terms gave a non-finite step time; the fit did not converge") from None
    if res.status <= 0 or not np.isfinite(res.cost):
        raise InputError(f"from-runs: the fit did not converge ({res.message.rstrip('.')}, {res.nfev} evaluations, "
                         f"terms {', '.join(terms)})")
    r = res.fun
    J = res.jac
    n, p = J.shape
    clusters = None if groups is None else np.asarray(groups, dtype=object)[slice(None) if idx is None else idx]
    cov, crit = covariance(J, r, clusters)
    sd = np.sqrt(np.clip(np.diag(cov), 0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / np.outer(sd, sd)
    values = space.values(res.x)
    flat = [j for j in range(p) if np.max(np.abs(J[:, j])) < ZERO_ELASTICITY
            or np.max(np.abs(_backward_column(resid, res.x, j, space.lo[j], r))) < ZERO_ELASTICITY]
    sd[flat] = np.inf           # no row depends on the term near the solution: no interval
    at_bound = tuple(t for t, a in zip(terms, res.active_mask) if a != 0)
    warnings = [f"{t}: at its {'lower' if a < 0 else 'upper'} bound ({_fmt(t, values[t])}): the runs push it past a "
                f"physical limit; another term of the model is likely off" for t, a in zip(terms, res.active_mask) if a]
    warnings += [f"{terms[j]}: no run depends on it near the fitted value {_fmt(terms[j], values[terms[j]])} (e.g. "
                 f"every run GPU-bound there): values around it fit as well, it is a bound, not an estimate"
                 for j in flat]
    for i in range(p):
        for j in range(i + 1, p):
            if i not in flat and j not in flat and np.isfinite(corr[i, j]) and abs(corr[i, j]) > CORRELATED:
                warnings.append(f"{terms[i]} and {terms[j]}: estimates correlated {corr[i, j]:+.2f}: the runs barely "
                                f"tell them apart (wide intervals)")
    return Fit(tuple(terms), values, space.values(space.start / space.ref), {t: (lo * rf, hi * rf) for t, lo, hi, rf
               in zip(terms, space.lo, space.hi, space.ref)}, {t: float(crit * sd[i] * space.ref[i]) for i, t
               in enumerate(terms)}, corr, at_bound, int(res.nfev), r, warnings)


def _backward_column(resid, x, j: int, lo: float, r0) -> np.ndarray:
    """d r / d x_j from below (the step least_squares takes, 1e-3 max(1, |x_j|), downwards): the fit may stop on a
    kink (a host-bound row turning GPU-bound just below the solution), where the forward difference reads a slope
    and values below fit as well; a term flat on either side is a bound, not an estimate. Infinite (not flat)
    when the step would leave the bounds."""
    h = 1e-3 * max(1.0, abs(float(x[j])))
    if x[j] - h < lo:
        return np.full_like(r0, np.inf)
    xm = np.array(x, dtype=float)
    xm[j] -= h
    try:
        return (r0 - resid(xm)) / h
    except FloatingPointError:
        return np.full_like(r0, np.inf)


# ---- cross-validation ----------------------------------------------------------------------------
def folds(groups, k: int | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) row indices: each group held out whole; leave-one-group-out, or ``k`` folds of whole
    groups (largest groups first, each to the fold with the fewest rows; ties by name)."""
    groups = np.asarray(groups, dtype=object)
    names = sorted(set(groups), key=lambda g: (-int(np.sum(groups == g)), str(g)))
    if len(names) < 2:
        raise InputError(f"cross-validation needs at least 2 groups, the runs have {len(names)} "
                         f"(choose another --group-by column, e.g. case_id for leave-one-run-out)")
    k = len(names) if k is None else k
    if k < 2:
        raise InputError(f"--folds must be at least 2, got {k}")
    k = min(k, len(names))
    bins: list[list] = [[] for _ in range(k)]
    sizes = [0] * k
    for g in names:
        j = min(range(k), key=lambda i: (sizes[i], i))
        bins[j].append(g)
        sizes[j] += int(np.sum(groups == g))
    out = []
    for b in bins:
        test = np.flatnonzero(np.isin(groups, b))
        train = np.flatnonzero(~np.isin(groups, b))
        out.append((train, test))
    return out


def cross_validate(pricer: Pricer, measured, groups, terms, base_hw, k=None, fit=fit_terms) -> dict:
    """Held-out predictions of every row from a fit that never saw its group."""
    groups = np.asarray(groups, dtype=object)
    pred = np.full(len(measured), np.nan)
    record = []
    splits = folds(groups, k)
    for n, (train, test) in enumerate(splits, 1):
        held = sorted(set(groups[test]))
        _log(f"from-runs: fold {n}/{len(splits)}: fit on {len(train)} rows, judge {len(test)} rows of "
             f"{', '.join(map(str, held[:3]))}{' ...' if len(held) > 3 else ''}")
        f = fit(pricer, measured, terms, base_hw, train, groups=groups)
        pred[test] = pricer(f.values, test)
        record.append({"held_out": held, "train": train, "test": test, "values": f.values})
    err = pred / measured - 1
    by = {str(g): stats(err[groups == g]) for g in sorted(set(groups), key=str)}
    return {"errors": err, "predicted": pred, "folds": record, "by_group": by, **stats(err)}


def stats(err) -> dict:
    a = np.abs(np.asarray(err, dtype=float))
    if not len(a):
        return {"n": 0}
    return {"n": int(len(a)), "mape": float(a.mean()), "median": float(np.median(a)), "max": float(a.max()),
            "mean_signed": float(np.mean(err))}


# ---- the whole job -------------------------------------------------------------------------------
@dataclass
class Result:
    runs: Runs
    base_hw: object
    fit: Fit
    asked: tuple
    warnings: list
    in_sample: dict
    cv: dict
    base_error: dict
    fitted_hw: object
    predicted: np.ndarray           # in-sample step times of the fitted terms, per usable row
    base_predicted: np.ndarray      # BASE's step times, per usable row


def calibrate(path, base: str, fit: str | None = None, k: int | None = None, group_by: str | None = None) -> Result:
    """Fit the terms on all usable rows, cross-validate by group; nothing is written (see ``write``)."""
    from ...spec import hardware

    terms, explicit = parse_terms(fit)
    base_hw = hardware.load(base)
    runs = load_runs(path, base, group_by)
    n = len(runs.cases)
    if explicit and n < 2 * len(terms):
        raise InputError(f"too few usable rows: {n} (need at least 2 per fitted term: {2 * len(terms)} for "
                         f"{', '.join(terms)}; {len(runs.skipped)} of {runs.n_rows} rows skipped)")
    if k is not None and k < 2:
        raise InputError(f"--folds must be at least 2, got {k}")
    folds(runs.groups, k)                               # fail early on a single group
    pricer = Pricer(runs.cases)
    base_pred = pricer({})
    if not np.all(np.isfinite(base_pred) & (base_pred > 0)):
        raise InputError(f"from-runs: BASE {base} gives a non-finite step time for "
                         f"{int(np.sum(~np.isfinite(base_pred)))} rows")
    space = _Space(terms, base_hw)
    kept, warnings = identifiable(pricer, space, explicit, measured=runs.measured)
    for w in warnings:
        _log(f"from-runs: warning: {w}")
    if not kept:
        raise InputError(f"from-runs: the runs identify none of the terms {', '.join(terms)}")
    if n < 2 * len(kept):
        raise InputError(f"too few usable rows: {n} (need at least 2 per fitted term: {2 * len(kept)} for "
                         f"{', '.join(kept)}; {len(runs.skipped)} of {runs.n_rows} rows skipped)")
    _log(f"from-runs: fitting {', '.join(kept)} on {n} rows (loss {LOSS}, scale {F_SCALE})")
    f = fit_terms(pricer, runs.measured, kept, base_hw, groups=runs.groups)
    asked_fit = kept                                    # what each fold starts from (selection inside the CV)
    if not explicit:
        f, kept, dropped = _settle(pricer, runs.measured, f, base_hw, groups=runs.groups)
        for w in dropped:
            _log(f"from-runs: warning: {w}")
        warnings += dropped
    pricer.check(f.values)
    for w in f.warnings:
        _log(f"from-runs: warning: {w}")
    in_pred = pricer(f.values)
    # each fold repeats the whole choice on its own rows: the default set is settled (``_settle``) inside the fold,
    # so the held-out group does not choose the terms either
    fold_fit = fit_terms if explicit else (lambda pr, m, ts, hw, idx, groups: _settle(
        pr, m, fit_terms(pr, m, ts, hw, idx, groups), hw, idx, groups)[0])
    cv = cross_validate(pricer, runs.measured, runs.groups, asked_fit, base_hw, k, fit=fold_fit)
    base_err = stats(base_pred / runs.measured - 1)
    if cv["mape"] > base_err["mape"]:
        w = (f"the cross-validated error ({100 * cv['mape']:.1f} %) is above BASE's ({100 * base_err['mape']:.1f} %) on "
             f"the same rows: the fitted terms do not carry over to held-out groups; BASE predicts unseen runs better")
        _log(f"from-runs: warning: {w}")
        warnings = warnings + [w]
    return Result(runs, base_hw, f, terms, warnings + f.warnings, stats(in_pred / runs.measured - 1), cv,
                  base_err, apply_terms(base_hw, f.values), in_pred, base_pred)


def undetermined(f: Fit) -> dict:
    """Terms of a fit that the runs do not determine, with the reason: at a bound (the runs push the term past a
    physical limit, so its value is the bound's, set by what another part of the model misses), or with BASE's
    value inside its 95 % interval (the runs do not show that BASE is wrong: a Wald test at the 5 % level),
    or with no interval (no run depends on it near the solution)."""
    out = {}
    for t in f.terms:
        if t in f.at_bound:
            out[t] = f"at a bound ({_fmt(t, f.values[t])})"
        elif not math.isfinite(f.ci95[t]):
            out[t] = "no run depends on it near the solution"
        elif abs(f.values[t] - f.start[t]) <= f.ci95[t]:
            out[t] = (f"BASE's {_fmt(t, f.start[t])} is inside its 95 % interval "
                      f"({_fmt(t, f.values[t])} +- {_fmt(t, f.ci95[t])})")
    return out


def _settle(pricer: Pricer, measured, f: Fit, base_hw, idx=None, groups=None) -> tuple[Fit, tuple, list]:
    """Default terms only: leave at BASE every term the runs do not determine (``undetermined``) and refit the
    rest, until each fitted term is determined. A term the runs barely constrain adds variance, not information,
    to predictions of other shapes (the h1024 -> h2048 split of docs/from-runs.md: ``intra_bw`` fitted at
    0.69 +- 0.25 on the small model slows the large model's TP collectives). When every term is undetermined,
    those inside their bounds stay fitted (they agree with BASE, so the choice is harmless)."""
    dropped = []
    while True:
        bad = undetermined(f)
        if not bad:
            break
        keep = tuple(t for t in f.terms if t not in bad)
        if not keep:
            keep = tuple(t for t in f.terms if t not in f.at_bound)
            if not keep or keep == f.terms:
                break
            bad = {t: r for t, r in bad.items() if t not in keep}
        dropped += [f"{t}: not determined by the runs ({r}); left at BASE" for t, r in bad.items()]
        f = fit_terms(pricer, measured, keep, base_hw, idx, groups)
    return f, f.terms, dropped


def _fmt(term: str, v: float) -> str:
    return f"{v * 1e6:.1f} us" if TERMS[term].unit == "s" else f"{v:.4f}"


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for key, v in b.items():
        out[key] = _merge(out[key], v) if isinstance(v, dict) and isinstance(out.get(key), dict) else v
    return out


def _r(x: float) -> float:
    return float(f"{x:.4g}")


def _q(term: str, v: float):
    """A term's value for the provenance: host times as text with a unit, scales as numbers (x BASE)."""
    return f"{v * 1e6:.4g} us" if TERMS[term].unit == "s" else _r(v)


def _base_ref(base: str, folder: Path | None) -> str:
    """``base:`` as the written profile reads it: a profile id as given; a YAML path relative to the profile's own
    folder (hardware.load resolves relative paths there, not in the working directory)."""
    if folder is None or not str(base).lower().endswith((".yaml", ".yml")):
        return base
    return os.path.relpath(Path(base).resolve(), Path(folder).resolve())


def profile_yaml(res: Result, pid: str, folder: Path | None = None) -> str:
    """The fitted profile: ``base: BASE`` + the fitted keys + provenance (``folder``: where it will be written)."""
    import yaml

    f, runs = res.fit, res.runs
    body = {"id": pid, "name": f"{res.base_hw.name}, fitted to measured runs ({Path(runs.path).name})",
            "kind": "calibrated-from-runs", "base": _base_ref(runs.base, folder)}
    fitted = apply_terms(res.base_hw, f.values)       # every fragment from the whole fit: a link's busbw and alpha
    for t in f.terms:                                   # terms write the same collectives block
        body = _merge(body, TERMS[t].yaml(fitted))
    err = lambda s: {k: (_r(v) if isinstance(v, float) else v) for k, v in s.items()}
    body["provenance"] = {
        "source": "python -m roofline calibrate from-runs",
        "date": datetime.date.today().isoformat(),
        "runs": {"file": Path(runs.path).name, "sha256": runs.sha256, "rows": runs.n_rows, "rows_used": len(runs.cases),
                 "rows_skipped": len(runs.skipped), "group_by": runs.group_by, "groups": len(set(runs.groups))},
        "fitted": {t: {"value": _q(t, f.values[t]), "base": _q(t, f.start[t]), "ci95": _q(t, f.ci95[t]),
                       "bounds": [_q(t, b) for b in f.bounds[t]], "meaning": TERMS[t].doc} for t in f.terms},
        "not_fitted": [t for t in res.asked if t not in f.terms],
        "fit": {"loss": f"{LOSS} on log(predicted / measured), f_scale {F_SCALE}", "evaluations": f.nfev},
        "fit_error": {"cross_validated": err({k: res.cv[k] for k in ("n", "mape", "median", "max", "mean_signed")}),
                      "folds": len(res.cv["folds"]), "in_sample": err(res.in_sample), "base": err(res.base_error)},
        "warnings": list(res.warnings),
        "assumptions": ["fitted terms absorb whatever the model misses on these runs; the cross-validated error is "
                        "the honest one", "host times are written whole (kernels_* = 0): the fit sees the sum of CPU "
                        "and launch time, not the split"],
    }
    head = ("# generated by `python -m roofline calibrate from-runs`; refit from the runs, do not edit\n"
            f"# fitted: {', '.join(f'{t} {_fmt(t, f.values[t])}' for t in f.terms)}\n")
    return head + yaml.safe_dump(body, sort_keys=False, width=120, default_flow_style=None)


def out_path(name: str) -> tuple[Path, str]:
    p = Path(name)
    if p.suffix not in (".yaml", ".yml"):
        p = p.with_name(p.name + ".yaml")
    if not p.stem or name.endswith("/"):
        raise InputError(f"--out {name!r}: expected a file name like 'my-cluster.yaml'")
    if not p.parent.is_dir():
        raise InputError(f"--out {name}: folder {p.parent} does not exist")
    return p, p.stem


def write(res: Result, name: str) -> Path:
    """Write the profile atomically after checking that it loads and prices the runs as fitted."""
    from ...spec import hardware
    from .. import validate

    path, pid = out_path(name)
    text = profile_yaml(res, pid, path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{pid}.", suffix=".yaml", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        hw = hardware.load(tmp)
        cases = [validate.build_case({**c.row, "gpu_id": tmp}) for c in res.runs.cases]
        got = np.asarray(validate.evaluate_cases(cases)["step_time"], dtype=float)
        want = res.predicted
        if not np.allclose(got, want, rtol=1e-4, atol=0):
            worst = float(np.max(np.abs(got / want - 1)))
            raise RuntimeError(f"the written profile prices the runs {worst:.2%} away from the fit (a bug)")
        if hw.id != pid:
            raise RuntimeError(f"the written profile loads with id {hw.id!r}, not {pid!r}")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _log(f"from-runs: wrote {path}")
    return path


def render(res: Result) -> str:
    f = res.fit
    lines = [f"calibrate from-runs: {res.runs.path} on {res.base_hw.id}: {len(res.runs.cases)} rows, "
             f"{len(set(res.runs.groups))} groups by {res.runs.group_by}",
             f"{'term':<11}{'BASE':>12}{'fitted':>12}{'+-95%':>12}  unit    meaning"]
    for t in res.asked:
        if t in f.terms:
            lines.append(f"{t:<11}{_num(t, f.start[t]):>12}{_num(t, f.values[t]):>12}{_num(t, f.ci95[t]):>12}  "
                         f"{'us' if TERMS[t].unit == 's' else 'x BASE':<7} {TERMS[t].doc}"
                         + ("  [at bound]" if t in f.at_bound else ""))
        else:
            lines.append(f"{t:<11}{'':>12}{'not fitted':>12}{'':>12}  {'':<7} (not identifiable from these runs)")
    pct = lambda s: f"MAPE {100 * s['mape']:5.1f} %  median {100 * s['median']:5.1f} %  max {100 * s['max']:5.1f} %"
    lines += ["", f"error   cross-validated ({len(res.cv['folds'])} folds of whole groups): {pct(res.cv)}",
              f"        in-sample (optimistic):                 {pct(res.in_sample)}",
              f"        BASE, before the fit:                   {pct(res.base_error)}", "",
              "cross-validated error by held-out group:"]
    for g, s in res.cv["by_group"].items():
        lines.append(f"  {g:<30} n={s['n']:<5} MAPE {100 * s['mape']:5.1f} %  mean signed {100 * s['mean_signed']:+6.1f} %")
    if res.warnings:
        lines += ["", "warnings:"] + [f"  {w}" for w in res.warnings]
    return "\n".join(lines)


def to_dict(res: Result) -> dict:
    """The report as plain data (SI values; errors as fractions): what ``--json`` prints."""
    f = res.fit
    return {"runs": res.runs.path, "sha256": res.runs.sha256, "base": res.base_hw.id, "rows_used": len(res.runs.cases),
            "skipped": [{"case_id": c, "reason": r} for c, r in res.runs.skipped], "group_by": res.runs.group_by,
            "terms": {t: {"value": f.values[t], "base": f.start[t], "ci95": f.ci95[t] if math.isfinite(f.ci95[t]) else None, "unit": TERMS[t].unit,
                          "bounds": list(f.bounds[t]), "at_bound": t in f.at_bound} for t in f.terms},
            "not_fitted": [t for t in res.asked if t not in f.terms],
            "cross_validated": {k: res.cv[k] for k in ("n", "mape", "median", "max", "mean_signed")},
            "cv_by_group": res.cv["by_group"], "in_sample": res.in_sample, "base_error": res.base_error,
            "warnings": res.warnings}


def _num(t: str, v: float) -> str:
    return f"{v * 1e6:.1f}" if TERMS[t].unit == "s" else f"{v:.4f}"
