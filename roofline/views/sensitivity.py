"""What bounds a step: how the predicted step time answers each hardware resource made faster or slower.

Every time in the model is some amount of work over a rate of the hardware (FLOP over FLOP/s, bytes over
bytes/s) or a count of fixed costs (latencies, per-kernel and host issue times). The resources below partition
those inputs (roofline/model/predict.py ``hardware_inputs``): scaling all of them by f scales every term, and
so the step time, by 1/f (a test checks this over random plans). One resource alone scaled by f moves only the
terms it prices, through every max() and overlap of the step; that is the question a capacity planner asks
("would 800 Gb/s NICs pay?") and the one a roofline answers: which roof the step sits under.

For each resource the step time is priced with it ``factor`` times faster and ``factor`` times slower (rates
multiplied, fixed costs divided), and its elasticity, the share of the step time that scales with it,
e = -d ln t / d ln r, from a symmetric 1 % step. Where the step is a smooth function of the inputs the
elasticities add up to 1 (Euler's theorem for a function homogeneous of degree -1); at a kink (a max() whose two
sides are equal) the finite step reads the average of the two slopes.

>>> from roofline import resolve
>>> s = sensitivity(resolve("gpt3-1.3b", {"tp": 1, "pp": 1, "dp": 8, "global_batch": 64}, "a100-sxm4-80gb"))
>>> s.bound_by, round(sum(r["elasticity"] for r in s.resources), 3)
('tensor cores', 1.0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..base.errors import InputError
from ..base.results import MappingResult, freeze

STEP = 0.01                 # relative step of the elasticity's finite difference


@dataclass(frozen=True)
class Resource:
    key: str
    name: str
    what: str
    rate: bool              # True: a rate (multiplied when faster); False: a fixed cost (divided when faster)
    prefixes: tuple         # input names equal to, or starting with, one of these ...
    suffix: str = ""        # ... and ending with this


RESOURCES = (
    Resource("tensor", "tensor cores", "matmul FLOP/s of every dtype (peak, peak_hp)", True,
             ("peak", "peak_hp")),
    Resource("vector", "vector units", "non-matmul FLOP/s: softmax exponentials, norms, optimizer arithmetic "
             "(peak_vec)", True, ("peak_vec",)),
    Resource("hbm", "HBM", "memory bandwidth of the memory-bound kernels (hbm_bw)", True, ("hbm_bw",)),
    Resource("scale_up", "NVLink domain", "bus bandwidth of collectives and send/recv inside the NVLink domain "
             "(bw_*_intra)", True, ("bw_",), "_intra"),
    Resource("scale_out", "network", "bus bandwidth of collectives and send/recv across NVLink domains (bw_*_inter)",
             True, ("bw_",), "_inter"),
    Resource("latency", "collective latency", "latency per ring or tree step and fixed cost per call of the "
             "collectives (alpha_*, call_*)", False, ("alpha_", "call_")),
    Resource("kernel", "kernel fixed cost", "the fixed time of every kernel in the calibrated curves (t0_*)", False,
             ("t0_",)),
    Resource("host", "host CPU", "CPU time to issue the kernels of eager PyTorch (host_* issue times)", False,
             ("host_fwd", "host_bwd", "host_rc", "host_emb", "host_head", "host_mb", "host_moe_fwd",
              "host_moe_bwd", "host_launch", "host_sync")),
    Resource("host_link", "host link", "GPU-host copy bandwidth of CPU activation offload (host_link_bw)", True,
             ("host_link_bw",)),
)


def resource_keys(resource: Resource, x: dict) -> list[str]:
    """The input names of ``x`` that ``resource`` scales (exact names, or prefix ... suffix)."""
    exact = {p for p in resource.prefixes if not p.endswith("_")}
    return sorted(k for k in x if (k in exact or (k.startswith(tuple(p for p in resource.prefixes if p.endswith("_")))
                                                   and k.endswith(resource.suffix))))


def scaled(x: dict, resource: Resource, speedup: float) -> dict:
    """``x`` with ``resource`` ``speedup`` times faster: its rates times ``speedup``, its fixed costs over it."""
    y = dict(x)
    for k in resource_keys(resource, x):
        y[k] = x[k] * speedup if resource.rate else x[k] / speedup
    return y


def step_times(xs: list[dict]) -> np.ndarray:
    """The step time (s) of each input dict of ``xs``, all in one vectorized call of the compiled formulas."""
    from ..model.predict import evaluate

    stacked = {k: np.array([x[k] for x in xs], dtype=float) for k in xs[0]}
    return np.broadcast_to(evaluate(stacked)["step_time"], (len(xs),)).astype(float)


def elasticity(t_up, t_down):
    """-d ln t / d ln r from the step times with the resource (1 + STEP) times faster (``t_up``) and slower
    (``t_down``): the symmetric difference of ln t over ln r = +-ln(1 + STEP). ``+ 0.0`` turns the -0.0 of a
    resource the step does not read into 0.0."""
    return -(np.log(t_up) - np.log(t_down)) / (2 * math.log(1 + STEP)) + 0.0


def elasticities(xs: list[dict], resources=None) -> np.ndarray:
    """Rows x resources: the elasticity of each input dict's step time to each resource (default RESOURCES without
    the host link), two vectorized calls per resource over all rows."""
    resources = [r for r in RESOURCES if r.key != "host_link"] if resources is None else resources
    return np.column_stack([elasticity(step_times([scaled(x, r, 1 + STEP) for x in xs]),
                                       step_times([scaled(x, r, 1 / (1 + STEP)) for x in xs])) for r in resources])


@dataclass(frozen=True)
class Sensitivity(MappingResult):
    """The step time with each resource ``factor`` times faster and slower, and its elasticity; ``bound_by``: the
    resource of the largest elasticity."""
    UNITS = {"step_time_s": "s", "resources.faster_s": "s", "resources.slower_s": "s"}
    step_time_s: float
    factor: float
    resources: tuple         # rows: resource, what, faster_s, slower_s, elasticity
    bound_by: str

    def row(self, name: str):
        """The row of resource ``name`` ("host CPU"; ``bound_by`` for the binding one)."""
        return next(r for r in self.resources if r["resource"] == name)


def sensitivity(run, factor: float = 2.0) -> Sensitivity:
    """``run``: a Spec (roofline.resolve) or a Prediction; ``factor`` > 1: how much faster / slower each resource
    is made. The host link is listed only for a plan that offloads activations to the CPU (no other time reads it).
    All variants are priced in one vectorized call."""
    from ..model.predict import inputs

    if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 1):
        raise InputError(f"sensitivity factor must be a finite number > 1, got {factor}")
    model, plan = run.model, run.plan
    hw = run.hardware
    x = inputs(model, plan, hw)
    chosen = [r for r in RESOURCES if r.key != "host_link" or plan.offload_layers]
    variants = [x]
    for r in chosen:
        variants += [scaled(x, r, s) for s in (factor, 1 / factor, 1 + STEP, 1 / (1 + STEP))]
    t = step_times(variants)
    base = float(t[0])
    rows = []
    for i, r in enumerate(chosen):
        fast, slow, up, down = t[1 + 4 * i: 5 + 4 * i]
        rows.append({"resource": r.name, "what": r.what, "faster_s": float(fast), "slower_s": float(slow),
                     "elasticity": float(elasticity(up, down))})
    bound = max(rows, key=lambda row: row["elasticity"])["resource"]
    return Sensitivity(step_time_s=base, factor=float(factor), resources=freeze(rows), bound_by=bound)


def render(s: Sensitivity) -> str:
    """The table ``transformer --sensitivity`` prints."""
    from ..base.units import fmt_time
    from .report import Col, table

    f = f"{s.factor:g}x"
    pct = lambda v: f"{100 * (v / s.step_time_s - 1):+.1f} %"      # noqa: E731
    cols = [Col("resource", 20, "<"), Col(f"{f} faster", 12, sep="  "), Col("", 9, sep=" "),
            Col(f"{f} slower", 12, sep="  "), Col("", 9, sep=" "), Col("elasticity", 10, sep="  ")]
    # a share that rounds to zero prints 0.00, not the -0.00 of a finite difference's noise
    rows = [(r["resource"], fmt_time(r["faster_s"]), pct(r["faster_s"]), fmt_time(r["slower_s"]), pct(r["slower_s"]),
             f"{r['elasticity'] if abs(r['elasticity']) >= 0.005 else 0.0:.2f}") for r in s.resources]
    top = s.row(s.bound_by)
    return "\n".join([
        f"  what bounds the step: each resource alone {f} faster or slower (elasticity: the share of the step time "
        "that scales with it)",
        table(cols, rows, indent="    "),
        f"    bound by {s.bound_by}: {top['elasticity']:.2f} of the step scales with {top['what'].split(' (')[0]}",
    ])
