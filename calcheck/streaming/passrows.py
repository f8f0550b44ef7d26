"""The row pass of a positional computation (:class:`RowPasses`): per binning, the cells the
grid cannot decide, TCE's tests decided by bounds on score pieces where they can be, one pass
over the rest (sharing the first pass of a rank search), and the metrics' results from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray, Passes
from calcheck.binning import (
    BinStats,
)
from calcheck.streaming.passbins import TCE_BINNINGS, PassScan
from calcheck.streaming.rowpass import (
    RowBinning,
    RowPassSpec,
    RowPassState,
    _decide_cells,
    _split_k,
    rejection_weight,
)
from calcheck.streaming.select import (
    U_MAX,
)


class RowPasses(PassScan):
    """The row pass and the results of a positional computation (see the module docstring)."""

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
        inner_b = bounds[1:-1].tolist()
        cut_u, cut_id = self._cut_keys(inner_b)
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

    def _cut_keys(self, inner: list[int]) -> tuple[list[int], list[int]]:
        """The row pass's key of every inner cut position — the resolved row's score bits and
        row id (−1 / the largest for a cut before the first or after the last row; with
        shared ties those are left out)."""
        cut_u, cut_id = [], []
        for b in inner:
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
        return cut_u, cut_id

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
            row_spec = RowPassSpec(self.grid, tuple(specs), self.tuning.pending_rows)
            search = self._search(list(ranks))
            first = search.next_spec() if search is not None else None
            if first is None and not any(spec.cells for spec in specs):
                done: RowPassState = row_spec.new()    # no row to read: all decided already
            elif first is None:
                done = (yield from self._pass(row_spec)).finish()
            else:                              # one pass for both
                both = yield from self._pass(ViewsSpec(((SubStream(group=ALL), row_spec),
                                                        (SubStream(group=ALL), first))))
                done = both.states[0].finish()
                assert search is not None
                search.absorb(both.states[1])
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
