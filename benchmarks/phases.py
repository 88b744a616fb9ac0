"""Where the time of one piece of advice goes, phase by phase, against a bare json.loads loop.

    python3 benchmarks/phases.py LOG [--gpus 1024] [--runs 3] [--root OTHER_CHECKOUT]

Each round runs, in a fresh process: the bare loop (``json.loads`` per line, nothing kept), then
the advisor with a timer wrapped around each public step `advisor.advice.advise` calls, then
``dflash-advise --json`` as a whole (its own process, so its imports and its overlap of reading
with importing count). The phases:

- ``import``: ``advisor.advice`` and ``advisor.present.text`` (numpy, pandas, polars, ...);
- ``read``: the file's bytes in ranges of whole lines, and polars' count and check of their lines
  (`advisor.ingest.scan`);
- ``parse``: the wait for polars' NDJSON reader over each range (`scan._result`; it reads a
  range on its threads while the range before is checked and folded);
- ``fold``: each range's column checks and the summary's ``add_*`` (`scan._Scan.block`);
- ``exact``: the exact line-by-line pass (`advisor.ingest.stream.parse_piece`), where it runs;
- ``frames``: the RunLog of the summary (`advisor.ingest.load._runlog`);
- ``measure+fit``: `measure_logs` and `fit_pipeline`;
- ``project``: the table of every split and its exact refinement (`project`, `refine_weak_spots`);
- ``decide``: `reconcile`, `gather`, `decide`, `observed_split`;
- ``render``: `advisor.present.text.render` as JSON;
- ``ingest wall``: `load_logs` as a whole (read, parse and fold overlap inside it).

The table gives medians over ``--runs`` rounds (baseline and advisor back to back in each
round). ``--root`` times another checkout's advisor (e.g. main), for before/after in one session.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bytecode_note(root: Path) -> str | None:
    """A line to print where the advisor of ``root`` runs without its bytecode: Python may not
    write it (``PYTHONDONTWRITEBYTECODE``, as on the device) and none is there, so every run
    compiles the advisor from source, a cost no installed package pays (BENCHMARKS.md 15.ix)."""
    if not (sys.flags.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE")):
        return None
    if os.path.exists(importlib.util.cache_from_source(str(root / "advisor" / "__init__.py"))):
        return None
    return (
        f"note: {root}'s advisor has no bytecode and PYTHONDONTWRITEBYTECODE is set: every run compiles it "
        f"from source; `python3 -m compileall -q {root / 'advisor'}` first times it as installed"
    )


BARE = (
    "import json,sys,time\nt=time.perf_counter()\nn=0\nwith open(sys.argv[1],'rb') as f:\n"
    "    for l in f:\n        json.loads(l); n+=1\nprint(time.perf_counter()-t)"
)

# Run in a fresh process with the checkout first on sys.path: times each public step of advise().
PHASES = r"""
import io, json, sys, threading, time
sys.path.insert(0, sys.argv[1])
spent = {}
def add(name, s):
    spent[name] = spent.get(name, 0.0) + s
t0 = time.perf_counter()
import advisor.advice as A
from advisor.present.text import render
add("import", time.perf_counter() - t0)
from advisor.ingest import load as L, stream as S, scan as SC
lock = threading.Lock()
def timed(mod, name, phase, clock=time.perf_counter):
    f = getattr(mod, name)
    def g(*a, **k):
        t = clock()
        try:
            return f(*a, **k)
        finally:
            with lock:
                add(phase, clock() - t)
    setattr(mod, name, g)
def timed_iter(mod, name, phase):
    f = getattr(mod, name)
    def g(*a, **k):
        it = f(*a, **k)
        while True:
            t = time.perf_counter()
            try:
                x = next(it)
            except StopIteration:
                add(phase, time.perf_counter() - t)
                return
            add(phase, time.perf_counter() - t)
            yield x
    setattr(mod, name, g)
timed_iter(SC, "_plain_ranges", "read")
timed_iter(SC, "_gzip_ranges", "read")
timed(SC, "_lines", "read")
timed(SC, "_result", "parse")
timed(SC._Scan, "block", "fold")
timed(S, "parse_piece", "exact")
timed(L, "_runlog", "frames")
timed(A, "load_logs", "ingest wall")
for n in ("measure_logs", "fit_pipeline"):
    timed(A, n, "measure+fit")
for n in ("project", "refine_weak_spots"):
    timed(A, n, "project")
for n in ("reconcile", "gather", "decide", "observed_split"):
    timed(A, n, "decide")
gpus = int(sys.argv[3]) if len(sys.argv) > 3 else None
t = time.perf_counter()
adv = A.advise([sys.argv[2]], gpus=gpus)
t1 = time.perf_counter()
out = render(adv, "json")
add("render", time.perf_counter() - t1)
add("advise wall", t1 - t)
print(json.dumps(spent))
"""

ORDER = (
    "import",
    "read",
    "parse",
    "fold",
    "exact",
    "frames",
    "ingest wall",
    "measure+fit",
    "project",
    "decide",
    "render",
    "advise wall",
)


def one_round(log: Path, gpus: int | None, root: Path) -> dict[str, float]:
    bare = float(
        subprocess.run(
            [sys.executable, "-c", BARE, str(log)], capture_output=True, text=True, check=True
        ).stdout.split()[-1]
    )
    argv = [sys.executable, "-c", PHASES, str(root), str(log)] + ([str(gpus)] if gpus else [])
    p = subprocess.run(argv, capture_output=True, text=True, cwd=root)
    if p.returncode:
        raise SystemExit(p.stderr[-2000:])
    res = json.loads(p.stdout.strip().splitlines()[-1])
    cli = [sys.executable, "-m", "advisor", "--json", str(log)] + (["--gpus", str(gpus)] if gpus else [])
    t = time.perf_counter()
    subprocess.run(cli, capture_output=True, cwd=root, check=False)
    res["dflash-advise --json"] = time.perf_counter() - t
    res["bare json.loads loop"] = bare
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--gpus", type=int, default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--json", type=Path, default=None, help="also write the rounds here")
    args = ap.parse_args()
    note = bytecode_note(args.root.resolve())
    if note:
        print(note, flush=True)
    rounds = [one_round(args.log.resolve(), args.gpus, args.root.resolve()) for _ in range(args.runs)]
    keys = [k for k in (*ORDER, "dflash-advise --json", "bare json.loads loop") if any(k in r for r in rounds)]
    print(f"{args.log.name}, --gpus {args.gpus or 'own'}, advisor of {args.root}; median of {args.runs}")
    print("| phase | s | / bare loop |")
    print("|---|---:|---:|")
    for k in keys:
        v = statistics.median(r.get(k, 0.0) for r in rounds)
        ratio = statistics.median(r.get(k, 0.0) / r["bare json.loads loop"] for r in rounds)
        print(f"| {k} | {v:.2f} | {ratio:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=1))


if __name__ == "__main__":
    main()
