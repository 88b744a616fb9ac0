"""Bare split rows for tests: a `SplitRow` from a label, a rate, an interval and its parts."""

from __future__ import annotations

import math

from advisor.model.chain import ERR_CORNERS, ERR_SHARED, IntervalParts
from advisor.project.rows import RoleRow, SplitRow


def bare_row(label: str, bps: float, low: float = math.nan, high: float = math.nan, *, parts=True, **kw) -> SplitRow:
    """Split ``label`` ("N-M", target-drafter) at ``bps``; ``kw``: `SplitRow` fields, and the parts'
    ``err_*`` columns by name (``own`` for the own variance); ``parts=False``: none."""
    n, m = (int(x) for x in label.split("-"))
    err = {k: kw.pop(k) for k in [*ERR_SHARED, *ERR_CORNERS, "err_sync_lo", "err_sync_hi"] if k in kw}
    own = kw.pop("own", 0.0)
    p = IntervalParts(
        shared_log_per_se=tuple(err.get(k, 0.0) for k in ERR_SHARED),
        own_var_log2=own,
        sync_ends_log=(err.get("err_sync_lo", 0.0), err.get("err_sync_hi", 0.0)),
        corners_log=tuple(err.get(k, 0.0) for k in ERR_CORNERS),
    )
    return SplitRow(
        label=label,
        producer=RoleRow("target", n, math.inf, 0.0),
        consumer=RoleRow("drafter", m, math.inf, 0.0),
        bps=bps,
        bps_low=low,
        bps_high=high,
        parts=p if parts else None,
        **kw,
    )
