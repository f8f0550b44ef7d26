"""Positional binnings on a stream: equal-mass and PAVA bins, TCE's per-prediction tests, PDE and
Hosmer–Lemeshow, after the grid pass (:class:`~calcheck.streaming.states.StreamState`).

One object, :class:`PositionalPass`, owns the whole computation, and :meth:`PositionalPass.run`
reads top to bottom:

1. **plan** — the cut ranks of every binning the ids need: equal-mass cuts at ⌊j·n/B⌋,
   TCE(U)'s uniform bins from the grid's ECE counts, PAVA and PAVA-BC from one pass that keeps
   every row's (score, label) up to ``Tuning.exact_pava_rows`` rows — whose held rows, sorted, then
   make the passes below in memory (:func:`replay`), so the file is read twice in all —
   beyond, PAVA-BC runs on ``Tuning.pava_blocks`` equal-mass blocks (the one approximation,
   recorded in the settings);
2. **scan** — the exact rank search (:class:`~calcheck.streaming.select.Search`) finds, in one
   or a few passes, the row (with shared ties: the score and its whole tie group) at every cut
   rank and at the quartile ranks of TCE's table;
3. **resolve** — every bin's count, positives and Σ score from the grid's per-cell sums and the
   resolved ranks; then one row pass for what needs the rows: TCE tests every prediction
   against its bin — a grid cell inside one bin whose whole score interval is decided by exact
   monotone p-value bounds is counted from the grid, the others row by row — and PDE sums
   |s − P̂_b|.  With shared ties the rows of a tie group cut by a bound are not read again: they
   share one score, so their tests and deviations follow from the group's counts.  Given the
   bins, the rejection counts are exact.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from calcheck._typing import FloatArray, IntArray, Passes
from calcheck.binning import (
    BinStats,
    binary_keys,
    count_value,
    default_pava_bc_sizes,
    distinct,
    pava_bc_blocks,
    pava_bc_bounds,
    preload_compiled_pava,
    quantile_bounds,
    range_positions,
    run_starts,
    uniform_edges,
    unpack_keys,
)
from calcheck.errors import UsageError
from calcheck.streaming.grid import Grid, cell_flags, cells_of, flagged_rows
from calcheck.streaming.prospect import (
    REFINE_ROWS,
    HeldCellsSpec,
    HeldCellsState,
    interval_cells,
    narrowed_test_cells,
    positives_before,
    rank_cells,
    replay_held,
    test_cells,
    whole_k,
)
from calcheck.streaming.select import (
    U_MAX,
    Resolved,
    Search,
    SelectSpec,
    SelectState,
    by_group_then_id,
    row_ids,
)
from calcheck.streaming.states import CompensatedSum, StreamState
from calcheck.tuning import DEFAULT, Tuning

TCE_BINNINGS = {"tce": "pava-bc", "tce_q": "quantile", "tce_v": "pava", "tce_u": "uniform"}
POSITIONAL = ("ace", "mce_q", "pde", *TCE_BINNINGS)
QUARTILES = (0.25, 0.5, 0.75)
SAFETY = 1e-9

T = TypeVar("T")


def drive(source: Any, passes: Passes[T]) -> T:
    """Run ``passes`` on ``source``: one :meth:`StreamSource.run` per yielded spec."""
    try:
        spec = next(passes)
        while True:
            spec = passes.send(source.run(spec)[0])
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def replay(spec: Any, scores: FloatArray, labels: np.ndarray,
           batch: int = DEFAULT.replay_rows) -> Any:
    """The state of a pass of ``spec`` over rows held in memory, in batches of ``batch`` rows
    (``Tuning.replay_rows``), numbered by their position.  The held rows of exact PAVA are sorted by
    (score, row id): positions order every tie group as the row ids do, so a search or row pass
    by row id (``--ties order``) resolves the same rows — only the order of float sums
    differs (PDE's Σ|s − P̂_b| in the last bits).

    A row pass or a search reads the rows of a few grid cells only (:func:`_cells_read`); the
    rows being sorted, each cell's rows are one slice, found by two binary searches, and each
    batch hands the state only its rows in those slices (ids: their positions) — the rows it
    would have picked itself, in the same order and the same batches, so the same state,
    without computing every held row's cell.  The parts of a one-pass
    :class:`~calcheck.streaming.views.ViewsSpec` over the whole stream replay one by one."""
    from calcheck.streaming.views import ViewsState

    if _whole_stream_views(spec):
        return ViewsState(spec, [replay(part, scores, labels, batch)
                                 for _, part in spec.parts])
    state = spec.new()
    n = int(scores.shape[0])
    cells = _cells_read(spec)
    if cells is None:
        for a in range(0, n, batch):
            state.update(scores[a:a + batch], labels[a:a + batch], a)
        return state
    lo, hi = spec.grid.key_range(cells)
    bits = scores.view(np.uint64)
    first = np.searchsorted(bits, lo.astype(np.uint64), side="left")
    end = np.searchsorted(bits, hi.astype(np.uint64), side="left")
    for a in range(0, n, batch):
        z = min(a + batch, n)
        f, e = np.clip(first, a, z), np.clip(end, a, z)
        width = e - f
        some = width > 0
        f, width = f[some], width[some]
        if f.shape[0] == 0:
            continue
        rows = range_positions(f, width)
        state.update(scores[rows], labels[rows], rows)
    if isinstance(state, SelectState):
        state.n = n                              # the rows seen, as a full replay counts them
    return state


def _whole_stream_views(spec: Any) -> bool:
    """Whether ``spec`` is a one-pass ViewsSpec whose parts all see the whole stream (no class
    view, group or score floor): its parts can then run one by one over any rows."""
    from calcheck.streaming.views import ALL, ViewsSpec

    return isinstance(spec, ViewsSpec) and all(
        sub.cls is None and sub.group is ALL and sub.min_score is None for sub, _ in spec.parts)


def _cells_read(spec: Any) -> IntArray | None:
    """The grid cells, ascending, outside which a row changes nothing in a state of ``spec``
    but the count of rows seen: a row pass's (its binnings' cells), a search's (its tasks'
    cells), those of the parts of a one-pass ViewsSpec over the whole stream; None for any
    other pass."""
    if isinstance(spec, RowPassSpec):
        cells = {c for b in spec.binnings for c in b.cells}
    elif isinstance(spec, SelectSpec):
        cells = {t.cell for t in spec.tasks}
    elif _whole_stream_views(spec):
        parts = [_cells_read(part) for _, part in spec.parts]
        if any(p is None for p in parts):
            return None
        cells = {c for p in parts if p is not None for c in p.tolist()}
    else:
        return None
    return np.array(sorted(cells), dtype=np.int64)


def bound_ranks(bounds: IntArray, n: int) -> list[int]:
    """The ranks a binning's statistics and edges need: b and b − 1 of its inner bounds."""
    out: set[int] = set()
    for b in bounds.tolist():
        if 0 < b < n:
            out.update((b - 1, b))
    return sorted(out)


# ---------------------------------------------------------------------------------------------
# the passes besides the rank search: every row (exact PAVA), and the row pass


@dataclass(frozen=True)
class SortedRowsSpec:
    """A pass that keeps every row's (score bits, label): the exact sort of a dataset small
    enough to hold (9 bytes a row; 8 with ``packed``).  ``rows``: the rows the pass will see
    (the grid pass counted them), so packed keys go straight into one buffer of that size."""

    packed: bool = False            # shared ties: the order inside a tie group is not used
    rows: int = 0                   # 0: not known (the buffer grows)
    tied: bool = False              # the grid saw tied scores (see SortedRowsState.sorted_rows)
    holds_rows = True               # drive_lockstep counts its rows against a budget

    def new(self) -> SortedRowsState:
        return SortedRowsState(packed=self.packed, rows=self.rows, tied=self.tied)


@dataclass
class SortedRowsState:
    """Each batch's (first row id, score bits, labels).  A batch's rows have ascending ids and
    batches do not interleave, so the parts ordered by first id list the rows in id order, and
    a stable sort by score alone is the (score, row id) order.

    ``packed`` (shared ties, where rows of one score are pooled): each row is one 64-bit key
    (score bits << 1) | label — the bits of a score in [0, 1] order like the score and leave
    the top bit free — written into one buffer (``keys``, its first ``filled`` entries; no
    parts to join, so no second copy) and sorted in place, so ties are ordered by label
    instead of row id: half the memory and a fraction of the time of a stable argsort."""

    parts: list[tuple[int, Any, Any]] = field(default_factory=list)
    packed: bool = False
    rows: int = 0
    tied: bool = False
    keys: np.ndarray | None = None
    filled: int = 0

    def update(self, scores: FloatArray, labels: IntArray,
               start: int | IntArray = 0) -> SortedRowsState:
        s = np.asarray(scores, dtype=np.float64)
        m = int(s.shape[0])
        if m and self.packed:                # the shift drops −0.0's sign bit: no copy first
            binary_keys(s, labels, out=self._room(m))
            self.filled += m
        elif m:                              # a copy with −0.0 → +0.0 before taking bits
            first = int(row_ids(start, np.zeros(1, dtype=np.int64))[0])
            self.parts.append((first, (s + 0.0).view(np.uint64),
                               np.asarray(labels).astype(np.int8)))
        return self

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a Dask worker's state) with the filled keys only."""
        out = dict(self.__dict__)
        if self.keys is not None:
            out["keys"] = self.keys[:self.filled]
        return out

    def _room(self, m: int) -> np.ndarray:
        """The next ``m`` free keys of the buffer (grown, by doubling, past ``rows``)."""
        need = self.filled + m
        if self.keys is None or need > self.keys.shape[0]:
            size = max(self.rows, need) if self.keys is None else max(need, 2 * self.filled)
            grown = _key_buffer(size)
            if self.keys is not None:
                grown[:self.filled] = self.keys[:self.filled]
            self.keys = grown
        return self.keys[self.filled:need]

    def merge(self, other: SortedRowsState) -> SortedRowsState:
        self.parts.extend(other.parts)
        if other.filled:
            assert other.keys is not None
            self._room(other.filled)[:] = other.keys[:other.filled]
            self.filled += other.filled
        return self

    def sorted_rows(self) -> tuple[FloatArray, np.ndarray]:
        """(scores, labels) in the (score, row id) order (packed: (score, label))."""
        if self.packed:
            key = np.zeros(0, dtype=np.uint64) if self.keys is None else \
                self.keys[:self.filled]
            self.keys, self.filled = None, 0
            key.sort()
            return unpack_keys(key)
        if not self.parts:
            return np.zeros(0), np.zeros(0, dtype=np.int8)
        self.parts.sort(key=lambda p: p[0])
        parts, self.parts = self.parts, []
        u = np.concatenate([p[1] for p in parts])
        y = np.concatenate([p[2] for p in parts])
        del parts                                    # (each batch's copy freed once joined)
        # the (score, row id) order: a stable argsort where the grid saw tied scores; else
        # numpy's quick argsort (half the time, no merge buffer), then the few tie groups in
        # row-id order, as the search's collected rows are put
        order = np.argsort(u, kind="stable" if self.tied else "quicksort")
        u.sort()              # equal scores are equal bits: any sort gives the same array, in
        if not self.tied:     # place (no gathered copy)
            tie = u[1:] == u[:-1]
            if tie.any():
                pos = np.flatnonzero(np.concatenate(([False], tie)) |
                                     np.concatenate((tie, [False])))
                sub = order[pos]
                order[pos] = sub[by_group_then_id(u[pos], sub)]
            del tie
        y = y[order]
        return u.view(np.float64), y


class _KeyBuffers:
    """Key buffers that a run of held passes hands on (:func:`reusing_key_buffers`): the class
    passes of a multiclass stream each hold a few classes' rows — 40 MB a class at 5·10⁶ rows
    —, and a fresh buffer costs a page fault every 4 KB as its keys are first written (~0.04 s
    of a pass at 5·10⁶ rows, ~4 µs a fault on a virtual machine).  A buffer is handed out
    again only when nothing refers to it but this pool: no state, no sorted view of its rows
    (numpy's views keep their base array alive)."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.free: list[np.ndarray] | None = None       # None: not reusing

    def take(self, size: int) -> np.ndarray:
        import sys

        with self.lock:
            if self.free is None:
                return np.empty(size, dtype=np.uint64)
            # a buffer is free when it has no more references than ``probe``, which only this
            # function refers to: each is held by one name (the pool's list, ``probe``), the
            # tuple and the loop — counted alike by any interpreter version
            probe = np.empty(0, dtype=np.uint64)
            free = 0
            for buf in (probe, *self.free):
                refs = sys.getrefcount(buf)
                if buf is probe:
                    free = refs
                elif buf.shape[0] >= size and refs <= free:
                    return buf[:size]
            buf = np.empty(size, dtype=np.uint64)
            if len(self.free) < KEY_BUFFERS:
                self.free.append(buf)
            return buf


KEY_BUFFERS = 4                # at most this many buffers are kept for reuse
_KEYS = _KeyBuffers()


def _key_buffer(size: int) -> np.ndarray:
    """An uninitialised uint64 buffer of ``size`` keys (one used before, when reusing)."""
    return _KEYS.take(size)


@contextmanager
def reusing_key_buffers() -> Iterator[None]:
    """Within: the held passes' key buffers are kept for the next pass's states, and freed at
    the end."""
    with _KEYS.lock:
        outer = _KEYS.free is not None
        if not outer:
            _KEYS.free = []
    try:
        yield
    finally:
        if not outer:
            with _KEYS.lock:
                _KEYS.free = None


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


# ---------------------------------------------------------------------------------------------
# the owner: plan → scan → resolve


class PositionalPass:
    """The positional metrics ``ids`` (and, with ``hl_groups``, the Hosmer–Lemeshow test) of a
    streamed dataset whose grid pass gave ``state``; ``id_bound`` bounds the row ids of its
    passes.  :meth:`run` is the whole computation as :data:`Passes`."""

    def __init__(self, state: StreamState, ids: list[str], *, id_bound: int, bins: int = 10,
                 alpha: float = 0.05, test: str = "binomial", n_min: int | None = None,
                 n_max: int | None = None, hl_groups: int | None = None, ties: str = "share",
                 hl_df: str = "external", hl_trials: int | None = None, seed: int = 0,
                 exact_rows: int | None = None, blocks: int | None = None,
                 collect_rows: int | None = None, tuning: Tuning = DEFAULT) -> None:
        self.ids = ids
        # of the grid state, only what the passes use (the state itself is not kept: many
        # sub-streams' computations are alive at once)
        self._uniform_counts = (state.binned("ece")["count"]
                                if "tce_u" in ids and bins == state.bins else None)
        self.tuning = tuning
        self.id_bound = id_bound
        self.collect_rows = tuning.collect_rows if collect_rows is None else collect_rows
        self.bins, self.alpha, self.test = bins, alpha, test
        self.n_min, self.n_max, self.hl_groups = n_min, n_max, hl_groups
        self.hl_df, self.hl_trials, self.seed = hl_df, hl_trials, seed
        self.share = ties == "share"
        self.ties = ties
        self.exact_rows = tuning.exact_pava_rows if exact_rows is None else exact_rows
        self.blocks = tuning.pava_blocks if blocks is None else blocks
        # the grid's cells, or finer ones where the scores crowd them (StreamState.positional)
        self.grid, cnt, self.cell_score, self.cell_values = state.positional()
        self.cell_n = cnt.sum(axis=1)
        self.cell_pos = cnt[:, 1].copy()
        self.cum_n = np.concatenate(([0], np.cumsum(self.cell_n)))
        self.cum_pos = np.concatenate(([0], np.cumsum(self.cell_pos)))
        self.n = int(state.n)
        self.resolved: dict[int, Resolved] = {}
        self.passes = 0
        self.replayed = 0            # passes run over the held rows instead of the source
        self._rows: tuple[FloatArray, np.ndarray] | None = None
        # the first search's extra ranks and the cells whose rows its pass keeps for the row
        # pass, and those rows (module prospect)
        self._prospect: tuple[list[int], IntArray] | None = None
        self._held: HeldCellsState | None = None

    def run(self) -> Passes[tuple[dict[str, Any], dict[str, Any]]]:
        """plan → scan → resolve (see the module docstring).  The row pass needs only the
        cuts of its binnings resolved (for PAVA blocks, by the blocks' search already), so it
        shares its pass with the search of the other ranks (bin edges, quartiles)."""
        bounds = yield from self.plan()      # exact PAVA: every row held from here on
        ranks = self.ranks(bounds)
        names = self._row_pass_binnings(bounds)
        yield from self.scan([b for name in names for b in bounds[name][0].tolist()
                              if 0 < b < self.n])
        counts = {name: self.bin_stats(bounds[name][0], name, bounds[name][1], edges=False)
                  for name in names}
        rows = yield from self.row_pass(bounds, counts, ranks)
        yield from self.scan(ranks)              # whatever the shared pass left open
        self._rows = self._held = None
        stats = {name: self.bin_stats(b, name, params) for name, (b, params) in bounds.items()}
        details = {"extra_passes": self.passes - self.replayed,
                   "ranks_resolved": len(self.resolved)}
        return self.results(bounds, stats, rows), details

    # -- 1. plan ------------------------------------------------------------------------------

    def plan(self) -> Passes[dict[str, tuple[IntArray, dict[str, Any]]]]:
        """Every binning the ids need: name → (cut ranks, settings)."""
        from calcheck.metrics.tce import check_pava_bc_rows

        n, ids = self.n, self.ids
        out: dict[str, tuple[IntArray, dict[str, Any]]] = {}
        if any(m in ids for m in ("ace", "mce_q", "pde", "tce_q")):
            out["quantile"] = quantile_bounds(n, self.bins), {"bins": self.bins}
        if "tce_u" in ids:
            if self._uniform_counts is None:
                raise UsageError("uniform bins must equal the grid state's --bins")
            out["uniform"] = (np.concatenate(([0], np.cumsum(self._uniform_counts)))
                              .astype(np.int64), {"bins": self.bins})
        # cuts known already, searched with PAVA's blocks (the row pass needs them resolved)
        known = [b for bounds, _ in out.values() for b in bounds.tolist() if 0 < b < n]
        sizes = {"pava": (0, n + 1)} if "tce_v" in ids else {}
        if "tce" in ids:
            check_pava_bc_rows(n, self.n_min, self.n_max)
            d_min, d_max = default_pava_bc_sizes(n)
            lo = d_min if self.n_min is None else self.n_min
            hi = d_max if self.n_max is None else self.n_max
            if lo < 0 or hi < lo:
                raise UsageError(f"TCE bin sizes need 0 <= n_min <= n_max, got n_min={lo}, "
                                 f"n_max={hi}")
            sizes["pava-bc"] = lo, hi
        if self.tuning.prospect and (n > self.exact_rows or not sizes):    # a search, then a row pass
            self._foresee(out, sizes)
        if "tce_v" in ids:
            out["pava"] = yield from self._pava(0, n + 1, known)
        if "tce" in ids:
            b, how = yield from self._pava(lo, hi, known)
            out["pava-bc"] = b, {"n_min": lo, "n_max": hi, **how}
        if self.hl_groups:
            out["hl"] = quantile_bounds(n, self.hl_groups), {"groups": self.hl_groups}
        if not self.tuning.replay:   # the later passes read the source: the rows are not needed
            self._rows = None
        return out

    def _pava(self, n_min: int, n_max: int, also: Sequence[int] = ()
              ) -> Passes[tuple[IntArray, dict[str, Any]]]:
        """PAVA-BC bounds: exact over the sorted rows when at most ``exact_rows`` rows (one
        pass keeps them), else on ``blocks`` equal-mass blocks cut at exact ranks (searched
        with the ranks ``also``)."""
        n = self.n
        if n <= self.exact_rows:
            if self._rows is None:
                self.passes += 1
                preload_compiled_pava(n, int(self.cum_pos[-1]))
                self._rows = (yield SortedRowsSpec(packed=self.share, rows=n,
                                                   tied=self.cell_values is not None)
                              ).sorted_rows()
                if self._rows[0].shape[0] != n:         # the later passes run over these rows
                    raise RuntimeError("the pass keeping every row saw other rows than the "
                                       "grid pass: the data changed between passes")
            scores, labels = self._rows
            b = pava_bc_bounds(labels, n_min, n_max,
                               sorted_scores=scores if self.share else None)
            return b, {"pava_input": "exact"}
        blocks = quantile_bounds(n, min(self.blocks, n))
        yield from self.scan([b for b in blocks.tolist() if 0 < b < n] + list(also))
        cum = [self._at(int(b)) for b in blocks.tolist()]
        count = np.diff(blocks)
        pos = np.array([self.cum_pos[c1] - self.cum_pos[c0] + p1 - p0
                        for (c0, _, p0, _), (c1, _, p1, _) in itertools.pairwise(cum)])
        keep = count > 0
        inner = pava_bc_blocks(count[keep], pos[keep], n_min, n_max)
        return inner, {"pava_input": "approximate: equal-mass blocks",
                       "pava_blocks": len(count), "pava_block_rows": n // len(count)}

    def _foresee(self, planned: dict[str, tuple[IntArray, dict[str, Any]]],
                 sizes: dict[str, tuple[int, int]]) -> None:
        """Before the first search: the bins as the grid alone gives them (PAVA over the
        blocks' midpoint positives), the ranks they will need, and the cells whose rows the
        row pass will likely read — kept by the search's pass when they are few (module
        :mod:`~calcheck.streaming.prospect`).  PAVA's exact bins may end a block or so away
        from these: the pass also keeps the cells of the ranks and of the row pass of the bins
        whose ends are ``tuning.window_blocks`` blocks off (when they fit), so that a search or a row
        pass of the exact bins runs over the kept rows."""
        n = self.n
        guess = dict(planned)
        near: list[tuple[IntArray, IntArray]] = []      # PAVA's bins with ends moved
        if sizes:
            blocks = quantile_bounds(n, min(self.blocks, n))
            mid = positives_before(self.cum_n, self.cum_pos, self.cell_n, self.cell_pos,
                                   blocks)[2]
            count, pos = np.diff(blocks), np.diff(mid)
            keep = count > 0
            edges = np.concatenate(([0], np.cumsum(count[keep])))
            for name, (lo, hi) in sizes.items():
                guess[name] = pava_bc_blocks(count[keep], pos[keep], lo, hi), {}
                near.append(_moved_bins(edges, guess[name][0], self.tuning.window_blocks))
            near = [(a, b) for a, b in near if a.shape[0]]
        if self.hl_groups:
            guess["hl"] = quantile_bounds(n, self.hl_groups), {}
        names = self._row_pass_binnings(guess)
        if not names:
            return
        tce_bins = {TCE_BINNINGS[m] for m in self.ids if m in TCE_BINNINGS}
        if self.test != "binomial" and any(name in tce_bins for name in names):
            return
        bins = [(guess[name][0][:-1], guess[name][0][1:], name in tce_bins) for name in names]
        budget = min(self.tuning.prospect_rows, n // self.tuning.prospect_share)
        cells = self._row_cells(bins, budget)
        if cells is None:
            return
        # the bins a block off, within the budget — half of it with row ids (17 bytes a row,
        # not 9): the kept rows then stay under ~38 MB either way
        limit = budget if self.share else budget // 2
        if near:
            starts = np.concatenate([a for a, _ in near])
            ends = np.concatenate([b for _, b in near])
            more = self._row_cells([(starts, ends, True)], limit)
            if more is not None:
                wider = distinct(np.concatenate((cells, more, self._occupied(
                    rank_cells(self.cum_n, _bin_ranks(starts, ends, n))))))
                if int(self.cell_n[wider].sum()) <= limit:
                    cells = wider
        self._prospect = self.ranks(guess), cells

    def _row_cells(self, bins: list[tuple[IntArray, IntArray, bool]], budget: int
                   ) -> IntArray | None:
        """The occupied cells the row pass would read for bins (starts, ends, TCE's or PDE's)
        whose positives the grid brackets: the cells of their cuts and those where a bin's
        test can change side (TCE) or its P̂ lies (PDE) — narrowed where crowded; None when
        they hold more than ``budget`` rows."""
        n = self.n
        lows, highs = [], []
        narrow: list[tuple[int, FloatArray, FloatArray, FloatArray]] = []
        for starts, ends, tce in bins:
            inner = distinct(np.concatenate((starts, ends)))
            inner = inner[(inner > 0) & (inner < n)]
            cut = self.grid.lower(rank_cells(self.cum_n, inner))
            lows.append(cut)
            highs.append(cut)
            l0, m0, _ = positives_before(self.cum_n, self.cum_pos, self.cell_n, self.cell_pos,
                                         starts)
            l1, m1, _ = positives_before(self.cum_n, self.cum_pos, self.cell_n, self.cell_pos,
                                         ends)
            k_least, k_most = l1 - m0, m1 - l0
            size = (ends - starts).astype(np.float64)
            if tce:
                low, high = test_cells(k_least, k_most, size, self.alpha)
                narrow.append((len(lows), k_least, k_most, size))
            else:                                        # PDE: P̂'s range
                some = size > 0
                low, high = k_least[some] / size[some], k_most[some] / size[some]
            lows.append(low)
            highs.append(high)
        cells = self._guessed_cells(lows, highs)
        if int(self.cell_n[cells].sum()) > budget and narrow:   # too many: look closer
            lows, highs = self._narrowed(narrow, lows, highs)
            cells = self._guessed_cells(lows, highs)
        return cells if int(self.cell_n[cells].sum()) <= budget else None

    def _guessed_cells(self, lows: list[FloatArray], highs: list[FloatArray]) -> IntArray:
        """The occupied cells of the guessed intervals that the row pass would read."""
        return self._occupied(interval_cells(np.concatenate(lows), np.concatenate(highs),
                                             self.grid))

    def _occupied(self, cells: IntArray) -> IntArray:
        """Of ``cells``, those with rows — with shared ties, not a cell of one score: the row
        pass decides it at its score, and a search resolves its ranks from the counts."""
        cells = cells[self.cell_n[cells] > 0]
        if self.share and self.cell_values is not None:
            cells = cells[np.isnan(self.cell_values[cells])]
        return np.asarray(cells, dtype=np.int64)

    def _narrowed(self, narrow: list[tuple[int, FloatArray, FloatArray, FloatArray]],
                  lows: list[FloatArray], highs: list[FloatArray]
                  ) -> tuple[list[FloatArray], list[FloatArray]]:
        """The intervals ``lows``/``highs`` with :func:`test_cells`' brackets of the TCE
        binnings ``narrow`` — (index in the lists, k_least, k_most, rows of every bin): the
        bins' P̂ ranges, then each side's thresholds — that hold more than ``REFINE_ROWS``
        rows narrowed to where the exact test is not settled (:func:`narrowed_test_cells`, one
        call for all of them): crowded scores near 0 or 1, where a bracket padded by
        (1 + z²/2)/N covers millions of rows."""
        lows, highs = list(lows), list(highs)
        todo: list[tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]] = []
        for j, k_least, k_most, size in narrow:
            low, high = lows[j], highs[j]
            a, b = cells_of(self.grid, low), cells_of(self.grid, high)
            heavy = self.cum_n[np.minimum(b + 1, self.cum_n.shape[0] - 1)] - self.cum_n[a] > \
                REFINE_ROWS
            if not heavy.any():
                continue
            some = size > 0                      # (test_cells' bins, its three groups)
            nn = np.tile(size[some], 3)
            k_lo, k_hi = whole_k(np.tile(k_least[some], 3), np.tile(k_most[some], 3), nn)
            todo.append((k_lo[heavy], k_hi[heavy], nn[heavy], low[heavy], high[heavy]))
            lows[j], highs[j] = low[~heavy], high[~heavy]
        if todo:
            k_lo, k_hi, nn, low, high = (np.concatenate(x) for x in zip(*todo))
            lo2, hi2 = narrowed_test_cells(k_lo, k_hi, nn, low, high, self.alpha)
            lows.append(lo2)
            highs.append(hi2)
        return lows, highs

    def ranks(self, bounds: dict[str, tuple[IntArray, dict[str, Any]]]) -> list[int]:
        """The ranks to resolve: every cut (b − 1 and b, for the edges) and, for TCE's table,
        the quartiles of each bin, the first and the last row."""
        n = self.n
        tce_bins = {TCE_BINNINGS[m] for m in self.ids if m in TCE_BINNINGS}
        out: list[int] = []
        for name, (b, _) in bounds.items():
            if name in tce_bins:
                out += [*_bin_ranks(b[:-1], b[1:], n).tolist(), 0, n - 1]
            else:
                out += bound_ranks(b, n)
        return out

    # -- 2. scan ------------------------------------------------------------------------------

    def _search(self, ranks: list[int]) -> Search | None:
        """A search for the ``ranks`` not resolved yet (None when there are none)."""
        need = sorted(set(ranks) - set(self.resolved))
        if not need:
            return None
        return Search(np.asarray(need), self.cell_n, self.grid, self.id_bound,
                      self.collect_rows, by_value=self.share, cell_positives=self.cell_pos,
                      cell_values=self.cell_values, tuning=self.tuning)

    def scan(self, ranks: list[int], search: Search | None = None) -> Passes[None]:
        """The exact rank search: passes until the row (or, with shared ties, the score and
        its tie group) at every rank is known (``search``: one already under way)."""
        if search is None and self._prospect is not None:     # the first search
            more, cells = self._prospect
            self._prospect = None
            search = self._search([*ranks, *more])
            spec = search.next_spec() if search is not None else None
            if spec is not None:
                from calcheck.streaming.views import ALL, SubStream, ViewsSpec

                held = HeldCellsSpec(self.grid, tuple(cells.tolist()), ids=not self.share)
                both = yield from self._pass(ViewsSpec(((SubStream(group=ALL), spec),
                                                        (SubStream(group=ALL), held))))
                assert search is not None
                search.absorb(both.states[0])
                self._held = both.states[1]
        search = search or self._search(ranks)
        if search is None:
            return
        while (spec := search.next_spec()) is not None:
            search.absorb((yield from self._pass(spec)))
        self.passes += search.passes
        self.resolved.update(search.result())

    def _pass(self, spec: Any) -> Passes[Any]:
        """One pass of ``spec``: over the source, or — once exact PAVA holds every row,
        sorted — over those rows in memory (:func:`replay`), which no pass needs to read again."""
        if self._rows is None or not self.tuning.replay:
            cells = _cells_read(spec) if self._held is not None else None
            if cells is not None and self._held is not None and \
                    self._held.covers(set(cells.tolist())):
                self.replayed += 1                 # over the rows the first search kept
                return replay_held(spec, self._held, self.n)
            return (yield spec)
        self.replayed += 1
        return replay(spec, *self._rows, self.tuning.replay_rows)

    # -- 3. resolve ---------------------------------------------------------------------------

    def _at(self, b: int) -> tuple[int, int, float, float]:
        """Where rank ``b`` cuts the sorted rows: (grid cell, rows of that cell before the cut,
        their positives, their Σ score); a tie group cut at b is shared pro rata."""
        if b <= 0:
            return 0, 0, 0.0, 0.0
        if b >= self.n:
            return self.cell_n.shape[0], 0, 0.0, 0.0
        r = self.resolved[b]
        within = b - int(self.cum_n[r.cell])
        if not self.share:
            return r.cell, within, float(r.before_pos), r.before_score
        k = within - r.before_n                       # rows of the tie group before the cut
        return (r.cell, within, r.before_pos + k * r.eq_pos / r.eq_n,
                r.before_score + k * r.value)

    def bin_stats(self, bounds: IntArray, name: str, params: dict[str, Any], *,
                  edges: bool = True) -> BinStats:
        """A binning's counts, positives and Σ score: the whole cells between two cuts, plus
        and minus the parts of the cut cells (``edges=False``: the bins' score edges left at
        0, before the ranks next to the cuts are resolved)."""
        at = [self._at(int(b)) for b in bounds.tolist()]
        count = np.diff(bounds).astype(np.int64)
        pos = np.array([self.cum_pos[c1] - self.cum_pos[c0] + p1 - p0
                        for (c0, _, p0, _), (c1, _, p1, _) in itertools.pairwise(at)])
        whole = np.round(pos)
        pos = np.where(np.abs(pos - whole) < 1e-9, whole, pos)
        ssum = np.array([float(np.sum(self.cell_score[c0:c1])) - s0 + s1
                         for (c0, _, _, s0), (c1, _, _, s1) in itertools.pairwise(at)])
        if name == "uniform":
            e = uniform_edges(self.bins)
            lower, upper = e[:-1].copy(), e[1:].copy()
        elif not edges:
            lower, upper = np.zeros(count.shape[0]), np.zeros(count.shape[0])
        else:
            mids = [0.0 if b <= 0 else 1.0 if b >= self.n else
                    (self.resolved[b - 1].value + self.resolved[b].value) / 2.0
                    for b in bounds[1:-1].tolist()]
            cuts = np.array([0.0, *mids, 1.0])
            lower, upper = cuts[:-1].copy(), cuts[1:].copy()
        kind = "quantile" if name == "hl" else name
        return BinStats(kind=kind, lower=lower, upper=upper, count=count, sum_score=ssum,
                        sum_label=pos.astype(np.float64), params=dict(params))

    def _cut_cells(self, bounds: IntArray) -> IntArray:
        """Grid cell of the row at each inner cut (−1 for rank 0, past the end for n)."""
        out = []
        for b in bounds[1:-1].tolist():
            out.append(-1 if b <= 0 else self.resolved[b].cell if b < self.n
                       else self.cell_n.shape[0])
        return np.asarray(out, dtype=np.int64)

    def _groups_at_cuts(self, bounds: IntArray, stats: BinStats, *, tce: bool,
                        pde: bool) -> dict[str, FloatArray]:
        """Shared ties: the rejections, rows and deviations of the tie groups at the cuts,
        from their counts (each group's rows share one score)."""
        nb = stats.n_bins
        out = {"rows": np.zeros(nb), "rejected": np.zeros(nb), "absdev": np.zeros(nb)}
        N = stats.count.astype(np.float64)
        K = stats.sum_label.astype(np.float64)
        seen = set()
        bins, rows, values = [], [], []       # (bin, rows of the group in it, the group's score)
        for b in bounds[1:-1].tolist():
            if not 0 < b < self.n:
                continue
            r = self.resolved[b]
            if r.value in seen:
                continue
            seen.add(r.value)
            lo = int(self.cum_n[r.cell]) + r.before_n
            hi = lo + r.eq_n
            overlap = np.maximum(0, np.minimum(bounds[1:], hi) - np.maximum(bounds[:-1], lo))
            j = np.flatnonzero(overlap)
            bins.append(j)
            rows.append(overlap[j])
            values.append(np.full(j.shape[0], r.value))
        if not bins:
            return out
        j, overlap, value = np.concatenate(bins), np.concatenate(rows), np.concatenate(values)
        np.add.at(out["rows"], j, overlap)     # one test call for every group (in cut order)
        if tce:
            w = rejection_weight(K[j], N[j], value, self.alpha, self.test)
            np.add.at(out["rejected"], j, overlap * w)
        if pde:
            np.add.at(out["absdev"], j, overlap * np.abs(value - K[j] / N[j]))
        return out

    def row_binning(self, bounds: IntArray, stats: BinStats, *, tce: bool,
                    pde: bool) -> tuple[RowBinning, dict[str, FloatArray]]:
        """Split the work of one binning: the cells decided from the grid (and, with shared
        ties, the tie groups at the cuts) as partial per-bin results, and the cells left for
        the row pass (the returned spec)."""
        nb = stats.n_bins
        cuts = self._cut_cells(bounds)
        occ = np.flatnonzero(self.cell_n)
        cell_bin = np.searchsorted(cuts, occ, side="left")      # bins between cut cells
        boundary = np.isin(occ, cuts)
        N = stats.count.astype(np.float64)
        K = stats.sum_label.astype(np.float64)
        phat = np.where(N > 0, K / np.maximum(N, 1), 0.0)
        lo, hi = self.grid.interval(occ)
        # shared ties and a cell holding one score (the grid kept its extremes): a cut's cell
        # is the cut's tie group, which _groups_at_cuts counts whole (the row pass would skip
        # each of its rows), and any other such cell is decided at its score
        one = np.zeros(occ.shape[0], dtype=bool)
        if self.share and self.cell_values is not None:
            value = self.cell_values[occ]
            one = ~np.isnan(value)
            lo, hi = np.where(one, value, lo), np.where(one, value, hi)
        inner = np.flatnonzero(~boundary)
        b_in, c_in = cell_bin[inner], occ[inner]
        cn, cs = self.cell_n[c_in], self.cell_score[c_in]
        exact = boundary & ~one
        if tce:
            # a cell the bounds over its whole interval leave open, decided on its pieces: the
            # row pass reads only the cells a threshold crosses, those the first search's
            # pass kept (prospect) when the guess was right
            decided, weight = _decide_cells(K[b_in], N[b_in], lo[inner], hi[inner], self.alpha,
                                            self.test, refine=True)
            left = np.flatnonzero(~decided & one[inner])     # the one test its rows would get
            if left.size:
                weight[left] = rejection_weight(K[b_in[left]], N[b_in[left]], lo[inner[left]],
                                                self.alpha, self.test)
                decided[left] = True
            exact[inner[~decided]] = True
        # PDE's own cells: those P̂_b lies in and the cuts' — whatever TCE's tests decide, so
        # its sums (and their last bits) do not depend on them
        pde_exact = boundary & ~one
        if pde:
            p = phat[b_in]
            up, down = lo[inner] >= p, hi[inner] <= p
            dev = np.where(up, cs - cn * p, np.where(down, cn * p - cs, 0.0))
            exact[inner[~up & ~down]] = True
            pde_exact[inner[~up & ~down]] = True
        grid = ~exact[inner]                     # cells counted from the grid aggregate

        def per_bin(weights: FloatArray, some: np.ndarray = grid) -> FloatArray:
            return np.asarray(np.bincount(b_in[some], weights=weights, minlength=nb),
                              dtype=np.float64)

        pde_grid = ~pde_exact[inner]
        partial = {"rows": per_bin(cn[grid].astype(np.float64)),
                   "rejected": per_bin(cn[grid] * weight[grid]) if tce else np.zeros(nb),
                   "absdev": per_bin(dev[pde_grid], pde_grid) if pde else np.zeros(nb)}
        if self.share:
            groups = self._groups_at_cuts(bounds, stats, tce=tce, pde=pde)
            partial = {key: partial[key] + groups[key] for key in partial}
        cut_u, cut_id = [], []
        inner_b = bounds[1:-1].tolist()
        for b in inner_b:
            if self.share and not 0 < b < self.n:
                continue
            if b <= 0:
                cut_u.append(0)
                cut_id.append(-1)
            elif b >= self.n:
                cut_u.append(int(U_MAX))
                cut_id.append(int(np.iinfo(np.int64).max))
            else:
                r = self.resolved[b]
                cut_u.append(int(np.float64(r.value).view(np.uint64)))
                cut_id.append(r.row_id)
        pieces: tuple[bytes, ...] = ()
        if tce and self.test == "binomial":
            pieces = self.sure_pieces(bounds, occ[exact], cuts, N, K)
        pde_cells = tuple(occ[pde_exact].tolist()) if pde and tce else None
        spec = RowBinning(cells=tuple(occ[exact].tolist()), cut_u=tuple(cut_u),
                          cut_id=tuple(cut_id), share=self.share,
                          below=sum(1 for b in inner_b if b <= 0),
                          n=tuple(stats.count.tolist()), k=tuple(K.tolist()),
                          alpha=self.alpha, test=self.test, tce=tce, pde=pde, pieces=pieces,
                          pde_cells=pde_cells)
        return spec, partial

    def sure_pieces(self, bounds: IntArray, cells: IntArray, cuts: IntArray, N: FloatArray,
                    K: FloatArray) -> tuple[bytes, ...]:
        """TCE's binomial test in the row pass's cells of at least ``tuning.sure_rows`` rows, decided
        on score pieces: each (bin, cell) pair's scores — the cell's interval, within the bin's
        first and last scores — on each side of the bin's k/N, halved until the exact bounds
        decide a piece (:func:`calcheck.binomial.decided_pieces`) or it spans ~16 of the cell's
        rows (at the cell's mean density).  A row in a piece of its bin takes the piece's
        decision: concentrated scores put millions of rows into a few cells that many bins
        cut or a test threshold crosses, and a lookup is a fraction of a test.  Only bins of a
        whole k (the others' rows are tested, and summed, as before)."""
        from calcheck.binomial import decided_pieces, side_ends

        heavy = cells[self.cell_n[cells] >= self.tuning.sure_rows]
        if heavy.shape[0] == 0:
            return ()
        # the bins each heavy cell holds rows of: those between the cuts in it
        first = np.searchsorted(cuts, heavy, side="left")
        many = np.searchsorted(cuts, heavy, side="right") - first + 1
        start = np.cumsum(many) - many
        pair_bin = np.repeat(first, many) + np.arange(int(many.sum())) - np.repeat(start, many)
        pair_cell = np.repeat(heavy, many)
        k, _, frac = _split_k(K)
        nb = N.shape[0]
        keep = (pair_bin < nb)
        pair_bin, pair_cell = pair_bin[keep], pair_cell[keep]
        keep = (N[pair_bin] > 0) & (frac[pair_bin] == 0)
        pair_bin, pair_cell = pair_bin[keep], pair_cell[keep]
        if pair_bin.shape[0] == 0:
            return ()
        # each bin's first and last scores: those at its bounds (resolved for the row pass)
        def value(b: int, outside: float) -> float:
            return self.resolved[b].value if 0 < b < self.n else outside
        first_s = np.array([value(b, 0.0 if b <= 0 else 1.0) for b in bounds[:-1].tolist()])
        last_s = np.array([value(b, 1.0 if b >= self.n else 0.0) for b in bounds[1:].tolist()])
        c_lo, c_hi = self.grid.interval(pair_cell)
        lo = np.maximum(c_lo, first_s[pair_bin])
        hi = np.minimum(c_hi, last_s[pair_bin])
        b_end, c_end = side_ends(k[pair_bin], N[pair_bin])
        # the part below k/N, then the part above
        own = np.concatenate((pair_bin, pair_bin))
        a = np.concatenate((lo, np.maximum(lo, c_end)))
        z = np.concatenate((np.minimum(hi, b_end), hi))
        width = np.concatenate((c_hi - c_lo, c_hi - c_lo)) * 16.0 / \
            np.concatenate((self.cell_n[pair_cell], self.cell_n[pair_cell]))
        some = a <= z
        own, a, z, width = own[some], a[some], z[some], width[some]
        o, p0, p1, rej = decided_pieces(k[own], N[own], a, z, self.alpha, width)
        if o.shape[0] == 0:
            return ()
        bins = own[o]
        order = np.lexsort((bins, p0))          # by score, then bin (bins meet at a cut)
        return (p0[order].tobytes(), p1[order].tobytes(), bins[order].astype(np.int64).tobytes(),
                rej[order].tobytes())

    def _row_pass_binnings(self, bounds: dict[str, tuple[IntArray, dict[str, Any]]]
                           ) -> list[str]:
        """The binnings the row pass evaluates: TCE's, and the equal-mass one for PDE."""
        tce_bins = {TCE_BINNINGS[m] for m in self.ids if m in TCE_BINNINGS}
        return [name for name in bounds
                if name in tce_bins or (name == "quantile" and "pde" in self.ids)]

    def row_pass(self, bounds: dict[str, tuple[IntArray, dict[str, Any]]],
                 stats: dict[str, BinStats], ranks: Sequence[int] = ()
                 ) -> Passes[dict[str, dict[str, FloatArray]]]:
        """TCE's rejections and PDE's deviations per bin of the binnings that need them: one
        pass over the rows the grid cannot decide, which also makes the first pass of the
        search for ``ranks``."""
        from calcheck._threads import map_two
        from calcheck.streaming.views import ALL, SubStream, ViewsSpec

        tce_bins = {TCE_BINNINGS[m] for m in self.ids if m in TCE_BINNINGS}
        names = self._row_pass_binnings(bounds)
        split = map_two(lambda name: self.row_binning(         # each binning's own cells
            bounds[name][0], stats[name], tce=name in tce_bins,
            pde=name == "quantile" and "pde" in self.ids), [(name,) for name in names])
        specs: list[RowBinning] = [spec for spec, _ in split]
        partials: dict[str, dict[str, FloatArray]] = {
            name: part for name, (_, part) in zip(names, split)}
        if specs:
            self.passes += 1
            row_spec = RowPassSpec(self.grid, tuple(specs), self.tuning.pending_rows)
            search = self._search(list(ranks))
            first = search.next_spec() if search is not None else None
            if first is None and not any(spec.cells for spec in specs):
                done: RowPassState = row_spec.new()    # no row to read: all decided already
                self.passes -= 1
            elif first is None:
                done = (yield from self._pass(row_spec)).finish()
            else:                              # one pass for both
                both = yield from self._pass(ViewsSpec(((SubStream(group=ALL), row_spec),
                                                        (SubStream(group=ALL), first))))
                done = both.states[0].finish()
                assert search is not None
                search.absorb(both.states[1])
                self.passes -= 1                       # counted by the search
                yield from self.scan(list(ranks), search)
            for j, name in enumerate(partials):
                part = partials[name]
                rows = np.round(part["rows"]).astype(np.int64) + done.rows[j]
                if not np.array_equal(rows, stats[name].count):
                    raise RuntimeError("the row pass saw other rows than the grid pass: the "
                                       "data changed between passes")
                part["rejected"] = part["rejected"] + done.rejected[j].value
                part["absdev"] = part["absdev"] + done.absdev[j].value
        return partials

    def results(self, bounds: dict[str, tuple[IntArray, dict[str, Any]]],
                stats: dict[str, BinStats],
                rows: dict[str, dict[str, FloatArray]]) -> dict[str, Any]:
        from calcheck.metrics._result import MetricResult
        from calcheck.metrics.binned import ece_from_stats, mce_from_stats

        n = self.n
        out: dict[str, Any] = {}
        for mid in self.ids:
            if mid in ("ace", "mce_q"):
                st = stats["quantile"]
                value = ece_from_stats(st, 1) if mid == "ace" else mce_from_stats(st)
                out[mid] = MetricResult(id=mid, value=value, settings={
                    "binning": "quantile", "bins": self.bins,
                    "norm": "l1" if mid == "ace" else "max", "ties": self.ties},
                    n_samples=n, bins=st)
            elif mid == "pde":
                st = stats["quantile"]
                dev = rows["quantile"]["absdev"]
                with np.errstate(invalid="ignore", divide="ignore"):
                    mean_dev = np.where(st.nonempty, dev / np.maximum(st.count, 1), np.nan)
                out[mid] = MetricResult(id="pde", value=float(dev.sum() / n),
                                        settings={"binning": "quantile", "bins": self.bins,
                                                  "ties": self.ties},
                                        n_samples=n, bins=st,
                                        bin_extra={"mean_abs_deviation": mean_dev})
            elif mid in TCE_BINNINGS:
                name = TCE_BINNINGS[mid]
                st = stats[name]
                b, extra = bounds[name]
                rej = rows[name]["rejected"]
                rej = np.where(np.abs(rej - np.round(rej)) < 1e-9, np.round(rej), rej)
                settings = {"binning": name, **extra, "alpha": self.alpha, "test": self.test,
                            "n_bins": st.n_bins, "ties": self.ties}
                out[mid] = MetricResult(id=mid, value=100.0 * float(rej.sum()) / n,
                                        unit="percent", settings=settings, n_samples=n,
                                        bins=st, bin_extra=self._tce_extra(b, st, rej))
        if self.hl_groups:
            from calcheck.hypotests.classical import hosmer_lemeshow_from_groups

            st = stats["hl"]
            res = hosmer_lemeshow_from_groups(st.count, st.sum_label, st.sum_score,
                                              groups=self.hl_groups, alpha=self.alpha,
                                              df=self.hl_df, variance_loss=self._tie_loss(
                                                  bounds["hl"][0]), trials=self.hl_trials,
                                              seed=self.seed)
            res.settings["ties"] = self.ties
            out["hosmer_lemeshow"] = res
        return out

    def _tie_loss(self, bounds: IntArray) -> FloatArray | None:
        """Hosmer–Lemeshow's shared-tie variance loss (as in memory), from the tie groups that
        the inner cuts fall inside."""
        from calcheck.hypotests.classical import shared_tie_loss

        if not self.share:
            return None
        groups = {}
        for b in bounds[1:-1].tolist():
            if not 0 < b < self.n:
                continue
            r = self.resolved[b]
            start = int(self.cum_n[r.cell]) + r.before_n
            if r.eq_n > 0 and start < b < start + r.eq_n:
                groups[start] = (r.eq_n, r.value)
        if not groups:
            return None
        starts = np.array(list(groups), dtype=np.int64)
        return shared_tie_loss(bounds, starts, np.array([g[0] for g in groups.values()]),
                               np.array([g[1] for g in groups.values()]))

    def _tce_extra(self, bounds: IntArray, stats: BinStats, rejected: FloatArray
                   ) -> dict[str, Any]:
        """The test-based reliability table's columns: score quartiles and rejections."""
        nb = stats.n_bins
        ne = stats.count > 0
        val = self.resolved
        quart = np.full((nb, 3), np.nan)
        for i, (lo, hi, frac) in enumerate(_quartile_ranks(bounds)):
            if lo >= 0:
                a, b = val[lo].value, val[hi].value
                quart[i // 3, i % 3] = a + frac * (b - a)
        first = [val[a].value if c else np.nan for a, c in zip(bounds[:-1].tolist(), ne)]
        last = [val[b - 1].value if c else np.nan for b, c in zip(bounds[1:].tolist(), ne)]
        with np.errstate(invalid="ignore", divide="ignore"):
            pct = np.where(ne, 100.0 * rejected / np.maximum(stats.count, 1), np.nan)
        return {"min_score": np.asarray(first), "q1_score": quart[:, 0],
                "median_score": quart[:, 1], "q3_score": quart[:, 2],
                "max_score": np.asarray(last), "rejected": [count_value(x) for x in rejected],
                "rejected_pct": pct}


def _quartile_ranks(bounds: IntArray) -> list[tuple[int, int, float]]:
    """(lo rank, hi rank, fraction) of numpy's linear quantiles within each bin."""
    out = []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        for q in QUARTILES:
            if b <= a:
                out.append((-1, -1, 0.0))
                continue
            pos = a + (b - a - 1) * q
            lo = int(np.floor(pos))
            out.append((lo, min(lo + 1, b - 1), pos - lo))
    return out


def _moved_bins(edges: IntArray, bounds: IntArray, moves: int) -> tuple[IntArray, IntArray]:
    """(starts, ends) of the bins of ``bounds`` when the bounds from one of them on move by up
    to ``moves`` of ``edges`` (the blocks' bounds, which hold ``bounds``) — as PAVA-BC's bins
    of sizes near their limits follow one another: each bin moved whole, and with its end
    alone moved (its start alone, for the last) — but 0 and n, the first start and the last
    end."""
    at = np.searchsorted(edges, bounds)
    last = edges.shape[0] - 1
    a0, b0 = at[:-1], at[1:]
    if moves <= 0 or a0.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts, ends = [], []
    for d in [m for m in range(-moves, moves + 1) if m]:
        starts += [np.where(a0 == 0, 0, a0 + d), a0, np.full(1, a0[-1] + d)]
        ends += [np.where(b0 == last, last, b0 + d), b0 + d, np.full(1, last)]
    a = np.clip(np.concatenate(starts), 0, last)
    b = np.clip(np.concatenate(ends), 0, last)
    key = distinct(a * (last + 1) + b)                  # the distinct (start, end) pairs,
    pairs = np.stack((key // (last + 1), key % (last + 1)), axis=1)    # in (start, end) order
    pairs = pairs[pairs[:, 0] < pairs[:, 1]]
    own = np.stack((a0, b0), axis=1)
    mine = (pairs[:, None, :] == own[None, :, :]).all(axis=2).any(axis=1)
    pairs = pairs[~mine]
    return edges[pairs[:, 0]], edges[pairs[:, 1]]


def _bin_ranks(starts: IntArray, ends: IntArray, n: int) -> IntArray:
    """The ranks a TCE binning's bins (starts, ends) need: each inner end b (b − 1 and b) and
    each non-empty bin's quartile ranks (:func:`_quartile_ranks`' lo and hi)."""
    inner = np.concatenate((starts, ends))
    inner = inner[(inner > 0) & (inner < n)]
    some = ends > starts
    starts, ends = starts[some], ends[some]
    pos = starts[:, None] + (ends - starts - 1)[:, None] * np.asarray(QUARTILES)[None, :]
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, (ends - 1)[:, None])
    return distinct(np.concatenate((inner - 1, inner, lo.ravel(), hi.ravel())))


def positional_passes(state: StreamState, ids: list[str], *, id_bound: int,
                      **options: Any) -> Passes[tuple[dict[str, Any], dict[str, Any]]]:
    """:class:`PositionalPass` ``(state, ids, ...)`` as :data:`Passes` (for shared passes)."""
    return PositionalPass(state, ids, id_bound=id_bound, **options).run()


def positional_results(source: Any, state: StreamState, ids: list[str], **options: Any,
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The positional metrics ``ids`` of a streamed source whose grid pass gave ``state``:
    (results by id, search details); ``options`` are :class:`PositionalPass`'s."""
    options.setdefault("tuning", getattr(source, "tuning", DEFAULT))
    return drive(source, positional_passes(state, ids, id_bound=source.id_bound(state.n),
                                           **options))


def order_statistics(source: Any, state: StreamState, ranks: IntArray) -> FloatArray:
    """The scores at ``ranks`` of the sorted scores (exact rank search; ``state`` is the grid
    pass)."""
    pos = PositionalPass(state, [], id_bound=source.id_bound(state.n),
                         tuning=getattr(source, "tuning", DEFAULT))
    drive(source, pos.scan(ranks.tolist()))
    return np.array([pos.resolved[int(r)].value for r in ranks], dtype=np.float64)
