"""Per-rank logs (advisor.ingest.ranks, advisor.ingest.load.load_logs): a run split into one file per worker
reads, and advises, exactly like the single file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import split_by_rank
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synth import Scenario, ServiceModel, TokenModel, write_log
from typer.testing import CliRunner

from advisor import advise
from advisor.cli.app import app, route
from advisor.errors import LogError
from advisor.ingest.load import load_log, load_logs
from advisor.present.json import advice_json

ROOT = Path(__file__).resolve().parents[2]


def _scenario(**kw) -> Scenario:
    tm = TokenModel(budget=4096, mean=3900.0, cv=0.05, seq_len=500.0)
    base = dict(
        name="ranks",
        n_target=2,
        n_drafter=2,
        target=ServiceModel.from_mean(0.2, tm.mean, scv=0.1),
        drafter=ServiceModel.from_mean(0.15, tm.mean, scv=0.1),
        tokens=tm,
        sync_every=2,
        sync_s=0.05,
        sync_bytes=1.5e8,
        n_batches=2000,
        seed=3,
        hs_bytes_per_token=1000,
    )
    base.update(kw)
    return Scenario(**base)


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("single") / "run.jsonl"
    write_log(p, _scenario(), rates_every_s=10.0)
    return p


def _without_paths(adv, *paths) -> str:
    text = json.dumps(advice_json(adv), sort_keys=True)
    for p in paths:
        text = text.replace(str(p), "<log>")
    return text


def test_per_rank_directory_glob_and_files_advise_like_the_single_file(single, tmp_path):
    files = split_by_rank(single, tmp_path / "run")
    assert len(files) == 5  # 2 targets, 2 drafters, coordinator
    want = _without_paths(advise(single), single)
    d = tmp_path / "run"
    assert _without_paths(advise(d), d) == want
    pattern = str(d / "*.jsonl")
    assert _without_paths(advise(pattern), pattern) == want
    merged = load_logs(files)  # an unquoted glob, expanded by the shell
    assert len(merged) == 1
    assert _without_paths(advise(files), merged[0].path) == want


def test_merged_frames_equal_the_single_files(single, tmp_path):
    one = load_log(single)
    split_by_rank(single, tmp_path / "x")
    many = load_logs([tmp_path / "x"])[0]
    key = ["t", "role", "worker"]
    a = one.steps.sort_values(key, kind="stable").reset_index(drop=True)
    b = many.steps.sort_values(key, kind="stable").reset_index(drop=True)
    assert a.equals(b)
    assert set(zip(b["role"], b["worker"])) == {("target", 0), ("target", 1), ("drafter", 0), ("drafter", 1)}
    assert one.syncs.equals(many.syncs) and one.rates.equals(many.rates)
    assert many.end == one.end
    assert many.n_lines == one.n_lines + 4 * 2  # 4 extra copies of the header and of the end line


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(st.lists(st.integers(0, 2), min_size=5, max_size=5))
def test_any_grouping_of_workers_into_files_merges_to_the_same_steps(single, tmp_path_factory, assign):
    src_lines = single.read_text().splitlines()
    head, body = src_lines[0], src_lines[1:]
    names = ["target-0", "target-1", "drafter-0", "drafter-1", "other"]
    out = tmp_path_factory.mktemp("g")
    buckets: dict[int, list[str]] = {}
    for ln in body:
        o = json.loads(ln)
        name = f"{o['role']}-{o['worker']}" if o["ev"] == "step" else "other"
        buckets.setdefault(assign[names.index(name)], []).append(ln)
    for k, ls in buckets.items():
        (out / f"f{k}.jsonl").write_text("\n".join([head, *ls]) + "\n")
    merged = load_logs([out])[0]
    one = load_log(single)
    key = ["t", "role", "worker"]
    assert (
        merged.steps.sort_values(key, kind="stable")
        .reset_index(drop=True)
        .equals(one.steps.sort_values(key, kind="stable").reset_index(drop=True))
    )
    assert len(merged.rates) == len(one.rates) and len(merged.syncs) == len(one.syncs)


def test_end_only_when_every_file_ended_and_worst_reason_wins(single, tmp_path):
    files = split_by_rank(single, tmp_path / "r", end_in_all=False)
    assert load_logs([tmp_path / "r"])[0].end is None  # a live run: no file has ended
    end = {"ev": "end", "t": 123.5, "reason": "done"}
    for f in files:
        f.write_text(f.read_text() + json.dumps(end) + "\n")
    files[0].write_text(
        files[0].read_text().rsplit("\n", 2)[0]
        + "\n"
        + json.dumps({"ev": "end", "t": 99.0, "reason": "error", "msg": "CUDA OOM"})
        + "\n"
    )
    got = load_logs([tmp_path / "r"])[0].end
    assert got["reason"] == "error" and got["t"] == 123.5 and "CUDA OOM" in got["msg"] and files[0].name in got["msg"]


def test_equal_headers_with_the_same_workers_are_separate_runs(single, tmp_path):
    copy = tmp_path / "again.jsonl"
    copy.write_bytes(single.read_bytes())
    assert len(load_logs([single, copy])) == 2  # the same job twice, not ranks of one run


def _cli(args):
    return CliRunner().invoke(app, route(args))


def test_differing_header_exits_2_naming_file_and_field(single, tmp_path):
    files = split_by_rank(single, tmp_path / "bad")
    lines = files[2].read_text().splitlines()
    head = json.loads(lines[0])
    head["token_budget"] = 8192
    files[2].write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    r = _cli([str(tmp_path / "bad")])
    assert r.exit_code == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1
    assert f"{files[2]}:1: field 'token_budget'" in err[0] and "8192" in err[0] and "4096" in err[0]


@pytest.mark.parametrize("arg, words", [("empty-dir", "no .jsonl"), ("nothing-*.jsonl", "matches no file")])
def test_empty_directory_or_glob_exits_2(tmp_path, arg, words):
    (tmp_path / "empty-dir").mkdir()
    r = _cli([str(tmp_path / arg)])
    assert r.exit_code == 2 and words in r.stderr and str(tmp_path / arg) in r.stderr


def test_directory_argument_from_the_installed_command(single, tmp_path):
    split_by_rank(single, tmp_path / "run")
    env = {"PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-c", "from advisor.cli.app import main; main()", str(tmp_path / "run"), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["observed"]["roles"] == {"target": 2, "drafter": 2}


def test_overlong_name_is_unusable_not_a_crash(tmp_path):
    r = _cli([str(tmp_path / ("a" * 300 + ".jsonl"))])
    assert r.exit_code == 2 and "internal error" not in r.stderr


def test_unlistable_directory_is_unusable_not_a_crash(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as a user that reads any directory")
        r = _cli([str(locked)])
        assert r.exit_code == 2 and "cannot be listed" in r.stderr
    finally:
        locked.chmod(0o755)


def test_missing_file_still_names_it(tmp_path):
    with pytest.raises(LogError, match="no such file"):
        load_logs([tmp_path / "nope.jsonl"])


def test_plain_rank_files_warn_of_an_unknown_event_once(single, tmp_path):
    # each file is warned of as it is read; the run merged from them does not warn again
    files = split_by_rank(single, tmp_path / "u")
    with open(files[0], "a") as fh:
        fh.write(json.dumps({"ev": "mystery", "t": 1.0}) + "\n")
    adv = advise(files)
    said = [w for w in adv.warnings if "unknown type" in w]
    assert len(said) == 1 and "mystery: 1" in said[0]
