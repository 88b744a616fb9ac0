"""`dflash-train --probe`: segments at alternating splits, one log each, decided together.

The emulated probes run on the ideal timeline of `trainer.emulate` (sleeps, not compute), so
what they log barely depends on the machine's load; the real-CPU probe only checks the files.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from trainer.config import ConfigError, make_config
from trainer.probe import ProbePlan, check_plan, parse_splits, segment_log

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "fixtures" / "cpu-2x1.jsonl"
TIMEOUT_S = 300


def _train(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainer", "--no-progress", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _advise(*paths: Path) -> dict:
    r = subprocess.run(
        [sys.executable, "-m", "advisor", *map(str, paths), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _header(path: Path) -> dict:
    with path.open() as f:
        return json.loads(f.readline())


def _lead(doc: dict) -> tuple[float, float]:
    """The 95% interval (%) of 6-2's lead over 5-3, from the JSON's margin (the recommended
    split's lead over the runner-up)."""
    rec = doc["recommendation"]
    m = rec["margin"]
    assert m["lead_low_pct"] is not None, m  # a paired lead interval, not a widened table
    lo, hi = m["lead_low_pct"], m["lead_high_pct"]
    if rec["roles"] == {"target": 6, "drafter": 2}:
        return lo, hi
    return 100 * (100 / (100 + hi) - 1), 100 * (100 / (100 + lo) - 1)


# -- the split list and the plan ---------------------------------------------------------------


def test_splits_parse_in_the_order_given():
    assert parse_splits("5-3,4-4") == ((5, 3), (4, 4))
    assert parse_splits(" 6x2 , 5+3 ") == ((6, 2), (5, 3))
    assert parse_splits("2-2,1-4", target_tp=2) == ((2, 2), (1, 4))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "TARGETS-DRAFTERS"),
        ("5-3", "two or more"),
        ("5-3,5-3", "listed twice"),
        ("5-3,a", "'a' is not a split"),
        ("5-3,0-8", "at least one target"),
        ("5-3,4-3", "one number of GPUs"),
    ],
)
def test_a_bad_split_list_names_the_option(text, words):
    with pytest.raises(ConfigError) as e:
        parse_splits(text)
    assert e.value.field == "probe" and words in str(e.value)


def test_the_order_alternates_the_splits_round_by_round():
    plan = ProbePlan(splits=((5, 3), (4, 4)), seconds=10.0, rounds=3)
    assert [s for _, _, s in plan.order] == [(5, 3), (4, 4)] * 3
    assert [r for _, r, _ in plan.order] == [1, 1, 2, 2, 3, 3]
    assert [k for k, _, _ in plan.order] == list(range(1, 7))
    assert segment_log(1, (5, 3)) == "probe-01-5x3.jsonl"


def test_splits_that_need_more_gpus_than_are_visible_are_refused():
    cfg = make_config(targets=5, drafters=3, out="p")
    plan = ProbePlan(splits=((5, 3), (4, 4)), seconds=10.0, rounds=2)
    with pytest.raises(ConfigError) as e:
        check_plan(plan, cfg, visible_gpus=4)
    assert e.value.field == "probe" and "8 GPUs and 4 are visible" in str(e.value)
    check_plan(plan, cfg, visible_gpus=8)
    check_plan(plan, cfg, visible_gpus=None)  # CPU or emulation: any size runs
    with pytest.raises(ConfigError) as e:
        check_plan(ProbePlan(splits=plan.splits, seconds=10.0, rounds=0), cfg, None)
    assert e.value.field == "probe_rounds"


# -- the command line's exit paths ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--probe", "5-3"], "--probe: a probe compares two or more splits"),
        (["--probe", "5-3,4-4", "--targets", "2"], "--probe: sets the split of each segment"),
        (["--probe", "5-3,4-4", "--probe-seconds", "0"], "--probe-seconds: must be a number > 0"),
        (["--probe", "5-3,4-4", "--probe-rounds", "0"], "--probe-rounds: must be a whole number"),
    ],
)
def test_bad_probe_options_exit_2_naming_the_option(tmp_path, args, words):
    r = _train(*args, "--out", str(tmp_path / "p"))
    assert r.returncode == 2 and words in r.stderr, r.stderr
    assert not list(tmp_path.glob("p/*"))


def test_a_probe_refuses_a_directory_that_holds_logs(tmp_path):
    (tmp_path / "old.jsonl").write_text("{}\n")
    r = _train("--probe", "2-1,1-2", "--emulate", str(SOURCE), "--out", str(tmp_path))
    assert r.returncode == 2 and "--out:" in r.stderr and "old.jsonl" in r.stderr


# -- probes that run ---------------------------------------------------------------------------------


def test_a_cpu_probe_writes_one_log_per_segment_in_alternating_order(tmp_path):
    out = tmp_path / "probe"
    r = _train("--probe", "2-1,1-2", "--probe-seconds", "3", "--probe-rounds", "1", "--out", str(out))
    assert r.returncode == 0, r.stderr
    man = json.loads((out / "probe.json").read_text())
    assert man["order"] == ["2-1", "1-2"] and man["mode"] == "cpu"
    assert [s["log"] for s in man["segments"]] == ["probe-01-2x1.jsonl", "probe-02-1x2.jsonl"]
    for k, s in enumerate(man["segments"], 1):
        head = _header(out / s["log"])
        assert head["roles"] == s["split"] and head["probe"] == {"id": "probe", "segment": k, "segments": 2, "round": 1}
        end = json.loads((out / s["log"]).read_text().splitlines()[-1])
        assert s["exit_code"] == 0
        # the time limit, or the plan running out first on a fast machine
        assert end["reason"] == "done" or end["msg"] == "time limit of 3 s reached"
    assert "probe segment 1/2 (round 1): 2-1" in r.stderr and "dflash-advise" in r.stderr.splitlines()[-1]


@pytest.fixture(scope="module")
def emulated_probe(tmp_path_factory) -> Path:
    """6-2 against 5-3 of 8 emulated workers (6-2 leads by about 6% on the emulated timeline),
    three rounds of 10 emulated seconds: one segment alone leaves the call open, all of them
    together decide it. The emulation's draws are seeded per round, so what each segment logs
    hardly depends on the machine's load."""
    out = tmp_path_factory.mktemp("probe") / "p"
    r = _train(
        "--emulate",
        str(SOURCE),
        "--time-scale",
        "0.1",
        "--steps",
        "5000",
        "--seed",
        "0",
        "--probe",
        "6-2,5-3",
        "--probe-seconds",
        "10",
        "--probe-rounds",
        "3",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    return out


def test_an_emulated_probe_alternates_and_each_segment_stops_at_its_time_limit(emulated_probe):
    man = json.loads((emulated_probe / "probe.json").read_text())
    assert man["mode"] == "emulate" and man["order"] == ["6-2", "5-3"] * 3
    rounds = [s["round"] for s in man["segments"]]
    seeds = [s["seed"] for s in man["segments"]]
    assert rounds == [1, 1, 2, 2, 3, 3] and seeds[0] == seeds[1] != seeds[2] == seeds[3] != seeds[4]  # a seed per round
    for s in man["segments"]:
        lines = (emulated_probe / s["log"]).read_text().splitlines()
        end = json.loads(lines[-1])
        assert s["timed_out"] and end == {
            "ev": "end",
            "t": end["t"],
            "reason": "interrupted",
            "msg": "time limit of 10 s reached",
        }
        # the run ends at its limit, or at the last step that finished after it: the seconds spent
        # stopping the processes are not logged as part of the run
        last = max(json.loads(x)["t"] for x in lines[1:-1] if '"ev":"step"' in x.replace(" ", ""))
        assert end["t"] >= 10.0 and end["t"] <= max(last, 10.0) + 0.5, (end, last)


def test_the_segments_together_decide_what_one_segment_alone_does_not(emulated_probe):
    doc = _advise(emulated_probe)
    rec = doc["recommendation"]
    probed = [{"target": 6, "drafter": 2}, {"target": 5, "drafter": 3}]
    # one pooled log per split: the first segment's split is the observed one
    assert doc["observed"]["roles"] == probed[0]
    logs = sorted(emulated_probe.glob("probe-*.jsonl"))
    alone = [_advise(p) for p in logs]
    assert all(a["observed"]["roles"] == _header(p)["roles"] for a, p in zip(alone, logs))
    single = sorted(a["recommendation"]["p_best"] for a in alone)
    mid = statistics.median(single)
    # one segment alone: the pick is no better than a close call on half of the segments or more
    # (below 80% likely within 2% of the best)
    assert single[len(single) // 2 - 1] < 0.8, single
    # all together: the emulated best split (6-2), decided, and more likely the best than from
    # the median segment alone; the probe's noise, not the fit's, sets the lead's interval. The
    # segments' timing moves with the host's load (together 0.93-1.00 over five runs, quiet and
    # with both cores busy, at the odds' temperature of 0.45; 0.98 and 1.00 at 0.55 with the
    # other core busy; 0.97 quiet and 0.99 with it busy at 0.7), so the bar is 0.9, above any
    # segment's median (0.74-0.78)
    assert rec["roles"] == probed[0] and rec["runner_up"]["roles"] == probed[1], rec["roles"]
    assert not rec["close_call"] and rec["verdict"] != "cannot-tell"
    assert rec["p_best"] >= 0.9 and rec["p_best"] > mid + 0.1, (rec["p_best"], single)
    lo, hi = _lead(doc)
    widths = [h - low for low, h in map(_lead, alone)]
    assert hi - lo < min(widths), (lo, hi, widths)
    assert any("a probe of 6 segments" in x for x in rec["reasons"]), rec["reasons"]


def test_a_time_limit_ends_one_run_interrupted_with_exit_code_0(tmp_path):
    out = tmp_path / "run.jsonl"
    r = _train(
        "--emulate", str(SOURCE), "--time-scale", "0.1", "--steps", "5000", "--time-limit", "5", "--out", str(out)
    )
    assert r.returncode == 0, r.stderr
    end = json.loads(out.read_text().splitlines()[-1])
    assert end["reason"] == "interrupted" and end["msg"] == "time limit of 5 s reached" and end["t"] >= 5.0
    assert "dflash-train: time limit:" in r.stderr.splitlines()[-1]
    bad = _train("--time-limit", "0", "--out", str(tmp_path / "x.jsonl"))
    assert bad.returncode == 2 and "--time-limit: must be a number > 0" in bad.stderr


def test_the_advised_probe_command_costs_the_gpu_hours_it_states(tmp_path):
    """Issue 50 item 4: the advice's probe command, run as printed (in emulation, on the advised
    log's own step times), costs the GPU-hours the advice states, within 10%: the GPU-seconds of
    its segments as their logs show them (header to `end`, times the split's GPUs)."""
    pr = _advise(SOURCE, "--gpus", "4")["recommendation"]["probe"]
    cmd = pr["command"].split()
    assert cmd[0] == "dflash-train" and cmd[-2] == "--out", cmd
    out = tmp_path / "probe"
    r = _train(*cmd[1:-1], str(out), "--emulate", str(SOURCE), "--time-scale", "0.02", "--steps", "100000")
    assert r.returncode == 0, r.stderr
    gpu_s = 0.0
    logs = sorted(out.glob("probe-*.jsonl"))
    assert len(logs) == 2 * pr["rounds"]
    for log in logs:
        head = _header(log)
        end = json.loads(log.read_text().splitlines()[-1])
        assert end["ev"] == "end" and end["t"] >= pr["segment_seconds"] >= 60.0, end
        gpu_s += (end["t"] - head["t"]) * sum(head["roles"].values())
    assert abs(gpu_s / 3600.0 / pr["gpu_hours"] - 1.0) < 0.10, (gpu_s / 3600.0, pr["gpu_hours"])
