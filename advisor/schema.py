"""The rate-log contract, schema v1 (see DESIGN.md): event types, the run header, and validation.

Every line of a log is one JSON object with ``ev`` (event type) and ``t`` (seconds since the run
started). Five events are known: ``run`` (the header, first line), ``step`` (one batch on one
worker), ``sync`` (a weight/gradient sync among drafters), ``rates`` (periodic snapshot) and
``end``. Unknown events and unknown fields are counted, never fatal.

This module is the slow, exact path: it validates one decoded event and names the offending
field. The fast path (`advisor.load`) parses whole files into columns and only falls back here
to find and name the first bad line.

Errors are :class:`LogError` (the CLI maps them to exit code 2). Results that rest on
assumptions are reported with the warning categories below; `advisor.advice` collects them as
caveats.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

SCHEMA_VERSION = 1
KNOWN_EVENTS = ("run", "step", "sync", "rates", "end")
END_REASONS = ("done", "interrupted", "error")


class LogError(ValueError):
    """Unusable input. Its text names the file, the line and the field where known."""

    def __init__(self, path: str, line: int | None, message: str, field: str | None = None):
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        where = self.path if line is None else f"{self.path}:{line}"
        what = f"field '{field}' {message}" if field else message
        super().__init__(f"{where}: {what}")


class AdvisorWarning(UserWarning):
    """Base of the advisor's typed warnings; each becomes a caveat in the report."""


class LogWarning(AdvisorWarning):
    """Something in the input was skipped or repaired (partial last line, unknown events)."""


class SteadyStateWarning(AdvisorWarning):
    """Warm-up was long or the run never settled: rates rest on a short window."""


class AssumptionWarning(AdvisorWarning):
    """A number was assumed or bounded rather than measured (e.g. rates-only logs, M=1 sync)."""


@dataclass(frozen=True)
class QueueSpec:
    """A bounded queue of the pipeline. ``feeds`` names the role that pops from it."""

    name: str
    feeds: str
    cap: int
    per_worker: bool = False


@dataclass(frozen=True)
class RunHeader:
    """The ``run`` event: what ran, on how many GPUs, with which roles and queues."""

    run: str
    gpus: int
    roles: Mapping[str, int]
    queues: tuple[QueueSpec, ...]
    token_budget: int | None = None
    samples: int | None = None
    epochs: float | None = None
    hardware: str | None = None
    target_model: str | None = None
    drafter_model: str | None = None
    sync_every: int = 0
    hs_bytes_per_token: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def role_names(self) -> tuple[str, ...]:
        return tuple(self.roles)

    @property
    def producer(self) -> str:
        """The first GPU role in pipeline order (the targets)."""
        return self.role_names[0]

    @property
    def consumer(self) -> str:
        """The last GPU role in pipeline order (the drafters)."""
        return self.role_names[-1]

    def queue_feeding(self, role: str) -> QueueSpec | None:
        for q in self.queues:
            if q.feeds == role:
                return q
        return None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_number(obj: Mapping[str, Any], name: str, path: str, line: int, *,
                 required: bool = True, minimum: float | None = 0.0,
                 integer: bool = False, default: Any = None) -> Any:
    """Return ``obj[name]`` checked as a finite number (>= minimum), or ``default`` if optional."""
    if name not in obj or obj[name] is None:
        if required:
            raise LogError(path, line, "is missing", name)
        return default
    v = obj[name]
    if not _is_number(v):
        raise LogError(path, line, f"must be a number, got {type(v).__name__} {v!r:.40}", name)
    if not math.isfinite(v):
        raise LogError(path, line, f"must be finite, got {v!r}", name)
    if integer and float(v) != int(v):
        raise LogError(path, line, f"must be a whole number, got {v!r}", name)
    if minimum is not None and v < minimum:
        raise LogError(path, line, f"must be a number >= {minimum:g}, got {v!r}", name)
    return int(v) if integer else float(v)


def check_string(obj: Mapping[str, Any], name: str, path: str, line: int, *,
                 required: bool = True, default: str | None = None) -> str | None:
    if name not in obj or obj[name] is None:
        if required:
            raise LogError(path, line, "is missing", name)
        return default
    v = obj[name]
    if not isinstance(v, str):
        raise LogError(path, line, f"must be a string, got {type(v).__name__} {v!r:.40}", name)
    return v


def parse_header(obj: Any, path: str, line: int) -> RunHeader:
    """Validate the first event of a log and return it as a :class:`RunHeader`."""
    if not isinstance(obj, dict):
        raise LogError(path, line, "the first line must be a JSON object (the 'run' header)")
    if obj.get("ev") != "run":
        raise LogError(path, line, f"the first event must be the 'run' header, got ev={obj.get('ev')!r}", "ev")
    v = obj.get("v", SCHEMA_VERSION)
    if v != SCHEMA_VERSION:
        raise LogError(path, line, f"schema version {v!r} is not supported (this advisor reads v{SCHEMA_VERSION})", "v")
    check_number(obj, "t", path, line)
    roles_raw = obj.get("roles")
    if not isinstance(roles_raw, dict) or not roles_raw:
        raise LogError(path, line, 'must be an object of role -> worker count, e.g. {"target":7,"drafter":1}', "roles")
    if len(roles_raw) < 2:
        raise LogError(path, line, "must name at least a producer and a consumer role", "roles")
    roles: dict[str, int] = {}
    for name, n in roles_raw.items():
        if not _is_number(n) or int(n) != n or n < 1:
            raise LogError(path, line, f"worker count of role '{name}' must be a whole number >= 1, got {n!r}", "roles")
        roles[str(name)] = int(n)
    gpus = check_number(obj, "gpus", path, line, required=False, minimum=1, integer=True)
    if gpus is None:
        gpus = sum(roles.values())
    if gpus < sum(roles.values()):
        raise LogError(path, line, f"is {gpus} but the roles use {sum(roles.values())} GPUs", "gpus")
    queues = []
    for i, q in enumerate(obj.get("queues") or []):
        if not isinstance(q, dict):
            raise LogError(path, line, f"entry {i} must be an object", "queues")
        name = check_string(q, "name", path, line)
        feeds = check_string(q, "feeds", path, line)
        if feeds not in roles:
            raise LogError(path, line, f"queue '{name}' feeds '{feeds}', which is not a role in 'roles'", "queues")
        cap = check_number(q, "cap", path, line, minimum=0, integer=True)
        queues.append(QueueSpec(name=name, feeds=feeds, cap=cap, per_worker=bool(q.get("per_worker", False))))
    known = {"ev", "v", "t", "run", "gpus", "roles", "queues", "token_budget", "samples", "epochs",
             "hardware", "target_model", "drafter_model", "sync_every", "hs_bytes_per_token"}
    return RunHeader(
        run=check_string(obj, "run", path, line, required=False, default="run") or "run",
        gpus=gpus,
        roles=roles,
        queues=tuple(queues),
        token_budget=check_number(obj, "token_budget", path, line, required=False, minimum=1, integer=True),
        samples=check_number(obj, "samples", path, line, required=False, minimum=0, integer=True),
        epochs=check_number(obj, "epochs", path, line, required=False, minimum=0),
        hardware=check_string(obj, "hardware", path, line, required=False),
        target_model=check_string(obj, "target_model", path, line, required=False),
        drafter_model=check_string(obj, "drafter_model", path, line, required=False),
        sync_every=check_number(obj, "sync_every", path, line, required=False, minimum=0, integer=True, default=0),
        hs_bytes_per_token=check_number(obj, "hs_bytes_per_token", path, line, required=False, minimum=0),
        extra={k: v for k, v in obj.items() if k not in known},
    )


# Numeric fields of each event: (name, required, integer)
STEP_NUMBERS = (("t", True, False), ("worker", True, True), ("batch", False, True), ("tokens", True, True),
                ("seqs", False, True), ("busy", True, False), ("wait", False, False), ("blocked", False, False))
SYNC_NUMBERS = (("t", True, False), ("workers", False, True), ("dur", True, False), ("bytes", False, False))
RATES_NUMBERS = (("t", True, False), ("window", False, False), ("tok_s", False, False),
                 ("eta_s", False, False), ("done", False, False))


def validate_event(obj: Any, header: RunHeader, path: str, line: int) -> str:
    """Check one decoded event against schema v1; return its type. Unknown events pass."""
    if not isinstance(obj, dict):
        raise LogError(path, line, f"must be a JSON object, got {type(obj).__name__}")
    ev = obj.get("ev")
    if not isinstance(ev, str):
        raise LogError(path, line, "is missing or not a string", "ev")
    if ev == "step":
        for name, req, integer in STEP_NUMBERS:
            check_number(obj, name, path, line, required=req, integer=integer)
        role = check_string(obj, "role", path, line)
        if role not in header.roles:
            raise LogError(path, line, f"'{role}' is not a role of the header ({', '.join(header.roles)})", "role")
        if obj["worker"] >= header.roles[role]:
            raise LogError(path, line, f"is {obj['worker']} but the header has {header.roles[role]} '{role}' workers "
                           f"(0..{header.roles[role] - 1})", "worker")
        if "loss" in obj and obj["loss"] is not None:
            check_number(obj, "loss", path, line, minimum=None)
    elif ev == "sync":
        for name, req, integer in SYNC_NUMBERS:
            check_number(obj, name, path, line, required=req, integer=integer)
    elif ev == "rates":
        for name, req, _ in RATES_NUMBERS:
            check_number(obj, name, path, line, required=req)
        for key in ("bps", "cap_bps"):
            d = obj.get(key)
            if d is None and key == "cap_bps":
                continue
            if not isinstance(d, dict):
                raise LogError(path, line, "must be an object of role -> batches/s", key)
            for r, v in d.items():
                try:
                    check_number(d, r, path, line, minimum=0)
                except LogError as e:
                    raise LogError(path, line, e.message, f"{key}.{r}") from None
        q = obj.get("q")
        if q is not None:
            if not isinstance(q, dict):
                raise LogError(path, line, "must be an object of queue -> depth (or list of depths)", "q")
            for name, v in q.items():
                vals = v if isinstance(v, list) else [v]
                for x in vals:
                    if not _is_number(x) or not math.isfinite(x) or x < 0:
                        raise LogError(path, line, f"depth of queue '{name}' must be numbers >= 0, got {v!r:.60}", "q")
    elif ev == "end":
        check_number(obj, "t", path, line)
        reason = check_string(obj, "reason", path, line, required=False, default="done")
        if reason not in END_REASONS:
            raise LogError(path, line, f"must be one of {', '.join(END_REASONS)}, got {reason!r}", "reason")
    elif ev == "run":
        raise LogError(path, line, "a second 'run' header; one log holds one run", "ev")
    else:
        if "t" in obj:
            check_number(obj, "t", path, line)
    return ev
