"""Exact order statistics (values at given ranks) of any float64 column of a streamed dataset.

Equal-mass bins over a variable (VECE's ``pandas.qcut`` edges, the 5%/95% ends of the LOESS
grid, the LOESS groups of a variable with many distinct values) are percentiles, and numpy's
linear percentile needs the values at two ranks of the sorted column.  Streaming, those values
are found exactly — no sketch error — by a radix search over an order-preserving 64-bit key of
the value (:func:`order_keys`): the first pass histograms the top 16 bits of every key; each
later pass either **collects** the keys of the narrowed ranges (when they hold few rows in all)
or **histograms** each range into sub-ranges and keeps the one holding the rank.  A range of one
key is a resolved value, so heavy ties end the search early.  Continuous data take two or three
passes; every pass is a mergeable state (int64 counts, collected keys), so the result does not
depend on partitioning and the same code runs on the Dask engine.

Only values are searched (ties need no row order here): :mod:`calcheck.streaming.select` is the
score-and-row-id search that positional score bins need.  The variables' passes
(:mod:`calcheck.streaming.variables`) and the audit's (:mod:`calcheck.streaming.segments`) share
the column scan (:class:`ColumnScan`) and the driver of the search (:func:`search_ranks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import numpy as np

from calcheck._typing import FloatArray, IntArray, PassSpec, PassState
from calcheck.metrics.vece import MAX_GROUPS, lerp, percentile_plan
from calcheck.streaming.runner import Source
from calcheck.tuning import DEFAULT, Tuning

KEY_BITS = 64
FIRST_SHIFT = 48              # the first pass: 2^16 buckets over the whole key space
SUB_BITS = 16                 # a later pass splits a range into ≤ 2^16 sub-ranges ...
MIN_SUB_BITS = 4              # (≤ Tuning.rank_hist_buckets over all ranges of a pass: 8 MB)
SMALL_RANGE = 64              # a range of at most this many rows is always collected (and all
                              # ranges while they hold ≤ Tuning.rank_collect_rows rows)
_SIGN = np.uint64(1 << 63)


def order_keys(x: FloatArray) -> np.ndarray:
    """uint64 keys ordered as the float64 values (no NaN); −0.0 and 0.0 share a key."""
    b = (np.asarray(x, dtype=np.float64) + 0.0).view(np.uint64)     # −0.0 + 0.0 = +0.0
    return np.where(b >> np.uint64(63) != 0, ~b, b | _SIGN)


def key_value(key: int) -> float:
    """The float64 value of an :func:`order_keys` key."""
    k = np.uint64(key)
    bits = k ^ _SIGN if k & _SIGN else ~k
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


@dataclass(frozen=True)
class Range:
    """Keys in [lo, hi] (inclusive), histogrammed into buckets of 2^shift keys, or collected
    (``shift`` < 0)."""

    lo: int
    hi: int
    shift: int

    @property
    def buckets(self) -> int:
        return 0 if self.shift < 0 else ((self.hi - self.lo) >> self.shift) + 1


@dataclass(frozen=True)
class RankPassSpec:
    """The disjoint key ranges one pass looks at, per column (sorted by ``lo``)."""

    ranges: tuple[tuple[Range, ...], ...]

    def new(self) -> RankPassState:
        return RankPassState(self)


@dataclass
class RankPassState:
    """Per column: int64 bucket counts of the histogram ranges (flat, range i owning
    ``offsets[i]:offsets[i+1]``) and the keys of the collect ranges (with their range index)."""

    spec: RankPassSpec
    counts: list[IntArray] = field(default_factory=list)
    keys: list[list[tuple[IntArray, np.ndarray]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._tables = [_range_table(r) for r in self.spec.ranges]
        self._sorted: dict[int, tuple[IntArray, np.ndarray]] = {}
        if not self.counts:
            self.counts = [np.zeros(int(t[4][-1]), dtype=np.int64) for t in self._tables]
            self.keys = [[] for _ in self.spec.ranges]

    def add(self, column: int, keys: np.ndarray) -> None:
        """Count (or collect) the keys of one batch of column ``column``."""
        lo, hi, shift, collect, offsets = self._tables[column]
        if lo.shape[0] == 0 or keys.shape[0] == 0:
            return
        if lo.shape[0] == 1 and not collect[0] and lo[0] == 0 and hi[0] == ~np.uint64(0):
            self.counts[column] += np.bincount((keys >> shift[0]).astype(np.intp),
                                               minlength=self.counts[column].shape[0])
            return
        rid = np.searchsorted(lo, keys, side="right").astype(np.intp) - 1
        inside = rid >= 0
        rid_c = np.maximum(rid, 0)
        inside &= keys <= hi[rid_c]
        if not inside.any():
            return
        k, r = keys[inside], rid_c[inside]
        hist = ~collect[r]
        if hist.any():
            kh, rh = k[hist], r[hist]
            idx = offsets[rh] + ((kh - lo[rh]) >> shift[rh]).astype(np.intp)
            self.counts[column] += np.bincount(idx, minlength=self.counts[column].shape[0])
        if not hist.all():
            self.keys[column].append((r[~hist], k[~hist]))

    def merge(self, other: RankPassState) -> RankPassState:
        for c in range(len(self.counts)):
            self.counts[c] += other.counts[c]
            self.keys[c].extend(other.keys[c])
        return self

    def collected(self, column: int, index: int) -> np.ndarray:
        """The sorted keys collected by range ``index`` of ``column``."""
        cache = self._sorted.get(column)
        if cache is None:
            parts = self.keys[column]
            r = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.intp)
            k = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.uint64)
            order = np.lexsort((k, r))                 # by range, then key
            r, k = r[order], k[order]
            nr = len(self.spec.ranges[column])
            cache = (np.searchsorted(r, np.arange(nr + 1), side="left"), k)
            self._sorted[column] = cache
        bounds, keys = cache
        return keys[bounds[index]:bounds[index + 1]]

    def histogram(self, column: int, index: int) -> IntArray:
        offsets = self._tables[column][4]
        return self.counts[column][offsets[index]:offsets[index + 1]]


def _range_table(ranges: tuple[Range, ...]) -> tuple[np.ndarray, ...]:
    lo = np.array([r.lo for r in ranges], dtype=np.uint64)
    hi = np.array([r.hi for r in ranges], dtype=np.uint64)
    shift = np.array([max(r.shift, 0) for r in ranges], dtype=np.uint64)
    collect = np.array([r.shift < 0 for r in ranges], dtype=bool)
    sizes = [r.buckets for r in ranges]
    offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.intp)
    return lo, hi, shift, collect, offsets


FULL = Range(0, (1 << KEY_BITS) - 1, FIRST_SHIFT)


@dataclass
class _Target:
    rank: int
    lo: int = 0                      # the rank's row is among the keys in [lo, hi] ...
    hi: int = (1 << KEY_BITS) - 1
    base: int = 0                    # ... after ``base`` rows with smaller keys
    count: int = -1                  # rows in [lo, hi] (-1: not known yet)
    key: int | None = None           # resolved


class RankSearch:
    """Drives the passes that resolve the values at ``ranks`` (0-based, of the ascending sort) of
    one column of ``n`` rows.  :meth:`ranges` gives the next pass's ranges (none when done);
    :meth:`absorb` reads that pass's state; ``tuning`` bounds a pass's histogram and the rows
    it collects."""

    def __init__(self, n: int, ranks: list[int], tuning: Tuning = DEFAULT) -> None:
        self.n = n
        self.tuning = tuning
        self.targets = {r: _Target(r) for r in sorted(set(ranks)) if 0 <= r < n}
        self._pass: tuple[Range, ...] = ()
        self._owners: list[list[_Target]] = []

    @property
    def done(self) -> bool:
        return all(t.key is not None for t in self.targets.values())

    def first(self) -> tuple[Range, ...]:
        """The first pass: every key, into 2^16 buckets of its top bits."""
        self._pass = (FULL,) if self.targets else ()
        self._owners = [list(self.targets.values())] if self.targets else []
        return self._pass

    def ranges(self) -> tuple[Range, ...]:
        self._pass, self._owners = next_ranges(self.targets.values(), self.tuning)
        return self._pass

    def absorb(self, state: RankPassState, column: int) -> None:
        """Narrow (or resolve) every open rank with the pass just run."""
        for i, rng in enumerate(self._pass):
            mine = self._owners[i]
            if rng.shift < 0:
                keys = state.collected(column, i)
                for t in mine:
                    t.key = int(keys[t.rank - t.base])
                continue
            hist = state.histogram(column, i)
            cum = np.cumsum(hist)
            for t in mine:
                j = int(np.searchsorted(cum, t.rank - t.base, side="right"))
                t.base += int(cum[j - 1]) if j else 0
                t.lo = rng.lo + (j << rng.shift)
                t.hi = min(rng.hi, rng.lo + ((j + 1) << rng.shift) - 1)
                t.count = int(hist[j])
                if t.lo == t.hi:
                    t.key = t.lo

    def resolve_sorted(self, values: FloatArray, counts: IntArray) -> None:
        """Resolve every rank from the column's distinct ``values`` (ascending) and their row
        ``counts`` — no pass needed."""
        cum = np.cumsum(counts)
        for t in self.targets.values():
            t.key = int(order_keys(values[[int(np.searchsorted(cum, t.rank, side="right"))]])[0])

    def value(self, rank: int) -> float:
        key = self.targets[rank].key
        assert key is not None, f"rank {rank} not resolved"
        return key_value(key)

    def values(self, ranks: Iterable[int]) -> FloatArray:
        return np.array([self.value(int(r)) for r in ranks])

    def percentiles(self, percents: FloatArray) -> FloatArray:
        """numpy's linear percentiles of the column at ``percents`` (their ranks resolved)."""
        below, above, gamma = percentile_plan(self.n, percents)
        return lerp(self.values(below), self.values(above), gamma)


class Open(Protocol):
    """A search's target: its key, once resolved, lies in [lo, hi], which holds ``count`` rows."""

    lo: int
    hi: int
    count: int
    key: int | None


OpenT = TypeVar("OpenT", bound=Open)


def next_ranges(targets: Iterable[OpenT], tuning: Tuning
                ) -> tuple[tuple[Range, ...], list[list[OpenT]]]:
    """The next pass's key ranges of a search's open ``targets`` (targets in one range share
    it, sorted by ``lo``) and each range's targets: collected while the ranges hold at most
    ``tuning.rank_collect_rows`` rows in all (or a range at most :data:`SMALL_RANGE`), else
    histogrammed, in at most ``tuning.rank_hist_buckets`` buckets over all ranges."""
    open_: dict[tuple[int, int], list[OpenT]] = {}
    for t in targets:
        if t.key is None:
            open_.setdefault((t.lo, t.hi), []).append(t)
    total = sum(ts[0].count for ts in open_.values())
    buckets = tuning.rank_hist_buckets
    sub = SUB_BITS if len(open_) <= buckets >> SUB_BITS else \
        max(MIN_SUB_BITS, (buckets // max(len(open_), 1)).bit_length() - 1)
    out = []
    for (lo, hi), ts in sorted(open_.items()):
        if total <= tuning.rank_collect_rows or ts[0].count <= SMALL_RANGE:
            out.append(Range(lo, hi, -1))
        else:
            out.append(Range(lo, hi, max(0, (hi - lo).bit_length() - sub)))
    return tuple(out), [open_[(r.lo, r.hi)] for r in out]


def percentile_ranks(n: int, percents: list[float] | FloatArray) -> list[int]:
    """The ranks numpy's linear percentile of ``n`` values reads at ``percents``."""
    below, above, _ = percentile_plan(n, percents)
    return [int(r) for r in (*below, *above)]


# ---------------------------------------------------------------------------------------------
# the scan of value columns and the search's driver, shared by variables and segments

Distinct = tuple[FloatArray, np.ndarray] | None    # sorted distinct values and their rows
                                                   # (or their mass: weighted rows)


def distinct_merge(known: Distinct, vals: FloatArray, cnt: np.ndarray) -> Distinct:
    """``known`` plus the rows (or mass) ``cnt`` of values ``vals`` (sorted, distinct), or
    None once there are more than MAX_GROUPS distinct values."""
    if known is None:
        return None
    kv, kc = known
    if kv.shape[0] and vals.shape[0]:
        i = np.minimum(np.searchsorted(kv, vals), kv.shape[0] - 1)
        fresh = vals[kv[i] != vals]
    else:
        fresh = vals
    if fresh.shape[0]:
        if kv.shape[0] + fresh.shape[0] > MAX_GROUPS:
            return None
        merged = np.union1d(kv, fresh)
        mc = np.zeros(merged.shape[0], dtype=kc.dtype)
        mc[np.searchsorted(merged, kv)] = kc
        kv, kc = merged, mc
    kc = kc.copy()
    np.add.at(kc, np.searchsorted(kv, vals), cnt)
    return kv, kc


def distinct_add(known: Distinct, v: FloatArray, w: FloatArray | None = None) -> Distinct:
    """``known`` plus a batch's values (no NaN), each one row or, given, its weight ``w``
    (``known`` then holds masses: start from float zeros)."""
    if known is None:
        return None
    kv = known[0]
    if kv.shape[0]:                              # the usual case: no new value in the batch
        i = np.minimum(np.searchsorted(kv, v), kv.shape[0] - 1)
        if np.array_equal(kv[i], v):
            return kv, known[1] + np.bincount(i, weights=w, minlength=kv.shape[0])
    vals, inverse, cnt = np.unique(v, return_inverse=True, return_counts=True)
    if vals.shape[0] > MAX_GROUPS:
        return None
    return distinct_merge(known, vals, cnt if w is None else
                          np.bincount(inverse.ravel(), weights=w, minlength=vals.shape[0]))


Ranges = tuple[tuple[Range, ...], ...]


@dataclass
class ColumnScan:
    """What a scan or rank-search pass keeps of its value columns and the scores (the last
    column): per value column its rows and missing values and, in a scan, its distinct values
    while there are at most MAX_GROUPS (then None); the scores' rows; every column's keys in
    the pass's ``ranges`` (:class:`RankPassState`)."""

    ranges: Ranges
    scan: bool = False
    ranks: RankPassState = field(init=False)
    rows: IntArray = field(init=False)
    missing: IntArray = field(init=False)
    distinct: list[Distinct] = field(init=False)

    def __post_init__(self) -> None:
        k = len(self.ranges) - 1
        self.ranks = RankPassSpec(self.ranges).new()
        self.rows = np.zeros(k + 1, dtype=np.int64)
        self.missing = np.zeros(k, dtype=np.int64)
        self.distinct = [(np.zeros(0), np.zeros(0, dtype=np.int64)) for _ in range(k)]

    def add(self, j: int, v: FloatArray) -> None:
        """A batch of value column ``j`` (NaN: missing)."""
        if not (self.scan or self.ranges[j]):
            return
        nan = np.isnan(v)
        if nan.any():
            v = v[~nan]
        if self.scan:
            self.missing[j] += int(nan.sum())
            self.rows[j] += v.shape[0]
            self.distinct[j] = distinct_add(self.distinct[j], v)
        if self.ranges[j]:
            self.ranks.add(j, order_keys(v))

    def add_scores(self, rows: int, view: Callable[[], FloatArray]) -> None:
        """A batch of ``rows`` rows, whose searched view of the scores is ``view()``."""
        k = len(self.distinct)
        self.rows[k] += rows
        if self.ranges[k]:
            self.ranks.add(k, order_keys(view()))

    def merge(self, other: ColumnScan) -> None:
        self.ranks.merge(other.ranks)
        self.rows += other.rows
        self.missing += other.missing
        for j, d in enumerate(other.distinct):
            self.distinct[j] = None if d is None else distinct_merge(self.distinct[j], *d)


class Scanned(PassState, Protocol):
    """A scan or rank-search pass's state: its :class:`ColumnScan`, and more."""

    cols: ColumnScan


def search_ranks(source: Source, scan: ColumnScan, wanted: dict[int, list[int]],
                 spec: Callable[[Ranges], PassSpec[Scanned]]) -> dict[int, RankSearch]:
    """Column → the search that resolved the ranks ``wanted[column]`` of its values: from the
    scan's distinct values when it kept them (no pass), else from the scan's histogram and then
    the passes ``spec(ranges)`` over ``source`` until every rank is resolved."""
    searches: dict[int, RankSearch] = {}
    for j, ranks in wanted.items():
        s = RankSearch(int(scan.rows[j]), ranks, source.tuning)
        d = scan.distinct[j] if j < len(scan.distinct) else None
        if d is not None:                  # few distinct values: their counts give every rank
            s.resolve_sorted(*d)
        else:
            s.first()
            s.absorb(scan.ranks, j)
        searches[j] = s
    while not all(s.done for s in searches.values()):
        state, _ = source.run(spec(tuple(searches[j].ranges() if j in searches else ()
                                         for j in range(len(scan.ranges)))))
        for j, s in searches.items():
            s.absorb(state.cols.ranks, j)
    return searches
