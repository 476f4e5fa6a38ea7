"""Hardware profiles: datasheet peaks, node/network topology, calibrated efficiency curves.

A profile is a YAML file (``profiles/<id>.yaml`` or any path). Keys ``base: ID`` (inherit and
override), ``efficiency_from: ID`` (take another profile's fitted compute curves, e.g. the H100
using the GH200's Hopper curves), ``collectives_from: ID`` (take fitted alpha-beta links) and
``host_from: ID`` (take a measured ``host:`` block, e.g. the file ``calibrate host --out`` writes) and
``overlap_from: ID`` (take a measured ``overlap:`` block, the file ``calibrate overlap --out`` writes)
compose profiles. Each ID is a bundled profile id or a path to a .yaml; a relative path is read from
the folder of the profile that names it (not the working directory). Values carry units as strings
("2039 GB/s").
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...base import precision
from ...base import schema as S
from ...base.errors import InputError
from ...base.schema import yaml_load

PROFILES = Path(__file__).with_name("profiles")
CLASSES = ("gemm", "attn", "bmm", "softmax", "norm", "elem", "embed", "ce", "optim")
COLLECTIVES = ("ar", "ag", "rs", "a2a", "p2p")


# clock_spread above this is not a spread of one SKU's clocks but a broken GPU (Sinha et al. SC22: 22 % the largest
# average variation of any cluster and application, whole range; one standard deviation is a fraction of that)
CLOCK_SPREAD_MAX = 0.2


def _spread(v, where: str) -> float:
    """clock_spread: a number in [0, CLOCK_SPREAD_MAX]."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= CLOCK_SPREAD_MAX
    if not ok:
        raise InputError(f"{where}: clock_spread must be a number in [0, {CLOCK_SPREAD_MAX}] (the relative standard "
                         f"deviation of the compute rate across a cluster's GPUs), got {v!r}")
    return float(v)


@dataclass(frozen=True)
class Link:
    kind: str
    bandwidth: float        # B/s, one direction, per GPU
    latency: float          # s

    def __post_init__(self):
        S.positive(self.bandwidth, f"link {self.kind}: bandwidth (B/s)")
        S.number(self.latency, f"link {self.kind}: latency (s)", low=0.0)


# A sustained/burst compute-rate ratio below this is not a clock the GPU runs at but a measurement artefact
# (one noisy CPU burst once wrote 0.03, issue 22). Datasheet base/boost clock ratios of data-center GPUs, the
# clock a power-capped GPU is guaranteed to hold, are ~0.3 and above (NVIDIA L40 735/2490 MHz ~0.30, L40S
# 1110/2520 MHz 0.44, H100 SXM 1590/1980 MHz 0.80, A100 SXM 1095/1410 MHz 0.78, vendor datasheets).
SUSTAINED_CLOCK_MIN = 0.3


def _clock(v, where: str) -> float:
    """The sustained-clock ratio: a number in [SUSTAINED_CLOCK_MIN, 1]."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and SUSTAINED_CLOCK_MIN <= v <= 1
    if not ok:
        raise InputError(f"{where}: sustained_clock must be a number in (0, 1] and at least {SUSTAINED_CLOCK_MIN} "
                         f"(sustained / burst compute rate; lower is not a clock a GPU holds), got {v!r}")
    return float(v)


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
    host_moe_fwd: float = 0.0                   # s, extra host time of an MoE layer's forward (router, dispatcher, permute)
    host_moe_bwd: float = 0.0                   # s, ... backward
    host_launch: float = 0.0                    # s, host cost of one CUDA kernel launch (host.launch): per-expert kernels
    host_sync: float = 0.0                      # s, GPU idle after an eager MoE forward's host sync (host.moe_sync)
    host_slowdown: float = 1.0                  # the host CPU's issue time over defaults.yaml's x86 host (Grace: 2.46-2.75)
    sustained_clock: float = 1.0                # sustained / burst compute rate under a power-capped load
    clock_spread: float = 0.0                   # relative std of the compute rate across the GPUs of a cluster
    matmul_ceiling: float = 1.0                 # max achievable matmul rate / peak (mamf-finder); caps gemm, bmm eta
    # maximum achievable FP4 (NVFP4) matmul rate, FLOP/s, where a GPU's FP4 GEMMs do not reach the 16-bit GEMMs'
    # fraction of its FP4 peak (profile key max_matmul_fp4; None: they do); lp_rate reads it
    matmul_fp4: float | None = None
    # FP8 GEMMs take any operand layout (profile key fp8_non_tn: Blackwell datacenter parts, compute capability 10.x;
    # Transformer Engine is_non_tn_fp8_gemm_supported), so per-tensor FP8 casts write no transposed copy; False: TN
    # only (Hopper, Ada)
    fp8_non_tn: bool = False
    # tensor cores that read MX block-scaled operands (E8M0 scale per 32 elements: MXFP8; profile key mx_formats:
    # NVIDIA Blackwell, compute capability 10.x, "MXFP8 and NVFP4 require Blackwell", Transformer Engine
    # docs/examples/gemm_profiling; AMD CDNA 4, MI355X's MXFP8/MXFP4). False: an MXFP8 plan is refused
    mx_formats: bool = False
    # GPU <-> host memory copies (PCIe, NVLink-C2C), per direction per GPU: what CPU activation offload moves at;
    # None where the profile does not state it (a plan that offloads is then refused)
    host_link: Link | None = None
    # SMs each kind of communication kernel holds while compute runs beside it (OVERLAP_KEYS; defaults.yaml overlap
    # for the kinds a profile does not state)
    overlap: dict = field(default_factory=lambda: dict(overlap_defaults()))
    # attention kernel -> ((head dim, speed over FlashAttention-2), ...) on this GPU's architecture (attention_speed:
    # in the profile; config.ATTENTION_KERNEL names which attention kinds read it); none: 1 (FlashAttention-2's speed)
    attention_speed: dict = field(default_factory=dict)
    # FP8 attention kernel ("fp8": per-tensor scaled, "mxfp8": MX block-scaled) -> (forward, backward) speed over the
    # same kernel in BF16 at the same shape, and whether its backward skips a sliding window's masked blocks
    # (fp8_attention_speed: in the profile, measured by NVIDIA cudnn-frontend's SDPA benchmark where one exists); a
    # kernel not listed takes the FlashAttention-3 rule (fp8_attention_factors)
    fp8_attention_speed: dict = field(default_factory=dict)
    # which parts are measured rather than assumed, for the reader: "compute", "host", "overlap", and per link either
    # the link ("intra": every collective fitted) or the link with the collectives fitted on it ("intra (a2a)")
    calibrated: tuple = ()
    # (collective, link) -> s: the fixed time of one collective call whatever its group size (comm.py ``flat``), where
    # a fit of nccl-tests tables over several group sizes found one; 0 for the others (their latency is per step)
    collective_calls: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    sources: tuple = ()
    path: str = ""

    def __post_init__(self):
        """The same ranges as the profile loader, for Hardware built or replaced in Python
        (``dataclasses.replace(hw, gpus_per_node=0)`` is an InputError, not a division by zero later)."""
        w = f"hardware {self.id}"
        object.__setattr__(self, "gpus_per_node", S.number(self.gpus_per_node, f"{w}: gpus_per_node", int, low=1))
        object.__setattr__(self, "sm_count", S.number(self.sm_count, f"{w}: sm_count", int, low=1))
        for name in ("hbm_bandwidth", "hbm_capacity"):
            S.positive(getattr(self, name), f"{w}: {name}")
        if self.board_power is not None:
            S.positive(self.board_power, f"{w}: board_power (W)")
        for dt, v in self.peak_flops.items():
            if v is not None:
                S.positive(v, f"{w}: peak_flops.{dt} (FLOP/s)")
        _clock(self.sustained_clock, w)
        _spread(self.clock_spread, w)
        S.fraction(self.matmul_ceiling, f"{w}: matmul_ceiling")
        if self.matmul_fp4 is not None:
            S.positive(self.matmul_fp4, f"{w}: max_matmul_fp4 (FLOP/s)")
        for k in ("host_fwd", "host_bwd", "host_rc", "host_emb", "host_head", "host_mb", "host_moe_fwd", "host_moe_bwd",
                  "host_launch", "host_sync"):
            S.number(getattr(self, k), f"{w}: {k} (s)", low=0.0)
        for (c, link), (alpha, bw) in self.collectives.items():
            S.number(alpha, f"{w}: collectives.{link}.{c}.alpha (s)", low=0.0)
            S.positive(bw, f"{w}: collectives.{link}.{c}.busbw (B/s)")
        for (c, link), call in self.collective_calls.items():
            S.number(call, f"{w}: collectives.{link}.{c}.call (s)", low=0.0)
        S.check_keys(self.overlap, OVERLAP_KEYS, f"{w}: overlap")
        for k, n in self.overlap.items():
            S.number(n, f"{w}: overlap.{k} (SMs)", low=0.0)
            if self.sm_count > 1 and n >= self.sm_count:
                raise InputError(f"{w}: overlap.{k} must be below sm_count {self.sm_count} (a communication kernel "
                                 f"that held every SM would stop the compute beside it), got {n}")

    def attention_factor(self, kernel: str | None, head_dim: float) -> float:
        """Throughput of attention ``kernel`` over FlashAttention-2 (whose curves the profile's attention efficiency
        fits) at ``head_dim``: the profile's attention_speed points, linear in log2(head dim) between them and flat
        beyond; 1 for no kernel or a kernel the profile does not list."""
        pts = self.attention_speed.get(kernel) if kernel else None
        if not pts:
            return 1.0
        x = math.log2(max(float(head_dim), 1.0))
        (h0, v0), (h1, v1) = pts[0], pts[-1]
        if x <= math.log2(h0):
            return float(v0)
        for (ha, va), (hb, vb) in zip(pts, pts[1:]):
            xa, xb = math.log2(ha), math.log2(hb)
            if x <= xb:
                return float(va + (vb - va) * (x - xa) / (xb - xa))
        return float(v1)

    def fp8_attention_factors(self, dtype: str) -> tuple[float, float, bool]:
        """(forward speed, backward speed, backward skips a window's masked blocks) of FP8 attention over 16-bit
        attention on this GPU under precision ``dtype`` (the formula inputs fp8_attn_fwd, fp8_attn_bwd and
        fp8_window_bwd, read only where the plan runs attention in FP8). The recipe picks the kernel
        (:func:`fp8_attention_kernel`); the profile's measured fp8_attention_speed for it where stated, else
        FlashAttention-3's rule: the FP8 peak at 0.81 of 16-bit attention's share of the 16-bit peak
        (FP8_ATTENTION_EFF), both directions, the window honoured; 1 on a GPU without an FP8 peak (where FP8 attention
        has no kernel)."""
        got = self.fp8_attention_speed.get(fp8_attention_kernel(dtype))
        if got:
            return got
        fp8 = self.peak_flops.get("fp8")
        if not fp8 or not precision.low_precision(dtype):
            return (1.0, 1.0, True)
        r = FP8_ATTENTION_EFF * fp8 / self.peak_16bit(dtype)
        return (r, r, True)

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s of a dtype or of a training precision's low-precision GEMMs ('mxfp8' -> fp8)."""
        key = precision.peak_key(dtype)
        if dtype == "mxfp8" and not self.mx_formats:
            raise InputError(f"{self.id} has no MX block-scaled tensor cores: mxfp8 needs NVIDIA Blackwell or AMD CDNA 4 "
                             "(profile key mx_formats); Hopper-class GPUs run fp8-cs, fp8 or fp8-block")
        p = self.peak_flops.get(key)
        if not p:
            raise InputError(f"{self.id} has no {key} peak FLOP/s in its profile" + (f" (needed by {dtype})" if key != dtype else ""))
        return p

    def lp_rate(self, dtype: str) -> float:
        """Rate of a precision's low-precision GEMM kernels relative to a 16-bit GEMM at the same fraction of its own
        peak (formula input lp_rate): the recipe's measured kernel rate (precision.py gemm_rate) and, for FP4 on a
        profile with max_matmul_fp4, the share of the FP4 peak its GEMMs reach where a 16-bit GEMM reaches max_matmul
        (the curves' ceiling): min(1, max_matmul_fp4 / (ceiling x fp4 peak)). 1 for a 16-bit dtype."""
        if not precision.low_precision(dtype):
            return 1.0
        p = precision.get(dtype)
        # a recipe whose kernels differ where FP8 GEMMs take any layout (FP8 blockwise runs as MXFP8 on Blackwell)
        rate = p.gemm_rate_non_tn if (self.fp8_non_tn and p.gemm_rate_non_tn is not None) else p.gemm_rate
        if precision.peak_key(dtype) == "fp4" and self.matmul_fp4:
            rate *= min(1.0, self.matmul_fp4 / (self.matmul_ceiling * self.peak(dtype)))
        return rate

    def peak_16bit(self, dtype: str) -> float:
        """Peak FLOP/s of the GEMMs a precision keeps in 16 bits (attention core, LM head, router: precision.py)."""
        return self.peak(precision.high_key(dtype))

    def vector_peak(self) -> float:
        return self.peak_flops.get("fp32") or self.peak("bf16") * _defaults()["vector_fraction"]

    def with_network(self, gbps_per_gpu: float) -> "Hardware":
        """The same profile with another inter-node line rate (Gbit/s per GPU); busbw scales with it."""
        gbps = S.positive(gbps_per_gpu, "network line rate (Gbit/s per GPU)")
        bw = gbps * 1e9 / 8
        coll = dict(self.collectives)
        for c in COLLECTIVES:       # fitted or the prior (line rate x link efficiency), bus bandwidth scales with the line
            alpha, busbw = coll[c, "inter"]
            coll[c, "inter"] = (alpha, busbw * bw / self.inter.bandwidth)
        return replace(self, inter=replace(self.inter, bandwidth=bw), collectives=coll)


@functools.lru_cache(maxsize=1)
def _defaults() -> dict:
    return yaml_load(Path(__file__).with_name("defaults.yaml").read_text())


@functools.lru_cache(maxsize=1)
def overlap_defaults() -> dict:
    """SMs per kind of communication kernel when a profile states none (defaults.yaml overlap, sourced there)."""
    return {k: float(v) for k, v in _defaults()["overlap"].items()}


def list_ids() -> list[str]:
    return sorted(p.stem for p in PROFILES.glob("*.yaml"))


@functools.lru_cache(maxsize=1)
def _node_variants() -> dict:
    """(base id, GPUs per node) -> the bundled datasheet profile that puts that GPU in a node of that size: a profile
    whose ``base`` is the GPU's and whose ``gpus_per_node`` differs from it (gh200-quad: the GH200 superchip four to a
    NVLink-connected node, where gh200 is one to a node). Calibrated profiles are one machine's, not the node type's."""
    out = {}
    for pid in list_ids():
        d = yaml_load((PROFILES / f"{pid}.yaml").read_text())
        if d.get("base") and d.get("gpus_per_node") and d.get("kind") == "datasheet":
            out.setdefault((str(d["base"]), int(d["gpus_per_node"])), pid)
    return out


def node_variant(gpu_id: str, gpus_per_node) -> str | None:
    """The bundled profile of ``gpu_id``'s GPU in a node of ``gpus_per_node`` GPUs where the profile's own node differs
    and such a variant exists (its links inside and out of the node are that node's), else None.

    >>> node_variant("gh200", 4), node_variant("gh200", 1), node_variant("h100-sxm", 4)
    ('gh200-quad', None, None)
    """
    variant = _node_variants().get((gpu_id, int(gpus_per_node))) if gpus_per_node else None
    return variant if variant and load(gpu_id).gpus_per_node != int(gpus_per_node) else None


# The names the driver gives a device (nvidia-smi --query-gpu=name, torch.cuda.get_device_name(), rocm-smi), once
# lower-cased with the vendor word dropped and spaces made dashes (_spelling), where they are not already a profile id.
# nvidia-smi prints "NVIDIA A100-SXM4-80GB" (an id once spelled so), "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3"
# (the SXM5 part; the PCIe part prints "NVIDIA H100 PCIe"), "NVIDIA GH200 480GB", "Tesla V100-SXM2-32GB"; ROCm "AMD
# Instinct MI250X" / "MI300X".
DEVICE_NAMES = {"a100-80gb-pcie": "a100-pcie-80gb", "h100-80gb-hbm3": "h100-sxm", "h100-sxm5-80gb": "h100-sxm",
                "h100-sxm5": "h100-sxm", "h800-80gb-hbm3": "h800", "gh200-480gb": "gh200", "gh200-96gb": "gh200",
                "h200-141gb": "h200"}


def _spelling(ref: str) -> str:
    """A device name as a profile id would spell it: lower case, no vendor word, dashes for spaces/underscores."""
    import re

    t = re.sub(r"[\s_]+", "-", ref.strip().lower())
    return re.sub(r"^((nvidia|amd|tesla|instinct)-)+", "", t)


def _find(ref: str, by: str = "", folder: Path | None = None) -> Path:
    """The file of a profile id or path; ``by`` names the file and key that referred to it, ``folder`` is that
    file's folder: a relative path named inside a profile is read from there (as an include is), whatever the
    working directory. A device name as the driver prints it ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3") finds
    its profile (DEVICE_NAMES); an ambiguous short name ("H100") is an error naming the profiles it could be."""
    p = Path(ref)
    if folder is not None and not p.is_absolute():
        p = folder / p
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    q = PROFILES / f"{ref}.yaml"
    if q.exists():
        return q
    t = _spelling(ref)
    q = PROFILES / f"{DEVICE_NAMES.get(t, t)}.yaml"
    if t and q.exists():
        return q
    # ids that extend the name at a separator ("h100" -> h100-sxm, h100-pcie): not a longer part number ("h20" is not
    # h200, nor "mi250" mi250x)
    near = [i for i in list_ids() if t and i.startswith(t) and (len(i) == len(t) or i[len(t)] in "-_")]
    if near:
        raise InputError((f"{by}: " if by else "") + f"GPU {ref!r} could be any of {', '.join(near)}: name one "
                         "(the SXM part, the memory size and the node differ)")
    raise InputError((f"{by}: " if by else "") + f"unknown GPU/hardware profile {ref!r}; known: {', '.join(list_ids())} "
                     "(or a path to a .yaml)")


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


# ---- the profile schema: every key a file may hold, its type, unit and range ---------------------
REFS = ("base", "efficiency_from", "collectives_from", "host_from", "overlap_from")  # keys that name another profile
TOP_KEYS = ("id", "name", "kind", "vendor", *REFS, "peak_flops", "max_matmul", "max_matmul_fp4", "fp8_non_tn", "mx_formats",
            "hbm_bandwidth", "hbm_capacity", "board_power", "sm_count", "gpus_per_node", "links", "efficiency",
            "collectives", "host", "host_slowdown", "overlap", "sustained_clock", "clock_spread", "attention_speed", "fp8_attention_speed", "sources",
            "provenance")
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8")
QUANTITIES = {"max_matmul": "flop/s", "max_matmul_fp4": "flop/s", "hbm_bandwidth": "B/s", "hbm_capacity": "B", "board_power": "W"}
LINK_KEYS = ("kind", "bandwidth", "latency")
ROOFLINE_KEYS = ("eta", "mu", "t0")
SHAPE_KEYS = {"attn": ("d_soft", "d_reg", "uneven", "d_io"), "bmm": ("dhalf", "reread")}
HOST_TIMES = ("layer_fwd", "layer_bwd", "recompute_extra", "embed_fwd", "embed_bwd", "head_fwd", "head_bwd",
              "microbatch", "launch", "moe_fwd", "moe_bwd", "moe_sync")
# SMs each kind of communication kernel holds beside compute (defaults.yaml overlap, sourced there; formulas/comm.py
# interference); a profile's overlap: block, or the one calibrate overlap measures, replaces the defaults it names
OVERLAP_KEYS = ("nccl_sms", "nccl_sms_inter", "ub_sms", "ub_ring_sms")
HOST_COUNTS = ("kernels_fwd", "kernels_bwd", "kernels_recompute", "kernels_embed_fwd", "kernels_embed_bwd",
               "kernels_head_fwd", "kernels_head_bwd", "kernels_microbatch", "kernels_moe_fwd", "kernels_moe_bwd")


def _shape_value(cls: str, key: str, v, where: str) -> float:
    """Shape constants: d_reg may be .inf (no register-tile term, defaults.yaml); reread in [0, 1]; others >= 0."""
    if key == "d_reg":
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == float("inf"):
            return v
        return S.positive(v, where)
    return S.number(v, where, low=0.0, high=1.0 if key == "reread" else None)


ATTENTION_KERNELS = ("cudnn", "flash3")      # kernels a profile's attention_speed may list (config.ATTENTION_KERNEL)
# FP8 attention's rate against the FP8 peak, relative to 16-bit attention's against the 16-bit peak, where a profile
# measures no FP8 attention kernel (Hardware.fp8_attention_factors): FlashAttention-3 on H100 (Shah et al. 2024,
# "FlashAttention-3", arXiv 2407.08608, abstract and sec. 4.1) reaches 740 TFLOP/s in FP16, 75 % of 989, and close to
# 1.2 PFLOP/s in FP8, 61 % of 1979: 0.606 / 0.748 = 0.81. One factor for forward and backward (ASSUMED: FlashAttention-3's
# FP8 backward is not published).
FP8_ATTENTION_EFF = 0.81
# cuDNN's FP8 attention kernels (NVIDIA cudnn-frontend benchmark/sdpa_benchmark_training data_type fp8 / mxfp8): the
# per-tensor scaled one (Transformer Engine's DelayedScaling and Float8CurrentScaling recipes) and, on Blackwell, the MX
# block-scaled one (MXFP8BlockScaling)
FP8_ATTENTION_KERNELS = ("fp8", "mxfp8")


def fp8_attention_kernel(dtype: str) -> str:
    """The FP8 attention kernel a training precision runs: MX block-scaled under mxfp8, the per-tensor scaled kernel
    under every other low-precision recipe (fp8, fp8-cs; fp8-block, fp8-row and nvfp4 ASSUMED: cuDNN has no blockwise or
    FP4 attention kernel, so their FP8 attention is per-tensor scaled)."""
    return "mxfp8" if dtype == "mxfp8" else "fp8"


def _per_kernel(v, where: str, key: str, kernels: tuple, what: str):
    """(kernel, its place for messages, its value) of a profile's per-kernel mapping ``key``, the kernels checked."""
    m = S.mapping(v, f"{where}: {key}", what)
    S.check_keys(m, kernels, f"{where}: {key}")
    return [(kernel, f"{where}: {key}.{kernel}", inner) for kernel, inner in m.items()]


def _fp8_attention_speed(v, where: str) -> dict:
    """fp8_attention_speed: {fp8|mxfp8: {fwd: speed, bwd: speed, window_bwd: bool}} -> {kernel: (fwd, bwd,
    window_bwd)}: the FP8 kernel's speed over the same kernel in BF16 at the same shape (positive numbers), and whether
    its backward skips the key blocks outside a sliding window (default true, as 16-bit attention does)."""
    out = {}
    for kernel, w, dirs in _per_kernel(v, where, "fp8_attention_speed", FP8_ATTENTION_KERNELS,
                                       "a mapping kernel (fp8, mxfp8) -> {fwd: speed, bwd: speed}"):
        dirs = S.mapping(dirs, w, "a mapping {fwd: speed, bwd: speed, window_bwd: true|false} over BF16 attention")
        S.check_keys(dirs, ("fwd", "bwd", "window_bwd"), w)
        for d in ("fwd", "bwd"):
            if d not in dirs:
                raise InputError(f"{w} needs fwd and bwd (speed over BF16 attention), got {sorted(dirs)}")
        out[kernel] = (*(S.positive(dirs[d], f"{w}.{d}") for d in ("fwd", "bwd")),
                       _flag(dirs.get("window_bwd", True), f"{w}.window_bwd"))
    return out


def _attention_speed(v, where: str) -> dict:
    """attention_speed: {kernel: {head_dim: speed}} -> {kernel: ((head_dim, speed), ...)} sorted by head dim; each
    speed a positive number (throughput over FlashAttention-2), each head dim a positive integer."""
    out = {}
    for kernel, w, pts in _per_kernel(v, where, "attention_speed", ATTENTION_KERNELS,
                                      "a mapping kernel -> {head_dim: speed over FlashAttention-2}"):
        pts = S.mapping(pts, w, "a mapping head_dim -> speed over FlashAttention-2")
        if not pts:
            raise InputError(f"{w} must list at least one head_dim: speed pair, got {{}}")
        out[kernel] = tuple(sorted((S.number(h, f"{w} head_dim", int, low=1), S.positive(x, f"{w}.{h}"))
                                   for h, x in pts.items()))
    return out


def check_profile(d: dict, where: str) -> None:
    """Types, units, ranges and allowed keys of one profile file's own content (every key optional here;
    :func:`load` requires the ones a usable profile needs after ``base`` is resolved)."""
    S.check_keys(d, TOP_KEYS, where)
    for k in ("id", "name", "kind", "vendor"):
        if k in d and (d[k] is None or isinstance(d[k], (dict, list))):
            raise InputError(f"{where}: {k} must be a string, got {d[k]!r}")
    for k in REFS:
        if k in d:
            S.text(d[k], f"{where}: {k}")
    if d.get("peak_flops") is not None:
        peaks = S.mapping(d["peak_flops"], f"{where}: peak_flops", "a mapping dtype -> FLOP/s")
        S.check_keys(peaks, DTYPES, f"{where}: peak_flops")
        for dt, v in peaks.items():
            if v is not None:
                S.quantity(v, "flop/s", f"{where}: peak_flops.{dt}")
    for k, unit in QUANTITIES.items():
        if d.get(k) is not None:
            S.quantity(d[k], unit, f"{where}: {k}")
    for k in ("gpus_per_node", "sm_count"):
        if k in d:
            S.number(d[k], f"{where}: {k}", int, low=1)
    if "sustained_clock" in d:
        _clock(d["sustained_clock"], where)
    if "host_slowdown" in d:
        S.number(d["host_slowdown"], f"{where}: host_slowdown", low=0.0)
    if "clock_spread" in d:
        _spread(d["clock_spread"], where)
    if d.get("attention_speed") is not None:
        _attention_speed(d["attention_speed"], where)
    if d.get("fp8_attention_speed") is not None:
        _fp8_attention_speed(d["fp8_attention_speed"], where)
    if "links" in d:
        links = S.mapping(d["links"], f"{where}: links", "a mapping with intra and inter")
        S.check_keys(links, ("intra", "inter", "host"), f"{where}: links")
        for name, L in links.items():
            w = f"{where}: links.{name}"
            S.mapping(L, w, "a mapping with kind, bandwidth, latency")
            S.check_keys(L, LINK_KEYS, w)
            if "bandwidth" in L:
                S.quantity(L["bandwidth"], "B/s", f"{w}.bandwidth")
            if "latency" in L:
                S.quantity(L["latency"], "s", f"{w}.latency", low=0.0, low_open=False)
            if "kind" in L and not isinstance(L["kind"], str):
                raise InputError(f"{w}.kind: expected a string, got {L['kind']!r}")
    if d.get("efficiency") is not None:
        eff = S.mapping(d["efficiency"], f"{where}: efficiency", "a mapping op class -> {fwd, bwd}")
        S.check_keys(eff, ("dhalf",) + CLASSES, f"{where}: efficiency")
        for c, e in eff.items():
            w = f"{where}: efficiency.{c}"
            if c == "dhalf":
                S.number(e, w, low=0.0)
                continue
            S.mapping(e, w, "a mapping with fwd and/or bwd")
            S.check_keys(e, ("fwd", "bwd"), w)
            for direction, r in e.items():
                wd = f"{w}.{direction}"
                S.mapping(r, wd, "a mapping with eta, mu, t0")
                S.check_keys(r, ROOFLINE_KEYS + SHAPE_KEYS.get(c, ()), wd)
                for k in ("eta", "mu"):
                    if k in r:
                        S.fraction(r[k], f"{wd}.{k}")
                if "t0" in r:
                    S.quantity(r["t0"], "s", f"{wd}.t0", low=0.0, low_open=False)
                for k in SHAPE_KEYS.get(c, ()):
                    if k in r:
                        _shape_value(c, k, r[k], f"{wd}.{k}")
    if d.get("collectives") is not None:
        coll = S.mapping(d["collectives"], f"{where}: collectives", "a mapping with intra and/or inter")
        S.check_keys(coll, ("intra", "inter"), f"{where}: collectives")
        for link, cs in coll.items():
            w = f"{where}: collectives.{link}"
            S.mapping(cs, w, "a mapping collective -> {alpha, busbw}")
            S.check_keys(cs, COLLECTIVES + ("note",), w)
            for c, e in cs.items():
                if c == "note":
                    continue
                S.mapping(e, f"{w}.{c}", "a mapping with alpha and busbw")
                S.check_keys(e, ("alpha", "busbw", "call"), f"{w}.{c}")
                for k in ("alpha", "busbw"):
                    if k not in e:
                        raise InputError(f"{w}.{c}: missing '{k}' (a collective needs alpha and busbw)")
                S.quantity(e["alpha"], "s", f"{w}.{c}.alpha", low=0.0, low_open=False)
                S.quantity(e["busbw"], "B/s", f"{w}.{c}.busbw")
                if "call" in e:
                    S.quantity(e["call"], "s", f"{w}.{c}.call", low=0.0, low_open=False)
    if d.get("host") is not None:
        host = S.mapping(d["host"], f"{where}: host", "a mapping of host issue times")
        S.check_keys(host, HOST_TIMES + HOST_COUNTS, f"{where}: host")
        for k, v in host.items():
            if k in HOST_TIMES:
                S.quantity(v, "s", f"{where}: host.{k}", low=0.0, low_open=False)
            else:
                S.number(v, f"{where}: host.{k}", int, low=0)
    if d.get("overlap") is not None:
        ov = S.mapping(d["overlap"], f"{where}: overlap", "a mapping kernel kind -> SMs it holds")
        S.check_keys(ov, OVERLAP_KEYS, f"{where}: overlap")
        for k, v in ov.items():
            S.number(v, f"{where}: overlap.{k} (SMs)", low=0.0)
    if d.get("sources") is not None and not isinstance(d["sources"], (list, str)):
        raise InputError(f"{where}: sources must be a list of strings, got {d['sources']!r}")
    if d.get("provenance") is not None:
        S.mapping(d["provenance"], f"{where}: provenance")


def _read(path: Path) -> dict:
    """One profile file's own content, checked against the schema (a copy; never cached)."""
    where = f"profile {path}"
    data = S.load_yaml(path, "profile")
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping at top level, got {type(data).__name__}")
    check_profile(data, where)
    return data


def raw(ref: str, _seen=(), by: str = "", folder: Path | None = None) -> dict:
    """The profile's YAML after resolving ``base``, ``efficiency_from``, ``collectives_from``, ``host_from`` and
    ``overlap_from`` (dict, units as text)."""
    path = _find(ref, by, folder)
    if str(path.resolve()) in _seen:
        raise InputError(f"profile {path}: circular 'base'/'efficiency_from' reference")
    data = _read(path)
    data.setdefault("_calibrated", [])
    if data.get("efficiency"):
        data["_calibrated"] = list(data["_calibrated"]) + (["compute"] if str(data.get("kind", "")).startswith("calibrated") else [])
    for link in ("intra", "inter"):
        if (data.get("collectives") or {}).get(link):
            data["_calibrated"] = list(data["_calibrated"]) + [link]
    own_fit = bool(data.get("efficiency")) and "efficiency_from" not in data and \
        str(data.get("kind", "")).startswith("calibrated")
    if "base" in data:
        base = raw(data["base"], _seen + (str(path.resolve()),), by=f"profile {path}: base", folder=path.parent)
        cal = base.get("_calibrated", []) + data["_calibrated"]
        data = _merge(base, {k: v for k, v in data.items() if k != "base"})
        data["_calibrated"] = cal
        if own_fit and "efficiency_from" in data:
            # a calibrated profile on a datasheet base that borrows curves (gh200-vista on gh200): its own fit is its
            # compute curves; only the classes and directions it did not fit fall back to the base's, already merged
            data.pop("efficiency_from")
            prov = dict(data.get("provenance") or {})
            prov.pop("compute_curves_from", None)
            data["provenance"] = prov
    if "efficiency_from" in data:
        src, eff, calibrated = _efficiency_chain(data["efficiency_from"], f"profile {path}: efficiency_from", path.parent)
        data["efficiency"] = _merge(eff, data.get("efficiency") or {})
        if calibrated:
            data["_calibrated"] = list(data["_calibrated"]) + ["compute"]
        prov = dict(data.get("provenance") or {})
        prov["compute_curves_from"] = f"{data['efficiency_from']}: {(src.get('provenance') or {}).get('source', '')}"
        data["provenance"] = prov
    if "collectives_from" in data:
        src = _own(data["collectives_from"], f"profile {path}: collectives_from", path.parent)
        data["collectives"] = _merge(src.get("collectives") or {}, data.get("collectives") or {})
        for link in ("intra", "inter"):
            if (src.get("collectives") or {}).get(link):
                data["_calibrated"] = list(data["_calibrated"]) + [link]
        prov = dict(data.get("provenance") or {})
        prov["collectives_from"] = f"{data['collectives_from']}: {(src.get('provenance') or {}).get('source', '')}"
        data["provenance"] = prov
    for ref, block in (("host_from", "host"), ("overlap_from", "overlap")):
        if ref in data:         # take another file's measured block (calibrate host / overlap --out)
            src = _own(data[ref], f"profile {path}: {ref}", path.parent)
            if not src.get(block):
                raise InputError(f"profile {path}: {ref} {data[ref]!r} has no {block}: block")
            data[block] = _merge(src[block], data.get(block) or {})
            prov = dict(data.get("provenance") or {})
            prov[ref] = f"{data[ref]}: {(src.get('provenance') or {}).get('source', '')}"
            data["provenance"] = prov
    data["_path"] = str(path)
    return data


def _efficiency_chain(ref: str, by: str, folder: Path, _seen: tuple = ()) -> tuple[dict, dict, bool]:
    """(the named profile's own keys, its compute curves, whether they are fitted) following its own
    ``efficiency_from`` (a datasheet profile that borrows curves lends them on with its overrides on top)."""
    path = _find(ref, by, folder)
    if str(path.resolve()) in _seen:
        raise InputError(f"{by}: circular 'efficiency_from' reference ({ref})")
    src = _own(ref, by, folder)
    eff, calibrated = src.get("efficiency") or {}, "compute" in src["_calibrated"]
    if "efficiency_from" in src:
        _, up, up_cal = _efficiency_chain(src["efficiency_from"], f"profile {path}: efficiency_from", path.parent,
                                          _seen + (str(path.resolve()),))
        eff, calibrated = _merge(up, eff), calibrated or up_cal
    return src, eff, calibrated


def _own(ref: str, by: str = "", folder: Path | None = None) -> dict:
    """A profile's own keys, without resolving its ``base`` (the fitted sections live there; no recursion)."""
    path = _find(ref, by, folder)
    d = _read(path)
    d["_calibrated"] = (["compute"] if d.get("efficiency") and str(d.get("kind", "")).startswith("calibrated") else [])
    return d


def _calibrated_parts(d: dict, fitted: set) -> tuple:
    """The measured parts of a resolved profile, as the CLI and JSON name them: fitted compute curves, a host or
    overlap block (written by ``calibrate host`` / ``overlap`` / ``from-runs``; a datasheet profile has none), and per
    link its fitted collectives: the link alone when all of them are fitted, else the link and the fitted ones."""
    parts = ["compute"] if "compute" in d.get("_calibrated", []) else []
    parts += [block for block in ("host", "overlap") if d.get(block)]
    for link in ("intra", "inter"):
        names = [c for c in COLLECTIVES if (c, link) in fitted]
        if names:
            parts.append(link if len(names) == len(COLLECTIVES) else f"{link} ({', '.join(names)})")
    return tuple(parts)


def _flag(v, where: str) -> bool:
    if not isinstance(v, bool):
        raise InputError(f"{where} must be true or false, got {v!r}")
    return v


def _get(d: dict, key: str, where: str):
    if not isinstance(d, dict) or key not in d or d[key] is None:
        raise InputError(f"profile {where}: missing field '{key}'")
    return d[key]


def _host_times(host: dict, where: str, scaled=frozenset(), slowdown: float = 1.0) -> dict:
    """Host issue time per layer: measured CPU time + kernels x CUDA launch cost; the times named in ``scaled`` (those
    taken from defaults.yaml) times ``slowdown``."""
    get = lambda k: (slowdown if k in scaled else 1.0) * S.quantity(  # noqa: E731
        host[k], "s", f"profile {where}: host.{k}", low=0.0, low_open=False)
    launch = get("launch")
    n = lambda k: S.number(host[k], f"profile {where}: host.{k}", int, low=0)  # noqa: E731
    t = lambda k, kernels: get(k) + n(kernels) * launch  # noqa: E731
    return {"host_fwd": t("layer_fwd", "kernels_fwd"), "host_bwd": t("layer_bwd", "kernels_bwd"),
            "host_rc": t("recompute_extra", "kernels_recompute"),
            "host_emb": t("embed_fwd", "kernels_embed_fwd") + t("embed_bwd", "kernels_embed_bwd"),
            "host_head": t("head_fwd", "kernels_head_fwd") + t("head_bwd", "kernels_head_bwd"),
            "host_mb": t("microbatch", "kernels_microbatch"),
            "host_moe_fwd": t("moe_fwd", "kernels_moe_fwd"), "host_moe_bwd": t("moe_bwd", "kernels_moe_bwd"),
            "host_launch": launch, "host_sync": get("moe_sync") if "moe_sync" in host else 0.0}


# A GPU as papers and tables write it ("A100-80GB (SXM4)", "H100 (80GB)", "NVIDIA GB200 NVL72") -> the bundled profile,
# only where the text leaves one choice: (pattern on the lower-cased text without spaces, dashes and underscores,
# profile id). The first match wins; a bare "A100" or "H100" names no memory size or form factor and maps to nothing
# here (as the CLI refuses "h100"; bare_part gives validate's stated assumption), as does a part without a profile.
GPU_TEXT = (
    (r"gb300", "gb300"), (r"gb200", "gb200"),
    (r"gh200.*(quad|4way|jupiter|alps|jedi|ex254n)|(quad|4way|jupiter|alps|jedi|ex254n).*gh200", "gh200-quad"),
    (r"gh200", "gh200"), (r"b300", "b300"), (r"b200", "b200"),
    (r"h800", "h800"), (r"h200.*nvl(?!(36|72|144|576))", "h200-nvl"), (r"h200", "h200"), (r"a800", "a800-sxm4-80gb"),
    (r"h100.*(nvl(?!(36|72|144|576))|94g)", "h100-nvl"), (r"h100.*pcie|pcie.*h100", "h100-pcie"), (r"h100.*(96gb|hbm2e|500w)", "h100-hbm2e-96gb-500w"),
    (r"h100.*(sxm|80g|dgx|hgx)|(sxm|dgx|hgx).*h100", "h100-sxm"),
    (r"a100.*pcie.*80|a100.*80.*pcie", "a100-pcie-80gb"), (r"a100.*pcie.*40|a100.*40.*pcie", "a100-pcie-40gb"),
    (r"^(?!.*pcie).*a100.*40g", "a100-sxm4-40gb"), (r"^(?!.*pcie).*a100.*80g", "a100-sxm4-80gb"),
    # DGX-2 (and DGX-2H) carry the V100 SXM3 32 GB part, 16 to a node (NVIDIA DGX-2 announcement, GTC 2018)
    (r"v100.*(sxm3|dgx2)|dgx2.*v100", "v100-sxm3-32gb"), (r"v100.*sxm2.*32|v100.*32.*sxm2", "v100-sxm2-32gb"),
    # the 16 GB V100 is an SXM2 or a PCIe part (V100 datasheet); without 'PCIe' the SXM2 one (DGX-1, p3.16xlarge)
    (r"v100.*sxm2.*16|v100.*16.*sxm2|^(?!.*pcie).*v100.*16g", "v100-sxm2-16gb"),
    (r"l40s", "l40s"), (r"mi355x", "mi355x"), (r"mi325x", "mi325x"), (r"mi300x", "mi300x"), (r"mi250x", "mi250x"),
    (r"h20(?!0)", "h20"),   # after h200 and gh200; "H20 96GB" squashes to h2096gb
)


# A bare "H100", "A100" or "V100" in a table of training runs (no memory size, form factor or power): the part such tables
# mean when they name no variant, as an assumption the caller states (validate notes it per row); the CLI still refuses
# "h100" and asks for one. H100: NVIDIA's variants other than the SXM5 80 GB part name themselves ("H100 PCIe",
# "H100 NVL", the 96 GB HBM2e part), and every DGX/HGX H100 system (the 8-GPU NVLink nodes training clusters are
# built from) carries the SXM5 80 GB part (NVIDIA DGX H100 / HGX H100 datasheets). A100: DGX A100 and HGX A100 ship
# the SXM4 40 GB (2020) or 80 GB (from 2020-11, "DGX A100 640GB") part; the 80 GB one is taken, the later and the one
# of NVIDIA's DGX A100 640GB and DGX SuperPOD systems; a row naming 40 GB gets that profile (GPU_TEXT).
BARE_PARTS = (
    (r"h100", r"pcie|nvl|94g|96g|hbm2e|500w", "h100-sxm",
     "a bare 'H100' read as the SXM5 80 GB part of DGX/HGX H100 nodes (PCIe, NVL and 96 GB variants name themselves)"),
    (r"a100", r"pcie|40g", "a100-sxm4-80gb",
     "a bare 'A100' read as the SXM4 80 GB part of DGX/HGX A100 nodes (state '40GB' for the 2020 part)"),
    # V100: SXM2 16/32 GB (DGX-1, 8 to a node), SXM3 32 GB (DGX-2, 16 to a node) and PCIe parts share one tensor-core
    # peak (125 TFLOP/s at 300-350 W; V100 datasheet); the 8-GPU SXM2 32 GB node is taken, the later SXM2 memory size
    # (2018-03) and the node of DGX-1 and the cloud's p3dn.24xlarge; a row naming 16GB, SXM3 or DGX-2 gets that
    # profile (GPU_TEXT), and its gpus_per_node column the node size
    (r"v100", r"pcie|16g|sxm3|dgx2", "v100-sxm2-32gb",
     "a bare 'V100' read as the SXM2 32 GB part of 8-GPU DGX-1/HGX-1 nodes (state 16GB, SXM3 or DGX-2 for the others)"),
)


def _squash(text) -> str:
    """A GPU text lower-cased without spaces, dashes, underscores, brackets, slashes and commas (what GPU_TEXT and
    BARE_PARTS match)."""
    import re
    return re.sub(r"[\s_\-()/,]", "", str(text or "").lower())


def bare_part(text: str) -> tuple[str, str] | None:
    """(profile id, the assumption in words) for a GPU text that names H100, A100 or V100 and no variant, else None.

    >>> [bare_part(t) and bare_part(t)[0] for t in ("NVIDIA H100 GPUs", "8x A100", "H100 NVL", "A100 40GB", "H200",
    ...                                             "V100 32GB")]
    ['h100-sxm', 'a100-sxm4-80gb', None, None, None, 'v100-sxm2-32gb']
    """
    import re

    t = _squash(text)
    if from_text(text):
        return None
    for part, variant, pid, why in BARE_PARTS:
        if re.search(part, t) and not re.search(variant, t):
            return pid, why
    return None


def from_text(text: str) -> str | None:
    """The profile id a free-text GPU name denotes, or None when it names none or more than one part.

    >>> [from_text(t) for t in ("A100-80GB (SXM4)", "H100 (80GB)", "NVIDIA GB200 NVL72", "A100", "H100", "TPU v4")]
    ['a100-sxm4-80gb', 'h100-sxm', 'gb200', None, None, None]
    """
    import re

    t = _squash(text)
    for pattern, pid in GPU_TEXT:
        if re.search(pattern, t):
            return pid
    return None


def load(ref) -> Hardware:
    """Load a profile by id (``a100-sxm4-80gb``) or path; raise InputError on bad content."""
    return _fresh(_load(S.ref(ref, "hardware profile: expected a profile id")))


def _fresh(h: Hardware) -> Hardware:
    """A copy of a cached profile whose dicts are the caller's own: mutating one (``hw.efficiency[...] =``)
    cannot change what later loads return. Shallow copies suffice: the leaves are tuples and numbers."""
    import copy
    out = copy.copy(h)
    for f in dataclasses.fields(h):
        v = getattr(h, f.name)
        if isinstance(v, dict):
            object.__setattr__(out, f.name, {k: (dict(x) if isinstance(x, dict) else x) for k, x in v.items()})
    return out


@functools.lru_cache(maxsize=64)
def _load(ref: str) -> Hardware:
    d = raw(ref)
    where = d["_path"]
    dflt = _defaults()
    peaks = {}
    for dt, v in (S.mapping(_get(d, "peak_flops", where), f"profile {where}: peak_flops")).items():
        peaks[dt] = None if v is None else S.quantity(v, "flop/s", f"profile {where}: peak_flops.{dt}")
    if not peaks.get("bf16") and not peaks.get("fp16"):
        raise InputError(f"profile {where}: peak_flops needs a bf16 or fp16 entry")
    peaks.setdefault("bf16", peaks.get("fp16"))
    peaks.setdefault("fp16", peaks.get("bf16"))
    links = _get(d, "links", where)

    def read_link(name: str) -> Link:
        """links.<name>: kind (default the name), bandwidth (B/s, one direction per GPU), latency (default 10 us)."""
        L = _get(links, name, f"{where} links")
        return Link(str(L.get("kind", name)),
                    S.quantity(_get(L, "bandwidth", f"{where} links.{name}"), "B/s", f"profile {where}: links.{name}.bandwidth"),
                    S.quantity(L.get("latency", "10 us"), "s", f"profile {where}: links.{name}.latency", low=0.0, low_open=False))
    lk = {name: read_link(name) for name in ("intra", "inter")}
    eff_raw = _merge(dflt["efficiency"], d.get("efficiency") or {})
    eff = {}
    for c in CLASSES:
        eff[c] = {}
        for direction in ("fwd", "bwd"):
            e, w = eff_raw[c][direction], f"profile {where}: efficiency.{c}.{direction}"
            eff[c][direction] = (S.fraction(e["eta"], f"{w}.eta"), S.fraction(e["mu"], f"{w}.mu"),
                                 S.quantity(e["t0"], "s", f"{w}.t0", low=0.0, low_open=False))
    attn_shape = {k: tuple(_shape_value("attn", n, eff_raw["attn"][k][n], f"profile {where}: efficiency.attn.{k}.{n}")
                           for n in SHAPE_KEYS["attn"]) for k in ("fwd", "bwd")}
    bmm_shape = {k: tuple(_shape_value("bmm", n, eff_raw["bmm"][k][n], f"profile {where}: efficiency.bmm.{k}.{n}")
                          for n in SHAPE_KEYS["bmm"]) for k in ("fwd", "bwd")}
    coll, calls, fitted = {}, {}, set()
    craw = d.get("collectives") or {}
    for link in ("intra", "inter"):
        for c in COLLECTIVES:
            e = (craw.get(link) or {}).get(c)
            if e is None and c in ("rs", "ag") and (craw.get(link) or {}).get("ar"):
                e = craw[link]["ar"]            # ring RS/AG run at the all-reduce's bus bandwidth
            if e:
                fitted.add((c, link))
                w = f"profile {where}: collectives.{link}.{c}"
                coll[c, link] = (S.quantity(e["alpha"], "s", f"{w}.alpha", low=0.0, low_open=False),
                                 S.quantity(e["busbw"], "B/s", f"{w}.busbw"))
                if e.get("call") is not None:
                    calls[c, link] = S.quantity(e["call"], "s", f"{w}.call", low=0.0, low_open=False)
            else:
                coll[c, link] = (lk[link].latency, lk[link].bandwidth * dflt["link_efficiency"][link])
    host_link = read_link("host") if links.get("host") else None
    gpn = S.number(_get(d, "gpus_per_node", where), f"profile {where}: gpus_per_node", int, low=1)
    sm_count = S.number(d.get("sm_count", 1), f"profile {where}: sm_count", int, low=1)
    power = d.get("board_power")
    # The defaults' host times stand for an x86 DGX host; a system whose CPU issues work more slowly (Grace) states
    # host_slowdown, which scales only the times it takes from the defaults: a host block the profile (or its base, a
    # host_from file, calibrate host, from-runs) states was measured on that host and stands as written.
    own_host = d.get("host") or {}
    slow = S.number(d.get("host_slowdown", 1.0), f"profile {where}: host_slowdown", low=0.0)
    host = _merge(dflt["host"], own_host)
    ceiling = 1.0
    if d.get("max_matmul") is not None:
        ceiling = S.quantity(d["max_matmul"], "flop/s", f"profile {where}: max_matmul") / peaks["bf16"]
        if not 0 < ceiling <= 1:
            raise InputError(f"profile {where}: max_matmul must be positive and at most the bf16 peak")
        # no fitted or assumed GEMM efficiency can beat the measured maximum achievable matmul rate
        for c in ("gemm", "bmm"):
            eff[c] = {k: (min(eta, ceiling), mu, t0) for k, (eta, mu, t0) in eff[c].items()}
    matmul_fp4 = None
    if d.get("max_matmul_fp4") is not None:
        matmul_fp4 = S.quantity(d["max_matmul_fp4"], "flop/s", f"profile {where}: max_matmul_fp4")
        if not peaks.get("fp4") or not 0 < matmul_fp4 <= peaks["fp4"]:
            raise InputError(f"profile {where}: max_matmul_fp4 must be positive and at most the fp4 peak "
                             f"({peaks.get('fp4') or 'none stated'}), got {matmul_fp4:.4g} FLOP/s")
    clock = _clock(d.get("sustained_clock", 1.0), f"profile {where}")
    spread = _spread(d.get("clock_spread", dflt["clock_spread"]), f"profile {where}")
    overlap = {k: S.number(v, f"profile {where}: overlap.{k} (SMs)", low=0.0)
               for k, v in _merge(dflt["overlap"], d.get("overlap") or {}).items()}
    dhalf = S.number(eff_raw.get("dhalf", dflt["efficiency"]["dhalf"]), f"profile {where}: efficiency.dhalf", low=0.0)
    return Hardware(
        sustained_clock=clock, clock_spread=spread, matmul_ceiling=ceiling, matmul_fp4=matmul_fp4,
        fp8_non_tn=_flag(d.get("fp8_non_tn", False), f"profile {where}: fp8_non_tn"),
        mx_formats=_flag(d.get("mx_formats", False), f"profile {where}: mx_formats"),
        **_host_times(host, where, frozenset(dflt["host"]) - frozenset(own_host), slow), host_slowdown=slow,
        id=str(d.get("id", Path(where).stem)), name=str(d.get("name", d.get("id", ""))), kind=str(d.get("kind", "datasheet")),
        peak_flops=peaks,
        hbm_bandwidth=S.quantity(_get(d, "hbm_bandwidth", where), "B/s", f"profile {where}: hbm_bandwidth"),
        hbm_capacity=S.quantity(_get(d, "hbm_capacity", where), "B", f"profile {where}: hbm_capacity"),
        board_power=S.quantity(power, "W", f"profile {where}: board_power") if power is not None else None,
        gpus_per_node=gpn, sm_count=sm_count, intra=lk["intra"], inter=lk["inter"], host_link=host_link, efficiency=eff,
        overlap=overlap,
        dhalf=dhalf, attn_shape=attn_shape, bmm_shape=bmm_shape,
        attention_speed=_attention_speed(d["attention_speed"], f"profile {where}") if d.get("attention_speed") else {},
        fp8_attention_speed=(_fp8_attention_speed(d["fp8_attention_speed"], f"profile {where}")
                             if d.get("fp8_attention_speed") else {}),
        collectives=coll, collective_calls=calls,
        calibrated=_calibrated_parts(d, fitted), provenance=dict(d.get("provenance") or {}),
        sources=tuple([d["sources"]] if isinstance(d.get("sources"), str) else (d.get("sources") or ())), path=where,
    )
