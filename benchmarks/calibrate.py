"""Calibration of the advisor's verdicts on the repository's real sweeps (issue 34, item 5):
leave-one-out, each log and each pair of logs against the other splits' measured rates.

Sources and truth are `benchmarks/validate_real.py`'s: every sweep folder of
``fixtures/sweep/`` whose ``sweep.json`` names ``--gpus`` G and that ran two or more splits; every
log alone, and the first repeat of every two splits together; a split's truth is the mean of its
repeats' measured steady rates (``observed.bps`` of each log advised alone). Each source is
advised as a user would (``dflash-advise advise LOGS --gpus G --json``) with the advisor of the
tree ``--root`` (default: this one), and scored:

- regret of the recommended split: ``1 - truth[pick] / max(truth)``; the pick is "within" when its
  regret is at most ``TOL`` (2%, the model's resolution);
- ``recommendation.p_best`` (the stated probability that the pick is within 2% of the best), when
  the advisor states one, against "within": a reliability table by decile of the stated
  probability (count, mean stated, observed share) and the Brier score, mean of
  ``(p_best - within)^2``; the same over every projected split's own ``p_best`` (each split's
  stated chance of being within 2% of the best against whether it is);
- share of verdicts that name an action (any verdict but ``cannot-tell``);
- of the picks more than 2% below the best (the misses), how many name a probe (``recommendation.probe``)
  that runs a split within 2% of the best: the measurement the advice would buy settles them;
- interval coverage: of the splits a source did not log, the share of their measured repeat rates
  inside the projection's 95% interval ``[bps_low, bps_high]``, and the median width
  ``(bps_high - bps_low) / bps``, per sweep; in ``--json`` each rate's ``used`` share of its side
  of the interval (``|ln(v / bps)| / |ln(end / bps)|``, inside iff <= 1) and the split's
  ``distance`` in target engines from the nearest logged split;
- the self-check (issue 51): of the logs advised alone, the share whose projection of their own
  split (the row's ``bps``, by the method its rivals share) lies within ``SELF_TOL`` (5%) of the
  rate the log measured.

A reference beside the advisor, the regret of measuring instead of projecting: from each sweep
whose splits all have two or more repeats, and each repeat index r, the split whose r-th repeat
measured highest (an engineer who ran every split once), scored two ways: against the same truth
as the advisor (the mean of all repeats, r included: flattering to the reference) and against the
mean of the other repeats (held out: a noisier truth). Its regrets show how much run-to-run
spread these truths carry: where it loses 10%, a spread of that size sits in the truth itself.

Each sweep's ``machines``: the boot ids its ``sweep.json`` names (`machines`); the report names a
sweep whose repeats came from two machines or more, since two machines of one kind can rank the
splits differently (BENCHMARKS.md 19.17).

The acceptance lines (issue 34): an action on >= 90% of sources, mean regret <= 2% and max <= 10%,
every decile with >= 10 cases within 10 points of its observed share, coverage 90-97% on every
sweep.

    python3 benchmarks/calibrate.py                       # Markdown tables to stdout
    python3 benchmarks/calibrate.py --json out.json       # and every case as JSON
    python3 benchmarks/calibrate.py --root /path/to/tree --sweep ded16 --no-pairs
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_real  # a script beside this one

ROOT = validate_real.ROOT
SWEEP_DIR = ROOT / "fixtures" / "sweep"
TOL = 0.02  # within the model's resolution of the best split
DECILE_MIN_CASES = 10  # deciles with fewer cases are reported, not judged
DECILE_MAX_GAP = 0.10  # stated against observed, judged deciles
ACTION_MIN = 0.90
MEAN_REGRET_MAX = 0.02
MAX_REGRET_MAX = 0.10
COVERAGE_RANGE = (0.90, 0.97)
SELF_TOL = 0.05  # the observed split's projection within 5% of its log's measured rate (issue 51)
NO_ACTION = "cannot-tell"


def real_sweeps(folder: Path = SWEEP_DIR) -> dict[str, int]:
    """Sweep folders with a ``sweep.json`` naming ``--gpus`` and logs at two or more splits: name -> G."""
    out = {}
    for d in sorted(p for p in folder.iterdir() if (p / "sweep.json").is_file()):
        argv = json.loads((d / "sweep.json").read_text()).get("argv", [])
        if "--gpus" not in argv or len(validate_real.sweep_logs(d)) < 2:
            continue
        out[d.name] = int(argv[argv.index("--gpus") + 1])
    return out


def machines(folder: Path) -> list[str]:
    """The machines a sweep folder's runs came from, by boot id, where its ``sweep.json`` names them
    (``machine``, and each ``later`` record's; `benchmarks/sweep.py` writes it): a truth that
    pools two machines' repeats mixes two truths (BENCHMARKS.md 19.17)."""
    meta = json.loads((folder / "sweep.json").read_text())
    found = [meta.get("machine"), *(x.get("machine") for x in meta.get("later", []))]
    return sorted({m["boot_id"] for m in found if isinstance(m, dict) and m.get("boot_id")})


def _key(roles: dict) -> tuple[int, int]:
    return int(roles["target"]), int(roles["drafter"])


def _used(v: float, x: float, lo: float, hi: float) -> float:
    """How much of its side of the interval a measured rate ``v`` uses, in log b/s (1 at the end:
    inside iff <= 1)."""
    end = hi if v >= x else lo
    return abs(math.log(v / x)) / abs(math.log(end / x)) if end > 0 and end != x else math.inf


def score(out: dict, logged: set[tuple[int, int]], truth: dict, measured: dict) -> dict:
    """One source's advice against the sweep's truth (module docstring)."""
    rec = out.get("recommendation") or {}
    best = max(truth.values())
    pick = _key(rec["roles"]) if rec.get("roles") else None
    regret = 1.0 - truth[pick] / best if pick in truth else None
    probed = [_key(r) for r in (rec.get("probe") or {}).get("splits", [])]
    splits = []
    for s in out.get("splits", []):
        k = _key(s["roles"])
        if k not in truth:
            continue
        row = {
            "split": f"{k[0]}-{k[1]}",
            "p_best": s.get("p_best"),
            "within": truth[k] >= (1.0 - TOL) * best,
            "logged": k in logged,
        }
        if not row["logged"] and s.get("bps_low") is not None and s.get("bps"):
            row["inside"] = [s["bps_low"] <= v <= s["bps_high"] for v in measured[k]]
            row["width"] = (s["bps_high"] - s["bps_low"]) / s["bps"]
            row.update(bps=s["bps"], low=s["bps_low"], high=s["bps_high"], measured=measured[k])
            row["used"] = [_used(v, s["bps"], s["bps_low"], s["bps_high"]) for v in measured[k]]
            row["distance"] = min(abs(k[0] - n) for n, _ in logged)
        if row["logged"] and s.get("observed_bps") and s.get("bps"):
            row["self_gap"] = s["bps"] / s["observed_bps"] - 1.0  # the fit's projection of its own split
        splits.append(row)
    return {
        "pick": f"{pick[0]}-{pick[1]}" if pick else None,
        "verdict": rec.get("verdict"),
        "p_best": rec.get("p_best"),
        "expected_regret_pct": rec.get("expected_regret_pct"),
        "expected_gain_pct": rec.get("expected_gain_pct"),
        "close_call": rec.get("close_call"),
        "probe": rec.get("probe"),
        "probe_runs_best": any(truth.get(k, 0.0) >= (1.0 - TOL) * best for k in probed) if probed else None,
        "regret": regret,
        "within": None if regret is None else regret <= TOL,
        "splits": splits,
    }


def run_sweep(
    name: str, gpus: int, pool: ThreadPoolExecutor, *, root: Path = ROOT, pairs: bool = True, folder: Path = SWEEP_DIR
) -> dict:
    """Advise every source of one sweep and score it. Returns the sweep's truth and its cases."""
    by_split = validate_real.sweep_logs(folder / name)
    logs = sorted(p for v in by_split.values() for p in v)

    def advise(paths):
        return validate_real.advise_json(paths, "--gpus", str(gpus), root=root)

    own = dict(zip(logs, pool.map(lambda p: advise([p]), logs)))
    measured, truth = validate_real.measured_truth(by_split, own)
    srcs = [[p] for p in logs]
    outs = [own[p] for p in logs]
    if pairs:
        pair_srcs = validate_real.pair_sources(by_split)
        srcs += pair_srcs
        outs += list(pool.map(advise, pair_srcs))
    cases = []
    for src, out in zip(srcs, outs):
        logged = {validate_real.parse(p)[:2] for p in src}
        cases.append({"sweep": name, "source": [p.name for p in src], **score(out, logged, truth, measured)})
    return {
        "name": name,
        "gpus": gpus,
        "machines": machines(folder / name),
        "truth": {f"{n}-{m}": v for (n, m), v in truth.items()},
        "measured": {f"{n}-{m}": v for (n, m), v in measured.items()},
        "cases": cases,
    }


def reliability(pairs: list[tuple[float, bool]]) -> list[dict]:
    """Stated probability against outcome by decile ([0, 0.1), ..., [0.9, 1.0]): count, mean
    stated, observed share, and whether the decile is judged (>= DECILE_MIN_CASES cases) and
    within DECILE_MAX_GAP."""
    rows = []
    for d in range(10):
        inside = [(p, w) for p, w in pairs if min(int(p * 10), 9) == d]
        if not inside:
            continue
        stated = statistics.fmean(p for p, _ in inside)
        observed = sum(w for _, w in inside) / len(inside)
        judged = len(inside) >= DECILE_MIN_CASES
        rows.append(
            {
                "decile": d,
                "count": len(inside),
                "stated": stated,
                "observed": observed,
                "judged": judged,
                "ok": (not judged) or abs(stated - observed) <= DECILE_MAX_GAP,
            }
        )
    return rows


def brier(pairs: list[tuple[float, bool]]) -> float | None:
    """Mean of (stated - outcome)^2 (None without cases)."""
    return statistics.fmean((p - float(w)) ** 2 for p, w in pairs) if pairs else None


def coverage(cases: list[dict]) -> dict:
    """Share of the unlogged splits' measured repeat rates inside their 95% interval, and the
    intervals' median width."""
    each = [x for c in cases for s in c["splits"] if "inside" in s for x in s["inside"]]
    widths = [s["width"] for c in cases for s in c["splits"] if "width" in s]
    return {
        "rates": len(each),
        "inside": sum(each),
        "coverage": sum(each) / len(each) if each else None,
        "median_width": statistics.median(widths) if widths else None,
    }


def _regrets(cases: list[dict]) -> dict:
    r = [c["regret"] for c in cases if c["regret"] is not None]
    return {"mean_regret": statistics.fmean(r) if r else None, "max_regret": max(r) if r else None, "scored": len(r)}


def reference(sweeps: list[dict]) -> dict:
    """The measure-every-split-once picker of the module docstring: per sweep with two or more
    repeats of every split and per repeat index r, the pick (highest r-th repeat) and its regret
    against the mean of all repeats (``in_sample``) and against the mean of the others
    (``held_out``); with the mean and max of each and the count within ``TOL``.

    Args:
        sweeps: `run_sweep`'s records (``measured``: split -> repeat rates; ``truth``: split -> mean).

    Returns:
        {"cases": [{"sweep", "repeat", "pick", "in_sample", "held_out"}], "in_sample": {...},
        "held_out": {...}}, each summary {"mean_regret", "max_regret", "within", "scored"}.
    """
    cases = []
    for sw in sweeps:
        measured = sw.get("measured", {})
        repeats = min((len(v) for v in measured.values()), default=0)
        if len(measured) < 2 or repeats < 2:
            continue
        for r in range(repeats):
            pick = max(measured, key=lambda k: measured[k][r])
            held = {k: statistics.fmean(v[:r] + v[r + 1 :]) for k, v in measured.items()}
            cases.append(
                {
                    "sweep": sw["name"],
                    "repeat": r,
                    "pick": pick,
                    "in_sample": 1.0 - sw["truth"][pick] / max(sw["truth"].values()),
                    "held_out": 1.0 - held[pick] / max(held.values()),
                }
            )

    def side(key: str) -> dict:
        r = [c[key] for c in cases]
        return {
            "mean_regret": statistics.fmean(r) if r else None,
            "max_regret": max(r) if r else None,
            "within": sum(x <= TOL for x in r),
            "scored": len(r),
        }

    return {"cases": cases, "in_sample": side("in_sample"), "held_out": side("held_out")}


def summarize(sweeps: list[dict]) -> dict:
    """Every number of the report, from the scored cases (module docstring)."""
    cases = [c for sw in sweeps for c in sw["cases"]]
    regrets = [c["regret"] for c in cases if c["regret"] is not None]
    stated = [(c["p_best"], c["within"]) for c in cases if c["p_best"] is not None and c["within"] is not None]
    split_stated = [(s["p_best"], s["within"]) for c in cases for s in c["splits"] if s["p_best"] is not None]
    actions = sum(c["verdict"] != NO_ACTION for c in cases)
    own = [
        abs(s["self_gap"]) <= SELF_TOL
        for c in cases
        if len(c.get("source", ())) == 1
        for s in c["splits"]
        if "self_gap" in s
    ]
    misses = [c for c in cases if c["within"] is False]
    per_sweep = {
        sw["name"]: {
            "gpus": sw["gpus"],
            "machines": len(sw.get("machines", [])),
            "sources": len(sw["cases"]),
            **coverage(sw["cases"]),
            "actions": sum(c["verdict"] != NO_ACTION for c in sw["cases"]),
            **_regrets(sw["cases"]),
        }
        for sw in sweeps
    }
    rel = reliability(stated)
    checks = {
        "action_share": (actions / len(cases) >= ACTION_MIN) if cases else None,
        "mean_regret": (statistics.fmean(regrets) <= MEAN_REGRET_MAX) if regrets else None,
        "max_regret": (max(regrets) <= MAX_REGRET_MAX) if regrets else None,
        "deciles": all(r["ok"] for r in rel) if rel else None,
        "coverage": all(
            COVERAGE_RANGE[0] <= v["coverage"] <= COVERAGE_RANGE[1]
            for v in per_sweep.values()
            if v["coverage"] is not None
        ),
    }
    return {
        "sources": len(cases),
        "actions": actions,
        "action_share": actions / len(cases) if cases else None,
        "mean_regret": statistics.fmean(regrets) if regrets else None,
        "max_regret": max(regrets) if regrets else None,
        "within": sum(bool(c["within"]) for c in cases),
        "misses": len(misses),
        "misses_probe_runs_best": sum(bool(c.get("probe_runs_best")) for c in misses),
        "scored": len(regrets),
        "stated": len(stated),
        "reliability": rel,
        "brier": brier(stated),
        "split_reliability": reliability(split_stated),
        "split_brier": brier(split_stated),
        "self_check": sum(own) / len(own) if own else None,
        "self_checked": len(own),
        "verdicts": {v: sum(c["verdict"] == v for c in cases) for v in sorted({str(c["verdict"]) for c in cases})},
        "per_sweep": per_sweep,
        "coverage": coverage(cases),
        "reference": reference(sweeps),
        "checks": checks,
    }


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}%"


def rel_table(rows: list[dict]) -> list[str]:
    out = [
        "| stated p_best | cases | mean stated | observed within 2% | gap | judged |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        d = r["decile"]
        gap = 100 * (r["observed"] - r["stated"])
        verdict = ("ok" if r["ok"] else "OFF") if r["judged"] else f"< {DECILE_MIN_CASES} cases"
        out.append(
            f"| {d / 10:.1f}-{(d + 1) / 10:.1f} | {r['count']} | {_pct(r['stated'])} | {_pct(r['observed'])} | "
            f"{gap:+.1f} pts | {verdict} |"
        )
    return out


def render(summary: dict, code: str) -> str:
    """The report as Markdown."""
    s = summary
    lines = [
        f"Code: {code}. {s['sources']} sources (every log alone and every pair of splits' first repeats).\n",
        (
            "| sweep | G | sources | action named | mean / max regret (picks at a measured split) "
            "| repeat rates inside the 95% interval | median width |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, v in s["per_sweep"].items():
        lines.append(
            f"| {name} | {v['gpus']} | {v['sources']} | {v['actions']}/{v['sources']} | "
            f"{_pct(v['mean_regret'])} / {_pct(v['max_regret'])} ({v['scored']}) | {_pct(v['coverage'], 0)} "
            f"({v['inside']}/{v['rates']}) | {_pct(v['median_width'])} |"
        )
    c = s["coverage"]
    lines.append(
        f"| all | | {s['sources']} | {s['actions']}/{s['sources']} | {_pct(s['mean_regret'])} / "
        f"{_pct(s['max_regret'])} ({s['scored']}) | {_pct(c['coverage'], 0)} ({c['inside']}/{c['rates']}) | "
        f"{_pct(c['median_width'])} |"
    )
    pooled = [f"{name} ({v['machines']})" for name, v in s["per_sweep"].items() if v.get("machines", 0) > 1]
    if pooled:
        lines.append(f"\nTruths pooled across machines (mixing their rankings): {', '.join(pooled)}.")
    unscored = s["sources"] - s["scored"]
    lines.append(
        "\nVerdicts: "
        + ", ".join(f"{k} {v}" for k, v in s["verdicts"].items())
        + f"; picks within 2% of the best: {s['within']}/{s['scored']}"
        + (f" ({unscored} picks at splits the sweep did not run: no regret, left out)" if unscored else "")
        + ".\n"
    )
    if s.get("self_checked"):
        lines.append(
            f"Self-check: of {s['self_checked']} logs advised alone, the projection of the log's own split is within "
            f"{SELF_TOL:.0%} of its measured rate in {_pct(s['self_check'], 0)}.\n"
        )
    if s["misses"]:
        lines.append(
            f"Picks more than 2% below the best: {s['misses']}; the probe their advice names runs a split "
            f"within 2% of the best in {s['misses_probe_runs_best']}.\n"
        )
    if s["stated"]:
        lines.append(f"Reliability of `recommendation.p_best` ({s['stated']} sources; Brier {s['brier']:.3f}):\n")
        lines += rel_table(s["reliability"])
        if s["split_reliability"]:
            n = sum(r["count"] for r in s["split_reliability"])
            lines.append(f"\nEvery split's `p_best` ({n} split projections; Brier {s['split_brier']:.3f}):\n")
            lines += rel_table(s["split_reliability"])
    else:
        lines.append("No `p_best` stated by this code: reliability and Brier not measured.")
    ref = s["reference"]
    if ref["cases"]:
        lines.append(
            "\nReference, every split measured once (the best of one repeat of each, "
            f"{ref['in_sample']['scored']} sweep-repeats):\n\n"
            "| scored against | mean regret | max regret | within 2% |\n|---|---:|---:|---:|"
        )
        truths = (("in_sample", "mean of all repeats (the advisor's truth)"), ("held_out", "the other repeats"))
        for key, label in truths:
            v = ref[key]
            lines.append(
                f"| {label} | {_pct(v['mean_regret'], 2)} | {_pct(v['max_regret'])} | {v['within']}/{v['scored']} |"
            )
    names = {
        "action_share": f"action on >= {ACTION_MIN:.0%} of sources",
        "mean_regret": f"mean regret <= {MEAN_REGRET_MAX:.0%}",
        "max_regret": f"max regret <= {MAX_REGRET_MAX:.0%}",
        "deciles": f"deciles (>= {DECILE_MIN_CASES} cases) within {DECILE_MAX_GAP * 100:.0f} points",
        "coverage": f"coverage {COVERAGE_RANGE[0]:.0%}-{COVERAGE_RANGE[1]:.0%} on every sweep",
    }
    lines.append("\n| acceptance line | state |\n|---|---|")
    for k, label in names.items():
        v = s["checks"][k]
        lines.append(f"| {label} | {'-' if v is None else ('met' if v else 'NOT met')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="tree whose advisor is run (default: this one)")
    ap.add_argument("--sweep", action="append", default=None, help="only this sweep (repeatable; default: all)")
    ap.add_argument("--no-pairs", action="store_true", help="single logs only")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--code", default=None, help="how the report names the code (default: --root)")
    ap.add_argument("--json", type=Path, default=None, help="also write the summary and every case here")
    args = ap.parse_args(argv)
    found = real_sweeps()
    unknown = [n for n in args.sweep or [] if n not in found]
    if unknown:
        ap.error(f"no real sweep named {', '.join(unknown)} (have: {', '.join(found)})")
    chosen = {n: g for n, g in found.items() if not args.sweep or n in args.sweep}
    with ThreadPoolExecutor(args.jobs) as pool:
        sweeps = [run_sweep(n, g, pool, root=args.root.resolve(), pairs=not args.no_pairs) for n, g in chosen.items()]
    summary = summarize(sweeps)
    print(render(summary, args.code or str(args.root)))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "sweeps": sweeps}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
