"""advisor.records: the one writer of schema-v1 lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from synth import reference_scenario, write_log

from advisor import records
from advisor.ingest.schema import END_REASONS, KNOWN_EVENTS
from advisor.records import End, EndReason, Event, Queue, Rates, RecordError, Run, Step, Sync, from_dict

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def test_event_and_reason_names_are_the_readers():
    assert tuple(e.value for e in Event) == KNOWN_EVENTS
    assert tuple(r.value for r in EndReason) == END_REASONS


def test_lines_have_the_documented_key_order():
    head = Run(
        run="r",
        roles={"target": 7, "drafter": 1},
        token_budget=32768,
        queues=[Queue(name="pre", feeds="target", cap=50, per_worker=True), Queue(name="hs", feeds="drafter", cap=20)],
        extra={"mode": "real"},
    )
    assert head.to_json_line() == (
        '{"ev":"run","v":1,"t":0.0,"run":"r","gpus":8,"roles":{"target":7,"drafter":1},'
        '"queues":[{"name":"pre","feeds":"target","cap":50,"per_worker":true},{"name":"hs","feeds":"drafter","cap":20}],'
        '"token_budget":32768,"sync_every":0,"mode":"real"}\n'
    )
    st = Step(t=1.5, role="drafter", worker=0, tokens=900, busy=0.25, batch=3, seqs=2, loss=2.0, extra={"xfer": 0.01})
    assert list(st.to_dict()) == [
        "ev",
        "t",
        "role",
        "worker",
        "batch",
        "tokens",
        "seqs",
        "busy",
        "wait",
        "blocked",
        "loss",
        "xfer",
    ]
    assert list(Rates(t=60, bps={"a": 1}, q={"hs": 2}, done=0.5, window=60).to_dict()) == [
        "ev",
        "t",
        "window",
        "bps",
        "q",
        "done",
    ]
    assert End(t=9.0).to_json_line() == '{"ev":"end","t":9.0,"reason":"done"}\n'
    assert Sync(t=3, dur=0.1, workers=2).to_dict() == {
        "ev": "sync",
        "t": 3,
        "role": "drafter",
        "workers": 2,
        "dur": 0.1,
    }


@pytest.mark.parametrize(
    "make, field, words",
    [
        (lambda: Step(t=-1, role="a", worker=0, tokens=1, busy=0), "t", ">= 0"),
        (lambda: Step(t=1, role="a", worker=0, tokens=1, busy=float("inf")), "busy", "finite"),
        (lambda: Step(t=1, role="a", worker=0, tokens=1, busy="0.5"), "busy", "must be a number, got str"),
        (lambda: Step(t=1, role="a", worker=True, tokens=1, busy=0), "worker", "number, got bool"),
        (lambda: Step(t=1, role="a", worker=0, tokens=1.5, busy=0), "tokens", "whole number"),
        (lambda: Step(t=1, role="", worker=0, tokens=1, busy=0), "role", "non-empty string"),
        (lambda: Step(t=1, role="a", worker=0, tokens=1, busy=0, wait=-0.1), "wait", ">= 0"),
        (lambda: Step(t=1, role="a", worker=0, tokens=1, busy=0, extra={"busy": 2}), "busy", "schema field"),
        (
            lambda: Step(t=1, role="a", worker=0, tokens=1, busy=0, extra={"x": object()}),
            "x",
            "cannot be written as JSON",
        ),
        (lambda: Sync(t=1, dur=-1), "dur", ">= 0"),
        (lambda: Sync(t=1, dur=1, workers=-1), "workers", ">= 0"),
        (lambda: Step(t=2e8, role="a", worker=0, tokens=1, busy=0), "t", "more than the limit 1e+08"),
        (lambda: Step(t=1, role="a", worker=0, tokens=1, busy=0, extra={"xfer": -1}), "xfer", ">= 0"),
        (lambda: Run(run="r", roles={"a": 1, "b": 1}, extra={"cores": 0}), "cores", ">= 1"),
        (lambda: Rates(t=1, bps=0.8), "bps", "must be an object of role -> batches/s"),
        (lambda: Rates(t=1, bps={"a": -1}), "bps.a", ">= 0"),
        (lambda: Rates(t=1, bps={"a": 1}, q={"pre": [1, "x"]}), "q", "depth of queue 'pre' must be numbers >= 0"),
        (lambda: End(t=1, reason="crashed"), "reason", "done, interrupted, error"),
        (lambda: Run(run="r", roles={"target": 8}), "roles", "at least a producer and a consumer"),
        (
            lambda: Run(run="r", roles={"target": 0, "drafter": 1}),
            "roles",
            "worker count of role 'target' must be a number >= 1",
        ),
        (lambda: Run(run="r", roles={"a": 1, "b": 1}, gpus=1), "gpus", "the roles use 2"),
        (lambda: Run(run="r", roles={"a": 1, "b": 1}, v=2), "v", "is not supported (this advisor reads v1)"),
        (
            lambda: Run(run="r", roles={"a": 1, "b": 1}, queues=[Queue(name="q", feeds="c", cap=1)]),
            "queues",
            "not a role",
        ),
        (
            lambda: Run(run="r", roles={"a": 1, "b": 1}, queues=[{"name": "q", "feeds": "b"}]),
            "queues",
            "entry 0: cap is missing",
        ),
        (lambda: Queue(name="hs", feeds="b", cap=-2), "cap", ">= 0"),
    ],
)
def test_bad_fields_are_refused_naming_the_event_and_field(make, field, words):
    with pytest.raises(RecordError) as e:
        make()
    assert e.value.field == field
    assert f"field '{field}'" in str(e.value) and words in str(e.value)


def test_numpy_scalars_become_python_numbers_and_nan_loss_is_not_logged():
    st = Step(
        t=np.float64(1.5),
        role="a",
        worker=np.int64(2),
        tokens=np.int32(900),
        busy=np.float32(0.25),
        loss=np.float64("nan"),
    )
    assert type(st.t) is float and type(st.worker) is int and type(st.tokens) is int
    assert st.to_json_line() == (
        '{"ev":"step","t":1.5,"role":"a","worker":2,"tokens":900,"busy":0.25,"wait":0.0,"blocked":0.0}\n'
    )
    assert Step(t=1, role="a", worker=0, tokens=3.0, busy=0).tokens == 3  # a whole float is an int


def test_records_are_frozen_and_keyword_only():
    st = Step(t=1, role="a", worker=0, tokens=1, busy=0)
    with pytest.raises(AttributeError):
        st.t = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        Step(1, "a", 0, 1, 0)  # type: ignore[misc]


def test_stamped_sets_the_start_time_once():
    h = Run(run="r", roles={"a": 1, "b": 1})
    assert h.t0_unix is None and h.stamped(12.5).t0_unix == 12.5
    assert abs(h.stamped().t0_unix - __import__("time").time()) < 5


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.jsonl")), ids=lambda p: p.name)
def test_every_fixture_line_round_trips(path):
    """Every line written so far (the trainer's, the generator's) is a record: reading it back and
    writing it again gives the same object, nulls apart (a null is "not logged")."""
    n = 0
    with open(path) as fh:
        for i, line in enumerate(fh):
            if i > 3000 and i % 50:
                continue
            obj = json.loads(line)
            again = json.loads(from_dict(obj).to_json_line())
            want = {k: v for k, v in obj.items() if v is not None}
            if obj["ev"] == "step":
                want.setdefault("wait", 0.0)
                want.setdefault("blocked", 0.0)
            if obj["ev"] == "run":
                want.setdefault("gpus", sum(obj["roles"].values()))
                want.setdefault("sync_every", 0)
                want["queues"] = [
                    {k: v for k, v in q.items() if not (k == "per_worker" and v is False)}
                    for q in want.get("queues", [])
                ]
            if obj["ev"] == "end":
                want.setdefault("reason", "done")
            assert again == want, f"{path.name}:{i + 1}"
            n += 1
    assert n > 50


def test_the_generator_writes_the_committed_reference_fixtures_byte_for_byte(tmp_path):
    """synth writes through the records; its output is unchanged (fixtures/make_fixtures.py, which
    then drops the closing `end` line: the reference case is a live run)."""
    for name, kw in (("reference-7x1.jsonl", {}), ("reference-7x1-rates.jsonl", {"rates_only": True})):
        out = write_log(tmp_path / name, reference_scenario(), rates_every_s=60.0, **kw).path.read_bytes()
        body, end = out.rsplit(b"\n", 2)[0] + b"\n", out.rsplit(b"\n", 2)[1]
        assert json.loads(end) == {"ev": "end", "t": 5400.0, "reason": "interrupted"}
        assert body == (FIXTURES / name).read_bytes(), name


def test_unknown_event_in_from_dict_names_it():
    with pytest.raises(RecordError, match="field 'ev' must be one of run, step, sync, rates, end, got 'gpu'"):
        from_dict({"ev": "gpu", "t": 1})
    with pytest.raises(RecordError, match="field 'busy' is missing"):
        from_dict({"ev": "step", "t": 1, "role": "a", "worker": 0, "tokens": 1})


def test_importing_records_loads_no_heavy_module():
    code = (
        "import sys, advisor.records; "
        "print(sorted(m for m in ('pandas', 'numpy', 'torch', 'polars', 'scipy') if m in sys.modules))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr


def test_public_names():
    assert set(records.__all__) >= {"Event", "EndReason", "Run", "Step", "Sync", "Rates", "End", "Queue", "from_dict"}


def test_run_engines_fields():
    from advisor.records import RecordError, Run

    r = Run(run="x", roles={"target": 3, "drafter": 2}, gpus_per_worker={"target": 2}, gpus_per_node=8)
    assert r.gpus == 8 and r.to_dict()["gpus_per_worker"] == {"target": 2}
    assert "gpus_per_worker" not in Run(run="x", roles={"target": 1, "drafter": 1}).to_dict()
    import pytest

    with pytest.raises(RecordError):
        Run(run="x", roles={"target": 3, "drafter": 2}, gpus_per_worker={"tgt": 2})


def test_the_writer_and_the_reader_share_one_field_table():
    """The reader's field tables are the records' (advisor.records), not a copy of them."""
    from advisor.ingest import schema

    assert schema.EVENT_FIELDS == {ev: ("ev", *cls.FIELDS) for ev, cls in records.EVENTS.items()}
    assert [n for n, *_ in schema.STEP_NUMBERS] == [n for n in Step.KEYS if n not in ("role", "loss")]
    assert Sync(t=1, dur=1, workers=0).workers == 0  # the reader's minimum


@pytest.mark.parametrize(
    "bad",
    [
        {"roles": {"target": 4000, "drafter": 200}},
        {"roles": {"target": 2, "drafter": 1}, "gpus_per_node": 2, "placement": {"target": [0, 5]}},
        {"roles": {"target": 1, "drafter": 1}, "link_bytes_s": 0},
        {"roles": {"target": 1, "drafter": 1}, "probe": {"id": "p", "segment": 3, "segments": 2}},
        {"roles": {"target": 1, "drafter": 1}, "cap_bps_kind": {"drafter": "exact"}},
        {"roles": {"target": 1, "drafter": 1}, "queues": [{"name": "", "feeds": "drafter", "cap": 2}]},
        {"roles": {"target": 1, "drafter": 1}, "gpus": 1},
        {"roles": {"target": 1, "drafter": 0}},
        {"roles": {"target": 1, "drafter": 1}, "token_budget": 0},
    ],
)
def test_the_writer_and_the_reader_refuse_a_header_alike(bad):
    """One schema (issue 49 item 4): a header the reader refuses, the writer refuses, naming the
    same field with the same message (the writer used to write some the reader then refused)."""
    from advisor.errors import LogError
    from advisor.ingest.schema import parse_header

    extra = {k: v for k, v in bad.items() if k not in Run.KEYS}
    with pytest.raises(RecordError) as wrote:
        Run(run="r", **{k: v for k, v in bad.items() if k in Run.KEYS}, extra=extra)
    with pytest.raises(LogError) as read:
        parse_header({"ev": "run", "v": 1, "t": 0.0, **bad}, "x.jsonl", 1)
    assert (read.value.field, read.value.message) == (wrote.value.field, wrote.value.message)
