"""Robust fits of the calibrated roofline and of alpha-beta collectives (scipy), with k-fold error.

Operator model (roofline/model/formulas/compute.py ``op_time``), per op class and direction::

    t = t0 + max(x / (eta * sat), y / mu),   x = F / P,  y = B / W,  sat = dmin / (dmin + dhalf)

``x`` and ``y`` are the ideal compute and memory times in seconds (FLOPs over peak, bytes over
HBM bandwidth), so eta and mu are dimensionless efficiencies in (0, 1] and t0 >= 0 a fixed time.
Flash attention replaces ``1 / sat`` by ``compute.attention_shape(d, ctas, kblock, sms, d_soft, d_reg,
uneven, d_io)`` (head-dim tiling, softmax, tiles, waves), its four constants fitted per direction. The unfused
attention's batched GEMMs sum one such roofline per kernel (``compute.bmm_time``: 1 / sat =
``bmm_slowdown(K, dhalf)``, memory B + reread x extra passes over the scores), dhalf and reread per direction.
Collective model (roofline/model/formulas/comm.py ``flat``)::

    t = call + steps(p) * alpha + factor(p) * S / busbw

``call`` is the fixed time of one collective call whatever its group size (kernel launch, NCCL's
setup and the ranks' handshake); it is told apart from the per-step latency only by samples of
two or more group sizes (otherwise it stays 0 and the steps carry all the latency). Each sample
weighs as much as its share of log(size) within its group (nccl-tests tables step sizes linearly,
1 MB at a time, or by doubling): every decade of message size counts alike, so the 1-100 MB
messages of tensor parallelism are fitted as well as the bandwidth-bound gigabytes.

Fits minimise a soft-L1 loss of log-time residuals (a relative error that a few wild samples
cannot dominate), then flag samples whose residual is far off, refit without them and report the
5-fold held-out MAPE on the kept samples.

>>> x = np.array([1e-3, 2e-3, 4e-3]); y = x / 10; t = 5e-6 + x / 0.8
>>> f = fit_roofline({"fwd": Samples(x, y, None, t)})
>>> round(f.fits["fwd"].eta, 3), int(f.flagged["fwd"].sum())
(0.8, 0)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from ...model.formulas import comm as CM
from ...model.formulas.compute import attention_shape, bmm_slowdown

LN2 = float(np.log(2.0))


# ---- nccl-tests bandwidth conventions -------------------------------------------------------
def bus_factor(kind: str, p: int) -> float:
    """busbw / algbw of nccl-tests (PERFORMANCE.md): ar 2(p-1)/p; ag, rs, a2a (p-1)/p; p2p 1.

    >>> bus_factor("ar", 8), bus_factor("ag", 4), bus_factor("p2p", 2)
    (1.75, 0.75, 1.0)
    """
    return 1.0 if kind == "p2p" else float(CM.FACTOR[kind](p))


def ring_steps(kind: str, p: int) -> float:
    """Latency steps of the ring algorithm: ar 2(p-1), ag/rs/a2a p-1, p2p 1 (comm.py ``STEPS``)."""
    return 1.0 if kind == "p2p" else float(CM.STEPS[kind](p))


def algbw(size, t):
    """nccl-tests algorithm bandwidth: bytes / seconds. ``algbw(1e9, 0.01)`` -> 1e11 B/s."""
    return np.asarray(size, float) / np.asarray(t, float)


def busbw(size, t, kind: str, p: int):
    """nccl-tests bus bandwidth = algbw * factor (comparable to the link's peak for every p).

    >>> round(float(busbw(8 * 2**20, 1e-4, "ar", 8) / 1e9), 1)
    146.8
    """
    return algbw(size, t) * bus_factor(kind, p)


# ---- data -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Samples:
    """Samples of one op class and direction: ideal times x = F/P, y = B/W (s), dmin, measured t (s);
    flash attention also (head dim, thread blocks, key block, SMs) in ``attn``; the unfused attention's batched GEMMs
    (x, y, y of the extra passes over the scores, K) per kernel in ``kern`` (samples x kernels, x = 0
    where a sample runs fewer kernels)."""
    x: np.ndarray
    y: np.ndarray
    dmin: np.ndarray | None
    t: np.ndarray
    attn: tuple | None = None
    kern: tuple | None = None

    def take(self, idx) -> "Samples":
        part = lambda a: None if a is None else tuple(v[idx] for v in a)  # noqa: E731
        return Samples(self.x[idx], self.y[idx], None if self.dmin is None else self.dmin[idx], self.t[idx],
                       part(self.attn), part(self.kern))


@dataclass(frozen=True)
class Roofline:
    eta: float
    mu: float
    t0: float          # s
    shape: tuple | None = None     # flash attention: (d_soft, d_reg, uneven, d_io); bmm: (dhalf, reread)
    floor: float = 0.0             # s, host time to issue the benchmarked op: its measured span is max(floor, GPU time)


@dataclass(frozen=True)
class RooflineFit:
    """Fitted parameters per direction, shared dhalf, held-out error and flagged samples."""
    fits: dict          # direction -> Roofline
    dhalf: float | None
    mape: dict          # direction -> 5-fold held-out MAPE on kept samples
    mdape: dict         # direction -> median held-out APE
    n: dict             # direction -> samples used
    flagged: dict       # direction -> bool mask over the input samples


def roofline_time(s: Samples, r: Roofline, dhalf: float | None = None) -> np.ndarray:
    """Measured span of a benchmarked op: max(host issue time ``r.floor``, GPU time ``gpu_time``)."""
    return np.maximum(r.floor, gpu_time(s, r, dhalf))


def gpu_time(s: Samples, r: Roofline, dhalf: float | None = None) -> np.ndarray:
    """t0 + max(x / (eta sat), y / mu) with sat = dmin / (dmin + dhalf) when dmin is given, or
    1 / attention_shape(d, ctas, kblock, sms, *shape) for flash-attention samples and fits that carry a shape; summed
    over the kernels of batched-GEMM samples (compute.bmm_time)."""
    if s.kern is not None and r.shape is not None:
        x, y, reread, k = s.kern
        dhalf, rho = r.shape
        run = x > 0
        each = r.t0 + np.maximum(x * bmm_slowdown(np.where(run, k, 1.0), dhalf) / r.eta, (y + rho * reread) / r.mu)
        return np.where(run, each, 0.0).sum(axis=1)
    if s.attn is not None and r.shape is not None:
        slow = attention_shape(*s.attn, *r.shape, ceil=np.ceil, lo=np.minimum)
    else:
        slow = 1.0 if s.dmin is None or dhalf is None else (s.dmin + dhalf) / s.dmin
    return r.t0 + np.maximum(s.x * slow / r.eta, s.y / r.mu)


def robust_sigma(r) -> float:
    """1.4826 * median absolute deviation: the standard deviation of a normal core, outliers ignored."""
    r = np.asarray(r, float)
    return float(1.4826 * np.median(np.abs(r - np.median(r)))) if r.size else 0.0


def flag_outliers(log_resid, n_sigma: float = 4.0, floor: float = float(np.log(1.25)), hard: float = LN2):
    """Flag |log residual - median| > max(n_sigma robust sigma, floor), always beyond a factor 2 (``hard``).

    >>> flag_outliers(np.array([0.01, -0.02, 0.0, 0.9])).tolist()
    [False, False, False, True]
    """
    r = np.asarray(log_resid, float)
    thr = min(max(n_sigma * robust_sigma(r), floor), hard)
    flagged = np.abs(r - np.median(r)) > thr      # centred: a systematic bias is a misfit, not outliers
    return flagged if flagged.mean() < 0.5 else np.zeros_like(flagged)


# ---- operator fit ---------------------------------------------------------------------------
_REG = 1e-2  # weak pull of ln(1/eta), ln(1/mu) toward 0: an unidentified bound stays at efficiency 1


# shape constants: (name, start, low, high, log-parametrised) of flash attention (compute.attention_shape)
# and of the unfused attention's batched GEMMs (compute.bmm_time)
SHAPES = {"attn": (("d_soft", 32.0, 0.1, 4096.0, True), ("d_reg", 512.0, 8.0, 1e6, True),
                   ("uneven", 0.1, 0.0, 2.0, False), ("d_io", 8.0, 0.0, 4096.0, False)),
          "bmm": (("dhalf", 128.0, 1.0, 4096.0, True), ("reread", 0.5, 0.0, 1.0, False))}


def _width(shape, floor):
    return 3 + (len(shape) if shape else 0) + floor


def _unpack(theta, names, scales, fit_dhalf, dhalf, shape=None, floor=False):
    fits, w = {}, _width(shape, floor)
    for i, d in enumerate(names):
        la, lb, t0 = theta[w * i: w * i + 3]
        consts = None
        if shape:
            consts = tuple(float(np.exp(v)) if lg else float(v)
                           for v, (_, _, _, _, lg) in zip(theta[w * i + 3: w * i + 3 + len(shape)], shape))
        fl = float(theta[w * i + w - 1] * scales[i]) if floor else 0.0
        fits[d] = Roofline(float(np.exp(-la)), float(np.exp(-lb)), float(t0 * scales[i]), consts, fl)
    return fits, (float(np.exp(theta[-1])) if fit_dhalf else dhalf)


def _fit_once(groups: dict, dhalf, fit_dhalf, f_scale, shape=None, eta_max=1.0, floor=False):
    names = list(groups)
    scales = [float(np.median(groups[d].t)) for d in names]
    w = _width(shape, floor)
    best = None
    starts = [(0.8, 0.8), (0.3, 0.8), (0.8, 0.2), (0.05, 0.05)]
    for eta0, mu0 in starts:
        theta0, lo, hi = [], [], []
        for d in names:
            theta0 += [-np.log(min(eta0, eta_max)), -np.log(mu0), 0.01]
            lo += [-np.log(eta_max), 0.0, 0.0]
            hi += [np.log(1e4), np.log(1e4), 100.0]
            if shape:
                for _, v0, a, b, lg in shape:
                    theta0.append(np.log(v0) if lg else v0)
                    lo.append(np.log(a) if lg else a)
                    hi.append(np.log(b) if lg else b)
            if floor:   # start where the fastest samples bind it (below all of them it has no gradient)
                theta0.append(0.9 * float(groups[d].t.min()) / scales[names.index(d)]); lo.append(0.0); hi.append(100.0)
        if fit_dhalf:
            theta0.append(np.log(32.0)); lo.append(np.log(0.5)); hi.append(np.log(4096.0))

        def resid(theta):
            fits, dh = _unpack(theta, names, scales, fit_dhalf, dhalf, shape, floor)
            out = [np.log(np.maximum(roofline_time(groups[d], fits[d], dh), 1e-15) / groups[d].t) for d in names]
            reg = [_REG * theta[w * i + k] for i in range(len(names)) for k in (0, 1)]
            return np.concatenate(out + [np.array(reg)])

        res = least_squares(resid, np.array(theta0), bounds=(lo, hi), loss="soft_l1", f_scale=f_scale,
                            x_scale="jac", max_nfev=400 * (2 if shape else 1))
        if best is None or res.cost < best.cost:
            best = res
    return _unpack(best.x, names, scales, fit_dhalf, dhalf, shape, floor)


def distinct_points(s: Samples) -> int:
    """How many different (x, y) ideal-time pairs the samples hold (repeats of one shape count once)."""
    return len({(float(a), float(b)) for a, b in zip(np.round(s.x, 15), np.round(s.y, 15))})


def identifiable_roofline(s: Samples) -> bool:
    """At least 3 finite positive samples at 2 or more shapes: one shape fits any eta with a matching t0 (0 % error)."""
    ok = len(s.t) >= 3 and np.all(np.isfinite(s.t)) and np.all(s.t > 0) and np.all(np.isfinite(s.x)) \
        and np.all(np.isfinite(s.y))
    return bool(ok) and distinct_points(s) >= 2


def fit_roofline(groups: dict, dhalf: float | None = None, fit_dhalf: bool = False, k: int = 5,
                 f_scale: float = 0.05, seed: int = 0, fit_shape: bool = False, eta_max: float = 1.0,
                 host_floor: bool = False) -> RooflineFit:
    """Fit (eta, mu, t0) per direction of ``groups`` (direction -> Samples), dhalf shared if fitted;
    with ``fit_shape`` also the shape constants per direction of the curve the samples carry (``attn``:
    flash attention, ``kern``: batched GEMMs). ``eta_max`` bounds eta inside the fit (a GPU's maximum
    achievable matmul rate over its peak), so that t0 and the saturation adjust to it. With
    ``host_floor`` the span of an op is max(host issue time, GPU time), the floor fitted per direction.

    Pass 1 fits all samples robustly and flags far-off ones (``flag_outliers``); pass 2 refits on
    the kept samples; the error is the k-fold held-out MAPE of pass-2 fits on kept samples.
    """
    groups = {d: s for d, s in groups.items() if len(s.t)}
    for d, s in groups.items():
        if not identifiable_roofline(s):
            from ...base.errors import InputError
            raise InputError(f"roofline fit {d}: {len(s.t)} samples at {distinct_points(s)} distinct shape(s); eta, mu and "
                             "t0 need at least 3 finite positive samples at 2 or more shapes")
    shape = SHAPES["bmm" if all(s.kern is not None for s in groups.values()) else "attn"] if fit_shape else None
    fits, dh = _fit_once(groups, dhalf, fit_dhalf, f_scale, shape, eta_max, host_floor)
    flagged = {d: flag_outliers(np.log(roofline_time(s, fits[d], dh) / s.t)) for d, s in groups.items()}
    kept = {d: s.take(~flagged[d]) for d, s in groups.items()}
    fits, dh = _fit_once(kept, dhalf, fit_dhalf, f_scale, shape, eta_max, host_floor)
    # k-fold held-out error on the kept samples
    rng = np.random.default_rng(seed)
    folds = {d: rng.integers(0, k, len(s.t)) for d, s in kept.items()}
    pred = {d: roofline_time(s, fits[d], dh) for d, s in kept.items()}   # fallback: in-sample
    for j in range(k):
        train = {d: s.take(folds[d] != j) for d, s in kept.items()}
        if min(len(s.t) for s in train.values()) < 3:   # too few samples to hold any out
            continue
        fj, dhj = _fit_once(train, dhalf, fit_dhalf, f_scale, shape, eta_max, host_floor)
        for d, s in kept.items():
            m = folds[d] == j
            pred[d][m] = roofline_time(s.take(m), fj[d], dhj)
    ape = {d: np.abs(pred[d] - s.t) / s.t for d, s in kept.items()}
    return RooflineFit(fits, dh, {d: float(np.mean(a)) for d, a in ape.items()},
                       {d: float(np.median(a)) for d, a in ape.items()},
                       {d: int(len(s.t)) for d, s in kept.items()}, flagged)


# ---- collective fit -------------------------------------------------------------------------
@dataclass(frozen=True)
class LinkFit:
    alpha: float        # s per ring step
    busbw: float        # B/s
    mape: float         # k-fold held-out MAPE on kept samples
    n: int
    flagged: np.ndarray
    call: float = 0.0   # s per collective call, whatever the group size (0 unless 2+ group sizes were fitted)


def alpha_beta_time(size, p, kind: str, alpha: float, bw: float, call: float = 0.0):
    """t = call + steps(p) alpha + factor(p) S / busbw (comm.py ``flat``); p may be an array."""
    p = np.asarray(p, float)
    if kind == "p2p":
        return call + alpha + np.asarray(size, float) / bw
    steps = 2 * (p - 1) if kind == "ar" else p - 1
    fac = steps / p
    return call + steps * alpha + fac * np.asarray(size, float) / bw


def log_size_weights(size, p) -> np.ndarray:
    """Per sample, its share of log(size) among the samples of its group size (half the gap to each neighbour;
    a lone size or repeated sizes share their cell), normalised to mean 1: a table stepped linearly in bytes
    no longer lets its many large sizes outvote the few small ones."""
    size, p = np.asarray(size, float), np.asarray(p, float)
    w = np.ones(len(size))
    for q in np.unique(p):
        m = np.where(p == q)[0]
        ls = np.log(size[m])
        u, inv, cnt = np.unique(ls, return_inverse=True, return_counts=True)
        if len(u) < 2:
            continue
        cell = np.empty(len(u))
        cell[1:-1] = (u[2:] - u[:-2]) / 2
        cell[0], cell[-1] = (u[1] - u[0]) / 2, (u[-1] - u[-2]) / 2
        w[m] = (cell / cnt)[inv] / np.mean((cell / cnt)[inv])
    return w / np.mean(w)


def _fit_ab_once(size, p, t, kind, f_scale):
    ts = float(np.median(t))
    bw0 = float(np.median(alpha_beta_time(size, p, kind, 0.0, 1.0) / t))
    sw = np.sqrt(log_size_weights(size, p))
    # the per-call time is identifiable only beside the per-step latency of a second group size (p2p has no steps)
    with_call = kind != "p2p" and len(np.unique(p)) >= 2

    def resid(theta):
        call = theta[2] * ts if with_call else 0.0
        model = alpha_beta_time(size, p, kind, theta[0] * ts, bw0 / theta[1], call)
        return sw * np.log(np.maximum(model, 1e-15) / t)

    x0, lo, hi = [1e-3, 1.0], [0.0, 1e-6], [10.0, 1e6]
    if with_call:
        x0, lo, hi = x0 + [1e-3], lo + [0.0], hi + [10.0]
    res = least_squares(resid, np.array(x0), bounds=(lo, hi), loss="soft_l1", f_scale=f_scale, x_scale="jac")
    return res.x[0] * ts, bw0 / res.x[1], (res.x[2] * ts if with_call else 0.0)


AB_MIN_SAMPLES = 3      # two parameters (alpha, busbw) and at least one sample to hold out


def identifiable(size, p, t, kind: str) -> None:
    """InputError unless alpha and busbw can be told apart from these samples: finite positive sizes,
    ranks and times, at least AB_MIN_SAMPLES rows, and the two regressors of t = steps(p) alpha +
    factor(p) S / busbw (the latency steps and the bytes term) not proportional to each other (one row,
    or every row the same size and group size, fits any alpha with a matching busbw: 0 % error, no fit).

    >>> identifiable(np.array([1e6, 1e6]), np.array([8, 8]), np.array([1e-4, 1e-4]), "ar")
    Traceback (most recent call last):
    ...
    roofline.base.errors.InputError: ar fit: 2 samples; alpha and busbw need at least 3 with two different message sizes
    """
    from ...base.errors import InputError

    if not (np.all(np.isfinite(size)) and np.all(np.isfinite(t)) and np.all(np.isfinite(p))):
        raise InputError(f"{kind} fit: sizes, ranks and times must be finite numbers (NaN or inf given)")
    if size.size and (np.any(size <= 0) or np.any(t <= 0) or np.any(p < (1 if kind == "p2p" else 2))):
        raise InputError(f"{kind} fit: sizes and times must be positive and a group at least 2 ranks")
    steps = np.array([ring_steps(kind, int(x)) for x in p]) if kind != "p2p" else np.ones_like(size)
    bytes_term = alpha_beta_time(size, p, kind, 0.0, 1.0)
    design = np.stack([steps / np.max(steps), bytes_term / np.max(bytes_term)], axis=1) if size.size else np.zeros((0, 2))
    if size.size < AB_MIN_SAMPLES or np.linalg.matrix_rank(design, tol=1e-9) < 2:
        raise InputError(f"{kind} fit: {size.size} samples; alpha and busbw need at least {AB_MIN_SAMPLES} with two "
                         "different message sizes")
    if np.ptp(np.log(t)) < 1e-6:
        raise InputError(f"{kind} fit: every time is the same ({t[0]:.3g} s) over message sizes "
                         f"{size.min():.3g}-{size.max():.3g} B: busbw cannot be fitted")


def fit_alpha_beta(size, p, t, kind: str, k: int = 5, f_scale: float = 0.05, seed: int = 0) -> LinkFit:
    """Robust alpha (s) and busbw (B/s) of one collective on one link from sizes (B), ranks, times (s).

    >>> S = np.logspace(6, 9, 30); t = 2 * 7 * 5e-6 + 1.75 * S / 200e9
    >>> f = fit_alpha_beta(S, np.full(30, 8), t, "ar")
    >>> round(f.alpha * 1e6, 2), round(f.busbw / 1e9, 1)
    (5.0, 200.0)
    """
    size, p, t = (np.asarray(a, float) for a in (size, np.broadcast_to(p, np.shape(size)), t))
    identifiable(size, p, t, kind)
    a, bw, c = _fit_ab_once(size, p, t, kind, f_scale)
    flagged = flag_outliers(np.log(alpha_beta_time(size, p, kind, a, bw, c) / t))
    keep = ~flagged
    a, bw, c = _fit_ab_once(size[keep], p[keep], t[keep], kind, f_scale)
    rng = np.random.default_rng(seed)
    folds = rng.integers(0, k, int(keep.sum()))
    sk, pk, tk = size[keep], p[keep], t[keep]
    pred = np.empty(len(tk))
    for j in range(k):
        tr = folds != j
        if tr.sum() < 2 or (~tr).sum() == 0:     # too few samples to hold any out: in-sample
            pred[~tr] = alpha_beta_time(sk[~tr], pk[~tr], kind, a, bw, c)
            continue
        aj, bj, cj = _fit_ab_once(sk[tr], pk[tr], tk[tr], kind, f_scale)
        pred[~tr] = alpha_beta_time(sk[~tr], pk[~tr], kind, aj, bj, cj)
    return LinkFit(float(a), float(bw), float(np.mean(np.abs(pred - tk) / tk)), int(keep.sum()), flagged, float(c))
