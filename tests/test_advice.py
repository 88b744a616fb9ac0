"""advise(): the pipeline's records, each built once from the one before."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.advice import advise, advise_numbers
from advisor.decide.observed import ObservedSplit
from advisor.present.json import advice_json


def test_the_observed_split_is_the_measured_run_plus_the_tables_capacities(reference):
    adv = advise(reference)
    ob = adv.observed
    run = adv.fit.observed[0]
    assert isinstance(ob, ObservedSplit) and ob.run is run
    assert (ob.bps, ob.tok_s, ob.hs_mean_depth, ob.hs_full_share) == (
        run.bps,
        run.tok_s,
        run.hs_mean_depth,
        run.hs_full_share,
    )
    assert (ob.steady_from_s, ob.steady_to_s) == (run.steady.start_s, run.steady.end_s)
    assert (ob.warmup_share, ob.drain_share) == (run.steady.warmup_share, run.steady.drain_share)
    assert list(ob.roles) == list(adv.roles) and ob.roles == {"target": 7, "drafter": 1}
    row = adv.splits.loc["7-1"]
    assert ob.capacities_bps["drafter"] == pytest.approx(row["cap_drafter_bps"])
    assert ob.bottleneck == "drafter" and ob.efficiency == pytest.approx(ob.bps / ob.capacities_bps["target"])
    assert ob.producer_blocked == adv.fit.producer.blocked_share


def test_a_rates_log_has_no_measured_shares(reference_rates):
    ob = advise(reference_rates).observed
    assert ob.producer_blocked is None and ob.consumer_starved is None


def test_another_g_gives_the_log_its_own_capacities(reference):
    adv = advise(reference, gpus=16)
    assert "7-1" not in adv.splits.index
    assert set(adv.observed.capacities_bps) >= {"target", "drafter"} and adv.observed.roles == {
        "target": 7,
        "drafter": 1,
    }


def test_judge_rederives_the_decision_on_the_same_table(reference):
    adv = advise(reference)
    judged = adv.judge({"target": 6, "drafter": 2})
    assert judged.rows is adv.rows and judged.decision.judged == "6-2"
    assert judged.decision.settings is judged.settings


def test_what_if_observed_split():
    adv = advise_numbers({"target": 7, "drafter": 1}, {"target": 0.92, "drafter": 0.86})
    assert adv.observed.roles == {"target": 7, "drafter": 1} and adv.observed.bottleneck == "drafter"


def test_the_json_splits_are_the_tables_rows_and_never_print_minus_zero(reference):
    """Every split object of the JSON is its table row (read once as dicts), and a value that
    rounds to zero from below prints as 0.0: at 64 GPUs the queue advice's gain is ~-1e-14."""
    import json
    import math

    adv = advise(reference, gpus=64)
    doc = advice_json(adv)
    assert len(doc["splits"]) == len(adv.splits) == 63
    for obj, (_label, row) in zip(doc["splits"], adv.splits.iterrows()):
        assert obj["roles"] == {"target": int(row["n_target"]), "drafter": int(row["n_drafter"])}
        assert obj["bps"] == round(float(row["bps"]), 4) and obj["method"] == row["method"]
        assert obj["hs_mean_depth"] == round(float(row["hs_mean_depth"]), 2)
    text = json.dumps(doc)
    assert "-0.0," not in text and "-0.0}" not in text and "-0.0\n" not in text
    gain = doc["queues"]["hs"]["gain_pct"]
    assert gain == 0.0 and math.copysign(1.0, gain) == 1.0


def test_a_table_at_another_g_says_the_split_slope_is_not_carried():
    """Issue 35 item 6: logs at 2 and 3 GPUs of a shared host, projected at 3: the fit's caveat gives
    +3.4% per extra target, and the table keeps the logged step times (2-1 is twice 1-2's target
    capacity); a caveat says the slope is for the logged G, so the two agree."""
    from pathlib import Path

    import pytest

    fix = Path(__file__).resolve().parent.parent / "fixtures"
    adv = advise([fix / "h200-1x1.jsonl", fix / "h200-1x2.jsonl"], gpus=3)
    ct = adv.fit.contention
    assert ct.gpus == 2 and any(ct.prior_k) and not ct.at_any_g
    df = adv.splits
    assert df.at["2-1", "cap_target_bps"] == pytest.approx(2 * df.at["1-2", "cap_target_bps"])
    said = [w for w in adv.warnings if "step-time slope with the split" in w]
    assert len(said) == 1 and "is for 2 GPUs" in said[0] and "every split keeps the logged step times" in said[0]
    assert not [w for w in advise(fix / "h200-1x1.jsonl").warnings if "step-time slope with the split" in w]


def test_logs_fitted_once_advise_as_advise_does():
    """`fit_logs` reads and fits once; its advice under any options is `advise`'s, and an option
    given by name is the same as in an `Options`."""
    from advisor.advice import fit_logs
    from advisor.settings import Options

    ref = Path(__file__).parent.parent / "fixtures" / "reference-7x1.jsonl"
    fitted = fit_logs(ref)
    for opts in (Options(), Options(gpus=16), Options(roles="target=6,drafter=2", restart_cost_h=3.0)):
        assert (
            advice_json(fitted.advise(opts))
            == advice_json(advise(ref, opts))
            == advice_json(advise(ref, **opts.given()))
        )


@pytest.mark.parametrize(
    "roles, caps, option",
    [
        ({"target": 0, "drafter": 1}, {"target": 1.0, "drafter": 1.0}, "roles"),
        ({"target": 2}, {"target": 1.0}, "roles"),
        ({"target": 2, "drafter": 1}, {"target": 1.0}, "cap_bps"),
        ({"target": 2, "drafter": 1}, {"target": -1.0, "drafter": 1.0}, "cap_bps"),
    ],
)
def test_bare_numbers_refuse_bad_counts_and_capacities_naming_the_option(roles, caps, option):
    from advisor.errors import SettingsError

    with pytest.raises(SettingsError) as e:
        advise_numbers(roles, caps)
    assert e.value.option == option and str(e.value).startswith(f"{option}: ")
