"""Workers die with the main process: no orphan keeps a GPU (or a core) after its run is gone.

Two mechanisms, set up first thing in every worker (`bind_to_parent`):

1. Linux parent-death signal: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` through ctypes. The kernel
   sends SIGKILL to the worker the moment the thread that started it exits, whatever killed the
   main process (SIGKILL, SIGHUP, a crash). The main process starts every worker from its main
   thread, so "thread" and "process" coincide here. The parent may already have died before the
   prctl call: the worker checks ``os.getppid()`` against the pid it was given right after.
2. Watchdog fallback (non-Linux, or prctl refused): a daemon thread polls ``os.getppid()`` every
   WATCHDOG_S seconds; once the worker has been re-parented, it kills itself with SIGKILL.

The worker also sets its kernel thread name (``comm``, 15 bytes, shown by ps/top and used by the
tests to find a worker by role) to ``dfl-<role>-<index>``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
WATCHDOG_S = 0.5


def _prctl(option: int, arg: int | bytes) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux (no prctl in the C library)
        return False


def comm_name(role: str, index: int) -> str:
    return f"dfl-{role}-{index}"[:15]


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _watch(parent_pid: int) -> None:
    while True:
        time.sleep(WATCHDOG_S)
        if os.getppid() != parent_pid:
            _die()


def bind_to_parent(parent_pid: int, role: str, index: int) -> bool:
    """Make this process die with ``parent_pid``; returns whether the kernel signal is armed."""
    _prctl(PR_SET_NAME, comm_name(role, index).encode())
    armed = _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        _die()
    threading.Thread(target=_watch, args=(parent_pid,), name="parent-watchdog", daemon=True).start()
    return armed
