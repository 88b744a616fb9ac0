"""Advice at a large G against the log's own G: whole `dflash-advise --json` processes, paired.

    python3 benchmarks/large_g.py LOG --gpus 1024 --runs 5 [--base OTHER_CHECKOUT]

Each round runs, in fresh processes and in turn, ``dflash-advise --json LOG`` (the log's own G) and
``dflash-advise --json --gpus G LOG``, of this checkout and, with ``--base``, of another one (its
``advisor`` package run from its folder: a before/after pair in one session). Wall seconds are
those of the whole process (start, imports and exit included), as a user's shell would see them;
the ratio is taken round by round (both commands in one round see the same machine), and the
table gives medians and the ratios' range. The outputs of the two checkouts are compared byte for
byte (a speed-up that changes the advice is not one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from phases import bytecode_note

ROOT = Path(__file__).resolve().parent.parent


def timed(root: Path, args: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "advisor", "--json", *args], cwd=root, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode:
        raise SystemExit(f"{root}: dflash-advise {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    return wall, p.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--gpus", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--base", type=Path, default=None, help="also time this checkout, in the same rounds")
    ap.add_argument("--json", type=Path, default=None, help="also write the rounds here")
    args = ap.parse_args()
    log = str(args.log.resolve())
    roots = {"this": ROOT} | ({"base": args.base.resolve()} if args.base else {})
    modes = {"own G": [log], f"--gpus {args.gpus}": ["--gpus", str(args.gpus), log]}
    for note in filter(None, (bytecode_note(root) for root in roots.values())):
        print(note, flush=True)
    rounds: list[dict[str, float]] = []
    outputs: dict[tuple[str, str], str] = {}
    for i in range(args.runs):
        r = {}
        for name, root in roots.items():
            for mode, argv in modes.items():
                r[f"{name} {mode}"], outputs[name, mode] = timed(root, argv)
        rounds.append(r)
        print(f"round {i + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in r.items()), flush=True)
    big = f"--gpus {args.gpus}"
    print(f"\n{args.log.name}, {args.runs} rounds (whole processes, wall s)")
    print(f"| checkout | own G (median) | {big} (median) | ratio per round (median) | range |")
    print("|---|---:|---:|---:|---:|")
    for name in roots:
        own = [r[f"{name} own G"] for r in rounds]
        large = [r[f"{name} {big}"] for r in rounds]
        ratios = [b / a for a, b in zip(own, large)]
        print(
            f"| {name} | {statistics.median(own):.2f} | {statistics.median(large):.2f} | "
            f"{statistics.median(ratios):.2f}x | {min(ratios):.2f}-{max(ratios):.2f}x |"
        )
    if "base" in roots:
        for mode in modes:
            same = outputs["this", mode] == outputs["base", mode]
            print(f"{mode}: the two checkouts' outputs are {'identical' if same else 'DIFFERENT'}")
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=1))


if __name__ == "__main__":
    main()
