"""Projections vs measured runs of the real trainer's emulation mode (issue 4).

For each source log (a real H200 run, the synthetic reference case), the advisor projects every
split of G GPUs from that log alone; then `dflash-train --emulate SOURCE --targets N --drafters M`
runs each split for real: the trainer's own processes, bounded queues, blocking and (here
disabled) sync, with each worker's compute replaced by service times drawn from the source log.
The measured throughput is the advisor's own steady-window reading of the emulated log.

    python3 benchmarks/validate_emulation.py            # -> table on stdout (BENCHMARKS.md)
    python3 benchmarks/validate_emulation.py --quick    # fewer steps

Emulated time runs ``TIME_SCALE`` x faster than real time; logs are in emulated seconds.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.advice import advise  # noqa: E402
from advisor.fit.pipeline import fit_logs  # noqa: E402
from advisor.ingest.load import load_log  # noqa: E402

SOURCES = (  # (log, G, time scale, q_hs depth: None = the log's)
    ("fixtures/h200-2x1.jsonl", 4, 0.2, None),
    ("fixtures/reference-7x1.jsonl", 8, 0.02, None),
    ("fixtures/cpu-2x1.jsonl", 4, 0.5, 1),  # bursty CPU step times, one-slot q_hs
)


def measure(src: Path, n: int, m: int, steps: int, scale: float, hs: int | None, tmp: Path) -> float:
    out = tmp / f"{src.stem}-{n}x{m}.jsonl"
    cmd = [
        "dflash-train",
        "--emulate",
        str(src),
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
        "--no-progress",
        "--out",
        str(out),
    ]
    if hs is not None:
        cmd += ["--hs-queue-depth", str(hs)]
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_logs([load_log(out)]).observed[0].bps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*", help="source log names (stems) to run")
    args = ap.parse_args()
    print("| source | G | split | predicted b/s | measured b/s | error | naive bound b/s | bound error |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    errs = []
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for rel, g, scale, hs in SOURCES:
            src = ROOT / rel
            if args.only and src.stem not in args.only:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                adv = advise(src, gpus=g, hs_cap=hs)
            for _, row in adv.splits.iterrows():
                n, m = int(row["n_target"]), int(row["n_drafter"])
                steps = 200 if args.quick else 500  # drafter steps, all drafters together
                x = measure(src, n, m, steps, scale, hs, Path(tmp))
                err = 100 * (row["bps"] / x - 1)
                berr = 100 * (row["bound_bps"] / x - 1)
                errs.append(abs(err))
                print(
                    f"| {rel}{'' if hs is None else f' (q_hs {hs})'} | {g} | {n}-{m} | {row['bps']:.4f} | {x:.4f} | "
                    f"{err:+.2f}% | "
                    f"{row['bound_bps']:.4f} | {berr:+.2f}% |",
                    flush=True,
                )
    print(
        f"\n{len(errs)} splits: mean |error| {sum(errs) / len(errs):.2f}%, max {max(errs):.2f}%; "
        f"wall {time.perf_counter() - t_all:.0f} s"
    )


if __name__ == "__main__":
    main()
