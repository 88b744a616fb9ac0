"""A deterministic synthetic corpus: long-tailed sequence lengths, tokens with learnable structure.

Lengths: lognormal with median ``budget / 20`` and sigma 0.8, clipped to
[``min_len``, ``budget / 4``]. For a 32768-token budget this gives a mean near 2300 tokens and
about 14 sequences per batch (the reference case's shape); the right tail (a few percent of
sequences longer than three times the median) makes batches differ in sequence count and
padding, as real chat/code corpora do.

Tokens: a random walk on the vocabulary ring, x[t+1] = (x[t] + step[t]) mod V, with steps drawn
from 16 values under a Zipf(1.2) law and a 5% chance of a uniform jump. The next token is thus
predictable from the previous one with skewed odds, so a drafter has something to learn, and a
sample is generated in vectorised numpy (cumsum), never a Python loop per token.

Everything is a pure function of (seed, sample index): two processes, or two runs, see the same
corpus.
"""

from __future__ import annotations

import numpy as np

N_STEP_VALUES = 16
ZIPF_EXPONENT = 1.2
JUMP_SHARE = 0.05
LENGTH_SIGMA = 0.8


class SyntheticCorpus:
    """``samples`` sequences over a vocabulary of ``vocab`` ids, sized for ``token_budget``."""

    def __init__(self, samples: int, vocab: int, token_budget: int, seed: int, min_len: int = 32):
        if samples < 1 or vocab < 2 or token_budget < 2:
            raise ValueError("samples >= 1, vocab >= 2 and token_budget >= 2 are required")
        self.samples = samples
        self.vocab = vocab
        self.seed = seed
        self.max_len = max(min_len, token_budget // 4)
        self.min_len = min(min_len, self.max_len)
        rng = np.random.default_rng([seed, 0xC0])
        median = max(float(self.min_len), token_budget / 20.0)
        raw = rng.lognormal(np.log(median), LENGTH_SIGMA, size=samples)
        self.lengths = np.clip(np.rint(raw), self.min_len, self.max_len).astype(np.int64)
        self._steps = rng.integers(1, vocab, size=N_STEP_VALUES)
        w = 1.0 / np.arange(1, N_STEP_VALUES + 1) ** ZIPF_EXPONENT
        self._step_p = w / w.sum()

    def tokens(self, index: int) -> np.ndarray:
        """Token ids (int64) of sample ``index``."""
        n = int(self.lengths[index])
        rng = np.random.default_rng([self.seed, 0xC1, index])
        steps = self._steps[rng.choice(N_STEP_VALUES, size=n - 1, p=self._step_p)]
        jumps = rng.random(n - 1) < JUMP_SHARE
        steps = np.where(jumps, rng.integers(0, self.vocab, size=n - 1), steps)
        out = np.empty(n, dtype=np.int64)
        out[0] = rng.integers(0, self.vocab)
        out[1:] = steps
        return np.cumsum(out) % self.vocab
