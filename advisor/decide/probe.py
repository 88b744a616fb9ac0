"""What a short measurement is worth: the best candidate probe and its expected value of information.

A probe alternates short segments at two splits (A B A B: a host's drift cancels in their lead)
and measures ``d = ln(X_a / X_b)`` with noise of variance

    v(L) = (sigma_a^2 + sigma_b^2) / L + level_var

for ``L`` seconds at each: ``sigma_k^2`` the larger of the log's sampling error over its steady
window, ``(err_p_samp^2 + err_c_samp^2) x steady_s``, and a batch count's, ``scv / x_k``;
``level_var`` the run-to-run shift of a segment (``ContentionFit.run_se^2``, two segments each).

Its worth comes from the odds' draws: for ``OUTCOMES`` draws r' taken as the truth, an outcome
``y = d(r') + N(0, v)`` weights every draw r by ``exp(-(y - d(r))^2 / 2v)`` (draws grouped by
``d`` into ``BINS``), the action is re-decided on the weighted draws (among the probed two and the
``REDECIDE`` best splits) and scored on r'. Worth it where

    (regret now - regret after) x remaining job time  >  2 L + 2 restarts

(GPU-seconds of all G). ``L`` starts at ``2 (z sigma / delta)^2`` and the best of
``PROBE_FACTORS`` times it is taken, as ``PROBE_ROUNDS`` rounds of whole-second segments of at
least ``MIN_PROBE_S`` (`probe_command`). A split the logs ran ``L`` seconds or more is not probed
on its own; without the job's size a probe is named, never worth it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from advisor.decide.odds import RESOLUTION, DrawInputs, Odds
from advisor.stats import Z_95

MIN_PROBE_S = 60.0  # the shortest probe segment worth a restart
PROBE_ROUNDS = 2  # rounds of A B (the trainer's default): two segments of each split
PROBE_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
OUTCOMES = 500  # simulated probe outcomes
REDECIDE = 6  # splits re-decided between after a probe
BINS = 256  # groups of draws by the probed lead (the posterior's grid)
MIN_SCV = 0.01  # the floor of a role's step SCV in the count noise
NOTHING_TO_GAIN_PCT = 0.01  # an action's expected regret below this: no probe to name


@dataclass(frozen=True)
class ProbeNoise:
    """What a probe's measurement of each split carries (module docstring)."""

    var_s: Mapping[str, float]  # per split: sigma_k^2, log(b/s)^2 x seconds
    level_var: float = 0.0  # a segment's run-to-run level variance
    ran_s: Mapping[str, float] = field(default_factory=dict)  # seconds the evidence ran at each split


@dataclass(frozen=True)
class ProbeCosts:
    """What a probe's worth is weighed against."""

    remaining_s: float | None  # the job's remaining time at the action (None: unknown)
    restart_s: float  # one restart
    gpus: int


@dataclass(frozen=True)
class Probe:
    """A probe: short segments at ``splits`` (interleaved A B A B), ``seconds_each`` at each."""

    split: str  # the split it chiefly measures (the rival, unless the evidence ran it)
    splits: tuple[str, ...]  # every split it runs
    seconds_each: float  # seconds at each split: rounds x segment_s
    gpu_hours: float  # len(splits) x seconds_each x G / 3600 (restarts not included)
    regret_now_pct: float  # expected regret of the action without the probe
    regret_after_pct: float  # expected regret left after deciding on the probe's outcome
    value_s: float  # (regret now - after) x the remaining job time, seconds of G GPUs
    cost_s: float  # the probe's seconds plus two restarts, seconds of G GPUs
    worth_it: bool
    segment_s: float = 0.0  # seconds of one segment (--probe-seconds)
    rounds: int = PROBE_ROUNDS  # rounds (--probe-rounds): each runs every split once


def _segment_s(seconds: float) -> float:
    """The trainer's segment for about ``seconds`` at each split over ``PROBE_ROUNDS`` rounds: whole
    seconds, at least ``MIN_PROBE_S``."""
    each = math.ceil(seconds / PROBE_ROUNDS - 1e-9) if math.isfinite(seconds) else MIN_PROBE_S
    return float(max(each, MIN_PROBE_S))


def probe_command(probe: Probe, target_tp: int = 1, out: str = "probe") -> str:
    """The ``dflash-train`` line that runs ``probe`` (`trainer.probe`): its splits in order, its
    segment's seconds and its rounds; its cost is the probe's ``gpu_hours``.
    """
    tp = f" --target-tp {target_tp}" if target_tp > 1 else ""
    return (
        f"dflash-train --probe {','.join(probe.splits)} --probe-seconds {probe.segment_s:.0f} "
        f"--probe-rounds {probe.rounds}{tp} --out {out}"
    )


def best_probe(
    rates: np.ndarray,
    values: np.ndarray,
    inp: DrawInputs,
    odds: Odds,
    action: str,
    noise: ProbeNoise,
    costs: ProbeCosts,
    seed: int = 0,
) -> Probe | None:
    """The best candidate probe against ``action`` and what it is worth (module docstring)."""
    labels = inp.labels
    rival = (
        odds.best
        if odds.best != action
        else (odds.judged if odds.judged is not None and odds.judged != action else odds.runner_up)
    )
    if rival is None or rival == action:
        return None
    a, b = labels.index(action), labels.index(rival)
    mean = rates.mean(axis=0)
    if not (mean[a] > 0 and mean[b] > 0):
        return None
    sig2 = (noise.var_s.get(action, 0.0), noise.var_s.get(rival, 0.0))
    delta = max(abs(math.log(mean[a] / mean[b])), RESOLUTION)
    start = 2.0 * (Z_95**2) * (sig2[0] + sig2[1]) / 2.0 / delta**2
    tried = [_segment_s(start * f) for f in PROBE_FACTORS] if costs.remaining_s else [_segment_s(start)]
    now = odds.of(action).regret_pct
    if now < NOTHING_TO_GAIN_PCT:
        return None
    best: Probe | None = None
    for segment_s in dict.fromkeys(tried):
        length = segment_s * PROBE_ROUNDS
        if all(noise.ran_s.get(x, 0.0) >= length for x in (action, rival)):
            continue  # the evidence already ran both this long
        var = (sig2[0] + sig2[1]) / length + noise.level_var
        gained = _regret_removed(rates, values, a, b, var, seed)
        after = max(now - gained, 0.0)
        value = (now - after) / 100.0 * costs.remaining_s if costs.remaining_s else 0.0
        cost = 2.0 * length + 2.0 * costs.restart_s
        chief = rival if noise.ran_s.get(rival, 0.0) < length else action
        p = Probe(
            split=chief,
            splits=(action, rival),
            seconds_each=length,
            gpu_hours=2.0 * length * costs.gpus / 3600.0,
            regret_now_pct=now,
            regret_after_pct=after,
            value_s=value,
            cost_s=cost,
            worth_it=bool(costs.remaining_s) and value > cost,
            segment_s=segment_s,
        )
        if best is None or p.value_s - p.cost_s > best.value_s - best.cost_s:
            best = p
    return best


def _regret_removed(rates: np.ndarray, values: np.ndarray, a: int, b: int, var: float, seed: int) -> float:
    """Expected regret (% of the best) the probe of the lead of ``a`` over ``b`` with noise
    variance ``var`` removes, by simulated outcomes (module docstring)."""
    with np.errstate(divide="ignore"):
        d = np.log(np.maximum(rates[:, a], 1e-300)) - np.log(np.maximum(rates[:, b], 1e-300))
    n = len(d)
    rng = np.random.default_rng(seed)
    pick = rng.choice(n, min(OUTCOMES, n), replace=False)
    y = d[pick] + math.sqrt(max(var, 1e-12)) * rng.standard_normal(len(pick))
    cand = np.unique(np.concatenate([np.argsort(-values.mean(axis=0), kind="stable")[:REDECIDE], [a, b]]))
    # the draws in BINS groups of equal count by d: a group's mean d and mean values stand for it
    groups = np.array_split(np.argsort(d, kind="stable"), min(BINS, n))
    centre = np.array([d[g].mean() for g in groups])
    size = np.array([len(g) for g in groups], float)
    means = np.array([values[g][:, cand].mean(axis=0) for g in groups])
    logw = -((y[:, None] - centre[None, :]) ** 2) / (2.0 * max(var, 1e-12)) + np.log(size)[None, :]
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    post = (w @ means) / w.sum(axis=1, keepdims=True)
    chosen = cand[post.argmax(axis=1)]
    v = values[pick]
    top = float(v.max(axis=1).mean())
    if not top > 0:
        return 0.0
    without = float(v[:, a].mean())
    with_probe = float(v[np.arange(len(pick)), chosen].mean())
    return max(100.0 * (with_probe - without) / top, 0.0)
