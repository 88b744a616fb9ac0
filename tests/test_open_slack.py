"""The open-bound slack table (benchmarks/open_slack.py): the idle role's room per split."""

from __future__ import annotations

import re

from conftest import load_script

SLACK = load_script("benchmarks/open_slack.py", "open_slack_harness")


def test_the_idle_role_lies_above_the_throughput_and_more_so_far_from_the_balance(capsys):
    assert SLACK.main(["ded16"]) == 0
    head, summary = capsys.readouterr().out.splitlines()
    cells = dict(((s, r), float(x)) for s, r, x in re.findall(r"(\d+-\d+) (target|drafter) ([0-9.]+)x", head))
    # ded16 (G = 6): 4-2 is near the balance; the drafters idle more the fewer targets feed them
    assert set(cells) >= {("2-4", "drafter"), ("3-3", "drafter"), ("4-2", "drafter"), ("5-1", "target")}
    assert all(x >= 1.0 for x in cells.values())
    assert cells["2-4", "drafter"] > cells["3-3", "drafter"] > cells["4-2", "drafter"]
    n, mean, largest = re.match(r"(\d+) splits: mean log slack ([0-9.]+) .* largest ([0-9.]+)", summary).groups()
    assert int(n) == len(cells) and 0.0 < float(mean) <= float(largest)
