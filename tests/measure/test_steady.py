"""Warm-up detection finds and drops a slow start; a run that never settles is flagged."""
from __future__ import annotations

import numpy as np
import pytest

from advisor.ingest.load import load_log
from advisor.errors import SteadyStateWarning
from advisor.measure.steady import find_steady, mser_truncation
from advisor.model.synth import Scenario, ServiceModel, TokenModel, write_log


def test_mser_finds_a_level_shift():
    rng = np.random.default_rng(1)
    y = np.concatenate([rng.normal(3.0, 0.1, 200), rng.normal(1.0, 0.1, 1800)])
    k, settled = mser_truncation(y)
    assert 190 <= k <= 215 and settled


def test_mser_flags_a_drifting_series():
    y = np.linspace(1, 3, 2000) + np.random.default_rng(2).normal(0, 0.01, 2000)
    _, settled = mser_truncation(y)
    assert not settled


def test_warmup_dropped_from_a_log(tmp_path):
    s = Scenario(name="w", n_target=3, n_drafter=1, target=ServiceModel(0.0, 50e-6, 0.02),
                 drafter=ServiceModel(0.0, 20e-6, 0.02), tokens=TokenModel(8192, 5000, 0.1, 500),
                 hs_cap=8, pre_cap=8, n_batches=3000, warmup_factor=3.0, warmup_tau_s=30.0, seed=3)
    write_log(tmp_path / "w.jsonl", s)
    win = find_steady(load_log(tmp_path / "w.jsonl"))
    assert win.settled
    assert 30 <= win.start_s <= 250
    assert 0 < win.warmup_share < 0.5


def test_never_settling_run_warns(tmp_path, write_log):
    from conftest import HEADER, step
    lines = [HEADER]
    t = 0.0
    for i in range(400):
        t += 0.1 + i * 0.002             # drafter keeps slowing down
        lines.append(step(t, "drafter", 0, busy=0.1))
    p = write_log(lines)
    with pytest.warns(SteadyStateWarning, match="not settled"):
        win = find_steady(load_log(p))
    assert not win.settled
