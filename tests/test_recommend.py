"""The reference verdict from both reference logs, and the switch/stay rules."""
from __future__ import annotations

import pytest

from advisor.advice import advise, advise_numbers
from advisor.synth import Scenario, ServiceModel, TokenModel, write_log


@pytest.mark.parametrize("which", ["reference", "reference_rates"])
def test_reference_verdict(which, request):
    adv = advise(request.getfixturevalue(which))
    j = adv.to_json()
    assert j["recommendation"]["roles"] == {"target": 7, "drafter": 1}
    assert j["recommendation"]["verdict"] == "stay"
    assert j["observed"]["bottleneck"] == "drafter"
    assert round(j["observed"]["efficiency"], 2) == 0.93
    assert j["observed"]["bps"] == pytest.approx(0.86, abs=0.01)
    six_two = next(s for s in j["splits"] if s["roles"] == {"target": 6, "drafter": 2})
    assert six_two["bps"] == pytest.approx(0.79, abs=0.01)
    assert six_two["bottleneck"] == "target"
    assert len(j["splits"]) == 7
    for s in j["splits"]:
        assert s["bps_low"] <= s["bps"] <= s["bps_high"]
        assert s["bps"] <= s["bound_bps"] + 1e-9
    holds = " ".join(j["recommendation"]["holds_unless"])
    assert "target capacity is" in holds and "higher than fitted" in holds
    assert "even with perfect drafter scaling" in holds   # the reference reading's 60% argument, generalised
    assert "keep q_hs at 20" in j["queues"]["hs"]["advice"]


def test_json_contract_keys(reference):
    j = advise(reference).to_json()
    assert {"schema", "run", "gpus", "observed", "splits", "recommendation", "queues", "warnings"} <= set(j)
    assert {"roles", "bps", "tok_s", "efficiency", "bottleneck", "steady_from_s"} <= set(j["observed"])
    for s in j["splits"]:
        assert {"roles", "bps", "tok_s", "bps_low", "bps_high", "efficiency", "gpu_util", "bottleneck",
                "eta_s"} <= set(s)
    assert {"roles", "verdict", "reasons", "holds_unless"} <= set(j["recommendation"])
    assert j["schema"] == 1 and j["gpus"] == 8


def drafter_bound(tmp_path, n_target, n_drafter, samples=902000):
    s = Scenario(name="db", n_target=n_target, n_drafter=n_drafter, target=ServiceModel(0.0, 60e-6, 0.03),
                 drafter=ServiceModel(0.0, 40e-6, 0.03), tokens=TokenModel(8192, 6000, 0.1, 600),
                 hs_cap=10, pre_cap=10, n_batches=3000, seed=5, samples=samples)
    p = tmp_path / f"{n_target}x{n_drafter}.jsonl"
    write_log(p, s)
    return p


def test_switch_when_it_pays(tmp_path):
    # 2 targets feed 6 drafters: targets are the bottleneck by far; 5-3 is better
    adv = advise(drafter_bound(tmp_path, 2, 6))
    rec = adv.recommendation
    assert rec.verdict == "switch"
    assert rec.roles["target"] > 2
    assert rec.gain_pct > 20
    assert any("sooner" in r for r in rec.reasons)


def test_stay_when_restart_costs_more_than_it_saves(tmp_path):
    p = drafter_bound(tmp_path, 2, 6, samples=2000)   # a tiny job: almost nothing left to save
    adv = advise(p, restart_cost_h=100.0)
    assert adv.recommendation.verdict == "stay"
    assert any("restart cost" in r for r in adv.recommendation.reasons)


def test_two_drafters_sensitivity_flips_with_scaling():
    # balanced-ish: 6-2 wins only if two drafters scale well
    adv = advise_numbers({"target": 6, "drafter": 2}, {"target": 1.2, "drafter": 1.4})
    assert adv.recommendation.roles == {"target": 6, "drafter": 2}
    assert adv.recommendation.thresholds.get("consumer_scaling_7-1") is not None
    assert any("of a lone drafter's rate" in h for h in adv.recommendation.holds_unless)


def test_loader_bound_advice_names_the_input(tmp_path):
    tm = TokenModel(8192, 6000, 0.1, 600)
    s = Scenario(name="lb", n_target=5, n_drafter=3, target=ServiceModel(0.0, 500e-6, 0.05),
                 drafter=ServiceModel(0.0, 250e-6, 0.05), loader=ServiceModel(0.0, 1 / 1.2 / 6000, 0.3),
                 tokens=tm, hs_cap=8, pre_cap=8, n_batches=3000, seed=9)
    write_log(tmp_path / "lb.jsonl", s)
    adv = advise(tmp_path / "lb.jsonl")
    assert adv.observed.bottleneck == "loader"
    assert adv.fit.loader.input_bound
    assert adv.fit.loader.capacity_bps == pytest.approx(1.2, rel=0.05)
    assert any("loader caps the pipeline" in r for r in adv.recommendation.reasons)
    assert (adv.splits["bps"] <= 1.2 * 1.05).all()          # no split beats the loader
