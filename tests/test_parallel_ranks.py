"""The rank-file read benchmark (benchmarks/parallel_ranks.py): polars alone beside the advisor's read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_polars_alone_is_timed_beside_the_read_and_checked_between_runs(tmp_path):
    out = tmp_path / "pr.json"
    modes = ["one core", "all cores", "polars one core", "polars all cores"]
    cmd = [sys.executable, "benchmarks/parallel_ranks.py", "--lines", "8000", "--files", "8", "--runs", "2"]
    cmd += ["--modes", *modes, "--scan", "--dir", str(tmp_path / "d"), "--out", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    (row,) = json.loads(out.read_text())["sets"]
    assert row["files"] == 8
    assert all(row[m]["same"] and row[m]["wall_s"] > 0 for m in modes)
    one, every = row["polars one core"]["wall_s"], row["polars all cores"]["wall_s"]
    assert row["speedup_polars_all_cores_vs_one_core"] == one / every


def test_a_read_on_the_first_n_cores_uses_n_polars_threads(tmp_path):
    """``N cores`` pins the read to the first N cores with N polars threads, and gives the summary
    the other reads give."""
    out = tmp_path / "pr.json"
    cmd = [sys.executable, "benchmarks/parallel_ranks.py", "--lines", "4000", "--files", "4", "--runs", "1"]
    cmd += ["--modes", "one core", "2 cores", "all cores", "--scan", "--dir", str(tmp_path / "d"), "--out", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    (row,) = json.loads(out.read_text())["sets"]
    assert row["2 cores"]["threads"] == 2 and row["2 cores"]["same"]
