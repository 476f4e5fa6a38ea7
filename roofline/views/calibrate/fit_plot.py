"""The figure of a calibration fit (``calibrate compute|comm|import ... --plot PNG``).

One panel per fitted operator class: every benchmarked sample's measured time against the time the fitted roofline
(fit.roofline_time, the curve the profile writes) gives it, log-log, forward and backward apart, samples the fit set
aside as defects crossed out, with the identity line and a +-10 % band; the panel title carries the k-fold held-out
MAPE the profile records. One panel per fitted collective and link: the measured bus bandwidth (nccl-tests
convention, fit.busbw) against the message size, one colour per group size, with the fitted alpha-beta curve
(fit.alpha_beta_time) of each group size. The panels are plain data first (``compute_panels``, ``link_panels``), so
tests check what is drawn without rendering it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import fit, profile
from ..plotting import pyplot, save

BAND = 0.10     # the +-10 % lines around the identity


@dataclass(frozen=True)
class ComputePanel:
    cls: str
    direction: str
    measured: np.ndarray     # s
    fitted: np.ndarray       # s, the fitted roofline at each sample
    flagged: np.ndarray      # bool: set aside by the fit (defects), drawn crossed out
    mape: float              # k-fold held-out MAPE of the kept samples (the profile's fit_error)


@dataclass(frozen=True)
class LinkPanel:
    kind: str
    link: str
    size: np.ndarray         # bytes (nccl-tests size)
    ranks: np.ndarray
    busbw: np.ndarray        # B/s measured
    fit: fit.LinkFit


def compute_panels(ops, compute: dict, peaks: profile.Peaks) -> list[ComputePanel]:
    """The samples of every fitted class and direction, as profile.fit_compute fitted them, with their fitted times."""
    out = []
    for cls in profile.CLASSES:
        if cls not in compute:
            continue
        rf, _ = compute[cls]
        for d, r in rf.fits.items():
            s, _ = profile.class_samples(ops, cls, d, peaks)
            if s is None:
                continue
            flagged = np.asarray(rf.flagged.get(d, np.zeros(len(s.t), bool)), bool)
            out.append(ComputePanel(cls, d, np.asarray(s.t, float), fit.roofline_time(s, r, rf.dhalf), flagged,
                                    float(rf.mape.get(d, float("nan")))))
    return out


def link_panels(samples: dict, links: dict) -> list[LinkPanel]:
    """``samples``: (kind, link) -> (size, ranks, t) arrays; one panel per fitted (kind, link)."""
    out = []
    for key, f in links.items():
        if key not in samples:
            continue
        size, p, t = (np.asarray(a, float) for a in samples[key])
        bus = np.empty_like(t)
        for q in np.unique(p):          # the bus factor takes one group size at a time
            m = p == q
            bus[m] = fit.busbw(size[m], t[m], key[0], int(q))
        out.append(LinkPanel(key[0], key[1], size, p, bus, f))
    return out


def fitted_busbw(panel: LinkPanel, ranks: float, sizes: np.ndarray) -> np.ndarray:
    """The fitted alpha-beta curve of ``ranks`` as bus bandwidth over ``sizes`` (B/s)."""
    f = panel.fit
    t = fit.alpha_beta_time(sizes, ranks, panel.kind, f.alpha, f.busbw, f.call)
    return fit.busbw(sizes, t, panel.kind, int(ranks))


def plot(path: str, compute: list[ComputePanel] = (), links: list[LinkPanel] = (), title: str = "",
         flag: str = "--plot") -> None:
    """Draw the panels into ``path`` (any image format matplotlib writes)."""
    plt = pyplot(flag)
    groups = _by_class(compute)
    n = len(groups) + len(links)
    if n == 0:
        from ...base.errors import InputError
        raise InputError(f"{flag} {path}: the fit has no class or collective to draw")
    cols = min(3, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.3 * cols, 3.7 * rows), squeeze=False)
    cells = list(axes.flat)
    for ax, (cls, panels) in zip(cells, groups.items()):
        _draw_compute(ax, cls, panels)
    for ax, panel in zip(cells[len(groups):], links):
        _draw_link(ax, panel)
    for ax in cells[n:]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.97 if title else 1))
    save(fig, path, flag)


def plot_runs(path: str, measured, base, held_out, groups, title: str = "", flag: str = "--plot") -> None:
    """``calibrate from-runs --plot``: each run's measured step time against BASE's prediction and the prediction of
    the fit that never saw the run's group (the cross-validated error the report prints), log-log; and per group,
    the two errors side by side."""
    plt = pyplot(flag)
    measured, base, held_out = (np.asarray(a, float) for a in (measured, base, held_out))
    groups = np.asarray([str(g) for g in groups], dtype=object)
    names = sorted(set(groups))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.3), gridspec_kw={"width_ratios": [1, 1.2]})
    both = np.r_[measured, base, held_out[np.isfinite(held_out)]]
    span = np.array([both.min() / 1.3, both.max() * 1.3])
    ax.plot(span, span, color="0.3", lw=0.8)
    for k in (1 - BAND, 1 + BAND):
        ax.plot(span, span * k, color="0.6", lw=0.6, ls="--")
    ax.scatter(measured, base, s=10, c="0.6", marker="o", alpha=0.6, label="BASE")
    ax.scatter(measured, held_out, s=10, c="tab:blue", marker="^", alpha=0.7,
               label="fitted without the run's group (cross-validated)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*span)
    ax.set_ylim(*span)
    ax.set_xlabel("measured step time (s)")
    ax.set_ylabel("predicted step time (s)")
    ax.legend(fontsize=7, loc="upper left")
    mape = lambda pred, m: float(np.nanmean(np.abs(pred[m] / measured[m] - 1)))  # noqa: E731
    x = np.arange(len(names))
    bx.bar(x - 0.2, [100 * mape(base, groups == g) for g in names], 0.4, color="0.6", label="BASE")
    bx.bar(x + 0.2, [100 * mape(held_out, groups == g) for g in names], 0.4, color="tab:blue",
           label="cross-validated")
    bx.set_xticks(x)
    bx.set_xticklabels(names, rotation=30 if len(names) > 4 else 0, ha="right" if len(names) > 4 else "center",
                       fontsize=7)
    bx.set_ylabel("MAPE of the group's runs (%)")
    bx.set_title("per held-out group", fontsize=9)
    bx.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.94 if title else 1))
    save(fig, path, flag)


def _no_labels():
    from matplotlib.ticker import NullFormatter
    return NullFormatter()


def _by_class(panels) -> dict:
    out: dict = {}
    for p in panels:
        out.setdefault(p.cls, []).append(p)
    return out


def _draw_compute(ax, cls: str, panels: list[ComputePanel]) -> None:
    lo = min(float(np.min(np.r_[p.measured, p.fitted])) for p in panels)
    hi = max(float(np.max(np.r_[p.measured, p.fitted])) for p in panels)
    span = np.array([lo / 1.3, hi * 1.3])
    ax.plot(span, span, color="0.3", lw=0.8)
    for k in (1 - BAND, 1 + BAND):
        ax.plot(span, span * k, color="0.6", lw=0.6, ls="--")
    errs = []
    for p, (colour, marker) in zip(panels, (("tab:blue", "o"), ("tab:orange", "^"))):
        kept = ~p.flagged
        ax.scatter(p.measured[kept], p.fitted[kept], s=9, c=colour, marker=marker, alpha=0.7,
                   label=f"{p.direction} ({int(kept.sum())})")
        if p.flagged.any():
            ax.scatter(p.measured[p.flagged], p.fitted[p.flagged], s=14, c="0.5", marker="x",
                       label=f"{p.direction} set aside ({int(p.flagged.sum())})")
        errs.append(f"{p.direction} {p.mape:.1%}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*span)
    ax.set_ylim(*span)
    ax.xaxis.set_minor_formatter(_no_labels())      # a narrow span labels its minor ticks over each other
    ax.yaxis.set_minor_formatter(_no_labels())
    ax.set_xlabel("measured (s)")
    ax.set_ylabel("fitted roofline (s)")
    ax.set_title(f"{cls}: held-out MAPE {', '.join(errs)}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")


def _draw_link(ax, panel: LinkPanel) -> None:
    sizes = np.geomspace(max(float(panel.size.min()), 1.0), float(panel.size.max()), 60)
    for i, q in enumerate(np.unique(panel.ranks)):
        m = panel.ranks == q
        colour = f"C{i % 10}"
        ax.scatter(panel.size[m], panel.busbw[m] / 1e9, s=10, color=colour, label=f"{int(q)} ranks")
        ax.plot(sizes, fitted_busbw(panel, q, sizes) / 1e9, color=colour, lw=1)
    f = panel.fit
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(_no_labels())
    ax.set_xlabel("message size (bytes, nccl-tests convention)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"{panel.kind} {panel.link}: busbw {f.busbw / 1e9:.1f} GB/s, alpha {f.alpha * 1e6:.2f} us, "
                 f"MAPE {f.mape:.1%}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
