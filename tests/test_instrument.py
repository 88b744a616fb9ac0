"""advisor.instrument: what a pipeline writes through the API, read back by the advisor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.ingest.load import load_log, load_logs
from advisor.instrument import BatchFacts, Clocks, RateLog, RateMeter, Snapshots, rank_file_name
from advisor.records import Queue, RecordError, Run

ROOT = Path(__file__).resolve().parent.parent
HEADER = Run(
    run="api", roles={"target": 2, "drafter": 1}, queues=[Queue(name="hs", feeds="drafter", cap=4)], token_budget=1000
)


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start: float = 1000.0):
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _log(tmp_path, clock, *, role="drafter", worker=0, header=HEADER, **kw) -> RateLog:
    head = header if header.t0_unix is not None else header.stamped(5000.0)
    return RateLog.open(tmp_path, head, role=role, worker=worker, clocks=Clocks(clock, lambda: 5000.0), **kw)


def test_step_context_manager_splits_busy_wait_blocked(tmp_path):
    clock = FakeClock()
    log = _log(tmp_path, clock)
    clock.advance(1.0)
    with log.step(tokens=900, batch=7, seqs=3) as s:
        with s.waiting():
            clock.advance(0.25)  # starved
        clock.advance(0.5)  # compute
        with s.blocking():
            clock.advance(0.125)  # output queue full
        s.waited(0.0625)  # measured elsewhere: added, not subtracted
        s.loss = 2.5
    log.close()
    lines = _lines(tmp_path / "drafter-0.jsonl")
    assert [x["ev"] for x in lines] == ["run", "step", "end"]
    st = lines[1]
    assert st == {
        "ev": "step",
        "t": 1.875,
        "role": "drafter",
        "worker": 0,
        "batch": 7,
        "tokens": 900,
        "seqs": 3,
        "busy": 0.5,
        "wait": 0.3125,
        "blocked": 0.125,
        "loss": 2.5,
    }
    assert lines[2] == {"ev": "end", "t": 1.875, "reason": "done"}


def test_cancelled_or_failed_step_writes_nothing(tmp_path):
    clock = FakeClock()
    log = _log(tmp_path, clock)
    with log.step(tokens=1) as s:
        s.cancel()
    with pytest.raises(ZeroDivisionError):
        with log.step(tokens=1):
            1 / 0
    with pytest.raises(RecordError, match="'tokens'"):
        with log.step():
            pass
    log.close()
    assert [x["ev"] for x in _lines(tmp_path / "drafter-0.jsonl")] == ["run", "end"]


def test_explicit_calls_sync_and_rates(tmp_path):
    clock = FakeClock()
    log = _log(tmp_path, clock, role="target", worker=1)
    clock.advance(2.0)
    rec = log.step_done(busy_s=0.4, wait_s=0.1, blocked_s=0.0, tokens=800)
    assert (rec.t, rec.role, rec.worker) == (2.0, "target", 1)
    log.sync(dur_s=0.05, workers=2, bytes=1e6, role="drafter")
    log.rates(bps={"target": 1.0, "drafter": 1.0}, window=2.0)
    log.close()
    ev = _lines(tmp_path / "target-1.jsonl")
    assert [x["ev"] for x in ev] == ["run", "step", "sync", "rates", "end"]
    assert ev[2] == {"ev": "sync", "t": 2.0, "role": "drafter", "workers": 2, "dur": 0.05, "bytes": 1e6}
    assert ev[3]["t"] == 2.0 and ev[3]["bps"] == {"target": 1.0, "drafter": 1.0}


def test_bad_values_fail_where_they_are_made(tmp_path):
    log = _log(tmp_path, FakeClock())
    with pytest.raises(RecordError, match="step: field 'busy' must be a number >= 0"):
        log.step_done(busy_s=-1.0, tokens=5)
    with pytest.raises(RecordError, match="field 'tokens' must be a whole number"):
        log.step_done(busy_s=1.0, tokens=2.5)
    with pytest.raises(ValueError, match="not a role"):
        RateLog(tmp_path / "x.jsonl", HEADER, role="loader")
    with pytest.raises(ValueError, match="field 'worker' is 1 but the header has 1 'drafter' workers"):
        RateLog(tmp_path / "x.jsonl", HEADER, role="drafter", worker=1)
    with pytest.raises(RecordError, match="field 'role' 'loader' is not a role of the header"):
        log.step_done(busy_s=1.0, tokens=5, role="loader")  # written, the reader would refuse the log
    with pytest.raises(RecordError, match="field 'worker' is 3 but the header has 1 'drafter' workers"):
        log.step_done(busy_s=1.0, tokens=5, role="drafter", worker=3)


def test_meter_snapshots_pool_rates_every_interval(tmp_path):
    clock = FakeClock()
    log = _log(tmp_path, clock, snapshots=Snapshots(every_s=10.0, queue_depths=lambda: {"hs": 3}))
    log.meter.planned_batches = 100
    for _ in range(25):  # one drafter step every 0.5 s, 0.4 s busy, 1000 tokens
        clock.advance(0.5)
        log.step_done(busy_s=0.4, tokens=1000)
    log.close()
    rates = [x for x in _lines(tmp_path / "drafter-0.jsonl") if x["ev"] == "rates"]
    assert [r["t"] for r in rates] == [10.0]  # the next one (t=20) is after the last step
    r = rates[0]
    assert r["window"] == 10.0 and r["bps"] == {"target": 0.0, "drafter": 2.0}
    assert r["cap_bps"] == {"drafter": 2.5} and r["tok_s"] == 2000.0 and r["q"] == {"hs": 3}
    assert r["done"] == 0.2 and r["eta_s"] == 40.0


def test_meter_from_cumulative_counters():
    m = RateMeter(HEADER)
    m.set_totals("target", batches=10, busy_s=8.0, tokens=10_000)
    m.set_totals("drafter", batches=9, busy_s=3.0, tokens=9_000)
    a = m.snapshot(5.0)
    assert a.bps == {"target": 2.0, "drafter": 1.8} and a.cap_bps == {"target": 2.5, "drafter": 3.0}
    m.set_totals("target", batches=20, busy_s=16.0, tokens=20_000)
    b = m.snapshot(10.0)  # only the new window counts
    assert b.window == 5.0 and b.bps == {"target": 2.0, "drafter": 0.0} and b.cap_bps == {"target": 2.5}
    with pytest.raises(ValueError, match="not after"):
        m.snapshot(10.0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["target", "drafter"]), st.floats(0.01, 5.0), st.integers(0, 5000), st.booleans()),
        min_size=1,
        max_size=60,
    )
)
def test_meter_windows_add_up_to_the_totals(events):
    """Whatever the snapshot times, bps x window summed over the snapshots is every completion,
    and tok_s x window every consumer token."""
    m = RateMeter(HEADER)
    t, snaps = 0.0, []
    for role, busy, tokens, snap in events:
        m.add(role, busy_s=busy, tokens=tokens)
        t += 0.5
        if snap:
            snaps.append(m.snapshot(t))
    snaps.append(m.snapshot(t + 1.0))
    for role in ("target", "drafter"):
        n = sum(1 for e in events if e[0] == role)
        assert sum(r.bps[role] * r.window for r in snaps) == pytest.approx(n, abs=1e-4 * len(snaps))
    tokens = sum(e[2] for e in events if e[0] == "drafter")
    assert sum(r.tok_s * r.window for r in snaps) == pytest.approx(tokens, abs=1e-2 * len(snaps))


def test_processes_agree_on_time_through_the_header(tmp_path):
    """Two processes with unrelated monotonic clocks, opened at different wall times, place the
    same instant at the same t."""
    head = HEADER.stamped(1_000_000.0)
    a = RateLog.open(tmp_path, head, role="target", worker=0, clocks=Clocks(lambda: 50.0, lambda: 1_000_002.0))
    b = RateLog.open(tmp_path, head, role="drafter", worker=0, clocks=Clocks(lambda: 9_999.0, lambda: 1_000_002.0))
    assert a.now() == pytest.approx(2.0) and b.now() == pytest.approx(2.0)
    a.close()
    b.close()
    heads = {(tmp_path / f).read_text().splitlines()[0] for f in ("target-0.jsonl", "drafter-0.jsonl")}
    assert len(heads) == 1 and json.loads(heads.pop())["t0_unix"] == 1_000_000.0


def test_a_second_writer_of_one_file_fails_loudly(tmp_path):
    first = _log(tmp_path, FakeClock(), role="target", worker=1)
    with pytest.raises(FileExistsError, match="the same role and worker"):
        _log(tmp_path, FakeClock(), role="target", worker=1)
    first.close()
    again = _log(tmp_path, FakeClock(), role="target", worker=1, overwrite=True)
    again.close()
    assert [x["ev"] for x in _lines(tmp_path / "target-1.jsonl")] == ["run", "end"]


def test_events_after_end_are_dropped(tmp_path):
    clock = FakeClock()
    log = _log(tmp_path, clock)
    log.end("interrupted", "signal SIGTERM")
    clock.advance(1.0)
    log.step_done(busy_s=0.5, tokens=10)  # a graceful shutdown finishing its step
    log.close()
    assert [x["ev"] for x in _lines(tmp_path / "drafter-0.jsonl")] == ["run", "end"]


def test_unstamped_header_is_stamped_at_open(tmp_path):
    log = RateLog(tmp_path / "one.jsonl", HEADER, role="drafter", clocks=Clocks(wall=lambda: 123.5))
    log.close()
    assert _lines(tmp_path / "one.jsonl")[0]["t0_unix"] == 123.5


@pytest.mark.parametrize(
    "exc, reason, msg",
    [
        (None, "done", None),
        (KeyboardInterrupt, "interrupted", "KeyboardInterrupt"),
        (RuntimeError("CUDA out of memory"), "error", "RuntimeError: CUDA out of memory"),
        (SystemExit(0), "done", None),
    ],
)
def test_context_manager_ends_with_the_right_reason(tmp_path, exc, reason, msg):
    try:
        with _log(tmp_path, FakeClock()) as log:
            if exc is not None:
                raise exc
    except (KeyboardInterrupt, RuntimeError, SystemExit):
        pass
    end = _lines(tmp_path / "drafter-0.jsonl")[-1]
    assert end["ev"] == "end" and end["reason"] == reason and end.get("msg") == msg
    assert log.end() is None  # only once


def test_threads_never_tear_lines(tmp_path):
    log = RateLog(tmp_path / "t.jsonl", HEADER.stamped(), role="target")
    payload = {"note": "x" * 3000}  # long lines, many writers

    def work(w):
        for _ in range(200):
            log.step_done(busy_s=0.001, tokens=10, worker=w, facts=BatchFacts(extra=payload))

    threads = [threading.Thread(target=work, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    lines = _lines(tmp_path / "t.jsonl")
    assert len(lines) == 402 and all(x.get("note", payload["note"]) == payload["note"] for x in lines)


_SIGTERM_CHILD = r"""
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
from advisor.instrument import RateLog
from advisor.records import Run
mode = sys.argv[3]
if mode == "chain":
    def mine(signum, frame):
        print("previous handler ran", flush=True)
        sys.exit(3)
    signal.signal(signal.SIGTERM, mine)
head = Run(run="sig", roles={"target": 1, "drafter": 1}).stamped()
log = RateLog(sys.argv[2], head, role="target", handle_sigterm=True)
log.step_done(busy_s=0.1, tokens=10)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("mode", ["default", "chain"])
def test_sigterm_writes_end_then_passes_the_signal_on(tmp_path, mode):
    out = tmp_path / "sig.jsonl"
    p = subprocess.Popen(
        [sys.executable, "-c", _SIGTERM_CHILD, str(ROOT), str(out), mode], stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGTERM)
        rest = p.communicate(timeout=30)[0]
    finally:
        if p.poll() is None:
            p.kill()
    if mode == "default":
        assert p.returncode == -signal.SIGTERM  # still terminated by the signal
    else:
        assert p.returncode == 3 and "previous handler ran" in rest
    end = _lines(out)[-1]
    assert end["ev"] == "end" and end["reason"] == "interrupted" and end["msg"] == "signal SIGTERM"


def test_per_process_files_read_back_as_one_run(tmp_path):
    """Three 'processes' (separate logs and clocks) write a target-bound run; the advisor reads
    the directory as one run with every worker id kept."""
    head = HEADER.stamped(0.0)
    clocks = {k: FakeClock(start=s) for k, s in (("t0", 10.0), ("t1", 700.0), ("d0", 3.0))}
    logs = {
        "t0": RateLog.open(tmp_path, head, role="target", worker=0, clocks=Clocks(clocks["t0"], lambda: 0.0)),
        "t1": RateLog.open(tmp_path, head, role="target", worker=1, clocks=Clocks(clocks["t1"], lambda: 0.0)),
        "d0": RateLog.open(tmp_path, head, role="drafter", worker=0, clocks=Clocks(clocks["d0"], lambda: 0.0)),
    }
    for i in range(200):
        for k in ("t0", "t1"):
            clocks[k].advance(0.5)
            logs[k].step_done(busy_s=0.5, tokens=1000, facts=BatchFacts(batch=2 * i + (k == "t1")))
        for _ in range(2):
            clocks["d0"].advance(0.25)
            logs["d0"].step_done(busy_s=0.1, wait_s=0.15, tokens=1000)
    for lg in logs.values():
        lg.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        rank_file_name(r, w) for r, w in (("target", 0), ("target", 1), ("drafter", 0))
    )
    run = load_logs([tmp_path])[0]
    assert len(run.steps) == 800 and run.end["reason"] == "done"
    assert set(zip(run.steps["role"], run.steps["worker"])) == {("target", 0), ("target", 1), ("drafter", 0)}
    assert (run.steps["t"].diff().dropna() >= 0).all()
    from advisor import advice_json, advise

    adv = advice_json(advise(tmp_path))
    assert adv["observed"]["bottleneck"] == "target"
    assert adv["observed"]["capacities_bps"]["target"] == pytest.approx(4.0, rel=1e-3)


def test_importing_the_api_loads_no_heavy_module():
    code = (
        "import sys; import advisor.instrument, advisor.records; "
        "print(sorted(m for m in ('pandas', 'numpy', 'torch', 'polars', 'scipy') if m in sys.modules))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.slow
def test_example_pipeline_runs_and_is_advised(tmp_path):
    """examples/instrumented_loop.py: real torch processes on CPU, a few seconds, then the CLI."""
    pytest.importorskip("torch")
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = time.monotonic()
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "instrumented_loop.py"),
            "--out",
            str(out),
            "--seconds",
            "8",
            "--rates-every",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    took = time.monotonic() - t
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == [
        "coordinator.jsonl",
        "drafter-0.jsonl",
        "target-0.jsonl",
        "target-1.jsonl",
    ]
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads((ROOT / "docs" / "rate-log.schema.json").read_text()))
    heads = set()
    for p in out.iterdir():
        lines = _lines(p)
        # a time limit ends the run, not its input: interrupted (docs/log-schema.md), so no tail is a drain
        assert lines[0]["ev"] == "run" and lines[-1] == {
            **lines[-1],
            "ev": "end",
            "reason": "interrupted",
            "msg": "time limit (--seconds)",
        }
        assert all(validator.is_valid(x) for x in lines), p.name
        heads.add(json.dumps(lines[0]))
    assert len(heads) == 1  # every process wrote the same header
    head = json.loads(heads.pop())  # the cores the workers shared, stated (docs/log-schema.md)
    assert head["device"] == "cpu" and head["cores"] == len(os.sched_getaffinity(0))
    log = load_log(out / "drafter-0.jsonl")
    assert len(log.steps) >= 40, f"only {len(log.steps)} drafter steps in {took:.0f} s"
    a = subprocess.run(
        [sys.executable, "-c", "from advisor.cli.app import main; main()", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert a.returncode == 0, a.stderr
    adv = json.loads(a.stdout)
    assert adv["observed"]["roles"] == {"target": 2, "drafter": 1}
    assert adv["recommendation"]["verdict"] in ("stay", "switch", "next-run", "cannot-tell")
    assert {tuple(s["roles"].values()) for s in adv["splits"]} == {(2, 1), (1, 2)}


def test_transferring_logs_xfer(tmp_path):
    import json

    from advisor.instrument import RateLog
    from advisor.records import Run

    head = Run(run="x", roles={"target": 1, "drafter": 1}).stamped()
    with RateLog(tmp_path / "d.jsonl", head, role="drafter") as log:
        with log.step(tokens=10) as s:
            with s.transferring():
                pass
    steps = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines() if '"step"' in x]
    assert "xfer" in steps[0] and steps[0]["xfer"] <= steps[0]["busy"] + 1e-6
