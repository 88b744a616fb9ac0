"""The one public entry: logs (or bare numbers) in, an :class:`Advice` out.

``advise(paths)`` runs load -> fit (steady window, measured run) -> settings -> project ->
reconcile -> evidence -> decide, each wing once with the record the one before produced, and
collects every typed warning raised on the way as a caveat. The CLI, the notebooks and the plots
all call it. The options are resolved once into a `~advisor.settings.Settings` that every stage
receives; the verdict is a `~advisor.decide.rules.Decision` (data) whose wording
`advisor.decide.reasons` writes from the same table the report prints
(`advisor.present.text` lays it out).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from advisor.decide.evidence import Evidence, gather
from advisor.decide.observed import ObservedSplit, observed_split
from advisor.decide.reasons import basis_text, holds_unless, placement_reasons, provisional, queue_text, reasons
from advisor.decide.rules import Decision, decide
from advisor.errors import AdvisorWarning, AssumptionWarning, SteadyStateWarning
from advisor.fit.pipeline import fit_from_numbers, fit_pipeline, gpu_priors_text
from advisor.ingest.load import load_logs
from advisor.ingest.runlog import RunLog
from advisor.ingest.schema import SCHEMA_VERSION
from advisor.measure.measured import measure_logs
from advisor.model.link import Placement
from advisor.model.params import PipelineFit
from advisor.project.exact import refine_weak_spots, simulate_splits
from advisor.project.linked import refine_placements
from advisor.project.table import Reconciliation, project, reconcile, split_label
from advisor.settings import (DEFAULT_HS_CAP, DEFAULT_RESTART_COST_H, DEFAULT_TOKENS_PER_BATCH, ENGINE_SCALING_SE,
                              LINK_SE, MAX_GPUS_PER_WORKER, Capacity, Settings, build_settings, check_roles,
                              parse_role_map)

EXACT_GAP_WARN_PCT = 3.0
CROSSING_GAP = 0.05      # crossing share measured vs uniform mixing: a caveat past 5 points


@dataclass(frozen=True)
class Recommendation:
    """The decision in words (for readers of the JSON's ``recommendation`` and old code)."""

    roles: Mapping[str, int]
    verdict: str
    reasons: tuple[str, ...]
    holds_unless: tuple[str, ...]
    gain_pct: float


@dataclass(frozen=True)
class Advice:
    """Advice for one job: ``splits`` (DataFrame indexed by "N-M", columns in `advisor.project.table`),
    ``decision`` (the verdict as data), ``recommendation`` (the same in words), ``observed``,
    ``settings`` and the caveats in ``warnings``. ``to_json()`` is the ``--json`` document."""

    run: str
    gpus: int
    fit: PipelineFit
    splits: pd.DataFrame
    observed: ObservedSplit
    decision: Decision
    settings: Settings
    warnings: tuple[str, ...]
    reconciliation: tuple[Reconciliation, ...] = ()
    logs: tuple[RunLog, ...] = field(default=(), repr=False)
    gate: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        d = self.decision
        return (f"<Advice {self.run!r}: {self.gpus} GPUs, {d.verdict.value} {d.recommended} "
                f"({self.splits.at[d.recommended, 'bps']:.3g} b/s), {len(self.splits)} splits, "
                f"{len(self.warnings)} caveat(s)>")

    @property
    def roles(self) -> tuple[str, str]:
        return self.fit.roles

    @property
    def queues(self) -> dict[str, Any]:
        return {"hs": self.decision.queue} if self.decision.queue is not None else {}

    @cached_property
    def recommendation(self) -> Recommendation:
        d = self.decision
        p, c = self.roles
        n, m = (int(self.splits.at[d.recommended, f"n_{r}"]) for r in (p, c))
        return Recommendation(roles={p: n, c: m}, verdict=d.verdict.value,
                              reasons=tuple(reasons(d, self.splits, self.fit, self.observed)
                                            + placement_reasons(d, self.splits, self.fit)),
                              holds_unless=tuple(holds_unless(d, self.fit)), gain_pct=d.gain_pct)

    def judge(self, roles: Mapping[str, int]) -> "Advice":
        """The same advice with ``roles`` as the judged split (the table is unchanged; the decision
        is re-derived). Raises `advisor.errors.SettingsError` when the split is not one of G."""
        s = replace(self.settings, roles=check_roles(roles, *self.roles, self.settings.gpus,
                                                     self.settings.gpus_per_worker))
        return replace(self, settings=s, decision=decide(self.fit, self.splits, s, self.decision.evidence))

    def split_row(self, roles: Mapping[str, int]) -> pd.Series:
        p, c = self.roles
        label = split_label(roles[p], roles[c])
        if label not in self.splits.index:
            raise KeyError(f"no split {label} among the projected ones")
        return self.splits.loc[label]

    @cached_property
    def _rows(self) -> dict[str, dict[str, Any]]:
        """The table's rows as dicts, by label: made once (at G = 1024 a row as a Series each cost
        a fifth of a second for the JSON's 1,023 splits)."""
        return self.splits.to_dict("index")

    def split_json(self, label: str) -> dict[str, Any]:
        """One row of the table as the JSON's split object (the one conversion, so they agree)."""
        p, c = self.roles
        r = self._rows[label]
        out = {"roles": {p: int(r[f"n_{p}"]), c: int(r[f"n_{c}"])}, "bps": _num(r["bps"]),
               "tok_s": _num(r["tok_s"], 1), "bps_low": _num(r["bps_low"]), "bps_high": _num(r["bps_high"]),
               "efficiency": _num(r["efficiency"]), "gpu_util": _num(r["gpu_util"]),
               "bottleneck": str(r["bottleneck"]), "eta_s": _num(r["eta_s"], 0), "bound_bps": _num(r["bound_bps"]),
               "capacities_bps": {k: _num(r[f"cap_{k}_bps"]) for k in (p, c, "loader")
                                  if _num(r[f"cap_{k}_bps"]) is not None},
               "observed": bool(r["observed"]), f"{p}_blocked": _num(r[f"{p}_blocked"]),
               f"{c}_starved": _num(r[f"{c}_starved"]), "hs_mean_depth": _num(r["hs_mean_depth"], 2),
               "method": str(r["method"])}
        if r["observed"] and _num(r["observed_bps"]) is not None:
            out["observed_bps"] = _num(r["observed_bps"])
        if "bps_exact" in r:
            out["bps_exact"] = _num(r["bps_exact"])
        out.update(engine_json(r, p, c))
        return out

    def capacity_basis(self) -> dict[str, Any]:
        """What each role's capacity rests on (`advisor.model.params.Basis`), with the known range
        of the pool's capacity at the observed split (``high_bps`` None: open, a lower bound)."""
        ob = self.fit.observed[0]
        out = {}
        for rf in (self.fit.producer, self.fit.consumer):
            n = ob.roles.get(rf.role, 0)
            lo, hi = (rf.mu_range_bps if rf.ranged else (rf.mu_bps, rf.mu_bps))
            out[rf.role] = {"kind": rf.basis.value, "low_bps": _num(lo * n), "high_bps": _num(hi * n)}
        return out

    def to_json(self) -> dict[str, Any]:
        """The `dflash-advise --json` document (schema 1; decision fields additive)."""
        ob, d, rec = self.observed, self.decision, self.recommendation
        m = d.margin
        return {
            "schema": SCHEMA_VERSION, "run": self.run, "gpus": self.gpus,
            "observed": {"roles": dict(ob.roles), "bps": _num(ob.bps), "tok_s": _num(ob.tok_s, 1),
                         "efficiency": _num(ob.efficiency), "bottleneck": ob.bottleneck,
                         "steady_from_s": _num(ob.steady_from_s, 1),
                         "capacities_bps": {k: _num(v) for k, v in ob.capacities_bps.items()}},
            "splits": [self.split_json(str(lbl)) for lbl in self.splits.index],
            "recommendation": {
                "roles": dict(rec.roles), "verdict": rec.verdict, "reasons": list(rec.reasons),
                "holds_unless": list(rec.holds_unless), "gain_pct": _num(d.gain_pct, 2), "rule": d.rule,
                "provisional": provisional(d, self.fit),
                "judged": self.split_json(d.described),
                "runner_up": ({"roles": self.split_json(d.runner_up)["roles"], "bps": _num(self.splits.at[
                    d.runner_up, "bps"]), "bottleneck": str(self.splits.at[d.runner_up, "bottleneck"])}
                    if d.runner_up else None),
                "margin": ({"stable": m.stable, "best_low": _num(m.best_low), "runner_up_high": _num(m.runner_up_high),
                            "best": self.split_json(m.higher)["roles"], "separated": m.separated,
                            "lead_low_pct": _num(m.lead_low_pct, 2), "lead_high_pct": _num(m.lead_high_pct, 2)}
                           if m else None),
                "settings": self.settings.to_json(),
            },
            "queues": ({"hs": {"cap": d.queue.cap, "advice": queue_text(d.queue), "gain_pct": _num(d.queue.gain_pct, 2)}}
                       if d.queue is not None else {}),
            "warnings": list(self.warnings),
            "capacity_basis": self.capacity_basis(),
            **({"gate": dict(self.gate)} if self.gate else {}),
        }


def engine_json(r: Mapping[str, Any], p: str, c: str) -> dict[str, Any]:
    """A row's GPUs per role and, across nodes, its placement and link (additive JSON fields)."""
    out: dict[str, Any] = {}
    if f"gpus_{p}" in r:
        out["gpus_by_role"] = {p: int(r[f"gpus_{p}"]), c: int(r[f"gpus_{c}"])}
        out["gpus_per_worker"] = {p: int(r[f"gpus_per_{p}"]), c: int(r[f"gpus_per_{c}"])}
    if "placement" in r and isinstance(r["placement"], str):
        out["placement"] = [{p: int(a), c: int(b)} for a, b in zip(r[f"nodes_{p}"], r[f"nodes_{c}"])]
        out["placement_text"] = r["placement"]
        out["link"] = {"cap_bps": _num(r["cap_link_bps"]), "util": _num(r["link_util"]),
                       "crossing_share": _num(r["crossing_share"])}
    return out


def _num(v: Any, nd: int = 4) -> Any:
    if v is None:
        return None
    v = float(v)
    # + 0.0: a value that rounds to zero from below is 0.0, not -0.0 (a last-bit difference in a
    # lead of nothing must not print as a sign)
    return round(v, nd) + 0.0 if math.isfinite(v) else None


def _widen_for_drift(splits: pd.DataFrame, ev: Evidence) -> pd.DataFrame:
    """A pace that moved by d% inside the window may move as much again: widen every interval."""
    if not (ev.drifting or not ev.settled):
        return splits
    d = min(abs(ev.drift_pct) / 100.0, 0.9)
    if d <= 0:
        return splits
    df = splits.copy()
    df["bps_low"] = df[["bps_low", "bps"]].min(axis=1) * (1 - d)
    df["bps_high"] = df[["bps_high", "bps"]].max(axis=1) * (1 + d)
    warnings.warn(AssumptionWarning(
        f"the pace moved {ev.drift_pct:+.1f}% between the halves of the steady window: every interval is widened "
        f"by {100 * d:.0f}%"), stacklevel=2)
    return df


def _warn_assumptions(fit: PipelineFit, settings: Settings) -> None:
    """The caveats the options and the fit carry before anything is projected."""
    c = fit.roles[1]
    if settings.extrapolated_tokens:
        lo, hi = settings.logged_tokens_range
        warnings.warn(AssumptionWarning(
            f"--token-budget {settings.token_budget}: batches of ~{settings.tokens_per_batch:.0f} tokens lie "
            f"outside the logged {lo:.0f}-{hi:.0f}, so the step-time line is extrapolated; a short log at the new "
            f"budget, given with the others, pins it down"))
    _warn_engines(fit, settings)
    judged_m = settings.roles[c] if settings.roles else fit.observed[0].roles.get(c, 1)
    if judged_m <= 1 and not fit.sync.measured and fit.sync.sync_every > 0:
        warnings.warn(AssumptionWarning(
            f"only {judged_m} {c} observed: the sync cost of several {c}s is unknown and assumed 0; "
            f"see 'holds unless' for how the verdict depends on per-{c} scaling"))


def _warn_engines(fit: PipelineFit, settings: Settings) -> None:
    """What the log cannot tell about engines of another size and about the link (caveats)."""
    for i, role in enumerate(fit.roles):
        k, k_log = settings.gpus_per_worker[i], settings.log_gpus_per_worker[i]
        if k != k_log:
            warnings.warn(AssumptionWarning(
                f"{role} engines of {k} GPUs projected from a log of {k_log}-GPU engines: an engine's rate is taken "
                f"as {k}/{k_log} x {settings.engine_scaling[i]:g} (--engine-scaling, given) of the logged one; the "
                f"intervals span +-{100 * ENGINE_SCALING_SE:.0f}% of it; a short log at {k} GPUs per engine measures it"))
    if settings.nodes <= 1:
        return
    if not settings.link_bytes_s or not fit.hs_bytes_per_token:
        what = "its bandwidth is unknown" if fit.hs_bytes_per_token else "the log has no hs_bytes_per_token"
        warnings.warn(AssumptionWarning(
            f"{settings.nodes} nodes of {settings.gpus_per_node} GPUs: {what}, so the link between nodes is taken as "
            f"free; give --link-gbytes-s (and hs_bytes_per_token in the header) or a log whose batches crossed nodes"))
    _warn_crossing(fit)
    if settings.link_source == "measured":
        return
    if settings.link_source is not None:
        whence = "given (--link-gbytes-s)" if settings.link_source == "given" else "the header's link_bytes_s"
        warnings.warn(AssumptionWarning(
            f"{settings.nodes} nodes: the link's {settings.link_bytes_s / 1e9:.3g} GB/s is {whence}, not measured from "
            f"batches that crossed nodes in this log; the intervals span +-{100 * LINK_SE:.0f}% of it"))


def _warn_crossing(fit: PipelineFit) -> None:
    """Where the log's batches crossed nodes: its crossing share against uniform mixing, the
    analytic link stage's assumption (`advisor.model.link`)."""
    lk = fit.link
    if not lk.producers_by_node or not lk.steps_known:
        return
    pl = Placement(producers=lk.producers_by_node, consumers=lk.consumers_by_node)
    uniform, seen = pl.crossing_share(), lk.first_crossed / lk.steps_known
    if abs(seen - uniform) > CROSSING_GAP:
        warnings.warn(AssumptionWarning(
            f"{fit.observed[0].path}: {seen:.0%} of the drafters' batches crossed nodes where uniform mixing (the "
            f"link stage's assumption: a batch's origin independent of its drafter) gives {uniform:.0%}; the shared "
            f"queue's order ties origin to drafter, so at placements that mix targets and drafters on a node the "
            f"link carries more (or less) than projected; compare placements by short logs of each"))


def _project(fit: PipelineFit, logs: Sequence[RunLog], settings: Settings) -> pd.DataFrame:
    """The table of every split: the analytic projection, refined (and with ``--exact`` checked)
    against the log's own service times where the log has step events at its own budget."""
    if fit.source == "steps" and settings.own_budget and settings.nodes > 1:
        splits = refine_placements(fit, tuple(logs), settings, project(fit, settings))   # the queue and link, simulated
    elif fit.source == "steps" and settings.own_budget:
        splits = _refined(fit, tuple(logs), settings)
    else:
        splits = project(fit, settings)
    if settings.exact:
        splits = _exact(fit, logs, settings, splits)
    return splits


def _refined(fit: PipelineFit, logs: tuple[RunLog, ...], settings: Settings) -> pd.DataFrame:
    """The table, refined where the chain is weak (`refine_weak_spots`)."""
    return refine_weak_spots(fit, logs, project(fit, settings), hs_cap=settings.hs_cap)


def _exact(fit: PipelineFit, logs: Sequence[RunLog], settings: Settings, splits: pd.DataFrame) -> pd.DataFrame:
    if fit.source != "steps" or not settings.own_budget:
        warnings.warn(AssumptionWarning("--exact needs step events and the log's own token budget; skipped"))
        return splits
    out = simulate_splits(fit, tuple(logs), splits, hs_cap=settings.hs_cap)
    worst = out["exact_gap_pct"].abs().idxmax()
    if abs(out.at[worst, "exact_gap_pct"]) > EXACT_GAP_WARN_PCT:
        warnings.warn(AssumptionWarning(
            f"the analytic model and the exact simulation differ by {out.at[worst, 'exact_gap_pct']:+.1f}% at "
            f"{worst}: trust the simulation there"))
    return out


def _evidence(fit: PipelineFit, logs: Sequence[RunLog]) -> Evidence:
    """What the first log can carry (`advisor.decide.evidence`), with a caveat when it is thin."""
    ev = gather(fit, tuple(logs))
    if ev.thin and fit.source != "numbers":
        warnings.warn(SteadyStateWarning(
            f"{fit.observed[0].path}: thin evidence: {'; '.join(ev.why_thin())}; the intervals cover sampling "
            f"noise only, so treat the projections as provisional"))
    return ev


def _caveats(*batches: Sequence[warnings.WarningMessage]) -> tuple[str, ...]:
    """Every typed warning's text, once, in the order raised."""
    texts: list[str] = []
    for w in (w for batch in batches for w in batch):
        if issubclass(w.category, AdvisorWarning) and str(w.message) not in texts:
            texts.append(str(w.message))
    return tuple(texts)


def _finish(fit: PipelineFit, logs: Sequence[RunLog], settings: Settings, run: str,
            caught: list[warnings.WarningMessage]) -> Advice:
    """From the fit on: project -> reconcile -> evidence -> decide, then the Advice."""
    with warnings.catch_warnings(record=True) as more:
        warnings.simplefilter("always")
        _warn_assumptions(fit, settings)
        splits = _project(fit, logs, settings)
        splits, recon = reconcile(fit, settings, splits)
        ev = _evidence(fit, logs)
        splits = _widen_for_drift(splits, ev)
        decision = decide(fit, splits, settings, ev)
        observed = observed_split(fit, settings, splits)
    return Advice(run=run, gpus=settings.gpus, fit=fit, splits=splits, observed=observed, decision=decision,
                  settings=settings, warnings=_caveats(caught, more), reconciliation=recon, logs=tuple(logs))


def advise(paths: str | Path | Sequence[str | Path], *, gpus: int | None = None,
           roles: Mapping[str, int] | None = None, hs_cap: int | None = None, token_budget: int | None = None,
           restart_cost_h: float = DEFAULT_RESTART_COST_H, next_run: bool = False, exact: bool = False,
           gpus_per_worker: Mapping[str, int] | str | None = None, engine_scaling: Mapping[str, float] | str | None = None,
           gpus_per_node: int | None = None, link_gbytes_s: float | None = None,
           gpus_of: Mapping[str, int] | None = None) -> Advice:
    """Advice for the run(s) in ``paths``.

    ``gpus`` overrides the header's GPU count; ``roles`` names the split to judge (default: the
    one the first log ran; must sum to the GPUs split); ``hs_cap`` and ``token_budget`` project
    another q_hs depth or batch token budget; ``next_run`` asks for the next run's split (implied
    when the log has ended); ``exact`` adds ``bps_exact``, an exact simulation of every split
    driven by the log's own service times (`advisor.project.exact`). ``gpus_per_worker`` (role -> GPUs
    per engine; the log's by default), ``engine_scaling`` (role -> per-GPU rate ratio, needed where a
    role's engine size changes), ``gpus_per_node`` (the log's by default) and ``link_gbytes_s`` (the
    link's GB/s; measured from the log or its header by default) project engines of several GPUs on
    several nodes (docs/deployed.md). ``gpus_of`` (with ``gpus`` None): a planned split, role ->
    engines, whose engines' GPUs are the G to split where it names both roles (the gate's planned
    cluster; the logs are read once). Raises `advisor.errors.LogError` on unusable input and
    `advisor.errors.SettingsError` on unusable options.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logs = load_logs(paths)
        fit = fit_pipeline(measure_logs(logs))
    head = logs[0].header
    p, c = fit.roles
    opts = dict(producer=p, consumer=c, gpus=gpus if gpus is not None else head.gpus,
                log_hs_cap=fit.hs_cap, tokens_mean=fit.tokens_mean, tokens_range=fit.tokens_range,
                log_token_budget=head.token_budget, hs_cap=hs_cap, token_budget=token_budget,
                roles=roles, restart_cost_h=restart_cost_h, next_run=next_run,
                run_ended=logs[0].end is not None, exact=exact, cpu=head.extra.get("device") == "cpu",
                log_gpus_per_worker=fit.link.gpus_per_worker, gpus_per_worker=gpus_per_worker,
                engine_scaling=engine_scaling,
                gpus_per_node=gpus_per_node if gpus_per_node is not None else head.gpus_per_node,
                link_gbytes_s=link_gbytes_s)
    settings = build_settings(**opts)
    if gpus is None and gpus_of is not None and set(gpus_of) == {p, c}:
        need = settings.split_gpus(gpus_of[p], gpus_of[c])
        if need != settings.gpus:
            settings = build_settings(**{**opts, "gpus": need})
    if link_gbytes_s is None and fit.link.bytes_s:
        settings = replace(settings, link_bytes_s=fit.link.bytes_s, link_source=fit.link.source)
    elif link_gbytes_s is not None:
        settings = replace(settings, link_source="given")
    return _finish(fit, logs, settings, head.run, caught)


def advise_numbers(roles: Mapping[str, int], cap_bps: Mapping[str, float | Capacity | tuple[float, float] | str], *,
                   gpus: int | None = None, hs_cap: int = DEFAULT_HS_CAP, tokens_per_batch: float = DEFAULT_TOKENS_PER_BATCH,
                   scv: float | None = None, sync_every: int = 0, sync_s: float = 0.0,
                   restart_cost_h: float = DEFAULT_RESTART_COST_H, next_run: bool = False,
                   hardware_priors: bool = True, gpus_per_worker: Mapping[str, int] | str | None = None) -> Advice:
    """Advice from bare numbers: worker counts and pool capacities (batches/s), the `what-if` path.

    Each capacity is a value, a range (``(0.88, 0.95)``, ``"0.88..0.95"``) or a lower bound
    (``">=39"``; `advisor.settings.as_capacity`). ``hardware_priors`` (default): the projections
    carry what real GPUs do that the numbers cannot show (`advisor.fit.pipeline.gpu_priors`).
    ``gpus_per_worker``: role -> GPUs per engine of those counts (``roles`` counts engines)."""
    kw = {} if scv is None else {"scv": scv}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_from_numbers(roles, cap_bps, hs_cap=hs_cap, tokens_per_batch=tokens_per_batch,
                               sync_every=sync_every, sync_s=sync_s, hardware_priors=hardware_priors, **kw)
        p, c = fit.roles
        kinds = ", ".join(f"{rf.role} {basis_text(rf, roles[rf.role])}" for rf in (fit.producer, fit.consumer))
        carried = (gpu_priors_text(fit.contention, p, c) if fit.contention.role_se else
                   "intervals carry no sampling or run-to-run error (no samples)")
        warnings.warn(AssumptionWarning(
            f"from bare numbers ({kinds}): step-time variability assumed (SCV {fit.producer.busy_scv:.2g}); "
            f"{carried}"))
    k = parse_role_map("--gpus-per-worker", gpus_per_worker, (p, c), whole=True, lo=1, hi=MAX_GPUS_PER_WORKER)
    log_k = (k.get(p, 1), k.get(c, 1))
    g = gpus if gpus is not None else roles[p] * log_k[0] + roles[c] * log_k[1]
    settings = build_settings(producer=p, consumer=c, gpus=g,
                              log_hs_cap=hs_cap, tokens_mean=fit.tokens_mean, tokens_range=fit.tokens_range,
                              log_token_budget=None, restart_cost_h=restart_cost_h, next_run=next_run,
                              log_gpus_per_worker=log_k)
    return _finish(fit, (), settings, "what-if", caught)
