"""Calibration of the advisor's verdicts on the repository's real sweeps (issues 34 and 51): each
log and each pair of logs against the other splits' measured rates, leaving one family out.

Sources and truth are `benchmarks/validate_real.py`'s: every sweep folder of
``fixtures/sweep/`` whose ``sweep.json`` names ``--gpus`` G and that ran two or more splits; every
log alone, and the first repeat of every two splits together; a split's truth is the mean of its
repeats' measured steady rates (``observed.bps`` of each log advised alone). Each source is
advised as a user would (``dflash-advise advise LOGS --json --gpus G``) with the advisor of the
tree ``--root`` (default: this one), and scored:

- regret of the recommended split: ``1 - truth[pick] / max(truth)``; the pick is "within" when its
  regret is at most ``TOL`` (2%, the model's resolution);
- ``recommendation.p_best`` (the stated probability that the pick is within 2% of the best), when
  the advisor states one, against "within": a reliability table by decile of the stated
  probability (count, mean stated, observed share) and the Brier score, mean of
  ``(p_best - within)^2``; the same over every projected split's own ``p_best`` (each split's
  stated chance of being within 2% of the best against whether it is);
- share of verdicts that name an action (any verdict but ``cannot-tell``);
- of the picks more than 2% below the best (the misses), how many name a probe (``recommendation.probe``)
  that runs a split within 2% of the best: the measurement the advice would buy settles them;
- interval coverage: of the splits a source did not log, the share of their measured repeat rates
  inside the projection's 95% interval ``[bps_low, bps_high]``, and the median width
  ``(bps_high - bps_low) / bps``, per sweep; in ``--json`` each rate's ``used`` share of its side
  of the interval (``|ln(v / bps)| / |ln(end / bps)|``, inside iff <= 1) and the split's
  ``distance`` in target engines from the nearest logged split;
- the self-check of every log alone: the projection of its own split (that row's ``bps``, before
  any widening, and its ``method``) against the rate the log measured (``observed.bps``).

**Families** (MODELLING.md section 9, issue 51). A family is the sweeps sharing the preset, the
queues' depths (q_hs, q_pre), the drafters' sync cadence, the engine size (GPUs per target and
per drafter engine), the token budget and the host kind (`sweep_keys`: ``sweep.json``'s
``--model`` and every log's header; not G, and not the machine's boot id, which splits repeats
of one kind). ``--families`` prints them; ``--families-record`` prints the record that
advisor/decide/families.py holds (the families the advisor draws calibrated; a test checks that
the two agree).

**Leave one family out** (the default report). Every constant of advisor/decide/odds.py fitted on
the sweeps (``CONSTANTS``: the temperature ``STEPS_TEMPERATURE`` and the level correlation
``LEVEL_CORR``) is fitted on all families but one, and the held-out family is scored with it:

- ``LEVEL_CORR``: the uncentred correlation of the two roles' log capacities over the repeats of
  each split (`level_corr`, BENCHMARKS.md 19.6), rounded to ``RHO_STEP``;
- ``STEPS_TEMPERATURE``: of the grid ``--temperatures``, the one of least objective (the two Brier
  scores summed, `objective`) over the other families, each tree at the rho fitted on every
  family (`leave_one_out`; a tie to the smaller T).

Each family held out is scored by a tree stating its two constants (`patched_tree`): per family
and pooled, the reliability deciles of the pick's ``p_best`` (judged with 10 cases or more,
within 10 points), the share of picks stated >= 0.8 that measured more than 5% below the best (at
most 5%), actions (>= 90%), mean regret (<= 2%), max regret against the measuring reference below
(no worse), the Brier score, and the self-check's share of logs within 5% (>= 90% in every
family). It is scored a second way, as the advisor deploys it: a family whose shape no other
family covers is out of the calibrated domain, so the uncalibrated draw (T 1, levels
independent; ``UNCALIBRATED``).

Each source's advice is kept in ``--cache`` (one file per tree and source, the tree known by its
code: `tree_digest`), so that the folds read every tree's advice once, and advised by warm
processes of the tree (`Advisors`) where it is not there yet. ``--in-sample`` gives the report of
issue 34 instead: the tree as it is, per sweep, nothing left out.

A reference beside the advisor, the regret of measuring instead of projecting: from each sweep
whose splits all have two or more repeats, and each repeat index r, the split whose r-th repeat
measured highest (an engineer who ran every split once), scored two ways: against the same truth
as the advisor (the mean of all repeats, r included: flattering to the reference) and against the
mean of the other repeats (held out: a noisier truth). Its regrets show how much run-to-run
spread these truths carry: where it loses 10%, a spread of that size sits in the truth itself.

Each sweep's ``machines``: the boot ids its ``sweep.json`` names (`machines`); the report names a
sweep whose repeats came from two machines or more, since two machines of one kind can rank the
splits differently (BENCHMARKS.md 19.17).

The acceptance lines of ``--in-sample`` (issue 34): an action on >= 90% of sources, mean regret
<= 2% and max <= 10%, every decile with >= 10 cases within 10 points of its observed share,
coverage 90-97% on every sweep.

    python3 benchmarks/calibrate.py --jobs 2              # leave one family out, Markdown to stdout
    python3 benchmarks/calibrate.py --json out.json       # and every case as JSON
    python3 benchmarks/calibrate.py --families            # the families only (headers, seconds)
    python3 benchmarks/calibrate.py --families-record     # the record of advisor/decide/families.py
    python3 benchmarks/calibrate.py --in-sample --root /path/to/tree --sweep ded16 --no-pairs
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import math
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_real  # a script beside this one

sys.path.insert(0, str(validate_real.ROOT))
from advisor.decide.families import Family, Shape, domain, family_name  # noqa: E402

ROOT = validate_real.ROOT
SWEEP_DIR = ROOT / "fixtures" / "sweep"
TOL = 0.02  # within the model's resolution of the best split
DECILE_MIN_CASES = 10  # deciles with fewer cases are reported, not judged
DECILE_MAX_GAP = 0.10  # stated against observed, judged deciles
ACTION_MIN = 0.90
MEAN_REGRET_MAX = 0.02
MAX_REGRET_MAX = 0.10
COVERAGE_RANGE = (0.90, 0.97)
SELF_TOL = 0.05  # the observed split's projection within 5% of its log's measured rate (issue 51)
NO_ACTION = "cannot-tell"
DEFAULT_TEMPERATURES = (0.55, 0.7, 0.85)  # the grid STEPS_TEMPERATURE is chosen from, leaving one family out


def real_sweeps(folder: Path = SWEEP_DIR) -> dict[str, int]:
    """Sweep folders with a ``sweep.json`` naming ``--gpus`` and logs at two or more splits: name -> G."""
    out = {}
    for d in sorted(p for p in folder.iterdir() if (p / "sweep.json").is_file()):
        argv = json.loads((d / "sweep.json").read_text()).get("argv", [])
        if "--gpus" not in argv or len(validate_real.sweep_logs(d)) < 2:
            continue
        out[d.name] = int(argv[argv.index("--gpus") + 1])
    return out


def machines(folder: Path) -> list[str]:
    """The machines a sweep folder's runs came from, by boot id, where its ``sweep.json`` names them
    (``machine``, and each ``later`` record's; `benchmarks/sweep.py` writes it): a truth that
    pools two machines' repeats mixes two truths (BENCHMARKS.md 19.17)."""
    meta = json.loads((folder / "sweep.json").read_text())
    found = [meta.get("machine"), *(x.get("machine") for x in meta.get("later", []))]
    return sorted({m["boot_id"] for m in found if isinstance(m, dict) and m.get("boot_id")})


def _key(roles: dict) -> tuple[int, int]:
    return int(roles["target"]), int(roles["drafter"])


def _used(v: float, x: float, lo: float, hi: float) -> float:
    """How much of its side of the interval a measured rate ``v`` uses, in log b/s (1 at the end:
    inside iff <= 1)."""
    end = hi if v >= x else lo
    return abs(math.log(v / x)) / abs(math.log(end / x)) if end > 0 and end != x else math.inf


def score(out: dict, logged: set[tuple[int, int]], truth: dict, measured: dict) -> dict:
    """One source's advice against the sweep's truth (module docstring)."""
    rec = out.get("recommendation") or {}
    best = max(truth.values())
    pick = _key(rec["roles"]) if rec.get("roles") else None
    regret = 1.0 - truth[pick] / best if pick in truth else None
    probed = [_key(r) for r in (rec.get("probe") or {}).get("splits", [])]
    splits = []
    for s in out.get("splits", []):
        k = _key(s["roles"])
        if k not in truth:
            continue
        row = {
            "split": f"{k[0]}-{k[1]}",
            "p_best": s.get("p_best"),
            "within": truth[k] >= (1.0 - TOL) * best,
            "logged": k in logged,
        }
        if not row["logged"] and s.get("bps_low") is not None and s.get("bps"):
            row["inside"] = [s["bps_low"] <= v <= s["bps_high"] for v in measured[k]]
            row["width"] = (s["bps_high"] - s["bps_low"]) / s["bps"]
            row.update(bps=s["bps"], low=s["bps_low"], high=s["bps_high"], measured=measured[k])
            row["used"] = [_used(v, s["bps"], s["bps_low"], s["bps_high"]) for v in measured[k]]
            row["distance"] = min(abs(k[0] - n) for n, _ in logged)
        splits.append(row)
    return {
        "pick": f"{pick[0]}-{pick[1]}" if pick else None,
        "verdict": rec.get("verdict"),
        "p_best": rec.get("p_best"),
        "expected_regret_pct": rec.get("expected_regret_pct"),
        "expected_gain_pct": rec.get("expected_gain_pct"),
        "close_call": rec.get("close_call"),
        "probe": rec.get("probe"),
        "probe_runs_best": any(truth.get(k, 0.0) >= (1.0 - TOL) * best for k in probed) if probed else None,
        "regret": regret,
        "within": None if regret is None else regret <= TOL,
        "splits": splits,
    }


def run_sweep(
    name: str,
    gpus: int,
    pool: ThreadPoolExecutor,
    *,
    root: Path = ROOT,
    pairs: bool = True,
    folder: Path = SWEEP_DIR,
    cache: Path | None = None,
    run: Callable[[list[Path], int], dict] | None = None,
) -> dict:
    """Advise every source of one sweep and score it. Returns the sweep's truth and its cases; with
    ``cache`` (a folder), each source's advice is read from there where this tree gave it before
    (`cached_advice`); ``run`` advises where it did not (default: a ``dflash-advise`` process each)."""
    by_split = validate_real.sweep_logs(folder / name)
    logs = sorted(p for v in by_split.values() for p in v)

    def advise(paths):
        return cached_advice(paths, gpus, root, cache, run)

    own = dict(zip(logs, pool.map(lambda p: advise([p]), logs)))
    measured, truth = validate_real.measured_truth(by_split, own)
    srcs = [[p] for p in logs]
    outs = [own[p] for p in logs]
    if pairs:
        pair_srcs = validate_real.pair_sources(by_split)
        srcs += pair_srcs
        outs += list(pool.map(advise, pair_srcs))
    cases = []
    for src, out in zip(srcs, outs):
        logged = {validate_real.parse(p)[:2] for p in src}
        case = {"sweep": name, "source": [p.name for p in src], **score(out, logged, truth, measured)}
        if len(src) == 1:
            case["self_check"] = self_check(out)
        cases.append(case)
    return {
        "name": name,
        "gpus": gpus,
        "machines": machines(folder / name),
        "truth": {f"{n}-{m}": v for (n, m), v in truth.items()},
        "measured": {f"{n}-{m}": v for (n, m), v in measured.items()},
        "capacities": {
            f"{n}-{m}": [own[p]["observed"].get("capacities_bps") for p in v] for (n, m), v in by_split.items()
        },
        "cases": cases,
    }


def self_check(out: dict) -> dict | None:
    """A single log's advice on its own split: the projection of the observed split (its row's
    ``bps``, before any widening, and the row's ``method``) against the log's measured rate
    (``observed.bps``); None where the table has no row of that split."""
    obs = out.get("observed") or {}
    want = obs.get("roles")
    row = next((s for s in out.get("splits", []) if want and s["roles"] == want), None)
    if row is None or not obs.get("bps") or row.get("bps") is None:
        return None
    return {
        "projected": row["bps"],
        "measured": obs["bps"],
        "miss": row["bps"] / obs["bps"] - 1.0,
        "method": row.get("method"),
    }


def reliability(pairs: list[tuple[float, bool]]) -> list[dict]:
    """Stated probability against outcome by decile ([0, 0.1), ..., [0.9, 1.0]): count, mean
    stated, observed share, and whether the decile is judged (>= DECILE_MIN_CASES cases) and
    within DECILE_MAX_GAP."""
    rows = []
    for d in range(10):
        inside = [(p, w) for p, w in pairs if min(int(p * 10), 9) == d]
        if not inside:
            continue
        stated = statistics.fmean(p for p, _ in inside)
        observed = sum(w for _, w in inside) / len(inside)
        judged = len(inside) >= DECILE_MIN_CASES
        rows.append(
            {
                "decile": d,
                "count": len(inside),
                "stated": stated,
                "observed": observed,
                "judged": judged,
                "ok": (not judged) or abs(stated - observed) <= DECILE_MAX_GAP,
            }
        )
    return rows


def brier(pairs: list[tuple[float, bool]]) -> float | None:
    """Mean of (stated - outcome)^2 (None without cases)."""
    return statistics.fmean((p - float(w)) ** 2 for p, w in pairs) if pairs else None


def coverage(cases: list[dict]) -> dict:
    """Share of the unlogged splits' measured repeat rates inside their 95% interval, and the
    intervals' median width."""
    each = [x for c in cases for s in c["splits"] if "inside" in s for x in s["inside"]]
    widths = [s["width"] for c in cases for s in c["splits"] if "width" in s]
    return {
        "rates": len(each),
        "inside": sum(each),
        "coverage": sum(each) / len(each) if each else None,
        "median_width": statistics.median(widths) if widths else None,
    }


def _regrets(cases: list[dict]) -> dict:
    r = [c["regret"] for c in cases if c["regret"] is not None]
    return {"mean_regret": statistics.fmean(r) if r else None, "max_regret": max(r) if r else None, "scored": len(r)}


def reference(sweeps: list[dict]) -> dict:
    """The measure-every-split-once picker of the module docstring: per sweep with two or more
    repeats of every split and per repeat index r, the pick (highest r-th repeat) and its regret
    against the mean of all repeats (``in_sample``) and against the mean of the others
    (``held_out``); with the mean and max of each and the count within ``TOL``.

    Args:
        sweeps: `run_sweep`'s records (``measured``: split -> repeat rates; ``truth``: split -> mean).

    Returns:
        {"cases": [{"sweep", "repeat", "pick", "in_sample", "held_out"}], "in_sample": {...},
        "held_out": {...}}, each summary {"mean_regret", "max_regret", "within", "scored"}.
    """
    cases = []
    for sw in sweeps:
        measured = sw.get("measured", {})
        repeats = min((len(v) for v in measured.values()), default=0)
        if len(measured) < 2 or repeats < 2:
            continue
        for r in range(repeats):
            pick = max(measured, key=lambda k: measured[k][r])
            held = {k: statistics.fmean(v[:r] + v[r + 1 :]) for k, v in measured.items()}
            cases.append(
                {
                    "sweep": sw["name"],
                    "repeat": r,
                    "pick": pick,
                    "in_sample": 1.0 - sw["truth"][pick] / max(sw["truth"].values()),
                    "held_out": 1.0 - held[pick] / max(held.values()),
                }
            )

    def side(key: str) -> dict:
        r = [c[key] for c in cases]
        return {
            "mean_regret": statistics.fmean(r) if r else None,
            "max_regret": max(r) if r else None,
            "within": sum(x <= TOL for x in r),
            "scored": len(r),
        }

    return {"cases": cases, "in_sample": side("in_sample"), "held_out": side("held_out")}


def summarize(sweeps: list[dict]) -> dict:
    """Every number of the report, from the scored cases (module docstring)."""
    cases = [c for sw in sweeps for c in sw["cases"]]
    regrets = [c["regret"] for c in cases if c["regret"] is not None]
    stated = [(c["p_best"], c["within"]) for c in cases if c["p_best"] is not None and c["within"] is not None]
    split_stated = [(s["p_best"], s["within"]) for c in cases for s in c["splits"] if s["p_best"] is not None]
    actions = sum(c["verdict"] != NO_ACTION for c in cases)
    own = [abs(c["self_check"]["miss"]) <= SELF_TOL for c in cases if c.get("self_check")]
    misses = [c for c in cases if c["within"] is False]
    per_sweep = {
        sw["name"]: {
            "gpus": sw["gpus"],
            "machines": len(sw.get("machines", [])),
            "sources": len(sw["cases"]),
            **coverage(sw["cases"]),
            "actions": sum(c["verdict"] != NO_ACTION for c in sw["cases"]),
            **_regrets(sw["cases"]),
        }
        for sw in sweeps
    }
    rel = reliability(stated)
    checks = {
        "action_share": (actions / len(cases) >= ACTION_MIN) if cases else None,
        "mean_regret": (statistics.fmean(regrets) <= MEAN_REGRET_MAX) if regrets else None,
        "max_regret": (max(regrets) <= MAX_REGRET_MAX) if regrets else None,
        "deciles": all(r["ok"] for r in rel) if rel else None,
        "coverage": all(
            COVERAGE_RANGE[0] <= v["coverage"] <= COVERAGE_RANGE[1]
            for v in per_sweep.values()
            if v["coverage"] is not None
        ),
    }
    return {
        "sources": len(cases),
        "actions": actions,
        "action_share": actions / len(cases) if cases else None,
        "mean_regret": statistics.fmean(regrets) if regrets else None,
        "max_regret": max(regrets) if regrets else None,
        "within": sum(bool(c["within"]) for c in cases),
        "misses": len(misses),
        "misses_probe_runs_best": sum(bool(c.get("probe_runs_best")) for c in misses),
        "scored": len(regrets),
        "stated": len(stated),
        "reliability": rel,
        "brier": brier(stated),
        "split_reliability": reliability(split_stated),
        "split_brier": brier(split_stated),
        "self_check": sum(own) / len(own) if own else None,
        "self_checked": len(own),
        "verdicts": {v: sum(c["verdict"] == v for c in cases) for v in sorted({str(c["verdict"]) for c in cases})},
        "per_sweep": per_sweep,
        "coverage": coverage(cases),
        "reference": reference(sweeps),
        "checks": checks,
    }


# ---- the cache of advice: one file per (tree, source), so that every fold reads what a tree said once


CACHE_DIR = ROOT / ".bench_data" / "calibrate"  # git-ignored
_TREE_DIGESTS: dict[Path, str] = {}
_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


def tree_digest(root: Path) -> str:
    """The ``advisor`` package of ``root`` as Python runs it: every module's syntax tree, its
    docstrings and comments left out (a tree whose code is the same shares its cached advice)."""
    root = root.resolve()
    if root not in _TREE_DIGESTS:
        h = hashlib.sha256()
        for p in sorted((root / "advisor").rglob("*.py")):
            h.update(str(p.relative_to(root)).encode())
            h.update(ast.dump(_without_docstrings(ast.parse(p.read_text()))).encode())
        _TREE_DIGESTS[root] = h.hexdigest()
    return _TREE_DIGESTS[root]


def _file_digest(p: Path) -> str:
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = hashlib.sha256(p.read_bytes()).hexdigest()
    return _FILE_DIGESTS[key]


def cached_advice(
    paths: list[Path],
    gpus: int,
    root: Path = ROOT,
    cache: Path | None = None,
    run: Callable[[list[Path], int], dict] | None = None,
) -> dict:
    """``dflash-advise advise PATHS --json --gpus G`` with the advisor of ``root`` (by ``run``, else a
    process each); with ``cache`` (a folder), read from there where the same code (`tree_digest`)
    advised the same files (their bytes) before, else run and kept there."""

    def fresh() -> dict:
        return run(paths, gpus) if run else validate_real.advise_json(paths, "--gpus", str(gpus), root=root)

    if cache is None:
        return fresh()
    parts = [tree_digest(root), str(gpus), *(f"{p.name}:{_file_digest(p)}" for p in paths)]
    h = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    f = cache / h[:2] / f"{h}.json"
    if f.is_file():
        return json.loads(f.read_text())
    out = fresh()
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_name(f"{f.name}.{os.getpid()}.{id(out)}.tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(f)
    return out


_WORKER = """
import contextlib, io, json, sys
from advisor.cli.app import main
reply = sys.stdout
for line in sys.stdin:
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(json.loads(line))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    reply.write(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}) + "\\n")
    reply.flush()
"""


class Advisors:
    """Warm ``dflash-advise`` processes of one tree: each runs the command's entry point
    (`advisor.cli.app.main`, what ``python -m advisor.cli.app`` runs) once per request, so that the
    imports are paid once a process, not once a source. One process per thread that asks at once;
    `close` ends them."""

    def __init__(self, root: Path):
        self.root = root
        self.idle: queue.SimpleQueue = queue.SimpleQueue()
        self.started: list[subprocess.Popen] = []

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ, PYTHONPATH=str(self.root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.Popen(
            [sys.executable, "-c", _WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=self.root,
        )
        self.started.append(p)
        return p

    def __call__(self, paths: list[Path], gpus: int) -> dict:
        try:
            p = self.idle.get_nowait()
        except queue.Empty:
            p = self._start()
        args = ["advise", *map(str, paths), "--json", "--gpus", str(gpus)]
        p.stdin.write(json.dumps(args) + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"{' '.join(args)}: the advisor process of {self.root} ended (exit {p.wait()})")
        self.idle.put(p)
        reply = json.loads(line)
        if reply["code"] != 0:
            raise RuntimeError(f"{' '.join(args)}: exit {reply['code']}: {reply['err'].strip()[-400:]}")
        return json.loads(reply["out"])

    def close(self) -> None:
        for p in self.started:
            if p.stdin:
                p.stdin.close()
            p.wait()
        self.started.clear()


# ---- the calibrated constants, and a tree that states others

CONSTANTS = ("STEPS_TEMPERATURE", "LEVEL_CORR")  # advisor/decide/odds.py's constants fitted on the sweeps
UNCALIBRATED = {"STEPS_TEMPERATURE": 1.0, "LEVEL_CORR": 0.0}  # the draw outside the domain
RHO_STEP = 0.1  # a fitted LEVEL_CORR is rounded to this, as the constant is stated (0.8)


def _constant(name: str) -> re.Pattern:
    return re.compile(rf"^{name} = ([0-9.]+)", re.M)


def calibrated_constants(root: Path = ROOT) -> dict[str, float]:
    """The values of ``CONSTANTS`` that ``root``'s ``advisor/decide/odds.py`` states."""
    odds = root / "advisor" / "decide" / "odds.py"
    text = odds.read_text()
    out = {}
    for name in CONSTANTS:
        found = _constant(name).findall(text)
        if len(found) != 1:
            raise RuntimeError(f"{odds}: found {len(found)} {name} lines, expected 1")
        out[name] = float(found[0])
    return out


def patched_tree(dest: Path, constants: Mapping[str, float], root: Path = ROOT) -> Path:
    """A copy of ``root``'s ``advisor`` package under ``dest`` with each constant of
    ``constants`` (names of ``CONSTANTS``) set to its value in ``advisor/decide/odds.py``; returns
    ``dest`` (a tree `run_sweep` takes as its root)."""
    shutil.copytree(root / "advisor", dest / "advisor", ignore=shutil.ignore_patterns("__pycache__"))
    odds = dest / "advisor" / "decide" / "odds.py"
    text = odds.read_text()
    for name, value in constants.items():
        text, n = re.subn(rf"^{name} = [0-9.]+", f"{name} = {float(value)!r}", text, flags=re.M)
        if n != 1:
            raise RuntimeError(f"{odds}: found {n} {name} lines, expected 1")
    odds.write_text(text)
    return dest


def stated_pairs(sweep: dict) -> tuple[list[tuple[float, bool]], list[tuple[float, bool]]]:
    """A scored sweep's (stated, within) pairs: the recommendations', and every split's (as
    `summarize` takes them)."""
    cases = sweep["cases"]
    picks = [(c["p_best"], c["within"]) for c in cases if c["p_best"] is not None and c["within"] is not None]
    splits = [(s["p_best"], s["within"]) for c in cases for s in c["splits"] if s["p_best"] is not None]
    return picks, splits


def objective(pairs: Mapping[str, tuple[list, list]], leave_out: str | None = None) -> float:
    """Brier of the picks plus Brier of every split, over the groups of ``pairs`` but ``leave_out``
    (BENCHMARKS.md 19.6: the temperature's objective)."""
    picks = [p for name, (pk, _) in pairs.items() if name != leave_out for p in pk]
    splits = [p for name, (_, sp) in pairs.items() if name != leave_out for p in sp]
    return (brier(picks) or 0.0) + (brier(splits) or 0.0)


def leave_one_out(by_t: Mapping[float, Mapping[str, tuple[list, list]]]) -> dict:
    """The temperature's fit and its leave-one-group-out choice from each temperature's pairs per
    group (a group: a family, or a sweep).

    Args:
        by_t: temperature -> group name -> (picks' pairs, splits' pairs) (`stated_pairs`).

    Returns:
        ``{"objective": {T: value}, "best": T, "chosen": {group: T}, "held_out": reliability
        rows, "held_out_brier": float}``; the held-out rows are `reliability`'s over each group's
        picks at the T the other groups chose. A tie goes to the smaller T.
    """
    temps = sorted(by_t)
    names = list(next(iter(by_t.values())))
    chosen = {n: min(temps, key=lambda t: objective(by_t[t], n)) for n in names}
    held = [p for n in names for p in by_t[chosen[n]][n][0]]
    score = {t: objective(by_t[t]) for t in temps}
    return {
        "objective": score,
        "best": min(temps, key=score.get),
        "chosen": chosen,
        "held_out": reliability(held),
        "held_out_brier": brier(held),
    }


def level_corr(sweeps: list[dict]) -> float | None:
    """The two roles' run-to-run level moves drawn together (``LEVEL_CORR``, BENCHMARKS.md 19.6):
    per split with two or more repeats, each repeat's log capacity of the targets and of the
    drafters (``observed.capacities_bps``) less the split's mean; their uncentred correlation over
    every repeat of every such split of ``sweeps`` (`run_sweep`'s records). None without any."""
    sxy = sxx = syy = 0.0
    for sw in sweeps:
        for caps in sw.get("capacities", {}).values():
            pts = [
                (math.log(c["target"]), math.log(c["drafter"]))
                for c in caps
                if c and c.get("target") and c.get("drafter")
            ]
            if len(pts) < 2:
                continue
            mx = statistics.fmean(x for x, _ in pts)
            my = statistics.fmean(y for _, y in pts)
            for x, y in pts:
                sxy += (x - mx) * (y - my)
                sxx += (x - mx) ** 2
                syy += (y - my) ** 2
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def _rho_step(rho: float | None, fallback: float) -> float:
    return fallback if rho is None else round(round(rho / RHO_STEP) * RHO_STEP, 4) + 0.0  # never -0.0


# ---- families (MODELLING.md section 9; advisor/decide/families.py holds the record)


def _head(path: Path) -> dict:
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as f:
        return json.loads(f.readline())


def sweep_keys(folder: Path) -> tuple[str, str, Shape]:
    """A sweep's family keys: (preset, host, shape). The preset is ``sweep.json``'s ``--model``
    (else the trainer's default on the logs' device: tiny on CPU); the rest is read from every
    log's header (q_hs: the queue feeding the drafters, q_pre: the one feeding the targets, the
    sync cadence from the logs of two or more drafters, the token budget, GPUs per engine, the
    models, the host kind: ``hardware`` up to its first comma). Logs that differ in a key raise
    ValueError: one sweep is one family."""
    argv = json.loads((folder / "sweep.json").read_text()).get("argv", [])
    logs = sorted(folder.glob("*.jsonl.gz"))
    if not logs:
        raise ValueError(f"{folder}: no logs (*.jsonl.gz)")
    seen: dict[str, set] = {}
    for p in logs:
        h = _head(p)
        cap = {q.get("feeds"): q.get("cap", 0) for q in h.get("queues", [])}
        per = h.get("gpus_per_worker") or {}
        row = {
            "hs_cap": cap.get("drafter", 0),
            "pre_cap": cap.get("target", 0),
            "token_budget": h.get("token_budget"),
            "gpus_per_worker": (per.get("target", 1), per.get("drafter", 1)),
            "target_model": h.get("target_model"),
            "drafter_model": h.get("drafter_model"),
            "host": (h.get("hardware") or "unknown host").split(",")[0].strip(),
            "device": h.get("device"),
        }
        if h.get("roles", {}).get("drafter", 0) > 1:  # one drafter never syncs: the trainer writes 0
            row["sync_every"] = h.get("sync_every", 0)
        for k, v in row.items():
            seen.setdefault(k, set()).add(v)
    for k, vals in seen.items():
        if len(vals) > 1:
            raise ValueError(f"{folder}: its logs' headers differ in {k}: {sorted(map(str, vals))}")
    one = {k: next(iter(v)) for k, v in seen.items()}
    device, host = one.pop("device"), one.pop("host")
    one.setdefault("sync_every", None)
    preset = argv[argv.index("--model") + 1] if "--model" in argv else ("tiny" if device in (None, "cpu") else "1b")
    return preset, host, Shape(**one)


def families(names: list[str], folder: Path = SWEEP_DIR) -> list[Family]:
    """The families of the sweeps ``names`` (folders of ``folder``), by name."""
    groups: dict[tuple, list[str]] = {}
    for n in sorted(names):
        groups.setdefault(sweep_keys(folder / n), []).append(n)
    out = [Family(family_name(p, h, s), p, h, s, tuple(sw)) for (p, h, s), sw in groups.items()]
    if len({f.name for f in out}) != len(out):
        raise ValueError(f"two families share a name: {sorted(f.name for f in out)}")
    return sorted(out, key=lambda f: f.name)


def families_table(fams: list[Family], gpus: Mapping[str, int]) -> str:
    """The families as Markdown: keys, sweeps and their G."""
    lines = [
        "| family | preset | q_hs | q_pre | sync every | token budget | GPUs per engine (target, drafter) | host "
        "| sweeps | G |",
        "|---|---|---:|---:|---:|---:|---|---|---|---|",
    ]
    for f in fams:
        s = f.shape
        gs = sorted({gpus[n] for n in f.sweeps if n in gpus})
        lines.append(
            f"| {f.name} | {f.preset} | {s.hs_cap} | {s.pre_cap} | {'-' if s.sync_every is None else s.sync_every} "
            f"| {s.token_budget or '-'} | {s.gpus_per_worker[0]}, {s.gpus_per_worker[1]} | {f.host} "
            f"| {', '.join(f.sweeps)} | {', '.join(map(str, gs))} |"
        )
    return "\n".join(lines)


def _q(x: object) -> str:
    return json.dumps(x) if isinstance(x, str) else repr(x)


def families_record(fams: list[Family]) -> str:
    """The record of advisor/decide/families.py (``MODELS`` and ``CALIBRATED``) as Python to paste
    there (then ``ruff format`` it)."""
    models: dict[str, tuple] = {}
    for f in fams:
        pair = (f.shape.target_model, f.shape.drafter_model)
        if models.setdefault(f.preset, pair) != pair:
            raise ValueError(f"preset {f.preset}: two model pairs, {models[f.preset]} and {pair}")
    lines = ["MODELS = {  # preset -> (target model, drafter model), as the trainer's headers name them"]
    lines += [f"    {_q(p)}: ({_q(t)}, {_q(d)})," for p, (t, d) in models.items()]
    lines += ["}", "CALIBRATED: tuple[Family, ...] = ("]
    for f in fams:
        s = f.shape
        keys = (s.hs_cap, s.pre_cap, s.sync_every, s.token_budget, *s.gpus_per_worker)
        lines.append(f"    _family({_q(f.preset)}, {_q(f.host)}, {keys!r}, {_q(' '.join(f.sweeps))}),")
    lines.append(")")
    return "\n".join(lines)


# ---- leave one family out


CONFIDENT = 0.8  # a pick stated at least this likely ...
CONFIDENT_MISS = 0.05  # ... that measured more than this below the best is a confident miss
CONFIDENT_MISS_MAX = 0.05  # share of confident picks that may miss so
SELF_MIN = 0.90  # the self-check's share of logs within SELF_TOL, in every family


def family_summary(sweeps: list[dict]) -> dict:
    """The leave-one-family-out numbers of a set of scored sweeps (`run_sweep`'s records): the
    verdicts, regrets, the reliability of the pick's ``p_best``, the confident misses, the measuring
    reference's regrets on the same truths, and the self-check of every single log."""
    cases = [c for sw in sweeps for c in sw["cases"]]
    regrets = [c["regret"] for c in cases if c["regret"] is not None]
    stated = [(c["p_best"], c["within"]) for c in cases if c["p_best"] is not None and c["within"] is not None]
    confident = [c for c in cases if c["p_best"] is not None and c["p_best"] >= CONFIDENT and c["regret"] is not None]
    checks = [c["self_check"] for c in cases if c.get("self_check")]
    ref = reference(sweeps)["in_sample"]
    return {
        "sources": len(cases),
        "actions": sum(c["verdict"] != NO_ACTION for c in cases),
        "scored": len(regrets),
        "mean_regret": statistics.fmean(regrets) if regrets else None,
        "max_regret": max(regrets) if regrets else None,
        "within": sum(bool(c["within"]) for c in cases),
        "stated": len(stated),
        "brier": brier(stated),
        "reliability": reliability(stated),
        "confident": len(confident),
        "confident_misses": sum(c["regret"] > CONFIDENT_MISS for c in confident),
        "reference_max_regret": ref["max_regret"],
        "reference_scored": ref["scored"],
        "self_logs": len(checks),
        "self_within": sum(abs(x["miss"]) <= SELF_TOL for x in checks),
        "self_methods": dict(Counter(str(x["method"]) for x in checks)),
    }


def lofo_checks(s: dict) -> dict[str, bool | None]:
    """The acceptance lines (issue 51) of one `family_summary`: None where nothing is scored."""
    return {
        "deciles": all(r["ok"] for r in s["reliability"]) if s["reliability"] else None,
        "confident_misses": s["confident_misses"] / s["confident"] <= CONFIDENT_MISS_MAX if s["confident"] else None,
        "actions": s["actions"] / s["sources"] >= ACTION_MIN if s["sources"] else None,
        "mean_regret": s["mean_regret"] <= MEAN_REGRET_MAX if s["mean_regret"] is not None else None,
        "max_regret": (
            s["max_regret"] <= s["reference_max_regret"] + 1e-12
            if s["max_regret"] is not None and s["reference_max_regret"] is not None
            else None
        ),
        "self_check": s["self_within"] / s["self_logs"] >= SELF_MIN if s["self_logs"] else None,
    }


def covering(fams: list[Family]) -> dict[str, list[str]]:
    """Per family, the other families whose domain holds its shape (`advisor.decide.families.domain`):
    left out, it is still calibrated there; where none is, the advisor draws it uncalibrated."""
    out = {}
    for f in fams:
        others = [g for g in fams if g.name != f.name]
        out[f.name] = [g.name for g in others if domain(f.shape, [g]).inside]
    return out


def leave_family_out(
    chosen: Mapping[str, int],
    fams: list[Family],
    temperatures: list[float],
    score: Callable[..., dict[str, dict]],
    base: Mapping[str, float],
) -> dict:
    """Leave one family out (module docstring): every calibrated constant fitted on the other
    families, the held-out family scored with them.

    Args:
        chosen: the sweeps scored, name -> G.
        fams: their families (`families`).
        temperatures: the grid ``STEPS_TEMPERATURE`` is chosen from.
        score: (T, rho, sweep names, pairs=True) -> name -> `run_sweep`'s record, the advice of a
            tree stating ``STEPS_TEMPERATURE`` T and ``LEVEL_CORR`` rho (``pairs`` False: single
            logs only, enough for the repeats' level moves).
        base: the constants the tree states (`calibrated_constants`).

    Returns:
        ``{"families": {name: {...}}, "pooled": {...}}``: per family its sweeps, the constants fitted
        without it (rho from the other families' repeats, rounded to ``RHO_STEP``; T the grid's
        choice by `objective` at the pooled rho), the families covering its shape, and
        `family_summary` of its sweeps held out (``held_out``) and as the advisor deploys it
        (``deployed``: the uncalibrated draw where no other family covers it); ``pooled``: the
        constants fitted on every family, and the summaries over every held-out case.
    """
    of = {f.name: [n for n in f.sweeps if n in chosen] for f in fams}
    t0, rho0 = base["STEPS_TEMPERATURE"], base["LEVEL_CORR"]
    first = score(t0, rho0, list(chosen), pairs=False)
    rho_all = _rho_step(level_corr(list(first.values())), rho0)
    rho = {f: _rho_step(level_corr([first[n] for g, ns in of.items() if g != f for n in ns]), rho_all) for f in of}
    by_t = {}
    for t in temperatures:
        got = score(t, rho_all, list(chosen))
        by_t[t] = {
            f: tuple(sum(lists, []) for lists in zip(*(stated_pairs(got[n]) for n in ns))) for f, ns in of.items()
        }
    fit = leave_one_out(by_t)
    cover = covering(fams)
    out = {}
    for f in fams:
        t, r = fit["chosen"][f.name], rho[f.name]
        held = score(t, r, of[f.name])
        deployed = (
            held if cover[f.name] else score(UNCALIBRATED["STEPS_TEMPERATURE"], UNCALIBRATED["LEVEL_CORR"], of[f.name])
        )
        out[f.name] = {
            "sweeps": of[f.name],
            "gpus": sorted({chosen[n] for n in of[f.name]}),
            "temperature": t,
            "level_corr": r,
            "level_corr_raw": level_corr([first[n] for g, ns in of.items() if g != f.name for n in ns]),
            "covered_by": cover[f.name],
            "held_out": family_summary(list(held.values())),
            "deployed": family_summary(list(deployed.values())),
            "cases": [c for sw in held.values() for c in sw["cases"]],
            "deployed_cases": [c for sw in deployed.values() for c in sw["cases"]],
        }
    every = [
        sw for f in fams for sw in score(out[f.name]["temperature"], out[f.name]["level_corr"], of[f.name]).values()
    ]
    deployed_all = []
    for f in fams:
        t, r = (out[f.name]["temperature"], out[f.name]["level_corr"]) if cover[f.name] else (1.0, 0.0)
        deployed_all += list(score(t, r, of[f.name]).values())
    return {
        "families": out,
        "pooled": {
            "temperature": fit["best"],
            "objective": fit["objective"],
            "level_corr": rho_all,
            "level_corr_raw": level_corr(list(first.values())),
            "base": dict(base),
            "held_out": family_summary(every),
            "deployed": family_summary(deployed_all),
        },
    }


LOFO_LINES = {
    "deciles": (
        f"every decile of the pick's p_best with >= {DECILE_MIN_CASES} cases within {DECILE_MAX_GAP * 100:.0f} points"
    ),
    "confident_misses": (
        f"picks stated >= {CONFIDENT:.1f} that measured > {CONFIDENT_MISS:.0%} below the best: "
        f"<= {CONFIDENT_MISS_MAX:.0%}"
    ),
    "actions": f"an action on >= {ACTION_MIN:.0%} of sources",
    "mean_regret": f"mean regret <= {MEAN_REGRET_MAX:.0%}",
    "max_regret": "max regret no worse than measuring every split once (the same truths)",
    "self_check": f"observed split projected within {SELF_TOL:.0%} of its log in >= {SELF_MIN:.0%} of the logs",
}


def _deciles_cell(rows: list[dict]) -> str:
    """The judged deciles in one cell: ``0.9: 120 98/97``, OFF where more than 10 points apart."""
    judged = [r for r in rows if r["judged"]]
    if not judged:
        return f"none with >= {DECILE_MIN_CASES}"
    return "; ".join(
        f"{r['decile'] / 10:.1f}: {r['count']} {100 * r['stated']:.0f}/{100 * r['observed']:.0f}"
        + ("" if r["ok"] else " OFF")
        for r in judged
    )


def _family_row(name: str, s: dict, extra: str = "") -> str:
    checks = lofo_checks(s)
    failed = [k for k, v in checks.items() if v is False]
    conf = f"{s['confident_misses']}/{s['confident']}" if s["confident"] else "-"
    self_share = f"{s['self_within']}/{s['self_logs']}" if s["self_logs"] else "-"
    brier_text = "-" if s["brier"] is None else f"{s['brier']:.3f}"
    return (
        f"| {name}{extra} | {s['sources']} | {s['actions']}/{s['sources']} | {_pct(s['mean_regret'])} / "
        f"{_pct(s['max_regret'])} | {_pct(s['reference_max_regret'])} | {conf} | {brier_text} | "
        f"{_deciles_cell(s['reliability'])} | {self_share} | {', '.join(failed) or 'all met'} |"
    )


def render_lofo(
    result: dict, fams: list[Family], gpus: Mapping[str, int], code: str, wall_s: float | None = None
) -> str:
    """The leave-one-family-out report as Markdown."""
    pooled, per = result["pooled"], result["families"]
    base = pooled["base"]
    head = (
        "| family | sources | action named | mean / max regret | reference max regret | stated >= 0.8 and "
        "> 5% below | Brier | judged deciles of p_best (cases stated/observed %) | self-check within 5% | "
        "lines not met |\n|---|---:|---:|---:|---:|---:|---:|---|---:|---|"
    )
    lines = [
        f"Code: {code}; constants as stated there: STEPS_TEMPERATURE {base['STEPS_TEMPERATURE']:g}, "
        f"LEVEL_CORR {base['LEVEL_CORR']:g}. {len(fams)} families of {sum(len(f.sweeps) for f in fams)} sweeps.\n",
        families_table(fams, gpus),
        "",
        "**Fitted on every family:** LEVEL_CORR "
        + (f"{pooled['level_corr_raw']:.3f}" if pooled["level_corr_raw"] is not None else "-")
        + f" (rounded {pooled['level_corr']:g}); STEPS_TEMPERATURE {pooled['temperature']:g} (objective "
        + ", ".join(f"T {t:g} {v:.5f}" for t, v in pooled["objective"].items())
        + ").",
        "",
        "**Left out one family at a time** (the constants fitted on the others; rho from their repeats, "
        "T the grid's choice by the two Brier scores at the pooled rho):",
        "",
        "| family | LEVEL_CORR without it | STEPS_TEMPERATURE without it | other families covering its shape |",
        "|---|---:|---:|---|",
    ]
    for name, f in per.items():
        raw = "-" if f["level_corr_raw"] is None else f"{f['level_corr_raw']:.3f}"
        lines.append(
            f"| {name} | {raw} ({f['level_corr']:g}) | {f['temperature']:g} | {', '.join(f['covered_by']) or 'none'} |"
        )
    for key, title in (
        ("held_out", "Held out, scored with the constants the other families chose"),
        ("deployed", "As deployed: a family no other covers gets the uncalibrated draw (T 1, levels independent)"),
    ):
        lines += ["", f"**{title}:**", "", head]
        lines += [_family_row(name, f[key]) for name, f in per.items()]
        lines.append(_family_row("**pooled**", pooled[key]))
        s = pooled[key]
        lines += [
            "",
            f"Pooled reliability of `recommendation.p_best` ({s['stated']} sources, Brier "
            f"{'-' if s['brier'] is None else format(s['brier'], '.4f')}):",
            "",
        ]
        lines += rel_table(s["reliability"])
        checks = lofo_checks(s)
        checks["self_check"] = all(lofo_checks(f[key])["self_check"] is not False for f in per.values())
        lines += ["", "| acceptance line (pooled; the self-check in every family) | state |", "|---|---|"]
        for k, label in LOFO_LINES.items():
            v = checks[k]
            lines.append(f"| {label} | {'-' if v is None else ('met' if v else 'NOT met')} |")
    if wall_s is not None:
        lines.append(f"\nWall time: {wall_s / 60:.1f} min.")
    return "\n".join(lines) + "\n"


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}%"


def rel_table(rows: list[dict]) -> list[str]:
    out = [
        "| stated p_best | cases | mean stated | observed within 2% | gap | judged |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        d = r["decile"]
        gap = 100 * (r["observed"] - r["stated"])
        verdict = ("ok" if r["ok"] else "OFF") if r["judged"] else f"< {DECILE_MIN_CASES} cases"
        out.append(
            f"| {d / 10:.1f}-{(d + 1) / 10:.1f} | {r['count']} | {_pct(r['stated'])} | {_pct(r['observed'])} | "
            f"{gap:+.1f} pts | {verdict} |"
        )
    return out


def render(summary: dict, code: str) -> str:
    """The report as Markdown."""
    s = summary
    lines = [
        f"Code: {code}. {s['sources']} sources (every log alone and every pair of splits' first repeats).\n",
        (
            "| sweep | G | sources | action named | mean / max regret (picks at a measured split) "
            "| repeat rates inside the 95% interval | median width |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, v in s["per_sweep"].items():
        lines.append(
            f"| {name} | {v['gpus']} | {v['sources']} | {v['actions']}/{v['sources']} | "
            f"{_pct(v['mean_regret'])} / {_pct(v['max_regret'])} ({v['scored']}) | {_pct(v['coverage'], 0)} "
            f"({v['inside']}/{v['rates']}) | {_pct(v['median_width'])} |"
        )
    c = s["coverage"]
    lines.append(
        f"| all | | {s['sources']} | {s['actions']}/{s['sources']} | {_pct(s['mean_regret'])} / "
        f"{_pct(s['max_regret'])} ({s['scored']}) | {_pct(c['coverage'], 0)} ({c['inside']}/{c['rates']}) | "
        f"{_pct(c['median_width'])} |"
    )
    pooled = [f"{name} ({v['machines']})" for name, v in s["per_sweep"].items() if v.get("machines", 0) > 1]
    if pooled:
        lines.append(f"\nTruths pooled across machines (mixing their rankings): {', '.join(pooled)}.")
    unscored = s["sources"] - s["scored"]
    lines.append(
        "\nVerdicts: "
        + ", ".join(f"{k} {v}" for k, v in s["verdicts"].items())
        + f"; picks within 2% of the best: {s['within']}/{s['scored']}"
        + (f" ({unscored} picks at splits the sweep did not run: no regret, left out)" if unscored else "")
        + ".\n"
    )
    if s.get("self_checked"):
        lines.append(
            f"Self-check: of {s['self_checked']} logs advised alone, the projection of the log's own split is within "
            f"{SELF_TOL:.0%} of its measured rate in {_pct(s['self_check'], 0)}.\n"
        )
    if s["misses"]:
        lines.append(
            f"Picks more than 2% below the best: {s['misses']}; the probe their advice names runs a split "
            f"within 2% of the best in {s['misses_probe_runs_best']}.\n"
        )
    if s["stated"]:
        lines.append(f"Reliability of `recommendation.p_best` ({s['stated']} sources; Brier {s['brier']:.3f}):\n")
        lines += rel_table(s["reliability"])
        if s["split_reliability"]:
            n = sum(r["count"] for r in s["split_reliability"])
            lines.append(f"\nEvery split's `p_best` ({n} split projections; Brier {s['split_brier']:.3f}):\n")
            lines += rel_table(s["split_reliability"])
    else:
        lines.append("No `p_best` stated by this code: reliability and Brier not measured.")
    ref = s["reference"]
    if ref["cases"]:
        lines.append(
            "\nReference, every split measured once (the best of one repeat of each, "
            f"{ref['in_sample']['scored']} sweep-repeats):\n\n"
            "| scored against | mean regret | max regret | within 2% |\n|---|---:|---:|---:|"
        )
        truths = (("in_sample", "mean of all repeats (the advisor's truth)"), ("held_out", "the other repeats"))
        for key, label in truths:
            v = ref[key]
            lines.append(
                f"| {label} | {_pct(v['mean_regret'], 2)} | {_pct(v['max_regret'])} | {v['within']}/{v['scored']} |"
            )
    names = {
        "action_share": f"action on >= {ACTION_MIN:.0%} of sources",
        "mean_regret": f"mean regret <= {MEAN_REGRET_MAX:.0%}",
        "max_regret": f"max regret <= {MAX_REGRET_MAX:.0%}",
        "deciles": f"deciles (>= {DECILE_MIN_CASES} cases) within {DECILE_MAX_GAP * 100:.0f} points",
        "coverage": f"coverage {COVERAGE_RANGE[0]:.0%}-{COVERAGE_RANGE[1]:.0%} on every sweep",
    }
    lines.append("\n| acceptance line | state |\n|---|---|")
    for k, label in names.items():
        v = s["checks"][k]
        lines.append(f"| {label} | {'-' if v is None else ('met' if v else 'NOT met')} |")
    return "\n".join(lines) + "\n"


def _lofo(args, chosen: dict[str, int], fams: list[Family]) -> dict:
    """`leave_family_out` over ``chosen`` with the trees it asks for, each patched once (`patched_tree`)
    and every source's advice cached (`cached_advice`)."""
    root = args.root.resolve()
    cache = None if args.no_cache else args.cache
    trees: dict[tuple[float, float], Path] = {}
    done: dict[tuple[float, float], dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:

        def score(t: float, rho: float, names: list[str], pairs: bool = True) -> dict[str, dict]:
            pairs = pairs and not args.no_pairs
            if (t, rho) not in trees:
                values = {"STEPS_TEMPERATURE": t, "LEVEL_CORR": rho}
                trees[t, rho] = patched_tree(Path(tmp) / f"t{t:g}-r{rho:g}", values, root)
            got = done.setdefault((t, rho, pairs), {})
            todo = [n for n in names if n not in got]
            warm = Advisors(trees[t, rho])
            try:
                for n in todo:
                    t1 = time.monotonic()
                    got[n] = run_sweep(n, chosen[n], pool, root=trees[t, rho], pairs=pairs, cache=cache, run=warm)
                    print(f"T {t:g}, rho {rho:g}: {n} ({time.monotonic() - t1:.0f} s)", file=sys.stderr, flush=True)
            finally:
                warm.close()
            return {n: got[n] for n in names}

        return leave_family_out(chosen, fams, args.temperatures, score, calibrated_constants(root))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="tree whose advisor is run (default: this one)")
    ap.add_argument("--sweep", action="append", default=None, help="only this sweep (repeatable; default: all)")
    ap.add_argument("--no-pairs", action="store_true", help="single logs only")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--code", default=None, help="how the report names the code (default: --root)")
    ap.add_argument("--json", type=Path, default=None, help="also write the summary and every case here")
    ap.add_argument("--in-sample", action="store_true", help="the tree as it is, per sweep (no family left out)")
    ap.add_argument(
        "--temperatures", type=float, nargs="+", default=list(DEFAULT_TEMPERATURES), help="the temperature's grid"
    )
    ap.add_argument("--families", action="store_true", help="print the families of the sweeps and stop")
    ap.add_argument("--families-record", action="store_true", help="print advisor/decide/families.py's record")
    ap.add_argument("--cache", type=Path, default=CACHE_DIR, help=f"advice cache folder (default {CACHE_DIR})")
    ap.add_argument("--no-cache", action="store_true", help="advise every source afresh, keep nothing")
    args = ap.parse_args(argv)
    found = real_sweeps()
    unknown = [n for n in args.sweep or [] if n not in found]
    if unknown:
        ap.error(f"no real sweep named {', '.join(unknown)} (have: {', '.join(found)})")
    chosen = {n: g for n, g in found.items() if not args.sweep or n in args.sweep}
    code = args.code or str(args.root)
    if args.families or args.families_record:
        fams = families(list(chosen))
        print(families_record(fams) if args.families_record else families_table(fams, chosen))
        return 0
    if args.in_sample:
        cache = None if args.no_cache else args.cache
        with ThreadPoolExecutor(args.jobs) as pool:
            sweeps = [
                run_sweep(n, g, pool, root=args.root.resolve(), pairs=not args.no_pairs, cache=cache)
                for n, g in chosen.items()
            ]
        summary = summarize(sweeps)
        print(render(summary, code))
        if args.json:
            args.json.write_text(json.dumps({"summary": summary, "sweeps": sweeps}, indent=1))
        return 0
    fams = families(list(chosen))
    if len(fams) < 2:
        ap.error(f"leaving one family out needs two or more families; {', '.join(chosen)} make {len(fams)}")
    start = time.monotonic()
    result = _lofo(args, chosen, fams)
    print(render_lofo(result, fams, chosen, code, time.monotonic() - start))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
