"""A pipeline on a host of C cores, its header silent on devices (issue 21, item 3): do the
projections of another split cover what that split measures?

Your own pipeline (numpy work in processes, no `device` in its header) runs P targets and M
drafters on a small host: every busy worker gets min(1, C / busy workers) of a core, so a step
takes longer while more peers are busy (processor sharing). This script simulates that in small
time steps (targets -> a bounded q_hs -> drafters; a target holds a finished batch while q_hs is
full, a drafter waits while it is empty), writes each split's steps as a rate log with no
`device` or `physical_gpus`, and then, for each logged split, compares `dflash-advise LOG --json`'s
projection at the other splits with what the simulated run at that split measured (its steady
rate, the advisor's own reading of that log).

    python3 benchmarks/shared_cores.py                    # G = 3 on 2 cores: 2-1 and 1-2
    python3 benchmarks/shared_cores.py --cores 2 --seconds 120 --out /tmp/sc
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def simulate(n: int, m: int, *, cores: float, work_t: float, work_d: float, hs_cap: int, seconds: float,
             dt: float, seed: int) -> list[dict]:
    """Step events of a processor-shared pipeline (see the module docstring)."""
    rng = random.Random(seed)
    draw = lambda mean: mean * rng.gammavariate(10.0, 0.1)   # noqa: E731  (SCV 0.1)
    tgt = [{"state": "busy", "left": draw(work_t), "start": 0.0, "done": 0.0} for _ in range(n)]
    dft = [{"state": "idle", "left": 0.0, "start": 0.0, "free": 0.0, "wait": 0.0} for _ in range(m)]
    queue, held, rows, batch = 0, [], [], 0
    for k in range(1, int(seconds / dt) + 1):
        now = k * dt
        busy = sum(w["state"] == "busy" for w in tgt) + sum(d["state"] == "busy" for d in dft)
        rate = min(1.0, cores / max(busy, 1))
        for i, w in enumerate(tgt):
            if w["state"] == "busy":
                w["left"] -= dt * rate
                if w["left"] <= 0:
                    w.update(state="held", done=now)
                    held.append(i)
        while held and queue < hs_cap:
            i = held.pop(0)
            w = tgt[i]
            queue += 1
            batch += 1
            rows.append({"ev": "step", "t": round(now, 4), "role": "target", "worker": i, "batch": batch,
                         "tokens": 1000, "busy": round(w["done"] - w["start"], 5), "wait": 0.0,
                         "blocked": round(now - w["done"], 5)})
            w.update(state="busy", left=draw(work_t), start=now)
        for j, d in enumerate(dft):
            if d["state"] == "busy":
                d["left"] -= dt * rate
                if d["left"] <= 0:
                    rows.append({"ev": "step", "t": round(now, 4), "role": "drafter", "worker": j, "batch": batch,
                                 "tokens": 1000, "busy": round(now - d["start"], 5),
                                 "wait": round(d["wait"], 5), "blocked": 0.0})
                    d.update(state="idle", free=now)
            if d["state"] == "idle" and queue > 0:
                queue -= 1
                d.update(state="busy", left=draw(work_d), start=now, wait=now - d["free"])
    rows.sort(key=lambda r: r["t"])
    return rows


def write(path: Path, n: int, m: int, rows: list[dict], seconds: float, hs_cap: int) -> None:
    head = {"ev": "run", "v": 1, "t": 0.0, "run": f"shared-cores-{n}x{m}", "gpus": n + m,
            "roles": {"target": n, "drafter": m}, "queues": [{"name": "hs", "feeds": "drafter", "cap": hs_cap}],
            "token_budget": 1000}
    end = {"ev": "end", "t": seconds, "reason": "interrupted"}
    path.write_text("".join(json.dumps(o) + "\n" for o in [head, *rows, end]))


def advise(path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "advisor.cli.app", "advise", str(path), "--json"], capture_output=True,
                       text=True, env=env, cwd=ROOT, check=True)
    return json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cores", type=float, default=2.0)
    ap.add_argument("--gpus", type=int, default=3)
    ap.add_argument("--work-target", type=float, default=0.10, help="seconds of one core per target batch")
    ap.add_argument("--work-drafter", type=float, default=0.06, help="seconds of one core per drafter batch")
    ap.add_argument("--hs-cap", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--dt", type=float, default=0.0005)
    ap.add_argument("--out", type=Path, default=Path("/tmp/shared-cores"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    splits = [(n, args.gpus - n) for n in range(args.gpus - 1, 0, -1)]
    logs, measured = {}, {}
    for n, m in splits:
        rows = simulate(n, m, cores=args.cores, work_t=args.work_target, work_d=args.work_drafter,
                        hs_cap=args.hs_cap, seconds=args.seconds, dt=args.dt, seed=n)
        logs[(n, m)] = args.out / f"sc-{n}x{m}.jsonl"
        write(logs[(n, m)], n, m, rows, args.seconds, args.hs_cap)
        measured[(n, m)] = advise(logs[(n, m)])["observed"]["bps"]
    print(f"{args.cores:g} cores, G = {args.gpus}: measured " +
          ", ".join(f"{n}-{m} {measured[(n, m)]:.3f} b/s" for n, m in splits))
    print("| from | at | projected b/s | 95% interval | measured b/s | inside |")
    print("|---|---|---:|---|---:|---|")
    for src in splits:
        j = advise(logs[src])
        for row in j["splits"]:
            at = (row["roles"]["target"], row["roles"]["drafter"])
            if at == src or at not in measured:
                continue
            lo, hi = row["bps_low"], row["bps_high"]
            ok = lo <= measured[at] <= hi
            print(f"| {src[0]}-{src[1]} | {at[0]}-{at[1]} | {row['bps']:.3f} | {lo:.3f}-{hi:.3f} | "
                  f"{measured[at]:.3f} | {'yes' if ok else 'no'} |")
        said = [w for w in j["warnings"] if "inside the log" in w or "does not say" in w]
        for w in said:
            print(f"  {src[0]}-{src[1]}: {w[w.index(': ') + 2:][:300]}")


if __name__ == "__main__":
    main()
