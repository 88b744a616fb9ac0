"""How far the fitted quantities could be off before the recommended split stops leading.

Every split is projected again under the same settings as one knob moves: a factor f on the
producer's or the consumer's per-engine rate (``ROBUST_RANGE``), or the per-drafter scaling s of
every split of more than one drafter (``SCALING_RANGE``, from the fit's s at R's drafter count).
On each side, the threshold is the value nearest the fitted one where R's lead over every other
split ends: the first step of ``GRID_RATIO`` outwards across which the leader changes, bisected
``BISECT_STEPS`` times. Rates rise with every knob, so a stretch where no split's rate at its ends
reaches R's least there is skipped (``CUTS`` stretches, cut again where one can).

Sync levers (M > 1 drafters, a barrier every k steps): the barrier loses ``sqrt(k r) * sigma *
e_M`` per round (``r`` the rounds' variance ratio, `advisor.measure.rounds`), part of sigma being
the tokens' spread ``c * sd(tokens)``, which balancing removes; reported where s(M) <
``LEVER_MIN_SCALING``. Results are data (`Threshold`, `ScalingTie`, `Lever`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from advisor.model.chain import WhatIf, sync_scaling
from advisor.model.params import PipelineFit
from advisor.project.rows import SplitRow
from advisor.project.table import split_capacities
from advisor.settings import Settings

ROBUST_RANGE = (0.25, 4.0)
SCALING_RANGE = (0.05, 1.0)
LEVER_MIN_SCALING = 0.95
LEVER_MIN_GAIN = 0.005  # a lever must raise per-rank scaling by at least this to be worth saying
GRID_RATIO = 1.05  # the scan's step: neighbouring knob values differ by at most this factor
CUTS = 4  # a cell wider than a step is cut into this many
BISECT_STEPS = 24  # halvings of a step's log width: the threshold to about 1e-8 relative
TIE_REL = 1e-9  # splits this close project the same: the pick keeps its place (the solver's noise)
PRUNE_SLACK = 0.02  # a split within this share of R's least rate on a side is scanned all the same
# past this many splits (large G) the search runs over the pick's NEAR nearest splits on each side,
# every STRIDE-th split of the rest and the two ends: as a knob moves, the best split moves through
# its neighbours, so the first to catch up is near the pick; the stride keeps far ones in sight
MAX_SEARCHED = 32
NEAR = 8
STRIDES = 16

Split = tuple[int, int]
Rate = Callable[[float, Split], float]  # (knob value, split) -> projected b/s


@dataclass(frozen=True)
class Threshold:
    """Capacity factor on one role at which the recommended split's lead over every other split ends."""

    role: str
    factor: float | None  # None: no value within ROBUST_RANGE changes the leader
    capacity_bps: float  # the recommended split's fitted capacity of that role
    workers: int
    rival: Split | None = None  # the split that then matches the recommended one


@dataclass(frozen=True)
class ScalingTie:
    """Per-rank scaling of every split of more than one consumer at which the recommended split's
    lead over every other split ends (or, where it does not lead there, begins)."""

    subject: Split  # the split whose consumers the sentence counts
    rival: Split | None  # the split that matches the recommended one at ``scaling``; None without a tie
    scaling: float | None  # None: no value within SCALING_RANGE changes the leader
    fitted: float  # the fit's per-rank scaling at the subject's consumer count
    leads_below: bool  # the recommended split leads below ``scaling`` (and not above it)
    subject_bottleneck: str


@dataclass(frozen=True)
class Lever:
    """What balancing tokens or syncing half as often would do to per-rank drafter scaling."""

    drafters: int
    sync_every: int
    collective_s: float
    untimed_s: float  # a round's time beyond the timed collective (`SyncFit.overhead_s`)
    scaling_now: float
    scaling_balanced: float
    scaling_half_sync: float


@dataclass(frozen=True)
class Sensitivity:
    thresholds: tuple[Threshold, ...]
    scaling: tuple[ScalingTie, ...]
    levers: tuple[Lever, ...]


@dataclass(frozen=True)
class _Edge:
    value: float  # the knob's value where the leader changes
    rival: Split  # the best other split on the side where the recommended split does not lead
    leads_below: bool  # the recommended split leads below ``value``


def _leads(rate: Rate, v: float, rec: Split, others: Sequence[Split]) -> bool:
    """Whether no other split projects more than ``rec`` at ``v`` (ties within ``TIE_REL`` are no lead lost)."""
    return rate(v, rec) >= max(rate(v, s) for s in others) * (1 - TIE_REL)


def _first_change(
    rate: Rate, rec: Split, rivals: Sequence[Split], a: float, b: float, first: bool
) -> tuple[float, float, list[Split]] | None:
    """The first step (at most ``GRID_RATIO`` wide) from ``a`` towards ``b`` across which whether
    ``rec`` leads changes (it is ``first`` at ``a``), with the rivals that can lead in it; None where
    none does. A rival whose rate at both ends of a cell stays below ``rec``'s least there cannot
    lead in it (every rate rises with the knob); cells with such rivals alone are passed over, the
    rest cut into ``CUTS`` until a step is reached."""
    floor = min(rate(a, rec), rate(b, rec)) * (1 - PRUNE_SLACK)
    live = [s for s in rivals if max(rate(a, s), rate(b, s)) >= floor]
    if not live:
        return None
    if abs(math.log(b / a)) <= math.log(GRID_RATIO) * (1 + 1e-9):
        leads = _leads(rate, b, rec, live)
        return (a, b, live) if leads != first else None
    cuts = [a, *(a * (b / a) ** (k / CUTS) for k in range(1, CUTS)), b]
    for lo, hi in zip(cuts, cuts[1:]):
        found = _first_change(rate, rec, live, lo, hi, first)
        if found is not None:
            return found
    return None


def _lead_edges(rate: Rate, splits: Sequence[Split], rec: Split, ref: float, ends: Sequence[float]) -> list[_Edge]:
    """On the way from ``ref`` to each of ``ends``, the knob's value nearest ``ref`` at which
    ``rec``'s lead over every other split ends (where it does not lead at ``ref``: begins), where
    one does."""
    others = [s for s in splits if s != rec]
    out = []
    for end in ends if others else ():
        first = _leads(rate, ref, rec, others)
        found = _first_change(rate, rec, others, ref, end, first) if end != ref else None
        if found is None:
            continue
        near, far, live = found
        for _ in range(BISECT_STEPS):
            mid = math.sqrt(near * far)
            near, far = (mid, far) if _leads(rate, mid, rec, live) == first else (near, mid)
        behind = far if first else near  # the side where rec does not lead
        rival = max(live, key=lambda s: rate(behind, s))
        out.append(_Edge(value=math.sqrt(near * far), rival=rival, leads_below=first == (end > ref)))
    return out


def _rate(fit: PipelineFit, settings: Settings, what_if: Callable[[float, Split], WhatIf]) -> Rate:
    """(knob value, split) -> the split's projected rate under ``what_if(value, split)``, each
    projected once (the rate alone: its interval, two more chain solves, is not needed here)."""

    @functools.cache
    def rate(v: float, split: Split) -> float:
        return split_capacities(fit, settings, *split, what_if=what_if(v, split), interval=False).x_bps

    return rate


def _capacity_rate(fit: PipelineFit, settings: Settings, role_index: int) -> Rate:
    """(factor on one role's per-engine rate, split) -> the split's projected rate."""
    return _rate(fit, settings, lambda f, _: WhatIf(mu_scale=(f, 1.0) if role_index == 0 else (1.0, f)))


def tie_factor(fit: PipelineFit, settings: Settings, rec: Split, alt: Split, role_index: int) -> float | None:
    """Factor on one role's per-engine rate at which ``alt`` matches ``rec``."""
    rate = _capacity_rate(fit, settings, role_index)
    edges = _lead_edges(rate, (rec, alt), rec, 1.0, ROBUST_RANGE)
    return edges[0].value if edges else None


def thresholds(
    fit: PipelineFit, settings: Settings, rec: Split, splits: Sequence[Split], rec_row: SplitRow
) -> tuple[Threshold, ...]:
    """Each role's capacity factors, below and above 1, at which ``rec``'s lead over every other split ends."""
    if len(set(splits) - {rec}) == 0:
        return ()
    out: list[Threshold] = []
    for i, role in enumerate(fit.roles):
        rate = _capacity_rate(fit, settings, i)
        edges = _lead_edges(rate, splits, rec, 1.0, ROBUST_RANGE)
        base = Threshold(role=role, factor=None, capacity_bps=rec_row.roles[i].cap_bps, workers=rec[i])
        out.extend([replace(base, factor=e.value, rival=e.rival) for e in edges] or [base])
    return tuple(out)


def scaling_ties(
    fit: PipelineFit, settings: Settings, rec: Split, splits: Sequence[Split], rows: Mapping[Split, SplitRow]
) -> tuple[ScalingTie, ...]:
    """Per-rank scaling of every split of more than one consumer, below and above the fit's at
    ``rec``'s count, at which ``rec``'s lead over every other split ends.
    """
    several = [s for s in splits if s[1] > 1]
    if not several or len(set(splits) - {rec}) == 0:
        return ()
    lo, hi = SCALING_RANGE
    # a split of one consumer keeps its own scaling
    rate = _rate(fit, settings, lambda s, split: WhatIf(consumer_scaling=s) if split[1] > 1 else WhatIf())
    ref = min(max(sync_scaling(fit.consumer, fit.sync, rec[1]), lo), hi)
    edges = _lead_edges(rate, splits, rec, ref, (lo, hi))

    def tie(subject: Split, e: _Edge | None) -> ScalingTie:
        return ScalingTie(
            subject=subject,
            rival=e.rival if e else None,
            scaling=e.value if e else None,
            fitted=sync_scaling(fit.consumer, fit.sync, subject[1]),
            leads_below=e.leads_below if e else True,
            subject_bottleneck=rows[subject].bottleneck,
        )

    if not edges:
        return (tie(rec if rec[1] > 1 else max(several, key=lambda s: rate(hi, s)), None),)
    return tuple(tie(_subject(rec, e), e) for e in edges)


def _subject(rec: Split, e: _Edge) -> Split:
    """The split whose consumers a scaling tie counts: ``rec``'s where falling scaling ends its
    lead, the rival's where rising scaling does (each only where it has more than one)."""
    own = rec[1] > 1 and not e.leads_below
    return rec if own or e.rival[1] <= 1 else e.rival


def levers(fit: PipelineFit, m: int) -> Lever | None:
    """Sync levers for M data-parallel drafters (see the module docstring)."""
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
        untimed_s=fit.sync.overhead_s,
        scaling_now=s_now,
        scaling_balanced=s_bal,
        scaling_half_sync=s_k2,
    )


def searched(rec: Split, splits: Sequence[Split]) -> list[Split]:
    """The splits the search projects: all of them up to ``MAX_SEARCHED``, else ``rec``'s ``NEAR``
    nearest on each side (by producer count), ``STRIDES`` evenly spaced and the two ends."""
    ordered = sorted(set(splits) | {rec})
    if len(ordered) <= MAX_SEARCHED:
        return ordered
    i = ordered.index(rec)
    step = max(1, len(ordered) // STRIDES)
    keep = set(ordered[max(0, i - NEAR) : i + NEAR + 1]) | set(ordered[::step]) | {ordered[0], ordered[-1]}
    return sorted(keep)


def sensitivity(
    fit: PipelineFit, settings: Settings, rows: Mapping[str, SplitRow], rec: str, judged: str
) -> Sensitivity:
    """Where the lead of the recommended row ``rec`` over every other row ends as each role's
    capacity and the per-drafter scaling move, and sync levers at the recommended and judged
    drafter counts.
    """
    by_split = {row.counts: row for row in rows.values()}
    r = rows[rec].counts
    lev = tuple(x for x in (levers(fit, m) for m in sorted({r[1], rows[judged].counts[1]})) if x is not None)
    splits = searched(r, list(by_split))
    ties = scaling_ties(fit, settings, r, splits, by_split)
    return Sensitivity(thresholds=thresholds(fit, settings, r, splits, rows[rec]), scaling=ties, levers=lev)
