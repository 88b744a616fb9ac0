"""Calibration of the barrier-tail correction (`advisor.model.chain.barrier_rate`) against exact simulation.

Data-parallel drafters syncing every k steps, at splits where they are starved or near balance:
each split is simulated (`tests/synth.py`'s `run`, 16000-24000 batches of the true generator) and
compared with the analytic projection from the generator's true rates: the chain alone, the
chain capped by the pure fluid tail (D = a k / 2), and by the calibrated tail (the module's).

    python3 benchmarks/barrier_tail.py          # about 20 s on 2 cores

Grid: G = 16, 32, 64 with k = 4-64 (q_hs 4, 8, 20); service SCV 0.01 and 0.5 at two points;
q_hs 2 and 40; slower drafters; G = 128 (a up to 20) and q_hs 4 at G = 64.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the synthetic generator (tests/synth.py)

from synth import Scenario, ServiceModel, TokenModel, draw, run  # noqa: E402

from advisor.model.chain import barrier_rate, chain  # noqa: E402
from advisor.stats import expected_max_normal  # noqa: E402


def cases():
    out = []
    for k in (4, 8, 16, 32, 64):
        out += [
            (16, k, 4, 1.0, (12, 10, 8, 6), {}),
            (32, k, 8, 1.0, (24, 20, 16, 12), {}),
            (64, k, 20, 2.0, (44, 40, 36, 30, 24), {}),
        ]
    for scv in (0.01, 0.5):
        out += [
            (32, 16, 8, 1.0, (24, 20, 16, 12), dict(scv=scv, cv=0.05)),
            (64, 32, 20, 2.0, (44, 40, 36, 30, 24), dict(scv=scv, cv=0.05)),
        ]
    out += [
        (32, 16, 2, 1.0, (24, 20, 16, 12), {}),
        (32, 16, 40, 1.0, (24, 20, 16, 12), {}),
        (32, 16, 8, 1.0, (24, 20, 16, 12), dict(dft=4.0)),
    ]
    out += [(128, k, 20, 2.0, (100, 90, 80, 70), dict(nb=24000)) for k in (8, 16, 32, 64)]
    for k in (16, 32):
        out += [(64, k, 20, 2.0, (44, 40, 36, 30), dict(dft=4.0)), (64, k, 4, 2.0, (44, 40, 36, 30), {})]
    return out


def measure(g, k, b, sync_s, splits, scv=0.1, cv=0.2, tgt=10.0, dft=2.0, nb=16000):
    tm = TokenModel(budget=32768, mean=31200.0, cv=cv, seq_len=1926.0)
    s = Scenario(
        name="tail",
        n_target=g - 4,
        n_drafter=4,
        tokens=tm,
        hs_cap=b,
        pre_cap=8,
        sync_every=k,
        sync_s=sync_s,
        sync_scv=0.1,
        n_batches=6000,
        seed=5,
        target=ServiceModel.from_mean(tgt, tm.mean, overhead_share=0.1, scv=scv),
        drafter=ServiceModel.from_mean(dft, tm.mean, overhead_share=0.1, scv=scv),
    )
    d = draw(replace(s, seed=77), nb, warmup=False)
    rows = []
    for n in splits:
        m = g - n
        truth = run(s.split(n, m), sample=d, warmup_batches=nb // 10).bps
        lam, c, t_ar = n / tgt, 1 / dft, s.allreduce_s(m)
        svc = scv + 0.81 * cv**2  # the step's SCV with the token-count share
        sync = k / c / (k / c + math.sqrt(k) * math.sqrt(svc) / c * expected_max_normal(m) + t_ar)
        x_chain = chain(n, m, lam / n, c * sync, b, svc, svc).x_bps
        a = min(lam / c, m)
        fluid = lam * m * k / (m * k + max(0.0, a * k / 2 + lam * t_ar - b - n))
        rows.append((truth, x_chain, min(x_chain, fluid), min(x_chain, barrier_rate(n, m, lam, c, k, t_ar, b))))
    return rows


def main() -> None:
    t0 = time.perf_counter()
    rows = [r for g, k, b, s, sp, kw in cases() for r in measure(g, k, b, s, sp, **kw)]
    arr = np.array(rows)
    print(f"{len(rows)} splits, {time.perf_counter() - t0:.0f} s")
    print("| projection | mean abs err | 90th pct | max |")
    print("|---|---:|---:|---:|")
    for j, name in ((1, "chain alone"), (2, "chain, fluid tail a k / 2"), (3, "chain, calibrated tail (advisor)")):
        e = np.abs(100 * (arr[:, j] / arr[:, 0] - 1))
        print(f"| {name} | {e.mean():.2f}% | {np.percentile(e, 90):.2f}% | {e.max():.1f}% |")


if __name__ == "__main__":
    main()
