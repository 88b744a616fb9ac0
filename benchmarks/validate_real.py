"""Projection error on real-hardware sweeps (issue 9): the advisor's projections against what
the real trainer measured at every split, from each single log and from pairs of logs.

Sweeps (`benchmarks/sweep.py`, logs kept in ``fixtures/sweep/``):

- ``cpu32``: G = 8 on a 32-core host, splits 7-1 .. 2-6, two repeats each;
- ``cpu16``: G = 6 on a 16-core host, splits 5-1 .. 2-4, two repeats each;
- ``cpu32g12``: G = 12 on another 32-core host, splits 11-1 .. 4-8, two repeats each;
- ``ded32`` / ``ded16``: G = 8 on a 32-core host and G = 6 on a 16-core host, one split at a time
  with the rest of the host idle (the three above ran lanes side by side), two repeats each;
- ``hold16`` / ``hold16g10``: G = 8 (splits 7-1 .. 2-6) and G = 10 (9-1, 8-2, 7-3, 5-5, 3-7) on
  16-core hosts, one split at a time, two repeats each: recorded after the model's shared-host
  constants (RUN_SE, the contention prior's centre) were set from the sweeps above, as their
  held-out test (then pooled into them; BENCHMARKS.md section 9);
- ``h200x2-234m``: the 234m target on one H200 and the drafter on another, token budgets
  16384, 24576, 32768, 40960 and 49152, 16384 and 32768 repeated (the token-budget check).

Truth of a split = the mean of its repeats' measured steady rates (the advisor's own reading of
each log's steady window, ``observed.bps``); its noise = half the spread of the repeats.
For every source (one log, or two logs at different splits), the advisor (`dflash-advise
advise --json`, the user's path) projects every split of G; the error of a split is
``projected / truth - 1``; an interval "covers" a split when every repeat's measured rate lies
inside the projection's 95% interval. Reported: worst |error| per source, mean |error|,
coverage and the median interval width (high - low, as a share of the projection), and the worst
error split into the source's level at its own split and the shape across splits.

    python3 benchmarks/validate_real.py              # tables to stdout (markdown)
    python3 benchmarks/validate_real.py --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SWEEPS = {"cpu32": 8, "cpu16": 6, "cpu32g12": 12, "ded32": 8, "ded16": 6, "hold16": 8, "hold16g10": 10}
BUDGET_SWEEP = "h200x2-234m"
NAME = re.compile(r"-(\d+)x(\d+)(?:-tp\d+)?(?:-tb(\d+))?-r(\d+)\.jsonl(?:\.gz)?$")


def advise_json(paths: list[Path], *extra: str, root: Path = ROOT) -> dict:
    """`dflash-advise advise PATHS --json` (the user's path) with the advisor of the tree ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "advisor.cli.app", "advise", *map(str, paths), "--json", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return json.loads(p.stdout)


def parse(path: Path) -> tuple[int, int, int | None, int]:
    m = NAME.search(path.name)
    if not m:
        raise ValueError(f"{path}: not a sweep log name")
    return int(m[1]), int(m[2]), int(m[3]) if m[3] else None, int(m[4])


def _split_rows(out: dict) -> dict[tuple[int, int], dict]:
    return {(s["roles"]["target"], s["roles"]["drafter"]): s for s in out["splits"]}


def sweep_logs(folder: Path) -> dict[tuple[int, int], list[Path]]:
    """A sweep folder's logs by split (N target engines, M drafters), repeats in name order."""
    by_split: dict[tuple[int, int], list[Path]] = {}
    for p in sorted(folder.glob("*.jsonl.gz")):
        n, m, _tb, _r = parse(p)
        by_split.setdefault((n, m), []).append(p)
    return by_split


def pair_sources(by_split: dict[tuple[int, int], list[Path]]) -> list[list[Path]]:
    """The pairs a user could hold: the first repeat of each two splits (every log alone is the
    other kind of source)."""
    return [[by_split[a][0], by_split[b][0]] for a, b in itertools.combinations(sorted(by_split), 2)]


def measured_truth(by_split: dict, own: dict[Path, dict]) -> tuple[dict, dict]:
    """Each split's measured rates (every repeat's ``observed.bps``, the advisor's reading of
    that log's steady window) and its truth, the mean of its repeats."""
    measured = {k: [own[p]["observed"]["bps"] for p in v] for k, v in by_split.items()}
    return measured, {k: statistics.fmean(v) for k, v in measured.items()}


def sweep_table(name: str, gpus: int, pool: ThreadPoolExecutor) -> dict:
    by_split = sweep_logs(ROOT / "fixtures" / "sweep" / name)
    logs = [p for v in by_split.values() for p in v]
    # measured truth: each log's own steady rate, read by the advisor
    own = dict(zip(logs, pool.map(lambda p: advise_json([p], "--gpus", str(gpus)), logs)))
    measured, truth = measured_truth(by_split, own)
    noise = {k: (max(v) - min(v)) / 2 / truth[k] for k, v in measured.items()}
    singles = [([p], own[p]) for p in sorted(logs)]
    pair_srcs = pair_sources(by_split)
    pairs = list(zip(pair_srcs, pool.map(lambda ps: advise_json(ps, "--gpus", str(gpus)), pair_srcs)))
    return {
        "name": name,
        "gpus": gpus,
        "truth": truth,
        "measured": measured,
        "noise": noise,
        "single": [_score(src, out, truth, measured) for src, out in singles],
        "pair": [_score(src, out, truth, measured) for src, out in pairs],
    }


def _score(src: list[Path], out: dict, truth, measured) -> dict:
    rows = _split_rows(out)
    per = {}
    for k, t in truth.items():
        r = rows[k]
        inside = all(r["bps_low"] <= v <= r["bps_high"] for v in measured[k])
        per[k] = {
            "bps": r["bps"],
            "low": r["bps_low"],
            "high": r["bps_high"],
            "err": r["bps"] / t - 1.0,
            "inside": inside,
            "inside_each": [r["bps_low"] <= v <= r["bps_high"] for v in measured[k]],
            "width": (r["bps_high"] - r["bps_low"]) / r["bps"],
            "method": r.get("method"),
        }
    # the error split in two: the first source's level at its own split (another run of that split
    # measures the truth; no model can know it) and the shape, each split's projection relative to
    # that split's, against the truth's ratio (what the model gets right or wrong across splits)
    own = parse(src[0])[:2]
    level = per[own]["bps"] / truth[own] - 1.0
    shape = max(abs((v["bps"] / per[own]["bps"]) / (truth[k] / truth[own]) - 1.0) for k, v in per.items())
    return {
        "source": [p.name for p in src],
        "per_split": per,
        "level": level,
        "shape": shape,
        "worst": max(abs(v["err"]) for v in per.values()),
        "mean": statistics.fmean(abs(v["err"]) for v in per.values()),
        "recommended": tuple(out["recommendation"]["roles"][r] for r in ("target", "drafter"))
        if isinstance(out.get("recommendation"), dict) and "roles" in out["recommendation"]
        else None,
        "verdict": (out.get("recommendation") or {}).get("verdict"),
        "lead": _lead(out, truth),
        # the recommended split's measured rate below the best measured split's (0 = the best)
        "regret": _regret(out, truth),
    }


def _lead(out: dict, truth: dict) -> dict | None:
    """The recommendation's margin: the lead's 95% interval against the truth's lead."""
    rec = out.get("recommendation") or {}
    m, ru = rec.get("margin"), rec.get("runner_up")
    if not m or not ru or m.get("lead_low_pct") is None:
        return None
    hi = (m["best"]["target"], m["best"]["drafter"])
    lo = (ru["roles"]["target"], ru["roles"]["drafter"])
    if hi == lo:
        lo = (rec["roles"]["target"], rec["roles"]["drafter"])
    if hi not in truth or lo not in truth:
        return None
    true = 100.0 * (truth[hi] / truth[lo] - 1.0)
    return {
        "low_pct": m["lead_low_pct"],
        "high_pct": m["lead_high_pct"],
        "true_pct": true,
        "inside": m["lead_low_pct"] <= true <= m["lead_high_pct"],
        "separated": m.get("separated"),
    }


def _regret(out: dict, truth: dict) -> float | None:
    rec = out.get("recommendation") or {}
    roles = rec.get("roles")
    if not roles:
        return None
    key = (roles["target"], roles["drafter"])
    return 1.0 - truth[key] / max(truth.values()) if key in truth else None


def within_table(name: str, truth: dict) -> list[dict]:
    """Per log of a sweep: the within-log contention estimate (`advisor.measure.contention`, as the fit makes
    it), the mean step times, the targets running on the host at the same time (all lanes of the
    sweep whose runs overlapped this one by more than 20 s, from sweep.json), and the worst split
    error of the analytic projection from this log as it is and with the within-log slopes applied
    (`WithinLogContention.fixed_point` over each split's projected utilisations)."""
    import warnings

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # this tree's advisor, as the subprocesses get it
    from advisor.fit.pipeline import fit_logs
    from advisor.ingest.load import load_log
    from advisor.model.chain import WhatIf, project_split

    folder = ROOT / "fixtures" / "sweep" / name
    runs = json.loads((folder / "sweep.json").read_text())["runs"]
    rows = []
    for r in runs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_logs([load_log(folder / (r["log"] + ".gz"))])
        w = fit.contention.within
        worst = [0.0, 0.0]
        for (n, m), t in truth.items():

            def util(sp, sc, n=n, m=m):
                x = project_split(fit, n, m, what_if=WhatIf(mu_scale=(1 / sp, 1 / sc)), interval=False)
                return x.x_bps / x.producer_cap_bps, x.x_bps / x.consumer_cap_bps

            sp, sc = w.fixed_point(n, m, util)
            for j, scale in enumerate(((1.0, 1.0), (1 / sp, 1 / sc))):
                x = project_split(fit, n, m, what_if=WhatIf(mu_scale=scale), interval=False).x_bps
                worst[j] = max(worst[j], abs(x / t - 1.0))
        co = [
            q
            for q in runs
            if q is not r and q["start_wall_s"] < r["end_wall_s"] - 20 and q["end_wall_s"] > r["start_wall_s"] + 20
        ]
        rows.append(
            {
                "log": r["name"],
                "n": r["targets"],
                "m": r["drafters"],
                "host_targets": r["targets"] + sum(q["targets"] for q in co),
                "target_ms": 1e3 * fit.producer.busy_mean_s,
                "drafter_ms": 1e3 * fit.consumer.busy_mean_s,
                "t_peers_sd": w.producer.producer_peers_sd,
                "t_slope": w.producer.per_producer,
                "t_se": w.producer.per_producer_se,
                "d_slope_d": w.consumer.per_consumer,
                "d_se_d": w.consumer.per_consumer_se,
                "d_confounded_d": w.consumer.confounded("consumer"),
                "d_slope_t": w.consumer.per_producer,
                "d_se_t": w.consumer.per_producer_se,
                "d_confounded": w.consumer.confounded("producer"),
                "d_starved": w.consumer.starved,
                "d_starved_se": w.consumer.starved_se,
                "d_starved_share": w.consumer.starved_share,
                "worst_analytic": worst[0],
                "worst_within": worst[1],
            }
        )
    return rows


def leads_table(name: str, truth: dict) -> dict:
    """Every pair of splits projected from each single log of a sweep: the lead of the higher
    projected over the lower, its 95% interval (`advisor.project.rows.lead_interval`, the interval the
    verdict's separation rests on) against the truth's lead, and how many pairs the lead interval
    and the two splits' own intervals separate (and whether in the truth's order)."""
    import warnings

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from advisor.advice import advise
    from advisor.project.rows import lead_interval

    out = {
        "pairs": 0,
        "inside": 0,
        "widths": [],
        "sep_lead": 0,
        "sep_lead_right": 0,
        "sep_marginal": 0,
        "sep_marginal_right": 0,
    }
    for path in sorted((ROOT / "fixtures" / "sweep" / name).glob("*.jsonl.gz")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            adv = advise([path])
        df = adv.splits
        rows = {(int(r["n_target"]), int(r["n_drafter"])): lbl for lbl, r in df.iterrows()}
        keys = [k for k in truth if k in rows]
        for a, b in itertools.combinations(keys, 2):
            la, lb = rows[a], rows[b]
            if df.at[la, "bps"] < df.at[lb, "bps"]:
                (a, la), (b, lb) = (b, lb), (a, la)
            li = lead_interval(adv.rows[la], adv.rows[lb])
            if li is None:
                continue
            true = truth[a] / truth[b] - 1.0
            out["pairs"] += 1
            out["inside"] += li[0] <= true <= li[1]
            out["widths"].append(li[1] - li[0])
            if li[0] > 0:
                out["sep_lead"] += 1
                out["sep_lead_right"] += true > 0
            if df.at[la, "bps_low"] > df.at[lb, "bps_high"]:
                out["sep_marginal"] += 1
                out["sep_marginal_right"] += true > 0
    out["median_width"] = statistics.median(out.pop("widths")) if out["pairs"] else math.nan
    return out


def render_leads(leads: dict[str, dict]) -> str:
    lines = [
        "#### Leads between splits (every pair of splits, from each single log)\n",
        "| sweep | pairs | true lead inside its 95% interval | median width | separated by the lead (in the "
        "truth's order) | separated by the two intervals (in the truth's order) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, o in leads.items():
        lines.append(
            f"| {name} | {o['pairs']} | {o['inside']} ({100 * o['inside'] / max(o['pairs'], 1):.0f}%) | "
            f"{100 * o['median_width']:.0f} pts | {o['sep_lead']} ({o['sep_lead_right']}) | "
            f"{o['sep_marginal']} ({o['sep_marginal_right']}) |"
        )
    return "\n".join(lines) + "\n"


def render_within(name: str, rows: list[dict]) -> str:
    from advisor.stats import t_975

    def cell(b, se, flag=False):
        if not math.isfinite(se):
            return "-"
        return f"{100 * (math.exp(b) - 1):+.1f} +-{100 * t_975(19) * se:.1f}{' (confounded)' if flag else ''}"

    out = [
        f"#### {name}: within-log contention (95%, % per extra busy worker)\n",
        "| log | targets on host | target ms | drafter ms | busy targets sd | target per busy target "
        "| drafter per busy drafter | drafter per busy target | drafter after a starved wait (share) "
        "| worst split error: analytic / with these slopes |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (-r["n"], r["log"])):
        starv = cell(r["d_starved"], r["d_starved_se"])
        out.append(
            f"| {r['log']} | {r['host_targets']} | {r['target_ms']:.1f} | {r['drafter_ms']:.1f} | "
            f"{r['t_peers_sd']:.2f} | {cell(r['t_slope'], r['t_se'])} | "
            f"{cell(r['d_slope_d'], r['d_se_d'], r['d_confounded_d'])} | "
            f"{cell(r['d_slope_t'], r['d_se_t'], r['d_confounded'])} | {starv} "
            f"({100 * r['d_starved_share']:.0f}%) | {100 * r['worst_analytic']:.1f}% / "
            f"{100 * r['worst_within']:.1f}% |"
        )
    return "\n".join(out) + "\n"


def budget_sets() -> dict[str, dict[int, list[Path]]]:
    """Logs of one split at several token budgets (repeats listed): the two-GPU sweep, and the
    earlier one-GPU runs."""
    folder = ROOT / "fixtures" / "sweep" / BUDGET_SWEEP
    fx = ROOT / "fixtures"
    two: dict[int, list[Path]] = {}
    for p in sorted(folder.glob("*.jsonl.gz")):
        two.setdefault(parse(p)[2], []).append(p)
    return {
        "234m target, H200 + H200 (dedicated), 1-1": two,
        "1b target, one shared H200, 1-1": {
            16384: [fx / "h200-1x1-tb16384.jsonl"],
            32768: [fx / "h200-1x1.jsonl"],
            65536: [fx / "h200-1x1-tb65536.jsonl"],
        },
    }


def budget_table(logs: dict[int, list[Path]], pool: ThreadPoolExecutor) -> dict:
    """Every budget projected from each log of every other budget (each repeat is a source: a
    user holds one run, not the mean of several), and from each pair of logs at two budgets;
    truth = mean of the budget's repeats, all of which must lie inside the interval."""
    flat = [(b, p) for b, ps in logs.items() for p in ps]
    rates = dict(zip(flat, pool.map(lambda bp: advise_json([bp[1]])["observed"]["bps"], flat)))
    measured = {b: [rates[(b, p)] for p in ps] for b, ps in logs.items()}
    truth = {b: statistics.fmean(v) for b, v in measured.items()}
    budgets = sorted(logs)
    cases = [([s], b) for s in flat for b in budgets if b != s[0]]
    cases += [
        ([s, u], b)
        for s, u in itertools.combinations(flat, 2)
        if s[0] != u[0]
        for b in budgets
        if b not in (s[0], u[0])
    ]

    def one(case):
        srcs, b = case
        out = advise_json([p for _, p in srcs], "--token-budget", str(b))
        row = _split_rows(out)[(1, 1)]
        tb = [t for t, _ in srcs]
        return {
            "source": [f"{t}" if len(logs[t]) == 1 else f"{t}#{logs[t].index(p) + 1}" for t, p in srcs],
            "budget": b,
            "bps": row["bps"],
            "low": row["bps_low"],
            "high": row["bps_high"],
            "truth": truth[b],
            "err": row["bps"] / truth[b] - 1.0,
            "inside": all(row["bps_low"] <= v <= row["bps_high"] for v in measured[b]),
            "kind": "interpolate"
            if len(tb) == 2 and min(tb) < b < max(tb)
            else ("extrapolate" if len(tb) == 2 else "one log"),
            "ratio": b / (tb[0] if len(tb) == 1 else min(tb, key=lambda x: abs(math.log(b / x)))),
        }

    return {"truth": truth, "measured": measured, "cases": list(pool.map(one, cases))}


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def _leads(ss: list[dict]) -> str:
    leads = [s["lead"] for s in ss if s.get("lead")]
    return f"{sum(x['inside'] for x in leads)}/{len(leads)}" if leads else "-"


def _verdicts(ss: list[dict]) -> str:
    counts: dict[str, int] = {}
    for s in ss:
        counts[str(s.get("verdict"))] = counts.get(str(s.get("verdict")), 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _med_max(xs) -> str:
    xs = list(xs)
    return f"{100 * statistics.median(xs):.1f}% / {100 * max(xs):.1f}%"


def render(sweeps: list[dict], budget: dict | None) -> str:
    out = []
    for sw in sweeps:
        splits = sorted(sw["truth"], reverse=True)
        out.append(f"### {sw['name']} (G = {sw['gpus']})\n")
        head = "| source | " + " | ".join(f"{n}-{m}" for n, m in splits) + " | worst | inside |"
        out.append("| split | " + " | ".join(f"{n}-{m}" for n, m in splits) + " | | |")
        out.append("|---|" + "---:|" * (len(splits) + 2))
        out.append(
            "| measured b/s (repeats) | "
            + " | ".join("/".join(f"{v:.2f}" for v in sw["measured"][k]) for k in splits)
            + " | | |"
        )
        out.append(
            "| repeat noise (half spread) | " + " | ".join(f"{100 * sw['noise'][k]:.1f}%" for k in splits) + " | | |"
        )
        out.append("")
        out.append(head)
        out.append("|---|" + "---:|" * (len(splits) + 2))
        for kind in ("single", "pair"):
            for s in sw[kind]:
                cells = []
                for k in splits:
                    v = s["per_split"][k]
                    cells.append(f"{v['bps']:.2f} ({_pct(v['err'])}){'' if v['inside'] else ' x'}")
                n_in = sum(v["inside"] for v in s["per_split"].values())
                src = " + ".join(re.sub(r"\.jsonl\.gz$", "", x) for x in s["source"])
                out.append(f"| {src} | " + " | ".join(cells) + f" | {100 * s['worst']:.1f}% | {n_in}/{len(splits)} |")
        out.append("")
    out.append("### Summary\n")
    out.append(
        "| sweep | sources | worst split error: median / max | own split (level) | across splits (shape) "
        "| mean abs error | coverage (all repeats) | coverage (each repeat) | median width "
        "| pick within 2% of the best | verdicts | lead vs runner-up inside its interval |"
    )
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for sw in sweeps:
        for kind in ("single", "pair"):
            ss = sw[kind]
            worst = [s["worst"] for s in ss]
            allv = [v for s in ss for v in s["per_split"].values()]
            cov = sum(v["inside"] for v in allv) / len(allv)
            each = [x for v in allv for x in v["inside_each"]]
            out.append(
                f"| {sw['name']} | {len(ss)} {kind} | {100 * statistics.median(worst):.1f}% / "
                f"{100 * max(worst):.1f}% | {_med_max(abs(s['level']) for s in ss)} | "
                f"{_med_max(s['shape'] for s in ss)} | {100 * statistics.fmean(abs(v['err']) for v in allv):.1f}% | "
                f"{100 * cov:.0f}% ({sum(v['inside'] for v in allv)}/{len(allv)}) | "
                f"{100 * sum(each) / len(each):.0f}% ({sum(each)}/{len(each)}) | "
                f"{100 * statistics.median(v['width'] for v in allv):.1f}% | "
                f"{sum(s['regret'] is not None and s['regret'] <= 0.02 for s in ss)}/{len(ss)} | "
                f"{_verdicts(ss)} | {_leads(ss)} |"
            )
    for label, bt in (budget or {}).items():
        out.append(f"\n### Token budget ({label})\n")
        out.append(
            "measured (b/s, repeats): "
            + ", ".join(f"{b}: {'/'.join(f'{v:.2f}' for v in bt['measured'][b])}" for b in sorted(bt["truth"]))
            + "\n"
        )
        # one log: a row per source log, a column per projected budget (pairs: summary lines only;
        # every case is in --json)
        budgets = sorted(bt["truth"])
        ones = [c for c in bt["cases"] if c["kind"] == "one log"]
        out.append("| from one log | " + " | ".join(str(b) for b in budgets) + " |")
        out.append("|---|" + "---:|" * len(budgets))
        for src in dict.fromkeys(c["source"][0] for c in ones):
            cells = {c["budget"]: c for c in ones if c["source"][0] == src}
            out.append(
                f"| {src} | "
                + " | ".join(
                    (
                        f"{cells[b]['bps']:.2f} ({_pct(cells[b]['err'])}){'' if cells[b]['inside'] else ' x'}"
                        if b in cells
                        else "-"
                    )
                    for b in budgets
                )
                + " |"
            )
        out.append("")
        for kind in ("one log", "interpolate", "extrapolate"):
            cs = [c for c in bt["cases"] if c["kind"] == kind]
            if not cs:
                continue
            errs = [abs(c["err"]) for c in cs]
            widths = [(c["high"] - c["low"]) / c["bps"] for c in cs]
            line = (
                f"- {kind} ({len(cs)} cases): |error| median {100 * statistics.median(errs):.1f}%, max "
                f"{100 * max(errs):.1f}%, within 5% {sum(e <= 0.05 for e in errs)}/{len(cs)}, inside "
                f"{sum(c['inside'] for c in cs)}/{len(cs)}, median width {100 * statistics.median(widths):.1f}%"
            )
            near = [
                c for c in cs if kind == "one log" and (abs(c["ratio"] - 0.5) < 0.02 or abs(c["ratio"] - 1.5) < 0.02)
            ]
            if near:
                line += "; at half or 1.5x the logged budget: " + ", ".join(
                    f"{c['source'][0]}->{c['budget']} {_pct(c['err'])}{'' if c['inside'] else ' (outside)'}"
                    for c in near
                )
            out.append(line)
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="also write the raw results here")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--part",
        choices=("all", "splits", "budget"),
        default="all",
        help="only the split sweeps, or only the token-budget tables",
    )
    ap.add_argument(
        "--sweep",
        action="append",
        choices=sorted(SWEEPS),
        default=None,
        help="only this split sweep (repeatable; default: all)",
    )
    args = ap.parse_args(argv)
    with ThreadPoolExecutor(args.jobs) as pool:
        sweeps = (
            [sweep_table(n, g, pool) for n, g in SWEEPS.items() if not args.sweep or n in args.sweep]
            if args.part != "budget"
            else []
        )
        budget = (
            {label: budget_table(logs, pool) for label, logs in budget_sets().items()} if args.part != "splits" else {}
        )
    within = {sw["name"]: within_table(sw["name"], sw["truth"]) for sw in sweeps}
    leads = {sw["name"]: leads_table(sw["name"], sw["truth"]) for sw in sweeps}
    print(render(sweeps, budget))
    if leads:
        print(render_leads(leads))
    for n, rows in within.items():
        print(render_within(n, rows))
    if args.json:

        def key(o):
            if isinstance(o, dict):
                return {(f"{k[0]}-{k[1]}" if isinstance(k, tuple) else k): key(v) for k, v in o.items()}
            if isinstance(o, (list, tuple)):
                return [key(v) for v in o]
            return o

        Path(args.json).write_text(
            json.dumps(key({"sweeps": sweeps, "budget": budget, "within": within, "leads": leads}), indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
