"""Cells of the score axis for the streaming engine's positional passes.

A *grid* maps each score in [0, 1] to a cell by a monotone non-decreasing function, so every
cell is an interval of scores (possibly empty) and the cells are in score order; the cell of
s = 1.0 holds that score alone.  Two grids share one interface (``n_cells``, ``cells``,
``lower``, ``interval``, ``key_range``):

* :class:`UniformGrid` — cell ⌊2^G·s⌋ (exact in float64: 2^G is a power of two), the grid
  state's own cells (:mod:`calcheck.streaming.states`);
* :class:`ScoreGrid` — the same 2^G cells, each further cut where the scores crowd: the
  float's binade (its exponent) and leading mantissa bits, for scores below 1/2, and those of
  1 − s (exact there) above, with more mantissa bits in the binades that hold more rows of a
  first batch (:func:`crowded_grid`).  Scores packed into a few 2^-16 cells — a rare-event
  model's, a confident classifier's — then spread over many cells, so the rank search
  collects the ranks' cells in one pass and the row pass reads few rows.

A :class:`ScoreGrid`'s cell bounds are the sorted step points of its three step counts
(tested against a bisection over the floats' bit patterns with the cell function itself).
Nothing in the positional
passes depends on which grid they use but the speed (and the order of some float sums: the
last bits of a bin's Σ score).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray

ONE_BITS = int(np.float64(1.0).view(np.uint64))
_MANT = np.uint64((1 << 52) - 1)
MAX_MANT_BITS = 20           # a binade is cut into at most 2^20 cells
CROWDED = 4.0                # a first batch this many times more concentrated than uniform
                             # scores (see crowded_grid) gets a ScoreGrid ...
CROWDED_HELD = 64.0          # ... or this many, when the positional passes hold every row
ORDERED = 0.1                # ... unless fewer than this share of its neighbours go up (or
                             # down): a file sorted by score
SAMPLE_MIN = 1 << 14         # ... judged on at least this many rows
_CHUNK = 1 << 13             # rows at a time in crowded_grid (64 KB temporaries)
COMPUTE_ROWS = 1 << 14       # rows at a time of a ScoreGrid's cell function (3 x 128 KB)

_local = threading.local()


def _buffers(n: int) -> tuple[IntArray, np.ndarray]:
    """Per-thread (cell, flag) buffers of at least ``n`` entries: the positional passes compute
    a batch's cells for every batch (fresh 8 MB arrays cost ~2 ms a batch in page faults)."""
    buf = getattr(_local, "cells", None)
    if buf is None or buf[0].shape[0] < n:
        buf = (np.empty(n, dtype=np.intp), np.empty(n, dtype=bool))
        _local.cells = buf
        _local.cells_of = None
    return buf[0][:n], buf[1][:n]


def _scratch(n: int) -> tuple[FloatArray, FloatArray, IntArray]:
    """Per-thread temporaries of :meth:`ScoreGrid._compute` (two float64, one int64)."""
    buf = getattr(_local, "scratch", None)
    if buf is None or buf[0].shape[0] < n:
        buf = (np.empty(n), np.empty(n), np.empty(n, dtype=np.int64))
        _local.scratch = buf
    return buf[0][:n], buf[1][:n], buf[2][:n]


def forget_cells() -> None:
    """The per-thread cell buffer no longer holds any batch's cells (its caller wrote into
    it)."""
    _local.cells_of = None


@contextlib.contextmanager
def one_batch(scores: Any) -> Iterator[None]:
    """Within: the parts of one pass read ``scores`` and do not change them, so its cells are
    computed once for all of them (the search, the rows kept for the row pass), even when
    the batch is writeable."""
    prev = getattr(_local, "batch", None)
    _local.batch = scores
    try:
        yield
    finally:
        _local.batch = prev
        of = getattr(_local, "cells_of", None)
        if of is not None and of[0] is scores and scores.flags.writeable:
            _local.cells_of = None


def _shared(scores: FloatArray) -> bool:
    # a read-only batch (the reader's zero-copy arrays), or one inside one_batch
    return not scores.flags.writeable or getattr(_local, "batch", None) is scores


def _cached(scores: FloatArray, grid: Any) -> bool:
    of = getattr(_local, "cells_of", None)
    return of is not None and of[0] is scores and of[1] == grid and _shared(scores)


def _remember(scores: FloatArray, grid: Any) -> None:
    _local.cells_of = (scores, grid) if _shared(scores) else None


@functools.lru_cache(maxsize=8)
def cell_flags(cells: tuple[int, ...], grid: Grid) -> np.ndarray:
    """A flag per cell of ``grid``: True for ``cells``, the table :func:`flagged_rows`
    reads."""
    flags = np.zeros(grid.n_cells, dtype=bool)
    flags[list(cells)] = True
    return flags


def flagged_rows(flags: np.ndarray, cells: IntArray) -> IntArray:
    """Positions of the rows whose cell (from a grid's ``cells``, in ``flags``' range) is
    flagged."""
    _, hit = _buffers(cells.shape[0])
    flags.take(cells, mode="clip", out=hit)
    return np.flatnonzero(hit)


@dataclass(frozen=True)
class UniformGrid:
    """Cells ⌊2^bits·s⌋: 2^bits cells of width 2^-bits, and s = 1.0 alone in cell 2^bits."""

    bits: int

    @property
    def n_cells(self) -> int:
        return (1 << self.bits) + 1

    def cells(self, scores: FloatArray) -> IntArray:
        """Each score's cell, in a per-thread buffer (see :func:`_buffers`)."""
        cells, _ = _buffers(scores.shape[0])
        if _cached(scores, self):
            return cells
        # the exact product 2^bits·s truncated (s >= 0) as it is cast into the int cells
        np.multiply(scores, float(1 << self.bits), out=cells, casting="unsafe")
        _remember(scores, self)
        return cells

    def lower(self, cells: IntArray) -> FloatArray:
        """The smallest score of each cell (1.0 for the last)."""
        return np.ldexp(np.asarray(cells).astype(np.float64), -self.bits)

    def interval(self, cells: IntArray) -> tuple[FloatArray, FloatArray]:
        """Smallest and largest float of each cell."""
        c = np.asarray(cells).astype(np.float64)
        lo = np.ldexp(c, -self.bits)
        hi = np.nextafter(np.ldexp(c + 1.0, -self.bits), -np.inf)
        return lo, np.where(np.asarray(cells) >= 1 << self.bits, 1.0, hi)

    def key_range(self, cells: IntArray) -> tuple[IntArray, IntArray]:
        """The score-bit ranges [lo, hi) of the cells."""
        cells = np.asarray(cells)
        top = cells >= 1 << self.bits
        cf = cells.astype(np.float64)
        lo = np.where(top, ONE_BITS,
                      np.ldexp(cf, -self.bits).view(np.uint64).astype(np.int64))
        hi = np.where(top, ONE_BITS + 1,
                      np.ldexp(cf + 1.0, -self.bits).view(np.uint64).astype(np.int64))
        return lo, hi


@dataclass(frozen=True)
class ScoreGrid:
    """The uniform grid's cells ⌊2^bits·s⌋ cut further by binade: below 1/2, the binade e of s
    (its exponent field) is cut into 2^r_e cells by the leading r_e bits of its mantissa; at
    and above 1/2 the same with w = 1 − s (exact for s ≥ 1/2), in reverse.  A score's cell is
    the sum of the three monotone step counts (uniform cells, low binade cells, high binade
    cells), so the cuts of all three are cell bounds.  ``mant_bits`` holds r_e for the 1,024
    binades of s, then the 1,024 of w (bytes: hashable and cheap to compare)."""

    bits: int
    mant_bits: bytes

    @functools.cached_property
    def _tables(self) -> tuple[IntArray, np.ndarray, int, int]:
        """Per binade (those of s, then those of w): its first cell among its side's cells,
        the shift that keeps its r_e leading mantissa bits; the number of low cells and the
        last high cell."""
        r = np.frombuffer(self.mant_bits, dtype=np.uint8).astype(np.int64)
        size = np.left_shift(np.ones(2048, dtype=np.int64), r)
        off = np.zeros(2048, dtype=np.int64)
        off[1:1024] = np.cumsum(size[:1023])
        off[1025:] = np.cumsum(size[1024:2047])
        low_total = int(off[1023] + size[1023])
        high_last = int(off[2047] + size[2047]) - 1
        shift = (52 - r).astype(np.uint64)
        return off, shift, low_total, high_last

    @functools.cached_property
    def _row_tables(self) -> tuple[IntArray, IntArray, np.ndarray]:
        """The tables :meth:`_compute` reads, by the top 12 bits of ±min(s, 1 − s) (sign set
        below 1/2): the cell part before a binade's own cells, +1 or −1 (w's cells count
        down), the mantissa shift."""
        off, shift, low_total, high_last = self._tables
        base = np.zeros(4096, dtype=np.int64)
        sign = np.zeros(4096, dtype=np.int64)
        shifts = np.zeros(4096, dtype=np.uint64)
        base[:1024], sign[:1024], shifts[:1024] = low_total + high_last - off[1024:], -1, \
            shift[1024:]                                        # s ≥ 1/2: w's binades
        base[2048:3072], sign[2048:3072], shifts[2048:3072] = off[:1024], 1, shift[:1024]
        return base, sign, shifts

    @property
    def n_cells(self) -> int:
        _, _, low_total, high_last = self._tables
        return (1 << self.bits) + low_total + high_last + 1

    def __getstate__(self) -> dict[str, Any]:
        return {"bits": self.bits, "mant_bits": self.mant_bits}

    def __setstate__(self, d: dict[str, Any]) -> None:
        object.__setattr__(self, "bits", d["bits"])
        object.__setattr__(self, "mant_bits", d["mant_bits"])

    def _compute(self, s: FloatArray, out: IntArray) -> IntArray:
        """The cells of ``s`` into ``out``, ``COMPUTE_ROWS`` at a time (the temporaries stay
        small, and in cache)."""
        base, sign, shifts = self._row_tables
        scale = float(1 << self.bits)
        for a in range(0, s.shape[0], COMPUTE_ROWS):
            part, dest = s[a:a + COMPUTE_ROWS], out[a:a + COMPUTE_ROWS]
            w, d, idx = _scratch(part.shape[0])
            np.subtract(1.0, part, out=w)
            np.minimum(part, w, out=w)           # s below 1/2, else 1 − s (exact there)
            np.subtract(part, 0.5, out=d)
            np.copysign(w, d, out=w)             # the side in the sign (−0.0 too)
            b = w.view(np.uint64)
            np.right_shift(b, np.uint64(52), out=idx.view(np.uint64))    # side and binade
            b &= _MANT
            u = d.view(np.uint64)
            shifts.take(idx, out=u, mode="clip")
            np.right_shift(b, u, out=b)
            j = b.view(np.int64)                 # the cell within the binade ...
            k = d.view(np.int64)
            sign.take(idx, out=k, mode="clip")
            j *= k                               # ... counted down for w
            base.take(idx, out=k, mode="clip")
            j += k
            np.multiply(part, scale, out=dest, casting="unsafe")
            dest += j
        return out

    def cells(self, scores: FloatArray) -> IntArray:
        """Each score's cell, in a per-thread buffer (see :func:`_buffers`)."""
        cells, _ = _buffers(scores.shape[0])
        if _cached(scores, self):
            return cells
        self._compute(np.asarray(scores, dtype=np.float64), cells)
        _remember(scores, self)
        return cells

    def cells_of(self, scores: FloatArray) -> IntArray:
        """Each score's cell, in a new array."""
        s = np.asarray(scores, dtype=np.float64).ravel()
        return self._compute(s, np.empty(s.shape[0], dtype=np.intp))

    @functools.cached_property
    def _lower_bits(self) -> np.ndarray:
        """Bits of the smallest float of each cell (n_cells + 1 entries, the last ONE_BITS + 1;
        an empty cell's is the next cell's).  The cell of s counts the step points ≤ s of its
        three parts, so cell c starts at the c-th smallest of them:

        * uniform: k·2^-bits, k = 1..2^bits;
        * low binade cells (s < 1/2): each cell's first float, bits (e << 52) | (q << (52 − r_e));
          the cells of binades 1022 and 1023 (s ≥ 1/2: none) and the step to the count of all
          low cells all at 1/2;
        * high binade cells (w = 1 − s, s ≥ 1/2): at 1/2 the cells of w's binades 1022 and 1023
          but its first (only w = 1/2 is there); below, the cell of w starting at t
          (t ≤ 1/2) is left when w < t, i.e.
          from s = 1 − w' with w' the largest multiple of 2^-53 (the spacing of w) below t.
        """
        off, shift, low_total, high_last = self._tables
        r = np.frombuffer(self.mant_bits, dtype=np.uint8).astype(np.int64)
        uniform = np.ldexp(np.arange(1, (1 << self.bits) + 1, dtype=np.float64), -self.bits)

        def firsts(side: slice) -> FloatArray:
            """The first float of every cell of binades 0..1021 of one side but the first
            (0: no step), in order."""
            cells = np.left_shift(1, r[side][:1022])
            e = np.repeat(np.arange(1022, dtype=np.uint64), cells)
            q = np.arange(e.shape[0], dtype=np.uint64) - np.repeat(
                off[side][:1022].astype(np.uint64), cells)
            bits = (e << np.uint64(52)) | (q << np.repeat(shift[side][:1022], cells))
            return np.asarray(bits[1:].view(np.float64))

        low = firsts(slice(0, 1024))                 # s's binades
        half_low = low_total - low.shape[0]          # the steps at 1/2 up to low_total
        # w's cells (w = 0, s = 1.0, ends the first); w's binade 1022 starts at 1/2
        t = np.append(firsts(slice(1024, 2048)), 0.5)
        w_below = (np.ceil(t * 2.0 ** 53) - 1.0) * 2.0 ** -53
        high = 1.0 - w_below
        half_high = high_last - high.shape[0]        # the steps at 1/2 (w = 1/2 and above)
        points = np.concatenate((uniform, low, np.full(half_low + half_high, 0.5), high))
        points.sort()
        out = np.empty(points.shape[0] + 2, dtype=np.uint64)
        out[0] = 0
        out[1:-1] = points.view(np.uint64)
        out[-1] = ONE_BITS + 1
        return out

    def lower(self, cells: IntArray) -> FloatArray:
        """The smallest score of each cell."""
        return np.asarray(self._lower_bits[np.asarray(cells)]).view(np.float64)

    def interval(self, cells: IntArray) -> tuple[FloatArray, FloatArray]:
        """Smallest and largest float of each (non-empty) cell."""
        c = np.asarray(cells)
        lo = self._lower_bits[c]
        hi = self._lower_bits[c + 1] - np.uint64(1)
        return lo.view(np.float64), hi.view(np.float64)

    def key_range(self, cells: IntArray) -> tuple[IntArray, IntArray]:
        """The score-bit ranges [lo, hi) of the cells."""
        c = np.asarray(cells)
        return (self._lower_bits[c].astype(np.int64),
                self._lower_bits[c + 1].astype(np.int64))


Grid = UniformGrid | ScoreGrid


def cells_of(grid: Grid, scores: FloatArray) -> IntArray:
    """Cells of any scores in [0, 1] (clipped into it), in a new array."""
    s = np.clip(np.asarray(scores, dtype=np.float64).ravel(), 0.0, 1.0)
    if isinstance(grid, ScoreGrid):
        return grid.cells_of(s)
    return np.minimum((s * float(1 << grid.bits)).astype(np.int64), grid.n_cells - 1)


def crowded_grid(sample: FloatArray, bits: int, *, least: float = CROWDED
                 ) -> ScoreGrid | None:
    """A :class:`ScoreGrid` over the uniform 2^bits cells when a first batch of scores crowds
    them — the collision rate of its cells, Σ c(c − 1) / (m(m − 1)) over ~8,192 evenly spread
    scores, at least ``least`` times a uniform sample's — with about 2^bits more cells spread
    over the binades as the batch's rows are (r_e = round(log2(2^bits · share_e)), at least
    0); None when the batch is small, is in score order (sorted input: the first batch is
    where the scores start, not how they spread), looks tied (a tie is one score however
    fine the grid), or is spread.  Its temporaries stay under 64 KB: freeing a larger one raises glibc's mmap
    threshold, and the pass's batch-sized arrays would then fragment the heap (+40 MB)."""
    s = np.asarray(sample, dtype=np.float64)
    m = s.shape[0]
    if m < SAMPLE_MIN:
        return None
    probe = s[:: max(1, m // 4096)]
    up = np.count_nonzero(probe[1:] > probe[:-1]) / (probe.shape[0] - 1)
    if not ORDERED < up < 1.0 - ORDERED:    # rows in score order: the first batch shows
        return None                         # where the file starts, not how it spreads
    probe = np.sort(probe)
    if np.count_nonzero(probe[1:] != probe[:-1]) + 1 < probe.shape[0] / 2:
        return None
    few = np.sort((s[:: max(1, m // 8192)] * float(1 << bits)).astype(np.int32))
    k = few.shape[0]
    starts = np.flatnonzero(np.concatenate(([True], few[1:] != few[:-1])))
    runs = np.diff(np.append(starts, k)).astype(np.int64)
    rate = int(np.multiply(runs, runs - 1).sum()) / (k * (k - 1.0))
    if rate * ((1 << bits) + 1) < least:
        return None
    counts = np.zeros(2048, dtype=np.int64)
    for a in range(0, m, _CHUNK):
        part = s[a:a + _CHUNK]
        w = np.minimum(part, 1.0 - part) + 0.0
        binade = (w.view(np.uint64) >> np.uint64(52)).astype(np.int64)
        binade[part >= 0.5] += 1024
        counts += np.bincount(binade, minlength=2048)
    with np.errstate(divide="ignore"):
        r = np.round(np.log2(counts / m * float(1 << bits)))
    r = np.clip(np.nan_to_num(r, neginf=0.0), 0, MAX_MANT_BITS).astype(np.uint8)
    return ScoreGrid(bits, r.tobytes())
