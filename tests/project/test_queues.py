"""Queue advice: deepen only where buffering pays, computed at the table's own settings."""

from __future__ import annotations

from advisor.advice import advise, advise_numbers
from advisor.present.json import advice_json
from advisor.project.queues import QUEUE_GAIN_WORTH


def test_bursty_balanced_split_with_a_tiny_queue_should_deepen():
    adv = advise_numbers({"target": 4, "drafter": 4}, {"target": 4.0, "drafter": 4.0}, hs_cap=1, scv=1.0)
    q = adv.decision.queue
    assert q.cap == 1 and q.bps_double > q.bps and q.deepen and q.gain_pct >= 100 * QUEUE_GAIN_WORTH
    assert "deepen q_hs from 1 to 2" in advice_json(adv)["queues"]["hs"]["advice"]


def test_reference_keeps_its_queue_and_prices_the_slots(reference):
    q = advise(reference).decision.queue
    assert not q.deepen and q.bytes_per_slot and q.extra_bytes == 20 * q.bytes_per_slot


def test_queue_advice_at_another_depth_and_budget(reference):
    q = advise(reference, hs_cap=4, token_budget=16384).decision.queue
    assert q.cap == 4 and q.bps > 1.0  # half the tokens per batch: about twice the batches


def test_a_pipeline_without_a_declared_queue_gets_no_queue_advice(tmp_path, reference_rates):
    """Issue 35 item 2: the header declares no queue feeding the drafters: nothing to deepen or keep
    (the hand-off is modelled without a buffer); a depth given with --hs-cap is a q_hs to advise on."""
    from conftest import rates_without_tokens

    from advisor.project.queues import has_hs_queue, queue_advice

    path = rates_without_tokens(reference_rates, tmp_path / "r.jsonl", queues=False)
    adv = advise(path)
    assert not adv.fit.hs_declared and adv.fit.hs_cap == 0 and not has_hs_queue(adv.fit, adv.settings)
    assert adv.decision.queue is None and queue_advice(adv.fit, adv.settings, (7, 1)) is None
    assert advice_json(adv)["queues"] == {}
    given = advise(path, hs_cap=8)
    assert given.decision.queue is not None and given.decision.queue.cap == 8
    assert advise(reference_rates).fit.hs_declared


def test_a_log_without_tokens_prices_no_queue_slot(tmp_path, reference_rates):
    """The slots' memory is hs_bytes_per_token x tokens: with no tokens measured the batch size is
    nominal, so no memory figure is given (the advice itself stays)."""
    from conftest import rates_without_tokens

    q = advise(rates_without_tokens(reference_rates, tmp_path / "r.jsonl")).decision.queue
    assert q is not None and q.bytes_per_slot is None and q.extra_bytes is None
    assert advise(reference_rates).decision.queue.bytes_per_slot > 0
