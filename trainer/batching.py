"""Token-budget batching with a bucketed shuffle.

Per epoch e (seeded by (seed, e)):
1. shuffle all sample indices;
2. cut the shuffled list into buckets of ``bucket_batches`` batches' worth of samples
   (about 64 batches), sort each bucket by length, longest first;
3. pack each bucket greedily: a batch takes the next sample while
   (samples in batch + 1) * longest length <= token_budget, i.e. its padded size stays within
   the budget (sequences are right-padded to the batch's longest one);
4. shuffle the order of the epoch's batches.

Sorting inside a bucket keeps padding small (similar lengths share a batch); the final shuffle
keeps long and short batches mixed in time. Real token counts per batch therefore vary (long
sequences leave more of the budget unused), as in real runs; that variation is what the
advisor's per-token service fit needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .corpus import SyntheticCorpus

BUCKET_BATCHES = 64


@dataclass(frozen=True, eq=False)
class PlannedBatch:
    batch: int  # global id, 0, 1, 2, ... in the order the loader hands them out
    epoch: int
    samples: np.ndarray  # sample indices, longest first


def plan_epoch(
    lengths: np.ndarray, token_budget: int, seed: int, epoch: int, bucket_batches: int = BUCKET_BATCHES
) -> list[np.ndarray]:
    """Sample-index arrays of one epoch's batches, in hand-out order."""
    n = len(lengths)
    if n == 0:
        return []
    if int(lengths.max()) > token_budget:
        raise ValueError(f"a sample of {int(lengths.max())} tokens exceeds the token budget {token_budget}")
    rng = np.random.default_rng([seed, 0xB0, epoch])
    order = rng.permutation(n)
    per_batch = max(1, token_budget // max(1, int(np.mean(lengths))))
    bucket = max(per_batch, bucket_batches * per_batch)
    batches: list[np.ndarray] = []
    for start in range(0, n, bucket):
        idx = order[start : start + bucket]
        idx = idx[np.argsort(-lengths[idx], kind="stable")]
        cur: list[int] = []
        longest = 0
        for i in idx:
            ln = int(lengths[i])
            if cur and (len(cur) + 1) * max(longest, ln) > token_budget:
                batches.append(np.asarray(cur, dtype=np.int64))
                cur, longest = [], 0
            cur.append(int(i))
            longest = max(longest, ln)
        if cur:
            batches.append(np.asarray(cur, dtype=np.int64))
    perm = rng.permutation(len(batches))
    return [batches[k] for k in perm]


class BatchPlan:
    """All batches of a run: ``epochs`` epochs over the corpus, cut at ``max_batches`` if given."""

    def __init__(
        self, corpus: SyntheticCorpus, token_budget: int, epochs: int, seed: int, max_batches: int | None = None
    ):
        self.corpus = corpus
        self.token_budget = token_budget
        self._epochs = [plan_epoch(corpus.lengths, token_budget, seed, e) for e in range(epochs)]
        total = sum(len(b) for b in self._epochs)
        self.total = total if max_batches is None else min(total, max_batches)
        self.batches_per_epoch = len(self._epochs[0]) if self._epochs else 0

    def __iter__(self) -> Iterator[PlannedBatch]:
        k = 0
        for e, batches in enumerate(self._epochs):
            for s in batches:
                if k >= self.total:
                    return
                yield PlannedBatch(k, e, s)
                k += 1

    def materialise(self, pb: PlannedBatch) -> dict:
        """The loader's message for one batch: right-padded ids [seqs, longest] and the lengths."""
        lens = self.corpus.lengths[pb.samples]
        ids = np.zeros((len(pb.samples), int(lens.max())), dtype=np.int32)
        for row, i in enumerate(pb.samples):
            ids[row, : lens[row]] = self.corpus.tokens(int(i))
        return {
            "batch": pb.batch,
            "tokens": int(lens.sum()),
            "seqs": int(len(lens)),
            "ids": ids,
            "lens": lens.astype(np.int32),
        }
