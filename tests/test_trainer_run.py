"""The trainer as users run it: real worker processes on CPU, through the command line.

Each test starts `python -m trainer` (the `dflash-train` command) in a subprocess with a hard
timeout, so a hang fails the test instead of blocking the suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
TIMEOUT_S = 240


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainer", "--no-progress", *args]


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        _cmd(*args), cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, env={**os.environ, **(env or {})}
    )


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _children(pid: int) -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.add(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


STEP_KEYS = {"ev", "t", "role", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked"}


def _check_schema(events: list[dict], targets: int, drafters: int) -> None:
    head = events[0]
    assert head["ev"] == "run" and head["v"] == 1 and head["t"] == 0.0
    assert list(head["roles"].items()) == [("target", targets), ("drafter", drafters)]
    assert head["gpus"] == targets + drafters
    assert head["queues"] == [
        {"name": "pre", "feeds": "target", "cap": 50, "per_worker": True},
        {"name": "hs", "feeds": "drafter", "cap": 20},
    ]
    for k in (
        "token_budget",
        "samples",
        "epochs",
        "hardware",
        "target_model",
        "drafter_model",
        "sync_every",
        "hs_bytes_per_token",
    ):
        assert head[k] is not None, k
    assert events[-1]["ev"] == "end"
    for ev in events[1:]:
        assert isinstance(ev, dict) and ev["ev"] in {"step", "sync", "rates", "end"} and ev["t"] >= 0
        if ev["ev"] == "step":
            assert STEP_KEYS <= set(ev) and ev["role"] in ("target", "drafter")
            assert min(ev["busy"], ev["wait"], ev["blocked"]) >= 0 and ev["tokens"] > 0
        elif ev["ev"] == "rates":
            assert set(ev["bps"]) == {"target", "drafter"} and len(ev["q"]["pre"]) == targets
            assert isinstance(ev["q"]["hs"], int) and 0 <= ev["q"]["hs"] <= 20
        elif ev["ev"] == "sync":
            assert ev["workers"] == drafters and ev["dur"] >= 0 and ev["bytes"] > 0


def test_cpu_smoke_run_writes_a_valid_log_and_the_loss_falls(tmp_path):
    out = tmp_path / "run.jsonl"
    r = _run(
        "--targets", "2", "--drafters", "1", "--device", "cpu", "--steps", "24", "--rates-every", "1", "--out", str(out)
    )
    assert r.returncode == 0, r.stderr
    events = _lines(out)
    _check_schema(events, 2, 1)
    assert events[-1]["reason"] == "done"
    assert events[0]["device"] == "cpu" and events[0]["cores"] == len(os.sched_getaffinity(0))
    steps = [e for e in events if e["ev"] == "step"]
    drafter = [e for e in steps if e["role"] == "drafter"]
    assert len(drafter) == 24
    assert {e["worker"] for e in steps if e["role"] == "target"} == {0, 1}
    assert sorted(e["batch"] for e in drafter) == list(range(24))  # every batch trained once
    loss = [e["loss"] for e in sorted(drafter, key=lambda e: e["t"])]
    assert sum(loss[-6:]) / 6 < 0.8 * sum(loss[:6]) / 6
    # a worker's steps tile its timeline: t' = t + wait + busy + blocked
    for role in ("target", "drafter"):
        ts = sorted((e for e in steps if e["role"] == role and e["worker"] == 0), key=lambda e: e["t"])
        for a, b in zip(ts, ts[1:]):
            assert b["t"] == pytest.approx(a["t"] + b["wait"] + b["busy"] + b["blocked"], abs=2e-5)
    assert any(e["ev"] == "rates" for e in events)

    from advisor.ingest.load import load_log

    log = load_log(out)
    assert dict(log.header.roles) == {"target": 2, "drafter": 1} and len(log.steps) == len(steps)


def test_two_drafters_sync_weights(tmp_path):
    out = tmp_path / "m2.jsonl"
    r = _run("--targets", "1", "--drafters", "2", "--steps", "16", "--sync-every", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    events = _lines(out)
    _check_schema(events, 1, 2)
    assert events[0]["sync_every"] == 2
    steps = [e for e in events if e["ev"] == "step" and e["role"] == "drafter"]
    assert len(steps) == 16 and {e["worker"] for e in steps} == {0, 1}
    syncs = [e for e in events if e["ev"] == "sync"]
    # each rank syncs after every 2nd of its own steps; rounds end when the slower rank is done
    per_rank = [sum(1 for e in steps if e["worker"] == w) for w in (0, 1)]
    assert len(syncs) == max(per_rank) // 2
    assert all(s["workers"] == 2 and s["role"] == "drafter" and 0 < s["dur"] < 5 for s in syncs)
    assert len({s["bytes"] for s in syncs}) == 1 and syncs[0]["bytes"] > 1e5  # all drafter weights, fp32


def _start_and_wait_for_steps(out: Path, n_steps: int, *args: str):
    p = subprocess.Popen(
        _cmd(*args, "--out", str(out)), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and p.poll() is None:
        if out.exists() and out.read_text().count('"ev":"step"') >= n_steps:
            break
        time.sleep(0.2)
    assert p.poll() is None, p.communicate()[1]
    return p


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_cleanly(tmp_path, sig):
    # emulated workers, to keep the suite fast; real workers are stopped the same way, after a worker
    # dies in tests/test_trainer_faults.py::test_a_killed_target_is_named_as_the_cause
    out = tmp_path / "int.jsonl"
    args = [
        "--targets",
        "2",
        "--drafters",
        "1",
        "--steps",
        "100000",
        "--emulate",
        str(FIXTURES / "cpu-2x1.jsonl"),
        "--time-scale",
        "0.2",
    ]
    p = _start_and_wait_for_steps(out, 6, *args, "--stop-grace", "120")
    workers = _children(p.pid)
    assert len(workers) >= 3
    t_sig = time.monotonic()
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    # workers stop at their next queue operation, not after the grace (a bound far from both on a loaded machine)
    assert time.monotonic() - t_sig < 60.0
    events = _lines(out)
    assert events[-1]["ev"] == "end" and events[-1]["reason"] == "interrupted"
    assert all(isinstance(e, dict) for e in events)
    deadline = time.monotonic() + 5
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers)


def test_crashing_worker_ends_the_run_with_its_error(tmp_path):
    out = tmp_path / "crash.jsonl"
    t0 = time.monotonic()
    r = _run(
        "--targets",
        "2",
        "--drafters",
        "1",
        "--steps",
        "1000",
        "--out",
        str(out),
        "--emulate",
        str(FIXTURES / "cpu-2x1.jsonl"),
        "--time-scale",
        "0.1",
        env={"DFLASH_TRAIN_CRASH": "drafter:0:2"},
    )
    assert r.returncode == 1
    end = _lines(out)[-1]
    assert end["ev"] == "end" and end["reason"] == "error"
    assert end["msg"] == "drafter 0: RuntimeError: injected crash (DFLASH_TRAIN_CRASH) in drafter 0 at step 2"
    assert "injected crash" in r.stderr.splitlines()[-1]
    assert time.monotonic() - t0 < TIMEOUT_S


def test_worker_dying_without_a_word_ends_the_run(tmp_path):
    out = tmp_path / "died.jsonl"
    r = _run(
        "--targets",
        "2",
        "--drafters",
        "1",
        "--steps",
        "1000",
        "--out",
        str(out),
        "--emulate",
        str(FIXTURES / "cpu-2x1.jsonl"),
        "--time-scale",
        "0.1",
        env={"DFLASH_TRAIN_CRASH": "target:1:3:exit"},
    )
    assert r.returncode == 1
    end = _lines(out)[-1]
    assert end["reason"] == "error" and end["msg"] == "target 1 exited with code 3 before finishing"


def test_invalid_setting_exits_2_naming_it(tmp_path):
    r = _run("--targets", "0", "--out", str(tmp_path / "x.jsonl"))
    assert r.returncode == 2 and "targets" in r.stderr and not (tmp_path / "x.jsonl").exists()


def test_a_tensor_parallel_target_engine_runs_as_k_processes_and_counts_as_one_worker(tmp_path):
    out = tmp_path / "tp.jsonl"
    r = _run("--targets", "1", "--drafters", "1", "--target-tp", "2", "--steps", "6", "--out", str(out))
    assert r.returncode == 0, r.stderr
    events = _lines(out)
    head = events[0]
    assert head["gpus"] == 3 and head["roles"] == {"target": 1, "drafter": 1}
    assert head["gpus_per_worker"] == {"target": 2} and head["run"].endswith("-tp2")
    assert [w["tp_size"] for w in head["worker_info"] if w["role"] == "target"] == [2]
    steps = [e for e in events if e["ev"] == "step"]
    assert {e["worker"] for e in steps if e["role"] == "target"} == {0}  # the leader logs the engine's steps
    assert sum(e["role"] == "drafter" for e in steps) == 6 and events[-1]["reason"] == "done"


def test_the_header_counts_the_cores_of_every_rank_of_a_tensor_parallel_engine(tmp_path):
    # each worker process is given a core of its own (a fake affinity per pid): the run's cores are
    # the main process's, the leader's, its follower's and the drafter's, the follower included
    out = tmp_path / "tpcores.jsonl"
    pin = (
        "import os, runpy, sys; real = os.sched_getaffinity; "
        "os.sched_getaffinity = lambda pid: real(0) if pid in (0, os.getpid()) else {100000 + pid}; "
        "sys.argv = ['trainer', *sys.argv[1:]]; runpy.run_module('trainer', run_name='__main__')"
    )
    args = ("--no-progress", "--targets", "1", "--drafters", "1", "--target-tp", "2", "--steps", "2", "--out", str(out))
    r = subprocess.run([sys.executable, "-c", pin, *args], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    assert _lines(out)[0]["cores"] == len(os.sched_getaffinity(0)) + 3


def test_an_interrupted_tensor_parallel_run_releases_its_followers_at_once(tmp_path):
    out = tmp_path / "tpint.jsonl"
    p = _start_and_wait_for_steps(
        out, 3, "--targets", "1", "--drafters", "1", "--target-tp", "2", "--steps", "100000", "--stop-grace", "120"
    )
    workers = _children(p.pid)
    t_sig = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=150)
    assert p.returncode == 130, err
    assert time.monotonic() - t_sig < 60.0  # the follower left on the leader's stop, not after the grace
    assert _lines(out)[-1]["reason"] == "interrupted"
    deadline = time.monotonic() + 5
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers)


_THREADS_AFTER_RUN = """
import sys, threading
from trainer.cli import main
if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except SystemExit as e:
        code = e.code
    print("threads:", sorted(t.name for t in threading.enumerate()), "code:", code)
"""


@pytest.mark.parametrize("crash", [None, "drafter:0:2"])
def test_a_run_joins_its_queue_feeder_threads_before_it_returns(tmp_path, crash):
    # a feeder thread left to the exit hook can run a semaphore's finalizer while the interpreter shuts
    # down, and the resource tracker then warns of a "leaked semaphore" (CI, Python 3.11)
    script = tmp_path / "probe.py"
    script.write_text(_THREADS_AFTER_RUN)
    args = [
        "--no-progress",
        "--targets",
        "2",
        "--drafters",
        "1",
        "--steps",
        "40",
        "--out",
        str(tmp_path / "t.jsonl"),
        "--emulate",
        str(FIXTURES / "cpu-2x1.jsonl"),
        "--time-scale",
        "0.05",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if crash:
        env["DFLASH_TRAIN_CRASH"] = crash
    r = subprocess.run(
        [sys.executable, str(script), *args], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, env=env
    )
    assert r.stdout.strip() == f"threads: ['MainThread'] code: {1 if crash else 0}", r.stderr
    assert "resource_tracker" not in r.stderr


class _Pipe:
    """A stand-in for q_hs that records what each target does to it, in order."""

    def __init__(self, said: list):
        self.said = said

    def put(self, item, timeout=None):
        self.said.append(("put", item["kind"]))

    def close(self):
        self.said.append(("close",))

    def join_thread(self):
        self.said.append(("joined",))


def test_the_last_target_ends_the_queue_only_after_the_others_flushed_their_batches():
    """`trainer.workers._finish_target`: a target that is not the last flushes its end of q_hs (its
    last batch written to the pipe) before it counts as flushed; the last one puts the drafters' end
    markers only once every other target has, so no marker overtakes a batch."""
    import multiprocessing as mp
    import threading
    from types import SimpleNamespace

    from trainer import workers

    said: list = []
    cfg = SimpleNamespace(targets=2, drafters=2)
    release = threading.Event()
    release.set()
    ch = SimpleNamespace(
        hs=_Pipe(said),
        events=SimpleNamespace(put=lambda msg: None),
        stop=threading.Event(),
        release=release,
        targets_done=mp.Value("i", 1),  # the other target has finished its batches, not yet flushed
        targets_flushed=mp.Value("i", 0),
    )
    spec = SimpleNamespace(cfg=cfg, role="target", index=1)
    last = threading.Thread(target=workers._finish_target, args=(spec, ch, 5))
    last.start()
    time.sleep(0.05)
    assert said == []  # waiting for the other target's flush
    said.append(("other flushed",))
    with ch.targets_flushed.get_lock():
        ch.targets_flushed.value += 1
    last.join(5)
    assert said == [("other flushed",), ("put", "end"), ("put", "end")]
    said.clear()
    ch.targets_done.value, ch.targets_flushed.value = 0, 0
    workers._finish_target(SimpleNamespace(cfg=cfg, role="target", index=0), ch, 5)  # not the last
    assert said == [("close",), ("joined",)] and ch.targets_flushed.value == 1
