"""advisor.stacks: other stacks' metrics by name, from TensorBoard event files and CSV histories
written here, and the commands of docs/stacks/*.md run as written."""

from __future__ import annotations

import io
import json
import math
import re
import shlex
import struct
from pathlib import Path

import pytest
from conftest import one_line_error
from tensorboard.summary.writer.record_writer import RecordWriter
from typer.testing import CliRunner

from advisor import advise
from advisor.cli.app import app, route
from advisor.errors import LogError
from advisor.present.json import advice_json
from advisor.stacks import STACKS, Field, derive, read_csv_scalars
from advisor.tbimport import Scalar

ROOT = Path(__file__).resolve().parent.parent


def _cli(args):
    return CliRunner().invoke(app, route([str(a) for a in args]))


def _rates(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines() if '"rates"' in x]


# --- a minimal event-file writer (protobuf by hand, framed by tensorboard's RecordWriter) -------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _fld(num: int, wt: int, payload: bytes) -> bytes:
    return _varint(num << 3 | wt) + (_varint(len(payload)) + payload if wt == 2 else payload)


def _rec(data: bytes) -> bytes:
    buf = io.BytesIO()
    RecordWriter(buf).write(data)
    return buf.getvalue()


def write_events(path: Path, t0: float, rows: list[tuple[int, float, dict[str, float]]]) -> Path:
    """One event per (step, seconds after t0, {tag: value}), values as simple_value floats."""
    recs = [_rec(_fld(1, 1, struct.pack("<d", t0)) + _fld(3, 2, b"brain.Event:2"))]
    for step, dt, values in rows:
        summary = b"".join(
            _fld(1, 2, _fld(1, 2, k.encode()) + _fld(2, 5, struct.pack("<f", v))) for k, v in values.items()
        )
        recs.append(_rec(_fld(1, 1, struct.pack("<d", t0 + dt)) + _fld(2, 0, _varint(step)) + _fld(5, 2, summary)))
    path.write_bytes(b"".join(recs))
    return path


def test_torchspec_event_file_gives_both_capacities_and_the_step_loop_rate(tmp_path):
    """1 engine + 3 trainers, global batch 12, step 0.75 s + dispatch wait 0.25 s: 12 samples/s flow,
    trainers could take 16/s (a lower bound: fetch included), inference 12.5/s (its estimate)."""
    rows = [
        (
            s,
            1.0 * s,
            {
                "perf/train_capacity": 16.0,
                "perf/step_time": 0.75,
                "perf/dispatch_wait": 0.25,
                "perf/infer_capacity": 12.5,
                "train/avg_loss": 3.0,
            },
        )
        for s in range(1, 41)
    ]
    ev = write_events(tmp_path / "events.out.tfevents.ts", 1000.0, rows)
    out = tmp_path / "ts.jsonl"
    r = _cli(["import-tb", ev, "--stack", "torchspec", "--roles", "target=1,drafter=3", "-o", out])
    assert r.exit_code == 0, r.output
    snaps = _rates(out)
    assert len(snaps) == 40
    assert snaps[5]["bps"] == {"drafter": pytest.approx(12.0), "target": pytest.approx(12.0)}
    assert snaps[5]["cap_bps"] == {"drafter": pytest.approx(16.0), "target": pytest.approx(12.5)}
    head = json.loads(out.read_text().splitlines()[0])
    assert head["stack"] == "torchspec" and head["unit"] == "sample"
    adv = advice_json(advise(out))
    assert adv["observed"]["bottleneck"] == "target"


def test_specforge_wandb_csv_derives_the_trainers_capacity_from_data_wait(tmp_path):
    csv = tmp_path / "wandb.csv"
    lines = [
        "_step,_timestamp,train/perf/global_samples_per_second,train/perf/optimizer_step_time_s,"
        "train/perf/data_wait_time_s,train/loss"
    ]
    lines += [f"{s},{5000 + 2 * s},49.0,2.0,0.25,{3 - s / 100}" for s in range(1, 31)]
    lines.append("31,5062,,,,2.6")  # a row of another metric only: skipped for rates
    csv.write_text("\n".join(lines) + "\n")
    out = tmp_path / "sf.jsonl"
    r = _cli(["import-tb", csv, "--stack", "specforge", "--roles", "target=1,drafter=7", "-o", out])
    assert r.exit_code == 0, r.output
    snaps = _rates(out)
    assert len(snaps) == 30
    assert snaps[0]["bps"] == {"drafter": 49.0, "target": 49.0}
    assert snaps[0]["cap_bps"] == {"drafter": pytest.approx(49.0 * 2.0 / 1.75)}  # no producer capacity
    assert [s["t"] for s in snaps[:3]] == [0.0, 2.0, 4.0]


def test_speculators_mlflow_long_csv_scales_rank_rates_by_the_consumer_count(tmp_path):
    csv = tmp_path / "mlflow.csv"
    rows = ["key,value,step,timestamp"]
    for s in range(20):
        ms = 7_000_000 + 500 * s
        rows += [
            f"profile/step_ms,500,{s},{ms}",
            f"profile/fetch_ms,100,{s},{ms}",
            f"profile/tokens_per_s,16000,{s},{ms}",
        ]
    csv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "sp.jsonl"
    r = _cli(["import-tb", csv, "--stack", "speculators", "--roles", "vllm=1,trainer=4", "-o", out])
    assert r.exit_code == 0, r.output
    snap = _rates(out)[3]
    assert snap["bps"] == {"trainer": pytest.approx(8.0), "vllm": pytest.approx(8.0)}  # 4 x 1000/500
    assert snap["cap_bps"] == {"trainer": pytest.approx(10.0)}  # 4 x 1000/400
    assert snap["tok_s"] == pytest.approx(64000.0)
    assert snap["t"] == pytest.approx(1.5)


def test_a_map_replaces_a_stack_field_and_adds_a_queue(tmp_path):
    rows = [
        (
            s,
            float(s),
            {
                "perf/train_capacity": 16.0,
                "perf/step_time": 0.75,
                "perf/dispatch_wait": 0.25,
                "perf/infer_capacity": 12.5,
                "my/infer_cap": 20.0,
                "my/pool": 3.0,
            },
        )
        for s in range(1, 11)
    ]
    ev = write_events(tmp_path / "events.out.tfevents.m", 50.0, rows)
    out = tmp_path / "m.jsonl"
    r = _cli(
        [
            "import-tb",
            ev,
            "--stack",
            "torchspec",
            "--roles",
            "target=1,drafter=3",
            "--queue",
            "pool:drafter:64",
            "--map",
            "target.cap_bps=my/infer_cap",
            "--map",
            "q.pool=my/pool",
            "-o",
            out,
        ]
    )
    assert r.exit_code == 0, r.output
    snap = _rates(out)[-1]
    assert snap["cap_bps"]["target"] == 20.0 and snap["q"] == {"pool": 3.0}


def test_errors_name_the_stack_the_missing_tag_and_the_csv_line(tmp_path):
    ev = write_events(tmp_path / "events.out.tfevents.x", 1.0, [(1, 1.0, {"train/loss": 2.0})])
    r = _cli(["import-tb", ev, "--stack", "specforge", "--roles", "a=1,b=1", "-o", tmp_path / "o.jsonl"])
    one_line_error(r, "--stack specforge", "train/perf/global_samples_per_second", "train/loss")
    r = _cli(["import-tb", ev, "--stack", "nemo", "--roles", "a=1,b=1", "-o", tmp_path / "o.jsonl"])
    one_line_error(r, "--stack 'nemo'", "torchspec")
    r = _cli(["import-tb", ev, "--roles", "a=1,b=1", "-o", tmp_path / "o.jsonl"])
    one_line_error(r, "--stack", "--map")
    bad = tmp_path / "bad.csv"
    bad.write_text("step,_timestamp,x\n1,10,0.5\n2,11,fast\n")
    r = _cli(["import-tb", bad, "--roles", "a=1,b=1", "--map", "b.bps=x", "-o", tmp_path / "o.jsonl"])
    one_line_error(r, f"{bad}:3", "'x'", "'fast'")
    notime = tmp_path / "notime.csv"
    notime.write_text("step,x\n1,0.5\n")
    with pytest.raises(LogError, match="time column"):
        read_csv_scalars(notime)


def test_wandb_chart_export_columns_and_millisecond_timestamps(tmp_path):
    p = tmp_path / "chart.csv"
    p.write_text(
        "Step,timestamp,run-7 - perf/x,run-7 - perf/x__MIN,run-7 - perf/x__MAX\n"
        "1,1000000000000,2.5,2.4,2.6\n2,1000000002000,3.5,3.4,3.6\n"
    )
    scalars, first = read_csv_scalars(p)
    assert first == 1e9 and list(scalars) == ["perf/x"]
    assert [(s.step, s.wall_time, s.value) for s in scalars["perf/x"]] == [(1, 1e9, 2.5), (2, 1e9 + 2, 3.5)]


def test_derive_skips_steps_missing_a_tag_or_with_no_positive_denominator():
    f = Field(key="consumer.cap_bps", kind="capacity", num=("a",), den_plus=("b",), den_minus=("c",))
    scalars = {
        "a": [Scalar(1, 1.0, 6.0), Scalar(2, 2.0, 6.0), Scalar(3, 3.0, 6.0)],
        "b": [Scalar(1, 1.0, 2.0), Scalar(2, 2.5, 1.0), Scalar(3, 3.0, 2.0)],
        "c": [Scalar(1, 1.0, 0.5), Scalar(2, 2.0, 1.0)],
    }
    assert [(s.step, s.wall_time, s.value) for s in derive(f, scalars, 3)] == [(1, 1.0, 4.0)]
    with pytest.raises(ValueError, match="kind"):
        Field(key="x", kind="speed", num=("a",))


def test_every_stack_field_uses_documented_tags_and_every_metric_cites_a_commit():
    for stack in STACKS.values():
        tags = {m.tag for m in stack.metrics}
        for f in stack.fields:
            assert set(f.tags) <= tags, (stack.name, f.key)
        for m in stack.metrics:
            assert re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40}:[\w/.]+", m.source), m.source
        assert any(f.key == "consumer.bps" for f in stack.fields)
        doc = (ROOT / stack.doc).read_text()
        for m in stack.metrics:
            assert f"`{m.tag}`" in doc, (stack.doc, m.tag)


def _doc_commands(page: Path) -> list[list[str]]:
    text = page.read_text()
    return [shlex.split(c.replace("\\\n", " ")) for c in re.findall(r"^\s*(dflash-advise (?:.*\\\n)*.*)$", text, re.M)]


@pytest.mark.parametrize("name", sorted(STACKS))
def test_the_docs_page_commands_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    cmds = _doc_commands(ROOT / STACKS[name].doc)
    assert cmds and cmds[0][:2] == ["dflash-advise", "import-tb"]
    for cmd in cmds:
        args = [str(tmp_path / Path(a).name) if a.startswith("/tmp/") else a for a in cmd[1:]]
        r = _cli(args)
        assert r.exit_code == 0, (cmd, r.output)


STACK_FIXTURES = [
    ("specforge-1x7.csv", "specforge", "target=1,drafter=7", "1-7"),
    ("torchspec-1x3.csv", "torchspec", "target=1,drafter=3", "1-3"),
]


@pytest.mark.parametrize("name, stack, roles, label", STACK_FIXTURES)
def test_an_imported_stack_without_tokens_advises_in_b_s_without_nan(tmp_path, name, stack, roles, label):
    """Issue 35 item 1, as a new user runs it: the stack's metrics carry no tokens, so tok/s is
    unknown, the observed split is marked and measured, and no output says nan."""
    out = tmp_path / "s.jsonl"
    r = _cli(["import-tb", ROOT / "fixtures" / "stacks" / name, "--stack", stack, "--roles", roles, "-o", out])
    assert r.exit_code == 0, r.output
    text = _cli([out])
    js = _cli([out, "--json"])
    md = _cli([out, "--markdown"])
    for res in (text, js, md):
        assert res.exit_code == 0, res.output
        assert not re.search(r"\bnan\b", res.output, re.IGNORECASE), res.output
    doc = json.loads(js.stdout)
    assert [s["observed"] for s in doc["splits"]].count(True) == 1
    assert next(s for s in doc["splits"] if s["observed"])["roles"] == {
        k: int(v) for k, v in (kv.split("=") for kv in roles.split(","))
    }
    assert doc["observed"]["tok_s"] is None
    assert f"Measured at {label}" in text.stdout
    assert any(re.match(rf"^>?\*\s+{label}\s", line.strip()) for line in text.stdout.splitlines()), text.stdout
    # item 2: the header declares no queue ("queues": []): no q_hs, no queue advice, nothing "by the queue"
    for res in (text, md):
        assert "q_hs" not in res.stdout and "Queue:" not in res.stdout and "by the queue" not in res.stdout
    assert doc["queues"] == {}


STACK_UNITS = [
    ("specforge-1x7.csv", "specforge", "target=1,drafter=7", "samples/s"),
    ("torchspec-1x3.csv", "torchspec", "target=1,drafter=3", "samples/s"),
    ("speculators-1x2.csv", "speculators", "target=1,drafter=2", "rank steps/s"),
]


@pytest.mark.parametrize("name, stack, roles, unit", STACK_UNITS)
def test_the_advice_on_an_imported_stack_names_the_unit_of_its_rates(tmp_path, name, stack, roles, unit):
    """Issue 50: SpecForge and TorchSpec log samples/s, and the advice printed them as b/s with no
    word of it. The header carries the stack's unit; every rendering's caveats say what b/s is."""
    out = tmp_path / "s.jsonl"
    r = _cli(["import-tb", ROOT / "fixtures" / "stacks" / name, "--stack", stack, "--roles", roles, "-o", out])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text().splitlines()[0])["unit"] == STACKS[stack].unit
    said = f"(the header's 'unit', written by import-tb --stack {stack}): every b/s in this report is {unit}"
    for fmt in ([], ["--markdown"]):
        res = _cli([out, *fmt])
        assert res.exit_code == 0, res.output
        assert said in res.stdout, res.stdout
    doc = json.loads(_cli([out, "--json"]).stdout)
    assert any(said in w for w in doc["warnings"]), doc["warnings"]


def test_torchspec_capacities_are_bounds_not_measurements(tmp_path):
    """Issue 35 item 6: TorchSpec's docs call perf/infer_capacity an upper estimate while slots sit
    idle and perf/train_capacity a lower bound: the import says so in the header, and the advice
    treats the engines' capacity as between their throughput and that estimate, never measured."""
    out = tmp_path / "ts.jsonl"
    r = _cli(
        [
            "import-tb",
            ROOT / "fixtures" / "stacks" / "torchspec-1x3.csv",
            "--stack",
            "torchspec",
            "--roles",
            "target=1,drafter=3",
            "-o",
            out,
        ]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text().splitlines()[0])["cap_bps_kind"] == {"target": "upper", "drafter": "lower"}
    snaps = _rates(out)
    adv = advise(out)
    tgt, dft = adv.fit.producer, adv.fit.consumer
    assert tgt.basis.value == "bound" and dft.basis.value == "bound"
    lo, hi = tgt.mu_range_bps
    assert lo < hi and lo <= adv.fit.observed[0].bps * (1 + 1e-9) and math.isfinite(hi)
    assert hi <= max(s["cap_bps"]["target"] for s in snaps) and dft.mu_range_bps[1] == math.inf
    text = _cli([out]).stdout
    assert "(measured from rates snapshots)" not in text and "between" in text and "upper estimate" in text
    js = advice_json(adv)["capacity_basis"]
    assert (
        js["target"]["kind"] == "bound" and js["target"]["high_bps"] is not None and js["drafter"]["high_bps"] is None
    )
    # a --map that replaces the stack's field is the user's own capacity: no kind is claimed for it
    out2 = tmp_path / "ts2.jsonl"
    r = _cli(
        [
            "import-tb",
            ROOT / "fixtures" / "stacks" / "torchspec-1x3.csv",
            "--stack",
            "torchspec",
            "--roles",
            "target=1,drafter=3",
            "--map",
            "target.cap_bps=perf/infer_capacity",
            "-o",
            out2,
        ]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(out2.read_text().splitlines()[0])["cap_bps_kind"] == {"drafter": "lower"}


def test_role_names_read_as_words_in_every_sentence(tmp_path):
    """Issue 35 item 6: roles named vllm and trainer: no "vllms", no "Vllm" at a sentence's start,
    no "1 workers" or "1 trainers"."""
    out = tmp_path / "sp.jsonl"
    r = _cli(
        [
            "import-tb",
            ROOT / "fixtures" / "stacks" / "speculators-1x2.csv",
            "--stack",
            "speculators",
            "--roles",
            "vllm=1,trainer=2",
            "-o",
            out,
        ]
    )
    assert r.exit_code == 0, r.output
    for args in ([out], [out, "--markdown"], [out, "--roles", "vllm=2,trainer=1"], [out, "--gpus", "5"]):
        text = _cli(args).stdout
        assert not re.search(r"\bvllms\b|\bVllm\b|\b1 workers\b|\b1 trainers\b|\b1 vllm workers\b", text), text
        assert "vllm workers" in text or "vllm worker" in text or "--gpus" in args
