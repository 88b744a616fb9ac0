"""Real-hardware sweep: run the real trainer (`dflash-train`) at every split of G workers on
dedicated compute units, repeat each split, and collect the logs into one archive.

    python3 benchmarks/sweep.py --gpus 8 --splits 7-1,6-2,5-3,4-4,3-5,2-6 --repeats 2 \
        --duration-s 90 --cores 0-26 --lanes 3 --out sweep-32c --tar sweep-32c.tar.gz

Tensor-parallel targets (``--target-tp k``): each target engine is k trainer processes
(`trainer.tp`), one core per rank, so a split N-M of G needs N * k + M = G, e.g. with G = 8 and
k = 2 the splits 1-6, 2-4, 3-2:

    python3 benchmarks/sweep.py --gpus 8 --target-tp 2 --splits 1-6,2-4,3-2 --repeats 2 --model tp-cpu \
        --duration-s 70 --budget-s 530 --cores 0-8 --out /tmp/sweep-tp2 --tar sweep-tp2.tar.gz

Budget. With ``--budget-s``, a lane does not start a run that would end past the budget (its
expected length: ``--duration-s`` plus the longest start-up and stop seen so far, or
``START_GUESS_S`` before the first); skipped runs are listed in ``sweep.json``, and the archive is
written in any case, so a wall-clock limit on the whole call never loses the runs already done.

Placement. The given cores are cut into ``--lanes`` lanes of G + 1 cores each (G cores with
``--main-shares-core``, where the main process shares the first worker's core). A lane runs its
share of the runs one after another; lanes run side by side (they share the host's memory
bandwidth and caches, as GPUs of one node share PCIe and host memory; say so when you report).
In a lane, the trainer's main process (loader thread, log writer) is pinned to the lane's first
core and each worker process, with all its threads, to one core of its own; the trainer itself
runs one torch thread per worker on CPU. Threads a worker starts later inherit its affinity; the
sweep re-pins every ``REPIN_S`` seconds anyway, because affinity is per thread on Linux.

Trainer settings. ``--model``, ``--token-budgets``, ``--samples``, ``--sync-every``, ``--hs-cap``
and ``--pre-queue-depth`` go to every run; left out, the trainer's defaults hold.

Length. The trainer has no time limit, so each run gets SIGINT ``--duration-s`` seconds after its
log's header appears (the header is written once every worker has built its model): the log then
ends with reason "interrupted", which the advisor reads like any other log.

Repeats. Each (split, repeat) runs once; repeats use different seeds (corpus, batching, weights),
and are spread over lanes and time, so the spread of one split's measured rates is the truth's
own noise (machine, placement and drift), not only sampling noise.

Output: ``OUT/<name>.jsonl`` per run and ``OUT/sweep.json`` (one record per run: split, repeat,
lane, cores, start and end wall times, exit code, duration; and the ``machine``: host name, boot
id, CPU model, threads per core, hypervisor, from `machine`); ``--tar`` packs the folder.

Machines. A split's truth is the mean of its repeats on one machine. Two lent machines of the same
kind are not one machine: they can rank the splits differently (BENCHMARKS.md 19.17). A virtual
machine's cores may share physical cores with other guests, which the guest does not see. Repeats
recorded on another machine (another ``machine.boot_id``) belong in a sweep folder of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPIN_S = 2.0
START_GUESS_S = 20.0  # start-up + stop of a run before one has been measured
HEADER_TIMEOUT_S = 300.0
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, kw_only=True)
class Job:
    name: str
    targets: int
    drafters: int
    repeat: int
    token_budget: int | None
    target_tp: int = 1

    @property
    def processes(self) -> int:
        return self.targets * self.target_tp + self.drafters


@dataclass(frozen=True, kw_only=True)
class JobRecord:
    name: str
    targets: int
    drafters: int
    repeat: int
    token_budget: int | None
    target_tp: int
    lane: int
    cores: list[int]
    start_wall_s: float
    end_wall_s: float
    run_s: float
    exit_code: int
    workers_pinned: int
    log: str


def parse_cores(text: str) -> list[int]:
    """'0-7,16,18-19' -> [0..7, 16, 18, 19]."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def parse_splits(text: str, gpus: int | None, target_tp: int = 1) -> list[tuple[int, int]]:
    """'1-6,2-4' -> [(1, 6), (2, 4)]: N target engines of ``target_tp`` GPUs and M drafters, N*k + M = G."""
    out = []
    k = "" if target_tp == 1 else f"{target_tp} * "
    for part in text.split(","):
        n, m = (int(v) for v in part.strip().split("-"))
        if n < 1 or m < 1 or (gpus is not None and n * target_tp + m != gpus):
            raise SystemExit(f"sweep: split {part!r} is not N-M with N, M >= 1 and {k}N + M = {gpus}")
        out.append((n, m))
    return out


def feasible_splits(gpus: int, target_tp: int = 1) -> list[tuple[int, int]]:
    """Every split N-M of ``gpus`` with N target engines of ``target_tp`` GPUs: N*k + M = G, N, M >= 1."""
    return [(n, gpus - n * target_tp) for n in range(1, gpus) if gpus - n * target_tp >= 1]


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (scan of /proc: works without CONFIG_PROC_CHILDREN)."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: the ppid follows the last ')'
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and int(fields[1]) == pid:
            kids.append(int(d))
    return sorted(kids)


def _is_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ")
    except OSError:
        return False
    return b"multiprocessing-fork" in cmd or b"spawn_main" in cmd


def _pin(pid: int, cores: set[int]) -> None:
    """Pin every thread of ``pid`` to ``cores`` (sched_setaffinity acts on one thread)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cores)
        except OSError:
            pass


def _header_written(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError:
        return False
    return b'"ev": "run"' in head or b'"ev":"run"' in head


def run_job(job: Job, lane: int, cores: list[int], args, out: Path) -> JobRecord:
    log = out / f"{job.name}.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "trainer",
        "--no-progress",
        "--device",
        args.device,
        "--targets",
        str(job.targets),
        "--drafters",
        str(job.drafters),
        "--seed",
        str(job.repeat),
        "--rates-every",
        str(args.rates_every),
        "--run-name",
        job.name,
        "--out",
        str(log),
        "--epochs",
        str(args.epochs),
    ]
    if job.target_tp > 1:
        cmd += ["--target-tp", str(job.target_tp)]
    if args.model:
        cmd += ["--model", args.model]
    if job.token_budget:
        cmd += ["--token-budget", str(job.token_budget)]
    if args.samples:
        cmd += ["--samples", str(args.samples)]
    if args.sync_every is not None:
        cmd += ["--sync-every", str(args.sync_every)]
    if args.hs_cap is not None:
        cmd += ["--hs-cap", str(args.hs_cap)]
    if args.pre_queue_depth is not None:
        cmd += ["--pre-queue-depth", str(args.pre_queue_depth)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    main_core, worker_cores = cores[0], cores if args.main_shares_core else cores[1:]
    t_start = time.time()
    errf = open(out / f"{job.name}.stderr", "w")
    proc = subprocess.Popen(
        cmd,
        cwd=args.cwd,
        env=env,
        stdout=errf,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: os.sched_setaffinity(0, {main_core}),
    )
    assigned: dict[int, int] = {}
    header_at = None
    stop_sent = False
    next_pin = 0.0
    while proc.poll() is None:
        now = time.monotonic()
        if now >= next_pin:
            for kid in _children(proc.pid):
                if kid not in assigned and _is_worker(kid) and len(assigned) < len(worker_cores):
                    assigned[kid] = worker_cores[len(assigned)]
            for kid, core in assigned.items():
                _pin(kid, {core})
            _pin(proc.pid, {main_core})
            next_pin = now + (0.2 if len(assigned) < job.processes else REPIN_S)
        if header_at is None and _header_written(log):
            header_at = now
        if not stop_sent and (
            header_at is not None
            and now - header_at >= args.duration_s
            or header_at is None
            and time.time() - t_start > HEADER_TIMEOUT_S
        ):
            proc.send_signal(signal.SIGINT)
            stop_sent = True
        time.sleep(0.1)
    errf.close()
    t_end = time.time()
    return JobRecord(
        name=job.name,
        targets=job.targets,
        drafters=job.drafters,
        repeat=job.repeat,
        token_budget=job.token_budget,
        target_tp=job.target_tp,
        lane=lane,
        cores=cores,
        start_wall_s=round(t_start, 3),
        end_wall_s=round(t_end, 3),
        run_s=round(t_end - t_start, 3),
        exit_code=proc.returncode,
        workers_pinned=len(assigned),
        log=log.name,
    )


def plan_jobs(splits, repeats: int, budgets, prefix: str, first_repeat: int = 0, target_tp: int = 1) -> list[Job]:
    """Repeat r of every split before repeat r + 1, and each repeat in a rotated order, so a split's
    repeats fall on different lanes and at different times."""
    jobs = []
    for r in range(first_repeat, first_repeat + repeats):
        order = splits[r % len(splits) :] + splits[: r % len(splits)] if r % 2 == 0 else list(reversed(splits))
        for n, m in order:
            for tb in budgets:
                tag = (f"-tp{target_tp}" if target_tp > 1 else "") + (f"-tb{tb}" if tb else "")
                jobs.append(
                    Job(
                        name=f"{prefix}-{n}x{m}{tag}-r{r}",
                        targets=n,
                        drafters=m,
                        repeat=r,
                        token_budget=tb,
                        target_tp=target_tp,
                    )
                )
    return jobs


def fits_budget(budget_s: float | None, elapsed_s: float, duration_s: float, done: list[JobRecord]) -> bool:
    """Whether a run started now ends within ``budget_s`` (None: no budget); see the docstring."""
    if budget_s is None:
        return True
    overhead = max((r.run_s - duration_s for r in done), default=START_GUESS_S)
    return elapsed_s + duration_s + max(overhead, 0.0) <= budget_s


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def machine() -> dict:
    """What identifies the machine a sweep ran on (Linux; fields empty elsewhere): its host name,
    its boot id (another boot or another machine: another id), the CPU model, how many logical
    CPUs share cpu0's core, and whether the CPU reports a hypervisor (a virtual machine)."""
    info = _read("/proc/cpuinfo")
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    siblings = _read("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list").strip()
    return {
        "host": os.uname().nodename,
        "boot_id": _read("/proc/sys/kernel/random/boot_id").strip(),
        "cpu_model": model,
        "threads_per_core": len(parse_cores(siblings)) if siblings else None,
        "hypervisor": "hypervisor" in info.split(),  # (a CPU flag)
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=None, help="G: every split must sum to it")
    ap.add_argument(
        "--splits", default="all", help="comma-separated N-M, e.g. 7-1,6-2; 'all': every feasible split of --gpus"
    )
    ap.add_argument("--target-tp", type=int, default=1, help="GPUs (cores) per target engine (tensor parallelism)")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="start no run that would end past this many seconds of the sweep's wall clock",
    )
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--first-repeat", type=int, default=0, help="index (and seed) of the first repeat")
    ap.add_argument("--duration-s", type=float, default=90.0, help="seconds after the header before SIGINT")
    ap.add_argument("--cores", required=True, help="cores to use, e.g. 0-26")
    ap.add_argument("--lanes", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", default=None)
    ap.add_argument("--token-budgets", default="", help="comma-separated budgets (default: the trainer's)")
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--epochs", type=int, default=40, help="passes over the corpus (enough not to run dry)")
    ap.add_argument("--rates-every", type=float, default=2.0)
    ap.add_argument("--sync-every", type=int, default=None, help="drafter steps per sync (default: the trainer's)")
    ap.add_argument("--hs-cap", type=int, default=None, help="q_hs depth in batches (default: the trainer's)")
    ap.add_argument("--pre-queue-depth", type=int, default=None, help="q_pre depth per target (default: the trainer's)")
    ap.add_argument(
        "--main-shares-core",
        action="store_true",
        help="lanes of G cores: the trainer's main process shares the first worker's core (default: G + 1)",
    )
    ap.add_argument("--prefix", default="sweep")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tar", default=None, help="write this .tar.gz of the output folder")
    ap.add_argument("--cwd", default=str(ROOT), help="where `python -m trainer` is importable")
    ap.add_argument("--dry-run", action="store_true", help="print the lanes and the runs in order, run nothing")
    args = ap.parse_args(argv)

    if args.target_tp < 1:
        raise SystemExit(f"sweep: --target-tp must be >= 1, got {args.target_tp}")
    if args.splits == "all":
        if args.gpus is None:
            raise SystemExit("sweep: --splits all needs --gpus")
        splits = feasible_splits(args.gpus, args.target_tp)
    else:
        splits = parse_splits(args.splits, args.gpus, args.target_tp)
    budgets = [int(b) for b in args.token_budgets.split(",") if b.strip()] or [None]
    cores = parse_cores(args.cores)
    width = max(n * args.target_tp + m for n, m in splits) + (0 if args.main_shares_core else 1)
    if args.lanes * width > len(cores):
        raise SystemExit(f"sweep: {args.lanes} lanes of {width} cores need {args.lanes * width}, got {len(cores)}")
    lanes = [cores[i * width : (i + 1) * width] for i in range(args.lanes)]
    jobs = plan_jobs(splits, args.repeats, budgets, args.prefix, args.first_repeat, args.target_tp)
    if args.dry_run:
        print(f"sweep: {len(lanes)} lane(s) {lanes}; {len(jobs)} runs of {args.duration_s:g} s after the header:")
        for j in jobs:
            print(
                f"  {j.name}: {j.targets} target engine(s) x {j.target_tp} + {j.drafters} drafter(s) = "
                f"{j.processes} worker processes"
            )
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pending = list(jobs)
    lock = threading.Lock()
    records: list[JobRecord] = []
    skipped: list[str] = []
    t0 = time.monotonic()

    def lane_loop(i: int) -> None:
        while True:
            with lock:
                if not pending:
                    return
                job = pending.pop(0)
                if not fits_budget(args.budget_s, time.monotonic() - t0, args.duration_s, records):
                    skipped.append(job.name)
                    print(f"sweep: {job.name} skipped: it would end past --budget-s {args.budget_s:g}", flush=True)
                    continue
            rec = run_job(job, i, lanes[i], args, out)
            with lock:
                records.append(rec)
                print(f"sweep: {rec.name} lane {i} exit {rec.exit_code} {rec.run_s:.0f} s", flush=True)

    threads = [threading.Thread(target=lane_loop, args=(i,)) for i in range(args.lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records.sort(key=lambda r: r.start_wall_s)
    meta = {
        "argv": sys.argv[1:],
        "cpu_count": os.cpu_count(),
        "machine": machine(),
        "lanes": lanes,
        "runs": [asdict(r) for r in records],
        "skipped": skipped,
    }
    (out / "sweep.json").write_text(json.dumps(meta, indent=1) + "\n")
    if args.tar:
        with tarfile.open(args.tar, "w:gz") as tf:
            tf.add(out, arcname=out.name)
    bad = [r.name for r in records if r.exit_code not in (0, 130)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
