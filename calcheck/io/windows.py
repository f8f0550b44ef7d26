"""Time windows for ``score --time COL --window LENGTH``: calibration over time.

A window length is ``N`` and a unit: ``h`` (hours), ``d`` (days), ``w`` (weeks), ``mo``
(months); ``7d`` is one week.  Windows are aligned to the calendar of ``--tz`` (default UTC):
an hour window starts on the hour, a day window at local midnight, a week window on Monday at
midnight (ISO weeks), a month window on the 1st at midnight.  Multiples count from the Unix
epoch in that calendar (``6h``: 00:00, 06:00, 12:00, 18:00; ``3mo``: quarters from January;
``2d``: every other day from 1970-01-01).  Daylight-saving changes make a local day 23 or 25
hours long: windows follow the local calendar, not fixed durations.

A row's window is the one holding its timestamp (``start <= t < end``).  Timestamps are read
from timestamp or date columns (a timestamp without a zone is taken as UTC) or from ISO 8601
text (``2026-01-05T10:00:00Z``, ``2026-01-05 10:00:00+01:00``, ``2026-01-05``).  A missing or
unreadable timestamp is an error naming its row.  Every window from the first row's to the
last row's is reported, empty ones with n = 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from calcheck.errors import InputError, UsageError

UNITS = {"h": "hour", "d": "day", "w": "week", "mo": "month"}
MAX_WINDOWS = 100_000


@dataclass(frozen=True)
class Window:
    """A window length (``count`` × ``unit``) in the calendar of ``tz``."""

    count: int
    unit: str              # hour, day, week, month
    tz: str = "UTC"
    text: str = ""

    def _floor_args(self) -> dict[str, Any]:
        return {"multiple": self.count, "unit": self.unit, "week_starts_monday": True}

    def starts(self, ns: np.ndarray) -> np.ndarray:
        """The start (ns since the epoch, UTC) of each timestamp's window."""
        import pyarrow as pa
        import pyarrow.compute as pc

        ts = pa.array(np.asarray(ns, dtype=np.int64), type=pa.timestamp("ns", tz=self.tz))
        out = pc.floor_temporal(ts, **self._floor_args())
        return np.asarray(out.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)

    def following(self, start_ns: int) -> int:
        """The start of the window after the one starting at ``start_ns``."""
        import pyarrow as pa
        import pyarrow.compute as pc

        ts = pa.array([start_ns], type=pa.timestamp("ns", tz=self.tz))
        nxt = pc.ceil_temporal(ts, ceil_is_strictly_greater=True, **self._floor_args())
        return int(nxt.cast(pa.int64())[0].as_py())

    def span(self, first_ns: int, last_ns: int, limit: int = MAX_WINDOWS) -> list[tuple[int, int]]:
        """Every window (start, end) from the one holding ``first_ns`` to the one holding
        ``last_ns``."""
        start = int(self.starts(np.array([first_ns]))[0])
        out = []
        while start <= last_ns:
            end = self.following(start)
            out.append((start, end))
            if len(out) > limit:
                raise UsageError(f"--window {self.text}: more than {limit:,} windows between "
                                 "the first and the last timestamp; choose a longer window")
            start = end
        return out

    def iso(self, ns: int) -> str:
        """An instant as ISO 8601 in the window's zone, with its offset."""
        from zoneinfo import ZoneInfo

        sec, rem = divmod(int(ns), 1_000_000_000)
        t = datetime.fromtimestamp(sec, tz=timezone.utc).astimezone(ZoneInfo(self.tz))
        text = t.isoformat()
        return text if rem == 0 else text[:19] + f".{rem:09d}" + text[19:]


def check_zone(tz: str, label: str = "--tz") -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"{label} {tz!r}: not a known time zone; use an IANA name such as "
                         "UTC, Europe/Paris or America/New_York") from None


def parse_window(text: str, tz: str = "UTC", label: str = "--window") -> Window:
    m = re.fullmatch(r"\s*(\d+)\s*(h|d|w|mo)\s*", text.lower())
    if m is None:
        raise UsageError(f"{label} {text!r}: expected a length such as 1h, 6h, 1d, 7d, 1w, "
                         "1mo or 3mo")
    count, unit = int(m.group(1)), m.group(2)
    if count < 1:
        raise UsageError(f"{label} {text!r}: the length must be at least 1")
    if unit == "d" and count % 7 == 0:
        count, unit = count // 7, "w"
    return Window(count, UNITS[unit], tz, text.strip())


def timestamps(column: Any, name: str, source: str, row_offset: int = 0) -> np.ndarray:
    """A column of timestamps (pyarrow array or chunked array, or numpy values) as int64 ns
    since the epoch, UTC; a missing or unreadable value is an error naming its row."""
    import pyarrow as pa

    arr = column
    if isinstance(arr, np.ndarray):
        arr = pa.array(arr.tolist() if arr.dtype == object else arr, from_pandas=True)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type

    def missing(a: Any) -> None:
        if a.null_count:
            row = int(np.flatnonzero(a.is_null().to_numpy(zero_copy_only=False))[0])
            raise InputError(f"{source}: --time {name}: row {row_offset + row + 1} has no "
                             "timestamp", column=name)

    if pa.types.is_timestamp(t):
        missing(arr)
        out = arr.cast(pa.timestamp("ns", tz=t.tz) if t.tz else pa.timestamp("ns"))
    elif pa.types.is_date(t):
        missing(arr)
        out = arr.cast(pa.timestamp("ns"))
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        missing(arr)
        out = _parse_text(arr, name, source, row_offset)
    else:
        raise InputError(f"{source}: --time {name}: a {t} column is not a timestamp; give a "
                         "timestamp or date column or ISO 8601 text (epoch numbers are "
                         "ambiguous: convert them first)", column=name)
    return np.asarray(out.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def _parse_text(arr: Any, name: str, source: str, row_offset: int) -> Any:
    """ISO 8601 text as timestamps: with offsets (``Z``, ``+01:00``) or all without (UTC)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = arr
    for kind in (pa.timestamp("ns", tz="UTC"), pa.timestamp("ns")):
        try:
            return pc.cast(text, kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    # the first value that neither form reads (or that mixes the forms)
    values = arr.to_pylist()
    first = None
    for i, v in enumerate(values):
        try:
            datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            first = i
            break
    where = f"row {row_offset + first + 1} ({values[first]!r})" if first is not None else \
        "its values mix timestamps with and without a zone offset"
    raise InputError(f"{source}: --time {name}: cannot read {where} as an ISO 8601 "
                     "timestamp", column=name)


class WindowColumn(str):
    """The ``--time`` column name carrying its :class:`Window`: passed where the engines take
    a ``--by`` column, it groups rows by window (keys: each window's ISO start)."""

    window: Window

    def __new__(cls, column: str, window: Window) -> WindowColumn:
        obj = str.__new__(cls, column)
        obj.window = window
        return obj

    def __reduce__(self) -> tuple[Any, ...]:            # pickled to Dask workers
        return (WindowColumn, (str(self), self.window))


def window_keys(values: Any, column: WindowColumn, source: str,
                row_offset: int = 0) -> tuple[list[str | None], np.ndarray]:
    """(the windows present, as ISO starts; the window index of every row) — the shape of
    the engines' ``--by`` keys."""
    ns = timestamps(values, str(column), source, row_offset)
    starts = column.window.starts(ns)
    uniq, inv = np.unique(starts, return_inverse=True)
    return [column.window.iso(int(u)) for u in uniq], inv.astype(np.int64)


def start_ns(iso: str) -> int:
    """An ISO start back to ns since the epoch (whole seconds)."""
    return int(datetime.fromisoformat(iso).timestamp()) * 1_000_000_000


def assemble(window: Window, groups: dict[str | None, Any], section: str = "metrics"
             ) -> list[dict[str, Any]]:
    """The report's ``windows``: every window from the first to the last one with rows, in
    time order, ``{start, end, n, flagged, <section>}`` (``metrics`` of ``score``, ``tests``
    of ``test``; empty windows with n = 0 and an empty section)."""
    present = {start_ns(k): g for k, g in groups.items() if k is not None}
    if not present:
        return []
    out = []
    for a, b in window.span(min(present), max(present)):
        g = present.get(a)
        entry: dict[str, Any] = {"start": window.iso(a), "end": window.iso(b)}
        if g is None:
            entry.update({"n": 0, "flagged": True, section: {}})
        else:
            entry.update(g)
        out.append(entry)
    return out
