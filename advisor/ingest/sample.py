"""The uniform sample of rows a summary keeps: hash keys, stable orders and the bottom k.

Every row gets a 64-bit key, a hash (splitmix64) of its content (role, t, worker, batch, tokens,
busy: `row_keys`), and a `Sample` keeps the ``k`` rows with the smallest keys. The keys are
uniform, so the kept rows are a uniform sample without replacement; the bottom k of a union is the
bottom k of the parts' bottom k, so samples merge exactly and deterministically: the sample of
merged per-rank summaries is the very sample of the whole log (`advisor.ingest.summary`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

KEY_FIELDS = ("t", "worker", "batch", "tokens", "busy")

_C0 = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)


_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix(x: np.ndarray, tmp: np.ndarray | None = None) -> np.ndarray:
    """splitmix64's finaliser (uint64 arithmetic wraps), in place in ``x`` (``tmp``: a scratch
    array like it): ``x += C0; x = (x ^ x >> 30) * C1; x = (x ^ x >> 27) * C2; x ^= x >> 31``."""
    tmp = np.empty_like(x) if tmp is None else tmp
    np.add(x, _C0, out=x)
    for shift, mult in ((_S30, _C1), (_S27, _C2), (_S31, None)):
        np.bitwise_xor(x, np.right_shift(x, shift, out=tmp), out=x)
        if mult is not None:
            np.multiply(x, mult, out=x)
    return x


def row_keys(cols: Mapping[str, np.ndarray], salt: int | np.ndarray, fields: Sequence[str] = KEY_FIELDS) -> np.ndarray:
    """A 64-bit hash of each row's content: the order key of the bottom-k sample.

    Each field's float64 bits enter with one NaN pattern (NaN -> 0.0) and -0.0 as 0.0. (Into
    buffers allocated once: a large log hashes every step, and fresh temporaries per operation
    cost more, BENCHMARKS.md 20.11.)
    """
    n = len(cols[fields[0]])
    if np.ndim(salt):
        h = np.asarray(salt).astype(np.uint64) + np.uint64(1)
    else:
        h = np.full(n, np.uint64(salt + 1), dtype=np.uint64)
    v = np.empty(n, dtype=np.float64)
    tmp = np.empty(n, dtype=np.uint64)
    for f in fields:
        src = np.asarray(cols[f], dtype=np.float64)
        np.add(src, 0.0, out=v)  # -0.0 + 0.0 is 0.0; x + 0.0 is x otherwise
        v[np.isnan(src)] = 0.0
        _mix(np.bitwise_xor(h, v.view(np.uint64), out=h), tmp)
    return h


def stable_order(v: np.ndarray, ties: np.ndarray | None = None) -> np.ndarray:
    """``np.argsort(v, kind="stable")``, the same permutation at a fraction of the cost.

    numpy's default sort (faster than the stable one on floats and 64-bit keys,
    BENCHMARKS.md 20.11), then each run of equal values put back in index order (ties are rare
    here: times and 64-bit hashes).
    """
    v = np.asarray(v)
    order = np.argsort(v)
    if len(v) < 2:
        return order
    sv = v[order]
    same = sv[1:] == sv[:-1]
    if sv.dtype.kind == "f":
        same |= np.isnan(sv[1:]) & np.isnan(sv[:-1])
    if same.any():
        tied = np.zeros(len(v), dtype=bool)
        tied[1:] |= same
        tied[:-1] |= same
        at = np.flatnonzero(tied)
        run = np.cumsum(np.concatenate(([True], ~same)))[at]  # the run of equal values of each
        sub = order[at]
        order[at] = sub[np.lexsort((sub, run) if ties is None else (sub, np.asarray(ties)[sub], run))]
    return order


class Sample:
    """Bottom-k sample of rows (columns of float64, the first the time) by key; compacts when it
    holds 2k rows. Once compacted (pruned), its rows are in time order, equal times by key: the
    same order however the rows came, and the order the frames want (`Summary.steps`), so the
    frames' gathers run along memory instead of jumping across it.

    Once it has held more than k rows it knows a ``threshold``, the k-th smallest key seen (kept
    up to date every k/2 rows held): a later row with a larger key is never copied in, since k
    rows already beat it. The sample is the same; a long log copies a dwindling share of its rows.
    """

    def __init__(self, fields: Sequence[str], k: int):
        self.fields = tuple(fields)
        self.k = int(k)
        self.parts: list[tuple[dict[str, np.ndarray], np.ndarray]] = []
        self.held = 0
        self.pruned = False
        self.threshold: np.uint64 | None = None
        self._threshold_at = (0, self.k)  # rows held, and k, when the threshold was found
        # the held keys in ascending order, kept once asked for (`sorted_keys`: merges of many
        # files test each file's keys against it); None: not kept (one file's read never asks)
        self._sorted: np.ndarray | None = None

    def add(
        self, cols: Mapping[str, np.ndarray], keys: np.ndarray, pruned: bool = False, rows: np.ndarray | None = None
    ) -> None:
        """Take in rows with their keys; past 2k rows held, compact to the bottom k."""
        self.pruned |= pruned
        if self.threshold is not None and self._threshold_at[1] == self.k and len(keys):
            under = keys <= self.threshold  # (pruned: more than k rows were seen)
            if not under.all():
                self.pruned = True
                rows = under if rows is None else rows & under
        if rows is not None:
            idx = np.flatnonzero(rows)
            cols = {f: np.asarray(cols[f], dtype=np.float64)[idx] for f in self.fields}
            keys = keys[idx]
        if len(keys):
            self.parts.append(({f: np.asarray(cols[f], dtype=np.float64) for f in self.fields}, keys))
            self.held += len(keys)
            if self._sorted is not None:
                new = np.sort(keys)
                self._sorted = np.insert(self._sorted, np.searchsorted(self._sorted, new), new)
            if self.held > 2 * self.k:
                self.compact()
            elif self.held > self.k and (
                self.threshold is None
                or self._threshold_at[1] != self.k
                or 2 * (self.held - self._threshold_at[0]) > self.k
            ):
                keys_held = np.concatenate([p[1] for p in self.parts])
                self.threshold = np.partition(keys_held, self.k - 1)[self.k - 1]
                self._threshold_at = (self.held, self.k)

    def compact(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Keep only the bottom k rows by key; past k, in time order, equal times by key."""
        if len(self.parts) == 1 and self.held <= self.k:
            return self.parts[0]
        if not self.parts:
            return {f: np.empty(0) for f in self.fields}, np.empty(0, dtype=np.uint64)
        keys = np.concatenate([p[1] for p in self.parts])
        sel = None
        if len(keys) > self.k:
            kth = np.partition(keys, self.k - 1)[self.k - 1]
            sel = np.flatnonzero(keys <= kth)  # (in the order the rows came: mostly by time)
            if len(sel) > self.k:  # copies of the k-th key (rows of the same content): the first
                sel = np.delete(sel, np.flatnonzero(keys[sel] == kth)[self.k - len(sel) :])
            t = np.concatenate([p[0][self.fields[0]] for p in self.parts])[sel]
            sel = sel[stable_order(t, keys[sel])]  # by time, then key: the same order however the rows came
            keys = keys[sel]
            self.pruned = True
            self.threshold, self._threshold_at = kth, (self.k, self.k)
            if self._sorted is not None:
                self._sorted = np.sort(keys)
        cols = {}
        for f in self.fields:  # one field at a time: the transient is one column, not the rows
            v = np.concatenate([p[0][f] for p in self.parts])
            cols[f] = v if sel is None else v[sel]
        self.parts = [(cols, keys)]
        self.held = len(keys)
        return cols, keys

    def sorted_keys(self) -> np.ndarray:
        """The keys of every row held (the sample and the rows not yet compacted away), ascending;
        kept up to date from the first call on.
        """
        if self._sorted is None:
            self._sorted = np.sort(np.concatenate([p[1] for p in self.parts])) if self.parts else np.empty(0, np.uint64)
        return self._sorted

    def count_held(self, keys: np.ndarray) -> int:
        """How many of ``keys`` are in the sample (binary search in the bottom k of `sorted_keys`:
        a merge of the n-th of many files costs its own keys' logarithms, with no compaction and
        no hash of every key held).
        """
        held = self.sorted_keys()[: self.k]  # (the rows held are a superset of the bottom k)
        if not len(held) or not len(keys):
            return 0
        keys = np.sort(keys)  # (ascending needles: a search starts where the last ended)
        at = np.minimum(np.searchsorted(held, keys), len(held) - 1)
        return int((held[at] == keys).sum())


def copied_keys(keys: Sequence[np.ndarray]) -> bool:
    """Whether any sample key occurs twice among ``keys``.

    If none does, no merge of them would have found a copy (a merge tests the keys of its sample
    against those the summary holds, a part of these); if one does (a copy, or a step repeated
    inside one file), the caller merges again with the test.
    """
    if len(keys) < 2:
        return False
    held = np.sort(np.concatenate(keys))
    return bool((held[1:] == held[:-1]).any())
