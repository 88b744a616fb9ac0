"""Loader: every kind of bad input names file, line and field; good input becomes frames."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from advisor.load import load_log
from advisor.schema import LogError, LogWarning
from conftest import HEADER, good_lines


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


@pytest.mark.parametrize("field,value,needle", [
    ("busy", "fast", "must be a number"),
    ("busy", -0.5, ">= 0"),
    ("t", -1.0, ">= 0"),
    ("tokens", 12.5, "whole number"),
    ("worker", 5, "header has 1"),
    ("role", "verifier", "not a role"),
])
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
    assert len(log.steps) == 10


def test_blank_lines_keep_line_numbers(write_log):
    lines = [json.dumps(l) for l in good_lines(5)]
    lines.insert(2, "")
    lines.insert(2, "")
    lines[6] = lines[6].replace('"busy": 0.1', '"busy": -1')
    expect_error(write_log(lines), 7, "busy")


def test_fast_and_slow_paths_agree(write_log):
    """A shape pyarrow cannot unify (q.hs given as a list) falls back to the exact reader."""
    lines = good_lines(8)
    lines.insert(5, {"ev": "rates", "t": 1.0, "window": 1.0, "bps": {"target": 1, "drafter": 1},
                     "q": {"pre": [1, 2], "hs": [3]}})
    slow = load_log(write_log(lines, "slow.jsonl"))
    lines[5]["q"]["hs"] = 3
    fast = load_log(write_log(lines, "fast.jsonl"))
    assert np.allclose(slow.steps["busy"], fast.steps["busy"])
    assert slow.rates["q_hs"].tolist() == fast.rates["q_hs"].tolist() == [3.0]


def test_negative_rate_snapshot_named(write_log):
    lines = good_lines(5)
    lines.insert(4, {"ev": "rates", "t": 1.0, "window": 1.0, "bps": {"target": -1, "drafter": 1},
                     "q": {"pre": [1, 2], "hs": 3}})
    expect_error(write_log(lines), 5, "bps.target")
