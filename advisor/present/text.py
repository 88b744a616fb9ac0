"""Render an :class:`~advisor.advice.Advice` as terminal text, Markdown or JSON.

All wording lives here and is written only from the decision (`advisor.decide.rules`) and the rows of
the projected table it names, so a sentence cannot disagree with the table beside it. Every b/s
figure in the prose is printed with `bps_text` (4 significant digits), shares with `pct_text`.
Text and Markdown carry the same content: a headline (observed split, rate, efficiency,
bottleneck), the table with the recommended (``>``), observed (``*``) and judged (``j``) rows
marked, the reasons, what the verdict depends on, the queue advice and the caveats.
"""
from __future__ import annotations

import html
import json
import math
import re
from typing import TYPE_CHECKING

from advisor.decide.rules import RESOLVE_GAIN, Verdict
from advisor.project.table import lead_interval
from advisor.project.sensitivity import ROBUST_RANGE, SCALING_RANGE

if TYPE_CHECKING:
    from advisor.advice import Advice
    from advisor.project.queues import QueueAdvice

HEADINGS = {Verdict.STAY: "STAY with", Verdict.SWITCH: "SWITCH to", Verdict.NEXT_RUN: "NEXT RUN:",
            Verdict.CANNOT_TELL: "CANNOT TELL; for now keep"}
MD_TITLES = {Verdict.STAY: "stay with", Verdict.SWITCH: "switch to", Verdict.NEXT_RUN: "next run:",
             Verdict.CANNOT_TELL: "cannot tell yet; keep"}
LEGEND = ("> recommended, * observed, j judged (--roles); bound = naive min-capacity bound; efficiency = b/s over "
          "the fastest stage's capacity (balance); gpu util = busy share of all GPU time")


def _title(d, markdown: bool = False) -> str:
    """The verdict line: an open next-run choice names both splits (there is nothing to keep)."""
    m = d.margin
    if d.rule == "unresolved" and m is not None:
        if markdown:
            return f"cannot tell yet for the next run: **{m.higher}** or **{m.lower}**"
        return f"CANNOT TELL for the next run: {m.higher} or {m.lower}"
    if markdown:
        return f"{MD_TITLES[d.verdict]} **{d.recommended}**"
    return f"{HEADINGS[d.verdict]} {d.recommended}"


def bps_text(x: float) -> str:
    return f"{x:.4g}"


def pct_text(share: float) -> str:
    return f"{share:.0%}" if math.isfinite(share) else "-"


def signed_pct(pct: float) -> str:
    v = round(pct, 1)
    return f"{v + 0.0:+.1f}%" if v != 0 else "0.0%"   # no "-0.0%"


def _num(v: float, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def _dur(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "-"
    if s >= 86400:
        return f"{s / 86400:.1f} d"
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"


def _tok(v: float) -> str:
    return f"{v / 1000:.1f}K" if math.isfinite(v) else "-"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


# ---------------------------------------------------------------- reasons, from the decision

def _bottleneck(adv: Advice, label: str) -> str:
    p, c = adv.roles
    r = adv.splits.loc[label]
    loader = f", loader {bps_text(r['cap_loader_bps'])} b/s" if math.isfinite(r["cap_loader_bps"]) else ""
    basis = {"steps": "busy time", "rates": "'rates' snapshots", "numbers": "given numbers"}.get(adv.fit.source,
                                                                                                 adv.fit.source)
    return (f"at {label} the {r['bottleneck']} is the bottleneck: {p} capacity {bps_text(r[f'cap_{p}_bps'])} b/s vs "
            f"{c} {bps_text(r[f'cap_{c}_bps'])} b/s{loader} (from {basis}); projected at {label}: "
            f"q_hs {r['hs_mean_depth']:.1f}/{adv.settings.hs_cap}, {p}s blocked {pct_text(r[f'{p}_blocked'])}, "
            f"{c}s starved {pct_text(r[f'{c}_starved'])}.")


def _measured(adv: Advice, label: str) -> str | None:
    """The log's own signals at the observed split (measured, not projected)."""
    p, c = adv.roles
    ob = adv.observed
    r = adv.splits.loc[label]
    parts = []
    if ob.hs_mean_depth is not None and ob.hs_full_share is not None:
        parts.append(f"q_hs {ob.hs_mean_depth:.1f}/{adv.fit.hs_cap} on average (full {pct_text(ob.hs_full_share)} "
                     f"of the time)")
    if ob.producer_blocked is not None and ob.consumer_starved is not None:
        parts.append(f"{p}s blocked {pct_text(ob.producer_blocked)} of their time, {c}s starved "
                     f"{pct_text(ob.consumer_starved)}")
    if math.isfinite(r["observed_bps"]):
        parts.append(f"{bps_text(r['observed_bps'])} b/s against {bps_text(r['bps'])} projected")
    return f"measured at {label} (the log): " + "; ".join(parts) + "." if parts else None


def _needs(adv: Advice) -> str:
    n = adv.decision.needs
    if n is None:
        return ""
    bits = []
    if n.model_gap:
        measured = ", ".join(f"{lbl} {bps_text(x)} b/s" for lbl, x in n.measured)
        bits.append(f"the model misses the measured rate at {', '.join(n.model_gap)} (see the caveats)"
                    + (f"; the logs themselves measured {measured}" if measured else "")
                    + "; logs on dedicated GPUs, one per split, would compare the splits directly")
    if n.settle:
        bits.append("a log that runs past warm-up (its pace steady over the second half of the window)")
    if n.longer_factor is not None and n.extra_steady_s is not None:
        bits.append(f"a steady log about {n.longer_factor:.1f}x as long (~{_dur(n.extra_steady_s)} more)")
    if n.run_at:
        bits.append(f"a short run at {n.run_at}, given with this log, which measures it directly")
    if n.repeats:
        measured = " and ".join(f"{lbl} {bps_text(x)} b/s" for lbl, x in n.measured)
        bits.append(f"both splits ran ({measured}), and another run of either may differ by more than their gap: "
                    f"repeated runs of each, given together, measure that")
    return " What would settle it: " + "; or ".join(bits) + "." if bits else ""


def _vs(df, a: str, b: str) -> str:
    return f"{a} {bps_text(df.at[a, 'bps'])} b/s vs {b} {bps_text(df.at[b, 'bps'])} b/s"


def _verdict_reason(adv: Advice) -> str:
    d, df, s = adv.decision, adv.splits, adv.settings
    b, j = d.best, d.judged
    of = f"of the {_plural(d.n_splits, 'split')} of {s.gpus} GPUs"
    if d.rule == "already-best":
        return f"{j} is already the best {of}."
    if d.rule == "small-gain":
        return (f"the best split, {b}, would gain only {signed_pct(d.gain_pct)} ({_vs(df, b, j)}), below the {RESOLVE_GAIN:.0%} the model resolves: not worth a "
                f"restart.")
    if d.rule == "overlap":
        return (f"{b} projects {signed_pct(d.gain_pct)} ({_vs(df, b, j)}), but its 95% interval starts at {bps_text(df.at[b, 'bps_low'])} b/s, not above {j}'s upper end "
                f"{bps_text(df.at[j, 'bps_high'])}{_lead_text(df, b, j)}: the evidence cannot separate them; keep {j} until it can."
                + _needs(adv))
    if d.rule == "thin-evidence":
        rival = j if b != j else d.runner_up
        return (f"the log is too thin to choose on: {'; '.join(d.evidence.why_thin())}. {b}'s 95% interval starts "
                f"at {bps_text(df.at[b, 'bps_low'])} b/s, not above {rival}'s upper end "
                f"{bps_text(df.at[rival, 'bps_high'])}{_lead_text(df, b, rival)}." + _needs(adv))
    if d.rule == "restart-cost":
        return (f"{b} projects {signed_pct(d.gain_pct)}, but finishing the remaining job there would save only "
                f"{d.eta_gain_s / 3600:.1f} h, not more than the {s.restart_cost_h:g} h restart cost.")
    if d.rule == "switch":
        if d.eta_gain_s is not None:
            return (f"switching to {b} gains {signed_pct(d.gain_pct)} throughput ({_vs(df, b, j)}) and finishes the job "
                    f"{(d.eta_gain_s - 3600 * s.restart_cost_h) / 3600:.1f} h sooner, after a {s.restart_cost_h:g} h "
                    f"restart.")
        return (f"switching to {b} gains {signed_pct(d.gain_pct)} throughput ({_vs(df, b, j)}); the job's size is unknown, so the restart cost is not weighed.")
    why = ("the run has ended" if s.run_ended else "--next-run was given" if s.next_run
           else f"no split of {s.gpus} GPUs was observed")
    if d.rule == "unresolved":
        m = d.margin
        return (f"{why}: {m.higher} leads {m.lower} by {signed_pct(m.lead_pct)}, but {m.higher}'s 95% interval starts "
                f"at {bps_text(m.best_low)} b/s, not above {m.lower}'s upper end {bps_text(m.runner_up_high)}"
                f"{_lead_text(df, m.higher, m.lower)}: the evidence cannot separate them." + _needs(adv))
    text = (f"{why}, so no restart cost applies: for the next run, {b} is the best {of} "
            f"({bps_text(df.at[b, 'bps'])} b/s).")
    m = d.margin
    if m is not None and not m.separated:
        text += (f" {m.lower} is within {RESOLVE_GAIN:.0%} of it ({_vs(df, m.higher, m.lower)}), which the "
                 f"model does not resolve: either will do.")
    return text


def _lead_text(df, a: str, b: str) -> str:
    """The lead of ``a`` over ``b`` with its own interval (`advisor.project.table.lead_interval`)."""
    li = lead_interval(df, a, b)
    if li is None:
        return ""
    return (f", and {a}'s lead itself is {signed_pct(100 * li[0])} to {signed_pct(100 * li[1])} "
            f"(95%, with the uncertainty both share taken out)")


def _runner_up(adv: Advice) -> list[str]:
    d, df = adv.decision, adv.splits
    p, c = adv.roles
    a, r = d.runner_up, d.recommended
    if a is None:
        return []
    m = int(df.at[a, f"n_{c}"])
    out = [f"the runner-up {a} would give {p}s {bps_text(df.at[a, f'cap_{p}_bps'])} b/s while "
           f"{_plural(m, c)} could take {bps_text(df.at[a, f'cap_{c}_bps'])} b/s: bound by the "
           f"{df.at[a, 'bottleneck']} at {bps_text(df.at[a, 'bps'])} b/s, "
           f"{signed_pct(100 * (df.at[a, 'bps'] / df.at[r, 'bps'] - 1))} against {r}."]
    mg = d.margin
    if d.rule in ("unresolved", "overlap", "thin-evidence"):
        return out
    if adv.fit.source == "numbers":
        out.append("from given numbers the intervals carry only the model's own error (and, with a sync cost given "
                   "at one drafter count, the range of its scaling), not the sampling and run-to-run error of a "
                   "log: how stable the choice is cannot be told; a log with step events measures it.")
    elif mg.stable:
        out.append(f"the choice is stable: {mg.higher}'s 95% interval starts at {bps_text(mg.best_low)} b/s, above "
                   f"{mg.lower}'s upper end {bps_text(mg.runner_up_high)}.")
    elif mg.separated:
        out.append(f"the choice is stable: {mg.higher}'s lead over {mg.lower} is {signed_pct(mg.lead_low_pct)} to "
                   f"{signed_pct(mg.lead_high_pct)} (95%). Their intervals overlap ({mg.higher}'s starts at "
                   f"{bps_text(mg.best_low)} b/s, {mg.lower}'s ends at {bps_text(mg.runner_up_high)}) because both "
                   f"come from one fit: the run's own level moves both splits alike, and how step time changes with "
                   f"the split moves them the same way, so the lead carries only what differs between them.")
    else:
        out.append(f"the margin is within the fit's uncertainty: {mg.higher}'s 95% interval starts at "
                   f"{bps_text(mg.best_low)} b/s, not above {mg.lower}'s upper end {bps_text(mg.runner_up_high)}"
                   f"{_lead_text(adv.splits, mg.higher, mg.lower)}.")
    return out


def _loader(adv: Advice) -> list[str]:
    ld = adv.decision.loader
    if ld is None:
        return []
    p = adv.roles[0]
    return [f"the loader caps the pipeline at {bps_text(ld.cap_bps)} b/s ({p}s starved {pct_text(ld.starved_share)} of "
            f"their time with empty prefetch queues): no split beats it ({', '.join(ld.at_cap) or 'none'} reach it "
            f"within 1%); fix the input (more loader workers, pre-tokenized data) rather than the split."]


def _levers(adv: Advice) -> list[str]:
    from advisor.project.sensitivity import LEVER_MIN_GAIN
    c = adv.roles[1]
    out = []
    for lv in adv.decision.sensitivity.levers:
        opts = [f"{what} would give {pct_text(s)}" for what, s in (
            ("balancing tokens across ranks", lv.scaling_balanced),
            (f"syncing every {2 * lv.sync_every} steps", lv.scaling_half_sync)) if s >= lv.scaling_now + LEVER_MIN_GAIN]
        out.append(f"with {lv.drafters} {c}s each keeps {pct_text(lv.scaling_now)} of a lone {c}'s rate (barrier every "
                   f"{lv.sync_every} steps, collective {lv.collective_s * 1e3:.0f} ms): {', '.join(opts)}.")
    return out


def reasons(adv: Advice) -> list[str]:
    """The reasons, first the judged split's bottleneck (DESIGN: 'judged' is what it describes)."""
    d = adv.decision
    first = d.judged or d.recommended
    out = [_bottleneck(adv, first)]
    if d.observed == first:
        m = _measured(adv, first)
        if m:
            out.append(m)
    out += _loader(adv)
    out.append(_verdict_reason(adv))
    out += _runner_up(adv)
    out += _levers(adv)
    return out


def holds_unless(adv: Advice) -> list[str]:
    d = adv.decision
    c = adv.roles[1]
    out = []
    span = f"x{ROBUST_RANGE[0]:g} to x{ROBUST_RANGE[1]:g}"
    for th in d.sensitivity.thresholds:
        if th.factor is None:
            out.append(f"{th.role} capacity: no value from {span} of the fit changes the choice.")
            continue
        word = "higher" if th.factor > 1 else "lower"
        out.append(f"{th.role} capacity is {abs(th.factor - 1):.1%} {word} than fitted "
                   f"({bps_text(th.factor * th.capacity_bps)} b/s on {_plural(th.workers, 'GPU')}, not "
                   f"{bps_text(th.capacity_bps)}): {d.runner_up} then matches {d.recommended}.")
    lo = f"{SCALING_RANGE[0]:.0%} to {SCALING_RANGE[1]:.0%}"
    for tie in d.sensitivity.scaling:
        big, other = "-".join(map(str, tie.big)), "-".join(map(str, tie.other))
        if tie.scaling is None:
            if tie.big_wins_at_fit:
                out.append(f"per-{c} scaling of {big}: it beats {other} at any value from {lo} (fitted "
                           f"{pct_text(tie.fitted)}).")
            else:
                out.append(f"per-{c} scaling of {big}: no value from {lo} changes the choice (fitted "
                           f"{pct_text(tie.fitted)}); {big} is {tie.big_bottleneck}-bound even with perfect {c} "
                           f"scaling.")
        elif not tie.big_wins_at_fit:
            out.append(f"each of the {tie.big[1]} {c}s of {big} keeps at least {pct_text(tie.scaling)} of a lone "
                       f"{c}'s rate (fitted {pct_text(tie.fitted)}): then {big} beats {other}.")
        else:
            out.append(f"each of the {tie.big[1]} {c}s of {big} keeps less than {pct_text(tie.scaling)} of a lone "
                       f"{c}'s rate (fitted {pct_text(tie.fitted)}): then {other} beats {big}.")
    return out


def queue_text(adv: Advice, q: QueueAdvice) -> str:
    label = "-".join(map(str, q.split))
    mem = f" (+{q.extra_bytes / 2**30:.1f} GiB for {q.doubled_cap - q.cap} more slots)" if q.extra_bytes else ""
    if q.bps <= 0:
        return f"q_hs at {q.cap}: no throughput is projected at {label}, so no queue advice."
    if q.deepen:
        return (f"deepen q_hs from {q.cap} to {q.doubled_cap} at {label}: {signed_pct(q.gain_pct)} throughput{mem}; "
                f"x4 would give {signed_pct(q.quad_gain_pct)}.")
    half = f"halving it loses {q.loss_pct_half:.1f}%" if round(q.loss_pct_half, 1) > 0 else "halving it loses nothing"
    return (f"keep q_hs at {q.cap} at {label}: doubling it gains {signed_pct(q.gain_pct)}{mem}, {half}; "
            f"the steady rate is set by capacity, not by buffering.")


# ---------------------------------------------------------------- layouts

def _rows(adv: Advice) -> tuple[list[str], list[list[str]]]:
    d = adv.decision
    exact = "bps_exact" in adv.splits
    head = ["", "split", "b/s", "95% interval", "tok/s", "bound b/s", "efficiency", "gpu util", "bottleneck", "ETA"]
    if exact:
        head.append("exact b/s")
    rows = []
    for label, r in adv.splits.iterrows():
        mark = ((">" if label == d.recommended else " ") + ("*" if r["observed"] else " ")
                + ("j" if adv.settings.roles and label == d.judged else " ")
                + ("s" if r.get("method") == "exact" else ""))
        rows.append([mark.rstrip(), str(label), _num(r["bps"], ".3f"),
                     f"{_num(r['bps_low'], '.3f')}-{_num(r['bps_high'], '.3f')}", _tok(r["tok_s"]),
                     _num(r["bound_bps"], ".3f"), _num(100 * r["efficiency"], ".0f") + "%",
                     _num(100 * r["gpu_util"], ".0f") + "%", str(r["bottleneck"]), _dur(r["eta_s"])]
                    + ([_num(r["bps_exact"], ".3f")] if exact else []))
    return head, rows


def _headline(adv: Advice) -> list[str]:
    p, c = adv.roles
    ob, s = adv.observed, adv.settings
    caps = ", ".join(f"{k} {bps_text(v)} b/s" for k, v in ob.capacities_bps.items())
    opts = []
    if s.token_budget is not None:
        opts.append(f"--token-budget {s.token_budget} (~{s.tokens_per_batch:.0f} tokens per batch)")
    if s.hs_cap != adv.fit.hs_cap:
        opts.append(f"--hs-cap {s.hs_cap}")
    projected = f"; projected with {', '.join(opts)}" if opts else ""
    if adv.fit.source == "numbers":
        return [f"what-if: {adv.gpus} GPUs, now {ob.roles[p]}-{ob.roles[c]} ({p}-{c}); given capacities: {caps}; "
                f"efficiency {pct_text(ob.efficiency)}; bottleneck: {ob.bottleneck}"]
    basis = "busy time" if adv.fit.source == "steps" else "'rates' snapshots"
    lines = [f"run {adv.run}: {adv.gpus} GPUs, observed {ob.roles[p]}-{ob.roles[c]} ({p}-{c})"
             + (", run ended" if s.run_ended else "") + projected,
             f"observed {bps_text(ob.bps)} b/s = {_tok(ob.tok_s)} tok/s; capacities from {basis}: {caps}; "
             f"efficiency {pct_text(ob.efficiency)}; bottleneck: {ob.bottleneck}",
             f"steady window t = {ob.steady_from_s:.0f}-{ob.steady_to_s:.0f} s ({pct_text(ob.warmup_share)} of the log "
             f"dropped as warm-up" + (f", {pct_text(ob.drain_share)} as the final drain)" if ob.drain_share >= 0.005
                                      else ")")]
    if ob.hs_mean_depth is not None:
        lines.append(f"q_hs: mean depth {ob.hs_mean_depth:.1f}/{adv.fit.hs_cap}, full {pct_text(ob.hs_full_share)} "
                     f"of the time")
    fp, fc = adv.fit.producer, adv.fit.consumer
    if adv.fit.source == "steps":
        lines.append(f"step time: {p} {fp.t0_s * 1e3:.1f} ms + {fp.c_s_per_tok * 1e6:.2f} "
                     f"us/token (SCV {fp.busy_scv:.3f}), {c} {fc.t0_s * 1e3:.1f} ms + {fc.c_s_per_tok * 1e6:.2f} "
                     f"us/token (SCV {fc.busy_scv:.3f})")
    return lines


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _sections(adv: Advice) -> list[tuple[str, list[str]]]:
    d = adv.decision
    rec = adv.recommendation
    title = _title(d)
    out = [(title, [_cap(r) for r in rec.reasons])]
    out.append(("The verdict holds unless:", [_cap(h) for h in rec.holds_unless]))
    if d.queue is not None:
        out.append(("Queue:", [_cap(queue_text(adv, d.queue))]))
    return out


def render_text(adv: Advice) -> str:
    head, rows = _rows(adv)
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    fmt = "  ".join("{:<%d}" % w if i in (0, 1, 8) else "{:>%d}" % w for i, w in enumerate(widths))
    lines = _headline(adv) + ["", fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    legend = LEGEND
    if (adv.splits["method"] == "exact").any():
        legend += "; s = b/s from exact simulation of the log's step times"
    lines += [f"  ({legend})"]
    for title, items in _sections(adv):
        lines += ["", title] + [f"- {x}" for x in items]
    if adv.warnings:
        lines += ["", "Caveats:"] + [f"- {w}" for w in adv.warnings]
    return "\n".join(lines) + "\n"


_MENTION = re.compile(r"@(?=\w)")


def md_escape(text: str) -> str:
    """Text from a log (run names) made inert in Markdown: no HTML, no @mentions, no emphasis."""
    text = html.escape(text, quote=False)
    text = re.sub(r"([\\`*_\[\]#|~])", r"\\\1", text)
    return _MENTION.sub("@\u200b", text)


def render_markdown(adv: Advice) -> str:
    head, rows = _rows(adv)
    d = adv.decision
    lines = [f"### dflash-advise: {_title(d, markdown=True)} ({md_escape(adv.run)})", ""]
    lines += [f"> {md_escape(x)}  " for x in _headline(adv)] + [""]
    lines.append("| " + " | ".join(h or "mark" for h in head) + " |")
    lines.append("|" + "|".join("---" if i in (0, 1, 8) else "---:" for i in range(len(head))) + "|")
    names = {">": "**rec**", "*": "obs", "j": "judged", "s": "sim"}
    for r in rows:
        cells = [", ".join(names[ch] for ch in r[0] if ch in names), *r[1:]]
        if r[0].startswith(">"):
            cells[1] = f"**{cells[1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"_{LEGEND}_"]
    for title, items in _sections(adv):
        lines += ["", f"**{title}**", ""] + [f"- {md_escape(x)}" for x in items]
    if adv.warnings:
        lines += ["", "<details><summary>Caveats</summary>", ""] + [f"- {md_escape(w)}" for w in adv.warnings] + [
            "", "</details>"]
    if adv.gate:
        g = adv.gate
        split = "-".join(str(v) for v in g["roles"].values())
        lines += ["", f"Gate on {split}: {g['metric']} {g['value']:.3f} {'>=' if g['passed'] else '<'} "
                      f"{g['threshold']:.3f}: **{'PASS' if g['passed'] else 'FAIL'}**"]
    return "\n".join(lines) + "\n"


def render_json(adv: Advice) -> str:
    return json.dumps(adv.to_json(), indent=2) + "\n"


def render(adv: Advice, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(adv)
    if fmt == "markdown":
        return render_markdown(adv)
    return render_text(adv)
