"""Segments for ``calcheck audit``: the columns' levels, their intersections, and the sums the
audit's statistics read (docs/audit.md).

A **segment column** is cut into levels: each value of a categorical column (text, booleans, a
numeric column with at most ``buckets`` distinct values) is a level; a numeric column with more
is cut into ``buckets`` quantile buckets (edges at numpy's linear percentiles k/buckets, a row
in bucket j when ``edge[j-1] <= v < edge[j]``, the last bucket closed); a missing value is a
level of its own.  Levels depend on the columns only, never on the labels, so the search below
is fixed before any label is looked at — what keeps the adjusted p-values honest.

An **atom** is one combination of levels of every column (the occupied ones only); a
**segment** is the set of rows sharing the levels of d of the columns (d = 0: every row), so it
is a union of atoms.  Every statistic of a segment is a sum over its atoms, and the
:class:`CellTable` keeps per (atom, score cell) the sums they need: rows, Σs, Σy and
Σs(1 − s), plus per (atom, equal-width bin) those of the segment's ECE.  The table is mergeable
(``update`` batch by batch, ``merge`` partial tables), so the memory and the stream engine fill
the same one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.errors import InputError, UsageError

MISSING = "missing"


@dataclass(frozen=True)
class SegmentOptions:
    """How the audit cuts its columns: a numeric column into ``buckets`` quantile buckets, a
    categorical one of at most ``max_levels`` levels, the scores into ``score_cells``
    equal-mass cells; ``label`` names the segment option in messages."""

    buckets: int = 4
    max_levels: int = 1000
    score_cells: int = 100
    label: str = "--segment"


@dataclass(frozen=True)
class Level:
    """One level of a column: its readable name and what it holds (``value``, or ``low`` /
    ``high`` with ``closed`` for a numeric bucket; ``missing``)."""

    name: str
    value: Any = None
    low: float | None = None
    high: float | None = None
    closed: bool = False          # the high end is included (the last bucket)
    missing: bool = False

    def to_dict(self) -> dict[str, Any]:
        if self.missing:
            return {"missing": True}
        if self.low is not None:
            return {"low": self.low, "high": self.high, "closed": self.closed}
        return {"value": self.value}


@dataclass(frozen=True)
class SegmentColumn:
    """A column cut into levels: ``kind`` is ``categorical`` or ``numeric`` (quantile buckets;
    ``edges`` their inner edges)."""

    name: str
    kind: str
    levels: tuple[Level, ...]
    edges: tuple[float, ...] = ()


def _short(values: FloatArray) -> list[str]:
    """The shortest ``%g`` texts (4 to 17 digits) that keep distinct values distinct."""
    for digits in (4, 6, 8, 10, 12, 17):
        texts = [f"{v:.{digits}g}" for v in values]
        if len(set(texts)) == len(set(values.tolist())):
            return texts
    return [repr(float(v)) for v in values]


def text_column(name: str, cats: list[Any], missing: bool, *, max_levels: int,
                label: str = "--segment") -> SegmentColumn:
    """A categorical column of text values ``cats`` (sorted), with a missing level."""
    if len(cats) > max_levels:
        raise UsageError(f"{label} {name}: {len(cats):,} distinct values, more than "
                         f"--max-levels {max_levels:,}; bucket the column, choose a coarser "
                         "one or raise the limit")
    return _column(name, "categorical", [Level(f"{name} = {c}", value=c) for c in cats], missing,
                   label)


def value_column(name: str, distinct: FloatArray, missing: bool,
                 label: str = "--segment") -> SegmentColumn:
    """A numeric column with few distinct values (sorted): one level each."""
    levels = [Level(f"{name} = {t}", value=int(v) if float(v).is_integer() else float(v))
              for t, v in zip(_short(distinct), distinct)]
    return _column(name, "categorical", levels, missing, label)


def bucket_column(name: str, lo: float, hi: float, inner: FloatArray,
                  missing: bool) -> SegmentColumn:
    """A numeric column cut at the inner edges ``inner`` (the values' range [lo, hi])."""
    bounds = np.concatenate(([lo], inner, [hi]))
    texts = _short(bounds)
    levels = []
    for j in range(inner.size + 1):
        last = j == inner.size
        levels.append(Level(f"{name} ∈ [{texts[j]}, {texts[j + 1]}{']' if last else ')'}",
                            low=float(bounds[j]), high=float(bounds[j + 1]), closed=last))
    col = _column(name, "numeric", levels, missing, "")
    return SegmentColumn(name, "numeric", col.levels, tuple(float(e) for e in inner))


def _column(name: str, kind: str, levels: list[Level], missing: bool,
            label: str) -> SegmentColumn:
    if missing:
        levels.append(Level(f"{name} {MISSING}", missing=True))
    if not levels:
        raise InputError(f"{label} {name}: the column has no rows", column=name)
    return SegmentColumn(name, kind, tuple(levels))


def _unseen(column: SegmentColumn) -> InputError:
    return InputError(f"--segment {column.name}: a value that the stream's first pass did not "
                      "see (the file changed between passes?)", column=column.name)


def level_codes(column: SegmentColumn, *, numeric: FloatArray | None = None,
                categories: tuple[list[Any], IntArray] | None = None) -> IntArray:
    """Each row's level in ``column``, the column given as :func:`code_column` takes it; a
    value the levels do not hold is an error."""
    has_missing = bool(column.levels) and column.levels[-1].missing
    real = column.levels[:len(column.levels) - int(has_missing)]
    if numeric is not None:
        miss = np.isnan(numeric)
        filled = np.where(miss, 0.0, numeric)
        if column.kind == "numeric":
            codes = np.searchsorted(np.asarray(column.edges), filled, side="right")
        else:
            keys = np.asarray([lv.value for lv in real], dtype=np.float64)
            if not keys.size:
                codes = np.zeros(filled.shape, dtype=np.int64)
            else:
                codes = np.minimum(np.searchsorted(keys, filled), keys.size - 1)
            if not (miss | ((keys[codes] == filled) if keys.size else miss)).all():
                raise _unseen(column)
    else:
        assert categories is not None
        cats, idx = categories
        lookup = {lv.value: i for i, lv in enumerate(real)}
        if any(c not in lookup for c in cats):
            raise _unseen(column)
        remap = np.asarray([lookup[c] for c in cats] or [0], dtype=np.int64)
        miss = idx < 0
        codes = remap[np.maximum(idx, 0)]
    if miss.any() and not has_missing:
        raise _unseen(column)
    return np.where(miss, len(real), codes).astype(np.int64)


def code_column(name: str, *, numeric: FloatArray | None = None,
                categories: tuple[list[Any], IntArray] | None = None, buckets: int,
                max_levels: int, label: str = "--segment",
                counts: FloatArray | None = None) -> tuple[SegmentColumn, IntArray]:
    """The levels of one column and each row's level index (missing values: the last level):
    ``numeric`` (float64, NaN for missing) or ``categories`` (the distinct values as text,
    sorted, and each row's index, −1 for missing — :func:`calcheck.io.columns.categories`);
    ``counts``: each row stands for that many (positive, whole) — the expanded rows' buckets."""
    if numeric is not None:
        missing = np.isnan(numeric)
        present = numeric[~missing]
        distinct = np.unique(present)
        if distinct.size > buckets:
            lo = float(present.min())
            column = bucket_column(name, lo, float(present.max()), inner_edges(
                percentiles(present, percents(buckets),
                            None if counts is None else counts[~missing]), lo),
                bool(missing.any()))
        else:
            column = value_column(name, distinct, bool(missing.any()), label)
    else:
        assert categories is not None
        column = text_column(name, categories[0], bool((categories[1] < 0).any()),
                             max_levels=max_levels, label=label)
    return column, level_codes(column, numeric=numeric, categories=categories)


# ---------------------------------------------------------------------------------------------
# atoms and segments


def atom_keys(codes: list[IntArray], sizes: list[int]) -> IntArray:
    """One int64 key per row for its combination of levels (mixed radix over the columns)."""
    key = np.zeros(codes[0].shape[0] if codes else 0, dtype=np.int64)
    for c, size in zip(codes, sizes):
        key = key * size + c
    return key


def key_levels(keys: IntArray, sizes: list[int]) -> IntArray:
    """The level of every column of each atom key (rows: keys, columns: columns)."""
    out = np.empty((keys.shape[0], len(sizes)), dtype=np.int64)
    rest = keys.copy()
    for j in range(len(sizes) - 1, -1, -1):
        out[:, j] = rest % sizes[j]
        rest //= sizes[j]
    return out


def check_sizes(sizes: list[int]) -> None:
    if float(np.prod(np.asarray(sizes, dtype=np.float64))) >= 2.0 ** 62:
        raise UsageError("--segment: the columns' levels combine into more than 2^62 cells; "
                         "use fewer or coarser columns")


@dataclass(frozen=True)
class Segment:
    """The rows whose ``columns`` (indices) take ``levels``: the atoms ``atoms`` (indices into
    the space's atoms), ``n`` rows."""

    columns: tuple[int, ...]
    levels: tuple[int, ...]
    atoms: IntArray = field(repr=False)
    n: int

    @property
    def depth(self) -> int:
        return len(self.columns)


@dataclass(frozen=True)
class SegmentSpace:
    """The segments an audit searches, and what it left out (``small``: under ``min_size``
    rows; ``duplicates``: the same rows as a shallower segment; ``unsearched``: beyond
    ``max_segments``)."""

    columns: tuple[SegmentColumn, ...]
    atom_levels: IntArray            # atom × column
    atom_rows: IntArray
    segments: tuple[Segment, ...]
    formed: int
    small: int
    duplicates: int
    unsearched: int

    def name(self, seg: Segment) -> str:
        if not seg.columns:
            return "all rows"
        return " & ".join(self.columns[c].levels[lv].name
                          for c, lv in zip(seg.columns, seg.levels))

    def describe(self, seg: Segment) -> dict[str, Any]:
        return {self.columns[c].name: self.columns[c].levels[lv].to_dict()
                for c, lv in zip(seg.columns, seg.levels)}

    def membership(self) -> Any:
        """The segments × atoms 0/1 matrix (scipy sparse, CSR)."""
        from scipy import sparse

        rows = np.concatenate([np.full(s.atoms.size, i, dtype=np.int64)
                               for i, s in enumerate(self.segments)])
        cols = np.concatenate([s.atoms for s in self.segments])
        return sparse.csr_matrix((np.ones(rows.size), (rows, cols)),
                                 shape=(len(self.segments), self.atom_rows.size))


def search_space(columns: tuple[SegmentColumn, ...], atom_levels: IntArray, atom_rows: IntArray,
                 *, depth: int, min_size: int, max_segments: int) -> SegmentSpace:
    """Every segment up to ``depth`` columns deep, in the order searched: by depth, then the
    larger first (then by columns and levels).  "All rows" is always searched; a segment under
    ``min_size`` rows, or holding the same rows as a shallower one, is left out and counted; so
    are those beyond ``max_segments``.  Nothing here looks at a label."""
    found: list[Segment] = []
    formed = small = duplicates = 0
    seen: set[bytes] = set()
    for d in range(0, min(depth, len(columns)) + 1):
        level_segments: list[Segment] = []
        for combo in itertools.combinations(range(len(columns)), d):
            if d == 0:
                groups, inverse = np.zeros((1, 0), dtype=np.int64), \
                    np.zeros(atom_rows.size, dtype=np.int64)
            else:
                groups, inverse = np.unique(atom_levels[:, combo], axis=0, return_inverse=True)
                inverse = inverse.reshape(-1)
            rows = np.bincount(inverse, weights=atom_rows, minlength=groups.shape[0])
            order = np.argsort(inverse, kind="stable")
            starts = np.searchsorted(inverse[order], np.arange(groups.shape[0] + 1))
            for g in range(groups.shape[0]):
                formed += 1
                n = int(rows[g])
                if d and n < min_size:
                    small += 1
                    continue
                atoms = order[starts[g]:starts[g + 1]]
                key = atoms.tobytes()
                if key in seen:
                    duplicates += 1
                    continue
                seen.add(key)
                level_segments.append(Segment(combo, tuple(int(v) for v in groups[g]), atoms, n))
        level_segments.sort(key=lambda s: -s.n)          # (stable: columns, levels)
        found += level_segments
    return SegmentSpace(columns, atom_levels, atom_rows, tuple(found[:max_segments]), formed,
                        small, duplicates, max(0, len(found) - max_segments))


# ---------------------------------------------------------------------------------------------
# the sums


@dataclass
class CellTable:
    """Per (atom key, score cell): rows, Σs, Σy, Σs(1 − s); per (atom key, equal-width bin):
    rows, Σs, Σy.  ``edges``: the inner edges of the score cells (a score s is in cell
    ``searchsorted(edges, s, "right")``); ``bins``: the equal-width bins of the segments'
    ECE.  Atom keys are :func:`atom_keys`; :meth:`compact` maps them to atom indices."""

    edges: FloatArray
    bins: int
    keys: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    cells: dict[str, FloatArray] = field(default_factory=dict)
    ece: dict[str, FloatArray] = field(default_factory=dict)

    @property
    def score_cells(self) -> int:
        return int(self.edges.size) + 1

    def update(self, scores: FloatArray, labels: Any, keys: IntArray,
               counts: FloatArray | None = None) -> CellTable:
        """Add a batch: scores, 0/1 labels and each row's atom key (``counts``: each row
        stands for that many: the expanded rows' sums)."""
        uniq, atom = np.unique(keys, return_inverse=True)
        atom = atom.reshape(-1)
        g, b = self.score_cells, self.bins
        cell = atom * g + np.searchsorted(self.edges, scores, side="right")
        ebin = atom * b + np.minimum((scores * b).astype(np.int64), b - 1)
        y = np.asarray(labels, dtype=np.float64)
        a = uniq.size
        ks, ky = (scores, y) if counts is None else (counts * scores, counts * y)
        part = {"rows": np.bincount(cell, weights=counts, minlength=a * g).astype(np.float64),
                "s": np.bincount(cell, weights=ks, minlength=a * g),
                "y": np.bincount(cell, weights=ky, minlength=a * g),
                "v": np.bincount(cell, weights=ks * (1.0 - scores), minlength=a * g)}
        epart = {"rows": np.bincount(ebin, weights=counts, minlength=a * b).astype(np.float64),
                 "s": np.bincount(ebin, weights=ks, minlength=a * b),
                 "y": np.bincount(ebin, weights=ky, minlength=a * b)}
        other = CellTable(self.edges, self.bins, uniq,
                          {k: np.asarray(v, dtype=np.float64).reshape(a, g)
                           for k, v in part.items()},
                          {k: np.asarray(v, dtype=np.float64).reshape(a, b)
                           for k, v in epart.items()})
        return self.merge(other)

    def merge(self, other: CellTable) -> CellTable:
        if not other.keys.size:
            return self
        if not self.keys.size:
            self.keys, self.cells, self.ece = other.keys, other.cells, other.ece
            return self
        keys = np.union1d(self.keys, other.keys)
        mine, theirs = np.searchsorted(keys, self.keys), np.searchsorted(keys, other.keys)
        for own, add in ((self.cells, other.cells), (self.ece, other.ece)):
            for k in own:
                out = np.zeros((keys.size, own[k].shape[1]))
                out[mine] += own[k]
                out[theirs] += add[k]
                own[k] = out
        self.keys = keys
        return self


def score_cells(scores: FloatArray, cells: int, counts: FloatArray | None = None) -> FloatArray:
    """The inner edges of ``cells`` equal-mass score cells (numpy's linear percentiles,
    distinct, above the smallest score; ``counts``: of the expanded rows): tied scores share
    a cell."""
    if scores.size == 0:
        return np.zeros(0)
    return inner_edges(percentiles(scores, percents(cells), counts), float(scores.min()))


def percentiles(values: FloatArray, at: FloatArray, counts: FloatArray | None) -> FloatArray:
    """numpy's linear percentiles of ``values`` at ``at`` percent — of the expanded rows when
    each value stands for ``counts`` rows (bit for bit the expanded file's)."""
    if counts is None:
        return np.asarray(np.percentile(values, at), dtype=np.float64)
    from calcheck.metrics.vece import mass_percentiles

    order = np.argsort(values, kind="stable")
    return mass_percentiles(values[order], counts[order], at, True)


def percents(parts: int) -> FloatArray:
    """The inner cut points of ``parts`` equal-mass parts, in percent (numpy's linear
    percentiles there are the edges; the streaming engines find the same values exactly)."""
    return np.asarray(np.linspace(0.0, 1.0, parts + 1)[1:-1] * 100.0, dtype=np.float64)


def inner_edges(values: FloatArray, low: float) -> FloatArray:
    """The distinct percentile values above the smallest value: the inner edges."""
    inner = np.unique(values)
    return np.asarray(inner[inner > low], dtype=np.float64)


ECE_BINS = 10


@dataclass(frozen=True)
class SegmentData:
    """What an engine hands the audit: the cut ``columns``, the filled :class:`CellTable`,
    and — when the engine holds them — the rows (scores, labels, atom keys) for the
    segments' row-level walks (None on the streaming engines)."""

    columns: tuple[SegmentColumn, ...]
    table: CellTable
    rows: tuple[FloatArray, IntArray, IntArray] | None = None
    counts: FloatArray | None = None        # --count: each held row stands for that many

    @property
    def sizes(self) -> list[int]:
        return [len(c.levels) for c in self.columns]


def segment_data(scores: FloatArray, labels: IntArray, names: list[str],
                 encoded: list[tuple[FloatArray | None, tuple[list[Any], IntArray] | None]],
                 opts: SegmentOptions, counts: FloatArray | None = None) -> SegmentData:
    """Cut the columns (each given as ``(numeric, None)`` or ``(None, categories)``, see
    :func:`code_column`), key the atoms and fill the table from rows held in memory
    (``counts``: each row stands for that many, all positive — the expanded rows' audit)."""
    label = opts.label
    cut = [code_column(name, numeric=num, categories=cats, buckets=opts.buckets,
                       max_levels=opts.max_levels, label=label, counts=counts)
           for name, (num, cats) in zip(names, encoded)]
    columns = tuple(c for c, _ in cut)
    sizes = [len(c.levels) for c in columns]
    check_sizes(sizes)
    keys = atom_keys([codes for _, codes in cut], sizes)
    table = CellTable(score_cells(scores, opts.score_cells, counts), ECE_BINS).update(
        scores, labels, keys, counts)
    return SegmentData(columns, table, (scores, labels, keys), counts)
