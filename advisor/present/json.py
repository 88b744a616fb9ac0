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
from collections.abc import Mapping
from typing import Any

from advisor.advice import Advice
from advisor.decide.reasons import provisional, queue_text

JSON_SCHEMA_VERSION = 2  # the --json document's version (2: the odds, issue 34); the log's has its own


def num(v: Any, nd: int = 4) -> Any:
    """``v`` rounded to ``nd`` decimals, None where it is None or not finite."""
    if v is None:
        return None
    v = float(v)
    # + 0.0: a value that rounds to zero from below is 0.0, not -0.0 (a last-bit difference in a
    # lead of nothing must not print as a sign)
    return round(v, nd) + 0.0 if math.isfinite(v) else None


def table_rows(adv: Advice) -> dict[str, dict[str, Any]]:
    """The table's rows as dicts, by label: made once per document, not a Series per row."""
    return adv.splits.to_dict("index")


def split_json(adv: Advice, label: str, rows: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """One row of the table as the JSON's split object.

    Args:
        adv: the advice whose table holds the row.
        label: the split's label ("7-1").
        rows: `table_rows` of ``adv``, where the caller converts many rows.

    Returns:
        The split object (the keys of `advisor.project.table`'s columns where both have them).
    """
    p, c = adv.roles
    r = (rows if rows is not None else table_rows(adv))[label]
    out = {
        "roles": {p: int(r[f"n_{p}"]), c: int(r[f"n_{c}"])},
        "bps": num(r["bps"]),
        "tok_s": num(r["tok_s"], 1),
        "bps_low": num(r["bps_low"]),
        "bps_high": num(r["bps_high"]),
        "bps_high_open": bool(r.get("bps_high_open", False)),
        "efficiency": num(r["efficiency"]),
        "gpu_util": num(r["gpu_util"]),
        "bottleneck": str(r["bottleneck"]),
        "eta_s": num(r["eta_s"], 0),
        "bound_bps": num(r["bound_bps"]),
        "capacities_bps": {k: num(r[f"cap_{k}_bps"]) for k in (p, c, "loader") if num(r[f"cap_{k}_bps"]) is not None},
        "observed": bool(r["observed"]),
        f"{p}_blocked": num(r[f"{p}_blocked"]),
        f"{c}_starved": num(r[f"{c}_starved"]),
        "hs_mean_depth": num(r["hs_mean_depth"], 2),
        "method": str(r["method"]),
    }
    if r["observed"] and num(r["observed_bps"]) is not None:
        out["observed_bps"] = num(r["observed_bps"])
    if "bps_exact" in r:
        out["bps_exact"] = num(r["bps_exact"])
    if adv.decision.odds is not None:
        o = adv.decision.odds.of(label)
        out.update({"p_best": num(o.p_best), "p_top": num(o.p_top), "expected_regret_pct": num(o.regret_pct, 2)})
    out.update(engine_json(r, p, c))
    return out


def engine_json(r: Mapping[str, Any], p: str, c: str) -> dict[str, Any]:
    """A row's GPUs per role and, across nodes, its placement and link (additive JSON fields)."""
    out: dict[str, Any] = {}
    if f"gpus_{p}" in r:
        out["gpus_by_role"] = {p: int(r[f"gpus_{p}"]), c: int(r[f"gpus_{c}"])}
        out["gpus_per_worker"] = {p: int(r[f"gpus_per_{p}"]), c: int(r[f"gpus_per_{c}"])}
    if "placement" in r and isinstance(r["placement"], str):
        out["placement"] = [{p: int(a), c: int(b)} for a, b in zip(r[f"nodes_{p}"], r[f"nodes_{c}"])]
        out["placement_text"] = r["placement"]
        out["layout"] = r["layout"]
        out["other_layout_bps"] = num(r["bps_other_layout"])
        out["link"] = {
            "cap_bps": num(r["cap_link_bps"]),
            "util": num(r["link_util"]),
            "crossing_share": num(r["crossing_share"]),
            "hs_share": num(r["link_hs_share"]),
            "sync_share": num(r["link_sync_share"]),
        }
    return out


def probe_json(adv: Advice, rows: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any] | None:
    """The best candidate probe (`advisor.decide.probe`): the split it measures, the splits it
    runs, seconds of each, GPU-hours, whether it is worth its cost; None without one."""
    pr = adv.decision.probe
    if pr is None:
        return None
    rows = rows if rows is not None else table_rows(adv)
    return {
        "split": split_json(adv, pr.split, rows)["roles"],
        "splits": [split_json(adv, x, rows)["roles"] for x in pr.splits],
        "seconds": num(pr.seconds_each, 0),
        "gpu_hours": num(pr.gpu_hours, 3),
        "worth_it": pr.worth_it,
        "regret_now_pct": num(pr.regret_now_pct, 2),
        "regret_after_pct": num(pr.regret_after_pct, 2),
    }


def capacity_basis(adv: Advice) -> dict[str, Any]:
    """What each role's capacity rests on (`advisor.model.params.Basis`), with the known range
    of the pool's capacity at the observed split (``high_bps`` None: open, a lower bound)."""
    ob = adv.fit.observed[0]
    out = {}
    for rf in (adv.fit.producer, adv.fit.consumer):
        n = ob.roles.get(rf.role, 0)
        lo, hi = rf.mu_range_bps if rf.ranged else (rf.mu_bps, rf.mu_bps)
        out[rf.role] = {"kind": rf.basis.value, "low_bps": num(lo * n), "high_bps": num(hi * n)}
    return out


def _recommendation(adv: Advice, rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON's ``recommendation``: the decision, its words and what it compared."""
    d, rec, m = adv.decision, adv.recommendation, adv.decision.margin
    return {
        "roles": dict(rec.roles),
        "verdict": rec.verdict,
        "reasons": list(rec.reasons),
        "holds_unless": list(rec.holds_unless),
        "gain_pct": num(d.gain_pct, 2),
        "rule": d.rule,
        "provisional": provisional(d, adv.fit),
        "action": (d.action or d.verdict).value,
        "p_best": num(rec.p_best),
        "expected_gain_pct": num(rec.expected_gain_pct, 2),
        "expected_regret_pct": num(rec.expected_regret_pct, 2),
        "close_call": rec.close_call,
        "probe": probe_json(adv, rows),
        "judged": split_json(adv, d.described, rows),
        "runner_up": (
            {
                "roles": split_json(adv, d.runner_up, rows)["roles"],
                "bps": num(adv.splits.at[d.runner_up, "bps"]),
                "bottleneck": str(adv.splits.at[d.runner_up, "bottleneck"]),
            }
            if d.runner_up
            else None
        ),
        "margin": (
            {
                "stable": m.stable,
                "best_low": num(m.best_low),
                "runner_up_high": num(m.runner_up_high),
                "best": split_json(adv, m.higher, rows)["roles"],
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
    rows = table_rows(adv)
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
        },
        "splits": [split_json(adv, str(lbl), rows) for lbl in adv.splits.index],
        "recommendation": _recommendation(adv, rows),
        "queues": (
            {"hs": {"cap": d.queue.cap, "advice": queue_text(d.queue), "gain_pct": num(d.queue.gain_pct, 2)}}
            if d.queue is not None
            else {}
        ),
        "warnings": list(adv.warnings),
        "capacity_basis": capacity_basis(adv),
        **({"gate": dict(adv.gate)} if adv.gate else {}),
    }
