"""dflash-advisor: how to split GPUs between the targets and drafters of an async drafter-training
pipeline, from its rate logs.

    >>> from advisor import advise
    >>> adv = advise("fixtures/reference-7x1.jsonl")
    >>> adv.recommendation.roles
    {'target': 7, 'drafter': 1}

Heavy modules (pandas, scipy) load on first use, so ``import advisor`` stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["Advice", "Options", "advice_json", "advise", "advise_numbers", "load_log", "LogError"]


_HOMES = {
    "advise": "advisor.advice",
    "advise_numbers": "advisor.advice",
    "Advice": "advisor.advice",
    "advice_json": "advisor.present.json",
    "Options": "advisor.settings",
    "load_log": "advisor.ingest.load",
    "LogError": "advisor.errors",
}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'advisor' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
