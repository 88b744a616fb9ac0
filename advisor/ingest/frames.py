"""Frames from columns: the documented ``steps`` and ``rates`` DataFrames of a `RunLog`.

Column arrays (numpy; role as codes into the header's roles) become the frames documented in
`advisor.ingest.runlog`, vectorized (no Python object per row); an Arrow table of rates events
becomes the rates frame's columns (`rates_columns`, numpy only), the ``syncs`` frame is its
columns as they are. pandas is imported where a frame is made: reading a log needs only numpy
and pyarrow.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from advisor.ingest.schema import RunHeader

if TYPE_CHECKING:
    import pandas as pd

STEP_COLUMNS = ("t", "role", "worker", "batch", "tokens", "seqs", "busy", "wait", "blocked", "loss")
RATES_SCALARS = ("t", "window", "tok_s", "eta_s", "done")   # the rates frame's scalar columns


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
        if c in ("wait", "blocked") and v.dtype.kind == "f":
            nan = np.isnan(v)
            if nan.any():
                v = np.where(nan, 0.0, v)           # fillna(0.0)
        elif c in ("worker", "tokens") and v.dtype != np.int64:
            # pandas' cast where it is plain (its error on a non-finite value otherwise)
            v = (v.astype(np.int64) if v.dtype.kind == "f" and np.isfinite(v).all()
                 else pd.Series(v).astype(np.int64).to_numpy())
        data[c] = v
    steps = pd.DataFrame(data, copy=False)
    if len(steps) > 1 and (np.diff(steps["t"].to_numpy()) < 0).any():
        steps = steps.sort_values("t", kind="stable").reset_index(drop=True)
    return steps


def rates_columns(tab, header: RunHeader) -> dict[str, np.ndarray]:
    """The rates frame's columns from an Arrow table of rates events, sorted by t (stable, NaN
    last, as pandas sorts): vectorized, no per-row Python, and no pandas (a worker process that
    reads logs goes without it, `advisor.ingest.pieces`)."""
    import pyarrow.compute as pc

    n = tab.num_rows
    out: dict[str, np.ndarray] = {}
    for k in RATES_SCALARS:
        out[k] = (tab.column(k).to_numpy().astype(np.float64, copy=False) if k in tab.column_names
                  else np.full(n, np.nan))
    for key in ("bps", "cap_bps"):
        col = tab.column(key).combine_chunks() if key in tab.column_names else None
        for i, r in enumerate(header.roles):
            out[f"{key}_{r}"] = (pc.struct_field(col, [i]).to_numpy(zero_copy_only=False).astype(np.float64)
                                 if col is not None else np.full(n, np.nan))
    q = tab.column("q").combine_chunks() if "q" in tab.column_names else None
    for i, spec in enumerate(header.queues):
        if q is None:
            continue
        f = pc.struct_field(q, [i])
        if spec.per_worker:
            flat = pc.list_flatten(f).to_numpy(zero_copy_only=False).astype(np.float64)
            parent = pc.list_parent_indices(f).to_numpy(zero_copy_only=False)
            cnt = np.bincount(parent, minlength=n).astype(float)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.bincount(parent, weights=flat, minlength=n) / cnt
            low = np.full(n, np.inf)
            np.minimum.at(low, parent, flat)
            low[cnt == 0] = np.nan
        else:
            mean = low = f.to_numpy(zero_copy_only=False).astype(np.float64)
        out[f"q_{spec.name}"], out[f"qmin_{spec.name}"] = mean, low
    if (n > 1 and (np.diff(out["t"]) < 0).any()) or np.isnan(out["t"]).any():
        order = np.argsort(out["t"], kind="stable")
        out = {k: v[order] for k, v in out.items()}
    return out


def syncs_frame(cols: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The ``syncs`` frame from its columns, sorted by t."""
    import pandas as pd

    syncs = pd.DataFrame(cols)
    if len(syncs) > 1 and (np.diff(syncs["t"].to_numpy()) < 0).any():
        syncs = syncs.sort_values("t", kind="stable").reset_index(drop=True)
    return syncs


def rates_columns_frame(cols: Mapping[str, np.ndarray], *, merged: bool) -> pd.DataFrame:
    """The ``rates`` frame from its columns (a summary's, in log order); ``merged``: the columns of
    several files, sorted by t here."""
    import pandas as pd

    rates = pd.DataFrame(cols)
    if merged and len(rates) > 1 and (np.diff(rates["t"].to_numpy()) < 0).any():
        rates = rates.sort_values("t", kind="stable").reset_index(drop=True)
    return rates
