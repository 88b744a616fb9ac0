"""The chain model: closed forms, invariants, and agreement with exact simulation."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import birth_death_law
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.errors import AdvisorWarning, AssumptionWarning
from advisor.model.chain import WhatIf, chain, straggler_excess_s, sync_scaling
from advisor.model.params import Basis, RoleFit, SyncFit


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
    assert res.queue_mean > 18  # drafter-bound: q_hs nearly full
    assert res.consumer_starved < 0.01


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 300),
    m=st.integers(1, 300),
    mu_p=st.floats(0.001, 100),
    mu_c=st.floats(0.001, 100),
    b=st.integers(0, 200),
)
def test_the_shared_shape_gives_the_law_of_the_rates(n, m, mu_p, mu_c, b):
    """The law from the counts' cached shape and one tilt by the rates is the law from the rates
    term by term (chain with SCV 1 + 1 is the integer buffer); the same call twice, the same bits."""
    got = chain(n, m, mu_p, mu_c, b, 1.0, 1.0)
    want = birth_death_law(mu_p, mu_c, n, m, b)
    for a, w in zip((got.x_bps, got.producer_blocked, got.consumer_starved, got.queue_mean), want):
        assert a == pytest.approx(w, rel=1e-9, abs=1e-12)
    assert chain(n, m, mu_p, mu_c, b, 1.0, 1.0) == got


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 12),
    m=st.integers(1, 12),
    mu_p=st.floats(0.01, 10),
    mu_c=st.floats(0.01, 10),
    b=st.integers(0, 60),
    scv_p=st.floats(0.0, 3.0),
    scv_c=st.floats(0.0, 3.0),
)
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
    from advisor.model.simulate import simulate

    rng = np.random.default_rng(3)
    n = 60000
    tgt = rng.exponential(1 / 0.5, n)  # two targets at 0.5 b/s each
    dft = rng.exponential(1 / 1.1, n)  # one drafter at 1.1 b/s
    sim = simulate(
        target_s=tgt,
        drafter_s=dft,
        tokens=np.full(n, 1000),
        n_target=2,
        n_drafter=1,
        hs_cap=2,
        pre_cap=4,
        warmup_batches=2000,
    )
    res = chain(2, 1, 0.5, 1.1, 2, 1.0, 1.0)
    assert res.x_bps == pytest.approx(sim.bps, rel=0.02)


def test_interval_holds_the_projection_and_widens_away_from_the_logged_split():
    from pathlib import Path

    from advisor.fit.pipeline import fit_logs
    from advisor.ingest.load import load_log
    from advisor.model.chain import project_split

    log = Path(__file__).resolve().parents[2] / "fixtures" / "sweep" / "cpu32" / "cpu32-6x2-r0.jsonl.gz"
    with pytest.warns(AdvisorWarning) as rec:  # one split on a shared host: the fit says so
        fit = fit_logs([load_log(log)])
    assert any("one split was logged" in str(w.message) for w in rec)
    widths = {}
    for n in range(7, 1, -1):
        r = project_split(fit, n, 8 - n, gpus=8)
        assert r.x_low_bps <= r.x_bps <= r.x_high_bps
        widths[n] = (r.x_high_bps - r.x_low_bps) / r.x_bps
    assert widths[6] < widths[4] < widths[2]
    import math

    assert math.isnan(project_split(fit, 4, 4, gpus=8, interval=False).x_low_bps)


def test_a_balanced_split_carries_both_roles_run_to_run_level():
    """At the split nearest the balance X ~ min(C_p, C_c) bends: the two roles' level elasticities
    must still sum to about one (scaling both rates scales X), or the interval and the odds drop
    the run-to-run level there. A forward step alone gave 0.20 + 0.03 here."""
    import warnings
    from pathlib import Path

    from advisor.fit.pipeline import fit_logs
    from advisor.ingest.load import load_log
    from advisor.model.chain import project_split
    from advisor.model.priors import RUN_SE

    sweep = Path(__file__).resolve().parents[2] / "fixtures" / "sweep" / "sync1g12"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AdvisorWarning)
        fit = fit_logs([load_log(sweep / f"sync1g12-{s}-r4.jsonl.gz") for s in ("2x10", "4x8")])
    e = {}
    for n in range(1, 12):
        r = project_split(fit, n, 12 - n, gpus=12)
        level = r.parts.shared_log_per_se[2:4]  # the levels' coefficients
        e[n] = (level[0] / RUN_SE, level[1] / RUN_SE)
        assert sum(e[n]) <= 1.05
    # 3-9: targets 26.6 b/s, drafters 27.1 with the rounds' measured spread, 2% apart (a 2% central
    # step gave 0.95 and 0.05 here; the step of one run-to-run move gives 0.61 and 0.39)
    balanced = e[3]
    assert min(balanced) > 0.25 and sum(balanced) > 0.85
    assert e[1][0] > 0.95 and e[6][1] > 0.95  # away from the balance one role binds


def test_barrier_rate_closed_form():
    import math

    from advisor.model.chain import barrier_rate
    from advisor.stats import expected_max_normal

    assert barrier_rate(10, 1, 1.0, 0.5, 16, 1.0, 4) == math.inf  # one rank: no barrier
    assert barrier_rate(10, 6, 1.0, 0.5, 0, 1.0, 4) == math.inf  # no sync
    # a deep queue holds the whole tail: the targets never block, the rate is theirs
    assert barrier_rate(10, 6, 1.0, 0.5, 16, 1.0, 200) == 1.0
    e2 = expected_max_normal(2)
    # a = 2 busy ranks; k = 1: the random spread 1^0.3 (0.25 + e_2) = 0.81 passes the fluid
    # stagger k / 2, which caps the tail at a k / 2 = 1 batch; plus lambda T_ar = 5, minus b + N = 2: E = 4
    assert 0.25 + e2 > 0.5
    assert barrier_rate(1, 6, 1.0, 0.5, 1, 5.0, 1) == pytest.approx(6 / 10)
    # k = 64: the random spread 64^0.3 (0.25 + e_2) = 2.8 < 32 sets the tail
    d = 2 * 64**0.3 * (0.25 + e2)
    assert barrier_rate(10, 6, 1.0, 0.5, 64, 10.0, 4) == pytest.approx(384 / (384 + d + 10 - 14))
    # busy ranks a = lambda / c, never more than M
    d = 2 * 8**0.3 * (0.25 + e2)
    assert barrier_rate(1, 2, 3.0, 0.5, 8, 0.0, 1) == pytest.approx(3.0 * 16 / (16 + d - 2))


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(1, 60),
    m=st.integers(2, 60),
    lam=st.floats(0.01, 20),
    c=st.floats(0.01, 5),
    k=st.integers(1, 128),
    t=st.floats(0, 10),
    b=st.integers(0, 60),
)
def test_barrier_rate_never_exceeds_the_supply_and_deeper_queues_help(n, m, lam, c, k, t, b):
    from advisor.model.chain import barrier_rate

    x = barrier_rate(n, m, lam, c, k, t, b)
    assert 0 < x <= lam * (1 + 1e-12)
    assert barrier_rate(n, m, lam, c, k, t, b + 5) >= x


def test_barrier_idling_of_starved_drafters_matches_simulation(tmp_path):
    # 16 GPUs, an all-reduce every 32 drafter steps, a 4-slot q_hs: at target-bound splits each
    # round ends with a few ranks serving while q_hs fills. The idle ranks pull in turn, so the
    # ranks finish their quotas close together and the targets block little (0.01-0.08% here).
    from dataclasses import replace

    from synth import Scenario, ServiceModel, TokenModel, draw, run, write_log

    from advisor.fit.pipeline import fit_logs
    from advisor.ingest.load import load_log
    from advisor.model.chain import project_split

    tm = TokenModel(budget=32768, mean=31200.0, cv=0.2, seq_len=1926.0)
    s = Scenario(
        name="g16",
        n_target=12,
        n_drafter=4,
        tokens=tm,
        hs_cap=4,
        pre_cap=8,
        sync_every=32,
        sync_s=1.0,
        sync_scv=0.1,
        n_batches=6000,
        seed=5,
        target=ServiceModel.from_mean(10.0, tm.mean, overhead_share=0.1, scv=0.1),
        drafter=ServiceModel.from_mean(2.0, tm.mean, overhead_share=0.1, scv=0.1),
    )
    write_log(tmp_path / "g16.jsonl", s)
    with pytest.warns(AssumptionWarning, match="sync cost measured at 4 drafters only"):
        fit = fit_logs([load_log(tmp_path / "g16.jsonl")])
    d = draw(replace(s, seed=77), 12000, warmup=False)
    for n, m in ((10, 6), (8, 8)):
        sim = run(s.split(n, m), sample=d, warmup_batches=1200)
        truth = sim.bps
        r = project_split(fit, n, m)
        assert r.x_bps == pytest.approx(truth, rel=0.025), (n, m)
        assert r.x_low_bps <= truth <= r.x_high_bps
        assert r.producer_blocked == pytest.approx(sim.roles["target"].blocked.mean(), abs=0.01)


def test_unidentified_sync_scaling_interval_spans_flat_and_ring(tmp_path):
    # sync cost logged at 3 drafters only: 6-2 is projected for a ring all-reduce, and its interval
    # reaches the projection for a flat one; a second drafter count identifies the scaling
    from synth import Scenario, ServiceModel, TokenModel, write_log

    from advisor.fit.pipeline import fit_logs
    from advisor.ingest.load import load_log
    from advisor.model.chain import project_split, sync_scaling_range

    tm = TokenModel(budget=32768, mean=31200.0, cv=0.15, seq_len=1926.0)
    s = Scenario(
        name="flat",
        n_target=5,
        n_drafter=3,
        tokens=tm,
        hs_cap=20,
        pre_cap=8,
        sync_every=1,
        sync_s=0.25 / 0.6,
        sync_scv=0.1,
        sync_scaling="flat",
        n_batches=3000,
        seed=111,
        target=ServiceModel.from_mean(5.0, tm.mean, overhead_share=0.1, scv=0.05),
        drafter=ServiceModel.from_mean(1 / 0.6, tm.mean, overhead_share=0.1, scv=0.05),
    )
    write_log(tmp_path / "m3.jsonl", s)
    write_log(tmp_path / "m2.jsonl", s.split(6, 2))
    with pytest.warns(AssumptionWarning, match="sync cost measured at 3 drafters only"):
        one = fit_logs([load_log(tmp_path / "m3.jsonl")])
    assert not one.sync.scaling_identified
    s_flat, s_ring = sync_scaling_range(one.consumer, one.sync, 2)
    assert s_flat < s_ring
    ring = project_split(one, 6, 2)
    flat = project_split(one, 6, 2, what_if=WhatIf(consumer_scaling=s_flat), interval=False).x_bps
    assert flat < 0.97 * ring.x_bps  # the extremes differ by more than 3% here
    assert ring.x_low_bps <= flat <= ring.x_bps <= ring.x_high_bps
    with pytest.warns(AssumptionWarning, match="step times depend on the split"):
        both = fit_logs([load_log(tmp_path / "m3.jsonl"), load_log(tmp_path / "m2.jsonl")])
    assert both.sync.scaling_identified
    lo, hi = sync_scaling_range(both.consumer, both.sync, 2)
    assert lo == hi
    r2 = project_split(both, 6, 2)
    assert (r2.x_high_bps - r2.x_low_bps) / r2.x_bps < (ring.x_high_bps - ring.x_low_bps) / ring.x_bps


def _sync_fit(every: int, bytes_: float | None):
    from dataclasses import replace as _replace

    from advisor.fit.pipeline import fit_from_numbers
    from advisor.settings import Options

    fit = fit_from_numbers(
        {"target": 7, "drafter": 1}, {"target": 0.92, "drafter": 0.86}, Options(sync_every=every, hardware_priors=False)
    )
    return _replace(fit, hs_bytes_per_token=1000.0, sync=_replace(fit.sync, bytes_per_sync=bytes_))


def test_the_drafters_capacity_is_their_own_and_the_link_a_stage_beside_it():
    """Issue 50: across nodes the drafters' capacity was their pool's with the link's waits in it (at
    7-9 with 8 drafters behind a slow link: the link's own capacity), so a link-bound split read as
    balanced. The drafters' column is their own capacity (the link free), the efficiency b/s over the
    fastest role's own capacity, the bound the least of the roles' and the link's."""
    from advisor.model.chain import LinkStage, project_split
    from advisor.model.link import Placement

    fit = _sync_fit(0, None)
    pl = Placement(producers=(7, 0), consumers=(1, 8))
    free = project_split(fit, 7, 9, gpus=16, link=LinkStage(pl, 0.0))
    slow = project_split(fit, 7, 9, gpus=16, link=LinkStage(pl, 2.4))
    assert slow.consumer_cap_bps == pytest.approx(free.consumer_cap_bps, rel=1e-12)
    assert slow.consumer_cap_bps == pytest.approx(9 * 0.86, rel=1e-9) and slow.link_cap_bps < 1.2
    assert slow.efficiency == pytest.approx(slow.x_bps / max(slow.producer_cap_bps, slow.consumer_cap_bps))
    assert slow.efficiency < 0.15
    assert slow.bound_bps == min(slow.producer_cap_bps, slow.consumer_cap_bps, slow.link_cap_bps)
    assert slow.x_bps <= slow.bound_bps
    # one drafter behind the link: its waits on it bind, though its own capacity is not the least
    one = project_split(fit, 15, 1, gpus=16, link=LinkStage(Placement(producers=(8, 7), consumers=(0, 1)), 2.4))
    assert one.consumer_cap_bps == pytest.approx(0.86) and one.x_bps < 0.5 * one.consumer_cap_bps
    assert one.bottleneck == "link" and one.x_bps <= one.bound_bps == one.link_cap_bps


def test_node_local_pipelines_are_one_node_times_the_nodes():
    import math

    from advisor.model.chain import LinkStage, project_local, project_split
    from advisor.model.link import Placement

    fit = _sync_fit(0, None)
    one = project_split(fit, 7, 1, gpus=8)
    both = project_local(
        fit, 14, 2, LinkStage(Placement(producers=(7, 7), consumers=(1, 1), routing="local"), 1.0), gpus=16
    )
    assert both.x_bps == pytest.approx(2 * one.x_bps, rel=1e-12)
    assert both.x_low_bps == pytest.approx(2 * one.x_low_bps, rel=1e-12)
    assert both.gpu_util == pytest.approx(one.gpu_util) and both.crossing_share == 0.0
    assert both.link_util == 0.0 and math.isinf(both.link_cap_bps)
    assert both.x_bps <= both.bound_bps * (1 + 1e-12)


def test_unlike_node_local_pipelines_add_up_and_syncing_drafters_keep_one_pace():
    """Issue 50: 13-3 on two nodes of 8 as 7-1 on one and 6-2 on the other: without a sync the rate is
    the two pipelines' sum; drafters that sync all take k steps a round, so all keep the slower node's
    pace per drafter."""
    from advisor.model.chain import LinkStage, project_local, project_split
    from advisor.model.link import Placement

    def node(fit, n, m):  # one node's pipeline, its drafters in the all-reduce of all 3
        one = Placement(producers=(n,), consumers=(m,), routing="local")
        return project_split(fit, n, m, gpus=8, link=LinkStage(one, 0.0, sync_ranks=3))

    pl = Placement(producers=(7, 6), consumers=(1, 2), routing="local")
    for every in (0, 4):
        fit = _sync_fit(every, None)
        a, b = node(fit, 7, 1), node(fit, 6, 2)
        both = project_local(fit, 13, 3, LinkStage(pl, 0.0), gpus=16)
        want = a.x_bps + b.x_bps if not every else 3 * min(a.x_bps / 1, b.x_bps / 2)
        assert both.x_bps == pytest.approx(want, rel=1e-12)
        assert both.producer_cap_bps == pytest.approx(a.producer_cap_bps + b.producer_cap_bps)
        assert both.consumer_cap_bps == pytest.approx(a.consumer_cap_bps + b.consumer_cap_bps)
        assert both.efficiency == pytest.approx(both.x_bps / max(both.producer_cap_bps, both.consumer_cap_bps))
        assert both.x_low_bps <= both.x_bps <= both.bound_bps == pytest.approx(a.bound_bps + b.bound_bps)
        assert both.x_bps <= both.x_high_bps and 0 < both.gpu_util <= 1
    assert want < a.x_bps + b.x_bps  # the sync holds the drafter-bound node to the other's pace


def test_node_local_sync_over_the_link_costs_what_the_round_holds():
    from advisor.model.chain import LinkStage, project_local
    from advisor.model.link import Placement

    fit = _sync_fit(4, 1e9)
    pl = Placement(producers=(7, 7), consumers=(1, 1), routing="local")
    free = project_local(fit, 14, 2, LinkStage(pl, 0.0), gpus=16)
    slow = project_local(fit, 14, 2, LinkStage(pl, 0.0, sync_xfer_s=2.0), gpus=16)
    assert slow.x_bps < free.x_bps
    # the link is busy T_link per round of M k batches, and carries only sync
    assert slow.link_util == pytest.approx(slow.x_bps * 2.0 / (2 * 4))
    assert slow.link_sync_share == 1.0 and slow.x_bps <= slow.bound_bps * (1 + 1e-12)


@given(
    k=st.integers(1, 32),
    m=st.integers(2, 64),
    ratio=st.floats(0.5, 6.0),
    cv=st.floats(0.01, 0.6),
    allreduce_s=st.floats(0.0, 0.2),
)
@settings(max_examples=60, deadline=None)
def test_the_rounds_extra_spread_is_the_same_wait_in_both_forms(k, m, ratio, cv, allreduce_s):
    """s(M) with the measured round spread equals s(M) of independent steps with the straggler
    excess added to the collective, the form the exact simulation takes."""
    busy = 0.05
    drafter = RoleFit.unmeasured("drafter", 1.0 / busy, scv=cv * cv, basis=Basis.STEPS)
    wide = SyncFit(sync_every=k, latency_s=0.0, bandwidth_s=0.0, fixed_s=allreduce_s, round_var_ratio=ratio)
    plain = SyncFit(sync_every=k, latency_s=0.0, bandwidth_s=0.0, fixed_s=allreduce_s)
    excess = straggler_excess_s(drafter, wide, m)
    assert straggler_excess_s(drafter, plain, m) == 0.0
    # the wait's sign is that of sqrt(r) - 1 (a ratio one ulp above 1 has a square root of 1)
    assert np.sign(excess) == np.sign(np.sqrt(ratio) - 1.0)
    indep = sync_scaling(drafter, plain, m)
    round_s = k * busy / indep + excess
    assert sync_scaling(drafter, wide, m) == pytest.approx(k * busy / round_s, rel=1e-9)


@given(k=st.integers(1, 32), m=st.integers(2, 64), overhead_s=st.floats(0.0, 0.05))
@settings(max_examples=40, deadline=None)
def test_a_rounds_untimed_overhead_lengthens_it_like_the_collective(k, m, overhead_s):
    """s(M) with ``overhead_s`` a round equals s(M) with that much more all-reduce: the exact
    simulation adds it to each round's pause the same way."""
    drafter = RoleFit.unmeasured("drafter", 1.0 / 0.05, scv=0.04, basis=Basis.STEPS)
    timed = SyncFit(sync_every=k, latency_s=0.0, bandwidth_s=0.0, fixed_s=0.003 + overhead_s)
    untimed = SyncFit(sync_every=k, latency_s=0.0, bandwidth_s=0.0, fixed_s=0.003, overhead_s=overhead_s)
    assert sync_scaling(drafter, untimed, m) == pytest.approx(sync_scaling(drafter, timed, m), rel=1e-12)


def test_expected_max_builds_its_grid_once_for_every_m():
    """--gpus 1024 asks E[max] at up to 1,023 drafter counts: one normal grid serves them all
    (BENCHMARKS.md 15; a per-m grid cost 0.2 s there)."""
    import math

    from advisor import stats

    stats._normal_grid.cache_clear()
    stats._expected_max.cache_clear()
    got = [stats.expected_max_normal(m) for m in (2, 3, 17, 1024)]
    assert stats._normal_grid.cache_info().misses == 1
    assert got[0] == pytest.approx(1 / math.sqrt(math.pi), rel=1e-9)  # E[max of 2] = 1/sqrt(pi)
