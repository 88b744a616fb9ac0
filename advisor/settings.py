"""The options every number of one piece of advice is computed with, built once.

`advise()` resolves the user's options against the fit (the log's G, q_hs depth and batch size)
into one :class:`Settings` and passes it down to projection, simulation, the decision and the
report, so that no stage re-reads a loose keyword or recomputes a default. Validation happens
here, at the boundary, with errors that name the option (the CLI turns them into exit 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from advisor.errors import SettingsError

# Every option's default and limit, once; the CLI's option defaults, the gate and the log's
# schema (`advisor.ingest.schema`: a log past these limits is refused too) read them from here.
MIN_GPUS = 2
MAX_GPUS = 4096                 # GPUs, or workers of a role: more is not a job anyone runs
MAX_QUEUE_CAP = 10_000          # slots in a queue (--hs-cap, a log's queue caps)
MAX_TOKEN_BUDGET = 1 << 30      # tokens per batch, --token-budget
MAX_SYNC_EVERY = 1 << 53        # drafter steps per sync (what-if): whole numbers exact as floats
DEFAULT_RESTART_COST_H = 1.0    # hours a restart costs (reload, warm-up)
MAX_RESTART_COST_H = 24.0 * 365
DEFAULT_MIN_EFFICIENCY = 0.9    # the gate's threshold when neither --min-efficiency nor the config sets one
DEFAULT_FOLLOW_INTERVAL_S = 5.0  # seconds between refreshes with --follow
MIN_FOLLOW_INTERVAL_S = 0.1
# from bare numbers (what-if), where no log gives them
DEFAULT_HS_CAP = 20             # q_hs depth, batches
DEFAULT_PRE_CAP = 50            # prefetch queue depth, batches
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
        k = self.kind
        return (f"{self.low:.4g}" if k == "value" else f">={self.low:.4g}" if k == "bound"
                else f"{self.low:.4g}..{self.high:.4g}")


def as_capacity(option: str, value: Any) -> Capacity:
    """A capacity from a number, a (low, high) pair, a `Capacity` or text in one of
    ``CAPACITY_FORMS``; a `SettingsError` naming ``option`` and the accepted forms otherwise."""
    if isinstance(value, Capacity):
        low, high = value.low, value.high
    elif isinstance(value, bool):
        raise SettingsError(option, f"expected {CAPACITY_FORMS}, got {value!r}")
    elif isinstance(value, (int, float)):
        low = high = float(value)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        try:
            low, high = float(value[0]), float(value[1])
        except (TypeError, ValueError):
            raise SettingsError(option, f"expected {CAPACITY_FORMS}, got {value!r}") from None
    elif isinstance(value, str):
        low, high = _parse_capacity(option, value)
    else:
        raise SettingsError(option, f"expected {CAPACITY_FORMS}, got {value!r}")
    if not (math.isfinite(low) and low > 0):
        raise SettingsError(option, f"must be a finite number > 0 (batches per second), got {low:g}; expected "
                            f"{CAPACITY_FORMS}")
    if not (high >= low) or (math.isnan(high)):
        raise SettingsError(option, f"a range's upper end must not be below its lower end, got {low:g}..{high:g}")
    for v in (low, high):
        if math.isfinite(v) and not MIN_CAPACITY_BPS <= v <= MAX_CAPACITY_BPS:
            raise SettingsError(option, f"must be from {MIN_CAPACITY_BPS:g} to {MAX_CAPACITY_BPS:g} batches per "
                                f"second, got {v:g}")
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
        raise SettingsError(option, f"a range's upper end must be finite, got {text!r} (a lower bound is written "
                            f"'>=x')")
    return lo, hi


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Resolved options. ``roles`` is the split to judge (None: the observed one)."""

    gpus: int
    producer: str
    consumer: str
    hs_cap: int
    tokens_per_batch: float
    token_budget: int | None = None          # None: the log's own budget
    log_token_budget: int | None = None
    roles: Mapping[str, int] | None = None
    restart_cost_h: float = DEFAULT_RESTART_COST_H
    next_run: bool = False                   # asked for with --next-run
    run_ended: bool = False                  # the (first) log has an `end` event
    exact: bool = False
    extrapolated_tokens: bool = False        # tokens_per_batch outside the logged range
    logged_tokens_range: tuple[float, float] = field(default=(0.0, 0.0))
    cpu: bool = False                        # the log's workers ran on CPU (header device "cpu")

    @property
    def for_next_run(self) -> bool:
        """Advice for the job's next run: no restart cost applies."""
        return self.next_run or self.run_ended

    def units(self, n: int | None = None) -> str:
        """``n`` (default G) with the word for what is split: "8 GPUs", or "3 CPU workers" when the
        log's workers ran on CPU (header ``device: cpu``)."""
        n = self.gpus if n is None else n
        return f"{n} {'CPU worker' if self.cpu else 'GPU'}{'s' if n != 1 else ''}"

    @property
    def own_budget(self) -> bool:
        return self.token_budget is None

    def to_json(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "token_budget": self.token_budget or self.log_token_budget,
                "tokens_per_batch": round(self.tokens_per_batch, 1), "hs_cap": self.hs_cap,
                "restart_cost_h": self.restart_cost_h, "run_ended": self.run_ended, "next_run": self.next_run}


def _whole(option: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(option, f"must be a whole number, got {value!r}")
    if not lo <= value <= hi:
        raise SettingsError(option, f"must be between {lo} and {hi}, got {value}")
    return value


def check_limits(*, gpus: int | None = None, roles: Mapping[str, int] | None = None, hs_cap: int | None = None,
                 sync_every: int | None = None, counts: Mapping[str, int] | None = None) -> None:
    """Options past the limits nobody can mean (time quadratic in G, unbounded memory), checked
    before any log is read. ``counts`` maps an option to a worker count (``{"--targets": 7}``);
    ``roles`` is a split, limited in its sum."""
    for option, n in (counts or {}).items():
        if n > MAX_GPUS:
            raise SettingsError(option, f"{n} is more than the limit {MAX_GPUS}")
    if gpus is not None and gpus > MAX_GPUS:
        raise SettingsError("--gpus", f"{gpus} is more than the limit {MAX_GPUS}")
    if roles and sum(roles.values()) > MAX_GPUS:
        raise SettingsError("--roles", f"the split uses {sum(roles.values())} GPUs, more than the limit {MAX_GPUS}")
    if hs_cap is not None and hs_cap > MAX_QUEUE_CAP:
        raise SettingsError("--hs-cap", f"{hs_cap} is more than the limit {MAX_QUEUE_CAP}")
    if sync_every is not None and sync_every > MAX_SYNC_EVERY:
        raise SettingsError("--sync-every", f"{sync_every} is more than the limit {MAX_SYNC_EVERY}")


def check_roles(roles: Mapping[str, int], producer: str, consumer: str, gpus: int) -> dict[str, int]:
    """The split to judge, validated against the log's roles and G."""
    names = set(roles)
    want = {producer, consumer}
    if names != want:
        missing, extra = sorted(want - names), sorted(names - want)
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(extra)}"] if extra else [])
        raise SettingsError("--roles", f"{'; '.join(parts)} (the log's roles are {producer} and {consumer}, "
                            f"e.g. {producer}=6,{consumer}=2)")
    out = {r: _whole(f"--roles {r}", roles[r], 1, MAX_GPUS) for r in (producer, consumer)}
    total = out[producer] + out[consumer]
    if total != gpus:
        raise SettingsError("--roles", f"{producer}={out[producer]} + {consumer}={out[consumer]} is {total} GPUs, "
                            f"but {gpus} are split (give --gpus {total} to split {total})")
    return out


def build_settings(*, producer: str, consumer: str, gpus: int, log_hs_cap: int, tokens_mean: float,
                   tokens_range: tuple[float, float], log_token_budget: int | None, hs_cap: int | None = None,
                   token_budget: int | None = None, roles: Mapping[str, int] | None = None,
                   restart_cost_h: float = DEFAULT_RESTART_COST_H, next_run: bool = False,
                   run_ended: bool = False, exact: bool = False, cpu: bool = False) -> Settings:
    """Validate the options and resolve them against what the log(s) showed."""
    gpus = _whole("--gpus", gpus, MIN_GPUS, MAX_GPUS)
    hs = log_hs_cap if hs_cap is None else _whole("--hs-cap", hs_cap, 0, MAX_QUEUE_CAP)
    if isinstance(restart_cost_h, bool) or not isinstance(restart_cost_h, (int, float)) or not (
            0.0 <= restart_cost_h <= MAX_RESTART_COST_H):
        raise SettingsError("--restart-cost", f"must be hours between 0 and {MAX_RESTART_COST_H:g}, "
                            f"got {restart_cost_h!r}")
    tokens = tokens_mean
    extrapolated = False
    if token_budget is not None:
        token_budget = _whole("--token-budget", token_budget, 1, MAX_TOKEN_BUDGET)
        # batches fill the budget to the same degree as in the logged run
        fill = tokens_mean / log_token_budget if log_token_budget else 1.0
        tokens = token_budget * fill
        lo, hi = tokens_range
        extrapolated = not (1 - SAME_SIZE_TOL) * lo <= tokens <= (1 + SAME_SIZE_TOL) * hi
    judged = check_roles(roles, producer, consumer, gpus) if roles is not None else None
    return Settings(gpus=gpus, producer=producer, consumer=consumer, hs_cap=hs, tokens_per_batch=float(tokens),
                    token_budget=token_budget, log_token_budget=log_token_budget, roles=judged,
                    restart_cost_h=float(restart_cost_h), next_run=bool(next_run), run_ended=bool(run_ended),
                    exact=bool(exact), extrapolated_tokens=extrapolated, logged_tokens_range=tuple(tokens_range),
                    cpu=bool(cpu))
