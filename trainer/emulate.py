"""Emulation: the real processes, queues, blocking and sync, with compute replaced by service
times drawn from a measured log.

Profile of a source log (read with ``advisor.ingest.load.load_log``; warm-up cut with
``advisor.measure.steady.find_steady``, or the first 20% of the run if the log is too short for it):

- per role, an ordinary least-squares fit busy_s = t0 + c * tokens over the steady step events,
  and its residuals r_i = busy_i - (t0 + c * tokens_i);
- the (tokens, seqs) of the source's steady drafter batches;
- the source's sync durations when it ran M > 1 drafters (else ``--sync-s``).

A source whose header has ``link_bytes_s`` (a run across nodes) has the link's time in its
drafters' ``busy`` (as ``xfer``); that time depends on the placement, not on the drafter, so the
drafter's fit is on ``busy - xfer`` and an emulation across nodes adds its own link time
(`trainer.placement`).

Emulated run: the loader draws batches (tokens, seqs) from the source's batches; a worker's
service time for a batch of n tokens is t0 + c * n + r, with r drawn from its role's residuals
(clipped at 0). The fit keeps the per-token cost (so an emulated split sees the source's mix of
batch sizes) and the residuals keep the variability. Draws are permutation resampling: each
pass over the source's values visits every value once, in a fresh random order, so the
distribution (and burstiness at the step level) is the source's while the running mean
converges to the source's mean in one pass instead of drifting by CV / sqrt(n) as i.i.d.
draws would. So the emulated throughput of the source's own split matches the source's.

Throughput for comparisons (`steady_throughput`): drafter completions per second between the
start of steady state (the advisor's warm-up rule) and the moment the first target ran out of
batches (after that, the pipeline drains with fewer producers: an end effect, not a rate).

Workers sleep until deadlines on an ideal timeline (`trainer.workers`): the instants a pipeline
with free queue operations would reach, so that wall-clock overhead (queue operations, logging,
a loaded machine's scheduler), which a time scale of 0.01 would multiply by 100, is not in the
logged times. `trainer.fidelity` measures what remains against an exact simulation.

The log's clock is the ideal timeline (`trainer.run`): a `rates` snapshot is taken at the wall
clock's time but never later than the latest logged step or sync (a worker running late on a loaded
machine must not put a snapshot past the pipeline's own progress), none once the planned batches
are done, and the `end` event and the closing snapshot sit at the last step. The wall time the
processes take to exit is not pipeline time; divided by the time scale it would add tens of
emulated seconds of idle tail that the advisor would cut as a drain.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass

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

    def service_s(self, tokens: int, residual_s: float) -> float:
        return max(0.0, self.t0_s + self.per_token_s * tokens + residual_s)


class Permuted:
    """Draws from ``values`` by passes: each pass is a fresh random permutation of all of them."""

    def __init__(self, values, rng: np.random.Generator):
        self.values = list(values)
        if not self.values:
            raise ValueError("nothing to draw from")
        self.rng = rng
        self._order: list[int] = []

    def draw(self):
        if not self._order:
            self._order = list(self.rng.permutation(len(self.values)))
        return self.values[self._order.pop()]


def fit_service(role: str, tokens: np.ndarray, busy: np.ndarray) -> ServiceFit:
    tokens = np.asarray(tokens, dtype=float)
    busy = np.asarray(busy, dtype=float)
    if len(busy) == 0:
        raise ValueError(f"the source log has no steady '{role}' step events to fit")
    if len(busy) >= 3 and np.ptp(tokens) > 0:
        # least squares, not the advisor's robust line: resampled residuals must average to zero
        # so that the emulated mean service time is the source's
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
    sync_durs_s: tuple[float, ...]  # empty: the source had no sync and no --sync-s was given
    sync_bytes: int
    steady_from_s: float
    source_drafter_steps: int
    header: dict  # fields passed through to the emulated run's header

    def fit(self, role: str) -> ServiceFit:
        return self.target if role == "target" else self.drafter

    def batches(self, total: int, seed: int) -> Iterator[dict]:
        """The loader's messages of an emulated run: source batches in permutation passes."""
        pick = Permuted(range(len(self.batch_tokens)), np.random.default_rng([seed, 0xE8]))
        for k in range(total):
            j = pick.draw()
            yield {"batch": k, "tokens": self.batch_tokens[j], "seqs": self.batch_seqs[j]}


def steady_start_s(log) -> float:
    """Start of the source's steady state (advisor's warm-up rule, else a fixed share)."""
    try:
        from advisor.errors import LogError
        from advisor.measure.steady import find_steady

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(find_steady(log).start_s)
    except LogError:  # too short for the advisor's rule
        return STEADY_FALLBACK_SHARE * float(log.duration_s)


def _drafter_xfer_s(path: str) -> dict[tuple[int, int], float]:
    """(worker, batch) -> xfer seconds of the drafter steps of a log (the reader keeps no xfer)."""
    import gzip
    import json

    opener = gzip.open if str(path).endswith(".gz") else open
    out = {}
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if '"xfer"' not in line or '"drafter"' not in line:
                continue
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("ev") == "step" and e.get("role") == "drafter" and isinstance(e.get("xfer"), (int, float)):
                out[(int(e["worker"]), int(e.get("batch", -1)))] = float(e["xfer"])
    return out


def load_profile(path: str, sync_s: float | None = None) -> EmulationProfile:
    from advisor.ingest.load import load_log

    log = load_log(path)
    steps = log.steps
    roles = dict(log.header.roles)
    if "target" not in roles or "drafter" not in roles:
        raise ValueError(f"{path}: emulation needs a log with 'target' and 'drafter' roles, got {list(roles)}")
    start = steady_start_s(log)
    steady = steps[steps["t"] >= start]
    fits = {}
    h = log.header
    xfer = _drafter_xfer_s(path) if h.link_bytes_s is not None else {}  # (a header field since issue 19)
    for role in ("target", "drafter"):
        s = steady[steady["role"] == role]
        if len(s) < 3:  # a very short log: fit on everything but each worker's first step
            s = steps[steps["role"] == role]
            s = s[s.groupby("worker", observed=True).cumcount() > 0]
        busy = s["busy"].to_numpy(float)
        if role == "drafter" and xfer:
            busy = busy - np.array([xfer.get((int(w), int(b)), 0.0) for w, b in zip(s["worker"], s["batch"])])
        fits[role] = fit_service(role, s["tokens"].to_numpy(), busy)
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
    header = {
        "samples": h.samples,
        "epochs": h.epochs,
        "token_budget": h.token_budget,
        "hardware": h.hardware,
        "target_model": h.target_model,
        "drafter_model": h.drafter_model,
        "hs_bytes_per_token": h.hs_bytes_per_token,
        # where the source's workers computed: the emulated workers stand in for them
        "device": h.extra.get("device"),
    }
    return EmulationProfile(
        source=str(path),
        roles=roles,
        target=fits["target"],
        drafter=fits["drafter"],
        batch_tokens=tuple(int(x) for x in d["tokens"].to_numpy()),
        batch_seqs=tuple(int(x) for x in d["seqs"].to_numpy()),
        sync_durs_s=durs,
        sync_bytes=nbytes,
        steady_from_s=start,
        source_drafter_steps=int((steps["role"] == "drafter").sum()),
        header=header,
    )


class EmulatedCompute:
    """A role's stand-in: draws a service time per batch and forwards the batch's metadata."""

    def __init__(self, profile: EmulationProfile, role: str, index: int, seed: int):
        self.fit = profile.fit(role)
        self.role = role
        self.residuals = Permuted(
            self.fit.residuals_s, np.random.default_rng([seed, 0xE7, 0 if role == "target" else 1, index])
        )

    def info(self) -> dict:
        return {"t0_s": self.fit.t0_s, "per_token_s": self.fit.per_token_s}

    def service_s(self, item: dict) -> float:
        return self.fit.service_s(int(item["tokens"]), self.residuals.draw())

    @staticmethod
    def message(item: dict) -> dict:
        return {"batch": item["batch"], "tokens": item["tokens"], "seqs": item["seqs"]}


def steady_throughput(log) -> tuple[float, float, float]:
    """(drafter batches/s, window start, window end) of a loaded log; see the module docstring."""
    steps = log.steps
    start = steady_start_s(log)
    ends = steps[steps["role"] == "target"].groupby("worker", observed=True)["t"].max()
    end = float(ends.min()) if len(ends) else float(steps["t"].max())
    t = np.sort(steps.loc[(steps["role"] == "drafter") & (steps["t"] >= start) & (steps["t"] <= end), "t"].to_numpy())
    if len(t) < 2 or t[-1] <= t[0]:
        raise ValueError(f"{log.path}: too few drafter completions in the steady window to measure a rate")
    return (len(t) - 1) / (t[-1] - t[0]), float(t[0]), float(t[-1])
