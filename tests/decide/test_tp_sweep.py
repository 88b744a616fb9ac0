"""The real TP-2 sweep (fixtures/sweep/tp2cpu16): only feasible splits of 8 GPUs, GPUs counted by
role, and from every single log the measured best split (2-4 engines: 4 + 4 GPUs)."""

from pathlib import Path

import pytest

from advisor import advise
from advisor.present.json import advice_json

SWEEP = Path(__file__).resolve().parents[2] / "fixtures" / "sweep" / "tp2cpu16"
LOGS = sorted(SWEEP.glob("*.jsonl.gz"))


def test_the_sweep_is_there():
    assert len(LOGS) == 6


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name.split(".")[0])
def test_every_log_enumerates_engines_and_picks_the_measured_best(log):
    j = advice_json(advise(log))
    assert j["gpus"] == 8
    rows = {(s["roles"]["target"], s["roles"]["drafter"]): s for s in j["splits"]}
    assert set(rows) == {(1, 6), (2, 4), (3, 2)}  # N x 2 + M = 8, nothing else
    for (n, m), s in rows.items():
        assert s["gpus_by_role"] == {"target": 2 * n, "drafter": m}
    assert j["recommendation"]["roles"] == {"target": 2, "drafter": 4}
