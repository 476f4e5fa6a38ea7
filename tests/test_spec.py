"""The one resolver (roofline.spec.resolve.resolve) and the stack registry (roofline.spec.stacks): precedence,
the same spec from every entry point, the registry's schema and sources, normalised spellings,
uneven pipeline splits as the stacks make them, stack inference for rows that name none."""
import dataclasses

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from roofline import InputError
from roofline.spec import configfile, stacks
from roofline.base import normalize
from roofline.views import validate as V
from roofline.face.cli import build_spec, parser
from roofline.model.predict import predict
from roofline.spec.resolve import resolve


# ---- registry ---------------------------------------------------------------------------------------
def test_registry_schema_and_sources():
    reg = stacks.registry()
    assert {"megatron-core", "megatron-lm-2021", "megatron-lm-2022", "megatron-deepspeed", "fsdp", "torchtitan",
            "deepspeed-zero", "plain"} <= set(reg)
    for s in reg.values():
        for sect in (s.model, s.plan, s.rules):
            for k in sect:
                src = s.sources[k]
                # a source names a flag/file/paper: something with a path, a flag or a year in it
                assert len(src) > 15 and any(c in src for c in "/-_.") , (s.id, k, src)
        assert s.era[0] <= s.era[1]


def test_registry_rejects_unsourced_or_unknown_keys(tmp_path):
    d = yaml.safe_load((stacks.HERE / "plain.yaml").read_text())
    d["plan"]["overlap_grad_reduce"] = 1.0
    del d["sources"]["overlap_grad_reduce"]
    with pytest.raises(InputError, match="no source for"):
        stacks._check(d, tmp_path / "x.yaml")
    d = yaml.safe_load((stacks.HERE / "plain.yaml").read_text())
    d["plan"]["overlap_gradreduce"] = 1.0
    with pytest.raises(InputError, match="unknown plan keys"):
        stacks._check(d, tmp_path / "x.yaml")


@pytest.mark.parametrize("name,want", [("megatron-lm@2021", "megatron-lm-2021"), ("megatron-lm@2022", "megatron-lm-2022"),
                                       ("megatron-lm@2025", "megatron-core"), ("nemo@25.09", "megatron-core"),
                                       ("MCore", "megatron-core"), ("torchtitan@2025", "torchtitan"),
                                       ("megatron-lm-2021", "megatron-lm-2021"), ("FSDP", "fsdp")])
def test_stack_names_and_versions(name, want):
    assert stacks.get(name).id == want


def test_unknown_stack_is_one_line():
    with pytest.raises(InputError, match="unknown framework 'megatorn'.*known: "):
        stacks.get("megatorn")
    with pytest.raises(InputError, match="not a year"):
        stacks.get("megatron-core@latest")


# ---- precedence -------------------------------------------------------------------------------------
def test_precedence_preset_stack_stated():
    s = resolve("gpt3-175b", {"tp": 8, "pp": 8, "dp": 16, "global_batch": 1536}, "a100-sxm4-80gb", "megatron-lm@2021")
    assert s.model.attention == "unfused" and s.origin["attention"] == "stack megatron-lm-2021"   # stack over preset
    assert s.plan.dtype == "fp16" and s.plan.interleave == 2                                         # stack rule: v
    s = resolve("gpt3-175b", {"tp": 8, "pp": 8, "dp": 16, "global_batch": 1536, "dtype": "bf16", "interleave": 1},
                "a100-sxm4-80gb", "megatron-lm@2021", model_fields={"attention": "flash"})
    assert s.model.attention == "flash" and s.origin["attention"] == "stated"                         # stated over stack
    assert s.plan.interleave == 1 and s.plan.dtype == "bf16"
    assert s.plan.grad_dtype == "fp32" and s.origin["grad_dtype"].startswith("rule")                 # Megatron bf16 rule
    s = resolve("llama3-8b", {"tp": 1, "dp": 8}, "h100-sxm", "megatron-core")
    assert not s.plan.sequence_parallel and s.origin["sequence_parallel"].startswith("rule")        # no SP at tp 1


def test_plan_instance_is_taken_literally():
    from roofline import Plan
    p = Plan(tp=2, dp=4, sharding="none", dtype="fp16")
    s = resolve("llama2-7b", p, "a100-sxm4-80gb", "megatron-core")
    assert s.plan == p


def test_stack_cannot_run_is_one_line():
    with pytest.raises(InputError, match="megatron-deepspeed cannot run ZeRO-3.*pipeline"):
        resolve("gpt3-13b", {"tp": 1, "pp": 4, "dp": 2, "sharding": "zero3"}, "a100-sxm4-80gb", "megatron-deepspeed")
    with pytest.raises(InputError, match="megatron-core cannot run sharding 'zero2'"):
        resolve("gpt3-13b", {"dp": 8, "sharding": "SHARD_GRAD_OP"}, "a100-sxm4-80gb", "megatron-core")


def _cli(argv):
    args = parser("transformer").parse_args(["transformer", *argv])
    return build_spec(args)


def test_explicit_framework_wins_over_config(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model: gpt3-13b\nplan: {tp: 2, pp: 2, dp: 2, global_batch: 16}\nhardware: a100-sxm4-80gb\n"
                   "framework: megatron-lm-2021\n")
    assert _cli(["--config", str(cfg)]).stack.id == "megatron-lm-2021"
    assert _cli(["--config", str(cfg), "--framework", "megatron-core"]).stack.id == "megatron-core"
    assert configfile.resolve_spec(str(cfg)).stack.id == "megatron-lm-2021"


# ---- one spec from every entry point ----------------------------------------------------------------
PRESETS = ["gpt3-13b", "llama2-7b", "llama3-8b", "mixtral-8x7b"]
STACKS = ["megatron-core", "megatron-lm-2021", "megatron-deepspeed", "torchtitan", "fsdp", "ddp", "torchtune"]


@st.composite
def runs(draw):
    preset = draw(st.sampled_from(PRESETS))
    stack = draw(st.sampled_from(STACKS))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4]))
    dp = draw(st.sampled_from([1, 2, 4, 8]))
    mb = draw(st.sampled_from([1, 2]))
    gb = mb * dp * draw(st.sampled_from([4, 8, 16]))
    rc = draw(st.sampled_from(["none", "selective", "full"]))
    return preset, stack, dict(tp=tp, pp=pp, dp=dp, micro_batch=mb, global_batch=gb, recompute=rc)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
# validate prices this row's unstated v at 4, the resolver at 2 (which does not fit 80 GiB): validate.unstated_interleave
@example(("llama2-7b", "megatron-core", dict(tp=1, pp=2, dp=1, micro_batch=2, global_batch=16, recompute="selective")))
def test_same_spec_from_every_entry_point(tmp_path_factory, run):
    preset, stack, plan = run
    gpu = "h100-sxm"
    try:
        api = resolve(preset, plan, gpu, stack)
    except InputError:
        return                                              # an invalid layout is invalid everywhere (checked below)
    cli = _cli(["--model", preset, "--gpu", gpu, "--framework", stack,
                *[f"--{k.replace('_', '-')}={v}" for k, v in plan.items()]])
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    path.write_text(yaml.safe_dump({"model": preset, "plan": plan, "hardware": gpu, "framework": stack}))
    cfg = configfile.resolve_spec(str(path))
    m = api.model
    # the row dated inside the stack's era: a family name alone ("megatron-deepspeed") is dated by the source text
    row = {"case_id": "x", "source": f"a {api.stack.era[1]} run", "framework": stack, "model": m.name, "n_layers": m.n_layers,
           "d_model": m.d_model, "n_heads": m.n_heads, "n_kv_heads": m.n_kv_heads, "ffn_hidden": m.ffn,
           "mlp": m.mlp, "vocab": m.vocab, "seq_len": m.seq_len, "n_experts": m.n_experts, "top_k": m.top_k,
           "gpu_id": gpu, "measured_iter_time_s": 1.0, "recompute": plan["recompute"], "notes": "",
           **{k: plan[k] for k in ("tp", "pp", "dp", "micro_batch", "global_batch")}}
    case = V.build_case(row)
    for other in (cli, cfg):
        assert other.plan == api.plan and other.model == api.model and other.stack.id == api.stack.id
    # a validate row has no preset: compare every field the row carries, and the prediction
    assert case.stack_reason.startswith("framework column")
    if "validate.unstated_interleave" in case.note:
        # validate's one deliberate difference: a row whose unstated v, the resolver's smallest, does not fit in
        # memory is priced at the next valid v that fits (a run that fit, validate.unstated_interleave)
        assert case.plan.interleave > api.plan.interleave
        assert case.plan == dataclasses.replace(api.plan, interleave=case.plan.interleave)
        return
    assert case.plan == api.plan
    assert predict(case.spec).raw["step_time"] == pytest.approx(predict(api).raw["step_time"], rel=1e-12)
    # the plan search re-resolves its picked plan to the same spec
    assert resolve(preset, api.plan, gpu, stack).plan == api.plan


# ---- normalised spellings ---------------------------------------------------------------------------
@pytest.mark.parametrize("text,want", [
    ("fsdp (FULL_SHARD = ZeRO-3)", "fsdp"), ("SHARD_GRAD_OP", "zero2"), ("HYBRID_SHARD", "fsdp"),
    ("Megatron distributed optimizer (ZeRO-1: Adam states+fp32 main params sharded over DP)", "distributed"),
    ("ZeRO-1", "distributed"), ("zero-2", "zero2"), ("ZeRO-3", "fsdp"), ("none", "none"), ("DDP", "none"),
    ("FSDP2 full shard (params, grads, AdamW states sharded over dp)", "fsdp")])
def test_sharding_spellings(text, want):
    assert normalize.sharding(text) == want


@pytest.mark.parametrize("text,want", [
    ("selective: core_attn,mlp", "selective"), ("none (recompute_granularity=None)", "none"),
    ("none (--recompute-granularity full --recompute-method block --recompute-num-layers 0)", "none"),
    ("full AC", "full"), ("selective AC (option unstated; toml default 'op')", "selective"), ("full", "full")])
def test_recompute_spellings(text, want):
    assert normalize.recompute(text) == want


@pytest.mark.parametrize("text,want", [("BF16", "bf16"), ("FP8-CS", "fp8-cs"), ("MXFP8", "mxfp8"), ("NVFP4", "nvfp4"),
                                       ("fp8", "fp8"), ("FP8 delayed scaling", "fp8"), ("fp8-blockwise", "fp8-block"),
                                       ("bf16 (TE), softmax fp32", "bf16"),
                                       ("bf16 + torch.compile + Float8 linear", "fp8-cs"),
                                       ("mixed precision (bf16)", "bf16"), ("AMP (fp16)", "fp16"), ("mixed", None),
                                       ("FP8 rowwise", "fp8-row"), ("float8 rowwise", "fp8-row")])
def test_precision_spellings(text, want):
    assert normalize.precision(text) == want


def test_unmappable_value_names_the_accepted_spellings():
    with pytest.raises(InputError, match="sharding: cannot read 'sharded somehow'; accepted: .*SHARD_GRAD_OP"):
        normalize.sharding("sharded somehow")


# ---- uneven pipeline splits -------------------------------------------------------------------------
def _forward(layers, pp, v, stack):
    plan = {"tp": 8, "pp": pp, "dp": 1, "interleave": v, "global_batch": pp * 4 * (2 if v > 1 else 1)}
    return predict(resolve({"preset": "gpt3-175b", "n_layers": layers}, plan, "a100-sxm4-80gb", stack)).raw["t_forward"]


def test_uneven_splits_are_predicted_from_the_heaviest_stage():
    # Megatron-DeepSpeed's partition (PipelineModule, type:transformer) puts 70 layers on 12 stages as 10 x 6 + 2 x 5:
    # the heaviest stage runs 6 layers, as 72 layers evenly split would
    assert _forward(70, 12, 1, "megatron-deepspeed") == pytest.approx(_forward(72, 12, 1, "megatron-deepspeed"), rel=1e-9)
    # NeMo's Llama 3.1 405B: 126 layers at pp 8 x v 8 with the embedding and loss counted as layers (128 / 64 = 2
    # per virtual stage): the heaviest chunk holds 2 layers, as 128 layers evenly split would
    assert _forward(126, 8, 8, "megatron-core") == pytest.approx(_forward(128, 8, 8, "megatron-core"), rel=1e-9)
    # Megatron-LM 2.x asserts an even split
    with pytest.raises(InputError, match="divisible by pp x interleave"):
        resolve({"preset": "gpt3-175b", "n_layers": 70}, {"pp": 12, "interleave": 1}, "a100-sxm4-80gb", "megatron-lm@2021")


# ---- rows that name no stack, and missing fields ----------------------------------------------------
def _row(**kw):
    base = {"case_id": "r", "source": "", "framework": "", "model": "", "n_layers": 32, "d_model": 4096,
            "n_heads": 32, "n_kv_heads": None, "ffn_hidden": None, "mlp": "gelu", "vocab": 50257, "seq_len": 2048,
            "gpu_id": "a100-sxm4-80gb", "tp": 2, "pp": 2, "dp": 2, "global_batch": 64, "micro_batch": 1,
            "measured_iter_time_s": 1.0, "notes": ""}
    base.update(kw)
    return base


@pytest.mark.parametrize("kw,stack,why", [
    ({"framework": "NeMo 25.09 (Megatron-Bridge on Megatron-Core)"}, "megatron-core", "framework column"),
    ({"source": "Narayanan et al. SC21 arXiv:2104.04473 (reprinted in the Megatron-LM README, 2024)"},
     "megatron-lm-2021", "earliest year 2021"),
    ({"source": "Korthikanti et al. arXiv:2205.05198, NVIDIA/Megatron-LM"}, "megatron-lm-2022", "earliest year 2022"),
    ({"source": "vTrain data; Megatron-DeepSpeed measurements"}, "megatron-deepspeed-2022", "no year"),
    ({"source": "torchtitan 9dec370 (2024-12-26); FSDP2"}, "torchtitan-2024", "earliest year 2024 (month 12)"),
    ({"source": "torchtitan benchmark, June 2025; FSDP2"}, "torchtitan", "earliest year 2025 (month 6)"),
    ({"source": "torchtitan; FSDP2"}, "torchtitan", "no year"),
    ({"source": "GPT-NeoX-20B (Black et al. arXiv:2204.06745)"}, "gpt-neox-2022", "earliest year 2022"),
    ({"framework": "GPT-NeoX (Pythia, 2023)"}, "gpt-neox", "earliest year 2023"),
    ({"gpu_id": "h100-sxm", "mlp": "swiglu"}, "megatron-core", "era rule"),
    ({}, "megatron-lm-2021", "era rule"),
    ({"optimizer_sharding": "FULL_SHARD", "tp": 1, "pp": 1, "dp": 8}, "fsdp", "fully sharded"),
    # no stack named: a model its makers trained with one stack, named in the model cell or the source
    ({"model": "OPT-175B", "tp": 8, "pp": 1, "dp": 1}, "metaseq", "'opt' was trained with metaseq"),
    ({"source": "Le Scao et al. 2022, BLOOM", "pp": 1, "tp": 4}, "megatron-deepspeed-2022", "'bloom' was trained with"),
    ({"model": "GPT-NeoX-20B"}, "gpt-neox-2022", "'gpt-neox-20b' was trained with"),
    ({"model": "Pythia-6.9B"}, "gpt-neox", "'pythia' was trained with"),
    # a framework the column names, even one the registry lacks, ran it: not the makers' stack
    ({"model": "OPT-1.3B", "framework": "veScale"}, "megatron-lm-2021", "names no stack of the registry"),
    ({"model": "OPT-1.3B", "framework": "DeepSpeed", "tp": 1, "pp": 1, "dp": 8}, "deepspeed-zero-2021",
     "framework column names 'deepspeed'"),
])
def test_stack_inference(kw, stack, why):
    c = V.build_case(_row(**kw))
    assert c.framework == stack and why in c.stack_reason


def test_missing_vocab_from_the_model_family_or_a_named_skip():
    c = V.build_case(_row(vocab=None, model="Llama 3.1 8B", mlp="swiglu", gpu_id="h100-sxm"))
    assert c.model.vocab == 128256 and "Llama 3" in c.note
    with pytest.raises(V.Skip, match="vocab not stated"):
        V.build_case(_row(vocab=None, model="Unheard-of 9B"))


def test_validate_reports_the_stack_and_why():
    res = V.validate([_row(framework="torchtitan", optimizer_sharding="fsdp", tp=2, pp=1, dp=4, global_batch=64)])
    c = res["cases"][0]
    assert c["framework"] == "torchtitan" and c["stack_reason"].startswith("framework column")


def test_frameworks_page_is_generated_from_the_registry():
    from roofline.face import docs_frameworks
    assert docs_frameworks.DOC.read_text() == docs_frameworks.render(), "run python -m roofline.face.docs_frameworks"
    text = docs_frameworks.render()
    for s in stacks.registry().values():
        assert f"### `{s.id}`" in text and s.sources["sharding"].replace("|", "/") in text


def test_readme_api_example_equals_the_cli():
    api = predict(resolve("gpt3-175b", {"tp": 8, "pp": 8, "dp": 16, "global_batch": 1536}, "a100-sxm4-80gb",
                          "megatron-core"))
    cli = predict(_cli(["--model", "gpt3-175b", "--tp", "8", "--pp", "8", "--dp", "16", "--global-batch", "1536",
                        "--gpu", "a100-sxm4-80gb"]))
    assert api.raw["step_time"] == cli.raw["step_time"] and api.stack == cli.stack == "megatron-core"


def test_achieved_tflops_per_gpu_is_mfu_times_peak():
    p = predict(resolve("llama3-8b", {"tp": 2, "dp": 4, "global_batch": 32}, "h100-sxm", "megatron-core"))
    d = p.to_dict()
    assert d["model_tflops_per_gpu"] == pytest.approx(d["mfu"] * p.hardware.peak("bf16") / 1e12, rel=1e-9)
    assert d["units"]["model_tflops_per_gpu"] == "TFLOP/s"


def test_loss_kernel_sets_the_heads_logits_memory():
    """torchtitan's eager cross entropy on fp32-upcast logits (components/loss.py) holds, per logit, the fp32
    log-softmax output plus the NLL and log-softmax gradients at the loss's backward: 12 bytes, against 6 for
    Megatron's fused vocab-parallel loss (bf16 logits + one fp32 copy). LLaMA-3 8B at 32768 tokens: 6 x 32768 x
    128256 bytes more (torchtitan's 8-GPU FSDP + CP table measured 83.9 GiB reserved)."""
    from roofline.spec import hardware, models

    H100 = hardware.load("h100-hbm2e-96gb-500w")
    m = models.load("llama3-8b")
    plan = {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 8, "recompute": "full", "sharding": "fsdp"}
    tt = resolve(m, plan, H100, "torchtitan", model_fields={"seq_len": 32768})
    assert tt.plan.loss_kernel == "eager" and resolve(m, plan, H100).plan.loss_kernel == "fused"
    fused = dataclasses.replace(tt.plan, loss_kernel="fused")
    extra = predict(tt.model, tt.plan, H100).memory["total"] - predict(tt.model, fused, H100).memory["total"]
    assert extra.to("B").magnitude == pytest.approx(6 * 32768 * 128256, rel=1e-9)


def test_nanotron_rows_get_nanotron_defaults():
    """A row naming nanotron is priced with nanotron's own defaults (src/nanotron/config/parallelism_config.py:
    all-reduce TP without SP or async dgrad, no recomputation; ZeRO-1 at most, no interleaving)."""
    from roofline.spec import hardware, models

    st, why = stacks.infer("nanotron (Ultra-Scale Playbook)", "")
    assert st.id == "nanotron" and "nanotron" in why
    sp = resolve(models.load("llama3-8b"), {"tp": 4, "pp": 2, "dp": 2, "micro_batch": 1, "global_batch": 32},
                 hardware.load("h100-sxm"), "nanotron")
    p = sp.plan
    assert (p.sequence_parallel, p.tp_async_dgrad, p.recompute, p.interleave, p.loss_kernel) == \
        (False, False, "none", 1, "fused")
    with pytest.raises(InputError, match="nanotron"):
        resolve(models.load("llama3-8b"), {"tp": 1, "pp": 2, "dp": 4, "micro_batch": 1, "global_batch": 32,
                                           "sharding": "zero3"}, hardware.load("h100-sxm"), "nanotron")


# ---- every model field from the command line ----------------------------------------------------------
def test_every_model_field_has_a_flag():
    """A Model field a config file accepts is also a flag of every model command (the preset's `name` aside);
    a field added to the Model without a flag fails here."""
    from roofline.spec.cliargs import MODEL_FLAGS, MODEL_SWITCHES
    from roofline.spec.config import Model

    fields = {f.name for f in dataclasses.fields(Model)} - {"name"}
    dests = set()
    for cmd in ("transformer", "search", "run-cost"):
        actions = parser(cmd)._subparsers._group_actions[0].choices[cmd]._actions
        dests = {a.dest for a in actions}
        assert fields <= dests, f"{cmd}: no flag for {sorted(fields - dests)}"
    assert {d for _, d, _, _ in MODEL_FLAGS} | {d for _, d, _, _ in MODEL_SWITCHES} <= fields


@pytest.mark.parametrize("preset", ["deepseek-v3", "gpt-oss-120b", "nemotron-3-nano-30b-a3b", "qwen3-30b-a3b"])
def test_a_modern_preset_rebuilt_from_flags_alone(preset, tmp_path):
    """Every field of a modern preset (MLA, shared experts, dense-first layers, MTP, sliding windows, a hybrid Mamba
    pattern) written as flags, without --model, gives the preset's model and the same prediction."""
    from roofline.spec import models
    from roofline.spec.cliargs import MODEL_FLAGS, MODEL_SWITCHES

    # the stack's model fields (megatron-core's attention te) as the preset resolves them, written as flags too
    m = resolve(preset, {"dp": 8, "global_batch": 64}, "h100-sxm").model
    argv = ["--gpu", "h100-sxm", "--dp", "8", "--ep", "8" if m.n_experts % 8 == 0 else "1", "--global-batch", "64"]
    for name, dest, _, _ in MODEL_FLAGS:
        if getattr(m, dest) is not None:
            argv += [f"--{name}", str(getattr(m, dest))]
    for name, dest, _, _ in MODEL_SWITCHES:
        argv.append(f"--{name}" if getattr(m, dest) else f"--no-{name}")
    argv += ["--mlp", m.mlp, "--norm", m.norm, "--attention", m.attention, "--position", m.position,
             "--tied" if m.tied_embeddings else "--untied"]
    spec = _cli(argv)
    assert dataclasses.replace(spec.model, name=m.name) == m
    ref = resolve(preset, spec.plan, "h100-sxm")
    assert predict(spec).raw["step_time"] == pytest.approx(predict(ref).raw["step_time"], rel=1e-12)


def test_a_changed_modern_field_moves_the_model():
    """--first-dense-layers 0 turns DeepSeek-V3's 3 dense layers into MoE layers: 3 x (256 routed experts, the
    shared expert and the router - one dense MLP) more parameters, and the name says the preset was modified."""
    base = _cli(["--model", "deepseek-v3", "--gpu", "h800", "--pp", "16", "--dp", "16", "--ep", "16",
                 "--global-batch", "4096", "--uneven-stages"])
    moe = _cli(["--model", "deepseek-v3", "--gpu", "h800", "--pp", "16", "--dp", "16", "--ep", "16",
                "--global-batch", "4096", "--uneven-stages", "--first-dense-layers", "0"])
    h, e, f = 7168, 2048, 18432
    gated = 3                                        # swiglu: gate, up, down
    added = 3 * ((256 + 1) * gated * h * e + h * 256 - gated * h * f)   # routed + shared, router - dense MLP
    got = predict(moe).raw["params"] - predict(base).raw["params"]
    assert got == pytest.approx(added, rel=1e-9)
    assert moe.model.name.endswith("(modified)") and not base.model.name.endswith("(modified)")


def test_a_model_named_in_a_later_source_is_not_its_makers_run():
    """stacks.trained_with: a source dated outside the makers' stack's era ran the model on something else."""
    assert stacks.trained_with("OPT-175B (Zhang et al. 2022)")[0].id == "metaseq"
    assert stacks.trained_with("OPT-175B")[0].id == "metaseq"                  # undated: the makers' run
    assert stacks.trained_with("OPT-175B re-run, 2025") is None
    assert stacks.trained_with("an optimizer study, 2022") is None             # 'opt' only as a whole word


@pytest.mark.parametrize("text,want,why", [
    ("StarCoder 15.5B", "megatron-lm-2022", "'starcoder' was trained with"),
    ("SmolLM2-1.7B", "nanotron", "'smollm2' was trained with"),
    ("Nemotron-4 340B", "megatron-core", "'nemotron' was trained with"),
    ("bloom176b", "megatron-deepspeed-2022", "'bloom' was trained with"),
    ("Megatron-Turing NLG 530B", "megatron-deepspeed-2022", "names 'megatron-turing'"),   # an alias, not megatron-lm
    ("StarCoder2-15B", "megatron-lm-2021", "era rule"),          # another model: its sizes ran on different stacks
])
def test_the_makers_stack_of_a_named_model(text, want, why):
    stack, reason = stacks.infer("", text)
    assert stack.id == want and why in reason, (stack.id, reason)
