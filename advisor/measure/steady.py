"""Warm-up detection: where a run's steady state begins.

Rule (MSER-5, White 1997): take the series that measures the pipeline's pace, the consumer's
inter-completion times when step events exist (else the ``tok_s`` of the rates snapshots), group
it into means of 5 (``MSER_BATCH``), and choose the truncation d that minimises

    MSER(d) = sum_{i>=d} (Y_i - mean(Y_{d:}))^2 / (n - d)^2,     d <= n / 2,

i.e. the start after which the remaining mean is known most precisely. The same rule on the
reversed remainder finds a drain at the end (the job's input exhausted, workers stopping), which
is cut too. The steady window is [t at d, t at the drain]. A minimum in the last ``UNSETTLED_FRACTION`` of the allowed range (close to n/2)
means the series keeps drifting: the run never settled, and the fit rests on a short, possibly
still-changing window (a :class:`SteadyStateWarning`). Fewer than ``MIN_STEADY_EVENTS``
consumer completions in the window is too little to fit: a :class:`LogError`.

A sampled large log (`RunLog.is_sampled`: its consumer's steps are a sample) runs the same rule
on all its completions, counted per time bin (`find_steady_binned`).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from advisor.errors import LogError, SteadyStateWarning
from advisor.ingest.runlog import RunLog

MSER_BATCH = 5
MIN_STEADY_EVENTS = 30      # consumer completions (steps) needed after warm-up
MIN_STEADY_SNAPSHOTS = 3    # rates snapshots needed after warm-up (rates-only logs)
UNSETTLED_FRACTION = 0.9    # truncation beyond 0.9 * n/2 -> "never settled"
MIN_GROUP_EVENTS = 25        # completions per point of the binned warm-up rule (on average)


@dataclass(frozen=True)
class SteadyWindow:
    """The steady part of one log: [start_s, end_s], and how much warm-up was dropped."""

    start_s: float
    end_s: float
    warmup_share: float      # share of the run's duration dropped as warm-up
    settled: bool
    basis: str               # "steps" or "rates"
    n_events: int            # consumer completions (or snapshots) inside the window
    drain_share: float = 0.0  # share of the run's duration cut at the end (input exhausted)

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    def mask(self, t):
        """Which times (array or Series) fall inside the window."""
        return (t >= self.start_s) & (t <= self.end_s + 1e-9)


def mser_truncation(y: np.ndarray, batch: int = MSER_BATCH) -> tuple[int, bool]:
    """Index into ``y`` where steady state starts, and whether the series settled."""
    y = np.asarray(y, dtype=float)
    nb = len(y) // batch
    if nb < 4:
        return 0, True
    yb = y[: nb * batch].reshape(nb, batch).mean(axis=1)
    # suffix sums give every candidate's mean and squared deviations in O(n)
    rev = yb[::-1]
    s1 = np.cumsum(rev)[::-1]
    s2 = np.cumsum(rev * rev)[::-1]
    m = np.arange(nb, 0, -1, dtype=float)       # n - d
    sse = s2 - s1 * s1 / m
    limit = nb // 2
    stat = sse[: limit + 1] / m[: limit + 1] ** 2
    d = int(np.argmin(stat))
    settled = d < UNSETTLED_FRACTION * limit or limit < 2
    return d * batch, settled


def find_steady(log: RunLog) -> SteadyWindow:
    """The steady window of ``log``; raises LogError when too little data remains to fit."""
    if log.is_sampled(log.header.consumer):
        # a sampled large log (advisor.ingest.summary): the same rule on all its completions, binned in time
        return find_steady_binned(log)
    log_end_s = end_s = log.duration_s
    consumer = log.header.consumer
    if log.has_steps:
        done = log.steps.loc[log.steps["role"] == consumer, "t"].to_numpy()
        if len(done) < MIN_STEADY_EVENTS + 1:
            raise LogError(log.path, None, f"has {len(done)} '{consumer}' steps; at least "
                           f"{MIN_STEADY_EVENTS + 1} are needed to fit a steady state (run longer)")
        gaps = np.diff(done)
        k, settled = mser_truncation(gaps)
        # the same rule from the end finds a drain (input exhausted, workers stopping)
        k_end, _ = mser_truncation(gaps[k:][::-1])
        start_s = float(done[k])
        end_s = float(done[len(done) - 1 - k_end])
        n = int(len(done) - 1 - k - k_end)
        basis = "steps"
    else:
        r = log.rates.dropna(subset=["tok_s"]) if "tok_s" in log.rates else log.rates.iloc[0:0]
        if len(r) == 0:
            bcol = f"bps_{consumer}"
            r = log.rates.dropna(subset=[bcol]) if bcol in log.rates else log.rates.iloc[0:0]
            series = r[bcol].to_numpy() if len(r) else np.array([])
        else:
            series = r["tok_s"].to_numpy()
        if len(series) < MIN_STEADY_SNAPSHOTS:
            raise LogError(log.path, None, f"has {len(series)} usable 'rates' snapshots and no 'step' events; "
                           f"at least {MIN_STEADY_SNAPSHOTS} are needed to fit")
        # snapshots are already window means, so MSER runs unbatched on them
        k, settled = mser_truncation(series, batch=1)
        k = min(k, len(series) - MIN_STEADY_SNAPSHOTS)
        window = r["window"].to_numpy()
        t = r["t"].to_numpy()
        start_s = float(t[k] - (window[k] if np.isfinite(window[k]) else 0.0))
        n = int(len(series) - k)
        basis = "rates"
    if not settled:
        warnings.warn(SteadyStateWarning(
            f"{log.path}: the run has not settled (its pace still drifts at the middle of the log); "
            f"projections rest on the last {100 * (end_s - start_s) / max(end_s, 1e-9):.0f}% of it"), stacklevel=2)
    return SteadyWindow(start_s=max(start_s, 0.0), end_s=end_s,
                        warmup_share=start_s / log_end_s if log_end_s > 0 else 0.0,
                        settled=settled, basis=basis, n_events=n,
                        drain_share=(log_end_s - end_s) / log_end_s if log_end_s > 0 else 0.0)


def find_steady_binned(log: RunLog) -> SteadyWindow:
    """`find_steady` for a sampled log: MSER on the consumer's completions per time bin.

    The bins hold every completion of the whole log, so the warm-up and drain cuts rest on all
    of it; the window's edges fall on bin edges (the bin width is at most 1/4096 of the span).
    """
    tot = log.totals
    consumer = log.header.consumer
    counts = tot.series(consumer, "n")
    nz = np.flatnonzero(counts)
    n_all = int(counts.sum())
    if n_all < MIN_STEADY_EVENTS + 1:
        raise LogError(log.path, None, f"has {n_all} '{consumer}' steps; at least "
                       f"{MIN_STEADY_EVENTS + 1} are needed to fit a steady state (run longer)")
    first, last = int(nz[0]), int(nz[-1])
    # groups of g bins holding ~MIN_GROUP_EVENTS completions on average: counts of a few events
    # are too noisy for the rule (the exact path averages 5 gaps per point for the same reason)
    span = last + 1 - first
    g = max(1, math.ceil(MIN_GROUP_EVENTS * span / n_all))
    n_groups = math.ceil(span / g)
    padded = np.zeros(n_groups * g)
    padded[:span] = counts[first:last + 1]
    series = padded.reshape(n_groups, g).sum(axis=1)
    if n_groups * g > span:     # the last group is partial: compare its rate, not its count
        series[-1] *= g / (span - (n_groups - 1) * g)
    k, settled = mser_truncation(series, batch=1)
    k_end, _ = mser_truncation(series[k:][::-1], batch=1)
    w = tot.width_s * g
    log_end_s = log.duration_s
    start_s = first * tot.width_s + k * w
    end_s = min(first * tot.width_s + (n_groups - k_end) * w, log_end_s)
    lo_bin = first + k * g
    hi_bin = min(first + (n_groups - k_end) * g, last + 1)
    n = int(counts[lo_bin:hi_bin].sum())
    if not settled:
        warnings.warn(SteadyStateWarning(
            f"{log.path}: the run has not settled (its pace still drifts at the middle of the log); "
            f"projections rest on the last {100 * (end_s - start_s) / max(end_s, 1e-9):.0f}% of it"), stacklevel=3)
    return SteadyWindow(start_s=start_s, end_s=end_s,
                        warmup_share=start_s / log_end_s if log_end_s > 0 else 0.0, settled=settled,
                        basis="steps", n_events=n,
                        drain_share=(log_end_s - end_s) / log_end_s if log_end_s > 0 else 0.0)
