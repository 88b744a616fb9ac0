"""The options every number of one piece of advice is computed with, built once.

`advise()` resolves the user's options against the fit (the log's G, q_hs depth and batch size)
into one :class:`Settings` and passes it down to projection, simulation, the decision and the
report, so that no stage re-reads a loose keyword or recomputes a default. Validation happens
here, at the boundary, with errors that name the option (the CLI turns them into exit 2).
"""

from __future__ import annotations

import difflib
import functools
import math
import typing
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from advisor.errors import SettingsError, short_repr

# Every option's default and limit, once; the CLI's option defaults, the gate and the log's
# schema (`advisor.ingest.schema`: a log past these limits is refused too) read them from here.
MIN_GPUS = 2
MAX_GPUS = 4096  # GPUs, or workers of a role: more is not a job anyone runs
MAX_QUEUE_CAP = 10_000  # slots in a queue (--hs-cap, a log's queue caps)
MAX_TIME_S = 1e8  # seconds, any time in a log (t, busy, ...: about three years); import-tb too
MAX_TOKEN_BUDGET = 1 << 30  # tokens per batch, --token-budget
MAX_SYNC_EVERY = 1 << 53  # drafter steps per sync (what-if): whole numbers exact as floats
DEFAULT_RESTART_COST_H = 1.0  # hours a restart costs (reload, warm-up)
MAX_RESTART_COST_H = 24.0 * 365
DEFAULT_MIN_EFFICIENCY = 0.9  # the gate's threshold when neither --min-efficiency nor the config sets one
DEFAULT_FOLLOW_INTERVAL_S = 5.0  # seconds between refreshes with --follow
MIN_FOLLOW_INTERVAL_S = 0.1
DEFAULT_SETTLE_TOL = 0.02  # --follow: the odds have settled when p_best moves at most this (and see cli/follow.py)
SETTLE_REFRESHES = 3  # --follow: ... over this many refreshes in a row, with the pick unchanged
# from bare numbers (what-if), where no log gives them
DEFAULT_HS_CAP = 20  # q_hs depth, batches
DEFAULT_PRE_CAP = 50  # prefetch queue depth, batches
DEFAULT_TOKENS_PER_BATCH = 32768.0
# a role's capacity from bare numbers (what-if --target-bps/--drafter-bps), batches/s: below, a
# batch takes 30 years; above, a billion a second. Past them the chain's arithmetic leaves float64
# (5e-324 gave a division by zero: found by fuzzing, fuzz/)
MIN_CAPACITY_BPS = 1e-9
MAX_CAPACITY_BPS = 1e9
# Batches within 10% of each other count as the same size: logs at one budget (fit), a log
# comparable with the projected batch (reconciliation), a budget inside the logged range (not
# extrapolated).
SAME_SIZE_TOL = 0.10
# Engines, nodes and the link (docs/log-schema.md "Engines of several GPUs").
MAX_GPUS_PER_WORKER = 64  # GPUs one engine holds (TP x PP of a deployed engine: 1-16 in practice)
MAX_PLACEMENTS = 20_000  # placements of one split tried exhaustively; past this, the candidate families
MIN_ENGINE_SCALING, MAX_ENGINE_SCALING = 0.05, 2.0  # per-GPU rate ratio of an engine at another size
ENGINE_SCALING_SE = 0.10  # a given --engine-scaling is a guess: intervals span +-10% of it
LINK_SE = 0.10  # a link bandwidth not measured from this log's crossings: intervals span +-10%
MAX_LINK_GBYTES_S = 1e4  # GB/s: 10 TB/s is past any link
MAX_HS_BYTES_PER_TOKEN = 1e9  # bytes of hidden state per token (--hs-bytes-per-token): 1 GB is past any model


METRICS = ("efficiency", "gpu_util")  # what the gate compares with its threshold


@dataclass(frozen=True)
class Flag:
    """How an `Options` field reads on the command line, and its limits: ``lo`` the least value
    (the field must be above it where ``lo_open``), ``hi`` the greatest (click checks it too where
    ``click_hi``); ``example``, a role map's, for its errors."""

    help: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    click_hi: bool = False
    example: str = ""
    name: str = ""  # the flag, e.g. "--gpus" (unless given: the field's name, dashed); every error names it


def _opt(default: Any, help: str, **kw: Any) -> Any:
    """A field of `Options`: its default, and its `Flag` as the field's metadata."""
    return field(default=default, metadata={"flag": Flag(help, **kw)})


_SHARE = {"lo": 0.0, "hi": 1.0, "click_hi": True}  # a number from 0 to 1, checked by click too


@dataclass(frozen=True, kw_only=True)
class Options:
    """Every option the advice, the gate and ``--follow`` take: given once, validated here, passed whole.

    A field's type is what it takes and its metadata (a `Flag`) its flag, help and limits: the
    CLI's options (`advisor.cli.app.opt`) and the gate's config keys (the field names) are made from
    them, so a default or limit is written only here. None stands for the default the help names
    (mostly the log's; from bare numbers, what the what-if help says). Role maps (``roles``,
    ``gpus_per_worker``, ``engine_scaling``) are ``role=value`` text or a mapping, their role names
    checked against the log by `build_settings`. A field a path does not use is ignored there.
    Raises `advisor.errors.SettingsError` naming the flag.
    """

    gpus: int | None = _opt(None, "GPUs to split (default: the log header's).", lo=MIN_GPUS, hi=MAX_GPUS)
    roles: Mapping[str, int] | None = _opt(
        None,
        "Split to judge, e.g. target=6,drafter=2; must sum to the GPUs split (default: the observed one).",
        lo=1,
        hi=MAX_GPUS,
        example="target=6,drafter=2",
    )
    hs_cap: int | None = _opt(
        None, "Project with this q_hs depth (batches) instead of the log's.", lo=0, hi=MAX_QUEUE_CAP
    )
    token_budget: int | None = _opt(None, "Project with this batch token budget instead.", lo=1, hi=MAX_TOKEN_BUDGET)
    restart_cost_h: float = _opt(
        DEFAULT_RESTART_COST_H,
        "Hours a restart costs (reload, warm-up); weighed against the ETA gain of a switch.",
        lo=0.0,
        hi=MAX_RESTART_COST_H,
        name="--restart-cost",
    )
    job_hours: float | None = _opt(
        None,
        "Hours the rest of the job takes at the split it runs now (for a next run: the whole job "
        "there); weighs a restart and a probe against it (default: the log's samples x epochs and "
        "progress, else its eta_s; from bare numbers: unknown).",
        lo=0.0,
        lo_open=True,
        hi=MAX_TIME_S / 3600.0,
    )
    next_run: bool = _opt(
        False, "Advise the split for the job's next run (no restart cost); implied when the log has ended."
    )
    exact: bool = _opt(False, "Also simulate every split exactly from the log's own step times (slower).")
    interval_s: float = _opt(
        DEFAULT_FOLLOW_INTERVAL_S,
        "Seconds between refreshes with --follow.",
        lo=MIN_FOLLOW_INTERVAL_S,
        name="--interval",
    )
    max_wait_s: float | None = _opt(
        None,
        "With --follow: give up (exit 2) if a log is still missing after this many seconds (default: wait).",
        lo=0.0,
        name="--max-wait",
    )
    settle_tol: float = _opt(
        DEFAULT_SETTLE_TOL,
        f"With --follow: the odds have settled when, over the last {SETTLE_REFRESHES} refreshes, the action "
        f"and split are unchanged and p_best (0-1) and the expected regret (/100) each moved at most this.",
        **_SHARE,
    )
    gpus_per_worker: Mapping[str, int] | None = _opt(
        None,
        "GPUs one engine of a role holds, e.g. target=2 (TP-2 targets); roles not named: "
        "the log's (1 if it says none). Splits are enumerated in engines.",
        lo=1,
        hi=MAX_GPUS_PER_WORKER,
    )
    engine_scaling: Mapping[str, float] | None = _opt(
        None,
        "With --gpus-per-worker unlike the log's: the per-GPU rate ratio of the new engine "
        "size to the logged one, e.g. target=0.9 (1: linear). An assumption you give.",
        lo=MIN_ENGINE_SCALING,
        hi=MAX_ENGINE_SCALING,
    )
    gpus_per_node: int | None = _opt(
        None, "GPUs of one node (default: the log's; none: one node holds all).", lo=1, hi=MAX_GPUS
    )
    link_gbytes_s: float | None = _opt(
        None,
        "Inter-node link bandwidth, GB/s (1e9 bytes/s), one per node pair direction (default: measured "
        "from the log's xfer, else its header's link_bytes_s).",
        lo=0.0,
        lo_open=True,
        hi=MAX_LINK_GBYTES_S,
    )
    min_efficiency: float | None = _opt(
        None, f"Fail below this (default: the config's, else {DEFAULT_MIN_EFFICIENCY:g}).", **_SHARE
    )
    min_gpu_util: float | None = _opt(
        None, "Fail below this GPU utilisation (with --metric gpu_util or a gpu_util config).", **_SHARE
    )
    min_confidence: float | None = _opt(
        None,
        "Also fail unless the planned split is at least this likely (0-1) to be within 2% "
        "of the best split: its p_best (default: the config's, else no such condition).",
        **_SHARE,
    )
    metric: str | None = _opt(None, "efficiency or gpu_util (default: the config's, else efficiency).")
    tokens_per_batch: float = _opt(DEFAULT_TOKENS_PER_BATCH, "Mean tokens per batch (for tok/s).", lo=1.0)
    scv: float | None = _opt(None, "Step-time variability (squared CV).", lo=0.0)
    sync_every: int = _opt(0, "Drafter steps per sync.", lo=0, hi=MAX_SYNC_EVERY)
    sync_s: float = _opt(0.0, "Seconds per sync at this drafter count.", lo=0.0)
    hs_bytes_per_token: float | None = _opt(
        None,
        "Bytes of hidden state per token (a log header's hs_bytes_per_token): what a batch sends "
        "over --link-gbytes-s between nodes, and what q_hs slots cost in memory.",
        lo=0.0,
        lo_open=True,
        hi=MAX_HS_BYTES_PER_TOKEN,
    )
    # from bare numbers: carry what real GPUs do that the numbers cannot show (`advisor.fit.pipeline`)
    hardware_priors: bool = _opt(True, "", name="hardware_priors")

    def __post_init__(self) -> None:
        for name, f in option_fields().items():
            value = getattr(self, name)
            if value is None and f.default is not None:
                raise SettingsError(f.metadata["flag"].name, f"must be given (default {f.default!r}), got None")
            object.__setattr__(self, name, _checked(name, value))
        _check_total("--roles", (self.roles or {}).values())
        if self.metric is not None and self.metric not in METRICS:
            raise SettingsError("--metric", f"must be one of {', '.join(METRICS)}, got {self.metric!r}")

    @classmethod
    def of(cls, options: Options | None = None, **given: Any) -> Options:
        """Options with some fields replaced, validated.

        Args:
            options: the options to start from (None: all defaults).
            **given: field name -> value, put over ``options``.

        Returns:
            The options, validated; ``options`` itself where nothing is given.

        Raises:
            SettingsError: a given value that fails its flag's checks, naming the flag.
        """
        base = options if options is not None else cls()
        if not isinstance(base, Options):
            raise TypeError(f"options must be an Options, got {type(base).__name__}")
        return replace(base, **given) if given else base

    def given(self) -> dict[str, Any]:
        """The fields that differ from their defaults (what a user set).

        Returns:
            field name -> value, for those fields.
        """
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}

    def over(self, base: Options) -> Options:
        """These options put over others: the command line over a config.

        Args:
            base: the options under these (a config's).

        Returns:
            ``base`` with the fields set here (off their defaults, and not None) put in.
        """
        return replace(base, **{name: v for name, v in self.given().items() if v is not None})


for _f in fields(Options):  # a flag not named is the field's name, dashed: hs_cap's is --hs-cap
    object.__setattr__(_f.metadata["flag"], "name", _f.metadata["flag"].name or "--" + _f.name.replace("_", "-"))


@functools.cache
def option_fields() -> dict[str, Any]:
    """The `Options` fields by name."""
    return {f.name: f for f in fields(Options)}


@functools.cache
def option_kind(name: str) -> Any:
    """What `Options` field ``name`` takes: int, float, bool, str, or a role map (``Mapping[str, int]``)."""
    hint = typing.get_type_hints(Options)[name]
    return next((t for t in typing.get_args(hint) if t is not type(None)), hint)


def _checked(name: str, value: Any) -> Any:
    """One option's value, checked against its type and `Flag` and normalized."""
    flag, kind = option_fields()[name].metadata["flag"], option_kind(name)
    if value is None:
        return None
    if typing.get_origin(kind) is Mapping:
        whole = typing.get_args(kind)[1] is int
        return parse_role_values(flag.name, value, whole=whole, lo=flag.lo, hi=flag.hi, example=flag.example)
    if kind in (bool, str):
        if not isinstance(value, kind):
            raise SettingsError(
                flag.name, f"must be {'true or false' if kind is bool else 'text'}, got {short_repr(value)}"
            )
        return value
    if kind is int:
        return _whole(flag.name, value, flag.lo, flag.hi)
    return _real(flag.name, value, flag.lo, flag.hi, lo_open=flag.lo_open)


def _whole(option: str, value: Any, lo: float | None, hi: float | None) -> int:
    """A whole number from ``lo`` to ``hi``; past ``hi`` the message names the limit."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(option, f"must be a whole number, got {short_repr(value)}")
    if hi is not None and value > hi:
        raise SettingsError(option, f"{value} is more than the limit {int(hi)}")
    if lo is not None and value < lo:
        raise SettingsError(option, f"must be at least {int(lo)}, got {value}")
    return value


def _real(option: str, value: Any, lo: float | None, hi: float | None, *, lo_open: bool = False) -> float:
    """A finite number in [lo, hi] (above ``lo`` where ``lo_open``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingsError(option, f"must be a number, got {short_repr(value)}")
    if not math.isfinite(value):
        raise SettingsError(option, f"must be a finite number, got {value}")
    if hi is not None and value > hi:
        raise SettingsError(option, f"{value:g} is more than the limit {hi:g}")
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise SettingsError(option, f"must be {'above' if lo_open else 'at least'} {lo:g}, got {value:g}")
    return float(value)


def parse_role_values(
    option: str,
    text: str | Mapping[str, Any],
    *,
    whole: bool = True,
    lo: float | None = None,
    hi: float | None = None,
    example: str = "",
) -> dict[str, Any]:
    """``role=value,...`` (or a mapping) for ``option``, in the order given; a role named twice is an error.

    The one reader of role maps: ``--roles``, ``--gpus-per-worker``, ``--engine-scaling`` and the
    TensorBoard import's ``--roles``. Role names are checked against a log by `check_role_names`.
    """
    example = example or ("target=2" if whole else "target=0.9")
    if isinstance(text, Mapping):
        items = [(str(k), v) for k, v in text.items()]
    elif isinstance(text, str):
        items = []
        for part in text.split(","):
            name, eq, val = (x.strip() for x in part.partition("="))
            if not eq or not name:
                raise SettingsError(
                    option, f"expected role=value pairs like {example}, got {part.strip()!r} in {short_repr(text)}"
                )
            if any(name == n for n, _ in items):
                raise SettingsError(option, f"{name!r} is given twice in {short_repr(text)}")
            try:
                items.append((name, int(val) if whole else float(val)))
            except ValueError:
                raise SettingsError(
                    option, f"{short_repr(part.strip())}: {short_repr(val)} is not a {'whole ' if whole else ''}number"
                ) from None
    else:
        raise SettingsError(option, f"expected role=value pairs like {example}, got {short_repr(text)}")
    check = _whole if whole else _real
    return {name: check(f"{option} {name}", v, lo, hi) for name, v in items}


def check_role_names(option: str, given: Mapping[str, Any] | None, roles: Sequence[str]) -> dict[str, Any]:
    """A parsed role map whose names are checked against the log's roles."""
    for name in given or {}:
        if name not in roles:
            raise SettingsError(option, f"unknown role {name!r} (the roles are {' and '.join(roles)})")
    return dict(given or {})


CAPACITY_FORMS = "a value (0.92), a range (0.88..0.95) or a lower bound ('>=39')"


@dataclass(frozen=True, kw_only=True)
class Capacity:
    """A role's pool capacity (batches/s, all its workers together) as the user knows it: a value
    (``low == high``), a range (``low < high``) or a lower bound (``high`` is ``inf``)."""

    low: float
    high: float

    @property
    def kind(self) -> str:
        return "value" if self.low == self.high else "bound" if math.isinf(self.high) else "range"

    @property
    def point(self) -> float:
        """The capacity a split is projected at: the value, a range's geometric middle, a bound's end."""
        return self.low if self.kind != "range" else math.sqrt(self.low * self.high)

    def text(self) -> str:
        """The capacity as a user writes it."""
        return {"value": f"{self.low:.4g}", "bound": f">={self.low:.4g}"}.get(
            self.kind, f"{self.low:.4g}..{self.high:.4g}"
        )


def as_capacity(option: str, value: Any) -> Capacity:
    """A capacity from what a user gives, checked."""
    unread = SettingsError(option, f"expected {CAPACITY_FORMS}, got {value!r}")
    if isinstance(value, Capacity):
        low, high = value.low, value.high
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        low = high = float(value)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        try:
            low, high = float(value[0]), float(value[1])
        except (TypeError, ValueError):
            raise unread from None
    elif isinstance(value, str):
        low, high = _parse_capacity(option, value)
    else:
        raise unread
    if not (math.isfinite(low) and low > 0):
        raise SettingsError(
            option, f"must be a finite number > 0 (batches per second), got {low:g}; expected {CAPACITY_FORMS}"
        )
    if not (high >= low) or (math.isnan(high)):
        raise SettingsError(option, f"a range's upper end must not be below its lower end, got {low:g}..{high:g}")
    for v in (low, high):
        if math.isfinite(v) and not MIN_CAPACITY_BPS <= v <= MAX_CAPACITY_BPS:
            raise SettingsError(
                option, f"must be from {MIN_CAPACITY_BPS:g} to {MAX_CAPACITY_BPS:g} batches per second, got {v:g}"
            )
    return Capacity(low=low, high=high)


def _parse_capacity(option: str, text: str) -> tuple[float, float]:
    """``x``, ``lo..hi`` or ``>=x``; each number as Python reads one (``float``)."""
    body = text.strip()
    try:
        if body.startswith(">="):
            return float(body[2:]), math.inf
        if ".." in body:
            lo, hi = (float(x) for x in body.split("..", 1))
        else:
            lo = hi = float(body)
    except ValueError:
        raise SettingsError(option, f"cannot read {text!r}: expected {CAPACITY_FORMS}") from None
    if lo != hi and not math.isfinite(hi):
        raise SettingsError(
            option, f"a range's upper end must be finite, got {text!r} (a lower bound is written '>=x')"
        )
    return lo, hi


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The options as given, what the log(s) showed, and what `build_settings` derives from both:
    G, the q_hs depth and batch size projected, the split to judge (``roles``; None: the observed
    one), the engines, nodes and link."""

    options: Options
    logged: Logged
    gpus: int
    hs_cap: int
    tokens_per_batch: float
    roles: Mapping[str, int] | None = None
    extrapolated_tokens: bool = False  # tokens_per_batch outside the logged range
    gpus_per_worker: tuple[int, int] = (1, 1)  # GPUs per engine projected (producer, consumer)
    # per-GPU rate ratio of an engine at the projected size to one at the logged size (given); 1 where equal
    engine_scaling: tuple[float, float] = (1.0, 1.0)
    gpus_per_node: int | None = None  # None: one node holds all G
    link_bytes_s: float | None = None  # the inter-node link's bandwidth (None: unknown, taken as free)
    link_source: str | None = None  # "given" (--link-gbytes-s), "measured" (the log's xfer), "header"
    # read through by the stages that take the settings
    producer = property(lambda self: self.logged.roles[0])
    consumer = property(lambda self: self.logged.roles[1])
    token_budget = property(lambda self: self.options.token_budget)  # None: the log's own
    log_token_budget = property(lambda self: self.logged.token_budget)
    restart_cost_h = property(lambda self: self.options.restart_cost_h)
    next_run = property(lambda self: self.options.next_run)
    run_ended = property(lambda self: self.logged.run_ended)
    cpu = property(lambda self: self.logged.cpu)
    log_gpus_per_worker = property(lambda self: self.logged.gpus_per_worker)
    # --job-hours: seconds the rest of the job takes at the split it runs (None: the log's)
    job_s = property(lambda self: None if self.options.job_hours is None else self.options.job_hours * 3600.0)

    def split_gpus(self, n: int, m: int) -> int:
        """GPUs of a split of engines."""
        return n * self.gpus_per_worker[0] + m * self.gpus_per_worker[1]

    @property
    def nodes(self) -> int:
        return self.gpus // self.gpus_per_node if self.gpus_per_node else 1

    @property
    def engines_changed(self) -> bool:
        return self.gpus_per_worker != self.log_gpus_per_worker

    def engine_pairs(self) -> list[tuple[int, int]]:
        """Every split (N, M) of engines that uses all G GPUs, N >= 1, M >= 1, highest N first."""
        return engine_pairs(self.gpus, *self.gpus_per_worker)

    @property
    def for_next_run(self) -> bool:
        """Advice for the job's next run: no restart cost applies."""
        return self.next_run or self.run_ended

    def units(self, n: int | None = None) -> str:
        """A count with the word for what is split."""
        return units_text(self.gpus if n is None else n, cpu=self.cpu)

    @property
    def own_budget(self) -> bool:
        return self.token_budget is None

    def to_json(self) -> dict[str, Any]:
        """The settings as the JSON report's ``settings`` object."""
        out = {
            "gpus": self.gpus,
            "token_budget": self.token_budget or self.log_token_budget,
            "tokens_per_batch": round(self.tokens_per_batch, 1) if self.logged.tokens_measured else None,
            "hs_cap": self.hs_cap,
            "restart_cost_h": self.restart_cost_h,
            "run_ended": self.run_ended,
            "next_run": self.next_run,
        }
        if self.job_s is not None:
            out["job_hours"] = self.job_s / 3600.0
        if self.gpus_per_worker != (1, 1) or self.engines_changed:
            out["gpus_per_worker"] = dict(zip((self.producer, self.consumer), self.gpus_per_worker))
        if self.engines_changed:
            out["engine_scaling"] = dict(zip((self.producer, self.consumer), self.engine_scaling))
        if self.gpus_per_node:
            out["gpus_per_node"] = self.gpus_per_node
        if self.link_bytes_s:
            out["link_bytes_s"] = self.link_bytes_s
        return out


def engine_pairs(gpus: int, k_p: int, k_c: int) -> list[tuple[int, int]]:
    """Every (N, M) with N k_p + M k_c = gpus, N >= 1, M >= 1, highest N first."""
    return [
        (n, (gpus - n * k_p) // k_c)
        for n in range((gpus - k_c) // k_p, 0, -1)
        if (gpus - n * k_p) > 0 and (gpus - n * k_p) % k_c == 0
    ]


def _engines(options: Options, logged: Logged, gpus: int) -> tuple[tuple[int, int], tuple[float, float], int | None]:
    """GPUs per engine projected (the log's unless given), the per-GPU scaling where it changes,
    and the node size, validated against G."""
    producer, consumer = roles = logged.roles
    log_k = logged.gpus_per_worker
    given = check_role_names("--gpus-per-worker", options.gpus_per_worker, roles)
    k = (given.get(producer, log_k[0]), given.get(consumer, log_k[1]))
    scale = check_role_names("--engine-scaling", options.engine_scaling, roles)
    for i, role in enumerate(roles):
        if role in scale and k[i] == log_k[i]:
            raise SettingsError(
                "--engine-scaling",
                f"{role}: the {role} engines keep their logged {log_k[i]} "
                f"GPU(s); give --gpus-per-worker {role}=K to project engines of another size",
            )
        if k[i] != log_k[i] and role not in scale:
            raise SettingsError(
                "--engine-scaling",
                f"{role} engines of {k[i]} GPUs from a log of {log_k[i]}-GPU "
                f"engines: the log cannot tell how an engine's rate scales with its GPUs; give the "
                f"per-GPU rate ratio, e.g. --engine-scaling {role}=0.9 (1: linear)",
            )
    es = (scale.get(producer, 1.0), scale.get(consumer, 1.0))
    if not engine_pairs(gpus, *k):
        raise SettingsError(
            "--gpus",
            f"{gpus} GPUs cannot be split into {producer} engines of {k[0]} and "
            f"{consumer} engines of {k[1]} GPUs (N x {k[0]} + M x {k[1]} = {gpus}, N, M >= 1); "
            f"give --gpus as such a sum or another --gpus-per-worker",
        )
    gpus_per_node = options.gpus_per_node if options.gpus_per_node is not None else logged.gpus_per_node
    if gpus_per_node is not None:
        gpus_per_node = _whole("--gpus-per-node", gpus_per_node, 1, MAX_GPUS)
        if gpus % gpus_per_node:
            raise SettingsError("--gpus-per-node", f"{gpus} GPUs are not whole nodes of {gpus_per_node}")
        if max(k) > gpus_per_node:
            raise SettingsError(
                "--gpus-per-node",
                f"an engine of {max(k)} GPUs does not fit in a node of {gpus_per_node} (an engine never spans nodes)",
            )
        if gpus_per_node == gpus:
            gpus_per_node = None
    return k, es, gpus_per_node


def check_roles(
    roles: Mapping[str, int], producer: str, consumer: str, gpus: int, gpus_per_worker: tuple[int, int] = (1, 1)
) -> dict[str, int]:
    """The split to judge (engines), validated against the log's roles and G: the one check of
    ``--roles`` and of a gate config's ``[roles]`` (an error per role names it: ``--roles drafter``)."""
    both = (producer, consumer)
    for r in roles:
        if r not in both:
            close = difflib.get_close_matches(r, both, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'?" if close else f"the log's roles are {producer} and {consumer}"
            raise SettingsError(f"--roles {r}", f"is not a role of the log; {hint}")
    for r in both:
        if r not in roles:
            raise SettingsError(
                f"--roles {r}", f"is missing: name both roles of the log, e.g. {producer}=6,{consumer}=2"
            )
    out = {r: _whole(f"--roles {r}", roles[r], 1, MAX_GPUS) for r in both}
    kp, kc = gpus_per_worker
    total = out[producer] * kp + out[consumer] * kc
    if total != gpus:
        each = f" (engines of {kp} and {kc} GPUs)" if (kp, kc) != (1, 1) else ""
        raise SettingsError(
            "--roles",
            f"{producer}={out[producer]} + {consumer}={out[consumer]} is {total} GPUs{each}, "
            f"but {gpus} are split (give --gpus {total} to split {total})",
        )
    return out


# role names that read as English nouns (target, drafter, trainer, engine, ...) take an "s" in the
# plural; any other name (a product or an acronym: vllm, sglang) is a label, counted in workers
ROLE_NOUN_ENDINGS = ("er", "or", "et", "nt", "ne", "el", "le", "ist", "ant")


def role_is_noun(role: str) -> bool:
    """Whether a role's name reads as an English noun (its plural adds "s"), not a label."""
    return role.islower() and role.isalpha() and role.endswith(ROLE_NOUN_ENDINGS)


def role_plural(role: str) -> str:
    """The workers of a role in a sentence."""
    return f"{role}s" if role_is_noun(role) else f"{role} workers"


def units_text(n: int, *, cpu: bool = False) -> str:
    """A count with the word for what is split."""
    return f"{n} {'CPU worker' if cpu else 'GPU'}{'s' if n != 1 else ''}"


def role_count(n: int, role: str) -> str:
    """A count of a role's workers in a sentence."""
    if n == 1:
        return f"1 {role}" if role_is_noun(role) else f"1 {role} worker"
    return f"{n} {role_plural(role)}"


@dataclass(frozen=True, kw_only=True)
class Logged:
    """What the log(s) (or the what-if numbers) showed: what an option not given falls back to."""

    roles: tuple[str, str]  # (producer, consumer)
    gpus: int  # the header's G
    hs_cap: int  # q_hs depth, batches
    tokens_mean: float  # mean tokens per batch
    tokens_range: tuple[float, float]  # the logged batches' range of tokens
    token_budget: int | None = None  # the header's batch token budget
    run_ended: bool = False  # the (first) log has an `end` event
    cpu: bool = False  # the workers ran on CPU (header device "cpu")
    gpus_per_worker: tuple[int, int] = (1, 1)
    gpus_per_node: int | None = None  # the header's node size
    link_bytes_s: float | None = None  # the link's bandwidth measured from the log (or its header)
    link_source: str | None = None  # "measured" (the log's xfer) or "header"
    tokens_measured: bool = True  # False: no log measured tokens; the batch size is nominal


def build_settings(options: Options, logged: Logged) -> Settings:
    """The options resolved against what the log(s) showed: G, the q_hs depth, the batch size,
    the split to judge, engines, nodes and the link.

    A ``token_budget`` keeps the logged fill (tokens per batch / budget); batches more than
    `SAME_SIZE_TOL` outside the logged range are flagged as extrapolated. Where no log measured
    tokens (``logged.tokens_measured`` false) and the header gives no budget, a batch's size is
    unknown and ``--token-budget`` has nothing to scale.
    """
    producer, consumer = logged.roles
    gpus = _whole("--gpus", options.gpus if options.gpus is not None else logged.gpus, MIN_GPUS, MAX_GPUS)
    k, es, gpn = _engines(options, logged, gpus)
    if options.link_gbytes_s is not None:
        link, source = options.link_gbytes_s * 1e9, "given"
    else:
        link, source = (logged.link_bytes_s, logged.link_source) if logged.link_bytes_s else (None, None)
    tokens, extrapolated, lo_hi = logged.tokens_mean, False, logged.tokens_range
    if options.token_budget is not None:
        if not logged.tokens_measured and not logged.token_budget:
            raise SettingsError(
                "--token-budget",
                "the log measured no tokens (no step events, no 'tok_s' in its "
                "rates) and its header gives no token_budget, so its batches' size is unknown: "
                "add token_budget to the header (import-tb --token-budget) or log tok_s",
            )
        # batches fill the budget to the same degree as in the logged run
        fill = logged.tokens_mean / logged.token_budget if logged.token_budget else 1.0
        tokens = options.token_budget * fill
        extrapolated = not (1 - SAME_SIZE_TOL) * lo_hi[0] <= tokens <= (1 + SAME_SIZE_TOL) * lo_hi[1]
    judged = check_roles(options.roles, producer, consumer, gpus, k) if options.roles is not None else None
    return Settings(
        options=options,
        logged=logged,
        gpus=gpus,
        hs_cap=logged.hs_cap if options.hs_cap is None else options.hs_cap,
        tokens_per_batch=float(tokens),
        roles=judged,
        extrapolated_tokens=extrapolated,
        gpus_per_worker=k,
        engine_scaling=es,
        gpus_per_node=gpn,
        link_bytes_s=link,
        link_source=source,
    )


def check_counts(counts: Mapping[str, int]) -> None:
    """Check worker counts given by option: each, and all together, at most `MAX_GPUS`."""
    for option, n in counts.items():
        _whole(option, n, None, MAX_GPUS)
    _check_total(" + ".join(counts), counts.values())


def _check_total(option: str, counts: Collection[int]) -> None:
    """A split's GPUs together at most `MAX_GPUS`."""
    if sum(counts) > MAX_GPUS:
        raise SettingsError(option, f"the split uses {sum(counts)} GPUs, more than the limit {MAX_GPUS}")
