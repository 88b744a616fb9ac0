"""Many log files read with every core: one worker process per core, summaries back in order.

Reading a file is mostly pyarrow's parse, but the checks and the folding of each piece into its
summary hold Python's GIL, so threads reading files side by side gain little past two (BENCHMARKS.md
section 10). `summaries_in_order` therefore reads the files of a run directory in worker
processes (`concurrent.futures.ProcessPoolExecutor`) and hands their summaries back **in file
order**, to be merged by the caller exactly as the serial loop merges them (the same left fold,
so the same sums, bit for bit, whatever the number of workers).

Errors and warnings are those of the serial loop, in the same order: a worker returns a file's
warnings (a last line cut mid-write) with its summary or its `LogError`, and the parent gives
them out, then raises the error, when it reaches that file; the files after the first bad one
are not merged (their reads are cancelled or dropped). So the first bad line named is the serial
one's, file:line:field.

When processes pay (the crossover, measured by benchmarks/parallel_ranks.py): at least two
files and ``PARALLEL_MIN_BYTES`` of them in all, and then one worker per ``BYTES_PER_WORKER``
of input, at most one per free core (`advisor.processes.free_cores`) or the caller's
``workers``. Smaller runs are read in this process, one file after another (each file's parse
is already multi-threaded by pyarrow). Each worker gives pyarrow a share of the cores
(``cores // workers``, at least one), so that the processes do not oversubscribe the host.
Workers start from a fork server that has imported the reader once (`advisor.processes`). At
most ``2 * workers`` summaries are in flight or waiting, so memory is bounded whatever the
number of files: about a worker's read (a piece and a summary, ~0.4 GB for a sampled file) per
process.
A main script without a ``__main__`` guard reads here (`advisor.processes.workers_allowed`).
"""
from __future__ import annotations

import warnings
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Iterator, Sequence

from advisor.errors import LogError
from advisor.ingest.stream import summarize_log, warnings_held
from advisor.ingest import summary
from advisor.ingest.summary import Summary
from advisor.processes import available_cores, free_cores, process_pool, workers_allowed

PARALLEL_MIN_BYTES = 64 << 20   # below this much input in all, the files are read one after another here
BYTES_PER_WORKER = 32 << 20     # ... and above it, one worker process per this much input (a process
                                # costs ~0.1 s to start and to send its summary back)
_PRELOAD = ["advisor.ingest.stream", "pyarrow.json", "pyarrow.compute"]


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0        # the reader names what is wrong with it


def plan_workers(paths: Sequence[Path], workers: int | None = None) -> int:
    """Worker processes for reading ``paths``: 1 (read here, in order) below the crossover."""
    if len(paths) < 2 or not workers_allowed():
        return 1
    total = sum(_size(p) for p in paths)
    if total < PARALLEL_MIN_BYTES:
        return 1
    cap = free_cores() if workers is None else workers
    return max(1, min(cap, len(paths), total // BYTES_PER_WORKER))


def _init_worker(arrow_threads: int) -> None:
    import pyarrow as pa
    pa.set_cpu_count(arrow_threads)
    pa.set_io_thread_count(arrow_threads)


def _read_one(path: Path, sample_rows: int | None) -> tuple[Summary | None, LogError | None, list[Warning]]:
    """One file's summary (or its LogError), with the warnings its read gave, in order."""
    notes: list[Warning] = []
    with warnings.catch_warnings(record=True) as other:
        warnings.simplefilter("always")
        with warnings_held(notes):
            try:
                summ = summarize_log(path, sample_rows=sample_rows)
            except LogError as e:
                return None, e, notes + [w.message for w in other]
    return summ, None, notes + [w.message for w in other]


def summaries_in_order(paths: Sequence[str | Path], *, workers: int | None = None,
                       sample_rows: int | None = None) -> Iterator[Summary]:
    """The summary of each of ``paths``, in order: read in worker processes past the crossover
    (`plan_workers`), else here one after another; errors and warnings as the serial loop's."""
    paths = [Path(p) for p in paths]
    n = plan_workers(paths, workers)
    if n <= 1:
        for p in paths:
            yield summarize_log(p, sample_rows=sample_rows)
        return
    # the sample size as this process sees it (a worker would read its own module's default)
    sample_rows = sample_rows or summary.DEFAULT_SAMPLE_ROWS
    ex = process_pool(n, _PRELOAD, _init_worker, (max(1, available_cores() // n),))
    pending: deque[Future] = deque()
    todo = iter(paths)
    try:
        for p in todo:
            pending.append(ex.submit(_read_one, p, sample_rows))
            if len(pending) >= 2 * n:
                break
        while pending:
            summ, error, notes = pending.popleft().result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(ex.submit(_read_one, nxt, sample_rows))
            for w in notes:
                warnings.warn(w, stacklevel=2)
            if error is not None:
                raise error
            yield summ
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
