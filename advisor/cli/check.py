"""The CI gate: is the planned split's predicted efficiency (or GPU utilisation) high enough?

Input is either rate log(s) (the planned split defaults to the observed one) or a TOML config
(docs/gate.example.toml): ``profile``, the log(s) to fit, relative to the config's folder, and
`Options` fields by name (`FIELDS`: ``gpus``, ``hs_cap``, ``metric``, ``min_efficiency``, a
``[roles]`` table, ...), each read and checked as the command line's option. The tables of 0.1
(`RENAMED`: ``[queues] hs``, ``[gate] ...``) are still read, each key with a `ConfigKeyWarning`.

The planned split passes when its predicted metric is at least the threshold and, with a
``min_confidence``, when its own ``p_best`` (the decision's odds, `advisor.decide.odds`: while the
profile log's run has not ended, every split but the planned one pays a restart) is at least
that. The outcome names each condition that failed, with its number (``gate["failed"]``).

Command-line options override the config; a threshold applies to its own metric only (one for
the other metric is an error, in the config as on the command line). Strict: an unknown key is
an error with the closest known name; ``[roles]`` must name both roles of the log; a ``profile``
entry that names no file is an error of the config's line. Every problem is a
`LogError`/`ValueError` naming the file, line and key (exit 2); the config must be a small
regular file (a FIFO or device is refused before opening).
"""

from __future__ import annotations

import difflib
import glob
import os
import re
import stat
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (declared in pyproject.toml)
    import tomli as tomllib

from advisor.advice import Advice, fit_logs
from advisor.errors import LogError, LogRefused, SettingsError, short_repr
from advisor.ingest.ranks import GLOB_CHARS
from advisor.settings import DEFAULT_MIN_EFFICIENCY, METRICS, Options, option_fields

MAX_CONFIG_BYTES = 1 << 20  # a gate config is a few lines
# the Options fields a config may set; [roles] takes the profile log's role names (checked once it is read)
PLAN_FIELDS = ("gpus", "roles", "hs_cap", "gpus_per_worker", "engine_scaling", "gpus_per_node", "link_gbytes_s")
GATE_FIELDS = ("metric", "min_efficiency", "min_gpu_util", "min_confidence")
FIELDS = PLAN_FIELDS + GATE_FIELDS
# the tables of 0.1, read for one more release: table -> {its key: the field}, and what its keys are
RENAMED = {"queues": {"hs": "hs_cap"}, "gate": {k: k for k in GATE_FIELDS}}
RENAMED_WHAT = {"queues": "queue the gate can plan", "gate": "gate setting"}


class ConfigKeyWarning(FutureWarning):
    """A gate config uses a key of 0.1 (``[queues] hs``, ``[gate] ...``), read until the next release."""


@dataclass(frozen=True)
class GateConfig:
    """The gate's settings: the profile log(s), the config's options, the config's file and text
    (None and "" without a config) and, per field, the key it was written as (for errors)."""

    profile: list[Path]
    options: Options = field(default_factory=Options)
    path: str | None = None
    text: str = ""
    keys: Mapping[str, str] = field(default_factory=dict)


def _line_of(text: str, dotted: str) -> int | None:
    """The line that defines ``dotted`` ("gate.min_efficency", "role"), for the error message."""
    parts = dotted.split(".")
    lines = text.splitlines()
    table = None
    for i, line in enumerate(lines, 1):
        m = re.match(r"\s*\[\s*([^\]]+?)\s*\]", line)
        if m:
            table = m.group(1).strip().strip('"')
            if len(parts) == 1 and table == parts[0]:
                return i
            continue
        key = re.match(r"\s*\"?([A-Za-z0-9_.-]+)\"?\s*=", line)
        if not key:
            continue
        full = f"{table}.{key.group(1)}" if table else key.group(1)
        if full == dotted or (table is None and len(parts) > 1 and key.group(1).startswith(parts[0] + ".")):
            return i
    return None


def _at(path: str, text: str, dotted: str, msg: str) -> LogError:
    """The config's error at key ``dotted``, on the line that defines it (else its table's)."""
    return LogError(path, _line_of(text, dotted) or _line_of(text, dotted.split(".")[0]), msg, dotted)


def _option_error(path: str, text: str, keys: Mapping[str, str], e: SettingsError) -> LogError:
    """An option's error as the config's, at the key that set it: ``--roles target`` at ``roles.target``."""
    flag, _, rest = e.option.partition(" ")
    name = next(n for n, f in option_fields().items() if f.metadata["flag"].name == flag)
    where = ".".join([keys.get(name, name), *rest.split()])
    return _at(path, text, where, str(e)[len(e.option) + 2 :])


def _unknown(text: str, path: str, where: str, keys: Sequence[str], allowed: Sequence[str], what: str) -> None:
    for k in keys:
        if k not in allowed:
            dotted = f"{where}.{k}" if where else k
            close = difflib.get_close_matches(k, allowed, n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(allowed)})"
            raise _at(path, text, dotted, f"is not a {what}{hint}")


def _read_config(path: Path) -> tuple[dict[str, Any], str]:
    """Parse the TOML, refusing what is not a small readable regular file (stat before open)."""
    sp = str(path)
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise LogRefused(sp, None, "is a directory, not a gate config (a .toml file)")
        if not stat.S_ISREG(st.st_mode):
            raise LogRefused(sp, None, "is not a regular file (a FIFO or device may never end); give a .toml file")
        if st.st_size > MAX_CONFIG_BYTES:
            raise LogRefused(
                sp, None, f"is {st.st_size} bytes; a gate config is a few lines (limit {MAX_CONFIG_BYTES} bytes)"
            )
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise LogRefused(sp, None, "is not a regular file; give a .toml file")
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise LogError(sp, None, "no such file") from None
    except PermissionError:
        raise LogRefused(sp, None, "cannot be read (permission denied)") from None
    except OSError as e:
        raise LogRefused(sp, None, f"cannot be read ({e.strerror or e})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LogError(sp, data.count(b"\n", 0, e.start) + 1, "is not UTF-8 text; a gate config is TOML") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as e:
        msg = str(e).splitlines()[0] if str(e) else "syntax error"
        line = getattr(e, "lineno", None) or (int(m.group(1)) if (m := re.search(r"line (\d+)", msg)) else None)
        raise LogError(sp, line, f"is not valid TOML ({msg})") from None
    except RecursionError:
        raise LogError(sp, None, "is not valid TOML for a gate (nested too deeply)") from None


def load_config(path: Path) -> GateConfig:
    """Read and validate a gate config (module docstring: strict, since a typo must not pass the gate
    at a default threshold); paths come back resolved against the config's folder."""
    sp = str(path)
    cfg, text = _read_config(path)
    _unknown(text, sp, "", list(cfg), ("profile", *FIELDS, *RENAMED), "gate config key")
    prof = _profile_entries(cfg, path, text)
    keys: dict[str, str] = {}  # field -> the key as written
    values: dict[str, Any] = {}
    for key, value in cfg.items():
        given = _renamed(cfg, key, sp, text) if key in RENAMED else [(key, key, value)] if key != "profile" else []
        for name, dotted, v in given:
            if name in keys:
                raise _at(sp, text, dotted, f"sets {name} again (also set by '{keys[name]}'); give it once")
            keys[name], values[name] = dotted, v
    try:
        options = Options(**values)
    except SettingsError as e:
        raise _option_error(sp, text, keys, e) from None
    metric = options.metric or METRICS[0]
    other = next(f"min_{m}" for m in METRICS if m != metric)
    if other in values:
        raise _at(
            sp, text, keys[other], f"is set but the metric is '{metric}': set min_{metric}, or metric = \"{other[4:]}\""
        )
    return GateConfig(profile=[path.parent / p for p in prof], options=options, path=sp, text=text, keys=keys)


def _renamed(cfg: Mapping[str, Any], table: str, sp: str, text: str) -> list[tuple[str, str, Any]]:
    """A table of 0.1 (``[queues]``, ``[gate]``): (field, key as written, value) of each of its
    keys, each said in a `ConfigKeyWarning`."""
    entries = cfg[table]
    if not isinstance(entries, dict):
        raise _at(sp, text, table, f"must be dict, got {short_repr(entries)}")
    _unknown(text, sp, table, list(entries), list(RENAMED[table]), RENAMED_WHAT[table])
    out = []
    for key, value in entries.items():
        name, dotted = RENAMED[table][key], f"{table}.{key}"
        out.append((name, dotted, value))
        line = _line_of(text, dotted)
        warnings.warn(
            f"{sp}{'' if line is None else f':{line}'}: '{dotted}' is deprecated (a name of 0.1, read until "
            f"the next release): write {name} = {short_repr(value)} at the top of the file",
            ConfigKeyWarning,
            stacklevel=2,
        )
    return out


def _profile_entries(cfg: Mapping[str, Any], path: Path, text: str) -> list[str]:
    """The config's ``profile``: one path or a list of them, each naming a file (or a glob that matches)."""
    sp = str(path)
    prof = cfg.get("profile")
    if isinstance(prof, str):
        prof = [prof]
    if not isinstance(prof, list) or not prof or not all(isinstance(p, str) and p for p in prof):
        raise _at(sp, text, "profile", 'must name the profile log(s), e.g. profile = ["run.jsonl"]')
    # an entry that names nothing is an error of the config: its file, line and key
    start = _line_of(text, "profile") or 1
    lines = text.splitlines()
    for entry in prof:
        p = path.parent / entry
        is_glob = any(c in entry for c in GLOB_CHARS)
        if os.path.exists(p) or (is_glob and glob.glob(str(p))):  # False on ENAMETOOLONG
            continue
        # the line of the entry itself (a list may span lines), else the line of `profile`
        line = next((i for i in range(start, len(lines) + 1) if entry in lines[i - 1]), start)
        what = "matches no file" if is_glob else "names no such file"
        raise LogError(
            sp, line, f"{what} '{entry}' (looked for {p}: paths are relative to the config's folder)", "profile"
        )
    return prof


def _option(metric: str) -> str:
    """The command-line option of a metric's threshold: --min-efficiency, --min-gpu-util."""
    return "--min-" + metric.replace("_", "-")


def _threshold(cfg: GateConfig, metric: str, options: Options) -> float:
    """The gate's threshold for ``metric``: the command line's, else the config's, else the default;
    one for the other metric is an error naming the option, never silently moved across."""
    given = {m: v for m in METRICS if (v := getattr(options, f"min_{m}")) is not None}
    if len(given) > 1:
        raise ValueError(f"{_option(METRICS[1])}: give one threshold, {' or '.join(map(_option, METRICS))}")
    if given:
        ((m, value),) = given.items()
        if m != metric:
            key = cfg.keys.get("metric", "metric")
            why = "--metric" if options.metric else f"{key} of {cfg.path}" if cfg.path else "the default metric"
            raise ValueError(
                f"{_option(m)}: the gate's metric is '{metric}' (from {why}), so {_option(m)} would "
                f"not apply; give {_option(metric)}, or --metric {m}"
            )
        return value
    own = cfg.options.metric or METRICS[0]
    threshold = getattr(cfg.options, f"min_{own}")
    if threshold is None:
        return DEFAULT_MIN_EFFICIENCY
    if own != metric:
        raise ValueError(
            f"--metric: {cfg.path} sets min_{own}, a threshold of '{own}', not of '{metric}'; "
            f"give {_option(metric)} too"
        )
    return threshold


def run_check(sources: Sequence[Path], options: Options | None = None, /, **given: Any) -> Advice:
    """Advise on the planned split and attach the gate's outcome as ``Advice.gate``."""
    options = Options.of(options, **given)
    sources = [Path(s) for s in sources]
    single_toml = len(sources) == 1 and sources[0].suffix == ".toml"
    cfg = load_config(sources[0]) if single_toml else GateConfig(profile=sources)
    plan = options.over(cfg.options)  # the command line over the config
    metric = plan.metric or METRICS[0]
    threshold = _threshold(cfg, metric, options)
    from_cli = options.roles is not None
    adv = _advise_for(cfg, plan, from_cli)
    planned = plan.roles or dict(adv.observed.roles)
    try:
        adv = adv.judge(planned)
    except SettingsError as e:
        if from_cli or cfg.path is None:
            raise
        raise _option_error(cfg.path, cfg.text, cfg.keys, e) from None
    return replace(adv, gate=_gate_outcome(adv, planned, metric, threshold, plan.min_confidence))


def _advise_for(cfg: GateConfig, plan: Options, from_cli: bool) -> Advice:
    """Fit the profile log(s) and advise for the cluster the planned split is judged on.

    A config plans a cluster (default: the GPUs of its roles' engines); on the command line
    ``--roles`` judges a split of the profile's own G, so roles that do not sum to it are an
    error (`advisor.settings.check_roles`), not another G.
    """
    profile = replace(plan, roles=None)
    fitted = fit_logs(cfg.profile)
    p, c = fitted.fit.roles
    if plan.roles and not from_cli and plan.gpus is None and set(plan.roles) == {p, c}:
        profile = replace(profile, gpus=fitted.settings(profile).split_gpus(plan.roles[p], plan.roles[c]))
    return fitted.advise(profile)


def _gate_outcome(
    adv: Advice, planned: Mapping[str, int], metric: str, threshold: float, min_confidence: float | None
) -> dict[str, Any]:
    """The gate's outcome for the judged split, as ``Advice.gate`` holds it (module docstring)."""
    p, c = adv.roles
    row = adv.split_row(planned)
    value = float(row[metric])
    # how likely the split is within the resolution of the best, from the decision's odds (every row has them)
    p_best = float(adv.decision.odds.of(str(row.name)).p_best)
    failed = [metric] if not value >= threshold else []
    if min_confidence is not None and not p_best >= min_confidence:
        failed.append("confidence")
    return {
        "metric": metric,
        "threshold": float(threshold),
        "value": value,
        "passed": not failed,
        "min_confidence": None if min_confidence is None else float(min_confidence),
        "p_best": p_best,
        "failed": failed,
        "roles": {p: int(planned[p]), c: int(planned[c])},
        "bps": float(row["bps"]),
        "bottleneck": str(row["bottleneck"]),
    }
