"""Across nodes, the splits near the best are simulated with the link (advisor.project.linked)."""
import json

from advisor.advice import advise


def _two_node_log(path, bw=2e8, hs=1000.0):
    """Two targets and two drafters, one of each per node, one FCFS link; steps in time order."""
    head = {"ev": "run", "v": 1, "t": 0.0, "roles": {"target": 2, "drafter": 2}, "gpus_per_node": 2,
            "placement": {"target": [0, 1], "drafter": [0, 1]}, "hs_bytes_per_token": hs,
            "queues": [{"name": "hs", "feeds": "drafter", "cap": 4}]}
    lines, t_link, tgt_t, dr_t = [head], 0.0, [0.0, 0.0], [0.0, 0.0]
    for b in range(600):
        j = b % 2
        busy = 1.0 + 0.01 * ((b * 7) % 5)
        tgt_t[j] += busy
        lines.append({"ev": "step", "t": tgt_t[j], "role": "target", "worker": j, "batch": b, "tokens": 1000,
                      "busy": busy})
        d = 0 if dr_t[0] <= dr_t[1] else 1
        start = max(dr_t[d], tgt_t[j])
        xfer = 0.0
        if d != j:
            begin = max(start, t_link)
            t_link = begin + 1000 * hs / bw
            xfer = t_link - start
        dr_t[d] = start + xfer + 0.4
        lines.append({"ev": "step", "t": dr_t[d], "role": "drafter", "worker": d, "batch": b, "tokens": 1000,
                      "busy": xfer + 0.4, "xfer": xfer, "wait": 0.0})
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
