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

Emulated workers follow the same loop with a drawn service time s in place of compute: they
sleep until start + s * scale - c, where c is their own per-cycle overhead (an integral
controller on cycles that neither starved nor blocked), log busy = s, and count a queue that
already held an item (resp. had room) as no wait (resp. no blocking), since the emulated
pipeline was not starved (blocked) there; at a 100x time scale the real queue overheads would
otherwise show as emulated milliseconds.

Failure handling: a worker ignores SIGINT (the main process owns shutdown), reports an
exception as an ``error`` message and exits 1; when the run is stopping, errors caused by the
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
from .loader import END, is_end

CONTROLLER_GAIN = 0.25


@dataclass(frozen=True)
class WorkerSpec:
    role: str                        # "target" or "drafter"
    index: int
    device: str                      # "cpu", "cuda:0", ...
    cfg: TrainConfig
    sync: Any = None                 # SyncPlan for drafters when M > 1 and sync is on
    profile: Any = None              # EmulationProfile in emulation


@dataclass(frozen=True)
class Channels:
    pre: list                        # one prefetch queue per target
    hs: Any                          # the hidden-state queue
    events: Any                      # worker -> main messages
    stop: Any                        # set by main: finish now
    go: Any                          # set by main when all workers are ready and the clock started
    release: Any                     # set by main when all drafters are done: targets may exit
    start_wall: Any                  # mp.Value('d'): time.monotonic() at t = 0
    targets_done: Any                # mp.Value('i'): targets that have seen their end marker


class Stopped(Exception):
    """The run is stopping; leave quietly."""


def _get(q, stop) -> Any:
    while True:
        if stop.is_set():    # checked first: a full queue must not keep a stopping worker busy
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
            os._exit(3)   # a hard death: no error message, only an exit code
        raise RuntimeError(f"injected crash (DFLASH_TRAIN_CRASH) in {role} {index} at step {step}")


def _round(x: float) -> float:
    return round(float(x), 6)


class _Pacer:
    """Emulation: turns a drawn service time into a deadline, net of the worker's own overhead."""

    def __init__(self, scale: float):
        self.scale = scale
        self.overhead_s = 0.0

    def deadline(self, start: float, service_s: float) -> float:
        return start + max(0.0, service_s * self.scale - self.overhead_s)

    def learn(self, cycle_wall: float, service_s: float) -> None:
        err = cycle_wall - service_s * self.scale
        self.overhead_s = max(0.0, self.overhead_s + CONTROLLER_GAIN * err)


def _setup(spec: WorkerSpec):
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
        return TargetCompute(spec.cfg, device)
    return DrafterCompute(spec.cfg, device)


def _ready(spec: WorkerSpec, ch: Channels, device, compute) -> RunClock:
    info = dict(compute.info())
    if device.type == "cuda":
        import torch

        info["device_name"] = torch.cuda.get_device_name(device)
        info["mem_after_build"] = int(torch.cuda.memory_allocated(device))
    ch.events.put({"kind": "ready", "role": spec.role, "index": spec.index, "pid": os.getpid(),
                   "device": spec.device, "info": info})
    while not ch.go.wait(0.1):
        if ch.stop.is_set():
            raise Stopped
    return RunClock(ch.start_wall.value, spec.cfg.time_scale if spec.profile is not None else 1.0)


def _step_event(spec, clock, t_free, item, busy_s, wait_wall, blocked_wall, loss, extra) -> dict:
    ev = {"ev": "step", "t": _round(clock.to_log(t_free - clock.start_wall)), "role": spec.role,
          "worker": spec.index, "batch": int(item["batch"]), "tokens": int(item["tokens"]),
          "seqs": int(item["seqs"]), "busy": _round(busy_s), "wait": _round(clock.to_log(wait_wall)),
          "blocked": _round(clock.to_log(blocked_wall))}
    if loss is not None:
        ev["loss"] = _round(loss)
    for k, v in extra.items():
        ev[k] = _round(v) if isinstance(v, float) else v
    return ev


def _take(in_q, ch: Channels, spec: WorkerSpec, n: int, t_free: float, emulated: bool):
    """A worker's next input: (item, when its service starts, seconds starved before it, whether
    the queue already held it). Emulated workers whose queue held an item did not starve: the get
    is this process's own overhead, so service starts when the get began."""
    nonempty = emulated and in_q.qsize() > 0
    t_a = time.monotonic()
    item = _get(in_q, ch.stop)
    t_b = time.monotonic()
    if is_end(item):
        return item, t_b, 0.0, nonempty
    _maybe_crash(spec.cfg.crash, spec.role, spec.index, n)
    start = t_a if nonempty else t_b
    return item, start, (0.0 if nonempty else t_b - t_free), nonempty


def _serve_target(spec: WorkerSpec, ch: Channels, compute, clock: RunClock) -> None:
    cfg = spec.cfg
    in_q, out_q = ch.pre[spec.index], ch.hs
    emulated = spec.profile is not None
    pacer = _Pacer(clock.scale)
    n = 0
    t_free = time.monotonic()
    while True:
        item, start, wait, nonempty = _take(in_q, ch, spec, n, t_free, emulated)
        if is_end(item):
            break
        if emulated:
            s = compute.service_s(item)
            sleep_until(pacer.deadline(start, s))
            out, extra = compute.message(item), {}
        else:
            res = compute.run(item)
            out, extra = res.out, res.extra
        t_c = time.monotonic()
        busy = s if emulated else t_c - start
        room = emulated and out_q.qsize() < cfg.hs_queue_depth
        _put(out_q, out, ch.stop)
        t_d = time.monotonic()
        blocked = 0.0 if room else t_d - t_c
        if emulated and nonempty and room and n > 0:
            pacer.learn(t_d - t_free, s)
        t_free = t_d
        ch.events.put(_step_event(spec, clock, t_free, item, busy, wait, blocked, None, extra))
        n += 1
    with ch.targets_done.get_lock():
        ch.targets_done.value += 1
        last = ch.targets_done.value == cfg.targets
    if last:   # the last target tells every drafter that no more batches come
        for _ in range(cfg.drafters):
            _put(out_q, END, ch.stop)
    ch.events.put({"kind": "done", "role": spec.role, "index": spec.index, "steps": n})
    while not ch.release.wait(0.1):
        if ch.stop.is_set():
            break


def _serve_drafter(spec: WorkerSpec, ch: Channels, compute, clock: RunClock, device) -> None:
    cfg = spec.cfg
    in_q = ch.hs
    emulated = spec.profile is not None
    pacer = _Pacer(clock.scale)
    sync = None
    if spec.sync is not None:
        import numpy as np

        from .sync import DrafterSync

        durs = np.asarray(spec.profile.sync_durs_s) if emulated else None
        sync = DrafterSync(spec.sync, device, clock, emulated_durs_s=durs,
                           emulated_bytes=spec.profile.sync_bytes if emulated else 0, seed=cfg.seed)
    params = None if emulated else compute.parameters()
    n = 0
    t_free = time.monotonic()
    synced = False
    while True:
        msg, start, wait, nonempty = _take(in_q, ch, spec, n, t_free, emulated)
        if is_end(msg):
            break
        if emulated:
            s = compute.service_s(msg)
            sleep_until(pacer.deadline(start, s))
            loss, extra = None, {}
        else:
            res = compute.run(msg)
            loss, extra = res.loss, res.extra
        t_c = time.monotonic()
        busy = s if emulated else t_c - start
        if emulated and nonempty and n > 0 and not synced:
            pacer.learn(t_c - t_free, s)
        ch.events.put(_step_event(spec, clock, t_c, msg, busy, wait, 0.0, loss, extra))
        t_free = t_c
        n += 1
        synced = False
        if sync is not None and n % cfg.sync_every == 0:
            _, ev = sync.round(True, params)
            if ev is not None:
                ch.events.put(ev)
            t_free = time.monotonic()
            synced = True
    if sync is not None:
        while True:
            finished, ev = sync.round(False, params)
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


def worker_main(spec: WorkerSpec, ch: Channels) -> None:
    """Entry point of a worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        device = _setup(spec)
        compute = _compute(spec, device)
        clock = _ready(spec, ch, device, compute)
        if spec.role == "target":
            _serve_target(spec, ch, compute, clock)
        else:
            _serve_drafter(spec, ch, compute, clock, device)
    except BaseException as e:  # noqa: BLE001  (every failure must reach the main process)
        if ch.stop.is_set() or isinstance(e, Stopped):
            _leave(ch, 0, flush_data=False)
        ch.events.put({"kind": "error", "role": spec.role, "index": spec.index,
                       "msg": f"{spec.role} {spec.index}: {type(e).__name__}: {e}",
                       "traceback": traceback.format_exc()})
        _leave(ch, 1, flush_data=False)
    _leave(ch, 0, flush_data=not ch.stop.is_set())
