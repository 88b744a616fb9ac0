"""The verdict, as data: an action with its odds, and cannot-tell only where a probe is worth buying.

Read from the rows (`advisor.project.rows.SplitRow`), the judged split J (``--roles``, else the
split the log ran, when in the table), the `~advisor.settings.Settings` and the log's
`~advisor.decide.evidence.Evidence`. B is the best projected split, R the recommended one, A its
runner-up; the odds are `advisor.decide.odds`'s (by remaining-job time where a switch restarts).
The first rule that fires decides (``rule``):

1. ``plan`` / ``next-run``: the run ended, ``--next-run``, or no split at this G observed nor
   judged: R is the Bayes action, no restart cost.
2. ``switch``: the Bayes action is not J and J's expected regret is at least ``RESOLVE_GAIN``.
3. Stay at J: ``already-best`` (B is J), ``small-gain`` (B's lead below ``RESOLVE_GAIN``),
   ``restart-cost`` (finishing at B saves no more than the restart, unless B is the split the
   log runs), ``expected-best`` (the odds leave J within the resolution or ahead).

Then the probe (`advisor.decide.probe`): where one is worth its cost the verdict is
``cannot-tell`` (rule ``probe``), ``action`` keeping the action without it. Beside the verdict:
the margin between R and A (`advisor.decide.odds.drawn_lead`), R's sensitivity
(`advisor.project.sensitivity`) and the queue advice at R (`advisor.project.queues`); the wording
(and the loader's cap, from the fit) is `advisor.decide.reasons`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import partial

from advisor.decide.evidence import Evidence
from advisor.decide.families import Domain, domain, shape_of
from advisor.decide.odds import (
    RESOLUTION,
    Odds,
    calibrated,
    draw_inputs,
    draw_rates,
    drawn_lead,
    effective,
    odds_of,
    slack_corners,
)
from advisor.decide.probe import MIN_SCV, Probe, ProbeCosts, ProbeNoise, best_probe
from advisor.model.chain import ERR_SAMPLING, ERR_SHARED
from advisor.model.params import PipelineFit
from advisor.project.queues import QueueAdvice, queue_advice
from advisor.project.rows import SplitRow, lead_parts
from advisor.project.sensitivity import Sensitivity, sensitivity
from advisor.project.table import split_label
from advisor.settings import Settings
from advisor.stats import Z_95

DrawnLead = Callable[[str, str], "tuple[float, float] | None"]  # split a's lead over b, 95%, from the odds' draws
RESOLVE_GAIN = RESOLUTION  # leads below 2% are within what the model resolves
_SAMPLING = tuple(ERR_SHARED.index(k) for k in ERR_SAMPLING)  # (producer, consumer) in the parts' order


class Verdict(str, Enum):
    STAY = "stay"
    SWITCH = "switch"
    NEXT_RUN = "next-run"
    CANNOT_TELL = "cannot-tell"


@dataclass(frozen=True)
class Margin:
    """Between the recommended split and the runner-up: ``higher`` and ``lower`` by projected b/s.

    ``stable``: the higher one's interval starts above the lower one's upper end. ``separated``:
    stable, or the lead's own 95% interval lies above 0: the 2.5% and 97.5% points of the lead over
    the odds' own draws (`advisor.decide.odds.drawn_lead`: the two projections share the run's level
    and the split slope, which cancel in the lead), so that the lead and the odds agree (issue 51)."""

    higher: str
    lower: str
    stable: bool
    best_low: float  # the higher one's interval start
    runner_up_high: float  # the lower one's interval end
    lead_pct: float  # the higher one's projected lead
    separated: bool = False
    lead_low_pct: float | None = None  # the lead's 95% interval (None: no paired form)
    lead_high_pct: float | None = None


@dataclass(frozen=True)
class Needs:
    """What evidence would settle a choice the log cannot make."""

    longer_factor: float | None  # a steady log this many times as long separates the two
    extra_steady_s: float | None  # that much more steady time
    settle: bool  # the log must first run past warm-up / drift
    run_at: str | None  # or a short run at this split, given with the log
    model_gap: tuple[str, ...] = ()  # rows widened to a measured rate the model misses
    measured: tuple[tuple[str, float], ...] = ()  # (split, measured b/s) where logs ran them
    repeats: bool = False  # both splits ran and nothing else would help: repeated runs of each


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
    gain_pct: float  # best split's projected lead over the judged split
    eta_gain_s: float | None  # remaining time saved at the best split (before restart cost)
    needs: Needs | None
    sensitivity: Sensitivity
    queue: QueueAdvice | None
    evidence: Evidence
    settings: Settings
    odds: Odds  # every split's odds from one joint draw (`advisor.decide.odds`)
    probe: Probe | None  # the best candidate probe and its worth (`advisor.decide.probe`)
    action: Verdict  # the action without a probe (the verdict, unless cannot-tell)
    # where the fit lies in the odds' host domain (`advisor.decide.odds.calibrated`): its shape among the
    # calibrated families (`advisor.decide.families`), which decides the calibrated draw; None elsewhere
    domain: Domain | None = None
    # the table's rows it was decided from, by label (`advisor.project.rows`): what the sentences read
    rows: Mapping[str, SplitRow] = field(default_factory=dict, repr=False, compare=False)

    @property
    def p_best(self) -> float:
        """How likely the recommended split is within the resolution (2%) of the best (0-1)."""
        return self.odds.of(self.recommended).p_best

    @property
    def expected_regret_pct(self) -> float:
        """The recommended split's expected shortfall against the best, in % of the best."""
        return self.odds.of(self.recommended).regret_pct

    @property
    def expected_gain_pct(self) -> float | None:
        """The recommended split's expected lead: over the judged split where the verdict
        switches, else over the best other split (negative where it trails)."""
        if self.odds.runner_up is None:
            return None  # one split: nothing to gain over
        if self.verdict is Verdict.SWITCH and self.judged is not None and self.judged != self.recommended:
            if not self.odds.of(self.judged).value_bps > 0:
                return None
            return self.odds.gain_over(self.recommended, self.judged)  # within what the intervals allow
        o, rec = self.odds, self.recommended
        return o.gain_over(rec, o.best if o.best != rec else o.runner_up)  # over the best other split

    @property
    def close_call(self) -> bool:
        """The two best splits' expected regrets are both below the resolution: either will do."""
        return self.odds.close_call

    @property
    def best_is_running(self) -> bool:
        """The best split is the one the log runs and the judged one (``--roles``) is another: reaching
        the best needs no restart (moving to the judged split would)."""
        return (
            self.evidence.basis.logged
            and self.observed is not None
            and self.best == self.observed
            and self.judged is not None
            and self.judged != self.observed
        )

    @property
    def described(self) -> str:
        """The split the first reason describes (the JSON's ``judged``): the judged split, else (no
        split of G judged nor observed) the recommended one."""
        return self.judged or self.recommended


def _margin(rows: Mapping[str, SplitRow], a: str, b: str | None, drawn: DrawnLead) -> Margin | None:
    """The margin between ``a`` and ``b``; the lead's interval from the odds' draws (the odds and
    the lead then agree)."""
    if b is None:
        return None
    hi, lo = (rows[a], rows[b]) if rows[a].bps >= rows[b].bps else (rows[b], rows[a])
    lead = 100.0 * (hi.bps / lo.bps - 1.0) if lo.bps > 0 else math.inf
    stable = bool(hi.bps_low > lo.bps_high)
    paired = drawn(hi.label, lo.label)
    return Margin(
        higher=hi.label,
        lower=lo.label,
        stable=stable,
        best_low=hi.bps_low,
        runner_up_high=lo.bps_high,
        lead_pct=float(lead),
        separated=stable or (paired is not None and paired[0] > 0),
        lead_low_pct=100.0 * paired[0] if paired else None,
        lead_high_pct=100.0 * paired[1] if paired else None,
    )


def _needs(rows: Mapping[str, SplitRow], ev: Evidence, hi: str, lo: str, run_at: str | None) -> Needs:
    """What would separate them: a log long enough (only its sampling error shrinks with length),
    settling, or a short run at the other split."""
    a, b = rows[hi], rows[lo]
    gaps = tuple(r.label for r in (a, b) if r.widened)
    measured = tuple((r.label, r.observed_bps) for r in (a, b) if r.observed)
    factor = extra = None
    parts = lead_parts(a, b)
    if parts is not None:
        # the test that separates them is the lead's interval (Margin.separated); a log f times as
        # long divides its sampling variance by f, and nothing else: where the rest alone keeps the
        # interval reaching 0, no length of this log separates them
        room = parts.log_lead + parts.shift_lo
        left = (room / Z_95) ** 2 - parts.fixed_var if room > 0 else -1.0
        if left > 0 and parts.sampling_var > 0 and not gaps:
            factor = max(parts.sampling_var / left, 1.0)
            extra = ev.steady_s * (factor - 1.0)
    elif not gaps:  # no paired form: the two intervals, as if all of them shrank with length
        gap = a.bps - b.bps
        width = (a.bps - a.bps_low) + (b.bps_high - b.bps)
        if gap > 0 and width > 0:
            factor = max((width / gap) ** 2, 1.0)
            extra = ev.steady_s * (factor - 1.0)
    if run_at is not None and rows[run_at].observed:
        run_at = None
    # both ran: what keeps them apart is each run's own level, which only more runs of each measure
    repeats = len(measured) == 2 and factor is None and run_at is None and not gaps
    return Needs(
        longer_factor=factor,
        extra_steady_s=extra,
        settle=not ev.settled or ev.drifting,
        run_at=run_at,
        model_gap=gaps,
        measured=measured,
        repeats=repeats,
    )


def _action(
    rows: Mapping[str, SplitRow],
    settings: Settings,
    judged: str | None,
    best: str,
    odds: Odds,
    running: str | None = None,
) -> tuple[Verdict, str, str]:
    """(action, rule, recommended label) by the ordered rules of the module docstring, before
    the probe's worth is weighed; ``running``: the split the log runs (reaching it costs no restart)."""
    if settings.for_next_run or judged is None:
        return Verdict.NEXT_RUN, ("next-run" if settings.for_next_run else "plan"), odds.best
    if odds.best != judged and odds.of(judged).regret_pct >= 100 * RESOLVE_GAIN:
        return Verdict.SWITCH, "switch", odds.best
    if best == judged:
        return Verdict.STAY, "already-best", judged
    if rows[best].bps < (1 + RESOLVE_GAIN) * rows[judged].bps:
        return Verdict.STAY, "small-gain", judged
    eta_gain = rows[judged].eta_s - rows[best].eta_s
    if best != running and math.isfinite(eta_gain) and eta_gain <= settings.restart_cost_h * 3600.0:
        return Verdict.STAY, "restart-cost", judged
    return Verdict.STAY, "expected-best", judged


def probe_noise(fit: PipelineFit, rows: Mapping[str, SplitRow], ev: Evidence) -> ProbeNoise:
    """Each split's per-time noise as a probe would measure it (`advisor.decide.probe`), the
    segments' run-to-run level, and how long the logs already ran each split of the table.
    """
    scv = max(fit.producer.busy_scv, fit.consumer.busy_scv)
    steady = ev.steady_s  # 0 from bare numbers
    ip, ic = _SAMPLING
    var_s = {}
    for label, r in rows.items():  # the larger of the log's sampling error and a count of batches
        a, b = (0.0, 0.0) if r.parts is None else (r.parts.shared_log_per_se[ip], r.parts.shared_log_per_se[ic])
        from_log = (a**2 + b**2) * steady if steady > 0 else 0.0
        noise = max(from_log, max(scv, MIN_SCV) / r.bps if r.bps > 0 else 0.0)
        var_s[label] = noise if math.isfinite(noise) else 0.0
    ran: dict[str, float] = {}
    if fit.source.logged:
        p, c = fit.roles
        for o in fit.observed:
            lbl = split_label(o.roles.get(p, 0), o.roles.get(c, 0))
            if lbl in rows and rows[lbl].observed:
                ran[lbl] = max(ran.get(lbl, 0.0), float(o.steady.duration_s))
    return ProbeNoise(var_s=var_s, level_var=fit.contention.run_se**2, ran_s=ran)


def _weigh(
    fit: PipelineFit,
    rows: Mapping[str, SplitRow],
    settings: Settings,
    ev: Evidence,
    judged: str | None,
    best: str,
    running: str | None = None,
    calibrate: bool = False,
) -> tuple[Verdict, str, str, Odds, Probe | None, DrawnLead]:
    """The odds (the calibrated draw where ``calibrate``), the action, and the probe against it:
    (action, rule, recommended, odds, probe, the lead of one split over another from the same
    draws)."""
    in_run = judged is not None and not settings.for_next_run
    restart_s = settings.restart_cost_h * 3600.0
    inp = draw_inputs(list(rows.values()), calibrate, slack_corners(fit))
    rates = draw_rates(inp)
    # the split that needs no restart: the judged one, but the one the log runs where --roles judges
    # another and the running split is the best (reaching it is keeping it)
    free = running if in_run and running is not None and best == running else judged
    odds = odds_of(rates, inp, judged=free if in_run else None, restart_s=restart_s if in_run else 0.0)
    action, rule, rec = _action(rows, settings, judged, best, odds, running)
    values = effective(rates, inp, odds.judged, odds.restart_s)
    value = odds.of(rec).value_bps
    remaining = inp.left_batches / value if inp.left_batches and value > 0 else None
    probe = best_probe(
        rates,
        values,
        inp,
        odds,
        rec,
        probe_noise(fit, rows, ev),
        ProbeCosts(remaining_s=remaining, restart_s=restart_s, gpus=settings.gpus),
    )
    return action, rule, rec, odds, probe, partial(drawn_lead, values, inp)


def _fastest(rows: Mapping[str, SplitRow], labels: Iterable[str]) -> str | None:
    """The label of the highest projected rate among ``labels`` (the first of equals; NaN rates
    skipped), None where there is none."""
    rated = (label for label in labels if not math.isnan(rows[label].bps))
    return max(rated, key=lambda label: rows[label].bps, default=None)


def decide(fit: PipelineFit, rows: Mapping[str, SplitRow], settings: Settings, evidence: Evidence) -> Decision:
    """Apply the rules (module docstring) to the projected table."""
    p, c = fit.roles
    ob0 = fit.observed[0]
    first = split_label(ob0.roles.get(p, 0), ob0.roles.get(c, 0))
    first = first if first in rows else None  # the first log's split, where the table has it
    observed = first or next((label for label, r in rows.items() if r.observed), None)
    judged = split_label(settings.roles[p], settings.roles[c]) if settings.roles else first
    best = _fastest(rows, rows)
    running = observed if evidence.basis.logged else None
    dom = domain(shape_of(fit, settings, evidence.models)) if calibrated(fit) else None
    inside = dom is not None and dom.inside
    action, rule, rec, odds, probe, lead = _weigh(fit, rows, settings, evidence, judged, best, running, inside)
    verdict, needs = action, None
    if probe is not None and probe.worth_it:  # cannot-tell only where the probe is worth its cost
        verdict, rule = Verdict.CANNOT_TELL, "probe"
        hi, lo = sorted(probe.splits, key=lambda x: -rows[x].bps)
        needs = _needs(rows, evidence, hi, lo, probe.split)
    others = [label for label in rows if label != rec]
    runner = _fastest(rows, others)
    sens = sensitivity(fit, settings, rows, rec, judged or rec)
    gain = 100.0 * (rows[best].bps / rows[judged].bps - 1.0) if judged and rows[judged].bps > 0 else 0.0
    eta_gain = rows[judged].eta_s - rows[best].eta_s if judged else None
    return Decision(
        verdict=verdict,
        rule=rule,
        recommended=rec,
        judged=judged,
        observed=observed,
        best=best,
        runner_up=runner,
        margin=_margin(rows, rec, runner, lead),
        gain_pct=float(gain),
        eta_gain_s=eta_gain if eta_gain is not None and math.isfinite(eta_gain) else None,
        needs=needs,
        sensitivity=sens,
        queue=queue_advice(fit, settings, rows[rec].counts),
        evidence=evidence,
        settings=settings,
        odds=odds,
        probe=probe,
        action=action,
        rows=rows,
        domain=dom,
    )
