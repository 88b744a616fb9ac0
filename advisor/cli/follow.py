"""`dflash-advise LOG --follow`: re-advise a growing log until the run ends.

Every ``interval_s`` seconds (an `Options` field, as are ``max_wait_s`` and ``settle_tol``): wait
for a missing log (exit 2 past ``max_wait_s``; None waits for ever); skip a pass where no log
changed (size, mtime); else advise on the whole file(s) again and show the report: redrawn in
place on a terminal, after a separator line elsewhere, one compact JSON document per line with
``fmt="json"`` (JSON Lines). Too little data yet (a `LogError` without a line) is a "waiting for
data" line; a `LogError` naming a line, or a `LogRefused`, is a corrupt log: exit 2.

Each report opens with its verdict's odds (`advisor.decide.odds`) and whether they have settled:
the last ``SETTLE_REFRESHES`` (3) reports agree on the action, the split and the close call, over
them ``p_best`` (0-1) and the expected regret (expected_regret_pct / 100) each span at most ``settle_tol``,
and none is provisional (thin evidence, `advisor.decide.evidence.Evidence.thin`). Only reports
count, so a stalled log neither settles nor unsettles the odds. Text and Markdown say it in one
line (``odds so far:``, ``odds moving:``, ``odds provisional:``, ``odds settled:``); JSON adds
``follow`` (`Settling.to_json`).

Exit codes: 0 when every log has its ``end`` event (also for ``reason`` "error") and on Ctrl-C
after a report (130 before any); 2 when a log ends before it holds enough data, for unusable
options, and when a followed path changes type (a file replaced by a folder; a missing path is
waited for).
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import sys
import time
import zlib
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from advisor import advice  # advice.advise looked up per pass (tests replace it)
from advisor.decide.odds_text import ACTIONS, share_text
from advisor.errors import LogError, LogRefused, internal_error
from advisor.ingest.ranks import expand
from advisor.ingest.reader import MAX_LOG_BYTES, open_log
from advisor.present.json import advice_json
from advisor.present.text import render
from advisor.settings import SETTLE_REFRESHES, Options

CLEAR = "\x1b[H\x1b[2J"  # cursor home + erase screen
TAIL_BYTES = 64 << 10  # enough of a log's end to find its 'end' event
EXIT_OK, EXIT_UNUSABLE, EXIT_INTERRUPTED = 0, 2, 130

_sleep = time.sleep  # swapped by tests to simulate Ctrl-C


def _signature(paths: Sequence[Path]) -> tuple[tuple[int, int], ...] | None:
    """(size, mtime_ns) per log, or None while any is missing."""
    sig = []
    for p in paths:
        try:
            st = p.stat()
        except FileNotFoundError:
            return None
        sig.append((st.st_size, st.st_mtime_ns))
    return tuple(sig)


def _lines_and_tail(path: Path) -> tuple[int, bytes]:
    """Whole lines written so far (a gzip stream still being written counts what decodes), and the
    last `TAIL_BYTES` of them; read as the loader opens a log (a FIFO or device is refused, never
    opened), at most its MAX_LOG_BYTES (a bomb stays bounded)."""
    n, tail, total = 0, b"", 0
    try:
        fh, raw = open_log(path)
        with fh, raw:
            while total < MAX_LOG_BYTES and (chunk := fh.read(1 << 20)):
                total += len(chunk)
                n += chunk.count(b"\n")
                tail = (tail + chunk)[-TAIL_BYTES:]
    except (OSError, EOFError, zlib.error, LogError):
        pass
    return n, tail


def _has_ended(data: bytes) -> bool:
    """Whether a log's tail holds an 'end' event (used only when advise could not run)."""
    for raw in data.splitlines()[::-1]:
        if b'"end"' not in raw:
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("ev") == "end":
            return True
    return False


@dataclass(frozen=True)
class OddsPoint:
    """The odds of one report's verdict: what settling compares from report to report."""

    action: str  # the action without a probe: stay, switch, next-run
    split: str  # the recommended split, "N-M"
    p_best: float  # 0-1: the split within the resolution of the best
    expected_regret_pct: float  # expected shortfall against the best, %
    close_call: bool
    provisional: bool = False  # the verdict rests on thin evidence (`advisor.decide.evidence.Evidence.thin`)

    @classmethod
    def of(cls, adv: Any) -> OddsPoint:
        """The point of an advice's decision."""
        d = adv.decision
        return cls(
            action=(d.action or d.verdict).value,
            split=d.recommended,
            p_best=float(d.p_best),
            expected_regret_pct=float(d.expected_regret_pct),
            close_call=bool(d.close_call),
            provisional=d.evidence.thin,
        )


class Settling:
    """Whether the odds have settled over the last `SETTLE_REFRESHES` reports (module docstring)."""

    def __init__(self, tol: float):
        self.tol = tol
        self.count = 0
        self.points: deque[OddsPoint] = deque(maxlen=SETTLE_REFRESHES)

    def add(self, point: OddsPoint) -> None:
        """Count one report and keep its point among the last ones."""
        self.count += 1
        self.points.append(point)

    def spread(self) -> tuple[float, float]:
        """p_best's span and the expected regret's over the last reports (one at least)."""
        pts = self.points
        return (
            max(p.p_best for p in pts) - min(p.p_best for p in pts),
            max(p.expected_regret_pct for p in pts) - min(p.expected_regret_pct for p in pts),
        )

    def state(self) -> str:
        """Settled: the last reports agree on the action, split and close call and their odds span
        at most ``tol``, none provisional; "provisional": so, but on thin evidence; "so far": too
        few reports yet; "changed": the pick changed; "moving": the odds moved more."""
        sp, full = self.spread(), len(self.points) == SETTLE_REFRESHES
        changed = len({(p.action, p.split, p.close_call) for p in self.points}) > 1
        if full and not changed and sp[0] <= self.tol + 1e-12 and sp[1] / 100.0 <= self.tol + 1e-12:
            return "provisional" if any(p.provisional for p in self.points) else "settled"
        return "so far" if not full else "changed" if changed else "moving"

    def line(self) -> str:
        """``odds settled: STAY with 7-1, >99% likely the best, expected regret 0.00%; ...``."""
        pt = self.points[-1]
        act = next((w for v, w in ACTIONS.items() if v.value == pt.action), pt.action)
        odds = (
            f"{act} {pt.split}, {share_text(pt.p_best)} likely the best, expected regret {pt.expected_regret_pct:.2f}%"
            + (", a close call" if pt.close_call else "")
        )
        n, state = len(self.points), self.state()
        rule = f"p_best and regret within {self.tol:g}"
        if state == "settled":
            return f"odds settled: {odds}; unchanged, {rule}, over the last {n} refreshes"
        if state == "provisional":
            return (
                f"odds provisional: {odds}; unchanged, {rule}, over the last {n} refreshes, but on thin "
                f"evidence (the verdict below is provisional), so not settled"
            )
        if state == "so far":
            return f"odds so far: {odds}; {n} of the {SETTLE_REFRESHES} refreshes needed to tell whether they settle"
        if state == "changed":
            return f"odds moving: {odds}; the pick changed within the last {n} refreshes"
        p_best, regret = self.spread()
        moved = f"p_best moved {p_best:.3f}, regret {regret:.2f} points"
        return f"odds moving: {odds}; {moved} over the last {n} refreshes ({rule})"

    def to_json(self) -> dict[str, Any]:
        """The ``follow`` member of a JSON report (module docstring)."""
        pt, sp = self.points[-1], self.spread()
        return {
            "refresh": self.count,
            "settled": self.state() == "settled",
            "settle_tol": self.tol,
            "settle_refreshes": SETTLE_REFRESHES,
            "odds": {**asdict(pt), **_rounded(pt.p_best, pt.expected_regret_pct)},
            "spread": _rounded(*sp),
        }


def _rounded(p_best: float, regret_pct: float) -> dict[str, float]:
    """p_best and the expected regret as the JSON writes them."""
    return {"p_best": round(p_best, 4), "expected_regret_pct": round(regret_pct, 2)}


def _render(adv: Any, fmt: str, settling: Settling) -> str:
    if fmt == "json":
        return json.dumps({**advice_json(adv), "follow": settling.to_json()}, separators=(",", ":")) + "\n"
    return f"{settling.line()}\n\n{render(adv, fmt)}"


class _Screen:
    """Where reports go: redrawn in place on a terminal, appended with separators elsewhere."""

    def __init__(self, out: TextIO, fmt: str):
        self.out = out
        self.fmt = fmt
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.last_status = None
        self.shown = False  # a report is on screen

    def report(self, text: str, lines: int, ended: bool) -> None:
        state = "run ended" if ended else "following"
        head = f"{state}; {lines} lines read at {time.strftime('%H:%M:%S')}" + ("" if ended else "; Ctrl-C to stop")
        if self.tty:
            self.out.write(f"{CLEAR}{head}\n\n{text}")
        elif self.fmt == "json":
            self.out.write(text)
        else:
            self.out.write(f"----- {head} -----\n{text}")
        self.out.flush()
        self.last_status = None
        self.shown = True

    def status(self, line: str) -> None:
        """A waiting line: redrawn on a terminal, printed once per change elsewhere."""
        if line == self.last_status:
            return
        self.last_status = line
        if self.tty:
            self.out.write(f"{CLEAR}{line}\n")
            self.out.flush()
        else:
            # keep a JSON stream parseable: status lines go to stderr
            dest = sys.stderr if self.fmt == "json" else self.out
            dest.write(line + "\n")
            dest.flush()


def _err(msg: str) -> None:
    sys.stderr.write(f"dflash-advise: {msg}\n")
    sys.stderr.flush()


def _files(args: Sequence[Path]) -> list[Path]:
    """The log files the arguments name now (directories and globs expanded; [] while none exist)."""
    out: list[Path] = []
    for a in args:
        try:
            out += expand(a)[0]
        except LogError:
            return []
    return out


def _kind_changed(args: Sequence[Path], kinds: dict[Path, str]) -> bool:
    """An argument that waiting will not make readable (a name too long, a loop of links, ...), or
    that was a file and is now a folder (or any other change of type): said, and True.

    A missing path is no change (a log rotated or re-created); the first kind seen is remembered."""
    for a in args:
        try:
            mode = os.stat(a).st_mode
        except FileNotFoundError:
            continue  # may appear later
        except OSError as e:
            _err(f"{a}: cannot be read ({e.strerror or e})")
            return True
        now = "file" if stat.S_ISREG(mode) else "folder" if stat.S_ISDIR(mode) else "special file"
        was = kinds.setdefault(a, now)
        if now != was:
            _err(f"{a}: was a {was} and is now a {now}; --follow reads what it started on: start it again")
            return True
    return False


def _wait_missing(
    paths: Sequence[Path], screen: _Screen, missing_since: float | None, max_wait_s: float | None
) -> float | None:
    """Show which logs are awaited; returns since when, or None once waited past ``max_wait_s`` (said)."""
    now = time.monotonic()
    missing_since = now if missing_since is None else missing_since
    gone = [str(p) for p in paths if not p.exists()]
    if max_wait_s is not None and now - missing_since > max_wait_s:
        _err(f"{gone[0]}: no such file (waited {max_wait_s:g} s for it)")
        return None
    screen.status(f"waiting for {', '.join(gone)} to appear")
    return missing_since


def _advise_pass(
    args: Sequence[Path], paths: Sequence[Path], screen: _Screen, options: Options, settling: Settling
) -> int | None:
    """Advise on changed logs: a report, or a waiting line; the exit code when following must stop."""
    # counted before advising so that the count never runs ahead of what was read
    scans = [_lines_and_tail(p) for p in paths]
    n_lines = sum(n for n, _ in scans)
    try:
        adv = advice.advise(args, options)
    except LogError as e:
        if e.line is not None or isinstance(e, LogRefused):  # waiting will not cure it
            _err(str(e))
            return EXIT_UNUSABLE
        if all(_has_ended(tail) for _, tail in scans):
            _err(f"the run ended before the log held enough data for advice: {e}")
            return EXIT_UNUSABLE
        screen.status(f"waiting for data ({n_lines} lines so far): {e.message}")
        return None
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        # a .gz log being written cannot be decoded to its end yet
        screen.status(f"waiting for data ({n_lines} lines so far): {e}")
        return None
    except ValueError as e:
        _err(str(e))
        return EXIT_UNUSABLE
    except Exception as e:  # a bug: one line and 2, never a traceback or a verdict
        _err(internal_error(e, paths))
        return EXIT_UNUSABLE
    ended = all(lg.end is not None for lg in adv.logs)
    settling.add(OddsPoint.of(adv))
    screen.report(_render(adv, screen.fmt, settling), sum(lg.n_lines for lg in adv.logs), ended)
    return EXIT_OK if ended else None


def _interrupted(screen: _Screen) -> int:
    """Ctrl-C: the last report stays as the final one (0); with none shown, 130."""
    if screen.shown:
        if screen.fmt != "json":
            screen.out.write("\nstopped (Ctrl-C); the report above is the last one\n")
            screen.out.flush()
        return EXIT_OK
    _err("interrupted before any advice could be given")
    return EXIT_INTERRUPTED


def follow_logs(
    paths: Sequence[str | Path],
    options: Options | None = None,
    /,
    *,
    fmt: str = "text",
    out: TextIO | None = None,
    **given: Any,
) -> int:
    """Refresh the advice for growing log(s) until they end."""
    if fmt not in ("text", "markdown", "json"):
        raise ValueError(f"fmt must be text, markdown or json, got {fmt!r}")
    options = Options.of(options, **given)
    args = [Path(p) for p in paths]
    if not args:
        _err("no log file given")
        return EXIT_UNUSABLE
    screen = _Screen(out if out is not None else sys.stdout, fmt)
    last_sig, missing_since, kinds = None, None, {}
    settling = Settling(options.settle_tol)
    try:
        while True:
            if _kind_changed(args, kinds):
                return EXIT_UNUSABLE
            # a run directory (or glob) may gain per-rank files while it is followed: expand anew
            paths = _files(args)
            sig = _signature(paths) if paths else None
            if sig is None:
                missing_since = _wait_missing(paths or args, screen, missing_since, options.max_wait_s)
                if missing_since is None:
                    return EXIT_UNUSABLE
                last_sig = None
            else:
                missing_since = None
                bad = next((p for p in paths if not p.is_file() or not os.access(p, os.R_OK)), None)
                if bad is not None:
                    _err(f"{bad}: not a readable file")
                    return EXIT_UNUSABLE
                if sig != last_sig:
                    last_sig = sig
                    code = _advise_pass(args, paths, screen, options, settling)
                    if code is not None:
                        return code
            _sleep(options.interval_s)
    except KeyboardInterrupt:
        return _interrupted(screen)
