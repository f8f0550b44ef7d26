"""Arrow columns to validated numpy arrays: scores, binary labels, class probabilities and
class labels, and the extra columns of a run.

Every problem becomes an :class:`InputError` whose message names the file, the column, how many
rows are bad and the first ones (rows numbered from 1 for the first data row, header
excluded), or — with ``--drop-invalid`` — the rows to drop, counted by reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from calcheck._typing import FloatArray, IntArray
from calcheck.data import ROW_SUM_TOL
from calcheck.errors import InputError
from calcheck.io.arrays import numpy_of
from calcheck.io.source import Source
from calcheck.validation import describe_rows, in_unit, invalid_score_masks, zero_one

BOOL_WORDS = {"1": True, "true": True, "t": True, "yes": True, "y": True,
              "0": False, "false": False, "f": False, "no": False, "n": False}
Problem = tuple[str, str, str, np.ndarray, Any]   # reason, column, text, row mask, values


def _utf8_problem(col: pa.ChunkedArray) -> tuple[int, bytes] | None:
    for i, v in enumerate(col.to_pylist()):
        if isinstance(v, bytes):
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                return i, v
    return None


def not_utf8(src: Source, name: str, col: pa.ChunkedArray) -> InputError:
    bad = _utf8_problem(col)
    where = f"; first at row {bad[0] + 1} ({bad[1][:30]!r})" if bad else ""
    return InputError(f"{src.name}: column {name!r} holds bytes that are not valid UTF-8{where}; "
                      "re-encode the file as UTF-8", column=name,
                      rows=[bad[0] + 1] if bad else None)


def _compute() -> Any:
    """``pyarrow.compute``, imported by the paths that cast or search text only (25 ms of a
    small run's start-up otherwise)."""
    import pyarrow.compute as pc

    return pc


def null_mask(col: Any) -> np.ndarray:
    """Where ``col`` is null (no pass over the data when it has no nulls)."""
    if col.null_count == 0:
        return np.zeros(len(col), dtype=bool)
    return np.asarray(numpy_of(col.is_null()), dtype=bool)


def scores_array(src: Source, name: str,
                  col: pa.ChunkedArray) -> tuple[FloatArray, np.ndarray, np.ndarray | None]:
    """Scores as float64 (nulls → NaN), a mask of the non-numeric entries and their text."""
    t = col.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        raise not_utf8(src, name, col)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        arr = numpy_of(col if t == pa.float64() else _compute().cast(col, pa.float64()))
        return np.asarray(arr, dtype=np.float64), np.zeros(len(arr), dtype=bool), None
    if pa.types.is_null(t):
        return np.full(len(col), np.nan), np.zeros(len(col), dtype=bool), None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        values = col.to_numpy(zero_copy_only=False)
        out = np.full(len(values), np.nan)
        nonnum = np.zeros(len(values), dtype=bool)
        for i, v in enumerate(values):           # error path only: the column is not numeric
            if v is None:
                continue
            try:
                out[i] = float(v)
            except ValueError:
                nonnum[i] = True
        return out, nonnum, values
    raise InputError(f"{src.name}: column {name!r} has type {t}, expected numbers", column=name)


def labels_array(src: Source, name: str, col: pa.ChunkedArray,
                  pos_label: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """Labels as 0/1 int8, masks of missing and non-binary entries, and the raw values."""
    t = col.type
    n = len(col)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        raise not_utf8(src, name, col)
    missing = null_mask(col)
    if pa.types.is_null(t):
        return np.zeros(n, dtype=np.int8), np.ones(n, dtype=bool), np.zeros(n, dtype=bool), None
    if pa.types.is_boolean(t):
        vals = np.asarray(numpy_of(col.fill_null(False)))
        if pos_label is not None:
            word = pos_label.strip().lower()
            if word not in BOOL_WORDS:
                raise InputError(f"{src.name}: --pos-label {pos_label!r} is not a value of the "
                                 f"boolean column {name!r} (use true or false)", column=name)
            pos = BOOL_WORDS[word]
            return (vals == pos).astype(np.int8), missing, np.zeros(n, dtype=bool), None
        return vals.astype(np.int8), missing, np.zeros(n, dtype=bool), None
    numeric = pa.types.is_integer(t) or pa.types.is_floating(t)
    if pa.types.is_integer(t) and pos_label is None and col.null_count == 0:
        ints = np.asarray(numpy_of(col))
        if zero_one(ints):
            return (ints.astype(np.int8, copy=False), missing, np.zeros(n, dtype=bool), ints)
    if numeric:
        vals = np.asarray(numpy_of(_compute().cast(col, pa.float64())))
        missing = missing | np.isnan(vals)
        if pos_label is None:
            nonbin = ~missing & (vals != 0) & (vals != 1)
            return np.where(nonbin | missing, 0, vals).astype(np.int8), missing, nonbin, vals
        try:
            pos_value = float(pos_label)
        except ValueError:
            raise InputError(f"{src.name}: --pos-label {pos_label!r} is not a value of the numeric "
                             f"column {name!r}", column=name) from None
        return (*_pos_label_split(src, name, vals, missing, pos_value, pos_label), vals)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        vals = np.asarray(_compute().cast(col, pa.string()).to_numpy(zero_copy_only=False), dtype=object)
        if pos_label is None:
            distinct = sorted(set(vals[~missing][:100000]))
            raise InputError(f"{src.name}: column {name!r} holds text labels "
                             f"({', '.join(map(repr, distinct[:5]))}); name the positive class "
                             "with --pos-label", column=name)
        return (*_pos_label_split(src, name, vals, missing, pos_label, pos_label), vals)
    raise InputError(f"{src.name}: column {name!r} has type {t}, expected 0/1 labels", column=name)


def _pos_label_split(src: Source, name: str, vals: np.ndarray, missing: np.ndarray,
                     pos_value: Any, pos_text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    present = vals[~missing]
    distinct = np.unique(present) if present.dtype != object else np.array(sorted(set(present)))
    if pos_value not in set(distinct.tolist()):
        raise InputError(f"{src.name}: --pos-label {pos_text!r} does not occur in column {name!r} "
                         f"(values: {', '.join(map(str, distinct[:5]))})", column=name)
    if len(distinct) > 2:
        raise InputError(f"{src.name}: column {name!r} has {len(distinct)} distinct values "
                         f"({', '.join(map(str, distinct[:5]))}); labels must be binary",
                         column=name)
    y = np.zeros(len(vals), dtype=np.int8)
    y[~missing] = present == pos_value
    return y, missing, np.zeros(len(vals), dtype=bool)


def rows_error(source: str, column: str, mask: np.ndarray, values: Any, what: str,
                hint: str = "", row_offset: int = 0) -> InputError:
    """``"f.csv: column 'x': 3 values not numeric; first at rows 2, 5, 9 (e.g. 'a')"``.

    ``row_offset``: rows before this batch (streaming), so row numbers stay global.
    """
    k = int(mask.sum())
    idx = np.flatnonzero(mask)[:3]
    return InputError(f"{source}: column {column!r}: {k} value{'s' if k > 1 else ''} {what}; "
                      f"{describe_rows(mask, values, row_base=1 + row_offset)}{hint}",
                      column=column, rows=[int(i) + 1 + row_offset for i in idx])

def variable_values(src: Source, name: str, col: pa.ChunkedArray,
                    row_offset: int = 0) -> FloatArray:
    """A ``--var`` column as float64 (missing → NaN): text that is not a number and ±inf are
    errors naming the first rows (both engines read variables through here)."""
    vals, nonnum, text = scores_array(src, name, col)
    if nonnum.any():
        raise rows_error(src.name, name, nonnum, text, "not numeric",
                         " (--var needs a numeric column)", row_offset)
    inf = np.isinf(vals)
    if inf.any():
        raise rows_error(src.name, name, inf, vals, "infinite",
                         " (--var needs finite numbers; missing values are skipped)", row_offset)
    return vals


_SCORE_WHAT = {"missing": "missing (empty or NaN)", "infinite": "infinite",
               "out_of_range": "outside [0, 1]"}


def probability_problems(column: str, values: FloatArray, nonnum: np.ndarray, text: Any,
                          kind: str, *, above_one: bool = False,
                          source: str = "") -> list[Problem]:
    """Non-numeric, missing, infinite and out-of-range entries of a probability column
    (``above_one``: entries above 1 are fine — rows are renormalised afterwards)."""
    out: list[Problem] = []
    if nonnum.any():
        out.append((f"non_numeric_{kind}", column, "not numeric", nonnum, text))
    elif in_unit(values):
        return out                          # all finite in [0, 1]
    if kind == "score":                   # a binary score column (class columns: row sums)
        check_scale(source, column, values[~nonnum] if nonnum.any() else values)
    for reason, mask in invalid_score_masks(values).items():
        mask = mask & ~nonnum
        if above_one and reason == "out_of_range":
            with np.errstate(invalid="ignore"):
                mask = mask & (values < 0.0)
            what = "negative"
        else:
            what = _SCORE_WHAT[reason]
        if mask.any():
            out.append((f"{reason}_{kind}", column, what, mask, values))
    return out


def is_text(t: Any) -> bool:
    """A string (or dictionary-encoded) Arrow type."""
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t))


def distinct_text(col: Any) -> list[Any]:
    """The distinct non-null values of a text column (an empty list for any other type, or
    more than 1,000 values: not class names)."""
    if not is_text(col.type):
        return []
    values = _compute().unique(_compute().cast(col, pa.string()).drop_null())
    return values.to_pylist() if len(values) <= 1000 else []


def named_note(named: tuple[list[str], str]) -> str:
    cols, label = named
    return (f"multiclass input: the probability columns are named after the classes of "
            f"{label!r}: {', '.join(cols)} (give --probs to choose others)")


def check_scale(source: str, column: str, values: FloatArray) -> None:
    """Scores on another scale are an error with the fix, even under --drop-invalid (which
    would otherwise drop nearly every row and still print a verdict): most finite values in
    (1, 100] and none outside [0, 100] are percentages; most outside [0, 1], some negative, are
    logits (log-odds)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return
    lo, hi = float(finite.min()), float(finite.max())
    outside = float(np.mean((finite < 0.0) | (finite > 1.0)))
    if lo >= 0.0 and 1.0 < hi <= 100.0 and float(np.mean(finite > 1.0)) >= 0.5:
        raise InputError(f"{source}: column {column!r} looks like percentages (values from {lo:.4g} to "
                         f"{hi:.4g}, {outside:.0%} above 1): calcheck reads probabilities in "
                         "[0, 1]; divide the column by 100", column=column)
    if lo < 0.0 and outside >= 0.5:
        raise InputError(f"{source}: column {column!r} looks like logits (log-odds; values from "
                         f"{lo:.4g} to {hi:.4g}, {outside:.0%} outside [0, 1]): calcheck reads "
                         "probabilities in [0, 1]; apply the sigmoid 1/(1 + exp(-x)) (or the "
                         "softmax for class scores) first", column=column)


def rounding_tolerance(k: int) -> float:
    """How far a row of K probabilities written with rounding may sum from 1: 1e-4·K."""
    return 1e-4 * k


def row_sum_error(src: Source, cols: list[str], mask: np.ndarray, sums: np.ndarray,
                  hint: str, row_offset: int) -> InputError:
    """``"f.csv: 3,436 rows do not sum to 1 …"`` (a row problem, not a column's)."""
    k = int(mask.sum())
    first = np.flatnonzero(mask)[:3]
    where = ", ".join(f"{int(i) + 1 + row_offset} (sum {sums[i]:.6g})" for i in first)
    tol = rounding_tolerance(len(cols))
    return InputError(f"{src.name}: {k:,} row{'s' if k != 1 else ''} of probabilities "
                      f"{'do' if k != 1 else 'does'} not sum to 1 (within {tol:g} = 1e-4 × "
                      f"{len(cols)} classes); first at row{'s' if len(first) > 1 else ''} "
                      f"{where}; use --renormalize to divide each row by its sum{hint}",
                      rows=[int(i) + 1 + row_offset for i in first])


def settle_problems(src: Source, problems: list[Problem], n: int, drop_invalid: bool,
                     row_offset: int = 0) -> tuple[np.ndarray | None, int, dict[str, int]]:
    """Raise on the first problem, or (``drop_invalid``) return the rows to keep and the counts."""
    if not problems:
        return None, 0, {}
    if not drop_invalid:
        # the problem with the earliest bad row (ties: the order the checks were listed)
        reason, col, text, mask, values = min(problems, key=lambda p: int(np.argmax(p[3])))
        if reason == "row_sum":
            raise row_sum_error(src, col.split("+"), mask, values, text, row_offset)
        raise rows_error(src.name, col, mask, values, text,
                          " (use --drop-invalid to drop invalid rows)", row_offset)
    bad = np.zeros(n, dtype=bool)
    dropped: dict[str, int] = {}
    for reason, _, _, mask, _ in problems:
        dropped[reason] = dropped.get(reason, 0) + int(mask.sum())
        bad |= mask
    if bad.all() and row_offset == 0 and n > 0 and not src.cache.get("streaming"):
        raise InputError(f"{src.name}: every row is invalid; nothing left after --drop-invalid")
    return ~bad, int(bad.sum()), dropped


def weight_values(src: Source, table: pa.Table, column: str,
                  kind: str) -> tuple[FloatArray, list[Problem]]:
    """A ``--weight`` or ``--count`` column as float64 and its problems (missing, not
    numeric, infinite, negative; for counts not a whole number), to be settled with the
    score and label columns' (:func:`settle_problems`: an error naming the first bad row, or
    with ``--drop-invalid`` dropped and counted as ``invalid_weight`` / ``invalid_count``)."""
    values, nonnum, text = scores_array(src, column, table.column(column))
    if text is None and values.shape[0] and values.min() >= 0 and np.isfinite(values.max()) \
            and (kind != "count" or np.array_equal(values, np.floor(values))):
        return values, []                     # (the usual case: one look, nothing to mark)
    reason = f"invalid_{kind}"
    shown = text if text is not None else values
    out: list[Problem] = []
    missing = np.isnan(values) & ~nonnum
    with np.errstate(invalid="ignore"):
        checks = [(nonnum, "not numeric"), (missing, f"missing (a {kind} is required on every "
                                                     "row)"),
                  (np.isinf(values), "infinite"), (values < 0, "negative")]
        if kind == "count":
            checks.append((np.isfinite(values) & (values >= 0) & (values != np.floor(values)),
                           "not a whole number (a count of identical rows; use --weight for "
                           "sampling weights)"))
    for mask, what in checks:
        if mask.any():
            out.append((reason, column, what, mask, shown))
    return np.where(np.isfinite(values), values, 0.0), out


def class_index(src: Source, name: str, col: pa.ChunkedArray,
                 class_names: list[str]) -> tuple[IntArray, np.ndarray, np.ndarray, Any]:
    """Labels as class indices: integers 0..K−1, or names equal to a column suffix."""
    k = len(class_names)
    missing = null_mask(col)
    t = col.type
    if pa.types.is_integer(t) and col.null_count == 0:
        ints = np.asarray(numpy_of(col))          # whole numbers already: no float round trip
        bad = (ints < 0) | (ints >= k)
        idx = np.where(bad, 0, ints).astype(np.int64) if bad.any() else ints.astype(np.int64)
        return idx, missing, bad, ints.astype(np.float64) if bad.any() else ints
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        vals = np.asarray(numpy_of(_compute().cast(col, pa.float64())))
        missing |= np.isnan(vals)
        bad = ~missing & ((vals != np.round(vals)) | (vals < 0) | (vals >= k))
        idx = np.where(missing | bad, 0, vals).astype(np.int64)
        return idx, missing, bad, vals
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        text = _compute().cast(col, pa.string())
        lookup = {c: i for i, c in enumerate(class_names)}
        lookup.update({str(i): i for i in range(k)})
        pos = _compute().index_in(text, value_set=pa.array(list(lookup), pa.string()))
        found = pos.is_valid().to_numpy(zero_copy_only=False)
        where = pos.fill_null(0).to_numpy(zero_copy_only=False)
        idx = np.where(found, np.fromiter(lookup.values(), np.int64, len(lookup))[where], 0)
        bad = ~missing & ~found
        raw = np.asarray(text.to_numpy(zero_copy_only=False), dtype=object) if bad.any() \
            else None                                   # the text is only shown in errors
        return idx.astype(np.int64), missing, bad, raw
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        raise not_utf8(src, name, col)
    raise InputError(f"{src.name}: column {name!r} has type {t}, expected class indices or names",
                     column=name)


def binary_columns(src: Source, table: pa.Table, score_col: str, label_col: str,
                   pos_label: str | None, drop_invalid: bool, row_offset: int = 0,
                   more: list[Problem] | None = None,
                   ) -> tuple[FloatArray, IntArray, np.ndarray | None, int, dict[str, int]]:
    """Validated scores and labels of a table (or a streamed batch starting at ``row_offset``):
    (scores, labels, rows kept or None, rows dropped, dropped by reason).  ``more``: problems
    of other columns the run reads (:func:`weight_values`), settled with these."""
    n = table.num_rows
    scores, nonnum, score_text = scores_array(src, score_col, table.column(score_col))
    labels, lab_missing, lab_nonbin, label_values = labels_array(
        src, label_col, table.column(label_col), pos_label)
    problems = probability_problems(score_col, scores, nonnum, score_text, "score",
                                    source=src.name)
    if lab_missing.any():
        problems.append(("missing_label", label_col, "missing (empty or NaN)", lab_missing, None))
    if lab_nonbin.any():
        problems.append(("non_binary_label", label_col, "not 0 or 1 (labels must be binary; "
                         "use --pos-label for other codings)", lab_nonbin, label_values))
    problems += more or []
    keep, rows_dropped, dropped = settle_problems(src, problems, n, drop_invalid, row_offset)
    if keep is not None:
        scores, labels = scores[keep], labels[keep]
    return scores, labels, keep, rows_dropped, dropped


def row_major(columns: list[FloatArray], n: int) -> np.ndarray:
    """The (n, K) row-major matrix of K columns, filled by blocks of rows that stay in cache
    (~0.5 MB): column by column over all rows, each write touches a new cache line — twice
    as slow at K = 10."""
    k = len(columns)
    out = np.empty((n, k))
    step = max(512, (1 << 16) // max(k, 1))
    for start in range(0, n, step):
        stop = min(start + step, n)
        for j, v in enumerate(columns):
            out[start:stop, j] = v[start:stop]
    return out


def multiclass_columns(src: Source, table: pa.Table, cols: list[str], label_col: str,
                       names: list[str], *, renormalize: bool, drop_invalid: bool,
                       row_offset: int = 0, detected: bool = False,
                       more: list[Problem] | None = None,
                       ) -> tuple[np.ndarray, IntArray, np.ndarray | None, int, dict[str, int],
                                  int]:
    """:func:`class_columns` with the probabilities as one (n, K) row-major matrix."""
    columns, y, keep, dropped_n, dropped, renormalized = class_columns(
        src, table, cols, label_col, names, renormalize=renormalize, drop_invalid=drop_invalid,
        row_offset=row_offset, detected=detected, more=more)
    return (row_major(list(columns), int(y.shape[0])), y, keep, dropped_n, dropped,
            renormalized)


def class_columns(src: Source, table: pa.Table, cols: list[str], label_col: str,
                  names: list[str], *, renormalize: bool, drop_invalid: bool,
                  row_offset: int = 0, detected: bool = False,
                  more: list[Problem] | None = None,
                  ) -> tuple[tuple[FloatArray, ...], IntArray, np.ndarray | None, int,
                             dict[str, int], int]:
    """Validated class probabilities (K columns) and class indices of a table (or a streamed
    batch starting at ``row_offset``): (columns, labels, rows kept or None, rows dropped,
    dropped by reason, rows renormalized).

    A row summing to 1 within 1e-6 is kept as it is; within 1e-4·K (probabilities written
    with rounding, e.g. 6 decimals) it is divided by its sum and counted; further off it is an
    error unless ``renormalize`` (then entries above 1 are accepted too).  ``detected``: the
    columns were found by their names, so the error suggests ``--probs``.

    A row's sum is the sum of its K values as numpy sums a row of the (n, K) matrix (the
    in-memory engine's, whose row sums decide and divide); the columns' running sum, within
    ~K ulps of it, only screens the rows: those further than ``ROW_SUM_TOL / 2`` from 1 (or
    not finite) get the matrix sum."""
    n = table.num_rows
    problems: list[Problem] = []
    columns = []
    for c in cols:
        vals, nonnum, text = scores_array(src, c, table.column(c))
        columns.append(vals)
        problems += probability_problems(c, vals, nonnum, text, "prob", above_one=renormalize,
                                         source=src.name)
    y, missing, bad, raw = class_index(src, label_col, table.column(label_col), names)
    if missing.any():
        problems.append(("missing_label", label_col, "missing (empty or NaN)", missing, None))
    if bad.any():
        problems.append(("unknown_class", label_col,
                         f"not a class (expected 0..{len(cols) - 1} or one of "
                         f"{', '.join(names[:5])}{' …' if len(names) > 5 else ''})", bad, raw))
    total = np.array(columns[0], dtype=np.float64) if columns else np.zeros(n)
    for v in columns[1:]:
        total += v
    rows = np.flatnonzero(~(np.abs(total - 1.0) <= ROW_SUM_TOL / 2))   # NaN: screened in
    renormalized = 0
    if rows.shape[0]:
        M = row_major([v[rows] for v in columns], int(rows.shape[0]))
        finite_rows = np.isfinite(M).all(axis=1) if problems else np.ones(rows.shape[0], bool)
        sums = np.where(finite_rows, M.sum(axis=1), 1.0)
        dev = np.abs(sums - 1.0)
        off = finite_rows & (dev > ROW_SUM_TOL)
        rounded = off & (dev <= rounding_tolerance(len(cols)))
        far = off & ~rounded
        if far.any() and renormalize:
            zero = far & (sums <= 0)
            if zero.any():
                problems.append(("zero_sum_row", ",".join(cols), "rows with probabilities "
                                 "summing to 0 (cannot renormalize)", _at(rows[zero], n), None))
            rounded |= far & ~zero
        elif far.any():
            hint = (f", or --probs to choose the probability columns (found by name: "
                    f"{', '.join(cols[:4])}{', …' if len(cols) > 4 else ''})"
                    if detected else "")
            whole = np.ones(n)
            whole[rows] = sums
            problems.append(("row_sum", "+".join(cols), hint, _at(rows[far], n), whole))
        if rounded.any():
            at, by = rows[rounded], sums[rounded]
            columns = [_divided(v, at, by) for v in columns]
            renormalized = int(at.shape[0])
    problems += more or []
    keep, rows_dropped, dropped = settle_problems(src, problems, n, drop_invalid, row_offset)
    if keep is not None:
        columns, y = [v[keep] for v in columns], y[keep]
    return tuple(columns), y, keep, rows_dropped, dropped, renormalized


def _at(rows: IntArray, n: int) -> np.ndarray:
    """A mask of n rows, true at ``rows``."""
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    return mask


def _divided(v: FloatArray, rows: IntArray, by: FloatArray) -> FloatArray:
    """``v`` with ``v[rows] / by`` at ``rows`` (a copy: ``v`` may be Arrow's read-only
    buffer)."""
    out = np.array(v, dtype=np.float64)
    out[rows] /= by
    return out


def batch_incorrect(src: Source, table: Any, column: str, keep: np.ndarray | None,
                     labels: Any, class_names: list[str] | None, pos_label: str | None,
                     row_offset: int) -> np.ndarray:
    """``--correct-from``: 1[the column's prediction ≠ label] for a validated batch's kept rows
    (class indices or names for multiclass input; for binary input 0/1 or booleans, or the
    label's own coding with --pos-label).  A missing or invalid prediction is an error."""
    col = table.column(column)
    col = col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])
    if class_names is not None:
        pred, missing, bad, raw = class_index(src, column, col, class_names)
        what = "not a class"
    else:
        pred, missing, bad, raw = labels_array(src, column, col, pos_label)
        what = "not a binary prediction"
    wrong = missing | bad
    if keep is not None:
        wrong &= keep
        pred = pred[keep]
    if wrong.any():
        raise rows_error(src.name, column, wrong, raw, what, "", row_offset)
    out: np.ndarray = (pred != np.asarray(labels, dtype=np.int64)).astype(np.int8)
    return out


def incorrect_from(values: np.ndarray, labels: IntArray, *, class_names: list[str] | None,
                   pos_label: str | None, source: str, column: str) -> np.ndarray:
    """``--correct-from`` in memory: int8 1[column's prediction ≠ label] (see
    :func:`batch_incorrect`)."""
    table = pa.table({column: pa.array(values)})
    return batch_incorrect(Source(source, "csv"), table, column, None, labels, class_names,
                            pos_label, 0)



def as_numeric(values: np.ndarray) -> FloatArray | None:
    """An extra column as float64 (NaN for missing values) when it is numeric (integers or
    floats, booleans excluded), else None (text, booleans, dates, mixed objects)."""
    if values.dtype.kind in "fiu":
        return values.astype(np.float64, copy=False)
    if values.dtype.kind != "O":
        return None
    try:
        arr = pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        return None
    return np.asarray(arr.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def categories(values: np.ndarray) -> tuple[list[Any], IntArray]:
    """A categorical column's distinct values as text, sorted, and each row's index into
    them (−1 for a missing value); booleans read ``false``/``true``."""
    if values.dtype.kind == "b":
        values = np.where(values, "true", "false").astype(object)
    try:
        arr = pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        arr = None
    if arr is None or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pa.array([None if v is None or (isinstance(v, float) and v != v) else str(v)
                        for v in values.tolist()], type=pa.string())
    enc = arr.dictionary_encode()
    dictionary = enc.dictionary.to_pylist()
    idx = np.asarray(enc.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    order = sorted(range(len(dictionary)), key=lambda i: dictionary[i])
    rank = np.empty(len(dictionary), dtype=np.int64)
    rank[order] = np.arange(len(dictionary))
    codes = np.where(idx >= 0, rank[np.maximum(idx, 0)] if len(dictionary) else -1, -1)
    return [dictionary[i] for i in order], codes.astype(np.int64)
