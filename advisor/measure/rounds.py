"""The drafters' sync rounds in a step log: how far apart the ranks reach the barrier.

A round of ``k = sync_every`` steps per rank ends at a barrier, where every rank waits for the
slowest. The model's round time (`advisor.model.chain`) needs the spread, between ranks, of a
round's busy sum ``S_i`` (the k step times rank i served in it). Steps drawn independently give
``sd(S) = sqrt(k) sigma`` (sigma: one step's standard deviation); on the real sweeps a rank's
steps in one round are correlated (a slow rank stays slow for a while), and the measured spread
is larger (BENCHMARKS.md 19.12).

Measured here from the steps and the ``sync`` events inside the steady window: the rounds are
the intervals between consecutive sync events (a rank's steps of round j end after sync event
j - 1 and before sync event j); a round counts where each of the M ranks finished exactly k
steps in it (a sampled log has no complete round). Per complete round, the ranks' sums give

    q_j = sum_i (S_i - mean_i S_i)^2 / (k sigma^2),      M - 1 degrees of freedom,

and `RoundSpread` holds their totals: ``sum_j q_j / sum_j (M - 1)`` estimates the variance ratio
``var(S) / (k sigma^2)``, 1 for independent steps.

A round also holds time no event times: the trainer's control and MAX collectives around the
logged all-reduce (`trainer/sync.py`). Per complete round, ``o_j = t_j - max_i e_ij - dur_j`` (``t_j``:
sync event j; ``e_ij``: the end of rank i's last step in the round) is that overhead; on sync2g14's
real logs it is 1.8-2.4 ms a round beside a logged ``dur`` of 2.5-12 ms (BENCHMARKS.md 19.25).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class RoundSpread:
    """The complete rounds of one log: their scaled squared deviations and degrees of freedom."""

    ss_scaled: float  # sum over rounds of sum_i (S_i - mean S)^2 / (k sigma^2)
    dof: int  # sum over rounds of M - 1
    rounds: int
    overhead_sum_s: float = 0.0  # sum of o_j over the rounds whose sync logged a ``dur`` (module docstring)
    overhead_rounds: int = 0  # how many rounds that sum holds


def round_spread(
    steps: pd.DataFrame, sync_t: np.ndarray, k: int, m: int, sync_dur: np.ndarray | None = None
) -> RoundSpread | None:
    """The between-rank spread and the untimed overhead of the sync rounds of one role's steady
    steps (module docstring); ``sync_dur``: each sync event's ``dur``, in ``sync_t``'s order."""
    if k <= 0 or m <= 1 or len(sync_t) < 2 or len(steps) < 2:
        return None
    busy = steps["busy"].to_numpy(float)
    var = float(np.var(busy, ddof=1))
    if not var > 0:
        return None
    order = np.argsort(np.asarray(sync_t, float), kind="stable")
    edges = np.asarray(sync_t, float)[order]
    end_t = steps["t"].to_numpy(float)
    rnd = np.searchsorted(edges, end_t, side="left")
    inside = (rnd > 0) & (rnd < len(edges))
    frame = pd.DataFrame(
        {"round": rnd[inside], "worker": steps["worker"].to_numpy()[inside], "busy": busy[inside], "t": end_t[inside]}
    )
    per_rank = frame.groupby(["round", "worker"], sort=False).agg(
        size=("busy", "size"), sum=("busy", "sum"), t=("t", "max")
    )
    per_rank = per_rank.reset_index()
    full = per_rank.groupby("round")["size"].agg(["size", "min", "max"])
    complete = full.index[(full["size"] == m) & (full["min"] == k) & (full["max"] == k)]
    sums = per_rank.loc[per_rank["round"].isin(complete)]
    if sums.empty:
        return None
    dev = sums["sum"] - sums.groupby("round")["sum"].transform("mean")
    overhead = np.empty(0)
    if sync_dur is not None:
        last = sums.groupby("round")["t"].max()
        j = last.index.to_numpy()
        overhead = edges[j] - last.to_numpy() - np.asarray(sync_dur, float)[order][j]
        overhead = overhead[np.isfinite(overhead)]
    return RoundSpread(
        ss_scaled=float((dev**2).sum()) / (k * var),
        dof=len(complete) * (m - 1),
        rounds=len(complete),
        overhead_sum_s=float(overhead.sum()),
        overhead_rounds=len(overhead),
    )
