"""Text, Markdown and JSON renderings carry the same verdict and numbers."""
from __future__ import annotations

import json

from advisor.advice import advise
from advisor.report import render


def test_renderings_agree(reference):
    adv = advise(reference)
    text, md, js = render(adv, "text"), render(adv, "markdown"), json.loads(render(adv, "json"))
    assert "STAY with 7-1" in text and "stay with **7-1**" in md
    assert js["recommendation"]["verdict"] == "stay"
    for s in js["splits"]:
        split = f"{s['roles']['target']}-{s['roles']['drafter']}"
        assert f"{s['bps']:.3f}" in text and f"{s['bps']:.3f}" in md, split
    for h in adv.recommendation.holds_unless:
        assert h in text and h in md


def test_caveats_are_listed(reference_rates):
    adv = advise(reference_rates)
    text = render(adv)
    assert adv.warnings and "Caveats:" in text
    assert all(w in text for w in adv.warnings)
