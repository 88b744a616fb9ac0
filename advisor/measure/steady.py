"""Where a run's steady state begins and ends: the warm-up cut, and the drain cut where one exists.

Warm-up (MSER-5, White 1997): take the series that measures the pipeline's pace, the consumer's
inter-completion times when step events exist (else the ``tok_s`` of the rates snapshots), group
it into means of 5 (``MSER_BATCH``), and choose the truncation d that minimises

    MSER(d) = sum_{i>=d} (Y_i - mean(Y_{d:}))^2 / (n - d)^2,     d <= n / 2,

i.e. the start after which the remaining mean is known most precisely. A minimum at or past
``UNSETTLED_FRACTION`` of the allowed range (close to n/2) means the series keeps drifting: the
run never settled, and the fit rests on a short, possibly still-changing window (a
:class:`SteadyStateWarning`). Fewer than ``MIN_STEADY_EVENTS`` consumer completions in the
window is too little to fit: a :class:`LogError`.

The end (rule): the same MSER rule on the reversed remainder finds where the pace changes last
(the *tail*, ``SteadyWindow.tail_share``). **A drain exists only where the input ran out**: the
log's ``end`` has reason ``done`` (the job finished: its loader or corpus was exhausted, the
workers stopped one by one), or its last ``rates`` snapshot has ``done`` >= 1. Only then is the
tail cut, as the final drain (``drain_share``). Elsewhere (an ``end`` with reason
``interrupted`` or ``error``, or no ``end``: a run still going, read under ``--follow``) nothing
ran out: a slower tail is the run's own behaviour (drift, a regime, a neighbour on the host)
and stays in the window, and when it is ``TAIL_REPORT_SLOWER`` or more slower than the window
before it, and keeping it lowers the window's rate by ``TAIL_REPORT_EFFECT`` or more, a
:class:`SteadyStateWarning` says by how much, and that it is kept.

A sampled large log (`RunLog.is_sampled`: its consumer's steps are a sample) runs the same rules
on all its completions, counted per time bin (`_binned`). The two stay apart: the
per-row rule cuts at a completion (MSER on gaps of 5), the binned one at a bin edge (MSER on
counts of ~25 completions), so one rule for both would move every window of a log read whole.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from advisor.errors import LogError, SteadyStateWarning
from advisor.ingest.runlog import RunLog

MSER_BATCH = 5
MIN_STEADY_EVENTS = 30  # consumer completions (steps) needed after warm-up
MIN_STEADY_SNAPSHOTS = 3  # rates snapshots needed after warm-up (rates-only logs)
UNSETTLED_FRACTION = 0.9  # truncation beyond 0.9 * n/2 -> "never settled"
MIN_GROUP_EVENTS = 25  # completions per point of the binned warm-up rule (on average)
TAIL_REPORT_SLOWER = 0.05  # a kept tail this much slower than the window before it is reported ...
TAIL_REPORT_EFFECT = 0.01  # ... when keeping it lowers the window's rate by this much or more


@dataclass(frozen=True)
class SteadyWindow:
    """The steady part of one log: [start_s, end_s], and how much warm-up was dropped."""

    start_s: float
    end_s: float
    warmup_share: float  # share of the run's duration dropped as warm-up
    settled: bool
    basis: str  # "steps" or "rates"
    n_events: int  # consumer completions (or snapshots) inside the window
    drain_share: float = 0.0  # share of the run's duration cut at the end (input exhausted)
    tail_share: float = 0.0  # share the end rule found (cut as drain_share only where input ran out)
    tail_slower: float = 0.0  # how much slower the tail's pace is than the window before it (0.12: 12%)

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    def mask(self, t):
        """Which times fall inside the window."""
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
    m = np.arange(nb, 0, -1, dtype=float)  # n - d
    sse = s2 - s1 * s1 / m
    limit = nb // 2
    stat = sse[: limit + 1] / m[: limit + 1] ** 2
    d = int(np.argmin(stat))
    settled = d < UNSETTLED_FRACTION * limit
    return d * batch, settled


def input_ran_out(log: RunLog) -> tuple[bool, str]:
    """Whether the log shows its input running out (the one case with a drain), and how it ended."""
    end = log.end
    reason = str(end.get("reason", "done")) if end is not None else None
    if reason == "done":
        return True, "it ended 'done'"
    r = log.rates
    if "done" in r and len(r):
        share = r["done"].dropna()
        if len(share) and float(share.iloc[-1]) >= 1.0:
            return True, "its last snapshot has done = 1"
    return False, f"it ended '{reason}'" if reason else "it has no 'end': the run goes on"


@dataclass(frozen=True)
class _Tail:
    """The end rule's tail: [start_s, last_s] holding ``n`` events (completions; snapshots of a rates
    log), after ``n_before`` from ``from_s``."""

    from_s: float
    start_s: float
    last_s: float
    n_before: int
    n: int


def _check_events(log: RunLog, n: int) -> None:
    """Raise LogError where the consumer's ``n`` completions are too few to fit."""
    if n < MIN_STEADY_EVENTS + 1:
        raise LogError(
            log.path,
            None,
            f"has {n} '{log.header.consumer}' steps; at least "
            f"{MIN_STEADY_EVENTS + 1} are needed to fit a steady state (run longer)",
        )


def _window(log: RunLog, settled: bool, basis: str, tail: _Tail) -> SteadyWindow:
    """The window from its start (``tail.from_s``) and the end rule's tail, cut only where input ran
    out, as shares of the log's duration; warns where the run never settled and of a slower tail
    that is kept (the module's rules)."""
    start_s, end_s, cut = tail.from_s, tail.start_s, True
    ran_out, how = input_ran_out(log)
    # the pace before the tail, and how much slower the tail's is (negative: faster)
    before_bps = tail.n_before / (end_s - start_s) if tail.n_before > 0 and end_s > start_s else 0.0
    slower = 0.0
    if before_bps and tail.n > 0 and tail.last_s > end_s:
        slower = 1.0 - tail.n / (tail.last_s - end_s) / before_bps
    log_end_s = log.duration_s
    if not ran_out and tail.n > 0:
        end_s, cut = tail.last_s, False
        # how much lower the window's rate is with the tail kept than without it
        effect = 1.0 - (tail.n_before + tail.n) / (tail.last_s - start_s) / before_bps if slower else 0.0
        if slower >= TAIL_REPORT_SLOWER and effect >= TAIL_REPORT_EFFECT:
            share = (log_end_s - tail.start_s) / log_end_s if log_end_s > 0 else 0.0
            warnings.warn(
                SteadyStateWarning(
                    f"{log.path}: the last {100 * share:.0f}% of the run is {100 * slower:.1f}% slower than the "
                    "steady part before it; it is kept in the window, not cut as a drain, because the log does not "
                    f"show its input running out ({how}): a slower tail is then the run's own pace (drift, a "
                    f"regime); kept, it lowers the observed rate by {100 * effect:.1f}%"
                ),
                stacklevel=3,
            )
    if not settled:
        warnings.warn(
            SteadyStateWarning(
                f"{log.path}: the run has not settled (its pace still drifts at the middle of the log); "
                f"projections rest on the last {100 * (end_s - start_s) / max(end_s, 1e-9):.0f}% of it"
            ),
            stacklevel=3,
        )
    return SteadyWindow(
        start_s=max(start_s, 0.0),
        end_s=end_s,
        warmup_share=start_s / log_end_s if log_end_s > 0 else 0.0,
        settled=settled,
        basis=basis,
        n_events=tail.n_before + (0 if cut else tail.n),
        drain_share=(log_end_s - end_s) / log_end_s if log_end_s > 0 else 0.0,
        tail_share=(log_end_s - tail.start_s) / log_end_s if log_end_s > 0 else 0.0,
        tail_slower=slower,
    )


def find_steady(log: RunLog) -> SteadyWindow:
    """The steady window of ``log``."""
    if log.is_sampled(log.header.consumer):
        # a sampled large log (advisor.ingest.summary): the same rule on all its completions, binned in time
        settled, tail = _binned(log)
    elif log.has_steps:
        settled, tail = _per_step(log)
    else:
        settled, tail = _rates(log)
    return _window(log, settled, "steps" if log.has_steps else "rates", tail)


def _per_step(log: RunLog) -> tuple[bool, _Tail]:
    """MSER on the consumer's inter-completion gaps, from the start and from the end."""
    done = log.steps.loc[log.steps["role"] == log.header.consumer, "t"].to_numpy()
    _check_events(log, len(done))
    gaps = np.diff(done)
    k, settled = mser_truncation(gaps)
    k_end, _ = mser_truncation(gaps[k:][::-1])
    return settled, _Tail(
        from_s=float(done[k]),
        start_s=float(done[len(done) - 1 - k_end]),
        last_s=float(done[-1]),
        n_before=int(len(done) - 1 - k - k_end),
        n=int(k_end),
    )


def _rates(log: RunLog) -> tuple[bool, _Tail]:
    """MSER on the snapshots' ``tok_s`` (else the consumer's ``bps``), unbatched: they are window
    means already; no end rule (the window runs to the log's end)."""
    for col in ("tok_s", f"bps_{log.header.consumer}"):
        r = log.rates.dropna(subset=[col]) if col in log.rates else log.rates.iloc[0:0]
        if len(r):
            break
    series = r[col].to_numpy() if len(r) else np.array([])
    if len(series) < MIN_STEADY_SNAPSHOTS:
        raise LogError(
            log.path,
            None,
            f"has {len(series)} usable 'rates' snapshots and no 'step' events; "
            f"at least {MIN_STEADY_SNAPSHOTS} are needed to fit",
        )
    k, settled = mser_truncation(series, batch=1)
    k = min(k, len(series) - MIN_STEADY_SNAPSHOTS)
    window = r["window"].to_numpy()
    start_s = float(r["t"].to_numpy()[k] - (window[k] if np.isfinite(window[k]) else 0.0))
    end_s = log.duration_s
    return settled, _Tail(from_s=start_s, start_s=end_s, last_s=end_s, n_before=int(len(series) - k), n=0)


def _binned(log: RunLog) -> tuple[bool, _Tail]:
    """The rule for a sampled log: MSER on the consumer's completions per time bin.

    The bins hold every completion of the whole log, so the warm-up and drain cuts rest on all
    of it; the window's edges fall on bin edges (the bin width is at most 1/4096 of the span).
    """
    tot = log.totals
    counts = tot.series(log.header.consumer, "n")
    nz = np.flatnonzero(counts)
    n_all = int(counts.sum())
    _check_events(log, n_all)
    first, last = int(nz[0]), int(nz[-1])
    # groups of g bins holding ~MIN_GROUP_EVENTS completions on average: counts of a few events
    # are too noisy for the rule (the exact path averages 5 gaps per point for the same reason)
    span = last + 1 - first
    g = max(1, math.ceil(MIN_GROUP_EVENTS * span / n_all))
    n_groups = math.ceil(span / g)
    padded = np.zeros(n_groups * g)
    padded[:span] = counts[first : last + 1]
    series = padded.reshape(n_groups, g).sum(axis=1)
    if n_groups * g > span:  # the last group is partial: compare its rate, not its count
        series[-1] *= g / (span - (n_groups - 1) * g)
    k, settled = mser_truncation(series, batch=1)
    k_end, _ = mser_truncation(series[k:][::-1], batch=1)
    w = tot.width_s * g
    log_end_s = log.duration_s
    lo_bin = first + k * g
    hi_bin = min(first + (n_groups - k_end) * g, last + 1)
    return settled, _Tail(
        from_s=first * tot.width_s + k * w,
        start_s=min(first * tot.width_s + (n_groups - k_end) * w, log_end_s),
        last_s=min(first * tot.width_s + n_groups * w, log_end_s),
        n_before=int(counts[lo_bin:hi_bin].sum()),
        n=int(counts[hi_bin : last + 1].sum()),
    )
