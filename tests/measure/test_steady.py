"""Warm-up detection finds and drops a slow start; a run that never settles is flagged."""

from __future__ import annotations

import numpy as np
import pytest
from synth import Scenario, ServiceModel, TokenModel, write_log

from advisor.errors import SteadyStateWarning
from advisor.ingest.load import load_log
from advisor.measure.steady import find_steady, mser_truncation


def test_mser_finds_a_level_shift():
    rng = np.random.default_rng(1)
    y = np.concatenate([rng.normal(3.0, 0.1, 200), rng.normal(1.0, 0.1, 1800)])
    k, settled = mser_truncation(y)
    assert 190 <= k <= 215 and settled


def test_mser_flags_a_drifting_series():
    y = np.linspace(1, 3, 2000) + np.random.default_rng(2).normal(0, 0.01, 2000)
    _, settled = mser_truncation(y)
    assert not settled


def test_warmup_dropped_from_a_log(tmp_path):
    s = Scenario(
        name="w",
        n_target=3,
        n_drafter=1,
        target=ServiceModel(0.0, 50e-6, 0.02),
        drafter=ServiceModel(0.0, 20e-6, 0.02),
        tokens=TokenModel(8192, 5000, 0.1, 500),
        hs_cap=8,
        pre_cap=8,
        n_batches=3000,
        warmup_factor=3.0,
        warmup_tau_s=30.0,
        seed=3,
    )
    write_log(tmp_path / "w.jsonl", s)
    win = find_steady(load_log(tmp_path / "w.jsonl"))
    assert win.settled
    assert 30 <= win.start_s <= 250
    assert 0 < win.warmup_share < 0.5


def test_never_settling_run_warns(tmp_path, write_log):
    from conftest import HEADER, step

    lines = [HEADER]
    t = 0.0
    for i in range(400):
        t += 0.1 + i * 0.002  # drafter keeps slowing down
        lines.append(step(t, "drafter", 0, busy=0.1))
    p = write_log(lines)
    with pytest.warns(SteadyStateWarning) as got:
        win = find_steady(load_log(p))
    assert not win.settled
    texts = [str(w.message) for w in got]
    assert any("not settled" in t for t in texts)
    # a log still going: its slower tail is the run's own drift, kept and said so
    assert any("kept in the window, not cut as a drain" in t and "no 'end'" in t for t in texts)
    assert win.drain_share == 0.0 and win.tail_share > 0.1


def _slow_tail_log(write_log, end=None, rates_done=None, n_fast=600, n_slow=400, slower=0.13, jitter=0.03):
    """A steady drafter at 0.1 s per batch, then its last ``n_slow`` batches ``slower`` slower."""
    from conftest import HEADER, step

    rng = np.random.default_rng(5)
    lines, t = [HEADER], 0.0
    for i in range(n_fast + n_slow):
        t += (0.1 if i < n_fast else 0.1 / (1 - slower)) * rng.uniform(1 - jitter, 1 + jitter)
        lines.append(step(round(t, 6), "drafter", 0, busy=0.09))
        if i % 2:
            lines.append(step(round(t, 6), "target", i // 2 % 2, busy=0.15))
    if rates_done is not None:
        lines.append({"ev": "rates", "t": t, "bps": {"target": 10, "drafter": 10}, "done": rates_done})
    if end is not None:
        lines.append({"ev": "end", "t": t + 0.01, "reason": end})
    return write_log(lines)


@pytest.mark.parametrize("end", ["interrupted", "error", None])
def test_a_slower_tail_is_kept_where_input_did_not_run_out(write_log, end):
    """Rule: no drain without the input running out; the slower tail stays in the window, flagged."""
    p = _slow_tail_log(write_log, end=end)
    with pytest.warns(SteadyStateWarning, match=r"the last 4\d% of the run is 1[23]\.\d% slower .* kept in the window"):
        win = find_steady(load_log(p))
    assert win.drain_share < 0.001  # only the instant between the last step and `end`
    assert 0.35 <= win.tail_share <= 0.5  # what the end rule found (cut before this rule)
    assert win.tail_slower == pytest.approx(0.13, abs=0.02)
    assert win.end_s == pytest.approx(load_log(p).steps["t"].max())


@pytest.mark.parametrize("end,rates_done", [("done", None), (None, 1.0)])
def test_a_drain_is_cut_where_input_ran_out(write_log, end, rates_done):
    p = _slow_tail_log(write_log, end=end, rates_done=rates_done)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", SteadyStateWarning)  # cut, so nothing to report
        win = find_steady(load_log(p))
    assert 0.35 <= win.drain_share <= 0.5 and win.drain_share == pytest.approx(win.tail_share, abs=1e-9)


def test_a_small_or_faster_tail_is_kept_silently(write_log):
    import warnings

    p = _slow_tail_log(write_log, end="interrupted", slower=-0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SteadyStateWarning)
        win = find_steady(load_log(p))
    assert win.drain_share < 0.001 and win.tail_slower <= 0


def test_the_binned_rule_keeps_the_tail_too(write_log, monkeypatch):
    """A sampled large log runs the same end rule on its binned completions."""
    from advisor.ingest import summary

    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 200)
    p = _slow_tail_log(write_log, end="interrupted", n_fast=4500, n_slow=500, slower=0.25, jitter=0.9)
    lg = load_log(p)
    assert lg.is_sampled("drafter")
    with pytest.warns(SteadyStateWarning, match="kept in the window"):
        win = find_steady(lg)
    assert win.drain_share < 0.01 and 0.1 <= win.tail_share <= 0.2 and win.tail_slower > 0.15
    p = _slow_tail_log(write_log, end="done", n_fast=4500, n_slow=500, slower=0.25, jitter=0.9)
    assert 0.1 <= find_steady(load_log(p)).drain_share <= 0.2
