"""The validity rules are written once (config.RULES, stacks.plan_rules) and run two ways: check() on one plan,
and the same Rule objects on numpy arrays of plans (search's masks). These tests say the two agree: for random
models and plans, check() raises exactly for the plans that the array evaluation rejects, and the plans that
search enumerates are exactly those of its knob space that check() (and the stack's rules) accept."""
import dataclasses
import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.spec import stacks
from roofline.spec.config import RECOMPUTE, RULES, SHARDING, SHARDING_BY_STAGE, ZERO_STAGE, Model, Plan, check, holds, stage_name
from roofline.base.errors import InputError
from roofline.views.search import divisors, enumerate_plans

STACKS = [None, "megatron-core", "deepspeed-zero", "fsdp", "megatron-lm-2021", "torchtitan", "plain"]


def some(valid, invalid=()):
    """Mostly valid values, sometimes invalid ones (so that every rule fails now and then)."""
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid), st.sampled_from(valid),
                     *([st.sampled_from(invalid)] if invalid else []))


@st.composite
def models(draw, valid: bool = False):
    some_ = (lambda ok, bad=(): st.sampled_from(ok)) if valid else some
    heads = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 12]))
    experts = draw(st.sampled_from([1, 1, 2, 4, 8]))
    kw = dict(n_layers=draw(some_([1, 2, 3, 4, 6, 8, 12], [0])), n_heads=heads,
              d_model=draw(some_([heads * 32, heads * 48], [heads * 32 + 1, 100])),
              n_kv_heads=draw(some_([None, 1, 2, heads], [3, 0])), ffn_hidden=draw(some_([None, 96, 192, 256], [100])),
              seq_len=draw(some_([32, 48, 64, 96])), vocab=draw(some_([512], [0])), n_experts=experts,
              top_k=draw(some_([1, min(2, experts)], [experts + 1])),
              mlp=draw(some_(["gelu", "swiglu", "squared_relu"], ["relu"])))
    if experts > 1:
        kw.update(moe_ffn_hidden=draw(some_([None, 48, 64], [50])),
                  first_dense_layers=draw(some_([None, 0, 1], [12])),
                  n_shared_experts=draw(some_([None, 0, 1], [-1])))
    return Model(**kw)


PLAN_VALUES = dict(tp=some([1, 2, 3, 4, 8], [0, 2.0]), pp=some([1, 2, 3, 4], [0]), dp=some([1, 2, 3, 4, 8], [-2]),
                   cp=some([1, 2, 3, 4]), ep=some([1, 2, 4, 8], [0]), micro_batch=some([1, 2, 3, 4]),
                   global_batch=some([8, 12, 16, 24, 48, 96], [0]), interleave=some([1, 2, 3]),
                   schedule=some(["1f1b", "interleaved", "gpipe", "dualpipev"], ["zb"]),
                   recompute=some(list(RECOMPUTE), ["some"]), sharding=some(list(SHARDING), ["zero4"]),
                   dtype=some(["bf16", "fp8"], ["int4"]), overlap_tp=some([0.0, 0.5, 1.0], [1.5]),
                   recompute_modules=some(["core_attn", "", "moe_act,layernorm", "mla_up_proj", "mlp,moe"],
                                          ["bogus", "core_attn,everything"]),
                   uneven_stages=st.booleans())


@st.composite
def plans(draw):
    return Plan(**{k: draw(v) for k, v in PLAN_VALUES.items()})


def array_plan(rows: list[Plan]):
    """Plans as one object of numpy columns, the shape search gives the rules."""
    cols = {f.name: np.array([getattr(p, f.name) for p in rows]) for f in dataclasses.fields(Plan)}
    cols["batch"] = np.array([p.batch for p in rows])
    cols["zero_stage"] = np.array([ZERO_STAGE.get(p.sharding, 0) for p in rows])
    return SimpleNamespace(**cols)


def scalar_ok(model, plan, rules_of_stack=()) -> bool:
    try:
        check(model, plan)
        for r in rules_of_stack:            # as spec.resolve raises them
            if not r.ok(model, plan):
                raise InputError(r.text(model, plan))
    except InputError:
        return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=models(), rows=st.lists(plans(), min_size=1, max_size=40), stack=st.sampled_from(STACKS))
def test_check_raises_iff_the_array_rules_reject(model, rows, stack):
    extra = stacks.plan_rules(stacks.get(stack)) if stack else ()
    expect = np.array([scalar_ok(model, p, extra) for p in rows])
    got = holds(RULES + tuple(extra), model, array_plan(rows))
    np.testing.assert_array_equal(np.broadcast_to(got, expect.shape), expect)
    for p, e in zip(rows, expect):          # and one plan at a time through the same function
        assert bool(holds(RULES + tuple(extra), model, p)) == e


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=models(valid=True), n=st.sampled_from([1, 2, 3, 4, 6, 8, 12]), batch=st.sampled_from([1, 2, 4, 6, 8, 12]),
       stack=st.sampled_from(STACKS), pinned=st.sampled_from([None, "gpipe", "dualpipev"]))
def test_search_enumerates_exactly_the_plans_check_accepts(model, n, batch, stack, pinned):
    try:
        check(model, Plan())
    except InputError:
        return                              # (d_model % heads, ...) search checks the model first (evaluate_space)
    st_ = stacks.get(stack) if stack else None
    extra = stacks.plan_rules(st_) if st_ else ()
    try:
        knobs, _ = enumerate_plans(model, n, batch, schedule=pinned, stack=st_, recompute="none",
                                   sequence_parallel=False)
    except InputError:
        knobs = {k: [] for k in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "interleave", "sharding")}
    got = set(zip(*(np.asarray(knobs[k]).tolist() for k in ("tp", "pp", "dp", "cp", "ep", "micro_batch",
                                                            "interleave", "sharding"))))
    expect = set()
    dn = divisors(n)
    for tp, pp, cp in itertools.product(dn, dn, dn):
        if n % (tp * pp * cp):
            continue
        dp = n // (tp * pp * cp)
        for ep, mb, v, z in itertools.product(divisors(model.n_experts), divisors(batch),
                                              {"gpipe": [1], "dualpipev": [2]}.get(pinned, divisors(model.n_layers)),
                                              SHARDING_BY_STAGE):
            plan = Plan(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, micro_batch=mb, global_batch=batch, interleave=v,
                        schedule=pinned or ("interleaved" if v > 1 else "1f1b"), sharding=z)
            if scalar_ok(model, plan, extra):
                expect.add((tp, pp, dp, cp, ep, mb, v, ZERO_STAGE[z]))
    assert got == expect


def test_first_failing_rule_names_itself_in_check_order():
    """Hand-made pairs breaking two rules: the one listed first in check's order is the message."""
    m = Model(n_layers=30, d_model=768, n_heads=12)
    with pytest.raises(InputError, match=r"^heads \(12\) must be divisible by tp \(8\)$"):
        check(m, Plan(tp=8, pp=4))                      # also breaks layers % pp
    with pytest.raises(InputError, match=r"^layers \(30\) must be divisible by pp x interleave \(4 x 1 = 4\); "
                                         r"allow uneven stages with --uneven-stages$"):
        check(m, Plan(tp=4, pp=4, dp=2, global_batch=3))   # also breaks the batch rule
    with pytest.raises(InputError, match=r"^global batch \(3\) must be divisible by micro-batch x dp "
                                         r"\(1 x 2 = 2\)$"):
        check(m, Plan(tp=4, pp=3, dp=2, global_batch=3))
    with pytest.raises(InputError, match=r"^interleaved 1F1B needs micro-batches \(3\) divisible by pp \(2\)$"):
        check(m, Plan(pp=2, interleave=3, dp=2, global_batch=6, schedule="interleaved"))


def test_stack_rules_messages():
    ds = stacks.get("deepspeed-zero")
    rules = stacks.plan_rules(ds)
    bad = Plan(pp=2, sharding="zero2")
    failing = [r.text(None, bad) for r in rules if not r.ok(None, bad)]
    assert failing == [f"stack deepspeed-zero cannot run ZeRO-2 (zero2) with pp 2: {ds.sources['max_zero_with_pp']}"]
    assert all(r.ok(None, Plan(pp=1, sharding="zero3")) for r in rules)
    # sharding names compare by ZeRO stage: Megatron-Core lists fsdp, so zero3 (the same stage) is accepted
    mc = stacks.plan_rules(stacks.get("megatron-core"))
    assert all(r.ok(None, Plan(sharding="zero3")) for r in mc if r.reads == ("sharding",))
    assert not all(r.ok(None, Plan(sharding="zero2")) for r in mc if r.reads == ("sharding",))


@pytest.mark.parametrize("sid, plan, needle", [
    ("megatron-lm-2021", Plan(cp=2), "no context parallelism (cp 2): --context-parallel-size came to Megatron-LM in 2023-10"),
    ("fsdp", Plan(cp=2), "no context parallelism (cp 2): torch.distributed.fsdp (FSDP1)"),
    ("metaseq", Plan(pp=2), "no pipeline parallelism (pp 2): metaseq trains with --model-parallel-size"),
    ("metaseq", Plan(recompute="selective"), "cannot run recompute 'selective'"),
])
def test_stacks_without_an_axis_refuse_it_with_the_source(sid, plan, needle):
    """Rules 'pipeline' and 'context_parallel' (stacks/*.yaml): a plan using an axis the stack lacks fails with one
    message naming it; the same stacks run cp = pp = 1, and Megatron-Core runs both axes."""
    rules = stacks.plan_rules(stacks.get(sid))
    failing = [r.text(None, plan) for r in rules if not r.ok(None, plan)]
    assert len(failing) == 1 and needle in failing[0], failing
    assert all(r.ok(None, Plan()) for r in rules if r.reads in (("cp",), ("pp",)))
    mc = stacks.plan_rules(stacks.get("megatron-core"))
    assert all(r.ok(None, Plan(cp=2, pp=2)) for r in mc if r.reads in (("cp",), ("pp",)))


@given(name=st.sampled_from(SHARDING))
def test_stage_names(name):
    assert ZERO_STAGE[stage_name(name)] == ZERO_STAGE[name] == Plan(sharding=name).zero_stage
    assert stage_name(name) in SHARDING_BY_STAGE and SHARDING_BY_STAGE.index(stage_name(name)) == ZERO_STAGE[name]


@pytest.mark.parametrize("kv, tp, ok", [(4, 8, True), (4, 2, True), (4, 4, True), (6, 4, False), (3, 2, False)])
def test_kv_heads_and_tp_either_divides(kv, tp, ok):
    """Hand-computed: kv-heads | tp or tp | kv-heads (GQA groups split over tp, or replicated when tp > kv)."""
    m = Model(n_layers=4, d_model=12 * 64, n_heads=12 if kv in (6, 3) else 16, n_kv_heads=kv,
              ffn_hidden=3072)
    plan = Plan(tp=tp, global_batch=1)
    if ok:
        check(m, plan)
    else:
        with pytest.raises(InputError, match=rf"^kv-heads \({kv}\) must be divisible by tp \({tp}\) \(or tp by kv-heads\)$"):
            check(m, plan)
    assert holds(RULES, m, array_plan([plan])).tolist() == [ok]
