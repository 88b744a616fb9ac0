"""What a run showed: the measured numbers of one log, computed in one place.

The fit (capacities, observed rate), the report's "measured at" reasons and the plots (completion
rates, q_hs occupancy) all read the log through these functions, so that the observed rate, the
completion counts and the queue depths are computed once and the same way, whether the log was
read whole or sampled (the counts and sums come from `RunLog`, exact either way).

- ``steady_steps``: the step rows inside a steady window.
- ``observe``: the observed rate is the consumer's completions after the window opens over the
  window (`RunLog.completions`; the window opens at a completion, so that one is not counted).
- ``queue_series`` and ``time_weighted_queue``: a queue's logged depth over time (``rates``
  snapshots, weighted by their windows), its mean and the share of time it was full.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from advisor.ingest.runlog import RunLog
from advisor.measure.steady import SteadyWindow


@dataclass(frozen=True)
class SegmentRate:
    """One probe segment's own rate (`advisor.measure.probes`): its segment and round, the
    completions over its steady window (b/s) and that window's length."""

    segment: int
    round: int
    bps: float
    window_s: float


@dataclass(frozen=True)
class ObservedRun:
    """What one log's steady window shows; ``segments``: where the log is a probe's segments at
    one split pooled, each segment's own rate (empty for any other log)."""

    path: str
    roles: Mapping[str, int]
    bps: float
    tok_s: float
    steady: SteadyWindow
    done: float | None = None  # fraction of the job done at the log's end
    eta_s: float | None = None  # the pipeline's own ETA at the log's end
    hs_mean_depth: float | None = None  # time-weighted q_hs depth (from rates), if logged
    hs_full_share: float | None = None
    segments: tuple[SegmentRate, ...] = ()

    def with_tokens(self, tokens_per_batch: float) -> ObservedRun:
        """The same run with tokens/s from a batch size where the log did not measure it."""
        return self if not math.isnan(self.tok_s) else replace(self, tok_s=self.bps * tokens_per_batch)


def steady_steps(log: RunLog, win: SteadyWindow) -> pd.DataFrame:
    """The rows of ``log.steps`` inside the window: ``win.mask``'s rows. Steps in time order (as
    `advisor.ingest.load` gives them) are one run of rows, taken as a slice of the frame, not copied.
    """
    s = log.steps
    t = s["t"].to_numpy()
    if len(t) > 1 and t.dtype.kind == "f" and bool((t[1:] >= t[:-1]).all()):  # sorted, no NaN
        lo = int(np.searchsorted(t, win.start_s, side="left"))  # first t >= start
        hi = int(np.searchsorted(t, win.end_s + 1e-9, side="right"))  # past the last t <= end
        return s.iloc[lo : max(hi, lo)]
    return s[win.mask(s["t"])]


def queue_series(
    log: RunLog, name: str, win: SteadyWindow | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(t, depth, weight) of a queue's logged mean depth over time, from ``rates`` snapshots."""
    col = f"q_{name}"
    rt = log.rates
    if not len(rt) or col not in rt:
        return None
    r = rt if win is None else rt[win.mask(rt["t"])]
    r = r.dropna(subset=[col])
    if not len(r):
        return None
    w = r["window"].fillna(1.0).to_numpy(float) if "window" in r else np.ones(len(r))
    return r["t"].to_numpy(float), r[col].to_numpy(float), w


def time_weighted_queue(log: RunLog, win: SteadyWindow, name: str) -> tuple[float | None, float | None]:
    """Mean depth of a queue over the window, and the share of time it was full."""
    series = queue_series(log, name, win)
    if series is None:
        return None, None
    _, depth, w = series
    cap = next(q.cap for q in log.header.queues if q.name == name)  # a queue of the header: it has a cap
    return float(np.average(depth, weights=w)), float(np.average(depth >= cap - 0.5, weights=w))  # cap 0: always full


def observe(log: RunLog, win: SteadyWindow) -> ObservedRun:
    """The observed run: rate and tokens/s over the steady window, q_hs depth, progress. A
    rates-only log without ``tok_s`` does not measure tokens/s: NaN, which the fit fills in from
    its batch size (`ObservedRun.with_tokens`).
    """
    consumer = log.header.consumer
    hs = log.header.queue_feeding(consumer)
    depth, full = time_weighted_queue(log, win, hs.name) if hs else (None, None)
    done = eta = None
    if len(log.rates):
        last = log.rates.iloc[-1]
        done = float(last["done"]) if "done" in last and pd.notna(last["done"]) else None
        eta = float(last["eta_s"]) if "eta_s" in last and pd.notna(last["eta_s"]) else None
    span = max(win.duration_s, 1e-12)
    if log.has_steps:
        n, tokens = log.completions(consumer, win.start_s, win.end_s)
        bps, tok = n / span, tokens / span
    else:
        r = log.rates[win.mask(log.rates["t"])]
        bps = float(r[f"bps_{consumer}"].mean())
        tok = float(r["tok_s"].mean()) if "tok_s" in r and r["tok_s"].notna().any() else math.nan
    return ObservedRun(
        path=log.path,
        roles=dict(log.header.roles),
        bps=bps,
        tok_s=tok,
        steady=win,
        done=done,
        eta_s=eta,
        hs_mean_depth=depth,
        hs_full_share=full,
    )
