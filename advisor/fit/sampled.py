"""Fits over sampled large logs: what the exact time-binned sums give where steps are a sample.

A log too large to hold (`advisor.ingest.summary`) keeps a uniform sample of each role's steps
beside exact binned counts and sums over the whole log; `advisor.measure.measured` reads the
steady window's sums off them (``MeasuredLog.sums``). Counts, means and shares then come from
those sums, while the step-time line, the variability and the interval's relative width stay
those of the sample (the interval is that of a 300k-row sample: wider than the whole log's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from advisor.ingest.summary import BIN_FIELDS
from advisor.measure.measured import MeasuredLog
from advisor.model.params import LoaderFit, RoleFit, SyncFit


def sampled_role_fits(
    measured: Sequence[MeasuredLog], same: Sequence[int], role_fits: Sequence[RoleFit]
) -> tuple[list[RoleFit], float, float | None]:
    """The role fits with counts, means and shares from the binned sums, and the consumer's batch size."""
    out = []
    sums_by_role = {}
    for rf in role_fits:
        tot = dict.fromkeys((*BIN_FIELDS, "wall"), 0.0)
        for i in same:
            s = measured[i].sums[rf.role]
            for k in s:
                tot[k] += s[k]
            tot["wall"] += measured[i].window.duration_s * measured[i].roles[rf.role]
        sums_by_role[rf.role] = tot
        n = tot["n"]
        if n < 2:
            out.append(rf)
            continue
        mean = tot["busy"] / n
        var = max(tot["busy2"] - n * mean * mean, 0.0) / (n - 1)
        scale = rf.busy_mean_s / mean if mean > 0 else 1.0
        wall = max(tot["wall"], 1e-12)
        out.append(
            replace(
                rf,
                n_steps=int(n),
                busy_mean_s=mean,
                busy_std_s=math.sqrt(var),
                mu_bps=1.0 / mean,
                mu_low_bps=rf.mu_low_bps * scale,
                mu_high_bps=rf.mu_high_bps * scale,
                busy_share=tot["busy"] / wall,
                starved_share=tot["wait"] / wall,
                blocked_share=tot["blocked"] / wall,
            )
        )
    c = sums_by_role[role_fits[-1].role]
    tokens_mean = c["tokens"] / c["n"] if c["n"] else float("nan")
    seqs_mean = c["seqs"] / c["n_seqs"] if c["n_seqs"] else None
    return out, tokens_mean, seqs_mean


def sampled_loader_and_sync(
    measured: Sequence[MeasuredLog], sync: SyncFit, loader: LoaderFit
) -> tuple[SyncFit, LoaderFit]:
    """The input-bound loader's capacity from the exact count of producer steps, its arrival SCV
    un-thinned, and the steps per sync (when no header gives it) from exact counts of consumer
    steps and syncs.

    A uniform sample keeps each arrival with probability p (kept / all); thinning a renewal
    process with inter-arrival SCV c2 gives SCV p c2 + (1 - p), so c2 = (scv_sample - (1 - p)) / p.
    Real arrival streams are not quite renewal (consecutive gaps correlate), so this SCV is an
    estimate (how close it came on the loader-bound test scenario: BENCHMARKS.md 20.11).
    """
    m0 = measured[0]
    lg, w = m0.log, m0.window
    producer, consumer = lg.header.producer, lg.header.consumer
    if loader.capacity_bps is not None and lg.is_sampled(producer):
        n = m0.sums[producer]["n"]
        kept = int((lg.steps["role"] == producer).sum())
        p = kept / max(lg.n_steps[producer], 1)
        scv = max((loader.scv - (1.0 - p)) / p, 0.0) if p > 0 else loader.scv
        loader = replace(loader, capacity_bps=n / max(w.duration_s, 1e-12), scv=scv)
    if not any(m.log.header.sync_every for m in measured) and sync.measured:
        ks = [
            int(round(m.sums[consumer]["n"] / m.roles[consumer] / m.sync_count))
            for m in measured
            if m.sync_count and m.roles[consumer] >= 2
        ]
        if ks:
            sync = replace(sync, sync_every=max(ks))
    return sync, loader
