"""Megatron-Core's pipeline layer layout (``--pipeline-model-parallel-layout``): which layers each GPU holds.

The grammar and the rules are Megatron-Core's (megatron/core/transformer/pipeline_parallel_layer_layout.py,
PipelineParallelLayerLayout.parse_str_to_list and validate_layer_layout, Megatron-LM d98e8a64): ``|`` separates
the virtual stages in the order rank 0 chunk 0, rank 1 chunk 0, ..., rank p-1 chunk 0, rank 0 chunk 1, ...;
``E`` the embedding, ``t`` a transformer decoder layer, ``m`` a multi-token-prediction layer, ``L`` the loss
(final norm, LM head, cross-entropy); ``(...)*n`` and ``x*n`` repeat; commas are cosmetic. The number of
virtual stages is pp x vp (megatron/training/arguments.py sets vp = stages / pp from the layout).

>>> r = ranks("Et|(tt|)*2tmL", pp=2, interleave=2)
>>> [(x.layers, x.embedding, x.loss, x.mtp) for x in r]
[(3, True, False, 0), (3, False, True, 1)]
>>> r[0].decoder_ids
(0, 3, 4)
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..base.errors import InputError

CHARS = "ELtm"


@dataclass(frozen=True)
class Rank:
    """What one physical pipeline rank holds, over all its virtual stages."""
    layers: int                    # decoder ('t') layers
    embedding: bool                # holds 'E'
    loss: bool                     # holds 'L'
    mtp: int                       # 'm' layers
    decoder_ids: tuple             # the model's decoder layer indices it holds (0-based, layer order)

    def dense(self, first_dense: int) -> int:
        """Of its decoder layers, those among the model's first ``first_dense`` (a MoE's leading dense layers)."""
        return sum(1 for i in self.decoder_ids if i < first_dense)


def stages(text: str) -> list[str]:
    """The virtual stages of a layout string, repeats unrolled (parse_str_to_list's two substitutions)."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"pipeline_layout must be a non-empty layout string such as 'Et|(tt|)*30mL', got {text!r}")
    s = text.replace(",", "").replace(" ", "")
    for pattern in (r"\(([^()]+)\)\*(\d+)", r"(.)\*(\d+)"):
        s = re.sub(pattern, lambda x: x.group(1) * int(x.group(2)), s)
    bad = sorted(set(s) - set(CHARS + "|"))
    if bad:
        raise InputError(f"pipeline_layout may hold only {', '.join(CHARS)}, '|', '(...)*n' and 'x*n', "
                         f"got {''.join(bad)!r} in {text!r}")
    return s.split("|")


def ranks(text: str, pp: int, interleave: int = 1, layers: int | None = None, mtp: int | None = None) -> list[Rank]:
    """Per physical rank (0..pp-1) what a layout puts on it, after Megatron-Core's validity rules: pp x interleave
    virtual stages, exactly one E (the first entry) and one L (the last), the count of t = ``layers`` and of m =
    ``mtp`` when given, no t after an m, m only in a rank's last virtual stage and never on the first rank
    (validate_layer_layout)."""
    st = stages(text)
    if len(st) != pp * interleave:
        raise InputError(f"pipeline_layout must have pp x interleave = {pp} x {interleave} = {pp * interleave} "
                         f"virtual stages ('|'-separated), got {len(st)} in {text!r}")
    flat = "".join(st)
    if flat.count("E") != 1 or flat.count("L") != 1 or not flat.startswith("E") or not flat.endswith("L"):
        raise InputError(f"pipeline_layout must hold exactly one E, first, and one L, last, got {text!r}")
    if layers is not None and flat.count("t") != layers:
        raise InputError(f"pipeline_layout must hold the model's {layers} decoder layers (t), got {flat.count('t')}")
    if mtp is not None and flat.count("m") != mtp:
        raise InputError(f"pipeline_layout must hold the model's {mtp} MTP layers (m), got {flat.count('m')}")
    if "m" in flat and "t" in flat[flat.index("m"):]:
        raise InputError(f"pipeline_layout must place every decoder layer (t) before the MTP layers (m), got {text!r}")
    for j, s in enumerate(st):
        rank, chunk = j % pp, j // pp
        if "m" in s and (chunk != interleave - 1 or (rank == 0 and pp > 1)):
            raise InputError(f"pipeline_layout must place MTP layers (m) in a rank's last virtual stage, not on "
                             f"the first rank, got {s!r} as rank {rank} chunk {chunk}")
    ids: list[list[int]] = [[] for _ in range(pp)]
    n = 0
    for j, s in enumerate(st):                             # stages in layer order (get_layer_offset)
        for c in s:
            if c == "t":
                ids[j % pp].append(n)
                n += 1
    out = []
    for r in range(pp):
        held = "".join(st[c * pp + r] for c in range(interleave))
        out.append(Rank(held.count("t"), "E" in held, "L" in held, held.count("m"), tuple(ids[r])))
    return out


def stage_counts(text: str, pp: int, interleave: int = 1, first_dense: int = 0, layers: int | None = None,
                 mtp: int | None = None, schedule: str = "1f1b") -> dict[str, float]:
    """The formula inputs of a layout (formulas/symbols.py ``layout_*``): decoder layers and, of them, leading
    dense layers on the rank holding the embedding, on the rank holding the loss, and on the busiest other rank
    (the most decoder layers; among equals the one with the fewest dense layers: a MoE layer carries a dense
    layer's attention plus routed experts and the EP all-to-all). With pp = 1 the one rank is first and last;
    "other" is then empty (0 layers).

    DualPipe (``schedule`` "dualpipe"): the layout's pp stages in order, rank i holding stages i and pp-1-i
    (deepseek-ai/DualPipe dualpipe/dualpipe.py); first and last are the stages of the edge rank (both on it), and the
    busiest other rank is the pair of stages with the most layers, given as its mean per stage (each micro-batch
    passes one of the two)."""
    rs = ranks(text, pp, interleave, layers, mtp)
    first = next(r for r in rs if r.embedding)
    last = next(r for r in rs if r.loss)
    if any(r.mtp and not r.loss for r in rs):
        raise InputError(f"pipeline_layout with the MTP layers (m) on a rank other than the loss's (L) (Megatron-Core "
                         f"mtp_standalone) is not modelled, got {text!r}")
    if schedule == "dualpipe":
        pairs = [(rs[i].layers + rs[pp - 1 - i].layers, rs[i].dense(first_dense) + rs[pp - 1 - i].dense(first_dense))
                 for i in range(1, pp // 2)]
        n, d = max(pairs, key=lambda x: (x[0], -x[1]), default=(0, 0))
        return {"layout_first": first.layers, "layout_first_dense": first.dense(first_dense),
                "layout_last": last.layers, "layout_last_dense": last.dense(first_dense),
                "layout_mid": n / 2, "layout_mid_dense": d / 2}
    others = [r for r in rs if not r.embedding and not r.loss]
    mid = max(others, key=lambda r: (r.layers, -r.dense(first_dense)), default=None)
    return {"layout_first": first.layers, "layout_first_dense": first.dense(first_dense),
            "layout_last": last.layers, "layout_last_dense": last.dense(first_dense),
            "layout_mid": mid.layers if mid else 0, "layout_mid_dense": mid.dense(first_dense) if mid else 0}


def dualpipe_balanced(layers: int, pp: int, mtp: int = 0) -> str:
    """DualPipe's stage split as DeepSeek-V3 ran it, for a model of ``layers`` decoder layers on ``pp`` (even) stages: the
    middle stages take ceil(layers / pp) layers each (fewer when that leaves the edges none), and the first and the
    last stage share the rest, the first the larger half, the last the MTP layers and the loss. DeepSeek-V3's 61 layers
    on 16 stages: 4 layers on each middle stage (deepseek-ai/profile-data, training: "Each chunk contains 4 MoE layers",
    its parallel configuration "aligns with DeepSeek-V3 pretraining settings"), 3 and 2 on the edges, which also
    hold the embedding, the LM head and the MTP layer (rank 0 holds both edge stages under DualPipe). The even split
    (ceil(layers / pp) on every stage) would put the edges on top of a full stage, which no run would choose.

    >>> dualpipe_balanced(61, 16, 1)
    'Ettt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|tttt|ttmL'
    """
    mid = -(-layers // pp) if pp > 2 else 0
    if pp > 2 and (pp - 2) * mid > layers:
        mid = layers // (pp - 2)
    rest = layers - (pp - 2) * mid
    first = -(-rest // 2)
    return "|".join(["E" + "t" * first] + ["t" * mid] * (pp - 2) + ["t" * (rest - first) + "m" * mtp + "L"])
