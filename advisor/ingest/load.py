"""Read rate logs (JSONL or .jsonl.gz) into DataFrames, fast, in bounded memory, with errors that name file, line, field.

Data flow: bytes in chunks (line-length, size, gzip-ratio and UTF-8 guards) -> pieces of whole
lines (``PIECE_BYTES``) -> header via ``json`` -> each piece through pyarrow's multi-threaded JSON
reader with an explicit schema built from the header -> vectorized checks -> the piece's columns
fold into a mergeable :class:`~advisor.ingest.summary.Summary` (exact counts, time-binned sums, a
bounded uniform sample of steps per role) and are dropped -> DataFrames from the summary. No
Python object is made per line on this path, and memory does not grow with the log. When
pyarrow rejects a piece (a non-JSON line, a wrong type, binary garbage) or a vectorized check
fails, the slow exact path in `advisor.ingest.schema` re-reads that piece line by line to name the
first offending line and field; if the slow path finds nothing wrong (a shape pyarrow cannot
unify but the schema allows), its decoded events are used instead, so correctness never depends
on the fast path.

Up to ``sample_rows`` (300k) steps per role the frames hold every step, as read. Past that,
``RunLog.sampled`` is true, ``steps`` is a uniform sample of each larger role's steps, and
``RunLog.totals`` holds the exact time-binned counts and sums that `steady` and `fit` then use
for counts, rates and shares (see `advisor.ingest.summary`). A file written by `dflash-advise
summarize` is read the same way (it is recognised by its first bytes).

Frames (documented columns):
- ``steps``: t, role (category), worker, batch, tokens, seqs, busy, wait, blocked, loss; sorted by t.
- ``syncs``: t, role, workers, dur, bytes; sorted by t.
- ``rates``: t, window, tok_s, eta_s, done, ``bps_<role>``, ``cap_bps_<role>``, ``q_<queue>``
  (mean depth over the queue's workers) and ``qmin_<queue>`` (the emptiest worker's queue).

A last line cut mid-write (a live log) is skipped with a :class:`LogWarning`; unknown events are
counted in ``unknown_events`` and reported, never fatal.
"""
from __future__ import annotations

import codecs
import errno
import gzip
import json
import math
import os
import stat
import threading
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from advisor.ingest.schema import (END_REASONS, KNOWN_EVENTS, MAX_INT, MAX_TIME_S, STEP_NUMBERS, SYNC_NUMBERS, RunHeader, parse_header, validate_event)
from advisor.errors import LogError, LogRefused, LogWarning, display_path
from advisor.ingest import summary as _summary
from advisor.ingest.summary import Summary, Totals, is_summary, read_summary

if TYPE_CHECKING:
    import pandas as pd   # imported where frames are made: reading a log needs only numpy and pyarrow

# Limits where nobody can mean more: a multi-day run of the reference case is ~1M lines, 150 MB.
MAX_LINE_BYTES = 1 << 20    # a longer line is corruption, not a log event
MAX_LOG_BYTES = 1 << 40     # decompressed; memory does not grow with the log (streamed), time does
MAX_LOG_LINES = 10_000_000_000
MAX_GZIP_RATIO = 100.0      # JSONL rate logs compress 5-10x; 100x is a bomb or a file of repeats
RATIO_CHECK_BYTES = 16 << 20  # the ratio is judged only past this much output (tiny files may repeat)
CHUNK_BYTES = 8 << 20
PIECE_BYTES = 16 << 20       # whole lines parsed at once (pyarrow's threads share its 1 MiB blocks)
PARSE_THREADS = 2            # pieces parsed at once (one's Python-side work overlaps another's Arrow read)

STEP_COLUMNS = ("t", "role", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss")
_NUMERIC = ("t", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss",
            "workers", "dur", "bytes", "window", "tok_s", "eta_s", "done")


@dataclass(frozen=True)
class RunLog:
    """One parsed log. See the module docstring for the columns of each frame."""

    path: str
    header: RunHeader
    steps: pd.DataFrame
    syncs: pd.DataFrame
    rates: pd.DataFrame
    end: Mapping[str, Any] | None
    n_lines: int
    unknown_events: Mapping[str, int] = field(default_factory=dict)
    # Large logs (more than ``sample_rows`` steps of a role): ``steps`` is a uniform sample of the
    # log's steps, and ``totals`` holds its exact time-binned counts and sums (advisor.ingest.summary).
    sampled: bool = False
    totals: Totals | None = None
    t_max_s: float | None = None                          # the largest t in the log (None: not known)
    n_steps: Mapping[str, int] | None = None              # every step of each role, sampled or not
    source: str | None = None                             # the file read (to re-read a sample's rows exactly)

    @property
    def has_steps(self) -> bool:
        return len(self.steps) > 0

    def is_sampled(self, role: str) -> bool:
        """This role's steps are a sample of a large log (exact counts and sums are in ``totals``)."""
        return self.totals is not None and role in self.totals.pruned

    @property
    def duration_s(self) -> float:
        ts = [f["t"].max() for f in (self.steps, self.rates, self.syncs) if len(f)]
        if self.end is not None:
            ts.append(float(self.end.get("t", 0.0)))
        if self.t_max_s is not None:
            ts.append(self.t_max_s)
        return float(max(ts)) if ts else 0.0


# Warnings of a log read ahead (`read_ahead`) are held, and given where `load_logs` takes it
_notes = threading.local()


def _warn(w: Warning) -> None:
    sink = getattr(_notes, "sink", None)
    if sink is not None:
        sink.append(w)
    else:
        warnings.warn(w, stacklevel=4)


def _human(n: int) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**30 else f"{n / 2**20:.3g} MiB"


def _refuse_special(st: os.stat_result, path: str) -> None:
    """Refuse anything but a regular file: a FIFO or a device may never end (or never start)."""
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise LogRefused(path, None, "is a directory, not a log file")
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "a special file")
    raise LogRefused(path, None, f"is {kind}, not a regular file; the advisor reads log files only "
                                 f"(a pipe or device may never end): write the log to a file first")


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
    """A binary stream of the log's (decompressed) bytes; refuses what is not a readable regular file.

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
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    return raw, raw


def _read_chunks(path: Path, max_line_bytes: int, *, max_bytes: int = MAX_LOG_BYTES,
                 max_lines: int = MAX_LOG_LINES, max_ratio: float = MAX_GZIP_RATIO) -> Iterator[tuple[bytes, np.ndarray]]:
    """The file's bytes, in chunks of ``CHUNK_BYTES``, each checked before it is given out, with
    the offsets of its newlines (found once here for the line-length check; the reader reuses
    them to count lines and rows, so no later pass scans the bytes for newlines again).

    Refused, naming the limit: a line longer than ``max_line_bytes``; more than ``max_bytes``
    bytes or ``max_lines`` lines (after decompression); a gzip stream that inflates more than
    ``max_ratio`` times once past ``RATIO_CHECK_BYTES`` (a bomb: real logs compress 5-10x);
    bytes that are not UTF-8 (named by line). So a bomb, a device or one giant line fails after
    a bounded read, with bounded memory.
    """
    spath = str(path)
    fh, raw = open_log(path)
    gz = fh is not raw
    started = False
    total = 0
    since_nl = 0  # bytes of the current (unfinished) line
    lines_before = 0
    utf8 = codecs.getincrementaldecoder("utf-8")()

    def too_long(k: int) -> LogError:
        return LogError(spath, lines_before + k + 1,
                        f"line is longer than {max_line_bytes} bytes; not a log event (corrupt file?)")
    try:
        with fh, raw:
            while True:
                chunk = fh.read(CHUNK_BYTES)
                if not chunk:
                    break
                total += len(chunk)
                if total > max_bytes:
                    raise LogRefused(spath, None, f"holds more than {max_bytes} bytes ({_human(max_bytes)})"
                                     f"{' decompressed' if gz else ''}, the limit; no run needs that much for "
                                     f"advice: give the header line and a part of the log")
                if gz and total > RATIO_CHECK_BYTES and total > max_ratio * max(raw.tell(), 1):
                    raise LogRefused(spath, None, f"inflates more than {max_ratio:g} times (to over {_human(total)} "
                                     f"from {_human(raw.tell())}); a rate log compresses about 10x: not a log "
                                     f"(a compression bomb?)")
                if not started and chunk.startswith((b"\xff\xfe", b"\xfe\xff")):
                    raise LogError(spath, 1, "is UTF-16 text; a rate log is UTF-8 (convert it: "
                                             "iconv -f UTF-16 -t UTF-8)")
                pending = utf8.getstate()[0]
                if pending or not chunk.isascii():
                    try:
                        utf8.decode(chunk)
                    except UnicodeDecodeError as e:
                        at = max(e.start - len(pending), 0)
                        raise LogError(spath, lines_before + chunk.count(b"\n", 0, at) + 1,
                                       "is not UTF-8 text (binary data, or another encoding such as latin-1 "
                                       "or UTF-16?)") from None
                arr = np.frombuffer(chunk, dtype=np.uint8)
                nl = np.flatnonzero(arr == 10)
                if len(nl) == 0:
                    since_nl += len(chunk)
                    if since_nl > max_line_bytes:
                        raise too_long(0)
                else:
                    first = since_nl + int(nl[0])
                    gaps = np.diff(nl)
                    inner = int(gaps.max()) - 1 if len(nl) > 1 else 0
                    if max(first, inner) > max_line_bytes:
                        raise too_long(0 if first > max_line_bytes else int(np.argmax(gaps)) + 1)
                    since_nl = len(chunk) - int(nl[-1]) - 1
                    if since_nl > max_line_bytes:
                        raise too_long(len(nl))
                    lines_before += len(nl)
                    if lines_before > max_lines:
                        raise LogRefused(spath, None, f"holds more than {max_lines} lines, the limit; no run needs "
                                         f"that many for advice: give the header line and a part of the log")
                started = True
                yield chunk, nl
    except LogError:
        raise
    except EOFError:    # may still be being written: not refused, so a follower waits
        raise LogError(spath, None, f"ends inside its gzip stream after {total} bytes ({lines_before} lines): "
                                    f"truncated, or still being written") from None
    except (zlib.error, gzip.BadGzipFile) as e:
        raise LogRefused(spath, None, f"is a corrupt gzip stream ({e}) after {total} bytes "
                                      f"({lines_before} lines)") from None
    except OSError as e:
        raise _os_error(e, spath) from None


def _line_numbers(nl: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """1-based line numbers of the given body rows, from the body's newline offsets ``nl`` (the
    body ends with a newline; pyarrow skips zero-length lines, so rows count the others)."""
    starts = np.concatenate(([0], nl[:-1] + 1))
    return np.flatnonzero(nl > starts)[rows] + 1


def _n_rows(nl: np.ndarray) -> int:
    """The rows pyarrow reads from a body with newline offsets ``nl``: its lines less the empty ones."""
    if not len(nl):
        return 0
    return len(nl) - int(nl[0] == 0) - int(np.count_nonzero(np.diff(nl) == 1))


def _decode_line(raw: bytes, path: str, line: int) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LogError(path, line, "is not UTF-8 text (binary data in the log?)") from None
    if text.startswith("\ufeff"):   # a byte-order mark, as some Windows tools write
        text = text[1:]
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        hint = " (NUL bytes: binary data or UTF-16?)" if "\x00" in text else ""
        raise LogError(path, line, f"is not valid JSON ({e.msg} at column {e.colno}){hint}") from None
    except RecursionError:
        raise LogError(path, line, "is not a log event: JSON nested too deeply") from None
    except ValueError as e:   # e.g. an integer of more than 4300 digits
        raise LogError(path, line, f"is not a log event ({str(e).split(';')[0]})") from None


def _arrow_schema(header: RunHeader, names: Sequence[str] | None = None):
    """The Arrow schema of every field the advisor reads from a body line (``names``: only those)."""
    import pyarrow as pa

    f64 = pa.float64()
    role_struct = pa.struct([(r, f64) for r in header.roles])
    q_fields = [(q.name, pa.list_(f64) if q.per_worker else f64) for q in header.queues]
    fields = [("ev", pa.string()), ("role", pa.string()), ("reason", pa.string()), ("msg", pa.string())]
    fields += [(n, f64) for n in _NUMERIC]
    fields += [("bps", role_struct), ("cap_bps", role_struct)]
    if q_fields:
        fields.append(("q", pa.struct(q_fields)))
    if names is not None:
        fields = [f for f in fields if f[0] in names]
    return pa.schema(fields)


# The fast path reads a piece in two passes: every line with the fields of steps and syncs (the
# bulk of a log), then only the rates and end lines (one a minute) with theirs. pyarrow's reader
# pays for every declared field on every line (a null for each absent one, struct and list
# children included): declaring the rates' and end's fields for the step lines too cost a third
# more CPU on a 32-GPU log (0.86 vs 0.57 CPU-s per 64 MB, pyarrow 26, docs/large-logs.md). A field a
# line's event does not read is not checked by `schema.validate_event` either, so leaving it
# undeclared changes no verdict (before, a wrong type there sent the piece to the exact path, which
# accepted it).
# A small piece (a small log) is read in one pass with every field: the second pass pays off
# only on large pieces, and the second call of pyarrow's reader in a process takes a malloc
# arena of its own (64 MB of address space, which a capped process may not have).
TWO_PASS_BYTES = 4 << 20
_BODY_FIELDS = ("ev", "role", "t", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss",
                "workers", "dur", "bytes")
_OTHER_FIELDS = ("ev", "t", "window", "tok_s", "eta_s", "done", "bps", "cap_bps", "q", "reason", "msg")


_RATES_SCALARS = ("t", "window", "tok_s", "eta_s", "done")


def _rates_frame(tab, header: RunHeader) -> pd.DataFrame:
    """The rates frame from an Arrow table of rates events (columns vectorized, no per-row Python)."""
    import pandas as pd

    import pyarrow.compute as pc

    n = tab.num_rows
    out: dict[str, np.ndarray] = {}
    for k in _RATES_SCALARS:
        out[k] = (tab.column(k).to_numpy().astype(np.float64, copy=False) if k in tab.column_names
                  else np.full(n, np.nan))
    for key in ("bps", "cap_bps"):
        col = tab.column(key).combine_chunks() if key in tab.column_names else None
        for i, r in enumerate(header.roles):
            out[f"{key}_{r}"] = (pc.struct_field(col, [i]).to_numpy(zero_copy_only=False).astype(np.float64)
                                 if col is not None else np.full(n, np.nan))
    q = tab.column("q").combine_chunks() if "q" in tab.column_names else None
    for i, spec in enumerate(header.queues):
        if q is None:
            continue
        f = pc.struct_field(q, [i])
        if spec.per_worker:
            flat = pc.list_flatten(f).to_numpy(zero_copy_only=False).astype(np.float64)
            parent = pc.list_parent_indices(f).to_numpy(zero_copy_only=False)
            cnt = np.bincount(parent, minlength=n).astype(float)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.bincount(parent, weights=flat, minlength=n) / cnt
            low = np.full(n, np.inf)
            np.minimum.at(low, parent, flat)
            low[cnt == 0] = np.nan
        else:
            mean = low = f.to_numpy(zero_copy_only=False).astype(np.float64)
        out[f"q_{spec.name}"], out[f"qmin_{spec.name}"] = mean, low
    df = pd.DataFrame(out)
    return df.sort_values("t", kind="stable").reset_index(drop=True) if n else df


def _rates_table(objs: list[Mapping[str, Any]], header: RunHeader):
    """Arrow table of decoded rates events, coerced to the header's queue shapes (slow path)."""
    import pyarrow as pa

    def num(v: Any) -> Any:
        # a JSON integer as the double the fast path reads (Arrow refuses ints past 2**53 as doubles)
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v

    def rates(d: Any) -> Any:
        return {r: num(d.get(r)) for r in header.roles} if isinstance(d, dict) else d

    rows = []
    for o in objs:
        q = {}
        for spec in header.queues:
            v = (o.get("q") or {}).get(spec.name)
            vals = [num(x) for x in (v if isinstance(v, list) else [v]) if x is not None]
            q[spec.name] = vals if spec.per_worker else (float(np.mean(vals)) if vals else None)
        rows.append({**{k: num(o.get(k)) for k in _RATES_SCALARS}, "bps": rates(o.get("bps")),
                     "cap_bps": rates(o.get("cap_bps")), "q": q})
    schema = _arrow_schema(header)
    keep = pa.schema([schema.field(k) for k in (*_RATES_SCALARS, "bps", "cap_bps", "q") if k in schema.names])
    return pa.Table.from_pylist(rows, schema=keep)


@dataclass
class _Parsed:
    """Columns of one log body, split by event type; ``*_rows`` index body rows (for line numbers)."""

    ev: np.ndarray                     # event code per body row: index into ``names``
    names: list[str]
    t: np.ndarray                      # every row's t
    step: dict[str, np.ndarray]        # STEP_COLUMNS, role as codes into header roles (-1: unknown)
    step_rows: np.ndarray
    sync: dict[str, np.ndarray]
    rates: Any                         # Arrow table of the rates events
    end_obj: Mapping[str, Any] | None
    # fast path only: rows that fail checks numpy cannot see. Nulls and NaN literals are both NaN
    # in the numpy columns; ``nan_lit`` marks rows whose optional number fields hold NaN
    # literally, ``t_null`` rows without t, ``bad_reason`` end events with an unknown reason.
    nan_lit: np.ndarray | None = None
    t_null: np.ndarray | None = None
    bad_reason: np.ndarray | None = None


_STEP_NUMERIC = ("t", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss")
_SYNC_NUMERIC = ("t", "workers", "dur", "bytes")


def _steps_frame(cols: Mapping[str, Any], codes: np.ndarray, header: RunHeader) -> pd.DataFrame:
    """The documented ``steps`` frame from columns and role codes, sorted by t."""
    import pandas as pd

    # the columns as they are, one block each (copy=False): consolidating them into one 2-D block
    # copied every row of a sampled log once more
    data: dict[str, Any] = {}
    for c in STEP_COLUMNS:
        if c == "role":
            data[c] = pd.Categorical.from_codes(codes, categories=list(header.roles))
            continue
        v = np.asarray(cols[c])
        if c in ("wait", "blocked") and v.dtype.kind == "f":
            nan = np.isnan(v)
            if nan.any():
                v = np.where(nan, 0.0, v)           # fillna(0.0)
        elif c in ("worker", "tokens") and v.dtype != np.int64:
            # pandas' cast where it is plain (its error on a non-finite value otherwise)
            v = (v.astype(np.int64) if v.dtype.kind == "f" and np.isfinite(v).all()
                 else pd.Series(v).astype(np.int64).to_numpy())
        data[c] = v
    steps = pd.DataFrame(data, copy=False)
    if len(steps) > 1 and (np.diff(steps["t"].to_numpy()) < 0).any():
        steps = steps.sort_values("t", kind="stable").reset_index(drop=True)
    return steps


def _frames(p: _Parsed, header: RunHeader) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    import pandas as pd

    cols = dict(p.step)
    codes = cols.pop("role")
    steps = _steps_frame(cols, codes, header)
    syncs = pd.DataFrame(p.sync)
    if len(syncs):
        syncs = syncs.sort_values("t", kind="stable").reset_index(drop=True)
    return steps, syncs, _rates_frame(p.rates, header)


def _codes(col, names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Integer codes of a string column against ``names`` (unseen values get new codes)."""
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(col).combine_chunks()
    dict_vals = enc.dictionary.to_pylist()
    idx = enc.indices.fill_null(len(dict_vals)).to_numpy(zero_copy_only=False)
    out_names = list(names)
    remap = np.empty(len(dict_vals) + 1, dtype=np.int64)
    for i, v in enumerate(dict_vals):
        if v not in out_names:
            out_names.append(v)
        remap[i] = out_names.index(v)
    remap[-1] = -1                                  # null
    return remap[idx.astype(np.int64)], out_names


def _read_arrow(buf, schema, *, threads: bool = True):
    """pyarrow's JSON reader over a buffer with an explicit schema; None when it refuses the bytes."""
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        return pj.read_json(pa.BufferReader(buf), parse_options=pj.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"),
            read_options=pj.ReadOptions(block_size=1 << 20, use_threads=threads))
    except Exception:   # any refusal (ArrowInvalid, invalid UTF-8, ...): the exact reader names it
        return None


def _fast_parse(piece: "_Piece", header: RunHeader, n_rows: int) -> _Parsed | None:
    """pyarrow path over ``piece``; None when pyarrow refuses it or reads other than ``n_rows``
    rows (two objects on one line, one object over two lines, whitespace-only lines): the slow
    path then decides, and names the line. A piece of ``TWO_PASS_BYTES`` or more is read in two
    passes (see ``_BODY_FIELDS``): the whole piece with the step and sync fields, then its rates
    and end lines with theirs."""
    import pyarrow as pa
    import pyarrow.compute as pc

    body = pa.py_buffer(piece.buf).slice(piece.start, piece.end - piece.start)   # no copy
    two_pass = body.size >= TWO_PASS_BYTES
    table = _read_arrow(body, _arrow_schema(header, _BODY_FIELDS if two_pass else None))
    if table is None or table.num_rows != n_rows:
        return None
    ev, names = _codes(table.column("ev"), KNOWN_EVENTS)
    t = table.column("t").to_numpy().astype(np.float64, copy=False)
    nan_lit = np.zeros(len(ev), dtype=bool)

    def subset(code: int, spec) -> tuple[dict[str, np.ndarray], np.ndarray]:
        mask = ev == code
        rows = np.flatnonzero(mask)
        whole = len(rows) == len(ev)
        cols = {}
        for n, required, _, _ in spec:
            col = table.column(n)
            v = col.to_numpy().astype(np.float64, copy=False)
            if not required and col.null_count < len(col):
                lit = pc.is_nan(col).fill_null(False).to_numpy(zero_copy_only=False)
                nan_lit[mask & lit] = True
            cols[n] = v if whole else v[mask]
        return cols, rows

    step_spec = (*STEP_NUMBERS, ("loss", False, False, None))
    step, step_rows = subset(KNOWN_EVENTS.index("step"), step_spec)
    role = _codes(table.column("role"), list(header.roles))[0]
    step["role"] = role if len(step_rows) == len(ev) else role[step_rows]
    sync, _ = subset(KNOWN_EVENTS.index("sync"), SYNC_NUMBERS)
    other_schema = _arrow_schema(header, _OTHER_FIELDS)
    is_rates, is_end = ev == KNOWN_EVENTS.index("rates"), ev == KNOWN_EVENTS.index("end")
    other_rows = np.flatnonzero(is_rates | is_end)
    if not two_pass:
        others = table.filter(pa.array(is_rates | is_end)).select(other_schema.names)
    elif len(other_rows):
        # the rates and end lines, read again alone with their own fields
        lines = _line_numbers(piece.nl, other_rows)
        others = _read_arrow(pa.py_buffer(b"\n".join([piece.line(int(k)) for k in lines]) + b"\n"), other_schema,
                             threads=False)
        if others is None or others.num_rows != len(other_rows):
            return None
    else:
        others = other_schema.empty_table()
    o_rates = is_rates[other_rows]
    keep = [c for c in ("t", "window", "tok_s", "eta_s", "done", "bps", "cap_bps", "q") if c in others.column_names]
    rates = others.filter(pa.array(o_rates)).select(keep)
    reason = others.column("reason")
    bad_reason = np.zeros(len(ev), dtype=bool)
    bad_reason[other_rows] = ~o_rates & ~pc.is_in(reason, value_set=pa.array(END_REASONS)).to_numpy(
        zero_copy_only=False) & ~reason.is_null().to_numpy(zero_copy_only=False)
    end_tab = others.filter(pa.array(~o_rates)).select(["t", "reason", "msg"])
    end_obj = end_tab.to_pylist()[-1] if end_tab.num_rows else None
    t_null = table.column("t").is_null().to_numpy(zero_copy_only=False)
    return _Parsed(ev=ev, names=names, t=t, step=step, step_rows=step_rows, sync=sync, rates=rates,
                   end_obj=end_obj, nan_lit=nan_lit, t_null=t_null, bad_reason=bad_reason)


def _numbers_ok(cols: Mapping[str, np.ndarray], spec) -> np.ndarray:
    """Vectorized `schema.check_number` over columns: (name, required, integer, maximum) per field.

    NaN stands for an absent value here; NaN literals are caught by ``_Parsed.nan_lit``.
    """
    n = len(next(iter(cols.values()))) if cols else 0
    ok = np.ones(n, dtype=bool)
    with np.errstate(invalid="ignore"):
        for name, required, integer, top in spec:
            v = cols[name]
            ok &= (np.isfinite(v) & (v >= 0)) if required else ~(np.isinf(v) | (v < 0))
            top = MAX_INT if top is None and integer else top
            if top is not None:
                ok &= ~(v > top)
            if integer:
                ok &= ~(np.isfinite(v) & (np.floor(v) != v))
    return ok


def _bad_rows(p: _Parsed, header: RunHeader) -> np.ndarray:
    """Vectorized schema checks, the same as `schema.validate_event`; body rows that violate it."""
    unknown = p.ev >= len(KNOWN_EVENTS)
    with np.errstate(invalid="ignore"):
        t_ok = np.isfinite(p.t) & (p.t >= 0) & (p.t <= MAX_TIME_S)
    # a null ev, a second 'run' header, a bad t (unknown events may omit it), NaN literals, bad end reason
    no_ev = p.ev < 0
    if "" in p.names:
        no_ev |= p.ev == p.names.index("")
    bad = [np.flatnonzero(no_ev | (p.ev == KNOWN_EVENTS.index("run")) | ~(t_ok | (unknown & p.t_null))
                          | p.nan_lit | p.bad_reason)]
    s = p.step
    if len(p.step_rows):
        b = ~_numbers_ok(s, STEP_NUMBERS)
        b |= np.isinf(s["loss"])
        codes = s["role"]
        known = (codes >= 0) & (codes < len(header.roles))
        limit = np.array(list(header.roles.values()), dtype=float)[np.where(known, codes, 0)]
        b |= ~known | (s["worker"] >= limit)
        bad.append(p.step_rows[b])
    sy = KNOWN_EVENTS.index("sync")
    if (p.ev == sy).any():
        bad.append(np.flatnonzero(p.ev == sy)[~_numbers_ok(p.sync, SYNC_NUMBERS)])
    ra = np.flatnonzero(p.ev == KNOWN_EVENTS.index("rates"))
    if len(ra):
        bad.append(ra[_rates_bad(p.rates, header)])
    return np.sort(np.concatenate(bad))


def _rates_bad(tab, header: RunHeader) -> np.ndarray:
    """`schema.validate_event`'s checks of rates events (header roles and queues only), vectorized
    over an Arrow table of them: True where a row fails. A snapshot needs ``bps``; every number in
    it (``window`` up to MAX_TIME_S, ``tok_s``, ``eta_s``, ``done``, each role's ``bps`` and
    ``cap_bps``, each queue depth or per-worker depth) is absent or finite and >= 0; a per-worker
    list holds no null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = tab.num_rows
    bad = np.zeros(n, dtype=bool)
    if not n:
        return bad

    def col(name: str):
        return tab.column(name).combine_chunks() if name in tab.column_names else None

    def out_of_range(arr, top: float | None = None) -> np.ndarray:   # null is absent: fine
        v = arr.fill_null(0.0).to_numpy(zero_copy_only=False)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(v) & (v >= 0)
            if top is not None:
                ok &= v <= top
        return arr.is_valid().to_numpy(zero_copy_only=False) & ~ok

    for name, top in (("window", MAX_TIME_S), ("tok_s", None), ("eta_s", None), ("done", None)):
        c = col(name)
        if c is not None:
            bad |= out_of_range(c, top)
    bps = col("bps")
    bad |= True if bps is None else bps.is_null().to_numpy(zero_copy_only=False)
    for name in ("bps", "cap_bps", "q"):
        c = col(name)
        for i in range(c.type.num_fields if c is not None else 0):
            f = pc.struct_field(c, [i])      # null where the struct is
            if not pa.types.is_list(f.type):
                bad |= out_of_range(f)
                continue
            # per-worker depths: element e belongs to row rows[e] (offsets, not list_parent_indices,
            # which also counts the elements under a null parent)
            offsets = f.offsets.to_numpy(zero_copy_only=False)
            rows = np.repeat(np.arange(n), np.diff(offsets))
            vals = f.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
            elem_bad = ~vals.is_valid().to_numpy(zero_copy_only=False) | out_of_range(vals)
            live = f.is_valid().to_numpy(zero_copy_only=False)[rows]
            bad[rows[elem_bad & live]] = True
    return bad


def _rates_unsure(tab, header: RunHeader) -> np.ndarray:
    """Rates rows the vectorized check cannot decide: a header role null inside a present ``bps``
    or ``cap_bps`` object. Arrow reads an absent role (allowed: the snapshot does not give it) and
    an explicit ``null`` (refused: not a number) alike, so `schema.validate_event` decides these
    rows, one by one (a snapshot that omits a role is rare, and one a minute at most)."""
    import pyarrow.compute as pc

    unsure = np.zeros(tab.num_rows, dtype=bool)
    for key in ("bps", "cap_bps"):
        if key not in tab.column_names or not tab.num_rows:
            continue
        c = tab.column(key).combine_chunks()
        present = c.is_valid().to_numpy(zero_copy_only=False)
        for i in range(c.type.num_fields):
            unsure |= present & pc.struct_field(c, [i]).is_null().to_numpy(zero_copy_only=False)
    return unsure


def _slow_parse(lines: list[bytes], first_body_line: int, header: RunHeader, path: str) -> _Parsed:
    """Line-by-line exact path: raises at the first bad line; else the same columns as _fast_parse."""
    names = list(KNOWN_EVENTS)
    evs: list[int] = []
    ts: list[float] = []
    step: dict[str, list[Any]] = {n: [] for n in (*_STEP_NUMERIC, "role")}
    sync: dict[str, list[Any]] = {n: [] for n in _SYNC_NUMERIC}
    step_rows: list[int] = []
    rates_objs: list[Mapping[str, Any]] = []
    end_obj = None
    roles = list(header.roles)

    def num(v: Any) -> float:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan

    row = 0
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        lineno = first_body_line + i
        obj = _decode_line(raw, path, lineno)
        kind = validate_event(obj, header, path, lineno)
        if kind not in names:
            names.append(kind)
        evs.append(names.index(kind))
        ts.append(num(obj.get("t")))
        if kind == "step":
            step_rows.append(row)
            for n in _STEP_NUMERIC:
                step[n].append(num(obj.get(n)))
            step["role"].append(roles.index(obj["role"]))
        elif kind == "sync":
            for n in _SYNC_NUMERIC:
                sync[n].append(num(obj.get(n)))
        elif kind == "rates":
            rates_objs.append(obj)
        elif kind == "end":
            end_obj = {k: obj.get(k) for k in ("t", "reason", "msg")}   # the fields the fast path keeps
        row += 1
    step_np = {n: np.asarray(v, dtype=np.float64) for n, v in step.items() if n != "role"}
    step_np["role"] = np.asarray(step["role"], dtype=np.int64)
    return _Parsed(ev=np.asarray(evs, dtype=np.int64), names=names, t=np.asarray(ts, dtype=np.float64),
                   step=step_np, step_rows=np.asarray(step_rows, dtype=np.int64),
                   sync={n: np.asarray(v, dtype=np.float64) for n, v in sync.items()},
                   rates=_rates_table(rates_objs, header), end_obj=end_obj)


def _shown(name: str) -> str:
    """An event name from the log as a short printable token (it goes into the report's caveats)."""
    text = display_path(name)
    return text if len(text) <= 40 else text[:37] + "..."


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


@dataclass(frozen=True)
class _Piece:
    """Whole lines of a log body, ``buf[start:end]`` (ending with a newline), parsed as one."""

    buf: bytes
    start: int
    end: int
    nl: np.ndarray       # offsets of its newlines from ``start`` (from the chunk reader)
    first_line: int      # the line number of its first line

    def text(self) -> bytes:
        return self.buf[self.start:self.end]

    def line(self, k: int) -> bytes:
        """Its ``k``-th line (1-based), without the newline."""
        lo = int(self.nl[k - 2]) + 1 if k > 1 else 0
        return self.buf[self.start + lo:self.start + int(self.nl[k - 1])]


def _parse_piece(piece: _Piece, header: RunHeader, spath: str) -> _Parsed:
    """Parse and validate one piece of whole lines: the fast path, and the exact line-by-line
    path to name a bad line or when pyarrow cannot decide."""
    n_rows = _n_rows(piece.nl)
    parsed = _fast_parse(piece, header, n_rows) if n_rows > 0 else None
    if parsed is not None:
        bad = _bad_rows(parsed, header)
        # rows only the exact validator can judge, up to the first bad row: a bad one raises there
        rates_rows = np.flatnonzero(parsed.ev == KNOWN_EVENTS.index("rates"))
        unsure = rates_rows[_rates_unsure(parsed.rates, header)]
        if len(unsure):
            unsure = unsure[unsure < bad[0]] if len(bad) else unsure
            for line in _line_numbers(piece.nl, unsure):
                lineno = piece.first_line + int(line) - 1
                validate_event(_decode_line(piece.line(int(line)), spath, lineno), header, spath, lineno)
        if len(bad):
            line = int(_line_numbers(piece.nl, bad[:1])[0])
            lineno = piece.first_line + line - 1
            validate_event(_decode_line(piece.line(line), spath, lineno), header, spath, lineno)
            parsed = None   # the exact reader sees nothing wrong there: let it decide, line by line
    if parsed is None:
        parsed = _slow_parse(piece.text().split(b"\n"), piece.first_line, header, spath)
    return parsed


def _add_parsed(summ: Summary, p: _Parsed, header: RunHeader) -> None:
    """Fold one parsed piece into the summary (then the piece's columns can go)."""
    if len(p.step_rows):
        summ.add_steps(p.step, np.asarray(p.step["role"]))
    if len(p.sync.get("t", ())):
        summ.add_syncs(p.sync)
    if p.rates.num_rows:
        fr = _rates_frame(p.rates, header)
        summ.add_rates({c: fr[c].to_numpy(np.float64) for c in fr.columns})
    n_known = len(KNOWN_EVENTS)
    if (p.ev >= n_known).any():
        codes, counts = np.unique(p.ev[p.ev >= n_known], return_counts=True)
        summ.add_unknown({p.names[int(c)]: int(k) for c, k in zip(codes, counts)})
    if p.end_obj is not None:
        summ.set_end(p.end_obj, by_time=False)


def summarize_log(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES, max_bytes: int = MAX_LOG_BYTES,
                  max_lines: int = MAX_LOG_LINES, sample_rows: int | None = None) -> Summary:
    """Stream one log (or read a summary file) into a :class:`~advisor.ingest.summary.Summary`.

    Memory: one chunk (``PIECE_BYTES``) of bytes and its columns, plus the summary (at most
    ``sample_rows`` kept steps per role, and the bins); it does not grow with the log. Raises
    :class:`LogError` (file:line: field ...) on unusable input, as :func:`load_log`.
    """
    path = Path(path)
    spath = str(path)
    sample_rows = sample_rows or _summary.DEFAULT_SAMPLE_ROWS   # read at call time (tests set it)
    if is_summary(path):
        return read_summary(path)
    summ: Summary | None = None
    header: RunHeader | None = None
    lines_done = 0            # newlines consumed before the current piece
    seen_text = False         # anything but whitespace so far

    def take(buf: bytes, end: int, nl: np.ndarray) -> _Piece | None:
        """The body lines of ``buf[:end]`` (whole lines, newlines at ``nl``); reads the header first."""
        nonlocal summ, header, lines_done, seen_text
        pos = 0
        if header is None:
            if not lines_done and buf.startswith(b"\xef\xbb\xbf"):   # a UTF-8 byte-order mark
                pos = 3
            lineno = lines_done + 1
            while pos < end:
                cut = buf.find(b"\n", pos, end)
                raw = buf[pos:cut]
                pos = cut + 1
                if raw.strip():
                    seen_text = True
                    obj = _decode_line(raw, spath, lineno)
                    header = parse_header(obj, spath, lineno)
                    summ = Summary(obj, header, spath, sample_rows=sample_rows)
                    break
                lineno += 1
            if header is None:
                lines_done += len(nl)
                return None
            body_first = lineno + 1
        else:
            body_first = lines_done + 1
        lines_done += len(nl)
        if pos >= end:
            return None
        if not seen_text and not buf[pos:end].isspace():
            seen_text = True
        body_nl = nl[np.searchsorted(nl, pos):] - pos if pos else nl
        return _Piece(buf=buf, start=pos, end=end, nl=body_nl, first_line=body_first)

    def pieces() -> Iterator[_Piece]:
        """The body in pieces of about ``PIECE_BYTES`` of whole lines, as the bytes arrive."""
        nonlocal seen_text
        carry = b""               # the unfinished line after the last newline
        pending: list[tuple[bytes, np.ndarray]] = []
        pending_len = 0

        def joined() -> tuple[bytes, np.ndarray]:
            buf = b"".join([carry, *(c for c, _ in pending)])
            offsets = np.cumsum([len(carry)] + [len(c) for c, _ in pending[:-1]])
            return buf, np.concatenate([n + o for (_, n), o in zip(pending, offsets)] or [np.empty(0, np.int64)])
        for chunk, nl in _read_chunks(path, max_line_bytes, max_bytes=max_bytes, max_lines=max_lines):
            if not seen_text and chunk.strip():
                seen_text = True
            pending.append((chunk, nl))
            pending_len += len(chunk)
            # the first piece waits until a gzip bomb would have shown (the ratio is judged past
            # RATIO_CHECK_BYTES): a bomb is refused as a bomb, not for its first line
            if pending_len < (PIECE_BYTES if header is not None else max(PIECE_BYTES, RATIO_CHECK_BYTES + CHUNK_BYTES)):
                continue
            buf, nls = joined()
            pending, pending_len = [], 0
            if not len(nls):
                carry = buf
                continue
            cut = int(nls[-1])
            carry = buf[cut + 1:]
            piece = take(buf, cut + 1, nls)
            if piece is not None:
                yield piece
        buf, nls = joined()
        pending = []
        cut = int(nls[-1]) if len(nls) else -1
        tail = buf[cut + 1:]
        if cut >= 0:
            piece = take(buf, cut + 1, nls)
            if piece is not None:
                yield piece
        if not seen_text:
            raise LogError(spath, None, "is empty: a log starts with a 'run' header line")
        # A live log may end mid-line: keep only whole lines, unless the tail is itself complete
        # JSON (then it is a whole line, and gets every check)
        if tail:
            try:
                json.loads(tail)
                complete = True
            except (ValueError, UnicodeDecodeError, RecursionError):
                complete = False
            if complete:
                piece = take(tail + b"\n", len(tail) + 1, np.array([len(tail)]))
                if piece is not None:
                    yield piece
            elif tail.isspace():
                pass
            elif cut < 0 and lines_done == 0:   # not one whole line (yet): not "empty", nor corrupt if still written
                raise LogError(spath, None, f"holds no complete line yet ({len(tail)} bytes and no newline; "
                                            f"a log still being written, or CR-only line ends?)")
            else:
                _warn(LogWarning(f"{display_path(spath)}:{lines_done + 1}: last line is incomplete (a log "
                                 f"still being written?); skipped {len(tail)} bytes"))

    # the next PARSE_THREADS pieces are parsed in worker threads (pyarrow and numpy release the
    # GIL) while the oldest is checked and folded here, and the next piece read; pieces fold, and
    # errors surface, in order. A log of one piece is parsed here, with no thread (nothing to
    # overlap; a thread costs address space, which a capped process may not have)
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor
    ex: ThreadPoolExecutor | None = None
    first: _Piece | None = None     # the first piece, held until a second shows there is a pipeline
    inflight: deque[Future] = deque()    # the futures of the pieces being parsed, oldest first
    body = pieces()
    try:
        while True:
            try:
                piece = next(body)
            except StopIteration:
                break
            except LogError:
                # a bad line in a piece before the one that could not be read comes first
                if first is not None:
                    _parse_piece(first, header, spath)
                for f in inflight:
                    f.result()
                raise
            if ex is None and first is None:
                first = piece
                continue
            if ex is None:
                ex = ThreadPoolExecutor(PARSE_THREADS, thread_name_prefix="dflash-parse")
                inflight.append(ex.submit(_parse_piece, first, header, spath))
                first = None
            inflight.append(ex.submit(_parse_piece, piece, header, spath))
            while len(inflight) > PARSE_THREADS:
                _add_parsed(summ, inflight[0].result(), header)
                inflight.popleft()
        if first is not None:
            _add_parsed(summ, _parse_piece(first, header, spath), header)
        while inflight:
            _add_parsed(summ, inflight[0].result(), header)
            inflight.popleft()
    finally:
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)
    if summ is None:
        raise LogError(spath, None, "is empty: a log starts with a 'run' header line")
    summ.n_lines = lines_done
    _check_usable(summ, spath)
    return summ


def _warn_unknown(summ: Summary, path: str) -> None:
    unknown = dict(summ.unknown)
    if unknown:
        warnings.warn(LogWarning(f"{display_path(path)}: ignored {sum(unknown.values())} events of unknown type "
                                 f"({', '.join(f'{_shown(k)}: {v}' for k, v in list(unknown.items())[:10])}"
                                 f"{', ...' if len(unknown) > 10 else ''})"), stacklevel=4)


def runlog_from_summary(summ: Summary, path: str, *, warn: bool = True) -> RunLog:
    """The RunLog of a summary: its kept steps (all of them below the sample size), syncs and rates.
    ``warn``: warn of the summary's unknown events (False: the caller did already)."""
    import pandas as pd

    header = summ.header
    cols, codes, _ = summ.steps()
    steps = _steps_frame({f: cols[f] for f in STEP_COLUMNS if f != "role"}, codes, header)
    syncs = pd.DataFrame(summ.syncs())
    if len(syncs) > 1 and (np.diff(syncs["t"].to_numpy()) < 0).any():
        syncs = syncs.sort_values("t", kind="stable").reset_index(drop=True)
    rc = summ.rates_columns()
    if rc:
        rates = pd.DataFrame(rc)
        if len(summ.paths) > 1 and len(rates) > 1 and (np.diff(rates["t"].to_numpy()) < 0).any():
            rates = rates.sort_values("t", kind="stable").reset_index(drop=True)
    else:
        rates = _rates_frame(_rates_table([], header), header)
    unknown = dict(summ.unknown)
    if warn:
        _warn_unknown(summ, path)
    end_obj = summ.end
    if end_obj is not None:
        end_obj = {k: v for k, v in end_obj.items() if v is not None}
    sampled = summ.sampled
    # the path is only ever shown (reports, caveats): make it one printable line
    return RunLog(path=display_path(path), header=header, steps=steps, syncs=syncs, rates=rates, end=end_obj,
                  n_lines=summ.n_lines, unknown_events=unknown, sampled=sampled,
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
    summ = summarize_log(path, max_line_bytes=max_line_bytes, max_bytes=max_bytes, max_lines=max_lines,
                         sample_rows=sample_rows)
    return runlog_from_summary(summ, str(path))


def _run_from_summaries(files: Sequence[str | Path], summaries: Iterable[Summary], path: str) -> RunLog:
    """One run from the summaries of its per-rank ``files`` (in that order), merged as they come:
    headers checked equal (`ranks.check_same_header`, which names the file and field), the run's
    end `ranks`' merged end."""
    from types import SimpleNamespace

    from advisor.ingest.ranks import _merged_end, check_same_header
    from advisor.ingest.summary import merge_all

    seen: list[SimpleNamespace] = []

    def checked(summaries):
        for f, s in zip(files, summaries):
            seen.append(SimpleNamespace(header=s.header, path=display_path(str(f)), end=s.end))
            check_same_header(seen[:1] + seen[-1:])
            yield s
    summ = merge_all(checked(summaries))
    end = _merged_end(seen)
    summ.end = dict(end) if end is not None else None
    summ.paths = [str(f) for f in files]
    return runlog_from_summary(summ, path)


def load_run(files: Sequence[str | Path], path: str, *, workers: int | None = None) -> RunLog:
    """One run from its per-rank files, merged as summaries: exact and in bounded memory.

    The files are read in parallel threads (pyarrow releases the GIL) and their summaries merged
    as they come (advisor.ingest.summary), so memory is that of one summary per thread whatever the
    number and length of the files. Headers must be equal (`ranks.check_same_header`, which
    names the file and field); the run's end is `ranks`' merged end.
    """
    files = list(files)
    if len(files) == 1:
        return load_log(files[0])
    from concurrent.futures import ThreadPoolExecutor
    n = max(1, min(workers or os.cpu_count() or 1, len(files)))
    with ThreadPoolExecutor(n) as ex:
        return _run_from_summaries(files, ex.map(summarize_log, files), path)


def _summary_workers(summ: Summary) -> set[tuple[str, int]]:
    """The (role, worker) pairs of a summary's kept steps: those of its RunLog's steps frame."""
    out: set[tuple[str, int]] = set()
    for r in summ.roles:
        cols, _ = summ.samples[r].compact()
        out.update((r, int(w)) for w in np.unique(cols["worker"]))
    return out


# --- reading ahead (the CLI): the parse of the logs overlaps the import of the advisor's modules

_read_ahead: dict[str, tuple[Summary | None, BaseException | None, list[Warning]]] = {}


def read_ahead(paths: Iterable[str | Path]) -> None:
    """Read the plain log files among ``paths`` now, in order, and hold their summaries for
    `load_logs`, which takes each one instead of reading the file (folders and globs are left
    to it: it reads them in parallel).

    For the CLI, which imports pandas and the advisor's modules in a thread meanwhile (~0.4 s):
    the parse releases the GIL most of the time. What the reading would have raised or warned is
    held too and given where `load_logs` takes the file, so errors still surface in the order of
    the arguments; after an error, the files behind it are not read.
    """
    _read_ahead.clear()
    for p in paths:
        key = str(Path(p))
        if key in _read_ahead or not os.path.isfile(p):
            continue
        notes: list[Warning] = []
        _notes.sink = notes
        try:
            _read_ahead[key] = (summarize_log(p), None, notes)
        except Exception as e:    # given to load_logs, raised where it takes this file
            _read_ahead[key] = (None, e, notes)
            return
        finally:
            _notes.sink = None


def _summary_of(path: Path) -> Summary:
    """The summary of one plain log file: read ahead (`read_ahead`), or read now."""
    held = _read_ahead.pop(str(path), None)
    if held is None:
        return summarize_log(path)
    summ, error, notes = held
    for w in notes:
        warnings.warn(w, stacklevel=3)
    if error is not None:
        raise error
    return summ


def load_logs(paths: Iterable[str | Path]) -> list[RunLog]:
    """Parse several logs (e.g. the same job at different splits).

    A directory or a (quoted) glob is one run written as per-rank files, and so are plain files
    that are evidently ranks of one run; see `advisor.ingest.ranks` for the rules. Each file is read
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
    from advisor.ingest.ranks import expand, group_name, merge, rank_groups

    logs: list[RunLog | None] = []
    held: dict[int, tuple[Path, Summary]] = {}     # plain files, as summaries, by position
    for p in paths:
        files, one_run = expand(p)
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
            logs[g[0]] = _run_from_summaries([f for f, _ in members], (s for _, s in members), name)
        else:
            logs[g[0]] = merge([runlog_from_summary(s, str(f), warn=False) for f, s in members], name)
        dropped.update(g[1:])
    for i in list(held):
        f, summ = held.pop(i)
        logs[i] = runlog_from_summary(summ, str(f), warn=False)
    return [lg for i, lg in enumerate(logs) if i not in dropped]
