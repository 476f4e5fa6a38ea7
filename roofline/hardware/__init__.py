"""Hardware profiles: datasheet peaks, node/network topology, calibrated efficiency curves.

A profile is a YAML file (``profiles/<id>.yaml`` or any path). Keys ``base: ID`` (inherit and
override), ``efficiency_from: ID`` (take another profile's fitted compute curves, e.g. the H100
using the GH200's Hopper curves) and ``collectives_from: ID`` (take fitted alpha-beta links)
compose profiles. Values carry units as strings ("2039 GB/s").
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from ..errors import InputError
from ..units import parse

PROFILES = Path(__file__).with_name("profiles")
CLASSES = ("gemm", "attn", "bmm", "softmax", "norm", "elem", "embed", "ce", "optim")
COLLECTIVES = ("ar", "ag", "rs", "a2a", "p2p")


@dataclass(frozen=True)
class Link:
    kind: str
    bandwidth: float        # B/s, one direction, per GPU
    latency: float          # s


@dataclass(frozen=True)
class Hardware:
    id: str
    name: str
    kind: str                                   # datasheet | calibrated | ...
    peak_flops: dict                            # dtype -> FLOP/s (None: unsupported)
    hbm_bandwidth: float                        # B/s
    hbm_capacity: float                         # B
    board_power: float | None                   # W
    gpus_per_node: int
    sm_count: int               # SMs (CUs): thread blocks of one wave; 1 where unknown (no wave quantisation)
    intra: Link
    inter: Link
    efficiency: dict                            # class -> {fwd|bwd -> (eta, mu, t0 s)}
    dhalf: float
    collectives: dict                           # (collective, link) -> (alpha s, busbw B/s)
    attn_shape: dict = field(default_factory=dict)   # fwd|bwd -> (d_soft, d_reg, uneven, d_io), compute.attention_shape
    bmm_shape: dict = field(default_factory=dict)    # fwd|bwd -> (dhalf, reread), compute.bmm_time
    host_fwd: float = 0.0                       # s, host time to issue one layer forward (eager PyTorch)
    host_bwd: float = 0.0                       # s, ... backward
    host_rc: float = 0.0                        # s, extra host time of a layer's full recomputation
    host_emb: float = 0.0                       # s, host time of the embedding (fwd + bwd) per micro-batch
    host_head: float = 0.0                      # s, ... final norm + LM head + cross-entropy per micro-batch
    host_mb: float = 0.0                        # s, framework per-micro-batch work outside the model
    sustained_clock: float = 1.0                # sustained / burst compute rate under a power-capped load
    matmul_ceiling: float = 1.0                 # max achievable matmul rate / peak (mamf-finder); caps gemm, bmm eta
    calibrated: tuple = ()                      # which parts are fitted: "compute", "intra", "inter"
    provenance: dict = field(default_factory=dict)
    sources: tuple = ()
    path: str = ""

    def peak(self, dtype: str) -> float:
        p = self.peak_flops.get(dtype)
        if not p:
            raise InputError(f"{self.id} has no {dtype} peak FLOP/s in its profile")
        return p

    def vector_peak(self) -> float:
        return self.peak_flops.get("fp32") or self.peak("bf16") * _defaults()["vector_fraction"]

    def with_network(self, gbps_per_gpu: float) -> "Hardware":
        """The same profile with another inter-node line rate (Gbit/s per GPU); busbw scales with it."""
        bw = gbps_per_gpu * 1e9 / 8
        eff = _defaults()["link_efficiency"]["inter"]
        coll = dict(self.collectives)
        for c in COLLECTIVES:
            alpha, busbw = coll[c, "inter"]
            coll[c, "inter"] = (alpha, bw * eff if "inter" not in self.calibrated else busbw * bw / self.inter.bandwidth)
        return replace(self, inter=replace(self.inter, bandwidth=bw), collectives=coll)


@functools.lru_cache(maxsize=1)
def _defaults() -> dict:
    return yaml.safe_load(Path(__file__).with_name("defaults.yaml").read_text())


def list_ids() -> list[str]:
    return sorted(p.stem for p in PROFILES.glob("*.yaml"))


def _find(ref: str) -> Path:
    p = Path(ref)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    q = PROFILES / f"{ref}.yaml"
    if q.exists():
        return q
    raise InputError(f"unknown GPU/hardware profile {ref!r}; known: {', '.join(list_ids())} (or a path to a .yaml)")


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def raw(ref: str, _seen=()) -> dict:
    """The profile's YAML after resolving ``base`` and ``efficiency_from`` (dict, units as text)."""
    path = _find(ref)
    if str(path) in _seen:
        raise InputError(f"profile {path}: circular 'base'/'efficiency_from' reference")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise InputError(f"profile {path}: malformed YAML" + (f" near line {line + 1}" if line is not None else "")) from None
    if not isinstance(data, dict):
        raise InputError(f"profile {path}: expected a mapping at top level")
    data.setdefault("_calibrated", [])
    if data.get("efficiency"):
        data["_calibrated"] = list(data["_calibrated"]) + (["compute"] if data.get("kind", "").startswith("calibrated") else [])
    for link in ("intra", "inter"):
        if (data.get("collectives") or {}).get(link):
            data["_calibrated"] = list(data["_calibrated"]) + [link]
    if "base" in data:
        base = raw(data["base"], _seen + (str(path),))
        cal = base.get("_calibrated", []) + data["_calibrated"]
        data = _merge(base, {k: v for k, v in data.items() if k != "base"})
        data["_calibrated"] = cal
    if "efficiency_from" in data:
        src = _own(data["efficiency_from"])
        data["efficiency"] = _merge(src.get("efficiency") or {}, data.get("efficiency") or {})
        if "compute" in src.get("_calibrated", []):
            data["_calibrated"] = list(data["_calibrated"]) + ["compute"]
        prov = dict(data.get("provenance") or {})
        prov["compute_curves_from"] = f"{data['efficiency_from']}: {(src.get('provenance') or {}).get('source', '')}"
        data["provenance"] = prov
    if "collectives_from" in data:
        src = _own(data["collectives_from"])
        data["collectives"] = _merge(src.get("collectives") or {}, data.get("collectives") or {})
        for link in ("intra", "inter"):
            if (src.get("collectives") or {}).get(link):
                data["_calibrated"] = list(data["_calibrated"]) + [link]
        prov = dict(data.get("provenance") or {})
        prov["collectives_from"] = f"{data['collectives_from']}: {(src.get('provenance') or {}).get('source', '')}"
        data["provenance"] = prov
    data["_path"] = str(path)
    return data


def _own(ref: str) -> dict:
    """A profile's own keys, without resolving its ``base`` (the fitted sections live there)."""
    path = _find(ref)
    try:
        d = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError:
        raise InputError(f"profile {path}: malformed YAML") from None
    d["_calibrated"] = (["compute"] if d.get("efficiency") and str(d.get("kind", "")).startswith("calibrated") else [])
    return d


def _get(d: dict, key: str, where: str):
    if not isinstance(d, dict) or key not in d or d[key] is None:
        raise InputError(f"profile {where}: missing field '{key}'")
    return d[key]


def _host_times(host: dict, where: str) -> dict:
    """Host issue time per layer: measured CPU time + kernels x CUDA launch cost."""
    launch = parse(host["launch"], "s", f"profile {where}: host.launch")
    get = lambda k: parse(host[k], "s", f"profile {where}: host.{k}")

    def n(k):
        try:
            v = int(host[k])
        except (TypeError, ValueError):
            v = -1
        if v < 0:
            raise InputError(f"profile {where}: host.{k} must be a non-negative integer, got {host[k]!r}")
        return v

    t = lambda k, kernels: get(k) + n(kernels) * launch
    return {"host_fwd": t("layer_fwd", "kernels_fwd"), "host_bwd": t("layer_bwd", "kernels_bwd"),
            "host_rc": t("recompute_extra", "kernels_recompute"),
            "host_emb": t("embed_fwd", "kernels_embed_fwd") + t("embed_bwd", "kernels_embed_bwd"),
            "host_head": t("head_fwd", "kernels_head_fwd") + t("head_bwd", "kernels_head_bwd"),
            "host_mb": t("microbatch", "kernels_microbatch")}


@functools.lru_cache(maxsize=64)
def load(ref: str) -> Hardware:
    """Load a profile by id (``a100-sxm4-80gb``) or path; raise InputError on bad content."""
    d = raw(ref)
    where = d["_path"]
    dflt = _defaults()
    peaks = {}
    for dt, v in (_get(d, "peak_flops", where) or {}).items():
        peaks[dt] = None if v is None else parse(v, "flop/s", f"profile {where}: peak_flops.{dt}")
    if not peaks.get("bf16") and not peaks.get("fp16"):
        raise InputError(f"profile {where}: peak_flops needs a bf16 or fp16 entry")
    peaks.setdefault("bf16", peaks.get("fp16"))
    peaks.setdefault("fp16", peaks.get("bf16"))
    links = _get(d, "links", where)
    lk = {}
    for name in ("intra", "inter"):
        L = _get(links, name, f"{where} links")
        lk[name] = Link(str(L.get("kind", name)), parse(_get(L, "bandwidth", f"{where} links.{name}"), "B/s",
                                                        f"profile {where}: links.{name}.bandwidth"),
                        parse(L.get("latency", "10 us"), "s", f"profile {where}: links.{name}.latency"))
    eff_raw = _merge(dflt["efficiency"], d.get("efficiency") or {})
    eff = {}
    for c in CLASSES:
        eff[c] = {}
        for direction in ("fwd", "bwd"):
            e = eff_raw[c][direction]
            eta, mu = float(e["eta"]), float(e["mu"])
            t0 = parse(e["t0"], "s", f"profile {where}: efficiency.{c}.{direction}.t0")
            if not (0 < eta <= 1 and 0 < mu <= 1) or t0 < 0:
                raise InputError(f"profile {where}: efficiency.{c}.{direction} needs eta, mu in (0, 1] and t0 >= 0")
            eff[c][direction] = (eta, mu, t0)
    attn_shape = {k: tuple(float(eff_raw["attn"][k][n]) for n in ("d_soft", "d_reg", "uneven", "d_io")) for k in ("fwd", "bwd")}
    if not all(v[0] >= 0 and v[1] > 0 and v[2] >= 0 and v[3] >= 0 for v in attn_shape.values()):
        raise InputError(f"profile {where}: efficiency.attn needs d_soft, uneven, d_io >= 0 and d_reg > 0")
    bmm_shape = {k: (float(eff_raw["bmm"][k]["dhalf"]), float(eff_raw["bmm"][k]["reread"])) for k in ("fwd", "bwd")}
    if not all(v[0] >= 0 and 0 <= v[1] <= 1 for v in bmm_shape.values()):
        raise InputError(f"profile {where}: efficiency.bmm needs dhalf >= 0 and reread in [0, 1]")
    coll = {}
    craw = d.get("collectives") or {}
    for link in ("intra", "inter"):
        for c in COLLECTIVES:
            e = (craw.get(link) or {}).get(c)
            if e is None and c in ("rs", "ag") and (craw.get(link) or {}).get("ar"):
                e = craw[link]["ar"]            # ring RS/AG run at the all-reduce's bus bandwidth
            if e:
                coll[c, link] = (parse(e["alpha"], "s", f"profile {where}: collectives.{link}.{c}.alpha"),
                                 parse(e["busbw"], "B/s", f"profile {where}: collectives.{link}.{c}.busbw"))
            else:
                coll[c, link] = (lk[link].latency, lk[link].bandwidth * dflt["link_efficiency"][link])
    try:
        gpn = int(_get(d, "gpus_per_node", where))
        sm_count = int(d.get("sm_count", 1))
    except (TypeError, ValueError):
        raise InputError(f"profile {where}: gpus_per_node and sm_count must be integers") from None
    if gpn < 1 or sm_count < 1:
        raise InputError(f"profile {where}: gpus_per_node and sm_count must be at least 1")
    power = d.get("board_power")
    host = _merge(dflt["host"], d.get("host") or {})
    ceiling = 1.0
    if d.get("max_matmul") is not None:
        ceiling = parse(d["max_matmul"], "flop/s", f"profile {where}: max_matmul") / peaks["bf16"]
        if not 0 < ceiling <= 1:
            raise InputError(f"profile {where}: max_matmul must be positive and at most the bf16 peak")
        # no fitted or assumed GEMM efficiency can beat the measured maximum achievable matmul rate
        for c in ("gemm", "bmm"):
            eff[c] = {k: (min(eta, ceiling), mu, t0) for k, (eta, mu, t0) in eff[c].items()}
    clock = d.get("sustained_clock", 1.0)
    try:
        clock = float(clock)
    except (TypeError, ValueError):
        clock = float("nan")
    if not 0 < clock <= 1:
        raise InputError(f"profile {where}: sustained_clock must be a number in (0, 1], got {d.get('sustained_clock')!r}")
    return Hardware(
        sustained_clock=clock, matmul_ceiling=ceiling,
        **_host_times(host, where),
        id=str(d.get("id", Path(where).stem)), name=str(d.get("name", d.get("id", ""))), kind=str(d.get("kind", "datasheet")),
        peak_flops=peaks,
        hbm_bandwidth=parse(_get(d, "hbm_bandwidth", where), "B/s", f"profile {where}: hbm_bandwidth"),
        hbm_capacity=parse(_get(d, "hbm_capacity", where), "B", f"profile {where}: hbm_capacity"),
        board_power=parse(power, "W", f"profile {where}: board_power") if power else None,
        gpus_per_node=gpn, sm_count=sm_count, intra=lk["intra"], inter=lk["inter"], efficiency=eff,
        dhalf=float(eff_raw.get("dhalf", dflt["efficiency"]["dhalf"])), attn_shape=attn_shape, bmm_shape=bmm_shape,
        collectives=coll,
        calibrated=tuple(sorted(set(d.get("_calibrated", [])))), provenance=dict(d.get("provenance") or {}),
        sources=tuple(d.get("sources") or ()), path=where,
    )
