"""The verdict: stay or switch, why, and what would change it.

Decision tree (thresholds named below):

1. Best split B = the highest projected throughput among all splits; O = the observed split.
2. B == O                                          -> stay.
3. gain = X_B / X_O - 1 < ``SWITCH_MIN_GAIN``       -> stay: within what the model can resolve.
4. the intervals overlap (X_B low <= X_O high)     -> stay: the gain is not significant.
5. the job's remaining time at O minus at B <= restart cost (``--restart-cost``, hours; a split
   change means a restart: reload, warm-up, queues refilled)      -> stay: the gain does not pay.
6. otherwise                                        -> switch to B.
   If the loader is the bottleneck at O, no split beats it: the advice names the loader instead.

Robustness ("holds unless"): against the runner-up A (the best split other than the recommended
R), find by bisection the factor on each fitted quantity at which A would match R: the producer
(target) capacity, the consumer (drafter) capacity, and, where A and R differ in drafter count,
the per-drafter scaling of the larger drafter pool (the reference reading's "even if each of two
drafters reached only 60%"). Factors beyond ``ROBUST_RANGE`` are reported as "any".

Queue advice: throughput at the recommended split with q_hs at half, double and quadruple its
depth; a deeper queue is advised only when doubling gains at least ``QUEUE_GAIN_WORTH``; its
memory cost is ``hs_bytes_per_token x tokens per batch`` per slot.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import pandas as pd

from .fit import PipelineFit, sync_scaling
from .model import project_split

SWITCH_MIN_GAIN = 0.02
QUEUE_GAIN_WORTH = 0.01
ROBUST_RANGE = (0.25, 4.0)
DEFAULT_RESTART_COST_H = 1.0
LOADER_TIE = 0.01               # splits this close to the loader's cap count as reaching it
LEVER_MIN_SCALING = 0.95       # below this per-rank scaling, advise the sync levers


@dataclass(frozen=True)
class Recommendation:
    roles: Mapping[str, int]
    verdict: str                      # "stay" | "switch"
    reasons: tuple[str, ...]
    holds_unless: tuple[str, ...]
    gain_pct: float                   # projected throughput gain of roles over the observed split
    eta_saving_s: float | None        # remaining time saved by switching, restart included
    runner_up: Mapping[str, int] | None = None
    thresholds: Mapping[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class QueueAdvice:
    name: str
    cap: int
    advice: str
    gain_pct: float                   # doubling the depth
    loss_pct_half: float              # halving it
    bytes_per_slot: float | None


def _fmt_split(n: int, m: int) -> str:
    return f"{n}-{m}"


def _x(fit: PipelineFit, n: int, m: int, gpus: int, **kw) -> float:
    return project_split(fit, n, m, gpus=gpus, **kw).x_bps


def _tie_factor(fit: PipelineFit, r: tuple[int, int], a: tuple[int, int], gpus: int, kind: str) -> float | None:
    """Factor on a fitted quantity at which split a would match split r (None: not within range)."""
    def diff(f: float) -> float:
        if kind == "producer":
            kw = {"mu_scale": (f, 1.0)}
            return _x(fit, *a, gpus, **kw) - _x(fit, *r, gpus, **kw)
        if kind == "consumer":
            kw = {"mu_scale": (1.0, f)}
            return _x(fit, *a, gpus, **kw) - _x(fit, *r, gpus, **kw)
        raise ValueError(kind)

    lo, hi = ROBUST_RANGE
    d1 = diff(1.0)
    for end in (lo, hi):
        de = diff(end)
        if (de > 0) != (d1 > 0):
            a_, b_ = (end, 1.0) if end < 1 else (1.0, end)
            da = diff(a_)
            for _ in range(50):
                mid = math.sqrt(a_ * b_)
                dm = diff(mid)
                if (dm > 0) == (da > 0):
                    a_, da = mid, dm
                else:
                    b_ = mid
            return math.sqrt(a_ * b_)
    return None


def _scaling_tie(fit: PipelineFit, r: tuple[int, int], a: tuple[int, int], gpus: int) -> tuple[float | None, tuple[int, int]]:
    """Per-drafter scaling s of the split with more drafters at which the two splits tie."""
    big, small = (a, r) if a[1] > r[1] else (r, a)
    x_small = _x(fit, *small, gpus)

    def diff(s: float) -> float:
        return _x(fit, *big, gpus, consumer_scaling=s) - x_small

    if (diff(0.05) > 0) == (diff(1.0) > 0):
        return None, big
    lo, hi = 0.05, 1.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if (diff(mid) > 0) == (diff(lo) > 0):
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi), big


def _bottleneck_reason(fit: PipelineFit, row: pd.Series, split: tuple[int, int]) -> str:
    """Why the observed split's bottleneck is what it is, from the independent signals."""
    p, c = fit.roles
    cap_p = fit.producer.mu_bps * split[0]
    cap_c = fit.consumer.mu_bps * split[1] * sync_scaling(fit.consumer, fit.sync, split[1])
    loader = (f", loader {fit.loader.capacity_bps:.3g} b/s" if fit.loader.input_bound and fit.loader.capacity_bps
              else "")
    text = (f"at {_fmt_split(*split)} the {row['bottleneck']} is the bottleneck: {p} capacity {cap_p:.3g} b/s vs "
            f"{c} {cap_c:.3g} b/s{loader} ({'busy time' if fit.source == 'steps' else fit.source})")
    ob = fit.observed[0]
    signals = []
    if ob.hs_mean_depth is not None and fit.hs_cap:
        signals.append(f"q_hs {ob.hs_mean_depth:.1f}/{fit.hs_cap} on average")
    pb, cs = fit.producer.blocked_share, fit.consumer.starved_share
    if math.isfinite(pb) and math.isfinite(cs):
        signals.append(f"{p}s blocked {pb:.0%} of their time, {c}s starved {cs:.0%}")
    return text + ("; " + ", ".join(signals) if signals else "") + "."


def _pct(x: float) -> str:
    v = round(100 * x, 1)
    return f"{v + 0.0:+.1f}%" if v != 0 else "0.0%"   # no "-0.0%"


def recommend(fit: PipelineFit, splits: pd.DataFrame, gpus: int, *, observed: tuple[int, int] | None,
              restart_cost_h: float = DEFAULT_RESTART_COST_H) -> Recommendation:
    """Verdict and reasons; see the module docstring for the rules."""
    p, c = fit.roles
    n_col, m_col = f"n_{p}", f"n_{c}"
    df = splits.reset_index(drop=True)
    ib = int(df["bps"].idxmax())
    best = (int(df.at[ib, n_col]), int(df.at[ib, m_col]))
    row_of = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(df[n_col], df[m_col]))}
    reasons: list[str] = []
    verdict = "switch"
    eta_saving = None
    gain = 0.0
    choice = best
    if observed is not None and observed in row_of:
        reasons.append(_bottleneck_reason(fit, df.loc[row_of[observed]], observed))
    if fit.loader.input_bound and fit.loader.capacity_bps:
        cap_l = fit.loader.capacity_bps
        at_cap = [_fmt_split(int(a), int(b)) for a, b, x in zip(df[n_col], df[m_col], df["bps"])
                  if x >= (1 - LOADER_TIE) * cap_l]
        reasons.append(f"the loader caps the pipeline at {cap_l:.4g} b/s ({p}s starved "
                       f"{fit.loader.producer_starved_share:.0%} of their time with empty prefetch queues): no split "
                       f"beats it ({', '.join(at_cap)} all reach it within {LOADER_TIE:.0%}); fix the input "
                       f"(more loader workers, pre-tokenized data) rather than the split.")
    if observed is not None and observed in row_of:
        io = row_of[observed]
        xo, xb = df.at[io, "bps"], df.at[ib, "bps"]
        gain = xb / xo - 1.0 if xo > 0 else math.inf
        eta_o, eta_b = df.at[io, "eta_s"], df.at[ib, "eta_s"]
        restart_s = restart_cost_h * 3600.0
        if best == observed:
            verdict, choice = "stay", observed
            reasons.append(f"{_fmt_split(*observed)} is already the best of the {len(df)} splits of {gpus} GPUs.")
        elif gain < SWITCH_MIN_GAIN:
            verdict, choice = "stay", observed
            reasons.append(f"the best split, {_fmt_split(*best)}, would gain only {_pct(gain)}, below the "
                           f"{SWITCH_MIN_GAIN:.0%} the model can resolve: not worth a restart.")
        elif df.at[ib, "bps_low"] <= df.at[io, "bps_high"]:
            verdict, choice = "stay", observed
            reasons.append(f"{_fmt_split(*best)} projects {_pct(gain)}, but its interval overlaps the current "
                           f"split's: the gain is not significant on this much data.")
        elif not math.isnan(eta_o) and not math.isnan(eta_b) and eta_o - eta_b <= restart_s:
            verdict, choice = "stay", observed
            eta_saving = float(eta_o - eta_b - restart_s)
            reasons.append(f"{_fmt_split(*best)} projects {_pct(gain)}, but finishing the remaining job would "
                           f"save only {(eta_o - eta_b) / 3600:.1f} h, less than the {restart_cost_h:g} h "
                           f"restart cost.")
        else:
            if not math.isnan(eta_o) and not math.isnan(eta_b):
                eta_saving = float(eta_o - eta_b - restart_s)
                reasons.append(f"switching to {_fmt_split(*best)} gains {_pct(gain)} throughput and finishes "
                               f"the job {eta_saving / 3600:.1f} h sooner, after a {restart_cost_h:g} h restart.")
            else:
                reasons.append(f"switching to {_fmt_split(*best)} gains {_pct(gain)} throughput.")
    else:
        verdict = "best"
        reasons.append(f"best of the {len(df)} splits of {gpus} GPUs: {_fmt_split(*best)}.")

    # runner-up and robustness of the choice
    others = df.drop(index=row_of[choice]).sort_values("bps", ascending=False)
    holds: list[str] = []
    thresholds: dict[str, float | None] = {}
    runner = None
    if len(others):
        ia = int(others.index[0])
        runner = (int(df.at[ia, n_col]), int(df.at[ia, m_col]))
        xr, xa = df.at[row_of[choice], "bps"], df.at[ia, "bps"]
        ca_p = fit.producer.mu_bps * runner[0]
        ca_c = fit.consumer.mu_bps * runner[1] * sync_scaling(fit.consumer, fit.sync, runner[1])
        reasons.append(f"the runner-up {_fmt_split(*runner)} would give {p}s {ca_p:.3g} b/s while {runner[1]} "
                       f"{c}{'s' if runner[1] > 1 else ''} could take {ca_c:.3g} b/s: bound by the "
                       f"{df.at[ia, 'bottleneck']} at {xa:.3g} b/s, {_pct(xa / xr - 1)} against "
                       f"{_fmt_split(*choice)}.")
        lo_r, hi_a = df.at[row_of[choice], "bps_low"], df.at[ia, "bps_high"]
        if lo_r > hi_a:
            reasons.append(f"the choice is stable: {_fmt_split(*choice)}'s 95% interval starts at {lo_r:.4g} b/s, "
                           f"above the runner-up's upper end {hi_a:.4g}.")
        else:
            reasons.append(f"the margin is within the fit's uncertainty: {_fmt_split(*choice)}'s interval starts at "
                           f"{lo_r:.4g} b/s, below the runner-up's upper end {hi_a:.4g}; a longer log would "
                           f"settle it.")
        fp = _tie_factor(fit, choice, runner, gpus, "producer")
        fc = _tie_factor(fit, choice, runner, gpus, "consumer")
        thresholds["producer_factor"], thresholds["consumer_factor"] = fp, fc
        cap_p = fit.producer.mu_bps * choice[0]
        cap_c = fit.consumer.mu_bps * choice[1] * sync_scaling(fit.consumer, fit.sync, choice[1])
        span = f"x{ROBUST_RANGE[0]:g} to x{ROBUST_RANGE[1]:g}"
        for role, f, cap, n in ((p, fp, cap_p, choice[0]), (c, fc, cap_c, choice[1])):
            if f is not None:
                word = "higher" if f > 1 else "lower"
                holds.append(f"{role} capacity is {abs(f - 1):.1%} {word} than fitted ({f * cap:.3g} b/s on {n} "
                             f"GPU{'s' if n > 1 else ''}, not {cap:.3g}): {_fmt_split(*runner)} then matches "
                             f"{_fmt_split(*choice)}.")
            else:
                holds.append(f"{role} capacity: no value from {span} of the fit changes the choice.")
        def best_where(pred) -> tuple[int, int] | None:
            sub = others[[pred(int(m)) for m in others[m_col]]]
            return (int(sub.iloc[0][n_col]), int(sub.iloc[0][m_col])) if len(sub) else None

        fewer = best_where(lambda m: m < choice[1]) if choice[1] > 1 else None
        more = best_where(lambda m: m > choice[1])
        for alt in (fewer, more):
            if alt is None:
                continue
            s, big = _scaling_tie(fit, choice, alt, gpus)
            s_fit = sync_scaling(fit.consumer, fit.sync, big[1])
            thresholds[f"consumer_scaling_{_fmt_split(*alt)}"] = s
            if alt == runner:
                thresholds["consumer_scaling"] = s
            if s is None:
                holds.append(f"per-{c} scaling of {_fmt_split(*big)}: no value from 5% to 100% changes the choice "
                             f"(fitted {s_fit:.0%}); {_fmt_split(*big)} is {df.at[row_of[big], 'bottleneck']}-bound "
                             f"even with perfect {c} scaling." if big == alt else
                             f"per-{c} scaling of {_fmt_split(*big)}: it beats {_fmt_split(*alt)} at any value from "
                             f"5% to 100% (fitted {s_fit:.0%}).")
            elif big == alt:
                holds.append(f"each of the {big[1]} {c}s of {_fmt_split(*big)} keeps at least {s:.0%} of a lone "
                             f"{c}'s rate (fitted {s_fit:.0%}): then {_fmt_split(*big)} wins.")
            else:
                holds.append(f"each of the {big[1]} {c}s keeps less than {s:.0%} of a lone {c}'s rate "
                             f"(fitted {s_fit:.0%}): then {_fmt_split(*alt)} wins.")
    for m in sorted({choice[1], observed[1] if observed else 1}):
        reasons.extend(scaling_levers(fit, m))
    return Recommendation(roles={p: choice[0], c: choice[1]}, verdict=verdict, reasons=tuple(reasons),
                          holds_unless=tuple(holds), gain_pct=100 * gain,
                          eta_saving_s=eta_saving, runner_up={p: runner[0], c: runner[1]} if runner else None,
                          thresholds=thresholds)


def scaling_levers(fit: PipelineFit, m: int) -> list[str]:
    """For M data-parallel drafters with sync: what balancing tokens or syncing less often buys.

    The barrier waits for the slowest rank, so per-rank scaling s(M) loses
    ``sqrt(k) * sigma * e_M`` per round: the step-time spread sigma partly comes from token-count
    spread (``c * sd(tokens)``), which balancing tokens across ranks removes, and its weight
    falls as 1/sqrt(k) with k steps per sync.
    """
    from dataclasses import replace as dc_replace

    c = fit.consumer
    k = fit.sync.sync_every
    if m <= 1 or k <= 0:
        return []
    s_now = sync_scaling(c, fit.sync, m)
    if s_now >= LEVER_MIN_SCALING:
        return []
    tok_sd = fit.tokens_std if fit.tokens_std == fit.tokens_std else 0.0
    sigma_bal = math.sqrt(max(c.busy_std_s ** 2 - (c.c_s_per_tok * tok_sd) ** 2, 0.0))
    s_bal = sync_scaling(dc_replace(c, busy_std_s=sigma_bal), fit.sync, m)
    s_k2 = sync_scaling(c, dc_replace(fit.sync, sync_every=2 * k), m)
    return [f"with {m} {c.role}s each keeps {s_now:.0%} of a lone {c.role}'s rate (barrier every {k} steps, "
            f"collective {fit.sync.allreduce_s(m) * 1e3:.0f} ms): balancing tokens across ranks would give "
            f"{s_bal:.0%}, syncing every {2 * k} steps {s_k2:.0%}."]


def queue_advice(fit: PipelineFit, split: tuple[int, int], gpus: int) -> QueueAdvice:
    """What a deeper or shallower q_hs would do at ``split``."""
    cap = fit.hs_cap
    x = _x(fit, *split, gpus)
    x2 = _x(fit, *split, gpus, hs_cap=max(2 * cap, 1))
    x4 = _x(fit, *split, gpus, hs_cap=max(4 * cap, 2))
    xh = _x(fit, *split, gpus, hs_cap=cap // 2)
    gain, loss = x2 / x - 1.0, 1.0 - xh / x
    per_slot = fit.hs_bytes_per_token * fit.tokens_mean if fit.hs_bytes_per_token else None
    mem = f" (+{cap * per_slot / 2**30:.1f} GiB for {cap} more slots)" if per_slot else ""
    if gain >= QUEUE_GAIN_WORTH:
        advice = (f"deepen q_hs from {cap} to {2 * cap}: {_pct(gain)} throughput{mem}; "
                  f"x4 would give {_pct(x4 / x - 1)}.")
    else:
        advice = (f"keep q_hs at {cap}: doubling it gains {_pct(gain)}{mem}, halving it loses {100 * loss:.1f}%; "
                  f"the steady rate is set by capacity, not by buffering.")
    return QueueAdvice(name="hs", cap=cap, advice=advice, gain_pct=100 * gain, loss_pct_half=100 * loss,
                       bytes_per_slot=per_slot)
