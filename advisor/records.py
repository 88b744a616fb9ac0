"""Builders of rate-log lines (schema v1), so that every writer writes the format the same way
(tests/synth.py and advisor.instrument do; any pipeline may).

Standard library only, so a training script can import it (and :mod:`advisor.instrument`) without
pandas, numpy or torch. docs/log-schema.md is the format in prose; docs/rate-log.schema.json is
the same as a JSON Schema; the reader's checks are in :mod:`advisor.ingest.schema`.

One frozen, keyword-only dataclass per event: :class:`Run` (the header, with its :class:`Queue`
entries), :class:`Step`, :class:`Sync`, :class:`Rates`, :class:`End`. A field is named exactly
as its JSON key, so a record reads like its line (units: seconds for ``t``, ``busy``, ``wait``,
``blocked``, ``dur``, ``window``, ``eta_s``; batches per second for ``bps``/``cap_bps``; tokens
per second for ``tok_s``). Construction validates every field and raises :class:`RecordError`
naming the event and the field, so a bad value fails where it is made, not in the reader days
later. ``None`` means "not logged": the key is left out of the line. Extra keys (readers ignore
them) go in ``extra`` and are written after the known ones; they may not shadow a known key.

``to_dict()`` gives the line as a dict in the documented key order; ``to_json_line()`` the
compact JSON text with its newline. Non-finite numbers are refused (JSON cannot carry them),
except a step's ``loss``, where a diverged NaN becomes "not logged". Integers and floats are kept
as given (a numpy scalar becomes its Python equivalent), so a writer's output is byte-stable.
"""

from __future__ import annotations

import json
import math
import numbers
import time
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from enum import Enum
from typing import Any, ClassVar

SCHEMA_VERSION = 1

__all__ = [
    "SCHEMA_VERSION",
    "Event",
    "EndReason",
    "RecordError",
    "Queue",
    "Run",
    "Step",
    "Sync",
    "Rates",
    "End",
    "Record",
    "from_dict",
]


class Event(str, Enum):
    """The event types of schema v1, in the order a log uses them."""

    RUN = "run"
    STEP = "step"
    SYNC = "sync"
    RATES = "rates"
    END = "end"


class EndReason(str, Enum):
    """Why a log (or one process's part of it) ended."""

    DONE = "done"  # the job finished its planned work
    INTERRUPTED = "interrupted"  # stopped from outside (SIGTERM, Ctrl-C, a time limit) or cut short
    ERROR = "error"  # the process failed; ``msg`` says how


class RecordError(ValueError):
    """A record field has a wrong type or value. The text names the event and the field."""

    def __init__(self, event: str, field_name: str, message: str):
        self.event = event
        self.field = field_name
        super().__init__(f"{event}: field '{field_name}' {message}")


def _plain_number(v: Any) -> Any:
    """``v`` as a Python int or float (numpy scalars included), or raise TypeError."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError
    if type(v) in (int, float):
        return v
    return int(v) if isinstance(v, numbers.Integral) else float(v)


def _number(
    ev: str, name: str, v: Any, *, optional: bool = False, integer: bool = False, minimum: float | None = 0.0
) -> Any:
    if v is None:
        if optional:
            return None
        raise RecordError(ev, name, "is required")
    try:
        v = _plain_number(v)
    except TypeError:
        raise RecordError(ev, name, f"must be a number, got {type(v).__name__} {v!r:.40}") from None
    if isinstance(v, float) and not math.isfinite(v):
        raise RecordError(ev, name, f"must be finite, got {v!r}")
    if integer and not isinstance(v, int):
        if v != int(v):
            raise RecordError(ev, name, f"must be a whole number, got {v!r}")
        v = int(v)
    if minimum is not None and v < minimum:
        raise RecordError(ev, name, f"must be >= {minimum:g}, got {v!r}")
    return v


def _string(ev: str, name: str, v: Any, *, optional: bool = False) -> str | None:
    if v is None:
        if optional:
            return None
        raise RecordError(ev, name, "is required")
    if isinstance(v, Enum):
        v = v.value
    if not isinstance(v, str) or (not optional and not v):
        raise RecordError(ev, name, f"must be a non-empty string, got {type(v).__name__} {v!r:.40}")
    return v


def _extra(ev: str, known: Sequence[str], extra: Any) -> dict[str, Any]:
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise RecordError(ev, "extra", f"must be a mapping of extra keys, got {type(extra).__name__}")
    out = {}
    for k, v in extra.items():
        if not isinstance(k, str):
            raise RecordError(ev, "extra", f"keys must be strings, got {k!r}")
        if k in known:
            raise RecordError(ev, k, "is a schema field; pass it as an argument, not in extra")
        try:
            json.dumps(v, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise RecordError(ev, k, f"cannot be written as JSON ({e})") from None
        out[k] = v
    return out


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)  # normalising a frozen dataclass in __post_init__


class Record:
    """Base of the five records: the JSON form of one log line."""

    EVENT: ClassVar[Event]
    KEYS: ClassVar[tuple[str, ...]]  # JSON keys after "ev", in the order they are written

    def to_dict(self) -> dict[str, Any]:
        """The line as a dict.

        Returns:
            ``ev`` first, then the known keys in `KEYS` order (None left out), then ``extra``.
        """
        d: dict[str, Any] = {"ev": self.EVENT.value}
        for k in self.KEYS:
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        d.update(self.extra)  # type: ignore[attr-defined]
        return d

    def to_json_line(self) -> str:
        """Compact JSON of the line.

        Returns:
            `to_dict` as JSON text without spaces, with its trailing newline.
        """
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False) + "\n"


@dataclass(frozen=True, kw_only=True)
class Queue:
    """A bounded queue of the pipeline: ``feeds`` names the role that takes from it; ``per_worker``:
    one queue of depth ``cap`` per worker of that role (its depth is then logged as a list)."""

    name: str
    feeds: str
    cap: int
    per_worker: bool = False

    def __post_init__(self):
        _string("run", "queues.name", self.name)
        _string("run", "queues.feeds", self.feeds)
        _set(self, "cap", _number("run", f"queues.{self.name}.cap", self.cap, integer=True))
        if not isinstance(self.per_worker, bool):
            raise RecordError(
                "run", f"queues.{self.name}.per_worker", f"must be true or false, got {self.per_worker!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        """The queue's entry in the header's ``queues`` list.

        Returns:
            ``name``, ``feeds`` and ``cap``, then ``per_worker`` only where it is true.
        """
        d: dict[str, Any] = {"name": self.name, "feeds": self.feeds, "cap": self.cap}
        if self.per_worker:
            d["per_worker"] = True
        return d


@dataclass(frozen=True, kw_only=True)
class Run(Record):
    """The header, first line of every file of a run.

    ``roles``: role -> worker count, in pipeline order (producer first, consumer last).
    ``gpus``: GPUs the roles use (default: the sum of the worker counts). ``t0_unix``: the run's
    start as Unix wall-clock seconds: several processes convert their own monotonic clocks
    against it (see :mod:`advisor.instrument`); :meth:`stamped` sets it to now.
    """

    EVENT: ClassVar[Event] = Event.RUN
    KEYS: ClassVar[tuple[str, ...]] = (
        "v",
        "t",
        "run",
        "gpus",
        "roles",
        "queues",
        "token_budget",
        "samples",
        "epochs",
        "hardware",
        "target_model",
        "drafter_model",
        "sync_every",
        "hs_bytes_per_token",
        "t0_unix",
        "gpus_per_worker",
        "gpus_per_node",
        "placement",
        "link_bytes_s",
    )
    run: str
    roles: Mapping[str, int]
    queues: Sequence[Queue] = ()
    gpus: int | None = None
    t: float = 0.0
    v: int = SCHEMA_VERSION
    token_budget: int | None = None
    samples: int | None = None
    epochs: float | None = None
    hardware: str | None = None
    target_model: str | None = None
    drafter_model: str | None = None
    sync_every: int | None = 0
    hs_bytes_per_token: float | None = None
    t0_unix: float | None = None
    gpus_per_worker: Mapping[str, int] | None = None  # role -> GPUs per engine (docs/log-schema.md)
    gpus_per_node: int | None = None
    placement: Mapping[str, Sequence[int]] | None = None
    link_bytes_s: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        ev = "run"
        _string(ev, "run", self.run)
        if self.v != SCHEMA_VERSION:
            raise RecordError(ev, "v", f"must be {SCHEMA_VERSION} (this is schema v{SCHEMA_VERSION}), got {self.v!r}")
        if not isinstance(self.roles, Mapping) or len(self.roles) < 2:
            raise RecordError(
                ev,
                "roles",
                "must map at least a producer and a consumer role to worker counts, "
                f'e.g. {{"target": 7, "drafter": 1}}; got {self.roles!r:.60}',
            )
        roles = {}
        for r, n in self.roles.items():
            _string(ev, "roles", r)
            roles[r] = _number(ev, f"roles.{r}", n, integer=True, minimum=1)
        _set(self, "roles", roles)
        queues = []
        for q in self.queues:
            if isinstance(q, Mapping):
                try:
                    q = Queue(**q)
                except TypeError as e:
                    raise RecordError(ev, "queues", f"entry {q!r:.60} is not a queue ({e})") from None
            if not isinstance(q, Queue):
                raise RecordError(ev, "queues", f"entries must be Queue records, got {type(q).__name__}")
            if q.feeds not in roles:
                raise RecordError(
                    ev, "queues", f"queue '{q.name}' feeds '{q.feeds}', which is not a role ({', '.join(roles)})"
                )
            queues.append(q)
        if len({q.name for q in queues}) != len(queues):
            raise RecordError(ev, "queues", "names must be distinct")
        _set(self, "queues", tuple(queues))
        k = self._engines(ev, roles)
        need = sum(n * k.get(r, 1) for r, n in roles.items())
        gpus = need if self.gpus is None else _number(ev, "gpus", self.gpus, integer=True, minimum=1)
        if gpus < need:
            raise RecordError(ev, "gpus", f"is {gpus} but the roles use {need}")
        _set(self, "gpus", gpus)
        _set(self, "t", _number(ev, "t", self.t))
        for name, lo in (("token_budget", 1), ("samples", 0), ("sync_every", 0)):
            _set(self, name, _number(ev, name, getattr(self, name), optional=True, integer=True, minimum=lo))
        for name in ("epochs", "hs_bytes_per_token", "t0_unix"):
            _set(self, name, _number(ev, name, getattr(self, name), optional=True))
        for name in ("hardware", "target_model", "drafter_model"):
            _string(ev, name, getattr(self, name), optional=True)
        _set(self, "extra", _extra(ev, ("ev",) + self.KEYS, self.extra))

    def _engines(self, ev: str, roles: Mapping[str, int]) -> dict[str, int]:
        """Check and normalise gpus_per_worker, gpus_per_node, placement, link_bytes_s; the GPUs per engine."""
        k: dict[str, int] = {}
        if self.gpus_per_worker is not None:
            if not isinstance(self.gpus_per_worker, Mapping):
                raise RecordError(ev, "gpus_per_worker", 'must map roles to GPUs per worker, e.g. {"target": 2}')
            for r, n in self.gpus_per_worker.items():
                if r not in roles:
                    raise RecordError(ev, "gpus_per_worker", f"names '{r}', which is not a role ({', '.join(roles)})")
                k[r] = _number(ev, f"gpus_per_worker.{r}", n, integer=True, minimum=1)
            _set(self, "gpus_per_worker", dict(k))
        node_gpus = _number(ev, "gpus_per_node", self.gpus_per_node, optional=True, integer=True, minimum=1)
        _set(self, "gpus_per_node", node_gpus)
        if self.placement is not None:
            if not isinstance(self.placement, Mapping):
                raise RecordError(ev, "placement", 'must map roles to node lists, e.g. {"target": [0, 1]}')
            out = {}
            for r, nodes in self.placement.items():
                if r not in roles or len(list(nodes)) != roles[r]:
                    raise RecordError(ev, "placement", f"'{r}' must be a role with one node index per worker")
                out[r] = [_number(ev, f"placement.{r}", x, integer=True) for x in nodes]
            _set(self, "placement", out)
        _set(self, "link_bytes_s", _number(ev, "link_bytes_s", self.link_bytes_s, optional=True))
        return k

    def to_dict(self) -> dict[str, Any]:
        """The header line as a dict.

        Returns:
            As `Record.to_dict`, with ``queues`` (always written, empty or not) as a list of
            `Queue.to_dict` entries.
        """
        d = super().to_dict()
        d["queues"] = [q.to_dict() for q in self.queues]
        return d

    @property
    def producer(self) -> str:
        return next(iter(self.roles))

    @property
    def consumer(self) -> str:
        return list(self.roles)[-1]

    def stamped(self, t0_unix: float | None = None) -> Run:
        """This header with ``t0_unix`` set. Stamp once, then hand the same header to every process
        of the run.

        Args:
            t0_unix: the run's start, Unix wall-clock seconds; None stamps now.

        Returns:
            A copy of this header, checked anew, with ``t0_unix`` set.
        """
        return replace(self, t0_unix=time.time() if t0_unix is None else t0_unix)


@dataclass(frozen=True, kw_only=True)
class Step(Record):
    """One batch done by one worker. ``t``: when the worker was free again (after any blocked
    time); ``busy``: compute seconds; ``wait``: seconds starved for input before it; ``blocked``:
    seconds waiting for room in the output queue after it; ``tokens``: tokens in the batch."""

    EVENT: ClassVar[Event] = Event.STEP
    KEYS: ClassVar[tuple[str, ...]] = (
        "t",
        "role",
        "worker",
        "batch",
        "tokens",
        "seqs",
        "busy",
        "wait",
        "blocked",
        "loss",
    )
    t: float
    role: str
    worker: int
    tokens: int
    busy: float
    batch: int | None = None
    seqs: int | None = None
    wait: float = 0.0
    blocked: float = 0.0
    loss: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        ev = "step"
        _set(self, "role", _string(ev, "role", self.role))
        _set(self, "t", _number(ev, "t", self.t))
        for name in ("worker", "tokens"):
            _set(self, name, _number(ev, name, getattr(self, name), integer=True))
        for name in ("batch", "seqs"):
            _set(self, name, _number(ev, name, getattr(self, name), optional=True, integer=True))
        _set(self, "busy", _number(ev, "busy", self.busy))
        for name in ("wait", "blocked"):  # not logged means none: the reader's reading too
            v = getattr(self, name)
            _set(self, name, _number(ev, name, 0.0 if v is None else v))
        loss = self.loss
        if isinstance(loss, numbers.Real) and not isinstance(loss, bool) and not math.isfinite(loss):
            loss = None  # a diverged loss is "not logged", not a broken line
        _set(self, "loss", _number(ev, "loss", loss, optional=True, minimum=None))
        _set(self, "extra", _extra(ev, ("ev",) + self.KEYS, self.extra))


@dataclass(frozen=True, kw_only=True)
class Sync(Record):
    """A weight/gradient sync among the workers of ``role``: ``dur`` seconds, ending at ``t``."""

    EVENT: ClassVar[Event] = Event.SYNC
    KEYS: ClassVar[tuple[str, ...]] = ("t", "role", "workers", "dur", "bytes")
    t: float
    dur: float
    role: str = "drafter"
    workers: int | None = None
    bytes: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        ev = "sync"
        _set(self, "role", _string(ev, "role", self.role))
        _set(self, "t", _number(ev, "t", self.t))
        _set(self, "dur", _number(ev, "dur", self.dur))
        _set(self, "workers", _number(ev, "workers", self.workers, optional=True, integer=True, minimum=1))
        _set(self, "bytes", _number(ev, "bytes", self.bytes, optional=True))
        _set(self, "extra", _extra(ev, ("ev",) + self.KEYS, self.extra))


def _role_rates(ev: str, name: str, v: Any, optional: bool) -> dict[str, Any] | None:
    if v is None and optional:
        return None
    if not isinstance(v, Mapping):
        raise RecordError(ev, name, f"must map role -> batches/s, got {type(v).__name__} {v!r:.40}")
    return {_string(ev, name, r): _number(ev, f"{name}.{r}", x) for r, x in v.items()}


@dataclass(frozen=True, kw_only=True)
class Rates(Record):
    """A periodic snapshot over the last ``window`` seconds: ``bps`` completions per wall second per
    role (a pool's total); ``cap_bps`` the pool's capacity (workers x batches per busy second);
    ``tok_s`` consumer tokens per second; ``q`` queue depths at ``t`` (a list for a per-worker
    queue); ``eta_s`` seconds left; ``done`` the share of the job done (0..1)."""

    EVENT: ClassVar[Event] = Event.RATES
    KEYS: ClassVar[tuple[str, ...]] = ("t", "window", "bps", "cap_bps", "tok_s", "q", "eta_s", "done")
    t: float
    bps: Mapping[str, float]
    window: float | None = None
    cap_bps: Mapping[str, float] | None = None
    tok_s: float | None = None
    q: Mapping[str, Any] | None = None
    eta_s: float | None = None
    done: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        ev = "rates"
        _set(self, "t", _number(ev, "t", self.t))
        _set(self, "bps", _role_rates(ev, "bps", self.bps, optional=False))
        _set(self, "cap_bps", _role_rates(ev, "cap_bps", self.cap_bps, optional=True))
        for name in ("window", "tok_s", "eta_s", "done"):
            _set(self, name, _number(ev, name, getattr(self, name), optional=True))
        if self.q is not None:
            if not isinstance(self.q, Mapping):
                raise RecordError(ev, "q", f"must map queue -> depth (or list of depths), got {self.q!r:.40}")
            q = {}
            for name, depth in self.q.items():
                _string(ev, "q", name)
                if isinstance(depth, (list, tuple)):
                    q[name] = [_number(ev, f"q.{name}", x) for x in depth]
                else:
                    q[name] = _number(ev, f"q.{name}", depth)
            _set(self, "q", q)
        _set(self, "extra", _extra(ev, ("ev",) + self.KEYS, self.extra))


@dataclass(frozen=True, kw_only=True)
class End(Record):
    """The last line of a file: ``reason`` done | interrupted | error, ``msg`` a free text."""

    EVENT: ClassVar[Event] = Event.END
    KEYS: ClassVar[tuple[str, ...]] = ("t", "reason", "msg")
    t: float
    reason: EndReason | str = EndReason.DONE
    msg: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        ev = "end"
        _set(self, "t", _number(ev, "t", self.t))
        try:
            reason = EndReason(self.reason.value if isinstance(self.reason, Enum) else self.reason)
        except ValueError:
            raise RecordError(
                ev, "reason", f"must be one of {', '.join(r.value for r in EndReason)}, got {self.reason!r}"
            ) from None
        _set(self, "reason", reason.value)
        _string(ev, "msg", self.msg, optional=True)
        _set(self, "extra", _extra(ev, ("ev",) + self.KEYS, self.extra))


_BY_EVENT: dict[str, type[Record]] = {c.EVENT.value: c for c in (Run, Step, Sync, Rates, End)}


def from_dict(obj: Mapping[str, Any]) -> Record:
    """The record of one decoded line; e.g. to hand a header to another process as JSON text:
    ``from_dict(json.loads(text))``.

    Args:
        obj: one decoded line, a JSON object whose ``ev`` names the event.

    Returns:
        The `Run`, `Step`, `Sync`, `Rates` or `End` record; the keys it does not know go to
        ``extra``.

    Raises:
        RecordError: ``obj`` is not a mapping, its ``ev`` is unknown, or a field is missing or bad.
    """
    if not isinstance(obj, Mapping):
        raise RecordError("?", "ev", f"a line must be a JSON object, got {type(obj).__name__}")
    ev = obj.get("ev")
    cls = _BY_EVENT.get(ev)  # type: ignore[arg-type]
    if cls is None:
        raise RecordError(str(ev), "ev", f"must be one of {', '.join(_BY_EVENT)}, got {ev!r}")
    names = {f.name for f in fields(cls)} - {"extra"}
    kw = {k: v for k, v in obj.items() if k in names}
    extra = {k: v for k, v in obj.items() if k not in names and k != "ev"}
    try:
        return cls(**kw, extra=extra)
    except TypeError as e:  # a required field missing
        missing = [
            f.name
            for f in fields(cls)
            if f.name not in kw and f.name != "extra" and f.default is MISSING and f.default_factory is MISSING
        ]
        raise RecordError(str(ev), missing[0] if missing else "?", f"is required ({e})") from None
