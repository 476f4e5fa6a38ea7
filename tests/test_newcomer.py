"""What a newcomer meets (issue 19 items 5-8): progress on stderr, help for every flag, profiles that find
their includes from any working directory, `calibrate host --out`, parameter counts in `models list`, and
the step time's validation-error band."""
import argparse
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.base import progress

ROOT = Path(__file__).resolve().parents[1]


class _Tty(io.StringIO):
    def isatty(self):
        return True


# ---- progress ------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(total=st.integers(1, 200), chunks=st.lists(st.integers(1, 50), max_size=30))
def test_log_progress_is_lines_and_ends_full(total, chunks):
    """Not a terminal: no carriage return anywhere, every frame a line, and the last line counts total/total
    however the updates were split (the comm sweep once stopped at 29/30)."""
    out = io.StringIO()
    done = 0
    with progress.bar("sweep", total=total, stream=out, delay=0) as b:
        for c in chunks:
            step = min(c, total - done)
            b.update(step)
            done += step
        b.update(total - done)
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines and all(ln.startswith("sweep: ") for ln in lines)
    assert lines[-1].startswith(f"sweep: {total}/{total} (100 %)")


def test_log_progress_is_few_lines():
    """A log gets the start and the end line, not one line per item (items faster than the log interval)."""
    out = io.StringIO()
    for _ in progress.track(range(1000), "loop", stream=out, delay=0):
        pass
    assert len(out.getvalue().splitlines()) <= 3


def test_terminal_progress_redraws_in_place():
    out = _Tty()
    for _ in progress.track(range(3), "loop", stream=out, delay=0):
        pass
    assert "\r" in out.getvalue() and "3/3" in out.getvalue()


def test_progress_can_be_silenced(monkeypatch):
    monkeypatch.setenv("ROOFLINE_PROGRESS", "0")
    out = io.StringIO()
    for _ in progress.track(range(5), "loop", stream=out):
        pass
    with progress.phase("fit", stream=out):
        pass
    assert out.getvalue() == ""


def test_phase_says_done_or_failed():
    for stream in (io.StringIO(), _Tty()):
        with progress.phase("fit", stream=stream, delay=0):
            pass
        lines = stream.getvalue().replace("\r", "\n").split("\n")
        assert [ln for ln in lines if ln.strip()][-1].endswith("done")
        assert stream.getvalue().count("done") == 1 and stream.getvalue().endswith("\n")
    assert "\r" not in stream.getvalue() or isinstance(stream, _Tty)
    out = io.StringIO()
    with pytest.raises(ValueError):
        with progress.phase("fit", stream=out, delay=0):
            raise ValueError("x")
    assert out.getvalue().splitlines()[-1].endswith("failed") and "\r" not in out.getvalue()


def test_quick_work_shows_nothing():
    """Work that ends within the delay (a bad input found at once) prints no progress: its error stays one line."""
    out = io.StringIO()
    with pytest.raises(ValueError):
        with progress.phase("fit", stream=out, delay=5):
            raise ValueError("x")
    for _ in progress.track(range(10), "loop", stream=out, delay=5):
        pass
    assert out.getvalue() == ""


def test_a_log_gets_the_last_line_of_a_loop_that_outlasts_the_delay():
    """A loop longer than the delay but shorter than the log interval still ends with its count."""
    import time
    out = io.StringIO()
    for _ in progress.track(range(3), "loop", stream=out, delay=0.05):
        time.sleep(0.05)
    assert out.getvalue().splitlines()[-1].startswith("loop: 3/3")


def test_prediction_path_imports_neither_tqdm_nor_validation():
    """`transformer` prints the band from the shipped table: no validation code, no tqdm, no sympy."""
    code = ("import sys, contextlib, io\nfrom roofline.face.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['transformer', '--model', 'gpt3-175b', '--tp', '8', '--pp', '8', '--dp', '16', "
            "'--global-batch', '1536'])\n"
            "print(sorted(m for m in ('tqdm', 'roofline.views.validate', 'roofline.base.progress', 'sympy') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


# ---- help ----------------------------------------------------------------------------------------
def _actions(p, path=()):
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _actions(sp, path + (name,))
        elif not isinstance(a, argparse._HelpAction):
            yield path, a


def test_every_flag_of_every_command_has_help():
    from roofline.face.cli import parser
    missing = [" ".join(path) + " " + (a.option_strings[0] if a.option_strings else a.dest)
               for path, a in _actions(parser(None)) if not (a.help or "").strip()]
    assert not missing, missing


@pytest.mark.parametrize("module,target", [
    ("roofline.face.docs_cli", "docs/cli.md"),
    ("roofline.model.formulas.concepts", "docs/concepts.md"),
    ("roofline.model.formulas.codegen", "roofline/model/_compiled.py"),
    ("roofline.views.uncertainty", "roofline/data/uncertainty.yaml"),
])
@pytest.mark.filterwarnings("ignore:.*found in sys.modules after import of package:RuntimeWarning")
def test_generators_print_usage_on_help_and_write_nothing(module, target, capsys, monkeypatch):
    """`python -m MODULE`: a real interpreter for the first generator; the others run their `__main__` block in
    this process (runpy, the same code path without the ~1 s start and imports of a new interpreter)."""
    import runpy
    monkeypatch.chdir(ROOT)
    f = ROOT / target
    before = (f.stat().st_mtime_ns, f.read_bytes())
    for args, rc in ((["--help"], 0), (["--no-such-flag"], 2)):
        if module == "roofline.face.docs_cli":
            r = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=ROOT,
                               env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
            code, out, err = r.returncode, r.stdout, r.stderr
        else:
            monkeypatch.setattr(sys, "argv", [module, *args])
            with pytest.raises(SystemExit) as exc:
                runpy.run_module(module, run_name="__main__")
            code = exc.value.code
            out, err = capsys.readouterr()
        assert code == rc, err
        assert "usage:" in (out if rc == 0 else err)
    assert (f.stat().st_mtime_ns, f.read_bytes()) == before


# ---- profiles: includes relative to the profile's folder -----------------------------------------
def test_relative_includes_resolve_against_the_profile_folder(tmp_path, monkeypatch):
    """base / collectives_from / host_from paths are read from the folder of the file that names them, not
    from the working directory (a same-named file in the working directory is not taken)."""
    from roofline.spec import hardware
    lib = tmp_path / "lib"
    (lib / "parts").mkdir(parents=True)
    (lib / "parts" / "parent.yaml").write_text("base: a100-sxm4-80gb\nid: parent\ngpus_per_node: 4\n")
    (lib / "parts" / "links.yaml").write_text(
        "id: links\ncollectives: {inter: {ar: {alpha: 7 us, busbw: 11 GB/s}}}\n")
    (lib / "parts" / "host.yaml").write_text("id: h\nhost: {layer_fwd: 1234 us, kernels_fwd: 3}\n")
    (lib / "child.yaml").write_text("base: parts/parent.yaml\nid: child\ncollectives_from: parts/links.yaml\n"
                                    "host_from: parts/host.yaml\n")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "parts").mkdir(parents=True)
    (elsewhere / "parts" / "parent.yaml").write_text("base: h100-sxm\nid: decoy\ngpus_per_node: 2\n")
    monkeypatch.chdir(elsewhere)
    hw = hardware.load(str(lib / "child.yaml"))
    assert hw.gpus_per_node == 4
    assert hw.collectives["ar", "inter"] == pytest.approx((7e-6, 11e9))
    base = hardware.load("a100-sxm4-80gb")
    launch = 5e-6                                   # defaults.yaml host.launch, kept: the include sets two keys
    assert hw.host_fwd == pytest.approx(1234e-6 + 3 * launch)
    assert hw.host_bwd == pytest.approx(base.host_bwd)
    monkeypatch.chdir(lib)                          # the same file through a relative path from its own folder
    assert hardware.load("child.yaml").gpus_per_node == 4


def test_host_from_without_host_block_is_one_line_error(tmp_path):
    from roofline.spec import hardware
    from roofline.base.errors import InputError
    (tmp_path / "empty.yaml").write_text("id: e\n")
    (tmp_path / "p.yaml").write_text("base: a100-sxm4-80gb\nid: p\nhost_from: empty.yaml\n")
    with pytest.raises(InputError, match="host_from 'empty.yaml' has no host: block"):
        hardware.load(str(tmp_path / "p.yaml"))


# ---- calibrate host --out ------------------------------------------------------------------------
def test_calibrate_host_out_writes_an_includable_block(tmp_path, capsys):
    """`calibrate host --out` writes the measured block; a profile takes it with host_from (relative path), and
    with --base the file is a whole profile: both price the host as the block says."""
    pytest.importorskip("torch")
    import yaml

    from roofline.spec import hardware
    from roofline.face.cli import main
    out = tmp_path / "m" / "my-host"
    assert main(["calibrate", "host", "--repeats", "1", "--runs", "1", "--out", str(out),
                 "--base", "a100-sxm4-80gb"]) == 0
    cap = capsys.readouterr()
    assert "\r" not in cap.err and f"wrote {out}.yaml" in cap.err
    f = Path(f"{out}.yaml")
    block = yaml.safe_load(f.read_text())["host"]
    whole = hardware.load(str(f))
    assert whole.gpus_per_node == hardware.load("a100-sxm4-80gb").gpus_per_node
    (tmp_path / "m" / "mine.yaml").write_text("base: h100-sxm\nid: mine\nhost_from: my-host.yaml\n")
    inc = hardware.load(str(tmp_path / "m" / "mine.yaml"))
    us = lambda v: float(v.split()[0]) * 1e-6  # noqa: E731
    launch = us(block["launch"])
    assert block["launch"] == "5 us"                # a CPU measurement: the assumed per-kernel launch cost
    for h in (whole, inc):
        assert h.host_fwd == pytest.approx(us(block["layer_fwd"]) + block["kernels_fwd"] * launch)
        assert h.host_mb == pytest.approx(us(block["microbatch"]) + block["kernels_microbatch"] * launch)


def test_calibrate_host_bad_base_writes_nothing(tmp_path, capsys):
    pytest.importorskip("torch")
    from roofline.face.cli import main
    rc = main(["calibrate", "host", "--out", str(tmp_path / "new" / "x"), "--base", "no-such-gpu"])
    assert rc == 2 and not (tmp_path / "new").exists()
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# ---- models list ---------------------------------------------------------------------------------
def test_models_list_parameter_counts(cli):
    """Against published counts: GPT-3 175B (Brown et al. 2020: 175.0 B), Mixtral 8x7B (Jiang et al. 2024:
    46.7 B total, 12.9 B active per token), Llama 3 8B (8.03 B, Meta's model card)."""
    r = cli("models", "list")
    assert r.returncode == 0, r.stderr
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines()[1:]}

    def counts(pid):
        f = rows[pid].split()
        num = lambda a, b: float(a) * {"M": 1e6, "B": 1e9, "T": 1e12}[b]  # noqa: E731
        total = num(f[1], f[2])
        active = num(f[3], f[4]) if f[4] in ("M", "B", "T") else total
        return total, active
    total, active = counts("gpt3-175b")
    assert total == pytest.approx(175.0e9, rel=0.005) and active == total
    total, active = counts("mixtral-8x7b")
    assert total == pytest.approx(46.7e9, rel=0.005) and active == pytest.approx(12.9e9, rel=0.005)
    assert counts("llama3-8b")[0] == pytest.approx(8.03e9, rel=0.005)
    for pid, ln in rows.items():                    # active < total exactly for the MoE presets
        t, a = counts(pid)
        assert (a < t) == ("MoE" in ln), ln


# ---- the step time's band ------------------------------------------------------------------------
def test_uncertainty_table_is_current():
    """The shipped table equals what the validation sets give today (within half a printed percent)."""
    import yaml

    from roofline.views import uncertainty as U
    fresh = U.table(U.measured_errors())
    diff = U.stale(yaml.safe_load(U.TABLE.read_text()), fresh)
    assert not diff, "run python -m roofline.views.uncertainty: " + "; ".join(diff[:5])


@settings(max_examples=60, deadline=None)
@given(errors=st.lists(st.floats(-0.9, 3.0), min_size=0, max_size=40),
       gpu=st.sampled_from(["a100", "h100", "b200"]), size=st.sampled_from(["<1B", "1B-10B", "100B-1T"]),
       nodes=st.sampled_from(["single-node", "multi-node"]))
def test_band_groups_have_enough_runs_and_ordered_quantiles(errors, gpu, size, nodes):
    from roofline.views import uncertainty as U
    runs = [{"dataset": "x", "error": e, "gpu": gpu, "arch": "dense", "size": size, "nodes": nodes} for e in errors]
    t = U.table(runs)
    assert all(g["n"] >= U.MIN_RUNS for g in t["groups"])
    pools = 1 + (U.generation(gpu) is not None)           # the family's groups and its generation's
    assert (len(t["groups"]) == pools * len(U.LEVELS)) == (len(errors) >= U.MIN_RUNS)
    for g in t["groups"]:
        assert g["n"] == len(errors)
        assert min(errors) - 1e-3 <= g["p10"] <= g["p50"] <= g["p90"] <= max(errors) + 1e-3


def test_band_falls_back_to_coarser_groups_and_never_across_gpus(monkeypatch):
    from roofline.views import uncertainty as U
    rows = [{"gpu": "a100", "arch": "dense", "size": "1B-10B", "nodes": "single-node", "n": 20, "p10": -0.2,
             "p50": 0.0, "p90": 0.1},
            {"gpu": "a100", "arch": "moe", "size": "any", "nodes": "any", "n": 12, "p10": -0.4, "p50": -0.2,
             "p90": 0.0},
            {"gpu": "a100", "arch": "any", "size": "any", "nodes": "any", "n": 30, "p10": -0.3, "p50": 0.0, "p90": 0.2}]
    monkeypatch.setattr(U, "_groups", lambda: {U._key(g): g for g in rows})
    assert U.band("a100-sxm4-80gb", 7e9, 8, 8)["n"] == 20
    assert U.band("a100-sxm4-80gb", 7e9, 64, 8)["n"] == 30          # multi-node: no such group, the GPU's pool
    assert U.band("a100-sxm4-80gb", 70e9, 8, 8)["n"] == 30
    assert U.band("a100-sxm4-80gb", 7e9, 8, 8, moe=True)["n"] == 12  # an MoE run: the MoE group, not the dense one
    assert U.band("a100-sxm4-80gb", 7e9, 8, 8, moe=True)["group"]["arch"] == "moe"
    # an MoE run under CUDA graphs: no group of its own here, so not the eager MoE one, the GPU's pool
    assert U.band("a100-sxm4-80gb", 7e9, 8, 8, moe=True, graphs=True)["n"] == 30
    # graphs do not split dense runs
    assert U.band("a100-sxm4-80gb", 7e9, 8, 8, graphs=True)["n"] == 20
    assert U.band("h100-sxm", 7e9, 8, 8) is None


def test_the_band_of_an_moe_run_follows_its_cuda_graphs():
    """The bundled table keeps MoE runs under CUDA graphs apart from eager ones (the model prices eager NeMo MoE rows
    too fast by a wider margin, docs/validation.md); a prediction takes the group of its own plan."""
    from roofline.views import uncertainty as U
    from roofline.model.predict import predict
    from roofline.spec import hardware, models
    from roofline.spec.config import Plan
    archs = {g["arch"] for g in U._groups().values()}
    assert {"moe", "moe-graphs", "dense"} <= archs
    m, hw = models.load("qwen3-30b-a3b"), hardware.load("gb200")
    eager = U.of_prediction(predict(m, Plan(dp=8, ep=8, micro_batch=4, global_batch=512, dtype="mxfp8"), hw))
    graphed = U.of_prediction(predict(m, Plan(dp=8, ep=8, micro_batch=4, global_batch=512, dtype="mxfp8",
                                              cuda_graphs="full"), hw))
    assert eager["group"]["arch"] == "moe" and graphed["group"]["arch"] == "moe-graphs"
    assert graphed["p50"] > eager["p50"]
    assert "MoE under CUDA graphs" in U.describe(graphed, "gb200")


def test_moe_and_dense_runs_are_banded_apart():
    """The shipped table's MoE and dense groups of one GPU family differ: the split is not a relabelling."""
    import yaml

    from roofline.views import uncertainty as U
    groups = {U._key(g): g for g in yaml.safe_load(U.TABLE.read_text())["groups"]}
    moe, dense = groups[("h100", "moe", "any", "any")], groups[("h100", "dense", "any", "any")]
    assert moe["n"] >= U.MIN_RUNS and dense["n"] >= U.MIN_RUNS and moe["n"] != dense["n"]
    assert abs(moe["p50"] - dense["p50"]) >= 0.005 or (moe["p10"], moe["p90"]) != (dense["p10"], dense["p90"])


def test_transformer_prints_the_band_it_puts_in_json(cli_main):
    """The implied measured range is the step time over 1 + the error quantiles, in the table and the JSON."""
    import json
    args = ["transformer", "--model", "gpt3-175b", "--tp", 8, "--pp", 8, "--dp", 16, "--global-batch", 1536]
    d = json.loads(cli_main(*args, "--json").stdout)
    b = d["step_time_band"]
    assert b is not None and b["group"]["gpu"] == "a100" and b["n"] >= 10
    assert b["low_s"] == pytest.approx(d["step_time_s"] / (1 + b["p90"]))
    assert b["high_s"] == pytest.approx(d["step_time_s"] / (1 + b["p10"]))
    text = cli_main(*args).stdout
    line = next(ln for ln in text.splitlines() if "likely measured" in ln)
    assert f"{100 * b['p10']:+.0f} % .. {100 * b['p90']:+.0f} %" in line and f"n={b['n']}" in line


def test_band_names_the_profiles_it_was_measured_on(monkeypatch):
    """A band measured on the rows' own profiles says so when it is shown for another profile of the family (a
    node's calibration such as b200-simumax), and says nothing more for a profile it was measured on."""
    from roofline.views import uncertainty as U
    rows = [{"gpu": "b200", "arch": "any", "size": "any", "nodes": "any", "n": 40, "p10": -0.3, "p50": -0.2,
             "p90": 0.0, "profiles": ["b200"]}]
    monkeypatch.setattr(U, "_groups", lambda: {U._key(g): g for g in rows})
    b = U.band("b200-simumax", 7e9, 8, 8)
    assert b["profiles"] == ["b200"]
    assert U.describe(b, "b200-simumax").endswith("; priced on b200, not on b200-simumax")
    assert "priced on" not in U.describe(U.band("b200", 7e9, 8, 8), "b200")
    # the generated table lists each group's profiles
    t = U.table([{"dataset": "x", "error": 0.01 * i, "gpu": "b200", "arch": "dense", "size": "<1B",
                  "nodes": "single-node",
                  "profile": "b200" if i % 2 else "b200-other"} for i in range(12)])
    assert all(g["profiles"] == ["b200", "b200-other"] for g in t["groups"])


def test_a_gpu_without_validated_runs_takes_its_generations_band_never_another_generations(monkeypatch):
    """GB300 has no validated run: its band is the Blackwell pool (B200, GB200 runs), said in the line; an H100 row never
    lends to a Blackwell part, and a family outside GENERATION gets none."""
    from roofline.views import uncertainty as U
    runs = ([{"dataset": "x", "error": -0.3 + 0.01 * i, "gpu": "b200", "arch": "moe", "size": "1B-10B",
              "nodes": "single-node", "profile": "b200"} for i in range(6)]
            + [{"dataset": "x", "error": -0.2 + 0.01 * i, "gpu": "gb200", "arch": "moe", "size": "1B-10B",
                "nodes": "single-node", "profile": "gb200"} for i in range(6)]
            + [{"dataset": "x", "error": 0.05 + 0.01 * i, "gpu": "h100", "arch": "moe", "size": "1B-10B",
                "nodes": "single-node", "profile": "h100-sxm"} for i in range(20)])
    t = U.table(runs)
    monkeypatch.setattr(U, "_groups", lambda: {U._key(g): g for g in t["groups"]})
    b = U.band("gb300", 3e9, 8, 72, moe=True)
    assert b["group"]["gpu"] == "blackwell" and b["n"] == 12 and b["generation_of"] == "gb300"
    assert b["p90"] < 0                                      # the Blackwell runs' errors, none of the H100 ones
    line = U.describe(b, "gb300")
    assert "blackwell GPUs" in line and "gb300 runs are validated" in line and "b200, gb200" in line
    assert U.band("b200", 3e9, 8, 8, moe=True)["group"]["gpu"] == "blackwell"   # six B200 runs: too few of its own
    assert U.band("h100-sxm", 3e9, 8, 8, moe=True)["group"]["gpu"] == "h100"
    assert U.band("tpu-v5p", 3e9, 8, 8, moe=True) is None and "no band" in U.describe(None, "tpu-v5p")


def test_a_plan_that_cannot_have_run_as_read_lends_no_error_to_the_band():
    """Rows validate flags as needing more memory than their GPU as read (over_memory) measure a misread plan, not the
    model: the band's runs leave them out, and keep the others."""
    from roofline.views import uncertainty as U
    from roofline.views import validate as V
    rows = V.read(V.dataset_path("tables"))
    res = V.validate(rows)
    flagged = {c["case_id"] for c in res["cases"] if c.get("over_memory")}
    stated = {r["case_id"] for r in rows if V.layout_stated(r)}       # rows whose layout validate chose are out too
    timed = {c["case_id"] for c in res["cases"] if c["error"] is not None}
    used = {r["case_id"] for r in U.measured_errors() if r["dataset"] == "tables"}
    assert flagged and not flagged & used
    assert used == (timed & stated) - flagged
