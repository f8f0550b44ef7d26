"""The parts of a positional computation (:class:`~calcheck.streaming.positional.PositionalPass`)
that read what the passes found: the bins' statistics at resolved ranks (:class:`PassBins`) and
the exact rank search that resolves them, over the source or over rows held in memory
(:class:`PassScan`).  The computation's state is declared once, on :class:`PassBins`; the
owner's ``__init__`` sets it.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray, Kept, Passes, PassSpec, S
from calcheck.binning import (
    BinStats,
    count_value,
    distinct,
    uniform_edges,
)
from calcheck.streaming.grid import Grid
from calcheck.streaming.heldrows import SortedKept, bound_ranks
from calcheck.streaming.prospect import CellsKept, HeldCellsSpec, HeldCellsState
from calcheck.streaming.rowpass import (
    rejection_weight,
)
from calcheck.streaming.runner import one_pass
from calcheck.streaming.select import (
    Resolved,
    Search,
)
from calcheck.tuning import Tuning

TCE_BINNINGS = {"tce": "pava-bc", "tce_q": "quantile", "tce_v": "pava", "tce_u": "uniform"}
POSITIONAL = ("ace", "mce_q", "pde", *TCE_BINNINGS)
QUARTILES = (0.25, 0.5, 0.75)


class PassBins:
    """The state a positional computation's parts share (set by ``PositionalPass.__init__``)
    and the statistics of its bins, read from the resolved ranks and the grid's cells."""

    ids: list[str]
    tuning: Tuning
    id_bound: int
    collect_rows: int
    bins: int
    alpha: float
    test: str
    n_min: int | None
    n_max: int | None
    hl_groups: int | None
    hl_df: str
    hl_trials: int | None
    seed: int
    share: bool
    ties: str
    grid: Grid
    cell_score: FloatArray
    cell_values: FloatArray | None
    cell_n: IntArray
    cell_pos: IntArray
    cum_n: IntArray
    cum_pos: IntArray
    n: int
    resolved: dict[int, Resolved]
    _uniform_counts: Any
    _rows: tuple[FloatArray, np.ndarray] | None
    _prospect: tuple[list[int], IntArray] | None
    _held: HeldCellsState | None

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


class PassScan(PassBins):
    """The exact rank search (:class:`~calcheck.streaming.select.Search`): passes until the row
    (with shared ties: the score and its tie group) at every rank is known — over the source,
    or over rows a pass keeps in memory (exact PAVA's sorted rows, the first search's cells)."""

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
        self.resolved.update(search.result())

    def _pass(self, spec: PassSpec[S]) -> Passes[S]:
        """One pass of ``spec``, which the rows this computation keeps may serve in place of
        the source (the runner decides, :mod:`calcheck.streaming.runner`): once exact PAVA
        holds every row, sorted, those; else the cells the first search kept."""
        if self._rows is not None and self.tuning.replay:
            kept: tuple[Kept, ...] = (SortedKept(*self._rows, self.tuning.replay_rows),)
        elif self._held is not None:
            kept = (CellsKept(self._held, self.n),)
        else:
            kept = ()
        return (yield from one_pass(spec, kept))


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
