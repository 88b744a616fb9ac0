"""Weight synchronisation among M data-parallel drafters (periodic model averaging).

Every ``sync_every`` local steps a drafter enters a sync round; a round is, on every rank:

1. control all-reduce of [1 if still training else 0]: it doubles as the arrival barrier;
   its sum is the number of ranks still training;
2. if that sum is 0, every rank has finished: leave (no weights move);
3. else, after a device synchronisation, the timed part: all-reduce(SUM) of all parameters
   flattened into one buffer, divided by M (emulation: sleep a resampled sync duration);
4. all-reduce(MAX) of the ranks' timed durations; rank 0 reports one ``sync`` event:
   dur = that max (collective time after all ranks arrived), workers = M, bytes = bytes reduced.

Drafters pull batches from one shared queue, so they do not finish on the same local step. A
rank that has run out of batches keeps entering rounds with flag 0 until the control sum is 0,
so every collective call on one rank is matched by the same call on every other rank: no rank
waits on a collective that the others never enter.

Emulation (`round_emulated`): the ranks follow the ideal timeline of `trainer.workers`. The
timed part starts at the latest ideal ``free`` instant of all ranks (an all-reduce MAX, as the
barrier would in a pipeline with free communication), lasts the drawn duration, and ends at the
same ideal instant on every rank; the event's ``dur`` is the drawn duration itself.

Backend: NCCL when every drafter has its own GPU; gloo otherwise (CPU, or drafters sharing a
GPU, which NCCL refuses), with CUDA parameters staged through host memory.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from .clock import RunClock, device_sync, sleep_until


@dataclass(frozen=True)
class SyncPlan:
    rank: int
    world: int
    port: int
    backend: str  # "gloo" or "nccl"
    timeout_s: float = 600.0


class DrafterSync:
    def __init__(
        self,
        plan: SyncPlan,
        device: torch.device,
        clock: RunClock | None,
        emulated_durs_s: np.ndarray | None = None,
        emulated_bytes: int = 0,
        seed: int = 0,
    ):
        self.plan = plan
        self.device = device
        self.clock = clock  # set once the run's clock starts (the group is joined before)
        self.emulated_durs_s = emulated_durs_s
        self.emulated_bytes = emulated_bytes
        self.seed = seed
        self.rounds = 0
        dist.init_process_group(
            plan.backend,
            init_method=f"tcp://127.0.0.1:{plan.port}",
            rank=plan.rank,
            world_size=plan.world,
            timeout=datetime.timedelta(seconds=plan.timeout_s),
        )
        self._comm_device = device if plan.backend == "nccl" else torch.device("cpu")

    def _scalar(self, v: float) -> torch.Tensor:
        return torch.tensor(
            [v], dtype=torch.float64 if self.plan.backend == "gloo" else torch.float32, device=self._comm_device
        )

    def round(self, training: bool, params: list[torch.Tensor] | None) -> tuple[bool, dict | None]:
        """One sync round. Returns (all ranks finished, the sync event for rank 0 or None)."""
        ctrl = self._scalar(1.0 if training else 0.0)
        dist.all_reduce(ctrl, op=dist.ReduceOp.SUM)
        if float(ctrl.item()) == 0.0:
            return True, None
        self.rounds += 1
        device_sync(self.device)
        t0 = self.clock.now()
        nbytes = 0
        if self.emulated_durs_s is not None:
            rng = np.random.default_rng([self.seed, 0x5C, self.rounds])
            dur = float(self.emulated_durs_s[rng.integers(len(self.emulated_durs_s))])
            nbytes = self.emulated_bytes
            sleep_until(self.clock.start_wall + (t0 + dur) * self.clock.scale)
        else:
            flat = torch.cat([p.reshape(-1) for p in params])
            nbytes = flat.numel() * flat.element_size()
            buf = flat.to(self._comm_device)
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
            buf /= self.plan.world
            flat = buf.to(self.device)
            off = 0
            for p in params:
                n = p.numel()
                p.copy_(flat[off : off + n].view_as(p))
                off += n
            device_sync(self.device)
        dur = self._scalar(self.clock.now() - t0)
        dist.all_reduce(dur, op=dist.ReduceOp.MAX)
        if self.plan.rank != 0:
            return False, None
        return False, {
            "ev": "sync",
            "t": round(self.clock.now(), 6),
            "role": "drafter",
            "workers": self.plan.world,
            "dur": round(float(dur.item()), 6),
            "bytes": nbytes,
        }

    def round_emulated(self, training: bool, free_wall: float) -> tuple[bool, float, dict | None]:
        """One emulated round. Returns (all ranks finished, the ideal instant the round ends, the
        sync event for rank 0 or None)."""
        ctrl = self._scalar(1.0 if training else 0.0)
        dist.all_reduce(ctrl, op=dist.ReduceOp.SUM)
        if float(ctrl.item()) == 0.0:
            return True, free_wall, None
        self.rounds += 1
        arrived = self._scalar(free_wall - self.clock.start_wall)  # relative: float64 keeps microseconds
        dist.all_reduce(arrived, op=dist.ReduceOp.MAX)
        rng = np.random.default_rng([self.seed, 0x5C, self.rounds])
        dur = float(self.emulated_durs_s[rng.integers(len(self.emulated_durs_s))])
        end = self.clock.start_wall + float(arrived.item()) + dur * self.clock.scale
        sleep_until(end)
        if self.plan.rank != 0:
            return False, end, None
        return (
            False,
            end,
            {
                "ev": "sync",
                "t": round((end - self.clock.start_wall) / self.clock.scale, 6),
                "role": "drafter",
                "workers": self.plan.world,
                "dur": round(dur, 6),
                "bytes": self.emulated_bytes,
            },
        )

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
