"""Reading prediction files: CSV, gzipped CSV, Parquet files and directories, and stdin.

This is the last place a DataFrame or an Arrow table exists: :func:`load_binary` returns
numpy arrays with their provenance.  Every problem becomes an :class:`InputError` whose
message names the file, the column, how many rows are bad and the first ones (rows numbered
from 1 for the first data row, header excluded).
"""

from __future__ import annotations

import fnmatch
import gzip
import io
import os
import re
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from calcheck._typing import FloatArray, IntArray
from calcheck.errors import InputError
from calcheck.validation import describe_rows, invalid_score_masks

SCORE_NAMES = ("score", "scores", "prob", "proba", "probability", "p", "p_hat", "y_prob",
               "y_score", "pred_prob", "prediction")
LABEL_NAMES = ("label", "labels", "y", "y_true", "target", "outcome", "actual")
PROB_COLUMN = re.compile(r"^prob_(\d+)$", re.IGNORECASE)
ROW_SUM_TOL = 1e-6
MULTICLASS_BATCH_VALUES = 2_000_000   # probabilities per streamed multiclass batch (16 MB)
FORMATS = ("csv", "parquet")
PARQUET_MAGIC = b"PAR1"
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class Source:
    """An input opened for reading: where it came from and how to read it."""

    name: str                     # what messages call it ("preds.csv", "<stdin>")
    fmt: str                      # "csv" or "parquet"
    path: str | None = None       # filesystem path (None for stdin)
    data: bytes | None = None     # the bytes of stdin
    compression: str | None = None
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class BinaryData:
    """Scores and labels read from a file, validated, with provenance."""

    scores: FloatArray
    labels: IntArray
    source: str
    fmt: str
    score_column: str
    label_column: str
    rows_read: int
    rows_dropped: int = 0
    dropped_by_reason: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    extras: dict[str, np.ndarray] = field(default_factory=dict)

    def input_dict(self) -> dict[str, Any]:
        """The ``input`` object of the JSON report."""
        n = int(self.scores.shape[0])
        pos = int(self.labels.sum())
        return {
            "path": self.source,
            "format": self.fmt,
            "score_column": self.score_column,
            "label_column": self.label_column,
            "rows_read": self.rows_read,
            "rows_dropped": self.rows_dropped,
            "dropped_by_reason": dict(self.dropped_by_reason),
            "rows_used": n,
            "positives": pos,
            "prevalence": pos / n if n else None,
        }


# ---------------------------------------------------------------------------------------------
# opening


def open_source(path: str, input_format: str | None = None, *,
                stdin: BinaryIO | None = None) -> Source:
    """Resolve ``path`` (a file, a directory of Parquet parts, or ``-`` for stdin)."""
    if input_format is not None and input_format not in FORMATS:
        raise InputError(f"unknown --input-format {input_format!r}; use one of {', '.join(FORMATS)}")
    if path == "-":
        raw = (stdin or sys.stdin.buffer).read()
        if not raw:
            raise InputError("<stdin>: no input (empty)")
        comp = "gzip" if raw[:2] == GZIP_MAGIC else None
        fmt = input_format or ("parquet" if raw[:4] == PARQUET_MAGIC else "csv")
        return Source("<stdin>", fmt, data=raw, compression=comp)
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file or directory")
    if p.is_dir():
        return Source(path, input_format or "parquet", path=path)
    if p.stat().st_size == 0:
        raise InputError(f"{path}: file is empty")
    with open(p, "rb") as fh:
        head = fh.read(4)
    comp = "gzip" if head[:2] == GZIP_MAGIC else None
    if input_format:
        fmt = input_format
    elif head == PARQUET_MAGIC or p.suffix.lower() in (".parquet", ".pq"):
        fmt = "parquet"
    else:
        fmt = "csv"
    return Source(path, fmt, path=path, compression=comp)


def _parquet_dataset(src: Source) -> pads.Dataset:
    try:
        if src.data is not None:
            return pads.dataset(pq.ParquetFile(io.BytesIO(src.data)).read())  # type: ignore[arg-type]
        return pads.dataset(src.path, format="parquet", partitioning="hive")
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"{src.name}: not a readable Parquet file or directory ({_one_line(exc)})") \
            from None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _csv_stream(src: Source) -> Any:
    if src.data is not None:
        buf: Any = pa.BufferReader(src.data)
        return pa.CompressedInputStream(buf, "gzip") if src.compression else buf
    return pa.input_stream(src.path, compression="gzip" if src.compression else None)


def _read_csv(src: Source, *, use_threads: bool = True) -> pa.Table:
    if "csv" in src.cache:                   # a CSV is parsed once per run
        return src.cache["csv"]
    table = _parse_csv(src, use_threads=use_threads)
    src.cache["csv"] = table
    return table


def _parse_csv(src: Source, *, use_threads: bool = True) -> pa.Table:
    bad_rows: list[Any] = []

    def on_invalid(row: Any) -> str:
        bad_rows.append(row)
        return "error"

    try:
        return pacsv.read_csv(
            _csv_stream(src),
            read_options=pacsv.ReadOptions(use_threads=use_threads),
            parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(strings_can_be_null=True),
        )
    except pa.ArrowInvalid as exc:
        msg = str(exc)
        if bad_rows and bad_rows[0].number is None and use_threads:
            return _parse_csv(src, use_threads=False)  # error path: re-parse to number the row
        if bad_rows:
            r = bad_rows[0]
            where = f"row {r.number - 1}" if r.number is not None else "a row"
            raise InputError(
                f"{src.name}: {where} has {r.actual_columns} fields, the header has "
                f"{r.expected_columns} (ragged CSV): {r.text[:60]!r}",
                rows=[r.number - 1] if r.number is not None else None) from None
        if "Empty CSV file" in msg:
            raise InputError(f"{src.name}: file is empty") from None
        raise InputError(f"{src.name}: cannot parse as CSV ({_one_line(exc)})") from None
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(f"{src.name}: cannot read (truncated or corrupt compressed data? "
                         f"{_one_line(exc)})") from None


def read_columns(src: Source, wanted: list[str] | None = None) -> pa.Table:
    """Read the columns ``wanted`` (all when None) as an Arrow table."""
    if src.fmt == "parquet":
        ds = _parquet_dataset(src)
        try:
            return ds.to_table(columns=wanted)
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"{src.name}: cannot read Parquet data ({_one_line(exc)})") from None
    table = _read_csv(src)
    return table.select(wanted) if wanted is not None else table


def column_names(src: Source) -> tuple[list[str], pa.Table | None]:
    """Column names of the source; for CSV the whole table is read once and returned too."""
    if src.fmt == "parquet":
        return list(_parquet_dataset(src).schema.names), None
    table = _read_csv(src)
    return list(table.column_names), table


# ---------------------------------------------------------------------------------------------
# choosing columns


def resolve_column(available: list[str], explicit: str | None, candidates: tuple[str, ...],
                   role: str, flag: str, source: str) -> str:
    """Pick the column for ``role``: the one named with ``flag`` or the one usual name present."""
    if explicit is not None:
        if explicit in available:
            return explicit
        lower = {c.lower(): c for c in available}
        if explicit.lower() in lower:
            return lower[explicit.lower()]
        raise InputError(f"{source}: no column {explicit!r} ({flag}); available columns: "
                         f"{', '.join(available)}", column=explicit)
    found = [c for c in available if c.lower() in candidates]
    if len(found) == 1:
        return found[0]
    if not found:
        raise InputError(f"{source}: cannot find the {role} column (looked for "
                         f"{', '.join(candidates)}); name it with {flag}; available columns: "
                         f"{', '.join(available)}")
    raise InputError(f"{source}: several columns could be the {role} column "
                     f"({', '.join(found)}); choose one with {flag}")


# ---------------------------------------------------------------------------------------------
# converting and validating


def _utf8_problem(col: pa.ChunkedArray) -> tuple[int, bytes] | None:
    for i, v in enumerate(col.to_pylist()):
        if isinstance(v, bytes):
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                return i, v
    return None


def _not_utf8(src: Source, name: str, col: pa.ChunkedArray) -> InputError:
    bad = _utf8_problem(col)
    where = f"; first at row {bad[0] + 1} ({bad[1][:30]!r})" if bad else ""
    return InputError(f"{src.name}: column {name!r} holds bytes that are not valid UTF-8{where}; "
                      "re-encode the file as UTF-8", column=name,
                      rows=[bad[0] + 1] if bad else None)


def _scores_array(src: Source, name: str,
                  col: pa.ChunkedArray) -> tuple[FloatArray, np.ndarray, np.ndarray | None]:
    """Scores as float64 (nulls → NaN), a mask of the non-numeric entries and their text."""
    t = col.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        raise _not_utf8(src, name, col)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        arr = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
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


def _labels_array(src: Source, name: str, col: pa.ChunkedArray,
                  pos_label: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """Labels as 0/1 int64, masks of missing and non-binary entries, and the raw values."""
    t = col.type
    n = len(col)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        raise _not_utf8(src, name, col)
    missing = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_null(t):
        return np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool), np.zeros(n, dtype=bool), None
    if pa.types.is_boolean(t):
        vals = np.asarray(col.fill_null(False).to_numpy(zero_copy_only=False))
        if pos_label is not None:
            pos = pos_label.strip().lower() in ("1", "true", "t", "yes")
            return (vals == pos).astype(np.int64), missing, np.zeros(n, dtype=bool), None
        return vals.astype(np.int64), missing, np.zeros(n, dtype=bool), None
    numeric = pa.types.is_integer(t) or pa.types.is_floating(t)
    if numeric:
        vals = np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False))
        missing = missing | np.isnan(vals)
        if pos_label is None:
            nonbin = ~missing & (vals != 0) & (vals != 1)
            return np.where(nonbin | missing, 0, vals).astype(np.int64), missing, nonbin, vals
        try:
            pos_value = float(pos_label)
        except ValueError:
            raise InputError(f"{src.name}: --pos-label {pos_label!r} is not a value of the numeric "
                             f"column {name!r}", column=name) from None
        return (*_pos_label_split(src, name, vals, missing, pos_value, pos_label), vals)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        vals = np.asarray(pc.cast(col, pa.string()).to_numpy(zero_copy_only=False), dtype=object)
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
    y = np.zeros(len(vals), dtype=np.int64)
    y[~missing] = (present == pos_value).astype(np.int64)
    return y, missing, np.zeros(len(vals), dtype=bool)


Problem = tuple[str, str, str, np.ndarray, Any]   # reason, column, text, row mask, values


def _rows_error(source: str, column: str, mask: np.ndarray, values: Any, what: str,
                hint: str = "", row_offset: int = 0) -> InputError:
    """``"f.csv: column 'x': 3 values not numeric; first at rows 2, 5, 9 (e.g. 'a')"``.

    ``row_offset``: rows before this batch (streaming), so row numbers stay global.
    """
    k = int(mask.sum())
    idx = np.flatnonzero(mask)[:3]
    return InputError(f"{source}: column {column!r}: {k} value{'s' if k > 1 else ''} {what}; "
                      f"{describe_rows(mask, values, row_base=1 + row_offset)}{hint}",
                      column=column, rows=[int(i) + 1 + row_offset for i in idx])

_SCORE_WHAT = {"missing": "missing (empty or NaN)", "infinite": "infinite",
               "out_of_range": "outside [0, 1]"}


def _probability_problems(column: str, values: FloatArray, nonnum: np.ndarray, text: Any,
                          kind: str) -> list[Problem]:
    """Non-numeric, missing, infinite and out-of-range entries of a probability column."""
    out: list[Problem] = []
    if nonnum.any():
        out.append((f"non_numeric_{kind}", column, "not numeric", nonnum, text))
    elif values.size == 0 or (values.min() >= 0.0 and values.max() <= 1.0):
        return out                          # NaN fails both comparisons: all finite in [0, 1]
    for reason, mask in invalid_score_masks(values).items():
        mask = mask & ~nonnum
        if mask.any():
            out.append((f"{reason}_{kind}", column, _SCORE_WHAT[reason], mask, values))
    return out


def _settle_problems(src: Source, problems: list[Problem], n: int, drop_invalid: bool,
                     row_offset: int = 0) -> tuple[np.ndarray | None, int, dict[str, int]]:
    """Raise on the first problem, or (``drop_invalid``) return the rows to keep and the counts."""
    if not problems:
        return None, 0, {}
    if not drop_invalid:
        # the problem with the earliest bad row (ties: the order the checks were listed)
        _, col, text, mask, values = min(problems, key=lambda p: int(np.argmax(p[3])))
        raise _rows_error(src.name, col, mask, values, text,
                          " (use --drop-invalid to drop invalid rows)", row_offset)
    bad = np.zeros(n, dtype=bool)
    dropped: dict[str, int] = {}
    for reason, _, _, mask, _ in problems:
        dropped[reason] = dropped.get(reason, 0) + int(mask.sum())
        bad |= mask
    if bad.all() and row_offset == 0 and n > 0 and not src.cache.get("streaming"):
        raise InputError(f"{src.name}: every row is invalid; nothing left after --drop-invalid")
    return ~bad, int(bad.sum()), dropped


def _extras(src: Source, table: pa.Table, available: list[str], numeric: list[str],
            raw: list[str]) -> dict[str, np.ndarray]:
    """Extra columns: ``numeric`` as float64 (missing → NaN, text → error), ``raw`` as they are."""
    out: dict[str, np.ndarray] = {}
    for name in numeric:
        vals, nonnum, text = _scores_array(src, name, table.column(name))
        if nonnum.any():
            raise _rows_error(src.name, name, nonnum, text, "not numeric",
                              " (--var needs a numeric column)")
        out[name] = vals
    for name in raw:
        if name not in out:
            out[name] = np.asarray(table.column(name).to_numpy(zero_copy_only=False))
    return out


def _filtered(src: Source, table: pa.Table | None, columns: list[str],
              where: str | None) -> pa.Table:
    """The needed columns, with the ``--where`` filter applied (pushed down for Parquet)."""
    cols = list(dict.fromkeys(columns))
    expr = parse_where(where) if where else None
    if table is None:                                       # Parquet: read only what is needed
        if expr is None:
            return read_columns(src, cols)
        try:
            return _parquet_dataset(src).to_table(columns=cols, filter=expr)
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"{src.name}: cannot apply --where ({_one_line(exc)})") from None
    if expr is None:
        return table
    try:
        return table.filter(expr)
    except (pa.ArrowException, TypeError) as exc:
        raise InputError(f"{src.name}: cannot apply --where ({_one_line(exc)})") from None


def _check_extra_names(available: list[str], names: list[str], source: str) -> None:
    for name in names:
        if name not in available:
            raise InputError(f"{source}: no column {name!r}; available columns: "
                             f"{', '.join(available)}", column=name)


def binary_columns(src: Source, table: pa.Table, score_col: str, label_col: str,
                   pos_label: str | None, drop_invalid: bool, row_offset: int = 0,
                   ) -> tuple[FloatArray, IntArray, np.ndarray | None, int, dict[str, int]]:
    """Validated scores and labels of a table (or a streamed batch starting at ``row_offset``):
    (scores, labels, rows kept or None, rows dropped, dropped by reason)."""
    n = table.num_rows
    scores, nonnum, score_text = _scores_array(src, score_col, table.column(score_col))
    labels, lab_missing, lab_nonbin, label_values = _labels_array(
        src, label_col, table.column(label_col), pos_label)
    problems = _probability_problems(score_col, scores, nonnum, score_text, "score")
    if lab_missing.any():
        problems.append(("missing_label", label_col, "missing (empty or NaN)", lab_missing, None))
    if lab_nonbin.any():
        problems.append(("non_binary_label", label_col, "not 0 or 1 (labels must be binary; "
                         "use --pos-label for other codings)", lab_nonbin, label_values))
    keep, rows_dropped, dropped = _settle_problems(src, problems, n, drop_invalid, row_offset)
    if keep is not None:
        scores, labels = scores[keep], labels[keep]
    return scores, labels, keep, rows_dropped, dropped


def load_binary(path: str | Source, *, score: str | None = None, label: str | None = None,
                pos_label: str | None = None, input_format: str | None = None,
                drop_invalid: bool = False, stdin: BinaryIO | None = None,
                numeric_extras: list[str] | None = None,
                raw_extras: list[str] | None = None, where: str | None = None) -> BinaryData:
    """Read, select and validate the score and label columns of a binary prediction file.

    Invalid rows (missing, non-numeric, infinite or out-of-range scores; missing or non-binary
    labels) raise :class:`InputError` naming the first ones, unless ``drop_invalid`` is set:
    then they are removed and counted by reason.
    """
    src = path if isinstance(path, Source) else open_source(path, input_format, stdin=stdin)
    available, table = column_names(src)
    score_col = resolve_column(available, score, SCORE_NAMES, "score", "--score", src.name)
    label_col = resolve_column(available, label, LABEL_NAMES, "label", "--label", src.name)
    if score_col == label_col:
        raise InputError(f"{src.name}: the score and label columns are the same ({score_col!r})")
    numeric_extras, raw_extras = list(numeric_extras or []), list(raw_extras or [])
    _check_extra_names(available, numeric_extras + raw_extras, src.name)
    table = _filtered(src, table, [score_col, label_col, *numeric_extras, *raw_extras], where)
    n = table.num_rows
    if n == 0:
        raise InputError(f"{src.name}: no data rows (header only?)")
    extras = _extras(src, table, available, numeric_extras, raw_extras)
    scores, labels, keep, rows_dropped, dropped = binary_columns(
        src, table, score_col, label_col, pos_label, drop_invalid)
    del table
    if keep is not None:
        extras = {k: v[keep] for k, v in extras.items()}
    warnings = []
    pos = int(labels.sum())
    if pos == 0 or pos == labels.shape[0]:
        only = "1" if pos else "0"
        warnings.append(f"{src.name}: column {label_col!r} holds only one class (all {only}); "
                        "calibration metrics are still computed but say little")
    return BinaryData(scores=np.ascontiguousarray(scores, dtype=np.float64),
                      labels=np.ascontiguousarray(labels, dtype=np.int64),
                      source=src.name, fmt=src.fmt, score_column=score_col,
                      label_column=label_col, rows_read=n, rows_dropped=rows_dropped,
                      dropped_by_reason=dropped, warnings=warnings, extras=extras)


def atomic_write(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: never a half file."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write output ({_one_line(exc)})") from None


# ---------------------------------------------------------------------------------------------
# multiclass input (SPEC §1)


@dataclass(frozen=True)
class MulticlassData:
    """K class-probability columns and class-index labels, validated, with provenance."""

    probs: np.ndarray                 # (n, K) float64
    labels: IntArray                  # class index 0..K−1
    class_names: list[str]
    source: str
    fmt: str
    prob_columns: list[str]
    label_column: str
    rows_read: int
    rows_dropped: int = 0
    dropped_by_reason: dict[str, int] = field(default_factory=dict)
    rows_renormalized: int = 0
    warnings: list[str] = field(default_factory=list)
    extras: dict[str, np.ndarray] = field(default_factory=dict)

    def input_dict(self) -> dict[str, Any]:
        """The ``input`` object of the JSON report."""
        return {
            "path": self.source, "format": self.fmt, "kind": "multiclass",
            "prob_columns": list(self.prob_columns), "classes": list(self.class_names),
            "label_column": self.label_column, "rows_read": self.rows_read,
            "rows_dropped": self.rows_dropped, "dropped_by_reason": dict(self.dropped_by_reason),
            "rows_renormalized": self.rows_renormalized, "rows_used": int(self.labels.shape[0]),
        }


def _natural_key(name: str) -> tuple[str, int, str]:
    m = re.search(r"(\d+)$", name)
    return (name[: m.start()], int(m.group(1)), "") if m else (name, -1, name)


def find_prob_columns(available: list[str]) -> list[str] | None:
    """The auto-detected ``prob_0 .. prob_{K−1}`` columns (K ≥ 2, contiguous), else None."""
    found = {int(m.group(1)): c for c in available if (m := PROB_COLUMN.match(c))}
    if len(found) < 2 or sorted(found) != list(range(len(found))):
        return None
    return [found[k] for k in range(len(found))]


def resolve_prob_columns(available: list[str], probs: list[str] | None, source: str) -> list[str]:
    """Probability columns named by ``--probs`` (names, comma lists or globs), or auto-detected."""
    if not probs:
        cols = find_prob_columns(available)
        if cols is None:
            raise InputError(f"{source}: no probability columns prob_0..prob_{{K-1}} found; name "
                             f"them with --probs; available columns: {', '.join(available)}")
        return cols
    cols: list[str] = []
    for item in probs:
        for part in (p.strip() for p in item.split(",")):
            if not part:
                continue
            if any(ch in part for ch in "*?["):
                hits = sorted((c for c in available if fnmatch.fnmatchcase(c, part)),
                              key=_natural_key)
                if not hits:
                    raise InputError(f"{source}: --probs {part!r} matches no column; available "
                                     f"columns: {', '.join(available)}")
                cols += [h for h in hits if h not in cols]
            elif part in available:
                if part not in cols:
                    cols.append(part)
            else:
                raise InputError(f"{source}: no column {part!r} (--probs); available columns: "
                                 f"{', '.join(available)}", column=part)
    if len(cols) < 2:
        raise InputError(f"{source}: --probs names {len(cols)} column(s); multiclass input needs "
                         "at least 2")
    return cols


def _class_names(cols: list[str]) -> list[str]:
    prefix = os.path.commonprefix(cols)  # noqa: RUF071 - character prefix of column names
    cut = prefix.rfind("_") + 1 if "_" in prefix else len(prefix)
    names = [c[cut:] for c in cols]
    return names if all(names) and len(set(names)) == len(names) else list(cols)


def _class_index(src: Source, name: str, col: pa.ChunkedArray,
                 class_names: list[str]) -> tuple[IntArray, np.ndarray, np.ndarray, Any]:
    """Labels as class indices: integers 0..K−1, or names equal to a column suffix."""
    k = len(class_names)
    missing = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        vals = np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False))
        missing |= np.isnan(vals)
        bad = ~missing & ((vals != np.round(vals)) | (vals < 0) | (vals >= k))
        idx = np.where(missing | bad, 0, vals).astype(np.int64)
        return idx, missing, bad, vals
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        text = pc.cast(col, pa.string())
        lookup = {c: i for i, c in enumerate(class_names)}
        lookup.update({str(i): i for i in range(k)})
        pos = pc.index_in(text, value_set=pa.array(list(lookup), pa.string()))
        found = pos.is_valid().to_numpy(zero_copy_only=False)
        where = pos.fill_null(0).to_numpy(zero_copy_only=False)
        idx = np.where(found, np.fromiter(lookup.values(), np.int64, len(lookup))[where], 0)
        bad = ~missing & ~found
        raw = np.asarray(text.to_numpy(zero_copy_only=False), dtype=object) if bad.any() \
            else None                                   # the text is only shown in errors
        return idx.astype(np.int64), missing, bad, raw
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        raise _not_utf8(src, name, col)
    raise InputError(f"{src.name}: column {name!r} has type {t}, expected class indices or names",
                     column=name)


def multiclass_columns(src: Source, table: pa.Table, cols: list[str], label_col: str,
                       names: list[str], *, renormalize: bool, drop_invalid: bool,
                       row_offset: int = 0) -> tuple[np.ndarray, IntArray, np.ndarray | None,
                                                     int, dict[str, int], int]:
    """Validated class probabilities (n, K) and class indices of a table (or a streamed batch
    starting at ``row_offset``): (probs, labels, rows kept or None, rows dropped, dropped by
    reason, rows renormalized)."""
    n = table.num_rows
    P = np.empty((n, len(cols)))
    problems: list[Problem] = []
    for j, c in enumerate(cols):
        vals, nonnum, text = _scores_array(src, c, table.column(c))
        P[:, j] = vals
        problems += _probability_problems(c, vals, nonnum, text, "prob")
    y, missing, bad, raw = _class_index(src, label_col, table.column(label_col), names)
    if missing.any():
        problems.append(("missing_label", label_col, "missing (empty or NaN)", missing, None))
    if bad.any():
        problems.append(("unknown_class", label_col,
                         f"not a class (expected 0..{len(cols) - 1} or one of "
                         f"{', '.join(names[:5])}{' …' if len(names) > 5 else ''})", bad, raw))
    if problems:
        finite_rows = np.isfinite(P).all(axis=1)
        sums = np.where(finite_rows, P.sum(axis=1), 1.0)
    else:                                   # every column finite in [0, 1]
        finite_rows = np.ones(n, dtype=bool)
        sums = P.sum(axis=1)
    off = finite_rows & (np.abs(sums - 1.0) > ROW_SUM_TOL)
    renormalized = 0
    if off.any() and renormalize:
        zero = off & (sums <= 0)
        if zero.any():
            problems.append(("zero_sum_row", ",".join(cols), "rows with probabilities summing "
                             "to 0 (cannot renormalize)", zero, None))
        fix = off & ~zero
        P[fix] /= sums[fix, None]
        renormalized = int(fix.sum())
    elif off.any():
        problems.append(("row_sum", "+".join(cols[:3]) + ("+…" if len(cols) > 3 else ""),
                         "rows that do not sum to 1 within 1e-6 (use --renormalize)", off, sums))
    keep, rows_dropped, dropped = _settle_problems(src, problems, n, drop_invalid, row_offset)
    if keep is not None:
        P, y = P[keep], y[keep]
    return P, y, keep, rows_dropped, dropped, renormalized


def load_multiclass(path: str | Source, *, probs: list[str] | None = None, label: str | None = None,
                    input_format: str | None = None, renormalize: bool = False,
                    drop_invalid: bool = False, stdin: BinaryIO | None = None,
                    numeric_extras: list[str] | None = None,
                    raw_extras: list[str] | None = None,
                    where: str | None = None) -> MulticlassData:
    """Read and validate K probability columns and a class label (SPEC §1).

    Probabilities must be finite and in [0, 1] and each row must sum to 1 within 1e-6;
    ``renormalize`` divides rows by their sum instead (the number of rows changed by more than
    the tolerance is reported).  Labels are class indices 0..K−1 or class names equal to the
    probability columns' suffixes (``prob_cat`` → ``cat``).
    """
    src = path if isinstance(path, Source) else open_source(path, input_format, stdin=stdin)
    available, table = column_names(src)
    cols = resolve_prob_columns(available, probs, src.name)
    label_col = resolve_column([c for c in available if c not in cols], label, LABEL_NAMES,
                               "label", "--label", src.name)
    numeric_extras, raw_extras = list(numeric_extras or []), list(raw_extras or [])
    _check_extra_names(available, numeric_extras + raw_extras, src.name)
    table = _filtered(src, table, [*cols, label_col, *numeric_extras, *raw_extras], where)
    n = table.num_rows
    if n == 0:
        raise InputError(f"{src.name}: no data rows (header only?)")
    names = _class_names(cols)
    extras = _extras(src, table, available, numeric_extras, raw_extras)
    P, y, keep, rows_dropped, dropped, renormalized = multiclass_columns(
        src, table, cols, label_col, names, renormalize=renormalize, drop_invalid=drop_invalid)
    del table
    if keep is not None:
        extras = {k: v[keep] for k, v in extras.items()}
    return MulticlassData(probs=np.ascontiguousarray(P), labels=y, class_names=names,
                          source=src.name, fmt=src.fmt, prob_columns=cols, label_column=label_col,
                          rows_read=n, rows_dropped=rows_dropped, dropped_by_reason=dropped,
                          rows_renormalized=renormalized, extras=extras)


def _is_multiclass(available: list[str], score: str | None, probs: list[str] | None) -> bool:
    """--probs, or auto-detected prob_0..prob_{K−1} columns without a score column."""
    if probs:
        return True
    if score is not None or any(c.lower() in SCORE_NAMES for c in available):
        return False
    return find_prob_columns(available) is not None


def input_kind(src: Source, *, score: str | None, probs: list[str] | None) -> str:
    """``"binary"`` or ``"multiclass"``: --probs or auto-detected prob_0..prob_{K−1} columns
    without a score column mean multiclass; everything else is read as binary."""
    if probs or score is not None:                  # decided without reading the columns
        return "multiclass" if probs else "binary"
    return "multiclass" if _is_multiclass(column_names(src)[0], score, probs) else "binary"


def incorrect_from(values: np.ndarray, labels: IntArray, *, class_names: list[str] | None,
                   pos_label: str | None, source: str, column: str) -> np.ndarray:
    """``--correct-from`` in memory: int8 1[column's prediction ≠ label] (see
    :func:`_batch_incorrect`)."""
    table = pa.table({column: pa.array(values)})
    return _batch_incorrect(Source(source, "csv"), table, column, None, labels, class_names,
                            pos_label, 0)


# ---------------------------------------------------------------------------------------------
# streaming (bounded memory)

_WHERE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(==|=|!=|<=|>=|<|>)\s*(.+?)\s*$")


def parse_where(text: str) -> Any:
    """A ``--where`` filter — comparisons joined by ``and`` — as a pyarrow dataset expression.

    Values are numbers or quoted strings: ``"split = 'test' and score >= 0.1"``.
    """
    ops = {"==": "__eq__", "=": "__eq__", "!=": "__ne__", "<": "__lt__", "<=": "__le__",
           ">": "__gt__", ">=": "__ge__"}
    expr = None
    for part in re.split(r"\s+and\s+", text.strip(), flags=re.IGNORECASE):
        m = _WHERE.match(part)
        if not m:
            raise InputError(f"cannot parse --where {part!r}; write COL OP VALUE joined by 'and' "
                             "(OP one of = != < <= > >=; text values in quotes)")
        col, op, raw = m.groups()
        if raw[:1] in "'\"" and raw[-1:] == raw[:1] and len(raw) >= 2:
            value: Any = raw[1:-1]
        else:
            try:
                value = int(raw)
            except ValueError:
                try:
                    value = float(raw)
                except ValueError:
                    raise InputError(f"--where {part!r}: {raw!r} is neither a number nor a "
                                     "quoted string") from None
        cond = getattr(pads.field(col), ops[op])(value)
        expr = cond if expr is None else expr & cond
    return expr


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

    def tally(self, rows: int, dropped_n: int = 0, dropped: dict[str, int] | None = None,
              renormalized: int = 0) -> None:
        """Count one validated batch."""
        self.rows_read += rows
        self.rows_dropped += dropped_n
        self.rows_renormalized += renormalized
        for k, v in (dropped or {}).items():
            self.dropped_by_reason[k] = self.dropped_by_reason.get(k, 0) + v
        self.batches += 1


def _batch_groups(table: Any, by: str, keep: np.ndarray | None) -> tuple[list[str], np.ndarray]:
    """The ``--by`` codes of a validated batch's kept rows."""
    g = table.column(by)
    return group_codes(g if keep is None else g.filter(pa.array(keep)))


def _batch_numeric(src: Source, table: Any, names: tuple[str, ...], keep: np.ndarray | None,
                   row_offset: int) -> FloatArray:
    """The ``--var`` columns of a validated batch's kept rows as an (n, V) float64 matrix
    (missing → NaN); text that is not a number is an error naming the stream's row."""
    out = []
    for name in names:
        col = table.column(name)
        vals, nonnum, text = _scores_array(src, name, col if isinstance(col, pa.ChunkedArray)
                                           else pa.chunked_array([col]))
        if nonnum.any():
            raise _rows_error(src.name, name, nonnum, text, "not numeric",
                              " (--var needs a numeric column)", row_offset)
        out.append(vals if keep is None else vals[keep])
    return np.ascontiguousarray(np.column_stack(out)) if out else np.zeros((0, 0))


def _batch_incorrect(src: Source, table: Any, column: str, keep: np.ndarray | None,
                     labels: Any, class_names: list[str] | None, pos_label: str | None,
                     row_offset: int) -> np.ndarray:
    """``--correct-from``: 1[the column's prediction ≠ label] for a validated batch's kept rows
    (class indices or names for multiclass input; for binary input 0/1 or booleans, or the
    label's own coding with --pos-label).  A missing or invalid prediction is an error."""
    col = table.column(column)
    col = col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])
    if class_names is not None:
        pred, missing, bad, raw = _class_index(src, column, col, class_names)
        what = "not a class"
    else:
        pred, missing, bad, raw = _labels_array(src, column, col, pos_label)
        what = "not a binary prediction"
    wrong = missing | bad
    if keep is not None:
        wrong &= keep
        pred = pred[keep]
    if wrong.any():
        raise _rows_error(src.name, column, wrong, raw, what, "", row_offset)
    return (pred != np.asarray(labels, dtype=np.int64)).astype(np.int8)


@dataclass(frozen=True)
class BatchExtras:
    """What a pass wants with each batch besides (scores, labels): the ``--by`` codes, the
    ``--var`` matrix and ``--correct-from``'s incorrect flags, in that order."""

    by: str | None = None
    numeric: tuple[str, ...] = ()
    correct_from: str | None = None

    @classmethod
    def of(cls, spec: Any) -> BatchExtras:
        return cls(getattr(spec, "by", None), tuple(getattr(spec, "numeric", ())),
                   getattr(spec, "correct_from", None))

    @property
    def columns(self) -> list[str]:
        return [*([self.by] if self.by else []), *self.numeric,
                *([self.correct_from] if self.correct_from else [])]


def _with_extras(out: tuple[Any, ...], src: Source, table: Any, extras: BatchExtras,
                 keep: np.ndarray | None, row_offset: int, labels: Any,
                 class_names: list[str] | None, pos_label: str | None) -> tuple[Any, ...]:
    """A validated batch with the extras its pass asked for."""
    if extras.by is not None:
        out = (*out, _batch_groups(table, extras.by, keep))
    if extras.numeric:
        out = (*out, _batch_numeric(src, table, extras.numeric, keep, row_offset))
    if extras.correct_from:
        out = (*out, _batch_incorrect(src, table, extras.correct_from, keep, labels, class_names,
                                      pos_label, row_offset))
    return out


def _fast_binary(batch: pa.RecordBatch, score_col: str,
                 label_col: str) -> tuple[FloatArray, np.ndarray] | None:
    """Zero-copy (scores, labels) of a batch that is plainly valid — float64 scores in [0, 1]
    and integer or boolean 0/1 labels, no nulls — or None (then the full checks run and name
    the first bad row)."""
    sc, lc = batch.column(score_col), batch.column(label_col)
    if sc.type != pa.float64() or sc.null_count or lc.null_count:
        return None
    if not (pa.types.is_integer(lc.type) or pa.types.is_boolean(lc.type)):
        return None
    s = sc.to_numpy(zero_copy_only=True)
    if not (s.min() >= 0.0 and s.max() <= 1.0):        # NaN fails both comparisons
        return None
    y = lc.to_numpy(zero_copy_only=False)
    if y.dtype != np.bool_ and (y.min() < 0 or y.max() > 1):
        return None
    return s, y


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

    @property
    def columns(self) -> list[str]:
        """The prediction and label columns a scan reads."""
        if self.prob_columns:
            return [*self.prob_columns, self.label_column]
        return [self.score_column, self.label_column]

    def batch_size(self, batch_rows: int) -> int:
        """Rows per batch: ``batch_rows``, and for K classes at most ~MULTICLASS_BATCH_VALUES
        probabilities (a batch is an (n, K) float64 matrix)."""
        if not self.prob_columns:
            return batch_rows
        return min(batch_rows, max(1024, MULTICLASS_BATCH_VALUES // len(self.prob_columns)))


def plan_stream(path: str, *, score: str | None = None, label: str | None = None,
                where: str | None = None, probs: list[str] | None = None,
                renormalize: bool = False) -> StreamPlan:
    """Open a Parquet file, directory or hive-partitioned tree for streaming: binary scores,
    or (``probs``, or auto-detected prob_0..prob_{K−1} columns without a score column) K class
    probabilities, as :func:`input_kind` decides for in-memory reads."""
    src = open_source(path, "parquet")
    if src.data is not None:
        raise InputError("--engine stream/dask reads Parquet files or directories, not stdin "
                         "(--engine memory reads stdin)")
    try:
        ds = pads.dataset(src.path, format="parquet", partitioning="hive")
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"{src.name}: not a readable Parquet file or directory "
                         f"({_one_line(exc)}); --engine stream/dask reads Parquet only, "
                         "--engine memory reads CSV too") from None
    available = list(ds.schema.names)
    cols: list[str] | None = None
    if _is_multiclass(available, score, probs):
        cols = resolve_prob_columns(available, probs, src.name)
        score_col = ""
        label_col = resolve_column([c for c in available if c not in cols], label, LABEL_NAMES,
                                   "label", "--label", src.name)
    else:
        score_col = resolve_column(available, score, SCORE_NAMES, "score", "--score", src.name)
        label_col = resolve_column(available, label, LABEL_NAMES, "label", "--label", src.name)
        if score_col == label_col:
            raise InputError(f"{src.name}: the score and label columns are the same "
                             f"({score_col!r})")
    flt = parse_where(where) if where else None
    try:
        fragments = list(ds.get_fragments(filter=flt))
    except pa.ArrowException as exc:
        raise InputError(f"{src.name}: cannot scan the dataset ({_one_line(exc)})") from None
    return StreamPlan(src.name, fragments, score_col, label_col, flt, ds.schema, cols,
                      _class_names(cols) if cols else None, renormalize)


def fragment_batches(plan: StreamPlan, fragment: Any, batch_rows: int,
                     extras: BatchExtras = BatchExtras()) -> Any:
    """Record batches of one fragment (one file), read one row group at a time (with the
    columns of ``extras``)."""
    columns = list(dict.fromkeys([*plan.columns, *extras.columns]))
    try:
        yield from fragment.to_batches(schema=plan.schema, columns=columns,
                                       filter=plan.filter, batch_size=plan.batch_size(batch_rows),
                                       batch_readahead=0, fragment_readahead=0)
    except pa.ArrowException as exc:
        raise InputError(f"{fragment.path}: cannot scan ({_one_line(exc)})") from None


def group_codes(column: Any) -> tuple[list[str], np.ndarray]:
    """The ``--by`` keys of a batch column as (distinct keys, uint8/int32 code per row), keyed as
    the in-memory engine keys groups: ``str(value)``, and "(missing)" for null or NaN."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    enc = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    values = enc.dictionary.to_pylist()
    keys = ["(missing)" if v is None or (isinstance(v, float) and v != v) else str(v)
            for v in values]
    codes = enc.indices.fill_null(len(keys)).to_numpy(zero_copy_only=False)
    if enc.indices.null_count:
        keys.append("(missing)")
    return keys, codes


def validated_batches(plan: StreamPlan, batches: Any, *, name: str,
                      pos_label: str | None = None, drop_invalid: bool = False,
                      stats: StreamStats | None = None, extras: BatchExtras = BatchExtras(),
                      view: str = "top") -> Any:
    """(scores, labels) of record batches, validated — then, as ``extras`` asks, (group keys,
    group code per row) of ``--by``, the (n, V) float64 matrix of the ``--var`` columns and
    ``--correct-from``'s int8 incorrect flags; error rows are numbered from 1 over all the batches given (the
    rows after the ``--where`` filter), and the message names ``name``.

    Multiclass input (``plan.prob_columns``) is validated as in memory (SPEC §1) and given as
    its top-label view (confidence, correct) with ``view="top"``, or as (probabilities (n, K),
    class indices) with ``view="classes"``."""
    src = Source(name=name, fmt="parquet", path=name)
    src.cache["streaming"] = True
    st = stats if stats is not None else StreamStats()
    st.score_column, st.label_column = plan.score_column, plan.label_column
    if plan.prob_columns:
        yield from _multiclass_batches(plan, batches, src, st, drop_invalid, extras, view)
        return
    sc, lc = plan.score_column, plan.label_column
    for batch in batches:
        if batch.num_rows == 0:
            continue
        offset = st.rows_read
        fast = None if pos_label is not None else _fast_binary(batch, sc, lc)
        if fast is not None:
            st.tally(batch.num_rows)
            yield _with_extras(fast, src, batch, extras, None, offset, fast[1], None, pos_label)
            continue
        table = pa.Table.from_batches([batch])
        s, y, keep, dropped_n, dropped = binary_columns(src, table, sc, lc, pos_label,
                                                        drop_invalid, offset)
        st.tally(batch.num_rows, dropped_n, dropped)
        if s.shape[0]:
            out = np.ascontiguousarray(s), np.ascontiguousarray(y, dtype=np.int8)
            yield _with_extras(out, src, table, extras, keep, offset, out[1], None, pos_label)


def _multiclass_batches(plan: StreamPlan, batches: Any, src: Source, st: StreamStats,
                        drop_invalid: bool, extras: BatchExtras, view: str) -> Any:
    """The multiclass branch of :func:`validated_batches`."""
    from calcheck.multiclass import top_label_view

    assert plan.prob_columns is not None and plan.class_names is not None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch])
        offset = st.rows_read
        P, y, keep, dropped_n, dropped, renormalized = multiclass_columns(
            src, table, plan.prob_columns, plan.label_column, plan.class_names,
            renormalize=plan.renormalize, drop_invalid=drop_invalid, row_offset=offset)
        st.tally(batch.num_rows, dropped_n, dropped, renormalized)
        if not y.shape[0]:
            continue
        if view == "top":
            conf, correct = top_label_view(P, y)
            out: tuple[Any, ...] = (conf, correct.astype(np.int8))
        else:
            out = (P, y)
        yield _with_extras(out, src, table, extras, keep, offset, y, plan.class_names, None)


def _prefetch(items: Any, depth: int = 2) -> Any:
    """Iterate ``items`` in a background thread, at most ``depth`` ahead: Arrow decodes the next
    row group while the caller computes on this one, and memory stays bounded."""
    import queue
    import threading

    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put((True, item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((True, done))
        except BaseException as exc:                      # handed to the consumer
            q.put((False, exc))

    th = threading.Thread(target=produce, daemon=True)
    th.start()
    try:
        while True:
            ok, item = q.get()
            if not ok:
                raise item
            if item is done:
                return
            yield item
    finally:
        stop.set()


def stream_binary(path: str, *, score: str | None = None, label: str | None = None,
                  pos_label: str | None = None, batch_rows: int = 1_000_000,
                  where: str | None = None, drop_invalid: bool = False,
                  stats: StreamStats | None = None, plan: StreamPlan | None = None,
                  extras: BatchExtras = BatchExtras(), view: str = "top") -> Any:
    """Validated (scores, labels) batches of a Parquet file, directory or hive-partitioned tree,
    read file by file through ``pyarrow.dataset`` in bounded memory (one row group decoding
    ahead of the computation).

    ``where`` is pushed down to the scan (partition pruning and row-group statistics).  Row
    numbers in error messages count the rows of the (filtered) stream.
    """
    if plan is None:
        plan = plan_stream(path, score=score, label=label, where=where)
    raw = (b for fr in plan.fragments for b in fragment_batches(plan, fr, batch_rows, extras))
    yield from validated_batches(plan, _prefetch(raw), name=plan.name, pos_label=pos_label,
                                 drop_invalid=drop_invalid, stats=stats, extras=extras,
                                 view=view)
