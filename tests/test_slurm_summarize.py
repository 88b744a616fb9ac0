"""examples/slurm_summarize.sh, its steps run here: sbatch replaced by a recorder, the job
array by a loop over SLURM_ARRAY_TASK_ID, then the reduce; the merged summary advises as the folder."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from synth import Scenario, ServiceModel, TokenModel, write_log

from advisor import advise
from advisor.present.json import advice_json

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "slurm_summarize.sh"

FAKE_SBATCH = """#!/bin/bash
# records each submission (one line of arguments) and answers with a job id, as sbatch --parsable does
printf '%s\\n' "$*" >> "$SUBMITTED"
echo $(( $(wc -l < "$SUBMITTED") + 100 ))
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A run of 7 rank files (6 workers' steps and a coordinator's syncs and rates), all ended."""
    d = tmp_path_factory.mktemp("slurm")
    tm = TokenModel(budget=4096, mean=3900.0, cv=0.05, seq_len=500.0)
    src = d / "whole.jsonl"
    write_log(
        src,
        Scenario(
            name="slurm",
            n_target=4,
            n_drafter=2,
            tokens=tm,
            sync_every=2,
            sync_s=0.05,
            target=ServiceModel.from_mean(0.2, tm.mean, scv=0.1),
            drafter=ServiceModel.from_mean(0.15, tm.mean, scv=0.1),
            n_batches=1500,
            seed=9,
        ),
        rates_every_s=10.0,
    )
    lines = src.read_text().splitlines()
    head, end = lines[0], lines[-1]  # every rank's file starts with the header and ends
    assert json.loads(end)["ev"] == "end"
    files: dict[str, list[str]] = {}
    for ln in lines[1:-1]:
        o = json.loads(ln)
        files.setdefault(f"{o['role']}-{o['worker']}" if o["ev"] == "step" else "coordinator", []).append(ln)
    run = d / "run"
    run.mkdir()
    for name, body in files.items():
        (run / f"{name}.jsonl").write_text("\n".join([head, *body, end]) + "\n")
    return run


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    sbatch = tmp_path / "sbatch"
    sbatch.write_text(FAKE_SBATCH)
    sbatch.chmod(0o755)
    env = dict(
        os.environ,
        SBATCH=str(sbatch),
        SUBMITTED=str(tmp_path / "submitted"),
        DFLASH_ADVISE=f"{shlex.quote(sys.executable)} -m advisor",
        DFLASH_SUMMARY_DIR=str(tmp_path / "out"),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    env.update(extra)
    return env


def _bash(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, cwd=ROOT)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_launch_map_reduce_gives_the_folders_advice(run_dir, tmp_path):
    env = _env(tmp_path, DFLASH_TASKS="3")
    launch = _bash(str(run_dir), env=env)
    assert launch.returncode == 0, launch.stderr
    array, reduce = (tmp_path / "submitted").read_text().splitlines()
    assert array == f"--parsable --array=0-2 {SCRIPT} {run_dir} map"
    assert reduce == f"--parsable --dependency=afterok:101 --cpus-per-task=1 {SCRIPT} {run_dir} reduce"
    for i in range(3):  # the job array, one task after another
        task = _bash(str(run_dir), "map", env=dict(env, SLURM_ARRAY_TASK_ID=str(i), SLURM_CPUS_PER_TASK="2"))
        assert task.returncode == 0, task.stderr
    parts = sorted((tmp_path / "out").glob("part-*.json"))
    assert [p.name for p in parts] == ["part-00000.json", "part-00001.json", "part-00002.json"]
    done = _bash(str(run_dir), "reduce", env=env)
    assert done.returncode == 0, done.stderr
    merged = json.loads((tmp_path / "out" / "run.json").read_text())
    # every file once, in the order the folder is read
    assert merged["paths"] == [str(p) for p in sorted(run_dir.glob("*.jsonl"))]
    a, b = advice_json(advise([str(tmp_path / "out" / "run.json")])), advice_json(advise([str(run_dir)]))
    for j in (a, b):
        j.pop("logs", None)
        j.pop("warnings", None)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_more_tasks_than_files_and_a_missing_folder(run_dir, tmp_path):
    env = _env(tmp_path, DFLASH_TASKS="50")
    assert _bash(str(run_dir), env=env).returncode == 0
    assert "--array=0-6 " in (tmp_path / "submitted").read_text()  # 7 files: 7 tasks
    bad = _bash(str(tmp_path / "nowhere"), env=env)
    assert bad.returncode == 2 and "is not a directory" in bad.stderr
