"""One GPU role's service model from its steady steps (or from rates snapshots)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from advisor.measure.measured import MeasuredLog
from advisor.model.params import Basis, LoaderFit, RoleFit, SyncFit
from advisor.model.priors import DEFAULT_SCV
from advisor.stats import Z_95, batch_means_interval


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


def stacked(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The frames one under the other, numbered from 0."""
    return frames[0].reset_index(drop=True) if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def role_fits_from_sums(
    measured: Sequence[MeasuredLog], same: Sequence[int], role_fits: Sequence[RoleFit]
) -> tuple[list[RoleFit], float, float | None]:
    """The role fits with counts, means and shares from the steady windows' exact sums
    (`RunLog.window_sums`), and the consumer's batch size: where steps are a sample, these are
    of every step, while the step-time line, the variability and the interval's relative width
    stay the sample's (the interval of a 300k-row sample is wider than the whole log's)."""
    out = []
    sums_by_role = {}
    for rf in role_fits:
        tot: Counter = Counter()
        for i in same:
            tot.update(measured[i].sums[rf.role])
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


def loader_and_sync_from_counts(
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
