"""Streamed reading: validated batches of a Parquet dataset in bounded memory.

:func:`plan_stream` resolves the columns and the pushed-down ``--where`` filter once and lists
the dataset's fragments (files), which pickle, so Dask workers can each scan their own;
:func:`stream_batches` reads them one row group at a time (one decoding ahead of the
computation) and validates every batch exactly as the in-memory reader validates a table, with
row numbers counted over the whole stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from calcheck._prefetch import prefetch
from calcheck._typing import FloatArray, IntArray
from calcheck.data import (
    ClassColumns,
    binary_pair,
    binary_pair_note,
    check_columns_exist,
    class_named_columns,
    class_names_of,
    resolve_columns,
    top_label_columns,
)
from calcheck.errors import InputError
from calcheck.io.arrays import numpy_of
from calcheck.io.columns import (
    batch_incorrect,
    binary_columns,
    class_columns,
    class_index,
    distinct_text,
    is_text,
    named_note,
    row_major,
    scores_array,
    variable_values,
    weight_values,
)
from calcheck.io.source import (
    Source,
    check_parts,
    hive_partitioned,
    one_line,
    parquet_dataset,
    parquet_format,
    raise_if_exhausted,
    row_group_runs,
    to_expression,
)
from calcheck.validation import in_unit, zero_one

MULTICLASS_BATCH_VALUES = 2_000_000   # probabilities per streamed multiclass batch (16 MB)


@dataclass
class StreamStats:
    """What a streamed read saw: rows read, dropped by reason, batches."""

    rows_read: int = 0
    rows_dropped: int = 0
    dropped_by_reason: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    score_column: str = ""
    label_column: str = ""
    rows_renormalized: int = 0
    # --count streamed expanded (:func:`_expanded`): the counted rows kept, their positives
    # (label 1, or a correct top label), the rows of count 0, and Σ counts (the rows expanded)
    counted_rows: int = 0
    counted_positives: int = 0
    zero_counts: int = 0
    count_sum: int = 0

    def tally(self, rows: int, dropped_n: int = 0, dropped: dict[str, int] | None = None,
              renormalized: int = 0) -> None:
        """Count one validated batch."""
        self.rows_read += rows
        self.rows_dropped += dropped_n
        self.rows_renormalized += renormalized
        for k, v in (dropped or {}).items():
            self.dropped_by_reason[k] = self.dropped_by_reason.get(k, 0) + v
        self.batches += 1

    def add(self, other: StreamStats) -> StreamStats:
        """These statistics and ``other``'s (another partition's) added."""
        out = StreamStats(**{k: v for k, v in self.__dict__.items() if k != "dropped_by_reason"},
                          dropped_by_reason=dict(self.dropped_by_reason))
        for k, v in other.__dict__.items():
            if isinstance(v, int) and not isinstance(v, bool):
                setattr(out, k, getattr(out, k) + v)
        for k, v in other.dropped_by_reason.items():
            out.dropped_by_reason[k] = out.dropped_by_reason.get(k, 0) + v
        out.score_column = self.score_column or other.score_column
        out.label_column = self.label_column or other.label_column
        return out


def _batch_groups(table: Any, by: str, keep: np.ndarray | None, source: str = "",
                  row_offset: int = 0) -> tuple[list[str | None], np.ndarray]:
    """The ``--by`` codes of a validated batch's kept rows (``--time`` windows: their ISO
    starts)."""
    from calcheck.io.windows import WindowColumn, window_keys

    g = table.column(by)
    if isinstance(by, WindowColumn):
        if keep is not None and not keep.all():
            g = g.filter(pa.array(keep))
        return window_keys(g, by, source, row_offset)
    return group_codes(g if keep is None else g.filter(pa.array(keep)))


def _batch_numeric(src: Source, table: Any, names: tuple[str, ...], keep: np.ndarray | None,
                   row_offset: int) -> FloatArray:
    """The ``--var`` columns of a validated batch's kept rows as an (n, V) float64 matrix
    (missing → NaN); text that is not a number is an error naming the stream's row."""
    out = []
    for name in names:
        col = table.column(name)
        vals = variable_values(src, name, col if isinstance(col, pa.ChunkedArray)
                               else pa.chunked_array([col]), row_offset)
        out.append(vals if keep is None else vals[keep])
    return np.ascontiguousarray(np.column_stack(out)) if out else np.zeros((0, 0))



@dataclass(frozen=True)
class BatchExtras:
    """What a pass wants with each batch besides (scores, labels): the ``--by`` codes, the
    ``--var`` matrix, ``--correct-from``'s incorrect flags and the ``raw`` columns as they are
    (a list of arrays, nulls as None or NaN: the audit's segment columns), in that order."""

    by: str | None = None
    numeric: tuple[str, ...] = ()
    correct_from: str | None = None
    raw: tuple[str, ...] = ()

    @classmethod
    def of(cls, spec: Any) -> BatchExtras:
        return cls(getattr(spec, "by", None), tuple(getattr(spec, "numeric", ())),
                   getattr(spec, "correct_from", None), tuple(getattr(spec, "raw", ())))

    @property
    def columns(self) -> list[str]:
        return [*([self.by] if self.by else []), *self.numeric,
                *([self.correct_from] if self.correct_from else []), *self.raw]


def _with_extras(out: tuple[Any, ...], src: Source, table: Any, extras: BatchExtras,
                 keep: np.ndarray | None, row_offset: int, labels: Any,
                 class_names: list[str] | None, pos_label: str | None) -> tuple[Any, ...]:
    """A validated batch with the extras its pass asked for."""
    if extras.by is not None:
        out = (*out, _batch_groups(table, extras.by, keep, src.name, row_offset))
    if extras.numeric:
        out = (*out, _batch_numeric(src, table, extras.numeric, keep, row_offset))
    if extras.correct_from:
        out = (*out, batch_incorrect(src, table, extras.correct_from, keep, labels, class_names,
                                      pos_label, row_offset))
    if extras.raw:
        cols = [np.asarray(table.column(c).to_numpy(zero_copy_only=False)) for c in extras.raw]
        out = (*out, [c if keep is None else c[keep] for c in cols])
    return out


def _fast_binary(batch: pa.RecordBatch, score_col: str,
                 label_col: str) -> tuple[FloatArray, np.ndarray] | None:
    """Zero-copy (scores, labels) of a batch that is plainly valid — float64 scores in [0, 1]
    and integer or boolean 0/1 labels, no nulls; float 0.0/1.0 labels become int8 — or None
    (then the full checks run and name the first bad row)."""
    sc, lc = batch.column(score_col), batch.column(label_col)
    if sc.type != pa.float64() or sc.null_count or lc.null_count:
        return None
    floating = pa.types.is_floating(lc.type)
    if not (floating or pa.types.is_integer(lc.type) or pa.types.is_boolean(lc.type)):
        return None
    s = numpy_of(sc)                                   # zero-copy, and no pandas import
    if not in_unit(s):
        return None
    y = numpy_of(lc)
    if floating:                # 0.0/1.0 (and −0.0) exactly: int8 equal to them, in 0/1
        with np.errstate(invalid="ignore"):            # (NaN, ±inf: the full checks)
            yi = y.astype(np.int8)
        if not np.array_equal(yi, y):
            return None
        y = yi
    if not zero_one(y):
        return None
    return s, y


def _fast_weights(batch: pa.RecordBatch, column: str, kind: str) -> FloatArray | None:
    """Zero-copy weights of a batch whose ``column`` is plainly valid — float64, no nulls,
    finite and non-negative (whole numbers for ``kind`` "count") — or None (then the full
    checks run)."""
    col = batch.column(column)
    if col.type != pa.float64() or col.null_count or not len(col):
        return None
    w = numpy_of(col)
    ok = w.min() >= 0 and np.isfinite(w.max()) and \
        (kind != "count" or np.array_equal(w, np.floor(w)))
    return w if ok else None


@dataclass
class StreamPlan:
    """What a streamed read will scan: the dataset's fragments (files) after partition pruning,
    the resolved columns and the pushed-down filter.  Fragments pickle, so Dask workers can
    each scan their own."""

    name: str
    fragments: list[Any]
    score_column: str                      # "" for multiclass input
    label_column: str
    filter: Any
    schema: Any
    prob_columns: list[str] | None = None  # multiclass input: the K probability columns
    class_names: list[str] | None = None
    renormalize: bool = False
    in_memory: bool = False                # fragments of an in-memory table (no Dask)
    probs_detected: bool = False           # the probability columns were found by name
    binary_pair: bool = False              # two detected columns read as a binary score
                                           # (the second), after the multiclass checks
    count_column: str | None = None        # --count: each row read as that many rows
    weight_column: str | None = None       # --weight (or --count) streamed by the weighted
                                           # passes (calcheck.streaming.weighted): every
                                           # batch carries its rows' weights last
    weight_kind: str = "weight"            # ... checked as this kind ("count": whole numbers)

    @property
    def multiclass(self) -> bool:
        return bool(self.prob_columns) and not self.binary_pair

    @property
    def columns(self) -> list[str]:
        """The prediction and label columns a scan reads."""
        count = [c for c in (self.count_column, self.weight_column) if c]
        if self.prob_columns:
            return [*self.prob_columns, self.label_column, *count]
        return [self.score_column, self.label_column, *count]

    def batch_size(self, batch_rows: int) -> int:
        """Rows per batch: ``batch_rows``, and for K classes at most ~MULTICLASS_BATCH_VALUES
        probabilities (a batch is an (n, K) float64 matrix)."""
        if not self.prob_columns:
            return batch_rows
        return min(batch_rows, max(1024, MULTICLASS_BATCH_VALUES // len(self.prob_columns)))


# an in-memory table on --engine dask (whose workers read files)
DASK_NEEDS_FILES = ("engine='dask' reads Parquet files or directories; give a path, or use "
                    "engine='stream' for an in-memory table")


def check_streamable(src: Source) -> None:
    """The streaming engines read Parquet files, directories and in-memory tables: refuse
    stdin and CSV, naming the engine that reads them."""
    if src.data is not None:
        raise InputError("--engine stream/dask reads Parquet files or directories, not stdin "
                         "(--engine memory reads stdin)")
    if src.fmt == "csv":
        raise InputError(f"{src.name}: --engine stream/dask reads Parquet only; this is a CSV "
                         "file (--engine memory reads CSV)")


def plan_stream(src: Source, *, score: str | None = None, label: str | None = None,
                where: str | None = None, probs: list[str] | None = None,
                renormalize: bool = False, extra_columns: dict[str, str] | None = None,
                pair_as_binary: bool = True, count: str | None = None,
                weight: str | None = None, weight_kind: str = "weight") -> StreamPlan:
    """Plan a streamed read of a Parquet file, directory or hive-partitioned tree (or of an
    in-memory table, batch by batch): binary scores, or (``probs``, or auto-detected
    prob_0..prob_{K−1} columns without a score column) K class probabilities, as the in-memory
    reader decides (``pair_as_binary``: two detected columns are a binary score, as
    :func:`calcheck.data.binary_pair` says).  ``extra_columns`` (name → option) must exist.
    ``count``: a ``--count`` column (among ``extra_columns``): every row is read as that many
    identical rows (:func:`validated_batches`); ``weight``: a ``--weight`` (or, ``weight_kind``
    "count", a ``--count``) column among ``extra_columns``, validated as that kind and given
    with every batch, last, as it is."""
    check_streamable(src)
    if src.fmt == "arrow":
        import pyarrow.dataset as pads

        ds = pads.dataset(src.table)
    elif src.directory:
        ds = parquet_dataset(src) if where or hive_partitioned(src) else FileSet.open(src)
    else:
        ds = _single_file_dataset(src) if where else FileFragment.open(str(src.path), src.name)
    available = [str(n) for n in ds.schema.names]
    check_columns_exist(available, list(extra_columns or {}), src.name, extra_columns)
    where_filter = None
    if where:                       # the filter's grammar is imported only when one is given
        from calcheck.where import check_columns, parse_where

        where_filter = parse_where(where)
        check_columns(where_filter, available, src.name)
    named = class_named_columns(available, score, label, probs,
                                lambda c: _distinct_text(ds, c))
    if named is not None:
        probs, label = named
        if named_note(named) not in src.notes:
            src.notes.append(named_note(named))
    cols, score_col, label_col = resolve_columns(available, score, label, probs, src.name)
    if src.fmt == "parquet" and src.directory:
        extra = [*(extra_columns or {}), *(cols or [score_col]), label_col,
                 *(where_filter.columns if where_filter is not None else [])]
        check_parts(src, [c for c in dict.fromkeys(extra) if c])
    flt = to_expression(where_filter) if where_filter is not None else None
    try:
        fragments = list(ds.get_fragments(filter=flt))
    except pa.ArrowException as exc:
        raise InputError(f"{src.name}: cannot scan the dataset ({one_line(exc)})") from None
    pair = pair_as_binary and binary_pair(cols, probs) and named is None
    if pair:
        assert cols is not None
        score_col = cols[1]
        note = binary_pair_note(cols)
        if note not in src.notes:
            src.notes.append(note)
    return StreamPlan(src.name, fragments, score_col, label_col, flt, ds.schema, cols,
                      class_names_of(cols) if cols else None, renormalize,
                      in_memory=src.fmt == "arrow", probs_detected=cols is not None and not probs,
                      binary_pair=pair, count_column=count, weight_column=weight,
                      weight_kind=weight_kind)


def _distinct_text(ds: Any, column: str) -> list[Any]:
    """The distinct values of a text column, scanned batch by batch (stops past 1,000)."""
    if not is_text(ds.schema.field(column).type):
        return []
    seen: dict[Any, None] = {}
    try:
        for batch in ds.to_batches(columns=[column]):
            seen.update(dict.fromkeys(distinct_text(pa.chunked_array([batch.column(0)]))))
            if len(seen) > 1000:
                return []
    except pa.ArrowException:
        return []
    return list(seen)


def _single_file_dataset(src: Source) -> Any:
    import pyarrow.dataset as pads

    try:
        return pads.dataset(src.path, format=parquet_format())
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"{src.name}: not a readable Parquet file ({one_line(exc)})") \
            from None


class FileFragment:
    """One Parquet file as a fragment of a stream without ``--where`` (a single file, or a part
    of a directory without hive partitions), read row group by row group with
    ``pyarrow.parquet`` — each row group in equal batches (:func:`even_batch`) — without
    importing ``pyarrow.dataset``: its import loads pandas, ~0.15 s and 50 MB of every run.
    A single file also stands for the dataset while the stream is planned (``schema``,
    ``to_batches``, ``get_fragments``).  Small row groups are read a few at a time
    (:func:`~calcheck.io.source.row_group_runs`).  Pickles by path; the file is open only
    while a pass reads it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._meta: Any = None

    @classmethod
    def open(cls, path: str, name: str | None = None) -> FileFragment:
        """The file at ``path``, its footer read: an unreadable file is an input error naming
        ``name`` (default: the path)."""
        fr = cls(path)
        try:
            fr.footer()
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise InputError(f"{name or path}: not a readable Parquet file ({one_line(exc)})") \
                from None
        return fr

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "_meta": None}

    def footer(self) -> Any:
        """The file's footer metadata (read once)."""
        if self._meta is None:
            import pyarrow.parquet as pq

            self._meta = pq.read_metadata(self.path)
        return self._meta

    @property
    def metadata(self) -> Any:
        return self.footer()

    @property
    def schema(self) -> Any:
        return self.metadata.schema.to_arrow_schema()

    def batches(self, columns: list[str], batch_size: int) -> Any:
        """Record batches of ``columns``, a run of row groups at a time
        (:func:`~calcheck.io.source.row_group_runs`: a large group alone, small ones
        together, within ``batch_size`` rows; page checksums verified,
        1 MiB buffered column reads, no pre-buffering: as
        :func:`calcheck.io.source.parquet_format` sets for datasets), decoded on the calling
        thread: the stream reads one row group ahead on a thread of its own while two more fold
        batches, and Arrow's pool on top of those made the 3·10^7-row default run slower on two
        cores (2.29 → 2.21 s median; ``-m ece`` 0.87 → 0.84 s)."""
        import pyarrow.parquet as pq

        with pq.ParquetFile(self.path, page_checksum_verification=True,
                            buffer_size=1 << 20, pre_buffer=False) as pf:
            meta = pf.metadata
            sizes = [meta.row_group(g).num_rows for g in range(pf.num_row_groups)]
            for groups, rows in row_group_runs(sizes, batch_size):
                # a run of small groups is one batch: its batches span the groups
                yield from pf.iter_batches(batch_size=even_batch(rows, batch_size),
                                           row_groups=groups, columns=columns,
                                           use_threads=False)

    def to_batches(self, columns: list[str]) -> Any:
        return self.batches(columns, 1 << 17)

    def get_fragments(self, filter: Any = None) -> list[FileFragment]:
        assert filter is None, "a --where filter scans through pyarrow.dataset"
        return [self]


class FileSet:
    """The parts of a Parquet directory without hive partitions, as the stream plans them
    without ``pyarrow.dataset``: one :class:`FileFragment` a part, in path order (the
    dataset's order), and the first part's schema (the dataset's, which reads it from its
    first fragment)."""

    def __init__(self, parts: list[FileFragment]) -> None:
        self.parts = parts

    @classmethod
    def open(cls, src: Source) -> FileSet:
        from calcheck.io.source import parquet_parts

        first, *rest = parquet_parts(src)
        return cls([FileFragment.open(first), *(FileFragment(p) for p in rest)])

    @property
    def schema(self) -> Any:
        return self.parts[0].schema

    def to_batches(self, columns: list[str]) -> Any:
        for part in self.parts:
            yield from part.to_batches(columns)

    def get_fragments(self, filter: Any = None) -> list[FileFragment]:
        assert filter is None, "a --where filter scans through pyarrow.dataset"
        return list(self.parts)


def even_batch(rows: int, batch_rows: int) -> int:
    """Rows per batch of a row group of ``rows`` rows: the group in equal parts of about
    ``batch_rows`` rows (the nearest whole number of parts, at least one), not ``batch_rows``
    and a short remainder.  A batch costs the grid pass ~2 ms besides its rows (its 2^17-cell
    sums): pyarrow's default 1Mi-row groups cut at 10^6 rows made twice the batches, one in
    two of ~49k rows (3·10^7 rows, default metrics: 2.39 → 2.14 s median as one batch a
    group)."""
    parts = max(1, round(rows / max(batch_rows, 1)))
    return max(1, -(-rows // parts))


def fragment_batches(plan: StreamPlan, fragment: Any, batch_rows: int,
                     extras: BatchExtras = BatchExtras(),
                     columns: list[str] | None = None) -> Any:
    """Record batches of one fragment (one file), read one row group at a time (with the
    columns of ``extras``; ``columns`` instead of the plan's prediction and label columns).

    A Parquet file is scanned row group by row group: a scan of the whole file decodes row
    groups ahead of the consumer whatever its readahead settings (~0.15 GB of Arrow buffers at
    the peak of a 3·10^7-row file of 1Mi-row groups, against ~30 MB this way).  The row order
    is the same."""
    columns = list(dict.fromkeys([*(columns or plan.columns), *extras.columns]))
    try:
        if isinstance(fragment, FileFragment):
            yield from fragment.batches(columns, plan.batch_size(batch_rows))
            return
        split = getattr(fragment, "split_by_row_group", None)
        parts = split(plan.filter, schema=plan.schema) if split is not None else [fragment]
        for part in parts:
            yield from part.to_batches(schema=plan.schema, columns=columns, filter=plan.filter,
                                       batch_size=plan.batch_size(batch_rows),
                                       batch_readahead=0, fragment_readahead=0)
    except (pa.ArrowException, OSError) as exc:
        where = getattr(fragment, "path", plan.name)
        raise_if_exhausted(exc, str(where))
        raise InputError(f"{where}: cannot scan ({one_line(exc)})") from None


def group_codes(column: Any) -> tuple[list[str | None], np.ndarray]:
    """The ``--by`` keys of a batch column as (distinct keys, code per row), keyed as the
    in-memory engine keys groups: ``str(value)``, and None for null or NaN (the missing group,
    kept apart from every real value)."""
    import pyarrow.compute as pc  # ~27 ms of import: only --by needs it

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    enc = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    values = enc.dictionary.to_pylist()
    raw: list[str | None] = [None if v is None or (isinstance(v, float) and v != v) else str(v)
                             for v in values]
    codes = enc.indices.fill_null(len(raw)).to_numpy(zero_copy_only=False)
    if enc.indices.null_count:
        raw.append(None)
    keys = list(dict.fromkeys(raw))             # NaN and null are one group, the missing one
    if len(keys) < len(raw):
        codes = np.array([keys.index(k) for k in raw], dtype=np.int64)[codes]
    return keys, codes


def validated_batches(plan: StreamPlan, batches: Any, *, name: str,
                      pos_label: str | None = None, drop_invalid: bool = False,
                      stats: StreamStats | None = None, extras: BatchExtras = BatchExtras(),
                      view: str = "top") -> Any:
    """(scores, labels) of record batches, validated — then, as ``extras`` asks, (group keys,
    group code per row) of ``--by``, the (n, V) float64 matrix of the ``--var`` columns and
    ``--correct-from``'s int8 incorrect flags; error rows are numbered from 1 over all the batches given (the
    rows after the ``--where`` filter), and the message names ``name``.

    Multiclass input (``plan.prob_columns``) is validated as in memory and given as
    its top-label view (confidence, correct) with ``view="top"``, as (probabilities (n, K),
    class indices) with ``view="classes"``, or as (:class:`~calcheck.data.ClassColumns`, class
    indices) with ``view="columns"`` (no (n, K) matrix is made)."""
    src = Source(name=name, fmt="parquet", path=name)
    src.cache["streaming"] = True
    st = stats if stats is not None else StreamStats()
    st.score_column, st.label_column = plan.score_column, plan.label_column
    if plan.prob_columns:
        yield from _multiclass_batches(plan, batches, src, st, drop_invalid, extras, view)
        return
    sc, lc, cc, wc = plan.score_column, plan.label_column, plan.count_column, plan.weight_column
    for batch in batches:
        if batch.num_rows == 0:
            continue
        offset = st.rows_read
        fast = None if pos_label is not None or cc else _fast_binary(batch, sc, lc)
        fw = _fast_weights(batch, wc, plan.weight_kind) if wc and fast is not None else None
        if fast is not None and (fw is not None or not wc):
            st.tally(batch.num_rows)
            out = _with_extras(fast, src, batch, extras, None, offset, fast[1], None, pos_label)
            yield out if fw is None else (*out, fw)
            continue
        table = pa.Table.from_batches([batch])
        weighted = cc or wc
        k, more = weight_values(src, table, weighted, "count" if cc else plan.weight_kind) \
            if weighted else (None, [])
        s, y, keep, dropped_n, dropped = binary_columns(src, table, sc, lc, pos_label,
                                                        drop_invalid, offset, more=more)
        st.tally(batch.num_rows, dropped_n, dropped)
        if s.shape[0]:
            out = np.ascontiguousarray(s), np.ascontiguousarray(y, dtype=np.int8)
            out = _with_extras(out, src, table, extras, keep, offset, out[1], None, pos_label)
            if k is None:
                yield out
            elif wc:                                  # the weights, last
                yield (*out, np.ascontiguousarray(k if keep is None else k[keep]))
            else:
                yield from _expanded(out, k if keep is None else k[keep], st, out[1])


def _multiclass_batches(plan: StreamPlan, batches: Any, src: Source, st: StreamStats,
                        drop_invalid: bool, extras: BatchExtras, view: str) -> Any:
    """The multiclass branch of :func:`validated_batches`."""
    assert plan.prob_columns is not None and plan.class_names is not None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch])
        offset = st.rows_read
        cc, wc = plan.count_column, plan.weight_column
        weighted = cc or wc
        k, more = weight_values(src, table, weighted, "count" if cc else plan.weight_kind) \
            if weighted else (None, [])
        columns, y, keep, dropped_n, dropped, renormalized = class_columns(
            src, table, plan.prob_columns, plan.label_column, plan.class_names,
            renormalize=plan.renormalize, drop_invalid=drop_invalid, row_offset=offset,
            detected=plan.probs_detected, more=more)
        st.tally(batch.num_rows, dropped_n, dropped, renormalized)
        if not y.shape[0]:
            continue
        out: tuple[Any, ...]
        if plan.binary_pair:                       # validated as two classes, read as binary
            out = (np.ascontiguousarray(columns[1]), y.astype(np.int8))
        elif view == "top":
            conf, correct = top_label_columns(columns, y)
            out = (conf, correct.astype(np.int8))
        elif view == "columns":
            out = (ClassColumns(columns), y)
        else:
            out = (row_major(list(columns), int(y.shape[0])), y)
        out = _with_extras(out, src, table, extras, keep, offset, y, plan.class_names, None)
        if k is None:
            yield out
        elif wc:                                      # the weights, last
            yield (*out, np.ascontiguousarray(k if keep is None else k[keep]))
        else:
            hit = out[1] if view == "top" or plan.binary_pair else \
                top_label_columns(columns, y)[1]           # (the top label is correct)
            yield from _expanded(out, k if keep is None else k[keep], st, hit)


EXPAND_ROWS = 1 << 16       # --count: an expanded batch is cut into pieces of at most this
#                             many rows (or the batch's own rows, when more)


def _take(x: Any, rows: IntArray) -> Any:
    """The ``rows`` of one element of a validated batch: an array (scores, labels, the --var
    matrix, probabilities), :class:`~calcheck.data.ClassColumns`, ``--by``'s (keys, codes) or
    the raw columns' list."""
    if isinstance(x, tuple):
        return x[0], x[1][rows]
    if isinstance(x, list):
        return [c[rows] for c in x]
    return x[rows]


def _expanded(batch: tuple[Any, ...], counts: FloatArray, st: StreamStats,
              positive: np.ndarray) -> Any:
    """A validated batch whose row i stands for ``counts[i]`` identical rows (``--count``),
    as those rows: each row repeated in place, so the stream is the expanded file, row for
    row, and every pass computes the expanded file's numbers (docs/weights.md).  Given in
    pieces of at most max(:data:`EXPAND_ROWS`, the batch's rows) rows, so memory stays
    bounded whatever the counts; rows of count 0 vanish.  ``positive``: the rows' 0/1 label
    or top-label correctness, for the input section's statistics."""
    k = counts.astype(np.int64)
    st.counted_rows += int(k.shape[0])
    st.zero_counts += int(np.count_nonzero(k == 0))
    st.count_sum += int(k.sum())
    st.counted_positives += int(np.count_nonzero(positive))
    end = np.cumsum(k)
    begin = end - k
    total = int(end[-1]) if end.shape[0] else 0
    step = max(EXPAND_ROWS, int(k.shape[0]))
    for a in range(0, total, step):
        b = min(a + step, total)                     # expanded rows [a, b): the rows r0..r1
        r0 = int(np.searchsorted(end, a, side="right"))
        r1 = int(np.searchsorted(end, b - 1, side="right")) + 1
        times = np.minimum(end[r0:r1], b) - np.maximum(begin[r0:r1], a)
        rows = np.repeat(np.arange(r0, r1), times)
        yield tuple(_take(x, rows) for x in batch)


def plan_rows(plan: StreamPlan) -> int | None:
    """The rows the planned files hold, from their Parquet footers (before ``--where``), for a
    progress bar; None when a fragment does not say."""
    if plan.count_column:                           # (the rows expanded are not known)
        return None
    total = 0
    for fr in plan.fragments:
        meta = getattr(fr, "metadata", None)
        if meta is None:
            return None
        total += int(meta.num_rows)
    return total


def stream_batches(plan: StreamPlan, *, batch_rows: int, pos_label: str | None = None,
                   drop_invalid: bool = False,
                   stats: StreamStats | None = None, extras: BatchExtras = BatchExtras(),
                   view: str = "top", trusted: tuple[int, ...] | None = None,
                   labels: np.ndarray | None = None) -> Any:
    """Validated (scores, labels) batches of a planned Parquet file, directory or
    hive-partitioned tree, read file by file through ``pyarrow.dataset`` in bounded memory (one
    row group decoding ahead of the computation).

    The ``--where`` filter is pushed down to the scan (partition pruning and row-group
    statistics).  Row numbers in error messages count the rows of the (filtered) stream.

    ``trusted`` (multiclass input that an earlier pass validated whole, with no row dropped or
    renormalized): read only those classes' probability columns and the label, and give each
    batch as ({class: probabilities}, class indices) — or, with ``view="top"`` (``trusted``
    then names every class), as its top-label view — see :func:`_trusted_batches`.  With
    ``labels`` (every row's class index in stream order, kept by that earlier pass) the label
    column is not read again.
    """
    if trusted is not None:
        assert plan.prob_columns is not None and not extras.columns
        cols = [*(plan.prob_columns[k] for k in trusted),
                *([plan.label_column] if labels is None else []),
                *([plan.weight_column] if plan.weight_column else [])]
        raw = (b for fr in plan.fragments
               for b in fragment_batches(plan, fr, batch_rows, columns=cols))
        yield from _trusted_batches(plan, prefetch(raw), trusted, stats, top=view == "top",
                                    labels=labels)
    else:
        raw = (b for fr in plan.fragments
               for b in fragment_batches(plan, fr, batch_rows, extras))
        yield from validated_batches(plan, prefetch(raw), name=plan.name, pos_label=pos_label,
                                     drop_invalid=drop_invalid, stats=stats, extras=extras,
                                     view=view)
    # the pass is read: hand the decoded batches' memory that Arrow's pool keeps (~85 MB after
    # 10^7 rows) back to the system, so what comes next (exact PAVA's held rows, the search's
    # collected rows) adds to the memory in use, not to the pool's cache
    pa.default_memory_pool().release_unused()


def _trusted_batches(plan: StreamPlan, batches: Any, classes: tuple[int, ...],
                     stats: StreamStats | None, *, top: bool = False,
                     labels: np.ndarray | None = None) -> Any:
    """({class: probabilities}, class indices) of batches holding only ``classes``' columns and
    the label — or with ``top`` (every class read) the top-label view (confidence, correct) —
    for a pass after one that validated every row (every value was then finite in [0, 1],
    every row summed to 1 and every label was a class; nothing was dropped or renormalized,
    so these are the values a full pass gives).  The columns read are checked again (finite,
    in [0, 1], labels classes): a file changed between passes is an error.  The top-label
    view is :func:`calcheck.data.top_label_view` column by column: the first largest
    probability and its class, without the (n, K) matrix.  ``labels``: the class indices of
    every row that the earlier pass kept, sliced by row instead of the label column (the rows
    must add up to them).  The weighted passes' weights (``plan.weight_column``, checked again
    as the earlier pass found them: non-negative, finite, whole for counts) come last."""
    assert plan.prob_columns is not None and plan.class_names is not None
    src = Source(name=plan.name, fmt="parquet", path=plan.name)
    st = stats if stats is not None else StreamStats()
    changed = InputError(f"{plan.name}: the data changed between two passes of the stream (an "
                         "earlier pass found every row valid)")
    for batch in batches:
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch])
        cols: dict[int, FloatArray] = {}
        bad = False
        for k in classes:
            vals, nonnum, _ = scores_array(src, plan.prob_columns[k],
                                           table.column(plan.prob_columns[k]))
            bad |= bool(nonnum.any()) or not in_unit(vals)
            cols[k] = vals
        if labels is None:
            y, missing, wrong, _ = class_index(src, plan.label_column,
                                               table.column(plan.label_column), plan.class_names)
            bad |= bool(missing.any() or wrong.any())
        else:
            y = labels[st.rows_read:st.rows_read + batch.num_rows]
            bad |= y.shape[0] != batch.num_rows
        weights: tuple[FloatArray, ...] = ()
        if plan.weight_column:
            w, problems = weight_values(src, table, plan.weight_column, plan.weight_kind)
            bad |= bool(problems)
            weights = (w,)
        if bad:
            raise changed
        st.tally(batch.num_rows)
        if not top:
            yield cols, y, *weights
            continue
        conf, correct = top_label_columns([cols[k] for k in classes], y)
        yield conf, correct.astype(np.int8), *weights
    if labels is not None and st.rows_read != labels.shape[0]:
        raise changed
