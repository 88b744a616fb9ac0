"""The splits a probe measured, compared directly: the measured rates and their paired noise.

A probe (`advisor.measure.probes`) runs two or more splits of one job in short segments, in
alternating order, round by round (A B, A B, ...). Once it has measured two splits, the lead of
one over the other is a measurement, not a projection: the fit's parts of the interval (the
run's level, the sampling of the pooled log, the per-split step-time slope; `advisor.project.table`)
all come from these same segments, and counted as independent terms they about double the
lead's interval. So, for the rows of the splits the probe measured (``P``, two or more, each
with two or more segments):

1. the rate is the measured, pooled rate (``observed_bps``); a stage completes no more than its
   capacity, so a projected capacity below it (the model's at that split, short of what the
   probe saw) is raised to it, and the bound and the efficiency with it: no row passes its bound;
2. the shared parts (every ``ERR_SHARED`` coefficient, the ends of the sync scaling, the corners
   of the capacity ranges) are replaced by their mean over ``P``: equal across ``P``, they cancel
   in every lead between two probed splits, and still move the probed splits with the others
   as the fit's uncertainty moves them;
3. the row's own variance is the probe's noise on its log rate (`probe_var`), so that a lead
   between probed splits carries exactly the measured noise, in `advisor.project.rows.lead_interval` and in the
   odds' joint draw alike.

The probe's noise: the crossover is paired by round. With ``y_kr = ln X_kr`` the rate of split
k's segment in round r (rounds where every split in ``P`` ran, R of them), the round's mean
``m_r = mean_k y_kr`` carries whatever moved the host in that round (drift, a neighbour) and is
removed; the residuals ``e_kr = y_kr - m_r`` give

    v_k = K / (K - 1) * var_r(e_kr) / R        (the sample variance over rounds, R - 1 dof)

so that for two splits ``v_A + v_B = var_r(d_r) / R``, ``d_r = y_Ar - y_Br``: the variance of the
mean paired difference. Few rounds estimate that variance poorly (one degree of freedom at two
rounds), so it is never taken below the sampling variance of one pooled log: the least the fit
gives any probed row (``sum of squares of ERR_SAMPLING``, at the row whose own log the fit reads
most directly; at the others it is that log's sampling carried through the model, not what their
own, equally long logs carry); with one round it is that floor alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from advisor.measure.observe import SegmentRate
from advisor.model.params import PipelineFit
from advisor.project.columns import role_columns
from advisor.project.table import ERR_CORNERS, ERR_SAMPLING, ERR_SHARED, split_label
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


def probed_rates(fit: PipelineFit, df: pd.DataFrame) -> dict[str, tuple[SegmentRate, ...]]:
    """The table's rows a probe measured (``MIN_SEGMENTS`` or more segments, the row observed at
    its measured rate).
    """
    p, c = fit.roles
    out: dict[str, tuple[SegmentRate, ...]] = {}
    for ob in fit.observed:
        label = split_label(ob.roles.get(p, 0), ob.roles.get(c, 0))
        if len(ob.segments) < MIN_SEGMENTS or label not in df.index or "observed_bps" not in df.columns:
            continue
        if bool(df.at[label, "observed"]) and float(df.at[label, "observed_bps"]) > 0:
            out[label] = ob.segments
    return out if len(out) >= 2 else {}


def compare_probed(fit: PipelineFit, df: pd.DataFrame) -> pd.DataFrame:
    """The table with the rows a probe measured compared directly (module docstring)."""
    rates = probed_rates(fit, df)
    if not rates or "err_own_var" not in df.columns:
        return df
    out = df.copy()
    out["probe_segments"] = 0
    labels = list(rates)
    paired = probe_var(rates)
    parts = [k for k in ERR_SHARED + ("err_sync_lo", "err_sync_hi") + ERR_CORNERS if k in out.columns]
    mean = {k: float(pd.to_numeric(out.loc[labels, k], errors="coerce").fillna(0.0).mean()) for k in parts}
    shared_var = sum(mean[k] ** 2 for k in ERR_SHARED if k in mean)
    floors = [sum(float(out.at[lab, k]) ** 2 for k in ERR_SAMPLING if k in out.columns) for lab in labels]
    floor = min((f for f in floors if math.isfinite(f)), default=0.0)
    for lab in labels:
        own = max(paired[lab], floor)
        x = float(out.at[lab, "observed_bps"])
        half = Z_95 * math.sqrt(own + shared_var)
        for k in parts:
            out.at[lab, k] = mean[k]
        out.at[lab, "err_own_var"] = own
        out.at[lab, "bps"] = x
        out.at[lab, "bps_low"] = x * math.exp(-half)
        out.at[lab, "bps_high"] = x * math.exp(half)
        out.at[lab, "widened"] = False
        out.at[lab, "probe_segments"] = len(rates[lab])
        was = float(df.at[lab, "bps"])  # the projected rate, which the measured one replaces
        if "eta_s" in out.columns and was > 0:
            out.at[lab, "eta_s"] = float(df.at[lab, "eta_s"]) * was / x
        for col in ("tok_s", "gpu_util"):  # in proportion to the rate
            if col in out.columns and was > 0:
                out.at[lab, col] = float(df.at[lab, col]) * x / was
        _hold_measured(fit, out, lab, x)
    return out


def _hold_measured(fit: PipelineFit, df: pd.DataFrame, label: str, x: float) -> None:
    """Row ``label`` at its measured rate ``x``: every stage's capacity at least ``x`` (module
    docstring, 1), the bound and the efficiency from them."""
    pc, cc = role_columns(fit.roles)
    for col in (pc.cap_bps, cc.cap_bps, "cap_loader_bps", "cap_link_bps"):
        if col in df.columns and float(df.at[label, col]) < x:
            df.at[label, col] = x
    if "bound_bps" in df.columns:
        df.at[label, "bound_bps"] = max(float(df.at[label, "bound_bps"]), x)
    if "efficiency" in df.columns:
        df.at[label, "efficiency"] = x / max(float(df.at[label, pc.cap_bps]), float(df.at[label, cc.cap_bps]))


__all__ = ["MIN_SEGMENTS", "compare_probed", "probe_var", "probed_rates"]
