"""Exact cross-check of the analytic projection: simulate every split from the log's own services.

For each split the pipeline of `advisor.simulate` (real queue caps, blocking after service,
drafter barriers) is driven by ``n_batches`` synthetic batches drawn from the steady part of the
log(s):

- tokens per batch: resampled from the logged consumer batches;
- service time of a batch at role r: ``(t0_r + c_r * tokens) * e``, where ``e`` is resampled from
  that role's logged ratios ``busy / (t0_r + c_r * tokens)``: the fitted dependence on tokens
  plus the log's own residual variability, with its real shape (heavy tails included);
- sync rounds: resampled logged ``sync`` durations at that drafter count when seen, otherwise
  the fitted ``T_ar(M)``;
- loader: when the fit found the pipeline input-bound, exponential-free resampling of the
  loader's inter-arrival gaps.

The result column ``bps_exact`` sits beside the analytic ``bps``; ``exact_gap_pct`` is their
difference. ``REPLICATIONS`` independent runs give the simulation's own spread. Intended for
logs with step events (a rates-only log has no residuals to resample).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .fit import PipelineFit
from .load import RunLog
from .simulate import simulate

DEFAULT_BATCHES = 6000
WARMUP_SHARE = 0.1


def _ratios(fit_role, steps: pd.DataFrame) -> np.ndarray:
    base = fit_role.t0_s + fit_role.c_s_per_tok * steps["tokens"].to_numpy(float)
    r = steps["busy"].to_numpy(float) / np.maximum(base, 1e-12)
    return r[np.isfinite(r) & (r > 0)]


def simulate_splits(fit: PipelineFit, logs: tuple[RunLog, ...], splits: pd.DataFrame, *,
                    n_batches: int = DEFAULT_BATCHES, seed: int = 0, hs_cap: int | None = None) -> pd.DataFrame:
    """``splits`` with ``bps_exact`` and ``exact_gap_pct`` added (see module docstring)."""
    if fit.source != "steps":
        raise ValueError("an exact simulation needs step events; this fit comes from "
                         f"{fit.source} only")
    p, c = fit.roles
    parts = {p: [], c: []}
    for lg, ob in zip(logs, fit.observed):
        if not lg.has_steps:
            continue
        st = lg.steps[lg.steps["t"] >= ob.steady.start_s]
        for r in parts:
            parts[r].append(st[st["role"] == r])
    frames = {r: pd.concat(v, ignore_index=True) for r, v in parts.items()}
    ratio_p, ratio_c = _ratios(fit.producer, frames[p]), _ratios(fit.consumer, frames[c])
    tokens_pool = frames[c]["tokens"].to_numpy(float)
    sync_by_m: dict[int, np.ndarray] = {}
    for lg, ob in zip(logs, fit.observed):
        m = lg.header.roles[c]
        if m > 1 and len(lg.syncs):
            d = lg.syncs.loc[lg.syncs["t"] >= ob.steady.start_s, "dur"].to_numpy(float)
            if len(d):
                sync_by_m[m] = np.concatenate([sync_by_m.get(m, np.empty(0)), d])
    loader_s: float | np.ndarray = 0.0
    rng = np.random.default_rng(seed)
    out = []
    b = fit.hs_cap if hs_cap is None else hs_cap
    for _, row in splits.iterrows():
        n, m = int(row[f"n_{p}"]), int(row[f"n_{c}"])
        tok = rng.choice(tokens_pool, n_batches)
        tgt = (fit.producer.t0_s + fit.producer.c_s_per_tok * tok) * rng.choice(ratio_p, n_batches)
        dft = (fit.consumer.t0_s + fit.consumer.c_s_per_tok * tok) * rng.choice(ratio_c, n_batches)
        if fit.loader.input_bound and fit.loader.capacity_bps:
            mean_gap = 1.0 / fit.loader.capacity_bps
            shape = 1.0 / max(fit.loader.scv, 1e-3)
            loader_s = rng.gamma(shape, mean_gap / shape, n_batches)
        sync = sync_by_m.get(m)
        sync_s = rng.choice(sync, 256) if sync is not None else fit.sync.allreduce_s(m)
        res = simulate(target_s=tgt, drafter_s=dft, tokens=tok, loader_s=loader_s, n_target=n, n_drafter=m,
                       hs_cap=b, pre_cap=max(fit.pre_cap, 1), sync_every=fit.sync.sync_every, sync_s=sync_s,
                       warmup_batches=int(n_batches * WARMUP_SHARE))
        out.append(res.bps)
    df = splits.copy()
    df["bps_exact"] = out
    df["exact_gap_pct"] = 100.0 * (df["bps"] / df["bps_exact"] - 1.0)
    return df
