"""The one public entry: logs (or bare numbers) in, an :class:`Advice` out.

``advise(paths)`` runs load -> fit -> settings -> project -> reconcile -> evidence -> decide, each
wing once with the record the one before produced, and collects the caveats: the typed warnings
the reading and the fit raise, then the sentences the later stages return. The CLI, the notebooks
and the plots all call it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisor.decide.evidence import Evidence, gather
from advisor.decide.observed import ObservedSplit, observed_split
from advisor.decide.odds_text import odds_sentence
from advisor.decide.reasons import basis_text, holds_unless, placement_reasons, reasons
from advisor.decide.rules import Decision, decide
from advisor.errors import AdvisorWarning
from advisor.fit.pipeline import fit_from_numbers, fit_pipeline, gpu_priors_text
from advisor.ingest.load import load_logs
from advisor.ingest.runlog import RunLog
from advisor.measure.measured import measure_logs
from advisor.model.link import Placement
from advisor.model.params import PipelineFit, Source
from advisor.project.exact import (
    MAX_REFINED,
    REFINE_BUDGET,
    Refinement,
    refine_weak_spots,
    refined_ratios,
    simulate_splits,
)
from advisor.project.linked import refine_placements
from advisor.project.model_error import carry_model_error, model_error
from advisor.project.probed import compare_probed
from advisor.project.rows import SplitRow
from advisor.project.table import Reconciliation, local_placement, project, reconcile, split_label
from advisor.settings import (
    ENGINE_SCALING_SE,
    LINK_SE,
    Capacity,
    Logged,
    Options,
    Settings,
    build_settings,
    role_count,
    role_plural,
    units_text,
)

EXACT_GAP_WARN_PCT = 3.0
CONTENDER_PASSES = 3  # decide again at most twice where the pick's contenders were left analytic
CROSSING_GAP = 0.05  # crossing share measured vs uniform mixing: a caveat past 5 points


@dataclass(frozen=True)
class Recommendation:
    """The decision in words: the recommended split, the reasons and what the verdict holds
    unless (``Advice.recommendation``; the JSON's ``recommendation`` lays it out)."""

    roles: Mapping[str, int]
    verdict: str
    reasons: tuple[str, ...]
    holds_unless: tuple[str, ...]
    gain_pct: float
    p_best: float | None = None  # the recommended split within 2% of the best (0-1)
    expected_gain_pct: float | None = None  # `advisor.decide.rules.Decision.expected_gain_pct`
    expected_regret_pct: float | None = None  # expected shortfall against the best, %
    close_call: bool = False  # the two best splits both within the resolution


@dataclass(frozen=True)
class Advice:
    """Advice for one job: ``rows`` (one `SplitRow` per split; ``splits`` the same as a DataFrame),
    ``decision`` (the verdict as data), ``recommendation`` (the same in words), ``observed``,
    ``settings`` and the caveats in ``warnings``."""

    run: str
    fit: PipelineFit
    observed: ObservedSplit
    decision: Decision
    warnings: tuple[str, ...]
    reconciliation: tuple[Reconciliation, ...] = ()
    logs: tuple[RunLog, ...] = field(default=(), repr=False)
    gate: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        d = self.decision
        return (
            f"<Advice {self.run!r}: {self.gpus} GPUs, {d.verdict.value} {d.recommended} "
            f"({self.rows[d.recommended].bps:.3g} b/s), {len(self.rows)} splits, "
            f"{len(self.warnings)} caveat(s)>"
        )

    settings = property(lambda self: self.decision.settings)
    gpus = property(lambda self: self.settings.gpus)
    roles = property(lambda self: self.fit.roles)

    @property
    def rows(self) -> Mapping[str, SplitRow]:
        """The table's rows, by label (`advisor.project.rows`): what decide/ and present/ read."""
        return self.decision.rows

    @cached_property
    def splits(self) -> pd.DataFrame:
        """The table as a DataFrame indexed by "N-M" (columns documented in `advisor.project.table`)."""
        return splits_frame(tuple(self.rows.values()))

    @property
    def probed(self) -> tuple[str, ...]:
        """The splits a probe measured, compared directly (`advisor.project.probed`); () for none."""
        return tuple(label for label, r in self.rows.items() if r.probe_segments > 0)

    @cached_property
    def recommendation(self) -> Recommendation:
        d = self.decision
        p, c = self.roles
        n, m = self.rows[d.recommended].counts
        return Recommendation(
            roles={p: n, c: m},
            verdict=d.verdict.value,
            reasons=tuple(
                reasons(d, self.fit, self.observed)
                + [x for x in (odds_sentence(d, self.probed),) if x]
                + placement_reasons(d, self.fit)
            ),
            holds_unless=tuple(holds_unless(d, self.fit)),
            gain_pct=d.gain_pct,
            p_best=d.p_best,
            expected_gain_pct=d.expected_gain_pct,
            expected_regret_pct=d.expected_regret_pct,
            close_call=d.close_call,
        )

    def judge(self, roles: Mapping[str, int]) -> Advice:
        """The same advice with ``roles`` as the judged split (the table is unchanged; the decision
        is re-derived).

        Args:
            roles: role -> engines of the split to judge, e.g. ``{"target": 6, "drafter": 2}``.

        Returns:
            A new `Advice`, its settings and decision for that split.

        Raises:
            SettingsError: the split names other roles or is not one of G.
        """
        s = build_settings(replace(self.settings.options, roles=roles), self.settings.logged)
        return replace(self, decision=decide(self.fit, self.rows, s, self.decision.evidence))

    def split_row(self, roles: Mapping[str, int]) -> pd.Series:
        """One split's row of the table (``splits``).

        Args:
            roles: role -> engines of the split, e.g. ``{"target": 6, "drafter": 2}``.

        Returns:
            The row, indexed by the table's columns (`advisor.project.table`).

        Raises:
            KeyError: the split is not among the projected ones.
        """
        p, c = self.roles
        label = split_label(roles[p], roles[c])
        if label not in self.splits.index:
            raise KeyError(f"no split {label} among the projected ones")
        return self.splits.loc[label]


def splits_frame(rows: Sequence[SplitRow]) -> pd.DataFrame:
    """The rows as the user's DataFrame, indexed by "N-M" (columns in `advisor.project.table`)."""
    probed = any(r.probe_segments for r in rows)
    return pd.DataFrame([r.columns(probed) for r in rows], index=pd.Index([r.label for r in rows], name="split"))


def _widen_for_drift(rows: tuple[SplitRow, ...], ev: Evidence) -> tuple[tuple[SplitRow, ...], list[str]]:
    """A pace that moved by d% inside the window may move as much again: widen every interval."""
    d = min(abs(ev.drift_pct) / 100.0, 0.9) if ev.drifting or not ev.settled else 0.0
    if d <= 0:
        return rows, []
    x = np.array([r.bps for r in rows], float)
    low = np.fmin(np.array([r.bps_low for r in rows], float), x) * (1 - d)
    high = np.fmax(np.array([r.bps_high for r in rows], float), x) * (1 + d)
    note = (
        f"the pace moved {ev.drift_pct:+.1f}% between the halves of the steady window: every interval is widened "
        f"by {100 * d:.0f}%"
    )
    return tuple(replace(r, bps_low=float(a), bps_high=float(b)) for r, a, b in zip(rows, low, high)), [note]


def _warn_assumptions(fit: PipelineFit, settings: Settings) -> list[str]:
    """The caveats the options and the fit carry before anything is projected."""
    out: list[str] = []
    c = fit.roles[1]
    if settings.extrapolated_tokens:
        lo, hi = settings.logged.tokens_range
        out.append(
            f"--token-budget {settings.token_budget}: batches of ~{settings.tokens_per_batch:.0f} tokens lie "
            f"outside the logged {lo:.0f}-{hi:.0f}, so the step-time line is extrapolated; a short log at the new "
            f"budget, given with the others, pins it down"
        )
    out += _warn_engines(fit, settings)
    out += _warn_slope_at_another_g(fit, settings)
    judged_m = settings.roles[c] if settings.roles else fit.observed[0].roles.get(c, 1)
    if judged_m <= 1 and not fit.sync.measured and fit.sync.sync_every > 0:
        out.append(
            f"only {role_count(judged_m, c)} observed: the sync cost of several {role_plural(c)} is unknown and "
            f"assumed 0; see 'holds unless' for how the verdict depends on per-{c} scaling"
        )
    return out


def _warn_slope_at_another_g(fit: PipelineFit, settings: Settings) -> list[str]:
    """The fit's caveat gives how step times move with the split at the G the logs ran; a table at
    another G does not carry that slope (`advisor.model.params.ContentionFit.scale`: one producer
    more is one consumer fewer only at that G), so say so beside it."""
    ct = fit.contention
    if ct.at_any_g or settings.gpus_per_worker != (1, 1) or settings.gpus == ct.gpus:
        return []
    if not (ct.measured or any(ct.prior_k)):
        return []
    p = fit.roles[0]
    return [
        f"the step-time slope with the split (each extra {p} changing a {p}'s step, above) is for "
        f"{settings.units(ct.gpus)}, where one more {p} is one {fit.roles[1]} fewer; at {settings.units()} no log "
        f"shows how step times move with the split, so every split keeps the logged step times (a role's capacity "
        f"scales with its count) and the intervals carry no slope or lone-worker term; logs at two splits of "
        f"{settings.units()} measure it"
    ]


def _warn_engines(fit: PipelineFit, settings: Settings) -> list[str]:
    """What the log cannot tell about engines of another size and about the link (caveats)."""
    out: list[str] = []
    for i, role in enumerate(fit.roles):
        k, k_log = settings.gpus_per_worker[i], settings.log_gpus_per_worker[i]
        if k != k_log:
            out.append(
                f"{role} engines of {k} GPUs projected from a log of {k_log}-GPU engines: an engine's rate is "
                f"taken as {k}/{k_log} x {settings.engine_scaling[i]:g} (--engine-scaling, given) of the logged "
                f"one; the intervals span +-{100 * ENGINE_SCALING_SE:.0f}% of it; a short log at {k} GPUs per "
                "engine measures it"
            )
    if settings.nodes <= 1:
        return out
    if not settings.link_bytes_s or not fit.hs_bytes_per_token:
        logged = fit.source.logged
        what = (
            "its bandwidth is unknown"
            if fit.hs_bytes_per_token
            else "the log has no hs_bytes_per_token"
            if logged
            else "no --hs-bytes-per-token was given"
        )
        give = (
            "give --link-gbytes-s (and hs_bytes_per_token in the header) or a log whose batches crossed nodes"
            if logged
            else "give --link-gbytes-s and --hs-bytes-per-token"
        )
        out.append(
            f"{settings.nodes} nodes of {settings.gpus_per_node} GPUs: {what}, so the link between nodes is taken "
            f"as free; {give}"
        )
    out += _warn_crossing(fit)
    out += _warn_local_sync(fit, settings)
    if settings.link_source == "measured":
        return out
    if settings.link_source is not None:
        whence = "given (--link-gbytes-s)" if settings.link_source == "given" else "the header's link_bytes_s"
        out.append(
            f"{settings.nodes} nodes: the link's {settings.link_bytes_s / 1e9:.3g} GB/s is {whence}, not measured "
            f"from batches that crossed nodes{' in this log' if fit.source.logged else ''}; the intervals span "
            f"+-{100 * LINK_SE:.0f}% of it"
        )
    return out


def _warn_local_sync(fit: PipelineFit, settings: Settings) -> list[str]:
    """Node-local pipelines sync their drafters over the link: a caveat where the log cannot size that
    sync (no sync, or sync events without bytes) and some split can run node-locally."""
    if not settings.link_bytes_s or (fit.sync.sync_every > 0 and fit.sync.bytes_per_sync):
        return []
    if not any(local_placement(settings, n, m) is not None for n, m in settings.engine_pairs()):
        return []
    c = fit.roles[1]
    if not fit.source.logged:
        why = f"bare numbers give no bytes for the {c}s' sync"
    elif fit.sync.sync_every <= 0:
        why = f"the log's {c}s do not sync (sync_every 0)"
    else:
        why = "its sync events carry no bytes"
    return [
        f"{settings.nodes} nodes: {c}s on several nodes (node-local pipelines among them) sync their weights over "
        f"the link, but {why}, so no sync time on the link is counted; 'holds unless' says how much per-{c} "
        f"scaling the verdict needs, and a log with sync events (and their bytes) measures it"
    ]


def _warn_crossing(fit: PipelineFit) -> list[str]:
    """Where the log's batches crossed nodes: its crossing share against uniform mixing, the
    analytic link stage's assumption (`advisor.model.link`)."""
    lk = fit.link
    if not lk.producers_by_node or not lk.steps_known:
        return []
    pl = Placement(producers=lk.producers_by_node, consumers=lk.consumers_by_node)
    uniform, seen = pl.crossing_share(), lk.first_crossed / lk.steps_known
    if abs(seen - uniform) <= CROSSING_GAP:
        return []
    return [
        f"{fit.observed[0].path}: {seen:.0%} of the drafters' batches crossed nodes where uniform mixing (the "
        f"link stage's assumption: a batch's origin independent of its drafter) gives {uniform:.0%}; the "
        "shared queue's order ties origin to drafter, so at placements that mix targets and drafters on a "
        "node the link carries more (or less) than projected; compare placements by short logs of each"
    ]


def _analytic(fit: PipelineFit, logs: Sequence[RunLog], settings: Settings) -> tuple[tuple[SplitRow, ...], bool]:
    """The table before any refinement of the contenders, and whether the log's step times can drive
    an exact simulation of it (step events at the log's own budget, on one node); across nodes the
    queue and the link already simulated (`advisor.project.linked`)."""
    steps_at_budget = fit.source is Source.STEPS and settings.own_budget
    if steps_at_budget and settings.nodes > 1:
        return refine_placements(fit, tuple(logs), settings, project(fit, settings)), False
    return project(fit, settings), steps_at_budget


def _project(
    fit: PipelineFit,
    logs: Sequence[RunLog],
    settings: Settings,
    base: tuple[tuple[SplitRow, ...], bool],
    known: Refinement | None = None,
    force: tuple[int, ...] = (),
) -> tuple[tuple[SplitRow, ...], Refinement | None, list[str]]:
    """The table of every split: the analytic projection (``base``, `_analytic`), its contenders
    simulated exactly where the chain is weak (`advisor.project.exact.refine_weak_spots`: one method
    for every contender; ``known`` kept, ``force`` added), and with ``--exact`` checked against the
    log's own service times."""
    splits, simulable = base
    refinement, notes = None, []
    if simulable:
        refinement = refined_ratios(fit, tuple(logs), splits, hs_cap=settings.hs_cap, force=force, known=known)
        splits = refine_weak_spots(splits, refinement)
        notes += _warn_capped(splits, refinement)
    if settings.options.exact and not (fit.source is Source.STEPS and settings.own_budget):
        notes.append("--exact needs step events and the log's own token budget; skipped")
    elif settings.options.exact:
        splits, gap = _exact(fit, logs, settings, splits)
        notes += gap
    return splits, refinement, notes


def _warn_capped(rows: tuple[SplitRow, ...], refinement: Refinement) -> list[str]:
    """A caveat where the caps on simulation left contenders analytic (their rows' ``method``)."""
    capped = [rows[i].label for i in refinement.capped]
    if not capped:
        return []
    shown = ", ".join(capped[:6]) + (f" and {len(capped) - 6} more" if len(capped) > 6 else "")
    return [
        f"{len(capped)} of the splits whose interval reaches the best's lower end are projected by the analytic "
        f"chain, not simulated (method 'analytic-capped': {shown}): the simulation is capped at {MAX_REFINED} splits "
        f"and {REFINE_BUDGET:,} batches; where simulated, the chain and the simulation differed by up to "
        f"{100 * math.expm1(refinement.chain_gap_log):.1f}%"
    ]


def _unmatched(rows: tuple[SplitRow, ...], decision: Decision, refinement: Refinement | None) -> tuple[int, ...]:
    """Rows whose interval reaches the recommended split's lower end but whose method is analytic while
    others are simulated: the contenders of the decided pick that the screen missed (positions)."""
    if refinement is None or not refinement.ratios:
        return ()
    floor = decision.rows[decision.recommended].bps_low
    return tuple(i for i, r in enumerate(rows) if r.bps_high >= floor and r.method == "analytic")


def _exact(
    fit: PipelineFit, logs: Sequence[RunLog], settings: Settings, rows: tuple[SplitRow, ...]
) -> tuple[tuple[SplitRow, ...], list[str]]:
    """The rows with the exact simulation's rates, and a caveat where it and the analytic model differ."""
    out = simulate_splits(fit, tuple(logs), rows, hs_cap=settings.hs_cap)
    gaps = [r for r in out if not math.isnan(r.exact_gap_pct)]
    worst = max(gaps, key=lambda r: abs(r.exact_gap_pct), default=None)
    if worst is None or abs(worst.exact_gap_pct) <= EXACT_GAP_WARN_PCT:
        return out, []
    return out, [
        f"the analytic model and the exact simulation differ by {worst.exact_gap_pct:+.1f}% at {worst.label}: trust "
        "the simulation there"
    ]


def _evidence(fit: PipelineFit, logs: Sequence[RunLog]) -> tuple[Evidence, list[str]]:
    """What the first log can carry (`advisor.decide.evidence`), with a caveat when it is thin."""
    ev = gather(fit, tuple(logs))
    if not (ev.thin and fit.source.logged):
        return ev, []
    return ev, [
        f"{fit.observed[0].path}: thin evidence: {'; '.join(ev.why_thin())}; the intervals cover sampling noise "
        "only, so treat the projections as provisional"
    ]


def _caveats(caught: Sequence[warnings.WarningMessage]) -> list[str]:
    """Every typed warning's text, in the order raised."""
    return [str(w.message) for w in caught if issubclass(w.category, AdvisorWarning)]


def _sized(fit: PipelineFit, settings: Settings, rows: tuple[SplitRow, ...]) -> tuple[SplitRow, ...]:
    """The table's ETAs from ``--job-hours`` where given: the rest of the job (for a next run the
    whole job) takes that long at the split the log runs (its row's rate, else the log's measured
    rate; from bare numbers the given split's), and as many batches at every other split."""
    if settings.job_s is None:
        return rows
    p, c = fit.roles
    ob = fit.observed[0]
    label = split_label(ob.roles.get(p, 0), ob.roles.get(c, 0))
    here = next((r.bps for r in rows if r.label == label), ob.bps)
    left = settings.job_s * (here if here > 0 else ob.bps)
    return tuple(replace(r, eta_s=left / r.bps if r.bps > 0 else math.nan) for r in rows)


def _finish(fit: PipelineFit, logs: Sequence[RunLog], settings: Settings, run: str, caught: Sequence[str]) -> Advice:
    """From the fit on: project -> reconcile -> the model's self-check -> evidence -> decide, then the
    Advice; again with the decided pick's contenders simulated where the first pass left one of them
    analytic beside simulated rivals (one method for every contender). ``caught``: the caveats of
    the reading and the fit, before this advice's own."""
    with warnings.catch_warnings():  # a library's notes are no caveats: every caveat here is returned
        warnings.simplefilter("ignore")
        notes = [*caught, *_warn_assumptions(fit, settings)]
        base = _analytic(fit, logs, settings)
        ev, thin = _evidence(fit, logs)
        refinement, force = None, ()
        for last in (False,) * (CONTENDER_PASSES - 1) + (True,):
            splits, refinement, this_pass = _project(fit, logs, settings, base, refinement, force)
            splits, recon = reconcile(fit, settings, splits)
            splits = _sized(fit, settings, compare_probed(fit, splits))
            splits = carry_model_error(splits, model_error({r.label: r for r in splits}, recon))
            this_pass += [r.caveat for r in recon if r.caveat] + thin
            if not any(r.probe_segments for r in splits):  # a probe's rounds carry the drift in its rows' noise
                splits, drift = _widen_for_drift(splits, ev)
                this_pass += drift
            rows = {r.label: r for r in splits}
            decision = decide(fit, rows, settings, ev)
            force = () if last else _unmatched(splits, decision, refinement)
            if not force:  # only the kept pass's caveats count
                notes += this_pass
                break
        observed = observed_split(fit, settings, rows)
    return Advice(
        run=run,
        fit=fit,
        observed=observed,
        decision=decision,
        warnings=tuple(dict.fromkeys(notes)),
        reconciliation=recon,
        logs=tuple(logs),
    )


@dataclass(frozen=True)
class Fitted:
    """Logs read and fitted once, before any option: `advise` under one `Options` or several.

    ``caught`` holds the warnings the reading and the fit raised (caveats of every advice made
    from it)."""

    logs: tuple[RunLog, ...]
    fit: PipelineFit
    caught: tuple[warnings.WarningMessage, ...] = field(default=(), repr=False)

    @property
    def logged(self) -> Logged:
        """What the logs showed, that an option not given falls back to."""
        head, fit = self.logs[0].header, self.fit
        return Logged(
            roles=fit.roles,
            gpus=head.gpus,
            hs_cap=fit.hs_cap,
            tokens_mean=fit.tokens_mean,
            tokens_range=fit.tokens_range,
            token_budget=head.token_budget,
            run_ended=self.logs[0].end is not None,
            cpu=head.extra.get("device") == "cpu",
            gpus_per_worker=fit.link.gpus_per_worker,
            gpus_per_node=head.gpus_per_node,
            link_bytes_s=fit.link.bytes_s or None,
            link_source=fit.link.source if fit.link.bytes_s else None,
            tokens_measured=fit.tokens_measured,
        )

    def settings(self, options: Options | None = None, **given: Any) -> Settings:
        """The options resolved against the logs (`advisor.settings.build_settings`).

        Args:
            options: the options; None: every default.
            **given: `Options` fields by name, replacing those of ``options``.

        Returns:
            The `Settings` every stage receives.

        Raises:
            SettingsError: an unusable option, named.
        """
        return build_settings(Options.of(options, **given), self.logged)

    def advise(self, options: Options | None = None, **given: Any) -> Advice:
        """Advice under ``options``: project -> reconcile -> evidence -> decide.

        Args:
            options: the options; None: every default.
            **given: `Options` fields by name, replacing those of ``options``.

        Returns:
            The `Advice`; its caveats include those the reading and the fit raised.

        Raises:
            SettingsError: an unusable option, named.
        """
        return _finish(
            self.fit, self.logs, self.settings(options, **given), self.logs[0].header.run, _caveats(self.caught)
        )


def fit_logs(paths: str | Path | Sequence[str | Path]) -> Fitted:
    """Read and fit the run(s) in ``paths`` once (`Fitted.advise` then advises under any options).

    Args:
        paths: a log file, a directory or glob of one run's per-rank files, or several (the same job
            at other splits); the first is the current run.

    Returns:
        The `Fitted` logs, with the warnings the reading and the fit raised.

    Raises:
        LogError: unusable input.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        measured = measure_logs(load_logs(paths))
        logs = [m.log for m in measured.logs]  # as measured: a probe's segments pooled per split
        fit = fit_pipeline(measured)
    return Fitted(logs=tuple(logs), fit=fit, caught=tuple(caught))


def advise(paths: str | Path | Sequence[str | Path], options: Options | None = None, /, **given: Any) -> Advice:
    """Advice for the run(s) in ``paths`` under ``options`` (`advisor.settings.Options`).

    ``advise(paths, gpus=16, roles={"target": 12, "drafter": 4})`` is
    ``advise(paths, Options(gpus=16, roles=...))``.

    Args:
        paths: a log file, a directory or glob of one run's per-rank files, or several (the same job
            at other splits); the first is the current run.
        options: the options; None: every default.
        **given: any `Options` field by name, instead of ``options`` or on top of it.

    Returns:
        The `Advice`.

    Raises:
        LogError: unusable input.
        SettingsError: an unusable option, named, before any log is read.
    """
    options = Options.of(options, **given)
    return fit_logs(paths).advise(options)


def advise_numbers(
    roles: Mapping[str, int],
    cap_bps: Mapping[str, float | Capacity | tuple[float, float] | str],
    options: Options | None = None,
    /,
    **given: Any,
) -> Advice:
    """Advice from bare numbers: worker counts and pool capacities (batches/s), the `what-if` path.

    Of the `Options`, these apply: ``gpus``, ``hs_cap``, ``tokens_per_batch``, ``scv``,
    ``sync_every``, ``sync_s``, ``restart_cost_h``, ``next_run``, ``job_hours`` (the rest of the
    job at the given split; without it no restart is weighed), ``hardware_priors`` (default on,
    `advisor.fit.pipeline.gpu_priors`), ``gpus_per_worker`` and, across nodes, ``gpus_per_node``,
    ``link_gbytes_s`` and ``hs_bytes_per_token``.

    Args:
        roles: role -> workers (engines), the producer first: the split the capacities are at.
        cap_bps: role -> the pool's capacity at that count, b/s: a value, a range (``(0.88, 0.95)``,
            ``"0.88..0.95"``) or a lower bound (``">=39"``; `advisor.settings.as_capacity`).
        options: the options; None: every default.
        **given: any `Options` field by name, instead of ``options`` or on top of it.

    Returns:
        The `Advice`, its run named "what-if".

    Raises:
        SettingsError: an unusable capacity or option, named.
    """
    o = Options.of(options, **given)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_from_numbers(roles, cap_bps, o)
    p, c = fit.roles
    k = o.gpus_per_worker or {}  # its role names are checked by build_settings
    log_k = (k.get(p, 1), k.get(c, 1))
    # each capacity was given on its workers' GPUs (engines of log_k GPUs each)
    on = {r: units_text(roles[r] * kk) for r, kk in zip((p, c), log_k)}
    kinds = ", ".join(f"{rf.role} {basis_text(rf, roles[rf.role], on[rf.role])}" for rf in (fit.producer, fit.consumer))
    carried = (
        gpu_priors_text(fit.contention, p, c)
        if any(fit.contention.role_se)
        else "intervals carry no sampling or run-to-run error (no samples)"
    )
    given = f"from bare numbers ({kinds}): step-time variability assumed (SCV {fit.producer.busy_scv:.2g}); {carried}"
    logged = Logged(
        roles=(p, c),
        gpus=roles[p] * log_k[0] + roles[c] * log_k[1],
        hs_cap=fit.hs_cap,
        tokens_mean=fit.tokens_mean,
        tokens_range=fit.tokens_range,
        gpus_per_worker=log_k,
    )
    numbers = replace(o, roles=None, token_budget=None, engine_scaling=None, exact=False)  # what needs a log
    return _finish(fit, (), build_settings(numbers, logged), "what-if", [*_caveats(caught), given])
