"""The exact pass (advisor.ingest.stream): a log read in pieces of whole lines.

It gives the same frames and names the same bad line.
"""

from __future__ import annotations

import json
import warnings

import pytest
from conftest import good_lines

from advisor.errors import LogError, LogWarning
from advisor.ingest import reader, stream
from advisor.ingest.load import load_log


def _small_pieces(monkeypatch):
    """The exact pass, in pieces of about 1000 bytes (the fast pass is left out)."""
    monkeypatch.setattr(stream, "scan_files", lambda *a, **k: None)
    monkeypatch.setattr(reader, "CHUNK_BYTES", 300)
    monkeypatch.setattr(stream, "PIECE_BYTES", 1000)


def _frames(p):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log = load_log(p)
    return log.steps.to_json(), log.syncs.to_json(), log.rates.to_json(), log.end, log.n_lines


def test_pieces_give_the_same_frames(write_log, monkeypatch):
    lines = good_lines(200)
    text = [json.dumps(l) for l in lines]
    text[50:50] = ["", "  "]  # an empty and a blank line inside the body
    text.insert(120, json.dumps({"ev": "sync", "t": 20.0, "workers": 1, "dur": 0.01}))
    p = write_log(text)
    whole = _frames(p)
    _small_pieces(monkeypatch)
    assert _frames(p) == whole


def test_both_passes_read_an_end_without_reason(write_log, monkeypatch):
    """``reason`` is optional (docs/log-schema.md: ``done`` when absent): the exact pass must not refuse it."""
    lines = good_lines(200)
    del lines[-1]["reason"]
    p = write_log(lines)
    fast = _frames(p)
    _small_pieces(monkeypatch)
    assert _frames(p) == fast
    assert fast[3].get("reason", "done") == "done"


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


def test_pieces_fold_and_fail_in_order(write_log, monkeypatch):
    """Pieces fold in order, and the first bad line is the one named, even when a later piece
    cannot be read at all (a line too long)."""
    lines = good_lines(300)
    p = write_log(lines)
    whole = _frames(p)
    _small_pieces(monkeypatch)
    monkeypatch.setattr(reader, "RATIO_CHECK_BYTES", 0)  # the first piece is cut at once, too
    assert _frames(p) == whole
    for row in (90, 246, 249):  # far before the long line, in a piece in flight, just before
        text = [json.dumps(l) for l in lines]
        text[row] = json.dumps(dict(lines[row], busy=-1.0))
        text[250] = json.dumps(dict(lines[250], msg="x" * 5000))
        bad = write_log(text, name="bad.jsonl")
        with pytest.raises(LogError) as ei:
            load_log(bad, max_line_bytes=2000)
        assert ei.value.line == row + 1
