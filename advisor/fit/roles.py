"""One GPU role's service model from its steady steps (or from rates snapshots)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd

from advisor.measure.measured import MeasuredLog
from advisor.model.params import Basis, RoleFit
from advisor.model.priors import DEFAULT_SCV
from advisor.stats import Z_95, batch_means_interval


def pooled_sums(measured: Sequence[MeasuredLog], same: Sequence[int], role: str) -> Counter:
    """The window sums of ``role`` (`RunLog.window_sums`: every step, sampled or not) over the logs
    ``same``, with ``wall``: their windows' worker-seconds."""
    tot: Counter = Counter()
    for i in same:
        tot.update(measured[i].sums[role])
        tot["wall"] += measured[i].window.duration_s * measured[i].roles[role]
    return tot


def role_from_steps(
    role: str, steps: pd.DataFrame, sums: Counter, line: tuple[float, float, float], *, sampled: bool
) -> RoleFit:
    """Rates, variability and shares of one role from its steady steps. Where they are a sample
    (``sampled``), the count, mean, spread and shares come from the windows' exact sums
    (`pooled_sums`) and the interval keeps the sample's relative width (wider than the whole
    log's); else all come off the steps (whose sums are the same numbers, but a spread from
    sums of squares differs from theirs in the 13th digit, which the draws of the odds amplify).
    """
    busy = steps["busy"].to_numpy()
    t0, c, r2 = line
    lo_busy, hi_busy = batch_means_interval(busy)
    wall = max(sums["wall"], 1e-12)
    if sampled:
        n = sums["n"]
        mean = sums["busy"] / n
        std = math.sqrt(max(sums["busy2"] - n * mean * mean, 0.0) / (n - 1))
        busy_s, wait_s, blocked_s = sums["busy"], sums["wait"], sums["blocked"]
        scale = float(busy.mean()) / mean
    else:
        n, mean, std = len(busy), float(busy.mean()), float(busy.std(ddof=1))
        busy_s, wait_s, blocked_s = busy.sum(), steps["wait"].sum(), steps["blocked"].sum()
        scale = 1.0
    return RoleFit(
        role=role,
        n_steps=int(n),
        busy_mean_s=mean,
        busy_std_s=std,
        t0_s=t0,
        c_s_per_tok=c,
        r2=r2,
        mu_bps=1.0 / mean,
        mu_low_bps=1.0 / max(hi_busy, 1e-12) * scale,
        mu_high_bps=1.0 / max(lo_busy, 1e-12) * scale,
        busy_share=float(busy_s / wall),
        starved_share=float(wait_s / wall),
        blocked_share=float(blocked_s / wall),
    )


def drift(steps: pd.DataFrame) -> float:
    """Relative half-difference of the mean busy time between the two halves (by time) of a window."""
    if len(steps) < 20:
        return 0.0
    t = steps["t"].to_numpy()
    busy = steps["busy"].to_numpy()
    mid = 0.5 * (t.min() + t.max())
    a, b = busy[t < mid], busy[t >= mid]
    if len(a) < 5 or len(b) < 5:
        return 0.0
    return float(abs(a.mean() - b.mean()) / (a.mean() + b.mean()))


def log_mean_var(busy: np.ndarray, drift_share: float, run_var: float) -> float:
    """Variance of log(mean busy) of a log's steps: batch means (sampling), its drift and a run's
    level shift (``run_var``) together."""
    m = float(busy.mean())
    lo, hi = batch_means_interval(busy)
    return ((hi - lo) / (2 * Z_95 * m)) ** 2 + drift_share**2 + run_var


def role_from_rates(
    role: str,
    rates: pd.DataFrame,
    n: int,
    producer_side: bool,
    hs_full_share: float | None,
    cap_kind: str | None = None,
) -> RoleFit:
    """One role from the steady window's snapshots: from ``cap_bps`` where logged, else from
    throughput, which bounds a throttled role's capacity from below.
    """
    r = rates
    cap_col, bps_col = f"cap_bps_{role}", f"bps_{role}"
    logged = cap_col in r and r[cap_col].notna().sum() >= 1
    if logged and cap_kind == "upper":
        hi = float(r[cap_col].dropna().mean()) / n
        lo = min(float(r[bps_col].dropna().mean()) / n, hi)
        return _bounded(role, math.sqrt(lo * hi), (lo, hi), lower=False)
    if logged and cap_kind == "lower":
        mu = float(r[cap_col].dropna().mean()) / n
        return _bounded(role, mu, (mu, math.inf), lower=True)
    series = r[cap_col if logged else bps_col].dropna().to_numpy() / n
    # unlogged, behind a full queue the producer's completions are throttled: only a floor on
    # capacity; a consumer with a full input queue never starves, so its rate is its capacity
    consumer_saturated = hs_full_share is not None and hs_full_share > 0.5
    lower = not logged and (producer_side or not consumer_saturated)
    mu = float(series.mean())
    lo, hi = batch_means_interval(series)
    # a throttled role's completions bound its capacity from below only: every split is projected
    # at the bound and with the capacity open (`advisor.model.chain.range_ends`)
    return RoleFit.unmeasured(
        role,
        mu,
        scv=DEFAULT_SCV,
        basis=Basis.BOUND if lower else Basis.RATES,
        mu_interval_bps=(lo, hi),
        lower_bound=lower,
        mu_range_bps=(mu, math.inf) if lower else (),
    )


def _bounded(role: str, mu: float, mu_range: tuple[float, float], *, lower: bool) -> RoleFit:
    """A role known only to lie in ``mu_range`` (per worker), projected at ``mu``."""
    return RoleFit.unmeasured(role, mu, scv=DEFAULT_SCV, basis=Basis.BOUND, lower_bound=lower, mu_range_bps=mu_range)
