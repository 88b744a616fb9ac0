"""Clocks of a run: one monotonic time base for all processes, scaled in emulation.

All processes read ``time.monotonic()`` (CLOCK_MONOTONIC, system-wide on Linux), so times taken
in different workers are comparable. The run's clock starts when the main process releases the
workers; a log time is ``(monotonic() - start) / scale``. Real runs have scale 1; an emulation
at ``--time-scale 0.01`` runs 100x faster on the wall but writes emulated seconds, so its log
compares with real logs.

Device work is asynchronous: every clock reading that closes a compute interval is preceded by
``device_sync`` (a no-op on CPU).

``sleep_until`` sleeps to within ~0.2 ms of a deadline and spins the rest, because plain
``time.sleep`` overshoots by 50-100 us, a bias that a 100x time scale would blow up to 5-10 ms
of emulated time per step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

SPIN_S = 0.0002


def device_sync(device) -> None:
    if getattr(device, "type", device) == "cuda":
        import torch

        torch.cuda.synchronize(device)


def sleep_until(deadline_wall: float) -> None:
    """Block until ``time.monotonic() >= deadline_wall``."""
    while True:
        left = deadline_wall - time.monotonic()
        if left <= 0:
            return
        if left > SPIN_S:
            time.sleep(left - SPIN_S)


@dataclass(frozen=True)
class RunClock:
    start_wall: float  # time.monotonic() at the run's t = 0
    scale: float = 1.0  # wall seconds per logged second

    def now(self) -> float:
        """Logged seconds since the run started."""
        return (time.monotonic() - self.start_wall) / self.scale

    def to_log(self, wall_seconds: float) -> float:
        """A wall-clock duration in logged seconds."""
        return wall_seconds / self.scale
