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
MAX_TIME_S = 1e8                # seconds, any time in a log (t, busy, ...: about three years); import-tb too
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
# Engines, nodes and the link (docs/log-schema.md "Engines of several GPUs").
MAX_GPUS_PER_WORKER = 64        # GPUs one engine holds (TP x PP of a deployed engine: 1-16 in practice)
MAX_PLACEMENTS = 20_000         # placements of one split tried exhaustively; past this, the candidate families
MIN_ENGINE_SCALING, MAX_ENGINE_SCALING = 0.05, 2.0   # per-GPU rate ratio of an engine at another size
ENGINE_SCALING_SE = 0.10        # a given --engine-scaling is a guess: intervals span +-10% of it
LINK_SE = 0.10                  # a link bandwidth not measured from this log's crossings: intervals span +-10%
MAX_LINK_GBYTES_S = 1e4         # GB/s: 10 TB/s is past any link


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
    # engines of several GPUs (producer, consumer): GPUs per engine projected, and in the log(s)
    gpus_per_worker: tuple[int, int] = (1, 1)
    log_gpus_per_worker: tuple[int, int] = (1, 1)
    # per-GPU rate ratio of an engine at the projected size to one at the logged size (given); 1 where equal
    engine_scaling: tuple[float, float] = (1.0, 1.0)
    gpus_per_node: int | None = None          # None: one node holds all G
    link_bytes_s: float | None = None         # the inter-node link's bandwidth (None: unknown, taken as free)
    link_source: str | None = None            # "given" (--link-gbytes-s), "measured" (the log's xfer), "header"
    tokens_measured: bool = True              # False: no log measured tokens; tokens_per_batch is nominal

    def split_gpus(self, n: int, m: int) -> int:
        """GPUs of a split of ``n`` producer and ``m`` consumer engines."""
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
        """``n`` (default G) with the word for what is split: "8 GPUs", or "3 CPU workers" when the
        log's workers ran on CPU (header ``device: cpu``)."""
        n = self.gpus if n is None else n
        return f"{n} {'CPU worker' if self.cpu else 'GPU'}{'s' if n != 1 else ''}"

    @property
    def own_budget(self) -> bool:
        return self.token_budget is None

    def to_json(self) -> dict[str, Any]:
        out = {"gpus": self.gpus, "token_budget": self.token_budget or self.log_token_budget,
               "tokens_per_batch": round(self.tokens_per_batch, 1) if self.tokens_measured else None,
               "hs_cap": self.hs_cap,
               "restart_cost_h": self.restart_cost_h, "run_ended": self.run_ended, "next_run": self.next_run}
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
    return [(n, (gpus - n * k_p) // k_c) for n in range((gpus - k_c) // k_p, 0, -1)
            if (gpus - n * k_p) > 0 and (gpus - n * k_p) % k_c == 0]


def parse_role_map(option: str, text: str | Mapping[str, Any] | None, roles: tuple[str, str], *, whole: bool,
                   lo: float, hi: float) -> dict[str, Any]:
    """``role=value,...`` (or a mapping) for ``option``: names among ``roles``, values in [lo, hi]."""
    if text is None:
        return {}
    if isinstance(text, Mapping):
        items = list(text.items())
    else:
        items = []
        for part in (x.strip() for x in str(text).split(",") if x.strip()):
            name, eq, val = part.partition("=")
            if not eq:
                raise SettingsError(option, f"expected role=value pairs like {roles[0]}=2, got {part!r}")
            try:
                num: Any = int(val) if whole else float(val)
            except ValueError:
                raise SettingsError(option, f"{name.strip()}: {val!r} is not a {'whole ' if whole else ''}number") from None
            items.append((name.strip(), num))
    out: dict[str, Any] = {}
    for name, v in items:
        if name not in roles:
            raise SettingsError(option, f"unknown role {name!r} (the roles are {roles[0]} and {roles[1]})")
        if whole:
            out[name] = _whole(f"{option} {name}", v, int(lo), int(hi))
        else:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise SettingsError(f"{option} {name}", f"must be a number between {lo:g} and {hi:g}, got {v!r}")
            out[name] = float(v)
    return out


def _engines(producer: str, consumer: str, gpus: int, log_k: tuple[int, int],
             gpus_per_worker: Mapping[str, int] | None, engine_scaling: Mapping[str, float] | None,
             gpus_per_node: int | None) -> tuple[tuple[int, int], tuple[float, float], int | None]:
    """GPUs per engine projected (the log's unless given), the per-GPU scaling where it changes,
    and the node size, validated against G."""
    given = parse_role_map("--gpus-per-worker", gpus_per_worker, (producer, consumer), whole=True, lo=1,
                           hi=MAX_GPUS_PER_WORKER)
    k = (given.get(producer, log_k[0]), given.get(consumer, log_k[1]))
    scale = parse_role_map("--engine-scaling", engine_scaling, (producer, consumer), whole=False,
                           lo=MIN_ENGINE_SCALING, hi=MAX_ENGINE_SCALING)
    for i, role in enumerate((producer, consumer)):
        if role in scale and k[i] == log_k[i]:
            raise SettingsError("--engine-scaling", f"{role}: the {role} engines keep their logged {log_k[i]} "
                                f"GPU(s); give --gpus-per-worker {role}=K to project engines of another size")
        if k[i] != log_k[i] and role not in scale:
            raise SettingsError("--engine-scaling", f"{role} engines of {k[i]} GPUs from a log of {log_k[i]}-GPU "
                                f"engines: the log cannot tell how an engine's rate scales with its GPUs; give the "
                                f"per-GPU rate ratio, e.g. --engine-scaling {role}=0.9 (1: linear)")
    es = (scale.get(producer, 1.0), scale.get(consumer, 1.0))
    if not engine_pairs(gpus, *k):
        raise SettingsError("--gpus", f"{gpus} GPUs cannot be split into {producer} engines of {k[0]} and "
                            f"{consumer} engines of {k[1]} GPUs (N x {k[0]} + M x {k[1]} = {gpus}, N, M >= 1); "
                            f"give --gpus as such a sum or another --gpus-per-worker")
    if gpus_per_node is not None:
        gpus_per_node = _whole("--gpus-per-node", gpus_per_node, 1, MAX_GPUS)
        if gpus % gpus_per_node:
            raise SettingsError("--gpus-per-node", f"{gpus} GPUs are not whole nodes of {gpus_per_node}")
        if max(k) > gpus_per_node:
            raise SettingsError("--gpus-per-node", f"an engine of {max(k)} GPUs does not fit in a node of "
                                f"{gpus_per_node} (an engine never spans nodes)")
        if gpus_per_node == gpus:
            gpus_per_node = None
    return k, es, gpus_per_node


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


def check_roles(roles: Mapping[str, int], producer: str, consumer: str, gpus: int,
                gpus_per_worker: tuple[int, int] = (1, 1)) -> dict[str, int]:
    """The split to judge (engines), validated against the log's roles and G."""
    names = set(roles)
    want = {producer, consumer}
    if names != want:
        missing, extra = sorted(want - names), sorted(names - want)
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(extra)}"] if extra else [])
        raise SettingsError("--roles", f"{'; '.join(parts)} (the log's roles are {producer} and {consumer}, "
                            f"e.g. {producer}=6,{consumer}=2)")
    out = {r: _whole(f"--roles {r}", roles[r], 1, MAX_GPUS) for r in (producer, consumer)}
    kp, kc = gpus_per_worker
    total = out[producer] * kp + out[consumer] * kc
    if total != gpus:
        each = f" (engines of {kp} and {kc} GPUs)" if (kp, kc) != (1, 1) else ""
        raise SettingsError("--roles", f"{producer}={out[producer]} + {consumer}={out[consumer]} is {total} GPUs{each}, "
                            f"but {gpus} are split (give --gpus {total} to split {total})")
    return out


# role names that read as English nouns (target, drafter, trainer, engine, ...) take an "s" in the
# plural; any other name (a product or an acronym: vllm, sglang) is a label, counted in workers
ROLE_NOUN_ENDINGS = ("er", "or", "et", "nt", "ne", "el", "le", "ist", "ant")


def role_is_noun(role: str) -> bool:
    """Whether a role's name reads as an English noun (its plural adds "s"), not a label."""
    return role.islower() and role.isalpha() and role.endswith(ROLE_NOUN_ENDINGS)


def role_plural(role: str) -> str:
    """The workers of a role in a sentence: "targets", "drafters", "vllm workers"."""
    return f"{role}s" if role_is_noun(role) else f"{role} workers"


def role_count(n: int, role: str) -> str:
    """``n`` workers of a role: "1 drafter", "7 drafters", "1 vllm worker", "2 vllm workers"."""
    if n == 1:
        return f"1 {role}" if role_is_noun(role) else f"1 {role} worker"
    return f"{n} {role_plural(role)}"


def build_settings(*, producer: str, consumer: str, gpus: int, log_hs_cap: int, tokens_mean: float,
                   tokens_range: tuple[float, float], log_token_budget: int | None, hs_cap: int | None = None,
                   token_budget: int | None = None, roles: Mapping[str, int] | None = None,
                   restart_cost_h: float = DEFAULT_RESTART_COST_H, next_run: bool = False,
                   run_ended: bool = False, exact: bool = False, cpu: bool = False,
                   log_gpus_per_worker: tuple[int, int] = (1, 1),
                   gpus_per_worker: Mapping[str, int] | str | None = None,
                   engine_scaling: Mapping[str, float] | str | None = None, gpus_per_node: int | None = None,
                   link_gbytes_s: float | None = None, tokens_measured: bool = True) -> Settings:
    """Validate the options and resolve them against what the log(s) showed (``tokens_measured``:
    whether some log measured tokens; without them and without a logged budget, a batch's size is
    unknown and ``--token-budget`` has nothing to scale)."""
    gpus = _whole("--gpus", gpus, MIN_GPUS, MAX_GPUS)
    k, es, gpn = _engines(producer, consumer, gpus, log_gpus_per_worker, gpus_per_worker, engine_scaling,
                          gpus_per_node)
    link = None
    if link_gbytes_s is not None:
        if isinstance(link_gbytes_s, bool) or not isinstance(link_gbytes_s, (int, float)) or not (
                0 < link_gbytes_s <= MAX_LINK_GBYTES_S):
            raise SettingsError("--link-gbytes-s", f"must be GB/s above 0 and at most {MAX_LINK_GBYTES_S:g}, "
                                f"got {link_gbytes_s!r}")
        link = float(link_gbytes_s) * 1e9
    hs = log_hs_cap if hs_cap is None else _whole("--hs-cap", hs_cap, 0, MAX_QUEUE_CAP)
    if isinstance(restart_cost_h, bool) or not isinstance(restart_cost_h, (int, float)) or not (
            0.0 <= restart_cost_h <= MAX_RESTART_COST_H):
        raise SettingsError("--restart-cost", f"must be hours between 0 and {MAX_RESTART_COST_H:g}, "
                            f"got {restart_cost_h!r}")
    tokens = tokens_mean
    extrapolated = False
    if token_budget is not None:
        token_budget = _whole("--token-budget", token_budget, 1, MAX_TOKEN_BUDGET)
        if not tokens_measured and not log_token_budget:
            raise SettingsError("--token-budget", "the log measured no tokens (no step events, no 'tok_s' in its "
                                "rates) and its header gives no token_budget, so its batches' size is unknown: "
                                "add token_budget to the header (import-tb --token-budget) or log tok_s")
        # batches fill the budget to the same degree as in the logged run
        fill = tokens_mean / log_token_budget if log_token_budget else 1.0
        tokens = token_budget * fill
        lo, hi = tokens_range
        extrapolated = not (1 - SAME_SIZE_TOL) * lo <= tokens <= (1 + SAME_SIZE_TOL) * hi
    judged = check_roles(roles, producer, consumer, gpus, k) if roles is not None else None
    return Settings(gpus=gpus, producer=producer, consumer=consumer, hs_cap=hs, tokens_per_batch=float(tokens),
                    token_budget=token_budget, log_token_budget=log_token_budget, roles=judged,
                    restart_cost_h=float(restart_cost_h), next_run=bool(next_run), run_ended=bool(run_ended),
                    exact=bool(exact), extrapolated_tokens=extrapolated, logged_tokens_range=tuple(tokens_range),
                    cpu=bool(cpu), gpus_per_worker=k, log_gpus_per_worker=tuple(log_gpus_per_worker),
                    engine_scaling=es, gpus_per_node=gpn, link_bytes_s=link, tokens_measured=bool(tokens_measured))
