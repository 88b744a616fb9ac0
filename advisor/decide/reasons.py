"""The decision in words: every sentence of the reasons, what the verdict holds unless, the queue advice.

Each sentence is written only from what it describes (the `~advisor.decide.rules.Decision`, the
rows it names, the fit, the observed split), so it cannot disagree with the table beside it;
numbers print through `bps_text`, `pct_text`, `signed_pct` and `dur_text`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from advisor.decide.observed import ObservedSplit
from advisor.decide.probe import probe_command
from advisor.decide.rules import RESOLVE_GAIN, Decision, Margin
from advisor.model.params import Basis, PipelineFit, RoleFit, Source
from advisor.project.queues import QueueAdvice, has_hs_queue
from advisor.project.rows import LinkRow, SplitRow
from advisor.project.sensitivity import LEVER_MIN_GAIN, ROBUST_RANGE, SCALING_RANGE
from advisor.project.table import split_label
from advisor.settings import Settings, role_count, role_plural


def bps_text(x: float) -> str:
    """A rate as the sentences print it: 4 significant digits, no unit."""
    return f"{x:.4g}"


def pct_text(share: float) -> str:
    """A share as a whole percentage ("45%")."""
    return f"{share:.0%}" if math.isfinite(share) else "-"


def signed_pct(pct: float) -> str:
    """A percentage with its sign, to one decimal ("+7.2%", "-0.4%")."""
    v = round(pct, 1)
    return f"{v + 0.0:+.1f}%" if v != 0 else "0.0%"  # no "-0.0%"


_DUR_UNITS = ((86400.0, "d", ".1f"), (3600.0, "h", ".1f"), (60.0, "min", ".0f"))  # (seconds, unit, format)


def dur_text(s: float | None) -> str:
    """A duration in the largest unit it fills: "1.5 d", "2.0 h", "12 min", "40 s"."""
    if s is None or not math.isfinite(s):
        return "-"
    scale, unit, fmt = next((u for u in _DUR_UNITS if s >= u[0]), (1.0, "s", ".0f"))
    return f"{s / scale:{fmt}} {unit}"


# ---------------------------------------------------------------- reasons, from the decision


def basis_text(rf: RoleFit, workers: int, on: str) -> str:
    """What one role's capacity rests on, in words: "given", "given as 0.88..0.95 b/s on 16 GPUs",
    "at least 39 b/s on 7 GPUs, a bound", "measured from rates snapshots".
    """
    if rf.ranged:
        lo, hi = (workers * v for v in rf.mu_range_bps)
        if not math.isfinite(hi):
            return f"at least {bps_text(lo)} b/s on {on}, a bound"
        if rf.basis is Basis.BOUND:  # read from a log: its throughput up to an upper estimate
            return f"between {bps_text(lo)} and {bps_text(hi)} b/s on {on}, a bound"
        return f"given as {bps_text(lo)}..{bps_text(hi)} b/s on {on}"
    return rf.basis.word()


def _role_cap_text(rf: RoleFit, row: SplitRow, fit: PipelineFit, s: Settings) -> str:
    """A role's capacity at a split and what it rests on; where it is not the capacity given or
    read at the observed split (another worker count, the sync cost), that one is said beside it."""
    cap, n = row.of(rf.role).cap_bps, row.of(rf.role).workers
    given_n = fit.observed[0].roles.get(rf.role, 0)
    base = rf.mu_bps * given_n
    on = s.units(given_n * s.log_gpus_per_worker[0 if rf.role == s.producer else 1])
    basis = basis_text(rf, given_n, on)
    if n != given_n:
        return f"{bps_text(cap)} b/s ({bps_text(base)} b/s on {on} {basis}, carried to {n})"
    if abs(cap / base - 1.0) > 0.005:
        return f"{bps_text(cap)} b/s ({bps_text(base)} b/s {basis}, {pct_text(cap / base)} of it after the sync)"
    return f"{bps_text(cap)} b/s ({basis})"


def link_cost_pct(r: SplitRow) -> float:
    """What the link costs at a row: its rate below a free link's at the same placement, in %."""
    free = r.link.bps_free_link if r.link is not None else math.nan
    return 100 * (1 - r.bps / free) if free > 0 else 0.0


def _bottleneck(d: Decision, fit: PipelineFit, label: str) -> str:
    r = d.rows[label]
    pr, cr = r.producer, r.consumer
    p, c = pr.role, cr.role
    loader = f", loader {bps_text(r.cap_loader_bps)} b/s" if math.isfinite(r.cap_loader_bps) else ""
    # a pipeline without a q_hs (none declared, none given) has no depth to project
    hs = f"q_hs {r.hs_mean_depth:.1f}/{d.settings.hs_cap}, " if has_hs_queue(fit, d.settings) else ""
    waits = (
        f"projected at {label}: {hs}{role_plural(p)} blocked {pct_text(pr.wait_share)}, {role_plural(c)} starved "
        f"{pct_text(cr.wait_share)}."
    )
    head = f"at {label} the {r.bottleneck} is the bottleneck"
    if r.bottleneck == "link" and r.link is not None:
        # the link's own capacity, and its cost from the same row as the placement sentence's
        return (
            f"{head}: its capacity {bps_text(r.link.cap_link_bps)} b/s vs {p} {bps_text(pr.cap_bps)} b/s and {c} "
            f"{bps_text(cr.cap_bps)} b/s (their own, without the link){loader}; the link costs {link_cost_pct(r):.1f}% "
            f"against a free one ({bps_text(r.link.bps_free_link)} b/s); {waits}"
        )
    if fit.source is Source.STEPS:
        caps, loader = [f"{bps_text(x.cap_bps)} b/s" for x in (pr, cr)], f"{loader} (from busy time)"
    else:
        caps = [_role_cap_text(rf, r, fit, d.settings) for rf in (fit.producer, fit.consumer)]
    return f"{head}: {p} capacity {caps[0]} vs {c} {caps[1]}{loader}; {waits}"


def _measured(d: Decision, fit: PipelineFit, ob: ObservedSplit) -> list[str]:
    """The log's own signals at the observed split where the first reason describes it (measured,
    not projected); none from bare numbers (no log: the "observed" rate is the given capacities'
    minimum, nothing measured it)."""
    label = d.observed
    if not fit.source.logged or label != d.described:
        return []
    p, c = fit.roles
    r = d.rows[label]
    parts = []
    if ob.hs_mean_depth is not None and ob.hs_full_share is not None:
        parts.append(
            f"q_hs {ob.hs_mean_depth:.1f}/{fit.hs_cap} on average (full {pct_text(ob.hs_full_share)} of the time)"
        )
    if ob.producer_blocked is not None and ob.consumer_starved is not None:
        parts.append(
            f"{role_plural(p)} blocked {pct_text(ob.producer_blocked)} of their time, {role_plural(c)} starved "
            f"{pct_text(ob.consumer_starved)}"
        )
    if math.isfinite(r.observed_bps):
        logged = r.link.bps_logged_place if r.link is not None else math.nan  # across nodes: as the log placed it
        against = (
            f"{bps_text(logged)} projected at its placement"
            if math.isfinite(logged)
            else f"{bps_text(r.bps)} projected"
        )
        parts.append(f"{bps_text(r.observed_bps)} b/s against {against}")
    return [f"measured at {label} {fit.source.measured_by()}: " + "; ".join(parts) + "."] if parts else []


LOADER_TIE = 0.01  # splits this close to the loader's cap count as reaching it
SELF_CHECK_SAID_PCT = 1.0  # a self-check miss this large is said in the reasons (the odds carry any)


def _self_check(d: Decision, ob: ObservedSplit) -> list[str]:
    """The model against its own observation (`advisor.decide.observed.ObservedSplit.miss_pct`), where
    it misses by ``SELF_CHECK_SAID_PCT`` or more: every projection and the odds carry that error
    (`advisor.project.model_error`)."""
    miss, label = ob.miss_pct, d.observed
    if miss is None or abs(miss) < SELF_CHECK_SAID_PCT:  # a miss is measured only at a row of the table
        return []
    r = d.rows[label]
    how = "exact simulation of the log's step times" if ob.method == "exact" else "the analytic chain"
    return [
        f"the model reads the observed split {label} {abs(miss):.1f}% {'low' if miss > 0 else 'high'} "
        f"({bps_text(r.bps)} b/s by {how}, against {bps_text(r.observed_bps)} measured); every projection and the "
        f"odds carry an error of that size, shared with the splits near {label}."
    ]


def _needs(d: Decision) -> str:
    n = d.needs
    if n is None:
        return ""
    bits = []
    if n.model_gap:
        measured = ", ".join(f"{lbl} {bps_text(x)} b/s" for lbl, x in n.measured)
        bits.append(
            f"the model misses the measured rate at {', '.join(n.model_gap)} (see the caveats)"
            + (f"; the logs themselves measured {measured}" if measured else "")
            + "; logs on dedicated devices (a GPU or a CPU core per worker), one per split, would compare the splits "
            + "directly"
        )
    if n.settle:
        bits.append("a log that runs past warm-up (its pace steady over the second half of the window)")
    if n.longer_factor is not None and n.extra_steady_s is not None:
        bits.append(f"a steady log about {n.longer_factor:.1f}x as long (~{dur_text(n.extra_steady_s)} more)")
    if n.run_at:
        with_what = "" if not d.evidence.basis.logged else ", given with this log"
        bits.append(f"a short run at {n.run_at}{with_what}, which measures it directly")
    if n.repeats:
        measured = " and ".join(f"{lbl} {bps_text(x)} b/s" for lbl, x in n.measured)
        bits.append(
            f"both splits ran ({measured}), and another run of either may differ by more than their gap: "
            f"repeated runs of each, given together, measure that"
        )
    return " What would settle it: " + "; or ".join(bits) + "." if bits else ""


def _vs(rows: Mapping[str, SplitRow], a: str, b: str) -> str:
    return f"{a} {bps_text(rows[a].bps)} b/s vs {b} {bps_text(rows[b].bps)} b/s"


def _verdict_reason(d: Decision, rows: Mapping[str, SplitRow]) -> str:
    s = d.settings
    b, j = d.best, d.judged
    of = f"of the {len(rows)} split{'s' if len(rows) != 1 else ''} of {s.units()}"
    if d.rule == "already-best":
        return f"{j} is already the best {of}."
    if d.rule == "small-gain" and d.best_is_running:
        return (
            f"{b}, the split the log runs, leads the judged {j} by only {signed_pct(d.gain_pct)} ({_vs(rows, b, j)}), "
            f"below the {RESOLVE_GAIN:.0%} the model resolves: either will do, and keeping {b} needs no restart."
        )
    if d.rule == "small-gain":
        return (
            f"the split projected highest, {b}, would gain only {signed_pct(d.gain_pct)} at the projections' "
            f"centres ({_vs(rows, b, j)}), below the {RESOLVE_GAIN:.0%} the model resolves: not worth a restart "
            f"(the odds below weigh the whole uncertainty, not the centres)."
        )
    if d.rule == "restart-cost":
        return (
            f"{b} projects {signed_pct(d.gain_pct)}, but finishing the remaining job there would save only "
            f"{d.eta_gain_s / 3600:.1f} h, not more than the {s.restart_cost_h:g} h restart cost."
        )
    if d.rule == "expected-best":
        return (
            f"{b} projects {signed_pct(d.gain_pct)} ({_vs(rows, b, j)}), but with its uncertainty"
            f"{' and the restart' if d.odds.restart_s > 0 else ''} {j} is expected within "
            f"{RESOLVE_GAIN:.0%} of the best (expected regret {d.expected_regret_pct:.1f}%): not worth a restart."
        )
    if d.rule == "probe":
        return _probe_reason(d)
    if d.rule == "switch" and d.best_is_running:
        sooner = f" and finishes the job {d.eta_gain_s / 3600:.1f} h sooner" if d.eta_gain_s is not None else ""
        return (
            f"{b}, the split the log runs, gains {signed_pct(d.gain_pct)} throughput over the judged {j} "
            f"({_vs(rows, b, j)}){sooner}: keep {b}, which needs no restart; moving to {j} would cost one."
        )
    if d.rule == "switch" and d.recommended != b:  # the odds switch to a split that is not the projected best
        restart = (
            f" by the rest of the job, the {s.restart_cost_h:g} h restart included"
            if d.odds.restart_s > 0
            else " (the job's size is unknown, so the restart cost is not weighed)"
        )
        return f"{d.recommended} {_odds_lead(d, rows, j, j)}{restart}: switch to it."
    if d.rule == "switch":
        gains = f"switching to {b} gains {signed_pct(d.gain_pct)} throughput ({_vs(rows, b, j)})"
        if d.eta_gain_s is None:
            return f"{gains}; the job's size is unknown, so the restart cost is not weighed."
        sooner_h = (d.eta_gain_s - 3600 * s.restart_cost_h) / 3600
        return f"{gains} and finishes the job {sooner_h:.1f} h sooner, after a {s.restart_cost_h:g} h restart."
    why = (
        "the run has ended"
        if s.run_ended
        else "--next-run was given"
        if s.next_run
        else f"no split of {s.units()} was observed"
    )
    b = d.recommended
    head = f"{why}, so no restart cost applies: for the next run, {b} is the best"
    if b == d.best:
        text = f"{head} {of} ({bps_text(rows[b].bps)} b/s)."
    else:
        text = f"{head} choice {of}: it {_odds_lead(d, rows, d.best, d.odds.runner_up)}."
    m = d.margin
    if m is not None and d.close_call:
        other = m.lower if m.higher == b else m.higher
        text += (
            f" {other} is expected within {RESOLVE_GAIN:.0%} of the best too ({_vs(rows, m.higher, m.lower)}), "
            f"which the model does not resolve: either will do."
        )
    return text


def _upper_end(rows: Mapping[str, SplitRow], label: str, high: float) -> str:
    """``label``'s upper end in words: the value, or open where it rests on the open end of a
    capacity known only from below (the table's ``bps_high_open``)."""
    if rows[label].bps_high_open:
        return f"{label}'s upper end, which is open (a capacity known only from below)"
    return f"{label}'s upper end {bps_text(high)}"


def _odds_lead(d: Decision, rows: Mapping[str, SplitRow], other: str, ahead_of: str) -> str:
    """How the odds' pick leads where its point projection does not (what is unknown favours it)."""
    r = d.recommended
    return (
        f"projects {bps_text(rows[r].bps)} b/s against {other}'s {bps_text(rows[other].bps)} at the point estimate, "
        f"but over what the fit leaves open it is expected {signed_pct(d.expected_gain_pct)} ahead of {ahead_of}"
    )


def _probe_reason(d: Decision) -> str:
    """What the probe is, what it costs and is worth, and the action without it (rule ``probe``)."""
    pr = d.probe
    words = {
        "stay": f"stay with {d.recommended}",
        "switch": f"switch to {d.recommended}",
        "next-run": f"run {d.recommended} next",
    }[d.action.value]
    return (
        f"a short probe is worth buying: {dur_text(pr.seconds_each)} each at {' and '.join(pr.splits)} ({pr.rounds} "
        f"rounds of {dur_text(pr.segment_s)} segments, alternating A B A B, so the host's drift cancels in their "
        f"lead), {pr.gpu_hours:.2g} GPU-hours, is expected to cut the expected regret from {pr.regret_now_pct:.1f}% to "
        f"{pr.regret_after_pct:.1f}%: worth {dur_text(pr.value_s)} of the {d.settings.units()} over the job's "
        f"remaining time, against {dur_text(pr.cost_s)} for the probe and two restarts. Run it with "
        f"`{probe_command(pr, d.settings.gpus_per_worker[0])}` (with the run's other options), then advise on the "
        f"probe's directory: `dflash-advise probe`. Without a probe, {words} "
        f"(within {RESOLVE_GAIN:.0%} of the best in {100 * d.p_best:.0f}% of the draws)." + _needs(d)
    )


def _lead_text(mg: Margin) -> str:
    """The margin's lead with its own interval (from the odds' draws, `advisor.decide.rules.Margin`)."""
    if mg.lead_low_pct is None or mg.lead_high_pct is None:
        return ""
    return (
        f", and {mg.higher}'s lead itself is {signed_pct(mg.lead_low_pct)} to {signed_pct(mg.lead_high_pct)} "
        f"(95%, with the uncertainty both share taken out)"
    )


def _runner_up(d: Decision, rows: Mapping[str, SplitRow], fit: PipelineFit) -> list[str]:
    p, c = fit.roles
    a, r = d.runner_up, d.recommended
    if a is None:
        return []
    ra = d.rows[a]
    m = ra.consumer.workers
    out = [
        f"the runner-up {a} would give {role_plural(p)} {bps_text(ra.producer.cap_bps)} b/s while {role_count(m, c)} "
        f"could take {bps_text(ra.consumer.cap_bps)} b/s: bound by the {ra.bottleneck} at {bps_text(ra.bps)} b/s, "
        f"{signed_pct(100 * (ra.bps / d.rows[r].bps - 1))} against {r}."
    ]
    mg = d.margin
    hi, lo = mg.higher, mg.lower
    probed = rows[hi].probe_segments > 0 and rows[lo].probe_segments > 0  # a probe measured both
    starts = f"{hi}'s 95% interval starts at {bps_text(mg.best_low)} b/s"
    above = f"{starts}, above {lo}'s upper end {bps_text(mg.runner_up_high)}"

    def not_above() -> str:  # built only where said: its lead interval is computed then
        return f"{starts}, not above {_upper_end(rows, lo, mg.runner_up_high)}{_lead_text(mg)}"

    # separated but not stable: the lead's own interval, not the two intervals, sets them apart
    lead = (
        f"{hi}'s lead over {lo} is {signed_pct(mg.lead_low_pct)} to {signed_pct(mg.lead_high_pct)} (95%)"
        if mg.separated and not mg.stable
        else ""
    )
    if d.evidence.thin:
        if mg.stable or mg.separated:
            out.append(
                f"the choice is provisional, not yet stable: {above if mg.stable else lead}, but on thin evidence "
                f"the intervals cover sampling noise only."
            )
        else:
            out.append(f"the choice is provisional: {not_above()}, and the evidence is thin.")
    elif not fit.source.logged and not any(fit.contention.role_se):
        out.append(
            "from given numbers the intervals carry only the model's own error (and, with a sync cost given "
            "at one drafter count, the range of its scaling), not the sampling and run-to-run error of a "
            "log: how stable the choice is cannot be told; a log with step events measures it."
        )
    elif mg.stable:
        by = f"; {_probe_text(rows, hi, lo)}" if probed else ""
        out.append(f"the choice is stable: {above}{by}.")
    elif mg.separated:
        end = f"{lo}'s ends at {bps_text(mg.runner_up_high)}" if probed else _upper_end(rows, lo, mg.runner_up_high)
        because = (
            f"{_probe_text(rows, hi, lo)}: the host's level moves both alike, so the lead carries only the noise "
            f"between rounds"
            if probed
            else "both come from one fit: the run's own level moves both splits alike, and how step time changes "
            "with the split moves them the same way, so the lead carries only what differs between them"
        )
        out.append(
            f"the choice is stable: {lead}. Their intervals overlap ({hi}'s starts at {bps_text(mg.best_low)} b/s, "
            f"{end}) because {because}."
        )
    elif probed:
        out.append(
            f"the margin is within the probe's noise: {_probe_text(rows, hi, lo)}, and {starts}, not above {lo}'s "
            f"upper end {bps_text(mg.runner_up_high)}{_lead_text(mg)}."
        )
    else:
        out.append(f"the margin is within the fit's uncertainty: {not_above()}.")
    return out


def _probe_text(rows: Mapping[str, SplitRow], a: str, b: str) -> str:
    """The evidence of a probed pair in words: "both were measured by a probe of N segments ..."."""
    n = rows[a].probe_segments + rows[b].probe_segments
    return (
        f"both were measured by a probe of {n} segments in alternating order ({a}: "
        f"{rows[a].probe_segments}, {b}: {rows[b].probe_segments}), compared round by round"
    )


def _loader(d: Decision, fit: PipelineFit) -> list[str]:
    """Where the fit finds the loader binding: its cap and the splits within ``LOADER_TIE`` of it."""
    ld = fit.loader
    if not (ld.input_bound and ld.capacity_bps):
        return []
    at_cap = [label for label, r in d.rows.items() if r.bps >= (1 - LOADER_TIE) * ld.capacity_bps]
    return [
        f"the loader caps the pipeline at {bps_text(ld.capacity_bps)} b/s ({role_plural(d.settings.producer)} "
        f"starved {pct_text(ld.producer_starved_share)} of their time with empty prefetch queues): no split beats "
        f"it ({', '.join(at_cap) or 'none'} reach it within {LOADER_TIE:.0%}); fix the input (more loader workers, "
        f"pre-tokenized data) rather than the split."
    ]


def _levers(d: Decision) -> list[str]:
    c = d.settings.consumer
    out = []
    for lv in d.sensitivity.levers:
        opts = [
            f"{what} would give {pct_text(s)}"
            for what, s in (
                ("balancing tokens across ranks", lv.scaling_balanced),
                (f"syncing every {2 * lv.sync_every} steps", lv.scaling_half_sync),
            )
            if s >= lv.scaling_now + LEVER_MIN_GAIN
        ]
        untimed = f", {lv.untimed_s * 1e3:.1f} ms more untimed" if lv.untimed_s >= 5e-5 else ""
        out.append(
            f"with {role_count(lv.drafters, c)} each keeps {pct_text(lv.scaling_now)} of a lone {c}'s rate (barrier "
            f"every {lv.sync_every} steps, collective {lv.collective_s * 1e3:.0f} ms{untimed}): {', '.join(opts)}."
        )
    return out


def reasons(decision: Decision, fit: PipelineFit, observed: ObservedSplit) -> list[str]:
    """The reasons, first the judged split's bottleneck (DESIGN: 'judged' is what it describes)."""
    d = decision
    rows = d.rows
    first = d.described
    out = [_bottleneck(d, fit, first)]
    out += _measured(d, fit, observed)
    out += _self_check(d, observed)
    out += _loader(d, fit)
    out.append(_verdict_reason(d, rows))
    if d.evidence.thin:
        out.append(
            f"this verdict is provisional: {'; '.join(d.evidence.why_thin())}; a longer log confirms or overturns it."
        )
    out += _runner_up(d, rows, fit)
    out += _levers(d)
    return out


def placement_reasons(decision: Decision, fit: PipelineFit) -> list[str]:
    """Across nodes: where the recommended split's engines sit, what the link carries and costs
    (from the row's ``placement``, ``layout``, ``crossing_share``, ``link_util``, ``cap_link_bps``,
    ``bps_free_link``), the split's other layout (``bps_other_layout``: node-local pipelines against
    one shared q_hs) and, where the log ran that split elsewhere, its own placement's rate
    (``bps_logged_place``).
    """
    d = decision
    label = d.recommended
    r = d.rows[label]
    lk = r.link
    if lk is None:
        return []
    s = d.settings
    out = [f"at {label} place {lk.placement_text} ({bps_text(r.bps)} b/s)"]
    if not s.link_bytes_s or not fit.hs_bytes_per_token:
        out[0] += "; the link between nodes is taken as free (its bandwidth is unknown)."
        return out
    sources = {"measured": "measured from this log's crossing batches", "header": "the log header's"}
    whence = sources.get(s.link_source, "given")
    cost = link_cost_pct(r)
    other = lk.other_layout_bps
    vs = f"{bps_text(other)} b/s ({signed_pct(100 * (other / r.bps - 1))})" if other > 0 else ""
    if lk.layout == "node-local":
        where = lk.placement_text.removeprefix("node-local: ")
        out[0] = (
            f"at {label} run one pipeline per node ({where}; {bps_text(r.bps)} b/s): each node's batches "
            f"stay on it; {_local_sync_text(fit, lk, s.link_bytes_s / 1e9, whence, cost)}"
            + (f"; one shared q_hs at the best placement would give {vs}." if vs else ".")
        )
    else:
        out[0] += (
            f": {pct_text(lk.crossing_share)} of batches cross nodes, keeping the {s.link_bytes_s / 1e9:.3g} "
            f"GB/s link ({whence}) {pct_text(lk.link_util)} busy, its capacity {bps_text(lk.cap_link_bps)} "
            f"b/s; the link costs {cost:.1f}% against a free one."
        )
        if vs:
            out.append(f"one pipeline per node at {label} would give {vs}.")
    logged = lk.bps_logged_place
    if math.isfinite(logged) and lk.logged_placement != lk.placement_text:
        out.append(
            f"the log ran {label} as {lk.logged_placement}: {bps_text(logged)} b/s projected there; "
            f"the placement above gives {signed_pct(100 * (r.bps / logged - 1))}."
        )
    return out


def _local_sync_text(fit: PipelineFit, lk: LinkRow, gbytes_s: float, whence: str, cost: float) -> str:
    """What the link carries for node-local pipelines: the drafters' sync, or why none is counted."""
    if not fit.sync.bytes_per_sync and not fit.source.logged:
        return "bare numbers give no bytes for the drafters' sync, so nothing is counted on the link"
    if fit.sync.sync_every <= 0:
        return "the log's drafters do not sync (sync_every 0), so nothing is counted on the link"
    if not fit.sync.bytes_per_sync:
        return "the log's sync events carry no bytes, so the sync's time on the link is not counted"
    return (
        f"only the drafters' sync crosses the {gbytes_s:.3g} GB/s link ({whence}), "
        f"{pct_text(lk.link_util)} busy, costing {cost:.1f}% against a free link"
    )


def _scaling_basis(fit: PipelineFit, m: int, share: float) -> str:
    """The per-consumer scaling ``share`` at ``m`` consumers and where it comes from: fitted where
    logged sync events measured the collective, from the given sync time (bare numbers), else
    assumed, with why: no log (bare numbers), the consumer counts the logs ran, or (at a count a
    log ran) no sync events, so a lone consumer's rate is not measured. Every split's scaling
    rests on the same sync fit, so one table never says "fitted" and "assumed" of the same share."""
    c = fit.roles[1]
    if fit.sync.measured:
        return f"{pct_text(share)}, from the given sync time" if not fit.source.logged else f"fitted {pct_text(share)}"
    if not fit.source.logged:
        return f"assumed {pct_text(share)}, not measured: no log, and no sync time was given"
    logged = sorted({o.roles.get(c, 0) for o in fit.observed})
    if m in logged:
        return f"assumed {pct_text(share)}, not measured: no 'sync' events were logged"
    ran = " and ".join(role_count(x, c) for x in logged)
    return f"assumed {pct_text(share)}, not measured: the log{'s' if len(fit.observed) > 1 else ''} ran {ran}"


def _outside_range(fit: PipelineFit, role: str, factor: float) -> str:
    """Where a capacity threshold lies outside what is known of a ranged capacity, say so."""
    rf = fit.producer if role == fit.producer.role else fit.consumer
    if not rf.ranged:
        return ""
    lo, hi = rf.mu_range_bps
    mu = rf.mu_bps * factor
    given = "given" if rf.basis is Basis.GIVEN else "known"
    if mu < lo * (1 - 1e-9):
        return " (below its bound, so not expected)" if not math.isfinite(hi) else f" (below the {given} range)"
    if mu > hi * (1 + 1e-9):
        return f" (above the {given} range)"
    return " (inside what is known of it)"


def _scaling_lines(d: Decision, fit: PipelineFit) -> list[str]:
    """The per-consumer scaling ties' sentences: where the scaling of every split of several
    consumers, alike, ends the pick's lead over every other split."""
    c, pick = d.settings.consumer, d.recommended
    span = f"{SCALING_RANGE[0]:.0%} to {SCALING_RANGE[1]:.0%}"
    out = []
    for tie in d.sensitivity.scaling:
        subject = split_label(*tie.subject)
        fitted = _scaling_basis(fit, tie.subject[1], tie.fitted)
        if tie.scaling is None or tie.rival is None:
            why = (
                f"; {subject} is {tie.subject_bottleneck}-bound even with perfect {c} scaling"
                if subject != pick
                else ""
            )
            out.append(f"per-{c} scaling of {subject}: no value from {span} changes the choice ({fitted}){why}.")
            continue
        keeps = "at least" if tie.leads_below else "less than"
        out.append(
            f"each of the {role_count(tie.subject[1], c)} of {subject} (and of every split with several) keeps {keeps} "
            f"{pct_text(tie.scaling)} of a lone {c}'s rate ({fitted}): then {split_label(*tie.rival)} beats {pick}."
        )
    return out


def holds_unless(decision: Decision, fit: PipelineFit) -> list[str]:
    """What the verdict depends on: the capacity thresholds and per-consumer scaling ties of the
    decision's sensitivity (`advisor.project.sensitivity`), each where the pick's lead over every
    other split ends, naming the split that then matches it; each scaling says whether the logs
    measured it or it is assumed, and each capacity what it rests on (fitted from steps, measured
    from rates, given, a bound). Where the pick rests on the odds (its expected rate leads while the
    runner-up's point projection is the higher), the first line says so and the capacity
    thresholds say where the point projections meet.
    """
    d = decision
    rests = {
        rf.role: (
            "the given range's middle"
            if rf.ranged and rf.basis is Basis.GIVEN
            else "the known range's middle"
            if rf.ranged and math.isfinite(rf.mu_range_bps[1])
            else rf.basis.short()
        )
        for rf in (fit.producer, fit.consumer)
    }
    out = []
    span = f"x{ROBUST_RANGE[0]:g} to x{ROBUST_RANGE[1]:g}"
    pick, rival = d.rows[d.recommended], d.rows.get(d.runner_up)  # no runner-up: None
    on_odds = rival is not None and rival.bps > pick.bps
    if on_odds:
        out.append(
            f"the odds change: {d.recommended} is picked for its expected rate over the draws (the odds "
            f"above), while at the point projections {d.runner_up} leads ({bps_text(rival.bps)} against "
            f"{bps_text(pick.bps)} b/s); below, where the point projections would meet."
        )
    for th in d.sensitivity.thresholds:
        if th.factor is None:
            rest = rests[th.role]
            of = {"fitted": "the fit", "measured": "the measured value", "given": "the given value"}.get(rest, rest)
            out.append(f"{th.role} capacity: no value from {span} of {of} changes the choice.")
            continue
        word = "higher" if th.factor > 1 else "lower"
        gpus = th.workers * d.settings.gpus_per_worker[0 if th.role == d.settings.producer else 1]
        other = split_label(*th.rival) if th.rival else d.runner_up
        then = (
            f"the point projections of {other} and {d.recommended} then meet"
            if on_odds
            else f"{other} then matches {d.recommended}"
        )
        out.append(
            f"{th.role} capacity is {abs(th.factor - 1):.1%} {word} than {rests[th.role]} "
            f"({bps_text(th.factor * th.capacity_bps)} b/s on {d.settings.units(gpus)}, not "
            f"{bps_text(th.capacity_bps)}): {then}{_outside_range(fit, th.role, th.factor)}."
        )
    out.extend(_scaling_lines(d, fit))
    return out


def queue_text(q: QueueAdvice) -> str:
    """The queue advice at the recommended split (`advisor.project.queues`)."""
    label = split_label(*q.split)
    mem = f" (+{q.extra_bytes / 2**30:.1f} GiB for {q.doubled_cap - q.cap} more slots)" if q.extra_bytes else ""
    if q.bps <= 0:
        return f"q_hs at {q.cap}: no throughput is projected at {label}, so no queue advice."
    if q.deepen:
        return (
            f"deepen q_hs from {q.cap} to {q.doubled_cap} at {label}: {signed_pct(q.gain_pct)} throughput{mem}; "
            f"x4 would give {signed_pct(q.quad_gain_pct)}."
        )
    half = f"halving it loses {q.loss_pct_half:.1f}%" if round(q.loss_pct_half, 1) > 0 else "halving it loses nothing"
    return (
        f"keep q_hs at {q.cap} at {label}: doubling it gains {signed_pct(q.gain_pct)}{mem}, {half}; "
        f"the steady rate is set by capacity, not by buffering."
    )
