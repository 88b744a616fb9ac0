"""The odds of every split from one joint draw (advisor.decide.odds): invariants and the table's reader."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.decide.odds import DrawInputs, draw_inputs, draw_rates, odds_of, split_odds
from advisor.project.table import ERR_CORNERS, ERR_SHARED, lead_interval

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def table(bps, own=None, shared=None, widened=None, low=None, high=None, eta=None, sync=None) -> pd.DataFrame:
    """A projected table of len(bps) splits with the given interval parts."""
    k = len(bps)
    rows = []
    for i in range(k):
        r = {"bps": bps[i], "widened": bool(widened[i]) if widened else False,
             "bps_low": low[i] if low else bps[i] * 0.9, "bps_high": high[i] if high else bps[i] * 1.1,
             "err_own_var": own[i] if own else 0.0, "eta_s": eta / bps[i] if eta else math.nan,
             "err_sync_lo": sync[i][0] if sync else 0.0, "err_sync_hi": sync[i][1] if sync else 0.0}
        for j, c in enumerate(ERR_SHARED):
            r[c] = shared[i][j] if shared else 0.0
        for c in ERR_CORNERS:
            r[c] = 0.0
        rows.append(r)
    return pd.DataFrame(rows, index=pd.Index([f"{k - i}-{i + 1}" for i in range(k)], name="split"))


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


@FAST
@given(st.integers(2, 5), st.integers(0, 2**31 - 1), st.floats(0.0, 0.5))
def test_a_split_beaten_in_every_draw_is_never_more_likely_best(k, seed, edge):
    """Split 0 is at least split 1 in every draw: its odds are at least split 1's, its regret at most."""
    rng = np.random.default_rng(seed)
    x = rng.lognormal(0.0, 0.3, (400, k))
    x[:, 0] = x[:, 1] * (1.0 + edge * rng.uniform(0.0, 1.0, 400))
    inp = DrawInputs(labels=tuple(f"s{i}" for i in range(k)), bps=np.ones(k), shared=np.zeros((k, 1)),
                     own_var=np.zeros(k), ends=np.zeros((k, 0)), widened=np.zeros(k, bool),
                     low_bps=np.ones(k), high_bps=np.ones(k), left_batches=None)
    o = odds_of(x, inp)
    a, b = o.splits[0], o.splits[1]
    assert a.p_best >= b.p_best and a.p_top >= b.p_top and a.regret_pct <= b.regret_pct


@FAST
@given(tables(), st.floats(1.0, 4.0), st.integers(0, 2**31 - 1))
def test_a_wider_input_range_never_raises_the_leaders_odds(df, widen, seed):
    """Every error part scaled by ``widen`` >= 1 (the same draws, spread wider): the projected
    leader's odds of being within the resolution of the best never rise."""
    wide = df.copy()
    cols = list(ERR_SHARED) + ["err_sync_lo", "err_sync_hi"]
    wide[cols] = wide[cols] * widen
    wide["err_own_var"] = wide["err_own_var"] * widen ** 2
    x = wide["bps"]
    wide["bps_low"] = x * (df["bps_low"] / x) ** widen
    wide["bps_high"] = x * (df["bps_high"] / x) ** widen
    lead = str(df["bps"].idxmax())
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
    assert lead_interval(df, "2-1", "1-2")[0] > 0
    o = split_odds(df)
    assert o.of("2-1").p_top == 1.0 and o.of("1-2").p_best == 0.0
    # drawn apart (opposite signs), the same sizes overlap
    apart = table([1.05, 1.0], shared=[[0.5] + [0.0] * 7, [-0.5] + [0.0] * 7])
    assert 0.3 < split_odds(apart).of("1-2").p_top < 0.5


def test_the_draws_agree_with_the_leads_interval():
    """Independent own errors: the share of draws where the lead is above the lead interval's
    lower end is about 97.5%."""
    df = table([1.1, 1.0], own=[0.002, 0.003])
    lo, _ = lead_interval(df, "2-1", "1-2")
    inp = draw_inputs(df)
    x = draw_rates(inp, 20000, seed=1)
    share = float((x[:, 0] / x[:, 1] - 1.0 > lo).mean())
    assert abs(share - 0.975) < 0.005


def test_a_widened_row_is_drawn_from_its_own_interval():
    """No paired form: its 95% interval holds about 95% of its draws, whatever the shared parts say."""
    df = table([1.0, 1.0], widened=[True, False], low=[0.6, 0.9], high=[1.2, 1.1],
               shared=[[0.0] * 8, [0.0] * 8])
    x = draw_rates(draw_inputs(df), 20000, seed=2)[:, 0]
    assert abs(float(((x >= 0.6) & (x <= 1.2)).mean()) - 0.95) < 0.006
    assert abs(float(np.median(x)) - 1.0) < 0.01


def test_the_same_table_gives_the_same_odds():
    df = table([1.0, 0.98, 0.9], own=[0.01, 0.01, 0.01])
    assert split_odds(df) == split_odds(df)


def test_a_restart_weighs_against_switching():
    """Remaining-job time: a 3% faster split that would pay a long restart on a short rest of the
    job is the worse choice; with no restart it is the better."""
    df = table([1.03, 1.0], own=[1e-6, 1e-6], eta=3600.0 * 10)   # 10 h of batches at 1 b/s
    assert split_odds(df, judged="1-2").best == "2-1"
    slow = split_odds(df, judged="1-2", restart_s=3600.0)
    assert slow.best == "1-2" and slow.restart_s == 3600.0
    assert slow.of("2-1").regret_pct > 0 and slow.of("1-2").p_top == 1.0


def test_a_close_call_is_two_splits_both_within_the_resolution():
    tie = split_odds(table([1.0, 0.995], own=[1e-4, 1e-4]))
    assert tie.close_call
    apart = split_odds(table([1.2, 1.0], own=[1e-4, 1e-4]))
    assert not apart.close_call and apart.of("2-1").p_best == 1.0
