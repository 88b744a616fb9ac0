"""The table's role-named column names (advisor.project.columns): one spelling, read and written."""

from __future__ import annotations

from dataclasses import astuple

from advisor.advice import advise
from advisor.project.columns import role_columns


def test_each_role_names_its_columns():
    pc, cc = role_columns(("target", "drafter"))
    assert (pc.workers, pc.cap_bps, pc.wait_share) == ("n_target", "cap_target_bps", "target_blocked")
    assert (cc.workers, cc.cap_bps, cc.wait_share) == ("n_drafter", "cap_drafter_bps", "drafter_starved")
    assert (cc.gpus, cc.gpus_per_worker, cc.engines_by_node) == ("gpus_drafter", "gpus_per_drafter", "nodes_drafter")


def test_the_table_writes_under_those_names(reference):
    # across nodes the table has every role-named column: each name of the record is one of its columns
    adv = advise(reference, gpus_per_node=4)
    for cols in role_columns(adv.roles):
        assert set(astuple(cols)) <= set(adv.splits.columns)
