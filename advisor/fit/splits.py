"""How step times change with the split: contention across logs of one G (see `ContentionFit`).

A contention prior is carried from one split where workers share a host's compute: the header
says so (`shares_compute`), or, silent about devices, the log shows it (`within_sharing`: a
within-log slope on busy peers whose 95% low end is at least ``WITHIN_SHARED_SLOPE``; a slope
merely beyond its half-width passes by chance too often, BENCHMARKS.md 20.11). Then both roles
carry ``hypot(prior, slope)`` per worker moved. A header whose ``cores`` is below the worker
processes (`oversubscription`) raises the prior to ln(workers / cores) where larger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from advisor.fit.roles import drift, log_mean_var
from advisor.ingest.runlog import RunLog
from advisor.measure.contention import WithinLogContention
from advisor.measure.measured import MeasuredLog
from advisor.model.params import ContentionFit
from advisor.model.priors import (
    CONTENTION_PRIOR_K_CONSUMER,
    CONTENTION_PRIOR_K_PRODUCER,
    CONTENTION_PRIOR_SE,
    RUN_SE,
    oversubscribed_se,
)
from advisor.stats import t_975

WITHIN_SHARED_SLOPE = 0.05  # ln step time per busy peer, at a slope's 95% low end: shows shared compute


def declares_device(log: RunLog) -> bool:
    """Whether the header says where the workers ran (``device`` or ``physical_gpus``, or emulation)."""
    extra = log.header.extra
    return "device" in extra or "physical_gpus" in extra or extra.get("mode") == "emulate"


def within_sharing(log: RunLog, within: WithinLogContention | None) -> tuple[float, str]:
    """The largest within-log slope that shows shared compute on a header silent about devices, and its sentence."""
    if declares_device(log) or within is None or not within.estimated:
        return 0.0, ""
    best, text = 0.0, ""
    for rc in (within.producer, within.consumer):
        for which, peer in (("producer", log.header.producer), ("consumer", log.header.consumer)):
            b, se = rc.slope(which)
            half = t_975(19) * se
            if math.isfinite(se) and b - half >= WITHIN_SHARED_SLOPE and b > best:
                best = b
                text = f"a {rc.role}'s step {100 * math.expm1(b):+.1f}% per extra busy {peer} (95% +-{100 * half:.1f}%)"
    return best, text


def oversubscription(log: RunLog) -> tuple[int, int] | None:
    """Whether the host is oversubscribed: the header's ``cores`` below the processes the roles'
    engines hold (``engine_gpus``), with the workers computing on CPU (``device`` "cpu", or not said).
    """
    if log.header.extra.get("device") not in (None, "cpu"):
        return None
    cores = log.header.extra.get("cores")
    workers = log.header.engine_gpus
    if isinstance(cores, int) and not isinstance(cores, bool) and 0 < cores < workers:
        return workers, cores
    return None


def shared_prior_se(log: RunLog) -> float:
    """The shared host's prior per worker moved: ``CONTENTION_PRIOR_SE`` or ln(workers / cores)."""
    over = oversubscription(log)
    return max(CONTENTION_PRIOR_SE, oversubscribed_se(*over) if over else 0.0)


def shares_compute(log: RunLog) -> bool:
    """Workers share one host's compute: CPU workers, more workers than physical GPUs, or too few
    cores; not the trainer's emulation (``mode: emulate``), which computes nothing."""
    extra = log.header.extra
    if extra.get("mode") == "emulate":
        return False
    phys = extra.get("physical_gpus")
    workers = sum(log.header.roles.values())
    return (
        extra.get("device") == "cpu"
        or (isinstance(phys, (int, float)) and 0 < phys < workers)
        or oversubscription(log) is not None
    )


def contention_priors(lg: RunLog, within: WithinLogContention | None) -> dict:
    """`ContentionFit`'s priors for a log of one G: a shared host's (the prior, its slope, the
    run-to-run shift), or none on dedicated devices."""
    shown, _ = within_sharing(lg, within)
    prior = shared_prior_se(lg) if shares_compute(lg) or shown else 0.0
    role_se = (prior, prior)
    if prior and within is not None and within.estimated:
        # widened by a role's own identified within-log slope (or the slope that showed shared compute)
        own = (within.producer.usable("producer"), within.consumer.usable("consumer"))
        role_se = tuple(math.hypot(prior, max(o, shown) if shown else o) for o in own)
    return dict(
        prior_se=prior,
        role_se=role_se,
        run_se=RUN_SE if prior else 0.0,
        within=within,
        prior_k=(CONTENTION_PRIOR_K_PRODUCER, CONTENTION_PRIOR_K_CONSUMER) if prior else (0.0, 0.0),
        shown_slope=shown,
        gpus_per_worker=lg.header.gpus_per_engine,
    )


def fit_contention(
    measured: Sequence[MeasuredLog], same: Sequence[int], within: WithinLogContention | None, first: int
) -> tuple[ContentionFit, dict[str, float] | None]:
    """Per-role slope of log mean busy time on the producer count, over logs of one G, with the first
    step log's within-log slopes on busy peers (see ContentionFit); and, where measured, each role's
    mean busy time at the reference split from the fitted line (the logs' means, weighted by steps).
    """
    lg = measured[first].log
    producer, consumer = lg.header.producer, lg.header.consumer
    g = lg.header.engine_gpus
    n_ref = measured[first].roles[producer]
    priors = contention_priors(lg, within)
    prior = priors["prior_se"]
    idx = [i for i in same if measured[i].log.header.engine_gpus == g]
    ns = np.array([measured[i].roles[producer] for i in idx], float)
    if len(set(ns.tolist())) < 2:
        return ContentionFit.unmeasured(n_ref, g, **priors), None
    out, ref_busy = {}, {}
    for r in (producer, consumer):
        steps = [measured[i].steps[r] for i in idx]
        y = np.array([math.log(st["busy"].mean()) for st in steps])
        # one run's own level shift is RUN_SE / sqrt(2) (RUN_SE is the difference between two runs)
        run_var = (RUN_SE / math.sqrt(2) if prior else 0.0) ** 2
        var = [log_mean_var(st["busy"].to_numpy(), drift(st), run_var) for st in steps]
        w = 1.0 / np.maximum(np.sqrt(var), 1e-4) ** 2
        xm = float((w * ns).sum() / w.sum())
        sxx = float((w * (ns - xm) ** 2).sum())
        k = float((w * (ns - xm) * (y - (w * y).sum() / w.sum())).sum() / sxx)
        k_se = math.sqrt(1.0 / sxx)
        if len(idx) > 2:
            resid = y - (w * y).sum() / w.sum() - k * (ns - xm)
            chi2 = float((w * resid**2).sum()) / (len(idx) - 2)
            k_se *= math.sqrt(max(chi2, 1.0))  # scatter beyond the logs' own errors widens it
        out[r] = (k, k_se)
        at_ref = y - k * (ns - n_ref)  # each log's level moved to the reference split
        ref_busy[r] = float(math.exp(np.average(at_ref, weights=[len(st) for st in steps])))
    fit = ContentionFit(
        ref_producers=n_ref,
        gpus=g,
        k=(out[producer][0], out[consumer][0]),
        k_se=(out[producer][1], out[consumer][1]),
        measured=True,
        lo_producers=int(ns.min()),
        hi_producers=int(ns.max()),
        **priors,
    )
    return fit, ref_busy
