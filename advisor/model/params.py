"""The model's parameters: the records a fit (`advisor.fit`) hands to the projection."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from advisor.measure.contention import WithinLogContention
from advisor.measure.observe import ObservedRun
from advisor.model.priors import CONTENTION_SINGLE_SE, TOKEN_LINE_CURVATURE_HALF95, TOKEN_RUN_SE
from advisor.settings import SAME_SIZE_TOL
from advisor.stats import Z_95


class Basis(str, Enum):
    """What a role's capacity rests on (``--json`` ``capacity_basis``): step events, ``rates``
    snapshots, a number given, or only a bound (given, or a throttled role's completions)."""

    STEPS = "steps"
    RATES = "rates"
    GIVEN = "given"
    BOUND = "bound"

    def word(self) -> str:
        """How a sentence names the basis."""
        return {
            "steps": "measured from steps",
            "rates": "measured from rates snapshots",
            "given": "given",
            "bound": "a bound",
        }[self.value]

    def short(self) -> str:
        """The one word a threshold sentence gives the basis."""
        return {"steps": "fitted", "rates": "measured", "given": "given", "bound": "the bound"}[self.value]


@dataclass(frozen=True)
class RoleFit:
    """Service model of one GPU role (per worker). ``mu_range_bps``: the per-worker rate's ends
    where the capacity is only known to lie in a range (a bound's upper end ``inf``), ``mu_bps``
    then the point projected; empty: a point with the interval ``mu_low_bps``-``mu_high_bps``."""

    role: str
    busy_mean_s: float
    busy_std_s: float
    mu_bps: float
    mu_low_bps: float
    mu_high_bps: float
    c_s_per_tok: float = 0.0
    t0_s: float = 0.0
    r2: float = 0.0
    n_steps: int = 0
    busy_share: float = math.nan  # shares of wall time (NaN: not measured from steps)
    starved_share: float = math.nan
    blocked_share: float = math.nan
    lower_bound: bool = False  # True: mu is only known to be at least this
    drift: float = 0.0  # |m1 - m2| / (m1 + m2) of the mean busy time in the two halves of the window
    tokens_ref: float = 0.0  # mean tokens per batch that busy_mean_s refers to
    token_model: str = "line"  # "line": t0 + c*tokens (in-log); "power": busy_mean * (tokens/tokens_ref)^p;
    #                                "budgets": busy_mean * (a + b*tokens) / (a + b*tokens_ref), a line through budgets
    token_exponent: float = 1.0  # p of the power law
    token_exponent_half95: float = 0.0  # 95% half-width of p (at one e-fold of extrapolation)
    token_range: tuple[float, float] = (0.0, 0.0)  # mean tokens of the logged budgets (lowest, highest)
    budget_line: tuple[float, float] = (0.0, 0.0)  # (a_s, b_s_per_tok): the posterior mean line through the budgets
    # the line's posterior (see budget_line): grid of elasticities e at budget_tokens_mid, each with its
    # best log level and posterior weight; budget_level_var: variance of the log level given e;
    # budget_anchor_s: the fitted budgets' mean step time at tokens_ref, the level busy_mean_s stands for
    budget_posterior: tuple[tuple[float, float, float], ...] = ()
    budget_tokens_mid: float = 0.0
    budget_level_var: float = 0.0
    budget_anchor_s: float = 0.0
    basis: Basis = Basis.STEPS
    mu_range_bps: tuple[float, float] = ()

    @classmethod
    def unmeasured(
        cls, role: str, mu_bps: float, *, scv: float, mu_interval_bps: tuple[float, float] | None = None, **kw: Any
    ) -> RoleFit:
        """A role not measured from step events: busy = 1 / mu with the assumed ``scv``, no shares."""
        busy = 1.0 / mu_bps
        lo, hi = mu_interval_bps or (mu_bps, mu_bps)
        std = busy * math.sqrt(scv)
        return cls(role=role, busy_mean_s=busy, busy_std_s=std, mu_bps=mu_bps, mu_low_bps=lo, mu_high_bps=hi, **kw)

    def scaled(self, f: float) -> RoleFit:
        """The role with every busy time ``f`` times as long (its rates ``1 / f`` times)."""
        return replace(
            self,
            busy_mean_s=self.busy_mean_s * f,
            busy_std_s=self.busy_std_s * f,
            t0_s=self.t0_s * f,
            c_s_per_tok=self.c_s_per_tok * f,
            mu_bps=self.mu_bps / f,
            mu_low_bps=self.mu_low_bps / f,
            mu_high_bps=self.mu_high_bps / f,
        )

    @property
    def ranged(self) -> bool:
        return len(self.mu_range_bps) == 2

    @property
    def busy_scv(self) -> float:
        return (self.busy_std_s / self.busy_mean_s) ** 2 if self.busy_mean_s > 0 else 0.0

    def busy_at(self, tokens: float) -> float:
        """Mean busy seconds of a batch of ``tokens`` tokens."""
        if self.token_model == "power" and self.tokens_ref > 0 and tokens > 0:
            return max(self.busy_mean_s * (tokens / self.tokens_ref) ** self.token_exponent, 1e-9)
        if self.token_model == "budgets" and self.tokens_ref > 0 and tokens > 0:
            # the posterior line's level at tokens relative to the budgets' own mean at tokens_ref,
            # carried onto this fit's level there (contention and all)
            mean, _ = self._budget_log_moments(tokens)
            return max(self.busy_mean_s * math.exp(mean) / self.budget_anchor_s, 1e-9)
        return max(self.t0_s + self.c_s_per_tok * tokens, 1e-9)

    def _budget_log_moments(self, tokens: float) -> tuple[float, float]:
        """Posterior mean and variance of log busy(tokens) (seconds) from the budgets' line."""
        r = tokens / self.budget_tokens_mid
        wts = [w for _, _, w in self.budget_posterior]
        vals = [lam + math.log(max(1.0 - e + e * r, 1e-12)) for e, lam, _ in self.budget_posterior]
        mean = sum(w * v for w, v in zip(wts, vals))
        var = sum(w * (v - mean) ** 2 for w, v in zip(wts, vals))
        return mean, var + self.budget_level_var

    def busy_at_rel_half95(self, tokens: float) -> float:
        """95% half-width of log(busy_at(tokens)) from the token model alone."""
        if self.token_model not in ("power", "budgets") or self.tokens_ref <= 0 or tokens <= 0:
            return 0.0
        # a run at another budget is another run: the anchor run's own level is off by TOKEN_RUN_SE
        other = abs(tokens / self.tokens_ref - 1.0) > SAME_SIZE_TOL
        run = Z_95 * TOKEN_RUN_SE if other else 0.0
        lo, hi = self.token_range
        if self.token_model == "budgets":
            out = 0.0 if lo <= tokens <= hi else abs(math.log(tokens / (lo if tokens < lo else hi)))
            _, var = self._budget_log_moments(tokens)
            return math.sqrt(Z_95**2 * var + (TOKEN_LINE_CURVATURE_HALF95 * out) ** 2 + run**2)
        # one budget: the exponent's range over the e-folds from it
        return math.hypot(self.token_exponent_half95 * abs(math.log(tokens / self.tokens_ref)), run)


@dataclass(frozen=True, kw_only=True)
class ContentionFit:
    """How a worker's step time depends on the split (shared host resources).

    ``busy_r(N) = busy_r(N_ref) * exp(k_r * (N - N_ref))`` for N producer engines at the fitted G
    (G counts every engine's GPUs). ``k_r`` is the weighted least-squares slope of the logs' log
    mean busy time on N where logs at two or more splits of one G are given. Beyond the logged
    producer counts the slope is ``prior_k`` and ``role_se[r]`` (the prior, or ``hypot(prior,
    within-log slope)``: `advisor.fit.splits`) is carried per worker moved. With ``at_any_g``
    (real GPUs without a step log) each role moves by its own count at any G; else another G keeps
    the logged step times. A role with one worker on one side of the logged splits only carries
    ``CONTENTION_SINGLE_SE`` too (a lone worker is another regime). ``within``: the first log's
    within-log slopes (`advisor.measure.contention`), reported; ``prior_se``: the host's prior.
    """

    ref_producers: int
    gpus: int  # the fitted split's GPUs, every engine's counted (N k_p + M k_c)
    k: tuple[float, float] = (0.0, 0.0)  # per role (producer, consumer): the fitted slope k_r
    k_se: tuple[float, float] = (0.0, 0.0)  # its standard error
    measured: bool = False
    lo_producers: int = 0  # the logged producer counts span lo..hi
    hi_producers: int = 0
    prior_se: float = 0.0  # the host's prior per worker moved (0: none carried)
    role_se: tuple[float, float] = (0.0, 0.0)  # per role: standard error per worker moved beyond the logs
    at_any_g: bool = False  # each role moves by its own count at any G (the GPU priors)
    run_se: float = 0.0  # run-to-run level shift per role (RUN_SE on shared hosts)
    prior_k: tuple[float, float] = (0.0, 0.0)
    within: WithinLogContention | None = None
    shown_slope: float = 0.0
    gpus_per_worker: tuple[int, int] = (1, 1)  # GPUs one producer and one consumer engine hold

    @classmethod
    def unmeasured(cls, ref_producers: int, gpus: int, **priors: Any) -> ContentionFit:
        """No slope measured: every log at one split."""
        return cls(
            ref_producers=ref_producers, gpus=gpus, lo_producers=ref_producers, hi_producers=ref_producers, **priors
        )

    def consumers(self, n_producer: float, gpus: int) -> float:
        """The consumer engines beside ``n_producer`` producer engines on ``gpus`` GPUs."""
        kp, kc = self.gpus_per_worker
        return (gpus - n_producer * kp) / kc

    def gpus_of(self, n_producer: int, n_consumer: int) -> int:
        """The GPUs a split of ``n_producer`` and ``n_consumer`` engines holds (engines as logged)."""
        kp, kc = self.gpus_per_worker
        return n_producer * kp + n_consumer * kc

    def _moves(self, n_producer: int, gpus: int) -> tuple[float, float, float]:
        """Producers moved inside the logged splits, then each role's workers moved beyond them."""
        if gpus != self.gpus and not self.at_any_g:
            return 0.0, 0.0, 0.0
        c = min(max(n_producer, self.lo_producers), self.hi_producers)
        beyond_c = self.consumers(c, self.gpus) - self.consumers(n_producer, gpus) if self.at_any_g else n_producer - c
        return c - self.ref_producers, n_producer - c, beyond_c

    def sides(self, n_producer: int, gpus: int) -> tuple[float, float]:
        """The sign of each role's split term (one unknown slope per role moves the splits on either
        side of the given one opposite ways)."""
        inside, *beyond = self._moves(n_producer, gpus)
        return tuple(1.0 if inside + b >= 0 else -1.0 for b in beyond)

    def scale(self, n_producer: int, gpus: int) -> tuple[float, float]:
        """Busy-time multipliers: the fitted line between the logged splits, the prior's slope beyond."""
        inside, *beyond = self._moves(n_producer, gpus)
        return tuple(math.exp(k * inside + pk * b) for k, pk, b in zip(self.k, self.prior_k, beyond))

    def rel_se(self, n_producer: int, gpus: int) -> tuple[float, float]:
        """Standard errors of log busy at ``n_producer`` producers."""
        inside, *beyond = self._moves(n_producer, gpus)
        return tuple(se * abs(inside) + rse * abs(b) for se, rse, b in zip(self.k_se, self.role_se, beyond))

    def single_se(self, n_producer: int, gpus: int) -> tuple[float, float]:
        """Standard errors of log busy for the lone-worker regime (``CONTENTION_SINGLE_SE``): one side
        of ``n_producer`` and the logged splits has one worker of the role, the other more, and the
        logs did not span both."""
        if (gpus != self.gpus and not self.at_any_g) or not any(self.role_se):
            return 0.0, 0.0
        # (here, ref, lo, hi) of each role: the consumers beside a producer count (at the logged split's G:
        # its own), the fewest beside the most producers
        logged = (self.ref_producers, self.hi_producers, self.lo_producers)
        consumers = (self.consumers(n_producer, gpus), *(self.consumers(a, self.gpus) for a in logged))
        return tuple(
            CONTENTION_SINGLE_SE if (here == 1) != (ref == 1) and not (lo == 1 < hi) else 0.0
            for here, ref, lo, hi in ((n_producer, self.ref_producers, self.lo_producers, self.hi_producers), consumers)
        )


@dataclass(frozen=True, kw_only=True)
class RegimeFit:
    """Time-correlated changes of step time over the steady window: per slice each role's mean
    step time over its overall mean, shrunk towards 1 (James-Stein: ``1 + (1 - 1/F) (m_w/m - 1)``,
    F the between-slice variance over its sampling expectation; `advisor.fit.regimes`). Where
    ``detected``, each slice is projected at its own rates and the throughputs averaged."""

    producer_scale: tuple[float, ...] = ()
    consumer_scale: tuple[float, ...] = ()
    weight: tuple[float, ...] = ()  # share of time of each (grouped) slice
    producer_scv: float = 0.0  # within-slice SCV
    consumer_scv: float = 0.0
    f_producer: float = 0.0
    f_consumer: float = 0.0
    detected: bool = False


NO_REGIMES = RegimeFit()


NO_CONTENTION = ContentionFit.unmeasured(0, 0)


@dataclass(frozen=True)
class SyncFit:
    """Data-parallel drafter sync: every ``sync_every`` steps, a collective of ``T_ar(M)`` s."""

    sync_every: int
    latency_s: float = 0.0  # a in T_ar = c + a*(M-1) + b*(M-1)/M
    bandwidth_s: float = 0.0  # b
    dur_by_workers: Mapping[int, float] = field(default_factory=dict)
    measured: bool = False
    fixed_s: float = 0.0  # c
    # measured at one drafter count only: the scaling with M is unidentified; T_ar(M) assumes a
    # ring and the intervals carry the flat extreme too (allreduce_range_s)
    scaling_identified: bool = True
    bytes_per_sync: float | None = None  # the sync events' mean ``bytes`` (None: not logged)
    # var(S) / (k sigma^2): a round's busy sum S between ranks against independent steps
    # (`advisor.measure.rounds`; 1 where no complete round was logged)
    round_var_ratio: float = 1.0
    # seconds a round spends in neither steps, the barrier nor the logged all-reduce (the untimed
    # collectives around it: `advisor.measure.rounds`), the mean of the logs' complete rounds
    overhead_s: float = 0.0

    def allreduce_s(self, m: int) -> float:
        """T_ar(M), the fitted all-reduce time."""
        if m <= 1:
            return 0.0
        return self.fixed_s + self.latency_s * (m - 1) + self.bandwidth_s * (m - 1) / m

    def allreduce_range_s(self, m: int) -> tuple[float, float]:
        """T_ar(M) between flat (T_0) and ring (T_0 r(M) / r(M_0)) where measured at one M_0 only."""
        if m <= 1:
            return 0.0, 0.0
        if self.scaling_identified or not self.dur_by_workers:
            t = self.allreduce_s(m)
            return t, t
        m0, t0 = next(iter(self.dur_by_workers.items()))
        ring = t0 * ((m - 1) / m) / ((m0 - 1) / m0)
        return min(t0, ring), max(t0, ring)


@dataclass(frozen=True)
class LoaderFit:
    input_bound: bool = False
    capacity_bps: float | None = None  # known when input-bound
    scv: float = 1.0
    producer_starved_share: float = math.nan
    pre_mean_depth: float | None = None
    near_binding: bool = False  # starved with queues running dry, below the fixed thresholds
    calibrated: bool = False  # capacity_bps solved from the observed split's rate


@dataclass(frozen=True)
class LinkFit:
    """The inter-node link as the logs show it (`advisor.fit.bandwidth`): bytes/s, its source
    ("measured", "header", None: unknown), the engines' GPUs and nodes."""

    bytes_s: float | None = None
    source: str | None = None
    steps_known: int = 0  # the first log's steady drafter steps whose origin node is known
    first_crossed: int = 0  # ... and of them, those that crossed
    gpus_per_worker: tuple[int, int] = (1, 1)
    gpus_per_node: int | None = None
    # the first log's placement, engines per node (empty: one node)
    producers_by_node: tuple[int, ...] = ()
    consumers_by_node: tuple[int, ...] = ()


NO_LINK = LinkFit()


class Source(str, Enum):
    """What a fit rests on: step events, ``rates`` snapshots only, or bare numbers (what-if)."""

    STEPS = "steps"
    RATES = "rates"
    NUMBERS = "numbers"

    def __str__(self) -> str:
        return self.value

    @property
    def logged(self) -> bool:
        """A log measured the fit (not bare numbers)."""
        return self is not Source.NUMBERS

    def capacities_from(self) -> str:
        """What the observed capacities come from."""
        return "busy time" if self is Source.STEPS else "'rates' snapshots"

    def measured_by(self) -> str:
        """Who measured the observed split, in parentheses."""
        return "(the log)" if self is Source.STEPS else "(the log's rates snapshots)"


@dataclass(frozen=True)
class PipelineFit:
    """Everything the model needs, fitted from one or more logs of the same job."""

    producer: RoleFit
    consumer: RoleFit
    sync: SyncFit
    loader: LoaderFit
    hs_cap: int
    pre_cap: int
    tokens_mean: float
    source: Source  # what the fit rests on: steps, rates or bare numbers
    observed: tuple[ObservedRun, ...]
    tokens_std: float = math.nan
    seqs_mean: float | None = None
    hs_bytes_per_token: float | None = None
    total_batches: float | None = None  # the whole job, when samples x epochs are known
    tokens_range: tuple[float, float] = (0.0, 0.0)  # batch sizes the step-time line was fitted on
    contention: ContentionFit = NO_CONTENTION
    regimes: RegimeFit = NO_REGIMES
    link: LinkFit = NO_LINK
    # False: no log measured tokens (rates without ``tok_s``); ``tokens_mean`` is then a nominal
    # batch (the header's budget, else 1) that sizes the model's batches, and tokens/s is unknown
    tokens_measured: bool = True
    # False: the logs declare no queue feeding the consumer; ``hs_cap`` 0 then models a hand-off
    # without a buffer (a producer holds its batch until a consumer takes it), and no queue is advised
    hs_declared: bool = True

    @property
    def roles(self) -> tuple[str, str]:
        return self.producer.role, self.consumer.role
