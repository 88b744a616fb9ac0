"""Mergeable summaries of rate logs: what the advisor needs from a log, in memory that does not grow with it.

A :class:`Summary` is built chunk by chunk by `advisor.ingest.stream` (or merged from other summaries) and keeps:

- per role: the number of steps, and how many have ``busy > 0`` and ``tokens > 0`` (the usability
  check);
- **time-binned sums** over the whole log: for each bin of width ``W = BASE_BIN_S * 2**level``
  from t = 0 (``NBINS`` bins) and each role, n, sum busy, sum busy^2, sum wait, sum blocked, sum
  tokens, sum seqs and the count of steps that gave seqs; for syncs, n and sum dur. When a time
  past the last bin arrives, bins fold pairwise (level + 1). Two summaries align by folding the
  finer one to the coarser level, after which bins add: sums merge exactly (up to the order of
  floating-point additions);
- a **bottom-k sample** of each role's steps (and of the syncs; `advisor.ingest.sample`): every
  row gets a 64-bit key, a hash (splitmix64) of its content (role, t, worker, batch, tokens,
  busy), and the ``k`` rows with the smallest keys are kept. The keys are uniform, so the kept
  rows are a uniform sample without replacement; the bottom k of a union is the bottom k of the
  parts' bottom k, so samples merge exactly and deterministically: the sample of merged per-rank
  summaries is the very sample of the whole log. While a role has at most ``k`` steps nothing is
  dropped and its rows stay in log order, so a log below the size threshold reads exactly as if
  held whole;
- every rates snapshot (one a minute or so: at that pace a week is ~10k rows), the last ``end``
  event, the counts of unknown events, the number of lines and the largest t seen.

A summary serialises to one JSON object (``{"dflash_summary": 1, ...}``, arrays as base64 of
little-endian float64) that `advisor.ingest.load.load_log` reads like a log: `dflash-advise summarize`
maps logs to summaries where they live and reduces them into one (`advisor.ingest.load.summarize_paths`),
and the advisor reads that.

When a role was sampled (:attr:`Summary.sampled`), counts, rates and shares come from the bins
(:class:`Totals`, through `RunLog.window_sums` and the like); the sample serves variability,
the step-time line, simulation and plots.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from advisor.errors import LogError, display_path, short_repr
from advisor.ingest.sample import Sample, row_keys, stable_order
from advisor.ingest.schema import RunHeader, parse_header, validate_event
from advisor.records import Step, Sync

FORMAT_VERSION = 1
MAGIC = b'{"dflash_summary"'
DEFAULT_SAMPLE_ROWS = 300_000  # per role: ~24 MB of rows, and a Huber line on them costs ~0.2 s
NBINS = 8192
BASE_BIN_S = 1.0 / 16.0
MAX_SUMMARY_BYTES = 4 << 30

# the numbers of a step and of a sync (the records' fields but the role), as sampled
STEP_FIELDS = tuple(n for n, s in Step.SPECS.items() if s.kind is not str)
SYNC_FIELDS = tuple(n for n, s in Sync.SPECS.items() if s.kind is not str)
BIN_FIELDS = ("n", "busy", "busy2", "wait", "blocked", "tokens", "seqs", "n_seqs")
SYNC_BIN_FIELDS = ("n", "dur")


class _Bins:
    """Time-binned sums, rows x NBINS, bin i = [i W, (i+1) W), W = BASE_BIN_S * 2**level."""

    def __init__(self, n_rows: int, level: int = 0, arr: np.ndarray | None = None):
        self.level = level
        self.arr = np.zeros((n_rows, NBINS)) if arr is None else arr

    def add_bins(self, other: _Bins) -> None:
        """Add ``other``'s sums (folded to the coarser level of the two; ``other`` left as it is)."""
        level = max(self.level, other.level)
        self.fold_to(level)
        ob = _Bins(len(other.arr), other.level, other.arr)  # (a fold makes new arrays)
        ob.fold_to(level)
        self.arr += ob.arr

    @property
    def width_s(self) -> float:
        return BASE_BIN_S * 2.0**self.level

    def fold_to(self, level: int) -> None:
        if level <= self.level:
            return
        f = min(2 ** (level - self.level), NBINS)
        folded = self.arr.reshape(len(self.arr), NBINS // f, f).sum(axis=2)
        self.arr = np.zeros_like(self.arr)
        self.arr[:, : NBINS // f] = folded
        self.level = level

    def level_for(self, t_max: float) -> int:
        lv = self.level
        while t_max >= NBINS * BASE_BIN_S * 2.0**lv:
            lv += 1
        return lv

    def add_by_row(
        self, t: np.ndarray, groups: np.ndarray, bases: Sequence[int], values: Sequence[np.ndarray | None]
    ) -> None:
        """Add ``values[j]`` (None: a count) of each entry to row ``bases[group] + j``."""
        if not len(t):
            return
        self.fold_to(self.level_for(float(t.max())))
        n_groups = len(bases)
        at = np.minimum((t / self.width_s).astype(np.int64), NBINS - 1)
        idx = at + groups * NBINS
        present = np.unique(groups)  # (the other groups' sums are zeros: nothing to add)
        base = np.asarray(bases)[present]
        for j, v in enumerate(values):
            sums = np.bincount(idx, weights=v, minlength=n_groups * NBINS).reshape(n_groups, NBINS)
            self.arr[base + j] += sums[present]


@dataclass(frozen=True)
class Totals:
    """A sampled log's exact time-binned sums (see the module docstring); what fit and steady read."""

    roles: tuple[str, ...]
    pruned: tuple[str, ...]  # the roles whose steps were sampled
    width_s: float
    bins: np.ndarray  # (len(roles) * len(BIN_FIELDS) + len(SYNC_BIN_FIELDS), NBINS)

    def series(self, role: str, name: str) -> np.ndarray:
        """One binned sum of one role over the whole log."""
        return self.bins[self.roles.index(role) * len(BIN_FIELDS) + BIN_FIELDS.index(name)]

    def window(self, role: str | None, start_s: float, end_s: float) -> dict[str, float]:
        """Sums over the bins inside [start_s, end_s] of ``role``'s steps, or (None) of the syncs
        (window edges from the binned rule fall on bin edges)."""
        lo = int(math.floor(start_s / self.width_s + 1e-9))
        hi = int(math.ceil(end_s / self.width_s - 1e-9))
        if role is None:
            names, base = SYNC_BIN_FIELDS, len(self.roles) * len(BIN_FIELDS)
        else:
            names, base = BIN_FIELDS, self.roles.index(role) * len(BIN_FIELDS)
        return {f: float(self.bins[base + i][lo:hi].sum()) for i, f in enumerate(names)}


class Summary:
    """The mergeable summary of one log, or of several logs of one run (see the module docstring)."""

    def __init__(
        self, header_obj: Mapping[str, Any], header: RunHeader, path: str, *, sample_rows: int = DEFAULT_SAMPLE_ROWS
    ):
        self.header_obj = dict(header_obj)
        self.header = header
        self.paths = [path]
        # the log files folded in (resolved path, size): a run's identity, so the same log is never merged twice
        self.sources: list[dict[str, Any]] = []
        self.given: dict[str, str] = {}  # source path -> the file it came in by (a log or a summary), for messages
        self.sample_rows = int(sample_rows)
        self.roles = tuple(header.roles)
        self.n_lines = 0
        self.unknown: dict[str, int] = {}
        self.unknown_fields: dict[str, int] = {}  # "ev.field" -> times seen (advisor.ingest.schema.unknown_fields)
        self.end: dict[str, Any] | None = None
        self.t_max_s = -math.inf
        self.counts = {r: np.zeros(3, dtype=np.int64) for r in self.roles}  # n, busy > 0, tokens > 0
        self.step_fields = STEP_FIELDS + header.node_step_fields
        self.samples = {r: Sample(self.step_fields, self.sample_rows) for r in self.roles}
        self.sync_sample = Sample(SYNC_FIELDS, self.sample_rows)
        self.bins = _Bins(len(self.roles) * len(BIN_FIELDS) + len(SYNC_BIN_FIELDS))
        self.rates: list[dict[str, np.ndarray]] = []

    # --- building

    def add_steps(self, cols: Mapping[str, np.ndarray], role_codes: np.ndarray) -> None:
        """Fold steps into the summary.

        Every role at once: one pass per binned sum over all rows, the role folded into the bin
        index (the same sums as a pass per role).
        """
        t = np.asarray(cols["t"], dtype=np.float64)
        if not len(t):
            return
        self.t_max_s = max(self.t_max_s, float(t.max()))
        codes = np.asarray(role_codes, dtype=np.int64)
        n_roles, nb = len(self.roles), len(BIN_FIELDS)
        part = {f: np.asarray(cols[f], dtype=np.float64) for f in self.step_fields}
        busy, tok = part["busy"], part["tokens"]
        n = np.bincount(codes, minlength=n_roles)
        busy_pos = np.bincount(codes[busy > 0], minlength=n_roles)
        tok_pos = np.bincount(codes[tok > 0], minlength=n_roles)
        for j, r in enumerate(self.roles):
            self.counts[r] += (n[j], busy_pos[j], tok_pos[j])
        has_seqs = ~np.isnan(part["seqs"])
        self.bins.add_by_row(
            t,
            codes,
            range(0, n_roles * nb, nb),
            (
                None,
                busy,
                busy * busy,
                np.nan_to_num(part["wait"]),
                np.nan_to_num(part["blocked"]),
                tok,
                np.where(has_seqs, part["seqs"], 0.0),
                has_seqs.astype(np.float64),
            ),
        )
        keys = row_keys(part, codes)
        for i, r in enumerate(self.roles):
            mine = codes == i
            if mine.any():
                self.samples[r].add(part, keys, rows=mine)

    def add_syncs(self, cols: Mapping[str, np.ndarray]) -> None:
        """Fold syncs into the summary: their binned count and seconds, and the sync sample."""
        t = np.asarray(cols["t"], dtype=np.float64)
        if not len(t):
            return
        self.t_max_s = max(self.t_max_s, float(t.max()))
        base = len(self.roles) * len(BIN_FIELDS)
        dur = np.asarray(cols["dur"], dtype=np.float64)
        self.bins.add_by_row(t, np.zeros(len(t), np.int64), [base], (None, np.nan_to_num(dur)))
        self.sync_sample.add(cols, row_keys(cols, len(self.roles), ("t", "workers", "dur")))

    def add_rates(self, cols: Mapping[str, np.ndarray]) -> None:
        """Keep rates snapshots, every one."""
        if len(cols.get("t", ())):
            self.t_max_s = max(self.t_max_s, float(np.nanmax(cols["t"])))
            self.rates.append({k: np.asarray(v, dtype=np.float64) for k, v in cols.items()})

    def add_unknown(self, counts: Mapping[str, int], *, fields: bool = False) -> None:
        """Count events of unknown types (``fields``: unknown fields, "ev.field")."""
        into = self.unknown_fields if fields else self.unknown
        for k, v in counts.items():
            into[k] = into.get(k, 0) + int(v)

    def set_end(self, end: Mapping[str, Any] | None) -> None:
        """The run's end across merged files: the latest (within a file it is the last ``end`` event)."""
        if end is not None and (self.end is None or float(end.get("t") or 0.0) >= float(self.end.get("t") or 0.0)):
            self.end = dict(end)

    # --- reading

    @property
    def sampled(self) -> bool:
        return any(s.pruned for s in self.samples.values()) or self.sync_sample.pruned

    def n_steps(self, role: str) -> int:
        """How many steps one role logged: all of them, not only those sampled."""
        return int(self.counts[role][0])

    def steps(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Kept step rows of all roles, in time order."""
        parts, by_time, times, codes = [], [], [], []
        start = 0
        for i, r in enumerate(self.roles):
            c, keys = self.samples[r].compact()
            parts.append(c)
            # (a pruned sample is in this order already: its sort costs little; a summary file of
            # an older version holds it by key)
            order = stable_order(c["t"], keys)
            by_time.append(start + order)
            times.append(c["t"][order])
            codes.append(np.full(len(keys), i, dtype=np.int64))
            start += len(keys)
        # time order; equal times by role, then by key (content): the same order whichever files
        # the rows came from, so merged summaries give the very frames of the whole log (numpy's
        # stable sort merges the roles' runs, in order already, in linear time)
        rows = np.concatenate(by_time)[np.argsort(np.concatenate(times), kind="stable")]
        out = {f: np.concatenate([c[f] for c in parts])[rows] for f in self.step_fields}
        return out, np.concatenate(codes)[rows]

    def rates_columns(self) -> dict[str, np.ndarray]:
        """Every rates snapshot held, as one table."""
        if not self.rates:
            return {}
        keys = list(self.rates[0])
        return {k: np.concatenate([r[k] for r in self.rates]) for k in keys}

    def totals(self) -> Totals:
        """The exact binned sums, for what reads a sampled log (fit, steady)."""
        return Totals(
            roles=self.roles,
            pruned=tuple(r for r in self.roles if self.samples[r].pruned),
            width_s=self.bins.width_s,
            bins=self.bins.arr.copy(),
        )

    # --- merging

    def add_source(self, path: str | Path) -> None:
        """Record ``path`` as one more log file this summary was read from (a run read at once)."""
        p = Path(path)
        try:
            size = p.stat().st_size
            key = str(p.resolve())
        except OSError:
            size, key = None, str(p)
        self.sources.append({"path": key, "bytes": size})
        self.given[key] = str(path)

    def _names(self) -> str:
        """The files this summary came in by, for a message."""
        names = list(dict.fromkeys(self.given.values())) or self.paths[:1]
        return ", ".join(display_path(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")

    def _check_not_merged(self, other: Summary, copies: bool = True) -> None:
        """Refuse ``other`` when it holds a log this summary holds already (by file, or by identical
        steps; ``copies`` False: by file only, the caller tests the steps of all its merges at once,
        `advisor.ingest.sample.copied_keys`)."""
        for s in other.sources:
            if s["path"] in self.given:  # (keyed by the sources' paths)
                held = self.given[s["path"]]
                by = other.given.get(s["path"], s["path"])
                if held == by:
                    raise LogError(by, None, "is given twice: merged, its steps would count twice; give each file once")
                raise LogError(
                    by,
                    None,
                    f"holds the log {display_path(s['path'])}, which {display_path(held)} holds "
                    f"already: merged, its steps would count twice; give each log once",
                )
        for r in self.roles if copies else ():
            same = self.samples[r].count_held(other.samples[r].compact()[1])
            if same:
                a, b = self._names(), other._names()
                raise LogError(
                    b,
                    None,
                    f"has {same} '{r}' steps identical to steps in {a} (the same log twice, "
                    f"or a copy of it): merged, they would count twice; give each log once",
                )

    def merge(self, other: Summary, *, copies: bool = True) -> Summary:
        """Fold ``other`` into this one.

        Refused when ``other`` holds a log already in this one: the same file (``sources``), or
        steps identical to this one's (a copy), which would count twice.
        """
        if comparable_header(other.header_obj) != comparable_header(self.header_obj):
            raise LogError(
                other.paths[0],
                None,
                f"has another 'run' header than {self.paths[0]}: summaries merge only across the files of one run",
                "run",
            )
        self._check_not_merged(other, copies)
        self.paths += other.paths
        self.sources += other.sources
        self.given.update(other.given)
        self.n_lines += other.n_lines
        self.set_end(other.end)
        self.add_unknown(other.unknown)
        self.add_unknown(other.unknown_fields, fields=True)
        self.t_max_s = max(self.t_max_s, other.t_max_s)
        self.sample_rows = min(self.sample_rows, other.sample_rows)
        for r in self.roles:
            self.counts[r] += other.counts[r]
            oc, ok = other.samples[r].compact()
            self.samples[r].k = self.sample_rows
            # (parts pile up to 2k rows before a compaction, as when one file is read: the same
            # sample, without concatenating everything held at every merge)
            self.samples[r].add(oc, ok, other.samples[r].pruned)
        oc, ok = other.sync_sample.compact()
        self.sync_sample.k = self.sample_rows
        self.sync_sample.add(oc, ok, other.sync_sample.pruned)
        self.bins.add_bins(other.bins)
        self.rates += other.rates
        return self

    # --- serialising

    def to_json(self) -> dict[str, Any]:
        """The summary as one JSON-ready object (`write` writes it, `read_summary` reads it)."""
        return {
            "dflash_summary": FORMAT_VERSION,
            "header": self.header_obj,
            "paths": self.paths,
            "sources": self.sources,
            "sample_rows": self.sample_rows,
            "n_lines": self.n_lines,
            "unknown_events": self.unknown,
            "unknown_fields": self.unknown_fields,
            "end": self.end,
            "t_max_s": self.t_max_s if math.isfinite(self.t_max_s) else None,
            "counts": {r: self.counts[r].tolist() for r in self.roles},
            "samples": {r: _sample_json(self.samples[r]) for r in self.roles},
            "syncs": _sample_json(self.sync_sample),
            "bins": {"level": self.bins.level, "data": _enc(self.bins.arr)},
            "rates": {k: _enc(v) for k, v in self.rates_columns().items()},
        }

    def write(self, path: str | Path) -> None:
        """Write the summary (`to_json`) to a file as one line of compact JSON."""
        text = json.dumps(self.to_json(), separators=(",", ":"), allow_nan=False)
        Path(path).write_text(text + "\n")


def comparable_header(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A header's fields that the files of one run must share: all but its own ``t``, which may
    differ by a few ms between ranks."""
    return {k: v for k, v in obj.items() if k != "t"}


def _enc(a: np.ndarray) -> dict[str, Any]:
    a = np.ascontiguousarray(a)
    dt = "<u8" if a.dtype == np.uint64 else "<i8" if a.dtype.kind == "i" else "<f8"
    return {"dtype": dt, "shape": list(a.shape), "b64": base64.b64encode(a.astype(dt).tobytes()).decode("ascii")}


def _sample_json(sample: Sample) -> dict[str, Any]:
    cols, keys = sample.compact()
    return {"pruned": sample.pruned, "keys": _enc(keys), **{f: _enc(cols[f]) for f in sample.fields}}


def _read_sample(sample: Sample, obj: Mapping[str, Any], path: str, name: str) -> None:
    cols = {f: _dec(obj[f], path, f"{name}.{f}") for f in sample.fields}
    sample.add(cols, _dec(obj["keys"], path, f"{name}.keys"), bool(obj["pruned"]))
    sample.compact()


def _dec(obj: Any, path: str, name: str) -> np.ndarray:
    try:
        dt = obj["dtype"]
        if dt not in ("<u8", "<i8", "<f8"):
            raise ValueError(dt)
        a = np.frombuffer(base64.b64decode(obj["b64"], validate=True), dtype=dt)
        return a.reshape([int(x) for x in obj["shape"]]).copy()
    except (KeyError, TypeError, ValueError, binascii.Error):
        raise LogError(path, None, "is not a valid summary: a bad array", name) from None


def is_summary(path: str | Path) -> bool:
    """Whether the file starts like a summary (cheap: reads 17 bytes of a regular file; a FIFO is never opened)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def read_summary(path: str | Path) -> Summary:
    """A summary written by :meth:`Summary.write`, read back."""
    spath = str(path)
    size = os.stat(path).st_size
    if size > MAX_SUMMARY_BYTES:
        raise LogError(spath, None, f"is larger than a summary can be ({size} bytes)")
    try:
        obj = json.loads(Path(path).read_bytes())
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise LogError(spath, 1, f"is not a valid summary (not JSON: {str(e)[:80]})") from None
    if not isinstance(obj, dict) or obj.get("dflash_summary") != FORMAT_VERSION:
        raise LogError(
            spath,
            1,
            f"is a summary of format {obj.get('dflash_summary')!r} if any; this advisor reads format {FORMAT_VERSION}",
            "dflash_summary",
        )
    header = parse_header(obj.get("header"), spath, 1)
    _check_columns(obj, spath)
    if "end" not in obj:
        raise LogError(spath, None, "is not a valid summary (missing 'end')", "end")
    end = _checked_end(obj["end"], header, spath)
    try:
        s = Summary(obj["header"], header, spath, sample_rows=int(obj["sample_rows"]))
        s.paths = [str(p) for p in obj["paths"]]
        # (additive: a summary written before it has no sources; its steps still refuse a second merge)
        s.sources = [{"path": str(x["path"]), "bytes": x.get("bytes")} for x in obj.get("sources", [])]
        s.given = {x["path"]: spath for x in s.sources} or {spath: spath}
        s.n_lines = int(obj["n_lines"])
        s.unknown = {str(k): int(v) for k, v in obj["unknown_events"].items()}
        s.unknown_fields = {str(k): int(v) for k, v in obj.get("unknown_fields", {}).items()}  # (additive)
        s.end = end
        s.t_max_s = -math.inf if obj["t_max_s"] is None else float(obj["t_max_s"])
        for r in s.roles:
            s.counts[r] = np.asarray(obj["counts"][r], dtype=np.int64).reshape(3)
            _read_sample(s.samples[r], obj["samples"][r], spath, f"samples.{r}")
        _read_sample(s.sync_sample, obj["syncs"], spath, "syncs")
        arr = _dec(obj["bins"]["data"], spath, "bins")
        if arr.shape != s.bins.arr.shape:
            raise LogError(spath, None, f"is not a valid summary: bins of shape {arr.shape}", "bins")
        s.bins = _Bins(arr.shape[0], int(obj["bins"]["level"]), arr)
        rates = {str(k): _dec(v, spath, f"rates.{k}") for k, v in obj["rates"].items()}
        if rates:
            s.rates = [rates]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise LogError(spath, None, f"is not a valid summary (missing or bad {e})") from None
    return s


def _checked_end(end: Any, header: RunHeader, path: str) -> dict[str, Any] | None:
    """A summary's ``end``: none, or an ``end`` event as a log's reader checks it (merging compares
    its ``t``: a string there was an internal error, found by fuzzing: fuzz/)."""
    if end is None:
        return None
    if not isinstance(end, dict) or end.get("ev", "end") != "end":
        raise LogError(path, None, "is not an 'end' event (not a valid summary)", "end")
    try:
        validate_event({**end, "ev": "end"}, header, path, 1)
    except LogError as e:
        raise LogError(path, None, f"is an end event whose field '{e.field}' {e.message}", "end") from None
    return end


MAX_BIN_LEVEL = 1000  # bins of 2**1000 / 16 s: past any run (and float64's range is 2**1024)


def _check_columns(obj: Mapping[str, Any], path: str) -> None:
    """What the arrays of a summary must agree on before they are decoded: counts at least one
    (a line, a sample row), equal lengths within a table (a sample's columns and keys, the syncs,
    the rates), a bin level in range. LogError naming the field (found by fuzzing: fuzz/)."""

    def whole(name: str, v: Any, lo: int, hi: int | None = None) -> None:
        if not isinstance(v, int) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
            raise LogError(
                path,
                None,
                f"must be a whole number from {lo}{f' to {hi}' if hi is not None else ' up'}, "
                f"got {short_repr(v)} (not a valid summary)",
                name,
            )

    def same_length(name: str, table: Any) -> None:
        if not isinstance(table, Mapping):
            return  # decoding names what is missing
        shapes = {k: v.get("shape") for k, v in table.items() if isinstance(v, Mapping)}
        if len({json.dumps(v) for v in shapes.values()}) > 1:
            raise LogError(
                path,
                None,
                "is not a valid summary: its columns differ in length "
                f"({', '.join(f'{k}: {v}' for k, v in list(shapes.items())[:4])})",
                name,
            )

    whole("sample_rows", obj.get("sample_rows"), 1)
    whole("n_lines", obj.get("n_lines"), 1)
    bins = obj.get("bins")
    if isinstance(bins, Mapping):
        whole("bins.level", bins.get("level"), 0, MAX_BIN_LEVEL)
    samples = obj.get("samples")
    for r, table in samples.items() if isinstance(samples, Mapping) else ():
        same_length(f"samples.{r}", table)
    same_length("syncs", obj.get("syncs"))
    same_length("rates", obj.get("rates"))
    counts = obj.get("counts")
    for r, c in counts.items() if isinstance(counts, Mapping) else ():
        if not isinstance(c, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in c):
            raise LogError(
                path, None, f"is not a valid summary: counts {short_repr(c)} are not whole numbers >= 0", f"counts.{r}"
            )
