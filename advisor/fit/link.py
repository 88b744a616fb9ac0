"""The link's bandwidth and the engines' shape from the measured logs.

Bandwidth, measured: over the crossing drafter steps of the logs (`advisor.measure.link`), the
seconds per byte of each (link seconds / hidden-state bytes); the link's own speed is that of the
batches that found it free, taken as the 10th percentile (``FREE_QUANTILE``) of seconds per byte,
so that queueing behind other transfers (the upper part) does not count as slowness. At least
``MIN_CROSSED`` crossing steps are needed; else the header's ``link_bytes_s`` (source "header");
else unknown (the projection treats the link as free and says so). ``--link-gbytes-s`` overrides
both (`advisor.settings`). The engines' GPUs and node size are the first log's header's.
"""
from __future__ import annotations

import numpy as np

from advisor.measure.measured import Measurement
from advisor.model.params import LinkFit

FREE_QUANTILE = 0.10
MIN_CROSSED = 5


def fit_link(ms: Measurement) -> LinkFit:
    head = ms.logs[0].log.header
    k = (head.k(head.producer), head.k(head.consumer))
    spans = any(m.log.header.gpus_per_node and m.log.header.nodes > 1 for m in ms.logs)
    samples = [m.link for m in ms.logs if m.link is not None and m.link.crossed]
    crossed = sum(s.crossed for s in samples)
    local = float(np.mean([s.local_xfer_s for s in samples])) if samples else 0.0
    if crossed >= MIN_CROSSED:
        b = np.concatenate([s.bytes_ for s in samples])
        t = np.concatenate([s.link_s for s in samples])
        ok = (b > 0) & (t > 0)
        if ok.sum() >= MIN_CROSSED:
            per_byte = float(np.quantile(t[ok] / b[ok], FREE_QUANTILE))
            return LinkFit(bytes_s=1.0 / per_byte, source="measured", crossed_steps=crossed, local_xfer_s=local,
                           spans_nodes=spans, gpus_per_worker=k, gpus_per_node=head.gpus_per_node)
    given = next((m.log.header.link_bytes_s for m in ms.logs if m.log.header.link_bytes_s), None)
    return LinkFit(bytes_s=given, source="header" if given else None, crossed_steps=crossed, local_xfer_s=local,
                   spans_nodes=spans, gpus_per_worker=k, gpus_per_node=head.gpus_per_node)
