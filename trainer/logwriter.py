"""The one writer of a run's JSONL log.

Only the main process writes, one whole line per event (``json.dumps`` + newline in a single
``write``), so lines from many workers never tear or interleave mid-line. NaN and infinities,
which JSON cannot carry, become null. The file is flushed at least every ``FLUSH_EVERY_S``
seconds and on close, so a killed run leaves whole lines up to about that point.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

FLUSH_EVERY_S = 1.0


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


class LogWriter:
    def __init__(self, path: str):
        p = Path(path)
        if p.parent and not p.parent.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(p, "w", encoding="utf-8")
        self._last_flush = time.monotonic()
        self.lines = 0

    def write(self, event: dict) -> None:
        self._fh.write(json.dumps(_clean(event), separators=(",", ":"), allow_nan=False) + "\n")
        self.lines += 1
        now = time.monotonic()
        if now - self._last_flush >= FLUSH_EVERY_S:
            self._fh.flush()
            self._last_flush = now

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            self._fh.close()
