"""Projection speed: fit once, then project every split of G GPUs with intervals (3 model
evaluations per split), for G = 8 and G = 64; and a whole `advise()` call on the reference log.

    python3 benchmarks/projection.py

Timings are medians of ``REPEATS`` in-process runs, reported with the ratio to G = 8.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.advice import advise  # noqa: E402
from advisor.project import project  # noqa: E402

REPEATS = 7


def median_s(fn) -> float:
    out = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ref = ROOT / "fixtures" / "reference-7x1.jsonl"
    adv = advise(ref)
    rows = []
    base = None
    for g in (8, 16, 32, 64, 128):
        s = median_s(lambda: project(adv.fit, g))
        base = base or s
        rows.append((f"project all splits, G={g}", s, s / base))
    s_adv = median_s(lambda: advise(ref))
    rows.append(("advise(reference-7x1.jsonl), G=8, load+fit+project+recommend", s_adv, s_adv / base))
    s_adv64 = median_s(lambda: advise(ref, gpus=64))
    rows.append(("advise(reference-7x1.jsonl), G=64", s_adv64, s_adv64 / base))
    s_ex = median_s(lambda: advise(ref, exact=True))
    rows.append(("advise(..., exact=True), G=8 (7 exact simulations)", s_ex, s_ex / base))
    print("| what | median s | ratio to G=8 projection |")
    print("|---|---:|---:|")
    for name, s, r in rows:
        print(f"| {name} | {s:.3f} | {r:.1f} |")


if __name__ == "__main__":
    main()
