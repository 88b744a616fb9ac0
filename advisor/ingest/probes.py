"""Probe segments: a directory of short runs at alternating splits, read as separate logs.

A probe (``dflash-train --probe``, or a pipeline of one's own: docs/instrumenting.md) runs a few
short segments at two or more splits of one job, in alternating order, and writes each
segment's log into one directory. Every segment's header carries ``probe``: ``{"id",
"segment", "segments", "round"}`` (docs/log-schema.md). A directory (or quoted glob) is
otherwise one run written as per-rank files (`advisor.ingest.ranks`), whose headers must be
equal; a probe's segments differ in their split, so the loader asks here first.

Rule: when any file's header has ``probe``, every file must (a directory of segments holds
nothing else) and all must name one probe ``id``; the files are then grouped by ``segment``,
each group one run (per-rank files of one segment stay possible: their headers are equal),
in segment order. Only the first line of each file is read here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from advisor.errors import LogError
from advisor.ingest.reader import MAX_LINE_BYTES, open_log
from advisor.ingest.schema import parse_header


def _first_object(path: Path) -> Any:
    """The first line of ``path`` decoded, or None where it is not JSON (the loader reports that)."""
    stream, raw = open_log(path)
    try:
        line = stream.readline(MAX_LINE_BYTES)
    except (OSError, EOFError):
        return None
    finally:
        stream.close()
        raw.close()
    try:
        return json.loads(line)
    except ValueError:
        return None


def probe_segments(files: Sequence[Path]) -> list[list[Path]] | None:
    """The files of a directory or glob grouped by probe segment, in segment order."""
    marks: list[tuple[Path, dict | None]] = []
    for f in files:
        obj = _first_object(f)
        probe = obj.get("probe") if isinstance(obj, dict) else None
        if probe is not None:
            parse_header(obj, str(f), 1)  # the whole header checked, the probe field with it
        marks.append((f, probe))
    if all(p is None for _, p in marks):
        return None
    with_mark = next(f for f, p in marks if p is not None)
    for f, p in marks:
        if p is None:
            raise LogError(
                str(f),
                1,
                f"has no 'probe' in its header, but {with_mark} has: a directory of probe "
                "segments must hold only the probe's logs",
                "probe",
            )
    first_id = marks[0][1]["id"]
    for f, p in marks:
        if p["id"] != first_id:
            raise LogError(
                str(f),
                1,
                f"is a segment of probe '{p['id']}', but {marks[0][0]} of probe '{first_id}': "
                "give each probe's directory on its own",
                "probe",
            )
    groups: dict[int, list[Path]] = {}
    for f, p in marks:
        groups.setdefault(int(p["segment"]), []).append(f)
    return [groups[k] for k in sorted(groups)]


__all__ = ["probe_segments"]
