"""Coverage-guided fuzzing of every input surface (fuzz/), for a given time and number of jobs.

    pip install -e '.[fuzz]'                      # atheris
    python3 benchmarks/fuzz.py --seconds 560 --jobs 3 --work /tmp/fuzzrun --tar fuzz.tar.gz

Each target of `fuzz.targets.TARGETS` (or ``--targets a,b``) gets ``--jobs`` libFuzzer processes
(``python3 -m fuzz TARGET``) that share one corpus folder, seeded from ``fuzz/corpus/<target>/``
(libFuzzer reloads the folder, so the jobs of a target build on each other's finds). Per input
the bounds of `fuzz.targets` hold: ``-timeout`` (a hang is a crash) and ``-rss_limit_mb``. A job
that stops early (a crash: libFuzzer exits on the first) is started again on the same corpus
until the time is up, so a target keeps fuzzing after a find; its crash files stay.

Reported per target: executions (summed over jobs and restarts), coverage reached (libFuzzer's
``cov:``, edges, and ``ft:``, features: the largest a job printed), corpus size at the end,
exec/s, peak RSS, and the crashes, deduplicated by where they raised (the last advisor frame and
the exception type, or the broken contract's message). Written to ``--json`` and ``--markdown``
(and printed); ``--tar`` packs the work folder (corpora, crash files, job logs, summaries) into one
file and ``--tar-corpus`` the corpora into another, e.g. for a machine from which only a few
files come back. Replay a crash file with
``python3 -m fuzz.targets TARGET FILE``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzz.targets import CORPUS, PER_INPUT_S, RSS_LIMIT_MB, TARGETS  # noqa: E402

STATUS = re.compile(
    r"^#(\d+)\s+\S+\s+cov: (\d+) ft: (\d+)(?: corp: (\d+)/\S+)?.*?(?:exec/s: (\d+))?"
    r"(?: rss: (\d+)Mb)?\s*$"
)
STAT = re.compile(r"^stat::(\w+):\s*(\d+)")
ARTIFACT = re.compile(r"Test unit written to (\S+)")
FRAME = re.compile(r'File "([^"]*/(?:advisor|fuzz)/[^"]+)", line \d+, in (\S+)')
KILL_GRACE_S = 10.0  # past the deadline, a job that did not stop itself is killed


def _job_cmd(target: str, corpus: Path, crashes: Path, seconds: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "fuzz",
        target,
        f"-max_total_time={seconds}",
        f"-timeout={int(PER_INPUT_S)}",
        f"-rss_limit_mb={RSS_LIMIT_MB}",
        f"-artifact_prefix={crashes}/",
        "-print_final_stats=1",
        "-reload=1",
        "-max_len=65536",
        str(corpus),
    ]


def _env() -> dict[str, str]:
    env = dict(
        os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1"
    )
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _signature(text: str) -> str:
    """Where a crash raised: the last advisor/fuzz frame and the exception line (numbers dropped)."""
    lines = re.sub(r"/tmp/dflash-fuzz-[^/\s'\"]+", "TMP", text).splitlines()
    frames = [m for ln in lines if (m := FRAME.search(ln))]
    exc = next(
        (
            ln.strip()
            for ln in reversed(lines)
            if re.match(r"^\s*[A-Za-z_.]+(Error|Exception|Broken|Exit)\b", ln)
            or ln.strip().startswith(("fuzz.targets.ContractBroken", "ContractBroken"))
        ),
        "",
    )
    if "ContractBroken" in exc or not frames:
        return re.sub(r"\d+(\.\d+)?", "N", exc)[:160] or "unknown (see the job log)"
    where = f"{Path(frames[-1].group(1)).name}:{frames[-1].group(2)}"
    return f"{where}: {re.sub(r'[0-9]+', 'N', exc.split(':', 1)[0])}"


def _parse_log(text: str) -> dict:
    out = {"execs": 0, "cov": 0, "ft": 0, "corp": 0, "rss_mb": 0, "execs_per_s": 0, "crashes": []}
    for ln in text.splitlines():
        if m := STATUS.match(ln):
            out["execs"] = max(out["execs"], int(m.group(1)))
            out["cov"] = max(out["cov"], int(m.group(2)))
            out["ft"] = max(out["ft"], int(m.group(3)))
            out["corp"] = max(out["corp"], int(m.group(4) or 0))
            out["rss_mb"] = max(out["rss_mb"], int(m.group(6) or 0))
        elif m := STAT.match(ln):
            key, v = m.group(1), int(m.group(2))
            if key == "number_of_executed_units":
                out["execs"] = max(out["execs"], v)
            elif key == "peak_rss_mb":
                out["rss_mb"] = max(out["rss_mb"], v)
        elif m := ARTIFACT.search(ln):
            out["crashes"].append({"file": m.group(1), "signature": _signature(text[: text.find(ln)][-6000:])})
    return out


class _Job:
    def __init__(self, target: str, index: int, work: Path, deadline: float):
        self.target, self.index, self.deadline = target, index, deadline
        self.dir = work / target
        self.runs: list[dict] = []
        self.proc: subprocess.Popen | None = None
        self.log: Path | None = None

    def start(self) -> bool:
        left = int(self.deadline - time.monotonic())
        if left < 5:
            return False
        self.log = self.dir / f"job{self.index}-run{len(self.runs)}.log"
        self.fh = open(self.log, "wb")
        self.proc = subprocess.Popen(
            _job_cmd(self.target, self.dir / "corpus", self.dir / "crashes", left),
            cwd=ROOT,
            env=_env(),
            stdout=self.fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.t0 = time.monotonic()
        return True

    def poll(self, now: float) -> bool:
        """True while running (restarted after an early stop, killed past the deadline)."""
        if self.proc is None:
            return False
        rc = self.proc.poll()
        if rc is None and now > self.deadline + KILL_GRACE_S:
            os.killpg(self.proc.pid, signal.SIGKILL)
            rc = self.proc.wait()
        if rc is None:
            return True
        self.fh.close()
        stats = _parse_log(self.log.read_text(errors="replace"))
        self.runs.append(dict(stats, rc=rc, wall_s=round(now - self.t0, 1), log=self.log.name))
        self.proc = None
        return self.start()


def _corpus_count(d: Path) -> int:
    return sum(1 for p in d.iterdir() if p.is_file()) if d.is_dir() else 0


def run(targets: list[str], seconds: int, jobs: int, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    for t in targets:
        (work / t / "crashes").mkdir(parents=True, exist_ok=True)
        shutil.copytree(CORPUS / t, work / t / "corpus", dirs_exist_ok=True)
    t_start = time.monotonic()
    deadline = t_start + seconds
    all_jobs = [_Job(t, i, work, deadline) for t in targets for i in range(jobs)]
    for j in all_jobs:
        j.start()
    try:
        while any([j.poll(time.monotonic()) for j in all_jobs]):
            time.sleep(1.0)
    finally:
        for j in all_jobs:
            if j.proc is not None and j.proc.poll() is None:
                os.killpg(j.proc.pid, signal.SIGKILL)
    wall = time.monotonic() - t_start
    result = {
        "seconds": seconds,
        "jobs_per_target": jobs,
        "wall_s": round(wall, 1),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "per_input_s": PER_INPUT_S,
        "rss_limit_mb": RSS_LIMIT_MB,
        "targets": {},
    }
    for t in targets:
        runs = [r for j in all_jobs if j.target == t for r in j.runs]
        crashes = [c for r in runs for c in r["crashes"]]
        found = sorted({Path(p).name for p in os.listdir(work / t / "crashes")})
        unique: dict[str, list[str]] = {}
        for c in crashes:
            unique.setdefault(c["signature"], []).append(Path(c["file"]).name)
        execs = sum(r["execs"] for r in runs)
        result["targets"][t] = {
            "execs": execs,
            "execs_per_s": round(execs / wall, 1) if wall else 0.0,
            "cov": max((r["cov"] for r in runs), default=0),
            "ft": max((r["ft"] for r in runs), default=0),
            "corpus_start": _corpus_count(CORPUS / t),
            "corpus_end": _corpus_count(work / t / "corpus"),
            "peak_rss_mb": max((r["rss_mb"] for r in runs), default=0),
            "runs": len(runs),
            "crash_files": found,
            "crashes": unique,
        }
    return result


def markdown(res: dict) -> str:
    lines = [
        f"Fuzzing: {res['seconds']} s, {res['jobs_per_target']} job(s) per target, {res['cpus']} CPUs, "
        f"Python {res['python']}; per input at most {res['per_input_s']:g} s and {res['rss_limit_mb']} MB RSS.",
        "",
        "| target | executions | exec/s | cov | ft | corpus (seeds -> end) | peak RSS MB | runs | crashes |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for t, r in res["targets"].items():
        lines.append(
            f"| {t} | {r['execs']} | {r['execs_per_s']} | {r['cov']} | {r['ft']} | {r['corpus_start']} -> "
            f"{r['corpus_end']} | {r['peak_rss_mb']} | {r['runs']} | {len(r['crash_files'])} |"
        )
    for t, r in res["targets"].items():
        for sig, files in r["crashes"].items():
            lines.append(f"- {t}: `{sig}` ({len(files)}x, e.g. {files[0]})")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=60, help="Fuzzing time of every target (all in parallel).")
    ap.add_argument("--jobs", type=int, default=1, help="Processes per target.")
    ap.add_argument("--targets", default=",".join(TARGETS), help="Comma-separated targets.")
    ap.add_argument("--work", type=Path, default=Path("/tmp/dflash-fuzz"), help="Corpora, crashes, job logs.")
    ap.add_argument("--json", type=Path, help="Write the summary as JSON here (default: WORK/summary.json).")
    ap.add_argument("--markdown", type=Path, help="Write the summary as Markdown here (default: WORK/summary.md).")
    ap.add_argument("--tar", type=Path, help="Pack the work folder but the corpora into this .tar.gz.")
    ap.add_argument("--tar-corpus", type=Path, help="Pack the corpora at the end into this .tar.gz.")
    a = ap.parse_args()
    targets = [t for t in a.targets.split(",") if t]
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        ap.error(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    try:
        res = run(targets, a.seconds, a.jobs, a.work)
        md = markdown(res)
        for path, text in (
            (a.json or a.work / "summary.json", json.dumps(res, indent=1) + "\n"),
            (a.markdown or a.work / "summary.md", md),
            (a.work / "summary.json", json.dumps(res, indent=1)),
            (a.work / "summary.md", md),
        ):
            Path(path).write_text(text)
        print(md)
    finally:
        for tar, corpora in ((a.tar, False), (a.tar_corpus, True)):
            if tar:
                with tarfile.open(tar, "w:gz") as tf:
                    tf.add(
                        a.work,
                        arcname="fuzz",
                        filter=lambda ti, c=corpora: (
                            ti if (("/corpus" in ti.name) == c or ti.name.count("/") < (2 if c else 1)) else None
                        ),
                    )
                print(f"packed {a.work} into {tar} ({tar.stat().st_size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
