"""Fit recovers known parameters from synthetic logs of the documented generator."""
from __future__ import annotations

import dataclasses
import math

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor.fit import (CONTENTION_PRIOR_SE, NO_REGIMES, TOKEN_EXPONENT_PRIOR, TOKEN_EXPONENT_PRIOR_HALF95,
                         TOKEN_LINE_CURVATURE_HALF95, TOKEN_RUN_SE,
                         expected_max_normal, fit_pipeline, huber_line, sync_scaling)
from advisor.load import load_log
from advisor.synth import Scenario, ServiceModel, TokenModel, write_log

TOKENS = TokenModel(budget=8192, mean=5000.0, cv=0.25, seq_len=500.0)


def scenario(**kw):
    base = dict(name="fit", n_target=3, n_drafter=1, target=ServiceModel(0.05, 60e-6, 0.02),
                drafter=ServiceModel(0.02, 20e-6, 0.05), tokens=TOKENS, hs_cap=8, pre_cap=8, n_batches=4000, seed=7)
    base.update(kw)
    return Scenario(**base)


def test_recovers_step_time_model_and_variability(tmp_path):
    s = scenario()
    write_log(tmp_path / "a.jsonl", s)
    fit = fit_pipeline([load_log(tmp_path / "a.jsonl")])
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
    fit = fit_pipeline([load_log(tmp_path / "b.jsonl")])
    true_mu_t = 1 / (0.05 + 60e-6 * fit.tokens_mean)
    assert fit.producer.mu_bps == pytest.approx(true_mu_t, rel=0.02)
    assert fit.producer.blocked_share > 0.2
    observed = fit.observed[0].bps
    assert observed < 0.7 * 6 * fit.producer.mu_bps   # throughput alone would have understated it


def test_recovers_sync_cost_from_two_drafter_logs(tmp_path):
    s = scenario(n_target=4, n_drafter=2, sync_every=2, sync_s=0.03)
    write_log(tmp_path / "c.jsonl", s)
    fit = fit_pipeline([load_log(tmp_path / "c.jsonl")])
    assert fit.sync.sync_every == 2
    assert fit.sync.allreduce_s(2) == pytest.approx(0.03, rel=0.05)
    assert 0.5 < sync_scaling(fit.consumer, fit.sync, 2) < 1.0


def test_expected_max_of_normals():
    for m, e in ((2, 0.564), (3, 0.846), (4, 1.029), (8, 1.424), (16, 1.766)):
        assert expected_max_normal(m) == pytest.approx(e, abs=2e-3)


def test_huber_line_resists_outliers():
    rng = np.random.default_rng(0)
    x = rng.uniform(1000, 9000, 500)
    y = 0.01 + 2e-5 * x + rng.normal(0, 1e-3, 500)
    y[:25] *= 5                                       # 5% stragglers
    a, b, _ = huber_line(x, y)
    assert b == pytest.approx(2e-5, rel=0.05) and a == pytest.approx(0.01, abs=0.005)
    assert not math.isnan(a)


def test_two_logs_at_different_drafter_counts_fit_the_sync_scaling(tmp_path):
    # a flat all-reduce (same cost at any M) cannot be told from a ring one with one M; two Ms can
    s = scenario(n_target=5, n_drafter=3, sync_every=1, sync_s=0.04, sync_scaling="flat")
    write_log(tmp_path / "m3.jsonl", s)
    write_log(tmp_path / "m2.jsonl", s.split(6, 2))
    one = fit_pipeline([load_log(tmp_path / "m3.jsonl")])
    both = fit_pipeline([load_log(tmp_path / "m3.jsonl"), load_log(tmp_path / "m2.jsonl")])
    assert one.sync.allreduce_s(2) == pytest.approx(0.04 * 0.75, rel=0.05)     # ring assumption: wrong here
    assert both.sync.allreduce_s(2) == pytest.approx(0.04, rel=0.05)
    assert both.sync.allreduce_s(3) == pytest.approx(0.04, rel=0.05)
    assert sorted(both.sync.dur_by_workers) == [2, 3]


# --- real-hardware sweeps (fixtures/sweep/): contention, drift, token model -----------------------
SWEEP = Path(__file__).resolve().parent.parent / "fixtures" / "sweep"


def _sweep_fit(*names: str):
    return fit_pipeline([load_log(SWEEP / n) for n in names])


def test_one_split_leaves_contention_unmeasured_and_widens_with_distance():
    fit = _sweep_fit("cpu32/cpu32-6x2-r0.jsonl.gz")
    c = fit.contention
    assert not c.measured and c.ref_producers == 6 and c.gpus == 8
    assert c.scale(3, 8) == (1.0, 1.0)
    se_near, se_far = c.rel_se(5, 8), c.rel_se(2, 8)
    assert se_near[0] == pytest.approx(CONTENTION_PRIOR_SE)
    assert se_far[0] == pytest.approx(4 * CONTENTION_PRIOR_SE)
    assert c.rel_se(6, 8) == (0.0, 0.0)
    assert c.rel_se(2, 64) == (0.0, 0.0)   # another G: no split-dependence is claimed


def test_shared_host_carries_run_to_run_shift_and_the_within_log_slope():
    from advisor.fit import RUN_SE

    fit = _sweep_fit("cpu16/cpu16-3x3-r0.jsonl.gz")
    c = fit.contention
    assert c.run_se == RUN_SE and c.within is not None and c.within.estimated
    # the drafters' own slope (per busy drafter) is identified there and widens their prior only
    d = c.within.consumer
    assert d.consumer_identified and not d.consumer_confounded
    prior_p, prior_c = c.role_prior_se()
    assert prior_p == pytest.approx(CONTENTION_PRIOR_SE)
    assert prior_c == pytest.approx(math.hypot(CONTENTION_PRIOR_SE, d.per_consumer))
    assert c.rel_se(2, 6)[1] == pytest.approx(prior_c)
    # the projection's centre keeps the logged step times
    assert c.scale(5, 6) == (1.0, 1.0)


def test_dedicated_gpus_carry_no_contention_prior_nor_run_shift():
    fit = fit_pipeline([load_log(Path(__file__).resolve().parent.parent / "fixtures" / "reference-7x1.jsonl")])
    c = fit.contention
    assert c.prior_se == 0.0 and c.run_se == 0.0 and c.role_prior_se() == (0.0, 0.0)


def test_two_splits_measure_that_targets_slow_each_other():
    # 32-core host: target step 132 ms at 2-6, 160 ms at 7-1 (both repeats agree)
    fit = _sweep_fit("cpu32/cpu32-7x1-r0.jsonl.gz", "cpu32/cpu32-2x6-r0.jsonl.gz")
    c = fit.contention
    assert c.measured and (c.lo_producers, c.hi_producers) == (2, 7)
    assert 0.02 < c.producer_k < 0.06
    assert abs(c.consumer_k) < 0.03
    # the reference is the first log's split: its step time is that log's own
    assert fit.producer.busy_mean_s == pytest.approx(0.1595, rel=0.03)
    assert fit.producer.busy_mean_s * c.scale(2, 8)[0] == pytest.approx(0.1324, rel=0.03)
    # beyond the logged splits nothing is extrapolated, only carried in the interval
    assert c.scale(1, 8) == c.scale(2, 8)
    assert c.rel_se(1, 8)[0] > c.rel_se(2, 8)[0]


def test_drift_between_window_halves_is_measured():
    fit = _sweep_fit("cpu32/cpu32-4x4-r1.jsonl.gz")
    assert 0.0 <= fit.producer.drift < 0.2
    assert fit.consumer.drift >= 0.0


def test_one_token_budget_uses_the_power_law_prior():
    fit = _sweep_fit("h200x2-234m/h200x2-234m-1x1-tb32768-r0.jsonl.gz")
    p = fit.producer
    assert p.token_model == "power" and p.token_exponent == pytest.approx(TOKEN_EXPONENT_PRIOR)   # line r2 < 0
    assert p.busy_at(fit.tokens_mean) == pytest.approx(p.busy_mean_s)
    assert p.busy_at(fit.tokens_mean / 2) < p.busy_mean_s
    assert p.busy_at_rel_half95(fit.tokens_mean) == 0.0
    # the exponent's range over one e-fold of ln 2, and the run-to-run spread of another run's level
    assert p.busy_at_rel_half95(fit.tokens_mean / 2) == pytest.approx(
        math.hypot(TOKEN_EXPONENT_PRIOR_HALF95 * math.log(2), 1.96 * TOKEN_RUN_SE))


def test_two_token_budgets_fit_a_line_through_their_means():
    fit = _sweep_fit("h200x2-234m/h200x2-234m-1x1-tb16384-r0.jsonl.gz",
                     "h200x2-234m/h200x2-234m-1x1-tb49152-r0.jsonl.gz")
    p = fit.producer
    assert p.token_model == "budgets"
    # measured target steps: 78 ms at ~15.2K tokens, 157 ms at ~45.5K: a fixed cost of ~38 ms
    # and ~2.6 us per token
    a, b = p.budget_line
    assert 0.025 < a < 0.05 and 2.2e-6 < b < 3.0e-6
    assert p.busy_at(fit.tokens_mean) == pytest.approx(p.busy_mean_s)
    # the repeats at 32K measured 104-128 ms; the line says ~117 ms
    assert p.busy_at(30300) / p.busy_at(fit.tokens_mean) * p.busy_mean_s == pytest.approx(0.117, rel=0.06)
    lo, hi = p.token_range
    assert lo < fit.tokens_mean * 1.1 and hi > 40000
    # inside the logged range only the line's own error; beyond it curvature too, growing with distance
    inside, out1, out2 = (p.busy_at_rel_half95(t) for t in (30300, 2 * hi, 4 * hi))
    assert 0 < inside < out1 < out2
    # each e-fold beyond the range adds curvature in quadrature
    assert out2 ** 2 - out1 ** 2 > (TOKEN_LINE_CURVATURE_HALF95 * math.log(2)) ** 2


def test_a_negative_fixed_cost_falls_back_to_a_line_through_the_origin():
    from advisor.fit import _budget_line
    rng = np.random.default_rng(3)
    t = np.arange(400.0)
    frames = {0: {"target": pd.DataFrame({"t": t, "busy": rng.normal(0.05, 0.001, 400)})},
              1: {"target": pd.DataFrame({"t": t, "busy": rng.normal(0.15, 0.003, 400)})}}
    rf = _sweep_fit("h200x2-234m/h200x2-234m-1x1-tb16384-r0.jsonl.gz").producer
    # busy triples while tokens only double: the line through the means crosses zero at 5K tokens
    out = _budget_line(rf, 10000.0, frames, {0: 10000.0, 1: 20000.0}, [[0], [1]])
    a, b = out.budget_line
    assert a == 0.0 and b > 0
    assert out.busy_at(20000.0) == pytest.approx(2 * out.busy_at(10000.0))


def test_a_loader_close_to_binding_is_engaged_and_calibrated(tmp_path):
    # targets 7 x 1/7 b/s, a bursty loader at 0.97 b/s behind 4-slot prefetch queues: targets starve
    # a few percent of the time with a batch or more queued on average (below the fixed thresholds)
    tm = TokenModel(budget=32768, mean=31200.0, cv=0.03, seq_len=1926.0)
    s = Scenario(name="near", n_target=7, n_drafter=1, tokens=tm, hs_cap=20, pre_cap=4, n_batches=8000, seed=112,
                 target=ServiceModel.from_mean(7.0, tm.mean, overhead_share=0.1, scv=0.05),
                 drafter=ServiceModel.from_mean(1 / 1.3, tm.mean, overhead_share=0.1, scv=0.05),
                 loader=ServiceModel(1 / 0.97, 0.0, 1.0))
    write_log(tmp_path / "near.jsonl", s, rates_every_s=60.0)
    fit = fit_pipeline([load_log(tmp_path / "near.jsonl")])
    ld = fit.loader
    assert ld.near_binding and ld.calibrated and ld.input_bound
    assert ld.pre_mean_depth > 1.0   # not input-bound by the fixed thresholds
    assert 0.9 < ld.capacity_bps < 1.05
    from advisor.model import project_split
    # the observed split is reproduced; the loader is why
    assert project_split(fit, 7, 1).x_bps == pytest.approx(fit.observed[0].bps, rel=2e-3)
    assert project_split(fit, 7, 1).bottleneck == "loader"


def test_a_never_starved_pipeline_leaves_the_loader_alone():
    fit = fit_pipeline([load_log(SWEEP / "cpu32/cpu32-7x1-r0.jsonl.gz")])
    assert not fit.loader.near_binding and not fit.loader.input_bound


def _regime_log(tmp_path, factor: float):
    from dataclasses import replace as dc_replace

    from advisor.synth import draw

    tm = TokenModel(budget=32768, mean=31200.0, cv=0.03, seq_len=1926.0)
    s = Scenario(name="regime", n_target=6, n_drafter=2, tokens=tm, hs_cap=20, pre_cap=50, n_batches=6000, seed=113,
                 target=ServiceModel.from_mean(7.0, tm.mean, overhead_share=0.1, scv=0.05),
                 drafter=ServiceModel.from_mean(2.0, tm.mean, overhead_share=0.1, scv=0.05))
    d = draw(s)
    slow = (np.arange(len(d.tokens)) // 300) % 3 == 0
    d = dc_replace(d, drafter_s=np.where(slow, d.drafter_s * factor, d.drafter_s))
    path = tmp_path / f"regime-{factor}.jsonl"
    write_log(path, s, rates_every_s=60.0, sample=d)
    return fit_pipeline([load_log(path)])


def test_regimes_are_detected_and_lower_the_balanced_projection(tmp_path):
    from advisor.model import project_split

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


def test_the_fitted_or_assumed_contention_is_reported(recwarn):
    from advisor.schema import AssumptionWarning

    _sweep_fit("cpu32/cpu32-7x1-r0.jsonl.gz", "cpu32/cpu32-2x6-r0.jsonl.gz")
    said = [str(w.message) for w in recwarn if issubclass(w.category, AssumptionWarning)]
    assert any("each extra target" in m and "+3." in m for m in said), said
    recwarn.clear()
    _sweep_fit("cpu32/cpu32-7x1-r0.jsonl.gz")
    said = [str(w.message) for w in recwarn if issubclass(w.category, AssumptionWarning)]
    assert any(f"{100 * CONTENTION_PRIOR_SE:.1f}% per worker moved" in m for m in said), said
    # the within-log estimate (advisor.contention) is reported alongside, as data
    assert any("inside the log" in m and "per extra busy target" in m for m in said), said
