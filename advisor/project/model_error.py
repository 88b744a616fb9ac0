"""The model checks itself: its miss at the splits the logs ran, carried into every projection.

A log's miss is ``m = ln(measured / projected)`` at its split as it ran (`reconcile`): the model's
own error there (the same run: no run-to-run shift; MODELLING.md section 9). The error along the
splits is a Gaussian process in ``u = ln(N / M)`` of scale ``sigma`` (the largest ``|m|``, 0 where
every miss is below ``MISS_FLOOR_LOG``) and correlation ``exp(-|u - v| / MODEL_ERROR_LENGTH)``,
conditioned on ``e = m`` at each observed split of the table: split k's error has mean ``mu_k``
and deviation ``s_k`` (0 at an observed split, up to ``sigma`` far from them). A probed split
carries none. `carry_model_error` shifts each interval by ``mu_k`` and adds ``1.96 s_k`` in
quadrature (never narrowing); the odds draw the process jointly (`ModelError.draw`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from advisor.model.chain import NO_PARTS
from advisor.project.rows import SplitRow
from advisor.project.table import Reconciliation
from advisor.stats import Z_95

MODEL_ERROR_LENGTH = 0.5  # correlation length in ln(N / M): one engine moved near balance at G = 12 keeps ~0.4
MISS_FLOOR_LOG = 1e-4  # misses below 0.01% are no evidence of error (printing precision)


@dataclass(frozen=True)
class ModelError:
    """The model's error process (module docstring): its scale, the misses it is conditioned on and
    where they were measured."""

    sigma_log: float  # the process's scale, ln b/s
    anchor_u: tuple[float, ...] = ()  # ln(N / M) of each observed split in the table
    anchor_miss_log: tuple[float, ...] = ()  # ln(measured / projected) there
    anchor_labels: tuple[str, ...] = ()  # their rows' labels
    length: float = MODEL_ERROR_LENGTH

    @property
    def active(self) -> bool:
        return self.sigma_log > 0

    def _kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.sigma_log**2 * np.exp(-np.abs(a[:, None] - b[None, :]) / self.length)

    def _weights(self, u: np.ndarray) -> np.ndarray:
        """``K_oo^-1 K_o*``: anchors x splits (the kriging weights of each split on the anchors)."""
        au = np.asarray(self.anchor_u, float)
        k_oo = self._kernel(au, au) + np.eye(len(au)) * 1e-12 * self.sigma_log**2
        return np.linalg.solve(k_oo, self._kernel(au, u))

    def posterior(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each split's error given the misses: mean and standard deviation, ln b/s."""
        u = np.asarray(u, float)
        if not self.active:
            return np.zeros_like(u), np.zeros_like(u)
        if not self.anchor_u:
            return np.zeros_like(u), np.full_like(u, self.sigma_log)
        w = self._weights(u)
        mean = np.asarray(self.anchor_miss_log, float) @ w
        var = self.sigma_log**2 - np.einsum("ok,ok->k", self._kernel(np.asarray(self.anchor_u, float), u), w)
        return mean, np.sqrt(np.maximum(var, 0.0))

    def draw(self, rng: np.random.Generator, draws: int, u: np.ndarray) -> np.ndarray:
        """``draws`` joint paths of the error at every split given the misses (an Ornstein-Uhlenbeck
        path along the sorted ``u``, conditioned on the anchors by Matheron's rule).
        """
        u = np.asarray(u, float)
        out = np.zeros((draws, len(u)))
        if not self.active or not len(u):
            return out
        order = np.argsort(u, kind="stable")
        path = np.empty((draws, len(u)))
        path[:, 0] = rng.standard_normal(draws) * self.sigma_log
        for j in range(1, len(u)):
            rho = math.exp(-(u[order[j]] - u[order[j - 1]]) / self.length)
            path[:, j] = rho * path[:, j - 1] + math.sqrt(
                max(1.0 - rho * rho, 0.0)
            ) * self.sigma_log * rng.standard_normal(draws)
        out[:, order] = path
        if self.anchor_u:  # Matheron's rule: the path plus the kriged difference at the anchors
            at = [int(np.argmin(np.abs(u - a))) for a in self.anchor_u]  # each anchor is a split of u
            out += (np.asarray(self.anchor_miss_log, float)[None, :] - out[:, at]) @ self._weights(u)
        return out


def split_u(n: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``ln(N / M)`` of each split: the coordinate the model's error is correlated along."""
    return np.log(np.maximum(np.asarray(n, float), 1e-9) / np.maximum(np.asarray(m, float), 1e-9))


def model_error(rows: Mapping[str, SplitRow], recon: Sequence[Reconciliation]) -> ModelError:
    """The model's error process from every log's comparison with its projection (module docstring)."""
    by_label: dict[str, list[float]] = {}
    other: list[float] = []
    for r in recon:
        if not (r.observed_bps > 0 and r.projected_bps > 0):
            continue
        miss = math.log(r.observed_bps / r.projected_bps)
        row = rows.get(r.label)
        row_ok = row is not None and row.observed and not row.probe_segments
        (by_label.setdefault(r.label, []) if row_ok else other).append(miss)
    anchors = {label: sum(v) / len(v) for label, v in by_label.items()}
    sigma = max([abs(x) for v in by_label.values() for x in v] + [abs(x) for x in other], default=0.0)
    if sigma < MISS_FLOOR_LOG:
        return ModelError(sigma_log=0.0)
    labels = list(anchors)
    u = split_u(*np.array([rows[x].counts for x in labels], float).reshape(-1, 2).T)
    return ModelError(
        sigma_log=sigma,
        anchor_u=tuple(float(x) for x in u),
        anchor_miss_log=tuple(anchors[x] for x in labels),
        anchor_labels=tuple(labels),
    )


def carry_model_error(rows: tuple[SplitRow, ...], err: ModelError) -> tuple[SplitRow, ...]:
    """The rows with the model's error in every interval and parts (module docstring)."""
    carries = np.array([err.active and not r.probe_segments for r in rows], bool)
    misses = dict(zip(err.anchor_labels, err.anchor_miss_log))
    out = [
        replace(
            r,
            parts=replace(
                r.parts or NO_PARTS,
                model_sigma_log=err.sigma_log if on else 0.0,
                model_miss_log=misses.get(r.label, math.nan),
            ),
        )
        for r, on in zip(rows, carries)
    ]
    if not err.active:  # no interval moves: the usual case of one log
        return tuple(out)
    mean, sd = err.posterior(split_u(*np.array([r.counts for r in rows], float).reshape(-1, 2).T))
    x = np.array([r.bps for r in rows], float)
    low, high = np.array([r.bps_low for r in rows], float), np.array([r.bps_high for r in rows], float)
    ok = carries & (x > 0) & np.isfinite(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        h_lo = np.where(low > 0, np.log(x / low), 0.0)
        h_hi = np.where(high > 0, np.log(high / x), 0.0)
        new_low = x * np.exp(mean - np.hypot(h_lo, Z_95 * sd))
        new_high = x * np.exp(mean + np.hypot(h_hi, Z_95 * sd))
    low = np.where(ok, np.minimum(low, new_low), low)
    high = np.where(ok, np.maximum(high, new_high), high)
    return tuple(replace(r, bps_low=float(a), bps_high=float(b)) for r, a, b in zip(out, low, high))
