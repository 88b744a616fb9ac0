"""Sensitivity: tie factors really tie the two splits; scaling ties; levers only when they help."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.advice import advise, advise_numbers
from advisor.model.chain import WhatIf
from advisor.project.sensitivity import levers, tie_factor
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


def test_scaling_tie_is_where_the_big_split_matches():
    adv = advise_numbers({"target": 6, "drafter": 2}, {"target": 1.2, "drafter": 1.4})
    tie = next(t for t in adv.decision.sensitivity.scaling if t.other == (7, 1))
    x_small = split_capacities(adv.fit, adv.settings, 7, 1).x_bps
    x_big = split_capacities(adv.fit, adv.settings, 6, 2, what_if=WhatIf(consumer_scaling=tie.scaling)).x_bps
    assert x_big == pytest.approx(x_small, rel=1e-3)


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
