"""Validation of the advisor against exact simulation (issue 4).

For each scenario (a documented generator, `tests/synth.py`'s `Scenario`):

1. write a schema-v1 log of the scenario at ONE split (with warm-up), as a run would;
2. run the advisor on that log alone (`advisor.advice.advise`);
3. measure every split N + M = G by exact simulation (`advisor.model.simulate`) driven by the TRUE
   generator: `REPS` independent replications of `TRUTH_BATCHES` batches each, without
   warm-up, the first 10% of completions dropped; common random numbers across splits;
4. report per split the predicted vs measured throughput, the error, and the error of the
   naive bound min(N mu_t, M mu_d) computed from the generator's TRUE mean rates (what a
   perfect reading of capacities gives when it ignores queueing, sync and the loader); and
   whether the recommended split is within 2% of the measured best.

Bars: |error| <= 3% on every split; the recommended split within
2% of the best measured one. The harness reports misses; it does not tune anything.

    python3 benchmarks/validate.py                  # all scenarios -> benchmarks/VALIDATION.md
    python3 benchmarks/validate.py --only ref-7x1 bursty-hs1 --no-write
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the synthetic generator (tests/synth.py)

from synth import (
    Scenario,
    ScenarioDraw,
    ServiceModel,
    TokenModel,
    draw,
    reference_scenario,
    run,  # noqa: E402
    write_log,
)

ERROR_BAR_PCT = 3.0
REC_BAR_PCT = 2.0
TRUTH_BATCHES = 30_000
REPS = 3
WARMUP_SHARE = 0.1


def _tm(mean: float = 31200.0, cv: float = 0.03, budget: int = 32768) -> TokenModel:
    return TokenModel(budget=budget, mean=mean, cv=cv, seq_len=mean / 16.2)


def _svc(mean_s: float, scv: float, tokens: TokenModel, overhead: float = 0.1, dist: str = "gamma") -> ServiceModel:
    return ServiceModel.from_mean(mean_s, tokens.mean, overhead_share=overhead, scv=scv, dist=dist)


@dataclass(frozen=True)
class Case:
    scenario: Scenario  # at the split the log is written at
    what: str
    also_at: tuple[tuple[int, int], ...] = ()  # further logs of the same job at these splits
    # regime switching: (role, factor, period_batches, slow_blocks_of_3): that role's service is
    # `factor` times slower in one block of `period_batches` consecutive batches out of three
    regime: tuple[str, float, int] | None = None


def with_regime(d: ScenarioDraw, regime: tuple[str, float, int] | None) -> ScenarioDraw:
    """The draw with a role slowed in every third block of batches (a time-correlated slow-down)."""
    if regime is None:
        return d
    role, factor, period = regime
    k = np.arange(len(d.tokens))
    slow = (k // period) % 3 == 0
    arr = getattr(d, f"{role}_s").copy()
    arr[slow] *= factor
    return replace(d, **{f"{role}_s": arr})


def scenarios() -> dict[str, Case]:
    """The scenario set: smooth to bursty service, deep and one-slot q_hs, loader-bound,
    sync-heavy data-parallel drafters, G = 8, 32 and 48. Rates are per worker at the mean
    token count."""
    cases: dict[str, Case] = {}
    ref = reference_scenario(duration_s=5400.0)
    cases["ref-7x1"] = Case(ref, "the reference case (fixture generator), SCV 0.03, q_hs 20, logged at 7-1")

    tm = _tm()
    base = dict(tokens=tm, pre_cap=50, warmup_factor=1.3, warmup_tau_s=120.0, samples=902000, epochs=6)

    def sc(name, n, m, t_s, d_s, scv, hs, *, seed, n_batches=20_000, dist="gamma", **kw) -> Scenario:
        args = dict(base)
        args.update(kw)
        tok = args.pop("tokens")
        return Scenario(
            name=name,
            n_target=n,
            n_drafter=m,
            target=_svc(t_s, scv, tok, dist=dist),
            drafter=_svc(d_s, scv, tok, dist=dist),
            tokens=tok,
            hs_cap=hs,
            n_batches=n_batches,
            seed=seed,
            **args,
        )

    # balanced point at 5-3 (5 x 0.3 = 1.5 = 3 x 0.5); one-slot queue, smooth service
    cases["smooth-hs1"] = Case(
        sc("smooth-hs1", 4, 4, 1 / 0.3, 1 / 0.5, 0.05, 1, seed=101),
        "SCV 0.05, q_hs 1, logged at 4-4 (target-bound); balance at 5-3",
    )
    # bursty service (exponential-like), deep and one-slot queues; balance at 6-2
    cases["bursty-hs20"] = Case(
        sc("bursty-hs20", 5, 3, 4.0, 1 / 0.75, 1.0, 20, seed=102),
        "SCV 1 (gamma), q_hs 20, logged at 5-3; balance at 6-2",
    )
    cases["bursty-hs1"] = Case(
        sc("bursty-hs1", 6, 2, 4.0, 1 / 0.75, 1.0, 1, seed=103), "SCV 1 (gamma), q_hs 1, logged at the balanced 6-2"
    )
    cases["mid-lognormal-hs4"] = Case(
        sc("mid-lognormal-hs4", 5, 3, 2.0, 4.0, 0.25, 4, seed=104, dist="lognormal"),
        "SCV 0.25 (lognormal), q_hs 4, targets 0.5, drafters 0.25 b/s, logged at 5-3; best near 3-5",
    )
    # loader-bound: a 1.2 b/s loader (SCV 0.3) in front of 0.3 b/s targets and 0.6 b/s drafters
    cases["loader-bound"] = Case(
        sc("loader-bound", 5, 3, 1 / 0.3, 1 / 0.6, 0.05, 8, seed=105, loader=ServiceModel(1 / 1.2, 0.0, 0.3)),
        "loader 1.2 b/s (SCV 0.3), targets 0.3, drafters 0.6 b/s, q_hs 8, logged at 5-3 (input-bound)",
    )
    # a loader close to binding: slightly slower than the targets at 7-1 and bursty, behind 4-slot prefetch
    # queues, so targets starve a few percent of the time while the queues hold a batch or more on
    # average (issue 9): not input-bound by the fixed thresholds
    cases["loader-near"] = Case(
        sc("loader-near", 7, 1, 7.0, 1 / 1.3, 0.05, 20, seed=112, pre_cap=4, loader=ServiceModel(1 / 0.97, 0.0, 1.0)),
        "loader 0.97 b/s (SCV 1), targets 1/7 b/s, drafters 1.3 b/s, q_pre 4, q_hs 20, logged at 7-1 "
        "(loader near binding)",
    )
    # drafters 1.5x slower one third of the time, in stretches of 300 batches (~6 minutes at 0.85 b/s)
    # balanced on average at 6-2 (issue 9: service times are not independent draws)
    cases["regime-drafter"] = Case(
        sc("regime-drafter", 6, 2, 7.0, 2.0, 0.05, 20, seed=113, warmup_factor=1.0),
        "drafters 1.5x slower in one of every three stretches of 300 batches; targets 1/7, drafters 0.5 b/s "
        "(fast), SCV 0.05, q_hs 20, logged at 6-2",
        regime=("drafter", 1.5, 300),
    )
    # data-parallel drafters (ring all-reduce unless said): sync every 1-4 steps, token CV 0.15-0.2
    tm15 = _tm(cv=0.15)
    cases["sync-k1"] = Case(
        sc(
            "sync-k1",
            5,
            3,
            5.0,
            1 / 0.6,
            0.05,
            20,
            seed=106,
            tokens=tm15,
            sync_every=1,
            sync_s=0.25 / 0.6,
            sync_scv=0.1,
        ),
        "drafters sync every step (ring all-reduce, 0.42 s at M=2 = 25% of a step), token CV 0.15, "
        "SCV 0.05, logged at 5-3",
    )
    cases["sync-k1-flat"] = Case(
        sc(
            "sync-k1-flat",
            5,
            3,
            5.0,
            1 / 0.6,
            0.05,
            20,
            seed=111,
            tokens=tm15,
            sync_every=1,
            sync_s=0.25 / 0.6,
            sync_scv=0.1,
            sync_scaling="flat",
        ),
        "as sync-k1, but the all-reduce costs 0.42 s whatever M (flat), which the advisor's ring "
        "fit from one M cannot know",
    )
    cases["sync-k1-flat-2logs"] = Case(
        replace(cases["sync-k1-flat"].scenario, name="sync-k1-flat-2logs"),
        "sync-k1-flat, with a second log of the same job at 6-2: two drafter counts let the advisor "
        "fit how the all-reduce scales with M",
        also_at=((6, 2),),
    )
    cases["sync-k2-hs2"] = Case(
        sc("sync-k2-hs2", 4, 4, 4.0, 2.0, 0.2, 2, seed=107, tokens=tm15, sync_every=2, sync_s=0.6, sync_scv=0.2),
        "sync every 2 steps (ring, 0.6 s at M=2), token CV 0.15, SCV 0.2, q_hs 2, logged at 4-4",
    )
    # larger hosts
    tm20 = _tm(cv=0.2)
    cases["g32-sync-k4"] = Case(
        sc(
            "g32-sync-k4",
            24,
            8,
            10.0,
            2.0,
            0.1,
            20,
            seed=108,
            tokens=tm20,
            sync_every=4,
            sync_s=1.0,
            sync_scv=0.1,
            n_batches=24_000,
        ),
        "G=32: targets 0.1, drafters 0.5 b/s, sync every 4 steps (ring, 1 s at M=2), token CV 0.2, SCV 0.1, "
        "logged at 24-8",
    )
    cases["g32-scv0.1"] = Case(
        sc("g32-scv0.1", 28, 4, 10.0, 1 / 0.35, 0.1, 20, seed=109, n_batches=24_000),
        "G=32: targets 0.1, drafters 0.35 b/s, SCV 0.1, q_hs 20, logged at 28-4",
    )
    # 64 GPUs, a barrier every 16 drafter steps: at splits with starved drafters the ranks wait at
    # the barrier while q_hs fills and the targets block (issue 9)
    cases["g64-sync-k16"] = Case(
        sc(
            "g64-sync-k16",
            48,
            16,
            10.0,
            2.0,
            0.1,
            20,
            seed=114,
            tokens=tm20,
            sync_every=16,
            sync_s=2.0,
            sync_scv=0.1,
            n_batches=30_000,
        ),
        "G=64: targets 0.1, drafters 0.5 b/s, sync every 16 steps (ring, 2 s at M=2), token CV 0.2, SCV 0.1, "
        "q_hs 20, logged at 48-16",
    )
    cases["g48-bursty-hs2"] = Case(
        sc("g48-bursty-hs2", 36, 12, 10.0, 3.0, 0.5, 2, seed=110, n_batches=30_000),
        "G=48: targets 0.1, drafters 0.333 b/s, SCV 0.5, q_hs 2, logged at 36-12",
    )
    return cases


QUICK = ("ref-7x1", "bursty-hs1", "sync-k1")

# What a miss in these scenarios means. Printed only for scenarios that miss a bar.
MISS_NOTES = {
    "sync-k1-flat": (
        "The log shows one drafter count, so how the all-reduce scales with M cannot be measured. The "
        "advisor projects a ring all-reduce, whose bandwidth term scales as (M-1)/M; here the true cost is "
        "flat in M, so the sync cost at fewer drafters is under-estimated and 6-2 over-predicted. Each "
        "interval spans the projection at both extremes (flat and ring), so the measured rate lies inside, "
        "and the caveat says the scaling is assumed. Projecting midway (the geometric mean of the flat and "
        "ring costs, the minimax choice) was measured: this scenario 2.09%, but sync-k1 (ring truth) 2.89% "
        "and g32-sync-k4 (ring truth, 8 drafters logged, 2 projected) 4.03%, a new miss, so the ring stays "
        "the point estimate. Given a second log at another drafter count the fit measures the scaling and "
        "the miss goes away (sync-k1-flat-2logs)."
    ),
    "sync-k2-hs2": (
        "Every barrier plus all-reduce stops all drafters at once, and with q_hs 2 the targets block "
        "during each pause. The chain model sees only the drafters' step-time variability, not these "
        "synchronized pauses. So it over-predicts the target-bound splits whose drafters sync, the "
        "logged split among them, and can pick the wrong split. Treating a sync round as part of the "
        "drafters' service (the variability of the gaps between pulls), or calibrating on the "
        "observed split's throughput, would address it."
    ),
}


def _advise():
    # imported lazily: the advisor is heavy (pandas) and only the parent needs it once per case
    return importlib.import_module("advisor.advice").advise


def truth(scenario: Scenario, gpus: int, *, batches: int = TRUTH_BATCHES, reps: int = REPS, regime=None):
    """Measured bps of every split (N from G-1 down to 1): mean and standard error over reps."""
    splits = [(n, gpus - n) for n in range(gpus - 1, 0, -1)]
    out = np.zeros((reps, len(splits)))
    for r in range(reps):
        s_r = replace(scenario, seed=scenario.seed * 1000 + 17 + r)
        d = with_regime(draw(s_r, batches, warmup=False), regime)
        for i, (n, m) in enumerate(splits):
            res = run(s_r.split(n, m), sample=d, warmup_batches=int(WARMUP_SHARE * batches))
            out[r, i] = res.bps
    se = out.std(axis=0, ddof=1) / math.sqrt(reps) if reps > 1 else np.zeros(len(splits))
    return splits, out.mean(axis=0), se


def naive_bound(scenario: Scenario, n: int, m: int) -> float:
    tm = scenario.tokens.mean
    return min(n / scenario.target.mean_s(tm), m / scenario.drafter.mean_s(tm))


@dataclass(frozen=True)
class CaseResult:
    name: str
    what: str
    gpus: int
    logged: tuple[int, int]
    recommended: tuple[int, int]
    rows: list  # dicts per split
    advise_s: float
    truth_s: float
    error: str | None = None

    @property
    def max_abs_err_pct(self) -> float:
        return max(abs(r["err_pct"]) for r in self.rows) if self.rows else math.nan

    @property
    def mean_abs_err_pct(self) -> float:
        return float(np.mean([abs(r["err_pct"]) for r in self.rows])) if self.rows else math.nan

    @property
    def max_abs_bound_err_pct(self) -> float:
        return max(abs(r["bound_err_pct"]) for r in self.rows) if self.rows else math.nan

    @property
    def inside(self) -> int:
        """Splits whose measured rate lies inside the projection's 95% interval."""
        return sum(r["inside"] for r in self.rows)

    @property
    def best(self) -> tuple[int, int]:
        r = max(self.rows, key=lambda r: r["measured_bps"])
        return r["n_target"], r["n_drafter"]

    @property
    def rec_shortfall_pct(self) -> float:
        best = max(r["measured_bps"] for r in self.rows)
        rec = [r for r in self.rows if (r["n_target"], r["n_drafter"]) == self.recommended]
        return 100.0 * (1 - rec[0]["measured_bps"] / best) if rec else math.nan

    @property
    def passes(self) -> bool:
        return self.error is None and self.max_abs_err_pct <= ERROR_BAR_PCT and self.rec_shortfall_pct <= REC_BAR_PCT


def validate_case(
    name: str, case: Case, *, truth_batches: int = TRUTH_BATCHES, reps: int = REPS, workdir: str | None = None
) -> CaseResult:
    s = case.scenario
    gpus = s.gpus
    t0 = time.perf_counter()
    splits, meas, se = truth(s, gpus, batches=truth_batches, reps=reps, regime=case.regime)
    t_truth = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(tmp) / f"{name}.jsonl"
        write_log(path, s, rates_every_s=60.0, sample=with_regime(draw(s), case.regime) if case.regime else None)
        paths = [path]
        for i, (n, m) in enumerate(case.also_at):
            extra = Path(tmp) / f"{name}-{n}x{m}.jsonl"
            write_log(extra, replace(s.split(n, m), seed=s.seed + 1 + i), rates_every_s=60.0)
            paths.append(extra)
        t1 = time.perf_counter()
        try:
            adv = _advise()(paths)
        except Exception as exc:  # reported in the table, not hidden
            return CaseResult(
                name,
                case.what,
                gpus,
                (s.n_target, s.n_drafter),
                (0, 0),
                [],
                time.perf_counter() - t1,
                t_truth,
                f"{type(exc).__name__}: {exc}",
            )
        t_adv = time.perf_counter() - t1
    df = adv.splits
    pred = {
        (int(a), int(b)): (float(x), float(lo), float(hi))
        for a, b, x, lo, hi in zip(df["n_target"], df["n_drafter"], df["bps"], df["bps_low"], df["bps_high"])
    }
    rows = []
    for (n, m), x, e in zip(splits, meas, se):
        p, lo, hi = pred.get((n, m), (math.nan, math.nan, math.nan))
        bound = naive_bound(s, n, m)
        rows.append(
            {
                "n_target": n,
                "n_drafter": m,
                "pred_bps": p,
                "measured_bps": float(x),
                "se_bps": float(e),
                "err_pct": 100.0 * (p - x) / x,
                "bound_bps": bound,
                "bound_err_pct": 100.0 * (bound - x) / x,
                "inside": bool(lo <= x <= hi),
            }
        )
    rec = adv.recommendation.roles
    return CaseResult(
        name,
        case.what,
        gpus,
        (s.n_target, s.n_drafter),
        (int(rec["target"]), int(rec["drafter"])),
        rows,
        t_adv,
        t_truth,
    )


def _run_one(args):
    name, truth_batches, reps = args
    return validate_case(name, scenarios()[name], truth_batches=truth_batches, reps=reps)


def validate(names=None, *, jobs: int = 2, truth_batches: int = TRUTH_BATCHES, reps: int = REPS) -> list[CaseResult]:
    all_cases = scenarios()
    names = list(all_cases) if names is None else list(names)
    unknown = [n for n in names if n not in all_cases]
    if unknown:
        raise ValueError(f"names: unknown scenario(s) {unknown}; known: {list(all_cases)}")
    work = [(n, truth_batches, reps) for n in names]
    if jobs <= 1 or len(work) == 1:
        return [_run_one(w) for w in work]
    with get_context("fork").Pool(min(jobs, len(work))) as pool:
        return pool.map(_run_one, work, chunksize=1)


def markdown(results: list[CaseResult], *, command: str, elapsed_s: float, truth_batches: int, reps: int) -> str:
    out = [
        "# Validation: advisor projections vs exact simulation",
        "",
        "Regenerate with:",
        "",
        f"    {command}",
        "",
        f"Each scenario's log is written at one split (marked `L`) by `tests/synth.py` and read by "
        f"`advisor.advice.advise` alone. Every split is then measured by exact simulation "
        f"(`advisor/simulate.py`) of the TRUE generator: {reps} independent replications of "
        f"{truth_batches} batches each, with the first {int(WARMUP_SHARE * 100)}% of completions dropped. "
        "`err` is (predicted - measured) / measured. `bound err` is the same error for the naive bound "
        "min(N mu_t, M mu_d) computed from the generator's true mean rates. `R` marks the recommended "
        "split and `B` the measured best. `se` is the standard error of the measured value over the "
        "replications. `inside 95%` counts the splits whose measured rate lies inside the advisor's 95% "
        "interval; `x` after an error marks one outside.",
        "",
        f"Bars: |err| <= {ERROR_BAR_PCT:g}% on every split, and the recommended split within "
        f"{REC_BAR_PCT:g}% of the measured best. "
        f"Wall time: {elapsed_s:.0f} s.",
        "",
        "## Summary",
        "",
        "| scenario | G | logged | recommended | best | rec shortfall | max abs err | mean abs err | "
        "max abs bound err | inside 95% | pass |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.error:
            out.append(
                f"| {r.name} | {r.gpus} | {r.logged[0]}-{r.logged[1]} | advisor failed: {r.error} | | | | | | | no |"
            )
            continue
        out.append(
            f"| {r.name} | {r.gpus} | {r.logged[0]}-{r.logged[1]} | {r.recommended[0]}-{r.recommended[1]} | "
            f"{r.best[0]}-{r.best[1]} | {r.rec_shortfall_pct:.2f}% | {r.max_abs_err_pct:.2f}% | "
            f"{r.mean_abs_err_pct:.2f}% | {r.max_abs_bound_err_pct:.1f}% | {r.inside}/{len(r.rows)} | "
            f"{'yes' if r.passes else 'NO'} |"
        )
    ok = [r for r in results if not r.error]
    all_err = [abs(row["err_pct"]) for r in ok for row in r.rows]
    all_bound = [abs(row["bound_err_pct"]) for r in ok for row in r.rows]
    if all_err:
        n_miss = sum(e > ERROR_BAR_PCT for e in all_err)
        out += [
            "",
            f"Over all {len(all_err)} splits: mean abs err {np.mean(all_err):.2f}%, "
            f"90th percentile {np.percentile(all_err, 90):.2f}%, max {max(all_err):.2f}%. "
            f"{n_miss} split(s) miss the {ERROR_BAR_PCT:g}% bar. The naive bound's mean abs err "
            f"is {np.mean(all_bound):.2f}% and its max {max(all_bound):.1f}%. "
            f"{sum(r.inside for r in ok)}/{len(all_err)} measured rates lie inside their 95% interval. "
            f"{sum(r.passes for r in results)}/{len(results)} scenarios pass both bars.",
        ]
    for r in results:
        out += ["", f"## {r.name}", "", r.what[:1].upper() + r.what[1:] + ".", ""]
        if r.error:
            out.append(f"The advisor failed on this log: `{r.error}`.")
            continue
        out.append(f"advise: {r.advise_s:.1f} s; truth simulation: {r.truth_s:.1f} s.")
        out += [
            "",
            "| split | predicted b/s | measured b/s (se) | err | bound b/s | bound err | |",
            "|---|---|---|---|---|---|---|",
        ]
        best = r.best
        for row in r.rows:
            key = (row["n_target"], row["n_drafter"])
            marks = "".join(
                m for m, hit in (("L", key == r.logged), ("R", key == r.recommended), ("B", key == best)) if hit
            )
            flag = (" **miss**" if abs(row["err_pct"]) > ERROR_BAR_PCT else "") + ("" if row["inside"] else " x")
            out.append(
                f"| {key[0]}-{key[1]} | {row['pred_bps']:.4f} | {row['measured_bps']:.4f} "
                f"({row['se_bps']:.4f}) | {row['err_pct']:+.2f}%{flag} | {row['bound_bps']:.4f} | "
                f"{row['bound_err_pct']:+.1f}% | {marks} |"
            )
        if not r.passes and r.name in MISS_NOTES:
            out += ["", "Why it misses: " + MISS_NOTES[r.name]]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="scenario names (default: all)")
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}, 1 replication of 20000")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--batches", type=int, default=TRUTH_BATCHES, help="batches per truth replication")
    ap.add_argument("--reps", type=int, default=REPS)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "VALIDATION.md"))
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    names = a.only or (list(QUICK) if a.quick else None)
    batches, reps = (20_000, 1) if a.quick else (a.batches, a.reps)
    t0 = time.perf_counter()
    results = validate(names, jobs=a.jobs, truth_batches=batches, reps=reps)
    elapsed = time.perf_counter() - t0
    cmd = "python3 benchmarks/validate.py" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    md = markdown(results, command=cmd.strip(), elapsed_s=elapsed, truth_batches=batches, reps=reps)
    if not a.no_write:
        Path(a.out).write_text(md)
    for r in results:
        status = (
            "ERROR " + r.error
            if r.error
            else (
                f"max|err| {r.max_abs_err_pct:5.2f}%  mean {r.mean_abs_err_pct:5.2f}%  bound max "
                f"{r.max_abs_bound_err_pct:5.1f}%"
                f"  inside {r.inside}/{len(r.rows)}"
                f"  rec {r.recommended} best {r.best} shortfall {r.rec_shortfall_pct:.2f}%  "
                f"{'pass' if r.passes else 'MISS'}"
            )
        )
        print(f"{r.name:20s} {status}")
    print(f"{elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
