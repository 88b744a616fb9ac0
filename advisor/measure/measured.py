"""Every log measured once: the one record the fit takes.

`measure_logs` finds each log's steady window (`advisor.measure.steady`; a probe's segments at
one split are pooled first, each segment's window found on its own: `advisor.measure.probes`),
then reads off it, in one place, everything that the fit and the caveats use: the observed run
(rate, tokens/s, q_hs depth, progress; `advisor.measure.observe`), each role's steady steps and
window sums (exact, sampled or not: `RunLog.window_sums`), the snapshots and syncs inside the
window, the producers' input-queue depth, and the first step log's within-log contention
(`advisor.measure.contention`). Nothing downstream opens a log's frames again to measure them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from advisor.errors import LogError
from advisor.ingest.runlog import RunLog
from advisor.measure.contention import WithinLogContention, estimate_within_log
from advisor.measure.crossing import LinkSample, measure_link
from advisor.measure.observe import ObservedRun, SegmentRate, observe, steady_steps, time_weighted_queue
from advisor.measure.probes import pooled_with_rates
from advisor.measure.steady import SteadyWindow, find_steady


@dataclass(frozen=True)
class MeasuredLog:
    """One log and what its steady window shows.

    ``steps``: each role's steady steps (time order; empty without step events); ``rates`` and
    ``syncs``: the snapshots and syncs inside the window; ``pre_mean_depth``: the time-weighted
    depth of the producers' input queue (None where not logged); ``sums``: per role, the window's
    count and sums of busy, busy^2, wait, blocked, tokens, seqs (`RunLog.window_sums`), and
    ``sync_count`` the syncs in it (`RunLog.sync_count`): every one, sampled or not.
    """

    log: RunLog
    window: SteadyWindow
    observed: ObservedRun
    steps: Mapping[str, pd.DataFrame]
    rates: pd.DataFrame
    syncs: pd.DataFrame
    pre_mean_depth: float | None
    sums: Mapping[str, Mapping[str, float]]
    sync_count: float = 0.0
    link: LinkSample | None = None  # drafter steps that crossed a node (`advisor.measure.crossing`)

    @property
    def path(self) -> str:
        return self.log.path

    @property
    def roles(self) -> Mapping[str, int]:
        return self.log.header.roles


@dataclass(frozen=True)
class Measurement:
    """The measured logs of one job, in the order given, and the first step log's within-log
    contention (None without step events)."""

    logs: tuple[MeasuredLog, ...]
    within: WithinLogContention | None

    @property
    def producer(self) -> str:
        return self.logs[0].log.header.producer

    @property
    def consumer(self) -> str:
        return self.logs[0].log.header.consumer

    @property
    def with_steps(self) -> list[int]:
        return [i for i, m in enumerate(self.logs) if m.log.has_steps]


def _in_window(frame: pd.DataFrame, win: SteadyWindow) -> pd.DataFrame:
    return frame[win.mask(frame["t"])] if len(frame) and "t" in frame else frame


def measure_log(
    log: RunLog, *, window: SteadyWindow | None = None, segments: tuple[SegmentRate, ...] = ()
) -> MeasuredLog:
    """One log's steady window and what it shows (see :class:`MeasuredLog`)."""
    win = window if window is not None else find_steady(log)
    head = log.header
    roles = (head.producer, head.consumer)
    steps: dict[str, pd.DataFrame] = {}
    if log.has_steps:
        st = steady_steps(log, win)
        # split by role once (on a sampled log each split copies 300k rows)
        steps = {r: st[st["role"] == r] for r in roles}
    link = None
    if head.gpus_per_node and steps:
        # the drafter's own service: its busy less the link's wait and transfer (advisor.measure.crossing)
        link, steps[head.consumer] = measure_link(log, steps[head.consumer])
    pre = head.queue_feeding(head.producer)
    sums = {r: log.window_sums(r, win.start_s, win.end_s, steps.get(r)) for r in roles}
    observed = replace(observe(log, win), segments=tuple(segments))
    return MeasuredLog(
        log=log,
        window=win,
        observed=observed,
        steps=steps,
        rates=_in_window(log.rates, win),
        syncs=_in_window(log.syncs, win),
        pre_mean_depth=time_weighted_queue(log, win, pre.name)[0] if pre else None,
        sums=sums,
        sync_count=log.sync_count(win.start_s, win.end_s),
        link=link,
    )


def measure_logs(logs: Sequence[RunLog]) -> Measurement:
    """Measure the logs of one job (they must share their roles)."""
    if not logs:
        raise LogError("<none>", None, "no log to fit")
    head = logs[0].header
    for lg in logs[1:]:
        if (lg.header.producer, lg.header.consumer) != (head.producer, head.consumer):
            raise LogError(
                lg.path,
                None,
                f"has roles {list(lg.header.roles)}, unlike {logs[0].path} "
                f"({list(head.roles)}); logs fitted together must be of the same job",
                "roles",
            )
    measured = tuple(measure_log(lg, window=w, segments=r) for lg, w, r in pooled_with_rates(logs))
    first = next((m for m in measured if m.log.has_steps), None)
    within = None
    if first is not None:
        lg, w = first.log, first.window
        within = estimate_within_log(lg.steps, head.producer, head.consumer, w.start_s, w.end_s, sampled=lg.sampled)
    return Measurement(logs=measured, within=within)
