"""The odds in words: the headline's action with its odds, and the odds sentence.

Every number is the decision's own (its `~advisor.decide.odds.Odds` and `~advisor.decide.probe.Probe`),
printed as `advisor.decide.reasons` prints; shares as whole percentages, ``>99%`` and ``<1%`` at
the ends. Headline forms (Markdown: the split in bold):

- ``SWITCH to 7-1: >99% likely the best, expected +7.2% over 6-2, restart included``
- ``KEEP 7-1 (the split the log runs), not 6-2: ...`` (``--roles`` judging another split, the
  running one best: `Decision.best_is_running`)
- ``NEXT RUN: 5-3, ~96% likely the best, expected +23.8% over 4-4``
- ``SWITCH to 2-6: expected loss 12.6% against 22.6% at 1-7, though 1-7 is more often the best
  (~63% against ~32%)``
- ``STAY with 2-1: ...; the rest of the job takes 19 s at 2-1 against 1.0 h at 1-2, a 1.0 h
  restart included`` (a restart as long as the job's rest: the times themselves)
- ``NEXT RUN: 13-3, close call: 13-3 or 14-2 will do (each expected within 2% of the best)``
- ``CANNOT TELL without a probe: 2 min each at 13-3 and 14-2 (1.1 GPU-hours) is worth it; until
  then NEXT RUN: 13-3, ~53% likely the best``
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from advisor.decide.odds import RESOLUTION
from advisor.decide.reasons import dur_text, signed_pct
from advisor.decide.rules import Decision, Verdict

ACTIONS = {Verdict.STAY: "STAY with", Verdict.SWITCH: "SWITCH to", Verdict.NEXT_RUN: "NEXT RUN:"}


def share_text(p: float) -> str:
    """A share of draws as a whole percentage: ``~96%``, ``>99%``, ``<1%``."""
    if p >= 0.995:
        return ">99%"
    if p <= 0.005:
        return "<1%"
    return f"~{100 * p:.0f}%"


def _restart_times(d: Decision, alt: str) -> str | None:
    """Where the restart weighed is as long as the job's rest at either split: the two times
    (the table's ETAs, plus the restart where it applies), not their ratio."""
    o, rows = d.odds, d.rows
    if not o.restart_s > 0:  # a restart is weighed only against a judged split
        return None
    eta = {x: rows[x].eta_s for x in (d.recommended, alt)}
    if not all(math.isfinite(v) for v in eta.values()) or o.restart_s < min(eta.values()):
        return None
    took = {x: v + (o.restart_s if x != o.judged else 0.0) for x, v in eta.items()}
    return (
        f"the rest of the job takes {dur_text(took[d.recommended])} at {d.recommended} against "
        f"{dur_text(took[alt])} at {alt}, a {dur_text(o.restart_s)} restart included"
    )


def _odds_clause(d: Decision) -> str:
    """``~96% likely the best, expected +23.8% over 4-4`` (or the close call's words, the expected
    losses where a split is more often the best, the times where the restart outweighs the job)."""
    o = d.odds
    rec = d.recommended
    if d.close_call and o.runner_up is not None:
        other = o.runner_up if o.best == rec else o.best
        return f"close call: {rec} or {other} will do (each expected within {RESOLUTION:.0%} of the best)"
    top = max(o.splits, key=lambda s: s.p_best)  # more often near the best, where the shares differ as printed
    if top.label != rec and top.p_best > d.p_best and share_text(top.p_best) != share_text(d.p_best):
        return (
            f"expected loss {d.expected_regret_pct:.1f}% against {top.regret_pct:.1f}% at {top.label}, "
            f"though {top.label} is more often the best ({share_text(top.p_best)} against "
            f"{share_text(d.p_best)})" + (", restart included" if o.restart_s > 0 else "")
        )
    text = f"{share_text(d.p_best)} likely the best"
    # the expected gain is counted over the judged split where the verdict switches, else the best other
    if d.action is Verdict.SWITCH and d.judged is not None and d.judged != d.recommended:
        alt = d.judged
    else:
        alt = o.best if o.best != rec else o.runner_up
    times = _restart_times(d, alt) if alt is not None else None
    if times is not None:
        return f"{text}; {times}"
    if alt is not None and d.expected_gain_pct is not None:
        text += f", expected {signed_pct(d.expected_gain_pct)} over {alt}"
        if o.restart_s > 0 and d.best_is_running and o.judged == rec:
            text += ", its restart included"
        elif o.restart_s > 0 and o.judged in (alt, rec):
            text += ", restart included"
    return text


def headline(d: Decision, markdown: bool = False) -> str:
    """The verdict line: the action and its odds; where a probe is worth buying, the probe and the
    action to take until then.
    """
    case = str.lower if markdown else str
    rec = f"**{d.recommended}**" if markdown else d.recommended
    action = d.action
    words = case(ACTIONS[action])
    if d.verdict is Verdict.CANNOT_TELL:
        pr = d.probe
        splits = " and ".join(f"**{x}**" if markdown else x for x in pr.splits)
        return (
            f"{case('CANNOT TELL')} without a probe: {dur_text(pr.seconds_each)} each at {splits} ({pr.gpu_hours:.2g} "
            f"GPU-hours) is worth it; until then {words} {rec}, {share_text(d.p_best)} likely the best"
        )
    sep = "," if action is Verdict.NEXT_RUN else ":"
    if action is Verdict.SWITCH and d.best_is_running:  # nothing to switch: the log runs it
        return f"{case('KEEP')} {rec} (the split the log runs), not {d.judged}{sep} {_odds_clause(d)}"
    return f"{words} {rec}{sep} {_odds_clause(d)}"


def odds_sentence(d: Decision, probed: Sequence[str] = ()) -> str | None:
    """Where the odds come from and what they say of the leading splits."""
    o = d.odds
    if len(o.splits) < 2:
        return None
    lead = sorted(o.splits, key=lambda s: s.regret_pct)[:3]
    shown = [s for s in lead if s.p_best > 0.005 or s.label == d.recommended] or lead[:1]
    if o.runner_up is not None and all(s.label != o.runner_up for s in shown):
        shown.append(o.of(o.runner_up))
    first, rest = shown[0], shown[1:]
    within = (
        f"{first.label} is within {RESOLUTION:.0%} of the best split in {share_text(first.p_best)} of them"
        + "".join(f", {s.label} in {share_text(s.p_best)}" for s in rest)
    )
    regrets = ", ".join(f"{s.regret_pct:.1f}% at {s.label}" for s in shown)
    how = (
        f"remaining-job time compared, a {dur_text(o.restart_s)} restart at any split but {o.judged}"
        if o.restart_s > 0
        else "rates compared"
    )
    if o.temperature != 1.0 or o.level_corr:
        how += (
            f"; calibrated on real sweeps: both roles' run-to-run levels drawn at correlation "
            f"{o.level_corr:g}, the spread scaled by {o.temperature:g}"
        )
        if d.domain is not None and d.domain.inside:
            how += f", {d.domain.text}"
    elif d.domain is not None and not d.domain.inside:
        how += f"; not calibrated: {d.domain.text}, so the spread is drawn as the table states it"
    source = "the projections' uncertainty"
    if probed:
        source = (
            f"the probe's measured noise at {' and '.join(probed)} (paired by round) and the projections' "
            f"uncertainty elsewhere"
        )
    return (
        f"odds from {o.draws:,} joint draws of {source} (what the splits share moves them together; "
        f"{how}): {within}; expected regret {regrets}."
    )
