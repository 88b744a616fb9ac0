"""Streaming one log file into a :class:`~advisor.ingest.summary.Summary`, in bounded memory.

`summarize_log` is a small pipeline of named steps:

1. `advisor.ingest.reader.read_chunks`: the file's bytes in checked chunks, with their newlines;
2. `_pieces`: the chunks cut into pieces of whole lines where `PieceGeometry` says: piece j ends at
   the last newline before ``PieceGeometry.limit(j)`` bytes of the file (about ``PIECE_BYTES``
   apart), so the cuts depend on the bytes alone; the first lines give the header (`_Body.take`),
   and the end of the file its last, maybe incomplete, line (`_last_pieces`);
3. `_fold`: each piece parsed (`advisor.ingest.parse.parse_piece`, ``PARSE_THREADS`` at once in
   worker threads) into a summary of its own (`_add_parsed`), its columns then dropped, and the
   pieces' summaries folded in order into the file's (`Summary.extend`);
4. `_finished`: the line count and source, and the check that a rate can be fitted at all.

Since the cuts are fixed by the bytes and the file's summary is the left fold of its pieces',
a piece can be read alone, in another process (`read_piece`: its bytes found by the same cuts,
checked, parsed and folded as here), and the pieces' summaries folded here give the very summary
of this serial read, bit for bit (`advisor.ingest.pieces` does so for large files).

No Python object is made per line on this path, and memory does not grow with the log. A last
line cut mid-write (a live log) is skipped with a :class:`~advisor.errors.LogWarning`. A file
written by `dflash-advise summarize` is read as the summary it is (recognised by its first bytes).
"""
from __future__ import annotations

import json
import threading
import warnings
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from advisor.errors import LogError, LogWarning, display_path
from advisor.ingest import reader
from advisor.ingest import summary as _summary
from advisor.ingest.frames import rates_columns
from advisor.ingest.parse import Parsed, Piece, decode_line, parse_piece
from advisor.ingest.reader import MAX_LINE_BYTES, MAX_LOG_BYTES, MAX_LOG_LINES, read_chunks
from advisor.ingest.schema import KNOWN_EVENTS, RunHeader, parse_header, unknown_fields
from advisor.ingest.summary import Summary, is_summary, read_summary

FIELD_PROBE_LINES = 64       # lines of each piece decoded to find unknown fields
PIECE_BYTES = 16 << 20       # whole lines parsed at once (pyarrow's threads share its 1 MiB blocks)
PARSE_THREADS = 2            # pieces parsed at once (one's Python-side work overlaps another's Arrow read)


def _whole_chunks(n_bytes: int, chunk: int) -> int:
    return -(-n_bytes // chunk) * chunk


@dataclass(frozen=True)
class PieceGeometry:
    """Where a log's pieces are cut: piece ``j`` (from 0) ends at the last newline before
    ``limit(j)`` bytes of the (decompressed) file, whole chunks read. The first piece waits until
    a gzip bomb would have shown (its ratio is judged once ``RATIO_CHECK_BYTES`` are out, which
    with the defaults is the other pieces' length): a bomb is refused as a bomb, not for its
    first line."""

    first_bytes: int
    step_bytes: int

    @classmethod
    def now(cls) -> "PieceGeometry":
        """From the module constants as they are now (tests set small ones); in whole chunks, since
        a cut comes after a chunk's read."""
        chunk = reader.CHUNK_BYTES
        return cls(_whole_chunks(max(PIECE_BYTES, reader.RATIO_CHECK_BYTES), chunk),
                   _whole_chunks(PIECE_BYTES, chunk))

    def limit(self, j: int) -> int:
        return self.first_bytes + j * self.step_bytes

    def cuts(self, size: int) -> int:
        """The cuts in a file of ``size`` bytes (its pieces are one more)."""
        return 0 if size < self.first_bytes else (size - self.first_bytes) // self.step_bytes + 1

# Warnings of a log read ahead (`advisor.ingest.load.read_ahead`) are held, and given where
# `load_logs` takes it
_notes = threading.local()


@contextmanager
def warnings_held(sink: list[Warning]) -> Iterator[None]:
    """The warnings of the logs read in this thread inside the block go to ``sink``, not out."""
    before = getattr(_notes, "sink", None)
    _notes.sink = sink
    try:
        yield
    finally:
        _notes.sink = before


def _warn(w: Warning, stacklevel: int = 7) -> None:
    sink = getattr(_notes, "sink", None)
    if sink is not None:
        sink.append(w)
    else:
        # _warn < _Body.cut_tail < _last_pieces < _pieces < _fold < summarize_log < its caller
        warnings.warn(w, stacklevel=stacklevel)


class _Body:
    """What reading one log has found so far: its header, the file's summary (the header's, then
    each piece's folded in), the newlines consumed before the current piece, and whether anything
    but whitespace came. ``tail_note``: give the warning of a cut last line (False: a piece read
    alone, whose line numbers are its own, only records the bytes skipped, ``tail_skipped``)."""

    def __init__(self, spath: str, sample_rows: int, *, tail_note: bool = True, starts_file: bool = True):
        self.spath = spath
        self.sample_rows = sample_rows
        self.summ: Summary | None = None
        self.header: RunHeader | None = None
        self.header_obj: dict[str, Any] | None = None
        self.lines_done = 0            # newlines consumed before the current piece
        self.seen_text = False         # anything but whitespace so far
        self.tail_note = tail_note
        self.tail_skipped = 0          # bytes of a cut last line skipped (when not warned of here)
        self.starts_file = starts_file   # False: a piece read alone, past the file's first

    def read_header(self, path: Path, max_line_bytes: int) -> None:
        """The header from the start of the file (for a piece read alone past the first); the
        line count is left at 0 (the piece's own)."""
        head, nl = reader.read_span(path, 0, max_line_bytes + 4, max_line_bytes)
        end = int(nl[-1]) + 1 if len(nl) else 0
        self._header(head, end)
        if self.header is None:
            raise LogError(self.spath, None, "has no 'run' header on its first line")
        self.seen_text = True

    def piece_summary(self, fields: dict[str, int]) -> Summary:
        """A new summary for one piece, with the unknown fields found in it."""
        summ = Summary(self.header_obj, self.header, self.spath, sample_rows=self.sample_rows)
        summ.add_unknown_fields(fields)
        return summ

    def take(self, buf: bytes, end: int, nl: np.ndarray) -> "_Taken | None":
        """The body lines of ``buf[:end]`` (whole lines, newlines at ``nl``); reads the header first."""
        pos = 0
        if self.header is None:
            pos, lineno = self._header(buf, end)
            if self.header is None:
                self.lines_done += len(nl)
                return None
            body_first = lineno + 1
        else:
            body_first = self.lines_done + 1
        self.lines_done += len(nl)
        if pos >= end:
            return None
        if not self.seen_text and not buf[pos:end].isspace():
            self.seen_text = True
        body_nl = nl[np.searchsorted(nl, pos):] - pos if pos else nl
        return _Taken(Piece(buf=buf, start=pos, end=end, nl=body_nl, first_line=body_first),
                      _count_fields(buf, pos, end, body_nl))

    def _header(self, buf: bytes, end: int) -> tuple[int, int]:
        """Read the header from the first non-blank line of ``buf[:end]``, if there is one (then
        the summary starts); the offset past the lines read, and the header's line number."""
        pos = 0
        if not self.lines_done and buf.startswith(b"\xef\xbb\xbf"):   # a UTF-8 byte-order mark
            pos = 3
        lineno = self.lines_done + 1
        while pos < end:
            cut = buf.find(b"\n", pos, end)
            raw = buf[pos:cut]
            pos = cut + 1
            if raw.strip():
                self.seen_text = True
                obj = decode_line(raw, self.spath, lineno)
                self.header = parse_header(obj, self.spath, lineno)
                self.header_obj = obj
                self.summ = Summary(obj, self.header, self.spath, sample_rows=self.sample_rows)
                self.summ.add_unknown_fields({f"run.{name}": 1 for name in unknown_fields(obj)})
                break
            lineno += 1
        return pos, lineno

    def cut_tail(self, n_bytes: int) -> None:
        """The last line, ``n_bytes`` long, is incomplete: skipped (and warned of, where known)."""
        if self.tail_note:
            _warn(tail_warning(self.spath, self.lines_done + 1, n_bytes))
        else:
            self.tail_skipped = n_bytes


@dataclass(frozen=True)
class _Taken:
    """A piece of whole body lines, and the unknown fields found on its first lines."""

    piece: Piece
    fields: dict[str, int]


def tail_warning(spath: str, line: int, n_bytes: int) -> LogWarning:
    """The warning of a log whose last line, ``line``, was cut mid-write and skipped."""
    return LogWarning(f"{display_path(spath)}:{line}: last line is incomplete (a log still being written?); "
                      f"skipped {n_bytes} bytes")


def _count_fields(buf: bytes, start: int, end: int, nl: np.ndarray) -> dict[str, int]:
    """Unknown fields (`schema.unknown_fields`) of one piece: found on its first
    ``FIELD_PROBE_LINES`` lines, then counted as ``"name":`` over its bytes (no decode per line).
    Per piece, so that a piece read alone counts as it does here."""
    lines, lo = [], start
    for k in range(min(FIELD_PROBE_LINES, len(nl))):
        hi = start + int(nl[k])
        lines.append(buf[lo:hi])
        lo = hi + 1
    try:    # the probe lines as one JSON array: one decode, not one a line (many small rank files)
        objs = json.loads(b"[" + b",".join(lines) + b"]")
        if len(objs) != len(lines):
            raise ValueError("a line held more than one value")
    except (ValueError, UnicodeDecodeError, RecursionError):
        objs = [_decoded(raw) for raw in lines]     # (a bad line: the parse names it)
    fields: set[tuple[str, str]] = set()
    for shape in {(o.get("ev"), tuple(o)) for o in objs if isinstance(o, dict) and isinstance(o.get("ev"), str)}:
        fields.update((shape[0], name) for name in unknown_fields(dict.fromkeys(shape[1]) | {"ev": shape[0]}))
    return {f"{ev}.{name}": max(1, buf.count(json.dumps(name, ensure_ascii=False).encode() + b":", start, end))
            for ev, name in sorted(fields)}


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _joined(carry: bytes, pending: list[tuple[bytes, np.ndarray]]) -> tuple[bytes, np.ndarray]:
    """The bytes of ``carry`` and the ``pending`` chunks as one buffer, and its newlines."""
    buf = b"".join([carry, *(c for c, _ in pending)])
    offsets = np.cumsum([len(carry)] + [len(c) for c, _ in pending[:-1]])
    return buf, np.concatenate([n + o for (_, n), o in zip(pending, offsets)] or [np.empty(0, np.int64)])


def _pieces(body: _Body, chunks: Iterator[tuple[bytes, np.ndarray]]) -> Iterator[_Taken]:
    """The body in pieces of whole lines, cut where `PieceGeometry` says, as the bytes arrive."""
    geometry = PieceGeometry.now()
    carry = b""               # the unfinished line after the last newline
    pending: list[tuple[bytes, np.ndarray]] = []
    read_to, j = 0, 0         # bytes read; the piece being gathered
    for chunk, nl in chunks:
        if not body.seen_text and chunk.strip():
            body.seen_text = True
        pending.append((chunk, nl))
        read_to += len(chunk)
        if read_to < geometry.limit(j):
            continue
        while geometry.limit(j) <= read_to:
            j += 1
        buf, nls = _joined(carry, pending)
        pending = []
        if not len(nls):
            carry = buf
            continue
        cut = int(nls[-1])
        carry = buf[cut + 1:]
        taken = body.take(buf, cut + 1, nls)
        if taken is not None:
            yield taken
    buf, nls = _joined(carry, pending)
    pending = []              # (the chunks are in ``buf`` now)
    yield from _last_pieces(body, buf, nls)


def _last_pieces(body: _Body, buf: bytes, nls: np.ndarray) -> Iterator[_Taken]:
    """The pieces of what is left at the end of the file: its whole lines, and the last line if
    it is complete. A live log may end mid-line: only whole lines are kept, unless the tail is
    itself complete JSON (then it is a whole line, and gets every check)."""
    spath = body.spath
    cut = int(nls[-1]) if len(nls) else -1
    tail = buf[cut + 1:]
    if cut >= 0:
        taken = body.take(buf, cut + 1, nls)
        if taken is not None:
            yield taken
    if not body.seen_text:
        raise LogError(spath, None, "is empty: a log starts with a 'run' header line")
    if not tail:
        return
    try:
        json.loads(tail)
        complete = True
    except (ValueError, UnicodeDecodeError, RecursionError):
        complete = False
    if complete:
        taken = body.take(tail + b"\n", len(tail) + 1, np.array([len(tail)]))
        if taken is not None:
            yield taken
    elif tail.isspace():
        pass
    elif cut < 0 and body.lines_done == 0 and body.starts_file:
        # not one whole line (yet): not "empty", nor corrupt if still written
        raise LogError(spath, None, f"holds no complete line yet ({len(tail)} bytes and no newline; "
                                    f"a log still being written, or CR-only line ends?)")
    else:
        body.cut_tail(len(tail))


def _add_parsed(summ: Summary, p: Parsed, header: RunHeader) -> None:
    """Fold one parsed piece into the summary (then the piece's columns can go)."""
    if len(p.step_rows):
        summ.add_steps(p.step, np.asarray(p.step["role"]))
    if len(p.sync.get("t", ())):
        summ.add_syncs(p.sync)
    if p.rates.num_rows:
        summ.add_rates(rates_columns(p.rates, header))
    n_known = len(KNOWN_EVENTS)
    if (p.ev >= n_known).any():
        codes, counts = np.unique(p.ev[p.ev >= n_known], return_counts=True)
        summ.add_unknown({p.names[int(c)]: int(k) for c, k in zip(codes, counts)})
    if p.end_obj is not None:
        summ.set_end(p.end_obj, by_time=False)


def _fold_piece(body: _Body, taken: _Taken, parsed: Parsed) -> None:
    """One parsed piece into a summary of its own, folded into the file's (then its columns go)."""
    summ = body.piece_summary(taken.fields)
    _add_parsed(summ, parsed, body.header)
    body.summ.extend(summ)


def _fold(body: _Body, pieces: Iterator[_Taken]) -> None:
    """Parse the pieces and fold them into the body's summary, in order.

    The next ``PARSE_THREADS`` pieces are parsed in worker threads (pyarrow and numpy release the
    GIL) while the oldest is checked and folded here, and the next piece read; pieces fold, and
    errors surface, in order. A log of one piece is parsed here, with no thread (nothing to
    overlap; a thread costs address space, which a capped process may not have).
    """
    from concurrent.futures import Future, ThreadPoolExecutor
    ex: ThreadPoolExecutor | None = None
    first: _Taken | None = None     # the first piece, held until a second shows there is a pipeline
    inflight: deque[tuple[_Taken, Future]] = deque()    # the pieces being parsed, oldest first
    try:
        while True:
            try:
                taken = next(pieces)
            except StopIteration:
                break
            except LogError:
                # a bad line in a piece before the one that could not be read comes first
                if first is not None:
                    parse_piece(first.piece, body.header, body.spath)
                for _, f in inflight:
                    f.result()
                raise
            if ex is None and first is None:
                first = taken
                continue
            if ex is None:
                ex = ThreadPoolExecutor(PARSE_THREADS, thread_name_prefix="dflash-parse")
                inflight.append((first, ex.submit(parse_piece, first.piece, body.header, body.spath)))
                first = None
            inflight.append((taken, ex.submit(parse_piece, taken.piece, body.header, body.spath)))
            while len(inflight) > PARSE_THREADS:
                done, f = inflight.popleft()
                _fold_piece(body, done, f.result())
        if first is not None:
            _fold_piece(body, first, parse_piece(first.piece, body.header, body.spath))
        while inflight:
            done, f = inflight.popleft()
            _fold_piece(body, done, f.result())
    finally:
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)


def _check_usable(summ: Summary, spath: str) -> None:
    """Refuse step logs that no rate can be fitted from (every busy, or every tokens, of a role 0).

    Counted over every step of the log (the summary's exact counts), sampled or not."""
    for role in summ.roles:
        n, busy_pos, tok_pos = (int(x) for x in summ.counts[role])
        if not n:
            continue
        for field, pos, why in (("busy", busy_pos, "no compute time to fit a service rate from"),
                                ("tokens", tok_pos, "no batch size to fit the per-token cost from")):
            if not pos:
                raise LogError(spath, None, f"is 0 in every '{role}' step: {why}", field)


def _finished(summ: Summary | None, n_lines: int, path: Path) -> Summary:
    """The summary of the whole file: its line count and source set, and checked usable."""
    if summ is None:
        raise LogError(str(path), None, "is empty: a log starts with a 'run' header line")
    summ.n_lines = n_lines
    _check_usable(summ, str(path))
    summ.set_source(path)
    return summ


@dataclass(frozen=True)
class PieceRead:
    """Piece ``j`` of a plain log file read on its own (`read_piece`), for its file's fold."""

    head: Summary | None          # piece 0: the file's summary before any piece (its header's); else None
    parts: list[Summary]          # the summaries of its whole lines, in order (a last piece whose
                                  # complete last line has no newline gives two)
    lines: int                    # the newlines it holds (+1 for that last line): its share of the count
    tail_skipped: int = 0         # the last piece: bytes of a cut last line skipped


def read_piece(path: str | Path, j: int, n_cuts: int, geometry: PieceGeometry, max_line_bytes: int,
               sample_rows: int) -> PieceRead:
    """Piece ``j`` of the plain log file ``path`` (of ``n_cuts`` cuts, so ``n_cuts + 1`` pieces),
    read, checked, parsed and folded into its summaries as `summarize_log` folds it. Its line
    numbers are its own (errors and warnings name lines counted from the piece: the caller reads
    the file again to name the file's); the header is read from the file's start."""
    path = Path(path)
    spath = str(path)
    lo = 0 if j == 0 else reader.line_start_before(path, geometry.limit(j - 1), max_line_bytes)
    last = j >= n_cuts
    hi = None if last else reader.line_start_before(path, geometry.limit(j), max_line_bytes)
    buf, nl = reader.read_span(path, lo, hi, max_line_bytes)
    body = _Body(spath, sample_rows, tail_note=False, starts_file=j == 0)
    if j:
        body.read_header(path, max_line_bytes)
    if last:
        taken = list(_last_pieces(body, buf, nl))
    else:
        got = body.take(buf, len(buf), nl) if len(buf) else None
        taken = [got] if got is not None else []
    head = body.summ if j == 0 else None
    if j == 0 and head is None:
        raise LogError(spath, None, "has no 'run' header in its first piece")
    parts = []
    for t in taken:
        summ = body.piece_summary(t.fields)
        _add_parsed(summ, parse_piece(t.piece, body.header, spath), body.header)
        parts.append(summ)
    return PieceRead(head=head, parts=parts, lines=body.lines_done,
                     tail_skipped=body.tail_skipped)


def fold_pieces(path: str | Path, reads: Iterator[PieceRead]) -> Summary:
    """The summary of a file from its pieces read alone (`read_piece`, in order): the very
    summary `summarize_log` gives, and the warning of a cut last line it gives."""
    path = Path(path)
    summ: Summary | None = None
    lines = tail = 0
    for r in reads:
        if summ is None:
            summ = r.head
        for part in r.parts:
            summ.extend(part)
        lines += r.lines
        tail = r.tail_skipped
    if tail:
        _warn(tail_warning(str(path), lines + 1, tail), stacklevel=4)
    return _finished(summ, lines, path)


def summarize_log(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES, max_bytes: int = MAX_LOG_BYTES,
                  max_lines: int = MAX_LOG_LINES, sample_rows: int | None = None) -> Summary:
    """Stream one log (or read a summary file) into a :class:`~advisor.ingest.summary.Summary`.

    Memory: one chunk (``PIECE_BYTES``) of bytes and its columns, plus the summary (at most
    ``sample_rows`` kept steps per role, and the bins); it does not grow with the log. Raises
    :class:`LogError` (file:line: field ...) on unusable input, as `advisor.ingest.load.load_log`.
    """
    path = Path(path)
    sample_rows = sample_rows or _summary.DEFAULT_SAMPLE_ROWS   # read at call time (tests set it)
    if is_summary(path):
        return read_summary(path)
    body = _Body(str(path), sample_rows)
    chunks = read_chunks(path, max_line_bytes, max_bytes=max_bytes, max_lines=max_lines)
    _fold(body, _pieces(body, chunks))
    return _finished(body.summ, body.lines_done, path)
