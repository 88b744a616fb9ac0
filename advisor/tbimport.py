"""Rate logs from TensorBoard scalars: per-role throughput a pipeline already logs, as ``rates`` events.

Event files are read with TensorBoard's own record reader and ``Event`` protobuf (the
``tensorboard`` extra), imported only when an event file is read. A CRC mismatch is a corrupt
file (an error naming the file and byte offset); a last record cut short (a writer still
running) is skipped with a warning. Each ``Summary.Value`` gives a tag and a scalar: its
``simple_value`` or a one-element numeric ``tensor`` (float, double, int32, int64, from its value
lists or ``tensor_content``); anything else is skipped. A value list of the wrong wire type is a
corrupt record.

Mapping. ``--map KEY=TAG`` names the tag that holds each rates field:

    <role>.bps       completions per second of the role's pool       -> rates.bps[role]
    <role>.cap_bps   the pool's capacity (workers x batches/busy s)  -> rates.cap_bps[role]
    tok_s, eta_s, done                                               -> the same rates fields
    q.<queue>        the queue's depth                               -> rates.q[queue]

At least one ``<role>.bps`` is needed. Snapshots: one per global step at which any mapped
``bps`` tag was logged; every field takes its tag's latest value at or before that step; a
snapshot's ``t`` is the latest wall time of the bps values it holds, minus the earliest wall time
in the files (the writer's start); ``window`` is the time since the previous snapshot. A step
logged twice (a restart) keeps the later value. The header (roles in pipeline order, GPUs,
queues, token budget...) is not in TensorBoard and is given by the caller.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.errors import LogError, LogWarning, SettingsError, short_repr
from advisor.records import End, Queue, Rates, Run
from advisor.settings import MAX_GPUS, MAX_TIME_S, parse_role_values

_EXTRA = "pip install 'dflash-advisor[tensorboard]'"
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64 = 1, 2, 3, 9
_CONTENT = {_DT_FLOAT: "<f", _DT_DOUBLE: "<d", _DT_INT32: "<i", _DT_INT64: "<q"}
_VALUE_FIELDS = {5, 6, 7, 10}  # TensorProto's float_val, double_val, int_val, int64_val


def _events(path: Path) -> Iterator[tuple[int, Any]]:
    """(byte offset, ``Event``) of each TFRecord, by TensorBoard's reader (CRCs verified)."""
    try:
        from google.protobuf.message import DecodeError
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
    except ImportError:
        raise LogError(str(path), None, f"reading TensorBoard event files needs tensorboard: {_EXTRA}") from None
    try:
        size = path.stat().st_size
        reader = pywrap_tensorflow.PyRecordReader_New(str(path))
    except (OSError, errors.OpError) as e:
        raise LogError(str(path), None, f"cannot be read: {getattr(e, 'strerror', None) or e}") from None
    pos = 0
    try:
        while True:
            try:
                reader.GetNext()
            except errors.OutOfRangeError:
                return
            except OSError as e:
                raise LogError(str(path), None, f"cannot be read: {e.strerror or e}") from None
            except errors.DataLossError as e:
                if "truncated" in e.message:
                    warnings.warn(
                        LogWarning(
                            f"{path}: last record at byte {pos} is incomplete (a writer still running?); "
                            f"skipped {size - pos} bytes"
                        ),
                        stacklevel=3,
                    )
                    return
                what = "length CRC mismatch (not a TensorBoard event file, or corrupt)"
                if "header" not in e.message:
                    what = "data CRC mismatch (corrupt event file)"
                raise LogError(str(path), None, f"record at byte {pos}: {what}") from None
            data = reader.record()
            try:
                yield pos, Event.FromString(data)
            except DecodeError as e:
                raise LogError(str(path), None, f"record at byte {pos}: not a TensorBoard Event ({e})") from None
            pos += len(data) + 16  # length, its CRC, the data, its CRC
    finally:
        reader.file_handle.close()


def _tensor_scalar(t) -> float | None:
    """The value of a 0-d (or one-element) numeric TensorProto, else None."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    for u in UnknownFieldSet(t):  # a value list of the wrong wire type (found by fuzzing)
        if u.field_number in _VALUE_FIELDS:
            raise ValueError(f"tensor field {u.field_number} has wire type {u.wire_type}")
    if any(d.size != 1 for d in t.tensor_shape.dim):
        return None
    if t.tensor_content:
        fmt = _CONTENT.get(t.dtype)
        if fmt is None or len(t.tensor_content) != struct.calcsize(fmt):
            return None
        v = float(struct.unpack(fmt, t.tensor_content)[0])
    else:
        vals = [*t.float_val, *t.double_val, *t.int_val, *t.int64_val]
        if len(vals) != 1:
            return None
        v = float(vals[0])
    return _f32(v) if t.dtype == _DT_FLOAT else v


def _f32(v: float) -> float:
    """A float32 value as the decimal it was most likely logged as (0.85, not 0.8500000238418579)."""
    return float(f"{v:.7g}")


@dataclass(frozen=True)
class Scalar:
    """One logged scalar: the global step, the Unix wall time it was written, its value."""

    step: int
    wall_time: float
    value: float


def _event_scalars(event: Any) -> list[tuple[str, float]]:
    """(tag, value) of each scalar of an ``Event``."""
    out = []
    for v in event.summary.value:
        kind = v.WhichOneof("value")
        value = (
            _f32(v.simple_value) if kind == "simple_value" else _tensor_scalar(v.tensor) if kind == "tensor" else None
        )
        if value is not None:
            out.append((v.tag, value))
    return out


def event_files(paths: Iterable[str | Path]) -> list[Path]:
    """The event files named by ``paths``: files as given, and directories' ``*tfevents*`` files."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and "tfevents" in f.name)
            if not found:
                raise LogError(str(p), None, "holds no TensorBoard event file (*tfevents*)")
            files += found
        elif p.exists():
            files.append(p)
        else:
            raise LogError(str(p), None, "no such file or directory")
    return files


def read_scalars(paths: Iterable[str | Path]) -> tuple[dict[str, list[Scalar]], float | None]:
    """Every scalar in the event files, by tag, in file order; and the earliest wall time seen."""
    by_tag: dict[str, list[Scalar]] = {}
    first_wall: float | None = None
    for f in event_files(paths):
        for pos, event in _events(f):
            try:
                scalars = _event_scalars(event)
            except ValueError as e:
                raise LogError(str(f), None, f"record at byte {pos}: not a TensorBoard Event ({e})") from None
            wall = event.wall_time
            first_wall = wall if first_wall is None else min(first_wall, wall)
            for tag, value in scalars:
                by_tag.setdefault(tag, []).append(Scalar(event.step, wall, value))
    return by_tag, first_wall


def parse_roles(text: str) -> dict[str, int]:
    """``"target=7,drafter=1"`` -> {"target": 7, "drafter": 1}, in pipeline order, at least two roles."""
    out = parse_role_values("--roles", text, whole=True, lo=1, hi=MAX_GPUS, example="target=7,drafter=1")
    if len(out) < 2:
        raise SettingsError(
            "--roles", f"name at least a producer and a consumer role, e.g. target=7,drafter=1; got {short_repr(text)}"
        )
    return out


def parse_queue(text: str, roles: Sequence[str]) -> Queue:
    """``"hs:drafter:20"`` (name:feeds:cap) -> a Queue."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[2].strip().isdigit():
        raise ValueError(f"--queue {text!r}: expected NAME:ROLE:CAP, e.g. hs:drafter:20")
    name, feeds, cap = parts[0].strip(), parts[1].strip(), int(parts[2])
    if feeds not in roles:
        raise ValueError(f"--queue {text!r}: {feeds!r} is not a role of --roles ({', '.join(roles)})")
    return Queue(name=name, feeds=feeds, cap=cap)


def parse_map(
    items: Sequence[str], roles: Sequence[str], queues: Sequence[str] = (), *, require_bps: bool = True
) -> dict[str, str]:
    """``["drafter.bps=train/drafter_bps", ...]`` -> {rates key: tag}; errors say what is wrong."""
    out: dict[str, str] = {}
    allowed = [f"{r}.{k}" for r in roles for k in ("bps", "cap_bps")] + ["tok_s", "eta_s", "done"]
    allowed += [f"q.{q}" for q in queues]
    for item in items:
        key, sep, tag = item.partition("=")
        key, tag = key.strip(), tag.strip()
        if not sep or not key or not tag:
            raise ValueError(f"--map {item!r}: expected KEY=TAG, e.g. drafter.bps=train/drafter_bps")
        if key not in allowed:
            raise ValueError(f"--map {item!r}: unknown key {key!r}; one of {', '.join(allowed)}")
        if key in out:
            raise ValueError(f"--map {item!r}: {key!r} is mapped twice")
        out[key] = tag
    if require_bps and not any(k.endswith(".bps") for k in out):
        raise ValueError(
            f"--map: map at least one <role>.bps (completions per second of a role's pool), e.g. {roles[-1]}.bps=TAG"
        )
    return out


def tags_text(scalars: Mapping[str, list[Scalar]]) -> str:
    """The tags a file has, for an error that names a missing one: the first 12, and how many more."""
    have = sorted(scalars)
    return ", ".join(have[:12]) + (f" and {len(have) - 12} more" if len(have) > 12 else "") or "no scalars"


def _latest_at(series: list[Scalar], step: int) -> Scalar | None:
    best = None
    for s in series:  # series is short (one value per logging interval)
        if s.step <= step and (best is None or (s.step, s.wall_time) >= (best.step, best.wall_time)):
            best = s
    return best


def to_records(
    scalars: Mapping[str, list[Scalar]], first_wall: float, mapping: Mapping[str, str], *, source: str = "TensorBoard"
) -> list[Rates]:
    """The rates snapshots of the mapped tags (see the module docstring for the rules)."""
    missing = [t for t in mapping.values() if t not in scalars]
    if missing:
        raise LogError(source, None, f"has no scalar tag {missing[0]!r} (it has: {tags_text(scalars)})")
    bps_keys = [k for k in mapping if k.endswith(".bps")]
    steps = sorted({s.step for k in bps_keys for s in scalars[mapping[k]]})
    out: list[Rates] = []
    prev_t = 0.0
    for step in steps:
        got = {key: s for key, tag in mapping.items() if (s := _latest_at(scalars[tag], step)) is not None}
        t = round(max(s.wall_time for k, s in got.items() if k in bps_keys and s.step == step) - first_wall, 6)
        if t > MAX_TIME_S:  # what a log's reader refuses, import-tb does not write
            raise LogError(
                source,
                None,
                f"step {step}: wall time {t:g} s after the first event is more than the "
                f"limit of a log's time ({MAX_TIME_S:g} s; a corrupt wall_time?)",
            )
        if t <= prev_t and out:
            continue  # older than the snapshot before it (logged only before a restart that redid it)
        fields = {"t": t, "window": round(t - prev_t, 6) if t > prev_t else None}
        per: dict[str, dict[str, float]] = {"bps": {}, "cap_bps": {}, "q": {}}  # role's or queue's
        for key, s in got.items():
            v = max(s.value, 0.0) if key != "done" else min(max(s.value, 0.0), 1.0)
            name, _, what = key.rpartition(".")
            if what in ("bps", "cap_bps"):
                per[what][name] = v
            elif key.startswith("q."):
                per["q"][key[2:]] = v
            else:
                fields[key] = v
        out.append(Rates(bps=per["bps"], cap_bps=per["cap_bps"] or None, q=per["q"] or None, **fields))
        prev_t = t
    if not out:
        raise LogError(source, None, "the mapped bps tags hold no values")
    return out


def write_rate_log(header: Run, snaps: Sequence[Rates], out: str | Path, *, ended: bool = False) -> tuple[Path, int]:
    """Write ``header`` and the rates snapshots (and ``end`` done when ``ended``)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(header.to_json_line())
        for r in snaps:
            fh.write(r.to_json_line())
        if ended:
            fh.write(End(t=snaps[-1].t, reason="done").to_json_line())
    return out, len(snaps)
