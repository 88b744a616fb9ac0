"""Emulation: profile fit, permutation draws, and fidelity on the source's own split."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from advisor.ingest.load import load_log  # noqa: E402
from trainer.emulate import Permuted, fit_service, load_profile, steady_throughput  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "fixtures" / "cpu-2x1.jsonl"


def test_fit_recovers_a_linear_service_time():
    rng = np.random.default_rng(0)
    tokens = rng.integers(1000, 2000, 400)
    busy = 0.05 + 2e-4 * tokens + rng.normal(0, 0.01, 400)
    f = fit_service("target", tokens, busy)
    assert f.t0_s == pytest.approx(0.05, abs=0.01) and f.per_token_s == pytest.approx(2e-4, rel=0.05)
    assert np.mean(f.residuals_s) == pytest.approx(0.0, abs=1e-9)
    assert f.service_s(1500, 0.0) == pytest.approx(f.t0_s + 1500 * f.per_token_s)


def test_permuted_draws_visit_every_value_once_per_pass():
    p = Permuted([1, 2, 3, 4, 5], np.random.default_rng(1))
    first, second = [p.draw() for _ in range(5)], [p.draw() for _ in range(5)]
    assert sorted(first) == sorted(second) == [1, 2, 3, 4, 5] and first != second


def test_profile_of_the_cpu_fixture():
    prof = load_profile(str(SOURCE))
    log = load_log(SOURCE)
    steady = log.steps[log.steps["t"] >= prof.steady_from_s]
    for role in ("target", "drafter"):
        assert prof.fit(role).mean_busy_s == pytest.approx(steady[steady["role"] == role]["busy"].mean())
    assert prof.source_drafter_steps == 240 and prof.sync_durs_s == ()


def _check_ideal_timeline(out: Path, check_drafters: bool) -> None:
    """Emulated steps tile each worker's ideal timeline exactly, t' = t + wait + busy + blocked
    (to the log's rounding), whatever the machine's load; and each step says how late its process
    ran (lag >= 0, emulated seconds)."""
    steps = [json.loads(x) for x in out.read_text().splitlines() if '"ev":"step"' in x]
    roles = ("target", "drafter") if check_drafters else ("target",)
    for role in roles:
        for w in {e["worker"] for e in steps if e["role"] == role}:
            mine = sorted((e for e in steps if e["role"] == role and e["worker"] == w), key=lambda e: e["t"])
            assert mine[0]["t"] == pytest.approx(mine[0]["wait"] + mine[0]["busy"] + mine[0]["blocked"], abs=5e-6)
            for a, b in zip(mine, mine[1:]):
                assert b["t"] == pytest.approx(a["t"] + b["wait"] + b["busy"] + b["blocked"], abs=5e-6)
    assert all(e["lag"] >= 0 for e in steps)


@pytest.mark.slow
@pytest.mark.parametrize("name,targets,drafters,scale", [
    ("cpu-2x1", 2, 1, 0.1),      # real CPU run, target-bound, shared 2-core machine
    ("h200-2x1", 2, 1, 0.01),    # real H200 run, 100x faster than real time
    ("h200-1x2", 1, 2, 0.01),    # two drafters: resampled sync durations
])
def test_emulation_matches_the_source_throughput_on_its_own_split(tmp_path, name, targets, drafters, scale):
    source = ROOT / "fixtures" / f"{name}.jsonl"
    out = tmp_path / "emu.jsonl"
    r = subprocess.run([sys.executable, "-m", "trainer", "--no-progress", "--emulate", str(source), "--targets",
                        str(targets), "--drafters", str(drafters), "--time-scale", str(scale), "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    head = json.loads(out.read_text().splitlines()[0])
    src, emu = load_log(source), load_log(out)
    assert head["mode"] == "emulate" and head["time_scale"] == scale
    assert head["token_budget"] == src.header.token_budget and dict(emu.header.roles) == dict(src.header.roles)
    bps_src, _, t_end_src = steady_throughput(src)
    bps_emu, _, t_end = steady_throughput(emu)
    assert bps_emu == pytest.approx(bps_src, rel=0.03)
    # the log is in emulated seconds on the ideal timeline: the run lasts about as long as the source
    # (not 1/scale less), and wall-clock overhead, which a loaded machine multiplies, is not in it
    assert t_end == pytest.approx(t_end_src, rel=0.2)
    _check_ideal_timeline(out, check_drafters=drafters == 1)
    assert len(emu.steps[emu.steps["role"] == "drafter"]) == len(src.steps[src.steps["role"] == "drafter"])
    if drafters > 1:
        assert len(emu.syncs) > 0 and emu.syncs["bytes"].iloc[0] == src.syncs["bytes"].iloc[0]


@pytest.mark.slow
def test_emulated_two_drafters_need_a_sync_cost_and_report_it(tmp_path):
    out = tmp_path / "emu2.jsonl"
    base = [sys.executable, "-m", "trainer", "--no-progress", "--emulate", str(SOURCE), "--targets", "2",
            "--drafters", "2", "--sync-every", "4", "--time-scale", "0.05", "--steps", "60", "--out", str(out)]
    r = subprocess.run(base, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("dflash-train: --sync-s: ") and len(r.stderr.splitlines()) == 1
    r = subprocess.run(base + ["--sync-s", "0.2"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    syncs = [json.loads(x) for x in out.read_text().splitlines() if '"ev":"sync"' in x]
    assert len(syncs) >= 6 and all(s["workers"] == 2 for s in syncs)
    # the emulated collective lasts the drawn 0.2 s (in emulated seconds) exactly: overheads are not in it
    assert all(s["dur"] == 0.2 for s in syncs)
    _check_ideal_timeline(out, check_drafters=False)
