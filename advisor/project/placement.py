"""Where the engines of one split sit: every placement on the nodes, and the best one.

Every node is full and no engine spans nodes: node a holds N_a targets and M_a drafters with
``N_a k_p + M_a k_c = gpus_per_node``. Nodes are alike, so a placement is a multiset of node mixes,
enumerated once each up to ``MAX_PLACEMENTS``; past that the packed and the spread placements are
the candidates. The best has the highest drafter-pool capacity, links included
(`advisor.model.link.link_pool`), with the drafters' sync over the link a round's ``M k / (M k /
C + T_link)``. Ties (within ``TIE_REL``) go to fewer crossing batches, then to the packed one.
Node-local pipelines are the other layout (`advisor.project.table.local_placement`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from advisor.ingest.schema import default_placement
from advisor.model.link import LinkResult, Placement, link_pool, sync_link_s
from advisor.model.params import SyncFit
from advisor.settings import MAX_PLACEMENTS

TIE_REL = 1e-9
NO_SYNC = SyncFit(0)


def node_mixes(gpus_per_node: int, k_p: int, k_c: int) -> list[tuple[int, int]]:
    """(targets, drafters) that fill one node exactly, most targets first."""
    return [
        (a, (gpus_per_node - a * k_p) // k_c)
        for a in range(gpus_per_node // k_p, -1, -1)
        if (gpus_per_node - a * k_p) % k_c == 0
    ]


def _multisets(mixes: list[tuple[int, int]], nodes: int, n: int, m: int, start: int = 0) -> Iterator[tuple]:
    if nodes == 0:
        if n == 0 and m == 0:
            yield ()
        return
    for i in range(start, len(mixes)):
        a, b = mixes[i]
        if a <= n and b <= m:
            for rest in _multisets(mixes, nodes - 1, n - a, m - b, i):
                yield ((a, b),) + rest


def packed(n: int, m: int, nodes: int, gpus_per_node: int, k_p: int, k_c: int) -> Placement:
    """Targets fill node 0, 1, ...; drafters the GPUs left (a log's default placement)."""
    where = default_placement({"p": n, "c": m}, {"p": k_p, "c": k_c}, gpus_per_node)
    return Placement.of_nodes(where["p"], where["c"], nodes)


def placements(n: int, m: int, nodes: int, gpus_per_node: int, k_p: int, k_c: int) -> list[Placement]:
    """Every placement of ``n`` targets and ``m`` drafters on ``nodes`` full nodes (module docstring)."""
    mixes = node_mixes(gpus_per_node, k_p, k_c)
    out = []
    for combo in _multisets(mixes, nodes, n, m):
        out.append(Placement(producers=tuple(a for a, _ in combo), consumers=tuple(b for _, b in combo)))
        if len(out) > MAX_PLACEMENTS:
            return _families(n, m, nodes, gpus_per_node, k_p, k_c)
    return out or [packed(n, m, nodes, gpus_per_node, k_p, k_c)]


def _families(n: int, m: int, nodes: int, gpus_per_node: int, k_p: int, k_c: int) -> list[Placement]:
    out = [packed(n, m, nodes, gpus_per_node, k_p, k_c)]
    prod = [n // nodes + (1 if a < n % nodes else 0) for a in range(nodes)]
    cons = [(gpus_per_node - p * k_p) // k_c for p in prod]
    if sum(cons) == m and all(p * k_p + c * k_c == gpus_per_node for p, c in zip(prod, cons)):
        out.append(Placement(producers=tuple(prod), consumers=tuple(cons)))
    return out


@dataclass(frozen=True)
class Nodes:
    """The nodes a split is placed on: how many, the GPUs of each, and the GPUs of one target and of
    one drafter engine."""

    count: int
    gpus_per_node: int
    gpus_per_worker: tuple[int, int] = (1, 1)


def pool_rate(pl: Placement, pool: LinkResult, sync: SyncFit, link_bytes_s: float | None) -> float:
    """The drafter pool's capacity at ``pl`` with its sync's link time per round (module docstring)."""
    m, k = sum(pl.consumers), sync.sync_every
    t_link = sync_link_s(pl, sync.bytes_per_sync, link_bytes_s) if k > 0 and m > 1 else 0.0
    cap = pool.consumer_cap_bps
    return m * k / (m * k / cap + t_link) if t_link > 0 and cap > 0 else cap


def best_placement(
    n: int,
    m: int,
    nodes: Nodes,
    consumer_s: float,
    xfer_s: float,
    scv_x: float,
    sync: SyncFit = NO_SYNC,
    link_bytes_s: float | None = None,
) -> Placement:
    """The placement of the highest drafter-pool capacity, its sync over the link included (ties:
    fewer crossings, then packed).
    """
    shape = (nodes.count, nodes.gpus_per_node, *nodes.gpus_per_worker)
    cands = placements(n, m, *shape)
    pack = packed(n, m, *shape)
    best: tuple | None = None
    for pl in cands:
        pool = link_pool(pl, consumer_s, xfer_s, scv_x)
        key = (pool_rate(pl, pool, sync, link_bytes_s), -pool.crossing_share, pl == pack)
        if (
            best is None
            or key[0] > best[0] * (1 + TIE_REL)
            or (key[0] >= best[0] * (1 - TIE_REL) and key[1:] > best[1:])
        ):
            best, out = key, pl
    return out
