"""Across nodes, the splits near the best from exact simulation of the queue and the link.

The analytic link stage (`advisor.model.link`) takes a batch's origin as independent of its
drafter; with drafters beside targets the one FIFO q_hs breaks that, and the exact simulation of
the same rules (`advisor.project.exact.simulate_placed_run`) comes close to the trainer's
emulation where the analytic stage does not (BENCHMARKS.md 16.1). So the splits within
``REFINE_WITHIN`` of the best (at most ``MAX_REFINED``) are simulated at their ``CANDIDATES`` best
placements and the packed one; a row takes the best one's rate (capped at the least capacity,
interval scaled and widened by ``SIM_SE``, ``method`` "exact"), placement, crossing share, link
capacity (one over its link seconds per batch) and free-link rate. Node-local rows stay analytic;
where the simulated shared queue falls below the node-local pipelines, the row becomes theirs.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from advisor.ingest.runlog import RunLog
from advisor.model.chain import LINK_SATURATED, LINK_SATURATED_CAP
from advisor.model.link import Placement, link_pool
from advisor.model.params import PipelineFit, Source
from advisor.project.exact import PlacedRun, gather_pools, simulate_placed_run
from advisor.project.placement import packed, placements, pool_rate
from advisor.project.rows import SplitRow
from advisor.project.table import engine_rate_scale, link_xfer_s, project
from advisor.settings import Settings

REFINE_WITHIN = 0.25
CANDIDATES = 3
MAX_REFINED = 8
# one standard error of the simulated rate against the trainer's emulated pipeline: the largest gap
# over the 13 split-placements of BENCHMARKS.md 16.1 was 3.5% (about 1.96 x 0.018)
SIM_SE = 0.02


def candidates(fit: PipelineFit, settings: Settings, n: int, m: int) -> list[Placement]:
    """The ``CANDIDATES`` best placements of split (n, m) by the analytic stage, and the packed one."""
    gpn = int(settings.gpus_per_node or settings.gpus)
    every = placements(n, m, settings.nodes, gpn, *settings.gpus_per_worker)
    s_c = fit.consumer.busy_mean_s / engine_rate_scale(settings, 1)
    x_s = link_xfer_s(fit, settings)
    ranked = sorted(every, key=lambda pl: -pool_rate(pl, link_pool(pl, s_c, x_s), fit.sync, settings.link_bytes_s))
    ranked = ranked[:CANDIDATES]
    pack = packed(n, m, settings.nodes, gpn, *settings.gpus_per_worker)
    return ranked + ([pack] if pack not in ranked and pack in every else [])


def refine_placements(
    fit: PipelineFit, logs: tuple[RunLog, ...], settings: Settings, rows: tuple[SplitRow, ...]
) -> tuple[SplitRow, ...]:
    """``rows`` with those near the best refined by simulation of the link (module docstring)."""
    if (
        fit.source is not Source.STEPS
        or not settings.own_budget
        or settings.nodes <= 1
        or not settings.link_bytes_s
        or not fit.hs_bytes_per_token
        or not any(r.link is not None for r in rows)
    ):
        return rows
    out = list(rows)
    pools = gather_pools(fit, logs)
    scale = (engine_rate_scale(settings, 0), engine_rate_scale(settings, 1))
    bps = np.array([r.bps for r in rows], float)
    best = float(bps.max())
    order = np.argsort(-bps, kind="stable")
    todo = [i for i in order if bps[i] >= (1 - REFINE_WITHIN) * best][:MAX_REFINED]
    for i in todo:
        r = out[i]
        if r.link.layout == "node-local":
            continue  # no batch crosses: each node's pipeline is the analytic chain's own case
        n, m = r.counts
        runs = [
            (simulate_placed_run(fit, pools, pl, settings.link_bytes_s, hs_cap=settings.hs_cap, scale=scale), pl)
            for pl in candidates(fit, settings, n, m)
        ]
        run, pl = max(runs, key=lambda x: x[0].bps)
        free = simulate_placed_run(fit, pools, pl, None, hs_cap=settings.hs_cap, scale=scale).bps
        r = out[i] = _at_run(r, run, free, pl)
        if r.link.other_layout_bps > r.bps:
            # simulated, the shared queue falls below the node-local pipelines: the row becomes theirs
            (local,) = project(fit, settings, pairs=[(n, m)], routing="local")
            out[i] = replace(local, link=replace(local.link, other_layout_bps=r.bps))
    return tuple(out)


def _at_run(r: SplitRow, run: PlacedRun, free_bps: float, pl: Placement) -> SplitRow:
    """Row ``r`` at its simulated rate and placement: the rate's columns scaled alike, the link's
    capacity from the simulated link seconds per batch, the link the bottleneck where it is the
    smallest capacity. A simulated window above the smallest capacity (its noise) is taken at it;
    the free-link rate is simulated alike, and never below the linked one."""
    p, c = r.producer, r.consumer
    cap = 1.0 / run.link_s_per_batch if run.link_s_per_batch > 0 else math.inf
    caps = {p.role: p.cap_bps, c.role: c.cap_bps, "link": cap}
    x = min(run.bps, min(caps.values()))
    f = x / r.bps if r.bps > 0 else 1.0
    r = r.scaled(f).widened_by(x, SIM_SE**2)  # the simulation's own error against the emulated pipeline
    saturated = math.isfinite(cap) and (x >= LINK_SATURATED * cap or cap <= LINK_SATURATED_CAP * min(caps.values()))
    return replace(
        r,
        bps=x,
        method="exact",
        producer=replace(p, engines_by_node=pl.producers),
        consumer=replace(c, engines_by_node=pl.consumers),
        bound_bps=min(caps.values()),
        bottleneck="link" if saturated else min(caps, key=caps.get),
        link=replace(
            r.link,
            placement_text=pl.describe(p.role, c.role),
            crossing_share=run.crossing_share,
            cap_link_bps=cap,
            link_util=x / cap if math.isfinite(cap) else 0.0,
            bps_free_link=max(min(free_bps, caps[p.role], caps[c.role]), x),
        ),
    )
