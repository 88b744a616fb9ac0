"""Fit recovers known parameters from synthetic logs of the documented generator."""
from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.fit import expected_max_normal, fit_pipeline, huber_line, sync_scaling
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
