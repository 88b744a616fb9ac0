"""Statistics every wing uses: the robust line, batch-means intervals and their quantiles.

- ``huber_line``: y = a + b x by Huber-weighted least squares (IRLS, ``HUBER_K`` robust scale
  units), clamped to a non-negative slope and intercept (step time cannot fall with tokens);
- ``batch_means_interval``: a 95% interval on the mean of a time-ordered series from ``BATCH_MEANS``
  batch means, so that autocorrelation widens it honestly (Student t quantiles, `t_975`);
- ``expected_max_normal``: E[max of m iid standard normals], the barrier wait of m ranks.

scipy is imported on first use only (``scipy.special``, not ``scipy.stats``: a fraction of the
import time, which every command would pay).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

BATCH_MEANS = 20
HUBER_K = 1.345
HUBER_TOL = 1e-9  # IRLS stops when a round moves a and b by less than this share (the fit's own
# error is ~1e-3 of them; BENCHMARKS.md 15.vii)
Z_95 = 1.96


@cache
def t_975(df: int) -> float:
    """Student t's 97.5% quantile at ``df`` degrees of freedom (scipy's ``stdtrit``, which
    ``scipy.stats.t.ppf`` calls), to 3 decimals as the intervals have always used it (2.093 at 19).
    """
    from scipy.special import stdtrit

    return round(float(stdtrit(df, 0.975)), 3)


@cache
def _normal_grid() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`expected_max_normal`'s abscissae, x phi(x) and log Phi(x): built once, shared by every m."""
    from scipy.special import log_ndtr

    x = np.linspace(-8.0, 8.0, 4001)
    return x, x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi), log_ndtr(x)


@cache
def _expected_max(m: int) -> float:
    x, x_phi, log_cdf = _normal_grid()
    return float(m * np.trapezoid(x_phi * np.exp((m - 1) * log_cdf), x))


def expected_max_normal(m: int) -> float:
    """E[max of m iid standard normals]: ``x m phi(x) Phi(x)^(m-1)`` integrated by the trapezoid rule
    over 4001 points of [-8, 8] (within 1e-11 up to m = 4099)."""
    return _expected_max(int(m)) if m > 1 else 0.0


def _smallest(v: np.ndarray, ranks: tuple[int, ...]) -> list[float]:
    """The ``ranks``-th smallest values of ``v`` (finite; ranks ascending and near each other), the
    values a partition of all of ``v`` gives, found among the few values between two quantiles of
    a strided subsample that bracket the ranks (5 standard deviations of a sample quantile either
    side); where the bracket misses them, by a partition of all of ``v``."""
    n = len(v)
    step = n // 4096
    if step >= 8:
        sub = np.sort(v[::step])
        m, spread = len(sub), 2.5 * math.sqrt(len(sub)) + 2
        lo = sub[max(int(ranks[0] * m / n - spread), 0)]
        hi = sub[min(int(ranks[-1] * m / n + spread) + 1, m - 1)]
        inside = v >= lo
        below = n - np.count_nonzero(inside)
        np.logical_and(inside, v <= hi, out=inside)
        few = v[inside]
        if below <= ranks[0] and ranks[-1] < below + len(few):
            few.partition([k - below for k in ranks])
            return [few[k - below] for k in ranks]
    work = v.copy()
    work.partition(list(ranks))
    return [work[k] for k in ranks]


def huber_line(x: np.ndarray, y: np.ndarray, iters: int = 20) -> tuple[float, float, float]:
    """Robust fit y = a + b x (Huber IRLS). b = 0 when x does not vary.

    Each round takes two medians (of the residuals, and of their distances to it: the MAD scale).
    They are found with one single-k ``partition`` and a max over the lower half, the very values
    ``np.median`` returns (which, for an even count, partitions around both middle elements): the
    same line, bit for bit.
    """
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    if len(x) < 3 or np.ptp(x) <= 0:
        return float(np.mean(y)), 0.0, 0.0
    n, half = len(y), len(y) // 2
    ranks = (half,) if n % 2 else (half - 1, half)

    def median(v: np.ndarray) -> float:
        got = _smallest(v, ranks)
        return got[0] if n % 2 else (got[0] + got[1]) / 2

    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        median = np.median  # noqa: F811  (NaN in, NaN out, as np.median has it)
    w = np.ones_like(y)
    # the same operations in the same order as the plain expressions (so the same bits), into
    # buffers allocated once rather than fresh temporaries each round
    t1, t2, dx, r = (np.empty_like(y) for _ in range(4))
    a = b = 0.0
    for _ in range(iters):
        sw = w.sum()
        xm, ym = np.multiply(w, x, out=t1).sum() / sw, np.multiply(w, y, out=t1).sum() / sw
        np.subtract(x, xm, out=dx)
        sxx = np.multiply(w, np.multiply(dx, dx, out=t1), out=t1).sum()  # (w * dx ** 2).sum()
        b_new = (
            np.multiply(np.multiply(w, dx, out=t1), np.subtract(y, ym, out=t2), out=t1).sum() / sxx if sxx > 0 else 0.0
        )  # (w * dx * (y - ym)).sum() / sxx
        a_new = ym - b_new * xm
        np.subtract(np.subtract(y, a_new, out=r), np.multiply(b_new, x, out=t1), out=r)  # y - a - b x
        scale = 1.4826 * median(np.abs(np.subtract(r, median(r), out=t1), out=t1)) + 1e-12
        u = np.divide(np.abs(r, out=t1), HUBER_K * scale, out=t1)
        np.divide(1.0, np.maximum(u, 1e-12, out=t2), out=w)  # 1 / max(u, 1e-12) ...
        w[u <= 1] = 1.0  # ... where u > 1, else 1
        done = abs(b_new - b) <= HUBER_TOL * max(abs(b), 1e-30) and abs(a_new - a) <= HUBER_TOL * max(abs(a), 1e-30)
        a, b = a_new, b_new
        if done:
            break
    if b < 0:
        # busy time cannot fall with more tokens: the spread of token counts is too narrow to see
        # the slope under the noise, so the step time is taken as flat
        a, b = float(np.average(y, weights=w)), 0.0
    elif a < 0 < b:
        # a negative fixed cost is an extrapolation artefact (tokens cluster near the budget):
        # refit through the origin, busy proportional to tokens
        b = float((w * x * y).sum() / (w * x * x).sum())
        a = 0.0
    resid = y - a - b * x
    ss_tot = ((y - y.mean()) ** 2).sum()
    r2 = 1.0 - (resid**2).sum() / ss_tot if ss_tot > 0 else 0.0
    return float(a), float(b), float(r2)


def batch_means_interval(series: np.ndarray) -> tuple[float, float]:
    """95% interval of the mean of a time-ordered series by batch means."""
    n = len(series)
    k = BATCH_MEANS if n >= 5 * BATCH_MEANS else (10 if n >= 50 else (5 if n >= 15 else 3))
    if n < 2 * k:
        m = float(np.mean(series))
        return m, m
    bm = series[: n // k * k].reshape(k, -1).mean(axis=1)
    half = t_975(k - 1) * bm.std(ddof=1) / math.sqrt(k)
    m = float(series.mean())
    return m - half, m + half
