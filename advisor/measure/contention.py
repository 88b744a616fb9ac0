"""Contention inside one log: does a worker's step take longer while more peers are busy?

Across logs at several splits shared host resources show as a split-dependent step time
(`ContentionFit`); inside one log the busy peers vary over time, which may identify the same
effect. A step event's compute ran over ``[t - blocked - busy, t - blocked]`` (docs/log-schema.md);
a drafter's sync round is not busy. Per step i of role r, over its busy interval:

    P_i, C_i = mean busy producers, consumers over the interval, less the worker itself
    S_i = 1 when it waited (starved) more than STARVED_MIN of a typical step just before

and per role a Huber-weighted (IRLS, ``HUBER_K``) fit with one intercept per time block (slow
drifts move step times and concurrency together)

    ln busy_i = a + b_P (P_i - mean P) + b_C (C_i - mean C) + g ln(tokens_i / mean tokens) + d S_i

with P_i and C_i instrumented by the busy peers at the step's start (a step's own length decides
what P_i averages over, which would pass for contention: BENCHMARKS.md 20.3). Standard errors are
cluster-robust over the ``BLOCKS`` time blocks (B/(B-1), Student t with B-1 dof). A regressor
enters where it varies inside the blocks (``MIN_PEER_SD``, ``MIN_STARVED_SHARE``); a slope is
identified where its 95% half-width is at most ``MAX_HALF95``, and one significantly below zero
is feedback, flagged ``confounded`` and never used. `scales_at` and `fixed_point` give what the
slopes would make of another split (P' = N u_P - [r = P], the utilisations iterated); the fit
reports the slopes and does not move the projection with them (BENCHMARKS.md 20.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor.settings import role_plural
from advisor.stats import HUBER_K, t_975

BLOCKS = 20  # time blocks for the cluster-robust standard errors
MIN_STEPS = 60  # per role, in the steady window
MIN_PEER_SD = 0.25  # workers: concurrency that varies less identifies nothing
MIN_STARVED_SHARE = 0.05  # both starved and back-to-back steps at least this share
STARVED_MIN = 0.2  # a wait above this share of the median step counts as starved
MAX_HALF95 = 0.05  # a slope is identified when its 95% half-width is at most this
MAX_FIT_STEPS = 20_000  # per role: the regression's cost stays bounded on long logs


@dataclass(frozen=True, kw_only=True)
class RoleContention:
    """Within-log contention slopes of one role (per extra busy worker, log scale)."""

    role: str
    n_steps: int
    producer_peers_mean: float  # other busy producers during a step, mean and sd
    producer_peers_sd: float
    consumer_peers_mean: float
    consumer_peers_sd: float
    per_producer: float = 0.0  # b_P: d ln busy / d (busy producers)
    per_producer_se: float = math.inf
    per_consumer: float = 0.0  # b_C
    per_consumer_se: float = math.inf
    starved: float = 0.0  # d: ln busy after a starved wait minus back-to-back
    starved_se: float = math.inf
    starved_share: float = 0.0  # share of steps taken after a starved wait

    def slope(self, which: str) -> tuple[float, float]:
        """The slope on busy ``which`` ("producer" or "consumer"; "starved": after a starved wait) and its se."""
        name = "starved" if which == "starved" else f"per_{which}"
        return getattr(self, name), getattr(self, f"{name}_se")

    def identified(self, which: str) -> bool:
        """Whether the slope's 95% half-width is at most ``MAX_HALF95``."""
        se = self.slope(which)[1]
        return math.isfinite(se) and t_975(19) * se <= MAX_HALF95

    def confounded(self, which: str) -> bool:
        """Whether the slope is significantly below zero (feedback, never used)."""
        b, se = self.slope(which)
        return math.isfinite(se) and b + t_975(19) * se < 0

    def usable(self, which: str) -> float:
        """The slope on busy ``which`` if identified and not confounded, else 0."""
        return self.slope(which)[0] if self.identified(which) and not self.confounded(which) else 0.0


@dataclass(frozen=True, kw_only=True)
class WithinLogContention:
    """Both roles' within-log slopes, or why none could be estimated (``reason``)."""

    producer: RoleContention | None = None
    consumer: RoleContention | None = None
    reason: str = ""

    @property
    def estimated(self) -> bool:
        return self.producer is not None and self.consumer is not None

    @property
    def identified(self) -> bool:
        """Some slope on busy peers is identified and not confounded (usable for projection)."""
        return self.estimated and any(
            rc.usable(w) != 0.0 for rc in (self.producer, self.consumer) for w in ("producer", "consumer")
        )

    def scales_at(self, n: int, m: int, util_p: float, util_c: float) -> tuple[float, float]:
        """Step-time multipliers (producer, consumer) at N = n, M = m with these utilisations."""
        if not self.estimated:
            return 1.0, 1.0
        out = []
        for rc, own_p in ((self.producer, 1.0), (self.consumer, 0.0)):
            dp = (n * util_p - own_p) - rc.producer_peers_mean
            dc = (m * util_c - (1.0 - own_p)) - rc.consumer_peers_mean
            out.append(math.exp(rc.usable("producer") * dp + rc.usable("consumer") * dc))
        return out[0], out[1]

    def fixed_point(
        self, n: int, m: int, utilisation: Callable[[float, float], tuple[float, float]], iters: int = 8
    ) -> tuple[float, float]:
        """Scales at (n, m), iterated to a fixed point."""
        sp = sc = 1.0
        for _ in range(iters):
            up, uc = utilisation(sp, sc)
            np_, nc = self.scales_at(n, m, up, uc)
            if abs(np_ - sp) < 1e-6 and abs(nc - sc) < 1e-6:
                return np_, nc
            sp, sc = np_, nc
        return sp, sc


def _busy_counts(starts: np.ndarray, ends: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The count of open intervals [starts, ends] (0 before the first breakpoint): its time average
    over each [a, b], and its value at a; zero where there are no intervals."""
    if not len(starts):
        return np.zeros(len(a)), np.zeros(len(a))
    x = np.concatenate([starts, ends])
    d = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    o = np.argsort(x, kind="stable")
    x, d = x[o], d[o]
    cnt = np.cumsum(d)
    cum = np.concatenate([[0.0], np.cumsum(cnt[:-1] * np.diff(x))])

    def at(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The count's integral up to ``u``, and the count there."""
        i = np.searchsorted(x, u, side="right") - 1
        j = np.clip(i, 0, len(x) - 1)
        return np.where(i < 0, 0.0, cum[j] + cnt[j] * (u - x[j])), np.where(i < 0, 0.0, cnt[j])

    (int_a, at_a), (int_b, _) = at(a), at(b)
    return (int_b - int_a) / np.maximum(b - a, 1e-12), at_a


def peer_concurrency(steps: pd.DataFrame, producer: str, consumer: str, rows: np.ndarray | None = None) -> pd.DataFrame:
    """Rows of ``steps`` with the busy interval's other busy producers and consumers, averaged over
    the interval, and the same at its start instant. Concurrency is counted over all the steps.
    """
    end = (steps["t"] - steps["blocked"].fillna(0.0)).to_numpy(float)
    start = end - steps["busy"].to_numpy(float)
    is_role = {r: (steps["role"] == r).to_numpy() for r in (producer, consumer)}
    sel = np.arange(len(steps)) if rows is None else rows
    out = steps.iloc[sel].copy()
    a, b = start[sel], end[sel]
    for r, col in ((producer, "peers_p"), (consumer, "peers_c")):
        m = is_role[r]
        own = m[sel].astype(float)
        mean, at_start = _busy_counts(start[m], end[m], a, b)
        out[col] = mean - own
        out[col + "0"] = at_start - own  # busy at the start instant (own step excluded: it opens there)
    return out


def _huber_cluster(x: np.ndarray, y: np.ndarray, blocks: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Huber IRLS with one intercept per block (absorbed: weighted block means are taken out of y, x
    and the instruments z each round), just-identified IV; cluster-robust standard errors over the
    blocks. Returns the slopes of the columns of ``x`` and their standard errors."""
    nb = int(blocks.max()) + 1
    w = np.ones(len(y))

    def block_sums(a: np.ndarray) -> np.ndarray:
        """Each column's sum per block (blocks x columns)."""
        return np.column_stack([np.bincount(blocks, weights=a[:, j], minlength=nb) for j in range(a.shape[1])])

    def demean(a: np.ndarray, w: np.ndarray) -> np.ndarray:
        sw = np.maximum(np.bincount(blocks, weights=w, minlength=nb), 1e-12)
        cols = a.reshape(len(a), -1)
        return (cols - (block_sums(w[:, None] * cols) / sw[:, None])[blocks]).reshape(a.shape)

    beta = np.zeros(x.shape[1])
    for _ in range(20):
        xd, zd, yd = demean(x, w), demean(z, w), demean(y, w)
        zw = zd * w[:, None]
        beta_new = np.linalg.lstsq(zw.T @ xd, zw.T @ yd, rcond=None)[0]
        e = yd - xd @ beta_new
        scale = 1.4826 * float(np.median(np.abs(e - np.median(e)))) or float(np.std(e)) or 1.0
        w = np.minimum(1.0, HUBER_K / np.maximum(np.abs(e) / scale, 1e-12))
        done = np.allclose(beta_new, beta, atol=1e-7)
        beta = beta_new
        if done:
            break
    xd, zd, yd = demean(x, w), demean(z, w), demean(y, w)
    e = yd - xd @ beta
    bread = np.linalg.pinv((zd * w[:, None]).T @ xd)
    u = zd * (w * e)[:, None]
    scores = block_sums(u)
    g = len(np.unique(blocks))
    cov = bread @ (scores.T @ scores) @ bread.T * (g / max(g - 1, 1))
    return beta, np.sqrt(np.maximum(np.diag(cov), 0.0))


def _role_fit(st: pd.DataFrame, role: str, t0: float, t1: float) -> RoleContention:
    busy = st["busy"].to_numpy(float)
    pp, pc = st["peers_p"].to_numpy(float), st["peers_c"].to_numpy(float)
    base = dict(
        role=role,
        n_steps=len(st),
        producer_peers_mean=float(pp.mean()),
        producer_peers_sd=float(pp.std()),
        consumer_peers_mean=float(pc.mean()),
        consumer_peers_sd=float(pc.std()),
    )
    wait = st["wait"].fillna(0.0).to_numpy(float)
    starved = (wait > STARVED_MIN * float(np.median(busy))).astype(float)
    base["starved_share"] = float(starved.mean())
    ok = busy > 0
    t = st["t"].to_numpy(float)[ok]
    blocks = np.clip(((t - t0) / max(t1 - t0, 1e-12) * BLOCKS).astype(int), 0, BLOCKS - 1)
    used = np.unique(blocks)
    counts = np.bincount(blocks, minlength=BLOCKS)
    # one intercept per time block: slopes come from concurrency changes within a block, not from
    # slow drifts (warm-up, a host's load) that move step times and concurrency together
    # each regressor that enters, by the field its slope goes to (the tokens' slope is not kept), with
    # its instrument: the busy peers at the step's start for the peers, itself for the others
    regs = {}
    p0, c0 = st["peers_p0"].to_numpy(float)[ok], st["peers_c0"].to_numpy(float)[ok]
    for name, x, x0 in (("per_producer", pp[ok], p0), ("per_consumer", pc[ok], c0)):
        per_block = np.bincount(blocks, weights=x, minlength=BLOCKS) / np.maximum(counts, 1)
        if (x - per_block[blocks]).std() >= MIN_PEER_SD and x0.std() > 0:
            regs[name] = (x, x0)
    tok = st["tokens"].to_numpy(float)[ok]
    if tok.min() > 0 and np.log(tok).std() > 1e-6:
        regs["tokens"] = (np.log(tok),) * 2
    if MIN_STARVED_SHARE <= starved.mean() <= 1 - MIN_STARVED_SHARE:
        regs["starved"] = (starved[ok],) * 2
    if not regs or ok.sum() < MIN_STEPS or len(used) < 3:
        return RoleContention(**base)
    cols, inst = zip(*regs.values())
    beta, se = _huber_cluster(np.column_stack(cols), np.log(busy[ok]), blocks, np.column_stack(inst))
    for name, b, b_se in zip(regs, beta.tolist(), se.tolist()):
        if name != "tokens":
            base[name], base[name + "_se"] = b, b_se
    return RoleContention(**base)


def estimate_within_log(
    steps: pd.DataFrame,
    producer: str,
    consumer: str,
    start_s: float,
    end_s: float,
    *,
    sampled: bool = False,
) -> WithinLogContention:
    """Within-log contention slopes from all of a log's steps (concurrency) and the steady window
    (the fit: at most ``MAX_FIT_STEPS`` per role, evenly spread over the window).
    """
    if sampled:
        return WithinLogContention(reason="the log's steps are sampled (summary), so who was busy when is unknown")
    t = steps["t"].to_numpy(float)
    inside = (t >= start_s) & (t <= end_s)
    picked = {}
    for r in (producer, consumer):
        idx = np.flatnonzero(inside & (steps["role"] == r).to_numpy())
        if len(idx) < MIN_STEPS:
            return WithinLogContention(reason=f"fewer than {MIN_STEPS} steady '{r}' steps")
        if len(idx) > MAX_FIT_STEPS:
            idx = idx[np.linspace(0, len(idx) - 1, MAX_FIT_STEPS).astype(int)]
        picked[r] = idx
    st = peer_concurrency(steps, producer, consumer, np.concatenate([picked[producer], picked[consumer]]))
    k = len(picked[producer])
    return WithinLogContention(
        producer=_role_fit(st.iloc[:k], producer, start_s, end_s),
        consumer=_role_fit(st.iloc[k:], consumer, start_s, end_s),
    )


def _pct(b: float) -> str:
    """A log slope as the percent change it makes (past a factor of 100: "+9900% or more")."""
    return "+9900% or more" if b > math.log(100.0) else f"{100 * math.expm1(b):+.1f}%"


def within_log_text(w: WithinLogContention | None, producer: str, consumer: str) -> str:
    """One sentence on the within-log slopes, for the advice's caveats."""
    if w is None:
        return ""
    if not w.estimated:
        return f"contention inside the log was not estimated: {w.reason}" if w.reason else ""
    found, odd = [], []
    for rc in (w.producer, w.consumer):
        for which, peer in (("producer", producer), ("consumer", consumer)):
            b, se = rc.slope(which)
            ok, conf = rc.identified(which), rc.confounded(which)
            if not math.isfinite(se) or not (ok or conf):
                continue
            part = f"a {rc.role}'s step {_pct(b)} per extra busy {peer} (95% +-{100 * t_975(19) * se:.1f}%)"
            if conf:
                odd.append(part)
            elif ok:
                found.append(part)
        if rc.identified("starved"):
            found.append(
                f"a {rc.role}'s step after a starved wait {_pct(rc.starved)} against back-to-back "
                f"(95% +-{100 * t_975(19) * rc.starved_se:.1f}%)"
            )
    if not found and not odd:
        sds = (
            f"busy {role_plural(producer)} sd {w.producer.producer_peers_sd:.2f}, busy {role_plural(consumer)} sd "
            f"{w.consumer.consumer_peers_sd:.2f}"
        )
        return (
            f"the number of busy workers hardly varied inside the log ({sds}; {MIN_PEER_SD} needed) or its "
            f"effect was not resolved, so contention could not be measured from this log alone"
        )
    out = []
    if found:
        out.append(
            "inside the log, " + "; ".join(found) + " (data, not projected: inside one log concurrency "
            "follows the step times; a role's own slope widens its interval)"
        )
    if odd:
        out.append(
            "ignored as confounded (faster with more busy peers: slow stretches idle the peers): " + "; ".join(odd)
        )
    return "; ".join(out)
