"""Emulation: the real processes, queues, blocking and sync, with compute replaced by service
times drawn from a measured log.

Profile of a source log (read with ``advisor.load.load_log``; warm-up cut with
``advisor.steady.find_steady``, or the first 20% of the run if the log is too short for it):

- per role, an ordinary least-squares fit busy_s = t0 + c * tokens over the steady step events,
  and its residuals r_i = busy_i - (t0 + c * tokens_i);
- the (tokens, seqs) of the source's steady drafter batches;
- the source's sync durations when it ran M > 1 drafters (else ``--sync-s``).

Emulated run: the loader draws batches (tokens, seqs) with replacement from the source's
batches; a worker's service time for a batch of n tokens is t0 + c * n + r, with r drawn with
replacement from its role's residuals (clipped at 0). The fit keeps the per-token cost (so an
emulated split sees the source's mix of batch sizes) and the residuals keep the variability.
Expected emulated service time equals the source's mean busy time, so the emulated throughput of
the source's own split matches the source's (the fidelity test checks within 3%).

Workers sleep until a deadline (`clock.sleep_until`), and subtract their own measured per-cycle
overhead (queue operations, logging) from the next sleep, so that at --time-scale 0.01 a 0.3 ms
wall sleep still stands for a 30 ms step.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Iterator

import numpy as np

STEADY_FALLBACK_SHARE = 0.2


@dataclass(frozen=True)
class ServiceFit:
    """busy_s = t0_s + per_token_s * tokens + residual, per role."""

    role: str
    t0_s: float
    per_token_s: float
    residuals_s: tuple[float, ...]
    mean_busy_s: float

    def draw(self, tokens: int, rng: np.random.Generator) -> float:
        r = self.residuals_s[int(rng.integers(len(self.residuals_s)))]
        return max(0.0, self.t0_s + self.per_token_s * tokens + r)


def fit_service(role: str, tokens: np.ndarray, busy: np.ndarray) -> ServiceFit:
    tokens = np.asarray(tokens, dtype=float)
    busy = np.asarray(busy, dtype=float)
    if len(busy) == 0:
        raise ValueError(f"the source log has no steady '{role}' step events to fit")
    if len(busy) >= 3 and np.ptp(tokens) > 0:
        c, t0 = np.polyfit(tokens, busy, 1)
    else:
        c, t0 = 0.0, float(busy.mean())
    resid = busy - (t0 + c * tokens)
    return ServiceFit(role, float(t0), float(c), tuple(float(r) for r in resid), float(busy.mean()))


@dataclass(frozen=True)
class EmulationProfile:
    source: str
    roles: dict
    target: ServiceFit
    drafter: ServiceFit
    batch_tokens: tuple[int, ...]
    batch_seqs: tuple[int, ...]
    sync_durs_s: tuple[float, ...]        # empty: the source had no sync and no --sync-s was given
    sync_bytes: int
    steady_from_s: float
    source_drafter_steps: int
    header: dict                          # fields passed through to the emulated run's header

    def fit(self, role: str) -> ServiceFit:
        return self.target if role == "target" else self.drafter

    def batches(self, total: int, seed: int) -> Iterator[dict]:
        """The loader's messages of an emulated run: source batches drawn with replacement."""
        rng = np.random.default_rng([seed, 0xE8])
        for k in range(total):
            j = int(rng.integers(len(self.batch_tokens)))
            yield {"batch": k, "tokens": self.batch_tokens[j], "seqs": self.batch_seqs[j]}


def steady_start_s(log) -> float:
    """Start of the source's steady state (advisor's warm-up rule, else a fixed share)."""
    try:
        from advisor.steady import find_steady

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(find_steady(log).start_s)
    except Exception:   # too short for the advisor's rule, or an advisor without steady detection
        return STEADY_FALLBACK_SHARE * float(log.duration_s)


def load_profile(path: str, sync_s: float | None = None) -> EmulationProfile:
    from advisor.load import load_log

    log = load_log(path)
    steps = log.steps
    roles = dict(log.header.roles)
    if "target" not in roles or "drafter" not in roles:
        raise ValueError(f"{path}: emulation needs a log with 'target' and 'drafter' roles, got {list(roles)}")
    start = steady_start_s(log)
    steady = steps[steps["t"] >= start]
    fits = {}
    for role in ("target", "drafter"):
        s = steady[steady["role"] == role]
        if len(s) < 3:                      # a very short log: fit on everything but each worker's first step
            s = steps[steps["role"] == role]
            s = s[s.groupby("worker", observed=True).cumcount() > 0]
        fits[role] = fit_service(role, s["tokens"].to_numpy(), s["busy"].to_numpy())
    d = steady[steady["role"] == "drafter"]
    if len(d) == 0:
        d = steps[steps["role"] == "drafter"]
    syncs = log.syncs
    multi = syncs[syncs["workers"] > 1] if len(syncs) else syncs
    if len(multi):
        durs = tuple(float(x) for x in multi["dur"].to_numpy())
        nbytes = int(np.median(multi["bytes"].to_numpy()))
    else:
        durs = (float(sync_s),) if sync_s is not None else ()
        nbytes = 0
    h = log.header
    header = {"samples": h.samples, "epochs": h.epochs, "token_budget": h.token_budget, "hardware": h.hardware,
              "target_model": h.target_model, "drafter_model": h.drafter_model,
              "hs_bytes_per_token": h.hs_bytes_per_token}
    return EmulationProfile(source=str(path), roles=roles, target=fits["target"], drafter=fits["drafter"],
                            batch_tokens=tuple(int(x) for x in d["tokens"].to_numpy()),
                            batch_seqs=tuple(int(x) for x in d["seqs"].to_numpy()),
                            sync_durs_s=durs, sync_bytes=nbytes, steady_from_s=start,
                            source_drafter_steps=int((steps["role"] == "drafter").sum()), header=header)


class EmulatedCompute:
    """A role's stand-in: draws a service time per batch and forwards the batch's metadata."""

    def __init__(self, profile: EmulationProfile, role: str, index: int, seed: int):
        self.fit = profile.fit(role)
        self.role = role
        self.rng = np.random.default_rng([seed, 0xE7, 0 if role == "target" else 1, index])

    def info(self) -> dict:
        return {"t0_s": self.fit.t0_s, "per_token_s": self.fit.per_token_s}

    def service_s(self, item: dict) -> float:
        return self.fit.draw(int(item["tokens"]), self.rng)

    @staticmethod
    def message(item: dict) -> dict:
        return {"batch": item["batch"], "tokens": item["tokens"], "seqs": item["seqs"]}


def steady_bps(t: np.ndarray, skip_share: float = 0.2) -> float:
    """Completions per second of one role after its first ``skip_share`` of completions."""
    t = np.sort(np.asarray(t, dtype=float))
    k = int(len(t) * skip_share)
    if len(t) - k < 2 or t[-1] <= t[k]:
        raise ValueError("too few completions to measure a steady rate")
    return (len(t) - 1 - k) / (t[-1] - t[k])
