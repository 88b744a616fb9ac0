"""Byte guards (advisor.ingest.reader): size, line and gzip-ratio limits, special files, OS errors.

Each is a bounded read.
"""

from __future__ import annotations

import gzip
import json
import os
import signal

import pytest
from conftest import good_lines

from advisor.errors import LogError, LogRefused
from advisor.ingest.load import load_log


def test_size_and_line_limits_name_the_numbers(write_log):
    p = write_log(good_lines(50))
    with pytest.raises(LogRefused, match="more than 1000 bytes"):
        load_log(p, max_bytes=1000)
    with pytest.raises(LogRefused, match="more than 20 lines"):
        load_log(p, max_lines=20)


def test_gzip_bomb_fails_after_a_bounded_read(tmp_path):
    import advisor.ingest.reader as reader

    p = tmp_path / "bomb.jsonl.gz"
    line = b'{"ev": "x", "t": 1}\n'
    p.write_bytes(gzip.compress(line * ((reader.RATIO_CHECK_BYTES + 2 * reader.CHUNK_BYTES) // len(line))))
    with pytest.raises(LogRefused, match="compression bomb"):
        load_log(p)


def test_gzip_corrupt_mid_stream(tmp_path):
    data = bytearray(gzip.compress("".join(json.dumps(l) + "\n" for l in good_lines(200)).encode()))
    data[len(data) // 2] ^= 0xFF
    p = tmp_path / "c.jsonl.gz"
    p.write_bytes(bytes(data))
    with pytest.raises(LogError, match="gzip"):
        load_log(p)


def test_gzip_recognised_by_content(tmp_path):
    p = tmp_path / "plain-name.jsonl"
    p.write_bytes(gzip.compress("".join(json.dumps(l) + "\n" for l in good_lines(10)).encode()))
    assert len(load_log(p).steps) == 20


def test_fifo_is_refused_without_opening_it(tmp_path):
    p = tmp_path / "pipe.jsonl"
    os.mkfifo(p)
    signal.alarm(20)  # a regression would block in open(); fail instead of hanging the suite
    try:
        with pytest.raises(LogRefused, match="FIFO"):
            load_log(p)
    finally:
        signal.alarm(0)


@pytest.mark.skipif(not os.path.exists("/dev/urandom"), reason="no /dev/urandom")
def test_character_device_is_refused():
    with pytest.raises(LogRefused, match="character device"):
        load_log("/dev/urandom")


def test_unreadable_file_is_one_line(write_log, monkeypatch):
    """chmod 000 (simulated: the suite may run as root, which reads anything)."""
    import advisor.ingest.reader as reader

    p = write_log(good_lines(3))

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(reader.os, "open", denied)
    with pytest.raises(LogRefused, match="permission denied") as ei:
        load_log(p)
    assert str(ei.value) == f"{p}: cannot be read (permission denied)"


@pytest.mark.parametrize("frac", [0.5, 0.9])
def test_a_truncated_gzip_keeps_what_it_decodes(tmp_path, frac):
    """Half a .gz: the message says how many bytes and whole lines were decoded before the cut,
    and those lines are kept, as from the plain file cut at the same byte."""
    import warnings

    from advisor.errors import LogWarning

    raw = "".join(json.dumps(l) + "\n" for l in good_lines(400)).encode()
    gz = gzip.compress(raw, mtime=0)
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(gz[: int(len(gz) * frac)])
    with pytest.warns(LogWarning) as got:
        log = load_log(p)
    msg = next(str(w.message) for w in got if "gzip stream" in str(w.message))
    d = __import__("zlib").decompressobj(wbits=31).decompress(p.read_bytes())
    whole = d.count(b"\n")
    assert f"{len(d)} bytes decoded before the cut, {whole} whole lines; those lines are kept" in msg
    assert 0 < whole < 801 and log.n_lines == whole
    plain = tmp_path / "cut.jsonl"
    plain.write_bytes(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = load_log(plain)
    assert ref.steps.equals(log.steps)
