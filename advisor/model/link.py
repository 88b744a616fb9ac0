"""The hidden-state link between nodes: a transfer stage for the batches that cross it.

Semantics (docs/log-schema.md, "Which batches cross, and the link"): q_hs is one queue of the
whole pipeline and a drafter takes its oldest batch, whichever target made it; a batch crosses
when its target's node differs from the drafter's node b, and then holds **the one shared
inter-node link** (bandwidth B bytes/s) for ``x = bytes / B`` seconds, ``bytes =
hs_bytes_per_token x tokens``, first come first served. The drafter waits for its turn and its
transfer (both in its ``xfer`` and ``busy``).

Which target made the oldest batch: in steady state every target completes X / N batches per
second, so a batch in q_hs comes from node a with probability ``N_a / N`` (N_a targets on a);
assuming that origin independent of the drafter that takes it (uniform mixing), a drafter on node
b sends ``v_b = (N - N_b) / N`` of its batches over the link. Where all drafters sit on nodes
without targets this is exact by conservation; where drafters share nodes with targets the one
FIFO queue ties origin to drafter (in an emulated spread placement more batches crossed than
uniform mixing gives, BENCHMARKS.md 16.1), so `advisor.project.linked` simulates the splits near
the best exactly and this stage is the screen that ranks the placements to simulate.

The drafters and the link form a closed network: M drafters cycle between their own compute (a
delay station of mean ``Z = s_c``, each drafter on its own GPU) and the link (one first-come-
first-served station of service ``x``), a drafter of node b visiting it ``v_b`` times per batch.
Classes are the nodes (drafters of one node visit alike). Its throughput with the drafters always
fed (q_hs never empty: the drafter-bound side) is solved by exact multi-class mean value analysis
over the population vectors up to (M_0, ..., M_{L-1}) (Reiser and Lavenberg 1980; Bard-Schweitzer's
fixed point where there are more than ``EXACT_MVA_STATES`` vectors), with the residual of the
transfer in service taken as ``x (1 + scv_x) / 2`` rather than ``x`` (the FCFS correction for
non-exponential service, Reiser 1979; scv_x: the transfer's squared coefficient of variation,
that of tokens per batch). With ``n - e_b`` the population less one drafter of node b:

    R_b(n) = v_b [ x + x (Q(n - e_b) - U(n - e_b)) + U(n - e_b) x (1 + scv_x) / 2 ]
    X_b(n) = n_b / (Z + R_b(n)),   Q(n) = sum_b X_b(n) R_b(n),   U(n) = sum_b X_b(n) v_b x,
    all X_b(n) scaled down together where U(n) would pass 1 (no link carries more than it can;
    the residual correction alone overshoots near saturation).

The pool's capacity is ``sum_b X_b(M)``, and the drafter's effective mean service time, the
link's wait and transfer included, is ``M / sum_b X_b(M)``: the chain (`advisor.model.chain`)
takes it as the consumer's rate. With ``w_b = X_b / sum X_b`` node b's share of consumption, the
crossing share is ``c = sum_b w_b v_b``, the link's utilisation at pipeline rate X is ``X c x``
and its capacity (the pipeline rate at which it saturates) ``1 / (c x)``.

Routing. The above is the **shared** routing: one q_hs, any drafter takes any batch. A placement
may instead route **node-locally**: every node holding targets also holds drafters, and each
node's batches go to its own drafters through a queue of its own (one pipeline per node), so no
hidden state crosses. The drafters still form one data-parallel job: every ``sync_every`` steps
they all-reduce their gradients, and where they sit on ``L_c >= 2`` nodes that all-reduce crosses
the link. Ring all-reduce over the nodes (the drafters of one node reduce among themselves
first): each of the ``L_c`` ring edges between nodes carries ``2 (L_c - 1) / L_c`` of the
``S`` synced bytes, all of them over the one shared link, so a sync round holds it

    T_link = 2 (L_c - 1) S / B   seconds            (`sync_link_s`)

which adds to the collective's own ``T_ar`` (the fit's, measured within a node). The drafters are
all at the barrier while it runs, so it never shares the link with a hidden-state transfer: per
batch the link carries ``c x`` seconds of hidden state and ``T_link / (M k)`` of sync (M k
batches a round), and its capacity is ``1 / (c x + T_link / (M k))``. This holds in both routings
(shared routing with drafters on several nodes pays the same sync).
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
        if self.routing == "local" and not self.can_route_locally():
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
    def nodes(self) -> int:
        return len(self.producers)

    @property
    def local(self) -> bool:
        return self.routing == "local"

    @property
    def consumer_nodes(self) -> int:
        """Nodes holding at least one drafter (the all-reduce's nodes, ``L_c``)."""
        return sum(1 for mb in self.consumers if mb)

    def can_route_locally(self) -> bool:
        """Every node holds both roles or neither (and some node holds them)."""
        return any(self.producers) and all((nb > 0) == (mb > 0) for nb, mb in zip(self.producers, self.consumers))

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
        parts = ["node-local:"] if self.local else []
        for a, (n, m) in enumerate(zip(self.producers, self.consumers)):
            held = [f"{k} {role}{'s' if k != 1 else ''}" for k, role in ((n, producer), (m, consumer)) if k]
            if held:
                parts.append(f"node {a}: {' + '.join(held)}")
        return (parts[0] + " " + "; ".join(parts[1:])) if self.local else "; ".join(parts)


def sync_link_s(placement: Placement, sync_bytes: float | None, link_bytes_s: float | None) -> float:
    """Seconds one all-reduce of ``sync_bytes`` holds the shared link: ``2 (L_c - 1) S / B`` (module
    docstring).
    """
    lc = placement.consumer_nodes
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
    node_share: tuple[float, ...]

    def link_util(self, x_bps: float) -> float:
        """Busiest link's utilisation at pipeline rate ``x_bps``."""
        return x_bps / self.link_cap_bps if math.isfinite(self.link_cap_bps) and self.link_cap_bps > 0 else 0.0


EXACT_MVA_STATES = 20_000  # population vectors of the exact recursion; past this, Bard-Schweitzer
SCHWEITZER_ITERS, SCHWEITZER_TOL = 500, 1e-10


def _classes_x(
    n: tuple[int, ...],
    think_s: float,
    visits: tuple[float, ...],
    xfer_s: float,
    resid_s: float,
    seen: list[tuple[float, float]],
) -> tuple[list[float], float, float]:
    """Per-class throughputs at population ``n`` from the link's queue and utilisation ``seen`` by an
    arriving drafter of each class; the link's own queue and utilisation at ``n``."""
    r = [v * (xfer_s + xfer_s * max(q - u, 0.0) + u * resid_s) for v, (q, u) in zip(visits, seen)]
    x = [nb / (think_s + rb) if nb else 0.0 for nb, rb in zip(n, r)]
    util = sum(xb * v * xfer_s for xb, v in zip(x, visits))
    if util > 1.0:
        x = [xb / util for xb in x]
        util = 1.0
    return x, sum(xb * rb for xb, rb in zip(x, r)), util


def pool_mva(
    pop: tuple[int, ...], think_s: float, visits: tuple[float, ...], xfer_s: float, scv_x: float
) -> list[float]:
    """Per-node drafter throughputs of the closed network (module docstring)."""
    resid = xfer_s * (1.0 + scv_x) / 2.0
    if math.prod(m + 1 for m in pop) <= EXACT_MVA_STATES:
        # exact recursion over population vectors in order of their total
        memo: dict[tuple[int, ...], tuple[float, float]] = {(0,) * len(pop): (0.0, 0.0)}
        x: list[float] = [0.0] * len(pop)
        for n in sorted(itertools.product(*(range(m + 1) for m in pop)), key=sum):
            if not sum(n):
                continue
            # an arriving drafter of class b sees the network without itself: the link at n - e_b
            seen = [memo[tuple(c - (i == b) for i, c in enumerate(n))] if n[b] else (0.0, 0.0) for b in range(len(n))]
            x, q, u = _classes_x(n, think_s, visits, xfer_s, resid, seen)
            memo[n] = (q, u)
        return x
    q = u = 0.0
    x = [0.0] * len(pop)
    total = sum(pop)
    for _ in range(SCHWEITZER_ITERS):
        # Bard-Schweitzer: the network without one drafter holds (M - 1) / M of the queue
        x, q_new, u_new = _classes_x(
            pop, think_s, visits, xfer_s, resid, [(q * (total - 1) / total, u * (total - 1) / total)] * len(pop)
        )
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
    return LinkResult(
        consumer_cap_bps=cap, consumer_s=m / cap, link_cap_bps=link_cap, crossing_share=crossing, node_share=share
    )
