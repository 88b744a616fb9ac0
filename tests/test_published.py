"""benchmarks/published.py and published_runs.json: every split's rates agree with its measured
throughput and regime, sources carry a commit, and the script's rows are what what-if says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent
DATA = json.loads((ROOT / "benchmarks" / "published_runs.json").read_text())


@pytest.fixture(scope="module")
def published():
    return load_script("benchmarks/published.py", "published_script")


def test_rates_follow_the_regime_each_table_states():
    for table in DATA["tables"]:
        assert (
            re.fullmatch(r"[0-9a-f]{40}", table["source"]["commit"])
            and table["source"]["commit"] in table["source"]["url"]
        )
        for s in table["splits"]:
            assert s["targets"] + s["drafters"] == table["gpus"]
            bound, other = s["bound_by"], ("drafter" if s["bound_by"] == "target" else "target")
            assert s["rates"][bound]["value"] == s["bps"]  # the binding side: its capacity is the flow
            assert s["rates"][other]["lower"] == s["bps"]  # the other side: at least the flow
            lo_hi = s["rates"][bound].get("range")
            assert lo_hi is None or lo_hi[0] <= lo_hi[1]


def test_specforge_per_trainer_figures(published):
    sf = next(t for t in DATA["tables"] if t["id"] == "specforge-domino-8xh200")
    per = {(s["targets"], s["config"]): s["bps"] / s["drafters"] for s in sf["splits"]}
    assert per[(1, "batch 2, accum 8")] == pytest.approx(7.16, abs=0.005)
    assert per[(2, "batch 2, accum 8")] == pytest.approx(6.50, abs=0.005)


def test_rate_arguments_by_mode(published):
    assert published.rate_arg({"lower": 39.0}, "values") == "39"
    assert published.rate_arg({"lower": 39.0}, "bounds") == ">=39"
    assert published.rate_arg({"value": 50.1, "range": [52.0, 57.0]}, "bounds") == "50.1"
    assert published.rate_arg({"value": 50.1, "range": [52.0, 57.0]}, "ranges") == "52..57"


def test_rows_are_read_off_what_if(published):
    modes, rows, errors = published.run(ROOT)
    assert not errors and "values" in modes
    r = next(x for x in rows if x["mode"] == "values" and x["from"] == "1+7")
    assert r["to"] == "2+6" and r["measured"] == 39.0
    assert r["naive"] == pytest.approx(6 * 50.1 / 7)
    assert r["error"] == pytest.approx((r["projected"] - 39.0) / 39.0)


def test_qwen_recipe_rates_are_the_pages_per_gpu_figures():
    q = next(t for t in DATA["tables"] if t["id"] == "specforge-qwen3.8-27b-dflash2-8xh200")
    by = {(s["targets"], s["drafters"]): s for s in q["splits"]}
    assert max(by, key=lambda k: by[k]["bps"]) == (5, 3)
    four = by[(4, 4)]["rates"]
    assert four["target"]["range"] == [pytest.approx(4 * 2.25)] * 2
    assert four["drafter"]["range"] == [pytest.approx(4 * 3.7)] * 2


def test_confident_misses_count_calls_not_rows_in_the_faithful_modes(published):
    def row(frm, p, ok, to, mode="bounds"):
        return {
            "table": "t",
            "mode": mode,
            "from": frm,
            "to": to,
            "p_best": p,
            "pick_measured": True,
            "pick_ok": ok,
            "pick": "x",
        }

    rows = [
        row("1+7", 0.9, False, "2+6"),
        row("1+7", 0.9, False, "3+5"),
        row("2+6", 0.79, False, "1+7"),
        row("3+5", 0.95, True, "1+7"),
        row("4+4", None, False, "1+7"),
        row("2+6", 0.99, False, "1+7", mode="values"),  # a bound given as a capacity: not counted
    ]
    n, misses = published.confident_misses(rows)
    assert n == 2 and [m["from"] for m in misses] == ["1+7"]
    assert published.COUNTED == ("bounds", "ranges")


def test_the_counted_calls_brier_scores_each_call_once(published):
    def row(frm, p, ok, mode="bounds", measured=True):
        return {"table": "t", "mode": mode, "from": frm, "p_best": p, "pick_measured": measured, "pick_ok": ok}

    rows = [
        row("1+7", 0.6, False),
        row("1+7", 0.6, False),  # a second row of the same call
        row("2+6", 0.9, True, mode="ranges"),
        row("3+5", 0.99, False, mode="values"),  # not a counted mode
        row("4+4", 0.5, False, measured=False),  # a pick the table did not run
        row("5+3", None, True),  # no odds stated
    ]
    n, right, score = published.counted_brier(rows)
    assert (n, right) == (2, 1) and score == pytest.approx((0.6**2 + 0.1**2) / 2)
    assert published.counted_brier([]) == (0, 0, None)
