"""Read rate logs (JSONL or .jsonl.gz) into :class:`~advisor.ingest.runlog.RunLog` s, in bounded memory.

Errors name file, line and field.

Data flow: each file through `advisor.ingest.stream.summarize_log` (polars' scan, or the exact
line-by-line pass that names a bad line) into a mergeable :class:`~advisor.ingest.summary.Summary`
(exact counts, time-binned sums, a bounded uniform sample of steps per role); the files of one
run merged as summaries, in order; DataFrames from the summary (`advisor.ingest.frames`).

Here: the public loaders. `load_log` (one file), `load_logs` (the command line's arguments: plain
files, directories and globs of per-rank files, `advisor.ingest.ranks`), `load_run` (the files of
one run, merged as summaries), `summarize_paths` (one merged summary, for `dflash-advise
summarize`) and `runlog_from_summary`. The frames and the sampling of large logs are documented
in `advisor.ingest.runlog`; a file written by `dflash-advise summarize` is read the same way (it
is recognised by its first bytes).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from advisor.errors import LogError, LogWarning, cut_text, display_path
from advisor.ingest import summary
from advisor.ingest.frames import STEP_COLUMNS, rates_columns_frame, steps_frame, syncs_frame
from advisor.ingest.parse import rates_columns
from advisor.ingest.probes import probe_segments
from advisor.ingest.ranks import check_same_header, expand, group_name, merged_end, rank_groups
from advisor.ingest.reader import MAX_LINE_BYTES, MAX_LOG_BYTES, MAX_LOG_LINES
from advisor.ingest.runlog import RunLog
from advisor.ingest.sample import copied_keys
from advisor.ingest.scan import scan_run
from advisor.ingest.schema import RunHeader, nearest_field
from advisor.ingest.stream import summarize_log
from advisor.ingest.summary import Summary, is_summary


def _shown(name: str) -> str:
    """An event name from the log as a short printable token (it goes into the report's caveats)."""
    return cut_text(display_path(name))


def _warn_unknown(summ: Summary, path: str) -> None:
    for key, n in summ.unknown_fields.items():
        ev, name = key.split(".", 1)
        near = nearest_field(ev, name)
        if near is not None:  # a likely misspelling; other unknown fields are the writer's own (counted)
            where = "the header" if ev == "run" else f"{n} '{ev}' line{'s' if n != 1 else ''}"
            warnings.warn(
                LogWarning(
                    f"{display_path(path)}: unknown field '{_shown(name)}' in {where} ignored; "
                    f"did you mean '{near}'? ('{near}' reads as not logged there)"
                ),
                stacklevel=4,
            )
    unknown = dict(summ.unknown)
    if unknown:
        warnings.warn(
            LogWarning(
                f"{display_path(path)}: ignored {sum(unknown.values())} events of unknown type "
                f"({', '.join(f'{_shown(k)}: {v}' for k, v in list(unknown.items())[:10])}"
                f"{', ...' if len(unknown) > 10 else ''})"
            ),
            stacklevel=4,
        )


def _warn_unit(summ: Summary, path: str) -> None:
    """A caveat where a batch of the log is another unit (the header's ``unit``: a sample, for the
    stacks import-tb reads by name): every b/s the advisor prints is then that unit per second."""
    unit = summ.header.extra.get("unit")
    if not isinstance(unit, str) or unit in ("batch", "batches"):
        return
    stack = summ.header.extra.get("stack")
    by = f", written by import-tb --stack {_shown(stack)}" if isinstance(stack, str) else ""
    warnings.warn(
        LogWarning(
            f"{display_path(path)}: a batch of this log is one {_shown(unit)} (the header's 'unit'{by}): "
            f"every b/s in this report is {_shown(unit)}s/s"
        ),
        stacklevel=4,
    )


def _warn_read(summ: Summary, path: str) -> None:
    """The caveats of reading one log: unknown events and fields, and a batch in another unit."""
    _warn_unknown(summ, path)
    _warn_unit(summ, path)


def runlog_from_summary(summ: Summary, path: str, *, warn: bool = True) -> RunLog:
    """The RunLog of a summary: its kept steps (all of them below the sample size), syncs and rates."""
    header = summ.header
    cols, codes, _ = summ.steps()
    steps = steps_frame({f: cols[f] for f in (*STEP_COLUMNS, "xfer") if f != "role" and f in cols}, codes, header)
    syncs = syncs_frame(summ.syncs())
    rc = summ.rates_columns()
    rates = rates_columns_frame(rc or rates_columns([], header), merged=len(summ.paths) > 1)
    unknown = dict(summ.unknown)
    if warn:
        _warn_read(summ, path)
    end_obj = summ.end
    if end_obj is not None:
        end_obj = {k: v for k, v in end_obj.items() if v is not None}
    sampled = summ.sampled
    # the path is only ever shown (reports, caveats): make it one printable line
    return RunLog(
        path=display_path(path),
        header=header,
        steps=steps,
        syncs=syncs,
        rates=rates,
        end=end_obj,
        n_lines=summ.n_lines,
        unknown_events=unknown,
        unknown_fields=dict(summ.unknown_fields),
        sampled=sampled,
        totals=summ.totals() if sampled else None,
        t_max_s=summ.t_max_s if math.isfinite(summ.t_max_s) else None,
        n_steps={r: summ.n_steps(r) for r in summ.roles},
        source=str(path) if len(summ.paths) == 1 else None,
    )


def load_log(
    path: str | Path,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_bytes: int = MAX_LOG_BYTES,
    max_lines: int = MAX_LOG_LINES,
    sample_rows: int | None = None,
) -> RunLog:
    """Parse one rate log (or a summary written by `dflash-advise summarize`).

    The limits (module constants by default) bound the time any input can cost; memory is
    bounded by the chunk and the sample size (``sample_rows`` steps per role), whatever the log's length.

    Args:
        path: the log file (JSONL or .jsonl.gz) or summary file.
        max_line_bytes: the longest line the log may hold, bytes.
        max_bytes: the most bytes it may hold, decompressed.
        max_lines: the most lines it may hold.
        sample_rows: the steps kept per role (None: ``summary.DEFAULT_SAMPLE_ROWS``).

    Returns:
        The parsed log.

    Raises:
        LogError: (file:line: field ...) on unusable input.
    """
    summ = summarize_log(
        path, max_line_bytes=max_line_bytes, max_bytes=max_bytes, max_lines=max_lines, sample_rows=sample_rows
    )
    return runlog_from_summary(summ, str(path))


@dataclass(frozen=True)
class FileRead:
    """What one file of a run gave besides its summary: for the checks across the run's files
    (`advisor.ingest.ranks.check_same_header`, `advisor.ingest.ranks.merged_end`)."""

    path: str  # as shown in messages
    header: RunHeader
    end: dict[str, Any] | None  # the file's own last 'end' event

    @classmethod
    def of(cls, path: Path, header: RunHeader, end: dict[str, Any] | None) -> FileRead:
        """What one file gave."""
        return cls(display_path(str(path)), header, dict(end) if end is not None else None)


def _fold(
    files: Sequence[Path], summaries: Iterable[Summary], *, check: bool, copies: bool = False
) -> tuple[Summary, list[FileRead]]:
    """The summaries of one run's ``files`` merged in order, each file's `FileRead` kept (``check``:
    each header checked against the first file's). The merges skip their test for copied steps
    (``copies`` False) and the sample keys of all are tested once at the end (`sample.copied_keys`):
    where that finds a key twice, the caller folds again with the test at every merge."""
    acc: Summary | None = None
    reads: list[FileRead] = []
    keys: dict[str, list[np.ndarray]] = {}
    for f, summ in zip(files, summaries):
        read = FileRead.of(f, summ.header, summ.end)
        if check and reads:
            check_same_header([reads[0], read])
        reads.append(read)
        for r in summ.roles:
            keys.setdefault(r, []).append(summ.samples[r].compact()[1])
        acc = summ if acc is None else acc.merge(summ, copies=copies)
    if not copies and any(copied_keys(k) for k in keys.values()):
        raise _Copies
    return acc, reads


class _Copies(Exception):
    """Some steps of the files folded are copies: fold again, testing each merge (its error names them)."""


def _fold_run(
    files: Sequence[Path], *, check: bool, sample_rows: int | None = None, held: Sequence[Summary] | None = None
) -> tuple[Summary, list[FileRead]]:
    """The files of one run read (or ``held``, read already) and merged, in order: all at once by
    the fast pass where it can (`advisor.ingest.scan.scan_run`), else one by one."""
    if not files:
        raise LogError("<none>", None, "no log file given")
    if held is None and len(files) > 1 and not any(is_summary(f) for f in files):
        got = scan_run(list(files), sample_rows=sample_rows or summary.DEFAULT_SAMPLE_ROWS)
        if got is not None:
            summ, per_file = got
            reads = [FileRead.of(f, h, e) for f, (h, e) in zip(files, per_file)]
            if check:
                for read in reads[1:]:
                    check_same_header([reads[0], read])
            return summ, reads

    def read(quiet: bool) -> Iterable[Summary]:
        for i, f in enumerate(files):
            if held is not None and not quiet:
                yield held[i]
                continue
            with warnings.catch_warnings():
                if quiet:
                    warnings.simplefilter("ignore")
                yield summarize_log(f, sample_rows=sample_rows)

    try:
        return _fold(files, read(False), check=check)
    except _Copies:
        return _fold(files, read(True), check=check, copies=True)


def _run_from_fold(
    files: Sequence[Path], folded: tuple[Summary, list[FileRead]], path: str, *, warn: bool = True
) -> RunLog:
    """One run from the fold of its per-rank ``files``: the run's end is `ranks`' merged end of
    the files' own ends. ``warn``: warn of the run's unknown events and fields (False where each
    file was warned of as it was read)."""
    summ, reads = folded
    end = merged_end(reads)
    summ.end = dict(end) if end is not None else None
    summ.paths = [str(f) for f in files]
    return runlog_from_summary(summ, path, warn=warn)


def load_run(files: Sequence[str | Path], path: str) -> RunLog:
    """One run from its per-rank files, merged as summaries: exact and in bounded memory.

    Headers must be equal (`ranks.check_same_header`, which names the file and field); the run's
    end is `ranks`' merged end; the same steps in two files are refused (`Summary.merge`).
    """
    files = [Path(f) for f in files]
    if len(files) == 1:
        return load_log(files[0])
    return _run_from_fold(files, _fold_run(files, check=True), path)


def summarize_paths(paths: Sequence[str | Path], *, sample_rows: int | None = None) -> Summary:
    """One merged summary of several logs (or summaries) of one run, folded in path order."""
    files = [f for p in paths for f in expand(p)[0]]
    return _fold_run(files, check=False, sample_rows=sample_rows)[0]


def _summary_workers(summ: Summary) -> set[tuple[str, int]]:
    """The (role, worker) pairs of a summary's kept steps: those of its RunLog's steps frame."""
    out: set[tuple[str, int]] = set()
    for r in summ.roles:
        cols, _ = summ.samples[r].compact()
        out.update((r, int(w)) for w in np.unique(cols["worker"]))
    return out


def load_logs(paths: Iterable[str | Path]) -> list[RunLog]:
    """Parse several logs (e.g. the same job at different splits).

    A directory or a (quoted) glob is one run written as per-rank files, and so are plain files
    that are evidently ranks of one run; see `advisor.ingest.ranks` for the rules. A directory
    of probe segments (headers with ``probe``) gives one log per segment, in segment order
    (`advisor.ingest.probes`). Each file is read
    once: plain files are held as summaries until it is known which are ranks of one run (e.g. a
    glob the shell expanded), whose summaries then merge, exactly, as a directory's do.
    """
    paths = list(paths)
    if not paths:
        raise LogError("<none>", None, "no log file given")
    logs: list[RunLog | None] = []
    held: dict[int, tuple[Path, Summary]] = {}  # plain files, as summaries, by position
    for p in paths:
        files, one_run = expand(p)
        segments = probe_segments(files) if one_run and len(files) > 1 else None
        if segments is not None:  # a probe's directory: one log per segment (advisor.ingest.probes)
            logs.extend(load_run(g, group_name([display_path(str(f)) for f in g])) for g in segments)
            continue
        if one_run:
            logs.append(load_run(files, str(p)))
            continue
        summ = summarize_log(files[0])
        _warn_read(summ, str(files[0]))  # in file order, where a RunLog of it would have warned
        held[len(logs)] = (files[0], summ)
        logs.append(None)
    headers = [held[i][1].header if lg is None else lg.header for i, lg in enumerate(logs)]
    groups = rank_groups(headers, lambda i: _summary_workers(held[i][1]), [i in held for i in range(len(logs))])
    dropped: set[int] = set()
    for g in groups:
        members = [held.pop(i) for i in g]
        name = group_name([display_path(str(f)) for f, _ in members])
        # merged as summaries, exactly (advisor.ingest.summary): the run's sample is the one of the
        # whole log, as from a folder of the files; each file was warned of as it was held
        files = [f for f, _ in members]
        folded = _fold_run(files, check=True, held=[s for _, s in members])
        logs[g[0]] = _run_from_fold(files, folded, name, warn=False)
        dropped.update(g[1:])
    for i in list(held):
        f, summ = held.pop(i)
        logs[i] = runlog_from_summary(summ, str(f), warn=False)
    return [lg for i, lg in enumerate(logs) if i not in dropped]
