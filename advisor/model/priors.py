"""Constants measured on real runs that the model carries where one log cannot measure them.

They set the centre and the width of what a projection assumes about step times that change with
the split, with another token budget, and from run to run. Sources: BENCHMARKS.md 20.12.
"""

from __future__ import annotations

import math

DEFAULT_SCV = 0.05  # GPU step times' SCV where none is measured (BENCHMARKS.md 20.12)
# Shared host, per producer added at a fixed G: standard error and centre (BENCHMARKS.md 20.12)
CONTENTION_PRIOR_SE = 0.045  # carried only where workers share a host's compute (see shares_compute)
CONTENTION_PRIOR_K_PRODUCER = 0.033
CONTENTION_PRIOR_K_CONSUMER = 0.0
CONTENTION_SINGLE_SE = 0.087  # a role with one worker on one side of the logged splits only
OVERSUBSCRIBED_SOURCE = (
    "3 workers on 2 cores moved their steps by a factor 1.30-1.63 between 1-2 and 2-1: "
    "fixtures/oversub2, BENCHMARKS.md section 18"
)


def oversubscribed_se(workers: int, cores: int) -> float:
    """Per-worker standard error on a host of fewer cores than workers (BENCHMARKS.md 20.12)."""
    return math.log(workers / cores) if 0 < cores < workers else 0.0


# Token budget: one budget's exponent p (busy ~ tokens^p) and its 95% half-width; two or more
# budgets' run-to-run spread and curvature per e-fold beyond them (BENCHMARKS.md 20.12)
TOKEN_EXPONENT_PRIOR = 0.65
TOKEN_EXPONENT_PRIOR_HALF95 = 0.3
TOKEN_RUN_SE = 0.063
TOKEN_LINE_CURVATURE_HALF95 = 0.2
RUN_SE = 0.09  # run-to-run shift per role on shared hosts (BENCHMARKS.md 20.12)
# Real GPUs without a step log: per GPU moved, each role by its own count (BENCHMARKS.md 17, 20.12)
GPU_PRIOR_K_CONSUMER = 0.0
GPU_PRIOR_K_PRODUCER = 0.0
GPU_SPLIT_SE_CONSUMER = 0.10
GPU_SPLIT_SE_PRODUCER = CONTENTION_PRIOR_SE
GPU_RUN_SE = TOKEN_RUN_SE
