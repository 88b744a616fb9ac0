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
@pytest.mark.parametrize(
    "name,targets,drafters,scale",
    [
        ("cpu-2x1", 2, 1, 0.1),  # real CPU run, target-bound, shared 2-core machine
        ("h200-2x1", 2, 1, 0.01),  # real H200 run, 100x faster than real time
        ("h200-1x2", 1, 2, 0.01),  # two drafters: resampled sync durations
    ],
)
def test_emulation_matches_the_source_throughput_on_its_own_split(tmp_path, name, targets, drafters, scale):
    source = ROOT / "fixtures" / f"{name}.jsonl"
    out = tmp_path / "emu.jsonl"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer",
            "--no-progress",
            "--emulate",
            str(source),
            "--targets",
            str(targets),
            "--drafters",
            str(drafters),
            "--time-scale",
            str(scale),
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr
    head = json.loads(out.read_text().splitlines()[0])
    src, emu = load_log(source), load_log(out)
    assert head["mode"] == "emulate" and head["time_scale"] == scale
    assert head["token_budget"] == src.header.token_budget and dict(emu.header.roles) == dict(src.header.roles)
    bps_src, _, t_end_src = steady_throughput(src)
    bps_emu, _, t_end = steady_throughput(emu)
    # the emulated rate rides on the host's scheduling (at scale 0.1 a step is ~10 ms of wall time):
    # on the 2-core host, 17 emulations of cpu-2x1 read 5.69-5.83 b/s against the source's 5.63
    # (+1.1% to +3.6%), so 3% failed now and then (CI, 2026-12-02)
    assert bps_emu == pytest.approx(bps_src, rel=0.05)
    # the log is in emulated seconds on the ideal timeline: the run lasts about as long as the source
    # (not 1/scale less), and wall-clock overhead, which a loaded machine multiplies, is not in it
    assert t_end == pytest.approx(t_end_src, rel=0.2)
    _check_ideal_timeline(out, check_drafters=drafters == 1)
    assert len(emu.steps[emu.steps["role"] == "drafter"]) == len(src.steps[src.steps["role"] == "drafter"])
    if drafters > 1:
        assert len(emu.syncs) > 0 and emu.syncs["bytes"].iloc[0] == src.syncs["bytes"].iloc[0]


@pytest.mark.slow
def test_emulated_two_drafters_sync_only_with_a_sync_cost_and_report_it(tmp_path):
    out = tmp_path / "emu2.jsonl"
    base = [
        sys.executable,
        "-m",
        "trainer",
        "--no-progress",
        "--emulate",
        str(SOURCE),
        "--targets",
        "2",
        "--drafters",
        "2",
        "--sync-every",
        "4",
        "--time-scale",
        "0.05",
        "--steps",
        "60",
        "--out",
        str(out),
    ]
    # the source ran one drafter (no sync to resample) and no --sync-s: no sync, said in one line
    r = subprocess.run(base, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[:-1] == [
        f"dflash-train: {SOURCE} has no sync of several drafters: emulating 2 drafters "
        "without weight sync (the log says sync_every 0; --sync-s SECONDS emulates one)"
    ]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["sync_every"] == 0 and not any(x["ev"] == "sync" for x in lines)
    r = subprocess.run(base + ["--sync-s", "0.2", "--force"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    syncs = [json.loads(x) for x in out.read_text().splitlines() if '"ev":"sync"' in x]
    assert len(syncs) >= 6 and all(s["workers"] == 2 for s in syncs)
    # the emulated collective lasts the drawn 0.2 s (in emulated seconds) exactly: overheads are not in it
    assert all(s["dur"] == 0.2 for s in syncs)
    _check_ideal_timeline(out, check_drafters=False)


def _emulate(tmp_path, source: Path, *args: str, name: str = "emu") -> Path:
    out = tmp_path / f"{name}.jsonl"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer",
            "--no-progress",
            "--emulate",
            str(source),
            "--sync-every",
            "0",
            "--time-scale",
            "0.01",
            "--out",
            str(out),
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr
    return out


def _steps(out: Path, role: str) -> list[dict]:
    return [e for e in map(json.loads, out.read_text().splitlines()) if e.get("ev") == "step" and e["role"] == role]


@pytest.mark.slow
def test_a_batch_from_another_node_takes_its_bytes_over_the_link_in_xfer_and_busy(tmp_path):
    """One target on node 0, one drafter on node 1: every batch crosses an uncontended link, so
    each drafter step's xfer is exactly tokens * hs_bytes_per_token / link_bytes_s, inside busy;
    the same split on one node has xfer 0. The header says where every engine sat."""
    source = ROOT / "fixtures" / "h200-1x1.jsonl"
    link = 2.5e10
    out = _emulate(
        tmp_path,
        source,
        "--targets",
        "1",
        "--drafters",
        "1",
        "--gpus-per-node",
        "1",
        "--link-bytes-s",
        str(link),
        "--steps",
        "80",
    )
    head = json.loads(out.read_text().splitlines()[0])
    assert head["gpus_per_node"] == 1 and head["link_bytes_s"] == link
    assert head["placement"] == {"target": [0], "drafter": [1]}
    bpt = head["hs_bytes_per_token"]
    prof = load_profile(str(source))
    for e in _steps(out, "drafter"):
        assert e["xfer"] == pytest.approx(e["tokens"] * bpt / link, abs=2e-6)
        assert (
            e["busy"] - e["xfer"] >= 0
            and e["busy"] - e["xfer"]
            <= max(prof.drafter.residuals_s) + prof.drafter.t0_s + prof.drafter.per_token_s * e["tokens"] + 1e-5
        )
    same = _emulate(
        tmp_path,
        source,
        "--targets",
        "1",
        "--drafters",
        "1",
        "--gpus-per-node",
        "2",
        "--link-bytes-s",
        str(link),
        "--steps",
        "40",
        name="same",
    )
    assert json.loads(same.read_text().splitlines()[0])["placement"] == {"target": [0], "drafter": [0]}
    assert all(e["xfer"] == 0 for e in _steps(same, "drafter"))
    # an emulation of the emulated log fits the drafter's compute without the link's time
    again = load_profile(str(out))
    compute = [e["busy"] - e["xfer"] for e in _steps(out, "drafter") if e["t"] >= again.steady_from_s]
    assert again.drafter.mean_busy_s == pytest.approx(float(np.mean(compute)), rel=1e-4)


@pytest.mark.slow
def test_a_link_slower_than_both_roles_sets_the_throughput(tmp_path):
    """Two targets on node 0 feed two drafters on node 1 through a link of 1.5 cross-node batches
    a second, below the targets' ~7 b/s and the drafters' ~50 b/s: the steady rate is the link's,
    transfers queue for it (xfer above one batch's bytes / bandwidth), and a placement that keeps
    every hand-off on one node runs at the targets' rate."""
    source = ROOT / "fixtures" / "h200-1x1.jsonl"
    src = load_log(source)
    bpt = src.header.hs_bytes_per_token
    mean_tokens = float(src.steps[src.steps["role"] == "drafter"]["tokens"].mean())
    link = 1.5 * mean_tokens * bpt
    out = _emulate(
        tmp_path,
        source,
        "--targets",
        "2",
        "--drafters",
        "2",
        "--gpus-per-node",
        "2",
        "--link-bytes-s",
        str(link),
        "--steps",
        "150",
    )
    bps, _, _ = steady_throughput(load_log(out))
    assert bps == pytest.approx(1.5, rel=0.05)
    steps = _steps(out, "drafter")
    assert max(e["xfer"] - e["tokens"] * bpt / link for e in steps) > 0.1  # waited for the link
    local = _emulate(
        tmp_path,
        source,
        "--targets",
        "2",
        "--drafters",
        "2",
        "--gpus-per-node",
        "2",
        "--link-bytes-s",
        str(link),
        "--placement",
        "target=0,1;drafter=0,1",
        "--steps",
        "150",
        name="local",
    )
    crossed = [e for e in _steps(local, "drafter") if e["xfer"] > 0]
    assert 0 < len(crossed) < len(_steps(local, "drafter"))  # only batches from the other node cross
    # one shared q_hs ties a batch's origin to whichever drafter takes it, so most hand-offs still
    # cross here and the link still bounds the rate (BENCHMARKS 16.1: 64% crossed at the spread 6-4):
    # the local placement is no slower, within the emulation's own noise
    assert steady_throughput(load_log(local))[0] >= 0.97 * bps


def test_a_link_needs_the_sources_hidden_state_size(tmp_path):
    src = tmp_path / "nohs.jsonl"
    lines = (ROOT / "fixtures" / "h200-1x1.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head.pop("hs_bytes_per_token")
    src.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer",
            "--no-progress",
            "--emulate",
            str(src),
            "--gpus-per-node",
            "1",
            "--link-bytes-s",
            "1e9",
            "--out",
            str(tmp_path / "o.jsonl"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "no hs_bytes_per_token" in r.stderr


@pytest.mark.slow
def test_the_readme_emulation_ends_at_its_last_step_and_advises_on_a_steady_window(tmp_path):
    """README's line: 6-2 emulated at --time-scale 0.01. The pipeline ends with its last step; the
    seconds its processes take to exit are wall time, which 1/time-scale would blow up 100-fold, so
    neither the `end` nor a `rates` snapshot may lie past the last step (one had the end at 36.7 s
    after a last step at 3.58 s, and the advisor cut 92% of the log as the final drain). Nor may a
    snapshot taken while a worker runs late on a loaded machine."""
    out = _emulate(tmp_path, SOURCE, "--targets", "6", "--drafters", "2", "--steps", "600")
    events = [json.loads(x) for x in out.read_text().splitlines()]
    last_step = max(e["t"] for e in events if e["ev"] in ("step", "sync"))
    end = events[-1]
    assert end["ev"] == "end" and end["reason"] == "done"
    # on the ideal timeline, whatever the machine's load: nothing after the last step, which ends the run
    assert end["t"] == last_step and all(e["t"] <= end["t"] for e in events), (last_step, end["t"])
    snaps = [e for e in events if e["ev"] == "rates"]
    assert snaps and snaps[-1]["t"] == end["t"] and snaps[-1]["done"] == 1.0

    from advisor import advise

    adv = advise([str(out)])
    ob = adv.observed
    assert ob.drain_share < 0.2, ob.drain_share
    # a drafter starves only on an empty q_hs: the two measured shares cannot both be large
    # (the short log had q_hs "full 100% of the time" beside "drafters starved 13%")
    if ob.hs_full_share is not None and ob.consumer_starved is not None:
        assert ob.hs_full_share + ob.consumer_starved <= 1.05, (ob.hs_full_share, ob.consumer_starved)
    # 600 batches: the steady window is not thin evidence (the 60 of the old line left "only 29 steady batches")
    said = " ".join([*adv.recommendation.reasons, *adv.warnings])
    assert " steady batches (at least" not in said, said


@pytest.mark.slow
def test_an_emulated_gpu_run_reads_as_gpus_not_cpu_workers(tmp_path):
    """Issue 50: an emulation of a GPU log wrote its host's `device: cpu` (and `physical_gpus: 0`), so
    its advice read "3 CPU workers" and "worker util". The emulated workers stand in for the
    source's: the header carries the source's device, and the advice speaks of GPUs."""
    from typer.testing import CliRunner

    from advisor.cli.app import app

    source = ROOT / "fixtures" / "h200-2x1.jsonl"
    assert load_log(source).header.extra["device"] == "cuda"
    out = _emulate(tmp_path, source, "--targets", "2", "--drafters", "1", "--steps", "60")
    head = json.loads(out.read_text().splitlines()[0])
    assert head["mode"] == "emulate" and head["device"] == "cuda" and "physical_gpus" not in head
    res = CliRunner().invoke(app, ["advise", str(out)])
    assert res.exit_code == 0, res.output
    assert "3 GPUs, observed 2-1" in res.stdout and "gpu util" in res.stdout, res.stdout
    assert "CPU worker" not in res.stdout and "worker util" not in res.stdout, res.stdout
    # a CPU source's emulation stays CPU workers; a source silent on its device leaves it unsaid
    assert load_profile(str(SOURCE)).header["device"] == "cpu"
    assert load_profile(str(ROOT / "fixtures" / "reference-7x1.jsonl")).header["device"] is None
