"""advisor.tbimport: TensorBoard scalars -> rates events. The main fixture was written by a real
writer (torch.utils.tensorboard, fixtures/tensorboard/make_event_file.py); hand-built records for
the encodings it does not use are framed by tensorboard's own RecordWriter."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import one_line_error
from tensorboard.summary.writer.record_writer import RecordWriter
from typer.testing import CliRunner

from advisor import advise
from advisor.cli.app import app, route
from advisor.errors import LogError, LogWarning
from advisor.ingest.load import load_log
from advisor.present.json import advice_json
from advisor.tbimport import parse_map, read_scalars

ROOT = Path(__file__).resolve().parent.parent
TB = ROOT / "fixtures" / "tensorboard"
EVENTS = TB / "events.out.tfevents.reference-7x1"
REFERENCE_RATES = ROOT / "fixtures" / "reference-7x1-rates.jsonl"
MAP = [
    "target.bps=pipeline/target_bps",
    "drafter.bps=pipeline/drafter_bps",
    "target.cap_bps=pipeline/target_capacity_bps",
    "drafter.cap_bps=pipeline/drafter_capacity_bps",
    "tok_s=pipeline/tokens_per_s",
    "q.hs=queues/hs_depth",
    "done=progress/done",
    "eta_s=progress/eta_s",
]
HEADER_OPTS = [
    "--roles",
    "target=7,drafter=1",
    "--gpus",
    "8",
    "--queue",
    "hs:drafter:20",
    "--token-budget",
    "32768",
    "--samples",
    "902000",
    "--epochs",
    "6",
]


def _cli(args):
    return CliRunner().invoke(app, route(args))


def _import(tmp_path, events=TB, extra=()):
    out = tmp_path / "tb.jsonl"
    args = ["import-tb", str(events), "-o", str(out), *HEADER_OPTS, *extra]
    for m in MAP:
        args += ["--map", m]
    return _cli(args), out


def test_reads_both_scalar_encodings_of_a_real_writer_and_skips_the_rest():
    scalars, first_wall = read_scalars([EVENTS])
    want = [json.loads(x) for x in REFERENCE_RATES.read_text().splitlines() if '"rates"' in x]
    assert "train/grad_norm" not in scalars  # a histogram, not a scalar
    assert len(scalars["train/loss"]) == len(want) == 90
    legacy = [s.value for s in scalars["pipeline/drafter_bps"]]  # simple_value (float32)
    tensor = [s.value for s in scalars["pipeline/target_capacity_bps"]]  # 0-d DT_FLOAT tensor
    assert legacy == [r["bps"]["drafter"] for r in want]
    assert tensor == [r["cap_bps"]["target"] for r in want]
    assert [s.value for s in scalars["queues/hs_depth"]] == [float(r["q"]["hs"]) for r in want]
    steps = [s.step for s in scalars["pipeline/drafter_bps"]]
    walls = [s.wall_time - first_wall for s in scalars["pipeline/drafter_bps"]]
    assert steps == list(range(90))
    assert walls == pytest.approx([r["t"] for r in want], abs=0.5)  # the writer starts within 0.5 s of t0


def test_imported_log_advises_like_the_rates_log_it_came_from(tmp_path):
    r, out = _import(tmp_path)
    assert r.exit_code == 0, r.output
    assert "90 rates snapshots" in r.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["ev"] for x in lines] == ["run"] + ["rates"] * 90  # no end: the job may still run
    got, want = advice_json(advise(out)), advice_json(advise(REFERENCE_RATES))
    assert got["recommendation"]["roles"] == want["recommendation"]["roles"] == {"target": 7, "drafter": 1}
    assert got["recommendation"]["verdict"] == want["recommendation"]["verdict"]
    assert got["observed"]["bottleneck"] == want["observed"]["bottleneck"]
    for k in ("bps", "efficiency", "steady_from_s"):
        assert got["observed"][k] == pytest.approx(want["observed"][k], rel=1e-3), k
    assert [s["bps"] for s in got["splits"]] == pytest.approx([s["bps"] for s in want["splits"]], rel=1e-3)


def test_ended_flag_writes_end_and_the_advice_is_for_the_next_run(tmp_path):
    r, out = _import(tmp_path, extra=["--ended"])
    assert r.exit_code == 0, r.output
    end = load_log(out).end
    assert end["reason"] == "done" and end["t"] == pytest.approx(5400.0, abs=0.5)
    rec = advice_json(advise(out))["recommendation"]
    # advice for the next run: no restart cost; a rates-only GPU log carries the GPU priors, which
    # may leave 7-1 and 6-2 open: cannot-tell only where a probe is worth buying (issue 34), and the
    # action for the next run either way
    assert rec["settings"]["run_ended"] is True and rec["rule"] in ("next-run", "probe")
    assert rec["verdict"] == ("next-run" if rec["rule"] == "next-run" else "cannot-tell")
    worth = bool(rec["probe"] and rec["probe"]["worth_it"])
    assert rec["action"] == "next-run" and (rec["verdict"] == "cannot-tell") == worth


def test_corrupt_event_file_exits_2_naming_it(tmp_path):
    bad = tmp_path / "events.out.tfevents.bad"
    data = bytearray(EVENTS.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    r, _ = _import(tmp_path, events=bad)
    one_line_error(r, str(bad), "CRC mismatch")


@pytest.mark.parametrize(
    "flip, words",
    [(0, "record at byte 0: length CRC mismatch"), (-1, "data CRC mismatch (corrupt event file)")],
)
def test_each_crc_mismatch_says_which_and_where(tmp_path, flip, words):
    bad = tmp_path / "events.out.tfevents.bad"
    data = bytearray(EVENTS.read_bytes())
    data[flip] ^= 0x01
    bad.write_bytes(bytes(data))
    with pytest.raises(LogError, match=r"events\.out\.tfevents\.bad: record at byte \d+: ") as e:
        read_scalars([bad])
    assert words in str(e.value)


def test_cut_last_record_is_skipped_with_a_warning(tmp_path):
    cut = tmp_path / "events.out.tfevents.cut"
    cut.write_bytes(EVENTS.read_bytes()[:-7])
    with pytest.warns(LogWarning, match="incomplete"):
        scalars, _ = read_scalars([cut])
    full, _ = read_scalars([EVENTS])
    assert sum(map(len, scalars.values())) == sum(map(len, full.values())) - 1


def test_unknown_tag_lists_what_the_file_has(tmp_path):
    out = tmp_path / "x.jsonl"
    r = _cli(["import-tb", str(TB), "-o", str(out), "--roles", "target=7,drafter=1", "--map", "drafter.bps=train/bps"])
    one_line_error(r, "'train/bps'", "pipeline/drafter_bps")
    assert not out.exists()


@pytest.mark.parametrize(
    "args, words",
    [
        (["--roles", "target=7,drafter=1", "--map", "drafter.bps"], ["expected KEY=TAG"]),
        (["--roles", "target=7,drafter=1", "--map", "drafter.speed=x"], ["unknown key 'drafter.speed'", "drafter.bps"]),
        (["--roles", "target=7,drafter=1", "--map", "tok_s=pipeline/tokens_per_s"], ["at least one <role>.bps"]),
        (["--roles", "target=7", "--map", "target.bps=x"], ["--roles", "producer and a consumer"]),
        (["--roles", "target=seven,drafter=1", "--map", "target.bps=x"], ["--roles", "'target=seven'"]),
        (
            ["--roles", "target=7,drafter=1", "--queue", "hs:loader:20", "--map", "drafter.bps=x"],
            ["--queue", "'loader' is not a role"],
        ),
    ],
)
def test_bad_options_exit_2_saying_what_is_wrong(tmp_path, args, words):
    r = _cli(["import-tb", str(TB), "-o", str(tmp_path / "x.jsonl"), *args])
    one_line_error(r, *words)


def test_missing_input_and_directory_without_event_files(tmp_path):
    r = _cli(
        ["import-tb", str(tmp_path / "nope"), "-o", str(tmp_path / "x.jsonl"), "--roles", "a=1,b=1", "--map", "b.bps=x"]
    )
    one_line_error(r, "nope", "no such file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LogError, match="no TensorBoard event file"):
        read_scalars([tmp_path / "empty"])


# --- a hand-built event file for the encodings the real fixture does not use -----------------
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num: int, wt: int, payload: bytes) -> bytes:
    key = _varint(num << 3 | wt)
    return key + (_varint(len(payload)) + payload if wt == 2 else payload)


def _event(wall: float, step: int, values: list[bytes]) -> bytes:
    summary = b"".join(_field(1, 2, v) for v in values)
    return _field(1, 1, struct.pack("<d", wall)) + _field(2, 0, _varint(step)) + _field(5, 2, summary)


def _record(data: bytes) -> bytes:
    buf = io.BytesIO()
    RecordWriter(buf).write(data)
    return buf.getvalue()


def _value(tag: str, tensor: bytes) -> bytes:
    return _field(1, 2, tag.encode()) + _field(8, 2, tensor)


def test_tensor_forms_double_content_int64_and_non_scalars(tmp_path):
    dbl = _field(1, 0, _varint(2)) + _field(4, 2, struct.pack("<d", 1.25))  # DT_DOUBLE, tensor_content
    i64 = _field(1, 0, _varint(9)) + _field(10, 2, _varint(7))  # DT_INT64, packed
    vec = (
        _field(1, 0, _varint(1))
        + _field(2, 2, _field(2, 2, _field(1, 0, _varint(3))))
        + _field(5, 2, struct.pack("<3f", 1, 2, 3))
    )  # a 3-vector: not a scalar
    dbl_val = _field(1, 0, _varint(2)) + _field(6, 2, struct.pack("<d", -0.5))  # DT_DOUBLE, double_val
    p = tmp_path / "events.out.tfevents.hand"
    p.write_bytes(
        _record(_field(1, 1, struct.pack("<d", 100.0)) + _field(3, 2, b"brain.Event:2"))
        + _record(_event(101.0, 5, [_value("a", dbl), _value("b", i64), _value("v", vec), _value("d", dbl_val)]))
    )
    scalars, first = read_scalars([p])
    assert first == 100.0
    assert {k: [(s.step, s.value) for s in v] for k, v in scalars.items()} == {
        "a": [(5, 1.25)],
        "b": [(5, 7.0)],
        "d": [(5, -0.5)],
    }


def test_snapshots_take_each_tags_latest_value(tmp_path):
    """bps logged every step, queue depth every other step: each snapshot carries the latest depth."""

    def simple(tag, v):
        return _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", v))

    recs = [_record(_field(1, 1, struct.pack("<d", 1000.0)) + _field(3, 2, b"brain.Event:2"))]
    for step in range(6):
        vals = [simple("tput", 2.0 + step)]
        if step % 2 == 0:
            vals.append(simple("depth", float(step)))
        recs.append(_record(_event(1000.0 + 10 * (step + 1), step, vals)))
    p = tmp_path / "events.out.tfevents.x"
    p.write_bytes(b"".join(recs))
    r = _cli(
        [
            "import-tb",
            str(p),
            "-o",
            str(tmp_path / "o.jsonl"),
            "--roles",
            "target=1,drafter=1",
            "--queue",
            "hs:drafter:4",
            "--map",
            "drafter.bps=tput",
            "--map",
            "q.hs=depth",
        ]
    )
    assert r.exit_code == 0, r.output
    rates = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()[1:]]
    assert [(x["t"], x["window"], x["bps"]["drafter"], x["q"]["hs"]) for x in rates] == [
        (10.0, 10.0, 2.0, 0.0),
        (20.0, 10.0, 3.0, 0.0),
        (30.0, 10.0, 4.0, 2.0),
        (40.0, 10.0, 5.0, 2.0),
        (50.0, 10.0, 6.0, 4.0),
        (60.0, 10.0, 7.0, 4.0),
    ]


def test_parse_map_accepts_queue_keys_only_for_declared_queues():
    assert parse_map(["q.hs=x", "drafter.bps=y"], ["target", "drafter"], ["hs"]) == {"q.hs": "x", "drafter.bps": "y"}
    with pytest.raises(ValueError, match="unknown key 'q.pre'"):
        parse_map(["q.pre=x", "drafter.bps=y"], ["target", "drafter"], ["hs"])


def test_importing_the_reader_loads_no_heavy_module():
    code = (
        "import sys, advisor.tbimport; "
        "print(sorted(m for m in ('pandas', 'numpy', 'torch', 'tensorboard', 'google.protobuf') if m in sys.modules))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr


# --- found by fuzzing (fuzz/targets.py: fuzz_tb); the inputs are in fuzz/corpus/tb/ too ----------
@pytest.mark.parametrize(
    "field",
    [
        _field(5, 0, _varint(3)),  # float_val as a varint
        _field(7, 1, b"\x01" * 8),  # int_val as fixed64
        _field(6, 5, b"\x01" * 4),  # double_val as fixed32
    ],
)
def test_a_tensor_value_of_the_wrong_wire_type_is_a_corrupt_record(tmp_path, field):
    p = tmp_path / "events.out.tfevents.odd"
    p.write_bytes(_record(_event(101.0, 1, [_value("a", _field(1, 0, _varint(1)) + field)])))
    with pytest.raises(LogError, match=r"record at byte 0: not a TensorBoard Event \(tensor field \d+ has wire type"):
        read_scalars([p])
    r, _ = _import(tmp_path, events=p)
    one_line_error(r, str(p), "wire type")


def test_import_warnings_are_one_line_each_on_stderr(tmp_path):
    """A cut record is a warning said in one line (Python's warning format took two)."""
    cut = tmp_path / "events.out.tfevents.cut"
    cut.write_bytes(b"\x01\x02\x03")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisor",
            "import-tb",
            str(cut),
            "-o",
            str(tmp_path / "x.jsonl"),
            "--roles",
            "target=7,drafter=1",
            "--map",
            "drafter.bps=x",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("dflash-advise: warning: ") and "incomplete" in lines[0], lines
    assert lines[1] == f"dflash-advise: {cut}: holds no events"


def test_gpus_per_worker_goes_into_the_header(tmp_path):
    r, out = _import(tmp_path, extra=["--gpus-per-worker", "drafter=1"])
    assert r.exit_code == 0, r.output
    assert load_log(out).header.gpus_per_worker == {"drafter": 1}


def test_an_imported_gpu_run_gets_gpu_caveats_and_its_snapshots_counted(tmp_path):
    # issue 20: a TensorBoard import of a GPU run got the shared-CPU-host caveats and its 70 steady
    # one-minute snapshots were counted as 70 batches
    from advisor.advice import advise

    r, out = _import(tmp_path)
    assert r.exit_code == 0, r.output
    adv = advise(out)
    assert not any("share a host's compute" in w for w in adv.warnings)
    assert any("one split of real GPUs" in w for w in adv.warnings)
    ev = adv.decision.evidence
    assert ev.basis == "rates" and ev.snapshots < 100 < ev.batches and not ev.thin
    assert advice_json(adv)["capacity_basis"]["target"]["kind"] == "rates"


def test_a_wall_time_past_the_readers_limit_is_refused_not_written(tmp_path):
    """Found by fuzzing (fuzz/corpus/tb/crash-*): a first event at wall time ~0 beside real ones put
    ``t`` past the reader's MAX_TIME_S, and import-tb wrote a log the advisor then refused."""

    def simple(tag, v):
        return _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", v))

    p = tmp_path / "events.out.tfevents.x"
    p.write_bytes(
        _record(_field(1, 1, struct.pack("<d", 0.0)) + _field(3, 2, b"brain.Event:2"))
        + _record(_event(1.7e9, 3, [simple("tput", 2.0)]))
    )
    out = tmp_path / "o.jsonl"
    r = _cli(["import-tb", str(p), "-o", str(out), "--roles", "target=1,drafter=1", "--map", "drafter.bps=tput"])
    one_line_error(r, str(p), "step 3", "1.7e+09 s", "more than the limit")
    assert not out.exists()


def test_a_header_the_reader_refuses_is_refused_not_written(tmp_path):
    """One schema (issue 49 item 4): roles of 4,200 GPUs in all are over the reader's limit, and
    import-tb, whose header the writer checks, used to write a log the advisor then refused."""
    out = tmp_path / "o.jsonl"
    r = _cli(["import-tb", str(TB), "-o", str(out), "--roles", "target=4000,drafter=200", "--map", MAP[1]])
    one_line_error(r, "field 'roles'", "use 4200 GPUs, more than the limit 4096")
    assert not out.exists()


def test_the_instrumenting_guides_import_advises_without_nan(tmp_path):
    """Issue 35 item 1: docs/instrumenting.md's import-tb example maps no tok_s: its advice is in
    b/s, marks and measures the split it ran (6-2 as the guide says), and prints no nan."""
    import re

    out = tmp_path / "exp-17.jsonl"
    args = [
        "import-tb",
        str(TB),
        "-o",
        str(out),
        "--roles",
        "target=6,drafter=2",
        "--queue",
        "hs:drafter:20",
        "--token-budget",
        "32768",
    ]
    for m in MAP[:4] + ["q.hs=queues/hs_depth"]:
        args += ["--map", m]
    r = _cli(args)
    assert r.exit_code == 0, r.output
    text, js = _cli([str(out)]), _cli([str(out), "--json"])
    for res in (text, js):
        assert res.exit_code == 0 and not re.search(r"\bnan\b", res.output, re.IGNORECASE), res.output
    assert "Measured at 6-2" in text.stdout and re.search(r"^>?\*\s+6-2\s", text.stdout, re.MULTILINE)
    doc = json.loads(js.stdout)
    assert [s["roles"] for s in doc["splits"] if s["observed"]] == [{"target": 6, "drafter": 2}]


def test_without_the_tensorboard_extra_import_tb_says_how_to_install_it(tmp_path):
    """Event files are read by tensorboard's own reader, an extra: without it, exit 2 in one line
    naming the install command (a CSV export needs no extra)."""
    out = tmp_path / "x.jsonl"
    argv = ["dflash-advise", "import-tb", str(EVENTS), "-o", str(out), "--roles", "target=7,drafter=1"]
    argv += ["--map", "drafter.bps=pipeline/drafter_bps"]
    code = (
        "import sys; sys.modules['tensorboard'] = None; "  # as if not installed
        f"sys.argv = {argv!r}; from advisor.cli.app import script; script()"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and str(EVENTS) in r.stderr, r.stderr
    assert "pip install 'dflash-advisor[tensorboard]'" in r.stderr, r.stderr
    assert not out.exists()
