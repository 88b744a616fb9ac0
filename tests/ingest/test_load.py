"""Loader: every kind of bad input names file, line and field; good input becomes frames (advisor.ingest.load)."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import HEADER, good_lines

from advisor.errors import LogError, LogWarning
from advisor.ingest.load import load_log


def test_good_log_frames(write_log):
    log = load_log(write_log(good_lines(10)))
    assert list(log.header.roles) == ["target", "drafter"]
    assert len(log.steps) == 20
    assert set(log.steps["role"]) == {"target", "drafter"}
    assert log.steps["t"].is_monotonic_increasing
    assert log.end["reason"] == "done"


def test_gzip_and_out_of_order(tmp_path):
    lines = good_lines(5)
    lines[2], lines[3] = lines[3], lines[2]
    p = tmp_path / "x.jsonl.gz"
    with gzip.open(p, "wt") as fh:
        fh.writelines(json.dumps(l) + "\n" for l in lines)
    log = load_log(p)
    assert len(log.steps) == 10 and log.steps["t"].is_monotonic_increasing


def expect_error(path, line, field=None):
    with pytest.raises(LogError) as ei:
        load_log(path)
    e = ei.value
    assert e.line == line, str(e)
    if field:
        assert e.field == field, str(e)
    assert str(path) in str(e)
    return str(e)


def test_empty_file(write_log):
    msg = expect_error(write_log([], raw=b""), None)
    assert "empty" in msg


def test_missing_file(tmp_path):
    expect_error(tmp_path / "nope.jsonl", None)


def test_non_json_line(write_log):
    lines = good_lines(5)
    lines.insert(3, "this is not json")
    assert "not valid JSON" in expect_error(write_log(lines), 4)


def test_missing_header(write_log):
    expect_error(write_log(good_lines(5)[1:]), 1, "ev")


@pytest.mark.parametrize(
    "field,value,needle",
    [
        ("busy", "fast", "must be a number"),
        ("busy", -0.5, ">= 0"),
        ("t", -1.0, ">= 0"),
        ("tokens", 12.5, "whole number"),
        ("worker", 5, "header has 1"),
        ("role", "verifier", "not a role"),
    ],
)
def test_bad_step_fields(write_log, field, value, needle):
    lines = good_lines(5)
    lines[4] = dict(lines[4], **{field: value})
    assert needle in expect_error(write_log(lines), 5, field)


def test_non_finite_time(write_log):
    lines = [json.dumps(l) for l in good_lines(5)]
    lines[2] = lines[2].replace('"busy": 0.1', '"busy": NaN')
    assert "finite" in expect_error(write_log(lines), 3, "busy")


def test_missing_required_field(write_log):
    lines = good_lines(5)
    del lines[3]["busy"]
    assert "missing" in expect_error(write_log(lines), 4, "busy")


@pytest.mark.parametrize("roles", [[1, 2], {"target": 0, "drafter": 1}, {"target": 2}, "x", {"a": 1.5, "b": 1}])
def test_malformed_roles(write_log, roles):
    lines = good_lines(3)
    lines[0] = dict(HEADER, roles=roles)
    expect_error(write_log(lines), 1, "roles")


def test_binary_garbage(write_log):
    body = b"".join(json.dumps(l).encode() + b"\n" for l in good_lines(5))
    raw = body.replace(b"\n", b"\n\xff\xfe\x00\x81garbage\n", 1)
    assert "UTF-8" in expect_error(write_log(None, raw=raw), 2)


def test_absurdly_long_line_is_refused_with_bounded_read(write_log):
    lines = [json.dumps(l) for l in good_lines(3)]
    lines.insert(2, '{"ev":"step","pad":"' + "x" * (3 << 20) + '"}')
    msg = expect_error(write_log(lines), 3)
    assert "longer than" in msg


def test_header_only_has_too_little_to_fit(write_log):
    from advisor.advice import advise

    p = write_log([HEADER])
    with pytest.raises(LogError) as ei:
        advise(p)
    assert "steps" in str(ei.value) or "snapshots" in str(ei.value)


def test_partial_last_line_is_skipped_with_warning(write_log):
    body = "".join(json.dumps(l) + "\n" for l in good_lines(5)[:-1]) + '{"ev":"step","t":9.9,"ro'
    p = write_log(None, raw=body.encode())
    with pytest.warns(LogWarning, match="incomplete"):
        log = load_log(p)
    assert len(log.steps) == 10 and log.end is None


def test_unknown_events_and_fields_are_counted_not_fatal(write_log):
    lines = good_lines(5)
    lines.insert(2, {"ev": "heartbeat", "t": 0.3})
    lines.insert(2, {"ev": "heartbeat", "t": 0.2})
    lines[5]["extra_field"] = {"nested": [1, 2]}
    with pytest.warns(LogWarning, match="heartbeat"):
        log = load_log(write_log(lines))
    assert log.unknown_events == {"heartbeat": 2}
    assert log.unknown_fields == {"step.extra_field": 1}
    assert len(log.steps) == 10


def test_a_misspelled_field_is_reported_once_with_the_known_name(write_log, monkeypatch):
    """`blokced` on every step line: exit 0 as before, and one warning naming `blocked` and the count."""
    from advisor.ingest import reader, stream

    monkeypatch.setattr(reader, "CHUNK_BYTES", 300)
    monkeypatch.setattr(stream, "PIECE_BYTES", 1000)  # many pieces: the count spans them all
    lines = good_lines(60)
    for ev in lines:
        if ev["ev"] == "step":
            ev["blokced"] = ev.pop("blocked", 0.0)
            ev["mem"] = 1.0  # the writer's own field: counted, not reported
    with pytest.warns(LogWarning) as got:
        log = load_log(write_log(lines))
    texts = [str(w.message) for w in got]
    typo = [t for t in texts if "blokced" in t]
    assert len(typo) == 1 and "in 120 'step' lines ignored; did you mean 'blocked'?" in typo[0]
    assert not any("'mem'" in t for t in texts)
    assert log.unknown_fields == {"step.blokced": 120, "step.mem": 120}
    assert (log.steps["blocked"].fillna(0) == 0).all()


def test_a_misspelled_header_field_is_reported(write_log):
    lines = good_lines(5)
    lines[0] = {**lines[0], "gpu": 3}
    with pytest.warns(LogWarning, match=r"unknown field 'gpu' in the header ignored; did you mean 'gpus'\?"):
        load_log(write_log(lines))


def test_blank_lines_keep_line_numbers(write_log):
    lines = [json.dumps(l) for l in good_lines(5)]
    lines.insert(2, "")
    lines.insert(2, "")
    lines[6] = lines[6].replace('"busy": 0.1', '"busy": -1')
    expect_error(write_log(lines), 7, "busy")


def test_negative_rate_snapshot_named(write_log):
    lines = good_lines(5)
    lines.insert(
        4, {"ev": "rates", "t": 1.0, "window": 1.0, "bps": {"target": -1, "drafter": 1}, "q": {"pre": [1, 2], "hs": 3}}
    )
    expect_error(write_log(lines), 5, "bps.target")


def test_second_run_header_anywhere(write_log):
    lines = good_lines(10)
    lines.insert(7, dict(HEADER, roles={"target": 1, "drafter": 2}))
    assert "second 'run' header" in expect_error(write_log(lines), 8, "ev")


def test_concatenated_runs_are_refused(tmp_path):
    from conftest import FIXTURES

    a, b = (FIXTURES / "cpu-2x1.jsonl").read_bytes(), (FIXTURES / "h200-2x1.jsonl").read_bytes()
    p = tmp_path / "cat.jsonl"
    p.write_bytes(a + b)
    expect_error(p, a.count(b"\n") + 1, "ev")


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400"])
@pytest.mark.parametrize("field", ["wait", "blocked", "batch", "seqs", "loss", "busy", "t"])
def test_non_finite_in_any_step_field(write_log, field, token):
    lines = [json.dumps(l) for l in good_lines(10)]
    obj = json.loads(lines[4])
    obj[field] = "@@"
    lines[4] = json.dumps(obj).replace('"@@"', token)
    assert "finite" in expect_error(write_log(lines), 5, field)


@pytest.mark.parametrize("reason", ["crashed", "", "DONE"])
def test_end_reason_outside_the_contract(write_log, reason):
    lines = good_lines(5)
    lines[-1]["reason"] = reason
    expect_error(write_log(lines), len(lines), "reason")


@pytest.mark.parametrize("field", ["busy", "tokens", "wait", "worker"])
def test_booleans_are_not_numbers(write_log, field):
    lines = good_lines(5)
    lines[3][field] = True
    assert "must be a number" in expect_error(write_log(lines), 4, field)


def test_sync_fields_checked_on_the_fast_path(write_log):
    lines = good_lines(8)
    lines.insert(5, {"ev": "sync", "t": 1.0, "role": "drafter", "workers": 1.5, "dur": 0.1})
    assert "whole number" in expect_error(write_log(lines), 6, "workers")


def test_unknown_event_may_omit_t_but_not_hold_nan(write_log):
    lines = [json.dumps(l) for l in good_lines(8)]
    ok = lines[:3] + ['{"ev": "heartbeat"}'] + lines[3:]
    with pytest.warns(LogWarning, match="heartbeat"):
        assert len(load_log(write_log(ok, "ok.jsonl")).steps) == 16
    bad = lines[:3] + ['{"ev": "heartbeat", "t": NaN}'] + lines[3:]
    expect_error(write_log(bad, "bad.jsonl"), 4, "t")


def test_two_objects_on_one_line(write_log):
    lines = [json.dumps(l) for l in good_lines(8)]
    lines[3] = lines[3] + lines[4]
    assert "not valid JSON" in expect_error(write_log(lines), 4)


def test_header_limits(write_log):
    for over, field in (
        ({"gpus": 4097}, "gpus"),
        ({"roles": {"target": 1e12, "drafter": 1}}, "roles"),
        ({"queues": 5}, "queues"),
        ({"t": 1e15}, "t"),
    ):
        lines = good_lines(3)
        lines[0] = dict(HEADER, **over)
        expect_error(write_log(lines), 1, field)


def test_utf8_bom_and_crlf_are_fine(tmp_path):
    p = tmp_path / "win.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(l) + "\r\n" for l in good_lines(5)).encode())
    assert len(load_log(p).steps) == 10


def test_not_utf8_names_the_line(write_log):
    raw = "".join(json.dumps(l) + "\n" for l in good_lines(5)).encode()
    lines = raw.split(b"\n")
    lines[3] = lines[3].replace(b'"step"', b'"st\xe9p"')
    assert "UTF-8" in expect_error(write_log(None, raw=b"\n".join(lines)), 4)


def test_surrogate_in_run_name_is_repaired_with_a_warning(write_log):
    lines = good_lines(5)
    lines[0] = dict(HEADER, run="a\ud800b")
    p = write_log(None, raw="".join(json.dumps(l) + "\n" for l in lines).encode())
    with pytest.warns(LogWarning, match="surrogate"):
        log = load_log(p)
    assert log.header.run == "a\ufffdb"


@pytest.mark.parametrize("field", ["busy", "tokens"])
def test_every_step_zero_is_unusable(write_log, field):
    lines = [dict(l, **{field: 0}) if l.get("ev") == "step" else l for l in good_lines(5)]
    expect_error(write_log(lines), None, field)


def test_sampled_log_keeps_exact_counts(write_log):
    p = write_log(good_lines(400))
    log = load_log(p, sample_rows=50)
    assert log.sampled and log.totals is not None
    assert log.n_steps == {"target": 400, "drafter": 400}
    assert (log.steps["role"] == "target").sum() == 50
    assert log.steps["t"].is_monotonic_increasing
    assert log.duration_s == load_log(p).duration_s
    assert log.totals.series("target", "n").sum() == 400
    assert log.totals.series("drafter", "busy").sum() == pytest.approx(400 * 0.1)


def test_complete_last_line_without_newline_gets_every_check(write_log):
    """A last line that is whole JSON (only its newline missing) is a line like any other."""
    lines = [json.dumps(l) for l in good_lines(5)[:-1]]  # ends with a drafter step (busy 0.1)
    assert '"busy": 0.1' in lines[-1]
    raw = ("\n".join(lines[:-1]) + "\n" + lines[-1].replace('"busy": 0.1', '"busy": -1')).encode()
    expect_error(write_log([], raw=raw), len(lines), "busy")


def _advise_cli(path):
    """`dflash-advise PATH` as the user runs it: the exit code and the one line on stderr."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "advisor", str(path)], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stderr.strip()


@pytest.mark.parametrize("line_no", [1, 4])
def test_an_unterminated_string_is_named_once(write_log, line_no):
    """Issue 50: "Unterminated string starting at at column 27": json's message ends in the "at"."""
    lines = good_lines(5)
    cut = '{"ev": "run", "run": "my ru' if line_no == 1 else '{"ev": "step", "t": 1.0, "role": "targ'
    lines[line_no - 1] = cut
    path = write_log(lines)
    code, err = _advise_cli(path)
    col = cut.rindex('"') + 1
    assert code == 2
    assert err == f"dflash-advise: {path}:{line_no}: is not valid JSON (Unterminated string starting at column {col})"


def test_a_csv_given_as_a_log_points_at_import_tb():
    """Issue 50: a CSV history given to dflash-advise read "not valid JSON (Expecting value at column
    1)". It says what the file is, and the command that converts it."""
    from pathlib import Path

    csv = Path(__file__).resolve().parents[2] / "fixtures" / "stacks" / "specforge-1x7.csv"
    code, err = _advise_cli(csv)
    assert code == 2 and "\n" not in err
    assert err.startswith(f"dflash-advise: {csv}:1: is a table, not a JSON Lines rate log")
    assert "header row: '_step,_timestamp," in err
    assert f"`dflash-advise import-tb {csv} --roles target=N,drafter=M -o log.jsonl`" in err
    assert "not valid JSON" not in err
