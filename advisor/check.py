"""The CI gate: is the planned split's predicted efficiency (or GPU utilisation) high enough?

Input is either rate log(s) (the planned split defaults to the observed one) or a TOML config::

    profile = ["runs/7x1.jsonl"]       # log(s) to fit; relative to the config file
    gpus = 8                           # optional; default: sum of roles
    [roles]                            # the planned split, in pipeline order
    target = 6
    drafter = 2
    [queues]
    hs = 20                            # optional: planned q_hs depth
    [gate]
    min_efficiency = 0.9               # or min_gpu_util = 0.85
    metric = "efficiency"              # efficiency | gpu_util

Command-line options override the config. A gate never passes on input it could not read:
every problem is a `LogError`/`ValueError` naming the file and key (exit 2).
"""
from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from .advice import Advice, advise
from .schema import LogError

METRICS = ("efficiency", "gpu_util")
DEFAULT_MIN = 0.9


def _key(cfg: Mapping[str, Any], dotted: str, kind: type | tuple, path: str, default: Any = None) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    if not isinstance(node, kind) or isinstance(node, bool):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise LogError(path, None, f"must be {want}, got {node!r}", dotted)
    return node


def load_config(path: Path) -> dict[str, Any]:
    """Read and validate a gate config; paths come back resolved against the config's folder."""
    sp = str(path)
    try:
        cfg = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LogError(sp, None, "no such file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise LogError(sp, None, f"is not valid TOML ({e})") from None
    prof = cfg.get("profile")
    if isinstance(prof, str):
        prof = [prof]
    if not isinstance(prof, list) or not prof or not all(isinstance(p, str) for p in prof):
        raise LogError(sp, None, "must name the profile log(s), e.g. profile = [\"run.jsonl\"]", "profile")
    roles = _key(cfg, "roles", dict, sp)
    if roles is not None:
        for r, n in roles.items():
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise LogError(sp, None, f"must be a whole number >= 1, got {n!r}", f"roles.{r}")
    metric = _key(cfg, "gate.metric", str, sp, "efficiency")
    if metric not in METRICS:
        raise LogError(sp, None, f"must be one of {', '.join(METRICS)}, got {metric!r}", "gate.metric")
    threshold = _key(cfg, f"gate.min_{metric}", (int, float), sp)
    if threshold is not None and not 0 <= threshold <= 1:
        raise LogError(sp, None, f"must be between 0 and 1, got {threshold!r}", f"gate.min_{metric}")
    gpus = _key(cfg, "gpus", int, sp)
    hs = _key(cfg, "queues.hs", int, sp)
    return {"profile": [path.parent / p for p in prof], "roles": dict(roles) if roles else None, "metric": metric,
            "threshold": threshold, "gpus": gpus, "hs_cap": hs}


def run_check(sources: Sequence[Path], *, min_value: float | None = None, metric: str | None = None,
              roles: Mapping[str, int] | None = None, gpus: int | None = None) -> Advice:
    """Advise on the planned split and attach the gate's outcome as ``Advice.gate``."""
    sources = [Path(s) for s in sources]
    cfg: dict[str, Any] = {"profile": sources, "roles": None, "metric": "efficiency", "threshold": None,
                           "gpus": None, "hs_cap": None}
    if len(sources) == 1 and sources[0].suffix == ".toml":
        cfg = load_config(sources[0])
    metric = metric or cfg["metric"]
    if metric not in METRICS:
        raise ValueError(f"--metric must be one of {', '.join(METRICS)}, got {metric!r}")
    threshold = min_value if min_value is not None else (cfg["threshold"] if cfg["threshold"] is not None
                                                         else DEFAULT_MIN)
    planned = roles or cfg["roles"]
    n_gpus = gpus or cfg["gpus"] or (sum(planned.values()) if planned else None)
    adv = advise(cfg["profile"], gpus=n_gpus, hs_cap=cfg["hs_cap"])
    p, c = adv.roles
    if planned is None:
        planned = dict(adv.observed.roles)
    unknown = set(planned) - {p, c}
    if unknown:
        raise ValueError(f"roles: {', '.join(sorted(unknown))} not in the log's roles ({p}, {c})")
    if sum(planned.values()) != adv.gpus:
        raise ValueError(f"roles: the planned split uses {sum(planned.values())} GPUs but {adv.gpus} are split")
    row = adv.split_row(planned)
    value = float(row[metric])
    gate = {"metric": metric, "threshold": float(threshold), "value": value, "passed": value >= threshold,
            "roles": {p: int(planned[p]), c: int(planned[c])}, "bps": float(row["bps"]),
            "bottleneck": str(row["bottleneck"])}
    return replace(adv, gate=gate)
