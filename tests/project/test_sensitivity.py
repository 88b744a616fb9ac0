"""Sensitivity: tie factors really tie the two splits; scaling ties; levers only when they help."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.advice import advise, advise_numbers
from advisor.model.chain import WhatIf, sync_scaling
from advisor.project.sensitivity import ROBUST_RANGE, SCALING_RANGE, levers, tie_factor
from advisor.project.table import split_capacities


def test_tie_factor_makes_the_runner_up_match(reference):
    adv = advise(reference)
    s, fit = adv.settings, adv.fit
    f = tie_factor(fit, s, (7, 1), (6, 2), 0)
    assert f == pytest.approx(1.082, abs=0.005)
    x71 = split_capacities(fit, s, 7, 1, what_if=WhatIf(mu_scale=(f, 1.0))).x_bps
    x62 = split_capacities(fit, s, 6, 2, what_if=WhatIf(mu_scale=(f, 1.0))).x_bps
    assert x62 == pytest.approx(x71, rel=1e-3)


def test_tie_factor_follows_the_settings(reference):
    adv = advise(reference)
    deep = tie_factor(adv.fit, adv.settings, (7, 1), (6, 2), 0)
    none = tie_factor(adv.fit, replace(adv.settings, hs_cap=0), (7, 1), (6, 2), 0)
    assert none != pytest.approx(deep, abs=1e-4)


def test_scaling_tie_is_where_the_rival_matches_every_split_scaled():
    """The pick 6-2 loses its lead where its 2 drafters, and every split's several, keep 5/7 of a
    lone drafter's rate: 5-3 (target-bound at 1.0) then matches it, long before 7-1 would (50%)."""
    adv = advise_numbers({"target": 6, "drafter": 2}, {"target": 1.2, "drafter": 1.4})
    (tie,) = adv.decision.sensitivity.scaling
    assert tie.subject == (6, 2) and tie.rival == (5, 3) and not tie.leads_below
    assert tie.scaling == pytest.approx(1.0 / 1.4, rel=0.03)
    x_rival = split_capacities(adv.fit, adv.settings, 5, 3, what_if=WhatIf(consumer_scaling=tie.scaling)).x_bps
    x_big = split_capacities(adv.fit, adv.settings, 6, 2, what_if=WhatIf(consumer_scaling=tie.scaling)).x_bps
    assert x_big == pytest.approx(x_rival, rel=1e-3)


def test_levers_only_when_they_raise_scaling():
    adv = advise("fixtures/h200-1x2.jsonl")
    lv = levers(adv.fit, 2)
    assert lv is not None and max(lv.scaling_balanced, lv.scaling_half_sync) > lv.scaling_now
    assert levers(adv.fit, 1) is None


def test_rate_without_its_interval_is_the_same_rate(reference):
    """The tie searches project the rate alone (interval=False): the very rate of the full projection."""
    adv = advise(reference)
    for n, m in ((7, 1), (6, 2), (4, 4)):
        full = split_capacities(adv.fit, adv.settings, n, m, what_if=WhatIf(mu_scale=(1.1, 0.9)))
        bare = split_capacities(adv.fit, adv.settings, n, m, what_if=WhatIf(mu_scale=(1.1, 0.9)), interval=False)
        assert bare.x_bps == full.x_bps and full.x_low_bps < full.x_bps < full.x_high_bps


# ---------------------------------------------------------------- issue 50 item 3: every rival, every split


def _brute_edge(rate, splits, rec, ref, end, steps=240):
    """Where ``rec`` stops (or starts) leading every other split, walking a fine grid from ``ref``
    to ``end``: (last value on the fitted side, first value past it, the splits at or above rec's
    rate there), or None where the leader never changes on the grid."""
    others = [s for s in splits if s != rec]

    def ahead(v):  # no other split projects more (ties within the solver's noise are no lead lost)
        return rate(v, rec) >= max(rate(v, s) for s in others) * (1 - 1e-9)

    first, prev = ahead(ref), ref
    for k in range(1, steps + 1):
        v = ref * (end / ref) ** (k / steps)
        if ahead(v) != first:
            behind = v if first else prev  # where rec does not lead
            return prev, v, {s for s in others if rate(behind, s) >= rate(behind, rec) * (1 - 1e-9)}
        prev = v
    return None


def _within(value, lo, hi):
    a, b = sorted((lo, hi))
    return a * (1 - 1e-6) <= value <= b * (1 + 1e-6)


def _check(found, expected, what):
    assert len(found) == len(expected), (what, found, expected)
    for (value, rival), (near, far, behind) in zip(found, expected):
        assert _within(value, near, far), (what, value, near, far)
        assert rival in behind, (what, rival, behind)


@settings(max_examples=10, deadline=None)
@given(
    n=st.integers(1, 5),
    m=st.integers(1, 4),
    more=st.integers(0, 3),
    target_bps=st.floats(0.2, 12.0),
    drafter_bps=st.floats(0.2, 12.0),
    sync_s=st.sampled_from([0.0, 0.2, 1.0]),
)
def test_thresholds_are_where_a_brute_force_search_over_every_split_finds_them(
    n, m, more, target_bps, drafter_bps, sync_s
):
    """Each threshold of "holds unless" is where the pick's lead over every other split ends, with
    every split projected at that value (issue 50 item 3): a fine grid over each knob finds the
    same values, and the split each names is at or above the pick just past it."""
    sync = {"sync_every": 8, "sync_s": sync_s} if sync_s and m > 1 else {}
    adv = advise_numbers(
        {"target": n, "drafter": m}, {"target": target_bps, "drafter": drafter_bps}, gpus=n + m + more, **sync
    )
    fit, s, d = adv.fit, adv.settings, adv.decision
    splits = [r.counts for r in d.rows.values()]
    rec = d.rows[d.recommended].counts
    if len(splits) < 2:
        return

    def x(split, what_if):
        return split_capacities(fit, s, *split, what_if=what_if, interval=False).x_bps

    for i, role in enumerate(fit.roles):

        def cap_rate(f, split, i=i):
            return x(split, WhatIf(mu_scale=(f, 1.0) if i == 0 else (1.0, f)))

        expected = [e for e in (_brute_edge(cap_rate, splits, rec, 1.0, end) for end in ROBUST_RANGE) if e]
        found = [(t.factor, t.rival) for t in d.sensitivity.thresholds if t.role == role and t.factor is not None]
        _check(found, expected, role)

    def scaled(v, split):
        return x(split, WhatIf(consumer_scaling=v) if split[1] > 1 else WhatIf())

    lo, hi = SCALING_RANGE
    ref = min(max(sync_scaling(fit.consumer, fit.sync, rec[1]), lo), hi)
    expected = [e for e in (_brute_edge(scaled, splits, rec, ref, end) for end in (lo, hi)) if e]
    found = [(t.scaling, t.rival) for t in d.sensitivity.scaling if t.scaling is not None]
    _check(found, expected, "scaling")


def test_holds_unless_names_the_first_rival_through_the_cli():
    """Issue 50 item 3: at 90% per-drafter scaling 6-2 falls to 4.5 b/s, where 5-3 (target-bound at
    4.5) already matches it; 7-1 only at 50%. The sentence names 90% and 5-3."""
    from typer.testing import CliRunner

    from advisor.cli.app import app

    args = "what-if --targets 6 --drafters 2 --target-bps 5.4 --drafter-bps 5.0 --gpus 8".split()
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if "of a lone drafter's rate" in x)
    assert "keeps less than 90% of a lone drafter's rate" in line and line.endswith("then 5-3 beats 6-2.")
    assert "7-1 beats 6-2" not in out.output
    # the capacities: each side names the first split to catch up
    assert "Drafter capacity is 10.0% lower than given (4.5 b/s on 2 GPUs, not 5): 5-3 then matches 6-2." in out.output
    assert (
        "Drafter capacity is 116.0% higher than given (10.8 b/s on 2 GPUs, not 5): 7-1 then matches 6-2." in out.output
    )


def test_the_search_at_large_g_keeps_the_picks_neighbours_a_stride_and_the_ends():
    """Issue 50 item 3's search projected every split at every knob value: at --gpus 4096 that took
    over a minute (tests/test_bad_inputs.py's limit); past MAX_SEARCHED splits it keeps a subset."""
    from advisor.project.sensitivity import MAX_SEARCHED, NEAR, searched

    small = [(n, 12 - n) for n in range(1, 12)]
    assert searched((7, 5), small) == small
    big = [(n, 4096 - n) for n in range(1, 4096)]
    kept = searched((2000, 2096), big)
    assert len(kept) <= 2 * NEAR + 1 + MAX_SEARCHED // 2 + 3
    assert {(2000 + d, 2096 - d) for d in range(-NEAR, NEAR + 1)} <= set(kept)
    assert {big[0], big[-1]} <= set(kept)


def test_the_sync_lever_names_the_rounds_untimed_time_beside_the_collective():
    """A round's share comes from the collective and the time no event timed (BENCHMARKS.md 19.25):
    the lever's sentence names both, so its percentage can be recomputed from what it prints."""
    from advisor.settings import Options
    from tests.conftest import FIXTURES

    log = FIXTURES / "sweep" / "sync2g14" / "sync2g14-10x4-tb1024-r0.jsonl.gz"
    adv = advise([log], Options(gpus=14))
    lv = levers(adv.fit, 4)
    assert lv is not None and lv.untimed_s == adv.fit.sync.overhead_s > 1e-3
    said = next(r for r in adv.recommendation.reasons if "4 drafters each keeps" in r)
    assert f"collective {lv.collective_s * 1e3:.0f} ms, {lv.untimed_s * 1e3:.1f} ms more untimed)" in said
