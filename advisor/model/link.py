"""The hidden-state link between nodes: a transfer stage for the batches that cross it.

Semantics (docs/log-schema.md, "Which batches cross, and the link"): q_hs is one queue of the
whole pipeline and a drafter takes its oldest batch, whichever target made it; a batch crosses
when its target's node a differs from the drafter's node b, and then holds the link a -> b (one
link per ordered node pair, each of bandwidth B bytes/s) for ``x = bytes / B`` seconds,
``bytes = hs_bytes_per_token x tokens``, first come first served. The drafter waits for its turn
and its transfer (both in its ``xfer`` and ``busy``).

Which target made the oldest batch: in steady state every target completes X / N batches per
second, so a batch in q_hs comes from node a with probability ``N_a / N`` (N_a targets on a),
whoever takes it. A drafter on node b therefore sends ``N_a / N`` of its batches over a -> b.

The drafters of node b and the links into b form a closed network of their own (the links into
b carry only node b's batches): M_b drafters cycle between their own compute (a delay station of
mean ``Z = s_c``, each drafter on its own GPU) and the links a -> b (first-come-first-served
stations of visit ratio ``v_a = N_a / N`` and service ``x``). Its throughput with the drafters
always fed (q_hs never empty: the drafter-bound side) is solved by mean value analysis over the
population 1..M_b (Reiser and Lavenberg 1980), with the residual of the transfer in service
taken as ``x (1 + scv_x) / 2`` rather than ``x`` (the FCFS correction for non-exponential service,
Reiser 1979; scv_x: the transfer's squared coefficient of variation, that of tokens per batch):

    R_a(n) = v_a [ x + x (Q_a(n-1) - U_a(n-1)) + U_a(n-1) x (1 + scv_x) / 2 ]
    X_b(n) = min(n / (Z + sum_a R_a(n)), 1 / (max_a v_a x)),   Q_a(n) = X_b(n) R_a(n),   U_a(n) = X_b(n) v_a x
    (the cap: no link carries more than it can; the residual correction alone overshoots it near saturation).

The pool's capacity is ``sum_b X_b(M_b)`` (capped by each link's ``1 / (v_a x)`` per node, which
MVA approaches at saturation), and the drafter's effective mean service time, the link's wait and
transfer included, is ``M / sum_b X_b(M_b)``: the chain (`advisor.model.chain`) takes it as the
consumer's rate. A link's utilisation at pipeline rate X is ``X w_b v_a x`` with ``w_b`` node b's
share of consumption (``X_b / sum X_b``); the link's capacity (the rate at which its busiest link
saturates) is ``min_{a,b} 1 / (w_b v_a x)``. Cost: O(M_b x nodes) per node and placement.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Engines of each role per node: ``producers[a]`` targets and ``consumers[a]`` drafters on node a."""

    producers: tuple[int, ...]
    consumers: tuple[int, ...]

    @property
    def nodes(self) -> int:
        return len(self.producers)

    def crossing_share(self) -> float:
        """Share of all batches that cross a node (at equal drafter speed per node)."""
        n, m = sum(self.producers), sum(self.consumers)
        if n == 0 or m == 0:
            return 0.0
        return sum(mb * (n - nb) for nb, mb in zip(self.producers, self.consumers)) / (n * m)

    def describe(self, producer: str, consumer: str) -> str:
        """``node 0: 8 targets; node 1: 4 targets + 4 drafters`` (empty nodes left out)."""
        parts = []
        for a, (n, m) in enumerate(zip(self.producers, self.consumers)):
            held = [f"{k} {role}{'s' if k != 1 else ''}" for k, role in ((n, producer), (m, consumer)) if k]
            if held:
                parts.append(f"node {a}: {' + '.join(held)}")
        return "; ".join(parts)

    def to_json(self, producer: str, consumer: str) -> list[dict[str, int]]:
        return [{producer: n, consumer: m} for n, m in zip(self.producers, self.consumers)]


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


def node_mva(m: int, think_s: float, visits: tuple[float, ...], xfer_s: float, scv_x: float) -> float:
    """Throughput (b/s) of ``m`` drafters of one node (module docstring: MVA with the FCFS residual)."""
    if m <= 0:
        return 0.0
    q = [0.0] * len(visits)
    u = [0.0] * len(visits)
    x = 0.0
    resid = xfer_s * (1.0 + scv_x) / 2.0
    for n in range(1, m + 1):
        r = [v * (xfer_s + xfer_s * max(qa - ua, 0.0) + ua * resid) for v, qa, ua in zip(visits, q, u)]
        cycle = think_s + sum(r)
        x = n / cycle if cycle > 0 else math.inf
        busiest = max(visits, default=0.0) * xfer_s
        if busiest > 0:
            x = min(x, 1.0 / busiest)   # no link past its capacity (the FCFS residual can overshoot)
        q = [x * ra for ra in r]
        u = [x * v * xfer_s for v in visits]
    return x


def link_pool(placement: Placement, consumer_s: float, xfer_s: float, scv_x: float = 0.0) -> LinkResult:
    """The drafter pool of ``placement`` with its links (module docstring). ``consumer_s``: a
    drafter's mean seconds per batch without the link; ``xfer_s``: a crossing batch's transfer."""
    n = sum(placement.producers)
    m = sum(placement.consumers)
    if n <= 0 or m <= 0 or consumer_s <= 0:
        raise ValueError("a placement needs producers, consumers and a positive service time")
    rates = []
    for b, mb in enumerate(placement.consumers):
        visits = tuple(na / n for a, na in enumerate(placement.producers) if a != b and na > 0)
        rates.append(node_mva(mb, consumer_s, visits, xfer_s, scv_x) if xfer_s > 0 else mb / consumer_s)
    cap = sum(rates)
    share = tuple(r / cap for r in rates)
    worst = max((w * na / n for b, w in enumerate(share) for a, na in enumerate(placement.producers)
                 if a != b and na > 0), default=0.0)
    link_cap = 1.0 / (worst * xfer_s) if worst * xfer_s > 0 else math.inf
    crossing = sum(w * (n - nb) / n for w, nb in zip(share, placement.producers))
    return LinkResult(consumer_cap_bps=cap, consumer_s=m / cap, link_cap_bps=link_cap, crossing_share=crossing,
                      node_share=share)
