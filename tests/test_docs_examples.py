"""The example outputs quoted in the docs are what the commands print now (roofline/face/docs_examples.py), and
the search's Pareto plot labels what it draws."""
import dataclasses

import pytest

from roofline.face import docs_examples as D


# ---------------------------------------------------------------------------------------------
# the generator on synthetic pages (no command runs): filters, excerpts, check

OUT = "a\nb\nc\n\nsection x\nd\ne\n\nf\n"


def fake_run(cmd):
    assert cmd == "python -m roofline fake", cmd
    return OUT


@pytest.mark.parametrize("filters, expected", [
    ([], "a\nb\nc\n\nsection x\nd\ne\n\nf\n"),
    (["head 2"], "a\nb\n...\n"),
    (["tail 1"], "...\nf\n"),
    (["lines 2-3,6-6"], "...\nb\nc\n...\nd\n...\n"),
    (["grep ^[df]"], "...\nd\n...\nf\n"),
    (["section ^section"], "...\nsection x\nd\ne\n...\n"),
    (["section ^section", "tail 1"], "...\ne\n...\n"),
])
def test_excerpt_filters(filters, expected):
    assert D.excerpt(OUT, filters) == expected


def test_unknown_filter_and_missing_section_refused():
    with pytest.raises(D.ExampleError, match="unknown filter"):
        D.excerpt(OUT, ["sort"])
    with pytest.raises(D.ExampleError, match="no line matches"):
        D.excerpt(OUT, ["section ^nothing"])


def test_render_replaces_stale_blocks_and_keeps_prose():
    page = ("prose 1\n<!-- example: python -m roofline fake | head 1 -->\n```text\nold 27.148 s\n```\n"
            "prose 2\n<!-- example-md: python -m roofline fake | grep ^f -->\nold table\n<!-- /example -->\nend\n")
    new = D.render(page, run=fake_run)
    assert new == ("prose 1\n<!-- example: python -m roofline fake | head 1 -->\n```text\n"
                   "$ python -m roofline fake\na\n...\n```\n"
                   "prose 2\n<!-- example-md: python -m roofline fake | grep ^f -->\n...\nf\n<!-- /example -->\nend\n")
    assert D.render(new, run=fake_run) == new          # idempotent
    assert D.commands(page) == ["python -m roofline fake | head 1", "python -m roofline fake | grep ^f"]


def test_failing_or_foreign_command_refused():
    with pytest.raises(D.ExampleError, match="must be"):
        D.run_command("bash -c ls")
    with pytest.raises(D.ExampleError, match="exited with status 2"):
        D.run_command("python -m roofline transformer --model no-such-model --gpu a100-sxm4-80gb")


def test_include_block_holds_the_file():
    page = "<!-- include: docs/examples/cluster_jobs.yaml -->\n```yaml\nstale\n```\n"
    text = (D.ROOT / "docs/examples/cluster_jobs.yaml").read_text()
    assert D.render(page, run=fake_run) == f"<!-- include: docs/examples/cluster_jobs.yaml -->\n```yaml\n{text.rstrip()}\n```\n"


# ---------------------------------------------------------------------------------------------
# the pages themselves are current

FAST = ("docs/getting-started.md", "docs/run-cost.md", "docs/timeline.md", "docs/configs.md", "docs/extending.md",
        "docs/models.md", "docs/calibration.md")
SLOW = ("README.md", "docs/search.md")        # the vTrain validation (1,466 runs) and plan searches
assert set(FAST + SLOW) == set(D.PAGES)


def _check(page):
    path = D.ROOT / page
    old = path.read_text()
    assert old == D.render(old), f"{page} has stale examples: run python -m roofline.face.docs_examples"


@pytest.mark.parametrize("page", FAST)
def test_page_examples_current(page):
    _check(page)


@pytest.mark.slow
@pytest.mark.parametrize("page", SLOW)
def test_page_examples_current_slow(page):
    _check(page)


def test_stale_figures_of_issue_19_gone():
    text = {p: (D.ROOT / p).read_text() for p in D.PAGES}
    assert "27.148 s" not in text["docs/getting-started.md"]
    assert "calibrated: nothing" not in text["docs/getting-started.md"]
    assert "need the\ncalibrated" not in text["docs/configs.md"]
    assert "all under-predicted" not in text["README.md"]
    for page in ("docs/getting-started.md", "docs/run-cost.md", "docs/timeline.md", "docs/search.md", "README.md"):
        assert "<!-- example:" in text[page], page


# ---------------------------------------------------------------------------------------------
# the Pareto plot

def _cand(n, t, tokens=None, price=None):
    from roofline.spec.config import Plan
    from roofline.views.search import Candidate

    c = Candidate(plan=Plan(), step_time_s=t, memory_bytes=1e10, mfu=0.4, hfu=0.5, tokens_per_s=1e5, n_gpus=n,
                  micro_batches=8, pp_bubble=0.1)
    if tokens:
        steps = tokens / 1e6
        c = dataclasses.replace(c, run_days=steps * t / 86400, gpu_hours=steps * t * n / 3600,
                                cost_usd=None if price is None else price * steps * t * n / 3600)
    return c


def _labels_overlap(labels):
    boxes = [lb.get_window_extent() for lb in labels if lb.get_visible() and lb.get_text()]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def _plot(tmp_path, pts, name="p.png"):
    pytest.importorskip("matplotlib")
    from roofline.views.search import pareto, plot_pareto

    out = tmp_path / name
    fig = plot_pareto(str(out), pts, pareto(pts), "test sweep")
    assert out.stat().st_size > 0
    fig.canvas.draw()
    return fig


def test_pareto_plot_labels_front_and_dominated(tmp_path):
    # 4 GPUs: 10 s x 4 = 40 GPU-s; 8 GPUs: 4 s x 8 = 32 GPU-s (faster and cheaper: dominates 4);
    # 16 GPUs: 3 s x 16 = 48 GPU-s (fastest): the front is {8, 16}, 4 is dominated
    pts = [_cand(4, 10.0), _cand(8, 4.0), _cand(16, 3.0)]
    fig = _plot(tmp_path, pts)
    ax = fig.axes[0]
    handles, labels = ax.get_legend_handles_labels()
    assert labels == ["Pareto front", "dominated"]
    line = next(a for a in ax.get_lines() if a.get_label() == "Pareto front")
    assert sorted(zip(line.get_xdata(), line.get_ydata())) == [(3.0, 48.0), (4.0, 32.0)]
    dominated = next(c for c in ax.collections if c.get_label() == "dominated")
    assert [tuple(o) for o in dominated.get_offsets()] == [(10.0, 40.0)]
    assert ax.get_ylabel() == "GPU-seconds per step"          # the table's unit without --tokens
    assert not _labels_overlap(ax.get_xticklabels()) and not _labels_overlap(ax.get_yticklabels())


def test_pareto_plot_all_on_front_has_no_dominated_entry(tmp_path):
    pts = [_cand(n, 64.0 / n * (1 + 0.02 * n)) for n in (1, 2, 4, 8, 16)]
    fig = _plot(tmp_path, pts)
    assert fig.axes[0].get_legend_handles_labels()[1] == ["Pareto front"]


def test_pareto_plot_flat_cost_said_in_title_without_offset(tmp_path):
    # costs within 0.004 % of each other: no offset label, a flat line, the title says so
    pts = [_cand(n, 8192.0 / n * (1 + 4e-5 * i)) for i, n in enumerate((256, 512, 1024, 2048, 4096))]
    fig = _plot(tmp_path, pts)
    ax = fig.axes[0]
    assert "within" in ax.get_title() and "%" in ax.get_title()
    assert ax.yaxis.get_offset_text().get_text() == ""
    lo, hi = ax.get_ylim()
    assert (hi - lo) / hi > 0.05                                     # not a steep curve over 0.004 %
    assert len({t.get_text() for t in ax.get_yticklabels() if t.get_text()}) == \
        len([t for t in ax.get_yticklabels() if t.get_text()])      # distinct tick labels
    assert not _labels_overlap(ax.get_xticklabels())


def test_pareto_plot_run_cost_in_usd_with_days_axis(tmp_path):
    pts = [_cand(n, 30.0 / n * 256 * (1 + 0.01 * k), tokens=15e12, price=2.0)
           for k, n in enumerate((256, 512, 1024, 2048, 4096))]
    fig = _plot(tmp_path, pts)
    ax = fig.axes[0]
    assert "USD" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and all(t.startswith("$") for t in labels)
    assert ax.yaxis.get_offset_text().get_text() == ""
    days = [c for c in ax.child_axes if "days" in c.get_xlabel()]
    assert days, "run days on a secondary axis when --tokens is given"
    assert not _labels_overlap(days[0].get_xticklabels())
    no_price = [dataclasses.replace(c, cost_usd=None) for c in pts]
    assert "GPU-hours" in _plot(tmp_path, no_price, "q.png").axes[0].get_ylabel()


def test_check_exits_1_on_a_stale_page_and_regenerating_fixes_it(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("<!-- example: python -m roofline hardware list | head 1 -->\n```text\nstale\n```\n")
    assert D.main(["--check", str(page)]) == 1
    assert "hardware list" in capsys.readouterr().err
    assert D.main([str(page)]) == 0
    assert "stale" not in page.read_text()
    assert D.main(["--check", str(page)]) == 0
