"""Reading a run directory of per-rank files with every core (polars' threads, `advisor.ingest.scan.scan_files`).

    python3 benchmarks/parallel_ranks.py --out result.json                 # the device run (16 cores)
    python3 benchmarks/parallel_ranks.py --lines 60000 --files 16 64 --runs 1 --scan 4000 20000 \
        --out /tmp/pr.json                                                   # a quick local check

Writes a 1024-GPU-shaped run (768 targets, 256 syncing drafters, a rates snapshot a minute with
768 per-target prefetch depths) as 16, 256 and 1,024 rank files (each file the header and the
steps of 1024/K workers; the first file also the syncs and rates; every file the end line),
the same ``--lines`` in all for each K. Then, each in a fresh process, the read
(`advisor.ingest.load.summarize_paths` of the folder, timed inside the process, imports excluded):

- ``one core``: the read pinned to one core (``sched_setaffinity`` before polars starts its
  threads, and ``POLARS_MAX_THREADS=1``): the baseline;
- ``all cores``: the read on every core the process may use (polars' threads);
- ``N cores`` (``2 cores``, ``4 cores``, ...): the read pinned to the first N of them, N polars
  threads: how the read scales between the two;
- ``polars one core``, ``polars all cores``: polars alone over the same files (the step fields,
  filtered to steps and summed by role and 1/16 s bin, as the fold's bins are), pinned as above
  or not: the ceiling a reader built on the library can reach, its Python fold aside;
- ``cli``: ``dflash-advise --json FOLDER`` as a whole, timed from outside (its imports, its
  advice, its exit); ``same``: its report is the first CLI run's.

``--base DIR`` also times ``cli`` (where ``--modes`` has it) with the advisor of the checkout
DIR, in the same rounds (``cli (base)``). Medians of ``--runs`` rounds, the reads back to back in
each (``--modes``: which of them). Each timed process imports polars and pandas before its
clock starts. ``--scan`` lines: the same for smaller runs of 16 and 256 files (one core vs all
cores, ``--scan-runs`` rounds). Every merged summary is checked equal to the first read's
(``same``). The JSON result goes to ``--out``; a table is printed. Generation writes files in
parallel processes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
N_T, N_D, GPUS = 768, 256, 1024
SYNC_EVERY = 4
HEADER = {
    "ev": "run",
    "v": 1,
    "t": 0.0,
    "run": "ranks1024",
    "gpus": GPUS,
    "roles": {"target": N_T, "drafter": N_D},
    "queues": [
        {"name": "pre", "feeds": "target", "cap": 50, "per_worker": True},
        {"name": "hs", "feeds": "drafter", "cap": 64},
    ],
    "token_budget": 32768,
    "samples": 90_000_000,
    "epochs": 1,
    "hardware": "synthetic",
    "sync_every": SYNC_EVERY,
}


def _worker_lines(role: str, w: int, n: int, seed: int) -> tuple[list[str], float]:
    """``n`` step lines of one worker (target: ~10 s a step, drafter: ~2.6 s, gamma noise)."""
    rng = np.random.default_rng(seed)
    mean = 10.0 if role == "target" else 2.6
    busy = rng.gamma(10.0, mean / 10.0, n)
    wait = rng.exponential(0.05 * mean, n)
    tokens = np.minimum(rng.normal(31200, 6000, n), 32768).clip(2000).astype(int)
    t = np.cumsum(busy + wait) + 30.0
    seqs = np.maximum(tokens // 1926, 1)
    if role == "target":
        out = [
            f'{{"ev":"step","t":{a:.4f},"role":"target","worker":{w},"batch":{b},"tokens":{k},"seqs":{s},'
            f'"busy":{u:.5f},"wait":{v:.4f},"blocked":0.0}}'
            for a, b, k, s, u, v in zip(
                t.tolist(), range(w, w + N_T * n, N_T), tokens.tolist(), seqs.tolist(), busy.tolist(), wait.tolist()
            )
        ]
    else:
        out = [
            f'{{"ev":"step","t":{a:.4f},"role":"drafter","worker":{w},"batch":{b},"tokens":{k},"seqs":{s},'
            f'"busy":{u:.5f},"wait":{v:.4f},"blocked":0.0,"loss":{2 + 3 / (1 + a / 3e4):.4f}}}'
            for a, b, k, s, u, v in zip(
                t.tolist(), range(w, w + N_D * n, N_D), tokens.tolist(), seqs.tolist(), busy.tolist(), wait.tolist()
            )
        ]
    return out, float(t[-1]) if n else 0.0


def _coordinator_lines(t_end: float, n_sync: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.uniform(30.0, t_end, n_sync))
    out = [
        f'{{"ev":"sync","t":{a:.4f},"role":"drafter","workers":{N_D},"dur":{d:.5f}}}'
        for a, d in zip(ts.tolist(), rng.gamma(10.0, 0.1, n_sync).tolist())
    ]
    pre = ",".join(["50"] * N_T)
    for _k, a in enumerate(np.arange(60.0, t_end, 60.0).tolist()):
        out.append(
            f'{{"ev":"rates","t":{a:.1f},"window":60.0,"bps":{{"target":70.1,"drafter":70.0}},'
            f'"cap_bps":{{"target":76.8,"drafter":98.4}},"tok_s":2184000.0,"q":{{"pre":[{pre}],"hs":40}},'
            f'"eta_s":{max(1.0, 1.3e6 - a):.1f},"done":{min(a / 1.3e6, 1.0):.6f}}}'
        )
    out.sort(key=lambda s: float(s.split('"t":', 1)[1].split(",", 1)[0]))
    return out


def _write_rank(args) -> None:
    path, workers, per_worker, with_coord, t_span = args
    head = json.dumps(HEADER, separators=(",", ":"))
    with open(path, "w") as f:
        f.write(head + "\n")
        t_end = 0.0
        for role, w in workers:
            lines, te = _worker_lines(role, w, per_worker, seed=(0 if role == "target" else 100_000) + w)
            f.write("\n".join(lines) + "\n")
            t_end = max(t_end, te)
        if with_coord:
            n_sync = int(per_worker * N_D / SYNC_EVERY / N_D)  # drafter steps per drafter / sync_every
            f.write("\n".join(_coordinator_lines(t_span, max(n_sync, 1), 7)) + "\n")
        f.write(f'{{"ev":"end","t":{t_span:.4f},"reason":"done"}}\n')


def write_run(folder: Path, n_files: int, lines: int) -> int:
    """A 1024-GPU run of about ``lines`` lines as ``n_files`` rank files; its size in bytes."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    every = [("target", w) for w in range(N_T)] + [("drafter", w) for w in range(N_D)]
    per_worker = max(lines // GPUS, 2)
    t_span = per_worker * 10.5 + 40.0
    groups = [every[i::n_files] for i in range(n_files)]
    jobs = [(folder / f"rank{i:04d}.jsonl", g, per_worker, i == 0, t_span) for i, g in enumerate(groups)]
    with ProcessPoolExecutor(os.cpu_count() or 1) as ex:
        list(ex.map(_write_rank, jobs, chunksize=max(1, len(jobs) // (4 * (os.cpu_count() or 1)))))
    return sum(p.stat().st_size for p in folder.iterdir())


CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
folder, mode, digest = sys.argv[2], sys.argv[3], sys.argv[4]
if mode.endswith("one core"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    os.environ["POLARS_MAX_THREADS"] = "1"
elif mode.split()[0].isdigit():  # "4 cores": the first four of the process's cores, four polars threads
    n = int(mode.split()[0])
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:n]))
    os.environ["POLARS_MAX_THREADS"] = str(n)
import polars, polars.testing, pandas   # imported before the clock starts (a CLI run imports them anyway)
from advisor.ingest.load import summarize_paths
if mode.startswith("polars"):  # the library alone: the step fields, summed by role and 1/16 s bin
    pl = polars
    paths = sorted(os.path.join(folder, f) for f in os.listdir(folder))
    schema = {"ev": pl.String, "t": pl.Float64, "role": pl.String, "worker": pl.Int64, "batch": pl.Int64,
              "tokens": pl.Int64, "seqs": pl.Int64, "busy": pl.Float64, "wait": pl.Float64, "blocked": pl.Float64,
              "loss": pl.Float64}
    t = time.perf_counter()
    s = (pl.scan_ndjson(paths, schema=schema).filter(pl.col("ev") == "step")
         .group_by("role", (pl.col("t") * 16).floor().alias("bin"))
         .agg(pl.len(), pl.col("busy").sum(), (pl.col("busy") ** 2).sum().alias("busy2"), pl.col("wait").sum(),
              pl.col("blocked").sum(), pl.col("tokens").sum(), pl.col("seqs").sum())
         .sort("role", "bin").collect())
    wall = time.perf_counter() - t
    ref = folder + ".pref"
    if not os.path.exists(ref):
        s.write_parquet(ref)
    try:  # polars' sums of floats follow its threads' partition of the rows: equal to 1e-9
        polars.testing.assert_frame_equal(s, pl.read_parquet(ref), rel_tol=1e-9)
        same = True
    except AssertionError:
        same = False
else:
    t = time.perf_counter()
    s = summarize_paths([folder])
    wall = time.perf_counter() - t
    text, ref = json.dumps(s.to_json(), sort_keys=True), folder + ".ref"
    if digest == "write" or not os.path.exists(ref):
        open(ref, "w").write(text)
    same = text == open(ref).read()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"wall_s": wall, "same": same, "max_rss_mb": rss / 1024, "threads": polars.thread_pool_size()}))
"""


def _cli(folder: Path, root: Path) -> dict:
    """``dflash-advise --json FOLDER`` of the checkout ``root`` in a fresh process, timed from
    outside (imports and all); ``same``: its report is the first CLI run's, byte for byte."""
    t = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "advisor", "--json", str(folder)],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"cli on {folder} ({root}) failed")
    ref = Path(str(folder) + ".cli")
    if not ref.exists():
        ref.write_bytes(out)
    return {"wall_s": wall, "same": out == ref.read_bytes(), "max_rss_mb": usage.ru_maxrss / 1024, "threads": None}


def timed(folder: Path, mode: str, first: bool, base: Path | None = None) -> dict:
    """One read of ``folder`` in ``mode`` (a mode ending in " (base)": by the checkout ``base``)."""
    root = base if mode.endswith(" (base)") else ROOT
    name = mode.removesuffix(" (base)")
    if name == "cli":
        return _cli(folder, root)
    p = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(folder), name, "write" if first else "check"],
        capture_output=True,
        text=True,
    )
    if p.returncode:
        raise SystemExit(f"{mode} on {folder}: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure(folder: Path, modes: list[str], runs: int, base: Path | None = None) -> dict:
    res: dict[str, list[dict]] = {m: [] for m in modes}
    for r in range(runs):
        for i, m in enumerate(modes):
            res[m].append(timed(folder, m, first=(r == 0 and i == 0), base=base))
    out = {}
    for m, v in res.items():
        out[m] = {
            "wall_s": statistics.median(x["wall_s"] for x in v),
            "walls_s": [x["wall_s"] for x in v],
            "same": all(x["same"] for x in v),
            "max_rss_mb": max(x["max_rss_mb"] for x in v),
            "threads": v[0]["threads"],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_500_000, help="lines of the run in each set of files")
    ap.add_argument("--files", type=int, nargs="+", default=[16, 256, 1024])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--modes",
        nargs="+",
        default=["one core", "all cores"],
        help="which reads to time (one core and all cores at least)",
    )
    ap.add_argument(
        "--scan",
        type=int,
        nargs="*",
        default=[30_000, 200_000],
        help="smaller runs (lines) of 16 and 256 files: one core vs all cores",
    )
    ap.add_argument("--scan-runs", type=int, default=2)
    ap.add_argument("--budget-s", type=float, default=170.0, help="no new scan size starts past this many seconds")
    ap.add_argument("--dir", type=Path, default=None, help="where the files go (default: a temporary folder)")
    ap.add_argument(
        "--base",
        type=Path,
        default=None,
        help="also time the 'cli' mode of this checkout's advisor, in the same rounds",
    )
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="ranks-"))
    result = {
        "cores": len(os.sched_getaffinity(0)),
        "python": sys.version.split()[0],
        "lines": args.lines,
        "sets": [],
        "scan": [],
    }
    t0 = time.perf_counter()
    for k in args.files:
        folder = base / f"k{k}"
        size = write_run(folder, k, args.lines)
        modes = list(args.modes) + ([f"{m} (base)" for m in args.modes if m == "cli"] if args.base else [])
        m = measure(folder, modes, args.runs, args.base)
        one = m["one core"]["wall_s"]
        row = {"files": k, "bytes": size, **m, "speedup_all_cores_vs_one_core": one / m["all cores"]["wall_s"]}
        if "polars one core" in m and "polars all cores" in m:
            alone = m["polars one core"]["wall_s"] / m["polars all cores"]["wall_s"]
            row["speedup_polars_all_cores_vs_one_core"] = alone
        result["sets"].append(row)
        print(
            f"{k} files, {size / 1e6:.0f} MB: one core {one:.2f} s, all cores {m['all cores']['wall_s']:.2f} s "
            f"({row['speedup_all_cores_vs_one_core']:.1f}x one core, {m['all cores']['threads']} threads), "
            + "".join(f"{mode} {m[mode]['wall_s']:.2f} s, " for mode in modes if mode not in ("one core", "all cores"))
            + (
                f"(polars alone {row['speedup_polars_all_cores_vs_one_core']:.1f}x), "
                if "speedup_polars_all_cores_vs_one_core" in row
                else ""
            )
            + f"same summary: {all(v['same'] for v in m.values())}; "
            f"max RSS {max(v['max_rss_mb'] for v in m.values()):.0f} MB",
            flush=True,
        )
        shutil.rmtree(folder)
        for end in (".ref", ".pref", ".cli"):
            if os.path.exists(str(folder) + end):
                os.unlink(str(folder) + end)
        args.out.write_text(json.dumps(result, indent=1))
    for k in (16, 256):
        for n in args.scan:
            if time.perf_counter() - t0 > args.budget_s:
                result["scan_cut_short"] = True
                break
            folder = base / f"scan{k}-{n}"
            size = write_run(folder, k, n)
            m = measure(folder, ["one core", "all cores"], max(1, args.scan_runs))
            result["scan"].append({"files": k, "lines": n, "bytes": size, **m})
            print(
                f"scan {k} files, {n} lines, {size / 1e6:.1f} MB: one core {m['one core']['wall_s']:.3f} s, "
                f"all cores {m['all cores']['wall_s']:.3f} s",
                flush=True,
            )
            shutil.rmtree(folder)
            os.unlink(str(folder) + ".ref")
            args.out.write_text(json.dumps(result, indent=1))
    result["total_s"] = time.perf_counter() - t0
    args.out.write_text(json.dumps(result, indent=1))
    print(f"{result['total_s']:.0f} s in all")
    if args.dir is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
