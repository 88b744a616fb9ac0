"""Projection speed: fit once, then project every split of G GPUs with intervals (3 model
evaluations per split), for G = 8 to 128, and for a log with syncing drafters at G = 8 and 64;
and whole `advise()` calls.

    python3 benchmarks/projection.py

Timings are medians of ``REPEATS`` in-process runs, reported with the ratio to G = 8.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the synthetic generator (tests/synth.py)

from advisor.advice import advise  # noqa: E402
from advisor.project.table import project  # noqa: E402

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
        st = dataclasses.replace(adv.settings, gpus=g)
        s = median_s(lambda: project(adv.fit, st))
        base = base or s
        rows.append((f"project all splits, G={g}", s, s / base))
    s_adv = median_s(lambda: advise(ref))
    rows.append(("advise(reference-7x1.jsonl), G=8, load+fit+project+recommend", s_adv, s_adv / base))
    s_adv64 = median_s(lambda: advise(ref, gpus=64))
    rows.append(("advise(reference-7x1.jsonl), G=64", s_adv64, s_adv64 / base))
    s_ex = median_s(lambda: advise(ref, exact=True))
    rows.append(("advise(..., exact=True), G=8 (7 exact simulations)", s_ex, s_ex / base))
    # synchronised drafters: decision-relevant splits are refined by exact simulation
    import tempfile

    from synth import Scenario, ServiceModel, TokenModel, write_log

    tm = TokenModel(budget=32768, mean=31200.0, cv=0.2, seq_len=1926.0)
    sc = Scenario(
        name="sync",
        n_target=24,
        n_drafter=8,
        tokens=tm,
        hs_cap=20,
        pre_cap=50,
        sync_every=4,
        sync_s=1.0,
        sync_scv=0.1,
        n_batches=24_000,
        seed=108,
        target=ServiceModel.from_mean(10.0, tm.mean, overhead_share=0.1, scv=0.1),
        drafter=ServiceModel.from_mean(2.0, tm.mean, overhead_share=0.1, scv=0.1),
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sync.jsonl"
        write_log(path, sc)
        # the barrier-tail correction (advisor.model.chain.barrier_rate) runs only where drafters sync
        adv_sync = advise(path)
        for g in (8, 64):
            st = dataclasses.replace(adv_sync.settings, gpus=g)
            s_p = median_s(lambda: project(adv_sync.fit, st))
            rows.append((f"project all splits of the 24-8 sync log, G={g}", s_p, s_p / base))
        for g in (32, 64):
            s_sync = median_s(lambda: advise(path, gpus=g))
            rows.append(
                (
                    f"advise(24-8 log with drafter sync every 4 steps), G={g}, with exact refinement",
                    s_sync,
                    s_sync / base,
                )
            )
    print("| what | median s | ratio to G=8 projection |")
    print("|---|---:|---:|")
    for name, s, r in rows:
        print(f"| {name} | {s:.3f} | {r:.1f} |")


if __name__ == "__main__":
    main()
