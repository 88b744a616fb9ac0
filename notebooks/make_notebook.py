"""Write notebooks/compare_splits.ipynb from the cells below (no outputs), so the notebook is reproducible.

    python3 notebooks/make_notebook.py          # rewrites notebooks/compare_splits.ipynb

Edit the cells here, never the .ipynb by hand. tests/test_notebooks.py executes every notebook
on a fresh kernel.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
OUT = HERE / "compare_splits.ipynb"

CELLS: list[tuple[str, str]] = [
    (
        "md",
        """# Comparing GPU splits: the reference case, and what the model adds

An asynchronous drafter-training pipeline runs N target GPUs (frozen LLM forward, emitting
hidden states) that feed M drafter GPUs (drafter training) through a bounded queue `q_hs`.
Choosing N + M = G decides the run's speed for days. This notebook

1. redoes the expert's reading of the reference run (7 targets + 1 drafter on 8 GPUs) by hand,
2. puts the advisor's table beside it,
3. then shows what the queueing model adds to that arithmetic: queue depth, step-time
   variability, drafter weight-sync cost and the cost of a restart,
4. and, where the checkout holds them, reads the logs of real H200 runs.

Everything runs from the fixtures in a few seconds.""",
    ),
    (
        "code",
        """from pathlib import Path
import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def repo_root(start: Path | None = None) -> Path:
    \"\"\"The checkout's root: the first folder, walking up from here, that holds fixtures/.\"\"\"
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "fixtures").is_dir() and (folder / "advisor").is_dir():
            return folder
    raise FileNotFoundError(f"no fixtures/ folder in {here} or above it")


ROOT = repo_root()
try:
    import advisor  # noqa: F401  (installed with pip install -e .)
except ImportError:
    sys.path.insert(0, str(ROOT))

from advisor.advice import advise, advise_numbers
from advisor.model.chain import chain
from advisor.present.plots import plot_efficiency, plot_queue, plot_rates, plot_splits
from advisor.present.text import render
from advisor.ingest.schema import LogError

REF = ROOT / "fixtures" / "reference-7x1.jsonl"
pd.set_option("display.precision", 3)
pd.set_option("display.width", 140)
print(REF.relative_to(ROOT))""",
    ),
    (
        "md",
        """## 1. The expert's arithmetic

The reference run's progress line said: targets 0.92 batches/s (all 7 together), drafter
0.86 b/s, `q_hs` 20/20, every prefetch queue 50/50. With conservation (behind a full queue
everyone completes at the same pace) the 0.92 can only be the targets' *capacity*. The reading:""",
    ),
    (
        "code",
        """tgt_7, dft_1 = 0.92, 0.86            # b/s: 7 targets together, 1 drafter
tgt_6 = 6 / 7 * tgt_7                 # one target fewer
dft_2 = 2 * dft_1                     # two drafters, perfect scaling
x_71 = min(tgt_7, dft_1)
x_62 = min(tgt_6, dft_2)
print(f"7-1: min({tgt_7}, {dft_1}) = {x_71:.3f} b/s, bottleneck drafter, "
      f"pipeline efficiency {dft_1 / tgt_7:.0%}")
print(f"6-2: min({tgt_6:.3f}, {dft_2:.2f}) = {x_62:.3f} b/s, bottleneck target")
for per_drafter in (1.0, 0.6):
    cap_2 = 2 * per_drafter * dft_1
    x = min(tgt_6, cap_2)
    print(f"  each of two drafters at {per_drafter:.0%} of one: they take up to {cap_2:.2f} b/s, "
          f"6-2 gives {x:.3f} b/s -> {'7-1' if x_71 > x else '6-2'} wins")""",
    ),
    (
        "md",
        """## 2. The advisor on the same run

The fixture is a simulated log of the reference case with step events (busy time per batch per
worker) as well as the periodic `rates` snapshots. The advisor drops the warm-up, fits each
role's capacity from *busy time* (not from completions, which a blocked target cannot show),
and projects every split with a finite-queue model.""",
    ),
    (
        "code",
        """adv = advise(REF)
print(render(adv))""",
    ),
    (
        "code",
        """cols = ["n_target", "n_drafter", "bps", "bps_low", "bps_high", "tok_s", "bound_bps",
        "efficiency", "gpu_util", "bottleneck", "eta_s", "observed"]
table = adv.splits[cols].assign(eta_d=adv.splits["eta_s"] / 86400).drop(columns="eta_s")
table""",
    ),
    (
        "md",
        """The expert's numbers and the advisor's agree for 7-1 and 6-2. What the advisor adds so far:
intervals on every projection, tokens/s (batches are not all the same size), the ETA of the
whole job per split, and the warm-up it dropped.""",
    ),
    (
        "code",
        """row = adv.splits.set_index(["n_target", "n_drafter"])
pd.DataFrame({
    "expert b/s": [x_71, x_62],
    "advisor b/s": [row.loc[(7, 1), "bps"], row.loc[(6, 2), "bps"]],
    "advisor 95% interval": [f"{row.loc[k, 'bps_low']:.3f}-{row.loc[k, 'bps_high']:.3f}" for k in [(7, 1), (6, 2)]],
    "advisor bottleneck": [row.loc[(7, 1), "bottleneck"], row.loc[(6, 2), "bottleneck"]],
}, index=["7-1", "6-2"])""",
    ),
    (
        "code",
        """fig, axes = plt.subplots(1, 2, figsize=(14, 4.8), layout="constrained")
plot_splits(adv, ax=axes[0])
plot_efficiency(adv, ax=axes[1], min_efficiency=0.9)
plt.show()""",
    ),
    (
        "md",
        """## 3. Reading the log itself

Targets and drafter complete at the same pace (the left panel), while the targets' capacity,
from their busy time, is higher: they spend the difference blocked on a full `q_hs` (right
panel, full most of the time). That is the signature of a drafter-bound pipeline. The grey
band is the warm-up the advisor dropped before fitting.""",
    ),
    (
        "code",
        """ob = adv.observed
print(f"steady from t = {ob.steady_from_s:.0f} s; q_hs mean depth {ob.hs_mean_depth:.1f}, "
      f"full {ob.hs_full_share:.0%} of the time")
print("capacities (b/s):", {k: round(v, 3) for k, v in ob.capacities_bps.items()})
fig, axes = plt.subplots(1, 2, figsize=(14, 4.5), layout="constrained")
plot_rates(adv, ax=axes[0])
plot_queue(adv, ax=axes[1])
plt.show()""",
    ),
    (
        "md",
        """## 4. Queue depth

Would a deeper `q_hs` speed the run up? `advise(..., hs_cap=...)` projects every split at
another depth. A buffer absorbs bursts; it cannot lift the mean rate above the slower side's
capacity. With the reference run's smooth GPU step times (busy-time SCV about 0.03) even a
queue of one batch loses little, and beyond a few slots nothing is left to gain.""",
    ),
    (
        "code",
        """depths = [0, 1, 2, 5, 10, 20, 40]
rows = []
for depth in depths:
    a = advise(REF, hs_cap=depth).splits.set_index(["n_target", "n_drafter"])
    rows.append({"q_hs depth": depth, "7-1 b/s": a.loc[(7, 1), "bps"], "bound b/s": a.loc[(7, 1), "bound_bps"],
                 "loss vs bound %": round(100 * (1 - a.loc[(7, 1), "bps"] / a.loc[(7, 1), "bound_bps"]), 3),
                 "6-2 b/s": a.loc[(6, 2), "bps"]})
by_depth = pd.DataFrame(rows).set_index("q_hs depth")
by_depth""",
    ),
    (
        "md",
        """## 5. Variability

The naive bound `min(capacities)` holds only for perfectly regular service. The model
(`advisor.model.chain.chain`) is a birth-death chain over the batches between the two pools, evaluated at
an effective buffer that shrinks as service gets burstier (squared coefficient of variation,
SCV, of step times). Below: the loss against the bound for the reference 7-1 (capacities 7%
apart) and for a perfectly balanced 4-4 at a few queue depths. Balanced pipelines with bursty
steps are where buffering matters; GPU steps (SCV 0.01-0.1) rarely are.""",
    ),
    (
        "code",
        """mu_t, mu_d = adv.fit.producer.mu_bps, adv.fit.consumer.mu_bps
scvs = np.geomspace(0.01, 2.0, 25)
fig, axes = plt.subplots(1, 2, figsize=(14, 4.2), layout="constrained", sharey=True)
for ax, (n, m, mp, mc, title) in zip(axes, [(7, 1, mu_t, mu_d, "reference 7-1 (fitted rates)"),
                                            (4, 4, 1.0, 1.0, "balanced 4-4 (equal capacities)")]):
    bound = min(n * mp, m * mc)
    for depth in (1, 2, 5, 20):
        loss = [100 * (1 - chain(n, m, mp, mc, depth, s, s).x_bps / bound) for s in scvs]
        ax.plot(scvs, loss, marker=".", label=f"q_hs depth {depth}")
    ax.axvline(adv.fit.consumer.busy_scv, color="0.5", ls=":", label="reference run's SCV")
    ax.set_xscale("log")
    ax.set_xlabel("step-time SCV (both pools)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
axes[0].set_ylabel("throughput lost vs min(capacities), %")
axes[1].legend()
plt.show()""",
    ),
    (
        "md",
        """## 6. Drafter scaling: weight sync

Two or more drafters train one model data-parallel: every `sync_every` steps they wait for the
slowest rank and all-reduce. The reference log has one drafter, so it cannot measure that cost;
the advisor says so and reports how far per-drafter scaling could fall before the verdict
changes (the expert's "even at 60%"):""",
    ),
    (
        "code",
        """for line in adv.recommendation.holds_unless:
    print("-", line)""",
    ),
    (
        "md",
        """The reference case is target-bound at 6-2 whatever the drafters do, so sync cannot matter
there. It does when targets are cheap: take a 2:1 case (target step 0.07 s,
drafter step 0.035 s) on 8 GPUs, judged at 5-3, and vary the all-reduce time per sync with a
sync after every step (`advise_numbers(..., sync_every=1, sync_s=...)`, the `what-if` path).
Even at zero all-reduce cost, waiting for the slowest of M ranks costs something; as the
all-reduce grows, per-rank scaling falls and the best split moves towards more drafters. The
"highest projected" column is the split with the most projected b/s; the advice beside it says
what to do with its odds (from bare numbers on real GPUs, how per-GPU rates move with the split
is carried as a prior, so a small lead is a modest `p_best`; bare numbers give no job to weigh a
probe against, so the advice names an action rather than "cannot-tell").""",
    ),
    (
        "code",
        """sync_costs = [0.0, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08]   # seconds
rows, curves = [], {}
for sync_s in sync_costs:
    a = advise_numbers({"target": 5, "drafter": 3}, {"target": 5 / 0.07, "drafter": 3 / 0.035},
                       sync_every=1, sync_s=sync_s)
    s = a.splits.set_index(["n_target", "n_drafter"])
    top = s["bps"].idxmax()   # the highest projected b/s; the advice itself may not be able to choose it
    rec = a.recommendation
    rows.append({"all-reduce ms (at M=3)": 1e3 * sync_s, "highest projected": f"{top[0]}-{top[1]}",
                 "its b/s": s["bps"].max(), "5-3 b/s": s.loc[(5, 3), "bps"],
                 "advice at 5-3": f"{rec.verdict} {rec.roles['target']}-{rec.roles['drafter']}",
                 "p_best": round(rec.p_best, 2)})
    for k, v in s["bps"].items():
        curves.setdefault(f"{k[0]}-{k[1]}", []).append(v)
display(pd.DataFrame(rows).set_index("all-reduce ms (at M=3)"))
fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
for split in ("6-2", "5-3", "4-4", "3-5"):
    ax.plot(sync_costs, curves[split], marker="o", label=split)
ax.set_xlabel("all-reduce seconds per sync, measured at 3 drafters")
ax.set_ylabel("projected batches/s")
ax.set_title("2:1 target:drafter step times, 8 GPUs, sync every step")
ax.grid(alpha=0.3)
ax.legend(title="split (target-drafter)")
plt.show()""",
    ),
    (
        "md",
        """## 7. Restart cost

A split change means stopping the run, reloading and warming up again: the advisor switches only
if the saving beats the restart cost (`restart_cost_h`) by more than what the model resolves (2%
of the remaining time: the expected regret of staying). Where `roles` judges another split than
the log runs and the running one is the best, reaching the best takes no restart. Judging 6-2
against the reference log, which runs 7-1, therefore weighs a restart against 6-2, not 7-1: 7-1
is about 8% faster and keeping it costs nothing, so
the advice keeps 7-1 at every restart cost (`KEEP 7-1 (the split the log runs), not 6-2`; the
rule is `switch`, from the judged split), and the dearer the restart, the more moving to 6-2
would lose.""",
    ),
    (
        "code",
        """rows = []
for hours in (0, 1, 4, 8, 12, 24):
    d = advise(REF, roles={"target": 6, "drafter": 2}, restart_cost_h=hours).decision
    rows.append({"restart cost h": hours, "verdict": d.verdict.value, "rule": d.rule, "split": d.recommended,
                 "7-1 sooner h": None if d.eta_gain_s is None else d.eta_gain_s / 3600,
                 "regret of moving to 6-2 %": d.odds.of("6-2").regret_pct})
pd.DataFrame(rows).set_index("restart cost h")""",
    ),
    (
        "md",
        """## 8. Real runs on an H200

`fixtures/h200-*.jsonl` are logs of the real trainer (`dflash-train --device cuda`) on one H200,
all workers sharing the GPU: a 1.27B Qwen3-shaped target and a 2-layer block drafter at a 32768
token budget. Both are target-bound; two targets on one GPU only time-share it.""",
    ),
    (
        "code",
        """gpu_logs = [ROOT / "fixtures" / n for n in ("h200-1x1.jsonl", "h200-2x1.jsonl")]
gpu_logs = [p for p in gpu_logs if p.exists()]
for path in gpu_logs:
    a = advise(path)
    print(render(a).split("\\n\\n")[0], "\\n")
if gpu_logs:
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.6), layout="constrained")
    last = advise(gpu_logs[-1])
    plot_splits(last, ax=axes[0])
    plot_rates(last, ax=axes[1])
    plt.show()""",
    ),
    (
        "md",
        """The token-budget what-if against the GPU: the step-time line fitted on one budget,
projected to half and double, then the same runs measured (`h200-1x1-tb*.jsonl`). Batches of one
log barely vary in size, so the line is extrapolated, and the advisor says so.""",
    ),
    (
        "code",
        """rows = []
one = ROOT / "fixtures" / "h200-1x1.jsonl"
for tb in (16384, 65536):
    measured = ROOT / "fixtures" / f"h200-1x1-tb{tb}.jsonl"
    if not (one.exists() and measured.exists()):
        continue
    pred = advise(one, token_budget=tb).splits.iloc[0]["bps"]
    meas = advise(measured).observed.bps
    rows.append({"token budget": tb, "projected b/s": pred, "measured b/s": meas,
                 "error %": 100 * (pred / meas - 1)})
pd.DataFrame(rows).round(3)""",
    ),
    (
        "md",
        """## Summary

- The expert's arithmetic and the advisor agree on the reference case: 7-1, drafter-bound,
  efficiency about 93%, and 6-2 target-bound whatever two drafters could do.
- Capacities come from busy time; the warm-up is dropped; every projection has an interval.
- Queue depth matters only with bursty steps or balanced pools; at the reference SCV a few
  slots already reach the bound.
- Weight sync among drafters can move the best split; with one drafter observed its cost is
  unknown, and the advisor states how far scaling may fall before its verdict changes.
- A faster split pays only if its ETA saving beats the restart.""",
    ),
]


def build() -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for i, (kind, src) in enumerate(CELLS):
        cell = new_markdown_cell(src) if kind == "md" else new_code_cell(src)
        cell["id"] = f"cell-{i:02d}"  # stable ids: regenerating gives the same file
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def main() -> None:
    nbformat.write(build(), OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
