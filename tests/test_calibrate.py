"""The calibration harness (benchmarks/calibrate.py): its arithmetic on hand-made cases, and a
small real run (one sweep's single logs) whose summary must agree with its own cases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_script
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
CAL = load_script("benchmarks/calibrate.py", "calibrate_harness")


@pytest.fixture(scope="module")
def cal():
    return CAL


def test_reliability_bins_by_decile(cal):
    pairs = [(0.05, i < 3) for i in range(10)] + [(0.95, True)] * 11 + [(1.0, False)] + [(0.42, True)] * 2
    rows = {r["decile"]: r for r in cal.reliability(pairs)}
    assert sorted(rows) == [0, 4, 9]
    assert rows[0]["count"] == 10 and rows[0]["observed"] == pytest.approx(0.3)
    assert rows[0]["stated"] == pytest.approx(0.05)
    assert rows[0]["judged"] and not rows[0]["ok"]  # 25 points off
    assert rows[9]["count"] == 12  # p = 1.0 falls in the top decile
    assert rows[9]["stated"] == pytest.approx((0.95 * 11 + 1.0) / 12)
    assert rows[9]["observed"] == pytest.approx(11 / 12) and rows[9]["ok"]
    assert not rows[4]["judged"] and rows[4]["ok"]  # two cases: reported, not judged


@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), max_size=60))
def test_reliability_accounts_for_every_case(pairs):
    rows = CAL.reliability(pairs)
    assert sum(r["count"] for r in rows) == len(pairs)
    assert sum(r["observed"] * r["count"] for r in rows) == pytest.approx(sum(w for _, w in pairs))
    for r in rows:
        assert r["decile"] / 10 - 1e-12 <= r["stated"] <= (r["decile"] + 1) / 10 + 1e-12


def test_brier(cal):
    assert cal.brier([]) is None
    assert cal.brier([(1.0, True), (0.0, False)]) == 0.0
    assert cal.brier([(0.8, True), (0.3, True), (0.5, False)]) == pytest.approx((0.04 + 0.49 + 0.25) / 3)


def _split(t, d, bps, lo, hi, p=None):
    return {"roles": {"target": t, "drafter": d}, "bps": bps, "bps_low": lo, "bps_high": hi, "p_best": p}


def test_score_regret_and_coverage(cal):
    truth = {(3, 1): 10.0, (2, 2): 9.9, (1, 3): 5.0}
    measured = {(3, 1): [9.0, 11.0], (2, 2): [9.5, 10.3], (1, 3): [4.0, 6.0]}
    out = {
        "recommendation": {"roles": {"target": 2, "drafter": 2}, "verdict": "switch", "p_best": 0.7},
        "splits": [
            _split(3, 1, 10.0, 9.5, 10.5, 0.5),
            _split(2, 2, 9.8, 9.0, 11.0, 0.5),
            _split(1, 3, 5.0, 4.5, 5.5, 0.0),
            _split(4, 0, 1.0, 0.5, 2.0),
        ],
    }
    s = cal.score(out, {(2, 2)}, truth, measured)
    assert s["pick"] == "2-2" and s["regret"] == pytest.approx(0.01) and s["within"] is True
    rows = {r["split"]: r for r in s["splits"]}
    assert set(rows) == {"3-1", "2-2", "1-3"}  # splits without truth are left out
    assert "inside" not in rows["2-2"]  # the source's own split is no test
    assert rows["3-1"]["inside"] == [False, False] and rows["1-3"]["inside"] == [False, False]
    assert rows["3-1"]["width"] == pytest.approx(0.1)
    assert rows["1-3"]["within"] is False and rows["2-2"]["within"] is True
    cov = cal.coverage([s])
    assert (cov["rates"], cov["inside"]) == (4, 0)
    assert s["probe_runs_best"] is None  # no probe named
    out["recommendation"]["roles"] = {"target": 4, "drafter": 0}
    assert cal.score(out, {(2, 2)}, truth, measured)["within"] is None  # a split the sweep did not run


def test_a_miss_counts_whether_its_probe_runs_a_best_split(cal):
    truth = {(3, 1): 10.0, (2, 2): 9.0, (1, 3): 5.0}
    measured = {k: [v] for k, v in truth.items()}
    probe = {"splits": [{"target": 2, "drafter": 2}, {"target": 3, "drafter": 1}], "worth_it": False}
    out = {"recommendation": {"roles": {"target": 2, "drafter": 2}, "verdict": "next-run", "probe": probe}}
    hit = cal.score(out, {(1, 3)}, truth, measured)
    assert hit["within"] is False and hit["probe_runs_best"] is True
    probe["splits"][1] = {"target": 1, "drafter": 3}
    wide = cal.score(out, {(1, 3)}, truth, measured)
    assert wide["probe_runs_best"] is False
    base = {"p_best": None, "splits": []}
    s = cal.summarize([{"name": "a", "gpus": 4, "cases": [{**base, **hit}, {**base, **wide}]}])
    assert (s["misses"], s["misses_probe_runs_best"]) == (2, 1)
    assert "Picks more than 2% below the best: 2; the probe their advice names runs a split" in cal.render(s, "t")


def test_self_check_counts_each_lone_logs_own_split(cal):
    """Issue 51: the share of logs advised alone whose row of their own split projects within 5% of
    the rate the log measured (pairs are not counted)."""
    truth = {(3, 1): 10.0, (2, 2): 9.0}
    measured = {k: [v] for k, v in truth.items()}
    out = {
        "recommendation": {"roles": {"target": 3, "drafter": 1}, "verdict": "next-run"},
        "splits": [dict(_split(3, 1, 10.0, 9.5, 10.5), observed_bps=10.6), dict(_split(2, 2, 9.0, 8.5, 9.5))],
    }
    off = cal.score(out, {(3, 1)}, truth, measured)  # 5.7% off
    assert {r["split"]: r.get("self_gap") for r in off["splits"]} == {
        "3-1": pytest.approx(10.0 / 10.6 - 1),
        "2-2": None,
    }
    out["splits"][0]["observed_bps"] = 10.2
    close = cal.score(out, {(3, 1)}, truth, measured)  # 2.0% off
    cases = [{**off, "source": ["a"]}, {**close, "source": ["b"]}, {**close, "source": ["a", "b"]}]
    s = cal.summarize([{"name": "x", "gpus": 4, "cases": cases}])
    assert (s["self_checked"], s["self_check"]) == (2, 0.5)
    assert "Self-check: of 2 logs advised alone" in cal.render(s, "t")


def test_summary_checks(cal):
    case = {
        "verdict": "stay",
        "p_best": 0.9,
        "regret": 0.0,
        "within": True,
        "splits": [{"split": "1-1", "p_best": 0.9, "within": True, "inside": [True] * 19 + [False], "width": 0.3}],
    }
    sweeps = [
        {"name": "a", "gpus": 2, "cases": [case] * 9 + [dict(case, verdict="cannot-tell", regret=0.12, within=False)]}
    ]
    s = cal.summarize(sweeps)
    assert s["action_share"] == pytest.approx(0.9) and s["checks"]["action_share"]
    assert s["mean_regret"] == pytest.approx(0.012) and s["checks"]["mean_regret"]
    assert s["max_regret"] == pytest.approx(0.12) and not s["checks"]["max_regret"]
    assert s["per_sweep"]["a"]["coverage"] == pytest.approx(0.95) and s["checks"]["coverage"]
    assert s["reliability"][0]["observed"] == pytest.approx(0.9) and s["checks"]["deciles"]
    assert s["brier"] == pytest.approx((9 * 0.01 + 0.81) / 10)


def test_a_sweep_names_the_machines_its_runs_came_from(cal, tmp_path):
    """Boot ids from ``machine`` and each ``later`` record; none where sweep.json predates them; the
    report names a sweep whose truths pool two machines."""
    folder = tmp_path / "s"
    folder.mkdir()
    meta = {"argv": [], "machine": {"boot_id": "b"}, "later": [{"machine": {"boot_id": "a"}}, {"argv": []}]}
    (folder / "sweep.json").write_text(json.dumps(meta))
    assert cal.machines(folder) == ["a", "b"]
    (folder / "sweep.json").write_text(json.dumps({"argv": []}))
    assert cal.machines(folder) == []
    sweeps = [{"name": "x", "gpus": 2, "machines": ["a", "b"], "cases": []}]
    sweeps.append({"name": "y", "gpus": 2, "machines": [], "cases": []})
    s = cal.summarize(sweeps)
    assert s["per_sweep"]["x"]["machines"] == 2 and s["per_sweep"]["y"]["machines"] == 0
    assert "Truths pooled across machines (mixing their rankings): x (2)." in cal.render(s, "t")


def test_reference_picks_by_each_repeat_and_scores_two_truths(cal):
    measured = {"3-1": [10.0, 8.0], "2-2": [9.0, 9.4], "1-3": [5.0, 5.0]}
    truth = {k: sum(v) / len(v) for k, v in measured.items()}
    one = [{"name": "one", "measured": {"2-2": [4.0]}, "truth": {"2-2": 4.0}}]  # a single repeat: left out
    ref = cal.reference([{"name": "a", "measured": measured, "truth": truth}, *one])
    by_repeat = {c["repeat"]: c for c in ref["cases"]}
    assert [by_repeat[r]["pick"] for r in (0, 1)] == ["3-1", "2-2"]
    # repeat 0 picks 3-1 (9.0 on average) where 2-2 averages 9.2; held out, 3-1's other repeat 8.0 against 9.4
    assert by_repeat[0]["in_sample"] == pytest.approx(1 - 9.0 / 9.2)
    assert by_repeat[0]["held_out"] == pytest.approx(1 - 8.0 / 9.4)
    assert by_repeat[1]["in_sample"] == 0.0 and by_repeat[1]["held_out"] == pytest.approx(1 - 9.0 / 10.0)
    assert ref["in_sample"]["max_regret"] == pytest.approx(1 - 9.0 / 9.2) and ref["in_sample"]["within"] == 1
    assert ref["held_out"]["scored"] == 2 and ref["held_out"]["within"] == 0
    assert cal.reference(one)["in_sample"] == {"mean_regret": None, "max_regret": None, "within": 0, "scored": 0}


def test_small_real_run_agrees_with_its_cases(cal, tmp_path, capsys):
    out = tmp_path / "cal.json"
    assert cal.main(["--sweep", "ded16", "--no-pairs", "--jobs", "2", "--json", str(out), "--code", "test"]) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    (sw,) = data["sweeps"]
    cases = sw["cases"]
    assert len(cases) == 8 and data["summary"]["sources"] == 8
    best = max(sw["truth"].values())
    for c in cases:
        assert c["regret"] == pytest.approx(1 - sw["truth"][c["pick"]] / best)
        own = c["source"][0].split("-")[1].replace("x", "-")
        assert all(("inside" in r) == (r["split"] != own) for r in c["splits"])
    each = [x for c in cases for r in c["splits"] for x in r.get("inside", [])]
    per = data["summary"]["per_sweep"]["ded16"]
    assert per["rates"] == len(each) == 8 * 3 * 2 and per["inside"] == sum(each)
    assert f"({per['inside']}/{per['rates']})" in text


def test_unknown_sweep_exits_2():
    p = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "calibrate.py"), "--sweep", "nosuch"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert p.returncode == 2 and "nosuch" in p.stderr
