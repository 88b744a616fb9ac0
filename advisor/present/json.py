"""The ``--json`` document of an `~advisor.advice.Advice`: layout only, from its records.

``advice_json(adv)`` is the document (``schema`` `JSON_SCHEMA_VERSION`; CHANGELOG.md says what each
version added): the observed split, every split of the table (`split_json`, the one conversion of
a row, so the splits, the judged split and the runner-up agree), the recommendation in words
(`~advisor.advice.Recommendation`), the queue advice, the caveats and what each role's capacity
rests on. Floats are rounded by `num` (non-finite values are ``null``); the keys are the
``--json`` contract: change them only with a schema bump.
"""

from __future__ import annotations

import math
from typing import Any

from advisor.advice import Advice
from advisor.decide.probe import probe_command
from advisor.decide.reasons import queue_text

JSON_SCHEMA_VERSION = 2  # the --json document's version (2: the odds, issue 34); the log's has its own


def num(v: Any, nd: int = 4) -> Any:
    """``v`` rounded to ``nd`` decimals for the document."""
    if v is None:
        return None
    v = float(v)
    # + 0.0: a value that rounds to zero from below is 0.0, not -0.0 (a last-bit difference in a
    # lead of nothing must not print as a sign)
    return round(v, nd) + 0.0 if math.isfinite(v) else None


def split_json(adv: Advice, label: str) -> dict[str, Any]:
    """One split of the table as the JSON's split object, from its record (`Advice.rows`)."""
    r = adv.rows[label]
    pr, cr = r.producer, r.consumer
    p, c = pr.role, cr.role
    caps = {p: num(pr.cap_bps), c: num(cr.cap_bps), "loader": num(r.cap_loader_bps)}
    out = {
        "roles": {p: pr.workers, c: cr.workers},
        "bps": num(r.bps),
        "tok_s": num(r.tok_s, 1),
        "bps_low": num(r.bps_low),
        "bps_high": num(r.bps_high),
        "bps_high_open": r.bps_high_open,
        "efficiency": num(r.efficiency),
        "gpu_util": num(r.gpu_util),
        "bottleneck": r.bottleneck,
        "eta_s": num(r.eta_s, 0),
        "bound_bps": num(r.bound_bps),
        "capacities_bps": {k: v for k, v in caps.items() if v is not None},
        "observed": r.observed,
        f"{p}_blocked": num(pr.wait_share),
        f"{c}_starved": num(cr.wait_share),
        "hs_mean_depth": num(r.hs_mean_depth, 2),
        "method": r.method,
    }
    if r.observed and num(r.observed_bps) is not None:
        out["observed_bps"] = num(r.observed_bps)
    if r.bps_exact is not None:
        out["bps_exact"] = num(r.bps_exact)
    o = adv.decision.odds.of(label)
    out.update({"p_best": num(o.p_best), "p_top": num(o.p_top), "expected_regret_pct": num(o.regret_pct, 2)})
    if pr.gpus is not None and cr.gpus is not None:  # GPUs per role, and per engine
        out["gpus_by_role"] = {p: pr.gpus, c: cr.gpus}
        out["gpus_per_worker"] = {p: pr.gpus_per_worker, c: cr.gpus_per_worker}
    lk = r.link
    if lk is not None and pr.engines_by_node is not None and cr.engines_by_node is not None:  # across nodes
        out["placement"] = [{p: a, c: b} for a, b in zip(pr.engines_by_node, cr.engines_by_node)]
        out["placement_text"] = lk.placement_text
        out["layout"] = lk.layout
        out["other_layout_bps"] = num(lk.other_layout_bps)
        out["link"] = {
            "cap_bps": num(lk.cap_link_bps),
            "util": num(lk.link_util),
            "crossing_share": num(lk.crossing_share),
            "hs_share": num(lk.hs_share),
            "sync_share": num(lk.sync_share),
        }
    return out


def probe_json(adv: Advice) -> dict[str, Any] | None:
    """The best candidate probe (`advisor.decide.probe`): the split it measures, the splits it
    runs, seconds at each (``rounds`` segments of ``segment_seconds``), GPU-hours, whether it is
    worth its cost, and the ``dflash-train`` command that runs it at that cost.
    """
    pr = adv.decision.probe
    if pr is None:
        return None
    return {
        "split": split_json(adv, pr.split)["roles"],
        "splits": [split_json(adv, x)["roles"] for x in pr.splits],
        "seconds": num(pr.seconds_each, 0),
        "segment_seconds": num(pr.segment_s, 0),
        "rounds": pr.rounds,
        "command": probe_command(pr, adv.settings.gpus_per_worker[0]),
        "gpu_hours": num(pr.gpu_hours, 3),
        "worth_it": pr.worth_it,
        "regret_now_pct": num(pr.regret_now_pct, 2),
        "regret_after_pct": num(pr.regret_after_pct, 2),
    }


def capacity_basis(adv: Advice) -> dict[str, Any]:
    """What each role's capacity rests on (`advisor.model.params.Basis`), with the known range
    of the pool's capacity at the observed split.
    """
    ob = adv.fit.observed[0]
    out = {}
    for rf in (adv.fit.producer, adv.fit.consumer):
        n = ob.roles.get(rf.role, 0)
        lo, hi = rf.mu_range_bps if rf.ranged else (rf.mu_bps, rf.mu_bps)
        out[rf.role] = {"kind": rf.basis.value, "low_bps": num(lo * n), "high_bps": num(hi * n)}
    return out


def _recommendation(adv: Advice) -> dict[str, Any]:
    """The JSON's ``recommendation``: the decision, its words and what it compared."""
    d, rec, m = adv.decision, adv.recommendation, adv.decision.margin
    return {
        "roles": dict(rec.roles),
        "verdict": rec.verdict,
        "reasons": list(rec.reasons),
        "holds_unless": list(rec.holds_unless),
        "gain_pct": num(d.gain_pct, 2),
        "rule": d.rule,
        "provisional": d.evidence.thin,
        "action": d.action.value,
        "p_best": num(rec.p_best),
        "expected_gain_pct": num(rec.expected_gain_pct, 2),
        "expected_regret_pct": num(rec.expected_regret_pct, 2),
        "close_call": rec.close_call,
        "probe": probe_json(adv),
        "judged": split_json(adv, d.described),
        "runner_up": (
            {
                "roles": split_json(adv, d.runner_up)["roles"],
                "bps": num(adv.rows[d.runner_up].bps),
                "bottleneck": adv.rows[d.runner_up].bottleneck,
            }
            if d.runner_up
            else None
        ),
        "margin": (
            {
                "stable": m.stable,
                "best_low": num(m.best_low),
                "runner_up_high": num(m.runner_up_high),
                "best": split_json(adv, m.higher)["roles"],
                "separated": m.separated,
                "lead_low_pct": num(m.lead_low_pct, 2),
                "lead_high_pct": num(m.lead_high_pct, 2),
            }
            if m
            else None
        ),
        "settings": adv.settings.to_json(),
    }


def advice_json(adv: Advice) -> dict[str, Any]:
    """The `dflash-advise --json` document.

    Args:
        adv: the advice to lay out.

    Returns:
        The document as plain Python objects (``json.dumps`` writes it).
    """
    ob, d = adv.observed, adv.decision
    return {
        "schema": JSON_SCHEMA_VERSION,
        "run": adv.run,
        "gpus": adv.gpus,
        "observed": {
            "roles": dict(ob.roles),
            "bps": num(ob.bps),
            "tok_s": num(ob.tok_s, 1),
            "efficiency": num(ob.efficiency),
            "bottleneck": ob.bottleneck,
            "steady_from_s": num(ob.steady_from_s, 1),
            "capacities_bps": {k: num(v) for k, v in ob.capacities_bps.items()},
            **(
                {"projected_bps": num(ob.projected_bps), "method": ob.method, "miss_pct": num(ob.miss_pct, 2)}
                if ob.miss_pct is not None
                else {}
            ),
        },
        "splits": [split_json(adv, label) for label in adv.rows],
        "recommendation": _recommendation(adv),
        "queues": (
            {"hs": {"cap": d.queue.cap, "advice": queue_text(d.queue), "gain_pct": num(d.queue.gain_pct, 2)}}
            if d.queue is not None
            else {}
        ),
        "warnings": list(adv.warnings),
        "capacity_basis": capacity_basis(adv),
        **({"gate": dict(adv.gate)} if adv.gate else {}),
    }
