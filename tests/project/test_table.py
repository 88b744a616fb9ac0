"""Projection of every split: documented columns, intervals, ETA and invariants."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bare_rows import bare_row
from hypothesis import example, given, settings
from hypothesis import strategies as st

from advisor.advice import advise, splits_frame
from advisor.model.chain import ERR_SHARED
from advisor.project.rows import lead_interval, lead_parts
from advisor.project.table import project as project_rows
from advisor.stats import Z_95


def project(*args, **kw) -> pd.DataFrame:
    """The projected rows as the user's DataFrame."""
    return splits_frame(project_rows(*args, **kw))


SWEEP = Path(__file__).resolve().parents[2] / "fixtures" / "sweep"

COLUMNS = {
    "n_target",
    "n_drafter",
    "bps",
    "bps_low",
    "bps_high",
    "tok_s",
    "bound_bps",
    "efficiency",
    "gpu_util",
    "bottleneck",
    "target_blocked",
    "drafter_starved",
    "hs_mean_depth",
    "eta_s",
    "observed",
    "observed_bps",
    "cap_target_bps",
    "cap_drafter_bps",
    "cap_loader_bps",
    "method",
    "widened",
    *ERR_SHARED,
    "err_own_var",
    "err_sync_lo",
    "err_sync_hi",
}


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
    budget = replace(adv.settings.options, token_budget=16384)
    half = project(fit, replace(adv.settings, options=budget, tokens_per_batch=fit.tokens_mean / 2))
    full = project(fit, adv.settings)
    assert (half["bps"] > full["bps"]).all()
    # the same tokens remain to be processed
    assert np.allclose(half["eta_s"] * half["tok_s"], full["eta_s"] * full["tok_s"], rtol=1e-9)


def _pair(a_shared, b_shared, own=(0.0, 0.0), sync=((0.0, 0.0), (0.0, 0.0)), bps=(12.0, 10.0), widened=False):
    rows = []
    for label, sh, ov, sy, x in zip(("1-2", "2-1"), (a_shared, b_shared), own, sync, bps):
        err = dict(zip(ERR_SHARED, sh))  # parts not given are 0
        rows.append(bare_row(label, x, widened=widened, own=ov, err_sync_lo=sy[0], err_sync_hi=sy[1], **err))
    return tuple(rows)


def test_lead_interval_cancels_what_both_splits_share():
    shared = (0.01, 0.0, 0.05, 0.02, -0.09, 0.0)
    lo, hi = lead_interval(*_pair(shared, shared, own=(0.0001, 0.0001)))
    half = Z_95 * math.sqrt(0.0002)
    assert lo == pytest.approx(1.2 * math.exp(-half) - 1) and hi == pytest.approx(1.2 * math.exp(half) - 1)
    # a source that moves only one of them (different bottleneck roles) does not cancel
    lo2, hi2 = lead_interval(*_pair((0, 0, 0.08, 0.0, 0.0, 0.0), (0, 0, 0.0, 0.08, 0.0, 0.0)))
    assert math.log1p(hi2) - math.log(1.2) == pytest.approx(Z_95 * math.hypot(0.08, 0.08))
    # the split slope moves splits on either side of the logged one in opposite directions
    lo3, hi3 = lead_interval(*_pair((0, 0, 0, 0, 0.05, 0), (0, 0, 0, 0, -0.05, 0)))
    assert math.log1p(hi3) - math.log(1.2) == pytest.approx(Z_95 * 0.1)


def test_lead_interval_spans_both_ends_of_an_unidentified_sync_scaling():
    lo, hi = lead_interval(*_pair((0,) * 6, (0,) * 6, own=(1e-4, 1e-4), sync=((-0.1, 0.0), (0.0, 0.05))))
    half = Z_95 * math.sqrt(2e-4)
    assert math.log1p(lo) == pytest.approx(math.log(1.2) - 0.1 - half)
    assert math.log1p(hi) == pytest.approx(math.log(1.2) - 0.05 + half + 0.05)


def test_a_widened_row_has_no_paired_form():
    assert lead_interval(*_pair((0.1,) * 6, (0.1,) * 6, widened=True)) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-0.3, 0.3), min_size=2 * len(ERR_SHARED), max_size=2 * len(ERR_SHARED)),
    st.floats(0, 0.01),
    st.floats(0, 0.01),
    st.floats(0.5, 50),
    st.floats(0.5, 50),
)
def test_lead_interval_holds_the_projected_lead(coef, own_a, own_b, xa, xb):
    k = len(ERR_SHARED)
    lo, hi = lead_interval(*_pair(coef[:k], coef[k:], own=(own_a, own_b), bps=(xa, xb)))
    assert lo <= xa / xb - 1 <= hi
    # it is never wider than what the two splits' errors would give if nothing were shared
    var = sum(c * c for c in coef) + own_a + own_b
    assert (
        math.log1p(hi) - math.log1p(lo) <= 2 * Z_95 * math.sqrt(var) * (1 + 1e-9) + 1e-12
        or sum(a * b for a, b in zip(coef[:k], coef[k:])) < 0
    )


def test_real_sweep_projections_carry_their_interval_parts():
    from advisor.project.model_error import ModelError, split_u

    df = advise([SWEEP / "cpu32" / "cpu32-6x2-r0.jsonl.gz"]).splits
    at = df["err_model_miss"].notna()
    err = ModelError(
        sigma_log=float(df["err_model_sigma"].max()),
        anchor_u=tuple(split_u(df.loc[at, "n_target"], df.loc[at, "n_drafter"])),
        anchor_miss_log=tuple(df.loc[at, "err_model_miss"]),
    )
    mean, sd = err.posterior(split_u(df["n_target"], df["n_drafter"]))
    for (lbl, r), mu, s in zip(df.iterrows(), mean, sd):
        var = sum(float(r[k]) ** 2 for k in ERR_SHARED) + float(r["err_own_var"])
        # the parts add up to the row's own interval (no sync scaling there), grown by the model's own
        # error (advisor.project.model_error: its mean and spread at the split)
        half = Z_95 * math.sqrt(var)
        want = max(half, mu + math.hypot(half, Z_95 * s))
        assert math.log(r["bps_high"] / r["bps"]) == pytest.approx(want, rel=1e-6), lbl


def test_a_longer_log_shrinks_only_the_sampling_part_of_the_lead():
    parts = lead_parts(*_pair((0.03, 0, 0.02, 0, 0, 0), (0, 0, 0, 0, 0.04, 0), own=(1e-4, 1e-4)))
    assert parts.sampling_var == pytest.approx(0.03**2)
    assert parts.fixed_var == pytest.approx(0.02**2 + 0.04**2 + 2e-4)
    lo, hi = parts.interval()
    lo4, hi4 = parts.interval(sampling_scale=0.25)
    assert lo < lo4 < hi4 < hi
    assert (lo, hi) == lead_interval(*_pair((0.03, 0, 0.02, 0, 0, 0), (0, 0, 0, 0, 0.04, 0), own=(1e-4, 1e-4)))


@pytest.mark.parametrize("sweep,runs", [("hold16", 144), ("hold16g10", 100)])
def test_held_out_sweep_runs_lie_inside_the_one_log_intervals(sweep, runs):
    # fixtures/sweep/hold16 and hold16g10 were recorded as the held-out test of the shared-host
    # constants (98% and 86% inside before the constants were re-pooled with them, and hold16g10's
    # lone drafter led to CONTENTION_SINGLE_SE): from each log alone, every split's 95% interval
    # against both measured runs of that split
    import re
    import warnings

    logs = sorted((SWEEP / sweep).glob("*.jsonl.gz"))
    split = {p: tuple(int(v) for v in re.search(r"-(\d+)x(\d+)-r", p.name).groups()) for p in logs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        advs = {p: advise([p]) for p in logs}
    measured: dict[tuple[int, int], list[float]] = {}
    for p, a in advs.items():
        measured.setdefault(split[p], []).append(float(a.observed.bps))
    inside = total = 0
    for a in advs.values():
        df = a.splits.set_index(["n_target", "n_drafter"])
        for (n, m), got in measured.items():
            lo, hi = df.loc[(n, m), "bps_low"], df.loc[(n, m), "bps_high"]
            inside += sum(lo <= r <= hi for r in got)
            total += len(got)
    assert total == runs
    assert inside / total >= 0.9, f"{inside}/{total} measured runs inside their one-log interval"


def test_a_lone_worker_is_another_regime():
    # one drafter against two or more (or one target against two or more) is another regime: a
    # split on the other side of that line from the logged one carries CONTENTION_SINGLE_SE for
    # the role, through its elasticity, as one unknown shared by every such split
    from advisor.model.priors import CONTENTION_SINGLE_SE as J

    df = advise([SWEEP / "cpu32" / "cpu32-6x2-r0.jsonl.gz"]).splits
    assert df.at["7-1", "bottleneck"] == "drafter" and df.at["7-1", "err_c_single"] > 0.5 * J
    assert (df.drop(index="7-1")["err_c_single"].abs() < 1e-9).all()
    # only 1-7 has a lone target; it is target-bound, so the jump moves it fully
    assert df.at["1-7", "err_p_single"] == pytest.approx(J, rel=0.05)
    assert (df.drop(index="1-7")["err_p_single"].abs() < 1e-9).all()
    # from the 7-1 log every split with two or more drafters crosses; none beyond elasticity 1
    df1 = advise([SWEEP / "cpu32" / "cpu32-7x1-r0.jsonl.gz"]).splits
    assert df1.at["7-1", "err_c_single"] == 0.0 and (df1["err_c_single"].abs() <= J * (1 + 1e-9)).all()
    # logs at one and at three drafters measure it: nothing carried for the drafters
    df3 = advise([SWEEP / "cpu32" / "cpu32-7x1-r0.jsonl.gz", SWEEP / "cpu32" / "cpu32-5x3-r0.jsonl.gz"]).splits
    assert (df3["err_c_single"] == 0.0).all()


def _numbers_fit(every: int, sync_bytes: float | None, hs_bytes: float, caps: tuple[float, float], sync_s: float):
    from advisor.fit.pipeline import fit_from_numbers
    from advisor.settings import Options

    fit = fit_from_numbers(
        {"target": 3, "drafter": 1},
        {"target": caps[0], "drafter": caps[1]},
        Options(sync_every=every, sync_s=sync_s, hardware_priors=False),
    )
    return replace(fit, hs_bytes_per_token=hs_bytes, sync=replace(fit.sync, bytes_per_sync=sync_bytes))


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([2, 4, 8]),
    st.integers(2, 4),
    st.sampled_from([1, 2]),
    st.one_of(st.none(), st.floats(0.02, 50.0)),
    st.sampled_from([0, 1, 4]),
    st.sampled_from([None, 1e8, 2e9]),
    st.sampled_from([1e3, 6e4]),
    st.floats(0.2, 5.0),
    st.floats(0.2, 5.0),
    st.sampled_from([0.0, 0.3]),
    st.randoms(use_true_random=False),
)
# CI found it: 10-2 ran its link at 0.992 of capacity, yet its bottleneck read "drafter"
@example(4, 3, 1, 1.0, 0, None, 6e4, 1.0, 1.0, 0.0, random.Random(0)).via("CI stop 36")
def test_no_projection_above_its_bound_across_nodes(
    gpn, nodes, kp, gbytes, every, sync_bytes, hs_bytes, cap_p, cap_c, sync_s, rnd
):
    """Over G, nodes, every placement in both routings and link speeds: b/s <= the bound, and the bound
    <= every stage's capacity, the link's included (issue 35: 7-9 at 0.921 above its bound 0.918)."""
    from advisor.project.placement import placements
    from advisor.project.table import local_placement, placed_split
    from advisor.settings import Logged, Options
    from advisor.settings import Settings as Opts

    if kp > gpn:
        return
    g = gpn * nodes
    fit = _numbers_fit(every, sync_bytes, hs_bytes, (cap_p, cap_c), sync_s)
    logged = Logged(roles=("target", "drafter"), gpus=g, hs_cap=4, tokens_mean=fit.tokens_mean, tokens_range=(0.0, 0.0))
    opts = Opts(
        options=Options(),
        logged=replace(logged, gpus_per_worker=(kp, 1)),
        gpus=g,
        hs_cap=4,
        tokens_per_batch=fit.tokens_mean,
        gpus_per_worker=(kp, 1),
        gpus_per_node=gpn,
        link_bytes_s=gbytes * 1e9 if gbytes else None,
    )
    pairs = opts.engine_pairs()
    for n, m in rnd.sample(pairs, min(3, len(pairs))):
        every_pl = placements(n, m, nodes, gpn, kp, 1)
        local = local_placement(opts, n, m)
        for pl in every_pl + ([local] if local is not None else []):
            res = placed_split(fit, opts, n, m, pl)
            assert res.x_bps <= res.bound_bps * (1 + 1e-9)
            assert res.bound_bps <= min(res.producer_cap_bps, res.consumer_cap_bps, res.link_cap_bps) * (1 + 1e-9)
            assert 0.0 <= res.link_util <= 1.0 + 1e-9
    df = project(fit, opts, interval=False)
    assert (df["bps"] <= df["bound_bps"] * (1 + 1e-9)).all()
    assert (df["bound_bps"] <= df["cap_link_bps"] * (1 + 1e-9)).all()
    assert ((df["link_hs_share"] + df["link_sync_share"]).round(9).isin([0.0, 1.0])).all()
    # a bottleneck sentence states the link's cost from these columns: it names the link where the link
    # is saturated, and there a free link never gives less
    from advisor.model.chain import LINK_SATURATED

    assert (df.loc[df["link_util"] >= LINK_SATURATED, "bottleneck"] == "link").all()
    link = df["bottleneck"] == "link"
    assert (df.loc[link, "bps_free_link"] >= df.loc[link, "bps"] * (1 - 1e-9)).all()


def test_node_local_pipelines_are_a_layout_of_the_reference_on_two_nodes(reference):
    """Issue 35: two node-local 7-1 pipelines (2 x 0.855 b/s, the drafters not syncing in this log) beat
    14-2 through one shared queue, whose every batch may go to any drafter."""
    adv = advise(reference, gpus=16, gpus_per_node=8, link_gbytes_s=0.8)
    r = adv.splits.loc["14-2"]
    one = advise(reference).splits.loc["7-1"]
    assert r["layout"] == "node-local" and r["placement"].startswith("node-local:")
    assert r["bps"] == pytest.approx(2 * one["bps"], rel=0.01)
    assert r["bps_other_layout"] < 0.5 * r["bps"]  # the shared queue sends half its batches across
    assert r["crossing_share"] == 0.0 and r["link_hs_share"] == 0.0 and r["link_sync_share"] == 0.0
    assert adv.decision.recommended == "14-2"
    assert set(adv.splits["layout"]) == {"shared", "node-local"}
    assert adv.splits.loc["15-1", "layout"] == "shared"  # one drafter cannot sit on both nodes
    assert math.isnan(adv.splits.loc["15-1", "bps_other_layout"])


def test_a_split_that_does_not_divide_runs_uneven_node_local_pipelines(reference):
    """Issue 50: 13-3 on two nodes of 8 was listed at 0.816 b/s through one shared, link-bound queue,
    node-local pipelines being tried only where the split divides over the nodes; one pipeline per node,
    7-1 on one and 6-2 on the other, gives their sum, about 1.645 b/s."""
    import json

    from typer.testing import CliRunner

    from advisor.cli.app import app, route
    from advisor.project.table import local_placement

    args = [str(reference), "--gpus", "16", "--gpus-per-node", "8", "--link-gbytes-s", "0.8"]
    r = CliRunner().invoke(app, route([*args, "--json"]))
    assert r.exit_code == 0, r.output
    row = next(s for s in json.loads(r.stdout)["splits"] if s["roles"] == {"target": 13, "drafter": 3})
    assert row["layout"] == "node-local" and row["placement"] == [
        {"target": 7, "drafter": 1},
        {"target": 6, "drafter": 2},
    ]
    one = advise(reference).splits
    assert row["bps"] == pytest.approx(1.645, abs=0.005)
    assert row["bps"] == pytest.approx(one.at["7-1", "bps"] + one.at["6-2", "bps"], rel=1e-3)
    assert row["other_layout_bps"] == pytest.approx(0.816, abs=0.005)  # the shared queue, simulated
    assert row["bps"] <= row["bound_bps"] and row["link"]["crossing_share"] == 0.0
    text = CliRunner().invoke(app, route(args)).stdout
    assert "node-local: node 0: 7 targets + 1 drafter; node 1: 6 targets + 2 drafters" in text
    # each node holds both roles, as evenly as whole engines allow; none where a node would lack one
    st = advise(reference, gpus=16, gpus_per_node=8).settings
    assert local_placement(st, 11, 5).producers == (6, 5) and local_placement(st, 11, 5).consumers == (2, 3)
    assert local_placement(st, 12, 4).producers == (6, 6) and local_placement(st, 15, 1) is None
    tp2 = advise(reference, gpus=16, gpus_per_node=8, gpus_per_worker="target=2", engine_scaling="target=1").settings
    assert local_placement(tp2, 5, 6).producers == (3, 2) and local_placement(tp2, 5, 6).consumers == (2, 4)


def test_node_local_drafters_sync_over_the_link():
    """A log with sync events and their bytes: node-local pipelines put only the all-reduce on the link,
    2 (L - 1) x its bytes a round of M k batches, and a free link would be faster."""
    path = Path(__file__).resolve().parents[2] / "fixtures" / "h200-1x2.jsonl"
    adv = advise(path, gpus=6, gpus_per_node=3, link_gbytes_s=1.0)
    fit, df = adv.fit, adv.splits
    r = df.loc["4-2"]
    assert r["layout"] == "node-local" and fit.sync.sync_every > 0 and fit.sync.bytes_per_sync
    t_link = 2 * (2 - 1) * fit.sync.bytes_per_sync / 1e9
    assert r["link_util"] == pytest.approx(r["bps"] * t_link / (2 * fit.sync.sync_every), rel=1e-9)
    assert r["link_sync_share"] == 1.0 and r["link_hs_share"] == 0.0
    assert r["bps_free_link"] > r["bps"]
    text = " ".join(adv.recommendation.reasons)
    assert adv.decision.recommended == "4-2" and "only the drafters' sync crosses the 1 GB/s link" in text


def test_a_rates_log_without_tokens_marks_and_reconciles_its_split(tmp_path, reference_rates):
    """No tokens logged: the split the log ran is still the observed row, reconciled in b/s (no
    NaN gap in the caveat), and every row's tok/s is unknown (NaN), never a guess."""
    from conftest import rates_without_tokens

    from advisor.project.table import reconcile

    path = rates_without_tokens(reference_rates, tmp_path / "r.jsonl")
    adv = advise(path)
    df = adv.splits
    assert df["observed"].sum() == 1 and bool(df.at["7-1", "observed"])
    assert df.at["7-1", "observed_bps"] == pytest.approx(adv.fit.observed[0].bps)
    assert df["tok_s"].isna().all() and (df["bps"] > 0).all()
    _, recs = reconcile(adv.fit, adv.settings, project_rows(adv.fit, adv.settings))
    assert len(recs) == 1 and math.isfinite(recs[0].projected_bps) and math.isfinite(recs[0].gap_pct)
    assert "nan" not in recs[0].caveat
