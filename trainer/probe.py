"""`dflash-train --probe`: short runs at two or more splits, in alternating order, one log each.

A probe settles a close call between splits by measuring them, not projecting them. Each
segment is an ordinary run of the trainer (`trainer.run`) at one split, stopped by the run's
own time limit (``time_limit_s``: seconds of the log's clock from the header, so start-up is
not counted; the advisor drops each segment's warm-up itself).

Order: a crossover design. With splits A, B and R rounds the segments run

    A B  A B  ...   (round 1, round 2, ...; every round runs every split once, in the order given)

so a host whose speed drifts over the probe (thermal state, a neighbour's load) adds about as
much to each split's total as to the other's, and the drift largely cancels in the lead between
them; a single A then B would carry the whole drift into the lead. Within a round the segments
share a seed (corpus, batching, weights, emulation draws: common random numbers), and each
round has its own (seed + round - 1), so rounds are independent repeats.

Output, in the directory ``out``:

- ``probe-KK-NxM.jsonl``: segment KK (01, 02, ... in run order) at N targets and M drafters,
  whose header carries ``probe``: ``{"id", "segment", "segments", "round"}``
  (docs/log-schema.md), so that ``dflash-advise DIR`` reads the segments as separate logs of
  one job (not as per-rank files of one run);
- ``probe.json``: the manifest, rewritten after each segment: the probe's settings, and per
  segment its split, round, log, exit code, end reason, drafter steps and log seconds.

A segment that fails (exit code 1) or is interrupted (130) ends the probe with its exit code;
the segments before it stay, listed in the manifest.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from .config import MAX_SEED, ConfigError, ProbeMark, TrainConfig

MANIFEST = "probe.json"
MANIFEST_VERSION = 1
SPLIT_RE = re.compile(r"^\s*(\d+)\s*[-x+]\s*(\d+)\s*$")
MAX_ROUNDS = 100


@dataclass(frozen=True)
class ProbePlan:
    """The splits to probe (targets, drafters), in the order given, and how long and how often."""

    splits: tuple[tuple[int, int], ...]
    seconds: float  # log seconds per segment
    rounds: int

    @property
    def order(self) -> list[tuple[int, int, tuple[int, int]]]:
        """(segment, round, split) of every segment in run order: A B A B ..."""
        out = []
        for r in range(1, self.rounds + 1):
            for s in self.splits:
                out.append((len(out) + 1, r, s))
        return out


@dataclass(frozen=True)
class ProbeResult:
    exit_code: int  # 0: every segment ran; else the first failing segment's code
    out_dir: str
    segments: tuple[dict, ...]  # the manifest's segment records


def parse_splits(text: str, target_tp: int = 1) -> tuple[tuple[int, int], ...]:
    """``"5-3,4-4"`` -> ((5, 3), (4, 4)); ConfigError("probe") on a bad list.

    Rules: comma-separated ``N-M`` (targets-drafters; ``NxM`` and ``N+M`` read the same), N, M
    whole numbers >= 1, at least two distinct splits, all of one G (N * target_tp + M).
    """
    parts = [p for p in (text or "").split(",")]
    if not text or not text.strip():
        raise ConfigError("probe", "give the splits to probe as TARGETS-DRAFTERS pairs, e.g. 5-3,4-4")
    splits: list[tuple[int, int]] = []
    for p in parts:
        m = SPLIT_RE.match(p)
        if m is None:
            raise ConfigError("probe", f"{p.strip()!r} is not a split: write TARGETS-DRAFTERS, e.g. 5-3")
        n, k = int(m.group(1)), int(m.group(2))
        if n < 1 or k < 1:
            raise ConfigError("probe", f"{p.strip()} needs at least one target and one drafter")
        if (n, k) in splits:
            raise ConfigError("probe", f"{n}-{k} is listed twice (each split once; --probe-rounds repeats them)")
        splits.append((n, k))
    if len(splits) < 2:
        raise ConfigError("probe", f"a probe compares two or more splits, got only {splits[0][0]}-{splits[0][1]}")
    gpus = {n * target_tp + k for n, k in splits}
    if len(gpus) > 1:
        used = ", ".join(f"{n}-{k} uses {n * target_tp + k}" for n, k in splits)
        raise ConfigError("probe", f"the splits must share one number of GPUs (workers): {used}")
    return tuple(splits)


def check_plan(plan: ProbePlan, base: TrainConfig, visible_gpus: int | None) -> None:
    """ConfigError where the plan cannot run: its length, rounds, or splits that do not fit the
    GPUs given (``visible_gpus``: CUDA devices visible; None where the run computes on CPU or
    is emulated, where a split of any size runs)."""
    import math

    s = plan.seconds
    if not isinstance(s, (int, float)) or isinstance(s, bool) or not math.isfinite(s) or s <= 0:
        raise ConfigError("probe_seconds", f"must be a number > 0, got {s!r}")
    if not isinstance(plan.rounds, int) or not 1 <= plan.rounds <= MAX_ROUNDS:
        raise ConfigError("probe_rounds", f"must be a whole number from 1 to {MAX_ROUNDS}, got {plan.rounds!r}")
    n, m = plan.splits[0]
    gpus = n * base.target_tp + m
    if visible_gpus is not None and gpus > visible_gpus:
        raise ConfigError(
            "probe",
            f"{n}-{m} needs {gpus} GPUs and {visible_gpus} are visible: a probe measures "
            "each split on its own GPUs (sharing one would measure the sharing)",
        )


def segment_log(k: int, split: tuple[int, int]) -> str:
    """The file name of segment ``k`` (1-based) at ``split``: ``probe-01-5x3.jsonl``."""
    return f"probe-{k:02d}-{split[0]}x{split[1]}.jsonl"


def prepare_dir(out_dir: str, force: bool) -> Path:
    """Create ``out_dir``; ConfigError("out") where it is a file, or holds logs or a manifest
    (unless ``force``: then the probe's own files are overwritten)."""
    d = Path(out_dir)
    if d.exists() and not d.is_dir():
        raise ConfigError("out", f"{out_dir} is a file; a probe writes a directory of logs")
    if d.is_dir() and not force:
        old = sorted(p.name for p in d.iterdir() if p.name == MANIFEST or p.name.endswith((".jsonl", ".jsonl.gz")))
        if old:
            raise ConfigError(
                "out",
                f"{out_dir} already holds {old[0]}{' ...' if len(old) > 1 else ''} "
                "(give another directory, or --force to overwrite)",
            )
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError("out", f"cannot create the directory {out_dir}: {e.strerror or e}") from None
    return d


def segment_config(
    base: TrainConfig, plan: ProbePlan, out: Path, probe_id: str, k: int, rnd: int, split: tuple[int, int]
) -> TrainConfig:
    """The TrainConfig of segment ``k``: ``base`` at ``split``, its own log, the time limit, the
    round's seed and the header's probe mark (validated again: a placement that fits one split
    only is refused here, naming its option)."""
    n, m = split
    name = f"{base.run_name}-{k:02d}-{n}x{m}" if base.run_name else None
    return replace(
        base,
        targets=n,
        drafters=m,
        out=str(out / segment_log(k, split)),
        time_limit_s=float(plan.seconds),
        seed=(base.seed + rnd - 1) % (MAX_SEED + 1),
        run_name=name,
        force=True,
        probe=ProbeMark(id=probe_id, segment=k, segments=len(plan.order), round=rnd),
    )


def _write_manifest(out: Path, plan: ProbePlan, probe_id: str, base: TrainConfig, segments: list[dict]) -> None:
    doc = {
        "probe": MANIFEST_VERSION,
        "id": probe_id,
        "splits": [{"target": n, "drafter": m} for n, m in plan.splits],
        "seconds": plan.seconds,
        "rounds": plan.rounds,
        "mode": "emulate" if base.emulated else base.device,
        "order": [f"{n}-{m}" for _, _, (n, m) in plan.order],
        "segments": segments,
        "advise": f"dflash-advise {out}",
    }
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, out / MANIFEST)


def run_probe(base: TrainConfig, plan: ProbePlan, out_dir: str, say: Callable[[str], None]) -> ProbeResult:
    """Run every segment of ``plan`` in order (module docstring), each with ``base``'s other
    settings; ``say`` takes the progress lines. Stops at the first segment that does not end
    by its time limit or its plan (exit code 1 or 130)."""
    from .run import run

    out = prepare_dir(out_dir, base.force)
    probe_id = base.run_name or Path(os.path.abspath(out_dir)).name
    configs = [segment_config(base, plan, out, probe_id, k, r, s) for k, r, s in plan.order]  # all checked first
    segments: list[dict] = []
    total = len(configs)
    for (k, rnd, (n, m)), cfg in zip(plan.order, configs):
        say(f"dflash-train: probe segment {k}/{total} (round {rnd}): {n}-{m} for {plan.seconds:g} s -> {cfg.out}")
        res = run(cfg)
        rec = {
            "segment": k,
            "round": rnd,
            "split": {"target": n, "drafter": m},
            "log": Path(cfg.out).name,
            "seed": cfg.seed,
            "exit_code": res.exit_code,
            "reason": res.reason,
            "timed_out": res.timed_out,
            "drafter_steps": res.drafter_steps,
            "seconds": res.seconds,
        }
        segments.append(rec)
        _write_manifest(out, plan, probe_id, base, segments)
        if res.exit_code != 0:
            say(
                f"dflash-train: probe stopped at segment {k}/{total} ({res.reason}); the {k - 1} segment(s) before "
                f"it are in {out_dir}"
            )
            return ProbeResult(res.exit_code, out_dir, tuple(segments))
        how = "time limit" if res.timed_out else "its plan ran out first (raise --samples or --epochs)"
        say(
            f"dflash-train: probe segment {k}/{total}: {n}-{m}: {res.drafter_steps} drafter steps in "
            f"{res.seconds:.1f} s ({how})"
        )
    say(f"dflash-train: probe done: {total} segments in {out_dir}; decide with: dflash-advise {out_dir}")
    return ProbeResult(0, out_dir, tuple(segments))


__all__ = [
    "MANIFEST",
    "ProbePlan",
    "ProbeResult",
    "check_plan",
    "parse_splits",
    "prepare_dir",
    "run_probe",
    "segment_config",
    "segment_log",
]
