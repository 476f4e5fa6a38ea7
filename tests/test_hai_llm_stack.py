"""HAI-LLM, DeepSeek's trainer, as a registry stack (stacks/hai-llm.yaml, hai-llm-2024.yaml): what the DeepSeek-V3 report
says of its run (DualPipe, node-deduplicated all-to-all hidden behind compute, fine-grained FP8, BF16 moments,
RMSNorm / MLA up-projection recomputation, ZeRO-1), and the 2023-2024 version before those."""
import collections
import glob

import pytest
import yaml

from roofline.base import normalize
from roofline.base.errors import InputError
from roofline.model.predict import predict
from roofline.spec import stacks
from roofline.spec.resolve import resolve
from roofline.views import validate as V

V3 = dict(pp=16, ep=64, dp=128, global_batch=15360, micro_batch=1)     # arXiv:2412.19437 sec 3.2, 2048 H800


def _spec(stack="hai-llm", model="deepseek-v3", hw="h800", **plan):
    return resolve(model, {**V3, **plan}, hw, stack)


def test_defaults_are_what_the_v3_report_states():
    s = _spec()
    p = s.plan
    assert (p.schedule, p.ep_dispatcher, p.overlap_ep, p.dtype, p.sharding) == ("dualpipe", "deepep", 1.0, "fp8-block",
                                                                             "zero1")
    assert (p.recompute, p.recompute_module_set, p.moment_dtype) == ("selective", {"layernorm", "mla_up_proj"}, "bf16")
    assert not p.per_expert_kernels
    assert s.origin["schedule"].startswith("rule: hai-llm runs dualpipe")
    assert all(s.origin[k] == "stack hai-llm" for k in ("ep_dispatcher", "overlap_ep", "dtype", "moment_dtype"))


@pytest.mark.parametrize("plan, why", [
    (dict(pp=15, dp=136, ep=8, global_batch=15232), "odd pp"),
    (dict(global_batch=3072, dp=128), "24 micro-batches < 2 pp = 32"),
])
def test_dualpipe_only_where_the_layout_runs_it(plan, why):
    """DualPipe.step asserts an even pp and an even micro-batch count of at least 2 pp (deepseek-ai/DualPipe); elsewhere
    the stack's 1F1B."""
    assert _spec(**plan).plan.schedule == "1f1b", why


def test_a_stated_schedule_or_fp8_keeps_the_stack_meaning():
    assert _spec(schedule="1f1b").plan.schedule == "1f1b"
    # the report's "FP8" is its fine-grained recipe; on Megatron-Core a bare FP8 stays delayed scaling
    assert _spec(dtype="fp8").plan.dtype == "fp8-block"
    assert resolve("deepseek-v3", {**V3, "dtype": "fp8"}, "h800", "megatron-core").plan.dtype == "fp8"
    with pytest.raises(InputError, match="stack hai-llm cannot run the interleaved pipeline schedule"):
        _spec(interleave=2, schedule="interleaved")
    with pytest.raises(InputError, match="stack hai-llm cannot train in mxfp8"):
        _spec(dtype="mxfp8")


def test_the_2024_version_is_1f1b_bf16_without_the_overlap():
    p = _spec("hai-llm-2024", model="deepseek-v2", ep=8, dp=128).plan
    assert (p.schedule, p.dtype, p.overlap_ep, p.ep_dispatcher, p.moment_dtype) == ("1f1b", "bf16", 0.0, "alltoall",
                                                                                    "fp32")
    with pytest.raises(InputError, match="stack hai-llm-2024 cannot run the dualpipe pipeline schedule"):
        _spec("hai-llm-2024", model="deepseek-v2", ep=8, schedule="dualpipe")


def test_the_v3_stack_hides_what_megatron_core_defaults_expose():
    """The same layout on Megatron-Core's defaults (1F1B, NCCL all-to-all, no EP overlap) exposes more all-to-all and
    a longer step: the stack's overlap and deduplication are what the report describes."""
    ours, core = predict(_spec()), predict(_spec("megatron-core", dtype="fp8-block"))
    assert ours.breakdown["ep_comm"] < 0.5 * core.breakdown["ep_comm"]
    assert ours.step_time < core.step_time


@pytest.mark.parametrize("column, text, expected", [
    ("HAI-LLM", "DeepSeek-V3 Technical Report (arXiv:2412.19437)", "hai-llm"),
    ("", "DeepSeek-AI, DeepSeek-V3 Technical Report, arXiv:2412.19437", "hai-llm"),
    ("HAI-LLM", "DeepSeek-V2 (arXiv:2405.04434), 2024", "hai-llm-2024"),
    ("hai-llm", "DeepSeek LLM, January 2024", "hai-llm-2024"),
])
def test_a_row_is_dated_by_its_source(column, text, expected):
    """An arXiv id dates the source to its month (2412 -> December 2024, the V3 version's first month)."""
    assert stacks.infer(column=column, text=text, dtype="bf16")[0].id == expected


def test_validate_prices_a_deepseek_v3_row_on_the_stack():
    row = {"case_id": "dsv3", "source": "DeepSeek-V3 Technical Report (arXiv:2412.19437)", "model": "DeepSeek-V3",
           "seq_len": "4096", "global_batch": "15360", "tp": "1", "pp": "16", "dp": "128", "ep": "64",
           "n_gpus": "2048", "gpu": "H800", "precision": "FP8 (fine-grained)", "tokens_per_s_per_gpu": "1543",
           "notes": "DualPipe"}
    case = V.build_case(V.read_dicts([row])[0])
    assert case.framework == "hai-llm" and case.plan.schedule == "dualpipe" and case.plan.dtype == "fp8-block"
    assert "priced as 1F1B" not in case.note          # the stack runs the DualPipe the text names


def test_fine_grained_fp8_is_the_block_recipe():
    assert normalize.precision("FP8 (fine-grained 1x128 tiles, 128x128 blocks)") == "fp8-block"
    assert normalize.precision("block-wise FP8") == "fp8-block"
    assert normalize.precision("FP8 (delayed scaling)") == "fp8"
    assert normalize.precision("MXFP8 (32-element block scaling)") == "mxfp8"


def test_no_registry_file_states_a_key_twice():
    """A key written twice in a mapping is silently the last one to YAML: a source that a second entry replaced."""
    Loader = type("Loader", (yaml.SafeLoader,), {})          # a loader of its own: the constructor below stays local
    twice = []

    def mapping(loader, node, deep=False):
        keys = [loader.construct_object(k) for k, _ in node.value]
        twice.extend(k for k, n in collections.Counter(keys).items() if n > 1)
        return loader.construct_mapping(node, deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    for path in sorted(glob.glob(str(stacks.HERE / "*.yaml"))):
        with open(path, encoding="utf-8") as f:
            yaml.load(f, Loader)
    assert twice == []


def test_fp8_dispatch_moves_quantized_tokens_one_way_and_16_bit_the_other():
    """FP8 dispatch (DeepSeek-V3 sec 3.3.2; DeepEP's "FP8 dispatching and BF16 combining"): of each pass's two
    all-to-alls, the dispatch-direction one carries the recipe's quantized data and scales (fp8-block: 1 + 4/128 bytes
    an element), the combine-direction one 16-bit: the EP bytes scale by (1 + 4/128 + 2) / (2 + 2). It needs a
    low-precision recipe, and the hai-llm stack (the V3 run) sets it, its 2024 version (BF16) does not."""
    import dataclasses

    from roofline import InputError, predict
    from roofline.base import precision
    from roofline.spec import hardware, models, stacks
    from roofline.spec.config import Plan

    m, hw = models.load("deepseek-v3"), hardware.load("h800")
    p = Plan(tp=1, pp=4, dp=16, ep=16, micro_batch=1, global_batch=256, dtype="fp8-block", ep_dispatcher="deepep",
             recompute="selective", uneven_stages=True)
    off = predict(m, p, hw).raw
    on = predict(m, dataclasses.replace(p, fp8_dispatch=True), hw).raw
    q = precision.get("fp8-block").saved_bytes
    assert q == pytest.approx(1 + 4 / 128)
    for k in ("bytes_ep_fwd", "bytes_ep_bwd"):
        assert on[k] / off[k] == pytest.approx((q + 2) / 4, rel=1e-9)
    assert on["t_ep_comm"] < off["t_ep_comm"]
    with pytest.raises(InputError, match="fp8_dispatch needs a low-precision recipe"):
        predict(m, dataclasses.replace(p, dtype="bf16", fp8_dispatch=True), hw)
    assert stacks.get("hai-llm").plan["fp8_dispatch"] is True
    assert stacks.get("hai-llm-2024").plan["fp8_dispatch"] is False


def test_the_search_ranks_hai_llms_own_dualpipe_beside_1f1b(capsys):
    """A stack whose unstated schedule is its own (HAI-LLM: DualPipe) has its DualPipe plans searched beside the 1F1B
    family and ranked with them, gaps against the joint best; pinning a schedule (--schedule 1f1b) searches that
    one only. On DeepSeek-V3's own cluster the search's best plan is DeepSeek's kind of plan: DualPipe over 16 stages."""
    import json

    from roofline.face.cli import main
    from roofline.spec import hardware, models
    import dataclasses

    from roofline.views.search import default_base, search

    m, hw = models.load("deepseek-v3"), hardware.load("h800")
    base = dataclasses.replace(default_base("hai-llm"), uneven_stages=True)     # 61 layers: the stack's uneven rule
    best = search(m, hw, 2048, 15360, top=8, framework="hai-llm", base=base)
    scheds = {c.plan.schedule for c in best}
    assert best[0].plan.schedule == "dualpipe" and best[0].plan.pp == 16
    assert [c.step_time_s for c in best] == sorted(c.step_time_s for c in best)
    assert best[0].slower_than_best == 0 and all(c.slower_than_best >= 0 for c in best)
    only = search(m, hw, 2048, 15360, top=8, framework="hai-llm", schedule="1f1b", base=base)
    assert all(c.plan.schedule != "dualpipe" for c in only) and "dualpipe" in scheds
    assert only[0].step_time_s > best[0].step_time_s
    args = ["search", "--model", "deepseek-v3", "--gpu", "h800", "--gpus", "2048", "--global-batch", "15360",
            "--framework", "hai-llm", "--top", "3", "--json"]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["own_schedule"]["schedule"] == "dualpipe" and d["own_schedule"]["fit"] > 0


def test_hai_llm_on_a_model_without_mla_recomputes_its_norms_only():
    """HAI-LLM's recompute modules (RMSNorm and the MLA up-projections) on a GQA model: the stack's default loses
    the module the model has none of (Megatron-Core refuses mla_up_proj without MLA), with the reason; stated, it is
    still refused in one line."""
    from roofline.spec import hardware, models

    m, hw = models.load("llama3-8b"), hardware.load("h800")
    spec = resolve(m, {"tp": 1, "pp": 1, "dp": 8, "global_batch": 64}, hw, "hai-llm")
    assert spec.plan.recompute_modules == "layernorm" and "has none of" in spec.origin["recompute_modules"]
    with pytest.raises(InputError, match="mla_up_proj needs MLA attention"):
        resolve(m, {"tp": 1, "dp": 8, "global_batch": 64, "recompute_modules": "mla_up_proj"}, hw, "hai-llm")
