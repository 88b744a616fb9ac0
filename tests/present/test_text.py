"""Text, Markdown and JSON renderings carry the same verdict and numbers."""
from __future__ import annotations

import json

from advisor.advice import advise
from advisor.present.text import render


def test_renderings_agree(reference):
    adv = advise(reference)
    text, md, js = render(adv, "text"), render(adv, "markdown"), json.loads(render(adv, "json"))
    assert "STAY with 7-1" in text and "stay with **7-1**" in md
    assert js["recommendation"]["verdict"] == "stay"
    for s in js["splits"]:
        split = f"{s['roles']['target']}-{s['roles']['drafter']}"
        assert f"{s['bps']:.3f}" in text and f"{s['bps']:.3f}" in md, split
    for h in adv.recommendation.holds_unless:
        assert h[1:] in text and h[1:] in md


def test_markdown_sections_stand_apart(reference):
    md = render(advise(reference), "markdown")
    # CommonMark: a line right after a list item continues it; each heading needs a blank line before it
    for title in ("**The verdict holds unless:**", "**Queue:**"):
        assert f"\n\n{title}\n\n- " in md


def test_markdown_escapes_the_run_name(write_log):
    from tests.conftest import HEADER, good_lines
    lines = good_lines()
    lines[0] = {**HEADER, "run": "<img src=x onerror=alert(1)> @team *bold*"}
    md = render(advise(write_log(lines)), "markdown")
    assert "<img" not in md and "@team" not in md and "@\u200bteam" in md and "\\*bold\\*" in md


def test_caveats_are_listed(reference_rates):
    adv = advise(reference_rates)
    text = render(adv)
    assert adv.warnings and "Caveats:" in text
    assert all(w in text for w in adv.warnings)


def test_an_open_next_run_choice_names_both_splits():
    # the ded32 7-1 log has ended and cannot separate 6-2 from 5-3: nothing to "keep", two to try
    from pathlib import Path

    from advisor.present.text import render_markdown

    log = Path(__file__).resolve().parents[2] / "fixtures" / "sweep" / "ded32" / "ded32-7x1-r0.jsonl.gz"
    adv = advise(log)
    assert adv.decision.rule == "unresolved"
    text = render(adv)
    assert "CANNOT TELL for the next run: 6-2 or 5-3" in text and "for now keep" not in text
    assert "cannot tell yet for the next run: **6-2** or **5-3**" in render_markdown(adv).splitlines()[0]
