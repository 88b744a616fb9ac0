"""Parsing pieces of a log body: a fast pyarrow path, a slow exact path, and the checks between.

A :class:`Piece` (whole lines of the body, from `advisor.ingest.stream`) goes through pyarrow's
multi-threaded JSON reader with an explicit schema built from the header (`_fast_parse`), then
through vectorized checks that are the same as `schema.validate_event` (`_bad_rows`). When
pyarrow rejects the piece (a non-JSON line, a wrong type, binary garbage) or a vectorized check
fails, the slow exact path (`_slow_parse`, `schema.validate_event` line by line) re-reads it to
name the first offending line and field; if the slow path finds nothing wrong (a shape pyarrow
cannot unify but the schema allows), its decoded events are used instead, so correctness never
depends on the fast path. Either way the result is a :class:`Parsed`: the piece's columns,
split by event type.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from advisor.errors import LogError
from advisor.ingest.frames import RATES_SCALARS
from advisor.ingest.schema import (END_REASONS, KNOWN_EVENTS, MAX_INT, MAX_TIME_S, SYNC_NUMBERS, RunHeader,
                                   step_numbers, validate_event)

_NUMERIC = ("t", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss",
            "workers", "dur", "bytes", "window", "tok_s", "eta_s", "done")
_STEP_NUMERIC = ("t", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss")
_SYNC_NUMERIC = ("t", "workers", "dur", "bytes")


@dataclass(frozen=True)
class Piece:
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


def decode_line(raw: bytes, path: str, line: int) -> Any:
    """One line's JSON value; a LogError naming the line when it is not UTF-8 or not JSON."""
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
    fields += [(n, f64) for n in _NUMERIC + header.node_step_fields]   # (docs/log-schema.md)
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
                "workers", "dur", "bytes", "xfer")
_OTHER_FIELDS = ("ev", "t", "window", "tok_s", "eta_s", "done", "bps", "cap_bps", "q", "reason", "msg")


def rates_table(objs: list[Mapping[str, Any]], header: RunHeader):
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
        rows.append({**{k: num(o.get(k)) for k in RATES_SCALARS}, "bps": rates(o.get("bps")),
                     "cap_bps": rates(o.get("cap_bps")), "q": q})
    schema = _arrow_schema(header)
    keep = pa.schema([schema.field(k) for k in (*RATES_SCALARS, "bps", "cap_bps", "q") if k in schema.names])
    return pa.Table.from_pylist(rows, schema=keep)


@dataclass
class Parsed:
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


def _codes(col, names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Integer codes of a string column against ``names`` (unseen values get new codes)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(col).combine_chunks()
    dict_vals = enc.dictionary.to_pylist()
    # a scalar of the indices' own type: a Python int sends fill_null through a cast (25 ms a
    # 16 MiB piece, pyarrow 26; 0.03 ms typed)
    idx = pc.fill_null(enc.indices, pa.scalar(len(dict_vals), enc.indices.type)).to_numpy(zero_copy_only=False)
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


def _fast_parse(piece: "Piece", header: RunHeader, n_rows: int) -> Parsed | None:
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
            # nulls read as NaN too: a NaN literal shows only as more NaNs than nulls (rare, so
            # the exact mask, an Arrow kernel pass, is made only then)
            if not required and int(np.isnan(v).sum()) > col.null_count:
                lit = pc.is_nan(col).fill_null(False).to_numpy(zero_copy_only=False)
                nan_lit[mask & lit] = True
            cols[n] = v if whole else v[mask]
        return cols, rows

    step_spec = (*step_numbers(header), ("loss", False, False, None))
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
    return Parsed(ev=ev, names=names, t=t, step=step, step_rows=step_rows, sync=sync, rates=rates,
                   end_obj=end_obj, nan_lit=nan_lit, t_null=t_null, bad_reason=bad_reason)


def _numbers_ok(cols: Mapping[str, np.ndarray], spec) -> np.ndarray:
    """Vectorized `schema.check_number` over columns: (name, required, integer, maximum) per field.

    NaN stands for an absent value here; NaN literals are caught by ``Parsed.nan_lit``.
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


def _bad_rows(p: Parsed, header: RunHeader) -> np.ndarray:
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
        b = ~_numbers_ok(s, step_numbers(header))
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


def _slow_parse(lines: list[bytes], first_body_line: int, header: RunHeader, path: str) -> Parsed:
    """Line-by-line exact path: raises at the first bad line; else the same columns as _fast_parse."""
    names = list(KNOWN_EVENTS)
    evs: list[int] = []
    ts: list[float] = []
    step_fields = _STEP_NUMERIC + header.node_step_fields
    step: dict[str, list[Any]] = {n: [] for n in (*step_fields, "role")}
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
        obj = decode_line(raw, path, lineno)
        kind = validate_event(obj, header, path, lineno)
        if kind not in names:
            names.append(kind)
        evs.append(names.index(kind))
        ts.append(num(obj.get("t")))
        if kind == "step":
            step_rows.append(row)
            for n in step_fields:
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
    return Parsed(ev=np.asarray(evs, dtype=np.int64), names=names, t=np.asarray(ts, dtype=np.float64),
                   step=step_np, step_rows=np.asarray(step_rows, dtype=np.int64),
                   sync={n: np.asarray(v, dtype=np.float64) for n, v in sync.items()},
                   rates=rates_table(rates_objs, header), end_obj=end_obj)


def parse_piece(piece: Piece, header: RunHeader, spath: str) -> Parsed:
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
                validate_event(decode_line(piece.line(int(line)), spath, lineno), header, spath, lineno)
        if len(bad):
            line = int(_line_numbers(piece.nl, bad[:1])[0])
            lineno = piece.first_line + line - 1
            validate_event(decode_line(piece.line(line), spath, lineno), header, spath, lineno)
            parsed = None   # the exact reader sees nothing wrong there: let it decide, line by line
    if parsed is None:
        parsed = _slow_parse(piece.text().split(b"\n"), piece.first_line, header, spath)
    return parsed
