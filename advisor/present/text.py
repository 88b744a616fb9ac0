"""Render an :class:`~advisor.advice.Advice` as terminal text, Markdown or JSON: layout only.

The sentences are `advisor.decide.reasons`'s; this module lays them out beside the table with
the same number formatting. Text and Markdown carry the same content: a headline, the table with
the recommended (``>``), observed (``*``) and judged (``j``) rows marked, the reasons, what the
verdict holds unless, the queue advice and the caveats.
"""

from __future__ import annotations

import html
import json
import math
import re

from advisor.advice import Advice
from advisor.decide.odds import RESOLUTION
from advisor.decide.odds_text import headline, share_text
from advisor.decide.reasons import bps_text, dur_text, pct_text, queue_text
from advisor.decide.rules import Verdict
from advisor.model.params import Source
from advisor.present.json import advice_json
from advisor.project.rows import SplitRow
from advisor.project.table import split_label
from advisor.settings import Capacity, role_is_noun, role_plural


def legend(adv: Advice, bound: bool, *, words: bool = False) -> str:
    """The table's legend: the marks, the columns, the worker word of the log, what ETA counts,
    and engines of several GPUs and nodes where the table has them."""
    s = adv.settings
    parts = [
        "rec = recommended, obs = observed, judged = the split --roles names"
        if words
        else "> recommended, * observed, j judged (--roles)",
        *(["bound = naive min-capacity bound"] if bound else []),
        "efficiency = b/s over the fastest stage's capacity (balance)",
        "worker util = busy share of all CPU worker time" if s.cpu else "gpu util = busy share of all GPU time",
        "ETA = the whole job at that split (a next run starts over)"
        if s.for_next_run
        else "ETA = the rest of the job at that split",
        f"p best = how likely the split is within {RESOLUTION:.0%} of the best",
    ]
    if any(r.method == "exact" for r in adv.rows.values()):
        parts.append(f"{'sim' if words else 's'} = b/s from exact simulation of the log's step times")
    p, c = adv.roles
    kp, kc = s.gpus_per_worker
    if (kp, kc) != (1, 1):
        parts.append(
            f"a split counts engines ({role_plural(p)} of {kp} GPU{'s' if kp > 1 else ''}, "
            f"{role_plural(c)} of {kc}), GPUs = GPUs per role"
        )
    if any(r.link is not None for r in adv.rows.values()):
        parts.append("link = the inter-node link's busy share at that placement")
    return "; ".join(parts)


def _title(adv: Advice, markdown: bool = False) -> str:
    """The verdict line: the action with its odds; on thin evidence, said to be provisional."""
    d = adv.decision
    if d.evidence.thin and d.verdict is not Verdict.CANNOT_TELL:
        return headline(d, markdown) + (" (provisional: thin evidence)" if not markdown else " (provisional)")
    return headline(d, markdown)


def _num(v: float, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def _tok(v: float) -> str:
    return f"{v / 1000:.1f}K" if math.isfinite(v) else "-"


def _interval_text(r: SplitRow) -> str:
    """A row's 95% interval; "at least LOW" where its upper end rests on a capacity known only
    from below (``bps_high_open``): no finite upper end is known."""
    if r.bps_high_open:
        return f"at least {_num(r.bps_low, '.3f')}"
    return f"{_num(r.bps_low, '.3f')}-{_num(r.bps_high, '.3f')}"


def _rate(bps: float, tok_s: float) -> str:
    """A measured rate in b/s and, where measured, tok/s."""
    tok = f" = {_tok(tok_s)} tok/s" if math.isfinite(tok_s) else " (tok/s unknown: the log has no tokens)"
    return f"{bps_text(bps)} b/s{tok}"


# ---------------------------------------------------------------- layouts


def _mark(adv: Advice, label: str, r: SplitRow) -> str:
    """The row's marks: recommended (>), observed (*), judged (j), exact simulation (s)."""
    d = adv.decision
    mark = (
        (">" if label == d.recommended else " ")
        + ("*" if r.observed else " ")
        + ("j" if adv.settings.roles and label == d.judged else " ")
        + ("s" if r.method == "exact" else "")
    )
    return mark.rstrip()


def _rows(adv: Advice) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows, as text cells, with the optional columns where the table has them:
    ``p best`` (the odds, as the headline says them), ``bound b/s`` (where it differs), ``exact b/s``,
    GPUs per role (engines of several GPUs), the link and placement (across nodes)."""
    rs = adv.rows.values()
    o = adv.decision.odds
    nodes = any(r.link is not None for r in rs)
    # the bound only where it differs from b/s on some row as printed (the JSON always carries it)
    bound = any(_num(r.bound_bps, ".3f") != _num(r.bps, ".3f") for r in rs)
    columns = [
        ("", True, lambda lb, r: _mark(adv, lb, r)),
        ("split", True, lambda lb, r: lb),
        ("b/s", True, lambda lb, r: _num(r.bps, ".3f")),
        ("95% interval", True, lambda lb, r: _interval_text(r)),
        ("p best", True, lambda lb, r: share_text(o.of(lb).p_best).lstrip("~")),
        ("tok/s", True, lambda lb, r: _tok(r.tok_s)),
        ("bound b/s", bound, lambda lb, r: _num(r.bound_bps, ".3f")),
        ("efficiency", True, lambda lb, r: _num(100 * r.efficiency, ".0f") + "%"),
        ("worker util" if adv.settings.cpu else "gpu util", True, lambda lb, r: _num(100 * r.gpu_util, ".0f") + "%"),
        ("bottleneck", True, lambda lb, r: r.bottleneck),
        ("ETA", True, lambda lb, r: dur_text(r.eta_s)),
        ("exact b/s", any(r.bps_exact is not None for r in rs), lambda lb, r: _num(r.bps_exact, ".3f")),
        ("GPUs", adv.settings.gpus_per_worker != (1, 1), lambda lb, r: f"{r.producer.gpus}-{r.consumer.gpus}"),
        # across nodes: "-" and "nan" where the split has none
        ("link", nodes, lambda lb, r: _num(100 * r.link.link_util, ".0f") + "%" if r.link else "-%"),
        ("placement", nodes, lambda lb, r: r.link.placement_text if r.link else "nan"),
    ]
    shown = [(h, cell) for h, on, cell in columns if on]
    return [h for h, _ in shown], [[cell(label, r) for _, cell in shown] for label, r in adv.rows.items()]


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
    if not adv.fit.source.logged:
        given = []
        for rf in (adv.fit.producer, adv.fit.consumer):
            n = ob.roles[rf.role]
            g = rf.mu_bps * n
            at = ob.capacities_bps[rf.role]
            cap = Capacity(low=rf.mu_range_bps[0] * n, high=rf.mu_range_bps[1] * n).text() if rf.ranged else bps_text(g)
            text = f"{rf.role} {cap} b/s"
            if abs(at / g - 1.0) > 0.005:
                text += f" ({bps_text(at)} b/s after the sync)"
            given.append(text)
        return [
            f"what-if: {adv.gpus} GPUs, now {ob.roles[p]}-{ob.roles[c]} ({p}-{c}); given capacities: "
            f"{', '.join(given)}; projected there {bps_text(ob.bps)} b/s, efficiency {pct_text(ob.efficiency)}; "
            f"bottleneck: {ob.bottleneck}"
        ]
    basis = adv.fit.source.capacities_from()
    runs = adv.fit.observed
    split_of = [split_label(o.roles.get(p, 0), o.roles.get(c, 0)) for o in runs]
    labels = list(dict.fromkeys(split_of))
    at = f" at {labels[0]}:" if len(runs) > 1 else ""
    lines = [
        f"run {adv.run}: {s.units()}{_gpus_from(adv)}, observed {', '.join(labels)} ({p}-{c})"
        + (", run ended" if s.run_ended else "")
        + projected,
        f"observed{at} {_rate(ob.bps, ob.tok_s)}; capacities from {basis}: {caps}; "
        f"efficiency {pct_text(ob.efficiency)}; bottleneck: {ob.bottleneck}",
        f"steady window t = {ob.steady_from_s:.0f}-{ob.steady_to_s:.0f} s ({pct_text(ob.warmup_share)} of the log "
        f"dropped as warm-up"
        + (f", {pct_text(ob.drain_share)} as the final drain)" if ob.drain_share >= 0.005 else ")"),
    ]
    lines += [f"observed at {k} ({o.path}): {_rate(o.bps, o.tok_s)}" for k, o in zip(split_of[1:], runs[1:])]
    absent = [lbl for lbl in labels if lbl not in adv.rows]
    if absent:
        lines.append(
            f"{' and '.join(absent)} {'is not a split' if len(absent) == 1 else 'are not splits'} of "
            f"{s.units()}: the table marks (*) only the observed splits it has"
        )
    if ob.hs_mean_depth is not None:
        lines.append(
            f"q_hs: mean depth {ob.hs_mean_depth:.1f}/{adv.fit.hs_cap}, full {pct_text(ob.hs_full_share)} of the time"
        )
    if adv.fit.source is Source.STEPS:
        lines.append(_step_time(adv))
    return lines


def _step_time(adv: Advice) -> str:
    """Each role's step time as the projections use it (`advisor.fit.tokens`): the in-log line,
    the line through the budgets' means, or the mean step and the exponent of other batch sizes."""
    parts, unresolved = [], False
    for rf in (adv.fit.producer, adv.fit.consumer):
        notes = [f"SCV {rf.busy_scv:.3f}"]
        if rf.token_model in ("line", "budgets"):  # fixed cost + per token: in the log, or through the budgets
            a, b = (rf.t0_s, rf.c_s_per_tok) if rf.token_model == "line" else rf.budget_line
            text = f"{a * 1e3:.1f} ms + {b * 1e6:.2f} us/token"
            if rf.token_model == "budgets":
                notes.append("the line through the budgets' means")
            elif a == 0 and b > 0:
                notes.append("fixed cost clamped at 0: not resolved")
        else:
            unresolved = True
            mean = f"{rf.busy_mean_s * 1e3:.1f} ms" if rf.busy_mean_s < 1 else f"{rf.busy_mean_s:.3f} s"
            text = f"{mean} per batch"
            notes.append(f"x tokens^{rf.token_exponent:.2f} at other batch sizes")
        parts.append(f"{rf.role} {text} ({'; '.join(notes)})")
    tail = (
        f"; at ~{_tok(adv.fit.tokens_mean)} tokens per batch: the log's token counts vary too little to split "
        f"fixed from per-token cost"
        if unresolved
        else ""
    )
    return "step time: " + ", ".join(parts) + tail


def _gpus_from(adv: Advice) -> str:
    """Where G came from, when not plain: ``--gpus`` other than the logs', or logs of different G."""
    ran = list(dict.fromkeys(log.header.gpus for log in adv.logs))
    if not ran or ran == [adv.gpus]:
        return ""
    logs = f"the log ran {ran[0]}" if len(ran) == 1 else f"the logs ran {' and '.join(map(str, ran))}"
    if adv.gpus != ran[0]:
        return f" (--gpus; {logs})"
    return f" (the first log's; {logs}: --gpus G projects another)"


def _cap(text: str, names: tuple[str, ...] = ()) -> str:
    """The sentence with a capital first letter, unless it opens with a role that is a label ("vllm")."""
    if any(text.startswith(n + " ") and not role_is_noun(n) for n in names):
        return text
    return text[:1].upper() + text[1:]


def _sections(adv: Advice) -> list[tuple[str, list[str]]]:
    d, rec, names = adv.decision, adv.recommendation, tuple(adv.roles)
    out = [(_title(adv), [_cap(r, names) for r in rec.reasons])]
    if rec.holds_unless:  # never an empty heading (one split of G: nothing to hold against)
        out.append(("The verdict holds unless:", [_cap(h, names) for h in rec.holds_unless]))
    if d.queue is not None:
        out.append(("Queue:", [_cap(queue_text(d.queue))]))
    return out


def render_text(adv: Advice) -> str:
    """The advice as terminal text: headline, table, legend, the verdict's sections and caveats."""
    head, rows = _rows(adv)
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    left = (0, 1, head.index("bottleneck"))
    fmt = "  ".join(f"{{:<{w}}}" if i in left else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = _headline(adv) + ["", fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    lines += [f"  ({legend(adv, 'bound b/s' in head)})"]
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
    """The advice as Markdown: the gate's line where there is one, a heading with the verdict, the
    headline quoted, the table, its legend, the verdict's sections and the caveats folded.
    """
    head, rows = _rows(adv)
    lines = []
    if adv.gate:  # a gate's comment opens with its verdict; the advice's own headline follows
        lines += [gate_line(adv.gate, markdown=True), ""]
    lines += [f"### dflash-advise: {_title(adv, markdown=True)} ({md_escape(adv.run)})", ""]
    lines += [f"> {md_escape(x)}  " for x in _headline(adv)] + [""]
    lines.append("| " + " | ".join(h or "mark" for h in head) + " |")
    left = (0, 1, head.index("bottleneck"))
    lines.append("|" + "|".join("---" if i in left else "---:" for i in range(len(head))) + "|")
    names = {">": "**rec**", "*": "obs", "j": "judged", "s": "sim"}
    for r in rows:
        cells = [", ".join(names[ch] for ch in r[0] if ch in names), *r[1:]]
        if r[0].startswith(">"):
            cells[1] = f"**{cells[1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"_{md_escape(legend(adv, 'bound b/s' in head, words=True))}_"]
    for title, items in _sections(adv):
        lines += ["", f"**{title}**", ""] + [f"- {md_escape(x)}" for x in items]
    if adv.warnings:
        lines += (
            ["", "<details><summary>Caveats</summary>", ""]
            + [f"- {md_escape(w)}" for w in adv.warnings]
            + ["", "</details>"]
        )
    return "\n".join(lines) + "\n"


def gate_line(g: dict, markdown: bool = False) -> str:
    """The gate's verdict in one line (`advisor.cli.check.run_check`'s ``gate``): PASS or FAIL,
    each condition with its number, and the conditions that failed."""
    failed = list(g.get("failed", [] if g["passed"] else [g["metric"]]))
    verdict = "PASS" if not failed else "FAIL"
    split = "-".join(str(v) for v in g["roles"].values())
    met = g["metric"] not in failed
    conds = [f"{g['metric']} {g['value']:.3f} {'>=' if met else '<'} {g['threshold']:.3f}"]
    if g.get("min_confidence") is not None:
        ok = "confidence" not in failed
        conds.append(f"p_best {g['p_best']:.3f} {'>=' if ok else '<'} min confidence {g['min_confidence']:.3f}")
    why = f"; failed on {' and '.join(failed)}" if failed else ""
    if markdown:
        return f"**{verdict}**: gate on {split}: {', '.join(conds)}{why}"
    return (
        f"{verdict}: split {split} ({'-'.join(g['roles'])}) predicted {', '.join(conds)}{why}; "
        f"{g['bps']:.3g} b/s, bottleneck {g['bottleneck']}"
    )


def render_json(adv: Advice) -> str:
    """The advice as the ``--json`` document."""
    return json.dumps(advice_json(adv), indent=2) + "\n"


def render(adv: Advice, fmt: str = "text") -> str:
    """The advice in one output format: text, markdown or json."""
    return {"json": render_json, "markdown": render_markdown}.get(fmt, render_text)(adv)
