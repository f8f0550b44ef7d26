"""Partial states of the streaming engine: ``update(batch)`` → ``merge(other)`` → ``finalize()``.

One aggregate serves every streamable metric and test: a **dyadic grid** of 2^G cells over the
score (cell = ⌊2^G·s⌋, exact in float64 because 2^G is a power of two; s = 1 gets its own cell),
split by label, holding int64 counts and compensated sums of s and of r² = (s − y)².

* T-Cal's dyadic levels m = 2^k, k ≤ G, are unions of whole cells — their statistics are exact.
* A fixed binning (ECE's uniform bins with their float edges, T-Cal's ⌊m·s⌋ for any m) puts every
  cell into one bin, except the few cells that *straddle* one of its edges (≤ one per edge).  The
  rows of those cells are binned row by row with the binning's own rule and kept as exact
  per-(cell, bin) sums.  So the fixed-bin metrics equal the in-memory engine's: bin counts
  bit-identical, values to ~1e-15 (only the order of float additions differs).
* Brier and Spiegelhalter's sums follow from the per-label cell sums (plus one scalar Σ (s(1 − s))²
  for Spiegelhalter); the log loss is a compensated scalar.

Counts are int64 and sums are :class:`CompensatedSum` (TwoSum), so any split of the rows into
partitions merged in any order gives identical counts and values equal to ~1e-15 relative.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck import registry
from calcheck._typing import FloatArray, IntArray
from calcheck.binning import run_starts, uniform_assign
from calcheck.metrics.scoring import LOG_LOSS_EPS
from calcheck.streaming.grid import Grid, ScoreGrid, UniformGrid
from calcheck.streaming.grid import forget_cells as _forget_cells
from calcheck.validation import in_unit, zero_one

# binary metric ids the grid state computes in its one pass (the registry's "grid" ones)
GRID_METRICS = tuple(m.id for m in registry.METRICS.values()
                     if m.stream == "grid" and m.kind == registry.BINARY)
GRID_BITS = 16          # 65,537 cells: 1.5 MB of state, exact T-Cal levels up to m = 2^16


_TWOSUM_CHUNK = 8192     # 64 KB a vector: one TwoSum's six vectors stay in L2 between steps


def _two_sum(hi: FloatArray, v: FloatArray, lo: FloatArray, s: FloatArray, bb: FloatArray,
             err: FloatArray) -> None:
    """``s = hi + v; bb = s − hi; err = (hi − (s − bb)) + (v − bb); lo += err``, elementwise
    into the given (same-shape) slices, in that order: the same bits whatever the slicing."""
    np.add(hi, v, out=s)
    np.subtract(s, hi, out=bb)
    np.subtract(s, bb, out=err)
    np.subtract(hi, err, out=err)
    np.subtract(v, bb, out=bb)
    np.add(err, bb, out=err)
    np.add(lo, err, out=lo)


@dataclass
class CompensatedSum:
    """A float64 vector sum kept as (hi, lo) with TwoSum, so merges lose (almost) nothing.

    Adding batch partial sums or merging two states in any order gives results equal to
    ~1 ulp; the error of each batch's own summation (numpy's pairwise sum or bincount) stays.
    """

    hi: FloatArray
    lo: FloatArray
    # three arrays of hi's size that add() reuses: a batch of the grid pass adds two sums of
    # 2^17 cells, and six fresh 1 MB temporaries each cost ~0.9 ms a batch in page faults
    scratch: list[FloatArray] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def zeros(cls, size: int) -> CompensatedSum:
        return cls(np.zeros(size), np.zeros(size))

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "scratch": None}

    def add(self, values: np.ndarray) -> None:
        """hi + values by TwoSum (Knuth), the rounding error into lo: in place, in the scratch
        arrays (the operations of ``s = hi + v; bb = s − hi; err = (hi − (s − bb)) + (v − bb)``,
        in that order: the same bits)."""
        v = np.asarray(values, dtype=np.float64)
        if v.shape != self.hi.shape:
            v = np.broadcast_to(v, self.hi.shape)
        if self.scratch is None or self.scratch[0].shape != self.hi.shape:
            self.scratch = [np.empty_like(self.hi) for _ in range(3)]
        s, bb, err = self.scratch
        if not self.lo.flags.writeable:                 # (a merged-in or unpickled state)
            self.lo = self.lo.copy()
        hi, lo = self.hi, self.lo
        if hi.ndim == 1 and v.flags.c_contiguous and hi.flags.c_contiguous and \
                lo.flags.c_contiguous:          # the grid's 2^17 cells in pieces that stay
            for a in range(0, hi.shape[0], _TWOSUM_CHUNK):          # in cache
                p = slice(a, a + _TWOSUM_CHUNK)
                _two_sum(hi[p], v[p], lo[p], s[p], bb[p], err[p])
        else:
            _two_sum(hi, v, lo, s, bb, err)
        self.scratch[0], self.hi = self.hi, self.scratch[0]

    def merge(self, other: CompensatedSum) -> None:
        self.add(other.hi)
        self.lo = self.lo + other.lo

    @property
    def value(self) -> FloatArray:
        return self.hi + self.lo


# ---------------------------------------------------------------------------------------------
# fixed binnings on the grid

def binning_ids(kind: str, size: int, scores: FloatArray) -> IntArray:
    """Row bin ids of a fixed binning: ``uniform`` (docs/metrics.md, ``size`` bins) or ``dyadic``
    (T-Cal's ⌊m·s⌋ with m = ``size``, ids 0..m)."""
    if kind == "uniform":
        return uniform_assign(scores, size)
    return np.floor(scores * float(size)).astype(np.int64)


def binning_width(kind: str, size: int) -> int:
    return size if kind == "uniform" else size + 1


@functools.lru_cache(maxsize=32)
def grid_table(kind: str, size: int, bits: int) -> tuple[IntArray, IntArray]:
    """(bin id of every grid cell, sorted ids of the cells that straddle an edge).

    A cell holds [c/2^G, (c+1)/2^G); both binning rules are monotone in s, so a cell lies in one
    bin exactly when its smallest and largest float share the bin."""
    cells = np.arange((1 << bits) + 1, dtype=np.float64)
    lo = np.ldexp(cells, -bits)
    hi = np.nextafter(np.ldexp(cells + 1.0, -bits), -np.inf)
    hi[-1] = 1.0
    a, b = binning_ids(kind, size, lo), binning_ids(kind, size, hi)
    return a, np.flatnonzero(a != b)


@functools.lru_cache(maxsize=32)
def straddle_index(kind: str, size: int, bits: int) -> IntArray:
    """Per grid cell, its position among the straddling cells of :func:`grid_table`, or −1."""
    out = np.full((1 << bits) + 1, -1, dtype=np.intp)
    straddle = grid_table(kind, size, bits)[1]
    out[straddle] = np.arange(straddle.shape[0])
    return out


STATE_BUDGET = 256 * 2 ** 20      # bytes of one binning's straddling-cell sums
EDGE_BYTES = 2 * (8 + 16 + 16)     # per (cell, bin): count and two compensated sums, 2 labels


def check_state_size(kind: str, size: int, bits: int) -> None:
    """Refuse, before allocating, a binning whose straddling-cell table (every grid cell an
    edge crosses × every bin) would not fit :data:`STATE_BUDGET`, saying what it would need
    and how many bins fit."""
    from calcheck.errors import UsageError

    straddling = min(size, 1 << bits)             # at most one cell per edge
    need = straddling * binning_width(kind, size) * EDGE_BYTES
    if need > STATE_BUDGET:
        most = int((STATE_BUDGET / EDGE_BYTES) ** 0.5)
        raise UsageError(f"--bins {size:,} on a streaming engine needs ~{need / 2 ** 30:.1f} GB "
                         f"of state (every grid cell an edge crosses, per bin); at most "
                         f"{most:,} bins fit in {STATE_BUDGET // 2 ** 20} MB there — use "
                         "fewer --bins or --engine memory")


@dataclass
class EdgePart:
    """Exact sums of the rows in a binning's straddling cells, per (cell, bin, label)."""

    cells: IntArray                      # the straddling cells (sorted)
    width: int                           # ids per cell (bins of the binning)
    count: IntArray
    score: CompensatedSum
    sq: CompensatedSum

    @classmethod
    def empty(cls, cells: IntArray, width: int) -> EdgePart:
        size = 2 * width * max(cells.shape[0], 1)
        return cls(cells, width, np.zeros(size, dtype=np.int64), CompensatedSum.zeros(size),
                   CompensatedSum.zeros(size))


_local = threading.local()


def _float_labels(y: Any) -> FloatArray:
    """Labels as float64 in a per-thread buffer (dot products with 0/1 weights are exact selections)."""
    buf = getattr(_local, "yf", None)
    if buf is None or buf.shape[0] < y.shape[0]:
        buf = np.empty(y.shape[0])
        _local.yf = buf
    out = buf[: y.shape[0]]
    np.copyto(out, y, casting="unsafe")
    return out


def workspace(n: int) -> tuple[FloatArray, FloatArray, FloatArray, IntArray, np.ndarray]:
    """Per-thread scratch buffers of n entries — three float64, an intp and a bool —, reused
    across batches (fresh pages are slow to fault in)."""
    ws = getattr(_local, "ws", None)
    if ws is None or ws[0].shape[0] < n:
        ws = (np.empty(n), np.empty(n), np.empty(n), np.empty(n, dtype=np.intp),
              np.empty(n, dtype=bool))
        _local.ws = ws
    return ws[0][:n], ws[1][:n], ws[2][:n], ws[3][:n], ws[4][:n]


@dataclass
class StreamState:
    """Sufficient statistics of the streamable metrics and tests (see the module docstring).

    Parameters
    ----------
    bins : int
        Uniform bins of ECE / ECE-l2 / MCE.
    tcal_m : int or None
        Fixed m of T-Cal, if its statistic is wanted.
    log_loss, spiegelhalter : bool
        Keep the sums these need (each costs a few passes over the batch).
    grid_bits : int
        G of the 2^G-cell grid.
    ci : bool
        Also keep Σ log-likelihood per (cell, label), for the log loss's bootstrap interval.
    pos_grid : ScoreGrid or None
        Finer cells for the positional passes where the scores crowd the grid's
        (:func:`~calcheck.streaming.grid.crowded_grid`): their counts per label and Σ score
        are kept beside the grid's (:meth:`positional`).
    """

    bins: int = 10
    tcal_m: int | None = None
    log_loss: bool = True
    spiegelhalter: bool = False
    grid_bits: int = GRID_BITS
    ci: bool = False
    n: int = 0
    cell_count: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    cell_score: CompensatedSum | None = None
    cell_sq: CompensatedSum | None = None
    edges: dict[str, EdgePart] = field(default_factory=dict)
    scalars: CompensatedSum | None = None     # Σ log-likelihood, Σ (s(1 − s))²
    cell_ll: CompensatedSum | None = None     # Σ log-likelihood per (cell, label), with ci
    # smallest and largest score per (cell, label), kept when the first batch looks tied (see
    # :meth:`_start_extremes`); None otherwise
    cell_min: FloatArray | None = None
    cell_max: FloatArray | None = None
    pos_grid: ScoreGrid | None = None
    pos_count: IntArray | None = None         # per (positional cell, label), with pos_grid
    pos_score: CompensatedSum | None = None   # per positional cell

    def __post_init__(self) -> None:
        if self.pos_grid is not None and self.pos_count is None:
            self.pos_count = np.zeros(2 * self.pos_grid.n_cells, dtype=np.int64)
            self.pos_score = CompensatedSum.zeros(self.pos_grid.n_cells)
        if self.cell_score is None:
            size = 2 * self.n_cells
            self.cell_count = np.zeros(size, dtype=np.int64)
            self.cell_score = CompensatedSum.zeros(size)
            self.cell_sq = CompensatedSum.zeros(size)
            self.scalars = CompensatedSum.zeros(2)
            if self.ci and self.log_loss:
                self.cell_ll = CompensatedSum.zeros(size)
            for key, (kind, size_) in self.binnings.items():
                check_state_size(kind, size_, self.grid_bits)
                _, cells = grid_table(kind, size_, self.grid_bits)
                self.edges[key] = EdgePart.empty(cells, binning_width(kind, size_))

    @property
    def n_cells(self) -> int:
        return (1 << self.grid_bits) + 1

    @property
    def binnings(self) -> dict[str, tuple[str, int]]:
        out = {"ece": ("uniform", int(self.bins))}
        if self.tcal_m is not None:
            out["tcal"] = ("dyadic", int(self.tcal_m))
        return out

    @property
    def positives(self) -> int:
        return int(self.cell_count[1::2].sum())

    @property
    def settings(self) -> tuple[Any, ...]:
        return (self.bins, self.tcal_m, self.log_loss, self.spiegelhalter, self.grid_bits,
                self.ci, self.pos_grid)

    # -- update ------------------------------------------------------------------------------

    def update(self, scores: FloatArray, labels: IntArray, start: int = 0) -> StreamState:
        """Add a batch of scores in [0, 1] and 0/1 labels (validated by the reader); the grid
        does not depend on row order, so ``start`` (the batch's first row id) is unused."""
        s = np.asarray(scores, dtype=np.float64)
        y = np.asarray(labels)
        n = int(s.shape[0])
        if n == 0:
            return self
        if y.shape != s.shape:
            raise ValueError("scores and labels differ in length")
        labels_ok = zero_one(y) if y.dtype.kind in "iub" else not (y.min() < 0 or y.max() > 1)
        if not (in_unit(s) and labels_ok):
            raise ValueError("scores must lie in [0, 1] and labels be 0/1")
        assert self.cell_score is not None and self.cell_sq is not None
        assert self.scalars is not None
        f, g, h, k, _ = workspace(n)
        size = 2 * self.n_cells
        np.multiply(s, float(1 << self.grid_bits), out=k,   # ⌊2^G·s⌋: the exact product,
                    casting="unsafe")                       # truncated (s ≥ 0) into ints
        np.left_shift(k, 1, out=k)
        np.add(k, y, out=k, casting="unsafe")               # key = 2·cell + y
        if self.n == 0:                                     # the first rows: tied?
            self._start_extremes(s)
        if self.cell_min is not None and self.cell_max is not None:
            np.minimum.at(self.cell_min, k, s)
            np.maximum.at(self.cell_max, k, s)
        self.cell_count += np.bincount(k, minlength=size)
        self.cell_score.add(np.bincount(k, weights=s, minlength=size))
        np.subtract(s, y, out=f, casting="unsafe")          # r = s − y
        sums = [0.0, 0.0]
        # sums of products via ufuncs into scratch buffers, not np.dot: BLAS threads would
        # compete with Arrow's decoder threads for the cores
        if self.spiegelhalter:                              # Σ q², q = s(1 − s); the rest
            np.subtract(1.0, s, out=g)                      # of Spiegelhalter's sums comes
            np.multiply(g, s, out=g)                        # from the grid (finalize)
            sums[1] = float(np.multiply(g, g, out=g).sum())
        if self.log_loss:                                   # Σ y·log c + (1 − y)·log1p(−c)
            np.clip(s, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS, out=g)
            np.negative(g, out=h)
            np.log1p(h, out=h)
            np.log(g, out=g)
            yf = _float_labels(y)
            if self.cell_ll is not None:                # y·log c + (1 − y)·log1p(−c) per row
                ll = np.subtract(g, h)
                ll *= yf
                ll += h
                self.cell_ll.add(np.bincount(k, weights=ll, minlength=size))
            total = float(h.sum())
            sums[0] = float(np.multiply(yf, g, out=g).sum()) + total
            sums[0] -= float(np.multiply(yf, h, out=h).sum())
        if self.spiegelhalter or self.log_loss:
            self.scalars.add(np.array(sums))
        np.multiply(f, f, out=f)
        self.cell_sq.add(np.bincount(k, weights=f, minlength=size))
        self._update_edges(s, y, k)
        if self.pos_grid is not None:
            self._update_positional(s, y)
        self.n += n
        return self

    def _update_positional(self, s: FloatArray, y: Any) -> None:
        assert self.pos_grid is not None and self.pos_count is not None
        assert self.pos_score is not None
        key = self.pos_grid.cells(s)
        size = self.pos_count.shape[0]
        self.pos_score.add(np.bincount(key, weights=s, minlength=size // 2))
        np.left_shift(key, 1, out=key)
        np.add(key, y, out=key, casting="unsafe")          # 2·cell + y
        self.pos_count += np.bincount(key, minlength=size)
        _forget_cells()                                     # (the buffer holds keys now)

    def positional(self) -> tuple[Grid, IntArray, FloatArray, FloatArray | None]:
        """What the positional passes read of the grid pass: their grid, its per-(cell, label)
        counts (cells × 2), its per-cell Σ score and one-score cells (:meth:`cell_values`) —
        the grid's own, or those of the finer ``pos_grid`` (whose one-score cells are those
        of one float, as s = 1.0's: crowded_grid is never made for tied scores)."""
        assert self.cell_score is not None
        if self.pos_grid is None or self.pos_count is None or self.pos_score is None:
            return (UniformGrid(self.grid_bits), self.cell_count.reshape(-1, 2),
                    self.cell_score.value.reshape(-1, 2).sum(axis=1), self.cell_values())
        lo, hi = self.pos_grid.interval(np.arange(self.pos_grid.n_cells))
        one = np.where(lo == hi, lo, np.nan)                # a cell of one float (s = 1.0)
        return self.pos_grid, self.pos_count.reshape(-1, 2), self.pos_score.value, one

    def _start_extremes(self, s: FloatArray) -> None:
        """Keep each cell's smallest and largest score when the first batch looks tied: fewer
        than half of ~4,096 evenly spread scores distinct (rounded probabilities, a model with
        few outputs).  A cell whose two are equal holds one score, which resolves the ranks in
        it without a search (:meth:`cell_values`); continuous scores skip the cost (two
        ``ufunc.at`` a batch, ~13 % of the pass)."""
        sample = np.sort(s[:: max(1, s.shape[0] // 4096)])
        distinct = run_starts(sample)[0].shape[0] if sample.shape[0] else 0
        if distinct < sample.shape[0] / 2:        # np.unique's count, without loading numpy.ma
            self.cell_min = np.full(2 * self.n_cells, np.inf)
            self.cell_max = np.full(2 * self.n_cells, -np.inf)

    def cell_values(self) -> FloatArray | None:
        """Per grid cell, its one score when all its rows share it (+0.0 for ±0.0), else NaN;
        None when the extremes were not kept (by every partial state merged in)."""
        if self.cell_min is None or self.cell_max is None:
            return None
        lo = self.cell_min.reshape(-1, 2).min(axis=1)
        hi = self.cell_max.reshape(-1, 2).max(axis=1)
        return np.where(lo == hi, lo + 0.0, np.nan)

    def _update_edges(self, s: FloatArray, y: Any, key: IntArray) -> None:
        special = _special_keys(tuple(sorted(self.binnings.values())), self.grid_bits)
        rows = np.flatnonzero(special.take(key))
        if rows.shape[0] == 0:
            return
        ss, yy, cells = s[rows], y[rows].astype(np.int64), key[rows] >> 1
        rr = ss - yy
        for name, (kind, size) in self.binnings.items():
            part = self.edges[name]
            pos = straddle_index(kind, size, self.grid_bits).take(cells)
            mine = pos >= 0
            if not np.any(mine):
                continue
            ids = binning_ids(kind, size, ss[mine])
            kk = (pos[mine] * part.width + ids) * 2 + yy[mine]
            total = part.count.shape[0]
            part.count += np.bincount(kk, minlength=total)
            part.score.add(np.bincount(kk, weights=ss[mine], minlength=total))
            part.sq.add(np.bincount(kk, weights=rr[mine] ** 2, minlength=total))

    # -- merge -------------------------------------------------------------------------------

    def merge(self, other: StreamState) -> StreamState:
        """Add another partial state with the same settings (any order: counts stay exact)."""
        if self.settings != other.settings:
            raise ValueError(f"cannot merge states with different settings "
                             f"({self.settings} vs {other.settings})")
        assert self.cell_score and other.cell_score and self.cell_sq and other.cell_sq
        assert self.scalars and other.scalars
        self._merge_extremes(other)
        self.cell_count += other.cell_count
        self.cell_score.merge(other.cell_score)
        if self.pos_count is not None and other.pos_count is not None:
            assert self.pos_score is not None and other.pos_score is not None
            self.pos_count += other.pos_count
            self.pos_score.merge(other.pos_score)
        self.cell_sq.merge(other.cell_sq)
        self.scalars.merge(other.scalars)
        if self.cell_ll is not None and other.cell_ll is not None:
            self.cell_ll.merge(other.cell_ll)
        for name, part in self.edges.items():
            o = other.edges[name]
            part.count += o.count
            part.score.merge(o.score)
            part.sq.merge(o.sq)
        self.n += other.n
        return self

    def _merge_extremes(self, other: StreamState) -> None:
        """Kept extremes survive a merge only when both sides kept them (or one saw no row;
        called before the counts are merged)."""
        if other.n == 0:
            return
        if self.n == 0:
            self.cell_min = None if other.cell_min is None else other.cell_min.copy()
            self.cell_max = None if other.cell_max is None else other.cell_max.copy()
            return
        if self.cell_min is not None and self.cell_max is not None and \
                other.cell_min is not None and other.cell_max is not None:
            np.minimum(self.cell_min, other.cell_min, out=self.cell_min)
            np.maximum(self.cell_max, other.cell_max, out=self.cell_max)
            return
        self.cell_min = self.cell_max = None

    # -- finalize ----------------------------------------------------------------------------

    def finalize(self) -> dict[str, Any]:
        """Metric values, the uniform bin table and (when kept) the T-Cal / Spiegelhalter sums."""
        assert self.scalars is not None
        n = self.n
        b = binned(self, "ece")
        cnt = b["count"]
        ne = cnt > 0
        ms = np.where(ne, b["sum_score"] / np.maximum(cnt, 1), np.nan)
        ml = np.where(ne, b["positives"] / np.maximum(cnt, 1), np.nan)
        gap = np.where(ne, np.abs(ml - ms), 0.0)
        w = cnt / n if n else cnt * 0.0
        ll, q2 = self.scalars.value
        out: dict[str, Any] = {
            "n": n,
            "ece": float(np.sum(w * gap)),
            "ece_l2": float(np.sqrt(np.sum(w * gap * gap))),
            "mce": float(gap.max()) if gap.size else 0.0,
            "brier": float(np.sum(self.cell_sq.value) / n) if self.cell_sq and n else np.nan,
            "bins": {"count": cnt, "positives": b["positives"], "sum_score": b["sum_score"]},
        }
        if self.log_loss:
            out["log_loss"] = float(-ll / n) if n else np.nan
        if self.spiegelhalter:
            out["spiegelhalter_num"], out["spiegelhalter_den"] = _spiegelhalter_sums(self, q2)
        if self.tcal_m is not None:
            from calcheck.hypotests.tcal import binned_plugin

            t = binned(self, "tcal")
            out.update({f"tcal_{k}": v for k, v in dataclasses.asdict(binned_plugin(
                t["count"], t["sum_score"] - t["positives"], t["sum_sq_resid"], n)).items()})
        return out


def grid_cells(state: StreamState) -> dict[str, Any]:
    """Occupied grid cells: ids and per-cell N, positives K, Σs, Σr² and Σs²."""
    assert state.cell_score is not None and state.cell_sq is not None
    cnt = state.cell_count.reshape(-1, 2)
    score = state.cell_score.value.reshape(-1, 2)
    sq = state.cell_sq.value.reshape(-1, 2)
    N = cnt.sum(axis=1)
    occ = np.flatnonzero(N)
    K = cnt[occ, 1]
    # Σs² = Σ_{y=0} r² + Σ_{y=1} (1 + 2r + r²) with Σ_{y=1} r = Σ_{y=1} s − K
    s_sq = sq[occ, 0] + (2.0 * score[occ, 1] - K + sq[occ, 1])
    return {"cell": occ, "n": N[occ], "positives": K, "sum_score": score[occ].sum(axis=1),
            "sum_sq_resid": sq[occ].sum(axis=1), "sum_score_sq": s_sq}


def label_units(state: StreamState, name: str) -> dict[str, Any]:
    """Groups of rows that lie in one bin of binning ``name`` and one grid cell — the whole
    non-straddling cells plus the (straddling cell, bin) parts — sorted by bin, with
    per-label columns (shape (units, 2), column y): ``count``, ``sum_score``, ``sum_sq``
    (Σr²), ``sum_score_sq`` (Σs²), and ``sum_ll`` (Σ log-likelihood; a straddling cell's
    parts get the cell's per-label mean) when the state keeps it."""
    assert state.cell_score is not None and state.cell_sq is not None
    kind, size = state.binnings[name]
    table, straddle = grid_table(kind, size, state.grid_bits)
    cnt = state.cell_count.reshape(-1, 2)
    occ = np.flatnonzero(cnt.sum(axis=1))
    occ = occ[~np.isin(occ, straddle)]
    part = state.edges[name]
    pc = part.count.reshape(-1, 2)
    pocc = np.flatnonzero(pc.sum(axis=1))
    pcell = part.cells[pocc // part.width] if part.cells.shape[0] else pocc[:0]
    out = {
        "bin": np.concatenate([table[occ], pocc % part.width]),
        "cell": np.concatenate([occ, pcell]),
        "count": np.concatenate([cnt[occ], pc[pocc]]),
        "sum_score": np.concatenate([state.cell_score.value.reshape(-1, 2)[occ],
                                     part.score.value.reshape(-1, 2)[pocc]]),
        "sum_sq": np.concatenate([state.cell_sq.value.reshape(-1, 2)[occ],
                                  part.sq.value.reshape(-1, 2)[pocc]]),
    }
    # Σs² = Σr² for y = 0; Σ(1 + 2r + r²) = Σr² + (2Σs − K) for y = 1 (r = s − 1)
    s_sq = out["sum_sq"].copy()
    s_sq[:, 1] += 2.0 * out["sum_score"][:, 1] - out["count"][:, 1]
    out["sum_score_sq"] = s_sq
    if state.cell_ll is not None:
        ll = state.cell_ll.value.reshape(-1, 2)
        mean_ll = ll[pcell] / np.maximum(cnt[pcell], 1)
        out["sum_ll"] = np.concatenate([ll[occ], mean_ll * pc[pocc]])
    order = np.argsort(out["bin"], kind="stable")
    return {k: v[order] for k, v in out.items()}


def units(state: StreamState, name: str) -> dict[str, Any]:
    """:func:`label_units` with the labels pooled: per unit N, positives K, Σs, Σr², Σs²."""
    u = label_units(state, name)
    c = u["count"]
    return {"bin": u["bin"], "cell": u["cell"], "n": c.sum(axis=1), "positives": c[:, 1],
            "sum_score": u["sum_score"].sum(axis=1), "sum_sq_resid": u["sum_sq"].sum(axis=1),
            "sum_score_sq": u["sum_score_sq"].sum(axis=1)}


def binned(state: StreamState, name: str) -> dict[str, Any]:
    """Per-bin N, positives, Σs, Σr² of binning ``name`` (all ids, empty bins included)."""
    kind, size = state.binnings[name]
    u = units(state, name)
    width = binning_width(kind, size)
    counts = np.zeros(width, dtype=np.int64)
    pos = np.zeros(width, dtype=np.int64)
    np.add.at(counts, u["bin"], u["n"])
    np.add.at(pos, u["bin"], u["positives"])
    return {"count": counts, "positives": pos,
            "sum_score": np.bincount(u["bin"], weights=u["sum_score"], minlength=width),
            "sum_sq_resid": np.bincount(u["bin"], weights=u["sum_sq_resid"],
                                        minlength=width),
            "sum_score_sq": np.bincount(u["bin"], weights=u["sum_score_sq"],
                                        minlength=width)}


def residuals(state: StreamState, name: str = "ece") -> Any:
    """The per-bin residual sums of binning ``name`` (:class:`BinResiduals`)."""
    from calcheck.metrics.debiased import BinResiduals

    b = binned(state, name)
    cnt = b["count"].astype(np.float64)
    return BinResiduals(cnt, b["positives"] - b["sum_score"], b["sum_sq_resid"],
                        b["sum_score"] - b["sum_score_sq"], state.n)


def _spiegelhalter_sums(state: StreamState, q2: float) -> tuple[float, float]:
    """Σ (y − s)(1 − 2s) and Σ (1 − 2s)² s(1 − s) from the grid's per-label sums and Σ q²:
    with r = s − y, K positives and S₁ = Σ_{y=1} s, the numerator is 2Σr² + 2S₁ − Σs − K;
    (1 − 2s)² = 1 − 4q gives the denominator Σq − 4Σq² with Σq = Σs − Σs² and
    Σs² = Σr² + 2S₁ − K."""
    assert state.cell_score is not None and state.cell_sq is not None
    score = state.cell_score.value.reshape(-1, 2).sum(axis=0)
    sq = float(state.cell_sq.value.sum())
    k = float(state.positives)
    s_all, s_pos = float(score.sum()), float(score[1])
    num = 2.0 * sq + 2.0 * s_pos - s_all - k
    s_sq = sq + 2.0 * s_pos - k
    return num, (s_all - s_sq) - 4.0 * q2


def cell_blocks(bins: IntArray, cells: IntArray, shift: int) -> tuple[IntArray, IntArray]:
    """Units coarsened to blocks of 2^shift grid cells within one bin: (the bin of every block,
    sorted by bin then block; the block of every unit)."""
    key = bins.astype(np.int64) * (1 << 40) + (cells >> shift)
    uniq, inv = np.unique(key, return_inverse=True)
    return (uniq >> 40).astype(np.int64), inv


@functools.lru_cache(maxsize=16)
def _special_keys(binnings: tuple[tuple[str, int], ...], bits: int) -> np.ndarray:
    """Boolean table over keys 2·cell + y: is the cell straddling an edge of some binning?"""
    special = np.zeros((1 << bits) + 1, dtype=bool)
    for kind, size in binnings:
        special[grid_table(kind, size, bits)[1]] = True
    return np.repeat(special, 2)
