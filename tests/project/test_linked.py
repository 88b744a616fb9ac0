"""Across nodes, the splits near the best are simulated with the link (advisor.project.linked)."""

import json

import pytest

from advisor.advice import advise, splits_frame


def _two_node_log(path, bw=2e8, hs=1000.0):
    """Two targets and two drafters, one of each per node, one FCFS link; steps in time order."""
    head = {
        "ev": "run",
        "v": 1,
        "t": 0.0,
        "roles": {"target": 2, "drafter": 2},
        "gpus_per_node": 2,
        "placement": {"target": [0, 1], "drafter": [0, 1]},
        "hs_bytes_per_token": hs,
        "queues": [{"name": "hs", "feeds": "drafter", "cap": 4}],
    }
    lines, t_link, tgt_t, dr_t = [head], 0.0, [0.0, 0.0], [0.0, 0.0]
    for b in range(600):
        j = b % 2
        busy = 1.0 + 0.01 * ((b * 7) % 5)
        tgt_t[j] += busy
        lines.append(
            {"ev": "step", "t": tgt_t[j], "role": "target", "worker": j, "batch": b, "tokens": 1000, "busy": busy}
        )
        d = 0 if dr_t[0] <= dr_t[1] else 1
        start = max(dr_t[d], tgt_t[j])
        xfer = 0.0
        if d != j:
            begin = max(start, t_link)
            t_link = begin + 1000 * hs / bw
            xfer = t_link - start
        dr_t[d] = start + xfer + 0.4
        lines.append(
            {
                "ev": "step",
                "t": dr_t[d],
                "role": "drafter",
                "worker": d,
                "batch": b,
                "tokens": 1000,
                "busy": xfer + 0.4,
                "xfer": xfer,
                "wait": 0.0,
            }
        )
    lines.append({"ev": "end", "t": max(dr_t)})
    lines[1:-1] = sorted(lines[1:-1], key=lambda o: o["t"])
    path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    return path


def test_rows_near_the_best_are_simulated(tmp_path):
    adv = advise(_two_node_log(tmp_path / "two.jsonl"))
    df = adv.splits
    assert "placement" in df and adv.settings.link_source == "measured"
    exact = df[df["method"] == "exact"]
    assert len(exact) >= 1
    assert ((exact["crossing_share"] >= 0) & (exact["crossing_share"] <= 1)).all()
    assert (exact["bps"] <= exact["bound_bps"] * 1.05).all()
    assert set(df["bottleneck"]) <= {"target", "drafter", "link"}


def test_a_simulated_row_stays_within_its_bound(reference):
    """Issue 35: 7-9 on two nodes of 8 was simulated at 0.921 b/s above its own bound 0.918 (the link's
    capacity from the mean batch, not from the batches simulated)."""
    from dataclasses import replace

    from advisor.ingest.load import load_logs
    from advisor.project.linked import refine_placements
    from advisor.project.table import project

    adv = advise(reference, gpus=16, gpus_per_node=8, link_gbytes_s=0.8)
    st = adv.settings
    # both divide over the nodes too (node-local since issue 50): the shared queue is what is simulated
    shared = project(adv.fit, st, pairs=[(7, 9), (9, 7)], routing="shared")
    df = splits_frame(refine_placements(adv.fit, tuple(load_logs([reference])), st, shared))
    assert (df["method"] == "exact").all()
    assert (df["bps"] <= df["bound_bps"]).all() and (df["bps"] <= df["cap_link_bps"]).all()
    assert (df["bps_free_link"] >= df["bps"]).all()
    # with a free link nothing crosses a capacity of the link
    free = refine_placements(
        adv.fit,
        tuple(load_logs([reference])),
        replace(st, link_bytes_s=None),
        project(adv.fit, replace(st, link_bytes_s=None), pairs=[(7, 9)], routing="shared"),
    )
    free = splits_frame(free)
    assert (free["bps"] <= free["bound_bps"]).all()


def test_the_link_bottleneck_sentence_states_the_cost_it_rests_on(reference):
    """Issue 35: "At 7-9 the link is the bottleneck" beside "the link costs 0.1% against a free one": the
    sentence names the link's capacity and the cost from the same row as the placement sentence."""
    from advisor.decide.reasons import bps_text

    # 15-1: its one drafter cannot run node-locally (since issue 50 9-7 does, as 5-3 and 4-4 pipelines)
    adv = advise(reference, gpus=16, gpus_per_node=8, link_gbytes_s=0.8, roles={"target": 15, "drafter": 1})
    r = adv.splits.loc["15-1"]
    assert r["bottleneck"] == "link" and r["layout"] == "shared"
    first = adv.recommendation.reasons[0]
    assert first.lower().startswith("at 15-1 the link is the bottleneck")
    assert f"its capacity {bps_text(r['cap_link_bps'])} b/s" in first
    cost = 100 * (1 - r["bps"] / r["bps_free_link"])
    assert cost > 0 and f"the link costs {cost:.1f}% against a free one" in first
    assert r["bps"] <= r["cap_link_bps"] * (1 + 1e-9)


def test_a_shared_queue_simulated_below_node_local_pipelines_gives_way(tmp_path, monkeypatch):
    """Where the simulated shared queue falls below the split's node-local pipelines, the row becomes
    the node-local one, the simulated rate kept as the other layout's."""
    from dataclasses import replace

    from advisor.ingest.load import load_logs
    from advisor.project import linked
    from advisor.project.exact import PlacedRun
    from advisor.project.table import project

    path = _two_node_log(tmp_path / "two.jsonl")
    adv = advise(path)
    st = adv.settings
    (shared,) = project(adv.fit, st, pairs=[(2, 2)], routing="shared")
    (local,) = project(adv.fit, st, pairs=[(2, 2)], routing="local")
    assert shared.link.layout == "shared" and local.link.layout == "node-local"
    shared = replace(shared, link=replace(shared.link, other_layout_bps=local.bps))
    slow = 0.5 * local.bps
    monkeypatch.setattr(
        linked, "simulate_placed_run", lambda *a, **k: PlacedRun(bps=slow, crossing_share=0.5, link_s_per_batch=0.01)
    )
    (out,) = linked.refine_placements(adv.fit, tuple(load_logs([path])), st, (shared,))
    assert out.link.layout == "node-local" and out.method == "analytic"
    assert out.bps == local.bps
    assert out.link.other_layout_bps == slow


def test_the_observed_split_keeps_the_capacities_of_the_queue_it_ran(tmp_path):
    """Where the table lays the observed split out node-locally, the observed line still describes the
    one shared q_hs the log ran, at the log's own placement."""
    from advisor.project.table import logged_placement, placed_split

    adv = advise(_two_node_log(tmp_path / "two.jsonl", bw=5e7))
    assert adv.splits.at["2-2", "layout"] == "node-local" and adv.splits.at["2-2", "observed"]
    own = placed_split(adv.fit, adv.settings, 2, 2, logged_placement(adv.fit, adv.settings))
    assert adv.observed.capacities_bps["drafter"] == own.consumer_cap_bps
    # the roles' own capacities are the layout's alike; the shared queue's batches cross the link
    assert own.consumer_cap_bps == adv.splits.at["2-2", "cap_drafter_bps"]
    assert own.crossing_share > 0 and adv.splits.at["2-2", "crossing_share"] == 0


def test_the_observed_line_of_a_link_bound_log_names_the_link():
    """Issue 50: the observed line took the drafters' capacity with their waits on the link (the link's, in
    effect) and called a link-bound log drafter-bound; it gives the roles' own capacities, the link's beside
    them, and the table's bottleneck: the link."""
    import tempfile
    from pathlib import Path

    from advisor.project.table import logged_placement, placed_split

    with tempfile.TemporaryDirectory() as tmp:
        adv = advise(_two_node_log(Path(tmp) / "two.jsonl", bw=5e5))
    ob = adv.observed
    at_log = placed_split(adv.fit, adv.settings, 2, 2, logged_placement(adv.fit, adv.settings))
    assert ob.bottleneck == "link" and at_log.bottleneck == "link"
    assert ob.capacities_bps["link"] == at_log.link_cap_bps and ob.capacities_bps["drafter"] == pytest.approx(5.0)
    assert ob.efficiency == ob.bps / max(ob.capacities_bps["target"], ob.capacities_bps["drafter"])
