"""One run of the pipeline: start the workers, feed them, log everything, stop cleanly.

    loader thread --pre[i] (one per target, cap --pre-queue-depth)--> N target engines
        --hs (shared, cap --hs-queue-depth)--> M drafter processes (sync every --sync-every)
    every worker --events--> main thread --> the log (the only writer) and the progress line

A target engine is one process, or with --target-tp k a tensor-parallel group of k processes
(`trainer.tp`): its rank 0 is the worker above (queues, events, steps); ranks 1..k-1 only compute
with it. Every process says ``ready``; the header counts engines in ``roles`` and processes (GPUs)
in ``gpus``, with ``gpus_per_worker``. An emulated run starts one process per engine and may sit
on several emulated nodes with a link between them (`trainer.placement`).

Phases:
1. plan the batches (or draw them from the emulation profile) and start the workers;
2. wait until every worker has built its model and said ``ready`` (start-up is not logged as
   steps), then start the clock, write the ``run`` header at t = 0 and release the workers;
3. relay worker events to the log, write a ``rates`` snapshot every --rates-every seconds, watch
   the workers;
4. end, with one of three reasons:
   - done: all drafters finished the planned batches (the loader's end markers went through);
   - interrupted: SIGINT, SIGTERM or SIGHUP (a closed terminal) reached the main process (exit
     code 130), or the log's clock reached --time-limit (exit code 0: the run lasted what was
     asked; the end's ``msg`` says which);
   - error: a worker reported an exception, died, the loader failed, or the log could not be
     written (exit code 1).
   On interrupt/error the main process sets ``stop``; workers leave at their next queue
   operation; any still alive after --stop-grace seconds is terminated, then killed. The last
   line is the ``end`` event (when the disk still takes it, see `trainer.logwriter`); the main
   process never waits on a worker without a timeout.

Before any worker starts, the source log of an emulation is read (`SourceError`, one line, on a
log the advisor cannot use) and the output path is checked and opened
(`trainer.logwriter.open_log`): a bad path costs no worker start-up. Workers die with the main
process even when it is killed outright (`trainer.lifeline`).

Who failed: a worker that dies (killed, or exits without a word) makes its peers fail too, e.g.
a drafter that maps a dead target's shared memory gets ConnectionResetError. Such a secondary
error would hide the cause, so on any error the main process looks for a worker that died
without reporting (waiting up to BLAME_WAIT_S for its exit to show) and names it first, with
its exit code or signal.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import socket
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from .config import ConfigError, TrainConfig
from .logwriter import LogWriter
from .progress import Progress
from .rates import RateWindow

EXIT_DONE, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130
BLAME_WAIT_S = 1.0
# the loader's last put, and the gap after which a drained prefetch queue counts as empty
RETIRE_WAIT_S, RETIRE_POLL_S = 2.0, 0.05
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# a terminal sends these to its whole process group; children start with them blocked (the mask
# is inherited through fork and exec) so that only the main process acts on them
GROUP_SIGNALS = {signal.SIGINT, signal.SIGHUP}


class _GroupSignalsBlocked:
    """Block GROUP_SIGNALS while children start: workers then ignore them (`trainer.workers`), and
    multiprocessing's resource tracker, which ignores SIGINT but not SIGHUP, never sees them (a
    SIGHUP would kill it, and its relaunch spews tracebacks). Pending signals reach the main
    process when the block ends."""

    def __enter__(self):
        self._old = signal.pthread_sigmask(signal.SIG_BLOCK, GROUP_SIGNALS)
        return self

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_SETMASK, self._old)


class SourceError(Exception):
    """The source log of --emulate cannot be used; ``str()`` is one line naming the file."""


@dataclass(frozen=True)
class RunResult:
    reason: str  # done | interrupted | error
    msg: str | None
    exit_code: int
    log_path: str
    drafter_steps: int
    lines: int
    timed_out: bool = False  # ended by --time-limit (reason interrupted, exit code 0)
    seconds: float | None = None  # the log's last t: seconds from the header to the end (emulated seconds in emulation)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_slots(cfg: TrainConfig) -> list[tuple[str, int, int]]:
    """(role, engine, tp rank) of every worker process, targets first (rank by rank), then drafters."""
    k = 1 if cfg.emulated else cfg.target_tp
    return [("target", i, r) for i in range(cfg.targets) for r in range(k)] + [
        ("drafter", i, 0) for i in range(cfg.drafters)
    ]


def assign_devices(cfg: TrainConfig) -> tuple[list[str], int, list[str]]:
    """Device per worker process (in `worker_slots` order), GPUs used, and warnings."""
    if cfg.device == "cpu" or cfg.emulated:
        return ["cpu"] * cfg.processes, 0, []
    import torch

    n = torch.cuda.device_count()
    if n == 0:
        raise ConfigError("device", "cuda was asked for but no CUDA GPU is visible")
    if cfg.target_tp > n:
        raise ConfigError(
            "target_tp",
            f"a tensor-parallel engine needs {cfg.target_tp} distinct GPUs (NCCL "
            f"refuses two ranks of a group on one GPU); {n} visible",
        )
    devices = [f"cuda:{i % n}" for i in range(cfg.processes)]
    notes = []
    if cfg.processes > n:
        notes.append(f"{cfg.processes} worker processes share {n} GPU(s): timings include contention between them")
    return devices, min(n, cfg.processes), notes


def _run_cores(infos: Iterable[dict]) -> int:
    """CPU cores the run's processes may use: the union of the main process's affinity and every
    worker process's, each rank of a tensor-parallel engine included (a harness that pins the main
    process to one core and each process to its own leaves each one core, the run G + 1)."""
    cores = set(os.sched_getaffinity(0))
    for info in infos:
        try:
            cores |= os.sched_getaffinity(info["pid"]) if "pid" in info else set()
        except OSError:  # the worker has gone
            pass
    return len(cores)


def _hardware(cfg: TrainConfig, infos: dict, n_gpus: int, profile) -> str:
    if cfg.emulated:
        return f"emulated from {os.path.basename(profile.source)} ({profile.header.get('hardware') or 'unknown'})"
    if cfg.device == "cpu":
        return f"{os.cpu_count()}-core CPU, {cfg.processes} worker processes of 1 torch thread"
    names = sorted({i.get("device_name", "GPU") for i in infos.values()})
    shared = f", shared by {cfg.processes} workers" if cfg.processes > n_gpus else ""
    return f"{n_gpus}x {'/'.join(names)}{shared}"


def _header(cfg: TrainConfig, infos: dict, n_gpus: int, profile, notes: list[str], followers: dict) -> dict:
    if profile is not None:
        ph = profile.header
        samples, epochs, budget = ph.get("samples"), ph.get("epochs"), ph.get("token_budget")
        tmodel, dmodel, hs_bpt = ph.get("target_model"), ph.get("drafter_model"), ph.get("hs_bytes_per_token")
    else:
        samples, epochs, budget = cfg.samples, cfg.epochs, cfg.token_budget
        tmodel, dmodel = cfg.preset.target_label, cfg.preset.drafter_label
        hs_bpt = next((i["hs_bytes_per_token"] for i in infos.values() if "hs_bytes_per_token" in i), None)
    h = {
        "ev": "run",
        "v": 1,
        "t": 0.0,
        "run": cfg.name,
        "gpus": cfg.gpus,
        "roles": cfg.engines,
        "queues": [
            {"name": "pre", "feeds": "target", "cap": cfg.pre_queue_depth, "per_worker": True},
            {"name": "hs", "feeds": "drafter", "cap": cfg.hs_queue_depth},
        ],
        "token_budget": budget,
        "samples": samples,
        "epochs": epochs,
        "hardware": _hardware(cfg, infos, n_gpus, profile),
        "target_model": tmodel,
        "drafter_model": dmodel,
        "sync_every": cfg.sync_every if cfg.drafters > 1 else 0,
        "hs_bytes_per_token": hs_bpt,
        "mode": "emulate" if cfg.emulated else "real",
        "seed": cfg.seed,
    }
    h.update(_device_fields(cfg, n_gpus, profile))
    if cfg.device == "cpu" and not cfg.emulated and hasattr(os, "sched_getaffinity"):
        # every process's cores, each tensor-parallel rank's too; fewer than the workers: the advisor widens
        h["cores"] = _run_cores([*infos.values(), *followers.values()])
    if cfg.target_tp > 1:
        h["gpus_per_worker"] = {"target": cfg.target_tp}
    if cfg.probe is not None:
        h["probe"] = cfg.probe.as_header()
    if profile is not None:
        h["source"] = profile.source
        h["time_scale"] = cfg.time_scale
    h.update(_node_fields(cfg))
    for role in ("target", "drafter"):
        p = [i["params"] for k, i in infos.items() if k[0] == role and "params" in i]
        if p:
            h[f"{role}_params"] = p[0]
    if notes:
        h["notes"] = notes
    h["worker_info"] = [
        {"role": k[0], "worker": k[1], **{n: v for n, v in i.items() if n != "pid"}} for k, i in sorted(infos.items())
    ]
    return h


def _device_fields(cfg: TrainConfig, n_gpus: int, profile) -> dict:
    """Where the workers computed (docs/log-schema.md): this run's device and GPUs; an emulation's
    workers stand in for its source's, so it writes the source's device (none where the source says
    none), not the host's CPU, and no physical GPUs."""
    if profile is None:
        return {"device": cfg.device, "physical_gpus": n_gpus}
    device = profile.header.get("device")
    return {"device": device} if device is not None else {}


def _node_fields(cfg: TrainConfig) -> dict:
    """Header fields of emulated nodes: gpus_per_node, placement, link_bytes_s (`trainer.placement`)."""
    if cfg.gpus_per_node is None:
        return {}
    from .placement import place

    out = {
        "gpus_per_node": cfg.gpus_per_node,
        "placement": {
            r: list(v) for r, v in place(cfg.engines, cfg.gpus_per_worker, cfg.gpus_per_node, cfg.placement).items()
        },
    }
    if cfg.link_bytes_s is not None:
        out["link_bytes_s"] = cfg.link_bytes_s
    return out


class _Signals:
    """SIGINT/SIGTERM/SIGHUP -> a flag that the main loop checks; the previous handlers come back after."""

    def __init__(self):
        self.caught: str | None = None
        self._old = {}

    def __enter__(self):
        for sig in STOP_SIGNALS:
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, _frame):
        self.caught = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, h in self._old.items():
            signal.signal(sig, h)


class _Run:
    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        self.profile = None
        self.procs: dict[tuple[str, int], mp.Process] = {}
        self.infos: dict[tuple[str, int], dict] = {}  # engines (tp rank 0)
        self.followers: dict[tuple[str, int, int], dict] = {}  # other ranks of tensor-parallel engines
        self.done: set[tuple[str, int]] = set()
        self.error: str | None = None
        self.error_tb: str | None = None
        self.writer: LogWriter | None = None
        self.clock_start: float | None = None
        self.seconds: float | None = None
        self.drafter_steps = 0
        self.last_event_t = 0.0  # the latest t of a logged step or sync
        self.reported: set[tuple[str, int]] = set()  # workers that sent an error message
        self.timed_out = False  # the run reached --time-limit
        self.loader = None

    # -- setup --------------------------------------------------------------------------
    def _plan(self):
        cfg = self.cfg
        if cfg.emulated:
            from .emulate import load_profile

            try:
                self.profile = load_profile(cfg.emulate, cfg.sync_s)
            except Exception as e:  # noqa: BLE001  (any failure to read the source is unusable input)
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                if cfg.emulate not in msg:
                    msg = f"{cfg.emulate}: {msg}"
                raise SourceError(msg) from None
            if cfg.sync_enabled and not self.profile.sync_durs_s:
                # nothing to resample and no --sync-s: emulate what the source shows, no weight sync
                _say(
                    f"dflash-train: {cfg.emulate} has no sync of several drafters: emulating {cfg.drafters} "
                    f"drafters without weight sync (the log says sync_every 0; --sync-s SECONDS emulates one)"
                )
                self.cfg = cfg = replace(cfg, sync_every=0)
            if cfg.link_bytes_s is not None and not self.profile.header.get("hs_bytes_per_token"):
                raise SourceError(
                    f"{cfg.emulate}: the source log has no hs_bytes_per_token, which a link between "
                    "nodes needs (bytes per batch = tokens * hs_bytes_per_token)"
                )
            planned = cfg.steps or self.profile.source_drafter_steps
            return planned, self.profile.batches(planned, cfg.seed), (lambda item: item)
        from .batching import BatchPlan
        from .corpus import SyntheticCorpus

        corpus = SyntheticCorpus(cfg.samples, cfg.preset.target.vocab, cfg.token_budget, cfg.seed)
        plan = BatchPlan(corpus, cfg.token_budget, cfg.epochs, cfg.seed, cfg.steps)
        return plan.total, iter(plan), plan.materialise

    def _start_workers(self, ctx, devices, ch) -> None:
        from .sync import SyncPlan
        from .workers import WorkerSpec, worker_main

        cfg = self.cfg
        backend = "gloo"
        if cfg.device == "cuda" and not cfg.emulated:
            drafter_devs = devices[cfg.targets :]
            if len(set(drafter_devs)) == len(drafter_devs):
                backend = "nccl"
            elif cfg.sync_enabled:
                self.notes.append("drafters share a GPU, which NCCL refuses: weights sync through gloo (host memory)")
        port = _free_port() if cfg.sync_enabled else 0
        slots = worker_slots(cfg)
        tp_ports = {
            i: _free_port()
            for role, i, r in slots
            if role == "target" and r == 0 and cfg.target_tp > 1 and not cfg.emulated
        }
        for (role, i, r), dev in zip(slots, devices):
            sp = SyncPlan(i, cfg.drafters, port, backend) if role == "drafter" and cfg.sync_enabled else None
            spec = WorkerSpec(
                role,
                i,
                dev,
                cfg,
                sync=sp,
                profile=self.profile,
                parent_pid=os.getpid(),
                tp_rank=r,
                tp_port=tp_ports.get(i, 0) if role == "target" else 0,
                **self._link_spec(role, i),
            )
            name = f"dflash-{role}-{i}" + (f"-tp{r}" if r else "")
            p = ctx.Process(target=worker_main, args=(spec, ch), name=name, daemon=False)
            p.start()
            self.procs[(role, i) if r == 0 else (role, i, r)] = p

    def _link_spec(self, role: str, i: int) -> dict:
        """WorkerSpec fields of an emulated engine on a node (`trainer.placement`)."""
        cfg = self.cfg
        if cfg.gpus_per_node is None:
            return {}
        from .placement import place

        node = place(cfg.engines, cfg.gpus_per_worker, cfg.gpus_per_node, cfg.placement)[role][i]
        if cfg.link_bytes_s is None:
            return {"node": node}
        return {
            "node": node,
            "link_s_per_byte": 1.0 / cfg.link_bytes_s,
            "hs_bytes_per_token": float(self.profile.header.get("hs_bytes_per_token") or 0.0),
        }

    # -- event relay ----------------------------------------------------------------------
    def _handle(self, msg: dict, rates: RateWindow | None) -> None:
        kind = msg.get("kind") or msg.get("ev")
        if kind == "step":
            if self.writer is not None:
                self.writer.write(msg)
            if rates is not None:
                rates.add(msg)
            if msg["role"] == "drafter":
                self.drafter_steps += 1
            self.last_event_t = max(self.last_event_t, msg["t"])
        elif kind == "sync":
            if self.writer is not None:
                self.writer.write(msg)
            self.last_event_t = max(self.last_event_t, msg["t"])
        elif kind == "ready":
            info = {**msg.get("info", {}), "device": msg["device"], "pid": msg["pid"]}
            if msg.get("tp_rank", 0):
                self.followers[(msg["role"], msg["index"], msg["tp_rank"])] = info
            else:
                self.infos[(msg["role"], msg["index"])] = info
        elif kind == "done":
            self.done.add((msg["role"], msg["index"]))
        elif kind == "error":
            self.reported.add((msg["role"], msg["index"]))
            if self.error is None and not self.ch.stop.is_set():
                self.error = msg["msg"]
                self.error_tb = msg.get("traceback")

    def _drain(self, rates, timeout: float, limit: int = 500) -> None:
        try:
            msg = self.ch.events.get(timeout=timeout)
        except queue.Empty:
            return
        self._handle(msg, rates)
        for _ in range(limit):
            try:
                msg = self.ch.events.get_nowait()
            except queue.Empty:
                return
            self._handle(msg, rates)

    @staticmethod
    def _death(key: tuple, code: int) -> str:
        who = f"{key[0]} {key[1]}" + (f" (tensor-parallel rank {key[2]})" if len(key) > 2 else "")
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"{who} was killed by {name} (exit code {code}) before finishing"
        return f"{who} exited with code {code} before finishing"

    def _silent_deaths(self) -> list[str]:
        return [
            self._death(k, p.exitcode)
            for k, p in self.procs.items()
            if p.exitcode is not None and p.exitcode != 0 and k not in self.done and k not in self.reported
        ]

    def _check_dead(self) -> None:
        if self.error is not None or self.ch.stop.is_set():
            return
        for key, p in self.procs.items():
            if p.exitcode is not None and p.exitcode != 0 and key not in self.done and key not in self.reported:
                # the error message may still be in the pipe: give it a moment before naming the exit code
                self._drain(None, 0.5)
                if self.error is None:
                    dead = self._silent_deaths()
                    if dead:
                        self.error = dead[0]
                return

    def _blame(self) -> None:
        """An error was reported: if a worker died without a word, it is the cause; name it first."""
        deadline = time.monotonic() + BLAME_WAIT_S
        while True:
            dead = self._silent_deaths()
            if dead:
                if not self.error.startswith(dead[0]):
                    self.error = f"{dead[0]}; then {self.error}"
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.05)

    # -- main -------------------------------------------------------------------------------
    def execute(self) -> RunResult:
        cfg = self.cfg
        self.notes: list[str] = []
        planned, batches, make = self._plan()
        devices, n_gpus, dev_notes = assign_devices(cfg)
        self.notes.extend(dev_notes)
        from .logwriter import open_log

        self.writer = open_log(cfg.out, cfg.force)  # OutputError before any worker starts
        for n in dev_notes:
            _say(f"dflash-train: warning: {n}")
        ctx = mp.get_context("spawn")
        from multiprocessing import resource_tracker

        from .workers import Channels, HsSlots, LinkState

        try:
            with _GroupSignalsBlocked():
                resource_tracker.ensure_running()
            self.ch = ch = Channels(
                pre=[ctx.Queue(maxsize=cfg.pre_queue_depth) for _ in range(cfg.targets)],
                hs=ctx.Queue(maxsize=cfg.hs_queue_depth),
                events=ctx.Queue(),
                stop=ctx.Event(),
                go=ctx.Event(),
                release=ctx.Event(),
                start_wall=ctx.Value("d", 0.0),
                targets_done=ctx.Value("i", 0),
                targets_flushed=ctx.Value("i", 0),
                hs_slots=(HsSlots(ctx, cfg.hs_queue_depth, cfg.targets, cfg.drafters) if cfg.emulated else None),
                link=LinkState(ctx) if cfg.link_bytes_s is not None else None,
            )
            progress = Progress(cfg.progress)
            with _Signals() as sigs:
                reason = self._loop(ch, ctx, devices, n_gpus, planned, batches, make, progress, sigs)
        except BaseException:
            self._emergency_stop()  # never leave workers behind, whatever went wrong here
            raise
        if reason == "error":
            if self.error_tb:
                _say(self.error_tb, end="")
            _say(f"dflash-train: error: {self.error}")
        code = {"done": EXIT_DONE, "error": EXIT_ERROR, "interrupted": EXIT_INTERRUPTED}[reason]
        timed_out = reason == "interrupted" and self.timed_out
        if timed_out:
            code = EXIT_DONE  # the run lasted what was asked: the log ends "interrupted", the exit is clean
        return RunResult(
            reason,
            self.error,
            code,
            cfg.out,
            self.drafter_steps,
            self.writer.lines,
            timed_out=timed_out,
            seconds=self.seconds,
        )

    def _write_error(self) -> None:
        if self.writer.error is not None and self.error is None:
            e = self.writer.error
            self.error = f"cannot write the log {self.cfg.out}: {e.strerror or e}"

    def _loop(self, ch, ctx, devices, n_gpus, planned, batches, make, progress, sigs) -> str:
        cfg = self.cfg
        reason = None
        stop_t = None
        rates = None
        last_rates = None
        scale = cfg.time_scale if cfg.emulated else 1.0
        with _GroupSignalsBlocked():
            self._start_workers(ctx, devices, ch)
        deadline = time.monotonic() + cfg.start_timeout_s
        while len(self.infos) + len(self.followers) < cfg.processes and self.error is None and sigs.caught is None:
            self._drain(None, 0.1)
            self._check_dead()
            if time.monotonic() > deadline:
                self.error = f"workers did not start within {cfg.start_timeout_s:g} s"
            progress.update(0.0, None, 0, planned)
        self.clock_start = time.monotonic()
        ch.start_wall.value = self.clock_start
        self.writer.write(_header(cfg, self.infos, n_gpus, self.profile, self.notes, self.followers))
        self._write_error()
        if self.error is None and sigs.caught is None:
            from .loader import Loader

            self.loader = loader = Loader(batches, make, ch.pre, cfg.pre_queue_depth, ch.stop)
            rates = RateWindow({"target": cfg.targets, "drafter": cfg.drafters}, cfg.rates_every_s, planned)
            ch.go.set()
            loader.start()
            next_rates = cfg.rates_every_s
            drafter_keys = {("drafter", i) for i in range(cfg.drafters)}
            while True:
                self._drain(rates, 0.02)
                now = (time.monotonic() - self.clock_start) / scale
                if cfg.emulated:  # the log's clock is the ideal timeline: never past its latest logged instant
                    now = min(now, self.last_event_t)
                if now >= next_rates and not (cfg.emulated and self.drafter_steps >= planned):
                    last_rates = rates.snapshot(now, [q.qsize() for q in ch.pre], ch.hs.qsize())
                    self.writer.write(last_rates)
                    next_rates += cfg.rates_every_s * (1 + int((now - next_rates) // cfg.rates_every_s))
                progress.update(now, last_rates, self.drafter_steps, planned)
                if sigs.caught is not None:  # before the checks below: a signal's casualties are no error
                    break
                if cfg.time_limit_s is not None and now >= cfg.time_limit_s and self.error is None:
                    self.timed_out = True
                    stop_t = now
                    break
                self._write_error()
                if drafter_keys <= self.done:
                    ch.release.set()
                    if all(not p.is_alive() for p in self.procs.values()):
                        reason = "done"
                        break
                if loader.error is not None and self.error is None:
                    self.error = f"loader: {type(loader.error).__name__}: {loader.error}"
                self._check_dead()
                if self.error is not None:
                    break
        if sigs.caught is not None:
            self.timed_out = False  # a signal came first, or during the stop: that is the reason
        if reason is None:
            reason = "interrupted" if (sigs.caught is not None or self.timed_out) and self.error is None else "error"
        if reason == "error":
            self._blame()
        self._shutdown(rates, graceful=reason == "done")
        now = (time.monotonic() - self.clock_start) / scale
        if cfg.emulated and reason == "done":
            # the emulated pipeline ends at its last step; the wall time its processes took to exit,
            # scaled by 1/time-scale, is no part of its timeline
            now = self.last_event_t
        elif self.timed_out and stop_t is not None:
            # stopped by its time limit: the run ends at the limit, or at the last step that finished
            # after it; the seconds spent stopping the processes are no part of the run
            now = max(stop_t, self.last_event_t)
        if reason == "done" and rates is not None:
            self.writer.write(rates.snapshot(now, [q.qsize() for q in ch.pre], ch.hs.qsize()))
        self._write_error()
        if self.error is not None and reason == "done":
            reason = "error"
        self.seconds = round(now, 6)
        end = {"ev": "end", "t": self.seconds, "reason": reason}
        if reason == "error":
            end["msg"] = self.error
        elif reason == "interrupted":
            end["msg"] = (
                f"{sigs.caught} received"
                if sigs.caught is not None
                else f"time limit of {cfg.time_limit_s:g} s reached"
            )
        self.writer.write_last(end)
        self.writer.close()
        self._write_error()
        progress.close()
        return reason

    def _emergency_stop(self) -> None:
        ch = getattr(self, "ch", None)
        if ch is not None:
            ch.stop.set()
        for p in self.procs.values():
            if p.is_alive():
                p.terminate()
        for p in self.procs.values():
            p.join(1.0)
            if p.is_alive():
                p.kill()
                p.join(1.0)
        if self.writer is not None:
            self.writer.close()

    def _shutdown(self, rates, graceful: bool) -> None:
        ch = self.ch
        if not graceful:
            ch.stop.set()
        ch.release.set()
        deadline = time.monotonic() + (self.cfg.stop_grace_s if not graceful else 60.0)
        while any(p.is_alive() for p in self.procs.values()) and time.monotonic() < deadline:
            self._drain(rates, 0.05)
        for p in self.procs.values():
            if p.is_alive():
                p.terminate()
        for p in self.procs.values():
            p.join(2.0)
            if p.is_alive():
                p.kill()
                p.join(2.0)
        self._drain(rates, 0.0, limit=100000)
        self._retire_feeders()
        for q in [ch.hs, ch.events]:
            q.cancel_join_thread()  # nothing left there is needed; never block the exit on it

    def _retire_feeders(self) -> None:
        """End this process's queue feeder threads here, in the main thread, with the queues alive.

        The loader's puts start one feeder thread per prefetch queue. Left running, such a thread
        ends only at exit, when multiprocessing's exit hook wakes it; if the queue object was
        already collected, the thread then holds the last reference to the queue's semaphores and
        runs their finalizer itself (unlink, then tell the resource tracker) while the interpreter
        shuts down. The tracker can miss that last message and warns of a "leaked semaphore" (seen
        on CI, Python 3.11). Every worker has exited by now, so nobody else reads these queues:
        what is left is drained, then each feeder gets its sentinel and is joined.
        """
        self.ch.stop.set()  # a loader still placing batches gives up
        if self.loader is not None:
            self.loader.join(RETIRE_WAIT_S)
        for q in self.ch.pre:
            while True:
                try:
                    q.get(timeout=RETIRE_POLL_S)
                except (queue.Empty, OSError, EOFError):
                    break
            q.close()
            q.join_thread()


def _say(text: str, end: str = "\n") -> None:
    """A line on stderr; a terminal that went away (SIGHUP) must not turn a clean end into a crash."""
    try:
        print(text, file=sys.stderr, end=end, flush=True)
    except OSError:
        pass


def run(cfg: TrainConfig) -> RunResult:
    return _Run(cfg).execute()
