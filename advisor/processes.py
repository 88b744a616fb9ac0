"""Worker processes for work that holds Python's GIL: how many cores, and a pool to run it on.

`available_cores` counts the cores this process may run on (its CPU affinity, which a batch
scheduler or ``taskset`` sets, not the host's count); `free_cores` those of them the load
average leaves free (on a shared, busy host, processes beyond it only slow each other down). `process_pool` starts a
`concurrent.futures.ProcessPoolExecutor` whose workers start in milliseconds with this process's
modules loaded: on Linux, forked from this process itself where it runs no other Python thread (no thread
of it can hold a lock that a child would inherit locked; the native threads that numpy's BLAS,
pyarrow's pools and its allocator start are re-armed in the child by their at-fork handlers, as
those libraries document), else from a fork server that has imported ``preload`` once (a parent
with another Python thread, an importer or a notebook's, could fork it while it holds a lock).
A fork server costs a fresh interpreter and its imports before the first worker runs (~0.25 s on
the 2-core host, and its workers start one at a time: 16 workers 0.27 s to start against 0.04 s
forked; BENCHMARKS.md section 15.v). Where there is no fork (Windows), workers are fresh
interpreters. Used by `advisor.ingest.parallel` (many log files) and `advisor.project.exact`
(the exact simulations of a large G). A pool done with its work can be kept for a later stage
of the same command (`keep`): the CLI's reading workers then run the refinement's few
simulations, which a fresh fork of the by then large process would not pay for.

A worker imports the parent's main script again (as ``__mp_main__``, Python's rule for
processes that do not fork the parent), so a script that calls the advisor at its top level,
unguarded, would run again in every worker. `workers_allowed` is therefore False for a main
script whose source has no ``if __name__ == "__main__"`` guard; the callers then work in this
process, with the same result. The command line (`advisor.__main__`, the ``dflash-advise``
script), ``python -c``, a notebook and the interactive prompt are fine.
"""
from __future__ import annotations

import importlib
import multiprocessing
import os
import sys
import threading
import warnings
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from typing import Any, Callable, Sequence


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@lru_cache(maxsize=8)
def _guarded(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return False
    return "__name__" in text and "__main__" in text


def workers_allowed() -> bool:
    """Whether worker processes may start: the main module is no unguarded script (see above)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or getattr(getattr(main, "__spec__", None), "name", None):
        return True     # a prompt, a notebook, ``-c``, or a module run with ``-m`` (imported by name)
    return _guarded(os.path.abspath(path))


def free_cores() -> int:
    """The cores that worker processes would get now: `available_cores` less the load the
    others put on them (the one-minute load average, this process not counted), at least 1.
    On a host already busy with other work, more processes would only share the same cores."""
    cores = available_cores()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return cores
    return max(1, min(cores, int(cores - max(load - 1.0, 0.0) + 0.5)))


def forks_here() -> bool:
    """Whether this process may fork its workers: on Linux (macOS's system libraries are not safe
    to use after a fork, which is why Python starts its workers otherwise there), with no other
    Python thread running."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def _noop() -> None:
    return None


# A pool whose workers are idle and kept for a later stage of the same command (`keep`): the
# CLI's reading workers, forked before its import thread, run the refinement's simulations
# after the read, where a fresh fork of the by then large process would cost more than they save.
_kept: list[tuple[ProcessPoolExecutor, int]] = []


def keep(pool: ProcessPoolExecutor, n: int) -> None:
    """Hold ``pool`` (``n`` idle workers) for later work of this process instead of shutting it
    down (a pool kept before is shut down); `release_kept` ends it, and so does the next
    `process_pool` (its own thread would stop a fork)."""
    release_kept()
    _kept.append((pool, n))


def kept_pool() -> tuple[ProcessPoolExecutor, int] | None:
    """The kept pool and its worker count, if any."""
    return _kept[0] if _kept else None


def release_kept() -> None:
    """Shut the kept pool down (its idle workers exit at once)."""
    while _kept:
        _kept.pop()[0].shutdown(wait=True, cancel_futures=True)


def process_pool(n: int, preload: Sequence[str], initializer: Callable[..., Any] | None = None,
                 initargs: tuple = ()) -> ProcessPoolExecutor:
    """A pool of ``n`` worker processes that start with ``preload`` imported: forked from this
    process where that is safe (``preload`` imported here first, once rather than in each
    worker), else from a server that imported it (see the module docstring); started when this
    returns. A kept pool (`keep`) is shut down first."""
    release_kept()
    if forks_here():
        for name in preload:
            importlib.import_module(name)
        ex = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"), initializer=initializer,
                                 initargs=initargs)
        with warnings.catch_warnings():
            # Python 3.12+ warns at any fork of a process with native threads; those here fork safely (above)
            warnings.filterwarnings("ignore", message=r".*multi-threaded, use of fork\(\)", category=DeprecationWarning)
            ex.submit(_noop).result()    # the first submit forks all n workers, before the pool's own threads start
        return ex
    try:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(list(preload))
    except ValueError:          # no fork server on this platform: fresh interpreters
        ctx = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(n, mp_context=ctx, initializer=initializer, initargs=initargs)
