"""The loader: hands batches to the targets' prefetch queues (one bounded queue per target).

Placement rule (house decision): each batch goes to the prefetch queue holding the fewest
items, ties to the lowest target index; the loader blocks only when every queue is full, and
then polls every 0.5 ms for the first free slot. Since the loader is the only producer of these
queues, a queue seen below capacity accepts the put at once.

It runs as a thread of the main process: making a synthetic batch costs ~1 ms, far below a
target's step, and a thread needs no extra process start. At the end it puts one end marker into
every queue (each target must see its own), then stops.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable

END = {"kind": "end"}
POLL_S = 0.0005


def is_end(item: dict) -> bool:
    return item.get("kind") == "end"


class Loader(threading.Thread):
    def __init__(
        self, batches: Iterable, make: Callable[[object], dict], queues: list, cap: int, stop: threading.Event | object
    ):
        super().__init__(name="loader", daemon=True)
        self.batches = batches
        self.make = make
        self.queues = queues
        self.cap = cap
        self.stop = stop
        self.produced = 0
        self.error: BaseException | None = None

    def _place(self, item: dict) -> bool:
        while not self.stop.is_set():
            sizes = [q.qsize() for q in self.queues]
            i = min(range(len(sizes)), key=lambda k: (sizes[k], k))
            if sizes[i] < self.cap:
                self.queues[i].put(item)
                return True
            time.sleep(POLL_S)
        return False

    def _end(self, q) -> None:
        while not self.stop.is_set():
            try:
                q.put(END, timeout=0.1)
                return
            except queue.Full:
                continue

    def run(self) -> None:
        try:
            for b in self.batches:
                if not self._place(self.make(b)):
                    return
                self.produced += 1
            for q in self.queues:
                self._end(q)
        except BaseException as e:  # reported by the main loop as the run's error
            self.error = e
