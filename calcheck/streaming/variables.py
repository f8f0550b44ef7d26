"""Variable-based calibration (VECE, ``ece_qcut``, VCE(v*)) on the streaming engines.

The in-memory engine sorts each variable; a stream cannot, so the same numbers come from a few
mergeable passes over the variable columns (and the predictions, for pred_error and incorrect):

1. **scan**: rows and missing values per variable, the top-16-bit histogram of each column's
   order keys (:mod:`calcheck.streaming.ranks`), and each variable's distinct values while
   there are at most ``MAX_GROUPS`` of them;
2. **rank search** (usually one or two passes): the exact values at the ranks numpy's linear
   percentile reads — the qcut edges over v and over pred_error, the 5%/95% ends of the LOESS
   grid and, for a variable with more than ``MAX_GROUPS`` distinct values, the last value of
   each of the in-memory engine's ``MAX_GROUPS`` equal-count LOESS groups;
3. **bins**: per qcut bin int64 rows and errors and a compensated Σ pred_error; per LOESS value
   (or group) rows, Σ v, Σ incorrect, Σ pred_error and Σ pred_error².

So the qcut edges are bit-identical to ``numpy.percentile``, bin counts identical and VECE,
``ece_qcut`` equal to the in-memory values to ~1e-15.  LOESS is exact for a variable with at
most ``MAX_GROUPS`` distinct values (age, counts, codes): the aggregate is the in-memory one.
With more, rows are grouped by value at the same cut ranks (rows tied with a cut go to the lower
group, where the in-memory engine splits them by position) and each group's rows sit at the
group mean for the LOESS bandwidths too — recorded in the result's settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.metrics.vece import (
    MAX_GROUPS,
    QcutTable,
    RankedRows,
    VariableResult,
    _Aggregated,
    qcut_table,
    variable_result,
)
from calcheck.streaming.ranks import (
    FULL,
    ColumnScan,
    Ranges,
    percentile_ranks,
    search_ranks,
)
from calcheck.streaming.states import CompensatedSum


def error_view(s: FloatArray, y: Any, binary: bool) -> tuple[FloatArray, IntArray]:
    """(pred_error, incorrect) of a batch, as ``ScoreInput.error_view`` computes them: binary
    scores predict 1 when s ≥ 0.5; a top-label batch is (confidence, correct)."""
    if binary:
        return 1.0 - np.maximum(s, 1.0 - s), ((s >= 0.5) != (y != 0)).astype(np.int8)
    return 1.0 - s, (np.asarray(y) == 0).astype(np.int8)


# ---------------------------------------------------------------------------------------------
# passes 1 and 2: scan, rank search


@dataclass(frozen=True)
class RankSpec:
    """A scan or rank-search pass over the ``numeric`` columns (plus pred_error, the last
    column); ``scan`` also counts rows, missing values and distinct values."""

    numeric: tuple[str, ...]
    binary: bool
    ranges: Ranges
    scan: bool = False
    threaded = True                 # fold() runs this pass on two threads

    def new(self) -> VarRankState:
        return VarRankState(self)


@dataclass
class VarRankState:
    spec: RankSpec
    cols: ColumnScan = field(init=False)

    def __post_init__(self) -> None:
        self.cols = ColumnScan(self.spec.ranges, self.spec.scan)

    def update(self, scores: FloatArray, labels: Any, start: int = 0,
               values: FloatArray | None = None, *_: Any) -> VarRankState:
        self.cols.add_scores(scores.shape[0],
                             lambda: error_view(scores, labels, self.spec.binary)[0])
        assert values is not None
        for j in range(len(self.spec.numeric)):
            self.cols.add(j, values[:, j])
        return self

    def merge(self, other: VarRankState) -> VarRankState:
        self.cols.merge(other.cols)
        return self


# ---------------------------------------------------------------------------------------------
# pass 3: bins


class SortedLookup:
    """``numpy.searchsorted(edges, v, side="left")`` for unsorted v, ~5x faster on 4,096 edges:
    a table over equal-width slots of [edges[0], edges[-1]] gives each row a candidate, one
    comparison on each side confirms it, and only the rows it misses (slots holding several
    edges, or values off the table) take the binary search.  The result is exact."""

    def __init__(self, edges: FloatArray) -> None:
        self.edges = edges
        m = edges.shape[0]
        self.slots = 8 * m
        lo, hi = (float(edges[0]), float(edges[-1])) if m else (0.0, 0.0)
        width = (hi - lo) / self.slots if self.slots else 0.0
        self.ok = m >= 8 and np.isfinite(width) and width > 0
        if self.ok:
            self.lo, self.scale = lo, 1.0 / width
            starts = lo + np.arange(self.slots) * width
            self.table = np.searchsorted(edges, starts, side="left")
            self.padded = np.r_[-np.inf, edges, np.inf]      # padded[c] = edges[c − 1]

    def __call__(self, v: FloatArray) -> IntArray:
        if not self.ok:
            return np.searchsorted(self.edges, v, side="left")
        slot = np.clip((v - self.lo) * self.scale, 0, self.slots - 1).astype(np.intp)
        c = self.table[slot]
        c += v > self.padded[c + 1]                          # one edge inside the slot
        miss = ~((self.padded[c] < v) & (v <= self.padded[c + 1]))
        if miss.any():
            c[miss] = np.searchsorted(self.edges, v[miss], side="left")
        return np.asarray(c, dtype=np.int64)


@dataclass(frozen=True)
class BinSpec:
    """The final pass: qcut edges per column (variables, then pred_error) and the upper value of
    each LOESS group per variable."""

    numeric: tuple[str, ...]
    binary: bool
    edges: tuple[FloatArray, ...]
    groups: tuple[FloatArray, ...]
    correct_from: str | None = None        # incorrect = 1[this column ≠ label]
    threaded = True                 # fold() runs this pass on two threads

    def new(self) -> VarBinState:
        return VarBinState(self)


@dataclass
class VarBinState:
    spec: BinSpec
    qcount: list[IntArray] = field(init=False)
    qwrong: list[IntArray] = field(init=False)
    qerr: list[CompensatedSum] = field(init=False)
    gcount: list[IntArray] = field(init=False)
    gwrong: list[IntArray] = field(init=False)
    gsums: list[CompensatedSum] = field(init=False)     # rows: Σ v, Σ pe, Σ pe²

    def __post_init__(self) -> None:
        nb = [max(e.shape[0] - 1, 1) for e in self.spec.edges]
        self._qlookup = [SortedLookup(e[1:-1]) for e in self.spec.edges]
        self._glookup = [SortedLookup(g) for g in self.spec.groups]
        ng = [g.shape[0] for g in self.spec.groups]
        self.qcount = [np.zeros(b, dtype=np.int64) for b in nb]
        self.qwrong = [np.zeros(b, dtype=np.int64) for b in nb]
        self.qerr = [CompensatedSum.zeros(b) for b in nb]
        self.gcount = [np.zeros(g, dtype=np.int64) for g in ng]
        self.gwrong = [np.zeros(g, dtype=np.int64) for g in ng]
        self.gsums = [CompensatedSum.zeros(3 * g) for g in ng]

    def _qcut(self, j: int, v: FloatArray, pe: FloatArray, wrong: np.ndarray) -> None:
        b = self.qcount[j].shape[0]
        ids = self._qlookup[j](v) if b > 1 else np.zeros(v.shape[0], np.intp)
        both = np.bincount(2 * ids + wrong, minlength=2 * b)     # (right, wrong) per bin
        self.qcount[j] += both[0::2] + both[1::2]
        self.qwrong[j] += both[1::2]
        self.qerr[j].add(np.bincount(ids, weights=pe, minlength=b))

    def update(self, scores: FloatArray, labels: Any, start: int = 0,
               values: FloatArray | None = None,
               incorrect: np.ndarray | None = None) -> VarBinState:
        k = len(self.spec.numeric)
        pe, inc = error_view(scores, labels, self.spec.binary)
        wrong = (inc if incorrect is None else incorrect).astype(bool)
        self._qcut(k, pe, pe, wrong)
        assert values is not None
        for j in range(k):
            v = values[:, j]
            ok = ~np.isnan(v)
            vj, pj, wj = (v, pe, wrong) if ok.all() else (v[ok], pe[ok], wrong[ok])
            self._qcut(j, vj, pj, wj)
            g = self.spec.groups[j]
            m = g.shape[0]
            gid = self._glookup[j](vj)
            both = np.bincount(2 * gid + wj, minlength=2 * m)
            self.gcount[j] += both[0::2] + both[1::2]
            self.gwrong[j] += both[1::2]
            self.gsums[j].add(np.concatenate([np.bincount(gid, weights=w, minlength=m)
                                              for w in (vj, pj, pj * pj)]).astype(np.float64))
        return self

    def merge(self, other: VarBinState) -> VarBinState:
        for mine, theirs in ((self.qcount, other.qcount), (self.qwrong, other.qwrong),
                             (self.gcount, other.gcount), (self.gwrong, other.gwrong)):
            for a, b in zip(mine, theirs):
                a += b
        for cs, co in ((self.qerr, other.qerr), (self.gsums, other.gsums)):
            for acc, part in zip(cs, co):
                acc.merge(part)
        return self

    def table(self, j: int) -> QcutTable:
        return qcut_table(self.spec.edges[j], self.qcount[j], self.qerr[j].value,
                          self.qwrong[j].astype(np.float64))

    def aggregate(self, j: int, distinct: bool) -> _Aggregated:
        """Variable j's rows by distinct value (``distinct``) or by group, as the in-memory
        LOESS aggregates them; empty groups are left out."""
        c = self.gcount[j]
        keep = c > 0
        m = c.shape[0]
        sums = self.gsums[j].value
        sv, spe, spe2 = sums[:m][keep], sums[m:2 * m][keep], sums[2 * m:][keep]
        cf = c[keep].astype(np.float64)
        wrong = self.gwrong[j][keep].astype(np.float64)
        x = self.spec.groups[j][keep] if distinct else sv / cf
        return _Aggregated(x=x, c=cf, sy=np.column_stack([wrong, spe]),
                           syy=np.column_stack([wrong, spe2]), xs=RankedRows(x, cf),
                           grouped=not distinct)


# ---------------------------------------------------------------------------------------------
# the driver


def _qcut_percents(bins: int) -> FloatArray:
    return np.linspace(0.0, 1.0, bins + 1) * 100.0      # as vece.qcut_edges


def _group_ranks(n: int) -> list[int]:
    """The last rank of each of the in-memory engine's equal-count LOESS groups."""
    starts = np.unique((np.arange(MAX_GROUPS) * n) // MAX_GROUPS)
    return [int(r) for r in np.r_[starts[1:], n] - 1]


def variable_results(source: Any, names: list[str], *, binary: bool, bins: int = 10,
                     span: float = 0.75, correct_from: str | None = None,
                     ) -> tuple[dict[str, VariableResult], QcutTable]:
    """VECE and VCE(v*) of every variable in ``names`` and the qcut ECE over pred_error, from
    passes over ``source`` (a :class:`~calcheck.streaming.engine.StreamSource`).
    ``correct_from``: incorrect = 1[that column ≠ label] (the
    ``--correct-from`` option) instead of the top-label prediction's."""
    from calcheck.errors import InputError

    numeric = tuple(names)
    k = len(numeric)
    scan = source.run(RankSpec(numeric, binary, ((FULL,),) * (k + 1), scan=True))[0].cols
    n = [int(r) for r in scan.rows]
    if n[k] == 0:
        from calcheck.streaming.engine import no_rows_error

        raise no_rows_error(source.path, source.where)
    for j in range(k):
        if n[j] == 0:
            raise InputError(f"--var {numeric[j]}: every value is missing")
    distinct = [d is not None for d in scan.distinct]
    q = _qcut_percents(bins)
    wanted = {}
    for j in range(k + 1):
        ranks = percentile_ranks(n[j], q)
        if j < k:
            ranks += percentile_ranks(n[j], [5.0, 95.0])
            if not distinct[j]:
                ranks += _group_ranks(n[j])
        wanted[j] = ranks
    searches = search_ranks(source, scan, wanted,
                            lambda ranges: RankSpec(numeric, binary, ranges))
    edges = tuple(np.unique(searches[j].percentiles(q)) for j in range(k + 1))
    groups = []
    for j in range(k):
        if distinct[j]:
            d = scan.distinct[j]
            assert d is not None
            groups.append(d[0])
        else:
            groups.append(np.unique(searches[j].values(_group_ranks(n[j]))))
    final, _ = source.run(BinSpec(numeric, binary, edges, tuple(groups), correct_from))
    out = {}
    for j, name in enumerate(numeric):
        lo, hi = searches[j].percentiles(np.array([5.0, 95.0]))
        agg = final.aggregate(j, distinct[j])
        note = None if distinct[j] else (
            f"values grouped by value into {agg.x.shape[0]} groups cut at the in-memory "
            f"engine's {MAX_GROUPS} equal-count ranks; bandwidths from the group means")
        out[name] = variable_result(name, final.table(j), float(lo), float(hi), agg, span=span,
                                    bins=bins, excluded_missing=int(scan.missing[j]),
                                    settings={"loess_approximation": note} if note else None)
    return out, final.table(k)
