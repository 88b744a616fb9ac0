"""advisor.ingest.pieces: one large log read by its pieces in worker processes gives what the
serial read gives: the same summary, bit for bit, and the same first bad line and warnings."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.errors import LogError, LogWarning
from advisor.ingest import pieces, reader, stream
from advisor.ingest.pieces import plan_piece_workers, summarize_file
from advisor.ingest.stream import PieceGeometry, summarize_log
from advisor.model.synth import Scenario, ServiceModel, TokenModel, write_log as synth_log
from conftest import good_lines, step

ROOT = Path(__file__).resolve().parents[2]


def _same(a, b) -> bool:
    return json.dumps(a.to_json(), sort_keys=True) == json.dumps(b.to_json(), sort_keys=True)


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of ~1 kB (chunks of 300 bytes, the first piece as small), read by pieces whatever
    the file's size and the cores free."""
    monkeypatch.setattr(reader, "CHUNK_BYTES", 300)
    monkeypatch.setattr(reader, "RATIO_CHECK_BYTES", 0)
    monkeypatch.setattr(stream, "PIECE_BYTES", 1000)
    monkeypatch.setattr(pieces, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(pieces, "MIN_WORKERS", 2)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """A log of syncs, rates and two roles' steps over a few hundred kB."""
    tm = TokenModel(budget=4096, mean=3900.0, cv=0.05, seq_len=500.0)
    sc = Scenario(name="pieces", n_target=3, n_drafter=2, target=ServiceModel.from_mean(0.2, tm.mean, scv=0.1),
                  drafter=ServiceModel.from_mean(0.15, tm.mean, scv=0.1), tokens=tm, sync_every=2, sync_s=0.05,
                  n_batches=1200, seed=9)
    p = tmp_path_factory.mktemp("pieces") / "run.jsonl"
    synth_log(p, sc, rates_every_s=10.0)
    return p


def test_the_geometry_counts_the_cuts_the_serial_read_makes(synth, small_pieces, monkeypatch):
    seen: list[int] = []
    real = stream._Body.take

    def counted(self, buf, end, nl):
        seen.append(end)
        return real(self, buf, end, nl)
    monkeypatch.setattr(stream._Body, "take", counted)
    summarize_log(synth)
    g = PieceGeometry.now()
    assert (g.first_bytes, g.step_bytes) == (1200, 1200)
    assert len(seen) == g.cuts(synth.stat().st_size) + 1          # (the last piece: what is left)
    assert g.cuts(g.first_bytes - 1) == 0 and g.cuts(g.first_bytes) == 1 and g.cuts(g.limit(3)) == 4


@pytest.mark.parametrize("workers", [2, 3, 5])
def test_pieces_fold_to_the_serial_summary_bit_for_bit(synth, small_pieces, workers, monkeypatch):
    serial = summarize_log(synth)
    assert plan_piece_workers(synth, workers) == workers
    got = summarize_file(synth, workers=workers)
    assert _same(got, serial) and got.n_lines == serial.n_lines
    monkeypatch.setattr(pieces, "summarize_log",
                        lambda *a, **k: pytest.fail("read again here: a piece failed"))
    assert _same(summarize_file(synth, workers=workers), serial)     # (no piece was read again here)


def test_a_sampled_log_keeps_the_same_sample(synth, small_pieces, monkeypatch):
    from advisor.ingest import summary
    monkeypatch.setattr(summary, "DEFAULT_SAMPLE_ROWS", 300)
    serial = summarize_log(synth)
    assert serial.sampled
    assert _same(summarize_file(synth, workers=4), serial)


def test_blank_lines_a_byte_order_mark_and_crlf_count_as_in_the_serial_read(write_log, small_pieces):
    text = [json.dumps(ln) for ln in good_lines(80)]
    text[30:30] = ["", "   "]
    raw = b"\xef\xbb\xbf" + "\r\n".join(text).encode() + b"\r\n"
    p = write_log([], raw=raw)
    serial = summarize_log(p)
    got = summarize_file(p, workers=3)
    assert _same(got, serial) and got.n_lines == serial.n_lines == len(text)


@pytest.mark.parametrize("row", [5, 70, 150])
def test_a_bad_line_is_named_as_the_serial_read_names_it(write_log, small_pieces, row):
    lines = good_lines(80)
    lines[row] = dict(lines[row], busy=-1.0)
    p = write_log(lines)
    with pytest.raises(LogError) as serial:
        summarize_log(p)
    with pytest.raises(LogError) as got:
        summarize_file(p, workers=3)
    assert str(got.value) == str(serial.value) and got.value.line == row + 1


def test_a_line_too_long_across_a_cut_is_refused_as_in_the_serial_read(write_log, small_pieces):
    lines = good_lines(80)
    lines[60] = dict(lines[60], msg="x" * 3000)
    p = write_log(lines)
    with pytest.raises(LogError) as serial:
        summarize_log(p, max_line_bytes=2000)
    with pytest.raises(LogError) as got:
        summarize_file(p, workers=3, max_line_bytes=2000)
    assert str(got.value) == str(serial.value)


def test_a_cut_last_line_warns_once_with_the_files_line_number(write_log, small_pieces):
    lines = good_lines(80)
    raw = "".join(json.dumps(ln) + "\n" for ln in lines).encode() + b'{"ev": "step", "t": 99'
    p = write_log([], raw=raw)
    with pytest.warns(LogWarning) as serial_notes:
        serial = summarize_log(p)
    with pytest.warns(LogWarning) as notes:
        got = summarize_file(p, workers=3)
    assert [str(w.message) for w in notes] == [str(w.message) for w in serial_notes]
    assert f":{len(lines) + 1}: last line is incomplete" in str(notes[0].message)
    assert _same(got, serial)


def test_a_complete_last_line_without_a_newline_is_a_line(write_log, small_pieces):
    lines = good_lines(80)
    raw = "".join(json.dumps(ln) + "\n" for ln in lines).encode() + json.dumps(step(99.0)).encode()
    p = write_log([], raw=raw)
    serial = summarize_log(p)
    got = summarize_file(p, workers=3)
    assert _same(got, serial) and got.n_lines == len(lines) + 1


def test_unknown_fields_are_counted_as_in_the_serial_read(write_log, small_pieces):
    lines = good_lines(80)
    for ev in lines[1:-1]:
        ev["blokced"] = 0.0
    p = write_log(lines)
    serial = summarize_log(p)
    got = summarize_file(p, workers=3)
    assert got.unknown_fields == serial.unknown_fields and got.unknown_fields["step.blokced"] == 160
    assert _same(got, serial)


def test_small_gzip_and_summary_files_are_read_here(write_log, tmp_path, small_pieces, monkeypatch):
    p = write_log(good_lines(80))
    assert plan_piece_workers(p, 4) == 4
    gz = tmp_path / "log.jsonl.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    out = tmp_path / "s.json"
    summarize_log(p).write(out)
    assert plan_piece_workers(gz, 4) == plan_piece_workers(out, 4) == 1
    assert plan_piece_workers(tmp_path, 4) == plan_piece_workers(tmp_path / "none", 4) == 1
    assert plan_piece_workers(p, 1) == 1                          # fewer cores than MIN_WORKERS
    monkeypatch.setattr(pieces, "SPLIT_MIN_BYTES", p.stat().st_size + 1)
    assert plan_piece_workers(p, 4) == 1
    assert _same(summarize_file(gz, workers=4), summarize_log(gz))


def test_a_librarys_warning_in_a_piece_is_given_here_and_the_piece_kept(synth, small_pieces, monkeypatch):
    """A warning that is not the log's (numpy, pandas: a deprecation) does not send the file to
    the serial read: it is given here, where this process's filters judge it."""
    import warnings
    real = stream._add_parsed

    def noisy(summ, p, header):
        warnings.warn("a library changes its mind", FutureWarning)
        return real(summ, p, header)
    monkeypatch.setattr(stream, "_add_parsed", noisy)
    with pytest.warns(FutureWarning, match="changes its mind"):
        serial = summarize_log(synth)                    # (the serial read gives it too)
    monkeypatch.setattr(pieces, "summarize_log", lambda *a, **k: pytest.fail("read again here"))
    with pytest.warns(FutureWarning, match="changes its mind"):
        got = summarize_file(synth, workers=3)
    assert _same(got, serial)


def test_reading_workers_go_without_pandas_and_still_read(synth):
    """pyarrow would import pandas in each worker at its first conversion (0.2 s each, for
    nothing): a worker of a process without pandas reads its piece without it, and no piece
    falls back to a read here."""
    code = f"""
import sys
from advisor.ingest import pieces, stream
ex = pieces.reader_pool(1)
got = ex.submit(pieces._worker_piece, {str(synth)!r}, 0, 0, stream.PieceGeometry.now(), 1 << 20, 1000).result()
print(got[0] is not None, ex.submit(eval, "'pandas' in __import__('sys').modules").result(),
      "pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["True", "False", "False"], out.stderr
