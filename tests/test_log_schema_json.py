"""docs/rate-log.schema.json: every fixture line and every writer's output validates; malformed
lines fail both the JSON Schema and the reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

jsonschema = pytest.importorskip("jsonschema")

from synth import Scenario, ServiceModel, TokenModel, write_log  # noqa: E402

from advisor import records  # noqa: E402
from advisor.errors import LogError  # noqa: E402
from advisor.ingest.load import load_log  # noqa: E402
from advisor.ingest.schema import KNOWN_EVENTS
from advisor.instrument import RateLog, Snapshots  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "docs" / "rate-log.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
HEAD_LINES = 20_000  # validate a large file's first lines in full...
STRIDE = 97  # ...and every 97th line after them


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def _parse(line: str):
    return json.loads(line, parse_constant=_reject_constant)


def validate_file(path: Path) -> int:
    """Validate the lines of a log (all of a small one, a sample of a big one); return how many."""
    n = 0
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if not line.strip() or (i >= HEAD_LINES and i % STRIDE):
                continue
            errors = sorted(VALIDATOR.iter_errors(_parse(line)), key=str)
            assert not errors, f"{path.name}:{i + 1}: {errors[0].message} at {list(errors[0].absolute_path)}"
            n += 1
    return n


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_schema_knows_the_same_events_as_the_code():
    named = {rule["if"]["properties"]["ev"]["const"] for rule in SCHEMA["allOf"]}
    assert named == set(KNOWN_EVENTS) == {e.value for e in records.Event}
    assert tuple(e.value for e in records.Event) == KNOWN_EVENTS
    assert SCHEMA["$defs"]["end"]["properties"]["reason"]["enum"][:-1] == [r.value for r in records.EndReason]


def test_the_prose_contract_names_every_field_of_the_json_schema():
    doc = (ROOT / "docs" / "log-schema.md").read_text()
    for name in ("run", "step", "sync", "rates", "end"):
        assert f"### `{name}`" in doc, name
        for prop in SCHEMA["$defs"][name]["properties"]:
            assert f"`{prop}`" in doc, f"{name}.{prop} is not described in docs/log-schema.md"
    for prop in SCHEMA["$defs"]["queue"]["properties"]:
        assert f'"{prop}"' in doc or f"`{prop}`" in doc, prop


FIXTURES = sorted((ROOT / "fixtures").glob("*.jsonl"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_line_validates(path):
    n = validate_file(path)
    assert n >= 50


# (what is wrong, the line); each comes after a valid header, or is the header itself
HEADER = {
    "ev": "run",
    "v": 1,
    "t": 0.0,
    "run": "x",
    "gpus": 3,
    "roles": {"target": 2, "drafter": 1},
    "queues": [
        {"name": "pre", "feeds": "target", "cap": 4, "per_worker": True},
        {"name": "hs", "feeds": "drafter", "cap": 4},
    ],
}
STEP = {"ev": "step", "t": 1.0, "role": "target", "worker": 0, "tokens": 100, "busy": 0.5}
MALFORMED_BODY = [
    ("no ev", {"t": 1.0}),
    ("ev not a string", {"ev": 3, "t": 1.0}),
    ("negative t", {**STEP, "t": -1.0}),
    ("t a string", {**STEP, "t": "1.0"}),
    ("step without busy", {k: v for k, v in STEP.items() if k != "busy"}),
    ("step without tokens", {k: v for k, v in STEP.items() if k != "tokens"}),
    ("step without t", {k: v for k, v in STEP.items() if k != "t"}),
    ("busy a string", {**STEP, "busy": "0.5"}),
    ("busy null", {**STEP, "busy": None}),
    ("negative busy", {**STEP, "busy": -0.1}),
    ("fractional tokens", {**STEP, "tokens": 100.5}),
    ("negative worker", {**STEP, "worker": -1}),
    ("negative wait", {**STEP, "wait": -0.01}),
    ("blocked a bool", {**STEP, "blocked": True}),
    ("role not a string", {**STEP, "role": 1}),
    ("loss a string", {**STEP, "loss": "2.3"}),
    ("sync without dur", {"ev": "sync", "t": 1.0, "role": "drafter", "workers": 2}),
    ("negative sync dur", {"ev": "sync", "t": 1.0, "dur": -1.0}),
    ("rates without bps", {"ev": "rates", "t": 60.0, "window": 60.0}),
    ("bps a number", {"ev": "rates", "t": 60.0, "bps": 0.86}),
    ("negative bps", {"ev": "rates", "t": 60.0, "bps": {"target": -0.1, "drafter": 0.86}}),
    ("cap_bps a list", {"ev": "rates", "t": 60.0, "bps": {"drafter": 0.86}, "cap_bps": [0.9]}),
    ("queue depth a string", {"ev": "rates", "t": 60.0, "bps": {"drafter": 0.86}, "q": {"hs": "20"}}),
    ("negative queue depth", {"ev": "rates", "t": 60.0, "bps": {"drafter": 0.86}, "q": {"pre": [3, -1]}}),
    ("negative tok_s", {"ev": "rates", "t": 60.0, "bps": {"drafter": 0.86}, "tok_s": -5}),
    ("unknown end reason", {"ev": "end", "t": 9.0, "reason": "crashed"}),
    ("end without t", {"ev": "end", "reason": "done"}),
    ("a second header without roles", {"ev": "run", "t": 0.0}),
    ("not an object", [1, 2, 3]),
]
MALFORMED_HEADER = [
    ("one role", {**HEADER, "roles": {"target": 8}}),
    ("zero workers", {**HEADER, "roles": {"target": 0, "drafter": 1}}),
    ("fractional workers", {**HEADER, "roles": {"target": 1.5, "drafter": 1}}),
    ("schema version 2", {**HEADER, "v": 2}),
    ("queue without cap", {**HEADER, "queues": [{"name": "hs", "feeds": "drafter"}]}),
    ("queue cap negative", {**HEADER, "queues": [{"name": "hs", "feeds": "drafter", "cap": -1}]}),
    ("gpus zero", {**HEADER, "gpus": 0}),
    ("header without t", {k: v for k, v in HEADER.items() if k != "t"}),
    ("roles a list", {**HEADER, "roles": ["target", "drafter"]}),
    ("token_budget zero", {**HEADER, "token_budget": 0}),
]


@pytest.mark.parametrize(
    "what, obj", MALFORMED_BODY + MALFORMED_HEADER, ids=[w for w, _ in MALFORMED_BODY + MALFORMED_HEADER]
)
def test_malformed_lines_fail_the_schema(what, obj):
    assert not VALIDATOR.is_valid(obj), what


@pytest.mark.parametrize("what, obj", MALFORMED_BODY, ids=[w for w, _ in MALFORMED_BODY])
def test_the_reader_refuses_what_the_schema_refuses(tmp_path, what, obj):
    """The schema is not looser than the reader: a line it rejects, the reader rejects too."""
    p = tmp_path / "bad.jsonl"
    steps = [json.dumps({**STEP, "t": 0.1 * i}) for i in range(1, 5)]
    p.write_text("\n".join([json.dumps(HEADER), *steps, json.dumps(obj)]) + "\n")
    with pytest.raises(LogError):
        load_log(p)


@pytest.mark.parametrize("what, obj", MALFORMED_HEADER, ids=[w for w, _ in MALFORMED_HEADER])
def test_the_reader_refuses_bad_headers_too(tmp_path, what, obj):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(obj) + "\n" + json.dumps(STEP) + "\n")
    with pytest.raises(LogError):
        load_log(p)


def test_json_nan_is_not_a_log_line():
    with pytest.raises(ValueError, match="NaN is not JSON"):
        _parse('{"ev":"step","t":NaN}')


def _synth_scenario(**kw):
    tm = TokenModel(budget=4096, mean=3900.0, cv=0.05, seq_len=500.0)
    base = dict(
        name="schema",
        n_target=2,
        n_drafter=2,
        target=ServiceModel.from_mean(0.2, tm.mean, scv=0.1),
        drafter=ServiceModel.from_mean(0.15, tm.mean, scv=0.1),
        tokens=tm,
        sync_every=2,
        sync_s=0.05,
        sync_bytes=1.5e8,
        n_batches=1500,
        seed=5,
        hs_bytes_per_token=1000,
        warmup_factor=1.5,
        warmup_tau_s=10.0,
    )
    base.update(kw)
    return Scenario(**base)


@pytest.mark.parametrize("opts", [{}, {"rates_only": True}, {"end_reason": "error"}])
def test_synthetic_logs_validate(tmp_path, opts):
    p = tmp_path / "s.jsonl"
    write_log(p, _synth_scenario(), rates_every_s=5.0, **opts)
    events = [_parse(x)["ev"] for x in p.read_text().splitlines()]
    assert validate_file(p) == len(events)
    assert {"run", "rates", "end"} <= set(events) and ("step" in events) != bool(opts.get("rates_only"))
    if not opts:
        assert "sync" in events


def test_instrumentation_api_output_validates(tmp_path):
    head = records.Run(
        run="api",
        roles={"target": 2, "drafter": 1},
        token_budget=2048,
        samples=100,
        epochs=1,
        queues=[
            records.Queue(name="pre", feeds="target", cap=8, per_worker=True),
            records.Queue(name="hs", feeds="drafter", cap=4),
        ],
        hardware="cpu",
        extra={"notes": ["a test"]},
    ).stamped()
    log = RateLog.open(
        tmp_path, head, role="drafter", snapshots=Snapshots(every_s=1e-4, queue_depths=lambda: {"pre": [3, 8], "hs": 4})
    )
    for i in range(20):
        with log.step(tokens=2000 + i, seqs=4, batch=i) as s:
            with s.waiting():
                pass
            s.loss = float("nan") if i == 3 else 2.0 - i / 100
            s.extra["xfer"] = 0.001
    log.sync(dur_s=0.01, workers=1, bytes=123.0)
    log.close("error", "RuntimeError: boom")
    p = tmp_path / "drafter-0.jsonl"
    events = [_parse(x)["ev"] for x in p.read_text().splitlines()]
    assert validate_file(p) == len(events) >= 23
    assert set(events) == {"run", "step", "rates", "sync", "end"}
    assert load_log(p).end["reason"] == "error"


_finite = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
_count = st.integers(min_value=0, max_value=10**7)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.builds(
            records.Step,
            t=_finite,
            role=st.sampled_from(["target", "drafter"]),
            worker=st.integers(0, 1),
            tokens=_count,
            busy=_finite,
            batch=st.none() | _count,
            seqs=st.none() | _count,
            wait=_finite,
            blocked=_finite,
            loss=st.none() | st.floats(allow_infinity=True, allow_nan=True),
        ),
        st.builds(
            records.Sync, t=_finite, dur=_finite, workers=st.none() | st.integers(1, 64), bytes=st.none() | _finite
        ),
        st.builds(
            records.Rates,
            t=_finite,
            bps=st.fixed_dictionaries({"target": _finite, "drafter": _finite}),
            window=st.none() | _finite,
            cap_bps=st.none() | st.dictionaries(st.sampled_from(["target", "drafter"]), _finite),
            tok_s=st.none() | _finite,
            eta_s=st.none() | _finite,
            done=st.none() | st.floats(0, 1),
            q=st.none()
            | st.fixed_dictionaries({"pre": st.lists(_count, min_size=2, max_size=2), "hs": st.none() | _count}),
        ),
        st.builds(records.End, t=_finite, reason=st.sampled_from(list(records.EndReason)), msg=st.none() | st.text()),
    )
)
def test_any_record_validates_and_round_trips(rec):
    line = rec.to_json_line()
    assert line.endswith("\n") and "\n" not in line[:-1]
    obj = _parse(line)
    assert VALIDATOR.is_valid(obj)
    assert records.from_dict(obj) == rec


@pytest.mark.slow
def test_trainer_output_validates(tmp_path):
    """The trainer (emulation mode: the real queues and processes, service times from a profile)."""
    pytest.importorskip("torch")
    out = tmp_path / "emu.jsonl"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer",
            "--no-progress",
            "--emulate",
            str(ROOT / "fixtures" / "h200-1x2.jsonl"),
            "--targets",
            "1",
            "--drafters",
            "2",
            "--time-scale",
            "0.01",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    events = [_parse(x)["ev"] for x in out.read_text().splitlines()]
    assert validate_file(out) == len(events)
    assert {"run", "step", "sync", "rates", "end"} <= set(events)


def test_the_json_schema_and_the_readers_field_tables_agree():
    """The fields the JSON schema defines per event are the ones the reader knows (unknown fields
    are reported against these tables, advisor.ingest.schema.EVENT_FIELDS)."""
    from advisor.ingest.schema import EVENT_FIELDS

    for ev, fields in EVENT_FIELDS.items():
        assert set(SCHEMA["$defs"][ev]["properties"]) | {"ev", "t"} == set(fields) | {"ev", "t"}, ev


def _resolved(prop: dict) -> dict:
    """A property of the JSON schema with its ``$ref`` (one level) merged in."""
    ref = prop.get("$ref")
    return {**SCHEMA["$defs"][ref.split("/")[-1]], **prop} if ref else prop


@pytest.mark.parametrize("ev", KNOWN_EVENTS)
def test_the_json_schema_says_what_the_records_field_specs_say(ev):
    """Each field's required-ness, type and minimum in docs/rate-log.schema.json are its record
    field's `Spec` (advisor.records), the one definition the writer and the reader check by."""
    rule = SCHEMA["$defs"][ev]
    fields = records.EVENTS[ev].FIELDS
    assert set(rule["required"]) == {"ev"} | {n for n, s in fields.items() if s.required}, ev
    for name, spec in fields.items():
        prop = _resolved(rule["properties"][name])
        types = prop.get("type", [])
        types = [types] if isinstance(types, str) else types
        want = {int: "integer", float: "number", str: "string"}.get(spec.kind)
        if want is None:  # a map or list its record checks
            continue
        assert want in types or prop.get("enum"), f"{ev}.{name}: {types}"
        if spec.kind is not str:
            assert prop.get("minimum", prop.get("exclusiveMinimum")) == spec.minimum, f"{ev}.{name}"


def test_the_json_schema_says_what_the_probe_specs_say():
    probe = SCHEMA["$defs"]["run"]["properties"]["probe"]
    assert set(probe["required"]) == {n for n, s in records.PROBE_FIELDS.items() if s.required}
    for name, spec in records.PROBE_FIELDS.items():
        prop = probe["properties"][name]
        key = "minimum" if spec.kind is int else "minLength"
        assert prop[key] == spec.minimum, name
