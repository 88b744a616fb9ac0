"""The families of real sweeps the odds' calibration was fitted on, and whether a run lies in one.

A family (MODELLING.md section 9) shares the model preset, the depths of q_hs and q_pre, the sync
cadence, the engine sizes, the token budget and the host kind; G is not a key. `advisor.decide.odds`'
constants are fitted leave one family out on ``CALIBRATED`` (``SOURCE``; `benchmarks/calibrate.py
--families-record` derives it, tests/test_calibrate.py checks it). A run's `Shape` (from its fit,
options and header) lies in a family where every key is equal, but models compare only where the
header names them and a cadence no log shows (one drafter engine: ``sync_every`` 0) matches any.
Outside every family the draw is uncalibrated, and `Domain.text` says why.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields

from advisor.model.params import PipelineFit
from advisor.settings import Settings

SOURCE = "BENCHMARKS.md 19.28"  # where the families and their leave-one-family-out scores are published


@dataclass(frozen=True)
class Shape:
    """What a run looks like to the calibration (module docstring)."""

    hs_cap: int  # q_hs, batches
    pre_cap: int  # q_pre, batches (per target worker)
    sync_every: int | None  # drafter steps per weight sync, 0 none; None: no log shows it (one drafter engine)
    token_budget: int | None  # tokens per batch at most; None: not stated
    gpus_per_worker: tuple[int, int]  # GPUs per target engine, per drafter engine
    target_model: str | None = None  # the header's, None where it names none
    drafter_model: str | None = None


@dataclass(frozen=True)
class Family:
    """One family of real sweeps: its name, preset and host, its shape, its sweeps (fixtures/sweep/)."""

    name: str
    preset: str
    host: str
    shape: Shape
    sweeps: tuple[str, ...]

    def differs(self, shape: Shape) -> tuple[str, ...]:
        """The keys of ``shape`` (`Shape`'s field names) outside this family (module docstring)."""
        keys = [(f.name, getattr(self.shape, f.name), getattr(shape, f.name)) for f in fields(Shape)]
        unknown_matches = ("target_model", "drafter_model", "sync_every")  # None: not shown, matches any
        return tuple(k for k, mine, theirs in keys if mine != theirs and not (theirs is None and k in unknown_matches))


KEY_TEXT = {  # one key's value in words
    "hs_cap": lambda v: f"q_hs {v} batches",
    "pre_cap": lambda v: f"q_pre {v} batches",
    "sync_every": lambda v: "no weight sync" if v == 0 else f"a weight sync every {v} drafter steps",
    "token_budget": lambda v: "no token budget stated" if v is None else f"a token budget of {v:,}",
    "gpus_per_worker": lambda v: f"{v[0]}-GPU target engines and {v[1]}-GPU drafter engines",
}


def _key_text(key: str, value: object) -> str:
    return KEY_TEXT.get(key, lambda v: f"the {key.replace('_', ' ')} {v}")(value)


@dataclass(frozen=True)
class Domain:
    """Where a run's shape lies among the calibrated families."""

    shape: Shape
    family: Family | None  # the first calibrated family the shape lies in; None: outside every one
    nearest: Family | None  # outside: the family of fewest differing keys (the first of equals)
    differs: tuple[str, ...]  # outside: the keys in which the nearest family differs

    @property
    def inside(self) -> bool:
        return self.family is not None

    @property
    def text(self) -> str:
        """The calibration's domain in words, for the odds sentence (no final period): inside, the
        family; outside, how the run differs from the nearest family.
        """
        if self.family is not None:
            return f"fitted on the families of real sweeps of {SOURCE}, this run's among them ({self.family.name})"
        out = f"this run's shape lies outside every family of real sweeps the odds were calibrated on, in {SOURCE}"
        if self.nearest is None:
            return out
        here = ", ".join(_key_text(k, getattr(self.shape, k)) for k in self.differs)
        there = ", ".join(_key_text(k, getattr(self.nearest.shape, k)) for k in self.differs)
        return f"{out} ({here} here; the nearest family, {self.nearest.name}, has {there})"


def family_name(preset: str, host: str, s: Shape) -> str:
    """``tiny-hs20-pre50-sync10-tb1024-tp1-cpu16``: the preset, each key, the host kind."""
    t, d = s.gpus_per_worker
    m = re.fullmatch(r"(\d+)-core CPU", host)
    tag = f"cpu{m[1]}" if m else re.sub(r"[^a-z0-9]+", "", host.lower())[:16]
    sync = "syncna" if s.sync_every is None else f"sync{s.sync_every}"
    tb = f"tb{s.token_budget}" if s.token_budget else "tbna"
    engines = f"tp{t}" if d == 1 else f"tp{t}x{d}"
    return f"{preset}-hs{s.hs_cap}-pre{s.pre_cap}-{sync}-{tb}-{engines}-{tag}"


def _family(preset: str, host: str, keys: tuple[int, int, int | None, int | None, int, int], sweeps: str) -> Family:
    """A line of the record: ``keys`` = (q_hs, q_pre, sync_every, token_budget, GPUs per target
    engine, per drafter engine), ``sweeps`` space-separated, the models the preset's (``MODELS``),
    the name `family_name`'s."""
    hs, pre, sync, budget, tp, dp = keys
    shape = Shape(hs, pre, sync, budget, (tp, dp), *MODELS.get(preset, (None, None)))
    return Family(family_name(preset, host, shape), preset, host, shape, tuple(sweeps.split()))


# the record, printed by `python3 benchmarks/calibrate.py --families-record` from fixtures/sweep/
MODELS = {  # preset -> (target model, drafter model), as the trainer's headers name them
    "tiny": ("qwen3-h128-l6-kv2 (1M backbone, random init)", "dflash-b8-l2-h128-w64"),
    "tp-cpu": ("qwen3-h128-l6-kv2 (1M backbone, random init)", "dflash-b8-l2-h256-w64"),
}
CALIBRATED: tuple[Family, ...] = (
    _family("tiny", "16-core CPU", (1, 50, 10, 1024, 1, 1), "qhs1g7"),
    _family("tiny", "16-core CPU", (20, 1, 10, 1024, 1, 1), "qpre1g7"),
    _family(
        "tiny",
        "16-core CPU",
        (20, 50, 10, 1024, 1, 1),
        "g10tb1k g10tb1k-b g11tb1k g12tb1k g12tb1k-c g12tb1k-f g13tb1k g13tb1k-b g13tb1k-c g14tb1k g15tb1k g16tb1k",
    ),
    _family("tiny", "16-core CPU", (20, 50, 10, 2048, 1, 1), "cpu16 ded16 hold16 hold16g10"),
    _family("tiny", "32-core CPU", (20, 50, 10, 2048, 1, 1), "cpu32 cpu32g12 ded32"),
    _family("tiny", "16-core CPU", (20, 50, 10, 4096, 1, 1), "g14tb4k"),
    _family("tiny", "16-core CPU", (20, 50, 10, 512, 1, 1), "tb512g7"),
    _family("tiny", "16-core CPU", (20, 50, 10, 8192, 1, 1), "tb8kg7"),
    _family("tiny", "16-core CPU", (20, 50, 2, 1024, 1, 1), "sync2g12 sync2g14"),
    _family("tiny", "16-core CPU", (20, 50, 2, 2048, 1, 1), "sync2g13"),
    _family("tiny", "16-core CPU", (20, 50, 3, 2048, 1, 1), "sync3g13 sync3g14 sync3g15"),
    _family("tiny", "16-core CPU", (20, 50, 4, 512, 1, 1), "sync4g11 sync4g12 sync4g13"),
    _family("tiny", "16-core CPU", (20, 50, 5, 2048, 1, 1), "sync5g14 sync5g14-b"),
    _family("tp-cpu", "16-core CPU", (2, 50, 5, 1024, 1, 1), "qhs2tp-s5g7"),
    _family("tp-cpu", "16-core CPU", (20, 50, 1, 2048, 1, 1), "sync1g10 sync1g12 sync1g13"),
    _family("tp-cpu", "16-core CPU", (20, 50, 10, 1024, 2, 1), "tp2g13"),
    _family("tp-cpu", "16-core CPU", (20, 50, 10, 2048, 2, 1), "tp2cpu16 tp2g11 tp2g14 tp2g15"),
    _family("tp-cpu", "16-core CPU", (20, 50, 10, 3072, 2, 1), "tp2g12 tp2g12-b"),
    _family("tp-cpu", "16-core CPU", (20, 50, 10, 4096, 2, 1), "tp2g10"),
)


def shape_of(fit: PipelineFit, settings: Settings, models: tuple[str | None, str | None] = (None, None)) -> Shape:
    """The shape of the run that ``fit`` and ``settings`` project (module docstring)."""
    consumer = fit.roles[1]
    several = any(o.roles.get(consumer, 0) > 1 for o in fit.observed)
    sync = fit.sync.sync_every if (fit.sync.sync_every or several) else None
    return Shape(
        hs_cap=int(settings.hs_cap),
        pre_cap=int(fit.pre_cap),
        sync_every=sync,
        token_budget=settings.token_budget or settings.log_token_budget,
        gpus_per_worker=tuple(settings.gpus_per_worker),
        target_model=models[0],
        drafter_model=models[1],
    )


def domain(shape: Shape, families: Sequence[Family] = CALIBRATED) -> Domain:
    """Where ``shape`` lies among ``families`` (module docstring)."""
    diffs = [(f, f.differs(shape)) for f in families]
    inside = next((f for f, d in diffs if not d), None)
    if inside is not None or not diffs:
        return Domain(shape=shape, family=inside, nearest=None, differs=())
    nearest, differs = min(diffs, key=lambda fd: len(fd[1]))
    return Domain(shape=shape, family=None, nearest=nearest, differs=differs)
