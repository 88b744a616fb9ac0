"""Fast unit tests of the trainer's pieces: config, corpus, batching, loader placement, rates,
anchors, drafter loss, hidden-state handoff, log writer."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from trainer.batching import BatchPlan, plan_epoch
from trainer.config import PRESETS, ConfigError, make_config
from trainer.corpus import SyntheticCorpus
from trainer.loader import Loader, is_end
from trainer.logwriter import OutputError, open_log
from trainer.rates import RateWindow

ROOT = Path(__file__).resolve().parent.parent


def test_config_defaults_follow_device():
    cpu = make_config(targets=2, drafters=1, out="x.jsonl")
    assert (cpu.model, cpu.token_budget) == ("tiny", 2048)
    gpu = make_config(targets=2, drafters=1, out="x.jsonl", device="cuda")
    assert (gpu.model, gpu.token_budget, gpu.pre_queue_depth, gpu.hs_queue_depth) == ("1b", 32768, 50, 20)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"targets": 0}, "targets"),
        ({"drafters": -1}, "drafters"),
        ({"device": "tpu"}, "device"),
        ({"steps": 0}, "steps"),
        ({"hs_queue_depth": 0}, "hs_queue_depth"),
        ({"time_scale": 0.0}, "time_scale"),
        ({"model": "huge"}, "model"),
        ({"token_budget": 8}, "token_budget"),
        ({"emulate": "/no/such.jsonl"}, "emulate"),
        ({"crash": "drafter:x:1"}, "crash"),
        ({"sync_every": -1}, "sync_every"),
        ({"handoff": "nvlink"}, "handoff"),
    ],
)
def test_config_errors_name_the_field(kwargs, field):
    args = {"targets": 1, "drafters": 1, "out": "x.jsonl", **kwargs}
    with pytest.raises(ConfigError) as e:
        make_config(**args)
    assert e.value.field == field and str(e.value).startswith(field)


def test_config_is_frozen():
    cfg = make_config(targets=1, drafters=1, out="x.jsonl")
    with pytest.raises(Exception):
        cfg.targets = 3


def test_tap_layers_are_distinct_and_inside_the_stack():
    for p in PRESETS.values():
        taps = p.target.tap_layers
        assert len(taps) == p.target.taps and all(0 <= i < p.target.layers for i in taps)
    assert PRESETS["1b"].target.backbone_params == pytest.approx(1.27e9, rel=0.01)


def test_corpus_is_deterministic_long_tailed_and_in_vocab():
    a = SyntheticCorpus(3000, 500, 2048, seed=3)
    b = SyntheticCorpus(3000, 500, 2048, seed=3)
    assert np.array_equal(a.lengths, b.lengths) and np.array_equal(a.tokens(17), b.tokens(17))
    assert not np.array_equal(a.lengths, SyntheticCorpus(3000, 500, 2048, seed=4).lengths)
    assert a.lengths.max() <= 512 and a.lengths.min() >= 32
    assert np.mean(a.lengths) > np.median(a.lengths) * 1.1  # right-skewed
    t = a.tokens(5)
    assert len(t) == a.lengths[5] and t.min() >= 0 and t.max() < 500


def test_batches_respect_the_budget_cover_the_corpus_and_vary():
    c = SyntheticCorpus(2000, 100, 2048, seed=0)
    batches = plan_epoch(c.lengths, 2048, seed=0, epoch=0)
    seen = np.concatenate(batches)
    assert np.array_equal(np.sort(seen), np.arange(2000))
    padded = [len(b) * c.lengths[b].max() for b in batches]
    assert max(padded) <= 2048
    real = np.array([c.lengths[b].sum() for b in batches])
    assert real.std() > 0 and np.mean(real) / 2048 > 0.85  # little padding thanks to buckets
    sizes = [len(b) for b in batches]
    assert min(sizes) < max(sizes)  # batches differ in sequence count
    assert [list(b) for b in plan_epoch(c.lengths, 2048, 0, 1)] != [list(b) for b in batches]


def test_batch_plan_cuts_at_max_batches_and_materialises_padded_ids():
    c = SyntheticCorpus(500, 100, 1024, seed=1)
    plan = BatchPlan(c, 1024, epochs=2, seed=1, max_batches=7)
    items = [plan.materialise(b) for b in plan]
    assert plan.total == 7 and [m["batch"] for m in items] == list(range(7))
    m = items[0]
    assert m["ids"].shape == (m["seqs"], m["lens"].max()) and m["tokens"] == m["lens"].sum()
    assert m["ids"].size <= 1024


def test_loader_gives_each_batch_to_the_emptiest_queue_lowest_index_first():
    qs = [queue.Queue(maxsize=3) for _ in range(3)]
    qs[0].put({"batch": -1})  # queue 0 starts with one item
    stop = threading.Event()
    ld = Loader(range(5), lambda k: {"batch": k}, qs, 3, stop)
    ld.run()
    got = [[x["batch"] for x in list(q.queue) if not is_end(x)] for q in qs]
    # 0 -> q1 (q1, q2 empty; lowest index), 1 -> q2, then all hold one: 2 -> q0, 3 -> q1, 4 -> q2
    assert got == [[-1, 2], [0, 3], [1, 4]]
    assert all(is_end(list(q.queue)[-1]) for q in qs)


def test_loader_blocks_only_when_all_queues_are_full():
    qs = [queue.Queue(maxsize=1) for _ in range(2)]
    stop = threading.Event()
    ld = Loader(range(10), lambda k: {"batch": k}, qs, 1, stop)
    ld.start()
    ld.join(0.3)
    assert ld.is_alive() and ld.produced == 2  # both full: waiting
    qs[1].get()
    ld.join(0.3)
    assert ld.produced == 3 and qs[1].queue[0]["batch"] == 2
    stop.set()
    ld.join(2)
    assert not ld.is_alive()


def test_rates_snapshot_counts_completions_and_capacity_from_busy_time():
    rw = RateWindow({"target": 2, "drafter": 1}, window_s=10.0, planned_batches=100)
    for i in range(20):
        rw.add({"t": 0.5 * i + 0.5, "role": "target", "busy": 0.8, "tokens": 1000})
        rw.add({"t": 0.5 * i + 0.4, "role": "drafter", "busy": 0.25, "tokens": 1000})
    snap = rw.snapshot(10.0, [3, 4], 5)
    assert snap["bps"] == {"target": 2.0, "drafter": 2.0}
    assert snap["cap_bps"]["target"] == pytest.approx(2 / 0.8) and snap["cap_bps"]["drafter"] == pytest.approx(4.0)
    assert snap["tok_s"] == pytest.approx(2000.0) and snap["q"] == {"pre": [3, 4], "hs": 5}
    assert snap["done"] == pytest.approx(0.2) and snap["eta_s"] == pytest.approx(80 / 2.0)


def test_log_writer_writes_whole_json_lines_and_nulls_nan(tmp_path):
    p = tmp_path / "a.jsonl"
    w = open_log(str(p))
    w.write(
        {
            "ev": "step",
            "t": 1.0,
            "role": "drafter",
            "worker": 0,
            "batch": 0,
            "tokens": 10,
            "busy": 0.1,
            "wait": 0.0,
            "blocked": 0.0,
            "loss": float("nan"),
        }
    )
    w.write({"ev": "end", "t": 2.0, "reason": "done"})
    w.close()
    lines = p.read_text().splitlines()
    assert [json.loads(x)["ev"] for x in lines] == ["step", "end"] and json.loads(lines[0]).get("loss") is None
    assert w.lines == 2 and w.error is None


def test_log_writer_validates_through_the_records_module(tmp_path):
    from advisor.records import RecordError

    w = open_log(str(tmp_path / "b.jsonl"))
    with pytest.raises(RecordError, match="busy"):
        w.write({"ev": "step", "t": 1.0, "role": "drafter", "worker": 0, "batch": 0, "tokens": 10, "busy": -1.0})
    w.close()


def test_open_log_refuses_what_cannot_be_a_log(tmp_path):
    existing = tmp_path / "old.jsonl"
    existing.write_text("keep me\n")
    cases = {
        str(tmp_path / "no" / "x.jsonl"): "does not exist",
        str(tmp_path): "is a directory",
        "/dev/full": "character device",
        str(existing): "exists; give --force",
    }
    for path, reason in cases.items():
        with pytest.raises(OutputError) as e:
            open_log(path)
        assert e.value.path == path and reason in e.value.reason and "\n" not in str(e.value)
    assert existing.read_text() == "keep me\n"
    w = open_log(str(existing), force=True)  # --force: truncated and rewritten
    w.write({"ev": "end", "t": 0.0, "reason": "done"})
    w.close()
    assert json.loads(existing.read_text())["ev"] == "end"


FSIZE_WRITER = """
import json, resource, sys
from trainer.logwriter import open_log
resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_BYTES, FSIZE_BYTES))
w = open_log(sys.argv[1])
n = 0
while w.error is None and n < 100000:
    w.write({"ev": "step", "t": n * 0.5, "role": "target", "worker": 0, "batch": n, "tokens": 100, "busy": 0.1,
             "pad": "x" * (n % 97)})
    n += 1
    if n % 7 == 0:
        w.flush()
ok = w.write_last({"ev": "end", "t": 1.0, "reason": "error", "msg": str(w.error)})
w.close()
print(json.dumps({"errno": w.error.errno, "lines": w.lines, "end_written": ok}))
"""


@pytest.mark.parametrize("limit", [5000, 5003, 12345])
def test_a_write_error_mid_run_leaves_whole_lines(tmp_path, limit):
    # a real kernel limit (RLIMIT_FSIZE; Python ignores SIGXFSZ, so write() fails with EFBIG), set in
    # a child process: the same short write + error as a full disk, at a byte the test chooses
    p = tmp_path / "full.jsonl"
    r = subprocess.run(
        [sys.executable, "-c", FSIZE_WRITER.replace("FSIZE_BYTES", str(limit)), str(p)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    raw = p.read_bytes()
    assert res["errno"] == 27 and len(raw) <= limit and raw.endswith(b"\n")  # EFBIG
    lines = [json.loads(x) for x in raw.decode().splitlines()]
    assert len(lines) == res["lines"]
    if res["end_written"]:
        assert lines[-1] == {"ev": "end", "t": 1.0, "reason": "error", "msg": lines[-1]["msg"]}
    assert all(e["ev"] == "step" for e in lines[:-1])


torch = pytest.importorskip("torch")


def test_anchors_stay_inside_their_sequences_and_are_seeded():
    from trainer.models import choose_anchors

    lens = np.array([40, 9, 100, 8])
    a = choose_anchors(lens, block=8, anchor_share=1 / 16, seed=0, batch=3)
    assert np.array_equal(a, choose_anchors(lens, 8, 1 / 16, 0, 3))
    assert len(a) == round(lens.sum() / 16 / 7)
    assert np.all(a[:, 1] + 8 <= lens[a[:, 0]])
    assert len({tuple(x) for x in a}) == len(a)


def test_drafter_learns_the_teacher_on_a_fixed_batch():
    from trainer.models import BlockDrafter, soft_kl, verifier_head

    torch.manual_seed(0)
    p = PRESETS["tiny"]
    model = BlockDrafter(p.drafter, p.target)
    head = verifier_head(p.target, 0, torch.device("cpu"), torch.float32)
    taps = torch.randn(2, 50, p.target.taps * p.target.hidden)
    ids = torch.randint(0, p.target.vocab, (2, 50))
    anchors = torch.tensor([[0, 3], [1, 20], [0, 40]])
    teacher_h = torch.randn(3, p.drafter.block - 1, p.target.hidden)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        loss = soft_kl(model(taps, ids, anchors) @ head.T, teacher_h @ head.T)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
    # KL of identical distributions is zero
    logits = torch.randn(4, 7, 11)
    assert soft_kl(logits, logits).item() == pytest.approx(0.0, abs=1e-6)


def test_handoff_round_trip_in_process_keeps_values():
    from trainer.handoff import export_tensors, import_tensors

    x = {"taps": torch.randn(3, 5, 8), "teacher_h": torch.randn(2, 7, 4)}
    blob, export_s = export_tensors(x, "auto")
    assert isinstance(blob, bytes) and len(blob) < 4096  # a handle, not the data
    y, import_s = import_tensors(blob, torch.device("cpu"))
    assert all(torch.equal(x[k], y[k]) for k in x) and export_s >= 0 and import_s >= 0
