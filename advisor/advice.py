"""The one public entry: logs (or bare numbers) in, an :class:`Advice` out.

``advise(paths)`` runs load -> steady -> fit -> project -> recommend and collects every typed
warning raised on the way as a caveat. The CLI, the notebooks and the plots all call it.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from .fit import PipelineFit, fit_from_numbers, fit_pipeline, sync_scaling
from .load import RunLog, load_logs
from .project import project
from .recommend import DEFAULT_RESTART_COST_H, QueueAdvice, Recommendation, queue_advice, recommend
from .schema import SCHEMA_VERSION, AdvisorWarning, AssumptionWarning

MIN_GPUS = 2
EXACT_GAP_WARN_PCT = 3.0
TOKEN_RANGE_SLACK = 0.10


@dataclass(frozen=True)
class Observed:
    """The split the (first) log ran, as measured."""

    roles: Mapping[str, int]
    bps: float
    tok_s: float
    efficiency: float
    bottleneck: str
    steady_from_s: float
    steady_to_s: float
    warmup_share: float
    drain_share: float
    capacities_bps: Mapping[str, float]
    hs_mean_depth: float | None
    hs_full_share: float | None


@dataclass(frozen=True)
class Advice:
    run: str
    gpus: int
    fit: PipelineFit
    splits: pd.DataFrame
    observed: Observed
    recommendation: Recommendation
    queues: Mapping[str, QueueAdvice]
    warnings: tuple[str, ...]
    logs: tuple[RunLog, ...] = field(default=(), repr=False)
    gate: Mapping[str, Any] = field(default_factory=dict)

    @property
    def roles(self) -> tuple[str, str]:
        return self.fit.roles

    def split_row(self, roles: Mapping[str, int]) -> pd.Series:
        p, c = self.roles
        df = self.splits
        hit = df[(df[f"n_{p}"] == roles[p]) & (df[f"n_{c}"] == roles[c])]
        if not len(hit):
            raise KeyError(f"no split {roles} among the projected ones")
        return hit.iloc[0]

    def to_json(self) -> dict[str, Any]:
        """The `dflash-advise --json` document (DESIGN.md contract, schema 1)."""
        p, c = self.roles
        ob = self.observed

        def num(v: Any, nd: int = 4) -> Any:
            return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else round(float(v), nd)

        splits = []
        for _, r in self.splits.iterrows():
            splits.append({"roles": {p: int(r[f"n_{p}"]), c: int(r[f"n_{c}"])}, "bps": num(r["bps"]),
                           "tok_s": num(r["tok_s"], 1), "bps_low": num(r["bps_low"]), "bps_high": num(r["bps_high"]),
                           "efficiency": num(r["efficiency"]), "gpu_util": num(r["gpu_util"]),
                           "bottleneck": r["bottleneck"], "eta_s": num(r["eta_s"], 0),
                           "bound_bps": num(r["bound_bps"]), "observed": bool(r["observed"]),
                           f"{p}_blocked": num(r["producer_blocked"]), f"{c}_starved": num(r["consumer_starved"]),
                           "hs_mean_depth": num(r["hs_mean_depth"], 2),
                           **({"bps_exact": num(r["bps_exact"])} if "bps_exact" in r else {}),
                           **({"method": r["method"]} if "method" in r else {})})
        rec = self.recommendation
        return {
            "schema": SCHEMA_VERSION, "run": self.run, "gpus": self.gpus,
            "observed": {"roles": dict(ob.roles), "bps": num(ob.bps), "tok_s": num(ob.tok_s, 1),
                         "efficiency": num(ob.efficiency), "bottleneck": ob.bottleneck,
                         "steady_from_s": num(ob.steady_from_s, 1),
                         "capacities_bps": {k: num(v) for k, v in ob.capacities_bps.items()}},
            "splits": splits,
            "recommendation": {"roles": dict(rec.roles), "verdict": rec.verdict, "reasons": list(rec.reasons),
                               "holds_unless": list(rec.holds_unless), "gain_pct": num(rec.gain_pct, 2)},
            "queues": {name: {"cap": q.cap, "advice": q.advice, "gain_pct": num(q.gain_pct, 2)}
                       for name, q in self.queues.items()},
            "warnings": list(self.warnings),
            **({"gate": dict(self.gate)} if self.gate else {}),
        }


def _observed(fit: PipelineFit, gpus: int) -> Observed:
    ob = fit.observed[0]
    p, c = fit.roles
    n, m = ob.roles[p], ob.roles[c]
    caps = {p: n * fit.producer.mu_bps, c: m * fit.consumer.mu_bps * sync_scaling(fit.consumer, fit.sync, m)}
    if fit.loader.input_bound and fit.loader.capacity_bps:
        caps["loader"] = fit.loader.capacity_bps
    gpu_caps = [caps[p], caps[c]]
    return Observed(roles={p: n, c: m}, bps=ob.bps, tok_s=ob.tok_s, efficiency=ob.bps / max(gpu_caps),
                    bottleneck=min(caps, key=caps.get), steady_from_s=ob.steady.start_s,
                    steady_to_s=ob.steady.end_s, warmup_share=ob.steady.warmup_share,
                    drain_share=ob.steady.drain_share, capacities_bps=caps, hs_mean_depth=ob.hs_mean_depth,
                    hs_full_share=ob.hs_full_share)


def _finish(fit: PipelineFit, gpus: int, run: str, *, hs_cap: int | None, token_budget: int | None,
            restart_cost_h: float, roles: Mapping[str, int] | None, logs: Sequence[RunLog],
            caught: list[warnings.WarningMessage], exact: bool = False) -> Advice:
    if gpus < MIN_GPUS:
        raise ValueError(f"gpus must be >= {MIN_GPUS}, got {gpus}")
    tokens = None
    extra: list[str] = []
    if token_budget is not None:
        # batches fill the budget to the same degree as in the observed log
        head_budget = logs[0].header.token_budget if logs else None
        fill = fit.tokens_mean / head_budget if head_budget else 1.0
        tokens = token_budget * fill
        lo, hi = fit.tokens_range
        if not (1 - TOKEN_RANGE_SLACK) * lo <= tokens <= (1 + TOKEN_RANGE_SLACK) * hi:
            extra.append(
                f"--token-budget {token_budget}: batches of ~{tokens:.0f} tokens lie outside the logged "
                f"{lo:.0f}-{hi:.0f}, so the step-time line is extrapolated (BENCHMARKS.md section 6 measures how "
                f"far off that can be); a short log at the new budget, given with the others, pins it down")
    p, c = fit.roles
    observed = _observed(fit, gpus)
    ob_split = (observed.roles[p], observed.roles[c])
    if roles is not None:
        ob_split = (roles[p], roles[c])
    with warnings.catch_warnings(record=True) as more:
        warnings.simplefilter("always")
        if max(ob_split[1], 1) == 1 and not fit.sync.measured and fit.sync.sync_every > 0:
            warnings.warn(AssumptionWarning(
                f"only {ob_split[1]} {c} observed: the sync cost of several {c}s is unknown and assumed 0; "
                f"see 'holds unless' for how the verdict depends on per-{c} scaling"))
        splits = project(fit, gpus, hs_cap=hs_cap, tokens_per_batch=tokens)
        if fit.source == "steps" and tokens is None:
            from .exact import refine_weak_spots
            splits = refine_weak_spots(fit, tuple(logs), splits, hs_cap=hs_cap)
        if exact and fit.source == "steps" and tokens is None:
            from .exact import simulate_splits
            splits = simulate_splits(fit, tuple(logs), splits, hs_cap=hs_cap)
            worst = splits.loc[splits["exact_gap_pct"].abs().idxmax()]
            if abs(worst["exact_gap_pct"]) > EXACT_GAP_WARN_PCT:
                warnings.warn(AssumptionWarning(
                    f"the analytic model and the exact simulation differ by {worst['exact_gap_pct']:+.1f}% at "
                    f"{int(worst[f'n_{p}'])}-{int(worst[f'n_{c}'])}: trust the simulation there"))
        elif exact:
            warnings.warn(AssumptionWarning("--exact needs step events and the log's own token budget; skipped"))
        in_range = ob_split[0] + ob_split[1] == gpus
        rec = recommend(fit, splits, gpus, observed=ob_split if in_range else None, restart_cost_h=restart_cost_h)
        chosen = (rec.roles[p], rec.roles[c])
        qa = queue_advice(fit, chosen, gpus) if (hs_cap is None and tokens is None) else None
    caught = list(caught) + list(more)
    texts: list[str] = list(extra)
    for w in caught:
        if issubclass(w.category, AdvisorWarning):
            msg = str(w.message)
            if msg not in texts:
                texts.append(msg)
    return Advice(run=run, gpus=gpus, fit=fit, splits=splits, observed=observed, recommendation=rec,
                  queues={"hs": qa} if qa else {}, warnings=tuple(texts), logs=tuple(logs))


def advise(paths: str | Path | Sequence[str | Path], *, gpus: int | None = None,
           roles: Mapping[str, int] | None = None, hs_cap: int | None = None, token_budget: int | None = None,
           restart_cost_h: float = DEFAULT_RESTART_COST_H, exact: bool = False) -> Advice:
    """Advice for the run(s) in ``paths``.

    ``gpus`` overrides the header's GPU count; ``roles`` names the split to judge (default: the
    one the first log ran); ``hs_cap`` and ``token_budget`` project another q_hs depth or batch
    token budget; ``exact`` adds ``bps_exact``, an exact simulation of every split driven by the
    log's own service times (`advisor.exact`). Raises `advisor.schema.LogError` on unusable input.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logs = load_logs(paths)
        fit = fit_pipeline(logs)
    head = logs[0].header
    return _finish(fit, gpus or head.gpus, head.run, hs_cap=hs_cap, token_budget=token_budget,
                   restart_cost_h=restart_cost_h, roles=roles, logs=logs, caught=caught, exact=exact)


def advise_numbers(roles: Mapping[str, int], cap_bps: Mapping[str, float], *, gpus: int | None = None,
                   hs_cap: int = 20, tokens_per_batch: float = 32768.0, scv: float | None = None,
                   sync_every: int = 0, sync_s: float = 0.0,
                   restart_cost_h: float = DEFAULT_RESTART_COST_H) -> Advice:
    """Advice from bare numbers: worker counts and pool capacities (batches/s), the `what-if` path."""
    kw = {} if scv is None else {"scv": scv}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_from_numbers(roles, cap_bps, hs_cap=hs_cap, tokens_per_batch=tokens_per_batch,
                               sync_every=sync_every, sync_s=sync_s, **kw)
        warnings.warn(AssumptionWarning(
            f"from bare numbers: step-time variability assumed (SCV {fit.producer.busy_scv:.2g}); "
            f"capacities taken as given"))
    return _finish(fit, gpus or sum(roles.values()), "what-if", hs_cap=None, token_budget=None,
                   restart_cost_h=restart_cost_h, roles=None, logs=(), caught=caught)
