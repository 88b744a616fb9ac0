"""How much the log behind the advice can carry: length of the steady part, settling, drift.

From the first log's steady window:

- ``batches``: consumer completions in it (a rates-only log: its rate times the window), thin
  below ``MIN_BATCHES``; bare numbers have no log to be thin;
- ``settled``: whether warm-up truncation (MSER-5, `advisor.measure.steady`) found a start well
  before the log's middle;
- ``drift_pct``: the consumer's rate in the window's second half against its first, drifting
  beyond both ``DRIFT_Z`` standard errors (from ``DRIFT_GROUPS`` groups per half) and ``DRIFT_PCT``.

Thin evidence widens the intervals by the drift; half-widths shrink as 1/sqrt(duration), so a log
``((w_best + w_runner) / gap)^2`` times as long separates the best from the runner-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from advisor.ingest.runlog import RunLog
from advisor.model.params import PipelineFit, Source

MIN_BATCHES = 100
DRIFT_PCT = 5.0
DRIFT_Z = 3.0
DRIFT_GROUPS = 5


@dataclass(frozen=True)
class Evidence:
    steady_s: float
    batches: int
    settled: bool
    drift_pct: float  # second half vs first half of the window, consumer completion rate
    drift_z: float
    basis: Source = Source.STEPS  # what the fit rests on
    snapshots: int = 0  # rates snapshots inside the window (rates-only logs)
    models: tuple[str | None, str | None] = (None, None)  # the first log header's target and drafter models

    @property
    def drifting(self) -> bool:
        return abs(self.drift_pct) > DRIFT_PCT and self.drift_z > DRIFT_Z

    @property
    def thin(self) -> bool:
        """Whether the verdict is provisional (a log of thin evidence): no sentence calls it stable."""
        return self.basis.logged and (self.batches < MIN_BATCHES or not self.settled or self.drifting)

    def why_thin(self) -> list[str]:
        """Why the evidence is thin, in words: too few batches, not settled, drifting."""
        out = []
        if self.batches < MIN_BATCHES:
            rates = self.basis is Source.RATES
            unit = " batches" if rates else ""
            count = (
                f"{self.snapshots} rates snapshots (~{self.batches:,} batches)"
                if rates
                else f"{self.batches} steady batches"
            )
            out.append(f"only {count} (at least {MIN_BATCHES}{unit} are needed to separate splits a few percent apart)")
        if not self.settled:
            out.append("the run has not settled (still warming up)")
        if self.drifting:
            out.append(f"the pace moved {self.drift_pct:+.0f}% between the halves of the steady window")
        return out


def halves_drift(t: np.ndarray, start_s: float, end_s: float) -> tuple[float, float]:
    """Rate change (%) between the window's halves and its z-score, from completion times ``t``."""
    t = t[(t > start_s) & (t <= end_s)]
    span = end_s - start_s
    if len(t) < 4 * DRIFT_GROUPS or span <= 0:
        return 0.0, 0.0
    edges = np.linspace(start_s, end_s, 2 * DRIFT_GROUPS + 1)
    counts = np.histogram(t, bins=edges)[0].astype(float) / (span / (2 * DRIFT_GROUPS))
    a, b = counts[:DRIFT_GROUPS], counts[DRIFT_GROUPS:]
    if a.mean() <= 0:
        return 0.0, 0.0
    se = math.sqrt(a.var(ddof=1) / DRIFT_GROUPS + b.var(ddof=1) / DRIFT_GROUPS)
    diff = b.mean() - a.mean()
    z = abs(diff) / se if se > 0 else (math.inf if diff else 0.0)
    return 100.0 * diff / a.mean(), z


def gather(fit: PipelineFit, logs: tuple[RunLog, ...]) -> Evidence:
    """Evidence from the first log (the current run) and its steady window."""
    ob = fit.observed[0]
    win = ob.steady
    drift = z = 0.0
    if logs and logs[0].has_steps:
        st = logs[0].steps
        t = st.loc[st["role"] == fit.consumer.role, "t"].to_numpy(float)
        drift, z = halves_drift(t, win.start_s, win.end_s)
    elif logs and len(logs[0].rates):
        col = f"bps_{fit.consumer.role}"
        r = logs[0].rates
        if col in r:
            r = r[win.mask(r["t"])].dropna(subset=[col])
            if len(r) >= 4:
                h = len(r) // 2
                a, b = r[col].to_numpy()[:h], r[col].to_numpy()[h:]
                if a.mean() > 0:
                    drift = 100.0 * (b.mean() / a.mean() - 1.0)
                    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)) if len(a) > 1 < len(b) else 0.0
                    z = abs(b.mean() - a.mean()) / se if se > 0 else 0.0
    if not fit.source.logged:
        return Evidence(steady_s=0.0, batches=0, settled=True, drift_pct=0.0, drift_z=0.0, basis=Source.NUMBERS)
    rates = fit.source is Source.RATES
    batches = int(win.n_events)
    if rates:  # the window holds snapshots; its batches are the consumer's completions over it
        batches = int(round(ob.bps * win.duration_s)) if ob.bps > 0 else 0
    return Evidence(
        steady_s=win.duration_s,
        batches=batches,
        settled=bool(win.settled),
        drift_pct=float(drift),
        drift_z=float(z),
        basis=fit.source,
        snapshots=int(win.n_events) if rates else 0,
        models=(logs[0].header.target_model, logs[0].header.drafter_model) if logs else (None, None),
    )
