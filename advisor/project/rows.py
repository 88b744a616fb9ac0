"""The projected table: one frozen `SplitRow` per split, what project/ returns and decide/ reads.

`SplitRow.columns` gives a row under the table's column names (documented in
`advisor.project.table`), from which `advisor.advice` builds the user's DataFrame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from advisor.model.chain import ERR_SAMPLING, ERR_SHARED, NO_PARTS, IntervalParts
from advisor.stats import Z_95


@dataclass(frozen=True)
class RoleRow:
    """One role at one split: its engines, their capacity and how long they wait."""

    role: str
    workers: int  # engines of the role (N producers or M consumers)
    cap_bps: float  # the pool's capacity, batches/s
    wait_share: float  # a producer's share blocked on a full q_hs, a consumer's starved on an empty one
    gpus: int | None = None  # GPUs the role's engines hold
    gpus_per_worker: int | None = None  # GPUs one engine holds
    engines_by_node: tuple[int, ...] | None = None  # engines per node (None on one node)


@dataclass(frozen=True)
class LinkRow:
    """Across nodes, a split's placement and the link it loads."""

    placement_text: str  # where the engines sit, in words
    layout: str  # "shared" or "node-local"
    other_layout_bps: float  # the split's rate in its other layout (NaN: none)
    cap_link_bps: float  # the link stage's capacity
    link_util: float  # the busiest link's utilisation
    crossing_share: float  # share of batches that cross a node
    hs_share: float  # share of the link's busy time carrying hidden states
    sync_share: float  # share carrying the drafters' all-reduce
    bps_free_link: float  # the rate with a free link
    bps_logged_place: float  # the rate at the log's own placement (NaN elsewhere)
    logged_placement: str  # the log's placement in words ("" where the nodes differ)


@dataclass(frozen=True)
class SplitRow:
    """One split of the table (columns documented in `advisor.project.table`)."""

    label: str
    producer: RoleRow
    consumer: RoleRow
    bps: float
    bps_low: float
    bps_high: float
    bps_high_open: bool = False
    tok_s: float = math.nan
    bound_bps: float = math.nan
    cap_loader_bps: float = math.nan  # NaN unless the loader limits input
    efficiency: float = math.nan
    gpu_util: float = math.nan
    bottleneck: str = ""
    hs_mean_depth: float = math.nan
    eta_s: float = math.nan
    observed: bool = False
    observed_bps: float = math.nan
    method: str = "analytic"
    widened: bool = False
    probe_segments: int = 0  # probe segments that measured the split (`advisor.project.probed`)
    bps_exact: float | None = None  # the exact simulation's rate (None: not simulated)
    exact_gap_pct: float = math.nan  # bps / bps_exact - 1 when simulated, %
    link: LinkRow | None = None  # None on one node
    parts: IntervalParts | None = None  # the interval's parts (None: drawn from its own interval)

    @property
    def roles(self) -> tuple[RoleRow, RoleRow]:
        return self.producer, self.consumer

    @property
    def counts(self) -> tuple[int, int]:
        """(N, M): the producers' and consumers' engines."""
        return self.producer.workers, self.consumer.workers

    def of(self, role: str) -> RoleRow:
        """The role named ``role``."""
        for r in self.roles:
            if r.role == role:
                return r
        raise KeyError(f"no role {role!r} at {self.label}: {self.producer.role}, {self.consumer.role}")

    def scaled(self, f: float) -> SplitRow:
        """The row at ``f`` times its rate: interval, tok/s, utilisation and efficiency alike, the ETA
        inversely (NaN at ``f`` 0)."""
        return replace(
            self,
            bps=self.bps * f,
            bps_low=self.bps_low * f,
            bps_high=self.bps_high * f,
            tok_s=self.tok_s * f,
            efficiency=self.efficiency * f,
            gpu_util=self.gpu_util * f,
            eta_s=self.eta_s / f if f > 0 else math.nan,
        )

    def widened_by(self, x: float, var: float) -> SplitRow:
        """The row at rate ``x`` carrying ``var`` more (log) variance of its own: into its parts' own
        variance (so leads carry it) and its interval grown to match, never narrowed."""
        half = math.log(self.bps_high / x) if x > 0 and self.bps_high > 0 else 0.0
        grown = math.sqrt(half**2 + Z_95**2 * var)
        parts = self.parts or NO_PARTS
        return replace(
            self,
            parts=replace(parts, own_var_log2=parts.own_var_log2 + var),
            bps_low=min(self.bps_low, x * math.exp(-grown)),
            bps_high=max(self.bps_high, x * math.exp(grown)),
        )

    def _fields(self, *names: str) -> dict[str, object]:
        return {k: getattr(self, k) for k in names}

    def columns(self, probed: bool = False) -> dict[str, object]:
        """The row under the table's column names, in the table's order (``probe_segments`` where
        ``probed``: a table a probe measured)."""
        p, c = self.producer, self.consumer
        out: dict[str, object] = {
            f"n_{p.role}": p.workers,
            f"n_{c.role}": c.workers,
            **self._fields("bps", "bps_low", "bps_high", "bps_high_open", "tok_s", "bound_bps"),
            f"cap_{p.role}_bps": p.cap_bps,
            f"cap_{c.role}_bps": c.cap_bps,
            **self._fields("cap_loader_bps", "efficiency", "gpu_util", "bottleneck"),
            f"{p.role}_blocked": p.wait_share,
            f"{c.role}_starved": c.wait_share,
            **self._fields("hs_mean_depth", "eta_s", "observed", "observed_bps", "method", "widened"),
            **(self.parts.columns() if self.parts is not None else {}),
            f"gpus_{p.role}": p.gpus,
            f"gpus_{c.role}": c.gpus,
            f"gpus_per_{p.role}": p.gpus_per_worker,
            f"gpus_per_{c.role}": c.gpus_per_worker,
        }
        lk = self.link
        if lk is not None:
            out.update(
                {
                    "placement": lk.placement_text,
                    f"nodes_{p.role}": p.engines_by_node,
                    f"nodes_{c.role}": c.engines_by_node,
                    "cap_link_bps": lk.cap_link_bps,
                    "link_util": lk.link_util,
                    "crossing_share": lk.crossing_share,
                    "bps_free_link": lk.bps_free_link,
                    "bps_logged_place": lk.bps_logged_place,
                    "layout": lk.layout,
                    "bps_other_layout": lk.other_layout_bps,
                    "link_hs_share": lk.hs_share,
                    "link_sync_share": lk.sync_share,
                    "logged_placement": lk.logged_placement,
                }
            )
        if self.bps_exact is not None:
            out.update({"bps_exact": self.bps_exact, "exact_gap_pct": self.exact_gap_pct})
        if probed:
            out["probe_segments"] = self.probe_segments
        parts = self.parts or NO_PARTS
        out.update({"err_model_sigma": parts.model_sigma_log, "err_model_miss": parts.model_miss_log})
        return out


@dataclass(frozen=True)
class LeadParts:
    """The lead ``ln(X_a / X_b)`` and its variance, split into what a longer log of the same split
    shrinks (``sampling_var``) and what it does not (``fixed_var``), and the lead's shifts at the
    ends of an unidentified sync scaling (0 included)."""

    log_lead: float
    sampling_var: float
    fixed_var: float
    shift_lo: float
    shift_hi: float

    def interval(self, sampling_scale: float = 1.0) -> tuple[float, float]:
        """95% interval of ``X_a / X_b - 1``."""
        half = Z_95 * math.sqrt(self.fixed_var + self.sampling_var * sampling_scale)
        return math.expm1(self.log_lead + self.shift_lo - half), math.expm1(self.log_lead + self.shift_hi + half)


def lead_parts(a: SplitRow, b: SplitRow) -> LeadParts | None:
    """The lead of split ``a`` over ``b`` from the shared and own parts of their intervals.

    With ``d_j`` the difference of the two rows' coefficients of shared source j, the lead's
    variance is ``sum_j d_j^2 + v_a + v_b``, its sampling part the ``ERR_SAMPLING`` sources'. The
    sync ends and the capacity corners are one unknown shared by every split: the lead's shifts
    are the differences of the two rows' shifts there, and 0.
    """
    if a.parts is None or b.parts is None or a.widened or b.widened or not (a.bps > 0 and b.bps > 0):
        return None
    pa, pb = a.parts, b.parts
    diff = dict(zip(ERR_SHARED, (x - y for x, y in zip(pa.shared_log_per_se, pb.shared_log_per_se))))
    samp = sum(diff[k] ** 2 for k in ERR_SAMPLING)
    fixed = sum(diff[k] ** 2 for k in ERR_SHARED if k not in ERR_SAMPLING) + pa.own_var_log2 + pb.own_var_log2
    if not (math.isfinite(samp) and math.isfinite(fixed)):
        return None
    sync = tuple(x - y for x, y in zip(pa.sync_ends_log, pb.sync_ends_log))
    corners = tuple(x - y for x, y in zip(pa.corners_log, pb.corners_log))
    shifts = (0.0, *sync, *corners)
    return LeadParts(
        log_lead=math.log(a.bps / b.bps), sampling_var=samp, fixed_var=fixed, shift_lo=min(shifts), shift_hi=max(shifts)
    )


def lead_interval(a: SplitRow, b: SplitRow) -> tuple[float, float] | None:
    """95% interval of ``X_a / X_b - 1`` (`lead_parts`)."""
    parts = lead_parts(a, b)
    return parts.interval() if parts is not None else None
