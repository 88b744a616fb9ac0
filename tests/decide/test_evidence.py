"""Evidence: thin logs are recognised, drift is measured against its own noise."""

from __future__ import annotations

import numpy as np

from advisor.advice import advise
from advisor.decide.evidence import halves_drift


def test_steady_reference_is_not_thin(reference):
    ev = advise(reference).decision.evidence
    assert not ev.thin and ev.batches > 1000 and abs(ev.drift_pct) < 5


def test_short_head_is_thin(reference, tmp_path):
    head = tmp_path / "head.jsonl"
    head.write_bytes(b"".join(reference.read_bytes().splitlines(keepends=True)[:100]))
    ev = advise(head).decision.evidence
    assert ev.thin and ev.why_thin()


def test_drift_recovers_a_rate_step():
    rng = np.random.default_rng(0)
    slow = np.cumsum(rng.exponential(1.0, 2000))
    fast = slow[-1] + np.cumsum(rng.exponential(1 / 1.3, 2600))
    t = np.concatenate([slow, fast])
    d, z = halves_drift(t, 0.0, float(t[-1]))
    assert d > 15 and z > 3
    flat = np.cumsum(rng.exponential(1.0, 4000))
    d, z = halves_drift(flat, 0.0, float(flat[-1]))
    assert abs(d) < 5 and z < 3
