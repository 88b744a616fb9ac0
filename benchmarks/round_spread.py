"""How far the drafters' sync rounds spread between ranks on the real sweeps (BENCHMARKS.md 19.12).

For every log of ``fixtures/sweep/`` whose drafters sync (M > 1, ``sync_every`` k > 0), the
complete rounds of its steady window (`advisor.measure.rounds`) give the standard deviation of a
round's busy sum between ranks over ``sqrt(k) sigma``, the spread of independent steps; and the
drafters' busy share (busy over busy plus wait) of the window. One line per sweep, the logs in
order of that share:

    python3 benchmarks/round_spread.py                # every sweep
    python3 benchmarks/round_spread.py g15tb1k g12tb1k
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.errors import AdvisorWarning  # noqa: E402
from advisor.ingest.load import load_log  # noqa: E402
from advisor.measure.measured import measure_log  # noqa: E402
from advisor.measure.rounds import round_spread  # noqa: E402

SWEEPS = ROOT / "fixtures" / "sweep"


def one_log(path: Path) -> tuple[str, float, float, int] | None:
    """(split, busy share, sd ratio, complete rounds) of one log, or None where it has none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AdvisorWarning)
        ml = measure_log(load_log(path))
    head = ml.log.header
    role = head.consumer
    k, m = head.sync_every, head.roles[role]
    steps = ml.steps.get(role)
    if steps is None or not len(ml.syncs):
        return None
    got = round_spread(steps, ml.syncs["t"].to_numpy(float), k, m)
    if got is None:
        return None
    share = float(steps["busy"].sum() / (steps["busy"].sum() + steps["wait"].sum()))
    split = "-".join(str(n) for n in head.roles.values())
    return split, share, math.sqrt(got.ss_scaled / got.dof), got.rounds


def main(argv: list[str]) -> int:
    names = argv or sorted(d.name for d in SWEEPS.iterdir() if d.is_dir())
    for name in names:
        rows = [r for p in sorted((SWEEPS / name).glob("*.jsonl*")) if (r := one_log(p)) is not None]
        if not rows:
            continue
        k = load_log(next(iter(sorted((SWEEPS / name).glob("*.jsonl*"))))).header.sync_every
        cells = " ".join(f"{s} {u:.2f}:{r:.2f}({n})" for s, u, r, n in sorted(rows, key=lambda x: x[1]))
        print(f"{name} k={k}: {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
