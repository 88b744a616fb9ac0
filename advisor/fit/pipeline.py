"""Fit the producer/consumer model from the steady part of one or more logs.

Per GPU role (targets = producer, drafters = consumer): capacity from busy time, never from
throughput (``mu = 1 / mean(busy_s)``: a blocked producer completes at the consumer's pace), a
95% interval from batch means, the SCV of busy times, the shares of wall time, and how step time
follows tokens (`advisor.fit.tokens`). Around them: the drafters' sync and the loader
(`advisor.fit.stages`), how step times change with the split (`advisor.fit.splits`,
`ContentionFit`) and over time (`advisor.fit.regimes`), the link (`advisor.fit.bandwidth`).
From ``rates`` snapshots only: capacities from ``cap_bps`` when logged, else the producer is a
lower bound; variability is assumed (``DEFAULT_SCV``), with a warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from advisor.errors import AssumptionWarning, ContentionWarning, LogError, SettingsError
from advisor.fit.bandwidth import fit_link
from advisor.fit.regimes import REGIME_SLICE_FILLS, fit_regimes
from advisor.fit.roles import drift, pooled_sums, role_from_rates, role_from_steps
from advisor.fit.splits import (
    contention_priors,
    fit_contention,
    oversubscription,
    shares_compute,
    within_sharing,
)
from advisor.fit.stages import calibrate_loader, fit_loader, fit_sync
from advisor.fit.tokens import token_model
from advisor.ingest.runlog import RunLog
from advisor.measure.contention import WithinLogContention, within_log_text
from advisor.measure.measured import Measurement, measure_logs
from advisor.measure.observe import ObservedRun
from advisor.measure.steady import SteadyWindow
from advisor.model.params import (
    NO_CONTENTION,
    Basis,
    ContentionFit,
    LoaderFit,
    PipelineFit,
    RoleFit,
    Source,
    SyncFit,
)
from advisor.model.priors import (
    CONTENTION_SINGLE_SE,
    DEFAULT_SCV,
    GPU_PRIOR_K_CONSUMER,
    GPU_PRIOR_K_PRODUCER,
    GPU_RUN_SE,
    GPU_SPLIT_SE_CONSUMER,
    GPU_SPLIT_SE_PRODUCER,
    OVERSUBSCRIBED_SOURCE,
)
from advisor.settings import DEFAULT_HS_CAP, DEFAULT_PRE_CAP, SAME_SIZE_TOL, Capacity, Options, as_capacity, role_plural
from advisor.stats import huber_line


def _pct_text(k: float) -> str:
    return f"{100 * (math.exp(k) - 1):+.1f}%"


def _fit_steps(measured: Measurement) -> dict:
    """`PipelineFit`'s fields of both roles from step events: busy-time rates, the step-time line,
    contention, drift, regimes."""
    ms = measured.logs
    producer, consumer = measured.producer, measured.consumer
    with_steps = measured.with_steps
    per_log = {i: ms[i].steps for i in with_steps}
    per_log_tokens = {i: float(per_log[i][consumer]["tokens"].mean()) for i in with_steps}
    first = with_steps[0]
    # logs at another token budget inform the step-time line only; rates and variability
    # come from the logs whose batches match the observed run's
    same = [i for i in with_steps if abs(per_log_tokens[i] / per_log_tokens[first] - 1.0) <= SAME_SIZE_TOL]
    roles = (producer, consumer)
    frames = {r: pd.concat([per_log[i][r] for i in same], ignore_index=True) for r in roles}
    line_frames = frames
    if same != with_steps:
        line_frames = {r: pd.concat([per_log[i][r] for i in with_steps], ignore_index=True) for r in roles}
    for r, f in frames.items():
        if len(f) < 3:
            raise LogError(ms[first].path, None, f"has {len(f)} steady '{r}' steps; too few to fit")
    cons = frames[consumer]
    tokens_mean = float(cons["tokens"].mean())
    hs = ms[0].log.header.queue_feeding(consumer)
    # each role's step-time line over all logs' steps, so that logs at other token budgets pin the slope down
    lines = {r: huber_line(f["tokens"].to_numpy(dtype=float), f["busy"].to_numpy()) for r, f in line_frames.items()}
    contention, ref_busy = fit_contention(ms, same, measured.within, first)
    in_pipe = (hs.cap if hs else 0) + sum(ms[first].roles.values())
    slice_s = REGIME_SLICE_FILLS * in_pipe / max(ms[first].observed.bps, 1e-12)
    regimes = fit_regimes(per_log[first], ms[first].window, producer, consumer, slice_s)
    sums = {r: pooled_sums(ms, same, r) for r in roles}
    all_tok = line_frames[consumer]["tokens"].to_numpy(float)
    sampled = any(ms[i].log.sampled for i in with_steps)
    fits = {r: role_from_steps(r, frames[r], sums[r], lines[r], sampled=sampled) for r in roles}
    for r in roles:
        rf = replace(fits[r], drift=max(drift(per_log[i][r]) for i in same))
        if ref_busy:
            # the line through the logs' means at the observed split replaces the pooled mean
            rf = replace(rf.scaled(ref_busy[r] / rf.busy_mean_s), busy_mean_s=ref_busy[r])
        fits[r] = token_model(rf, tokens_mean, per_log, per_log_tokens, all_tok)
    c = sums[consumer]
    return dict(
        producer=fits[producer],
        consumer=fits[consumer],
        tokens_mean=c["tokens"] / c["n"],
        tokens_std=float(cons["tokens"].std(ddof=1)),
        seqs_mean=c["seqs"] / c["n_seqs"] if c["n_seqs"] else None,
        tokens_range=(float(np.quantile(all_tok, 0.02)), float(np.quantile(all_tok, 0.98))),
        observed=tuple(m.observed.with_tokens(tokens_mean) for m in ms),
        contention=contention,
        regimes=regimes,
        source=Source.STEPS,
    )


def _fit_rates(measured: Measurement) -> dict:
    """`PipelineFit`'s fields of both roles from `rates` snapshots only (capacities from cap_bps,
    else bounds; variability assumed)."""
    producer, consumer = measured.producer, measured.consumer
    m0 = measured.logs[0]
    lg, r, ob = m0.log, m0.rates, m0.observed
    # tokens/s only where the snapshots logged it (`observe`); else a nominal batch (the budget, or
    # 1) sizes the model's batches, and tokens/s stays unknown (NaN) in every output
    tokens_measured = not math.isnan(ob.tok_s) and ob.bps > 0
    tokens_mean = ob.tok_s / ob.bps if tokens_measured else float(lg.header.token_budget or 1)
    observed = tuple(m.observed.with_tokens(tokens_mean) if tokens_measured else m.observed for m in measured.logs)
    full = observed[0].hs_full_share
    kinds = lg.header.extra.get("cap_bps_kind") or {}
    fits = [role_from_rates(x, r, lg.header.roles[x], x == producer, full, kinds.get(x)) for x in (producer, consumer)]
    # per-token cost assumed proportional (t0 = 0) so a token-budget what-if stays possible
    pfit, cfit = (replace(f, c_s_per_tok=f.busy_mean_s / tokens_mean) for f in fits)
    msg = (
        f"{lg.path}: no 'step' events, only 'rates' snapshots: step-time variability is assumed "
        f"(SCV {DEFAULT_SCV}) and step time is taken as proportional to tokens"
    )
    warnings.warn(AssumptionWarning(msg), stacklevel=3)
    _warn_rates_capacities(lg, pfit, cfit, kinds)
    n_ref, gpus = m0.roles[producer], lg.header.engine_gpus
    if shares_compute(lg):  # as a step log of one split on a shared host
        contention = ContentionFit.unmeasured(n_ref, gpus, **contention_priors(lg, None))
    else:
        contention = gpu_priors(n_ref, gpus, lg.header.gpus_per_engine)
    return dict(
        producer=pfit,
        consumer=cfit,
        tokens_mean=tokens_mean,
        tokens_range=(tokens_mean, tokens_mean),
        observed=observed,
        contention=contention,
        source=Source.RATES,
        tokens_measured=tokens_measured,
    )


def _warn_rates_capacities(lg: RunLog, pfit: RoleFit, cfit: RoleFit, kinds: Mapping[str, str]) -> None:
    """Warn, per role of a rates-only fit, where its capacity is known only as a range or a bound."""
    producer, consumer = pfit.role, cfit.role
    hs = lg.header.queue_feeding(consumer)
    for f, other, side in ((pfit, consumer, "it feeds"), (cfit, producer, "that feed it")):
        kind = kinds.get(f.role)
        n = lg.header.roles[f.role]
        workers = f"{n} worker{'s' if n != 1 else ''}"
        if kind is not None and f.ranged:
            lo, hi = (n * v for v in f.mu_range_bps)
            known = (
                f"at least {lo:.3g} b/s"
                if kind == "lower"
                else f"between {lo:.3g} b/s (its throughput) and {hi:.3g} b/s"
            )
            msg = (
                f"{lg.path}: '{f.role}' cap_bps is logged as "
                f"{'a lower bound' if kind == 'lower' else 'an upper estimate'}"
                f" (header cap_bps_kind), so its capacity is known only as {known} for {workers}"
            )
            warnings.warn(AssumptionWarning(msg), stacklevel=4)
        elif f.lower_bound:
            # the role's completions are the flow, which the other side paces: through q_hs where
            # the log declares it, else through the hand-off itself
            via = " through q_hs" if hs is not None else ""
            msg = (
                f"{lg.path}: '{f.role}' capacity is only bounded below ({f.mu_bps * n:.3g} b/s for {workers}): "
                f"no 'cap_bps', and its completions are paced{via} by the '{other}' workers {side}"
            )
            warnings.warn(AssumptionWarning(msg), stacklevel=4)


def _within_shows_contention(w: WithinLogContention | None) -> bool:
    """Some identified, unconfounded within-log slope departs from zero (dedicated GPUs included)."""
    if w is None or not w.estimated:
        return False
    return any(
        rc.usable(k) != 0.0 and abs(rc.usable(k)) > 1.96 * rc.slope(k)[1]
        for rc in (w.producer, w.consumer)
        for k in ("producer", "consumer")
    )


def _warn_shared_compute(logs: Sequence[RunLog], contention: ContentionFit, path: str) -> None:
    """Caveats on step times that depend on who else runs: shared GPUs, the split itself."""
    head = logs[0].header
    producer, consumer = head.producer, head.consumer
    for lg in logs:
        phys = lg.header.extra.get("physical_gpus")
        if isinstance(phys, (int, float)) and 0 < phys < sum(lg.header.roles.values()):
            msg = (
                f"{lg.path}: {sum(lg.header.roles.values())} workers shared {int(phys)} physical GPU(s): step "
                f"times include contention, so per-GPU rates (and the projections) are pessimistic for dedicated "
                f"GPUs"
            )
            warnings.warn(AssumptionWarning(msg), stacklevel=3)
    if contention.measured:
        msg = (
            f"step times depend on the split: each extra {producer} (one {consumer} fewer) changes a {producer}'s "
            f"step by {_pct_text(contention.k[0])} and a {consumer}'s by {_pct_text(contention.k[1])} "
            f"(fitted on logs at {contention.lo_producers}-{contention.hi_producers} {role_plural(producer)} of "
            f"{contention.gpus}); beyond that range {_prior_slope_text(contention, producer, consumer)}, and the "
            f"interval widens"
        )
        warnings.warn(AssumptionWarning(msg), stacklevel=3)
    elif contention.at_any_g:
        warnings.warn(AssumptionWarning(f"{path}: {gpu_priors_text(contention, producer, consumer)}"), stacklevel=3)
    elif contention.prior_se > 0:
        prior_p, prior_c = contention.role_se
        widen = (
            f"{100 * prior_p:.1f}%"
            if abs(prior_p - prior_c) < 5e-4
            else f"{100 * prior_p:.1f}% ({role_plural(producer)}) and {100 * prior_c:.1f}% ({role_plural(consumer)})"
        )
        _, shown = within_sharing(logs[0], contention.within)
        over = oversubscription(logs[0])
        if over:
            why = (
                f"{over[0]} workers ran on {over[1]} CPU cores (header 'cores'), so a busy worker's step time is "
                f"set by how many others are busy, which the split changes ({OVERSUBSCRIBED_SOURCE}), and"
            )
            widen += f" (ln({over[0]}/{over[1]}), for the cores)"
        elif shown:
            why = (
                f"the header does not say where the workers ran (no 'device' or 'physical_gpus'), and inside the "
                f"log {shown}, so the workers are taken to share a host's compute and their intervals carry that "
                f"slope per worker moved;"
            )
        else:
            why = "workers share a host's compute and"
        msg = (
            f"{path}: {why} one split was logged, so how step times "
            f"change with the split is not measured: {_prior_slope_text(contention, producer, consumer)} "
            f"(the mean of real shared-host sweeps), and the intervals widen by "
            f"{widen} per worker moved, and carry {100 * contention.run_se:.0f}% for the run-to-run shift of a "
            f"shared host and {100 * CONTENTION_SINGLE_SE:.1f}% more for a role where one of the two splits has a "
            f"lone worker of it and the other several; a log at a second split measures it"
        )
        warnings.warn(AssumptionWarning(msg), stacklevel=3)
    text = within_log_text(contention.within, producer, consumer)
    shown_only = bool(contention.shown_slope) and not contention.within.identified  # (said above)
    if text and not shown_only and (contention.prior_se > 0 or _within_shows_contention(contention.within)):
        warnings.warn(ContentionWarning(f"{path}: {text}"), stacklevel=3)


def gpu_priors_text(contention: ContentionFit, producer: str, consumer: str) -> str:
    """The caveat of `gpu_priors`: what is carried, and what would measure it."""
    sp, sc = contention.role_se
    return (
        f"one split of real GPUs and no step events, so how per-GPU rates change with the split is not "
        f"measured: {_prior_slope_text(contention, producer, consumer)} (published split tables: a role's "
        f"per-GPU rate moves with its own count and with the other role's on one host), the intervals widen by "
        f"{100 * sp:.0f}% ({role_plural(producer)}) and {100 * sc:.0f}% ({role_plural(consumer)}) per GPU moved, "
        f"and carry {100 * contention.run_se:.1f}% for another run on the same GPUs; a short run at a second "
        f"split measures it"
    )


def _prior_slope_text(contention: ContentionFit, producer: str, consumer: str) -> str:
    kp, kc = contention.prior_k
    if not kp and not kc:
        return "the nearest split's step times are kept"
    parts = [f"a {r}'s step {_pct_text(k)}" for r, k in ((producer, kp), (consumer, kc)) if k]
    return f"each extra {producer} is taken to change " + " and ".join(parts)


def fit_pipeline(measured: Measurement) -> PipelineFit:
    """Fit one model from the measured logs of one job (possibly at different splits)."""
    logs = [m.log for m in measured.logs]
    head = logs[0].header
    roles = _fit_steps(measured) if measured.with_steps else _fit_rates(measured)
    _warn_shared_compute(logs, roles["contention"], measured.logs[(measured.with_steps or [0])[0]].path)
    sync = fit_sync(measured.logs, measured.consumer)
    loader = fit_loader(measured.logs[0], roles["producer"])
    seqs = roles.get("seqs_mean")
    total = head.samples * head.epochs / seqs if head.samples and head.epochs and seqs else None
    hs, pre = head.queue_feeding(measured.consumer), head.queue_feeding(measured.producer)
    if hs is None:
        msg = (
            f"{logs[0].path}: the header declares no queue feeding '{measured.consumer}', so each batch is "
            f"modelled as handed straight from a '{measured.producer}' worker to a free '{measured.consumer}' "
            f"worker (no buffer) and no queue is advised; declare the pipeline's buffer (a queue in the header, "
            f"import-tb --queue hs:{measured.consumer}:CAP) to have it modelled"
        )
        warnings.warn(AssumptionWarning(msg), stacklevel=2)
    fit = PipelineFit(
        **roles,
        sync=sync,
        loader=loader,
        hs_cap=hs.cap if hs else 0,
        pre_cap=pre.cap if pre else 0,
        hs_bytes_per_token=head.hs_bytes_per_token,
        total_batches=total,
        link=fit_link(measured),
        hs_declared=hs is not None,
    )
    if loader.near_binding and fit.source is Source.STEPS:
        fit = calibrate_loader(fit)
    return fit


def fit_logs(logs: Sequence[RunLog]) -> PipelineFit:
    """`fit_pipeline` of `advisor.measure.measured.measure_logs` (for callers holding logs)."""
    return fit_pipeline(measure_logs(logs))


def gpu_priors(n_producer: int, gpus: int, gpus_per_worker: tuple[int, int] = (1, 1)) -> ContentionFit:
    """How step times change with the split on real GPUs where no step log measures it (bare
    numbers, rates-only logs of a GPU run): the priors of `advisor.model.priors` (``GPU_*``), from
    published split tables, around the given split (projections at any G count each role's
    distance by its own count: `ContentionFit.at_any_g`).
    """
    return ContentionFit.unmeasured(
        n_producer,
        gpus,
        run_se=GPU_RUN_SE,
        prior_k=(GPU_PRIOR_K_PRODUCER, GPU_PRIOR_K_CONSUMER),
        role_se=(GPU_SPLIT_SE_PRODUCER, GPU_SPLIT_SE_CONSUMER),
        at_any_g=True,
        gpus_per_worker=gpus_per_worker,
    )


def _given_roles(
    roles: Mapping[str, int],
    cap_bps: Mapping[str, float | Capacity | tuple[float, float] | str],
    tokens_per_batch: float,
    scv: float,
) -> list[RoleFit]:
    """Producer then consumer from given counts and capacities (a value, a range or a lower bound:
    `advisor.settings.as_capacity`); the first bad one is named."""
    names = list(roles)
    if len(names) != 2:
        raise SettingsError("roles", f"must name a producer and a consumer, got {names}")
    fits = []
    for r in names:
        n = roles[r]
        if n < 1:
            raise SettingsError("roles", f"'{r}' must have at least 1 worker, got {n}")
        value = cap_bps.get(r)
        if r not in cap_bps or (isinstance(value, (int, float)) and not isinstance(value, bool) and not value > 0):
            raise SettingsError("cap_bps", f"'{r}' must be > 0, got {value}")
        cap = as_capacity(f"cap_bps: '{r}'", value)
        mu = cap.point / n
        rf = RoleFit.unmeasured(
            r,
            mu,
            scv=scv,
            basis=Basis.BOUND if cap.kind == "bound" else Basis.GIVEN,
            c_s_per_tok=1.0 / mu / tokens_per_batch,
            lower_bound=cap.kind == "bound",
            mu_range_bps=() if cap.kind == "value" else (cap.low / n, cap.high / n),
        )
        fits.append(rf)
    return fits


def fit_from_numbers(
    roles: Mapping[str, int],
    cap_bps: Mapping[str, float | Capacity | tuple[float, float] | str],
    options: Options | None = None,
    /,
    *,
    pre_cap: int = DEFAULT_PRE_CAP,
) -> PipelineFit:
    """A fit from bare numbers (pool capacities in batches/s): the `what-if` path.

    Variability is assumed (``scv``, None: `DEFAULT_SCV`); the collective time ``sync_s`` (every
    ``sync_every`` consumer steps) is taken as measured at the given drafter count;
    ``hardware_priors``: carry what real GPUs do and the numbers cannot show (`gpu_priors`:
    per-GPU rates that change with a role's count and with the other role's, and run-to-run
    shift) around the given split, each role by its own count (so at any G).
    """
    o = options if options is not None else Options()
    tokens_per_batch = o.tokens_per_batch
    fits = _given_roles(roles, cap_bps, tokens_per_batch, DEFAULT_SCV if o.scv is None else o.scv)
    names = list(roles)
    # the collective time given at the given drafter count: how it scales with M is unknown, as from
    # a log at one M (the point assumes a ring; the intervals reach a flat cost)
    m = roles[names[1]]
    timed = m > 1 and o.sync_s > 0
    sync = SyncFit(
        o.sync_every,
        bandwidth_s=o.sync_s / ((m - 1) / m) if timed else 0.0,
        dur_by_workers={m: o.sync_s} if timed else {},
        measured=timed,
        scaling_identified=not (timed and o.sync_every > 0),
    )
    # the run the numbers stand for: the split given, flowing at the smaller pool capacity
    x_obs = min(f.mu_bps * roles[f.role] for f in fits)
    win = SteadyWindow(start_s=0.0, end_s=0.0, warmup_share=0.0, settled=True, basis="numbers", n_events=0)
    ob = ObservedRun(
        path="<numbers>",
        roles=dict(roles),
        bps=x_obs,
        tok_s=x_obs * tokens_per_batch,
        steady=win,
    )
    per = (o.gpus_per_worker or {}).get
    k = (int(per(names[0], 1)), int(per(names[1], 1)))  # GPUs per engine: ``roles`` counts engines
    gpus = roles[names[0]] * k[0] + roles[names[1]] * k[1]
    contention = gpu_priors(roles[names[0]], gpus, k) if o.hardware_priors else NO_CONTENTION
    return PipelineFit(
        producer=fits[0],
        consumer=fits[1],
        sync=sync,
        loader=LoaderFit(),
        hs_cap=DEFAULT_HS_CAP if o.hs_cap is None else o.hs_cap,
        pre_cap=pre_cap,
        tokens_mean=tokens_per_batch,
        source=Source.NUMBERS,
        tokens_range=(tokens_per_batch, tokens_per_batch),
        observed=(ob,),
        hs_bytes_per_token=o.hs_bytes_per_token,
        contention=contention,
    )
