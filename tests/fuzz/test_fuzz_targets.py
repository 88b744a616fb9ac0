"""The fuzz corpus replayed through every target, without atheris (fuzz/targets.py).

Each corpus file (seeds, hostile cases, and the inputs of every crash fuzzing found, kept as
regression inputs) must meet its surface's contract: a usable result, or a one-line refusal
naming the input. The targets bound each input's time themselves (`PER_INPUT_S`).
"""

from __future__ import annotations

import resource

import pytest

from fuzz.targets import OK, REFUSED, RSS_LIMIT_MB, TARGETS, ContractBroken, check_cli, corpus_files, replay

# seeds whose outcome is known: the fixtures' cuts are usable, the hostile ones refused
EXPECTED = {
    "log": {
        "plain": OK,
        "advise": OK,
        "gzip": OK,
        "folder": OK,
        "files": OK,
        "crlf": OK,
        "utf16": REFUSED,
        "gzip-bomb": REFUSED,
        "empty": REFUSED,
        "folder-mixed": REFUSED,
    },
    "summary": {"base": OK, "base-merge": OK, "future": REFUSED, "rows-zero": REFUSED, "sample-nan": REFUSED},
    "check": {"good": OK, "bare": OK, "typo-key": REFUSED, "typo-table": REFUSED, "not-utf8": REFUSED},
    "tb": {"file": OK, "framed": OK, "file-badcrc": REFUSED, "tensor-varint-float": REFUSED},
    "what_if": {"readme": OK, "json": OK, "tiny": REFUSED, "nan": REFUSED, "bad-format": REFUSED},
}
# the inputs of the crashes device fuzzing found (BENCHMARKS.md section 14), kept under their
# libFuzzer names: each is now a refusal in one line (control characters in echoed names escaped,
# a summary's end checked, import-tb refusing a wall time past the reader's limit)
CRASHES = {"log": 1, "summary": 3, "tb": 34}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_corpus_meets_the_contract(target):
    assert len(corpus_files(target)) >= 5, f"fuzz/corpus/{target}: run python3 -m fuzz.make_corpus"
    got = replay(target)
    assert {k: got[k] for k in EXPECTED[target]} == EXPECTED[target]
    assert set(got.values()) == {OK, REFUSED}
    crashes = {k: v for k, v in got.items() if k.startswith("crash-")}
    assert len(crashes) == CRASHES.get(target, 0) and set(crashes.values()) <= {REFUSED}
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 < RSS_LIMIT_MB


def test_corpus_is_small():
    assert sum(p.stat().st_size for t in TARGETS for p in corpus_files(t)) < 2 << 20


@pytest.mark.parametrize(
    "code, out, err",
    [
        (2, "", "Traceback (most recent call last):\n  ...\nKeyError: 'x'\n"),
        (2, "", "dflash-advise: internal error while reading a.jsonl: KeyError: 'x' (a bug in dflash-advise)\n"),
        (2, "", "dflash-advise: a.jsonl:3: bad\ndflash-advise: a.jsonl:4: bad\n"),
        (2, "", "a.py:3: UserWarning: odd\n  warnings.warn(x)\ndflash-advise: a.jsonl: bad\n"),
        (1, "FAIL", ""),
        (0, "", ""),
    ],
)
def test_the_cli_contract_check_can_fail(code, out, err):
    with pytest.raises(ContractBroken):
        check_cli(code, out, err)


def test_the_cli_contract_check_passes_a_refusal_and_a_report():
    check_cli(
        2, "", "dflash-advise: warning: a.tfevents: last record cut\ndflash-advise: a.tfevents: holds no events\n"
    )
    check_cli(0, "report\n", "")
