"""A small run of the validation harness (benchmarks/validate.py): the advisor, reading one
synthetic log, against exact simulation of every split of the true generator.

Three scenarios of the full set: the reference case (smooth, deep q_hs), bursty service with a
one-slot q_hs, and data-parallel drafters syncing every step. Known misses of the full set are
reported in benchmarks/VALIDATION.md, not asserted here.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def validate():
    return load_script("benchmarks/validate.py", "validate_harness")


@pytest.fixture(scope="module")
def results(validate):
    # in this process (jobs=1): earlier tests have started polars' thread pool here, and a forked
    # worker that reads a log would inherit its locks held and hang
    return {
        r.name: r for r in validate.validate(["ref-7x1", "bursty-hs1", "sync-k1"], jobs=1, truth_batches=20_000, reps=2)
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ref-7x1", "bursty-hs1", "sync-k1"])
def test_projection_error_within_bar(results, validate, name):
    r = results[name]
    assert r.error is None, r.error
    assert len(r.rows) == r.gpus - 1
    worst = max(r.rows, key=lambda row: abs(row["err_pct"]))
    assert abs(worst["err_pct"]) <= validate.ERROR_BAR_PCT, worst
    assert r.rec_shortfall_pct <= validate.REC_BAR_PCT, (r.recommended, r.best)


@pytest.mark.slow
def test_reference_case_verdict(results):
    r = results["ref-7x1"]
    assert r.recommended == (7, 1) and r.best == (7, 1)
    six_two = next(row for row in r.rows if (row["n_target"], row["n_drafter"]) == (6, 2))
    assert six_two["measured_bps"] == pytest.approx(0.79, abs=0.01)


@pytest.mark.slow
def test_harness_can_tell_a_bad_model(results, validate):
    # the naive bound, scored the same way, misses the bar where queueing or sync matter:
    # the harness is able to fail a model
    assert results["bursty-hs1"].max_abs_bound_err_pct > 3 * validate.ERROR_BAR_PCT
    assert results["sync-k1"].max_abs_bound_err_pct > 3 * validate.ERROR_BAR_PCT


def test_validate_reals_within_table_reads_each_logs_contention_fit():
    """benchmarks/validate_real.py's within-log table (BENCHMARKS 20.3) holds, per log, the flags of
    that log's own `WithinLogContention`, and where the fit identifies no slope the fixed point moves
    nothing: a refactor that drops or swaps them breaks the table, not the advisor."""
    from advisor.fit.pipeline import fit_logs
    from advisor.ingest.load import load_log

    vr = load_script("benchmarks/validate_real.py", "validate_real_within")
    rows = vr.within_table("qpre1g7", {(5, 2): 10.0, (4, 3): 10.0})
    folder = ROOT / "fixtures" / "sweep" / "qpre1g7"
    logs = {r["name"]: folder / (r["log"] + ".gz") for r in json.loads((folder / "sweep.json").read_text())["runs"]}
    assert rows and all(isinstance(r["d_confounded"], bool) and 0 <= r["d_starved_share"] <= 1 for r in rows)
    for row in rows:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            w = fit_logs([load_log(logs[row["log"]])]).contention.within
        assert row["d_confounded_d"] == w.consumer.confounded("consumer"), row["log"]
        assert row["d_confounded"] == w.consumer.confounded("producer"), row["log"]
        if not w.identified:  # no usable slope: scales of 1, the analytic projection unchanged
            assert row["worst_within"] == row["worst_analytic"], row["log"]
    lines = {ln.split(" | ")[0][2:]: ln for ln in vr.render_within("qpre1g7", rows).splitlines() if ln.startswith("| ")}
    for row in rows:  # the printed table marks a log's confounded slopes as its row says
        confounded = int(row["d_confounded_d"] and math.isfinite(row["d_se_d"]))
        confounded += int(row["d_confounded"] and math.isfinite(row["d_se_t"]))
        assert lines[row["log"]].count("(confounded)") == confounded, row["log"]
