"""benchmarks/validate_link.py: the placements it enumerates, how it matches projections, and one
emulated run of its measuring half (the advisor's half needs the link stage of issue 19)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def vl():
    spec = importlib.util.spec_from_file_location("validate_link_script", ROOT / "benchmarks" / "validate_link.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_every_placement_on_two_nodes_once_up_to_swapping_them(vl):
    # 2 targets + 2 drafters on nodes of 2: (0T 2D | 2T 0D), (1T 1D | 1T 1D); (2T | 2D) is the first swapped
    assert len(vl.placements_on_two_nodes(2, 2, 1, 2)) == 2
    # nodes of 4, 3 TP-2 targets + 2 drafters: node 0 takes 0, 1 or 2 targets; all feasible classes
    texts = vl.placements_on_two_nodes(3, 2, 2, 4)
    assert texts and all(t.startswith("target=") for t in texts)
    keys = {vl.node_counts(vl.place({"target": 3, "drafter": 2}, {"target": 2}, 4, t)) for t in texts}
    assert len(keys) == len(texts)
    assert vl.splits_of(8, 2) == [(1, 6), (2, 4), (3, 2)]


def test_a_projection_is_matched_by_engines_per_node_not_by_worker_order(vl):
    default = {"target": (0, 0), "drafter": (1, 1)}
    rows = [{"roles": {"target": 2, "drafter": 2}, "bps": 5.0,
             "placements": [{"placement": {"target": [1, 0], "drafter": [0, 1]}, "bps": 6.0}]},
            {"roles": {"target": 3, "drafter": 1}, "bps": 4.0}]
    assert vl.projection(rows, 2, 2, {"target": (0, 1), "drafter": (1, 0)}, default) == 6.0
    assert vl.projection(rows, 2, 2, {"target": (1, 1), "drafter": (0, 0)}, default) is None   # not projected
    assert vl.projection(rows, 3, 1, {"target": (0, 0, 1), "drafter": (1,)},
                         {"target": (0, 0, 1), "drafter": (1,)}) == 4.0          # a row without placement: default
    assert vl.projection(rows, 3, 1, {"target": (1, 1, 0), "drafter": (0,)},
                         {"target": (0, 0, 1), "drafter": (1,)}) == 4.0          # the default with nodes swapped
    assert vl.projection(rows, 3, 1, {"target": (0, 1, 1), "drafter": (1,)}, {"target": (0, 0, 1), "drafter": (1,)}) \
        is None


@pytest.mark.slow
def test_the_measuring_half_runs_the_emulation_across_nodes(vl, tmp_path, capsys):
    rc = vl.main(["--gpus", "2", "--gpus-per-node", "1", "--steps", "60", "--emulate-only", "--keep", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "| 1-1 | node 0: 1T 0D | node 1: 0T 1D | - |" in out
    assert (tmp_path / "1x1-p0.jsonl").is_file()
