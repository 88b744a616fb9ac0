"""Loader: every kind of bad input names file, line and field; good input becomes frames."""
from __future__ import annotations

import gzip
import json
import os
import signal
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.ingest.load import load_log
from advisor.errors import LogError, LogRefused, LogWarning
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


# --- the fast path checks what the exact path checks (issue: the gate passed invalid logs)


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


_SYNC = {"ev": "sync", "t": 1.3, "role": "drafter", "workers": 1, "dur": 0.01, "bytes": 1e6}
_RATES = {"ev": "rates", "t": 2.0, "window": 1.0, "bps": {"target": 4.0, "drafter": 4.0},
          "cap_bps": {"target": 8.0, "drafter": 10.0}, "tok_s": 3600.0, "q": {"pre": [1, 2], "hs": 3}}
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10, max_value=10 ** 20),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3),
                    st.lists(st.one_of(st.none(), st.integers(), st.floats()), max_size=2))
_FIELDS = ["t", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss", "role", "ev", "extra",
           "workers", "dur", "bytes", "window", "tok_s", "eta_s", "reason", "bps", "cap_bps", "q"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(field=st.sampled_from(_FIELDS),
       value=st.one_of(_VALUES, st.dictionaries(st.sampled_from(["target", "drafter", "hs", "pre", "x"]), _VALUES,
                                                max_size=3)),
       row=st.integers(min_value=1, max_value=19), two_pass=st.booleans())
def test_fast_and_exact_paths_agree(tmp_path, monkeypatch, field, value, row, two_pass):
    """Whatever one field of one line holds, the fast path (in one pass or two: load.TWO_PASS_BYTES)
    and the line-by-line path give the same verdict."""
    import advisor.ingest.load as load
    monkeypatch.setattr(load, "TWO_PASS_BYTES", 0 if two_pass else 1 << 40)
    lines = good_lines(8)
    lines[5:5] = [_SYNC]
    lines[9:9] = [_RATES]
    lines[row] = dict(lines[row], **{field: value})
    p = tmp_path / "h.jsonl"
    p.write_text("".join(json.dumps(l) + "\n" for l in lines))
    fast, exact = _both_paths(monkeypatch, p)
    monkeypatch.undo()

    def verdict(o):      # an error's line and field (its wording is not compared here)
        return (o[0], o[2], o[3]) if o[0] == "error" else o
    assert verdict(fast) == verdict(exact)


@pytest.fixture(params=["one pass", "two passes"])
def fast_passes(request, monkeypatch):
    """The fast path in one pass (small pieces) or in two (large ones: load.TWO_PASS_BYTES)."""
    import advisor.ingest.load as load
    monkeypatch.setattr(load, "TWO_PASS_BYTES", 0 if request.param == "two passes" else 1 << 40)


def _both_paths(monkeypatch, path):
    """load_log's outcome on the fast path and on the exact line-by-line path."""
    import advisor.ingest.load as load

    def outcome():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                log = load_log(path)
        except LogError as e:
            return ("error", str(e), e.line, e.field)
        return ("ok", log.steps.to_json(), log.rates.to_json(), log.syncs.to_json(), log.end)
    fast = outcome()
    real = load._fast_parse
    monkeypatch.setattr(load, "_fast_parse", lambda *a, **k: None)
    exact = outcome()
    monkeypatch.setattr(load, "_fast_parse", real)
    return fast, exact


@pytest.mark.parametrize("key,role", [("bps", "target"), ("bps", "drafter"), ("cap_bps", "drafter")])
def test_explicit_null_role_rate_is_refused_on_both_paths(write_log, monkeypatch, fast_passes, key, role):
    """An explicit ``null`` for a role's rate reads in Arrow like an absent role, which the schema
    allows; the fast path has the exact validator judge such rows, so both paths refuse it alike,
    naming file, line and field."""
    lines = good_lines(8)
    lines[9:9] = [dict(_RATES, **{key: dict(_RATES[key], **{role: None})})]
    p = write_log(lines)
    fast, exact = _both_paths(monkeypatch, p)
    assert fast == exact
    assert fast[0] == "error" and fast[2] == 10 and fast[3] == f"{key}.{role}" and str(p) in fast[1]


def test_absent_role_rate_is_accepted_on_both_paths(write_log, monkeypatch, fast_passes):
    lines = good_lines(8)
    lines[9:9] = [dict(_RATES, bps={"drafter": 4.0}, cap_bps={"target": 8.0})]
    fast, exact = _both_paths(monkeypatch, write_log(lines))
    assert fast == exact and fast[0] == "ok"
    rates = json.loads(fast[2])
    assert list(rates["bps_target"].values()) == [None] and list(rates["cap_bps_drafter"].values()) == [None]


@pytest.mark.parametrize("field,value", [("bps", {"target": 2 ** 53 + 1}), ("window", 2 ** 53 + 1),
                                         ("q", {"pre": [2 ** 53 + 1, 1], "hs": 2 ** 53 + 1})])
def test_integer_past_2_53_in_a_rates_line_reads_alike_on_both_paths(write_log, monkeypatch, fast_passes,
                                                                      field, value):
    """A JSON integer no double holds exactly is read as the nearest double on both paths (the
    exact path used to crash building its Arrow table)."""
    lines = good_lines(8)
    lines[9:9] = [dict(_RATES, **{field: value})]
    fast, exact = _both_paths(monkeypatch, write_log(lines))
    assert fast == exact


@pytest.mark.parametrize("null_line,bad_line", [(10, 14), (14, 10)])
def test_explicit_null_and_a_bad_step_the_first_is_named(write_log, monkeypatch, fast_passes, null_line, bad_line):
    lines = good_lines(8)
    lines.insert(null_line - 1, dict(_RATES, bps={"target": None, "drafter": 4.0}))
    assert lines[bad_line - 1]["ev"] == "step"
    lines[bad_line - 1] = dict(lines[bad_line - 1], busy=-1.0)
    fast, exact = _both_paths(monkeypatch, write_log(lines))
    assert fast == exact
    assert fast[2] == 10 and fast[3] == ("bps.target" if null_line == 10 else "busy")


# --- limits: bounded time and memory whatever the input


def test_size_and_line_limits_name_the_numbers(write_log):
    p = write_log(good_lines(50))
    with pytest.raises(LogRefused, match="more than 1000 bytes"):
        load_log(p, max_bytes=1000)
    with pytest.raises(LogRefused, match="more than 20 lines"):
        load_log(p, max_lines=20)


def test_gzip_bomb_fails_after_a_bounded_read(tmp_path):
    import advisor.ingest.load as load
    p = tmp_path / "bomb.jsonl.gz"
    line = b'{"ev": "x", "t": 1}\n'
    p.write_bytes(gzip.compress(line * ((load.RATIO_CHECK_BYTES + 2 * load.CHUNK_BYTES) // len(line))))
    with pytest.raises(LogRefused, match="compression bomb"):
        load_log(p)


def test_gzip_corrupt_mid_stream(tmp_path):
    data = bytearray(gzip.compress("".join(json.dumps(l) + "\n" for l in good_lines(200)).encode()))
    data[len(data) // 2] ^= 0xFF
    p = tmp_path / "c.jsonl.gz"
    p.write_bytes(bytes(data))
    with pytest.raises(LogError, match="gzip"):
        load_log(p)


def test_gzip_recognised_by_content(tmp_path):
    p = tmp_path / "plain-name.jsonl"
    p.write_bytes(gzip.compress("".join(json.dumps(l) + "\n" for l in good_lines(10)).encode()))
    assert len(load_log(p).steps) == 20


def test_fifo_is_refused_without_opening_it(tmp_path):
    p = tmp_path / "pipe.jsonl"
    os.mkfifo(p)
    signal.alarm(20)   # a regression would block in open(); fail instead of hanging the suite
    try:
        with pytest.raises(LogRefused, match="FIFO"):
            load_log(p)
    finally:
        signal.alarm(0)


@pytest.mark.skipif(not os.path.exists("/dev/urandom"), reason="no /dev/urandom")
def test_character_device_is_refused():
    with pytest.raises(LogRefused, match="character device"):
        load_log("/dev/urandom")


def test_header_limits(write_log):
    for over, field in (({"gpus": 4097}, "gpus"), ({"roles": {"target": 1e12, "drafter": 1}}, "roles"),
                        ({"queues": 5}, "queues"), ({"t": 1e15}, "t")):
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


def test_unreadable_file_is_one_line(write_log, monkeypatch):
    """chmod 000 (simulated: the suite may run as root, which reads anything)."""
    import advisor.ingest.load as load
    p = write_log(good_lines(3))

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(load.os, "open", denied)
    with pytest.raises(LogRefused, match="permission denied") as ei:
        load_log(p)
    assert str(ei.value) == f"{p}: cannot be read (permission denied)"


# --- streaming: a log is read in pieces of whole lines; each piece gets every check


def _small_pieces(monkeypatch):
    import advisor.ingest.load as load
    monkeypatch.setattr(load, "CHUNK_BYTES", 300)
    monkeypatch.setattr(load, "PIECE_BYTES", 1000)


def _frames(p):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log = load_log(p)
    return log.steps.to_json(), log.syncs.to_json(), log.rates.to_json(), log.end, log.n_lines


def test_pieces_give_the_same_frames(write_log, monkeypatch):
    lines = good_lines(200)
    text = [json.dumps(l) for l in lines]
    text[50:50] = ["", "  "]           # an empty and a blank line inside the body
    text.insert(120, json.dumps({"ev": "sync", "t": 20.0, "workers": 1, "dur": 0.01}))
    p = write_log(text)
    whole = _frames(p)
    _small_pieces(monkeypatch)
    assert _frames(p) == whole


@pytest.mark.parametrize("row", [3, 90, 333])
def test_pieces_name_the_bad_line(write_log, monkeypatch, row):
    lines = good_lines(200)
    lines[row] = dict(lines[row], busy=-1.0)
    p = write_log(lines)
    with pytest.raises(LogError) as whole:
        load_log(p)
    _small_pieces(monkeypatch)
    with pytest.raises(LogError) as pieces:
        load_log(p)
    assert whole.value.line == pieces.value.line == row + 1
    assert pieces.value.field == "busy"


def test_pieces_incomplete_last_line(write_log, monkeypatch):
    lines = good_lines(100)
    raw = "".join(json.dumps(l) + "\n" for l in lines).encode() + b'{"ev": "step", "t": 99'
    p = write_log([], raw=raw)
    _small_pieces(monkeypatch)
    with pytest.warns(LogWarning, match=f":{len(lines) + 1}: last line is incomplete"):
        log = load_log(p)
    assert log.n_lines == len(lines)


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
    lines = [json.dumps(l) for l in good_lines(5)[:-1]]     # ends with a drafter step (busy 0.1)
    assert '"busy": 0.1' in lines[-1]
    raw = ("\n".join(lines[:-1]) + "\n" + lines[-1].replace('"busy": 0.1', '"busy": -1')).encode()
    expect_error(write_log([], raw=raw), len(lines), "busy")


_RATE_NUMBERS = ["1.5", "0", "2", "7.5", "null"] * 6 + ["-1", "NaN", "Infinity", "1e20"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fast_rates_check_matches_validate_event(data):
    """The vectorized rates check flags exactly the snapshots `schema.validate_event` refuses,
    but for an explicit null as a role's rate, which Arrow reads as an absent role: such rows are
    flagged unsure (`load._rates_unsure`), and the fast path has the exact validator judge them."""
    import pyarrow as pa
    import pyarrow.json as pj

    from advisor.ingest import load as load
    from advisor.ingest.schema import parse_header, validate_event
    head = parse_header(HEADER, "x", 1)
    num = st.sampled_from(_RATE_NUMBERS)
    some = st.sampled_from(_RATE_NUMBERS)
    lines = []
    for _ in range(data.draw(st.integers(1, 6))):
        parts = ['"ev": "rates"', '"t": 1.0']
        for k in ("window", "tok_s", "eta_s", "done"):
            if data.draw(st.booleans()):
                parts.append(f'"{k}": {data.draw(num)}')
        for k in ("bps", "cap_bps"):
            if data.draw(st.integers(0, 4)):
                roles = [r for r in head.roles if data.draw(st.booleans())]
                parts.append(f'"{k}": {{' + ", ".join(f'"{r}": {data.draw(some)}' for r in roles) + "}")
        if data.draw(st.booleans()):
            q = []
            for spec in head.queues:
                if data.draw(st.booleans()):
                    v = ("[" + ", ".join(data.draw(st.lists(num, max_size=3))) + "]"
                         if spec.per_worker and data.draw(st.integers(0, 4)) else data.draw(num))
                    q.append(f'"{spec.name}": {v}')
            parts.append('"q": {' + ", ".join(q) + "}")
        lines.append("{" + ", ".join(parts) + "}")
    try:
        tab = pj.read_json(pa.BufferReader(("\n".join(lines) + "\n").encode()), parse_options=pj.ParseOptions(
            explicit_schema=load._arrow_schema(head), unexpected_field_behavior="ignore"))
    except pa.ArrowInvalid:    # a shape Arrow cannot read (e.g. a list where a number is declared): the exact path
        return
    fast, unsure = load._rates_bad(tab, head), load._rates_unsure(tab, head)
    for line, flagged, judged_exactly in zip(lines, fast, unsure):
        try:
            validate_event(json.loads(line), head, "x", 1)
            refused = False
        except LogError:
            refused = True
        assert flagged == refused or (judged_exactly and refused and not flagged), line


def test_steps_frame_columns_and_types():
    """The steps frame keeps its columns as given (no consolidating copy): wait/blocked NaN -> 0,
    worker and tokens int64 (pandas' error on a non-finite one), role categorical, time order."""
    from advisor.ingest.load import STEP_COLUMNS, _steps_frame
    from advisor.ingest.schema import parse_header
    head = parse_header({"ev": "run", "v": 1, "t": 0, "run": "x", "roles": {"target": 1, "drafter": 1}}, "x", 1)
    cols = {"t": np.array([2.0, 1.0, 3.0]), "worker": np.array([0.0, 0.0, 1.0]), "batch": np.array([1.0, 0.0, 2.0]),
            "tokens": np.array([10.0, 20.0, 30.0]), "seqs": np.array([np.nan, 1.0, 2.0]),
            "busy": np.array([0.5, 0.25, 0.75]), "wait": np.array([np.nan, 0.1, -0.0]),
            "blocked": np.array([0.0, np.nan, np.nan]), "loss": np.full(3, np.nan)}
    df = _steps_frame(cols, np.array([0, 1, 0]), head)
    assert list(df.columns) == list(STEP_COLUMNS)
    assert df["worker"].dtype == np.int64 and df["tokens"].dtype == np.int64
    assert list(df["role"].astype(str)) == ["drafter", "target", "target"]
    np.testing.assert_array_equal(df["t"].to_numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(df["wait"].to_numpy(), [0.1, 0.0, -0.0])
    np.testing.assert_array_equal(df["blocked"].to_numpy(), [0.0, 0.0, 0.0])
    assert np.isnan(df["seqs"].to_numpy()[1]) and np.isnan(df["loss"].to_numpy()).all()
    assert list(df.index) == [0, 1, 2]
    bad = dict(cols, tokens=np.array([10.0, np.nan, 30.0]))
    with pytest.raises(ValueError):
        _steps_frame(bad, np.array([0, 1, 0]), head)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_pieces_in_flight_fold_and_fail_in_order(write_log, monkeypatch, threads):
    """However many pieces parse at once (load.PARSE_THREADS), they fold in order, and the first bad
    line is the one named, even when a later piece cannot be read at all (a line too long)."""
    import advisor.ingest.load as load
    lines = good_lines(300)
    p = write_log(lines)
    whole = _frames(p)
    _small_pieces(monkeypatch)
    monkeypatch.setattr(load, "RATIO_CHECK_BYTES", 0)      # the first piece is cut at once, too
    monkeypatch.setattr(load, "PARSE_THREADS", threads, raising=False)
    assert _frames(p) == whole
    for row in (90, 246, 249):        # far before the long line, in a piece in flight, just before
        text = [json.dumps(l) for l in lines]
        text[row] = json.dumps(dict(lines[row], busy=-1.0))
        text[250] = json.dumps(dict(lines[250], msg="x" * 5000))
        bad = write_log(text, name="bad.jsonl")
        with pytest.raises(LogError) as ei:
            load.load_log(bad, max_line_bytes=2000)
        assert ei.value.line == row + 1
