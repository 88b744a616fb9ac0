"""Projections across two nodes vs the trainer's emulation of them (issue 19).

The emulation (`dflash-train --emulate`, `trainer/placement.py`) runs the real trainer processes
with compute replaced by a source log's service times and every cross-node hand-off sent over one
bandwidth-limited link. This script:

1. emulates the source at a reference split on two nodes (default placement) and asks the
   advisor for every split from that log alone: ``dflash-advise advise REF --gpus G --json``;
2. emulates every split of G, at every placement of it on the two nodes (``--placements all``:
   which targets and drafters sit on node 0, up to swapping the nodes; engines of a role are
   interchangeable) or at the default rule only (``--placements default``);
3. prints, per split and placement, the advisor's projection, the measured rate (the advisor's own
   steady-window reading of the emulated log) and the error, and exits 1 if any |error| exceeds
   ``--tol`` (3%).

    python3 benchmarks/validate_link.py --source fixtures/h200-1x1.jsonl --gpus 8 --gpus-per-node 4 \\
        --link-bytes-s 4e9 --placements all
    python3 benchmarks/validate_link.py ... --emulate-only     # measured rates only, no advisor

Matching a projection to a placement: a row of ``splits`` whose ``roles`` are the split's; if the
row (or an entry of its ``placements`` list) has a ``placement`` (role -> node per engine), it
is compared by the number of each role's engines per node, up to swapping the nodes; a row with
no placement is the advisor's projection of the default rule and is compared with that only.
A placement the advisor did not project is listed with "-" and not counted.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from trainer.placement import PlacementError, place  # noqa: E402

TOL = 0.03


def splits_of(gpus: int, target_tp: int) -> list[tuple[int, int]]:
    return [(n, gpus - n * target_tp) for n in range(1, gpus) if gpus - n * target_tp >= 1]


def placement_text(n: int, m: int, a: int, b: int) -> str:
    """a of n targets and b of m drafters on node 0, the rest on node 1."""
    return f"target={','.join(['0'] * a + ['1'] * (n - a))};drafter={','.join(['0'] * b + ['1'] * (m - b))}"


def placements_on_two_nodes(n: int, m: int, target_tp: int, gpus_per_node: int) -> list[str]:
    """Every placement of n targets (k GPUs each) and m drafters on two nodes, one per class of
    (targets, drafters) on node 0 up to swapping the nodes."""
    seen, out = set(), []
    for a in range(n + 1):
        for b in range(m + 1):
            key = max((a, b), (n - a, m - b))   # node 0 holds the more targets
            if key in seen:
                continue
            try:
                place({"target": n, "drafter": m}, {"target": target_tp}, gpus_per_node, placement_text(n, m, a, b))
            except PlacementError:
                continue
            seen.add(key)
            out.append(placement_text(*((n, m) + key)))
    return out


def node_counts(placement: dict) -> frozenset:
    """Engines of each role per node, as a set invariant under swapping two nodes."""
    per = []
    for node in sorted({x for nodes in placement.values() for x in nodes}):
        per.append(tuple(sorted((role, sum(1 for x in nodes if x == node)) for role, nodes in placement.items())))
    return frozenset(per)


def emulate(src: Path, n: int, m: int, args, placement: str | None, out: Path) -> Path:
    cmd = [sys.executable, "-m", "trainer", "--no-progress", "--emulate", str(src), "--targets", str(n),
           "--drafters", str(m), "--time-scale", str(args.time_scale), "--steps", str(args.steps),
           "--sync-every", "0", "--gpus-per-node", str(args.gpus_per_node), "--link-bytes-s", str(args.link_bytes_s),
           "--out", str(out), "--force"]
    if args.target_tp > 1:
        cmd += ["--target-tp", str(args.target_tp)]
    if placement:
        cmd += ["--placement", placement]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"validate_link: emulation {n}-{m} {placement or 'default'} failed:\n{r.stderr}")
    return out


def measured_bps(log_path: Path) -> float:
    from advisor.fit.pipeline import fit_logs
    from advisor.ingest.load import load_log

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(fit_logs([load_log(log_path)]).observed[0].bps)


def advisor_rows(ref: Path, gpus: int) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "advisor", "advise", str(ref), "--gpus", str(gpus), "--json"],
                       cwd=ROOT, capture_output=True, text=True)
    if not r.stdout.strip():
        raise SystemExit(f"validate_link: dflash-advise gave no JSON (exit {r.returncode}):\n{r.stderr}")
    return json.loads(r.stdout)["splits"]


def projection(rows: list[dict], n: int, m: int, placement: dict, default: dict) -> float | None:
    """The advisor's b/s for split n-m at ``placement`` (see the module docstring), or None."""
    want = node_counts(placement)
    for row in rows:
        if row["roles"].get("target") != n or row["roles"].get("drafter") != m:
            continue
        for entry in [row, *row.get("placements", [])]:
            if entry.get("placement") is not None and node_counts(entry["placement"]) == want:
                return float(entry["bps"])
        if row.get("placement") is None and not row.get("placements") and node_counts(default) == want:
            return float(row["bps"])
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", default="fixtures/h200-1x1.jsonl")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--gpus-per-node", type=int, default=4)
    ap.add_argument("--link-bytes-s", type=float, default=4e9)
    ap.add_argument("--target-tp", type=int, default=1)
    ap.add_argument("--ref", default=None, help="reference split N-M (default: the middle split)")
    ap.add_argument("--placements", choices=("default", "all"), default="all")
    ap.add_argument("--steps", type=int, default=500, help="drafter steps per emulated run")
    ap.add_argument("--time-scale", type=float, default=0.01)
    ap.add_argument("--tol", type=float, default=TOL)
    ap.add_argument("--emulate-only", action="store_true", help="measured rates only (no advisor)")
    ap.add_argument("--keep", default=None, help="keep the emulated logs in this folder")
    args = ap.parse_args(argv)
    src = (ROOT / args.source) if not Path(args.source).is_absolute() else Path(args.source)
    splits = splits_of(args.gpus, args.target_tp)
    ref = tuple(int(x) for x in args.ref.split("-")) if args.ref else splits[len(splits) // 2]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        rows = [] if args.emulate_only else advisor_rows(emulate(src, *ref, args, None, folder / "ref.jsonl"),
                                                        args.gpus)
        print("| split | placement | predicted b/s | measured b/s | error |")
        print("|---|---|---:|---:|---:|")
        errs = []
        for n, m in splits:
            default = place({"target": n, "drafter": m}, {"target": args.target_tp}, args.gpus_per_node)
            texts = [None] if args.placements == "default" else placements_on_two_nodes(
                n, m, args.target_tp, args.gpus_per_node)
            for i, text in enumerate(texts):
                p = place({"target": n, "drafter": m}, {"target": args.target_tp}, args.gpus_per_node, text)
                x = measured_bps(emulate(src, n, m, args, text, folder / f"{n}x{m}-p{i}.jsonl"))
                pred = None if args.emulate_only else projection(rows, n, m, p, default)
                label = " | ".join(f"node {k}: {sum(v == k for v in p['target'])}T {sum(v == k for v in p['drafter'])}D"
                                   for k in (0, 1))
                if pred is None:
                    print(f"| {n}-{m} | {label} | - | {x:.4f} | - |", flush=True)
                    continue
                err = pred / x - 1
                errs.append(abs(err))
                print(f"| {n}-{m} | {label} | {pred:.4f} | {x:.4f} | {100 * err:+.2f}% |", flush=True)
    if errs:
        print(f"\n{len(errs)} projections: mean |error| {100 * sum(errs) / len(errs):.2f}%, "
              f"max {100 * max(errs):.2f}% (tolerance {100 * args.tol:g}%)")
        return 1 if max(errs) > args.tol else 0
    if not args.emulate_only:
        print("\nno projection matched a split and placement: the advisor did not project these placements")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
