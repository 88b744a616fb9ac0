"""The fit of the odds' temperature (`advisor.decide.odds.STEPS_TEMPERATURE`) on the real sweeps.

For each temperature T of ``--temperatures``, a copy of this tree's ``advisor`` package with the
constant set to T is scored by `benchmarks/calibrate.py` on the sweeps of ``fixtures/sweep/``
(every log alone and every pair of splits' first repeats; ``--sweep`` picks some). The objective
(BENCHMARKS.md 19.6) is the sum of two Brier scores: the recommendation's ``p_best`` against
"the pick is within 2% of the best", and every projected split's own ``p_best`` against whether it
is. Reported:

- the objective per T over all the sweeps scored (the fit: the smallest);
- leave one sweep out: for each sweep, the T that the other sweeps' objective chooses, and the
  held-out reliability table of the recommendation's ``p_best`` (each sweep's cases at the T the
  others chose) with its Brier score.

    python3 benchmarks/fit_temperature.py                  # every sweep, six temperatures
    python3 benchmarks/fit_temperature.py --temperatures 0.2 0.35 --sweep ded16 --sweep cpu16 --no-pairs

One temperature over every sweep takes about two minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibrate  # a script beside this one

ROOT = calibrate.ROOT
CONSTANT = re.compile(r"^STEPS_TEMPERATURE = [0-9.]+", re.M)
DEFAULT_TEMPERATURES = (0.15, 0.2, 0.25, 0.3, 0.35, 0.45)


def patched_tree(dest: Path, temperature: float, root: Path = ROOT) -> Path:
    """A copy of ``root``'s ``advisor`` package under ``dest`` with ``STEPS_TEMPERATURE`` set to
    ``temperature``; returns ``dest`` (a tree `calibrate.run_sweep` takes as its root)."""
    shutil.copytree(root / "advisor", dest / "advisor", ignore=shutil.ignore_patterns("__pycache__"))
    odds = dest / "advisor" / "decide" / "odds.py"
    text, n = CONSTANT.subn(f"STEPS_TEMPERATURE = {temperature!r}", odds.read_text())
    if n != 1:
        raise RuntimeError(f"{odds}: found {n} STEPS_TEMPERATURE lines, expected 1")
    odds.write_text(text)
    return dest


def stated_pairs(sweep: dict) -> tuple[list[tuple[float, bool]], list[tuple[float, bool]]]:
    """A scored sweep's (stated, within) pairs: the recommendations', and every split's (as
    `calibrate.summarize` takes them)."""
    cases = sweep["cases"]
    picks = [(c["p_best"], c["within"]) for c in cases if c["p_best"] is not None and c["within"] is not None]
    splits = [(s["p_best"], s["within"]) for c in cases for s in c["splits"] if s["p_best"] is not None]
    return picks, splits


def objective(pairs: dict[str, tuple[list, list]], leave_out: str | None = None) -> float:
    """Brier of the picks plus Brier of every split, over the sweeps of ``pairs`` but ``leave_out``."""
    picks = [p for name, (pk, _) in pairs.items() if name != leave_out for p in pk]
    splits = [p for name, (_, sp) in pairs.items() if name != leave_out for p in sp]
    return calibrate.brier(picks) + calibrate.brier(splits)


def leave_one_out(by_t: dict[float, dict[str, tuple[list, list]]]) -> dict:
    """The fit and its leave-one-sweep-out check from each temperature's pairs per sweep.

    Args:
        by_t: temperature -> sweep name -> (picks' pairs, splits' pairs) (`stated_pairs`).

    Returns:
        ``{"objective": {T: value}, "best": T, "chosen": {sweep: T}, "held_out": reliability
        rows, "held_out_brier": float}``; the held-out rows are `calibrate.reliability`'s over
        each sweep's picks at the T the other sweeps chose. A tie goes to the smaller T.
    """
    temps = sorted(by_t)
    names = list(next(iter(by_t.values())))
    chosen = {n: min(temps, key=lambda t: objective(by_t[t], n)) for n in names}
    held = [p for n in names for p in by_t[chosen[n]][n][0]]
    score = {t: objective(by_t[t]) for t in temps}
    return {
        "objective": score,
        "best": min(temps, key=score.get),
        "chosen": chosen,
        "held_out": calibrate.reliability(held),
        "held_out_brier": calibrate.brier(held),
    }


def render(fit: dict) -> str:
    """The fit as Markdown."""
    temps = list(fit["objective"])
    lines = [
        "| T | " + " | ".join(f"{t:g}" for t in temps) + " |",
        "|---|" + "---:|" * len(temps),
        "| Brier (pick) + Brier (splits) | "
        + " | ".join(f"**{v:.5f}**" if t == fit["best"] else f"{v:.5f}" for t, v in fit["objective"].items())
        + " |",
        "",
        f"Fitted: T = {fit['best']:g}. Left out one sweep at a time, the others choose: "
        + ", ".join(f"{n} {t:g}" for n, t in fit["chosen"].items())
        + ".",
        "",
        f"Held-out `p_best` of the recommendation (Brier {fit['held_out_brier']:.4f}):",
        "",
        *calibrate.rel_table(fit["held_out"]),
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--temperatures", type=float, nargs="+", default=list(DEFAULT_TEMPERATURES))
    ap.add_argument("--sweep", action="append", default=None, help="only this sweep (repeatable; default: all)")
    ap.add_argument("--no-pairs", action="store_true", help="single logs only")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="also write the fit here")
    args = ap.parse_args(argv)
    sweeps = calibrate.real_sweeps()
    chosen = {n: sweeps[n] for n in args.sweep} if args.sweep else sweeps
    if len(chosen) < 2 or any(n not in sweeps for n in chosen):
        print(f"need two or more of the sweeps {', '.join(sweeps)}", file=sys.stderr)
        return 2
    by_t: dict[float, dict] = {}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        for t in args.temperatures:
            tree = patched_tree(Path(tmp) / f"t{t:g}", t)
            print(f"T = {t:g}: scoring {len(chosen)} sweeps", file=sys.stderr)
            scored = [calibrate.run_sweep(n, g, pool, root=tree, pairs=not args.no_pairs) for n, g in chosen.items()]
            by_t[t] = {sw["name"]: stated_pairs(sw) for sw in scored}
    fit = leave_one_out(by_t)
    print(render(fit))
    if args.json:
        args.json.write_text(json.dumps({**fit, "objective": {f"{t:g}": v for t, v in fit["objective"].items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
