"""Fuzz targets: every input surface of dflash-advise, each a plain function of bytes.

A target takes one input (``bytes``), writes it where the surface reads it (a log file, a gzip
log, a folder of per-rank files, a summary, a gate config, a TensorBoard event file, a command
line) and asserts the contract of that surface:

- success, with a usable result (a `RunLog` whose frames hold what the header promised, a report
  on stdout, a written log that the advisor reads back), or
- a refusal in one line: a `LogError`/`SettingsError` (library) or exit 2 with one line on stderr
  (CLI) that names the input file (or the option);

never any other exception, an "internal error" line, a traceback, exit 1 where no gate ran, a
warning that is not one of the advisor's typed warnings, or a run past ``PER_INPUT_S``. A broken
contract raises :class:`ContractBroken` (or lets the unexpected exception through), which
atheris records as a crash; ``fuzz/__main__.py`` runs a target under atheris, ``tests/fuzz``
replays ``fuzz/corpus/<target>/`` through the same functions without atheris.

The first byte of a log, summary or event-file input picks a mode (``MODES``), so one corpus
file says both what is read and how; the rest of the bytes are the content.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from advisor.cli import app as cli_app
from advisor.errors import AdvisorWarning, LogError, SettingsError, display_path
from advisor.ingest.load import load_log, load_logs, summarize_paths
from advisor.ingest.runlog import RunLog

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "corpus"
PER_INPUT_S = 20.0  # one input, on a loaded 2-core machine (atheris: -timeout)
RSS_LIMIT_MB = 3072  # one fuzzing process (atheris: -rss_limit_mb)
RANK_SEP = b"\n\x00rank\x00\n"  # splits a ranks-mode input into per-rank files
ARG_SEP = b"\x00"  # splits a what-if input into argv words (else whitespace)
FRAME_SEP = b"\x00\xffrecord\xff\x00"  # splits a framed event-file input into TFRecord payloads
# the profile log a gate config names (`profile = ["run.jsonl"]`), copied beside each config
GATE_PROFILE = ROOT / "fixtures" / "cpu-2x1.jsonl"
TB_ARGS = (
    "--roles",
    "target=7,drafter=1",
    "--map",
    "target.bps=pipeline/target_bps",
    "--map",
    "drafter.bps=pipeline/drafter_bps",
    "--map",
    "drafter.cap_bps=pipeline/drafter_capacity_bps",
    "--map",
    "tok_s=pipeline/tokens_per_s",
    "--map",
    "done=progress/done",
    "--map",
    "eta_s=progress/eta_s",
    "--queue",
    "hs:drafter:20",
    "--map",
    "q.hs=queues/hs_depth",
)


OK, REFUSED = "ok", "refused"  # what a target returns: a usable result, or a refusal in one line


class ContractBroken(AssertionError):
    """The surface answered outside its contract (the message says how)."""


def _require(ok: bool, msg: str) -> None:
    if not ok:
        raise ContractBroken(msg)


@contextlib.contextmanager
def _scratch():
    """A fresh folder for one input's files, removed afterwards."""
    d = tempfile.mkdtemp(prefix="dflash-fuzz-")
    try:
        yield Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def _typed_warnings_only():
    """Warnings are allowed only as the advisor's typed ones (each becomes a caveat)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield
    odd = [w for w in seen if not issubclass(w.category, AdvisorWarning)]
    _require(not odd, f"untyped warning: {odd[0].category.__name__}: {odd[0].message}" if odd else "")


def _one_line_error(e: Exception, names: list[str]) -> None:
    """A refusal is one line that names one of the inputs (the file, or the option)."""
    text = str(e)
    _require("\n" not in text and "\r" not in text, f"{type(e).__name__} is not one line: {text!r}")
    if isinstance(e, LogError):
        shown = [display_path(n) for n in names]
        _require(
            any(s in text for s in shown) or text.startswith("<none>"), f"LogError names no input ({names}): {text!r}"
        )


def _check_runlog(lg: RunLog) -> None:
    """What a RunLog promises its readers (advisor.ingest.runlog): frames of the header's roles."""
    roles = list(lg.header.roles)
    _require(len(roles) >= 2, f"a RunLog of {len(roles)} roles")
    for name in ("steps", "syncs", "rates"):
        _require(hasattr(getattr(lg, name), "columns"), f"RunLog.{name} is not a frame")
    if len(lg.steps):
        _require(set(lg.steps["role"].astype(str)) <= set(roles), "steps of a role not in the header")
        for col in ("t", "busy"):
            if col in lg.steps:
                v = lg.steps[col].to_numpy(dtype=float)
                _require(bool(((v == v) & (abs(v) != math.inf)).all()), f"steps.{col} holds NaN or inf")
    _require(lg.n_lines >= 1, f"n_lines {lg.n_lines}")


def _run_cli(argv: list[str]) -> tuple[int, str, str]:
    """`dflash-advise ARGV` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("always")  # every input shows its warnings (not once per process)
        try:
            cli_app.main(argv)
        except SystemExit as e:
            code = e.code
    return (code if isinstance(code, int) else 0 if code is None else 2), out.getvalue(), err.getvalue()


def check_cli(code: int, out: str, err: str, *, allowed: tuple[int, ...] = (0, 2)) -> None:
    _require(code in allowed, f"exit {code} (allowed {allowed}); stderr: {err[-500:]!r}")
    _require("Traceback" not in err, f"a traceback on stderr: {err[-800:]!r}")
    _require("internal error" not in err, f"internal error: {err.strip()[:800]!r}")
    lines = [ln for ln in err.strip("\n").split("\n") if ln]
    said = lines[:-1] if code == 2 else lines
    _require(all(ln.startswith("dflash-advise: warning: ") for ln in said), f"stderr is not one line each: {err!r}")
    if code == 2:
        _require(len(lines) >= 1 and lines[-1].startswith("dflash-advise: "), f"exit 2 not as one line: {err!r}")
    else:
        _require(out.strip() != "", f"exit {code} with nothing on stdout")


def _timed(fn: Callable[[bytes], str]) -> Callable[[bytes], str]:
    def run(data: bytes) -> str:
        t0 = time.monotonic()
        outcome = fn(data)
        took = time.monotonic() - t0
        _require(took <= PER_INPUT_S, f"took {took:.1f} s (bound {PER_INPUT_S:g} s)")
        return outcome

    run.__name__ = run.__qualname__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


# --- the rate-log reader: plain, gzip, per-rank folder, shell-expanded ranks; then advise -----

LOG_MODES = ("plain", "gzip", "folder", "files")


def _write_log_inputs(d: Path, mode: str, body: bytes) -> list[str]:
    if mode == "plain":
        p = d / "run.jsonl"
        p.write_bytes(body)
        return [str(p)]
    if mode == "gzip":
        p = d / "run.jsonl.gz"
        p.write_bytes(body if body[:2] == b"\x1f\x8b" else gzip.compress(body, mtime=0))
        return [str(p)]
    parts = body.split(RANK_SEP)[:8]
    if mode == "folder":
        run = d / "run"
        run.mkdir()
        for i, part in enumerate(parts):
            (run / f"r{i}.jsonl").write_bytes(part)
        return [str(run)]
    out = []
    for i, part in enumerate(parts):
        (d / f"rank{i}.jsonl").write_bytes(part)
        out.append(str(d / f"rank{i}.jsonl"))
    return out


@_timed
def fuzz_log(data: bytes) -> str:
    """The log reader. Byte 0: bits 0-1 the mode (LOG_MODES), bit 2 also `advise --json` on it."""
    if not data:
        return REFUSED
    mode, then_advise, body = LOG_MODES[data[0] & 3], bool(data[0] & 4), data[1:]
    with _scratch() as d:
        args = _write_log_inputs(d, mode, body)
        names = [str(d)]  # every input lies in it (a merged run is named by a pattern of its files)
        try:
            with _typed_warnings_only():
                logs = load_logs(args)
        except (LogError, SettingsError) as e:
            _one_line_error(e, names)
            return REFUSED
        _require(len(logs) >= 1, "no RunLog for a readable input")
        for lg in logs:
            _check_runlog(lg)
        if then_advise:
            code, out, err = _run_cli(["advise", "--json", *args])
            check_cli(code, out, err)
            if code == 0:
                _require(isinstance(json.loads(out), dict), "advise --json printed no JSON object")
            return OK if code == 0 else REFUSED
        return OK


# --- the summary reader (`dflash-advise summarize` output) --------------------------------

_BASE_SUMMARY: list[dict] = []


def _base_summary() -> dict:
    """The summary of GATE_PROFILE as JSON (made once): what a patch input is laid over."""
    if not _BASE_SUMMARY:
        _BASE_SUMMARY.append(summarize_paths([GATE_PROFILE]).to_json())
    return _BASE_SUMMARY[0]


def _laid_over(base: object, patch: object) -> object:
    if isinstance(base, dict) and isinstance(patch, dict):
        return {**base, **{k: _laid_over(base.get(k), v) for k, v in patch.items()}}
    return patch


def summary_bytes(data: bytes) -> bytes:
    """The summary file of an input: byte 0 bit 1 set, the rest as is; else the rest is a JSON
    patch laid over the base summary (a summary holds 1.5 MB of time bins: a patch keeps inputs
    small and every mutation inside the format)."""
    body = data[1:]
    if data[:1] and data[0] & 2:
        return body
    try:
        patch = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        return body
    return json.dumps(_laid_over(_base_summary(), patch)).encode()


@_timed
def fuzz_summary(data: bytes) -> str:
    """A summary file (`summary_bytes`); byte 0 bit 0: also merged with itself by `summarize`
    and the merged summary read back."""
    if not data:
        return REFUSED
    with _scratch() as d:
        p = d / "s.json"
        p.write_bytes(summary_bytes(data))
        try:
            with _typed_warnings_only():
                lg = load_log(p)
        except (LogError, SettingsError) as e:
            _one_line_error(e, [str(p)])
            return REFUSED
        _check_runlog(lg)
        if data[0] & 1:
            out = d / "merged.json"
            code, so, se = _run_cli(["summarize", str(p), str(p), "-o", str(out)])
            _require(code in (0, 2), f"summarize exit {code}: {se!r}")
            _require("internal error" not in se and "Traceback" not in se, f"summarize: {se.strip()[:800]!r}")
            if code == 0:
                with _typed_warnings_only():
                    _check_runlog(load_log(out))
        return OK


# --- the gate config (`dflash-advise check gate.toml`) ----------------------------------


@_timed
def fuzz_check(data: bytes) -> str:
    """The gate's TOML: exit 0 (passes) or 1 (fails) with the verdict, or 2 in one line."""
    with _scratch() as d:
        shutil.copyfile(GATE_PROFILE, d / "run.jsonl")
        cfg = d / "gate.toml"
        cfg.write_bytes(data)
        code, out, err = _run_cli(["check", str(cfg)])
        check_cli(code, out, err, allowed=(0, 1, 2))
        if code in (0, 1):
            _require(out.startswith("PASS: " if code == 0 else "FAIL: "), f"exit {code} says {out[:200]!r}")
        return OK if code in (0, 1) else REFUSED


# --- `import-tb`: TensorBoard event files ---------------------------------------------------


def _frame(payload: bytes) -> bytes:
    """``payload`` as one TFRecord with good CRCs (tensorboard's own writer)."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    buf = io.BytesIO()
    RecordWriter(buf).write(payload)
    return buf.getvalue()


@_timed
def fuzz_tb(data: bytes) -> str:
    """An event file. Byte 0: bit 0 the rest is the file as is, else Event payloads split on
    FRAME_SEP, each framed as a TFRecord with good CRCs (so the protobuf reader is reached)."""
    if not data:
        return REFUSED
    body = data[1:]
    if not data[0] & 1:
        body = b"".join(_frame(p) for p in body.split(FRAME_SEP)[:4096])
    with _scratch() as d:
        ev = d / "events.out.tfevents.fuzz"
        ev.write_bytes(body)
        out = d / "imported.jsonl"
        code, so, se = _run_cli(["import-tb", str(ev), "-o", str(out), *TB_ARGS])
        check_cli(code, so, se)
        if code == 0:  # what import-tb writes, the advisor reads
            try:
                with _typed_warnings_only():
                    _check_runlog(load_log(out))
            except LogError as e:
                raise ContractBroken(f"import-tb wrote a log the advisor refuses: {e}") from None
        return OK if code == 0 else REFUSED


# --- `what-if`: the command line of bare numbers -------------------------------------------


@_timed
def fuzz_what_if(data: bytes) -> str:
    """`dflash-advise what-if ARGS`: words split on NUL if any, else on whitespace."""
    text = data.decode("utf-8", "surrogateescape")
    words = text.split(ARG_SEP.decode()) if ARG_SEP in data else text.split()
    words = [w for w in words if w != ""][:64]
    code, out, err = _run_cli(["what-if", *words])
    check_cli(code, out, err)
    if code == 0 and ("--json" in words or any(w in ("json",) for w in words)) and out.lstrip().startswith("{"):
        try:
            json.loads(out)
        except ValueError as e:
            raise ContractBroken(f"what-if --json printed no JSON ({e}): {out[:200]!r}") from None
    return OK if code == 0 else REFUSED


TARGETS: dict[str, Callable[[bytes], str]] = {
    "log": fuzz_log,
    "summary": fuzz_summary,
    "check": fuzz_check,
    "tb": fuzz_tb,
    "what_if": fuzz_what_if,
}


def corpus_files(target: str) -> list[Path]:
    """The seed inputs of one target (``fuzz/corpus/<target>/``), sorted."""
    folder = CORPUS / target
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


def replay(target: str, paths: list[Path] | None = None) -> dict[str, str]:
    """Feed every corpus file (or ``paths``) through ``target``: {file name: OK or REFUSED};
    raises on the first broken contract, naming the file."""
    fn = TARGETS[target]
    outcomes = {}
    for p in corpus_files(target) if paths is None else paths:
        try:
            outcomes[p.name] = fn(p.read_bytes())
        except Exception as e:
            raise ContractBroken(f"{target} on {p}: {type(e).__name__}: {e}") from e
    return outcomes


if __name__ == "__main__":  # python3 -m fuzz.targets TARGET FILE...: replay inputs (e.g. a crash)
    name, files = sys.argv[1], [Path(f) for f in sys.argv[2:]]
    got = replay(name, files or None)
    print(
        f"{name}: {len(got)} inputs meet the contract ({sum(v == OK for v in got.values())} usable results, "
        f"{sum(v == REFUSED for v in got.values())} refusals)"
    )
