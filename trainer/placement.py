"""Emulated nodes: which node each engine sits on, and the link the hand-offs between nodes share.

Placement (``--placement "target=0,0,1,1;drafter=1,1"``): for each role, the node index of each
of its engines, in worker order. An engine's GPUs (``gpus_per_worker``, k for a tensor-parallel
target) are all on its node, and no node holds more than ``--gpus-per-node`` GPUs. Roles left
out of the text, or no text at all, are placed by the default rule:

    engines in pipeline order (targets 0..N-1, then drafters 0..M-1) fill node 0, then node 1, ...;
    an engine that does not fit in what is left of the current node starts on the next one.

So with 8 GPUs per node, 4 TP-2 targets and 8 drafters, the targets and drafters 0-1 sit on node
0 and drafters 2-7 on node 1.

Link (``--link-bytes-s B``): one link joins the nodes and every cross-node hand-off uses it. A
batch whose target sits on another node than the drafter that takes it from q_hs crosses the
link when that drafter starts it: ``tokens * hs_bytes_per_token`` bytes at B bytes/s, one
transfer at a time in the order the drafters reach the link (first come, first served), so a
transfer that finds the link busy waits for the ones before it. The drafter's ``xfer`` is the
time from its start to the end of the transfer (waiting for the link included) and is part of
its ``busy``, as a real drafter's import is; a batch from the drafter's own node has ``xfer`` 0.
The link's capacity is therefore B / (bytes per batch) cross-node batches per second, shared by
all of them.
"""

from __future__ import annotations


class PlacementError(ValueError):
    """A placement that names a bad role, count or node, or overfills a node."""


def parse_placement(text: str) -> dict[str, list[int]]:
    """'target=0,0,1;drafter=1' -> {'target': [0, 0, 1], 'drafter': [1]}."""
    out: dict[str, list[int]] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        role, sep, nodes = part.partition("=")
        role = role.strip()
        if not sep or not role:
            raise PlacementError(f"{part!r} is not role=node,node,...")
        if role in out:
            raise PlacementError(f"role {role!r} is placed twice")
        try:
            out[role] = [int(x) for x in nodes.split(",") if x.strip()]
        except ValueError:
            raise PlacementError(f"{part!r}: nodes must be whole numbers >= 0") from None
        if any(n < 0 for n in out[role]):
            raise PlacementError(f"{part!r}: nodes must be whole numbers >= 0")
    return out


def default_placement(
    engines: dict[str, int], gpus_per_worker: dict[str, int], gpus_per_node: int
) -> dict[str, tuple[int, ...]]:
    """The default rule of the module docstring."""
    node, used = 0, 0
    out: dict[str, tuple[int, ...]] = {}
    for role, count in engines.items():
        k = gpus_per_worker.get(role, 1)
        if k > gpus_per_node:
            raise PlacementError(f"a {role} engine holds {k} GPUs, more than a node's {gpus_per_node}")
        nodes = []
        for _ in range(count):
            if used + k > gpus_per_node:
                node, used = node + 1, 0
            nodes.append(node)
            used += k
        out[role] = tuple(nodes)
    return out


def place(
    engines: dict[str, int], gpus_per_worker: dict[str, int], gpus_per_node: int, text: str | None = None
) -> dict[str, tuple[int, ...]]:
    """Node of each engine, role -> tuple in worker order; raises PlacementError."""
    given = parse_placement(text) if text else {}
    for role, nodes in given.items():
        if role not in engines:
            raise PlacementError(f"unknown role {role!r} (roles: {', '.join(engines)})")
        if len(nodes) != engines[role]:
            raise PlacementError(f"{role}: {len(nodes)} nodes given for {engines[role]} engines")
    default = default_placement(engines, gpus_per_worker, gpus_per_node)
    out = {role: tuple(given[role]) if role in given else default[role] for role in engines}
    load: dict[int, int] = {}
    for role, nodes in out.items():
        for n in nodes:
            load[n] = load.get(n, 0) + gpus_per_worker.get(role, 1)
    over = sorted(n for n, g in load.items() if g > gpus_per_node)
    if over:
        raise PlacementError(f"node {over[0]} holds {load[over[0]]} GPUs, more than --gpus-per-node {gpus_per_node}")
    return out


def nodes_used(placement: dict[str, tuple[int, ...]]) -> int:
    return 1 + max((n for nodes in placement.values() for n in nodes), default=0)


__all__ = ["PlacementError", "parse_placement", "default_placement", "place", "nodes_used"]
