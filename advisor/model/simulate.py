"""Exact discrete-event simulation of the loader -> targets -> drafters pipeline::

    loader (1 server) --pre_j (cap pre_cap, one per target)--> target j (j < N)
        --q_hs (one shared FIFO, cap hs_cap)--> drafters (M servers, optional weight sync)

Every batch has its own service time at every stage, drawn by the caller, so a batch keeps its
identity through the line. The rules are the real trainer's:

* Loader: one server; hands batch k to the prefetch queue holding the fewest items (ties: lowest
  target); BLOCKED holding it while every queue holds pre_cap. loader_s may be 0.
* Target j serves its own queue FIFO; one that finishes while q_hs holds hs_cap keeps the output,
  BLOCKED until a drafter pulls (released in blocking order). q_hs counts waiting items only, so
  y = |q_hs| + busy drafters + blocked targets is `advisor.model.chain`'s birth-death state.
* Drafters pull FIFO from q_hs, the one idle longest first (as processes waiting on one queue are
  served; lowest index first deals a synced round to a few ranks and blocks the targets: a real
  q_hs-2 log read 12% low, BENCHMARKS.md 19.23). With sync_every = k > 0 and M > 1,
  after each rank's k-th step it waits at a barrier; when the last arrives all ranks are busy for
  one all-reduce of sync_s[r] seconds (round r), pulling nothing meanwhile.
* Nodes (``link_s``, ``target_node``, ``drafter_node``): a batch whose target's node differs from
  its drafter's holds the one shared link for ``link_s[b]`` seconds when the drafter starts it,
  FCFS, and the drafter computes after (docs/log-schema.md).

Implementation: one event heap of (time, kind, worker); everything that follows a completion at
the same instant is done at once, so the heap holds at most N + M + 2 entries.

Steady state: the window runs from the warmup-th drafter completion t_a to the loader's last
departure t_b (before it the line cannot know the input is finite); bps = drafter completions in
(t_a, t_b] / (t_b - t_a). Shares per worker are exact interval overlaps with the window (busy,
blocked, sync = barrier plus all-reduce, starved = the rest); q_hs depth is the exact
time-weighted distribution over the window.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

__all__ = ["RoleShares", "SimTrace", "SimResult", "simulate", "simulated_bps"]

HEAP_QUEUES = 128  # past this many targets the loader finds the shortest prefetch queue by a heap


@dataclass(frozen=True)
class RoleShares:
    """Time shares of each worker of one role over the steady-state window (arrays of length n_workers)."""

    role: str
    busy: np.ndarray
    blocked: np.ndarray
    starved: np.ndarray
    sync: np.ndarray


@dataclass(frozen=True)
class SimTrace:
    """Per-batch times of one run by batch id (the loader's order). `drafter_sync_round`: the round
    whose barrier the step sent its rank to (-1: none; past `sync_start_s`: still open at the end)."""

    tokens: np.ndarray
    loader_start_s: np.ndarray
    loader_finish_s: np.ndarray
    loader_departure_s: np.ndarray
    loader_queue: np.ndarray
    target_start_s: np.ndarray
    target_finish_s: np.ndarray
    target_departure_s: np.ndarray
    target_worker: np.ndarray
    drafter_start_s: np.ndarray
    drafter_finish_s: np.ndarray
    drafter_worker: np.ndarray
    drafter_sync_round: np.ndarray
    sync_start_s: np.ndarray
    sync_end_s: np.ndarray


@dataclass(frozen=True)
class SimResult:
    n_target: int
    n_drafter: int
    n_batches: int
    t_from_s: float
    t_to_s: float
    bps: float
    tok_s: float
    roles: dict  # "loader" | "target" | "drafter" -> RoleShares
    hs_depth_mean: float
    hs_depth_share: np.ndarray  # time share of depth 0..hs_cap
    pre_depth_mean: np.ndarray  # time-weighted mean depth per target prefetch queue
    n_syncs: int
    trace: SimTrace | None

    @property
    def window_s(self) -> float:
        return self.t_to_s - self.t_from_s


def _as_times(name: str, x, n: int | None) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim == 0:
        if n is None:
            raise ValueError(f"{name}: a scalar needs the batch count from another array")
        a = np.full(n, float(a))
    if a.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array of seconds per batch, got shape {a.shape}")
    if n is not None and a.shape[0] != n:
        raise ValueError(f"{name}: has {a.shape[0]} entries, expected {n} (one per batch)")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"{name}: service times must be finite and >= 0")
    return a


@dataclass(frozen=True, kw_only=True, eq=False)  # arrays: compared by identity
class SimInput:
    """One split's run to simulate (module docstring): every batch's service times and the
    pipeline's shape. Checked when it is simulated; a bad field is a ``ValueError`` naming it."""

    target_s: Any  # seconds of target service per batch (length n: the batches)
    drafter_s: Any  # seconds of drafter service per batch (length n)
    n_target: int  # target workers N
    n_drafter: int  # drafter workers M
    hs_cap: int  # q_hs depth, batches
    pre_cap: int = 50  # each target's prefetch queue depth, batches
    loader_s: Any = 0.0  # loader seconds, a scalar or per batch (0: an infinitely fast loader)
    tokens: Any = None  # per-batch token counts (tok_s and the trace only); None: zeros
    sync_every: int = 0  # drafter steps per weight sync (0: none)
    sync_s: Any = 0.0  # all-reduce seconds, a scalar or one per sync round (used cyclically)
    warmup_batches: int | None = None  # drafter completions dropped before the window; None: n // 10
    link_s: Any = None  # per-batch transfer seconds where a batch crosses nodes; None: one node
    target_node: Any = None  # each target's node (with link_s)
    drafter_node: Any = None  # each drafter's node (with link_s)


def simulate(*, keep_trace: bool = False, **run: Any) -> SimResult:
    """Simulate one split exactly (`SimInput`'s fields as keywords); see the module docstring for the rules."""
    return _summarise(*_events(SimInput(**run)), keep_trace)


_INT_TRACE = ("loader_queue", "target_worker", "drafter_worker", "drafter_sync_round")


def _events(run: SimInput, *, window_only: bool = False) -> tuple[SimInput, SimTrace]:
    """The inputs checked (`SimInput`'s fields: returned with the counts as integers and the
    warm-up resolved) and the event loop run: its trace as Python lists, which `_summarise` turns
    into a result and `simulated_bps` into a rate alone. ``window_only``: stop
    at the first event past the steady window's end (the last loader departure): the queues'
    drain after it (N pre_cap batches and more at a large G, a quarter of the run) changes no
    completion inside the window; a batch not completed by then has completion time inf."""
    ts_a = _as_times("target_s", run.target_s, None)
    n = int(ts_a.shape[0])
    ds_a = _as_times("drafter_s", run.drafter_s, n)
    ls_a = _as_times("loader_s", run.loader_s, n)
    tok_a = np.zeros(n) if run.tokens is None else np.asarray(run.tokens, dtype=float)
    if tok_a.shape != (n,):
        raise ValueError(f"tokens: expected {n} per-batch counts, got shape {tok_a.shape}")
    sync_a = np.atleast_1d(np.asarray(run.sync_s, dtype=float))
    if sync_a.ndim != 1 or sync_a.size == 0 or np.any(sync_a < 0) or not np.all(np.isfinite(sync_a)):
        raise ValueError("sync_s: expected seconds >= 0, a scalar or a non-empty 1-D array")
    for name, lo in (("n_target", 1), ("n_drafter", 1), ("hs_cap", 0), ("pre_cap", 1), ("sync_every", 0)):
        v = getattr(run, name)
        if int(v) != v or v < lo:
            raise ValueError(f"{name}: expected an integer >= {lo}, got {v!r}")
    N, M, hs_cap, pre_cap = int(run.n_target), int(run.n_drafter), int(run.hs_cap), int(run.pre_cap)
    k_sync = int(run.sync_every) if M > 1 else 0  # a single rank has nobody to sync with
    warmup_batches = n // 10 if run.warmup_batches is None else run.warmup_batches
    if not 0 <= warmup_batches < n:
        raise ValueError(f"warmup_batches: expected 0 <= warmup_batches < {n}, got {warmup_batches}")

    ts = ts_a.tolist()
    ds = ds_a.tolist()
    linked = run.link_s is not None
    xs = _as_times("link_s", run.link_s, n).tolist() if linked else []
    tnode = list(run.target_node) if linked else []
    dnode = list(run.drafter_node) if linked else []
    if linked and (len(tnode) != N or len(dnode) != M):
        raise ValueError("target_node, drafter_node: one node per worker")
    link_free = [0.0]

    def begin(b: int, d: int, t: float) -> float:
        """When drafter d computes batch b that it took at t: after the link where b crosses
        (called only with a link)."""
        if tnode[W1[b]] == dnode[d]:
            return t
        start = link_free[0] if link_free[0] > t else t
        link_free[0] = start + xs[b]
        return link_free[0]

    ls = ls_a.tolist()
    sync_list = sync_a.tolist()
    n_sync_draws = len(sync_list)

    # per batch, named as `SimTrace` (the record below): times, then workers and queues
    S0, C0, D0, S1, C1, D1, S2 = ([0.0] * n for _ in range(7))
    C2 = [math.inf] * n  # (every batch completes, unless the run stops at the window's end)
    Q0, W1, W2 = ([0] * n for _ in range(3))
    R2 = [-1] * n
    sync_start: list[float] = []
    sync_end: list[float] = []

    heap: list = []
    push = heapq.heappush
    pop = heapq.heappop

    pre = [deque() for _ in range(N)]
    pre_len = [0] * N
    tgt_idle = [True] * N
    tgt_batch = [-1] * N
    hs: deque = deque()
    blocked: deque = deque()  # target indices holding output, in blocking order
    d_idle = deque(range(M))  # idle drafters, the longest idle first
    dr_batch = [-1] * M
    d_steps = [0] * M
    # Mutable loader/barrier state lives in one list so the nested helpers can update it
    # without `nonlocal` lookups: [next batch to start, batch held by the blocked loader or -1,
    # ranks at the barrier, sync rounds started, prefetch queues that are full].
    st = [0, -1, 0, 0, 0]
    # with window_only, the time the last batch left the loader (the window's end) is noted in
    # stop: the loop ends at the first event after it
    last = n - 1 if window_only else -1
    stop = [math.inf]

    # (length, target) of every prefetch queue, lazily: an entry whose length is no longer the
    # queue's is dropped when it comes to the top. The top is then min(pre_len) at its lowest
    # index, the loader's choice, in O(log N) instead of a scan of N queues per batch.
    # (below HEAP_QUEUES targets the scan is faster, and the choice is the same)
    big = N > HEAP_QUEUES
    shortest = [(0, j) for j in range(N)] if big else []

    def loader_put(b: int, t: float) -> bool:
        if st[4] == N:  # every prefetch queue is full: the loader blocks
            return False
        if big:
            m, j = shortest[0]
            while pre_len[j] != m:
                pop(shortest)
                m, j = shortest[0]
        else:
            m = min(pre_len)
            j = pre_len.index(m)
        D0[b] = t
        if b == last:
            stop[0] = t
        Q0[b] = j
        if tgt_idle[j]:
            tgt_idle[j] = False
            S1[b] = t
            W1[b] = j
            tgt_batch[j] = b
            push(heap, (t + ts[b], 1, j))
        else:
            pre[j].append(b)
            pre_len[j] = m + 1
            if big:
                push(shortest, (m + 1, j))
            if m + 1 == pre_cap:
                st[4] += 1
        return True

    def loader_run(t: float) -> None:
        while st[0] < n:
            b = st[0]
            st[0] = b + 1
            S0[b] = t
            dt = ls[b]
            if dt > 0.0:
                push(heap, (t + dt, 0, b))
                return
            C0[b] = t
            if not loader_put(b, t):
                st[1] = b
                return

    def tgt_next(j: int, t: float) -> None:
        if pre_len[j]:
            b = pre[j].popleft()
            S1[b] = t
            W1[b] = j
            tgt_batch[j] = b
            push(heap, (t + ts[b], 1, j))
            h = st[1]
            if h >= 0:
                # the loader was blocked, so every queue was full: only queue j has room now, and
                # it is full again at once (its heap entry (pre_cap, j) stays the valid one)
                st[1] = -1
                D0[h] = t
                if h == last:
                    stop[0] = t
                Q0[h] = j
                pre[j].append(h)
                loader_run(t)
                return
            if pre_len[j] == pre_cap:
                st[4] -= 1
            pre_len[j] -= 1
            if big:
                push(shortest, (pre_len[j], j))
        else:
            tgt_idle[j] = True

    def drafter_free(d: int, t: float) -> None:
        if hs:
            b = hs.popleft()
            if blocked:
                j = blocked.popleft()
                bb = tgt_batch[j]
                D1[bb] = t
                hs.append(bb)
                tgt_next(j, t)
        elif blocked:  # only with hs_cap == 0: hand over directly
            j = blocked.popleft()
            b = tgt_batch[j]
            D1[b] = t
            tgt_next(j, t)
        else:
            d_idle.append(d)
            return
        S2[b] = t
        W2[b] = d
        dr_batch[d] = b
        push(heap, ((begin(b, d, t) if linked else t) + ds[b], 2, d))

    loader_run(0.0)
    while heap:
        t, kind, w = pop(heap)
        if t > stop[0]:
            break
        if kind == 2:
            b = dr_batch[w]
            C2[b] = t
            if k_sync:
                s = d_steps[w] + 1
                if s == k_sync:
                    d_steps[w] = 0
                    R2[b] = st[3]
                    st[2] += 1
                    if st[2] == M:
                        st[2] = 0
                        dur = sync_list[st[3] % n_sync_draws]
                        st[3] += 1
                        sync_start.append(t)
                        sync_end.append(t + dur)
                        push(heap, (t + dur, 3, 0))
                    continue
                d_steps[w] = s
            drafter_free(w, t)
        elif kind == 1:
            b = tgt_batch[w]
            C1[b] = t
            if d_idle or len(hs) < hs_cap:
                D1[b] = t
                hs.append(b)
                if d_idle:  # (then q_hs was empty: the idle drafter takes b at once)
                    drafter_free(d_idle.popleft(), t)
                tgt_next(w, t)
            else:
                blocked.append(w)
        elif kind == 0:
            C0[w] = t
            if loader_put(w, t):
                loader_run(t)
            else:
                st[1] = w
        else:
            for d in range(M):
                drafter_free(d, t)

    # the record, named as `SimTrace`: S start, C completion, D departure; 0 loader, 1 target,
    # 2 drafter; Q0 the prefetch queue, W the worker, R2 the sync round
    raw = SimTrace(tok_a, S0, C0, D0, Q0, S1, C1, D1, W1, S2, C2, W2, R2, sync_start, sync_end)
    return replace(run, n_target=N, n_drafter=M, hs_cap=hs_cap, warmup_batches=warmup_batches), raw


def _overlap_by_worker(start, end, worker, n_workers: int, t_a: float, t_b: float) -> np.ndarray:
    dur = np.clip(end, t_a, t_b) - np.clip(start, t_a, t_b)
    return np.bincount(worker, weights=dur, minlength=n_workers)[:n_workers]


def _depth_profile(t_in, t_out, t_a: float, t_b: float, cap: int | None):
    """Exact time-weighted depth of a queue with entries at t_in and removals at t_out over [t_a, t_b]."""
    times = np.concatenate([t_in, t_out])
    signs = np.concatenate([np.ones(t_in.shape[0], dtype=np.int64), -np.ones(t_out.shape[0], dtype=np.int64)])
    # At equal times entries sort first: a pull and the deposit it lets in share an instant,
    # and the momentary excess has zero duration.
    order = np.lexsort((-signs, times))
    times = times[order]
    depth = np.cumsum(signs[order])
    seg_end = np.append(times[1:], t_b)
    w = np.clip(seg_end, t_a, t_b) - np.clip(times, t_a, t_b)
    span = t_b - t_a
    mean = float(np.dot(depth, w) / span)
    if cap is None:
        return mean, None
    hist = np.bincount(np.maximum(depth, 0), weights=w, minlength=cap + 1)
    if hist[cap + 1 :].sum() > 1e-9 * span:
        raise AssertionError("q_hs depth exceeded its capacity for a non-zero time")
    return mean, hist[: cap + 1] / span


def _window(C2: np.ndarray, warmup: int, last_departure_s: float) -> tuple[float, float, np.ndarray, float]:
    """The steady window (module docstring): (t_a, t_b, which drafter completions fall in it, the
    rate over it)."""
    t_a = float(np.partition(C2, warmup)[warmup])  # the warmup-th completion, as a sort gives it
    t_b = float(last_departure_s)
    inside = (C2 > t_a) & (C2 <= t_b)
    in_window = int(np.count_nonzero(inside))
    if t_b <= t_a or in_window < 2:
        raise ValueError(
            f"warmup_batches: the steady window is empty ({in_window} completions between the "
            f"warm-up end {t_a:.3f} s and the last loader departure {t_b:.3f} s); simulate more "
            "batches than are in flight (about N * pre_cap + hs_cap + N + M) plus the warm-up"
        )
    return t_a, t_b, inside, in_window / (t_b - t_a)


def _summarise(run: SimInput, raw: SimTrace, keep_trace: bool) -> SimResult:
    N, M, hs_cap, warmup = run.n_target, run.n_drafter, run.hs_cap, run.warmup_batches
    tr = SimTrace(
        **{
            f.name: np.array(getattr(raw, f.name), dtype=np.int64 if f.name in _INT_TRACE else float)
            for f in fields(SimTrace)
        }
    )
    tok_a, S0, C0, D0, Q0, S1, C1, D1, W1, S2, C2, W2, R2, ss, se = (getattr(tr, f.name) for f in fields(SimTrace))

    n = tok_a.shape[0]
    t_a, t_b, inside, bps = _window(C2, warmup, D0[-1])
    span = t_b - t_a
    tok_s = float(tok_a[inside].sum() / span)

    def feeding(role: str, start, finish, departure, worker, k: int) -> RoleShares:
        """The shares of a role that holds its output until it departs (the loader, the targets)."""
        busy = _overlap_by_worker(start, finish, worker, k, t_a, t_b) / span
        blk = _overlap_by_worker(finish, departure, worker, k, t_a, t_b) / span
        return RoleShares(role, busy, blk, np.clip(1 - busy - blk, 0, 1), np.zeros(k))

    loader = feeding("loader", S0, C0, D0, np.zeros(n, dtype=np.int64), 1)
    target = feeding("target", S1, C1, D1, W1, N)

    d_busy = _overlap_by_worker(S2, C2, W2, M, t_a, t_b) / span
    at_barrier = np.flatnonzero(R2 >= 0)  # (none without sync rounds)
    rounds = R2[at_barrier]
    closed = rounds < ss.size
    idx = at_barrier[closed]
    # barrier wait and all-reduce: from the rank's k-th completion to the round's end
    d_sync = _overlap_by_worker(C2[idx], se[rounds[closed]], W2[idx], M, t_a, t_b) / span
    drafter = RoleShares("drafter", d_busy, np.zeros(M), np.clip(1 - d_busy - d_sync, 0, 1), d_sync)

    hs_mean, hs_share = _depth_profile(D1, S2, t_a, t_b, hs_cap)
    # each prefetch queue's entries and removals in batch order, as D0[Q0 == j] and S1[W1 == j]
    # give them, grouped by one stable sort each (not a mask of all n batches per queue)
    ins = np.split(D0[np.argsort(Q0, kind="stable")], np.cumsum(np.bincount(Q0, minlength=N))[:-1])
    outs = np.split(S1[np.argsort(W1, kind="stable")], np.cumsum(np.bincount(W1, minlength=N))[:-1])
    pre_mean = np.array([_depth_profile(ins[j], outs[j], t_a, t_b, None)[0] for j in range(N)])

    return SimResult(
        n_target=N,
        n_drafter=M,
        n_batches=n,
        t_from_s=t_a,
        t_to_s=t_b,
        bps=float(bps),
        tok_s=tok_s,
        roles={"loader": loader, "target": target, "drafter": drafter},
        hs_depth_mean=hs_mean,
        hs_depth_share=hs_share,
        pre_depth_mean=pre_mean,
        n_syncs=int(ss.size),
        trace=tr if keep_trace else None,
    )


def simulated_bps(kw: dict) -> float:
    """``simulate(**kw).bps``, the same number, without the shares and depth profiles that
    `simulate` also derives (BENCHMARKS.md, section 15.ix).
    """
    run, raw = _events(SimInput(**{k: v for k, v in kw.items() if k != "keep_trace"}), window_only=True)
    return float(_window(np.array(raw.drafter_finish_s), run.warmup_batches, raw.loader_departure_s[-1])[3])
