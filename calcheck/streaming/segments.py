"""``calcheck audit`` on the streaming engines: the segment columns' levels and the cell table
from passes over the data, equal to the in-memory engine's — a scan and a rank search shared
with the variables' (:class:`~calcheck.streaming.ranks.ColumnScan`,
:func:`~calcheck.streaming.ranks.search_ranks`), then the cells pass (:class:`CellSpec`).
The specification: docs/streaming.md, "Segments".  What the stream does not have is the
segments' rows in score order: their ECCE and the multicalibration error are taken on the
score cells (``settings.ecce: "score cells"``), a lower bound of the row-level ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray
from calcheck.errors import InputError
from calcheck.io.columns import as_numeric, categories
from calcheck.segments import (
    ECE_BINS,
    CellTable,
    SegmentColumn,
    SegmentData,
    SegmentOptions,
    atom_keys,
    bucket_column,
    check_sizes,
    inner_edges,
    level_codes,
    percents,
    text_column,
    value_column,
)
from calcheck.streaming.ranks import FULL, ColumnScan, Ranges, percentile_ranks, search_ranks


@dataclass(frozen=True)
class ScanSpec:
    """A scan (``scan``) or rank-search pass over the ``raw`` segment columns and the scores
    (the last of ``ranges``)."""

    raw: tuple[str, ...]
    ranges: Ranges
    scan: bool = False
    max_levels: int = 1000
    threaded = True

    def new(self) -> ScanState:
        return ScanState(self)


@dataclass
class ScanState:
    spec: ScanSpec
    cols: ColumnScan = field(init=False)
    numeric: list[bool | None] = field(init=False)
    texts: list[set[Any] | None] = field(init=False)

    def __post_init__(self) -> None:
        self.cols = ColumnScan(self.spec.ranges, self.spec.scan)
        self.numeric = [None] * len(self.spec.raw)
        self.texts = [set() for _ in self.spec.raw]

    def update(self, scores: FloatArray, labels: Any, start: int = 0,
               raw: list[np.ndarray] | None = None) -> ScanState:
        self.cols.add_scores(scores.shape[0], lambda: scores)
        for j, values in enumerate(raw or []):
            num = as_numeric(values)
            if self.spec.scan and self.numeric[j] is None:
                self.numeric[j] = num is not None
            if num is not None:
                self.cols.add(j, num)
            elif self.spec.scan:
                cats, idx = categories(values)
                self.cols.missing[j] += int((idx < 0).sum())
                known = self.texts[j]
                if known is not None:
                    known.update(cats)
                    if len(known) > self.spec.max_levels:
                        self.texts[j] = None
        return self

    def merge(self, other: ScanState) -> ScanState:
        self.cols.merge(other.cols)
        for j in range(len(self.spec.raw)):
            if self.numeric[j] is None:
                self.numeric[j] = other.numeric[j]
            mine, theirs = self.texts[j], other.texts[j]
            self.texts[j] = None if mine is None or theirs is None else mine | theirs
            if self.texts[j] is not None and len(self.texts[j] or ()) > self.spec.max_levels:
                self.texts[j] = None
        return self


@dataclass(frozen=True)
class CellSpec:
    """The pass that codes every row into its atom and fills the cell table."""

    raw: tuple[str, ...]
    columns: tuple[SegmentColumn, ...]
    edges: tuple[float, ...]
    threaded = True

    def new(self) -> CellState:
        return CellState(self)


@dataclass
class CellState:
    spec: CellSpec
    table: CellTable = field(init=False)

    def __post_init__(self) -> None:
        self.table = CellTable(np.asarray(self.spec.edges, dtype=np.float64), ECE_BINS)

    def update(self, scores: FloatArray, labels: Any, start: int = 0,
               raw: list[np.ndarray] | None = None) -> CellState:
        codes = []
        for col, values in zip(self.spec.columns, raw or []):
            num = as_numeric(values)
            codes.append(level_codes(col, numeric=num, categories=None if num is not None
                                     else categories(values)))
        keys = atom_keys(codes, [len(c.levels) for c in self.spec.columns])
        self.table.update(scores, labels, keys)
        return self

    def merge(self, other: CellState) -> CellState:
        self.table.merge(other.table)
        return self


def segment_data(source: Any, names: list[str], opts: SegmentOptions) -> SegmentData:
    """The cut columns and the filled cell table from passes over ``source`` (a
    :class:`~calcheck.streaming.engine.StreamSource`)."""
    raw = tuple(names)
    k = len(raw)
    label = opts.label
    first, _ = source.run(ScanSpec(raw, ((FULL,),) * (k + 1), scan=True,
                                   max_levels=opts.max_levels))
    scan = first.cols
    n = int(scan.rows[k])
    if n == 0:
        from calcheck.streaming.engine import no_rows_error

        raise no_rows_error(source.path, source.where)
    plans: dict[int, FloatArray] = {}                  # column → percents
    for j in range(k):
        d = scan.distinct[j]
        if first.numeric[j] and (d is None or d[0].size > opts.buckets):
            plans[j] = percents(opts.buckets)
    plans[k] = percents(opts.score_cells)
    searches = search_ranks(
        source, scan, {j: sorted({0, int(scan.rows[j]) - 1,
                                  *percentile_ranks(int(scan.rows[j]), pct)})
                       for j, pct in plans.items()},
        lambda ranges: ScanSpec(raw, ranges, max_levels=opts.max_levels))
    columns = []
    for j, name in enumerate(raw):
        missing = bool(scan.missing[j])
        if j in searches:
            s = searches[j]
            lo, hi = s.value(0), s.value(s.n - 1)
            columns.append(bucket_column(name, lo, hi, inner_edges(s.percentiles(plans[j]), lo),
                                         missing))
        elif first.numeric[j]:
            d = scan.distinct[j]
            assert d is not None
            columns.append(value_column(name, d[0], missing, label))
        else:
            texts = first.texts[j]
            if texts is None:
                raise InputError(f"{label} {name}: more than --max-levels "
                                 f"{opts.max_levels:,} distinct values; bucket the column, "
                                 "choose a coarser one or raise the limit", column=name)
            columns.append(text_column(name, sorted(texts), missing,
                                       max_levels=opts.max_levels, label=label))
    check_sizes([len(c.levels) for c in columns])
    edges = inner_edges(searches[k].percentiles(plans[k]), searches[k].value(0))
    cells, _ = source.run(CellSpec(raw, tuple(columns), tuple(float(e) for e in edges)))
    return SegmentData(tuple(columns), cells.table)
