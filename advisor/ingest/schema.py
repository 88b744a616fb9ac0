"""The reader's checks of schema v1 (docs/log-schema.md): the header, then one event at a time.

The fields, their types, bounds and checks are the records' (`advisor.records`: `check_value`,
`check_header`, `check_rates`, `check_worker`, the writer's own); this module runs them on a
decoded line and names the file, line and field of a bad one (:class:`LogError`, exit code 2).
It is the exact path: the fast scan (`advisor.ingest.scan`) checks columns and falls back here
to name the first bad line. Unknown events and fields are counted, never fatal;
an unknown field close to a known one (difflib ratio >= ``FIELD_MATCH_CUTOFF``, ``blokced``) is
reported as a likely misspelling (`advisor.ingest.load`). Limits where nobody can mean more (a
bigger value is corruption or an attack): ``MAX_GPUS``, ``MAX_QUEUE_CAP``, ``MAX_TIME_S``,
``MAX_TOKENS`` and whole numbers up to 2**53.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from advisor.errors import LogError, LogWarning, display_path
from advisor.records import (
    EVENTS,
    End,
    Queue,
    Rates,
    RecordError,
    Run,
    Spec,
    Step,
    Sync,
    check_header,
    check_rates,
    check_value,
    check_worker,
    default_placement,
    has_surrogate,
)

KNOWN_EVENTS = tuple(EVENTS)
END_REASONS = End.SPECS["reason"].choices
# the top-level fields of each known event (the records' own and their known extras); anything
# else is the writer's own
EVENT_FIELDS = {ev: ("ev", *cls.FIELDS) for ev, cls in EVENTS.items()}
_ROLE = Spec(str, True)  # a step's role: a string, then a role of the header (check_worker)
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


def check_number(obj: Mapping[str, Any], name: str, spec: Spec, path: str, line: int | None) -> Any:
    """``obj[name]`` checked by its record field's `Spec` (`advisor.records.check_value`, the writer's
    check): None where absent and optional; a number an ``int`` or a ``float`` as the field is."""
    v = obj.get(name)
    if v is None:
        if spec.required:
            raise LogError(path, line, "is missing", name)
        return None
    try:
        v = check_value(spec, v)
    except ValueError as e:
        raise LogError(path, line, str(e), name) from None
    return float(v) if spec.kind is float else v


def printable(s: str) -> str:
    """``s`` with lone surrogates replaced by U+FFFD, so that it can be printed and written."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s) if has_surrogate(s) else s


# header fields that RunHeader holds as typed attributes (``v`` and ``t`` left at their defaults);
# the rest of the header goes to ``extra``
_TYPED_HEADER_FIELDS = frozenset({"ev", *Run.KEYS})
_DISPLAY_TEXTS = ("run", "hardware", "target_model", "drafter_model")


def parse_header(obj: Any, path: str, line: int) -> RunHeader:
    """Validate the first event of a log and return it as a :class:`RunHeader`: the writer's check
    of a header (`advisor.records.check_header`, its order: the first bad field is the one named),
    with the file and the line. A lone surrogate in a display text is repaired, with a warning."""
    if not isinstance(obj, dict):
        raise LogError(path, line, "the first line must be a JSON object (the 'run' header)")
    if obj.get("ev") != "run":
        raise LogError(path, line, f"the first event must be the 'run' header, got ev={obj.get('ev')!r}", "ev")
    try:  # t0_unix is not checked: read by no one, compared across rank files
        h = check_header({k: v for k, v in obj.items() if k != "t0_unix"})
    except RecordError as e:
        raise LogError(path, line, e.message, e.field) from None
    kw = {k: float(v) if v is not None and Run.SPECS[k].kind is float else v for k, v in h.items() if k != "t"}
    bad = [k for k in _DISPLAY_TEXTS if kw[k] is not None and has_surrogate(kw[k])]
    if bad:  # display-only text: repair it, do not refuse the log over it
        warnings.warn(
            LogWarning(f"{display_path(path)}:{line}: field '{bad[0]}' holds a lone UTF-16 surrogate; shown as U+FFFD"),
            stacklevel=3,
        )
        kw |= {k: printable(kw[k]) for k in _DISPLAY_TEXTS if kw[k] is not None}
    kw |= {"run": kw["run"] or "run", "sync_every": kw["sync_every"] or 0, "t0_unix": obj.get("t0_unix")}
    return RunHeader(**kw, extra={key: v for key, v in obj.items() if key not in _TYPED_HEADER_FIELDS})


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
        try:
            check_worker(header.roles, check_number(obj, "role", _ROLE, path, line), obj["worker"])
        except RecordError as e:
            raise LogError(path, line, e.message, e.field) from None
        check_number(obj, "loss", Step.FIELDS["loss"], path, line)
    elif ev == "sync":
        for name, *_ in SYNC_NUMBERS:
            check_number(obj, name, Sync.SPECS[name], path, line)
    elif ev == "rates":
        for name, *_ in RATES_NUMBERS:
            check_number(obj, name, Rates.SPECS[name], path, line)
        try:
            check_rates(obj, header.roles, {q.name for q in header.queues})
        except RecordError as e:
            raise LogError(path, line, e.message, e.field) from None
    elif ev == "end":
        check_number(obj, "t", End.SPECS["t"], path, line)
        check_number(obj, "reason", End.SPECS["reason"], path, line)  # absent: "done" (docs/log-schema.md)
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
