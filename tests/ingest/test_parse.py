"""The fast pass (advisor.ingest.scan, polars) and the exact pass (advisor.ingest.stream) agree.

Both give the same verdict and frames.
"""

from __future__ import annotations

import json
import warnings
from unittest import mock

import numpy as np
import pytest
from conftest import HEADER, good_lines
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.errors import LogError
from advisor.ingest.load import load_log


def test_fast_and_slow_paths_agree(write_log):
    """A shape polars cannot read (q.hs given as a list) falls back to the exact reader."""
    lines = good_lines(8)
    lines.insert(
        5, {"ev": "rates", "t": 1.0, "window": 1.0, "bps": {"target": 1, "drafter": 1}, "q": {"pre": [1, 2], "hs": [3]}}
    )
    slow = load_log(write_log(lines, "slow.jsonl"))
    lines[5]["q"]["hs"] = 3
    fast = load_log(write_log(lines, "fast.jsonl"))
    assert np.allclose(slow.steps["busy"], fast.steps["busy"])
    assert slow.rates["q_hs"].tolist() == fast.rates["q_hs"].tolist() == [3.0]


_SYNC = {"ev": "sync", "t": 1.3, "role": "drafter", "workers": 1, "dur": 0.01, "bytes": 1e6}


_RATES = {
    "ev": "rates",
    "t": 2.0,
    "window": 1.0,
    "bps": {"target": 4.0, "drafter": 4.0},
    "cap_bps": {"target": 8.0, "drafter": 10.0},
    "tok_s": 3600.0,
    "q": {"pre": [1, 2], "hs": 3},
}


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-10, max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.lists(st.one_of(st.none(), st.integers(), st.floats()), max_size=2),
)


_FIELDS = [
    "t",
    "worker",
    "batch",
    "tokens",
    "seqs",
    "busy",
    "wait",
    "blocked",
    "loss",
    "role",
    "ev",
    "extra",
    "workers",
    "dur",
    "bytes",
    "window",
    "tok_s",
    "eta_s",
    "reason",
    "bps",
    "cap_bps",
    "q",
]


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    field=st.sampled_from(_FIELDS),
    value=st.one_of(
        _VALUES, st.dictionaries(st.sampled_from(["target", "drafter", "hs", "pre", "x"]), _VALUES, max_size=3)
    ),
    row=st.integers(min_value=1, max_value=19),
)
def test_fast_and_exact_paths_agree(tmp_path, monkeypatch, field, value, row):
    """Whatever one field of one line holds, the fast pass and the line-by-line pass give the same verdict."""
    lines = good_lines(8)
    lines[5:5] = [_SYNC]
    lines[9:9] = [_RATES]
    lines[row] = dict(lines[row], **{field: value})
    p = tmp_path / "h.jsonl"
    p.write_text("".join(json.dumps(l) + "\n" for l in lines))
    fast, exact = _both_paths(monkeypatch, p)
    monkeypatch.undo()

    def verdict(o):  # an error's line and field (its wording is not compared here)
        return (o[0], o[2], o[3]) if o[0] == "error" else o

    assert verdict(fast) == verdict(exact)


def _both_paths(monkeypatch, path):
    """load_log's outcome on the fast pass and on the exact line-by-line pass."""
    import advisor.ingest.stream as stream

    def outcome():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                log = load_log(path)
        except LogError as e:
            return ("error", str(e), e.line, e.field)
        return ("ok", log.steps.to_json(), log.rates.to_json(), log.syncs.to_json(), log.end)

    fast = outcome()
    real = stream.scan_files
    monkeypatch.setattr(stream, "scan_files", lambda *a, **k: None)
    exact = outcome()
    monkeypatch.setattr(stream, "scan_files", real)
    return fast, exact


@pytest.mark.parametrize("key,role", [("bps", "target"), ("bps", "drafter"), ("cap_bps", "drafter")])
def test_explicit_null_role_rate_is_refused_on_both_paths(write_log, monkeypatch, key, role):
    """An explicit ``null`` for a role's rate is refused, an absent role allowed: both passes
    tell them apart (the fast one reads the objects as JSON text), naming file, line and field."""
    lines = good_lines(8)
    lines[9:9] = [dict(_RATES, **{key: dict(_RATES[key], **{role: None})})]
    p = write_log(lines)
    fast, exact = _both_paths(monkeypatch, p)
    assert fast == exact
    assert fast[0] == "error" and fast[2] == 10 and fast[3] == f"{key}.{role}" and str(p) in fast[1]


def test_absent_role_rate_is_accepted_on_both_paths(write_log, monkeypatch):
    lines = good_lines(8)
    lines[9:9] = [dict(_RATES, bps={"drafter": 4.0}, cap_bps={"target": 8.0})]
    fast, exact = _both_paths(monkeypatch, write_log(lines))
    assert fast == exact and fast[0] == "ok"
    rates = json.loads(fast[2])
    assert list(rates["bps_target"].values()) == [None] and list(rates["cap_bps_drafter"].values()) == [None]


@pytest.mark.parametrize(
    "field,value",
    [("bps", {"target": 2**53 + 1}), ("window", 2**53 + 1), ("q", {"pre": [2**53 + 1, 1], "hs": 2**53 + 1})],
)
def test_integer_past_2_53_in_a_rates_line_reads_alike_on_both_paths(write_log, monkeypatch, field, value):
    """A JSON integer no double holds exactly is read as the nearest double on both passes."""
    lines = good_lines(8)
    lines[9:9] = [dict(_RATES, **{field: value})]
    fast, exact = _both_paths(monkeypatch, write_log(lines))
    assert fast == exact


@pytest.mark.parametrize("null_line,bad_line", [(10, 14), (14, 10)])
def test_explicit_null_and_a_bad_step_the_first_is_named(write_log, monkeypatch, null_line, bad_line):
    lines = good_lines(8)
    lines.insert(null_line - 1, dict(_RATES, bps={"target": None, "drafter": 4.0}))
    assert lines[bad_line - 1]["ev"] == "step"
    lines[bad_line - 1] = dict(lines[bad_line - 1], busy=-1.0)
    fast, exact = _both_paths(monkeypatch, write_log(lines))
    assert fast == exact
    assert fast[2] == 10 and fast[3] == ("bps.target" if null_line == 10 else "busy")


@pytest.mark.parametrize("blank", [False, True])
def test_ranges_of_steps_and_other_lines_read_as_the_exact_pass_reads_them(tmp_path, monkeypatch, blank):
    """Ranges of a few lines each, syncs, rates and the end among the steps (each range read as
    steps, then its other lines whole; with a blank line, that range read whole): the fast pass
    takes the log, into the exact pass's frames."""
    from advisor.ingest import scan

    lines = good_lines(30)
    lines[5:5] = [_SYNC]
    lines[12:12] = [_RATES]
    lines[40:40] = [_SYNC, _RATES]
    text = [json.dumps(x) for x in lines]
    if blank:
        text.insert(15, "")
    p = tmp_path / "r.jsonl"
    p.write_text("\n".join(text) + "\n")
    monkeypatch.setattr(scan, "RANGE_BYTES", 700)
    assert scan.scan_files([p], sample_rows=1000, max_bytes=1 << 40, max_lines=1 << 40) is not None
    fast, exact = _both_paths(monkeypatch, p)
    assert fast == exact and fast[0] == "ok"
    assert len(json.loads(fast[2])["t"]) == 2 and len(json.loads(fast[3])["t"]) == 2


_RATE_NUMBERS = ["1.5", "0", "2", "7.5", "null"] * 6 + ["-1", "NaN", "Infinity", "1e20", "true", '"x"']


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fast_pass_never_takes_what_validate_event_refuses(tmp_path_factory, data):
    """Rates snapshots of any shape: where `schema.validate_event` refuses one, the fast pass
    gives up (the exact pass then names it); where it takes them all, the fast pass reads them as
    the exact pass does, or gives up."""
    from pathlib import Path

    from advisor.ingest import scan, stream
    from advisor.ingest.load import rates_columns_frame
    from advisor.ingest.schema import parse_header, validate_event

    head = parse_header(HEADER, "x", 1)
    num = st.sampled_from(_RATE_NUMBERS)
    lines = []
    for _ in range(data.draw(st.integers(1, 6))):
        parts = ['"ev": "rates"', '"t": 1.0']
        for k in ("window", "tok_s", "eta_s", "done"):
            if data.draw(st.booleans()):
                parts.append(f'"{k}": {data.draw(num)}')
        for k in ("bps", "cap_bps"):
            if data.draw(st.integers(0, 4)):
                roles = [r for r in head.roles if data.draw(st.booleans())]
                parts.append(f'"{k}": {{' + ", ".join(f'"{r}": {data.draw(num)}' for r in roles) + "}")
        if data.draw(st.booleans()):
            q = []
            for spec in head.queues:
                if data.draw(st.booleans()):
                    v = (
                        "[" + ", ".join(data.draw(st.lists(num, max_size=3))) + "]"
                        if spec.per_worker and data.draw(st.integers(0, 4))
                        else data.draw(num)
                    )
                    q.append(f'"{spec.name}": {v}')
            parts.append('"q": {' + ", ".join(q) + "}")
        lines.append("{" + ", ".join(parts) + "}")
    refused = False
    for line in lines:
        try:
            validate_event(json.loads(line), head, "x", 1)
        except LogError:
            refused = True
    body = [json.dumps(x) for x in good_lines(4)]
    p = Path(tmp_path_factory.mktemp("rates")) / "r.jsonl"
    p.write_text("\n".join(body[:3] + lines + body[3:]) + "\n")
    fast = (scan.scan_files([p], sample_rows=1000, max_bytes=1 << 40, max_lines=1 << 40) or [None])[0]
    if refused:
        assert fast is None, lines
    elif fast is not None:
        with mock.patch.object(stream, "scan_files", lambda *a, **k: None):
            exact = stream.summarize_log(p, sample_rows=1000)
        a, b = (rates_columns_frame(s.rates_columns(), merged=False) for s in (fast, exact))
        assert a.equals(b), lines


@pytest.mark.parametrize("name", ["reference-7x1.jsonl", "sweep/h200x2-234m/h200x2-234m-1x1-tb32768-r0.jsonl.gz"])
def test_fast_pass_reads_real_logs_as_the_exact_pass(name, monkeypatch):
    """A real log (snapshots that omit a role, unknown fields, gzip) is read by the fast pass,
    into the very frames of the exact pass."""
    from conftest import FIXTURES

    from advisor.ingest import scan

    path = FIXTURES / name
    assert scan.scan_files([path], sample_rows=1000, max_bytes=1 << 40, max_lines=1 << 40) is not None
    fast, exact = _both_paths(monkeypatch, path)
    assert fast == exact and fast[0] == "ok"


def test_a_live_log_is_read_by_the_fast_pass_with_the_exact_pass_warning(write_log, monkeypatch):
    """A last line cut mid-write: the fast pass skips it with the exact pass's warning (the same
    line number and bytes), and the frames are the exact pass's."""
    from advisor.errors import LogWarning
    from advisor.ingest import scan

    lines = good_lines(20)
    raw = "".join(json.dumps(x) + "\n" for x in lines).encode() + b'{"ev": "step", "t": 9'
    p = write_log([], raw=raw)
    with pytest.warns(LogWarning, match=f":{len(lines) + 1}: last line is incomplete.*skipped 21 bytes"):
        assert scan.scan_files([p], sample_rows=1000, max_bytes=1 << 40, max_lines=1 << 40) is not None
    fast, exact = _both_paths(monkeypatch, p)
    assert fast == exact and fast[0] == "ok"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([b"a", b"\xc3\xa9", b"\r", b"\n", b"\r\n", b" ", b"\xff", b"\xed\xa0\x80"]), max_size=40),
    st.integers(0, 6),
)
def test_the_lines_of_a_range_are_those_polars_reads(parts, limit):
    """`scan._lines` counts, measures and checks a range's lines from its newlines as polars'
    ``scan_lines`` reads them: the same lines, each as long (less its newline and a ``\\r`` before
    it; refused past the limit) and refused where they are not UTF-8."""
    import polars as pl

    from advisor.ingest import scan

    buf = b"".join(parts)
    if not buf:
        return
    try:
        lines = pl.scan_lines(buf).select(pl.col("line").str.len_bytes()).collect().to_series().to_list()
    except pl.exceptions.ComputeError:
        lines = None  # (not UTF-8)
    try:
        ends = scan._lines(buf, limit)
    except scan._GiveUp:
        assert lines is None or max(lines) > limit
        return
    assert lines is not None and len(ends) == len(lines) and max(lines) <= limit
    got = scan._some_lines(buf, ends, np.arange(len(ends))).split(b"\n")
    assert [len(x) for x in got] == lines
