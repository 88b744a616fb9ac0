"""advisor.ingest.parallel: many files read in worker processes, folded by groups, give what the
read here gives: the same merged summary, bit for bit, and the file-by-file loop's first bad
line, duplicate and warnings."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from advisor import advise
from advisor.errors import LogError, LogWarning
from advisor.ingest import parallel, summary
from advisor.ingest.load import load_logs, load_run, summarize_paths
from advisor.ingest.parallel import file_groups, fold_run, plan_workers
from advisor.ingest.stream import summarize_log
from advisor.ingest.summary import merge_all
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


@pytest.fixture(params=["one file", "two files"])
def always_parallel(monkeypatch, ranks, request):
    """Worker processes whatever the input's size (two at least), as past the crossover; groups
    of one file, or of about two (the group size between one and two files' bytes)."""
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "BYTES_PER_WORKER", 1)
    monkeypatch.setattr(parallel, "free_cores", lambda: 3)
    sizes = sorted(p.stat().st_size for p in ranks)
    monkeypatch.setattr(parallel, "GROUP_BYTES", sizes[len(sizes) // 2] + 1 if request.param == "two files" else 1)
    assert 2 <= len(file_groups(ranks)) < len(ranks) or request.param != "two files"


def test_groups_are_consecutive_files_of_the_group_size(ranks, monkeypatch):
    """Each group but the last holds at least GROUP_BYTES, and none more files than it needs."""
    sizes = {p: p.stat().st_size for p in ranks}
    for group_bytes in (1, min(sizes.values()), sum(sizes.values()) // 3, 1 << 40):
        monkeypatch.setattr(parallel, "GROUP_BYTES", group_bytes)
        groups = file_groups(ranks)
        assert [p for g in groups for p in g] == list(ranks)
        for g in groups[:-1]:
            assert sum(sizes[p] for p in g) >= group_bytes > sum(sizes[p] for p in g[:-1])
    assert len(groups) == 1


def test_small_runs_stay_serial_and_large_ones_use_a_worker_per_share(ranks, monkeypatch):
    assert plan_workers(ranks) == 1                     # a few hundred kB: read here
    assert plan_workers(ranks[:1]) == 1
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    assert plan_workers(ranks) == 1                     # one group (GROUP_BYTES): one worker's work
    monkeypatch.setattr(parallel, "GROUP_BYTES", 1)
    monkeypatch.setattr(parallel, "free_cores", lambda: 4)
    size = sum(p.stat().st_size for p in ranks)
    monkeypatch.setattr(parallel, "BYTES_PER_WORKER", size // 2)
    assert plan_workers(ranks) == 2                     # one worker per share of the input
    monkeypatch.setattr(parallel, "BYTES_PER_WORKER", 1)
    assert plan_workers(ranks) == 4                     # at most one per core
    assert plan_workers(ranks, workers=2) == 2          # or the caller's cap
    monkeypatch.setattr(parallel, "BYTES_PER_WORKER", size)
    assert plan_workers(ranks) == 1                     # one share of bytes ...
    monkeypatch.setattr(parallel, "FILES_PER_WORKER", len(ranks) // 3)
    assert plan_workers(ranks) == 3                     # ... but many files: one worker per FILES_PER_WORKER


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
        _, reads = fold_run(files)
    cut = [str(w.message) for w in got if "last line is incomplete" in str(w.message)]
    assert len(reads) == len(files) and len(cut) == 2
    assert files[1].name in cut[0] and files[3].name in cut[1]


def test_a_copy_inside_or_across_groups_is_named_as_the_file_by_file_loop_names_it(ranks, tmp_path, always_parallel):
    """The same steps twice (a file and its copy under another name): a group that cannot fold,
    or cannot be merged here, is folded again file by file, so the error is the plain loop's."""
    files = []
    for i, p in enumerate(ranks):
        q = tmp_path / f"{i:02d}-{p.name}"
        q.write_text(p.read_text())
        files.append(q)
    src = next(i for i, p in enumerate(ranks) if "coordinator" not in p.name)    # a file of steps
    for at in (src + 1, len(files) - 1):    # the copy next to its original (one group), or far from it
        copy = tmp_path / f"{at:02d}-copy.jsonl"
        copy.write_text(files[src].read_text())
        run = files[:at] + [copy] + files[at:]
        with pytest.raises(LogError) as plain:
            merge_all(summarize_log(f) for f in run)
        for workers in (1, None):
            with pytest.raises(LogError) as got:
                summarize_paths(run, workers=workers)
            assert str(got.value) == str(plain.value)
        assert copy.name in str(plain.value) and "identical" in str(plain.value)
        copy.unlink()


def test_rank_files_named_one_by_one_fold_by_the_folders_groups(ranks, always_parallel, monkeypatch):
    """Sampled plain files that are ranks of one run (a shell-expanded glob), read first one by
    one: folded by the same groups as their folder, so the very summary and advice of the folder."""
    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 150)
    (by_folder,), (by_file,) = load_logs([str(ranks[0].parent)]), load_logs([str(p) for p in ranks])
    assert by_folder.sampled and by_file.sampled
    assert by_folder.totals.bins.tobytes() == by_file.totals.bins.tobytes()     # the same sums, bit for bit
    folder = advise([str(ranks[0].parent)])
    one_by_one = advise([str(p) for p in ranks])
    assert len(one_by_one.logs) == 1
    assert json.dumps(folder.to_json(), sort_keys=True) == json.dumps(one_by_one.to_json(), sort_keys=True)


def test_sums_add_by_groups_the_same_in_every_reader(tmp_path, monkeypatch):
    """Bins add in the groups' order, (a) + (b + c), not file by file, (a + b) + c: sums that round
    apart show it. The fold here, the workers' and the fold of files read already agree bit for bit."""
    from conftest import HEADER, step

    head = dict(HEADER, gpus=4, roles={"target": 3, "drafter": 1})
    tiny = 2.0 ** -53      # 1 + tiny rounds back to 1; tiny + tiny does not
    files = []
    for w, (busy, n) in enumerate([(1.0, 40), (tiny, 3), (tiny, 3)]):
        p = tmp_path / f"rank{w}.jsonl"
        lines = [head] + [step(5.0 if i == 0 else 10.0 + i, "target", w, busy=busy if i == 0 else 0.5) for i in range(n)]
        p.write_text("".join(json.dumps(o) + "\n" for o in lines))
        files.append(p)
    monkeypatch.setattr(parallel, "GROUP_BYTES", files[0].stat().st_size)
    assert file_groups(files) == [files[:1], files[1:]]
    here = fold_run(files, workers=1)[0].bins.arr
    plain = merge_all(summarize_log(f) for f in files).bins.arr
    assert here.tobytes() != plain.tobytes()
    np.testing.assert_allclose(here, plain, rtol=1e-15)
    held = parallel.fold_held(files, [summarize_log(f) for f in files])[0].bins.arr
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "BYTES_PER_WORKER", 1)
    monkeypatch.setattr(parallel, "free_cores", lambda: 2)
    assert plan_workers(files) == 2
    in_workers = fold_run(files)[0].bins.arr
    assert here.tobytes() == held.tobytes() == in_workers.tobytes()


def test_each_files_own_end_is_kept_through_the_groups_folds(ranks, tmp_path, always_parallel, monkeypatch):
    """The run's end comes from every file's own end (the worst reason wins), read by folder or
    one by one: a group's fold must not hand its first file the group's end."""
    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 150)       # sampled: files one by one fold too
    files = []
    for i, p in enumerate(ranks):
        lines = [ln for ln in p.read_text().splitlines() if '"ev": "end"' not in ln and '"ev":"end"' not in ln]
        end = {"ev": "end", "t": 1.0e6 + i, "reason": "done"}
        if i == 0:
            end = {"ev": "end", "t": 1.0, "reason": "error", "msg": "oom"}   # the earliest, and the worst
        q = tmp_path / p.name
        q.write_text("\n".join(lines + [json.dumps(end)]) + "\n")
        files.append(q)
    (by_folder,), (by_file,) = load_logs([str(tmp_path)]), load_logs([str(f) for f in files])
    assert by_folder.end["reason"] == by_file.end["reason"] == "error"
    assert by_folder.end == by_file.end


def test_merges_here_test_for_copies_once_at_the_end(ranks, always_parallel, monkeypatch):
    """With worker processes, this process's merges skip the per-merge test for copied steps
    (binary searches into every key held) and test all keys once: the same summary."""
    calls: list[int] = []
    real = summary._Sample.count_held

    def counted(self, keys):
        calls.append(len(keys))
        return real(self, keys)
    monkeypatch.setattr(summary._Sample, "count_held", counted)
    got = summarize_paths(ranks)
    assert calls == []
    assert json.dumps(got.to_json(), sort_keys=True) == json.dumps(summarize_paths(ranks, workers=1).to_json(),
                                                                   sort_keys=True)
    assert calls            # (the read here tests at every merge)


def test_a_copy_after_a_cut_line_warns_once_and_is_named_as_the_plain_loop_names_it(ranks, tmp_path,
                                                                                     always_parallel):
    """The end test finds the copy: the run is folded again, testing at every merge; the warnings
    of the first pass are not given (only the second pass's, once), and the error is the plain loop's."""
    files = []
    for i, p in enumerate(ranks):
        q = tmp_path / f"{i:02d}-{p.name}"
        q.write_text(p.read_text() + ('{"ev":"step","t":1' if i == 1 else ""))
        files.append(q)
    src = next(i for i, p in enumerate(ranks) if "coordinator" not in p.name and i != 1)
    copy = tmp_path / "99-copy.jsonl"
    copy.write_text(files[src].read_text())
    run = files + [copy]
    with pytest.warns(LogWarning) as plain_notes, pytest.raises(LogError) as plain:
        merge_all(summarize_log(f) for f in run)
    with pytest.warns(LogWarning) as notes, pytest.raises(LogError) as got:
        summarize_paths(run)
    assert str(got.value) == str(plain.value) and "identical" in str(got.value)
    cut = [str(w.message) for w in notes if "last line is incomplete" in str(w.message)]
    assert cut == [str(w.message) for w in plain_notes if "last line is incomplete" in str(w.message)]
    assert len(cut) == 1
