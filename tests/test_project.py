"""Projection of every split: documented columns, intervals, ETA and invariants."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from advisor.advice import advise
from advisor.project import project

COLUMNS = {"n_target", "n_drafter", "bps", "bps_low", "bps_high", "tok_s", "bound_bps", "efficiency", "gpu_util",
           "bottleneck", "target_blocked", "drafter_starved", "hs_mean_depth", "eta_s", "observed", "observed_bps",
           "cap_target_bps", "cap_drafter_bps", "cap_loader_bps", "method", "widened"}


def test_all_splits_with_documented_columns(reference):
    adv = advise(reference)
    fit = adv.fit
    for g in (2, 8, 33):
        df = project(fit, replace(adv.settings, gpus=g))
        assert list(df.index) == [f"{n}-{g - n}" for n in range(g - 1, 0, -1)]
        assert (df["bound_bps"] == df[["cap_target_bps", "cap_drafter_bps"]].min(axis=1)).all()
        assert COLUMNS <= set(df.columns)
        assert len(df) == g - 1
        assert ((df["n_target"] + df["n_drafter"]) == g).all()
        assert (df["bps_low"] <= df["bps"]).all() and (df["bps"] <= df["bps_high"]).all()
        assert (df["bps"] <= df["bound_bps"] * (1 + 1e-9)).all()
        assert ((df["efficiency"] > 0) & (df["efficiency"] <= 1)).all()
        assert ((df["gpu_util"] > 0) & (df["gpu_util"] <= 1)).all()


def test_eta_is_remaining_work_over_rate(reference):
    adv = advise(reference)
    df = project(adv.fit, adv.settings)
    work = df["eta_s"] * df["bps"]
    assert np.allclose(work, work.iloc[0], rtol=1e-9)
    assert df["observed"].sum() == 1 and df.loc[df["observed"], "n_target"].item() == 7
    assert df.at["7-1", "observed_bps"] == adv.fit.observed[0].bps


def test_token_budget_changes_batches_not_work(reference):
    adv = advise(reference)
    fit = adv.fit
    half = project(fit, replace(adv.settings, token_budget=16384, tokens_per_batch=fit.tokens_mean / 2))
    full = project(fit, adv.settings)
    assert (half["bps"] > full["bps"]).all()
    # the same tokens remain to be processed
    assert np.allclose(half["eta_s"] * half["tok_s"], full["eta_s"] * full["tok_s"], rtol=1e-9)
