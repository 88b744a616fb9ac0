"""The split the (first) log ran, as the table sees it: the measured run and its capacities.

`ObservedSplit` holds the `~advisor.measure.observe.ObservedRun` and what the table makes of its
split: the capacities (`advisor.project.table.split_capacities`), efficiency, bottleneck, the
measured blocked/starved shares, and the self-check: the row's projection against the measured
rate (``miss_pct``, carried by `advisor.project.model_error`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from operator import attrgetter

from advisor.measure.observe import ObservedRun
from advisor.model.params import PipelineFit, Source
from advisor.project.rows import SplitRow
from advisor.project.table import logged_placement, placed_split, split_capacities, split_label
from advisor.settings import Settings


@dataclass(frozen=True)
class ObservedSplit:
    """The observed split: ``run`` as measured, ``roles`` in the pipeline's order (producer,
    consumer), and the capacities (the roles' own, the loader's where it binds, across nodes the
    link's), efficiency (over the faster role's) and bottleneck the table's function gives it."""

    run: ObservedRun
    roles: Mapping[str, int]
    capacities_bps: Mapping[str, float]
    efficiency: float
    bottleneck: str
    producer_blocked: float | None = None  # measured shares of wall time (step logs)
    consumer_starved: float | None = None
    projected_bps: float | None = (
        None  # the table's projection of this split, as the log ran it (None: not in the table)
    )
    method: str | None = None  # that projection's method (the row's ``method``)

    @property
    def miss_pct(self) -> float | None:
        """The self-check: by how much the projection misses the measured rate, % of the projection
        (positive: the model reads the split low); None where the table does not project it as run."""
        if self.projected_bps is None or not self.projected_bps > 0 or not self.run.bps > 0:
            return None
        return 100.0 * (self.run.bps / self.projected_bps - 1.0)

    # the measured run's own numbers, read through
    bps = property(attrgetter("run.bps"))
    tok_s = property(attrgetter("run.tok_s"))
    steady_from_s = property(attrgetter("run.steady.start_s"))
    steady_to_s = property(attrgetter("run.steady.end_s"))
    warmup_share = property(attrgetter("run.steady.warmup_share"))
    drain_share = property(attrgetter("run.steady.drain_share"))
    hs_mean_depth = property(attrgetter("run.hs_mean_depth"))
    hs_full_share = property(attrgetter("run.hs_full_share"))


def observed_split(fit: PipelineFit, settings: Settings, rows: Mapping[str, SplitRow]) -> ObservedSplit:
    """The first log's split: its capacities from its row of the table when the table projects
    that split as the log ran it, else from its own split and batch size.
    """
    ob = fit.observed[0]
    p, c = fit.roles
    n, m = ob.roles.get(p, 0), ob.roles.get(c, 0)
    label = split_label(n, m)
    row = rows.get(label)
    as_logged = row is not None and row.observed and settings.hs_cap == fit.hs_cap
    if as_logged and (row.link is None or row.link.layout != "node-local"):
        caps = {p: row.producer.cap_bps, c: row.consumer.cap_bps}
        loader, named = row.cap_loader_bps, row.bottleneck
        link = row.link.cap_link_bps if row.link is not None else math.inf
    else:
        if as_logged:  # node-local: the log ran one shared q_hs, at its own placement (else the best shared one)
            logged = logged_placement(fit, settings)
            res = (
                placed_split(fit, settings, n, m, logged)
                if logged is not None
                else split_capacities(fit, settings, n, m, interval=False, routing="shared")
            )
        else:  # the log ran another G or batch size than the table's: its own split, its own size
            k = settings.log_gpus_per_worker
            own = replace(
                settings,
                roles=None,
                gpus=max(n * k[0] + m * k[1], 2),
                options=replace(settings.options, token_budget=None),
                tokens_per_batch=fit.tokens_mean,
                hs_cap=fit.hs_cap,
                gpus_per_worker=k,
                engine_scaling=(1.0, 1.0),
                gpus_per_node=None,
            )
            res = split_capacities(fit, own, max(n, 1), max(m, 1))
        caps = {p: res.producer_cap_bps, c: res.consumer_cap_bps}
        loader, link, named = res.loader_cap_bps, res.link_cap_bps, res.bottleneck
    if loader is not None and math.isfinite(loader):
        caps["loader"] = float(loader)
    if math.isfinite(link):  # across nodes the link is a stage of its own, beside the roles'
        caps["link"] = float(link)
    steps = fit.source is Source.STEPS
    checked = as_logged and fit.source.logged and row.link is None  # the model against its own observation
    if not fit.source.logged and row is not None:
        # bare numbers: no rate was measured; the split's rate is the projection from the given capacities
        ob = replace(ob, bps=row.bps, tok_s=row.tok_s)
    return ObservedSplit(
        run=ob,
        roles={p: n, c: m},
        capacities_bps=caps,
        efficiency=ob.bps / max(caps[p], caps[c]),
        bottleneck=named,
        producer_blocked=fit.producer.blocked_share if steps else None,
        consumer_starved=fit.consumer.starved_share if steps else None,
        projected_bps=row.bps if checked else None,
        method=row.method if checked else None,
    )
