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
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .schema import (KNOWN_EVENTS, LogError, LogWarning, RunHeader, parse_header, validate_event)

MAX_LINE_BYTES = 1 << 20  # a longer line is corruption, not a log event
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


def _fast_parse(body: bytes, header: RunHeader) -> _Parsed | None:
    """pyarrow path; None when pyarrow refuses the body (the slow path then names the line)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    try:
        table = pj.read_json(io.BytesIO(body), parse_options=pj.ParseOptions(
            explicit_schema=_arrow_schema(header), unexpected_field_behavior="ignore"),
            read_options=pj.ReadOptions(block_size=1 << 20))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    ev, names = _codes(table.column("ev"), KNOWN_EVENTS)
    t = table.column("t").to_numpy().astype(np.float64, copy=False)

    def subset(code: int, numeric: Sequence[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        mask = ev == code
        rows = np.flatnonzero(mask)
        whole = len(rows) == len(ev)
        cols = {}
        for n in numeric:
            v = table.column(n).to_numpy().astype(np.float64, copy=False)
            cols[n] = v if whole else v[mask]
        return cols, rows

    step, step_rows = subset(KNOWN_EVENTS.index("step"), _STEP_NUMERIC)
    role = _codes(table.column("role"), list(header.roles))[0]
    step["role"] = role if len(step_rows) == len(ev) else role[step_rows]
    sync, _ = subset(KNOWN_EVENTS.index("sync"), _SYNC_NUMERIC)
    keep = [c for c in ("t", "window", "tok_s", "eta_s", "done", "bps", "cap_bps", "q") if c in table.column_names]
    rates = table.filter(pc.equal(table.column("ev"), "rates")).select(keep)
    # checked in Python: one snapshot a minute or so, and it names the offending field
    rates_objs = rates.to_pylist()
    end_tab = table.filter(pc.equal(table.column("ev"), "end")).select(["t", "reason", "msg"])
    end_obj = end_tab.to_pylist()[-1] if end_tab.num_rows else None
    return _Parsed(ev=ev, names=names, t=t, step=step, step_rows=step_rows, sync=sync, rates=rates,
                   rates_objs=rates_objs,
                   end_obj=end_obj)


def _bad_rows(p: _Parsed, header: RunHeader) -> np.ndarray:
    """Vectorized schema checks; body row indices that violate it (empty when clean)."""
    bad = [np.flatnonzero((p.ev < 0) | ~np.isfinite(p.t) | (p.t < 0))]
    s = p.step
    if len(p.step_rows):
        b = np.zeros(len(p.step_rows), dtype=bool)
        for name in ("worker", "tokens", "busy"):
            v = s[name]
            b |= ~(np.isfinite(v) & (v >= 0))
        for name in ("batch", "seqs", "wait", "blocked"):
            v = s[name]
            b |= ~(np.isnan(v) | (np.isfinite(v) & (v >= 0)))
        with np.errstate(invalid="ignore"):
            for name in ("worker", "tokens"):
                v = s[name]
                b |= np.isfinite(v) & (np.floor(v) != v)
        b |= np.isinf(s["loss"])
        limit = np.array(list(header.roles.values()) + [-1], dtype=float)[s["role"]]
        b |= (s["role"] < 0) | (s["worker"] >= limit)
        bad.append(p.step_rows[b])
    sy = KNOWN_EVENTS.index("sync")
    if (p.ev == sy).any():
        d = p.sync["dur"]
        bad.append(np.flatnonzero(p.ev == sy)[~(np.isfinite(d) & (d >= 0))])
    ra = np.flatnonzero(p.ev == KNOWN_EVENTS.index("rates"))
    for row, obj in zip(ra, p.rates_objs):   # few rows: one snapshot a minute or so
        if not _rates_ok(obj):
            bad.append(np.array([row]))
            break
    return np.sort(np.concatenate(bad))


def _rates_ok(obj: Mapping[str, Any]) -> bool:
    vals = [obj.get(k) for k in ("window", "tok_s", "eta_s", "done")]
    for key in ("bps", "cap_bps"):
        vals += list((obj.get(key) or {}).values())
    for v in (obj.get("q") or {}).values():
        vals += v if isinstance(v, list) else [v]
    return all(v is None or (math.isfinite(v) and v >= 0) for v in vals)


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
            end_obj = obj
        row += 1
    step_np = {n: np.asarray(v, dtype=np.float64) for n, v in step.items() if n != "role"}
    step_np["role"] = np.asarray(step["role"], dtype=np.int64)
    return _Parsed(ev=np.asarray(evs, dtype=np.int64), names=names, t=np.asarray(ts, dtype=np.float64),
                   step=step_np, step_rows=np.asarray(step_rows, dtype=np.int64),
                   sync={n: np.asarray(v, dtype=np.float64) for n, v in sync.items()},
                   rates=_rates_table(rates_objs, header), rates_objs=rates_objs, end_obj=end_obj)


def load_log(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> RunLog:
    """Parse one rate log. Raises :class:`LogError` (file:line: field ...) on unusable input."""
    path = Path(path)
    spath = str(path)
    data = _read_bytes(path, max_line_bytes)
    if not data or data.isspace():
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

    parsed = _fast_parse(body, header) if body and not body.isspace() else None
    if parsed is not None:
        bad = _bad_rows(parsed, header)
        if len(bad):
            line = int(_line_numbers(body, bad[:1])[0])
            lineno = first_body_line + line - 1
            validate_event(_decode_line(body.split(b"\n")[line - 1], spath, lineno), header, spath, lineno)
            raise LogError(spath, lineno, "violates schema v1")
    else:
        parsed = _slow_parse(body.split(b"\n"), first_body_line, header, spath)
    n_known = len(KNOWN_EVENTS)
    unknown: dict[str, int] = {}
    if (parsed.ev >= n_known).any():
        codes, counts = np.unique(parsed.ev[parsed.ev >= n_known], return_counts=True)
        unknown = {parsed.names[int(c)]: int(k) for c, k in zip(codes, counts)}
        warnings.warn(LogWarning(f"{spath}: ignored {int(counts.sum())} events of unknown type "
                                 f"({', '.join(f'{k}: {v}' for k, v in unknown.items())})"), stacklevel=2)
    steps, syncs, rates = _frames(parsed, header)
    end_obj = parsed.end_obj
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
