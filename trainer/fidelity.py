"""Emulation fidelity: an emulated split against the zero-overhead simulation of the same model.

    python -m trainer.fidelity fixtures/reference-7x1.jsonl --splits 7-1 6-2 --hs-queue-depth 2 \
        --time-scale 0.05 --steps 600

Truth: `advisor.model.simulate.simulate` (exact discrete-event simulation, no wall clock) of the model
the emulated workers follow: the profile of SOURCE (`trainer.emulate.load_profile`), per batch
tokens drawn from the source's batches and service times t0 + c * tokens + residual, residuals
drawn by permutation passes, TRUTH_BATCHES batches, the same queue capacities, no sync. So any
gap between truth and the emulated run is the emulator's own error (wall-clock overhead, pacing),
not a modelling difference.

Measured: `dflash-train --emulate SOURCE` at each split, read with
`trainer.emulate.steady_throughput`. For the first split's emulated log it also prints the
advisor's projection of the other splits (`advisor.advise(..., hs_cap=...)`) against the truth.
Prints one JSON object per line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

TRUTH_BATCHES = 40000


def truth_bps(profile, n: int, m: int, hs_cap: int, pre_cap: int, seed: int = 1) -> float:
    from advisor.model.simulate import simulate

    from .emulate import Permuted

    rng = np.random.default_rng([seed, 0xF1])
    pick = Permuted(range(len(profile.batch_tokens)), rng)
    tokens = np.array([profile.batch_tokens[pick.draw()] for _ in range(TRUTH_BATCHES)], dtype=float)
    times = {}
    for role in ("target", "drafter"):
        f = profile.fit(role)
        r = Permuted(f.residuals_s, rng)
        times[role] = np.maximum(0.0, f.t0_s + f.per_token_s * tokens + np.array([r.draw() for _ in tokens]))
    res = simulate(
        target_s=times["target"],
        drafter_s=times["drafter"],
        n_target=n,
        n_drafter=m,
        hs_cap=hs_cap,
        pre_cap=pre_cap,
        tokens=tokens,
    )
    return float(res.bps)


def emulate(source: str, n: int, m: int, hs_cap: int, scale: float, steps: int, out: Path) -> tuple[float, float]:
    cmd = [
        sys.executable,
        "-m",
        "trainer",
        "--no-progress",
        "--emulate",
        source,
        "--targets",
        str(n),
        "--drafters",
        str(m),
        "--time-scale",
        str(scale),
        "--steps",
        str(steps),
        "--sync-every",
        "0",
        "--hs-queue-depth",
        str(hs_cap),
        "--out",
        str(out),
    ]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    from advisor.ingest.load import load_log

    from .emulate import steady_throughput

    return steady_throughput(load_log(out))[0], wall


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m trainer.fidelity")
    ap.add_argument("source")
    ap.add_argument("--splits", nargs="+", default=["7-1", "6-2"])
    ap.add_argument("--hs-queue-depth", type=int, default=2)
    ap.add_argument("--pre-queue-depth", type=int, default=50)
    ap.add_argument("--time-scale", type=float, default=0.05)
    ap.add_argument("--steps", type=int, default=600)
    args = ap.parse_args(argv)

    from .emulate import load_profile

    profile = load_profile(args.source)
    splits = [tuple(int(x) for x in s.split("-")) for s in args.splits]
    truths = {s: truth_bps(profile, s[0], s[1], args.hs_queue_depth, args.pre_queue_depth) for s in splits}
    with tempfile.TemporaryDirectory() as tmp:
        first_log = None
        for n, m in splits:
            out = Path(tmp) / f"emu-{n}x{m}.jsonl"
            bps, wall = emulate(args.source, n, m, args.hs_queue_depth, args.time_scale, args.steps, out)
            first_log = first_log or out
            print(
                json.dumps(
                    {
                        "split": f"{n}-{m}",
                        "truth_bps": round(truths[(n, m)], 5),
                        "emulated_bps": round(bps, 5),
                        "error_pct": round(100 * (bps / truths[(n, m)] - 1), 2),
                        "wall_s": round(wall, 1),
                    }
                ),
                flush=True,
            )
        from advisor.advice import advise

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            adv = advise(first_log, gpus=sum(splits[0]), hs_cap=args.hs_queue_depth)
        for _, row in adv.splits.iterrows():
            key = (int(row["n_target"]), int(row["n_drafter"]))
            if key in truths and key != splits[0]:
                print(
                    json.dumps(
                        {
                            "advised_from": "-".join(map(str, splits[0])),
                            "split": f"{key[0]}-{key[1]}",
                            "truth_bps": round(truths[key], 5),
                            "advised_bps": round(float(row["bps"]), 5),
                            "error_pct": round(100 * (float(row["bps"]) / truths[key] - 1), 2),
                        }
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
