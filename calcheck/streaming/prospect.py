"""The row pass, kept ahead: the rows a rank search's pass keeps for the row pass after it.

Past the rows exact PAVA holds (or with no PAVA binning), the positional metrics read the file
three times: the grid, the exact rank search, and a row pass over the few grid cells whose
rows the grid cannot decide (the cells at the bins' cuts, and those where TCE's per-prediction
test or PDE's |s − P̂_b| changes side within the cell: a few hundred cells of a few hundred
rows at 3·10^7 rows).  Which cells those are depends on the bins' exact positives, which the
search gives; but the grid alone brackets them: a rank cuts one grid cell, and the positives
of that cell's rows before the cut lie between what the cell's counts allow.  So, before the
search, the grid's bins (for PAVA: PAVA on the blocks' midpoint positives) give every bin's
positives within a range, and from the range the cells where each bin's test can change side
(:func:`test_cells`, the binomial test's; with ``--test t`` there is no guess).  The search's
pass keeps the rows of those cells, a few grid cells wider (:class:`HeldCellsSpec`).  When
the exact bins' cells are among them, the row pass runs over the kept rows
(:func:`replay_held`) — batch by batch as the file gave them, so its sums are the same — and
the file is read twice; else it reads the file as before.  Past exact PAVA, PAVA-BC's bins
come from the search (its blocks' exact positives) and may end a block or so away from the
guess — with other quartile ranks, other tests: the pass also keeps the cells of the ranks
and of the row pass of the bins whose ends are ``Tuning.window_blocks`` blocks off (when they fit),
and a search of the ranks the guess missed, like the row pass, runs over the kept rows when
they hold its cells.  Nothing is
approximated: a wrong guess costs only the pass it failed to save.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.streaming.grid import Grid, cell_flags, cells_of, flagged_rows
from calcheck.streaming.select import row_ids

# how many rows a search pass keeps (Tuning.prospect_rows: 9 bytes a row, 17 with row ids,
# ≤ 38 / 71 MB; 10^8 rows keep ~1.8·10^6; and at most 1/Tuning.prospect_share of the rows)
# and how far PAVA's guessed bins may move (Tuning.window_blocks) are knobs of calcheck.tuning
MARGIN_CELLS = 2            # grid cells kept on each side of a predicted cell
REFINE_ROWS = 1 << 16       # a guessed bracket holding more rows is narrowed by exact bounds
FEW_K = 64                  # ... each whole k of its bin's range apart, up to this many


@dataclass(frozen=True)
class HeldCellsSpec:
    """A pass's side job: keep the (score, label[, row id]) of the rows in grid cells
    ``cells``, batch by batch (row ids only with ``ids``: shared ties do not use them)."""

    grid: Grid
    cells: tuple[int, ...]
    ids: bool = True

    def new(self) -> HeldCellsState:
        return HeldCellsState(self)


@dataclass
class HeldCellsState:
    spec: HeldCellsSpec
    batches: list[tuple[FloatArray, np.ndarray, IntArray | int]] = field(default_factory=list)

    def update(self, scores: FloatArray, labels: IntArray,
               start: int | IntArray = 0) -> HeldCellsState:
        s = np.asarray(scores, dtype=np.float64)
        if s.shape[0] == 0:
            return self
        grid = self.spec.grid
        sel = flagged_rows(cell_flags(self.spec.cells, grid), grid.cells(s))
        if sel.shape[0]:
            ids = row_ids(start, sel) if self.spec.ids else 0
            self.batches.append((s[sel], np.asarray(labels)[sel], ids))
        return self

    def merge(self, other: HeldCellsState) -> HeldCellsState:
        self.batches.extend(other.batches)
        return self

    def covers(self, cells: set[int]) -> bool:
        return cells <= set(self.spec.cells)


@dataclass(frozen=True)
class CellsKept:
    """The rows of the cells a search's pass kept (of a stream of ``n`` rows): they serve a
    pass that reads only rows of those cells (:func:`replay_held`)."""

    held: HeldCellsState
    n: int

    def serves(self, spec: Any) -> bool:
        from calcheck.streaming.heldrows import cells_read

        cells = cells_read(spec)
        return cells is not None and self.held.covers(set(cells.tolist()))

    def state(self, spec: Any) -> Any:
        return replay_held(spec, self.held, self.n)


def replay_held(spec: Any, held: HeldCellsState, n: int) -> Any:
    """The state of a pass of ``spec`` over the kept rows, batch by batch with their row ids
    (when kept): the pass the file (of ``n`` rows) would give, for a spec that reads only rows
    of the kept cells — the row pass, a rank search, or one pass of both (the parts of a
    :class:`~calcheck.streaming.views.ViewsSpec` over the whole stream, one by one)."""
    from calcheck.streaming.select import SelectState
    from calcheck.streaming.views import ViewsSpec, ViewsState

    if isinstance(spec, ViewsSpec):
        return ViewsState(spec, [replay_held(part, held, n) for _, part in spec.parts])
    state = spec.new()
    for s, y, ids in held.batches:
        state.update(s, y, ids)
    if isinstance(state, SelectState):
        state.n = n                              # the rows seen, as the file's pass counts them
    return state


def rank_cells(cum_n: IntArray, ranks: IntArray) -> IntArray:
    """The grid cell of the row at each rank in [0, n) (``cum_n``: cumulative cell counts,
    starting at 0)."""
    return np.searchsorted(cum_n, ranks, side="right") - 1


def positives_before(cum_n: IntArray, cum_pos: IntArray, cell_n: IntArray,
                     cell_pos: IntArray, ranks: IntArray
                     ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Positives among the rows sorted before each rank, from the grid alone: (least, most,
    midpoint) — the cut cell's rows before the rank hold between max(0, j − negatives) and
    min(j, positives) of its positives (j rows)."""
    n = int(cum_n[-1])
    r = np.clip(ranks, 0, n)
    c = np.minimum(rank_cells(cum_n, r), cell_n.shape[0] - 1)
    j = r - cum_n[c]
    cn, cp = cell_n[c], cell_pos[c]
    least = cum_pos[c] + np.maximum(0, j - (cn - cp))
    most = cum_pos[c] + np.minimum(j, cp)
    mid = cum_pos[c] + np.where(cn > 0, j * cp / np.maximum(cn, 1), 0.0)
    return least.astype(np.float64), most.astype(np.float64), mid


def wilson(k: FloatArray, n: FloatArray, z: float, side: float) -> FloatArray:
    """The Wilson score bound of k positives in n rows (``side`` −1: lower, +1: upper): where
    |k − n·p| = z·√(n·p(1 − p))."""
    p = k / n
    den = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / den
    half = z * np.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / den
    return np.asarray(centre + side * half, dtype=np.float64)


def whole_k(k_least: FloatArray, k_most: FloatArray, n: FloatArray
            ) -> tuple[FloatArray, FloatArray]:
    """The whole counts of positives a (maybe fractional) range [k_least, k_most] of bins of
    n rows can hold."""
    return (np.clip(np.floor(k_least + 1e-9), 0.0, n),
            np.clip(np.ceil(k_most - 1e-9), 0.0, n))


def test_cells(k_least: FloatArray, k_most: FloatArray, n: FloatArray,
               alpha: float) -> tuple[FloatArray, FloatArray]:
    """Score intervals (lower ends, upper ends) holding, for bins of ``n`` rows whose positives
    lie in [k_least, k_most], every score where the exact two-sided binomial test of a bin
    against the score can change side: P̂ = k/n, and on each side the test's threshold.  The
    threshold is the Wilson score bound, widened by (1 + z²/2)/n (z the normal quantile of
    1 − α/2): the exact threshold lies within 0.6/n of it at α = 0.05, within 3.3/n at
    α = 0.001 (measured over n from 10 to 1.5·10^6), and both move up with k — so no binomial
    test is needed, nor scipy, before the pass."""
    from statistics import NormalDist

    some = n > 0
    nn = n[some]
    k_lo, k_hi = whole_k(k_least[some], k_most[some], nn)
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    pad = (1.0 + z * z / 2.0) / nn
    lows, highs = [k_lo / nn], [k_hi / nn]
    for side in (-1.0, 1.0):
        a, b = wilson(k_lo, nn, z, side), wilson(k_hi, nn, z, side)
        lows.append(np.minimum(a, b) - pad)
        highs.append(np.maximum(a, b) + pad)
    return np.concatenate(lows), np.concatenate(highs)


def narrowed_test_cells(k_lo: FloatArray, k_hi: FloatArray, n: FloatArray, low: FloatArray,
                        high: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
    """The scores within brackets [low_i, high_i] (from :func:`test_cells`) of bins of n_i rows
    whose positives lie in [k_lo_i, k_hi_i] (whole numbers) where the exact binomial test's
    decision is not settled by :func:`calcheck.binomial.interval_bounds`: for each whole k of
    the range, the point k/n and, on each side of it, what
    :func:`calcheck.binomial.decided_pieces` leaves uncovered when it halves the side down to
    2^-24 of the bracket — as intervals (lows, highs).  Near 0 a bin of P̂ ≈ 10^-4 brackets
    its thresholds over [0, ~5/N] (the padding of the Wilson bounds), which can hold millions
    of crowded rows; its exact thresholds lie in a few of them.  A range of more than
    ``FEW_K`` values keeps its bracket."""
    from calcheck.binomial import decided_pieces, side_ends

    low, high = np.maximum(low, 0.0), np.minimum(high, 1.0)   # (the padding leaves [0, 1])
    span = np.where(low <= high, k_hi - k_lo, -1.0)           # (-1: nothing left)
    wide = span > FEW_K
    few = np.flatnonzero(~wide)
    owner = few.repeat((span[few] + 1).astype(np.int64))
    step = np.arange(owner.shape[0]) - np.repeat(
        np.cumsum(span[few] + 1) - (span[few] + 1), (span[few] + 1).astype(np.int64))
    k = k_lo[owner] + step
    nn, a, z = n[owner], low[owner], high[owner]
    below, above = side_ends(k, nn)
    sk, sn = np.concatenate((k, k)), np.concatenate((nn, nn))
    sa = np.concatenate((a, np.maximum(a, above)))       # below k/n, then above it
    sz = np.concatenate((np.minimum(z, below), z))
    width = np.concatenate((z - a, z - a)) * 2.0 ** -24
    keep = sa <= sz
    sk, sn, sa, sz, width = sk[keep], sn[keep], sa[keep], sz[keep], width[keep]
    o, p0, p1, _ = decided_pieces(sk, sn, sa, sz, alpha, width)
    # what the pieces leave uncovered: a side without a piece; before the first piece of a
    # side, between two of its pieces that do not touch, after its last
    has = np.zeros(sa.shape[0], dtype=bool)
    has[o] = True
    los, his = [sa[~has], low[wide]], [sz[~has], high[wide]]    # (wide: the bracket)
    if o.shape[0]:
        first = np.concatenate(([True], o[1:] != o[:-1]))
        last = np.concatenate((o[1:] != o[:-1], [True]))
        lead = first & (p0 > sa[o])
        trail = last & (p1 < sz[o])
        gap = ~first[1:] & (p0[1:] > np.nextafter(p1[:-1], np.inf))
        los += [sa[o[lead]], np.nextafter(p1[trail], np.inf), np.nextafter(p1[:-1][gap], np.inf)]
        his += [np.nextafter(p0[lead], -np.inf), sz[o[trail]], np.nextafter(p0[1:][gap], -np.inf)]
    point = k / nn                                        # the side boundary itself
    inside = (point >= a) & (point <= z)
    los.append(point[inside])
    his.append(point[inside])
    lo_all, hi_all = np.concatenate(los), np.concatenate(his)
    ok = lo_all <= hi_all
    return lo_all[ok], hi_all[ok]


def interval_cells(lows: FloatArray, highs: FloatArray, grid: Grid,
                   margin: int = MARGIN_CELLS) -> IntArray:
    """The grid cells of the score intervals [lows, highs], ``margin`` cells wider on each
    side."""
    size = grid.n_cells
    a = np.clip(cells_of(grid, lows) - margin, 0, size - 1)
    b = np.clip(cells_of(grid, highs) + margin, 0, size - 1)
    mark = np.zeros(size + 1, dtype=np.int64)
    np.add.at(mark, a, 1)
    np.add.at(mark, b + 1, -1)
    return np.flatnonzero(np.cumsum(mark)[:size] > 0)
