"""The verdict, as data: ordered rules over the projected table.

Inputs: the table of `advisor.project.table` (every number below is read from its rows), the judged
split J (``--roles``, else the split the current log ran, when it is in the table), the
`~advisor.settings.Settings` it was computed with and the `~advisor.decide.evidence.Evidence` of the log.
B is the best split (highest projected b/s), A the runner-up of the recommended split R (the best
other split), and the margin compares the higher and the lower of R and A: stable when the
higher one's interval starts above the lower one's upper end. Two splits are *separated* when
the margin between them is stable or the lead's own 95% interval lies above 0
(`advisor.project.table.lead_interval`: both projections come from one fit, and the run's level and the
split slope, which dominate each interval on a shared host, move them together and cancel in the
lead; comparing the two intervals alone would count them twice).

Rules, in order; the first that fires decides (``rule`` names it):

0. ``unknown-capacity``: a role's capacity is only a range or a bound (given so, or read from
   snapshots of a throttled role: `advisor.model.params.Basis`), and at some corner of the ranges
   (`advisor.model.chain.range_ends`, the table's ``err_corner_*``) another split than B leads B by
   more than ``RESOLVE_GAIN``: the unknown side decides the pick -> ``cannot-tell``; R is J (B
   without one, or for the next run). The needs name the nearest such split to B (a short run
   there measures it; where a log ran it, B, unless a log ran B too: never a split already run)
   and the roles whose capacity would settle it, measured.
1. ``plan`` / ``next-run``: the run has ended (an ``end`` event), ``--next-run`` was given, or no
   split at this G was observed nor judged: advice for the next run, no restart cost.
   R = B. If B and A are not separated and either B's projected lead is at least ``RESOLVE_GAIN``
   or A could lead B by more than ``RESOLVE_GAIN`` (the lead's 95% interval reaches below
   -``RESOLVE_GAIN``; without a paired form, A's upper end above B's lower end by that much):
   ``cannot-tell`` (rule ``unresolved``). Otherwise verdict ``next-run`` (with B and A not
   separated: a tie inside what the model resolves, either will do).
2. ``thin-evidence``: the log is thin (too few steady batches, not settled, or drifting;
   `advisor.decide.evidence`) and B is not separated from its rival (J, or A when B is J):
   ``cannot-tell``; the needs say how much more log would separate them.
3. ``already-best``: B is J -> ``stay``.
4. ``small-gain``: B's lead over J is below ``RESOLVE_GAIN`` (what the model can resolve, not worth
   a restart) -> ``stay``.
5. ``overlap``: B is not separated from J -> ``cannot-tell``; a longer log, or a short run at B
   given with this one, settles it.
6. ``restart-cost``: finishing the job at B saves no more than ``--restart-cost`` hours -> ``stay``
   (not where B is the split the log runs and J another: reaching B then needs no restart).
7. ``switch``: otherwise -> ``switch`` to B.

Beside the verdict: the loader cap (when the loader limits input, every split within
``LOADER_TIE`` of its capacity is named: no split beats it), the sensitivity of R against A
(`advisor.project.sensitivity`), and queue advice at R (`advisor.project.queues`). Wording is `advisor.decide.reasons`'s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import pandas as pd

from advisor.decide.evidence import Evidence
from advisor.stats import Z_95
from advisor.model.params import PipelineFit
from advisor.project.table import ERR_CORNERS, lead_interval, lead_parts, split_label
from advisor.project.queues import QueueAdvice, queue_advice
from advisor.project.sensitivity import Sensitivity, sensitivity
from advisor.settings import Settings

RESOLVE_GAIN = 0.02          # leads below 2% are within what the model resolves
LOADER_TIE = 0.01            # splits this close to the loader's cap count as reaching it


class Verdict(str, Enum):
    STAY = "stay"
    SWITCH = "switch"
    NEXT_RUN = "next-run"
    CANNOT_TELL = "cannot-tell"


@dataclass(frozen=True)
class Margin:
    """Between the recommended split and the runner-up: ``higher`` and ``lower`` by projected b/s.

    ``stable``: the higher one's interval starts above the lower one's upper end. ``separated``:
    stable, or the lead's own 95% interval (`advisor.project.table.lead_interval`: the two projections
    share the run's level and the split slope, which cancel in the lead) lies above 0."""

    higher: str
    lower: str
    stable: bool
    best_low: float              # the higher one's interval start
    runner_up_high: float        # the lower one's interval end
    lead_pct: float              # the higher one's projected lead
    separated: bool = False
    lead_low_pct: float | None = None    # the lead's 95% interval (None: no paired form)
    lead_high_pct: float | None = None


@dataclass(frozen=True)
class Needs:
    """What evidence would settle a choice the log cannot make."""

    longer_factor: float | None   # a steady log this many times as long separates the two
    extra_steady_s: float | None  # that much more steady time
    settle: bool                  # the log must first run past warm-up / drift
    run_at: str | None            # or a short run at this split, given with the log
    model_gap: tuple[str, ...] = ()                   # rows widened to a measured rate the model misses
    measured: tuple[tuple[str, float], ...] = ()      # (split, measured b/s) where logs ran them
    repeats: bool = False         # both splits ran and nothing else would help: repeated runs of each
    unknown: tuple[str, ...] = ()     # roles whose capacity is only a range or a bound and decides the pick
    rival: str | None = None          # the split that leads the best at some end of those ranges


@dataclass(frozen=True)
class LoaderCap:
    cap_bps: float
    starved_share: float
    at_cap: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Decision:
    verdict: Verdict
    rule: str
    recommended: str
    judged: str | None
    observed: str | None
    best: str
    runner_up: str | None
    margin: Margin | None
    gain_pct: float               # best split's projected lead over the judged split
    eta_gain_s: float | None      # remaining time saved at the best split (before restart cost)
    needs: Needs | None
    loader: LoaderCap | None
    sensitivity: Sensitivity
    queue: QueueAdvice | None
    evidence: Evidence
    settings: Settings
    n_splits: int

    @property
    def best_is_running(self) -> bool:
        """The best split is the one the log runs and the judged one (``--roles``) is another: reaching
        the best needs no restart (moving to the judged split would)."""
        return (self.evidence.basis != "numbers" and self.observed is not None and self.best == self.observed
                and self.judged is not None and self.judged != self.observed)

    @property
    def described(self) -> str:
        """The split the first reason describes (the JSON's ``judged``): the judged split, else (no
        split of G judged nor observed) the recommended one."""
        return self.judged or self.recommended


def _split(df: pd.DataFrame, label: str, p: str, c: str) -> tuple[int, int]:
    return int(df.at[label, f"n_{p}"]), int(df.at[label, f"n_{c}"])


def _margin(df: pd.DataFrame, a: str, b: str | None) -> Margin | None:
    if b is None:
        return None
    hi, lo = (a, b) if df.at[a, "bps"] >= df.at[b, "bps"] else (b, a)
    lead = 100.0 * (df.at[hi, "bps"] / df.at[lo, "bps"] - 1.0) if df.at[lo, "bps"] > 0 else math.inf
    stable = bool(df.at[hi, "bps_low"] > df.at[lo, "bps_high"])
    paired = lead_interval(df, hi, lo)
    return Margin(higher=hi, lower=lo, stable=stable,
                  best_low=float(df.at[hi, "bps_low"]), runner_up_high=float(df.at[lo, "bps_high"]),
                  lead_pct=float(lead), separated=stable or (paired is not None and paired[0] > 0),
                  lead_low_pct=100.0 * paired[0] if paired else None,
                  lead_high_pct=100.0 * paired[1] if paired else None)


def could_trail(m: Margin) -> bool:
    """Whether the lower split could lead the higher one by more than RESOLVE_GAIN (95%)."""
    if m.lead_low_pct is not None:
        return m.lead_low_pct < -100 * RESOLVE_GAIN
    return m.runner_up_high > (1 + RESOLVE_GAIN) * m.best_low


def _separated(df: pd.DataFrame, a: str, b: str) -> bool:
    """Whether the evidence separates split ``a`` (projected higher) from ``b`` (see Margin)."""
    return _margin(df, a, b).separated


def _needs(df: pd.DataFrame, ev: Evidence, hi: str, lo: str, run_at: str | None) -> Needs:
    """What would separate them: a log long enough (only its sampling error shrinks with length),
    settling, or a short run at the other split."""
    pair = (hi, lo)
    gaps = tuple(x for x in pair if bool(df.at[x, "widened"]))
    measured = tuple((x, float(df.at[x, "observed_bps"])) for x in pair if bool(df.at[x, "observed"]))
    factor = extra = None
    parts = lead_parts(df, hi, lo)
    if parts is not None:
        # the test that separates them is the lead's interval (Margin.separated); a log f times as
        # long divides its sampling variance by f, and nothing else: where the rest alone keeps the
        # interval reaching 0, no length of this log separates them
        room = parts.log_lead + parts.shift_lo
        left = (room / Z_95) ** 2 - parts.fixed_var if room > 0 else -1.0
        if left > 0 and parts.sampling_var > 0 and not gaps:
            factor = max(parts.sampling_var / left, 1.0)
            extra = ev.steady_s * (factor - 1.0)
    elif not gaps:   # no paired form: the two intervals, as if all of them shrank with length
        gap = df.at[hi, "bps"] - df.at[lo, "bps"]
        width = (df.at[hi, "bps"] - df.at[hi, "bps_low"]) + (df.at[lo, "bps_high"] - df.at[lo, "bps"])
        if gap > 0 and width > 0:
            factor = max((width / gap) ** 2, 1.0)
            extra = ev.steady_s * (factor - 1.0)
    if run_at is not None and bool(df.at[run_at, "observed"]):
        run_at = None
    # both ran: what keeps them apart is each run's own level, which only more runs of each measure
    repeats = len(measured) == 2 and factor is None and run_at is None and not gaps
    return Needs(longer_factor=factor, extra_steady_s=extra, settle=not ev.settled or ev.drifting, run_at=run_at,
                 model_gap=gaps, measured=measured, repeats=repeats)


def _loader(fit: PipelineFit, df: pd.DataFrame) -> LoaderCap | None:
    if not (fit.loader.input_bound and fit.loader.capacity_bps):
        return None
    cap = fit.loader.capacity_bps
    at = tuple(str(lbl) for lbl, x in df["bps"].items() if x >= (1 - LOADER_TIE) * cap)
    return LoaderCap(cap_bps=cap, starved_share=fit.loader.producer_starved_share, at_cap=at)


def corner_rival(df: pd.DataFrame, best: str, producer: str) -> str | None:
    """Of the splits that lead ``best`` by more than RESOLVE_GAIN at some corner of the capacity
    ranges, the nearest to it (fewest GPUs moved; then the largest lead): a short run there is the
    cheapest that could overturn the pick. None where the ranges do not move the pick."""
    cols = [k for k in ERR_CORNERS if k in df.columns]
    leads: dict[str, float] = {}
    for k in cols:
        at = df["bps"] * df[k].map(math.exp)
        if not at[best] > 0:
            continue
        for label, x in at.items():
            lead = x / at[best] - 1.0
            if label != best and lead > RESOLVE_GAIN:
                leads[str(label)] = max(leads.get(str(label), 0.0), lead)
    if not leads:
        return None
    n_best = int(df.at[best, f"n_{producer}"])
    return min(leads, key=lambda lbl: (abs(int(df.at[lbl, f"n_{producer}"]) - n_best), -leads[lbl]))


def _rules(df: pd.DataFrame, settings: Settings, ev: Evidence, judged: str | None, best: str,
           unknown: tuple[str, ...] = (), running: str | None = None) -> tuple[Verdict, str, str, Needs | None]:
    """(verdict, rule, recommended label, needs) by the ordered rules of the module docstring;
    ``unknown``: the roles whose capacity is a range or a bound; ``running``: the split the log runs
    (reaching it costs no restart)."""
    others = df.drop(index=best)["bps"]
    runner = str(others.idxmax()) if len(others) else None
    rival = corner_rival(df, best, settings.producer) if unknown else None
    if rival is not None:
        keep = judged if judged is not None and not settings.for_next_run else best
        return Verdict.CANNOT_TELL, "unknown-capacity", keep, Needs(
            longer_factor=None, extra_steady_s=None, settle=False,
            run_at=next((x for x in (rival, best) if not bool(df.at[x, "observed"])), None),   # a split not run
            unknown=unknown, rival=rival)
    if settings.for_next_run or judged is None:
        m = _margin(df, best, runner)
        if m is not None and not m.separated and (m.lead_pct >= 100 * RESOLVE_GAIN or could_trail(m)):
            return Verdict.CANNOT_TELL, "unresolved", best, _needs(df, ev, best, runner, runner)
        return Verdict.NEXT_RUN, ("next-run" if settings.for_next_run else "plan"), best, None
    overlap = best != judged and not _separated(df, best, judged)
    rival = judged if best != judged else runner
    if ev.thin and rival is not None and not _separated(df, best, rival):
        return Verdict.CANNOT_TELL, "thin-evidence", judged, _needs(df, ev, best, rival, rival if rival != judged
                                                                     else best)
    if best == judged:
        return Verdict.STAY, "already-best", judged, None
    if df.at[best, "bps"] < (1 + RESOLVE_GAIN) * df.at[judged, "bps"]:
        return Verdict.STAY, "small-gain", judged, None
    if overlap:
        return Verdict.CANNOT_TELL, "overlap", judged, _needs(df, ev, best, judged, best)
    eta_gain = df.at[judged, "eta_s"] - df.at[best, "eta_s"]
    if best != running and math.isfinite(eta_gain) and eta_gain <= settings.restart_cost_h * 3600.0:
        return Verdict.STAY, "restart-cost", judged, None
    return Verdict.SWITCH, "switch", best, None


def decide(fit: PipelineFit, splits: pd.DataFrame, settings: Settings, evidence: Evidence) -> Decision:
    """Apply the rules (module docstring) to the projected table."""
    p, c = fit.roles
    df = splits
    observed = next((str(lbl) for lbl, o in df["observed"].items() if o), None)
    ob0 = fit.observed[0]
    first = split_label(ob0.roles.get(p, 0), ob0.roles.get(c, 0))
    observed = first if first in df.index else observed
    judged = split_label(settings.roles[p], settings.roles[c]) if settings.roles else (
        first if first in df.index else None)
    best = str(df["bps"].idxmax())
    unknown = tuple(rf.role for rf in (fit.producer, fit.consumer) if rf.ranged)
    running = observed if evidence.basis != "numbers" else None
    verdict, rule, rec, needs = _rules(df, settings, evidence, judged, best, unknown, running)
    others = df.drop(index=rec)
    runner = str(others["bps"].idxmax()) if len(others) else None
    r = _split(df, rec, p, c)
    m_col = df[f"n_{c}"]
    fewer = str(others.loc[m_col[others.index] < r[1], "bps"].idxmax()) if (m_col[others.index] < r[1]).any() else None
    more = str(others.loc[m_col[others.index] > r[1], "bps"].idxmax()) if (m_col[others.index] > r[1]).any() else None
    sens = sensitivity(
        fit, settings, r, _split(df, runner, p, c) if runner else None,
        _split(df, fewer, p, c) if fewer else None, _split(df, more, p, c) if more else None,
        _split(df, judged, p, c) if judged else r,
        bottleneck_of=lambda s: str(df.at[split_label(*s), "bottleneck"]),
        capacity_of=lambda s, i: float(df.at[split_label(*s), f"cap_{(p, c)[i]}_bps"]))
    gain = 100.0 * (df.at[best, "bps"] / df.at[judged, "bps"] - 1.0) if judged and df.at[judged, "bps"] > 0 else 0.0
    eta_gain = float(df.at[judged, "eta_s"] - df.at[best, "eta_s"]) if judged else None
    return Decision(verdict=verdict, rule=rule, recommended=rec, judged=judged, observed=observed, best=best,
                    runner_up=runner, margin=_margin(df, rec, runner), gain_pct=float(gain),
                    eta_gain_s=eta_gain if eta_gain is not None and math.isfinite(eta_gain) else None,
                    needs=needs, loader=_loader(fit, df), sensitivity=sens,
                    queue=queue_advice(fit, settings, r), evidence=evidence, settings=settings, n_splits=len(df))
