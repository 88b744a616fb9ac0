"""One GPU role's service model from its steady steps (or from rates snapshots)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from advisor.model.params import Basis, RoleFit
from advisor.model.priors import DEFAULT_SCV
from advisor.stats import Z_95, batch_means_interval, huber_line


def role_from_steps(role: str, steps: pd.DataFrame, wall_s: float, line: tuple[float, float, float]) -> RoleFit:
    """Rates, variability and shares of one role from its steady steps."""
    busy = steps["busy"].to_numpy()
    t0, c, r2 = line
    mean = float(busy.mean())
    lo_busy, hi_busy = batch_means_interval(busy)
    denom = max(wall_s, 1e-12)
    return RoleFit(
        role=role,
        n_steps=len(busy),
        busy_mean_s=mean,
        busy_std_s=float(busy.std(ddof=1)) if len(busy) > 1 else 0.0,
        t0_s=t0,
        c_s_per_tok=c,
        r2=r2,
        mu_bps=1.0 / mean,
        mu_low_bps=1.0 / max(hi_busy, 1e-12),
        mu_high_bps=1.0 / max(lo_busy, 1e-12),
        busy_share=float(busy.sum() / denom),
        starved_share=float(steps["wait"].sum() / denom),
        blocked_share=float(steps["blocked"].sum() / denom),
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


def log_mean_se(steps: pd.DataFrame, run_se: float) -> float:
    """Standard error of log(mean busy) of one log: batch means (sampling) and drift together."""
    busy = steps["busy"].to_numpy()
    m = float(busy.mean())
    lo, hi = batch_means_interval(busy)
    return math.sqrt(((hi - lo) / (2 * Z_95 * m)) ** 2 + drift(steps) ** 2 + run_se**2)


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
    lower = False
    logged = cap_col in r and r[cap_col].notna().sum() >= 1
    if logged and cap_kind == "upper":
        hi = float(r[cap_col].dropna().mean()) / n
        lo = min(float(r[bps_col].dropna().mean()) / n, hi)
        return _bounded(role, math.sqrt(lo * hi), (lo, hi), lower=False)
    if logged and cap_kind == "lower":
        mu = float(r[cap_col].dropna().mean()) / n
        return _bounded(role, mu, (mu, math.inf), lower=True)
    if logged:
        series = r[cap_col].dropna().to_numpy() / n
    else:
        series = r[bps_col].dropna().to_numpy() / n
        # behind a full queue the producer's completions are throttled: only a floor on capacity;
        # a consumer with a full input queue never starves, so its rate is its capacity
        consumer_saturated = hs_full_share is not None and hs_full_share > 0.5
        lower = producer_side or not consumer_saturated
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


def stacked(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The frames one under the other, numbered from 0."""
    return frames[0].reset_index(drop=True) if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def step_lines(line_frames: Mapping[str, pd.DataFrame]) -> dict[str, tuple[float, float, float]]:
    """Each role's step-time line: `huber_line` on its steps' tokens and busy times, over all logs'
    steps, so that logs at other token budgets pin the slope down.
    """
    return {r: huber_line(f["tokens"].to_numpy(dtype=float), f["busy"].to_numpy()) for r, f in line_frames.items()}
