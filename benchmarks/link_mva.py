"""The analytic link stage's MVA against exact simulation of the closed network it solves.

    python3 benchmarks/link_mva.py

M drafters on one node cycle between their own compute (Z = 1 s, deterministic) and the shared
link (x seconds, deterministic, first come first served), crossing on a fraction v of their
batches: the network `advisor.model.link.pool_mva` solves. The grid: M 1-8, v 0.3-1, x/Z
0.25-4 (120 cases); the simulation runs 30,000 batches per case (10% warm-up). Prints the mean
and worst relative error of the MVA throughput, for v < 1 and for v = 1 (every batch crosses:
deterministic services fall into lockstep, which MVA's random-arrival view does not see).
"""

from __future__ import annotations

import heapq
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from advisor.model.link import pool_mva  # noqa: E402


def closed_sim(m: int, z: float, v: float, x: float, n: int = 30000, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    link_free, done = 0.0, 0
    ev = [(0.0, i) for i in range(m)]
    heapq.heapify(ev)
    t0 = d0 = None
    while done < n:
        now, i = heapq.heappop(ev)
        s = now
        if rng.random() < v:
            s = link_free = max(s, link_free) + x
        heapq.heappush(ev, (s + z, i))
        done += 1
        if done == n // 10:
            t0, d0 = ev[0][0], done
    return (done - d0) / (ev[0][0] - t0)


def main() -> None:
    cases = [(m, 1.0, v, xz) for m in (1, 2, 3, 4, 6, 8) for v in (0.3, 0.5, 0.67, 1.0) for xz in (0.25, 0.5, 1, 2, 4)]
    errs = {}
    for c in cases:
        m, z, v, x = c
        errs[c] = 100 * (sum(pool_mva((m,), z, (v,), x, 0.0)) / closed_sim(*c) - 1)
    for name, sel in (("v < 1", [c for c in cases if c[2] < 1]), ("v = 1", [c for c in cases if c[2] == 1])):
        e = np.array([errs[c] for c in sel])
        worst = sel[int(np.argmax(np.abs(e)))]
        print(
            f"{name}: {len(sel)} cases, mean |error| {np.mean(np.abs(e)):.2f}%, worst {errs[worst]:+.1f}% "
            f"(M={worst[0]}, v={worst[2]}, x/Z={worst[3]})"
        )


if __name__ == "__main__":
    main()
