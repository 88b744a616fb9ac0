"""Which drafter steps crossed a node, and their link seconds (logs that span nodes).

A drafter step crossed when the target step of the same ``batch`` ran on another node (both
workers' nodes from the header's ``placement``, else packed: `advisor.ingest.schema.RunHeader.node_of`).
Its **link seconds** are its ``xfer`` less the mean ``xfer`` of the drafter steps that stayed on
their node (the local import, which every batch pays; 0 where none stayed), clipped at 0. The
drafter's own service (the ``busy`` the fit takes) is its ``busy`` less its link seconds: the link
is a stage of its own (`advisor.model.link`), so its wait and transfer are not counted twice.

Each crossing batch's **transfer** alone (without its wait), from the link's first-come-first-
served order: the drafter asked for the link when it started the batch, ``r = t - busy`` (a
drafter's ``t`` is its batch's end), and got it back at ``e = r + link_s``; in end order, a
transfer began at ``max(r, e_prev)`` (its request, or the end of the one before), so it took
``d = e - max(r, e_prev)``. Exact for one FCFS link; on a link with other traffic ``d`` still
excludes the wait behind the logged transfers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor.ingest.runlog import RunLog


@dataclass(frozen=True)
class LinkSample:
    """A log's drafter steps that crossed: their bytes and transfer seconds."""

    crossed: int  # drafter steps (steady) that crossed a node
    steps: int  # drafter steps (steady) whose origin is known
    bytes_: np.ndarray  # hs bytes of each crossing batch
    transfer_s: np.ndarray  # its transfer alone (FCFS order)


def crossing(log: RunLog, drafter_steps: pd.DataFrame) -> np.ndarray | None:
    """Per drafter step: whether it crossed a node, stayed on its node, or is not known."""
    head = log.header
    steps = log.steps
    if not head.gpus_per_node or "xfer" not in steps or "batch" not in steps or not len(drafter_steps):
        return None
    p, c = head.producer, head.consumer
    tgt = steps[steps["role"] == p]
    tnode = np.asarray(head.node_of(p))
    cnode = np.asarray(head.node_of(c))
    origin = pd.Series(tnode[tgt["worker"].to_numpy(dtype=np.int64)], index=tgt["batch"].to_numpy())
    origin = origin[~origin.index.duplicated()]
    src = origin.reindex(drafter_steps["batch"].to_numpy()).to_numpy()
    dst = cnode[drafter_steps["worker"].to_numpy(dtype=np.int64)]
    return np.where(np.isnan(src), np.nan, (src != dst).astype(float))


def fcfs_transfers(request_s: np.ndarray, link_s: np.ndarray) -> np.ndarray:
    """Each transfer's own duration on one FCFS link (module docstring), in the input's order."""
    end = request_s + link_s
    order = np.argsort(end, kind="stable")
    e = end[order]
    prev = np.concatenate(([-np.inf], e[:-1]))
    d = e - np.maximum(request_s[order], prev)
    out = np.empty_like(d)
    out[order] = d
    return out


def measure_link(log: RunLog, drafter_steps: pd.DataFrame) -> tuple[LinkSample | None, pd.DataFrame]:
    """The log's crossing sample and the drafter steps with the link seconds taken out of ``busy``."""
    cross = crossing(log, drafter_steps)
    if cross is None or not np.isfinite(cross).any():
        return None, drafter_steps
    xfer = np.nan_to_num(drafter_steps["xfer"].to_numpy(dtype=float))
    crossed = cross == 1.0
    stayed = cross == 0.0
    local = float(xfer[stayed].mean()) if stayed.any() else 0.0
    link_s = np.where(crossed, np.maximum(xfer - local, 0.0), 0.0)
    hs = log.header.hs_bytes_per_token or 0.0
    tokens = drafter_steps["tokens"].to_numpy(dtype=float)
    busy = drafter_steps["busy"].to_numpy(dtype=float)
    req = drafter_steps["t"].to_numpy(dtype=float)[crossed] - busy[crossed]
    sample = LinkSample(
        crossed=int(crossed.sum()),
        steps=int(np.isfinite(cross).sum()),
        bytes_=hs * tokens[crossed],
        transfer_s=fcfs_transfers(req, link_s[crossed]),
    )
    out = drafter_steps.copy()
    out["busy"] = out["busy"].to_numpy(dtype=float) - link_s
    return sample, out
