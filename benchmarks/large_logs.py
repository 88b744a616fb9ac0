"""Large logs: time and peak memory of streaming ingest and end-to-end advice, against json.loads.

    python3 benchmarks/large_logs.py --lines 1000000 5000000 --runs 3
    python3 benchmarks/large_logs.py --lines 1000000 --split 8 --jobs 1 2   # per-rank files, map-reduce
    python3 benchmarks/large_logs.py --lines 1000000 --runs 0 --split 16 --jobs 1 2 4 8 16 --dir /tmp/ll
        # per-rank files only (no reader rounds), on a many-core host: ~2 minutes, 0.5 GB of disk

The log is shaped like a 32-GPU run with drafter sync (24 targets, 8 drafters, an all-reduce every
4 drafter steps, rates a minute). Up to ~1.2M lines it is generated in one piece with
`tests/synth.py`; longer logs continue a second, warm-up-free simulation of the same scenario
segment after segment, times shifted (the generator holds a whole simulation in memory).

Each reader runs in a fresh process (peak RSS is its own, from ``wait4``), readers
alternating over ``--runs`` rounds; the table gives medians and per-round ratios to the baseline:
- ``json.loads list``: the least a Python reader does, a json.loads loop into a list of dicts
  (skipped past ``--list-baseline-max`` lines: it needs ~1.4 GB per million lines);
- ``json.loads discard``: the same loop keeping nothing (time only; runs at any size);
- ``load_log``: `advisor.ingest.load.load_log` (stream, validate, summarise, frames);
- ``dflash-advise --json``: the whole CLI, import to report.
With ``--split K``, the log is also written as K per-rank files (each worker's steps in one
file, header in each, syncs/rates/end in the first) in a folder of their own;
``dflash-advise summarize -j J`` reduces them for each J of ``--jobs``, ``dflash-advise --json
FOLDER`` advises from them directly (polars' threads), and the merged summary's advice is
compared with the whole log's. ``--runs 0`` skips the reader rounds. CPU s is user + system time of all the process's
threads:
on a shared machine it moves less than wall time. ``--root DIR`` times the advisor of another
checkout (before/after comparisons in one session); ``--base DIR`` also times the CLI of the
checkout DIR, in the same rounds ("dflash-advise --json (base)"); ``--setting MODULE.NAME=VALUE``
(repeatable) also times the CLI with that module constant set otherwise as the module is imported
(e.g. ``advisor.ingest.scan.RANGE_BYTES=4<<20``: smaller ranges), for crossovers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from phases import bytecode_note  # noqa: E402  (a sibling script: the bytecode check of phases.py)

ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # the advisor of this checkout, installed or not
sys.path.insert(0, str(ROOT / "tests"))  # the synthetic generator (tests/synth.py)
DATA = HERE / "data"
SEGMENT_LINES = 1_000_000

READERS = {
    "json.loads list": [
        sys.executable,
        "-c",
        "import json,sys\nwith open(sys.argv[1],'rb') as f:\n    rows=[json.loads(l) for l in f]\nprint(len(rows))",
    ],
    "json.loads discard": [
        sys.executable,
        "-c",
        "import json,sys\nn=0\nwith open(sys.argv[1],'rb') as f:\n"
        "    for l in f:\n        json.loads(l); n+=1\nprint(n)",
    ],
    "load_log": [
        sys.executable,
        "-c",
        "import sys\nfrom advisor.ingest.load import load_log\n"
        "lg=load_log(sys.argv[1])\nprint(len(lg.steps), lg.sampled)",
    ],
    "dflash-advise --json": [sys.executable, "-m", "advisor", "--json"],
}
BASE = "dflash-advise --json (base)"  # the same command, of the --base checkout
# the CLI with one module constant set otherwise (--setting MODULE.NAME=VALUE): set as the module is
# imported, wherever that is (the CLI imports most of the advisor in a thread), so that the run is
# otherwise the CLI's own
SETTING = r"""
import importlib.abc, importlib.machinery, os, sys
mod, name, value = sys.argv[1], sys.argv[2], eval(sys.argv[3])
class SetOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != mod:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            if not hasattr(module, name):      # (a typo must not time the default)
                print(f"{mod} has no {name}", file=sys.stderr, flush=True)
                os._exit(3)
            setattr(module, name, value)
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, SetOnImport())
from advisor.cli.app import script
sys.argv = ['dflash-advise', '--json', *sys.argv[4:]]
script()
"""


def setting_reader(setting: str) -> tuple[str, list[str]]:
    """The reader of ``--setting MODULE.NAME=VALUE``: its name, and its command (the log appended)."""
    target, _, value = setting.partition("=")
    mod, _, name = target.rpartition(".")
    if not (mod and name and value):
        raise SystemExit(f"--setting {setting!r}: expected MODULE.NAME=VALUE")
    return f"dflash-advise --json ({name}={value})", [sys.executable, "-c", SETTING, mod, name, value]


def scenario(n_lines: int, *, seed: int = 108, warm: bool = True):
    from synth import Scenario, ServiceModel, TokenModel

    tm = TokenModel(budget=32768, mean=31200.0, cv=0.2, seq_len=1926.0)
    return Scenario(
        name="sync32",
        n_target=24,
        n_drafter=8,
        tokens=tm,
        hs_cap=20,
        pre_cap=50,
        sync_every=4,
        sync_s=1.0,
        sync_scv=0.1,
        n_batches=n_lines * 100 // 199,
        seed=seed,
        warmup_factor=1.5 if warm else 1.0,
        warmup_tau_s=600.0,
        target=ServiceModel.from_mean(10.0, tm.mean, overhead_share=0.1, scv=0.1),
        drafter=ServiceModel.from_mean(2.0, tm.mean, overhead_share=0.1, scv=0.1),
    )


_T = re.compile(rb'"t":([0-9.eE+-]+)')


def make_log(path: Path, n_lines: int) -> None:
    from synth import write_log

    if n_lines <= 1.2 * SEGMENT_LINES:
        write_log(path, scenario(n_lines))
        return
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        first, cont = Path(tmp) / "a.jsonl", Path(tmp) / "b.jsonl"
        write_log(first, scenario(SEGMENT_LINES))
        write_log(cont, scenario(SEGMENT_LINES, seed=109, warm=False))
        a = first.read_bytes().splitlines(keepends=True)
        b = cont.read_bytes().splitlines(keepends=True)
        body_b = [ln for ln in b[1:] if b'"ev":"end"' not in ln]
        span = float(json.loads(b[-1])["t"])
        with open(path, "wb") as out:
            out.writelines(ln for ln in a if b'"ev":"end"' not in ln)
            offset = float(json.loads(a[-1])["t"])
            written = len(a) - 1
            last_t = offset
            while written < n_lines - 1:
                take = body_b[: n_lines - 1 - written]
                last_t = offset + float(json.loads(take[-1])["t"])

                def moved(m, shift=offset):
                    return b'"t":%.4f' % (float(m.group(1)) + shift)

                out.writelines(_T.sub(moved, ln, count=1) for ln in take)
                written += len(take)
                offset += span
            out.write(b'{"ev":"end","t":%.4f,"reason":"done"}\n' % last_t)


# The command runs under a small launcher process that waits for it: on Linux a child's peak RSS
# (ru_maxrss) starts at its parent's at the fork and survives the exec, so timing it straight from
# this script, which may have just written a large log, would report this script's memory.
_LAUNCHER = """
import json, os, subprocess, sys, time
t = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(p.pid, 0)
print(json.dumps([time.perf_counter() - t, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime,
                  os.waitstatus_to_exitcode(status)]))
"""


def run_timed(cmd: list[str], cwd: Path = ROOT) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds (user + system, all threads) of one command in a
    fresh process, its own (from wait4, in a small launcher). ``cwd``: the checkout whose advisor runs."""
    p = subprocess.run([sys.executable, "-c", _LAUNCHER, *cmd], capture_output=True, cwd=cwd)
    if p.returncode != 0 or not p.stdout.strip():
        raise SystemExit(f"{cmd[-1]}: launcher failed: {p.stderr[-500:].decode(errors='replace')}")
    wall, rss, cpu, code = json.loads(p.stdout.decode().strip().splitlines()[-1])
    if code not in (0, 1):
        raise SystemExit(f"{cmd[-1]} failed (exit {code}): {p.stderr[-500:].decode(errors='replace')}")
    return wall, rss, cpu


def split_by_worker(path: Path, k: int, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    outs = [open(folder / f"rank{i:03d}.jsonl", "wb") for i in range(k)]
    worker = re.compile(rb'"worker":(\d+)')
    with open(path, "rb") as f:
        head = f.readline()
        for o in outs:
            o.write(head)
        for ln in f:
            m = worker.search(ln) if b'"ev":"step"' in ln else None
            outs[int(m.group(1)) % k if m else 0].write(ln)
    for o in outs:
        o.close()
    return [Path(o.name) for o in outs]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--runs", type=int, default=3, help="rounds of the readers (0: none)")
    ap.add_argument("--readers", nargs="+", default=list(READERS), choices=list(READERS))
    ap.add_argument("--list-baseline-max", type=int, default=6_000_000)
    ap.add_argument("--split", type=int, default=0, help="also write K per-rank files and reduce them")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--dir", type=Path, default=DATA)
    ap.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="the checkout whose advisor is timed (default: this one), e.g. another branch's",
    )
    ap.add_argument(
        "--base",
        type=Path,
        default=None,
        help="also time `dflash-advise --json` of this checkout, in the same rounds ('... (base)')",
    )
    ap.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="MODULE.NAME=VALUE",
        help="also time `dflash-advise --json` with this module constant set otherwise (repeatable, "
        "one reader each), e.g. advisor.ingest.scan.RANGE_BYTES=4<<20",
    )
    args = ap.parse_args()
    settings = [setting_reader(x) for x in args.setting]
    READERS.update(settings)
    args.dir.mkdir(parents=True, exist_ok=True)
    for note in filter(None, (bytecode_note(r.resolve()) for r in {args.root, args.base} if r is not None)):
        print(note, flush=True)
    for n in args.lines:
        path = args.dir / f"sync32-{n}.jsonl"
        if not path.exists():
            t = time.perf_counter()
            make_log(path, n)
            print(f"made {path} in {time.perf_counter() - t:.0f} s")
        size = path.stat().st_size / 1e6
        readers = [r for r in args.readers if not (r == "json.loads list" and n > args.list_baseline_max)]
        readers += [name for name, _ in settings]
        roots = {r: args.root for r in readers}
        if args.base is not None:
            roots[BASE] = args.base
            readers.append(BASE)
        res: dict[str, list[tuple[float, float]]] = {r: [] for r in readers}
        for _ in range(args.runs):
            for r in readers:
                res[r].append(run_timed([*READERS.get(r, READERS["dflash-advise --json"]), str(path)], roots[r]))
        if args.runs:
            print(
                f"\n{n} lines, {size:.0f} MB; {args.runs} rounds, each reader in a fresh process "
                f"(advisor of {args.root})"
            )
            others = [b for b in ("json.loads list", "json.loads discard") if b in res]
            print(
                "| reader | wall s (median) | min-max | CPU s (median) | peak RSS MB (median) | "
                + " | ".join(f"wall / {b}" for b in others)
                + " | CPU / json.loads discard |"
            )
            print("|---|---:|---:|---:|---:|" + "---:|" * (len(others) + 1))
            for r, v in res.items():
                w = [x[0] for x in v]
                ratios = [statistics.median(a[0] / b[0] for a, b in zip(v, res[b_])) for b_ in others]
                cpu = (
                    statistics.median(a[2] / b[2] for a, b in zip(v, res["json.loads discard"]))
                    if "json.loads discard" in res
                    else float("nan")
                )
                print(
                    f"| {r} | {statistics.median(w):.2f} | {min(w):.2f}-{max(w):.2f} | "
                    f"{statistics.median(x[2] for x in v):.2f} | {statistics.median(x[1] for x in v):.0f} | "
                    + " | ".join(f"{x:.2f}" for x in ratios)
                    + f" | {cpu:.2f} |"
                )
        if args.split:
            split_benchmark(args, path, n)


def split_benchmark(args, path: Path, n: int) -> None:
    """Per-rank files: summarize with each --jobs, advice from the folder, and equality with the whole log."""
    import shutil

    folder = args.dir / f"sync32-{n}-ranks{args.split}"
    shutil.rmtree(folder, ignore_errors=True)
    parts = split_by_worker(path, args.split, folder)
    advise = [sys.executable, "-m", "advisor", "--json"]
    w_whole, rss_whole, _ = run_timed([*advise, str(path)], args.root)
    w_dir, rss_dir, _ = run_timed([*advise, str(folder)], args.root)
    print(
        f"\nper-rank files: {args.split} in {folder.name}/ ({os.cpu_count()} cores); "
        f"`dflash-advise summarize -j J` then advice from the merged summary"
    )
    print(
        f"`dflash-advise --json` whole log: {w_whole:.2f} s, {rss_whole:.0f} MB; "
        f"from the folder of rank files: {w_dir:.2f} s, {rss_dir:.0f} MB"
    )
    print("| jobs | summarize wall s | speed-up vs 1 job | peak RSS MB |")
    print("|---:|---:|---:|---:|")
    out = args.dir / f"sync32-{n}-summary.json"
    one = None
    for j in args.jobs:
        w, rss, _ = run_timed(
            [sys.executable, "-m", "advisor", "summarize", "-j", str(j), "-o", str(out), *map(str, parts)], args.root
        )
        one = one or w
        print(f"| {j} | {w:.2f} | {one / w:.2f} | {rss:.0f} |")
    whole = subprocess.run([*advise, str(path)], capture_output=True, text=True, cwd=args.root)
    merged = subprocess.run([*advise, str(out)], capture_output=True, text=True, cwd=args.root)
    ja, jb = json.loads(whole.stdout), json.loads(merged.stdout)
    ja.pop("warnings"), jb.pop("warnings")
    print(f"advice from the merged summary == advice from the whole log: {ja == jb}")
    shutil.rmtree(folder)
    out.unlink()


if __name__ == "__main__":
    main()
