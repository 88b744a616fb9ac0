"""advisor.ingest.parallel: many files read in worker processes give what the serial loop gives:
the same merged summary, bit for bit, the same first bad line, the same warnings."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor import advise
from advisor.errors import LogError, LogWarning
from advisor.ingest import parallel, summary
from advisor.ingest.load import load_run, summarize_paths
from advisor.ingest.parallel import plan_workers, summaries_in_order
from advisor.model.synth import Scenario, ServiceModel, TokenModel, write_log


def _scenario() -> Scenario:
    tm = TokenModel(budget=4096, mean=3900.0, cv=0.05, seq_len=500.0)
    return Scenario(name="par", n_target=3, n_drafter=2, target=ServiceModel.from_mean(0.2, tm.mean, scv=0.1),
                    drafter=ServiceModel.from_mean(0.15, tm.mean, scv=0.1), tokens=tm, sync_every=2, sync_s=0.05,
                    n_batches=1500, seed=5)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[Path]:
    """One file per (role, worker) and a coordinator file (syncs, rates), each with the header."""
    d = tmp_path_factory.mktemp("par")
    src = d / "run.jsonl"
    write_log(src, _scenario(), rates_every_s=10.0)
    lines = src.read_text().splitlines()
    files: dict[str, list[str]] = {}
    for ln in lines[1:]:
        o = json.loads(ln)
        key = f"{o['role']}-{o['worker']}" if o["ev"] == "step" else "coordinator"
        files.setdefault(key, []).append(ln)
    out = d / "ranks"
    out.mkdir()
    for name, body in files.items():
        (out / f"{name}.jsonl").write_text("\n".join([lines[0], *body]) + "\n")
    return sorted(out.iterdir())


@pytest.fixture
def always_parallel(monkeypatch):
    """Worker processes whatever the input's size (two at least), as past the crossover."""
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "BYTES_PER_WORKER", 1)
    monkeypatch.setattr(parallel, "free_cores", lambda: 3)


def test_small_runs_stay_serial_and_large_ones_use_a_worker_per_share(ranks, monkeypatch):
    assert plan_workers(ranks) == 1                     # a few hundred kB: read here
    assert plan_workers(ranks[:1]) == 1
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "free_cores", lambda: 4)
    size = sum(p.stat().st_size for p in ranks)
    monkeypatch.setattr(parallel, "BYTES_PER_WORKER", size // 2)
    assert plan_workers(ranks) == 2                     # one worker per share of the input
    monkeypatch.setattr(parallel, "BYTES_PER_WORKER", 1)
    assert plan_workers(ranks) == 4                     # at most one per core
    assert plan_workers(ranks, workers=2) == 2          # or the caller's cap


@pytest.mark.parametrize("sample_rows", [None, 150])
def test_parallel_summary_equals_the_serial_one_bit_for_bit(ranks, always_parallel, monkeypatch, sample_rows):
    if sample_rows:      # sampled files (the workers take the sample size this process has)
        monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", sample_rows)
    serial = summarize_paths(ranks, workers=1).to_json()
    par = summarize_paths(ranks).to_json()
    assert par == serial
    assert (serial["sample_rows"] == sample_rows) if sample_rows else serial["sample_rows"] > 150
    assert any(s["pruned"] for s in serial["samples"].values()) == bool(sample_rows)


def test_parallel_run_advises_as_the_serial_one(ranks, always_parallel, monkeypatch):
    adv_par = advise([str(ranks[0].parent)])
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 1 << 62)
    adv_ser = advise([str(ranks[0].parent)])
    assert json.dumps(adv_par.to_json(), sort_keys=True) == json.dumps(adv_ser.to_json(), sort_keys=True)


def _error(files, workers):
    with pytest.raises(LogError) as e:
        load_run(files, "run", workers=workers)
    return str(e.value)


def test_first_bad_line_is_the_serial_one(ranks, tmp_path, always_parallel):
    files = []
    for i, p in enumerate(ranks):
        q = tmp_path / p.name
        lines = p.read_text().splitlines()
        if i in (2, 4):   # two bad files: the first one in order is named, at its first bad line
            o = json.loads(lines[7])
            o["busy" if o["ev"] == "step" else "t"] = -1.0 - i
            lines[7] = json.dumps(o)
            lines[9] = "{not json"
        q.write_text("\n".join(lines) + "\n")
        files.append(q)
    serial = _error(files, 1)
    assert serial == _error(files, None)
    assert f"{files[2].name}:8:" in serial


def test_a_header_that_differs_before_a_bad_line_is_named_first(ranks, tmp_path, always_parallel):
    files = []
    for i, p in enumerate(ranks):
        q = tmp_path / p.name
        lines = p.read_text().splitlines()
        if i == 1:
            h = json.loads(lines[0])
            h["run"] = "another"
            lines[0] = json.dumps(h)
        if i == 3:
            lines[5] = "{not json"
        q.write_text("\n".join(lines) + "\n")
        files.append(q)
    serial = _error(files, 1)
    assert serial == _error(files, None)
    assert "field 'run'" in serial and files[1].name in serial


def test_warnings_of_files_read_in_workers_are_given_in_order(ranks, tmp_path, always_parallel):
    files = []
    for i, p in enumerate(ranks):
        q = tmp_path / p.name
        text = p.read_text()
        q.write_text(text + ('{"ev":"step","t":1' if i in (1, 3) else ""))   # a last line cut mid-write
        files.append(q)
    with pytest.warns(LogWarning) as got:
        summ = list(summaries_in_order(files))
    cut = [str(w.message) for w in got if "last line is incomplete" in str(w.message)]
    assert len(summ) == len(files) and len(cut) == 2
    assert files[1].name in cut[0] and files[3].name in cut[1]
