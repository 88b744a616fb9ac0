"""Many log files of one run read with every core, folded into one summary in file order.

Reading a file is mostly pyarrow's parse, but the checks and the folding of each piece into its
summary hold Python's GIL, so threads reading files side by side gain little past two (BENCHMARKS.md
section 10). `fold_run` therefore reads the files of a run directory in worker processes
(`concurrent.futures.ProcessPoolExecutor`).

**Groups.** The files are cut into groups of consecutive files of about ``GROUP_BYTES`` or more
each (`file_groups`; a file of that size is a group of its own). A group's files are read and
folded into one summary by one worker (a left fold, in file order), and this process folds the
groups' summaries, in order. So this process merges one summary per group, not per file: a run
of 1,024 small rank files costs it ~100 merges (a merge of one rank file's summary costs ~1.4 ms
here, more than a worker's read of it shared by 16 cores; BENCHMARKS.md section 15.w). The
groups depend on the files' sizes alone, and a read in this process (below the crossover, or
``workers=1``) folds the same groups the same way, so the summary is the same, bit for bit,
whatever the number of workers. (Bins are float sums: another grouping would round
differently in the last bits; counts and samples are exact under any grouping.)

**Errors and warnings are the file-by-file loop's.** A group whose read or fold failed (a bad
line, a header that differs, the same steps twice), or whose summary this process cannot merge,
is folded again here file by file (`_Fold`): each file read, its warnings given, checked
(``check``, e.g. the same 'run' header as the first file's) and merged, as the plain loop does,
so the first error raised names the same file, line and field. A group that folded cleanly gives
its files' warnings and checks in file order; the files after the first bad one are not merged
(the reads of later groups are cancelled or dropped). With worker processes, this process's
merges do not each test the group's steps for copies of steps merged before (that test, a
binary search and an insertion into every key held, was most of this process's time: 0.69 ->
0.23 s for 96 groups on the 2-core host, BENCHMARKS.md section 15.v); the sample keys of every
group are tested once at the end instead (`summary.copied_keys`), and what the pass warned or
raised is held until then. If that finds a key twice (a copied file, or a step repeated inside
one), the run is folded again with a test at every merge: the plain loop's error, warnings and
summary.

**When processes pay** (the crossover, measured by benchmarks/parallel_ranks.py): at least two
groups and ``PARALLEL_MIN_BYTES`` of input in all, and then one worker per ``BYTES_PER_WORKER``
of input or per ``FILES_PER_WORKER`` files, whichever gives more, at most one per group and per free core (`advisor.processes.free_cores`) or the
caller's ``workers``. Smaller runs are read in this process (each file's parse is already
multi-threaded by pyarrow). Each worker gives pyarrow a share of the cores (``cores // workers``,
at least one), so that the processes do not oversubscribe the host. Workers fork from this process
where that is safe, else from a fork server that has imported the reader once
(`advisor.processes`). At most ``2 * workers`` group summaries, or as many as hold
``IN_FLIGHT_BYTES`` of input, are in flight or waiting, so memory is bounded whatever the number
of files: about a worker's read (a piece and a summary, ~0.4 GB for a sampled file) per process,
and here the summaries waiting.
A main script without a ``__main__`` guard reads here (`advisor.processes.workers_allowed`).
"""
from __future__ import annotations

import warnings
from collections import deque
from contextlib import nullcontext
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from advisor.errors import LogError, display_path
from advisor.ingest import summary
from advisor.ingest.pieces import reader_pool
from advisor.ingest.schema import RunHeader
from advisor.ingest.stream import summarize_log, warnings_held
from advisor.ingest.summary import Summary
from advisor.processes import free_cores, workers_allowed

PARALLEL_MIN_BYTES = 64 << 20   # below this much input in all, the files are read one after another here
BYTES_PER_WORKER = 32 << 20     # ... and above it, one worker process per this much input (a process
                                # costs ~0.1 s to start and to send its summary back)
FILES_PER_WORKER = 16           # ... or one per this many files, if that is more: a file's fixed costs are
                                # the work then (on 16 cores, 217 MB as 256 or 1,024 files: 16 workers
                                # 1.9-2.0 s, 6 workers 2.3-2.9 s; as 16 files, 6 workers beat 16; BENCHMARKS 15.w)
GROUP_BYTES = 2 << 20           # consecutive files folded by one worker into one summary, about this much
                                # input a group (~100 groups for a 1024-GPU run of 200 MB: few merges here,
                                # enough groups to keep 16 workers busy to the end)
IN_FLIGHT_BYTES = 128 << 20     # groups read ahead of this process's fold while they hold less input than this
                                # (their summaries wait here: at most about as many bytes)


@dataclass(frozen=True)
class FileRead:
    """What one file of a run gave besides its summary: for the checks across the run's files
    (`advisor.ingest.ranks.check_same_header`, `advisor.ingest.ranks.merged_end`)."""

    path: str                   # as shown in messages
    header: RunHeader
    end: dict[str, Any] | None  # the file's own last 'end' event

    @classmethod
    def of(cls, path: Path, summ: Summary) -> "FileRead":
        return cls(display_path(str(path)), summ.header, dict(summ.end) if summ.end is not None else None)


Check = Callable[[FileRead, FileRead], None]   # (the run's first file, this one): raises LogError


@dataclass
class _Group:
    """A group's files folded into one summary, with each file's `FileRead` and warnings, in
    order; ``summ`` None: a file could not be read or merged (it is folded again file by file)."""

    summ: Summary | None
    reads: list[FileRead]
    notes: list[list[Warning]]


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0        # the reader names what is wrong with it


def file_groups(paths: Sequence[Path]) -> list[list[Path]]:
    """``paths`` cut into runs of consecutive files of at least ``GROUP_BYTES`` each (the last
    group may be smaller): the unit a worker reads and folds."""
    groups: list[list[Path]] = []
    size = GROUP_BYTES
    for p in paths:
        if size >= GROUP_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(p)
        size += _size(p)
    return groups


def plan_workers(paths: Sequence[Path], workers: int | None = None) -> int:
    """Worker processes for reading ``paths``: 1 (read here, in order) below the crossover."""
    n_groups = len(file_groups(paths))
    if n_groups < 2 or not workers_allowed():
        return 1
    total = sum(_size(p) for p in paths)
    if total < PARALLEL_MIN_BYTES:
        return 1
    cap = free_cores() if workers is None else workers
    return max(1, min(cap, n_groups, max(total // BYTES_PER_WORKER, len(paths) // FILES_PER_WORKER)))


def _fold_group(paths: Sequence[Path], sample_rows: int | None, *, catch_all: bool = False) -> _Group:
    """The left fold of one group's files, each file's `LogWarning` s held (``catch_all``, in a
    worker: every warning, for the parent to give)."""
    acc: Summary | None = None
    reads: list[FileRead] = []
    notes: list[list[Warning]] = []
    for p in paths:
        held: list[Warning] = []
        with warnings.catch_warnings(record=True) if catch_all else nullcontext() as other:
            if catch_all:
                warnings.simplefilter("always")
            with warnings_held(held):
                try:
                    summ = summarize_log(p, sample_rows=sample_rows)
                except LogError:
                    return _Group(None, reads, notes)
        reads.append(FileRead.of(p, summ))
        notes.append(held + [w.message for w in other or ()])
        try:
            acc = summ if acc is None else acc.merge(summ)
        except LogError:
            return _Group(None, reads, notes)
    return _Group(acc, reads, notes)


def _worker_fold(paths: Sequence[Path], sample_rows: int) -> _Group:
    group = _fold_group(paths, sample_rows, catch_all=True)
    if group.summ is not None:     # compacted here, not in the parent (the same sample either way)
        group.summ.settle()
    return group


def held_group(paths: Sequence[Path], summaries: Sequence[Summary]) -> _Group:
    """A group of files read already (their warnings given), folded here: as `_fold_group` would."""
    reads = [FileRead.of(p, s) for p, s in zip(paths, summaries)]    # (before the merges change the first)
    acc: Summary | None = None
    for s in summaries:
        try:
            acc = s if acc is None else acc.merge(s)
        except LogError:
            return _Group(None, [], [])
    return _Group(acc, reads, [[] for _ in paths])


class _Fold:
    """The run's summary so far, folded group by group in file order, and every file's `FileRead`.
    ``copies_at_end``: merges skip their test for copied steps; each summary's sample keys are
    kept instead (``keys``), for one test of them all at the end (`copies_found`)."""

    def __init__(self, check: Check | None, sample_rows: int | None, *, reread_quietly: bool = False,
                 copies_at_end: bool = False):
        self.check = check
        self.sample_rows = sample_rows
        self.reread_quietly = reread_quietly    # files read (and their warnings given) before
        self.summ: Summary | None = None
        self.reads: list[FileRead] = []
        self.keys: dict[str, list] | None = {} if copies_at_end else None

    def _checked(self, read: FileRead) -> None:
        if self.check is not None and self.reads:
            self.check(self.reads[0], read)
        self.reads.append(read)

    def _merged(self, summ: Summary) -> Summary:
        """This fold's summary with ``summ`` merged in (not yet kept: a refused merge changes nothing)."""
        if self.keys is not None:
            for r in summ.roles:        # (before a merge: the first summary becomes the fold's own)
                self.keys.setdefault(r, []).append(summ.samples[r].compact()[1])
        return summ if self.summ is None else self.summ.merge(summ, copies=self.keys is None)

    def copies_found(self) -> bool:
        """Whether the merges that skipped their test could have found a copy (then fold again with it)."""
        return self.keys is not None and any(summary.copied_keys(ks) for ks in self.keys.values())

    def add(self, paths: Sequence[Path], group: _Group) -> None:
        """Fold one group in: its summary if it folded cleanly and merges here, else its files
        again one by one (read here, warnings given, checked, merged: the plain loop's errors)."""
        if group.summ is not None:
            try:
                # (a merge checks before it changes anything: a refused one leaves self.summ as it was)
                merged = self._merged(group.summ)
            except LogError:
                pass
            else:
                for read, notes in zip(group.reads, group.notes):
                    for w in notes:
                        warnings.warn(w, stacklevel=4)
                    self._checked(read)
                self.summ = merged
                return
        for p in paths:
            with warnings_held([]) if self.reread_quietly else nullcontext():
                summ = summarize_log(p, sample_rows=self.sample_rows)
            self._checked(FileRead.of(p, summ))
            self.summ = self._merged(summ)


class _GroupReads:
    """The folds of ``groups`` by ``n`` worker processes, handed out in order; at most ``2 n``
    in flight or waiting, or more while they hold under ``IN_FLIGHT_BYTES`` of input (so workers
    keep reading while this process waits on a slow group: the first file of a run often holds
    its syncs and rates); the pool starts (and takes its first groups) when this is made."""

    def __init__(self, groups: list[list[Path]], n: int, sample_rows: int):
        self.ex = reader_pool(n)
        self.sample_rows = sample_rows
        self.n = n
        self.todo = iter(groups)
        self.pending: deque[tuple[Future, int]] = deque()
        self.pending_bytes = 0
        self._top_up()

    def _top_up(self) -> None:
        while len(self.pending) < 2 * self.n or self.pending_bytes < IN_FLIGHT_BYTES:
            g = next(self.todo, None)
            if g is None:
                return
            size = sum(_size(p) for p in g)
            self.pending.append((self.ex.submit(_worker_fold, g, self.sample_rows), size))
            self.pending_bytes += size

    def __iter__(self) -> Iterator[_Group]:
        while self.pending:
            fut, size = self.pending.popleft()
            self.pending_bytes -= size
            got = fut.result()
            self._top_up()
            yield got

    def close(self) -> None:
        self.ex.shutdown(wait=True, cancel_futures=True)


def fold_run(paths: Sequence[str | Path], *, workers: int | None = None, sample_rows: int | None = None,
             check: Check | None = None) -> tuple[Summary, list[FileRead]]:
    """The summary of the files of one run, folded in order by groups (`file_groups`), and each
    file's `FileRead`: read in worker processes past the crossover (`plan_workers`), else here;
    errors and warnings are the file-by-file loop's (see the module docstring)."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise LogError("<none>", None, "no log file given")
    # the sample size as this process sees it (a worker would read its own module's default)
    sample_rows = sample_rows or summary.DEFAULT_SAMPLE_ROWS
    groups = file_groups(paths)
    n = plan_workers(paths, workers)
    if n <= 1:
        fold = _Fold(check, sample_rows)
        for g in groups:
            fold.add(g, _fold_group(g, sample_rows))
        return fold.summ, fold.reads
    # the merges here test for copied steps once, at the end (a test per merge was most of this
    # process's time); what this pass warns or raises is held until that test has passed. If it
    # finds any, the run is folded again, each merge testing: the plain loop's errors and warnings
    with warnings.catch_warnings(record=True) as held:
        warnings.simplefilter("always")
        fold = _Fold(check, sample_rows, copies_at_end=True)
        try:
            _fold_groups(fold, groups, n, sample_rows)
            error = None
        except LogError as e:
            error = e
    if fold.copies_found():
        fold = _Fold(check, sample_rows)
        _fold_groups(fold, groups, n, sample_rows)
        return fold.summ, fold.reads
    for w in held:
        warnings.warn(w.message, stacklevel=2)
    if error is not None:
        raise error
    return fold.summ, fold.reads


def _fold_groups(fold: _Fold, groups: list[list[Path]], n: int, sample_rows: int) -> None:
    """The groups read by ``n`` worker processes, folded into ``fold`` in order."""
    reads = _GroupReads(groups, n, sample_rows)
    try:
        for g, got in zip(groups, reads):
            fold.add(g, got)
    finally:
        reads.close()


def fold_held(paths: Sequence[Path], summaries: Sequence[Summary], *,
              check: Check | None = None) -> tuple[Summary, list[FileRead]]:
    """`fold_run` of files read already (``summaries``, in the order of ``paths``, their warnings
    given): the same groups and folds, so the same summary as their folder's."""
    fold = _Fold(check, None, reread_quietly=True)
    at = 0
    for g in file_groups(paths):
        fold.add(g, held_group(g, summaries[at: at + len(g)]))
        at += len(g)
    return fold.summ, fold.reads
