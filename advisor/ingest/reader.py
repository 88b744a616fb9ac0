"""The byte guards of reading a log: a readable regular file in, checked chunks of bytes out.

`open_log` refuses what is not a readable regular file (a FIFO, a device, a directory) before
opening it, and recognises gzip by its magic bytes. `read_chunks` gives the (decompressed) bytes
in chunks of ``CHUNK_BYTES``, each checked before it is given out: line length, total size and
line count, gzip inflation ratio (a bomb), UTF-16 and UTF-8. So a bomb, a device or one giant
line fails after a bounded read, with bounded memory, and every refusal names the limit. OS
errors become one-line :class:`~advisor.errors.LogError` s naming the file.
"""

from __future__ import annotations

import codecs
import errno
import gzip
import os
import stat
import warnings
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from advisor.errors import LogError, LogRefused, LogWarning, display_path

# Limits where nobody can mean more: a multi-day run of the reference case is ~1M lines, 150 MB.
MAX_LINE_BYTES = 1 << 20  # a longer line is corruption, not a log event
MAX_LOG_BYTES = 1 << 40  # decompressed; memory does not grow with the log (streamed), time does
MAX_LOG_LINES = 10_000_000_000
MAX_GZIP_RATIO = 100.0  # JSONL rate logs compress 5-10x; 100x is a bomb or a file of repeats
RATIO_CHECK_BYTES = 16 << 20  # the ratio is judged once this much is out (tiny files may repeat)
CHUNK_BYTES = 8 << 20
GZIP_MAGIC = b"\x1f\x8b"  # a gzip stream's first bytes, whatever the file's name


def _human(n: int) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**30 else f"{n / 2**20:.3g} MiB"


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _refuse_special(st: os.stat_result, path: str) -> None:
    """Refuse anything but a regular file: a FIFO or a device may never end (or never start)."""
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise LogRefused(path, None, "is a directory, not a log file")
    kind = next((name for test, name in _SPECIAL_KINDS if test(mode)), "a special file")
    raise LogRefused(
        path,
        None,
        f"is {kind}, not a regular file; the advisor reads log files only "
        f"(a pipe or device may never end): write the log to a file first",
    )


def _os_error(e: OSError, path: str) -> LogError:
    if isinstance(e, FileNotFoundError):
        return LogError(path, None, "no such file")
    if isinstance(e, PermissionError):
        return LogRefused(path, None, "cannot be read (permission denied)")
    if isinstance(e, NotADirectoryError):
        return LogRefused(path, None, "no such file (a part of the path is not a folder)")
    if e.errno == errno.ENAMETOOLONG:
        return LogRefused(path, None, "cannot be opened: the file name is too long for the file system")
    return LogRefused(path, None, f"cannot be read ({e.strerror or e})")


def open_log(path: str | Path):
    """The log's (decompressed) bytes as a binary stream, with the file under it; refuses what is not a
    readable regular file.

    ``stat`` comes before ``open`` so that a FIFO is never opened (opening one without a writer
    blocks for ever); the file is then opened non-blocking and checked again with ``fstat`` in
    case it was swapped in between. Gzip is recognised by its magic bytes, whatever the name.
    """
    spath = str(path)
    try:
        _refuse_special(os.stat(path), spath)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise _os_error(e, spath) from None
    try:
        _refuse_special(os.fstat(fd), spath)
        raw = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    try:
        magic = raw.read(2)
        raw.seek(0)
    except OSError as e:
        raw.close()
        raise _os_error(e, spath) from None
    if magic == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    return raw, raw


class _ChunkGuard:
    """The checks of `read_chunks`, chunk after chunk, and what they count: bytes out, lines
    before the current chunk, the bytes of the current (unfinished) line, the UTF-8 state."""

    def __init__(self, spath: str, raw, gz: bool, max_line_bytes: int, max_bytes: int, max_lines: int):
        self.spath, self.raw, self.gz = spath, raw, gz
        self.max_line_bytes, self.max_bytes = max_line_bytes, max_bytes
        self.max_lines = max_lines
        self.started = False
        self.total = 0
        self.since_nl = 0  # bytes of the current (unfinished) line
        self.lines_before = 0
        self.utf8 = codecs.getincrementaldecoder("utf-8")()

    def check(self, chunk: bytes) -> bytes:
        """``chunk``, where it breaks no limit (else raise)."""
        self._size(chunk)
        self._text(chunk)
        self._lines(chunk)
        self.started = True
        return chunk

    def _size(self, chunk: bytes) -> None:
        spath, max_bytes, max_ratio = self.spath, self.max_bytes, MAX_GZIP_RATIO
        self.total += len(chunk)
        total, raw = self.total, self.raw
        if total > max_bytes:
            raise LogRefused(
                spath,
                None,
                f"holds more than {max_bytes} bytes ({_human(max_bytes)})"
                f"{' decompressed' if self.gz else ''}, the limit; no run needs that much for "
                f"advice: give the header line and a part of the log",
            )
        if self.gz and total >= RATIO_CHECK_BYTES and total > max_ratio * max(raw.tell(), 1):
            raise LogRefused(
                spath,
                None,
                f"inflates more than {max_ratio:g} times (to over {_human(total)} "
                f"from {_human(raw.tell())}); a rate log compresses about 10x: not a log "
                f"(a compression bomb?)",
            )

    def _text(self, chunk: bytes) -> None:
        if not self.started and chunk.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise LogError(self.spath, 1, "is UTF-16 text; a rate log is UTF-8 (convert it: iconv -f UTF-16 -t UTF-8)")
        pending = self.utf8.getstate()[0]
        if pending or not chunk.isascii():
            try:
                self.utf8.decode(chunk)
            except UnicodeDecodeError as e:
                at = max(e.start - len(pending), 0)
                raise LogError(
                    self.spath,
                    self.lines_before + chunk.count(b"\n", 0, at) + 1,
                    "is not UTF-8 text (binary data, or another encoding such as latin-1 or UTF-16?)",
                ) from None

    def _too_long(self, k: int) -> LogError:
        return LogError(
            self.spath,
            self.lines_before + k + 1,
            f"line is longer than {self.max_line_bytes} bytes; not a log event (corrupt file?)",
        )

    def _lines(self, chunk: bytes) -> None:
        max_line_bytes = self.max_line_bytes
        arr = np.frombuffer(chunk, dtype=np.uint8)
        nl = np.flatnonzero(arr == 10)
        if len(nl) == 0:
            self.since_nl += len(chunk)
            if self.since_nl > max_line_bytes:
                raise self._too_long(0)
            return
        first = self.since_nl + int(nl[0])
        gaps = np.diff(nl)
        inner = int(gaps.max()) - 1 if len(nl) > 1 else 0
        if max(first, inner) > max_line_bytes:
            raise self._too_long(0 if first > max_line_bytes else int(np.argmax(gaps)) + 1)
        self.since_nl = len(chunk) - int(nl[-1]) - 1
        if self.since_nl > max_line_bytes:
            raise self._too_long(len(nl))
        self.lines_before += len(nl)
        if self.lines_before > self.max_lines:
            raise LogRefused(
                self.spath,
                None,
                f"holds more than {self.max_lines} lines, the limit; no run needs "
                f"that many for advice: give the header line and a part of the log",
            )


def _decoded_after(path: Path, skip: int) -> Iterator[bytes]:
    """The bytes a gzip file decodes to, past the first ``skip``, up to where its data ends
    (no EOFError: a truncated stream gives what it holds). Members follow one another."""
    with open(path, "rb") as raw:
        d = zlib.decompressobj(wbits=31)
        while True:
            data = raw.read(CHUNK_BYTES)
            while data:
                out = d.decompress(data)
                if skip:
                    cut = min(skip, len(out))
                    out, skip = out[cut:], skip - cut
                if out:
                    yield out
                data = d.unused_data
                if d.eof and data:
                    d = zlib.decompressobj(wbits=31)  # the next member
                else:
                    data = b""
            if raw.tell() >= os.fstat(raw.fileno()).st_size:
                break


def _truncated_tail(path: Path, guard: _ChunkGuard) -> Iterator[bytes]:
    """After a gzip stream ended early (a cut file, or one still being written): the bytes that it
    does decode past what was given out, checked as every chunk, and a LogWarning saying how much
    was read and what is kept (the whole lines; a cut last line is skipped where the lines are split)."""
    try:
        for out in _decoded_after(path, guard.total):
            for i in range(0, len(out), CHUNK_BYTES):
                yield guard.check(out[i : i + CHUNK_BYTES])
    except zlib.error as e:
        raise LogRefused(
            guard.spath, None, f"is a corrupt gzip stream ({e}) after {guard.total} bytes ({guard.lines_before} lines)"
        ) from None
    warnings.warn(
        LogWarning(
            f"{display_path(guard.spath)}: ends inside its gzip stream (truncated, or still being written): "
            f"{guard.total} bytes decoded before the cut, {guard.lines_before} whole lines; those lines are kept"
            f"{f', the {guard.since_nl} bytes of the cut line after them are not' if guard.since_nl else ''}"
        ),
        stacklevel=5,
    )


def read_chunks(
    path: Path,
    max_line_bytes: int,
    *,
    max_bytes: int = MAX_LOG_BYTES,
    max_lines: int = MAX_LOG_LINES,
) -> Iterator[bytes]:
    """The file's bytes, in chunks of ``CHUNK_BYTES``, each checked before it is given out.

    Refused, naming the limit: a line longer than ``max_line_bytes``; more than ``max_bytes``
    bytes or ``max_lines`` lines (after decompression); a gzip stream that inflates more than
    ``MAX_GZIP_RATIO`` times once ``RATIO_CHECK_BYTES`` are out (a bomb: real logs compress far less,
    BENCHMARKS.md 20.11); bytes that are not UTF-8 (named by line). So a bomb, a device or one
    giant line fails after a bounded read, with bounded memory.
    """
    spath = str(path)
    fh, raw = open_log(path)
    guard = _ChunkGuard(spath, raw, fh is not raw, max_line_bytes, max_bytes, max_lines)
    try:
        with fh, raw:
            while True:
                chunk = fh.read(CHUNK_BYTES)
                if not chunk:
                    break
                yield guard.check(chunk)
    except EOFError:  # may still be being written: what decodes is kept (a follower reads on)
        yield from _truncated_tail(path, guard)
    except (zlib.error, gzip.BadGzipFile) as e:
        raise LogRefused(
            spath, None, f"is a corrupt gzip stream ({e}) after {guard.total} bytes ({guard.lines_before} lines)"
        ) from None
    except OSError as e:
        raise _os_error(e, spath) from None


def line_ranges(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """``chunks`` regrouped into ranges of whole lines once about ``size`` bytes arrived (the first
    once ``RATIO_CHECK_BYTES`` did too: a gzip bomb shows before any line is read), then the rest:
    the whole lines after the last range and what follows their last newline."""
    held: list[bytes] = []  # what follows the last range's newline, then the chunks since
    n = 0  # bytes of the chunks in ``held``
    limit = max(size, RATIO_CHECK_BYTES)
    for chunk in chunks:
        held.append(chunk)
        n += len(chunk)
        if n < limit:
            continue
        limit, n = size, 0
        buf = b"".join(held)
        cut = buf.rfind(b"\n") + 1
        held = [buf[cut:]]
        if cut:
            yield buf[:cut]
    yield b"".join(held)
