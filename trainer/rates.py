"""The periodic ``rates`` snapshot, computed by the main process from the step events it logs.

Over the last ``window`` seconds (the rates interval, or the run's age if shorter), per role r:

    bps[r]     = completions of r in the window / window            (wall rate of the pool)
    cap_bps[r] = n_r * completions / sum of their busy seconds      (capacity: busy time only)
    tok_s      = drafter tokens in the window / window
    done       = drafter steps so far / planned batches
    eta_s      = (planned - done batches) / bps[drafter]            (null until a drafter step)

Queue depths are read at the snapshot: q.pre = one depth per target queue, q.hs one number.
A pool with no completion in the window gets bps 0 and no cap_bps entry.
"""

from __future__ import annotations

from collections import deque


class RateWindow:
    def __init__(self, roles: dict[str, int], window_s: float, planned_batches: int):
        self.roles = roles
        self.window_s = window_s
        self.planned = planned_batches
        self._steps: deque = deque()  # (t, role, busy, tokens)
        self.completed = {r: 0 for r in roles}
        self.drafter_tokens = 0

    def add(self, ev: dict) -> None:
        self._steps.append((ev["t"], ev["role"], ev["busy"], ev["tokens"]))
        self.completed[ev["role"]] = self.completed.get(ev["role"], 0) + 1
        if ev["role"] == "drafter":
            self.drafter_tokens += ev["tokens"]

    def snapshot(self, now: float, q_pre: list[int], q_hs: int) -> dict:
        window = min(self.window_s, now) if now > 0 else self.window_s
        while self._steps and self._steps[0][0] <= now - window:
            self._steps.popleft()
        count = {r: 0 for r in self.roles}
        busy = {r: 0.0 for r in self.roles}
        tokens = 0
        for t, role, b, tok in self._steps:
            if t > now:
                continue
            count[role] += 1
            busy[role] += b
            if role == "drafter":
                tokens += tok
        bps = {r: round(count[r] / window, 6) for r in self.roles}
        cap = {r: round(self.roles[r] * count[r] / busy[r], 6) for r in self.roles if count[r] and busy[r] > 0}
        done_batches = self.completed.get("drafter", 0)
        eta = (self.planned - done_batches) / bps["drafter"] if bps["drafter"] > 0 else None
        return {
            "ev": "rates",
            "t": round(now, 6),
            "window": round(window, 6),
            "bps": bps,
            "cap_bps": cap,
            "tok_s": round(tokens / window, 3),
            "q": {"pre": list(q_pre), "hs": q_hs},
            "eta_s": None if eta is None else round(eta, 3),
            "done": round(min(1.0, done_batches / self.planned), 6) if self.planned else None,
        }
