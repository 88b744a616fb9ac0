"""Tensor-parallel target engines: one target worker as a group of k processes (``--target-tp k``).

Each group is its own torch.distributed world (its own TCP rendezvous on 127.0.0.1, gloo on CPU,
NCCL on CUDA) and its own 1-D device mesh (``init_device_mesh``); no process belongs to two
groups, so groups never wait on each other. The Qwen3-shaped backbone is sharded with torch's
own tensor parallelism (``parallelize_module``), the Megatron-style plan of every decoder layer:

    self_attn.q_proj, k_proj, v_proj, mlp.gate_proj, mlp.up_proj   ColwiseParallel (output split)
    self_attn.o_proj, mlp.down_proj                                 RowwiseParallel (input split,
                                                                    output all-reduced)

so each rank holds heads/k query heads, kv_heads/k key/value heads and ffn/k of the MLP, and
every decoder layer's output (what the tap hooks capture) is the full, replicated hidden state:
two all-reduces per layer. Embedding, norms and rotary tables are replicated. The number of
heads, of key/value heads and the ffn width must be multiples of k (`trainer.config.check_divisible`).

Protocol in a group: rank 0 (the leader) is the target worker the rest of the trainer sees: it
takes batches from its prefetch queue, broadcasts each batch's ids to the other ranks
(`broadcast_batch`: a 4-integer header, then the ids), runs its share of the forward, and puts
the hidden states on q_hs. The followers run the same forward on the ids they receive and drop
the result. A header with flag 0 (`broadcast_stop`) ends the followers' loop: the leader sends it
after its last batch and when the run stops, always between two forwards, when every follower
waits in the broadcast.
"""

from __future__ import annotations

import datetime

import torch

COL_PROJ = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj")
ROW_PROJ = ("self_attn.o_proj", "mlp.down_proj")
GROUP_TIMEOUT_S = 1800.0  # a follower waits this long for the next batch before gloo/NCCL gives up


def tp_plan(layers: int) -> dict:
    """The parallelize_module plan of a Qwen3Model with ``layers`` decoder layers."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan = {}
    for i in range(layers):
        for name in COL_PROJ:
            plan[f"layers.{i}.{name}"] = ColwiseParallel()
        for name in ROW_PROJ:
            plan[f"layers.{i}.{name}"] = RowwiseParallel()
    return plan


def join_group(rank: int, size: int, port: int, device: torch.device):
    """Join this group's world and return its device mesh."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        world_size=size,
        rank=rank,
        timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S),
    )
    return init_device_mesh(device.type, (size,))


def shard_backbone(model: torch.nn.Module, mesh, layers: int) -> torch.nn.Module:
    from torch.distributed.tensor.parallel import parallelize_module

    return parallelize_module(model, mesh, tp_plan(layers))


def broadcast_batch(ids: torch.Tensor | None, batch: int, device: torch.device) -> tuple[torch.Tensor, int] | None:
    """Leader: send ``ids`` [seqs, L] (returns them); follower (``ids`` None): receive the next
    batch, or None when the leader sent stop."""
    import torch.distributed as dist

    head = torch.zeros(4, dtype=torch.long, device=device)
    if ids is not None:
        head[0], head[1], head[2], head[3] = 1, ids.shape[0], ids.shape[1], batch
    dist.broadcast(head, src=0)
    if int(head[0]) == 0:
        return None
    if ids is None:
        ids = torch.empty(int(head[1]), int(head[2]), dtype=torch.long, device=device)
    dist.broadcast(ids, src=0)
    return ids, int(head[3])


def broadcast_stop(device: torch.device) -> None:
    import torch.distributed as dist

    dist.broadcast(torch.zeros(4, dtype=torch.long, device=device), src=0)


def leave_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


__all__ = [
    "tp_plan",
    "join_group",
    "shard_backbone",
    "broadcast_batch",
    "broadcast_stop",
    "leave_group",
    "COL_PROJ",
    "ROW_PROJ",
]
