"""Run configuration of `dflash-train`: one frozen, validated TrainConfig and the model presets.

Defaults depend on the device, because a CPU smoke run and an H200 run differ by four orders
of magnitude in work per batch:

    device  model  token_budget  samples  rates_every_s  lr
    cpu     tiny   2048          4000     2.0            1e-3
    cuda    1b     32768         50000    10.0           3e-4   (1e-3 made the 70M drafter's loss spike)

`make_config` fills those defaults and validates; every error names the field (the CLI turns
it into a one-line message and exit code 2).

Model presets (target = frozen Qwen3-shaped backbone, random init; drafter = block drafter):

    preset  target hidden/layers/heads/kv/head_dim/ffn/vocab   drafter hidden/layers/heads/ffn/block/window
    tiny    128 / 6 / 4 / 2 / 32 / 384 / 2048                    128 / 2 / 4 / 384 / 8 / 64
    234m    1024 / 16 / 16 / 8 / 64 / 3072 / 32000               1024 / 2 / 8 / 3072 / 16 / 256
    1b      2048 / 24 / 16 / 8 / 128 / 6144 / 32000              1024 / 2 / 8 / 3072 / 16 / 256
    tp-cpu  128 / 6 / 4 / 2 / 32 / 384 / 2048                    256 / 2 / 4 / 768 / 8 / 64, anchors 1/4

"1b" is the reference shape of the design brief (1.27B backbone parameters with its embedding); "234m"
the smaller 2:1 target. "tp-cpu" is the tiny target with a drafter about as costly per batch
on one CPU core (verifier logits at 1/4 of the tokens), so that a CPU sweep of TP-2 target engines
has splits bound by either role (benchmarks/TRAINER.md). Four evenly spaced layers are tapped; the verifier (lm_head)
logits
are computed only at 1/16 of the tokens (the anchor blocks) unless the preset says otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path

DEVICES = ("cpu", "cuda")
HANDOFFS = ("auto", "host")
MAX_SEED = 2**32 - 1  # torch and numpy seeds; the verifier head's seed is a product of it
MAX_WORKERS = 4096  # per role: more worker processes than any host (or the advisor) takes
MAX_COUNT = 10**9  # samples, epochs, steps, queue depths, token budget: past any real run


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field."""

    def __init__(self, field_name: str, message: str):
        self.field = field_name
        super().__init__(f"{field_name}: {message}")


@dataclass(frozen=True)
class TargetSpec:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    taps: int = 4

    @property
    def tap_layers(self) -> tuple[int, ...]:
        """Indices of the decoder layers whose outputs are emitted, evenly spaced inside the stack."""
        n = self.taps
        return tuple(sorted({max(0, round((i + 1) * self.layers / (n + 1)) - 1) for i in range(n)}))

    @property
    def backbone_params(self) -> int:
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        mlp = 3 * self.hidden * self.ffn
        return self.layers * (attn + mlp + 2 * self.hidden) + self.vocab * self.hidden + self.hidden


def check_divisible(spec: TargetSpec, k: int) -> str | None:
    """Why ``spec`` cannot be split over ``k`` tensor-parallel ranks (None: it can)."""
    for name, v in (("heads", spec.heads), ("kv_heads", spec.kv_heads), ("ffn", spec.ffn)):
        if v % k:
            return f"the target's {name} ({v}) is not a multiple of {k}"
    return None


@dataclass(frozen=True)
class DrafterSpec:
    hidden: int
    layers: int
    heads: int
    ffn: int
    block: int
    window: int
    anchor_share: float = 1.0 / 16.0  # share of a batch's tokens that get verifier logits

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass(frozen=True)
class ModelPreset:
    name: str
    target: TargetSpec
    drafter: DrafterSpec

    @property
    def target_label(self) -> str:
        t = self.target
        n = t.backbone_params
        size = f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.0f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"
        return f"qwen3-h{t.hidden}-l{t.layers}-kv{t.kv_heads} ({size} backbone, random init)"

    @property
    def drafter_label(self) -> str:
        d = self.drafter
        return f"dflash-b{d.block}-l{d.layers}-h{d.hidden}-w{d.window}"


PRESETS: dict[str, ModelPreset] = {
    "tiny": ModelPreset("tiny", TargetSpec(128, 6, 4, 2, 32, 384, 2048), DrafterSpec(128, 2, 4, 384, 8, 64)),
    "234m": ModelPreset("234m", TargetSpec(1024, 16, 16, 8, 64, 3072, 32000), DrafterSpec(1024, 2, 8, 3072, 16, 256)),
    "1b": ModelPreset("1b", TargetSpec(2048, 24, 16, 8, 128, 6144, 32000), DrafterSpec(1024, 2, 8, 3072, 16, 256)),
    "tp-cpu": ModelPreset(
        "tp-cpu", TargetSpec(128, 6, 4, 2, 32, 384, 2048), DrafterSpec(256, 2, 4, 768, 8, 64, anchor_share=0.25)
    ),
}

_DEVICE_DEFAULTS = {
    "cpu": {"model": "tiny", "token_budget": 2048, "samples": 4000, "rates_every_s": 2.0, "lr": 1e-3},
    "cuda": {"model": "1b", "token_budget": 32768, "samples": 50000, "rates_every_s": 10.0, "lr": 3e-4},
}


@dataclass(frozen=True)
class ProbeMark:
    """The header's ``probe`` object: which segment of which probe a run is (docs/log-schema.md)."""

    id: str  # the probe's name, shared by its segments
    segment: int  # 1-based place of this run in the probe's order
    segments: int  # segments of the probe
    round: int  # 1-based round (each round runs every split once)

    def as_header(self) -> dict:
        return {"id": self.id, "segment": self.segment, "segments": self.segments, "round": self.round}


@dataclass(frozen=True)
class TrainConfig:
    """Everything a run needs. Built by `make_config`, which fills device defaults and validates."""

    targets: int
    drafters: int
    device: str
    out: str
    model: str
    token_budget: int
    samples: int
    rates_every_s: float
    epochs: int = 1
    steps: int | None = None
    seed: int = 0
    pre_queue_depth: int = 50
    hs_queue_depth: int = 20
    sync_every: int = 10
    lr: float = 1e-3
    grad_clip: float = 1.0  # max global grad norm of the drafter
    handoff: str = "auto"
    run_name: str | None = None
    progress: bool | None = None  # None: on when stdout and stderr are terminals
    emulate: str | None = None  # source log of an emulation run
    time_scale: float = 1.0
    sync_s: float | None = None  # emulated sync duration when the source has none
    crash: str | None = None  # test hook "role:index:step[:exit]", from DFLASH_TRAIN_CRASH
    start_timeout_s: float = 600.0
    stop_grace_s: float = 10.0
    force: bool = False  # overwrite an existing --out file
    target_tp: int = 1  # processes (GPUs) per target engine: tensor parallelism
    gpus_per_node: int | None = None  # emulation: GPUs per node (several nodes: a link between them)
    link_bytes_s: float | None = None  # emulation: bandwidth of the link between nodes
    placement: str | None = None  # emulation: "target=0,0,1;drafter=1" node of each engine
    time_limit_s: float | None = None  # stop this many log seconds after the header (end reason interrupted)
    probe: ProbeMark | None = None  # this run is one segment of a probe (`trainer.probe`)

    def __post_init__(self) -> None:
        for name in ("targets", "drafters", "token_budget", "samples", "epochs", "pre_queue_depth", "hs_queue_depth"):
            v = getattr(self, name)
            hi = MAX_WORKERS if name in ("targets", "drafters") else MAX_COUNT
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= hi:
                raise ConfigError(name, f"must be a whole number from 1 to {hi}, got {v!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or not 0 <= self.seed <= MAX_SEED:
            raise ConfigError("seed", f"must be a whole number from 0 to {MAX_SEED}, got {self.seed!r}")
        if self.device not in DEVICES:
            raise ConfigError("device", f"must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.model not in PRESETS:
            raise ConfigError("model", f"must be one of {', '.join(PRESETS)}, got {self.model!r}")
        if self.handoff not in HANDOFFS:
            raise ConfigError("handoff", f"must be one of {', '.join(HANDOFFS)}, got {self.handoff!r}")
        if self.steps is not None and (not isinstance(self.steps, int) or not 1 <= self.steps <= MAX_COUNT):
            raise ConfigError("steps", f"must be a whole number from 1 to {MAX_COUNT}, got {self.steps!r}")
        if not isinstance(self.sync_every, int) or not 0 <= self.sync_every <= MAX_COUNT:
            raise ConfigError(
                "sync_every", f"must be a whole number from 0 (never) to {MAX_COUNT}, got {self.sync_every!r}"
            )
        for name in (
            "rates_every_s",
            "time_scale",
            "lr",
            "grad_clip",
            "start_timeout_s",
            "stop_grace_s",
            "time_limit_s",
        ):
            v = getattr(self, name)
            if name == "time_limit_s" and v is None:
                continue
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                raise ConfigError(name, f"must be a number > 0, got {v!r}")
        if (
            not isinstance(self.target_tp, int)
            or isinstance(self.target_tp, bool)
            or not 1 <= self.target_tp <= MAX_WORKERS
        ):
            raise ConfigError("target_tp", f"must be a whole number from 1 to {MAX_WORKERS}, got {self.target_tp!r}")
        if self.target_tp > 1 and not self.emulated:
            why = check_divisible(PRESETS[self.model].target, self.target_tp)
            if why:
                raise ConfigError("target_tp", f"{why} (model '{self.model}')")
        self._check_nodes()
        if self.sync_s is not None and (not math.isfinite(self.sync_s) or self.sync_s < 0):
            raise ConfigError("sync_s", f"must be a number >= 0, got {self.sync_s!r}")
        if not self.out:
            raise ConfigError("out", "must name a file")
        preset = PRESETS[self.model]
        if self.token_budget < 4 * preset.drafter.block:
            raise ConfigError(
                "token_budget",
                f"must be at least {4 * preset.drafter.block} tokens for model "
                f"'{self.model}' (4 drafter blocks), got {self.token_budget}",
            )
        if self.emulate is not None and not Path(self.emulate).is_file():
            what = "not a regular file" if Path(self.emulate).exists() else "no such log file"
            raise ConfigError("emulate", f"{what}: {self.emulate}")
        if self.crash is not None:
            parts = self.crash.split(":")
            if (
                len(parts) not in (3, 4)
                or parts[0] not in ("target", "drafter")
                or not parts[1].isdigit()
                or not parts[2].isdigit()
                or (len(parts) == 4 and parts[3] != "exit")
            ):
                raise ConfigError("crash", f"must be 'role:index:step[:exit]', got {self.crash!r}")

    def _check_nodes(self) -> None:
        if self.gpus_per_node is not None and (
            not isinstance(self.gpus_per_node, int)
            or isinstance(self.gpus_per_node, bool)
            or not 1 <= self.gpus_per_node <= MAX_WORKERS
        ):
            raise ConfigError(
                "gpus_per_node", f"must be a whole number from 1 to {MAX_WORKERS}, got {self.gpus_per_node!r}"
            )
        if self.link_bytes_s is not None and (
            not isinstance(self.link_bytes_s, (int, float))
            or not math.isfinite(self.link_bytes_s)
            or self.link_bytes_s <= 0
        ):
            raise ConfigError("link_bytes_s", f"must be a number > 0, got {self.link_bytes_s!r}")
        for name in ("gpus_per_node", "link_bytes_s", "placement"):
            if getattr(self, name) is not None and not self.emulated:
                raise ConfigError(name, "is emulated only: give --emulate LOG (a real run uses one host)")
        if (self.link_bytes_s is not None or self.placement is not None) and self.gpus_per_node is None:
            raise ConfigError("gpus_per_node", "is needed with a link or a placement (the GPUs of one node)")
        if self.gpus_per_node is not None:
            from .placement import PlacementError, place

            try:
                place(self.engines, self.gpus_per_worker, self.gpus_per_node, self.placement)
            except PlacementError as e:
                raise ConfigError("placement", str(e)) from None

    @property
    def engines(self) -> dict[str, int]:
        """Engines per role, in pipeline order (the header's ``roles``)."""
        return {"target": self.targets, "drafter": self.drafters}

    @property
    def gpus_per_worker(self) -> dict[str, int]:
        """GPUs (processes) one engine of each role holds."""
        return {"target": self.target_tp, "drafter": 1}

    @property
    def gpus(self) -> int:
        """GPUs of the job: every rank of every engine."""
        return self.targets * self.target_tp + self.drafters

    @property
    def processes(self) -> int:
        """Worker processes started: every rank of a real run; one per engine in emulation."""
        return self.workers if self.emulated else self.gpus

    @property
    def preset(self) -> ModelPreset:
        return PRESETS[self.model]

    @property
    def emulated(self) -> bool:
        return self.emulate is not None

    @property
    def workers(self) -> int:
        """Engines (target and drafter workers); a tensor-parallel engine is one worker."""
        return self.targets + self.drafters

    @property
    def sync_enabled(self) -> bool:
        return self.drafters > 1 and self.sync_every > 0

    @property
    def name(self) -> str:
        if self.run_name:
            return self.run_name
        mode = "emulate" if self.emulated else self.device
        tp = f"-tp{self.target_tp}" if self.target_tp > 1 else ""
        return f"dflash-{mode}-{self.model}-{self.targets}x{self.drafters}{tp}"


def make_config(
    *,
    device: str = "cpu",
    model: str | None = None,
    token_budget: int | None = None,
    samples: int | None = None,
    rates_every_s: float | None = None,
    lr: float | None = None,
    **kwargs,
) -> TrainConfig:
    """A validated TrainConfig with the device's defaults for the fields left as None."""
    if device not in _DEVICE_DEFAULTS:
        raise ConfigError("device", f"must be one of {', '.join(DEVICES)}, got {device!r}")
    d = _DEVICE_DEFAULTS[device]
    known = {f.name for f in fields(TrainConfig)}
    unknown = set(kwargs) - known
    if unknown:
        raise ConfigError(sorted(unknown)[0], "is not a setting of dflash-train")
    return TrainConfig(
        device=device,
        model=model if model is not None else d["model"],
        token_budget=token_budget if token_budget is not None else d["token_budget"],
        samples=samples if samples is not None else d["samples"],
        rates_every_s=rates_every_s if rates_every_s is not None else d["rates_every_s"],
        lr=lr if lr is not None else d["lr"],
        **kwargs,
    )


__all__ = [
    "check_divisible",
    "ConfigError",
    "ProbeMark",
    "TrainConfig",
    "TargetSpec",
    "DrafterSpec",
    "ModelPreset",
    "PRESETS",
    "make_config",
]
