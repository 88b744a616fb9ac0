"""A live one-line view of a run on the terminal, refreshed in place (carriage return).

On only when both stdout and stderr are terminals (or when forced); logs, pipes and CI see
nothing. The line shows the latest window's rates, queue depths, tokens/s, progress and ETA.
"""

from __future__ import annotations

import sys
import time

REFRESH_S = 0.5


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(s)
    if s >= 86400:
        return f"{s // 86400}d{s % 86400 // 3600:02d}h"
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s"


class Progress:
    def __init__(self, enabled: bool | None = None, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = (sys.stdout.isatty() and sys.stderr.isatty()) if enabled is None else enabled
        self._last = 0.0
        self._width = 0

    def update(self, t: float, rates: dict | None, steps_done: int, planned: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < REFRESH_S:
            return
        self._last = now
        if rates is None:
            line = f"t={t:7.1f}s  starting..."
        else:
            bps = rates["bps"]
            pre = rates["q"]["pre"]
            pre_s = ",".join(str(x) for x in pre) if len(pre) <= 8 else f"min {min(pre)} max {max(pre)}"
            line = (
                f"t={t:7.1f}s  tgt {bps.get('target', 0):.2f} b/s  dft {bps.get('drafter', 0):.2f} b/s  "
                f"{rates['tok_s'] / 1000:.1f}K tok/s  pre[{pre_s}]  hs {rates['q']['hs']}  "
                f"{steps_done}/{planned} ({100 * steps_done / max(planned, 1):.0f}%)  "
                f"ETA {_fmt_s(rates['eta_s'])}"
            )
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self._emit("\r" + line + " " * pad)

    def _emit(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError:  # the terminal went away (SIGHUP): the run goes on without the line
            self.enabled = False

    def close(self) -> None:
        if self.enabled and self._width:
            self._emit("\n")
