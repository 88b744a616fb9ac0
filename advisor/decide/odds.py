"""The odds of every split: one joint draw of the fit's uncertainty, and what it says of each choice.

Split k carries its interval's parts (`advisor.model.chain.IntervalParts`): coefficients ``s_kj``
of the sources every split shares, its own variance ``v_k`` and its shifts ``e_k`` at the ends of
an unidentified sync scaling and at the corners of the capacity ranges. One draw r:

    ln X_k^(r) = ln x_k + sum_j s_kj Z_j^(r) + sqrt(v_k) eps_k^(r) + t^(r) e_k,c(r)

``Z_j``, ``eps_k`` standard normals (a shared source cancels in every lead, as in
`advisor.project.rows.lead_interval`), ``c`` one of the non-zero ends, equally likely, ``t``
uniform on [0, 1]. A closed corner is drawn to at most ``END_CAP_LOG`` from the point. An open
corner (a capacity known only from below, `slack_corners`) is drawn by its slack: split k moves
by ``sign(e_k) min(|e_k|, u)``, ``u`` exponential of scale ``OPEN_SLACK_LOG`` truncated at
``OPEN_CAP_LOG``, one per draw (BENCHMARKS.md 19.13). A widened row is drawn alone, a normal in
ln X with each side's spread ``ln(end / x) / 1.96`` from that side of its interval (an open upper
end: ``END_CAP_LOG`` above the point, or its measured rate where higher). The model's own error
(`advisor.project.model_error`) is drawn last, untempered: one path per draw of its Gaussian
process in ``ln(N / M)``, conditioned on the misses at the observed splits, which are then drawn
paired. `drawn_lead` reads a lead's 95% interval from the same draws.

With a restart to weigh (judged split J, the job's size known), splits compare by the effective
rate ``V_k = left / (left / X_k + restart_s [k != J])``. With ``M = max_j V_j`` per draw:

    p_best(k) = P(V_k >= (1 - RESOLUTION) M)      p_top(k) = P(k is the best)
    regret(k) = E[M - V_k] / E[M]                 gain(k)  = E[V_k] / E[V_other] - 1

The Bayes action has the least regret (as held below, the higher mean among equals); a close call:
the two best regrets below the resolution.
Gains and regrets are held within the intervals' ends (`allowed`): a gain within
``[lo_k / hi_o - 1, hi_k / lo_o - 1]``, a regret within ``[0, 1 - lo_k / max_j hi_j]`` (an open
upper end at ``e^OPEN_CAP_LOG`` times the point).

Calibration (`calibrated`: step logs of workers sharing a host with a core each, of a family of
`advisor.decide.families`): the two roles' level shifts are drawn with correlation
``LEVEL_CORR`` (coefficients ``(a, b)`` become ``f (a + rho b, sqrt(1 - rho^2) b)``, ``f =
sqrt((a^2 + b^2) / (a^2 + b^2 + 2 rho a b))``, each split's level variance kept), and the normal
part is scaled by ``STEPS_TEMPERATURE``; both fitted leave one family out on the sweeps
(`benchmarks/calibrate.py`, BENCHMARKS.md 19.6, 19.11, 19.20, 19.26, 19.28). Elsewhere the draw
takes the table as stated. The draws are seeded (``SEED``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from advisor.model.chain import ERR_CORNERS, ERR_SHARED, NO_PARTS, IntervalParts, open_corners
from advisor.model.params import PipelineFit, Source
from advisor.model.priors import CONTENTION_PRIOR_SE
from advisor.project.model_error import ModelError, split_u
from advisor.project.rows import SplitRow
from advisor.stats import Z_95

RESOLUTION = 0.02  # splits within 2% of the best count as the best (what the model resolves)
DEFAULT_DRAWS = 4000
MAX_CELLS = 2_000_000  # draws x splits at most: a table of more than 500 splits gets fewer draws
MIN_DRAWS = 1000
SEED = 34
LEVEL_CORR = 0.7  # step-log fits: the two roles' run-to-run level shifts drawn together (module docstring)
STEPS_TEMPERATURE = 0.55  # step-log fits: the draw's normal part scaled by this (module docstring; BENCHMARKS.md 19.28)
_LEVELS = (ERR_SHARED.index("err_p_level"), ERR_SHARED.index("err_c_level"))
END_CAP_LOG = math.log(1.25)  # a closed corner's shift drawn to at most x1.25 (or /1.25) of the point projection
# an open bound's slack, the exponential's scale in log capacity and its cap: measured on the real
# sweeps' non-binding roles, benchmarks/open_slack.py (mean log slack 0.676, largest 8.04x; 19.13)
OPEN_SLACK_LOG = 0.68
OPEN_CAP_LOG = math.log(8.0)


@dataclass(frozen=True, eq=False)
class DrawInputs:
    """What the draw reads from the table's records, one entry per split in the table's order (arrays of
    length K; ``shared`` K x sources, ``ends`` K x ends, only the ends non-zero somewhere)."""

    labels: tuple[str, ...]
    bps: np.ndarray
    shared: np.ndarray
    own_var: np.ndarray
    ends: np.ndarray
    widened: np.ndarray
    low_bps: np.ndarray
    high_bps: np.ndarray
    left_batches: float | None  # batches left in the job (None: its size is unknown)
    temperature: float = 1.0  # the normal part's scale (module docstring)
    level_corr: float = 0.0  # correlation of the two roles' level shifts
    open_ends: np.ndarray | None = None  # per column of ``ends``: an open corner (None: none is)
    high_open: np.ndarray | None = None  # per split: the interval is open above (None: none is)
    model: ModelError | None = None  # the model's own error, conditioned on its misses (None: none seen)
    model_u: np.ndarray | None = None  # ln(N / M) of each split, where ``model`` is drawn
    model_on: np.ndarray | None = None  # the splits that carry it (not a probed one)


def calibrated(fit: PipelineFit) -> bool:
    """Whether ``fit`` is in the calibration's host domain: step logs, a shared host, a core each."""
    return fit.source == Source.STEPS and fit.contention.prior_se == CONTENTION_PRIOR_SE


def slack_corners(fit: PipelineFit) -> tuple[bool, bool, bool, bool]:
    """The corners drawn by an open bound's slack: the open ones of a fit from bare numbers."""
    return open_corners(fit) if fit.source == Source.NUMBERS else (False, False, False, False)


def draw_inputs(
    recs: Sequence[SplitRow], calibrate: bool = False, open_corners: tuple[bool, ...] = (False,) * 4
) -> DrawInputs:
    """The draw's inputs from the projected table's records: each split's rate, interval and
    interval parts (`advisor.model.chain.IntervalParts`; a split without them is drawn from its
    own interval).
    """
    k = len(recs)
    parts = [r.parts or NO_PARTS for r in recs]
    bps = np.array([r.bps for r in recs], float)
    shared = np.array([p.shared_log_per_se for p in parts], float).reshape(k, len(ERR_SHARED))
    sync = np.array([p.sync_ends_log for p in parts], float).reshape(k, 2)
    corners = np.array([p.corners_log for p in parts], float).reshape(k, len(ERR_CORNERS))
    is_open = np.array([False, False, *open_corners], bool)
    corners = np.nan_to_num(corners)
    corners = np.where(is_open[2:], corners, np.clip(corners, -END_CAP_LOG, END_CAP_LOG))
    ends = np.hstack([np.nan_to_num(sync), corners])
    keep = np.abs(ends).max(axis=0) > 0 if k else np.zeros(ends.shape[1], bool)
    ends, is_open = ends[:, keep], is_open[keep]
    model, u, on = _model_error(recs, parts)
    # an observed split the model's error is anchored on is drawn paired, at its measured rate
    anchored = np.array([on is not None and math.isfinite(p.model_miss_log) for p in parts], bool)
    widened = np.array([r.widened or r.parts is None for r in recs], bool) & ~anchored
    high_open = np.array([bool(r.bps_high_open) for r in recs], bool)
    high = np.array([r.bps_high for r in recs], float)
    # a widened row open above is drawn to 1.25x of its point, or to its measured rate (module docstring)
    measured = np.nan_to_num(np.array([r.observed_bps for r in recs], float), nan=0.0)
    drawn_high = np.where(widened & high_open, np.maximum(bps * math.exp(END_CAP_LOG), measured), high)
    eta = np.array([r.eta_s for r in recs], float)
    left = eta * bps
    left = left[np.isfinite(left) & (left >= 0)]
    return DrawInputs(
        labels=tuple(r.label for r in recs),
        bps=bps,
        shared=np.nan_to_num(shared),
        own_var=np.nan_to_num(np.array([p.own_var_log2 for p in parts], float)),
        ends=ends,
        open_ends=is_open,
        widened=widened,
        low_bps=np.array([r.bps_low for r in recs], float),
        high_bps=drawn_high,
        high_open=high_open,
        left_batches=float(np.median(left)) if len(left) else None,
        temperature=STEPS_TEMPERATURE if calibrate else 1.0,
        level_corr=LEVEL_CORR if calibrate else 0.0,
        model=model,
        model_u=u,
        model_on=on,
    )


def _model_error(recs, parts: list[IntervalParts]) -> tuple[ModelError | None, np.ndarray | None, np.ndarray | None]:
    """The model's error process the rows carry (`advisor.project.model_error`): its scale the
    largest row's, conditioned on each observed row's miss; (None, None, None) where no row carries
    one or a row has no split counts (a bare table)."""
    sigma = np.nan_to_num(np.array([p.model_sigma_log for p in parts], float))
    if not len(sigma) or not (sigma > 0).any():
        return None, None, None
    u = split_u(*np.array([r.counts for r in recs], float).T)
    miss = np.array([p.model_miss_log for p in parts], float)
    at = np.isfinite(miss) & (sigma > 0)
    model = ModelError(
        sigma_log=float(sigma.max()),
        anchor_u=tuple(float(x) for x in u[at]),
        anchor_miss_log=tuple(float(x) for x in miss[at]),
    )
    return model, u, sigma > 0


def correlated_levels(shared: np.ndarray, rho: float) -> np.ndarray:
    """The shared coefficients with the two roles' level columns drawn at correlation ``rho``,
    each split's level variance kept (module docstring).
    """
    if rho == 0.0 or not len(shared):
        return shared
    ip, ic = _LEVELS
    a, b = shared[:, ip], shared[:, ic]
    v0 = a * a + b * b
    v1 = v0 + 2.0 * rho * a * b
    f = np.sqrt(np.divide(v0, v1, out=np.ones_like(v0), where=v1 > 0))
    out = shared.copy()
    out[:, ip] = f * (a + rho * b)
    out[:, ic] = f * math.sqrt(1.0 - rho * rho) * b
    return out


def draw_rates(inp: DrawInputs, draws: int = DEFAULT_DRAWS, seed: int = SEED) -> np.ndarray:
    """``draws`` x K rates (b/s), one joint draw per row (module docstring); a split without a
    positive finite projection is 0 in every draw.
    """
    rng = np.random.default_rng(seed)
    k = len(inp.labels)
    draws = max(min(draws, MAX_CELLS // max(k, 1)), min(draws, MIN_DRAWS))  # fewer past MAX_CELLS cells
    t = inp.temperature
    z = rng.standard_normal((draws, inp.shared.shape[1]))
    shared = t * correlated_levels(inp.shared, inp.level_corr)
    log = z @ shared.T + rng.standard_normal((draws, k)) * (t * np.sqrt(np.maximum(inp.own_var, 0.0)))
    if inp.ends.shape[1]:
        which = rng.integers(0, inp.ends.shape[1], draws)
        at_end = inp.ends[:, which].T
        opened = (inp.open_ends[which] if inp.open_ends is not None else np.zeros(draws, bool))[:, None]
        log += np.where(opened, 0.0, rng.uniform(0.0, 1.0, draws)[:, None] * at_end)
    ok = np.isfinite(inp.bps) & (inp.bps > 0)
    wide = inp.widened & ok
    if wide.any():
        x = inp.bps[wide]
        below = _spread(inp.low_bps[wide], x)
        above = _spread(x, inp.high_bps[wide])
        e = rng.standard_normal((draws, int(wide.sum())))
        log[:, wide] = t * np.where(e < 0, e * below, e * above)
    # an open corner's slack is drawn last: a table without one keeps its draws
    if inp.ends.shape[1] and inp.open_ends is not None and inp.open_ends.any():
        u = open_slack(rng, draws)[:, None]
        log += np.where(opened, np.sign(at_end) * np.minimum(np.abs(at_end), u), 0.0)
    # the model's own error, last (a table without one keeps its draws); not tempered: it was measured
    if inp.model is not None and inp.model_u is not None and inp.model_on is not None:
        log += np.where(inp.model_on & ~wide, inp.model.draw(rng, draws, inp.model_u), 0.0)
    return np.where(ok, np.where(ok, inp.bps, 1.0) * np.exp(log), 0.0)


def drawn_lead(values: np.ndarray, inp: DrawInputs, a: str, b: str) -> tuple[float, float] | None:
    """The 95% interval of split ``a``'s lead over ``b``, ``V_a / V_b - 1``, from the same draws as the
    odds: where ``a`` is stated >= 97.5% likely within the resolution of the best, its lead over any
    other split starts at ``-RESOLUTION`` or above (the lower end is the order statistic at or above
    2.5%, the upper at or below 97.5%).
    """
    x, y = values[:, inp.labels.index(a)], values[:, inp.labels.index(b)]
    ok = y > 0
    if not ok.any():
        return None
    r = x[ok] / y[ok] - 1.0
    return float(np.quantile(r, 0.025, method="higher")), float(np.quantile(r, 0.975, method="lower"))


def open_slack(rng: np.random.Generator, draws: int) -> np.ndarray:
    """``draws`` slacks ``u``: exponential of scale ``OPEN_SLACK_LOG`` truncated at ``OPEN_CAP_LOG``."""
    v = rng.uniform(0.0, 1.0, draws)
    return -OPEN_SLACK_LOG * np.log1p(-v * -np.expm1(-OPEN_CAP_LOG / OPEN_SLACK_LOG))


def _spread(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """One side's standard deviation in ln X from that side of a 95% interval (0 where absent)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.log(hi / lo) / Z_95
    return np.where(np.isfinite(s) & (s > 0), s, 0.0)


def effective(rates: np.ndarray, inp: DrawInputs, judged: str | None, restart_s: float) -> np.ndarray:
    """Rates as remaining-job time compares them: ``left / (left / X_k + restart_s [k != J])``; the
    rates themselves where no restart is weighed (no judged split, no cost, the job's size unknown).
    """
    if judged is None or judged not in inp.labels or not restart_s > 0 or inp.left_batches is None:
        return rates
    pay = np.full(len(inp.labels), restart_s / max(inp.left_batches, 1e-12))  # nothing left: never worth it
    pay[inp.labels.index(judged)] = 0.0
    with np.errstate(divide="ignore"):
        inv = np.where(rates > 0, 1.0 / np.where(rates > 0, rates, 1.0), np.inf)
    return 1.0 / (inv + pay)


def allowed(inp: DrawInputs, judged: str | None = None, restart_s: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """What the table's intervals allow each split's compared rate (module docstring): its interval's
    ends, through the restart the odds weigh (`effective`).
    """
    ok = np.isfinite(inp.bps) & (inp.bps > 0)
    x = np.where(ok, inp.bps, 0.0)
    lo = np.where(ok & np.isfinite(inp.low_bps), np.clip(np.nan_to_num(inp.low_bps), 0.0, None), 0.0)
    is_open = inp.high_open if inp.high_open is not None else np.zeros(len(lo), bool)
    hi = np.where(is_open, x * math.exp(OPEN_CAP_LOG), np.where(np.isfinite(inp.high_bps), inp.high_bps, np.inf))
    hi = np.where(ok, np.maximum(hi, x), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ends = effective(np.vstack([lo, hi]), inp, judged, restart_s)
    return ends[0], ends[1]


@dataclass(frozen=True)
class SplitOdds:
    """One split's odds (module docstring): all shares 0-1, percentages in %."""

    label: str
    p_best: float  # within RESOLUTION of the best
    p_top: float  # the best itself
    regret_pct: float  # expected shortfall against the best, % of the best's expected rate
    value_bps: float  # expected effective rate: batches left / remaining time, restart included
    # the lowest and highest compared rate its interval allows (`allowed`)
    lowest_bps: float
    highest_bps: float


@dataclass(frozen=True)
class Odds:
    """Every split's odds from one joint draw, the Bayes action and the close call."""

    splits: tuple[SplitOdds, ...]  # in the table's order
    best: str  # the Bayes action: least expected regret
    runner_up: str | None  # the next by expected regret
    close_call: bool  # both best splits' expected regrets below the resolution
    judged: str | None  # the split that runs now (restart weighed against it)
    restart_s: float  # the restart weighed (0: rates compared as they are)
    draws: int
    temperature: float  # the draw's calibration (module docstring): 1 and 0 where the table is drawn as stated
    level_corr: float

    def gain_over(self, label: str, other: str) -> float:
        """The expected gain (%) of split ``label`` over ``other``, held within what their intervals
        allow (module docstring).
        """
        a, b = self.of(label), self.of(other)
        gain = 100.0 * (a.value_bps / b.value_bps - 1.0) if b.value_bps > 0 else 0.0
        if b.lowest_bps > 0:
            gain = min(gain, 100.0 * (a.highest_bps / b.lowest_bps - 1.0))
        if b.highest_bps > 0 and math.isfinite(b.highest_bps):
            gain = max(gain, 100.0 * (a.lowest_bps / b.highest_bps - 1.0))
        return gain

    @cached_property
    def _by_label(self) -> dict[str, SplitOdds]:
        return {s.label: s for s in self.splits}

    def of(self, label: str) -> SplitOdds:
        """The odds of split ``label``; KeyError where the table has none."""
        return self._by_label[label]


def odds_of(rates: np.ndarray, inp: DrawInputs, *, judged: str | None = None, restart_s: float = 0.0) -> Odds:
    """The odds (module docstring) from drawn ``rates`` (draws x K, `draw_rates`)."""
    v = effective(rates, inp, judged, restart_s)
    weighed = v is not rates
    top = v.max(axis=1, keepdims=True)
    e_max = float(top.mean())
    mean_v = v.mean(axis=0)
    p_best = (v >= (1.0 - RESOLUTION) * top).mean(axis=0)
    p_top = np.bincount(v.argmax(axis=1), minlength=len(inp.labels)) / len(v)
    regret = 100.0 * (e_max - mean_v) / e_max if e_max > 0 else np.zeros(len(inp.labels))
    lo, hi = allowed(inp, judged if weighed else None, restart_s if weighed else 0.0)
    top_hi = float(hi.max()) if len(hi) else 0.0
    rows = []
    for i, label in enumerate(inp.labels):  # a regret within what the intervals allow (module docstring)
        most = 100.0 * (1.0 - lo[i] / top_hi) if top_hi > 0 and math.isfinite(top_hi) else 100.0
        rows.append(
            SplitOdds(
                label=label,
                p_best=float(p_best[i]),
                p_top=float(p_top[i]),
                regret_pct=float(min(max(float(regret[i]), 0.0), max(most, 0.0))),
                value_bps=float(mean_v[i]),
                lowest_bps=float(lo[i]),
                highest_bps=float(hi[i]),
            )
        )
    # least stated regret first, the higher mean among equals: where a bound holds one split's
    # regret below the Bayes action's drawn one, the split the sentences call better is chosen
    order = np.lexsort((-mean_v, [r.regret_pct for r in rows]))
    best = inp.labels[order[0]]
    runner = inp.labels[order[1]] if len(order) > 1 else None
    close = runner is not None and all(rows[j].regret_pct < 100 * RESOLUTION for j in order[:2])
    return Odds(
        splits=tuple(rows),
        best=best,
        runner_up=runner,
        close_call=bool(close),
        judged=judged,
        restart_s=float(restart_s) if weighed else 0.0,
        draws=len(rates),
        temperature=inp.temperature,
        level_corr=inp.level_corr,
    )
