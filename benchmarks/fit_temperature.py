"""The fit of the odds' temperature (`advisor.decide.odds.STEPS_TEMPERATURE`) on the real sweeps.

For each temperature T of ``--temperatures``, a copy of this tree's ``advisor`` package with the
constant set to T (`calibrate.patched_tree`) is scored by `benchmarks/calibrate.py` on the sweeps of
``fixtures/sweep/`` (every log alone and every pair of splits' first repeats; ``--sweep`` picks
some), each source's advice cached as calibrate.py caches it. The objective (BENCHMARKS.md 19.6) is
the sum of two Brier scores: the recommendation's ``p_best`` against "the pick is within 2% of the
best", and every projected split's own ``p_best`` against whether it is. Reported:

- the objective per T over all the sweeps scored (the fit: the smallest);
- leave one family out (`calibrate.families`: the sweeps sharing preset, queue depths, sync
  cadence, engine size, token budget and host): for each family, the T that the other families'
  objective chooses, and the held-out reliability table of the recommendation's ``p_best`` (each
  family's cases at the T the others chose) with its Brier score.

`benchmarks/calibrate.py` makes the same choice with the level correlation fitted beside it, and
scores the held-out families in full; this script is the temperature alone.

    python3 benchmarks/fit_temperature.py                  # every sweep, six temperatures
    python3 benchmarks/fit_temperature.py --temperatures 0.2 0.35 --sweep ded16 --sweep tp2g13 --no-pairs
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibrate  # a script beside this one

ROOT = calibrate.ROOT
DEFAULT_TEMPERATURES = (0.15, 0.2, 0.25, 0.3, 0.35, 0.45)
stated_pairs = calibrate.stated_pairs
objective = calibrate.objective
leave_one_out = calibrate.leave_one_out


def patched_tree(dest: Path, temperature: float, root: Path = ROOT) -> Path:
    """A copy of ``root``'s ``advisor`` package under ``dest`` with ``STEPS_TEMPERATURE`` set to
    ``temperature`` (`calibrate.patched_tree`); returns ``dest``."""
    return calibrate.patched_tree(dest, {"STEPS_TEMPERATURE": temperature}, root)


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
        f"Fitted: T = {fit['best']:g}. Left out one family at a time, the others choose: "
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
    ap.add_argument("--cache", type=Path, default=calibrate.CACHE_DIR, help="advice cache folder")
    ap.add_argument("--no-cache", action="store_true", help="advise every source afresh, keep nothing")
    args = ap.parse_args(argv)
    sweeps = calibrate.real_sweeps()
    if any(n not in sweeps for n in args.sweep or []):
        print(f"no real sweep named {', '.join(n for n in args.sweep if n not in sweeps)}", file=sys.stderr)
        return 2
    chosen = {n: sweeps[n] for n in args.sweep} if args.sweep else sweeps
    fams = calibrate.families(list(chosen))
    if len(fams) < 2:
        print(f"need sweeps of two or more families (have {len(fams)}: {fams[0].name})", file=sys.stderr)
        return 2
    cache = None if args.no_cache else args.cache
    by_t: dict[float, dict] = {}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        for t in args.temperatures:
            tree = patched_tree(Path(tmp) / f"t{t:g}", t)
            print(f"T = {t:g}: scoring {len(chosen)} sweeps", file=sys.stderr)
            warm = calibrate.Advisors(tree)
            try:
                scored = {
                    n: calibrate.run_sweep(n, g, pool, root=tree, pairs=not args.no_pairs, cache=cache, run=warm)
                    for n, g in chosen.items()
                }
            finally:
                warm.close()
            by_t[t] = {
                f.name: tuple(sum(x, []) for x in zip(*(stated_pairs(scored[n]) for n in f.sweeps if n in scored)))
                for f in fams
            }
    fit = leave_one_out(by_t)
    print(render(fit))
    if args.json:
        args.json.write_text(json.dumps({**fit, "objective": {f"{t:g}": v for t, v in fit["objective"].items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
