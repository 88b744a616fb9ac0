"""One large log file read by its pieces in worker processes: the serial read's summary, bit for bit.

`advisor.ingest.stream` cuts a log into pieces where the bytes alone say (`stream.PieceGeometry`:
piece j ends at the last newline before a fixed offset) and makes the file's summary the left fold
of its pieces' summaries (`Summary.extend`). So a piece can be read alone: `stream.read_piece`
finds its bytes by the same cuts, checks, parses and folds them as the serial read does. Here
`summarize_file` sends the pieces of a large plain file to worker processes
(`advisor.processes`: forked from this process where that is safe, so they start in
milliseconds) and folds their summaries here, in file order, as they come: the same summary,
bit for bit, as `stream.summarize_log` reading the file alone, whatever the number of workers.

**Errors and warnings are the serial read's.** A piece that raised, or gave a `LogWarning` (a
bad line, a line too long, text that is not UTF-8, a surrogate), names lines counted from its own
start, which only a read of the whole file can number; so the fold stops, and the file is read
again here by `stream.summarize_log`, which raises or warns as it always does. The one warning a
good log can give, a last line cut mid-write (a log still being written), is given here with
the file's line number (`stream.fold_pieces`). A library's warning in a worker (numpy, pandas:
a deprecation) is given here, where this process's filters judge it as they judge the serial
read's.

**When processes pay** (the crossover, measured by benchmarks/large_logs.py; BENCHMARKS.md
section 15.vi): a plain (not gzip) file of ``SPLIT_MIN_BYTES`` or more, ``MIN_WORKERS`` free
cores or more; then one worker per piece (16 MiB), at most one per free core (`advisor.processes.free_cores`)
or the caller's ``workers``. Each worker gives pyarrow a share of the cores. At most
``workers + IN_FLIGHT_EXTRA`` pieces are read or waiting at once, so memory is bounded whatever
the file's length: a piece's bytes and columns per worker, and here a few piece summaries (a
piece's kept steps, ~9 MB for 100k steps) besides the file's.
"""
from __future__ import annotations

import os
import stat
import sys
import warnings
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Iterator

from advisor.errors import LogWarning
from advisor.ingest import summary
from advisor.ingest.reader import GZIP_MAGIC, MAX_LINE_BYTES, MAX_LOG_BYTES, MAX_LOG_LINES
from advisor.ingest.stream import PieceGeometry, PieceRead, fold_pieces, read_piece, summarize_log, warnings_held
from advisor.ingest.summary import Summary
from advisor.processes import available_cores, free_cores, process_pool, workers_allowed

SPLIT_MIN_BYTES = 64 << 20     # smaller files are read here, their pieces parsed in threads. On the device's
                               # 16 cores, the CLI with workers that neither import pandas nor wait on a
                               # longer first piece: a 154 MB log 2.02 s against 2.45 s read here, a 46 MB one
                               # 1.49 s against 1.61 s for 2.9x the CPU time; from 64 MiB (four pieces) on
                               # the gain is worth the cores (BENCHMARKS.md section 15.vi)
MIN_WORKERS = 4                # with fewer free cores, a file is read here: on the 2-core host, 2 workers
                               # lost to the threads of the serial read (the CLI on a 1M-line log: 2.53 s
                               # against 2.20 s, the import's thread competing for the cores)
IN_FLIGHT_EXTRA = 2            # pieces read ahead of the workers' count (each waits ~9 MB here)
_PRELOAD = ["advisor.ingest.stream", "pyarrow.json", "pyarrow.compute"]


def _plain_size(path: Path) -> int | None:
    """The size of a plain (not gzip, not summary) regular file; None for anything else."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        with open(path, "rb") as f:
            head = f.read(len(summary.MAGIC))
    except OSError:
        return None
    if head.startswith(GZIP_MAGIC) or head.startswith(summary.MAGIC):
        return None
    return st.st_size


def _plan(path: Path, workers: int | None, max_bytes: int, max_lines: int) -> tuple[int, int]:
    """The workers for reading ``path`` by pieces (1: read here), and its cuts."""
    size = _plain_size(path)
    if size is None or size < SPLIT_MIN_BYTES or size > max_bytes or size > max_lines or not workers_allowed():
        return 1, 0
    cuts = PieceGeometry.now().cuts(size)
    cap = free_cores() if workers is None else workers
    return (1 if cap < MIN_WORKERS else min(cap, cuts + 1)), cuts


def plan_piece_workers(path: str | Path, workers: int | None = None, *, max_bytes: int = MAX_LOG_BYTES,
                       max_lines: int = MAX_LOG_LINES) -> int:
    """Worker processes for reading the file ``path`` by pieces: 1 (read here) below the
    crossover, for gzip and summary files, and for a file that may break a limit (the serial read
    refuses it by name)."""
    return _plan(Path(path), workers, max_bytes, max_lines)[0]


class _NoPandas:
    """An import finder that refuses pandas: pyarrow tries to import it at its first conversion
    (``pa.array``, ``to_numpy``, ...; pyarrow 25 and 26) and reads the same without it. Reading a
    log needs no pandas, and each worker would otherwise pay its import (0.20-0.25 s on the
    2-core host) at its first piece. (A None in ``sys.modules`` does not do: pyarrow's compiled
    import takes the None for the module.)"""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("a log-reading worker goes without pandas", name=name)
        return None


def _init_worker(arrow_threads: int) -> None:
    if "pandas" not in sys.modules:      # (a forked parent that has it: it costs nothing here)
        sys.meta_path.insert(0, _NoPandas)
    import pyarrow as pa
    pa.set_cpu_count(arrow_threads)
    pa.set_io_thread_count(arrow_threads)


def reader_pool(n: int) -> ProcessPoolExecutor:
    """``n`` worker processes for reading logs (pieces here, groups of files in
    `advisor.ingest.parallel`), forked now where that is safe (make the pool before starting a
    thread), pyarrow's threads shared out between them, and without pandas (`_init_worker`)."""
    return process_pool(n, _PRELOAD, _init_worker, (max(1, available_cores() // n),))


def _worker_piece(path: str, j: int, n_cuts: int, geometry: PieceGeometry, max_line_bytes: int,
                  sample_rows: int) -> tuple[PieceRead | None, list[Warning]]:
    """`stream.read_piece` in a worker, and the warnings it gave that are not the log's (a
    library's: this process's filters then judge them, as the serial read's); no piece if it
    raised or gave a `LogWarning` (which names lines: the parent reads the file again itself)."""
    held: list[Warning] = []
    with warnings.catch_warnings(record=True) as other:
        warnings.simplefilter("always")
        with warnings_held(held):
            try:
                got = read_piece(path, j, n_cuts, geometry, max_line_bytes, sample_rows)
            except Exception:      # whatever it is, the read here meets it again and reports it
                return None, []
    notes = [w.message for w in other]
    if held or any(isinstance(w, LogWarning) for w in notes):
        return None, []
    return got, notes


class _Unread(Exception):
    """A piece could not be read alone (an error or warning in it): the file is read here."""


class _PieceReads:
    """The pieces of one file read by the pool ``ex`` (``n`` workers), handed out in order, at
    most ``n + IN_FLIGHT_EXTRA`` in flight or waiting."""

    def __init__(self, ex: ProcessPoolExecutor, n: int, path: Path, n_cuts: int, max_line_bytes: int,
                 sample_rows: int):
        self.ex = ex
        self.args = (str(path), n_cuts, PieceGeometry.now(), max_line_bytes, sample_rows)
        self.todo = iter(range(n_cuts + 1))
        self.pending: deque[Future] = deque()
        for j in self.todo:
            self.pending.append(self._submit(j))
            if len(self.pending) >= n + IN_FLIGHT_EXTRA:
                break

    def _submit(self, j: int) -> Future:
        path, n_cuts, geometry, max_line_bytes, sample_rows = self.args
        return self.ex.submit(_worker_piece, path, j, n_cuts, geometry, max_line_bytes, sample_rows)

    def __iter__(self) -> Iterator[PieceRead]:
        while self.pending:
            try:
                got, notes = self.pending.popleft().result()
            except Exception:      # a worker died (killed, out of memory): read here
                got, notes = None, []
            if got is None:
                raise _Unread
            for w in notes:
                warnings.warn(w, stacklevel=4)
            nxt = next(self.todo, None)
            if nxt is not None:
                self.pending.append(self._submit(nxt))
            yield got

    def cancel(self) -> None:
        for f in self.pending:
            f.cancel()
        self.pending.clear()


def summarize_file(path: str | Path, *, workers: int | None = None, sample_rows: int | None = None,
                   max_line_bytes: int = MAX_LINE_BYTES, max_bytes: int = MAX_LOG_BYTES,
                   max_lines: int = MAX_LOG_LINES, pool: ProcessPoolExecutor | None = None) -> Summary:
    """`stream.summarize_log` of one file, read by pieces in worker processes past the crossover
    (`plan_piece_workers`; ``pool``: a `reader_pool` to use, else one made for the file): the same
    summary, and the same errors and warnings (see the module docstring)."""
    path = Path(path)
    sample_rows = sample_rows or summary.DEFAULT_SAMPLE_ROWS   # as this process sees it
    n, n_cuts = _plan(path, workers, max_bytes, max_lines)
    serial = dict(max_line_bytes=max_line_bytes, max_bytes=max_bytes, max_lines=max_lines, sample_rows=sample_rows)
    if n <= 1:
        return summarize_log(path, **serial)
    ex = pool or reader_pool(n)
    reads = _PieceReads(ex, n, path, n_cuts, max_line_bytes, sample_rows)
    try:
        return fold_pieces(path, iter(reads))
    except _Unread:
        pass
    finally:
        reads.cancel()
        if pool is None:
            ex.shutdown(wait=True, cancel_futures=True)
    return summarize_log(path, **serial)

