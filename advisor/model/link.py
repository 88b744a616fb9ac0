"""The hidden-state link between nodes: a transfer stage for the batches that cross it.

A drafter on node b takes q_hs's oldest batch; it crosses when its target's node differs, and then
holds **the one shared link** (B bytes/s) for ``x = hs_bytes_per_token tokens / B`` seconds, first
come first served (docs/log-schema.md, "Which batches cross, and the link"). In steady state a
batch comes from node a with probability ``N_a / N``; taking its origin independent of the drafter
(uniform mixing, exact where drafters sit on nodes without targets; BENCHMARKS.md 16.1 otherwise,
hence `advisor.project.linked` simulates the best splits), a drafter on b sends ``v_b = (N - N_b)
/ N`` of its batches over the link.

The drafters and the link form a closed network: each drafter cycles between its compute (a delay
station, ``Z = s_c``) and the link (one FCFS station of service ``x``), visited ``v_b`` times per
batch; classes are the nodes. With the drafters always fed, exact multi-class mean value analysis
over the population vectors (Reiser and Lavenberg 1980; Bard-Schweitzer past
``EXACT_MVA_STATES``), the residual of a transfer in service ``x (1 + scv_x) / 2`` (Reiser 1979),
``n - e_b`` the population less one drafter of node b:

    R_b(n) = v_b [ x + x (Q(n - e_b) - U(n - e_b)) + U(n - e_b) x (1 + scv_x) / 2 ]
    X_b(n) = n_b / (Z + R_b(n)),   Q(n) = sum_b X_b(n) R_b(n),   U(n) = sum_b X_b(n) v_b x,
    all X_b(n) scaled down together where U(n) would pass 1.

A drafter's effective service time is ``M / sum_b X_b(M)`` (the chain's consumer rate); with
``w_b = X_b / sum X_b``, the crossing share is ``c = sum_b w_b v_b`` and the link's capacity
``1 / (c x)``.

Routing: **shared** (above) or **node-local** (each node's targets feed its own drafters through
its own queue: no hidden state crosses). Either way drafters on ``L_c >= 2`` nodes all-reduce
across the link every ``sync_every`` steps; a ring over the nodes holds it

    T_link = 2 (L_c - 1) S / B   seconds            (`sync_link_s`)

a round, added to ``T_ar``; all drafters wait at the barrier meanwhile, so the link's capacity is
``1 / (c x + T_link / (M k))``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

ROUTINGS = ("shared", "local")


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Engines of each role per node: ``producers[a]`` targets and ``consumers[a]`` drafters on node a."""

    producers: tuple[int, ...]
    consumers: tuple[int, ...]
    routing: str = "shared"  # "shared": one q_hs for all; "local": each node its own pipeline

    def __post_init__(self):
        if self.routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, got {self.routing!r}")
        # node-locally every node holds both roles or neither (and some node holds them)
        if self.routing == "local" and not (
            any(self.producers) and all((nb > 0) == (mb > 0) for nb, mb in zip(self.producers, self.consumers))
        ):
            raise ValueError("node-local routing needs targets and drafters on every node that holds either")

    @classmethod
    def of_nodes(cls, producer_nodes, consumer_nodes, nodes: int) -> Placement:
        """From the node of each worker."""

        def count(of):
            out = [0] * nodes
            for a in of:
                out[min(a, nodes - 1)] += 1
            return tuple(out)

        return cls(producers=count(producer_nodes), consumers=count(consumer_nodes))

    @property
    def local(self) -> bool:
        return self.routing == "local"

    def uniform(self) -> bool:
        """Every node that holds engines holds the same mix (node-local pipelines all alike)."""
        return len({(nb, mb) for nb, mb in zip(self.producers, self.consumers) if nb or mb}) == 1

    def crossing_share(self) -> float:
        """Share of all batches that cross a node (at equal drafter speed per node)."""
        n, m = sum(self.producers), sum(self.consumers)
        if n == 0 or m == 0 or self.local:
            return 0.0
        return sum(mb * (n - nb) for nb, mb in zip(self.producers, self.consumers)) / (n * m)

    def describe(self, producer: str, consumer: str) -> str:
        """``node 0: 8 targets; node 1: 4 targets + 4 drafters`` (empty nodes left out); node-locally
        ``node-local: node 0: 7 targets + 1 drafter; node 1: ...``.
        """
        parts = []
        for a, (n, m) in enumerate(zip(self.producers, self.consumers)):
            held = [f"{k} {role}{'s' if k != 1 else ''}" for k, role in ((n, producer), (m, consumer)) if k]
            if held:
                parts.append(f"node {a}: {' + '.join(held)}")
        return f"node-local: {'; '.join(parts)}" if self.local else "; ".join(parts)


def sync_link_s(placement: Placement, sync_bytes: float | None, link_bytes_s: float | None) -> float:
    """Seconds one all-reduce of ``sync_bytes`` holds the shared link: ``2 (L_c - 1) S / B`` (module
    docstring).
    """
    lc = sum(1 for mb in placement.consumers if mb)  # nodes holding a drafter: the all-reduce's nodes
    if lc <= 1 or not sync_bytes or not link_bytes_s:
        return 0.0
    return 2.0 * (lc - 1) * sync_bytes / link_bytes_s


@dataclass(frozen=True)
class LinkResult:
    """The drafter pool with its links, drafters always fed: capacity (b/s), the drafter's mean
    seconds per batch with the link, the link's capacity (b/s of the pipeline at which the busiest
    link saturates) and the share of batches that cross."""

    consumer_cap_bps: float
    consumer_s: float
    link_cap_bps: float
    crossing_share: float


EXACT_MVA_STATES = 20_000  # population vectors of the exact recursion; past this, Bard-Schweitzer
SCHWEITZER_ITERS, SCHWEITZER_TOL = 500, 1e-10


def pool_mva(
    pop: tuple[int, ...], think_s: float, visits: tuple[float, ...], xfer_s: float, scv_x: float
) -> list[float]:
    """Per-node drafter throughputs of the closed network (module docstring)."""
    resid = xfer_s * (1.0 + scv_x) / 2.0

    def classes_x(n: tuple[int, ...], seen: list[tuple[float, float]]) -> tuple[list[float], float, float]:
        # per-class throughputs at population n from the link's queue and utilisation seen by an
        # arriving drafter of each class; the link's own queue and utilisation at n
        r = [v * (xfer_s + xfer_s * max(q - u, 0.0) + u * resid) for v, (q, u) in zip(visits, seen)]
        x = [nb / (think_s + rb) if nb else 0.0 for nb, rb in zip(n, r)]
        util = sum(xb * v * xfer_s for xb, v in zip(x, visits))
        if util > 1.0:
            x = [xb / util for xb in x]
            util = 1.0
        return x, sum(xb * rb for xb, rb in zip(x, r)), util

    if math.prod(m + 1 for m in pop) <= EXACT_MVA_STATES:
        # exact recursion over population vectors in order of their total
        memo: dict[tuple[int, ...], tuple[float, float]] = {(0,) * len(pop): (0.0, 0.0)}
        x: list[float] = [0.0] * len(pop)
        for n in sorted(itertools.product(*(range(m + 1) for m in pop)), key=sum):
            if not sum(n):
                continue
            # an arriving drafter of class b sees the network without itself: the link at n - e_b
            seen = [memo[tuple(c - (i == b) for i, c in enumerate(n))] if n[b] else (0.0, 0.0) for b in range(len(n))]
            x, q, u = classes_x(n, seen)
            memo[n] = (q, u)
        return x
    q = u = 0.0
    x = [0.0] * len(pop)
    total = sum(pop)
    for _ in range(SCHWEITZER_ITERS):
        # Bard-Schweitzer: the network without one drafter holds (M - 1) / M of the queue
        x, q_new, u_new = classes_x(pop, [(q * (total - 1) / total, u * (total - 1) / total)] * len(pop))
        if abs(q_new - q) < SCHWEITZER_TOL and abs(u_new - u) < SCHWEITZER_TOL:
            break
        q, u = q_new, u_new
    return x


def link_pool(placement: Placement, consumer_s: float, xfer_s: float, scv_x: float = 0.0) -> LinkResult:
    """The drafter pool of ``placement`` with the shared link (module docstring)."""
    n = sum(placement.producers)
    m = sum(placement.consumers)
    if n <= 0 or m <= 0 or consumer_s <= 0:
        raise ValueError("a placement needs producers, consumers and a positive service time")
    visits = tuple(0.0 if placement.local else (n - nb) / n for nb in placement.producers)
    if xfer_s > 0 and any(v > 0 and mb > 0 for v, mb in zip(visits, placement.consumers)):
        rates = pool_mva(tuple(placement.consumers), consumer_s, visits, xfer_s, scv_x)
    else:
        rates = [mb / consumer_s for mb in placement.consumers]
    cap = sum(rates)
    share = tuple(r / cap for r in rates)
    crossing = sum(w * v for w, v in zip(share, visits))
    link_cap = 1.0 / (crossing * xfer_s) if crossing * xfer_s > 0 else math.inf
    return LinkResult(consumer_cap_bps=cap, consumer_s=m / cap, link_cap_bps=link_cap, crossing_share=crossing)
