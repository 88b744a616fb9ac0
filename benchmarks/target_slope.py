"""The contention prior's centre checked on the real sweeps (`CONTENTION_PRIOR_K_PRODUCER`).

    python3 benchmarks/target_slope.py              # every sweep of fixtures/sweep/ (CPU ones)
    python3 benchmarks/target_slope.py ded16 cpu32  # these only

Per run of a sweep, the mean busy time of a target's step and of a drafter's over the log's steady
window (the advisor's own: warm-up and the final drain cut, `advisor.ingest.runlog.RunLog.window_sums`,
as the fit reads it); per sweep,
the least-squares slope of the log means on the target count over all its runs (each role's step
per target added, at the sweep's G). The last line: the mean and standard deviation of the
sweeps' target slopes, the figure `advisor.model.priors.CONTENTION_PRIOR_K_PRODUCER` (0.033) is
checked against (BENCHMARKS.md 19.14).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.errors import AdvisorWarning  # noqa: E402
from advisor.ingest.load import load_log  # noqa: E402
from advisor.measure.measured import measure_log  # noqa: E402

SWEEPS = ROOT / "fixtures" / "sweep"


def run_means(path: Path) -> tuple[float, float]:
    """Log mean busy seconds of a target's and a drafter's step in one run's steady window."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AdvisorWarning)
        sums = measure_log(load_log(path)).sums
    return tuple(float(np.log(sums[r]["busy"] / sums[r]["n"])) for r in ("target", "drafter"))


def sweep_slopes(name: str) -> tuple[float, float, int] | None:
    """The target and drafter slopes of log mean step on the target count, and the runs; None for
    a sweep of one target count."""
    meta = json.loads((SWEEPS / name / "sweep.json").read_text())
    rows = [(r["targets"], *run_means(SWEEPS / name / (r["log"] + ".gz"))) for r in meta["runs"]]
    a = np.array(rows, float)
    if len(set(a[:, 0])) < 2:
        return None
    return float(np.polyfit(a[:, 0], a[:, 1], 1)[0]), float(np.polyfit(a[:, 0], a[:, 2], 1)[0]), len(a)


def main(argv: list[str] | None = None) -> int:
    names = argv if argv else sorted(p.parent.name for p in SWEEPS.glob("*/sweep.json"))
    targets = []
    for name in names:
        got = sweep_slopes(name)
        if got is None:
            continue
        kt, kd, n = got
        targets.append(kt)
        print(f"{name}: {n} runs, target step {100 * kt:+.1f}% a target added, drafter step {100 * kd:+.1f}%")
    sd = float(np.std(targets, ddof=1)) if len(targets) > 1 else float("nan")
    print(f"{len(targets)} sweeps: target slope mean {100 * np.mean(targets):+.2f}%, sd {100 * sd:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
