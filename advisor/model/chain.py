"""Throughput of one split: N producers, M consumers, a finite queue between them.

The chain (exact for exponential service): y = batches the producers finished and the consumers
have not (queue + in consumers + held by blocked producers), b the queue capacity, K = b + M;
y is a birth-death chain on 0..K+N with

    birth(y) = mu_p * (N - max(0, y - K))      blocked producers do not serve
    death(y) = mu_c * min(y, M)                idle consumers when y < M
    pi(y) ~ prod_{i=1..y} birth(i-1) / death(i)        (computed in logs)
    X = sum_y pi(y) death(y),   producer blocked share = E[(y-K)+] / N,
    consumer starved share = E[(M-y)+] / M,   mean queue depth = E[min((y-M)+, b)].

General service times: the same chain at ``b_eff = (b + 1) * 2 / (scv_p + scv_c) - 1``,
interpolated between the integer buffers around it. The drafters' rate is scaled by the sync
factor s(M) (`advisor.fit.stages`). A binding loader is a stage in front: a second chain between
it (one server, lambda_L) and the target/drafter block (rate X), the targets' prefetch slots its
buffer. Capacities: C_p = N mu_p, C_c = M mu_c s(M); the naive bound is the least.

Barrier idling (a barrier every k drafter steps, M > 1): on the target-bound side each round
ends in a tail the chain does not model. With the targets supplying lambda = N mu_p and a rank
serving c = mu_c, about a = min(lambda / c, M) ranks are busy at a time. An idle rank pulls, the
one idle longest first (`advisor.model.simulate`'s rule), so the round is dealt out in turn and the
ranks finish their quotas close together: the last step leaves about a batches unconsumed, random
service spreads the ranks' progress by about k^0.3 steps (the slowest of a ranks, e_a the expected
maximum of a standard normals), and the fluid stagger a k / 2 is the most it can be:

    D = a min(k / 2, k^TAIL_EXP (TAIL_BASE + TAIL_MAX_WEIGHT e_a)),   0.3, 0.25 and 1.0

(calibrated on exact simulation of 127 splits, benchmarks/barrier_tail.py: mean error 0.8%, worst
7.9%, BENCHMARKS.md 19.23). The all-reduce adds lambda T_ar batches; at most B = b + N wait (q_hs
and blocked targets), past that the targets block, with the excess E = max(0, D + lambda T_ar - B)
per round:

    X_bar = lambda M k / (M k + E).

The projection is min(X_chain, X_bar); where X_bar binds the interval carries
``BARRIER_SE_SHARE`` of the correction as model error, and the targets are blocked at least
1 - X / lambda. O(1) per split.

Engines of several GPUs (``gpus_per_worker = (k_p, k_c)``): N, M and the rates are engines';
the busy share of the G GPUs is ``(X k_p / mu_p + X k_c / mu_c) / G``. Across nodes: the drafters'
rate is their pool's with the link's wait and transfer (`advisor.model.link.link_pool`), the link a
stage with its own capacity (hidden state and sync per batch); a cross-node sync holds the link
``T_link`` a round more, added to T_ar. The drafters' reported capacity is their own (a free
link); the bottleneck is the link where it saturates, or where the drafters' waits on it bind them
while their own capacity is not the least. Node-local pipelines: `project_local`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from functools import cache, lru_cache

import numpy as np

from advisor.model.link import LinkResult, Placement, link_pool
from advisor.model.params import PipelineFit, RoleFit, Source, SyncFit
from advisor.stats import Z_95, expected_max_normal

MAX_EFFECTIVE_BUFFER = 4000  # beyond this the chain is at the bound to < 1e-4
# chain shapes (N, M, buffer) kept: a split's solves use two or three, and the loader's chain of
# N pre_cap slots can be ~50k states (2.4 MB a shape), so a few
CHAIN_SHAPES_KEPT = 8
ELASTICITY_STEP = 0.02  # relative rate step of the finite-difference elasticities
# the central difference's step from step logs: one run-to-run standard error of a role's rate
# (`advisor.model.priors.RUN_SE`), so a split within that much of the balance shares both roles' level
CENTRAL_ELASTICITY_STEP = 0.09
MODEL_SE = 0.005  # the analytic chain against exact simulation: mean error ~0.5% (VALIDATION.md)
BARRIER_SE_SHARE = 0.25  # one standard error of the barrier-tail correction, as a share of its size
# the ranks' progress spread at a round's end: k^TAIL_EXP (TAIL_BASE + TAIL_MAX_WEIGHT e_a) steps (calibrated)
TAIL_EXP, TAIL_BASE, TAIL_MAX_WEIGHT = 0.3, 0.25, 1.0  # BENCHMARKS.md 19.23
# the link is the bottleneck where it is this busy (the drafters' pool capacity, their waits on it
# included, then equals the link's), or its capacity within LINK_SATURATED_CAP of the smallest
LINK_SATURATED = 0.99
LINK_SATURATED_CAP = 1.0 + 1e-6
# a capacity known only from below is projected, at its open end, this many times its bound: far
# enough that the other role (or the loader) alone binds
BOUND_OPEN_FACTOR = 1e3


@dataclass(frozen=True)
class ChainResult:
    x_bps: float
    producer_blocked: float
    consumer_starved: float
    queue_mean: float
    barrier_cut: float = 0.0  # ln(X_chain / X_bar) where the barrier tail binds, else 0


_BETWEEN = ("x_bps", "producer_blocked", "consumer_starved", "queue_mean")  # interpolated between two depths


@cache
def _log_factorials(size: int) -> np.ndarray:
    """log(i!) for i < ``size`` (sizes are powers of two, so a few tables serve every chain)."""
    out = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, size)))))
    out.flags.writeable = False
    return out


@lru_cache(maxsize=CHAIN_SHAPES_KEPT)
def _chain_shape(n: int, m: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the chain's law at (N, M, b) owes to the counts alone: y, L(y) and the moments'
    weights. With birth(y) = mu_p nb(y) and death(y) = mu_c dc(y) (module docstring),
    ``log pi(y) = y log(mu_p / mu_c) + L(y)``, ``L(y) = sum_{i<=y} log nb(i-1) - log dc(i)``:
    the rates enter through one tilt, so a split's chains at other rates (the interval's
    elasticities, the regimes' slices) share L. In closed form, K = b + M:
    ``L(y) = y log N - log y!`` up to y = M, then a step of log(N / M) up to y = K + 1, then
    ``L(K + 1) + log((N - 1)! / (N - 1 - j)!) - j log M`` at y = K + 1 + j. Rows of the weights:
    dc(y), (y - K)+ / N, (M - y)+ / M, min((y - M)+, b)."""
    k = b + m
    size = k + n + 1
    lf = _log_factorials(1 << max(n, m + 1).bit_length())
    ln_n, ln_m = math.log(n), math.log(m)
    level = np.empty(size)
    level[: m + 1] = np.arange(m + 1) * ln_n - lf[: m + 1]
    level[m : k + 2] = level[m] + np.arange(k + 2 - m) * (ln_n - ln_m)
    j = np.arange(1, n)
    level[k + 2 :] = level[k + 1] + (lf[n - 1] - lf[n - 1 - j]) - j * ln_m
    y = np.arange(size, dtype=float)
    weights = np.empty((4, size))
    np.minimum(y, m, out=weights[0])
    np.maximum(y - k, 0.0, out=weights[1])
    weights[1] /= n
    np.maximum(m - y, 0.0, out=weights[2])
    weights[2] /= m
    np.clip(y - m, 0.0, b, out=weights[3])
    out = (y, level, weights)
    for a in out:
        a.flags.writeable = False  # (shared by every caller of the cache)
    return out


def _chain_int(n: int, m: int, mu_p: float, mu_c: float, b: int) -> ChainResult:
    y, level, weights = _chain_shape(n, m, b)
    logpi = level + y * math.log(mu_p / mu_c)
    pi = np.exp(logpi - logpi.max())
    x_per_mu_c, blocked, starved, qmean = (weights @ pi) / pi.sum()
    return ChainResult(float(mu_c * x_per_mu_c), float(blocked), float(starved), float(qmean))


def chain(n: int, m: int, mu_p: float, mu_c: float, buffer: int, scv_p: float = 1.0, scv_c: float = 1.0) -> ChainResult:
    """Throughput and shares of N producers feeding M consumers through ``buffer`` slots."""
    if n < 1 or m < 1:
        raise ValueError("n and m must be >= 1")
    if mu_p <= 0 or mu_c <= 0:
        return ChainResult(0.0, 0.0, 1.0, 0.0)
    scv = max(scv_p + scv_c, 1e-6)
    b_eff = min(max((buffer + 1) * 2.0 / scv - 1.0, 0.0), MAX_EFFECTIVE_BUFFER)
    lo = int(math.floor(b_eff))
    frac = b_eff - lo
    res = _chain_int(n, m, mu_p, mu_c, lo)
    if frac >= 1e-9:
        r_hi = _chain_int(n, m, mu_p, mu_c, lo + 1)
        res = ChainResult(**{f: getattr(res, f) + frac * (getattr(r_hi, f) - getattr(res, f)) for f in _BETWEEN})
    # the queue holds at most `buffer` batches whatever the effective depth says
    scale = buffer / b_eff if b_eff > 0 else 0.0
    return replace(res, queue_mean=min(res.queue_mean * scale, buffer))


ERR_SAMPLING = ("err_p_samp", "err_c_samp")  # the parts a longer log of the split shrinks
ERR_SHARED = ERR_SAMPLING + ("err_p_level", "err_c_level", "err_p_split", "err_c_split", "err_p_single", "err_c_single")
ERR_CORNERS = ("err_corner_ll", "err_corner_lh", "err_corner_hl", "err_corner_hh")


@dataclass(frozen=True)
class IntervalParts:
    """The parts of a split's 95% interval, ln(b/s): ``shared_log_per_se`` in ``ERR_SHARED``'s
    order (per standard error of each source every split shares), ``corners_log`` in
    ``ERR_CORNERS``' (the shifts at the capacity ranges' corners)."""

    shared_log_per_se: tuple[float, ...]
    own_var_log2: float  # the split's own variance, (ln b/s)^2
    sync_ends_log: tuple[float, float]  # shifts at the ends of an unidentified sync scaling
    corners_log: tuple[float, ...]
    model_sigma_log: float = 0.0  # the model's error scale the row carries (`advisor.project.model_error`)
    model_miss_log: float = math.nan  # at an observed split, ln(measured / projected)

    def columns(self) -> dict[str, float]:
        """The parts under the table's column names (the model's error apart)."""
        return {
            **dict(zip(ERR_SHARED, self.shared_log_per_se)),
            "err_own_var": self.own_var_log2,
            "err_sync_lo": self.sync_ends_log[0],
            "err_sync_hi": self.sync_ends_log[1],
            **dict(zip(ERR_CORNERS, self.corners_log)),
        }


NO_PARTS = IntervalParts((0.0,) * len(ERR_SHARED), 0.0, (0.0, 0.0), (0.0,) * len(ERR_CORNERS))


@dataclass(frozen=True)
class SplitResult:
    """One split's projection. Capacities in batches/s; shares of wall time per worker.

    ``x_low_bps``/``x_high_bps``: the 95% interval of ``x_bps`` (see `project_split`)."""

    x_bps: float
    producer_cap_bps: float
    consumer_cap_bps: float
    loader_cap_bps: float | None
    bound_bps: float
    efficiency: float
    gpu_util: float
    bottleneck: str
    producer_blocked: float
    consumer_starved: float
    hs_mean_depth: float
    x_low_bps: float = math.nan
    x_high_bps: float = math.nan
    # the interval's parts, for comparing two splits of one fit (`advisor.project.rows.lead_interval`):
    # log-throughput per standard error of each error source every split shares (producer and
    # consumer sampling and drift, producer and consumer level beyond them, producer and consumer split
    # slope, signed by the side of the logged split, producer and consumer lone-worker regime), the
    # variance of this split's own terms, log(x_end / x) at both ends of an unidentified sync
    # scaling (0, 0 where identified) and log(x_corner / x) at the corners of the roles' capacity
    # ranges (`RoleFit.mu_range_bps`): (producer low, consumer low), (low, high), (high, low), (high,
    # high); 0 where no role is ranged
    parts: IntervalParts = NO_PARTS
    consumer_compute_s: float = math.nan  # a drafter's compute seconds per batch (without the link)
    link_cap_bps: float = math.inf  # the link stage's capacity (inf: no batch crosses a node)
    link_util: float = 0.0  # the busiest link's utilisation
    crossing_share: float = 0.0  # share of batches that cross a node
    placement: Placement | None = None  # where the engines sit (None: one node)
    link_sync_share: float = 0.0  # share of the link's busy time that carries the drafters' sync
    other_layout_bps: float = math.nan  # the split's rate in its other routing (shared / node-local)
    # the upper end rests on the open end of a capacity known only from below (a bound): it is
    # where the model puts that end (``BOUND_OPEN_FACTOR``), not a limit anything measured
    x_high_open: bool = False


@dataclass(frozen=True)
class WhatIf:
    """What a projection changes from the fit: the q_hs depth, the batch's tokens, each role's
    per-engine rate and the drafters' per-rank sync factor (the what-ifs and the sensitivity knobs)."""

    hs_cap: int | None = None  # q_hs depth, batches (None: the fit's)
    tokens_per_batch: float | None = None  # mean tokens per batch (None: the logged mean)
    mu_scale: tuple[float, float] = (1.0, 1.0)  # factors on the producer's and consumer's per-engine rates
    consumer_scaling: float | None = None  # the per-rank sync factor s(M) (None: the fit's)


@dataclass(frozen=True)
class LinkStage:
    """The link of one split: where the engines sit, a crossing batch's transfer seconds and their SCV,
    the seconds one sync round's all-reduce holds the link (`advisor.model.link.sync_link_s`) and the
    ranks of that all-reduce (None: the split's drafters; node-locally, all nodes' drafters)."""

    placement: Placement
    xfer_s: float
    scv_x: float = 0.0
    sync_xfer_s: float = 0.0
    sync_ranks: int | None = None


def barrier_rate(n: int, m: int, lam_bps: float, c_bps: float, every: int, allreduce_s: float, buffer: int) -> float:
    """Barrier-limited rate X_bar of ``m`` data-parallel ranks fed at ``lam_bps`` (module docstring):
    ``lam M k / (M k + E)``, ``E = max(0, D + lam T_ar - (b + N))``, ``a = min(lam / c, M)``,
    ``D = a min(k / 2, k^0.3 (0.25 + e_a))``.
    """
    if m <= 1 or every <= 0 or lam_bps <= 0 or c_bps <= 0:
        return math.inf
    a = min(lam_bps / c_bps, float(m))
    spread = every**TAIL_EXP * (TAIL_BASE + TAIL_MAX_WEIGHT * expected_max_normal(max(int(round(a)), 1)))
    tail = a * min(every / 2.0, spread)
    excess = tail + lam_bps * allreduce_s - (buffer + n)
    if excess <= 0:
        return lam_bps
    return lam_bps * m * every / (m * every + excess)


def _pipeline_x(
    fit: PipelineFit, n: int, m: int, r: _SplitRates, b: int, fp: float = 1.0, fc: float = 1.0
) -> tuple[float, ChainResult]:
    """Throughput of the targets -> q_hs -> drafters chain at the split's rates ``r`` times (fp, fc)
    (capped by the barrier tail when the drafters sync), behind the loader when it binds; with
    regimes (`advisor.model.params.RegimeFit`), the mean over the log's time slices of each slice's
    throughput at its own rates and the within-slice variability."""
    mu_p, mu_c = r.mu_p * fp, r.mu_c * fc
    loader = fit.loader.capacity_bps if fit.loader.input_bound and fit.loader.capacity_bps else None

    def stationary(mu_p: float, mu_c: float, scv_p: float, scv_c: float) -> tuple[float, ChainResult]:
        res = chain(n, m, mu_p, mu_c, b, scv_p, scv_c)
        x = res.x_bps
        if r.barrier_s is not None:
            lam = n * mu_p if loader is None else min(n * mu_p, loader)  # the targets supply no faster than fed
            x_bar = barrier_rate(n, m, lam, mu_c / r.scaling, fit.sync.sync_every, r.barrier_s, b)
            if x_bar < x:
                # the round's tail blocks the targets: they are blocked at least 1 - X / lambda of the time
                cut = math.log(x / x_bar) if x_bar > 0 else 0.0
                x = x_bar
                res = ChainResult(
                    x, max(res.producer_blocked, 1.0 - x / lam), res.consumer_starved, res.queue_mean, cut
                )
        if loader is not None:
            # the block behind the loader serves like one station of rate x with the targets' SCV
            x = chain(1, 1, loader, max(x, 1e-12), max(fit.pre_cap * n, 0), fit.loader.scv, scv_p).x_bps
        return x, res

    rg = fit.regimes
    if not rg.detected:  # one slice at the roles' own rates and variability (the hot path)
        return stationary(mu_p, mu_c, fit.producer.busy_scv, fit.consumer.busy_scv)
    parts = [
        stationary(mu_p / sp, mu_c / sc, rg.producer_scv, rg.consumer_scv)
        for sp, sc in zip(rg.producer_scale, rg.consumer_scale)
    ]
    x = sum(w * p[0] for w, p in zip(rg.weight, parts))
    mean = (sum(w * getattr(p[1], f.name) for w, p in zip(rg.weight, parts)) for f in fields(ChainResult)[1:])
    return x, ChainResult(x, *mean)


def _role_log_parts(rf, tokens: float | None, run_se: float) -> tuple[float, float]:
    """Standard errors of one role's log(mu) that every split shares: (sampling and drift, the
    token model and the run-to-run shift)."""
    samp = math.log(rf.mu_high_bps / rf.mu_low_bps) / (2 * Z_95) if rf.mu_low_bps > 0 else 0.0
    tok = rf.busy_at_rel_half95(tokens) / Z_95 if tokens is not None else 0.0
    return math.hypot(samp, rf.drift), math.hypot(tok, run_se)


def _elasticities(fit: PipelineFit, x: float, x_at) -> tuple[float, float]:
    """d ln X / d ln mu of each role by finite steps either way: from step logs the central
    difference over ``CENTRAL_ELASTICITY_STEP`` (a run-to-run move, so a split near the balance
    shares both roles' level: BENCHMARKS.md 19.10, 19.12); without step events the larger of the
    forward and backward ``ELASTICITY_STEP`` elasticities (``x_at(f_p, f_c)``: the rate at those factors
    on the roles' rates)."""
    central = fit.source is Source.STEPS
    step = CENTRAL_ELASTICITY_STEP if central else ELASTICITY_STEP
    h = math.log1p(step)

    def at(fp: float, fc: float) -> float:
        return math.log(x_at(fp, fc) / x) / h

    back = 1.0 / (1 + step)
    fwd = at(1 + step, 1.0), at(1.0, 1 + step)
    bwd = -at(back, 1.0), -at(1.0, back)
    if central:
        return (fwd[0] + bwd[0]) / 2, (fwd[1] + bwd[1]) / 2
    return max(fwd[0], bwd[0]), max(fwd[1], bwd[1])


def _interval(
    fit: PipelineFit, n_producer: int, g: int, x: float, r: _SplitRates, cut: float, what_if: WhatIf, x_at
) -> dict:
    """The 95% interval of one split's throughput ``x`` and its parts, as `SplitResult`'s fields (see
    `project_split`), from its rates ``r``, the barrier tail's cut ``ln(X_chain / X_bar)`` and
    ``x_at(f_p, f_c)``, the split's rate with the roles' rates times those factors."""
    e, cont = _elasticities(fit, x, x_at), fit.contention
    roles = [_role_log_parts(rf, what_if.tokens_per_batch, cont.run_se) for rf in (fit.producer, fit.consumer)]
    # the split slope is one unknown per role: splits on either side of the logged one move
    # opposite ways
    split_se = [side * se for side, se in zip(cont.sides(n_producer, g), cont.rel_se(n_producer, g))]
    # each source's (producer, consumer) standard errors, in ERR_SHARED's order, times the elasticities
    sources = (*zip(*roles), split_se, cont.single_se(n_producer, g))
    shared = tuple(ei * se for per_role in sources for ei, se in zip(e, per_role))
    # the barrier-tail correction is approximate: part of its size is model error
    own_var = MODEL_SE**2 + (BARRIER_SE_SHARE * cut) ** 2
    var = sum(v * v for v in shared) + own_var
    half = Z_95 * math.sqrt(var)
    lo, hi = x * math.exp(-half), x * math.exp(half)
    ends = (0.0, 0.0)
    if what_if.consumer_scaling is None and not fit.sync.scaling_identified:
        # sync cost logged at one drafter count: the interval also spans the projection at the
        # other extreme of s(M) (flat where the point assumes a ring), through the elasticity
        s_ends = sync_scaling_range(fit.consumer, fit.sync, r.ranks, r.busy_round_s, r.sync_link_s)
        ends = tuple(e[1] * math.log(s / r.scaling) if s > 0 and r.scaling > 0 else 0.0 for s in s_ends)
    for end in ends:  # (0: the point's own interval again)
        x_end = x * math.exp(end)
        lo, hi = min(lo, x_end * math.exp(-half)), max(hi, x_end * math.exp(half))
    ranges = _corners(fit)
    corners = (0.0,) * 4  # log(x_corner / x): 0 without a ranged role
    if fit.producer.ranged or fit.consumer.ranged:
        corners = tuple(math.log(xc / x) if (xc := x_at(a, c)) > 0 else 0.0 for a, c, _ in ranges)
    open_hi = 0.0
    for shift, (_, _, is_open) in zip(corners, ranges):
        lo = min(lo, x * math.exp(shift - half))
        if is_open:
            open_hi = max(open_hi, x * math.exp(shift + half))
        else:
            hi = max(hi, x * math.exp(shift + half))
    high_open = open_hi > hi * (1 + 1e-9)
    hi = max(hi, open_hi)
    return {
        "x_low_bps": lo,
        "x_high_bps": hi,
        "parts": IntervalParts(shared, own_var, ends, corners),
        "x_high_open": high_open,
    }


def range_ends(rf: RoleFit) -> tuple[tuple[float, bool], ...]:
    """(multiplier of a role's projected rate, whether the end is open: a bound's inf) at the two
    ends of its capacity range."""
    if not rf.ranged or rf.mu_bps <= 0:
        return (1.0, False), (1.0, False)
    return tuple((e / rf.mu_bps, False) if math.isfinite(e) else (BOUND_OPEN_FACTOR, True) for e in rf.mu_range_bps)


def _corners(fit: PipelineFit) -> list[tuple[float, float, bool]]:
    """(f_p, f_c, open) at the four corners of the two roles' capacity ranges, the producer's end
    first; open where either rests on a capacity known only from below (a bound)."""
    return [(a, c, oa or oc) for a, oa in range_ends(fit.producer) for c, oc in range_ends(fit.consumer)]


def open_corners(fit: PipelineFit) -> tuple[bool, ...]:
    """Which corners of the roles' capacity ranges (`_corners`) are open."""
    return tuple(is_open for _, _, is_open in _corners(fit))


@dataclass(frozen=True)
class _SplitRates:
    """One split's per-worker rates (batches/s) after contention, the link and the sync cost."""

    mu_p: float  # a producer's rate
    mu_c_compute: float  # a consumer's rate on compute alone
    mu_c: float  # a consumer's rate with the link's wait and the sync scaling s(M)
    mu_c_own: float  # ... with its compute and collective alone: no wait on the link, no link time in T_ar
    pool: LinkResult | None  # the drafter pool behind the link; None without a link
    ranks: int  # ranks of the sync all-reduce
    sync_link_s: float  # seconds one sync round's all-reduce holds the link
    busy_round_s: float  # a consumer's seconds per batch in a sync round, link included
    scaling: float  # the per-rank sync factor s(M)
    barrier_s: float | None  # a round's T_ar and untimed time where the drafters meet at a barrier


def _split_rates(
    fit: PipelineFit, n_consumer: int, busy_s: tuple[float, float], what_if: WhatIf, link: LinkStage | None
) -> _SplitRates:
    """Per-worker rates of one split from each role's busy seconds per batch (contention in them):
    ``mu = what_if.mu_scale / busy``; the consumer's through the link (`advisor.model.link.link_pool`,
    where it carries anything), then times the sync scaling s(M) of its ``ranks``
    (``what_if.consumer_scaling`` where given), with the sync barrier where k > 0 and M > 1."""
    busy_p, busy_c = busy_s
    mu_p = what_if.mu_scale[0] / busy_p
    mu_c_compute = what_if.mu_scale[1] / busy_c
    mu_c_raw, pool = mu_c_compute, None
    if link is not None and (link.xfer_s > 0 or link.sync_xfer_s > 0):
        pool = link_pool(link.placement, 1.0 / mu_c_compute, link.xfer_s, link.scv_x)
        mu_c_raw = 1.0 / pool.consumer_s
    ranks = link.sync_ranks if link is not None and link.sync_ranks else n_consumer
    k = fit.sync.sync_every
    sync_link = link.sync_xfer_s if link is not None and ranks > 1 and k > 0 else 0.0

    def scaling(mu_c: float, t_ar: float) -> tuple[float, float]:
        # a sync round is k of a drafter's batches at rate mu_c, then T_ar
        busy_round = busy_c * mu_c_compute / mu_c
        s = what_if.consumer_scaling
        return busy_round, sync_scaling(fit.consumer, fit.sync, ranks, busy_round, t_ar) if s is None else s

    t_ar = fit.sync.allreduce_s(ranks) + sync_link
    busy_round, s = scaling(mu_c_raw, t_ar)
    bar = t_ar + fit.sync.overhead_s if k > 0 and ranks > 1 and s > 0 else None
    mu_c_own = mu_c_compute * scaling(mu_c_compute, fit.sync.allreduce_s(ranks))[1]
    return _SplitRates(mu_p, mu_c_compute, mu_c_raw * s, mu_c_own, pool, ranks, sync_link, busy_round, s, bar)


def _capacities(fit: PipelineFit, n: int, m: int, r: _SplitRates, x: float) -> tuple[dict, float, float, str]:
    """The stages' capacities (batches/s) and the bottleneck at rate ``x``: the roles' own capacities
    (``N mu_p`` and the drafters' ``M mu_c s(M)`` with their compute and collective alone, the link a
    stage of its own) with the loader's where the input bounds the run; the link's capacity; its
    share spent on sync; the bottleneck, the least of the chain's capacities (the drafters' with
    their waits on the link) but the link where it runs saturated at ``x``, or lies below both pools
    and within ``LINK_SATURATED_CAP`` of the least (the placed rows' rule in
    `advisor.project.linked`), or where the chain names the drafters while their own capacity is not
    the least of the own ones and the link's (their waits on the link bind them)."""
    p, c = fit.roles
    own = {p: n * r.mu_p, c: m * r.mu_c_own}
    caps = {p: n * r.mu_p, c: m * r.mu_c}
    if fit.loader.input_bound and fit.loader.capacity_bps:
        own["loader"] = caps["loader"] = fit.loader.capacity_bps
    # per batch the link holds ``c x`` of hidden state (``1 / pool.link_cap_bps``) and ``T_link / (M k)``
    # of sync (`advisor.model.link`); no pool, no link time
    sync_s = r.sync_link_s / (r.ranks * fit.sync.sync_every) if r.sync_link_s > 0 else 0.0
    hs = r.pool.link_cap_bps if r.pool is not None else math.inf
    per_batch = (1.0 / hs if math.isfinite(hs) and hs > 0 else 0.0) + sync_s
    link_cap, sync_share = (1.0 / per_batch, sync_s / per_batch) if per_batch > 0 else (math.inf, 0.0)
    least = min(caps, key=caps.get)
    if math.isfinite(link_cap) and (
        x >= LINK_SATURATED * link_cap
        or (link_cap <= min(caps[p], caps[c]) and link_cap <= LINK_SATURATED_CAP * caps[least])
    ):
        least = "link"
    elif least == c and own[c] > min(min(own.values()), link_cap) * LINK_SATURATED_CAP:
        least = "link"
    return own, link_cap, sync_share, least


def project_split(
    fit: PipelineFit,
    n_producer: int,
    n_consumer: int,
    *,
    what_if: WhatIf = WhatIf(),
    gpus: int | None = None,
    interval: bool = True,
    gpus_per_worker: tuple[int, int] = (1, 1),
    link: LinkStage | None = None,
) -> SplitResult:
    """Project one split under ``what_if``, step times scaled by ``fit.contention``.

    Interval: ``se(ln X)^2 = sum_r e_r^2 se_r^2 + MODEL_SE^2 + se_bar^2`` with ``e_r = d ln X / d ln
    mu_r`` and se_r each role's log-rate errors (sampling, drift, split, lone worker, token model,
    run to run); ``X exp(+-1.96 se)``, joined with the same around ``X (s_end / s)^e_c`` at both
    ends of `sync_scaling_range` where the sync's scaling is unidentified, and the capacity
    ranges' corners.
    """
    tokens, p, c = what_if.tokens_per_batch, fit.producer, fit.consumer
    # the logged means, else the token model's
    busy_p, busy_c = (p.busy_mean_s, c.busy_mean_s) if tokens is None else (p.busy_at(tokens), c.busy_at(tokens))
    g = gpus if gpus is not None else n_producer * gpus_per_worker[0] + n_consumer * gpus_per_worker[1]
    k_p, k_c = fit.contention.scale(n_producer, g)
    r = _split_rates(fit, n_consumer, (busy_p * k_p, busy_c * k_c), what_if, link)
    b = fit.hs_cap if what_if.hs_cap is None else what_if.hs_cap
    x, res = _pipeline_x(fit, n_producer, n_consumer, r, b)
    err: dict = {}  # the interval and its parts (none: NaN ends)
    if interval and x > 0:

        def x_at(fp: float, fc: float) -> float:  # the rate with the roles' rates times (fp, fc)
            return _pipeline_x(fit, n_producer, n_consumer, r, b, fp, fc)[0]

        err = _interval(fit, n_producer, g, x, r, res.barrier_cut, what_if, x_at)
    own, link_cap, sync_share, bottleneck = _capacities(fit, n_producer, n_consumer, r, x)
    return SplitResult(
        x_bps=x,
        producer_cap_bps=own[p.role],
        consumer_cap_bps=own[c.role],
        loader_cap_bps=own.get("loader"),
        bound_bps=min(min(own.values()), link_cap),
        efficiency=x / max(own[p.role], own[c.role]),
        gpu_util=(x / r.mu_p * gpus_per_worker[0] + x / r.mu_c_compute * gpus_per_worker[1]) / g,
        bottleneck=bottleneck,
        producer_blocked=res.producer_blocked,
        consumer_starved=res.consumer_starved,
        hs_mean_depth=res.queue_mean,
        consumer_compute_s=1.0 / r.mu_c_compute,
        link_cap_bps=link_cap,
        link_util=x / link_cap if math.isfinite(link_cap) else 0.0,
        crossing_share=r.pool.crossing_share if r.pool is not None else 0.0,
        placement=link.placement if link is not None else None,
        link_sync_share=sync_share,
        **err,
    )


def project_local(
    fit: PipelineFit, n_producer: int, n_consumer: int, link: LinkStage, *, gpus: int, **kw
) -> SplitResult:
    """Split (N, M) as node-local pipelines: each node's N_a targets feed its M_a drafters through
    its own q_hs, projected alone on G / L GPUs (its sync an all-reduce of all M drafters), the
    nodes joined by `_nodes_together`. The link carries sync only: capacity ``M k / T_link``.
    """
    pl = link.placement
    if not pl.local:
        raise ValueError("project_local needs a node-local placement")
    held = [(nb, mb) for nb, mb in zip(pl.producers, pl.consumers) if nb or mb]
    nodes = len(held)
    if (sum(nb for nb, _ in held), sum(mb for _, mb in held)) != (n_producer, n_consumer) or gpus % nodes:
        raise ValueError(f"{n_producer}-{n_consumer} on {gpus} GPUs is not the placement's {pl}")

    def alone(n: int, m: int) -> SplitResult:  # one node's pipeline; its sync an all-reduce of all M drafters
        stage = replace(link, placement=Placement(producers=(n,), consumers=(m,), routing="local"), xfer_s=0.0)
        return project_split(fit, n, m, gpus=gpus // nodes, link=replace(stage, sync_ranks=n_consumer), **kw)

    each = {mix: alone(*mix) for mix in dict.fromkeys(held)}
    whole = _nodes_together(fit, held, [each[mix] for mix in held])
    k = fit.sync.sync_every
    sync_s = link.sync_xfer_s if k > 0 and n_consumer > 1 else 0.0
    link_cap = n_consumer * k / sync_s if sync_s > 0 else math.inf
    return replace(
        whole,
        bound_bps=min(whole.bound_bps, link_cap),
        link_cap_bps=link_cap,
        link_util=whole.x_bps / link_cap if sync_s > 0 else 0.0,
        crossing_share=0.0,
        placement=pl,
        link_sync_share=1.0 if sync_s > 0 else 0.0,
    )


def _nodes_together(fit: PipelineFit, mixes: list[tuple[int, int]], nodes: list[SplitResult]) -> SplitResult:
    """Node-local pipelines (``mixes``: each node's N_a and M_a) as one split: rates add, but
    drafters that sync run at the slowest node's pace per drafter, ``X = M min_a(X_a / M_a)``; the
    interval's parts are the nodes' weighted by their share of the rate (alike nodes: rates and
    capacities times L, shares one node's)."""
    n, m = sum(nb for nb, _ in mixes), sum(mb for _, mb in mixes)
    synced = fit.sync.sync_every > 0 and m > 1
    pace = min(r.x_bps / mb for (_, mb), r in zip(mixes, nodes)) if synced else math.inf
    rates = [min(r.x_bps, pace * mb) for (_, mb), r in zip(mixes, nodes)]
    x = sum(rates)
    keep = [v / r.x_bps if r.x_bps > 0 else 1.0 for v, r in zip(rates, nodes)]  # each node's share kept
    w = [v / x if x > 0 else 1.0 / len(nodes) for v in rates]

    def total(name: str) -> float:
        return sum(getattr(r, name) for r in nodes)

    def mixed(parts) -> float:  # log of the rate-weighted mean of exp(part): a log-rate shift of the sum
        return math.log(sum(wi * math.exp(v) for wi, v in zip(w, parts)))

    cap_p, cap_c = total("producer_cap_bps"), total("consumer_cap_bps")
    own = {fit.producer.role: cap_p, fit.consumer.role: cap_c}
    labels = {r.bottleneck for r in nodes}
    return replace(
        nodes[0],
        x_bps=x,
        producer_cap_bps=cap_p,
        consumer_cap_bps=cap_c,
        loader_cap_bps=total("loader_cap_bps") if nodes[0].loader_cap_bps is not None else None,
        bound_bps=total("bound_bps"),
        efficiency=x / max(cap_p, cap_c),
        gpu_util=sum(f * r.gpu_util for f, r in zip(keep, nodes)) / len(nodes),
        bottleneck=labels.pop() if len(labels) == 1 else min(own, key=own.get),
        producer_blocked=sum(nb * (1 - (1 - r.producer_blocked) * f) for f, (nb, _), r in zip(keep, mixes, nodes)) / n,
        consumer_starved=sum(mb * r.consumer_starved for (_, mb), r in zip(mixes, nodes)) / m,
        hs_mean_depth=total("hs_mean_depth") / len(nodes),
        x_low_bps=x * sum(wi * r.x_low_bps / r.x_bps for wi, r in zip(w, nodes) if r.x_bps > 0),
        x_high_bps=x * sum(wi * r.x_high_bps / r.x_bps for wi, r in zip(w, nodes) if r.x_bps > 0),
        parts=IntervalParts(
            tuple(sum(wi * r.parts.shared_log_per_se[i] for wi, r in zip(w, nodes)) for i in range(len(ERR_SHARED))),
            sum(wi * math.sqrt(r.parts.own_var_log2) for wi, r in zip(w, nodes)) ** 2,
            (mixed(r.parts.sync_ends_log[0] for r in nodes), mixed(r.parts.sync_ends_log[1] for r in nodes)),
            tuple(mixed(r.parts.corners_log[i] for r in nodes) for i in range(len(ERR_CORNERS))),
        ),
        x_high_open=any(r.x_high_open for r in nodes),
    )


def sync_scaling(
    consumer: RoleFit, sync: SyncFit, m: int, busy_mean_s: float | None = None, allreduce_s: float | None = None
) -> float:
    """Per-rank scaling s(M) of data-parallel drafters, a round's all-reduce ``allreduce_s`` (None:
    the fitted T_ar(M))."""
    k = sync.sync_every
    if m <= 1 or k <= 0:
        return 1.0
    t_ar = sync.allreduce_s(m) if allreduce_s is None else allreduce_s
    mean = consumer.busy_mean_s if busy_mean_s is None else busy_mean_s
    sigma = consumer.busy_std_s * (mean / consumer.busy_mean_s if consumer.busy_mean_s > 0 else 1.0)
    barrier_s = math.sqrt(k * sync.round_var_ratio) * sigma * expected_max_normal(m)
    round_s = k * mean + barrier_s + t_ar + sync.overhead_s
    return k * mean / round_s


def sync_scaling_range(
    consumer: RoleFit, sync: SyncFit, m: int, busy_mean_s: float | None = None, extra_s: float = 0.0
) -> tuple[float, float]:
    """s(M) at the two ends of ``SyncFit.allreduce_range_s``."""
    lo, hi = sync.allreduce_range_s(m)
    at_hi, at_lo = (sync_scaling(consumer, sync, m, busy_mean_s, t + extra_s) for t in (hi, lo))
    return at_hi, at_lo


def straggler_excess_s(consumer: RoleFit, sync: SyncFit, m: int, scale: float = 1.0) -> float:
    """Seconds a sync round's barrier waits beyond independent steps: ``e_M sqrt(k) sigma
    (sqrt(r) - 1)`` (``r``: ``SyncFit.round_var_ratio``; sigma times ``scale``)."""
    k = sync.sync_every
    if m <= 1 or k <= 0:
        return 0.0
    return expected_max_normal(m) * math.sqrt(k) * consumer.busy_std_s * scale * (math.sqrt(sync.round_var_ratio) - 1.0)
