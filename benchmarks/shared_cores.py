"""A pipeline on a host of C cores, its header silent on devices (issue 21, item 3): do the
projections of another split cover what that split measures?

Your own pipeline (numpy work in processes, no `device` in its header) runs P targets and M
drafters on a small host: every busy worker gets min(1, C / busy workers) of a core, so a step
takes longer while more peers are busy (processor sharing). This script simulates that in small
time steps (`tests/synth.py`'s `shared_cores_log`: targets -> a bounded q_hs -> drafters),
writes each split's steps as a rate log with no `device` or `physical_gpus`, and then, for each logged split, compares
`dflash-advise LOG --json`'s
projection at the other splits with what the simulated run at that split measured (its steady
rate, the advisor's own reading of that log).

    python3 benchmarks/shared_cores.py                    # G = 3 on 2 cores: 2-1 and 1-2
    python3 benchmarks/shared_cores.py --cores 2 --seconds 120 --out /tmp/sc
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the synthetic generator (tests/synth.py)

from synth import SharedCores, shared_cores_log  # noqa: E402


def advise(path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-m", "advisor.cli.app", "advise", str(path), "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
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
        logs[(n, m)] = shared_cores_log(
            args.out / f"sc-{n}x{m}.jsonl",
            n,
            m,
            SharedCores(
                cores=args.cores,
                work_t_s=args.work_target,
                work_d_s=args.work_drafter,
                hs_cap=args.hs_cap,
                seconds=args.seconds,
                dt_s=args.dt,
                seed=n,
            ),
        )
        measured[(n, m)] = advise(logs[(n, m)])["observed"]["bps"]
    print(
        f"{args.cores:g} cores, G = {args.gpus}: measured "
        + ", ".join(f"{n}-{m} {measured[(n, m)]:.3f} b/s" for n, m in splits)
    )
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
            print(
                f"| {src[0]}-{src[1]} | {at[0]}-{at[1]} | {row['bps']:.3f} | {lo:.3f}-{hi:.3f} | "
                f"{measured[at]:.3f} | {'yes' if ok else 'no'} |"
            )
        said = [w for w in j["warnings"] if "inside the log" in w or "does not say" in w]
        for w in said:
            print(f"  {src[0]}-{src[1]}: {w[w.index(': ') + 2 :][:300]}")


if __name__ == "__main__":
    main()
