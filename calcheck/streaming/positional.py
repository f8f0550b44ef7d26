"""Positional binnings on a stream: equal-mass bins, TCE's per-prediction tests, PDE, HL.

After the grid pass (:class:`~calcheck.streaming.states.StreamState`):

1. **Bins.** Equal-mass bins (ACE, MCE(Q), TCE(Q), PDE, Hosmer–Lemeshow) and TCE(U)'s uniform
   bins are cut at exact ranks of the stable sort; :mod:`calcheck.streaming.select` finds the
   rows at those ranks exactly, in one or a few extra passes.  PAVA / PAVA-BC (TCE, TCE(V)) run
   on the grid aggregate — one block per grid cell — so their bins end at cell boundaries: the
   one approximation here, recorded in the metric's settings.
2. **Tests.** TCE tests every prediction against its bin.  A grid cell inside one bin whose whole
   score interval is decided by exact monotone p-value bounds is counted from the grid; the
   other cells (the bins' boundary cells and the cells near a rejection threshold) are
   evaluated row by row in one more pass.  PDE's Σ|s − P̂_b| likewise.  Given the bins, the
   rejection counts are exact.
"""

from __future__ import annotations

import functools
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import (
    BinStats,
    default_pava_bc_sizes,
    pava_settle,
    pava_tail,
    quantile_bounds,
    uniform_edges,
)
from calcheck.errors import UsageError
from calcheck.streaming.select import (
    COLLECT_ROWS,
    Resolved,
    Search,
    bound_ranks,
    positional_from_grid,
    row_ids,
)
from calcheck.streaming.states import CompensatedSum, StreamState

TCE_BINNINGS = {"tce": "pava-bc", "tce_q": "quantile", "tce_v": "pava", "tce_u": "uniform"}
SAFETY = 1e-9
EXACT_PAVA_ROWS = 10_000_000   # PAVA / PAVA-BC exactly up to this many rows (9 bytes a row)
PAVA_BLOCKS = 4096             # beyond: PAVA-BC over this many equal-mass blocks
U_MAX = np.iinfo(np.uint64).max

T = TypeVar("T")
Passes = Generator[Any, Any, T]
"""A computation that needs passes over the data: it yields each pass's spec, is sent the
merged state of that pass, and returns its result (:func:`drive` runs one on a source;
:func:`calcheck.streaming.views.drive_lockstep` runs many in shared passes)."""


def drive(source: Any, passes: Passes[T]) -> T:
    """Run ``passes`` on ``source``: one :meth:`StreamSource.run` per yielded spec."""
    try:
        spec = next(passes)
        while True:
            spec = passes.send(source.run(spec)[0])
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def pava_bc_blocks(cell_n: IntArray, cell_pos: IntArray, n_min: int, n_max: int) -> IntArray:
    """Bounds of PAVA-BC (SPEC §2, the authors' rule) run on pre-pooled blocks of sorted rows.

    Each non-empty block enters whole (weight N_c, sum K_c) instead of as N_c single rows; the
    merge rule and the tail step are the row algorithm's, so bins end at block boundaries.
    ``n_min = 0, n_max = n + 1`` is plain PAVA.
    """
    occ = np.flatnonzero(cell_n)
    w_all, s_all = cell_n[occ].tolist(), cell_pos[occ].tolist()
    n = int(sum(w_all))
    W: list[int] = []
    S: list[int] = []
    used = 0
    i = 0
    while i < len(w_all) and (n_min == 0 or used + w_all[i] <= n - n_min):
        used += w_all[i]
        wt, st = pava_settle(W, S, w_all[i], s_all[i], n_min, n_max)
        i += 1
        W.append(wt)
        S.append(st)
    if n - used:
        pava_tail(W, n - used, n_min, n_max)
    return np.concatenate(([0], np.cumsum(W, dtype=np.int64))).astype(np.int64)


@dataclass(frozen=True)
class RowBinning:
    """One binning's row-by-row work in the final pass: the cells to evaluate, the cut keys
    between bins, and per bin N, k, P̂."""

    cells: tuple[int, ...]
    cut_u: tuple[int, ...]
    cut_id: tuple[int, ...]
    n: tuple[int, ...]
    k: tuple[int, ...]
    alpha: float
    test: str
    tce: bool
    pde: bool


@dataclass(frozen=True)
class RowPassSpec:
    grid_bits: int
    binnings: tuple[RowBinning, ...]

    def new(self) -> RowPassState:
        return RowPassState(self)


@dataclass
class RowPassState:
    """Per binning and bin: rows evaluated, rejections, and Σ|s − P̂_b| (compensated)."""

    spec: RowPassSpec
    rows: list[IntArray] = field(default_factory=list)
    rejected: list[IntArray] = field(default_factory=list)
    absdev: list[CompensatedSum] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.rows:
            for b in self.spec.binnings:
                size = len(b.n)
                self.rows.append(np.zeros(size, dtype=np.int64))
                self.rejected.append(np.zeros(size, dtype=np.int64))
                self.absdev.append(CompensatedSum.zeros(size))

    def update(self, scores: FloatArray, labels: IntArray,
               start: int | IntArray = 0) -> RowPassState:
        s = np.asarray(scores, dtype=np.float64)
        if s.shape[0] == 0:
            return self
        cell = (s * float(1 << self.spec.grid_bits)).astype(np.intp)
        for j, b in enumerate(self.spec.binnings):
            sel = np.flatnonzero(_cell_flags(b.cells, self.spec.grid_bits).take(cell))
            if sel.shape[0] == 0:
                continue
            ss = s[sel] + 0.0
            u = ss.view(np.uint64)
            ids = row_ids(start, sel)
            cut_u = np.array(b.cut_u, dtype=np.uint64)
            bins = np.searchsorted(cut_u, u, side="left").astype(np.int64)
            for cu, ci in zip(b.cut_u, b.cut_id):
                bins += (u == np.uint64(cu)) & (ids >= ci)
            size = len(b.n)
            self.rows[j] += np.bincount(bins, minlength=size)
            nn = np.asarray(b.n, dtype=np.float64)
            kk = np.asarray(b.k, dtype=np.float64)
            if b.tce:                      # one test per distinct (bin, score)
                uniq, mult = np.unique(np.stack([bins.astype(np.uint64), u]), axis=1,
                                       return_counts=True)
                ub = uniq[0].astype(np.int64)
                rej = _reject(kk[ub], nn[ub], uniq[1].view(np.float64), b.alpha, b.test)
                self.rejected[j] += np.bincount(ub[rej], weights=mult[rej],
                                                minlength=size).round().astype(np.int64)
            if b.pde:
                phat = np.where(nn > 0, kk / np.maximum(nn, 1), 0.0)
                self.absdev[j].add(np.bincount(bins, weights=np.abs(ss - phat[bins]),
                                               minlength=size))
        return self

    def merge(self, other: RowPassState) -> RowPassState:
        if self.spec != other.spec:
            raise ValueError("cannot merge row passes with different specs")
        for j in range(len(self.rows)):
            self.rows[j] += other.rows[j]
            self.rejected[j] += other.rejected[j]
            self.absdev[j].merge(other.absdev[j])
        return self


@functools.lru_cache(maxsize=8)
def _cell_flags(cells: tuple[int, ...], bits: int) -> np.ndarray:
    flags = np.zeros((1 << bits) + 1, dtype=bool)
    flags[list(cells)] = True
    return flags


def _reject(k: FloatArray, n: FloatArray, p: FloatArray, alpha: float, test: str) -> np.ndarray:
    if test == "binomial":
        from calcheck.hypotests.binom import binomtest_pvalue

        return binomtest_pvalue(k, n, p) <= alpha
    from calcheck.metrics.tce import t_test_reject

    return t_test_reject(p, k / n, n, alpha)


def _cell_interval(cells: IntArray, bits: int) -> tuple[FloatArray, FloatArray]:
    """Smallest and largest float of each grid cell."""
    c = cells.astype(np.float64)
    lo = np.ldexp(c, -bits)
    hi = np.nextafter(np.ldexp(c + 1.0, -bits), -np.inf)
    return lo, np.where(cells >= 1 << bits, 1.0, hi)


def _decide_cells(k: FloatArray, n: FloatArray, lo: FloatArray, hi: FloatArray, alpha: float,
                  test: str) -> tuple[np.ndarray, np.ndarray]:
    """(every row rejected, no row rejected) for cells with score interval [lo, hi]."""
    if test == "binomial":
        from calcheck.hypotests.binom import interval_bounds

        below = hi * n < k                 # scipy's own predicates, monotone in p
        above = lo * n > k
        side = below | above
        yes = np.zeros(k.shape[0], dtype=bool)
        no = np.zeros(k.shape[0], dtype=bool)
        i = np.flatnonzero(side)
        if i.size:
            lower, upper = interval_bounds(k[i], n[i], lo[i], hi[i])
            yes[i] = upper <= alpha * (1 - SAFETY)
            no[i] = lower > alpha * (1 + SAFETY)
        return yes, no
    phat = k / n
    same = (hi <= phat) | (lo >= phat)
    r_lo, r_hi = _reject(k, n, lo, alpha, test), _reject(k, n, hi, alpha, test)
    return same & r_lo & r_hi, same & ~r_lo & ~r_hi


class Positional:
    """Positional bins of a streamed dataset whose grid pass gave ``state``; ``id_bound``
    bounds the row ids of its passes.  The methods that need passes over the data are
    :data:`Passes` generators."""

    def __init__(self, state: StreamState, *, id_bound: int,
                 exact_rows: int = EXACT_PAVA_ROWS, blocks: int = PAVA_BLOCKS,
                 collect_rows: int = COLLECT_ROWS) -> None:
        self.state = state
        self.id_bound = id_bound
        self.collect_rows = collect_rows
        cnt = state.cell_count.reshape(-1, 2)
        self.cell_n = cnt.sum(axis=1)
        self.cell_pos = cnt[:, 1].copy()
        assert state.cell_score is not None
        self.cell_score = state.cell_score.value.reshape(-1, 2).sum(axis=1)
        self.n = int(state.n)
        self.bits = state.grid_bits
        self.resolved: dict[int, Resolved] = {}
        self.passes = 0
        self.exact_rows = exact_rows
        self.blocks = blocks
        self._sorted_labels: IntArray | None = None

    # -- ranks and bins -----------------------------------------------------------------------

    def resolve(self, ranks: list[int]) -> Passes[None]:
        """Find the rows at ``ranks`` (extra passes over the source)."""
        need = sorted(set(ranks) - set(self.resolved))
        if not need:
            return
        search = Search(np.asarray(need), self.cell_n, self.bits, self.id_bound,
                        self.collect_rows)
        while (spec := search.next_spec()) is not None:
            search.absorb((yield spec))
        self.passes += search.passes
        self.resolved.update(search.result())

    def bounds(self, binning: str, bins: int, n_min: int | None = None,
               n_max: int | None = None) -> Passes[tuple[IntArray, dict[str, Any]]]:
        """Cut ranks of a binning and its settings (as the in-memory engine reports them)."""
        n = self.n
        if binning == "quantile":
            return quantile_bounds(n, bins), {"bins": bins}
        if binning == "uniform":
            if bins != self.state.bins:
                raise UsageError("uniform bins must equal the grid state's --bins")
            counts = self.state.binned("ece")["count"]
            return np.concatenate(([0], np.cumsum(counts))).astype(np.int64), {"bins": bins}
        if binning == "pava":
            b, how = yield from self._pava(0, n + 1)
            return b, how
        d_min, d_max = default_pava_bc_sizes(n)
        lo = d_min if n_min is None else n_min
        hi = d_max if n_max is None else n_max
        if lo < 0 or hi < lo:
            raise UsageError(f"TCE bin sizes need 0 <= n_min <= n_max, got n_min={lo}, n_max={hi}")
        b, how = yield from self._pava(lo, hi)
        return b, {"n_min": lo, "n_max": hi, **how}

    def _pava(self, n_min: int, n_max: int) -> Passes[tuple[IntArray, dict[str, Any]]]:
        """PAVA-BC bounds: exact over the stably sorted labels when at most ``exact_rows`` rows
        (one pass keeps them), else on ``blocks`` equal-mass blocks cut at exact ranks."""
        from calcheck.binning import pava_bc_bounds
        from calcheck.streaming.select import SortedLabelsSpec

        n = self.n
        if n <= self.exact_rows:
            if self._sorted_labels is None:
                self.passes += 1
                self._sorted_labels = (yield SortedLabelsSpec()).sorted_labels()
            return pava_bc_bounds(self._sorted_labels, n_min, n_max), {"pava_input": "exact"}
        blocks = quantile_bounds(n, min(self.blocks, n))
        yield from self.resolve([b for b in blocks.tolist() if 0 < b < n])
        count, pos, _, _, _ = positional_from_grid(blocks, self.resolved, self.cell_n,
                                                   self.cell_pos, self.cell_score, edges=False)
        keep = count > 0
        inner = pava_bc_blocks(count[keep], pos[keep], n_min, n_max)
        return inner, {"pava_input": "approximate: equal-mass blocks",
                       "pava_blocks": len(count), "pava_block_rows": n // len(count)}

    def binstats(self, bounds: IntArray, kind: str, params: dict[str, Any],
                 edges: tuple[FloatArray, FloatArray] | None = None) -> Passes[BinStats]:
        yield from self.resolve(bound_ranks(bounds, self.n))
        count, pos, ssum, lower, upper = positional_from_grid(
            bounds, self.resolved, self.cell_n, self.cell_pos, self.cell_score)
        if edges is not None:
            lower, upper = edges
        return BinStats(kind=kind, lower=lower, upper=upper, count=count, sum_score=ssum,
                        sum_label=pos, params=dict(params))

    # -- row-level work -----------------------------------------------------------------------

    def _cell_of_bounds(self, bounds: IntArray) -> IntArray:
        """Grid cell of the first row of each bin boundary (−1 for rank 0, past the end for n)."""
        out = []
        for b in bounds[1:-1].tolist():
            out.append(-1 if b <= 0 else self.resolved[b].cell if b < self.n
                       else self.cell_n.shape[0])
        return np.asarray(out, dtype=np.int64)

    def row_binning(self, bounds: IntArray, stats: BinStats, *, alpha: float, test: str,
                    tce: bool, pde: bool) -> tuple[RowBinning, dict[str, Any]]:
        """Split the work of one binning: cells decided from the grid (returned as partial
        per-bin results) and the cells left for the row pass (the returned spec)."""
        nb = stats.n_bins
        cuts = self._cell_of_bounds(bounds)
        occ = np.flatnonzero(self.cell_n)
        cell_bin = np.searchsorted(cuts, occ, side="left")      # bins between boundary cells
        boundary = np.isin(occ, cuts)
        N = stats.count.astype(np.float64)
        K = stats.sum_label.astype(np.float64)
        phat = np.where(N > 0, K / np.maximum(N, 1), 0.0)
        lo, hi = _cell_interval(occ, self.bits)
        inner = np.flatnonzero(~boundary)
        b_in, c_in = cell_bin[inner], occ[inner]
        cn, cs = self.cell_n[c_in], self.cell_score[c_in]
        exact = boundary.copy()
        if tce:
            yes, no = _decide_cells(K[b_in], N[b_in], lo[inner], hi[inner], alpha, test)
            exact[inner[~yes & ~no]] = True
        if pde:
            p = phat[b_in]
            up, down = lo[inner] >= p, hi[inner] <= p
            dev = np.where(up, cs - cn * p, np.where(down, cn * p - cs, 0.0))
            exact[inner[~up & ~down]] = True
        grid = ~exact[inner]                     # cells counted from the grid aggregate
        partial: dict[str, Any] = {
            "rows": np.bincount(b_in[grid], weights=cn[grid], minlength=nb).astype(np.int64),
            "rejected": np.zeros(nb, dtype=np.int64), "absdev": np.zeros(nb)}
        if tce:
            take = grid & yes
            partial["rejected"] = np.bincount(b_in[take], weights=cn[take],
                                              minlength=nb).astype(np.int64)
        if pde:
            partial["absdev"] = np.bincount(b_in[grid], weights=dev[grid], minlength=nb)
        ex = occ[exact]
        cut_u, cut_id = [], []
        for b in bounds[1:-1].tolist():
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
        spec = RowBinning(cells=tuple(ex.tolist()), cut_u=tuple(cut_u), cut_id=tuple(cut_id),
                          n=tuple(stats.count.tolist()), k=tuple(stats.sum_label.tolist()),
                          alpha=alpha, test=test, tce=tce, pde=pde)
        return spec, partial

    def row_pass(self, binnings: list[RowBinning]) -> Passes[RowPassState]:
        self.passes += 1
        state: RowPassState = yield RowPassSpec(self.bits, tuple(binnings))
        return state


# ---------------------------------------------------------------------------------------------
# the metrics and the Hosmer–Lemeshow test


POSITIONAL = ("ace", "mce_q", "pde", *TCE_BINNINGS)
QUARTILES = (0.25, 0.5, 0.75)


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


def _tce_extra(pos: Positional, bounds: IntArray, stats: BinStats,
               rejected: IntArray) -> dict[str, Any]:
    nb = stats.n_bins
    qs = _quartile_ranks(bounds)
    ne = stats.count > 0
    val = pos.resolved
    quart = np.full((nb, 3), np.nan)
    for i, (lo, hi, frac) in enumerate(qs):
        if lo >= 0:
            a, b = val[lo].value, val[hi].value
            quart[i // 3, i % 3] = a + frac * (b - a)
    first = [val[a].value if c else np.nan for a, c in zip(bounds[:-1].tolist(), ne)]
    last = [val[b - 1].value if c else np.nan for b, c in zip(bounds[1:].tolist(), ne)]
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(ne, 100.0 * rejected / np.maximum(stats.count, 1), np.nan)
    return {"min_score": np.asarray(first), "q1_score": quart[:, 0],
            "median_score": quart[:, 1], "q3_score": quart[:, 2],
            "max_score": np.asarray(last), "rejected": rejected, "rejected_pct": pct}


def positional_results(source: Any, state: StreamState, ids: list[str], **options: Any,
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The positional metrics ``ids`` (and, with ``hl_groups``, the Hosmer–Lemeshow test) of a
    streamed dataset whose grid pass gave ``state``: (results by id, search details).  The
    ``options`` are :func:`positional_passes`'s."""
    return drive(source, positional_passes(state, ids, id_bound=source.id_bound(state.n),
                                           **options))


def positional_passes(state: StreamState, ids: list[str], *, id_bound: int, bins: int = 10,
                      alpha: float = 0.05, test: str = "binomial", n_min: int | None = None,
                      n_max: int | None = None, hl_groups: int | None = None,
                      exact_rows: int | None = None, blocks: int | None = None,
                      collect_rows: int = COLLECT_ROWS,
                      ) -> Passes[tuple[dict[str, Any], dict[str, Any]]]:
    """:func:`positional_results` as :data:`Passes` (``id_bound`` bounds the row ids;
    ``collect_rows`` caps the rows a search pass collects)."""
    from calcheck.metrics._result import MetricResult
    from calcheck.metrics.binned import ece_from_stats, mce_from_stats
    from calcheck.metrics.tce import check_pava_bc_rows

    pos = Positional(state, id_bound=id_bound,
                     exact_rows=EXACT_PAVA_ROWS if exact_rows is None else exact_rows,
                     blocks=PAVA_BLOCKS if blocks is None else blocks,
                     collect_rows=collect_rows)
    n = pos.n
    wanted: dict[str, tuple[IntArray, dict[str, Any]]] = {}
    if any(m in ids for m in ("ace", "mce_q", "pde", "tce_q")):
        wanted["quantile"] = yield from pos.bounds("quantile", bins)
    for mid, binning in TCE_BINNINGS.items():
        if mid in ids and binning != "quantile":
            if binning == "pava-bc":
                check_pava_bc_rows(n, n_min, n_max)
            wanted[binning] = yield from pos.bounds(binning, bins, n_min, n_max)
    if hl_groups:
        wanted["hl"] = (quantile_bounds(n, hl_groups), {"groups": hl_groups})
    tce_of = {TCE_BINNINGS[m]: m for m in ids if m in TCE_BINNINGS}
    ranks: list[int] = []
    for binning, (b, _) in wanted.items():
        ranks += bound_ranks(b, n)
        if binning in tce_of:
            ranks += [r for lo, hi, _ in _quartile_ranks(b) if lo >= 0 for r in (lo, hi)]
            ranks += [0, n - 1]
    yield from pos.resolve(ranks)
    stats = {}
    for binning, (b, params) in wanted.items():
        kind = "quantile" if binning == "hl" else binning
        edges = None
        if binning == "uniform":
            e = uniform_edges(bins)
            edges = (e[:-1].copy(), e[1:].copy())
        stats[binning] = yield from pos.binstats(b, kind, params, edges)
    rows: list[RowBinning] = []
    partials: list[dict[str, Any]] = []
    row_of: dict[str, int] = {}
    for binning in wanted:
        use_tce = binning in tce_of
        use_pde = binning == "quantile" and "pde" in ids
        if use_tce or use_pde:
            spec, part = pos.row_binning(wanted[binning][0], stats[binning], alpha=alpha,
                                         test=test, tce=use_tce, pde=use_pde)
            row_of[binning] = len(rows)
            rows.append(spec)
            partials.append(part)
    if rows:
        done = yield from pos.row_pass(rows)
        for binning, j in row_of.items():
            total = partials[j]["rows"] + done.rows[j]
            if not np.array_equal(total, stats[binning].count):
                raise RuntimeError("the row pass saw other rows than the grid pass: the data "
                                   "changed between passes")
            partials[j]["rejected"] = partials[j]["rejected"] + done.rejected[j]
            partials[j]["absdev"] = partials[j]["absdev"] + done.absdev[j].value
    out: dict[str, Any] = {}
    for mid in ids:
        if mid in ("ace", "mce_q"):
            st = stats["quantile"]
            value = ece_from_stats(st, 1) if mid == "ace" else mce_from_stats(st)
            out[mid] = MetricResult(id=mid, value=value, settings={
                "binning": "quantile", "bins": bins, "norm": "l1" if mid == "ace" else "max"},
                n_samples=n, bins=st)
        elif mid == "pde":
            st = stats["quantile"]
            dev = partials[row_of["quantile"]]["absdev"]
            with np.errstate(invalid="ignore", divide="ignore"):
                mean_dev = np.where(st.nonempty, dev / np.maximum(st.count, 1), np.nan)
            out[mid] = MetricResult(id="pde", value=float(dev.sum() / n),
                                    settings={"binning": "quantile", "bins": bins},
                                    n_samples=n, bins=st,
                                    bin_extra={"mean_abs_deviation": mean_dev})
        elif mid in TCE_BINNINGS:
            binning = TCE_BINNINGS[mid]
            st = stats[binning]
            b, extra = wanted[binning]
            rej = partials[row_of[binning]]["rejected"]
            settings = {"binning": binning, **extra, "alpha": alpha, "test": test,
                        "n_bins": st.n_bins}
            out[mid] = MetricResult(id=mid, value=100.0 * int(rej.sum()) / n, unit="percent",
                                    settings=settings, n_samples=n, bins=st,
                                    bin_extra=_tce_extra(pos, b, st, rej))
    if hl_groups:
        from calcheck.hypotests.classical import hosmer_lemeshow_from_groups

        st = stats["hl"]
        out["hosmer_lemeshow"] = hosmer_lemeshow_from_groups(
            st.count, st.sum_label, st.sum_score, groups=hl_groups, alpha=alpha)
    details = {"extra_passes": pos.passes, "ranks_resolved": len(pos.resolved)}
    return out, details
