"""Frames from columns (advisor.ingest.load)."""

from __future__ import annotations

import numpy as np
import pytest


def test_steps_frame_columns_and_types():
    """The steps frame keeps its columns as given (no consolidating copy): wait/blocked NaN -> 0,
    worker and tokens int64 (pandas' error on a non-finite one), role categorical, time order."""
    from advisor.ingest.load import steps_frame
    from advisor.ingest.schema import parse_header

    head = parse_header({"ev": "run", "v": 1, "t": 0, "run": "x", "roles": {"target": 1, "drafter": 1}}, "x", 1)
    cols = {
        "t": np.array([2.0, 1.0, 3.0]),
        "worker": np.array([0.0, 0.0, 1.0]),
        "batch": np.array([1.0, 0.0, 2.0]),
        "tokens": np.array([10.0, 20.0, 30.0]),
        "seqs": np.array([np.nan, 1.0, 2.0]),
        "busy": np.array([0.5, 0.25, 0.75]),
        "wait": np.array([np.nan, 0.1, -0.0]),
        "blocked": np.array([0.0, np.nan, np.nan]),
        "loss": np.full(3, np.nan),
    }
    df = steps_frame(cols, np.array([0, 1, 0]), head)
    # the columns advisor/ingest/runlog.py documents, in its order
    assert list(df.columns) == ["t", "role", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss"]
    assert df["worker"].dtype == np.int64 and df["tokens"].dtype == np.int64
    assert list(df["role"].astype(str)) == ["drafter", "target", "target"]
    np.testing.assert_array_equal(df["t"].to_numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(df["wait"].to_numpy(), [0.1, 0.0, -0.0])
    np.testing.assert_array_equal(df["blocked"].to_numpy(), [0.0, 0.0, 0.0])
    assert np.isnan(df["seqs"].to_numpy()[1]) and np.isnan(df["loss"].to_numpy()).all()
    assert list(df.index) == [0, 1, 2]
    bad = dict(cols, tokens=np.array([10.0, np.nan, 30.0]))
    with pytest.raises(ValueError):
        steps_frame(bad, np.array([0, 1, 0]), head)
