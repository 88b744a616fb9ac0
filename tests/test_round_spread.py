"""The round-spread table (benchmarks/round_spread.py): one line per sweep whose drafters sync."""

from __future__ import annotations

import re

from conftest import load_script

SPREAD = load_script("benchmarks/round_spread.py", "round_spread_harness")


def test_a_sweep_synced_every_step_spreads_about_as_independent_steps(capsys):
    assert SPREAD.main(["sync1g12", "cpu16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [x.split(" ")[0] for x in lines] == ["sync1g12", "cpu16"]
    cells = {x.split(" ")[0]: re.findall(r"(\d+-\d+) ([0-9.]+):([0-9.]+)\((\d+)\)", x) for x in lines}
    assert len(cells["sync1g12"]) == 10 and lines[0].startswith("sync1g12 k=1:")
    # k = 1: a round is one step, so the ratio is near 1; k = 10 on the 16-core host: above 1.5
    assert all(0.7 < float(r) < 1.1 for _, _, r, _ in cells["sync1g12"])
    assert all(float(r) > 1.5 for _, _, r, _ in cells["cpu16"])
    shares = [float(u) for _, u, _, _ in cells["cpu16"]]
    assert shares == sorted(shares) and all(0 < u <= 1 for u in shares)
