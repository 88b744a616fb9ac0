"""Text, Markdown and JSON renderings carry the same verdict and numbers."""

from __future__ import annotations

import json

from advisor.advice import advise
from advisor.decide.reasons import bps_text
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


def test_an_open_next_run_choice_names_the_pick_with_its_odds():
    # the ded32 7-1 log has ended and cannot separate 6-2 from 5-3 at 95%: issue 34, the title names
    # the pick (6-2, the measured best) with its odds and expected gain, in text and Markdown alike
    from pathlib import Path

    from advisor.decide.odds_text import share_text
    from advisor.present.text import render_markdown

    log = Path(__file__).resolve().parents[2] / "fixtures" / "sweep" / "ded32" / "ded32-7x1-r0.jsonl.gz"
    adv = advise(log)
    d = adv.decision
    assert not d.margin.separated and d.verdict.value == "next-run" and d.recommended == "6-2"
    odds = f"{share_text(d.p_best)} likely the best, expected +{d.expected_gain_pct:.1f}% over 5-3"
    assert f"NEXT RUN: 6-2, {odds}" in render(adv).splitlines()
    assert f"next run: **6-2**, {odds}" in render_markdown(adv).splitlines()[0]
    assert "CANNOT TELL" not in render(adv)


# ---------------------------------------------------------------- words that mislead (issue 21)

FIX = __import__("pathlib").Path(__file__).resolve().parents[2] / "fixtures"


def test_scaling_from_one_drafter_is_assumed_not_fitted(reference):
    """Nothing was fitted from a log of one drafter: the per-drafter scaling is said to be assumed."""
    adv = advise(reference)
    text = render(adv)
    assert "(assumed 100%, not measured: the log ran 1 drafter)" in text and "fitted 100%" not in text
    two = render(advise([FIX / "h200-1x1.jsonl", FIX / "h200-1x2.jsonl"], gpus=3))
    # logs at 1 and 2 drafters measured the sync: fitted (48%; 47% with independent rounds)
    assert "(fitted 48%)" in two and "assumed" not in two.split("Per-drafter scaling of 1-2")[1].splitlines()[0]


def _step_line(text: str) -> str:
    return next(x for x in text.splitlines() if x.startswith("step time:"))


def test_step_time_says_what_is_resolved(reference):
    """The step-time line prints what the projections use: an intercept clamped to 0 is said to be
    clamped, and where the token counts cannot split fixed from per-token cost (the reference log,
    whose 0.0 ms intercept was a clamp), the mean step and the exponent, not a line."""
    from dataclasses import replace

    adv = advise(reference)
    assert adv.fit.producer.token_model == "power" and adv.fit.producer.t0_s == 0.0
    line = _step_line(render(adv))
    assert "0.0 ms +" not in line and "us/token" not in line
    assert f"target {adv.fit.producer.busy_mean_s:.3f} s per batch" in line
    assert f"x tokens^{adv.fit.producer.token_exponent:.2f} at other batch sizes" in line
    assert "vary too little to split fixed from per-token cost" in line
    clamped = replace(adv, fit=replace(adv.fit, producer=replace(adv.fit.producer, token_model="line")))
    line = _step_line(render(clamped))
    assert "target 0.0 ms + 242.19 us/token (SCV 0.031; fixed cost clamped at 0: not resolved)" in line


def test_follow_refreshes_never_print_an_unresolved_intercept(write_log):
    """What --follow renders at each refresh: a log growing line by line. An intercept the log does
    not resolve (it moved 325.6 -> 0.0 -> 98.6 ms between refreshes) is never printed as a number."""
    lines = [__import__("json").loads(x) for x in (FIX / "h200-1x1.jsonl").read_text().splitlines()]
    for n in (120, 200, len(lines)):
        adv = advise(write_log(lines[:n], name=f"cut{n}.jsonl"))
        line = _step_line(render(adv))
        for rf in (adv.fit.producer, adv.fit.consumer):
            if rf.token_model != "line":
                assert f"{rf.role} {rf.t0_s * 1e3:.1f} ms +" not in line and f"{rf.role} " in line


def test_bound_column_only_where_it_differs(reference):
    """`bound b/s` equal to `b/s` on every row is not shown (the JSON keeps it); shown once it differs."""
    import json

    adv = advise(reference)
    text, md = render(adv), render(adv, "markdown")
    assert "bound b/s" not in text and "bound b/s" not in md and "bound = " not in text
    assert all("bound_bps" in s for s in json.loads(render(adv, "json"))["splits"])
    from dataclasses import replace

    was = adv.rows["6-2"]  # the table's records (advisor.project.rows), which the layout reads
    rows = {**adv.rows, "6-2": replace(was, bound_bps=was.bps * 1.1)}
    shown = render(replace(adv, decision=replace(adv.decision, rows=rows)))
    assert "bound b/s" in shown and "bound = naive min-capacity bound" in shown
    row = next(x for x in shown.splitlines() if x.split()[:1] == ["6-2"])
    assert f"{rows['6-2'].bound_bps:.3f}" in row


def test_eta_is_explained_and_follows_next_run(reference):
    live, nxt = render(advise(reference)), render(advise(reference, next_run=True))
    assert "ETA = the rest of the job at that split" in live
    assert "ETA = the whole job at that split (a next run starts over)" in nxt
    readme = (FIX.parent / "README.md").read_text().split("## Glossary")[1]
    assert "- **ETA**:" in readme and "--next-run" in readme


def test_cpu_workers_are_not_called_gpus():
    text = render(advise(FIX / "cpu-2x1.jsonl"))
    assert "3 CPU workers" in text and "of 3 CPU workers" in text
    assert "GPU" not in text.upper(), [x for x in text.splitlines() if "GPU" in x.upper()]
    assert "8 GPUs" in render(advise(FIX / "reference-7x1.jsonl"))


def test_thin_evidence_makes_every_sentence_provisional(write_log):
    """A first --follow refresh on a short log: the verdict is provisional in the title, in its own
    sentence and in the margin's, and the choice is never called stable."""
    import gzip
    import json

    raw = gzip.open(FIX / "sweep" / "cpu16" / "cpu16-2x4-r0.jsonl.gz", "rt").read().splitlines()[:150]
    adv = advise(write_log([json.loads(x) for x in raw]))
    assert adv.decision.evidence.thin and adv.decision.verdict.value != "cannot-tell"
    text = render(adv)
    verdict_title = next(x for x in text.splitlines() if x.split()[:1] in (["STAY"], ["SWITCH"], ["NEXT"]))
    assert verdict_title.endswith("(provisional: thin evidence)")
    assert "This verdict is provisional: only" in text
    assert "The choice is provisional, not yet stable:" in text
    assert "The choice is stable" not in text and "stable:" not in text.replace("not yet stable:", "")
    assert "(provisional)" in render(adv, "markdown").splitlines()[0]
    assert json.loads(render(adv, "json"))["recommendation"]["provisional"] is True
    assert json.loads(render(advise(FIX / "reference-7x1.jsonl"), "json"))["recommendation"]["provisional"] is False


def _nan_free(text: str) -> bool:
    import re

    return re.search(r"\bnan\b", text, re.IGNORECASE) is None


def test_a_rates_log_without_tokens_reads_in_b_s_with_its_split_marked(tmp_path, reference_rates):
    """Another stack's metrics give no tokens: b/s throughout, tok/s said to be unknown, the
    observed split marked (*, "observed": true, its "Measured at" reason), no NaN anywhere."""
    from conftest import rates_without_tokens

    adv = advise(rates_without_tokens(reference_rates, tmp_path / "r.jsonl"))
    text, md, raw = render(adv, "text"), render(adv, "markdown"), render(adv, "json")
    for out in (text, md, raw, *adv.warnings):
        assert _nan_free(out), out
    js = json.loads(raw)
    row = next(s for s in js["splits"] if s["roles"] == {"target": 7, "drafter": 1})
    assert row["observed"] is True and row["tok_s"] is None and js["observed"]["tok_s"] is None
    assert js["recommendation"]["settings"]["tokens_per_batch"] is None  # nominal, not measured
    assert [s["observed"] for s in js["splits"]].count(True) == 1
    assert any(line.lstrip(">").startswith("*") and "7-1" in line for line in text.splitlines())
    assert "Measured at 7-1" in text and "Measured at 7-1" in md
    assert "tok/s unknown" in text.splitlines()[1]


def test_what_if_scaling_is_never_said_to_come_from_a_log():
    """Issue 35 item 6: bare numbers have no log, so no sentence says "the log ran"; the given
    sync time is named as the source where one was given."""
    from advisor.advice import advise_numbers

    bare = render(advise_numbers({"target": 7, "drafter": 1}, {"target": 0.92, "drafter": 0.86}))
    assert "the log ran" not in bare and "fitted" not in bare
    assert "(assumed 100%, not measured: no log, and no sync time was given)" in bare
    synced = render(
        advise_numbers({"target": 6, "drafter": 2}, {"target": 0.92, "drafter": 1.7}, sync_every=10, sync_s=0.1)
    )
    assert "the log ran" not in synced and "fitted" not in synced and ", from the given sync time)" in synced


def test_one_log_never_calls_the_same_scaling_fitted_and_assumed(tmp_path, reference_rates):
    """A log at 2 drafters without sync events: the scaling at 2 is as unmeasured as at 3 (no lone
    drafter ran, no collective was timed), so neither is "fitted"."""
    import json as _json

    rows = [_json.loads(x) for x in reference_rates.read_text().splitlines()]
    rows[0]["roles"] = {"target": 6, "drafter": 2}
    p = tmp_path / "6x2.jsonl"
    p.write_text("\n".join(_json.dumps(r) for r in rows) + "\n")
    text = render(advise(p))
    assert "fitted" not in text, text
    assert "assumed 100%, not measured: no 'sync' events were logged" in text


def test_an_open_ended_bound_prints_at_least_not_a_finite_interval():
    """Issue 35 item 6: with the drafters known only from below (">=50.1"), a split they bind has no
    finite upper end; the table says "at least", the JSON flags it, and no sentence quotes it."""
    from advisor.advice import advise_numbers

    adv = advise_numbers({"target": 1, "drafter": 7}, {"target": "52..57", "drafter": ">=50.1"})
    text = render(adv)
    row = next(line for line in text.splitlines() if line.split()[:1] == ["7-1"])
    assert f"at least {adv.splits.at['7-1', 'bps_low']:.3f}" in row, row
    js = json.loads(render(adv, "json"))
    for s in js["splits"]:
        assert s["bps_high_open"] is bool(
            adv.splits.at[f"{s['roles']['target']}-{s['roles']['drafter']}", "bps_high_open"]
        )
    assert js["splits"][0]["bps_high_open"] is True
    for label in adv.splits.index[adv.splits["bps_high_open"]]:
        assert f"{adv.splits.at[label, 'bps_high']:.3f}" not in text
        assert bps_text(adv.splits.at[label, "bps_high"]) not in text
    closed = render(advise_numbers({"target": 7, "drafter": 1}, {"target": 0.92, "drafter": 0.86}))
    assert "at least" not in closed.split("\n\n")[1]


def test_the_table_shows_each_splits_odds_from_the_decisions_draw(reference):
    """Issue 34: a `p best` column beside the interval, each split's odds as the JSON has them."""
    import json

    from advisor.decide.odds_text import share_text

    adv = advise(reference, gpus=16)
    text, js = render(adv), json.loads(render(adv, "json"))
    head = next(x for x in text.splitlines() if x.lstrip().startswith("split"))
    assert head.split()[:6] == ["split", "b/s", "95%", "interval", "p", "best"]
    assert "p best = how likely the split is within 2% of the best" in text
    for s in js["splits"]:
        label = f"{s['roles']['target']}-{s['roles']['drafter']}"
        row = next(t for t in (x.split() for x in text.splitlines()) if label in t[:2] and len(t) > 6)
        assert row[row.index(label) + 3] == share_text(adv.decision.odds.of(label).p_best).lstrip("~")
        assert s["p_best"] == round(adv.decision.odds.of(label).p_best, 4)


def test_the_markdown_legend_names_its_own_marks_and_engines(tmp_path):
    from dataclasses import replace

    from synth import reference_scenario, write_log

    path = tmp_path / "tp2.jsonl"
    write_log(path, replace(reference_scenario(duration_s=3000.0), n_target=3, n_drafter=2, gpus_per_target=2))
    adv = advise(path)
    legend = next(line for line in render(adv, "markdown").splitlines() if line.startswith("_rec = recommended"))
    # the Markdown table marks rows "rec", "obs": its legend says so, and what its GPUs column holds
    assert "obs = observed" in legend and "> recommended" not in legend
    assert "a split counts engines (targets of 2 GPUs, drafters of 1), GPUs = GPUs per role" in legend
    assert "a split counts engines" in render(adv, "text")


def test_the_markdown_legend_says_what_every_mark_of_its_table_means(reference):
    """Issue 50: the legend read "rec = recommended, obs = observed, judged (--roles)": the judged
    row's word had no meaning beside it. Every word in the mark column is explained as WORD = ..."""
    from typer.testing import CliRunner

    from advisor.cli.app import app

    res = CliRunner().invoke(app, ["advise", str(reference), "--roles", "target=6,drafter=2", "--markdown"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    legend = next(line for line in lines if line.startswith("_rec = "))
    rows = [line.split("|")[1] for line in lines if line.startswith("| ") and "---" not in line][1:]
    words = {w.strip().strip("*") for cell in rows for w in cell.split(",") if w.strip()}
    assert words == {"rec", "obs", "judged"}, words
    for word in words:
        assert f"{word} = " in legend, (word, legend)
