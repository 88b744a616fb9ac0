"""The stages around the two roles: the drafters' sync and the input loader.

Drafter sync (M > 1, data-parallel): one round of ``k = sync_every`` steps per rank costs
``T(M) = k m + sqrt(k r) sigma e_M + T_ar(M) + o`` (m, sigma: a drafter step's mean and standard
deviation; ``e_M``: the expected maximum of M standard normals, the barrier waits for the slowest
rank; ``r``: the rounds' variance ratio, `advisor.measure.rounds`, pooled with ``ROUND_PRIOR_DOF``
of independent steps; ``o``: the rounds' mean untimed time, ``SyncFit.overhead_s``). Per-rank
scaling ``s(M) = k m / T(M)``. ``T_ar`` (``sync`` events' ``dur``) is fitted on
``c + a (M-1) + b (M-1)/M`` by non-negative least squares over the M seen; from one M_0 the scaling
is unidentified and the intervals span flat (T_0) and ring (``T_0 r(M)/r(M_0)``, ``r(M) = (M-1)/M``,
the point); with only M = 1 seen, ``T_ar = 0`` is assumed and warned.

Loader: producers starved more than ``INPUT_STARVED_SHARE`` of their time with near-empty
prefetch queues make it bind (its capacity: their completion rate, from the window's exact count;
its arrival SCV from their start gaps); one close to binding (``LOADER_STARVED_MIN``,
``PRE_EMPTY_SHARE``) is calibrated to the observed split's rate. Where the steps are a sample
that keeps each with probability p (`RunLog.sample_share`), thinning a renewal process of gap
SCV c2 gives p c2 + (1 - p), so c2 = (scv_sample - (1 - p)) / p: an estimate, as real arrival
streams are not quite renewal (how close it came on the loader-bound test scenario:
BENCHMARKS.md 20.11).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from advisor.errors import AssumptionWarning
from advisor.measure.measured import MeasuredLog
from advisor.measure.rounds import round_spread
from advisor.model.chain import project_split
from advisor.model.params import LoaderFit, PipelineFit, RoleFit, SyncFit
from advisor.settings import role_count

INPUT_STARVED_SHARE = 0.05
PRE_EMPTY_DEPTH = 1.0  # mean prefetch depth below this = empty
# A loader close to binding: producers starved at least this share of their time while some
# prefetch queue is seen empty in at least PRE_EMPTY_SHARE of the snapshots. Its capacity is then
# calibrated: the lambda_L that reproduces the observed rate at the observed split, when the
# model without it over-predicts that split by more than LOADER_MIN_GAP.
LOADER_STARVED_MIN = 0.01
PRE_EMPTY_SHARE = 0.05
LOADER_MIN_GAP = 0.005
# the rounds' spread is pooled with this many degrees of freedom of independent steps (ratio 1),
# so a log of a few rounds moves it little
ROUND_PRIOR_DOF = 10


def fit_sync(measured: Sequence[MeasuredLog], consumer: str) -> SyncFit:
    """The drafters' sync: steps per sync, the collective's time by drafter count and the spread of
    the ranks' rounds (see SyncFit).
    """
    k = max((ml.log.header.sync_every for ml in measured), default=0)
    spread, overhead_s = _rounds(measured, consumer, k)
    by_m: dict[int, list[float]] = {}
    sizes: list[float] = []
    for ml in measured:
        lg = ml.log
        m = lg.header.roles[consumer]
        if m > 1 and len(lg.syncs):
            d = ml.syncs["dur"].dropna()
            if "bytes" in ml.syncs:
                sizes.extend(float(b) for b in ml.syncs["bytes"].dropna() if b > 0)
            if len(d):
                by_m.setdefault(m, []).extend(d.tolist())
                if not lg.header.sync_every:
                    # infer steps per sync from the window's counts (every step and sync, sampled or
                    # not) when the header does not say
                    k = max(k, int(round(ml.sums[consumer]["n"] / m / ml.sync_count)))
    means = {m: float(np.mean(v)) for m, v in by_m.items()}
    size = float(np.mean(sizes)) if sizes else None
    fit = SyncFit(
        k,
        bytes_per_sync=size,
        round_var_ratio=spread,
        overhead_s=overhead_s,
        dur_by_workers=means,
        measured=bool(means),
    )
    if len(means) == 1:
        ((m, t),) = means.items()
        msg = (
            f"sync cost measured at {role_count(m, consumer)} only ({t * 1e3:.0f} ms per all-reduce): how it "
            f"scales with the {consumer} count is unknown: other {consumer} counts are projected for a ring "
            f"all-reduce ((M-1)/M), their intervals reaching a flat one (the same cost at any M); logs at a "
            f"second {consumer} count would measure it"
        )
        warnings.warn(AssumptionWarning(msg), stacklevel=2)
        return replace(fit, bandwidth_s=t / ((m - 1) / m), scaling_identified=False)
    if not means:
        return fit
    from scipy.optimize import nnls

    # constant (e.g. a switch-offloaded or latency-dominated collective), per-hop latency, ring bandwidth
    ms = np.array(sorted(means), dtype=float)
    a_mat = np.column_stack([np.ones_like(ms), ms - 1, (ms - 1) / ms])
    coef, _ = nnls(a_mat, np.array([means[int(m)] for m in ms]))
    return replace(fit, latency_s=float(coef[1]), bandwidth_s=float(coef[2]), fixed_s=float(coef[0]))


def _rounds(measured: Sequence[MeasuredLog], consumer: str, k: int) -> tuple[float, float]:
    """``var(S) / (k sigma^2)`` of a sync round's busy sum between ranks, pooled over the logs'
    complete rounds (`advisor.measure.rounds`) with ``ROUND_PRIOR_DOF`` degrees of freedom of
    independent steps (ratio 1): ``(sum q + d0) / (sum dof + d0)``, 1 without complete rounds; and
    the rounds' mean untimed overhead (seconds, at least 0; 0 without complete rounds)."""
    ss, dof, rounds, overhead = 0.0, 0, 0, 0.0
    for ml in measured:
        m = ml.log.header.roles[consumer]
        steps = ml.steps.get(consumer)
        if steps is None or not len(ml.syncs):
            continue
        got = round_spread(steps, ml.syncs["t"].to_numpy(float), k, m, ml.syncs["dur"].to_numpy(float))
        if got is not None:
            ss, dof = ss + got.ss_scaled, dof + got.dof
            rounds, overhead = rounds + got.overhead_rounds, overhead + got.overhead_sum_s
    return (ss + ROUND_PRIOR_DOF) / (dof + ROUND_PRIOR_DOF), max(overhead / rounds, 0.0) if rounds else 0.0


def fit_loader(ml: MeasuredLog, producer: RoleFit) -> LoaderFit:
    """The input loader from the first log: input-bound, near binding, or free (see the fit docstring)."""
    lg, w = ml.log, ml.window
    pre = lg.header.queue_feeding(lg.header.producer)
    depth = ml.pre_mean_depth
    starved = producer.starved_share
    empty = depth is None or depth < PRE_EMPTY_DEPTH
    bound = bool(np.isfinite(starved) and starved > INPUT_STARVED_SHARE and empty)
    cap = scv = None
    if bound and lg.has_steps:
        tgt = ml.steps[lg.header.producer]
        cap = ml.sums[lg.header.producer]["n"] / max(w.duration_s, 1e-12)
        # a batch reaches a starved target when the loader finishes it: start = t - blocked - busy
        arrivals = np.sort((tgt["t"] - tgt["blocked"] - tgt["busy"]).to_numpy())
        gaps = np.diff(arrivals)
        scv = float(gaps.var() / gaps.mean() ** 2) if len(gaps) > 2 and gaps.mean() > 0 else 1.0
        # where the steps are a sample (kept with probability p), the gaps' SCV is un-thinned
        # (module docstring)
        p = lg.sample_share(lg.header.producer)
        scv = max((scv - (1.0 - p)) / p, 0.0)
    runs_dry = empty  # or some prefetch queue seen empty in PRE_EMPTY_SHARE of the snapshots
    if not empty and pre is not None and f"qmin_{pre.name}" in lg.rates and len(lg.rates):
        q = ml.rates[f"qmin_{pre.name}"].dropna()
        runs_dry = len(q) > 0 and float((q < 0.5).mean()) >= PRE_EMPTY_SHARE
    near = bool(not bound and np.isfinite(starved) and starved > LOADER_STARVED_MIN and runs_dry)
    return LoaderFit(
        input_bound=bound,
        capacity_bps=cap,
        scv=scv if scv is not None else 1.0,
        producer_starved_share=float(starved),
        pre_mean_depth=depth,
        near_binding=near,
    )


def calibrate_loader(fit: PipelineFit) -> PipelineFit:
    """Engage a near-binding loader: solve its capacity so the model meets the observed split's rate
    (bisection in log space; the throughput rises monotonically with the loader's capacity).
    """
    ob = fit.observed[0]
    n, m = ob.roles.get(fit.producer.role, 0), ob.roles.get(fit.consumer.role, 0)
    if n < 1 or m < 1 or ob.bps <= 0 or fit.pre_cap < 1:
        return fit
    free = project_split(fit, n, m, interval=False).x_bps
    if free <= ob.bps * (1 + LOADER_MIN_GAP):
        return fit  # the pipeline without a loader limit already explains the observed rate

    def x_at(lam: float) -> float:
        f = replace(fit, loader=replace(fit.loader, input_bound=True, capacity_bps=lam))
        return project_split(f, n, m, interval=False).x_bps

    lo, hi = ob.bps, 50.0 * ob.bps
    if x_at(hi) < ob.bps:
        return fit
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if x_at(mid) < ob.bps:
            lo = mid
        else:
            hi = mid
    return replace(fit, loader=replace(fit.loader, input_bound=True, capacity_bps=hi, calibrated=True))
