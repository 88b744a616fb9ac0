"""The sentences (advisor.decide.reasons): written from the decision and the rows it names, nothing else."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from advisor.advice import advise, advise_numbers
from advisor.decide.odds_text import odds_sentence
from advisor.decide.reasons import bps_text, dur_text, holds_unless, pct_text, queue_text, reasons, signed_pct
from advisor.present.json import advice_json
from advisor.project.queues import QueueAdvice


def test_the_recommendation_is_the_sentences_of_its_decision(reference):
    adv = advise(reference)
    d = adv.decision
    # the reasons, then the odds sentence (issue 34), all from the one decision
    assert tuple(reasons(d, adv.fit, adv.observed)) + (odds_sentence(d),) == adv.recommendation.reasons
    assert tuple(holds_unless(d, adv.fit)) == adv.recommendation.holds_unless
    assert advice_json(adv)["queues"]["hs"]["advice"] == queue_text(d.queue)


def test_a_reason_reads_the_rows_it_is_given(reference):
    adv = advise(reference)
    d = adv.decision
    rows = dict(d.rows)  # the records the decision carries (advisor.project.rows)
    j = rows[d.judged]
    rows[d.judged] = replace(j, consumer=replace(j.consumer, cap_bps=1.2345))
    first = reasons(replace(d, rows=rows), adv.fit, adv.observed)[0]
    assert first.startswith(f"at {d.judged} the ") and "drafter 1.234 b/s" in first
    assert "drafter 1.234 b/s" not in adv.recommendation.reasons[0]


def test_the_measured_reason_comes_from_the_observed_split(reference):
    adv = advise(reference)
    ob = adv.observed
    measured = reasons(adv.decision, adv.fit, ob)[1]
    assert measured.startswith(f"measured at {adv.decision.observed} (the log): ")
    assert f"q_hs {ob.hs_mean_depth:.1f}/{adv.fit.hs_cap} on average (full {pct_text(ob.hs_full_share)}" in measured
    assert f"targets blocked {pct_text(ob.producer_blocked)}" in measured


def test_a_pick_the_odds_carry_against_the_point_says_so_in_holds_unless():
    # SpecForge's Domino 1+7 with the trainers only bounded (BENCHMARKS.md 19.13): 2-6 is picked for
    # its expected rate, while at the point projections 1-7 leads; the thresholds then say where the
    # point projections meet, not that the runner-up would catch up with the pick
    adv = advise_numbers({"target": 1, "drafter": 7}, {"target": "52..57", "drafter": ">=50.1"})
    d = adv.decision
    pick, rival = d.rows[d.recommended], d.rows[d.runner_up]
    assert rival.bps > pick.bps
    first, *rest = holds_unless(d, adv.fit)
    assert first.startswith(f"the odds change: {d.recommended} is picked for its expected rate")
    assert f"{d.runner_up} leads ({bps_text(rival.bps)} against {bps_text(pick.bps)} b/s)" in first
    caps = [h for h in rest if " capacity is " in h]
    assert caps and all(f"point projections of {d.runner_up} and {d.recommended} then meet" in h for h in caps)
    assert not any(f"{d.runner_up} then matches {d.recommended}" in h for h in rest)
    # where the point agrees with the pick, the thresholds keep their reading
    given = advise_numbers({"target": 1, "drafter": 7}, {"target": "52..57", "drafter": 50.1})
    lines = holds_unless(given.decision, given.fit)
    assert not lines[0].startswith("the odds change")
    assert any(f"{given.decision.runner_up} then matches {given.decision.recommended}" in h for h in lines)


def test_holds_unless_names_the_decisions_consumer(reference):
    adv = advise(reference, roles={"target": 6, "drafter": 2})
    assert adv.decision.settings.consumer == "drafter"
    assert any("per-drafter scaling" in h for h in holds_unless(adv.decision, adv.fit))


def _queue(bps: float, double: float, half: float, bytes_per_slot: float | None = None) -> QueueAdvice:
    return QueueAdvice(
        cap=20,
        split=(7, 1),
        bps=bps,
        bps_double=double,
        bps_quad=double,
        bps_half=half,
        bytes_per_slot=bytes_per_slot,
    )


def test_queue_text_keeps_deepens_or_says_nothing():
    assert queue_text(_queue(1.0, 1.001, 1.0)).startswith(
        "keep q_hs at 20 at 7-1: doubling it gains +0.1%, halving it loses nothing;"
    )
    deepen = queue_text(_queue(1.0, 1.1, 0.9, bytes_per_slot=2**30))
    assert deepen.startswith("deepen q_hs from 20 to 40 at 7-1: +10.0% throughput (+20.0 GiB for 20 more slots)")
    assert queue_text(_queue(0.0, 0.0, 0.0)) == "q_hs at 20: no throughput is projected at 7-1, so no queue advice."


@pytest.mark.parametrize("value,text", [(0.85514, "0.8551"), (12345.6, "1.235e+04"), (1.0, "1")])
def test_bps_text_has_four_significant_digits(value, text):
    assert bps_text(value) == text


def test_number_words():
    assert signed_pct(-0.04) == "0.0%" and signed_pct(2.345) == "+2.3%" and signed_pct(-7.6) == "-7.6%"
    assert pct_text(0.934) == "93%" and pct_text(math.nan) == "-"
    assert [dur_text(s) for s in (None, math.inf, 42, 600, 7200, 4 * 86400)] == [
        "-",
        "-",
        "42 s",
        "10 min",
        "2.0 h",
        "4.0 d",
    ]


def test_a_pipeline_without_a_queue_is_not_told_about_one(tmp_path, reference_rates):
    """Issue 35 item 2: no queue declared: no q_hs depth, no queue advice, and nothing throttled
    "by the queue"; the caveat says the hand-off is modelled without a buffer."""
    import re

    from conftest import rates_without_tokens

    from advisor.present.text import render

    adv = advise(rates_without_tokens(reference_rates, tmp_path / "r.jsonl", queues=False))
    out = render(adv) + render(adv, "markdown")
    assert "q_hs" not in out and "Queue:" not in out and "by the queue" not in out, out
    assert not re.search(r"\bdeepen\b|\bkeep q_\w+ at\b", out, re.IGNORECASE)
    assert any("declares no queue feeding 'drafter'" in w and "no buffer" in w for w in adv.warnings)
    with_queue = advise(reference_rates)
    assert f"q_hs {with_queue.splits.at['7-1', 'hs_mean_depth']:.1f}/20" in with_queue.recommendation.reasons[0]


def test_a_given_range_is_said_on_the_gpus_its_engines_hold():
    # 8 targets of 2 GPUs were given 0.88..0.95 b/s together: on 16 GPUs, not on 8
    adv = advise_numbers(
        {"target": 8, "drafter": 2},
        {"target": "0.88..0.95", "drafter": 0.86},
        gpus_per_worker={"target": 2},
    )
    said = " ".join((*adv.recommendation.reasons, *adv.warnings))
    assert "given as 0.88..0.95 b/s on 16 GPUs" in said
    assert "on 8 GPUs" not in said
