"""Pictures of an :class:`~advisor.advice.Advice`: one function per panel, and one figure of all four.

Each panel takes the advice and an optional matplotlib ``ax`` (None: pyplot's current axes) and
returns the axes it drew on. ``plot_advice(adv)`` returns the 2x2 ``Figure`` that ``dflash-advise
plot`` writes (``plot_advice(adv, path)`` also saves it):

1. ``plot_splits``: projected tokens/s of every split N + M = G with its 95% interval, beside the
   naive bound ``min(capacities) x tokens per batch`` (below it: finite queues and variable step
   times cost throughput); an interval open above (a capacity known only from below) gets an
   arrow up instead of a whisker.
2. ``plot_efficiency``: efficiency (X / max capacity) and GPU utilisation per split, with the CI
   gate's threshold, on a 0-100% axis.
3. ``plot_rates``: completions per role over time: from ``step`` events counted in round time bins
   (about TARGET_BINS over the run, never more than MAX_TIME_BINS), else the ``rates`` snapshots'
   ``bps_<role>``; the fitted capacities over the steady part; the dropped warm-up shaded.
4. ``plot_queue``: the depth of the queue feeding the consumer over time, with its time-weighted
   distribution over the steady part in an inset: from ``rates`` snapshots, else reconstructed
   exactly from step events (a target's ``t`` is when its batch entered, a drafter's ``t - busy``
   when it left), which the panel says.

Split axes label every split while the labels fit the drawn axes, else every k-th (k = 1, 2, 5,
10, ... on round target counts), always keeping the recommended and observed splits. The
recommended split is a star over a cross-hatched bar, the observed one a diamond on an outlined
bar: they differ by shape, not only colour. Files are written through a bare ``Figure``, never
pyplot's global state, so repeated calls leak no figures.
"""

from __future__ import annotations

import functools
import inspect
import io
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.measure.observe import queue_series
from advisor.model.params import Source
from advisor.project.table import split_label
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
BAR_W = 0.4  # a bar's width; a split's two bars sit side by side
TIME_UNITS = ((86400.0, "d", 3 * 86400), (3600.0, "h", 3 * 3600), (60.0, "min", 600), (1.0, "s", -math.inf))


def _panel(fn: Any) -> Any:
    """A panel drawn on ``ax`` (None: pyplot's current axes), which it returns, with mathtext off:
    names from the log with a '$' would otherwise be parsed as TeX. Its signature is ``fn``'s but
    for the return: the axes, not ``fn``'s None."""

    @functools.wraps(fn)
    def plain(adv: Advice, ax: Any = None, *args: Any, **kw: Any) -> Any:
        from matplotlib import rc_context

        with rc_context({"text.parse_math": False}):
            if ax is None:
                import matplotlib.pyplot as plt

                ax = plt.gca()
            fn(adv, ax, *args, **kw)
        for text in (ax.title, ax.xaxis.label, ax.yaxis.label):  # these predate the context
            text.set_parse_math(False)
        return ax

    plain.__annotations__ = {**fn.__annotations__, "return": "Any"}
    plain.__signature__ = inspect.signature(fn).replace(return_annotation="Any")
    return plain


def _unit(adv: Advice) -> str:
    """What the splits divide: GPUs, or CPU workers when the log ran on CPU."""
    return "CPU worker" if adv.settings.cpu else "GPU"


def _label_widths_pt(labels: list[str]) -> tuple[np.ndarray, float]:
    """Width in points of each tick label (its widest line) in the tick-label font, and its size."""
    from matplotlib import rcParams
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    prop = FontProperties(size=rcParams["xtick.labelsize"])
    measure = TextToPath()
    lines = {ln for lab in labels for ln in lab.split("\n")}
    widths = {ln: measure.get_text_width_height_descent(ln, prop, ismath=False)[0] for ln in lines}
    return np.array([max(widths[ln] for ln in lab.split("\n")) for lab in labels]), prop.get_size_in_points()


def _choose_split_ticks(
    widths_pt: np.ndarray, gap_pt: float, pt_per_split: float, targets: np.ndarray, first: list[int]
) -> list[int]:
    """Indices of the splits to label so that no two labels come closer than ``gap_pt``.

    All when they fit; else those in ``first``, then those whose target count is a multiple of k,
    the smallest of 1, 2, 5, 10, 20, ... that leaves room for the widest label, each dropped when
    too close to one already chosen. Labels i, j fit when |i - j| * pt_per_split is at least half
    of both widths plus the gap.
    """
    n = len(widths_pt)
    if n == 0:
        return []

    def fits(i: int, j: int) -> bool:
        return abs(i - j) * pt_per_split >= (widths_pt[i] + widths_pt[j]) / 2 + gap_pt

    if all(fits(i, i + 1) for i in range(n - 1)):
        return list(range(n))
    at_least = math.ceil((widths_pt.max() + gap_pt) / max(pt_per_split, 1e-9))
    step = next(s * 10**k for k in itertools.count() for s in NICE_TICK_STEPS if s * 10**k >= at_least)
    shown: list[int] = []
    for i in dict.fromkeys(first + [i for i in range(n) if targets[i] % step == 0]):
        if all(fits(i, j) for j in shown):
            shown.append(i)
    return sorted(shown)


def _split_axis(ax: Any, adv: Advice, sb: _SplitBars) -> None:
    """The split axis: its label, limits, a minor tick per split (up to MAX_MINOR_TICKS) and the
    split labels, chosen by a Locator at every draw from the axes' final width."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, Locator

    x, names, rec_i, obs_i = sb.x, sb.labels, sb.rec_i, sb.obs_i
    labels = []  # flagging the observed and recommended splits
    for i, row in enumerate(adv.rows.values()):
        tags = (["obs"] if row.observed else []) + (["rec"] if i == rec_i else [])
        labels.append(names[i] + (f"\n{'+'.join(tags)}" if tags else ""))
    widths_pt, size_pt = _label_widths_pt(labels)
    targets = np.array([row.counts[0] for row in adv.rows.values()])
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


def _bin_width_s(duration_s: float) -> float:
    """A round bin width giving about TARGET_BINS bins: from NICE_BIN_S up to a day, then
    1, 2 or 5 x 10^k days."""
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


def _note(ax: Any, text: str, **kw: Any) -> None:
    """A sentence in the middle of the panel."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, **kw)


def _time_panel(ax: Any, adv: Advice, end_s: float) -> tuple[float, str]:
    """A panel over the run's time: warm-up shaded, x limits, label and grid; (divisor, unit)."""
    scale, unit = next(((scale, unit) for scale, unit, above in TIME_UNITS if end_s > above), (1.0, "s"))
    start = adv.observed.steady_from_s
    if start and start > 0:
        label = f"warm-up, dropped (first {start / scale:.1f} {unit})"
        ax.axvspan(0.0, start / scale, color=WARMUP, alpha=0.6, lw=0, zorder=0, label=label)
    ax.set_xlim(0, end_s / scale)
    ax.set_xlabel(f"time since run start ({unit})")
    ax.grid(alpha=0.3)
    return scale, unit


@dataclass(frozen=True)
class _SplitBars:
    """The splits panel's numbers, in its throughput unit, one entry per split, and its marks."""

    x: np.ndarray  # a split's position on the axis
    at: np.ndarray  # where its projection is drawn
    tok: np.ndarray  # the projection
    low: np.ndarray  # the 95% interval's ends; an open upper end is the projection (its arrow goes on)
    high: np.ndarray  # also where a split's label and star sit
    bound: np.ndarray  # the naive bound
    open_hi: np.ndarray  # the upper end is open (a capacity known only from below)
    top: float  # the tallest finite value the axes must show
    ob_rate: float  # the observed split's measured rate
    unit: str
    bars: bool  # bars, or lines where bars would be too thin
    many: bool  # too many splits to write their values
    labels: list[str]
    rec_i: int
    obs_i: int | None


def _split_bars(adv: Advice) -> _SplitBars:
    """The projection, its interval and the naive bound per split: in K tok/s where the log
    measured tokens (a row's tokens per batch, the fit's mean where its rate is 0), else b/s."""
    df = adv.splits
    bps = df["bps"].to_numpy(float)
    per_batch, unit = np.ones(len(df)), "b/s"
    if adv.fit.tokens_measured:
        with np.errstate(divide="ignore", invalid="ignore"):
            per = np.where(bps > 0, df["tok_s"].to_numpy(float) / bps, np.nan)
        per_batch, unit = np.where(np.isfinite(per), per, adv.fit.tokens_mean) / 1e3, "K tok/s"
    tok, low, high, bound = (df[c].to_numpy(float) * per_batch for c in ("bps", "bps_low", "bps_high", "bound_bps"))
    ob = adv.observed
    ob_rate = ob.tok_s / 1e3 if adv.fit.tokens_measured else ob.bps
    # an upper end resting on a capacity known only from below sets no scale and gets no whisker
    open_hi = df["bps_high_open"].to_numpy(bool)
    high = np.where(open_hi, tok, high)
    top = np.nanmax(np.concatenate([high, bound, [ob_rate]]))
    top = top if math.isfinite(top) and top > 0 else 1.0
    x = np.arange(len(df))
    bars, many = len(df) <= MAX_BAR_SPLITS, len(df) > MAX_ANNOTATED_SPLITS
    at = x - BAR_W / 2 if bars else x
    labels = list(adv.rows)  # the recommended split's row, and the first observed one's (or None)
    obs_i = next((i for i, r in enumerate(adv.rows.values()) if r.observed), None)
    rec_i = labels.index(adv.decision.recommended)
    return _SplitBars(x, at, tok, low, high, bound, open_hi, top, ob_rate, unit, bars, many, labels, rec_i, obs_i)


def _draw_projection(ax: Any, sb: _SplitBars) -> tuple:
    """The projection with its interval and the bound beside it; their legend handles."""
    from matplotlib.patches import Patch

    if sb.bars:
        ax.bar(
            sb.at,
            sb.tok,
            BAR_W,
            color=PROJECTED,
            zorder=2,
            yerr=np.vstack([np.clip(sb.tok - sb.low, 0, None), np.clip(sb.high - sb.tok, 0, None)]),
            error_kw={"ecolor": "0.15", "capsize": 1 if sb.many else 3, "lw": 0.8 if sb.many else 1},
        )
        ax.bar(sb.x + BAR_W / 2, sb.bound, BAR_W, color=BOUND, hatch="//", edgecolor="0.55", lw=0.5, zorder=2)
        return Patch(color=PROJECTED), Patch(facecolor=BOUND, hatch="//", edgecolor="0.55")
    # bars a pixel wide are a grey smear: the projection as a line in its interval band
    band = ax.fill_between(sb.x, sb.low, sb.high, color=PROJECTED, alpha=0.3, lw=0, zorder=2)
    proj_handle = (band, ax.plot(sb.x, sb.tok, color=PROJECTED, lw=1.6, zorder=3)[0])
    return proj_handle, ax.plot(sb.x, sb.bound, color="0.35", ls="--", lw=1.1, zorder=2)[0]


def _mark_open(ax: Any, sb: _SplitBars) -> tuple | None:
    """An arrow OPEN_ARROW_PT long (as lines: an arrowhead) over each projection whose upper end is
    open; its legend pair, or None when every interval is closed."""
    from matplotlib.lines import Line2D

    opened = np.flatnonzero(sb.open_hi)
    if not len(opened):
        return None
    head = {"marker": "^", "ms": 5, "color": "0.15"}
    if not sb.bars:
        heads = ax.plot(sb.at[opened], sb.tok[opened], ls="none", zorder=4, transform=_above(ax, 4), **head)
        return heads[0], OPEN_TEXT
    style = {"arrowstyle": "-|>", "color": "0.15", "lw": 1, "shrinkA": 0, "shrinkB": 0}
    for i in opened:
        xy = (sb.at[i], sb.tok[i])
        ax.annotate(
            "", xy, xytext=xy, xycoords=_above(ax, OPEN_ARROW_PT), textcoords="data", arrowprops=style, zorder=4
        )
    return Line2D([], [], lw=1, markevery=[1], **head), OPEN_TEXT


def _mark_recommended(ax: Any, sb: _SplitBars) -> tuple:
    """A star over the recommended split (and a green cross-hatched bar under it); its legend pair."""
    from matplotlib.patches import Patch

    r = sb.rec_i
    y = sb.high[r] if math.isfinite(sb.high[r]) else sb.tok[r]
    # clear of the split's value (where many, no value is written: above its mark)
    if sb.many:
        lift = STAR_MS["splits"] / 2 + (OPEN_ARROW_PT if sb.open_hi[r] else 0) + 2.5
    else:
        lift = STAR_MS["splits"] / 2 + _value_lift_pt(sb, r) + VALUE_HEIGHT_PT + 1
    star = ax.plot([sb.at[r]], [y], ms=STAR_MS["splits"], zorder=5, transform=_above(ax, lift), **REC_STYLE)[0]
    text = f"recommended split {sb.labels[r]}, projected"
    if not sb.bars:
        return star, text
    ax.bar(sb.at[r], sb.tok[r], BAR_W, color=RECOMMENDED, hatch=REC_HATCH, edgecolor="0.15", lw=0.6, zorder=3)
    return (Patch(facecolor=RECOMMENDED, hatch=REC_HATCH, edgecolor="0.15"), star), text


def _value_text(ax: Any, text: str, xy: tuple[float, float], lift_pt: float) -> None:
    """A value over its bar, ``lift_pt`` points above ``xy``."""
    ax.annotate(text, xy, xytext=(0, lift_pt), textcoords="offset points", ha="center", va="bottom", fontsize=VALUE_PT)


def _value_lift_pt(sb: _SplitBars, j: int) -> float:
    """How far split ``j``'s value sits above its mark: over an open end's arrow, clear of a diamond."""
    return OPEN_ARROW_PT + 3 if sb.open_hi[j] else 7 if j == sb.obs_i else 3


@_panel
def plot_splits(adv: Advice, ax: Any = None) -> None:
    """Projected tokens/s per split (95% interval), the naive bound beside it, observed and recommended marked."""
    sb = _split_bars(adv)
    proj_handle, bound_handle = _draw_projection(ax, sb)
    pairs = [(proj_handle, "projected, with 95% interval"), _mark_open(ax, sb), _mark_recommended(ax, sb)]
    bound_text = "naive bound: min capacity" + (" x tokens/batch" if adv.fit.tokens_measured else "")
    pairs.append((bound_handle, bound_text))
    if sb.obs_i is not None:  # an outlined bar and a diamond at the measured rate
        if sb.bars:
            ax.bar(sb.at[sb.obs_i], sb.tok[sb.obs_i], BAR_W, fill=False, edgecolor="black", lw=1.8, zorder=4)
        ob = adv.observed
        rate = f"{ob.tok_s / 1e3:.1f}K tok/s" if math.isfinite(ob.tok_s) else f"{ob.bps:.3g} b/s"
        dot = ax.plot([sb.at[sb.obs_i]], [sb.ob_rate], zorder=6, **OBS_STYLE)[0]
        pairs.append((dot, f"observed split {sb.labels[sb.obs_i]}, measured {rate}"))
    fmt = ".1f" if adv.fit.tokens_measured else ".3g"
    for j, (xi, v, h) in enumerate(zip(sb.x, sb.tok, sb.high)):
        if math.isfinite(v) and not sb.many:  # each split's value over its bar, where they fit
            _value_text(ax, format(v, fmt), (xi - BAR_W / 2, h), _value_lift_pt(sb, j))
    _split_axis(ax, adv, sb)
    ax.set_ylabel(f"throughput ({sb.unit})")
    ax.set_ylim(0, sb.top * 1.4)  # headroom for the legend, on the side away from the tallest bar
    tallest = int(np.nanargmax(sb.high)) if np.isfinite(sb.high).any() else 0
    ax.grid(axis="y", alpha=0.3, zorder=0)
    pairs = [h for h in pairs if h is not None]  # the bars have two looks: the legend is built by hand
    loc = "upper right" if tallest < len(sb.x) / 2 else "upper left"
    ax.legend([h for h, _ in pairs], [t for _, t in pairs], fontsize=8, framealpha=0.9, loc=loc)
    ax.set_title("Projected throughput per split")


@_panel
def plot_efficiency(adv: Advice, ax: Any = None, min_efficiency: float = DEFAULT_MIN_EFFICIENCY) -> None:
    """Efficiency (X / max capacity) and GPU utilisation per split, with the gate's threshold."""
    df, sb = adv.splits, _split_bars(adv)
    x, eff_x, labels, rec_i, obs_i = sb.x, sb.at, sb.labels, sb.rec_i, sb.obs_i  # eff_x: where a split's is drawn
    eff = df["efficiency"].to_numpy(float) * 100
    util = df["gpu_util"].to_numpy(float) * 100
    eff_label, util_label = "efficiency (X / max capacity)", f"{_unit(adv)} utilisation"
    # dark and light: the two series differ in lightness (and, as lines, in dash), not only in hue
    if sb.bars:
        ax.bar(eff_x, eff, BAR_W, color="tab:purple", label=eff_label, zorder=2)
        ax.bar(x + BAR_W / 2, util, BAR_W, color="tab:cyan", label=util_label, zorder=2)
    else:
        ax.plot(x, eff, color="tab:purple", lw=1.6, label=eff_label, zorder=2)
        ax.plot(x, util, color="tab:cyan", lw=1.6, ls="--", label=util_label, zorder=2)
    ax.axhline(min_efficiency * 100, color="tab:red", ls="--", lw=1.3, zorder=3, label=f"gate {min_efficiency:.0%}")
    star_r = STAR_MS["efficiency"] / 2
    if not sb.many:
        for i, (xi, v) in enumerate(zip(eff_x, eff)):
            if math.isfinite(v):  # the recommended bar's value clear of the star on its top
                _value_text(ax, f"{v:.0f}", (xi, v), 2 + (star_r if i == rec_i else 0))
    # the throughput panel's marks at their values on the efficiency bar, not lifted (a lifted star
    # read as a share over 100%): the star at the projected efficiency, the diamond at the measured
    rec_eff = eff[rec_i] if math.isfinite(eff[rec_i]) else 0.0
    rec_label = f"recommended {labels[rec_i]}" + (f": projected {rec_eff:.0f}%" if rec_eff else "")
    ax.plot([eff_x[rec_i]], [rec_eff], ms=2 * star_r, zorder=5, label=rec_label, **REC_STYLE)
    if obs_i is not None:  # its measured rate over the fastest stage's capacity of the same row
        r = adv.rows[labels[obs_i]]
        fastest = max(r.producer.cap_bps, r.consumer.cap_bps)
        measured = 100.0 * r.observed_bps / fastest if fastest > 0 else math.nan
        if math.isfinite(measured):
            label = f"observed {labels[obs_i]}: measured {measured:.0f}%"
            ax.plot([eff_x[obs_i]], [measured], zorder=6, label=label, **OBS_STYLE)
    _split_axis(ax, adv, sb)
    ax.set_ylabel(f"efficiency, {_unit(adv)} utilisation (%)")
    ax.set_ylim(0, 130)
    ax.set_yticks(range(0, 101, 20))
    ax.grid(axis="y", alpha=0.3, zorder=0)
    ax.legend(loc="upper center", fontsize=8, framealpha=0.9, ncols=3)  # above the marks, never over them
    ax.set_title(f"Efficiency and {_unit(adv)} utilisation per split")


def _no_log(ax: Any) -> None:
    """A panel of advice from bare numbers: no log to draw."""
    _note(ax, "no log: advice from bare numbers")
    ax.set_axis_off()


def _completion_rates(log: Any, role: str, edges: np.ndarray, end_s: float) -> np.ndarray:
    counts = log.completion_counts(role, edges)
    # the last bin may stick out past the log's end: divide by the time it covers
    covered = np.clip(np.minimum(edges[1:], end_s) - edges[:-1], 1e-9, None)
    return counts / covered


@_panel
def plot_rates(adv: Advice, ax: Any = None) -> None:
    """Completions per role over time (batches/s), fitted pool capacities over the steady part, warm-up shaded."""
    if not adv.logs:
        ax.set_title("Completion rates over time")
        return _no_log(ax)
    log = adv.logs[0]
    end_s = max(log.duration_s, 1e-9)
    scale, _ = _time_panel(ax, adv, end_s)
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
            label = f"{r} capacity (fit) {cap:.3g} b/s"
            ax.hlines(
                cap, start / scale, end_s / scale, colors=colours.get(r, "0.3"), linestyles="--", lw=1.1, label=label
            )
    ax.set_ylim(bottom=0)
    ax.set_ylabel("completions, b/s (whole pool)")
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    more = f" (first of {len(adv.logs)} logs)" if len(adv.logs) > 1 else ""
    ax.set_title(f"Completion rates over time, {basis}{more}")


def _queue_series(log: Any, name: str, cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, Source] | None:
    """(t_s, depth, weight_s: how long each depth holds, source) of the queue, or None when nothing
    measures it."""
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
    """The queue's depth over time: the 'rates' snapshots, or the depth reconstructed from step
    events (on a grid of MAX_DRAWN_EVENTS points where there are more), said in the title."""
    t, depth, _, source = series
    if source is Source.RATES:
        ax.step(t / scale, depth, where="pre", color="tab:red", lw=1.3, label=f"q_{name} depth ('rates')")
        return
    tt, dd = t, depth  # the distribution below still uses every event
    if len(t) > MAX_DRAWN_EVENTS:
        tt = np.linspace(t[0], t[-1], MAX_DRAWN_EVENTS)
        dd = depth[np.searchsorted(t, tt, side="right") - 1]
    ax.step(tt / scale, dd, where="post", color="tab:red", lw=0.8, label=f"q_{name} depth, reconstructed from steps")
    ax.set_title(
        f"q_{name} occupancy (capacity {cap})\nno 'rates' snapshots in this log: depth reconstructed from step events",
        fontsize=11,
    )


def _steady_inset(ax: Any, series: tuple, cap: int, steady_from_s: float) -> bool:
    """The time-weighted depth distribution over the steady part in an inset where the line is not.
    Returns whether the queue is mostly full (mean depth over half its capacity; True, and no
    inset, when the steady part holds no weight)."""
    t, depth, weight, _ = series
    steady = t >= steady_from_s
    if not (steady.any() and weight[steady].sum() > 0):
        return True
    d, w = depth[steady], weight[steady]
    mean = float(np.average(d, weights=w))
    full = float(np.average(d >= cap - 0.5, weights=w)) if cap > 0 else float("nan")
    mostly_full = mean > cap / 2
    ins = ax.inset_axes([0.58, 0.1 if mostly_full else 0.5, 0.38, 0.42])  # a full queue leaves the lower half empty
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


@_panel
def plot_queue(adv: Advice, ax: Any = None) -> None:
    """q_hs depth over time with its steady-state distribution in an inset."""
    ax.set_title("Hidden-state queue occupancy")
    if not adv.logs:
        return _no_log(ax)
    log = adv.logs[0]
    spec = log.header.queue_feeding(log.header.consumer)
    if spec is None:
        _note(
            ax,
            f"the log's header names no queue feeding the {role_plural(log.header.consumer)}: "
            f"the hand-off is modelled without a buffer",
            wrap=True,
        )
        return
    name, cap = spec.name, spec.cap
    ax.set_title(f"q_{name} occupancy (capacity {cap})")
    series = _queue_series(log, name, cap)
    if series is None:
        where = Path(log.path).name
        _note(ax, f"no 'rates' snapshots (and no step events) in\n{where}:\nq_{name} occupancy was not logged")
        ax.set_xticks([])
        ax.set_yticks([])
        return
    end_s = max(log.duration_s, 1e-9)
    scale, _ = _time_panel(ax, adv, end_s)
    _draw_depth(ax, series, name, cap, scale)
    ax.axhline(cap, color="0.3", ls=":", lw=1, label=f"capacity {cap}")
    ax.set_ylim(-0.02 * cap, cap * 1.08 if cap > 0 else 1)
    ax.set_ylabel(f"q_{name} depth (batches)")
    mostly_full = _steady_inset(ax, series, cap, adv.observed.steady_from_s)
    ax.legend(loc="lower left" if mostly_full else "upper left", fontsize=8, framealpha=0.9)


def figure_path(path: str | Path) -> Path:
    """The file a figure for ``path`` goes to: ``path``, or ``path/advice.png`` for a directory;
    in the extension's format, one of FORMATS, or PNG for a device or pipe (``/dev/stdout``)."""
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
    """Write ``fig`` to :func:`figure_path` of ``path``, rendered in memory first: a failed write
    raises OSError and removes a file this call created, never leaving a silent partial file."""
    out = figure_path(path)
    buf = io.BytesIO()
    fig.savefig(buf, format=out.suffix.lower().lstrip(".") or "png")
    existed = out.exists()
    try:
        out.write_bytes(buf.getvalue())
    except OSError:
        if not existed and out.is_file():
            out.unlink()
        raise
    return out


def plot_advice(adv: Advice, path: str | Path | None = None, min_efficiency: float = DEFAULT_MIN_EFFICIENCY) -> Any:
    """The four panels in one 2x2 figure."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    p, c = adv.roles
    ob = adv.observed
    seen, rec = split_label(ob.roles[p], ob.roles[c]), adv.decision.recommended
    same = " (the observed split)" if seen == rec else ""
    tok = f" ({ob.tok_s / 1e3:.1f}K tok/s)" if math.isfinite(ob.tok_s) else ""
    run = adv.run if len(adv.run) <= 80 else adv.run[:79] + "\u2026"  # a run name cut to fit the line
    with rc_context({"text.parse_math": False}):  # as in the panels: a '$' in the run name is no TeX
        fig = Figure(figsize=(15, 9.5), layout="constrained", dpi=110)
        axes = fig.subplots(2, 2)
        plot_splits(adv, axes[0, 0])
        plot_efficiency(adv, axes[0, 1], min_efficiency=min_efficiency)
        plot_rates(adv, axes[1, 0])
        plot_queue(adv, axes[1, 1])
        fig.suptitle(
            f"{run}: {adv.settings.units()}; observed {seen} at {ob.bps:.3g} b/s"
            f"{tok}, bottleneck {ob.bottleneck}; recommended split {rec}{same}",
            fontsize=12,
        )
        if path is not None:
            save_figure(fig, path)
    return fig
