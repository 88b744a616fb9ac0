"""The record of one parsed log: :class:`RunLog`, what every later wing reads.

Up to ``sample_rows`` (300k) steps per role the frames hold every step, as read. Past that,
``RunLog.sampled`` is true, ``steps`` is a uniform sample of each larger role's steps, and
``RunLog.totals`` holds the exact time-binned counts and sums of every step (see
`advisor.ingest.summary`); `RunLog.is_sampled` says, per role, whether its steps are such a
sample. Counts and sums over a window (`RunLog.window_sums`, `RunLog.completions`,
`RunLog.completion_counts`, `RunLog.sync_count`) and the share of a role's steps at hand
(`RunLog.sample_share`) are asked of the RunLog, which reads them off the steps or off the bins:
exact either way, so `measure` and `fit` ask alike.

Frames (documented columns):
- ``steps``: t, role (category), worker, batch, tokens, seqs, busy, wait, blocked, loss; sorted by t.
- ``syncs``: t, workers, dur, bytes; sorted by t.
- ``rates``: t, window, tok_s, eta_s, done, ``bps_<role>``, ``cap_bps_<role>``, ``q_<queue>``
  (mean depth over the queue's workers) and ``qmin_<queue>`` (the emptiest worker's queue).

A last line cut mid-write (a live log) is skipped with a :class:`LogWarning`; unknown events are
counted in ``unknown_events`` and reported, never fatal; unknown fields are counted in
``unknown_fields`` (a likely misspelling of a known field is reported, `advisor.ingest.schema`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.ingest.schema import RunHeader
from advisor.ingest.summary import Totals

if TYPE_CHECKING:
    import pandas as pd  # imported where frames are made


@dataclass(frozen=True)
class RunLog:
    """One parsed log. See the module docstring for the columns of each frame."""

    path: str
    header: RunHeader
    steps: pd.DataFrame
    syncs: pd.DataFrame
    rates: pd.DataFrame
    end: Mapping[str, Any] | None
    n_lines: int
    unknown_events: Mapping[str, int] = field(default_factory=dict)
    unknown_fields: Mapping[str, int] = field(default_factory=dict)  # "ev.field" -> times seen (ingest.schema)
    # Large logs (more than ``sample_rows`` steps of a role): ``steps`` is a uniform sample of the
    # log's steps, and ``totals`` holds its exact time-binned counts and sums (advisor.ingest.summary).
    totals: Totals | None = None
    t_max_s: float | None = None  # the largest t in the log (None: not known)
    n_steps: Mapping[str, int] | None = None  # every step of each role, sampled or not

    @property
    def sampled(self) -> bool:
        """Whether any steps or syncs of the log are a sample (its counts and sums are in ``totals``)."""
        return self.totals is not None

    def is_sampled(self, role: str) -> bool:
        """Whether ``role``'s steps are a sample of a large log (then its counts and sums are in ``totals``)."""
        return self.totals is not None and role in self.totals.pruned

    @property
    def has_steps(self) -> bool:
        return len(self.steps) > 0

    @property
    def duration_s(self) -> float:
        ts = [f["t"].max() for f in (self.steps, self.rates, self.syncs) if len(f)]
        if self.end is not None:
            ts.append(float(self.end.get("t", 0.0)))
        if self.t_max_s is not None:
            ts.append(self.t_max_s)
        return float(max(ts)) if ts else 0.0

    def _role_steps(self, role: str, start_s: float, end_s: float):
        s = self.steps
        t = s["t"]
        return s[(t >= start_s) & (t <= end_s + 1e-9) & (s["role"] == role)]

    def window_sums(
        self, role: str, start_s: float, end_s: float, steps: pd.DataFrame | None = None
    ) -> dict[str, float]:
        """Count and sums of busy, busy^2, wait, blocked, tokens, seqs of ``role``'s steps in
        [start_s, end_s]: off the exact bins where the log is sampled, else off ``steps`` (that
        role's steps in the window, where at hand) or the log's."""
        if self.totals is not None:
            return self.totals.window(role, start_s, end_s)
        st = steps if steps is not None else self._role_steps(role, start_s, end_s)
        busy = st["busy"].to_numpy(float)
        seqs = st["seqs"].to_numpy(float)
        return {
            "n": float(len(st)),
            "busy": float(busy.sum()),
            "busy2": float((busy * busy).sum()),
            "wait": float(st["wait"].sum()),
            "blocked": float(st["blocked"].sum()),
            "tokens": float(st["tokens"].sum()),
            "seqs": float(np.nansum(seqs)),
            "n_seqs": float((~np.isnan(seqs)).sum()),
        }

    def completions(self, role: str, start_s: float, end_s: float) -> tuple[float, float]:
        """(completions, their tokens) of ``role`` after ``start_s``, up to ``end_s``: every one,
        off the bins where its steps are a sample."""
        if self.is_sampled(role):
            s = self.totals.window(role, start_s, end_s)
            return s["n"], s["tokens"]
        st = self._role_steps(role, start_s, end_s)
        done = st["t"] > start_s
        return float(done.sum()), float(st.loc[done, "tokens"].sum())

    def completion_counts(self, role: str, edges: np.ndarray) -> np.ndarray:
        """Completions of ``role`` between ``edges``; where its steps are a sample, the exact
        cumulative counts of the bins interpolated onto the edges."""
        if self.is_sampled(role):
            cum = np.concatenate(([0.0], np.cumsum(self.totals.series(role, "n"))))
            return np.diff(np.interp(edges, np.arange(len(cum)) * self.totals.width_s, cum))
        t = self.steps.loc[self.steps["role"] == role, "t"].to_numpy(float)
        return np.histogram(t, bins=edges)[0].astype(float)

    def sync_count(self, start_s: float, end_s: float) -> float:
        """The syncs in [start_s, end_s]: every one, off the bins where the log is sampled."""
        if self.totals is not None:
            return self.totals.window(None, start_s, end_s)["n"]
        t = self.syncs["t"] if len(self.syncs) else np.empty(0)
        return float(((t >= start_s) & (t <= end_s + 1e-9)).sum())

    def sample_share(self, role: str) -> float:
        """The share of ``role``'s steps that ``steps`` holds: 1 unless they are a sample."""
        if not self.is_sampled(role):
            return 1.0
        return int((self.steps["role"] == role).sum()) / max(self.n_steps[role], 1)
