"""Published split tables of drafter-training stacks (benchmarks/published_runs.json), projected
from each measured split to the others through `dflash-advise what-if --json`.

    python3 benchmarks/published.py [--tree DIR] [--json OUT]

For each measured split S of a table and each mode, the per-role rates of S go to what-if
(--targets/--drafters of S, --target-bps/--drafter-bps, --next-run: the split for a new run), and
every other measured split T of the same table and config is read off the projected table:

- ``values``: plain numbers only. The side S was bound by gets the measured throughput (its
  capacity); the other side gets the throughput too, the only value the data gives (it is a
  lower bound of that side's capacity). Reported, not counted in the check: a lower bound given
  as a capacity is another input, a balanced pipeline the source never stated, and any move
  from a balanced split is sure to lose; a faithful user gives it as a bound.
- ``bounds``: the other side as a lower bound ``'>=X'``.
- ``ranges``: as ``bounds``, and a side whose capacity the source states as a range gets
  ``lo..hi``.

``bounds`` and ``ranges`` run only when a trial call shows the CLI accepts that form. Reported
per (S, T, mode): the projected b/s at T and its error against the measured; whether the
measured value is inside the 95% interval; the interval's width (share of the projection);
the naive bound min(N x p, M x c) from S's per-GPU rates (values); the pick (the recommended
split; whether it is measured, and if so within 2% of the best measured split of the table), the
verdict and, where the advisor states one, ``recommendation.p_best``. Issue 34's check: no pick
stated at least 80% likely (``CONFIDENT``) measured more than 2% below the best, one count per
what-if call in the modes a faithful user would give (``COUNTED``: ``bounds``, ``ranges``).
``--tree`` runs another checkout's advisor (PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "published_runs.json"
PICK_TOL = 0.02  # a pick within 2% of the best measured split counts as right
MODES = ("values", "bounds", "ranges")
CONFIDENT = 0.8  # issue 34: no pick stated at least this likely may measure > PICK_TOL below the best
COUNTED = ("bounds", "ranges")  # the check's modes: the other side as a bound (module docstring)


def what_if(
    tree: Path, targets: int, drafters: int, target_bps: str, drafter_bps: str, gpus: int
) -> tuple[int, dict | None, str]:
    cmd = [
        sys.executable,
        "-m",
        "advisor",
        "what-if",
        "--targets",
        str(targets),
        "--drafters",
        str(drafters),
        "--target-bps",
        target_bps,
        "--drafter-bps",
        drafter_bps,
        "--gpus",
        str(gpus),
        "--next-run",
        "--json",
    ]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, cwd=tree)  # -m puts cwd first
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else None), r.stderr.strip()


def accepted_modes(tree: Path) -> list[str]:
    """The modes this checkout's what-if accepts, by trial calls."""
    out = ["values"]
    if what_if(tree, 1, 1, ">=1", "1", 2)[0] == 0:
        out.append("bounds")
        if what_if(tree, 1, 1, "1..2", "1", 2)[0] == 0:
            out.append("ranges")
    return out


def fmt(x: float) -> str:
    return f"{x:g}"


def rate_arg(rate: dict, mode: str) -> str:
    if mode == "ranges" and "range" in rate:
        lo, hi = rate["range"]
        return f"{fmt(lo)}..{fmt(hi)}"
    if "value" in rate:
        return fmt(rate["value"])
    return fmt(rate["lower"]) if mode == "values" else f">={fmt(rate['lower'])}"


def plain(rate: dict) -> float:
    return rate["value"] if "value" in rate else rate["lower"]


def row_of(adv: dict, targets: int, drafters: int) -> dict | None:
    return next((s for s in adv["splits"] if s["roles"] == {"target": targets, "drafter": drafters}), None)


def compare(table: dict, src: dict, adv: dict, mode: str, group: list[dict]) -> list[dict]:
    best = max(s["bps"] for s in group)
    pick = adv["recommendation"]["roles"]
    picked = next((s for s in group if {"target": s["targets"], "drafter": s["drafters"]} == pick), None)
    p = plain(src["rates"]["target"]) / src["targets"]
    c = plain(src["rates"]["drafter"]) / src["drafters"]
    out = []
    for t in group:
        if t is src:
            continue
        row = row_of(adv, t["targets"], t["drafters"])
        bps, lo, hi = (row or {}).get("bps"), (row or {}).get("bps_low"), (row or {}).get("bps_high")
        naive = min(t["targets"] * p, t["drafters"] * c)
        out.append(
            {
                "table": table["id"],
                "mode": mode,
                "from": f"{src['targets']}+{src['drafters']}",
                "to": f"{t['targets']}+{t['drafters']}",
                "measured": t["bps"],
                "projected": bps,
                "error": None if bps is None else (bps - t["bps"]) / t["bps"],
                "inside": None if lo is None or hi is None else lo <= t["bps"] <= hi,
                "width": None if bps in (None, 0) or lo is None or hi is None else (hi - lo) / bps,
                "naive": naive,
                "naive_error": (naive - t["bps"]) / t["bps"],
                "pick": f"{pick['target']}+{pick['drafter']}",
                "pick_measured": picked is not None,
                "pick_ok": None if picked is None else picked["bps"] >= best * (1 - PICK_TOL),
                "cannot_tell": adv["recommendation"]["verdict"] == "cannot-tell",
                "verdict": adv["recommendation"]["verdict"],
                "p_best": adv["recommendation"].get("p_best"),
                "args": adv.get("_args"),
            }
        )
    return out


def run(tree: Path) -> tuple[list[str], list[dict], list[str]]:
    data = json.loads(DATA.read_text())
    modes = accepted_modes(tree)
    rows, errors = [], []
    for table in data["tables"]:
        configs = sorted({s["config"] for s in table["splits"]})
        for config in configs:
            group = [s for s in table["splits"] if s["config"] == config]
            if len(group) < 2:
                continue
            for src in group:
                for mode in modes:
                    ta, da = rate_arg(src["rates"]["target"], mode), rate_arg(src["rates"]["drafter"], mode)
                    rc, adv, err = what_if(tree, src["targets"], src["drafters"], ta, da, table["gpus"])
                    if adv is None:
                        errors.append(f"{table['id']} {mode} from {src['targets']}+{src['drafters']}: rc {rc}: {err}")
                        continue
                    adv["_args"] = f"--target-bps {ta} --drafter-bps {da}"
                    rows += compare(table, src, adv, mode, group)
    return modes, rows, errors


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def counted_calls(rows: list[dict]) -> list[dict]:
    """One row per what-if call (table, mode, from) of the ``COUNTED`` modes that states a
    ``recommendation.p_best`` (a call's rows share its pick and odds)."""
    calls = {(r["table"], r["mode"], r["from"]): r for r in rows if r["mode"] in COUNTED and r["p_best"] is not None}
    return list(calls.values())


def confident_misses(rows: list[dict], at: float = CONFIDENT) -> tuple[int, list[dict]]:
    """Picks stated at least ``at`` likely in the ``COUNTED`` modes (`counted_calls`) and their
    misses: a measured pick more than PICK_TOL below the best measured split."""
    calls = [r for r in counted_calls(rows) if r["p_best"] >= at]
    return len(calls), [r for r in calls if r["pick_measured"] and not r["pick_ok"]]


def counted_brier(rows: list[dict]) -> tuple[int, int, float | None]:
    """Over the counted calls (`counted_calls`) whose pick the table measured: how many, how many
    picks lie within PICK_TOL of the best, and the Brier score of the stated ``p_best`` against that."""
    calls = [r for r in counted_calls(rows) if r["pick_measured"]]
    if not calls:
        return 0, 0, None
    right = sum(bool(r["pick_ok"]) for r in calls)
    return len(calls), right, sum((r["p_best"] - bool(r["pick_ok"])) ** 2 for r in calls) / len(calls)


def markdown(rows: list[dict]) -> str:
    head = (
        "| table | mode | from -> to | what-if rates | measured | projected (error) | inside 95% | width "
        "| naive bound (error) | pick (ok) | verdict (p_best) |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        proj = "-" if r["projected"] is None else f"{r['projected']:.2f} ({pct(r['error'])})"
        inside = "-" if r["inside"] is None else ("yes" if r["inside"] else "no")
        width = "-" if r["width"] is None else f"{100 * r['width']:.1f}%"
        ok = "unmeasured" if not r["pick_measured"] else ("yes" if r["pick_ok"] else "no")
        odds = "" if r["p_best"] is None else f" ({r['p_best']:.2f})"
        lines.append(
            f"| {r['table']} | {r['mode']} | {r['from']} -> {r['to']} | `{r['args']}` | {r['measured']:g} "
            f"| {proj} | {inside} | {width} | {r['naive']:.2f} ({pct(r['naive_error'])}) "
            f"| {r['pick']} ({ok}) | {r['verdict']}{odds} |"
        )
    n, misses = confident_misses(rows)
    if any(r["p_best"] is not None for r in rows):
        lines.append(
            f"\nPicks stated >= {CONFIDENT:.0%} likely ({', '.join(COUNTED)}): {n} what-if calls; of those "
            f"measured more than "
            f"{PICK_TOL:.0%} below the best: {len(misses)}"
            + "".join(f"; {m['table']} {m['mode']} from {m['from']}: {m['pick']}" for m in misses)
            + "."
        )
        calls, right, score = counted_brier(rows)
        if score is not None:
            lines.append(
                f"Counted calls with a measured pick: {calls}, {right} of them within {PICK_TOL:.0%} of the best; "
                f"Brier of their stated p_best {score:.3f}."
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=ROOT, help="checkout whose advisor runs (default: this one)")
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    a = ap.parse_args()
    modes, rows, errors = run(a.tree.resolve())
    print(f"advisor tree: {a.tree}; what-if accepts: {', '.join(modes)}\n")
    print(markdown(rows))
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    if a.json:
        a.json.write_text(json.dumps({"modes": modes, "rows": rows, "errors": errors}, indent=1))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
