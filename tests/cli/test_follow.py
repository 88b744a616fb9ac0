"""`follow_logs` on a log that grows while it is followed (advisor/cli/follow.py)."""
from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest

from advisor.cli import follow as follow
from advisor.advice import advise
from advisor.cli.follow import follow_logs
from advisor.present.text import render
from conftest import split_by_rank

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "reference-7x1.jsonl"
INTERVAL_S = 0.2
DEADLINE_S = 20.0
END = b'{"ev":"end","t":5400.0,"reason":"interrupted"}\n'   # the fixture is cut from a live run


@pytest.fixture
def ended(tmp_path):
    """The reference log with the `end` event of a finished run."""
    p = tmp_path / "ended.jsonl"
    p.write_bytes(FIXTURE.read_bytes() + END)
    return p


class _Buffer(io.StringIO):
    """A StringIO that another thread can poll safely."""

    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()

    def write(self, s: str) -> int:
        with self.lock:
            return super().write(s)

    def text(self) -> str:
        with self.lock:
            return self.getvalue()


def _wait_for(buf: _Buffer, needle: str, count: int = 1, timeout_s: float = 10.0) -> None:
    end = time.monotonic() + timeout_s
    while buf.text().count(needle) < count:
        if time.monotonic() > end:
            raise AssertionError(f"follower never printed {needle!r} x{count}; output so far:\n{buf.text()[-2000:]}")
        time.sleep(0.02)


def test_follow_picks_up_growth_partial_line_and_stops_at_end(tmp_path):
    lines = FIXTURE.read_bytes().splitlines(keepends=True) + [END]
    log = tmp_path / "live.jsonl"
    log.write_bytes(b"")
    buf = _Buffer()
    errors: list[BaseException] = []
    cut = 4000

    def writer():
        try:
            with open(log, "ab") as fh:
                fh.write(b"".join(lines[:30]))          # header + a few steps: too few to advise
                fh.flush()
                _wait_for(buf, "waiting for data")
                fh.write(b"".join(lines[30:cut]))
                fh.write(lines[cut][:25])               # a line cut mid-write
                fh.flush()
                _wait_for(buf, "last line is incomplete")
                fh.write(lines[cut][25:])
                fh.write(b"".join(lines[cut + 1:-1]))   # the rest, without the end event
                fh.flush()
                _wait_for(buf, "----- following", count=2)
                fh.write(lines[-1])
                fh.flush()
        except BaseException as e:  # surfaced by the main thread
            errors.append(e)

    result: dict[str, int] = {}
    t0 = time.monotonic()
    follower = threading.Thread(target=lambda: result.setdefault("rc", follow_logs([log], interval_s=INTERVAL_S,
                                                                                  out=buf)), daemon=True)
    follower.start()
    w = threading.Thread(target=writer, daemon=True)
    w.start()
    follower.join(DEADLINE_S)
    elapsed = time.monotonic() - t0
    assert not follower.is_alive(), f"follow_logs did not stop at the end event; output:\n{buf.text()[-2000:]}"
    w.join(1.0)
    assert not errors, errors
    assert result["rc"] == 0
    assert elapsed < DEADLINE_S
    out = buf.text()
    assert out.index("waiting for data (") < out.index("----- following")
    assert "last line is incomplete" in out
    assert out.count("----- run ended") == 1 and out.rstrip().endswith(render(advise([log])).rstrip())
    # the last report is for the whole run, not a stale one
    final = out[out.index("----- run ended"):]
    assert f"{len(lines)} lines read" in final


def test_follow_ctrl_c_after_a_report_returns_0_before_any_returns_130(tmp_path, monkeypatch, capsys):
    def interrupt(_s):
        raise KeyboardInterrupt

    monkeypatch.setattr(follow, "_sleep", interrupt)
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    log = tmp_path / "live.jsonl"
    log.write_bytes(b"".join(lines[:-1]))             # a run in progress: no end event
    buf = io.StringIO()
    assert follow_logs([log], interval_s=INTERVAL_S, out=buf) == 0
    assert "STAY with 7-1" in buf.getvalue() and "stopped (Ctrl-C)" in buf.getvalue()
    log.write_bytes(b"".join(lines[:10]))
    buf = io.StringIO()
    assert follow_logs([log], interval_s=INTERVAL_S, out=buf) == 130
    assert "waiting for data (10 lines so far)" in buf.getvalue()
    assert "interrupted before any advice" in capsys.readouterr().err


def test_follow_missing_file_gives_up_after_max_wait(tmp_path, capsys):
    t0 = time.monotonic()
    rc = follow_logs([tmp_path / "never.jsonl"], interval_s=0.1, max_wait_s=0.3, out=io.StringIO())
    assert rc == 2
    assert 0.3 <= time.monotonic() - t0 < 5
    err = capsys.readouterr().err
    assert "never.jsonl: no such file" in err and err.count("\n") == 1


def test_follow_corrupt_line_is_unusable_not_waited_on(tmp_path, capsys):
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    log = tmp_path / "bad.jsonl"
    log.write_bytes(b"".join(lines[:50]) + b"{not json}\n" + b"".join(lines[50:100]))
    assert follow_logs([log], interval_s=0.1, out=io.StringIO()) == 2
    assert "bad.jsonl:51" in capsys.readouterr().err


def test_follow_ended_without_enough_data_is_unusable(tmp_path, capsys):
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    log = tmp_path / "short.jsonl"
    log.write_bytes(b"".join(lines[:20]) + END)
    assert follow_logs([log], interval_s=0.1, out=io.StringIO()) == 2
    assert "ended before" in capsys.readouterr().err


def test_follow_on_a_tty_redraws_in_place(ended):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    assert follow_logs([ended], interval_s=INTERVAL_S, out=out) == 0
    text = out.getvalue()
    assert text.startswith(follow.CLEAR + "run ended; 9199 lines read") and "----- run ended" not in text


def test_follow_json_stream_is_json_lines(ended):
    import json

    out = io.StringIO()
    assert follow_logs([ended], fmt="json", interval_s=INTERVAL_S, out=out) == 0
    docs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(docs) == 1 and docs[0]["recommendation"]["roles"] == {"target": 7, "drafter": 1}


def test_follow_rejects_bad_arguments():
    with pytest.raises(ValueError, match="fmt"):
        follow_logs([FIXTURE], fmt="html")
    with pytest.raises(ValueError, match="--interval"):
        follow_logs([FIXTURE], interval_s=0)


def _no_sleep(monkeypatch):
    """A follower that would wait instead of stopping fails fast instead of hanging the suite."""
    calls = []

    def sleep(s):
        calls.append(s)
        if len(calls) > 50:
            raise AssertionError("the follower kept waiting on input that cannot get better")
    monkeypatch.setattr(follow, "_sleep", sleep)


def test_follow_refused_input_is_not_waited_on(tmp_path, monkeypatch, capsys):
    """A log past the loader's limits (here: a gzip bomb) ends the follow at once with exit 2."""
    import gzip

    import advisor.ingest.reader as reader
    _no_sleep(monkeypatch)
    line = b'{"ev": "x", "t": 1}\n'
    log = tmp_path / "bomb.jsonl.gz"
    log.write_bytes(gzip.compress(line * ((reader.RATIO_CHECK_BYTES + 2 * reader.CHUNK_BYTES) // len(line))))
    assert follow_logs([log], interval_s=0.1, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bomb" in err


def test_follow_fifo_is_refused(tmp_path, monkeypatch, capsys):
    import os
    import signal
    _no_sleep(monkeypatch)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    signal.alarm(20)
    try:
        assert follow_logs([fifo], interval_s=0.1, out=io.StringIO()) == 2
    finally:
        signal.alarm(0)
    assert str(fifo) in capsys.readouterr().err


def test_follow_crash_is_exit_2_one_line(monkeypatch, capsys):
    import advisor.advice

    def boom(*a, **k):
        raise RuntimeError("simulated")
    monkeypatch.setattr(advisor.advice, "advise", boom)
    assert follow_logs([FIXTURE], interval_s=0.1, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" in err and str(FIXTURE) in err


def test_follow_a_run_directory_of_per_rank_files(tmp_path):
    """`dflash-advise DIR --follow`: the per-rank files of a run directory are followed as one run."""
    run = tmp_path / "run"
    split_by_rank(ROOT / "fixtures" / "h200-1x2.jsonl", run)    # every file ends with the end line
    out = io.StringIO()
    assert follow_logs([run], interval_s=INTERVAL_S, out=out) == 0
    assert "run ended" in out.getvalue() and render(advise([run])).rstrip() in out.getvalue()


@pytest.mark.parametrize("into", ["folder", "empty folder", "file"])
def test_follow_a_path_that_changes_type_ends_with_exit_2(tmp_path, monkeypatch, capsys, into):
    """A followed log replaced by a folder (or a followed folder by a file) ends the follow in one
    line; it used to wait for ever on an empty folder."""
    import shutil
    calls = []
    path = tmp_path / "live.jsonl"
    if into == "file":
        path.mkdir()
        (path / "r0.jsonl").write_bytes(FIXTURE.read_bytes()[:5000])
    else:
        path.write_bytes(FIXTURE.read_bytes()[:5000])

    def sleep(s):
        calls.append(s)
        if len(calls) == 2:     # while followed: the path becomes the other kind
            if into == "file":
                shutil.rmtree(path)
                path.write_bytes(b"")
            else:
                path.unlink()
                path.mkdir()
                if into == "folder":
                    (path / "r0.jsonl").write_bytes(FIXTURE.read_bytes()[:5000])
        if len(calls) > 20:
            raise AssertionError("the follower kept waiting after the path changed type")
    monkeypatch.setattr(follow, "_sleep", sleep)
    assert follow_logs([path], interval_s=0.1, out=io.StringIO()) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "is now a" in err[0], err
