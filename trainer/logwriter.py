"""The one writer of a run's JSONL log, and the check of its path before a run starts.

Only the main process writes, one whole line per event (built and validated by
`advisor.records`, the format's one writer), so lines from many workers never tear or interleave
mid-line. NaN and infinities, which JSON cannot carry,
become null.

`open_log` checks the output path before any worker starts and raises `OutputError` (a one-line
reason) when it cannot be a log: its directory is missing, it is a directory or not a regular
file (``/dev/full``, a FIFO), it exists and ``force`` was not given, it cannot be created or
opened (permissions, read-only file system), or its file system has less than MIN_FREE_BYTES free.

Writing: lines are buffered in memory and written with ``os.write`` at least every
FLUSH_EVERY_S seconds (and on close), so a killed run leaves whole lines up to about that point.
A write that fails mid-run (ENOSPC, EFBIG, EIO) never raises into the run: the writer records the
error (`error`), cuts the file back to the end of the last whole line (a failed or short write
may have left part of one), drops further lines, and the run ends with reason ``error``.
`write_last` then tries once more to append the ``end`` line alone, and cuts it off again if
that fails too, so the file is always whole lines.
"""

from __future__ import annotations

import math
import os
import stat
import time

from advisor.records import from_dict

FLUSH_EVERY_S = 1.0
FLUSH_BYTES = 1 << 20
MIN_FREE_BYTES = 1 << 20


class OutputError(Exception):
    """The output path cannot take the log; ``str()`` is ``<path>: <reason>``."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def _line(event: dict) -> bytes:
    """One log line, built and validated by the format's one writer (`advisor.records`)."""
    return from_dict(_clean(event)).to_json_line().encode("utf-8")


def open_log(path: str, force: bool = False) -> LogWriter:
    """A LogWriter on a fresh (or, with ``force``, truncated) regular file at ``path``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(path, (e.strerror or str(e)).lower()) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(path, "is a directory; give a file path")
        for test, kind in _KINDS:
            if test(st.st_mode):
                raise OutputError(path, f"is {kind}, not a regular file; give a file path")
        if not force:
            raise OutputError(path, "exists; give --force to overwrite it")
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise OutputError(
            path, f"directory {parent} does not exist" if not os.path.exists(parent) else f"{parent} is not a directory"
        )
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_TRUNC if force else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        raise OutputError(path, (e.strerror or str(e)).lower()) from None
    writer = LogWriter(fd, path, created=st is None)
    try:
        vfs = os.fstatvfs(fd)
    except OSError:
        return writer
    free = vfs.f_bavail * vfs.f_frsize
    if vfs.f_blocks > 0 and free < MIN_FREE_BYTES:  # pseudo file systems report no blocks at all
        writer.discard()
        raise OutputError(path, f"no space left on device ({free} bytes free)")
    return writer


class LogWriter:
    def __init__(self, fd: int, path: str, created: bool = True):
        self.path = path
        self.created = created  # the run made this file (and may remove it if it never starts)
        self._fd = fd
        self._buf: list[bytes] = []
        self._buf_bytes = 0
        self._whole = 0  # bytes on disk that end with a whole line
        self._last_flush = time.monotonic()
        self.lines = 0  # lines on disk or still buffered
        self.error: OSError | None = None

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def write(self, event: dict) -> None:
        if self.error is not None or self.closed:
            return
        line = _line(event)
        self._buf.append(line)
        self._buf_bytes += len(line)
        self.lines += 1
        now = time.monotonic()
        if self._buf_bytes >= FLUSH_BYTES or now - self._last_flush >= FLUSH_EVERY_S:
            self.flush()
            self._last_flush = now

    def _write_all(self, data: bytes) -> bool:
        """Write ``data`` (whole lines); on failure, cut the file back to its last whole line."""
        done = 0
        try:
            while done < len(data):
                done += os.write(self._fd, data[done:])
        except OSError as e:
            keep = self._whole + data.rfind(b"\n", 0, done) + 1  # rfind -1 -> keep = self._whole
            self.lines -= data.count(b"\n") - data.count(b"\n", 0, done)
            try:
                os.ftruncate(self._fd, keep)
                os.lseek(self._fd, keep, os.SEEK_SET)  # else the next write would leave a hole
            except OSError:
                pass
            self._whole = keep
            if self.error is None:
                self.error = e
            return False
        self._whole += len(data)
        return True

    def flush(self) -> None:
        if not self._buf or self.closed or self.error is not None:
            return
        data = b"".join(self._buf)
        self._buf.clear()
        self._buf_bytes = 0
        self._write_all(data)

    def write_last(self, event: dict) -> bool:
        """Append ``event`` (the ``end`` line) even after a write error; True if it is on disk."""
        if self.closed:
            return False
        if self.error is None:
            self.write(event)
            self.flush()
            return self.error is None
        line = _line(event)
        self.lines += 1
        return self._write_all(line)

    def close(self) -> None:
        if self.closed:
            return
        self.flush()
        try:
            os.close(self._fd)
        except OSError as e:  # e.g. NFS reports a failed write only at close
            self.error = self.error or e
        self._fd = -1

    def discard(self) -> None:
        """Close and, if this run created the file, remove it (the run never started)."""
        self.close()
        if self.created:
            try:
                os.unlink(self.path)
            except OSError:
                pass
