"""Fit recovers known parameters from synthetic logs of the documented generator."""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synth import Scenario, ServiceModel, TokenModel, write_log

from advisor.errors import AdvisorWarning, AssumptionWarning
from advisor.fit.pipeline import fit_logs
from advisor.ingest.load import load_log
from advisor.model.chain import sync_scaling
from advisor.model.params import NO_REGIMES, RoleFit
from advisor.model.priors import (
    CONTENTION_PRIOR_K_CONSUMER,
    CONTENTION_PRIOR_K_PRODUCER,
    CONTENTION_PRIOR_SE,
    TOKEN_EXPONENT_PRIOR,
    TOKEN_EXPONENT_PRIOR_HALF95,
    TOKEN_LINE_CURVATURE_HALF95,
    TOKEN_RUN_SE,
)
from advisor.stats import expected_max_normal, huber_line

TOKENS = TokenModel(budget=8192, mean=5000.0, cv=0.25, seq_len=500.0)


def scenario(**kw):
    base = dict(
        name="fit",
        n_target=3,
        n_drafter=1,
        target=ServiceModel(0.05, 60e-6, 0.02),
        drafter=ServiceModel(0.02, 20e-6, 0.05),
        tokens=TOKENS,
        hs_cap=8,
        pre_cap=8,
        n_batches=4000,
        seed=7,
    )
    base.update(kw)
    return Scenario(**base)


def test_recovers_step_time_model_and_variability(tmp_path):
    s = scenario()
    write_log(tmp_path / "a.jsonl", s)
    fit = fit_logs([load_log(tmp_path / "a.jsonl")])
    assert fit.producer.t0_s == pytest.approx(0.05, abs=0.01)
    assert fit.producer.c_s_per_tok == pytest.approx(60e-6, rel=0.05)
    assert fit.consumer.t0_s == pytest.approx(0.02, abs=0.01)
    assert fit.consumer.c_s_per_tok == pytest.approx(20e-6, rel=0.08)
    # capacity from busy time, not throughput: targets are blocked behind the faster drafter? no:
    mean_t = 0.05 + 60e-6 * fit.tokens_mean
    assert fit.producer.mu_bps == pytest.approx(1 / mean_t, rel=0.02)
    assert fit.producer.mu_low_bps <= fit.producer.mu_bps <= fit.producer.mu_high_bps
    assert fit.tokens_mean == pytest.approx(5000, rel=0.03)


def test_capacity_comes_from_busy_time_not_throughput(tmp_path):
    # drafter-bound: targets are blocked much of the time; their capacity must still be 1/busy
    s = scenario(n_target=6, n_drafter=1)
    write_log(tmp_path / "b.jsonl", s)
    fit = fit_logs([load_log(tmp_path / "b.jsonl")])
    true_mu_t = 1 / (0.05 + 60e-6 * fit.tokens_mean)
    assert fit.producer.mu_bps == pytest.approx(true_mu_t, rel=0.02)
    assert fit.producer.blocked_share > 0.2
    observed = fit.observed[0].bps
    assert observed < 0.7 * 6 * fit.producer.mu_bps  # throughput alone would have understated it


def test_recovers_sync_cost_from_two_drafter_logs(tmp_path):
    s = scenario(n_target=4, n_drafter=2, sync_every=2, sync_s=0.03)
    write_log(tmp_path / "c.jsonl", s)
    with pytest.warns(AssumptionWarning, match="sync cost measured at 2 drafters only"):
        fit = fit_logs([load_log(tmp_path / "c.jsonl")])
    assert fit.sync.sync_every == 2
    assert fit.sync.allreduce_s(2) == pytest.approx(0.03, rel=0.05)
    assert 0.5 < sync_scaling(fit.consumer, fit.sync, 2) < 1.0


@pytest.mark.parametrize(("k", "m"), [(2, 2), (4, 4), (10, 3)])
def test_independent_steps_give_rounds_of_independent_spread(tmp_path, k, m):
    # the generator draws every step independently: a round's sum spreads sqrt(k) sigma between ranks
    write_log(tmp_path / "c.jsonl", scenario(n_target=6, n_drafter=m, sync_every=k, sync_s=0.03))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AdvisorWarning)
        fit = fit_logs([load_log(tmp_path / "c.jsonl")])
    assert fit.sync.round_var_ratio == pytest.approx(1.0, abs=0.15)


def test_a_real_sweeps_rounds_spread_wider_and_slow_its_drafters():
    """On the 16-core host a drafter's ten steps of one round are correlated: the ranks' round sums
    spread about twice sqrt(k) sigma (BENCHMARKS.md 19.12), which s(M) now carries."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AdvisorWarning)
        fit = fit_logs([load_log(SWEEP / "g15tb1k" / "g15tb1k-10x5-tb1024-r2.jsonl.gz")])
    assert fit.sync.sync_every == 10 and fit.sync.round_var_ratio > 2.0
    independent = dataclasses.replace(fit.sync, round_var_ratio=1.0)
    assert sync_scaling(fit.consumer, fit.sync, 5) < sync_scaling(fit.consumer, independent, 5) - 0.02


def test_expected_max_of_normals():
    for m, e in ((2, 0.564), (3, 0.846), (4, 1.029), (8, 1.424), (16, 1.766)):
        assert expected_max_normal(m) == pytest.approx(e, abs=2e-3)
    # closed forms: e_2 = 1 / sqrt(pi), e_3 = 3 / (2 sqrt(pi))
    assert expected_max_normal(2) == pytest.approx(1 / np.sqrt(np.pi), rel=1e-9)
    assert expected_max_normal(3) == pytest.approx(3 / (2 * np.sqrt(np.pi)), rel=1e-9)


@pytest.mark.parametrize("order", [[4099, 7, 1024, 2], [2, 7, 1024, 4099]])
def test_expected_max_is_the_integral_whatever_the_order_asked(order):
    """The grid's value is the whole integral of x m phi Phi^(m-1) (scipy's adaptive quadrature
    over the real line), for small and large m, asked in any order."""
    import math

    from scipy import integrate, special

    def whole(m):
        f = lambda x: x * m * math.exp(-0.5 * x * x + (m - 1) * special.log_ndtr(x)) / math.sqrt(2 * math.pi)  # noqa: E731
        return integrate.quad(f, -math.inf, math.inf, epsabs=0, epsrel=1e-13, limit=500)[0]

    got = [expected_max_normal(m) for m in order]
    for m, e in zip(order, got):
        assert e == pytest.approx(whole(m), rel=1e-11)
        assert expected_max_normal(m) == e
    assert expected_max_normal(1) == expected_max_normal(0) == 0.0


def test_t_quantiles_are_scipys_to_three_decimals():
    from scipy import stats

    from advisor.stats import t_975

    for df in (19, 9, 4, 2):
        assert t_975(df) == round(float(stats.t.ppf(0.975, df)), 3)
    assert [t_975(df) for df in (19, 9, 4, 2)] == [2.093, 2.262, 2.776, 4.303]  # the intervals' values


def test_huber_line_resists_outliers():
    rng = np.random.default_rng(0)
    x = rng.uniform(1000, 9000, 500)
    y = 0.01 + 2e-5 * x + rng.normal(0, 1e-3, 500)
    y[:25] *= 5  # 5% stragglers
    a, b, _ = huber_line(x, y)
    assert b == pytest.approx(2e-5, rel=0.05) and a == pytest.approx(0.01, abs=0.005)
    assert not math.isnan(a)


def _plain_huber(x, y, iters=20):
    """`huber_line` as plain expressions, with np.median over every row."""
    from advisor.stats import HUBER_K, HUBER_TOL

    w, a, b = np.ones_like(y), 0.0, 0.0
    for _ in range(iters):
        xm, ym = (w * x).sum() / w.sum(), (w * y).sum() / w.sum()
        dx = x - xm
        sxx = (w * (dx * dx)).sum()
        b_new = (w * dx * (y - ym)).sum() / sxx if sxx > 0 else 0.0
        a_new = ym - b_new * xm
        r = y - a_new - b_new * x
        u = np.abs(r) / (HUBER_K * (1.4826 * np.median(np.abs(r - np.median(r))) + 1e-12))
        w = np.where(u <= 1, 1.0, 1.0 / np.maximum(u, 1e-12))
        done = abs(b_new - b) <= HUBER_TOL * max(abs(b), 1e-30) and abs(a_new - a) <= HUBER_TOL * max(abs(a), 1e-30)
        a, b = a_new, b_new
        if done:
            break
    return a, b


def test_huber_line_on_many_rows_is_the_plain_fit_to_the_bit():
    # past ~32k rows the medians come from a bracket of a strided subsample: the very values of
    # np.median over every row, also where the subsample misleads (a pattern whose period is the
    # stride: the bracket misses and every row is partitioned)
    rng = np.random.default_rng(3)
    n = 300_001
    x = rng.integers(20_000, 32_768, n).astype(float)
    noisy = 0.01 + 2e-5 * x + rng.normal(0, 1e-3, n)
    periodic = noisy + np.where(np.arange(n) % (n // 4096) == 0, 5.0, 0.0)
    ties = np.round(noisy, 3)
    for y in (noisy, periodic, ties, noisy[:-1]):
        a, b, _ = huber_line(x[: len(y)], y)
        assert (a, b) == _plain_huber(x[: len(y)], y)
        assert b > 0 and a > 0  # (so no clamp after the loop: the plain fit's line is the line)


def test_two_logs_at_different_drafter_counts_fit_the_sync_scaling(tmp_path):
    # a flat all-reduce (same cost at any M) cannot be told from a ring one with one M; two Ms can
    s = scenario(n_target=5, n_drafter=3, sync_every=1, sync_s=0.04, sync_scaling="flat")
    write_log(tmp_path / "m3.jsonl", s)
    write_log(tmp_path / "m2.jsonl", s.split(6, 2))
    with pytest.warns(AssumptionWarning, match="sync cost measured at 3 drafters only"):
        one = fit_logs([load_log(tmp_path / "m3.jsonl")])
    with pytest.warns(AssumptionWarning, match="step times depend on the split"):
        both = fit_logs([load_log(tmp_path / "m3.jsonl"), load_log(tmp_path / "m2.jsonl")])
    assert one.sync.allreduce_s(2) == pytest.approx(0.04 * 0.75, rel=0.05)  # ring assumption: wrong here
    assert both.sync.allreduce_s(2) == pytest.approx(0.04, rel=0.05)
    assert both.sync.allreduce_s(3) == pytest.approx(0.04, rel=0.05)
    assert sorted(both.sync.dur_by_workers) == [2, 3]


# --- real-hardware sweeps (fixtures/sweep/): contention, drift, token model -----------------------
SWEEP = Path(__file__).resolve().parents[2] / "fixtures" / "sweep"


def _sweep_fit(*names: str, caveats: list[str] | None = None):
    """The fit of sweep logs; its typed warnings (the caveats advise() lists) go to ``caveats``, for
    the tests that assert them, instead of the suite's output."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        fit = fit_logs([load_log(SWEEP / n) for n in names])
    assert all(issubclass(w.category, AdvisorWarning) for w in rec), [str(w.message) for w in rec]
    if caveats is not None:
        caveats.extend(str(w.message) for w in rec)
    return fit


def test_one_split_leaves_contention_unmeasured_and_widens_with_distance():
    said: list[str] = []
    fit = _sweep_fit("cpu32/cpu32-6x2-r0.jsonl.gz", caveats=said)
    assert any("one split was logged, so how step times change with the split is not measured" in x for x in said)
    c = fit.contention
    assert not c.measured and c.ref_producers == 6 and c.gpus == 8
    # beyond the logged split the prior's slope: three producers fewer, each step faster by its share
    assert c.prior_k == (CONTENTION_PRIOR_K_PRODUCER, CONTENTION_PRIOR_K_CONSUMER)
    assert c.scale(3, 8) == pytest.approx(
        (math.exp(-3 * CONTENTION_PRIOR_K_PRODUCER), math.exp(-3 * CONTENTION_PRIOR_K_CONSUMER))
    )
    assert c.scale(6, 8) == (1.0, 1.0) and c.scale(3, 64) == (1.0, 1.0)
    se_near, se_far = c.rel_se(5, 8), c.rel_se(2, 8)
    assert se_near[0] == pytest.approx(CONTENTION_PRIOR_SE)
    assert se_far[0] == pytest.approx(4 * CONTENTION_PRIOR_SE)
    assert c.rel_se(6, 8) == (0.0, 0.0)
    assert c.rel_se(2, 64) == (0.0, 0.0)  # another G: no split-dependence is claimed


def test_shared_host_carries_run_to_run_shift_and_the_within_log_slope():
    from advisor.model.priors import RUN_SE

    said: list[str] = []
    fit = _sweep_fit("cpu16/cpu16-3x3-r0.jsonl.gz", caveats=said)
    assert any("inside the log, a drafter's step" in x for x in said)
    c = fit.contention
    assert c.run_se == RUN_SE and c.within is not None and c.within.estimated
    # the drafters' own slope (per busy drafter) is identified there and widens their prior only
    d = c.within.consumer
    assert d.identified("consumer") and not d.confounded("consumer")
    prior_p, prior_c = c.role_se
    assert prior_p == pytest.approx(CONTENTION_PRIOR_SE)
    assert prior_c == pytest.approx(math.hypot(CONTENTION_PRIOR_SE, d.per_consumer))
    assert c.rel_se(2, 6)[1] == pytest.approx(prior_c)
    # the projection's centre moves by the prior's slope only: the within-log slope is data
    assert c.scale(5, 6) == pytest.approx(
        (math.exp(2 * CONTENTION_PRIOR_K_PRODUCER), math.exp(2 * CONTENTION_PRIOR_K_CONSUMER))
    )


def test_dedicated_gpus_carry_no_contention_prior_nor_run_shift():
    fit = fit_logs([load_log(Path(__file__).resolve().parents[2] / "fixtures" / "reference-7x1.jsonl")])
    c = fit.contention
    assert c.prior_se == 0.0 and c.run_se == 0.0 and c.role_se == (0.0, 0.0)
    assert c.prior_k == (0.0, 0.0) and c.scale(3, 8) == (1.0, 1.0)


def test_emulated_cpu_workers_share_nothing(tmp_path):
    # the trainer's emulation mode sleeps through replayed step times: no compute is shared
    import gzip
    import json

    lines = gzip.open(SWEEP / "cpu32" / "cpu32-6x2-r0.jsonl.gz", "rt").read().splitlines()
    head = json.loads(lines[0])
    assert head["device"] == "cpu"
    head["mode"] = "emulate"
    log = tmp_path / "emulated.jsonl"
    log.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    with pytest.warns(AdvisorWarning) as rec:  # the fit's caveats (sync at one drafter count)
        c = fit_logs([load_log(log)]).contention
    assert not any("share a host's compute" in str(w.message) for w in rec)  # emulated workers share nothing
    assert c.prior_se == 0.0 and c.run_se == 0.0 and c.prior_k == (0.0, 0.0)
    assert _sweep_fit("cpu32/cpu32-6x2-r0.jsonl.gz").contention.prior_se == CONTENTION_PRIOR_SE


def test_two_splits_measure_that_targets_slow_each_other():
    # 32-core host: target step 132 ms at 2-6, 160 ms at 7-1 (both repeats agree)
    fit = _sweep_fit("cpu32/cpu32-7x1-r0.jsonl.gz", "cpu32/cpu32-2x6-r0.jsonl.gz")
    c = fit.contention
    assert c.measured and (c.lo_producers, c.hi_producers) == (2, 7)
    assert 0.02 < c.k[0] < 0.06
    assert abs(c.k[1]) < 0.03
    # the reference is the first log's split: its step time is that log's own
    assert fit.producer.busy_mean_s == pytest.approx(0.1595, rel=0.03)
    assert fit.producer.busy_mean_s * c.scale(2, 8)[0] == pytest.approx(0.1324, rel=0.03)
    # beyond the logged splits the prior's slope, not the fitted one, and the interval widens
    assert c.scale(1, 8)[0] == pytest.approx(c.scale(2, 8)[0] * math.exp(-CONTENTION_PRIOR_K_PRODUCER))
    assert c.scale(1, 8)[1] == pytest.approx(c.scale(2, 8)[1] * math.exp(-CONTENTION_PRIOR_K_CONSUMER))
    assert c.rel_se(1, 8)[0] > c.rel_se(2, 8)[0]


def test_dedicated_host_far_split_lies_inside_the_one_log_interval():
    # ded32: each split alone on a 32-core host; the target step took 157 ms at 7-1 and 121-124 ms
    # at 2-6 (measured 16.51 / 16.12 b/s). From the 7-1 log alone the prior's slope takes 5 targets
    # off (157 ms -> 128 ms, still low at 2-6) and the interval, carrying 4.5% per worker moved and
    # the run-to-run shift, holds both repeats of 2-6.
    from advisor.model.chain import project_split

    fit = _sweep_fit("ded32/ded32-7x1-r0.jsonl.gz")
    r = project_split(fit, 2, 6)
    assert r.x_bps < 16.12
    assert r.x_low_bps <= 16.12 and 16.51 <= r.x_high_bps


def test_drift_between_window_halves_is_measured():
    fit = _sweep_fit("cpu32/cpu32-4x4-r1.jsonl.gz")
    assert 0.0 <= fit.producer.drift < 0.2
    assert fit.consumer.drift >= 0.0


def test_one_token_budget_uses_the_power_law_prior():
    fit = _sweep_fit("h200x2-234m/h200x2-234m-1x1-tb32768-r0.jsonl.gz")
    p = fit.producer
    assert p.token_model == "power" and p.token_exponent == pytest.approx(TOKEN_EXPONENT_PRIOR)  # line r2 < 0
    assert p.busy_at(fit.tokens_mean) == pytest.approx(p.busy_mean_s)
    assert p.busy_at(fit.tokens_mean / 2) < p.busy_mean_s
    assert p.busy_at_rel_half95(fit.tokens_mean) == 0.0
    # the exponent's range over one e-fold of ln 2, and the run-to-run spread of another run's level
    assert p.busy_at_rel_half95(fit.tokens_mean / 2) == pytest.approx(
        math.hypot(TOKEN_EXPONENT_PRIOR_HALF95 * math.log(2), 1.96 * TOKEN_RUN_SE)
    )


def test_two_token_budgets_fit_a_line_through_their_means():
    fit = _sweep_fit(
        "h200x2-234m/h200x2-234m-1x1-tb16384-r0.jsonl.gz", "h200x2-234m/h200x2-234m-1x1-tb49152-r0.jsonl.gz"
    )
    p = fit.producer
    assert p.token_model == "budgets"
    # measured target steps: 78 ms at ~15.2K tokens, 157 ms at ~45.5K: a fixed cost of ~38 ms
    # and ~2.6 us per token
    a, b = p.budget_line
    assert 0.025 < a < 0.05 and 2.2e-6 < b < 3.0e-6
    # the posterior line (elasticity prior and all) passes within a percent of the logged mean
    assert p.busy_at(fit.tokens_mean) == pytest.approx(p.busy_mean_s, rel=0.01)
    # the repeats at 32K measured 104-128 ms; the line says ~117 ms
    assert p.busy_at(30300) / p.busy_at(fit.tokens_mean) * p.busy_mean_s == pytest.approx(0.117, rel=0.06)
    lo, hi = p.token_range
    assert lo < fit.tokens_mean * 1.1 and hi > 40000
    # inside the logged range only the line's own error; beyond it curvature too, growing with distance
    inside, out1, out2 = (p.busy_at_rel_half95(t) for t in (30300, 2 * hi, 4 * hi))
    assert 0 < inside < out1 < out2
    # each e-fold beyond the range adds curvature in quadrature
    assert out2**2 - out1**2 > (TOKEN_LINE_CURVATURE_HALF95 * math.log(2)) ** 2


def _frames(levels: dict[float, float], rng, n: int = 400, cv: float = 0.02):
    """Per-log step frames of the target at the given budgets (tokens -> mean busy seconds)."""
    frames, toks = {}, {}
    for i, (tok, busy) in enumerate(levels.items()):
        noise = rng.gamma(1 / cv**2, cv**2, n)
        frames[i] = {"target": pd.DataFrame({"t": np.arange(float(n)), "busy": busy * noise})}
        toks[i] = tok
    return frames, toks


def _line_fit(levels: dict[float, float], seed: int = 3):
    from advisor.fit.tokens import budget_line

    frames, toks = _frames(levels, np.random.default_rng(seed))
    m = float(frames[0]["target"]["busy"].mean())
    rf = RoleFit(
        role="target",
        n_steps=400,
        busy_mean_s=m,
        busy_std_s=0.02 * m,
        t0_s=0.0,
        c_s_per_tok=m / toks[0],
        r2=0.0,
        mu_bps=1 / m,
        mu_low_bps=0.98 / m,
        mu_high_bps=1.02 / m,
        busy_share=1.0,
        starved_share=0.0,
        blocked_share=0.0,
    )
    return budget_line(rf, toks[0], frames, toks, [[i] for i in frames])


@pytest.mark.parametrize("a_s, b_s", [(0.040, 2.5e-6), (0.005, 3.0e-6), (0.120, 1.0e-6)])
def test_a_budget_line_is_recovered_from_five_budgets(a_s, b_s):
    # known lines: fixed costs from 6% to 80% of a 16K batch's step time; five budgets 16K..48K
    out = _line_fit({t: a_s + b_s * t for t in (16000.0, 24000.0, 32000.0, 40000.0, 48000.0)})
    a, b = out.budget_line
    true_e = b_s * out.budget_tokens_mid / (a_s + b_s * out.budget_tokens_mid)
    e = b * out.budget_tokens_mid / (a + b * out.budget_tokens_mid)
    # five budgets outweigh the prior (centre 0.65, +-0.3): the elasticity within 0.1 of the truth,
    # and the line's step times inside their intervals from 8K to 80K tokens (each budget's mean is
    # weighted as a run off by TOKEN_RUN_SE, so a line far from the prior is pulled part of the way)
    assert e == pytest.approx(true_e, abs=0.1)
    for t in (8000.0, 16000.0, 32000.0, 48000.0, 80000.0):
        assert abs(math.log(out.busy_at(t) / (a_s + b_s * t))) < out.busy_at_rel_half95(t)
    if abs(true_e - TOKEN_EXPONENT_PRIOR) < 0.05:
        assert out.busy_at(80000.0) == pytest.approx(a_s + b_s * 80000.0, rel=0.01)
    # between the budgets only the line's own error and another run's level; beyond them more
    assert out.busy_at_rel_half95(32000.0) < out.busy_at_rel_half95(80000.0)


def test_two_close_noisy_budgets_are_shrunk_towards_the_elasticity_prior():
    # the true line has a 40 ms fixed cost and 2.5 us per token (elasticity ~0.6), but the run at
    # 24K came out 12% slow: least squares through the two means says a fixed cost of 16 ms
    # (elasticity 0.83 between them) and so step times 20% low at 8K tokens
    t1, t2 = 16000.0, 24000.0
    y1, y2 = 0.040 + 2.5e-6 * t1, (0.040 + 2.5e-6 * t2) * 1.12
    b_ls = (y2 - y1) / (t2 - t1)
    a_ls = y1 - b_ls * t1
    assert a_ls < 0.02
    out = _line_fit({t1: y1, t2: y2})
    a, b = out.budget_line
    assert a - a_ls > 0.3 * (0.040 - a_ls) and b < b_ls
    truth = 0.040 + 2.5e-6 * 8000.0
    assert abs(out.busy_at(8000.0) / truth - 1) < abs((a_ls + b_ls * 8000.0) / truth - 1) / 2
    # the truth lies inside the interval, and the interval grows with the lever arm
    half = out.busy_at_rel_half95(8000.0)
    assert abs(math.log(out.busy_at(8000.0) / truth)) < half
    assert out.busy_at_rel_half95(4000.0) > half > out.busy_at_rel_half95(12000.0)


def test_a_line_never_takes_a_negative_fixed_cost():
    # busy triples while tokens only double: a line through the means would cross zero at 5K tokens;
    # the posterior keeps 0 <= e <= 1, so at most proportional to tokens
    out = _line_fit({10000.0: 0.05, 20000.0: 0.15})
    a, b = out.budget_line
    assert a >= 0.0 and b > 0
    assert all(0.0 <= e <= 1.0 for e, _, _ in out.budget_posterior)
    assert 1.8 < out.busy_at(20000.0) / out.busy_at(10000.0) <= 2.0 + 1e-9


@settings(max_examples=40, deadline=None)
@given(
    a_s=st.floats(0.0, 0.2),
    b_s=st.floats(2e-7, 5e-6),
    budgets=st.lists(
        st.sampled_from([8000.0, 16000.0, 24000.0, 32000.0, 48000.0, 64000.0]), min_size=2, max_size=4, unique=True
    ),
    shifts=st.lists(st.floats(-0.12, 0.12), min_size=4, max_size=4),
    seed=st.integers(0, 1000),
)
def test_budget_line_posterior_invariants(a_s, b_s, budgets, shifts, seed):
    """Whatever the budgets and their run-level shifts: step time grows with tokens, the fixed cost
    is never negative, and the interval widens monotonically away from the logged budgets."""
    budgets = sorted(budgets)
    out = _line_fit({t: (a_s + b_s * t) * (1 + d) for t, d in zip(budgets, shifts)}, seed)
    a, b = out.budget_line
    assert a >= 0.0 and b >= 0.0
    grid = [1000.0 * k for k in range(1, 200, 7)]
    busy = [out.busy_at(t) for t in grid]
    assert all(y2 >= y1 * (1 - 1e-12) for y1, y2 in zip(busy, busy[1:]))
    lo, hi = out.token_range
    above = [out.busy_at_rel_half95(t) for t in grid if t > hi * 1.2]
    below = [out.busy_at_rel_half95(t) for t in reversed(grid) if t < lo / 1.2]
    for seq in (above, below):
        assert all(h2 >= h1 - 1e-12 for h1, h2 in zip(seq, seq[1:]))


def test_a_loader_close_to_binding_is_engaged_and_calibrated(tmp_path):
    # targets 7 x 1/7 b/s, a bursty loader at 0.97 b/s behind 4-slot prefetch queues: targets starve
    # a few percent of the time with a batch or more queued on average (below the fixed thresholds)
    tm = TokenModel(budget=32768, mean=31200.0, cv=0.03, seq_len=1926.0)
    s = Scenario(
        name="near",
        n_target=7,
        n_drafter=1,
        tokens=tm,
        hs_cap=20,
        pre_cap=4,
        n_batches=8000,
        seed=112,
        target=ServiceModel.from_mean(7.0, tm.mean, overhead_share=0.1, scv=0.05),
        drafter=ServiceModel.from_mean(1 / 1.3, tm.mean, overhead_share=0.1, scv=0.05),
        loader=ServiceModel(1 / 0.97, 0.0, 1.0),
    )
    write_log(tmp_path / "near.jsonl", s, rates_every_s=60.0)
    fit = fit_logs([load_log(tmp_path / "near.jsonl")])
    ld = fit.loader
    assert ld.near_binding and ld.calibrated and ld.input_bound
    assert ld.pre_mean_depth > 1.0  # not input-bound by the fixed thresholds
    assert 0.9 < ld.capacity_bps < 1.05
    from advisor.model.chain import project_split

    # the observed split is reproduced; the loader is why
    assert project_split(fit, 7, 1).x_bps == pytest.approx(fit.observed[0].bps, rel=2e-3)
    assert project_split(fit, 7, 1).bottleneck == "loader"


def test_a_never_starved_pipeline_leaves_the_loader_alone():
    fit = _sweep_fit("cpu32/cpu32-7x1-r0.jsonl.gz")  # its caveats are the one-split ones, asserted above
    assert not fit.loader.near_binding and not fit.loader.input_bound


def _regime_log(tmp_path, factor: float):
    from dataclasses import replace as dc_replace

    from synth import draw

    tm = TokenModel(budget=32768, mean=31200.0, cv=0.03, seq_len=1926.0)
    s = Scenario(
        name="regime",
        n_target=6,
        n_drafter=2,
        tokens=tm,
        hs_cap=20,
        pre_cap=50,
        n_batches=6000,
        seed=113,
        target=ServiceModel.from_mean(7.0, tm.mean, overhead_share=0.1, scv=0.05),
        drafter=ServiceModel.from_mean(2.0, tm.mean, overhead_share=0.1, scv=0.05),
    )
    d = draw(s)
    slow = (np.arange(len(d.tokens)) // 300) % 3 == 0
    d = dc_replace(d, drafter_s=np.where(slow, d.drafter_s * factor, d.drafter_s))
    path = tmp_path / f"regime-{factor}.jsonl"
    write_log(path, s, rates_every_s=60.0, sample=d)
    return fit_logs([load_log(path)])


def test_regimes_are_detected_and_lower_the_balanced_projection(tmp_path):
    from advisor.model.chain import project_split

    steady_fit = _regime_log(tmp_path, 1.0)
    slow_fit = _regime_log(tmp_path, 1.5)
    assert not steady_fit.regimes.detected
    rg = slow_fit.regimes
    assert rg.detected and rg.f_consumer > 30
    assert max(rg.consumer_scale) > 1.15 and min(rg.consumer_scale) < 0.95
    assert sum(rg.weight) == pytest.approx(1.0)
    # within-slice variability is the service's own, not the mixture of regimes
    assert rg.consumer_scv < slow_fit.consumer.busy_scv
    # at the balanced 6-2 the slow stretches cost throughput that one mean rate hides
    x = project_split(slow_fit, 6, 2).x_bps
    assert x == pytest.approx(slow_fit.observed[0].bps, rel=0.03)
    no_regimes = project_split(dataclasses.replace(slow_fit, regimes=NO_REGIMES), 6, 2).x_bps
    assert no_regimes > 1.04 * x


def test_the_fitted_or_assumed_contention_is_reported():
    said: list[str] = []
    _sweep_fit("cpu32/cpu32-7x1-r0.jsonl.gz", "cpu32/cpu32-2x6-r0.jsonl.gz", caveats=said)
    assert any("each extra target" in m and "+3." in m for m in said), said
    said = []
    c = _sweep_fit("cpu32/cpu32-7x1-r0.jsonl.gz", caveats=said).contention
    # the prior per worker moved, widened by a role's own identified within-log slope
    prior_p, prior_c = c.role_se
    assert prior_p >= CONTENTION_PRIOR_SE and prior_c >= CONTENTION_PRIOR_SE
    assert any(f"widen by {100 * prior_p:.1f}%" in m and "per worker moved" in m for m in said), said
    from advisor.model.priors import CONTENTION_SINGLE_SE

    assert any(
        f"{100 * CONTENTION_SINGLE_SE:.1f}% more for a role where one of the two splits has a lone worker" in m
        for m in said
    ), said
    assert any(
        f"each extra target is taken to change a target's step +{100 * math.expm1(CONTENTION_PRIOR_K_PRODUCER):.1f}%"
        in m
        for m in said
    ), said
    # the within-log estimate (advisor.measure.contention) is reported alongside, as data
    assert any("inside the log" in m and "per extra busy target" in m for m in said), said


def test_sync_bytes_are_fitted_from_the_sync_events():
    """The all-reduce's bytes size the sync's time on a link between nodes (issue 35)."""
    import json as _json

    from advisor.advice import advise

    path = Path(__file__).resolve().parents[2] / "fixtures" / "h200-1x2.jsonl"
    sizes = [o["bytes"] for o in map(_json.loads, path.read_text().splitlines()) if o.get("ev") == "sync"]
    fit = advise(path).fit
    assert fit.sync.bytes_per_sync == pytest.approx(float(np.mean(sizes)))


@pytest.mark.parametrize("budget", [True, False])
def test_rates_without_tokens_leave_tok_s_unknown_and_size_batches_nominally(tmp_path, reference_rates, budget):
    """A rates log without tok_s measures no tokens: the fit says so, its batch is the header's
    budget (else 1 token, a unit), finite either way, and the observed tokens/s stays unknown."""
    from conftest import rates_without_tokens

    path = rates_without_tokens(reference_rates, tmp_path / "r.jsonl", budget=budget)
    log = load_log(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_logs([log])
    assert not fit.tokens_measured
    assert fit.tokens_mean == (log.header.token_budget if budget else 1.0)
    assert math.isnan(fit.observed[0].tok_s) and fit.observed[0].bps > 0
    assert math.isfinite(fit.consumer.c_s_per_tok) and math.isfinite(fit.producer.c_s_per_tok)


def test_rates_with_tokens_measure_them(reference_rates):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_logs([load_log(reference_rates)])
    assert fit.tokens_measured and fit.observed[0].tok_s > 0
