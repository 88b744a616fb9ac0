"""Per-rank logs: many files of one run read as one :class:`~advisor.ingest.runlog.RunLog`.

A pipeline whose processes each write their own file (one per worker, e.g. with
:mod:`advisor.instrument`) gives a run directory. Every file of one run starts with the same
``run`` header; the body events are merged by time.

Which arguments are one run:

* a directory: its ``*.jsonl`` and ``*.jsonl.gz`` files (not recursive);
* a glob that names no existing file (quote it so the shell leaves it alone: ``'run/*.jsonl'``):
  the files it matches;
* several plain files whose headers are equal, where no ``(role, worker)`` has steps in two of
  them and at most one has no steps at all (a coordinator's rates): per-rank files, e.g. an
  unquoted ``run/*.jsonl`` that the shell expanded. Files that fail this test (the same job run
  twice, logs at different splits) stay separate logs, fitted together as before.

For a directory or a glob, files whose headers differ are an error (exit 2) that names the file
and the first field that differs: they are not one run (a directory left from an earlier run,
a process started with another config).

Every file is read once (`advisor.ingest.load.load_logs`) and the files of one run are merged as
summaries (`advisor.ingest.summary`: exact, and the sample of the whole log), whether they came as
a directory, a glob or plain files. The run's end (`merged_end`) is there only when every file
has ended (a run is over when all its processes are), at the latest ``t``, with the worst reason
(error over interrupted over done) and the messages of the files that gave it.
"""

from __future__ import annotations

import glob
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from advisor.errors import LogError, short_repr
from advisor.ingest.runlog import RunLog
from advisor.ingest.schema import RunHeader

GLOB_CHARS = "*?["
LOG_SUFFIXES = (".jsonl", ".jsonl.gz")
_REASON_RANK = {"done": 0, "interrupted": 1, "error": 2}


def expand(arg: str | Path) -> tuple[list[Path], bool]:
    """The files of one command-line argument, and whether they form one run (a directory or glob)."""
    p = Path(arg)
    try:
        is_dir, exists = p.is_dir(), p.exists()
    except OSError:  # e.g. a name too long for the filesystem: the loader reports it
        return [p], False
    if is_dir:
        try:
            files = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(LOG_SUFFIXES))
        except OSError as e:
            raise LogError(str(p), None, f"is a directory that cannot be listed ({e.strerror or e})") from None
        if not files:
            raise LogError(str(p), None, "is a directory with no .jsonl or .jsonl.gz log in it")
        return files, True
    s = str(arg)
    if not exists and any(c in s for c in GLOB_CHARS):
        files = sorted(Path(f) for f in glob.glob(s) if Path(f).is_file())
        if not files:
            raise LogError(s, None, "matches no file")
        return files, True
    return [p], False


def _header_items(h: RunHeader) -> dict[str, Any]:
    items = {f.name: getattr(h, f.name) for f in fields(h) if f.name != "extra"}
    items.update(h.extra)
    return items


def header_difference(a: RunHeader, b: RunHeader) -> str | None:
    """The first field (in header order) whose value differs between two headers, or None."""
    ia, ib = _header_items(a), _header_items(b)
    for k in list(ia) + [k for k in ib if k not in ia]:
        if ia.get(k) != ib.get(k):
            return k
    return None


def check_same_header(logs: Sequence[RunLog]) -> None:
    """Raise :class:`LogError` naming the first file (and field) whose header differs from the first's."""
    first = logs[0]
    for lg in logs[1:]:
        k = header_difference(first.header, lg.header)
        if k is not None:
            va, vb = _header_items(first.header).get(k), _header_items(lg.header).get(k)
            raise LogError(
                lg.path,
                1,
                f"is {short_repr(vb)} here but {short_repr(va)} in {first.path}; the files of "
                f"one run must start with the same 'run' header",
                k,
            )


def merged_end(logs: Sequence[RunLog]) -> dict[str, Any] | None:
    """The end of a run from its files' ends."""
    ends = [lg.end for lg in logs]
    if any(e is None for e in ends):
        return None
    worst = max(_REASON_RANK.get(e.get("reason", "done"), 0) for e in ends)
    reason = next(r for r, k in _REASON_RANK.items() if k == worst)
    out: dict[str, Any] = {"t": max(float(e.get("t", 0.0)) for e in ends), "reason": reason}
    msgs = [
        f"{Path(lg.path).name}: {lg.end['msg']}"
        for lg in logs
        if lg.end.get("reason", "done") == reason and lg.end.get("msg")
    ]
    if msgs:
        out["msg"] = "; ".join(msgs)
    return out


def group_name(paths: Sequence[str]) -> str:
    """The name of a run merged from several files."""
    return "+".join(paths) if len(paths) <= 3 else f"{paths[0]}+{len(paths) - 1} more"


def rank_groups(headers: Mapping[int, RunHeader], workers: Callable[[int], set[tuple[str, int]]]) -> list[list[int]]:
    """Groups of the logs of ``headers`` (by position) that are per-rank parts of one run (see the
    module docstring): equal headers, and (role, worker) pairs with steps as the rule asks.
    """
    groups: list[list[int]] = []
    for i, h in headers.items():
        g = next((g for g in groups if header_difference(headers[g[0]], h) is None), None)
        if g is None:
            groups.append([i])
        else:
            g.append(i)
    return [g for g in groups if len(g) > 1 and _are_ranks([workers(i) for i in g])]


def _are_ranks(worker_sets: Sequence[set[tuple[str, int]]]) -> bool:
    seen: set[tuple[str, int]] = set()
    stepless = 0
    for w in worker_sets:
        if not w:
            stepless += 1
        if w & seen:
            return False
        seen |= w
    return stepless <= 1
