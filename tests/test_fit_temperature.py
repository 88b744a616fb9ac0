"""The temperature fit (benchmarks/fit_temperature.py): the patched tree it scores, and the fit
and leave-one-sweep-out choice on hand-made pairs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent
FIT = load_script("benchmarks/fit_temperature.py", "fit_temperature_harness")


def test_the_patched_tree_states_the_temperature(tmp_path):
    tree = FIT.patched_tree(tmp_path / "t", 0.123)
    code = "from advisor.decide.odds import STEPS_TEMPERATURE as T; print(T)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0.123"


def test_the_fit_takes_the_smallest_objective_and_each_held_out_sweep_the_others_choice():
    # a is scored best at T 0.2, b and c at 0.3: over all three 0.3 wins. Left out: a gets 0.3 (b
    # and c choose it), b gets 0.3 (a's loss at 0.3 is smaller than c's at 0.2), c gets 0.2 (a
    # and b tie, and a tie goes to the smaller T)
    right, wrong = (0.9, True), (0.9, False)
    by_t = {
        0.2: {"a": ([right] * 4, [(0.0, False)] * 4), "b": ([wrong] * 4, [(0.5, False)] * 4), "c": ([wrong] * 8, [])},
        0.3: {"a": ([wrong] * 4, [(0.5, False)] * 4), "b": ([right] * 4, [(0.0, False)] * 4), "c": ([right] * 8, [])},
    }
    fit = FIT.leave_one_out(by_t)
    assert fit["best"] == 0.3 and fit["objective"][0.3] == pytest.approx(3.36 / 16 + 1.0 / 8)
    assert fit["chosen"] == {"a": 0.3, "b": 0.3, "c": 0.2}
    held = {r["decile"]: r for r in fit["held_out"]}
    assert held[9]["count"] == 16 and held[9]["observed"] == pytest.approx(4 / 16)
    assert fit["held_out_brier"] == pytest.approx((12 * 0.81 + 4 * 0.01) / 16)


def test_one_sweep_is_refused():
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "fit_temperature.py"), "--sweep", "ded16"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "two or more" in r.stderr
