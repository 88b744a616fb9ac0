"""One frozen record per split: the projected table's rows as `SplitRow`, for decide/ and present/.

The table (`advisor.project.table`) stays the user's DataFrame view, with columns named after the
roles (``n_target``, ``cap_drafter_bps``, ``target_blocked``). `split_rows` reads it once, after
every stage that writes it (projection, refinement, reconciliation, probes, widening), into a
`SplitRow` per split with its producer and consumer as `RoleRow` fields; the readers downstream
take ``row.producer.cap_bps`` where they took ``df.at[label, f"cap_{p}_bps"]``. It is the one reader
of the role-named columns downstream; the names are spelled once, in `advisor.project.columns`. Values
are the table's, as floats (NaN where the table has NaN). A row's `IntervalParts` carry the parts
of its 95% interval that the odds' joint draw reads (`advisor.decide.odds`) and that the lead of
one split over another is built from (`lead_parts`, `lead_interval`). decide/ and the text report
read only these records, never the table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from advisor.project.columns import RoleColumns, role_columns
from advisor.project.table import ERR_CORNERS, ERR_SAMPLING, ERR_SHARED
from advisor.stats import Z_95


@dataclass(frozen=True)
class IntervalParts:
    """The parts of a split's 95% interval (`advisor.project.table`), all in ln(b/s).

    The coefficients ``shared_log_per_se`` follow ``ERR_SHARED``'s order (the error sources every
    split shares, ln b/s per standard error); ``corners_log`` follows ``ERR_CORNERS``' (the shifts at
    the roles' capacity ranges' corners, 0 where the table has none). NaN where the table has NaN.
    """

    shared_log_per_se: tuple[float, ...]
    own_var_log2: float  # the split's own variance, (ln b/s)^2
    sync_ends_log: tuple[float, float]  # shifts at the ends of an unidentified sync scaling
    corners_log: tuple[float, ...]
    model_sigma_log: float = 0.0  # the model's error scale carried by the row (`advisor.project.model_error`)
    model_miss_log: float = math.nan  # at an observed split, the model's miss there, ln(measured / projected)


def interval_parts(r: Mapping[str, Any]) -> IntervalParts | None:
    """The interval's parts of one table row ``r``."""
    if "err_own_var" not in r:
        return None
    return IntervalParts(
        shared_log_per_se=tuple(_num(r, k) for k in ERR_SHARED),
        own_var_log2=_num(r, "err_own_var"),
        sync_ends_log=(_num(r, "err_sync_lo"), _num(r, "err_sync_hi")),
        corners_log=tuple(_num(r, k) for k in ERR_CORNERS),
        model_sigma_log=_num(r, "err_model_sigma"),
        model_miss_log=_num(r, "err_model_miss") if "err_model_miss" in r else math.nan,
    )


def _num(r: Mapping[str, Any], key: str) -> float:
    """Column ``key`` of row ``r`` as a float: 0 where the table has no such column, NaN where the
    value is not a number."""
    if key not in r:
        return 0.0
    return float(pd.to_numeric(r[key], errors="coerce"))


@dataclass(frozen=True)
class RoleRow:
    """One role at one split: its engines, their capacity and how long they wait."""

    role: str
    workers: int  # engines of the role (N producers or M consumers)
    cap_bps: float  # the pool's capacity, batches/s
    wait_share: float  # a producer's share blocked on a full q_hs, a consumer's starved on an empty one
    gpus: int | None = None  # GPUs the role's engines hold (None: the table has no engine columns)
    gpus_per_worker: int | None = None  # GPUs one engine holds
    engines_by_node: tuple[int, ...] | None = None  # engines per node (None on one node)


@dataclass(frozen=True)
class LinkRow:
    """Across nodes, a split's placement and the link it loads (the table's placement columns)."""

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
    bps_high_open: bool
    tok_s: float
    bound_bps: float
    cap_loader_bps: float  # NaN unless the loader limits input
    efficiency: float
    gpu_util: float
    bottleneck: str
    hs_mean_depth: float
    eta_s: float
    observed: bool
    observed_bps: float
    method: str
    widened: bool
    probe_segments: int = 0  # probe segments that measured the split (`advisor.project.probed`)
    bps_exact: float | None = None  # the exact simulation's rate (None: not simulated)
    link: LinkRow | None = None  # None on one node
    parts: IntervalParts | None = None  # the interval's parts (None: the table carries none)

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


def _role(r: Mapping[str, Any], role: str, cols: RoleColumns, placed: bool) -> RoleRow:
    engines = cols.gpus in r
    return RoleRow(
        role=role,
        workers=int(r[cols.workers]),
        cap_bps=float(r[cols.cap_bps]),
        wait_share=float(r[cols.wait_share]),
        gpus=int(r[cols.gpus]) if engines else None,
        gpus_per_worker=int(r[cols.gpus_per_worker]) if engines else None,
        engines_by_node=tuple(int(x) for x in r[cols.engines_by_node]) if placed else None,
    )


def _link(r: Mapping[str, Any]) -> LinkRow:
    return LinkRow(
        placement_text=r["placement"],
        layout=r["layout"],
        other_layout_bps=float(r["bps_other_layout"]),
        cap_link_bps=float(r["cap_link_bps"]),
        link_util=float(r["link_util"]),
        crossing_share=float(r["crossing_share"]),
        hs_share=float(r["link_hs_share"]),
        sync_share=float(r["link_sync_share"]),
        bps_free_link=float(r.get("bps_free_link", math.nan)),
        bps_logged_place=float(r.get("bps_logged_place", math.nan)),
        logged_placement=str(r.get("logged_placement", "")),
    )


def split_row(label: str, r: Mapping[str, Any], roles: tuple[str, str]) -> SplitRow:
    """The record of one table row ``r`` of split ``label``."""
    p, c = roles
    pc, cc = role_columns(roles)
    placed = "placement" in r and isinstance(r["placement"], str)
    return SplitRow(
        label=label,
        producer=_role(r, p, pc, placed),
        consumer=_role(r, c, cc, placed),
        bps=float(r["bps"]),
        bps_low=float(r["bps_low"]),
        bps_high=float(r["bps_high"]),
        bps_high_open=bool(r.get("bps_high_open", False)),
        tok_s=float(r["tok_s"]),
        bound_bps=float(r["bound_bps"]),
        cap_loader_bps=float(r["cap_loader_bps"]),
        efficiency=float(r["efficiency"]),
        gpu_util=float(r["gpu_util"]),
        bottleneck=str(r["bottleneck"]),
        hs_mean_depth=float(r["hs_mean_depth"]),
        eta_s=float(r["eta_s"]),
        observed=bool(r["observed"]),
        observed_bps=float(r["observed_bps"]),
        method=str(r["method"]),
        widened=bool(r["widened"]),
        probe_segments=int(r.get("probe_segments", 0)),
        bps_exact=float(r["bps_exact"]) if "bps_exact" in r else None,
        link=_link(r) if placed else None,
        parts=interval_parts(r),
    )


def split_rows(roles: tuple[str, str], splits: pd.DataFrame) -> dict[str, SplitRow]:
    """Every row of the table as a `SplitRow`, by label, in the table's order."""
    return {str(label): split_row(str(label), r, roles) for label, r in splits.to_dict("index").items()}


class PairedRow(Protocol):
    """What a lead reads of a split: a `SplitRow`, or a bare table's row (`advisor.decide.odds.DrawRow`)."""

    bps: float
    widened: bool
    parts: IntervalParts | None


@dataclass(frozen=True)
class LeadParts:
    """The lead ``ln(X_a / X_b)`` and its variance, split into what a longer log of the same split
    shrinks (``sampling_var``) and what it does not (``fixed_var``), and the shifts of the lead at
    the ends of an unidentified sync scaling (0 included)."""

    log_lead: float
    sampling_var: float
    fixed_var: float
    shift_lo: float
    shift_hi: float

    def interval(self, sampling_scale: float = 1.0) -> tuple[float, float]:
        """95% interval of ``X_a / X_b - 1``."""
        half = Z_95 * math.sqrt(self.fixed_var + self.sampling_var * sampling_scale)
        return math.expm1(self.log_lead + self.shift_lo - half), math.expm1(self.log_lead + self.shift_hi + half)


def lead_parts(a: PairedRow, b: PairedRow) -> LeadParts | None:
    """The lead of split ``a`` over ``b`` from the shared and own parts of their intervals.

    With ``d_j`` the difference of the two splits' coefficients of shared source j (a source both
    carry alike cancels), the lead's variance is ``sum_j d_j^2 + v_a + v_b``; its sampling part is
    the ``ERR_SAMPLING`` sources'. The ends of an unidentified sync scaling and the corners of the
    capacity ranges are one unknown shared by every split, so the lead is compared at the same end:
    its shifts are the differences of the two rows' shifts there, and 0.
    """
    if a.parts is None or b.parts is None or a.widened or b.widened:
        return None
    if not (a.bps > 0 and b.bps > 0):
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


def lead_interval(a: PairedRow, b: PairedRow) -> tuple[float, float] | None:
    """95% interval of ``X_a / X_b - 1`` (the lead of split ``a`` over ``b``, `lead_parts`)."""
    parts = lead_parts(a, b)
    return parts.interval() if parts is not None else None
