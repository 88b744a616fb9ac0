"""How far the side a split is not bound by lies above the throughput, on the real sweeps
(BENCHMARKS.md 19.13).

A user who gives a role's capacity as a lower bound (``what-if --drafter-bps '>=9'``) knows only
that the role kept up. The sweeps of ``fixtures/sweep/`` measure how much room such a role had:
at each logged split the role with the lower busy share (busy over busy, wait and blocked, the
steady window's sums, `advisor.ingest.runlog.RunLog.window_sums`) is the one not binding, and its capacity lies
``1 / share`` above the throughput. Per sweep and split (the mean share over the repeats), the
log slack ``u = -ln(share)``; an exponential's scale by maximum likelihood is the mean of ``u``,
which ``advisor.decide.odds.OPEN_SLACK_LOG`` takes, and the largest ``u`` its cap
``OPEN_CAP_LOG``.

    python3 benchmarks/open_slack.py                # every sweep
    python3 benchmarks/open_slack.py g14tb4k cpu16  # some
"""

from __future__ import annotations

import math
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.errors import AdvisorWarning  # noqa: E402
from advisor.ingest.load import load_log  # noqa: E402
from advisor.measure.measured import measure_log  # noqa: E402

SWEEPS = ROOT / "fixtures" / "sweep"


def idle_side(path: Path) -> tuple[str, str, float]:
    """(split, role, busy share) of the role with the lower busy share in one log."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AdvisorWarning)
        ml = measure_log(load_log(path))
    shares = {role: w["busy"] / (w["busy"] + w["wait"] + w["blocked"]) for role, w in ml.sums.items()}
    role = min(shares, key=shares.__getitem__)
    split = "-".join(str(n) for n in ml.log.header.roles.values())
    return split, role, shares[role]


def main(argv: list[str]) -> int:
    names = argv or sorted(d.name for d in SWEEPS.iterdir() if d.is_dir())
    slacks = []
    for name in names:
        by_split: dict[tuple[str, str], list[float]] = defaultdict(list)
        for path in sorted((SWEEPS / name).glob("*.jsonl*")):
            split, role, share = idle_side(path)
            by_split[split, role].append(share)
        cells = []
        for (split, role), shares in sorted(by_split.items()):
            u = -math.log(float(np.mean(shares)))
            slacks.append(u)
            cells.append(f"{split} {role} {math.exp(u):.2f}x")
        print(f"{name}: " + ", ".join(cells))
    u = np.array(slacks)
    q = np.quantile(u, [0.5, 0.9])
    print(
        f"{len(u)} splits: mean log slack {u.mean():.3f} (an exponential's scale), median {q[0]:.3f}, "
        f"90th percentile {q[1]:.3f}, largest {u.max():.3f} ({math.exp(u.max()):.2f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
