"""The chain model: closed forms, invariants, and agreement with exact simulation."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from advisor.model import chain


@pytest.mark.parametrize("b", [0, 1, 2, 5, 20])
def test_balanced_single_servers_closed_form(b):
    # one server each side, exponential, balanced: X = mu (b + 2) / (b + 3)
    mu = 1.7
    res = chain(1, 1, mu, mu, b, 1.0, 1.0)
    assert res.x_bps == pytest.approx(mu * (b + 2) / (b + 3), rel=1e-9)


def test_unbalanced_single_servers_closed_form():
    # M/M/1/K-like tandem with blocking: states 0..b+2, ratio r = mu_p / mu_c
    mu_p, mu_c, b = 2.0, 1.0, 3
    r = mu_p / mu_c
    n_states = b + 3
    pi = r ** np.arange(n_states)
    pi /= pi.sum()
    assert chain(1, 1, mu_p, mu_c, b, 1, 1).x_bps == pytest.approx(mu_c * (1 - pi[0]), rel=1e-9)


def test_deep_smooth_queue_reaches_the_bound():
    res = chain(7, 1, 0.92 / 7, 0.86, 20, 0.03, 0.03)
    assert res.x_bps == pytest.approx(0.86, rel=2e-3)
    assert res.queue_mean > 18          # drafter-bound: q_hs nearly full
    assert res.consumer_starved < 0.01


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 12), m=st.integers(1, 12), mu_p=st.floats(0.01, 10), mu_c=st.floats(0.01, 10),
       b=st.integers(0, 60), scv_p=st.floats(0.0, 3.0), scv_c=st.floats(0.0, 3.0))
def test_throughput_never_exceeds_min_capacity(n, m, mu_p, mu_c, b, scv_p, scv_c):
    res = chain(n, m, mu_p, mu_c, b, scv_p, scv_c)
    assert 0 < res.x_bps <= min(n * mu_p, m * mu_c) * (1 + 1e-9)
    assert 0 <= res.producer_blocked <= 1 and 0 <= res.consumer_starved <= 1
    assert 0 <= res.queue_mean <= b + 1e-9


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 8), m=st.integers(1, 8), ratio=st.floats(0.3, 3.0), scv=st.floats(0.01, 2.0))
def test_deeper_queue_never_hurts(n, m, ratio, scv):
    xs = [chain(n, m, ratio, 1.0, b, scv, scv).x_bps for b in (0, 1, 2, 5, 10, 40)]
    assert all(b >= a - 1e-12 for a, b in zip(xs, xs[1:]))


def test_burstier_service_costs_throughput():
    smooth = chain(4, 4, 1.0, 1.0, 4, 0.05, 0.05).x_bps
    bursty = chain(4, 4, 1.0, 1.0, 4, 1.0, 1.0).x_bps
    assert bursty < smooth < 4.0


def test_chain_matches_exact_simulation_exponential():
    from advisor.simulate import simulate
    rng = np.random.default_rng(3)
    n = 60000
    tgt = rng.exponential(1 / 0.5, n)     # two targets at 0.5 b/s each
    dft = rng.exponential(1 / 1.1, n)     # one drafter at 1.1 b/s
    sim = simulate(target_s=tgt, drafter_s=dft, tokens=np.full(n, 1000), n_target=2, n_drafter=1, hs_cap=2,
                   pre_cap=4, warmup_batches=2000)
    res = chain(2, 1, 0.5, 1.1, 2, 1.0, 1.0)
    assert res.x_bps == pytest.approx(sim.bps, rel=0.02)


def test_interval_holds_the_projection_and_widens_away_from_the_logged_split():
    from pathlib import Path

    from advisor.fit import fit_pipeline
    from advisor.load import load_log
    from advisor.model import project_split

    log = Path(__file__).resolve().parent.parent / "fixtures" / "sweep" / "cpu32" / "cpu32-6x2-r0.jsonl.gz"
    fit = fit_pipeline([load_log(log)])
    widths = {}
    for n in range(7, 1, -1):
        r = project_split(fit, n, 8 - n, gpus=8)
        assert r.x_low_bps <= r.x_bps <= r.x_high_bps
        widths[n] = (r.x_high_bps - r.x_low_bps) / r.x_bps
    assert widths[6] < widths[4] < widths[2]
    import math

    assert math.isnan(project_split(fit, 4, 4, gpus=8, interval=False).x_low_bps)
