"""Rate-log lines, schema v1: one record per event, its fields the one definition of the format.

Standard library only, so a training script can import it (and :mod:`advisor.instrument`) without
pandas, numpy or torch. docs/log-schema.md is the format in prose, docs/rate-log.schema.json a JSON
Schema of it (tests/test_log_schema_json.py holds the two to these records).

One frozen, keyword-only dataclass per event: :class:`Run` (the header, with its :class:`Queue`
entries), :class:`Step`, :class:`Sync`, :class:`Rates`, :class:`End`. A field is named as its
JSON key (seconds for ``t``, ``busy``, ``wait``, ``blocked``, ``dur``, ``window``, ``eta_s``;
batches per second for ``bps``/``cap_bps``; tokens per second for ``tok_s``), and carries its
:class:`Spec`: type, whether a line must hold it, bounds. One check of a value
(:func:`check_value`), of a header (:func:`check_header`), of a rates line's maps
(:func:`check_rates`) and of a step's worker (:func:`check_worker`) serves the writer
(:class:`RecordError` names the event and the field) and the reader (`advisor.ingest.schema`,
which names the file and line), with the same messages; the fast scan (`advisor.ingest.scan`)
checks its columns by the same specs. ``None`` means "not
logged": the key is left out of the line. Extra keys go in ``extra``, written after the known
ones; a few the reader knows are listed in ``EXTRA_FIELDS``. Non-finite numbers are refused
(JSON cannot carry them), except a step's ``loss``, where a diverged NaN becomes "not logged".
Numbers are kept as given (a numpy scalar becomes its Python equivalent), so output is byte-stable.
"""

from __future__ import annotations

import json
import math
import numbers
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from enum import Enum
from typing import Any, ClassVar

from advisor.errors import short_repr
from advisor.settings import MAX_GPUS, MAX_GPUS_PER_WORKER, MAX_QUEUE_CAP, MAX_TIME_S

SCHEMA_VERSION = 1
MAX_TOKENS = 1 << 31  # tokens in one batch
MAX_INT = 1 << 53  # whole numbers exact as floats

__all__ = [
    "SCHEMA_VERSION",
    "Event",
    "EndReason",
    "RecordError",
    "Spec",
    "Queue",
    "Run",
    "Step",
    "Sync",
    "Rates",
    "End",
    "Record",
    "EVENTS",
    "WORKERS",
    "RATE",
    "ENGINE_GPUS",
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
        self.message = message
        super().__init__(f"{event}: field '{field_name}' {message}")


@dataclass(frozen=True)
class Spec:
    """One field of a line: its JSON type (``float``, ``int``, ``str``, or ``object``: a map or list
    that its record checks), whether every line of the event holds it, and its bounds (a number's
    value, a text's length; a whole number's maximum is 2**53 unless lower). A text with a minimum
    length is a name: printable (no lone surrogate), at most ``MAX_NAME`` characters."""

    kind: type
    required: bool = False
    minimum: float | None = 0.0
    maximum: float | None = None
    choices: tuple[str, ...] = ()  # a text's values, where it has a few


MAX_NAME = 200  # characters of a name (a role, queue, unit or probe id)
# a header's ``probe`` (in ``extra``): this run is one segment of a probe (docs/log-schema.md)
PROBE_FIELDS = {
    "id": Spec(str, True, 1, MAX_NAME),
    "segment": Spec(int, True, 1, MAX_INT),
    "segments": Spec(int, False, 1, MAX_INT),
    "round": Spec(int, False, 1, MAX_INT),
}
WORKERS = Spec(int, True, 1, MAX_GPUS)  # a role's worker count, in ``roles``
RATE = Spec(float, True)  # one role's batches/s, in ``bps`` and ``cap_bps``
_NAME = Spec(str, True, 1, MAX_NAME)  # a role or queue name
_DEPTH = Spec(float)  # a queue's depth, in ``q``
ENGINE_GPUS = Spec(int, True, 1, MAX_GPUS_PER_WORKER)  # GPUs of one engine, in ``gpus_per_worker``
CAP_BPS_KINDS = ("lower", "upper")  # what a role's logged cap_bps is: a lower bound, an upper estimate
_FLOAT_MAX = 1.7976931348623157e308


def _f(
    kind: type, default: Any = MISSING, *, required: bool | None = None, minimum=0.0, maximum=None, choices=()
) -> Any:
    """A record field carrying its `Spec`; a line must hold it where the constructor must."""
    if kind is int and maximum is None:
        maximum = MAX_INT
    if kind is str and minimum and maximum is None:
        maximum = MAX_NAME
    need = default is MISSING if required is None else required
    return field(default=default, metadata={"spec": Spec(kind, need, minimum, maximum, choices)})


def has_surrogate(s: str) -> bool:
    """Whether ``s`` holds a lone UTF-16 surrogate (JSON allows "\\ud800"; UTF-8 output does not).

    Args:
        s: the text.

    Returns:
        True where ``s`` cannot be encoded as UTF-8.
    """
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_value(spec: Spec, v: Any) -> Any:
    """One value checked against its field's spec: the writer's and the reader's one check.

    Args:
        spec: the field's `Spec`.
        v: the value, not None.

    Returns:
        ``v``, a number made plain (a numpy scalar its Python equivalent, a whole float an int
        where the field is whole).

    Raises:
        ValueError: its text is the message both give, e.g. "must be a number >= 0, got -1".
    """
    if spec.kind is bool:
        if not isinstance(v, bool):
            raise ValueError(f"must be true or false, got {short_repr(v)}")
        return v
    if spec.kind is str:
        v = v.value if isinstance(v, Enum) else v
        if not isinstance(v, str):
            raise ValueError(f"must be a string, got {type(v).__name__} {short_repr(v)}")
        if spec.minimum and (len(v) < spec.minimum or len(v) > spec.maximum or has_surrogate(v)):
            raise ValueError(
                f"must be a non-empty string of at most {spec.maximum:g} printable characters, got {short_repr(v)}"
            )
        if spec.choices and v not in spec.choices:
            raise ValueError(f"must be one of {', '.join(spec.choices)}, got {short_repr(v)}")
        return v
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise ValueError(f"must be a number, got {type(v).__name__} {short_repr(v)}")
    if type(v) not in (int, float):  # a numpy scalar: its Python equivalent
        v = int(v) if isinstance(v, numbers.Integral) else float(v)
    if isinstance(v, int) and not -_FLOAT_MAX <= v <= _FLOAT_MAX:  # math.isfinite would overflow
        raise ValueError(f"is too large ({short_repr(v)})")
    if not math.isfinite(v):
        raise ValueError(f"must be finite, got {v!r}")
    if spec.kind is int and not isinstance(v, int):
        if v != int(v):
            raise ValueError(f"must be a whole number, got {v!r}")
        v = int(v)
    if spec.minimum is not None and v < spec.minimum:
        raise ValueError(f"must be a number >= {spec.minimum:g}, got {short_repr(v)}")
    if spec.maximum is not None and v > spec.maximum:
        raise ValueError(f"is {short_repr(v)}, more than the limit {spec.maximum:g}")
    return v


def _check(ev: str, name: str, spec: Spec, v: Any, what: str = "") -> Any:
    """``v`` checked by `check_value`, or `RecordError` naming ``name`` (``what``: the part of it ``v`` is)."""
    lead = f"{what} " if what else ""
    if v is None:
        raise RecordError(ev, name, f"{lead}is missing")
    try:
        return check_value(spec, v)
    except ValueError as e:
        raise RecordError(ev, name, f"{lead}{e}") from None


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)  # normalising a frozen dataclass in __post_init__


class Record:
    """Base of the five records: the JSON form of one log line."""

    EVENT: ClassVar[Event]
    SPECS: ClassVar[dict[str, Spec]]  # the specs of the record's own fields, in line order
    KEYS: ClassVar[tuple[str, ...]]  # the record's JSON keys after "ev", in the order they are written
    EXTRA_FIELDS: ClassVar[dict[str, Spec]] = {}  # keys a writer passes in ``extra`` that readers read
    FIELDS: ClassVar[dict[str, Spec]]  # every key a line of the event may hold ("ev" apart): both above

    def __post_init__(self):
        ev = self.EVENT.value
        for name, spec in self.SPECS.items():
            v = getattr(self, name)
            if spec.kind is not object and (v is not None or spec.required):
                _set(self, name, _check(ev, name, spec, v))
        self._check_rest(ev)
        self._check_extra(ev)

    def _check_rest(self, ev: str) -> None:
        """The record's own rules beyond its fields' specs."""

    def _check_extra(self, ev: str) -> None:
        """``extra`` made a dict of JSON values, none a schema field, the known ones checked."""
        extra = {} if self.extra is None else self.extra  # type: ignore[attr-defined]
        if not isinstance(extra, Mapping):
            raise RecordError(ev, "extra", f"must be a mapping of extra keys, got {type(extra).__name__}")
        out = {}
        for k, v in extra.items():
            if not isinstance(k, str):
                raise RecordError(ev, "extra", f"keys must be strings, got {k!r}")
            if k == "ev" or k in self.KEYS:
                raise RecordError(ev, k, "is a schema field; pass it as an argument, not in extra")
            spec = self.EXTRA_FIELDS.get(k)
            if v is not None and spec is not None and spec.kind is not object:
                v = _check(ev, k, spec, v)
            try:
                json.dumps(v, allow_nan=False)
            except (TypeError, ValueError) as e:
                raise RecordError(ev, k, f"cannot be written as JSON ({e})") from None
            out[k] = v
        _set(self, "extra", out)

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

    SPECS: ClassVar[dict[str, Spec]]

    name: str = _f(str, minimum=1)
    feeds: str = _f(str)
    cap: int = _f(int, maximum=MAX_QUEUE_CAP)
    per_worker: bool = _f(bool, False)

    def __post_init__(self):
        for name, spec in Queue.SPECS.items():
            _set(self, name, _check("run", name, spec, getattr(self, name)))

    def to_dict(self) -> dict[str, Any]:
        """The queue's entry in the header's ``queues`` list.

        Returns:
            ``name``, ``feeds`` and ``cap``, then ``per_worker`` only where it is true.
        """
        d: dict[str, Any] = {"name": self.name, "feeds": self.feeds, "cap": self.cap}
        if self.per_worker:
            d["per_worker"] = True
        return d


def default_placement(
    roles: Mapping[str, int], gpus_per_worker: Mapping[str, int], gpus_per_node: int | None
) -> dict[str, tuple[int, ...]]:
    """Packed placement: the workers in pipeline order (a role's worker 0 first) fill node 0, then
    node 1, ...; a worker that does not fit in what is left of a node starts the next one.

    Args:
        roles: role -> worker count, in pipeline order.
        gpus_per_worker: role -> GPUs per engine (roles not named hold 1).
        gpus_per_node: GPUs per node; None: one node.

    Returns:
        role -> the node of each worker.
    """
    out: dict[str, tuple[int, ...]] = {}
    node, used = 0, 0
    for role, n in roles.items():
        k = int(gpus_per_worker.get(role, 1))
        nodes = []
        for _ in range(n):
            if gpus_per_node and used + k > gpus_per_node:
                node, used = node + 1, 0
            nodes.append(node)
            used += k
        out[role] = tuple(nodes)
    return out


def _by_role(h: Mapping[str, Any], key: str, roles: Mapping[str, int], shape: str) -> Iterator[tuple[str, Any]]:
    """The entries of the map ``h[key]`` (none where absent), each key checked as it comes to be a
    role in 'roles' (``shape``: the message where it is no map)."""
    raw = h.get(key)
    if raw is not None and not isinstance(raw, Mapping):
        raise RecordError("run", key, shape)
    for name, v in (raw or {}).items():
        if name not in roles:
            raise RecordError("run", key, f"names '{short_repr(name)}', which is not a role in 'roles'")
        yield name, v


def _roles(raw: Any) -> dict[str, int]:
    """``roles``: two or more printable names, each with 1..MAX_GPUS workers, MAX_GPUS in all."""
    if not isinstance(raw, Mapping) or not raw:
        raise RecordError("run", "roles", 'must be an object of role -> worker count, e.g. {"target":7,"drafter":1}')
    if len(raw) < 2:
        raise RecordError("run", "roles", "must name at least a producer and a consumer role")
    roles: dict[str, int] = {}
    for name, n in raw.items():
        if not isinstance(name, str) or not name or has_surrogate(name) or len(name) > MAX_NAME:
            raise RecordError("run", "roles", f"role names must be non-empty printable strings, got {short_repr(name)}")
        roles[name] = _check("run", "roles", WORKERS, n, f"worker count of role '{name}'")
    if sum(roles.values()) > MAX_GPUS:
        raise RecordError("run", "roles", f"use {sum(roles.values())} GPUs, more than the limit {MAX_GPUS}")
    return roles


def _probe(raw: Any) -> None:
    """The header's ``probe`` (docs/log-schema.md): ``{"id", "segment", "segments", "round"}``."""
    if not isinstance(raw, Mapping):
        raise RecordError(
            "run",
            "probe",
            f'must be an object like {{"id": "p1", "segment": 1, "segments": 4, "round": 1}}, got {short_repr(raw)}',
        )
    got = {
        n: _check("run", "probe", s, raw.get(n), n)
        for n, s in PROBE_FIELDS.items()
        if s.required or raw.get(n) is not None
    }
    seg, segs = got["segment"], got.get("segments")
    if segs is not None and seg > segs:
        raise RecordError("run", "probe", f"segment {seg} of {segs}: a segment's number is at most 'segments'")


def _scalar(h: Mapping[str, Any], name: str) -> Any:
    """Header field ``name``, a number or a text, checked by its spec; None where absent and optional."""
    spec = Run.SPECS[name]
    return _check("run", name, spec, h.get(name)) if spec.required or h.get(name) is not None else None


def _engines(h: Mapping[str, Any], roles: Mapping[str, int], gpus: int | None) -> dict[str, Any]:
    """gpus_per_worker, gpus, gpus_per_node and placement of a header, checked against the roles."""
    k: dict[str, int] = {}
    shape = 'must be an object of role -> GPUs per worker, e.g. {"target": 2}'
    for name, n in _by_role(h, "gpus_per_worker", roles, shape):
        k[name] = _check("run", "gpus_per_worker", ENGINE_GPUS, n, f"GPUs per worker of role '{name}'")
    need = sum(n * k.get(r, 1) for r, n in roles.items())
    if need > MAX_GPUS:
        raise RecordError("run", "gpus_per_worker", f"the engines hold {need} GPUs, more than the limit {MAX_GPUS}")
    g = need if gpus is None else gpus
    if g < need:
        raise RecordError("run", "gpus", f"is {g} but the roles' engines hold {need} GPUs")
    gpn = _scalar(h, "gpus_per_node")
    if gpn is not None and max([1, *k.values()]) > gpn:
        raise RecordError(
            "run",
            "gpus_per_node",
            f"is {gpn}, but an engine holds {max(k.values())} GPUs (an engine never spans nodes)",
        )
    placement = None if h.get("placement") is None else {}
    nodes = -(-g // gpn) if gpn else 1
    shape = 'must be an object of role -> node of each worker, e.g. {"target": [0, 1]}'
    for name, lst in _by_role(h, "placement", roles, shape):
        if (
            not isinstance(lst, (list, tuple))
            or len(lst) != roles[name]
            or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < nodes for x in lst)
        ):
            raise RecordError(
                "run",
                "placement",
                f"'{name}' must list one node index (0..{nodes - 1}) per worker, {roles[name]} in all",
            )
        placement[name] = tuple(lst)
    if placement is not None and gpn:
        full = default_placement(roles, k, gpn)
        full.update(placement)
        for node in range(nodes):
            held = sum(k.get(r, 1) for r, lst in full.items() for x in lst if x == node)
            if held > gpn:
                raise RecordError("run", "placement", f"puts {held} GPUs on node {node}, which holds {gpn}")
    return {"gpus": g, "gpus_per_worker": k, "placement": placement}


def _queues(raw: Any, roles: Mapping[str, int]) -> tuple[Queue, ...]:
    """``queues``: a list of queues (records or objects), each feeding a role, names unique."""
    if raw is not None and not isinstance(raw, (list, tuple)):
        raise RecordError(
            "run",
            "queues",
            f'must be a list of queue objects like {{"name":"hs","feeds":"drafter","cap":20}}, '
            f"got {type(raw).__name__} {short_repr(raw)}",
        )
    queues: list[Queue] = []
    for i, q in enumerate(raw or ()):
        if not isinstance(q, (Queue, Mapping)):
            raise RecordError("run", "queues", f"entry {i} must be an object")
        try:
            if isinstance(q, Mapping):
                missing = [n for n, s in Queue.SPECS.items() if s.required and q.get(n) is None]
                if missing:
                    raise RecordError("run", missing[0], "is missing")
                q = Queue(**{n: q[n] for n in Queue.SPECS if n in q})
        except RecordError as e:
            raise RecordError("run", "queues", f"entry {i}: {e.field} {e.message}") from None
        if q.feeds not in roles:
            raise RecordError("run", "queues", f"queue '{q.name}' feeds '{q.feeds}', which is not a role in 'roles'")
        if any(x.name == q.name for x in queues):
            raise RecordError("run", "queues", f"queue name '{q.name}' appears twice")
        queues.append(q)
    return tuple(queues)


def check_header(h: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a ``run`` header (its line, or a `Run`'s fields and extras) checked, in a fixed
    order so that the first bad field is the one named: the version, ``t``, the roles, ``gpus``,
    the known extras, ``probe``, ``cap_bps_kind``, the engines, ``link_bytes_s``, the queues, then
    the other numbers and texts. The writer's and the reader's one check of a header.

    Args:
        h: the header's fields by JSON key; None or absent is "not logged".

    Returns:
        The header's own fields (`Run.KEYS` but ``v``), normalised: ``gpus`` filled in,
        ``gpus_per_worker`` a dict, ``placement`` tuples, ``queues`` `Queue` records.

    Raises:
        RecordError: the first bad field, named.
    """
    v = h.get("v", SCHEMA_VERSION)
    if v != SCHEMA_VERSION or isinstance(v, bool):
        raise RecordError("run", "v", f"schema version {v!r} is not supported (this advisor reads v{SCHEMA_VERSION})")
    _scalar(h, "t")
    roles = _roles(h.get("roles"))
    gpus = _scalar(h, "gpus")
    if gpus is not None and gpus < sum(roles.values()):
        raise RecordError("run", "gpus", f"is {gpus} but the roles use {sum(roles.values())} GPUs")
    for name, spec in Run.EXTRA_FIELDS.items():
        x = h.get(name)
        if x is not None and spec.kind is not object:
            _check("run", name, spec, x)
    if h.get("probe") is not None:
        _probe(h["probe"])
    shape = f"must be an object of role -> kind, got {short_repr(h.get('cap_bps_kind'))}"
    for name, kind in _by_role(h, "cap_bps_kind", roles, shape):
        if kind not in CAP_BPS_KINDS:
            raise RecordError(
                "run",
                "cap_bps_kind",
                f"kind of role '{name}' must be one of {', '.join(CAP_BPS_KINDS)}, got {short_repr(kind)}",
            )
    engines = _engines(h, roles, gpus)
    link = _scalar(h, "link_bytes_s")
    if link is not None and not link > 0:
        raise RecordError("run", "link_bytes_s", "must be bytes/s above 0")
    engines["queues"] = _queues(h.get("queues"), roles)
    return {n: _scalar(h, n) for n, s in Run.SPECS.items() if s.kind is not object} | {"roles": roles, **engines}


@dataclass(frozen=True, kw_only=True)
class Run(Record):
    """The header, first line of every file of a run.

    ``roles``: role -> worker count, in pipeline order (producer first, consumer last).
    ``gpus``: GPUs the roles use (default: the sum of the worker counts). ``t0_unix``: the run's
    start as Unix wall-clock seconds: several processes convert their own monotonic clocks
    against it (see :mod:`advisor.instrument`); :meth:`stamped` sets it to now.
    """

    EVENT: ClassVar[Event] = Event.RUN
    EXTRA_FIELDS: ClassVar[dict[str, Spec]] = {  # docs/log-schema.md
        "device": Spec(str),
        "physical_gpus": Spec(int, maximum=MAX_INT),
        "cores": Spec(int, minimum=1, maximum=MAX_INT),
        "probe": Spec(object),
        "cap_bps_kind": Spec(object),
        "unit": Spec(str, minimum=1, maximum=MAX_NAME),
    }
    v: int = _f(object, SCHEMA_VERSION)
    t: float = _f(float, 0.0, required=True, maximum=MAX_TIME_S)
    run: str = _f(str, required=False)
    gpus: int | None = _f(int, None, minimum=1, maximum=MAX_GPUS)
    roles: Mapping[str, int] = _f(object)
    queues: Sequence[Queue] = _f(object, ())
    token_budget: int | None = _f(int, None, minimum=1, maximum=MAX_TOKENS)
    samples: int | None = _f(int, None)
    epochs: float | None = _f(float, None, maximum=MAX_INT)
    hardware: str | None = _f(str, None)
    target_model: str | None = _f(str, None)
    drafter_model: str | None = _f(str, None)
    sync_every: int | None = _f(int, 0)
    hs_bytes_per_token: float | None = _f(float, None, maximum=MAX_INT)
    t0_unix: float | None = _f(float, None)
    gpus_per_worker: Mapping[str, int] | None = _f(object, None)  # role -> GPUs per engine
    gpus_per_node: int | None = _f(int, None, minimum=1, maximum=MAX_GPUS)
    placement: Mapping[str, Sequence[int]] | None = _f(object, None)
    link_bytes_s: float | None = _f(float, None, maximum=MAX_INT)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self._check_extra("run")
        given = self.gpus_per_worker
        for k, v in check_header({**self.extra, **{k: getattr(self, k) for k in self.KEYS}}).items():
            _set(self, k, v)
        if given is None:  # not logged: left out of the line
            _set(self, "gpus_per_worker", None)

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
    seconds waiting for room in the output queue after it; ``tokens``: tokens in the batch;
    ``xfer`` (in ``extra``): seconds of busy importing the batch's hidden states."""

    EVENT: ClassVar[Event] = Event.STEP
    EXTRA_FIELDS: ClassVar[dict[str, Spec]] = {"xfer": Spec(float, maximum=MAX_TIME_S)}
    t: float = _f(float, maximum=MAX_TIME_S)
    role: str = _f(str, minimum=1)
    worker: int = _f(int, maximum=MAX_GPUS)
    batch: int | None = _f(int, None)
    tokens: int = _f(int, maximum=MAX_TOKENS)
    seqs: int | None = _f(int, None, maximum=MAX_TOKENS)
    busy: float = _f(float, maximum=MAX_TIME_S)
    wait: float = _f(float, 0.0, maximum=MAX_TIME_S)
    blocked: float = _f(float, 0.0, maximum=MAX_TIME_S)
    loss: float | None = _f(float, None, minimum=None)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        for name in ("wait", "blocked"):  # not logged means none: the reader's reading too
            if getattr(self, name) is None:
                _set(self, name, 0.0)
        loss = self.loss
        if isinstance(loss, numbers.Real) and not isinstance(loss, bool) and not math.isfinite(loss):
            _set(self, "loss", None)  # a diverged loss is "not logged", not a broken line
        super().__post_init__()


def check_worker(roles: Mapping[str, int], role: Any, worker: Any) -> None:
    """A step's role and worker against the header's roles: the writer's and the reader's one check.

    Args:
        roles: the header's role -> worker count.
        role: the step's role.
        worker: the step's worker index.

    Raises:
        RecordError: the role is not the header's, or the worker is not one of its workers.
    """
    if role not in roles:
        raise RecordError("step", "role", f"{short_repr(role)} is not a role of the header ({', '.join(roles)})")
    n = roles[role]
    if _check("step", "worker", Step.SPECS["worker"], worker) >= n:
        raise RecordError("step", "worker", f"is {worker} but the header has {n} '{role}' workers (0..{n - 1})")


@dataclass(frozen=True, kw_only=True)
class Sync(Record):
    """A weight/gradient sync among the workers of ``role``: ``dur`` seconds, ending at ``t``."""

    EVENT: ClassVar[Event] = Event.SYNC
    t: float = _f(float, maximum=MAX_TIME_S)
    role: str = _f(str, "drafter", minimum=1)
    workers: int | None = _f(int, None, maximum=MAX_GPUS)
    dur: float = _f(float, maximum=MAX_TIME_S)
    bytes: float | None = _f(float, None)
    extra: Mapping[str, Any] = field(default_factory=dict)


def check_rates(
    h: Mapping[str, Any], roles: Collection[str] | None = None, queues: Collection[str] | None = None
) -> dict[str, Any]:
    """The maps of a ``rates`` line checked: the writer's and the reader's one check of them.

    Args:
        h: the line's fields by JSON key.
        roles: the header's roles; given, others are not read (schema v1 ignores what it does not know).
        queues: the header's queue names, likewise.

    Returns:
        ``bps`` and ``cap_bps`` (role -> batches/s) and ``q`` (queue -> depth, a list for a
        per-worker queue, None where not measured), numbers made plain; None where absent.

    Raises:
        RecordError: a map that is not one, or a bad key or value, named.
    """
    out: dict[str, Any] = {}
    for key in ("bps", "cap_bps"):
        d = h.get(key)
        if d is None and key == "cap_bps":
            out[key] = None
            continue
        if not isinstance(d, Mapping):
            raise RecordError("rates", key, "must be an object of role -> batches/s")
        out[key] = {
            _check("rates", key, _NAME, r): _check("rates", f"{key}.{r}", RATE, x)
            for r, x in d.items()
            if roles is None or r in roles
        }
    q = h.get("q")
    if q is not None and not isinstance(q, Mapping):
        raise RecordError("rates", "q", "must be an object of queue -> depth (or list of depths)")
    out["q"] = None if q is None else {}
    for name, v in (q or {}).items():
        if queues is not None and name not in queues:
            continue
        try:
            if isinstance(v, (list, tuple)):
                v = [check_value(_DEPTH, x) for x in v]
            elif v is not None:  # None: not measured this time
                v = check_value(_DEPTH, v)
        except ValueError:
            raise RecordError(
                "rates", "q", f"depth of queue '{name}' must be numbers >= 0, got {short_repr(v)}"
            ) from None
        out["q"][_check("rates", "q", _NAME, name)] = v
    return out


@dataclass(frozen=True, kw_only=True)
class Rates(Record):
    """A periodic snapshot over the last ``window`` seconds: ``bps`` completions per wall second per
    role (a pool's total); ``cap_bps`` the pool's capacity (workers x batches per busy second);
    ``tok_s`` consumer tokens per second; ``q`` queue depths at ``t`` (a list for a per-worker
    queue); ``eta_s`` seconds left; ``done`` the share of the job done (0..1)."""

    EVENT: ClassVar[Event] = Event.RATES
    t: float = _f(float, maximum=MAX_TIME_S)
    window: float | None = _f(float, None, maximum=MAX_TIME_S)
    bps: Mapping[str, float] = _f(object)
    cap_bps: Mapping[str, float] | None = _f(object, None)
    tok_s: float | None = _f(float, None)
    q: Mapping[str, Any] | None = _f(object, None)
    eta_s: float | None = _f(float, None)
    done: float | None = _f(float, None)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def _check_rest(self, ev: str) -> None:
        for k, v in check_rates({"bps": self.bps, "cap_bps": self.cap_bps, "q": self.q}).items():
            _set(self, k, v)


@dataclass(frozen=True, kw_only=True)
class End(Record):
    """The last line of a file: ``reason`` done | interrupted | error, ``msg`` a free text."""

    EVENT: ClassVar[Event] = Event.END
    t: float = _f(float, maximum=MAX_TIME_S)
    reason: EndReason | str = _f(str, EndReason.DONE, choices=tuple(r.value for r in EndReason))
    msg: str | None = _f(str, None)
    extra: Mapping[str, Any] = field(default_factory=dict)


EVENTS: dict[str, type[Record]] = {c.EVENT.value: c for c in (Run, Step, Sync, Rates, End)}
for _cls in (Queue, *EVENTS.values()):  # the specs of each record's own fields, in line order
    _cls.SPECS = {f.name: f.metadata["spec"] for f in fields(_cls) if "spec" in f.metadata}
    _cls.KEYS = tuple(_cls.SPECS)
    _cls.FIELDS = {**_cls.SPECS, **getattr(_cls, "EXTRA_FIELDS", {})}
del _cls


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
    cls = EVENTS.get(ev)  # type: ignore[arg-type]
    if cls is None:
        raise RecordError(str(ev), "ev", f"must be one of {', '.join(EVENTS)}, got {ev!r}")
    kw = {k: v for k, v in obj.items() if k in cls.KEYS}
    # a field the constructor needs, absent: None, which the record's check names as missing
    kw |= {
        f.name: None for f in fields(cls) if f.name not in kw and f.default is MISSING and f.default_factory is MISSING
    }
    return cls(**kw, extra={k: v for k, v in obj.items() if k not in cls.KEYS and k != "ev"})
