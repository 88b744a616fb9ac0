"""Fit the producer/consumer model from the steady part of one or more logs.

Per GPU role r (targets = producer, drafters = consumer):

- capacity comes from busy time, never from throughput: a worker's service rate is
  ``mu_r = 1 / mean(busy_s)`` over its steady steps (a producer behind a full queue completes at
  the consumer's pace, which says nothing about what it could do);
- step time vs tokens: ``busy_s = t0_s + c_s_per_tok * tokens``, a Huber-weighted least-squares
  fit (IRLS, ``HUBER_K`` robust scale units), so another token budget can be projected;
- variability: the squared coefficient of variation (SCV) of busy times, which sets the
  effective queue depth in `advisor.model.chain`;
- interval: a 95% interval on ``mu_r`` from ``BATCH_MEANS`` batch means of the busy series
  (time-ordered, so autocorrelation widens it honestly);
- shares of wall time: busy, starved (``wait``) and blocked, per worker.

Drafter sync (M > 1, data-parallel): one round of ``k = sync_every`` steps per rank costs
``T(M) = k*m + sqrt(k)*sigma*e_M + T_ar(M)`` where m, sigma are the mean and standard deviation
of a drafter step, ``e_M`` the expected maximum of M standard normals (the barrier waits for the
slowest rank), and ``T_ar`` the logged collective time (``sync`` events, ``dur``). Per-rank
scaling is ``s(M) = k*m / T(M)``. ``T_ar`` is fitted on ``c + a*(M-1) + b*(M-1)/M`` (constant,
per-hop latency and ring bandwidth terms, non-negative least squares) from the M values seen
(several logs of one job). With one value T_0 at M_0 the scaling is unidentified: the plausible
extremes are flat (T_0 at every M: a switch-offloaded or latency-bound collective) and ring
(``T_0 r(M) / r(M_0)``, ``r(M) = (M-1)/M``, bandwidth-bound, NCCL's usual case). Projections
use the ring, and each split's interval spans the projection at both extremes
(`sync_scaling_range`, `advisor.model.chain.project_split`); warned. Projecting at the geometric mean
of the two instead (the minimax choice for T_ar) was measured and rejected: it brings a flat
truth within 2.1% but takes ring truths from under 1% to up to 4.0% at far drafter counts (32
GPUs, 8 drafters logged, 2 projected; benchmarks/VALIDATION.md). With none (only M = 1 seen) it is
unknown: ``T_ar = 0`` is assumed, said in an :class:`AssumptionWarning`, and the verdict's
sensitivity to it is shown.

Input limit: producers starved for more than ``INPUT_STARVED_SHARE`` of their time while their
prefetch queues are near empty means the loader caps the pipeline; since an input-bound loader
is never blocked, its capacity is the producers' completion rate. A loader close to binding
(producers starved more than ``LOADER_STARVED_MIN`` while some prefetch queue runs dry in at
least ``PRE_EMPTY_SHARE`` of the snapshots) is engaged too: its capacity is the one at which the
model, loader stage included, meets the observed split's rate (``LoaderFit.calibrated``).

Split-dependent step times (`ContentionFit`): workers that share a host resource slow each
other, so a role's mean step time is modelled as ``busy(N) = busy(N_ref) exp(k (N - N_ref))`` at
a fixed G, fitted from logs at two or more splits; from one split only a prior (per worker of
distance) and a run-to-run term widen the interval, where the log shows shared compute. Inside
one log, `advisor.measure.contention` measures each role's step-time slope on concurrently busy peers:
reported, and a role's own identified slope widens its prior; it does not move the projection.

Non-stationarity: ``RoleFit.drift`` (the two halves of the window) widens the rate interval;
clear regimes (`RegimeFit`, time slices of the window) are projected slice by slice.

Token budget: ``RoleFit.busy_at`` follows a power law ``busy ~ tokens^p`` from one budget (prior p
with its range) unless the in-log line is well identified. From two or more budgets it follows a
line ``busy = L (1 - e + e T / T_mid)`` (a fixed cost ``L (1 - e)`` and a per-token cost; ``e``
the line's elasticity at the budgets' mid-point ``T_mid``, ``0 <= e <= 1``) whose posterior
combines the budgets' log mean step times (each with sampling, drift and run-to-run variance)
with the same prior on ``e``: computed on a grid of ``e``, the level Gaussian given ``e``. The
projection is the posterior mean of ``log busy(T)`` and its interval the posterior variance
there (which grows with the lever arm from the logged budgets), another run's level, and a
curvature term per e-fold beyond the logged budgets.

From ``rates`` snapshots only: capacities come from ``cap_bps`` when logged; without it only
the consumer side (behind a full queue) is measured and the producer is a lower bound. Busy
variability is unknown then and assumed (``DEFAULT_SCV``), with a warning.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from advisor.errors import ContentionWarning
from advisor.measure.contention import WithinLogContention, estimate_within_log, within_log_text
from advisor.ingest.runlog import RunLog
from advisor.errors import AssumptionWarning, LogError
from advisor.measure.observe import ObservedRun, observe, steady_steps, time_weighted_queue
from advisor.measure.steady import SteadyWindow, find_steady
from advisor.stats import Z_95, batch_means_interval, expected_max_normal, huber_line

DEFAULT_SCV = 0.05              # GPU step times: SCV 0.01-0.1 is typical
INPUT_STARVED_SHARE = 0.05
PRE_EMPTY_DEPTH = 1.0           # mean prefetch depth below this = empty
# A loader close to binding: producers starved at least this share of their time while some
# prefetch queue is seen empty in at least PRE_EMPTY_SHARE of the snapshots. Its capacity is then
# calibrated: the lambda_L that reproduces the observed rate at the observed split, when the
# model without it over-predicts that split by more than LOADER_MIN_GAP.
LOADER_STARVED_MIN = 0.01
PRE_EMPTY_SHARE = 0.05
LOADER_MIN_GAP = 0.005
SAME_BUDGET_TOL = 0.10          # logs whose mean batch is within 10% count as the same budget
# Contention prior (one split seen): a worker's step time may change by this much (one standard
# error, relative, per producer added at a fixed G) because workers share a host resource (memory
# bandwidth, PCIe, host CPU, the loader). From the real CPU sweeps in fixtures/sweep/: the RMS
# difference of a target's log step time between logs d splits apart, less the run-to-run part
# (RUN_SE), grew by 2.6-3.8% per worker on the 32-core host and 7-10% on the 16-core host (drafters:
# 1.5-2.5%); pooled, 4.5%. The sweeps that ran one split at a time agree (targets 4.7% on the
# 32-core host; drafters 5.3% on the 16-core host, where targets showed none). Beyond the logged
# splits the step time moves from the nearest logged split's by the prior's centre (below) and this
# much per worker of distance is carried, instead of extrapolating a fitted slope (adjacent splits
# gave slopes of up to 14% per worker that did not continue; a fitted slope shrunk towards 0 by
# this prior and carried over the whole range was tried on the five sweeps' pairs and rejected:
# G = 12 pairs' worst error went from 25.7% to 39.3% and their coverage from 80% to 68%).
CONTENTION_PRIOR_SE = 0.045    # carried only where workers share a host's compute (see _shares_compute)
# The prior's centre: a producer's step grows by CONTENTION_PRIOR_K_PRODUCER (log, per producer
# added) on a shared host. The slope of a target's log step time on the target count, fitted over
# all runs of each real sweep, was +6.9% (cpu16), +3.4% (cpu32), +3.4% (cpu32g12), +2.3% (ded16)
# and +4.6% (ded32): of one sign on every host; the drafters' went either way (-4.1% to +2.3%, mean
# 0.0%: CONTENTION_PRIOR_K_CONSUMER). A centre of 4% (those five's mean), left out one sweep at a
# time (3.4-4.6%), cut the single-log mean error on four sweeps (cpu32 6.7% -> 4.2%, cpu16 7.3% ->
# 5.8%, cpu32g12 9.9% -> 8.3%, ded32 8.4% -> 4.5%) and raised it on ded16 (8.2% -> 9.0%). Two
# sweeps recorded afterwards as held-out tests showed +2.0% (hold16: 6.1% -> 5.8%) and +0.8%
# (hold16g10: 11.4% -> 13.1%). The centre is the mean over all seven, 0.033 (+3.4% a target).
CONTENTION_PRIOR_K_PRODUCER = 0.033
CONTENTION_PRIOR_K_CONSUMER = 0.0
# A role with one worker is another regime (a lone drafter never waits for its peers' all-reduce
# and, feeding on a full queue, never idles): its step time may jump against the same role's at
# two or more workers. The lone drafter's mean step against the two drafters' (mean of repeats, log)
# was +0.2% (cpu32), -3.1% (cpu16), +1.7% (cpu32g12), +5.1% (ded32), -15.8% (ded16), -8.6%
# (hold16) and -19.7% (hold16g10): 11.3% RMS, 8.7% beyond the repeats' noise (RUN_SE / sqrt(2) of
# the drafters) and one worker of CONTENTION_PRIOR_SE. Carried where a split's count of a role is
# 1 on one side of the logged one(s) and not the other, as one unknown shared by every such split
# (no sweep ran a lone target; the producers carry the same by symmetry).
CONTENTION_SINGLE_SE = 0.087
# Token budget with one budget seen and a step-time line the log cannot pin down: busy ~ tokens^p,
# p between 0.35 (a large fixed cost per batch, utilisation still rising) and 0.95 (nearly
# saturated, compute-bound). The centre is what real runs showed: the local elasticity
# b*T/(a + b*T) of the budget lines measured on H200s was 0.52, 0.68 and 0.76 at 16K, 32K and 48K
# tokens (234m target, five budgets) and 0.53 and 0.71 at 16K and 32K (1b target); it is moved
# towards the in-log line's elasticity by the share of variance the line explains, and the range
# is carried as a 95% interval.
TOKEN_EXPONENT_PRIOR = 0.65
TOKEN_EXPONENT_PRIOR_HALF95 = 0.3
# With two or more budgets step time is a line through the budgets' means, busy = a + b*tokens
# (a fixed cost per batch plus a per-token cost; on two H200s, 234m target, five budgets from 16K
# to 48K tokens lay within 1.5% of one line, where a power law through two of them erred by up to
# 8.7% in between). Each budget's mean carries its sampling error and TOKEN_RUN_SE, the run-to-run
# spread of one budget's mean step time between repeats (6.3% pooled over 12 runs at 5 budgets on
# dedicated H200s: a run at another budget is another run). The line's elasticity at the budgets'
# mid-point gets the one-budget prior above (`_budget_line`): least squares alone let two close
# budgets, each a run off by up to 10%, set a slope that extrapolation amplified (up to 48% off
# on the 234m sweep; with the prior 15%). Its curvature is unknown (a 1b target on one shared H200
# bent upwards at 64K tokens: attention grows with sequence length): TOKEN_LINE_CURVATURE_HALF95 of
# log step time (95% half-width) is carried per e-fold of extrapolation beyond the logged budgets.
TOKEN_RUN_SE = 0.063
TOKEN_LINE_CURVATURE_HALF95 = 0.2
TOKEN_LINE_GRID = 101            # grid points of the line's elasticity posterior, 0..1
# A run's level shifts from run to run in ways one log cannot show (neither its drift nor its
# regimes predict it): the RMS difference of log mean step time between two repeats of one split on
# the same host was 3.2% (targets) / 2.4% (drafters) on a 32-core host running three lanes side by
# side, 10.4% / 9.6% on a 16-core host with two lanes, 6.4% / 6.9%, 11.6% / 9.6%, 5.5% / 8.4% and
# 14.5% / 9.3% on a 32-core host and on 16-core hosts running one split at a time (fixtures/sweep/
# cpu32, cpu16, ded32, ded16, hold16, hold16g10: 31 pairs of repeats). A projection predicts another
# run, so it carries the difference between two runs, pooled over the six (targets 9.0%, drafters
# 7.9%; over the first four, before hold16 and hold16g10 were recorded, 8.0% / 7.3%, which those
# two then tested: BENCHMARKS.md section 9): relative standard error per role. The G = 12 sweep
# (cpu32g12, a host whose pace moved by up to 25% within minutes: 16.5% / 17.5%) is kept out of the
# pool as a test of it.
RUN_SE = 0.09                  # carried where workers share a host's compute, like the contention prior
# Regimes: the steady window is cut into equal time slices, each about REGIME_SLICE_FILLS times
# the time the pipeline takes to pass q_hs plus the workers' batches (shorter stretches are
# absorbed by the queue and show as variability); a role's step time is called regime-switching
# when the spread of its slice means is REGIME_F_MIN times what sampling alone gives and a
# (shrunk) slice mean departs REGIME_MIN_DEV from the overall mean. At most REGIME_STATES
# groups of slices (by their consumer/producer balance) are kept for the projection.
REGIME_SLICE_FILLS = 2.0
REGIME_MIN_STEPS = 12           # per role and slice, on average
REGIME_STATES = 16
REGIME_F_MIN = 30.0
REGIME_MIN_DEV = 0.03
LINE_MIN_SPREAD = 1.5           # q98/q02 of batch tokens needed to trust the in-log step-time line
LINE_MIN_R2 = 0.3


@dataclass(frozen=True)
class RoleFit:
    """Service model of one GPU role (per worker)."""

    role: str
    n_steps: int
    busy_mean_s: float
    busy_std_s: float
    t0_s: float
    c_s_per_tok: float
    r2: float
    mu_bps: float
    mu_low_bps: float
    mu_high_bps: float
    busy_share: float
    starved_share: float
    blocked_share: float
    measured: bool = True          # False: rates-only estimate
    lower_bound: bool = False      # True: mu is only known to be at least this
    drift: float = 0.0             # |m1 - m2| / (m1 + m2) of the mean busy time in the two halves of the window
    tokens_ref: float = 0.0        # mean tokens per batch that busy_mean_s refers to
    token_model: str = "line"      # "line": t0 + c*tokens (in-log); "power": busy_mean * (tokens/tokens_ref)^p;
    #                                "budgets": busy_mean * (a + b*tokens) / (a + b*tokens_ref), a line through budgets
    token_exponent: float = 1.0    # p of the power law
    token_exponent_half95: float = 0.0   # 95% half-width of p (at one e-fold of extrapolation)
    token_range: tuple[float, float] = (0.0, 0.0)   # mean tokens of the logged budgets (lowest, highest)
    budget_line: tuple[float, float] = (0.0, 0.0)   # (a_s, b_s_per_tok): the posterior mean line through the budgets
    # the line's posterior (see _budget_line): grid of elasticities e at budget_tokens_mid, each with its
    # best log level and posterior weight; budget_level_var: variance of the log level given e;
    # budget_anchor_s: the fitted budgets' mean step time at tokens_ref, the level busy_mean_s stands for
    budget_posterior: tuple[tuple[float, float, float], ...] = ()
    budget_tokens_mid: float = 0.0
    budget_level_var: float = 0.0
    budget_anchor_s: float = 0.0

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
        vals, wts = [], []
        for e, lam, w in self.budget_posterior:
            vals.append(lam + math.log(max(1.0 - e + e * r, 1e-12)))
            wts.append(w)
        mean = sum(w * v for w, v in zip(wts, vals))
        var = sum(w * (v - mean) ** 2 for w, v in zip(wts, vals))
        return mean, var + self.budget_level_var

    def busy_at_rel_half95(self, tokens: float) -> float:
        """95% half-width of log(busy_at(tokens)) from the token model alone (0 at the logged
        budget or when the in-log line is trusted)."""
        if self.token_model not in ("power", "budgets") or self.tokens_ref <= 0 or tokens <= 0:
            return 0.0
        # a run at another budget is another run: the anchor run's own level is off by TOKEN_RUN_SE
        other = abs(tokens / self.tokens_ref - 1.0) > SAME_BUDGET_TOL
        run = Z_95 * TOKEN_RUN_SE if other else 0.0
        lo, hi = self.token_range
        if self.token_model == "budgets":
            out = 0.0 if lo <= tokens <= hi else abs(math.log(tokens / (lo if tokens < lo else hi)))
            _, var = self._budget_log_moments(tokens)
            return math.sqrt(Z_95 ** 2 * var + (TOKEN_LINE_CURVATURE_HALF95 * out) ** 2 + run ** 2)
        # one budget: the exponent's range over the e-folds from it
        return math.hypot(self.token_exponent_half95 * abs(math.log(tokens / self.tokens_ref)), run)


@dataclass(frozen=True, kw_only=True)
class ContentionFit:
    """How a worker's step time depends on the split (shared host resources).

    ``busy_r(N) = busy_r(N_ref) * exp(k_r * (N - N_ref))`` for N producers at the fitted G
    (one producer more = one consumer fewer). ``k_r`` is fitted by weighted least squares of
    each log's log mean busy time on N when logs at two or more splits of one G are given; its
    standard error combines each log's sampling error and drift. Beyond the logged splits (with one
    split, everywhere) the slope is the prior's, ``prior_k`` (``CONTENTION_PRIOR_K_PRODUCER`` and
    ``_CONSUMER`` on a shared host, else 0), and ``CONTENTION_PRIOR_SE`` per worker of distance is
    carried: ``busy_r(N) = busy_r(clip(N)) * exp(prior_k_r * (N - clip(N)))``, clip(N) the nearest
    logged producer count.

    A split whose count of a role is 1 where the logged split's is not (or the reverse) carries
    ``CONTENTION_SINGLE_SE`` for that role as well (`single_se`): a lone worker is another regime.

    ``within``: the first log's within-log slopes of step time on concurrently busy peers
    (`advisor.measure.contention`), reported as data. They do not move the projection (inside a log,
    concurrency is set by the step times themselves, and on the real sweeps the within-log slopes
    did not predict the step times at other splits); a role whose own slope (per busy worker of
    its role) is identified and not confounded carries ``sqrt(prior^2 + slope^2)`` per worker of
    distance instead of the prior alone (``role_prior_se``).
    """

    ref_producers: int
    gpus: int
    producer_k: float
    consumer_k: float
    producer_se: float
    consumer_se: float
    measured: bool
    lo_producers: int = 0          # the logged producer counts span lo..hi
    hi_producers: int = 0
    prior_se: float = CONTENTION_PRIOR_SE
    run_se: float = 0.0            # run-to-run level shift per role (RUN_SE on shared hosts)
    prior_k: tuple[float, float] = (0.0, 0.0)
    within: WithinLogContention | None = None

    def _clip(self, n: int) -> int:
        return min(max(n, self.lo_producers), self.hi_producers)

    def role_prior_se(self) -> tuple[float, float]:
        """Per-worker standard error carried beyond the logged splits (producer, consumer)."""
        if not self.prior_se or self.within is None or not self.within.estimated:
            return self.prior_se, self.prior_se
        own_p = self.within.producer.usable("producer")
        own_c = self.within.consumer.usable("consumer")
        return math.hypot(self.prior_se, own_p), math.hypot(self.prior_se, own_c)

    def scale(self, n_producer: int, gpus: int) -> tuple[float, float]:
        """Busy-time multipliers (producer, consumer) at ``n_producer`` producers: the fitted line
        between the logged splits, the prior's slope beyond them."""
        if gpus != self.gpus:
            return 1.0, 1.0
        c = self._clip(n_producer)
        d, beyond = c - self.ref_producers, n_producer - c
        return (math.exp(self.producer_k * d + self.prior_k[0] * beyond),
                math.exp(self.consumer_k * d + self.prior_k[1] * beyond))

    def single_se(self, n_producer: int, gpus: int) -> tuple[float, float]:
        """Standard errors of log busy (producer, consumer) for the lone-worker regime
        (``CONTENTION_SINGLE_SE``): where one side of ``n_producer`` and the logged splits has
        one worker of the role and the other more, and the logs did not span both."""
        if gpus != self.gpus or not self.prior_se:
            return 0.0, 0.0
        out = []
        for here, ref, lo, hi in ((n_producer, self.ref_producers, self.lo_producers, self.hi_producers),
                                  (gpus - n_producer, gpus - self.ref_producers, gpus - self.hi_producers,
                                   gpus - self.lo_producers)):
            spanned = lo == 1 < hi
            out.append(CONTENTION_SINGLE_SE if (here == 1) != (ref == 1) and not spanned else 0.0)
        return out[0], out[1]

    def rel_se(self, n_producer: int, gpus: int) -> tuple[float, float]:
        """Standard errors of log busy (producer, consumer) at ``n_producer`` producers."""
        if gpus != self.gpus:
            return 0.0, 0.0
        c = self._clip(n_producer)
        inside, beyond = abs(c - self.ref_producers), abs(n_producer - c)
        prior_p, prior_c = self.role_prior_se()
        return (self.producer_se * inside + prior_p * beyond,
                self.consumer_se * inside + prior_c * beyond)


@dataclass(frozen=True, kw_only=True)
class RegimeFit:
    """Time-correlated changes of step time (non-stationarity) over the steady window.

    Per time slice w of the window: each role's mean step time relative to the role's overall
    mean, shrunk towards 1 by the share of the between-slice variance that sampling explains
    (James-Stein: ``1 + (1 - 1/F) (m_w/m - 1)``, F = between-slice variance of slice means over
    its sampling expectation). ``detected``: F >= REGIME_F_MIN for a role and a shrunk slice
    departs by REGIME_MIN_DEV. Then `advisor.model.chain` projects each slice with its own rates and the
    within-slice variability, and averages the throughput over the (equal-time) slices: slow
    stretches are not averaged away inside one mean rate, nor treated as independent draws.
    """

    producer_scale: tuple[float, ...] = ()
    consumer_scale: tuple[float, ...] = ()
    weight: tuple[float, ...] = ()     # share of time of each (grouped) slice
    producer_scv: float = 0.0          # within-slice SCV
    consumer_scv: float = 0.0
    f_producer: float = 0.0
    f_consumer: float = 0.0
    detected: bool = False


NO_REGIMES = RegimeFit()


NO_CONTENTION = ContentionFit(ref_producers=0, gpus=0, producer_k=0.0, consumer_k=0.0, producer_se=0.0,
                              consumer_se=0.0, measured=False)


@dataclass(frozen=True)
class SyncFit:
    """Data-parallel drafter sync: every ``sync_every`` steps, a collective of ``T_ar(M)`` s."""

    sync_every: int
    latency_s: float             # a in T_ar = c + a*(M-1) + b*(M-1)/M
    bandwidth_s: float           # b
    dur_by_workers: Mapping[int, float] = field(default_factory=dict)
    measured: bool = False
    fixed_s: float = 0.0         # c
    # measured at one drafter count only: the scaling with M is unidentified; T_ar(M) assumes a
    # ring and the intervals carry the flat extreme too (allreduce_range_s)
    scaling_identified: bool = True

    def allreduce_s(self, m: int) -> float:
        if m <= 1:
            return 0.0
        return self.fixed_s + self.latency_s * (m - 1) + self.bandwidth_s * (m - 1) / m

    def allreduce_range_s(self, m: int) -> tuple[float, float]:
        """T_ar(M) between the plausible extremes: equal to the fit where the scaling is identified;
        from one measured M_0, flat (T_0 at every M, a switch-offloaded or latency-bound collective)
        and ring (T_0 (M-1)/M / ((M_0-1)/M_0), bandwidth-bound), low first."""
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
    input_bound: bool
    capacity_bps: float | None   # known when input-bound
    scv: float
    producer_starved_share: float
    pre_mean_depth: float | None
    pre_empty_share: float | None = None   # share of snapshots with some prefetch queue empty
    near_binding: bool = False             # starved with queues running dry, below the fixed thresholds
    calibrated: bool = False               # capacity_bps solved from the observed split's rate


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
    tokens_std: float
    seqs_mean: float | None
    source: str                  # "steps" or "rates"
    observed: tuple[ObservedRun, ...]
    hs_bytes_per_token: float | None
    total_batches: float | None  # the whole job, when samples x epochs are known
    tokens_range: tuple[float, float] = (0.0, 0.0)   # batch sizes the step-time line was fitted on
    contention: ContentionFit = NO_CONTENTION
    regimes: RegimeFit = NO_REGIMES

    @property
    def roles(self) -> tuple[str, str]:
        return self.producer.role, self.consumer.role


def sync_scaling(consumer: RoleFit, sync: SyncFit, m: int, busy_mean_s: float | None = None) -> float:
    """Per-rank scaling s(M) of data-parallel drafters (1 for M = 1 or no sync)."""
    return _sync_scaling_at(consumer, sync, m, busy_mean_s, sync.allreduce_s(m))


def sync_scaling_range(consumer: RoleFit, sync: SyncFit, m: int,
                       busy_mean_s: float | None = None) -> tuple[float, float]:
    """s(M) at the two ends of ``SyncFit.allreduce_range_s`` (low first; equal where identified)."""
    lo, hi = sync.allreduce_range_s(m)
    return _sync_scaling_at(consumer, sync, m, busy_mean_s, hi), _sync_scaling_at(consumer, sync, m, busy_mean_s, lo)


def _sync_scaling_at(consumer: RoleFit, sync: SyncFit, m: int, busy_mean_s: float | None, allreduce_s: float) -> float:
    k = sync.sync_every
    if m <= 1 or k <= 0:
        return 1.0
    mean = consumer.busy_mean_s if busy_mean_s is None else busy_mean_s
    sigma = consumer.busy_std_s * (mean / consumer.busy_mean_s if consumer.busy_mean_s > 0 else 1.0)
    round_s = k * mean + math.sqrt(k) * sigma * expected_max_normal(m) + allreduce_s
    return k * mean / round_s


def _role_from_steps(role: str, steps: pd.DataFrame, wall_s: float, workers: int,
                     line: tuple[float, float, float]) -> RoleFit:
    """Rates, variability and shares from ``steps``; ``line`` is the role's step-time line
    (`huber_line` on all logs' steps, so that logs at other token budgets pin the slope down;
    `_StepLines`)."""
    busy = steps["busy"].to_numpy()
    t0, c, r2 = line
    mean = float(busy.mean())
    lo_busy, hi_busy = batch_means_interval(busy)
    denom = max(wall_s * workers, 1e-12)
    return RoleFit(
        role=role, n_steps=len(busy), busy_mean_s=mean, busy_std_s=float(busy.std(ddof=1)) if len(busy) > 1 else 0.0,
        t0_s=t0, c_s_per_tok=c, r2=r2, mu_bps=1.0 / mean,
        mu_low_bps=1.0 / max(hi_busy, 1e-12), mu_high_bps=1.0 / max(lo_busy, 1e-12),
        busy_share=float(busy.sum() / denom), starved_share=float(steps["wait"].sum() / denom),
        blocked_share=float(steps["blocked"].sum() / denom))


def _pct_text(k: float) -> str:
    return f"{100 * (math.exp(k) - 1):+.1f}%"


def _drift(steps: pd.DataFrame) -> float:
    """Relative half-difference of the mean busy time between the two halves (by time) of a window."""
    if len(steps) < 20:
        return 0.0
    t = steps["t"].to_numpy()
    busy = steps["busy"].to_numpy()
    mid = 0.5 * (t.min() + t.max())
    a, b = busy[t < mid], busy[t >= mid]
    if len(a) < 5 or len(b) < 5:
        return 0.0
    return float(abs(a.mean() - b.mean()) / (a.mean() + b.mean()))


def _log_mean_se(steps: pd.DataFrame, run_se: float) -> float:
    """Standard error of log(mean busy) of one log: batch means (sampling) and drift together."""
    busy = steps["busy"].to_numpy()
    m = float(busy.mean())
    lo, hi = batch_means_interval(busy)
    return math.sqrt(((hi - lo) / (2 * Z_95 * m)) ** 2 + _drift(steps) ** 2 + run_se ** 2)


def _shares_compute(log: RunLog) -> bool:
    """Workers share one host's compute: CPU workers, or more workers than physical GPUs. Only then
    is a contention prior carried from one split (dedicated GPUs: assumed independent, as the
    emulated and simulated validation sets are; logs at two splits measure it either way). The
    trainer's emulation mode (``mode: emulate``) replays step times without computing, so its
    workers share nothing."""
    extra = log.header.extra
    if extra.get("mode") == "emulate":
        return False
    phys = extra.get("physical_gpus")
    workers = sum(log.header.roles.values())
    return extra.get("device") == "cpu" or (isinstance(phys, (int, float)) and 0 < phys < workers)


def _fit_regimes(by_role: Mapping[str, pd.DataFrame], win: SteadyWindow, producer: str, consumer: str,
                 slice_s: float) -> RegimeFit:
    """Slice means of each role's step time (``by_role``: each role's steady steps) over the steady
    window (see RegimeFit)."""
    t0, t1 = win.start_s, win.end_s
    counts = [len(by_role[r]) for r in (producer, consumer)]
    w = int(min((t1 - t0) / max(slice_s, 1e-12), min(counts) / REGIME_MIN_STEPS))
    if w < 3 or t1 <= t0:
        return NO_REGIMES
    edges = np.linspace(t0, t1, w + 1)
    out = {}
    for r in (producer, consumer):
        st = by_role[r]
        busy = st["busy"].to_numpy(float)
        sl = np.clip(np.searchsorted(edges, st["t"].to_numpy(float), side="right") - 1, 0, w - 1)
        n_w = np.bincount(sl, minlength=w)
        if (n_w < 2).any():
            return NO_REGIMES
        m_w = np.bincount(sl, weights=busy, minlength=w) / n_w
        m = float(busy.mean())
        within = float(np.sum((busy - m_w[sl]) ** 2) / max(len(busy) - w, 1))
        expect = within * float(np.mean(1.0 / n_w))
        between = float(np.var(m_w, ddof=1))
        f = between / expect if expect > 0 else 0.0
        shrink = max(0.0, 1.0 - 1.0 / f) if f > 0 else 0.0
        out[r] = (1.0 + shrink * (m_w / m - 1.0), within / (m * m), f)
    (sp, scv_p, f_p), (sc, scv_c, f_c) = out[producer], out[consumer]
    dev = max(float(np.max(np.abs(sp - 1))) if f_p >= REGIME_F_MIN else 0.0,
              float(np.max(np.abs(sc - 1))) if f_c >= REGIME_F_MIN else 0.0)
    # group the slices by balance (what the throughput of a slice depends on), equal counts per group
    order = np.argsort(sc / sp, kind="stable")
    groups = [g for g in np.array_split(order, min(w, REGIME_STATES)) if len(g)]
    return RegimeFit(producer_scale=tuple(float(sp[g].mean()) for g in groups),
                     consumer_scale=tuple(float(sc[g].mean()) for g in groups),
                     weight=tuple(len(g) / w for g in groups), producer_scv=scv_p, consumer_scv=scv_c,
                     f_producer=f_p, f_consumer=f_c, detected=dev >= REGIME_MIN_DEV)


def _fit_contention(logs: Sequence[RunLog], same: Sequence[int], per_log, producer: str, consumer: str,
                    first: int, win: SteadyWindow) -> ContentionFit:
    """Per-role slope of log mean busy time on the producer count, over logs of one G, and the first
    log's within-log slopes on busy peers (see ContentionFit)."""
    lg = logs[first]
    g = sum(lg.header.roles.values())
    n_ref = lg.header.roles[producer]
    prior = CONTENTION_PRIOR_SE if _shares_compute(lg) else 0.0
    prior_k = (CONTENTION_PRIOR_K_PRODUCER, CONTENTION_PRIOR_K_CONSUMER) if prior else (0.0, 0.0)
    within = estimate_within_log(lg.steps, producer, consumer, n_ref, lg.header.roles[consumer], win.start_s,
                                 win.end_s, sampled=bool(getattr(lg, "sampled", False)))
    idx = [i for i in same if sum(logs[i].header.roles.values()) == g]
    ns = np.array([logs[i].header.roles[producer] for i in idx], float)
    if len(set(ns.tolist())) < 2:
        return ContentionFit(ref_producers=n_ref, gpus=g, producer_k=0.0, consumer_k=0.0,
                             producer_se=0.0, consumer_se=0.0, measured=False, lo_producers=n_ref,
                             hi_producers=n_ref, prior_se=prior,
                             run_se=RUN_SE if prior else 0.0, within=within, prior_k=prior_k)
    out = {}
    for r in (producer, consumer):
        y = np.array([math.log(per_log[i][r]["busy"].mean()) for i in idx])
        # one run's own level shift is RUN_SE / sqrt(2) (RUN_SE is the difference between two runs)
        se = np.array([max(_log_mean_se(per_log[i][r], RUN_SE / math.sqrt(2) if prior else 0.0), 1e-4)
                       for i in idx])
        w = 1.0 / se ** 2
        xm = float((w * ns).sum() / w.sum())
        sxx = float((w * (ns - xm) ** 2).sum())
        k = float((w * (ns - xm) * (y - (w * y).sum() / w.sum())).sum() / sxx)
        k_se = math.sqrt(1.0 / sxx)
        if len(idx) > 2:
            resid = y - (w * y).sum() / w.sum() - k * (ns - xm)
            chi2 = float((w * resid ** 2).sum()) / (len(idx) - 2)
            k_se *= math.sqrt(max(chi2, 1.0))   # scatter beyond the logs' own errors widens it
        out[r] = (k, k_se)
    return ContentionFit(ref_producers=n_ref, gpus=g, producer_k=out[producer][0], consumer_k=out[consumer][0],
                         producer_se=out[producer][1], consumer_se=out[consumer][1], measured=True,
                         lo_producers=int(ns.min()), hi_producers=int(ns.max()), prior_se=prior,
                         run_se=RUN_SE if prior else 0.0, within=within, prior_k=prior_k)


def _contention_ref_busy(per_log, same, logs, producer: str, role: str, cont: ContentionFit) -> float:
    """Mean busy time of ``role`` at the reference split, from the fitted line (weighted by steps)."""
    vals, wts = [], []
    for i in same:
        if sum(logs[i].header.roles.values()) != cont.gpus:
            continue
        st = per_log[i][role]
        k = cont.producer_k if role == producer else cont.consumer_k
        d = logs[i].header.roles[producer] - cont.ref_producers
        vals.append(math.log(st["busy"].mean()) - k * d)
        wts.append(len(st))
    return float(math.exp(np.average(vals, weights=wts)))


def _budget_line(rf: RoleFit, tokens_mean: float, per_log, per_log_tokens, groups: list[list[int]]) -> RoleFit:
    """The line busy = a + b*tokens through the budgets' means, shrunk towards the elasticity prior
    (see TOKEN_RUN_SE and TOKEN_EXPONENT_PRIOR).

    Written as busy(T) = L (1 - e + e T / T_mid), with T_mid the (weighted geometric) mid-point of
    the budgets and e = b T_mid / (a + b T_mid) the line's elasticity there; 0 <= e <= 1 keeps the
    fixed cost a >= 0. Each budget's log mean step time z_i has variance v_i (sampling, drift and
    the run-to-run TOKEN_RUN_SE); with a flat prior on log L and the elasticity prior
    N(TOKEN_EXPONENT_PRIOR, (TOKEN_EXPONENT_PRIOR_HALF95 / 1.96)^2) on e, the posterior of e is
    computed on a grid (log L is Gaussian given e: its weighted mean, variance 1 / sum(1 / v_i)).
    Two close, noisy budgets then cannot produce a wild slope, and a projection carries the
    posterior spread of the line at its budget, which grows with the lever arm."""
    x, z, var = [], [], []
    for gr in groups:
        busy = np.concatenate([per_log[i][rf.role]["busy"].to_numpy() for i in gr])
        m = float(busy.mean())
        lo, hi = batch_means_interval(busy)
        var.append(((hi - lo) / (2 * Z_95 * m)) ** 2 + max(_drift(per_log[i][rf.role]) for i in gr) ** 2
                   + TOKEN_RUN_SE ** 2 / len(gr))
        x.append(float(np.mean([per_log_tokens[i] for i in gr])))
        z.append(math.log(m))
    xa, za, w = np.array(x), np.array(z), 1.0 / np.array(var)
    mid = float(math.exp(np.sum(w * np.log(xa)) / np.sum(w)))
    e = np.linspace(0.0, 1.0, TOKEN_LINE_GRID)
    g = np.log(np.maximum(1.0 - e[:, None] + e[:, None] * (xa / mid)[None, :], 1e-12))   # grid x budgets
    lam = ((za[None, :] - g) * w).sum(axis=1) / w.sum()
    chi2 = (((za[None, :] - g - lam[:, None]) ** 2) * w).sum(axis=1)
    sd0 = TOKEN_EXPONENT_PRIOR_HALF95 / Z_95
    logp = -0.5 * chi2 - 0.5 * ((e - TOKEN_EXPONENT_PRIOR) / sd0) ** 2
    post = np.exp(logp - logp.max())
    post /= post.sum()
    keep = post > 1e-9
    e_mean = float(np.sum(post * e))
    level = float(np.exp(np.sum(post * lam)))
    # the budget group tokens_ref falls in (the anchor): its observed mean is what busy_mean_s stands for
    anchor = int(np.argmin(np.abs(np.log(xa / tokens_mean))))
    return replace(rf, token_model="budgets", tokens_ref=tokens_mean,
                   budget_line=(level * (1.0 - e_mean), level * e_mean / mid),
                   budget_posterior=tuple(zip(e[keep].tolist(), lam[keep].tolist(), post[keep].tolist())),
                   budget_tokens_mid=mid, budget_level_var=float(1.0 / w.sum()),
                   budget_anchor_s=float(math.exp(za[anchor])),
                   token_range=(float(xa.min()), float(xa.max())))


def _token_model(rf: RoleFit, tokens_mean: float, per_log, per_log_tokens, with_steps, consumer: str) -> RoleFit:
    """Choose how step time follows the batch's tokens (see RoleFit.busy_at)."""
    groups: list[list[int]] = []
    for i in sorted(with_steps, key=lambda j: per_log_tokens[j]):
        if groups and per_log_tokens[i] / per_log_tokens[groups[-1][0]] - 1.0 <= SAME_BUDGET_TOL:
            groups[-1].append(i)
        else:
            groups.append([i])
    if len(groups) >= 2:
        return _budget_line(rf, tokens_mean, per_log, per_log_tokens, groups)
    tok = np.concatenate([per_log[i][consumer]["tokens"].to_numpy(float) for i in with_steps])
    spread = float(np.quantile(tok, 0.98) / max(np.quantile(tok, 0.02), 1e-9)) if len(tok) else 1.0
    if spread >= LINE_MIN_SPREAD and rf.r2 >= LINE_MIN_R2 and rf.c_s_per_tok > 0:
        return replace(rf, token_model="line", tokens_ref=tokens_mean, token_range=(tokens_mean, tokens_mean))
    # the in-log line's elasticity at the mean batch, c*T/(t0 + c*T), moves the prior by as much as
    # the line explains (r2): a narrow token range leaves the prior nearly as it is
    elast = rf.c_s_per_tok * tokens_mean / max(rf.t0_s + rf.c_s_per_tok * tokens_mean, 1e-12)
    lo_p, hi_p = TOKEN_EXPONENT_PRIOR - TOKEN_EXPONENT_PRIOR_HALF95, TOKEN_EXPONENT_PRIOR + TOKEN_EXPONENT_PRIOR_HALF95
    w = min(max(rf.r2, 0.0), 1.0)
    p = TOKEN_EXPONENT_PRIOR + w * (min(max(elast, lo_p), hi_p) - TOKEN_EXPONENT_PRIOR)
    return replace(rf, token_model="power", tokens_ref=tokens_mean, token_exponent=p,
                   token_exponent_half95=TOKEN_EXPONENT_PRIOR_HALF95, token_range=(tokens_mean, tokens_mean))


def _role_from_rates(role: str, log: RunLog, win: SteadyWindow, producer_side: bool,
                     hs_full_share: float | None) -> RoleFit:
    r = log.rates[win.mask(log.rates["t"])]
    n = log.header.roles[role]
    cap_col, bps_col = f"cap_bps_{role}", f"bps_{role}"
    lower = False
    if cap_col in r and r[cap_col].notna().sum() >= 1:
        series = r[cap_col].dropna().to_numpy() / n
    else:
        series = r[bps_col].dropna().to_numpy() / n
        # behind a full queue the producer's completions are throttled: only a floor on capacity;
        # a consumer with a full input queue never starves, so its rate is its capacity
        consumer_saturated = hs_full_share is not None and hs_full_share > 0.5
        lower = producer_side or not consumer_saturated
    mu = float(series.mean())
    lo, hi = batch_means_interval(series)
    busy = 1.0 / mu
    return RoleFit(role=role, n_steps=0, busy_mean_s=busy, busy_std_s=busy * math.sqrt(DEFAULT_SCV), t0_s=0.0,
                   c_s_per_tok=0.0, r2=0.0, mu_bps=mu, mu_low_bps=lo, mu_high_bps=hi,
                   busy_share=float("nan"), starved_share=float("nan"), blocked_share=float("nan"),
                   measured=False, lower_bound=lower)


def _fit_sync(logs: Sequence[RunLog], wins: Sequence[SteadyWindow], consumer: str) -> SyncFit:
    k = max((lg.header.sync_every for lg in logs), default=0)
    by_m: dict[int, list[float]] = {}
    for lg, w in zip(logs, wins):
        m = lg.header.roles[consumer]
        if m > 1 and len(lg.syncs):
            d = lg.syncs.loc[w.mask(lg.syncs["t"]), "dur"].dropna()
            if len(d):
                by_m.setdefault(m, []).extend(d.tolist())
            if not lg.header.sync_every:
                # infer steps per sync from counts when the header does not say
                n_steps = int(((lg.steps["role"] == consumer) & w.mask(lg.steps["t"])).sum())
                if len(d):
                    k = max(k, int(round(n_steps / m / len(d))))
    means = {m: float(np.mean(v)) for m, v in by_m.items()}
    if not means:
        return SyncFit(sync_every=k, latency_s=0.0, bandwidth_s=0.0, measured=False)
    ms = np.array(sorted(means), dtype=float)
    ys = np.array([means[int(m)] for m in ms])
    if len(ms) == 1:
        warnings.warn(AssumptionWarning(
            f"sync cost measured at {int(ms[0])} {consumer}s only ({ys[0] * 1e3:.0f} ms per all-reduce): how it "
            f"scales with the {consumer} count is unknown: other {consumer} counts are projected for a ring "
            f"all-reduce ((M-1)/M), their intervals reaching a flat one (the same cost at any M); logs at a "
            f"second {consumer} count would measure it"), stacklevel=2)
        return SyncFit(sync_every=k, latency_s=0.0, bandwidth_s=float(ys[0] / ((ms[0] - 1) / ms[0])),
                       dur_by_workers=means, measured=True, scaling_identified=False)
    from scipy.optimize import nnls
    # constant (e.g. a switch-offloaded or latency-dominated collective), per-hop latency, ring bandwidth
    a_mat = np.column_stack([np.ones_like(ms), ms - 1, (ms - 1) / ms])
    coef, _ = nnls(a_mat, ys)
    return SyncFit(sync_every=k, latency_s=float(coef[1]), bandwidth_s=float(coef[2]), fixed_s=float(coef[0]),
                   dur_by_workers=means, measured=True)


def _fit_loader(logs: Sequence[RunLog], wins: Sequence[SteadyWindow], producer: RoleFit,
                observed: Sequence[ObservedRun]) -> LoaderFit:
    lg, w, _ob = logs[0], wins[0], observed[0]
    pre = lg.header.queue_feeding(lg.header.producer)
    depth = time_weighted_queue(lg, w, pre.name)[0] if pre else None
    starved = producer.starved_share
    empty = depth is None or depth < PRE_EMPTY_DEPTH
    bound = bool(np.isfinite(starved) and starved > INPUT_STARVED_SHARE and empty)
    cap = scv = None
    if bound and lg.has_steps:
        st = steady_steps(lg, w)
        tgt = st[st["role"] == lg.header.producer]
        cap = len(tgt) / max(w.duration_s, 1e-12)
        # a batch reaches a starved target when the loader finishes it: start = t - blocked - busy
        arrivals = np.sort((tgt["t"] - tgt["blocked"] - tgt["busy"]).to_numpy())
        gaps = np.diff(arrivals)
        scv = float(gaps.var() / gaps.mean() ** 2) if len(gaps) > 2 and gaps.mean() > 0 else 1.0
    empty_share = None
    if pre is not None and f"qmin_{pre.name}" in lg.rates and len(lg.rates):
        q = lg.rates.loc[w.mask(lg.rates["t"]), f"qmin_{pre.name}"].dropna()
        empty_share = float((q < 0.5).mean()) if len(q) else None
    near = bool(not bound and np.isfinite(starved) and starved > LOADER_STARVED_MIN
                and (empty or (empty_share is not None and empty_share >= PRE_EMPTY_SHARE)))
    return LoaderFit(input_bound=bound, capacity_bps=cap, scv=scv if scv is not None else 1.0,
                     producer_starved_share=float(starved), pre_mean_depth=depth, pre_empty_share=empty_share,
                     near_binding=near)


def _calibrate_loader(fit: "PipelineFit") -> "PipelineFit":
    """Engage a near-binding loader: solve its capacity so the model meets the observed split's rate
    (bisection in log space; the throughput rises monotonically with the loader's capacity)."""
    from advisor.model.chain import project_split   # model imports this module

    ob = fit.observed[0]
    n, m = ob.roles.get(fit.producer.role, 0), ob.roles.get(fit.consumer.role, 0)
    if n < 1 or m < 1 or ob.bps <= 0 or fit.pre_cap < 1:
        return fit
    free = project_split(fit, n, m, interval=False).x_bps
    if free <= ob.bps * (1 + LOADER_MIN_GAP):
        return fit   # the pipeline without a loader limit already explains the observed rate

    def x_at(lam: float) -> float:
        f = replace(fit, loader=replace(fit.loader, input_bound=True, capacity_bps=lam))
        return project_split(f, n, m, interval=False).x_bps

    lo, hi = ob.bps, 50.0 * ob.bps
    if x_at(hi) < ob.bps:
        return fit
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if x_at(mid) < ob.bps:
            lo = mid
        else:
            hi = mid
    return replace(fit, loader=replace(fit.loader, input_bound=True, capacity_bps=hi, calibrated=True))


@dataclass(frozen=True)
class _Roles:
    """What the step (or rates) branch of `fit_pipeline` fits: both roles and the batch sizes."""

    producer: RoleFit
    consumer: RoleFit
    tokens_mean: float
    tokens_std: float
    seqs_mean: float | None
    tokens_range: tuple[float, float]
    observed: tuple[ObservedRun, ...]
    contention: ContentionFit
    regimes: RegimeFit
    source: str
    path: str                    # the log the fit rests on (for the caveats)


PARALLEL_LINE_ROWS = 100_000      # steps of both roles from which the step-time lines fit in threads


def _stacked(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The frames one under the other, numbered from 0 (one frame: itself renumbered; copy-on-write,
    so not copied)."""
    return frames[0].reset_index(drop=True) if len(frames) == 1 else pd.concat(frames, ignore_index=True)


class _StepLines:
    """Each role's step-time line (`huber_line` on its steps' tokens and busy times), fitted on
    entering; on a large log (``PARALLEL_LINE_ROWS`` steps or more in all) in two worker threads
    instead, while the caller fits the rest: the Huber rounds are whole-array numpy work, which
    releases the GIL, and were the largest part of a large log's fit. The same lines either way."""

    def __init__(self, line_frames: Mapping[str, pd.DataFrame]):
        # the arrays are taken here, in the caller's thread: the workers touch no pandas object
        self._xy = {r: (f["tokens"].to_numpy(dtype=float), f["busy"].to_numpy()) for r, f in line_frames.items()}
        self._pool = None
        self._lines: dict[str, object] = {}

    def __enter__(self) -> "_StepLines":
        if sum(len(x) for x, _ in self._xy.values()) >= PARALLEL_LINE_ROWS:
            from concurrent.futures import ThreadPoolExecutor
            self._pool = ThreadPoolExecutor(len(self._xy), thread_name_prefix="dflash-fit")
            self._lines = {r: self._pool.submit(huber_line, *xy) for r, xy in self._xy.items()}
        else:
            self._lines = {r: huber_line(*xy) for r, xy in self._xy.items()}
        return self

    def get(self, role: str) -> tuple[float, float, float]:
        line = self._lines[role]
        return line.result() if self._pool is not None else line

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _fit_steps(logs: Sequence[RunLog], wins: Sequence[SteadyWindow], with_steps: Sequence[int]) -> _Roles:
    """Both roles from step events: busy-time rates, the step-time line, contention, drift, regimes."""
    head = logs[0].header
    producer, consumer = head.producer, head.consumer
    hs = head.queue_feeding(consumer)
    steady = {i: steady_steps(logs[i], wins[i]) for i in with_steps}
    # each log's steady steps split by role once (on a sampled log each split copies 300k rows)
    per_log = {i: {r: st[st["role"] == r] for r in (producer, consumer)} for i, st in steady.items()}
    per_log_tokens = {i: float(per_log[i][consumer]["tokens"].mean()) for i in with_steps}
    first = with_steps[0]
    # logs at another token budget inform the step-time line only; rates and variability
    # come from the logs whose batches match the observed run's
    same = [i for i in with_steps
            if abs(per_log_tokens[i] / per_log_tokens[first] - 1.0) <= SAME_BUDGET_TOL]
    parts = {producer: [], consumer: []}
    line_parts = {producer: [], consumer: []}
    walls = {producer: 0.0, consumer: 0.0}
    for i in with_steps:
        for r in (producer, consumer):
            line_parts[r].append(per_log[i][r])
            if i in same:
                parts[r].append(per_log[i][r])
                walls[r] += wins[i].duration_s * logs[i].header.roles[r]
    frames = {r: _stacked(parts[r]) for r in parts}
    line_frames = {r: _stacked(line_parts[r]) for r in line_parts}
    for r, f in frames.items():
        if len(f) < 3:
            raise LogError(logs[first].path, None, f"has {len(f)} steady '{r}' steps; too few to fit")
    cons = frames[consumer]
    tokens_mean = float(cons["tokens"].mean())
    with _StepLines(line_frames) as lines:
        # (the step-time lines are fitted meanwhile, on a large log in worker threads)
        contention = _fit_contention(logs, same, per_log, producer, consumer, first, wins[first])
        ob0 = observe(logs[first], wins[first], tokens_mean)
        in_pipe = (hs.cap if hs else 0) + sum(logs[first].header.roles.values())
        regimes = _fit_regimes(per_log[first], wins[first], producer, consumer,
                               REGIME_SLICE_FILLS * in_pipe / max(ob0.bps, 1e-12))
        pfit = _role_from_steps(producer, frames[producer], walls[producer], 1, line=lines.get(producer))
        cfit = _role_from_steps(consumer, frames[consumer], walls[consumer], 1, line=lines.get(consumer))
    fits = {}
    for rf in (pfit, cfit):
        rf = replace(rf, drift=max(_drift(per_log[i][rf.role]) for i in same))
        if contention.measured:
            # the line through the logs' means at the observed split replaces the pooled mean
            ref = _contention_ref_busy(per_log, same, logs, producer, rf.role, contention)
            f = ref / rf.busy_mean_s
            rf = replace(rf, busy_mean_s=ref, busy_std_s=rf.busy_std_s * f, t0_s=rf.t0_s * f,
                         c_s_per_tok=rf.c_s_per_tok * f, mu_bps=rf.mu_bps / f, mu_low_bps=rf.mu_low_bps / f,
                         mu_high_bps=rf.mu_high_bps / f)
        fits[rf.role] = _token_model(rf, tokens_mean, per_log, per_log_tokens, with_steps, consumer)
    pfit, cfit = fits[producer], fits[consumer]
    tokens_std = float(cons["tokens"].std(ddof=1)) if len(cons) > 1 else 0.0
    seqs_mean = float(cons["seqs"].mean()) if cons["seqs"].notna().any() else None
    all_tok = line_frames[consumer]["tokens"].to_numpy(float)
    tokens_range = (float(np.quantile(all_tok, 0.02)), float(np.quantile(all_tok, 0.98)))
    observed = tuple(observe(lg, w, tokens_mean) for lg, w in zip(logs, wins))
    if any(getattr(logs[i], "sampled", False) for i in with_steps):
        # sampled large logs (advisor.ingest.summary): counts, means and shares from exact binned sums
        from advisor.fit.sampled import sampled_role_fits
        (pfit, cfit), observed, tokens_mean, seqs_mean = sampled_role_fits(logs, wins, same, (pfit, cfit), observed)
        observed = tuple(observed)
    return _Roles(producer=pfit, consumer=cfit, tokens_mean=tokens_mean, tokens_std=tokens_std,
                  seqs_mean=seqs_mean, tokens_range=tokens_range, observed=observed, contention=contention,
                  regimes=regimes, source="steps", path=logs[first].path)


def _fit_rates(logs: Sequence[RunLog], wins: Sequence[SteadyWindow]) -> _Roles:
    """Both roles from `rates` snapshots only (capacities from cap_bps, else bounds; variability assumed)."""
    head = logs[0].header
    producer, consumer = head.producer, head.consumer
    lg, w = logs[0], wins[0]
    r = lg.rates[w.mask(lg.rates["t"])]
    bps = r[f"bps_{consumer}"].mean()
    tokens_mean = float(r["tok_s"].mean() / bps) if "tok_s" in r and bps > 0 else float(head.token_budget or 1)
    observed = tuple(observe(g, ww, tokens_mean) for g, ww in zip(logs, wins))
    full = observed[0].hs_full_share
    pfit = _role_from_rates(producer, lg, w, True, full)
    cfit = _role_from_rates(consumer, lg, w, False, full)
    # per-token cost assumed proportional (t0 = 0) so a token-budget what-if stays possible
    pfit = replace(pfit, c_s_per_tok=pfit.busy_mean_s / tokens_mean)
    cfit = replace(cfit, c_s_per_tok=cfit.busy_mean_s / tokens_mean)
    warnings.warn(AssumptionWarning(
        f"{lg.path}: no 'step' events, only 'rates' snapshots: step-time variability is assumed "
        f"(SCV {DEFAULT_SCV}) and step time is taken as proportional to tokens"), stacklevel=3)
    for f in (pfit, cfit):
        if f.lower_bound:
            warnings.warn(AssumptionWarning(
                f"{lg.path}: '{f.role}' capacity is only bounded below ({f.mu_bps * lg.header.roles[f.role]:.3g} "
                f"b/s for {lg.header.roles[f.role]} workers): no 'cap_bps' and its completions are throttled "
                f"by the queue"), stacklevel=3)
    return _Roles(producer=pfit, consumer=cfit, tokens_mean=tokens_mean, tokens_std=float("nan"), seqs_mean=None,
                  tokens_range=(tokens_mean, tokens_mean), observed=observed, contention=NO_CONTENTION,
                  regimes=NO_REGIMES, source="rates", path=lg.path)


def _within_shows_contention(w: WithinLogContention | None) -> bool:
    """Some identified, unconfounded within-log slope departs from zero (dedicated GPUs included)."""
    if w is None or not w.estimated:
        return False
    return any(rc.usable(k) != 0.0 and abs(rc.usable(k)) > 1.96 * se
               for rc in (w.producer, w.consumer)
               for k, se in (("producer", rc.per_producer_se), ("consumer", rc.per_consumer_se)))


def _warn_shared_compute(logs: Sequence[RunLog], roles: _Roles) -> None:
    """Caveats on step times that depend on who else runs: shared GPUs, the split itself."""
    head = logs[0].header
    producer, consumer = head.producer, head.consumer
    contention = roles.contention
    for lg in logs:
        phys = lg.header.extra.get("physical_gpus")
        if isinstance(phys, (int, float)) and 0 < phys < sum(lg.header.roles.values()):
            warnings.warn(AssumptionWarning(
                f"{lg.path}: {sum(lg.header.roles.values())} workers shared {int(phys)} physical GPU(s): step times "
                f"include contention, so per-GPU rates (and the projections) are pessimistic for dedicated GPUs"),
                stacklevel=3)
    if contention.measured:
        warnings.warn(AssumptionWarning(
            f"step times depend on the split: each extra {producer} (one {consumer} fewer) changes a {producer}'s "
            f"step by {_pct_text(contention.producer_k)} and a {consumer}'s by {_pct_text(contention.consumer_k)} "
            f"(fitted on logs at {contention.lo_producers}-{contention.hi_producers} {producer}s of "
            f"{contention.gpus}); beyond that range {_prior_slope_text(contention, producer, consumer)}, and the "
            f"interval widens"),
            stacklevel=3)
    elif contention.prior_se > 0:
        prior_p, prior_c = contention.role_prior_se()
        widen = (f"{100 * prior_p:.1f}%" if abs(prior_p - prior_c) < 5e-4 else
                 f"{100 * prior_p:.1f}% ({producer}s) and {100 * prior_c:.1f}% ({consumer}s)")
        warnings.warn(AssumptionWarning(
            f"{roles.path}: workers share a host's compute and one split was logged, so how step times "
            f"change with the split is not measured: {_prior_slope_text(contention, producer, consumer)} "
            f"(the mean of real shared-host sweeps), and the intervals widen by "
            f"{widen} per worker moved, and carry {100 * contention.run_se:.0f}% for the run-to-run shift of a "
            f"shared host and {100 * CONTENTION_SINGLE_SE:.1f}% more for a role where one of the two splits has a "
            f"lone worker of it and the other several; a log at a second split measures it"), stacklevel=3)
    text = within_log_text(contention.within, producer, consumer)
    if text and (contention.prior_se > 0 or _within_shows_contention(contention.within)):
        warnings.warn(ContentionWarning(f"{roles.path}: {text}"), stacklevel=3)


def _prior_slope_text(contention: ContentionFit, producer: str, consumer: str) -> str:
    kp, kc = contention.prior_k
    if not kp and not kc:
        return "the nearest split's step times are kept"
    parts = [f"a {r}'s step {_pct_text(k)}" for r, k in ((producer, kp), (consumer, kc)) if k]
    return f"each extra {producer} is taken to change " + " and ".join(parts)


def fit_pipeline(logs: Sequence[RunLog]) -> PipelineFit:
    """Fit one model from logs of the same job (possibly at different splits)."""
    if not logs:
        raise LogError("<none>", None, "no log to fit")
    head = logs[0].header
    producer, consumer = head.producer, head.consumer
    for lg in logs[1:]:
        if (lg.header.producer, lg.header.consumer) != (producer, consumer):
            raise LogError(lg.path, None, f"has roles {list(lg.header.roles)}, unlike {logs[0].path} "
                           f"({list(head.roles)}); logs fitted together must be of the same job", "roles")
    wins = [find_steady(lg) for lg in logs]
    with_steps = [i for i, lg in enumerate(logs) if lg.has_steps]
    roles = _fit_steps(logs, wins, with_steps) if with_steps else _fit_rates(logs, wins)
    _warn_shared_compute(logs, roles)
    sync = _fit_sync(logs, wins, consumer)
    loader = _fit_loader(logs, wins, roles.producer, roles.observed)
    if any(getattr(lg, "sampled", False) for lg in logs):
        # sampled large logs (advisor.ingest.summary): loader capacity and steps per sync from exact counts
        from advisor.fit.sampled import sampled_loader_and_sync
        sync, loader = sampled_loader_and_sync(logs, wins, sync, loader)
    total = None
    if head.samples and head.epochs and roles.seqs_mean:
        total = head.samples * head.epochs / roles.seqs_mean
    hs, pre = head.queue_feeding(consumer), head.queue_feeding(producer)
    fit = PipelineFit(producer=roles.producer, consumer=roles.consumer, sync=sync, loader=loader,
                      hs_cap=hs.cap if hs else 0, pre_cap=pre.cap if pre else 0,
                      tokens_mean=roles.tokens_mean, tokens_std=roles.tokens_std, seqs_mean=roles.seqs_mean,
                      source=roles.source, tokens_range=roles.tokens_range, observed=roles.observed,
                      hs_bytes_per_token=head.hs_bytes_per_token, total_batches=total,
                      contention=roles.contention, regimes=roles.regimes)
    if loader.near_binding and roles.source == "steps":
        fit = _calibrate_loader(fit)
    return fit


def fit_from_numbers(roles: Mapping[str, int], cap_bps: Mapping[str, float], *, hs_cap: int = 20,
                     pre_cap: int = 50, tokens_per_batch: float = 32768.0, scv: float = DEFAULT_SCV,
                     sync_every: int = 0, sync_s: float = 0.0, observed_bps: float | None = None) -> PipelineFit:
    """A fit from bare numbers (pool capacities in batches/s): the `what-if` path.

    ``cap_bps`` is each role's capacity with its ``roles`` worker count (e.g. 7 targets together
    0.92 b/s). Variability is assumed (``scv``); the collective time ``sync_s`` is taken as measured
    at the given drafter count.
    """
    names = list(roles)
    if len(names) != 2:
        raise ValueError(f"roles must name a producer and a consumer, got {names}")
    fits = []
    for r in names:
        n = roles[r]
        if n < 1:
            raise ValueError(f"roles: '{r}' must have at least 1 worker, got {n}")
        if not cap_bps.get(r, 0) > 0:
            raise ValueError(f"cap_bps: '{r}' must be > 0, got {cap_bps.get(r)}")
        mu = cap_bps[r] / n
        busy = 1.0 / mu
        fits.append(RoleFit(role=r, n_steps=0, busy_mean_s=busy, busy_std_s=busy * math.sqrt(scv), t0_s=0.0,
                            c_s_per_tok=busy / tokens_per_batch, r2=0.0, mu_bps=mu, mu_low_bps=mu, mu_high_bps=mu,
                            busy_share=float("nan"), starved_share=float("nan"), blocked_share=float("nan"),
                            measured=False))
    m = roles[names[1]]
    # one drafter count given: how the collective scales with M is unknown, as from a log at one M
    # (the point assumes a ring; the intervals reach a flat cost)
    sync = SyncFit(sync_every=sync_every, latency_s=0.0,
                   bandwidth_s=sync_s / ((m - 1) / m) if m > 1 and sync_s > 0 else 0.0,
                   dur_by_workers={m: sync_s} if m > 1 and sync_s > 0 else {}, measured=m > 1 and sync_s > 0,
                   scaling_identified=not (m > 1 and sync_s > 0 and sync_every > 0))
    x_obs = observed_bps if observed_bps is not None else min(cap_bps[names[0]], cap_bps[names[1]])
    win = SteadyWindow(start_s=0.0, end_s=0.0, warmup_share=0.0, settled=True, basis="numbers", n_events=0)
    ob = ObservedRun(path="<numbers>", roles=dict(roles), bps=x_obs, tok_s=x_obs * tokens_per_batch, steady=win,
                     done=None, eta_s=None, hs_mean_depth=None, hs_full_share=None)
    loader = LoaderFit(input_bound=False, capacity_bps=None, scv=1.0, producer_starved_share=float("nan"),
                       pre_mean_depth=None)
    return PipelineFit(producer=fits[0], consumer=fits[1], sync=sync, loader=loader, hs_cap=hs_cap, pre_cap=pre_cap,
                       tokens_mean=tokens_per_batch, tokens_std=float("nan"), seqs_mean=None, source="numbers",
                       tokens_range=(tokens_per_batch, tokens_per_batch),
                       observed=(ob,), hs_bytes_per_token=None, total_batches=None)
