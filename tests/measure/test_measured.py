"""measure_logs: each log measured once, into the record the fit takes."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.errors import LogError
from advisor.fit.pipeline import fit_logs, fit_pipeline
from advisor.ingest.load import load_log
from advisor.measure.measured import measure_logs
from advisor.measure.observe import observe, steady_steps
from advisor.measure.steady import find_steady

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "fixtures" / "reference-7x1.jsonl"
RATES = ROOT / "fixtures" / "reference-7x1-rates.jsonl"


@pytest.fixture(scope="module")
def ref():
    return load_log(REF)


def test_a_step_log_is_measured_as_its_parts(ref):
    m = measure_logs([ref])
    (ml,) = m.logs
    win = find_steady(ref)
    assert ml.window == win
    assert ml.observed == observe(ref, win)
    st = steady_steps(ref, win)
    for role in ("target", "drafter"):
        assert len(ml.steps[role]) == int((st["role"] == role).sum()) > 0
        assert (ml.steps[role]["role"] == role).all()
    assert m.with_steps == [0] and not m.logs[0].log.sampled
    assert m.within is not None  # the first step log's within-log contention
    sums = ml.sums["drafter"]  # the window's sums, off the steps where the log is not sampled
    assert sums["n"] == len(ml.steps["drafter"]) and ml.sync_count == len(ml.syncs)
    assert ml.pre_mean_depth is None or ml.pre_mean_depth >= 0


def test_the_fit_takes_the_measurement(ref):
    assert fit_pipeline(measure_logs([ref])) == fit_logs([ref])


def test_rates_only_tokens_per_second_is_filled_by_the_fit():
    lg = load_log(RATES)
    m = measure_logs([lg])
    assert m.with_steps == [] and m.within is None
    ob = m.logs[0].observed
    unmeasured = replace(ob, tok_s=math.nan)
    assert unmeasured.with_tokens(1000.0).tok_s == pytest.approx(ob.bps * 1000.0)
    assert not math.isnan(ob.tok_s) and ob.with_tokens(1000.0) is ob  # a measured tok_s is kept


def test_logs_of_another_job_are_refused(ref, tmp_path):
    other = tmp_path / "other.jsonl"
    text = REF.read_text().replace('"drafter"', '"student"')
    other.write_text(text)
    with pytest.raises(LogError, match="roles"):
        measure_logs([ref, load_log(other)])
    with pytest.raises(LogError, match="no log"):
        measure_logs([])
