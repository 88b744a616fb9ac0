"""Other stacks' metrics, by name: what TorchSpec, SpecForge and vLLM speculators log, as rates fields.

Why here (base, beside ``tbimport``) and not in ``ingest/``: this is a converter that writes our
JSONL rate log (docs/architecture.md, "A new log format": a converter that writes our JSONL sits
in base beside ``tbimport``). It reuses the event-file reader and snapshot rules of ``tbimport``
and adds two things: the built-in tables (``STACKS``) and the CSV histories that wandb and MLflow
export (``read_csv_scalars``).

Each stack's table names the tags the stack writes (each with its unit, what it measures and
where in the stack's source it is computed: repository, commit, path) and the rates fields built
from them (``Field``). A field is one tag, or a product and quotient of tags logged at the same
step, times a constant and (for per-rank metrics) the consumer's worker count:

    value = scale x [consumer workers] x prod(num) / (sum(den_plus) - sum(den_minus))

computed at every step where all its tags have a value; a step whose denominator is not > 0 is
skipped. The field's ``kind`` says what the number is: ``throughput`` (completions per wall
second), ``capacity`` (completions per busy second), ``capacity >=`` (a lower bound of the
capacity: the denominator holds time that is not compute), ``capacity <=`` (an upper estimate).

Roles: a stack's fields speak of the producer (first role of ``--roles``) and the consumer (last).
Flow through a bounded queue: over a steady window the producer completes what the consumer
takes, so where a stack logs only the consumer's rate it is the producer's ``bps`` too.

Units: the rate log's "batch" is the stack's unit (``Stack.unit``): a sample for TorchSpec and
SpecForge, one rank's optimizer step for speculators. The advice's b/s are then in that unit.

CSV (``read_csv_scalars``): a wide table, one row per logged step: a step column (``step``,
``_step``, ``Step``, ``global_step``, ``train/step``), a time column (``_timestamp``,
``wall_time``, ``time``: Unix seconds; ``timestamp``: Unix milliseconds, MLflow's unit;
``_runtime``: seconds since the start), and one column per metric (an empty cell: not logged at
that step). A wandb chart export's ``RUN - TAG`` column is read as ``TAG``; its ``__MIN`` and
``__MAX`` columns are skipped. A long table with columns ``key, value, step, timestamp`` (MLflow's
metric history) is read too.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from advisor.errors import LogError
from advisor.records import Run
from advisor.tbimport import Scalar, parse_map, read_scalars, to_records, write_rate_log

__all__ = [
    "Metric",
    "Field",
    "Stack",
    "STACKS",
    "read_csv_scalars",
    "read_any",
    "derive",
    "stack_mapping",
    "cap_kinds",
    "import_stack",
]

KINDS = ("throughput", "capacity", "capacity >=", "capacity <=")


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One tag a stack writes: its unit, what it measures, where it is computed (repo@commit:path)."""

    tag: str
    unit: str
    measures: str
    source: str


@dataclass(frozen=True, kw_only=True)
class Field:
    """One rates field from a stack's tags (the formula in the module docstring)."""

    key: str  # producer.bps, producer.cap_bps, consumer.bps, consumer.cap_bps, tok_s
    num: tuple[str, ...]
    den_plus: tuple[str, ...] = ()
    den_minus: tuple[str, ...] = ()
    scale: float = 1.0
    per_consumer_worker: bool = False
    kind: str
    why: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Field {self.key}: kind {self.kind!r} is not one of {KINDS}")

    @property
    def tags(self) -> tuple[str, ...]:
        return self.num + self.den_plus + self.den_minus


@dataclass(frozen=True, kw_only=True)
class Stack:
    name: str
    unit: str
    metrics: tuple[Metric, ...]
    fields: tuple[Field, ...]
    doc: str


_TS = "lightseekorg/TorchSpec@6f21829cd0e333c3b54d9d2706a0b0c8dc10de9d"
_SF = "sgl-project/SpecForge@a6b6b0230009d15ec2a97a57384e6f53f0f96946"
_SP = "vllm-project/speculators@c05b95b303f7d4f21e8d7624e0ffa1c2d9b4d73b"

TORCHSPEC = Stack(
    name="torchspec",
    unit="sample",
    doc="docs/stacks/torchspec.md",
    metrics=(
        Metric(
            tag="perf/infer_capacity",
            unit="samples/s",
            source=f"{_TS}:torchspec/controller/inference_manager.py",
            measures="samples per engine-call second over a sliding window, times the engine slots "
            "(engines x concurrent calls per engine): the inference pool's capacity if every slot "
            "were busy at the per-call time measured",
        ),
        Metric(
            tag="perf/train_capacity",
            unit="samples/s",
            source=f"{_TS}:torchspec/controller/loop.py",
            measures="global batch size / perf/step_time: the trainers' rate if data were always ready",
        ),
        Metric(
            tag="perf/step_time",
            unit="s",
            source=f"{_TS}:torchspec/training/trainer.py",
            measures="rank 0's wall time of one optimizer step: data fetch + compute + optimizer",
        ),
        Metric(
            tag="perf/dispatch_wait",
            unit="s",
            source=f"{_TS}:torchspec/controller/loop.py",
            measures="time the controller waited for the sample pool to fill before dispatching a step "
            "(high: inference is the bottleneck)",
        ),
        Metric(
            tag="perf/data_time",
            unit="s",
            source=f"{_TS}:torchspec/training/trainer.py",
            measures="time in the data iterator within a step (queue get, Mooncake fetch, collation, H2D)",
        ),
        Metric(
            tag="perf/compute_time",
            unit="s",
            source=f"{_TS}:torchspec/training/trainer.py",
            measures="forward + backward + optimizer GPU time of a step (CUDA events)",
        ),
    ),
    fields=(
        Field(
            key="consumer.bps",
            kind="throughput",
            num=("perf/train_capacity", "perf/step_time"),
            den_plus=("perf/step_time", "perf/dispatch_wait"),
            why="global batch / (dispatch wait + step time): the samples the step loop took per wall second",
        ),
        Field(
            key="producer.bps",
            kind="throughput",
            num=("perf/train_capacity", "perf/step_time"),
            den_plus=("perf/step_time", "perf/dispatch_wait"),
            why="flow through the sample pool: over a steady window inference completes what training takes",
        ),
        Field(
            key="consumer.cap_bps",
            kind="capacity >=",
            num=("perf/train_capacity",),
            why="its step time includes the data fetch, so compute alone could go at least this fast",
        ),
        Field(
            key="producer.cap_bps",
            kind="capacity <=",
            num=("perf/infer_capacity",),
            why="per-call rate x all slots: an upper estimate while slots sit idle (training-bound), "
            "close to the capacity while inference is saturated",
        ),
    ),
)

SPECFORGE = Stack(
    name="specforge",
    unit="sample",
    doc="docs/stacks/specforge.md",
    metrics=(
        Metric(
            tag="train/perf/global_samples_per_second",
            unit="samples/s",
            source=f"{_SF}:specforge/training/controller.py",
            measures="rank 0's samples since the last log x data-parallel size / wall seconds: the trainers' "
            "(consumer pool's) throughput; tracker keys get the train/ prefix "
            "(specforge/training/tracking.py)",
        ),
        Metric(
            tag="train/perf/optimizer_step_time_s",
            unit="s",
            source=f"{_SF}:specforge/training/controller.py",
            measures="wall seconds per optimizer step over the log window",
        ),
        Metric(
            tag="train/perf/data_wait_time_s",
            unit="s",
            source=f"{_SF}:specforge/training/controller.py",
            measures="seconds per optimizer step rank 0 waited for its next batch (starved for input)",
        ),
        Metric(
            tag="train/perf/train_compute_time_s",
            unit="s",
            source=f"{_SF}:specforge/training/controller.py",
            measures="seconds per optimizer step in the train step (forward, backward, optimizer)",
        ),
        Metric(
            tag="train/perf/optimizer_steps_per_hour",
            unit="steps/h",
            source=f"{_SF}:specforge/training/controller.py",
            measures="optimizer steps per wall hour",
        ),
    ),
    fields=(
        Field(
            key="consumer.bps",
            kind="throughput",
            num=("train/perf/global_samples_per_second",),
            why="the trainers' samples per wall second",
        ),
        Field(
            key="producer.bps",
            kind="throughput",
            num=("train/perf/global_samples_per_second",),
            why="flow through the feature store: the capture servers completed what the trainers took; "
            "SpecForge logs no producer-side rate, so the producers' capacity is only bounded from below",
        ),
        Field(
            key="consumer.cap_bps",
            kind="capacity",
            num=("train/perf/global_samples_per_second", "train/perf/optimizer_step_time_s"),
            den_plus=("train/perf/optimizer_step_time_s",),
            den_minus=("train/perf/data_wait_time_s",),
            why="throughput x step time / (step time - data wait): samples per second not spent waiting",
        ),
    ),
)

SPECULATORS = Stack(
    name="speculators",
    unit="rank step",
    doc="docs/stacks/speculators.md",
    metrics=(
        Metric(
            tag="profile/step_ms",
            unit="ms",
            source=f"{_SP}:src/speculators/train/trainer.py",
            measures="rank 0's wall time of one step from the end of the previous one: fetch + forward + "
            "backward + optimizer, with device syncs (profiled steps only, every log_freq steps)",
        ),
        Metric(
            tag="profile/fetch_ms",
            unit="ms",
            source=f"{_SP}:src/speculators/train/trainer.py",
            measures="time to get the batch from the loader and onto the device (waiting for hidden states)",
        ),
        Metric(
            tag="profile/tokens_per_s",
            unit="tokens/s",
            source=f"{_SP}:src/speculators/train/trainer.py",
            measures="rank 0's tokens in the step / step_ms",
        ),
        Metric(
            tag="profile/fwd_ms",
            unit="ms",
            source=f"{_SP}:src/speculators/train/trainer.py",
            measures="forward time of the step",
        ),
        Metric(
            tag="profile/bwd_ms",
            unit="ms",
            source=f"{_SP}:src/speculators/train/trainer.py",
            measures="backward time of the step",
        ),
        Metric(
            tag="profile/opt_ms",
            unit="ms",
            source=f"{_SP}:src/speculators/train/trainer.py",
            measures="optimizer and scheduler time of the step",
        ),
    ),
    fields=(
        Field(
            key="consumer.bps",
            kind="throughput",
            num=(),
            den_plus=("profile/step_ms",),
            scale=1000.0,
            per_consumer_worker=True,
            why="ranks x 1000 / step_ms: the ranks' steps per wall second",
        ),
        Field(
            key="producer.bps",
            kind="throughput",
            num=(),
            den_plus=("profile/step_ms",),
            scale=1000.0,
            per_consumer_worker=True,
            why="flow: the vLLM server produced the hidden states the ranks took (online training); "
            "speculators logs no server-side rate, so the producer is only bounded from below",
        ),
        Field(
            key="consumer.cap_bps",
            kind="capacity",
            num=(),
            den_plus=("profile/step_ms",),
            den_minus=("profile/fetch_ms",),
            scale=1000.0,
            per_consumer_worker=True,
            why="ranks x 1000 / (step_ms - fetch_ms): steps per second of compute",
        ),
        Field(
            key="tok_s",
            kind="throughput",
            num=("profile/tokens_per_s",),
            per_consumer_worker=True,
            why="ranks x rank 0's tokens per wall second (ranks assumed alike)",
        ),
    ),
)

STACKS: dict[str, Stack] = {s.name: s for s in (TORCHSPEC, SPECFORGE, SPECULATORS)}


# --- CSV histories ---------------------------------------------------------------------------
STEP_COLUMNS = ("step", "_step", "Step", "global_step", "train/step")
TIME_COLUMNS = {"_timestamp": 1.0, "wall_time": 1.0, "time": 1.0, "timestamp": 1e-3, "_runtime": 1.0}


def _number(text: str, path: Path, line: int, column: str) -> float | None:
    text = text.strip()
    if text == "" or text.lower() in ("nan", "none", "null"):
        return None
    try:
        v = float(text)
    except ValueError:
        raise LogError(str(path), line, f"column {column!r}: {text!r} is not a number") from None
    return v if math.isfinite(v) else None


def _long_csv(path: Path, rows: list[dict[str, str]]) -> tuple[dict[str, list[Scalar]], float]:
    by_tag: dict[str, list[Scalar]] = {}
    for n, row in enumerate(rows, 2):
        step, ts, v = (_number(row[c] or "", path, n, c) for c in ("step", "timestamp", "value"))
        if step is None or ts is None:
            raise LogError(str(path), n, "a row needs step and timestamp")
        if v is not None:
            by_tag.setdefault(row["key"].strip(), []).append(Scalar(int(step), ts * 1e-3, v))
    if not by_tag:
        raise LogError(str(path), None, "holds no metric values")
    return by_tag, min(s.wall_time for ss in by_tag.values() for s in ss)


def _column_tags(columns: Sequence[str], skip: set[str]) -> dict[str, str]:
    """column -> tag: a wandb chart export's 'RUN - TAG' read as TAG; __MIN/__MAX skipped."""
    out: dict[str, str] = {}
    for c in columns:
        if c in skip or c.endswith(("__MIN", "__MAX")):
            continue
        tag = c.rsplit(" - ", 1)[1] if " - " in c else c
        if tag in out.values():
            raise ValueError(f"two columns hold the tag {tag!r}")
        out[c] = tag
    return out


def read_csv_scalars(path: str | Path) -> tuple[dict[str, list[Scalar]], float]:
    """Every metric of an exported history (the formats in the module docstring), by tag; and the
    earliest wall time.
    """
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            columns = list(reader.fieldnames or [])
            rows = list(reader)
    except OSError as e:
        raise LogError(str(path), None, f"cannot be read: {e.strerror or e}") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise LogError(str(path), None, f"is not a CSV table ({e})") from None
    if {"key", "value", "step", "timestamp"} <= set(columns):
        return _long_csv(path, rows)
    step_col = next((c for c in STEP_COLUMNS if c in columns), None)
    time_col = next((c for c in TIME_COLUMNS if c in columns), None)
    if step_col is None or time_col is None:
        raise LogError(
            str(path),
            1,
            f"needs a step column ({', '.join(STEP_COLUMNS)}) and a time column "
            f"({', '.join(TIME_COLUMNS)}); it has: {', '.join(columns) or 'none'}",
        )
    try:
        tags = _column_tags(columns, {step_col, time_col})
    except ValueError as e:
        raise LogError(str(path), 1, str(e)) from None
    by_tag: dict[str, list[Scalar]] = {}
    unit = TIME_COLUMNS[time_col]
    for n, row in enumerate(rows, 2):
        step, t = (
            _number(row.get(step_col) or "", path, n, step_col),
            _number(row.get(time_col) or "", path, n, time_col),
        )
        if step is None or t is None:
            raise LogError(str(path), n, f"row without {step_col!r} or {time_col!r}")
        for c, tag in tags.items():
            v = _number(row.get(c) or "", path, n, c)
            if v is not None:
                by_tag.setdefault(tag, []).append(Scalar(int(step), t * unit, v))
    if not by_tag:
        raise LogError(str(path), None, "holds no metric values")
    return by_tag, min(s.wall_time for ss in by_tag.values() for s in ss)


def read_any(paths: Sequence[str | Path]) -> tuple[dict[str, list[Scalar]], float | None]:
    """Scalars of TensorBoard event files/directories and .csv histories together."""
    csvs = [Path(p) for p in paths if str(p).lower().endswith(".csv")]
    events = [p for p in paths if not str(p).lower().endswith(".csv")]
    by_tag: dict[str, list[Scalar]] = {}
    first: float | None = None
    parts = [read_csv_scalars(p) for p in csvs] + ([read_scalars(events)] if events else [])
    for tags, wall in parts:
        for tag, ss in tags.items():
            by_tag.setdefault(tag, []).extend(ss)
        if wall is not None:
            first = wall if first is None else min(first, wall)
    return by_tag, first


# --- derived fields --------------------------------------------------------------------------
def derive(field: Field, scalars: Mapping[str, list[Scalar]], consumer_workers: int) -> list[Scalar]:
    """The field's values at every step where all its tags were logged (module docstring)."""
    at = {tag: {s.step: s for s in scalars[tag]} for tag in field.tags}  # a step logged twice: the later
    steps = sorted(set.intersection(*(set(v) for v in at.values())))
    factor = field.scale * (consumer_workers if field.per_consumer_worker else 1)
    out = []
    for step in steps:
        got = [at[tag][step] for tag in field.tags]
        num = math.prod(at[t][step].value for t in field.num)
        den = (
            sum(at[t][step].value for t in field.den_plus) - sum(at[t][step].value for t in field.den_minus)
            if field.den_plus
            else 1.0
        )
        if den <= 0:
            continue
        out.append(Scalar(step, max(s.wall_time for s in got), factor * num / den))
    return out


def stack_mapping(
    stack: Stack, roles: Sequence[str], scalars: Mapping[str, list[Scalar]], consumer_workers: int, *, source: str
) -> tuple[dict[str, str], dict[str, list[Scalar]]]:
    """{rates key: derived tag} and the derived series, for the stack's fields whose tags are all
    present.
    """
    keys = {"producer": roles[0], "consumer": roles[-1]}
    mapping: dict[str, str] = {}
    series: dict[str, list[Scalar]] = {}
    for f in stack.fields:
        missing = [t for t in f.tags if t not in scalars]
        role, _, what = f.key.partition(".")
        key = f"{keys[role]}.{what}" if what else f.key
        if missing:
            if f.key == "consumer.bps":
                have = sorted(scalars)
                shown = ", ".join(have[:12]) + (f" and {len(have) - 12} more" if len(have) > 12 else "")
                raise LogError(
                    source,
                    None,
                    f"--stack {stack.name}: no tag {missing[0]!r} for {key} "
                    f"(it has: {shown or 'no scalars'}); see {stack.doc}",
                )
            continue
        values = derive(f, scalars, consumer_workers)
        if values:
            tag = f"{stack.name}:{f.key}"
            mapping[key], series[tag] = tag, values
    return mapping, series


def cap_kinds(stack: Stack, roles: Sequence[str], built: set[str]) -> dict[str, str]:
    """role -> "lower" or "upper" (the header's ``cap_bps_kind``, docs/log-schema.md) for each
    ``cap_bps`` the stack's fields built that is only a bound: ``capacity >=`` a lower bound,
    ``capacity <=`` an upper estimate.
    """
    keys = {"producer": roles[0], "consumer": roles[-1]}
    out = {}
    for f in stack.fields:
        side, _, what = f.key.partition(".")
        if what == "cap_bps" and f"{keys[side]}.cap_bps" in built and f.kind in ("capacity >=", "capacity <="):
            out[keys[side]] = "lower" if f.kind == "capacity >=" else "upper"
    return out


def import_stack(
    paths: Sequence[str | Path],
    out: str | Path,
    header: Run,
    *,
    stack: str | None,
    mapping: Sequence[str] = (),
    ended: bool = False,
) -> tuple[Path, int]:
    """A rate log from event files and/or CSV histories: the stack's built-in fields (if ``stack``),
    then each ``--map KEY=TAG`` (which replaces a built-in field of the same key).
    """
    if stack is not None and stack not in STACKS:
        raise ValueError(f"--stack {stack!r}: one of {', '.join(STACKS)}")
    scalars, first_wall = read_any(paths)
    source = ", ".join(map(str, paths))
    if first_wall is None or not scalars:
        raise LogError(source, None, "holds no scalars")
    names = list(header.roles)
    user = parse_map(mapping, names, [q.name for q in header.queues], require_bps=stack is None)
    built: dict[str, str] = {}
    if stack is not None:
        built, series = stack_mapping(STACKS[stack], names, scalars, header.roles[names[-1]], source=source)
        scalars = {**scalars, **series}
    m = {**built, **user}
    extra = {"source": source, "tb_map": dict(m)}
    if stack is not None:
        extra |= {"stack": stack, "unit": STACKS[stack].unit}
        kinds = cap_kinds(STACKS[stack], names, {k for k in built if k not in user})
        if kinds:
            extra["cap_bps_kind"] = kinds
    header = replace(header, t0_unix=first_wall, extra=extra)
    return write_rate_log(header, to_records(scalars, first_wall, m, source=source), out, ended=ended)
