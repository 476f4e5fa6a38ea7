"""Samples -> fitted efficiencies and links -> profile YAML text (and a samples CSV).

Operator samples carry FLOPs and bytes; the ideal times x = F / P and y = B / W use the profile's
dense peak P of the sample dtype for gemm/attn, the vector peak for the other classes, and the HBM
bandwidth W (roofline/model/formulas/compute.py ``op_time``). GEMMs share one ``dhalf`` (fitted on gemm
forward and backward jointly); flash attention has its own shape curve (``compute.attention_shape``)
whose constants are fitted per direction. Attention samples without head dim and grid size (older
benchmark files) fall back to the GEMM saturation, written as the equivalent shape (d_soft = dhalf).
The unfused attention's batched GEMMs (class bmm) are fitted kernel by kernel (``compute.bmm_time``).
"""
from __future__ import annotations

import csv
import datetime
import io
from pathlib import Path
from dataclasses import dataclass

import numpy as np
import yaml

from . import fit

CLASSES = ("gemm", "attn", "bmm", "softmax", "norm", "elem", "embed", "ce", "optim")
SHAPE_KEYS = {"attn": ("d_soft", "d_reg", "uneven", "d_io"),   # efficiency.<class>.<dir> keys of the shape
              "bmm": ("dhalf", "reread")}                           # curves (compute.attention_shape, bmm_time)
MATMUL = ("gemm", "attn", "bmm")    # classes priced against the dense matmul peak
# Megatron's vocab-parallel loss issues a chain of small kernels (max, subtract, gather, exp, sum, divide and
# two all-reduces forward; arange, gather, subtract, index_put, multiply backward): below ~37M logits its span
# is the host's issue time, not the GPU's. Its fit takes the span as max(host floor, GPU time); the floor is
# reported, not priced (the host issue time of the loss is in the profile's ``host:`` block).
HOST_BOUND = ("ce",)


@dataclass(frozen=True)
class Peaks:
    peak: float         # dense FLOP/s of the sample dtype
    peak_vec: float     # vector FLOP/s
    hbm: float          # B/s
    ceiling: float = 1.0    # maximum achievable matmul rate / peak (mamf-finder): bounds the batched GEMMs' eta
    sms: int = 1            # SMs: thread blocks of one wave (flash attention)


# The op whose kernel the predictor prices for each class is fitted; the other ops of the class are
# different implementations (unfused torch RoPE and RMSNorm, masked_fill, torch softmax, batched
# small-head GEMMs, per-tensor Adam) and are only scored against the fit ("transfer" error).
PRIMARY = {  # upstream estimate-train-time op names, then this package's benchmark kernel names
    "gemm": ("linear1", "linear2", "linear3", "linear4", "linear_final", "gemm"),
    "attn": ("flash_atten", "sdpa"),
    "bmm": ("baddbmm", "bmm"),
    "softmax": ("ScaledUpperTriangMaskedSoftmax", "scores_softmax"),
    "norm": ("layernorm", "rmsnorm"),
    "elem": ("gelu", "res_add", "swiglu", "residual_add"),
    "embed": ("embedding",),
    "ce": ("parallel_cross_entropy_128", "cross_entropy"),
    "optim": ("firstStage_optimizer", "middleStage_optimizer", "lastStage_optimizer", "adam"),
}


def class_samples(ops, cls: str, direction: str, peaks: Peaks, primary: bool = True):
    """Concatenate kept samples of one class and direction into fit.Samples (plus op names)."""
    sel = [o for o in ops if o.cls == cls and o.direction == direction and o.keep.any()
           and (not primary or o.op in PRIMARY[cls])]
    if not sel:
        return None, None
    s = [_samples(o, peaks).take(o.keep) for o in sel]
    cat = lambda f: np.concatenate([f(x) for x in s])  # noqa: E731
    attn = kern = None
    if all(x.attn is not None for x in s):
        attn = tuple(cat(lambda x: x.attn[i]) for i in range(4))
    if all(x.kern is not None for x in s):       # pad to the most kernels of any op (x = 0: no kernel)
        nk = max(x.kern[0].shape[1] for x in s)
        kern = tuple(cat(lambda x: np.pad(x.kern[i], ((0, 0), (0, nk - x.kern[i].shape[1])))) for i in range(4))
    names = np.concatenate([np.full(int(o.keep.sum()), o.op) for o in sel])
    return fit.Samples(cat(lambda x: x.x), cat(lambda x: x.y), None if s[0].dmin is None else cat(lambda x: x.dmin),
                       cat(lambda x: x.t), attn, kern), names


def _samples(o, peaks: Peaks) -> fit.Samples:
    """All samples of one op file and direction as fit.Samples (ideal times against the class's peaks)."""
    P = peaks.peak if o.cls in MATMUL else peaks.peak_vec
    kern, attn = getattr(o, "kern", None), getattr(o, "attn", None)
    if kern is not None:
        f, b, reread, k = kern
        kern = (f / P, b / peaks.hbm, reread / peaks.hbm, k)
    if attn is not None and o.cls == "attn":     # head dim, thread blocks, key block; the SMs run them in waves
        attn = (*attn, np.full(len(o.t), float(peaks.sms)))
    return fit.Samples(o.flops / P, o.bytes / peaks.hbm, o.dmin if o.cls in ("gemm", "attn") else None, o.t,
                       attn if o.cls == "attn" else None, kern)


def fit_compute(ops, peaks: Peaks, k: int = 5) -> dict:
    """class -> (fit.RooflineFit, {direction: op names of the samples}).

    gemm is fitted with its size saturation ``dhalf``; flash attention with its shape curve (own
    constants per direction) when its samples carry head dim and grid size, else jointly with gemm
    on the shared ``dhalf`` (the old form, kept for benchmark files without those columns); the
    batched GEMMs kernel by kernel with their own constants, eta bounded by ``peaks.ceiling``.
    """
    out = {}
    groups, names = {}, {}
    for cls in CLASSES:
        for d in ("fwd", "bwd"):
            s, n = class_samples(ops, cls, d, peaks)
            if s is not None and fit.identifiable_roofline(s):     # else: too few shapes to fit; defaults apply
                groups[cls, d], names[cls, d] = s, n
    shaped = [d for d in ("fwd", "bwd") if ("attn", d) in groups and groups["attn", d].attn is not None]
    joint = {f"{c}_{d}": s for (c, d), s in groups.items() if c == "gemm" or (c == "attn" and d not in shaped)}
    dhalf = None
    if joint:
        r = fit.fit_roofline(joint, fit_dhalf=True, k=k)
        dhalf = r.dhalf
        for c in ("gemm", "attn"):
            ds = [d for d in ("fwd", "bwd") if f"{c}_{d}" in joint]
            if ds:
                out[c] = (fit.RooflineFit({d: r.fits[f"{c}_{d}"] for d in ds}, dhalf,
                                          {d: r.mape[f"{c}_{d}"] for d in ds}, {d: r.mdape[f"{c}_{d}"] for d in ds},
                                          {d: r.n[f"{c}_{d}"] for d in ds}, {d: r.flagged[f"{c}_{d}"] for d in ds}),
                          {d: names[c, d] for d in ds})
    if shaped:
        r = fit.fit_roofline({d: groups["attn", d] for d in shaped}, k=k, fit_shape=True)
        out["attn"] = (fit.RooflineFit(r.fits, dhalf, r.mape, r.mdape, r.n, r.flagged), {d: names["attn", d] for d in shaped})
    for cls in CLASSES[2:]:
        g = {d: groups[cls, d] for d in ("fwd", "bwd") if (cls, d) in groups}
        if cls == "bmm" and g:
            out[cls] = (fit.fit_roofline(g, k=k, fit_shape=True, eta_max=peaks.ceiling), {d: names[cls, d] for d in g})
        elif g:
            out[cls] = (fit.fit_roofline(g, k=k, host_floor=cls in HOST_BOUND), {d: names[cls, d] for d in g})
    return out


def transfer_errors(ops, compute: dict, peaks: Peaks) -> dict:
    """op/direction -> MAPE of the class fit on each op's kept samples (fitted ops: in-sample)."""
    out = {}
    for o in ops:
        if o.cls not in compute or o.direction not in compute[o.cls][0].fits or not o.keep.any():
            continue
        r = compute[o.cls][0]
        s = _samples(o, peaks).take(o.keep)
        pred = fit.roofline_time(s, r.fits[o.direction], r.dhalf)
        out[f"{o.op} {o.direction}"] = round(float(np.mean(np.abs(pred - s.t) / s.t)), 4)
    return out


def link_samples(colls) -> dict:
    """(kind, link) -> (size, ranks, t) of the kept samples a link fit uses. Inter: files with one GPU per node (a
    mixed group is hierarchical, comm.py ``collective``), all node counts jointly. Intra: the largest group in the
    node only (the busbw of a 2-GPU ring over one NVLink pair is not that of the full node; see ``link_fits_by_p``)."""
    out = {}
    for link in ("intra", "inter"):
        for kind in ("ar", "ag", "rs", "a2a", "p2p"):
            sel = [c for c in colls if c.kind == kind and c.link == link
                   and (link == "intra" or c.gpus_per_node == 1) and c.keep.sum() >= 5]
            if link == "intra" and sel:
                pmax = max(c.p for c in sel)
                sel = [c for c in sel if c.p == pmax]
            if sel:
                out[kind, link] = (np.concatenate([c.size[c.keep] for c in sel]),
                                   np.concatenate([np.full(int(c.keep.sum()), c.p) for c in sel]),
                                   np.concatenate([c.t[c.keep] for c in sel]))
    return out


def fit_links(colls, k: int = 5) -> dict:
    """(kind, link) -> fit.LinkFit on ``link_samples``."""
    return {key: fit.fit_alpha_beta(size, p, t, key[0], k=k) for key, (size, p, t) in link_samples(colls).items()}


def link_fits_by_p(colls, k: int = 5) -> dict:
    """(kind, link, p) -> fit.LinkFit per file group, to show how busbw depends on the group size."""
    out = {}
    for c in colls:
        if c.keep.sum() >= 5 and (c.link == "intra" or c.gpus_per_node == 1):
            key = (c.kind, c.link, c.p)
            prev = [x for x in colls if (x.kind, x.link, x.p) == key and (x.link == "intra" or x.gpus_per_node == 1)]
            size = np.concatenate([x.size[x.keep] for x in prev])
            t = np.concatenate([x.t[x.keep] for x in prev])
            out[key] = fit.fit_alpha_beta(size, np.full(len(t), c.p), t, c.kind, k=k)
    return out


def _us(s: float) -> str:
    return f"{s * 1e6:.3g} us" if s >= 1e-9 else "0 us"   # below a nanosecond is fit noise


def _gbs(b: float) -> str:
    return f"{b / 1e9:.4g} GB/s"


def efficiency_section(compute: dict) -> dict:
    eff = {}
    for cls, (r, _) in compute.items():
        if cls == "gemm" and r.dhalf is not None:
            eff["dhalf"] = float(f"{r.dhalf:.4g}")
        eff[cls] = {d: {"eta": float(f"{f.eta:.4g}"), "mu": float(f"{f.mu:.4g}"), "t0": _us(f.t0)}
                    for d, f in r.fits.items()}
        if cls in SHAPE_KEYS:   # shape constants (compute.attention_shape, bmm_time); attn without: the GEMM saturation
            for d, f in r.fits.items():
                shape = f.shape if f.shape is not None else (r.dhalf or 32.0, float("inf"), 0.0, 0.0)
                eff[cls][d].update({k: float(f"{v:.4g}") if abs(v) > 1e-9 else 0.0 for k, v in zip(SHAPE_KEYS[cls], shape)})
    return dict(sorted(eff.items(), key=lambda kv: -1 if kv[0] == "dhalf" else CLASSES.index(kv[0])))


def _link_entry(f) -> dict:
    """A fitted link as the profile stores it: alpha and busbw, and the per-call time where the fit found one."""
    e = {"alpha": _us(f.alpha), "busbw": _gbs(f.busbw)}
    if getattr(f, "call", 0.0) >= 1e-9:
        e["call"] = _us(f.call)
    return e


def collectives_section(links: dict, notes: dict | None = None) -> dict:
    out = {}
    for (kind, link), f in links.items():
        out.setdefault(link, {})[kind] = _link_entry(f)
    for link, note in (notes or {}).items():
        if link in out:
            out[link]["note"] = note
    return out


def fit_error_section(compute: dict, links: dict) -> tuple[dict, dict]:
    samples, err = {}, {}
    for cls, (r, _) in compute.items():
        samples[cls] = int(sum(r.n.values()))
        err[cls] = {"n": samples[cls], "flagged": int(sum(int(m.sum()) for m in r.flagged.values()))}
        for d in r.fits:
            err[cls][f"{d}_mape_kfold"] = round(r.mape[d], 4)
            err[cls][f"{d}_mdape_kfold"] = round(r.mdape[d], 4)
        for d, f in r.fits.items():
            if f.floor > 0:
                err[cls][f"{d}_host_floor"] = _us(f.floor)
    for (kind, link), f in links.items():
        key = f"{kind}_{link}"
        samples[key] = f.n
        err[key] = {"mape_kfold": round(f.mape, 4), "n": f.n, "flagged": int(f.flagged.sum())}
    return samples, err


def flagged_lines(compute: dict, ops_names_limit: int = 8) -> list:
    """Per class/direction: how many samples were flagged as far off the fit, and from which ops."""
    lines = []
    for cls, (r, names) in compute.items():
        for d, m in r.flagged.items():
            if m.any():
                ops, cnt = np.unique(names[d][m], return_counts=True)
                top = ", ".join(f"{o} {c}" for o, c in sorted(zip(ops, cnt), key=lambda x: -x[1])[:ops_names_limit])
                lines.append(f"{cls} {d}: {int(m.sum())} samples > max(4 robust sigma, 25%) off the fit, "
                             f"excluded from the refit ({top})")
    return lines


def profile_text(header: dict, efficiency: dict | None, collectives: dict | None, provenance: dict) -> str:
    """The profile YAML (units as pint-readable strings)."""
    doc = dict(header)
    if efficiency:
        doc["efficiency"] = efficiency
    if collectives:
        doc["collectives"] = collectives
    prov = {"date": datetime.date.today().isoformat(), **provenance}
    doc["provenance"] = prov
    # the profile is checked against the loader's schema before it is written: a measured value outside its
    # physical bounds (e.g. a sustained-clock ratio of 0.03 from one noisy burst) is refused here, by name,
    # instead of being written into a profile that would slow every compute rate 30x
    from ...spec.hardware import check_profile
    check_profile(doc, f"calibrated profile {header.get('id', '')}")
    return "# generated by `roofline calibrate`; edit the inputs, not this file\n" + \
        yaml.safe_dump(doc, sort_keys=False, width=110, default_flow_style=None)


def samples_csv(ops=(), colls=(), compute: dict | None = None) -> str:
    """One row per sample: op/collective, class/kind, direction/link, inputs, measured time, kept."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["source", "class", "direction", "flops", "bytes", "dmin", "ranks", "t_s", "kept"])
    for o in ops:
        for i in range(len(o.t)):
            w.writerow([o.op, o.cls, o.direction, f"{o.flops[i]:.6g}", f"{o.bytes[i]:.6g}",
                        "" if o.dmin is None else f"{o.dmin[i]:.6g}", "", f"{o.t[i]:.6g}", int(o.keep[i])])
    for c in colls:
        for i in range(len(c.t)):
            w.writerow([c.name, c.kind, c.link, "", f"{c.size[i]:.6g}", "", c.p, f"{c.t[i]:.6g}", int(c.keep[i])])
    return buf.getvalue()


# ---- whole profiles ---------------------------------------------------------------------------
LICENSE_ETT = "MIT (see roofline/data/estimate-train-time/NOTICE.md)"
SLOW_INTER = "measured over a slow transport, not representative of a line-rate IB fabric"


def imported_profile(im, out_id: str, k: int = 5) -> tuple[str, str, dict]:
    """estimate-train-time import -> (profile YAML text, samples CSV text, report dict)."""
    from ...spec.hardware import load
    hw = load(im.base)
    peaks = Peaks(hw.peak("fp16"), hw.vector_peak(), hw.hbm_bandwidth, hw.matmul_ceiling, hw.sm_count)
    compute = fit_compute(im.ops, peaks, k=k)
    links = fit_links(im.colls, k=k)
    by_p = link_fits_by_p(im.colls, k=k)
    slow = any("slow transport" in d.what for d in im.defects)
    coll = collectives_section(links, {"inter": SLOW_INTER} if slow else None)
    samples, err = fit_error_section(compute, links)
    header = {"id": out_id, "name": f"{hw.name} ({im.cluster.capitalize()}), calibrated", "kind": "calibrated",
              "base": im.base, "gpus_per_node": im.gpus_per_node}
    prov = {
        "source": im.source, "license": LICENSE_ETT, "samples": samples, "fit_error": err,
        "transfer_error": transfer_errors(im.ops, compute, peaks),
        "busbw_by_group_size": {f"{kd}_{ln}_p{p}": {**_link_entry(f), "mape_kfold": round(f.mape, 4)}
                                for (kd, ln, p), f in by_p.items()},
        "defects": [str(d) for d in im.defects] + flagged_lines(compute),
        "assumptions": [
            "fp16 samples; x = F / dense fp16 peak (gemm, attn, bmm) or F / fp32 vector peak (other classes), y = B / "
            f"HBM bandwidth of the base profile {im.base}",
            "F, B, dmin per sample from roofline/model/formulas (calibrate/importers.py OP_BUILDERS), e.g. linear1 = qkv_proj",
            "each class is fitted on the op the predictor prices (profile.PRIMARY); other upstream ops of the class "
            "(unfused RoPE/RMSNorm, masked_fill, torch softmax, per-tensor Adam) are scored in transfer_error",
            "gemm: one size saturation dhalf per profile; flash attention: compute.attention_shape (head dim padded "
            "to 32, softmax d_soft, register tiles d_reg, off-grid head dims uneven, query-row traffic per key block "
            f"d_io, thread blocks in waves of the base profile's {hw.sm_count} SMs) per direction",
            "bmm (baddbmm, bmm): one roofline per batched-GEMM kernel (compute.bmm_time: write-out dhalf, L2-miss fraction "
            f"reread of the score operand's extra passes) per direction, eta bounded by max_matmul / peak = {hw.matmul_ceiling:.3f}",
            "ce: the span is max(host issue time, GPU time) (profile.HOST_BOUND); the fitted floor is reported in "
            "fit_error, not priced",
            "flash_atten samples are non-causal (upstream calls flash_attn_func without causal=True): fitted with causal=0",
            "upstream Adam is DeepSpeed FusedAdam on fp16 parameters: fitted with opt_bytes=4 (fp16 m and v)",
            "all-gather 'shape' is elements per rank; nccl-tests size = p x 2 x shape (matches all-reduce busbw)",
            "intra-node busbw from the largest in-node group; smaller groups in busbw_by_group_size",
            "inter-node fits use files with one GPU per node; mixed files (nodes>1, GPUs/node>1) are hierarchical",
            "fit: soft-L1 on log time, samples > max(4 robust sigma, 25%) off flagged and refit without; "
            f"{k}-fold held-out MAPE on kept samples",
        ],
    }
    missing = [c for c in CLASSES if c not in compute and any(o.cls == c for o in im.ops)]
    if missing:
        prov["assumptions"].append(f"{', '.join(missing)}: every sample excluded as a defect (see defects); priced "
                                   "with the assumed efficiencies of roofline/spec/hardware/defaults.yaml")
    text = profile_text(header, efficiency_section(compute), coll, prov)
    return text, samples_csv(im.ops, im.colls), {"compute": compute, "links": links, "by_p": by_p, "peaks": peaks}


def nccl_tests_profile(tables, out_id: str, base: str = "a100-sxm4-80gb", k: int = 5) -> tuple[str, str, dict]:
    """nccl-tests all_reduce_perf tables of one node -> a links-only profile (collectives.intra.ar).

    Refuses tables that cannot identify alpha and busbw (``fit.identifiable``: one row, one size, constant times).
    """
    if not tables:
        from ...base.errors import InputError
        raise InputError("nccl-tests import: no tables given")
    size = np.concatenate([t.size for t in tables])
    p = np.concatenate([np.full(len(t.size), t.p) for t in tables])
    tt = np.concatenate([t.time for t in tables])
    f = fit.fit_alpha_beta(size, p, tt, "ar", k=k)
    by_p = {}
    for t in tables:
        pred = fit.alpha_beta_time(t.size, t.p, "ar", f.alpha, f.busbw, f.call)
        by_p[f"p{t.p}"] = round(float(np.mean(np.abs(pred - t.time) / t.time)), 4)
    header = {"id": out_id, "name": f"A100 NVLink/NVSwitch all-reduce (nccl-tests), {len(tables)} tables",
              "kind": "calibrated-links", "base": base}
    prov = {"source": "nccl-tests all_reduce_perf tables: " + ", ".join(Path(t.path).name for t in tables),
            "samples": {"ar_intra": f.n}, "fit_error": {"ar_intra": {"mape_kfold": round(f.mape, 4), "n": f.n,
                                                                      "flagged": int(f.flagged.sum()),
                                                                      "mape_by_ranks": by_p}},
            "assumptions": ["out-of-place times; busbw = algbw x 2(p-1)/p (nccl-tests); one call time, alpha and busbw "
                            "for all group sizes (NVSwitch: every GPU has the full link bandwidth)",
                            "each sample weighs its share of log(size) in its table (fit.log_size_weights): the "
                            "tables step 1 MB at a time to 1 GB, and unweighted the bandwidth-bound sizes set the fit",
                            "all-gather and reduce-scatter take the all-reduce's busbw and call time (loader fallback)"]}
    coll = {"intra": {"ar": _link_entry(f)}}
    rows = "\n".join(f"nccl-tests p{t.p},ar,intra,,{s:.6g},,{t.p},{x:.6g},1" for t in tables for s, x in zip(t.size, t.time))
    return profile_text(header, None, coll, prov), "source,class,direction,flops,bytes,dmin,ranks,t_s,kept\n" + rows + "\n", \
        {"fit": f, "by_p": by_p}


LICENSE_SIMUMAX = "Apache-2.0 (MooreThreads/SimuMax; the efficiency numbers only)"


def simumax_profile(im, out_id: str, k: int = 5) -> tuple[str, str, dict]:
    """SimuMax system JSON import (importers.import_simumax) -> (profile YAML text, samples CSV text, report dict):
    the GEMM curve fitted on the dense matmul table, everything else from the base profile."""
    from ...spec.hardware import load
    hw = load(im.base)
    peaks = Peaks(hw.peak("bf16"), hw.vector_peak(), hw.hbm_bandwidth, hw.matmul_ceiling, hw.sm_count)
    compute = fit_compute(im.ops, peaks, k=k)
    samples, err = fit_error_section(compute, {})
    header = {"id": out_id, "name": f"{hw.name} ({im.cluster}), GEMMs calibrated from SimuMax", "kind": "calibrated",
              "base": im.base, "gpus_per_node": im.gpus_per_node}
    prov = {
        "source": im.source, "license": LICENSE_SIMUMAX, "samples": samples, "fit_error": err,
        "transfer_error": transfer_errors(im.ops, compute, peaks),
        "defects": [str(d) for d in im.defects] + flagged_lines(compute),
        "assumptions": [
            "time of a sample = 2 m k n / (tflops x factor), SimuMax's own pricing (simumax/core/config.py "
            "compute_op_time); x = F / the bf16 dense peak of the base profile " + im.base,
            "layouts TN = forward, NN = data gradient, NT = weight gradient: forward and backward curves; bytes = "
            "2 (m k + k n + m n), bf16 operands; a weight gradient with accumulate=True also reads and writes its main "
            "grad (the key's main_grad_dtype or out_dtype), as the predictor's wgrad_extra (compute.gemm)",
            "group_matmul (Transformer Engine GroupedLinear, ng experts of M tokens) is not fitted: its transfer_error "
            "scores the dense curve at the per-expert size (the predictor adds one launch per 4 experts, left out here)",
            "attention, memory-bound ops, collectives and host times come from the base profile; the base's "
            "sustained_clock applies on top (SimuMax's factors are per-kernel timings, not a sustained load)",
            f"fit: soft-L1 on log time, samples > max(4 robust sigma, 25%) off flagged and refit without; {k}-fold "
            "held-out MAPE on kept samples",
        ],
    }
    text = profile_text(header, efficiency_section(compute), None, prov)
    return text, samples_csv(im.ops), {"compute": compute, "links": {}, "peaks": peaks}
