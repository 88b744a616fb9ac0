"""Contention across splits (advisor.fit.splits): who shares compute, by the header or, where the
header is silent, by a large within-log slope; what that carries into the projection's interval."""

from __future__ import annotations

import gzip
import json
import math
import warnings
from pathlib import Path

import pytest
from conftest import HEADER, good_lines
from synth import SharedCores, shared_cores_log

from advisor.advice import advise
from advisor.errors import AssumptionWarning
from advisor.fit.pipeline import fit_logs
from advisor.fit.splits import (
    WITHIN_SHARED_SLOPE,
    declares_device,
    oversubscription,
    shared_prior_se,
    shares_compute,
    within_sharing,
)
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
    """Two targets and a drafter on two cores (processor sharing), no `device` in the header: the
    2-1 log shows a drafter's step slowing per busy target, so it is fitted as a shared host's and
    both roles carry that slope per worker moved: the 1-2 interval covers the measured 1-2 run
    (before: 7.10 b/s, 6.91-7.29, against 9.80 measured; benchmarks/shared_cores.py)."""
    p = shared_cores_log(tmp_path / "2x1.jsonl", 2, 1, SharedCores(seconds=60.0, seed=2))
    lg = load_log(p)
    assert not declares_device(lg) and not shares_compute(lg)
    fit, texts = _fit(p)
    c = fit.contention
    shown, text = within_sharing(lg, c.within)
    assert shown == c.shown_slope >= WITHIN_SHARED_SLOPE
    assert "a drafter's step +" in text and "per extra busy target" in text
    assert c.prior_se == CONTENTION_PRIOR_SE and c.run_se == RUN_SE
    assert c.role_se == pytest.approx((math.hypot(CONTENTION_PRIOR_SE, shown),) * 2)
    assert any("does not say where the workers ran" in t and text in t for t in texts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = advise([p]).split_row({"target": 1, "drafter": 2})
        truth = advise([shared_cores_log(tmp_path / "1x2.jsonl", 1, 2, SharedCores(seconds=60.0, seed=1))]).observed.bps
    assert row["bps_low"] <= truth <= row["bps_high"]


def test_a_slope_barely_beyond_its_half_width_does_not_count(tmp_path):
    """cpu16-3x3-r0 without `device`: a drafter's step +6.0% +-4.2% per busy drafter is beyond its
    half-width but its low end is under WITHIN_SHARED_SLOPE: no sharing is claimed from it."""
    p = _with_header(tmp_path, "cpu16/cpu16-3x3-r0.jsonl.gz", drop=("device", "physical_gpus"))
    fit, texts = _fit(p)
    assert within_sharing(load_log(p), fit.contention.within) == (0.0, "")
    assert fit.contention.prior_se == 0.0 and not any("does not say" in t for t in texts)


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


OVERSUB = SWEEP.parent / "oversub2"


@pytest.mark.parametrize(
    "cores, device, over",
    [
        (2, "cpu", (3, 2)),
        (2, None, (3, 2)),
        (2, "cuda", None),
        (3, "cpu", None),
        (16, "cpu", None),
        (None, "cpu", None),
    ],
)
def test_cores_below_the_workers_mark_the_host_oversubscribed(write_log, cores, device, over):
    lines = good_lines()  # 2 targets and a drafter
    lines[0] = {**HEADER, **({"cores": cores} if cores else {}), **({"device": device} if device else {})}
    lg = load_log(write_log(lines))
    assert oversubscription(lg) == over
    assert shared_prior_se(lg) == (pytest.approx(math.log(1.5)) if over else CONTENTION_PRIOR_SE)
    assert shares_compute(lg) == (device == "cpu" or over is not None)


@pytest.mark.parametrize("given, other", [("1x2-r0", "2x1"), ("1x2-r1", "2x1"), ("2x1-r0", "1x2"), ("2x1-r1", "1x2")])
def test_one_split_on_an_oversubscribed_host_covers_the_other_split_measured(given, other):
    """3 real workers (examples/instrumented_loop.py) on this 2-core host, header ``cores: 2``: from
    either split the other's interval covers both repeats measured there. Before (the sweeps'
    4.5% per worker moved), from 1-2 the 2-1 interval was 35.9-63.2 b/s against 67.39 and 66.92
    measured (BENCHMARKS.md section 18)."""
    adv = advise([OVERSUB / given])
    assert any("3 workers ran on 2 CPU cores (header 'cores')" in t and "ln(3/2)" in t for t in adv.warnings)
    n_t, n_d = (int(x) for x in other.split("x"))
    row = adv.split_row({"target": n_t, "drafter": n_d})
    truths = [advise([OVERSUB / f"{other}-r{r}"]).observed.bps for r in (0, 1)]
    assert all(row["bps_low"] <= t <= row["bps_high"] for t in truths), (row["bps_low"], row["bps_high"], truths)
    assert adv.fit.contention.prior_se == pytest.approx(math.log(1.5))


def test_tensor_parallel_splits_of_one_g_carry_the_split_prior():
    # TP-2 targets: 2-10, 3-8 and 6-2 all hold 14 GPUs though their engine totals differ (12, 11,
    # 8); the contention fit counts GPUs, so every split away from the logged one carries the
    # prior per producer engine moved, and the interval widens with the distance
    tp = SWEEP / "tp2g14" / "tp2g14-2x10-tp2-tb2048-r4.jsonl.gz"
    with warnings.catch_warnings(record=True) as rec:  # the fit's caveats, the prior it carries among them
        warnings.simplefilter("always")
        cont = fit_logs([load_log(tp)]).contention
    assert any(isinstance(w.message, AssumptionWarning) and "one split was logged" in str(w.message) for w in rec)
    assert (cont.gpus, cont.ref_producers, cont.gpus_per_worker) == (14, 2, (2, 1))
    assert cont.consumers(3, 14) == 8 and cont.gpus_of(6, 2) == 14
    assert cont.rel_se(3, 14) == pytest.approx((CONTENTION_PRIOR_SE, CONTENTION_PRIOR_SE))
    assert cont.rel_se(6, 14) == pytest.approx((4 * CONTENTION_PRIOR_SE, 4 * CONTENTION_PRIOR_SE))
    assert cont.scale(4, 14)[0] > 1.0  # the prior's centre: a producer's step grows with producers added
    rows = advise(tp).rows
    width = {k: math.log(r.bps_high / r.bps_low) for k, r in rows.items()}
    assert width["4-6"] < width["5-4"] < width["6-2"] and width["2-10"] < width["1-12"]  # (one bottleneck each)


def test_bare_numbers_of_tensor_parallel_engines_count_each_role_by_its_engines():
    # what-if of 2 TP-2 targets and 6 drafters (10 GPUs): at 3-4 one target engine is added and
    # two drafters are removed, and the GPU priors widen each role by its own count
    from advisor.fit.pipeline import fit_from_numbers
    from advisor.model.priors import GPU_SPLIT_SE_CONSUMER, GPU_SPLIT_SE_PRODUCER
    from advisor.settings import Options

    cont = fit_from_numbers(
        {"target": 2, "drafter": 6}, {"target": 5.0, "drafter": 6.0}, Options(gpus_per_worker="target=2")
    ).contention
    assert (cont.gpus, cont.gpus_per_worker) == (10, (2, 1))
    assert cont.rel_se(3, 10) == pytest.approx((GPU_SPLIT_SE_PRODUCER, 2 * GPU_SPLIT_SE_CONSUMER))
    assert cont.rel_se(1, 10) == pytest.approx((GPU_SPLIT_SE_PRODUCER, 2 * GPU_SPLIT_SE_CONSUMER))
