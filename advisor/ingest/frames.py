"""Frames from columns: the documented ``steps`` and ``rates`` DataFrames of a `RunLog`.

Column arrays (numpy float64, as a summary samples them; role as codes into the header's roles)
become the frames documented in `advisor.ingest.runlog`, vectorized (no Python object per row);
the ``syncs`` and ``rates`` frames are their columns as they are. pandas is imported where a frame is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.ingest.schema import RunHeader
from advisor.records import Rates, Step

if TYPE_CHECKING:
    import pandas as pd

STEP_COLUMNS = Step.KEYS
RATES_SCALARS = tuple(n for n, s in Rates.SPECS.items() if s.kind is not object)  # the rates frame's scalars


def steps_frame(cols: Mapping[str, Any], codes: np.ndarray, header: RunHeader) -> pd.DataFrame:
    """The documented ``steps`` frame from columns and role codes, sorted by t."""
    import pandas as pd

    # the columns as they are, one block each (copy=False): consolidating them into one 2-D block
    # copied every row of a sampled log once more
    data: dict[str, Any] = {}
    for c in STEP_COLUMNS + (("xfer",) if "xfer" in cols else ()):
        if c == "role":
            data[c] = pd.Categorical.from_codes(codes, categories=list(header.roles))
            continue
        v = np.asarray(cols[c])
        if c in ("wait", "blocked"):
            nan = np.isnan(v)
            if nan.any():
                v = np.where(nan, 0.0, v)  # fillna(0.0)
        elif c in ("worker", "tokens"):
            # pandas' cast where it is plain (its error on a non-finite value otherwise)
            v = v.astype(np.int64) if np.isfinite(v).all() else pd.Series(v).astype(np.int64).to_numpy()
        data[c] = v
    return _by_t(pd.DataFrame(data, copy=False))


def _by_t(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` sorted by t (stable), where it is not in order already."""
    if len(frame) > 1 and (np.diff(frame["t"].to_numpy()) < 0).any():
        frame = frame.sort_values("t", kind="stable").reset_index(drop=True)
    return frame


def syncs_frame(cols: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The ``syncs`` frame from its columns, sorted by t."""
    import pandas as pd

    return _by_t(pd.DataFrame(cols))


def rates_columns_frame(cols: Mapping[str, np.ndarray], *, merged: bool) -> pd.DataFrame:
    """The ``rates`` frame from its columns."""
    import pandas as pd

    rates = pd.DataFrame(cols)
    return _by_t(rates) if merged else rates
