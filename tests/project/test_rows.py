"""The table's rows as records (advisor.project.rows): the same numbers as the DataFrame view,
one record per split, read by decide/ and present/."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.advice import advise, splits_frame
from advisor.model.chain import ERR_CORNERS, ERR_SHARED
from advisor.present.json import advice_json
from advisor.project.rows import RoleRow, SplitRow


def _same(a: float, b) -> bool:
    b = float(b)
    return (math.isnan(a) and math.isnan(b)) or a == b


def _check_against_table(adv) -> None:
    df, p, c = adv.splits, *adv.roles
    assert list(adv.rows) == [str(x) for x in df.index]
    for label, row in adv.rows.items():
        assert row.label == label and row.counts == (df.at[label, f"n_{p}"], df.at[label, f"n_{c}"])
        assert _same(row.producer.cap_bps, df.at[label, f"cap_{p}_bps"])
        assert _same(row.consumer.cap_bps, df.at[label, f"cap_{c}_bps"])
        assert _same(row.producer.wait_share, df.at[label, f"{p}_blocked"])
        assert _same(row.consumer.wait_share, df.at[label, f"{c}_starved"])
        assert (row.producer.gpus, row.consumer.gpus) == (df.at[label, f"gpus_{p}"], df.at[label, f"gpus_{c}"])
        for name in ("bps", "bps_low", "bps_high", "tok_s", "eta_s", "efficiency", "observed_bps", "cap_loader_bps"):
            assert _same(getattr(row, name), df.at[label, name]), name
        assert (row.bottleneck, row.observed, row.widened) == (
            df.at[label, "bottleneck"],
            bool(df.at[label, "observed"]),
            bool(df.at[label, "widened"]),
        )


def test_each_record_carries_its_rows_numbers(reference):
    adv = advise(reference)
    _check_against_table(adv)
    assert adv.rows["7-1"].observed and adv.rows["7-1"].link is None
    assert adv.rows is adv.decision.rows  # built once, carried by the decision


def test_across_nodes_the_record_carries_the_placement(reference):
    adv = advise(reference, gpus_per_node=4)
    _check_against_table(adv)
    df, p, c = adv.splits, *adv.roles
    placed = [label for label in df.index if isinstance(df.at[label, "placement"], str)]
    assert placed
    for label in placed:
        row = adv.rows[label]
        assert row.link is not None and row.link.placement_text == df.at[label, "placement"]
        assert row.producer.engines_by_node == tuple(df.at[label, f"nodes_{p}"])
        assert row.consumer.engines_by_node == tuple(df.at[label, f"nodes_{c}"])
        assert sum(row.producer.engines_by_node) == row.producer.workers


def test_the_json_and_the_judged_split_are_laid_out_from_the_records(reference):
    adv = advise(reference)
    doc = advice_json(adv)
    p, c = adv.roles
    for split, row in zip(doc["splits"], adv.rows.values()):
        assert split["roles"] == {p: row.producer.workers, c: row.consumer.workers}
        assert split["capacities_bps"][p] == round(row.producer.cap_bps, 4)
    assert doc["recommendation"]["roles"] == dict(zip(adv.roles, adv.rows[adv.decision.recommended].counts))


def test_a_role_of_another_name_is_refused(reference):
    row = advise(reference).rows["7-1"]
    assert row.of("drafter") is row.consumer and row.of("target") is row.producer
    with pytest.raises(KeyError, match="no role 'critic'"):
        row.of("critic")
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.bps = 0.0  # type: ignore[misc]


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 64),
    m=st.integers(1, 64),
    cap=st.floats(0.0, 1e6, allow_nan=False),
    share=st.floats(0.0, 1.0),
    exact=st.booleans(),
    probed=st.booleans(),
)
def test_a_row_writes_its_roles_under_their_names(n, m, cap, share, exact, probed):
    # whatever the roles are called, each field lands in its role-named column
    row = SplitRow(
        label=f"{n}-{m}",
        producer=RoleRow("a", n, cap, share, n, 1),
        consumer=RoleRow("b", m, 2 * cap, 1 - share, 2 * m, 2),
        bps=1.0,
        bps_low=0.5,
        bps_high=2.0,
        bps_exact=1.1 if exact else None,
        probe_segments=3 if probed else 0,
    )
    cols = row.columns(probed)
    assert (cols["n_a"], cols["n_b"], cols["cap_a_bps"], cols["cap_b_bps"]) == (n, m, cap, 2 * cap)
    assert (cols["a_blocked"], cols["b_starved"], cols["gpus_b"], cols["gpus_per_b"]) == (share, 1 - share, 2 * m, 2)
    assert ("bps_exact" in cols) == exact and ("probe_segments" in cols) == probed and "placement" not in cols
    assert "err_own_var" not in cols and math.isnan(cols["err_model_miss"])  # no parts: none in the columns
    table = splits_frame([row])
    assert list(table.index) == [f"{n}-{m}"] and list(table.columns) == list(cols)


def test_each_record_carries_its_intervals_parts(reference):
    adv = advise(reference, gpus_per_node=4)
    df = adv.splits
    for label, row in adv.rows.items():
        parts = row.parts
        assert parts is not None
        assert all(_same(a, df.at[label, k]) for a, k in zip(parts.shared_log_per_se, ERR_SHARED, strict=True))
        assert _same(parts.own_var_log2, df.at[label, "err_own_var"])
        assert _same(parts.sync_ends_log[0], df.at[label, "err_sync_lo"])
        assert _same(parts.sync_ends_log[1], df.at[label, "err_sync_hi"])
        want = [df.at[label, k] if k in df.columns else 0.0 for k in ERR_CORNERS]
        assert all(_same(a, b) for a, b in zip(parts.corners_log, want, strict=True))
