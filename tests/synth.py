"""Synthetic rate logs (schema v1) from an exact simulation of a documented generator.

The generator (one `Scenario`, deterministic per seed):

* Token counts. Token-budget batching packs sequences up to `budget` tokens, so a batch is
  nearly full with a left tail of under-filled batches (the last batch of a bucket):
  tokens = budget * F, F ~ Beta with mean tokens_mean / budget and coefficient of variation
  tokens_cv. Sequences per batch (for samples and ETA): seqs = 1 + Poisson(tokens / seq_len -
  1), mean tokens / seq_len.
* Service time of batch k at a role: busy_s = (t0_s + per_token_s * tokens_k) * Z_k * W_k,
  Z_k i.i.d. with mean 1 and squared coefficient of variation `scv` (gamma, or lognormal
  with sigma^2 = ln(1 + scv)); W_k the warm-up factor 1 + (warmup_factor - 1) *
  exp(-k / (warmup_tau_s * X0)), X0 = the naive bound min(N mu_t, M mu_d, mu_loader) in
  batches/s, so the slow-down decays over about warmup_tau_s seconds of run. The loader uses
  the same form (t0 = per_token = 0: an infinitely fast loader). Without warm-up, service
  times do not depend on the split, so every split of one scenario sees the same batches
  (common random numbers); the warm-up decay is scaled by the split's bound.
* Weight sync (M > 1, sync_every = k > 0): round r's all-reduce lasts T_ar(M) * V_r, V_r
  gamma noise of mean 1 and SCV sync_scv. T_ar(M) follows the ring all-reduce,
  sync_s * 2 (M - 1) / M (sync_s is its value at M = 2, where 2 (M - 1) / M = 1), or is flat,
  T_ar(M) = sync_s, with sync_scaling = "flat" (e.g. a switch-offloaded all-reduce).

The log (schema v1, docs/log-schema.md; every line built by `advisor.records`): `run` header;
one `step` per batch per worker with t = when the worker was free again (departure: after
any blocked time), busy = service, wait =
starved time before it (since the worker was last free, or since the end of the sync that
followed its previous step), blocked = held output after it; drafters' steps that end at a
barrier also carry `barrier` (seconds waiting for the other ranks, an extra field readers
ignore); a `sync` event per all-reduce (t = its end, dur = the all-reduce alone); `rates`
every rates_every_s seconds: bps per role = completions in the window / window, cap_bps per
role = workers * completions / busy seconds of those completions, tok_s = drafter tokens in
the window / window, q = instantaneous depths (q_hs counts waiting items only), done =
samples trained / (samples * epochs), eta_s = remaining samples / samples per second in the
window; `end`. The log stops at the end of the steady window (the loader's last departure)
or at duration_s, whichever is first, so it never shows the drain of a finite input.
Events are written in time order.
"""

from __future__ import annotations

import gzip
import json
import math
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from advisor.model.simulate import SimResult, simulate
from advisor.records import End, Queue, Rates, Run, Step, Sync


def _dumps(obj) -> bytes:
    # the standard library only: the same bytes wherever it runs (committed fixtures are compared
    # byte for byte; a faster optional encoder would format some floats differently)
    return json.dumps(obj, separators=(",", ":")).encode()


__all__ = [
    "ServiceModel",
    "TokenModel",
    "Scenario",
    "ScenarioDraw",
    "SynthLog",
    "draw",
    "run",
    "write_log",
    "reference_scenario",
]


def _check(cond: bool, field_name: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"{field_name}: {msg}")


def _noise(rng: np.random.Generator, scv: float, dist: str, n: int) -> np.ndarray:
    if scv == 0:
        return np.ones(n)
    if dist == "gamma":
        return rng.gamma(1.0 / scv, scv, n)
    sigma2 = math.log1p(scv)
    return rng.lognormal(-sigma2 / 2, math.sqrt(sigma2), n)


@dataclass(frozen=True)
class ServiceModel:
    """busy_s = (t0_s + per_token_s * tokens) * noise(mean 1, SCV scv)."""

    t0_s: float = 0.0
    per_token_s: float = 0.0
    scv: float = 0.0
    dist: str = "gamma"

    def __post_init__(self):
        _check(self.t0_s >= 0, "t0_s", f"must be >= 0, got {self.t0_s}")
        _check(self.per_token_s >= 0, "per_token_s", f"must be >= 0, got {self.per_token_s}")
        _check(self.scv >= 0, "scv", f"must be >= 0, got {self.scv}")
        _check(self.dist in ("gamma", "lognormal"), "dist", f"gamma or lognormal, got {self.dist!r}")

    def mean_s(self, tokens_mean: float) -> float:
        """Mean busy seconds of a batch (the noise has mean 1).

        Args:
            tokens_mean: tokens in the batch.

        Returns:
            ``t0_s + per_token_s * tokens_mean``.
        """
        return self.t0_s + self.per_token_s * tokens_mean

    @classmethod
    def from_mean(
        cls, mean_s: float, tokens_mean: float, *, overhead_share: float = 0.05, scv: float = 0.0, dist: str = "gamma"
    ) -> ServiceModel:
        """A model whose mean busy at tokens_mean is mean_s, overhead_share of it fixed.

        Args:
            mean_s: mean busy seconds per batch at ``tokens_mean``; > 0.
            tokens_mean: tokens per batch that ``mean_s`` refers to.
            overhead_share: the share of ``mean_s`` that is fixed (``t0_s``), in [0, 1]; the rest is per token.
            scv: the noise's squared coefficient of variation.
            dist: the noise's law, "gamma" or "lognormal".

        Returns:
            The model.
        """
        _check(mean_s > 0, "mean_s", f"must be > 0, got {mean_s}")
        _check(0 <= overhead_share <= 1, "overhead_share", f"must be in [0, 1], got {overhead_share}")
        return cls(mean_s * overhead_share, mean_s * (1 - overhead_share) / tokens_mean, scv, dist)


@dataclass(frozen=True)
class TokenModel:
    budget: int = 32768
    mean: float = 31200.0
    cv: float = 0.03
    seq_len: float = 1926.0

    def __post_init__(self):
        _check(self.budget > 0, "budget", f"must be > 0, got {self.budget}")
        _check(0 < self.mean < self.budget, "mean", f"must be in (0, budget={self.budget}), got {self.mean}")
        m = self.mean / self.budget
        _check(
            0 <= self.cv and (self.cv * m) ** 2 < m * (1 - m),
            "cv",
            f"{self.cv} is too large for a batch mean of {self.mean} under a budget of {self.budget}",
        )
        _check(self.seq_len > 0, "seq_len", f"must be > 0, got {self.seq_len}")

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Token and sequence counts of ``n`` batches (module docstring).

        Args:
            rng: the generator to draw from.
            n: batches.

        Returns:
            (tokens, seqs), int64 arrays of ``n``; with ``cv`` 0 every batch has round(mean) tokens.
        """
        m = self.mean / self.budget
        if self.cv == 0:
            tokens = np.full(n, round(self.mean), dtype=np.int64)
        else:
            v = (self.cv * m) ** 2
            nu = m * (1 - m) / v - 1
            tokens = np.maximum(1, np.rint(self.budget * rng.beta(m * nu, (1 - m) * nu, n))).astype(np.int64)
        lam = np.maximum(tokens / self.seq_len - 1, 0)
        seqs = 1 + rng.poisson(lam)
        return tokens, seqs.astype(np.int64)


@dataclass(frozen=True)
class Scenario:
    name: str
    n_target: int
    n_drafter: int
    target: ServiceModel
    drafter: ServiceModel
    loader: ServiceModel = field(default_factory=ServiceModel)
    tokens: TokenModel = field(default_factory=TokenModel)
    pre_cap: int = 50
    hs_cap: int = 20
    sync_every: int = 0
    sync_s: float = 0.0
    sync_scv: float = 0.0
    sync_scaling: str = "ring"
    sync_bytes: float | None = None
    n_batches: int | None = None
    duration_s: float | None = None
    warmup_factor: float = 1.0
    warmup_tau_s: float = 0.0
    seed: int = 0
    samples: int = 902000
    epochs: int = 6
    hardware: str = "synthetic"
    target_model: str = "synthetic-target"
    drafter_model: str = "synthetic-drafter"
    hs_bytes_per_token: int | None = None
    gpus_per_target: int = 1  # GPUs one target engine holds (a TP-k engine); the log's gpus_per_worker

    def __post_init__(self):
        for f, lo in (("n_target", 1), ("n_drafter", 1), ("pre_cap", 1), ("hs_cap", 0), ("sync_every", 0), ("seed", 0)):
            v = getattr(self, f)
            _check(isinstance(v, (int, np.integer)) and v >= lo, f, f"must be an integer >= {lo}, got {v!r}")
        _check(self.sync_s >= 0, "sync_s", f"must be >= 0, got {self.sync_s}")
        _check(self.sync_scv >= 0, "sync_scv", f"must be >= 0, got {self.sync_scv}")
        _check(self.sync_scaling in ("ring", "flat"), "sync_scaling", f"ring or flat, got {self.sync_scaling!r}")
        _check(self.warmup_factor >= 1, "warmup_factor", f"must be >= 1, got {self.warmup_factor}")
        _check(self.warmup_tau_s >= 0, "warmup_tau_s", f"must be >= 0, got {self.warmup_tau_s}")
        _check(
            (self.n_batches is None) != (self.duration_s is None),
            "n_batches",
            "give exactly one of n_batches and duration_s",
        )
        if self.n_batches is not None:
            _check(self.n_batches >= 10, "n_batches", f"must be >= 10, got {self.n_batches}")
        if self.duration_s is not None:
            _check(self.duration_s > 0, "duration_s", f"must be > 0, got {self.duration_s}")
        _check(self.target.mean_s(self.tokens.mean) > 0, "target", "mean service time must be > 0")
        _check(self.drafter.mean_s(self.tokens.mean) > 0, "drafter", "mean service time must be > 0")
        _check(self.samples > 0 and self.epochs > 0, "samples", "samples and epochs must be > 0")

    @property
    def gpus(self) -> int:
        return self.n_target * self.gpus_per_target + self.n_drafter

    def split(self, n_target: int, n_drafter: int) -> Scenario:
        """The scenario at another split.

        Args:
            n_target: target engines.
            n_drafter: drafter engines.

        Returns:
            A copy with only the two counts replaced.
        """
        return replace(self, n_target=n_target, n_drafter=n_drafter)

    def bound_bps(self) -> float:
        """Naive bound min(N mu_t, M mu_d, mu_loader) at the mean token count, sync ignored.

        Returns:
            Batches per second (the loader left out where it is infinitely fast).
        """
        tm = self.tokens.mean
        caps = [self.n_target / self.target.mean_s(tm), self.n_drafter / self.drafter.mean_s(tm)]
        if self.loader.mean_s(tm) > 0:
            caps.append(1.0 / self.loader.mean_s(tm))
        return min(caps)

    def allreduce_s(self, n_drafter: int | None = None) -> float:
        """Mean all-reduce seconds of one sync round among n_drafter ranks.

        Args:
            n_drafter: ranks; None: this split's drafters.

        Returns:
            ``sync_s`` times 2 (M - 1) / M (ring) or 1 (flat); 0 for one rank.
        """
        m = self.n_drafter if n_drafter is None else n_drafter
        if m <= 1:
            return 0.0
        return self.sync_s * (2.0 * (m - 1) / m if self.sync_scaling == "ring" else 1.0)

    def in_flight(self) -> int:
        """The most batches the pipeline holds at once.

        Returns:
            Batches: each target's prefetch queue, batch in service and held output, q_hs, one per
            drafter and the loader's.
        """
        return self.n_target * (self.pre_cap + 2) + self.hs_cap + self.n_drafter + 1

    def batch_count(self) -> int:
        """Batches to draw for the run.

        Returns:
            ``n_batches``; else 1.1 ``duration_s`` at the bound plus the in-flight batches and 50.
        """
        if self.n_batches is not None:
            return int(self.n_batches)
        # enough batches that the loader's last departure comes after duration_s
        return int(math.ceil(self.duration_s * self.bound_bps() * 1.1)) + self.in_flight() + 50


@dataclass(frozen=True)
class ScenarioDraw:
    tokens: np.ndarray
    seqs: np.ndarray
    loader_s: np.ndarray
    target_s: np.ndarray
    drafter_s: np.ndarray
    sync_factor: np.ndarray  # mean-1 noise per sync round; seconds = Scenario.allreduce_s(M) * factor


def draw(scenario: Scenario, n_batches: int | None = None, *, warmup: bool = True) -> ScenarioDraw:
    """Draw tokens and per-stage service times of n batches (deterministic per seed).

    The streams are drawn in a fixed order from one generator, so a longer draw of the same
    scenario starts with the batches of a shorter one (token counts first, for all n).

    Args:
        scenario: what to draw; its seed fixes the draw.
        n_batches: batches; None: ``scenario.batch_count()``.
        warmup: apply the warm-up factor (where ``warmup_factor`` > 1 and ``warmup_tau_s`` > 0).

    Returns:
        Per batch its tokens, sequences and each stage's service seconds, and the mean-1 sync
        noise of each sync round.
    """
    s = scenario
    n = s.batch_count() if n_batches is None else int(n_batches)
    rng = np.random.default_rng(s.seed)
    streams = rng.spawn(5)
    tokens, seqs = s.tokens.draw(streams[0], n)
    factor = np.ones(n)
    if warmup and s.warmup_factor > 1 and s.warmup_tau_s > 0:
        tau_batches = s.warmup_tau_s * s.bound_bps()
        factor = 1 + (s.warmup_factor - 1) * np.exp(-np.arange(n) / tau_batches)

    def service(m: ServiceModel, g: np.random.Generator) -> np.ndarray:
        base = m.t0_s + m.per_token_s * tokens
        return base * _noise(g, m.scv, m.dist, n) * factor

    sync = _noise(streams[4], s.sync_scv, "gamma", n // max(s.sync_every, 1) + 1)
    return ScenarioDraw(
        tokens, seqs, service(s.loader, streams[1]), service(s.target, streams[2]), service(s.drafter, streams[3]), sync
    )


def run(
    scenario: Scenario,
    *,
    n_batches: int | None = None,
    warmup: bool = True,
    warmup_batches: int | None = None,
    keep_trace: bool = False,
    sample: ScenarioDraw | None = None,
) -> SimResult:
    """Simulate the scenario's split.

    Args:
        scenario: the scenario; its split, queues and sync are simulated.
        n_batches: batches to draw; None: ``scenario.batch_count()`` (unused with ``sample``).
        warmup: apply the warm-up factor to the draw (unused with ``sample``).
        warmup_batches: drafter completions dropped before the steady window; None: a tenth of the batches.
        keep_trace: keep every batch's times and workers (``SimResult.trace``).
        sample: a draw to reuse across splits; None: drawn here.

    Returns:
        The simulation's result.
    """
    d = draw(scenario, n_batches, warmup=warmup) if sample is None else sample
    return simulate(
        target_s=d.target_s,
        drafter_s=d.drafter_s,
        loader_s=d.loader_s,
        tokens=d.tokens,
        n_target=scenario.n_target,
        n_drafter=scenario.n_drafter,
        hs_cap=scenario.hs_cap,
        pre_cap=scenario.pre_cap,
        sync_every=scenario.sync_every,
        sync_s=scenario.allreduce_s() * d.sync_factor,
        warmup_batches=warmup_batches,
        keep_trace=keep_trace,
    )


@dataclass(frozen=True)
class SynthLog:
    path: Path
    lines: int
    steps: int
    end_s: float
    result: SimResult


def _header(s: Scenario) -> Run:
    return Run(
        run=s.name,
        gpus=s.gpus,
        roles={"target": s.n_target, "drafter": s.n_drafter},
        queues=(
            Queue(name="pre", feeds="target", cap=s.pre_cap, per_worker=True),
            Queue(name="hs", feeds="drafter", cap=s.hs_cap),
        ),
        token_budget=s.tokens.budget,
        samples=s.samples,
        epochs=s.epochs,
        hardware=s.hardware,
        target_model=s.target_model,
        drafter_model=s.drafter_model,
        sync_every=s.sync_every,
        hs_bytes_per_token=s.hs_bytes_per_token,
        gpus_per_worker={"target": s.gpus_per_target} if s.gpus_per_target != 1 else None,
    )


def _prev_free(start: np.ndarray, free: np.ndarray, worker: np.ndarray) -> np.ndarray:
    """For each batch, when its worker was last free before starting it (0 for a first batch)."""
    order = np.lexsort((start, worker))
    w, f = worker[order], free[order]
    prev = np.zeros(start.shape[0])
    prev[order[1:]] = np.where(w[1:] == w[:-1], f[:-1], 0.0)  # the same worker's previous batch
    return prev


_T_DECIMALS = 4  # decimals of event times in the log


def _rounded(a, decimals: int = _T_DECIMALS) -> list:
    """The array `a` rounded to `decimals` places, as a list of Python numbers."""
    return np.round(a, decimals).tolist()


def _role_step_events(
    tr, seqs: np.ndarray, t_end_s: float, kind: int, role: str, free_s, prev_s, **more
) -> list[tuple[float, int, bytes]]:
    """Step events (t, kind, line) of one role's batches done by t_end_s (start, finish and worker
    from the trace's fields of ``role``); ``more``: field -> f(selected batches)."""
    start_s, finish_s, worker = (getattr(tr, f"{role}_{f}") for f in ("start_s", "finish_s", "worker"))
    sel = np.flatnonzero(free_s <= t_end_s)
    cols = {
        "worker": worker[sel].tolist(),
        "batch": sel.tolist(),
        "tokens": tr.tokens[sel].astype(np.int64).tolist(),
        "seqs": seqs[sel].tolist(),
        "busy": _rounded(finish_s[sel] - start_s[sel], 5),
        "wait": _rounded(start_s[sel] - prev_s[sel], 5),
    } | {name: f(sel) for name, f in more.items()}
    return [
        (t, kind, _dumps(Step(t=t, role=role, **dict(zip(cols, vals))).to_dict()))
        for t, *vals in zip(_rounded(free_s[sel]), *cols.values())
    ]


def _step_and_sync_events(
    s: Scenario, d: ScenarioDraw, tr, t_end_s: float
) -> tuple[list[tuple[float, int, bytes]], int]:
    """The step events of both roles, then the sync events, done by t_end_s, and the number of step events."""
    # --- per-batch step fields ---
    tgt_free_s = tr.target_departure_s
    tgt_prev_s = _prev_free(tr.target_start_s, tgt_free_s, tr.target_worker)
    dr_free_s = tr.drafter_finish_s
    sync_round = tr.drafter_sync_round
    closed = (sync_round >= 0) & (sync_round < tr.sync_end_s.shape[0])
    # after a step that entered a closed sync round the rank is free at the round's end
    dr_free_after_s = dr_free_s.copy()
    dr_free_after_s[closed] = tr.sync_end_s[sync_round[closed]]
    dr_prev_s = _prev_free(tr.drafter_start_s, dr_free_after_s, tr.drafter_worker)
    barrier_s = np.zeros_like(dr_free_s)
    barrier_s[closed] = tr.sync_start_s[sync_round[closed]] - dr_free_s[closed]

    # loss: a decaying curve with noise, deterministic per seed
    lrng = np.random.default_rng([s.seed, 7])
    k = np.arange(tr.tokens.shape[0])
    loss = 2.0 + 3.0 * np.exp(-k / 4000.0) + lrng.normal(0, 0.05, k.shape[0])

    events = _role_step_events(
        tr,
        d.seqs,
        t_end_s,
        0,
        "target",
        tgt_free_s,
        tgt_prev_s,
        blocked=lambda sel: _rounded(tgt_free_s[sel] - tr.target_finish_s[sel], 5),
    )
    with_barrier = s.sync_every > 0 and s.n_drafter > 1
    events += _role_step_events(
        tr,
        d.seqs,
        t_end_s,
        1,
        "drafter",
        dr_free_s,
        dr_prev_s,
        blocked=lambda sel: [0.0] * sel.size,
        loss=lambda sel: _rounded(loss[sel], 4),
        extra=lambda sel: [{"barrier": b} if with_barrier else {} for b in _rounded(barrier_s[sel], 5)],
    )
    n_steps = len(events)
    for r in np.flatnonzero(tr.sync_end_s <= t_end_s).tolist():
        t_s = round(float(tr.sync_end_s[r]), _T_DECIMALS)
        ev = Sync(
            t=t_s,
            role="drafter",
            workers=s.n_drafter,
            bytes=s.sync_bytes,
            dur=round(float(s.allreduce_s() * d.sync_factor[r % d.sync_factor.shape[0]]), 5),
        )
        events.append((t_s, 2, _dumps(ev.to_dict())))
    return events, n_steps


def _rates_events(
    s: Scenario, d: ScenarioDraw, tr, t_end_s: float, window_s: float
) -> tuple[list[tuple[float, int, bytes]], float]:
    """The rates snapshots every window_s seconds up to t_end_s, and the share of samples done at t_end_s."""
    N, M = s.n_target, s.n_drafter
    w = window_s
    snaps = np.arange(1, int(math.floor(t_end_s / w)) + 1) * w
    if not snaps.size:
        return [], 0.0
    tgt_free_s = tr.target_departure_s  # (entering q_hs)
    dr_free_s = tr.drafter_finish_s
    tgt_sorted = np.sort(tgt_free_s)
    t_busy = tr.target_finish_s - tr.target_start_s
    dr_sorted_idx = np.argsort(dr_free_s)
    dr_sorted = dr_free_s[dr_sorted_idx]
    d_busy = tr.drafter_finish_s - tr.drafter_start_s
    tgt_busy_cum = np.concatenate([[0.0], np.cumsum(t_busy[np.argsort(tgt_free_s)])])
    dr_busy_cum = np.concatenate([[0.0], np.cumsum(d_busy[dr_sorted_idx])])
    dr_tok_cum = np.concatenate([[0.0], np.cumsum(tr.tokens[dr_sorted_idx])])
    dr_seq_cum = np.concatenate([[0], np.cumsum(d.seqs[dr_sorted_idx])])
    pre_in = [np.sort(tr.loader_departure_s[tr.loader_queue == j]) for j in range(N)]
    pre_out = [np.sort(tr.target_start_s[tr.target_worker == j]) for j in range(N)]
    total_samples = s.samples * s.epochs

    def depth(ins, outs):  # a queue's items at each snapshot: entered by then, less taken out
        return np.searchsorted(ins, snaps, "right") - np.searchsorted(outs, snaps, "right")

    ta_i = np.searchsorted(tgt_sorted, snaps - w, "right")
    tb_i = np.searchsorted(tgt_sorted, snaps, "right")
    da_i = np.searchsorted(dr_sorted, snaps - w, "right")
    db_i = np.searchsorted(dr_sorted, snaps, "right")
    hs_depth = depth(tgt_sorted, np.sort(tr.drafter_start_s))
    pre_depth = np.stack([depth(pre_in[j], pre_out[j]) for j in range(N)], axis=1)
    events: list[tuple[float, int, bytes]] = []
    for i, t in enumerate(snaps.tolist()):
        nt, nd = int(tb_i[i] - ta_i[i]), int(db_i[i] - da_i[i])
        bt = float(tgt_busy_cum[tb_i[i]] - tgt_busy_cum[ta_i[i]])
        bd = float(dr_busy_cum[db_i[i]] - dr_busy_cum[da_i[i]])
        cap = {}
        if nt and bt > 0:
            cap["target"] = round(N * nt / bt, 4)
        if nd and bd > 0:
            cap["drafter"] = round(M * nd / bd, 4)
        seq_rate = float(dr_seq_cum[db_i[i]] - dr_seq_cum[da_i[i]]) / w
        done_samples = float(dr_seq_cum[db_i[i]])
        ev = Rates(
            t=round(t, _T_DECIMALS),
            window=w,
            bps={"target": round(nt / w, 4), "drafter": round(nd / w, 4)},
            cap_bps=cap or None,
            tok_s=round(float(dr_tok_cum[db_i[i]] - dr_tok_cum[da_i[i]]) / w, 1),
            q={"pre": pre_depth[i].tolist(), "hs": int(hs_depth[i])},
            eta_s=round(max(total_samples - done_samples, 0.0) / seq_rate, 1) if seq_rate > 0 else None,
            done=round(min(done_samples / total_samples, 1.0), 6),
        )
        events.append((t, 3, _dumps(ev.to_dict())))
    final_done = float(dr_seq_cum[np.searchsorted(dr_sorted, t_end_s, "right")]) / total_samples
    return events, final_done


def _write_lines(path: Path, head: Run, events: list[tuple[float, int, bytes]], end: End) -> None:
    """Write the header, the events' lines in list order and the end line to `path` (gzip if it ends in .gz)."""
    with open(path, "wb") as raw:
        fh = (
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
            if path.suffix == ".gz"
            else raw
        )
        fh.write(_dumps(head.to_dict()) + b"\n")
        for i in range(0, len(events), 65536):
            fh.write(b"\n".join(e[2] for e in events[i : i + 65536]) + b"\n")
        fh.write(_dumps(end.to_dict()) + b"\n")
        if fh is not raw:
            fh.close()


def write_log(
    path,
    scenario: Scenario,
    *,
    rates_every_s: float = 60.0,
    rates_only: bool = False,
    end_reason: str | None = None,
    sample: ScenarioDraw | None = None,
) -> SynthLog:
    """Simulate `scenario` and write its schema-v1 log to `path`.

    Args:
        path: the file to write (a str or a Path), gzip if it ends in .gz.
        scenario: the scenario to simulate; it fills the header too.
        rates_every_s: seconds between ``rates`` snapshots (their window); > 0.
        rates_only: write no step or sync events.
        end_reason: the ``end`` line's reason; None: "done" where every sample of every epoch was
            trained by the end, else "interrupted".
        sample: a draw to reuse; None: drawn from the scenario.

    Returns:
        The log's path, lines (header and end included), step events and end time (seconds), and
        the simulation's result.
    """
    _check(rates_every_s > 0, "rates_every_s", f"must be > 0, got {rates_every_s}")
    s = scenario
    d = draw(s) if sample is None else sample
    res = run(s, sample=d, keep_trace=True, warmup_batches=0)
    t_end_s = res.t_to_s if s.duration_s is None else min(res.t_to_s, float(s.duration_s))
    events, n_steps = ([], 0) if rates_only else _step_and_sync_events(s, d, res.trace, t_end_s)
    rates, final_done = _rates_events(s, d, res.trace, t_end_s, float(rates_every_s))
    events += rates
    events.sort(key=lambda e: (e[0], e[1]))
    reason = end_reason or ("done" if final_done >= 1.0 else "interrupted")
    end = End(t=round(t_end_s, _T_DECIMALS), reason=reason)
    path = Path(path)
    _write_lines(path, _header(s), events, end)
    return SynthLog(path=path, lines=len(events) + 2, steps=n_steps, end_s=t_end_s, result=res)


def reference_scenario(*, duration_s: float = 5400.0, seed: int = 20260415) -> Scenario:
    """The reference case (docs/log-schema.md, worked example) as a generator: 8 GPUs, 7 targets of 7/0.92 s mean busy
    (0.92 b/s together), 1 drafter of 1/0.86 s (0.86 b/s), q_hs 20, q_pre 50 and an
    infinitely fast loader, 31.2K tokens per batch of a 32768 budget, GPU-like service
    noise (SCV 0.03), a warm-up 1.5x slower decaying over ~3 minutes.

    Args:
        duration_s: the run's length, seconds (the log stops there).
        seed: the draw's seed.

    Returns:
        The scenario.
    """
    tm = TokenModel(budget=32768, mean=31200.0, cv=0.03, seq_len=1926.0)
    return Scenario(
        name="v2-kpro6-7x1-softKL-6ep",
        n_target=7,
        n_drafter=1,
        target=ServiceModel.from_mean(7 / 0.92, tm.mean, overhead_share=0.05, scv=0.03),
        drafter=ServiceModel.from_mean(1 / 0.86, tm.mean, overhead_share=0.07, scv=0.03),
        tokens=tm,
        pre_cap=50,
        hs_cap=20,
        duration_s=duration_s,
        warmup_factor=1.5,
        warmup_tau_s=180.0,
        seed=seed,
        samples=902000,
        epochs=6,
        hardware="8x RTX PRO 6000 96GB",
        target_model="Qwen3.6-27B",
        drafter_model="dflash-b16",
        hs_bytes_per_token=61440,
    )


@dataclass(frozen=True)
class SharedCores:
    """The host and run of `shared_cores_log`: its cores, one core's seconds per batch of a target and
    of a drafter, the q_hs depth, the run's length, the time step and the seed."""

    cores: float = 2.0
    work_t_s: float = 0.10  # one core's seconds per target batch (mean)
    work_d_s: float = 0.06  # one core's seconds per drafter batch (mean)
    hs_cap: int = 4  # q_hs depth, batches
    seconds: float = 120.0  # the run's length
    dt_s: float = 0.0005  # the time step
    seed: int = 0


def shared_cores_log(path, n: int, m: int, host: SharedCores = SharedCores()) -> Path:
    """A rate log of n targets and m drafters on a host of ``host.cores`` cores, its header silent on
    devices (no ``device``, ``physical_gpus``): every busy worker gets min(1, cores / busy workers)
    of a core (processor sharing), so a step takes longer while more peers are busy. Time-stepped
    (``dt_s``): a target holds a finished batch while q_hs (``hs_cap``) is full, a drafter waits while
    it is empty; ``work_t_s``, ``work_d_s`` are one core's seconds per batch (gamma, SCV 0.1). Ends
    ``interrupted`` at ``seconds`` (benchmarks/shared_cores.py, issue 21).

    Args:
        path: the file to write (a str or a Path), plain JSON lines.
        n: target workers.
        m: drafter workers.
        host: the host and the run.

    Returns:
        ``path``, as a Path.
    """
    rng = random.Random(host.seed)
    draw = lambda mean: mean * rng.gammavariate(10.0, 0.1)  # noqa: E731
    tgt = [{"state": "busy", "left": draw(host.work_t_s), "start": 0.0, "done": 0.0} for _ in range(n)]
    dft = [{"state": "idle", "left": 0.0, "start": 0.0, "free": 0.0, "wait": 0.0} for _ in range(m)]
    queue, held, rows, batch = 0, [], [], 0

    def step(now: float, role: str, worker: int, busy: float, wait: float, blocked: float) -> dict:
        return {
            "ev": "step",
            "t": round(now, 4),
            "role": role,
            "worker": worker,
            "batch": batch,
            "tokens": 1000,
            "busy": round(busy, 5),
            "wait": round(wait, 5),
            "blocked": round(blocked, 5),
        }

    for k in range(1, int(host.seconds / host.dt_s) + 1):
        now = k * host.dt_s
        busy = sum(w["state"] == "busy" for w in tgt) + sum(d["state"] == "busy" for d in dft)
        rate = min(1.0, host.cores / max(busy, 1))
        for i, w in enumerate(tgt):
            if w["state"] == "busy":
                w["left"] -= host.dt_s * rate
                if w["left"] <= 0:
                    w.update(state="held", done=now)
                    held.append(i)
        while held and queue < host.hs_cap:
            i = held.pop(0)
            w = tgt[i]
            queue += 1
            batch += 1
            rows.append(step(now, "target", i, w["done"] - w["start"], 0.0, now - w["done"]))
            w.update(state="busy", left=draw(host.work_t_s), start=now)
        for j, d in enumerate(dft):
            if d["state"] == "busy":
                d["left"] -= host.dt_s * rate
                if d["left"] <= 0:
                    rows.append(step(now, "drafter", j, now - d["start"], d["wait"], 0.0))
                    d.update(state="idle", free=now)
            if d["state"] == "idle" and queue > 0:
                queue -= 1
                d.update(state="busy", left=draw(host.work_d_s), start=now, wait=now - d["free"])
    rows.sort(key=lambda r: r["t"])
    head = {
        "ev": "run",
        "v": 1,
        "t": 0.0,
        "run": f"shared-cores-{n}x{m}",
        "gpus": n + m,
        "roles": {"target": n, "drafter": m},
        "queues": [{"name": "hs", "feeds": "drafter", "cap": host.hs_cap}],
        "token_budget": 1000,
    }
    path = Path(path)
    path.write_text(
        "".join(json.dumps(o) + "\n" for o in [head, *rows, {"ev": "end", "t": host.seconds, "reason": "interrupted"}])
    )
    return path
