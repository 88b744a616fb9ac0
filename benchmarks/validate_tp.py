"""Accuracy on a real sweep of TP-k target engines: every log of a sweep folder advised alone,
each projected split compared with what that split measured (mean of its repeats).

    python3 benchmarks/validate_tp.py fixtures/sweep/tp2cpu16 [--json out.json]

Truth per split: the mean of the observed rate (`observed.bps` of `dflash-advise --json`) over the
split's repeats; its noise: half the spread of the repeats. For each log: the error of every other
split's projection, whether the 95% interval holds the truth, the interval's width, and whether the
split it recommends (or keeps) measured within 2% of the best.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

PICK_TOL = 0.02


def advise(path: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "advisor", str(path), "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{path}: dflash-advise exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def key(roles: dict) -> str:
    return "-".join(str(v) for v in roles.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    logs = sorted(p for p in args.folder.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz")))
    advice = {p.name: advise(p) for p in logs}
    measured: dict[str, list[float]] = defaultdict(list)
    for a in advice.values():
        measured[key(a["observed"]["roles"])].append(a["observed"]["bps"])
    truth = {s: statistics.fmean(v) for s, v in measured.items()}
    noise = {s: (max(v) - min(v)) / 2 / statistics.fmean(v) for s, v in measured.items()}
    best = max(truth.values())
    rows, covered, total, widths, picks_ok = [], 0, 0, [], 0
    print("| log | split | measured b/s (noise) | projected b/s | error | 95% interval | inside | width |")
    print("|---|---|---|---|---|---|---|---|")
    for name, a in advice.items():
        own = key(a["observed"]["roles"])
        for s in a["splits"]:
            k = key(s["roles"])
            if k == own or k not in truth:
                continue
            err = s["bps"] / truth[k] - 1
            inside = s["bps_low"] <= truth[k] <= s["bps_high"]
            width = (s["bps_high"] - s["bps_low"]) / s["bps"]
            covered += inside
            total += 1
            widths.append(width)
            rows.append(
                dict(
                    log=name,
                    split=k,
                    measured=truth[k],
                    projected=s["bps"],
                    error=err,
                    inside=inside,
                    low=s["bps_low"],
                    high=s["bps_high"],
                    width=width,
                )
            )
            print(
                f"| {name} | {k} | {truth[k]:.3f} ({100 * noise[k]:.1f}%) | {s['bps']:.3f} | {100 * err:+.1f}% | "
                f"{s['bps_low']:.3f}-{s['bps_high']:.3f} | {'yes' if inside else 'no'} | {100 * width:.1f}% |"
            )
        pick = key(a["recommendation"]["roles"])
        ok = pick in truth and truth[pick] >= (1 - PICK_TOL) * best
        picks_ok += ok
        rows.append(dict(log=name, pick=pick, verdict=a["recommendation"]["verdict"], pick_ok=ok))
        print(
            f"| {name} | pick {pick} ({a['recommendation']['verdict']}) | "
            f"{truth.get(pick, float('nan')):.3f} | best {best:.3f} | {'within 2%' if ok else 'NOT within 2%'} | | | |"
        )
    summary = dict(
        truth=truth,
        noise=noise,
        coverage=covered / total if total else None,
        projections=total,
        median_width=statistics.median(widths) if widths else None,
        picks_ok=picks_ok,
        logs=len(advice),
    )
    print(
        f"\ncoverage {covered}/{total}; median width {100 * summary['median_width']:.1f}%; "
        f"picks within 2% of the best: {picks_ok}/{len(advice)}"
    )
    if args.json:
        args.json.write_text(json.dumps(dict(rows=rows, summary=summary), indent=1))


if __name__ == "__main__":
    main()
