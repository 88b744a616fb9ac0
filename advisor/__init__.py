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


def __getattr__(name: str):
    if name in ("advise", "advise_numbers", "Advice"):
        from advisor.advice import Advice, advise, advise_numbers

        return {"advise": advise, "advise_numbers": advise_numbers, "Advice": Advice}[name]
    if name == "advice_json":
        from advisor.present.json import advice_json

        return advice_json
    if name == "Options":
        from advisor.settings import Options

        return Options
    if name == "load_log":
        from advisor.ingest.load import load_log

        return load_log
    if name == "LogError":
        from advisor.errors import LogError

        return LogError
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")
