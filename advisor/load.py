"""Read rate logs (JSONL or .jsonl.gz) into DataFrames, fast, with errors that name file, line, field.

Data flow: bytes -> (line-length guard) -> header via ``json`` -> the whole body through pyarrow's
multi-threaded JSON reader with an explicit schema built from the header -> vectorized checks
-> DataFrames. No Python object is made per line on this path. When pyarrow rejects the body
(a non-JSON line, a wrong type, binary garbage) or a vectorized check fails, the slow exact
path in `advisor.schema` re-reads line by line to name the first offending line and field; if
the slow path finds nothing wrong (a shape pyarrow cannot unify but the schema allows), its
decoded events are used instead, so correctness never depends on the fast path.

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
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .schema import (END_REASONS, KNOWN_EVENTS, MAX_INT, MAX_TIME_S, STEP_NUMBERS, SYNC_NUMBERS, LogError,
                     LogRefused, LogWarning, RunHeader, display_path, parse_header, validate_event)

# Limits where nobody can mean more: a multi-day run of the reference case is ~1M lines, 150 MB.
MAX_LINE_BYTES = 1 << 20    # a longer line is corruption, not a log event
MAX_LOG_BYTES = 1 << 30     # decompressed; loading peaks at ~6x the log's size in memory (measured)
MAX_LOG_LINES = 10_000_000
MAX_GZIP_RATIO = 100.0      # JSONL rate logs compress 5-10x; 100x is a bomb or a file of repeats
RATIO_CHECK_BYTES = 16 << 20  # the ratio is judged only past this much output (tiny files may repeat)
CHUNK_BYTES = 8 << 20

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

    @property
    def has_steps(self) -> bool:
        return len(self.steps) > 0

    @property
    def duration_s(self) -> float:
        ts = [f["t"].max() for f in (self.steps, self.rates, self.syncs) if len(f)]
        if self.end is not None:
            ts.append(float(self.end.get("t", 0.0)))
        return float(max(ts)) if ts else 0.0


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


@dataclass
class _Raw:
    """A log's bytes and what the reader counted on the way."""

    data: bytes
    n_newlines: int
    n_empty: int          # zero-length lines (pyarrow skips them; the row check needs their number)


def _read_bytes(path: Path, max_line_bytes: int, *, max_bytes: int = MAX_LOG_BYTES,
                max_lines: int = MAX_LOG_LINES, max_ratio: float = MAX_GZIP_RATIO) -> _Raw:
    """The file's bytes, read in chunks and refused as soon as a limit is crossed.

    Refused, naming the limit: a line longer than ``max_line_bytes``; more than ``max_bytes``
    bytes or ``max_lines`` lines (after decompression); a gzip stream that inflates more than
    ``max_ratio`` times once past ``RATIO_CHECK_BYTES`` (a bomb: real logs compress 5-10x);
    bytes that are not UTF-8 (named by line). So a bomb, a device or one giant line fails after
    a bounded read, with bounded memory.
    """
    spath = str(path)
    fh, raw = open_log(path)
    gz = fh is not raw
    parts: list[bytes] = []
    total = 0
    since_nl = 0  # bytes of the current (unfinished) line
    lines_before = 0
    n_empty = 0
    prev_nl = True  # the file start counts as just after a newline
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
                if not parts and chunk.startswith((b"\xff\xfe", b"\xfe\xff")):
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
                    prev_nl = False
                else:
                    first = since_nl + int(nl[0])
                    gaps = np.diff(nl)
                    inner = int(gaps.max()) - 1 if len(nl) > 1 else 0
                    if max(first, inner) > max_line_bytes:
                        raise too_long(0 if first > max_line_bytes else int(np.argmax(gaps)) + 1)
                    since_nl = len(chunk) - int(nl[-1]) - 1
                    if since_nl > max_line_bytes:
                        raise too_long(len(nl))
                    n_empty += int(np.count_nonzero(gaps == 1)) + int(nl[0] == 0 and prev_nl)
                    prev_nl = since_nl == 0
                    lines_before += len(nl)
                    if lines_before > max_lines:
                        raise LogRefused(spath, None, f"holds more than {max_lines} lines, the limit; no run needs "
                                         f"that many for advice: give the header line and a part of the log")
                parts.append(chunk)
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
    return _Raw(data=b"".join(parts), n_newlines=lines_before, n_empty=n_empty)


def _line_numbers(data: bytes, rows: np.ndarray, offset: int = 0) -> np.ndarray:
    """1-based line numbers (counted from ``offset``) of the given body rows (pyarrow skips empty lines)."""
    arr = np.frombuffer(data, dtype=np.uint8, offset=offset)
    nl = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(arr)]))
    nonblank = np.flatnonzero(ends > starts)
    return nonblank[rows] + 1


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


def _arrow_schema(header: RunHeader):
    import pyarrow as pa

    f64 = pa.float64()
    role_struct = pa.struct([(r, f64) for r in header.roles])
    q_fields = [(q.name, pa.list_(f64) if q.per_worker else f64) for q in header.queues]
    fields = [("ev", pa.string()), ("role", pa.string()), ("reason", pa.string()), ("msg", pa.string())]
    fields += [(n, f64) for n in _NUMERIC]
    fields += [("bps", role_struct), ("cap_bps", role_struct)]
    if q_fields:
        fields.append(("q", pa.struct(q_fields)))
    return pa.schema(fields)


_RATES_SCALARS = ("t", "window", "tok_s", "eta_s", "done")


def _rates_frame(tab, header: RunHeader) -> pd.DataFrame:
    """The rates frame from an Arrow table of rates events (columns vectorized, no per-row Python)."""
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

    rows = []
    for o in objs:
        q = {}
        for spec in header.queues:
            v = (o.get("q") or {}).get(spec.name)
            vals = [x for x in (v if isinstance(v, list) else [v]) if x is not None]
            q[spec.name] = vals if spec.per_worker else (float(np.mean(vals)) if vals else None)
        rows.append({**{k: o.get(k) for k in _RATES_SCALARS}, "bps": o.get("bps"), "cap_bps": o.get("cap_bps"), "q": q})
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
    rates_objs: list[Mapping[str, Any]]
    end_obj: Mapping[str, Any] | None
    # fast path only: rows that fail checks numpy cannot see. Nulls and NaN literals are both NaN
    # in the numpy columns; ``nan_lit`` marks rows whose optional number fields hold NaN
    # literally, ``t_null`` rows without t, ``bad_reason`` end events with an unknown reason.
    nan_lit: np.ndarray | None = None
    t_null: np.ndarray | None = None
    bad_reason: np.ndarray | None = None


_STEP_NUMERIC = ("t", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss")
_SYNC_NUMERIC = ("t", "workers", "dur", "bytes")


def _frames(p: _Parsed, header: RunHeader) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    cols = dict(p.step)
    codes = cols.pop("role")
    steps = pd.DataFrame(cols)
    steps["role"] = pd.Categorical.from_codes(codes, categories=list(header.roles))
    steps = steps[list(STEP_COLUMNS)]
    for c in ("wait", "blocked"):
        steps[c] = steps[c].fillna(0.0)
    steps["worker"] = steps["worker"].astype(np.int64)
    steps["tokens"] = steps["tokens"].astype(np.int64)
    if len(steps) > 1 and (np.diff(steps["t"].to_numpy()) < 0).any():
        steps = steps.sort_values("t", kind="stable").reset_index(drop=True)
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


def _fast_parse(body, header: RunHeader, n_rows: int) -> _Parsed | None:
    """pyarrow path over ``body`` (a pyarrow buffer); None when pyarrow refuses it or reads other
    than ``n_rows`` rows (two objects on one line, one object over two lines, whitespace-only
    lines): the slow path then decides, and names the line."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    try:
        table = pj.read_json(pa.BufferReader(body), parse_options=pj.ParseOptions(
            explicit_schema=_arrow_schema(header), unexpected_field_behavior="ignore"),
            read_options=pj.ReadOptions(block_size=1 << 20))
    except Exception:   # any refusal (ArrowInvalid, invalid UTF-8, ...): the exact reader names it
        return None
    if table.num_rows != n_rows:
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
    keep = [c for c in ("t", "window", "tok_s", "eta_s", "done", "bps", "cap_bps", "q") if c in table.column_names]
    rates = table.filter(pc.equal(table.column("ev"), "rates")).select(keep)
    # checked in Python: one snapshot a minute or so, and it names the offending field
    rates_objs = rates.to_pylist()
    is_end = ev == KNOWN_EVENTS.index("end")
    reason = table.column("reason")
    bad_reason = is_end & ~pc.is_in(reason, value_set=pa.array(END_REASONS)).to_numpy(zero_copy_only=False) \
        & ~reason.is_null().to_numpy(zero_copy_only=False)
    end_tab = table.filter(pa.array(is_end)).select(["t", "reason", "msg"])
    end_obj = end_tab.to_pylist()[-1] if end_tab.num_rows else None
    t_null = table.column("t").is_null().to_numpy(zero_copy_only=False)
    return _Parsed(ev=ev, names=names, t=t, step=step, step_rows=step_rows, sync=sync, rates=rates,
                   rates_objs=rates_objs, end_obj=end_obj, nan_lit=nan_lit, t_null=t_null, bad_reason=bad_reason)


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
    for row, obj in zip(ra, p.rates_objs):   # few rows: one snapshot a minute or so
        if not _rates_ok(obj):
            bad.append(np.array([row]))
            break
    return np.sort(np.concatenate(bad))


def _finite_ok(v: Any, top: float | None = None) -> bool:
    return v is None or (math.isfinite(v) and v >= 0 and (top is None or v <= top))


def _rates_ok(obj: Mapping[str, Any]) -> bool:
    """`schema.validate_event` for one rates event as pyarrow decoded it (header roles and queues only)."""
    if obj.get("bps") is None or not _finite_ok(obj.get("window"), MAX_TIME_S):
        return False
    vals = [obj.get(k) for k in ("tok_s", "eta_s", "done")]
    for key in ("bps", "cap_bps"):
        vals += list((obj.get(key) or {}).values())
    for v in (obj.get("q") or {}).values():
        if isinstance(v, list) and any(x is None for x in v):
            return False
        vals += v if isinstance(v, list) else [v]
    return all(_finite_ok(v) for v in vals)


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
                   rates=_rates_table(rates_objs, header), rates_objs=rates_objs, end_obj=end_obj)


def _shown(name: str) -> str:
    """An event name from the log as a short printable token (it goes into the report's caveats)."""
    text = display_path(name)
    return text if len(text) <= 40 else text[:37] + "..."


def _header_line(data: bytes, spath: str) -> tuple[bytes, int, int]:
    """The first non-blank line, its line number, and the offset where the body starts."""
    pos = 3 if data.startswith(b"\xef\xbb\xbf") else 0   # a UTF-8 byte-order mark
    lineno = 1
    while True:
        nl = data.find(b"\n", pos)
        raw = data[pos:nl if nl >= 0 else len(data)]
        if raw.strip() or nl < 0:
            break
        pos, lineno = nl + 1, lineno + 1
    if not raw.strip():
        raise LogError(spath, None, "is empty: a log starts with a 'run' header line")
    return raw, lineno, (nl + 1 if nl >= 0 else len(data))


def _check_usable(steps: pd.DataFrame, header: RunHeader, spath: str) -> None:
    """Refuse step logs that no rate can be fitted from (every busy, or every tokens, of a role 0)."""
    if not len(steps):
        return
    codes = steps["role"].cat.codes.to_numpy()
    cols = {f: steps[f].to_numpy() for f in ("busy", "tokens")}
    for i, role in enumerate(header.roles):
        mine = codes == i
        if not mine.any():
            continue
        for field, why in (("busy", "no compute time to fit a service rate from"),
                           ("tokens", "no batch size to fit the per-token cost from")):
            if not (cols[field][mine] > 0).any():
                raise LogError(spath, None, f"is 0 in every '{role}' step: {why}", field)


def load_log(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES, max_bytes: int = MAX_LOG_BYTES,
             max_lines: int = MAX_LOG_LINES) -> RunLog:
    """Parse one rate log. Raises :class:`LogError` (file:line: field ...) on unusable input.

    The limits (module constants by default) bound the time and memory any input can cost.
    """
    path = Path(path)
    spath = str(path)
    raw_log = _read_bytes(path, max_line_bytes, max_bytes=max_bytes, max_lines=max_lines)
    data = raw_log.data
    if not data or data.isspace():
        raise LogError(spath, None, "is empty: a log starts with a 'run' header line")
    # A live log may end mid-line: keep only whole lines, unless the tail is itself complete JSON.
    if not data.endswith(b"\n"):
        cut = data.rfind(b"\n")
        tail = data[cut + 1:]
        try:
            json.loads(tail)
            data = data + b"\n"
        except (ValueError, UnicodeDecodeError, RecursionError):
            if cut < 0:   # not one whole line (yet): not "empty", and not corrupt if it is still being written
                raise LogError(spath, None, f"holds no complete line yet ({len(data)} bytes and no newline; "
                                            f"a log still being written, or CR-only line ends?)") from None
            n_whole = data.count(b"\n", 0, cut + 1)
            warnings.warn(LogWarning(f"{display_path(spath)}:{n_whole + 1}: last line is incomplete (a log still being "
                                     f"written?); skipped {len(tail)} bytes"), stacklevel=2)
            data = data[:cut + 1]
    raw, lineno, start = _header_line(data, spath)
    header = parse_header(_decode_line(raw, spath, lineno), spath, lineno)
    first_body_line = lineno + 1
    n_body = data.count(b"\n", start)
    n_lines = lineno + n_body
    # empty lines in the body: all the reader counted, less those before the header
    empty_before = data[:start].split(b"\n")[:-1].count(b"")
    n_rows = n_body - (raw_log.n_empty - empty_before)

    import pyarrow as pa
    body = pa.py_buffer(data).slice(start)   # no copy
    parsed = _fast_parse(body, header, n_rows) if n_rows > 0 else None
    if parsed is not None:
        bad = _bad_rows(parsed, header)
        if len(bad):
            line = int(_line_numbers(data, bad[:1], start)[0])
            lineno = first_body_line + line - 1
            bad_line = data[start:].split(b"\n", line)[line - 1]
            validate_event(_decode_line(bad_line, spath, lineno), header, spath, lineno)
            parsed = None   # the exact reader sees nothing wrong there: let it decide, line by line
    if parsed is None:
        parsed = _slow_parse(data[start:].split(b"\n"), first_body_line, header, spath)
    n_known = len(KNOWN_EVENTS)
    unknown: dict[str, int] = {}
    if (parsed.ev >= n_known).any():
        codes, counts = np.unique(parsed.ev[parsed.ev >= n_known], return_counts=True)
        unknown = {parsed.names[int(c)]: int(k) for c, k in zip(codes, counts)}
        warnings.warn(LogWarning(f"{display_path(spath)}: ignored {int(counts.sum())} events of unknown type "
                                 f"({', '.join(f'{_shown(k)}: {v}' for k, v in list(unknown.items())[:10])}"
                                 f"{', ...' if len(unknown) > 10 else ''})"), stacklevel=2)
    steps, syncs, rates = _frames(parsed, header)
    _check_usable(steps, header, spath)
    end_obj = parsed.end_obj
    if end_obj is not None:
        end_obj = {k: v for k, v in end_obj.items() if v is not None}
    # the path is only ever shown (reports, caveats): make it one printable line
    return RunLog(path=display_path(spath), header=header, steps=steps, syncs=syncs, rates=rates, end=end_obj,
                  n_lines=n_lines, unknown_events=unknown)


def load_logs(paths: Iterable[str | Path]) -> list[RunLog]:
    """Parse several logs (e.g. the same job at different splits).

    A directory or a (quoted) glob is one run written as per-rank files, and so are plain files
    that are evidently ranks of one run; see `advisor.ranks` for the rules.
    """
    from .ranks import expand, group_ranks, merge

    paths = list(paths)
    if not paths:
        raise LogError("<none>", None, "no log file given")
    logs: list[RunLog] = []
    plain: list[bool] = []
    for p in paths:
        files, one_run = expand(p)
        logs.append(merge([load_log(f) for f in files], str(p)) if one_run else load_log(files[0]))
        plain.append(not one_run)
    return group_ranks(logs, plain)
