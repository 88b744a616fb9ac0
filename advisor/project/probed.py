"""The splits a probe measured, compared directly: the measured rates and their paired noise.

A probe (`advisor.measure.probes`) runs splits in alternating segments, round by round. The fit's
parts of two probed splits' lead all come from those same segments, so for the rows of the splits
it measured (``P``, two or more, each of ``MIN_SEGMENTS`` or more segments):

1. the rate is the measured one (``observed_bps``); a capacity below it is raised to it, and the
   bound and the efficiency with it;
2. every shared part is replaced by its mean over ``P``: it cancels in a lead within ``P``;
3. the own variance is the probe's paired noise (`probe_var`), never below the least sampling
   variance the fit gives a probed row (``sum ERR_SAMPLING^2``).

The noise, paired by round: with ``y_kr = ln X_kr`` over the R rounds where every split of ``P``
ran, ``e_kr = y_kr - mean_k y_kr`` and

    v_k = K / (K - 1) * var_r(e_kr) / R

so that for two splits ``v_A + v_B = var_r(y_Ar - y_Br) / R``; one round gives the floor alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from advisor.measure.observe import SegmentRate
from advisor.model.chain import ERR_SAMPLING, ERR_SHARED, NO_PARTS
from advisor.model.params import PipelineFit
from advisor.project.rows import SplitRow
from advisor.project.table import split_label
from advisor.stats import Z_95

MIN_SEGMENTS = 2  # a split measured by fewer segments of a probe is projected as any log


def probe_var(rates: Mapping[str, Sequence[SegmentRate]]) -> dict[str, float]:
    """Each probed split's variance of its mean log rate, paired by round (module docstring)."""
    labels = list(rates)
    k = len(labels)
    by_round = [{s.round: s.bps for s in rates[lab] if s.bps > 0} for lab in labels]
    common = sorted(set.intersection(*(set(r) for r in by_round))) if by_round else []
    if k < 2 or len(common) < 2:
        return {lab: 0.0 for lab in labels}
    y = np.log(np.array([[r[c] for c in common] for r in by_round]))  # K x R
    e = y - y.mean(axis=0, keepdims=True)
    n = len(common)
    v = k / (k - 1) * e.var(axis=1, ddof=1) / n
    return {lab: float(x) for lab, x in zip(labels, v)}


def compare_probed(fit: PipelineFit, rows: tuple[SplitRow, ...]) -> tuple[SplitRow, ...]:
    """The rows a probe measured compared directly (module docstring)."""
    by_label = {r.label: r for r in rows}
    p, c = fit.roles
    rates: dict[str, tuple[SegmentRate, ...]] = {}  # the rows a probe measured, each observed at its rate
    for ob in fit.observed:
        label = split_label(ob.roles.get(p, 0), ob.roles.get(c, 0))
        r = by_label.get(label)
        if len(ob.segments) >= MIN_SEGMENTS and r is not None and r.observed and r.observed_bps > 0:
            rates[label] = ob.segments
    if len(rates) < 2:
        return rows
    labels = list(rates)
    paired = probe_var(rates)
    parts = [by_label[lab].parts or NO_PARTS for lab in labels]

    def mean(vals) -> tuple[float, ...]:  # over the probed rows, a missing part 0
        a = np.array(vals, float)
        return tuple(float(x) for x in np.where(np.isnan(a), 0.0, a).mean(axis=0))

    shared = mean([q.shared_log_per_se for q in parts])
    sync = mean([q.sync_ends_log for q in parts])
    corners = mean([q.corners_log for q in parts])
    shared_var = sum(x**2 for x in shared)
    floors = [sum(q.shared_log_per_se[ERR_SHARED.index(k)] ** 2 for k in ERR_SAMPLING) for q in parts]
    floor = min((f for f in floors if math.isfinite(f)), default=0.0)
    for lab, q in zip(labels, parts):
        own = max(paired[lab], floor)
        r = by_label[lab]
        x = r.observed_bps
        half = Z_95 * math.sqrt(own + shared_var)
        at_x = r.scaled(x / r.bps) if r.bps > 0 else r  # the measured rate replaces the projected one
        # every stage's capacity at least the measured rate (module docstring, 1), the bound and the
        # efficiency from them
        p, c = (replace(rr, cap_bps=max(rr.cap_bps, x)) for rr in r.roles)
        link = r.link if r.link is None or r.link.cap_link_bps >= x else replace(r.link, cap_link_bps=x)
        by_label[lab] = replace(
            at_x,
            parts=replace(q, shared_log_per_se=shared, own_var_log2=own, sync_ends_log=sync, corners_log=corners),
            bps=x,
            bps_low=x * math.exp(-half),
            bps_high=x * math.exp(half),
            widened=False,
            probe_segments=len(rates[lab]),
            producer=p,
            consumer=c,
            link=link,
            cap_loader_bps=x if r.cap_loader_bps < x else r.cap_loader_bps,
            bound_bps=max(r.bound_bps, x),
            efficiency=x / max(p.cap_bps, c.cap_bps),
        )
    return tuple(by_label.values())
