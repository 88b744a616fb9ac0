"""The fast pass over a log: polars' NDJSON reader into a :class:`~advisor.ingest.summary.Summary`.

`scan_files` reads one log, or the files of one run together, in ranges of whole lines
(``RANGE_BYTES``; many small rank files make one range, each file's header row and end event kept
apart); polars parses each range with its own threads, with an explicit schema built from the
header (every field the advisor reads; unknown fields found on a range's first lines are read as
text, to be counted; ``bps`` and ``cap_bps`` as their JSON text, so that an absent role and an
explicit null stay apart); its lines are counted and measured from its newlines (the line limit),
and checked for UTF-8. Each range is read with the step fields only, then its few other lines
whole (`_Scan`). Each range's rows are checked column by column with the rules of
`advisor.ingest.schema.validate_event` and folded into the summary (counts, time bins, the
bottom-k sample: `advisor.ingest.summary`); memory is a range and the summary, whatever the
log's length.

The fast pass never reports a bad line: it gives up (None) wherever it cannot be sure, and the
exact pass (`advisor.ingest.stream`) reads the file line by line and names the file, line and
field of the first bad one, or reads a shape polars cannot. It gives up on anything polars
refuses (not JSON, a wrong type, a NaN literal, bytes that are not UTF-8, a line cut mid-write),
a line past the limit, any row a column check refuses, a value that polars made text of where
JSON held no text (``"ev": 5``), and a header that is not the first line. A gzip file is
inflated in chunks through `advisor.ingest.reader`'s guards (size, line length, ratio, UTF-8);
anything that reader warns of or refuses is left to the exact pass too.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from advisor.errors import LogError, LogWarning, display_path
from advisor.ingest.reader import GZIP_MAGIC, MAX_LINE_BYTES, MAX_LOG_BYTES, MAX_LOG_LINES, line_ranges, read_chunks
from advisor.ingest.schema import (
    END_REASONS,
    KNOWN_EVENTS,
    RATES_NUMBERS,
    SYNC_NUMBERS,
    RunHeader,
    body_columns,
    parse_header,
    step_numbers,
    unknown_fields,
)
from advisor.ingest.summary import Summary, comparable_header
from advisor.records import MAX_INT, Rates
from advisor.settings import MAX_TIME_S

RANGE_BYTES = 16 << 20  # whole lines parsed, checked and folded at once
PROBE_LINES = 64  # lines of each range decoded to find unknown fields
RATES_SCALARS = tuple(n for n, s in Rates.SPECS.items() if s.kind is not object)  # the rates frame's scalars
_OBJECTS = ("bps", "cap_bps", "q")  # rates' objects; the first two read as JSON text (`_Scan._rates`)


def tail_warning(spath: str, line: int, n_bytes: int) -> LogWarning:
    """The warning of a log whose last line was cut mid-write and skipped."""
    return LogWarning(
        f"{display_path(spath)}:{line}: last line is incomplete (a log still being written?); skipped {n_bytes} bytes"
    )


def _without_cut_tail(buf: bytes, max_line_bytes: int) -> tuple[bytes, int]:
    """The last range of a log less a last line cut mid-write (a live log), and that line's bytes
    (0: none cut; a complete last line without its newline stays, blanks after the last newline go)."""
    if buf.endswith(b"\n"):
        return buf, 0
    cut = buf.rfind(b"\n")
    tail = buf[cut + 1 :]
    if cut < 0 or len(tail) > max_line_bytes:
        raise _GiveUp  # (no whole line yet, or a line past the limit: the exact pass says so)
    if tail.isspace():
        return buf[: cut + 1], 0
    try:
        json.loads(tail)
        return buf, 0
    except (ValueError, RecursionError):
        return buf[: cut + 1], len(tail)


class _GiveUp(Exception):
    """The fast pass cannot be sure of this file: the exact pass reads it."""


def _schema(header: RunHeader, extra: tuple[str, ...], *, steps: bool = False) -> dict[str, Any]:
    """The polars schema of every field the advisor reads from a body line (`schema.body_columns`:
    text and ``bps``/``cap_bps`` as text, ``q`` by the header's queues, numbers as floats), and
    ``extra`` as text; ``steps``: only the fields of a step (the narrow read of `_Scan.send`)."""
    import polars as pl

    schema: dict[str, Any] = {}
    for name, kind in body_columns(header, steps=steps).items():
        schema[name] = pl.Float64 if kind in (int, float) else pl.String
    if "q" in schema and header.queues:
        schema["q"] = pl.Struct({q.name: pl.List(pl.Float64) if q.per_worker else pl.Float64 for q in header.queues})
    elif "q" in schema:
        del schema["q"]
    schema.update({n: pl.String for n in extra if n not in schema})
    return schema


def _unknown_pairs_of(lines: bytes) -> set[tuple[str, str]]:
    """The unknown (event, field) pairs of the known events on ``lines`` (whole lines); `_GiveUp`
    unless each is an object with a text ``ev``.

    Polars reads them with every field inferred, and a field is on an event where any of its lines
    holds it not null. Where that could differ from a decode of each line (an explicit ``null``, or
    an empty object, which polars may read as null), or where polars refuses them or infers no text
    ``ev``, they are decoded in Python instead."""
    import polars as pl

    if not lines:
        return set()
    df = None
    if b"null" not in lines and b"{}" not in lines:
        try:
            df = pl.read_ndjson(lines, infer_schema_length=None)
        except Exception:  # noqa: BLE001  (a shape polars refuses: the decode below decides)
            df = None
    shapes: set[tuple[str, tuple[str, ...]]] = set()  # (event, the fields its lines hold)
    if df is None or df.schema.get("ev") != pl.String or df["ev"].null_count():
        raws = [raw for raw in lines.split(b"\n") if raw.strip()]
        try:
            objs = json.loads(b"[" + b",".join(raws) + b"]")  # (one decode of them all)
        except (ValueError, RecursionError):
            raise _GiveUp from None
        if len(objs) != len(raws) or not all(isinstance(o, dict) and isinstance(o.get("ev"), str) for o in objs):
            raise _GiveUp
        shapes = {(o["ev"], tuple(o)) for o in objs}
    else:
        for row in df.group_by("ev").agg(pl.all().is_not_null().any()).iter_rows(named=True):
            ev = row.pop("ev")
            shapes.add((ev, tuple(n for n, there in row.items() if there)))
    fields: set[tuple[str, str]] = set()
    for ev, keys in shapes:
        if ev in KNOWN_EVENTS:
            fields.update((ev, n) for n in unknown_fields(dict.fromkeys(keys) | {"ev": ev}))
    return fields


def _role_rate(d: Any, role: str) -> float:
    """A role's rate in a decoded ``bps`` or ``cap_bps`` (NaN: absent); `_GiveUp` where
    `schema.validate_event` refuses it (not an object, a value not a number >= 0)."""
    if d is None:
        return math.nan
    if not isinstance(d, dict):
        raise _GiveUp
    if role not in d:
        return math.nan
    v = d[role]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _GiveUp
    v = float(v)
    if not (math.isfinite(v) and v >= 0):
        raise _GiveUp
    return v


def _looks_coerced(values: Any) -> bool:
    """Whether any text value could be one polars made of a JSON number, literal, array or object
    (polars reads those as their JSON text where the schema says text): text that is JSON itself."""
    for v in values:
        if v and v[0] in "-0123456789[{tfn":
            try:
                json.loads(v)
            except (ValueError, RecursionError):
                continue
            return True
    return False


def _numbers_ok(cols: dict[str, np.ndarray], spec) -> bool:
    """`schema.check_number` over columns, (name, required, integer, maximum) per field (NaN: absent)."""
    with np.errstate(invalid="ignore"):
        for name, required, integer, top in spec:
            v = cols[name]
            ok = (np.isfinite(v) & (v >= 0)) if required else ~(np.isinf(v) | (v < 0))
            top = MAX_INT if top is None and integer else top
            if top is not None:
                ok &= ~(v > top)
            if integer:
                ok &= ~(np.isfinite(v) & (np.floor(v) != v))
            if not ok.all():
                return False
    return True


class _Scan:
    """The fast pass over the ranges of a log, or of the files of one run (`_ranges`): a range of
    a larger file goes to polars alone, small whole files are joined into ranges of about
    ``RANGE_BYTES`` (each file's header row first). Each range is probed for unknown fields on
    its own or its files' first ``PROBE_LINES`` lines (`_unknown_pairs_of`) and read by polars in
    the background while the range before is checked and folded (`_fold`). Held: the summary so
    far, the unknown fields counted, each file's last ``end`` event."""

    def __init__(self, files: list[Path], sample_rows: int):
        self.files, self.sample_rows = files, sample_rows
        self.summ: Summary | None = None  # (from the first file's header on)
        self.fields: set[tuple[str, str]] = set()  # the unknown (event, field) pairs found so far
        self.field_counts: dict[tuple[str, str], int] = {}
        self.ends: dict[int, dict[str, Any]] = {}  # file -> its last end event
        self.held: list[tuple[bytes, np.ndarray, int, bool]] = []  # (range, its lines' ends, file, starts it)
        self.size = 0
        self.pending = None  # (polars' query, and `_fold`'s other arguments) of the range polars reads

    def add(self, buf: bytes, ends: np.ndarray, file: int, first: bool, whole: bool) -> None:
        """Hold one range (ending with a newline) of file ``file``; send what is held where it is
        large enough, or where the range is not a whole file (then alone)."""
        if first:
            obj = _header(buf)
            if self.summ is None:
                path = str(self.files[0])
                self.summ = Summary(obj, parse_header(obj, path, 1), path, sample_rows=self.sample_rows)
                self.summ.add_unknown({f"run.{n}": len(self.files) for n in unknown_fields(obj)}, fields=True)
            elif comparable_header(obj) != comparable_header(self.summ.header_obj):
                raise _GiveUp
        if not whole:
            self.send()
        self.held.append((buf, ends, file, first))
        self.size += len(buf)
        if not whole or self.size >= RANGE_BYTES:
            self.send()

    def send(self) -> None:
        """The ranges held, probed and sent to polars as one range, read with the step fields only
        (steps are nearly every line, and each column polars fills costs, null or not); the range
        before folded."""
        if not self.held:
            return
        buf = b"".join(h[0] for h in self.held)
        at = np.cumsum([0] + [len(h[0]) for h in self.held[:-1]])
        ends = np.concatenate([h[1] + a for h, a in zip(self.held, at.tolist())])
        self.fields |= _unknown_pairs_of(b"".join(_probed(*h[:2], h[3]) for h in self.held))
        files, starts, counts = (np.array(v) for v in zip(*[(h[2], h[3], len(h[1])) for h in self.held]))
        query = self._read(buf, self.fields, background=True, steps=True)
        prev, self.pending = self.pending, (query, buf, ends, set(self.fields), files, starts, counts)
        self.held, self.size = [], 0
        if prev is not None:
            self._fold(*prev)

    def finish(self) -> Summary:
        """Send what is held, fold the last range; the summary, with the unknown fields counted."""
        self.send()
        prev, self.pending = self.pending, None
        if prev is not None:
            self._fold(*prev)
        self.summ.add_unknown({f"{ev}.{n}": max(1, k) for (ev, n), k in self.field_counts.items()}, fields=True)
        return self.summ

    def cancel(self) -> None:
        if self.pending is not None:
            self.pending[0].cancel()

    def _read(self, buf: bytes, fields: set[tuple[str, str]], *, background: bool = False, steps: bool = False):
        """One range of whole lines read by polars, the unknown ``fields`` as text (counted from
        this range on): its frame, or (``background``) polars' query still running on its
        threads; ``steps``: only the step fields."""
        import polars as pl

        for f in fields:
            self.field_counts.setdefault(f, 0)
        names = tuple(n for _, n in sorted(fields))
        return pl.scan_ndjson(buf, schema=_schema(self.summ.header, names, steps=steps)).collect(background=background)

    def _fold(self, query, buf: bytes, ends: np.ndarray, fields, files, starts, counts) -> None:
        """One range checked and folded (`block`): its steps' read, then the lines that are not
        steps read again, whole, steps first. Read whole where its rows are not its lines one for
        one (a blank line, which polars skips), unless it joins several files."""
        heads = (np.cumsum(counts) - counts)[starts]  # (the rows of the files' headers)
        df = _result(query)
        if len(df) != len(ends):
            if len(files) > 1:
                raise _GiveUp
            df = self._read(buf, fields)  # (with the fields of its steps' read)
            self.block(df, heads, np.full(len(df), files[0]))
            return
        row_files = np.repeat(files, counts)
        is_step = (df["ev"] == "step").fill_null(False)
        step = is_step.to_numpy()
        rest = np.flatnonzero(~step)
        at = np.searchsorted(rest, heads)
        if not np.array_equal(rest[np.minimum(at, len(rest) - 1)] if len(rest) else rest, heads):
            raise _GiveUp  # (a file's first line read as a step: `block` refuses it so)
        steps, df = (df.filter(is_step) if len(rest) else df), None  # (the whole frame let go before the fold)
        self.block(steps, heads[:0], row_files[step])
        steps = None
        if len(rest):
            others = self._read(_some_lines(buf, ends, rest), fields)
            if len(others) != len(rest):
                raise _GiveUp
            self.block(others, at, row_files[rest])

    def block(self, df, heads: np.ndarray, files: np.ndarray) -> None:
        """Check one block of rows and fold it into the summary; `_GiveUp` where unsure. ``heads``:
        the rows that are the files' 'run' headers; ``files``: the file of each row."""
        import polars as pl

        ev = df["ev"]
        masks = {name: (ev == name).fill_null(False).to_numpy() for name in KNOWN_EVENTS}
        known = np.logical_or.reduce(list(masks.values()))
        if not np.array_equal(np.flatnonzero(masks["run"]), heads) or ev.null_count() or (ev == "").any():
            raise _GiveUp
        t = df["t"].to_numpy()
        if not known.all():
            t_ok = pl.col("t").is_null() | ((pl.col("t") >= 0) & (pl.col("t") <= MAX_TIME_S))
            unknown = df.filter(pl.Series(~known)).group_by("ev").agg(pl.len(), t_ok.all().alias("ok"))
            if not unknown["ok"].all() or _looks_coerced(unknown["ev"]):
                raise _GiveUp
            self.summ.add_unknown(dict(zip(unknown["ev"].to_list(), unknown["len"].to_list())))
        body = known & ~masks["run"]
        with np.errstate(invalid="ignore"):
            if not (np.isfinite(t[body]) & (t[body] >= 0) & (t[body] <= MAX_TIME_S)).all():
                raise _GiveUp
        for (ev_name, name), n in self.field_counts.items():
            if name in df.columns:  # (a field found after this range was sent counts from the next)
                self.field_counts[ev_name, name] = n + int((masks[ev_name] & df[name].is_not_null().to_numpy()).sum())
        self._steps(df, masks["step"], files)
        self._syncs(df, masks["sync"])
        if masks["rates"].any():
            rates = df.select(*RATES_SCALARS, *[c for c in _OBJECTS if c in df.columns])
            self._rates(rates.filter(pl.Series(masks["rates"])))
        self._ends(df, np.flatnonzero(masks["end"]), files)

    def _steps(self, df, mask: np.ndarray, files: np.ndarray) -> None:
        if not mask.any():
            return
        mask = slice(None) if mask.all() else mask  # (a frame of steps alone: no copies)
        role = df["role"]
        codes = np.full(len(df), -1, dtype=np.int64)
        for i, r in enumerate(self.summ.header.roles):
            codes[(role == r).fill_null(False).to_numpy()] = i
        codes = codes[mask]
        if (codes < 0).any():
            raise _GiveUp
        spec = step_numbers(self.summ.header)
        cols = {n: df[n].to_numpy()[mask] for n in (*[s[0] for s in spec], "loss")}
        limit = np.array(list(self.summ.header.roles.values()), dtype=float)[codes]
        if not _numbers_ok(cols, spec) or np.isinf(cols["loss"]).any() or (cols["worker"] >= limit).any():
            raise _GiveUp
        # a file with steps of a role that are all busy 0 (or all tokens 0) is refused by the exact
        # pass, which names it: checked per file and role where the rows are of several files
        if len(self.files) > 1:
            key = files[mask] * len(self.summ.header.roles) + codes
            n = np.bincount(key)
            for c in (cols["busy"], cols["tokens"]):
                if ((n > 0) & (np.bincount(key[c > 0], minlength=len(n)) == 0)).any():
                    raise _GiveUp
        self.summ.add_steps(cols, codes)

    def _rates(self, rates) -> None:
        """The rates snapshots (one a minute or so), checked as `schema.validate_event` checks them.

        ``bps`` and ``cap_bps`` come as their JSON text and are decoded here, so that an absent
        role (allowed) and an explicit null (refused) stay apart; the numbers and the queue depths
        are checked column by column."""
        import polars as pl

        cols = {k: rates[k].fill_null(math.nan).to_numpy() for k in RATES_SCALARS}
        if not _numbers_ok(cols, RATES_NUMBERS[1:]) or rates["bps"].null_count():
            raise _GiveUp
        for key in ("bps", "cap_bps"):
            objs = json.loads("[" + ",".join(rates[key].fill_null("null").to_list()) + "]")
            for r in self.summ.header.roles:
                cols[f"{key}_{r}"] = np.array([_role_rate(d, r) for d in objs], dtype=np.float64)
        for q in self.summ.header.queues:
            v = pl.col("q").struct.field(q.name)
            if q.per_worker:
                e = pl.element()
                ok = v.is_null() | v.list.eval(e.is_not_null() & (e >= 0) & e.is_finite()).list.all()
                mean, low = v.list.mean(), v.list.min()
            else:
                ok, mean, low = v.is_null() | ((v >= 0) & v.is_finite()), v, v
            got = rates.select(ok.all().alias("ok"), mean.alias("mean"), low.alias("low"))
            if not got["ok"][0]:
                raise _GiveUp
            cols[f"q_{q.name}"] = got["mean"].cast(pl.Float64).fill_null(math.nan).to_numpy()
            cols[f"qmin_{q.name}"] = got["low"].cast(pl.Float64).fill_null(math.nan).to_numpy()
        order = np.argsort(cols["t"], kind="stable")
        self.summ.add_rates({k: v[order] for k, v in cols.items()})

    def _syncs(self, df, mask: np.ndarray) -> None:
        if not mask.any():
            return
        cols = {n: df[n].to_numpy()[mask] for n, *_ in SYNC_NUMBERS}
        if not _numbers_ok(cols, SYNC_NUMBERS):
            raise _GiveUp
        self.summ.add_syncs(cols)

    def _ends(self, df, rows: np.ndarray, files: np.ndarray) -> None:
        """Each file's last end event (the reason checked; a message polars made text of: `_GiveUp`)."""
        if not len(rows):
            return
        ends = df.select("t", "reason", "msg")[rows]
        reason, msg = ends["reason"], ends["msg"]
        if not reason.drop_nulls().is_in(END_REASONS).all() or _looks_coerced(msg.drop_nulls().to_list()):
            raise _GiveUp
        for k, row in zip(files[rows], ends.iter_rows(named=True)):
            self.ends[int(k)] = row


def _lines(buf: bytes, max_line_bytes: int) -> np.ndarray:
    """The end of each line of one range (the offset of its newline; the range's end for a last
    line without one), as the exact pass counts the lines, checked: none longer than
    ``max_line_bytes`` without its newline and a ``\r`` before it, all UTF-8 (`_GiveUp`
    otherwise: the exact pass names the line)."""
    data = np.frombuffer(buf, dtype=np.uint8)
    ends = np.flatnonzero(data == ord("\n"))
    if not buf.endswith(b"\n"):
        ends = np.append(ends, len(buf))
    lengths = np.diff(ends, prepend=-1) - 1
    lengths -= (lengths > 0) & (data[ends - 1] == ord("\r"))
    if lengths.max(initial=0) > max_line_bytes:
        raise _GiveUp
    if not buf.isascii():
        try:
            buf.decode()
        except UnicodeDecodeError:
            raise _GiveUp from None
    return ends


def _plain_ranges(f, size: int) -> Iterator[bytes]:
    """A plain log's bytes (``f``, open, ``size`` bytes long) in ranges of whole lines of about
    ``RANGE_BYTES`` (the last may end without a newline): each range's end found first in a small
    window, so that the range is read once, without a copy."""
    pos = 0
    while pos < size:
        end = min(pos + RANGE_BYTES, size)
        if end < size:
            window = min(MAX_LINE_BYTES + 1, end - pos)
            f.seek(end - window)
            cut = f.read(window).rfind(b"\n")
            if cut < 0:
                raise _GiveUp  # (a line past the limit: the exact pass names it)
            end = end - window + cut + 1
        f.seek(pos)
        buf = f.read(end - pos)
        if not buf:
            return
        yield buf
        pos += len(buf)


def _gzip_ranges(path: Path, max_bytes: int, max_lines: int) -> Iterator[bytes]:
    """A gzip log's inflated bytes, through `advisor.ingest.reader`'s guards (anything it refuses or
    warns of: `_GiveUp`), in ranges of whole lines of about ``RANGE_BYTES`` (`reader.line_ranges`)."""
    try:
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always")
            chunks = read_chunks(path, MAX_LINE_BYTES, max_bytes=max_bytes, max_lines=max_lines)
            for buf in line_ranges(chunks, RANGE_BYTES):
                if notes:
                    raise _GiveUp
                if buf:
                    yield buf
        if notes:
            raise _GiveUp
    except LogError:
        raise _GiveUp from None


def _result(query):
    """The frame of a range read in the background (`_Scan.send`; benchmarks/phases.py times it)."""
    return query.fetch_blocking()


def _some_lines(buf: bytes, ends: np.ndarray, rows: np.ndarray) -> bytes:
    """Lines ``rows`` of a range (0-based, ascending; ``ends``: each line's end, `_lines`), each
    without its newline and a ``\r`` before it, joined by newlines."""
    starts = np.concatenate(([0], ends[:-1] + 1))
    pairs = zip(starts[rows].tolist(), ends[rows].tolist())
    return b"\n".join(buf[a:b].removesuffix(b"\r") for a, b in pairs)


def _ranges(path: Path, max_bytes: int, max_lines: int) -> Iterator[tuple[bytes, bool]]:
    """A log's (inflated) bytes in ranges of whole lines (`_plain_ranges`, `_gzip_ranges`; the
    last may end without a newline), each with whether it is the whole file (a small plain file)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if f.read(2) == GZIP_MAGIC:
            yield from ((buf, False) for buf in _gzip_ranges(path, max_bytes, max_lines))
            return
        if size > max_bytes:
            raise _GiveUp
        yield from ((buf, size <= RANGE_BYTES) for buf in _plain_ranges(f, size))


def _header(data: bytes) -> dict[str, Any]:
    """A file's first line decoded: its 'run' header (`_GiveUp` where it is not one)."""
    line = data[: data.find(b"\n")]
    try:
        obj = json.loads(line.decode()) if line.strip() else None
    except (ValueError, RecursionError):
        raise _GiveUp from None
    if not isinstance(obj, dict) or obj.get("ev") != "run":
        raise _GiveUp
    return obj


def _probed(buf: bytes, ends: np.ndarray, first: bool) -> bytes:
    """The first ``PROBE_LINES`` lines of a range, with their newlines; after the header where
    the range starts a file."""
    k = min(len(ends), PROBE_LINES)
    return buf[ends[0] + 1 if first else 0 : ends[k - 1] + 1] if k > first else b""


def scan_files(
    files: list[Path], *, sample_rows: int, max_bytes: int = MAX_LOG_BYTES, max_lines: int = MAX_LOG_LINES
) -> tuple[Summary, list[tuple[RunHeader, Any]]] | None:
    """The summary of one log, or the merged summary of the files of one run (many small rank
    files make a few large ranges, which polars parses with all its threads), by the fast pass,
    and each file's header and last end event; None where the exact pass must read the files
    (see the module docstring; and, of several files: headers that differ, a file given twice,
    steps that repeat, a blank line among small files). The limits hold per file.
    """
    try:
        return _scan_files([Path(f) for f in files], sample_rows, max_bytes, max_lines)
    except Exception:  # noqa: BLE001  _GiveUp, LogError, OSError, or anything polars or numpy refuses:
        return None  # the exact pass reads the files, and names what it refuses


def _scan_files(files: list[Path], sample_rows: int, max_bytes: int, max_lines: int):
    if len({f.resolve() for f in files}) < len(files):
        raise _GiveUp
    scan = _Scan(files, sample_rows)
    n_lines = 0
    cuts: list[tuple[Path, int, int]] = []  # last lines cut mid-write (a live log): file, line, bytes
    try:
        for i, f in enumerate(files):
            lines = 0
            for buf, whole in _ranges(f, max_bytes, max_lines):
                buf, cut = _without_cut_tail(buf, MAX_LINE_BYTES)
                ends = _lines(buf, MAX_LINE_BYTES)
                if lines + len(ends) > max_lines:
                    raise _GiveUp
                if cut:
                    cuts.append((f, lines + len(ends) + 1, cut))
                scan.add(buf if buf.endswith(b"\n") else buf + b"\n", ends, i, not lines, whole)
                lines += len(ends)
            if not lines:
                raise _GiveUp
            n_lines += lines
        summ = scan.finish()
    finally:
        scan.cancel()
    for r in summ.roles if len(files) > 1 else ():
        keys = np.sort(summ.samples[r].compact()[1])
        if (keys[1:] == keys[:-1]).any():  # a step twice: a copied file, or one repeated
            raise _GiveUp
    summ.n_lines = n_lines
    for f in files:
        summ.add_source(f)
    ends = [scan.ends.get(i) for i in range(len(files))]
    for end in ends:
        summ.set_end(end)
    summ.paths = [str(f) for f in files]
    for f, line, n_bytes in cuts:
        warnings.warn(tail_warning(str(f), line, n_bytes), stacklevel=5)
    return summ, [(summ.header, end) for end in ends]
