"""Contention across splits (advisor.fit.splits): who shares compute, by the header or, where the
header is silent, by a large within-log slope; what that carries into the projection's interval."""
from __future__ import annotations

import gzip
import json
import math
import warnings
from pathlib import Path

import pytest

from advisor.errors import AssumptionWarning
from advisor.fit.pipeline import fit_logs
from advisor.fit.splits import WITHIN_SHARED_SLOPE, declares_device, shares_compute, within_sharing
from advisor.ingest.load import load_log
from advisor.model.priors import CONTENTION_PRIOR_SE, RUN_SE

SWEEP = Path(__file__).resolve().parents[2] / "fixtures" / "sweep"


def _with_header(tmp_path, src: str, drop=(), **set_) -> Path:
    lines = gzip.open(SWEEP / src, "rt").read().splitlines()
    head = json.loads(lines[0])
    for k in drop:
        head.pop(k, None)
    head.update(set_)
    out = tmp_path / "log.jsonl"
    out.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    return out


def _fit(path):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        fit = fit_logs([load_log(path)])
    return fit, [str(w.message) for w in got if issubclass(w.category, AssumptionWarning)]


def test_a_silent_header_and_a_large_within_log_slope_count_as_shared_compute(tmp_path):
    """cpu16-3x3-r0: a drafter's step +6.0% per busy drafter inside the log. Without `device` in
    the header it is fitted as a shared host's: the prior, the run-to-run term, and the drafters'
    own slope in their interval (before: no prior, an interval of sampling noise only)."""
    p = _with_header(tmp_path, "cpu16/cpu16-3x3-r0.jsonl.gz", drop=("device", "physical_gpus"))
    lg = load_log(p)
    assert not declares_device(lg) and not shares_compute(lg)
    fit, texts = _fit(p)
    c = fit.contention
    shown, text = within_sharing(lg, c.within)
    assert shown == c.shown_slope == c.within.consumer.per_consumer >= WITHIN_SHARED_SLOPE
    assert "a drafter's step +6.0% per extra busy drafter" in text
    assert c.prior_se == CONTENTION_PRIOR_SE and c.run_se == RUN_SE
    # both roles carry the slope per worker moved (before: no prior, sampling noise only)
    assert c.role_prior_se() == pytest.approx((math.hypot(CONTENTION_PRIOR_SE, shown),) * 2)
    assert any("does not say where the workers ran" in t and text in t for t in texts)


def test_a_header_that_declares_dedicated_gpus_is_believed(tmp_path):
    p = _with_header(tmp_path, "cpu16/cpu16-3x3-r0.jsonl.gz", device="cuda", physical_gpus=6)
    fit, texts = _fit(p)
    assert fit.contention.prior_se == 0.0 and fit.contention.run_se == 0.0
    assert not any("does not say where the workers ran" in t for t in texts)


def test_a_silent_header_with_a_small_slope_stays_dedicated(tmp_path):
    """cpu32-6x2-r0: +1.6% per busy target inside the log, below WITHIN_SHARED_SLOPE."""
    p = _with_header(tmp_path, "cpu32/cpu32-6x2-r0.jsonl.gz", drop=("device", "physical_gpus"))
    fit, _ = _fit(p)
    assert within_sharing(load_log(p), fit.contention.within) == (0.0, "")
    assert fit.contention.prior_se == 0.0 and fit.contention.shown_slope == 0.0
