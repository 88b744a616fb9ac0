"""The odds of every split from one joint draw (advisor.decide.odds), and what a probe is worth
(advisor.decide.probe): invariants, the table's reader, and the decisions they make."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from bare_rows import bare_row
from conftest import split_odds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.advice import advise
from advisor.decide.odds import DrawInputs, draw_inputs, draw_rates, odds_of
from advisor.decide.probe import MIN_PROBE_S, ProbeCosts, ProbeNoise, best_probe
from advisor.decide.reasons import bps_text, reasons, signed_pct
from advisor.decide.rules import Verdict
from advisor.model.chain import ERR_SHARED
from advisor.present.json import advice_json
from advisor.present.text import render
from advisor.project.rows import lead_interval

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _lead(rows, a: str, b: str) -> tuple[float, float] | None:
    """The lead interval of row ``a`` over ``b`` of bare rows."""
    by = {r.label: r for r in rows}
    return lead_interval(by[a], by[b])


def table(bps, own=None, shared=None, widened=None, low=None, high=None, eta=None, sync=None, parts=True) -> tuple:
    """Bare rows of len(bps) splits with the given interval parts."""
    k = len(bps)
    return tuple(
        bare_row(
            f"{k - i}-{i + 1}",
            bps[i],
            low[i] if low else bps[i] * 0.9,
            high[i] if high else bps[i] * 1.1,
            parts=parts,
            widened=bool(widened[i]) if widened else False,
            own=own[i] if own else 0.0,
            eta_s=eta / bps[i] if eta is not None else math.nan,
            err_sync_lo=sync[i][0] if sync else 0.0,
            err_sync_hi=sync[i][1] if sync else 0.0,
            **{c: shared[i][j] if shared else 0.0 for j, c in enumerate(ERR_SHARED)},
        )
        for i in range(k)
    )


rates = st.lists(st.floats(0.5, 20.0), min_size=1, max_size=6)
coef = st.floats(0.0, 0.3)


@st.composite
def tables(draw):
    bps = draw(rates)
    k = len(bps)
    own = [draw(st.floats(0.0, 0.05)) for _ in range(k)]
    shared = [[draw(coef) * draw(st.sampled_from([-1, 1])) for _ in ERR_SHARED] for _ in range(k)]
    widened = [draw(st.booleans()) and draw(st.booleans()) for _ in range(k)]
    sync = [(draw(st.floats(-0.2, 0.0)), draw(st.floats(0.0, 0.2))) for _ in range(k)] if draw(st.booleans()) else None
    return table(bps, own=own, shared=shared, widened=widened, sync=sync)


@FAST
@given(tables(), st.integers(0, 2**31 - 1))
def test_shares_are_probabilities_and_regret_is_not_negative(df, seed):
    o = split_odds(df, draws=500, seed=seed)
    assert all(0.0 <= s.p_best <= 1.0 and 0.0 <= s.p_top <= 1.0 for s in o.splits)
    assert math.isclose(sum(s.p_top for s in o.splits), 1.0, abs_tol=1e-9)
    assert all(s.regret_pct >= 0.0 for s in o.splits)
    # being the best is being within the resolution of it
    assert all(s.p_best >= s.p_top for s in o.splits)
    # the Bayes action has the least expected regret
    assert o.of(o.best).regret_pct == min(s.regret_pct for s in o.splits)


def test_the_action_has_the_least_stated_regret_where_a_bound_holds_it():
    """3-3's draws reach far past its interval (high mean, drawn regret 18.7%), while 1-5's stated
    regret is held at 1 - 13.5 / 16.5 = 18.2% by the intervals: 1-5 is the action, as the
    sentences that print both regrets say (hypothesis found the case)."""
    shared = [[0.0] * len(ERR_SHARED) for _ in range(5)]
    shared[2][3:7] = [-0.25] * 4
    shared[4][7] = -0.125
    o = split_odds(table([1.0, 1.0, 12.75, 1.0, 15.0], own=[0, 0, 0.046875, 0, 0], shared=shared), draws=500, seed=0)
    assert o.of("1-5").regret_pct == pytest.approx(100 * (1 - 13.5 / 16.5))
    assert o.of("3-3").regret_pct > o.of("1-5").regret_pct
    assert o.best == "1-5"


@FAST
@given(st.integers(2, 5), st.integers(0, 2**31 - 1), st.floats(0.0, 0.5))
def test_a_split_beaten_in_every_draw_is_never_more_likely_best(k, seed, edge):
    """Split 0 is at least split 1 in every draw: its odds are at least split 1's, its regret at most."""
    rng = np.random.default_rng(seed)
    x = rng.lognormal(0.0, 0.3, (400, k))
    x[:, 0] = x[:, 1] * (1.0 + edge * rng.uniform(0.0, 1.0, 400))
    inp = DrawInputs(
        labels=tuple(f"s{i}" for i in range(k)),
        bps=np.ones(k),
        shared=np.zeros((k, 1)),
        own_var=np.zeros(k),
        ends=np.zeros((k, 0)),
        widened=np.zeros(k, bool),
        low_bps=np.zeros(k),  # no interval: the synthetic draws are bounded by none
        high_bps=np.full(k, np.inf),
        left_batches=None,
    )
    o = odds_of(x, inp)
    a, b = o.splits[0], o.splits[1]
    assert a.p_best >= b.p_best and a.p_top >= b.p_top and a.regret_pct <= b.regret_pct


@FAST
@given(tables(), st.floats(1.0, 4.0), st.integers(0, 2**31 - 1))
def test_a_wider_input_range_never_raises_the_leaders_odds(df, widen, seed):
    """Every error part scaled by ``widen`` >= 1 (the same draws, spread wider): the projected
    leader's odds of being within the resolution of the best never rise."""

    def wider(r):
        q = r.parts
        return replace(
            r,
            parts=replace(
                q,
                shared_log_per_se=tuple(x * widen for x in q.shared_log_per_se),
                sync_ends_log=tuple(x * widen for x in q.sync_ends_log),
                own_var_log2=q.own_var_log2 * widen**2,
            ),
            bps_low=r.bps * (r.bps_low / r.bps) ** widen,
            bps_high=r.bps * (r.bps_high / r.bps) ** widen,
        )

    wide = tuple(wider(r) for r in df)
    lead = max(df, key=lambda r: r.bps).label
    narrow_p = split_odds(df, draws=400, seed=seed).of(lead).p_best
    wide_p = split_odds(wide, draws=400, seed=seed).of(lead).p_best
    assert wide_p <= narrow_p


@FAST
@given(st.floats(1.0, 1.3), st.floats(0.001, 0.05), st.floats(1.0, 5.0), st.integers(0, 2**31 - 1))
def test_a_bigger_own_error_of_the_leader_never_raises_its_odds(lead, own, grow, seed):
    """Two splits, the leader's own variance grown: its p_best falls, up to the draw's noise
    (about 1/sqrt(draws))."""
    narrow = table([2.0 * lead, 2.0], own=[own, own])
    wide = table([2.0 * lead, 2.0], own=[own * grow, own])
    n = split_odds(narrow, draws=4000, seed=seed).of("2-1").p_best
    w = split_odds(wide, draws=4000, seed=seed).of("2-1").p_best
    assert w <= n + 0.02


def test_shared_sources_cancel_between_splits():
    """A source both splits carry with the same coefficient moves them together: the leader stays
    the best in every draw however large that source, as its lead's interval says."""
    shared = [[0.5] + [0.0] * (len(ERR_SHARED) - 1)] * 2
    df = table([1.05, 1.0], shared=shared)
    assert _lead(df, "2-1", "1-2")[0] > 0
    o = split_odds(df)
    assert o.of("2-1").p_top == 1.0 and o.of("1-2").p_best == 0.0
    # drawn apart (opposite signs), the same sizes overlap
    apart = table([1.05, 1.0], shared=[[0.5] + [0.0] * 7, [-0.5] + [0.0] * 7])
    assert 0.3 < split_odds(apart).of("1-2").p_top < 0.5


def test_the_draws_agree_with_the_leads_interval():
    """Independent own errors: the share of draws where the lead is above the lead interval's
    lower end is about 97.5%."""
    df = table([1.1, 1.0], own=[0.002, 0.003])
    lo, _ = _lead(df, "2-1", "1-2")
    inp = draw_inputs(df)
    x = draw_rates(inp, 20000, seed=1)
    share = float((x[:, 0] / x[:, 1] - 1.0 > lo).mean())
    assert abs(share - 0.975) < 0.005


def test_a_widened_row_is_drawn_from_its_own_interval():
    """No paired form: its 95% interval holds about 95% of its draws, whatever the shared parts say."""
    df = table([1.0, 1.0], widened=[True, False], low=[0.6, 0.9], high=[1.2, 1.1], shared=[[0.0] * 8, [0.0] * 8])
    x = draw_rates(draw_inputs(df), 20000, seed=2)[:, 0]
    assert abs(float(((x >= 0.6) & (x <= 1.2)).mean()) - 0.95) < 0.006
    assert abs(float(np.median(x)) - 1.0) < 0.01


def test_the_same_table_gives_the_same_odds():
    df = table([1.0, 0.98, 0.9], own=[0.01, 0.01, 0.01])
    assert split_odds(df) == split_odds(df)


def test_a_restart_weighs_against_switching():
    """Remaining-job time: a 3% faster split that would pay a long restart on a short rest of the
    job is the worse choice; with no restart it is the better."""
    df = table([1.03, 1.0], own=[1e-6, 1e-6], eta=3600.0 * 10)  # 10 h of batches at 1 b/s
    assert split_odds(df, judged="1-2").best == "2-1"
    slow = split_odds(df, judged="1-2", restart_s=3600.0)
    assert slow.best == "1-2" and slow.restart_s == 3600.0
    assert slow.of("2-1").regret_pct > 0 and slow.of("1-2").p_top == 1.0


def test_a_close_call_is_two_splits_both_within_the_resolution():
    tie = split_odds(table([1.0, 0.995], own=[1e-4, 1e-4]))
    assert tie.close_call
    apart = split_odds(table([1.2, 1.0], own=[1e-4, 1e-4]))
    assert not apart.close_call and apart.of("2-1").p_best == 1.0


# ---------------------------------------------------------------- the decision's odds and probe


def test_the_reference_run_stays_with_high_odds_and_nothing_to_probe(reference):
    """README's run: 7-1 leads 6-2 by 8% with a narrow lead interval: stay, almost surely the best,
    and no probe (nothing for one to remove)."""
    d = advise(reference).decision
    assert d.verdict is Verdict.STAY and d.recommended == "7-1"
    assert d.p_best >= 0.99 and d.expected_regret_pct < 0.1 and not d.close_call and d.probe is None
    assert d.odds.restart_s == 3600.0  # a switch pays the default 1 h restart


def test_a_close_call_says_either_will_do(reference):
    """Projected onto 16 GPUs, 13-3 and 14-2 are both expected within 2% of the best: a close call,
    in the headline, the reasons and the JSON alike."""
    adv = advise(reference, gpus=16)
    d = adv.decision
    assert d.close_call and {d.odds.best, d.odds.runner_up} == {"13-3", "14-2"}
    assert all(d.odds.of(x).regret_pct < 2.0 for x in ("13-3", "14-2"))
    text = render(adv)
    assert "close call: 13-3 or 14-2 will do" in text and "either will do" in text
    assert advice_json(adv)["recommendation"]["close_call"] is True


def test_cannot_tell_only_where_the_probe_is_worth_it(reference_rates):
    """The rates log projected onto 16 GPUs for a next run: an open question over a whole job.
    Whatever the restart costs, the verdict is cannot-tell exactly where the probe is worth it, and
    the action without it is the same."""
    verdicts = set()
    for hours in (0.0, 1.0, 20.0, 500.0):
        adv = advise(reference_rates, gpus=16, next_run=True, restart_cost_h=hours)
        d = adv.decision
        assert (d.verdict is Verdict.CANNOT_TELL) == (d.probe is not None and d.probe.worth_it)
        assert d.action is Verdict.NEXT_RUN
        assert d.probe.cost_s == pytest.approx(2 * d.probe.seconds_each + 2 * 3600.0 * hours)
        verdicts.add(d.verdict)
    assert verdicts == {Verdict.CANNOT_TELL, Verdict.NEXT_RUN}  # dear restarts make it not worth it


def _inputs(k: int, left: float | None = None) -> DrawInputs:
    return DrawInputs(
        labels=tuple(f"s{i}" for i in range(k)),
        bps=np.ones(k),
        shared=np.zeros((k, 1)),
        own_var=np.zeros(k),
        ends=np.zeros((k, 0)),
        widened=np.zeros(k, bool),
        low_bps=np.zeros(k),  # no interval: the synthetic draws are bounded by none
        high_bps=np.full(k, np.inf),
        left_batches=left,
    )


@FAST
@given(st.floats(0.0, 0.3), st.floats(0.01, 0.3), st.integers(0, 2**31 - 1))
def test_a_probe_never_adds_regret_and_a_sharper_one_removes_more(lead, spread, seed):
    """Two splits: a probe's regret after is never above the regret now, and a probe 100 times as
    precise removes at least as much, up to the simulation's noise."""
    rng = np.random.default_rng(seed)
    x = np.column_stack([np.exp(lead + spread * rng.standard_normal(2000)), np.ones(2000)])
    inp = _inputs(2, left=1e6)
    o = odds_of(x, inp)
    costs = ProbeCosts(remaining_s=1e6, restart_s=0.0, gpus=8)
    probes = [
        best_probe(x, x, inp, o, o.best, ProbeNoise(var_s={"s0": v, "s1": v}), costs, seed=seed) for v in (100.0, 1.0)
    ]
    if probes[0] is None:  # nothing to gain: no probe, however sharp
        assert probes[1] is None and o.of(o.best).regret_pct < 0.01
        return
    noisy, sharp = probes
    for p in probes:
        assert 0.0 <= p.regret_after_pct <= p.regret_now_pct and p.value_s >= 0.0
    assert sharp.regret_after_pct <= noisy.regret_after_pct + 0.1 * noisy.regret_now_pct + 0.05


def test_a_probe_is_never_worth_it_without_the_jobs_size_nor_of_splits_already_run_that_long():
    rng = np.random.default_rng(3)
    x = np.column_stack([np.exp(0.05 + 0.1 * rng.standard_normal(2000)), np.ones(2000)])
    inp = _inputs(2)
    o = odds_of(x, inp)
    noise = ProbeNoise(var_s={"s0": 1.0, "s1": 1.0})
    unknown = best_probe(x, x, inp, o, o.best, noise, ProbeCosts(remaining_s=None, restart_s=0.0, gpus=8))
    assert unknown is not None and not unknown.worth_it and unknown.value_s == 0.0
    known = best_probe(x, x, inp, o, o.best, noise, ProbeCosts(remaining_s=1e7, restart_s=0.0, gpus=8))
    assert known.worth_it and known.gpu_hours == pytest.approx(2 * known.seconds_each * 8 / 3600)
    ran = ProbeNoise(var_s=noise.var_s, ran_s={"s0": 1e9, "s1": 1e9})
    assert best_probe(x, x, inp, o, o.best, ran, ProbeCosts(remaining_s=1e7, restart_s=0.0, gpus=8)) is None
    one_ran = ProbeNoise(var_s=noise.var_s, ran_s={"s0": 1e9})
    p = best_probe(x, x, inp, o, o.best, one_ran, ProbeCosts(remaining_s=1e7, restart_s=0.0, gpus=8))
    assert p.split == "s1" and set(p.splits) == {"s0", "s1"}


def test_the_probe_starts_from_the_length_that_resolves_the_lead():
    """L = 2 (z sigma / delta)^2 of each split, delta the expected lead: with the job's size unknown,
    that length is the probe named."""
    x = np.column_stack([np.full(1000, 1.1), np.ones(1000)])
    x[:100, 0] = 0.9  # 10% of draws reverse the order: something to gain
    inp = _inputs(2)
    o = odds_of(x, inp)
    sigma2 = 2.0
    p = best_probe(
        x,
        x,
        inp,
        o,
        o.best,
        ProbeNoise(var_s={"s0": sigma2, "s1": sigma2}),
        ProbeCosts(remaining_s=None, restart_s=0.0, gpus=1),
    )
    delta = math.log(x[:, 0].mean() / x[:, 1].mean())
    length = 2 * (1.96**2) * sigma2 / delta**2
    # as the trainer runs it: two rounds of whole-second segments of at least a minute
    assert length > 2 * MIN_PROBE_S and p.rounds == 2 and p.segment_s == math.ceil(length / 2)
    assert p.seconds_each == 2 * p.segment_s


def test_nothing_left_of_the_job_never_repays_a_restart():
    df = table([1.5, 1.0], own=[1e-6, 1e-6], eta=0.0)
    assert draw_inputs(df).left_batches == 0.0
    o = split_odds(df, judged="1-2", restart_s=60.0)
    assert o.best == "1-2" and o.of("1-2").p_top == 1.0


def test_a_switch_the_odds_make_says_so_from_the_table(reference):
    """A switch to a split that is not the projected best (what the fit leaves open favours it) is
    written from that split's row and the decision's expected gain."""
    from dataclasses import replace

    adv = advise(reference)
    d = replace(adv.decision, verdict=Verdict.SWITCH, action=Verdict.SWITCH, rule="switch", recommended="6-2")
    text = " ".join(reasons(d, adv.fit, adv.observed))
    assert f"6-2 projects {bps_text(adv.splits.at['6-2', 'bps'])} b/s against 7-1's" in text
    assert f"expected {signed_pct(d.expected_gain_pct)} ahead of 7-1 by the rest of the job" in text


def test_a_stay_the_odds_make_gives_the_judged_splits_expected_regret(reference):
    """Rule expected-best (the projected best leads, but the odds leave the judged split within the
    resolution): the sentence names both rates from the table and the judged split's regret."""
    from dataclasses import replace

    adv = advise(reference, roles={"target": 6, "drafter": 2})
    d = replace(adv.decision, verdict=Verdict.STAY, action=Verdict.STAY, rule="expected-best", recommended="6-2")
    text = " ".join(reasons(d, adv.fit, adv.observed))
    df = adv.splits
    lead = signed_pct(100 * (df.at["7-1", "bps"] / df.at["6-2", "bps"] - 1))
    vs = f"7-1 {bps_text(df.at['7-1', 'bps'])} b/s vs 6-2 {bps_text(df.at['6-2', 'bps'])} b/s"
    assert f"7-1 projects {lead} ({vs}), but with its uncertainty and the restart 6-2 is expected within 2%" in text
    assert f"(expected regret {d.odds.of('6-2').regret_pct:.1f}%)" in text


def test_one_split_is_surely_the_best_with_nothing_to_gain_over(reference):
    d = advise(reference, gpus=2).decision
    assert len(d.rows) == 1 and d.p_best == 1.0 and d.expected_regret_pct == 0.0
    assert d.expected_gain_pct is None and d.probe is None and not d.close_call


def test_a_next_run_pick_against_the_point_projection_says_why():
    """oversub2 (3 CPU workers on 2 cores; measured 1-2 73.09 and 72.60 b/s, 2-1 67.39 and 66.92):
    from the 2-1 log the point projection prefers 2-1, but 1-2's wide upside makes it the larger
    expected rate; the verdict names 1-2 and the sentence says the point and the expectation."""
    from pathlib import Path

    adv = advise(Path(__file__).resolve().parents[2] / "fixtures" / "oversub2" / "2x1-r0")
    d, df = adv.decision, adv.splits
    assert d.best == "2-1" and d.recommended == "1-2" and d.verdict is Verdict.NEXT_RUN
    assert d.odds.of("1-2").value_bps > d.odds.of("2-1").value_bps
    text = render(adv)
    assert (
        f"it projects {bps_text(df.at['1-2', 'bps'])} b/s against 2-1's {bps_text(df.at['2-1', 'bps'])} at the "
        f"point estimate, but over what the fit leaves open it is expected {signed_pct(d.expected_gain_pct)} "
        f"ahead of 2-1"
    ) in text


def test_a_row_without_parts_is_drawn_from_its_own_interval():
    assert draw_inputs(table([1.0, 2.0], parts=False)).widened.all()
