"""When each step of one ``dflash-advise --json LOG`` run starts and ends: the CLI's critical path.

    python3 benchmarks/timeline.py LOG [--runs 3] [--root OTHER_CHECKOUT] [--json rounds.json]
        [--pieces] [--setting MODULE.NAME=VALUE ...] [--gpus G]

`benchmarks/phases.py` adds up what each step costs; here the CLI runs as a user runs it, in a
fresh process (`advisor.cli.app.script`, its imports overlapping its read), and the seconds since
the process started are noted where each step begins and ends, so the table shows what waits on
what: the read (``read ahead``: `advisor.ingest.load.read_ahead`, worker processes and all) against
the import of pandas and the advisor in its thread (``import``), then the steps of
`advisor.advice.advise` one after the other. The last rows: when `main` returned, and the
process's whole wall time (its exit included) as this script saw it. Medians over ``--runs``
fresh processes; a bare ``json.loads`` loop over the same file in each round gives the ratio.
``--pieces``: also a row per piece of a file read by pieces (`advisor.ingest.pieces`): when its
worker read it, when its summary was back here, when the fold took it. ``--setting``: a module
constant set otherwise before the CLI runs (the module imported first if it was not: for the
reader's modules, which the CLI imports before its read anyway). ``--gpus G``: the CLI's own
``--gpus`` (the advice for G GPUs, not the log's), for the large-G path.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from phases import BARE, bytecode_note      # the bare json.loads loop, timed as phases.py times it

ROOT = Path(__file__).resolve().parent.parent


# Run in a fresh process (argv: checkout, log, start time): the CLI with a note at each step.
CHILD = r'''
import atexit, json, os, sys, time
START = float(sys.argv[3])
sys.path.insert(0, sys.argv[1])
marks = {}
def note(name, t0=None):
    now = time.time() - START
    if t0 is not None and name in marks:     # a step run twice (the rates, then the table): each its row
        name += " (again)"
    marks[name] = now if t0 is None else [t0, now]
import advisor.cli.app as app
note("cli imported")
real_import = app._import_advice
def imported():
    t0 = time.time() - START
    real_import()
    note("import", t0)
    import advisor.advice as A
    for name in ("load_logs", "measure_logs", "fit_pipeline", "project", "refined_ratios", "refine_weak_spots", "reconcile",
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
import importlib
for setting in json.loads(sys.argv[5]):      # --setting MODULE.NAME=VALUE
    target, _, value = setting.partition("=")
    mod, _, name = target.rpartition(".")
    module = importlib.import_module(mod)
    if not hasattr(module, name):      # (a typo must not time the default)
        sys.exit(f"--setting {setting}: {mod} has no {name}")
    setattr(module, name, eval(value))
if sys.argv[4]:      # --pieces: when each piece was read in its worker, handed back, folded here
    import advisor.ingest.pieces as P
    trace = sys.argv[4]
    real_piece, real_submit, real_iter = P._worker_piece, P._PieceReads._submit, P._PieceReads.__iter__
    def worker_piece(path, j, *a):
        t0 = time.time() - START
        got = real_piece(path, j, *a)
        with open(os.path.join(trace, f"{j}"), "w") as f:
            f.write(json.dumps([t0, time.time() - START]))
        return got
    worker_piece.__module__, worker_piece.__qualname__ = P.__name__, "_worker_piece"   # (pickled by name)
    P._worker_piece = worker_piece
    def submit(self, j):
        fut = real_submit(self, j)
        fut.add_done_callback(lambda _f, j=j: note(f"piece {j} back"))
        return fut
    def folded(self):
        for j, got in enumerate(real_iter(self)):
            note(f"piece {j} in fold")
            yield got
    P._PieceReads._submit, P._PieceReads.__iter__ = submit, folded
out = sys.stdout
atexit.register(lambda: print(json.dumps(marks), file=out, flush=True))   # (script runs these, then ends)
sys.stdout = open(os.devnull, "w")
sys.argv = ["dflash-advise", "--json", *json.loads(sys.argv[6]), sys.argv[2]]
app.script()
'''

ORDER = ("cli imported", "read ahead", "import", "load_logs", "measure_logs", "fit_pipeline", "project",
         "refined_ratios", "project (again)", "refine_weak_spots", "reconcile", "gather", "decide", "observed_split", "main returned", "process")


def one_round(log: Path, root: Path, pieces: bool, settings: list[str], cli_args: list[str]) -> dict:
    bare = float(subprocess.run([sys.executable, "-c", BARE, str(log)], capture_output=True, text=True,
                                check=True).stdout.split()[-1])
    with tempfile.TemporaryDirectory() as trace:
        start = time.time()
        p = subprocess.run([sys.executable, "-c", CHILD, str(root), str(log), repr(start), trace if pieces else "",
                            json.dumps(settings), json.dumps(cli_args)],
                           capture_output=True, text=True, cwd=root)
        wall = time.time() - start
        if p.returncode:
            raise SystemExit(p.stderr[-2000:])
        marks = json.loads(p.stdout.strip().splitlines()[-1])
        for f in Path(trace).iterdir():
            marks[f"piece {f.name} read"] = json.loads(f.read_text())
    marks["process"] = wall
    marks["bare json.loads loop"] = bare
    return marks


def piece_table(rounds: list[dict]) -> None:
    """Per piece (medians): when its worker read it, when it was back here, when the fold took it."""
    n = max((int(k.split()[1]) + 1 for r in rounds for k in r if k.endswith(" read")), default=0)
    if not n:
        print("\nno file was read by pieces")
        return
    print("\n| piece | worker reads from s | to s | back here s | folded from s |")
    print("|---:|---:|---:|---:|---:|")
    for j in range(n):
        cell = [[r[k] for r in rounds if k in r] for k in (f"piece {j} read", f"piece {j} back", f"piece {j} in fold")]
        med = lambda xs: f"{statistics.median(xs):.2f}" if xs else ""
        print(f"| {j} | {med([x[0] for x in cell[0]])} | {med([x[1] for x in cell[0]])} | {med(cell[1])} | "
              f"{med(cell[2])} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--json", type=Path, default=None, help="also write the rounds here")
    ap.add_argument("--pieces", action="store_true", help="also time each piece of a file read by pieces")
    ap.add_argument("--setting", action="append", default=[], metavar="MODULE.NAME=VALUE",
                    help="set a module constant before the CLI runs (the module imported first, if it was not)")
    ap.add_argument("--gpus", type=int, default=None, help="the CLI's --gpus (advice for G GPUs, not the log's)")
    args = ap.parse_args()
    cli_args = [] if args.gpus is None else ["--gpus", str(args.gpus)]
    note = bytecode_note(args.root.resolve())
    if note:
        print(note, flush=True)
    rounds = [one_round(args.log.resolve(), args.root.resolve(), args.pieces, args.setting, cli_args)
              for _ in range(args.runs)]
    bare = statistics.median(r["bare json.loads loop"] for r in rounds)
    print(f"{args.log.name}{' '.join([''] + cli_args)}, advisor of {args.root}"
          f"{''.join(', ' + x for x in args.setting)}; median of "
          f"{args.runs} runs; bare json.loads loop {bare:.2f} s")
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
    if args.pieces:
        piece_table(rounds)
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=1))


if __name__ == "__main__":
    main()
