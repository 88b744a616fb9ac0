"""What a short measurement is worth: the best candidate probe and its expected value of information.

Filled in below.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    """A probe: short segments at ``splits`` (interleaved A B A B), ``seconds_each`` at each."""

    split: str                     # the split it chiefly measures (the one the evidence has not run)
    splits: tuple[str, ...]        # every split it runs
    seconds_each: float
    gpu_hours: float               # len(splits) x seconds_each x G / 3600
    regret_now_pct: float          # expected regret of the action without the probe
    regret_after_pct: float        # expected regret left after deciding on the probe's outcome
    value_s: float                 # (regret now - after) x the remaining job time, seconds of G GPUs
    cost_s: float                  # the probe's seconds plus two restarts, seconds of G GPUs
    worth_it: bool
