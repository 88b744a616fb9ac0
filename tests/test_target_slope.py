"""The contention centre's check (benchmarks/target_slope.py): per-sweep slopes of step on targets."""

from __future__ import annotations

import re

from conftest import load_script

SLOPE = load_script("benchmarks/target_slope.py", "target_slope_harness")


def test_slopes_per_sweep_and_their_mean(capsys):
    assert SLOPE.main(["ded16", "cpu32", "h200x2-234m"]) == 0
    *rows, last = capsys.readouterr().out.splitlines()
    got = {
        m[0]: float(m[2]) for m in (re.match(r"(\w+): (\d+) runs, target step ([-+0-9.]+)%", r).groups() for r in rows)
    }
    # one split only (the H200 pair): no slope; the CPU sweeps' targets slow as targets are added
    assert set(got) == {"ded16", "cpu32"}
    assert all(0.0 < k < 10.0 for k in got.values())
    n, mean = re.match(r"(\d+) sweeps: target slope mean ([-+0-9.]+)%", last).groups()
    assert int(n) == 2 and abs(float(mean) - sum(got.values()) / 2) < 0.06
