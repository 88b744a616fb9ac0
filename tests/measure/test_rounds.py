"""The sync rounds' spread between ranks (`advisor.measure.rounds`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.measure.rounds import round_spread


def _rounds(m: int, k: int, n_rounds: int, sigma: float, rank_sd: float, seed: int = 0, short: int | None = None):
    """Steps and sync times of ``n_rounds`` rounds: each rank's step is 0.1 s plus noise of
    ``sigma``, plus an offset of ``rank_sd`` drawn per rank and round (a slow rank stays slow for
    the round); rank ``short`` serves one step less in every round."""
    rng = np.random.default_rng(seed)
    rows, syncs, t0 = [], [], 0.0
    for _ in range(n_rounds):
        ends = []
        for w in range(m):
            offset = rng.normal(0.0, rank_sd)
            t = t0
            for _ in range(k - (1 if w == short else 0)):
                busy = 0.1 + offset + rng.normal(0.0, sigma)
                t += busy
                rows.append((t, w, busy))
            ends.append(t)
        t0 = max(ends) + 0.01
        syncs.append(t0)
    steps = pd.DataFrame(rows, columns=["t", "worker", "busy"]).sort_values("t", kind="stable")
    return steps, np.array([0.0, *syncs])


def test_independent_steps_give_a_ratio_near_one():
    steps, sync_t = _rounds(m=6, k=10, n_rounds=400, sigma=0.01, rank_sd=0.0)
    got = round_spread(steps, sync_t, k=10, m=6)
    assert got.rounds == 400 and got.dof == 400 * 5
    assert got.ss_scaled / got.dof == pytest.approx(1.0, abs=0.08)


def test_a_slow_rank_per_round_raises_the_ratio_by_k_times_its_variance_share():
    # var(S) = k sigma_e^2 + k^2 tau^2 and var(busy) = sigma_e^2 + tau^2: with sigma_e = tau the
    # ratio is (k + k^2) / (2 k) = (1 + k) / 2 = 5.5 at k = 10
    steps, sync_t = _rounds(m=5, k=10, n_rounds=400, sigma=0.01, rank_sd=0.01, seed=1)
    got = round_spread(steps, sync_t, k=10, m=5)
    assert got.ss_scaled / got.dof == pytest.approx(5.5, rel=0.1)


def test_incomplete_rounds_are_not_counted():
    steps, sync_t = _rounds(m=4, k=5, n_rounds=50, sigma=0.01, rank_sd=0.0, short=2)
    assert round_spread(steps, sync_t, k=5, m=4) is None


@pytest.mark.parametrize(("k", "m", "n_sync"), [(0, 4, 50), (5, 1, 50), (5, 4, 1)])
def test_no_sync_no_spread(k, m, n_sync):
    steps, sync_t = _rounds(m=max(m, 1), k=max(k, 1), n_rounds=50, sigma=0.01, rank_sd=0.0)
    assert round_spread(steps, sync_t[:n_sync], k=k, m=m) is None


def test_the_untimed_time_of_a_round_is_what_neither_steps_nor_dur_hold():
    # each round's sync event lands 10 ms after the last rank's last step; the logged all-reduce
    # took 4 ms of them, so 6 ms a round is the collectives' untimed overhead
    steps, sync_t = _rounds(m=4, k=2, n_rounds=100, sigma=0.01, rank_sd=0.0)
    dur = np.full(len(sync_t), 0.004)
    dur[5] = np.nan  # a sync without its dur leaves its round out of the overhead
    got = round_spread(steps, sync_t, k=2, m=4, sync_dur=dur)
    assert got.overhead_rounds == 99
    assert got.overhead_sum_s / got.overhead_rounds == pytest.approx(0.006, abs=1e-9)
    assert round_spread(steps, sync_t, k=2, m=4).overhead_rounds == 0
