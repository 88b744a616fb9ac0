"""Emulated nodes (trainer/placement.py): placement text, the default rule, overfilled nodes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.config import ConfigError, make_config
from trainer.placement import PlacementError, default_placement, nodes_used, parse_placement, place


def test_placement_text_parses_per_role():
    assert parse_placement("target=0,0,1,1;drafter=1,1") == {"target": [0, 0, 1, 1], "drafter": [1, 1]}
    assert parse_placement(" drafter = 1 ; ") == {"drafter": [1]}
    for bad, why in (
        ("target", "role=node"),
        ("target=0;target=1", "twice"),
        ("target=a", "whole numbers"),
        ("target=-1", "whole numbers"),
    ):
        with pytest.raises(PlacementError, match=why):
            parse_placement(bad)


def test_the_default_rule_fills_nodes_in_pipeline_order_and_keeps_an_engine_on_one_node():
    # 3 TP-2 targets + 2 drafters on nodes of 4: targets 0-1 fill node 0
    assert default_placement({"target": 3, "drafter": 2}, {"target": 2}, 4) == {"target": (0, 0, 1), "drafter": (1, 1)}
    # an engine that would straddle a node starts on the next one: 1 + 2 + 2 on nodes of 3
    assert default_placement({"drafter": 1, "target": 2}, {"target": 2}, 3) == {"drafter": (0,), "target": (0, 1)}
    with pytest.raises(PlacementError, match="holds 4 GPUs, more than a node's 2"):
        default_placement({"target": 1, "drafter": 1}, {"target": 4}, 2)


def test_a_given_placement_is_checked_against_the_roles_and_the_nodes():
    engines, k = {"target": 2, "drafter": 2}, {"target": 2}
    assert place(engines, k, 4, "drafter=1,1") == {"target": (0, 0), "drafter": (1, 1)}  # targets by default
    assert place(engines, k, 4, "target=0,1;drafter=0,1") == {"target": (0, 1), "drafter": (0, 1)}
    with pytest.raises(PlacementError, match="node 0 holds 5 GPUs"):
        place(engines, k, 4, "target=0,0;drafter=0,1")
    with pytest.raises(PlacementError, match="3 nodes given for 2 engines"):
        place(engines, k, 4, "target=0,1,1")
    with pytest.raises(PlacementError, match="unknown role 'verifier'"):
        place(engines, k, 4, "verifier=0")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 8), st.integers(1, 3), st.integers(1, 8))
def test_the_default_rule_never_overfills_a_node(n, m, k, gpn):
    engines, gpw = {"target": n, "drafter": m}, {"target": k}
    if k > gpn:
        with pytest.raises(PlacementError):
            place(engines, gpw, gpn)
        return
    p = place(engines, gpw, gpn)
    load = {}
    for role, nodes in p.items():
        assert len(nodes) == engines[role] and list(nodes) == sorted(nodes)
        for node in nodes:
            load[node] = load.get(node, 0) + gpw.get(role, 1)
    assert max(load.values()) <= gpn and sorted(load) == list(range(nodes_used(p)))


def test_node_options_are_emulation_only_and_need_gpus_per_node(tmp_path):
    src = tmp_path / "src.jsonl"
    src.write_text("{}\n")
    with pytest.raises(ConfigError, match="link_bytes_s: is emulated only"):
        make_config(targets=1, drafters=1, out="x.jsonl", link_bytes_s=1e9)
    with pytest.raises(ConfigError, match="gpus_per_node: is needed with a link"):
        make_config(targets=1, drafters=1, out="x.jsonl", emulate=str(src), link_bytes_s=1e9)
    with pytest.raises(ConfigError, match="placement: node 1 holds 3 GPUs"):
        make_config(targets=1, drafters=3, out="x.jsonl", emulate=str(src), gpus_per_node=2, placement="drafter=1,1,1")
    with pytest.raises(ConfigError, match="link_bytes_s: must be a number > 0"):
        make_config(targets=1, drafters=1, out="x.jsonl", emulate=str(src), gpus_per_node=2, link_bytes_s=0.0)
