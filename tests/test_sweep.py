"""The real-hardware sweep script (benchmarks/sweep.py): core lanes, split parsing, run order.

Running it needs many cores and minutes per split (the device machine); here only its planning
is checked, and one short real run on two cores pins workers and collects a log.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sweep():
    return load_script("benchmarks/sweep.py", "sweep_script")


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


def test_a_lane_of_g_cores_when_the_main_process_shares_a_core(sweep, capsys):
    argv = ["--gpus", "16", "--splits", "10-6", "--cores", "0-15", "--out", "unused", "--dry-run"]
    with pytest.raises(SystemExit, match="1 lanes of 17 cores need 17, got 16"):
        sweep.main(argv)
    assert sweep.main([*argv, "--main-shares-core"]) == 0
    assert "lane(s) [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]]" in capsys.readouterr().out


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_a_short_real_run_is_pinned_and_logged(sweep, tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    lane = ",".join(str(cores[i % len(cores)]) for i in range(4))  # main + 3 workers, cores reused here
    rc = sweep.main(
        [
            "--splits",
            "1-2",
            "--repeats",
            "1",
            "--duration-s",
            "3",
            "--cores",
            lane,
            "--out",
            str(tmp_path / "s"),
            "--tar",
            str(tmp_path / "s.tar.gz"),
            "--prefix",
            "t",
            "--sync-every",
            "3",
            "--hs-cap",
            "2",
            "--pre-queue-depth",
            "1",
        ]
    )
    assert rc == 0
    meta = json.loads((tmp_path / "s" / "sweep.json").read_text())
    (run,) = meta["runs"]
    assert run["exit_code"] == 130 and run["workers_pinned"] == 3
    assert meta["machine"] == sweep.machine()
    log = (tmp_path / "s" / "t-1x2-r0.jsonl").read_text().splitlines()
    assert json.loads(log[0])["ev"] == "run" and json.loads(log[-1])["reason"] == "interrupted"
    head = json.loads(log[0])
    assert head["sync_every"] == 3  # passed through to the trainer, as are the queue depths:
    assert {q["name"]: q["cap"] for q in head["queues"]} == {"pre": 1, "hs": 2}
    assert (tmp_path / "s.tar.gz").stat().st_size > 0


@pytest.mark.skipif(not Path("/proc/sys/kernel/random/boot_id").exists(), reason="needs Linux /proc")
def test_the_machine_is_identified(sweep):
    """sweep.json names the machine, so that repeats from two machines are not pooled as one."""
    m = sweep.machine()
    assert len(m["boot_id"]) == 36 and m["host"] == os.uname().nodename
    assert m["threads_per_core"] is None or m["threads_per_core"] >= 1
    assert isinstance(m["hypervisor"], bool) and isinstance(m["cpu_model"], str)


def test_tensor_parallel_splits_count_every_rank(sweep):
    assert sweep.feasible_splits(8, 2) == [(1, 6), (2, 4), (3, 2)]
    assert sweep.feasible_splits(4) == [(1, 3), (2, 2), (3, 1)]
    assert sweep.parse_splits("1-6,3-2", 8, 2) == [(1, 6), (3, 2)]
    with pytest.raises(SystemExit, match="2 \\* N \\+ M = 8"):
        sweep.parse_splits("4-4", 8, 2)
    jobs = sweep.plan_jobs([(1, 6), (2, 4), (3, 2)], 2, [None], "s", target_tp=2)
    assert len(jobs) == 6 and jobs[0].name == "s-1x6-tp2-r0" and {j.processes for j in jobs} == {8}


def test_a_run_that_would_end_past_the_budget_is_not_started(sweep):
    assert sweep.fits_budget(None, 1e9, 70, [])
    assert sweep.fits_budget(100, 0, 70, []) and not sweep.fits_budget(100, 20, 70, [])  # 20 s start-up guess
    rec = sweep.JobRecord(
        name="a",
        targets=1,
        drafters=1,
        repeat=0,
        token_budget=None,
        target_tp=1,
        lane=0,
        cores=[0],
        start_wall_s=0,
        end_wall_s=85,
        run_s=85,
        exit_code=130,
        workers_pinned=2,
        log="a.jsonl",
    )
    assert sweep.fits_budget(200, 100, 70, [rec]) and not sweep.fits_budget(200, 120, 70, [rec])  # 15 s measured


def test_a_sweep_past_its_budget_still_writes_the_archive(sweep, tmp_path):
    rc = sweep.main(
        [
            "--gpus",
            "2",
            "--splits",
            "all",
            "--repeats",
            "1",
            "--duration-s",
            "60",
            "--budget-s",
            "10",
            "--cores",
            "0,0,0",
            "--out",
            str(tmp_path / "s"),
            "--tar",
            str(tmp_path / "s.tar.gz"),
        ]
    )
    meta = json.loads((tmp_path / "s" / "sweep.json").read_text())
    assert rc == 0 and meta["runs"] == [] and meta["skipped"] == ["sweep-1x1-r0"]
    assert (tmp_path / "s.tar.gz").stat().st_size > 0


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_every_rank_of_a_tensor_parallel_engine_gets_a_core(sweep, tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    lane = ",".join(str(cores[i % len(cores)]) for i in range(4))  # main + 3 worker processes
    rc = sweep.main(
        [
            "--gpus",
            "3",
            "--target-tp",
            "2",
            "--splits",
            "1-1",
            "--repeats",
            "1",
            "--duration-s",
            "3",
            "--cores",
            lane,
            "--out",
            str(tmp_path / "s"),
            "--prefix",
            "t",
        ]
    )
    assert rc == 0
    (run,) = json.loads((tmp_path / "s" / "sweep.json").read_text())["runs"]
    assert run["exit_code"] == 130 and run["workers_pinned"] == 3 and run["target_tp"] == 2
    head = json.loads((tmp_path / "s" / "t-1x1-tp2-r0.jsonl").read_text().splitlines()[0])
    assert head["gpus"] == 3 and head["gpus_per_worker"] == {"target": 2}
