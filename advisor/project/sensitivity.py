"""How far the fitted quantities could be off before the choice between two splits flips.

For the recommended split R and its runner-up A (both from the projected table), under the same
`~advisor.settings.Settings` the table was computed with (G, q_hs depth, batch size):

- producer (target) capacity: the factor f on the per-target rate at which X_A(f) = X_R(f),
  found by bisection on a log scale within ``ROBUST_RANGE``; likewise for the consumer
  (drafter) capacity. No sign change within the range: the choice holds for any such error.
- per-drafter scaling: for the best split with fewer and the best with more drafters than R, the
  per-rank scaling s of the split with more drafters (the reference reading's "even if each of
  two drafters reached only 60%") at which the two tie, searched on ``SCALING_RANGE``.
- sync levers (M > 1 data-parallel drafters with a barrier every k steps): the barrier waits for
  the slowest rank, so per-rank scaling s(M) loses ``sqrt(k r) * sigma * e_M`` per round (``r``
  the logged rounds' variance ratio, `advisor.measure.rounds`, kept at another k); the
  step-time spread sigma partly comes from token-count spread (``c * sd(tokens)``), which
  balancing tokens across ranks removes, and its weight falls as 1/sqrt(k). Reported when
  s(M) < ``LEVER_MIN_SCALING`` and a lever would raise it.

Results are data (:class:`Threshold`, :class:`ScalingTie`, :class:`Lever`); `advisor.decide.reasons`
words them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from advisor.model.chain import WhatIf, sync_scaling
from advisor.model.params import PipelineFit
from advisor.project.table import split_capacities
from advisor.settings import Settings

ROBUST_RANGE = (0.25, 4.0)
SCALING_RANGE = (0.05, 1.0)
LEVER_MIN_SCALING = 0.95
LEVER_MIN_GAIN = 0.005  # a lever must raise per-rank scaling by at least this to be worth saying
BISECT_STEPS = 40

Split = tuple[int, int]


@dataclass(frozen=True)
class Threshold:
    """Capacity factor on one role at which the runner-up matches the recommended split."""

    role: str
    factor: float | None  # None: no value within ROBUST_RANGE flips the choice
    capacity_bps: float  # the recommended split's fitted capacity of that role
    workers: int


@dataclass(frozen=True)
class ScalingTie:
    """Per-drafter scaling of ``big`` (the split with more drafters) at which it ties ``other``."""

    big: Split
    other: Split
    scaling: float | None  # None: no value within SCALING_RANGE ties them
    fitted: float  # the fit's per-rank scaling at big's drafter count
    big_wins_at_fit: bool
    big_bottleneck: str


@dataclass(frozen=True)
class Lever:
    """What balancing tokens or syncing half as often would do to per-rank drafter scaling."""

    drafters: int
    sync_every: int
    collective_s: float
    scaling_now: float
    scaling_balanced: float
    scaling_half_sync: float


@dataclass(frozen=True)
class Rivals:
    """The splits the recommended one is weighed against (None: there is none such)."""

    runner_up: Split | None  # the next best split
    fewer: Split | None  # the best split with fewer drafters
    more: Split | None  # the best split with more drafters


@dataclass(frozen=True)
class Sensitivity:
    thresholds: tuple[Threshold, ...]
    scaling: tuple[ScalingTie, ...]
    levers: tuple[Lever, ...]


def _bisect_log(diff: Callable[[float], float], lo: float, hi: float) -> float | None:
    """Root of ``diff`` between lo and hi (geometric bisection); None without a sign change."""
    d_lo, d_hi = diff(lo), diff(hi)
    if (d_lo > 0) == (d_hi > 0):
        return None
    for _ in range(BISECT_STEPS):
        mid = math.sqrt(lo * hi)
        d_mid = diff(mid)
        if (d_mid > 0) == (d_lo > 0):
            lo, d_lo = mid, d_mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def _x(fit: PipelineFit, settings: Settings, split: Split, what_if: WhatIf = WhatIf()) -> float:
    # the rate alone: its interval (two more chain solves per call) is not needed here
    return split_capacities(fit, settings, *split, what_if=what_if, interval=False).x_bps


def tie_factor(fit: PipelineFit, settings: Settings, rec: Split, alt: Split, role_index: int) -> float | None:
    """Factor on one role's per-engine rate at which ``alt`` matches ``rec``.

    Args:
        fit: the fitted pipeline.
        settings: the options the table was computed with.
        rec: the recommended split, (N, M).
        alt: the split weighed against it, (N, M).
        role_index: the role whose rate is scaled: 0 producer, 1 consumer.

    Returns:
        The factor, found by bisection within ``ROBUST_RANGE``; None where no factor there flips the choice.
    """

    def diff(f: float) -> float:
        scale = (f, 1.0) if role_index == 0 else (1.0, f)
        return _x(fit, settings, alt, WhatIf(mu_scale=scale)) - _x(fit, settings, rec, WhatIf(mu_scale=scale))

    lo, hi = ROBUST_RANGE
    d1 = diff(1.0)
    for end in (lo, hi):
        if (diff(end) > 0) != (d1 > 0):
            return _bisect_log(diff, min(end, 1.0), max(end, 1.0))
    return None


def scaling_tie(
    fit: PipelineFit, settings: Settings, rec: Split, alt: Split, bottleneck_of: Callable[[Split], str]
) -> ScalingTie:
    """Per-drafter scaling of the one of ``rec`` and ``alt`` with more drafters at which it ties the other.

    Args:
        fit: the fitted pipeline.
        settings: the options the table was computed with.
        rec: the recommended split, (N, M).
        alt: the best split with fewer or with more drafters, (N, M).
        bottleneck_of: split -> its bottleneck stage, as the table names it.

    Returns:
        The tie, searched on ``SCALING_RANGE`` (``scaling`` None: no tie there), with the fit's own
        scaling at that split's drafter count and whether the split wins at it.
    """
    big, small = (alt, rec) if alt[1] > rec[1] else (rec, alt)
    x_small = _x(fit, settings, small)

    def diff(s: float) -> float:
        return _x(fit, settings, big, WhatIf(consumer_scaling=s)) - x_small

    s = _bisect_log(diff, *SCALING_RANGE)
    fitted = sync_scaling(fit.consumer, fit.sync, big[1])
    return ScalingTie(
        big=big,
        other=small,
        scaling=s,
        fitted=fitted,
        big_wins_at_fit=diff(fitted) > 0,
        big_bottleneck=bottleneck_of(big),
    )


def levers(fit: PipelineFit, m: int) -> Lever | None:
    """Sync levers for M data-parallel drafters (see the module docstring).

    Args:
        fit: the fitted pipeline (drafter step times, tokens' spread, sync).
        m: drafters.

    Returns:
        The per-rank scaling now, with tokens balanced and with half as many syncs; None without a
        sync (M <= 1 or no sync steps), where s(M) is at least ``LEVER_MIN_SCALING`` or where
        neither lever gains ``LEVER_MIN_GAIN``.
    """
    c, k = fit.consumer, fit.sync.sync_every
    if m <= 1 or k <= 0:
        return None
    s_now = sync_scaling(c, fit.sync, m)
    if s_now >= LEVER_MIN_SCALING:
        return None
    tok_sd = fit.tokens_std if math.isfinite(fit.tokens_std) else 0.0
    sigma_bal = math.sqrt(max(c.busy_std_s**2 - (c.c_s_per_tok * tok_sd) ** 2, 0.0))
    s_bal = sync_scaling(replace(c, busy_std_s=sigma_bal), fit.sync, m)
    s_k2 = sync_scaling(c, replace(fit.sync, sync_every=2 * k), m)
    if max(s_bal, s_k2) < s_now + LEVER_MIN_GAIN:
        return None
    return Lever(
        drafters=m,
        sync_every=k,
        collective_s=fit.sync.allreduce_s(m),
        scaling_now=s_now,
        scaling_balanced=s_bal,
        scaling_half_sync=s_k2,
    )


def sensitivity(
    fit: PipelineFit,
    settings: Settings,
    rec: Split,
    rivals: Rivals,
    judged: Split,
    bottleneck_of: Callable[[Split], str],
    capacity_of: Callable[[Split, int], float],
) -> Sensitivity:
    """Thresholds against the runner-up, drafter-scaling ties against the best split with fewer
    and with more drafters, and sync levers at the recommended and judged drafter counts.

    Args:
        fit: the fitted pipeline.
        settings: the options the table was computed with.
        rec: the recommended split, (N, M).
        rivals: the runner-up and the best splits with fewer and with more drafters.
        judged: the judged split (``--roles`` or the log's), or ``rec`` where none is.
        bottleneck_of: split -> its bottleneck stage, as the table names it.
        capacity_of: (split, role index: 0 producer, 1 consumer) -> that role's capacity, batches/s.

    Returns:
        One threshold per role (none without a runner-up), one tie per rival with fewer or more
        drafters, and the levers worth saying.
    """
    runner_up = rivals.runner_up
    thresholds = tuple(
        Threshold(
            role=role,
            factor=tie_factor(fit, settings, rec, runner_up, i),
            capacity_bps=capacity_of(rec, i),
            workers=rec[i],
        )
        for i, role in enumerate(fit.roles)
        if runner_up is not None
    )
    ties = tuple(
        scaling_tie(fit, settings, rec, alt, bottleneck_of) for alt in (rivals.fewer, rivals.more) if alt is not None
    )
    lev = tuple(x for x in (levers(fit, m) for m in sorted({rec[1], judged[1]})) if x is not None)
    return Sensitivity(thresholds=thresholds, scaling=ties, levers=lev)
