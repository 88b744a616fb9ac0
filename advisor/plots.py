"""Pictures of an :class:`~advisor.advice.Advice`: one function per panel, and one figure of all four.

Each panel function takes the advice and an optional matplotlib ``ax`` and returns the axes it
drew on (``ax=None`` draws on the current pyplot axes), so they compose into a notebook's own
figures. ``plot_advice`` builds the 2x2 figure that ``dflash-advise plot`` writes:

1. ``plot_splits``: projected tokens/s of every split N + M = G with its 95% interval, beside
   the naive bound ``min(capacities) x tokens per batch``; the observed split (with its measured
   rate) and the recommended split are marked. Where the projection sits below the bound,
   finite queues and variable step times are costing throughput.
2. ``plot_efficiency``: efficiency (X / max capacity) and GPU utilisation per split with the
   CI gate's threshold.
3. ``plot_rates``: completions per role over time. From ``step`` events: completions counted in
   time bins of a round width (about 80 bins over the run) divided by the bin's width; without
   steps, the ``rates`` snapshots' ``bps_<role>``. The pool capacities the fit found (from busy
   time) are drawn over the steady part; the warm-up that was dropped is shaded.
4. ``plot_queue``: the depth of the queue feeding the consumer (q_hs) over time, with its
   time-weighted distribution over the steady part in an inset. From ``rates`` snapshots; a
   log with steps but no snapshots gets the exact depth reconstructed from its step events
   (a target's ``t`` is when its batch entered q_hs, a drafter's ``t - busy`` when it left),
   and the panel says so.

matplotlib is imported inside the functions: importing this module costs nothing. Files are
written through a bare ``Figure`` (Agg canvas), never through pyplot's global state, so
repeated calls (``--follow``, tests) leak no figures.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from .advice import Advice

ROLE_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")
PROJECTED = "tab:blue"
RECOMMENDED = "tab:green"
BOUND = "0.80"
WARMUP = "0.88"
TARGET_BINS = 80                      # time bins over a run for completion rates
NICE_BIN_S = (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
MAX_ANNOTATED_SPLITS = 10             # beyond this many splits, value labels would collide
MAX_DRAWN_EVENTS = 20000              # queue-depth points drawn per panel


def _axes(ax: Any) -> Any:
    if ax is None:
        import matplotlib.pyplot as plt
        ax = plt.gca()
    return ax


def _split_keys(adv: Advice) -> tuple[list[tuple[int, int]], list[str]]:
    """(N, M) per row and tick labels that flag the observed and recommended splits."""
    p, c = adv.roles
    rec = (adv.recommendation.roles[p], adv.recommendation.roles[c])
    keys, labels = [], []
    for _, r in adv.splits.iterrows():
        k = (int(r[f"n_{p}"]), int(r[f"n_{c}"]))
        tags = (["obs"] if bool(r["observed"]) else []) + (["rec"] if k == rec else [])
        keys.append(k)
        labels.append(f"{k[0]}-{k[1]}" + (f"\n{'+'.join(tags)}" if tags else ""))
    return keys, labels


def _tokens_per_batch(adv: Advice) -> np.ndarray:
    df = adv.splits
    bps = df["bps"].to_numpy(float)
    tok = df["tok_s"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(bps > 0, tok / bps, np.nan)
    return np.where(np.isfinite(per), per, adv.fit.tokens_mean)


def _time_axis(duration_s: float) -> tuple[float, str]:
    """Divisor and unit for a time axis of this length."""
    if duration_s > 3 * 3600:
        return 3600.0, "h"
    if duration_s > 600:
        return 60.0, "min"
    return 1.0, "s"


def _bin_width_s(duration_s: float) -> float:
    want = max(duration_s / TARGET_BINS, 1e-9)
    for w in NICE_BIN_S:
        if w >= want:
            return float(w)
    return float(NICE_BIN_S[-1])


def _shade_warmup(ax: Any, adv: Advice, scale: float) -> None:
    start = adv.observed.steady_from_s
    if start and start > 0:
        ax.axvspan(0.0, start / scale, color=WARMUP, alpha=0.6, lw=0, zorder=0,
                   label=f"warm-up, dropped (first {start / scale:.1f} {_time_axis_unit(scale)})")


def _time_axis_unit(scale: float) -> str:
    return {3600.0: "h", 60.0: "min"}.get(scale, "s")


def plot_splits(adv: Advice, ax: Any = None) -> Any:
    """Projected tokens/s per split (95% interval), the naive bound beside it, observed and recommended marked."""
    ax = _axes(ax)
    df = adv.splits
    keys, labels = _split_keys(adv)
    p, c = adv.roles
    rec = (adv.recommendation.roles[p], adv.recommendation.roles[c])
    x = np.arange(len(df))
    per_batch = _tokens_per_batch(adv)
    tok = df["tok_s"].to_numpy(float) / 1e3
    low = df["bps_low"].to_numpy(float) * per_batch / 1e3
    high = df["bps_high"].to_numpy(float) * per_batch / 1e3
    bound = df["bound_bps"].to_numpy(float) * per_batch / 1e3
    colours = [RECOMMENDED if k == rec else PROJECTED for k in keys]
    width = 0.4
    ax.bar(x - width / 2, tok, width, color=colours, zorder=2,
           yerr=np.vstack([np.clip(tok - low, 0, None), np.clip(high - tok, 0, None)]),
           error_kw={"ecolor": "0.15", "capsize": 3, "lw": 1})
    ax.bar(x + width / 2, bound, width, color=BOUND, hatch="//", edgecolor="0.55", lw=0.5, zorder=2)
    for i in np.flatnonzero(df["observed"].to_numpy(bool)):
        ax.bar(x[i] - width / 2, tok[i], width, fill=False, edgecolor="black", lw=1.8, zorder=3)
    ob = adv.observed
    obs_rows = [i for i, k in enumerate(keys) if k == (ob.roles[p], ob.roles[c])]
    if obs_rows:
        i = obs_rows[0]
        ax.plot([x[i] - width / 2], [ob.tok_s / 1e3], marker="D", ms=7, color="black", ls="none", zorder=4,
                label=f"observed split, measured {ob.tok_s / 1e3:.1f}K")
    if len(df) <= MAX_ANNOTATED_SPLITS:
        for xi, v, h in zip(x, tok, high):
            if math.isfinite(v):
                ax.annotate(f"{v:.1f}", (xi - width / 2, h), xytext=(0, 3), textcoords="offset points",
                            ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, labels)
    ax.set_xlabel(f"split ({p}-{c} GPUs)")
    ax.set_ylabel("tokens/s (thousands)")
    top = np.nanmax(np.concatenate([high, bound, [ob.tok_s / 1e3]]))
    # headroom for the legend, put on the side away from the tallest bar
    ax.set_ylim(0, top * 1.35 if math.isfinite(top) and top > 0 else 1)
    tallest = int(np.nanargmax(high)) if np.isfinite(high).any() else 0
    ax.grid(axis="y", alpha=0.3, zorder=0)
    from matplotlib.patches import Patch
    # the projected bars have two colours, so the legend is built by hand
    handles = [Patch(color=PROJECTED, label="projected, with 95% interval"),
               Patch(color=RECOMMENDED, label="projected, recommended split"),
               Patch(facecolor=BOUND, hatch="//", edgecolor="0.55", label="naive bound: min capacity x tokens/batch"),
               *ax.get_legend_handles_labels()[0]]
    ax.legend(handles=handles, loc="upper right" if tallest < len(df) / 2 else "upper left", fontsize=8,
              framealpha=0.9)
    ax.set_title("Projected throughput per split")
    return ax


def plot_efficiency(adv: Advice, ax: Any = None, min_efficiency: float = 0.9) -> Any:
    """Efficiency (X / max capacity) and GPU utilisation per split, with the gate's threshold."""
    ax = _axes(ax)
    df = adv.splits
    _, labels = _split_keys(adv)
    x = np.arange(len(df))
    width = 0.4
    eff = df["efficiency"].to_numpy(float) * 100
    util = df["gpu_util"].to_numpy(float) * 100
    ax.bar(x - width / 2, eff, width, color="tab:purple", label="efficiency (X / max capacity)", zorder=2)
    ax.bar(x + width / 2, util, width, color="tab:cyan", label="GPU utilisation", zorder=2)
    ax.axhline(min_efficiency * 100, color="tab:red", ls="--", lw=1.3, zorder=3,
               label=f"gate {min_efficiency:.0%}")
    if len(df) <= MAX_ANNOTATED_SPLITS:
        for xi, v in zip(x, eff):
            if math.isfinite(v):
                ax.annotate(f"{v:.0f}", (xi - width / 2, v), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, labels)
    p, c = adv.roles
    ax.set_xlabel(f"split ({p}-{c} GPUs)")
    ax.set_ylabel("percent")
    ax.set_ylim(0, 116)
    ax.set_yticks(range(0, 101, 20))
    ax.grid(axis="y", alpha=0.3, zorder=0)
    # one row in the band above 100%, so it never covers a bar
    ax.legend(loc="upper center", fontsize=8, framealpha=0.9, ncols=3)
    ax.set_title("Efficiency and GPU utilisation per split")
    return ax


def _completion_rates(steps: pd.DataFrame, role: str, edges: np.ndarray, end_s: float) -> np.ndarray:
    t = steps.loc[steps["role"] == role, "t"].to_numpy(float)
    counts, _ = np.histogram(t, bins=edges)
    # the last bin may stick out past the log's end: divide by the time it covers
    covered = np.clip(np.minimum(edges[1:], end_s) - edges[:-1], 1e-9, None)
    return counts / covered


def plot_rates(adv: Advice, ax: Any = None) -> Any:
    """Completions per role over time (batches/s), fitted pool capacities over the steady part, warm-up shaded."""
    ax = _axes(ax)
    if not adv.logs:
        ax.text(0.5, 0.5, "no log: advice from bare numbers", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        ax.set_title("Completion rates over time")
        return ax
    log = adv.logs[0]
    end_s = max(log.duration_s, 1e-9)
    scale, unit = _time_axis(end_s)
    _shade_warmup(ax, adv, scale)
    roles = list(log.header.roles)
    colours = {r: ROLE_COLOURS[i % len(ROLE_COLOURS)] for i, r in enumerate(roles)}
    if log.has_steps:
        width = _bin_width_s(end_s)
        edges = np.arange(0.0, end_s + width, width)
        if len(edges) < 2:
            edges = np.array([0.0, end_s])
        for r in roles:
            rate = _completion_rates(log.steps, r, edges, end_s)
            ax.stairs(rate, edges / scale, baseline=None, color=colours[r], lw=1.4,
                      label=f"{r}s ({log.header.roles[r]}): completions")
        basis = f"from step events, {width:g} s bins"
    else:
        rt = log.rates
        for r in roles:
            col = f"bps_{r}"
            if col in rt and rt[col].notna().any():
                ax.step(rt["t"] / scale, rt[col], where="pre", color=colours[r], lw=1.4,
                        label=f"{r}s ({log.header.roles[r]}): completions")
            cap = f"cap_bps_{r}"
            if cap in rt and rt[cap].notna().any():
                ax.step(rt["t"] / scale, rt[cap], where="pre", color=colours[r], lw=0.9, ls=":",
                        label=f"{r}s: logged capacity")
        basis = "from 'rates' snapshots"
    start = adv.observed.steady_from_s
    for r, cap in adv.observed.capacities_bps.items():
        if cap and math.isfinite(cap):
            ax.hlines(cap, start / scale, end_s / scale, colors=colours.get(r, "0.3"), linestyles="--", lw=1.1,
                      label=f"{r} capacity (fit) {cap:.3g} b/s")
    ax.set_xlim(0, end_s / scale)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"time since run start ({unit})")
    ax.set_ylabel("batches/s (whole pool)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    more = f" (first of {len(adv.logs)} logs)" if len(adv.logs) > 1 else ""
    ax.set_title(f"Completion rates over time, {basis}{more}")
    return ax


def _queue_series(log: Any, name: str, cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, str] | None:
    """(t_s, depth, weight_s, source) of the queue over time, or None when nothing measures it.

    ``weight_s`` is how long each depth value holds, for the time-weighted distribution.
    """
    col = f"q_{name}"
    rt = log.rates
    if len(rt) and col in rt and rt[col].notna().any():
        r = rt.dropna(subset=[col])
        w = r["window"].fillna(1.0).to_numpy(float) if "window" in r else np.ones(len(r))
        return r["t"].to_numpy(float), r[col].to_numpy(float), w, "rates"
    if not log.has_steps:
        return None
    st = log.steps
    prod, cons = log.header.producer, log.header.consumer
    ins = np.sort(st.loc[st["role"] == prod, "t"].to_numpy(float))
    done = st[st["role"] == cons]
    outs = np.sort((done["t"] - done["busy"]).to_numpy(float))
    if not len(ins) or not len(done):
        return None
    # a pull is logged only when its step completes: after some drafter's last completion its
    # next pull is unknown, so the depth is exact only up to the earliest such time
    exact_to = float(done.groupby("worker")["t"].max().min())
    ins, outs = ins[ins < exact_to], outs[outs < exact_to]
    # at equal times the pull goes first: a blocked target deposits the moment a slot frees
    times = np.concatenate([outs, ins])
    delta = np.concatenate([-np.ones(len(outs)), np.ones(len(ins))])
    order = np.argsort(times, kind="stable")
    times, depth = times[order], np.clip(np.cumsum(delta[order]), 0, cap)
    hold = np.diff(np.append(times, exact_to))
    return times, depth, np.clip(hold, 0, None), "steps"


def plot_queue(adv: Advice, ax: Any = None) -> Any:
    """q_hs depth over time with its steady-state distribution in an inset."""
    ax = _axes(ax)
    ax.set_title("Hidden-state queue occupancy")
    if not adv.logs:
        ax.text(0.5, 0.5, "no log: advice from bare numbers", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return ax
    log = adv.logs[0]
    spec = log.header.queue_feeding(log.header.consumer)
    if spec is None:
        ax.text(0.5, 0.5, f"the log's header names no queue feeding the {log.header.consumer}s",
                ha="center", va="center", transform=ax.transAxes, wrap=True)
        return ax
    name, cap = spec.name, spec.cap
    ax.set_title(f"q_{name} occupancy (capacity {cap})")
    series = _queue_series(log, name, cap)
    end_s = max(log.duration_s, 1e-9)
    scale, unit = _time_axis(end_s)
    if series is None:
        ax.text(0.5, 0.5, f"no 'rates' snapshots (and no step events) in\n{Path(log.path).name}:\n"
                          f"q_{name} occupancy was not logged", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return ax
    t, depth, weight, source = series
    _shade_warmup(ax, adv, scale)
    if source == "rates":
        ax.step(t / scale, depth, where="pre", color="tab:red", lw=1.3, label=f"q_{name} depth ('rates')")
    else:
        # one point per event is millions on a long run: draw the step function sampled on a
        # fine grid (the distribution below still uses every event)
        tt, dd = t, depth
        if len(t) > MAX_DRAWN_EVENTS:
            tt = np.linspace(t[0], t[-1], MAX_DRAWN_EVENTS)
            dd = depth[np.searchsorted(t, tt, side="right") - 1]
        ax.step(tt / scale, dd, where="post", color="tab:red", lw=0.8,
                label=f"q_{name} depth, reconstructed from steps")
        ax.set_title(f"q_{name} occupancy (capacity {cap})\nno 'rates' snapshots in this log: "
                     f"depth reconstructed from step events", fontsize=11)
    ax.axhline(cap, color="0.3", ls=":", lw=1, label=f"capacity {cap}")
    ax.set_xlim(0, end_s / scale)
    ax.set_ylim(-0.02 * cap, cap * 1.08 if cap > 0 else 1)
    ax.set_xlabel(f"time since run start ({unit})")
    ax.set_ylabel(f"q_{name} depth (batches)")
    ax.grid(alpha=0.3)
    steady = t >= adv.observed.steady_from_s
    mostly_full = True
    if steady.any() and weight[steady].sum() > 0:
        d, w = depth[steady], weight[steady]
        mean = float(np.average(d, weights=w))
        full = float(np.average(d >= cap - 0.5, weights=w)) if cap > 0 else float("nan")
        mostly_full = mean > cap / 2
        # put the inset where the line is not: a mostly full queue leaves the lower half empty
        box = [0.58, 0.1, 0.38, 0.42] if mostly_full else [0.58, 0.5, 0.38, 0.42]
        ins = ax.inset_axes(box)
        edges = np.arange(-0.5, cap + 1.5, 1.0) if cap <= 60 else np.linspace(-0.5, cap + 0.5, 31)
        hist, _ = np.histogram(d, bins=edges, weights=w)
        share = 100 * hist / hist.sum()
        ins.barh((edges[:-1] + edges[1:]) / 2, share, height=np.diff(edges) * 0.9, color="tab:red", alpha=0.7)
        ins.set_ylim(edges[0], edges[-1])
        ins.set_xlabel("% of steady time", fontsize=7)
        ins.set_ylabel("depth", fontsize=7)
        ins.tick_params(labelsize=7)
        ins.set_title(f"steady state: mean {mean:.1f}/{cap}, full {full:.0%}", fontsize=7.5)
        ins.patch.set_alpha(0.92)
    ax.legend(loc="lower left" if mostly_full else "upper left", fontsize=8, framealpha=0.9)
    return ax


def plot_advice(adv: Advice, path: str | Path, min_efficiency: float = 0.9) -> Any:
    """The four panels in one 2x2 figure, saved to ``path`` (format from its suffix). Returns the Figure."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 9.5), layout="constrained", dpi=110)
    axes = fig.subplots(2, 2)
    plot_splits(adv, axes[0, 0])
    plot_efficiency(adv, axes[0, 1], min_efficiency=min_efficiency)
    plot_rates(adv, axes[1, 0])
    plot_queue(adv, axes[1, 1])
    p, c = adv.roles
    rec = adv.recommendation
    verdict = {"stay": "stay with", "switch": "switch to", "best": "best split"}.get(rec.verdict, rec.verdict)
    ob = adv.observed
    fig.suptitle(f"{adv.run}: {adv.gpus} GPUs, observed {ob.roles[p]}-{ob.roles[c]} at {ob.bps:.3g} b/s "
                 f"({ob.tok_s / 1e3:.1f}K tok/s), bottleneck {ob.bottleneck}; advice: {verdict} "
                 f"{rec.roles[p]}-{rec.roles[c]}", fontsize=12)
    fig.savefig(path)
    return fig
