"""advisor.processes: the cores to use, and worker processes (forked here, or from a fork server)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from advisor.processes import (available_cores, free_cores, keep, kept_pool, process_pool, release_kept,
                               workers_allowed)

ROOT = Path(__file__).resolve().parents[1]


def test_cores_are_the_affinity_and_the_free_ones_fewer(monkeypatch):
    n = available_cores()
    assert 1 <= n <= (os.cpu_count() or 1)
    assert 1 <= free_cores() <= n
    monkeypatch.setattr(os, "getloadavg", lambda: (n + 5.0, 0.0, 0.0))
    assert free_cores() == 1                       # a host busy with others: no spare core
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert free_cores() == n


def test_a_pool_runs_work_in_other_processes():
    with process_pool(2, ["os"]) as ex:
        pids = set(ex.map(_pid, range(4)))
    assert os.getpid() not in pids and pids


def _pid(_: int) -> int:
    return os.getpid()


_MARK = {"set": "at import"}       # changed by a test after import: seen by a forked worker only


def _mark(_: int) -> str:
    return _MARK["set"]


def test_workers_fork_from_here_when_no_other_thread_runs():
    _MARK["set"] = "by the test"
    try:
        assert threading.active_count() == 1
        with process_pool(2, ["os"]) as ex:
            assert set(ex.map(_mark, range(2))) == {"by the test"}     # this process's memory: forked
        stop = threading.Event()
        other = threading.Thread(target=stop.wait)
        other.start()
        try:
            with process_pool(2, ["os"]) as ex:                           # a thread could hold a lock:
                assert set(ex.map(_mark, range(2))) == {"at import"}   # from the fork server instead
        finally:
            stop.set()
            other.join()
    finally:
        _MARK["set"] = "at import"


def _allowed_in(tmp_path: Path, source: str) -> str:
    script = tmp_path / "main.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n{source}")
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout.strip()


def test_workers_only_where_the_main_script_is_guarded(tmp_path):
    assert workers_allowed()       # pytest's main module is guarded
    call = "from advisor.processes import workers_allowed\nprint(workers_allowed())\n"
    assert _allowed_in(tmp_path, call) == "False"                        # runs again in every worker
    assert _allowed_in(tmp_path, "if __name__ == '__main__':\n    " + call.replace("\n", "\n    ")) == "True"
    out = subprocess.run([sys.executable, "-c", call], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    assert out == "True"


def test_forked_workers_find_preload_imported_here():
    # a module no test imports: imported here, once, before the fork (not in each worker)
    sys.modules.pop("xml.dom.minidom", None)
    assert threading.active_count() == 1
    with process_pool(1, ["xml.dom.minidom"]) as ex:
        assert "xml.dom.minidom" in sys.modules
        assert ex.submit(_has, "xml.dom.minidom").result()


def _has(name: str) -> bool:
    return name in sys.modules


def test_a_kept_pool_serves_later_work_until_released_or_a_new_pool():
    """`keep` holds an idle pool for a later stage; `release_kept` ends it, and so does the next
    `process_pool` (whose fork the kept pool's thread would stop)."""
    first = process_pool(1, [])
    keep(first, 1)
    assert kept_pool() == (first, 1)
    assert first.submit(os.getpid).result() != os.getpid()
    with process_pool(1, []) as second:
        assert kept_pool() is None
        assert second.submit(os.getpid).result() != os.getpid()
    try:
        first.submit(os.getpid)
        raise AssertionError("the kept pool still takes work")
    except RuntimeError:        # (shut down)
        pass
    other = process_pool(1, [])
    keep(other, 1)
    release_kept()
    assert kept_pool() is None
    release_kept()              # (nothing kept: nothing to do)
