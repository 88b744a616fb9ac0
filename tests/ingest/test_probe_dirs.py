"""A probe's directory: one log per segment, refused when it mixes segments with other logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.errors import LogError
from advisor.ingest.load import load_logs
from advisor.ingest.probes import probe_segments

SOURCE = Path(__file__).resolve().parents[2] / "fixtures" / "cpu-2x1.jsonl"


def _segment(path: Path, probe: dict | None, roles: dict | None = None) -> Path:
    """The fixture with ``probe`` (and ``roles``) in its header."""
    lines = SOURCE.read_text().splitlines()
    head = json.loads(lines[0])
    if probe is not None:
        head["probe"] = probe
    if roles is not None:
        head["roles"], head["gpus"] = roles, sum(roles.values())
    path.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    return path


def test_segments_are_separate_logs_in_segment_order(tmp_path):
    # named against the run order: the order comes from the headers, not the names
    _segment(tmp_path / "a.jsonl", {"id": "p", "segment": 2})
    _segment(tmp_path / "b.jsonl", {"id": "p", "segment": 1}, roles={"target": 2, "drafter": 2})
    logs = load_logs([tmp_path])
    assert [lg.header.extra["probe"]["segment"] for lg in logs] == [1, 2]
    assert [dict(lg.header.roles) for lg in logs] == [{"target": 2, "drafter": 2}, {"target": 2, "drafter": 1}]


def test_files_of_one_segment_are_one_run(tmp_path):
    for name in ("s1-a.jsonl", "s1-b.jsonl"):
        _segment(tmp_path / name, {"id": "p", "segment": 1})
    assert [len(g) for g in probe_segments(sorted(tmp_path.iterdir()))] == [2]


def test_a_directory_without_probe_headers_is_one_run(tmp_path):
    _segment(tmp_path / "a.jsonl", None)
    _segment(tmp_path / "b.jsonl", None)
    assert probe_segments(sorted(tmp_path.iterdir())) is None


@pytest.mark.parametrize(
    ("second", "words"),
    [
        (None, "has no 'probe' in its header"),
        ({"id": "q", "segment": 2}, "is a segment of probe 'q'"),
    ],
)
def test_a_mixed_directory_is_refused_naming_the_file(tmp_path, second, words):
    _segment(tmp_path / "a.jsonl", {"id": "p", "segment": 1})
    _segment(tmp_path / "b.jsonl", second)
    with pytest.raises(LogError) as e:
        load_logs([tmp_path])
    assert words in str(e.value) and "b.jsonl" in str(e.value) and e.value.field == "probe"


@pytest.mark.parametrize(
    ("probe", "words"),
    [
        ("p1", "must be an object"),
        ({"segment": 1}, "id"),
        ({"id": "p", "segment": 0}, "segment"),
        ({"id": "p", "segment": 3, "segments": 2}, "at most 'segments'"),
    ],
)
def test_a_bad_probe_field_is_refused(tmp_path, probe, words):
    _segment(tmp_path / "a.jsonl", probe)
    with pytest.raises(LogError) as e:
        load_logs([tmp_path / "a.jsonl"])
    assert e.value.field == "probe" and words in str(e.value)
