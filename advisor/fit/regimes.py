"""Regimes: time-correlated changes of step time over the steady window (see `RegimeFit`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from advisor.measure.steady import SteadyWindow
from advisor.model.params import NO_REGIMES, RegimeFit

# Regimes: the steady window is cut into equal time slices, each about REGIME_SLICE_FILLS times
# the time the pipeline takes to pass q_hs plus the workers' batches (shorter stretches are
# absorbed by the queue and show as variability); a role's step time is called regime-switching
# when the spread of its slice means is REGIME_F_MIN times what sampling alone gives and a
# (shrunk) slice mean departs REGIME_MIN_DEV from the overall mean. At most REGIME_STATES
# groups of slices (by their consumer/producer balance) are kept for the projection.
REGIME_SLICE_FILLS = 2.0
REGIME_MIN_STEPS = 12  # per role and slice, on average
REGIME_STATES = 16
REGIME_F_MIN = 30.0
REGIME_MIN_DEV = 0.03


def fit_regimes(
    by_role: Mapping[str, pd.DataFrame], win: SteadyWindow, producer: str, consumer: str, slice_s: float
) -> RegimeFit:
    """Slice means of each role's step time over the steady window (see RegimeFit)."""
    t0, t1 = win.start_s, win.end_s
    counts = [len(by_role[r]) for r in (producer, consumer)]
    w = int(min((t1 - t0) / max(slice_s, 1e-12), min(counts) / REGIME_MIN_STEPS))
    if w < 3 or t1 <= t0:
        return NO_REGIMES
    edges = np.linspace(t0, t1, w + 1)
    out = {}
    for r in (producer, consumer):
        st = by_role[r]
        busy = st["busy"].to_numpy(float)
        sl = np.clip(np.searchsorted(edges, st["t"].to_numpy(float), side="right") - 1, 0, w - 1)
        n_w = np.bincount(sl, minlength=w)
        if (n_w < 2).any():
            return NO_REGIMES
        m_w = np.bincount(sl, weights=busy, minlength=w) / n_w
        m = float(busy.mean())
        within = float(np.sum((busy - m_w[sl]) ** 2) / max(len(busy) - w, 1))
        expect = within * float(np.mean(1.0 / n_w))
        between = float(np.var(m_w, ddof=1))
        f = between / expect if expect > 0 else 0.0
        shrink = max(0.0, 1.0 - 1.0 / f) if f > 0 else 0.0
        out[r] = (1.0 + shrink * (m_w / m - 1.0), within / (m * m), f)
    (sp, scv_p, f_p), (sc, scv_c, f_c) = out[producer], out[consumer]
    dev = max(
        float(np.max(np.abs(sp - 1))) if f_p >= REGIME_F_MIN else 0.0,
        float(np.max(np.abs(sc - 1))) if f_c >= REGIME_F_MIN else 0.0,
    )
    # group the slices by balance (what the throughput of a slice depends on), equal counts per group
    order = np.argsort(sc / sp, kind="stable")
    groups = [g for g in np.array_split(order, min(w, REGIME_STATES)) if len(g)]
    return RegimeFit(
        producer_scale=tuple(float(sp[g].mean()) for g in groups),
        consumer_scale=tuple(float(sc[g].mean()) for g in groups),
        weight=tuple(len(g) / w for g in groups),
        producer_scv=scv_p,
        consumer_scv=scv_c,
        f_producer=f_p,
        f_consumer=f_c,
        detected=dev >= REGIME_MIN_DEV,
    )
