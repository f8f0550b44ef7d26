"""Positional binnings on a stream: equal-mass and PAVA bins, TCE's per-prediction tests, PDE and
Hosmer–Lemeshow, after the grid pass (:class:`~calcheck.streaming.states.StreamState`).

One object, :class:`PositionalPass`, owns the whole computation, and :meth:`PositionalPass.run`
reads top to bottom.  Its parts live one module each: the plan here; the scan and the bins'
statistics in :mod:`calcheck.streaming.passbins`; the row pass in
:mod:`calcheck.streaming.passrows` (its per-batch state, :class:`~calcheck.streaming.rowpass.
RowPassState`, in :mod:`calcheck.streaming.rowpass`); the rows held in memory and
:func:`~calcheck.streaming.heldrows.replay` in :mod:`calcheck.streaming.heldrows`.

1. **plan** — the cut ranks of every binning the ids need: equal-mass cuts at ⌊j·n/B⌋,
   TCE(U)'s uniform bins from the grid's ECE counts, PAVA and PAVA-BC from one pass that keeps
   every row's (score, label) up to ``Tuning.exact_pava_rows`` rows — whose held rows, sorted, then
   make the passes below in memory (``heldrows.replay``), so the file is read twice in all —
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

import itertools
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from calcheck._typing import FloatArray, IntArray, Kept, Passes
from calcheck.binning import distinct, quantile_bounds
from calcheck.errors import UsageError
from calcheck.pava import (
    default_pava_bc_sizes,
    pava_bc_blocks,
    pava_bc_bounds,
    preload_compiled_pava,
)
from calcheck.streaming.grid import cells_of
from calcheck.streaming.heldrows import SortedRowsSpec
from calcheck.streaming.passbins import (  # noqa: F401 (POSITIONAL, TCE_BINNINGS: their home)
    POSITIONAL,
    TCE_BINNINGS,
    _bin_ranks,
)
from calcheck.streaming.passrows import RowPasses
from calcheck.streaming.prospect import (
    REFINE_ROWS,
    interval_cells,
    narrowed_test_cells,
    positives_before,
    rank_cells,
    test_cells,
    whole_k,
)
from calcheck.streaming.runner import drive, one_pass
from calcheck.streaming.states import StreamState, binned
from calcheck.tuning import DEFAULT, Tuning

T = TypeVar("T")


# ---------------------------------------------------------------------------------------------
# the owner: plan → scan → resolve


class PositionalPass(RowPasses):
    """The positional metrics ``ids`` (and, with ``hl_groups``, the Hosmer–Lemeshow test) of a
    streamed dataset whose grid pass gave ``state``; ``id_bound`` bounds the row ids of its
    passes.  :meth:`run` is the whole computation as :data:`Passes`."""

    def __init__(self, state: StreamState, ids: list[str], *, id_bound: int, bins: int = 10,
                 alpha: float = 0.05, test: str = "binomial", n_min: int | None = None,
                 n_max: int | None = None, hl_groups: int | None = None, ties: str = "share",
                 hl_df: str = "external", hl_trials: int | None = None, seed: int = 0,
                 collect_rows: int | None = None, tuning: Tuning = DEFAULT) -> None:
        self.ids = ids
        # of the grid state, only what the passes use (the state itself is not kept: many
        # sub-streams' computations are alive at once)
        self._uniform_counts = (binned(state, "ece")["count"]
                                if "tce_u" in ids and bins == state.bins else None)
        self.tuning = tuning
        self.id_bound = id_bound
        self.collect_rows = tuning.collect_rows if collect_rows is None else collect_rows
        self.bins, self.alpha, self.test = bins, alpha, test
        self.n_min, self.n_max, self.hl_groups = n_min, n_max, hl_groups
        self.hl_df, self.hl_trials, self.seed = hl_df, hl_trials, seed
        self.share = ties == "share"
        self.ties = ties
        # the grid's cells, or finer ones where the scores crowd them (StreamState.positional)
        self.grid, cnt, self.cell_score, self.cell_values = state.positional()
        self.cell_n = cnt.sum(axis=1)
        self.cell_pos = cnt[:, 1].copy()
        self.cum_n = np.concatenate(([0], np.cumsum(self.cell_n)))
        self.cum_pos = np.concatenate(([0], np.cumsum(self.cell_pos)))
        self.n = int(state.n)
        self.resolved = {}
        self._rows = None
        # the first search's extra ranks and the cells whose rows its pass keeps for the row
        # pass, and those rows (module prospect)
        self._prospect = None
        self._held = None

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
        details = {"ranks_resolved": len(self.resolved)}
        return self.results(bounds, stats, rows), details

    # -- 1. plan (2. scan: PassScan; 3. resolve: PassBins, RowPasses) ----------------------

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
        if self.tuning.prospect and (n > self.tuning.exact_pava_rows or not sizes):
            # a search, then a row pass
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
        """PAVA-BC bounds: exact over the sorted rows when at most ``Tuning.exact_pava_rows``
        rows (one pass keeps them), else on ``Tuning.pava_blocks`` equal-mass blocks cut at
        exact ranks (searched with the ranks ``also``)."""
        n = self.n
        if n <= self.tuning.exact_pava_rows:
            if self._rows is None:
                preload_compiled_pava(n, int(self.cum_pos[-1]))
                self._rows = (yield from one_pass(SortedRowsSpec(
                    packed=self.share, rows=n, tied=self.cell_values is not None))).sorted_rows()
                if self._rows[0].shape[0] != n:         # the later passes run over these rows
                    raise RuntimeError("the pass keeping every row saw other rows than the "
                                       "grid pass: the data changed between passes")
            scores, labels = self._rows
            b = pava_bc_bounds(labels, n_min, n_max,
                               sorted_scores=scores if self.share else None)
            return b, {"pava_input": "exact"}
        blocks = quantile_bounds(n, min(self.tuning.pava_blocks, n))
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
            blocks = quantile_bounds(n, min(self.tuning.pava_blocks, n))
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


def positional_passes(state: StreamState, ids: list[str], *, id_bound: int,
                      **options: Any) -> Passes[tuple[dict[str, Any], dict[str, Any]]]:
    """:class:`PositionalPass` ``(state, ids, ...)`` as :data:`Passes` (for shared passes)."""
    return PositionalPass(state, ids, id_bound=id_bound, **options).run()


def positional_results(source: Any, state: StreamState, ids: list[str], *,
                       kept: Sequence[Kept] = (), **options: Any,
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The positional metrics ``ids`` of a streamed source whose grid pass gave ``state``:
    (results by id, search details: the ranks resolved and the passes over ``source``);
    ``kept``: rows that may serve any of the passes; ``options`` are
    :class:`PositionalPass`'s."""
    options.setdefault("tuning", source.tuning)
    before = source.file_passes
    results, details = drive(source, positional_passes(
        state, ids, id_bound=source.id_bound(state.n), **options), kept)
    return results, {**details, "extra_passes": source.file_passes - before}


def order_statistics(source: Any, state: StreamState, ranks: IntArray) -> FloatArray:
    """The scores at ``ranks`` of the sorted scores (exact rank search; ``state`` is the grid
    pass)."""
    pos = PositionalPass(state, [], id_bound=source.id_bound(state.n),
                         tuning=source.tuning)
    drive(source, pos.scan(ranks.tolist()))
    return np.array([pos.resolved[int(r)].value for r in ranks], dtype=np.float64)
