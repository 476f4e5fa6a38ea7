"""Compute-optimal sizing: the largest model (and its token count) that a budget trains.

Budget: GPU-hours, or USD at a GPU-hour price, or days on ``n_gpus``. Tokens per parameter:
Chinchilla's 20 (Hoffmann et al. 2022, Table 3: ~20 tokens per parameter at the compute-optimal
frontier) unless given. For each candidate size the best plan comes from :func:`roofline.views.search.search`,
so the answer carries the achieved MFU; it is compared with the naive ``C = 6 N D`` at peak answer.

Shapes follow one documented scaling rule (:func:`scaled_model`), read off the LLaMA-3 family
(8B: d 4096, 32 layers; 70B: d 8192, 80 layers; 405B: d 16384, 126 layers):

- d_model a multiple of 512, head dim 128 (heads = d_model / 128), GQA with 8 KV heads
  (gcd(heads, 8) when heads is not a multiple of 8),
- layers = d_model / 128 (aspect ratio d_model / layers = 128, as LLaMA-3 8B, 405B and GPT-3 175B),
- SwiGLU MLP with LLaMA-3's ffn = 1.3 x 8/3 x d_model rounded up to a multiple of 1024,
- RMSNorm, RoPE, no biases, untied embeddings, vocab 128256.

>>> m = scaled_model(4096)
>>> (m.n_layers, m.n_heads, m.kv_heads, m.ffn)
(32, 32, 8, 14336)
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..base.errors import InputError
from ..base.precision import NAMES as DTYPES
from ..base.results import Result, freeze
from ..base.units import DAY, HOUR, KILO, MEGA, count_text, fmt_bytes, fmt_time

CHINCHILLA_TOKENS_PER_PARAM = 20.0
D_STEP = 512
D_MAX = 65536


def scaled_model(d_model: int, *, vocab: int = 128256, seq_len: int = 4096):
    """A LLaMA-3-like dense model of width ``d_model`` (see the module docstring for the rule)."""
    from ..spec.config import Model

    heads = d_model // 128
    ffn = -(-int(1.3 * 8 * d_model / 3) // 1024) * 1024
    return Model(name=f"scaled-d{d_model}", n_layers=d_model // 128, d_model=d_model, n_heads=heads,
                 n_kv_heads=math.gcd(heads, 8), ffn_hidden=ffn, mlp="swiglu", norm="rmsnorm", vocab=vocab,
                 seq_len=seq_len, tied_embeddings=False, position="rope", biases=False, attention="flash")


def param_count(model) -> float:
    """Parameters of a model, from the compiled formulas (one scalar evaluate)."""
    from ..spec.hardware import load
    from ..spec.config import Plan
    from ..model.predict import evaluate, inputs

    return float(evaluate(inputs(model, Plan(), load("a100-sxm4-80gb")))["params"])


@dataclass(frozen=True)
class BudgetPlan(Result):
    """The largest model a budget trains at the given tokens per parameter, with its best plan.
    ``to_dict()`` keeps the keys ``plan --json`` has always printed (``best_plan``: the Candidate's) and adds ``units``."""
    UNITS = {"budget_gpu_hours": "hour", "next_size.gpu_hours": "hour"}     # best_plan.*: the Candidate's units
    model: object                   # roofline.spec.config.Model
    params: float
    tokens: float                   # tokens_per_param x params
    best: object                    # roofline.views.search.Candidate (with run_days, gpu_hours, cost, energy)
    budget_gpu_hours: float
    tokens_per_param: float
    n_gpus: int
    next_size: object | None        # the next larger size's {params, gpu_hours needed} when over budget (read-only)
    naive_params: float             # C = 6 N D at 100 % of peak, D = tokens_per_param N
    naive_params_at_mfu: float      # the same at the achieved MFU
    sizes_evaluated: int

    def items_by_key(self) -> dict:
        nxt = self.next_size
        return {"model": self.model, "params": self.params,
                "tokens": self.tokens, "tokens_per_param": self.tokens_per_param, "n_gpus": self.n_gpus,
                "budget_gpu_hours": self.budget_gpu_hours, "best_plan": self.best,
                "mfu": self.best.mfu, "naive_params_6ND_at_peak": self.naive_params,
                "naive_tokens_6ND_at_peak": self.naive_params * self.tokens_per_param,
                "naive_params_6ND_at_achieved_mfu": self.naive_params_at_mfu,
                "next_size": nxt and {**nxt, "gpu_hours": nxt["gpu_hours"] if math.isfinite(nxt["gpu_hours"]) else None},
                "sizes_evaluated": self.sizes_evaluated}      # gpu_hours None: no plan of that size fits in memory


def _positive(what, v) -> float:
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise InputError(f"{what} must be a positive number, got {v!r}")
    return float(v)


def budget_gpu_hours(n_gpus: int, *, gpu_hours=None, usd=None, gpu_hour_price=None, days=None) -> float:
    """One GPU-hour budget from exactly one of gpu_hours, usd (with gpu_hour_price) or days."""
    given = [k for k, v in (("budget-gpu-hours", gpu_hours), ("budget-usd", usd), ("days", days)) if v is not None]
    if len(given) != 1:
        raise InputError("give exactly one budget: --budget-gpu-hours, --budget-usd (with --gpu-hour-price) or --days"
                         + (f" (got {', '.join(given)})" if given else ""))
    if gpu_hours is not None:
        return _positive("budget-gpu-hours", gpu_hours)
    if usd is not None:
        usd = _positive("budget-usd", usd)
        return usd / _positive("gpu-hour-price (needed with --budget-usd)", gpu_hour_price)
    return _positive("days", days) * (DAY / HOUR) * n_gpus


MAX_GPUS = 2 ** 20      # the bound of `search --gpus` (roofline/views/search.py gpu_range): bounded work


def plan_budget(hw, n_gpus: int, *, gpu_hours=None, usd=None, gpu_hour_price=None, days=None,
                tokens_per_param: float = CHINCHILLA_TOKENS_PER_PARAM, seq_len: int = 4096,
                global_batch: int | None = None, vocab: int = 128256, framework: str = "megatron-core",
                base=None) -> BudgetPlan:
    """The largest :func:`scaled_model` whose tokens_per_param x params tokens fit the budget.

    ``global_batch`` (sequences) defaults to 4M tokens (2**22 / seq_len, at least 1). The GPU-hours
    a size needs, ``tokens / tokens_per_s(best plan) x n_gpus``, grow about as params**2, so the
    sizes are scanned by doubling d_model and then bisected on the multiples of 512.

    Inputs are checked before any search (issue 22), and a failure names its cause: a bad model field
    (``roofline.spec.config.check`` on the smallest size), no parallel split of the GPUs at any size
    (divisibility), no plan of the smallest size that fits in memory, or a budget below what the
    smallest size needs.
    """
    from ..base import schema
    from ..spec.config import check
    from .search import rank
    from .space import _stack, default_base, evaluate_space

    n_gpus = schema.number(n_gpus, "gpus", int, low=1, high=MAX_GPUS)
    budget = budget_gpu_hours(n_gpus, gpu_hours=gpu_hours, usd=usd, gpu_hour_price=gpu_hour_price, days=days)
    k = _positive("tokens-per-param", tokens_per_param)
    seq_len = schema.number(seq_len, "seq-len", int, low=1)
    vocab = schema.number(vocab, "vocab", int, low=1)
    if global_batch is None:
        global_batch = max(1, 2**22 // seq_len)
    global_batch = schema.number(global_batch, "global-batch", int, low=1)
    if gpu_hour_price is not None:
        schema.number(gpu_hour_price, "gpu-hour-price", float, low=0.0)
    _stack(framework)                       # an unknown framework is named here, not taken as "budget too small"
    base = base if base is not None else default_base(framework)
    # the model first: a bad field (vocab, seq-len, dtype) is named, never taken as "does not fit"
    check(scaled_model(D_STEP, vocab=vocab, seq_len=seq_len),
          dataclasses.replace(base, tp=1, pp=1, dp=1, cp=1, ep=1, micro_batch=1, global_batch=None, interleave=1,
                              schedule="1f1b"))
    cache = {}

    def need(d: int):
        """(GPU-hours needed, best Candidate or None, model, params, why) of width d; why is None, "split"
        (no tp x pp x dp x cp split of the GPUs meets the divisibility rules) or "memory" (none fits)."""
        if d not in cache:
            m = scaled_model(d, vocab=vocab, seq_len=seq_len)
            P = param_count(m)
            space = evaluate_space(m, hw, n_gpus, global_batch, base=base, framework=framework)
            if space.valid == 0:
                cache[d] = (math.inf, None, m, P, "split", space)
            elif space.n_fit == 0:
                cache[d] = (math.inf, None, m, P, "memory", space)
            else:
                c = rank(space, top=1, tokens=k * P, gpu_hour_price=gpu_hour_price)[0]
                cache[d] = (c.gpu_hours, c, m, P, None, None)
        return cache[d][:5]

    # the smallest size with a parallel split of n_gpus (a split needs tp | heads, pp | layers: a size
    # whose heads and layers (d/128) carry a factor of the GPU count may have one where d = 512 has none)
    lo = D_STEP
    while need(lo)[4] == "split" and lo + D_STEP <= D_MAX:
        lo += D_STEP
    h, c, m, P, why = need(lo)
    if why == "split":
        m0 = need(D_STEP)[2]
        raise InputError(
            f"no parallel split of {n_gpus} GPUs fits any size from d_model {D_STEP} to {D_MAX}: no tp x pp x dp x cp "
            f"meets the divisibility rules (tp | heads and pp | layers, both d_model/128; cp | seq-len {seq_len}; "
            f"dp | global batch {global_batch}; smallest size {m0.name}: {m0.n_heads} heads, {m0.n_layers} layers); "
            f"use a GPU count with more factors of 2 or another --global-batch")
    if why == "memory":
        from .search import _no_fit_message
        raise InputError(f"no plan of the smallest size fits in memory: {_no_fit_message(cache[lo][5])}")
    if h > budget:
        raise InputError(f"budget of {budget:.4g} GPU-hours is too small: the smallest size ({m.name}, {P / MEGA:.0f} M "
                         f"params, {k:g} tokens/param) needs {h:.4g} GPU-hours on {n_gpus} GPUs")
    hi = lo
    while need(hi)[0] <= budget and hi < D_MAX:     # doubling scan
        lo, hi = hi, min(2 * hi, D_MAX)
    if need(hi)[0] <= budget:
        lo = hi
    while hi - lo > D_STEP:                          # bisection on multiples of D_STEP
        mid = (lo + hi) // 2 // D_STEP * D_STEP
        if need(mid)[0] <= budget:
            lo = mid
        else:
            hi = mid
    # the need is nearly but not exactly monotone (divisibility): try two sizes above the answer
    for d in (lo + D_STEP, lo + 2 * D_STEP):
        if d <= D_MAX and need(d)[0] <= budget:
            lo = d
    h, c, m, P, _ = need(lo)
    nxt = need(lo + D_STEP) if lo + D_STEP <= D_MAX else None
    flops = budget * HOUR * hw.peak(c.plan.dtype)    # C = GPU-seconds x peak FLOP/s per GPU
    naive = math.sqrt(flops / (6 * k))
    return BudgetPlan(model=m, params=P, tokens=k * P, best=c, budget_gpu_hours=budget, tokens_per_param=k,
                      n_gpus=n_gpus, next_size=None if nxt is None else freeze({"params": nxt[3], "gpu_hours": nxt[0]}),
                      naive_params=naive, naive_params_at_mfu=math.sqrt(flops * c.mfu / (6 * k)),
                      sizes_evaluated=len(cache))


def render(r: BudgetPlan, hw) -> str:
    from .search import _plan_text

    m, c = r.model, r.best
    lines = [
        f"plan: budget {r.budget_gpu_hours:.4g} GPU-hours on {r.n_gpus} x {hw.id}, {r.tokens_per_param:g} tokens/param",
        f"  largest model   {m.name}: {count_text(r.params)} ({m.n_layers} layers x d {m.d_model}, heads "
        f"{m.n_heads}, kv {m.kv_heads}, ffn {m.ffn}, swiglu, seq {m.seq_len})",
        f"  tokens          {r.tokens:.4g}",
        f"  best plan       {_plan_text(c.plan)}, global batch {c.plan.batch}",
        f"  step time       {fmt_time(c.step_time_s)}   memory/GPU {fmt_bytes(c.memory_bytes, 1)}   MFU {100 * c.mfu:.1f} %",
        f"  run             {c.run_days:.1f} days, {c.gpu_hours:.4g} GPU-hours"
        + (f", {c.cost_usd:.4g} USD" if c.cost_usd is not None else "")
        + (f", {c.energy_kwh / KILO:.4g} MWh" if c.energy_kwh is not None else ""),
    ]
    if r.next_size:
        need = r.next_size["gpu_hours"]
        lines.append(f"  next size up    {count_text(r.next_size['params'])} would need "
                     + (f"{need:.4g} GPU-hours" if math.isfinite(need) else f"more memory: no plan fits on {r.n_gpus} GPUs"))
    lines += [
        f"  naive 6ND/peak  {count_text(r.naive_params)}, {r.naive_params * r.tokens_per_param:.4g} tokens "
        f"(100 % MFU); at the achieved {100 * c.mfu:.1f} % MFU: {count_text(r.naive_params_at_mfu)}",
        f"  ({r.sizes_evaluated} sizes searched; shapes: d_model multiple of {D_STEP}, layers d/128, heads d/128, GQA 8, "
        f"LLaMA-3 SwiGLU ffn)",
    ]
    return "\n".join(lines)


def cmd_plan(args) -> int:
    import json

    from ..spec import hardware
    from .search import default_base

    hw = hardware.load(args.gpu)
    if args.gpus is None:
        raise InputError("plan needs --gpus (the cluster size)")
    base = dataclasses.replace(default_base(args.framework), **({"dtype": args.dtype} if args.dtype else {}))
    r = plan_budget(hw, args.gpus, gpu_hours=args.budget_gpu_hours, usd=args.budget_usd,
                    gpu_hour_price=args.gpu_hour_price, days=args.days, tokens_per_param=args.tokens_per_param,
                    seq_len=args.seq_len, global_batch=args.global_batch, vocab=args.vocab, framework=args.framework,
                    base=base)
    print(json.dumps(r.to_dict(), indent=1) if args.json else render(r, hw))
    return 0


def register(subparsers) -> None:
    from ..spec.cliargs import flag

    p = subparsers.add_parser("plan", help="compute-optimal sizing: the largest model a budget trains",
                              description="Largest LLaMA-3-shaped model (and its tokens) trainable within a budget, "
                                          "at Chinchilla's 20 tokens/param by default, with the best parallel plan.")
    flag(p, "budget-gpu-hours", dest="budget_gpu_hours", type=float, help="GPU-hour budget")
    flag(p, "budget-usd", dest="budget_usd", type=float, help="USD budget (needs --gpu-hour-price)")
    flag(p, "days", type=float, help="wall-clock budget in days on --gpus GPUs")
    flag(p, "gpu-hour-price", dest="gpu_hour_price", type=float, help="USD per GPU-hour")
    flag(p, "gpus", type=int, help="cluster size (GPUs)")
    flag(p, "gpu", default="h100-sxm", help="hardware profile id or YAML path (default h100-sxm)")
    flag(p, "tokens-per-param", dest="tokens_per_param", type=float, default=CHINCHILLA_TOKENS_PER_PARAM,
         help="training tokens per parameter (default 20, Chinchilla)")
    flag(p, "seq-len", dest="seq_len", type=int, default=4096, help="sequence length (default 4096)")
    flag(p, "global-batch", dest="global_batch", type=int, help="sequences per step (default 4M tokens)")
    flag(p, "vocab", type=int, default=128256, help="vocabulary (default LLaMA-3's 128256)")
    flag(p, "dtype", choices=tuple(d for d in DTYPES if d != "fp32"),
         help="training precision (default the framework's; docs/models.md 'Precision')")
    flag(p, "framework", default="megatron-core", help="defaults for dtype and overlaps (default megatron-core)")
    flag(p, "json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_plan)
