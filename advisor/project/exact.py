"""Exact cross-check of the analytic projection: simulate every split from the log's own services.

Each split's pipeline (`advisor.model.simulate`: queue caps, blocking after service, drafter
barriers) runs ``n_batches`` batches resampled from the logs' steady steps: tokens per batch; a
service time ``(t0_r + c_r * tokens) * e``, ``e`` the ratio ``busy / (t0_r + c_r * tokens)`` of a
step of role r drawn among those next to the batch in tokens (`near_ratios`), scaled by the split's
contention factor (`advisor.model.params.ContentionFit`); sync rounds resampled at that drafter
count (else the fitted ``T_ar(M)``) plus the rounds' barrier excess
(`advisor.model.chain.straggler_excess_s`) and untimed time (``SyncFit.overhead_s``); the loader's
gaps where input-bound. At least ``IN_FLIGHT_FACTOR`` times the batches a split holds in flight, so
any G has a steady window. Each split draws from a generator of its own (seeded by the split): its
rate does not depend on the splits simulated beside it.

Across nodes (`simulate_placed_run`): the same batches at a placement with the shared link
(``link_s = hs_bytes_per_token x tokens / B``); the drafters' busy less their link seconds
(`advisor.measure.crossing`), so the link is not counted twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from advisor.ingest.runlog import RunLog
from advisor.measure.crossing import measure_link
from advisor.model.chain import straggler_excess_s
from advisor.model.link import Placement, sync_link_s
from advisor.model.params import PipelineFit, Source
from advisor.model.simulate import simulate, simulated_bps
from advisor.project.rows import SplitRow

EXACT, ANALYTIC, CAPPED = "exact", "analytic", "analytic-capped"  # a row's ``method``
DEFAULT_BATCHES = 6000
REFINE_BATCHES = 12000
REFINE_WITHIN = 0.08
MAX_REFINE_ROUNDS = 8
MAX_REFINED = 12  # at most this many splits simulated per table (the highest projected first) ...
REFINE_BUDGET = 400_000  # ... and at most this many simulated batches in all (the first always runs)
SHALLOW_QUEUE = 2  # q_hs this shallow ...
SMOOTH_SCV = 0.5  # ... with services this regular: refine by simulation
WARMUP_SHARE = 0.1
IN_FLIGHT_FACTOR = 4  # simulate at least this many times the batches a split holds in flight


def _ratios(fit_role, tokens: np.ndarray, busy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A role's steps as (tokens, busy over the fitted line), sorted by tokens."""
    r = busy / np.maximum(fit_role.t0_s + fit_role.c_s_per_tok * tokens, 1e-12)
    ok = np.isfinite(r) & (r > 0)
    order = np.argsort(tokens[ok], kind="stable")
    return tokens[ok][order], r[ok][order]


def near_ratios(rng: np.random.Generator, steps: tuple[np.ndarray, np.ndarray], tokens: np.ndarray) -> np.ndarray:
    """One ratio per batch of ``tokens``, drawn from the role's ``k = ceil(sqrt(n))`` steps around the
    batch's place in the steps' token order (the k-nearest-neighbour bootstrap, Lall and Sharma 1996,
    Water Resour. Res. 32(3), its rule for k; neighbours by rank), or from all the steps of the
    batch's token count where there are more: a remnant batch's ratio is drawn only by the batches
    whose window reaches it, at most one draw in k."""
    tok, ratio = steps
    n = len(tok)
    k = min(n, math.ceil(math.sqrt(n)))
    lo, hi = np.searchsorted(tok, tokens, "left"), np.searchsorted(tok, tokens, "right")
    mid = np.clip((lo + hi) // 2 - k // 2, 0, n - k)  # k steps centred on the batch's token count
    start = np.minimum(lo, mid)  # ... or all of that count's steps where they are more
    return ratio[start + (rng.random(len(tokens)) * (np.maximum(hi, mid + k) - start)).astype(np.int64)]


def batches_for(fit: PipelineFit, n: int, m: int, n_batches: int, hs_cap: int | None = None) -> int:
    """Batches simulated for split N-M: ``n_batches``, or more where the split holds more in flight."""
    b = fit.hs_cap if hs_cap is None else hs_cap
    return max(n_batches, IN_FLIGHT_FACTOR * (n * max(fit.pre_cap, 1) + b + n + m))


@dataclass(frozen=True)
class Pools:
    """What the simulations resample, from the logs' steady steps (the same for every split)."""

    steps_p: tuple[np.ndarray, np.ndarray]  # producer steps: tokens (sorted), busy / fitted line
    steps_c: tuple[np.ndarray, np.ndarray]
    tokens: np.ndarray  # consumer batches' tokens
    sync_by_m: dict[int, np.ndarray]


def gather_pools(fit: PipelineFit, logs: tuple[RunLog, ...]) -> Pools:
    """What the simulations resample, gathered once from the logs' steady steps and syncs."""
    p, c = fit.roles
    busy: dict[str, list[np.ndarray]] = {p: [], c: []}
    tokens: dict[str, list[np.ndarray]] = {p: [], c: []}
    sync_by_m: dict[int, np.ndarray] = {}  # the steady sync rounds' durations by drafter count
    for lg, ob in zip(logs, fit.observed):
        m = lg.header.roles[c]
        d = lg.syncs.loc[ob.steady.mask(lg.syncs["t"]), "dur"].to_numpy(float) if m > 1 and len(lg.syncs) else ()
        if len(d):
            sync_by_m[m] = np.concatenate([sync_by_m.get(m, np.empty(0)), d])
        if not lg.has_steps:
            continue
        # only the columns used, as arrays (on a sampled log every row copied is one of 600k)
        inside = ob.steady.mask(lg.steps["t"].to_numpy())
        role = lg.steps["role"]
        # each log's steps divided by its split's contention factor: the residuals then refer to
        # the fit's reference split, and the factor of the simulated split is applied below
        scale = fit.contention.scale(lg.header.roles[p], lg.header.engine_gpus)
        for r, k in zip((p, c), scale):
            rows = np.flatnonzero(inside & (role == r).to_numpy())
            b = lg.steps["busy"].to_numpy(float)[rows]
            if r == c and lg.header.gpus_per_node:
                b = measure_link(lg, lg.steps.iloc[rows])[1]["busy"].to_numpy(float)  # the link out
            busy[r].append(b / k if k != 1.0 else b)
            tokens[r].append(lg.steps["tokens"].to_numpy()[rows])
    cat = {r: (np.concatenate(tokens[r]).astype(float), np.concatenate(busy[r])) for r in (p, c)}
    return Pools(
        steps_p=_ratios(fit.producer, *cat[p]),
        steps_c=_ratios(fit.consumer, *cat[c]),
        tokens=cat[c][0],
        sync_by_m=sync_by_m,
    )


def _split_run(
    fit: PipelineFit, pools: Pools, n: int, m: int, hs_cap: int, n_batches: int
) -> tuple[dict, np.random.Generator, float]:
    """`simulate`'s keywords for split N-M from a generator of its own (seeded ``[0, N, M]``): `batches_for` batches'
    tokens and their target and drafter service times (the fitted line times a resampled ratio,
    scaled by the split's contention), drawn in that order; the generator, to draw on; and the
    drafters' contention factor."""
    nb = batches_for(fit, n, m, n_batches, hs_cap)
    rng = np.random.default_rng([0, n, m])
    k_p, k_c = fit.contention.scale(n, fit.contention.gpus_of(n, m))
    tok = rng.choice(pools.tokens, nb)
    tgt = (fit.producer.t0_s + fit.producer.c_s_per_tok * tok) * k_p * near_ratios(rng, pools.steps_p, tok)
    dft = (fit.consumer.t0_s + fit.consumer.c_s_per_tok * tok) * k_c * near_ratios(rng, pools.steps_c, tok)
    run = dict(
        target_s=tgt,
        drafter_s=dft,
        tokens=tok,
        n_target=n,
        n_drafter=m,
        hs_cap=hs_cap,
        pre_cap=max(fit.pre_cap, 1),
        sync_every=fit.sync.sync_every,
        warmup_batches=int(nb * WARMUP_SHARE),
    )
    return run, rng, k_c


PLACED_BATCHES = 12000


@dataclass(frozen=True)
class PlacedRun:
    """One simulated placement: its rate (b/s of the window), the share of batches that crossed and
    the link's seconds per batch (hidden state of the crossing batches, and the sync's link time
    spread over a round's batches), so that ``1 / link_s_per_batch`` is the link's capacity."""

    bps: float
    crossing_share: float
    link_s_per_batch: float


def simulate_placed_run(
    fit: PipelineFit,
    pools: Pools,
    placement: Placement,
    link_bytes_s: float | None,
    *,
    hs_cap: int | None = None,
    n_batches: int = PLACED_BATCHES,
    scale: tuple[float, float] = (1.0, 1.0),
) -> PlacedRun:
    """The split of ``placement``'s engines (n targets, m drafters) at that placement with the shared
    link, from the logs' resampled services (module docstring): its rate, the share of batches that
    crossed and the link's seconds per batch. The drafters' all-reduce holds the link
    `advisor.model.link.sync_link_s` more each round where they sit on several nodes.
    """
    n, m = sum(placement.producers), sum(placement.consumers)
    run, _, _ = _split_run(fit, pools, n, m, fit.hs_cap if hs_cap is None else hs_cap, n_batches)
    tnode = [a for a, k in enumerate(placement.producers) for _ in range(k)]
    dnode = [a for a, k in enumerate(placement.consumers) for _ in range(k)]
    link = run["tokens"] * (fit.hs_bytes_per_token or 0.0) / link_bytes_s if link_bytes_s else None
    every = fit.sync.sync_every
    sync_link = sync_link_s(placement, fit.sync.bytes_per_sync, link_bytes_s) if every > 0 and m > 1 else 0.0
    res = simulate(
        **dict(run, target_s=run["target_s"] / scale[0], drafter_s=run["drafter_s"] / scale[1]),
        sync_s=fit.sync.allreduce_s(m) + fit.sync.overhead_s + sync_link,
        link_s=link,
        keep_trace=True,
        target_node=tnode if link is not None else None,
        drafter_node=dnode if link is not None else None,
    )
    tr = res.trace
    crossed = np.asarray(tnode)[tr.target_worker] != np.asarray(dnode)[tr.drafter_worker]
    hs_s = float(np.mean(np.where(crossed, link[: crossed.size], 0.0))) if link is not None else 0.0
    return PlacedRun(
        bps=res.bps,
        crossing_share=float(crossed.mean()),
        link_s_per_batch=hs_s + (sync_link / (m * every) if sync_link > 0 else 0.0),
    )


def simulated_bps_at(
    fit: PipelineFit,
    logs: tuple[RunLog, ...],
    pairs: list[tuple[int, int]],
    *,
    n_batches: int = DEFAULT_BATCHES,
    hs_cap: int | None = None,
    pools: Pools | None = None,
) -> list[float]:
    """The simulated rate of each split ``(n, m)`` of ``pairs`` (module docstring)."""
    if fit.source is not Source.STEPS:
        raise ValueError(f"an exact simulation needs step events; this fit comes from {fit.source.value} only")
    if pools is None:
        pools = gather_pools(fit, logs)
    b = fit.hs_cap if hs_cap is None else hs_cap

    def runs():  # every split's inputs from a generator of its own, drawn as it is simulated
        loader_s: float | np.ndarray = 0.0
        for n, m in pairs:
            run, rng, k_c = _split_run(fit, pools, n, m, b, n_batches)
            nb = len(run["tokens"])
            if fit.loader.input_bound and fit.loader.capacity_bps:
                mean_gap = 1.0 / fit.loader.capacity_bps
                shape = 1.0 / max(fit.loader.scv, 1e-3)
                loader_s = rng.gamma(shape, mean_gap / shape, nb)
            sync = pools.sync_by_m.get(m)
            sync_s = rng.choice(sync, 256) if sync is not None else fit.sync.allreduce_s(m)
            # steps are drawn independently: the rounds' measured extra spread waits at the barrier
            extra_s = straggler_excess_s(fit.consumer, fit.sync, m, k_c) + fit.sync.overhead_s
            yield dict(run, loader_s=loader_s, sync_s=np.maximum(sync_s + extra_s, 0.0))

    return [simulated_bps(kw) for kw in runs()]


def simulate_splits(
    fit: PipelineFit, logs: tuple[RunLog, ...], rows: tuple[SplitRow, ...], *, hs_cap: int | None = None
) -> tuple[SplitRow, ...]:
    """``rows`` with ``bps_exact`` and ``exact_gap_pct`` (`simulated_bps_at`)."""
    sim = simulated_bps_at(fit, logs, [r.counts for r in rows], hs_cap=hs_cap)  # (each > 0: a window's rate)
    return tuple(replace(r, bps_exact=x, exact_gap_pct=100.0 * (r.bps / x - 1.0)) for r, x in zip(rows, sim))


def _lockstep(fit: PipelineFit, hs_cap: int | None) -> bool:
    """Near-deterministic steps through a one- or two-slot queue: they fall into lockstep, which
    the effective-buffer correction (built for random service) misses."""
    b = fit.hs_cap if hs_cap is None else hs_cap
    return b <= SHALLOW_QUEUE and fit.producer.busy_scv + fit.consumer.busy_scv < SMOOTH_SCV


@dataclass(frozen=True)
class Refinement:
    """What `refined_ratios` simulated: row position -> simulated / analytic rate, the contenders the
    caps left analytic, and the chain's error measured on the simulated rows."""

    ratios: dict[int, float]
    capped: tuple[int, ...] = ()  # contenders left analytic by MAX_REFINED / REFINE_BUDGET
    chain_gap_log: float = 0.0  # max |ln(simulated / analytic)| over the simulated rows (0: none)


def reaching(bps: np.ndarray, low: np.ndarray, high: np.ndarray, margin_log: float = 0.0) -> np.ndarray:
    """The contenders: rows whose interval, its upper end raised by ``margin_log``, reaches the lower
    end of the projected best (the row of the highest ``bps``).
    """
    ok = np.isfinite(bps)
    if not ok.any():
        return ok
    top = int(np.nanargmax(bps))
    floor = low[top] if np.isfinite(low[top]) else bps[top]
    hi = np.where(np.isfinite(high), high, bps)
    return ok & (hi * math.exp(margin_log) >= floor)


def refined_ratios(
    fit: PipelineFit,
    logs: tuple[RunLog, ...],
    rows: tuple[SplitRow, ...],
    *,
    hs_cap: int | None = None,
    force: tuple[int, ...] = (),
    known: Refinement | None = None,
) -> Refinement:
    """The refinement of `refine_weak_spots` as data: which rows it simulates and their ratios.

    The contenders (`reaching`: rows whose interval reaches the projected best's lower end, the
    screen widened by the largest gap between chain and simulation seen so far) are simulated, with
    the observed splits, the rows ``force`` names and the weak spots near the best (within
    ``REFINE_WITHIN`` with M > 1 syncing drafters, or in lockstep); rounds repeat while the simulated
    rates bring other rows into contention. Within ``MAX_REFINED`` splits and ``REFINE_BUDGET``
    batches: the observed and forced rows first, then the contenders, then the rest, the highest
    projected first; contenders past the caps are ``capped``.
    """
    lockstep = _lockstep(fit, hs_cap)
    if fit.source is not Source.STEPS or not (fit.sync.sync_every > 0 or lockstep):  # no weak spot to simulate
        return Refinement(ratios={})
    est = np.array([(r.bps, r.bps_low, r.bps_high) for r in rows], float).reshape(-1, 3)
    bps, low, high = est.T  # (views: scaling a row of est scales them)
    n_p, n_c = np.array([r.counts for r in rows], int).reshape(-1, 2).T
    must = np.array([r.observed for r in rows], bool)
    must[list(force)] = True
    ratios = dict(known.ratios) if known is not None else {}
    done = np.zeros(len(bps), dtype=bool)
    done[list(ratios)] = True
    est[list(ratios)] *= np.array(list(ratios.values()), dtype=float)[:, None]
    cost = {i: batches_for(fit, int(n_p[i]), int(n_c[i]), REFINE_BATCHES, hs_cap) for i in range(len(bps))}
    spent = sum(cost[i] for i in ratios)
    gap = max((abs(math.log(r)) for r in ratios.values() if r > 0), default=0.0)
    left_out = np.zeros(len(bps), dtype=bool)  # past the caps
    pools = None  # (gathered once, for every round)
    for _ in range(MAX_REFINE_ROUNDS):
        reach = reaching(bps, low, high, gap)
        near = (bps >= (1 - REFINE_WITHIN) * np.nanmax(bps)) & ((n_c > 1) | lockstep)
        cand = np.flatnonzero((must | reach | near) & ~done & ~left_out)
        if not len(cand):
            break
        rank = np.where(must[cand], 0, np.where(reach[cand], 1, 2))  # observed and forced, contenders, the rest
        take, spent = _within_caps(cand[np.lexsort((-bps[cand], rank))], int(done.sum()), spent, cost)
        left_out[np.setdiff1d(cand, take)] = True
        if not take:
            break
        pools = pools or gather_pools(fit, logs)
        pairs = [rows[i].counts for i in take]
        sim = simulated_bps_at(fit, logs, pairs, n_batches=REFINE_BATCHES, hs_cap=hs_cap, pools=pools)
        for i, y in zip(take, sim):
            x = rows[i].bps
            ratios[i] = y / x if x > 0 else 1.0
            est[i] *= ratios[i]
            if ratios[i] > 0:
                gap = max(gap, abs(math.log(ratios[i])))
        done[take] = True
    capped = np.flatnonzero((reaching(bps, low, high, gap) | must) & ~done)
    return Refinement(ratios=ratios, capped=tuple(int(i) for i in capped), chain_gap_log=gap)


def _within_caps(cand: np.ndarray, simulated: int, spent: int, cost: dict[int, int]) -> tuple[list[int], int]:
    """The candidates, in order, that fit ``MAX_REFINED`` splits and ``REFINE_BUDGET`` batches beside
    the ``simulated`` ones (the first always runs where nothing was spent), and the batches spent."""
    take: list[int] = []
    for i in cand:
        if simulated + len(take) < MAX_REFINED and (spent + cost[int(i)] <= REFINE_BUDGET or not spent):
            take.append(int(i))
            spent += cost[int(i)]
    return take, spent


def refine_weak_spots(rows: tuple[SplitRow, ...], refinement: Refinement) -> tuple[SplitRow, ...]:
    """Project every contender by one method: the exact simulation where the chain is weak.

    The chain misses two things (BENCHMARKS.md 4): a sync round stops every drafter at once, so
    through a shallow q_hs the targets block at every pause (splits with M > 1 syncing drafters);
    nearly deterministic steps through a one- or two-slot q_hs fall into lockstep. Where a fit of
    step events has either, the contenders `refined_ratios` picks (``refinement``) are simulated
    and their rows scaled to the simulated rate (``method`` "exact"), so that no two contenders are
    ranked by methods of different bias; those past the caps stay analytic ("analytic-capped").
    """
    out = [replace(r, method=ANALYTIC) for r in rows]
    for i in refinement.capped:
        out[i] = replace(out[i], method=CAPPED)
    for i, ratio in refinement.ratios.items():
        r = out[i]
        if r.bps > 0:
            # no long-run rate passes the least capacity: a simulated window above it is its noise
            ratio = min(ratio, r.bound_bps / r.bps)
        out[i] = replace(r.scaled(ratio), method=EXACT)
    return tuple(out)
