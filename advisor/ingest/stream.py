"""Reading one log file into a :class:`~advisor.ingest.summary.Summary`: the fast pass, and the exact one.

`summarize_log` reads a summary file as the summary it is (recognised by its first bytes); a log
first by the fast pass (`advisor.ingest.scan`: polars), and, where that gives up, by the exact
pass here, a small pipeline of named steps:

1. `advisor.ingest.reader.read_chunks`: the file's bytes in checked chunks, with their newlines;
2. `_pieces`: the chunks cut into pieces of whole lines about ``PIECE_BYTES`` long (the first
   waits until a gzip bomb would have shown, ``reader.RATIO_CHECK_BYTES``); the first lines give
   the header (`_Body.take`), and the end of the file its last, maybe incomplete, line
   (`_last_pieces`);
3. `_fold`: each piece decoded and checked line by line (`advisor.ingest.parse.parse_piece`),
   which raises at the first bad line naming file, line and field, folded in order into the
   file's summary;
4. `_check_usable`: the check that a rate can be fitted at all (`summarize_log`, which also
   records the file as the summary's source).

Memory does not grow with the log on either pass. A last line cut mid-write (a live log) is
skipped with a :class:`~advisor.errors.LogWarning`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from advisor.errors import LogError
from advisor.ingest import reader
from advisor.ingest import summary as _summary
from advisor.ingest.parse import decode_line, parse_piece
from advisor.ingest.reader import MAX_LINE_BYTES, MAX_LOG_BYTES, MAX_LOG_LINES, open_log, read_chunks
from advisor.ingest.scan import PROBE_LINES, scan_log, tail_warning
from advisor.ingest.schema import RunHeader, parse_header, unknown_fields
from advisor.ingest.summary import Summary, is_summary, read_summary

PIECE_BYTES = 16 << 20  # whole lines decoded and folded at once


class _Body:
    """What reading one log has found so far: its header, the file's summary (the header's, then
    each piece's folded in), the newlines consumed before the current piece, and whether anything
    but whitespace came."""

    def __init__(self, spath: str, sample_rows: int):
        self.spath = spath
        self.sample_rows = sample_rows
        self.summ: Summary | None = None
        self.header: RunHeader | None = None
        self.header_obj: dict[str, Any] | None = None
        self.lines_done = 0  # newlines consumed before the current piece
        self.seen_text = False  # anything but whitespace so far (`_pieces` sees every chunk)

    def take(self, buf: bytes, end: int, nl: np.ndarray) -> _Taken | None:
        """The body lines of ``buf[:end]`` (whole lines, newlines at ``nl``), the number of the
        first and the unknown fields on them; reads the header first."""
        pos, body_first = 0, self.lines_done + 1
        if self.header is None:
            pos, body_first = self._header(buf, end)  # (no header yet: every line read, pos is end)
        self.lines_done += len(nl)
        if pos >= end:
            return None
        return buf[pos:end], body_first, _count_fields(buf, pos, end)

    def _header(self, buf: bytes, end: int) -> tuple[int, int]:
        """Read the header from the first non-blank line of ``buf[:end]``, if there is one (then
        the summary starts); the offset past the lines read, and the number of the line after
        the header."""
        pos = 0
        if not self.lines_done and buf.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark
            pos = 3
        lineno = self.lines_done + 1
        while pos < end:
            cut = buf.find(b"\n", pos, end)
            raw = buf[pos:cut]
            pos = cut + 1
            if raw.strip():
                obj = decode_line(raw, self.spath, lineno, header=True)
                self.header = parse_header(obj, self.spath, lineno)
                self.header_obj = obj
                self.summ = Summary(obj, self.header, self.spath, sample_rows=self.sample_rows)
                self.summ.add_unknown_fields({f"run.{name}": 1 for name in unknown_fields(obj)})
                break
            lineno += 1
        return pos, lineno + 1

    def cut_tail(self, n_bytes: int) -> None:
        """The last line, ``n_bytes`` long, is incomplete: skipped (and warned of, where known)."""
        warnings.warn(tail_warning(self.spath, self.lines_done + 1, n_bytes), stacklevel=7)


_Taken = tuple[bytes, int, dict[str, int]]  # whole body lines, the first's number, the unknown fields on them


def _count_fields(buf: bytes, start: int, end: int) -> dict[str, int]:
    """Unknown fields (`schema.unknown_fields`) of one piece: found on its first ``PROBE_LINES``
    lines, then counted as ``"name":`` over its bytes (no decode per line)."""
    lines = buf[start:end].split(b"\n", PROBE_LINES)[:PROBE_LINES]
    objs = [_decoded(raw) for raw in lines if raw.strip()]
    fields = {(o["ev"], name) for o in objs if isinstance(o, dict) for name in unknown_fields(o)}
    return {
        f"{ev}.{name}": max(1, buf.count(json.dumps(name, ensure_ascii=False).encode() + b":", start, end))
        for ev, name in sorted(fields)
    }


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
    """The body in pieces of whole lines, about ``PIECE_BYTES`` each, as the bytes arrive."""
    carry = b""  # the unfinished line after the last newline
    pending: list[tuple[bytes, np.ndarray]] = []
    held = 0  # bytes in ``pending``
    limit = max(PIECE_BYTES, reader.RATIO_CHECK_BYTES)
    for chunk, nl in chunks:
        if not body.seen_text and chunk.strip():
            body.seen_text = True
        pending.append((chunk, nl))
        held += len(chunk)
        if held < limit:
            continue
        limit, held = PIECE_BYTES, 0
        buf, nls = _joined(carry, pending)
        pending = []
        if not len(nls):
            carry = buf
            continue
        cut = int(nls[-1])
        carry = buf[cut + 1 :]
        taken = body.take(buf, cut + 1, nls)
        if taken is not None:
            yield taken
    buf, nls = _joined(carry, pending)
    pending = []  # (the chunks are in ``buf`` now)
    yield from _last_pieces(body, buf, nls)


def _last_pieces(body: _Body, buf: bytes, nls: np.ndarray) -> Iterator[_Taken]:
    """The pieces of what is left at the end of the file: its whole lines, and the last line if
    it is complete. A live log may end mid-line: only whole lines are kept, unless the tail is
    itself complete JSON (then it is a whole line, and gets every check)."""
    spath = body.spath
    cut = int(nls[-1]) if len(nls) else -1
    tail = buf[cut + 1 :]
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
    elif cut < 0 and body.lines_done == 0:
        # not one whole line (yet): not "empty", nor corrupt if still written
        raise LogError(
            spath,
            None,
            f"holds no complete line yet ({len(tail)} bytes and no newline; "
            f"a log still being written, or CR-only line ends?)",
        )
    else:
        body.cut_tail(len(tail))


def _fold(body: _Body, pieces: Iterator[_Taken]) -> None:
    """Decode and check the pieces, and fold them into the body's summary, in order."""
    for text, first_line, fields in pieces:
        body.summ.add_unknown_fields(fields)
        parse_piece(text, first_line, body.summ, body.spath)


def _check_usable(summ: Summary, spath: str) -> None:
    """Refuse step logs that no rate can be fitted from (every busy, or every tokens, of a role 0).

    Counted over every step of the log (the summary's exact counts), sampled or not."""
    for role in summ.roles:
        n, busy_pos, tok_pos = (int(x) for x in summ.counts[role])
        if not n:
            continue
        for field, pos, why in (
            ("busy", busy_pos, "no compute time to fit a service rate from"),
            ("tokens", tok_pos, "no batch size to fit the per-token cost from"),
        ):
            if not pos:
                raise LogError(spath, None, f"is 0 in every '{role}' step: {why}", field)


def exact_summary(
    path: str | Path,
    *,
    sample_rows: int,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_bytes: int = MAX_LOG_BYTES,
    max_lines: int = MAX_LOG_LINES,
) -> Summary:
    """The exact pass over a log: every line decoded and checked (see the module docstring)."""
    path = Path(path)
    body = _Body(str(path), sample_rows)
    chunks = read_chunks(path, max_line_bytes, max_bytes=max_bytes, max_lines=max_lines)
    _fold(body, _pieces(body, chunks))
    if body.summ is None:
        raise LogError(str(path), None, "is empty: a log starts with a 'run' header line")
    body.summ.n_lines = body.lines_done
    return body.summ


def summarize_log(
    path: str | Path,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_bytes: int = MAX_LOG_BYTES,
    max_lines: int = MAX_LOG_LINES,
    sample_rows: int | None = None,
) -> Summary:
    """Read one log (or a summary file) into a :class:`~advisor.ingest.summary.Summary`.

    The fast pass first (`advisor.ingest.scan`), the exact pass where it gives up. Memory is
    bounded by a block of rows and the summary (at most ``sample_rows`` kept steps per role, and
    the bins), whatever the log's length.
    """
    path = Path(path)
    sample_rows = sample_rows or _summary.DEFAULT_SAMPLE_ROWS  # read at call time (tests set it)
    if is_summary(path):
        return read_summary(path)
    fh, raw = open_log(path)  # what is not a readable regular file is refused here, by name
    fh.close()
    raw.close()
    summ = None
    if max_line_bytes == MAX_LINE_BYTES:
        summ = scan_log(path, sample_rows=sample_rows, max_bytes=max_bytes, max_lines=max_lines)
    if summ is None:
        summ = exact_summary(
            path, sample_rows=sample_rows, max_line_bytes=max_line_bytes, max_bytes=max_bytes, max_lines=max_lines
        )
    _check_usable(summ, str(path))
    summ.set_source(path)
    return summ
