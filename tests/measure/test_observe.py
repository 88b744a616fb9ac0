"""advisor.measure.observe: the measured numbers of a log, the same whether it was read whole or sampled."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from synth import reference_scenario, write_log

import advisor.ingest.summary as summary
from advisor.fit.pipeline import fit_logs
from advisor.ingest.load import load_log
from advisor.measure.observe import observe, time_weighted_queue
from advisor.measure.steady import find_steady


@pytest.fixture(scope="module")
def ref_log(tmp_path_factory):
    p = tmp_path_factory.mktemp("obs") / "ref.jsonl"
    write_log(p, reference_scenario(duration_s=1800.0))
    return p


def test_observed_rate_counts_completions_after_the_window_opens(ref_log):
    lg = load_log(ref_log)
    win = find_steady(lg)
    n, _ = lg.completions("drafter", win.start_s, win.end_s)
    t = lg.steps.loc[lg.steps["role"] == "drafter", "t"]
    assert n == ((t > win.start_s) & (t <= win.end_s + 1e-9)).sum()
    ob = observe(lg, win)
    assert ob.bps == pytest.approx(n / win.duration_s)
    assert fit_logs([lg]).observed[0].bps == ob.bps  # the fit reads the same number


def test_queue_depth_is_time_weighted_and_full_share_bounded(ref_log):
    lg = load_log(ref_log)
    depth, full = time_weighted_queue(lg, find_steady(lg), "hs")
    assert 0 <= depth <= 20 and 0 <= full <= 1 and depth > 15  # the reference is drafter-bound


def test_sampled_log_gives_exact_counts(ref_log, monkeypatch):
    full = load_log(ref_log)
    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 300)
    lg = load_log(ref_log)
    assert lg.sampled and not full.sampled
    edges = np.linspace(0.0, 1800.0, 31)
    exact = full.completion_counts("drafter", edges)
    binned = lg.completion_counts("drafter", edges)
    assert binned.sum() == pytest.approx(exact.sum(), rel=1e-9)
    assert np.allclose(binned[5:29], exact[5:29], rtol=0.12)
    naive = np.histogram(lg.steps.loc[lg.steps["role"] == "drafter", "t"], bins=edges)[0]
    assert naive[5:29].mean() < 0.5 * exact[5:29].mean()  # the sample alone undercounts
    win = find_steady(full)
    n_full = full.window_sums("drafter", win.start_s, win.end_s)["n"]
    assert lg.window_sums("drafter", win.start_s, win.end_s)["n"] == pytest.approx(n_full, abs=60)


def test_steady_steps_are_the_window_mask_rows(ref_log):
    """steady_steps slices a time-ordered frame; the rows (and labels) the mask picks, sorted or not."""
    from advisor.measure.observe import steady_steps

    lg = load_log(ref_log)
    win = find_steady(lg)
    for steps in (lg.steps, lg.steps.iloc[::-1]):
        got = steady_steps(dataclasses.replace(lg, steps=steps), win)
        want = steps[win.mask(steps["t"])]
        assert len(got) == len(want) > 0
        np.testing.assert_array_equal(got.index.to_numpy(), want.index.to_numpy())
        for c in steps.columns:
            np.testing.assert_array_equal(got[c].to_numpy(), want[c].to_numpy())


def test_sampled_logs_keep_the_contention_reference_step_time(monkeypatch):
    """With a slope measured across splits, a role's mean step time is the line's value at the
    reference split (the first log's), sampled or not: the exact sums of a sampled log do not put
    back the pooled mean of both splits."""
    import warnings
    from pathlib import Path

    sweep = Path(__file__).resolve().parents[2] / "fixtures" / "sweep" / "cpu32"
    names = ("cpu32-7x1-r0.jsonl.gz", "cpu32-2x6-r0.jsonl.gz")

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fit_logs([load_log(sweep / n) for n in names])

    full = fit()
    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 200)
    sampled = fit()
    assert full.contention.measured and sampled.contention.measured
    for role in ("producer", "consumer"):
        a, b = getattr(full, role), getattr(sampled, role)
        assert b.busy_mean_s == pytest.approx(a.busy_mean_s, rel=0.01)
        assert b.mu_bps == pytest.approx(1.0 / b.busy_mean_s)
