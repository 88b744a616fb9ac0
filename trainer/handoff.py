"""Hidden states from a target process to a drafter process, without pickling the data.

The target turns its tensors into a small byte string with torch's multiprocessing reductions
(``ForkingPickler``), puts the bytes on the hidden-state queue, and the drafter turns them back
into tensors that alias the same memory:

- CPU: the storage is moved into shared memory (one memcpy, ``share_memory_``) and its file
  descriptor travels (through the producer's resource-sharer socket); the drafter maps it.
- CUDA, mode "auto": a CUDA IPC handle travels; the drafter opens it (no copy on the same GPU;
  a peer copy if the drafter sits on another GPU). Torch keeps the producer's block alive until
  the consumer releases it, so a target must outlive the drafters' use of its batches (the run
  keeps targets alive until all drafters are done).
- CUDA, mode "host": a copy to a shared host buffer (D2H) on the target, and back (H2D) on the
  drafter; the fallback where CUDA IPC is unavailable.

Both sides time their part (after a device synchronisation), so the log can report the handoff
cost: ``export_s`` on the target, ``import_s`` on the drafter.
"""

from __future__ import annotations

import pickle
import time
from multiprocessing.reduction import ForkingPickler

import torch
import torch.multiprocessing  # noqa: F401  (registers the tensor reductions with ForkingPickler)

from .clock import device_sync


def export_tensors(tensors: dict[str, torch.Tensor], mode: str) -> tuple[bytes, float]:
    """(bytes to put on a queue, seconds spent); the tensors must not be modified afterwards."""
    t0 = time.perf_counter()
    out = {}
    for name, t in tensors.items():
        if t.is_cuda and mode == "host":
            host = torch.empty(t.shape, dtype=t.dtype).share_memory_()
            host.copy_(t)
            out[name] = host
        elif not t.is_cuda:
            out[name] = t.share_memory_()
        else:
            out[name] = t
    blob = bytes(ForkingPickler.dumps(out))
    if any(t.is_cuda for t in tensors.values()):
        device_sync(next(iter(tensors.values())).device)
    return blob, time.perf_counter() - t0


def import_tensors(blob: bytes, device: torch.device) -> tuple[dict[str, torch.Tensor], float]:
    """(tensors on ``device``, seconds spent); aliasing the producer's memory where possible."""
    t0 = time.perf_counter()
    obj = pickle.loads(blob)
    out = {name: (t if t.device == device else t.to(device)) for name, t in obj.items()}
    device_sync(device)
    return out, time.perf_counter() - t0
