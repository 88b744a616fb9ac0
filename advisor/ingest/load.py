"""Read rate logs (JSONL or .jsonl.gz) into :class:`~advisor.ingest.runlog.RunLog` s, fast, in bounded memory, with errors that name file, line, field.

Data flow: bytes in chunks (line-length, size, gzip-ratio and UTF-8 guards: `advisor.ingest.reader`)
-> pieces of whole lines -> header via ``json`` -> each piece through pyarrow's multi-threaded
JSON reader with an explicit schema built from the header, vectorized checks, and the slow exact
path that names a bad line (`advisor.ingest.parse`) -> the piece's columns fold into a mergeable
:class:`~advisor.ingest.summary.Summary` (exact counts, time-binned sums, a bounded uniform sample
of steps per role) and are dropped (`advisor.ingest.stream`) -> DataFrames from the summary
(`advisor.ingest.frames`). No Python object is made per line on this path, and memory does not
grow with the log.

Here: the public loaders. `load_log` (one file), `load_logs` (the command line's arguments: plain
files, directories and globs of per-rank files, `advisor.ingest.ranks`), `load_run` (the files of
one run, merged as summaries), `summarize_paths` (one merged summary, for `dflash-advise
summarize`), `runlog_from_summary`, and `read_ahead` (the CLI's overlap of reading and importing).
The frames and the sampling of large logs are documented in `advisor.ingest.runlog`; a file
written by `dflash-advise summarize` is read the same way (it is recognised by its first bytes).
"""
from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from advisor.errors import LogError, LogWarning, cut_text, display_path
from advisor.ingest.frames import STEP_COLUMNS, rates_columns, rates_columns_frame, steps_frame, syncs_frame
from advisor.ingest.parallel import FileRead, fold_held, fold_run
from advisor.ingest.pieces import reader_pool, plan_piece_workers, summarize_file
from advisor.ingest.probes import probe_segments
from advisor.ingest.parse import rates_table
from advisor.ingest.ranks import check_same_header, expand, group_name, merge, merged_end, rank_groups
from advisor.ingest.reader import MAX_LINE_BYTES, MAX_LOG_BYTES, MAX_LOG_LINES
from advisor.ingest.runlog import RunLog
from advisor.ingest.schema import nearest_field
from advisor.ingest.stream import warnings_held
from advisor.ingest.summary import Summary
from advisor.processes import keep


def _shown(name: str) -> str:
    """An event name from the log as a short printable token (it goes into the report's caveats)."""
    return cut_text(display_path(name))


def _warn_unknown(summ: Summary, path: str) -> None:
    for key, n in summ.unknown_fields.items():
        ev, name = key.split(".", 1)
        near = nearest_field(ev, name)
        if near is not None:      # a likely misspelling; other unknown fields are the writer's own (counted)
            where = "the header" if ev == "run" else f"{n} '{ev}' line{'s' if n != 1 else ''}"
            warnings.warn(LogWarning(f"{display_path(path)}: unknown field '{_shown(name)}' in {where} ignored; "
                                     f"did you mean '{near}'? ('{near}' reads as not logged there)"), stacklevel=4)
    unknown = dict(summ.unknown)
    if unknown:
        warnings.warn(LogWarning(f"{display_path(path)}: ignored {sum(unknown.values())} events of unknown type "
                                 f"({', '.join(f'{_shown(k)}: {v}' for k, v in list(unknown.items())[:10])}"
                                 f"{', ...' if len(unknown) > 10 else ''})"), stacklevel=4)


def runlog_from_summary(summ: Summary, path: str, *, warn: bool = True) -> RunLog:
    """The RunLog of a summary: its kept steps (all of them below the sample size), syncs and rates.
    ``warn``: warn of the summary's unknown events (False: the caller did already)."""
    header = summ.header
    cols, codes, _ = summ.steps()
    steps = steps_frame({f: cols[f] for f in (*STEP_COLUMNS, "xfer") if f != "role" and f in cols}, codes, header)
    syncs = syncs_frame(summ.syncs())
    rc = summ.rates_columns()
    rates = rates_columns_frame(rc or rates_columns(rates_table([], header), header), merged=len(summ.paths) > 1)
    unknown = dict(summ.unknown)
    if warn:
        _warn_unknown(summ, path)
    end_obj = summ.end
    if end_obj is not None:
        end_obj = {k: v for k, v in end_obj.items() if v is not None}
    sampled = summ.sampled
    # the path is only ever shown (reports, caveats): make it one printable line
    return RunLog(path=display_path(path), header=header, steps=steps, syncs=syncs, rates=rates, end=end_obj,
                  n_lines=summ.n_lines, unknown_events=unknown, unknown_fields=dict(summ.unknown_fields),
                  sampled=sampled,
                  totals=summ.totals() if sampled else None,
                  t_max_s=summ.t_max_s if math.isfinite(summ.t_max_s) else None,
                  n_steps={r: summ.n_steps(r) for r in summ.roles},
                  source=str(path) if len(summ.paths) == 1 else None)


def load_log(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES, max_bytes: int = MAX_LOG_BYTES,
             max_lines: int = MAX_LOG_LINES, sample_rows: int | None = None) -> RunLog:
    """Parse one rate log (or a summary written by `dflash-advise summarize`). Raises
    :class:`LogError` (file:line: field ...) on unusable input.

    The limits (module constants by default) bound the time any input can cost; memory is
    bounded by the chunk and the sample size (``sample_rows`` steps per role), whatever the log's length.
    """
    summ = summarize_file(path, max_line_bytes=max_line_bytes, max_bytes=max_bytes, max_lines=max_lines,
                          sample_rows=sample_rows)
    return runlog_from_summary(summ, str(path))


def _same_header(first: FileRead, this: FileRead) -> None:
    check_same_header([first, this])


def _run_from_fold(files: Sequence[str | Path], folded: tuple[Summary, list[FileRead]], path: str) -> RunLog:
    """One run from the fold of its per-rank ``files`` (`advisor.ingest.parallel`): the run's end
    `ranks`' merged end of the files' own ends."""
    summ, reads = folded
    end = merged_end(reads)
    summ.end = dict(end) if end is not None else None
    summ.paths = [str(f) for f in files]
    return runlog_from_summary(summ, path)


def load_run(files: Sequence[str | Path], path: str, *, workers: int | None = None) -> RunLog:
    """One run from its per-rank files, merged as summaries: exact and in bounded memory.

    Past the crossover the files are read in worker processes, one per core (``workers``: at
    most this many), and folded by groups of consecutive files (`advisor.ingest.parallel`), so
    memory is that of a few summaries per worker whatever the number and length of the files,
    and errors are the file-by-file loop's. Headers must be equal (`ranks.check_same_header`,
    which names the file and field); the run's end is `ranks`' merged end.
    """
    files = list(files)
    if len(files) == 1:
        return load_log(files[0])
    return _run_from_fold(files, fold_run(files, workers=workers, check=_same_header), path)


def summarize_paths(paths: Sequence[str | Path], *, workers: int | None = None,
                    sample_rows: int | None = None) -> Summary:
    """One merged summary of several logs (or summaries) of one run, read as `load_run` reads
    them (worker processes past the crossover; folded in path order)."""
    paths = [f for p in paths for f in expand(p)[0]]    # a directory or a quoted glob: its log files
    return fold_run(paths, workers=workers, sample_rows=sample_rows)[0]


def _summary_workers(summ: Summary) -> set[tuple[str, int]]:
    """The (role, worker) pairs of a summary's kept steps: those of its RunLog's steps frame."""
    out: set[tuple[str, int]] = set()
    for r in summ.roles:
        cols, _ = summ.samples[r].compact()
        out.update((r, int(w)) for w in np.unique(cols["worker"]))
    return out


# --- reading ahead (the CLI): the parse of the logs overlaps the import of the advisor's modules

_read_ahead: dict[str, tuple[Summary | None, BaseException | None, list[Warning]]] = {}


def read_ahead(paths: Iterable[str | Path], meanwhile: Callable[[], None] | None = None) -> None:
    """Read the plain log files among ``paths`` now, in order, and hold their summaries for
    `load_logs`, which takes each one instead of reading the file (folders and globs are left
    to it: it reads them in parallel).

    For the CLI, which imports pandas and the advisor's modules meanwhile (~0.4 s): ``meanwhile``
    starts that (a thread) once the worker processes for the large files are forked
    (`advisor.ingest.pieces`: a fork must come before any other thread), and the files are then
    read here (the parse releases the GIL most of the time, and a large file's pieces are parsed
    in those processes). Those processes are then kept (`advisor.processes.keep`) for the
    refinement's simulations; the caller ends them (`advisor.processes.release_kept`). What the
    reading would have raised or warned is held too and given where `load_logs` takes the file,
    so errors still surface in the order of the arguments; after an error, the files behind it
    are not read.
    """
    _read_ahead.clear()
    files = list(dict.fromkeys(str(Path(p)) for p in paths if os.path.isfile(p)))
    n = max((plan_piece_workers(p) for p in files), default=1)
    pool = reader_pool(n) if n > 1 else None
    done = False
    try:
        if meanwhile is not None:
            meanwhile()
        for key in files:
            notes: list[Warning] = []
            with warnings_held(notes):
                try:
                    summ = summarize_file(key, pool=pool)
                    if meanwhile is not None:
                        summ.settle()     # the frames' compaction, done while the import runs
                    _read_ahead[key] = (summ, None, notes)
                except Exception as e:    # given to load_logs, raised where it takes this file
                    _read_ahead[key] = (None, e, notes)
                    return
        done = True
    finally:
        if pool is not None and done and meanwhile is not None:
            keep(pool, n)     # its idle workers run the refinement's simulations (the CLI releases it)
        elif pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _summary_of(path: Path) -> Summary:
    """The summary of one plain log file: read ahead (`read_ahead`), or read now."""
    held = _read_ahead.pop(str(path), None)
    if held is None:
        return summarize_file(path)
    summ, error, notes = held
    for w in notes:
        warnings.warn(w, stacklevel=3)
    if error is not None:
        raise error
    return summ


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
    try:
        return _load_logs(paths)
    finally:
        _read_ahead.clear()      # (after an error: what was read ahead of it is not wanted)


def _load_logs(paths: list[str | Path]) -> list[RunLog]:
    logs: list[RunLog | None] = []
    held: dict[int, tuple[Path, Summary]] = {}     # plain files, as summaries, by position
    for p in paths:
        files, one_run = expand(p)
        segments = probe_segments(files) if one_run and len(files) > 1 else None
        if segments is not None:      # a probe's directory: one log per segment (advisor.ingest.probes)
            logs.extend(load_run(g, group_name([display_path(str(f)) for f in g])) for g in segments)
            continue
        if one_run:
            logs.append(load_run(files, str(p)))
            continue
        summ = _summary_of(files[0])
        _warn_unknown(summ, str(files[0]))        # in file order, where a RunLog of it would have warned
        held[len(logs)] = (files[0], summ)
        logs.append(None)
    headers = [held[i][1].header if lg is None else lg.header for i, lg in enumerate(logs)]
    groups = rank_groups(headers, lambda i: _summary_workers(held[i][1]), [i in held for i in range(len(logs))])
    dropped: set[int] = set()
    for g in groups:
        members = [held.pop(i) for i in g]
        name = group_name([display_path(str(f)) for f, _ in members])
        k = min(s.sample_rows for _, s in members)
        if any(s.sampled for _, s in members) or any(sum(s.n_steps(r) for _, s in members) > k
                                                     for r in members[0][1].roles):
            # merged as summaries, exactly (advisor.ingest.summary): the run's sample is then the one of
            # the whole log, as from a folder of the files; frames of samples would not merge so,
            # and files each below the sample size would together exceed it
            files = [f for f, _ in members]
            logs[g[0]] = _run_from_fold(files, fold_held(files, [s for _, s in members], check=_same_header), name)
        else:
            logs[g[0]] = merge([runlog_from_summary(s, str(f), warn=False) for f, s in members], name)
        dropped.update(g[1:])
    for i in list(held):
        f, summ = held.pop(i)
        logs[i] = runlog_from_summary(summ, str(f), warn=False)
    return [lg for i, lg in enumerate(logs) if i not in dropped]
