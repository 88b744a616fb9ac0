"""The link's bandwidth and the engines' shape from the measured logs.

Bandwidth, measured: over the crossing drafter steps of the logs (`advisor.measure.crossing`), each
transfer's own seconds (its wait behind earlier transfers taken out, from the link's first-come-
first-served order) per hidden-state byte; the bandwidth is the bytes over the median of those
seconds per byte (``TRANSFER_QUANTILE``), so that a few transfers slowed by other traffic do not set it. At least
``MIN_CROSSED`` crossing steps are needed; else the header's ``link_bytes_s`` (source "header");
else unknown (the projection treats the link as free and says so). ``--link-gbytes-s`` overrides
both (`advisor.settings`). The engines' GPUs and node size are the first log's header's.
"""

from __future__ import annotations

import numpy as np

from advisor.measure.measured import Measurement
from advisor.model.link import Placement
from advisor.model.params import LinkFit

TRANSFER_QUANTILE = 0.5
MIN_CROSSED = 5


def fit_link(ms: Measurement) -> LinkFit:
    """The link's bandwidth and the engines' shape from the measured logs (module docstring)."""
    head = ms.logs[0].log.header
    k = (head.k(head.producer), head.k(head.consumer))
    pl = Placement(producers=(), consumers=())
    if head.gpus_per_node and head.nodes > 1:  # engines of each role per node
        pl = Placement.of_nodes(head.node_of(head.producer), head.node_of(head.consumer), head.nodes)
    samples = [m.link for m in ms.logs if m.link is not None and m.link.crossed]
    first = ms.logs[0].link
    bytes_s = next((m.log.header.link_bytes_s for m in ms.logs if m.log.header.link_bytes_s), None)
    source = "header" if bytes_s else None
    if samples:  # one entry per crossing step: ok.sum() below checks MIN_CROSSED
        b = np.concatenate([s.bytes_ for s in samples])
        t = np.concatenate([s.transfer_s for s in samples])
        ok = (b > 0) & (t > 0)
        if ok.sum() >= MIN_CROSSED:
            bytes_s, source = 1.0 / float(np.quantile(t[ok] / b[ok], TRANSFER_QUANTILE)), "measured"
    return LinkFit(
        bytes_s=bytes_s,
        source=source,
        steps_known=first.steps if first is not None else 0,
        first_crossed=first.crossed if first is not None else 0,
        gpus_per_worker=k,
        gpus_per_node=head.gpus_per_node,
        producers_by_node=pl.producers,
        consumers_by_node=pl.consumers,
    )
