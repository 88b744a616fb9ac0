"""Worker processes: one per target and one per drafter, started with the 'spawn' context.

Timing of one step on a worker (wall clock; the device is synchronised before each reading
that closes a compute interval):

    t_free ── wait ──> input in hand ── busy ──> output ready ── blocked ──> t_free'
    wait    = time since the worker was last free until it held its next input (starved);
    busy    = compute (targets: backbone forward + export of the hidden states; drafters:
              import of the hidden states + forward/backward/optimizer step);
    blocked = time waiting for room in the output queue (targets only);
    t       = t_free', when the worker was free again; so t' = t + wait + busy + blocked.
A drafter's sync round sits between two steps and belongs to neither (it is a `sync` event).

Emulated workers follow the same loop with a drawn service time s in place of compute, on an
ideal timeline: wall-clock instants that a pipeline with free queue operations would reach.
Each worker keeps ``free``, the ideal instant it was last free; every message it passes on
carries ``ready``, the ideal instant it was produced. Then, exactly as in a discrete-event
simulation:

    start   = max(free, ready of the item taken)      (loader items are ready at once)
    done    = start + s * scale;   the worker sleeps until then (``clock.sleep_until``)
    free'   = done if q_hs held fewer than its capacity at ``done`` on the ideal timeline, else
              the ideal instant of the take that freed a slot (`HsSlots` keeps that state)
    wait    = start - free,  blocked = free' - done,  t = free' (targets) / done (drafters).
Queue operations, pickling, wake-up latency and the scheduler's delays on a loaded machine
cost wall time that the ideal instants do not contain; they only shorten the next sleep, and do
not scale up by 1/time-scale into emulated seconds (at --time-scale 0.01 a 0.5 ms delay would
otherwise log as 50 ms). Each emulated step carries ``lag``: how far (emulated
seconds) the worker ran behind its ideal ``done``. A lag that keeps growing means the machine
cannot keep up with the time scale; the logged times are still the ideal ones, but the order in
which workers meet at the queues may then differ from the ideal pipeline's.

Failure handling: a worker dies with the main process (`trainer.lifeline`), ignores SIGINT and
SIGHUP (a terminal's signals reach the whole process group; the main process owns shutdown, and
ends the run on them), reports an exception as an ``error`` message and exits 1; when the run is stopping, errors
caused by the
stop (a peer gone mid-collective) are not reported. Targets stay alive after their last batch
until the main process releases them: the drafters still map their shared buffers.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

from .clock import RunClock, sleep_until
from .config import TrainConfig
from .lifeline import bind_to_parent
from .loader import END, is_end

FLUSH_POLL_S = 0.001  # the last target's poll for the others' flushed batches (`_finish_target`)


@dataclass(frozen=True)
class WorkerSpec:
    role: str  # "target" or "drafter"
    index: int
    device: str  # "cpu", "cuda:0", ...
    cfg: TrainConfig
    sync: Any = None  # SyncPlan for drafters when M > 1 and sync is on
    profile: Any = None  # EmulationProfile in emulation
    parent_pid: int = 0  # the main process: the worker dies with it
    tp_rank: int = 0  # rank in its target engine's tensor-parallel group (0: the leader)
    tp_port: int = 0  # that group's rendezvous port (tensor parallelism only)
    node: int = 0  # emulation: the engine's node (`trainer.placement`)
    link_s_per_byte: float = 0.0  # emulation: seconds per byte across the link between nodes (0: none)
    hs_bytes_per_token: float = 0.0  # emulation: bytes a batch's token carries across the link


@dataclass(frozen=True)
class Channels:
    pre: list  # one prefetch queue per target
    hs: Any  # the hidden-state queue
    events: Any  # worker -> main messages
    stop: Any  # set by main: finish now
    go: Any  # set by main when all workers are ready and the clock started
    release: Any  # set by main when all drafters are done: targets may exit
    start_wall: Any  # mp.Value('d'): time.monotonic() at t = 0
    targets_done: Any  # mp.Value('i'): targets that have seen their end marker
    targets_flushed: Any  # mp.Value('i'): targets whose last batch is in q_hs's pipe (`_finish_target`)
    hs_slots: Any = None  # emulation: HsSlots, the ideal instants of q_hs takes
    link: Any = None  # emulation across nodes: LinkState


class HsSlots:
    """Emulation: the ideal state of q_hs, shared by its producers and consumers.

    Rings of the last ``size`` put instants (an item's ``ready``) and take instants (a drafter's
    ideal pull), with total counters. A target that has just put an item at ideal instant
    ``done`` counts what q_hs held at ``done`` on the ideal timeline: earlier puts (those older
    than the ring all are) minus earlier takes. If that is the capacity C or more, its put waits
    for the takes after ``done``, in time order, until a slot is free. Counting by ideal instants,
    not by the order in which processes reached the queue on the wall clock, keeps a worker that
    runs late on a loaded machine from seeing a queue full that the ideal pipeline had not filled.
    A drafter claims its take before the get (at its ``free``: an idle drafter pulls at once) and
    corrects the instant after it (max(free, ready)).
    """

    def __init__(self, ctx, cap: int, targets: int, drafters: int):
        self.cap = cap
        # the ring must reach back past every item still in the queue, held by a blocked target or
        # claimed by a waiting drafter
        self.size = cap + targets + drafters + 64
        self.puts = ctx.Value("q", 0)
        self.takes = ctx.Value("q", 0)
        self.put_ring = ctx.Array("d", self.size, lock=False)
        self.take_ring = ctx.Array("d", self.size, lock=False)

    def claim_take(self, free: float) -> int:
        with self.takes.get_lock():
            j = self.takes.value
            self.take_ring[j % self.size] = free
            self.takes.value = j + 1
        return j

    def took(self, j: int, at: float) -> None:
        with self.takes.get_lock():
            self.take_ring[j % self.size] = at

    def put_release(self, done: float) -> float:
        """Record a put made at ideal instant ``done``; returns the instant its producer is free."""
        n = self.size
        with self.puts.get_lock():
            k = self.puts.value
            self.put_ring[k % n] = done
            self.puts.value = k + 1
            later_puts = sum(1 for i in range(max(0, k - n + 1), k) if self.put_ring[i % n] > done)
        with self.takes.get_lock():
            t = self.takes.value
            later_takes = sorted(x for x in (self.take_ring[i % n] for i in range(max(0, t - n), t)) if x > done)
        held = (k - later_puts) - (t - len(later_takes))
        if held < self.cap:
            return done
        need = held - self.cap + 1
        if need <= len(later_takes):
            return later_takes[need - 1]
        return max([done, *later_takes])  # the freeing take is not recorded yet: the latest known


class LinkState:
    """Emulation: the one link between nodes (`trainer.placement`), as the ideal instant it is free."""

    def __init__(self, ctx):
        self.free = ctx.Value("d", 0.0)

    def transfer(self, start: float, dur: float) -> float:
        """A transfer of ``dur`` wall seconds asked for at ideal instant ``start``: its end."""
        with self.free.get_lock():
            end = max(start, self.free.value) + dur
            self.free.value = end
        return end


class Stopped(Exception):
    """The run is stopping; leave quietly."""


def _get(q, stop) -> Any:
    while True:
        if stop.is_set():  # checked first: a full queue must not keep a stopping worker busy
            raise Stopped
        try:
            return q.get(timeout=0.1)
        except queue.Empty:
            continue


def _put(q, item, stop) -> None:
    while True:
        if stop.is_set():
            raise Stopped
        try:
            q.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


def _maybe_crash(crash: str | None, role: str, index: int, step: int) -> None:
    """Test hook (DFLASH_TRAIN_CRASH=role:index:step[:exit]): fail on purpose at that step."""
    if crash is None:
        return
    parts = crash.split(":")
    if parts[0] == role and int(parts[1]) == index and int(parts[2]) == step:
        if len(parts) == 4:
            os._exit(3)  # a hard death: no error message, only an exit code
        raise RuntimeError(f"injected crash (DFLASH_TRAIN_CRASH) in {role} {index} at step {step}")


def _round(x: float) -> float:
    return round(float(x), 6)


class _NoDevice:
    """An emulated worker's device: nothing to compute on, so no torch import (seconds saved per
    worker start); sync, if any, imports torch itself."""

    type = "cpu"


def _setup(spec: WorkerSpec):
    if spec.profile is not None:
        return _NoDevice()
    import torch

    if spec.device == "cpu":
        torch.set_num_threads(1)
    device = torch.device(spec.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def _compute(spec: WorkerSpec, device):
    if spec.profile is not None:
        from .emulate import EmulatedCompute

        return EmulatedCompute(spec.profile, spec.role, spec.index, spec.cfg.seed)
    from .compute import DrafterCompute, TargetCompute

    if spec.role == "target":
        return TargetCompute(spec.cfg, device, spec.tp_rank, spec.tp_port)
    return DrafterCompute(spec.cfg, device)


def _ready(spec: WorkerSpec, ch: Channels, device, compute) -> RunClock:
    info = dict(compute.info())
    if device.type == "cuda":
        import torch

        info["device_name"] = torch.cuda.get_device_name(device)
        info["mem_after_build"] = int(torch.cuda.memory_allocated(device))
    ch.events.put(
        {
            "kind": "ready",
            "role": spec.role,
            "index": spec.index,
            "tp_rank": spec.tp_rank,
            "pid": os.getpid(),
            "device": spec.device,
            "info": info,
        }
    )
    while not ch.go.wait(0.1):
        if ch.stop.is_set():
            raise Stopped
    return RunClock(ch.start_wall.value, spec.cfg.time_scale if spec.profile is not None else 1.0)


def _step_event(spec, clock, t_free, item, busy_s, wait_wall, blocked_wall, loss, extra) -> dict:
    ev = {
        "ev": "step",
        "t": _round(clock.to_log(t_free - clock.start_wall)),
        "role": spec.role,
        "worker": spec.index,
        "batch": int(item["batch"]),
        "tokens": int(item["tokens"]),
        "seqs": int(item["seqs"]),
        "busy": _round(busy_s),
        "wait": _round(clock.to_log(wait_wall)),
        "blocked": _round(clock.to_log(blocked_wall)),
    }
    if loss is not None:
        ev["loss"] = _round(loss)
    for k, v in extra.items():
        ev[k] = _round(v) if isinstance(v, float) else v
    return ev


def _take(in_q, ch: Channels, spec: WorkerSpec, n: int):
    """A worker's next input and the wall instant it arrived (the crash hook fires here)."""
    item = _get(in_q, ch.stop)
    t = time.monotonic()
    if not is_end(item):
        _maybe_crash(spec.cfg.crash, spec.role, spec.index, n)
    return item, t


def _finish_target(spec: WorkerSpec, ch: Channels, n: int) -> None:
    """A target out of batches: the last one to finish tells every drafter that no more come.

    A put on a multiprocessing queue returns before the batch reaches the queue's pipe (a feeder
    thread writes it), so another target's end markers could overtake this target's last batch and
    a drafter would stop one batch short. So every other target first flushes its feeder (closes
    its end of q_hs, which it no longer needs, and joins the thread), and the last one waits for
    that before it puts the markers behind its own batches."""
    cfg = spec.cfg
    with ch.targets_done.get_lock():
        ch.targets_done.value += 1
        last = ch.targets_done.value == cfg.targets
    if last:
        while ch.targets_flushed.value < cfg.targets - 1 and not ch.stop.is_set():
            time.sleep(FLUSH_POLL_S)
        for _ in range(cfg.drafters):
            _put(ch.hs, END, ch.stop)
    else:
        ch.hs.close()
        ch.hs.join_thread()
        with ch.targets_flushed.get_lock():
            ch.targets_flushed.value += 1
    ch.events.put({"kind": "done", "role": spec.role, "index": spec.index, "steps": n})
    while not ch.release.wait(0.1):
        if ch.stop.is_set():
            break


def _serve_target(spec: WorkerSpec, ch: Channels, compute, clock: RunClock) -> None:
    in_q, out_q = ch.pre[spec.index], ch.hs
    n = 0
    t_free = time.monotonic()
    while True:
        item, start = _take(in_q, ch, spec, n)
        if is_end(item):
            break
        res = compute.run(item)
        t_c = time.monotonic()
        _put(out_q, res.out, ch.stop)
        t_d = time.monotonic()
        ch.events.put(_step_event(spec, clock, t_d, item, t_c - start, start - t_free, t_d - t_c, None, res.extra))
        t_free = t_d
        n += 1
    compute.close()  # a tensor-parallel leader releases its followers
    _finish_target(spec, ch, n)


def _put_ideal(q, item: dict, ch: Channels, done: float) -> float:
    """Emulation: pass ``item`` on; returns the ideal instant the producer is free again."""
    _put(q, item, ch.stop)
    return ch.hs_slots.put_release(done)


def _serve_target_emulated(spec: WorkerSpec, ch: Channels, compute, clock: RunClock) -> None:
    in_q, out_q, scale = ch.pre[spec.index], ch.hs, clock.scale
    n = 0
    free = clock.start_wall
    while True:
        item, _ = _take(in_q, ch, spec, n)
        if is_end(item):
            break
        start = free  # the loader is infinitely fast: its batches are ready at once
        s = compute.service_s(item)
        done = start + s * scale
        sleep_until(done)
        lag = time.monotonic() - done
        out = {**compute.message(item), "ready": done, "node": spec.node}
        new_free = _put_ideal(out_q, out, ch, done)
        ch.events.put(
            _step_event(spec, clock, new_free, item, s, start - free, new_free - done, None, {"lag": clock.to_log(lag)})
        )
        free = new_free
        n += 1
    _finish_target(spec, ch, n)


def _drafter_sync(spec: WorkerSpec, device):
    """The drafters' process group, joined before ``ready``: its rendezvous is start-up, not run time."""
    if spec.sync is None:
        return None
    import numpy as np

    from .sync import DrafterSync

    emulated = spec.profile is not None
    durs = np.asarray(spec.profile.sync_durs_s) if emulated else None
    return DrafterSync(
        spec.sync,
        device,
        None,
        emulated_durs_s=durs,
        emulated_bytes=spec.profile.sync_bytes if emulated else 0,
        seed=spec.cfg.seed,
    )


def _serve_drafter(spec: WorkerSpec, ch: Channels, compute, clock: RunClock, sync) -> None:
    cfg = spec.cfg
    params = compute.parameters()
    n = 0
    t_free = time.monotonic()
    while True:
        msg, start = _take(ch.hs, ch, spec, n)
        if is_end(msg):
            break
        res = compute.run(msg)
        t_c = time.monotonic()
        ch.events.put(_step_event(spec, clock, t_c, msg, t_c - start, start - t_free, 0.0, res.loss, res.extra))
        t_free = t_c
        n += 1
        if sync is not None and n % cfg.sync_every == 0:
            _, ev = sync.round(True, params)
            if ev is not None:
                ch.events.put(ev)
            t_free = time.monotonic()
    if sync is not None:
        while True:
            finished, ev = sync.round(False, params)
            if ev is not None:
                ch.events.put(ev)
            if finished:
                break
        sync.close()
    ch.events.put({"kind": "done", "role": spec.role, "index": spec.index, "steps": n})


def _serve_drafter_emulated(spec: WorkerSpec, ch: Channels, compute, clock: RunClock, sync) -> None:
    cfg, scale = spec.cfg, clock.scale
    n = 0
    free = clock.start_wall
    while True:
        j = ch.hs_slots.claim_take(free)  # a target waiting for room gets this take's slot
        msg, _ = _take(ch.hs, ch, spec, n)
        if is_end(msg):
            break
        start = max(free, msg["ready"])
        ch.hs_slots.took(j, start)
        begin = start
        if ch.link is not None and msg["node"] != spec.node:
            nbytes = int(msg["tokens"]) * spec.hs_bytes_per_token
            begin = ch.link.transfer(start, nbytes * spec.link_s_per_byte * scale)
        xfer = (begin - start) / scale
        s = compute.service_s(msg)
        done = begin + s * scale
        sleep_until(done)
        lag = time.monotonic() - done
        extra = {"lag": clock.to_log(lag)}
        if ch.link is not None:
            extra["xfer"] = xfer
        ch.events.put(_step_event(spec, clock, done, msg, xfer + s, start - free, 0.0, None, extra))
        free = done
        n += 1
        if sync is not None and n % cfg.sync_every == 0:
            _, free, ev = sync.round_emulated(True, free)
            if ev is not None:
                ch.events.put(ev)
    if sync is not None:
        while True:
            finished, free, ev = sync.round_emulated(False, free)
            if ev is not None:
                ch.events.put(ev)
            if finished:
                break
        sync.close()
    ch.events.put({"kind": "done", "role": spec.role, "index": spec.index, "steps": n})


def _leave(ch: Channels, code: int, flush_data: bool) -> None:
    """Flush what must reach other processes, then exit at once.

    ``os._exit`` skips the interpreter's teardown of torch and transformers, which takes seconds
    on a loaded machine and would delay the end of every run. Queue feeder threads are flushed
    first; undelivered batches of a stopping run are dropped, so they cannot keep a worker alive.
    """
    for q in [*ch.pre, ch.hs]:
        if flush_data:
            q.close()
            q.join_thread()
        else:
            q.cancel_join_thread()
    ch.events.close()
    ch.events.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _follow(spec: WorkerSpec, ch: Channels, device, compute) -> None:
    """A follower rank of a tensor-parallel target engine: ready, then the leader's batches until
    it says stop; it logs nothing (the leader's steps are the engine's)."""
    _ready(spec, ch, device, compute)
    compute.follow()
    compute.close()
    _leave(ch, 0, flush_data=False)


def _release_followers(compute) -> None:
    """A stopping leader sends stop to its followers (it stops between two forwards, where they
    wait in the broadcast); a failure here must not hide why the run stopped."""
    try:
        compute.close()
    except Exception:  # noqa: BLE001
        pass


def worker_main(spec: WorkerSpec, ch: Channels) -> None:
    """Entry point of a worker process."""
    bind_to_parent(spec.parent_pid or os.getppid(), spec.role, spec.index)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGHUP})  # blocked while we started
    compute = None
    try:
        device = _setup(spec)
        compute = _compute(spec, device)
        if spec.tp_rank > 0:
            _follow(spec, ch, device, compute)
        sync = _drafter_sync(spec, device) if spec.role == "drafter" else None
        clock = _ready(spec, ch, device, compute)
        emulated = spec.profile is not None
        if spec.role == "target":
            (_serve_target_emulated if emulated else _serve_target)(spec, ch, compute, clock)
        else:
            if sync is not None:
                sync.clock = clock
            (_serve_drafter_emulated if emulated else _serve_drafter)(spec, ch, compute, clock, sync)
    except BaseException as e:  # noqa: BLE001  (every failure must reach the main process)
        if ch.stop.is_set() or isinstance(e, Stopped):
            if (
                isinstance(e, Stopped)
                and spec.role == "target"
                and spec.tp_rank == 0
                and spec.cfg.target_tp > 1
                and spec.profile is None
                and compute is not None
            ):
                _release_followers(compute)
            _leave(ch, 0, flush_data=False)
        ch.events.put(
            {
                "kind": "error",
                "role": spec.role,
                "index": spec.index,
                "msg": f"{spec.role} {spec.index}: {type(e).__name__}: {e}",
                "traceback": traceback.format_exc(),
            }
        )
        _leave(ch, 1, flush_data=False)
    _leave(ch, 0, flush_data=not ch.stop.is_set())
