"""What a deeper or shallower q_hs would do at the recommended split.

Throughput at the recommended split with q_hs at half, double and quadruple the depth the table
was computed with (the log's, or ``--hs-cap``), at the same batch size. A deeper queue is worth
advising only when doubling gains at least ``QUEUE_GAIN_WORTH``; each slot holds one hidden-state
batch of ``hs_bytes_per_token x tokens per batch`` bytes, which is what deepening costs. A pipeline
whose logs declare no queue feeding the consumer (and no ``--hs-cap``) gets no queue advice: there
is no queue to deepen, and its hand-off is modelled without a buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.model.chain import WhatIf
from advisor.model.params import PipelineFit
from advisor.project.table import split_capacities
from advisor.settings import Settings

QUEUE_GAIN_WORTH = 0.01


def has_hs_queue(fit: PipelineFit, settings: Settings) -> bool:
    """Whether the projected pipeline has a q_hs: the logs declare one, or ``--hs-cap`` gives one."""
    return fit.hs_declared or settings.hs_cap != fit.hs_cap


@dataclass(frozen=True)
class QueueAdvice:
    cap: int
    split: tuple[int, int]
    bps: float
    bps_double: float
    bps_quad: float
    bps_half: float
    bytes_per_slot: float | None

    @property
    def gain_pct(self) -> float:
        """Doubling the depth, percent."""
        return 100.0 * (self.bps_double / self.bps - 1.0) if self.bps > 0 else 0.0

    @property
    def loss_pct_half(self) -> float:
        return 100.0 * (1.0 - self.bps_half / self.bps) if self.bps > 0 else 0.0

    @property
    def quad_gain_pct(self) -> float:
        return 100.0 * (self.bps_quad / self.bps - 1.0) if self.bps > 0 else 0.0

    @property
    def deepen(self) -> bool:
        return self.gain_pct >= 100 * QUEUE_GAIN_WORTH

    @property
    def doubled_cap(self) -> int:
        return max(2 * self.cap, 1)

    @property
    def extra_bytes(self) -> float | None:
        """Memory the extra slots of the doubled queue take."""
        return None if self.bytes_per_slot is None else (self.doubled_cap - self.cap) * self.bytes_per_slot


def queue_advice(fit: PipelineFit, settings: Settings, split: tuple[int, int]) -> QueueAdvice | None:
    """The advice at ``split``: its rate with q_hs at the table's depth, at half, double and quadruple it."""
    if not has_hs_queue(fit, settings):
        return None
    cap = settings.hs_cap
    depths = (None, max(2 * cap, 1), max(4 * cap, 2), cap // 2)  # None: the table's
    x, x2, x4, xh = (split_capacities(fit, settings, *split, what_if=WhatIf(hs_cap=d)).x_bps for d in depths)
    # a slot's bytes need the batch's tokens: none where no log measured them (the batch is nominal)
    per_slot = (
        fit.hs_bytes_per_token * settings.tokens_per_batch if fit.hs_bytes_per_token and fit.tokens_measured else None
    )
    return QueueAdvice(cap=cap, split=split, bps=x, bps_double=x2, bps_quad=x4, bps_half=xh, bytes_per_slot=per_slot)
