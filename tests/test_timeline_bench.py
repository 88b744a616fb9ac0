"""benchmarks/timeline.py: one CLI run's steps on its critical path, per piece with --pieces, with
module constants set by --setting (a typo refused, not timed as the default)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "timeline.py"
# read ahead and by pieces whatever the size: small pieces, every file split, two workers
BY_PIECES = ["advisor.cli.app.READ_AHEAD_BYTES=-1", "advisor.ingest.pieces.SPLIT_MIN_BYTES=0",
             "advisor.ingest.pieces.MIN_WORKERS=2", "advisor.ingest.pieces.free_cores=lambda: 2",
             "advisor.ingest.reader.CHUNK_BYTES=4096", "advisor.ingest.reader.RATIO_CHECK_BYTES=0",
             "advisor.ingest.stream.PIECE_BYTES=64<<10"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_a_read_by_pieces_is_timed_step_by_step_and_piece_by_piece(reference):
    settings = [a for s in BY_PIECES for a in ("--setting", s)]
    p = _run(str(reference), "--runs", "1", "--pieces", *settings)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for step in ("read ahead", "import", "fit_pipeline", "refine_weak_spots", "main returned", "process"):
        assert f"| {step} |" in out
    assert "whole process / bare loop:" in out
    rows = [ln for ln in out.splitlines() if ln.startswith("| 0 |") or ln.startswith("| 1 |")]
    assert len(rows) == 2, out          # the 600 kB fixture: pieces 0 and 1 at least, each timed
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        read_from, read_to, back, folded = map(float, cells[1:5])
        assert read_from <= read_to <= back <= folded + 0.01


def test_a_setting_that_names_nothing_is_refused(reference):
    p = _run(str(reference), "--runs", "1", "--setting", "advisor.ingest.pieces.NO_SUCH_NAME=1")
    assert p.returncode != 0
    assert "has no NO_SUCH_NAME" in (p.stderr + p.stdout)


def test_the_large_g_path_is_timed_with_gpus(reference):
    """--gpus G runs the CLI's own --gpus: the steps of the large-G advice, each in its row."""
    p = _run(str(reference), "--runs", "1", "--gpus", "16", "--setting", "advisor.cli.app.READ_AHEAD_BYTES=-1")
    assert p.returncode == 0, p.stderr
    header = [ln for ln in p.stdout.splitlines() if not ln.startswith("note:")][0]    # (a note on bytecode first)
    assert header.startswith("reference-7x1.jsonl --gpus 16,")
    for step in ("project", "refine_weak_spots", "main returned", "process"):
        assert f"| {step} |" in p.stdout


def test_large_g_pairs_own_g_with_the_large_g_and_compares_the_checkouts(reference, tmp_path):
    """benchmarks/large_g.py: own G against --gpus G, round by round, and a base checkout's
    outputs compared byte for byte (here a copy of this one: identical). A checkout run without
    its bytecode where Python may not write it (the device) is named: each run compiles it."""
    import os
    import shutil

    base = tmp_path / "base"
    shutil.copytree(ROOT / "advisor", base / "advisor", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "large_g.py"), str(reference), "--gpus", "16",
                        "--runs", "1", "--base", str(base)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env=env)
    assert p.returncode == 0, p.stderr
    notes = [ln for ln in p.stdout.splitlines() if ln.startswith("note:")]
    # (this checkout has its bytecode unless the suite itself runs without writing any)
    assert any(str(base) in n and "compiles it from source" in n for n in notes), p.stdout
    rows = [ln for ln in p.stdout.splitlines() if ln.startswith("| this |") or ln.startswith("| base |")]
    assert len(rows) == 2
    own, large, ratio = (float(c.strip().rstrip("x")) for c in rows[0].strip("|").split("|")[1:4])
    assert own > 0 and large > 0 and ratio == pytest.approx(large / own, rel=0.02, abs=0.01)
    assert "own G: the two checkouts' outputs are identical" in p.stdout
    assert "--gpus 16: the two checkouts' outputs are identical" in p.stdout
