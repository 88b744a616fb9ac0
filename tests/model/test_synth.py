"""Synthetic schema-v1 logs: format, internal consistency against the generator, determinism."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import numpy as np
import pytest
from synth import Scenario, ServiceModel, TokenModel, draw, reference_scenario, run, write_log


def _read(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        return [json.loads(line) for line in fh]


def _scenario(**kw) -> Scenario:
    tm = TokenModel(budget=8192, mean=7000.0, cv=0.15, seq_len=500.0)
    base = dict(
        name="t",
        n_target=3,
        n_drafter=2,
        target=ServiceModel(0.05, 2e-4, 0.1),
        drafter=ServiceModel(0.02, 1e-4, 0.1, "lognormal"),
        tokens=tm,
        pre_cap=4,
        hs_cap=3,
        sync_every=2,
        sync_s=0.1,
        sync_scv=0.2,
        n_batches=3000,
        seed=9,
        warmup_factor=1.4,
        warmup_tau_s=30.0,
        sync_bytes=1.5e8,
    )
    base.update(kw)
    return Scenario(**base)


@pytest.fixture(scope="module")
def sync_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("synth") / "sync.jsonl"
    s = _scenario()
    return s, write_log(path, s, rates_every_s=20.0), _read(path)


def test_header_and_event_order(sync_log):
    s, lg, events = sync_log
    head = events[0]
    assert head["ev"] == "run" and head["v"] == 1 and head["t"] == 0.0
    assert list(head["roles"]) == ["target", "drafter"] and head["roles"] == {"target": 3, "drafter": 2}
    assert head["gpus"] == 5 and head["token_budget"] == 8192 and head["sync_every"] == 2
    assert head["queues"] == [
        {"name": "pre", "feeds": "target", "cap": 4, "per_worker": True},
        {"name": "hs", "feeds": "drafter", "cap": 3},
    ]
    assert events[-1]["ev"] == "end" and events[-1]["reason"] in ("done", "interrupted")
    ts = [e["t"] for e in events]
    assert ts == sorted(ts) and ts[-1] == pytest.approx(lg.end_s, abs=1e-3)
    kinds = {e["ev"] for e in events}
    assert kinds == {"run", "step", "sync", "rates", "end"}
    assert len(events) == lg.lines


def test_step_timelines_are_consistent(sync_log):
    s, lg, events = sync_log
    syncs = [e for e in events if e["ev"] == "sync"]
    by_worker = defaultdict(list)
    for e in events:
        if e["ev"] == "step":
            assert e["busy"] > 0 and e["wait"] >= 0 and e["blocked"] >= 0 and 1 <= e["tokens"] <= 8192
            by_worker[(e["role"], e["worker"])].append(e)
    assert {k[0] for k in by_worker} == {"target", "drafter"}
    assert sum(1 for k in by_worker if k[0] == "target") == 3
    sync_ends = np.array([e["t"] for e in syncs])
    sync_starts = sync_ends - np.array([e["dur"] for e in syncs])
    for (role, _), steps in by_worker.items():
        prev_free = 0.0
        for i, e in enumerate(steps):
            assert e["t"] == pytest.approx(prev_free + e["wait"] + e["busy"] + e["blocked"], abs=5e-4)
            prev_free = e["t"]
            if role == "drafter" and (i + 1) % s.sync_every == 0:
                # the rank waits at the barrier, then syncs; it is free when the round ends
                r = np.searchsorted(sync_ends, e["t"] - 1e-9)
                if r < sync_ends.size:
                    assert sync_starts[r] == pytest.approx(e["t"] + e["barrier"], abs=5e-4)
                    prev_free = float(sync_ends[r])
            elif role == "drafter":
                assert e["barrier"] == 0.0
    # every rank reaches each barrier once: syncs ~ drafter steps / (M * k)
    n_dr = sum(len(v) for k, v in by_worker.items() if k[0] == "drafter")
    assert len(syncs) == pytest.approx(n_dr / (2 * 2), abs=2)
    assert all(e["workers"] == 2 and e["dur"] >= 0 and e["bytes"] == 1.5e8 for e in syncs)
    # ring all-reduce: sync_s * 2 (M - 1) / M, with mean-1 noise
    assert np.mean([e["dur"] for e in syncs]) == pytest.approx(s.allreduce_s(), rel=0.1)
    assert _scenario(sync_scaling="flat").allreduce_s(8) == 0.1
    assert s.allreduce_s(8) == pytest.approx(0.1 * 2 * 7 / 8)


def test_busy_times_follow_the_service_model(sync_log):
    s, lg, events = sync_log
    steps = [e for e in events if e["ev"] == "step" and e["batch"] > 1500]  # past the warm-up
    for role, model in (("target", s.target), ("drafter", s.drafter)):
        tok = np.array([e["tokens"] for e in steps if e["role"] == role], dtype=float)
        busy = np.array([e["busy"] for e in steps if e["role"] == role])
        base = model.t0_s + model.per_token_s * tok
        ratio = busy / base
        assert ratio.mean() == pytest.approx(1.0, abs=0.03)
        assert ratio.var() == pytest.approx(model.scv, rel=0.2)
    # warm-up: the first batches are slower
    first = [
        e["busy"] / (s.target.t0_s + s.target.per_token_s * e["tokens"])
        for e in events
        if e["ev"] == "step" and e["role"] == "target" and e["batch"] < 30
    ]
    assert np.mean(first) > 1.25


def test_rates_conservation_and_capacity(sync_log):
    s, lg, events = sync_log
    rates = [e for e in events if e["ev"] == "rates"]
    assert [e["t"] for e in rates] == pytest.approx([20.0 * (i + 1) for i in range(len(rates))])
    steady = rates[len(rates) // 3 :]
    bt = np.mean([e["bps"]["target"] for e in steady])
    bd = np.mean([e["bps"]["drafter"] for e in steady])
    assert bt == pytest.approx(bd, rel=0.02)
    assert bd == pytest.approx(lg.result.bps, rel=0.05)
    for e in steady:
        assert len(e["q"]["pre"]) == 3 and all(0 <= q <= 4 for q in e["q"]["pre"]) and 0 <= e["q"]["hs"] <= 3
        assert e["cap_bps"]["target"] >= e["bps"]["target"] * 0.9
        assert 0 < e["done"] < 1 and e["eta_s"] > 0
    # capacity from busy seconds: workers / mean busy
    steps = [e for e in events if e["ev"] == "step" and e["role"] == "drafter" and e["t"] > steady[0]["t"]]
    cap = 2 / np.mean([e["busy"] for e in steps])
    assert np.mean([e["cap_bps"]["drafter"] for e in steady[1:]]) == pytest.approx(cap, rel=0.03)


def test_rates_only_twin_gz_and_determinism(tmp_path, sync_log):
    s, lg, events = sync_log
    lg2 = write_log(tmp_path / "r.jsonl.gz", s, rates_every_s=20.0, rates_only=True)
    twin = _read(lg2.path)
    assert {e["ev"] for e in twin} == {"run", "rates", "end"}
    assert [e for e in twin] == [e for e in events if e["ev"] in ("run", "rates", "end")]
    with gzip.open(lg2.path, "rb") as fh:
        assert fh.read(1) == b"{"
    a = write_log(tmp_path / "a.jsonl", s).path.read_bytes()
    b = write_log(tmp_path / "b.jsonl", s).path.read_bytes()
    c = write_log(tmp_path / "c.jsonl", _scenario(seed=10)).path.read_bytes()
    assert a == b and a != c


def test_draws_do_not_depend_on_the_split():
    s = _scenario()
    d1, d2 = draw(s, warmup=False), draw(s.split(1, 4), warmup=False)
    np.testing.assert_array_equal(d1.tokens, d2.tokens)
    np.testing.assert_array_equal(d1.drafter_s, d2.drafter_s)
    tok = draw(s, 20000, warmup=False).tokens
    assert tok.mean() == pytest.approx(7000, rel=0.01)
    assert tok.std() / tok.mean() == pytest.approx(0.15, rel=0.05)
    assert tok.max() <= 8192


def test_reference_scenario_shape():
    s = reference_scenario()
    assert s.gpus == 8 and s.bound_bps() == pytest.approx(0.86)
    r = run(s, n_batches=12000, warmup=False)
    assert r.bps == pytest.approx(0.86, rel=0.01)
    assert r.tok_s == pytest.approx(26800, rel=0.015)
    assert r.hs_depth_mean > 19 and r.pre_depth_mean.min() > 49.5
    # targets are busy X / C_t of the time and blocked for the rest
    assert r.roles["target"].busy.mean() == pytest.approx(r.bps / 0.92, rel=0.02)
    assert r.roles["target"].starved.max() < 1e-9


def test_validation_names_the_field():
    with pytest.raises(ValueError, match="scv"):
        ServiceModel(1.0, 0.0, -0.1)
    with pytest.raises(ValueError, match="cv"):
        TokenModel(budget=100, mean=99, cv=0.5)
    with pytest.raises(ValueError, match="n_batches"):
        _scenario(duration_s=10.0)
    with pytest.raises(ValueError, match="n_drafter"):
        _scenario(n_drafter=0)
    with pytest.raises(ValueError, match="rates_every_s"):
        write_log("/nonexistent/x.jsonl", _scenario(), rates_every_s=0)
