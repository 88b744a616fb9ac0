"""Reading one log file into a :class:`~advisor.ingest.summary.Summary`: the fast pass, and the exact one.

`summarize_log` reads a summary file as the summary it is (recognised by its first bytes); a log
first by the fast pass (`advisor.ingest.scan`: polars), and, where that gives up, by the exact
pass here, a small pipeline of named steps:

1. `advisor.ingest.reader.read_chunks`: the file's bytes in checked chunks;
2. `_read`: the chunks cut into pieces of whole lines about ``PIECE_BYTES`` long
   (`advisor.ingest.reader.line_ranges`), the end of the file its last, maybe incomplete, line;
3. `_Body.fold`: the header from the first lines, then each piece decoded and checked line by
   line (`parse_piece`: ``json``, then `schema.validate_event`), which raises at the first bad
   line naming file, line and field, folded in order into the file's summary;
4. `_check_usable`: the check that a rate can be fitted at all (`summarize_log`, which also
   records the file as the summary's source).

Memory does not grow with the log on either pass. A last line cut mid-write (a live log) is
skipped with a :class:`~advisor.errors.LogWarning`.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from advisor.errors import LogError, cut_text
from advisor.ingest import reader
from advisor.ingest import summary as _summary
from advisor.ingest.reader import MAX_LINE_BYTES, MAX_LOG_BYTES, MAX_LOG_LINES, open_log, read_chunks
from advisor.ingest.scan import PROBE_LINES, RATES_SCALARS, scan_files, tail_warning
from advisor.ingest.schema import RunHeader, parse_header, unknown_fields, validate_event
from advisor.ingest.summary import SYNC_FIELDS, Summary, is_summary, read_summary
from advisor.records import End

PIECE_BYTES = 16 << 20  # whole lines decoded and folded at once


def _table_error(text: str, path: str, line: int) -> LogError | None:
    """The error for a header line that is a table's header row (a CSV history given where a rate
    log goes), pointing at the converter; None where the line does not look like one."""
    if text.lstrip()[:1] in ("{", "[", '"') or not ("," in text or "\t" in text):
        return None
    return LogError(
        path,
        line,
        f"is a table, not a JSON Lines rate log (its first line is a header row: {cut_text(text.strip())!r}); "
        f"convert a wandb or MLflow history with `dflash-advise import-tb {path} --roles target=N,drafter=M "
        f"-o log.jsonl` (--stack torchspec, specforge or speculators reads those stacks' metrics by name)",
    )


def decode_line(raw: bytes, path: str, line: int, *, header: bool = False) -> Any:
    """One line's JSON value."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LogError(path, line, "is not UTF-8 text (binary data in the log?)") from None
    if text.startswith("\ufeff"):  # a byte-order mark, as some Windows tools write
        text = text[1:]
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        hint = " (NUL bytes: binary data or UTF-16?)" if "\x00" in text else ""
        # json's own "Unterminated string starting at" ends in the "at" its position follows
        what = e.msg.removesuffix(" at")
        table = _table_error(text, path, line) if header else None
        if table is not None:
            raise table from None
        raise LogError(path, line, f"is not valid JSON ({what} at column {e.colno}){hint}") from None
    except RecursionError:
        raise LogError(path, line, "is not a log event: JSON nested too deeply") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise LogError(path, line, f"is not a log event ({str(e).split(';')[0]})") from None


def _num(v: Any) -> float:
    """A JSON number as a float (NaN for anything else: absent, null)."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def rates_columns(objs: list[Mapping[str, Any]], header: RunHeader) -> dict[str, np.ndarray]:
    """The rates frame's columns (`advisor.ingest.runlog`) from decoded rates events."""
    out: dict[str, list[float]] = {k: [_num(o.get(k)) for o in objs] for k in RATES_SCALARS}
    for key in ("bps", "cap_bps"):
        for r in header.roles:
            out[f"{key}_{r}"] = [_num(d.get(r)) if isinstance(d := o.get(key), dict) else math.nan for o in objs]
    for spec in header.queues:
        means, lows = [], []
        for o in objs:
            v = (o.get("q") or {}).get(spec.name)
            vals = [_num(x) for x in (v if isinstance(v, list) else [v]) if x is not None]
            means.append(float(np.mean(vals)) if vals else math.nan)
            lows.append(float(np.min(vals)) if vals else math.nan)
        out[f"q_{spec.name}"], out[f"qmin_{spec.name}"] = means, lows
    cols = {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}
    order = np.argsort(cols["t"], kind="stable")
    return {k: v[order] for k, v in cols.items()}


def parse_piece(text: bytes, first_body_line: int, summ: Summary, path: str) -> None:
    """Decode and check each line of ``text`` (whole body lines, the first numbered
    ``first_body_line``) and fold them into ``summ``, in order."""
    header = summ.header
    roles = list(header.roles)
    step: dict[str, list[float]] = {n: [] for n in summ.step_fields}
    codes: list[int] = []
    sync: dict[str, list[float]] = {n: [] for n in SYNC_FIELDS}
    rates_objs: list[Mapping[str, Any]] = []
    unknown: dict[str, int] = {}
    end_obj = None
    for i, raw in enumerate(text.split(b"\n")):
        if not raw.strip():
            continue
        lineno = first_body_line + i
        obj = decode_line(raw, path, lineno)
        kind = validate_event(obj, header, path, lineno)
        if kind == "step":
            for n, col in step.items():
                col.append(_num(obj.get(n)))
            codes.append(roles.index(obj["role"]))
        elif kind == "sync":
            for n, col in sync.items():
                col.append(_num(obj.get(n)))
        elif kind == "rates":
            rates_objs.append(obj)
        elif kind == "end":
            end_obj = {k: obj.get(k) for k in End.KEYS}  # the fields the fast pass keeps
        else:
            unknown[kind] = unknown.get(kind, 0) + 1
    summ.add_steps({n: np.asarray(v, dtype=np.float64) for n, v in step.items()}, np.asarray(codes, np.int64))
    summ.add_syncs({n: np.asarray(v, dtype=np.float64) for n, v in sync.items()})  # (each: nothing where none)
    summ.add_rates(rates_columns(rates_objs, header))
    summ.add_unknown(unknown)
    if end_obj is not None:
        summ.end = end_obj


class _Body:
    """What reading one log has found so far: the file's summary (from its header on), and the
    newlines consumed."""

    def __init__(self, spath: str, sample_rows: int):
        self.spath = spath
        self.sample_rows = sample_rows
        self.summ: Summary | None = None
        self.lines_done = 0  # newlines consumed before the current piece

    def fold(self, buf: bytes) -> None:
        """Fold the whole lines of ``buf`` into the summary: the header first, where none came
        yet; then each body line decoded and checked (`parse_piece`)."""
        pos, body_first = 0, self.lines_done + 1
        if self.summ is None:
            pos, body_first = self._header(buf)  # (no header yet: every line read, pos is its end)
        self.lines_done += buf.count(b"\n")
        if pos < len(buf):
            self.summ.add_unknown(_count_fields(buf, pos), fields=True)
            parse_piece(buf[pos:], body_first, self.summ, self.spath)

    def _header(self, buf: bytes) -> tuple[int, int]:
        """Read the header from the first non-blank line of ``buf``, if there is one (then the
        summary starts); the offset past the lines read, and the number of the line after the
        header."""
        pos = 0
        if not self.lines_done and buf.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark
            pos = 3
        lineno = self.lines_done + 1
        while pos < len(buf):
            cut = buf.find(b"\n", pos)
            raw = buf[pos:cut]
            pos = cut + 1
            if raw.strip():
                obj = decode_line(raw, self.spath, lineno, header=True)
                header = parse_header(obj, self.spath, lineno)
                self.summ = Summary(obj, header, self.spath, sample_rows=self.sample_rows)
                self.summ.add_unknown({f"run.{name}": 1 for name in unknown_fields(obj)}, fields=True)
                break
            lineno += 1
        return pos, lineno + 1


def _count_fields(buf: bytes, start: int) -> dict[str, int]:
    """Unknown fields (`schema.unknown_fields`) of one piece: found on its first ``PROBE_LINES``
    lines, then counted as ``"name":`` over its bytes (no decode per line)."""
    lines = buf[start:].split(b"\n", PROBE_LINES)[:PROBE_LINES]
    objs = [_decoded(raw) for raw in lines if raw.strip()]
    fields = {(o["ev"], name) for o in objs if isinstance(o, dict) for name in unknown_fields(o)}
    return {
        f"{ev}.{name}": max(1, buf.count(json.dumps(name, ensure_ascii=False).encode() + b":", start))
        for ev, name in sorted(fields)
    }


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _read(body: _Body, chunks: Iterator[bytes]) -> Summary:
    """Fold the file in pieces of whole lines, about ``PIECE_BYTES`` each, as the bytes arrive; then
    its last line, if it is complete: its summary. A live log may end mid-line: only whole lines
    are kept, unless the tail is itself complete JSON (then it is a whole line, and gets every check)."""
    tail = b""
    for buf in reader.line_ranges(chunks, PIECE_BYTES):
        cut = buf.rfind(b"\n") + 1
        if cut:
            body.fold(buf[:cut])
        tail = buf[cut:]
    if tail and not tail.isspace():
        try:
            json.loads(tail)
        except (ValueError, UnicodeDecodeError, RecursionError):
            if not body.lines_done:  # not one whole line (yet): not "empty", nor corrupt if still written
                raise LogError(
                    body.spath,
                    None,
                    f"holds no complete line yet ({len(tail)} bytes and no newline; "
                    f"a log still being written, or CR-only line ends?)",
                ) from None
            warnings.warn(tail_warning(body.spath, body.lines_done + 1, len(tail)), stacklevel=3)
        else:
            body.fold(tail + b"\n")
    if body.summ is None:
        raise LogError(body.spath, None, "is empty: a log starts with a 'run' header line")
    body.summ.n_lines = body.lines_done
    return body.summ


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
    got = None
    if max_line_bytes == MAX_LINE_BYTES:
        got = scan_files([path], sample_rows=sample_rows, max_bytes=max_bytes, max_lines=max_lines)
    if got is not None:
        summ = got[0]
    else:  # the exact pass
        chunks = read_chunks(path, max_line_bytes, max_bytes=max_bytes, max_lines=max_lines)
        summ = _read(_Body(str(path), sample_rows), chunks)
        summ.add_source(path)  # the one log file it was read from: its identity for merges
    _check_usable(summ, str(path))
    return summ
