"""The record of one parsed log: :class:`RunLog`, what every later wing reads.

Up to ``sample_rows`` (300k) steps per role the frames hold every step, as read. Past that,
``RunLog.sampled`` is true, ``steps`` is a uniform sample of each larger role's steps, and
``RunLog.totals`` holds the exact time-binned counts and sums that `steady` and `fit` then use
for counts, rates and shares (see `advisor.ingest.summary`); `RunLog.is_sampled` says, per
role, whether its steps are such a sample.

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
    sampled: bool = False
    totals: Totals | None = None
    t_max_s: float | None = None  # the largest t in the log (None: not known)
    n_steps: Mapping[str, int] | None = None  # every step of each role, sampled or not
    source: str | None = None  # the file read (to re-read a sample's rows exactly)

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
