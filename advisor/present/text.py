"""Render an :class:`~advisor.advice.Advice` as terminal text, Markdown or JSON: layout only.

The sentences (reasons, what the verdict holds unless, the queue advice) are
`advisor.decide.reasons`'s, written from the decision and the rows of the projected table it
names; this module lays them out beside the table with the same number formatting (`bps_text`,
`pct_text`). Text and Markdown carry the same content: a headline (observed split, rate,
efficiency, bottleneck), the table with the recommended (``>``), observed (``*``) and judged
(``j``) rows marked, the reasons, what the verdict depends on, the queue advice and the caveats.
"""
from __future__ import annotations

import html
import json
import math
import re

from advisor.advice import Advice
from advisor.decide.reasons import bps_text, dur_text, pct_text, queue_text
from advisor.decide.rules import Decision, Verdict

HEADINGS = {Verdict.STAY: "STAY with", Verdict.SWITCH: "SWITCH to", Verdict.NEXT_RUN: "NEXT RUN:",
            Verdict.CANNOT_TELL: "CANNOT TELL; for now keep"}
MD_TITLES = {Verdict.STAY: "stay with", Verdict.SWITCH: "switch to", Verdict.NEXT_RUN: "next run:",
             Verdict.CANNOT_TELL: "cannot tell yet; keep"}
LEGEND = ("> recommended, * observed, j judged (--roles); bound = naive min-capacity bound; efficiency = b/s over "
          "the fastest stage's capacity (balance); gpu util = busy share of all GPU time")


def _title(d: Decision, markdown: bool = False) -> str:
    """The verdict line: an open next-run choice names both splits (there is nothing to keep)."""
    m = d.margin
    if d.rule == "unresolved" and m is not None:
        if markdown:
            return f"cannot tell yet for the next run: **{m.higher}** or **{m.lower}**"
        return f"CANNOT TELL for the next run: {m.higher} or {m.lower}"
    if markdown:
        return f"{MD_TITLES[d.verdict]} **{d.recommended}**"
    return f"{HEADINGS[d.verdict]} {d.recommended}"


def _num(v: float, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def _tok(v: float) -> str:
    return f"{v / 1000:.1f}K" if math.isfinite(v) else "-"


# ---------------------------------------------------------------- layouts

def _rows(adv: Advice) -> tuple[list[str], list[list[str]]]:
    d = adv.decision
    exact = "bps_exact" in adv.splits
    head = ["", "split", "b/s", "95% interval", "tok/s", "bound b/s", "efficiency", "gpu util", "bottleneck", "ETA"]
    if exact:
        head.append("exact b/s")
    p, c = adv.roles
    engines = adv.settings.gpus_per_worker != (1, 1)
    nodes = "placement" in adv.splits.columns
    if engines:
        head.append("GPUs")
    if nodes:
        head += ["link", "placement"]
    rows = []
    for label, r in adv.splits.iterrows():
        mark = ((">" if label == d.recommended else " ") + ("*" if r["observed"] else " ")
                + ("j" if adv.settings.roles and label == d.judged else " ")
                + ("s" if r.get("method") == "exact" else ""))
        rows.append([mark.rstrip(), str(label), _num(r["bps"], ".3f"),
                     f"{_num(r['bps_low'], '.3f')}-{_num(r['bps_high'], '.3f')}", _tok(r["tok_s"]),
                     _num(r["bound_bps"], ".3f"), _num(100 * r["efficiency"], ".0f") + "%",
                     _num(100 * r["gpu_util"], ".0f") + "%", str(r["bottleneck"]), dur_text(r["eta_s"])]
                    + ([_num(r["bps_exact"], ".3f")] if exact else [])
                    + ([f"{int(r[f'gpus_{p}'])}-{int(r[f'gpus_{c}'])}"] if engines else [])
                    + ([_num(100 * r["link_util"], ".0f") + "%", str(r["placement"])] if nodes else []))
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
        out.append(("Queue:", [_cap(queue_text(d.queue))]))
    return out


def engine_legend(adv: Advice) -> str:
    """The legend's words for engines of several GPUs and for nodes (empty otherwise)."""
    p, c = adv.roles
    kp, kc = adv.settings.gpus_per_worker
    out = ""
    if (kp, kc) != (1, 1):
        out += (f"; a split counts engines ({p}s of {kp} GPU{'s' if kp > 1 else ''}, {c}s of {kc}), "
                f"GPUs = GPUs per role")
    if "placement" in adv.splits.columns:
        out += "; link = the inter-node link's busy share at that placement"
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
    legend += engine_legend(adv)
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
