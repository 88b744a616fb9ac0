"""Render an :class:`~advisor.advice.Advice` as terminal text, Markdown or JSON.

Text and Markdown carry the same content: a headline (observed split, rate, efficiency,
bottleneck), the table of splits with the observed (``*``) and recommended (``>``) rows
marked, the reasoning in a few sentences, the queue advice, and the caveats.
"""
from __future__ import annotations

import json
import math
from .advice import Advice


def _num(v: float, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def _dur(s: float) -> str:
    if s is None or not math.isfinite(s):
        return "-"
    if s >= 86400:
        return f"{s / 86400:.1f} d"
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 60:.0f} min"


def _tok(v: float) -> str:
    return f"{v / 1000:.1f}K" if math.isfinite(v) else "-"


def _rows(adv: Advice) -> tuple[list[str], list[list[str]]]:
    p, c = adv.roles
    rec = adv.recommendation.roles
    exact = "bps_exact" in adv.splits
    head = ["", "split", "b/s", "95% interval", "tok/s", "bound b/s", "efficiency", "gpu util", "bottleneck", "ETA"]
    if exact:
        head.append("exact b/s")
    rows = []
    for _, r in adv.splits.iterrows():
        n, m = int(r[f"n_{p}"]), int(r[f"n_{c}"])
        mark = ((">" if (n, m) == (rec[p], rec[c]) else " ") + ("*" if r["observed"] else " ")
                + ("s" if r.get("method") == "exact" else ""))
        rows.append([mark, f"{n}-{m}", _num(r["bps"], ".3f"), f"{_num(r['bps_low'], '.3f')}-{_num(r['bps_high'], '.3f')}",
                     _tok(r["tok_s"]), _num(r["bound_bps"], ".3f"), _num(100 * r["efficiency"], ".0f") + "%",
                     _num(100 * r["gpu_util"], ".0f") + "%", r["bottleneck"], _dur(r["eta_s"])]
                    + ([_num(r["bps_exact"], ".3f")] if exact else []))
    return head, rows


def _headline(adv: Advice) -> list[str]:
    p, c = adv.roles
    ob = adv.observed
    caps = ", ".join(f"{k} {v:.3g} b/s" for k, v in ob.capacities_bps.items())
    if adv.fit.source == "numbers":
        return [f"what-if: {adv.gpus} GPUs, now {ob.roles[p]}-{ob.roles[c]} ({p}-{c}); given capacities: {caps}; "
                f"efficiency {ob.efficiency:.0%}; bottleneck: {ob.bottleneck}"]
    basis = "busy time" if adv.fit.source == "steps" else "'rates' snapshots"
    lines = [f"run {adv.run}: {adv.gpus} GPUs, observed {ob.roles[p]}-{ob.roles[c]} ({p}-{c})",
             f"observed {ob.bps:.3g} b/s = {_tok(ob.tok_s)} tok/s; capacities from {basis}: {caps}; "
             f"efficiency {ob.efficiency:.0%}; bottleneck: {ob.bottleneck}",
             f"steady window t = {ob.steady_from_s:.0f}-{ob.steady_to_s:.0f} s ({ob.warmup_share:.0%} of the log dropped "
             f"as warm-up" + (f", {ob.drain_share:.0%} as the final drain)" if ob.drain_share >= 0.005 else ")")]
    if ob.hs_mean_depth is not None:
        cap = adv.fit.hs_cap
        lines.append(f"q_hs: mean depth {ob.hs_mean_depth:.1f}/{cap}, full {ob.hs_full_share:.0%} of the time")
    fp, fc = adv.fit.producer, adv.fit.consumer
    if adv.fit.source == "steps":
        lines.append(f"step time: {p} {fp.t0_s * 1e3:.1f} ms + {fp.c_s_per_tok * 1e6:.2f} us/token "
                     f"(SCV {fp.busy_scv:.3f}), {c} {fc.t0_s * 1e3:.1f} ms + {fc.c_s_per_tok * 1e6:.2f} us/token "
                     f"(SCV {fc.busy_scv:.3f})")
    return lines


def _reasoning(adv: Advice) -> list[str]:
    rec = adv.recommendation
    p, c = adv.roles
    verdict = {"stay": "STAY with", "switch": "SWITCH to", "best": "BEST:"}[rec.verdict]
    out = [f"{verdict} {rec.roles[p]}-{rec.roles[c]}"]
    out += [f"- {r[0].upper()}{r[1:]}" for r in rec.reasons]
    out.append("The verdict holds unless:")
    out += [f"- {h}" for h in rec.holds_unless]
    for q in adv.queues.values():
        out.append(f"Queue: {q.advice}")
    return out


def render_text(adv: Advice) -> str:
    head, rows = _rows(adv)
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    fmt = "  ".join("{:<%d}" % w if i in (0, 1, 8) else "{:>%d}" % w for i, w in enumerate(widths))
    lines = _headline(adv) + ["", fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    legend = "> recommended, * observed; bound = naive min-capacity bound"
    if "method" in adv.splits and (adv.splits["method"] == "exact").any():
        legend += "; s = b/s from exact simulation of the log's step times"
    lines += [f"  ({legend})", ""]
    lines += _reasoning(adv)
    if adv.warnings:
        lines += ["", "Caveats:"] + [f"- {w}" for w in adv.warnings]
    return "\n".join(lines) + "\n"


def render_markdown(adv: Advice) -> str:
    head, rows = _rows(adv)
    p, c = adv.roles
    rec = adv.recommendation
    title = {"stay": "stay with", "switch": "switch to", "best": "best split"}[rec.verdict]
    lines = [f"### dflash-advise: {title} **{rec.roles[p]}-{rec.roles[c]}** ({adv.run})", ""]
    lines += [f"> {x}" for x in _headline(adv)] + [""]
    lines.append("| " + " | ".join(h or "mark" for h in head) + " |")
    lines.append("|" + "|".join("---" if i in (0, 1, 8) else "---:" for i in range(len(head))) + "|")
    for r in rows:
        mark = {">*": "**rec, obs**", "> ": "**rec**", " *": "obs"}.get(r[0][:2], "") + (" (sim)" if r[0][2:] else "")
        cells = [mark, *r[1:]]
        if r[0].startswith(">"):
            cells[1] = f"**{cells[1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""] + [x if x.startswith("- ") else f"**{x}**" for x in _reasoning(adv)]
    if adv.warnings:
        lines += ["", "<details><summary>Caveats</summary>", ""] + [f"- {w}" for w in adv.warnings] + ["", "</details>"]
    if adv.gate:
        g = adv.gate
        lines += ["", f"Gate: {g['metric']} {g['value']:.3f} {'>=' if g['passed'] else '<'} {g['threshold']:.3f}: "
                      f"**{'PASS' if g['passed'] else 'FAIL'}**"]
    return "\n".join(lines) + "\n"


def render_json(adv: Advice) -> str:
    return json.dumps(adv.to_json(), indent=2) + "\n"


def render(adv: Advice, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(adv)
    if fmt == "markdown":
        return render_markdown(adv)
    return render_text(adv)
