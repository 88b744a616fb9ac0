"""The fuzz corpus replayed through every target, without atheris (fuzz/targets.py).

Each corpus file (seeds, hostile cases, and the inputs of every crash fuzzing found, kept as
regression inputs) must meet its surface's contract: a usable result, or a one-line refusal
naming the input. The targets bound each input's time themselves (`PER_INPUT_S`).
"""
from __future__ import annotations

import resource

import pytest

from fuzz.targets import RSS_LIMIT_MB, TARGETS, ContractBroken, check_cli, corpus_files


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_corpus_meets_the_contract(target):
    files = corpus_files(target)
    assert len(files) >= 5, f"fuzz/corpus/{target} holds {len(files)} seeds (run python3 -m fuzz.make_corpus)"
    for p in files:
        TARGETS[target](p.read_bytes())
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 < RSS_LIMIT_MB


def test_corpus_is_small():
    assert sum(p.stat().st_size for t in TARGETS for p in corpus_files(t)) < 2 << 20


@pytest.mark.parametrize("code, out, err", [
    (2, "", "Traceback (most recent call last):\n  ...\nKeyError: 'x'\n"),
    (2, "", "dflash-advise: internal error while reading a.jsonl: KeyError: 'x' (a bug in dflash-advise)\n"),
    (2, "", "dflash-advise: a.jsonl:3: bad\ndflash-advise: a.jsonl:4: bad\n"),
    (2, "", "a.py:3: UserWarning: odd\n  warnings.warn(x)\ndflash-advise: a.jsonl: bad\n"),
    (1, "FAIL", ""),
    (0, "", ""),
])
def test_the_cli_contract_check_can_fail(code, out, err):
    with pytest.raises(ContractBroken):
        check_cli(code, out, err)


def test_the_cli_contract_check_passes_a_refusal_and_a_report():
    check_cli(2, "", "dflash-advise: warning: a.tfevents: last record cut\ndflash-advise: a.tfevents: holds no events\n")
    check_cli(0, "report\n", "")
