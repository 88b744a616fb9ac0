"""Mergeable summaries: exact merges, bounded samples, and advice from merged per-rank summaries."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synth import Scenario, ServiceModel, TokenModel, write_log

from advisor.advice import advise
from advisor.errors import LogError
from advisor.ingest import sample, summary
from advisor.ingest.load import load_log, summarize_paths
from advisor.ingest.stream import summarize_log
from advisor.ingest.summary import read_summary
from advisor.present.json import advice_json

ROOT = Path(__file__).resolve().parents[2]


def merge_all(summaries):
    """Merge summaries of one run into the first, in order (`Summary.merge`, copies tested)."""
    it = iter(summaries)
    first = next(it)
    for s in it:
        first.merge(s)
    return first


FIXTURE_2X1 = Path(__file__).resolve().parents[2] / "fixtures" / "cpu-2x1.jsonl"


@pytest.fixture(scope="module")
def sync_log(tmp_path_factory) -> Path:
    """A 6-2 run with drafter sync: ~12k lines."""
    tm = TokenModel(budget=32768, mean=31200.0, cv=0.2, seq_len=1926.0)
    sc = Scenario(
        name="sync",
        n_target=6,
        n_drafter=2,
        tokens=tm,
        hs_cap=20,
        pre_cap=50,
        sync_every=4,
        sync_s=0.3,
        sync_scv=0.1,
        n_batches=6000,
        seed=11,
        warmup_factor=1.5,
        warmup_tau_s=120.0,
        target=ServiceModel.from_mean(6.0, tm.mean, overhead_share=0.1, scv=0.1),
        drafter=ServiceModel.from_mean(2.2, tm.mean, overhead_share=0.1, scv=0.1),
    )
    p = tmp_path_factory.mktemp("sum") / "whole.jsonl"
    write_log(p, sc)
    return p


def split_by_worker(path: Path, n_files: int) -> list[Path]:
    """Per-rank files as a multi-node run writes them: the header and the end event in each, each
    worker's steps in one file, syncs and rates in the first."""
    lines = path.read_bytes().splitlines(keepends=True)
    outs: list[list[bytes]] = [[lines[0]] for _ in range(n_files)]
    for raw in lines[1:]:
        ev = json.loads(raw)
        if ev.get("ev") == "end":  # every rank ends its own file
            for o in outs:
                o.append(raw)
            continue
        k = ev["worker"] % n_files if ev.get("ev") == "step" else 0
        outs[k].append(raw)
    paths = []
    for i, body in enumerate(outs):
        p = path.with_name(f"{path.stem}-rank{i}.jsonl")
        p.write_bytes(b"".join(body))
        paths.append(p)
    return paths


def _same_advice(a, b) -> None:
    ja, jb = advice_json(a), advice_json(b)
    ja.pop("warnings"), jb.pop("warnings")
    assert ja == jb
    for fa, fb in ((a.fit.producer, b.fit.producer), (a.fit.consumer, b.fit.consumer)):
        for k in (
            "n_steps",
            "busy_mean_s",
            "busy_std_s",
            "t0_s",
            "c_s_per_tok",
            "mu_bps",
            "busy_share",
            "starved_share",
            "blocked_share",
        ):
            assert math.isclose(getattr(fa, k), getattr(fb, k), rel_tol=1e-9, abs_tol=1e-12), k
    assert math.isclose(a.fit.observed[0].bps, b.fit.observed[0].bps, rel_tol=1e-9)


def _advise(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return advise([path])


@pytest.mark.parametrize("sample_rows", [None, 700])
def test_merged_per_rank_summaries_advise_as_the_whole_log(sync_log, tmp_path, monkeypatch, sample_rows):
    if sample_rows:
        monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", sample_rows)
    parts = split_by_worker(sync_log, 3)
    outs = []
    for i, p in enumerate(parts):  # map: one summary per rank file, written where the file lives
        o = tmp_path / f"s{i}.json"
        summarize_log(p).write(o)
        outs.append(o)
    merged = tmp_path / "merged.json"
    merge_all(read_summary(o) for o in reversed(outs)).write(merged)  # reduce, in any order
    whole = _advise(sync_log)
    assert load_log(sync_log).sampled == bool(sample_rows)
    _same_advice(whole, _advise(merged))


def test_sampled_fit_is_close_to_the_whole(sync_log, monkeypatch):
    whole = _advise(sync_log)
    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 500)
    lg = load_log(sync_log)
    assert lg.sampled and len(lg.steps) <= 2 * 500
    full = load_log(sync_log, sample_rows=10**6)
    assert lg.n_steps == {r: int((full.steps["role"] == r).sum()) for r in full.header.roles}
    samp = _advise(sync_log)
    assert samp.recommendation.roles == whole.recommendation.roles
    for r in ("producer", "consumer"):
        a, b = getattr(whole.fit, r), getattr(samp.fit, r)
        assert b.mu_bps == pytest.approx(a.mu_bps, rel=0.03)
        assert b.busy_share == pytest.approx(a.busy_share, rel=0.05)
    assert samp.fit.observed[0].bps == pytest.approx(whole.fit.observed[0].bps, rel=0.03)


def test_summary_round_trip_is_exact(sync_log, tmp_path):
    s = summarize_log(sync_log, sample_rows=300)
    o = tmp_path / "s.json"
    s.write(o)
    r = read_summary(o)
    assert r.n_lines == s.n_lines and r.end == s.end and r.sampled == s.sampled
    np.testing.assert_array_equal(r.bins.arr, s.bins.arr)
    for role in s.roles:
        a, ka = s.samples[role].compact()
        b, kb = r.samples[role].compact()
        np.testing.assert_array_equal(ka, kb)
        for f in summary.STEP_FIELDS:
            np.testing.assert_array_equal(a[f], b[f])


def _rows(n: int, seed: int, t0: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "t": t0 + np.cumsum(rng.exponential(1.0, n)),
        "worker": rng.integers(0, 4, n).astype(float),
        "batch": np.arange(n, dtype=float) + seed * 100000,
        "tokens": rng.integers(1, 5000, n).astype(float),
        "seqs": np.full(n, np.nan),
        "busy": rng.exponential(1.0, n),
        "wait": rng.exponential(0.1, n),
        "blocked": np.zeros(n),
        "loss": np.full(n, np.nan),
    }


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 400), min_size=1, max_size=5),
    k=st.integers(1, 300),
    t0s=st.lists(st.floats(0, 5e4), min_size=5, max_size=5),
)
def test_merge_equals_one_pass(sizes, k, t0s):
    """Bins add and bottom-k samples merge exactly: parts merged == the rows summarised at once."""
    from advisor.ingest.schema import parse_header

    obj = {"ev": "run", "v": 1, "t": 0, "run": "x", "roles": {"target": 4, "drafter": 4}}
    head = parse_header(obj, "x", 1)
    parts = [_rows(n, i, t0s[i]) for i, n in enumerate(sizes)]
    codes = [np.arange(len(p["t"])) % 2 for p in parts]
    one = summary.Summary(obj, head, "all", sample_rows=k)
    pieces = []
    for p, c in zip(parts, codes):
        one.add_steps(p, c)
        s = summary.Summary(obj, head, "part", sample_rows=k)
        s.add_steps(p, c)
        pieces.append(s)
    merged = merge_all(pieces[::-1])
    assert merged.bins.level == one.bins.level
    np.testing.assert_allclose(merged.bins.arr, one.bins.arr, rtol=1e-12, atol=1e-9)
    for r in one.roles:
        a, ka = one.samples[r].compact()
        b, kb = merged.samples[r].compact()
        np.testing.assert_array_equal(np.sort(ka), np.sort(kb))
        assert len(ka) == min(k, one.n_steps(r))
        # it is the bottom k of all the rows' keys
        allkeys = np.concatenate(
            [
                sample.row_keys({f: p[f][c == i] for f, _ in p.items()}, i)
                for p, c in zip(parts, codes)
                for i in [one.roles.index(r)]
            ]
        )
        np.testing.assert_array_equal(np.sort(ka), np.sort(allkeys)[:k])
        assert merged.n_steps(r) == one.n_steps(r)


def test_merge_refuses_another_run(sync_log, tmp_path):
    a = summarize_log(sync_log)
    other = tmp_path / "o.jsonl"
    lines = sync_log.read_text().splitlines(keepends=True)
    head = json.loads(lines[0])
    head["run"] = "another"
    other.write_text(json.dumps(head) + "\n" + "".join(lines[1:]))
    with pytest.raises(LogError, match="another 'run' header"):
        a.merge(summarize_log(other))


def test_summary_of_rank_files_equals_the_whole_log(sync_log):
    """The per-rank files' summaries, merged, hold the whole log's bins and sample."""
    parts = split_by_worker(sync_log, 4)
    a = summarize_paths(parts, sample_rows=400)
    b = summarize_log(sync_log, sample_rows=400)
    np.testing.assert_allclose(a.bins.arr, b.bins.arr, rtol=1e-12, atol=1e-9)
    for r in a.roles:
        np.testing.assert_array_equal(a.samples[r].compact()[1], b.samples[r].compact()[1])


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "advisor", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_cli_summarize_then_advise(sync_log, tmp_path):
    parts = split_by_worker(sync_log, 2)
    s0, s1, s = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "ab.json"
    for p, o in ((parts[0], s0), (parts[1], s1)):
        r = _cli("summarize", p, "-o", o, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    r = _cli("summarize", s0, s1, "-o", s, "-j", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    whole = _cli(sync_log, "--json", cwd=tmp_path)
    merged = _cli(s, "--json", cwd=tmp_path)
    assert whole.returncode == merged.returncode == 0, merged.stderr
    ja, jb = json.loads(whole.stdout), json.loads(merged.stdout)
    ja.pop("warnings"), jb.pop("warnings")
    assert ja == jb


def test_cli_bad_summary_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"dflash_summary": 1, "header": {"ev": "run"}}\n')
    r = _cli(bad, cwd=tmp_path)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and str(bad) in r.stderr
    bad.write_text(
        '{"dflash_summary": 1, "header": {"ev": "run", "v": 1, "t": 0, "run": "x", '
        '"roles": {"a": 1, "b": 1}}, "paths": []}\n'
    )
    r = _cli("summarize", bad, "-o", tmp_path / "o.json", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "summary" in r.stderr


@pytest.mark.parametrize("sample_rows", [None, 600])
def test_a_directory_of_rank_files_advises_as_the_whole_log(sync_log, tmp_path, monkeypatch, sample_rows):
    """`dflash-advise DIR` (load_logs -> load._run) merges the ranks as summaries: exact when sampled."""
    if sample_rows:
        monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", sample_rows)
    d = tmp_path / "ranks"
    d.mkdir()
    for p in split_by_worker(sync_log, 4):
        p.rename(d / p.name)
    _same_advice(_advise(sync_log), _advise(d))


def test_rank_files_named_one_by_one_merge_exactly_when_sampled(sync_log, tmp_path, monkeypatch):
    """`dflash-advise rank0.jsonl rank1.jsonl ...` (a shell glob): sampled ranks merge as summaries."""
    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 600)
    parts = split_by_worker(sync_log, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = advise(parts)
    assert len(one.logs) == 1 and one.logs[0].sampled
    _same_advice(_advise(sync_log), one)


def test_sampled_loader_bound_run_keeps_its_loader_capacity(tmp_path, monkeypatch):
    """An input-bound run: the loader's capacity comes from exact counts, not the sample's."""
    tm = TokenModel(budget=32768, mean=31200.0, cv=0.2, seq_len=1926.0)
    sc = Scenario(
        name="loader",
        n_target=5,
        n_drafter=3,
        tokens=tm,
        hs_cap=8,
        pre_cap=50,
        n_batches=8000,
        seed=105,
        loader=ServiceModel(1 / 1.2, 0.0, 0.3),
        target=ServiceModel.from_mean(1 / 0.3, tm.mean, overhead_share=0.1, scv=0.05),
        drafter=ServiceModel.from_mean(1 / 0.6, tm.mean, overhead_share=0.1, scv=0.05),
    )
    p = tmp_path / "loader.jsonl"
    write_log(p, sc)
    whole = _advise(p).fit.loader
    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 2000)
    samp = _advise(p).fit.loader
    assert whole.input_bound and samp.input_bound
    assert samp.capacity_bps == pytest.approx(whole.capacity_bps, rel=0.03)
    # the SCV is un-thinned from the sample (exact only for renewal arrivals; see
    # advisor.fit.stages.fit_loader)
    assert math.isfinite(samp.scv) and samp.scv >= 0


def test_sampled_steps_per_sync_from_exact_counts(sync_log, tmp_path, monkeypatch):
    lines = sync_log.read_text().splitlines(keepends=True)
    head = json.loads(lines[0])
    head.pop("sync_every", None)
    p = tmp_path / "nosync.jsonl"
    p.write_text(json.dumps(head) + "\n" + "".join(lines[1:]))
    whole = _advise(p).fit.sync
    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 500)
    samp = _advise(p).fit.sync
    assert whole.sync_every == samp.sync_every == 4


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.one_of(st.integers(0, 6).map(float), st.just(math.nan)), max_size=60), as_keys=st.booleans())
def test_stable_order_is_numpys_stable_argsort(values, as_keys):
    v = np.array(values, dtype=float)
    if as_keys:
        v = np.nan_to_num(v, nan=7.0).astype(np.uint64)
    np.testing.assert_array_equal(sample.stable_order(v), np.argsort(v, kind="stable"))


@settings(max_examples=25, deadline=None)
@given(batches=st.lists(st.integers(0, 300), min_size=1, max_size=12), k=st.integers(1, 250))
def test_sample_threshold_keeps_the_same_rows(batches, k):
    """Rows fed in many batches (the threshold skips rows) give the very sample of one batch."""
    rows = _rows(sum(batches), 7, 0.0)
    keys = sample.row_keys(rows, 0)
    whole = sample.Sample(summary.STEP_FIELDS, k)
    whole.add(rows, keys)
    fed = sample.Sample(summary.STEP_FIELDS, k)
    at = 0
    for n in batches:
        fed.add({f: v[at : at + n] for f, v in rows.items()}, keys[at : at + n])
        at += n
    a, ka = whole.compact()
    b, kb = fed.compact()
    assert fed.pruned == whole.pruned == (sum(batches) > k)
    np.testing.assert_array_equal(ka, kb)  # pruned: by time, then key; else in arrival order
    for f in summary.STEP_FIELDS:
        np.testing.assert_array_equal(a[f], b[f])


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.one_of(st.integers(0, 4).map(float), st.just(math.nan)), max_size=60), seed=st.integers(0, 99)
)
def test_stable_order_breaks_ties_by_the_second_array_then_index(values, seed):
    v = np.array(values, dtype=float)
    ties = np.random.default_rng(seed).integers(0, 3, len(v)).astype(np.uint64)
    np.testing.assert_array_equal(sample.stable_order(v, ties), np.lexsort((np.arange(len(v)), ties, v)))


@settings(max_examples=25, deadline=None)
@given(batches=st.lists(st.integers(0, 300), min_size=1, max_size=8), k=st.integers(1, 250), seed=st.integers(0, 9))
def test_a_pruned_sample_is_the_bottom_k_by_time_then_key_whatever_the_arrival(batches, k, seed):
    """Compacted, a sample holds the k rows of smallest key in time order (equal times by key),
    the same however its rows came; frames from a sample held by key (a summary file of an older
    version) are the same frames."""
    rows = _rows(sum(batches), 7, 0.0)
    rows["t"] = np.round(rows["t"] / 3.0)  # many equal times: ties go by key
    keys = sample.row_keys(rows, 0)
    shuffled = np.random.default_rng(seed).permutation(len(keys))
    got = []
    for order in (np.arange(len(keys)), shuffled):
        s = sample.Sample(summary.STEP_FIELDS, k)
        at = 0
        for n in batches:
            idx = order[at : at + n]
            s.add({f: v[idx] for f, v in rows.items()}, keys[idx])
            at += n
        got.append(s.compact())
    (a, ka), (b, kb) = got
    if len(keys) <= k:
        return  # (nothing dropped: the rows stay in the order they came)
    for f in summary.STEP_FIELDS:
        np.testing.assert_array_equal(a[f], b[f])
    np.testing.assert_array_equal(ka, kb)
    np.testing.assert_array_equal(np.sort(ka), np.sort(keys)[:k])
    np.testing.assert_array_equal(np.lexsort((ka, a["t"])), np.arange(k))


def test_steps_are_the_same_from_a_sample_held_by_key(sync_log, monkeypatch):
    """A summary file written before samples were kept by time holds them by key: `steps` sorts
    them into the very frames (role, time, key) as from one kept by time."""
    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 500)
    summ = summarize_log(sync_log, sample_rows=500)
    assert summ.sampled
    want_cols, want_codes = summ.steps()
    for r in summ.roles:
        c, keys = summ.samples[r].compact()
        by_key = np.argsort(keys, kind="stable")
        summ.samples[r].parts = [({f: v[by_key] for f, v in c.items()}, keys[by_key])]
    cols, codes = summ.steps()
    np.testing.assert_array_equal(codes, want_codes)
    for f in want_cols:
        np.testing.assert_array_equal(cols[f], want_cols[f])


@settings(max_examples=25, deadline=None)
@given(batches=st.lists(st.integers(0, 300), min_size=1, max_size=12), k=st.integers(1, 250), ask_at=st.integers(0, 12))
def test_sorted_keys_follow_the_sample_and_count_what_is_held(batches, k, ask_at):
    """The kept key order (asked for after any batch) is every held key sorted, through adds and
    compactions; `count_held` counts as np.isin does against the sample (the duplicate check of
    merges), without compacting first."""
    rows = _rows(sum(batches), 7, 0.0)
    keys = sample.row_keys(rows, 0)
    fed = sample.Sample(summary.STEP_FIELDS, k)
    at = 0
    for i, n in enumerate(batches):
        if i == ask_at:
            fed.sorted_keys()
        fed.add({f: v[at : at + n] for f, v in rows.items()}, keys[at : at + n])
        at += n
        held = np.concatenate([p[1] for p in fed.parts]) if fed.parts else np.empty(0, np.uint64)
        np.testing.assert_array_equal(fed.sorted_keys(), np.sort(held))
    probe = np.concatenate([keys[::3], sample.row_keys(_rows(50, 8, 0.0), 1)])
    counted = fed.count_held(probe)
    assert counted == int(np.isin(probe, fed.compact()[1]).sum())


def test_bins_folded_before_any_data_and_merged_without_copying(sync_log):
    """An empty set of bins changes level and stays empty; a merge reads the other summary's
    bins and leaves them as they were."""
    b = summary._Bins(3)
    b.fold_to(4)
    assert b.level == 4 and not b.arr.any()
    b.add_by_row(np.array([1.0, 5000.0]), np.zeros(2, np.int64), [0], [np.array([2.0, 3.0])])
    ref = summary._Bins(3, 4)
    ref.add_by_row(np.array([1.0, 5000.0]), np.zeros(2, np.int64), [0], [np.array([2.0, 3.0])])
    np.testing.assert_array_equal(b.arr, ref.arr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parts = split_by_worker(sync_log, 2)
        a, other = summarize_log(parts[0]), summarize_log(parts[1])
    before = other.bins.arr.copy()
    merged = a.merge(other)
    np.testing.assert_array_equal(other.bins.arr, before)
    assert merged.bins.arr is not other.bins.arr


def test_rank_files_named_one_by_one_are_read_once(sync_log, monkeypatch):
    """A shell-expanded glob of sampled rank files: each file parsed once (it used to be parsed
    again, to merge the summaries), and the advice still that of the whole log."""
    from advisor.ingest import load as load

    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 600)
    parts = split_by_worker(sync_log, 3)
    reads: list[str] = []
    real = load.summarize_log

    def counted(path, **kw):
        reads.append(Path(path).name)
        return real(path, **kw)

    monkeypatch.setattr(load, "summarize_log", counted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = advise(parts)
    assert sorted(reads) == sorted(p.name for p in parts)
    assert len(one.logs) == 1 and one.logs[0].sampled
    monkeypatch.setattr(load, "summarize_log", real)
    _same_advice(_advise(sync_log), one)


def test_rank_files_below_the_sample_size_that_exceed_it_together_merge_as_the_whole(sync_log, monkeypatch):
    """Plain rank files each below the sample size, together above it: merged as summaries, the
    run is sampled as the whole log is (concatenated frames would hold every step)."""
    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 4000)
    parts = split_by_worker(sync_log, 2)
    assert not any(summarize_log(p).sampled for p in parts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = advise(parts)
    assert len(one.logs) == 1 and one.logs[0].sampled
    _same_advice(_advise(sync_log), one)


def _splitmix_keys(cols, salt, fields=sample.KEY_FIELDS):
    """The row keys as the module docstring defines them, written plainly (fresh arrays each step)."""
    c0, c1, c2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    n = len(cols[fields[0]])
    h = (
        np.asarray(salt).astype(np.uint64) + np.uint64(1)
        if np.ndim(salt)
        else np.full(n, np.uint64(salt + 1), dtype=np.uint64)
    )
    for f in fields:
        v = np.asarray(cols[f], dtype=np.float64)
        x = h ^ (np.where(np.isnan(v), 0.0, v) + 0.0).view(np.uint64)
        x = x + c0
        x = (x ^ (x >> np.uint64(30))) * c1
        x = (x ^ (x >> np.uint64(27))) * c2
        h = x ^ (x >> np.uint64(31))
    return h


@settings(max_examples=25, deadline=None)
@given(
    vals=st.lists(
        st.sampled_from([0.0, -0.0, 1.5, -2.0, 1e300, float("nan"), float("inf"), -float("inf"), 7.0]),
        min_size=1,
        max_size=60,
    ),
    salt=st.integers(0, 5),
)
def test_row_keys_are_splitmix_of_the_fields(vals, salt):
    """row_keys (in place, buffers reused) is the plain formula: NaN as 0.0, -0.0 as 0.0."""
    v = np.array(vals)
    cols = {f: np.roll(v, i) for i, f in enumerate(sample.KEY_FIELDS)}
    np.testing.assert_array_equal(sample.row_keys(cols, salt), _splitmix_keys(cols, salt))
    per_row = np.arange(len(v)) % 3
    np.testing.assert_array_equal(sample.row_keys(cols, per_row), _splitmix_keys(cols, per_row))


# --- found by fuzzing (fuzz/targets.py: fuzz_summary); the inputs are in fuzz/corpus/summary/ --------
@pytest.mark.parametrize(
    "patch, field",
    [
        ({"n_lines": -1}, "n_lines"),
        ({"sample_rows": 0}, "sample_rows"),  # IndexError before
        ({"bins": {"level": 10**6}}, "bins.level"),
        ({"counts": {"target": [1, -2, 3]}}, "counts.target"),
        ({"rates": {"t": {"dtype": "<f8", "shape": [2], "b64": "AAAAAAAA+H8AAAAAAADwPw=="}}}, "rates"),  # ValueError
        (
            {"samples": {"target": {"t": {"dtype": "<f8", "shape": [2], "b64": "AAAAAAAA+H8AAAAAAADwPw=="}}}},
            "samples.target",
        ),  # IndexError before
    ],
)
def test_a_summary_out_of_range_is_a_log_error_naming_the_field(tmp_path, patch, field):
    src = tmp_path / "run.jsonl"
    src.write_bytes(FIXTURE_2X1.read_bytes())
    obj = summarize_paths([src]).to_json()
    for k, v in patch.items():
        obj[k] = (
            {**obj[k], **{kk: ({**obj[k][kk], **vv} if isinstance(vv, dict) else vv) for kk, vv in v.items()}}
            if isinstance(v, dict)
            else v
        )
    p = tmp_path / "s.json"
    p.write_text(json.dumps(obj))
    with pytest.raises(LogError) as e:
        load_log(p)
    assert e.value.field == field and str(e.value).startswith(str(p)) and "\n" not in str(e.value)


def test_summaries_carry_their_sources(sync_log, tmp_path):
    s = summarize_log(sync_log)
    assert s.sources == [{"path": str(sync_log.resolve()), "bytes": sync_log.stat().st_size}]
    o = tmp_path / "s.json"
    s.write(o)
    assert read_summary(o).sources == s.sources


def test_the_same_log_twice_is_refused_naming_the_files(sync_log, tmp_path):
    o = tmp_path / "s.json"
    summarize_log(sync_log).write(o)
    with pytest.raises(LogError, match=r"s\.json: is given twice"):
        merge_all([read_summary(o), read_summary(o)])
    with pytest.raises(LogError, match=r"s\.json: holds the log .*whole\.jsonl, which .*whole\.jsonl holds already"):
        merge_all([summarize_log(sync_log), read_summary(o)])
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(sync_log.read_bytes())
    with pytest.raises(LogError, match=r"copy\.jsonl: has \d+ 'target' steps identical to steps in .*whole\.jsonl"):
        merge_all([summarize_log(sync_log), summarize_log(copy)])


def test_a_summary_without_sources_still_refuses_a_copy(sync_log, tmp_path):
    """A summary written before ``sources`` existed: identical steps still refuse the merge."""
    o = tmp_path / "old.json"
    obj = summarize_log(sync_log).to_json()
    obj.pop("sources")
    o.write_text(json.dumps(obj))
    assert read_summary(o).sources == []
    with pytest.raises(LogError, match=r"old\.json: has \d+ 'target' steps identical"):
        merge_all([read_summary(o), read_summary(o)])


def test_cli_summarize_the_same_twice_exits_2(sync_log, tmp_path):
    s = tmp_path / "S.json"
    assert _cli("summarize", sync_log, "-o", s, cwd=tmp_path).returncode == 0
    r = _cli("summarize", s, s, "-o", tmp_path / "S2.json", cwd=tmp_path)
    assert r.returncode == 2 and "S.json: is given twice" in r.stderr and not (tmp_path / "S2.json").exists()
    r = _cli("summarize", sync_log, sync_log, "-o", tmp_path / "S3.json", cwd=tmp_path)
    assert r.returncode == 2 and "whole.jsonl: is given twice" in r.stderr


@pytest.mark.parametrize(
    "end, words",
    [
        ({"ev": "end", "t": "x", "reason": "done"}, "field 'end' is an end event whose field 't' must be a number"),
        ({"ev": "ed", "t": 1.0}, "field 'end' is not an 'end' event"),
        ([1], "field 'end' is not an 'end' event"),
    ],
)
def test_a_summarys_end_is_checked_like_a_logs(tmp_path, end, words):
    """Found by fuzzing (fuzz/corpus/summary/crash-*): an end with t "x" read, then merging two
    summaries compared it as a float (an internal error)."""
    obj = summarize_paths([FIXTURE_2X1]).to_json()
    obj["end"] = end
    p = tmp_path / "s.json"
    p.write_text(json.dumps(obj))
    with pytest.raises(LogError, match=words):
        read_summary(p)
    obj["end"] = None
    p.write_text(json.dumps(obj))
    assert read_summary(p).end is None


def test_rank_files_read_together_give_the_summary_of_each_read_alone(sync_log, monkeypatch):
    """The fast pass reads a run's rank files at once (`scan.scan_files`): the same counts, bins,
    sample, ends, lines and sources as the files read one by one and merged."""
    from advisor.ingest import load as load
    from advisor.ingest import scan

    parts = split_by_worker(sync_log, 3)
    together = scan.scan_files(parts, sample_rows=400)
    assert together is not None
    a, per_file = together
    monkeypatch.setattr(load, "scan_files", lambda *args, **kw: None)
    b = summarize_paths(parts, sample_rows=400)
    np.testing.assert_allclose(a.bins.arr, b.bins.arr, rtol=1e-12, atol=1e-9)
    for r in a.roles:
        np.testing.assert_array_equal(a.samples[r].compact()[1], b.samples[r].compact()[1])
        assert a.counts[r].tolist() == b.counts[r].tolist()
    assert (a.n_lines, a.end, a.sources, a.paths, a.unknown_fields) == (
        b.n_lines,
        b.end,
        b.sources,
        b.paths,
        b.unknown_fields,
    )
    assert [e for _, e in per_file] == [summarize_log(p).end for p in parts]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # the file
            st.integers(1, 70),  # its line (the probe reads the first 64)
            st.sampled_from(["mem", "blokced", "note", "gpu_util"]),
            st.sampled_from([1, 0.5, "x", None, {}, [], {"a": None}, True]),
        ),
        max_size=6,
    )
)
def test_rank_files_read_together_find_the_unknown_fields_each_file_shows(sync_log, tmp_path_factory, extra):
    """`scan.scan_files` finds a run's unknown fields on each file's first lines in one read of them
    all; it must find what each file's own read finds (explicit nulls and empty objects included)."""
    from advisor.ingest import scan

    folder = tmp_path_factory.mktemp("unknown")
    parts = []
    for i, p in enumerate(split_by_worker(sync_log, 3)):
        lines = p.read_bytes().splitlines(keepends=True)
        for f, line, name, value in extra:
            if f == i and line < len(lines) - 1:
                obj = json.loads(lines[line])
                obj[name] = value
                lines[line] = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        out = folder / p.name
        out.write_bytes(b"".join(lines))
        parts.append(out)
    together = scan.scan_files(parts, sample_rows=400)
    assert together is not None
    alone = merge_all([scan.scan_files([p], sample_rows=400)[0] for p in parts])
    assert together[0].unknown_fields.keys() == alone.unknown_fields.keys()


@pytest.mark.parametrize("crlf_every", [1, 2])
def test_rank_files_with_crlf_line_ends_are_read_together(sync_log, tmp_path, crlf_every):
    """Files whose lines end in a carriage return and a newline (every line, or every other: both
    kinds in one file) take the read of them together too, into the summary of the same files with
    plain newlines."""
    from advisor.ingest import scan

    parts = split_by_worker(sync_log, 3)
    ended = []
    for p in parts:
        lines = p.read_bytes().splitlines(keepends=True)
        out = tmp_path / p.name
        out.write_bytes(b"".join(x.replace(b"\n", b"\r\n") if i % crlf_every == 0 else x for i, x in enumerate(lines)))
        ended.append(out)
    got, want = scan.scan_files(ended, sample_rows=400), scan.scan_files(parts, sample_rows=400)
    assert got is not None and want is not None
    assert got[0].n_lines == want[0].n_lines and got[0].unknown_fields == want[0].unknown_fields
    for r in got[0].roles:
        np.testing.assert_array_equal(got[0].samples[r].compact()[1], want[0].samples[r].compact()[1])
        assert got[0].counts[r].tolist() == want[0].counts[r].tolist()


def test_rank_files_with_a_copy_are_refused_as_one_by_one(sync_log, tmp_path):
    """A copied rank file makes the fast pass give up; the merge one by one names the copy."""
    parts = split_by_worker(sync_log, 3)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(parts[1].read_bytes())
    with pytest.raises(LogError, match="identical"):
        summarize_paths([*parts, copy])
