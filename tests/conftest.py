from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

HEADER = {
    "ev": "run",
    "v": 1,
    "t": 0.0,
    "run": "t",
    "gpus": 3,
    "roles": {"target": 2, "drafter": 1},
    "queues": [
        {"name": "pre", "feeds": "target", "cap": 4, "per_worker": True},
        {"name": "hs", "feeds": "drafter", "cap": 4},
    ],
    "token_budget": 1000,
    "samples": 1000,
    "epochs": 1,
}


def step(t, role="drafter", worker=0, tokens=900, busy=0.1, **kw):
    ev = {
        "ev": "step",
        "t": t,
        "role": role,
        "worker": worker,
        "batch": 0,
        "tokens": tokens,
        "seqs": 3,
        "busy": busy,
        "wait": 0.0,
        "blocked": 0.0,
    }
    ev.update(kw)
    return ev


def good_lines(n=60):
    """A small valid log: 2 targets at 0.25 s, 1 drafter at 0.1 s per batch (target-bound)."""
    lines = [HEADER]
    for i in range(n):
        lines.append(step(0.25 * (i + 1), "target", i % 2, busy=0.25))
        lines.append(step(0.25 * (i + 1) + 0.1, "drafter", 0, busy=0.1, wait=0.15, loss=2.0 - i / n))
    lines.append({"ev": "end", "t": 0.25 * n + 1, "reason": "done"})
    return lines


def birth_death_law(mu_p: float, mu_c: float, n: int, m: int, b: int) -> tuple[float, float, float, float]:
    """The birth-death chain of advisor.model.chain at integer buffer b, term by term from its rates
    (an independent reference): throughput, producer blocked and consumer starved shares, mean queue."""
    import numpy as np

    k = b + m
    y = np.arange(k + n + 1)
    birth = mu_p * (n - np.maximum(0, y - k))
    death = mu_c * np.minimum(y, m)
    logp = np.concatenate([[0.0], np.cumsum(np.log(birth[:-1]) - np.log(death[1:]))])
    p = np.exp(logp - logp.max())
    p /= p.sum()
    return (
        float(p @ death),
        float(p @ np.maximum(0, y - k)) / n,
        float(p @ np.maximum(0, m - y)) / m,
        float(p @ np.minimum(np.maximum(0, y - m), b)),
    )


def load_script(rel: str, name: str):
    """A script of the repository (benchmarks/, notebooks/) imported as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / rel)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def write_log(tmp_path):
    def _write(lines, name="log.jsonl", raw: bytes | None = None):
        p = tmp_path / name
        if raw is not None:
            p.write_bytes(raw)
        else:
            p.write_text("".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines))
        return p

    return _write


@pytest.fixture
def reference():
    return FIXTURES / "reference-7x1.jsonl"


@pytest.fixture
def reference_rates():
    return FIXTURES / "reference-7x1-rates.jsonl"


# CI runs on a loaded 2-core machine: no per-example deadline, no "too slow" health check, and
# the same examples on every run (derandomize), so a red run is reproducible and a green main
# stays green. `HYPOTHESIS_PROFILE=explore` draws fresh random examples to hunt for new failing ones.
import os  # noqa: E402

from hypothesis import HealthCheck  # noqa: E402
from hypothesis import settings as _hsettings

_hsettings.register_profile("loaded", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
_hsettings.register_profile("explore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
_hsettings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "loaded"))


def split_by_rank(src: Path, out: Path, *, end_in_all: bool = True) -> list[Path]:
    """Write one file per (role, worker) with the steps, and a coordinator file with syncs and
    rates; every file starts with the header and (by default) ends with the end line."""
    out.mkdir(parents=True, exist_ok=True)
    lines = src.read_text().splitlines()
    head, body = lines[0], lines[1:]
    files: dict[str, list[str]] = {}
    end = None
    for ln in body:
        o = json.loads(ln)
        if o["ev"] == "step":
            files.setdefault(f"{o['role']}-{o['worker']}", []).append(ln)
        elif o["ev"] == "end":
            end = ln
        else:
            files.setdefault("coordinator", []).append(ln)
    paths = []
    for name, ls in files.items():
        p = out / f"{name}.jsonl"
        p.write_text("\n".join([head, *ls, *([end] if end and end_in_all else [])]) + "\n")
        paths.append(p)
    return sorted(paths)


def one_line_error(r, *words):
    """A CLI refusal: exit 2 and one ``dflash-advise:`` line on stderr holding every one of ``words``."""
    assert r.exit_code == 2, r.output
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dflash-advise: "), r.stderr
    for w in words:
        assert w in err[0], err[0]


def rates_without_tokens(src: Path, out: Path, *, budget: bool = True, queues: bool = True) -> Path:
    """A rates-only log as another stack's metrics give it: ``src``'s snapshots without ``tok_s``
    (so no log measures tokens), its header without ``token_budget`` unless ``budget``, without
    queues (and the snapshots' depths) unless ``queues``."""
    rows = []
    for ln in Path(src).read_text().splitlines():
        o = json.loads(ln)
        if o["ev"] == "run":
            if not budget:
                o.pop("token_budget", None)
            if not queues:
                o["queues"] = []
        elif o["ev"] == "rates":
            o.pop("tok_s", None)
            if not queues:
                o.pop("q", None)
        elif o["ev"] == "step":
            continue
        rows.append(json.dumps(o))
    out.write_text("\n".join(rows) + "\n")
    return out


def split_odds(rows, *, judged=None, restart_s=0.0, draws=None, seed=None, calibrate=False):
    """The odds of every split of the projected ``rows``: read, drawn, scored (`advisor.decide.odds`)."""
    from advisor.decide.odds import DEFAULT_DRAWS, SEED, draw_inputs, draw_rates, odds_of

    seed = SEED if seed is None else seed
    inp = draw_inputs(rows, calibrate)
    rates = draw_rates(inp, draws or DEFAULT_DRAWS, seed)
    return odds_of(rates, inp, judged=judged, restart_s=restart_s)
