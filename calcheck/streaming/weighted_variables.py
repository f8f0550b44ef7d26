"""Variable-based calibration (VECE, ``ece_qcut``, VCE(v*)) of sampling-weighted rows
(``--weight``) from passes over the rows, for inputs larger than the streaming engines hold
(the engine: :mod:`calcheck.engines.weighted`; the in-memory definitions:
:mod:`calcheck.metrics.vece`, docs/weights.md).

The unweighted passes (:mod:`calcheck.streaming.variables`) search ranks; here every
percentile is numpy's weighted ``inverted_cdf`` one — the smallest value whose cumulative
weight share reaches q — so the search runs on masses (:class:`CdfSearch`, the weighted
passes' mass search with that rule).  Rows of weight 0 and rows without a value take no part
(they count in ``n`` and in the rows excluded, as in memory):

1. **scan**: per variable its rows and missing values, per column (the variables, then
   pred_error) Σw and Σw² of the rows that take part, their weighted histogram over the top
   16 bits of the values' order keys (the search's first step) and, while there are at most
   ``MAX_GROUPS`` of them, its distinct values with their mass; each variable's largest value;
2. **mass search** (none for a column whose distinct values the scan kept: its percentiles
   are the in-memory function of them): the values at the qcut shares i/bins (variables and
   pred_error), at 5 % and 95 % (the LOESS grid's ends) and, for a variable with more than
   ``MAX_GROUPS`` distinct values, at the shares j/``MAX_GROUPS`` (the LOESS groups' upper
   values);
3. **bins**: per qcut bin its rows, Σw, Σw·pred_error, Σw·incorrect; per LOESS value (or
   group) Σw, Σw·v, Σw·incorrect, Σw·pred_error, Σw·pred_error², Σw².

So the qcut edges, bins, VECE and ``ece_qcut`` are the in-memory ones (sums to ~1e-15;
edges exactly, whole-number weights included, whose cumulative shares are exact).  LOESS
is the in-memory one for a variable with at most ``MAX_GROUPS`` distinct values.  With
more, the in-memory engine shares ``MAX_GROUPS`` equal-mass groups pro rata at their cuts and
reads its bandwidths from every distinct value; here a group holds the rows whose value lies
between two cut values (a row tied with a cut in the lower group), sits at its weighted mean
and gives the bandwidths — an approximation recorded in the result's settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray, Passes
from calcheck.metrics.vece import (
    MAX_GROUPS,
    MassRows,
    QcutTable,
    VariableResult,
    _Aggregated,
    mass_percentiles,
    qcut_table,
    variable_result,
)
from calcheck.streaming.ranks import (
    FULL,
    Distinct,
    Range,
    distinct_add,
    distinct_merge,
    key_value,
    order_keys,
)
from calcheck.streaming.runner import one_pass
from calcheck.streaming.states import CompensatedSum
from calcheck.streaming.variables import SortedLookup, error_view
from calcheck.streaming.weighted import MassPassSpec, MassSearch, _Cut
from calcheck.tuning import DEFAULT, Tuning

LOESS_ENDS = np.array([5.0, 95.0])           # the LOESS grid's ends, percent
GROUP_SUMS = 6             # per LOESS value or group: Σw, Σw·v, Σw·inc, Σw·pe, Σw·pe², Σw²


def _used(v: FloatArray, w: FloatArray) -> np.ndarray:
    """The rows that take part: a value (not NaN) and a positive weight."""
    return ~np.isnan(v) & (w > 0)


# ---------------------------------------------------------------------------------------------
# passes 1 and 2: scan, mass search


@dataclass(frozen=True)
class MassScanSpec:
    """A scan (``scan``) or mass-search pass over the ``numeric`` columns and pred_error (the
    last column): each column's key ranges (none: not searched in this pass)."""

    numeric: tuple[str, ...]
    binary: bool
    ranges: tuple[tuple[Range, ...], ...]
    scan: bool = False
    threaded = True

    def new(self) -> MassScanState:
        return MassScanState(self)


class MassScanState:
    def __init__(self, spec: MassScanSpec) -> None:
        self.spec = spec
        k = len(spec.numeric)
        self.columns = [MassPassSpec(r).new() if r else None for r in spec.ranges]
        self.rows = np.zeros(k, dtype=np.int64)        # rows with a value (any weight)
        self.missing = np.zeros(k, dtype=np.int64)
        self.mass = CompensatedSum.zeros(2 * (k + 1))  # per column Σw, Σw² of the used rows
        self.top = np.full(k, -np.inf)                 # each variable's largest used value
        self.distinct: list[Distinct] = [(np.zeros(0), np.zeros(0)) for _ in range(k + 1)]

    def update(self, s: FloatArray, y: IntArray, start: int, *rest: Any) -> MassScanState:
        values, w = rest[0], np.asarray(rest[-1], dtype=np.float64)    # (--var, weights)
        k = len(self.spec.numeric)
        sums = np.zeros(2 * (k + 1))
        for j in range(k + 1):
            col = self.columns[j]
            if col is None and not self.spec.scan:      # (not searched in this pass)
                continue
            v = values[:, j] if j < k else error_view(s, y, self.spec.binary)[0]
            used = _used(v, w)
            vu, wu = v[used], w[used]
            if self.spec.scan:
                sums[2 * j:2 * j + 2] = wu.sum(), np.dot(wu, wu)
                self.distinct[j] = distinct_add(self.distinct[j], vu, wu)
                if j < k:
                    nan = int(np.isnan(v).sum())
                    self.missing[j] += nan
                    self.rows[j] += v.shape[0] - nan
                    if vu.shape[0]:
                        self.top[j] = max(self.top[j], float(vu.max()))
            if col is not None:
                col.add(order_keys(vu), wu)
        if self.spec.scan:
            self.mass.add(sums)
        return self

    def merge(self, other: MassScanState) -> MassScanState:
        for mine, theirs in zip(self.columns, other.columns):
            if mine is not None and theirs is not None:
                mine.merge(theirs)
        self.rows += other.rows
        self.missing += other.missing
        self.mass.merge(other.mass)
        self.top = np.maximum(self.top, other.top)
        self.distinct = [None if d is None else distinct_merge(mine, *d)
                         for mine, d in zip(self.distinct, other.distinct)]
        return self


class CdfSearch(MassSearch):
    """The values at cumulative weight shares ``shares`` (fractions in [0, 1]) of one column:
    numpy's weighted ``inverted_cdf`` percentiles — the smallest value whose share
    (Σw up to it) / Σw reaches q, compared as :func:`calcheck.metrics.vece.mass_percentiles`
    compares them; ``total`` is the column's Σw."""

    def __init__(self, shares: FloatArray, total: float, tuning: Tuning = DEFAULT) -> None:
        super().__init__([float(q) for q in shares], tuning)
        self.total = total

    def choose(self, cum: FloatArray, mass: FloatArray, cut: _Cut) -> int:
        if cut.mass <= 0:                           # the smallest value of positive mass
            return int(np.flatnonzero(mass > 0)[0])
        j = int(np.searchsorted((cut.base + cum) / self.total, cut.mass, side="left"))
        return j if j < cum.shape[0] else int(np.flatnonzero(mass > 0)[-1])

    def values(self, shares: FloatArray) -> FloatArray:
        """The values found at ``shares`` (every one searched, the search done)."""
        found = {c.mass: c.key for c in self.cuts}
        keys = [found[float(q)] for q in shares]
        return np.array([key_value(key) for key in keys if key is not None])


def _shares(percents: FloatArray) -> FloatArray:
    """The shares ``mass_percentiles`` compares the cumulative shares with."""
    return np.true_divide(np.asarray(percents, dtype=np.float64), 100)


# ---------------------------------------------------------------------------------------------
# pass 3: bins


@dataclass(frozen=True)
class MassBinsSpec:
    """The final pass: the qcut edges per column (the variables, then pred_error) and the
    upper value of each LOESS value or group per variable."""

    numeric: tuple[str, ...]
    binary: bool
    edges: tuple[FloatArray, ...]
    groups: tuple[FloatArray, ...]
    correct_from: str | None = None        # incorrect = 1[this column ≠ label]
    threaded = True

    def new(self) -> MassBinsState:
        return MassBinsState(self)


class MassBinsState:
    def __init__(self, spec: MassBinsSpec) -> None:
        self.spec = spec
        nb = [max(e.shape[0] - 1, 1) for e in spec.edges]
        self._qlookup = [SortedLookup(e[1:-1]) for e in spec.edges]
        self._glookup = [SortedLookup(g) for g in spec.groups]
        self.qrows = [np.zeros(b, dtype=np.int64) for b in nb]
        self.qsums = [CompensatedSum.zeros(3 * b) for b in nb]     # Σw, Σw·pe, Σw·inc
        self.gsums = [CompensatedSum.zeros(GROUP_SUMS * g.shape[0]) for g in spec.groups]

    def update(self, s: FloatArray, y: IntArray, start: int, *rest: Any) -> MassBinsState:
        values, w = rest[0], np.asarray(rest[-1], dtype=np.float64)    # (--var, weights)
        pe, inc = error_view(s, y, self.spec.binary)
        incf = (rest[1] if self.spec.correct_from else inc).astype(np.float64)
        k = len(self.spec.numeric)
        for j in range(k + 1):
            v = values[:, j] if j < k else pe
            used = _used(v, w)
            vu, wu, pu, iu = v[used], w[used], pe[used], incf[used]
            b = self.qrows[j].shape[0]
            ids = self._qlookup[j](vu) if b > 1 else np.zeros(vu.shape[0], np.intp)
            self.qrows[j] += np.bincount(ids, minlength=b)
            self.qsums[j].add(np.concatenate([np.bincount(ids, weights=x, minlength=b)
                                              for x in (wu, wu * pu, wu * iu)]))
            if j < k:
                m = self.spec.groups[j].shape[0]
                gid = self._glookup[j](vu)
                wp = wu * pu
                self.gsums[j].add(np.concatenate([np.bincount(gid, weights=x, minlength=m)
                                                  for x in (wu, wu * vu, wu * iu, wp, wp * pu,
                                                            wu * wu)]))
        return self

    def merge(self, other: MassBinsState) -> MassBinsState:
        for a, b in zip(self.qrows, other.qrows):
            a += b
        for cs, co in ((self.qsums, other.qsums), (self.gsums, other.gsums)):
            for acc, part in zip(cs, co):
                acc.merge(part)
        return self

    def table(self, j: int) -> QcutTable:
        b = self.qrows[j].shape[0]
        m, se, si = np.split(self.qsums[j].value, 3)
        assert m.shape[0] == b
        return qcut_table(self.spec.edges[j], self.qrows[j], se, si, mass=m)

    def aggregate(self, j: int, distinct: bool, kish: float) -> _Aggregated:
        """Variable j's rows by distinct value (``distinct``) or by group, as the in-memory
        LOESS aggregates them (groups at their weighted mean; empty ones left out)."""
        c, sv, si, spe, spe2, c2 = np.split(self.gsums[j].value, GROUP_SUMS)
        keep = c > 0
        c, sv, si, spe, spe2, c2 = (a[keep] for a in (c, sv, si, spe, spe2, c2))
        x = self.spec.groups[j][keep] if distinct else sv / c
        return _Aggregated(x=x, c=c, sy=np.column_stack([si, spe]),
                           syy=np.column_stack([si, spe2]), xs=MassRows(x, c, False),
                           grouped=not distinct, c2=c2, kish=kish)


# ---------------------------------------------------------------------------------------------
# the driver


def weighted_variable_results(numeric: tuple[str, ...], *, binary: bool, bins: int = 10,
                              span: float = 0.75, correct_from: str | None = None,
                              tuning: Tuning = DEFAULT
                              ) -> Passes[tuple[dict[str, VariableResult], QcutTable]]:
    """VECE and VCE(v*) of every variable of ``numeric`` and the qcut ECE over pred_error of
    sampling-weighted rows, as a program of passes (module docstring); ``correct_from``:
    incorrect = 1[that column ≠ label] (``--correct-from``) instead of the top-label
    prediction's."""
    from calcheck.errors import InputError

    k = len(numeric)
    scan: MassScanState = yield from one_pass(MassScanSpec(numeric, binary, ((FULL,),) * (k + 1),
                                                   scan=True))
    mass = scan.mass.value
    total, total_sq = mass[0::2], mass[1::2]
    for j, name in enumerate(numeric):
        if scan.rows[j] == 0:
            raise InputError(f"--var {name}: every value is missing")
        if total[j] <= 0:
            raise InputError(f"--var {name}: no row with a value has a positive weight")
    qcut = np.linspace(0.0, 1.0, bins + 1) * 100.0          # as vece.qcut_edges
    groups = np.linspace(0.0, 100.0, MAX_GROUPS + 1)[1:]
    wanted = [np.r_[qcut, LOESS_ENDS, [] if scan.distinct[j] is not None else groups]
              for j in range(k)] + [qcut]
    searches: dict[int, CdfSearch] = {}
    for j in range(k + 1):
        if scan.distinct[j] is None:
            searches[j] = CdfSearch(_shares(wanted[j]), float(total[j]), tuning)
            searches[j].first(*scan.columns[j].histogram(0))  # type: ignore[union-attr]
    while not all(s.done for s in searches.values()):
        state: MassScanState = yield from one_pass(MassScanSpec(numeric, binary, tuple(
            searches[j].ranges() if j in searches and not searches[j].done else ()
            for j in range(k + 1))))
        for j, s in searches.items():
            col = state.columns[j]
            if col is not None:
                s.absorb(col)

    def at(j: int, percents: FloatArray) -> FloatArray:
        d = scan.distinct[j]
        if d is not None:
            return mass_percentiles(d[0], d[1], percents, False)
        return searches[j].values(_shares(percents))

    edges = tuple(np.unique(at(j, qcut)) for j in range(k + 1))
    uppers = []
    for j in range(k):
        d = scan.distinct[j]
        g = d[0] if d is not None else np.unique(at(j, groups))
        uppers.append(np.r_[g[:-1], max(float(g[-1]), float(scan.top[j]))])
    final: MassBinsState = yield from one_pass(MassBinsSpec(numeric, binary, edges,
                                                            tuple(uppers), correct_from))
    out = {}
    for j, name in enumerate(numeric):
        lo, hi = at(j, LOESS_ENDS)
        kish = float(total[j]) ** 2 / float(total_sq[j])
        grouped = scan.distinct[j] is None
        agg = final.aggregate(j, not grouped, kish)
        settings: dict[str, Any] = {"weights": "weight", "weight": float(total[j]),
                                    "effective_n": kish}
        if grouped:
            settings["loess_approximation"] = (
                f"values grouped by value into {agg.x.shape[0]} groups cut at the weighted "
                f"shares j/{MAX_GROUPS}; bandwidths from the groups' weighted means")
        out[name] = variable_result(name, final.table(j), float(lo), float(hi), agg, span=span,
                                    bins=bins, excluded_missing=int(scan.missing[j]),
                                    settings=settings, n=int(scan.rows[j]))
    return out, final.table(k)

