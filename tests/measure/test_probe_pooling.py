"""A probe's segments at one split pooled into one measured log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.ingest.load import load_log
from advisor.measure.measured import measure_log, measure_logs
from advisor.measure.probes import pooled_with_rates, probe_key
from advisor.measure.steady import find_steady

SOURCE = Path(__file__).resolve().parents[2] / "fixtures" / "cpu-2x1.jsonl"


def _segment(path: Path, k: int, cut_s: float | None = None) -> Path:
    """The fixture as probe segment ``k``; ``cut_s``: only its events up to that time (and its end)."""
    lines = SOURCE.read_text().splitlines()
    head = json.loads(lines[0])
    head["probe"] = {"id": "p", "segment": k}
    body = [x for x in lines[1:] if cut_s is None or json.loads(x)["t"] <= cut_s or '"ev":"end"' in x]
    path.write_text("\n".join([json.dumps(head), *body]) + "\n")
    return path


def test_the_pooled_rate_is_every_steady_second_of_the_segments(tmp_path):
    a = load_log(_segment(tmp_path / "a.jsonl", 1))
    b = load_log(_segment(tmp_path / "b.jsonl", 2, cut_s=25.0))
    ((pooled, win, _),) = pooled_with_rates([a, b])
    wa, wb = find_steady(a), find_steady(b)
    assert win.start_s == 0.0 and win.end_s == pytest.approx(wa.duration_s + wb.duration_s)
    ma, mb, mp = measure_log(a), measure_log(b), measure_log(pooled, window=win)
    # completions add up (each window's opening completion not counted) over the summed windows
    n = ma.observed.bps * wa.duration_s + mb.observed.bps * wb.duration_s
    assert mp.observed.bps == pytest.approx(n / win.duration_s, rel=1e-9)
    assert pooled.steps["t"].is_monotonic_increasing and "+" in pooled.path


def test_segments_of_other_splits_and_other_logs_stay_apart(tmp_path):
    a = load_log(_segment(tmp_path / "a.jsonl", 1))
    plain = load_log(SOURCE)
    assert probe_key(plain) is None and probe_key(a) is not None
    out = pooled_with_rates([plain, a])
    assert [w for _, w, _ in out] == [None, None]  # one segment of a split: measured as any log
    assert len(measure_logs([plain, a]).logs) == 2


def test_each_segment_keeps_its_own_rate_and_round_beside_the_pooled_log(tmp_path):
    a = load_log(_segment(tmp_path / "a.jsonl", 1))
    b = load_log(_segment(tmp_path / "b.jsonl", 3, cut_s=25.0))
    m = measure_logs([a, b]).logs
    assert len(m) == 1
    rates = m[0].observed.segments
    assert [s.segment for s in rates] == [1, 3]
    assert [s.bps for s in rates] == pytest.approx([measure_log(a).observed.bps, measure_log(b).observed.bps])
    assert [s.window_s for s in rates] == pytest.approx([find_steady(a).duration_s, find_steady(b).duration_s])
    # the pooled rate weighs every steady second alike: the segments' rates weighted by their windows
    pooled = sum(s.bps * s.window_s for s in rates) / sum(s.window_s for s in rates)
    assert m[0].observed.bps == pytest.approx(pooled, rel=1e-9)
    assert measure_logs([load_log(SOURCE)]).logs[0].observed.segments == ()
