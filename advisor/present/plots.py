"""Pictures of an :class:`~advisor.advice.Advice`: one function per panel, and one figure of all four.

Each panel function takes the advice and an optional matplotlib ``ax`` and returns the axes it
drew on (``ax=None`` draws on the current pyplot axes), so they compose into a notebook's own
figures. ``plot_advice(adv)`` returns the 2x2 ``Figure`` that ``dflash-advise plot`` writes
(``plot_advice(adv, path)`` also saves it):

1. ``plot_splits``: projected tokens/s of every split N + M = G with its 95% interval, beside
   the naive bound ``min(capacities) x tokens per batch``; the observed split (with its measured
   rate) and the recommended split are marked. Where the projection sits below the bound,
   finite queues and variable step times are costing throughput. An interval whose upper end is
   open (a capacity known only from below) has no whisker above its projection but an arrow up.
2. ``plot_efficiency``: efficiency (X / max capacity) and GPU utilisation per split with the
   CI gate's threshold; every mark on its percentage axis reads 0-100% (the recommended split's
   star on its efficiency bar at the projected efficiency, the observed diamond at its measured
   efficiency).
3. ``plot_rates``: completions per role over time. From ``step`` events: completions counted in
   time bins of a round width (about 80 bins over the run, never more than MAX_TIME_BINS
   whatever the log's times) divided by the bin's width; without steps, the ``rates``
   snapshots' ``bps_<role>``. The pool capacities the fit found (from busy time) are drawn over
   the steady part; the warm-up that was dropped is shaded.
4. ``plot_queue``: the depth of the queue feeding the consumer (q_hs) over time, with its
   time-weighted distribution over the steady part in an inset. From ``rates`` snapshots; a
   log with steps but no snapshots gets the exact depth reconstructed from its step events
   (a target's ``t`` is when its batch entered q_hs, a drafter's ``t - busy`` when it left),
   and the panel says so.

Readable at any G: the split panels label every split while the labels fit the drawn axes;
beyond that every k-th (k = 1, 2, 5, 10, ... splits, on round target counts), always keeping the
recommended and observed splits, with a minor tick on every split. The recommended split is a
star over a cross-hatched bar and the observed one a diamond on an outlined bar, so the two
differ by shape, not only by colour.

matplotlib is imported inside the functions: importing this module costs nothing. Files are
written through a bare ``Figure`` (Agg canvas), never through pyplot's global state, so
repeated calls (``--follow``, tests) leak no figures.
"""

from __future__ import annotations

import functools
import io
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.measure.observe import queue_series
from advisor.model.params import Source
from advisor.settings import DEFAULT_MIN_EFFICIENCY, role_plural

if TYPE_CHECKING:  # pragma: no cover
    from advisor.advice import Advice

ROLE_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")
PROJECTED = "tab:blue"
RECOMMENDED = "tab:green"
BOUND = "0.80"
WARMUP = "0.88"
TARGET_BINS = 80  # time bins over a run for completion rates
MAX_TIME_BINS = 2000  # whatever the log's times, the rate panel never bins finer
NICE_BIN_S = (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
MAX_ANNOTATED_SPLITS = 10  # beyond this many splits, value labels would collide
MAX_BAR_SPLITS = 128  # beyond this many splits, bars under 3 px wide: lines instead
MAX_MINOR_TICKS = 200  # one minor tick per split up to this many splits
MAX_DRAWN_EVENTS = 20000  # queue-depth points drawn per panel
LABEL_GAP_EM = 1.0  # free space between two neighbouring split labels, in font sizes
NICE_TICK_STEPS = (1, 2, 5)  # thinned split labels fall on N = multiples of 1, 2, 5 x 10^k
REC_MARKER, OBS_MARKER = "*", "D"  # shapes, so the two marks differ without colour
REC_HATCH = "xx"
REC_STYLE = {"marker": REC_MARKER, "color": RECOMMENDED, "mec": "black", "mew": 0.8, "ls": "none"}
OPEN_ARROW_PT = 18  # an open upper end: an arrow this long up from the projection, no whisker to a number
OPEN_TEXT = "open upper end (a capacity known only from below)"
VALUE_PT = 8  # font size of the value over a bar
VALUE_HEIGHT_PT = 11  # the height a value's text takes, its line spacing included
STAR_MS = {"splits": 13, "efficiency": 12}  # the recommended star's size per panel, points
OBS_STYLE = {"marker": OBS_MARKER, "ms": 7, "color": "black", "mec": "white", "mew": 0.8, "ls": "none"}
FORMATS = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp")
DEFAULT_NAME = "advice.png"  # the file written into a directory given as the output


def _axes(ax: Any) -> Any:
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.gca()
    return ax


def _title_text(text: str, limit: int = 80) -> str:
    """A run name cut to fit a title line."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _plain_text(fn: Any) -> Any:
    """Draw with mathtext off: run, role and queue names come from the log, and a '$' in one
    would otherwise be parsed as TeX (garbled, or an error when the figure is drawn)."""

    @functools.wraps(fn)
    def plain(*args: Any, **kw: Any) -> Any:
        from matplotlib import rc_context

        with rc_context({"text.parse_math": False}):
            out = fn(*args, **kw)
        if hasattr(out, "xaxis"):  # a panel: its title and axis labels predate the context
            for text in (out.title, out.xaxis.label, out.yaxis.label):
                text.set_parse_math(False)
        return out

    return plain


def _fmt(k: tuple[int, int]) -> str:
    return f"{k[0]}-{k[1]}"


def _split_keys(adv: Advice) -> tuple[list[tuple[int, int]], int]:
    """(N, M) per row, and the row of the recommended split."""
    return [row.counts for row in adv.rows.values()], list(adv.rows).index(adv.decision.recommended)


def _obs_index(adv: Advice) -> int | None:
    """Row of the split the log ran, if it is one of the projected splits."""
    hit = np.flatnonzero(adv.splits["observed"].to_numpy(bool))
    return int(hit[0]) if len(hit) else None


def _label_widths_pt(labels: list[str]) -> tuple[np.ndarray, float]:
    """Width in points of each tick label (its widest line) in the tick-label font, and its size."""
    from matplotlib import rcParams
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    prop = FontProperties(size=rcParams["xtick.labelsize"])
    measure = TextToPath()
    lines = {ln for lab in labels for ln in lab.split("\n")}
    widths = {ln: measure.get_text_width_height_descent(ln, prop, ismath=False)[0] for ln in lines}
    size_pt = prop.get_size_in_points()
    return np.array([max(widths[ln] for ln in lab.split("\n")) for lab in labels]), size_pt


def _nice_step(at_least: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that is >= at_least."""
    return next(s * 10**k for k in itertools.count() for s in NICE_TICK_STEPS if s * 10**k >= at_least)


def _choose_split_ticks(
    widths_pt: np.ndarray, gap_pt: float, pt_per_split: float, targets: np.ndarray, first: list[int]
) -> list[int]:
    """Indices of the splits to label so that no two labels come closer than ``gap_pt``.

    All of them when they fit. Otherwise the splits in ``first`` (recommended, observed), then
    those whose target count is a multiple of k, k the smallest of 1, 2, 5, 10, 20, ... that
    leaves room for the widest label; a label that would come too close to one already chosen
    is dropped. Two labels i, j fit when their centres are |i - j| * pt_per_split apart and
    that is at least half of both widths plus the gap.
    """
    n = len(widths_pt)
    if n == 0:
        return []

    def fits(i: int, j: int) -> bool:
        return abs(i - j) * pt_per_split >= (widths_pt[i] + widths_pt[j]) / 2 + gap_pt

    if all(fits(i, i + 1) for i in range(n - 1)):
        return list(range(n))
    step = _nice_step(math.ceil((widths_pt.max() + gap_pt) / max(pt_per_split, 1e-9)))
    regular = [i for i in range(n) if targets[i] % step == 0]
    shown: list[int] = []
    for i in dict.fromkeys(first + regular):
        if all(fits(i, j) for j in shown):
            shown.append(i)
    return sorted(shown)


def _split_axis(ax: Any, adv: Advice, x: np.ndarray) -> None:
    """The split axis: its label, limits and the split labels, chosen when the axes is drawn, from
    its width then (see _choose_split_ticks).

    A Locator runs at every draw, after the layout has sized the axes, so the labels follow the
    figure's final size (a notebook's small axes, the CLI's large figure). Every split keeps a
    minor tick (up to MAX_MINOR_TICKS), so the bars stay countable when labels are thinned.
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, Locator

    keys, rec_i = _split_keys(adv)
    labels = []  # flagging the observed and recommended splits
    for i, row in enumerate(adv.rows.values()):
        tags = (["obs"] if row.observed else []) + (["rec"] if i == rec_i else [])
        labels.append(_fmt(keys[i]) + (f"\n{'+'.join(tags)}" if tags else ""))
    widths_pt, size_pt = _label_widths_pt(labels)
    targets = np.array([k[0] for k in keys])
    obs_i = _obs_index(adv)
    first = [rec_i] if obs_i is None else [rec_i, obs_i]

    class SplitLocator(Locator):
        def __call__(self) -> list[float]:
            lo, hi = self.axis.get_view_interval()
            width_pt = self.axis.axes.get_window_extent().width * 72 / self.axis.axes.figure.dpi
            per = width_pt / max(hi - lo, 1e-9)
            return [float(x[i]) for i in _choose_split_ticks(widths_pt, LABEL_GAP_EM * size_pt, per, targets, first)]

    def label(v: float, _pos: Any) -> str:
        i = int(round(v))
        return labels[i] if 0 <= i < len(labels) and abs(v - i) < 1e-6 else ""

    ax.xaxis.set_major_locator(SplitLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(label))
    if len(x) <= MAX_MINOR_TICKS:
        ax.xaxis.set_minor_locator(FixedLocator(x))
    ax.set_xlim(-0.7, len(x) - 0.3)
    p, c = adv.roles
    ax.set_xlabel(f"split ({p}-{c} {_unit(adv)}s)")


def _above(ax: Any, points: float) -> Any:
    """Data coordinates shifted up by a fixed number of points: a mark sits above a bar's label."""
    from matplotlib.transforms import offset_copy

    return offset_copy(ax.transData, fig=ax.figure, y=points, units="points")


def _throughput_unit(adv: Advice) -> tuple[np.ndarray, str]:
    """Per row, the factor from b/s to the splits panel's unit, and the unit: K tok/s where the
    log measured tokens (a row's tokens per batch, the fit's mean where its rate is 0), else b/s
    (a rates log without tokens: its tok/s is unknown)."""
    if not adv.fit.tokens_measured:
        return np.ones(len(adv.splits)), "b/s"
    bps = adv.splits["bps"].to_numpy(float)
    tok = adv.splits["tok_s"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(bps > 0, tok / bps, np.nan)
    return np.where(np.isfinite(per), per, adv.fit.tokens_mean) / 1e3, "K tok/s"


def _observed_rate_text(adv: Advice) -> str:
    """The observed rate in tok/s for a title, or the b/s alone where tok/s is unknown."""
    ob = adv.observed
    return f"{ob.tok_s / 1e3:.1f}K tok/s" if math.isfinite(ob.tok_s) else f"{ob.bps:.3g} b/s"


TIME_UNITS = ((86400.0, "d", 3 * 86400), (3600.0, "h", 3 * 3600), (60.0, "min", 600), (1.0, "s", -math.inf))


def _time_axis(duration_s: float) -> tuple[float, str]:
    """Divisor and unit for a time axis of this length."""
    for scale, unit, above in TIME_UNITS:
        if duration_s > above:
            return scale, unit
    return 1.0, "s"


def _bin_width_s(duration_s: float) -> float:
    """A round bin width giving about TARGET_BINS bins: from NICE_BIN_S up to a day, then
    1, 2 or 5 x 10^k days, so a log spanning any time gets a bounded number of bins."""
    want = max(duration_s / TARGET_BINS, 1e-9)
    for w in NICE_BIN_S:
        if w >= want:
            return float(w)
    days = want / NICE_BIN_S[-1]
    mag = 10.0 ** math.floor(math.log10(days))
    step = next(s * mag for s in (*NICE_TICK_STEPS, 10) if s * mag >= days)
    width = NICE_BIN_S[-1] * step
    return width if math.isfinite(width) else duration_s


def _time_edges(end_s: float) -> tuple[np.ndarray, float]:
    """Bin edges from 0 to just past end_s, and their width: at most MAX_TIME_BINS bins."""
    width = _bin_width_s(end_s)
    n = min(max(math.ceil(end_s / width), 1), MAX_TIME_BINS)
    return np.arange(n + 1) * width, width


def _fmt_span(seconds: float) -> str:
    """'2 min', '6 h', '5e+10 d': in the largest unit the span is a whole number of, else seconds."""
    for scale, unit, _ in TIME_UNITS:
        if seconds >= scale and float(seconds / scale).is_integer():
            return f"{seconds / scale:g} {unit}"
    return f"{seconds:g} s"


def _shade_warmup(ax: Any, adv: Advice, scale: float, unit: str) -> None:
    start = adv.observed.steady_from_s
    if start and start > 0:
        ax.axvspan(
            0.0,
            start / scale,
            color=WARMUP,
            alpha=0.6,
            lw=0,
            zorder=0,
            label=f"warm-up, dropped (first {start / scale:.1f} {unit})",
        )


@dataclass(frozen=True)
class _SplitBars:
    """The splits panel's numbers, in the panel's throughput unit, one entry per split."""

    x: np.ndarray  # a split's position on the axis
    tok: np.ndarray  # the projection
    low: np.ndarray  # the 95% interval's ends; an open upper end is the projection (its arrow goes on)
    high: np.ndarray
    bound: np.ndarray  # the naive bound
    mark_at: np.ndarray  # where a split's label and star sit (above an open end's arrow)
    top: float  # the tallest finite value the axes must show
    ob_rate: float  # the observed split's measured rate
    unit: str
    open_hi: np.ndarray  # the upper end is open (a capacity known only from below)


def _split_bars(adv: Advice) -> _SplitBars:
    """The projection, its interval and the naive bound per split, in tokens/s (or batches/s)."""
    df = adv.splits
    per_batch, unit = _throughput_unit(adv)
    tok = df["bps"].to_numpy(float) * per_batch
    low = df["bps_low"].to_numpy(float) * per_batch
    high = df["bps_high"].to_numpy(float) * per_batch
    bound = df["bound_bps"].to_numpy(float) * per_batch
    ob = adv.observed
    ob_rate = ob.tok_s / 1e3 if adv.fit.tokens_measured else ob.bps
    # an upper end resting on a capacity known only from below is open: it sets no scale, and no
    # whisker runs to it (an arrow up from the projection says it goes on: `_mark_open`)
    open_hi = df["bps_high_open"].to_numpy(bool) if "bps_high_open" in df else np.zeros(len(df), bool)
    high = np.where(open_hi, tok, high)
    top = np.nanmax(np.concatenate([high, bound, [ob_rate]]))
    top = top if math.isfinite(top) and top > 0 else 1.0
    return _SplitBars(np.arange(len(df)), tok, low, high, bound, high, top, ob_rate, unit, open_hi)


def _draw_projection(ax: Any, sb: _SplitBars, at: np.ndarray, width: float, bars: bool, many: bool) -> tuple:
    """The projection with its interval and the bound beside it: bars, or lines where bars would be
    too thin. Returns the legend handles of the projection and of the bound."""
    from matplotlib.patches import Patch

    x, tok, low, high = sb.x, sb.tok, sb.low, sb.high
    if bars:
        ax.bar(
            at,
            tok,
            width,
            color=PROJECTED,
            zorder=2,
            yerr=np.vstack([np.clip(tok - low, 0, None), np.clip(high - tok, 0, None)]),
            error_kw={"ecolor": "0.15", "capsize": 1 if many else 3, "lw": 0.8 if many else 1},
        )
        ax.bar(x + width / 2, sb.bound, width, color=BOUND, hatch="//", edgecolor="0.55", lw=0.5, zorder=2)
        return Patch(color=PROJECTED), Patch(facecolor=BOUND, hatch="//", edgecolor="0.55")
    # bars a pixel wide are a grey smear: the projection as a line in its interval band
    band = ax.fill_between(x, low, high, color=PROJECTED, alpha=0.3, lw=0, zorder=2)
    proj_handle = (band, ax.plot(x, tok, color=PROJECTED, lw=1.6, zorder=3)[0])
    return proj_handle, ax.plot(x, sb.bound, color="0.35", ls="--", lw=1.1, zorder=2)[0]


def _mark_open(ax: Any, sb: _SplitBars, at: np.ndarray, bars: bool) -> tuple | None:
    """Over each projection whose upper end is open (it goes on, to no number the axes could show),
    an arrow OPEN_ARROW_PT long (as lines: an arrowhead); its legend pair, or None when every
    interval is closed."""
    from matplotlib.lines import Line2D

    opened = np.flatnonzero(sb.open_hi)
    if not len(opened):
        return None
    head = {"marker": "^", "ms": 5, "color": "0.15"}
    if not bars:
        return ax.plot(at[opened], sb.tok[opened], ls="none", zorder=4, transform=_above(ax, 4), **head)[0], OPEN_TEXT
    style = {"arrowstyle": "-|>", "color": "0.15", "lw": 1, "shrinkA": 0, "shrinkB": 0}
    for i in opened:
        xy = (at[i], sb.tok[i])
        ax.annotate(
            "", xy, xytext=xy, xycoords=_above(ax, OPEN_ARROW_PT), textcoords="data", arrowprops=style, zorder=4
        )
    return Line2D([], [], lw=1, markevery=[1], **head), OPEN_TEXT


def _mark_recommended(
    ax: Any, adv: Advice, sb: _SplitBars, at: np.ndarray, width: float, bars: bool, many: bool
) -> tuple:
    """A star over the recommended split (and a green cross-hatched bar under it); its legend pair."""
    from matplotlib.patches import Patch

    keys, r = _split_keys(adv)
    y = sb.mark_at[r] if math.isfinite(sb.mark_at[r]) else sb.tok[r]
    # above the split's value, clear of it (where many, no value is written: above its mark)
    mark_pt = OPEN_ARROW_PT if sb.open_hi[r] else 0
    lift = STAR_MS["splits"] / 2 + (
        mark_pt + 2.5 if many else _value_lift_pt(sb, r, _obs_index(adv)) + VALUE_HEIGHT_PT + 1
    )
    star = ax.plot([at[r]], [y], ms=STAR_MS["splits"], zorder=5, transform=_above(ax, lift), **REC_STYLE)[0]
    text = f"recommended split {_fmt(keys[r])}, projected"
    if not bars:
        return star, text
    # drawn over the blue bar: green, cross-hatched, under the star
    ax.bar(at[r], sb.tok[r], width, color=RECOMMENDED, hatch=REC_HATCH, edgecolor="0.15", lw=0.6, zorder=3)
    return (Patch(facecolor=RECOMMENDED, hatch=REC_HATCH, edgecolor="0.15"), star), text


def _mark_observed(
    ax: Any, adv: Advice, sb: _SplitBars, at: np.ndarray, width: float, bars: bool, obs_i: int | None
) -> tuple | None:
    """An outlined bar and a diamond at the measured rate on the observed split; its legend pair, or
    None when the observed split is not on the axis."""
    if obs_i is None:
        return None
    if bars:
        ax.bar(at[obs_i], sb.tok[obs_i], width, fill=False, edgecolor="black", lw=1.8, zorder=4)
    dot = ax.plot([at[obs_i]], [sb.ob_rate], zorder=6, **OBS_STYLE)[0]
    keys, _ = _split_keys(adv)
    return dot, f"observed split {_fmt(keys[obs_i])}, measured {_observed_rate_text(adv)}"


def _value_text(ax: Any, text: str, xy: tuple[float, float], lift_pt: float) -> None:
    """A value over its bar, ``lift_pt`` points above ``xy``."""
    ax.annotate(text, xy, xytext=(0, lift_pt), textcoords="offset points", ha="center", va="bottom", fontsize=VALUE_PT)


def _value_lift_pt(sb: _SplitBars, j: int, obs_i: int | None) -> float:
    """How far split ``j``'s value sits above its mark: over an open end's arrow, else clear of the
    observed split's diamond, which sits on the bar's top."""
    return OPEN_ARROW_PT + 3 if sb.open_hi[j] else 7 if j == obs_i else 3


def _label_values(ax: Any, adv: Advice, sb: _SplitBars, width: float, obs_i: int | None) -> None:
    """Each split's projected value over its bar."""
    for j, (xi, v, h) in enumerate(zip(sb.x, sb.tok, sb.mark_at)):
        if math.isfinite(v):
            text = f"{v:.1f}" if adv.fit.tokens_measured else f"{v:.3g}"
            _value_text(ax, text, (xi - width / 2, h), _value_lift_pt(sb, j, obs_i))


def _splits_legend(ax: Any, sb: _SplitBars, pairs: list) -> None:
    """The legend of (handle, text) ``pairs`` (None left out), on the side away from the tallest bar."""
    tallest = int(np.nanargmax(sb.mark_at)) if np.isfinite(sb.mark_at).any() else 0
    ax.grid(axis="y", alpha=0.3, zorder=0)
    pairs = [h for h in pairs if h is not None]
    ax.legend(
        [h for h, _ in pairs],
        [t for _, t in pairs],
        fontsize=8,
        framealpha=0.9,
        loc="upper right" if tallest < len(sb.x) / 2 else "upper left",
    )


@_plain_text
def plot_splits(adv: Advice, ax: Any = None) -> Any:
    """Projected tokens/s per split (95% interval), the naive bound beside it, observed and recommended marked."""
    ax = _axes(ax)
    sb = _split_bars(adv)
    n = len(sb.x)
    many = n > MAX_ANNOTATED_SPLITS
    bars = n <= MAX_BAR_SPLITS
    width = 0.4
    at = sb.x - width / 2 if bars else sb.x  # where a split's projection is drawn
    proj_handle, bound_handle = _draw_projection(ax, sb, at, width, bars, many)
    open_handle = _mark_open(ax, sb, at, bars)
    rec_handle = _mark_recommended(ax, adv, sb, at, width, bars, many)
    obs_i = _obs_index(adv)
    obs_handle = _mark_observed(ax, adv, sb, at, width, bars, obs_i)
    if not many:
        _label_values(ax, adv, sb, width, obs_i)
    _split_axis(ax, adv, sb.x)
    ax.set_ylabel(f"throughput ({sb.unit})")
    # headroom for the legend, put on the side away from the tallest bar
    ax.set_ylim(0, sb.top * 1.4)
    # the projected bars have two looks, so the legend is built by hand
    bound_text = "naive bound: min capacity" + (" x tokens/batch" if adv.fit.tokens_measured else "")
    pairs = [
        (proj_handle, "projected, with 95% interval"),
        open_handle,
        rec_handle,
        (bound_handle, bound_text),
        obs_handle,
    ]
    _splits_legend(ax, sb, pairs)
    ax.set_title("Projected throughput per split")
    return ax


def _unit(adv: Advice) -> str:
    """What the splits divide: GPUs, or CPU workers when the log ran on CPU."""
    return "CPU worker" if adv.settings.cpu else "GPU"


def measured_efficiency(adv: Advice, i: int) -> float:
    """The measured efficiency (%) of row ``i``, an observed split: its measured rate over the
    fastest stage's capacity of the same row, the numbers the efficiency bar divides
    (`advisor.project.table`).
    """
    r = adv.rows[str(adv.splits.index[i])]
    fastest = max(r.producer.cap_bps, r.consumer.cap_bps)
    return 100.0 * r.observed_bps / fastest if fastest > 0 else math.nan


@_plain_text
def plot_efficiency(adv: Advice, ax: Any = None, min_efficiency: float = DEFAULT_MIN_EFFICIENCY) -> Any:
    """Efficiency (X / max capacity) and GPU utilisation per split, with the gate's threshold."""
    ax = _axes(ax)
    df = adv.splits
    keys, rec_i = _split_keys(adv)
    x = np.arange(len(df))
    width = 0.4
    eff = df["efficiency"].to_numpy(float) * 100
    util = df["gpu_util"].to_numpy(float) * 100
    bars = len(df) <= MAX_BAR_SPLITS
    eff_x = x - width / 2 if bars else x  # where the efficiency of a split is drawn
    # dark and light: the two series differ in lightness (and, as lines, in dash), not only in hue
    if bars:
        ax.bar(eff_x, eff, width, color="tab:purple", label="efficiency (X / max capacity)", zorder=2)
        ax.bar(x + width / 2, util, width, color="tab:cyan", label=f"{_unit(adv)} utilisation", zorder=2)
    else:
        ax.plot(x, eff, color="tab:purple", lw=1.6, label="efficiency (X / max capacity)", zorder=2)
        ax.plot(x, util, color="tab:cyan", lw=1.6, ls="--", label=f"{_unit(adv)} utilisation", zorder=2)
    ax.axhline(min_efficiency * 100, color="tab:red", ls="--", lw=1.3, zorder=3, label=f"gate {min_efficiency:.0%}")
    star_r = STAR_MS["efficiency"] / 2
    if len(df) <= MAX_ANNOTATED_SPLITS:
        for i, (xi, v) in enumerate(zip(eff_x, eff)):
            if math.isfinite(v):  # the recommended bar's value clear of the star on its top
                _value_text(ax, f"{v:.0f}", (xi, v), 2 + (star_r if i == rec_i else 0))
    # the same marks as the throughput panel, at their values on the efficiency bar: the star at the
    # projected efficiency, the diamond (over it where the two coincide) at the measured one. The axis
    # is a percentage, so neither is lifted: a lifted star read as a share over 100%
    rec_eff = eff[rec_i] if math.isfinite(eff[rec_i]) else 0.0
    rec_label = f"recommended {_fmt(keys[rec_i])}" + (f": projected {rec_eff:.0f}%" if rec_eff else "")
    ax.plot([eff_x[rec_i]], [rec_eff], ms=2 * star_r, zorder=5, label=rec_label, **REC_STYLE)
    obs_i = _obs_index(adv)
    measured = measured_efficiency(adv, obs_i) if obs_i is not None else math.nan
    if obs_i is not None and math.isfinite(measured):
        # at its measured efficiency, on the efficiency bar: the bar is the projection, the diamond the log
        label = f"observed {_fmt(keys[obs_i])}: measured {measured:.0f}%"
        ax.plot([eff_x[obs_i]], [measured], zorder=6, label=label, **OBS_STYLE)
    _split_axis(ax, adv, x)
    ax.set_ylabel(f"efficiency, {_unit(adv)} utilisation (%)")
    ax.set_ylim(0, 130)
    ax.set_yticks(range(0, 101, 20))
    ax.grid(axis="y", alpha=0.3, zorder=0)
    # the band above the marks, so the legend never covers the data
    ax.legend(loc="upper center", fontsize=8, framealpha=0.9, ncols=3)
    ax.set_title(f"Efficiency and {_unit(adv)} utilisation per split")
    return ax


def _no_log(ax: Any) -> Any:
    """A panel of advice from bare numbers: no log to draw."""
    ax.text(0.5, 0.5, "no log: advice from bare numbers", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return ax


def _completion_rates(log: Any, role: str, edges: np.ndarray, end_s: float) -> np.ndarray:
    counts = log.completion_counts(role, edges)
    # the last bin may stick out past the log's end: divide by the time it covers
    covered = np.clip(np.minimum(edges[1:], end_s) - edges[:-1], 1e-9, None)
    return counts / covered


@_plain_text
def plot_rates(adv: Advice, ax: Any = None) -> Any:
    """Completions per role over time (batches/s), fitted pool capacities over the steady part, warm-up shaded."""
    ax = _axes(ax)
    if not adv.logs:
        ax.set_title("Completion rates over time")
        return _no_log(ax)
    log = adv.logs[0]
    end_s = max(log.duration_s, 1e-9)
    scale, unit = _time_axis(end_s)
    _shade_warmup(ax, adv, scale, unit)
    roles = list(log.header.roles)
    colours = {r: ROLE_COLOURS[i % len(ROLE_COLOURS)] for i, r in enumerate(roles)}
    done = {r: f"{role_plural(r)} ({log.header.roles[r]}): completions" for r in roles}
    if log.has_steps:
        edges, width = _time_edges(end_s)
        for r in roles:
            rate = _completion_rates(log, r, edges, end_s)
            ax.stairs(rate, edges / scale, baseline=None, color=colours[r], lw=1.4, label=done[r])
        basis = f"from step events, {_fmt_span(width)} bins"
    else:
        rt = log.rates
        for r in roles:
            logged_cap = {"lw": 0.9, "ls": ":", "label": f"{role_plural(r)}: logged capacity"}
            for col, style in ((f"bps_{r}", {"lw": 1.4, "label": done[r]}), (f"cap_bps_{r}", logged_cap)):
                if col in rt and rt[col].notna().any():
                    ax.step(rt["t"] / scale, rt[col], where="pre", color=colours[r], **style)
        basis = "from 'rates' snapshots"
    start = adv.observed.steady_from_s
    for r, cap in adv.observed.capacities_bps.items():
        if cap and math.isfinite(cap):
            ax.hlines(
                cap,
                start / scale,
                end_s / scale,
                colors=colours.get(r, "0.3"),
                linestyles="--",
                lw=1.1,
                label=f"{r} capacity (fit) {cap:.3g} b/s",
            )
    ax.set_xlim(0, end_s / scale)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"time since run start ({unit})")
    ax.set_ylabel("completions, b/s (whole pool)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    more = f" (first of {len(adv.logs)} logs)" if len(adv.logs) > 1 else ""
    ax.set_title(f"Completion rates over time, {basis}{more}")
    return ax


def _queue_series(log: Any, name: str, cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, Source] | None:
    """(t_s, depth, weight_s, source) of the queue over time, or None when nothing measures it.

    ``weight_s`` is how long each depth value holds, for the time-weighted distribution.
    """
    series = queue_series(log, name)
    if series is not None:
        return (*series, Source.RATES)
    if not log.has_steps or log.sampled:  # the depth replay needs every step, not a sample
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
    return times, depth, np.clip(hold, 0, None), Source.STEPS


def _draw_depth(ax: Any, series: tuple, name: str, cap: int, scale: float) -> None:
    """The queue's depth over time: the 'rates' snapshots as they are, or the depth reconstructed
    from step events (sampled on a grid of MAX_DRAWN_EVENTS points where there are more), said so in
    the title."""
    t, depth, _, source = series
    if source is Source.RATES:
        ax.step(t / scale, depth, where="pre", color="tab:red", lw=1.3, label=f"q_{name} depth ('rates')")
        return
    # one point per event is millions on a long run: draw the step function sampled on a
    # fine grid (the distribution below still uses every event)
    tt, dd = t, depth
    if len(t) > MAX_DRAWN_EVENTS:
        tt = np.linspace(t[0], t[-1], MAX_DRAWN_EVENTS)
        dd = depth[np.searchsorted(t, tt, side="right") - 1]
    ax.step(tt / scale, dd, where="post", color="tab:red", lw=0.8, label=f"q_{name} depth, reconstructed from steps")
    ax.set_title(
        f"q_{name} occupancy (capacity {cap})\nno 'rates' snapshots in this log: depth reconstructed from step events",
        fontsize=11,
    )


def _steady_inset(ax: Any, series: tuple, cap: int, steady_from_s: float) -> bool:
    """The time-weighted depth distribution over the steady part in an inset, placed where the line
    is not. Returns whether the queue is mostly full (mean depth over half its capacity; True when
    the steady part holds no weight, and no inset is drawn)."""
    t, depth, weight, _ = series
    steady = t >= steady_from_s
    if not (steady.any() and weight[steady].sum() > 0):
        return True
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
    return mostly_full


@_plain_text
def plot_queue(adv: Advice, ax: Any = None) -> Any:
    """q_hs depth over time with its steady-state distribution in an inset."""
    ax = _axes(ax)
    ax.set_title("Hidden-state queue occupancy")
    if not adv.logs:
        return _no_log(ax)
    log = adv.logs[0]
    spec = log.header.queue_feeding(log.header.consumer)
    if spec is None:
        ax.text(
            0.5,
            0.5,
            f"the log's header names no queue feeding the {role_plural(log.header.consumer)}: "
            f"the hand-off is modelled without a buffer",
            ha="center",
            va="center",
            transform=ax.transAxes,
            wrap=True,
        )
        return ax
    name, cap = spec.name, spec.cap
    ax.set_title(f"q_{name} occupancy (capacity {cap})")
    series = _queue_series(log, name, cap)
    end_s = max(log.duration_s, 1e-9)
    scale, unit = _time_axis(end_s)
    if series is None:
        ax.text(
            0.5,
            0.5,
            f"no 'rates' snapshots (and no step events) in\n{Path(log.path).name}:\nq_{name} occupancy was not logged",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_xticks([])
        ax.set_yticks([])
        return ax
    _shade_warmup(ax, adv, scale, unit)
    _draw_depth(ax, series, name, cap, scale)
    ax.axhline(cap, color="0.3", ls=":", lw=1, label=f"capacity {cap}")
    ax.set_xlim(0, end_s / scale)
    ax.set_ylim(-0.02 * cap, cap * 1.08 if cap > 0 else 1)
    ax.set_xlabel(f"time since run start ({unit})")
    ax.set_ylabel(f"q_{name} depth (batches)")
    ax.grid(alpha=0.3)
    mostly_full = _steady_inset(ax, series, cap, adv.observed.steady_from_s)
    ax.legend(loc="lower left" if mostly_full else "upper left", fontsize=8, framealpha=0.9)
    return ax


def figure_path(path: str | Path) -> Path:
    """The file a figure for ``path`` goes to: ``path`` itself, or ``path/advice.png`` when it is
    a directory. The format is the extension's, one of FORMATS; a device or pipe without one
    (``/dev/stdout``) gets PNG.
    """
    out = Path(path)
    if out.is_dir():
        out = out / DEFAULT_NAME
    if out.suffix.lower().lstrip(".") in FORMATS:
        return out
    if not out.suffix and out.exists() and not out.is_file() and not out.is_dir():  # a device, a pipe
        return out
    said = f"unknown extension '{out.suffix}'" if out.suffix else "no extension"
    raise ValueError(f"{out}: {said}; a figure is written as one of " + ", ".join(f".{f}" for f in FORMATS))


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to :func:`figure_path` of ``path``.

    The figure is rendered in memory first, so a failed write (full disk, unwritable place)
    raises OSError before or while the bytes go out, never after a silent partial file: a file
    this call created is removed again when writing it fails.
    """
    out = figure_path(path)
    buf = io.BytesIO()
    fig.savefig(buf, format=out.suffix.lower().lstrip(".") or "png")
    existed = out.exists()
    try:
        with open(out, "wb") as f:
            f.write(buf.getvalue())
    except OSError:
        if not existed and out.is_file():
            out.unlink()
        raise
    return out


@_plain_text
def plot_advice(adv: Advice, path: str | Path | None = None, min_efficiency: float = DEFAULT_MIN_EFFICIENCY) -> Any:
    """The four panels in one 2x2 figure."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 9.5), layout="constrained", dpi=110)
    axes = fig.subplots(2, 2)
    plot_splits(adv, axes[0, 0])
    plot_efficiency(adv, axes[0, 1], min_efficiency=min_efficiency)
    plot_rates(adv, axes[1, 0])
    plot_queue(adv, axes[1, 1])
    p, c = adv.roles
    ob = adv.observed
    keys, rec_i = _split_keys(adv)
    seen, rec = (ob.roles[p], ob.roles[c]), keys[rec_i]
    same = " (the observed split)" if seen == rec else ""
    tok = f" ({ob.tok_s / 1e3:.1f}K tok/s)" if math.isfinite(ob.tok_s) else ""
    fig.suptitle(
        f"{_title_text(adv.run)}: {adv.settings.units()}; observed {_fmt(seen)} at {ob.bps:.3g} b/s"
        f"{tok}, bottleneck {ob.bottleneck}; recommended split "
        f"{_fmt(rec)}{same}",
        fontsize=12,
    )
    if path is not None:
        save_figure(fig, path)
    return fig
