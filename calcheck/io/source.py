"""Opening an input: a CSV or Parquet file, a directory of Parquet parts, stdin, or a table that
is already in memory (a pandas or polars DataFrame, a pyarrow Table).

:func:`open_source` sniffs the format from the first bytes (Parquet's ``PAR1``, gzip's magic;
JSON, zstd, bzip2, xz and zip files are named as such instead of being parsed as garbage) and
:func:`read_columns` reads the columns a run needs as an Arrow table.  A single Parquet file is
read with ``pyarrow.parquet`` alone (``pyarrow.dataset`` loads only for directories); page
checksums are verified when the file has them.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa

from calcheck._hooks import silenced_unraisable
from calcheck.errors import InputError
from calcheck.tuning import DEFAULT, Tuning

FORMATS = ("csv", "parquet")
PARQUET_MAGIC = b"PAR1"
GZIP_MAGIC = b"\x1f\x8b"
# compressed or non-tabular files that would otherwise be parsed as CSV text
OTHER_MAGIC = ((b"\x28\xb5\x2f\xfd", "zstd-compressed"), (b"BZh", "bzip2-compressed"),
               (b"\xfd7zXZ\x00", "xz-compressed"), (b"PK\x03\x04", "a zip archive"))


@dataclass(frozen=True)
class Source:
    """An input opened for reading: where it came from and how to read it."""

    name: str                     # what messages call it ("preds.csv", "<stdin>", "<DataFrame>")
    fmt: str                      # "csv", "parquet" or "arrow" (a table in memory)
    path: str | None = None       # filesystem path (None for stdin and tables)
    data: bytes | None = None     # the bytes of stdin
    compression: str | None = None
    table: Any = None             # the Arrow table of an in-memory source
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    notes: list[str] = field(default_factory=list, compare=False, repr=False)  # how it was read

    @property
    def directory(self) -> bool:
        return self.path is not None and Path(self.path).is_dir()


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# what Arrow says when the machine, not the file, is exhausted
EXHAUSTED = ("Failed to launch worker thread", "Resource temporarily unavailable",
             "Cannot allocate memory", "std::bad_alloc", "Out of memory")


def raise_if_exhausted(exc: BaseException, name: str) -> None:
    """A read that failed because memory (or the threads it needs) ran out is a MemoryError —
    which the command line reports as running out of memory, with the advice to stream —
    not an unreadable file."""
    if isinstance(exc, (MemoryError, pa.ArrowMemoryError)) or \
            any(m in str(exc) for m in EXHAUSTED):
        raise MemoryError(f"{name}: {one_line(exc)}") from None


def _sniff(head: bytes) -> str | None:
    """What a non-tabular file is, from its first bytes (None: readable as CSV or Parquet)."""
    for magic, what in OTHER_MAGIC:
        if head.startswith(magic):
            return what
    if head[:2] == GZIP_MAGIC:
        try:
            inner = gzip.GzipFile(fileobj=io.BytesIO(head)).read(2)
        except (OSError, EOFError, zlib.error):
            inner = b""
        if inner == GZIP_MAGIC:
            return "gzip-compressed twice"
        return None
    if head.lstrip()[:1] in (b"{", b"["):
        return "JSON"
    return None


def _refuse_other(name: str, head: bytes) -> None:
    what = _sniff(head)
    if what is not None:
        hint = ("decompress it first (zstd -d, bunzip2, unxz, unzip, or gunzip once more)"
                if what != "JSON" else "calcheck reads CSV (optionally gzipped) or Parquet")
        raise InputError(f"{name}: this looks like {what}, not a CSV or Parquet file; {hint}")


MAX_STDIN = 4 << 30          # bytes read from stdin at most (it is held in memory)
STDIN_CHUNK = 1 << 20


def read_stdin(stream: BinaryIO, input_format: str | None) -> bytes:
    """All of stdin, refusing early: binary data that is not Parquet or gzip (NUL bytes in the
    first chunk of a CSV) and more than :data:`MAX_STDIN` bytes are errors before the rest is
    read."""
    first = stream.read(STDIN_CHUNK)
    if not first:
        return b""
    binary = first[:4] == PARQUET_MAGIC or first[:2] == GZIP_MAGIC or input_format == "parquet"
    if not binary:
        _refuse_other("<stdin>", first[:4096])
        if b"\x00" in first:
            raise InputError("<stdin>: binary data (NUL bytes), not CSV text; pipe a CSV or "
                             "Parquet file")
    parts, size = [first], len(first)
    while True:
        chunk = stream.read(STDIN_CHUNK)
        if not chunk:
            return b"".join(parts)
        size += len(chunk)
        if size > MAX_STDIN:
            raise InputError(f"<stdin>: more than {MAX_STDIN >> 30} GiB on stdin, which is held "
                             "in memory; save it to a file (Parquet reads with --engine stream "
                             "in bounded memory)")
        parts.append(chunk)


def open_source(path: str, input_format: str | None = None, *,
                stdin: BinaryIO | None = None) -> Source:
    """Resolve ``path`` (a file, a directory of Parquet parts, or ``-`` for stdin)."""
    if input_format is not None and input_format not in FORMATS:
        raise InputError(f"unknown --input-format {input_format!r}; use one of "
                         f"{', '.join(FORMATS)}")
    if path == "-":
        raw = read_stdin(stdin or sys.stdin.buffer, input_format)
        if not raw:
            raise InputError("<stdin>: no input (empty)")
        fmt = input_format or ("parquet" if raw[:4] == PARQUET_MAGIC else "csv")
        if fmt == "csv":
            _refuse_other("<stdin>", raw[:4096])
        comp = "gzip" if raw[:2] == GZIP_MAGIC else None
        return Source("<stdin>", fmt, data=raw, compression=comp)
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file or directory")
    if p.is_dir():
        return Source(path, input_format or "parquet", path=path)
    if not p.is_file():
        raise InputError(f"{path}: not a regular file or directory")
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({one_line(exc)})") from None
    if size == 0:
        raise InputError(f"{path}: file is empty")
    if input_format:
        fmt = input_format
    elif head[:4] == PARQUET_MAGIC or p.suffix.lower() in (".parquet", ".pq"):
        fmt = "parquet"
    else:
        fmt = "csv"
    if fmt == "csv":
        _refuse_other(path, head)
    comp = "gzip" if head[:2] == GZIP_MAGIC else None
    return Source(path, fmt, path=path, compression=comp)


def from_table(table: Any, name: str) -> Source:
    """A source over an in-memory table: a pyarrow Table, a pandas DataFrame, or anything with
    ``to_arrow()`` (polars) or the Arrow C stream interface."""
    if not isinstance(table, pa.Table):
        if hasattr(table, "to_arrow"):
            table = table.to_arrow()
        elif type(table).__module__.startswith("pandas"):
            try:
                table = pa.Table.from_pandas(table, preserve_index=False)
            except (pa.ArrowException, ValueError, TypeError) as exc:
                raise InputError(f"{name}: cannot convert the DataFrame to Arrow "
                                 f"({one_line(exc)})") from None
        elif hasattr(table, "__arrow_c_stream__"):
            table = pa.table(table)
        else:
            raise InputError(f"cannot read a {type(table).__name__}; give a path, a pandas or "
                             "polars DataFrame, a pyarrow Table or calcheck.Predictions")
    _check_unique(name, [str(c) for c in table.column_names])
    return Source(name, "arrow", table=table)


def _check_unique(name: str, names: list[str]) -> None:
    if len(set(names)) != len(names):
        dup = sorted({c for c in names if names.count(c) > 1})
        raise InputError(f"{name}: duplicate column names: {', '.join(map(repr, dup))}")


# ---------------------------------------------------------------------------------------------
# Parquet


def parquet_file(src: Source) -> Any:
    """``pyarrow.parquet.ParquetFile`` of a single-file or stdin source (page checksums
    verified when present).  Not memory-mapped: that reads 3·10^7 rows in 0.11 s instead of
    0.14–0.17 s, but the file's pages then count in the process's resident memory (a
    `-m ece` run at 3·10^7 rows: 0.44 → 0.66 GB peak)."""
    import pyarrow.parquet as pq

    if "pqfile" not in src.cache:
        try:
            target: Any = io.BytesIO(src.data) if src.data is not None else src.path
            src.cache["pqfile"] = pq.ParquetFile(target, page_checksum_verification=True)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise InputError(f"{src.name}: not a readable Parquet file ({one_line(exc)})") \
                from None
    return src.cache["pqfile"]


PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")


def _parquet_parts(root: str) -> tuple[list[str], list[str]]:
    """The Parquet parts under ``root`` (by suffix, or by the ``PAR1`` magic for parts without
    one) and the other files, which are ignored; names starting with ``.`` or ``_`` (``_SUCCESS``,
    ``.crc``) are skipped as Spark and pyarrow do."""
    parts: list[str] = []
    others: list[str] = []
    for path in sorted(Path(root).rglob("*")):
        rel = path.relative_to(root)
        if any(p.startswith((".", "_")) for p in rel.parts) or not path.is_file():
            continue
        if path.suffix.lower() in PARQUET_SUFFIXES:
            parts.append(str(path))
            continue
        try:
            with open(path, "rb") as fh:
                magic = fh.read(4)
        except OSError:
            magic = b""
        (parts if magic == PARQUET_MAGIC else others).append(str(path))
    return parts, others


def parquet_format() -> Any:
    """The Parquet format of every dataset calcheck scans: page checksums verified, no
    pre-buffering (pyarrow's default reads whole row groups ahead: ~0.3 GB more at the peak of
    a local scan, for no speed on a local disk) and column chunks read through 1 MiB buffered
    streams rather than whole (~0.2 GB less on a file of one huge row group)."""
    import pyarrow.dataset as pads

    return pads.ParquetFileFormat(default_fragment_scan_options=pads.ParquetFragmentScanOptions(
        page_checksum_verification=True, pre_buffer=False, use_buffered_stream=True,
        buffer_size=1 << 20))


def parquet_parts(src: Source) -> list[str]:
    """The Parquet parts of a directory source, in path order; other files in it (a README,
    checksums) are ignored with a note, and a directory without parts is an input error."""
    if "parts" not in src.cache:
        assert src.path is not None
        parts, others = _parquet_parts(src.path)
        if not parts:
            found = f" (it has {len(others)} other file(s))" if others else ""
            raise InputError(f"{src.name}: the directory holds no Parquet files{found}")
        if others:
            shown = ", ".join(str(Path(o).relative_to(src.path)) for o in others[:3])
            more = f" and {len(others) - 3} more" if len(others) > 3 else ""
            src.notes.append(f"{src.name}: ignored {len(others)} file(s) that are "
                             f"not Parquet: {shown}{more}")
        src.cache["parts"] = parts
    return list(src.cache["parts"])


def source_rows(src: Source) -> int | None:
    """The rows a Parquet source or in-memory table holds (Parquet footers: nothing is read),
    before any filter; None for other inputs."""
    if src.table is not None:
        return int(src.table.num_rows)
    if src.fmt != "parquet" or src.path is None:
        return None
    import pyarrow.parquet as pq

    paths = parquet_parts(src) if os.path.isdir(src.path) else [src.path]
    return sum(int(pq.ParquetFile(p).metadata.num_rows) for p in paths)


def hive_partitioned(src: Source) -> bool:
    """Whether some part of a directory source lies in a ``key=value`` folder (a hive
    partition, whose key becomes a column)."""
    assert src.path is not None
    return any("=" in folder for p in parquet_parts(src)
               for folder in Path(p).relative_to(src.path).parts[:-1])


def parquet_dataset(src: Source) -> Any:
    """The ``pyarrow.dataset`` of a directory of Parquet parts (hive partitions included)."""
    import pyarrow.dataset as pads

    if "dataset" not in src.cache:
        parts = parquet_parts(src)
        try:
            ds = pads.dataset(parts, format=parquet_format(), partitioning="hive",
                              partition_base_dir=src.path)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise InputError(f"{src.name}: not a readable Parquet file or directory "
                             f"({one_line(exc)})") from None
        src.cache["dataset"] = ds
    return src.cache["dataset"]


def check_parts(src: Source, columns: list[str]) -> None:
    """Every part of a Parquet directory has ``columns`` (or has them as hive partition keys):
    a part without one would otherwise read as all-missing values in that column.  Without
    hive partitions the parts' footers are read with ``pyarrow.parquet`` alone."""
    if "parts_checked" in src.cache and set(columns) <= src.cache["parts_checked"]:
        return
    if hive_partitioned(src):
        import pyarrow.dataset as pads

        schemas = []
        for frag in parquet_dataset(src).get_fragments():
            try:
                have = set(frag.physical_schema.names)
            except (pa.ArrowException, OSError) as exc:
                raise InputError(f"{frag.path}: not a readable Parquet file "
                                 f"({one_line(exc)})") from None
            schemas.append((frag.path, have | set(pads.get_partition_keys(
                frag.partition_expression))))
    else:
        import pyarrow.parquet as pq

        schemas = []
        for path in parquet_parts(src):
            try:
                schemas.append((path, set(pq.read_schema(path).names)))
            except (pa.ArrowException, OSError) as exc:
                raise InputError(f"{path}: not a readable Parquet file ({one_line(exc)})") \
                    from None
    for path, have in schemas:
        lacking = [c for c in columns if c not in have]
        if lacking:
            raise InputError(f"{path}: this part of {src.name} has no column "
                             f"{lacking[0]!r} (its columns: {', '.join(sorted(have))})",
                             column=lacking[0])
    src.cache["parts_checked"] = set(columns) | src.cache.get("parts_checked", set())


# ---------------------------------------------------------------------------------------------
# CSV


def _csv_stream(src: Source) -> Any:
    if src.data is not None:
        buf: Any = pa.BufferReader(src.data)
        return pa.CompressedInputStream(buf, "gzip") if src.compression else buf
    return pa.input_stream(src.path, compression="gzip" if src.compression else None)


def _read_csv(src: Source) -> Any:
    if "csv" not in src.cache:                   # a CSV is parsed once per run
        src.cache["csv"] = _parse_csv(src)
    return src.cache["csv"]


DELIMITERS = ((";", "semicolons"), ("\t", "tabs"), ("|", "pipes"))


def _other_delimiter(names: list[str]) -> tuple[str, str] | None:
    """A one-column header that holds ``;``, a tab or ``|`` (and no comma): that delimiter."""
    if len(names) == 1:
        for d, what in DELIMITERS:
            if d in names[0]:
                return d, what
    return None


def _utf8_text(src: Source, size: int = 1 << 22) -> bool:
    """The first ``size`` bytes of the (decompressed) CSV decode as UTF-8 with no NUL byte."""
    import codecs

    try:
        head = _csv_stream(src).read(size)
    except (pa.ArrowException, OSError, EOFError, zlib.error):
        return True                                # the parse itself reports it
    try:
        codecs.getincrementaldecoder("utf-8")().decode(bytes(head), final=False)
    except UnicodeDecodeError:
        return False
    return b"\x00" not in bytes(head)


def _parse_csv(src: Source, *, locate: bool = False, delimiter: str = ",") -> Any:
    """Parse the CSV with Arrow's threads; on an error, parse again on one thread with a row
    handler to name the first bad row.  (No Python callback ever runs on Arrow's threads: one
    still running at interpreter exit aborted the process.)  A file whose header holds no comma
    but semicolons, tabs or pipes is parsed again with that delimiter (a note says so)."""
    import pyarrow.csv as pacsv

    bad_rows: list[Any] = []

    def on_invalid(row: Any) -> str:
        bad_rows.append(row)
        return "error"

    parse = pacsv.ParseOptions(delimiter=delimiter,
                               invalid_row_handler=on_invalid if locate else None)
    try:
        # a row the handler cannot decode is reported by the parse error itself
        with silenced_unraisable(locate):
            table = pacsv.read_csv(
                _csv_stream(src), read_options=pacsv.ReadOptions(use_threads=not locate),
                parse_options=parse,
                convert_options=pacsv.ConvertOptions(strings_can_be_null=True))
    except pa.ArrowInvalid as exc:
        msg = str(exc)
        if not locate and "CSV parse error" in msg:
            if not _utf8_text(src):               # the row handler cannot decode such rows
                raise InputError(f"{src.name}: not valid UTF-8 text; is it a binary file? (CSV "
                                 "must be UTF-8; gzip is the only compression read)") from None
            return _parse_csv(src, locate=True, delimiter=delimiter)
        if bad_rows:
            r = bad_rows[0]
            where = f"row {r.number - 1}" if r.number is not None else "a row"
            raise InputError(
                f"{src.name}: {where} has {r.actual_columns} fields, the header has "
                f"{r.expected_columns} (ragged CSV): {r.text[:60]!r}",
                rows=[r.number - 1] if r.number is not None else None) from None
        if "Empty CSV file" in msg:
            size = len(src.data) if src.data is not None else (
                Path(src.path).stat().st_size if src.path else 0)
            if size:
                raise InputError(f"{src.name}: no data rows: {size:,} bytes without a complete "
                                 "line after the header (a header only, or a file without line "
                                 "breaks)") from None
            raise InputError(f"{src.name}: file is empty") from None
        if "utf8" in msg.lower() or "utf-8" in msg.lower():
            raise InputError(f"{src.name}: not valid UTF-8 text; is it a binary file? (CSV must "
                             "be UTF-8; gzip is the only compression read)") from None
        raise InputError(f"{src.name}: cannot parse as CSV ({one_line(exc)})") from None
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(f"{src.name}: cannot read (truncated or corrupt compressed data? "
                         f"{one_line(exc)})") from None
    try:
        names = [str(c) for c in table.column_names]
    except UnicodeDecodeError as exc:
        raise InputError(f"{src.name}: the header is not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} "
                         f"at position {exc.start} of a column name); save the file as UTF-8 "
                         "(CSV must be UTF-8; gzip is the only compression read)") from None
    other = _other_delimiter(names) if delimiter == "," else None
    if other is not None:
        src.notes.append(f"{src.name}: read as a CSV separated by {other[1]} (the header has "
                         "no comma)")
        return _parse_csv(src, locate=locate, delimiter=other[0])
    _check_unique(src.name, names)
    return table


# ---------------------------------------------------------------------------------------------
# reading


def column_names(src: Source) -> list[str]:
    """Column names of the source (a CSV is parsed once and kept)."""
    if src.fmt == "arrow":
        return [str(n) for n in src.table.schema.names]
    if src.fmt == "parquet":
        if src.directory:
            return [str(n) for n in parquet_dataset(src).schema.names]
        names = [str(n) for n in parquet_file(src).schema_arrow.names]
        _check_unique(src.name, names)
        return names
    return [str(c) for c in _read_csv(src).column_names]




def row_group_runs(sizes: list[int], rows: int) -> list[tuple[list[int], int]]:
    """Row groups of ``sizes`` rows in runs read together, in order, each with its rows:
    consecutive groups join a run while it stays within ``rows`` rows, and a larger group is
    a run alone.  Writers differ: pyarrow's groups hold 1Mi rows, DuckDB's 122,880, and a
    read (or a batch) per small group costs its fixed work each time — a 3·10^7-row DuckDB
    file took the default stream 0.25 s more than pyarrow's."""
    out: list[tuple[list[int], int]] = []
    run: list[int] = []
    total = 0
    for g, m in enumerate(sizes):
        if run and total + m > rows:
            out.append((run, total))
            run, total = [], 0
        run.append(g)
        total += m
    if run:
        out.append((run, total))
    return out


def read_columns(src: Source, wanted: list[str], flt: Any = None,
                 filter_columns: list[str] | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 consume: Callable[[dict[str, Any], int], None] | None = None,
                 tuning: Tuning = DEFAULT) -> Any:
    """The columns ``wanted`` as an Arrow table, filtered by the pyarrow expression ``flt``
    over ``filter_columns`` (pushed down to the scan of a Parquet directory).  ``progress``
    (rows read, rows in all) is told how a Parquet read goes; ``consume`` (see
    :func:`_read_steps`) sees the rows of a large Parquet file as they are read, when it is
    read in steps (a file of more than ``tuning.read_step_values`` values) and without a
    filter."""
    cols = list(dict.fromkeys(wanted))
    read = list(dict.fromkeys([*cols, *(filter_columns or [])])) if flt is not None else cols
    try:
        if src.fmt == "parquet" and src.directory:
            check_parts(src, read)
            ds = parquet_dataset(src)
            if progress is None:
                return ds.to_table(columns=cols, filter=flt)
            return _read_reported(ds, cols, flt, progress)
        if src.fmt == "parquet":
            pf = parquet_file(src)
            meta = pf.metadata
            if meta.num_rows * len(read) <= tuning.read_step_values or \
                    meta.num_row_groups < 2:
                table = pf.read(columns=read)
            else:
                table = _read_steps(pf, read, progress, consume if flt is None else None,
                                    tuning)
        elif src.fmt == "arrow":
            table = src.table.select(read)
        else:
            table = _read_csv(src).select(read)
        return table if flt is None else table.filter(flt).select(cols)
    except (pa.ArrowException, OSError) as exc:
        raise_if_exhausted(exc, src.name)
        what = "apply --where" if flt is not None and isinstance(
            exc, (pa.ArrowNotImplementedError, pa.ArrowTypeError)) else "read the data"
        raise InputError(f"{src.name}: cannot {what} ({one_line(exc)})") from None


def _read_steps(pf: Any, columns: list[str],
                progress: Callable[[int, int], None] | None,
                consume: Callable[[dict[str, Any], int], None] | None = None,
                tuning: Tuning = DEFAULT) -> Any:
    """A Parquet file's ``columns`` read one row group at a time (each multi-threaded, as one
    read is; small consecutive groups together, up to ``tuning.read_run_values`` values:
    :func:`row_group_runs`), reporting the rows read.  Numeric columns without nulls are
    copied into one numpy array each as they come — the table holds those arrays, so the
    columns cost their own size once: at 3·10^7 rows 0.4 s and 0.43 GB against 1.3 s and
    0.87 GB for one read (whose chunks the engine then joins into a copy); 1,000 probability
    columns of 10^5 rows in 5 row groups: 0.8 GB of buffers against 1.7 GB.  Other columns
    keep Arrow's chunks.  The same table either way.  The next read decodes in a background
    thread while this one is copied (3·10^7 rows: ~0.19 s against ~0.24 s) when reads are
    small enough (<= ``tuning.prefetch_values`` values on average) that holding two more costs little.
    ``consume(arrays, rows)`` is called after each read with the numpy arrays of the columns
    copied so far (column → array of every row) and the rows they hold, so a caller can
    compute on them while the next read decodes."""
    import numpy as np

    from calcheck._prefetch import prefetch
    from calcheck.io.arrays import NUMPY_TYPES, arrow_of, numpy_of

    meta = pf.metadata
    total, done = meta.num_rows, 0
    bufs: dict[str, Any] = {}                    # column → numpy array of every row
    chunks: dict[str, list[Any]] = {c: [] for c in columns}
    types: dict[str, Any] = {}
    sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    runs = [groups for groups, _ in row_group_runs(
        sizes, max(1, tuning.read_run_values // len(columns)))]
    groups: Any = (pf.read_row_groups(run, columns=columns) for run in runs)
    if total * len(columns) <= tuning.prefetch_values * len(runs):
        groups = prefetch(groups, depth=1)       # up to two reads ahead of this one
    for g, tb in enumerate(groups):
        rows = tb.num_rows
        for name in columns:
            col = tb.column(name)
            types.setdefault(name, col.type)
            dt = NUMPY_TYPES.get(col.type)
            fast = dt is not None and col.null_count == 0 and col.type == types[name]
            if fast and (name in bufs or g == 0):
                if name not in bufs:
                    bufs[name] = np.empty(total, dtype=dt)
                buf = bufs[name]
                at = done
                for ch in col.chunks:
                    np.copyto(buf[at:at + len(ch)], numpy_of(ch))
                    at += len(ch)
                continue
            if name in bufs:                     # numeric so far: its rows become a chunk
                chunks[name].append(arrow_of(bufs.pop(name)[:done], types[name]))
            chunks[name].extend(col.chunks)
        done += rows
        if consume is not None:
            consume(bufs, done)
        if progress is not None:
            progress(done, total)
    out = {}
    for name in columns:
        if name in bufs:
            out[name] = pa.chunked_array([arrow_of(bufs[name][:done], types[name])])
        else:
            out[name] = pa.chunked_array(chunks[name], type=types.get(name))
    return pa.Table.from_arrays(list(out.values()), names=list(out))


def _read_reported(ds: Any, columns: list[str], flt: Any,
                   progress: Callable[[int, int], None]) -> Any:
    """``ds.to_table(columns, filter)`` batch by batch (the same rows in the same order),
    reporting the rows scanned against the rows the parts' footers hold."""
    total = 0
    for fr in ds.get_fragments():
        meta = getattr(fr, "metadata", None)
        total += int(meta.num_rows) if meta is not None else 0
    scanner = ds.scanner(columns=columns, filter=flt)
    batches, done = [], 0
    for batch in scanner.to_batches():
        batches.append(batch)
        done += batch.num_rows
        progress(done, max(total, done))
    return pa.Table.from_batches(batches, schema=scanner.projected_schema)


def to_expression(flt: Any) -> Any:
    """A ``--where`` filter (:func:`calcheck.where.parse_where`) as one pyarrow compute
    expression, which Parquet dataset scans push down and ``Table.filter`` applies."""
    import pyarrow.compute as pc

    from calcheck.where import OPS, BoolOp, Condition, InSet, IsNull, Not

    def build(node: Any) -> Any:
        if isinstance(node, Condition):
            return getattr(pc.field(node.column), OPS[node.op])(node.value)
        if isinstance(node, InSet):
            e = pc.field(node.column).isin(list(node.values))
            return ~e if node.negate else e
        if isinstance(node, IsNull):
            e = pc.field(node.column).is_null()
            return ~e if node.negate else e
        if isinstance(node, Not):
            return ~build(node.part)
        assert isinstance(node, BoolOp)
        parts = [build(p) for p in node.parts]
        out = parts[0]
        for p in parts[1:]:
            out = (out & p) if node.op == "and" else (out | p)
        return out

    return build(flt.tree)
