"""Project every split N + M = G of one fitted pipeline.

Returns a DataFrame, one row per split (N >= 1 producers, M >= 1 consumers), columns:

==================  ===========================================================================
n_<producer>        producer workers (targets), N
n_<consumer>        consumer workers (drafters), M
bps                 projected throughput, batches/s (`advisor.model`)
bps_low, bps_high   95% interval: the model at the low/high ends of both fitted rates' intervals
tok_s               bps x tokens per batch
bound_bps           naive bound min(N mu_p, M mu_c s(M)[, loader]) for contrast
efficiency          bps / max GPU-role capacity (DESIGN.md)
gpu_util            compute-busy GPU-seconds / all GPU-seconds
bottleneck          role with the smallest capacity ("loader" when input-bound)
producer_blocked    share of a producer's time blocked on a full q_hs
consumer_starved    share of a consumer's time waiting on an empty q_hs
hs_mean_depth       mean q_hs depth, batches
eta_s               time to finish the rest of the job at this split (NaN if the job size is unknown)
observed            True for the split(s) the logs ran
==================  ===========================================================================
"""
from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from .fit import PipelineFit
from .model import project_split


def remaining_batches(fit: PipelineFit) -> float | None:
    """Batches left in the job: from samples x epochs and progress, else the pipeline's own ETA."""
    ob = fit.observed[0]
    if fit.total_batches:
        done = ob.done if ob.done is not None else 0.0
        return fit.total_batches * max(1.0 - done, 0.0)
    if ob.eta_s is not None and ob.bps > 0:
        return ob.eta_s * ob.bps
    return None


def project(fit: PipelineFit, gpus: int, *, hs_cap: int | None = None, tokens_per_batch: float | None = None,
            splits: Sequence[tuple[int, int]] | None = None) -> pd.DataFrame:
    """All splits of ``gpus`` GPUs (or the given ``(N, M)`` pairs), as documented above."""
    if gpus < 2 and splits is None:
        raise ValueError(f"gpus must be >= 2 to split between two roles, got {gpus}")
    p, c = fit.roles
    pairs = list(splits) if splits is not None else [(n, gpus - n) for n in range(gpus - 1, 0, -1)]
    lo_scale = (fit.producer.mu_low_bps / fit.producer.mu_bps, fit.consumer.mu_low_bps / fit.consumer.mu_bps)
    hi_scale = (fit.producer.mu_high_bps / fit.producer.mu_bps, fit.consumer.mu_high_bps / fit.consumer.mu_bps)
    left = remaining_batches(fit)
    tokens = fit.tokens_mean if tokens_per_batch is None else tokens_per_batch
    if tokens_per_batch is not None and left is not None:
        left = left * fit.tokens_mean / tokens_per_batch   # same tokens to process, other batch size
    observed = {tuple(o.roles.get(r, 0) for r in (p, c)) for o in fit.observed}
    rows = []
    for n, m in pairs:
        mid = project_split(fit, n, m, hs_cap=hs_cap, tokens_per_batch=tokens_per_batch, gpus=gpus)
        low = project_split(fit, n, m, hs_cap=hs_cap, tokens_per_batch=tokens_per_batch, gpus=gpus,
                            mu_scale=lo_scale).x_bps
        high = project_split(fit, n, m, hs_cap=hs_cap, tokens_per_batch=tokens_per_batch, gpus=gpus,
                             mu_scale=hi_scale).x_bps
        rows.append({
            f"n_{p}": n, f"n_{c}": m, "bps": mid.x_bps, "bps_low": min(low, mid.x_bps),
            "bps_high": max(high, mid.x_bps), "tok_s": mid.x_bps * tokens, "bound_bps": mid.bound_bps,
            "efficiency": mid.efficiency, "gpu_util": mid.gpu_util, "bottleneck": mid.bottleneck,
            "producer_blocked": mid.producer_blocked, "consumer_starved": mid.consumer_starved,
            "hs_mean_depth": mid.hs_mean_depth,
            "eta_s": left / mid.x_bps if left is not None and mid.x_bps > 0 else math.nan,
            "observed": (n, m) in observed,
        })
    df = pd.DataFrame(rows)
    df["bottleneck"] = df["bottleneck"].astype(str)
    return df

