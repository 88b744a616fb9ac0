"""Other stacks' metrics, by name: what TorchSpec, SpecForge and vLLM speculators log, as rates fields.

A converter that writes our JSONL rate log (docs/architecture.md, "A new log format"), beside
``tbimport``, whose event-file reader and snapshot rules it reuses. It adds the built-in tables
(``STACKS``: each tag with the stack's source that computes it, repository@commit:path; its unit
and meaning are on the stack's docs page) and the CSV histories that wandb and MLflow export.

A field (``Field``) is one tag, or a product and quotient of tags logged at the same step, times a
constant and (for per-rank metrics) the consumer's worker count:

    value = scale x [consumer workers] x prod(num) / (sum(den_plus) - sum(den_minus))

computed at every step where all its tags have a value; a step whose denominator is not > 0 is
skipped. Its ``kind``: ``throughput`` (completions per wall second), ``capacity`` (per busy
second), ``capacity >=`` (a lower bound: the denominator holds time that is not compute),
``capacity <=`` (an upper estimate). A stack's fields speak of the producer (first role of
``--roles``) and the consumer (last); the producer's ``bps`` is the consumer's (flow through a
bounded queue over a steady window). The rate log's "batch" is the stack's unit (``Stack.unit``).

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
from advisor.tbimport import Scalar, parse_map, read_scalars, tags_text, to_records, write_rate_log

KINDS = ("throughput", "capacity", "capacity >=", "capacity <=")
_BOUNDS = {"capacity >=": "lower", "capacity <=": "upper"}  # the header's cap_bps_kind


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One tag a stack writes, and where it is computed (repo@commit:path)."""

    tag: str
    source: str


@dataclass(frozen=True)
class Field:
    """One rates field from a stack's tags (the formula in the module docstring)."""

    key: str  # producer.bps, producer.cap_bps, consumer.bps, consumer.cap_bps, tok_s
    kind: str
    num: tuple[str, ...] = ()
    den_plus: tuple[str, ...] = ()
    den_minus: tuple[str, ...] = ()
    scale: float = 1.0
    per_consumer_worker: bool = False

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


def _stack(name: str, unit: str, repo: str, paths: Mapping[str, str], bps: Field, *fields: Field) -> Stack:
    """A stack from its tags' source paths and its fields; the producer's ``bps`` is the consumer's
    (flow: over a steady window the producers complete what the consumers take)."""
    return Stack(
        name=name,
        unit=unit,
        doc=f"docs/stacks/{name}.md",
        metrics=tuple(Metric(tag=tag, source=f"{repo}:{path}") for tag, path in paths.items()),
        fields=(bps, replace(bps, key="producer.bps"), *fields),
    )


# Each field's reasoning (why a capacity, why only a bound) is on its stack's docs page.
_TS = "torchspec/controller/"
_TT = "torchspec/training/trainer.py"
_SF = "specforge/training/controller.py"
_SP = "src/speculators/train/trainer.py"
_SPS = "train/perf/global_samples_per_second"
_SST = "train/perf/optimizer_step_time_s"
_PER_RANK = {"scale": 1000.0, "per_consumer_worker": True}  # ranks x 1000 / rank 0's ms
STACKS: dict[str, Stack] = {
    s.name: s
    for s in (
        _stack(
            "torchspec",
            "sample",
            "lightseekorg/TorchSpec@6f21829cd0e333c3b54d9d2706a0b0c8dc10de9d",
            {
                "perf/infer_capacity": _TS + "inference_manager.py",
                "perf/train_capacity": _TS + "loop.py",
                "perf/step_time": _TT,
                "perf/dispatch_wait": _TS + "loop.py",
                "perf/data_time": _TT,
                "perf/compute_time": _TT,
            },
            # global batch / (dispatch wait + step time): the samples the step loop took per wall second
            Field(
                "consumer.bps",
                "throughput",
                ("perf/train_capacity", "perf/step_time"),
                ("perf/step_time", "perf/dispatch_wait"),
            ),
            Field("consumer.cap_bps", "capacity >=", ("perf/train_capacity",)),  # its step includes the fetch
            Field("producer.cap_bps", "capacity <=", ("perf/infer_capacity",)),  # per-call rate x all slots
        ),
        _stack(
            "specforge",
            "sample",
            "sgl-project/SpecForge@a6b6b0230009d15ec2a97a57384e6f53f0f96946",
            {
                f"train/perf/{m}": _SF
                for m in (
                    "global_samples_per_second",
                    "optimizer_step_time_s",
                    "data_wait_time_s",
                    "train_compute_time_s",
                    "optimizer_steps_per_hour",
                )
            },
            Field("consumer.bps", "throughput", (_SPS,)),
            # throughput x step time / (step time - data wait): samples per second not spent waiting
            Field("consumer.cap_bps", "capacity", (_SPS, _SST), (_SST,), ("train/perf/data_wait_time_s",)),
        ),
        _stack(
            "speculators",
            "rank step",
            "vllm-project/speculators@c05b95b303f7d4f21e8d7624e0ffa1c2d9b4d73b",
            {f"profile/{m}": _SP for m in ("step_ms", "fetch_ms", "tokens_per_s", "fwd_ms", "bwd_ms", "opt_ms")},
            Field("consumer.bps", "throughput", (), ("profile/step_ms",), **_PER_RANK),
            Field("consumer.cap_bps", "capacity", (), ("profile/step_ms",), ("profile/fetch_ms",), **_PER_RANK),
            Field("tok_s", "throughput", ("profile/tokens_per_s",), per_consumer_worker=True),  # ranks alike
        ),
    )
}

STEP_COLUMNS = ("step", "_step", "Step", "global_step", "train/step")
TIME_COLUMNS = {"_timestamp": 1.0, "wall_time": 1.0, "time": 1.0, "timestamp": 1e-3, "_runtime": 1.0}


def _number(text: str | None, path: Path, line: int, column: str) -> float | None:
    text = (text or "").strip()
    if text == "" or text.lower() in ("nan", "none", "null"):
        return None
    try:
        v = float(text)
    except ValueError:
        raise LogError(str(path), line, f"column {column!r}: {text!r} is not a number") from None
    return v if math.isfinite(v) else None


def _wide_columns(path: Path, columns: list[str]) -> tuple[str, str, dict[str, str]]:
    """The step column, the time column and column -> tag of a wide table: a wandb chart export's
    'RUN - TAG' read as TAG; __MIN/__MAX skipped."""
    step_col = next((c for c in STEP_COLUMNS if c in columns), None)
    time_col = next((c for c in TIME_COLUMNS if c in columns), None)
    if step_col is None or time_col is None:
        raise LogError(
            str(path),
            1,
            f"needs a step column ({', '.join(STEP_COLUMNS)}) and a time column "
            f"({', '.join(TIME_COLUMNS)}); it has: {', '.join(columns) or 'none'}",
        )
    tags: dict[str, str] = {}
    for c in columns:
        if c in (step_col, time_col) or c.endswith(("__MIN", "__MAX")):
            continue
        tag = c.rsplit(" - ", 1)[1] if " - " in c else c
        if tag in tags.values():
            raise LogError(str(path), 1, f"two columns hold the tag {tag!r}")
        tags[c] = tag
    return step_col, time_col, tags


def read_csv_scalars(path: str | Path) -> tuple[dict[str, list[Scalar]], float]:
    """Every metric of an exported history (the module docstring's formats), by tag; and the
    earliest wall time."""
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
    long = {"key", "value", "step", "timestamp"} <= set(columns)
    step_col, time_col, tags = ("step", "timestamp", {}) if long else _wide_columns(path, columns)
    by_tag: dict[str, list[Scalar]] = {}
    for n, row in enumerate(rows, 2):
        step, t = (_number(row.get(c), path, n, c) for c in (step_col, time_col))
        # a long table's value is read before its row is checked, a wide table's after
        values = [(row["key"], _number(row["value"], path, n, "value"))] if long else []
        if step is None or t is None:
            said = "a row needs step and timestamp" if long else f"row without {step_col!r} or {time_col!r}"
            raise LogError(str(path), n, said)
        values += [(tag, _number(row.get(c), path, n, c)) for c, tag in tags.items()]
        for tag, v in values:
            if v is not None:
                tag = tag.strip() if long else tag
                by_tag.setdefault(tag, []).append(Scalar(int(step), t * TIME_COLUMNS[time_col], v))
    if not by_tag:
        raise LogError(str(path), None, "holds no metric values")
    return by_tag, min(s.wall_time for ss in by_tag.values() for s in ss)


def read_any(paths: Sequence[str | Path]) -> tuple[dict[str, list[Scalar]], float | None]:
    """Scalars of TensorBoard event files/directories and .csv histories together."""
    csvs = [p for p in paths if str(p).lower().endswith(".csv")]
    events = [p for p in paths if not str(p).lower().endswith(".csv")]
    by_tag: dict[str, list[Scalar]] = {}
    first: float | None = None
    for tags, wall in [read_csv_scalars(p) for p in csvs] + ([read_scalars(events)] if events else []):
        for tag, ss in tags.items():
            by_tag.setdefault(tag, []).extend(ss)
        if wall is not None:
            first = wall if first is None else min(first, wall)
    return by_tag, first


def derive(field: Field, scalars: Mapping[str, list[Scalar]], consumer_workers: int) -> list[Scalar]:
    """The field's values at every step where all its tags were logged (module docstring)."""
    at = {tag: {s.step: s for s in scalars[tag]} for tag in field.tags}  # a step logged twice: the later
    factor = field.scale * (consumer_workers if field.per_consumer_worker else 1)
    out = []
    for step in sorted(set.intersection(*(set(v) for v in at.values()))):
        num = math.prod(at[t][step].value for t in field.num)
        den = (
            sum(at[t][step].value for t in field.den_plus) - sum(at[t][step].value for t in field.den_minus)
            if field.den_plus
            else 1.0
        )
        if den > 0:
            out.append(Scalar(step, max(at[t][step].wall_time for t in field.tags), factor * num / den))
    return out


def _rates_key(key: str, roles: Sequence[str]) -> str:
    """A field's key in the rate log: producer and consumer by their role names."""
    side, _, what = key.partition(".")
    return f"{roles[0] if side == 'producer' else roles[-1]}.{what}" if what else key


def stack_mapping(
    stack: Stack, roles: Sequence[str], scalars: Mapping[str, list[Scalar]], consumer_workers: int, *, source: str
) -> tuple[dict[str, str], dict[str, list[Scalar]], dict[str, str]]:
    """{rates key: derived tag} and the derived series, for the fields whose tags are all present;
    and the rates key -> "lower" or "upper" of each built ``cap_bps`` that is only a bound."""
    mapping: dict[str, str] = {}
    series: dict[str, list[Scalar]] = {}
    bounds: dict[str, str] = {}
    for f in stack.fields:
        missing = [t for t in f.tags if t not in scalars]
        key = _rates_key(f.key, roles)
        if missing and f.key == "consumer.bps":
            raise LogError(
                source,
                None,
                f"--stack {stack.name}: no tag {missing[0]!r} for {key} "
                f"(it has: {tags_text(scalars)}); see {stack.doc}",
            )
        values = [] if missing else derive(f, scalars, consumer_workers)
        if values:
            tag = f"{stack.name}:{f.key}"
            mapping[key], series[tag] = tag, values
            if key.endswith(".cap_bps") and f.kind in _BOUNDS:
                bounds[key] = _BOUNDS[f.kind]
    return mapping, series, bounds


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
    then each ``--map KEY=TAG`` (which replaces a built-in field of the same key). A live run (no
    ``end`` line; event files do not say whether the job finished) unless ``ended``."""
    if stack is not None and stack not in STACKS:
        raise ValueError(f"--stack {stack!r}: one of {', '.join(STACKS)}")
    scalars, first_wall = read_any(paths)
    source = ", ".join(map(str, paths))
    plain_tb = stack is None and not any(str(p).lower().endswith(".csv") for p in paths)
    if first_wall is None or not (scalars or plain_tb):
        raise LogError(source, None, "holds no events" if plain_tb else "holds no scalars")
    names = list(header.roles)
    user = parse_map(mapping, names, [q.name for q in header.queues], require_bps=stack is None)
    built: dict[str, str] = {}
    if stack is not None:
        built, series, bounds = stack_mapping(STACKS[stack], names, scalars, header.roles[names[-1]], source=source)
        scalars = {**scalars, **series}
    m = {**built, **user}
    extra = {"source": f"TensorBoard: {source}" if plain_tb else source, "tb_map": dict(m)}
    if stack is not None:
        extra |= {"stack": stack, "unit": STACKS[stack].unit}
        # the header's cap_bps_kind (docs/log-schema.md): role -> the bound a built cap_bps is
        kinds = {k.removesuffix(".cap_bps"): v for k, v in bounds.items() if k not in user}
        if kinds:
            extra["cap_bps_kind"] = kinds
    header = replace(header, t0_unix=first_wall, extra=extra)
    return write_rate_log(header, to_records(scalars, first_wall, m, source=source), out, ended=ended)
