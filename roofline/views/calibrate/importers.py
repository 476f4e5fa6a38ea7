"""Importers of external sample data: estimate-train-time CSVs and nccl-tests all_reduce_perf tables.

Every operator sample is mapped to FLOPs F, HBM bytes B and smallest GEMM dimension dmin through
the sympy expressions of ``roofline/model/formulas`` (one mapping function per upstream op, below), so
that the fitted efficiencies mean exactly what the predictor multiplies them with. Known data
defects (``/work/shared/data/estimate-train-time/README.md``) are detected from the data, each
reported as a :class:`Defect`, and the affected samples excluded (``keep`` False) where they are
not measurements of the operator.
"""
from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import sympy as sp

from ...base import schema
from ...base.units import TERA
from ...base.errors import InputError
from ...model.formulas import compute as C
from ...model.formulas import memory as M
from ...model.formulas import symbols as S
from . import fit

VOCAB = 50257  # GPT-2 vocabulary used by every upstream sampler (target_functions.py)


@dataclass(frozen=True)
class Defect:
    where: str          # file or file group
    what: str           # what is wrong, with the numbers that show it
    n: int              # samples affected
    action: str         # excluded | kept, flagged | coverage only

    def __str__(self) -> str:
        return f"{self.where}: {self.what} ({self.n} samples; {self.action})"


@dataclass(frozen=True)
class OpSamples:
    """One upstream op file, one direction: per-sample F (FLOP), B (bytes), dmin, t (s), keep mask."""
    op: str
    cls: str
    direction: str
    flops: np.ndarray
    bytes: np.ndarray
    dmin: np.ndarray | None
    t: np.ndarray
    keep: np.ndarray
    columns: dict = field(default_factory=dict)
    attn: tuple | None = None      # flash attention: (head dim, thread blocks, key block) per sample
    kern: tuple | None = None      # batched GEMMs: (F, B, bytes of the extra passes, K) per sample and kernel


@dataclass(frozen=True)
class CollSamples:
    """One collective file: sizes in nccl-tests convention (bytes), ranks, times (s), keep mask."""
    name: str
    kind: str           # ar | ag | rs | a2a | p2p
    link: str           # intra | inter
    nodes: int
    gpus_per_node: int
    size: np.ndarray
    t: np.ndarray
    keep: np.ndarray

    @property
    def p(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Imported:
    cluster: str
    gpu: str
    base: str                 # datasheet profile this calibrates
    gpus_per_node: int
    ops: list
    colls: list
    defects: list
    source: str


CLUSTERS = {  # cluster -> (folder, GPU file prefix, base profile, GPUs per node)
    "perlmutter": ("perlmutter-a100", "NVIDIAA100-SXM4-80GB", "a100-sxm4-80gb", 4),
    "vista": ("vista-gh200", "NVIDIAGH200120GB", "gh200", 1),
}

# ---- sample -> (F, B, dmin) through the formulas ----------------------------------------------
# model features that are absent at 0 (their symbol's default is 0: shared experts, leading dense layers, MLA ranks,
# sliding windows, ...): upstream's plain GPT block has none of them, whichever such feature the formulas grow
ABSENT = {s.symbol: 0 for s in S.SYMBOLS.values() if s.group == "model" and s.default == 0}
FIXED = {  # upstream samples: fp16, plain GPT block, no dropout/SP/CP/MoE (target_functions.py)
    **ABSENT,
    S.act_bytes: 2, S.grad_bytes: 2, S.f32_bytes: 4, S.wgrad_fusion: 0, S.exp_launch: 1, S.lp_rate: 1, S.gated: 0, S.eager_elem: 0, S.eager_rope: 0, S.qk_norm: 0, S.rms: 0, S.sq_relu: 0, S.flash: 1, S.flash_speed: 1, S.causal: 1, S.dropout: 0, S.cp: 1, S.seq_par: 0,
    S.n_experts: 1, S.ep: 1, S.top_k: 1, S.capacity_factor: 1, S.learned_pos: 0, S.rope_pos: 1, S.biases: 1, S.tied: 0,
    S.vocab: VOCAB, S.kv_heads: S.n_heads, S.ffn_hidden: 4 * S.d_model,
    # attention width = d_model, dense MLP only (the MoE/shared-expert sizes of the issue-20 model are unused)
    S.head_dim: S.d_model / S.n_heads, S.moe_ffn: 4 * S.d_model, S.shared_ffn: 0,
}
N_PARAMS = sp.Symbol("n_params", positive=True)
# a bare GEMM of given sizes (SimuMax's tables): rows m of all groups, k, n, and the groups (experts) holding them
GEMM_SIZES = tuple(sp.Symbol(n, positive=True) for n in ("gemm_m", "gemm_k", "gemm_n", "gemm_groups"))


adam_op = C.adam_op      # one source: the predictor's optimizer op


def _scores():
    return S.micro_batch * S.n_heads / S.tp * S.seq_len ** 2      # b (a/t) s^2 attention-score elements


def _named(ops, name):
    return next(o for o in ops if o.name == name)


OP_BUILDERS = {  # upstream op -> (class, Op with the right symbols, fixed overrides)
    "linear1": ("gemm", lambda: _named(C.layer_ops(), "qkv_proj"), {}),
    "linear2": ("gemm", lambda: _named(C.layer_ops(), "attn_out_proj"), {}),
    "linear3": ("gemm", lambda: _named(C.layer_ops(), "mlp_up"), {}),
    "linear4": ("gemm", lambda: _named(C.layer_ops(), "mlp_down"), {}),
    "linear_final": ("gemm", lambda: _named(C.head_ops(), "lm_head"), {}),
    # torch.baddbmm(empty, q, k^T, beta=0) and torch.bmm(scores, v): the unfused path's two batched GEMMs
    "baddbmm": ("bmm", lambda: _named(C.attention_core(), "attn_scores_bmm"), {S.flash: 0}),
    "bmm": ("bmm", lambda: _named(C.attention_core(), "attn_context_bmm"), {S.flash: 0}),
    # upstream calls flash_attn_func(Q, K, V) without causal=True: the samples are non-causal
    "flash_atten": ("attn", lambda: _named(C.attention_core(), "flash_attention"), {S.causal: 0}),
    "ScaledUpperTriangMaskedSoftmax": ("softmax", lambda: _named(C.attention_core(), "scale_mask_softmax_dropout"),
                                       {S.flash: 0}),
    # torch softmax over b (a/t) s s: read 1 write 1; backward reads output and grad, writes 1
    "softmax": ("softmax", lambda: C.elementwise("softmax", "softmax", _scores(), 1, 1, 2, 1, 5), {}),
    # in-place masked_fill_ of the scores: read 1 write 1 both ways
    "fillmask": ("softmax", lambda: C.elementwise("fillmask", "softmax", _scores(), 1, 1, 1, 1, 1), {}),
    "layernorm": ("norm", lambda: _named(C.layer_ops(), "norm_attn"), {S.tp: 1}),
    "RMSlayernorm": ("norm", lambda: _named(C.layer_ops(), "norm_attn"), {S.tp: 1, S.rms: 1}),
    "gelu": ("elem", lambda: _named(C.layer_ops(), "mlp_activation"), {}),
    "res_add": ("elem", lambda: _named(C.layer_ops(), "dropout_residual_attn"), {S.tp: 1}),
    # rotary embedding of q and k (2 b s h/t elements): read x, cos, sin; write 1 (unfused torch)
    "RoPE": ("elem", lambda: C.elementwise("rope", "elem", 2 * C.tokens * S.d_model / S.tp, 3, 1, 3, 1, 6), {}),
    "embedding": ("embed", lambda: _named(C.embedding_ops(), "embedding"), {}),
    "parallel_cross_entropy_128": ("ce", lambda: _named(C.head_ops(), "cross_entropy"), {}),
    # upstream DeepSpeed FusedAdam on fp16 parameters: m and v in fp16 (4 B/param), no fp32 master
    "optimizer": ("optim", lambda: adam_op(N_PARAMS), {S.opt_bytes: 4}),
    # one cuBLAS / TE GroupedLinear call of given sizes (SimuMax's matmul and group_matmul tables); wgrad_extra is
    # the main-grad traffic of its weight gradient when it accumulates (grad_bytes per sample: the key's dtype)
    "gemm_sized": ("gemm", lambda: C.gemm("gemm_sized", GEMM_SIZES[0], GEMM_SIZES[1], GEMM_SIZES[2],
                                          groups=GEMM_SIZES[3]), {S.wgrad_fusion: 1, S.grad_bytes: S.grad_bytes}),
}
STAGES = ("firstStage_optimizer", "middleStage_optimizer", "lastStage_optimizer")
COLUMN_SYMBOL = {"mp": "tp", "b": "micro_batch", "l": "seq_len", "dim": "d_model", "h": "n_heads", "params": "n_params"}


@functools.lru_cache(maxsize=None)
def op_functions(op_name: str):
    """(class, arg names, numpy fn -> (F_fwd, B_fwd, F_bwd, B_bwd, dmin, head_dim, ctas_fwd, ctas_bwd,
    kblock_fwd, kblock_bwd, wgrad_extra)) for an upstream op (0 where the op has no such dimension)."""
    cls, build, over = OP_BUILDERS[op_name]
    op = build()
    subs = {**FIXED, **over}
    exprs = [sp.sympify(e).subs(subs).subs(subs) for e in (op.f_fwd, op.b_fwd, op.f_bwd, op.b_bwd,
                                                           op.dmin if op.dmin is not None else 0,
                                                           op.head_dim if op.head_dim is not None else 0,
                                                           *(op.ctas or (0, 0)), *(op.kblock or (0, 0)),
                                                           op.wgrad_extra)]
    free = sorted(set().union(*(e.free_symbols for e in exprs)), key=lambda s: s.name)
    fn = sp.lambdify(free, exprs, "numpy")
    return cls, tuple(s.name for s in free), fn


@functools.lru_cache(maxsize=None)
def kernel_functions(op_name: str):
    """(arg names, numpy fn -> per kernel (F, B, extra-pass bytes, K)) of each direction of a batched-GEMM op."""
    _, build, over = OP_BUILDERS[op_name]
    op = build()
    subs = {**FIXED, **over}
    out = {}
    for direction in ("fwd", "bwd"):
        exprs = [sp.sympify(e).subs(subs).subs(subs) for d, kn in op.kernels if d == direction
                 for e in (kn.f, kn.b, kn.reread, kn.k)]
        free = sorted(set().union(*(e.free_symbols for e in exprs)), key=lambda s: s.name)
        out[direction] = (tuple(s.name for s in free), sp.lambdify(free, exprs, "numpy"), len(exprs) // 4)
    return out


def kernel_sample_metrics(op_name: str, direction: str, **values) -> tuple:
    """(F, B, extra-pass bytes, K), each an array samples x kernels, of a batched-GEMM op's kernels."""
    names, fn, nk = kernel_functions(op_name)[direction]
    arrays = np.broadcast_arrays(*[np.asarray(values[n], float) for n in names])
    n = len(arrays[0])
    flat = [np.broadcast_to(np.asarray(v, float), (n,)) for v in fn(*arrays)]
    return tuple(np.stack(flat[j::4], axis=1) for j in range(4))


def op_sample_metrics(op_name: str, **values) -> tuple:
    """F_fwd, B_fwd, F_bwd, B_bwd, dmin, head_dim, ctas (fwd, bwd), key block (fwd, bwd), wgrad_extra arrays for
    samples given by symbol name (tp, ...).

    >>> F, B, Fb, Bb, d, *_ = op_sample_metrics("linear1", tp=np.array([2.0]), micro_batch=np.array([2.0]),
    ...                                     seq_len=np.array([1024.0]), d_model=np.array([4096.0]))
    >>> float(F[0]) == 2 * 2048 * 4096 * 6144, float(d[0])
    (True, 2048.0)
    """
    _, names, fn = op_functions(op_name)
    missing = [n for n in names if n not in values]
    if missing:
        raise InputError(f"op {op_name}: samples lack {', '.join(missing)}")
    arrays = np.broadcast_arrays(*[np.asarray(values[n], float) for n in names])
    n = len(arrays[0]) if arrays and arrays[0].ndim else 1
    return tuple(np.broadcast_to(np.asarray(v, float), (n,)).copy() for v in fn(*arrays))


def stage_params(stage: str, mp, dim, encoders):
    """Parameters per rank of an upstream pipeline stage (memory.py: layers x layer params / t, plus
    the V_pad h / t embedding table on the first stage and LM head on the last)."""
    expr = S.n_layers * M.layer_params_rank + (0 if stage.startswith("middle") else C.vocab_pad * S.d_model / S.tp)
    expr = expr.subs(FIXED).subs(FIXED)
    free = sorted(expr.free_symbols, key=lambda s: s.name)
    vals = {"tp": mp, "d_model": dim, "n_layers": encoders, "n_heads": np.ones_like(dim)}
    return sp.lambdify(free, expr, "numpy")(*[np.asarray(vals[s.name], float) for s in free])


# ---- CSV reading ----------------------------------------------------------------------------
def read_csv(path: Path, required: tuple) -> dict:
    """Columns of a numeric CSV as float arrays; InputError naming the file on any malformation."""
    path = Path(path)
    text = schema.read_text(path, "samples CSV")
    try:
        rows = list(csv.reader(text.splitlines()))
    except csv.Error as exc:
        raise InputError(f"samples CSV {path}: malformed CSV ({exc})") from None
    if not rows or not rows[0]:
        raise InputError(f"{path}: empty file, expected a header with {', '.join(required)}")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}; header is {','.join(header)}")
    body = [r for r in rows[1:] if any(x.strip() for x in r)]
    if not body:
        raise InputError(f"{path}: no data rows")
    for i, r in enumerate(body):
        if len(r) != len(header):
            raise InputError(f"{path}: row {i + 2} has {len(r)} fields, expected {len(header)} (truncated file?)")
    cols = {}
    for j, h in enumerate(header):
        if h not in required:
            continue
        try:
            v = np.array([float(r[j]) for r in body])
        except ValueError:
            bad = next(i for i, r in enumerate(body) if not _isfloat(r[j]))
            raise InputError(f"{path}: row {bad + 2} column {h}: {body[bad][j]!r} is not a number") from None
        if not np.all(np.isfinite(v)):
            raise InputError(f"{path}: column {h} has non-finite values")
        cols[h] = v
    return cols


def _isfloat(x: str) -> bool:
    try:
        float(x)
        return True
    except ValueError:
        return False


def _op_columns(op: str) -> tuple:
    if op in STAGES:
        return ("mp", "dim", "encoders", "dur(us)")
    if op == "optimizer":
        return ("params", "dur")
    base = {"layernorm": ("b", "l", "dim"), "RMSlayernorm": ("b", "l", "dim"), "res_add": ("b", "l", "dim"),
            "softmax": ("mp", "b", "h", "l"), "ScaledUpperTriangMaskedSoftmax": ("mp", "b", "h", "l"),
            "parallel_cross_entropy_128": ("mp", "b", "l")}.get(op)
    if base is None:
        base = ("mp", "b", "h", "l", "dim") if op in ("flash_atten", "bmm", "baddbmm", "RoPE", "fillmask") \
            else ("mp", "b", "l", "dim")
    return base + ("F_dur(us)", "B_dur(us)")


# ---- estimate-train-time --------------------------------------------------------------------
def _cluster_dir(root: Path, cluster: str) -> Path:
    folder = CLUSTERS[cluster][0]
    for cand in (root / folder, root):
        if (cand / "operator").is_dir() or (cand / "nccl").is_dir():
            return cand
    raise InputError(f"{root}: no {folder}/operator or operator/ folder (estimate-train-time layout)")


def import_estimate_train_time(root, cluster: str) -> Imported:
    """Operator and collective samples of one cluster ('perlmutter' or 'vista') with defects reported."""
    if cluster not in CLUSTERS:
        raise InputError(f"unknown cluster {cluster!r}; expected one of {', '.join(CLUSTERS)}")
    folder, gpu, base, gpn = CLUSTERS[cluster]
    d = _cluster_dir(Path(root), cluster)
    from ...base import progress
    ops, defects, b_seen = [], [], []
    bar = progress.track(list(OP_BUILDERS) + list(STAGES), f"read {cluster} operator samples", unit="op")
    for op in bar:
        bar.note(op)
        path = d / "operator" / f"{gpu}_{op}_fp16.csv"
        if not path.exists():
            continue
        cols = read_csv(path, _op_columns(op))
        if "b" in cols:
            b_seen.append(float(cols["b"].min()))
        if op in STAGES or op == "optimizer":
            n = cols["params"] if op == "optimizer" else stage_params(op, cols["mp"], cols["dim"], cols["encoders"])
            F, B, *_ = op_sample_metrics("optimizer", n_params=n)
            t = (cols["dur(us)"] if op in STAGES else cols["dur"]) * 1e-6
            ops.append(OpSamples(op, "optim", "fwd", F, B, None, t, np.ones(len(t), bool), cols))
            continue
        cls, names, _ = op_functions(op)
        vals = {COLUMN_SYMBOL[c]: v for c, v in cols.items() if c in COLUMN_SYMBOL}
        vals.setdefault("n_heads", np.ones_like(cols["l"]))
        F, B, Fb, Bb, dmin, dh, *grid = op_sample_metrics(op, **{k: v for k, v in vals.items() if k in names})
        has_d = cls in ("gemm", "attn")
        for i, (direction, f_, b_, t) in enumerate((("fwd", F, B, cols["F_dur(us)"]), ("bwd", Fb, Bb, cols["B_dur(us)"]))):
            attn = (dh, grid[i], grid[2 + i]) if np.all(grid[i] > 0) else None
            kern = kernel_sample_metrics(op, direction, **vals) if cls == "bmm" else None
            ops.append(OpSamples(op, cls, direction, f_, b_, dmin if has_d else None, t * 1e-6,
                                 np.ones(len(t), bool), cols, attn, kern))
    ops = _operator_defects(ops, defects, cluster, b_seen)
    ops = _faster_than_bound(ops, defects, cluster, base)
    colls = _import_nccl_dir(d / "nccl", gpu, base, defects, cluster)
    src = "estimate-train-time data (MIT, DebarghaG/estimate-train-time@1ac4d5e), " + cluster.capitalize()
    return Imported(cluster, gpu, base, gpn, ops, colls, defects, src)


def _set_keep(ops, op, direction, keep, reason_defect, defects):
    out = []
    for o in ops:
        if o.op == op and o.direction == direction:
            k = keep(o) if callable(keep) else np.zeros(len(o.t), bool)
            d = reason_defect(o, int((~k).sum())) if (~k).sum() else None
            if d is not None:
                defects.append(d)
            o = replace(o, keep=o.keep & k)
        out.append(o)
    return out


def _operator_defects(ops, defects, cluster, b_seen):
    """Detect the README's operator defects from the data itself; exclude non-measurements."""
    by = {(o.op, o.direction): o for o in ops}
    # backward/forward ratio of attention: flash backward does 2.5x the forward FLOPs
    if ("flash_atten", "fwd") in by:
        r = float(np.median(by["flash_atten", "bwd"].t / by["flash_atten", "fwd"].t))
        if r < 1.0:
            ops = _set_keep(ops, "flash_atten", "bwd", None, lambda o, n: Defect(
                f"{cluster} flash_atten", f"median backward/forward time ratio {r:.3f}, expected ~2.5-3 "
                "(backward kernels missed by the profiler)", n, "backward excluded"), defects)
    # a backward time identical to the forward one is a copy, not a measurement
    if ("res_add", "fwd") in by:
        same = float(np.mean(np.abs(by["res_add", "bwd"].t / by["res_add", "fwd"].t - 1) < 0.02))
        if same > 0.5:
            ops = _set_keep(ops, "res_add", "bwd", None, lambda o, n, s=same: Defect(
                f"{cluster} res_add", f"backward time within 2% of forward in {100 * s:.0f}% of rows (no backward "
                "in the upstream sampler)", n, "backward excluded"), defects)
    if ("embedding", "fwd") in by:
        ops = _embedding_defects(ops, by["embedding", "fwd"], by["embedding", "bwd"], defects, cluster)
    # an Adam step slower than 100x its HBM time is a host-side stall, not the kernel
    for op in STAGES:
        if (op, "fwd") in by:
            o = by[op, "fwd"]
            ops = _set_keep(ops, op, "fwd", lambda o: o.t < 1.0, lambda o, n: Defect(
                f"{cluster} {o.op}", f"{n} rows above 1 s (max {o.t.max():.1f} s) for < 2e9 parameters", n,
                "excluded"), defects)
    # coverage gaps (kept; reported so that extrapolation is visible)
    for o in ops:
        if o.direction == "fwd" and "mp" in o.columns and o.op != "ScaledUpperTriangMaskedSoftmax":
            mps = sorted(set(o.columns["mp"].astype(int).tolist()))
            if max(mps) <= 2:
                defects.append(Defect(f"{cluster} {o.op}", f"tensor-parallel degree only in {mps} (grid 1-16)",
                                      len(o.t), "kept; coverage only"))
    if b_seen and min(b_seen) > 1:
        defects.append(Defect(f"{cluster} operators", f"micro-batch 1 outside every grid (smallest b {min(b_seen):g})",
                              0, "coverage only; b=1 is extrapolated"))
    return ops


BELOW_BOUND_FILE = 0.10     # this share of a file's rows faster than the roofline bound: not kernel spans


def _faster_than_bound(ops, defects, cluster, base):
    """Rows that ran faster than the hardware allows: t < max(F / peak, B / HBM bandwidth).

    No kernel beats its roofline bound, so such a row is not the kernel's span (a timer that did not wait
    for the GPU measures the host's launch time). A file with >= 10 % of its kept rows below the bound
    measures something else throughout (Vista's stage optimizers: 6.9e9 parameters, >= 190 GB of Adam
    traffic, in 8.7 ms = 22 TB/s, and the time follows the layer count, not the parameters): the file
    is excluded. Elsewhere rows below half the bound are excluded one by one; rows between half the bound
    and the bound are kept (within the uncertainty of byte counts and datasheet peaks).
    """
    from ...spec.hardware import load
    from .profile import MATMUL
    hw = load(base)
    for o in list(ops):
        k = o.keep
        if not k.any():
            continue
        peak = hw.peak("fp16") if o.cls in MATMUL else hw.vector_peak()
        ratio = o.t / np.maximum(o.flops / peak, o.bytes / hw.hbm_bandwidth)
        below = k & (ratio < 1.0)
        where = f"{cluster} {o.op}" + ("" if o.op in STAGES or o.op == "optimizer" else f" {o.direction}")
        if below.sum() >= BELOW_BOUND_FILE * k.sum():
            what = (f"{int(below.sum())} of {int(k.sum())} rows faster than the roofline bound max(F/peak, B/HBM) "
                    f"(down to {ratio[k].min():.2f}x it): not the kernel's span (host launch time?)")
            ops = _set_keep(ops, o.op, o.direction, None, lambda o_, n, w=what, wh=where, m=int(k.sum()): Defect(
                wh, w, m, "file excluded"), defects)
        elif (k & (ratio < 0.5)).any():
            bad = k & (ratio < 0.5)
            what = f"{int(bad.sum())} rows below half the roofline bound (down to {ratio[k].min():.2f}x): impossible"
            ops = _set_keep(ops, o.op, o.direction, lambda o_, b=bad: ~b, lambda o_, n, w=what, wh=where: Defect(
                wh, w, n, "excluded"), defects)
    return ops


EMBED_FEATURE_KERNEL_MAX = 3072   # PyTorch embedding_dense_backward_cuda: <= 3072 indices -> feature kernel


def _embedding_defects(ops, fwd, bwd, defects, cluster):
    """Embedding rows whose forward and backward columns hold one measurement, and backward rows of
    another kernel than the one compute.embedding_ops prices.

    The backward (zero-fill the V/t x h table, sort ids, reduce rows, write them) always does more
    than the forward gather, so a row whose two times agree within 2 % is one kernel span recorded in
    both columns. Which direction it is cannot be told from the row: the value scales with the
    vocabulary shard like the backward's table zeroing (GH200 x2.9 from t=16 to t=1 at b s = 32768,
    h = 8192, where a gather of b s rows does not depend on t), but on the A100 it matches the
    neighbouring forwards: both directions of such rows are excluded. Rows with <= 3072 tokens run
    PyTorch's atomic-free feature kernel (one thread block per 32 features looping over all ids), not
    the sort-based path: their backward is excluded from the fit (not a defect; reported for coverage).
    """
    t_f, t_b = fwd.t, bwd.t
    same = np.abs(t_b / t_f - 1) < 0.02
    if same.any():
        shard = C.vocab_pad.subs(S.vocab, VOCAB) / S.tp
        mp = fwd.columns["mp"]
        tok = fwd.columns["b"] * fwd.columns["l"]
        big, h = tok == tok.max(), fwd.columns["dim"] == fwd.columns["dim"].max()
        lo, hi = mp == mp.min(), mp == mp.max()
        scale = ""
        if (big & h & lo).any() and (big & h & hi).any():
            r = float(np.median(t_f[big & h & lo]) / np.median(t_f[big & h & hi]))
            v = float(shard.subs(S.tp, mp.min()) / shard.subs(S.tp, mp.max()))
            scale = (f"; forward at b s = {tok.max():g}, h = {fwd.columns['dim'].max():g} is x{r:.1f} from t = "
                     f"{mp.max():g} to t = {mp.min():g} (vocabulary shard x{v:.1f}, tokens x1)")
        what = (f"backward time within 2% of forward in {int(same.sum())} of {len(same)} rows "
                f"({100 * same.mean():.0f}%, tokens b s >= {tok[same].min():g}, t >= {mp[same].min():g}): one "
                f"kernel span recorded as both directions, not two measurements{scale}")
        ops = _set_keep(ops, fwd.op, "fwd", lambda o, k=~same: k, lambda o, n, w=what: Defect(
            f"{cluster} embedding", w, n, "rows excluded, both directions"), defects)
        if same.mean() > 0.5:   # what is left covers the small token counts only: no backward fit
            left = tok[~same & (tok > EMBED_FEATURE_KERNEL_MAX)]
            span = f"b s {left.min():g}-{left.max():g} of {tok.min():g}-{tok.max():g}" if left.size else "none"
            ops = _set_keep(ops, bwd.op, "bwd", None, lambda o, n, s=same.mean(), w=span: Defect(
                f"{cluster} embedding", f"backward time within 2% of forward in {100 * s:.0f}% of rows (backward not "
                f"profiled); the other rows cover {w} only", n, "backward excluded"), defects)
            return ops
        ops = _set_keep(ops, bwd.op, "bwd", lambda o, k=~same: k, lambda o, n: None, defects)
    small = fwd.columns["b"] * fwd.columns["l"] <= EMBED_FEATURE_KERNEL_MAX
    if (small & ~same).any():
        ops = _set_keep(ops, bwd.op, "bwd", lambda o, k=~small: k, lambda o, n: Defect(
            f"{cluster} embedding bwd", f"b s <= {EMBED_FEATURE_KERNEL_MAX} tokens runs PyTorch's feature kernel, "
            "not the sort-based backward compute.embedding_ops prices", n, "kept out of the fit; coverage only"),
            defects)
    return ops


COLL_KIND = {"allreduce": "ar", "allreduce_large": "ar", "allgather_large": "ag", "reducescatter_large": "rs",
             "p2p": "p2p"}


def _import_nccl_dir(d: Path, gpu: str, base: str, defects: list, cluster: str) -> list:
    if not d.is_dir():
        return []
    from ...spec.hardware import load
    hw = load(base)
    line = {"intra": hw.intra.bandwidth, "inter": hw.inter.bandwidth}
    out = []
    for path in sorted(d.glob(f"{gpu}_*_fp16_*_*.csv")):
        m = re.match(rf"{re.escape(gpu)}_(\w+?)_fp16_(\d+)_(\d+)\.csv$", path.name)
        if not m or m.group(1) not in COLL_KIND:
            continue
        name, nodes, g = m.group(1), int(m.group(2)), int(m.group(3))
        kind, link = COLL_KIND[name], ("intra" if nodes == 1 else "inter")
        cols = read_csv(path, ("shape", "nodes", "GPUsPerNode", "dur(us)"))
        p = nodes * g
        # shape = fp16 elements per rank; nccl-tests size of all-gather is the gathered output (p x input)
        size = 2 * cols["shape"] * (p if kind == "ag" else 1)
        t = cols["dur(us)"] * 1e-6
        bus = fit.busbw(size, t, kind, p)
        bound = line["inter" if nodes > 1 else "intra"]
        keep = bus <= bound
        if (~keep).sum():
            defects.append(Defect(f"{cluster} {path.name}", f"{int((~keep).sum())} samples imply busbw up to "
                                  f"{bus.max() / 1e9:.0f} GB/s (median t {np.median(t[~keep]) * 1e6:.0f} us), "
                                  f"above the {bound / 1e9:.0f} GB/s line rate: impossible", int((~keep).sum()),
                                  "excluded"))
        if keep.sum() >= 10:
            lo, hi = np.percentile(bus[keep], [10, 90])
            if hi > 3 * lo:  # one link, one collective: busbw should be flat over 134M+ elements
                defects.append(Defect(f"{cluster} {path.name}", f"unstable: busbw spans {lo / 1e9:.1f}-{hi / 1e9:.1f} "
                                      "GB/s (10th-90th percentile) over large messages", int(keep.sum()),
                                      "file excluded from the fit"))
                keep = np.zeros_like(keep)
        out.append(CollSamples(path.stem, kind, link, nodes, g, size, t, keep))
    inter = [c for c in out if c.link == "inter"]
    if inter:
        med = float(np.median(np.concatenate([fit.busbw(c.size[c.keep], c.t[c.keep], c.kind, c.p)
                                              / (c.gpus_per_node if c.kind != "p2p" else 1) for c in inter])))
        if med < 0.1 * line["inter"]:
            defects.append(Defect(f"{cluster} inter-node collectives", f"median busbw {med / 1e9:.2f} GB/s per GPU, "
                                  f"{line['inter'] / med:.0f}x below the {line['inter'] / 1e9:.0f} GB/s line rate: "
                                  "measured over a slow transport, not representative of a line-rate IB fabric",
                                  sum(len(c.t) for c in inter), "kept, flagged"))
    return out


# ---- nccl-tests -----------------------------------------------------------------------------
@dataclass(frozen=True)
class NcclTable:
    """An nccl-tests all_reduce_perf table: sizes (B), times (s) and bandwidths (B/s), out-of-place."""
    path: str
    p: int
    size: np.ndarray
    time: np.ndarray
    algbw: np.ndarray
    busbw: np.ndarray             # algbw * 2(p-1)/p, recomputed
    busbw_reported: np.ndarray    # the table's own busbw column (rounded to 0.01 GB/s)
    time_inplace: np.ndarray
    busbw_inplace: np.ndarray


def import_nccl_tests(path, p: int | None = None) -> NcclTable:
    """Read an all_reduce_perf table: the vTrain CSV (size(B),count,type,time(ns),busbw(GB/s) x2) or
    nccl-tests stdout (size count type redop root time(us) algbw busbw #wrong x2). The rank count comes
    from ``p``, from the file name (``GPU8``, ``_8gpu``) or from busbw/algbw = 2(p-1)/p.
    """
    path = Path(path)
    if p is not None:
        p = schema.number(p, f"{path}: rank count", int, low=2)
    lines = schema.read_text(path, "nccl-tests table").splitlines()
    rows = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    if not rows:
        raise InputError(f"{path}: no data rows (expected an nccl-tests all_reduce_perf table)")
    csv_form = "," in rows[0]
    if csv_form:
        if not rows[0].startswith("size"):
            raise InputError(f"{path}: expected a header 'size(B),count,type,time(ns),busbw(GB/s),...'")
        rows = rows[1:]
    data = []
    for i, ln in enumerate(rows):
        f = [x.strip() for x in ln.split(",")] if csv_form else ln.split()
        try:
            if csv_form:
                if len(f) != 7:
                    raise ValueError
                data.append((float(f[0]), float(f[3]) * 1e-9, float(f[4]) * 1e9, float(f[5]) * 1e-9, float(f[6]) * 1e9))
            else:
                if len(f) < 12:
                    raise ValueError
                data.append((float(f[0]), float(f[5]) * 1e-6, float(f[7]) * 1e9, float(f[9]) * 1e-6, float(f[11]) * 1e9))
        except ValueError:
            raise InputError(f"{path}: data row {i + 1} is malformed or truncated: {ln[:60]!r}") from None
    if not data:
        raise InputError(f"{path}: header only, no data rows (expected an nccl-tests all_reduce_perf table)")
    a = np.array(data)
    if not np.all(np.isfinite(a)):
        bad = int(np.argmax(~np.all(np.isfinite(a), axis=1)))
        raise InputError(f"{path}: data row {bad + 1} has a non-finite value (NaN or inf): {rows[bad][:60]!r}")
    if np.any(a <= 0):
        raise InputError(f"{path}: sizes, times and bandwidths must be positive")
    size, t, bus, t_ip, bus_ip = a.T
    alg = fit.algbw(size, t)
    if p is None:
        m = re.search(r"GPU(\d+)|(\d+)gpu", path.name, re.I)
        if m:
            p = int(next(g for g in m.groups() if g))
            if p < 2:
                raise InputError(f"{path}: the file name says {p} rank(s); an all-reduce table needs at least 2")
    ratio = float(np.median(bus / alg))
    p_data = int(round(2 / (2 - ratio))) if ratio < 2 else None
    if p is None:
        if p_data is None or p_data < 2:
            raise InputError(f"{path}: cannot tell the rank count from busbw/algbw = {ratio:.3f}; pass it explicitly")
        p = p_data
    if abs(ratio - fit.bus_factor("ar", p)) > 0.01 * fit.bus_factor("ar", p):
        raise InputError(f"{path}: busbw/algbw = {ratio:.3f} does not match all-reduce on {p} ranks "
                         f"({fit.bus_factor('ar', p):.3f})")
    return NcclTable(str(path), p, size, t, alg, fit.busbw(size, t, "ar", p), bus, t_ip, bus_ip)


# ---- SimuMax system configs ---------------------------------------------------------------------
# MooreThreads/SimuMax (Apache-2.0) keeps each machine's measured operator efficiencies in a system JSON
# (configs/system/*.json): accelerator.op.<name>.accurate_efficient_factor maps a shape description to the measured
# fraction of accelerator.op.<name>.tflops, and SimuMax prices an op as time = FLOPs / (tflops x 1e12 x factor)
# (simumax/core/config.py compute_op_time). Only the numbers are read here: the times are recovered as
# F / (tflops x factor) with F = 2 m k n (b x ng GEMMs), and fitted with this package's own GEMM roofline.
_SIMUMAX_MATMUL = re.compile(r"b=(\d+),\s*m=(\d+),\s*k=(\d+),\s*n=(\d+),\s*layout=(\w+)")
_SIMUMAX_GROUP = re.compile(r"ng=(\d+),\s*M=(\d+),\s*N=(\d+),\s*K=(\d+).*?stage=(\w+)")
# cuBLAS layouts of a Linear layer y = x W^T: TN is the forward, NN the data gradient, NT the weight gradient
# (accumulate=True: into the main grad, of the key's out_dtype); Transformer Engine GroupedLinear stages likewise
_SIMUMAX_DIR = {"TN": "fwd", "NN": "bwd", "NT": "bwd", "fwd": "fwd", "bwd_grad_act": "bwd", "bwd_grad_w": "bwd"}
_SIMUMAX_WGRAD = ("NT", "bwd_grad_w")
# the SimuMax B200 system file shipped with the package (Apache-2.0, roofline/data/simumax-b200/NOTICE.md)
SIMUMAX_B200 = Path(__file__).resolve().parents[2] / "data" / "simumax-b200" / "b200_bf16_ceperm.json"
_SIMUMAX_ACC = re.compile(r"accumulate=(\w+)")
_SIMUMAX_MAIN_GRAD = (re.compile(r"main_grad_dtype=(\w+)"), re.compile(r"(?<!_)out_dtype=(\w+)"))


def _simumax_json(path: Path) -> tuple[dict, dict]:
    """A SimuMax system JSON and its accelerator.op tables ({} when absent); one-line error when it is not JSON."""
    import json
    text = schema.read_text(path, "SimuMax system JSON")
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    d = d if isinstance(d, dict) else {}
    return d, (d.get("accelerator") or {}).get("op") or {}


def _main_grad(key: str, stage: str) -> tuple[bool, float]:
    """(accumulates, bytes per main-grad element) of a SimuMax entry: a weight gradient with accumulate=True adds
    into its main grad, of the key's main_grad_dtype (group_matmul) or out_dtype (matmul); keys without
    accumulate= are taken as not accumulating."""
    acc = _SIMUMAX_ACC.search(key)
    dt = next((d[1] for d in (r.search(key) for r in _SIMUMAX_MAIN_GRAD) if d), None)
    return (stage in _SIMUMAX_WGRAD and acc is not None and acc[1] == "True",
            4.0 if dt in ("fp32", "float32") else 2.0)


def import_simumax(path, base: str) -> Imported:
    """A SimuMax system JSON -> GEMM samples of this package's ``gemm`` class (dense matmuls fitted; the grouped
    GEMMs of its ``group_matmul`` table kept as a transfer check of the grouped-GEMM pricing), for the datasheet
    profile ``base`` (its peaks, HBM and SM count). Every other table (attention, bandwidth, collectives) is left to
    ``base``: their conventions (FLOP counts of causal attention, GiB-based bandwidths) are SimuMax's own."""
    from ...spec.hardware import load
    path = Path(path)
    d, ops_cfg = _simumax_json(path)
    mm = ops_cfg.get("matmul") or {}
    table = mm.get("accurate_efficient_factor") or {}
    if not isinstance(table, dict) or not table:
        raise InputError(f"{path}: no accelerator.op.matmul.accurate_efficient_factor table (a SimuMax system JSON "
                         "with measured matmul efficiencies is needed)")
    hw = load(base)
    out, defects = [], []

    def samples(op_name, tab, pattern, dims, tflops):
        by_dir, bad = {}, 0
        for key, eff in tab.items():
            m = pattern.search(str(key))
            ok = m is not None and isinstance(eff, (int, float)) and 0 < float(eff) <= 1
            if not ok or dims(m)[4] not in _SIMUMAX_DIR:
                bad += 1
                continue
            g, m_, k, n, stage = dims(m)
            if stage == "NT":           # a dense weight gradient m x n (= out x in) over k tokens: as its forward GEMM
                m_, k, n = k, n, m_
            acc, grad_bytes = _main_grad(str(key), stage)
            by_dir.setdefault(_SIMUMAX_DIR[stage], []).append((g, m_, k, n, float(eff), acc, grad_bytes))
        if bad:
            defects.append(Defect(f"{path.name} {op_name}", "entries whose shape or factor could not be read "
                                  "(factor must be in (0, 1])", bad, "excluded"))
        for direction, rows in by_dir.items():
            g, m_, k, n, eff, acc, grad_bytes = np.array(rows, dtype=float).T
            # F, B, dmin of one kernel of the package's GEMM op (compute.gemm: g groups of m_ rows each, bf16
            # operands); a weight gradient accumulating into the main grad adds its traffic (wgrad_extra)
            F, B, _, _, dmin, *_, extra = op_sample_metrics("gemm_sized", gemm_m=g * m_, gemm_k=k, gemm_n=n,
                                                             gemm_groups=g, grad_bytes=grad_bytes)
            B = B + acc * extra
            out.append(OpSamples(op_name, "gemm", direction, F, B, dmin, F / (tflops * eff), np.ones(len(g), dtype=bool)))

    tflops = float(mm.get("tflops", 0)) * TERA          # SimuMax states TFLOP/s
    if not tflops > 0:
        raise InputError(f"{path}: accelerator.op.matmul.tflops must be positive, got {mm.get('tflops')!r}")
    samples("gemm", table, _SIMUMAX_MATMUL,
            lambda m: (int(m[1]), int(m[2]), int(m[3]), int(m[4]), m[5]), tflops)
    grp = ops_cfg.get("group_matmul") or {}
    if grp.get("accurate_efficient_factor"):
        samples("group_matmul", grp["accurate_efficient_factor"], _SIMUMAX_GROUP,
                lambda m: (int(m[1]), int(m[2]), int(m[4]), int(m[3]), m[5]), float(grp.get("tflops", 0)) * TERA)
    if not any(o.op == "gemm" for o in out):
        raise InputError(f"{path}: no readable matmul entries ('b=.., m=.., k=.., n=.., layout=..' with a factor in (0, 1])")
    name = str(d.get("sys_name", path.stem))
    return Imported(cluster=name, gpu=hw.name, base=base, gpus_per_node=int(d.get("num_per_node") or hw.gpus_per_node),
                    ops=out, colls=[], defects=defects, source=f"SimuMax system config {path.name} (sys_name {name})")


def simumax_wgrad_ratios(path, profile: str) -> list[dict]:
    """The main-grad traffic of a grouped weight gradient, checked on a SimuMax system JSON: for each grouped GEMM
    whose weight gradient was measured accumulating into both an fp32 and a bf16 main grad (group_matmul keys
    stage=bwd_grad_w, main_grad_dtype=fp32 / bf16), the measured time ratio fp32 / bf16 beside the ratio this
    package's backward roofline of ``profile`` gives that kernel (compute.gemm wgrad_extra: 4 + 4 against 2 + 2
    bytes per weight element). Without the term both kernels would cost the same (ratio 1)."""
    from ...spec.hardware import load
    tab = (_simumax_json(Path(path))[1].get("group_matmul") or {}).get("accurate_efficient_factor") or {}
    found = {}          # (experts, tokens each, n, k, main-grad bytes) -> measured fraction of the peak
    for key, eff in tab.items():
        m = _SIMUMAX_GROUP.search(str(key))
        if m and isinstance(eff, (int, float)) and eff > 0:
            acc, grad_bytes = _main_grad(str(key), m[5])
            if acc:
                found[(int(m[1]), int(m[2]), int(m[3]), int(m[4]), grad_bytes)] = float(eff)
    hw = load(profile)
    roof, out = fit.Roofline(*hw.efficiency["gemm"]["bwd"]), []
    for (g, m_, n, k, gb_), eff in sorted(found.items()):
        if gb_ != 4.0 or (g, m_, n, k, 2.0) not in found:
            continue
        t = {}
        for gb in (4.0, 2.0):
            F, B, _, _, dmin, *_, extra = op_sample_metrics("gemm_sized", gemm_m=float(g * m_), gemm_k=float(k),
                                                            gemm_n=float(n), gemm_groups=float(g), grad_bytes=gb)
            s = fit.Samples(F / hw.peak("bf16"), (B + extra) / hw.hbm_bandwidth, dmin, F)
            t[gb] = float(fit.gpu_time(s, roof, hw.dhalf)[0])
        out.append({"groups": g, "m": m_, "n": n, "k": k, "measured": found[g, m_, n, k, 2.0] / eff,
                    "predicted": t[4.0] / t[2.0]})
    return out
