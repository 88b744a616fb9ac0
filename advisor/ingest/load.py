"""Read rate logs (JSONL or .jsonl.gz) into :class:`~advisor.ingest.runlog.RunLog` s, in bounded memory.

Errors name file, line and field. Each file goes through `advisor.ingest.stream.summarize_log`
(polars' scan, or the line-by-line pass that names a bad line) into a mergeable
:class:`~advisor.ingest.summary.Summary`; the files of one run merge as summaries, in order
(`_merged`); the frames come from the summary (`_runlog`: `steps_frame`, `syncs_frame`,
`rates_columns_frame`, from column arrays, vectorized; pandas is imported where a frame is
made). `load_logs` takes the command line's paths (plain files, directories and globs of
per-rank files, `advisor.ingest.ranks`; probe segments, `advisor.ingest.probes`); `load_log` one
file, with its limits; `summarize_paths` the merged summary itself, for `dflash-advise summarize`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.errors import LogError, LogWarning, cut_text, display_path
from advisor.ingest import summary
from advisor.ingest.probes import probe_segments
from advisor.ingest.ranks import check_same_header, expand, group_name, merged_end, rank_groups
from advisor.ingest.reader import MAX_LINE_BYTES, MAX_LOG_BYTES, MAX_LOG_LINES
from advisor.ingest.runlog import RunLog
from advisor.ingest.sample import copied_keys
from advisor.ingest.scan import scan_files
from advisor.ingest.schema import RunHeader, nearest_field
from advisor.ingest.stream import rates_columns, summarize_log
from advisor.ingest.summary import Summary, is_summary
from advisor.records import Step

if TYPE_CHECKING:
    import pandas as pd  # imported where a frame is made


def steps_frame(cols: Mapping[str, Any], codes: np.ndarray, header: RunHeader) -> pd.DataFrame:
    """The documented ``steps`` frame from columns and role codes, sorted by t."""
    import pandas as pd

    # the columns as they are, one block each (copy=False): consolidating them into one 2-D block
    # copied every row of a sampled log once more
    data: dict[str, Any] = {}
    for c in Step.KEYS + (("xfer",) if "xfer" in cols else ()):
        if c == "role":
            data[c] = pd.Categorical.from_codes(codes, categories=list(header.roles))
            continue
        v = np.asarray(cols[c])
        if c in ("wait", "blocked"):
            nan = np.isnan(v)
            if nan.any():
                v = np.where(nan, 0.0, v)  # fillna(0.0)
        elif c in ("worker", "tokens"):
            # pandas' cast where it is plain (its error on a non-finite value otherwise)
            v = v.astype(np.int64) if np.isfinite(v).all() else pd.Series(v).astype(np.int64).to_numpy()
        data[c] = v
    return _by_t(pd.DataFrame(data, copy=False))


def _by_t(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` sorted by t (stable), where it is not in order already."""
    if len(frame) > 1 and (np.diff(frame["t"].to_numpy()) < 0).any():
        frame = frame.sort_values("t", kind="stable").reset_index(drop=True)
    return frame


def syncs_frame(cols: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The ``syncs`` frame from its columns, sorted by t."""
    import pandas as pd

    return _by_t(pd.DataFrame(cols))


def rates_columns_frame(cols: Mapping[str, np.ndarray], *, merged: bool) -> pd.DataFrame:
    """The ``rates`` frame from its columns."""
    import pandas as pd

    rates = pd.DataFrame(cols)
    return _by_t(rates) if merged else rates


def _shown(name: str) -> str:
    """An event name from the log as a short printable token (it goes into the report's caveats)."""
    return cut_text(display_path(name))


def _warn(summ: Summary, path: str) -> None:
    """The log's caveats: likely misspelt fields, events of unknown type, a batch of another unit
    (the header's ``unit``: a sample, for the stacks import-tb reads by name; every b/s the
    advisor prints is then that unit per second)."""
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
                stacklevel=3,
            )
    unknown = summ.unknown
    if unknown:
        warnings.warn(
            LogWarning(
                f"{display_path(path)}: ignored {sum(unknown.values())} events of unknown type "
                f"({', '.join(f'{_shown(k)}: {v}' for k, v in list(unknown.items())[:10])}"
                f"{', ...' if len(unknown) > 10 else ''})"
            ),
            stacklevel=3,
        )
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
        stacklevel=3,
    )


def _runlog(summ: Summary, path: str, *, warn: bool = True) -> RunLog:
    """The RunLog of a summary: its kept steps (all of them below the sample size), syncs and rates."""
    header = summ.header
    cols, codes = summ.steps()
    steps = steps_frame(cols, codes, header)
    rc = summ.rates_columns()
    rates = rates_columns_frame(rc or rates_columns([], header), merged=len(summ.paths) > 1)
    if warn:
        _warn(summ, path)
    end = {k: v for k, v in summ.end.items() if v is not None} if summ.end is not None else None
    return RunLog(
        path=display_path(path),  # only ever shown (reports, caveats): one printable line
        header=header,
        steps=steps,
        syncs=syncs_frame(summ.sync_sample.compact()[0]),  # (sorted by t there)
        rates=rates,
        end=end,
        n_lines=summ.n_lines,
        unknown_events=dict(summ.unknown),
        unknown_fields=dict(summ.unknown_fields),
        totals=summ.totals() if summ.sampled else None,
        t_max_s=summ.t_max_s if math.isfinite(summ.t_max_s) else None,
        n_steps={r: summ.n_steps(r) for r in summ.roles},
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
    limits = {"max_line_bytes": max_line_bytes, "max_bytes": max_bytes, "max_lines": max_lines}
    return _runlog(summarize_log(path, sample_rows=sample_rows, **limits), str(path))


@dataclass(frozen=True)
class FileRead:
    """What one file of a run gave besides its summary: for the checks across the run's files
    (`advisor.ingest.ranks.check_same_header`, `advisor.ingest.ranks.merged_end`)."""

    path: str  # as shown in messages
    header: RunHeader
    end: dict[str, Any] | None  # the file's own last 'end' event


class _Copies(Exception):
    """Some steps of the files folded are copies: fold again, testing each merge (its error names them)."""


def _fold(files: Sequence[Path], summaries: Iterable[Summary], *, check: bool, copies: bool) -> tuple[Summary, list]:
    """The summaries of one run's ``files`` merged in order, each file's `FileRead` kept (``check``:
    each header checked against the first file's). Without ``copies`` the merges skip their test
    for copied steps and the sample keys of all are tested once at the end (`sample.copied_keys`):
    where that finds a key twice, `_Copies` (the caller folds again with the test at every merge)."""
    acc: Summary | None = None
    reads: list[FileRead] = []
    keys: list[list[np.ndarray]] = []
    for f, summ in zip(files, summaries):
        reads.append(FileRead(display_path(str(f)), summ.header, summ.end))
        if check and len(reads) > 1:
            check_same_header([reads[0], reads[-1]])
        keys.append([summ.samples[r].compact()[1] for r in summ.roles])
        acc = summ if acc is None else acc.merge(summ, copies=copies)
    if not copies and any(copied_keys(list(k)) for k in zip(*keys)):
        raise _Copies
    return acc, reads


def _merged(
    files: Sequence[Path], *, check: bool = True, sample_rows: int | None = None, held: Sequence[Summary] | None = None
) -> tuple[Summary, list[FileRead]]:
    """The files of one run read (or ``held``, read already) and merged, in order: all at once by
    the fast pass where it can (`advisor.ingest.scan.scan_files`), else one by one."""
    if not files:
        raise LogError("<none>", None, "no log file given")
    if held is None and len(files) > 1 and not any(is_summary(f) for f in files):
        got = scan_files(list(files), sample_rows=sample_rows or summary.DEFAULT_SAMPLE_ROWS)
        if got is not None:  # (its files' headers are equal: it gives up otherwise)
            return got[0], [FileRead(display_path(str(f)), h, e) for f, (h, e) in zip(files, got[1])]

    def read(quiet: bool) -> Iterable[Summary]:
        for i, f in enumerate(files):
            if held is not None and not quiet:
                yield held[i]
                continue
            with warnings.catch_warnings():
                if quiet:  # (read again: warned of the first time)
                    warnings.simplefilter("ignore")
                yield summarize_log(f, sample_rows=sample_rows)

    try:
        return _fold(files, read(False), check=check, copies=False)
    except _Copies:
        return _fold(files, read(True), check=check, copies=True)


def _run(files: Sequence[Path], name: str, held: Sequence[Summary] | None = None) -> RunLog:
    """One run from its per-rank files, merged as summaries: exact and in bounded memory.

    Headers must be equal (`ranks.check_same_header`, which names the file and field); the run's
    end is `ranks`' merged end of the files' own; the same steps in two files are refused
    (`Summary.merge`). Files ``held`` were warned of as they were read."""
    if len(files) == 1 and held is None:
        return load_log(files[0])
    summ, reads = _merged(files, held=held)
    summ.end = merged_end(reads)  # (a new dict)
    return _runlog(summ, name, warn=held is None)


def summarize_paths(paths: Sequence[str | Path], *, sample_rows: int | None = None) -> Summary:
    """One merged summary of several logs (or summaries) of one run, folded in path order."""
    files = [f for p in paths for f in expand(p)[0]]
    return _merged(files, check=False, sample_rows=sample_rows)[0]


def _summary_workers(summ: Summary) -> set[tuple[str, int]]:
    """The (role, worker) pairs of a summary's kept steps: those of its RunLog's steps frame."""
    return {(r, int(w)) for r in summ.roles for w in np.unique(summ.samples[r].compact()[0]["worker"])}


def load_logs(paths: Iterable[str | Path]) -> list[RunLog]:
    """Parse several logs (e.g. the same job at different splits).

    A directory or a (quoted) glob is one run written as per-rank files, and so are plain files
    that are evidently ranks of one run (`advisor.ingest.ranks`). A directory of probe segments
    (headers with ``probe``) gives one log per segment, in segment order (`advisor.ingest.probes`).
    Each file is read once: plain files are held as summaries until it is known which are ranks
    of one run (e.g. a glob the shell expanded), whose summaries then merge, exactly, as a
    directory's do.
    """
    paths = list(paths)
    if not paths:
        raise LogError("<none>", None, "no log file given")
    logs: list[RunLog | None] = []
    held: dict[int, tuple[Path, Summary]] = {}  # plain files, as summaries, by position
    for p in paths:
        files, one_run = expand(p)
        segments = probe_segments(files) if one_run and len(files) > 1 else None
        if segments is not None:
            logs.extend(_run(g, group_name([display_path(str(f)) for f in g])) for g in segments)
        elif one_run:
            logs.append(_run(files, str(p)))
        else:
            summ = summarize_log(files[0])
            _warn(summ, str(files[0]))  # in file order, where a RunLog of it would have warned
            held[len(logs)] = (files[0], summ)
            logs.append(None)
    groups = rank_groups({i: summ.header for i, (_, summ) in held.items()}, lambda i: _summary_workers(held[i][1]))
    dropped: set[int] = set()
    for g in groups:
        members = [held.pop(i) for i in g]
        name = group_name([display_path(str(f)) for f, _ in members])
        logs[g[0]] = _run([f for f, _ in members], name, held=[s for _, s in members])
        dropped.update(g[1:])
    for i, (f, summ) in held.items():
        logs[i] = _runlog(summ, str(f), warn=False)
    return [lg for i, lg in enumerate(logs) if i not in dropped]
