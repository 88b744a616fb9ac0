"""Instrument any training pipeline to write rate logs (schema v1) that ``dflash-advise`` reads.

Standard library only (no pandas, numpy or torch). docs/instrumenting.md says where the calls go
and why (clocks, per-rank files, signals); docs/log-schema.md is the format. One
:class:`RateLog` per process, each writing its own file ``DIR/<role>-<worker>.jsonl``::

    header = records.Run(run="exp1", roles={"target": 3, "drafter": 1}, queues=[...]).stamped()
    with RateLog.open(run_dir, header, role="drafter", worker=0) as log:  # same header everywhere
        for batch in loader:
            with log.step(tokens=n_tokens(batch)) as s:
                with s.waiting():
                    x = q_in.get()           # starved time: not busy
                loss = train_step(x)         # busy (synchronise the device before the block ends)
                with s.blocking():
                    q_out.put(y)             # time held by a full output queue: not busy
                s.loss = loss
    # leaving the `with` writes `end` (done; error with the message on an exception)

Clock: ``t = (wall_at_open - t0_unix) + (monotonic() - monotonic_at_open)``, so time never jumps
within a process and processes agree as well as their wall clocks did at open; a header without
``t0_unix`` is stamped at open (right for one writer only). Each line is one ``write()`` on an
unbuffered append-only descriptor (a killed process leaves whole lines), fsync'ed at :meth:`end`.
Files are created exclusively unless ``overwrite=True``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor import records
from advisor.records import End, EndReason, Rates, Record, Run, Step, Sync

__all__ = ["RateLog", "StepTimer", "RateMeter", "Snapshots", "BatchFacts", "Clocks", "rank_file_name"]

ROUND = 6  # decimals of seconds written (microseconds): shorter lines, no lost precision that matters


def rank_file_name(role: str, worker: int) -> str:
    """The file name of one worker's log in a run directory.

    Args:
        role: the worker's role, as the header names it.
        worker: the worker's index within its role, from 0.

    Returns:
        ``<role>-<worker>.jsonl``.
    """
    return f"{role}-{int(worker)}.jsonl"


def _r(x: float) -> float:
    return round(float(x), ROUND)


@dataclass
class _Totals:
    batches: int = 0
    busy_s: float = 0.0
    tokens: int = 0


class RateMeter:
    """Pool-wide rates between snapshots, from step completions or cumulative counters.

    Over the window since the previous snapshot (the first: since t = 0), per role r with n_r
    workers (from the header): ``bps[r] = batches / window``; ``cap_bps[r] = n_r * batches /
    busy seconds`` (when both are > 0); ``tok_s`` = consumer tokens / window; ``done`` = consumer
    batches so far / ``planned_batches``; ``eta_s`` = (planned - done) / bps[consumer]. Counts must
    cover every worker of a role for bps and cap_bps to mean the pool's rates.
    """

    def __init__(self, header: Run, *, planned_batches: int | None = None):
        self.roles = dict(header.roles)
        self.consumer = header.consumer
        self.planned_batches = planned_batches
        self._now = {r: _Totals() for r in self.roles}
        self._last = {r: _Totals() for r in self.roles}
        self._last_t = 0.0
        self._lock = threading.Lock()

    def add(self, role: str, *, busy_s: float, tokens: int = 0, batches: int = 1) -> None:
        """Count completed batches of ``role``.

        Args:
            role: a role of the header.
            busy_s: busy seconds of these batches, summed.
            tokens: tokens in these batches (``tok_s`` counts the consumer's).
            batches: batches completed; one step by default.
        """
        with self._lock:
            c = self._now[role]
            c.batches += batches
            c.busy_s += busy_s
            c.tokens += tokens

    def set_totals(self, role: str, *, batches: int, busy_s: float, tokens: int = 0) -> None:
        """Set the cumulative counts of ``role`` since the run start (e.g. read from shared counters).

        Args:
            role: a role of the header.
            batches: batches done by all of the role's workers since the run start.
            busy_s: busy seconds of those batches, summed over the workers.
            tokens: tokens in those batches.
        """
        with self._lock:
            self._now[role] = _Totals(int(batches), float(busy_s), int(tokens))

    def snapshot(self, t: float, *, q: Mapping[str, Any] | None = None) -> Rates:
        """The ``rates`` record for the window ending at ``t``; the next window starts here.

        Args:
            t: the window's end, seconds since the run start; after the previous snapshot's.
            q: queue depths at ``t``, written as they are; None leaves ``q`` out.

        Returns:
            The snapshot: ``cap_bps`` only for roles busy in the window (None if none), ``done``
            and ``eta_s`` only with ``planned_batches``.
        """
        with self._lock:
            window = t - self._last_t
            if window <= 0:
                raise ValueError(f"rates snapshot at t={t} is not after the previous one ({self._last_t})")
            bps, cap = {}, {}
            for r, n in self.roles.items():
                db = self._now[r].batches - self._last[r].batches
                dbusy = self._now[r].busy_s - self._last[r].busy_s
                bps[r] = round(db / window, 6)
                if db > 0 and dbusy > 0:
                    cap[r] = round(n * db / dbusy, 6)
            cons_now, cons_last = self._now[self.consumer], self._last[self.consumer]
            tok_s = round((cons_now.tokens - cons_last.tokens) / window, 3)
            done = eta = None
            if self.planned_batches:
                done = round(min(1.0, cons_now.batches / self.planned_batches), 6)
                if bps[self.consumer] > 0:
                    eta = round(max(self.planned_batches - cons_now.batches, 0) / bps[self.consumer], 3)
            self._last = {r: _Totals(c.batches, c.busy_s, c.tokens) for r, c in self._now.items()}
            self._last_t = t
        return Rates(t=_r(t), window=_r(window), bps=bps, cap_bps=cap or None, tok_s=tok_s, q=q, eta_s=eta, done=done)


@dataclass(frozen=True)
class BatchFacts:
    """What a step's line carries beside its times, tokens, role and worker: the batch's index, its
    sequences, the loss and any extra fields of your own."""

    batch: int | None = None
    seqs: int | None = None
    loss: float | None = None
    extra: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Snapshots:
    """When a :class:`RateLog` writes ``rates`` snapshots, and from what: every ``every_s`` seconds
    (each :meth:`RateLog.tick` writes one when due; None: only when :meth:`RateLog.rates` is
    called), from ``meter`` (None: a meter of this log's own steps, made where ``every_s`` is
    given), with queue depths from the ``queue_depths`` callback (returning None leaves ``q`` out)."""

    every_s: float | None = None
    meter: RateMeter | None = None
    queue_depths: Callable[[], Mapping[str, Any] | None] | None = None


@dataclass(frozen=True)
class Clocks:
    """The clocks a :class:`RateLog` reads: ``monotonic`` for every ``t``, ``wall`` (Unix seconds)
    once at open to place it on the run's axis (module docstring); tests give their own."""

    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time


class StepTimer:
    """Times one step inside ``with log.step(...) as s:``.

    ``busy`` = the block's duration minus the time spent in ``s.waiting()`` and ``s.blocking()``;
    ``wait`` and ``blocked`` = those times, plus any seconds you add with :meth:`waited` /
    :meth:`blocked` (measured elsewhere, e.g. by your queue wrapper, and not inside the block).
    The step is written when the block exits (its ``t``), unless the block raised or
    :meth:`cancel` was called (e.g. the input was the end-of-data sentinel). ``tokens``,
    ``seqs``, ``batch``, ``loss`` and ``extra`` may be set inside the block.
    """

    def __init__(
        self,
        log: RateLog,
        role: str,
        worker: int,
        tokens: int | None,
        batch: int | None,
        seqs: int | None,
        loss: float | None,
        extra: Mapping[str, Any] | None,
    ):
        self._log = log
        self.role, self.worker = role, worker
        self.tokens, self.batch, self.seqs, self.loss = tokens, batch, seqs, loss
        self.extra: dict[str, Any] = dict(extra or {})
        self._start = 0.0
        self._inner_wait = self._inner_blocked = 0.0
        self._outer_wait = self._outer_blocked = 0.0
        self._xfer = None  # seconds importing hidden states (`transferring`), part of busy
        self._cancelled = False
        self.record: Step | None = None  # the step written, after the block

    def __enter__(self) -> StepTimer:
        self._start = self._log.now()
        return self

    @contextmanager
    def _timed(self, attr: str) -> Iterator[None]:
        """Add the block's seconds to ``attr``."""
        t0 = self._log.now()
        try:
            yield
        finally:
            setattr(self, attr, (getattr(self, attr) or 0.0) + self._log.now() - t0)

    def waiting(self) -> AbstractContextManager[None]:
        """Time starved for input (not busy), e.g. around ``q_in.get()``.

        Returns:
            A context manager whose seconds count as the step's ``wait``.
        """
        return self._timed("_inner_wait")

    def blocking(self) -> AbstractContextManager[None]:
        """Time held by a full output queue (not busy), e.g. around ``q_out.put(x)``.

        Returns:
            A context manager whose seconds count as the step's ``blocked``.
        """
        return self._timed("_inner_blocked")

    def transferring(self) -> AbstractContextManager[None]:
        """Time a drafter spends importing the batch's hidden states (busy, logged as ``xfer``):
        around the receive from the capture server, so a batch from another node logs its link
        time (docs/deployed.md).

        Returns:
            A context manager whose seconds add to the step's ``xfer`` (and stay in ``busy``).
        """
        return self._timed("_xfer")

    def waited(self, seconds: float) -> None:
        """Add starved seconds measured outside the block (not subtracted from busy).

        Args:
            seconds: starved seconds to add to the step's ``wait``.
        """
        self._outer_wait += seconds

    def blocked(self, seconds: float) -> None:
        """Add blocked seconds measured outside the block (not subtracted from busy).

        Args:
            seconds: blocked seconds to add to the step's ``blocked``.
        """
        self._outer_blocked += seconds

    def cancel(self) -> None:
        """Write no step for this block (no batch was done)."""
        self._cancelled = True

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None or self._cancelled:
            return False
        end = self._log.now()
        if self.tokens is None:
            raise records.RecordError("step", "tokens", "was never set: pass tokens= to log.step() or set s.tokens")
        busy = max(end - self._start - self._inner_wait - self._inner_blocked, 0.0)
        extra = {**self.extra, "xfer": _r(self._xfer)} if self._xfer is not None else self.extra
        self.record = self._log.step_done(
            busy_s=busy,
            wait_s=self._inner_wait + self._outer_wait,
            blocked_s=self._inner_blocked + self._outer_blocked,
            tokens=self.tokens,
            role=self.role,
            worker=self.worker,
            t=end,
            facts=BatchFacts(self.batch, self.seqs, self.loss, extra),
        )
        return False


class RateLog:
    """One process's rate-log file. See the module docstring for the clock and the write policy.

    ``role`` and ``worker`` are this process's defaults for steps and syncs. ``snapshots`` says
    when and from what ``rates`` are written (:class:`Snapshots`); its meter is fed by every step
    written here. ``handle_sigterm``: call :meth:`handle_signals` at open; ``overwrite``: truncate
    a file that exists instead of failing.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        header: Run,
        *,
        role: str | None = None,
        worker: int = 0,
        snapshots: Snapshots = Snapshots(),
        handle_sigterm: bool = False,
        overwrite: bool = False,
        clocks: Clocks = Clocks(),
    ):
        if not isinstance(header, Run):
            raise TypeError(f"header must be an advisor.records.Run, got {type(header).__name__}")
        if role is not None:
            records.check_worker(header.roles, role, worker)
        rates_every_s = snapshots.every_s
        if rates_every_s is not None and rates_every_s <= 0:
            raise ValueError(f"snapshots.every_s must be > 0, got {rates_every_s}")
        self._clock = clocks.monotonic
        wall_now, mono_now = clocks.wall(), self._clock()
        if header.t0_unix is None:
            header = header.stamped(wall_now)
        self.header = header
        self._offset = (wall_now - header.t0_unix) - mono_now
        self.role, self.worker = role, worker
        self.meter = snapshots.meter
        if rates_every_s is not None and self.meter is None:
            self.meter = RateMeter(header)
        self.rates_every_s = rates_every_s
        self.queue_depths = snapshots.queue_depths
        self._next_rates = rates_every_s
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # exclusive by default: two processes given the same role and worker, or a file left by an
        # earlier run, must fail loudly rather than mix two streams of events into one file
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if overwrite else os.O_EXCL)
        try:
            self._fd: int | None = os.open(self.path, flags, 0o644)
        except FileExistsError:
            raise FileExistsError(
                f"{self.path} exists: another process is writing it (the same role and worker?) "
                f"or it is left from an earlier run; use a fresh run directory, or "
                f"overwrite=True"
            ) from None
        self._lock = threading.RLock()  # re-entrant: a signal handler may log while the main thread is writing
        self._ended = False
        self._prev_handlers: dict[int, Any] = {}
        self.lines = 0
        self.write(header)
        if handle_sigterm:
            self.handle_signals()

    @classmethod
    def open(
        cls,
        run_dir: str | os.PathLike,
        header: Run,
        *,
        role: str | None = None,
        worker: int = 0,
        name: str | None = None,
        **kw: Any,
    ) -> RateLog:
        """This process's log in ``run_dir``: ``<role>-<worker>.jsonl``, or ``<name>.jsonl``.

        Args:
            run_dir: the run directory all the processes share (made if missing).
            header: the run's header, stamped before it is handed out (module docstring).
            role: this process's role, the default of its steps and syncs; None needs ``name``.
            worker: this process's index within ``role``.
            name: the file's name without ``.jsonl``, e.g. for a coordinator that writes only
                rates and needs no role.
            **kw: the other options of :class:`RateLog` (``snapshots``, ``handle_sigterm``, ...).

        Returns:
            The open log, its header line written.
        """
        if name is None and role is None:
            raise ValueError("give role= (the file is <role>-<worker>.jsonl) or name=")
        fname = f"{name}.jsonl" if name is not None else rank_file_name(role, worker)
        return cls(Path(run_dir) / fname, header, role=role, worker=worker, **kw)

    # --- clock -------------------------------------------------------------------------------
    def now(self) -> float:
        """The time now on the run's axis.

        Returns:
            Seconds since the run start (monotonic; 0 if this process started before t0).
        """
        return max(self._clock() + self._offset, 0.0)

    # --- writing -----------------------------------------------------------------------------
    def write(self, record: Record) -> None:
        """Append one record as one whole line (one ``write()`` call). After :meth:`end`, events are
        dropped: a graceful shutdown after SIGTERM may still finish a step, which must not follow
        the ``end`` line.

        Args:
            record: the record to append.
        """
        data = record.to_json_line().encode("utf-8")
        with self._lock:
            if self._ended and not isinstance(record, End):
                return
            if self._fd is None:
                raise ValueError(f"{self.path}: the log is closed")
            view = memoryview(data)
            while view:  # a regular file takes it all at once; loop only for the pathological short write
                n = os.write(self._fd, view)
                view = view[n:]
            self.lines += 1

    def _role(self, role: str | None) -> str:
        r = role if role is not None else self.role
        if r is None:
            raise ValueError("no role: pass role= here or when opening the log")
        return r

    def step(
        self,
        role: str | None = None,
        worker: int | None = None,
        *,
        tokens: int | None = None,
        batch: int | None = None,
        seqs: int | None = None,
        loss: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> StepTimer:
        """A context manager that times one step (see :class:`StepTimer`).

        Args:
            role: the step's role; None: the log's.
            worker: the step's worker; None: the log's.
            tokens: tokens in the batch; None: set ``s.tokens`` inside the block instead.
            batch: the batch's index, if you log it.
            seqs: sequences in the batch, if you log them.
            loss: the step's loss, if you log it.
            extra: fields of your own for the step's line.

        Returns:
            The timer; its step is written when the block exits.
        """
        return StepTimer(
            self, self._role(role), self.worker if worker is None else worker, tokens, batch, seqs, loss, extra
        )

    def step_done(
        self,
        *,
        busy_s: float,
        tokens: int,
        wait_s: float = 0.0,
        blocked_s: float = 0.0,
        role: str | None = None,
        worker: int | None = None,
        t: float | None = None,
        facts: BatchFacts = BatchFacts(),
    ) -> Step:
        """Write a step you timed yourself.

        Args:
            busy_s: compute seconds of the step.
            tokens: tokens in the batch.
            wait_s: seconds starved for input before it.
            blocked_s: seconds held by a full output queue after it.
            role: the step's role; None: the log's.
            worker: the step's worker; None: the log's.
            t: when the worker was free again, seconds since the run start; None: now.
            facts: the batch's index, sequences, loss and extra fields, where you log them.

        Returns:
            The step written (it also feeds the meter, and a due snapshot follows it).
        """
        role = self._role(role)
        rec = Step(
            t=_r(self.now() if t is None else t),
            role=role,
            worker=self.worker if worker is None else worker,
            batch=facts.batch,
            tokens=tokens,
            seqs=facts.seqs,
            busy=_r(busy_s),
            wait=_r(wait_s),
            blocked=_r(blocked_s),
            loss=facts.loss,
            extra=facts.extra or {},
        )
        records.check_worker(self.header.roles, role, rec.worker)  # a step the reader would refuse is not written
        self.write(rec)
        if self.meter is not None:
            self.meter.add(role, busy_s=busy_s, tokens=tokens)
        self.tick(rec.t)
        return rec

    def sync(
        self,
        *,
        dur_s: float,
        workers: int | None = None,
        bytes: float | None = None,
        role: str | None = None,
        t: float | None = None,
    ) -> Sync:
        """Write a sync (weight/gradient all-reduce) that took ``dur_s`` and ended at ``t``. Log each
        sync once, from one rank (e.g. rank 0), not from every participant.

        Args:
            dur_s: the sync's duration, seconds.
            workers: the workers taking part, if known.
            bytes: the bytes synced, if known.
            role: the role whose workers synced; None: the log's.
            t: when it ended, seconds since the run start; None: now.

        Returns:
            The sync written.
        """
        rec = Sync(
            t=_r(self.now() if t is None else t), role=self._role(role), dur=_r(dur_s), workers=workers, bytes=bytes
        )
        self.write(rec)
        return rec

    def rates(self, record: Rates | None = None, **fields: Any) -> Rates:
        """Write a rates snapshot: a given record, or one from the fields given, or, with neither,
        the meter's snapshot now.

        Args:
            record: a snapshot to write as it is.
            **fields: the :class:`Rates` fields to build one from (``t`` defaults to now).

        Returns:
            The snapshot written.
        """
        if record is None and not fields:
            if self.meter is None:
                raise ValueError("no rates given and no meter to compute them")
            depths = self.queue_depths() if self.queue_depths is not None else None
            q = dict(depths) if depths else None  # the callback may return None: depths unknown
            record = self.meter.snapshot(self.now(), q=q)
        elif record is None:
            fields.setdefault("t", _r(self.now()))
            record = Rates(**fields)
        self.write(record)
        return record

    def tick(self, t: float | None = None) -> Rates | None:
        """Write a meter snapshot if one is due (``rates_every_s``); call it from a loop that does
        not log steps (a coordinator).

        Args:
            t: the time to test, seconds since the run start; None: now. The snapshot is stamped now.

        Returns:
            The snapshot written, or None when none was due, none is scheduled or the log has ended.
        """
        if self._next_rates is None or self._ended:
            return None
        now = self.now() if t is None else t
        if now < self._next_rates:
            return None
        while self._next_rates <= now:
            self._next_rates += self.rates_every_s  # type: ignore[operator]
        return self.rates()

    def end(self, reason: EndReason | str = EndReason.DONE, msg: str | None = None) -> End | None:
        """Write the ``end`` line (once) and fsync the file.

        Args:
            reason: why the log ends (``done``, ``interrupted`` or ``error``).
            msg: how, e.g. the exception's text; cut to 500 characters.

        Returns:
            The ``end`` record, or None on later calls (or once the log is closed).
        """
        with self._lock:
            if self._ended or self._fd is None:
                return None
            self._ended = True
            rec = End(t=_r(self.now()), reason=reason, msg=msg[:500] if msg else None)
            self.write(rec)
            try:
                os.fsync(self._fd)
            except OSError:  # e.g. a pipe or a filesystem without fsync: the line is written anyway
                pass
        return rec

    def close(self, reason: EndReason | str = EndReason.DONE, msg: str | None = None) -> None:
        """End the log (if not ended yet) and close the file; restore signal handlers.

        Args:
            reason: why the log ends, if it has not yet (:meth:`end`).
            msg: how, if it has not ended yet.
        """
        self.end(reason, msg)
        self.restore_signals()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> RateLog:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None or (issubclass(exc_type, SystemExit) and exc.code in (0, None)):
            self.close(EndReason.DONE)
        elif issubclass(exc_type, KeyboardInterrupt):
            self.close(EndReason.INTERRUPTED, "KeyboardInterrupt")
        else:
            self.close(EndReason.ERROR, f"{exc_type.__name__}: {exc}")
        return False

    # --- signals -----------------------------------------------------------------------------
    def handle_signals(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        """On each signal: write ``end`` interrupted, then hand the signal to the previous handler
        (the default one terminates the process as before). Main thread only (a Python rule).

        Args:
            signals: the signal numbers to handle; SIGTERM by default.
        """
        for sig in signals:
            self._prev_handlers[sig] = signal.signal(sig, self._on_signal)

    def restore_signals(self) -> None:
        """Put back the handlers that :meth:`handle_signals` replaced."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, prev in self._prev_handlers.items():
            signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        self._prev_handlers.clear()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.end(EndReason.INTERRUPTED, f"signal {signal.Signals(signum).name}")
        prev = self._prev_handlers.get(signum)
        if callable(prev):
            prev(signum, frame)
        elif prev == signal.SIG_IGN:
            return
        else:  # SIG_DFL (or a handler not set from Python): do what the signal would have done
            self.restore_signals()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
