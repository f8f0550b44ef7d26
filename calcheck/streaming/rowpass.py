"""The row pass: TCE's binomial tests and PDE's deviations per bin, over the rows of the cells
the grid cannot decide (:class:`RowPassSpec`), and the exact binomial test's decisions by
bounds (:func:`rejection_weight`, :func:`_bounds_decide`) that spare most rows a test of
their own.  Given the bins, the rejection counts are exact.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import (
    run_starts,
)
from calcheck.streaming.grid import Grid, cell_flags, cells_of, flagged_rows
from calcheck.streaming.select import (
    row_ids,
)
from calcheck.streaming.states import CompensatedSum
from calcheck.tuning import DEFAULT

SAFETY = 1e-9


@dataclass(frozen=True)
class RowBinning:
    """One binning's row-by-row work in the final pass: the cells to evaluate, the cuts between
    bins (score bits, and row ids in row order; with shared ties the rows scoring exactly a
    cut value are skipped — their tie group is accounted for from its counts), and per bin N,
    k (maybe fractional), P̂."""

    cells: tuple[int, ...]
    cut_u: tuple[int, ...]
    cut_id: tuple[int, ...]
    share: bool
    below: int                  # shared ties: cuts at rank <= 0 (empty first bins)
    n: tuple[int, ...]
    k: tuple[float, ...]
    alpha: float
    test: str
    tce: bool
    pde: bool
    # TCE: score pieces on which every prediction's test is decided (:func:`sure_pieces`):
    # float64 starts and ends, int64 bins and bool rejections, as bytes (hashable, picklable)
    pieces: tuple[bytes, ...] = ()
    # PDE: the cells whose rows' |s − P̂_b| it sums (of ``cells``; None: all of them)
    pde_cells: tuple[int, ...] | None = None


@dataclass(frozen=True)
class RowPassSpec:
    grid: Grid
    binnings: tuple[RowBinning, ...]
    pending_rows: int = DEFAULT.pending_rows     # TCE's rows tested this many at a time

    def new(self) -> RowPassState:
        return RowPassState(self)


@dataclass
class RowPassState:
    """Per binning and bin: rows evaluated, rejections (fractional when a bin's positives are),
    and Σ|s − P̂_b| (compensated)."""

    spec: RowPassSpec
    rows: list[IntArray] = field(default_factory=list)
    rejected: list[CompensatedSum] = field(default_factory=list)
    absdev: list[CompensatedSum] = field(default_factory=list)
    # TCE: the (bin, score bits) of rows not tested yet, per binning — tested together, since
    # the cost of a batch of binomial tests is mostly per call (:meth:`finish`) — and the rows
    # queued since the last test, counting those a piece decided (see :meth:`update`)
    pending: list[list[tuple[Any, Any]]] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.rows:
            for b in self.spec.binnings:
                size = len(b.n)
                self.rows.append(np.zeros(size, dtype=np.int64))
                self.rejected.append(CompensatedSum.zeros(size))
                self.absdev.append(CompensatedSum.zeros(size))
                self.pending.append([])
                self.queued.append(0)

    @functools.cached_property
    def _pieces(self) -> list[tuple[FloatArray, FloatArray, IntArray, np.ndarray] | None]:
        return [None if not b.pieces else
                (np.frombuffer(b.pieces[0]), np.frombuffer(b.pieces[1]),
                 np.frombuffer(b.pieces[2], dtype=np.int64),
                 np.frombuffer(b.pieces[3], dtype=bool)) for b in self.spec.binnings]

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("_pieces", None)
        return d

    def _decided(self, j: int, bins: IntArray, scores: FloatArray) -> np.ndarray | None:
        """Rows of binning ``j`` in one of its decided pieces: their rejections are added
        (whole counts, so in any order the same sum), and the mask of those rows returned."""
        pieces = self._pieces[j]
        if pieces is None:
            return None
        starts, ends, owner, rej = pieces
        at = np.searchsorted(starts, scores, side="right") - 1
        np.maximum(at, 0, out=at)
        hit: np.ndarray = (owner.take(at) == bins) & (scores <= ends.take(at)) & \
            (scores >= starts[0])
        yes = hit & rej.take(at)
        self.rejected[j].add(np.bincount(bins[yes], minlength=len(self.spec.binnings[j].n))
                             .astype(np.float64))
        return hit

    def _test(self, j: int) -> None:
        """Test the pending rows of binning ``j``: one test per distinct (bin, score)."""
        self.queued[j] = 0
        if not self.pending[j]:
            return
        b = self.spec.binnings[j]
        bins = np.concatenate([p[0] for p in self.pending[j]])
        u = np.concatenate([p[1] for p in self.pending[j]])
        self.pending[j] = []
        # the distinct (bin, score) pairs in (bin, score) order and their multiplicities, as
        # np.unique(axis=1) gives them — by one lexsort, 3-4x faster
        order = np.lexsort((u, bins))
        bins, u = bins[order], u[order]
        first = np.ones(bins.shape[0], dtype=bool)
        first[1:] = (bins[1:] != bins[:-1]) | (u[1:] != u[:-1])
        at = np.flatnonzero(first)
        mult = np.diff(np.append(at, bins.shape[0]))
        ub = bins[at].astype(np.int64)
        nn = np.asarray(b.n, dtype=np.float64)
        kk = np.asarray(b.k, dtype=np.float64)
        p = u[at].view(np.float64)
        cell = cells_of(self.spec.grid, p)
        # the tests in pieces of spec.pending_rows pairs (a batch can hold ~2^20 rows to test, and
        # the tests' temporaries take ~130 bytes a pair); each pair's weight is its own
        # test's, whatever the piece, and the sum below runs over all of them at once
        w = np.empty(p.shape[0])
        step = self.spec.pending_rows
        for a in range(0, p.shape[0], step):
            z = slice(a, a + step)
            w[z] = _row_weights(kk[ub[z]], nn[ub[z]], p[z], b.alpha, b.test, cell[z])
        self.rejected[j].add(np.bincount(ub, weights=w * mult, minlength=len(b.n)))

    def finish(self) -> RowPassState:
        """Test every pending row (before reading ``rejected``), the binnings two at a time
        (each its own rows and sums)."""
        from calcheck._threads import map_two

        map_two(self._test, [(j,) for j in range(len(self.pending))])
        return self

    def update(self, scores: FloatArray, labels: IntArray,
               start: int | IntArray = 0) -> RowPassState:
        s = np.asarray(scores, dtype=np.float64)
        if s.shape[0] == 0:
            return self
        grid = self.spec.grid
        cell = grid.cells(s)
        for j, b in enumerate(self.spec.binnings):
            sel = flagged_rows(cell_flags(b.cells, grid), cell)
            if sel.shape[0] == 0:
                continue
            ss = s[sel] + 0.0
            u = ss.view(np.uint64)
            at = cell[sel]
            bins, on_cut = _cut_bins(b.cut_u, grid, at, u)
            if b.share:                  # cut_u: the scores at the cuts inside (0, n)
                bins += b.below
                if on_cut.shape[0]:                     # a cut value's tie group: from counts
                    keep = np.ones(bins.shape[0], dtype=bool)
                    keep[on_cut] = False
                    ss, u, bins, at = ss[keep], u[keep], bins[keep], at[keep]
            elif on_cut.shape[0]:                       # a cut's score: by row id
                bins[on_cut] += _cuts_at_or_before(b.cut_u, b.cut_id, u[on_cut],
                                                   row_ids(start, sel[on_cut]))
            size = len(b.n)
            self.rows[j] += np.bincount(bins, minlength=size)
            nn = np.asarray(b.n, dtype=np.float64)
            kk = np.asarray(b.k, dtype=np.float64)
            if b.tce:
                # the rows tested in one call are those since the last call, as if no piece
                # decided any: a fractional k's weights are summed in the same groups
                self.queued[j] += bins.shape[0]
                hit = self._decided(j, bins, ss)
                if hit is None:
                    self.pending[j].append((bins.astype(np.uint64), u))
                elif not hit.all():
                    rest = np.flatnonzero(~hit)
                    self.pending[j].append((bins[rest].astype(np.uint64), u[rest]))
                if self.queued[j] > self.spec.pending_rows:
                    self._test(j)
            if b.pde:
                phat = np.where(nn > 0, kk / np.maximum(nn, 1), 0.0)
                pb, ps = bins, ss
                if b.pde_cells is not None:              # PDE's own cells only
                    mine = np.flatnonzero(cell_flags(b.pde_cells, grid).take(at))
                    pb, ps = bins[mine], ss[mine]
                self.absdev[j].add(np.bincount(pb, weights=np.abs(ps - phat[pb]),
                                               minlength=size))
        return self

    def merge(self, other: RowPassState) -> RowPassState:
        if self.spec != other.spec:
            raise ValueError("cannot merge row passes with different specs")
        for j in range(len(self.rows)):
            self.rows[j] += other.rows[j]
            self.rejected[j].merge(other.rejected[j])
            self.absdev[j].merge(other.absdev[j])
            self.pending[j].extend(other.pending[j])
            self.queued[j] += other.queued[j]
        return self


def _cut_bins(cut_u: tuple[int, ...], grid: Grid, cells: IntArray, u: np.ndarray
              ) -> tuple[IntArray, IntArray]:
    """``searchsorted(cut_u, u, "left")`` of score bits ``u`` (in grid cells ``cells``), and
    the rows whose score is a cut's.  By cell: a cell without a cut's score gives every row
    the same count; a cell with one (maybe repeated r times) adds r above it; a cell with
    several searches row by row."""
    base, value, reps, several = _cut_table(cut_u, grid)
    bins = base.take(cells)
    r, v = reps.take(cells), value.take(cells)          # r = 0 where no cut's score lies
    bins += r * (u > v)
    on_cut = np.flatnonzero((u == v) & (r > 0))
    many = np.flatnonzero(several.take(cells))
    if many.shape[0]:
        cuts = np.array(cut_u, dtype=np.uint64)
        bins[many] = np.searchsorted(cuts, u[many], side="left")
        on_cut = np.sort(np.concatenate((on_cut, many[np.isin(u[many], cuts)])))
    return bins, on_cut


def _cuts_at_or_before(cut_u: tuple[int, ...], cut_id: tuple[int, ...], u: np.ndarray,
                       ids: IntArray) -> IntArray:
    """For rows whose score bits ``u`` are a cut's (``--ties order``): how many cuts at that
    score have a row id at most the row's — the cuts that fall before the row in the (score,
    row id) order.  A score's cuts are consecutive in ``cut_u`` with ascending ids."""
    cuts = np.array(cut_u, dtype=np.uint64)
    cid = np.array(cut_id, dtype=np.int64)
    lo = np.searchsorted(cuts, u, side="left")
    hi = np.searchsorted(cuts, u, side="right")
    out = np.zeros(u.shape[0], dtype=np.int64)
    one = np.flatnonzero(hi - lo == 1)
    out[one] = cid[lo[one]] <= ids[one]
    several = np.flatnonzero(hi - lo > 1)          # a tie group that several cuts split
    if several.shape[0]:
        for a in sorted(set(lo[several].tolist())):     # (np.unique loads numpy.ma)
            rows = several[lo[several] == a]
            out[rows] = np.searchsorted(cid[a:int(hi[rows[0]])], ids[rows], side="right")
    return out


@functools.lru_cache(maxsize=8)
def _cut_table(cut_u: tuple[int, ...], grid: Grid
               ) -> tuple[IntArray, np.ndarray, IntArray, np.ndarray]:
    """Per grid cell: the cuts below it (those in earlier cells: cells are in score order),
    the score bits of the one cut value inside it and how often it repeats (0: none), and
    whether it holds several cut values (``cut_u``'s placeholders 0 and U_MAX: 0 falls in cell
    0, U_MAX in none)."""
    size = grid.n_cells
    cuts = np.array(cut_u, dtype=np.uint64)
    inside = cuts[cuts <= np.float64(1.0).view(np.uint64)]
    where = cells_of(grid, inside.view(np.float64)).astype(np.int64)
    base = np.searchsorted(where, np.arange(size), side="left").astype(np.int64)
    value = np.zeros(size, dtype=np.uint64)
    reps = np.zeros(size, dtype=np.int64)
    several = np.zeros(size, dtype=bool)
    if inside.shape[0]:                     # by cell: its cut values, sorted
        order = np.lexsort((inside, where))
        w, v = where[order], inside[order]
        starts, count = run_starts(w)                 # one value lies in one cell only, so
        new_value = np.append(True, v[1:] != v[:-1])  # a cell's first value is always new
        distinct = np.add.reduceat(new_value.astype(np.int64), starts)
        c, one = w[starts], distinct == 1
        value[c[one]], reps[c[one]] = v[starts[one]], count[one]
        several[c[~one]] = True
    return base, value, reps, several


def _split_k(k: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """A (maybe fractional) count of positives as ⌊k⌋, ⌈k⌉ and the fraction f."""
    lo = np.floor(k + 1e-9)
    frac = np.clip(k - lo, 0.0, 1.0)
    frac = np.where(frac < 1e-9, 0.0, frac)
    return lo, lo + (frac > 0), frac


def rejection_weight(k: FloatArray, n: FloatArray, p: FloatArray, alpha: float,
                     test: str) -> FloatArray:
    """Whether each prediction p is rejected against its bin's (k, N): 0 or 1, or — for the
    binomial test with fractional k = ⌊k⌋ + f — (1 − f)·rej(⌊k⌋) + f·rej(⌈k⌉) (as in memory,
    :func:`calcheck.metrics.tce.binomial_rejections`)."""
    if test == "binomial":
        from calcheck.binomial import flat, pvalues

        lo, hi, frac = _split_k(k)
        rej = (pvalues(*flat(lo, n, p)) <= alpha).astype(np.float64)
        if frac.any():
            part = np.flatnonzero(frac > 0)
            up = pvalues(*flat(hi[part], n[part], p[part])) <= alpha
            rej[part] = (1.0 - frac[part]) * rej[part] + frac[part] * up
        return rej
    from calcheck.metrics.tce import t_test_reject

    return t_test_reject(p, k / n, n, alpha).astype(np.float64)


def _row_weights(k: FloatArray, n: FloatArray, p: FloatArray, alpha: float,
                 test: str, cell: IntArray | None = None) -> FloatArray:
    """:func:`rejection_weight` of predictions ``p`` sorted by (bin, score): for the binomial
    test most are decided by the bounds of runs of neighbours (:func:`_decide_cells` on
    one-point intervals, whose bounds are the p-value itself; runs do not cross the rows' grid
    ``cell``), and only the others are tested one by one — the same weights for a fraction of
    the binomial searches."""
    if test != "binomial":
        return rejection_weight(k, n, p, alpha, test)
    decided, weight = _decide_cells(k, n, p, p, alpha, test, cell)
    rest = np.flatnonzero(~decided)
    if rest.size:
        weight[rest] = rejection_weight(k[rest], n[rest], p[rest], alpha, test)
    return weight


RUN_SIZES = (64, 8, 1)   # neighbours bounded together, then smaller runs (see _bounds_decide)


def _bounds_decide(k: FloatArray, n: FloatArray, lo: FloatArray, hi: FloatArray,
                   below: np.ndarray, alpha: float, breaks: IntArray | None = None,
                   refine: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(rejected for sure, accepted for sure) of cells (or rows: one-point intervals) in score
    order, each on one side of its bin's k/N (``below``: p·N < k).  Runs of up to 64
    neighbours of one bin and side (and one ``breaks`` value: the rows' grid cell, so that a
    run never bridges a gap between cells) are bounded together first, the runs left undecided
    then in runs of 8, and what is left one by one.  The bounds of an interval hold on every
    interval inside it (:func:`calcheck.binomial.interval_bounds`: both ends move the bounds
    monotonically), so a run decided as a whole decides each member as its own bounds would:
    far fewer binomial searches, the same decisions.  With ``refine``, a cell (lo < hi) still
    open is then decided on pieces of it when they all agree
    (:func:`calcheck.binomial.decided_by_pieces`)."""
    from calcheck.binomial import decided_by_pieces, interval_bounds

    m = k.shape[0]
    seg = np.ones(m, dtype=bool)
    seg[1:] = (k[1:] != k[:-1]) | (n[1:] != n[:-1]) | (below[1:] != below[:-1])
    if breaks is not None:
        seg[1:] |= breaks[1:] != breaks[:-1]
    yes = np.zeros(m, dtype=bool)
    no = np.zeros(m, dtype=bool)
    todo = np.arange(m)                         # undecided, in order
    for size in RUN_SIZES:
        if todo.size == 0:
            break
        # runs: consecutive undecided members of one segment, cut every `size` members
        new = np.ones(todo.shape[0], dtype=bool)
        new[1:] = seg[todo[1:]] | (todo[1:] != todo[:-1] + 1)
        run = np.cumsum(new) - 1
        within = np.arange(todo.shape[0]) - np.flatnonzero(new)[run]
        new |= within % size == 0
        member = np.cumsum(new) - 1
        first = todo[new]
        last = todo[np.append(np.flatnonzero(new)[1:], todo.shape[0]) - 1]
        lower, upper = interval_bounds(k[first], n[first], lo[first], hi[last])
        ry = (upper <= alpha * (1 - SAFETY))[member]
        rn = (lower > alpha * (1 + SAFETY))[member]
        yes[todo[ry]] = True
        no[todo[rn]] = True
        todo = todo[~ry & ~rn]
    if refine and todo.size:
        todo = todo[hi[todo] > lo[todo]]
        yes[todo], no[todo] = decided_by_pieces(k[todo], n[todo], lo[todo], hi[todo], alpha)
    return yes, no


def _decide_cells(k: FloatArray, n: FloatArray, lo: FloatArray, hi: FloatArray, alpha: float,
                  test: str, breaks: IntArray | None = None,
                  refine: bool = False) -> tuple[np.ndarray, FloatArray]:
    """For cells with score interval [lo, hi]: (decided, rejection weight of each row).  A cell
    is decided when every prediction in it gets the same weight.  ``breaks``, ``refine``: see
    :func:`_bounds_decide`."""
    if test != "binomial":
        phat = k / n
        same = (hi <= phat) | (lo >= phat)
        r_lo = rejection_weight(k, n, lo, alpha, test)
        r_hi = rejection_weight(k, n, hi, alpha, test)
        return same & (r_lo == r_hi), r_lo
    k_lo, k_hi, frac = _split_k(k)
    decided = np.ones(k.shape[0], dtype=bool)
    weight = np.zeros(k.shape[0])
    for kk, share in ((k_lo, 1.0 - frac), (k_hi, frac)):
        used = share > 0                   # ⌈k⌉ only where k is fractional (often nowhere):
        if not used.any():                 # a row that does not use a count is decided by
            continue                       # the other and gains 0 from this one
        below = hi * n < kk                # scipy's own predicates, monotone in p
        above = lo * n > kk
        yes = np.zeros(k.shape[0], dtype=bool)
        no = np.zeros(k.shape[0], dtype=bool)
        i = np.flatnonzero((below | above) & used)
        if i.size:
            yes[i], no[i] = _bounds_decide(kk[i], n[i], lo[i], hi[i], below[i], alpha,
                                           None if breaks is None else breaks[i], refine)
        decided &= ~used | yes | no
        weight += np.where(yes, share, 0.0)
    return decided, weight


