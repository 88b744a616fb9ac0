"""Project every split N + M = G of one fitted pipeline, under one `~advisor.settings.Settings`.

`project` returns one `~advisor.project.rows.SplitRow` per split (N >= 1, M >= 1), highest N
first; ``Advice.splits`` lays them out as a DataFrame indexed by the label (``"7-1"``: N
producers - M consumers), its column names the ``--json`` keys where both have the quantity:

==================  ===========================================================================
n_<producer>        producer engines (targets), N; ``n_<consumer>``: consumer engines, M
bps                 projected rate, batches/s (`advisor.model.chain`, or simulated: ``method``)
bps_low, bps_high   95% interval (`advisor.model.chain.project_split`), widened at an observed
                    split to cover the measured rate (`reconcile`)
bps_high_open       ``bps_high`` rests on a capacity known only from below ("at least bps_low")
tok_s               bps x tokens per batch (NaN where no log measured tokens)
bound_bps           min of the capacities (the link's among them): ``bps`` never passes it
cap_<role>_bps      C_p = N mu_p, C_c = M mu_c s(M) (`split_capacities`); ``cap_loader_bps`` NaN
                    unless the loader limits input
efficiency          bps / the fastest role's own capacity (never the link's)
gpu_util            compute-busy GPU-seconds / all GPU-seconds, an engine of k GPUs counting k
gpus_<role>         GPUs the role's engines hold (N k_p + M k_c = G); ``gpus_per_<role>``: k
placement           across nodes, where the engines sit (`advisor.project.placement`), with
                    ``nodes_<role>`` the engines per node
layout              "shared" (one q_hs) or "node-local" (a pipeline per node; the layout of the
                    higher rate); ``bps_other_layout``: the rate in the other one (NaN: none)
cap_link_bps        the pipeline rate at which hidden state and sync fill the link (inf: free)
bps_free_link       the rate were the link free; ``bps_logged_place``: at the log's own placement
link_util           the busiest link's utilisation; ``link_hs_share``, ``link_sync_share``: its
                    busy time carrying hidden states and the drafters' all-reduce
crossing_share      share of batches that cross a node
bottleneck          the stage of the smallest capacity ("loader" when input-bound)
<role>_blocked      a producer's share blocked on a full q_hs; ``<consumer>_starved``: starved
hs_mean_depth       mean q_hs depth, batches
eta_s               time to finish the rest of the job (a next run: all of it; NaN: unknown)
observed            the split(s) the logs ran; ``observed_bps``: the measured rate there
method              "analytic", "exact" (simulated, `advisor.project.exact`) or "analytic-capped"
widened             reconciliation widened the interval to a measured rate
err_*               the interval's parts (`advisor.model.chain.IntervalParts`): ln b/s per
                    standard error of each shared source, ``err_own_var``, the sync ends, the
                    capacity corners; ``err_model_sigma``, ``err_model_miss``: the model's error
                    (`advisor.project.model_error`)
bps_exact           with ``--exact``, the simulated rate; ``exact_gap_pct``: bps against it
probe_segments      in a probe's table, the segments that measured the split
==================  ===========================================================================

Two splits' projections share most of their uncertainty (one fit): the lead of a over b has the
95% interval ``ln(X_a / X_b) +- 1.96 sqrt(sum_k (s_ak - s_bk)^2 + own_a + own_b)`` over the shared
sources k (`advisor.project.rows.lead_interval`); a widened row has none.

Reconciliation: a log's measured rate more than ``RECONCILE_PCT`` from its projection is a caveat
(`Reconciliation.caveat`), and the split's interval is widened to cover it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from advisor.model.chain import LinkStage, SplitResult, WhatIf, project_local, project_split
from advisor.model.link import Placement, sync_link_s
from advisor.model.params import PipelineFit
from advisor.project.placement import Nodes, best_placement, node_mixes
from advisor.project.rows import LinkRow, RoleRow, SplitRow
from advisor.settings import ENGINE_SCALING_SE, LINK_SE, SAME_SIZE_TOL, Settings
from advisor.stats import Z_95

RECONCILE_PCT = 3.0
LAYOUT_TIE_REL = 1e-6  # rates this close are a tie between the layouts of a split


@dataclass(frozen=True)
class Reconciliation:
    """Projection vs measurement at one observed split."""

    path: str
    label: str
    gpus: int
    observed_bps: float
    projected_bps: float
    caveat: str = ""  # where the gap passes RECONCILE_PCT: what the advice says of it

    @property
    def gap_pct(self) -> float:
        return 100.0 * (self.projected_bps / self.observed_bps - 1.0) if self.observed_bps > 0 else math.nan


def split_label(n: int, m: int) -> str:
    """A split's row label."""
    return f"{n}-{m}"


def split_capacities(
    fit: PipelineFit,
    settings: Settings,
    n: int,
    m: int,
    *,
    what_if: WhatIf = WhatIf(),
    interval: bool = True,
    routing: str | None = None,
) -> SplitResult:
    """One split's projection (capacities, rate, shares) under ``settings``: the one place that
    turns the fit and the options into a split's numbers.

    Across nodes, the split's layout of the higher rate: one shared q_hs at its best placement, or
    node-local pipelines where every node can hold both roles (`local_placement`: alike nodes where
    the split divides over them, else as even as whole engines allow; a tie within ``LAYOUT_TIE_REL``
    goes to these: they leave the link to the sync alone).
    """
    kw = dict(_projection(settings, what_if), interval=interval)
    if settings.nodes <= 1:
        return project_split(fit, n, m, **kw)
    local = local_placement(settings, n, m) if routing != "shared" else None
    if local is not None and routing == "local":
        return _at_placement(fit, settings, n, m, local, **kw)
    compute_s = project_split(fit, n, m, **dict(kw, interval=False)).consumer_compute_s
    nodes = Nodes(settings.nodes, int(settings.gpus_per_node or settings.gpus), settings.gpus_per_worker)
    xfer_s, scv = link_xfer_s(fit, settings), link_scv(fit)
    pl = best_placement(n, m, nodes, compute_s, xfer_s, scv, fit.sync, settings.link_bytes_s)
    shared = _at_placement(fit, settings, n, m, pl, **kw)
    if local is None:
        return shared
    node_local = _at_placement(fit, settings, n, m, local, **kw)
    # the layout of the higher rate; a tie goes to the node-local pipelines, which send no hidden state across
    best, other = (
        (node_local, shared) if node_local.x_bps >= shared.x_bps * (1 - LAYOUT_TIE_REL) else (shared, node_local)
    )
    return replace(best, other_layout_bps=other.x_bps)


def local_placement(settings: Settings, n: int, m: int) -> Placement | None:
    """Split (n, m) as node-local pipelines, one per node, each node holding at least one engine of
    each role and every node full: spread as evenly as whole engines allow, every node's targets one
    of two neighbouring node mixes (13-3 on two nodes of 8: 7-1 and 6-2), so that each node's
    pipeline is as balanced as the split; alike nodes (N / L and M / L each) where it divides so.
    """
    nodes = settings.nodes
    kp, kc = settings.gpus_per_worker
    gpn = int(settings.gpus_per_node or settings.gpus)
    if nodes <= 1 or n * kp + m * kc != nodes * gpn:
        return None
    mixes = sorted(a for a, b in node_mixes(gpn, kp, kc) if a >= 1 and b >= 1)
    for lo, hi in zip(mixes, mixes[1:] + mixes[-1:]):
        more, left = divmod(n - nodes * lo, hi - lo) if hi > lo else (0, n - nodes * lo)
        if left == 0 and 0 <= more <= nodes:
            producers = (hi,) * more + (lo,) * (nodes - more)
            consumers = tuple((gpn - a * kp) // kc for a in producers)
            return Placement(producers=producers, consumers=consumers, routing="local")
    return None


def _at_placement(
    fit: PipelineFit, settings: Settings, n: int, m: int, placement: Placement, *, interval: bool, **kw
) -> SplitResult:
    """Split (n, m) at ``placement``, in its routing (`advisor.model.chain.project_local` node-locally)."""
    sync_s = sync_link_s(placement, fit.sync.bytes_per_sync, settings.link_bytes_s)
    stage = LinkStage(placement, link_xfer_s(fit, settings), link_scv(fit), sync_xfer_s=sync_s)
    if placement.local:
        return project_local(fit, n, m, stage, interval=interval, **kw)
    return project_split(fit, n, m, interval=interval, link=stage, **kw)


def placed_split(fit: PipelineFit, settings: Settings, n: int, m: int, placement: Placement) -> SplitResult:
    """Split (n, m) at a given placement (a log's own, a placement to compare), rate only."""
    return _at_placement(fit, settings, n, m, placement, interval=False, **_projection(settings, WhatIf()))


def _projection(settings: Settings, what_if: WhatIf) -> dict:
    """`project_split`'s keywords under ``settings``: ``what_if`` with the settings' depth and tokens
    where it gives none, its rate factors times the engines' (`engine_rate_scale`)."""
    mu = what_if.mu_scale
    return dict(
        what_if=replace(
            what_if,
            hs_cap=settings.hs_cap if what_if.hs_cap is None else what_if.hs_cap,
            tokens_per_batch=what_if.tokens_per_batch or (None if settings.own_budget else settings.tokens_per_batch),
            mu_scale=(mu[0] * engine_rate_scale(settings, 0), mu[1] * engine_rate_scale(settings, 1)),
        ),
        gpus=settings.gpus,
        gpus_per_worker=settings.gpus_per_worker,
    )


def logged_placement(fit: PipelineFit, settings: Settings) -> Placement | None:
    """The first log's placement where the table's nodes are the log's, else None."""
    lk = fit.link
    if (
        not lk.producers_by_node
        or len(lk.producers_by_node) != settings.nodes
        or lk.gpus_per_node != settings.gpus_per_node
    ):
        return None
    return Placement(producers=lk.producers_by_node, consumers=lk.consumers_by_node)


def engine_rate_scale(settings: Settings, i: int) -> float:
    """An engine's rate at the projected size over the logged one: (k / k_log) x `Settings.engine_scaling`."""
    k, k_log = settings.gpus_per_worker[i], settings.log_gpus_per_worker[i]
    return 1.0 if k == k_log else k / k_log * settings.engine_scaling[i]


def link_xfer_s(fit: PipelineFit, settings: Settings) -> float:
    """Seconds a crossing batch holds its link: hs_bytes_per_token x tokens / bandwidth (0: free)."""
    if not settings.link_bytes_s or not fit.hs_bytes_per_token:
        return 0.0
    return fit.hs_bytes_per_token * settings.tokens_per_batch / settings.link_bytes_s


def link_scv(fit: PipelineFit) -> float:
    """The transfer's SCV: that of the batch's tokens."""
    scv = (fit.tokens_std / fit.tokens_mean) ** 2 if fit.tokens_mean > 0 else 0.0
    return scv if math.isfinite(scv) else 0.0


def project(
    fit: PipelineFit,
    settings: Settings,
    *,
    pairs: Sequence[tuple[int, int]] | None = None,
    interval: bool = True,
    routing: str | None = None,
) -> tuple[SplitRow, ...]:
    """All splits of ``settings.gpus`` GPUs (or the given ``(N, M)`` pairs), as documented above."""
    p, c = fit.roles
    pairs = list(pairs) if pairs is not None else settings.engine_pairs()
    # batches left in the job: from samples x epochs and progress (a next run: all of them), else
    # the pipeline's own ETA
    ob, left = fit.observed[0], None
    if fit.total_batches:
        done = 0.0 if settings.for_next_run or ob.done is None else ob.done
        left = fit.total_batches * max(1.0 - done, 0.0)
    elif ob.eta_s is not None and ob.bps > 0:
        left = ob.eta_s * ob.bps
    tokens = settings.tokens_per_batch
    if left is not None and not settings.own_budget:
        left = left * fit.tokens_mean / tokens  # the same tokens to process, in other batches
    # bare numbers: the given split is marked, but nothing measured its rate
    observed = {
        (o.roles.get(p, 0), o.roles.get(c, 0)): (o.bps if fit.source.logged else math.nan)
        for o in fit.observed
        if _in_table(fit, o, settings)
    }
    kp, kc = settings.gpus_per_worker
    rows = []
    for n, m in pairs:
        mid = split_capacities(fit, settings, n, m, interval=interval, routing=routing)
        link = _link_row(fit, settings, n, m, mid)
        by_node = (mid.placement.producers, mid.placement.consumers) if link is not None else (None, None)
        rows.append(
            SplitRow(
                label=split_label(n, m),
                producer=RoleRow(p, n, mid.producer_cap_bps, mid.producer_blocked, n * kp, kp, by_node[0]),
                consumer=RoleRow(c, m, mid.consumer_cap_bps, mid.consumer_starved, m * kc, kc, by_node[1]),
                bps=mid.x_bps,
                bps_low=min(mid.x_low_bps, mid.x_bps),
                bps_high=max(mid.x_high_bps, mid.x_bps),
                bps_high_open=bool(mid.x_high_open),
                tok_s=mid.x_bps * tokens if fit.tokens_measured else math.nan,
                bound_bps=mid.bound_bps,
                cap_loader_bps=mid.loader_cap_bps if mid.loader_cap_bps is not None else math.nan,
                efficiency=mid.efficiency,
                gpu_util=mid.gpu_util,
                bottleneck=str(mid.bottleneck),
                hs_mean_depth=mid.hs_mean_depth,
                eta_s=left / mid.x_bps if left is not None and mid.x_bps > 0 else math.nan,
                observed=(n, m) in observed,
                observed_bps=observed.get((n, m), math.nan),
                link=link,
                parts=mid.parts,
            )
        )
    return widen_for_assumptions(fit, settings, tuple(rows), routing) if interval else tuple(rows)


def widen_for_assumptions(
    fit: PipelineFit, settings: Settings, rows: tuple[SplitRow, ...], routing: str | None = None
) -> tuple[SplitRow, ...]:
    """Where a role's engine size changes (a given per-GPU ratio) or a link not measured from this
    log carries the projection, every row's interval also spans the rate at that number +-
    ``ENGINE_SCALING_SE`` / ``LINK_SE``, added to the row's own variance (`SplitRow.widened_by`)."""
    knobs = [i for i in (0, 1) if settings.gpus_per_worker[i] != settings.log_gpus_per_worker[i]]
    link = settings.nodes > 1 and bool(settings.link_bytes_s) and settings.link_source != "measured"
    if not knobs and not link:
        return rows
    # each assumption's two ends: the settings and the engines' rate factors there
    engine = (1 - ENGINE_SCALING_SE, 1 + ENGINE_SCALING_SE)
    ends = [[(settings, (f, 1.0) if i == 0 else (1.0, f)) for f in engine] for i in knobs]
    if link:
        bw = settings.link_bytes_s
        ends.append([(replace(settings, link_bytes_s=bw * f), (1.0, 1.0)) for f in (1 - LINK_SE, 1 + LINK_SE)])

    def rate(n: int, m: int, s: Settings, k: tuple[float, float]) -> float:
        return split_capacities(fit, s, n, m, what_if=WhatIf(mu_scale=k), interval=False, routing=routing).x_bps

    def var(n: int, m: int) -> float:  # the log-variance the assumptions' ends add at split (n, m)
        widths = (math.log(max(rate(n, m, *hi), 1e-300) / max(rate(n, m, *lo), 1e-300)) for lo, hi in ends)
        return sum((w / (2 * Z_95)) ** 2 for w in widths)

    return tuple(r.widened_by(r.bps, var(*r.counts)) if r.bps > 0 else r for r in rows)


def _link_row(fit: PipelineFit, settings: Settings, n: int, m: int, mid: SplitResult) -> LinkRow | None:
    """Across nodes, the row's placement and link (documented above); None on one node."""
    if settings.nodes <= 1 or mid.placement is None:
        return None
    p, c = fit.roles
    pl = mid.placement
    free, at_log = mid.x_bps, math.nan
    if settings.link_bytes_s:
        free = placed_split(fit, replace(settings, link_bytes_s=None), n, m, pl).x_bps
    logged, ob = logged_placement(fit, settings), fit.observed[0].roles
    if logged is not None and (ob.get(p), ob.get(c)) == (n, m):
        at_log = placed_split(fit, settings, n, m, logged).x_bps
    busy = mid.link_util > 0
    return LinkRow(
        placement_text=pl.describe(p, c),
        layout="node-local" if pl.local else "shared",
        other_layout_bps=mid.other_layout_bps,
        cap_link_bps=mid.link_cap_bps,
        link_util=mid.link_util,
        crossing_share=mid.crossing_share,
        hs_share=1.0 - mid.link_sync_share if busy else 0.0,
        sync_share=mid.link_sync_share if busy else 0.0,
        bps_free_link=free,
        bps_logged_place=at_log,
        logged_placement=logged.describe(p, c) if logged is not None else "",
    )


def _in_table(fit: PipelineFit, ob, settings: Settings) -> bool:
    """Whether a log ran one of this table's splits (its G, engine sizes and batch size), so that
    its measured rate is a row's."""
    p, c = fit.roles
    return (
        settings.split_gpus(ob.roles.get(p, 0), ob.roles.get(c, 0)) == settings.gpus
        and not settings.engines_changed
        and abs(_log_tokens(fit, ob) / settings.tokens_per_batch - 1.0) <= SAME_SIZE_TOL
    )


def _log_tokens(fit: PipelineFit, ob) -> float:
    """A log's tokens per batch: from its tokens/s where it measured them, else the fit's batch."""
    tokens = ob.tok_s / ob.bps if ob.bps > 0 else math.nan
    return tokens if math.isfinite(tokens) else fit.tokens_mean


def reconcile(
    fit: PipelineFit, settings: Settings, rows: tuple[SplitRow, ...]
) -> tuple[tuple[SplitRow, ...], tuple[Reconciliation, ...]]:
    """Compare the projection with every log's measured rate; widen and say so where they differ.

    Each log is compared at its own G and batch size (projected afresh when those differ from the
    table's), so logs at other splits or budgets are checked too.
    """
    p, c = fit.roles
    df = {r.label: r for r in rows}
    out = []
    if not fit.source.logged:  # no log: no measured rate to reconcile with
        return rows, ()
    for ob in fit.observed:
        n, m = ob.roles.get(p, 0), ob.roles.get(c, 0)
        if n < 1 or m < 1 or not ob.bps > 0:
            continue
        label = split_label(n, m)
        log_gpus = n * settings.log_gpus_per_worker[0] + m * settings.log_gpus_per_worker[1]  # as the log ran
        in_table = _in_table(fit, ob, settings) and label in df
        placed = ob is fit.observed[0] and bool(fit.link.producers_by_node)
        if in_table and (not placed or logged_placement(fit, settings) is None):
            x = df[label].bps
        elif placed:
            own = settings  # as the log ran: its own placement
            if not in_table:  # off the table: its own nodes, G and engine sizes too
                own = replace(
                    settings,
                    gpus=log_gpus,
                    gpus_per_node=fit.link.gpus_per_node,
                    gpus_per_worker=settings.log_gpus_per_worker,
                    engine_scaling=(1.0, 1.0),
                )
            pl = Placement(producers=fit.link.producers_by_node, consumers=fit.link.consumers_by_node)
            x = placed_split(fit, own, n, m, pl).x_bps
        else:
            tokens = _log_tokens(fit, ob)
            same = abs(tokens / fit.tokens_mean - 1) <= SAME_SIZE_TOL
            what_if = WhatIf(hs_cap=settings.hs_cap, tokens_per_batch=None if same else tokens)
            x = project_split(fit, n, m, what_if=what_if, gpus_per_worker=settings.log_gpus_per_worker).x_bps
        rec = Reconciliation(path=ob.path, label=label, gpus=log_gpus, observed_bps=ob.bps, projected_bps=x)
        if abs(rec.gap_pct) <= RECONCILE_PCT:
            out.append(rec)
            continue
        widened = ""
        if in_table:
            r = df[label]
            r = df[label] = replace(r, bps_low=min(r.bps_low, ob.bps), bps_high=max(r.bps_high, ob.bps), widened=True)
            span = f"at least {r.bps_low:.3g}" if r.bps_high_open else f"{r.bps_low:.3g}-{r.bps_high:.3g}"
            widened = f"; its interval is widened to {span} b/s"
        caveat = (
            f"{ob.path}: the model gives {x:.3g} b/s at {label} where this log measured {ob.bps:.3g} b/s "
            f"({rec.gap_pct:+.1f}%){widened}; {_why_not(fit, ob)}"
        )
        out.append(replace(rec, caveat=caveat))
    return tuple(df.values()), tuple(out)


def _why_not(fit: PipelineFit, ob) -> str:
    """The likeliest reason a log's rate differs from the fit (for the warning's text)."""
    if len(fit.observed) > 1:
        return (
            "the logs fitted together disagree about per-worker speed (contention or a different machine "
            "load at another split); fit this log alone to compare"
        )
    if not ob.steady.settled:
        return "the run had not settled (its pace still drifts)"
    if fit.loader.input_bound:
        return "the loader's variability is assumed, not measured"
    return (
        "step times drift or depend on the split (shared resources); treat the interval as a lower bound on the error"
    )
