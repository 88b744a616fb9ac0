"""The calibration harness (benchmarks/calibrate.py): its arithmetic on hand-made cases, the
families of sweeps and the leave-one-family-out folds on hand-made sweeps, the advice cache, and a
small real run (one sweep's single logs) whose summary must agree with its own cases."""

from __future__ import annotations

import gzip
import json
import math
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
    the rate the log measured (pairs carry no self-check)."""
    out = {
        "observed": {"roles": {"target": 3, "drafter": 1}, "bps": 10.6},
        "splits": [
            {"roles": {"target": 3, "drafter": 1}, "bps": 10.0, "method": "exact"},
            {"roles": {"target": 2, "drafter": 2}, "bps": 9.0, "method": "analytic"},
        ],
    }
    off = cal.self_check(out)  # 5.7% low
    assert off["miss"] == pytest.approx(10.0 / 10.6 - 1) and off["method"] == "exact"
    out["observed"]["bps"] = 10.2
    close = cal.self_check(out)  # 2.0% low
    assert (
        cal.self_check({"observed": {"roles": {"target": 1, "drafter": 3}, "bps": 5.0}, "splits": out["splits"]})
        is None
    )
    base = {"verdict": "stay", "p_best": None, "regret": None, "within": None, "splits": []}
    cases = [
        {**base, "source": ["a"], "self_check": off},
        {**base, "source": ["b"], "self_check": close},
        {**base, "source": ["a", "b"]},
    ]
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
    args = ["--sweep", "ded16", "--no-pairs", "--jobs", "2", "--json", str(out), "--code", "test", "--in-sample"]
    assert cal.main([*args, "--no-cache"]) == 0
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


# ---- families (issue 51, item 3)


def _sweep(folder: Path, name: str, gpus: int, logs: dict[str, dict], model: str | None = None) -> None:
    """A sweep folder of header-only logs: ``logs`` maps a log name to its header's changes."""
    d = folder / name
    d.mkdir(parents=True)
    argv = ["--gpus", str(gpus), *(["--model", model] if model else [])]
    (d / "sweep.json").write_text(json.dumps({"argv": argv}))
    for log, change in logs.items():
        n, m = (int(x) for x in log.split("x"))
        head = {
            "ev": "run",
            "roles": {"target": n, "drafter": m},
            "queues": [{"name": "pre", "feeds": "target", "cap": 50}, {"name": "hs", "feeds": "drafter", "cap": 20}],
            "token_budget": 1024,
            "sync_every": 10 if m > 1 else 0,
            "hardware": f"16-core CPU, {n + m} worker processes of 1 torch thread",
            "target_model": "t-small",
            "drafter_model": "d-small",
            "device": "cpu",
            **change,
        }
        with gzip.open(d / f"{name}-{log}-r0.jsonl.gz", "wt") as f:
            f.write(json.dumps(head) + "\n")


def test_families_group_sweeps_by_their_keys_and_not_by_g(cal, tmp_path):
    _sweep(tmp_path, "a", 8, {"7x1": {}, "6x2": {}})  # one drafter logs sync_every 0: no cadence shown
    _sweep(tmp_path, "b", 10, {"8x2": {}, "5x5": {}})  # another G of a's shape: a's family
    _sweep(tmp_path, "c", 8, {"6x2": {"drafter_model": "d-big"}}, model="big")
    _sweep(tmp_path, "d", 8, {"6x2": {"queues": [{"name": "hs", "feeds": "drafter", "cap": 2}]}})
    _sweep(tmp_path, "e", 8, {"6x2": {"hardware": "32-core CPU, 8 worker processes"}})
    _sweep(tmp_path, "f", 8, {"6x2": {"sync_every": 1}, "4x4": {"sync_every": 1}})
    fams = {f.name: f for f in cal.families(list("abcdef"), tmp_path)}
    assert {n: f.sweeps for n, f in fams.items()} == {
        "tiny-hs20-pre50-sync10-tb1024-tp1-cpu16": ("a", "b"),
        "big-hs20-pre50-sync10-tb1024-tp1-cpu16": ("c",),
        "tiny-hs2-pre0-sync10-tb1024-tp1-cpu16": ("d",),
        "tiny-hs20-pre50-sync10-tb1024-tp1-cpu32": ("e",),
        "tiny-hs20-pre50-sync1-tb1024-tp1-cpu16": ("f",),
    }
    ab = fams["tiny-hs20-pre50-sync10-tb1024-tp1-cpu16"]
    assert ab.shape == cal.Shape(20, 50, 10, 1024, (1, 1), "t-small", "d-small") and ab.host == "16-core CPU"
    table = cal.families_table(list(fams.values()), {"a": 8, "b": 10})
    assert (
        "| tiny-hs20-pre50-sync10-tb1024-tp1-cpu16 | tiny | 20 | 50 | 10 | 1024 | 1, 1 | 16-core CPU | a, b | 8, 10 |"
        in table
    )


def test_a_sweep_whose_logs_differ_in_a_key_is_refused(cal, tmp_path):
    _sweep(tmp_path, "a", 8, {"7x1": {}, "6x2": {"token_budget": 2048}})
    with pytest.raises(ValueError, match=r"a: its logs' headers differ in token_budget"):
        cal.families(["a"], tmp_path)


def test_the_advisors_record_is_the_repositorys_families(cal):
    """advisor/decide/families.py's CALIBRATED is what calibrate.py derives from fixtures/sweep/, and
    the record it prints is that record: rerun `python3 benchmarks/calibrate.py --families-record`
    and paste it there when a sweep is added."""
    import advisor.decide.families as fam

    derived = cal.families(list(cal.real_sweeps()))
    assert derived == list(fam.CALIBRATED)
    ns = {k: v for k, v in vars(fam).items() if k in ("Family", "_family", "Shape")}
    exec(cal.families_record(derived), ns)
    assert ns["CALIBRATED"] == fam.CALIBRATED and ns["MODELS"] == fam.MODELS


def _case(p: float, within: bool, regret: float, tree: tuple, verdict: str = "next-run", miss: float = 0.0) -> dict:
    return {
        "p_best": p,
        "within": within,
        "regret": regret,
        "verdict": verdict,
        "splits": [{"p_best": p, "within": within}],
        "tree": tree,
        "self_check": {"miss": miss, "method": "exact"},
    }


def _fam(cal, name: str, hs: int, host: str = "16-core CPU"):
    return cal.Family(name, "tiny", host, cal.Shape(hs, 50, 10, 1024, (1, 1)), (name.lower(),))


def test_leave_one_family_out_fits_every_constant_on_the_others(cal):
    # A and C share a shape (two hosts), B has its own. Each family's picks are right at one
    # temperature (A 0.5, B and C 1.0); the repeats' level moves: A and B together, C opposite
    fams = [_fam(cal, "A", 20), _fam(cal, "B", 2), _fam(cal, "C", 20, "32-core CPU")]
    prefers = {"a": 0.5, "b": 1.0, "c": 1.0}
    moves = {"a": 1.0, "b": 1.0, "c": -1.0}
    calls = []

    def score(t, rho, names, pairs=True):
        calls.append((t, rho, tuple(names), pairs))
        out = {}
        for n in names:
            right = t == prefers[n]
            u = 0.1
            caps = [{"target": math.exp(u), "drafter": math.exp(moves[n] * u)}]
            caps.append({"target": math.exp(-u), "drafter": math.exp(-moves[n] * u)})
            out[n] = {
                "name": n,
                "cases": [_case(0.9, right, 0.0 if right else 0.1, (t, rho))] * 4,
                "capacities": {"2-2": caps},
                "measured": {"1-3": [1.0, 1.0], "2-2": [2.0, 2.0]},
                "truth": {"1-3": 1.0, "2-2": 2.0},
            }
        return out

    res = cal.leave_family_out(
        {"a": 4, "b": 4, "c": 4}, fams, [0.5, 1.0], score, {"STEPS_TEMPERATURE": 0.7, "LEVEL_CORR": 0.8}
    )
    per, pooled = res["families"], res["pooled"]
    assert calls[0] == (0.7, 0.8, ("a", "b", "c"), False)  # the level moves from single logs of the tree as it is
    # rho: all three (1 + 1 - 1) / 3 = 0.33 -> 0.3; without A: 0 (B +1, C -1); without B: 0; without C: 1
    assert pooled["level_corr"] == pytest.approx(0.3)
    assert {n: f["level_corr"] for n, f in per.items()} == {"A": 0.0, "B": 0.0, "C": 1.0}
    # T, from the others' Brier scores at the pooled rho: A gets 1.0 (B and C prefer it); B gets 0.5
    # (A at 0.5 and C at 1.0 tie, the smaller wins); C gets 0.5 likewise
    assert {n: f["temperature"] for n, f in per.items()} == {"A": 1.0, "B": 0.5, "C": 0.5}
    assert all(c["tree"] == (1.0, 0.0) for c in per["A"]["cases"])
    assert per["A"]["held_out"]["mean_regret"] == pytest.approx(0.1)  # A scored at the T it did not prefer
    # A and C cover each other's shape (deployed as held out); B is covered by none: uncalibrated
    assert per["A"]["covered_by"] == ["C"] and per["B"]["covered_by"] == []
    assert per["A"]["deployed_cases"] == per["A"]["cases"]
    assert all(c["tree"] == (1.0, 0.0) for c in per["B"]["deployed_cases"])
    assert all(c["tree"] == (0.5, 0.0) for c in per["B"]["cases"])
    assert pooled["held_out"]["sources"] == 12
    text = cal.render_lofo(res, fams, {"a": 4, "b": 4, "c": 4}, "t")
    assert "(0) | 1 | C |" in text and "(0) | 0.5 | none |" in text


def _summary_sweep(cases, measured=None):
    measured = measured or {"1-3": [1.0, 1.0], "2-2": [2.0, 2.0]}
    truth = {k: sum(v) / len(v) for k, v in measured.items()}
    return {"name": "s", "cases": cases, "measured": measured, "truth": truth}


def test_the_acceptance_lines_of_a_family_can_fail(cal):
    good = [_case(0.95, True, 0.0, ())] * 10
    s = cal.family_summary([_summary_sweep(good)])
    assert all(cal.lofo_checks(s).values())
    # a pick stated 0.9 measuring 8% below the best: 1 in 10 confident picks, more than 5%
    bad = good[:9] + [_case(0.9, False, 0.08, ())]
    checks = cal.lofo_checks(cal.family_summary([_summary_sweep(bad)]))
    assert checks["confident_misses"] is False and checks["mean_regret"] is True
    # ... and its 8% regret is worse than measuring every split once (0% on these truths)
    assert checks["max_regret"] is False
    # the observed split missed by 6% in 2 logs of 10: 80% within 5%, short of 90%
    missed = good[:8] + [_case(0.95, True, 0.0, (), miss=0.06)] * 2
    assert cal.lofo_checks(cal.family_summary([_summary_sweep(missed)]))["self_check"] is False
    # no action named in 2 of 10; a decile off (stated 0.95, 7 of 10 within)
    lazy = good[:8] + [_case(0.95, False, 0.0, (), verdict="cannot-tell")] * 2
    checks = cal.lofo_checks(cal.family_summary([_summary_sweep(lazy)]))
    assert checks["actions"] is False
    off = good[:7] + [_case(0.95, False, 0.03, ())] * 3
    checks = cal.lofo_checks(cal.family_summary([_summary_sweep(off)]))
    assert checks["deciles"] is False and checks["mean_regret"] is True
    # a measuring reference that lost 20% lets the advisor's 8% stand
    measured = {"1-3": [3.0, 1.0], "2-2": [2.0, 2.5]}
    assert cal.lofo_checks(cal.family_summary([_summary_sweep(bad, measured)]))["max_regret"] is True


def test_the_cache_keeps_one_advice_per_tree_and_source(cal, tmp_path):
    tree = tmp_path / "tree"
    (tree / "advisor").mkdir(parents=True)
    mod = tree / "advisor" / "m.py"
    mod.write_text('"""Doc."""\nX = 1  # one\n')
    log = tmp_path / "x-1x1-r0.jsonl.gz"
    log.write_bytes(b"log")
    runs = []

    def run(paths, gpus):
        runs.append((tuple(paths), gpus))
        return {"n": len(runs)}

    cache = tmp_path / "cache"
    assert cal.cached_advice([log], 2, tree, cache, run) == {"n": 1}
    assert cal.cached_advice([log], 2, tree, cache, run) == {"n": 1} and len(runs) == 1
    assert cal.cached_advice([log], 3, tree, cache, run) == {"n": 2}  # another G: another source
    cal._TREE_DIGESTS.clear()
    mod.write_text('"""Another doc."""\nX = 1  # another comment\n')
    assert cal.cached_advice([log], 2, tree, cache, run) == {"n": 1}  # the same code
    cal._TREE_DIGESTS.clear()
    mod.write_text('"""Doc."""\nX = 2\n')
    assert cal.cached_advice([log], 2, tree, cache, run) == {"n": 3}  # other code
    cal._TREE_DIGESTS.clear()


def test_a_patched_tree_states_both_constants(cal, tmp_path):
    tree = cal.patched_tree(tmp_path / "t", {"STEPS_TEMPERATURE": 0.123, "LEVEL_CORR": 0.45})
    assert cal.calibrated_constants(tree) == {"STEPS_TEMPERATURE": 0.123, "LEVEL_CORR": 0.45}
    code = "from advisor.decide.odds import STEPS_TEMPERATURE as T, LEVEL_CORR as R; print(T, R)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0.123", "0.45"]


def test_a_warm_advisor_says_what_the_command_says(cal):
    log = ROOT / "fixtures" / "sweep" / "ded16" / "ded16-3x3-r0.jsonl.gz"
    warm = cal.Advisors(ROOT)
    try:
        assert warm([log], 6) == cal.validate_real.advise_json([log], "--gpus", "6")
        with pytest.raises(RuntimeError, match="exit 2"):
            warm([ROOT / "fixtures" / "nosuch.jsonl"], 6)
        assert warm([log], 6)["observed"]["roles"] == {"target": 3, "drafter": 3}  # still answers
    finally:
        warm.close()


def test_leaving_a_family_out_needs_two(tmp_path):
    p = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "calibrate.py"), "--sweep", "ded16", "--sweep", "hold16"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert p.returncode == 2 and "two or more families" in p.stderr
