"""Rows of published runs as their sources spell them: OPT's ReLU MLP, a ZeRO stage written "stage 2", Narayanan et al.'s
"1F1B-I", a zero-bubble schedule, a recompute column saying "every other layer", and a multi-query model under more TP
ranks than key/value heads (StarCoder). Each is priced, with what it was priced as said, instead of skipped."""
import pytest

from roofline.base import normalize
from roofline.base.errors import InputError
from roofline.views import validate as V

ROW = {"case_id": "r", "framework": "Megatron-LM", "model": "GPT-3 13B", "gpu": "A100 80GB", "n_gpus": 64,
       "tp": 2, "pp": 2, "dp": 16, "global_batch": 512, "micro_batch": 1, "seq_len": 2048, "precision": "bf16",
       "measured_iter_time_s": 10.0}


@pytest.mark.parametrize("text, mlp", [("ReLU", "gelu"), ("relu", "gelu"), ("gelu_new", "gelu"), ("GeGLU", "swiglu"),
                                       ("ReGLU", "swiglu"), ("squared_relu", "squared_relu"), ("relu^2", "squared_relu"),
                                       ("SwiGLU", "swiglu")])
def test_mlp_spellings(text, mlp):
    assert normalize.mlp(text) == mlp


def test_an_unknown_mlp_is_still_one_line():
    with pytest.raises(InputError, match="mlp: cannot read 'maxout'"):
        normalize.mlp("maxout")


@pytest.mark.parametrize("text, stage", [("stage 2", "zero2"), ("ZeRO stage 3", "fsdp"), ("stage 1", "distributed"),
                                         ("stage-2", "zero2")])
def test_zero_stage_spellings(text, stage):
    assert normalize.sharding(text) == stage


def test_a_stage_number_that_is_no_zero_stage_is_refused():
    with pytest.raises(InputError, match="sharding: cannot read 'stage 12'"):
        normalize.sharding("stage 12")


def test_a_relu_row_prices_as_the_non_gated_mlp():
    relu = V.build_case(V.read_dicts([{**ROW, "mlp": "ReLU"}])[0])
    gelu = V.build_case(V.read_dicts([{**ROW, "mlp": "gelu"}])[0])
    assert relu.model.mlp == gelu.model.mlp == "gelu"


def test_1f1b_i_is_the_interleaved_schedule():
    case = V.build_case(V.read_dicts([{**ROW, "notes": "1F1B-I schedule"}])[0])
    assert case.plan.schedule == "interleaved" and case.plan.interleave > 1
    plain = V.build_case(V.read_dicts([{**ROW, "notes": "1F1B schedule"}])[0])
    assert plain.plan.schedule == "1f1b" and plain.plan.interleave == 1


@pytest.mark.parametrize("text, zb", [("ZB-1p schedule", "ZB1P"), ("zero bubble pipeline (ZB-H1)", "ZB1P"),
                                      ("ZB-2p schedule", "ZB2P")])
def test_a_zero_bubble_schedule_on_a_stack_without_one_is_priced_as_1f1b_and_said(text, zb):
    # the framework column names Megatron-LM, whose upstream runs no zero-bubble schedule
    case = V.build_case(V.read_dicts([{**ROW, "notes": text}])[0])
    assert case.plan.schedule == "1f1b" and case.plan.interleave == 1
    assert f"the text's {zb} schedule priced as 1F1B" in case.note


@pytest.mark.parametrize("text, schedule", [("ZB-H1 schedule", "zb1p"), ("zero bubble pipeline parallelism", "zb1p"),
                                            ("ZB-2p, max pending backward 2p", "zb2p")])
def test_a_zero_bubble_row_naming_no_framework_runs_on_the_zero_bubble_stack(text, schedule):
    row = {**ROW, "framework": "", "notes": text}
    case = V.build_case(V.read_dicts([row])[0])
    assert case.framework == "zero-bubble" and case.plan.schedule == schedule and case.plan.interleave == 1
    # and it is faster than the 1F1B the same row prices on its upstream, by the bubble alone
    upstream = V.build_case(V.read_dicts([{**row, "framework": "zero-bubble", "notes": "1F1B schedule"}])[0])
    res = V.evaluate_cases([case, upstream])
    assert res["t_pp_bubble"][0] < res["t_pp_bubble"][1]
    assert res["step_time"][0] - res["t_pp_bubble"][0] == pytest.approx(res["step_time"][1] - res["t_pp_bubble"][1])


def test_zb_v_is_not_modelled_and_said():
    case = V.build_case(V.read_dicts([{**ROW, "framework": "", "notes": "ZBV schedule"}])[0])
    assert case.plan.schedule == "1f1b" and "ZB-V, or interleaved" in case.note


def test_a_recompute_column_of_every_other_layer_recomputes_half_the_layers():
    case = V.build_case(V.read_dicts([{**ROW, "recompute": "every other layer"}])[0])
    assert case.plan.recompute == "full" and case.plan.recompute_fraction == pytest.approx(0.5)
    assert "one block in 2" in case.note


def test_multi_query_attention_under_wider_tp_is_priced_with_replicated_kv_heads():
    # StarCoder (arXiv:2305.06161): multi-query attention (one key/value head) at TP 4 on 512 A100s, Megatron-LM of
    # 2023, whose upstream splits the key/value heads over the TP ranks; the run's own version replicated it
    row = {**ROW, "model": "StarCoderBase", "n_layers": 40, "d_model": 6144, "n_heads": 48, "n_kv_heads": 1,
           "ffn_hidden": 24576, "mlp": "gelu", "vocab": 49152, "seq_len": 8192, "tp": 4, "pp": 4, "dp": 32,
           "n_gpus": 512, "global_batch": 512, "source": "StarCoder paper, 2023", "recompute": "selective"}
    case = V.build_case(V.read_dicts([row])[0])
    assert case.framework == "megatron-lm-2022" and case.plan.tp == 4 and case.model.kv_heads == 1
    assert "replicated over the TP ranks" in case.stack_reason
    # a model whose kv-heads the TP ranks divide is priced as before, with no such reason
    gqa = V.build_case(V.read_dicts([{**row, "n_kv_heads": 8}])[0])
    assert "replicated" not in gqa.stack_reason


def test_hai_llm_2024_prices_a_stated_zero_bubble_pipeline_as_zb1p():
    # DeepSeek-V2 (arXiv:2405.04434 sec 3.1.3): "16-way zero-bubble pipeline parallelism", variant unstated
    row = {**ROW, "framework": "HAI-LLM", "source": "DeepSeek-V2 report, arXiv:2405.04434", "model": "deepseek-llm-7b",
           "gpu": "H800", "tp": 1, "pp": 4, "dp": 16, "notes": "zero-bubble pipeline parallelism"}
    case = V.build_case(V.read_dicts([row])[0])
    assert case.framework == "hai-llm-2024" and case.plan.schedule == "zb1p"
    plain = V.build_case(V.read_dicts([{**row, "notes": ""}])[0])
    assert plain.plan.schedule == "1f1b"                 # the stack's own when a row states none


@pytest.mark.parametrize("cell, col, value", [("8K", "seq_len", 8192), ("128K", "seq_len", 131072),
                                              ("1.5k", "global_batch", 1536), ("3.2k", "tokens_per_s_per_gpu", 3200),
                                              ("1.2M", "tokens_per_s", 1.2e6)])
def test_magnitude_suffixes(cell, col, value):
    assert V._number(cell, col) == value


@pytest.mark.parametrize("cell, seq_len, sequences", [("4M tokens", 4096, 1024), ("4M", 4096, 1024),
                                                      ("16M tokens", 8192, 2048), ("2,048 tokens", 1024, 2)])
def test_a_batch_in_tokens_is_read_as_sequences(cell, seq_len, sequences):
    row = {**ROW, "model": "llama2-7b", "tp": 1, "pp": 1, "dp": 1, "n_gpus": 1, "global_batch": cell,
           "seq_len": seq_len}
    case = V.build_case(V.read_dicts([row])[0])
    assert case.plan.global_batch == sequences and case.model.seq_len == seq_len
    assert f"read as {sequences} sequences of {seq_len} tokens" in case.note


def test_a_batch_in_tokens_without_a_context_takes_the_presets():
    row = {**ROW, "model": "llama2-7b", "tp": 1, "pp": 1, "dp": 1, "n_gpus": 1, "global_batch": "4M tokens",
           "seq_len": ""}
    case = V.build_case(V.read_dicts([row])[0])
    assert case.model.seq_len == 4096 and case.plan.global_batch == 1024


@pytest.mark.parametrize("text, gbps", [("DGX A100; 8x200Gb/s HDR IB per node", 200), ("p4d, 400 Gbps EFA", 50),
                                        ("NDR 400 Gb/s per GPU", 400), ("25 GB/s per GPU", 200),
                                        ("4 x 100 Gb RoCE per node", 50), ("3.2 Tbps per instance", 400)])
def test_network_from_text(text, gbps):
    assert V.network_from_text(text, 8)[0] == gbps


@pytest.mark.parametrize("text", ["NVLink 600 GB/s per GPU", "113 TFLOP/s per GPU", "140 GB of BF16 weights per GPU",
                                  "HDR 200 Gbps"])
def test_no_network_read_where_none_is_stated(text):
    assert V.network_from_text(text, 8) is None


def test_a_rows_stated_network_prices_its_inter_node_traffic():
    row = {**ROW, "model": "llama2-7b", "tp": 1, "pp": 1, "dp": 64, "sharding": "", "framework": "fsdp",
           "optimizer_sharding": "FULL_SHARD"}
    fast = V.build_case(V.read_dicts([row])[0])
    slow = V.build_case(V.read_dicts([{**row, "notes": "p4d.24xlarge, 400 Gbps EFA"}])[0])
    assert "network 50 Gbit/s per GPU from the text" in slow.note
    assert slow.hw.inter.bandwidth < fast.hw.inter.bandwidth
    res = V.evaluate_cases([fast, slow])
    assert res["step_time"][1] > res["step_time"][0]
    # a stated column wins over the text
    col = V.build_case(V.read_dicts([{**row, "notes": "400 Gbps EFA", "net_gbps_per_gpu": 200}])[0])
    assert col.hw.inter.bandwidth == fast.hw.inter.bandwidth


def test_a_shard_group_in_the_text_is_hsdp():
    row = {**ROW, "model": "llama2-7b", "tp": 1, "pp": 1, "dp": 64, "framework": "fsdp",
           "optimizer_sharding": "ZeRO-3 sharded over 16 GPUs"}
    case = V.build_case(V.read_dicts([row])[0])
    assert case.plan.sharding == "fsdp" and case.plan.dp_replicas == 4


@pytest.mark.parametrize("text", ["DeepSpeed + Megatron-LM (3D parallelism)", "Megatron-LM + DeepSpeed",
                                  "Megatron-LM and DeepSpeed ZeRO-1", "DeepSpeed (Megatron-LM tensor parallelism)"])
def test_a_framework_naming_deepspeed_and_megatron_lm_is_megatron_deepspeed(text):
    # 'megatron' inside 'Megatron-LM' counts for the combination (Smith et al. 2022 name their stack this way)
    from roofline.spec import stacks
    stack, why = stacks.infer(text, "")
    assert stack.family == "megatron-deepspeed", why
    assert stacks.infer("Megatron-LM", "")[0].family == "megatron-lm"
    assert stacks.infer("DeepSpeed", "")[0].family == "deepspeed"


@pytest.mark.parametrize("cell", ["6,020/GPU", "6020 tokens/s/GPU", "6,020 per GPU", "6.02k tok/s per GPU"])
def test_a_per_gpu_token_rate_in_the_total_column_is_read_per_gpu(cell):
    row = {**ROW, "measured_iter_time_s": "", "tokens_per_s": cell}
    per_gpu = {**ROW, "measured_iter_time_s": "", "tokens_per_s_per_gpu": "6020"}
    case, ref = (V.build_case(V.read_dicts([r])[0]) for r in (row, per_gpu))
    assert case.measured == pytest.approx(ref.measured)
    assert case.measured == pytest.approx(512 * 2048 / (6020 * 64))


@pytest.mark.parametrize("col, cell, value", [("tokens_per_s", "385,000 tokens/s", 385000.0),
                                              ("tokens_per_s", "385k tok/sec", 385000.0),
                                              ("measured_tflops_per_gpu", "150 TFLOP/s", 150.0),
                                              ("measured_tflops_per_gpu", "150 TFLOPS per GPU", 150.0),
                                              ("samples_per_s", "12.5 samples/s", 12.5)])
def test_a_rate_cell_with_its_unit_reads_as_the_number(col, cell, value):
    assert V.read_dicts([{**ROW, col: cell}])[0][col] == pytest.approx(value)


def test_a_per_gpu_rate_beside_a_stated_per_gpu_column_is_not_silently_dropped():
    row = V.read_dicts([{**ROW, "tokens_per_s": "6,020/GPU", "tokens_per_s_per_gpu": "6000"}])[0]
    assert row["tokens_per_s"] is None and "tokens_per_s must be a number" in row[V.UNREADABLE]


LLAMA3_405B = {"case_id": "l3", "model": "Llama 3.1 405B", "gpu": "H100", "n_gpus": 8192, "tp": 8, "pp": 16, "dp": 64,
               "seq_len": 8192, "global_batch": 2048, "micro_batch": 1, "precision": "bf16",
               "measured_iter_time_s": 11.6}


def _memory_over(spec):
    from roofline.model.predict import evaluate, inputs, overshoot
    out = evaluate(inputs(spec.model, spec.plan, spec.hardware))
    return float(overshoot(out["memory"], out["mem_reserve"], spec.hardware))


def test_a_blank_interleave_that_does_not_fit_at_the_smallest_v_takes_the_next_that_fits():
    from roofline.spec import resolve as R
    case = V.build_case(V.read_dicts([LLAMA3_405B])[0])
    v = case.plan.interleave
    assert "validate.unstated_interleave" in case.note
    assert v in R.valid_interleaves(126, 16, 32, edge_slots=2) and v > R.smallest_interleave(126, 16, 32, 2)
    assert case.plan.recompute == "none"                        # more virtual stages before any recomputation
    assert _memory_over(case.spec) <= V.MEMORY_ERROR_MAX
    smaller = [w for w in R.valid_interleaves(126, 16, 32, edge_slots=2) if w < v]
    for w in smaller:                                           # every smaller v is over the memory model's error
        spec = V.build_case(V.read_dicts([{**LLAMA3_405B, "interleave": w, "recompute": "none"}])[0]).spec
        assert _memory_over(spec) > V.MEMORY_ERROR_MAX


def test_a_blank_interleave_that_fits_keeps_the_smallest_v_and_a_stated_one_stands():
    from roofline.spec import resolve as R
    case = V.build_case(V.read_dicts([{**ROW, "framework": "Megatron-Core", "global_batch": 512}])[0])
    assert case.plan.interleave == R.smallest_interleave(40, 2, 32, 2) and "unstated_interleave" not in case.note
    stated = V.build_case(V.read_dicts([{**LLAMA3_405B, "interleave": 2}])[0])
    assert stated.plan.interleave == 2 and "unstated_interleave" not in stated.note


FSDP_ROW = {"case_id": "r", "model": "Llama 2 7B", "gpu": "A100 80GB", "n_gpus": 64, "tp": 1, "pp": 1, "dp": 64,
            "global_batch": 1024, "seq_len": 4096, "measured_iter_time_s": 10.0, "framework": "PyTorch FSDP"}


@pytest.mark.parametrize("extra", [{"notes": "gradient accumulation steps 4"}, {"notes": "grad accum 4"},
                                   {"notes": "GA=4"}, {"notes": "4 micro-batches per step"},
                                   {"notes": "micro-batch size 4"}, {"notes": "per-device batch size 4"},
                                   {"GradAccum": "4"}, {"gradient_accumulation_steps": "4"}])
def test_a_micro_batch_or_accumulation_stated_outside_its_column_is_read(extra):
    # 1024 sequences over dp 64 in 4 steps: micro-batches of 4 (the FSDP stack's own default accumulates nothing: 16)
    case = V.build_case(V.read_dicts([{**FSDP_ROW, **extra}])[0])
    assert case.plan.micro_batch == 4 and "micro_batch 4 from the text" in case.note
    default = V.build_case(V.read_dicts([FSDP_ROW])[0])
    assert default.plan.micro_batch == 1024 // 64


def test_accumulation_that_does_not_divide_the_batch_is_not_read_and_a_stated_micro_batch_stands():
    odd = V.build_case(V.read_dicts([{**FSDP_ROW, "notes": "grad accum 3"}])[0])
    assert odd.plan.micro_batch == 16 and "from the text" not in odd.note
    stated = V.build_case(V.read_dicts([{**FSDP_ROW, "micro_batch": 2, "notes": "grad accum 4"}])[0])
    assert stated.plan.micro_batch == 2


def test_hugging_face_config_names_and_nanotron_sweep_headers_are_read(tmp_path):
    """A sweep table that dumps the model's config.json names (num_hidden_layers, hidden_size, num_attention_heads,
    num_key_value_heads, intermediate_size, vocab_size) beside nanotron's knobs (batch_accum, zero_stage, tok/s/gpu)
    is read as the same row written with the file's own column names."""
    path = tmp_path / "sweep.csv"
    path.write_text("gpu,seq_len,mbs,batch_accum,gbs,tok/s/gpu,dp,pp,tp,hidden_size,num_hidden_layers,"
                    "num_attention_heads,num_key_value_heads,intermediate_size,vocab_size,zero_stage,source\n"
                    "H100 80GB,4096,4,4,128,9000,8,1,1,2048,16,32,8,8192,128256,0,nanotron sweep\n")
    row = V.read(path)[0]
    assert (row["n_layers"], row["d_model"], row["n_heads"], row["n_kv_heads"], row["ffn_hidden"], row["vocab"]) \
        == (16, 2048, 32, 8, 8192, 128256)
    assert (row["grad_accum"], row["micro_batch"], row["tokens_per_s_per_gpu"]) == (4, 4, 9000)
    case = V.build_case(row)
    assert case.plan.sharding == "none" and case.plan.dp == 8
    assert case.measured == pytest.approx(128 * 4096 / (9000 * 8))


def test_a_node_count_is_multiplied_out_where_a_node_is_a_server(tmp_path):
    """"Nodes" x GPUs per node: the row's gpus_per_node, else an 8-GPU server's profile; an NVL72 profile, whose
    gpus_per_node is its NVLink domain (a compute tray holds 4), leaves the count unread and says so."""
    path = tmp_path / "nodes.csv"
    path.write_text("Model,GPU,Nodes,gpus_per_node,TP,PP,GBS,Seq Len,Tokens/sec/GPU\n"
                    "Llama 3 70B,H100 SXM,8,,4,4,512,8192,900\n"
                    "Llama 3 70B,H100 SXM,8,4,4,4,512,8192,900\n"
                    "Llama 3 70B,GB200,16,,4,4,512,8192,900\n")
    rows = V.read(path)
    assert [r["n_gpus"] for r in rows] == [64, 32, None]
    c = V.build_case(rows[0])
    assert c.plan.dp == 4 and "n_gpus 64 = 8 nodes x 8" in c.note
    assert c.measured == pytest.approx(512 * 8192 / (900 * 64))
    with pytest.raises(V.Skip, match="16 nodes are not multiplied out"):
        V.build_case(rows[2])


@pytest.mark.parametrize("text", ["TF32", "fp32 (tf32)", "TensorFloat-32"])
def test_tf32_is_refused_rather_than_priced_as_cuda_core_fp32(text):
    """TF32 GEMMs run on the tensor cores (A100: 156 TFLOP/s), fp32 on the CUDA cores (19.5): reading one as the other
    would price the step 8x too slow, so the cell is one clear refusal."""
    with pytest.raises(InputError, match="TF32 tensor-core training is not modelled"):
        normalize.precision(text)
    assert normalize.precision("FP32") == "fp32" and normalize.precision("BF16 with TF32 matmuls") == "bf16"


def test_a_time_header_in_milliseconds_reads_its_cells_in_ms(tmp_path):
    """Megatron-LM's log line "elapsed time per iteration (ms)" as a header: its bare cells are milliseconds, a cell
    that names its own unit keeps it; a header in ms that names no time column (a rate, a memory) is not read."""
    path = tmp_path / "log.csv"
    path.write_text('case_id,model,gpu,n_gpus,tp,pp,dp,global_batch,seq_len,elapsed time per iteration (ms)\n'
                    'a,GPT-3 1.3B,A100 80GB,8,1,1,8,64,2048,"1,234.5"\n'
                    'b,GPT-3 1.3B,A100 80GB,8,1,1,8,64,2048,1.2 s\n')
    a, b = V.read(path)
    assert a["measured_iter_time_s"] == pytest.approx(1.2345) and b["measured_iter_time_s"] == pytest.approx(1.2)
    assert V.ms_headers(["Tokens/s (ms)", "Memory (ms)", "Step time (s)"]) == {}


@pytest.mark.parametrize("header,cell,seconds", [
    ("ms/step", "812", 0.812), ("ms per iteration", "812", 0.812), ("iter time (ms)", "812", 0.812),
    ("step_time_ms", "812", 0.812), ("s/it", "0.812", 0.812), ("sec/iter", "0.812", 0.812),
    ("Time/step (s)", "0.812", 0.812), ("Iter time (sec)", "0.812", 0.812)])
def test_a_time_per_step_written_as_a_reciprocal_rate_reads_in_its_unit(tmp_path, header, cell, seconds):
    """tqdm's "s/it" (the Hugging Face Trainer's progress bar), "ms/step", "sec/iter": the step time in the header's
    unit, whichever way round the header writes it."""
    path = tmp_path / "t.csv"
    path.write_text(f'case_id,model,gpu,n_gpus,tp,pp,dp,global_batch,seq_len,"{header}"\n'
                    f'a,GPT-3 1.3B,A100 80GB,8,1,1,8,64,2048,{cell}\n')
    (row,) = V.read(path)
    assert row["measured_iter_time_s"] == pytest.approx(seconds)


@pytest.mark.parametrize("header", ["Time (s)", "Batch size (s)", "Tokens/s (ms)", "ms/token", "items"])
def test_time_units_on_other_columns_read_nothing(header):
    assert V.canonical_headers([header]) == {} and V.ms_headers([header]) == {}


def test_nanogpt_config_names_read_as_the_model_shape(row_case):
    """nanoGPT's GPTConfig (n_layer, n_head, n_embd, block_size) as a sweep table dumps it beside the run."""
    case = row_case({"case_id": "a", "n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024, "vocab": 50304,
                     "gpu": "A100 80GB", "n_gpus": 8, "tp": 1, "pp": 1, "dp": 8, "global_batch": 480,
                     "framework": "nanoGPT", "s/it": 0.5})
    m = case.model
    assert (m.n_layers, m.n_heads, m.d_model, m.seq_len) == (12, 12, 768, 1024)
    assert case.measured == pytest.approx(0.5) and case.framework == "nanogpt"


def test_the_pax_readme_headers_read_as_their_columns():
    """NVIDIA JAX-Toolbox's Pax tables: 'Sequences/Sec' is the whole job's rate, 'BS / GPU' the per-device batch."""
    assert V.canonical_headers(["#GPUs", "BS / GPU", "Sequences/Sec", "FSDP"]) == {
        "#GPUs": "n_gpus", "BS / GPU": "local_batch", "Sequences/Sec": "samples_per_s", "FSDP": "fsdp"}
