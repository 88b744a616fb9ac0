"""The exact pass over a piece of a log body: each line decoded by ``json`` and checked by `schema.validate_event`.

This is the pass that names the first bad line (file, line, field), and reads what the fast pass
(`advisor.ingest.scan`, polars) gives up on. A piece (whole lines of the body, from
`advisor.ingest.stream`) is folded into the file's summary as a block of columns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from advisor.errors import LogError, cut_text
from advisor.ingest.frames import RATES_SCALARS
from advisor.ingest.schema import RunHeader, validate_event
from advisor.ingest.summary import SYNC_FIELDS, Summary
from advisor.records import End


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
    if codes:
        summ.add_steps({n: np.asarray(v, dtype=np.float64) for n, v in step.items()}, np.asarray(codes, np.int64))
    if sync["t"]:
        summ.add_syncs({n: np.asarray(v, dtype=np.float64) for n, v in sync.items()})
    if rates_objs:
        summ.add_rates(rates_columns(rates_objs, header))
    summ.add_unknown(unknown)
    if end_obj is not None:
        summ.end = end_obj
