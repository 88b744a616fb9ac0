"""The calibrated draw of advisor.decide.odds (BENCHMARKS.md 19.6): its domain, the two roles'
correlated levels, the temperature, and the invariants of issue 34 under both."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.advice import advise, advise_numbers
from advisor.decide.odds import (
    LEVEL_CORR,
    STEPS_TEMPERATURE,
    calibrated,
    correlated_levels,
    draw_inputs,
    draw_rates,
    split_odds,
)
from advisor.project.table import ERR_SHARED

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FIX = Path(__file__).resolve().parents[2] / "fixtures"
IP, IC = ERR_SHARED.index("err_p_level"), ERR_SHARED.index("err_c_level")


@st.composite
def tables(draw):
    """A projected table: rates, shared coefficients, own variances, some rows widened."""
    k = draw(st.integers(1, 6))
    bps = [draw(st.floats(0.5, 20.0)) for _ in range(k)]
    rows = []
    for x in bps:
        r = {"bps": x, "bps_low": x * 0.8, "bps_high": x * 1.25, "widened": draw(st.booleans()) and draw(st.booleans())}
        r["err_own_var"] = draw(st.floats(0.0, 0.05))
        r.update({c: draw(st.floats(-0.3, 0.3)) for c in ERR_SHARED})
        rows.append(r)
    return pd.DataFrame(rows, index=pd.Index([f"{k - i}-{i + 1}" for i in range(k)], name="split"))


@FAST
@given(st.lists(st.tuples(st.floats(-0.3, 0.3), st.floats(-0.3, 0.3)), min_size=1, max_size=6), st.floats(0.0, 0.95))
def test_correlated_levels_keep_every_splits_own_level_variance(ab, rho):
    shared = np.zeros((len(ab), len(ERR_SHARED)))
    shared[:, IP], shared[:, IC] = [a for a, _ in ab], [b for _, b in ab]
    out = correlated_levels(shared, rho)
    np.testing.assert_allclose(out[:, IP] ** 2 + out[:, IC] ** 2, shared[:, IP] ** 2 + shared[:, IC] ** 2, atol=1e-12)
    others = [j for j in range(len(ERR_SHARED)) if j not in (IP, IC)]
    np.testing.assert_array_equal(out[:, others], shared[:, others])


def test_a_lead_across_the_balance_narrows_by_the_level_correlation():
    # a producer-bound split moves with the producers' level, a consumer-bound one with the
    # consumers': independent, their lead's variance is 2 s^2; correlated at rho, 2 s^2 (1 - rho)
    s = 0.09
    shared = np.zeros((2, len(ERR_SHARED)))
    shared[0, IP], shared[1, IC] = s, s
    for rho in (0.0, 0.5, LEVEL_CORR):
        out = correlated_levels(shared, rho)
        var = float(((out[0] - out[1]) ** 2).sum())
        assert math.isclose(var, 2 * s * s * (1 - rho), rel_tol=1e-9)


def test_the_temperature_scales_the_normal_part_of_the_draw():
    log = FIX / "sweep" / "ded32" / "ded32-4x4-r0.jsonl.gz"
    df = advise(log).splits
    raw, cal = draw_inputs(df), draw_inputs(df, calibrate=True)
    assert (raw.temperature, raw.level_corr) == (1.0, 0.0)
    assert (cal.temperature, cal.level_corr) == (STEPS_TEMPERATURE, LEVEL_CORR)
    # the same seed: each split's log-rate spread is the temperature times its spread with the levels
    # correlated (each split's own level variance kept), up to the ends (none here)
    assert not cal.ends.size or np.abs(cal.ends).max() < 0.01
    x_raw = np.log(draw_rates(raw, 20000, seed=3) / raw.bps)
    x_cal = np.log(draw_rates(cal, 20000, seed=3) / cal.bps)
    ratio = x_cal.std(axis=0) / x_raw.std(axis=0)
    assert np.all(np.abs(ratio - STEPS_TEMPERATURE) < 0.05), ratio


def test_the_calibration_domain_is_step_logs_of_a_shared_host_with_a_core_per_worker():
    sweep = advise(FIX / "sweep" / "hold16" / "hold16-5x3-r0.jsonl.gz")
    assert calibrated(sweep.fit, sweep.decision.evidence)
    over = advise(FIX / "oversub2" / "2x1-r0")  # 3 workers on 2 cores: its split terms are measured moves
    assert not calibrated(over.fit, over.decision.evidence)
    numbers = advise_numbers({"target": 4, "drafter": 4}, {"target": 9.0, "drafter": 14.8})
    assert not calibrated(numbers.fit, numbers.decision.evidence)
    lines = (FIX / "reference-7x1.jsonl").read_bytes().splitlines(keepends=True)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        thin = Path(d) / "head.jsonl"
        thin.write_bytes(b"".join(lines[:700]))
        adv = advise(thin)
        assert adv.decision.evidence.thin and not calibrated(adv.fit, adv.decision.evidence)


def test_the_oversubscribed_pick_keeps_its_upside():
    # oversub2 (measured 1-2 73 b/s, 2-1 67): outside the domain the draw is the table's, and the
    # wide upside of 1-2 still makes it the pick from the 2-1 log (a temperature would not)
    adv = advise(FIX / "oversub2" / "2x1-r0")
    assert adv.decision.recommended == "1-2"
    assert split_odds(adv.splits, calibrate=True).best == "2-1"


@FAST
@given(tables(), st.integers(0, 2**31 - 1))
def test_calibrated_odds_keep_the_invariants(df, seed):
    o = split_odds(df, draws=500, seed=seed, calibrate=True)
    assert all(0.0 <= s.p_best <= 1.0 and s.regret_pct >= 0.0 for s in o.splits)
    assert math.isclose(sum(s.p_top for s in o.splits), 1.0, abs_tol=1e-9)
    assert all(s.p_best >= s.p_top - 1e-12 for s in o.splits)
