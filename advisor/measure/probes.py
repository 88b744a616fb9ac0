"""A probe's segments at one split pooled into one log: one body of evidence per split.

A probe (``dflash-train --probe``; docs/instrumenting.md) measures two or more splits in short
segments run in alternating order, A B A B, each segment its own log whose header carries
``probe`` (`advisor.ingest.probes`). Each segment starts cold, so each has its own warm-up; and
a host that drifts over the probe moves the segments of every split alike only when they are
taken together. So, per probe and split:

1. each segment's steady window is found on its own (`advisor.measure.steady.find_steady`:
   warm-up dropped per segment, a drain cut where its input ran out);
2. the windows are laid end to end, in segment order: segment k's rows inside its window are
   shifted by ``offset_k - start_k``, where ``offset_k`` is the total length of the windows
   before it; a later segment's opening completion (the instant its window starts, not counted
   by `RunLog.completions`) is left out, so the pooled rate is

       X = (n_1 + ... + n_K) / (d_1 + ... + d_K)

   with n_k the completions inside window k and d_k its length: every steady second of the
   split weighs the same, whichever round it ran in;
3. the pooled log's window is all of it, [0, sum d_k]; its warm-up and drain shares are the
   dropped seconds over the segments' whole length.

Each segment's own rate (its completions over its own window, ``n_k / d_k``) is kept beside the
pooled log (`advisor.measure.observe.SegmentRate`, with the segment's round), so that the
splits a probe measured can be compared round by round (`advisor.project.probed`).

Segments of a sampled log (exact binned sums, `advisor.ingest.summary`) are not pooled (their
sums cannot be shifted); a split with one segment is measured as any log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import accumulate

import pandas as pd

from advisor.ingest.ranks import group_name, merged_end
from advisor.ingest.runlog import RunLog
from advisor.measure.observe import SegmentRate, observe
from advisor.measure.steady import SteadyWindow, find_steady


def probe_key(log: RunLog) -> tuple | None:
    """(probe id, split) of a probe segment that can be pooled; None for any other log."""
    mark = log.header.extra.get("probe")
    if not isinstance(mark, dict) or log.sampled:
        return None
    return str(mark.get("id")), tuple(log.header.roles.items())


def _shifted(frame: pd.DataFrame, win: SteadyWindow, offset_s: float, *, keep_start: bool) -> pd.DataFrame:
    if not len(frame):
        return frame
    t = frame["t"]
    inside = win.mask(t) if keep_start else (t > win.start_s) & (t <= win.end_s + 1e-9)
    out = frame[inside].copy()
    out["t"] = out["t"] - win.start_s + offset_s
    return out


def pool_with_rates(segments: Sequence[RunLog]) -> tuple[RunLog, SteadyWindow, tuple[SegmentRate, ...]]:
    """One log of a split's probe segments (module docstring), its window, and each segment's own
    rate over its own window, with its segment number and round (the ``probe`` mark's; 0 where absent).
    """
    wins = [find_steady(lg) for lg in segments]
    starts = list(accumulate((w.duration_s for w in wins), initial=0.0))  # each window's place, end to end
    offset = starts[-1]
    parts = list(enumerate(zip(segments, wins, starts)))
    frames = {}
    for name in ("steps", "syncs", "rates"):
        shifted = [_shifted(getattr(lg, name), w, at, keep_start=k == 0) for k, (lg, w, at) in parts]
        kept = [f for f in shifted if len(f)]
        frames[name] = pd.concat(kept, ignore_index=True) if kept else shifted[0]
    total_s = sum(lg.duration_s for lg in segments)
    warm = sum(w.warmup_share * lg.duration_s for lg, w in zip(segments, wins))
    drain = sum(w.drain_share * lg.duration_s for lg, w in zip(segments, wins))
    end = merged_end(segments)
    if end is not None:
        end = {**end, "t": offset}
    steps = frames["steps"]
    log = replace(
        segments[0],  # not sampled (`probe_key`), as none of the segments is
        path=group_name([lg.path for lg in segments]),
        **frames,
        end=end,
        n_lines=sum(lg.n_lines for lg in segments),
        t_max_s=offset,
        n_steps={str(r): int(n) for r, n in steps["role"].value_counts().items()} if len(steps) else {},
    )
    win = SteadyWindow(
        start_s=0.0,
        end_s=offset,
        warmup_share=warm / total_s if total_s > 0 else 0.0,
        settled=all(w.settled for w in wins),
        basis=wins[0].basis,
        n_events=sum(w.n_events for w in wins),
        drain_share=drain / total_s if total_s > 0 else 0.0,
    )
    marks = [lg.header.extra["probe"] for lg in segments]  # dicts: only probe segments are pooled (`probe_key`)
    rates = tuple(
        SegmentRate(
            segment=int(mark.get("segment", 0) or 0),
            round=int(mark.get("round", 0) or 0),
            bps=float(observe(lg, w).bps),
            window_s=float(w.duration_s),
        )
        for lg, w, mark in zip(segments, wins, marks)
    )
    return log, win, rates


def pooled_with_rates(logs: Sequence[RunLog]) -> list[tuple[RunLog, SteadyWindow | None, tuple[SegmentRate, ...]]]:
    """The logs with each probe's segments at one split pooled (`pool_with_rates`), each pooled
    log with its window and its segments' own rates (a log not pooled: None and none)."""
    groups: dict[tuple | int, list[RunLog]] = {}  # by probe and split (any other log: by its position)
    for i, lg in enumerate(logs):
        key = probe_key(lg)
        groups.setdefault(i if key is None else key, []).append(lg)
    return [(g[0], None, ()) if len(g) == 1 else pool_with_rates(g) for g in groups.values()]
