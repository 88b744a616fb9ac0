"""advisor/plots.py: the `plot` command, the composed figure, and each panel on a given axes."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from advisor import plots  # noqa: E402
from advisor.advice import advise  # noqa: E402
from advisor.cli import app  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STEPS = ROOT / "fixtures" / "reference-7x1.jsonl"
RATES = ROOT / "fixtures" / "reference-7x1-rates.jsonl"
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
    assert "stay with 7-1" in fig._suptitle.get_text()


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
    import numpy as np

    steps = adv.logs[0].steps
    width = plots._bin_width_s(adv.logs[0].duration_s)
    edges = np.arange(0.0, adv.logs[0].duration_s + width, width)
    rate = plots._completion_rates(steps, "drafter", edges, adv.logs[0].duration_s)
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
    assert inside.sum() >= len(snap_t) - 1       # only the last seconds, after the last pull, are cut
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

    code = "import sys, advisor.plots; print(json.dumps('matplotlib' in sys.modules))"
    res = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert json.loads(res.stdout) is False
