"""The bad-input battery: every input the CLI can be handed is answered by the exit-code contract.

Each case builds files (or options), runs `dflash-advise` (advise; `check` too where the input is
refused, and the gate's own inputs; `what-if` for its options) and asserts:

- exit 0 with output (usable, possibly with caveats), or exit 1 only from `check` printing FAIL;
- exit 2 with exactly one stderr line, ``dflash-advise: ...``, naming the file (or the option),
  and, where the case pins it, the line and field;
- never a traceback and never "internal error" (that would be a bug caught by the last guard);
- never a hang: every in-process run is under a SIGALRM timeout, every subprocess under one.

Memory: cases whose danger *is* memory or an endless read (compression bombs, a 64 MiB line,
/dev/urandom, a FIFO, a plot spanning years) run as subprocesses under ``RLIMIT_AS`` =
``MEMORY_CAP_BYTES`` (set in ``preexec_fn``): the kernel bound covers every allocator (numpy,
polars' own, the interpreter), which tracemalloc cannot see (polars' allocator bypasses it),
and an overrun shows as an "out of memory" line the test rejects. Thread pools are pinned
to 2 so that the address space a process reserves does not grow with the machine's cores. The
other cases use small inputs and run in-process (fast), through `advisor.cli.app.main` itself so
that its guard is part of what is tested, with a strict UTF-8 stdout like a real pipe's.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import FIXTURES, HEADER, ROOT, good_lines, step

from advisor.cli.app import main
from advisor.errors import display_path

MEMORY_CAP_BYTES = 1536 << 20
TIMEOUT_S = 60

# ----------------------------------------------------------------------------- running


class _Hang(BaseException):
    """Raised by SIGALRM; a BaseException so that no `except Exception` guard swallows it."""


def run_inproc(args: list[str], timeout_s: int = TIMEOUT_S) -> tuple[int, str, str]:
    out_b, err_b = io.BytesIO(), io.BytesIO()
    # strict UTF-8 like a pipe or terminal: an unprintable string in the output fails here too
    out = io.TextIOWrapper(out_b, encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(err_b, encoding="utf-8", errors="backslashreplace", write_through=True)

    def alarm(*_):
        raise _Hang()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(timeout_s)
    code: object = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            main([str(a) for a in args])
    except SystemExit as e:
        code = e.code
    except _Hang:
        pytest.fail(f"dflash-advise {args} ran longer than {timeout_s} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out.flush()
    err.flush()
    return (0 if code is None else code), out_b.getvalue().decode("utf-8", "replace"), err_b.getvalue().decode()


def _limits() -> None:  # runs in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def run_subprocess(args: list[str], timeout_s: int = TIMEOUT_S) -> tuple[int, str, str]:
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        OMP_NUM_THREADS="2",
        POLARS_MAX_THREADS="2",
        OPENBLAS_NUM_THREADS="2",
        MKL_NUM_THREADS="2",
        MALLOC_ARENA_MAX="2",
        MPLBACKEND="Agg",
    )
    try:
        r = subprocess.run(
            [sys.executable, "-c", "from advisor.cli.app import main; main()", *map(str, args)],
            capture_output=True,
            timeout=timeout_s,
            preexec_fn=_limits,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"dflash-advise {args} ran longer than {timeout_s} s")
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


def assert_contract(
    code: int, out: str, err: str, *, cmd: str, named: str, expect: int | None = None, needle: str | None = None
) -> None:
    ctx = f"exit {code}\nstdout: {out[:500]!r}\nstderr: {err[:1500]!r}"
    assert "Traceback" not in out + err, ctx
    assert "internal error" not in err and "out of memory" not in err, ctx
    if expect is not None:
        assert code == expect or (expect == 0 and cmd == "check" and code == 1), ctx
    if code == 0:
        assert out.strip(), ctx
    elif code == 1:
        assert cmd == "check" and out.startswith("FAIL"), ctx  # a genuine verdict, nothing else
    else:
        assert code == 2, ctx
        lines = err.rstrip("\n").split("\n")
        assert len(lines) == 1 and lines[0].startswith("dflash-advise: "), ctx
        assert display_path(named) in lines[0], ctx
        if needle is not None:
            assert needle in lines[0], ctx


# ----------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[[Path], tuple[list[str], str]]  # tmp dir -> (argv, what the error must name)
    expect: int | None = None  # 0 or 2 when the case pins it; None: either
    needle: str | None = None  # in the error line, with {f} for the file name
    check: bool = True  # also run `check` when advise refuses (logs)


CASES: list[Case] = []
SUBPROCESS_CASES: list[Case] = []


def lines_text(lines) -> str:
    return "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)


BASE = good_lines(60)  # header, 120 steps, end: usable
SYNC = {"ev": "sync", "t": 5.05, "role": "drafter", "workers": 1, "dur": 0.01, "bytes": 1000.0}
RATES = {
    "ev": "rates",
    "t": 6.0,
    "window": 1.0,
    "bps": {"target": 4.0, "drafter": 4.0},
    "cap_bps": {"target": 8.0, "drafter": 10.0},
    "tok_s": 3600.0,
    "eta_s": 100.0,
    "done": 0.1,
    "q": {"pre": [1, 2], "hs": 3},
}
FULL = BASE[:20] + [SYNC] + BASE[20:40] + [RATES] + BASE[40:]  # sync at line 21, rates at line 42
STEP_LINE, SYNC_LINE, RATES_LINE, END_LINE = 12, 21, 42, len(FULL)


def file_case(
    id: str,
    content: bytes | str | Callable[[Path], bytes],
    *,
    name: str = "log.jsonl",
    expect: int | None = None,
    needle: str | None = None,
    extra: tuple[str, ...] = (),
    check: bool = True,
    into: list[Case] | None = None,
) -> None:
    def make(tmp: Path) -> tuple[list[str], str]:
        p = tmp / name
        data = content(tmp) if callable(content) else content
        p.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
        return [str(p), *extra], str(p)

    (CASES if into is None else into).append(Case(id, make, expect, needle, check))


def replaced(line_no: int, key: str, raw_value: str, lines=FULL) -> str:
    """The log text with ``key`` of line ``line_no`` (1-based) set to the raw JSON token."""
    out = []
    for i, obj in enumerate(lines, 1):
        text = json.dumps(obj)
        if i == line_no:
            o = dict(obj)
            path = key.split(".")
            if len(path) == 1:
                o[key] = "@@"
            else:
                o[path[0]] = dict(o[path[0]], **{path[1]: "@@"})
            text = json.dumps(o).replace('"@@"', raw_value)
        out.append(text)
    return "\n".join(out) + "\n"


def removed(line_no: int, key: str, lines=FULL) -> str:
    return lines_text([{k: v for k, v in o.items() if k != key} if i == line_no else o for i, o in enumerate(lines, 1)])


NONFINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity", "1e400": "1e400", "-1e400": "-1e400"}
OTHER_NUMBERS = {
    "1e308": "1e308",
    "int40": "1" + "0" * 40,
    "int5000": "9" * 5000,
    "neg": "-1",
    "1e15": "1e15",
    "half": "0.5",
    "negzero": "-0.0",
    "zero": "0",
}
WRONG_TYPES = {"true": "true", "false": "false", "str": '"1"', "null": "null", "list": "[]", "obj": "{}"}
STEP_FIELDS = ("t", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss")

# --- non-finite and huge numbers in every numeric field of every event type
for f in STEP_FIELDS:
    for vid, tok in NONFINITE.items():
        file_case(f"step-{f}-{vid}", replaced(STEP_LINE, f, tok), expect=2, needle=f":{STEP_LINE}: field '{f}'")
    for vid, tok in OTHER_NUMBERS.items():
        file_case(f"step-{f}-{vid}", replaced(STEP_LINE, f, tok))
for f in ("t", "workers", "dur", "bytes"):
    for vid, tok in NONFINITE.items():
        file_case(f"sync-{f}-{vid}", replaced(SYNC_LINE, f, tok), expect=2, needle=f":{SYNC_LINE}: field '{f}'")
    for vid in ("int40", "neg", "1e15", "half"):
        file_case(f"sync-{f}-{vid}", replaced(SYNC_LINE, f, OTHER_NUMBERS[vid]))
for f in ("t", "window", "tok_s", "eta_s", "done", "bps.target", "cap_bps.drafter", "q.hs"):
    field_name = "q" if f.startswith("q.") else f
    for vid, tok in NONFINITE.items():
        file_case(
            f"rates-{f}-{vid}", replaced(RATES_LINE, f, tok), expect=2, needle=f":{RATES_LINE}: field '{field_name}'"
        )
    for vid in ("int40", "neg", "1e15"):
        file_case(f"rates-{f}-{vid}", replaced(RATES_LINE, f, OTHER_NUMBERS[vid]))
for vid, tok in NONFINITE.items():
    file_case(
        f"rates-qlist-{vid}", replaced(RATES_LINE, "q.pre", f"[1, {tok}]"), expect=2, needle=f":{RATES_LINE}: field 'q'"
    )
    file_case(f"end-t-{vid}", replaced(END_LINE, "t", tok), expect=2, needle=f":{END_LINE}: field 't'")
HEADER_FIELDS = (
    "gpus",
    "t",
    "token_budget",
    "samples",
    "epochs",
    "sync_every",
    "hs_bytes_per_token",
    "roles.target",
    "roles.drafter",
)
for f in HEADER_FIELDS:
    named = "roles" if f.startswith("roles") else f
    for vid, tok in NONFINITE.items():
        file_case(f"header-{f}-{vid}", replaced(1, f, tok), expect=2, needle=f":1: field '{named}'")
    for vid in ("int40", "int5000", "neg", "half", "zero", "1e15"):
        file_case(f"header-{f}-{vid}", replaced(1, f, OTHER_NUMBERS[vid]))
for vid, tok in {"4097": "4097", "1e12": "1e12", "int40": "1" + "0" * 40}.items():
    file_case(f"header-gpus-limit-{vid}", replaced(1, "gpus", tok), expect=2, needle=":1: field 'gpus'")
    file_case(f"header-roles-limit-{vid}", replaced(1, "roles.target", tok), expect=2, needle=":1: field 'roles'")
for vid, cap in {"nan": "NaN", "inf": "Infinity", "1e12": "1e12", "neg": "-1", "true": "true", "str": '"20"'}.items():
    file_case(
        f"header-hs-cap-{vid}",
        lines_text(
            [
                dict(
                    HEADER,
                    queues=[
                        {"name": "pre", "feeds": "target", "cap": 4, "per_worker": True},
                        {"name": "hs", "feeds": "drafter", "cap": "@@"},
                    ],
                )
            ]
            + FULL[1:]
        ).replace('"@@"', cap),
        expect=2,
        needle=":1: field 'queues'",
    )

# --- wrong types, booleans included
for f in STEP_FIELDS:
    for vid, tok in WRONG_TYPES.items():
        required = f in ("t", "worker", "tokens", "busy")
        pinned = vid in ("true", "false", "str", "list", "obj") or required
        file_case(
            f"step-{f}-{vid}",
            replaced(STEP_LINE, f, tok),
            expect=2 if pinned else None,
            needle=f":{STEP_LINE}: field '{f}'" if pinned else None,
        )
for f, toks in {"ev": ("5", "true", "null", "[]", '""'), "role": ("5", "true", "null", '"loader"', '""')}.items():
    for tok in toks:
        file_case(f"step-{f}-{tok}", replaced(STEP_LINE, f, tok), expect=2, needle=f":{STEP_LINE}:")
for f in ("dur", "workers", "t"):
    for vid in ("true", "str", "list"):
        file_case(
            f"sync-{f}-{vid}", replaced(SYNC_LINE, f, WRONG_TYPES[vid]), expect=2, needle=f":{SYNC_LINE}: field '{f}'"
        )
for f, toks in {"bps": ("5", "true", "[]", "null"), "q": ("5", "true", '"x"'), "cap_bps": ("5", "[1]")}.items():
    for tok in toks:
        file_case(f"rates-{f}-{tok}", replaced(RATES_LINE, f, tok), expect=2, needle=f":{RATES_LINE}: field '{f}'")
file_case("rates-bps-bool", replaced(RATES_LINE, "bps.target", "true"), expect=2, needle="field 'bps.target'")
file_case("rates-qlist-bool", replaced(RATES_LINE, "q.pre", "[true, 1]"), expect=2, needle="field 'q'")
file_case("rates-qlist-null", replaced(RATES_LINE, "q.pre", "[null, 1]"), expect=2, needle="field 'q'")
for tok in ("5", "true", "null", "[]", '{"x": 1}'):
    file_case(
        f"end-reason-{tok}",
        replaced(END_LINE, "reason", tok),
        expect=None if tok == "null" else 2,
        needle=None if tok == "null" else f":{END_LINE}: field 'reason'",
    )
for reason in ("crashed", "DONE", "done ", ""):
    file_case(
        f"end-reason-word-{reason!r}",
        replaced(END_LINE, "reason", json.dumps(reason)),
        expect=2,
        needle=f":{END_LINE}: field 'reason'",
    )
for f, toks in {
    "gpus": ("true", '"8"', "[]"),
    "roles": ("true", "[]", '"x"', "{}", '{"target": 1}', '{"target": true, "drafter": 1}', '{"": 1, "drafter": 1}'),
    "queues": (
        "5",
        '"x"',
        "{}",
        "[5]",
        '[{"name": 5, "feeds": "drafter", "cap": 1}]',
        '[{"name": "hs", "feeds": "drafter", "cap": 1, "per_worker": "yes"}]',
        '[{"name": "hs", "cap": 1}]',
        '[{"name": "hs", "feeds": "loader", "cap": 1}]',
    ),
    "v": ("2", '"1"', "true"),
    "run": ("5", "true", "[]"),
    "t": ("true", '"0"'),
    "token_budget": ("true", '"32768"'),
}.items():
    for tok in toks:
        file_case(f"header-{f}-{tok}", replaced(1, f, tok), expect=2, needle=":1: field")
for tok in ("[1, 2]", '"step"', "5", "null", "true", "[]"):
    file_case(f"body-line-{tok}", lines_text(FULL[:5]) + tok + "\n" + lines_text(FULL[5:]), expect=2, needle=":6:")
    file_case(f"header-line-{tok}", tok + "\n" + lines_text(FULL[1:]), expect=2, needle=":1:")

# --- missing fields, per event type
for f in ("t", "worker", "tokens", "busy", "role", "ev"):
    file_case(f"missing-step-{f}", removed(STEP_LINE, f), expect=2, needle=f":{STEP_LINE}: field '{f}'")
for f in ("batch", "seqs", "wait", "blocked", "loss"):
    file_case(f"missing-step-{f}", removed(STEP_LINE, f), expect=0)
for f in ("t", "dur"):
    file_case(f"missing-sync-{f}", removed(SYNC_LINE, f), expect=2, needle=f":{SYNC_LINE}: field '{f}'")
for f in ("workers", "bytes", "role"):
    file_case(f"missing-sync-{f}", removed(SYNC_LINE, f), expect=0)
for f in ("t", "bps"):
    file_case(f"missing-rates-{f}", removed(RATES_LINE, f), expect=2, needle=f":{RATES_LINE}: field '{f}'")
for f in ("window", "cap_bps", "q", "tok_s", "eta_s", "done"):
    file_case(f"missing-rates-{f}", removed(RATES_LINE, f), expect=0)
file_case("missing-end-t", removed(END_LINE, "t"), expect=2, needle=f":{END_LINE}: field 't'")
file_case("missing-end-reason", removed(END_LINE, "reason"), expect=0)
for f in ("ev", "roles", "t"):
    file_case(f"missing-header-{f}", removed(1, f), expect=2, needle=":1: field")
for f in ("v", "gpus", "queues", "run", "token_budget", "samples", "epochs"):
    file_case(f"missing-header-{f}", removed(1, f), expect=0)
for vid, name in {"surrogate": "\\ud800", "newline": "a\\nb", "long": "x" * 100_000, "html": "<b>@here</b>"}.items():
    file_case(
        f"unknown-event-name-{vid}",
        lines_text(FULL[:5]) + f'{{"ev": "{name}", "t": 1.0}}\n' + lines_text(FULL[5:]),
        expect=0,
    )
file_case(
    "many-unknown-event-names",
    lines_text(FULL[:5] + [{"ev": f"e{i}", "t": 1.0} for i in range(500)] + FULL[5:]),
    expect=0,
)
file_case("unknown-event-without-t", lines_text(FULL[:5] + [{"ev": "heartbeat"}] + FULL[5:]), expect=0)
file_case(
    "unknown-event-nan-t",
    lines_text(FULL[:5]) + '{"ev": "heartbeat", "t": NaN}\n' + lines_text(FULL[5:]),
    expect=2,
    needle=":6: field 't'",
)

# --- duplicate or conflicting headers, concatenated runs
OTHER = dict(HEADER, roles={"target": 1, "drafter": 2}, run="other")
for where in (2, 30, END_LINE):
    file_case(
        f"second-header-at-{where}",
        lines_text(FULL[: where - 1] + [HEADER] + FULL[where - 1 :]),
        expect=2,
        needle=f":{where}: field 'ev'",
    )
    file_case(
        f"second-header-other-roles-at-{where}",
        lines_text(FULL[: where - 1] + [OTHER] + FULL[where - 1 :]),
        expect=2,
        needle=f":{where}: field 'ev'",
    )
file_case(
    "header-duplicate-queue-names",
    lines_text([dict(HEADER, queues=HEADER["queues"] + [HEADER["queues"][1]])] + FULL[1:]),
    expect=2,
    needle=":1: field 'queues'",
)
file_case(
    "header-duplicate-json-key",
    json.dumps(HEADER)[:-1] + ', "gpus": 100000}\n' + lines_text(FULL[1:]),
    expect=2,
    needle=":1: field 'gpus'",
)
file_case("header-gpus-below-roles", replaced(1, "gpus", "2"), expect=2, needle=":1: field 'gpus'")
file_case(
    "step-duplicate-json-key",
    lines_text(FULL[:11]) + json.dumps(FULL[11])[:-1] + ', "busy": 0.2}\n' + lines_text(FULL[12:]),
)
file_case(
    "step-worker-out-of-range", replaced(STEP_LINE, "worker", "2"), expect=2, needle=f":{STEP_LINE}: field 'worker'"
)
CPU, H200 = (FIXTURES / "cpu-2x1.jsonl").read_bytes(), (FIXTURES / "h200-2x1.jsonl").read_bytes()
N_CPU = CPU.count(b"\n")
file_case("concatenated-runs", CPU + H200, expect=2, needle=f":{N_CPU + 1}: field 'ev'")
file_case("concatenated-same-run", CPU + CPU, expect=2, needle=f":{N_CPU + 1}: field 'ev'")
file_case("concatenated-without-newline", CPU.rstrip(b"\n") + H200, expect=2, needle=f":{N_CPU}:")
file_case(
    "concatenated-gzip-members",
    gzip.compress(CPU) + gzip.compress(H200),
    name="two.jsonl.gz",
    expect=2,
    needle=f":{N_CPU + 1}: field 'ev'",
)
file_case(
    "two-objects-one-line",
    lines_text(FULL[:5]) + json.dumps(FULL[5]) + json.dumps(FULL[6]) + "\n" + lines_text(FULL[7:]),
    expect=2,
    needle=":6:",
)
file_case(
    "object-split-over-two-lines",
    lines_text(FULL[:5]) + json.dumps(FULL[5]).replace(", ", ",\n", 1) + "\n" + lines_text(FULL[6:]),
    expect=2,
    needle=":6:",
)

# --- encodings
TEXT = lines_text(FULL)
file_case("utf16-bom", TEXT.encode("utf-16"), expect=2, needle=":1:")
file_case("utf16-be", TEXT.encode("utf-16-be"), expect=2, needle=":1:")
file_case("utf16-le-nobom", TEXT.encode("utf-16-le"), expect=2, needle=":1:")
file_case("utf32", TEXT.encode("utf-32"), expect=2, needle=":1:")
file_case("utf8-bom", b"\xef\xbb\xbf" + TEXT.encode(), expect=0)
file_case("utf8-bom-every-line", b"".join(b"\xef\xbb\xbf" + ln + b"\n" for ln in TEXT.encode().splitlines()))
file_case("crlf", TEXT.replace("\n", "\r\n").encode(), expect=0)
file_case("cr-only", TEXT.replace("\n", "\r").encode(), expect=2, needle="no complete line")
file_case("latin1-run-name", replaced(1, "run", '"caf\u00e9"').encode("latin-1"), expect=2, needle=":1:")
file_case(
    "latin1-unknown-field",
    lines_text(FULL[:9]).encode()
    + json.dumps(dict(FULL[9], note="@@")).encode().replace(b"@@", b"\xe9t\xe9")
    + b"\n"
    + lines_text(FULL[10:]).encode(),
    expect=2,
    needle=":10:",
)
file_case(
    "cp1252-quotes", replaced(END_LINE, "msg", '"\u201cok\u201d"').encode("cp1252"), expect=2, needle=f":{END_LINE}:"
)
for where, line in (("header", 1), ("body", 7), ("end", END_LINE)):
    data = TEXT.encode().split(b"\n")
    data[line - 1] = data[line - 1][:10] + b"\x00" + data[line - 1][10:]
    file_case(f"nul-in-{where}", b"\n".join(data), expect=2, needle=f":{line}:")
file_case("nul-only", b"\x00" * 4096, expect=2)
file_case("nul-lines", TEXT.encode() + b"\x00\x00\n" * 3, expect=2, needle=f":{END_LINE + 1}:")
for vid, raw in {
    "overlong": b"\xc0\xaf",
    "cont": b"\x80\x80",
    "5byte": b"\xf8\x88\x80\x80\x80",
    "cut": b"\xe2\x82",
}.items():
    file_case(f"bad-utf8-{vid}", TEXT.encode().replace(b'"run": "t"', b'"run": "' + raw + b'"'), expect=2, needle=":1:")
file_case(
    "cut-inside-a-character",
    TEXT.encode() + json.dumps({"ev": "x", "t": 1.0, "m": "\u00e9"}, ensure_ascii=False).encode()[:-3],
    expect=0,
)
for where, key in (("run", "run"), ("hardware", "hardware")):
    file_case(f"surrogate-{where}", replaced(1, key, '"x\\ud800y"'), expect=0)
file_case(
    "surrogate-role-name",
    lines_text(FULL).replace('"drafter"', '"dr\\udfffafter"'),
    expect=2,
    needle=":1: field 'roles'",
)
file_case(
    "surrogate-queue-name",
    replaced(1, "queues", '[{"name": "h\\ud800s", "feeds": "drafter", "cap": 2}]'),
    expect=2,
    needle=":1: field 'queues'",
)
file_case(
    "surrogate-step-role", replaced(STEP_LINE, "role", '"\\ud800"'), expect=2, needle=f":{STEP_LINE}: field 'role'"
)
file_case(
    "surrogate-end-reason", replaced(END_LINE, "reason", '"\\ud800"'), expect=2, needle=f":{END_LINE}: field 'reason'"
)
file_case("surrogate-end-msg", replaced(END_LINE, "msg", '"\\ud800"'))
file_case("escaped-nul-in-run-name", replaced(1, "run", '"a\\u0000b"'), expect=0)
file_case(
    "unicode-run-name",
    replaced(1, "run", json.dumps("r\u00e9sum\u00e9-\u65e5\u672c-\U0001f680", ensure_ascii=False)).encode(),
    expect=0,
)
file_case("html-and-mention-run-name", replaced(1, "run", '"<script>@everyone</script>"'), expect=0)

# --- huge lines and deep nesting (small enough for in-process; the 64 MiB line runs capped below)
PAD = 1 << 20
file_case(
    "body-line-over-limit",
    lines_text(FULL[:5]) + json.dumps(dict(FULL[5], pad="x" * PAD)) + "\n" + lines_text(FULL[6:]),
    expect=2,
    needle=":6: line is longer",
)
file_case(
    "header-line-over-limit",
    json.dumps(dict(HEADER, pad="x" * (2 * PAD))) + "\n" + lines_text(FULL[1:]),
    expect=2,
    needle=":1: line is longer",
)
file_case(
    "body-line-under-limit",
    lines_text(FULL[:5]) + json.dumps(dict(FULL[5], pad="x" * (PAD - 500))) + "\n" + lines_text(FULL[6:]),
    expect=0,
)
file_case("last-line-over-limit-no-newline", TEXT + "x" * (PAD + 10), expect=2, needle=f":{END_LINE + 1}:")
DEEP = "[" * 100_000 + "]" * 100_000
file_case(
    "deep-nesting-header",
    json.dumps(dict(HEADER, deep="@@")).replace('"@@"', DEEP) + "\n" + lines_text(FULL[1:]),
    expect=2,
    needle=":1:",
)
file_case(
    "deep-nesting-body-unknown-field",
    lines_text(FULL[:5]) + json.dumps(dict(FULL[5], deep="@@")).replace('"@@"', DEEP) + "\n" + lines_text(FULL[6:]),
)
file_case(
    "deep-nesting-body-and-bad-line",
    lines_text(FULL[:5])
    + json.dumps(dict(FULL[5], deep="@@")).replace('"@@"', DEEP)
    + "\n"
    + lines_text(FULL[6:9])
    + "not json\n"
    + lines_text(FULL[9:]),
    expect=2,
    needle=":6:",
)
file_case("deep-nesting-whole-line", lines_text(FULL[:5]) + DEEP + "\n" + lines_text(FULL[5:]), expect=2, needle=":6:")
file_case("long-run-name", replaced(1, "run", json.dumps("r" * 500_000)))

# --- truncated and empty files
RAW = TEXT.encode()
HLEN = len(json.dumps(FULL[0])) + 1
for cut in (
    1,
    5,
    20,
    HLEN - 1,
    HLEN,
    HLEN + 1,
    len(RAW) // 4,
    len(RAW) // 2,
    3 * len(RAW) // 4,
    len(RAW) - 2,
    len(RAW) - 1,
):
    file_case(f"truncated-at-{cut}", RAW[:cut])
for vid, raw in {
    "empty": b"",
    "newline": b"\n",
    "newlines": b"\n\n\n",
    "spaces": b"   \t  \n  ",
    "bom": b"\xef\xbb\xbf",
    "braces": b"{}\n",
    "header-only": json.dumps(HEADER).encode() + b"\n",
    "header-and-end": lines_text([HEADER, FULL[-1]]).encode(),
    "end-only": lines_text([FULL[-1]]).encode(),
    "header-and-blanks": json.dumps(HEADER).encode() + b"\n\n\n   \n",
}.items():
    file_case(f"empty-{vid}", raw, expect=2)
file_case("whitespace-lines-in-body", lines_text(FULL[:5]) + "   \n\t\n" + lines_text(FULL[5:]), expect=0)
file_case("blank-lines-before-header", "\n\n" + TEXT, expect=0)

# --- compressed input: valid, corrupt, truncated, mislabelled
GZ = gzip.compress(RAW, mtime=0)
file_case("gzip-valid", GZ, name="log.jsonl.gz", expect=0)
file_case("gzip-named-jsonl", GZ, name="log.jsonl", expect=0)
file_case("plain-named-gz", RAW, name="log.jsonl.gz", expect=0)
for frac in (0.1, 0.5, 0.9, 0.99):
    # the whole lines that decode are kept, as from a plain file cut mid-line (tests/ingest/test_reader.py)
    file_case(f"gzip-truncated-{frac}", GZ[: int(len(GZ) * frac)], name="log.jsonl.gz")
for frac in (0.3, 0.6):
    flipped = bytearray(GZ)
    flipped[int(len(GZ) * frac)] ^= 0xFF
    file_case(f"gzip-corrupt-mid-stream-{frac}", bytes(flipped), name="log.jsonl.gz", expect=2)
bad_crc = bytearray(GZ)
bad_crc[-6] ^= 0x01
file_case("gzip-bad-crc", bytes(bad_crc), name="log.jsonl.gz", expect=2)
file_case("gzip-trailing-garbage", GZ + b"garbage!", name="log.jsonl.gz", expect=2)
# fixed bytes, the first not UTF-8: random ones start with a valid line now and then (a newline
# early on), and the error then names line 2
file_case(
    "gzip-of-random-bytes",
    gzip.compress(b"\xff" + random.Random(412).randbytes(200_000)),
    name="r.jsonl.gz",
    expect=2,
    needle=":1:",
)
file_case("gzip-header-only", gzip.compress(json.dumps(HEADER).encode() + b"\n"), name="h.jsonl.gz", expect=2)
file_case("gzip-empty-content", gzip.compress(b""), name="e.jsonl.gz", expect=2)
file_case("gzip-magic-only", b"\x1f\x8b", name="m.jsonl.gz", expect=2)
file_case("gzip-twice", gzip.compress(GZ), name="twice.jsonl.gz", expect=2, needle=":1:")
file_case("random-bytes", os.urandom(300_000), expect=2)
file_case("zero-bytes-file-gz", b"", name="z.jsonl.gz", expect=2)

# --- logs that parse but cannot be fitted, and the crashes
file_case(
    "every-busy-zero",
    lines_text([dict(o, busy=0) if o.get("ev") == "step" else o for o in FULL]),
    expect=2,
    needle="field 'busy'",
)
file_case(
    "every-tokens-zero",
    lines_text([dict(o, tokens=0) if o.get("ev") == "step" else o for o in FULL]),
    expect=2,
    needle="field 'tokens'",
)
file_case(
    "drafter-busy-zero",
    lines_text([dict(o, busy=0) if o.get("role") == "drafter" and o["ev"] == "step" else o for o in FULL]),
    expect=2,
    needle="field 'busy'",
)
file_case(
    "hs-cap-zero",
    lines_text([dict(HEADER, queues=[HEADER["queues"][0], dict(HEADER["queues"][1], cap=0)])] + FULL[1:]),
    expect=0,
)
file_case(
    "t-1e15",
    lines_text([dict(o, t=o["t"] + 1e15) if o.get("ev") == "step" else o for o in FULL]),
    expect=2,
    needle=":2: field 't'",
)
file_case("huge-role-count", replaced(1, "roles", '{"target": 4000, "drafter": 96}'), extra=("--gpus", "4096"))


# --- odd file names
def name_case(id: str, name: str, expect: int | None = 0, extra: tuple[str, ...] = ()) -> None:
    file_case(f"name-{id}", RAW, name=name, expect=expect, extra=extra)


name_case("spaces", "my run log.jsonl")
name_case("unicode", "r\u00e9sum\u00e9-\u65e5\u672c-\U0001f680.jsonl")
name_case("255-bytes", "a" * 249 + ".jsonl")
name_case("254-bytes-utf8", "\u00e9" * 121 + ".jsonl")
name_case("leading-space", " lead.jsonl")
name_case("tab", "tab\there.jsonl")
name_case("newline", "new\nline.jsonl")
name_case("undecodable-bytes", os.fsdecode(b"bad\xff\xfe.jsonl"))
name_case("html", "<b>x<b>&amp;.jsonl")
name_case("percent-and-quotes", "100% \"q\" 'x'.jsonl")


def leading_dash(tmp: Path) -> tuple[list[str], str]:
    p = tmp / "-x.jsonl"
    p.write_bytes(RAW)
    os.chdir(tmp)  # restored by the test (monkeypatch.chdir)
    return ["-x.jsonl"], "-x.jsonl"


CASES.append(Case("name-leading-dash", leading_dash, 2, "-x.jsonl", check=False))


def leading_dash_with_separator(tmp: Path) -> tuple[list[str], str]:
    p = tmp / "-y.jsonl"
    p.write_bytes(RAW)
    os.chdir(tmp)
    return ["--", "-y.jsonl"], "-y.jsonl"


CASES.append(Case("name-leading-dash-after-separator", leading_dash_with_separator, 0, check=False))


def missing_case(id: str, make_path: Callable[[Path], Path], expect: int = 2, needle: str | None = None) -> None:
    def make(tmp: Path) -> tuple[list[str], str]:
        p = make_path(tmp)
        return [str(p)], str(p)

    CASES.append(Case(id, make, expect, needle))


missing_case("name-300-chars", lambda tmp: tmp / ("a" * 300 + ".jsonl"), needle="too long")
missing_case("name-path-over-4096", lambda tmp: tmp / "/".join(["d" * 200] * 25) / "x.jsonl")
missing_case("name-missing", lambda tmp: tmp / "nope.jsonl", needle="no such file")
missing_case("name-in-missing-folder", lambda tmp: tmp / "no" / "where.jsonl", needle="no such file")
missing_case("name-under-a-file", lambda tmp: (tmp / "f").write_text("x") and tmp / "f" / "x.jsonl")
missing_case("directory", lambda tmp: tmp, needle="directory")


def _loop(tmp: Path) -> Path:
    (tmp / "a").symlink_to(tmp / "b")
    (tmp / "b").symlink_to(tmp / "a")
    return tmp / "a"


missing_case("symlink-loop", _loop)


def _socket(tmp: Path) -> Path:
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp / "sock"))  # the socket file stays after close
    return tmp / "sock"


missing_case("unix-socket", _socket, needle="socket")


def _unreadable(tmp: Path) -> Path:
    p = tmp / "locked.jsonl"
    p.write_bytes(RAW)
    p.chmod(0)
    return p


if os.geteuid() != 0:  # root reads anything
    missing_case("chmod-000", _unreadable, needle="permission denied")


# --- the gate's TOML config
def toml_case(
    id: str,
    body: str | bytes,
    *,
    expect: int | None = 2,
    needle: str | None = None,
    extra: tuple[str, ...] = (),
    log: bytes = RAW,
    named: str | None = None,
) -> None:
    def make(tmp: Path) -> tuple[list[str], str]:
        (tmp / "profile.jsonl").write_bytes(log)
        p = tmp / "gate.toml"
        data = body if isinstance(body, bytes) else ('profile = ["profile.jsonl"]\n' + body).encode()
        p.write_bytes(data)
        return ["check", str(p), *extra], str(tmp / named) if named and not named.startswith("-") else named or str(p)

    CASES.append(Case(f"toml-{id}", make, expect, needle, check=False))


toml_case("valid", "[roles]\ntarget = 2\ndrafter = 1\n[gate]\nmin_efficiency = 0.1\n", expect=0)
toml_case(
    "typo-gate-key",
    "[gate]\nmin_efficency = 0.95\n",
    needle=":3: field 'gate.min_efficency' is not a gate setting; did you mean 'min_efficiency'?",
)
toml_case(
    "role-table",
    "[role]\ntarget = 2\ndrafter = 1\n",
    needle=":2: field 'role' is not a gate config key; did you mean 'roles'?",
)
toml_case("unknown-top-key", "gpu = 3\n", needle="did you mean 'gpus'?")
toml_case("unknown-top-table", "[queue]\nhs = 2\n", needle="did you mean 'queues'?")
toml_case("unknown-queue", "[queues]\nhs = 2\npre = 4\n", needle="field 'queues.pre'")
toml_case("roles-only-target", "[roles]\ntarget = 3\n", needle=":2: field 'roles.drafter' is missing")
toml_case("roles-unknown-role", "[roles]\ntarget = 2\ndrafters = 1\n", needle="did you mean 'drafter'?")
toml_case("roles-sum-differs", "gpus = 3\n[roles]\ntarget = 1\ndrafter = 1\n", needle="field 'roles'")
toml_case(
    "metric-conflict", '[gate]\nmetric = "gpu_util"\nmin_efficiency = 0.9\n', needle="field 'gate.min_efficiency'"
)
for key, val in (
    ("gpus", "true"),
    ("gpus", "100000"),
    ("gpus", '"8"'),
    ("gpus", "1"),
    ("gpus", "nan"),
    ("gpus", "inf"),
    ("gpus", "1e400"),
):
    toml_case(f"gpus-{val}", f"{key} = {val}\n", needle="gpus")
for val in ("0", "-1", "true", "1.5", "99999999999", '"2"', "nan", "inf"):
    toml_case(f"roles-target-{val}", f"[roles]\ntarget = {val}\ndrafter = 1\n", needle="roles")
for val in ("1.5", "-0.1", "nan", "inf", "true", '"0.9"'):
    toml_case(f"threshold-{val}", f"[gate]\nmin_efficiency = {val}\n", needle="gate.min_efficiency")
for val in ("-1", "100000000", "true", '"20"', "2.5"):
    toml_case(f"hs-{val}", f"[queues]\nhs = {val}\n", needle="queues.hs")
toml_case("metric-unknown", '[gate]\nmetric = "speed"\n', needle="gate.metric")
toml_case("profile-missing", b"[roles]\ntarget = 2\n", needle="profile")
toml_case("profile-empty-list", b"profile = []\n", needle="profile")
toml_case("profile-number", b"profile = [1]\n", needle="profile")
toml_case("profile-empty-string", b'profile = [""]\n')
toml_case(
    "profile-is-bad-log",
    "",
    log=RAW.replace(b'"busy": 0.1', b'"busy": NaN', 1),
    named="profile.jsonl",
    needle=":3: field 'busy'",
)
toml_case("profile-missing-file", b'profile = ["nope.jsonl"]\n', named="nope.jsonl", needle="no such file")
toml_case("profile-is-self", b'profile = ["gate.toml"]\n')
toml_case("roles-is-value", "roles = 3\n", needle="field 'roles'")
toml_case("gate-is-value", "gate = 3\n", needle="field 'gate'")
toml_case("not-toml", b"profile = [\n", needle="not valid TOML")
toml_case("deep-nesting", b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n")
toml_case("deep-tables", b"x = " + b"{a = " * 50_000 + b"1" + b"}" * 50_000 + b"\n")
toml_case("utf16", 'profile = ["profile.jsonl"]\n'.encode("utf-16"), needle="UTF-8")
toml_case("latin1", 'profile = ["profile.jsonl"]\n# caf\u00e9\n'.encode("latin-1"), needle=":2:")
toml_case("nul", b'profile = ["profile.jsonl"]\x00\n')
toml_case("huge", b"# " + b"x" * (2 << 20) + b"\n", needle="bytes")
toml_case("empty", b"", needle="profile")
toml_case("cli-overrides", "[gate]\nmin_efficiency = 0.99\n", expect=None, extra=("--min-efficiency", "0.1"))
toml_case(
    "cli-roles-unknown", "", extra=("--roles", "target=2,drafters=1"), named="--roles", needle="did you mean 'drafter'?"
)
toml_case("cli-gpus-huge", "", extra=("--gpus", "100000"), named="--gpus", needle="4096")


def toml_dir(tmp: Path) -> tuple[list[str], str]:
    p = tmp / "dir.toml"
    p.mkdir()
    return ["check", str(p)], str(p)


CASES.append(Case("toml-is-directory", toml_dir, 2, "directory", check=False))


# --- options: check, advise and what-if
def opt_case(
    id: str, args: list[str], named: str, *, expect: int | None = 2, needle: str | None = None, log: bool = True
) -> None:
    def make(tmp: Path) -> tuple[list[str], str]:
        if log:
            (tmp / "log.jsonl").write_bytes(RAW)
        return [str(tmp / "log.jsonl") if a == "LOG" else a for a in args], named

    CASES.append(Case(f"opt-{id}", make, expect, needle, check=False))


WHAT_IF = ["what-if", "--targets", "7", "--drafters", "1", "--target-bps", "0.92", "--drafter-bps", "0.86"]


def what_if(**over: str) -> list[str]:
    args = list(WHAT_IF)
    for k, v in over.items():
        opt = "--" + k.replace("_", "-")
        if opt in args:
            args[args.index(opt) + 1] = v
        else:
            args += [opt, v]
    return args


opt_case("what-if-valid", what_if(), "", expect=0, log=False)
for opt in ("target_bps", "drafter_bps"):
    for v in ("inf", "-inf", "nan", "1e400", "0", "-1", "x", ""):
        opt_case(
            f"what-if-{opt}-{v}",
            what_if(**{opt: v}),
            "--" + opt.replace("_", "-") if v not in ("0", "-1") else "",
            log=False,
        )
for opt in ("targets", "drafters"):
    for v in ("0", "-1", "4097", "99999", "1" + "0" * 40, "x", "1.5"):
        opt_case(f"what-if-{opt}-{v}", what_if(**{opt: v}), "--" + opt, log=False)
for opt, v in (
    ("gpus", "100000"),
    ("gpus", "4097"),
    ("hs_depth", "1000000000"),
    ("scv", "nan"),
    ("scv", "inf"),
    ("sync_s", "inf"),
    ("sync_every", "1" + "0" * 30),
    ("gpus", "1"),
):
    opt_case(f"what-if-{opt}-{v}", what_if(**{opt: v}), "--" + opt.replace("_", "-"), log=False)
opt_case("what-if-missing-option", ["what-if", "--targets", "7"], "--drafters", log=False)
for args, named in (
    (["LOG", "--gpus", "100000"], "--gpus"),
    (["LOG", "--gpus", "4097"], "--gpus"),
    (["LOG", "--roles", "target=" + "9" * 40 + ",drafter=1"], "--roles"),
    (["LOG", "--roles", "target=5000,drafter=1"], "--roles"),
    (["LOG", "--hs-cap", "1000000000"], "--hs-cap"),
    (["LOG", "--json", "--markdown"], "json"),
    (["LOG", "--no-such-option"], "--no-such-option"),
    (["check", "LOG", "--metric", "speed"], "--metric"),
    (["check", "LOG", "--min-efficiency", "nan"], "--min-efficiency"),
    (["check", "LOG", "--gpus", "99999"], "--gpus"),
):
    opt_case("-".join(a.strip("-") for a in args[1:])[:60] + f"-{args[0][:5]}", args, named)
for args in (
    ["LOG", "--token-budget", "1" + "0" * 40],
    ["LOG", "--restart-cost", "inf"],
    ["LOG", "--restart-cost", "1e300"],
    ["LOG", "--gpus", "4096"],
    ["LOG", "--hs-cap", "10000"],
    ["LOG", "--token-budget", "1"],
    ["check", "LOG", "--min-efficiency", "0"],
    ["LOG", "--roles", "target=2,drafter=2"],
    ["LOG", "--roles", "target=1,drafter=1"],
):
    # usable or not, by the option's own rule: an exit 2 names the option
    opt_case("either-" + "-".join(a.strip("-") for a in args[1:])[:60], args, args[-2], expect=None)


# --- plot on inputs that are usable but odd (one figure each: matplotlib is the slow part)
def plot_case(id: str, content: str | bytes) -> None:
    def make(tmp: Path) -> tuple[list[str], str]:
        p = tmp / "log.jsonl"
        p.write_bytes(content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content)
        return ["plot", str(p), "-o", str(tmp / "out.png")], str(p)

    CASES.append(Case(f"plot-{id}", make, 0, check=False))


plot_case("surrogate-run-name", replaced(1, "run", '"x\\ud800y"'))
plot_case(
    "hs-cap-zero", lines_text([dict(HEADER, queues=[HEADER["queues"][0], dict(HEADER["queues"][1], cap=0)])] + FULL[1:])
)
plot_case("html-run-name", replaced(1, "run", '"<script>@everyone</script>"'))
plot_case("refused-input", b"\x00" * 100)  # not usable: expects exit 2 instead
CASES[-1] = Case("plot-refused-input", CASES[-1].make, 2, check=False)


# --- subprocess cases: bounded memory and endless inputs
def _bomb(tmp: Path) -> bytes:
    # 1 GiB of zeros from ~1 MiB: one 64 MiB member, repeated (gzip allows concatenated members)
    member = gzip.compress(b"\0" * (64 << 20), compresslevel=9, mtime=0)
    return member * 16


def _valid_steps_bomb(tmp: Path) -> bytes:
    head = gzip.compress(json.dumps(HEADER).encode() + b"\n")
    body = gzip.compress(lines_text([step(1.0, "target", 0, busy=0.25)] * 8000).encode(), compresslevel=9)
    return head + body * 800  # ~1 GiB of identical valid lines


def _large_valid(tmp: Path) -> bytes:
    # a large valid log whose regular numbers compress ~40x: past RATIO_CHECK_BYTES, under the ratio limit
    lines = [HEADER]
    for i in range(1, 100_000):
        lines += [step(0.25 * i, "target", i % 2, busy=0.25), step(0.25 * i + 0.1, "drafter", 0, busy=0.1)]
    return gzip.compress(lines_text(lines).encode(), compresslevel=6, mtime=0)


file_case("gz-bomb-zeros", _bomb, name="bomb.jsonl.gz", expect=2, needle="bomb", into=SUBPROCESS_CASES)
file_case(
    "gz-bomb-valid-steps", _valid_steps_bomb, name="steps.jsonl.gz", expect=2, needle="bomb", into=SUBPROCESS_CASES
)
file_case("gz-large-valid", _large_valid, name="large.jsonl.gz", expect=0, into=SUBPROCESS_CASES)
file_case(
    "one-64MiB-line",
    lambda tmp: b'{"ev":"run","pad":"' + b"x" * (64 << 20),
    expect=2,
    needle=":1: line is longer",
    into=SUBPROCESS_CASES,
)
file_case(
    "plot-over-three-years",
    lambda tmp: lines_text([dict(o, t=o["t"] * 1.4e6) if "t" in o else o for o in FULL]).encode(),
    extra=(),
    into=SUBPROCESS_CASES,
)


def _special(path: str) -> Callable[[Path], tuple[list[str], str]]:
    def make(tmp: Path) -> tuple[list[str], str]:
        return [path], path

    return make


for dev in ("/dev/urandom", "/dev/zero", "/dev/null"):
    if os.path.exists(dev):
        SUBPROCESS_CASES.append(
            Case(f"device-{dev[5:]}", _special(dev), 2, "character device", check=dev == "/dev/urandom")
        )


def _fifo(tmp: Path, name: str = "pipe.jsonl", check: bool = False) -> tuple[list[str], str]:
    p = tmp / name
    os.mkfifo(p)
    return (["check", str(p)] if check else [str(p)]), str(p)


SUBPROCESS_CASES.append(Case("fifo-log-no-writer", _fifo, 2, "FIFO"))
SUBPROCESS_CASES.append(
    Case("fifo-toml-no-writer", lambda tmp: _fifo(tmp, "gate.toml", True), 2, "regular file", check=False)
)
SUBPROCESS_CASES.append(
    Case(
        "fifo-follow",
        lambda tmp: (_fifo(tmp)[0] + ["--follow", "--interval", "0.1"], str(tmp / "pipe.jsonl")),
        2,
        check=False,
    )
)


# ----------------------------------------------------------------------------- tests


def _cmd(args: list[str]) -> str:
    return args[0] if args and args[0] in ("check", "what-if", "plot") else "advise"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args, named = case.make(tmp_path)
    code, out, err = run_inproc(args)
    assert_contract(code, out, err, cmd=_cmd(args), named=named, expect=case.expect, needle=case.needle)
    if case.check and code == 2 and _cmd(args) == "advise":
        # the gate reads the same input the same way: the same one line, never a verdict
        code2, out2, err2 = run_inproc(["check", *args])
        assert_contract(code2, out2, err2, cmd="check", named=named, expect=2, needle=case.needle)
        if "--" not in args and not any(a.startswith("--") for a in args):
            assert err2 == err


@pytest.mark.slow
@pytest.mark.parametrize("case", SUBPROCESS_CASES, ids=[c.id for c in SUBPROCESS_CASES])
def test_bad_input_capped_process(case: Case, tmp_path: Path) -> None:
    args, named = case.make(tmp_path)
    if case.id.startswith("plot"):
        args = ["plot", *args, "-o", str(tmp_path / "out.png")]
    code, out, err = run_subprocess(args)
    assert_contract(code, out, err, cmd=_cmd(args), named=named, expect=case.expect, needle=case.needle)
    if case.check and code == 2 and _cmd(args) == "advise":
        code2, out2, err2 = run_subprocess(["check", *args])
        assert_contract(code2, out2, err2, cmd="check", named=named, expect=2, needle=case.needle)


def test_battery_size() -> None:
    assert len(CASES) + len(SUBPROCESS_CASES) >= 300


# --- the last guard: an unexpected exception is exit 2 and one line, never 1 or a traceback


def test_crash_in_check_is_exit_2_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import advisor.cli.check

    def boom(*a, **k):
        raise ImportError("simulated: a module failed to import")

    monkeypatch.setattr(advisor.cli.check, "fit_logs", boom)
    log = str(FIXTURES / "reference-7x1.jsonl")
    code, out, err = run_inproc(["check", log])
    assert code == 2 and err.count("\n") == 1 and "internal error" in err and log in err and "Traceback" not in err


def test_crash_anywhere_is_exit_2_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import advisor.present.text

    def boom(*a, **k):
        raise ZeroDivisionError("simulated")

    monkeypatch.setattr(advisor.present.text, "render", boom)
    log = str(FIXTURES / "cpu-2x1.jsonl")
    for args in ([log], ["check", log, "--markdown"]):
        code, out, err = run_inproc(args)
        assert code == 2 and err.count("\n") == 1 and "internal error" in err and log in err, err
