"""advisor/plots.py: the `plot` command, the composed figure, and each panel on a given axes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from advisor.advice import advise  # noqa: E402
from advisor.cli.app import app  # noqa: E402
from advisor.present import plots as plots  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STEPS = ROOT / "fixtures" / "reference-7x1.jsonl"
RATES = ROOT / "fixtures" / "reference-7x1-rates.jsonl"
FIXTURES = ROOT / "fixtures"
SMALL = FIXTURES / "cpu-2x1.jsonl"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def adv():
    return advise([STEPS])


@pytest.fixture(scope="module")
def adv_rates():
    return advise([RATES])


def test_plot_command_writes_a_png(tmp_path):
    out = tmp_path / "a.png"
    res = CliRunner().invoke(app, ["plot", str(STEPS), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert f"wrote {out}" in res.output
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 20_000


def test_plot_command_unusable_input_exits_2(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    res = CliRunner().invoke(app, ["plot", str(bad), "-o", str(tmp_path / "a.png")])
    assert res.exit_code == 2
    assert not (tmp_path / "a.png").exists()


@pytest.mark.parametrize("which", ["adv", "adv_rates"])
def test_plot_advice_has_four_titled_panels(which, request, tmp_path):
    a = request.getfixturevalue(which)
    fig = plots.plot_advice(a, tmp_path / "f.png", min_efficiency=0.95)
    assert (tmp_path / "f.png").read_bytes().startswith(PNG_MAGIC)
    assert len(fig.axes) == 4
    titles = [ax.get_title() for ax in fig.axes]
    assert all(titles) and len(set(titles)) == 4
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel(), ax.get_title()
        assert ax.get_legend() is not None, ax.get_title()
    # the gate line sits at the threshold given
    eff_ax = fig.axes[1]
    assert any(list(line.get_ydata()) == [95.0, 95.0] for line in eff_ax.get_lines())
    assert "recommended split 7-1 (the observed split)" in fig._suptitle.get_text()


def test_plot_advice_writes_other_formats(adv, tmp_path):
    plots.plot_advice(adv, tmp_path / "f.svg")
    assert (tmp_path / "f.svg").read_text().lstrip().startswith("<?xml")


def test_each_panel_draws_on_the_axes_given_and_returns_it(adv):
    from matplotlib.figure import Figure

    fig = Figure()
    for fn in (plots.plot_splits, plots.plot_efficiency, plots.plot_rates, plots.plot_queue):
        ax = fig.add_subplot()
        assert fn(adv, ax=ax) is ax
        assert ax.has_data(), fn.__name__


def test_panels_take_their_arguments_by_position_and_say_they_return_axes(adv):
    """A panel's arguments pass through positionally, min_efficiency included, as they did before
    the panels shared one wrapper; its signature's return is the axes, not the drawing code's None."""
    import inspect

    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    assert plots.plot_efficiency(adv, ax, 0.95) is ax
    assert any(list(line.get_ydata()) == [95.0, 95.0] for line in ax.get_lines())
    for fn in (plots.plot_splits, plots.plot_efficiency, plots.plot_rates, plots.plot_queue):
        assert inspect.signature(fn).return_annotation not in (None, "None"), fn.__name__


def test_panel_without_axes_uses_current_pyplot_axes(adv):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        assert plots.plot_splits(adv) is ax
    finally:
        plt.close(fig)


def test_splits_panel_shows_projection_interval_and_bound(adv):
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    plots.plot_splits(adv, ax=ax)
    n = len(adv.splits)
    heights = sorted(round(p.get_height(), 6) for p in ax.patches if p.get_height() == p.get_height())
    want_proj = sorted(round(v, 6) for v in adv.splits["tok_s"] / 1e3)
    per_batch = adv.splits["tok_s"] / adv.splits["bps"]
    want_bound = sorted(round(v, 6) for v in adv.splits["bound_bps"] * per_batch / 1e3)
    for v in want_proj + want_bound:
        assert v in heights
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(labels) == n and labels[0] == "7-1\nobs+rec" and labels[1] == "6-2"


def test_rates_panel_from_steps_matches_the_observed_rate(adv):
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    plots.plot_rates(adv, ax=ax)
    # the drafter's binned completion rate, averaged over the steady part, is the observed rate
    edges, _ = plots._time_edges(adv.logs[0].duration_s)
    rate = plots._completion_rates(adv.logs[0], "drafter", edges, adv.logs[0].duration_s)
    steady = edges[:-1] >= adv.observed.steady_from_s
    assert rate[steady].mean() == pytest.approx(adv.observed.bps, rel=0.03)
    assert "warm-up" in " ".join(ax.get_legend_handles_labels()[1])


def test_queue_panel_reconstructs_depth_from_steps_when_no_rates(adv, tmp_path):
    """Without 'rates' lines the q_hs depth is rebuilt from step events, and matches the logged one."""
    import numpy as np

    lines = [ln for ln in STEPS.read_text().splitlines() if '"ev":"rates"' not in ln]
    bare = tmp_path / "steps-only.jsonl"
    bare.write_text("\n".join(lines) + "\n")
    a = advise([bare])
    logged = adv.logs[0].rates
    t, depth, weight, source = plots._queue_series(a.logs[0], "hs", 20)
    assert source == "steps" and (weight >= 0).all()
    snap_t = logged["t"].to_numpy()
    inside = snap_t <= t[-1]
    assert inside.sum() >= len(snap_t) - 1  # only the last seconds, after the last pull, are cut
    at = np.searchsorted(t, snap_t[inside], side="right") - 1
    assert np.array_equal(depth[at], logged["q_hs"].to_numpy()[inside])
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    plots.plot_queue(a, ax=ax)
    assert "reconstructed from step events" in ax.get_title()


def test_queue_panel_says_so_when_nothing_measures_the_queue(adv_rates, tmp_path):
    from dataclasses import replace

    from matplotlib.figure import Figure

    log = adv_rates.logs[0]
    empty = replace(adv_rates, logs=(replace(log, rates=log.rates.iloc[0:0]),))
    ax = Figure().add_subplot()
    assert plots.plot_queue(empty, ax=ax) is ax
    assert any("no 'rates' snapshots" in t.get_text() for t in ax.texts)


def test_importing_plots_does_not_import_matplotlib():
    import subprocess
    import sys

    code = "import sys, advisor.present.plots; print(json.dumps('matplotlib' in sys.modules))"
    res = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert json.loads(res.stdout) is False


# --- the figure object, G = 8 / 32 / 64, bounded time bins, the -o contract --------------------


@pytest.fixture(scope="module")
def wide():
    """The reference log projected over G = 8, 32, 64, 512 GPUs."""
    return {g: advise([STEPS], gpus=g) for g in (8, 32, 64, 512)}


def test_plot_advice_returns_the_figure_and_writes_only_when_asked(adv, tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    monkeypatch.chdir(tmp_path)
    fig = plots.plot_advice(adv)
    assert isinstance(fig, Figure) and len(fig.axes) == 4
    assert list(tmp_path.iterdir()) == []
    assert isinstance(plots.plot_advice(adv, tmp_path / "a.pdf"), Figure)
    assert (tmp_path / "a.pdf").read_bytes().startswith(b"%PDF")


def _drawn_split_labels(ax):
    """(text, window extent) of every shown split label, after a draw."""
    renderer = ax.figure.canvas.get_renderer()
    out = []
    for t in ax.xaxis.get_majorticklabels():
        if t.get_visible() and t.get_text():
            out.append((t.get_text(), t.get_window_extent(renderer)))
    return sorted(out, key=lambda e: e[1].x0)


def _assert_apart(labels):
    for (a, ea), (b, eb) in zip(labels, labels[1:]):
        assert ea.x1 < eb.x0, f"labels {a!r} [{ea.x0:.0f}, {ea.x1:.0f}] and {b!r} [{eb.x0:.0f}, {eb.x1:.0f}] overlap"


@pytest.mark.parametrize("g", [8, 32, 64, 512])
def test_split_labels_never_overlap_in_the_cli_figure(wide, g):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    a = wide[g]
    fig = plots.plot_advice(a)
    FigureCanvasAgg(fig).draw()
    rec = "{}-{}".format(*(a.recommendation.roles[r] for r in a.roles))
    for ax in fig.axes[:2]:
        labels = _drawn_split_labels(ax)
        _assert_apart(labels)
        texts = [t for t, _ in labels]
        assert any(t.startswith(rec + "\n") and "rec" in t for t in texts), texts
        if g == 8:
            assert len(texts) == g - 1  # every split fits: every split labelled
        else:
            assert 5 <= len(texts) < g - 1  # thinned, but still a readable scale
        if g - 1 <= plots.MAX_MINOR_TICKS:  # every split keeps a tick: major where labelled, else minor
            ticks = set(ax.xaxis.get_minorticklocs()) | set(ax.xaxis.get_majorticklocs())
            assert ticks == set(range(g - 1))


def test_many_splits_are_lines_not_a_smear_of_bars(wide):
    """Past MAX_BAR_SPLITS a bar would be under 3 px wide: both split panels draw lines instead."""
    from matplotlib.figure import Figure

    for g, bars in ((64, True), (512, False)):
        for fn in (plots.plot_splits, plots.plot_efficiency):
            ax = Figure().add_subplot()
            fn(wide[g], ax=ax)
            assert (len(ax.patches) >= 2 * (g - 1)) is bars, (g, fn.__name__, len(ax.patches))
            if not bars:
                assert len(ax.patches) == 0
                assert max(len(line.get_xdata()) for line in ax.get_lines()) == g - 1


@pytest.mark.parametrize("size_in", [(4.0, 3.0), (6.4, 4.8), (20.0, 4.0)])
def test_split_labels_follow_the_axes_size(wide, size_in):
    """In a notebook's own figure, small or wide, the labels are chosen from its drawn width."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size_in, layout="constrained")
    ax = fig.add_subplot()
    plots.plot_splits(wide[64], ax=ax)
    FigureCanvasAgg(fig).draw()
    labels = _drawn_split_labels(ax)
    _assert_apart(labels)
    assert len(labels) >= 2
    if size_in[0] >= 20:
        assert len(labels) > 10


def test_choose_split_ticks_keeps_recommended_and_observed_first():
    import numpy as np

    targets = np.arange(63, 0, -1)
    widths = np.full(63, 30.0)
    shown = plots._choose_split_ticks(widths, 10.0, 8.0, targets, [8, 5])
    assert 8 in shown and 5 not in shown  # 3 splits apart: the recommended one wins
    shown = plots._choose_split_ticks(widths, 10.0, 8.0, targets, [8, 40])
    assert {8, 40} <= set(shown)
    assert all(b - a >= 5 for a, b in zip(shown, shown[1:]))  # 40 pt between centres at 8 pt/split
    assert plots._choose_split_ticks(widths, 10.0, 41.0, targets, [8]) == list(range(63))


@pytest.mark.parametrize("which", ["splits", "efficiency"])
def test_recommended_and_observed_are_marked_by_shape(adv, which):
    """Colour-blind safe: the recommended split gets a star, the observed one a diamond."""
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    getattr(plots, f"plot_{which}")(adv, ax=ax)
    markers = {line.get_marker() for line in ax.get_lines()}
    assert {plots.REC_MARKER, plots.OBS_MARKER} <= markers
    legend = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "recommended" in legend and "observed" in legend and "7-1" in legend


def test_axis_labels_carry_units(adv):
    fig = plots.plot_advice(adv)
    ylabels = [ax.get_ylabel() for ax in fig.axes[:4]]
    assert "tok/s" in ylabels[0] and "%" in ylabels[1] and "b/s" in ylabels[2] and "batches" in ylabels[3]
    assert all("(min)" in ax.get_xlabel() for ax in fig.axes[2:4])


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1e-12, max_value=1e307, allow_nan=False, allow_infinity=False))
def test_time_bins_are_bounded_and_cover_the_run(end_s):
    edges, width = plots._time_edges(end_s)
    assert 2 <= len(edges) <= plots.MAX_TIME_BINS + 1
    assert edges[0] == 0 and width > 0 and math.isfinite(width)
    assert edges[-1] >= end_s * (1 - 1e-12)


def test_a_log_spanning_1e15_seconds_plots_under_a_memory_cap(tmp_path):
    """Once 4.5 GB then MemoryError: now a few bins, inside a 2.5 GiB address-space cap.

    The cap counts address space reserved, not used: polars' runtime reserves about 0.7 GB at
    import (its thread pools; the process's resident set stays near 170 MB), so the cap sits well
    below the 4.5 GB the unbinned plot took and above what the imports reserve."""
    from advisor.settings import MAX_TIME_S

    lines = (FIXTURES / "cpu-2x1.jsonl").read_text().splitlines()
    assert '"ev":"end"' in lines[-1]
    end = json.loads(lines[-1])
    end["t"] = MAX_TIME_S  # the longest span the loader accepts; t = 1e15 is refused as corrupt (exit 2)
    log = tmp_path / "huge-t.jsonl"
    log.write_text("\n".join(lines[:-1] + [json.dumps(end)]) + "\n")
    out = tmp_path / "huge.png"
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2560 << 20, 2560 << 20)); "
        "from advisor.cli.app import app; sys.argv = ['dflash-advise', 'plot', sys.argv[1], '-o', sys.argv[2]]; app()"
    )
    # one BLAS thread: OpenBLAS reserves address space per thread, which a cap on it counts
    env = {
        **os.environ,
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "POLARS_MAX_THREADS": "2",
    }
    res = subprocess.run(
        [sys.executable, "-c", code, str(log), str(out)], capture_output=True, text=True, cwd=ROOT, timeout=300, env=env
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_names_with_dollars_are_plain_text(tmp_path):
    """'$' in a run or queue name is not TeX: the figure draws and shows the name as written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lines = (FIXTURES / "cpu-2x1.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head["run"] = "cost $5 \\frac{a}{b} $\\nosuchcommand$"
    log = tmp_path / "dollar.jsonl"
    log.write_text("\n".join([json.dumps(head)] + lines[1:]) + "\n")
    a = advise([log])
    fig = plots.plot_advice(a, tmp_path / "d.png")
    assert (tmp_path / "d.png").read_bytes().startswith(PNG_MAGIC)
    assert fig._suptitle.get_text().startswith(head["run"])
    for fn in (plots.plot_splits, plots.plot_efficiency, plots.plot_rates, plots.plot_queue):
        ax = Figure().add_subplot()  # a notebook's axes, made before the panel draws
        fn(a, ax=ax)
        texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts, *ax.get_legend().get_texts()]
        assert not any(t.get_parse_math() for t in texts), fn.__name__
        FigureCanvasAgg(ax.figure).draw()


# --- plot -o --------------------------------------------------------------------------------


def _one_line(res) -> str:
    err = res.stderr.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def test_plot_into_a_directory_writes_advice_png_there_and_says_so(tmp_path):
    res = CliRunner().invoke(app, ["plot", str(SMALL), "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    written = tmp_path / "advice.png"
    assert written.read_bytes().startswith(PNG_MAGIC)
    assert res.stdout.strip() == f"wrote {written}"
    assert not tmp_path.with_suffix(".png").exists()


@pytest.mark.parametrize("name", ["a.foo", "noextension", "a.PNG.txt"])
def test_plot_to_an_unknown_format_exits_2_before_reading_logs(tmp_path, name):
    out = tmp_path / name
    res = CliRunner().invoke(app, ["plot", str(tmp_path / "no-such-log.jsonl"), "-o", str(out)])
    assert res.exit_code == 2
    line = _one_line(res)
    assert line.startswith(f"dflash-advise: {out}:") and ".png" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_plot_write_error_exits_2_naming_the_path():
    res = CliRunner().invoke(app, ["plot", str(SMALL), "-o", "/dev/full"])
    assert res.exit_code == 2
    assert _one_line(res) == "dflash-advise: /dev/full: cannot write the figure: No space left on device"
    assert "wrote" not in res.stdout


def test_plot_into_a_missing_directory_exits_2_and_leaves_nothing(tmp_path):
    out = tmp_path / "missing" / "a.png"
    res = CliRunner().invoke(app, ["plot", str(SMALL), "-o", str(out)])
    assert res.exit_code == 2
    assert _one_line(res).startswith(f"dflash-advise: {out}: cannot write the figure")
    assert not (tmp_path / "missing").exists()


def test_plot_names_the_file_it_wrote_in_each_format(tmp_path):
    for suffix, magic in ((".png", PNG_MAGIC), (".pdf", b"%PDF"), (".SVG", b"<?xml")):
        out = tmp_path / f"f{suffix}"
        res = CliRunner().invoke(app, ["plot", str(SMALL), "-o", str(out)])
        assert res.exit_code == 0, res.output
        assert res.stdout.strip() == f"wrote {out}"
        assert out.read_bytes().lstrip().startswith(magic)


@pytest.mark.parametrize("log", ["reference-7x1.jsonl", "cpu-2x1.jsonl"])
def test_observed_marker_sits_at_the_measured_efficiency(log):
    """The diamond of the efficiency panel is the observed split's measured efficiency: its measured
    rate over the fastest capacity of its row, the numbers its bar (projected rate / the same
    capacity) divides, drawn over that bar."""
    from matplotlib.figure import Figure

    a = advise([FIXTURES / log])
    ax = Figure().add_subplot()
    plots.plot_efficiency(a, ax=ax)
    (dot,) = [ln for ln in ax.get_lines() if ln.get_marker() == plots.OBS_MARKER]
    i = int(a.splits["observed"].to_numpy().nonzero()[0][0])
    row = a.splits.iloc[i]
    fastest = max(row["cap_target_bps"], row["cap_drafter_bps"])
    want = 100 * row["observed_bps"] / fastest
    assert dot.get_ydata()[0] == pytest.approx(want, rel=1e-12)
    assert 100 * row["efficiency"] == pytest.approx(100 * row["bps"] / fastest, rel=1e-9)  # the bar's numbers
    bar = next(p for p in ax.patches if abs(p.get_height() - 100 * row["efficiency"]) < 1e-9)
    assert bar.get_x() <= dot.get_xdata()[0] <= bar.get_x() + bar.get_width()
    assert f"measured {want:.0f}%" in dot.get_label()
    assert want == pytest.approx(100 * a.observed.efficiency, rel=0.02)


def test_a_rates_log_without_tokens_plots_b_s_without_nan_or_warnings(tmp_path):
    """No tokens logged: the splits panel is in b/s with the observed split marked, no title or
    legend says nan, and nothing warns (no All-NaN slice)."""
    import warnings

    from conftest import rates_without_tokens

    adv = advise(rates_without_tokens(RATES, tmp_path / "r.jsonl"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = plots.plot_advice(adv, tmp_path / "a.png")
    assert not caught, [str(w.message) for w in caught]
    ax = fig.axes[0]
    texts = [fig._suptitle.get_text(), ax.get_ylabel()] + [
        t.get_text() for a in fig.axes if a.get_legend() for t in a.get_legend().get_texts()
    ]
    assert not [t for t in texts if "nan" in t.lower()], texts
    assert ax.get_ylabel() == "throughput (b/s)"
    assert any(t.startswith("observed split 7-1, measured") and t.endswith("b/s") for t in texts), texts
    heights = [p.get_height() for p in ax.patches]
    for bps in adv.splits["bps"]:  # a bar per split at its b/s
        assert any(h == pytest.approx(bps, rel=1e-9) for h in heights), (bps, heights)


@pytest.mark.parametrize("log", ["reference-7x1.jsonl", "cpu-2x1.jsonl"])
def test_no_mark_of_the_efficiency_panel_sits_above_100_percent(log):
    """The axis is a percentage: every mark drawn on it, wherever its transform places it, reads
    between 0 and 100% (the recommended split's star was lifted above the bars to about 103%)."""
    import numpy as np
    from matplotlib.figure import Figure

    a = advise([FIXTURES / log])
    ax = Figure(figsize=(7, 4.8)).add_subplot()
    plots.plot_efficiency(a, ax=ax)
    marks = [ln for ln in ax.get_lines() if ln.get_marker() not in ("None", "", None)]
    assert plots.REC_MARKER in {ln.get_marker() for ln in marks}
    for ln in marks:
        shown = ln.get_transform().transform(np.c_[ln.get_xdata(), ln.get_ydata()])
        y = ax.transData.inverted().transform(shown)[:, 1]
        assert ((y >= -1e-9) & (y <= 100 + 1e-9)).all(), (ln.get_label(), y)


def _open_ended():
    """Advice whose every split has an open upper end: the drafters known only from below."""
    from advisor.advice import advise_numbers

    return advise_numbers({"target": 1, "drafter": 7}, {"target": "52..57", "drafter": ">=50.1"})


def _drawn(adv):
    """The CLI's figure, drawn: its splits and efficiency panels and the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = plots.plot_advice(adv)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return fig.axes[0], fig.axes[1], canvas.get_renderer()


def _star(ax):
    (star,) = [ln for ln in ax.get_lines() if ln.get_marker() == plots.REC_MARKER]
    return star


@pytest.mark.parametrize("log", ["reference-7x1.jsonl", "cpu-2x1.jsonl", None])
def test_the_efficiency_star_sits_on_the_recommended_rows_efficiency(log):
    """Issue 50: the star was drawn at 0% under the bars; it marks the recommended split's projected
    efficiency, on that split's efficiency bar, where the diamond marks the measured one."""
    adv = advise([FIXTURES / log]) if log else _open_ended()
    _, ax, _ = _drawn(adv)
    star = _star(ax)
    i = list(adv.splits.index).index(adv.decision.recommended)
    want = 100 * adv.splits["efficiency"].iloc[i]
    assert star.get_ydata()[0] == pytest.approx(want, rel=1e-12) and want > 1
    bar = next(p for p in ax.patches if abs(p.get_height() - want) < 1e-9)
    assert bar.get_x() <= star.get_xdata()[0] <= bar.get_x() + bar.get_width()
    assert f"projected {want:.0f}%" in star.get_label()


@pytest.mark.parametrize("log", ["reference-7x1.jsonl", "cpu-2x1.jsonl", None])
def test_the_star_covers_no_value_label(log):
    """Issue 50: over the observed split's bar the star sat on the value (26.7 on reference-7x1)."""
    adv = advise([FIXTURES / log]) if log else _open_ended()
    for ax in _drawn(adv)[:2]:
        renderer = ax.figure.canvas.get_renderer()
        box = _star(ax).get_window_extent(renderer)
        values = [t for t in ax.texts if t.get_text()]
        assert values
        for t in values:
            assert not box.overlaps(t.get_window_extent(renderer)), (ax.get_title(), t.get_text())


def test_open_upper_ends_are_arrows_inside_the_axes_not_whiskers_off_the_top():
    """Issue 50: a whisker to an open upper end ran to the axes' top edge (through the legend). It
    ends at the projection now, and an arrow above it, inside the axes, says the interval goes on."""
    import numpy as np

    adv = _open_ended()
    ax, _, renderer = _drawn(adv)
    opened = adv.splits["bps_high_open"].to_numpy(bool)
    assert opened.all()
    per_batch = adv.splits["tok_s"].to_numpy(float) / adv.splits["bps"].to_numpy(float) / 1e3
    tok = adv.splits["bps"].to_numpy(float) * per_batch
    (whiskers,) = [c for c in ax.collections if len(c.get_segments()) == len(adv.splits)]
    tops = np.array([seg[:, 1].max() for seg in whiskers.get_segments()])
    assert tops == pytest.approx(tok, rel=1e-9)  # no whisker past the projection of an open end
    assert tops.max() < ax.get_ylim()[1]
    arrows = [t for t in ax.texts if t.arrow_patch is not None]
    assert len(arrows) == opened.sum()
    inside = ax.get_window_extent(renderer)
    for a in arrows:
        head = a.arrow_patch.get_window_extent(renderer)
        assert inside.y0 < head.y0 < head.y1 < inside.y1
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "open upper end (a capacity known only from below)" in legend
