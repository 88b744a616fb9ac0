import json
from dataclasses import replace

import pytest
from synth import reference_scenario, write_log
from typer.testing import CliRunner

from advisor.cli.app import app

runner = CliRunner()


@pytest.fixture(scope="module")
def tp2_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("tp2") / "tp2.jsonl"
    write_log(path, replace(reference_scenario(duration_s=3000.0), n_target=3, n_drafter=2, gpus_per_target=2))
    return path


def test_tp2_targets_give_only_feasible_splits(tp2_log):
    r = runner.invoke(app, ["advise", str(tp2_log), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["gpus"] == 8
    assert [s["gpus_by_role"] for s in d["splits"]] == [
        {"target": 6, "drafter": 2},
        {"target": 4, "drafter": 4},
        {"target": 2, "drafter": 6},
    ]
    for s in d["splits"]:
        # GPU utilisation counts both GPUs of a target engine: busy target GPU-s = 2 x bps / mu_t
        assert 0 < s["gpu_util"] <= 1


def test_gpu_util_counts_gpus(tp2_log):
    d = json.loads(runner.invoke(app, ["advise", str(tp2_log), "--json"]).output)
    row = d["splits"][0]
    cap_t = row["capacities_bps"]["target"] / 3  # one engine's rate
    cap_d = row["capacities_bps"]["drafter"] / 2
    expect = (row["bps"] / cap_t * 2 + row["bps"] / cap_d * 1) / 8
    assert row["gpu_util"] == pytest.approx(expect, rel=2e-3)


def test_gpus_not_divisible_names_the_option(tp2_log):
    r = runner.invoke(
        app, ["advise", str(tp2_log), "--gpus", "7", "--gpus-per-worker", "drafter=2", "--engine-scaling", "drafter=1"]
    )
    assert r.exit_code == 2
    assert "--gpus: 7 GPUs cannot be split" in r.output


def test_other_engine_size_needs_scaling(tp2_log):
    r = runner.invoke(app, ["advise", str(tp2_log), "--gpus-per-worker", "target=4"])
    assert r.exit_code == 2 and "--engine-scaling" in r.output
    r = runner.invoke(
        app, ["advise", str(tp2_log), "--gpus-per-worker", "target=4", "--engine-scaling", "target=0.9", "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert all(s["gpus_by_role"]["target"] % 4 == 0 for s in d["splits"])
    assert any("--engine-scaling" in w for w in d["warnings"])


def test_two_nodes_give_a_placement(tp2_log):
    r = runner.invoke(app, ["advise", str(tp2_log), "--gpus", "16", "--gpus-per-node", "8", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert all("placement_text" in s for s in d["splits"])
    assert any("link between nodes is taken as free" in w for w in d["warnings"])


def test_what_if_engines():
    r = runner.invoke(
        app,
        [
            "what-if",
            "--targets",
            "3",
            "--drafters",
            "2",
            "--target-bps",
            "0.9",
            "--drafter-bps",
            "1.0",
            "--gpus-per-worker",
            "target=2",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert [s["roles"]["target"] for s in d["splits"]] == [3, 2, 1]


def test_gate_toml_counts_gpus(tp2_log, tmp_path):
    cfg = tmp_path / "gate.toml"
    cfg.write_text(
        f'profile = ["{tp2_log}"]\nmin_gpu_util = 0.1\nmetric = "gpu_util"\n[roles]\ntarget = 2\ndrafter = 4\n'
        "[gpus_per_worker]\ntarget = 2\n"
    )
    r = runner.invoke(app, ["check", str(cfg), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["gate"]["roles"] == {"target": 2, "drafter": 4}
    planned = tmp_path / "plan.toml"  # no gpus: the GPUs of the planned engines, 3 x 2 + 4
    planned.write_text(f'profile = ["{tp2_log}"]\n[roles]\ntarget = 3\ndrafter = 4\n')
    r = runner.invoke(app, ["check", str(planned), "--json"])
    assert r.exit_code in (0, 1), r.output
    assert json.loads(r.output)["gpus"] == 10


def test_a_planned_cluster_of_another_size_reads_the_profile_once(tp2_log, tmp_path, monkeypatch):
    """The gate sizes G from the planned engines inside one advice: the logs are read once."""
    from advisor import advice
    from advisor.cli.check import run_check

    reads = []
    real = advice.load_logs
    monkeypatch.setattr(advice, "load_logs", lambda paths: reads.append(list(paths)) or real(paths))
    planned = tmp_path / "plan.toml"
    planned.write_text(f'profile = ["{tp2_log}"]\n[roles]\ntarget = 3\ndrafter = 4\n')
    adv = run_check([planned])
    assert adv.gpus == 10 and len(reads) == 1


def test_two_nodes_json_carries_the_layout_and_the_links_traffic():
    """Issue 35: the reference on two nodes: node-local 14-2 is a candidate layout, and every split
    says its layout and what the link carries (hidden state against sync)."""
    from pathlib import Path

    ref = Path(__file__).resolve().parents[2] / "fixtures" / "reference-7x1.jsonl"
    r = runner.invoke(
        app, ["advise", str(ref), "--gpus", "16", "--gpus-per-node", "8", "--link-gbytes-s", "0.8", "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    by = {f"{s['roles']['target']}-{s['roles']['drafter']}": s for s in d["splits"]}
    assert by["14-2"]["layout"] == "node-local" and by["14-2"]["other_layout_bps"] < by["14-2"]["bps"]
    assert by["13-3"]["layout"] == "node-local" and by["13-3"]["other_layout_bps"] < by["13-3"]["bps"]  # 7-1, 6-2
    assert by["15-1"]["layout"] == "shared" and by["15-1"]["other_layout_bps"] is None  # one drafter, two nodes
    for s in d["splits"]:
        link = s["link"]
        assert {"hs_share", "sync_share"} <= set(link)
        assert s["bps"] <= s["bound_bps"] * (1 + 1e-4)
        if link["util"] > 0:
            assert link["hs_share"] + link["sync_share"] == pytest.approx(1.0, abs=1e-3)
    assert d["recommendation"]["roles"] == {"target": 14, "drafter": 2}
    assert any("sync_every 0" in w for w in d["warnings"])
