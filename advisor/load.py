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

import gzip
import io
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from .schema import (KNOWN_EVENTS, LogError, LogWarning, RunHeader, parse_header, validate_event)

MAX_LINE_BYTES = 1 << 20  # a longer line is corruption, not a log event
CHUNK_BYTES = 8 << 20

STEP_COLUMNS = ("t", "role", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss")
SYNC_COLUMNS = ("t", "role", "workers", "dur", "bytes")
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


def _read_bytes(path: Path, max_line_bytes: int) -> bytes:
    """The file's bytes, refusing (with the line number) any line longer than ``max_line_bytes``.

    Reads in chunks so that a file that is one giant line fails after ``max_line_bytes``,
    without loading it all.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    parts: list[bytes] = []
    since_nl = 0  # bytes of the current (unfinished) line
    lines_before = 0
    try:
        with opener(path, "rb") as fh:
            while True:
                chunk = fh.read(CHUNK_BYTES)
                if not chunk:
                    break
                arr = np.frombuffer(chunk, dtype=np.uint8)
                nl = np.flatnonzero(arr == 10)
                if len(nl) == 0:
                    since_nl += len(chunk)
                    if since_nl > max_line_bytes:
                        raise LogError(str(path), lines_before + 1,
                                       f"line is longer than {max_line_bytes} bytes; not a log event (corrupt file?)")
                else:
                    first = since_nl + int(nl[0])
                    inner = int(np.diff(nl).max()) - 1 if len(nl) > 1 else 0
                    if max(first, inner) > max_line_bytes:
                        k = 0 if first > max_line_bytes else int(np.argmax(np.diff(nl))) + 1
                        raise LogError(str(path), lines_before + k + 1,
                                       f"line is longer than {max_line_bytes} bytes; not a log event (corrupt file?)")
                    since_nl = len(chunk) - int(nl[-1]) - 1
                    if since_nl > max_line_bytes:
                        raise LogError(str(path), lines_before + len(nl) + 1,
                                       f"line is longer than {max_line_bytes} bytes; not a log event (corrupt file?)")
                    lines_before += len(nl)
                parts.append(chunk)
    except FileNotFoundError:
        raise LogError(str(path), None, "no such file") from None
    except IsADirectoryError:
        raise LogError(str(path), None, "is a directory, not a log file") from None
    except PermissionError:
        raise LogError(str(path), None, "cannot be read (permission denied)") from None
    except (OSError, EOFError) as e:  # gzip: bad header or truncated stream
        raise LogError(str(path), None, f"cannot be read: {e}") from None
    return b"".join(parts)


def _line_numbers(data: bytes, rows: np.ndarray) -> np.ndarray:
    """1-based file line numbers of the given body rows (pyarrow skips blank lines)."""
    arr = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(arr)]))
    nonblank = np.flatnonzero(ends > starts)
    return nonblank[rows] + 1


def _split_lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _decode_line(raw: bytes, path: str, line: int) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LogError(path, line, "is not UTF-8 text (binary data in the log?)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise LogError(path, line, f"is not valid JSON ({e.msg} at column {e.colno})") from None


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


def _rates_record(obj: Mapping[str, Any], header: RunHeader) -> dict[str, float]:
    rec: dict[str, float] = {"t": obj.get("t")}
    for k in ("window", "tok_s", "eta_s", "done"):
        rec[k] = obj.get(k)
    for key in ("bps", "cap_bps"):
        d = obj.get(key) or {}
        for r in header.roles:
            rec[f"{key}_{r}"] = d.get(r)
    q = obj.get("q") or {}
    names = [s.name for s in header.queues] + [n for n in q if n not in {s.name for s in header.queues}]
    for name in names:
        v = q.get(name)
        vals = [x for x in (v if isinstance(v, list) else [v]) if x is not None]
        rec[f"q_{name}"] = float(np.mean(vals)) if vals else None
        rec[f"qmin_{name}"] = float(np.min(vals)) if vals else None
    return rec


def _frames(cols: Mapping[str, np.ndarray], ev: np.ndarray, rates_objs: list[Mapping[str, Any]],
            header: RunHeader) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    is_step = ev == "step"
    steps = pd.DataFrame({c: cols[c][is_step] for c in STEP_COLUMNS})
    for c in ("wait", "blocked"):
        steps[c] = steps[c].fillna(0.0)
    steps["worker"] = steps["worker"].astype(np.int64)
    steps["tokens"] = steps["tokens"].astype(np.int64)
    steps["role"] = pd.Categorical(steps["role"], categories=list(header.roles))
    steps = steps.sort_values("t", kind="stable").reset_index(drop=True)
    is_sync = ev == "sync"
    syncs = pd.DataFrame({c: cols[c][is_sync] for c in SYNC_COLUMNS})
    syncs = syncs.sort_values("t", kind="stable").reset_index(drop=True)
    rates = pd.DataFrame([_rates_record(o, header) for o in rates_objs])
    if len(rates):
        rates = rates.astype(float).sort_values("t", kind="stable").reset_index(drop=True)
    return steps, syncs, rates


def _fast_parse(body: bytes, header: RunHeader):
    """pyarrow path. Returns (columns, ev, rates_objs, end_obj) or None when pyarrow refuses."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    try:
        table = pj.read_json(io.BytesIO(body), parse_options=pj.ParseOptions(
            explicit_schema=_arrow_schema(header), unexpected_field_behavior="ignore"),
            read_options=pj.ReadOptions(block_size=16 << 20))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    ev = table.column("ev").to_numpy(zero_copy_only=False)
    cols: dict[str, np.ndarray] = {}
    for name in _NUMERIC:
        cols[name] = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    cols["role"] = table.column("role").to_numpy(zero_copy_only=False)
    mask_rates = pc.equal(table.column("ev"), "rates")
    rates_tab = table.filter(mask_rates).select([c for c in ("t", "window", "tok_s", "eta_s", "done", "bps",
                                                              "cap_bps", "q") if c in table.column_names])
    rates_objs = rates_tab.to_pylist()
    end_tab = table.filter(pc.equal(table.column("ev"), "end")).select(["t", "reason", "msg"])
    end_obj = end_tab.to_pylist()[-1] if end_tab.num_rows else None
    return cols, ev, rates_objs, end_obj


def _check_columns(cols: Mapping[str, np.ndarray], ev: np.ndarray, header: RunHeader) -> np.ndarray:
    """Vectorized schema checks; returns body row indices that violate it (empty when clean)."""
    bad = np.zeros(len(ev), dtype=bool)
    bad |= pd.isna(ev)
    t = cols["t"]
    bad |= ~np.isfinite(t) | (t < 0)
    st = ev == "step"
    if st.any():
        for name in ("worker", "tokens", "busy"):
            v = cols[name]
            bad |= st & ~(np.isfinite(v) & (v >= 0))
        for name in ("batch", "seqs", "wait", "blocked"):
            v = cols[name]
            bad |= st & ~(np.isnan(v) | (np.isfinite(v) & (v >= 0)))
        for name in ("worker", "tokens"):
            v = cols[name]
            with np.errstate(invalid="ignore"):
                bad |= st & np.isfinite(v) & (np.floor(v) != v)
        loss = cols["loss"]
        bad |= st & np.isinf(loss)
        role = cols["role"]
        limit = np.full(len(ev), -1.0)
        for r, n in header.roles.items():
            limit[role == r] = n
        bad |= st & ((limit < 0) | (cols["worker"] >= limit))
    sy = ev == "sync"
    if sy.any():
        d = cols["dur"]
        bad |= sy & ~(np.isfinite(d) & (d >= 0))
    ra = ev == "rates"
    if ra.any():
        for name in ("window", "tok_s", "eta_s", "done"):
            v = cols[name]
            bad |= ra & ~(np.isnan(v) | (np.isfinite(v) & (v >= 0)))
    return np.flatnonzero(bad)


def _slow_parse(lines: list[bytes], first_body_line: int, header: RunHeader, path: str):
    """Line-by-line exact path: raises at the first bad line; else returns the same as _fast_parse."""
    evs: list[Any] = []
    cols: dict[str, list[Any]] = {n: [] for n in (*_NUMERIC, "role")}
    rates_objs: list[Mapping[str, Any]] = []
    end_obj = None
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        lineno = first_body_line + i
        obj = _decode_line(raw, path, lineno)
        kind = validate_event(obj, header, path, lineno)
        evs.append(kind)
        for n in _NUMERIC:
            v = obj.get(n)
            cols[n].append(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan)
        cols["role"].append(obj.get("role"))
        if kind == "rates":
            rates_objs.append(obj)
        elif kind == "end":
            end_obj = obj
    out = {n: np.asarray(v, dtype=np.float64) for n, v in cols.items() if n != "role"}
    out["role"] = np.asarray(cols["role"], dtype=object)
    return out, np.asarray(evs, dtype=object), rates_objs, end_obj


def load_log(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> RunLog:
    """Parse one rate log. Raises :class:`LogError` (file:line: field ...) on unusable input."""
    path = Path(path)
    spath = str(path)
    data = _read_bytes(path, max_line_bytes)
    if not data.strip():
        raise LogError(spath, None, "is empty: a log starts with a 'run' header line")
    # A live log may end mid-line: keep only whole lines, unless the tail is itself complete JSON.
    if not data.endswith(b"\n"):
        cut = data.rfind(b"\n")
        tail = data[cut + 1:]
        try:
            json.loads(tail)
            data = data + b"\n"
        except (ValueError, UnicodeDecodeError):
            n_whole = data.count(b"\n", 0, cut + 1)
            warnings.warn(LogWarning(f"{spath}:{n_whole + 1}: last line is incomplete (a log still being "
                                     f"written?); skipped {len(tail)} bytes"), stacklevel=2)
            data = data[:cut + 1]
    # Header: first non-blank line.
    pos = 0
    lineno = 1
    while True:
        nl = data.find(b"\n", pos)
        raw = data[pos:nl if nl >= 0 else len(data)]
        if raw.strip() or nl < 0:
            break
        pos, lineno = nl + 1, lineno + 1
    if not raw.strip():
        raise LogError(spath, None, "is empty: a log starts with a 'run' header line")
    header = parse_header(_decode_line(raw, spath, lineno), spath, lineno)
    body = data[nl + 1:] if nl >= 0 else b""
    first_body_line = lineno + 1
    n_lines = lineno + body.count(b"\n")

    parsed = _fast_parse(body, header) if body.strip() else None
    if parsed is not None:
        cols, ev, rates_objs, end_obj = parsed
        bad = _check_columns(cols, ev, header)
        if len(bad):
            line = int(_line_numbers(body, bad[:1])[0])
            raw_bad = body.split(b"\n")[line - 1]
            obj = _decode_line(raw_bad, spath, first_body_line + line - 1)
            validate_event(obj, header, spath, first_body_line + line - 1)
            raise LogError(spath, first_body_line + line - 1, "violates schema v1")
    else:
        cols, ev, rates_objs, end_obj = _slow_parse(_split_lines(body), first_body_line, header, spath)
    known = np.isin(ev, KNOWN_EVENTS)
    unknown: dict[str, int] = {}
    if (~known).any():
        vals, counts = np.unique(ev[~known].astype(str), return_counts=True)
        unknown = {str(v): int(c) for v, c in zip(vals, counts)}
        warnings.warn(LogWarning(f"{spath}: ignored {int((~known).sum())} events of unknown type "
                                 f"({', '.join(f'{k}: {v}' for k, v in unknown.items())})"), stacklevel=2)
    steps, syncs, rates = _frames(cols, ev, rates_objs, header)
    if end_obj is not None:
        end_obj = {k: v for k, v in end_obj.items() if v is not None}
    return RunLog(path=spath, header=header, steps=steps, syncs=syncs, rates=rates, end=end_obj,
                  n_lines=n_lines, unknown_events=unknown)


def load_logs(paths: Iterable[str | Path]) -> list[RunLog]:
    """Parse several logs (e.g. the same job at different splits)."""
    paths = list(paths)
    if not paths:
        raise LogError("<none>", None, "no log file given")
    return [load_log(p) for p in paths]
