"""When each step of one ``dflash-advise --json LOG`` run starts and ends: the CLI's critical path.

    python3 benchmarks/timeline.py LOG [--runs 3] [--root OTHER_CHECKOUT] [--json rounds.json]

`benchmarks/phases.py` adds up what each step costs; here the CLI runs as a user runs it, in a
fresh process (`advisor.cli.app.script`, its imports overlapping its read), and the seconds since
the process started are noted where each step begins and ends, so the table shows what waits on
what: the read (``read ahead``: `advisor.ingest.load.read_ahead`, worker processes and all) against
the import of pandas and the advisor in its thread (``import``), then the steps of
`advisor.advice.advise` one after the other. The last rows: when `main` returned, and the
process's whole wall time (its exit included) as this script saw it. Medians over ``--runs``
fresh processes; a bare ``json.loads`` loop over the same file in each round gives the ratio.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from phases import BARE      # the bare json.loads loop, timed as phases.py times it

ROOT = Path(__file__).resolve().parent.parent


# Run in a fresh process (argv: checkout, log, start time): the CLI with a note at each step.
CHILD = r'''
import atexit, json, os, sys, time
START = float(sys.argv[3])
sys.path.insert(0, sys.argv[1])
marks = {}
def note(name, t0=None):
    now = time.time() - START
    marks[name] = now if t0 is None else [t0, now]
import advisor.cli.app as app
note("cli imported")
real_import = app._import_advice
def imported():
    t0 = time.time() - START
    real_import()
    note("import", t0)
    import advisor.advice as A
    for name in ("load_logs", "measure_logs", "fit_pipeline", "project", "refine_weak_spots", "reconcile",
                 "gather", "decide", "observed_split"):
        def timed(*a, _f=getattr(A, name), _n=name, **k):
            t = time.time() - START
            try:
                return _f(*a, **k)
            finally:
                note(_n, t)
        setattr(A, name, timed)
app._import_advice = imported
import advisor.ingest.load as L
real_read = L.read_ahead
def read_ahead(*a, **k):
    t0 = time.time() - START
    try:
        return real_read(*a, **k)
    finally:
        note("read ahead", t0)
L.read_ahead = read_ahead
real_main = app.main
def main():
    try:
        real_main()
    finally:
        note("main returned")
app.main = main
out = sys.stdout
atexit.register(lambda: print(json.dumps(marks), file=out, flush=True))   # (script runs these, then ends)
sys.stdout = open(os.devnull, "w")
sys.argv = ["dflash-advise", "--json", sys.argv[2]]
app.script()
'''

ORDER = ("cli imported", "read ahead", "import", "load_logs", "measure_logs", "fit_pipeline", "project",
         "refine_weak_spots", "reconcile", "gather", "decide", "observed_split", "main returned", "process")


def one_round(log: Path, root: Path) -> dict:
    bare = float(subprocess.run([sys.executable, "-c", BARE, str(log)], capture_output=True, text=True,
                                check=True).stdout.split()[-1])
    start = time.time()
    p = subprocess.run([sys.executable, "-c", CHILD, str(root), str(log), repr(start)], capture_output=True,
                       text=True, cwd=root)
    wall = time.time() - start
    if p.returncode:
        raise SystemExit(p.stderr[-2000:])
    marks = json.loads(p.stdout.strip().splitlines()[-1])
    marks["process"] = wall
    marks["bare json.loads loop"] = bare
    return marks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--json", type=Path, default=None, help="also write the rounds here")
    args = ap.parse_args()
    rounds = [one_round(args.log.resolve(), args.root.resolve()) for _ in range(args.runs)]
    bare = statistics.median(r["bare json.loads loop"] for r in rounds)
    print(f"{args.log.name}, advisor of {args.root}; median of {args.runs} runs; bare json.loads loop {bare:.2f} s")
    print("| step | starts s | ends s | takes s |")
    print("|---|---:|---:|---:|")
    for k in ORDER:
        got = [r[k] for r in rounds if k in r]
        if not got:
            continue
        if isinstance(got[0], list):
            a, b = statistics.median(x[0] for x in got), statistics.median(x[1] for x in got)
            print(f"| {k} | {a:.2f} | {b:.2f} | {statistics.median(x[1] - x[0] for x in got):.2f} |")
        else:
            print(f"| {k} | | {statistics.median(got):.2f} | |")
    ratio = statistics.median(r["process"] / r["bare json.loads loop"] for r in rounds)
    print(f"whole process / bare loop: {ratio:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=1))


if __name__ == "__main__":
    main()
