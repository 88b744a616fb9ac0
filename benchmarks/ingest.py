"""Ingest speed and memory on a multi-day-sized log (~1M lines), against a plain json.loads loop.

    python3 benchmarks/ingest.py            # makes benchmarks/data/big-1000000.jsonl once, then measures
    python3 benchmarks/ingest.py --dir /tmp/ingest   # the log elsewhere (it is 150 MB)

Each reader runs in its own fresh process (so peak RSS is its own), alternating A B A B over
``--runs`` rounds; the table reports medians and the per-round ratio advisor/baseline.
The baseline is the least a Python reader does: ``json.loads`` per line into a list of dicts.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"

READERS = {
    "baseline": (
        "import json,sys\nwith open(sys.argv[1],'rb') as f:\n    rows=[json.loads(l) for l in f]\nprint(len(rows))"
    ),
    "advisor": "import sys\nfrom advisor.ingest.load import load_log\nlog=load_log(sys.argv[1])\nprint(len(log.steps))",
}


def make_log(path: Path, n_lines: int) -> None:
    sys.path.insert(0, str(ROOT))  # the advisor of this checkout, installed or not
    sys.path.insert(0, str(ROOT / "tests"))  # the synthetic generator (tests/synth.py)
    from dataclasses import replace

    from synth import reference_scenario, write_log

    s = reference_scenario()
    # two step lines per batch plus a rates line a minute: batches ~ n_lines / 2
    s = replace(s, duration_s=None, n_batches=n_lines // 2, warmup_factor=1.0)
    write_log(path, s, rates_every_s=60.0)


def run_one(name: str, path: Path) -> tuple[float, float]:
    code = (
        "import resource,time\nt0=time.perf_counter()\n"
        + READERS[name]
        + "\nprint('WALL', time.perf_counter()-t0)\nprint('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    vals = dict(line.split() for line in out.splitlines() if line.startswith(("WALL", "RSS")))
    return float(vals["WALL"]), float(vals["RSS"]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=DATA, help="where the log is made (once) and read")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / f"big-{args.lines}.jsonl"
    if not path.exists():
        t = time.perf_counter()
        make_log(path, args.lines)
        print(f"made {path} in {time.perf_counter() - t:.1f} s")
    n = sum(1 for _ in open(path, "rb"))
    size = path.stat().st_size / 1e6
    res = {k: [] for k in READERS}
    for _ in range(args.runs):
        for k in READERS:
            res[k].append(run_one(k, path))
    ratios = [a[0] / b[0] for a, b in zip(res["advisor"], res["baseline"])]
    print(f"log: {n} lines, {size:.0f} MB; {args.runs} rounds, each reader in a fresh process")
    print("| reader | wall s (median) | min-max | peak RSS MB (median) |")
    print("|---|---:|---:|---:|")
    for k, v in res.items():
        w = [x[0] for x in v]
        print(
            f"| {k} | {statistics.median(w):.2f} | {min(w):.2f}-{max(w):.2f} | "
            f"{statistics.median(x[1] for x in v):.0f} |"
        )
    print(
        f"ratio advisor/baseline wall: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, "
        f"max {max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()
