"""Streaming one log file into a :class:`~advisor.ingest.summary.Summary`, in bounded memory.

`summarize_log` is a small pipeline of named steps:

1. `advisor.ingest.reader.read_chunks`: the file's bytes in checked chunks, with their newlines;
2. `_pieces`: the chunks cut into pieces of about ``PIECE_BYTES`` of whole lines; the first
   lines give the header (`_Body.take`), and the end of the file its last, maybe incomplete,
   line (`_last_pieces`);
3. `_fold`: each piece parsed (`advisor.ingest.parse.parse_piece`, ``PARSE_THREADS`` at once in
   worker threads) and folded into the summary in order (`_add_parsed`), its columns then dropped;
4. `_finish`: the line count, and the check that a rate can be fitted at all.

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
from pathlib import Path
from typing import Iterator

import numpy as np

from advisor.errors import LogError, LogWarning, display_path
from advisor.ingest import reader
from advisor.ingest import summary as _summary
from advisor.ingest.frames import rates_frame
from advisor.ingest.parse import Parsed, Piece, decode_line, parse_piece
from advisor.ingest.reader import MAX_LINE_BYTES, MAX_LOG_BYTES, MAX_LOG_LINES, read_chunks
from advisor.ingest.schema import KNOWN_EVENTS, RunHeader, parse_header, unknown_fields
from advisor.ingest.summary import Summary, is_summary, read_summary

FIELD_PROBE_LINES = 64       # lines of each piece decoded to find unknown fields
PIECE_BYTES = 16 << 20       # whole lines parsed at once (pyarrow's threads share its 1 MiB blocks)
PARSE_THREADS = 2            # pieces parsed at once (one's Python-side work overlaps another's Arrow read)

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


def _warn(w: Warning) -> None:
    sink = getattr(_notes, "sink", None)
    if sink is not None:
        sink.append(w)
    else:
        # _warn < _last_pieces < _pieces < _fold < summarize_log < its caller
        warnings.warn(w, stacklevel=6)


class _Body:
    """What reading one log has found so far: its header and summary (from its first line),
    the newlines consumed before the current piece, and whether anything but whitespace came."""

    def __init__(self, spath: str, sample_rows: int):
        self.spath = spath
        self.sample_rows = sample_rows
        self.summ: Summary | None = None
        self.header: RunHeader | None = None
        self.lines_done = 0            # newlines consumed before the current piece
        self.seen_text = False         # anything but whitespace so far
        self.fields: set[tuple[str, str]] = set()   # unknown (event, field) names found so far

    def take(self, buf: bytes, end: int, nl: np.ndarray) -> Piece | None:
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
        self._count_fields(buf, pos, end, body_nl)
        return Piece(buf=buf, start=pos, end=end, nl=body_nl, first_line=body_first)

    def _count_fields(self, buf: bytes, start: int, end: int, nl: np.ndarray) -> None:
        """Unknown fields (`schema.unknown_fields`): found on the first ``FIELD_PROBE_LINES`` lines of
        each piece, then counted as ``"name":`` over the piece's bytes (no decode per line)."""
        lo = start
        for k in range(min(FIELD_PROBE_LINES, len(nl))):
            hi = start + int(nl[k])
            try:
                obj = json.loads(buf[lo:hi])
            except (ValueError, UnicodeDecodeError, RecursionError):
                obj = None        # (the parse names a bad line)
            lo = hi + 1
            for name in unknown_fields(obj):
                self.fields.add((obj["ev"], name))
        if self.fields:
            self.summ.add_unknown_fields({
                f"{ev}.{name}": max(1, buf.count(json.dumps(name, ensure_ascii=False).encode() + b":", start, end))
                for ev, name in self.fields})

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
                self.summ = Summary(obj, self.header, self.spath, sample_rows=self.sample_rows)
                self.summ.add_unknown_fields({f"run.{name}": 1 for name in unknown_fields(obj)})
                break
            lineno += 1
        return pos, lineno


def _joined(carry: bytes, pending: list[tuple[bytes, np.ndarray]]) -> tuple[bytes, np.ndarray]:
    """The bytes of ``carry`` and the ``pending`` chunks as one buffer, and its newlines."""
    buf = b"".join([carry, *(c for c, _ in pending)])
    offsets = np.cumsum([len(carry)] + [len(c) for c, _ in pending[:-1]])
    return buf, np.concatenate([n + o for (_, n), o in zip(pending, offsets)] or [np.empty(0, np.int64)])


def _pieces(body: _Body, chunks: Iterator[tuple[bytes, np.ndarray]]) -> Iterator[Piece]:
    """The body in pieces of about ``PIECE_BYTES`` of whole lines, as the bytes arrive."""
    carry = b""               # the unfinished line after the last newline
    pending: list[tuple[bytes, np.ndarray]] = []
    pending_len = 0
    for chunk, nl in chunks:
        if not body.seen_text and chunk.strip():
            body.seen_text = True
        pending.append((chunk, nl))
        pending_len += len(chunk)
        # the first piece waits until a gzip bomb would have shown (the ratio is judged past
        # RATIO_CHECK_BYTES): a bomb is refused as a bomb, not for its first line
        if pending_len < (PIECE_BYTES if body.header is not None
                          else max(PIECE_BYTES, reader.RATIO_CHECK_BYTES + reader.CHUNK_BYTES)):
            continue
        buf, nls = _joined(carry, pending)
        pending, pending_len = [], 0
        if not len(nls):
            carry = buf
            continue
        cut = int(nls[-1])
        carry = buf[cut + 1:]
        piece = body.take(buf, cut + 1, nls)
        if piece is not None:
            yield piece
    buf, nls = _joined(carry, pending)
    pending = []              # (the chunks are in ``buf`` now)
    yield from _last_pieces(body, buf, nls)


def _last_pieces(body: _Body, buf: bytes, nls: np.ndarray) -> Iterator[Piece]:
    """The pieces of what is left at the end of the file: its whole lines, and the last line if
    it is complete. A live log may end mid-line: only whole lines are kept, unless the tail is
    itself complete JSON (then it is a whole line, and gets every check)."""
    spath = body.spath
    cut = int(nls[-1]) if len(nls) else -1
    tail = buf[cut + 1:]
    if cut >= 0:
        piece = body.take(buf, cut + 1, nls)
        if piece is not None:
            yield piece
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
        piece = body.take(tail + b"\n", len(tail) + 1, np.array([len(tail)]))
        if piece is not None:
            yield piece
    elif tail.isspace():
        pass
    elif cut < 0 and body.lines_done == 0:   # not one whole line (yet): not "empty", nor corrupt if still written
        raise LogError(spath, None, f"holds no complete line yet ({len(tail)} bytes and no newline; "
                                    f"a log still being written, or CR-only line ends?)")
    else:
        _warn(LogWarning(f"{display_path(spath)}:{body.lines_done + 1}: last line is incomplete (a log "
                         f"still being written?); skipped {len(tail)} bytes"))


def _add_parsed(summ: Summary, p: Parsed, header: RunHeader) -> None:
    """Fold one parsed piece into the summary (then the piece's columns can go)."""
    if len(p.step_rows):
        summ.add_steps(p.step, np.asarray(p.step["role"]))
    if len(p.sync.get("t", ())):
        summ.add_syncs(p.sync)
    if p.rates.num_rows:
        fr = rates_frame(p.rates, header)
        summ.add_rates({c: fr[c].to_numpy(np.float64) for c in fr.columns})
    n_known = len(KNOWN_EVENTS)
    if (p.ev >= n_known).any():
        codes, counts = np.unique(p.ev[p.ev >= n_known], return_counts=True)
        summ.add_unknown({p.names[int(c)]: int(k) for c, k in zip(codes, counts)})
    if p.end_obj is not None:
        summ.set_end(p.end_obj, by_time=False)


def _fold(body: _Body, pieces: Iterator[Piece]) -> None:
    """Parse the pieces and fold them into the body's summary, in order.

    The next ``PARSE_THREADS`` pieces are parsed in worker threads (pyarrow and numpy release the
    GIL) while the oldest is checked and folded here, and the next piece read; pieces fold, and
    errors surface, in order. A log of one piece is parsed here, with no thread (nothing to
    overlap; a thread costs address space, which a capped process may not have).
    """
    from concurrent.futures import Future, ThreadPoolExecutor
    ex: ThreadPoolExecutor | None = None
    first: Piece | None = None     # the first piece, held until a second shows there is a pipeline
    inflight: deque[Future] = deque()    # the futures of the pieces being parsed, oldest first
    try:
        while True:
            try:
                piece = next(pieces)
            except StopIteration:
                break
            except LogError:
                # a bad line in a piece before the one that could not be read comes first
                if first is not None:
                    parse_piece(first, body.header, body.spath)
                for f in inflight:
                    f.result()
                raise
            if ex is None and first is None:
                first = piece
                continue
            if ex is None:
                ex = ThreadPoolExecutor(PARSE_THREADS, thread_name_prefix="dflash-parse")
                inflight.append(ex.submit(parse_piece, first, body.header, body.spath))
                first = None
            inflight.append(ex.submit(parse_piece, piece, body.header, body.spath))
            while len(inflight) > PARSE_THREADS:
                _add_parsed(body.summ, inflight[0].result(), body.header)
                inflight.popleft()
        if first is not None:
            _add_parsed(body.summ, parse_piece(first, body.header, body.spath), body.header)
        while inflight:
            _add_parsed(body.summ, inflight[0].result(), body.header)
            inflight.popleft()
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


def _finish(body: _Body) -> Summary:
    """The summary of the whole file: its line count set, and checked usable."""
    summ = body.summ
    if summ is None:
        raise LogError(body.spath, None, "is empty: a log starts with a 'run' header line")
    summ.n_lines = body.lines_done
    _check_usable(summ, body.spath)
    return summ


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
    summ = _finish(body)
    summ.set_source(path)
    return summ
