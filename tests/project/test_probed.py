"""The splits a probe measured, compared directly: paired by round, the shared parts cancelled."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from bare_rows import bare_row
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.decide.odds import draw_inputs, draw_rates
from advisor.measure.observe import SegmentRate
from advisor.project.probed import compare_probed, probe_var
from advisor.project.rows import lead_interval
from advisor.stats import Z_95


def _lead(rows, a: str, b: str) -> tuple[float, float] | None:
    """The lead interval of row ``a`` over ``b`` of bare rows."""
    by = {r.label: r for r in rows}
    return lead_interval(by[a], by[b])


def _segments(rates: list[float]) -> tuple[SegmentRate, ...]:
    return tuple(SegmentRate(segment=2 * r + 1, round=r + 1, bps=x, window_s=30.0) for r, x in enumerate(rates))


def test_two_splits_carry_the_variance_of_the_mean_paired_difference():
    a = [10.0, 10.4, 9.7, 10.1]
    b = [9.5, 10.0, 9.3, 9.4]
    v = probe_var({"A": _segments(a), "B": _segments(b)})
    d = np.log(np.array(a) / np.array(b))
    assert math.isclose(v["A"] + v["B"], d.var(ddof=1) / len(d), rel_tol=1e-9)
    assert math.isclose(v["A"], v["B"], rel_tol=1e-9)


def test_a_drift_shared_by_each_round_cancels():
    # the host slows by 20% in round 2 and 35% in round 3: unpaired, the rounds differ by that much;
    # paired by round, only the split's own noise is left
    drift = np.array([1.0, 0.8, 0.65])
    a = 10.0 * drift * np.array([1.0, 1.01, 0.99])
    b = 9.0 * drift * np.array([1.0, 0.99, 1.01])
    v = probe_var({"A": _segments(list(a)), "B": _segments(list(b))})
    unpaired = np.log(a).var(ddof=1) / 3 + np.log(b).var(ddof=1) / 3
    assert v["A"] + v["B"] < unpaired / 50
    d = np.log(a / b)
    assert math.isclose(v["A"] + v["B"], d.var(ddof=1) / 3, rel_tol=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(5, 20), st.floats(5, 20), st.floats(5, 20), st.floats(0.3, 3.0)), min_size=2, max_size=6
    )
)
def test_the_paired_variance_ignores_any_factor_a_round_puts_on_every_split(rows):
    rates = {lab: _segments([r[i] for r in rows]) for i, lab in enumerate("ABC")}
    moved = {lab: _segments([r[i] * r[3] for r in rows]) for i, lab in enumerate("ABC")}
    v, w = probe_var(rates), probe_var(moved)
    for lab in "ABC":
        assert v[lab] >= 0
        assert math.isclose(v[lab], w[lab], rel_tol=1e-6, abs_tol=1e-12)


def test_one_round_gives_no_paired_estimate():
    v = probe_var({"A": _segments([10.0]), "B": _segments([9.0])})
    assert v == {"A": 0.0, "B": 0.0}


@dataclass(frozen=True)
class _Observed:
    roles: dict
    segments: tuple


@dataclass(frozen=True)
class _Fit:
    roles: tuple
    observed: tuple


def _table() -> tuple:
    """Three splits: 3-1 and 2-2 observed by a probe, 1-3 projected; the split slope's parts
    differ a lot between the two probed rows (the fit counts it in their lead)."""
    return tuple(
        bare_row(
            lab,
            x,
            x * 0.9,
            x * 1.1,
            observed=not math.isnan(obs),
            observed_bps=obs,
            own=1e-5,
            eta_s=100.0 / x,
            tok_s=x * 1000,
            err_p_samp=0.01,
            err_p_level=0.02,
            err_p_split=split,
        )  # fmt: skip
        for lab, x, obs, split in (("3-1", 10.0, 9.8, 0.03), ("2-2", 9.7, 9.6, -0.03), ("1-3", 6.0, math.nan, -0.05))
    )


def _fit(a_rates: list[float], b_rates: list[float]) -> _Fit:
    return _Fit(
        roles=("target", "drafter"),
        observed=(
            _Observed(roles={"target": 3, "drafter": 1}, segments=_segments(a_rates)),
            _Observed(roles={"target": 2, "drafter": 2}, segments=_segments(b_rates)),
        ),
    )


def test_a_probed_lead_carries_the_measured_noise_not_the_fit_parts():
    a, b = [9.9, 9.7, 9.8], [9.5, 9.6, 9.7]
    df = _table()
    before = _lead(df, "3-1", "2-2")
    out = compare_probed(_fit(a, b), df)
    lo, hi = _lead(out, "3-1", "2-2")
    v = probe_var({"3-1": _segments(a), "2-2": _segments(b)})
    floor = 0.01**2
    half = Z_95 * math.sqrt(max(v["3-1"], floor) + max(v["2-2"], floor))
    assert math.isclose(lo, math.expm1(math.log(9.8 / 9.6) - half), rel_tol=1e-9)
    assert math.isclose(hi, math.expm1(math.log(9.8 / 9.6) + half), rel_tol=1e-9)
    assert hi - lo < (before[1] - before[0]) / 2
    assert [r.probe_segments for r in out] == [3, 3, 0]
    assert out[2] == df[2]  # a projected row unchanged


def test_the_joint_draw_sees_the_same_noise_as_the_lead_interval():
    a, b = [9.9, 9.5, 9.8, 10.0], [9.5, 9.6, 9.4, 9.7]
    out = compare_probed(_fit(a, b), _table())
    inp = draw_inputs(out)
    rates = draw_rates(inp, draws=20000, seed=7)
    lead = np.log(rates[:, 0] / rates[:, 1])
    want = out[0].parts.own_var_log2 + out[1].parts.own_var_log2
    assert math.isclose(lead.var(), want, rel_tol=0.05)
    assert math.isclose(lead.mean(), math.log(9.8 / 9.6), abs_tol=0.002)


def test_a_table_with_one_probed_split_is_left_as_it_is():
    df = _table()
    fit = _Fit(
        roles=("target", "drafter"),
        observed=(
            _Observed(roles={"target": 3, "drafter": 1}, segments=_segments([9.9, 9.7])),
            _Observed(roles={"target": 2, "drafter": 2}, segments=()),
        ),
    )
    assert compare_probed(fit, df) is df
