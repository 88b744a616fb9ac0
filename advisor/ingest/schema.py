"""The reader's checks of schema v1 (docs/log-schema.md): the header, then one event at a time.

The fields, their types and bounds are the records' (`advisor.records`); this module checks a
decoded line against them and names the file, line and field of a bad one (:class:`LogError`,
exit code 2). It is the exact path: the fast scan (`advisor.ingest.scan`) checks columns and
falls back here to name the first bad line. Unknown events and fields are counted, never fatal;
an unknown field close to a known one (difflib ratio >= ``FIELD_MATCH_CUTOFF``, ``blokced``) is
reported as a likely misspelling (`advisor.ingest.load`). Limits where nobody can mean more (a
bigger value is corruption or an attack): ``MAX_GPUS``, ``MAX_QUEUE_CAP``, ``MAX_TIME_S``,
``MAX_TOKENS`` and whole numbers up to 2**53.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from advisor.errors import LogError, LogWarning, display_path, short_repr
from advisor.records import (
    ENGINE_GPUS,
    EVENTS,
    PROBE_FIELDS,
    RATE,
    SCHEMA_VERSION,
    WORKERS,
    End,
    EndReason,
    Queue,
    Rates,
    Run,
    Spec,
    Step,
    Sync,
)
from advisor.settings import MAX_GPUS

KNOWN_EVENTS = tuple(EVENTS)
END_REASONS = tuple(r.value for r in EndReason)
_FLOAT_MAX = 1.7976931348623157e308
HEADER_FIELDS = ("ev", *Run.FIELDS)
CAP_BPS_KINDS = ("lower", "upper")  # what a role's logged cap_bps is: a lower bound, an upper estimate
# the top-level fields of each known event (the records' own and their known extras); anything
# else is the writer's own
EVENT_FIELDS = {ev: ("ev", *cls.FIELDS) for ev, cls in EVENTS.items()}
FIELD_MATCH_CUTOFF = 0.75  # difflib ratio from which an unknown field name is taken for a misspelling


def unknown_fields(obj: Any) -> list[str]:
    """The top-level fields of a decoded known event that the schema does not define."""
    if not isinstance(obj, dict):
        return []
    known = EVENT_FIELDS.get(obj.get("ev")) if isinstance(obj.get("ev"), str) else None
    return [] if known is None else [k for k in obj if k not in known]


def nearest_field(ev: str, name: str) -> str | None:
    """The known field of event ``ev`` that ``name`` most likely misspells, or None (difflib)."""
    close = difflib.get_close_matches(name, EVENT_FIELDS.get(ev, ()), n=1, cutoff=FIELD_MATCH_CUTOFF)
    return close[0] if close else None


@dataclass(frozen=True, kw_only=True)
class RunHeader(Run):
    """The ``run`` event as the reader holds it, checked by `parse_header`: ``gpus_per_worker`` a
    dict (roles not named hold 1), ``placement`` tuples (None: packed, `default_placement`)."""

    def __post_init__(self):
        pass  # parse_header has checked every field, with the reader's messages

    @property
    def node_step_fields(self) -> tuple[str, ...]:
        """The step fields read only from a log that spans nodes (it says ``gpus_per_node``): ``xfer``."""
        return ("xfer",) if self.gpus_per_node else ()

    def k(self, role: str) -> int:
        """GPUs one worker (engine) of ``role`` holds."""
        return int(self.gpus_per_worker.get(role, 1))

    @property
    def gpus_per_engine(self) -> tuple[int, int]:
        """GPUs one engine of the producer and of the consumer holds (`k`)."""
        return self.k(self.producer), self.k(self.consumer)

    @property
    def engine_gpus(self) -> int:
        """GPUs the roles' engines hold together."""
        return sum(n * self.k(r) for r, n in self.roles.items())

    @property
    def nodes(self) -> int:
        return -(-self.gpus // self.gpus_per_node) if self.gpus_per_node else 1

    def node_of(self, role: str) -> tuple[int, ...]:
        """The node of each worker of ``role``: the header's placement, else packed."""
        if self.placement is not None and role in self.placement:
            return tuple(self.placement[role])
        return default_placement(self.roles, self.gpus_per_worker, self.gpus_per_node)[role]

    def queue_feeding(self, role: str) -> Queue | None:
        """The queue that ``role`` pops from."""
        return next((q for q in self.queues if q.feeds == role), None)


def default_placement(
    roles: Mapping[str, int], gpus_per_worker: Mapping[str, int], gpus_per_node: int | None
) -> dict[str, tuple[int, ...]]:
    """Packed placement: the workers in pipeline order (a role's worker 0 first) fill node 0, then
    node 1, ...; a worker that does not fit in what is left of a node starts the next one.
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


def _engines_header(obj: Mapping[str, Any], roles: Mapping[str, int], gpus: int | None, path: str, line: int):
    """gpus_per_worker, gpus_per_node, placement and link_bytes_s of a header, checked against the roles
    (and, first, the fields of where the workers computed: `_check_device_fields`)."""
    _check_device_fields(obj, path, line)
    _check_cap_bps_kind(obj, roles, path, line)
    if obj.get("unit") is not None:  # what one batch counts (docs/log-schema.md); kept in ``extra``
        _name(obj, "unit", path, line, "the unit of a batch")
    k: dict[str, int] = {}
    shape = 'must be an object of role -> GPUs per worker, e.g. {"target": 2}'
    for name, n in _by_role(obj, "gpus_per_worker", roles, path, line, shape):
        try:
            k[name] = check_number({name: n}, name, ENGINE_GPUS, path, line)
        except LogError as e:
            raise LogError(path, line, f"GPUs per worker of role '{name}' {e.message}", "gpus_per_worker") from None
    need = sum(n * k.get(r, 1) for r, n in roles.items())
    if need > MAX_GPUS:
        raise LogError(path, line, f"the engines hold {need} GPUs, more than the limit {MAX_GPUS}", "gpus_per_worker")
    g = need if gpus is None else gpus
    if g < need:
        raise LogError(path, line, f"is {g} but the roles' engines hold {need} GPUs", "gpus")
    gpn = _run_number(obj, "gpus_per_node", path, line)
    if gpn is not None and max([1, *k.values()]) > gpn:
        raise LogError(
            path,
            line,
            f"is {gpn}, but an engine holds {max(k.values())} GPUs (an engine never spans nodes)",
            "gpus_per_node",
        )
    placement = None if obj.get("placement") is None else {}
    nodes = -(-g // gpn) if gpn else 1
    shape = 'must be an object of role -> node of each worker, e.g. {"target": [0, 1]}'
    for name, lst in _by_role(obj, "placement", roles, path, line, shape):
        if (
            not isinstance(lst, list)
            or len(lst) != roles[name]
            or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < nodes for x in lst)
        ):
            raise LogError(
                path,
                line,
                f"'{name}' must list one node index (0..{nodes - 1}) per worker, {roles[name]} in all",
                "placement",
            )
        placement[name] = tuple(lst)
    if placement is not None and gpn:
        full = default_placement(roles, k, gpn)
        full.update(placement)
        for node in range(nodes):
            held = sum(k.get(r, 1) for r, lst in full.items() for x in lst if x == node)
            if held > gpn:
                raise LogError(path, line, f"puts {held} GPUs on node {node}, which holds {gpn}", "placement")
    link = _run_number(obj, "link_bytes_s", path, line)
    if link is not None and not link > 0:
        raise LogError(path, line, "must be bytes/s above 0", "link_bytes_s")
    return k, g, gpn, placement, link


def _by_role(
    obj: Mapping[str, Any], key: str, roles: Mapping[str, int], path: str, line: int, shape: str
) -> Iterator[tuple[str, Any]]:
    """The entries of the map ``obj[key]`` (none where absent), each key checked as it comes to be
    a role in 'roles' (``shape``: the message where it is no map)."""
    raw = obj.get(key)
    if raw is not None and not isinstance(raw, dict):
        raise LogError(path, line, shape, key)
    for name, v in (raw or {}).items():
        if name not in roles:
            raise LogError(path, line, f"names '{short_repr(name)}', which is not a role in 'roles'", key)
        yield name, v


def _run_number(obj: Mapping[str, Any], name: str, path: str, line: int) -> Any:
    return check_number(obj, name, Run.FIELDS[name], path, line)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_number(obj: Mapping[str, Any], name: str, spec: Spec, path: str, line: int | None) -> Any:
    """``obj[name]`` checked as a number by its record field's `Spec` (advisor.records): present if
    required, finite, whole for an ``int``, within the bounds; None where absent and optional."""
    if name not in obj or obj[name] is None:
        if spec.required:
            raise LogError(path, line, "is missing", name)
        return None
    v = obj[name]
    if not _is_number(v):
        raise LogError(path, line, f"must be a number, got {type(v).__name__} {short_repr(v)}", name)
    if isinstance(v, int) and not -_FLOAT_MAX <= v <= _FLOAT_MAX:  # math.isfinite would overflow
        raise LogError(path, line, f"is too large ({short_repr(v)})", name)
    if not math.isfinite(v):
        raise LogError(path, line, f"must be finite, got {v!r}", name)
    if spec.kind is int and float(v) != int(v):
        raise LogError(path, line, f"must be a whole number, got {v!r}", name)
    if spec.minimum is not None and v < spec.minimum:
        raise LogError(path, line, f"must be a number >= {spec.minimum:g}, got {short_repr(v)}", name)
    if spec.maximum is not None and v > spec.maximum:
        raise LogError(path, line, f"is {short_repr(v)}, more than the limit {spec.maximum:g}", name)
    return int(v) if spec.kind is int else float(v)


def has_surrogate(s: str) -> bool:
    """Whether ``s`` holds a lone UTF-16 surrogate (JSON allows "\\ud800"; UTF-8 output does not)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def printable(s: str) -> str:
    """``s`` with lone surrogates replaced by U+FFFD, so that it can be printed and written."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s) if has_surrogate(s) else s


def check_string(
    obj: Mapping[str, Any], name: str, path: str, line: int | None, *, required: bool = True
) -> str | None:
    """Return ``obj[name]`` checked as a string, or None if optional."""
    if name not in obj or obj[name] is None:
        if required:
            raise LogError(path, line, "is missing", name)
        return None
    v = obj[name]
    if not isinstance(v, str):
        raise LogError(path, line, f"must be a string, got {type(v).__name__} {short_repr(v)}", name)
    return v


def _name(obj: Mapping[str, Any], key: str, path: str, line: int, what: str) -> str:
    """A role or queue name: a non-empty string that can be printed (it keys columns and reports)."""
    v = check_string(obj, key, path, line) if key in obj else None
    if not v or has_surrogate(v) or len(v) > 200:
        raise LogError(
            path,
            line,
            f"{what} must be a non-empty string of at most 200 printable characters, got {short_repr(v)}",
            key,
        )
    return v


def _check_device_fields(obj: Mapping[str, Any], path: str, line: int) -> None:
    """Where the workers computed (docs/log-schema.md): kept in ``extra``, read by advisor.fit.splits."""
    check_string(obj, "device", path, line, required=False)
    _run_number(obj, "physical_gpus", path, line)
    _run_number(obj, "cores", path, line)
    check_probe(obj, path, line)


def check_probe(obj: Mapping[str, Any], path: str, line: int) -> Mapping[str, Any] | None:
    """The header's ``probe`` (docs/log-schema.md): ``{"id", "segment", "segments", "round"}``, the
    run as one segment of a probe. Kept in ``extra``.
    """
    raw = obj.get("probe")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise LogError(
            path,
            line,
            f'must be an object like {{"id": "p1", "segment": 1, "segments": 4, "round": 1}}, got {short_repr(raw)}',
            "probe",
        )
    try:
        _name(raw, "id", path, line, "a probe's id")
        seg, segs, _ = (check_number(raw, n, s, path, line) for n, s in PROBE_FIELDS.items() if s.kind is int)
    except LogError as e:
        raise LogError(path, line, f"{e.field or ''} {e.message}".strip(), "probe") from None
    if segs is not None and seg > segs:
        raise LogError(path, line, f"segment {seg} of {segs}: a segment's number is at most 'segments'", "probe")
    return raw


def _check_cap_bps_kind(obj: Mapping[str, Any], roles: Mapping[str, int], path: str, line: int) -> None:
    """``cap_bps_kind`` (docs/log-schema.md): role -> "lower" or "upper", what that role's logged
    ``cap_bps`` is; kept in ``extra``, read by `advisor.fit.roles.role_from_rates`."""
    shape = f"must be an object of role -> kind, got {short_repr(obj.get('cap_bps_kind'))}"
    for name, kind in _by_role(obj, "cap_bps_kind", roles, path, line, shape):
        if kind not in CAP_BPS_KINDS:
            raise LogError(
                path,
                line,
                f"kind of role '{name}' must be one of {', '.join(CAP_BPS_KINDS)}, got {short_repr(kind)}",
                "cap_bps_kind",
            )


# header fields that RunHeader holds as typed attributes (``v`` and ``t`` left at their defaults);
# the rest of the header goes to ``extra``
_TYPED_HEADER_FIELDS = frozenset({"ev", *Run.KEYS})
_DISPLAY_TEXTS = ("run", "hardware", "target_model", "drafter_model")


def _check_envelope(obj: Any, path: str, line: int) -> None:
    """The header is a JSON object with ``ev = "run"``, a supported ``v`` and a valid ``t``."""
    if not isinstance(obj, dict):
        raise LogError(path, line, "the first line must be a JSON object (the 'run' header)")
    if obj.get("ev") != "run":
        raise LogError(path, line, f"the first event must be the 'run' header, got ev={obj.get('ev')!r}", "ev")
    v = obj.get("v", SCHEMA_VERSION)
    if v != SCHEMA_VERSION or isinstance(v, bool):
        raise LogError(path, line, f"schema version {v!r} is not supported (this advisor reads v{SCHEMA_VERSION})", "v")
    _run_number(obj, "t", path, line)


def _parse_roles(obj: Mapping[str, Any], path: str, line: int) -> dict[str, int]:
    """``roles``: two or more printable names, each with 1..MAX_GPUS workers, MAX_GPUS in all."""
    roles_raw = obj.get("roles")
    if not isinstance(roles_raw, dict) or not roles_raw:
        raise LogError(path, line, 'must be an object of role -> worker count, e.g. {"target":7,"drafter":1}', "roles")
    if len(roles_raw) < 2:
        raise LogError(path, line, "must name at least a producer and a consumer role", "roles")
    roles: dict[str, int] = {}
    for name, _n in roles_raw.items():
        if not name or has_surrogate(name) or len(name) > 200:
            raise LogError(
                path, line, f"role names must be non-empty printable strings, got {short_repr(name)}", "roles"
            )
        try:
            roles[name] = check_number(roles_raw, name, WORKERS, path, line)
        except LogError as e:
            raise LogError(path, line, f"worker count of role '{name}' {e.message}", "roles") from None
    if sum(roles.values()) > MAX_GPUS:
        raise LogError(path, line, f"use {sum(roles.values())} GPUs, more than the limit {MAX_GPUS}", "roles")
    return roles


def _parse_gpus(obj: Mapping[str, Any], roles: Mapping[str, int], path: str, line: int) -> int | None:
    """``gpus`` (optional): a whole number, at least the GPUs the roles use."""
    gpus = _run_number(obj, "gpus", path, line)
    if gpus is not None and gpus < sum(roles.values()):
        raise LogError(path, line, f"is {gpus} but the roles use {sum(roles.values())} GPUs", "gpus")
    return gpus


def _parse_queue(q: Any, i: int, roles: Mapping[str, int], path: str, line: int) -> Queue:
    """Entry ``i`` of ``queues``: an object with ``name``, ``feeds`` (a role), ``cap`` and ``per_worker``."""
    if not isinstance(q, dict):
        raise LogError(path, line, f"entry {i} must be an object", "queues")
    try:
        name = _name(q, "name", path, line, "a queue's name")
        feeds = check_string(q, "feeds", path, line)
        cap = check_number(q, "cap", Queue.SPECS["cap"], path, line)
        per_worker = q.get("per_worker", False)
        if not isinstance(per_worker, bool):
            raise LogError(path, line, f"must be true or false, got {short_repr(per_worker)}", "per_worker")
    except LogError as e:
        raise LogError(path, line, f"entry {i}: {e.field or ''} {e.message}".replace("  ", " "), "queues") from None
    if feeds not in roles:
        raise LogError(path, line, f"queue '{name}' feeds '{feeds}', which is not a role in 'roles'", "queues")
    return Queue(name=name, feeds=feeds, cap=cap, per_worker=per_worker)


def _parse_queues(obj: Mapping[str, Any], roles: Mapping[str, int], path: str, line: int) -> tuple[Queue, ...]:
    """``queues`` (optional): a list of queues, each feeding a role in ``roles``, names unique."""
    queues_raw = obj.get("queues")
    if queues_raw is not None and not isinstance(queues_raw, list):
        raise LogError(
            path,
            line,
            f'must be a list of queue objects like {{"name":"hs","feeds":"drafter","cap":20}}, '
            f"got {type(queues_raw).__name__} {short_repr(queues_raw)}",
            "queues",
        )
    queues: list[Queue] = []
    for i, q in enumerate(queues_raw or []):
        spec = _parse_queue(q, i, roles, path, line)
        if any(x.name == spec.name for x in queues):
            raise LogError(path, line, f"queue name '{spec.name}' appears twice", "queues")
        queues.append(spec)
    return tuple(queues)


def _display_texts(obj: Mapping[str, Any], path: str, line: int) -> dict[str, str | None]:
    """The display-only strings (run name, hardware, models); a lone surrogate is repaired, warned."""
    texts = {k: check_string(obj, k, path, line, required=False) for k in _DISPLAY_TEXTS}
    bad = [k for k, v in texts.items() if v is not None and has_surrogate(v)]
    if bad:
        # display-only text: repair it, do not refuse the log over it
        warnings.warn(
            LogWarning(f"{display_path(path)}:{line}: field '{bad[0]}' holds a lone UTF-16 surrogate; shown as U+FFFD"),
            stacklevel=4,
        )
        texts = {k: printable(v) if v is not None else None for k, v in texts.items()}
    return texts


def parse_header(obj: Any, path: str, line: int) -> RunHeader:
    """Validate the first event of a log and return it as a :class:`RunHeader`.

    Fields are checked in a fixed order (envelope, roles, gpus, engines, queues, display texts,
    the numbers), so the first bad field is the one named.
    """
    _check_envelope(obj, path, line)
    roles = _parse_roles(obj, path, line)
    gpus = _parse_gpus(obj, roles, path, line)
    k, gpus, gpn, placement, link = _engines_header(obj, roles, gpus, path, line)
    queues = _parse_queues(obj, roles, path, line)
    texts = _display_texts(obj, path, line)
    return RunHeader(
        run=texts["run"] or "run",
        gpus=gpus,
        roles=roles,
        queues=queues,
        token_budget=_run_number(obj, "token_budget", path, line),
        samples=_run_number(obj, "samples", path, line),
        epochs=_run_number(obj, "epochs", path, line),
        hardware=texts["hardware"],
        target_model=texts["target_model"],
        drafter_model=texts["drafter_model"],
        sync_every=_run_number(obj, "sync_every", path, line) or 0,
        hs_bytes_per_token=_run_number(obj, "hs_bytes_per_token", path, line),
        t0_unix=obj.get("t0_unix"),  # not checked: read by no one, compared across rank files
        extra={key: v for key, v in obj.items() if key not in _TYPED_HEADER_FIELDS},
        gpus_per_worker=k,
        gpus_per_node=gpn,
        placement=placement,
        link_bytes_s=link,
    )


def _numbers(fields: Mapping[str, Spec]) -> tuple[tuple[str, bool, bool, float | None], ...]:
    """(name, required, integer, maximum) of each number >= 0 of an event, in line order."""
    return tuple(
        (n, s.required, s.kind is int, s.maximum)
        for n, s in fields.items()
        if s.kind in (int, float) and s.minimum == 0
    )


# the numbers of each event; advisor.ingest.scan checks them column by column (its fast path)
STEP_NUMBERS = _numbers(Step.SPECS)
# a drafter step's link-inclusive import seconds, read (and checked) where the header spans nodes
XFER_NUMBER = _numbers(Step.EXTRA_FIELDS)[0]
SYNC_NUMBERS = _numbers(Sync.SPECS)
RATES_NUMBERS = _numbers(Rates.SPECS)


def body_columns(header: RunHeader, *, steps: bool = False) -> dict[str, type]:
    """The fields of the body's events (``steps``: a step's alone) as columns, name -> `Spec` kind:
    texts, then maps (``object``), then numbers, each in line order; the header's node fields too."""
    kinds: dict[str, type] = {"ev": str}
    for cls in (Step,) if steps else (Step, Sync, Rates, End):
        kinds.update((n, s.kind) for n, s in cls.SPECS.items() if n not in kinds)
    kinds.update((n, Step.FIELDS[n].kind) for n in header.node_step_fields)
    return {
        n: k
        for order in (str, object, None)
        for n, k in kinds.items()
        if (k is order) or (order is None and k in (int, float))
    }


def step_numbers(header: RunHeader) -> tuple:
    """The step fields read from a log of this header: ``xfer`` too where it spans nodes."""
    return STEP_NUMBERS + ((XFER_NUMBER,) if header.node_step_fields else ())


def _check_rates(obj: dict, header: RunHeader, path: str, line: int) -> None:
    """A ``rates`` event's numbers, its ``bps`` and ``cap_bps`` maps and its queue depths ``q``."""
    for name, *_ in RATES_NUMBERS:
        check_number(obj, name, Rates.SPECS[name], path, line)
    for key in ("bps", "cap_bps"):
        d = obj.get(key)
        if d is None and key == "cap_bps":
            continue
        if not isinstance(d, dict):
            raise LogError(path, line, "must be an object of role -> batches/s", key)
        for r in d:
            if r not in header.roles:
                continue  # unknown fields are ignored (schema v1)
            try:
                check_number(d, r, RATE, path, line)
            except LogError as e:
                raise LogError(path, line, e.message, f"{key}.{r}") from None
    q = obj.get("q")
    if q is not None:
        if not isinstance(q, dict):
            raise LogError(path, line, "must be an object of queue -> depth (or list of depths)", "q")
        known = {spec.name for spec in header.queues}
        for name, v in q.items():
            if name not in known:
                continue
            vals = v if isinstance(v, list) else [v]
            for x in vals:
                if x is None and not isinstance(v, list):
                    continue  # not measured this time
                if not _is_number(x) or abs(x) > _FLOAT_MAX or not math.isfinite(x) or x < 0:
                    raise LogError(
                        path, line, f"depth of queue '{name}' must be numbers >= 0, got {short_repr(v)}", "q"
                    )


def validate_event(obj: Any, header: RunHeader, path: str, line: int) -> str:
    """Check one decoded event against schema v1; return its type. Unknown events pass."""
    if not isinstance(obj, dict):
        raise LogError(path, line, f"must be a JSON object, got {type(obj).__name__}")
    ev = obj.get("ev")
    if not isinstance(ev, str) or not ev:
        raise LogError(path, line, "is missing or not a non-empty string", "ev")
    if ev == "step":
        for name, *_ in step_numbers(header):
            check_number(obj, name, Step.FIELDS[name], path, line)
        role = check_string(obj, "role", path, line)
        if role not in header.roles:
            raise LogError(
                path, line, f"{short_repr(role)} is not a role of the header ({', '.join(header.roles)})", "role"
            )
        if obj["worker"] >= header.roles[role]:
            raise LogError(
                path,
                line,
                f"is {obj['worker']} but the header has {header.roles[role]} '{role}' workers "
                f"(0..{header.roles[role] - 1})",
                "worker",
            )
        check_number(obj, "loss", Step.FIELDS["loss"], path, line)
    elif ev == "sync":
        for name, *_ in SYNC_NUMBERS:
            check_number(obj, name, Sync.SPECS[name], path, line)
    elif ev == "rates":
        _check_rates(obj, header, path, line)
    elif ev == "end":
        check_number(obj, "t", End.SPECS["t"], path, line)
        reason = check_string(obj, "reason", path, line, required=False)
        if reason is not None and reason not in END_REASONS:  # absent: "done" (docs/log-schema.md)
            raise LogError(path, line, f"must be one of {', '.join(END_REASONS)}, got {short_repr(reason)}", "reason")
    elif ev == "run":
        raise LogError(
            path,
            line,
            "a second 'run' header: one log holds one run (several logs concatenated? give them as separate files)",
            "ev",
        )
    else:
        check_number(obj, "t", replace(End.SPECS["t"], required=False), path, line)
    return ev
