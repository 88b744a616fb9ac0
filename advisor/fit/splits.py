"""How step times change with the split: contention across logs of one G (see `ContentionFit`)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from advisor.fit.roles import log_mean_se
from advisor.ingest.runlog import RunLog
from advisor.measure.contention import WithinLogContention
from advisor.measure.measured import MeasuredLog
from advisor.model.params import ContentionFit
from advisor.model.priors import CONTENTION_PRIOR_K_CONSUMER, CONTENTION_PRIOR_K_PRODUCER, CONTENTION_PRIOR_SE, RUN_SE


def shares_compute(log: RunLog) -> bool:
    """Workers share one host's compute: CPU workers, or more workers than physical GPUs. Only then
    is a contention prior carried from one split (dedicated GPUs: assumed independent, as the
    emulated and simulated validation sets are; logs at two splits measure it either way). The
    trainer's emulation mode (``mode: emulate``) replays step times without computing, so its
    workers share nothing."""
    extra = log.header.extra
    if extra.get("mode") == "emulate":
        return False
    phys = extra.get("physical_gpus")
    workers = sum(log.header.roles.values())
    return extra.get("device") == "cpu" or (isinstance(phys, (int, float)) and 0 < phys < workers)


def fit_contention(measured: Sequence[MeasuredLog], same: Sequence[int], within: WithinLogContention | None,
                   producer: str, first: int) -> ContentionFit:
    """Per-role slope of log mean busy time on the producer count, over logs of one G, with the first
    step log's within-log slopes on busy peers (``within``, measured; see ContentionFit)."""
    consumer = measured[first].log.header.consumer
    g = sum(measured[first].roles.values())
    n_ref = measured[first].roles[producer]
    prior = CONTENTION_PRIOR_SE if shares_compute(measured[first].log) else 0.0
    prior_k = (CONTENTION_PRIOR_K_PRODUCER, CONTENTION_PRIOR_K_CONSUMER) if prior else (0.0, 0.0)
    idx = [i for i in same if sum(measured[i].roles.values()) == g]
    ns = np.array([measured[i].roles[producer] for i in idx], float)
    if len(set(ns.tolist())) < 2:
        return ContentionFit(ref_producers=n_ref, gpus=g, producer_k=0.0, consumer_k=0.0,
                             producer_se=0.0, consumer_se=0.0, measured=False, lo_producers=n_ref,
                             hi_producers=n_ref, prior_se=prior,
                             run_se=RUN_SE if prior else 0.0, within=within, prior_k=prior_k)
    out = {}
    for r in (producer, consumer):
        y = np.array([math.log(measured[i].steps[r]["busy"].mean()) for i in idx])
        # one run's own level shift is RUN_SE / sqrt(2) (RUN_SE is the difference between two runs)
        se = np.array([max(log_mean_se(measured[i].steps[r], RUN_SE / math.sqrt(2) if prior else 0.0), 1e-4)
                       for i in idx])
        w = 1.0 / se ** 2
        xm = float((w * ns).sum() / w.sum())
        sxx = float((w * (ns - xm) ** 2).sum())
        k = float((w * (ns - xm) * (y - (w * y).sum() / w.sum())).sum() / sxx)
        k_se = math.sqrt(1.0 / sxx)
        if len(idx) > 2:
            resid = y - (w * y).sum() / w.sum() - k * (ns - xm)
            chi2 = float((w * resid ** 2).sum()) / (len(idx) - 2)
            k_se *= math.sqrt(max(chi2, 1.0))   # scatter beyond the logs' own errors widens it
        out[r] = (k, k_se)
    return ContentionFit(ref_producers=n_ref, gpus=g, producer_k=out[producer][0], consumer_k=out[consumer][0],
                         producer_se=out[producer][1], consumer_se=out[consumer][1], measured=True,
                         lo_producers=int(ns.min()), hi_producers=int(ns.max()), prior_se=prior,
                         run_se=RUN_SE if prior else 0.0, within=within, prior_k=prior_k)


def contention_ref_busy(measured: Sequence[MeasuredLog], same: Sequence[int], producer: str, role: str,
                        cont: ContentionFit) -> float:
    """Mean busy time of ``role`` at the reference split, from the fitted line (weighted by steps)."""
    vals, wts = [], []
    for i in same:
        if sum(measured[i].roles.values()) != cont.gpus:
            continue
        st = measured[i].steps[role]
        k = cont.producer_k if role == producer else cont.consumer_k
        d = measured[i].roles[producer] - cont.ref_producers
        vals.append(math.log(st["busy"].mean()) - k * d)
        wts.append(len(st))
    return float(math.exp(np.average(vals, weights=wts)))
