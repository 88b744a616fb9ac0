"""Queue advice: deepen only where buffering pays, computed at the table's own settings."""
from __future__ import annotations

from advisor.advice import advise, advise_numbers
from advisor.project.queues import QUEUE_GAIN_WORTH


def test_bursty_balanced_split_with_a_tiny_queue_should_deepen():
    adv = advise_numbers({"target": 4, "drafter": 4}, {"target": 4.0, "drafter": 4.0}, hs_cap=1, scv=1.0)
    q = adv.decision.queue
    assert q.cap == 1 and q.bps_double > q.bps and q.deepen and q.gain_pct >= 100 * QUEUE_GAIN_WORTH
    assert "deepen q_hs from 1 to 2" in adv.to_json()["queues"]["hs"]["advice"]


def test_reference_keeps_its_queue_and_prices_the_slots(reference):
    q = advise(reference).decision.queue
    assert not q.deepen and q.bytes_per_slot and q.extra_bytes == 20 * q.bytes_per_slot


def test_queue_advice_at_another_depth_and_budget(reference):
    q = advise(reference, hs_cap=4, token_budget=16384).decision.queue
    assert q.cap == 4 and q.bps > 1.0     # half the tokens per batch: about twice the batches
