"""The trainer under faults: signals, a killed main process, bad output paths, a disk that fills
mid-run, unusable settings and source logs, a killed worker.

Every case checks what the user is promised: the exit code, one line on stderr (no traceback),
a log of whole JSON lines whose ``end`` event (where the process could still write one) carries
the reason, and no process of the run left alive. Runs start in their own session
(start_new_session), so "no process left" means: nothing alive in that session, wherever the
processes were re-parented. Waits are bounded by generous deadlines, never by expected speed.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SOURCE = FIXTURES / "cpu-2x1.jsonl"
TIMEOUT_S = 240
GONE_WITHIN_S = 30  # a deadline, not an expectation: the lifeline acts within ~0.5 s


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainer", "--no-progress", *args]


def _env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _session(sid: int) -> set[int]:
    """Live (not zombie) processes of session ``sid``."""
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _stat(int(d.name))
            if st is not None and int(st[3]) == sid and st[0] != "Z":
                out.add(int(d.name))
    return out


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _wait_gone(sid: int) -> set[int]:
    deadline = time.monotonic() + GONE_WITHIN_S
    left = _session(sid)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _session(sid)
    return left


def _parse(path: Path) -> list[dict]:
    """The log must be whole JSON lines, every one of them."""
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n")
    return [json.loads(x) for x in raw.decode().splitlines()]


def _start(out: Path, *args: str, steps_before: int = 4, preexec_fn=None, **env: str) -> subprocess.Popen:
    p = subprocess.Popen(
        _cmd(*args, "--out", str(out)),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=_env(**env),
        preexec_fn=preexec_fn,
    )
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and p.poll() is None:
        if steps_before == 0 or (out.exists() and out.read_text().count('"ev":"step"') >= steps_before):
            return p
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGKILL)
    raise AssertionError(f"the run did not reach {steps_before} steps: {p.communicate()[1]}")


EMULATE = ("--targets", "2", "--drafters", "1", "--steps", "100000", "--emulate", str(SOURCE), "--time-scale", "0.2")


def _workers(sid: int, main: int) -> set[int]:
    return {q for q in _session(sid) if _comm(q).startswith("dfl-")}


@pytest.mark.slow
def test_sigkill_of_the_main_process_takes_the_workers_with_it(tmp_path):
    out = tmp_path / "k.jsonl"
    p = _start(out, *EMULATE)
    workers = _workers(p.pid, p.pid)
    assert {_comm(w) for w in workers} == {"dfl-target-0", "dfl-target-1", "dfl-drafter-0"}
    p.send_signal(signal.SIGKILL)  # no handler can run: only the lifeline can end the workers
    p.wait(timeout=60)
    assert _wait_gone(p.pid) == set()
    events = _parse(out)
    assert events[0]["ev"] == "run" and any(e["ev"] == "step" for e in events)
    p.stdout.close()
    p.stderr.close()


@pytest.mark.slow
def test_a_closed_terminal_ends_the_run_like_sigterm(tmp_path):
    out = tmp_path / "hup.jsonl"
    p = _start(out, *EMULATE)
    os.killpg(p.pid, signal.SIGHUP)  # a closed terminal signals its whole process group
    _, err = p.communicate(timeout=TIMEOUT_S)
    assert p.returncode == 130, err
    events = _parse(out)
    assert events[-1] == {"ev": "end", "t": events[-1]["t"], "reason": "interrupted", "msg": "SIGHUP received"}
    assert "Traceback" not in err
    assert _wait_gone(p.pid) == set()


@pytest.mark.slow
def test_a_killed_target_is_named_as_the_cause(tmp_path):
    # real compute: the drafter maps the target's shared memory, so it fails too (ConnectionResetError
    # or similar); the message must name the target that was killed, not only the drafter
    out = tmp_path / "kt.jsonl"
    p = _start(out, "--targets", "2", "--drafters", "1", "--steps", "100000")
    target = next(w for w in _session(p.pid) if _comm(w) == "dfl-target-0")
    os.kill(target, signal.SIGKILL)
    _, err = p.communicate(timeout=TIMEOUT_S)
    assert p.returncode == 1, err
    end = _parse(out)[-1]
    assert end["ev"] == "end" and end["reason"] == "error"
    assert end["msg"].startswith("target 0 was killed by SIGKILL (exit code -9) before finishing"), end["msg"]
    assert err.splitlines()[-1] == f"dflash-train: error: {end['msg']}"
    assert _wait_gone(p.pid) == set()


def _fsize_limit(nbytes: int):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))

    return limit


@pytest.mark.slow
def test_a_disk_that_fills_mid_run_ends_it_cleanly(tmp_path):
    # the mechanism: RLIMIT_FSIZE on the run (Python ignores SIGXFSZ, so a write past the limit fails with
    # EFBIG after a short write), which is what a full disk does with ENOSPC; /dev/full itself is refused
    # up front. Emulated workers pass no shared-memory tensors, so only the log meets the limit.
    out = tmp_path / "full.jsonl"
    limit = 30000
    p = _start(out, *EMULATE, steps_before=0, preexec_fn=_fsize_limit(limit))
    _, err = p.communicate(timeout=TIMEOUT_S)
    assert p.returncode == 1, err
    events = _parse(out)
    assert out.stat().st_size <= limit and events[0]["ev"] == "run"
    if events[-1]["ev"] == "end":  # it fits when the cut-off partial line was longer than it
        assert events[-1]["reason"] == "error" and "File too large" in events[-1]["msg"]
    assert err.splitlines()[-1].startswith(f"dflash-train: error: cannot write the log {out}: File too large")
    assert "Traceback" not in err
    assert _wait_gone(p.pid) == set()


def _run(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(_cmd(*args), cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=_env())


def _one_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_output_paths_are_checked_before_any_worker_starts(tmp_path):
    existing = tmp_path / "old.jsonl"
    existing.write_text("{}\n")
    cases = [
        (tmp_path / "missing" / "x.jsonl", "directory {p.parent} does not exist"),
        (tmp_path, "is a directory; give a file path"),
        (Path("/dev/full"), "is a character device, not a regular file; give a file path"),
        (existing, "exists; give --force to overwrite it"),
    ]
    if os.geteuid() == 0:  # root writes anywhere permissions allow; sysfs refuses it a new file
        cases.append((Path("/sys/x.jsonl"), "permission denied"))
    else:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        cases.append((ro / "x.jsonl", "permission denied"))
    for p, reason in cases:
        line = _one_line(_run("--out", str(p)))
        assert line == f"dflash-train: {p}: {reason.format(p=p)}"
    assert existing.read_text() == "{}\n"


@pytest.mark.parametrize(
    "args,expect",
    [
        (("--seed", "-1"), "dflash-train: --seed: must be a whole number from 0 to 4294967295, got -1"),
        (("--seed", str(2**40)), "dflash-train: --seed: must be a whole number from 0 to 4294967295"),
        (("--targets", "0"), "dflash-train: --targets: must be a whole number from 1 to 4096, got 0"),
        (("--drafters", "5000"), "dflash-train: --drafters: must be a whole number from 1 to 4096"),
        (("--time-scale", "inf"), "dflash-train: --time-scale: must be a number > 0, got inf"),
        (("--time-scale", "nan"), "dflash-train: --time-scale: must be a number > 0, got nan"),
        (("--steps", "0"), "dflash-train: --steps: must be a whole number from 1"),
        (("--sync-s", "-1"), "dflash-train: --sync-s: must be a number >= 0"),
        (("--hs-queue-depth", "0"), "dflash-train: --hs-cap: must be a whole number from 1"),
        (("--hs-cap", "0"), "dflash-train: --hs-cap: must be a whole number from 1"),
    ],
)
def test_invalid_numbers_exit_2_with_one_line(tmp_path, args, expect):
    out = tmp_path / "x.jsonl"
    assert _one_line(_run(*args, "--out", str(out))).startswith(expect)
    assert not out.exists()


@pytest.mark.parametrize(
    "args,expect",
    [
        (("--device", "gpu"), "dflash-train: Invalid value for '--device': 'gpu' is not one of 'cpu', 'cuda'"),
        (("--model", "70b"), "dflash-train: Invalid value for '--model': '70b' is not one of 'tiny', '234m', '1b'"),
        (("--handoff", "x"), "dflash-train: Invalid value for '--handoff': 'x' is not one of 'auto', 'host'"),
        (("--targets", "x"), "dflash-train: Invalid value for '--targets'"),
        (("--bogus",), "dflash-train: No such option: --bogus"),
    ],
)
def test_bad_flags_exit_2_with_one_line_naming_the_flag(tmp_path, args, expect):
    """Choices and types that click checks: one line like every other bad flag, not a usage box."""
    out = tmp_path / "x.jsonl"
    line = _one_line(_run(*args, "--out", str(out)))
    assert line.startswith(expect) and "dflash-train --help" in line, line
    assert not out.exists()


@pytest.mark.parametrize(
    "content,expect",
    [
        ('{"ev":"run"\n', "{src}:1: is not valid JSON"),
        ("", "{src}"),
        ('{"ev":"run","v":1,"t":0}\n', "{src}"),
        (None, "dflash-train: --emulate: no such log file: {src}"),
    ],
)
def test_an_unusable_emulation_source_exits_2_with_the_advisors_line(tmp_path, content, expect):
    src = tmp_path / "src.jsonl"
    if content is not None:
        src.write_text(content)
    out = tmp_path / "x.jsonl"
    line = _one_line(_run("--emulate", str(src), "--out", str(out)))
    assert expect.format(src=src) in line and line.startswith("dflash-train: ")
    if content is not None:
        from advisor.errors import LogError
        from advisor.ingest.load import load_log

        try:
            load_log(src)
        except LogError as e:  # the advisor's own one-line reason, word for word
            assert line == f"dflash-train: {e}"
    assert not out.exists()


def test_cli_conventions():
    for flag in ("--version", "-V"):
        v = subprocess.run(_cmd(flag), capture_output=True, text=True, timeout=60, env=_env())
        assert v.returncode == 0 and v.stdout.startswith("dflash-train ") and len(v.stdout.splitlines()) == 1
    h1 = subprocess.run(_cmd("-h"), capture_output=True, text=True, timeout=60, env=_env())
    h2 = subprocess.run(_cmd("--help"), capture_output=True, text=True, timeout=60, env=_env())
    assert h1.returncode == 0 and h1.stdout == h2.stdout
    for opt in (
        "--device <cpu|cuda>",
        "--model <tiny|234m|1b|tp-cpu>",
        "--handoff <auto|host>",
        "--force",
        "--version",
        "--hs-cap, --hs-queue-depth",
        "--target-tp <int>",
        "--gpus-per-node <int>",
        "--placement <str>",
    ):
        assert opt in h1.stdout, opt
    bad = subprocess.run(_cmd("--device", "tpu"), capture_output=True, text=True, timeout=60, env=_env())
    assert bad.returncode == 2 and "'tpu' is not one of 'cpu', 'cuda'" in bad.stderr
    # --help stays light: no torch, numpy or pandas behind it
    probe = (
        "import sys\nfrom typer.testing import CliRunner\nfrom trainer.cli import app\n"
        "r = CliRunner().invoke(app, ['-h'])\nassert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in ('torch', 'numpy', 'pandas') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=_env())
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr


CHILD = """
import os, sys, time
from trainer import lifeline
if sys.argv[1] == "watchdog-only":
    real = lifeline._prctl        # as on a system without the parent-death signal
    lifeline._prctl = lambda option, arg: False if option == lifeline.PR_SET_PDEATHSIG else real(option, arg)
print(lifeline.bind_to_parent(int(sys.argv[2]), "target", 7), flush=True)
time.sleep(120)
"""
PARENT = """
import subprocess, sys
c = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], str(__import__("os").getpid())],
                     stdout=subprocess.PIPE, text=True)
print(c.pid, c.stdout.readline().strip(), flush=True)
__import__("time").sleep(120)
"""


@pytest.mark.parametrize("mode", ["pdeathsig", "watchdog-only"])
def test_lifeline_kills_a_worker_whose_parent_died(mode):
    p = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD, mode],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=_env(),
    )
    try:
        pid, armed = p.stdout.readline().split()
        assert armed == ("True" if mode == "pdeathsig" else "False")
        assert _comm(int(pid)) == "dfl-target-7"
        p.kill()
        p.wait(timeout=60)
        assert _wait_gone(p.pid) == set()
    finally:
        if _session(p.pid):
            os.killpg(p.pid, signal.SIGKILL)
        p.stdout.close()
