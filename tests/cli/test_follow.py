"""`follow_logs` on a log that grows while it is followed (advisor/cli/follow.py)."""

from __future__ import annotations

import io
import re
import threading
import time
from pathlib import Path

import pytest
from conftest import split_by_rank

from advisor.advice import advise
from advisor.cli import follow as follow
from advisor.cli.follow import follow_logs
from advisor.present.text import render

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "reference-7x1.jsonl"
INTERVAL_S = 0.2
DEADLINE_S = 20.0
END = b'{"ev":"end","t":5400.0,"reason":"interrupted"}\n'  # the fixture is cut from a live run


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
                fh.write(b"".join(lines[:30]))  # header + a few steps: too few to advise
                fh.flush()
                _wait_for(buf, "waiting for data")
                fh.write(b"".join(lines[30:cut]))
                fh.write(lines[cut][:25])  # a line cut mid-write
                fh.flush()
                _wait_for(buf, "last line is incomplete")
                fh.write(lines[cut][25:])
                fh.write(b"".join(lines[cut + 1 : -1]))  # the rest, without the end event
                fh.flush()
                _wait_for(buf, "----- following", count=2)
                fh.write(lines[-1])
                fh.flush()
        except BaseException as e:  # surfaced by the main thread
            errors.append(e)

    result: dict[str, int] = {}
    t0 = time.monotonic()
    follower = threading.Thread(
        target=lambda: result.setdefault("rc", follow_logs([log], interval_s=INTERVAL_S, out=buf)), daemon=True
    )
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
    final = out[out.index("----- run ended") :]
    assert f"{len(lines)} lines read" in final


def test_follow_ctrl_c_after_a_report_returns_0_before_any_returns_130(tmp_path, monkeypatch, capsys):
    def interrupt(_s):
        raise KeyboardInterrupt

    monkeypatch.setattr(follow, "_sleep", interrupt)
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    log = tmp_path / "live.jsonl"
    log.write_bytes(b"".join(lines[:-1]))  # a run in progress: no end event
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


@pytest.mark.parametrize("error", [RuntimeError, KeyError])
def test_follow_crash_is_exit_2_one_line(monkeypatch, capsys, error):
    """A bug is named one, as without --follow: a KeyError too (it was said as a --roles error)."""
    import advisor.advice

    def boom(*a, **k):
        raise error("simulated")

    monkeypatch.setattr(advisor.advice, "advise", boom)
    assert follow_logs([FIXTURE], interval_s=0.1, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" in err and str(FIXTURE) in err


def test_follow_a_run_directory_of_per_rank_files(tmp_path):
    """`dflash-advise DIR --follow`: the per-rank files of a run directory are followed as one run."""
    run = tmp_path / "run"
    split_by_rank(ROOT / "fixtures" / "h200-1x2.jsonl", run)  # every file ends with the end line
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
        if len(calls) == 2:  # while followed: the path becomes the other kind
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


# --- live odds: each refresh shows the verdict's odds and whether they have settled


_HEAD = re.compile(r"^----- (?:following|run ended);", re.MULTILINE)  # a report's separator line


def _expected_odds(content: bytes, tmp_path: Path):
    """The odds `advise` gives on ``content`` read as a finished file (not through the follower)."""
    from advisor.cli.follow import OddsPoint

    p = tmp_path / "copy.jsonl"
    p.write_bytes(content)
    return OddsPoint.of(advise([p]))


def _settled_by_rule(points, tol: float, k: int) -> list[bool]:
    """The settle rule of advisor/cli/follow.py's docstring, applied to a list of points."""
    out = []
    for i in range(len(points)):
        last = points[max(0, i - k + 1) : i + 1]
        same = len({(p.action, p.split, p.close_call) for p in last}) == 1
        spread_p = max(p.p_best for p in last) - min(p.p_best for p in last)
        spread_r = max(p.expected_regret_pct for p in last) - min(p.expected_regret_pct for p in last)
        out.append(len(last) == k and same and spread_p <= tol and spread_r / 100 <= tol)
    return out


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_follow_shows_the_odds_and_says_when_they_settle(tmp_path, fmt):
    """The log grows (its odds move), then gains only lines that leave the odds as they are (unknown
    events, counted and ignored): the odds are printed at every refresh, and 'settled' appears from
    the refresh whose last SETTLE_REFRESHES agree, not before."""
    import json
    import os

    from advisor.decide.odds_text import share_text
    from advisor.settings import SETTLE_REFRESHES

    tol = 0.001
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    t_last = json.loads(lines[2999])["t"]
    pad = b'{"ev":"note","t":%.3f}\n' % t_last
    steps = [b"".join(lines[:1000]), b"".join(lines[:3000])]
    steps += [steps[-1] + pad * k for k in (1, 2, 3)]
    steps.append(steps[-1] + END)
    want = [_expected_odds(c, tmp_path) for c in steps]
    assert abs(want[0].p_best - want[1].p_best) > tol  # the growing part moves the odds
    assert want[1] == want[2] == want[3] == want[4]  # the padding leaves them as they are
    settled = _settled_by_rule(want, tol, SETTLE_REFRESHES)
    assert settled.index(True) == 3  # (so the test can tell early from late)

    log = tmp_path / "live.jsonl"
    tmp = tmp_path / "next.jsonl"
    log.write_bytes(steps[0])
    buf = _Buffer()
    errors: list[BaseException] = []

    def reports() -> int:
        text = buf.text()
        return len(text.splitlines()) if fmt == "json" else len(_HEAD.findall(text))

    def writer():
        try:
            for i, content in enumerate(steps[1:], 1):
                end = time.monotonic() + 60.0
                while reports() < i:
                    if time.monotonic() > end:
                        raise AssertionError(f"no report {i}; output so far:\n{buf.text()[-2000:]}")
                    time.sleep(0.02)
                tmp.write_bytes(content)
                os.replace(tmp, log)  # the whole step at once: no pass reads half of it
        except BaseException as e:  # noqa: BLE001  (surfaced by the main thread)
            errors.append(e)

    result: dict[str, int] = {}
    follower = threading.Thread(
        target=lambda: result.setdefault(
            "rc", follow_logs([log], fmt=fmt, interval_s=INTERVAL_S, settle_tol=tol, out=buf)
        ),
        daemon=True,
    )
    follower.start()
    w = threading.Thread(target=writer, daemon=True)
    w.start()
    follower.join(120.0)
    assert not follower.is_alive(), buf.text()[-2000:]
    w.join(1.0)
    assert not errors, errors
    assert result["rc"] == 0
    if fmt == "json":
        docs = [json.loads(x) for x in buf.text().splitlines()]
        assert len(docs) == len(steps)
        for i, (doc, pt, st) in enumerate(zip(docs, want, settled), 1):
            f = doc["follow"]
            assert f["refresh"] == i and f["settled"] is st and f["settle_tol"] == tol
            assert f["odds"]["split"] == pt.split and f["odds"]["action"] == pt.action
            assert f["odds"]["p_best"] == pytest.approx(pt.p_best, abs=1e-4)
            assert f["odds"]["p_best"] == pytest.approx(doc["recommendation"]["p_best"], abs=1e-4)
            assert f["odds"]["expected_regret_pct"] == pytest.approx(pt.expected_regret_pct, abs=0.01)
            assert f["odds"]["close_call"] is pt.close_call
        return
    blocks = _HEAD.split(buf.text())[1:]
    assert len(blocks) == len(steps)
    for block, pt, st in zip(blocks, want, settled):
        odds_line = block.splitlines()[1]
        assert odds_line.startswith("odds settled:" if st else ("odds so far:", "odds moving:")), odds_line
        assert f"{pt.split}, {share_text(pt.p_best)} likely the best" in odds_line
        assert f"expected regret {pt.expected_regret_pct:.2f}%" in odds_line
    assert sum("odds settled:" in b for b in blocks) == sum(settled)


def test_settle_tol_is_an_option_with_limits():
    from typer.testing import CliRunner

    from advisor.cli.app import app, route

    r = CliRunner().invoke(app, route([str(FIXTURE), "--follow", "--settle-tol", "1.5"]))
    assert r.exit_code == 2 and "--settle-tol" in r.stderr
    with pytest.raises(ValueError, match="--settle-tol"):
        follow_logs([FIXTURE], settle_tol=-0.1)


def test_follow_cli_json_on_an_ended_log_carries_the_odds_not_settled(ended):
    """One report of a finished log: its odds, and not settled (one refresh cannot tell)."""
    import json

    from typer.testing import CliRunner

    from advisor.cli.app import app, route

    r = CliRunner().invoke(app, route([str(ended), "--follow", "--json", "--interval", "0.1"]))
    assert r.exit_code == 0, r.output
    docs = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(docs) == 1
    f, rec = docs[0]["follow"], docs[0]["recommendation"]
    assert f["refresh"] == 1 and f["settled"] is False
    assert f["odds"]["p_best"] == pytest.approx(rec["p_best"], abs=1e-4)
    assert f["odds"]["close_call"] is rec["close_call"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_follow_does_not_call_odds_on_thin_evidence_settled(tmp_path, monkeypatch, fmt):
    """Issue 50 item 7: a short log whose odds hold still over the refreshes (it gains only lines
    the advice ignores) keeps reading provisional: thin evidence; the odds line then says they are
    unchanged but provisional, never "odds settled", and the JSON's ``settled`` stays false."""
    import json

    from typer.testing import CliRunner

    from advisor.cli.app import app, route

    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    head = b"".join(lines[:100])
    pad = b'{"ev":"note","t":%.3f}\n' % json.loads(lines[99])["t"]
    log = tmp_path / "thin.jsonl"
    log.write_bytes(head)
    steps = iter([head + pad * k for k in (1, 2, 3, 4)] + [head + pad * 4 + END])

    def grow(_s: float) -> None:  # each wait of the follower: the log gains its next step
        nxt = next(steps, None)
        if nxt is not None:
            log.write_bytes(nxt)

    monkeypatch.setattr(follow, "_sleep", grow)
    as_json = ["--json"] if fmt == "json" else []
    r = CliRunner().invoke(app, route([str(log), "--follow", "--interval", "0.1", *as_json]))
    assert r.exit_code == 0, r.output
    if fmt == "json":
        docs = [json.loads(x) for x in r.stdout.splitlines()]
        assert len(docs) == 6 and all(d["recommendation"]["provisional"] for d in docs)
        assert [d["follow"]["settled"] for d in docs] == [False] * 6
        assert all(d["follow"]["odds"]["provisional"] for d in docs)
        return
    blocks = _HEAD.split(r.stdout)[1:]
    assert len(blocks) == 6
    for i, block in enumerate(blocks, 1):
        assert "(provisional: thin evidence)" in block
        odds_line = block.splitlines()[1]
        assert not odds_line.startswith("odds settled"), odds_line
        if 3 <= i <= 5:  # odds held still over the last three refreshes (the end then makes it next-run)
            assert odds_line.startswith("odds provisional:") and "but on thin evidence" in odds_line, odds_line
