"""The fast pass over one log file: polars' ``scan_ndjson`` into a :class:`~advisor.ingest.summary.Summary`.

The file is scanned lazily with an explicit schema built from its header (every field the advisor
reads; unknown fields found on probe lines are read as text to be counted) by polars' streaming
engine, in batches, so memory is bounded by a block of rows and the summary whatever the log's
length; polars' own threads do the parse. Each block of rows is checked column by column with
the rules of `advisor.ingest.schema.validate_event`, and folded into the file's summary (counts,
time bins, the bottom-k sample: `advisor.ingest.summary`).

The fast pass never reports a bad line: it gives up (returns None) wherever it cannot be sure,
and `advisor.ingest.stream` then reads the file with the exact line-by-line pass, which names the
file, line and field of the first bad line, or reads a shape polars cannot. It gives up on:
anything polars refuses (not JSON, a wrong type, a NaN literal, bytes that are not UTF-8, a line
cut mid-write), any row a column check refuses, a value polars turned into text that JSON did
not hold as text (``"ev": 5``), a rates snapshot whose role rate is null (absent and ``null``
read alike, and only the second is refused), a header that is not the first line, and a file
over the line limit. A gzip file is inflated first, in chunks, through `advisor.ingest.reader`'s
guards (size, line length, ratio, UTF-8); anything that reader warns of or refuses is left to
the exact pass too. A plain file's lines are counted and measured by polars' ``scan_lines``,
which also refuses bytes that are not UTF-8.
"""
from __future__ import annotations

import json
import os
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from advisor.errors import LogError
from advisor.ingest.frames import RATES_SCALARS
from advisor.ingest.parse import rates_columns
from advisor.ingest.reader import GZIP_MAGIC, MAX_LINE_BYTES, read_chunks
from advisor.ingest.schema import (END_REASONS, KNOWN_EVENTS, MAX_INT, MAX_TIME_S, SYNC_NUMBERS, RunHeader,
                                   parse_header, step_numbers, unknown_fields, validate_event)
from advisor.ingest.summary import Summary

BLOCK_ROWS = 1 << 18          # rows checked and folded at once (polars' batches are a few thousand)
PROBE_LINES = 64              # lines decoded at each probe offset, to find unknown fields
PROBE_EVERY_BYTES = 16 << 20  # a probe at the start and every this many bytes
MEMORY_GZIP_BYTES = 64 << 20  # a gzip log inflating to more is spilled to a temporary file
_NUMERIC = ("t", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss",
            "workers", "dur", "bytes", "window", "tok_s", "eta_s", "done")
_TEXT = ("ev", "role", "reason", "msg")
_OBJECTS = ("bps", "cap_bps", "q")     # read as their JSON text, decoded per snapshot (`_Scan._rates`)


class _GiveUp(Exception):
    """The fast pass cannot be sure of this file: the exact pass reads it."""


def _schema(header: RunHeader, extra: tuple[str, ...]) -> dict[str, Any]:
    """The polars schema of every field the advisor reads from a body line, and ``extra`` as text."""
    import polars as pl

    schema: dict[str, Any] = {n: pl.String for n in _TEXT + _OBJECTS}
    schema.update({n: pl.Float64 for n in _NUMERIC + header.node_step_fields})
    schema.update({n: pl.String for n in extra if n not in schema})
    return schema


def _probe(source: Path | bytes, max_line_bytes: int) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The header (the first line) and the unknown (event, field) pairs on the probe lines: the
    first ``PROBE_LINES`` lines, and as many after every ``PROBE_EVERY_BYTES``."""
    fields: set[tuple[str, str]] = set()
    header_obj: dict[str, Any] | None = None
    span = min(max_line_bytes, PROBE_LINES * 4096)
    size = source.stat().st_size if isinstance(source, Path) else len(source)
    with open(source, "rb") if isinstance(source, Path) else _nothing() as f:
        for at in range(0, max(size, 1), PROBE_EVERY_BYTES):
            if f is None:
                head = source[at:at + span]
            else:
                f.seek(at)
                head = f.read(span)
            lines = head.split(b"\n")[1 if at else 0:-1]
            for k, raw in enumerate(lines[:PROBE_LINES]):
                try:
                    obj = json.loads(raw)
                except (ValueError, RecursionError):
                    raise _GiveUp from None
                if not isinstance(obj, dict) or not isinstance(obj.get("ev"), str):
                    raise _GiveUp
                if at == 0 and k == 0:
                    header_obj = obj
                elif obj["ev"] in KNOWN_EVENTS:
                    fields.update((obj["ev"], n) for n in unknown_fields(obj))
    if header_obj is None or header_obj.get("ev") != "run":
        raise _GiveUp
    return header_obj, sorted(fields)


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


def _looks_coerced(values: Any) -> bool:
    """Whether any text value could be one polars made of a JSON number, literal, array or object."""
    for v in values:
        if v and (v[0] in "-0123456789[{" or v in ("true", "false", "null")):
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
    """One file's fast pass: its summary so far, and what the checks need across blocks."""

    def __init__(self, header_obj: dict[str, Any], header: RunHeader, spath: str, sample_rows: int,
                 fields: list[tuple[str, str]]):
        self.header = header
        self.summ = Summary(header_obj, header, spath, sample_rows=sample_rows)
        self.summ.add_unknown_fields({f"run.{n}": 1 for n in unknown_fields(header_obj)})
        self.fields = fields
        self.field_counts = dict.fromkeys(fields, 0)
        self.rows = 0

    def block(self, df) -> None:
        """Check one block of rows and fold it into the summary; `_GiveUp` where unsure."""
        import polars as pl

        if self.rows == 0:
            if df["ev"][0] != "run":
                raise _GiveUp
            df = df.slice(1)
        self.rows += len(df) + (self.rows == 0)
        ev = df["ev"]
        if ev.null_count() or (ev == "").any() or (ev == "run").any():
            raise _GiveUp
        unknown = df.filter(~pl.col("ev").is_in(KNOWN_EVENTS)).group_by("ev").agg(
            pl.len(), (pl.col("t").is_null() | ((pl.col("t") >= 0) & (pl.col("t") <= MAX_TIME_S))).all().alias("ok"))
        if not unknown["ok"].all() or _looks_coerced(unknown["ev"]):
            raise _GiveUp
        self.summ.add_unknown(dict(zip(unknown["ev"].to_list(), unknown["len"].to_list())))
        known = df.filter(pl.col("ev").is_in(KNOWN_EVENTS))
        t = known["t"].to_numpy()
        with np.errstate(invalid="ignore"):
            if not (np.isfinite(t) & (t >= 0) & (t <= MAX_TIME_S)).all():
                raise _GiveUp
        for (ev_name, name), n in self.field_counts.items():
            given = df.filter((pl.col("ev") == ev_name) & pl.col(name).is_not_null())
            self.field_counts[ev_name, name] = n + given.height
        self._steps(known.filter(pl.col("ev") == "step"))
        self._syncs(known.filter(pl.col("ev") == "sync"))
        self._rates(known.filter(pl.col("ev") == "rates"))
        self._end(known.filter(pl.col("ev") == "end"))

    def _steps(self, steps) -> None:
        import polars as pl

        if not len(steps):
            return
        roles = list(self.header.roles)
        codes = steps.select(pl.col("role").replace_strict(roles, list(range(len(roles))), default=-1,
                                                           return_dtype=pl.Int64).fill_null(-1))["role"].to_numpy()
        if (codes < 0).any():
            raise _GiveUp
        spec = step_numbers(self.header)
        cols = {n: steps[n].cast(pl.Float64).fill_null(float("nan")).to_numpy()
                for n in (*[s[0] for s in spec], "loss")}
        limit = np.array(list(self.header.roles.values()), dtype=float)[codes]
        if not _numbers_ok(cols, spec) or np.isinf(cols["loss"]).any() or (cols["worker"] >= limit).any():
            raise _GiveUp
        self.summ.add_steps(cols, codes)

    def _rates(self, rates) -> None:
        """The rates snapshots (one a minute or so), each decoded and checked by `schema.validate_event`:
        polars gives ``bps``, ``cap_bps`` and ``q`` as their JSON text, so an absent role and an
        explicit null (refused) stay apart."""
        if not len(rates):
            return
        objs = []
        for row in rates.select(*RATES_SCALARS, *_OBJECTS).iter_rows(named=True):
            obj = {k: v for k, v in row.items() if v is not None}
            for k in _OBJECTS:
                if k in obj:
                    obj[k] = json.loads(obj[k])      # (a ValueError: the exact pass names the line)
            obj["ev"] = "rates"
            validate_event(obj, self.header, self.summ.paths[0], None)   # (a LogError: likewise)
            objs.append(obj)
        self.summ.add_rates(rates_columns(objs, self.header))

    def _syncs(self, syncs) -> None:
        if not len(syncs):
            return
        cols = {n: syncs[n].fill_null(float("nan")).to_numpy() for n, *_ in SYNC_NUMBERS}
        if not _numbers_ok(cols, SYNC_NUMBERS):
            raise _GiveUp
        self.summ.add_syncs(cols)

    def _end(self, ends) -> None:
        if not len(ends):
            return
        reason, msg = ends["reason"], ends["msg"]
        if not reason.drop_nulls().is_in(END_REASONS).all() or _looks_coerced(msg.drop_nulls().to_list()):
            raise _GiveUp
        last = ends.row(len(ends) - 1, named=True)
        self.summ.set_end({k: last[k] for k in ("t", "reason", "msg")}, by_time=False)

    def finish(self, n_lines: int) -> Summary:
        if not self.rows:
            raise _GiveUp
        self.summ.n_lines = n_lines
        self.summ.add_unknown_fields({f"{ev}.{n}": max(1, k) for (ev, n), k in self.field_counts.items()})
        return self.summ


def _lines(source: Path | bytes, max_line_bytes: int) -> int:
    """The lines of a log (as the exact pass counts them), checked: none longer than
    ``max_line_bytes``, all UTF-8 (`_GiveUp` otherwise: the exact pass names the line)."""
    import polars as pl

    if isinstance(source, bytes):        # (inflated through the reader's guards already)
        return source.count(b"\n") + (not source.endswith(b"\n") and bool(source))
    longest, n = pl.scan_lines(source).select(pl.col("line").str.len_bytes().max(), pl.len()).collect().row(0)
    if longest is not None and longest > max_line_bytes:
        raise _GiveUp
    return int(n)


def _blocks(batches: Iterator[Any]) -> Iterator[Any]:
    """polars' batches joined into blocks of at least ``BLOCK_ROWS`` rows."""
    import polars as pl

    held, n = [], 0
    for b in batches:
        held.append(b)
        n += len(b)
        if n >= BLOCK_ROWS:
            yield pl.concat(held, rechunk=False)
            held, n = [], 0
    if held:
        yield pl.concat(held, rechunk=False)


def _inflated(path: Path, max_bytes: int, max_lines: int, keep: list[Path]) -> Path | bytes:
    """A gzip log's bytes (in memory, or a temporary file past ``MEMORY_GZIP_BYTES``, its path added
    to ``keep`` for the caller to delete), through the reader's guards; `_GiveUp` on any refusal."""
    held: list[bytes] = []
    size = 0
    out = None
    try:
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always")
            for chunk, _ in read_chunks(path, MAX_LINE_BYTES, max_bytes=max_bytes, max_lines=max_lines):
                size += len(chunk)
                if out is None and size > MEMORY_GZIP_BYTES:
                    fd, name = tempfile.mkstemp(suffix=".jsonl")
                    keep.append(Path(name))
                    out = os.fdopen(fd, "wb")
                    out.writelines(held)
                    held = []
                if out is not None:
                    out.write(chunk)
                else:
                    held.append(chunk)
    except LogError:
        raise _GiveUp from None
    finally:
        if out is not None:
            out.close()
    if notes:
        raise _GiveUp
    return keep[-1] if out is not None else b"".join(held)


def scan_log(path: str | Path, *, sample_rows: int, max_bytes: int, max_lines: int,
             max_line_bytes: int = MAX_LINE_BYTES) -> Summary | None:
    """The summary of one log file by the fast pass, or None where the exact pass must read it
    (see the module docstring). The file is a regular file (`advisor.ingest.reader.open_log`
    checked it) and not a summary."""
    import polars as pl

    path = Path(path)
    spill: list[Path] = []
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            gz = f.read(2) == GZIP_MAGIC
        if size > max_bytes and not gz:
            return None
        source: Path | bytes = _inflated(path, max_bytes, max_lines, spill) if gz else path
        header_obj, fields = _probe(source, max_line_bytes)
        try:
            header = parse_header(header_obj, str(path), 1)
        except LogError:
            return None
        n_lines = _lines(source, max_line_bytes)
        if n_lines > max_lines:
            return None
        scan = _Scan(header_obj, header, str(path), sample_rows, fields)
        names = tuple(n for _, n in fields)
        lf = pl.scan_ndjson(source, schema=_schema(header, names))
        for block in _blocks(lf.collect_batches(engine="streaming")):
            scan.block(block)
        return scan.finish(n_lines)
    except (_GiveUp, LogError):
        return None
    except Exception:     # noqa: BLE001  anything polars or numpy refuses: the exact pass reads it, and names it
        return None
    finally:
        for p in spill:
            p.unlink(missing_ok=True)
