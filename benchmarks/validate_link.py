"""Does the link stage reproduce an emulated link-bound pipeline, and is the recommended placement
the best one? An exhaustive emulated check on 2 nodes.

    python3 benchmarks/validate_link.py --out /tmp/link            # 2 nodes x 8 GPUs, TP-2 targets
    python3 benchmarks/validate_link.py --out /tmp/link --quick    # 3 splits only

1. Profile: the trainer's emulation (`dflash-train --emulate SOURCE --target-tp 2 --gpus-per-node 8
   --link-bytes-s B`, one shared link, docs/log-schema.md) at one split and its default (packed)
   placement; the advisor fits it, the link's bandwidth measured from the log's ``xfer``.
2. Every split N x 2 + M = 16 and every placement of it on the two nodes
   (`advisor.project.placement.placements`) is emulated; its rate is the emulation's steady
   drafter throughput (`trainer.emulate.steady_throughput`), and the projection at that placement
   is `advisor.project.table.placed_split` from the profile's fit alone (the analytic link stage);
   beside it, `advisor.project.exact.simulate_placed_run` (exact simulation of the queue and link with
   the profile's resampled services), to tell the model's error from the emulation's dynamics.
3. Per split, the placement the advisor recommends (the table's) against the best emulated one.
   The emulation routes every batch through one shared q_hs, so where the table prefers node-local
   pipelines (the split's other layout) the shared layout's recommended placement is checked.

Pass: the advisor's rate at every split and placement (the exact simulation of the link,
`advisor.project.linked`, which the table uses near the best) within ``TOL_PCT`` (3%) of its
emulation, and at every split the recommended placement's emulated rate within ``NOISE_PCT`` of
the best emulated placement's (two placements closer than the emulation's own run-to-run noise
cannot be told apart). The analytic stage's error is reported beside it. Writes
``results.json`` and prints a table. Wall time: about 20-30 s per emulated run on a loaded 2-core
machine at --time-scale 0.02 (13 runs).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.advice import advise  # noqa: E402
from advisor.ingest.load import load_log  # noqa: E402
from advisor.model.link import Placement  # noqa: E402
from advisor.project.exact import gather_pools, simulate_placed_run  # noqa: E402
from advisor.project.linked import refine_placements  # noqa: E402
from advisor.project.placement import placements  # noqa: E402
from advisor.project.table import placed_split, project  # noqa: E402
from trainer.emulate import steady_throughput  # noqa: E402

TOL_PCT = 3.0
NOISE_PCT = 1.5
GPN, NODES, KP, KC = 8, 2, 2, 1


def placement_text(pl: Placement) -> str:
    """A Placement (engines per node) as the trainer's --placement text (a node per worker)."""
    t = [a for a, k in enumerate(pl.producers) for _ in range(k)]
    d = [a for a, k in enumerate(pl.consumers) for _ in range(k)]
    return f"target={','.join(map(str, t))};drafter={','.join(map(str, d))}"


def emulate(out: Path, args, n: int, m: int, pl: Placement | None) -> Path:
    if args.reuse and out.exists():
        return out
    cmd = [
        sys.executable,
        "-m",
        "trainer",
        "--emulate",
        args.source,
        "--targets",
        str(n),
        "--drafters",
        str(m),
        "--target-tp",
        str(KP),
        "--gpus-per-node",
        str(GPN),
        "--link-bytes-s",
        str(args.link_bytes_s),
        "--time-scale",
        str(args.time_scale),
        "--steps",
        str(args.steps),
        "--sync-every",
        "0",
        "--seed",
        str(args.seed),
        "-o",
        str(out),
        "--force",
        "--no-progress",
    ]
    if pl is not None:
        cmd += ["--placement", placement_text(pl)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--source", default="fixtures/reference-7x1.jsonl")
    ap.add_argument("--link-bytes-s", type=float, default=8e8)
    ap.add_argument("--time-scale", type=float, default=0.01)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="three splits only")
    ap.add_argument("--reuse", action="store_true", help="keep emulated logs already in --out (re-check only)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    profile = emulate(args.out / "profile-6x4.jsonl", args, 6, 4, None)
    adv = advise(profile)
    fit, settings = adv.fit, adv.settings
    pools = gather_pools(fit, adv.logs)
    rows = []
    for n, m in settings.engine_pairs():
        if args.quick and (n, m) not in ((7, 2), (6, 4), (4, 8)):
            continue
        emulated = []
        for i, pl in enumerate(placements(n, m, NODES, GPN, KP, KC)):
            log = emulate(args.out / f"{n}x{m}-p{i}.jsonl", args, n, m, pl)
            x_em = steady_throughput(load_log(log))[0]
            x_model = placed_split(fit, settings, n, m, pl).x_bps
            run = simulate_placed_run(fit, pools, pl, fit.link.bytes_s)
            x_sim, cross_sim = run.bps, run.crossing_share
            lk = advise(log).fit.link
            emulated.append(
                {
                    "placement": pl.describe("target", "drafter"),
                    "emulated_bps": x_em,
                    "model_bps": x_model,
                    "err_pct": 100 * (x_model / x_em - 1),
                    "sim_bps": x_sim,
                    "sim_err_pct": 100 * (x_sim / x_em - 1),
                    "uniform_crossing": pl.crossing_share(),
                    "emulated_crossing": lk.first_crossed / max(lk.steps_known, 1),
                    "sim_crossing": cross_sim,
                }
            )
            e = emulated[-1]
            print(
                f"{n}-{m}  {pl.describe('target', 'drafter'):52s} emulated {x_em:.4f}  model {x_model:.4f} "
                f"({e['err_pct']:+.1f}%)  sim {x_sim:.4f} ({e['sim_err_pct']:+.1f}%)  crossing uniform "
                f"{e['uniform_crossing']:.2f} emulated {e['emulated_crossing']:.2f} sim {cross_sim:.2f}",
                flush=True,
            )
        label = f"{n}-{m}"
        layout = str(adv.splits.at[label, "layout"])
        rec = str(adv.splits.at[label, "placement"])
        if layout == "node-local":
            # the emulation has one shared q_hs only: check the placement the shared layout recommends
            shared = project(fit, settings, pairs=[(n, m)], routing="shared")
            rec = refine_placements(fit, adv.logs, settings, shared)[0].link.placement_text
        best = max(emulated, key=lambda e: e["emulated_bps"])
        rec_em = next(e["emulated_bps"] for e in emulated if e["placement"] == rec)
        rows.append(
            {
                "split": label,
                "placements": emulated,
                "recommended_layout": layout,
                "recommended": rec,
                "best_emulated": best["placement"],
                "recommended_short_pct": float(100 * (1 - rec_em / best["emulated_bps"])),
            }
        )
    worst = max(abs(e["sim_err_pct"]) for r in rows for e in r["placements"])
    worst_analytic = max(abs(e["err_pct"]) for r in rows for e in r["placements"])
    short = max(r["recommended_short_pct"] for r in rows)
    ok = bool(worst <= TOL_PCT and short <= NOISE_PCT)
    summary = {
        "link_bytes_s": args.link_bytes_s,
        "measured_link_bytes_s": fit.link.bytes_s,
        "worst_err_pct": worst,
        "worst_analytic_err_pct": worst_analytic,
        "worst_recommended_short_pct": short,
        "passed": ok,
        "splits": rows,
    }
    (args.out / "results.json").write_text(json.dumps(summary, indent=1))
    print(
        f"link {args.link_bytes_s:.3g} B/s, measured {fit.link.bytes_s:.3g}; worst error {worst:.2f}% "
        f"(analytic stage alone {worst_analytic:.2f}%) "
        f"(tolerance {TOL_PCT}%); recommended placement at most {short:.2f}% below the best emulated "
        f"({'PASS' if ok else 'FAIL'})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
