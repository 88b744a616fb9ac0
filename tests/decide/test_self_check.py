"""Issue 51: one method for every contender, and a model that checks itself.

- the rows whose interval reaches the pick's lower end carry one method (the fixtures with step
  logs, and synthetic logs), or are marked where the simulation's caps left them analytic;
- the observed split's projection misses its measured rate by ``m``: every projection and the odds
  carry a model error of that size, anchored on the measured rate;
- where the observed split measured above the pick's projected upper end, the pick is not stated
  >= 0.5; the lead printed beside the odds comes from the same draws (no pick stated >= 0.975 whose
  95% lead over the runner-up reaches below -2%).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synth import Scenario, ServiceModel, TokenModel, write_log

from advisor.advice import Fitted, advise
from advisor.project.exact import CAPPED
from advisor.project.model_error import ModelError, split_u
from advisor.settings import Options
from tests.conftest import FIXTURES

TOKENS = TokenModel(1024, 1000.0, 0.02, 200)


def _qhs2_log(path, n: int, *, drafter_s: float = 0.5, scv: float = 0.002, n_batches: int = 2500):
    """The issue's shape, synthetic: G = 12, q_hs 2, drafters synced every 5 steps, near-constant
    steps. At 4-8 (the best split: 13.9 b/s measured) the analytic chain reads 11.6 b/s, 12% below its
    own best (5-7, 13.1 b/s simulated), so the old refinement (within 8% of the analytic best)
    simulated 5-7 and not 4-8, and picked 5-7 at 94% from 4-8's own log."""
    s = Scenario(
        name=f"qhs2-{n}x{12 - n}",
        n_target=n,
        n_drafter=12 - n,
        tokens=TOKENS,
        hs_cap=2,
        pre_cap=8,
        sync_every=5,
        sync_s=0.05,
        sync_scv=0.05,
        n_batches=n_batches,
        seed=7,
        target=ServiceModel.from_mean(0.25, TOKENS.mean, overhead_share=0.1, scv=scv),
        drafter=ServiceModel.from_mean(drafter_s, TOKENS.mean, overhead_share=0.1, scv=scv),
    )
    write_log(path, s)
    return path


def _one_method(adv) -> None:
    """The rows reaching the pick's lower end carry one method (capped rows marked as such)."""
    df, rec = adv.splits, adv.decision.recommended
    reach = df[df["bps_high"] >= df.at[rec, "bps_low"]]
    methods = set(reach["method"]) - {CAPPED}
    assert len(methods) <= 1, reach[["bps", "bps_low", "bps_high", "method"]]
    if CAPPED in set(reach["method"]):
        assert methods <= {"exact"} and any("method 'analytic-capped'" in w for w in adv.warnings)


def test_the_best_splits_own_log_is_projected_like_its_rival(tmp_path):
    """The issue's case through the CLI: from the best split's own log, the observed split is
    simulated like its neighbour, the projection meets its measured rate, and the pick is the split
    that measured best (before: 4-8 analytic at 11.55 b/s against 13.94 measured, NEXT RUN 5-7 at 94%)."""
    from typer.testing import CliRunner

    from advisor.cli.app import app

    log = _qhs2_log(tmp_path / "qhs2-4x8.jsonl", 4)
    r = CliRunner().invoke(app, ["advise", str(log), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    rows = {f"{s['roles']['target']}-{s['roles']['drafter']}": s for s in out["splits"]}
    obs, pick = rows["4-8"], out["recommendation"]["roles"]
    assert obs["method"] == rows["5-7"]["method"] == "exact"
    assert obs["bps"] == pytest.approx(obs["observed_bps"], rel=0.02)
    assert (pick["target"], pick["drafter"]) == (4, 8)


@pytest.mark.parametrize(
    "path",
    [
        "reference-7x1.jsonl",
        "h200-1x2.jsonl",
        "sweep/sync5g14/sync5g14-9x5-tb2048-r0.jsonl.gz",
        "sweep/sync2g12/sync2g12-6x6-tb1024-r0.jsonl.gz",
        "sweep/sync4g11",
        "sweep/sync3g14",
        "sweep/tp2g12",
        "sweep/g12tb1k/g12tb1k-9x3-tb1024-r0.jsonl.gz",
    ],
)
def test_no_two_contenders_carry_different_methods(path):
    p = FIXTURES / path
    if p.is_dir():  # a sweep: its first log
        p = sorted(p.glob("*.jsonl.gz"))[0]
    adv = advise(p)
    _check_odds(adv)  # one method, and odds that agree with the observation and the printed lead
    ob, label, rec = adv.observed, adv.decision.observed, adv.decision.recommended
    if ob.method is not None and adv.splits.at[label, "bps_high"] >= adv.splits.at[rec, "bps_low"]:
        assert ob.method == adv.splits.at[rec, "method"]  # the observed split is projected like its rivals


def test_model_error_is_anchored_on_the_measured_rate():
    """The error process conditioned on a miss: the observed split's error is the miss, with no spread;
    its neighbours keep part of it and spread up to sigma; the draws agree with the posterior."""
    n = np.arange(11, 0, -1)
    u = split_u(n, 12 - n)
    err = ModelError(sigma_log=0.05, anchor_u=(float(u[7]),), anchor_miss_log=(0.05,))
    mean, sd = err.posterior(u)
    assert mean[7] == pytest.approx(0.05) and sd[7] == pytest.approx(0.0, abs=1e-6)
    assert 0 < mean[6] < 0.05 and 0 < mean[8] < 0.05 and sd[0] == pytest.approx(0.05, rel=0.01)
    d = err.draw(np.random.default_rng(0), 20000, u)
    np.testing.assert_allclose(d[:, 7], 0.05, atol=1e-9)
    np.testing.assert_allclose(d.mean(axis=0), mean, atol=0.002)
    np.testing.assert_allclose(d.std(axis=0), sd, atol=0.002)


def test_a_miss_widens_every_row_and_is_said(tmp_path):
    """A model that misses its observation by m: the observed row's interval holds the measured rate,
    the odds draw it paired (not alone), and the reasons say the miss in one line."""
    from dataclasses import replace

    from advisor.decide.odds import draw_inputs

    # the fit's own projection meets its measurement; move the measurement 10% up to see a miss carried
    adv = advise(_qhs2_log(tmp_path / "q.jsonl", 4))

    fit = adv.fit
    ob = replace(fit.observed[0], bps=fit.observed[0].bps * 1.10)
    missed = Fitted(logs=adv.logs, fit=replace(fit, observed=(ob, *fit.observed[1:]))).advise(Options(hs_cap=2))
    row = missed.splits.loc["4-8"]
    assert row["bps_low"] <= ob.bps <= row["bps_high"]
    assert row["err_model_sigma"] == pytest.approx(math.log(ob.bps / row["bps"]), rel=1e-6)
    assert missed.observed.miss_pct == pytest.approx(100 * (ob.bps / row["bps"] - 1))
    inp = draw_inputs(list(missed.rows.values()), True)
    assert not inp.widened[list(missed.rows).index("4-8")]
    said = [x for x in missed.recommendation.reasons if x.startswith("the model reads the observed split 4-8")]
    assert len(said) == 1 and "low" in said[0], missed.recommendation.reasons


def _check_odds(adv) -> None:
    d = adv.decision
    if d.odds is None or d.p_best is None:
        return
    _one_method(adv)
    df = adv.splits
    rec = d.recommended
    obs = [lbl for lbl, o in df["observed"].items() if o and df.at[lbl, "observed_bps"] > 0]
    for lbl in obs:
        if lbl != rec and df.at[lbl, "observed_bps"] > df.at[rec, "bps_high"]:
            assert d.p_best < 0.5, (lbl, rec, d.p_best)
    m = d.margin
    if m is not None and m.lead_low_pct is not None and d.p_best >= 0.975:
        pick_low = m.lead_low_pct if m.higher == rec else 100 * (1 / (1 + m.lead_high_pct / 100) - 1)
        assert round(pick_low, 1) >= -2.0, (rec, d.p_best, m)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    n=st.integers(2, 9),
    drafter_s=st.sampled_from([0.45, 0.5, 0.6, 0.75]),
    scv=st.sampled_from([0.002, 0.05, 0.3]),
    miss=st.sampled_from([1.0, 0.9, 1.15]),
)
def test_odds_agree_with_the_observation_and_the_lead(tmp_path, n, drafter_s, scv, miss):
    """Properties over synthetic logs of the issue's shape, the fit made to miss its observation by a
    factor: one method for the contenders; a pick below the observed split's measured rate (its upper
    end) is never stated >= 0.5; a pick stated >= 0.975 has a printed lead over the runner-up that
    starts at -2% or above."""
    from dataclasses import replace

    log = _qhs2_log(tmp_path / f"q-{n}-{drafter_s}-{scv}.jsonl", n, drafter_s=drafter_s, scv=scv, n_batches=1500)
    adv = advise(log)
    _check_odds(adv)
    if miss != 1.0:
        fit = adv.fit
        ob = replace(fit.observed[0], bps=fit.observed[0].bps * miss)
        _check_odds(Fitted(logs=adv.logs, fit=replace(fit, observed=(ob, *fit.observed[1:]))).advise())


def test_a_synced_log_reads_its_own_rate_with_the_rounds_untimed_overhead():
    # sync2g14's 10-4 drafters sync every 2 steps; each round also holds ~1.8 ms of collectives
    # no event times (BENCHMARKS.md 19.25). Without them the simulation read this log 5.5% high.
    log = FIXTURES / "sweep" / "sync2g14" / "sync2g14-10x4-tb1024-r0.jsonl.gz"
    adv = advise([log], Options(gpus=14))
    assert adv.observed.method == "exact"
    assert abs(adv.observed.miss_pct) < 2.0
