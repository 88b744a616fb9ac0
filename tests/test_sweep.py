"""The real-hardware sweep script (benchmarks/sweep.py): core lanes, split parsing, run order.

Running it needs many cores and minutes per split (the device machine); here only its planning
is checked, and one short real run on two cores pins workers and collects a log.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sweep():
    spec = importlib.util.spec_from_file_location("sweep_script", ROOT / "benchmarks" / "sweep.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_cores_and_splits_parse(sweep):
    assert sweep.parse_cores("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert sweep.parse_splits("7-1,6-2", 8) == [(7, 1), (6, 2)]
    with pytest.raises(SystemExit, match="N \\+ M = 8"):
        sweep.parse_splits("6-1", 8)


def test_repeats_of_a_split_run_at_different_times(sweep):
    splits = [(7, 1), (6, 2), (5, 3)]
    jobs = sweep.plan_jobs(splits, 2, [None], "s")
    assert [j.name for j in jobs[:3]] == ["s-7x1-r0", "s-6x2-r0", "s-5x3-r0"]
    # the second repeat runs in reverse order, so no split has both repeats back to back
    assert [j.name for j in jobs[3:]] == ["s-5x3-r1", "s-6x2-r1", "s-7x1-r1"]
    assert {j.repeat for j in jobs} == {0, 1}
    assert [j.name for j in sweep.plan_jobs([(1, 1)], 1, [16384], "g", first_repeat=1)] == ["g-1x1-tb16384-r1"]


def test_too_few_cores_for_the_lanes_is_refused(sweep, tmp_path):
    with pytest.raises(SystemExit, match="need 18"):
        sweep.main(["--gpus", "8", "--splits", "7-1", "--cores", "0-9", "--lanes", "2", "--out", str(tmp_path)])


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_a_short_real_run_is_pinned_and_logged(sweep, tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    lane = ",".join(str(cores[i % len(cores)]) for i in range(3))   # main + 2 workers, cores reused here
    rc = sweep.main(["--splits", "1-1", "--repeats", "1", "--duration-s", "3", "--cores", lane,
                     "--out", str(tmp_path / "s"), "--tar", str(tmp_path / "s.tar.gz"), "--prefix", "t"])
    assert rc == 0
    meta = json.loads((tmp_path / "s" / "sweep.json").read_text())
    (run,) = meta["runs"]
    assert run["exit_code"] == 130 and run["workers_pinned"] == 2
    log = (tmp_path / "s" / "t-1x1-r0.jsonl").read_text().splitlines()
    assert json.loads(log[0])["ev"] == "run" and json.loads(log[-1])["reason"] == "interrupted"
    assert (tmp_path / "s.tar.gz").stat().st_size > 0
