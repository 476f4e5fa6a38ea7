"""validate reads a benchmark table pasted from a README as it is: Markdown pipe tables (GitHub Flavored Markdown's
table extension), several tables of one header read as one file, headings and prose between them left out."""
import pytest

from roofline.base.errors import InputError
from roofline.views import validate as V

# llm-foundry scripts/train/benchmarking/README.md (mosaicml/llm-foundry 061f2c7c), two of its sections, rows as
# published (columns trimmed to the ones a row needs, the rest kept to show they are carried)
HEADER = ("|  Model | SeqLen (T) | # GPUs | GPU | MFU | MicroBatchSize | GradAccum | GlobalBatchSize | Throughput (T/s) "
          "| Precision | Sharding Strategy | Activation Checkpointing | Framework |")
RULE = "|  --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
H100 = "|  13b | 2048 | 8 | h100_80gb | 39.79 | 2 | 1 | 16 | 38336 | amp_bf16 | FULL_SHARD | False | llm-foundry |"
A100 = "|  30b | 2048 | 8 | a100_80gb | 55.3 | 3 | 21 | 504 | 7330 | amp_bf16 | FULL_SHARD | True | llm-foundry |"


def _write(tmp_path, text):
    p = tmp_path / "bench.md"
    p.write_text(text)
    return p


def test_two_sections_of_one_header_read_as_one_table(tmp_path):
    text = "# MPT Training Benchmarks\n\nSome prose | with a pipe.\n\n## H100 80GB BF16\n" + "\n".join(
        [HEADER, RULE, H100]) + "\n\n## A100 80GB\n\n" + "\n".join([HEADER, RULE, A100]) + "\n"
    rows = V.read(_write(tmp_path, text))
    assert len(rows) == 2
    h, a = rows
    assert (h["n_gpus"], h["global_batch"], h["micro_batch"], h["seq_len"]) == (8, 16, 2, 2048)
    assert (a["global_batch"], a["micro_batch"]) == (504, 3)
    assert h["tokens_per_s"] == 38336 and a["tokens_per_s"] == 7330
    assert h["case_id"] == "row 8" and a["case_id"] == "row 14"        # named by their lines in the file
    c = V.build_case(a)
    assert c.measured == pytest.approx(504 * 2048 / 7330)          # the time the table's throughput gives
    assert c.hw.id == "a100-sxm4-80gb" and c.plan.recompute == "full" and c.plan.micro_batch == 3


def test_the_same_rows_as_csv_price_the_same(tmp_path):
    md = V.read(_write(tmp_path, "\n".join([HEADER, RULE, H100, A100])))
    csv_text = "\n".join(",".join(c.strip() for c in ln.strip().strip("|").split("|")) for ln in (HEADER, H100, A100))
    (tmp_path / "bench.csv").write_text(csv_text + "\n")
    cs = V.read(tmp_path / "bench.csv")
    for a, b in zip(md, cs):
        assert {k: v for k, v in a.items() if k != "case_id"} == {k: v for k, v in b.items() if k != "case_id"}
    t_md, t_csv = (V.evaluate_cases([V.build_case(r) for r in rows])["step_time"] for rows in (md, cs))
    assert list(t_md) == pytest.approx(list(t_csv), rel=1e-12) and min(t_md) > 0


def test_tables_of_different_headers_are_one_line(tmp_path):
    other = HEADER.replace("| Framework |", "| Stack |")
    text = "\n".join([HEADER, RULE, H100, "", other, RULE, A100])
    with pytest.raises(InputError, match=r"line 5: a Markdown table whose header differs .*line 1"):
        V.read(_write(tmp_path, text))


def test_a_row_of_the_wrong_width_is_one_line(tmp_path):
    with pytest.raises(InputError, match=r"line 3: a table row of 12 cells under a header of 13"):
        V.read(_write(tmp_path, "\n".join([HEADER, RULE, H100.rsplit("|", 2)[0] + "|"])))


def test_an_escaped_pipe_stays_in_its_cell():
    assert V._md_cells(r"| a \| b | c |") == ["a | b", "c"]
    assert V._md_cells("a | b") == ["a", "b"]


def test_a_csv_with_pipes_in_a_cell_is_still_a_csv(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("model,gpu_id,n_gpus,global_batch,seq_len,tokens_per_s,settings\n"
                 "gpt3-1.3b,a100-sxm4-80gb,8,64,2048,100000,a|b\n")
    assert V.markdown_table(p.read_text(), p) is None
    assert V.read(p)[0]["settings"] == "a|b"


# torchtitan docs/performance.md (pytorch/torchtitan 04133643), its Llama 3 table as published ("Activation
# checkpoiting" as spelled there, a footnote marker in a cell), with the columns its prose states (64 A100 80GB, FSDP2)
TITAN = """| Model size | Batch size | Activation checkpoiting | WPS | MFU |
| ----- | ----- | ----- | ----- | ----- |
| 8B | 1 | selective op | 2973 | 58.2% |
| 70B | 1[^1] | full | 331 | 51.7% |
"""


def _titan(tmp_path, local_header="Local batch size", extra=""):
    lines = TITAN.replace("| Batch size |", f"| {local_header} |").splitlines()
    lines[0] += " Model | GPU | # GPUs | Framework |" + extra
    lines[1] += " --- | --- | --- | --- |" + ("--- |" if extra else "")
    models = ["Llama 3 8B", "Llama 3 70B"]
    for i, m in enumerate(models):
        lines[2 + i] += f" {m} | A100 80GB | 64 | torchtitan |" + (" 2 |" if extra else "")
    return V.read(_write(tmp_path, "\n".join(lines) + "\n"))


def test_a_local_batch_gives_the_global_batch_over_dp(tmp_path):
    rows = _titan(tmp_path)
    assert [r["local_batch"] for r in rows] == [1, 1]             # "1[^1]": the footnote marker left out
    case = V.build_case(rows[0])
    assert (case.plan.global_batch, case.plan.micro_batch, case.plan.dp) == (64, 1, 64)
    assert case.plan.recompute == "op"                           # the misspelled header read as recompute
    assert "'Activation checkpoiting' read as recompute" in case.note
    assert "64 = local batch 1 x gradient accumulation 1 (unstated" in case.note
    seq = case.model.seq_len
    assert case.measured == pytest.approx(64 * seq / (2973 * 64))          # WPS is per GPU


def test_stated_gradient_accumulation_multiplies_the_local_batch(tmp_path):
    rows = _titan(tmp_path, extra=" GradAccum |")
    case = V.build_case(rows[0])
    assert case.plan.global_batch == 1 * 2 * 64 and case.plan.micro_batch == 1
    assert "gradient accumulation 2 (stated)" in case.note


def test_a_micro_batch_with_a_stated_layout_gives_megatrons_default_batch(row_case):
    case = row_case({"model": "gpt3-1.3b", "gpu_id": "a100-sxm4-80gb", "n_gpus": 16, "tp": 2, "pp": 1,
                     "micro_batch": 4, "measured_iter_time_s": 1.0, "framework": "megatron-lm"})
    assert case.plan.dp == 8 and case.plan.global_batch == 4 * 8        # micro x dp: one micro-batch per step
    # with a pipeline that default would run one micro-batch through it: the row is skipped with the reason
    with pytest.raises(V.Skip, match="micro-batches per pipeline"):
        row_case({"model": "gpt3-1.3b", "gpu_id": "a100-sxm4-80gb", "n_gpus": 16, "tp": 2, "pp": 2,
                  "micro_batch": 4, "measured_iter_time_s": 1.0, "framework": "megatron-lm"})


def test_no_dp_no_batch(row_case):
    with pytest.raises(V.Skip, match="layout leaves dp unknown"):
        row_case({"model": "gpt3-1.3b", "gpu_id": "a100-sxm4-80gb", "n_gpus": 16, "tp": 2,
                  "micro_batch": 4, "measured_iter_time_s": 1.0, "framework": "megatron-lm"})


def test_a_header_that_is_a_column_name_wins_over_an_alias():
    # "Model size" is an alias of model; "Model" beside it is the column itself
    assert V.canonical_headers(["Model size", "Model", "GPU"]) == {"Model": "model", "GPU": "gpu"}
    assert V.canonical_headers(["Model size", "GPU"]) == {"Model size": "model", "GPU": "gpu"}


@pytest.mark.parametrize("header,column", [("Activation checkpoiting", "recompute"), ("Sequnce length", "seq_len"),
                                           ("Global batchsize", "global_batch"), ("Tensor paralell size", "tp"),
                                           ("Pipline parallel size", "pp"), ("Numer of layers", "n_layers")])
def test_a_near_miss_of_a_long_header_reads_as_its_column(header, column):
    assert V._misspelled(header) == column


@pytest.mark.parametrize("header", ["TP sz", "Notes2", "Peak TFLOPs", "Peak memory (GB)", "Peak memory GB",
                                    "mla_qk_xope_head_dim", "Time per iteration (ms)", "Time per iteraton (ms)",
                                    "Micro batch sizes"])
def test_short_or_ambiguous_headers_are_not_guessed(header):
    assert V._misspelled(header) is None


def test_markdown_cells_lose_their_markup():
    assert V._md_cells("| **56.8%** | [Llama 3 8B](https://x.y) | `fsdp` | 1[^2] |") == ["56.8%", "Llama 3 8B", "fsdp",
                                                                                          "1"]


# Dubey et al. 2024 (The Llama 3 Herd of Models) Table 4, two rows with its own headers, plus model and GPU columns
LLAMA3 = """| GPUs | TP | CP | PP | DP | Seq. Len. | Batch size/DP | Tokens/Batch | TFLOPs/GPU | BF16 MFU | Model | GPU |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| 8,192 | 8 | 1 | 16 | 64 | 8,192 | 32 | 16M | 430 | 43% | Llama 3 405B | H100 |
| 16,384 | 8 | 16 | 16 | 8 | 131,072 | 16 | 16M | 380 | 38% | Llama 3 405B | H100 |
"""


def test_llama3_table4_headers_read_as_their_columns(tmp_path):
    rows = V.read(_write(tmp_path, LLAMA3))
    a, b = rows
    assert (a["n_gpus"], a["cp"], a["dp"], a["local_batch"], a["measured_mfu"]) == (8192, 1, 64, 32, 0.43)
    ca, cb = V.build_case(a), V.build_case(b)
    # 16M tokens: 2^24 / 8192 = 2048 sequences = 32 per DP rank x 64; at 131,072 tokens 128 = 16 x 8
    assert ca.plan.global_batch == 2048 == 32 * 64 and cb.plan.global_batch == 128 == 16 * 8
    assert "'16M tokens' read as 2048 sequences" in ca.note


@pytest.mark.parametrize("cell,seqs", [("16,777,216", 2048), ("16M", 2048), ("4M tokens", 512), ("2048K", 256)])
def test_a_batch_column_in_tokens_reads_any_spelling_as_tokens(row_case, cell, seqs):
    case = row_case({"model": "llama3-8b", "gpu_id": "h100-sxm", "n_gpus": 64, "tp": 1, "pp": 1, "seq_len": 8192,
                     "global_batch_tokens": cell, "measured_iter_time_s": 10.0, "framework": "megatron-lm"})
    assert case.plan.global_batch == seqs


def test_a_batch_column_in_tokens_that_is_no_count_skips_the_row(row_case):
    with pytest.raises(V.Skip, match="global_batch_tokens must be a token count, got 'lots'"):
        row_case({"model": "llama3-8b", "gpu_id": "h100-sxm", "n_gpus": 64, "tp": 1, "pp": 1, "seq_len": 8192,
                  "global_batch_tokens": "lots", "measured_iter_time_s": 10.0})


def test_a_completed_layout_keeps_its_note_beside_the_interleave_note(row_case):
    """MegaScale-style row (Jiang et al. 2024 Table 2 headers): no layout stated; both choices are said."""
    case = row_case({"Model": "GPT-3 175B", "Batch Size": 768, "GPUs": 256, "Iteration Time (s)": 40.0, "GPU": "A100"})
    assert case.plan.pp > 1 and case.plan.interleave > 1          # a pipelined layout whose v was chosen too
    assert "tp/pp/dp not stated" in case.note and "interleave not stated" in case.note
    assert case.note.index("(validate.complete_layout)") < case.note.index("interleave not stated")


ROW = ["gpt3-1.3b", "a100-sxm4-80gb", "8", "1", "1", "64", "8"]
COLS = ["model", "gpu_id", "n_gpus", "tp", "pp", "global_batch", "micro_batch", "measured_iter_time_s"]


def test_a_tab_separated_sheet_reads_as_the_csv(tmp_path):
    (tmp_path / "a.tsv").write_text("\t".join(COLS) + "\n" + "\t".join(ROW + ["1.5"]) + "\n")
    (tmp_path / "a.csv").write_text(",".join(COLS) + "\n" + ",".join(ROW + ["1.5"]) + "\n")
    assert V.read(tmp_path / "a.tsv") == V.read(tmp_path / "a.csv")


def test_a_semicolon_sheet_reads_its_decimal_commas(tmp_path):
    (tmp_path / "a.csv").write_text(";".join(COLS + ["measured_mfu", "notes"]) + "\n" +
                                    ";".join(ROW + ["1,5", "41,5 %", "a, b"]) + "\n")
    r = V.read(tmp_path / "a.csv")[0]
    assert (r["measured_iter_time_s"], r["measured_mfu"], r["n_gpus"], r["notes"]) == (1.5, 0.415, 8, "a, b")


def test_a_comma_file_keeps_digit_groups(tmp_path):
    (tmp_path / "a.csv").write_text(",".join(COLS) + "\n" + ",".join(ROW[:5] + ['"1,536"', "8", "1.5"]) + "\n")
    assert V.read(tmp_path / "a.csv")[0]["global_batch"] == 1536


@pytest.mark.parametrize("cell,n", [("8x A100 80GB", "8"), ("2 x 8 H100", "16"), ("4x8xA100", "32"),
                                    ("16 H100 GPUs", "16"), ("64 x H100 SXM", "64"), ("A100 80GB", ""), ("3090 Ti", ""),
                                    ("80GB A100", ""), ("8 x 80GB A100", ""), ("16 H100", "")])
def test_a_count_in_the_gpu_cell_gives_a_blank_n_gpus(cell, n):
    r = {"n_gpus": "", "gpu": cell}
    V.gpus_from_text(r)
    assert r["n_gpus"] == n


def test_a_stated_n_gpus_is_not_replaced_by_the_gpu_cell():
    r = {"n_gpus": "32", "gpu": "8x A100"}
    V.gpus_from_text(r)
    assert r["n_gpus"] == "32" and V.GPUS_TEXT_NOTE not in r


def test_a_hardware_column_names_the_gpu_and_its_count(tmp_path):
    (tmp_path / "a.csv").write_text("Model,Hardware,Global batch size,Seq len,Throughput (tokens/s),Framework\n"
                                    "Llama-2-7B,8x A100 80GB,64,4096,25000,torchtitan\n")
    r = V.read(tmp_path / "a.csv")[0]
    assert (r["gpu_id"], r["n_gpus"]) == ("a100-sxm4-80gb", 8)
    assert "n_gpus 8 from the gpu cell '8x A100 80GB'" in V.build_case(r).note


def test_a_bare_batch_size_below_dp_is_the_per_rank_batch(tmp_path):
    """torchtitan's table as published says "Batch size" (its prose: the local batch, global = 1 x 64)."""
    rows = _titan(tmp_path, local_header="Batch size")
    case = V.build_case(rows[0])
    assert (case.plan.global_batch, case.plan.dp) == (64, 64)
    assert "'Batch size' 1 is smaller than dp 64: read as the per-rank batch" in case.note


def test_a_bare_batch_size_that_can_be_global_stays_global(row_case):
    case = row_case({"Model": "gpt3-1.3b", "GPU": "A100 80GB", "GPUs": 8, "Batch size": 64, "TP": 1, "PP": 1,
                     "Step time (s)": 1.0, "Framework": "megatron-lm"})
    assert case.plan.global_batch == 64 and "per-rank batch" not in case.note


@pytest.mark.parametrize("magic", [b"PK\x03\x04\x14\x00\x06\x00", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"])
def test_a_workbook_is_one_line_naming_the_way_out(tmp_path, magic):
    p = tmp_path / "runs.xlsx"
    p.write_bytes(magic + b"\x00\xff" * 8)
    with pytest.raises(InputError, match=r"a spreadsheet workbook \(xlsx/xls\), not text: save the sheet as CSV"):
        V.read(p)


@pytest.mark.parametrize("header,column", [("Sequence length (tokens)", "seq_len"), ("Seq len [tokens]", "seq_len"),
                                           ("Global batch size (sequences)", "global_batch"),
                                           ("GBS (tokens)", "global_batch_tokens"),
                                           ("Batch size in tokens", "global_batch_tokens"),
                                           ("Micro batch size (samples)", "micro_batch"), ("TP (#)", "tp"),
                                           ("Number of GPUs (count)", "n_gpus")])
def test_a_header_with_its_unit_reads_as_its_column(header, column):
    assert V.canonical_headers([header]) == {header: column}


@pytest.mark.parametrize("header", ["Batch size (GB)", "Sequence length (s)", "Micro batch size (tokens)",
                                    "Model (name)", "Notes (free text)"])
def test_a_unit_the_column_does_not_take_reads_nothing(header):
    assert V.canonical_headers([header]) == {}


def test_a_batch_in_tokens_header_reads_its_cells_as_tokens(row_case):
    case = row_case({"Model": "llama3-8b", "GPU": "H100", "GPUs": 64, "TP": 1, "PP": 1,
                     "Sequence length (tokens)": 8192, "Global batch size (tokens)": "4,194,304",
                     "Step time (s)": 5.0, "Framework": "megatron-lm"})
    assert case.model.seq_len == 8192 and case.plan.global_batch == 512
