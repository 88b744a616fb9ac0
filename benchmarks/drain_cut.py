"""How much of each log is dropped as the final drain, before and after the drain rule of
`advisor.measure.steady` (issue 21): a drain only where the input ran out (`end` reason `done`,
or a last snapshot with `done` >= 1); elsewhere the slower tail stays in the window.

For every fixture (``fixtures/*.jsonl``) and sweep log (``fixtures/sweep/**``), and for each
fixture cut to its first 70% of lines with no `end` (a live log, as `--follow` reads it):

- ``tail``: the share of the run the end rule finds (MSER on the reversed completion gaps), which
  the old rule cut as the drain whatever the log's end (`SteadyWindow.tail_share`);
- ``cut now``: the share cut now (`SteadyWindow.drain_share`; where nothing is cut, only the
  instant between the last completion and the `end` line);
- ``tail slower``: the tail's pace against the window's before it (`SteadyWindow.tail_slower`);
- the observed rate over the window the old rule kept and over today's (`observe`).

    python3 benchmarks/drain_cut.py               # the markdown table (BENCHMARKS.md section 13)
    python3 benchmarks/drain_cut.py --json out.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import warnings
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.ingest.load import load_log  # noqa: E402
from advisor.measure.observe import observe  # noqa: E402
from advisor.measure.steady import find_steady, input_ran_out  # noqa: E402

LIVE_SHARE = 0.7


def _live_copy(path: Path, scratch: Path) -> Path:
    """The first LIVE_SHARE of a log's lines, without its `end`: a run still going."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        lines = [ln for ln in fh if '"ev":"end"' not in ln.replace(" ", "")]
    out = scratch / (path.name.replace(".jsonl", "").replace(".gz", "") + "-live.jsonl")
    out.write_text("".join(lines[: int(len(lines) * LIVE_SHARE)]))
    return out


def measure(path: Path, name: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lg = load_log(path)
        win = find_steady(lg)
    span = lg.duration_s
    old = replace(win, end_s=span * (1.0 - win.tail_share))  # the old rule: the tail cut, always
    ran_out, how = input_ran_out(lg)
    return {
        "log": name,
        "ended": how,
        "ran_out": ran_out,
        "tail_share": win.tail_share,
        "drain_share": win.drain_share,
        "tail_slower": win.tail_slower,
        "bps_old": observe(lg, old).bps,
        "bps_now": observe(lg, win).bps,
    }


def logs() -> list[tuple[Path, str]]:
    top = sorted((ROOT / "fixtures").glob("*.jsonl"))
    sweep = sorted((ROOT / "fixtures" / "sweep").glob("*/*.jsonl.gz"))
    return [(p, str(p.relative_to(ROOT / "fixtures"))) for p in top + sweep]


def table(rows: list[dict]) -> str:
    out = [
        "| log | how it ended | tail (old cut) | cut now | tail slower | b/s old window | b/s now | change |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ch = r["bps_now"] / r["bps_old"] - 1.0 if r["bps_old"] else float("nan")
        out.append(
            f"| {r['log']} | {r['ended']} | {100 * r['tail_share']:.1f}% | {100 * r['drain_share']:.1f}% | "
            f"{100 * r['tail_slower']:+.1f}% | {r['bps_old']:.4g} | {r['bps_now']:.4g} | {100 * ch:+.1f}% |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for p, name in logs():
            rows.append(measure(p, name))
        for p in sorted((ROOT / "fixtures").glob("*.jsonl")):
            rows.append(measure(_live_copy(p, Path(tmp)), f"{p.name} (first 70%, live)"))
    print(table(rows))
    old = [r["tail_share"] for r in rows if not r["ran_out"]]
    now = [r["drain_share"] for r in rows if not r["ran_out"]]
    if old:
        print(
            f"\nlogs whose input did not run out: {len(old)}; dropped as drain: mean {100 * sum(old) / len(old):.1f}% "
            f"(max {100 * max(old):.1f}%) before, mean {100 * sum(now) / len(now):.2f}% (max {100 * max(now):.2f}%) now"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
