"""Write the seed corpus ``fuzz/corpus/<target>/`` from the fixtures, plus hostile cases.

    python3 -m fuzz.make_corpus

Deterministic (gzip mtime 0, no randomness), small (under 2 MB in all: logs are cut to their
first lines and their end). Each seed's first byte is the target's mode (`fuzz.targets`). The
hostile cases: other encodings (UTF-16, a BOM, Latin-1), a gzip bomb, NaN/Infinity/huge numbers,
duplicate headers and keys, concatenated runs, torn and CRLF lines, deep nesting; for the gate,
typos and wrong types; for event files, bad CRCs, truncation and wire types that do not match.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import shutil
import struct
from pathlib import Path

from fuzz.targets import ARG_SEP, CORPUS, FRAME_SEP, RANK_SEP, ROOT, TARGETS

FIX = ROOT / "fixtures"
HEAD_LINES = 120  # steps enough for a steady window in the small fixtures' cut


def _cut(path: Path, n: int = HEAD_LINES) -> bytes:
    lines = path.read_bytes().splitlines(keepends=True)
    tail = [ln for ln in lines[n:] if b'"ev":"end"' in ln]
    return b"".join(lines[:n] + tail)


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _log_seeds() -> dict[str, bytes]:
    small = _cut(FIX / "cpu-2x1.jsonl")
    sync = _cut(FIX / "h200-1x2.jsonl")
    rates_only = _cut(FIX / "reference-7x1-rates.jsonl", 60)
    head, body = _lines(small)[0], _lines(small)[1:]
    ranks = [head + b"".join(ln for ln in body if b'"role":"target","worker":%d' % w in ln) for w in (0, 1)]
    ranks.append(head + b"".join(ln for ln in body if b'"role":"target"' not in ln))
    hdr = json.loads(head)
    nan = small.replace(b'"busy":0.150824', b'"busy":NaN').replace(b'"tokens":1886', b'"tokens":1e999')
    huge = small.replace(b'"worker":1', b'"worker":18446744073709551617', 3).replace(b'"t":0.0', b'"t":-0.0')
    seeds = {
        "plain": b"\x00" + small,
        "advise": b"\x04" + small,
        "advise-sync": b"\x04" + sync,
        "rates-only": b"\x04" + rates_only,
        "gzip": b"\x01" + small,
        "gzip-raw": b"\x01" + gzip.compress(small, mtime=0),
        "gzip-torn": b"\x01" + gzip.compress(small, mtime=0)[:-300],
        "gzip-bomb": b"\x01" + gzip.compress(head + b" " * (24 << 20), 9, mtime=0),
        "gzip-concat": b"\x01" + gzip.compress(small[:4000], mtime=0) + gzip.compress(small[4000:], mtime=0),
        "folder": b"\x06" + RANK_SEP.join(ranks),
        "files": b"\x07" + RANK_SEP.join(ranks),
        "folder-mixed": b"\x02" + RANK_SEP.join([ranks[0], ranks[1].replace(b'"gpus":3', b'"gpus":4')]),
        "utf16": b"\x00" + small[:3000].decode().encode("utf-16"),
        "bom": b"\x04" + b"\xef\xbb\xbf" + small,
        "latin1": b"\x00" + small.replace(b"cpu-tiny-2x1", "cpu-tïny-\xff".encode("latin-1")),
        "nan-huge": b"\x04" + nan,
        "huge-ints": b"\x04" + huge,
        "dup-header": b"\x04" + head + small,
        "concat-runs": b"\x04" + small + sync,
        "torn": b"\x04" + small[:-25],
        "crlf": b"\x04" + small.replace(b"\n", b"\r\n"),
        "dup-keys": b"\x00" + small.replace(b'{"ev":"step",', b'{"ev":"step","t":1e308,', 5),
        "deep": b"\x00" + head + b'{"ev":"step","x":' + b"[" * 5000 + b"]" * 5000 + b"}\n",
        "empty": b"\x00",
        "header-only": b"\x04" + head,
        "one-role": b"\x00" + json.dumps({**hdr, "roles": {"target": 2}}).encode() + b"\n" + b"".join(body[:50]),
        "blank-lines": b"\x04" + small.replace(b"\n", b"\n\n   \n", 40),
        "nul-bytes": b"\x00" + small[:2000] + b"\x00" * 64 + small[2000:],
    }
    return seeds


def _summary_seeds() -> dict[str, bytes]:
    """Patches laid over the base summary (`fuzz.targets.summary_bytes`), and a few whole files."""
    arr = {"dtype": "<f8", "shape": [2], "b64": base64.b64encode(struct.pack("<2d", math.nan, 1e308)).decode()}
    patches = {
        "base": {},
        "base-merge": {},
        "rows-negative": {"sample_rows": -5},
        "rows-zero": {"sample_rows": 0},
        "future": {"dflash_summary": 99},
        "tmax-nan": {"t_max_s": "NaN"},
        "tmax-huge": {"t_max_s": 1e308},
        "lines-negative": {"n_lines": -1},
        "bins-level": {"bins": {"level": 10**6}},
        "bins-shape": {"bins": {"data": {"shape": [2, 3]}}},
        "counts-short": {"counts": {"target": [1, 2]}},
        "sample-nan": {"samples": {"target": {"t": arr}}},
        "sync-dtype": {"syncs": {"keys": {"dtype": "|O"}}},
        "end-odd": {"end": {"ev": "end", "t": "x", "reason": 7}},
        "unknown-odd": {"unknown_events": {"x": "y"}},
        "header-one-role": {"header": {"roles": {"target": 2}}},
        "paths-many": {"paths": ["a"] * 50},
        "rates-odd": {"rates": {"t": arr}},
    }
    out = {
        k: (b"\x01" if k.endswith("-merge") or k.startswith("rows") else b"\x00") + json.dumps(v).encode()
        for k, v in patches.items()
    }
    out["raw-truncated"] = b"\x02" + b'{"dflash_summary":1,"header":{"ev":"run"'
    out["raw-not-json"] = b"\x02" + b'{"dflash_summary" 1}'
    out["raw-deep"] = b"\x02" + b'{"dflash_summary":1,"header":' + b"[" * 3000 + b"]" * 3000 + b"}"
    return out


def _check_seeds() -> dict[str, bytes]:
    good = (
        'profile = ["run.jsonl"]\ngpus = 3\n[roles]\ntarget = 2\ndrafter = 1\n[queues]\nhs = 20\n'
        '[gate]\nmin_efficiency = 0.5\nmetric = "efficiency"\n'
    )
    return {
        k: v.encode() if isinstance(v, str) else v
        for k, v in {
            "good": good,
            "gpu-util": 'profile = "run.jsonl"\n[gate]\nmetric = "gpu_util"\nmin_gpu_util = 0.99\n',
            "bare": 'profile = ["run.jsonl"]\n',
            "typo-table": good.replace("[roles]", "[role]"),
            "typo-key": good.replace("min_efficiency", "min_efficency"),
            "other-metric": good + "min_gpu_util = 0.3\n",
            "types": 'profile = ["run.jsonl"]\ngpus = "8"\n[roles]\ntarget = 2.5\ndrafter = true\n',
            "huge": 'profile = ["run.jsonl"]\ngpus = 99999999999999999999\n[gate]\nmin_efficiency = nan\n',
            "inf": 'profile = ["run.jsonl"]\n[gate]\nmin_efficiency = inf\n',
            "dup-key": good + "gpus = 4\n",
            "dotted": 'profile = ["run.jsonl"]\nroles.target = 1\nroles.drafter = 2\ngate.min_efficiency = 0.1\n',
            "inline": 'profile = ["run.jsonl"]\nroles = {target = 2, drafter = 1, extra = 1}\n',
            "missing-profile": 'profile = ["nope.jsonl"]\n',
            "profile-dir": 'profile = ["."]\n',
            "profile-empty": "profile = []\n",
            "not-utf8": b'profile = ["run.jsonl"]\n# \xff\xfe\n',
            "utf16": good.encode("utf-16"),
            "deep": "x = " + "[" * 3000 + "]" * 3000 + "\n",
            "crlf": good.replace("\n", "\r\n"),
            "roles-sum": good.replace("gpus = 3", "gpus = 8"),
            "hs-big": good.replace("hs = 20", "hs = 1000000000"),
        }.items()
    }


def _varint(n: int) -> bytes:
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([b])
        out += bytes([b | 0x80])


def _field(num: int, wt: int, v: bytes | int) -> bytes:
    key = _varint(num << 3 | wt)
    if wt == 0:
        return key + _varint(int(v))
    return key + (_varint(len(v)) + v if wt == 2 else v)


def event(tag: bytes, value: bytes, wall: float = 1.0, step: int = 1) -> bytes:
    """A TensorBoard Event payload with one Summary.Value: ``value`` is its field bytes after the tag."""
    summary = _field(1, 2, _field(1, 2, tag) + value)
    return _field(1, 1, struct.pack("<d", wall)) + _field(2, 0, step) + _field(5, 2, summary)


def _tb_hostile() -> dict[str, bytes]:
    """Events with a value field of the wrong wire type, odd floats and walls (framed)."""
    bps = b"pipeline/target_bps"
    other = event(b"pipeline/drafter_bps", _field(2, 5, struct.pack("<f", 0.9)))
    cases = {
        "tensor-varint-float": _field(8, 2, _field(1, 0, 1) + _field(5, 0, 3)),
        "tensor-fixed64-int": _field(8, 2, _field(1, 0, 3) + _field(7, 1, b"\x01" * 8)),
        "tensor-packed-odd": _field(8, 2, _field(1, 0, 1) + _field(5, 2, b"\x01" * 6)),
        "tensor-shape-2": _field(
            8, 2, _field(1, 0, 1) + _field(2, 2, _field(2, 2, _field(1, 0, 2))) + _field(5, 2, b"\x00" * 8)
        ),
        "simple-nan": _field(2, 5, struct.pack("<f", math.nan)),
        "simple-inf": _field(2, 5, struct.pack("<f", math.inf)),
    }
    out = {name: b"\x00" + FRAME_SEP.join([event(bps, v), other]) for name, v in cases.items()}
    good = _field(2, 5, struct.pack("<f", 0.8))
    out["wall-nan"] = b"\x00" + FRAME_SEP.join([event(bps, good, wall=math.nan), other])
    out["wall-huge"] = b"\x00" + FRAME_SEP.join([event(bps, good, wall=1e308), event(bps, good, -1e308, 2), other])
    out["step-negative"] = b"\x00" + FRAME_SEP.join([event(bps, good, step=2**64 - 1), other])
    return out


def _tb_seeds() -> dict[str, bytes]:
    raw = (FIX / "tensorboard" / "events.out.tfevents.reference-7x1").read_bytes()
    payloads, pos = [], 0
    while pos + 12 <= len(raw):
        (n,) = struct.unpack("<Q", raw[pos : pos + 8])
        payloads.append(raw[pos + 12 : pos + 12 + n])
        pos += 12 + n + 4
    framed = FRAME_SEP.join(payloads[:80])
    return {
        "file": b"\x01" + raw,
        "framed": b"\x00" + framed,
        "file-torn": b"\x01" + raw[:-7],
        "file-badcrc": b"\x01" + raw[:40] + b"\x00" + raw[41:],
        "framed-few": b"\x00" + FRAME_SEP.join(payloads[:6]),
        "framed-garbage": b"\x00"
        + FRAME_SEP.join(
            [payloads[0], b"\x0d\x00\x00\x00", b"\x2a\x05\x0a\x03abc", b"\x08" + b"\xff" * 11, payloads[3]]
        ),
        "empty": b"\x01",
        **_tb_hostile(),
    }


def _what_if_seeds() -> dict[str, bytes]:
    base = "--targets 7 --drafters 1 --target-bps 0.92 --drafter-bps 0.86"
    return {
        k: v.encode("utf-8", "surrogateescape")
        for k, v in {
            "readme": base,
            "json": base + " --json",
            "markdown": base + " --markdown --next-run",
            "full": base + " --hs-cap 20 --tokens-per-batch 32768 --scv 0.2 --sync-every 10 --sync-s 0.5 --gpus 8",
            "nan": base.replace("0.92", "nan"),
            "inf": base.replace("0.86", "inf") + " --scv inf",
            "huge": base.replace("7", "99999999999999999999") + " --gpus 100000",
            "zero": base.replace("0.92", "0") + " --hs-cap 0",
            "tiny": base.replace("0.92", "1e-320").replace("0.86", "5e-324"),
            "neg": base + " --sync-s -1",
            "dup": base + " --targets 3 --format json --json",
            "nul": ARG_SEP.decode().join(base.split() + ["--format", "markdown"]),
            "unicode": base.replace("0.92", "\uff10.92"),
            "bad-format": base + " --format xml",
            "help": "--help",
            "empty": "",
        }.items()
    }


def main() -> None:
    logs = _log_seeds()
    seeds = {
        "log": logs,
        "summary": _summary_seeds(),
        "check": _check_seeds(),
        "tb": _tb_seeds(),
        "what_if": _what_if_seeds(),
    }
    assert set(seeds) == set(TARGETS), set(TARGETS) ^ set(seeds)
    total = 0
    for target, files in seeds.items():
        folder = CORPUS / target
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
            total += len(data)
    print(f"wrote {sum(map(len, seeds.values()))} seeds, {total / 2**20:.2f} MiB, under {CORPUS}")


if __name__ == "__main__":
    main()
