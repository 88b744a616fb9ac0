"""The link's bandwidth measured from an emulated-like log whose crossing batches queue on one link."""

import json

from advisor.fit.bandwidth import fit_link
from advisor.ingest.load import load_log
from advisor.measure.measured import measure_logs


def _log(path, bw=1e9, hs=1000.0):
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
    lines = [head]
    t_link = 0.0
    tgt_t = [0.0, 0.0]
    dr_t = [0.0, 0.0]
    for b in range(400):
        j = b % 2
        tgt_t[j] += 1.0
        lines.append(
            {"ev": "step", "t": tgt_t[j], "role": "target", "worker": j, "batch": b, "tokens": 1000, "busy": 1.0}
        )
        d = (b // 2) % 2 if b % 4 < 2 else 1 - (b // 2) % 2
        start = max(dr_t[d], tgt_t[j])
        xfer = 0.0
        if d != j:  # crosses: FCFS on one link
            begin = max(start, t_link)
            t_link = begin + 1000 * hs / bw
            xfer = t_link - start
        dr_t[d] = start + xfer + 0.3
        lines.append(
            {
                "ev": "step",
                "t": dr_t[d],
                "role": "drafter",
                "worker": d,
                "batch": b,
                "tokens": 1000,
                "busy": xfer + 0.3,
                "xfer": xfer,
            }
        )
    lines.sort(key=lambda o: o["t"])
    path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    return path


def test_bandwidth_is_measured(tmp_path):
    lg = load_log(_log(tmp_path / "x.jsonl"))
    fit = fit_link(measure_logs([lg]))
    assert fit.source == "measured"
    assert abs(fit.bytes_s / 1e9 - 1) < 1e-6
    assert fit.producers_by_node == (1, 1) and fit.consumers_by_node == (1, 1)
